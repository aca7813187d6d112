/*
 * Redis store backend (schemes "redis" and "sentinel"): sessions live in
 * Redis so that any worker on any host can serve them; one process owns a
 * session at a time (a lease), the others follow it.
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
 * - A timer (RS_TICK_MS) checks command deadlines, renews leases every
 *   lease/3, fails owners whose lease could not be renewed for a whole
 *   lease, and once a second re-reads every follower's state and every
 *   owner's inbox (so a lost notification costs at most a second).
 * - User callbacks may call anything, including store_close(): code that
 *   goes on after one holds a reference and re-checks closed/closing.
 */
#include <sys/types.h>
#include <sys/queue.h>
#include <sys/time.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

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

static const char *const rs_scripts[SC_COUNT] = {
	/* KEYS log meta owner fence in kb; ARGV token retention prev inpos
	 * channel, then seq ts json per record */
	[SC_APPEND] =
	"if redis.call('GET', KEYS[3]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"local last = redis.call('HGET', KEYS[2], 'last') or '0'\n"
	"if last ~= ARGV[3] then\n"
	"  return redis.error_reply('SEQ ' .. last)\n"
	"end\n"
	"local n = 0\n"
	"for i = 6, #ARGV - 2, 3 do\n"
	"  redis.call('XADD', KEYS[1], ARGV[i] .. '-0', 't', ARGV[i + 1],\n"
	"    'e', ARGV[i + 2])\n"
	"  n = i\n"
	"end\n"
	"if n > 0 then redis.call('HSET', KEYS[2], 'last', ARGV[n]) end\n"
	"if ARGV[4] ~= '' then\n"
	"  redis.call('HSET', KEYS[2], 'inpos', ARGV[4])\n"
	"  redis.call('XTRIM', KEYS[5], 'MINID', ARGV[4])\n"
	"end\n"
	"for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]}) do\n"
	"  " RS_TTL("k", "ARGV[2]")
	"end\n"
	"if n > 0 then redis.call('PUBLISH', ARGV[5], ARGV[n]) end\n"
	"return 1\n",
	/* KEYS log meta owner fence in kb; ARGV token retention doc prev.
	 * The log must end where the appends queued before it left it: a
	 * meta write never lands behind an append that did not. */
	[SC_META] =
	"if redis.call('GET', KEYS[3]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"local last = redis.call('HGET', KEYS[2], 'last') or '0'\n"
	"if last ~= ARGV[4] then\n"
	"  return redis.error_reply('SEQ ' .. last)\n"
	"end\n"
	"redis.call('HSET', KEYS[2], 'doc', ARGV[3])\n"
	"for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]}) do\n"
	"  " RS_TTL("k", "ARGV[2]")
	"end\n"
	"return 1\n",
	/* KEYS log meta owner fence in kb; ARGV token lease retention.  An
	 * open session's keys must not expire under it, idle or not. */
	[SC_RENEW] =
	"if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {0} end\n"
	"redis.call('PEXPIRE', KEYS[3], ARGV[2])\n"
	"for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]}) do\n"
	"  " RS_TTL("k", "ARGV[3]")
	"end\n"
	"return {1, redis.call('HGET', KEYS[2], 'last') or '0'}\n",
	/* KEYS log meta owner fence in kb; ARGV node lease create force
	 * retention */
	[SC_ACQUIRE] =
	"local cur = redis.call('GET', KEYS[3])\n"
	"if cur and cur ~= ARGV[4] then return {0, cur} end\n"
	"if ARGV[3] ~= '1' and\n"
	"    redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then\n"
	"  return {-1}\n"
	"end\n"
	"local tok = ARGV[1] .. '#' .. redis.call('INCR', KEYS[4])\n"
	"redis.call('SET', KEYS[3], tok, 'PX', ARGV[2])\n"
	"redis.call('HSETNX', KEYS[2], 'last', '0')\n"
	"for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]}) do\n"
	"  " RS_TTL("k", "ARGV[5]")
	"end\n"
	"local m = redis.call('HMGET', KEYS[2], 'doc', 'last', 'inpos')\n"
	"local f = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)\n"
	"return {1, tok, m[1], m[2], m[3], f[1] and f[1][1] or false}\n",
	/* KEYS owner; ARGV token channel */
	[SC_RELEASE] =
	"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
	"redis.call('DEL', KEYS[1])\n"
	"redis.call('PUBLISH', ARGV[2], 'vacant')\n"
	"return 1\n",
	/* KEYS log meta owner; ARGV with_doc */
	[SC_PEEK] =
	"local f = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)\n"
	"local doc = false\n"
	"if ARGV[1] == '1' then doc = redis.call('HGET', KEYS[2], 'doc') end\n"
	"return {redis.call('HGET', KEYS[2], 'last') or '0',\n"
	"  redis.call('EXISTS', KEYS[3]), f[1] and f[1][1] or false, doc}\n",
	/* KEYS in; ARGV message retention channel maxlen */
	[SC_POST] =
	"local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*',\n"
	"  'm', ARGV[1])\n"
	RS_TTL("KEYS[1]", "ARGV[2]")
	"redis.call('PUBLISH', ARGV[3], id)\n"
	"return id\n",
	/* KEYS log owner; ARGV token minid */
	[SC_TRIM] =
	"if redis.call('GET', KEYS[2]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"return redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])\n",
	[SC_DOCPUT] = rs_lua_docput,
	[SC_DOCDEL] = rs_lua_docdel,
};


static struct store	*rs_redis_open(const char *, const char *,
			    enum store_fsync, char *, size_t);
static struct store	*rs_sentinel_open(const char *, const char *,
			    enum store_fsync, char *, size_t);
static void		 rs_close(struct store *);
static int		 rs_exists(struct store *, const char *);
static int		 rs_sess_open(struct store *, const char *, int,
			    struct store_sess **);
static void		 rs_sess_close(struct store_sess *);
static int		 rs_append(struct store_sess *, uint64_t, uint64_t,
			    const char *, size_t);
static int		 rs_range(struct store_sess *, uint64_t, size_t,
			    store_range_cb, void *);
static int		 rs_meta_write(struct store_sess *, const char *,
			    size_t);
static char		*rs_meta_read(struct store_sess *);
static char		*rs_meta_peek(struct store *, const char *);
static void		 rs_sync(struct store *);
static int		 rs_trim(struct store_sess *, uint64_t);
static int		 rs_expire(struct store *, uint64_t);
static int		 rs_attach(struct store *, char *, size_t);
static int		 rs_healthy(struct store *);
static int		 rs_ping(struct store *, unsigned, char *, size_t);
static void		 rs_open_async(struct store *, const char *, int,
			    size_t, store_open_cb, void *);
static int		 rs_append_async(struct store_sess *, uint64_t,
			    uint64_t, const char *, size_t);
static int		 rs_meta_write_async(struct store_sess *,
			    const char *, size_t);
static struct store_req	*rs_range_async(struct store_sess *, uint64_t,
			    size_t, store_range_cb, store_done_cb, void *);
static struct store_req	*rs_preload_async(struct store_sess *, uint64_t,
			    store_done_cb, void *);
static void		 rs_req_cancel(struct store_req *);
static struct store_req	*rs_post(struct store_sess *, const char *, size_t,
			    store_done_cb, void *);
static struct store_req	*rs_promote(struct store_sess *, store_done_cb,
			    void *);

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
}

RS_OPS(store_redis_ops, "redis", rs_redis_open);
RS_OPS(store_sentinel_ops, "sentinel", rs_sentinel_open);

