/*
 * Redis store backend (schemes "redis", "sentinel" and "cluster"): sessions
 * live in Redis so that any worker on any host can serve them; one process
 * owns a session at a time (a lease), the others follow it.
 *
 * Data model, one session id ID (every key carries the hash tag {ID}):
 *
 *   parley:{ID}:log	stream, entry id "<seq>-0", fields t (unix ms) and
 *			e (the event json)
 *   parley:{ID}:meta	hash: doc (meta json), last (last seq appended),
 *			inpos (last inbox entry the owner consumed)
 *   parley:{ID}:owner	"<node>#<fence>", PX lease; absent: no owner
 *   parley:{ID}:fence	counter, INCR on every acquisition
 *   parley:{ID}:in	stream: the inbox followers post to (field m)
 *   parley:{ID}:kb	hash: the session's documents, name -> json
 *			(store_redis_doc.c)
 *   channels parley:{ID}:ev (owner -> followers: new last seq) and
 *   parley:{ID}:in (followers -> owner: something was posted); with a
 *   database other than 0 the channels end in ":<db>" (pub/sub ignores
 *   databases, so two databases would otherwise hear each other).
 *
 * Every write by an owner is a Lua script that first checks the owner key
 * still holds this handle's token (else an error "FENCED ..."), and an
 * append also checks the log ends where the owner believes it does (else
 * "SEQ <last>"): a write from a process that lost its lease, or one that
 * would leave a hole, never lands.
 *
 * Model of the code:
 *
 * - Two hiredis async connections per store on the worker's event base:
 *   commands and pub/sub ("the link"), plus a short-lived one to ask a
 *   Sentinel where the master is.  The link is DOWN, CONNECTING or UP;
 *   either connection failing, a handshake error, or a command not
 *   answering within deadline_ms tears both down and a timer reconnects
 *   with backoff.  health() reports UP <-> not UP.
 * - Every command carries a struct rcmd as hiredis privdata.  hiredis calls
 *   each reply callback exactly once, with NULL when the connection goes
 *   away, so the rcmd is freed there and nowhere else.  An rcmd holds
 *   references on the session and request it works for: those outlive a
 *   store_sess_close()/store_req_cancel(), which only mark them closed or
 *   dead, and a late reply finds them marked and calls nobody.
 * - The store itself is reference counted: one reference for the user
 *   (dropped by store_close) and one per live hiredis context (dropped when
 *   hiredis disposes of it), so a context hiredis frees later (when
 *   store_close ran inside one of its callbacks) still finds the store.
 * - Pub/sub callbacks get the store as privdata and find the session by
 *   channel name, so nothing per session is left inside hiredis.  A
 *   permanent subscription to RS_KEEP_CHAN keeps the subscriber context in
 *   subscribed mode for good: hiredis 0.14 leaves that mode when the count
 *   of channels drops to 0 and then asserts on the next subscribe reply.
 * - Owner writes queue per session (bounded) and go out in batches, at
 *   most RS_INFLIGHT batches of one session in flight; the SEQ check keeps
 *   pipelined batches safe.  A batch's reply makes its records durable and
 *   moves them into the session's cache of recent records, which serves
 *   store_range() synchronously.
 * - A timer (RS_TICK_MS) checks command deadlines, renews leases and
 *   publishes this process's heartbeat every lease/3, fails owners whose
 *   lease could not be renewed for a whole lease, and runs the feed's
 *   checks (store_redis_feed.c): pub/sub is trusted while its connection
 *   stays up, every session is re-read when it comes up (or its channel
 *   is subscribed), and else only once every poll_ms (30 s) as a safety
 *   net; the sessions of an owner process whose heartbeat stopped are
 *   re-read at once.
 * - User callbacks may call anything, including store_close(): code that
 *   goes on after one holds a reference and re-checks closed/closing.
 *
 * The files, one part of this each (store_redis.h holds what they share):
 *
 * - store_redis.c: the ops tables; the store's open, attach and close;
 *   references to the store, sessions, commands and requests; what the
 *   link going down or coming up does to the sessions; the dispatch of
 *   command replies (rs_reply) and pub/sub messages (rs_on_sub); the
 *   tick; the synchronous calls.
 * - store_redis_link.c: the url, the connections and their handshake,
 *   Sentinel, sending commands (NOSCRIPT resend), subscriptions, the
 *   synchronous ping; the helpers that build commands and read replies.
 * - store_redis_lease.c: a session's open (acquire or peek, then the
 *   cache fill), promotion, lease renewal, release and close.
 * - store_redis_inbox.c: what a session hears from other processes: a
 *   follower's resync, an owner's inbox; posting to the inbox.
 * - store_redis_feed.c: when those reads happen: after a subscription,
 *   the safety net's ring, owner processes' heartbeats.
 * - store_redis_log.c: records and the cache, the owner's writes
 *   (queue, batches, repair), reading the log (range, preload), trim.
 * - store_redis_doc.c: a session's documents.
 * - store_redis_cluster.c: a Redis Cluster (cluster://): the slot map,
 *   a command connection per master, each command to its slot's master.
 */
