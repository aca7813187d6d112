/*
 * Redis store backend: the link to Redis (see store_redis.c for the
 * model).  Parses the url; connects the command and subscriber
 * connections, and a short-lived one to ask a Sentinel where the master
 * is; runs their handshake (AUTH, SELECT, ROLE, SCRIPT LOAD); sends
 * commands, again as EVAL after NOSCRIPT; subscribes and unsubscribes;
 * pings synchronously for start-up checks.  This file keeps no session's
 * state: replies go to rs_reply() and messages to rs_on_sub(), a failed
 * link to rs_link_down() and a finished handshake to rs_link_up(), all in
 * store_redis.c.
 */
#include <sys/types.h>
#include <sys/queue.h>
#include <sys/time.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"

#include "store_redis.h"

/* --- small helpers --- */

/* Decimal digits p[0..len) into *out; -1 if none, other bytes, overflow. */
int
rs_u64(const char *p, size_t len, uint64_t *out)
{
	uint64_t	 v = 0;
	size_t		 i;
	unsigned	 d;

	if (len == 0 || len > 20)
		return -1;
	for (i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		d = (unsigned)(p[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* The seq of a log entry id "<seq>-<n>". */
int
rs_idseq(const char *p, size_t len, uint64_t *seq)
{
	const char	*dash;

	if ((dash = memchr(p, '-', len)) == NULL)
		return -1;
	return rs_u64(p, (size_t)(dash - p), seq);
}

int
rs_isstr(const redisReply *r)
{
	return r != NULL && r->type == REDIS_REPLY_STRING;
}

int
rs_replyu64(const redisReply *r, uint64_t *out)
{
	if (rs_isstr(r))
		return rs_u64(r->str, r->len, out);
	if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer >= 0) {
		*out = (uint64_t)r->integer;
		return 0;
	}
	return -1;
}

/* A reply's error text for a log line, or why there is none. */
const char *
rs_errstr(const redisReply *r)
{
	if (r == NULL)
		return "connection lost";
	if (r->type == REDIS_REPLY_ERROR)
		return r->str;
	return "unexpected reply";
}

void
rs_args_init(struct rargs *a, int cap, int numcap)
{
	memset(a, 0, offsetof(struct rargs, iv));
	if (cap <= RS_ARGS_INLINE) {
		a->v = a->iv;
		a->len = a->ilen;
	} else {
		a->v = calloc((size_t)cap, sizeof(*a->v));
		a->len = calloc((size_t)cap, sizeof(*a->len));
		if (a->v == NULL || a->len == NULL)
			a->oom = 1;
	}
	if (numcap <= 8)
		a->num = a->inum;
	else if ((a->num = malloc((size_t)numcap * RS_NUMLEN)) == NULL)
		a->oom = 1;
	a->cap = cap;
	a->numcap = numcap;
}

void
rs_args_free(struct rargs *a)
{
	if (a->v != a->iv)
		free(a->v);
	if (a->len != a->ilen)
		free(a->len);
	if (a->num != a->inum)
		free(a->num);
}

void
rs_args_add(struct rargs *a, const void *p, size_t len)
{
	if (a->oom || a->n >= a->cap) {
		a->oom = 1;
		return;
	}
	a->v[a->n] = p;
	a->len[a->n++] = len;
}

void
rs_args_str(struct rargs *a, const char *s)
{
	rs_args_add(a, s, strlen(s));
}

/*
 * v in decimal at p (RS_NUMLEN bytes at least, not terminated); its
 * length.  A batch formats three numbers a record: snprintf was a tenth
 * of the owner's CPU per append.
 */
static size_t
rs_utoa(char *p, uint64_t v)
{
	char	 t[20];
	size_t	 n = 0, i;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		p[i] = t[n - 1 - i];
	return n;
}

/* A number with suffix sfx (at most 2 bytes) as the next argument. */
static void
rs_args_num(struct rargs *a, uint64_t v, const char *sfx)
{
	char	*p;
	size_t	 n, sl = strlen(sfx);

	if (a->oom || a->nnum >= a->numcap) {
		a->oom = 1;
		return;
	}
	p = a->num + (size_t)a->nnum++ * RS_NUMLEN;
	n = rs_utoa(p, v);
	memcpy(p + n, sfx, sl);
	rs_args_add(a, p, n + sl);
}

void
rs_args_u64(struct rargs *a, uint64_t v)
{
	rs_args_num(a, v, "");
}

void
rs_args_id(struct rargs *a, uint64_t seq)
{
	rs_args_num(a, seq, "-0");
}

/* "EVALSHA <sha> <nkeys>" */
void
rs_args_script(struct rargs *a, struct rstore *st, int script, int nkeys)
{
	rs_args_str(a, "EVALSHA");
	rs_args_add(a, st->sha[script], 40);
	rs_args_u64(a, (uint64_t)nkeys);
}

/* --- url --- */

static int
rs_urlerr(char *err, size_t errlen, int sentinel, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
rs_urlerr(char *err, size_t errlen, int sentinel, const char *fmt, ...)
{
	char	 msg[200];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Never echo the url: it may hold the password. */
	snprintf(err, errlen, "store: %s url: %s (expected %s)",
	    sentinel ? "sentinel" : "redis", msg, sentinel ?
	    "sentinel://[:password@]HOST:PORT[,HOST:PORT...]/MASTER" :
	    "redis://[:password@]HOST:PORT[/DB]");
	errno = EINVAL;
	return -1;
}

static int
rs_parse_hostport(const char *p, size_t len, struct rhost *h, int sentinel,
    char *err, size_t errlen)
{
	const char	*host, *colon, *rb;
	size_t		 hl, i;
	uint64_t	 port;

	if (len == 0)
		return rs_urlerr(err, errlen, sentinel, "empty host");
	if (p[0] == '[') {
		if ((rb = memchr(p, ']', len)) == NULL)
			return rs_urlerr(err, errlen, sentinel,
			    "unterminated [IPv6 address]");
		host = p + 1;
		hl = (size_t)(rb - host);
		colon = rb + 1;
		if (colon == p + len || *colon != ':')
			return rs_urlerr(err, errlen, sentinel,
			    "missing :PORT after the host");
		for (i = 0; i < hl; i++)
			if (util_hexval(host[i]) == -1 && host[i] != ':' &&
			    host[i] != '.')
				return rs_urlerr(err, errlen, sentinel,
				    "bad IPv6 address");
	} else {
		if ((colon = memchr(p, ':', len)) == NULL)
			return rs_urlerr(err, errlen, sentinel,
			    "missing :PORT after host \"%.*s\"",
			    (int)(len > 64 ? 64 : len), p);
		if (memchr(colon + 1, ':', len - (size_t)(colon + 1 - p)))
			return rs_urlerr(err, errlen, sentinel,
			    "IPv6 addresses go in brackets");
		host = p;
		hl = (size_t)(colon - p);
		for (i = 0; i < hl; i++) {
			if (!((host[i] >= 'a' && host[i] <= 'z') ||
			    (host[i] >= 'A' && host[i] <= 'Z') ||
			    (host[i] >= '0' && host[i] <= '9') ||
			    host[i] == '.' || host[i] == '-' ||
			    host[i] == '_'))
				return rs_urlerr(err, errlen, sentinel,
				    "bad character in host \"%.*s\"",
				    (int)(hl > 64 ? 64 : hl), host);
		}
	}
	if (hl == 0)
		return rs_urlerr(err, errlen, sentinel, "empty host");
	if (hl > RS_HOST_MAX)
		return rs_urlerr(err, errlen, sentinel, "host name too long");
	len -= (size_t)(colon + 1 - p);
	if (rs_u64(colon + 1, len, &port) == -1 || port == 0 || port > 65535)
		return rs_urlerr(err, errlen, sentinel,
		    "port \"%.*s\" is not a number from 1 to 65535",
		    (int)(len > 16 ? 16 : len), colon + 1);
	memcpy(h->host, host, hl);
	h->host[hl] = '\0';
	h->port = (int)port;
	return 0;
}

/*
 * redis://[:password@]HOST:PORT[/DB] or
 * sentinel://[:password@]HOST:PORT[,HOST:PORT...]/MASTER.  The password
 * may be %-encoded (an '@' or '/' in it must be).
 */
int
rs_parse_url(struct rstore *st, const char *url, int sentinel, char *err,
    size_t errlen)
{
	const char	*scheme = sentinel ? "sentinel://" : "redis://";
	const char	*p, *at, *slash, *hend, *q, *comma;
	char		*pw;
	size_t		 i, n, plen;
	uint64_t	 db;
	int		 hi, lo;

	n = strlen(scheme);
	if (strncmp(url, scheme, n) != 0)
		return rs_urlerr(err, errlen, sentinel, "it must start with %s",
		    scheme);
	p = url + n;
	if (strpbrk(p, "?#") != NULL)
		return rs_urlerr(err, errlen, sentinel,
		    "no query or fragment allowed");
	if ((at = strrchr(p, '@')) != NULL) {
		if (p[0] != ':')
			return rs_urlerr(err, errlen, sentinel,
			    "user names are not supported, write "
			    ":password@");
		plen = (size_t)(at - p - 1);
		if (plen == 0)
			return rs_urlerr(err, errlen, sentinel,
			    "empty password");
		if (plen > RS_PASS_MAX)
			return rs_urlerr(err, errlen, sentinel,
			    "password too long");
		if ((pw = malloc(plen + 1)) == NULL) {
			snprintf(err, errlen, "store: %s", strerror(errno));
			return -1;
		}
		for (i = 0, q = p + 1; q < at; q++) {
			if (*q == '%') {
				if (at - q < 3 ||
				    (hi = util_hexval(q[1])) == -1 ||
				    (lo = util_hexval(q[2])) == -1 ||
				    hi * 16 + lo == 0) {
					explicit_bzero(pw, plen + 1);
					free(pw);
					return rs_urlerr(err, errlen, sentinel,
					    "bad %%-escape in the password");
				}
				pw[i++] = (char)(hi * 16 + lo);
				q += 2;
			} else
				pw[i++] = *q;
		}
		pw[i] = '\0';
		st->pass = pw;
		p = at + 1;
	}
	slash = strchr(p, '/');
	hend = slash ? slash : p + strlen(p);
	if (hend == p)
		return rs_urlerr(err, errlen, sentinel, "missing HOST:PORT");
	st->nhosts = 0;
	for (q = p; q < hend; q = comma + 1) {
		if ((comma = memchr(q, ',', (size_t)(hend - q))) == NULL)
			comma = hend;
		if (st->nhosts > 0 && !sentinel)
			return rs_urlerr(err, errlen, sentinel,
			    "only one HOST:PORT (use sentinel:// for several)");
		if (st->nhosts == RS_HOSTS_MAX)
			return rs_urlerr(err, errlen, sentinel,
			    "more than %d sentinels", RS_HOSTS_MAX);
		if (rs_parse_hostport(q, (size_t)(comma - q),
		    &st->hosts[st->nhosts], sentinel, err, errlen) == -1)
			return -1;
		st->nhosts++;
		if (comma == hend)
			break;
	}
	if (sentinel) {
		if (slash == NULL || slash[1] == '\0')
			return rs_urlerr(err, errlen, sentinel,
			    "missing /MASTER name");
		n = strlen(slash + 1);
		if (n > RS_NAME_MAX)
			return rs_urlerr(err, errlen, sentinel,
			    "master name too long");
		for (i = 0; i < n; i++) {
			char c = slash[1 + i];

			if (!((c >= 'a' && c <= 'z') ||
			    (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			    c == '-'))
				return rs_urlerr(err, errlen, sentinel,
				    "bad character in master name");
		}
		memcpy(st->name, slash + 1, n + 1);
	} else if (slash != NULL) {
		n = strlen(slash + 1);
		if (rs_u64(slash + 1, n, &db) == -1 || db > RS_DB_MAX)
			return rs_urlerr(err, errlen, sentinel,
			    "database \"%.*s\" is not a number from 0 to %d",
			    (int)(n > 16 ? 16 : n), slash + 1, RS_DB_MAX);
		st->db = (int)db;
	}
	if (st->db != 0)
		snprintf(st->chsuffix, sizeof(st->chsuffix), ":%d", st->db);
	return 0;
}

/* --- connections --- */

static struct rconn *
rs_which(struct rstore *st, const redisAsyncContext *ac)
{
	if (ac == NULL)
		return NULL;
	if (st->cmd.ac == ac)
		return &st->cmd;
	if (st->sub.ac == ac)
		return &st->sub;
	if (st->sen.ac == ac)
		return &st->sen;
	return rs_cl_which(st, ac);
}

/*
 * Lets go of a context.  hiredis calls its pending reply callbacks with
 * NULL (now, or when the callback we are in returns); a connected context
 * then calls rs_on_disconnect(), which drops its reference on the store.
 */
void
rs_drop_conn(struct rstore *st, struct rconn *conn)
{
	redisAsyncContext	*ac;
	int			 was;

	if ((ac = conn->ac) == NULL)
		return;
	conn->ac = NULL;
	was = conn->connected;
	conn->connected = 0;
	redisAsyncFree(ac);
	if (!was)
		rs_store_unref(st);
}

static void	rs_on_connect(const redisAsyncContext *, int);
static void	rs_on_disconnect(const redisAsyncContext *, int);

/* Starts connecting; -1 with a reason in why. */
int
rs_connect(struct rstore *st, struct rconn *conn, const struct rhost *h,
    char *why, size_t whylen)
{
	redisAsyncContext	*ac;

	/* hiredis resolves host names here, blocking: use addresses. */
	if ((ac = redisAsyncConnect(h->host, h->port)) == NULL) {
		snprintf(why, whylen, "%s:%d: out of memory", h->host,
		    h->port);
		return -1;
	}
	if (ac->err) {
		snprintf(why, whylen, "%s:%d: %s", h->host, h->port,
		    ac->errstr);
		redisAsyncFree(ac);
		return -1;
	}
	ac->data = st;
	if (redisLibeventAttach(ac, st->evbase) != REDIS_OK) {
		snprintf(why, whylen, "%s:%d: cannot attach to the event base",
		    h->host, h->port);
		redisAsyncFree(ac);
		return -1;
	}
	redisAsyncSetConnectCallback(ac, rs_on_connect);
	redisAsyncSetDisconnectCallback(ac, rs_on_disconnect);
	conn->ac = ac;
	conn->connected = 0;
	rs_store_ref(st);
	return 0;
}

/*
 * The command a holds in the wire format (RESP arrays of bulk strings,
 * what redisFormatCommandArgv makes) in a malloc'd buffer *out; its
 * length or -1.  Formatted here for the same reason as rs_utoa: a batch
 * has three arguments a record.
 */
static ssize_t
rs_format(const struct rargs *a, char **out)
{
	char	*buf, *p;
	size_t	 len = 1 + 20 + 2;
	int	 i;

	for (i = 0; i < a->n; i++) {
		if (a->len[i] > SIZE_MAX - 25 - len)
			return -1;
		len += 1 + 20 + 2 + a->len[i] + 2;
	}
	if ((buf = malloc(len)) == NULL)
		return -1;
	p = buf;
	*p++ = '*';
	p += rs_utoa(p, (uint64_t)a->n);
	*p++ = '\r';
	*p++ = '\n';
	for (i = 0; i < a->n; i++) {
		*p++ = '$';
		p += rs_utoa(p, a->len[i]);
		*p++ = '\r';
		*p++ = '\n';
		if (a->len[i] > 0)
			memcpy(p, a->v[i], a->len[i]);
		p += a->len[i];
		*p++ = '\r';
		*p++ = '\n';
	}
	*out = buf;
	return p - buf;
}

/* Sends a command; rc is freed on failure.  0 or -1. */
int
rs_send(struct rstore *st, struct rcmd *rc, struct rargs *a)
{
	redisAsyncContext	*ac;
	char			*cmd = NULL;
	ssize_t			 len;

	if (rc->conn == NULL)
		rc->conn = st->cluster ? rs_cl_route(st, rc) : &st->cmd;
	if (rc->conn == NULL)
		goto fail;
	ac = rc->conn->ac;
	/* The seed or sentinel connection is asked while connecting. */
	if (a->oom || ac == NULL || !rc->conn->connected || st->closing ||
	    (st->link != LINK_UP && rc->kind != RC_HS &&
	    rc->conn != &st->sen))
		goto fail;
	if ((len = rs_format(a, &cmd)) < 0) {
		cmd = NULL;
		goto fail;
	}
	if (redisAsyncFormattedCommand(ac, rs_reply, rc, cmd, (size_t)len) !=
	    REDIS_OK)
		goto fail;
	/* Kept for a NOSCRIPT retry (the script cache was flushed), and on
	 * a cluster for an ASK. */
	if (rc->script >= 0 || st->cluster) {
		rc->fmt = cmd;
		rc->fmtlen = (size_t)len;
	} else
		free(cmd);
	rc->sent = util_mono_ms();
	rc->no = ++rc->conn->nsent;
	if (rc->conn == &st->cmd || rs_cl_is_cmd(st, rc->conn)) {
		TAILQ_INSERT_TAIL(&st->inflight, rc, entry);
		rc->tracked = 1;
	}
	return 0;
fail:
	free(cmd);
	rs_cmd_free(rc);
	return -1;
}

int
rs_eval(struct rstore *st, struct rcmd *rc, int script, struct rargs *a)
{
	rc->script = script;
	return rs_send(st, rc, a);
}

/*
 * NOSCRIPT: send the same call again as EVAL with the script's text
 * (which also loads it).  Replies come in order, so a session's later
 * writes failed the same way and are sent again after this one: order
 * holds.
 */
int
rs_resend_eval(struct rstore *st, struct rcmd *rc)
{
	static const char	 sha_hdr[] = "$7\r\nEVALSHA\r\n$40\r\n";
	const char		*body = rs_scripts[rc->script];
	char			*eol, *nf, hdr[48];
	size_t			 hl, skip, blen = strlen(body), nlen;
	int			 n;

	if (rc->fmt == NULL || rc->conn == NULL || rc->conn->ac == NULL ||
	    st->link != LINK_UP || rc->script < 0 ||
	    (eol = memchr(rc->fmt, '\n', rc->fmtlen)) == NULL)
		return -1;
	hl = (size_t)(eol + 1 - rc->fmt);
	skip = hl + sizeof(sha_hdr) - 1 + 40 + 2;
	if (skip > rc->fmtlen ||
	    memcmp(rc->fmt + hl, sha_hdr, sizeof(sha_hdr) - 1) != 0)
		return -1;
	n = snprintf(hdr, sizeof(hdr), "$4\r\nEVAL\r\n$%zu\r\n", blen);
	nlen = hl + (size_t)n + blen + 2 + (rc->fmtlen - skip);
	if ((nf = malloc(nlen)) == NULL)
		return -1;
	memcpy(nf, rc->fmt, hl);
	memcpy(nf + hl, hdr, (size_t)n);
	memcpy(nf + hl + (size_t)n, body, blen);
	memcpy(nf + hl + (size_t)n + blen, "\r\n", 2);
	memcpy(nf + hl + (size_t)n + blen + 2, rc->fmt + skip,
	    rc->fmtlen - skip);
	if (redisAsyncFormattedCommand(rc->conn->ac, rs_reply, rc, nf, nlen) !=
	    REDIS_OK) {
		free(nf);
		return -1;
	}
	free(nf);
	free(rc->fmt);
	rc->fmt = NULL;		/* once only */
	rc->fmtlen = 0;
	rc->sent = util_mono_ms();
	rc->no = ++rc->conn->nsent;
	TAILQ_INSERT_TAIL(&st->inflight, rc, entry);
	rc->tracked = 1;
	log_debug("store: redis: script %d was not loaded, sent it in full",
	    rc->script);
	return 0;
}

/* A failure inside onConnect: hiredis 0.14 must not free there. */
void
rs_link_later(struct rstore *st)
{
	event_active(st->ev_kill, EV_TIMEOUT, 1);
}

void
rs_kill_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rstore	*st = arg;

	(void)fd;
	(void)what;
	rs_store_ref(st);
	if (st->link == LINK_CONNECTING)
		rs_link_down(st, "%s:%d: the handshake could not be sent",
		    st->master.host, st->master.port);
	rs_store_unref(st);
}

void
rs_hs_send(struct rstore *st, struct rconn *conn, enum rs_hs step, int i)
{
	struct rargs	 a;
	struct rcmd	*rc;
	char		 db[RS_NUMLEN];

	if ((rc = rs_cmd_new(st, RC_HS, NULL, NULL)) == NULL) {
		rs_link_later(st);
		return;
	}
	rc->conn = conn;
	rc->u1 = step;
	rc->u2 = (uint64_t)i;
	rs_args_init(&a, 4, 0);
	switch (step) {
	case HS_AUTH:
		rs_args_str(&a, "AUTH");
		rs_args_str(&a, st->pass);
		break;
	case HS_SELECT:
		snprintf(db, sizeof(db), "%d", st->db);
		rs_args_str(&a, "SELECT");
		rs_args_str(&a, db);
		break;
	case HS_ROLE:
		rs_args_str(&a, "ROLE");
		break;
	case HS_SCRIPT:
		rs_args_str(&a, "SCRIPT");
		rs_args_str(&a, "LOAD");
		rs_args_str(&a, rs_scripts[i]);
		break;
	}
	if (rs_send(st, rc, &a) == -1)
		rs_link_later(st);
	else if (conn == &st->sub)
		st->hs_sub++;
	else
		st->hs_cmd++;
	rs_args_free(&a);
}

void
rs_subscribe(struct rstore *st, const char *chan)
{
	if (st->sub.ac == NULL || !st->sub.connected)
		return;
	redisAsyncCommand(st->sub.ac, rs_on_sub, st, "SUBSCRIBE %s", chan);
}

void
rs_unsubscribe(struct rstore *st, const char *chan)
{
	if (st->sub.ac == NULL || !st->sub.connected)
		return;
	/* hiredis keeps no callback for UNSUBSCRIBE: its reply goes to the
	 * channel's SUBSCRIBE callback, which ignores it. */
	redisAsyncCommand(st->sub.ac, NULL, NULL, "UNSUBSCRIBE %s", chan);
}

/* The channel a session listens on: owners hear posts, followers appends. */
const char *
rs_sess_chan(const struct rsess *s)
{
	return s->base.role == STORE_OWNER && s->promoting == NULL ?
	    s->ch_in : s->ch_ev;
}

static void
rs_sentinel_ask(struct rstore *st)
{
	struct rargs	 a;
	struct rcmd	*rc;

	if ((rc = rs_cmd_new(st, RC_SENTINEL, NULL, NULL)) == NULL) {
		rs_link_later(st);
		return;
	}
	rc->conn = &st->sen;
	rs_args_init(&a, 3, 0);
	rs_args_str(&a, "SENTINEL");
	rs_args_str(&a, "get-master-addr-by-name");
	rs_args_str(&a, st->name);
	if (rs_send(st, rc, &a) == -1)
		rs_link_later(st);
	else {
		st->sen_busy = 1;
		st->sen_sent = util_mono_ms();
	}
	rs_args_free(&a);
}

static void
rs_connect_master(struct rstore *st)
{
	char	 why[512];

	if (rs_connect(st, &st->cmd, &st->master, why, sizeof(why)) == -1 ||
	    rs_connect(st, &st->sub, &st->master, why, sizeof(why)) == -1)
		rs_link_down(st, "%s", why);
}

/* Asks the sentinels in turn, from the one that answered last. */
static void
rs_sentinel_try(struct rstore *st)
{
	char	 why[512];

	while (st->sen_tried < st->nhosts) {
		st->sen_tried++;
		if (rs_connect(st, &st->sen, &st->hosts[st->sen_idx], why,
		    sizeof(why)) == 0)
			return;
		log_debug("store: sentinel %s", why);
		st->sen_idx = (st->sen_idx + 1) % st->nhosts;
	}
	rs_link_down(st, "no sentinel told where master %s is", st->name);
}

/* A current connection failed (connect error or disconnect). */
static void
rs_conn_failed(struct rstore *st, struct rconn *conn, const char *why)
{
	char	 name[RS_HOST_MAX + 8];

	if (conn == &st->sen && st->cluster) {
		rs_cl_seed_failed(st, why);
		return;
	}
	if (rs_cl_is_cmd(st, conn)) {
		rs_cl_name(st, conn, name, sizeof(name));
		rs_link_down(st, "cluster master %s: %s", name, why);
		return;
	}
	if (conn == &st->sen) {
		log_debug("store: sentinel %s:%d: %s",
		    st->hosts[st->sen_idx].host, st->hosts[st->sen_idx].port,
		    why);
		st->sen_idx = (st->sen_idx + 1) % st->nhosts;
		st->sen_busy = 0;
		/* Once the master is known, rs_sentinel_watch reconnects. */
		if (st->link == LINK_CONNECTING && !st->sen_answered)
			rs_sentinel_try(st);
		return;
	}
	rs_link_down(st, "%s:%d: %s", st->master.host, st->master.port, why);
}

static void
rs_on_connect(const redisAsyncContext *cac, int status)
{
	struct rstore		*st = cac->data;
	struct rconn		*conn = rs_which(st, cac);
	struct store_sess	*bs;
	int			 i;

	if (status != REDIS_OK) {
		/* hiredis frees the context when this returns. */
		if (conn != NULL) {
			conn->ac = NULL;
			rs_conn_failed(st, conn, cac->errstr);
		}
		rs_store_unref(st);
		return;
	}
	if (conn == NULL)
		return;
	conn->connected = 1;
	/* A dead peer is noticed even on a quiet subscriber. */
	redisEnableKeepAlive(&conn->ac->c);
	if (conn == &st->sen) {
		if (st->cluster)
			rs_cl_on_seed(st);
		else
			rs_sentinel_ask(st);
		return;
	}
	if (rs_cl_is_cmd(st, conn)) {
		rs_cl_on_connect(st, conn);
		return;
	}
	if (conn == &st->cmd) {
		st->hs_cmd_sent = 1;
		if (st->pass != NULL)
			rs_hs_send(st, conn, HS_AUTH, 0);
		if (st->db != 0)
			rs_hs_send(st, conn, HS_SELECT, 0);
		if (st->sentinel)
			rs_hs_send(st, conn, HS_ROLE, 0);
		for (i = 0; i < SC_COUNT; i++)
			rs_hs_send(st, conn, HS_SCRIPT, i);
		return;
	}
	/* Subscriber: every open session's channel and the heartbeats,
	 * then the keep channel, whose confirmation ends its handshake:
	 * Redis runs a connection's commands in order, so the link comes up
	 * when pub/sub covers every session (store_redis_feed.c). */
	st->hs_sub_sent = 1;
	if (st->pass != NULL)
		rs_hs_send(st, conn, HS_AUTH, 0);
	LIST_FOREACH(bs, &st->base.sessions, entry)
		rs_subscribe(st, rs_sess_chan((struct rsess *)bs));
	rs_subscribe(st, st->ch_nodes);
	st->hs_sub++;
	if (redisAsyncCommand(st->sub.ac, rs_on_sub, st, "SUBSCRIBE %s",
	    RS_KEEP_CHAN) != REDIS_OK)
		rs_link_later(st);
}

static void
rs_on_disconnect(const redisAsyncContext *cac, int status)
{
	struct rstore	*st = cac->data;
	struct rconn	*conn = rs_which(st, cac);

	/* Ours if hiredis dropped it (error, EOF); else we let go of it. */
	if (conn != NULL) {
		conn->ac = NULL;
		conn->connected = 0;
		rs_conn_failed(st, conn, status == REDIS_OK ?
		    "connection closed" : cac->errstr);
	}
	rs_store_unref(st);
}

void
rs_hs_check(struct rstore *st)
{
	if (st->link == LINK_CONNECTING && st->hs_cmd_sent &&
	    st->hs_sub_sent && st->hs_cmd == 0 && st->hs_sub == 0)
		rs_link_up(st);
}

static void
rs_link_start(struct rstore *st)
{
	struct timeval	 tv;

	if (st->closing || st->link != LINK_DOWN)
		return;
	st->link = LINK_CONNECTING;
	st->epoch++;
	st->hs_cmd = st->hs_sub = 0;
	st->hs_cmd_sent = st->hs_sub_sent = st->keep_seen = 0;
	st->sen_answered = st->sen_busy = 0;
	util_tv(&tv, st->connect_ms);
	evtimer_add(st->ev_timeout, &tv);
	if (st->sentinel) {
		st->sen_tried = 0;
		rs_sentinel_try(st);
	} else if (st->cluster) {
		st->sen_tried = 0;
		rs_cl_start(st);
	} else {
		st->master = st->hosts[0];
		rs_connect_master(st);
	}
}

void
rs_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rstore	*st = arg;

	(void)fd;
	(void)what;
	rs_store_ref(st);
	rs_link_start(st);
	rs_store_unref(st);
}

void
rs_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rstore	*st = arg;

	(void)fd;
	(void)what;
	if (st->link != LINK_CONNECTING)
		return;
	rs_store_ref(st);
	if (st->cluster && !st->sen_answered) {
		const struct rhost *h = &st->hosts[st->sen_idx];

		st->sen_idx = (st->sen_idx + 1) % st->nhosts;
		rs_link_down(st, "cluster node %s:%d gave no slot map within "
		    "%u ms", h->host, h->port, st->connect_ms);
	} else if (st->sentinel && !st->sen_answered) {
		/* A sentinel that hangs: ask the next one next time. */
		const struct rhost *h = &st->hosts[st->sen_idx];

		st->sen_idx = (st->sen_idx + 1) % st->nhosts;
		rs_link_down(st, "sentinel %s:%d did not answer within %u ms",
		    h->host, h->port, st->connect_ms);
	} else
		rs_link_down(st, "%s:%d: no connection within %u ms",
		    st->master.host, st->master.port, st->connect_ms);
	rs_store_unref(st);
}

void
rs_on_hs(struct rcmd *rc, redisReply *r)
{
	struct rstore	*st = rc->st;
	static const char *const steps[] = { "AUTH", "SELECT", "ROLE",
	    "SCRIPT LOAD" };

	if (rc->epoch != st->epoch || st->link != LINK_CONNECTING)
		return;
	/* NULL: the connection failed, and its own callback says so. */
	if (r == NULL)
		return;
	if (r->type == REDIS_REPLY_ERROR) {
		char	 name[RS_HOST_MAX + 8];

		rs_cl_name(st, rc->conn, name, sizeof(name));
		rs_link_down(st, "%s: %s: %s", name, steps[rc->u1], r->str);
		return;
	}
	switch (rc->u1) {
	case HS_ROLE:
		if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
		    !rs_isstr(r->element[0]) ||
		    strcmp(r->element[0]->str, "master") != 0) {
			rs_link_down(st, "%s:%d is not a master",
			    st->master.host, st->master.port);
			return;
		}
		break;
	case HS_SCRIPT:
		if (!rs_isstr(r) || r->len != 40) {
			rs_link_down(st, "%s:%d: SCRIPT LOAD: unexpected reply",
			    st->master.host, st->master.port);
			return;
		}
		memcpy(st->sha[rc->u2], r->str, 40);
		st->sha[rc->u2][40] = '\0';
		break;
	default:
		break;
	}
	if (rc->conn == &st->sub)
		st->hs_sub--;
	else
		st->hs_cmd--;
	rs_hs_check(st);
}

/*
 * A sentinel's answer: while connecting, where to connect; once up,
 * whether the master moved.  A demoted master may go on answering as a
 * master for many seconds after a failover (until Sentinel converts it),
 * so neither a disconnect nor READONLY can be waited for.
 */
void
rs_on_sentinel(struct rcmd *rc, redisReply *r)
{
	struct rstore	*st = rc->st;
	struct rhost	 m;
	uint64_t	 port;
	int		 ok;

	st->sen_busy = 0;
	/* NULL: the connection failed and rs_on_disconnect moves on. */
	if (r == NULL || rc->epoch != st->epoch)
		return;
	ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    rs_isstr(r->element[0]) && rs_isstr(r->element[1]) &&
	    r->element[0]->len <= RS_HOST_MAX &&
	    rs_u64(r->element[1]->str, r->element[1]->len, &port) == 0 &&
	    port > 0 && port <= 65535;
	if (ok) {
		memcpy(m.host, r->element[0]->str, r->element[0]->len);
		m.host[r->element[0]->len] = '\0';
		m.port = (int)port;
	}
	if (st->link == LINK_CONNECTING && !st->sen_answered) {
		if (!ok) {
			log_debug("store: sentinel %s:%d does not know master "
			    "%s", st->hosts[st->sen_idx].host,
			    st->hosts[st->sen_idx].port, st->name);
			rs_drop_conn(st, &st->sen);
			st->sen_idx = (st->sen_idx + 1) % st->nhosts;
			rs_sentinel_try(st);
			return;
		}
		/* The connection stays: it watches for a failover. */
		st->sen_answered = 1;
		st->master = m;
		rs_connect_master(st);
		return;
	}
	if (st->link == LINK_UP && ok && (m.port != st->master.port ||
	    strcmp(m.host, st->master.host) != 0))
		rs_link_down(st, "sentinel: master %s moved from %s:%d to "
		    "%s:%d", st->name, st->master.host, st->master.port,
		    m.host, m.port);
}

/* Once a poll period: ask again, reconnecting to a sentinel if needed. */
void
rs_sentinel_watch(struct rstore *st, uint64_t now)
{
	char	 why[512];

	if (st->sen.ac == NULL) {
		if (rs_connect(st, &st->sen, &st->hosts[st->sen_idx], why,
		    sizeof(why)) == -1) {
			log_debug("store: sentinel %s", why);
			st->sen_idx = (st->sen_idx + 1) % st->nhosts;
			return;
		}
		st->sen_busy = 1;
		st->sen_sent = now;
		return;		/* rs_on_connect asks */
	}
	if (st->sen_busy) {
		if (now - st->sen_sent >= st->deadline_ms) {
			log_debug("store: sentinel %s:%d does not answer",
			    st->hosts[st->sen_idx].host,
			    st->hosts[st->sen_idx].port);
			rs_drop_conn(st, &st->sen);
			st->sen_idx = (st->sen_idx + 1) % st->nhosts;
			st->sen_busy = 0;
		}
		return;
	}
	if (st->sen.connected)
		rs_sentinel_ask(st);
}

/* --- ping (synchronous, for start-up checks) --- */

redisContext *
rs_ping_connect(const struct rhost *h, const char *what, uint64_t deadline,
    char *err, size_t errlen)
{
	redisContext	*c;
	struct timeval	 tv;
	uint64_t	 now = util_mono_ms();

	if (now >= deadline) {
		snprintf(err, errlen, "store: %s %s:%d: timed out", what,
		    h->host, h->port);
		return NULL;
	}
	util_tv(&tv, deadline - now);
	c = redisConnectWithTimeout(h->host, h->port, tv);
	if (c == NULL || c->err) {
		snprintf(err, errlen, "store: %s %s:%d: %s", what, h->host,
		    h->port, c ? c->errstr : "out of memory");
		if (c != NULL)
			redisFree(c);
		return NULL;
	}
	return c;
}

redisReply *
rs_ping_cmd(redisContext *c, const struct rhost *h, const char *what,
    uint64_t deadline, char *err, size_t errlen, int argc, const char **argv)
{
	redisReply	*r;
	struct timeval	 tv;
	uint64_t	 now = util_mono_ms();

	if (now >= deadline) {
		snprintf(err, errlen, "store: %s %s:%d: timed out", what,
		    h->host, h->port);
		return NULL;
	}
	util_tv(&tv, deadline - now);
	redisSetTimeout(c, tv);
	if ((r = redisCommandArgv(c, argc, argv, NULL)) == NULL) {
		snprintf(err, errlen, "store: %s %s:%d: %s", what, h->host,
		    h->port, c->errstr[0] ? c->errstr : "no reply");
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(err, errlen, "store: %s %s:%d: %s: %s", what,
		    h->host, h->port, argv[0], r->str);
		freeReplyObject(r);
		return NULL;
	}
	return r;
}

static int
rs_ping_sentinels(struct rstore *st, struct rhost *m, uint64_t deadline,
    char *err, size_t errlen)
{
	const char	*argv[] = { "SENTINEL", "get-master-addr-by-name",
			    st->name };
	redisContext	*c;
	redisReply	*r;
	uint64_t	 port;
	size_t		 i;
	int		 found = 0;

	for (i = 0; i < st->nhosts && !found; i++) {
		if ((c = rs_ping_connect(&st->hosts[i], "sentinel", deadline,
		    err, errlen)) == NULL)
			continue;
		r = rs_ping_cmd(c, &st->hosts[i], "sentinel", deadline, err,
		    errlen, 3, argv);
		if (r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements == 2 && rs_isstr(r->element[0]) &&
		    r->element[0]->len <= RS_HOST_MAX &&
		    rs_replyu64(r->element[1], &port) == 0 && port > 0 &&
		    port <= 65535) {
			memcpy(m->host, r->element[0]->str,
			    r->element[0]->len + 1);
			m->port = (int)port;
			found = 1;
		} else if (r != NULL)
			snprintf(err, errlen, "store: sentinel %s:%d does not "
			    "know master %s", st->hosts[i].host,
			    st->hosts[i].port, st->name);
		if (r != NULL)
			freeReplyObject(r);
		redisFree(c);
	}
	return found ? 0 : -1;
}

int
rs_ping(struct store *bst, unsigned timeout_ms, char *err, size_t errlen)
{
	struct rstore	*st = (struct rstore *)bst;
	struct rhost	 m;
	redisContext	*c;
	redisReply	*r;
	char		 db[RS_NUMLEN], dummy[1];
	const char	*auth[] = { "AUTH", st->pass };
	const char	*sel[] = { "SELECT", db };
	const char	*role[] = { "ROLE" };
	const char	*ping[] = { "PING" };
	uint64_t	 deadline;
	int		 ok;

	if (err == NULL || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	deadline = util_mono_ms() + (timeout_ms ? timeout_ms : RS_DEADLINE_MS);
	if (st->cluster)
		return rs_cl_ping(st, deadline, err, errlen);
	if (st->sentinel) {
		if (rs_ping_sentinels(st, &m, deadline, err, errlen) == -1)
			return -1;
	} else
		m = st->hosts[0];
	if ((c = rs_ping_connect(&m, "redis", deadline, err, errlen)) == NULL)
		return -1;
	snprintf(db, sizeof(db), "%d", st->db);
	ok = 0;
	if (st->pass != NULL) {
		if ((r = rs_ping_cmd(c, &m, "redis", deadline, err, errlen, 2,
		    auth)) == NULL)
			goto out;
		freeReplyObject(r);
	}
	if (st->db != 0) {
		if ((r = rs_ping_cmd(c, &m, "redis", deadline, err, errlen, 2,
		    sel)) == NULL)
			goto out;
		freeReplyObject(r);
	}
	if (st->sentinel) {
		if ((r = rs_ping_cmd(c, &m, "redis", deadline, err, errlen, 1,
		    role)) == NULL)
			goto out;
		if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
		    !rs_isstr(r->element[0]) ||
		    strcmp(r->element[0]->str, "master") != 0) {
			snprintf(err, errlen, "store: redis %s:%d is not a "
			    "master", m.host, m.port);
			freeReplyObject(r);
			goto out;
		}
		freeReplyObject(r);
	}
	if ((r = rs_ping_cmd(c, &m, "redis", deadline, err, errlen, 1,
	    ping)) == NULL)
		goto out;
	freeReplyObject(r);
	ok = 1;
out:
	redisFree(c);
	return ok ? 0 : -1;
}