static void	 rs_reply(redisAsyncContext *, void *, void *);
static void	 rs_on_sub(redisAsyncContext *, void *, void *);
static void	 rs_link_down(struct rstore *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	 rs_flush_sess(struct rsess *);
static void	 rs_inbox_read(struct rsess *);
static void	 rs_poll_send(struct rsess *);
static int	 rs_fill_start(struct rsess *, struct rreq *);
static int	 rs_batch_send(struct rsess *);

/* --- small helpers --- */

/* Decimal digits p[0..len) into *out; -1 if none, other bytes, overflow. */
static int
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
static int
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

static int
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
args_init(struct rargs *a, int cap, int numcap)
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
args_free(struct rargs *a)
{
	if (a->v != a->iv)
		free(a->v);
	if (a->len != a->ilen)
		free(a->len);
	if (a->num != a->inum)
		free(a->num);
}

void
args_add(struct rargs *a, const void *p, size_t len)
{
	if (a->oom || a->n >= a->cap) {
		a->oom = 1;
		return;
	}
	a->v[a->n] = p;
	a->len[a->n++] = len;
}

void
args_str(struct rargs *a, const char *s)
{
	args_add(a, s, strlen(s));
}

void
args_u64(struct rargs *a, uint64_t v)
{
	char	*p;
	int	 n;

	if (a->oom || a->nnum >= a->numcap) {
		a->oom = 1;
		return;
	}
	p = a->num + (size_t)a->nnum++ * RS_NUMLEN;
	n = snprintf(p, RS_NUMLEN, "%" PRIu64, v);
	args_add(a, p, (size_t)n);
}

/* "EVALSHA <sha> <nkeys>" */
void
args_script(struct rargs *a, struct rstore *st, int script, int nkeys)
{
	args_str(a, "EVALSHA");
	args_add(a, st->sha[script], 40);
	args_u64(a, (uint64_t)nkeys);
}

/* --- records and the cache --- */

static struct rrec *
rec_new(uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct rrec	*r;

	if ((r = malloc(sizeof(*r) + len + 1)) == NULL)
		return NULL;
	r->seq = seq;
	r->ts = ts;
	r->len = len;
	memcpy(r->json, json, len);
	r->json[len] = '\0';
	return r;
}

static size_t
rec_size(const struct rrec *r)
{
	return sizeof(*r) + r->len + 1;
}

static struct rrec *
cache_at(const struct rcache *c, size_t i)
{
	return c->v[(c->head + i) & (c->cap - 1)];
}

static uint64_t
cache_first(const struct rcache *c)
{
	return cache_at(c, 0)->seq;
}

static uint64_t
cache_last(const struct rcache *c)
{
	return cache_at(c, c->n - 1)->seq;
}

static int
cache_grow(struct rcache *c)
{
	struct rrec	**v;
	size_t		 i, ncap;

	if (c->n < c->cap)
		return 0;
	ncap = c->cap ? c->cap * 2 : 64;
	if (ncap > SIZE_MAX / sizeof(*v) ||
	    (v = malloc(ncap * sizeof(*v))) == NULL)
		return -1;
	for (i = 0; i < c->n; i++)
		v[i] = cache_at(c, i);
	free(c->v);
	c->v = v;
	c->cap = ncap;
	c->head = 0;
	return 0;
}

static int
cache_push_back(struct rcache *c, struct rrec *r)
{
	if (cache_grow(c) == -1)
		return -1;
	c->v[(c->head + c->n) & (c->cap - 1)] = r;
	c->n++;
	c->bytes += rec_size(r);
	return 0;
}

static int
cache_push_front(struct rcache *c, struct rrec *r)
{
	if (cache_grow(c) == -1)
		return -1;
	c->head = (c->head - 1) & (c->cap - 1);
	c->v[c->head] = r;
	c->n++;
	c->bytes += rec_size(r);
	return 0;
}

static struct rrec *
cache_pop_front(struct rcache *c)
{
	struct rrec	*r;

	r = c->v[c->head];
	c->head = (c->head + 1) & (c->cap - 1);
	c->n--;
	c->bytes -= rec_size(r);
	return r;
}

static void
cache_clear(struct rcache *c)
{
	while (c->n > 0)
		free(cache_pop_front(c));
}

static void
cache_free(struct rcache *c)
{
	cache_clear(c);
	free(c->v);
	c->v = NULL;
	c->cap = 0;
}

static struct rrec *
cache_find(const struct rcache *c, uint64_t seq)
{
	if (c->n == 0 || seq < cache_first(c) || seq > cache_last(c))
		return NULL;
	return cache_at(c, (size_t)(seq - cache_first(c)));
}

static int
cache_covers(const struct rcache *c, uint64_t from, uint64_t to)
{
	if (from > to)
		return 1;
	return c->n > 0 && from >= cache_first(c) && to <= cache_last(c);
}

/* Drops the oldest records beyond the session's bounds. */
static void
sess_cache_bound(struct rsess *s)
{
	struct rcache	*c = &s->cache;

	while (c->n > 0 && (c->n > s->cmax_recs || c->bytes > s->cmax_bytes))
		free(cache_pop_front(c));
}

/* Drops cached records the log no longer holds (trimmed). */
static void
sess_cache_below(struct rsess *s, uint64_t first)
{
	struct rcache	*c = &s->cache;

	while (c->n > 0 && cache_first(c) < first)
		free(cache_pop_front(c));
}

/*
 * Adds a record after the cached run (taking ownership).  Older records
 * are dropped; one that leaves a hole restarts the run, which must stay
 * contiguous for cache_find().
 */
static void
sess_cache_push(struct rsess *s, struct rrec *r)
{
	struct rcache	*c = &s->cache;

	if (c->n > 0) {
		if (r->seq <= cache_last(c)) {
			free(r);
			return;
		}
		if (r->seq != cache_last(c) + 1)
			cache_clear(c);
	}
	if (cache_push_back(c, r) == -1) {
		free(r);
		return;
	}
	sess_cache_bound(s);
}

/* The last seq store_range() may read: only durable records. */
static uint64_t
sess_readable(const struct rsess *s)
{
	return s->base.role == STORE_OWNER ? s->base.durable_seq :
	    s->base.last_seq;
}

/* Copies a record read from the store into the cache if it extends it. */
static void
sess_cache_offer(struct rsess *s, uint64_t seq, uint64_t ts,
    const char *json, size_t len)
{
	struct rrec	*r;

	if (seq > sess_readable(s) || seq < s->base.first_seq)
		return;
	if (s->cache.n > 0 && seq != cache_last(&s->cache) + 1)
		return;
	if ((r = rec_new(seq, ts, json, len)) != NULL)
		sess_cache_push(s, r);
}

/* --- references --- */

static void
rs_store_ref(struct rstore *st)
{
	st->refs++;
}

static void
rs_store_unref(struct rstore *st)
{
	if (--st->refs > 0)
		return;
	if (st->pass != NULL) {
		explicit_bzero(st->pass, strlen(st->pass));
		free(st->pass);
	}
	free(st);
}

static void
wop_free(struct wop *op)
{
	free(op->rec);
	free(op->doc);
	free(op);
}

static void
wopq_free(struct wopq *q)
{
	struct wop	*op;

	while ((op = TAILQ_FIRST(q)) != NULL) {
		TAILQ_REMOVE(q, op, entry);
		wop_free(op);
	}
}

static void
batch_free(struct wbatch *b)
{
	wopq_free(&b->ops);
	free(b);
}

static void
rs_sess_ref(struct rsess *s)
{
	s->refs++;
}

static void
rs_sess_unref(struct rsess *s)
{
	if (--s->refs > 0)
		return;
	wopq_free(&s->wq);
	cache_free(&s->cache);
	free(s->doc);
	free(s);
}

void
rs_req_unref(struct rreq *req)
{
	if (--req->refs > 0)
		return;
	cache_free(&req->tmp);
	rs_doc_req_free(req);
	rs_sess_unref(req->s);
	free(req);
}

struct rcmd *
rcmd_new(struct rstore *st, enum rs_kind kind, struct rsess *s,
    struct rreq *req)
{
	struct rcmd	*rc;

	if ((rc = calloc(1, sizeof(*rc))) == NULL)
		return NULL;
	rc->st = st;
	rc->kind = kind;
	rc->script = -1;
	rc->epoch = st->epoch;
	if ((rc->s = s) != NULL)
		rs_sess_ref(s);
	if ((rc->req = req) != NULL)
		req->refs++;
	return rc;
}

static void
rcmd_free(struct rcmd *rc)
{
	if (rc->tracked)
		TAILQ_REMOVE(&rc->st->inflight, rc, entry);
	if (rc->b != NULL)
		batch_free(rc->b);
	if (rc->req != NULL)
		rs_req_unref(rc->req);
	if (rc->s != NULL)
		rs_sess_unref(rc->s);
	free(rc->fmt);
	free(rc);
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
static int
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
	st->sentinel = sentinel;
	if (rs_parse_url(st, url, sentinel, err, errlen) == -1) {
		save = errno;
		rs_store_unref(st);
		errno = save;
		return NULL;
	}
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
	return NULL;
}

static void
rs_health(struct rstore *st, int up)
{
	if (st->health == up)
		return;
	st->health = up;
	if (!st->closing && st->ev->health != NULL)
		st->ev->health(st->arg, up);
}

/*
 * Lets go of a context.  hiredis calls its pending reply callbacks with
 * NULL (now, or when the callback we are in returns); a connected context
 * then calls rs_on_disconnect(), which drops its reference on the store.
 */
static void
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
static int
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

/* Sends a command; rc is freed on failure.  0 or -1. */
int
rs_send(struct rstore *st, struct rcmd *rc, struct rargs *a)
{
	redisAsyncContext	*ac;
	char			*cmd = NULL;
	int			 len;

	if (rc->conn == NULL)
		rc->conn = &st->cmd;
	ac = rc->conn->ac;
	if (a->oom || ac == NULL || !rc->conn->connected || st->closing ||
	    (st->link != LINK_UP && rc->kind != RC_HS &&
	    rc->kind != RC_SENTINEL))
		goto fail;
	if ((len = redisFormatCommandArgv(&cmd, a->n, a->v, a->len)) < 0) {
		cmd = NULL;
		goto fail;
	}
	if (redisAsyncFormattedCommand(ac, rs_reply, rc, cmd, (size_t)len) !=
	    REDIS_OK)
		goto fail;
	/* Kept for a NOSCRIPT retry (the script cache was flushed). */
	if (rc->script >= 0) {
		rc->fmt = cmd;
		rc->fmtlen = (size_t)len;
	} else
		redisFreeCommand(cmd);
	rc->sent = util_mono_ms();
	if (rc->conn == &st->cmd) {
		TAILQ_INSERT_TAIL(&st->inflight, rc, entry);
		rc->tracked = 1;
	}
	return 0;
fail:
	if (cmd != NULL)
		redisFreeCommand(cmd);
	rcmd_free(rc);
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
static int
rs_resend_eval(struct rstore *st, struct rcmd *rc)
{
	static const char	 sha_hdr[] = "$7\r\nEVALSHA\r\n$40\r\n";
	const char		*body = rs_scripts[rc->script];
	char			*eol, *nf, hdr[48];
	size_t			 hl, skip, blen = strlen(body), nlen;
	int			 n;

	if (rc->fmt == NULL || st->cmd.ac == NULL || st->link != LINK_UP ||
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
	if (redisAsyncFormattedCommand(st->cmd.ac, rs_reply, rc, nf, nlen) !=
	    REDIS_OK) {
		free(nf);
		return -1;
	}
	free(nf);
	free(rc->fmt);
	rc->fmt = NULL;		/* once only */
	rc->fmtlen = 0;
	rc->sent = util_mono_ms();
	TAILQ_INSERT_TAIL(&st->inflight, rc, entry);
	rc->tracked = 1;
	log_debug("store: redis: script %d was not loaded, sent it in full",
	    rc->script);
	return 0;
}

/* A failure inside onConnect: hiredis 0.14 must not free there. */
static void
rs_link_later(struct rstore *st)
{
	event_active(st->ev_kill, EV_TIMEOUT, 1);
}

static void
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

static void
rs_hs_send(struct rstore *st, struct rconn *conn, enum rs_hs step, int i)
{
	struct rargs	 a;
	struct rcmd	*rc;
	char		 db[RS_NUMLEN];

	if ((rc = rcmd_new(st, RC_HS, NULL, NULL)) == NULL) {
		rs_link_later(st);
		return;
	}
	rc->conn = conn;
	rc->u1 = step;
	rc->u2 = (uint64_t)i;
	args_init(&a, 4, 0);
	switch (step) {
	case HS_AUTH:
		args_str(&a, "AUTH");
		args_str(&a, st->pass);
		break;
	case HS_SELECT:
		snprintf(db, sizeof(db), "%d", st->db);
		args_str(&a, "SELECT");
		args_str(&a, db);
		break;
	case HS_ROLE:
		args_str(&a, "ROLE");
		break;
	case HS_SCRIPT:
		args_str(&a, "SCRIPT");
		args_str(&a, "LOAD");
		args_str(&a, rs_scripts[i]);
		break;
	}
	if (rs_send(st, rc, &a) == -1)
		rs_link_later(st);
	else if (conn == &st->sub)
		st->hs_sub++;
	else
		st->hs_cmd++;
	args_free(&a);
}

static void
rs_subscribe(struct rstore *st, const char *chan)
{
	if (st->sub.ac == NULL || !st->sub.connected)
		return;
	redisAsyncCommand(st->sub.ac, rs_on_sub, st, "SUBSCRIBE %s", chan);
}

static void
rs_unsubscribe(struct rstore *st, const char *chan)
{
	if (st->sub.ac == NULL || !st->sub.connected)
		return;
	/* hiredis keeps no callback for UNSUBSCRIBE: its reply goes to the
	 * channel's SUBSCRIBE callback, which ignores it. */
	redisAsyncCommand(st->sub.ac, NULL, NULL, "UNSUBSCRIBE %s", chan);
}

/* The channel a session listens on: owners hear posts, followers appends. */
static const char *
sess_chan(const struct rsess *s)
{
	return s->base.role == STORE_OWNER && s->promoting == NULL ?
	    s->ch_in : s->ch_ev;
}

static void
rs_sentinel_ask(struct rstore *st)
{
	struct rargs	 a;
	struct rcmd	*rc;

	if ((rc = rcmd_new(st, RC_SENTINEL, NULL, NULL)) == NULL) {
		rs_link_later(st);
		return;
	}
	rc->conn = &st->sen;
	args_init(&a, 3, 0);
	args_str(&a, "SENTINEL");
	args_str(&a, "get-master-addr-by-name");
	args_str(&a, st->name);
	if (rs_send(st, rc, &a) == -1)
		rs_link_later(st);
	else {
		st->sen_busy = 1;
		st->sen_sent = util_mono_ms();
	}
	args_free(&a);
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
		rs_sentinel_ask(st);
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
	/* Subscriber: the keep channel's confirmation ends its handshake;
	 * then every open session's channel. */
	st->hs_sub_sent = 1;
	if (st->pass != NULL)
		rs_hs_send(st, conn, HS_AUTH, 0);
	st->hs_sub++;
	if (redisAsyncCommand(st->sub.ac, rs_on_sub, st, "SUBSCRIBE %s",
	    RS_KEEP_CHAN) != REDIS_OK) {
		rs_link_later(st);
		return;
	}
	LIST_FOREACH(bs, &st->base.sessions, entry)
		rs_subscribe(st, sess_chan((struct rsess *)bs));
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

static void	rs_link_up(struct rstore *);

static void
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
	} else {
		st->master = st->hosts[0];
		rs_connect_master(st);
	}
}

static void	rs_open_send(struct rsess *);
static void	rs_open_fail(struct rsess *, int);
static void	rs_renew_all(struct rstore *);
static void	rs_poll_all(struct rstore *);

static struct rsess *
rs_first_parked(struct rstore *st)
{
	struct rsess	*s;

	LIST_FOREACH(s, &st->opening, oentry)
		if (s->parked)
			return s;
	return NULL;
}

static void
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

static void
rs_link_up(struct rstore *st)
{
	struct store_sess	*bs;
	struct rsess		*s;
	uint64_t		 now = util_mono_ms();

	st->link = LINK_UP;
	evtimer_del(st->ev_timeout);
	st->backoff = RS_BACKOFF_MIN;
	if (st->lasterr[0] != '\0')
		log_info("store: redis: connected to %s:%d", st->master.host,
		    st->master.port);
	else
		log_debug("store: redis: connected to %s:%d",
		    st->master.host, st->master.port);
	st->lasterr[0] = '\0';
	rs_store_ref(st);
	rs_health(st, 1);
	while (!st->closing && st->link == LINK_UP &&
	    (s = rs_first_parked(st)) != NULL)
		rs_open_send(s);
	if (!st->closing && st->link == LINK_UP) {
		/* Leases first (their replies also tell whether the store lost
		 * writes), then queued writes, then resync and inboxes. */
		rs_renew_all(st);
		LIST_FOREACH(bs, &st->base.sessions, entry)
			rs_flush_sess((struct rsess *)bs);
		rs_poll_all(st);
		st->next_renew = now + st->lease_ms / 3;
		st->next_poll = now + st->poll_ms;
	}
	rs_store_unref(st);
}

static void
rs_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rstore	*st = arg;

	(void)fd;
	(void)what;
	rs_store_ref(st);
	rs_link_start(st);
	rs_store_unref(st);
}

static void
rs_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rstore	*st = arg;

	(void)fd;
	(void)what;
	if (st->link != LINK_CONNECTING)
		return;
	rs_store_ref(st);
	if (st->sentinel && !st->sen_answered) {
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

static void
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
		rs_link_down(st, "%s:%d: %s: %s", st->master.host,
		    st->master.port, steps[rc->u1], r->str);
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
static void
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
static void
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

/* --- sessions --- */

static struct rsess *
rs_sess_new(struct rstore *st, const char *id)
{
	struct rsess	*s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->refs = 1;
	s->st = st;
	s->base.store = &st->base;
	memcpy(s->base.id, id, strlen(id) + 1);	/* checked by store.c */
	s->base.first_seq = 1;
	TAILQ_INIT(&s->wq);
	TAILQ_INIT(&s->inflight);
	LIST_INIT(&s->reqs);
	s->cmax_recs = RS_CACHE_RECS;
	s->cmax_bytes = RS_CACHE_BYTES;
	snprintf(s->k_log, sizeof(s->k_log), "parley:{%s}:log", id);
	snprintf(s->k_meta, sizeof(s->k_meta), "parley:{%s}:meta", id);
	snprintf(s->k_owner, sizeof(s->k_owner), "parley:{%s}:owner", id);
	snprintf(s->k_fence, sizeof(s->k_fence), "parley:{%s}:fence", id);
	snprintf(s->k_in, sizeof(s->k_in), "parley:{%s}:in", id);
	snprintf(s->k_kb, sizeof(s->k_kb), "parley:{%s}:kb", id);
	snprintf(s->ch_ev, sizeof(s->ch_ev), "parley:{%s}:ev%s", id,
	    st->chsuffix);
	snprintf(s->ch_in, sizeof(s->ch_in), "parley:{%s}:in%s", id,
	    st->chsuffix);
	return s;
}

/* KEYS log meta owner fence in kb, after "EVALSHA sha RS_SKEYS". */
static void
args_skeys(struct rargs *a, const struct rsess *s)
{
	args_str(a, s->k_log);
	args_str(a, s->k_meta);
	args_str(a, s->k_owner);
	args_str(a, s->k_fence);
	args_str(a, s->k_in);
	args_str(a, s->k_kb);
}

/* Gives a lease back if it is still this token's (best effort). */
static void
rs_release_token(struct rsess *s, const char *token, size_t len)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;

	if (len == 0 || st->link != LINK_UP ||
	    (rc = rcmd_new(st, RC_FIRE, NULL, NULL)) == NULL)
		return;
	args_init(&a, 8, 1);
	args_script(&a, st, SC_RELEASE, 1);
	args_str(&a, s->k_owner);
	args_add(&a, token, len);
	args_str(&a, s->ch_ev);
	rs_eval(st, rc, SC_RELEASE, &a);
	args_free(&a);
}

/* Back to follower after a promote that was cancelled or failed. */
static void
rs_demote(struct rsess *s)
{
	rs_release_token(s, s->token, strlen(s->token));
	s->token[0] = '\0';
	s->lease_gen++;
	s->base.role = STORE_FOLLOWER;
	s->base.durable_seq = s->base.last_seq;
}

static int
rs_acquire_send(struct rsess *s, struct rreq *req, int create,
    const char *force, size_t forcelen)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;
	int		 r;

	if ((rc = rcmd_new(st, RC_ACQUIRE, s, req)) == NULL)
		return -1;
	rc->u1 = (uint64_t)create;
	args_init(&a, 16, 1);
	args_script(&a, st, SC_ACQUIRE, RS_SKEYS);
	args_skeys(&a, s);
	args_str(&a, st->node);
	args_str(&a, st->lease_s);
	args_str(&a, create ? "1" : "0");
	args_add(&a, force, forcelen);
	args_str(&a, rs_retention(s));
	r = rs_eval(st, rc, SC_ACQUIRE, &a);
	args_free(&a);
	return r;
}

