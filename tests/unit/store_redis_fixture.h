/*
 * What the Redis store's unit tests share (test_store_redis.c,
 * test_store_redis_doc.c): a redis-server of their own, a synchronous
 * connection to look behind the backend, the store's events recorded,
 * and the loop driven until a condition holds.  Included after
 * src/store.c and the src/store_redis*.c files.
 */
#ifndef PARLEY_STORE_REDIS_FIXTURE_H
#define PARLEY_STORE_REDIS_FIXTURE_H

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "check_main.h"

#define REDIS_SERVER	"/usr/bin/redis-server"

/* --- a redis-server of our own --- */

struct srv {
	pid_t	 pid;
	int	 port;
	char	 dir[64];
	int	 master;	/* replicate this port, 0: none */
};

static inline int
free_port(void)
{
	struct sockaddr_in	 sa;
	socklen_t		 len = sizeof(sa);
	int			 fd, port;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static inline void
srv_exec(struct srv *r, const char *conf)
{
	char	 port[16], mport[16];
	int	 fd;

	snprintf(port, sizeof(port), "%d", r->port);
	snprintf(mport, sizeof(mport), "%d", r->master);
	r->pid = fork();
	ck_assert_int_ge(r->pid, 0);
	if (r->pid != 0)
		return;
	/* Dies with the test, even a crashed one. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (conf != NULL)
		execl(REDIS_SERVER, "redis-server", conf, "--sentinel",
		    (char *)NULL);
	else if (r->master != 0)
		execl(REDIS_SERVER, "redis-server", "--port", port, "--bind",
		    "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
		    r->dir, "--replicaof", "127.0.0.1", mport,
		    "--repl-diskless-sync-delay", "0", (char *)NULL);
	else
		execl(REDIS_SERVER, "redis-server", "--port", port, "--bind",
		    "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
		    r->dir, "--repl-diskless-sync-delay", "0", (char *)NULL);
	_exit(127);
}

static inline void
srv_wait_ready(int port)
{
	struct timeval	 tv = { 0, 200000 };
	redisContext	*c;
	redisReply	*rp;
	uint64_t	 deadline = util_mono_ms() + 5000;

	for (;;) {
		c = redisConnectWithTimeout("127.0.0.1", port, tv);
		if (c != NULL && c->err == 0) {
			redisSetTimeout(c, tv);
			rp = redisCommand(c, "PING");
			if (rp != NULL && rp->type == REDIS_REPLY_STATUS &&
			    strcmp(rp->str, "PONG") == 0) {
				freeReplyObject(rp);
				redisFree(c);
				return;
			}
			if (rp != NULL)
				freeReplyObject(rp);
		}
		if (c != NULL)
			redisFree(c);
		ck_assert_msg(util_mono_ms() < deadline,
		    "redis on port %d did not come up", port);
		usleep(10000);
	}
}

static inline void srv_start_of(struct srv *, int);

static inline void
srv_start(struct srv *r)
{
	r->master = 0;
	srv_start_of(r, 0);
}

static inline void
srv_start_of(struct srv *r, int master)
{
	snprintf(r->dir, sizeof(r->dir), "/tmp/test_store_redis.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(r->dir));
	r->port = free_port();
	r->master = master;
	srv_exec(r, NULL);
	srv_wait_ready(r->port);
}

/* The same port and directory: a snapshot there is loaded again. */
static inline void
srv_restart(struct srv *r)
{
	srv_exec(r, NULL);
	srv_wait_ready(r->port);
}

static inline void
srv_kill(struct srv *r)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, SIGCONT);
	kill(r->pid, SIGKILL);
	waitpid(r->pid, NULL, 0);
	r->pid = 0;
}

static inline void
srv_stop(struct srv *r)
{
	srv_kill(r);
	check_rmtree(r->dir);
}