#include <sys/types.h>
#include <sys/queue.h>
#include <sys/time.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"

#include "store_redis.h"

/*
 * Numbers cross into Lua as strings and are compared as strings: Lua 5.1
 * numbers are doubles and print large values in exponent form.
 */
const char *
rs_retention(const struct rsess *s)
{
	return store_retained(s->base.id) ? "keep" : s->st->retention_s;
}

const char *const rs_scripts[SC_COUNT] = {
	[SC_APPEND] = rs_lua_append,
	[SC_META] = rs_lua_meta,
	[SC_RENEW] = rs_lua_renew,
	[SC_ACQUIRE] = rs_lua_acquire,
	[SC_RELEASE] = rs_lua_release,
	[SC_PEEK] = rs_lua_peek,
	[SC_POST] = rs_lua_post,
	[SC_TRIM] = rs_lua_trim,
	[SC_DOCPUT] = rs_lua_docput,
	[SC_DOCDEL] = rs_lua_docdel,
	[SC_DURABLE] = rs_lua_durable,
};

static struct store	*rs_redis_open(const char *, const char *,
			    enum store_fsync, char *, size_t);
static struct store	*rs_cluster_open(const char *, const char *,
			    enum store_fsync, char *, size_t);
static struct store	*rs_sentinel_open(const char *, const char *,
			    enum store_fsync, char *, size_t);
static void		 rs_close(struct store *);
static int		 rs_exists(struct store *, const char *);
static int		 rs_sess_open(struct store *, const char *, int,
			    struct store_sess **);
static int		 rs_append(struct store_sess *, uint64_t, uint64_t,
			    const char *, size_t);
static int		 rs_range(struct store_sess *, uint64_t, size_t,
			    store_range_cb, void *);
static int		 rs_meta_write(struct store_sess *, const char *,
			    size_t);
static char		*rs_meta_read(struct store_sess *);
static char		*rs_meta_peek(struct store *, const char *);
static void		 rs_sync(struct store *);
static int		 rs_expire(struct store *, uint64_t);
static int		 rs_attach(struct store *, char *, size_t);
static int		 rs_healthy(struct store *);
static void		 rs_req_cancel(struct store_req *);

/* The two schemes differ only in how the master is found. */
#define RS_OPS(name, sch, openfn)					\
const struct store_ops name = {						\
	.scheme = sch,							\
	.open = openfn,							\
	.close = rs_close,						\
	.exists = rs_exists,						\
	.sess_open = rs_sess_open,					\
	.sess_close = rs_sess_close,					\
	.append = rs_append,						\
	.range = rs_range,						\
	.meta_write = rs_meta_write,					\
	.meta_read = rs_meta_read,					\
	.meta_peek = rs_meta_peek,					\
	.sync = rs_sync,						\
	.trim = rs_trim,						\
	.expire = rs_expire,						\
	.attach = rs_attach,						\
	.healthy = rs_healthy,						\
	.ping = rs_ping,						\
	.open_async = rs_open_async,					\
	.append_async = rs_append_async,				\
	.meta_write_async = rs_meta_write_async,			\
	.range_async = rs_range_async,					\
	.preload_async = rs_preload_async,				\
	.req_cancel = rs_req_cancel,					\
	.post = rs_post,						\
	.promote = rs_promote,						\
	.doc_put_async = rs_doc_put,					\
	.doc_del_async = rs_doc_del,					\
	.doc_all_async = rs_doc_all,					\
	.epochs = rs_epochs,						\
	.resync = rs_resync_sess,					\
	.congested = rs_congested,					\
}

RS_OPS(store_redis_ops, "redis", rs_redis_open);
RS_OPS(store_sentinel_ops, "sentinel", rs_sentinel_open);
RS_OPS(store_cluster_ops, "cluster", rs_cluster_open);

/* --- references --- */

void
rs_store_ref(struct rstore *st)
{
	st->refs++;
}