/*
 * May this process take a lease held by holder ("<node>#<fence>") at
 * once?  Yes if it is its own (a handle it lost: node names are unique
 * per process) or a dead process's of this host (kill(pid, 0) says no
 * such process): nobody else can be using it.
 */
static int
rs_takeover_ok(const struct rstore *st, const char *holder, size_t len)
{
	const char	*hash, *slash;
	size_t		 nodelen;
	uint64_t	 pid;

	if ((hash = memrchr(holder, '#', len)) == NULL)
		return 0;
	nodelen = (size_t)(hash - holder);
	if (nodelen == strlen(st->node) && memcmp(holder, st->node,
	    nodelen) == 0)
		return 1;
	if (st->hostlen == SIZE_MAX ||
	    (slash = memrchr(holder, '/', nodelen)) == NULL ||
	    (size_t)(slash - holder) != st->hostlen ||
	    memcmp(holder, st->node, st->hostlen) != 0)
		return 0;
	if (rs_u64(slash + 1, (size_t)(hash - slash - 1), &pid) == -1 ||
	    pid == 0 || pid > INT_MAX)
		return 0;
	return kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

/* Takes what an acquire that won answered: token, meta, last, inpos, first. */
static int
rs_take_lease(struct rsess *s, const redisReply *r, uint64_t sent)
{
	redisReply		**e = r->element;
	uint64_t		 last, first;
	char			*doc = NULL;

	if (r->elements < 6 || !rs_isstr(e[1]) ||
	    e[1]->len >= sizeof(s->token) || rs_replyu64(e[3], &last) == -1)
		return -1;
	if (rs_isstr(e[5])) {
		if (rs_idseq(e[5]->str, e[5]->len, &first) == -1)
			return -1;
	} else
		first = last + 1;
	if (rs_isstr(e[2])) {
		if (e[2]->len > STORE_META_MAX ||
		    (doc = malloc(e[2]->len + 1)) == NULL)
			return -1;
		memcpy(doc, e[2]->str, e[2]->len + 1);
		free(s->doc);
		s->doc = doc;
		s->doclen = e[2]->len;
	}
	memcpy(s->token, e[1]->str, e[1]->len);
	s->token[e[1]->len] = '\0';
	s->lease_gen++;
	s->lease_from = sent;
	if (rs_isstr(e[4]) && e[4]->len < sizeof(s->in_cursor))
		memcpy(s->in_cursor, e[4]->str, e[4]->len + 1);
	else
		s->in_cursor[0] = '\0';
	s->inpos_next[0] = '\0';
	s->base.last_seq = s->base.durable_seq = s->sent_seq = last;
	s->base.first_seq = first;
	sess_cache_below(s, first);
	return 0;
}

static void
rs_open_fail(struct rsess *s, int err)
{
	struct rstore	*st = s->st;
	store_open_cb	 cb = s->open_cb;
	void		*arg = s->open_arg;
	int		 closing = st->closing;

	LIST_REMOVE(s, oentry);
	s->opening = 0;
	s->parked = 0;
	s->closed = 1;
	rs_sess_unref(s);
	if (!closing)
		cb(arg, err, NULL, 0);
}

static void
rs_open_done(struct rsess *s)
{
	struct rstore	*st = s->st;
	store_open_cb	 cb = s->open_cb;
	void		*arg = s->open_arg;

	LIST_REMOVE(s, oentry);
	s->opening = 0;
	store_sess_link(&st->base, &s->base);
	s->linked = 1;
	rs_subscribe(st, sess_chan(s));
	rs_sess_ref(s);
	cb(arg, 0, &s->base, s->base.role);
	if (!s->closed && s->base.role == STORE_OWNER)
		rs_inbox_read(s);
	rs_sess_unref(s);
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

static void
rs_promoted(struct rsess *s, struct rreq *req)
{
	struct rstore	*st = s->st;

	s->promoting = NULL;
	rs_unsubscribe(st, s->ch_ev);
	rs_subscribe(st, s->ch_in);
	s->vacant = 0;
	rs_sess_ref(s);
	rs_req_finish(req, 0, 0);
	if (!s->closed)
		rs_inbox_read(s);
	rs_sess_unref(s);
}

/* End of the cache fill of an open (req NULL) or a promote. */
static void
rs_fill_done(struct rsess *s, struct rreq *req, int err)
{
	if (req == NULL) {
		if (err == 0) {
			rs_open_done(s);
			return;
		}
		if (s->base.role == STORE_OWNER)
			rs_release_token(s, s->token, strlen(s->token));
		rs_open_fail(s, err);
		return;
	}
	if (s->promoting != req)
		return;		/* cancelled: already undone */
	if (err == 0) {
		rs_promoted(s, req);
		return;
	}
	s->promoting = NULL;
	rs_demote(s);
	rs_req_finish(req, -1, err);
}

/*
 * Records per XRANGE: a reply is parsed whole in memory, and events may
 * be large, so aim at RS_FETCH_BYTES from the sizes seen so far.
 */
static size_t
rs_fetch_count(const struct rsess *s)
{
	size_t	 n;

	if (s->avg_rec == 0)
		return RS_FETCH_FIRST;
	n = RS_FETCH_BYTES / s->avg_rec;
	return n < 1 ? 1 : n > RS_CHUNK ? RS_CHUNK : n;
}

static void
rs_fetch_learn(struct rsess *s, const redisReply *r)
{
	const redisReply	*e, *f;
	size_t			 i, j, bytes = 0;

	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements == 0)
		return;
	for (i = 0; i < r->elements; i++) {
		e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    (f = e->element[1])->type != REDIS_REPLY_ARRAY)
			continue;
		for (j = 0; j < f->elements; j++)
			bytes += f->element[j]->len + 16;
	}
	s->avg_rec = bytes / r->elements < 64 ? 64 : bytes / r->elements;
}