/* A Sentinel watching master port m. */
static inline void
sentinel_start(struct srv *sen, int mport)
{
	char	 conf[128];
	FILE	*f;

	snprintf(sen->dir, sizeof(sen->dir), "/tmp/test_store_redis.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sen->dir));
	sen->port = free_port();
	sen->master = 0;
	snprintf(conf, sizeof(conf), "%s/sentinel.conf", sen->dir);
	ck_assert_ptr_nonnull(f = fopen(conf, "w"));
	fprintf(f, "port %d\nbind 127.0.0.1\ndir %s\n"
	    "sentinel monitor m 127.0.0.1 %d 1\n"
	    "sentinel down-after-milliseconds m 1000\n"
	    "sentinel failover-timeout m 3000\n", sen->port, sen->dir, mport);
	fclose(f);
	srv_exec(sen, conf);
	srv_wait_ready(sen->port);
}

/* --- a synchronous connection for looking behind the backend --- */

static inline redisContext *
sconn(int port)
{
	struct timeval	 tv = { 2, 0 };
	redisContext	*c;

	c = redisConnectWithTimeout("127.0.0.1", port, tv);
	ck_assert_msg(c != NULL && c->err == 0, "connect %d", port);
	redisSetTimeout(c, tv);
	return c;
}

static inline redisReply *
scmd(redisContext *c, const char *fmt, ...)
{
	redisReply	*rp;
	va_list		 ap;

	va_start(ap, fmt);
	rp = redisvCommand(c, fmt, ap);
	va_end(ap);
	ck_assert_msg(rp != NULL, "command %s: %s", fmt, c->errstr);
	return rp;
}

/* How often Redis ran cmd since the last CONFIG RESETSTAT (a script's
 * calls count under their own names). */
static inline long long
cmdcalls(redisContext *c, const char *cmd)
{
	redisReply	*rp;
	char		 key[64];
	const char	*p;
	long long	 n = 0;

	snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
	rp = scmd(c, "INFO commandstats");
	ck_assert_int_eq(rp->type, REDIS_REPLY_STRING);
	if ((p = strstr(rp->str, key)) != NULL)
		n = strtoll(p + strlen(key), NULL, 10);
	freeReplyObject(rp);
	return n;
}

/* A string reply as a C string ("" for nil) into buf. */
static inline const char *
sget(redisContext *c, char *buf, size_t len, const char *fmt, ...)
{
	redisReply	*rp;
	va_list		 ap;

	va_start(ap, fmt);
	rp = redisvCommand(c, fmt, ap);
	va_end(ap);
	ck_assert_ptr_nonnull(rp);
	if (rp->type == REDIS_REPLY_STRING || rp->type == REDIS_REPLY_STATUS)
		snprintf(buf, len, "%s", rp->str);
	else if (rp->type == REDIS_REPLY_INTEGER)
		snprintf(buf, len, "%lld", rp->integer);
	else
		buf[0] = '\0';
	freeReplyObject(rp);
	return buf;
}

static inline long long
sint(redisContext *c, const char *fmt, ...)
{
	redisReply	*rp;
	long long	 v;
	va_list		 ap;

	va_start(ap, fmt);
	rp = redisvCommand(c, fmt, ap);
	va_end(ap);
	ck_assert_ptr_nonnull(rp);
	ck_assert_int_eq(rp->type, REDIS_REPLY_INTEGER);
	v = rp->integer;
	freeReplyObject(rp);
	return v;
}

/* --- events --- */

struct tev {
	int		 health;
	int		 nup;
	int		 ndown;
	uint64_t	 durable;
	int		 ndurable;
	int		 durable_back;	/* a durable seq went backwards */
	int		 failed;
	int		 nfailed;
	uint64_t	 grown;
	int		 ngrown;
	int		 grown_bad;	/* grown not past the old last */
	int		 nvacant;
	int		 ninputs;
	char		 inputs[32][64];
	/* Close from inside a callback: the store on CLOSE_*, or sess. */
	int		 close_on;
	struct store	*close_store;
	struct store_sess *close_sess;
};

enum { CLOSE_NONE, CLOSE_DURABLE, CLOSE_GROWN, CLOSE_INPUT };

static inline void
tev_close(struct tev *t, int when)
{
	if (t->close_on != when)
		return;
	t->close_on = CLOSE_NONE;
	if (t->close_sess != NULL)
		store_sess_close(t->close_sess);
	else
		store_close(t->close_store);
}

static inline void
ev_durable(void *arg, struct store_sess *s, uint64_t seq)
{
	struct tev	*t = arg;

	(void)s;
	if (seq < t->durable)
		t->durable_back = 1;
	t->durable = seq;
	t->ndurable++;
	tev_close(t, CLOSE_DURABLE);
}

static inline void
ev_failed(void *arg, struct store_sess *s, int err)
{
	struct tev	*t = arg;

	(void)s;
	t->failed = err;
	t->nfailed++;
}

static inline void
ev_grown(void *arg, struct store_sess *s, uint64_t last)
{
	struct tev	*t = arg;

	if (store_last_seq(s) != last || last <= t->grown)
		t->grown_bad = 1;
	t->grown = last;
	t->ngrown++;
	tev_close(t, CLOSE_GROWN);
}

static inline void
ev_input(void *arg, struct store_sess *s, const char *json, size_t len)
{
	struct tev	*t = arg;

	(void)s;
	ck_assert_int_eq(strlen(json), len);
	if (t->ninputs < 32)
		snprintf(t->inputs[t->ninputs], sizeof(t->inputs[0]), "%s",
		    json);
	t->ninputs++;
	tev_close(t, CLOSE_INPUT);
}

static inline void
ev_vacant(void *arg, struct store_sess *s)
{
	struct tev	*t = arg;

	(void)s;
	t->nvacant++;
}

static inline void
ev_health(void *arg, int up)
{
	struct tev	*t = arg;

	t->health = up;
	if (up)
		t->nup++;
	else
		t->ndown++;
}

static const struct store_events tevents = {
	.durable = ev_durable,
	.failed = ev_failed,
	.grown = ev_grown,
	.input = ev_input,
	.vacant = ev_vacant,
	.health = ev_health,
};

/* --- driving the loop --- */

static inline void
nudge_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* A base whose EVLOOP_ONCE never sleeps more than 5 ms. */
static inline struct event_base *
tbase(struct event **nudge)
{
	struct event_base	*b;
	struct timeval		 tv = { 0, 5000 };

	ck_assert_ptr_nonnull(b = event_base_new());
	*nudge = event_new(b, -1, EV_PERSIST, nudge_cb, NULL);
	evtimer_add(*nudge, &tv);
	return b;
}

static inline void
tbase_free(struct event_base *b, struct event *nudge)
{
	event_free(nudge);
	event_base_free(b);
}

#define WAIT(base, cond, ms) do {					\
	uint64_t _dl = util_mono_ms() + (ms);				\
	while (!(cond)) {						\
		ck_assert_msg(util_mono_ms() < _dl,			\
		    "timed out (%d ms) waiting for %s", (ms), #cond);	\
		event_base_loop((base), EVLOOP_ONCE);			\
	}								\
} while (0)

#define WAIT2(b1, b2, cond, ms) do {					\
	uint64_t _dl = util_mono_ms() + (ms);				\
	while (!(cond)) {						\
		ck_assert_msg(util_mono_ms() < _dl,			\
		    "timed out (%d ms) waiting for %s", (ms), #cond);	\
		event_base_loop((b1), EVLOOP_NONBLOCK);			\
		event_base_loop((b2), EVLOOP_NONBLOCK);			\
		usleep(500);						\
	}								\
} while (0)

/* Runs the loop for ms whatever happens. */
static inline void
spin(struct event_base *base, unsigned ms)
{
	uint64_t	 end = util_mono_ms() + ms;

	while (util_mono_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
}

static inline struct store *
tstore_url(struct event_base *base, const char *url, const char *node,
    unsigned lease, struct tev *t)
{
	struct store_params	 p;
	struct store		*st;
	char			 err[256];

	memset(t, 0, sizeof(*t));
	t->health = -1;
	st = store_open(url, "/nonexistent", STORE_FSYNC_NO, err, sizeof(err));
	ck_assert_msg(st != NULL, "store_open: %s", err);
	memset(&p, 0, sizeof(p));
	p.base = base;
	p.node = node;
	p.lease_ms = lease;
	p.retention_ms = 3600 * 1000;
	p.ev = &tevents;
	p.arg = t;
	ck_assert_msg(store_attach(st, &p, err, sizeof(err)) == 0,
	    "store_attach: %s", err);
	return st;
}

static inline struct store *
tstore(struct event_base *base, int port, const char *node, unsigned lease,
    struct tev *t)
{
	char	 url[64];

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	return tstore_url(base, url, node, lease, t);
}

struct topen {
	int			 n;
	int			 err;
	struct store_sess	*s;
	enum store_role		 role;
};

static inline void
topen_cb(void *arg, int err, struct store_sess *s, enum store_role role)
{
	struct topen	*o = arg;

	o->n++;
	o->err = err;
	o->s = s;
	o->role = role;
}

static inline struct store_sess *
topen(struct event_base *base, struct store *st, const char *id, int create,
    size_t tail, enum store_role want)
{
	struct topen	 o = { 0, 0, NULL, 0 };

	store_open_async(st, id, create, tail, topen_cb, &o);
	WAIT(base, o.n > 0, 5000);
	ck_assert_int_eq(o.n, 1);
	ck_assert_msg(o.err == 0, "open %s: %s", id, strerror(o.err));
	ck_assert_int_eq(o.role, want);
	ck_assert_int_eq(store_role(o.s), want);
	return o.s;
}

/* The event json for seq of a tag: checkable byte for byte. */
static inline size_t
mkjson(char *buf, size_t len, const char *tag, uint64_t seq)
{
	return (size_t)snprintf(buf, len, "{\"tag\":\"%s\",\"seq\":%" PRIu64
	    ",\"pad\":\"%.*s\"}", tag, seq, (int)(seq % 40),
	    "0123456789012345678901234567890123456789");
}

static inline void
tappend(struct store_sess *s, const char *tag, uint64_t from, uint64_t to)
{
	char		 j[256];
	uint64_t	 seq;
	size_t		 n;

	for (seq = from; seq <= to; seq++) {
		n = mkjson(j, sizeof(j), tag, seq);
		ck_assert_msg(store_append_async(s, seq, 1000 + seq, j, n) == 0,
		    "append %" PRIu64 ": %s", seq, strerror(errno));
	}
}

struct tdone {
	int		 n;
	ssize_t		 r;
	int		 err;
};

static inline void
tdone_cb(void *arg, ssize_t r)
{
	struct tdone	*d = arg;

	d->n++;
	d->r = r;
	d->err = r < 0 ? errno : 0;
}

/* Collects a range and checks it against mkjson(tag); first: done's. */
struct tcoll {
	struct tdone	 d;
	const char	*tag;
	uint64_t	 first;
	uint64_t	 last;
	size_t		 n;
	int		 bad;
	size_t		 stop_after;	/* cb returns 1 after this many */
};

static inline int
tcoll_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct tcoll	*c = arg;
	char		 j[256];
	size_t		 n;

	n = mkjson(j, sizeof(j), c->tag, seq);
	if ((c->n > 0 && seq != c->last + 1) || ts != 1000 + seq ||
	    len != n || memcmp(json, j, n) != 0 || json[len] != '\0')
		c->bad = 1;
	if (c->n == 0)
		c->first = seq;
	c->last = seq;
	c->n++;
	return c->stop_after != 0 && c->n >= c->stop_after;
}

/* A range through the store; its done is called exactly once. */
static inline ssize_t
trange_async(struct event_base *base, struct store_sess *s, uint64_t after,
    size_t limit, struct tcoll *c)
{
	memset(&c->d, 0, sizeof(c->d));
	store_range_async(s, after, limit, tcoll_cb, tdone_cb, c);
	WAIT(base, c->d.n > 0, 5000);
	ck_assert_int_eq(c->d.n, 1);
	return c->d.r;
}

#endif