void
rs_store_unref(struct rstore *st)
{
	if (--st->refs > 0)
		return;
	if (st->pass != NULL) {
		explicit_bzero(st->pass, strlen(st->pass));
		free(st->pass);
	}
	rs_cl_free(st);
	free(st);
}

void
rs_sess_ref(struct rsess *s)
{
	s->refs++;
}

void
rs_sess_unref(struct rsess *s)
{
	if (--s->refs > 0)
		return;
	rs_wopq_free(&s->wq);
	rs_cache_free(&s->cache);
	free(s->doc);
	free(s);
}

void
rs_req_unref(struct rreq *req)
{
	if (--req->refs > 0)
		return;
	rs_cache_free(&req->tmp);
	rs_doc_req_free(req);
	rs_sess_unref(req->s);
	free(req);
}

struct rcmd *
rs_cmd_new(struct rstore *st, enum rs_kind kind, struct rsess *s,
    struct rreq *req)
{
	struct rcmd	*rc;

	if ((rc = calloc(1, sizeof(*rc))) == NULL)
		return NULL;
	rc->st = st;
	rc->kind = kind;
	rc->script = -1;
	rc->slot = -1;
	rc->epoch = st->epoch;
	if ((rc->s = s) != NULL)
		rs_sess_ref(s);
	if ((rc->req = req) != NULL)
		req->refs++;
	return rc;
}

void
rs_cmd_free(struct rcmd *rc)
{
	struct rcmd	*rider;

	if (rc->tracked)
		TAILQ_REMOVE(&rc->st->inflight, rc, entry);
	/* (a WAIT's connection is the one it was sent on, never one a
	 * cluster remap freed: a WAIT is never held for a redirect) */
	if (rc->kind == RC_WAIT && rc->conn != NULL && rc->conn->wait == rc)
		rc->conn->wait = NULL;
	while ((rider = rc->riders) != NULL) {	/* not answered: closing */
		rc->riders = rider->rnext;
		rs_cmd_free(rider);
	}
	if (rc->b != NULL)
		rs_batch_free(rc->b);
	if (rc->req != NULL)
		rs_req_unref(rc->req);
	if (rc->s != NULL)
		rs_sess_unref(rc->s);
	free(rc->fmt);
	free(rc);
}

/* --- open --- */

/* sentinel: 1 sentinel://, 2 cluster://, 0 redis:// */
static struct store *
rs_open_common(const char *url, int sentinel, char *err, size_t errlen)
{
	struct rstore	*st;
	int		 save;

	if ((st = calloc(1, sizeof(*st))) == NULL) {
		save = errno;
		snprintf(err, errlen, "store: %s", strerror(save));
		errno = save;
		return NULL;
	}
	st->refs = 1;
	st->sentinel = sentinel == 1;
	if ((sentinel == 2 ? rs_cl_parse(st, url, err, errlen) :
	    rs_parse_url(st, url, sentinel, err, errlen)) == -1) {
		save = errno;
		rs_store_unref(st);
		errno = save;
		return NULL;
	}
	rs_feed_init(st);
	st->health = -1;
	st->link = LINK_DOWN;
	st->deadline_ms = RS_DEADLINE_MS;
	st->connect_ms = RS_CONNECT_MS;
	st->poll_ms = RS_POLL_MS;
	st->backoff = RS_BACKOFF_MIN;
	TAILQ_INIT(&st->inflight);
	TAILQ_INIT(&st->dirty);
	TAILQ_INIT(&st->docq);
	LIST_INIT(&st->opening);
	return &st->base;
}

static struct store *
rs_redis_open(const char *url, const char *state_dir, enum store_fsync fs,
    char *err, size_t errlen)
{
	(void)state_dir;
	(void)fs;
	return rs_open_common(url, 0, err, errlen);
}

static struct store *
rs_sentinel_open(const char *url, const char *state_dir, enum store_fsync fs,
    char *err, size_t errlen)
{
	(void)state_dir;
	(void)fs;
	return rs_open_common(url, 1, err, errlen);
}

static struct store *
rs_cluster_open(const char *url, const char *state_dir, enum store_fsync fs,
    char *err, size_t errlen)
{
	(void)state_dir;
	(void)fs;
	return rs_open_common(url, 2, err, errlen);
}

/* --- requests --- */