static int
rs_fetch_send(struct rsess *s, struct rreq *req, uint64_t from, uint64_t to,
    size_t count)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;
	char		 f[RS_NUMLEN + 2], t[RS_NUMLEN + 2];
	int		 r;

	if (count == 0 || count > rs_fetch_count(s))
		count = rs_fetch_count(s);
	if (to - from < count)
		count = (size_t)(to - from + 1);
	if ((rc = rcmd_new(st, RC_FETCH, s, req)) == NULL)
		return -1;
	rc->count = count;
	snprintf(f, sizeof(f), "%" PRIu64 "-0", from);
	snprintf(t, sizeof(t), "%" PRIu64 "-0", to);
	args_init(&a, 6, 1);
	args_str(&a, "XRANGE");
	args_str(&a, s->k_log);
	args_str(&a, f);
	args_str(&a, t);
	args_str(&a, "COUNT");
	args_u64(&a, count);
	r = rs_send(st, rc, &a);
	args_free(&a);
	return r;
}

/*
 * Starts loading the last `tail` records into the cache (keeping what it
 * holds when that joins up).  0 sent, 1 nothing to load, -1 failed.
 */
static int
rs_fill_start(struct rsess *s, struct rreq *req)
{
	struct rcache	*c = &s->cache;
	uint64_t	 last = s->base.last_seq, first = s->base.first_seq;
	uint64_t	 from;

	sess_cache_below(s, first);
	if (c->n > 0 && cache_last(c) > last)
		cache_clear(c);		/* the store lost records */
	if (s->tail == 0 || last == 0 || last < first)
		return 1;
	from = last >= s->tail ? last - s->tail + 1 : 1;
	if (from < first)
		from = first;
	if (c->n > 0) {
		if (cache_last(c) + 1 >= from)
			from = cache_last(c) + 1;
		else
			cache_clear(c);
	}
	if (from > last)
		return 1;
	s->fill_next = from;
	s->fill_end = last;
	return rs_fetch_send(s, req, from, last, RS_CHUNK) == 0 ? 0 : -1;
}

typedef int (*rs_entry_fn)(void *, uint64_t, uint64_t, const char *,
    size_t);

/*
 * Walks an XRANGE reply of the log: fn gets each record, non-zero stops.
 * Returns entries walked (the stopping one included), -1 if malformed.
 */
static ssize_t
rs_entries(const redisReply *r, rs_entry_fn fn, void *arg, uint64_t *lastseq)
{
	const redisReply	*e, *f, *k, *v;
	const char		*json;
	size_t			 i, j, jlen;
	uint64_t		 seq, ts;
	int			 hast;

	if (r->type != REDIS_REPLY_ARRAY)
		return -1;
	for (i = 0; i < r->elements; i++) {
		e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    !rs_isstr(e->element[0]) ||
		    e->element[1]->type != REDIS_REPLY_ARRAY ||
		    rs_idseq(e->element[0]->str, e->element[0]->len,
		    &seq) == -1)
			return -1;
		f = e->element[1];
		json = NULL;
		jlen = 0;
		ts = 0;
		hast = 0;
		for (j = 0; j + 1 < f->elements; j += 2) {
			k = f->element[j];
			v = f->element[j + 1];
			if (!rs_isstr(k) || !rs_isstr(v) || k->len != 1)
				continue;
			if (k->str[0] == 't' &&
			    rs_u64(v->str, v->len, &ts) == 0)
				hast = 1;
			else if (k->str[0] == 'e') {
				json = v->str;
				jlen = v->len;
			}
		}
		if (!hast || json == NULL || jlen == 0)
			return -1;
		*lastseq = seq;
		if (fn(arg, seq, ts, json, jlen) != 0)
			return (ssize_t)i + 1;
	}
	return (ssize_t)r->elements;
}

static int
rs_fill_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct rsess	*s = arg;
	struct rrec	*r;

	/* The cache is an optimisation: out of memory, it holds less. */
	if ((r = rec_new(seq, ts, json, len)) != NULL)
		sess_cache_push(s, r);
	return 0;
}

static void
rs_on_fill(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	struct rreq	*req = rc->req;
	uint64_t	 lastseq = 0;
	ssize_t		 n;

	if (s->closed || (req != NULL && s->promoting != req) ||
	    (req == NULL && !s->opening))
		return;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
	    (n = rs_entries(r, rs_fill_rec, s, &lastseq)) < 0) {
		log_warnx("store: session %s: reading the log: %s",
		    s->base.id, r != NULL && r->type == REDIS_REPLY_ARRAY ?
		    "malformed entry" : rs_errstr(r));
		rs_fill_done(s, req, EIO);
		return;
	}
	if (n == 0 || (size_t)n < rc->count || lastseq >= s->fill_end) {
		rs_fill_done(s, req, 0);
		return;
	}
	s->fill_next = lastseq + 1;
	if (rs_fetch_send(s, req, s->fill_next, s->fill_end, RS_CHUNK) == -1)
		rs_fill_done(s, req, EIO);
}

/* PEEK: {last, owner exists, first id or nil, doc or nil}. */
static int
rs_parse_peek(const redisReply *r, uint64_t *last, int *exists,
    uint64_t *first)
{
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
	    rs_replyu64(r->element[0], last) == -1 ||
	    r->element[1]->type != REDIS_REPLY_INTEGER)
		return -1;
	*exists = r->element[1]->integer != 0;
	if (rs_isstr(r->element[2]))
		return rs_idseq(r->element[2]->str, r->element[2]->len, first);
	*first = *last + 1;
	return 0;
}

static int
rs_peek_send(struct rsess *s, enum rs_kind kind, int with_doc)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;
	int		 r;

	if ((rc = rcmd_new(st, kind, s, NULL)) == NULL)
		return -1;
	args_init(&a, 8, 1);
	args_script(&a, st, SC_PEEK, 3);
	args_str(&a, s->k_log);
	args_str(&a, s->k_meta);
	args_str(&a, s->k_owner);
	args_str(&a, with_doc ? "1" : "0");
	r = rs_eval(st, rc, SC_PEEK, &a);
	args_free(&a);
	return r;
}

/* A follower's open: the state of the log, then its tail. */
static void
rs_on_peek(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	const redisReply *d;
	uint64_t	 last, first;
	int		 exists;
	char		*doc;

	if (s->closed || !s->opening)
		return;
	if (rs_parse_peek(r, &last, &exists, &first) == -1) {
		log_warnx("store: session %s: reading its state: %s",
		    s->base.id, r != NULL && r->type == REDIS_REPLY_ARRAY ?
		    "unexpected reply" : rs_errstr(r));
		rs_open_fail(s, EIO);
		return;
	}
	d = r->element[3];
	if (rs_isstr(d) && d->len <= STORE_META_MAX &&
	    (doc = malloc(d->len + 1)) != NULL) {
		memcpy(doc, d->str, d->len + 1);
		free(s->doc);
		s->doc = doc;
		s->doclen = d->len;
	}
	s->base.last_seq = s->base.durable_seq = last;
	s->base.first_seq = first;
	s->vacant = 0;
	switch (rs_fill_start(s, NULL)) {
	case 0:
		return;
	case 1:
		rs_open_done(s);
		return;
	default:
		rs_open_fail(s, EIO);
	}
}