struct rreq *
rs_req_new(struct rsess *s, enum rs_reqkind kind, store_range_cb cb,
    store_done_cb done, void *arg)
{
	struct rreq	*req;

	if ((req = calloc(1, sizeof(*req))) == NULL)
		return NULL;
	req->st = &s->st->base;
	req->s = s;
	rs_sess_ref(s);
	req->refs = 1;
	req->kind = kind;
	req->cb = cb;
	req->done = done;
	req->arg = arg;
	LIST_INSERT_HEAD(&s->reqs, req, entry);
	return req;
}

static void
rs_req_cancel(struct store_req *breq)
{
	struct rreq	*req = (struct rreq *)breq;
	struct rsess	*s = req->s;

	if (req->dead)
		return;
	req->dead = 1;
	LIST_REMOVE(req, entry);
	if (s->promoting == req) {
		/* The lease was won for nobody: give it back. */
		s->promoting = NULL;
		rs_demote(s);
	}
	rs_req_unref(req);
}

/* Completes a request before returning it: done now, NULL to the caller. */
struct store_req *
rs_done_now(store_done_cb done, void *arg, ssize_t n, int err)
{
	if (n < 0)
		errno = err;
	done(arg, n);
	return NULL;
}

void
rs_req_finish(struct rreq *req, ssize_t n, int err)
{
	struct rstore	*st = req->s->st;

	if (req->dead)
		return;
	req->dead = 1;
	LIST_REMOVE(req, entry);
	if (!st->closing && !req->s->closed) {
		if (n < 0)
			errno = err;
		req->done(req->arg, n);
	}
	rs_req_unref(req);	/* the user's */
}

/* --- the link's state --- */

static void
rs_health(struct rstore *st, int up)
{
	if (st->health == up)
		return;
	st->health = up;
	if (!st->closing && st->ev->health != NULL)
		st->ev->health(st->arg, up);
}

static struct rsess *
rs_first_parked(struct rstore *st)
{
	struct rsess	*s;

	LIST_FOREACH(s, &st->opening, oentry)
		if (s->parked)
			return s;
	return NULL;
}

void
rs_link_down(struct rstore *st, const char *fmt, ...)
{
	char		 msg[sizeof(st->lasterr)];
	struct rsess	*s;
	struct timeval	 tv;
	va_list		 ap;

	if (st->closing || st->link == LINK_DOWN)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Once per distinct reason: a dead server means a retry every 2 s. */
	if (strcmp(msg, st->lasterr) != 0) {
		log_warnx("store: redis: %s", msg);
		memcpy(st->lasterr, msg, sizeof(msg));
	}
	st->link = LINK_DOWN;
	evtimer_del(st->ev_timeout);
	rs_store_ref(st);
	/* Writes in flight fail (EIO) in the NULL replies this runs. */
	rs_drop_conn(st, &st->sen);
	rs_drop_conn(st, &st->sub);
	rs_drop_conn(st, &st->cmd);
	rs_cl_drop(st);
	util_tv(&tv, st->backoff);
	st->backoff = st->backoff * 2 > RS_BACKOFF_MAX ? RS_BACKOFF_MAX :
	    st->backoff * 2;
	if (!st->closing)
		evtimer_add(st->ev_retry, &tv);
	while (!st->closing && (s = rs_first_parked(st)) != NULL)
		rs_open_fail(s, EIO);
	rs_health(st, 0);
	rs_store_unref(st);
}

void
rs_link_up(struct rstore *st)
{
	struct store_sess	*bs;
	struct rsess		*s;
	uint64_t		 now = util_mono_ms();

	st->link = LINK_UP;
	evtimer_del(st->ev_timeout);
	st->backoff = RS_BACKOFF_MIN;
	if (st->lasterr[0] != '\0')
		log_info("store: redis: connected to %s:%d%s", st->master.host,
		    st->master.port, st->cluster ? " and the other masters" :
		    "");
	else
		log_debug("store: redis: connected to %s:%d%s",
		    st->master.host, st->master.port, st->cluster ?
		    " and the other masters" : "");
	st->lasterr[0] = '\0';
	rs_store_ref(st);
	rs_health(st, 1);
	while (!st->closing && st->link == LINK_UP &&
	    (s = rs_first_parked(st)) != NULL)
		rs_open_send(s);
	if (!st->closing && st->link == LINK_UP) {
		/* Leases first (their replies also tell whether the store lost
		 * writes), then queued writes, then resync and inboxes: what
		 * pub/sub lost while the link was down. */
		rs_feed_beat(st);
		rs_renew_all(st);
		LIST_FOREACH(bs, &st->base.sessions, entry)
			rs_flush_sess((struct rsess *)bs);
		rs_poll_all(st);
		rs_feed_up(st, now);
		st->next_renew = now + st->lease_ms / 3;
		st->next_watch = now + RS_WATCH_MS;
	}
	rs_store_unref(st);
}