static void
rs_on_acquire(struct rcmd *rc, redisReply *r)
{
	struct rsess		*s = rc->s;
	struct rreq		*req = rc->req;
	const redisReply	*h;
	long long		 code = -2;

	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	    r->element[0]->type == REDIS_REPLY_INTEGER)
		code = r->element[0]->integer;
	if (s->closed || (req == NULL && !s->opening) ||
	    (req != NULL && req->dead)) {
		/* Nobody wants it now: give back a lease just won. */
		if (code == 1 && r->elements >= 2 && rs_isstr(r->element[1]))
			rs_release_token(s, r->element[1]->str,
			    r->element[1]->len);
		return;
	}
	switch (code) {
	case 1:
		if (rs_take_lease(s, r, rc->sent) == -1) {
			if (r->elements >= 2 && rs_isstr(r->element[1]))
				rs_release_token(s, r->element[1]->str,
				    r->element[1]->len);
			break;
		}
		s->base.role = STORE_OWNER;
		if (req != NULL)
			s->promoting = req;
		switch (rs_fill_start(s, req)) {
		case 0:
			return;
		case 1:
			rs_fill_done(s, req, 0);
			return;
		default:
			rs_fill_done(s, req, EIO);
			return;
		}
	case 0:
		if (r->elements < 2 || !rs_isstr(r->element[1]))
			break;
		h = r->element[1];
		if (!s->forced && rs_takeover_ok(s->st, h->str, h->len)) {
			s->forced = 1;
			log_info("store: session %s: taking over the lease of "
			    "%.*s, whose process is gone", s->base.id,
			    (int)(h->len > RS_TOKEN_MAX ? RS_TOKEN_MAX :
			    h->len), h->str);
			if (rs_acquire_send(s, req, (int)rc->u1, h->str,
			    h->len) == 0)
				return;
			break;
		}
		if (req != NULL) {
			rs_req_finish(req, -1, EBUSY);
			return;
		}
		/* Held elsewhere: follow it. */
		s->base.role = STORE_FOLLOWER;
		if (rs_peek_send(s, RC_PEEK, 1) == -1)
			rs_open_fail(s, EIO);
		return;
	case -1:
		if (req != NULL)
			rs_req_finish(req, -1, ENOENT);
		else
			rs_open_fail(s, ENOENT);
		return;
	default:
		break;
	}
	log_warnx("store: session %s: acquiring its lease: %s", s->base.id,
	    code == -2 ? rs_errstr(r) : "unexpected reply");
	if (req != NULL)
		rs_req_finish(req, -1, EIO);
	else
		rs_open_fail(s, EIO);
}

static void
rs_open_send(struct rsess *s)
{
	s->parked = 0;
	if (rs_acquire_send(s, NULL, s->create, "", 0) == -1)
		rs_open_fail(s, EIO);
}

static void
rs_open_async(struct store *bst, const char *id, int create, size_t tail,
    store_open_cb cb, void *arg)
{
	struct rstore	*st = (struct rstore *)bst;
	struct rsess	*s;

	if (!st->live || st->link == LINK_DOWN) {
		cb(arg, EIO, NULL, 0);
		return;
	}
	/* store.c only sees linked sessions; one may be opening. */
	LIST_FOREACH(s, &st->opening, oentry)
		if (strcmp(s->base.id, id) == 0) {
			cb(arg, EBUSY, NULL, 0);
			return;
		}
	if ((s = rs_sess_new(st, id)) == NULL) {
		cb(arg, errno, NULL, 0);
		return;
	}
	s->open_cb = cb;
	s->open_arg = arg;
	s->create = create != 0;
	s->tail = tail > RS_CACHE_RECS ? RS_CACHE_RECS : tail;
	s->opening = 1;
	LIST_INSERT_HEAD(&st->opening, s, oentry);
	if (st->link == LINK_UP)
		rs_open_send(s);
	else {
		/* Connecting: wait for it, within a deadline. */
		s->parked = 1;
		s->open_deadline = util_mono_ms() + st->deadline_ms;
	}
}

static void
rs_sess_close(struct store_sess *bs)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rstore	*st = s->st;
	struct rreq	*req;
	struct wbatch	*b;

	s->closed = 1;
	s->linked = 0;
	while ((req = LIST_FIRST(&s->reqs)) != NULL) {
		req->dead = 1;
		LIST_REMOVE(req, entry);
		rs_req_unref(req);
	}
	s->promoting = NULL;
	if (s->dirty) {
		TAILQ_REMOVE(&st->dirty, s, dentry);
		s->dirty = 0;
		rs_sess_unref(s);	/* not the last: we hold the user's */
	}
	if (s->base.role == STORE_OWNER && s->token[0] != '\0' &&
	    st->link == LINK_UP && !st->closing) {
		/* Writes accepted with 0 still go out (nobody hears how they
		 * fare), then the lease goes back. */
		if (!s->failed)
			while (!TAILQ_EMPTY(&s->wq))
				if (rs_batch_send(s) == -1)
					break;
		rs_release_token(s, s->token, strlen(s->token));
	}
	while ((b = TAILQ_FIRST(&s->inflight)) != NULL) {
		TAILQ_REMOVE(&s->inflight, b, entry);
		b->orphan = 1;
	}
	s->ninflight = 0;
	if (!st->closing)
		rs_unsubscribe(st, sess_chan(s));
	wopq_free(&s->wq);
	rs_sess_unref(s);
}

/* --- writes --- */

/* Sends writes from the head of the queue as one script call. */
static int
rs_batch_send(struct rsess *s)
{
	struct rstore	*st = s->st;
	struct wbatch	*b;
	struct wop	*op;
	struct rargs	 a;
	struct rcmd	*rc;
	size_t		 n = 0;
	int		 r;

	if ((op = TAILQ_FIRST(&s->wq)) == NULL ||
	    (b = calloc(1, sizeof(*b))) == NULL)
		return -1;
	TAILQ_INIT(&b->ops);
	b->prev = b->last = s->sent_seq;
	if (op->doc != NULL) {
		TAILQ_REMOVE(&s->wq, op, entry);
		TAILQ_INSERT_TAIL(&b->ops, op, entry);
		b->meta = 1;
		b->nrec = 1;
		b->bytes = op->doclen;
	} else {
		while ((op = TAILQ_FIRST(&s->wq)) != NULL && op->rec != NULL &&
		    b->nrec < RS_BATCH_RECS && (b->nrec == 0 ||
		    b->bytes + op->rec->len <= RS_BATCH_BYTES)) {
			TAILQ_REMOVE(&s->wq, op, entry);
			TAILQ_INSERT_TAIL(&b->ops, op, entry);
			b->nrec++;
			b->bytes += op->rec->len;
			b->last = op->rec->seq;
		}
		memcpy(b->inpos, s->inpos_next, sizeof(b->inpos));
	}
	if ((rc = rcmd_new(st, RC_BATCH, s, NULL)) == NULL)
		goto fail;
	if (b->meta) {
		args_init(&a, 13, 2);
		args_script(&a, st, SC_META, RS_SKEYS);
		args_skeys(&a, s);
		args_str(&a, s->token);
		args_str(&a, rs_retention(s));
		op = TAILQ_FIRST(&b->ops);
		args_add(&a, op->doc, op->doclen);
		args_u64(&a, b->prev);
		r = rs_eval(st, rc, SC_META, &a);
	} else {
		args_init(&a, 14 + 3 * (int)b->nrec, 2 + 2 * (int)b->nrec);
		args_script(&a, st, SC_APPEND, RS_SKEYS);
		args_skeys(&a, s);
		args_str(&a, s->token);
		args_str(&a, rs_retention(s));
		args_u64(&a, b->prev);
		args_str(&a, b->inpos);
		args_str(&a, s->ch_ev);
		TAILQ_FOREACH(op, &b->ops, entry) {
			args_u64(&a, op->rec->seq);
			args_u64(&a, op->rec->ts);
			args_add(&a, op->rec->json, op->rec->len);
			n++;
		}
		r = rs_eval(st, rc, SC_APPEND, &a);
	}
	args_free(&a);
	if (r == -1)
		goto fail;
	/* hiredis never calls back from inside a command call. */
	rc->b = b;
	TAILQ_INSERT_TAIL(&s->inflight, b, entry);
	s->ninflight++;
	s->sent_seq = b->last;
	return 0;
fail:
	/* Back to the head of the queue, in order. */
	while ((op = TAILQ_LAST(&b->ops, wopq)) != NULL) {
		TAILQ_REMOVE(&b->ops, op, entry);
		TAILQ_INSERT_HEAD(&s->wq, op, entry);
	}
	free(b);
	return -1;
}

static void
rs_flush_sess(struct rsess *s)
{
	/* Not past batches re-sent after NOSCRIPT: they must land first. */
	if (s->closed || s->failed || s->base.role != STORE_OWNER ||
	    s->st->link != LINK_UP || s->noscript > 0)
		return;
	while (!TAILQ_EMPTY(&s->wq) && s->ninflight < RS_INFLIGHT)
		if (rs_batch_send(s) == -1)
			break;
}

static void
rs_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rstore	*st = arg;
	struct rsess	*s;

	(void)fd;
	(void)what;
	st->flush_pending = 0;
	while ((s = TAILQ_FIRST(&st->dirty)) != NULL) {
		TAILQ_REMOVE(&st->dirty, s, dentry);
		s->dirty = 0;
		rs_flush_sess(s);
		rs_sess_unref(s);
	}
}

/*
 * Writes queued during one pass of the event loop go out together: the
 * flush event runs after the events already active.
 */
static void
rs_mark_dirty(struct rsess *s)
{
	struct rstore	*st = s->st;

	if (!s->dirty) {
		s->dirty = 1;
		rs_sess_ref(s);
		TAILQ_INSERT_TAIL(&st->dirty, s, dentry);
	}
	if (!st->flush_pending) {
		st->flush_pending = 1;
		event_active(st->ev_flush, EV_TIMEOUT, 1);
	}
}

/* The handle takes no more writes; what was not durable never will be. */
void
rs_sess_fail(struct rsess *s, int err, const char *fmt, ...)
{
	struct rstore	*st = s->st;
	struct wbatch	*b;
	char		 msg[256];
	va_list		 ap;

	if (s->failed || s->closed)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warnx("store: session %s: %s", s->base.id, msg);
	s->failed = err;
	wopq_free(&s->wq);
	while ((b = TAILQ_FIRST(&s->inflight)) != NULL) {
		TAILQ_REMOVE(&s->inflight, b, entry);
		b->orphan = 1;
	}
	s->ninflight = 0;
	s->wq_recs = s->wq_bytes = 0;
	/* The dropped appends are not in the log. */
	s->base.last_seq = s->sent_seq = s->base.durable_seq;
	if (st->closing || st->ev->failed == NULL)
		return;
	rs_sess_ref(s);
	st->ev->failed(st->arg, &s->base, err);
	rs_sess_unref(s);
}