/* --- reply dispatch --- */

static void
rs_on_fetch(struct rcmd *rc, redisReply *r)
{
	rs_fetch_learn(rc->s, r);
	if (rc->req == NULL || rc->req->kind == REQ_PROMOTE)
		rs_on_fill(rc, r);
	else if (rc->req->kind == REQ_RANGE)
		rs_on_range(rc, r);
	else
		rs_on_preload(rc, r);
}

void
rs_reply(redisAsyncContext *ac, void *rp, void *priv)
{
	struct rcmd	*rc = priv, *next;
	struct rstore	*st = rc->st;
	redisReply	*r = rp;
	int		 ro = 0;

	(void)ac;
	if (rc->tracked) {
		/* The server starts the next command on this connection
		 * only now: after a WAIT (which holds its connection up to
		 * the store-wait timeout) its deadline counts from here, or
		 * WAITs queued one behind another would take the link down
		 * and lapse the leases queued with them. */
		for (next = TAILQ_NEXT(rc, entry); next != NULL;
		    next = TAILQ_NEXT(next, entry))
			if (next->conn == rc->conn) {
				next->started = util_mono_ms();
				break;
			}
		TAILQ_REMOVE(&st->inflight, rc, entry);
		rc->tracked = 0;
	}
	if (rc->retried) {
		/* The last retry is back: writes held for it may go. */
		rc->retried = 0;
		if (rc->kind == RC_BATCH && --rc->s->noscript == 0 &&
		    !st->closing && !TAILQ_EMPTY(&rc->s->wq))
			rs_mark_dirty(rc->s);
	}
	if (r != NULL && r->type == REDIS_REPLY_ERROR) {
		if (rc->fmt != NULL && rc->script >= 0 &&
		    strncmp(r->str, "NOSCRIPT", 8) == 0) {
			if (!st->closing && rs_resend_eval(st, rc) == 0) {
				rc->retried = 1;
				if (rc->kind == RC_BATCH)
					rc->s->noscript++;
				return;		/* rc lives on */
			}
		} else if (strstr(r->str, "READONLY") != NULL)
			ro = 1;
		else if (st->cluster && !st->closing) {
			switch (rs_cl_redirect(rc, r)) {
			case 1:
				return;		/* rc lives on */
			case 2:
				r = NULL;	/* as on a lost connection */
				break;
			}
		}
	}
	/* The store is alive here: this context holds a reference. */
	if (!st->closing) {
		switch (rc->kind) {
		case RC_HS:
			rs_on_hs(rc, r);
			break;
		case RC_FIRE:
			break;
		case RC_SENTINEL:
			rs_on_sentinel(rc, r);
			break;
		case RC_ACQUIRE:
			rs_on_acquire(rc, r);
			break;
		case RC_PEEK:
			rs_on_peek(rc, r);
			break;
		case RC_POLL:
			rs_on_poll(rc, r);
			break;
		case RC_FETCH:
			rs_on_fetch(rc, r);
			break;
		case RC_BATCH:
			rs_on_batch(rc, r);
			break;
		case RC_RENEW:
			rs_on_renew(rc, r);
			break;
		case RC_INBOX:
			rs_on_inbox(rc, r);
			break;
		case RC_POST:
			rs_on_post(rc, r);
			break;
		case RC_TRIM_SCAN:
			rs_on_trim_scan(rc, r);
			break;
		case RC_TRIM:
			rs_on_trim(rc, r);
			break;
		case RC_DOC:
			rs_doc_reply(rc, r);
			break;
		case RC_SLOTS:
			rs_cl_on_slots(rc, r);
			break;
		case RC_WAIT:
			rs_on_wait(rc, r);
			break;
		}
		/* A replica now (failover): find the master again. */
		if (ro)
			rs_link_down(st, "%s:%d is read-only (a replica?)",
			    st->master.host, st->master.port);
	}
	rs_cmd_free(rc);
}

/* --- pub/sub messages and the tick --- */

/* "parley:{ID}:ev<suffix>" -> ID in id, 'e' or 'i' in *kind. */
static int
rs_parse_chan(const struct rstore *st, const char *ch, size_t len, char *id,
    char *kind)
{
	const char	*rb;
	size_t		 idlen, sl = strlen(st->chsuffix);

	if (len < 8 || memcmp(ch, "parley:{", 8) != 0 ||
	    (rb = memchr(ch + 8, '}', len - 8)) == NULL)
		return -1;
	idlen = (size_t)(rb - ch - 8);
	if (idlen == 0 || idlen > STORE_ID_MAX ||
	    len - (size_t)(rb - ch) != 4 + sl ||
	    memcmp(rb + 4, st->chsuffix, sl) != 0)
		return -1;
	if (memcmp(rb, "}:ev", 4) == 0)
		*kind = 'e';
	else if (memcmp(rb, "}:in", 4) == 0)
		*kind = 'i';
	else
		return -1;
	memcpy(id, ch + 8, idlen);
	id[idlen] = '\0';
	return 0;
}

void
rs_on_sub(redisAsyncContext *ac, void *rp, void *priv)
{
	struct rstore		*st = priv;
	redisReply		*r = rp;
	const redisReply	*k, *ch, *p;
	struct store_sess	*bs;
	struct rsess		*s;
	char			 id[STORE_ID_MAX + 1], kind;
	uint64_t		 last;

	(void)ac;
	if (r == NULL || st->closing || r->type != REDIS_REPLY_ARRAY ||
	    r->elements < 3 || !rs_isstr(r->element[0]) ||
	    !rs_isstr(r->element[1]))
		return;
	k = r->element[0];
	ch = r->element[1];
	p = r->element[2];
	if (strcmp(k->str, "subscribe") == 0) {
		if (strcmp(ch->str, RS_KEEP_CHAN) == 0 && !st->keep_seen &&
		    st->link == LINK_CONNECTING) {
			st->keep_seen = 1;
			st->hs_sub--;
			rs_hs_check(st);
			return;
		}
		/* From now on pub/sub tells this session what changes; what
		 * changed before, a read finds (while connecting, the link
		 * coming up reads every session). */
		if (st->link == LINK_UP &&
		    rs_parse_chan(st, ch->str, ch->len, id, &kind) == 0 &&
		    (bs = store_sess_find(&st->base, id)) != NULL &&
		    strcmp(rs_sess_chan((struct rsess *)bs), ch->str) == 0)
			rs_resync((struct rsess *)bs);
		return;
	}
	if (strcmp(k->str, "message") != 0 || !rs_isstr(p))
		return;
	if (strcmp(ch->str, st->ch_nodes) == 0) {
		rs_feed_heard(st, p->str, p->len);
		return;
	}
	if (rs_parse_chan(st, ch->str, ch->len, id, &kind) == -1 ||
	    (bs = store_sess_find(&st->base, id)) == NULL)
		return;
	s = (struct rsess *)bs;
	if (kind == 'e' && s->base.role == STORE_FOLLOWER) {
		if (rs_u64(p->str, p->len, &last) == -1)
			rs_poll_send(s);	/* "vacant", "trimmed": look now */
		else if (last > s->base.last_seq)
			rs_grown(s, last);
	} else if (kind == 'i' && s->base.role == STORE_OWNER)
		rs_inbox_read(s);
}

static void
rs_tick(evutil_socket_t fd, short what, void *arg)
{
	struct rstore		*st = arg;
	struct store_sess	*bs;
	struct rsess		*s;
	struct rcmd		*rc;
	uint64_t		 now = util_mono_ms();

	(void)fd;
	(void)what;
	if (st->last_tick != 0 && now - st->last_tick > 1000)
		log_debug("store: redis: tick %llu ms after the last",
		    (unsigned long long)(now - st->last_tick));
	st->last_tick = now;
	rs_store_ref(st);
	/* A command that does not answer holds up all behind it. */
	/* The oldest sent; one on another connection that started sooner
	 * is checked once it is first (at most a deadline late). */
	if (st->link == LINK_UP && (rc = TAILQ_FIRST(&st->inflight)) != NULL &&
	    now - (rc->started > rc->sent ? rc->started : rc->sent) >=
	    st->deadline_ms) {
		char	 name[RS_HOST_MAX + 8];

		rs_cl_name(st, rc->conn, name, sizeof(name));
		rs_link_down(st, "%s: no reply within %u ms", name,
		    st->deadline_ms);
	}
again_open:
	LIST_FOREACH(s, &st->opening, oentry)
		if (!st->closing && s->parked && now >= s->open_deadline) {
			rs_open_fail(s, EIO);
			goto again_open;
		}
	/* Someone else may hold the lease once ours could lapse. */
again_lease:
	LIST_FOREACH(bs, &st->base.sessions, entry) {
		s = (struct rsess *)bs;
		if (st->closing)
			break;
		if (s->base.role == STORE_OWNER && s->token[0] != '\0' &&
		    !s->failed && now - s->lease_from >= st->lease_ms) {
			rs_sess_fail(s, ESTALE, "its lease was not renewed for "
			    "%u ms: another process may own it now",
			    st->lease_ms);
			goto again_lease;
		}
	}
	if (!st->closing && st->link == LINK_UP) {
		if (st->cluster)
			rs_cl_retry(st);
		if (now >= st->next_renew) {
			rs_feed_beat(st);
			rs_renew_all(st);
			st->next_renew = now + st->lease_ms / 3;
		}
		rs_feed_tick(st, now);
		if ((st->sentinel || st->cluster) && now >= st->next_watch) {
			if (st->sentinel)
				rs_sentinel_watch(st, now);
			else
				rs_cl_watch(st, now);
			st->next_watch = now + RS_WATCH_MS;
		}
	}
	rs_store_unref(st);
}