static int
rs_append_async(struct store_sess *bs, uint64_t seq, uint64_t ts,
    const char *json, size_t len)
{
	struct rsess	*s = (struct rsess *)bs;
	struct wop	*op;

	if (s->failed) {
		errno = EPIPE;
		return -1;
	}
	/* A repair may have queued past the bound: no underflow. */
	if (s->wq_recs >= RS_QUEUE_RECS || s->wq_bytes >= RS_QUEUE_BYTES ||
	    len > RS_QUEUE_BYTES - s->wq_bytes) {
		errno = EAGAIN;
		return -1;
	}
	if ((op = calloc(1, sizeof(*op))) == NULL)
		return -1;
	if ((op->rec = rec_new(seq, ts, json, len)) == NULL) {
		free(op);
		return -1;
	}
	TAILQ_INSERT_TAIL(&s->wq, op, entry);
	s->wq_recs++;
	s->wq_bytes += len;
	s->base.last_seq = seq;
	rs_mark_dirty(s);
	return 0;
}

static int
rs_meta_write_async(struct store_sess *bs, const char *json, size_t len)
{
	struct rsess	*s = (struct rsess *)bs;
	struct wop	*op;
	char		*copy;

	if (s->failed) {
		errno = EPIPE;
		return -1;
	}
	/* A repair may have queued past the bound: no underflow. */
	if (s->wq_recs >= RS_QUEUE_RECS || s->wq_bytes >= RS_QUEUE_BYTES ||
	    len > RS_QUEUE_BYTES - s->wq_bytes) {
		errno = EAGAIN;
		return -1;
	}
	if ((op = calloc(1, sizeof(*op))) == NULL)
		return -1;
	if ((op->doc = malloc(len + 1)) == NULL ||
	    (copy = malloc(len + 1)) == NULL) {
		free(op->doc);
		free(op);
		return -1;
	}
	memcpy(op->doc, json, len);
	op->doc[len] = '\0';
	op->doclen = len;
	/* store_meta_read() answers with what was written last. */
	memcpy(copy, op->doc, len + 1);
	free(s->doc);
	s->doc = copy;
	s->doclen = len;
	TAILQ_INSERT_TAIL(&s->wq, op, entry);
	s->wq_recs++;
	s->wq_bytes += len;
	rs_mark_dirty(s);
	return 0;
}

/*
 * The store holds the log only up to n, below what it acknowledged
 * (asynchronous replication lost the rest in a failover, or a restart
 * from an older snapshot).  The records are still in the cache: append
 * them again, byte for byte, ahead of everything sent after them.
 */
static void
rs_repair(struct rsess *s, uint64_t n, struct wbatch *failed)
{
	struct wopq	 redo;
	struct wbatch	*b;
	struct wop	*op;
	struct rrec	*r;
	uint64_t	 seq, durable = s->base.durable_seq;

	if (!cache_covers(&s->cache, n + 1, durable)) {
		rs_sess_fail(s, EIO, "the store lost events %" PRIu64 "-%"
		    PRIu64 " (failover?) and they are no longer cached: they "
		    "are lost", n + 1, durable);
		return;
	}
	log_warnx("store: session %s: the store lost events %" PRIu64 "-%"
	    PRIu64 " (failover?); appending them again from the cache",
	    s->base.id, n + 1, durable);
	TAILQ_INIT(&redo);
	for (seq = n + 1; seq <= durable; seq++) {
		r = cache_find(&s->cache, seq);
		if ((op = calloc(1, sizeof(*op))) == NULL ||
		    (op->rec = rec_new(r->seq, r->ts, r->json, r->len)) ==
		    NULL) {
			free(op);
			wopq_free(&redo);
			rs_sess_fail(s, EIO, "out of memory repairing the log");
			return;
		}
		TAILQ_INSERT_TAIL(&redo, op, entry);
		s->wq_recs++;
		s->wq_bytes += r->len;
	}
	/* Everything sent after n fails the same SEQ check: send it again
	 * after the repair, in order. */
	if (failed != NULL)
		TAILQ_CONCAT(&redo, &failed->ops, entry);
	while ((b = TAILQ_FIRST(&s->inflight)) != NULL) {
		TAILQ_REMOVE(&s->inflight, b, entry);
		b->orphan = 1;
		TAILQ_CONCAT(&redo, &b->ops, entry);
	}
	s->ninflight = 0;
	TAILQ_CONCAT(&redo, &s->wq, entry);
	TAILQ_CONCAT(&s->wq, &redo, entry);
	s->sent_seq = n;
	rs_flush_sess(s);
}

static void
rs_on_batch(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	struct rstore	*st = s->st;
	struct wbatch	*b = rc->b;
	struct wop	*op;
	uint64_t	 n, before = s->base.durable_seq;
	const char	*sp;

	if (b->orphan || s->closed || s->failed)
		return;
	if (b != TAILQ_FIRST(&s->inflight)) {
		rs_sess_fail(s, EIO, "write replies out of order");
		return;
	}
	TAILQ_REMOVE(&s->inflight, b, entry);
	s->ninflight--;
	b->orphan = 1;
	if (r == NULL) {
		/* It may or may not have landed: the user re-opens. */
		rs_sess_fail(s, EIO, "the store connection was lost with "
		    "writes in flight");
		return;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		if (strncmp(r->str, "FENCED", 6) == 0)
			rs_sess_fail(s, ESTALE, "fenced: another process "
			    "owns the session now");
		else if (strncmp(r->str, "SEQ ", 4) == 0 && !b->meta &&
		    (sp = strchr(r->str + 4, ' '), rs_u64(r->str + 4,
		    sp ? (size_t)(sp - r->str - 4) : strlen(r->str + 4),
		    &n) == 0) && n < before)
			rs_repair(s, n, b);
		else
			rs_sess_fail(s, EIO, "write failed: %s", r->str);
		return;
	}
	s->wq_recs -= b->nrec;
	s->wq_bytes -= b->bytes;
	while ((op = TAILQ_FIRST(&b->ops)) != NULL) {
		TAILQ_REMOVE(&b->ops, op, entry);
		if (op->rec != NULL) {
			sess_cache_push(s, op->rec);	/* takes it */
			op->rec = NULL;
		}
		wop_free(op);
	}
	if (b->last > s->base.durable_seq)
		s->base.durable_seq = b->last;
	rs_flush_sess(s);
	/* A meta write reports durable too (seq may repeat): it is how the
	 * user learns the meta landed. */
	if ((s->base.durable_seq > before || b->meta) && !st->closing &&
	    st->ev->durable != NULL) {
		rs_sess_ref(s);
		st->ev->durable(st->arg, &s->base, s->base.durable_seq);
		rs_sess_unref(s);
	}
}

/* --- leases, resync, inbox --- */

static void
rs_renew_send(struct rsess *s)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;

	if ((rc = rcmd_new(st, RC_RENEW, s, NULL)) == NULL)
		return;
	rc->u1 = s->lease_gen;
	args_init(&a, 12, 1);
	args_script(&a, st, SC_RENEW, RS_SKEYS);
	args_skeys(&a, s);
	args_str(&a, s->token);
	args_str(&a, st->lease_s);
	args_str(&a, rs_retention(s));
	if (rs_eval(st, rc, SC_RENEW, &a) == 0)
		s->renewing = 1;
	args_free(&a);
}

static void
rs_renew_all(struct rstore *st)
{
	struct store_sess	*bs;
	struct rsess		*s;

	LIST_FOREACH(bs, &st->base.sessions, entry) {
		s = (struct rsess *)bs;
		if (s->base.role == STORE_OWNER && s->token[0] != '\0' &&
		    !s->failed && !s->renewing)
			rs_renew_send(s);
	}
}

static void
rs_on_renew(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	uint64_t	 last;

	s->renewing = 0;
	if (s->closed || s->failed || s->base.role != STORE_OWNER ||
	    rc->u1 != s->lease_gen)
		return;
	/* No answer: the lease check in rs_tick decides. */
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER)
		return;
	if (r->element[0]->integer == 0) {
		rs_sess_fail(s, ESTALE, "lost its lease: another process "
		    "may own the session now");
		return;
	}
	log_debug("store: session %s: lease renewed (answer after %llu ms)",
	    s->base.id, (unsigned long long)(util_mono_ms() - rc->sent));
	s->lease_from = rc->sent;
	/* Replies come in order: with nothing in flight, the store must end
	 * at or after what it acknowledged. */
	if (r->elements >= 2 && rs_replyu64(r->element[1], &last) == 0 &&
	    last < s->base.durable_seq && s->ninflight == 0)
		rs_repair(s, last, NULL);
}

static void
rs_poll_send(struct rsess *s)
{
	if (s->polling || s->st->link != LINK_UP || s->closed)
		return;
	if (rs_peek_send(s, RC_POLL, 0) == 0) {
		s->polling = 1;
		s->poll_from = s->base.last_seq;
	}
}

static void
rs_grown(struct rsess *s, uint64_t last)
{
	struct rstore	*st = s->st;

	s->base.last_seq = s->base.durable_seq = last;
	if (st->closing || st->ev->grown == NULL)
		return;
	rs_sess_ref(s);
	st->ev->grown(st->arg, &s->base, last);
	rs_sess_unref(s);
}

/* Follower resync: missed notifications, trims, the owner going away. */
static void
rs_on_poll(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	struct rstore	*st = s->st;
	uint64_t	 last, first;
	int		 exists;

	s->polling = 0;
	if (s->closed || s->base.role != STORE_FOLLOWER ||
	    rs_parse_peek(r, &last, &exists, &first) == -1)
		return;
	if (first > s->base.first_seq && first <= last + 1) {
		s->base.first_seq = first;
		sess_cache_below(s, first);
	}
	if (last > s->base.last_seq) {
		rs_grown(s, last);
		if (s->closed || s->base.role != STORE_FOLLOWER)
			return;
	} else if (last < s->poll_from) {
		/* What this handle read and cached is no longer the log (a
		 * notice newer than the poll is no evidence of that). */
		rs_sess_fail(s, EIO, "the log went back from %" PRIu64 " to %"
		    PRIu64 " (a store failover lost events); letting the "
		    "session go so its clients read it again",
		    s->base.last_seq, last);
		return;
	}
	if (exists) {
		s->vacant = 0;
		return;
	}
	if (s->vacant || st->closing || st->ev->vacant == NULL)
		return;
	s->vacant = 1;
	st->ev->vacant(st->arg, &s->base);
}