/* --- synchronous calls --- */

static int
rs_exists(struct store *st, const char *id)
{
	(void)st;
	(void)id;
	return 0;	/* needs a round trip: asynchronous use only */
}

static int
rs_sess_open(struct store *st, const char *id, int create,
    struct store_sess **out)
{
	(void)st;
	(void)id;
	(void)create;
	*out = NULL;
	errno = ENOTSUP;	/* store_open_async() */
	return -1;
}

static int
rs_append(struct store_sess *s, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	(void)s;
	(void)seq;
	(void)ts;
	(void)json;
	(void)len;
	errno = ENOTSUP;	/* store_append_async() */
	return -1;
}

static int
rs_meta_write(struct store_sess *s, const char *json, size_t len)
{
	(void)s;
	(void)json;
	(void)len;
	errno = ENOTSUP;	/* store_meta_write_async() */
	return -1;
}

static char *
rs_meta_read(struct store_sess *bs)
{
	struct rsess	*s = (struct rsess *)bs;
	char		*p;

	if (s->doc == NULL) {
		errno = ENOENT;
		return NULL;
	}
	if ((p = malloc(s->doclen + 1)) == NULL)
		return NULL;
	memcpy(p, s->doc, s->doclen + 1);
	return p;
}

static char *
rs_meta_peek(struct store *st, const char *id)
{
	(void)st;
	(void)id;
	errno = ENOTSUP;
	return NULL;
}

static void
rs_sync(struct store *st)
{
	(void)st;	/* durability is the server's */
}

static int
rs_expire(struct store *st, uint64_t cutoff_ms)
{
	(void)st;
	(void)cutoff_ms;
	return 0;	/* keys expire by PEXPIRE */
}

/*
 * Synchronous store_range(): the session's cache only, never the network.
 * All of the requested records or EAGAIN, so a caller never mistakes a
 * partial answer for the end of the log.
 */
static int
rs_range(struct store_sess *bs, uint64_t after, size_t limit,
    store_range_cb cb, void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	uint64_t	 start, end = rs_sess_readable(s), stop;
	size_t		 n;

	start = after + 1 < s->base.first_seq ? s->base.first_seq : after + 1;
	if (start > end)
		return 0;
	stop = limit != 0 && limit - 1 < end - start ? start + limit - 1 : end;
	if (!rs_cache_covers(&s->cache, start, stop)) {
		errno = EAGAIN;
		return -1;
	}
	n = rs_cache_deliver(s, start, stop, cb, arg);
	return n > INT_MAX ? INT_MAX : (int)n;
}

static int
rs_healthy(struct store *bst)
{
	return ((struct rstore *)bst)->link == LINK_UP;
}

/* --- attach and close --- */