static void
rs_inbox_read(struct rsess *s)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;
	char		 start[RS_SID_MAX + 1];

	if (s->closed || !s->linked || s->failed ||
	    s->base.role != STORE_OWNER || s->promoting != NULL ||
	    st->link != LINK_UP)
		return;
	if (s->inbox_busy) {
		s->inbox_again = 1;
		return;
	}
	if ((rc = rcmd_new(st, RC_INBOX, s, NULL)) == NULL)
		return;
	if (s->in_cursor[0] != '\0')
		snprintf(start, sizeof(start), "(%s", s->in_cursor);
	else
		snprintf(start, sizeof(start), "-");
	args_init(&a, 6, 1);
	args_str(&a, "XRANGE");
	args_str(&a, s->k_in);
	args_str(&a, start);
	args_str(&a, "+");
	args_str(&a, "COUNT");
	args_u64(&a, RS_INBOX_CHUNK);
	if (rs_send(st, rc, &a) == 0) {
		s->inbox_busy = 1;
		s->inbox_again = 0;
	}
	args_free(&a);
}

static void
rs_on_inbox(struct rcmd *rc, redisReply *r)
{
	struct rsess		*s = rc->s;
	struct rstore		*st = s->st;
	const redisReply	*e, *f, *msg;
	size_t			 i, j;

	s->inbox_busy = 0;
	if (s->closed || s->failed || s->base.role != STORE_OWNER)
		return;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
		log_debug("store: session %s: reading the inbox: %s",
		    s->base.id, rs_errstr(r));
		return;		/* the periodic check tries again */
	}
	for (i = 0; i < r->elements; i++) {
		e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    !rs_isstr(e->element[0]) ||
		    e->element[0]->len >= sizeof(s->in_cursor))
			continue;
		memcpy(s->in_cursor, e->element[0]->str,
		    e->element[0]->len + 1);
		/* The next append batch carries this as the inbox position,
		 * so it moves atomically with what the input caused. */
		memcpy(s->inpos_next, s->in_cursor, sizeof(s->inpos_next));
		f = e->element[1];
		msg = NULL;
		for (j = 0; f->type == REDIS_REPLY_ARRAY &&
		    j + 1 < f->elements; j += 2)
			if (rs_isstr(f->element[j]) &&
			    f->element[j]->len == 1 &&
			    f->element[j]->str[0] == 'm' &&
			    rs_isstr(f->element[j + 1]))
				msg = f->element[j + 1];
		if (msg == NULL || msg->len == 0) {
			log_warnx("store: session %s: inbox entry %s has no "
			    "message", s->base.id, s->in_cursor);
			continue;
		}
		if (!st->closing && st->ev->input != NULL)
			st->ev->input(st->arg, &s->base, msg->str, msg->len);
		if (s->closed || s->failed || st->closing)
			return;
	}
	if (r->elements >= RS_INBOX_CHUNK || s->inbox_again)
		rs_inbox_read(s);
}

static void
rs_poll_all(struct rstore *st)
{
	struct store_sess	*bs;
	struct rsess		*s;

	LIST_FOREACH(bs, &st->base.sessions, entry) {
		s = (struct rsess *)bs;
		if (s->base.role == STORE_FOLLOWER)
			rs_poll_send(s);
		else
			rs_inbox_read(s);
	}
}

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

static void
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
		}
		return;
	}
	if (strcmp(k->str, "message") != 0 || !rs_isstr(p) ||
	    rs_parse_chan(st, ch->str, ch->len, id, &kind) == -1 ||
	    (bs = store_sess_find(&st->base, id)) == NULL)
		return;
	s = (struct rsess *)bs;
	if (kind == 'e' && s->base.role == STORE_FOLLOWER) {
		if (rs_u64(p->str, p->len, &last) == -1)
			rs_poll_send(s);	/* "vacant": look now */
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
	if (st->link == LINK_UP && (rc = TAILQ_FIRST(&st->inflight)) != NULL &&
	    now - rc->sent >= st->deadline_ms)
		rs_link_down(st, "%s:%d: no reply within %u ms",
		    st->master.host, st->master.port, st->deadline_ms);
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
		if (now >= st->next_renew) {
			rs_renew_all(st);
			st->next_renew = now + st->lease_ms / 3;
		}
		if (now >= st->next_poll) {
			rs_poll_all(st);
			if (st->sentinel)
				rs_sentinel_watch(st, now);
			st->next_poll = now + st->poll_ms;
		}
	}
	rs_store_unref(st);
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

static int
rs_range_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct rreq	*req = arg;
	struct rsess	*s = req->s;

	if (seq < req->next)
		return 0;
	sess_cache_offer(s, seq, ts, json, len);
	req->count++;
	req->next = seq + 1;
	if (req->cb(req->arg, seq, ts, json, len) != 0) {
		req->stop = 1;
		return 1;
	}
	if (req->dead || s->closed)
		return 1;
	if (req->limit != 0 && req->count >= req->limit) {
		req->stop = 1;
		return 1;
	}
	return 0;
}

static void
rs_on_range(struct rcmd *rc, redisReply *r)
{
	struct rreq	*req = rc->req;
	struct rsess	*s = rc->s;
	uint64_t	 lastseq = 0;
	ssize_t		 n;

	if (req->dead || s->closed)
		return;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
		log_warnx("store: session %s: reading the log: %s",
		    s->base.id, rs_errstr(r));
		rs_req_finish(req, -1, EIO);
		return;
	}
	n = rs_entries(r, rs_range_rec, req, &lastseq);
	if (req->dead || s->closed)
		return;
	if (n < 0) {
		log_warnx("store: session %s: malformed log entry",
		    s->base.id);
		rs_req_finish(req, -1, EIO);
		return;
	}
	if (req->stop || n == 0 || (size_t)n < rc->count ||
	    lastseq >= req->end) {
		rs_req_finish(req, (ssize_t)req->count, 0);
		return;
	}
	if (rs_fetch_send(s, req, req->next, req->end, req->limit ?
	    req->limit - req->count : RS_CHUNK) == -1)
		rs_req_finish(req, -1, EIO);
}

/* Delivers a cached run; stops early if the callback asks or closes. */
static size_t
rs_cache_deliver(struct rsess *s, uint64_t from, uint64_t to,
    store_range_cb cb, void *arg)
{
	struct rrec	*r;
	uint64_t	 seq;
	size_t		 n = 0;

	rs_sess_ref(s);
	for (seq = from; seq <= to; seq++) {
		if ((r = cache_find(&s->cache, seq)) == NULL)
			break;
		n++;
		if (cb(arg, seq, r->ts, r->json, r->len) != 0 || s->closed)
			break;
	}
	rs_sess_unref(s);
	return n;
}

static struct store_req *
rs_range_async(struct store_sess *bs, uint64_t after, size_t limit,
    store_range_cb cb, store_done_cb done, void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rstore	*st = s->st;
	struct rreq	*req;
	uint64_t	 start, end = sess_readable(s), stop;

	start = after + 1 < s->base.first_seq ? s->base.first_seq : after + 1;
	if (start > end)
		return rs_done_now(done, arg, 0, 0);
	stop = limit != 0 && limit - 1 < end - start ? start + limit - 1 : end;
	/* Cached: no round trip. */
	if (cache_covers(&s->cache, start, stop))
		return rs_done_now(done, arg, (ssize_t)rs_cache_deliver(s,
		    start, stop, cb, arg), 0);
	if (st->link != LINK_UP)
		return rs_done_now(done, arg, -1, EIO);
	if ((req = rs_req_new(s, REQ_RANGE, cb, done, arg)) == NULL)
		return rs_done_now(done, arg, -1, ENOMEM);
	req->next = start;
	req->end = stop;
	req->limit = limit;
	if (rs_fetch_send(s, req, start, stop, limit) == -1) {
		rs_req_finish(req, -1, EIO);
		return NULL;
	}
	return (struct store_req *)req;
}

static int
rs_preload_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct rreq	*req = arg;
	struct rsess	*s = req->s;
	struct rrec	*r;

	if (req->tmp.n > 0 && seq != cache_last(&req->tmp) + 1)
		cache_clear(&req->tmp);		/* trimmed meanwhile */
	if (req->tmp.bytes + s->cache.bytes + sizeof(*r) + len + 1 >
	    STORE_CACHE_MAX || req->tmp.n + s->cache.n >= RS_PRELOAD_RECS ||
	    (r = rec_new(seq, ts, json, len)) == NULL) {
		req->toobig = 1;
		return 1;
	}
	if (cache_push_back(&req->tmp, r) == -1) {
		free(r);
		req->toobig = 1;
		return 1;
	}
	req->count++;
	return 0;
}

/* Joins the fetched run to the cache, which must stay contiguous. */
static void
rs_preload_merge(struct rsess *s, struct rreq *req)
{
	struct rcache	*c = &s->cache, *t = &req->tmp;
	struct rrec	*r;
	uint64_t	 tf, tl, cf, cl;
	size_t		 i;

	if (t->n == 0)
		return;
	tf = cache_first(t);
	tl = cache_last(t);
	if (c->n == 0 || tf > cache_last(c) + 1) {
		/* Nothing cached, or disjoint and newer: it replaces. */
		cache_clear(c);
		for (i = 0; i < t->n; i++)
			if (cache_push_back(c, cache_at(t, i)) == -1)
				free(cache_at(t, i));
	} else if (tl + 1 < cache_first(c)) {
		/* Older with a hole (the cache moved on): no use. */
		cache_clear(t);
		return;
	} else {
		/* Overlapping or adjacent: what precedes the cache goes in
		 * front, what follows it behind, the rest is a copy. */
		cf = cache_first(c);
		cl = cache_last(c);
		for (i = t->n; i-- > 0;) {
			r = cache_at(t, i);
			if (r->seq < cf && cache_push_front(c, r) == -1)
				free(r);
		}
		for (i = 0; i < t->n; i++) {
			r = cache_at(t, i);
			if (r->seq > cl && cache_push_back(c, r) == -1)
				free(r);
			else if (r->seq >= cf && r->seq <= cl)
				free(r);
		}
	}
	t->n = 0;
	t->bytes = 0;
	sess_cache_bound(s);
}

static void
rs_on_preload(struct rcmd *rc, redisReply *r)
{
	struct rreq	*req = rc->req;
	struct rsess	*s = rc->s;
	uint64_t	 lastseq = 0;
	ssize_t		 n;

	if (req->dead || s->closed)
		return;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
	    (n = rs_entries(r, rs_preload_rec, req, &lastseq)) < 0) {
		log_warnx("store: session %s: reading the log: %s",
		    s->base.id, r != NULL && r->type == REDIS_REPLY_ARRAY ?
		    "malformed entry" : rs_errstr(r));
		rs_req_finish(req, -1, EIO);
		return;
	}
	if (req->toobig) {
		log_warnx("store: session %s: preload from %" PRIu64 " does "
		    "not fit the cache bound (%u bytes)", s->base.id,
		    req->next, STORE_CACHE_MAX);
		cache_clear(&req->tmp);
		rs_req_finish(req, -1, EFBIG);
		return;
	}
	if (n == 0 || (size_t)n < rc->count || lastseq >= req->end) {
		rs_preload_merge(s, req);
		rs_req_finish(req, (ssize_t)req->count, 0);
		return;
	}
	if (rs_fetch_send(s, req, lastseq + 1, req->end, RS_CHUNK) == -1)
		rs_req_finish(req, -1, EIO);
}

static struct store_req *
rs_preload_async(struct store_sess *bs, uint64_t after, store_done_cb done,
    void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rcache	*c = &s->cache;
	struct rreq	*req;
	uint64_t	 start, end = sess_readable(s), from, to;

	start = after + 1 < s->base.first_seq ? s->base.first_seq : after + 1;
	if (start > end || cache_covers(c, start, end))
		return rs_done_now(done, arg, 0, 0);
	if (s->st->link != LINK_UP)
		return rs_done_now(done, arg, -1, EIO);
	/* From now on this session's cache may hold this much. */
	s->cmax_recs = RS_PRELOAD_RECS;
	s->cmax_bytes = STORE_CACHE_MAX;
	from = start;
	to = end;
	if (c->n > 0 && cache_first(c) <= start && start <= cache_last(c) + 1)
		from = cache_last(c) + 1;	/* only what follows it */
	else if (c->n > 0 && cache_first(c) > start && cache_last(c) >= end)
		to = cache_first(c) - 1;	/* only what precedes it */
	if ((req = rs_req_new(s, REQ_PRELOAD, NULL, done, arg)) == NULL)
		return rs_done_now(done, arg, -1, ENOMEM);
	req->next = from;
	req->end = to;
	if (rs_fetch_send(s, req, from, to, RS_CHUNK) == -1) {
		rs_req_finish(req, -1, EIO);
		return NULL;
	}
	return (struct store_req *)req;
}

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

static struct store_req *
rs_post(struct store_sess *bs, const char *json, size_t len,
    store_done_cb done, void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rstore	*st = s->st;
	struct rreq	*req;
	struct rcmd	*rc;
	struct rargs	 a;
	int		 r;

	if (st->link != LINK_UP)
		return rs_done_now(done, arg, -1, EIO);
	if ((req = rs_req_new(s, REQ_POST, NULL, done, arg)) == NULL)
		return rs_done_now(done, arg, -1, ENOMEM);
	if ((rc = rcmd_new(st, RC_POST, s, req)) == NULL) {
		rs_req_finish(req, -1, ENOMEM);
		return NULL;
	}
	args_init(&a, 8, 1);
	args_script(&a, st, SC_POST, 1);
	args_str(&a, s->k_in);
	args_add(&a, json, len);
	args_str(&a, rs_retention(s));
	args_str(&a, s->ch_in);
	args_str(&a, RS_INBOX_MAXLEN);
	r = rs_eval(st, rc, SC_POST, &a);
	args_free(&a);
	if (r == -1) {
		rs_req_finish(req, -1, EIO);
		return NULL;
	}
	return (struct store_req *)req;
}

static void
rs_on_post(struct rcmd *rc, redisReply *r)
{
	struct rreq	*req = rc->req;

	if (req->dead || rc->s->closed)
		return;
	if (r != NULL && r->type == REDIS_REPLY_STRING) {
		rs_req_finish(req, 0, 0);
		return;
	}
	log_warnx("store: session %s: post: %s", rc->s->base.id,
	    rs_errstr(r));
	rs_req_finish(req, -1, EIO);
}

static struct store_req *
rs_promote(struct store_sess *bs, store_done_cb done, void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rreq	*req;

	if (s->st->link != LINK_UP)
		return rs_done_now(done, arg, -1, EIO);
	/* One at a time. */
	LIST_FOREACH(req, &s->reqs, entry)
		if (req->kind == REQ_PROMOTE)
			return rs_done_now(done, arg, -1, EBUSY);
	if ((req = rs_req_new(s, REQ_PROMOTE, NULL, done, arg)) == NULL)
		return rs_done_now(done, arg, -1, ENOMEM);
	s->forced = 0;
	if (rs_acquire_send(s, req, 0, "", 0) == -1) {
		rs_req_finish(req, -1, EIO);
		return NULL;
	}
	return (struct store_req *)req;
}

/* --- trim --- */

struct rs_trimscan {
	uint64_t	 cutoff;
	uint64_t	 bound;		/* the newest record: always kept */
	uint64_t	 target;	/* first record to keep */
};

static int
rs_trim_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct rs_trimscan	*t = arg;

	(void)json;
	(void)len;
	if (ts >= t->cutoff || seq >= t->bound) {
		t->target = seq;
		return 1;
	}
	return 0;
}

static int
rs_trim_scan(struct rsess *s, uint64_t from, uint64_t cutoff)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;
	char		 f[RS_NUMLEN + 2], t[RS_NUMLEN + 2];
	int		 r;

	if ((rc = rcmd_new(st, RC_TRIM_SCAN, s, NULL)) == NULL)
		return -1;
	rc->u1 = cutoff;
	rc->u2 = s->base.durable_seq;
	rc->count = rs_fetch_count(s);
	snprintf(f, sizeof(f), "%" PRIu64 "-0", from);
	snprintf(t, sizeof(t), "%" PRIu64 "-0", s->base.durable_seq);
	args_init(&a, 6, 1);
	args_str(&a, "XRANGE");
	args_str(&a, s->k_log);
	args_str(&a, f);
	args_str(&a, t);
	args_str(&a, "COUNT");
	args_u64(&a, rc->count);
	r = rs_send(st, rc, &a);
	args_free(&a);
	return r;
}

/*
 * Retention by time, in the background: find the first record to keep
 * (newer than the cutoff, or the newest), then XTRIM MINID to it through
 * the fenced script.  Returns 0: first_seq moves when it is done.
 */
static int
rs_trim(struct store_sess *bs, uint64_t cutoff_ms)
{
	struct rsess	*s = (struct rsess *)bs;

	if (s->base.role != STORE_OWNER || s->failed || s->trimming ||
	    s->promoting != NULL || s->st->link != LINK_UP ||
	    s->base.durable_seq <= s->base.first_seq)
		return 0;
	if (rs_trim_scan(s, s->base.first_seq, cutoff_ms) == 0)
		s->trimming = 1;
	return 0;
}

static void
rs_on_trim_scan(struct rcmd *rc, redisReply *r)
{
	struct rsess		*s = rc->s;
	struct rstore		*st = s->st;
	struct rs_trimscan	 t = { rc->u1, rc->u2, 0 };
	struct rargs		 a;
	struct rcmd		*trc;
	char			 minid[RS_NUMLEN + 2];
	uint64_t		 lastseq = 0;
	ssize_t			 n;

	s->trimming = 0;
	rs_fetch_learn(s, r);
	if (s->closed || s->failed || s->base.role != STORE_OWNER ||
	    r == NULL || r->type != REDIS_REPLY_ARRAY ||
	    (n = rs_entries(r, rs_trim_rec, &t, &lastseq)) < 0)
		return;
	if (t.target == 0) {
		if ((size_t)n == rc->count && lastseq < t.bound &&
		    rs_trim_scan(s, lastseq + 1, t.cutoff) == 0)
			s->trimming = 1;
		return;
	}
	if (t.target <= s->base.first_seq ||
	    (trc = rcmd_new(st, RC_TRIM, s, NULL)) == NULL)
		return;
	trc->u1 = t.target;
	snprintf(minid, sizeof(minid), "%" PRIu64 "-0", t.target);
	args_init(&a, 8, 1);
	args_script(&a, st, SC_TRIM, 2);
	args_str(&a, s->k_log);
	args_str(&a, s->k_owner);
	args_str(&a, s->token);
	args_str(&a, minid);
	if (rs_eval(st, trc, SC_TRIM, &a) == 0)
		s->trimming = 1;
	args_free(&a);
}

static void
rs_on_trim(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;

	s->trimming = 0;
	if (s->closed || r == NULL || r->type != REDIS_REPLY_INTEGER)
		return;
	log_debug("store: session %s: trimmed %lld records", s->base.id,
	    r->integer);
	if (rc->u1 > s->base.first_seq) {
		s->base.first_seq = rc->u1;
		sess_cache_below(s, rc->u1);
	}
}

/* --- reply dispatch --- */

static void
rs_reply(redisAsyncContext *ac, void *rp, void *priv)
{
	struct rcmd	*rc = priv;
	struct rstore	*st = rc->st;
	redisReply	*r = rp;
	int		 ro = 0;

	(void)ac;
	if (rc->tracked) {
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
		if (rc->fmt != NULL && strncmp(r->str, "NOSCRIPT", 8) == 0) {
			if (!st->closing && rs_resend_eval(st, rc) == 0) {
				rc->retried = 1;
				if (rc->kind == RC_BATCH)
					rc->s->noscript++;
				return;		/* rc lives on */
			}
		} else if (strstr(r->str, "READONLY") != NULL)
			ro = 1;
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
		}
		/* A replica now (failover): find the master again. */
		if (ro)
			rs_link_down(st, "%s:%d is read-only (a replica?)",
			    st->master.host, st->master.port);
	}
	rcmd_free(rc);
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
	uint64_t	 start, end = sess_readable(s), stop;
	size_t		 n;

	start = after + 1 < s->base.first_seq ? s->base.first_seq : after + 1;
	if (start > end)
		return 0;
	stop = limit != 0 && limit - 1 < end - start ? start + limit - 1 : end;
	if (!cache_covers(&s->cache, start, stop)) {
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

/* --- ping (synchronous, for start-up checks) --- */

static redisContext *
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

static redisReply *
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

static int
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
	snprintf(st->retention_s, sizeof(st->retention_s), "%" PRIu64,
	    p->retention_ms);
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
static void
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
	rs_event_free(&st->ev_tick);
	rs_event_free(&st->ev_retry);
	rs_event_free(&st->ev_timeout);
	rs_event_free(&st->ev_flush);
	rs_event_free(&st->ev_kill);
	rs_flush_out(&st->cmd);
	rs_drop_conn(st, &st->sen);
	rs_drop_conn(st, &st->sub);
	rs_drop_conn(st, &st->cmd);
	rs_store_unref(st);
}