static int
rs_attach(struct store *bst, char *err, size_t errlen)
{
	struct rstore			*st = (struct rstore *)bst;
	const struct store_params	*p = &bst->params;
	const char			*slash;
	struct timeval			 tv = { 0, 0 };
	size_t				 n;

	if (st->live) {
		snprintf(err, errlen, "store: already attached");
		return -1;
	}
	n = p->node != NULL ? strlen(p->node) : 0;
	if (p->base == NULL || n == 0 || n > RS_NODE_MAX) {
		snprintf(err, errlen, "store: redis needs an event base and a "
		    "node name of 1 to %d bytes", RS_NODE_MAX);
		return -1;
	}
	if (p->lease_ms < RS_LEASE_MIN || p->retention_ms == 0) {
		snprintf(err, errlen, "store: redis needs a lease of at least "
		    "%d ms and a retention", RS_LEASE_MIN);
		return -1;
	}
	memcpy(st->node, p->node, n + 1);
	/* "<host-id>/<pid>": the host part decides same-host takeovers. */
	st->hostlen = (slash = strrchr(st->node, '/')) != NULL ?
	    (size_t)(slash - st->node) : SIZE_MAX;
	st->evbase = p->base;
	st->ev = p->ev;
	st->arg = p->arg;
	st->lease_ms = p->lease_ms;
	snprintf(st->lease_s, sizeof(st->lease_s), "%u", p->lease_ms);
	st->ttl_every = p->retention_ms / RS_TTL_EVERY_DIV;
	if (st->ttl_every > RS_TTL_EVERY_MAX)
		st->ttl_every = RS_TTL_EVERY_MAX;
	snprintf(st->retention_s, sizeof(st->retention_s), "%" PRIu64,
	    p->retention_ms + st->ttl_every);
	/* WAIT holds the connection: its timeout stays under the deadline
	 * every command gets. */
	st->wait_n = p->wait_replicas;
	st->wait_ms = p->wait_ms == 0 ? 1000 : p->wait_ms;
	if (st->wait_n > 0 && st->wait_ms >= st->deadline_ms) {
		snprintf(err, errlen, "store: the WAIT timeout (%u ms) must "
		    "be under the command deadline (%u ms)", st->wait_ms,
		    st->deadline_ms);
		return -1;
	}
	st->ev_tick = event_new(p->base, -1, EV_PERSIST, rs_tick, st);
	st->ev_retry = evtimer_new(p->base, rs_retry_cb, st);
	st->ev_timeout = evtimer_new(p->base, rs_timeout_cb, st);
	st->ev_flush = event_new(p->base, -1, 0, rs_flush_cb, st);
	st->ev_kill = event_new(p->base, -1, 0, rs_kill_cb, st);
	if (st->ev_tick == NULL || st->ev_retry == NULL ||
	    st->ev_timeout == NULL || st->ev_flush == NULL ||
	    st->ev_kill == NULL) {
		snprintf(err, errlen, "store: cannot create events");
		return -1;	/* rs_close frees them */
	}
	st->live = 1;
	util_tv(&tv, RS_TICK_MS);
	evtimer_add(st->ev_tick, &tv);
	/* Connect from the loop: no callback before attach returns. */
	tv.tv_sec = 0;
	tv.tv_usec = 0;
	evtimer_add(st->ev_retry, &tv);
	return 0;
}

static void
rs_event_free(struct event **ev)
{
	if (*ev != NULL) {
		event_free(*ev);
		*ev = NULL;
	}
}

/*
 * Writes what the command connection has buffered (the releases the
 * session closes just queued) without waiting: the loop may not run again
 * before the process exits.
 */
void
rs_flush_out(struct rconn *conn)
{
	int	 done = 0, i;

	if (conn->ac == NULL || !conn->connected)
		return;
	for (i = 0; i < 64 && !done; i++)
		if (redisBufferWrite(&conn->ac->c, &done) == REDIS_ERR)
			break;
}

static void
rs_close(struct store *bst)
{
	struct rstore	*st = (struct rstore *)bst;
	struct rsess	*s;

	/* store.c closed the linked sessions; opening ones go silently. */
	st->closing = 1;
	while ((s = LIST_FIRST(&st->opening)) != NULL) {
		LIST_REMOVE(s, oentry);
		s->opening = 0;
		s->closed = 1;
		rs_sess_unref(s);
	}
	while ((s = TAILQ_FIRST(&st->dirty)) != NULL) {
		TAILQ_REMOVE(&st->dirty, s, dentry);
		s->dirty = 0;
		rs_sess_unref(s);
	}
	rs_doc_close(st);
	rs_feed_free(st);
	rs_event_free(&st->ev_tick);
	rs_event_free(&st->ev_retry);
	rs_event_free(&st->ev_timeout);
	rs_event_free(&st->ev_flush);
	rs_event_free(&st->ev_kill);
	rs_flush_out(&st->cmd);
	rs_cl_flush_out(st);
	rs_drop_conn(st, &st->sen);
	rs_drop_conn(st, &st->sub);
	rs_drop_conn(st, &st->cmd);
	rs_cl_drop(st);
	rs_store_unref(st);
}
