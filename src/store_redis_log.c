/*
 * Redis store backend: a session's log (see store_redis.c for the model).
 * Records and the cache of recent ones; the owner's writes, queued per
 * session and sent in batches (SC_APPEND, SC_META) with their repair after
 * a failover; reading the log in chunks (XRANGE) for range and preload;
 * trim (SC_TRIM).
 */
#include <sys/types.h>
#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
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
 * KEYS log meta owner fence in kb; ARGV token retention prev inpos
 * channel last mark, then id ts json per record.  retention '' leaves the
 * keys' TTL alone (renewed at most every ttl_every, rs_ttl_take).
 * Followers read up to 'durable' when the meta has one (SC_PEEK).
 * Without store-wait (channel given) every append is durable at once: it
 * publishes its last seq, and the first of a tenure (mark '1') drops a
 * mark an earlier store-wait owner left; nothing sets one while this
 * owner holds the lease.  With store-wait (channel '') it publishes
 * nothing and leaves 'durable' where it was, the first starting it at
 * prev on a log that had none: the owner moves it (SC_DURABLE) once WAIT
 * says the replicas hold the batch, so no follower shows an event a
 * master failover could still lose.
 */
const char rs_lua_append[] =
	"if redis.call('GET', KEYS[3]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"local last = redis.call('HGET', KEYS[2], 'last') or '0'\n"
	"if last ~= ARGV[3] then\n"
	"  return redis.error_reply('SEQ ' .. last)\n"
	"end\n"
	"for i = 8, #ARGV - 2, 3 do\n"
	"  redis.call('XADD', KEYS[1], ARGV[i], 't', ARGV[i + 1],\n"
	"    'e', ARGV[i + 2])\n"
	"end\n"
	"local n = #ARGV >= 10\n"
	"if n then redis.call('HSET', KEYS[2], 'last', ARGV[6]) end\n"
	"if ARGV[4] ~= '' then\n"
	"  redis.call('HSET', KEYS[2], 'inpos', ARGV[4])\n"
	"  redis.call('XTRIM', KEYS[5], 'MINID', ARGV[4])\n"
	"end\n"
	"if ARGV[2] ~= '' then\n"
	"  for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]}) do\n"
	"    " RS_TTL("k", "ARGV[2]")
	"  end\n"
	"end\n"
	"if ARGV[5] == '' then\n"
	"  if ARGV[7] == '1' then\n"
	"    redis.call('HSETNX', KEYS[2], 'durable', ARGV[3])\n"
	"  end\n"
	"elseif n then\n"
	"  if ARGV[7] == '1' then redis.call('HDEL', KEYS[2], 'durable') end\n"
	"  redis.call('PUBLISH', ARGV[5], ARGV[6])\n"
	"end\n"
	"return 1\n";

/* KEYS meta owner; ARGV token seq channel.  store-wait: WAIT said the
 * replicas hold the log up to seq; followers may show it.  Only ever
 * raises the mark (marks may arrive in any order across connections). */
const char rs_lua_durable[] =
	"if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end\n"
	"local d = redis.call('HGET', KEYS[1], 'durable')\n"
	"if d == false or tonumber(d) < tonumber(ARGV[2]) then\n"
	"  redis.call('HSET', KEYS[1], 'durable', ARGV[2])\n"
	"end\n"
	"redis.call('PUBLISH', ARGV[3], ARGV[2])\n"
	"return 1\n";

/* KEYS log meta owner fence in kb; ARGV token retention doc prev
 * (retention as in rs_lua_append).  The log must end where the appends
 * queued before it left it: a meta write never lands behind an append
 * that did not. */
const char rs_lua_meta[] =
	"if redis.call('GET', KEYS[3]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"local last = redis.call('HGET', KEYS[2], 'last') or '0'\n"
	"if last ~= ARGV[4] then\n"
	"  return redis.error_reply('SEQ ' .. last)\n"
	"end\n"
	"redis.call('HSET', KEYS[2], 'doc', ARGV[3])\n"
	"if ARGV[2] ~= '' then\n"
	"  for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]}) do\n"
	"    " RS_TTL("k", "ARGV[2]")
	"  end\n"
	"end\n"
	"return 1\n";

/* KEYS log owner; ARGV token minid */
const char rs_lua_trim[] =
	"if redis.call('GET', KEYS[2]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"return redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])\n";

/* --- records and the cache --- */

struct rrec *
rs_rec_new(uint64_t seq, uint64_t ts, const char *json, size_t len)
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
rs_rec_size(const struct rrec *r)
{
	return sizeof(*r) + r->len + 1;
}

static struct rrec *
rs_cache_at(const struct rcache *c, size_t i)
{
	return c->v[(c->head + i) & (c->cap - 1)];
}

static uint64_t
rs_cache_first(const struct rcache *c)
{
	return rs_cache_at(c, 0)->seq;
}

uint64_t
rs_cache_last(const struct rcache *c)
{
	return rs_cache_at(c, c->n - 1)->seq;
}

static int
rs_cache_grow(struct rcache *c)
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
		v[i] = rs_cache_at(c, i);
	free(c->v);
	c->v = v;
	c->cap = ncap;
	c->head = 0;
	return 0;
}

static int
rs_cache_push_back(struct rcache *c, struct rrec *r)
{
	if (rs_cache_grow(c) == -1)
		return -1;
	c->v[(c->head + c->n) & (c->cap - 1)] = r;
	c->n++;
	c->bytes += rs_rec_size(r);
	return 0;
}

static int
rs_cache_push_front(struct rcache *c, struct rrec *r)
{
	if (rs_cache_grow(c) == -1)
		return -1;
	c->head = (c->head - 1) & (c->cap - 1);
	c->v[c->head] = r;
	c->n++;
	c->bytes += rs_rec_size(r);
	return 0;
}

static struct rrec *
rs_cache_pop_front(struct rcache *c)
{
	struct rrec	*r;

	r = c->v[c->head];
	c->head = (c->head + 1) & (c->cap - 1);
	c->n--;
	c->bytes -= rs_rec_size(r);
	return r;
}

void
rs_cache_clear(struct rcache *c)
{
	while (c->n > 0)
		free(rs_cache_pop_front(c));
}

void
rs_cache_free(struct rcache *c)
{
	rs_cache_clear(c);
	free(c->v);
	c->v = NULL;
	c->cap = 0;
}

static struct rrec *
rs_cache_find(const struct rcache *c, uint64_t seq)
{
	if (c->n == 0 || seq < rs_cache_first(c) || seq > rs_cache_last(c))
		return NULL;
	return rs_cache_at(c, (size_t)(seq - rs_cache_first(c)));
}

int
rs_cache_covers(const struct rcache *c, uint64_t from, uint64_t to)
{
	if (from > to)
		return 1;
	return c->n > 0 && from >= rs_cache_first(c) && to <= rs_cache_last(c);
}

/* Drops the oldest records beyond the session's bounds. */
static void
rs_sess_cache_bound(struct rsess *s)
{
	struct rcache	*c = &s->cache;

	while (c->n > 0 && (c->n > s->cmax_recs || c->bytes > s->cmax_bytes))
		free(rs_cache_pop_front(c));
}

/* Drops cached records the log no longer holds (trimmed). */
void
rs_sess_cache_below(struct rsess *s, uint64_t first)
{
	struct rcache	*c = &s->cache;

	while (c->n > 0 && rs_cache_first(c) < first)
		free(rs_cache_pop_front(c));
}

/*
 * Adds a record after the cached run (taking ownership).  Older records
 * are dropped; one that leaves a hole restarts the run, which must stay
 * contiguous for rs_cache_find().
 */
void
rs_sess_cache_push(struct rsess *s, struct rrec *r)
{
	struct rcache	*c = &s->cache;

	if (c->n > 0) {
		if (r->seq <= rs_cache_last(c)) {
			free(r);
			return;
		}
		if (r->seq != rs_cache_last(c) + 1)
			rs_cache_clear(c);
	}
	if (rs_cache_push_back(c, r) == -1) {
		free(r);
		return;
	}
	rs_sess_cache_bound(s);
}

/* The last seq store_range() may read: only durable records. */
uint64_t
rs_sess_readable(const struct rsess *s)
{
	return s->base.role == STORE_OWNER ? s->base.durable_seq :
	    s->base.last_seq;
}

/* Copies a record read from the store into the cache if it extends it. */
static void
rs_sess_cache_offer(struct rsess *s, uint64_t seq, uint64_t ts,
    const char *json, size_t len)
{
	struct rrec	*r;

	if (seq > rs_sess_readable(s) || seq < s->base.first_seq)
		return;
	if (s->cache.n > 0 && seq != rs_cache_last(&s->cache) + 1)
		return;
	if ((r = rs_rec_new(seq, ts, json, len)) != NULL)
		rs_sess_cache_push(s, r);
}

/* --- writes --- */

static void
rs_wop_free(struct wop *op)
{
	free(op->rec);
	free(op->doc);
	free(op);
}

void
rs_wopq_free(struct wopq *q)
{
	struct wop	*op;

	while ((op = TAILQ_FIRST(q)) != NULL) {
		TAILQ_REMOVE(q, op, entry);
		rs_wop_free(op);
	}
}

void
rs_batch_free(struct wbatch *b)
{
	rs_wopq_free(&b->ops);
	free(b);
}

/* KEYS log meta owner fence in kb, after "EVALSHA sha RS_SKEYS". */
void
rs_args_skeys(struct rargs *a, const struct rsess *s)
{
	rs_args_str(a, s->k_log);
	rs_args_str(a, s->k_meta);
	rs_args_str(a, s->k_owner);
	rs_args_str(a, s->k_fence);
	rs_args_str(a, s->k_in);
	rs_args_str(a, s->k_kb);
}

/*
 * Whether this write renews the keys' TTL: the first append after an
 * acquire or a repair (the log may be created by it, after the acquire
 * set the TTL of what existed: a meta write before it does not count),
 * then once every ttl_every.  Counted from the send: the TTL is
 * retention + ttl_every from when Redis ran it, which is later, so every
 * event sent before the next renewal is kept the retention at least.
 * *due says what to restore if the write is not sent.
 */
static int
rs_ttl_take(struct rsess *s, int append, int *due)
{
	uint64_t	 now = util_mono_ms();

	*due = s->ttl_due;
	if (!s->ttl_due && now - s->ttl_at < s->st->ttl_every)
		return 0;
	/*
	 * Only an append moves the clock: a meta write a failover loses
	 * is never noticed (it moves no seq), so it renews when due but
	 * leaves the next append due too; an append lost is repaired.
	 */
	if (append) {
		s->ttl_due = 0;
		s->ttl_at = now;
	}
	return 1;
}

/* Sends writes from the head of the queue as one script call. */
int
rs_batch_send(struct rsess *s)
{
	struct rstore	*st = s->st;
	struct wbatch	*b;
	struct wop	*op;
	struct rargs	 a;
	struct rcmd	*rc;
	uint64_t	 ttl_at = s->ttl_at;
	int		 r, ttl, ttl_due, mark_due = s->mark_due;

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
		/* Carried until a batch lands with it: one that fails
		 * leaves it to the next. */
		if (strcmp(s->inpos_next, s->inpos_landed) != 0)
			memcpy(b->inpos, s->inpos_next, sizeof(b->inpos));
	}
	if ((rc = rs_cmd_new(st, RC_BATCH, s, NULL)) == NULL)
		goto fail;
	ttl = rs_ttl_take(s, !b->meta, &ttl_due);
	if (b->meta) {
		rs_args_init(&a, 13, 2);
		rs_args_script(&a, st, SC_META, RS_SKEYS);
		rs_args_skeys(&a, s);
		rs_args_str(&a, s->token);
		rs_args_str(&a, ttl ? rs_retention(s) : "");
		op = TAILQ_FIRST(&b->ops);
		rs_args_add(&a, op->doc, op->doclen);
		rs_args_u64(&a, b->prev);
		r = rs_eval(st, rc, SC_META, &a);
	} else {
		rs_args_init(&a, 16 + 3 * (int)b->nrec, 3 + 2 * (int)b->nrec);
		rs_args_script(&a, st, SC_APPEND, RS_SKEYS);
		rs_args_skeys(&a, s);
		rs_args_str(&a, s->token);
		rs_args_str(&a, ttl ? rs_retention(s) : "");
		rs_args_u64(&a, b->prev);
		rs_args_str(&a, b->inpos);
		/* With store-wait the notice waits for WAIT (rs_mark_durable). */
		rs_args_str(&a, st->wait_n > 0 ? "" : s->ch_ev);
		rs_args_u64(&a, b->last);
		rs_args_str(&a, s->mark_due ? "1" : "");
		s->mark_due = 0;
		TAILQ_FOREACH(op, &b->ops, entry) {
			rs_args_id(&a, op->rec->seq);
			rs_args_u64(&a, op->rec->ts);
			rs_args_add(&a, op->rec->json, op->rec->len);
		}
		r = rs_eval(st, rc, SC_APPEND, &a);
	}
	rs_args_free(&a);
	if (r == -1) {
		s->ttl_due = ttl_due;
		s->ttl_at = ttl_at;
		s->mark_due = mark_due;
		goto fail;
	}
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

void
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

void
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
void
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
	rs_wopq_free(&s->wq);
	while ((b = TAILQ_FIRST(&s->inflight)) != NULL) {
		TAILQ_REMOVE(&s->inflight, b, entry);
		b->orphan = 1;
		if (b->waited)
			rs_batch_free(b);
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

int
rs_congested(const struct store_sess *bs)
{
	const struct rsess *s = (const struct rsess *)bs;

	return s->wq_recs + RS_CONGEST_RECS >= RS_QUEUE_RECS ||
	    s->wq_bytes + RS_CONGEST_BYTES >= RS_QUEUE_BYTES;
}

int
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
	if ((op->rec = rs_rec_new(seq, ts, json, len)) == NULL) {
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

int
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
void
rs_repair(struct rsess *s, uint64_t n, struct wbatch *failed)
{
	struct wopq	 redo;
	struct wbatch	*b;
	struct wop	*op;
	struct rrec	*r;
	uint64_t	 seq, durable = s->base.durable_seq;

	if (!rs_cache_covers(&s->cache, n + 1, durable)) {
		rs_sess_fail(s, EIO, "the store lost events %" PRIu64 "-%"
		    PRIu64 " (failover?) and they are no longer cached: they "
		    "are lost", n + 1, durable);
		return;
	}
	log_warnx("store: session %s: the store lost events %" PRIu64 "-%"
	    PRIu64 " (failover?); appending them again from the cache",
	    s->base.id, n + 1, durable);
	s->inpos_landed[0] = '\0';	/* lost with them, perhaps */
	TAILQ_INIT(&redo);
	for (seq = n + 1; seq <= durable; seq++) {
		r = rs_cache_find(&s->cache, seq);
		if ((op = calloc(1, sizeof(*op))) == NULL ||
		    (op->rec = rs_rec_new(r->seq, r->ts, r->json, r->len)) ==
		    NULL) {
			free(op);
			rs_wopq_free(&redo);
			rs_sess_fail(s, EIO, "out of memory repairing the log");
			return;
		}
		TAILQ_INSERT_TAIL(&redo, op, entry);
		s->wq_recs++;
		s->wq_bytes += r->len;
	}
	/* Everything sent after n fails the same SEQ check: send it again
	 * after the repair, in order (batches that landed and wait for
	 * replicas come before the failed one). */
	while ((b = TAILQ_FIRST(&s->inflight)) != NULL && b->landed) {
		TAILQ_REMOVE(&s->inflight, b, entry);
		b->orphan = 1;
		TAILQ_CONCAT(&redo, &b->ops, entry);
		if (b->waited)
			rs_batch_free(b);
	}
	if (failed != NULL)
		TAILQ_CONCAT(&redo, &failed->ops, entry);
	while ((b = TAILQ_FIRST(&s->inflight)) != NULL) {
		TAILQ_REMOVE(&s->inflight, b, entry);
		b->orphan = 1;
		TAILQ_CONCAT(&redo, &b->ops, entry);
		if (b->waited)
			rs_batch_free(b);
	}
	s->ninflight = 0;
	TAILQ_CONCAT(&redo, &s->wq, entry);
	TAILQ_CONCAT(&s->wq, &redo, entry);
	s->sent_seq = n;
	/* The failed writes may have been the ones to renew the TTL and
	 * settle the mark: they did not run. */
	s->ttl_due = s->mark_due = 1;
	rs_flush_sess(s);
}

/* The batch is in the log (and on enough replicas): it is durable. */
static void
rs_batch_durable(struct rsess *s, struct wbatch *b)
{
	struct rstore	*st = s->st;
	struct wop	*op;
	uint64_t	 before = s->base.durable_seq;

	TAILQ_REMOVE(&s->inflight, b, entry);
	s->ninflight--;
	b->orphan = 1;
	s->wq_recs -= b->nrec;
	s->wq_bytes -= b->bytes;
	while ((op = TAILQ_FIRST(&b->ops)) != NULL) {
		TAILQ_REMOVE(&b->ops, op, entry);
		if (op->rec != NULL) {
			rs_sess_cache_push(s, op->rec);	/* takes it */
			op->rec = NULL;
		}
		rs_wop_free(op);
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

/*
 * store-wait: the batch landed; WAIT for the replicas before it counts
 * as durable.  The WAIT command takes the batch (it stays first among
 * the session's unanswered ones).  Sent after the script's reply, not
 * pipelined with it, so a script re-sent after NOSCRIPT is never waited
 * for before it ran.  A WAIT covers every write its connection sent
 * before it, and blocks the connection until the replicas answer: when
 * the last WAIT sent on the batch's connection, still unanswered, went
 * after the batch, the batch rides on it instead of sending another
 * (one WAIT for the batches whose replies came in one read, not one
 * each).
 */
static void
rs_wait_send(struct rsess *s, struct rcmd *rc)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*wrc, *lead = rc->conn->wait;

	if ((wrc = rs_cmd_new(st, RC_WAIT, s, NULL)) == NULL) {
		rs_sess_fail(s, EIO, "out of memory sending WAIT");
		return;
	}
	if (lead != NULL && lead->no > rc->no) {
		wrc->conn = rc->conn;
		wrc->rnext = lead->riders;
		lead->riders = wrc;
		wrc->b = rc->b;
		rc->b = NULL;
		wrc->b->landed = 1;
		return;
	}
	rs_args_init(&a, 3, 2);
	rs_args_str(&a, "WAIT");
	rs_args_u64(&a, st->wait_n);
	rs_args_u64(&a, st->wait_ms);
	/* On the connection the batch ran on: after an ASK that is the
	 * importing node, which the slot map does not name yet, and a
	 * WAIT elsewhere would count another master's replicas. */
	wrc->conn = rc->conn;
	if (rs_send(st, wrc, &a) == -1) {
		rs_args_free(&a);
		rs_sess_fail(s, EIO, "could not send WAIT (the store "
		    "connection is down): writes not acknowledged");
		return;
	}
	rs_args_free(&a);
	wrc->conn->wait = wrc;
	wrc->b = rc->b;
	rc->b = NULL;
	wrc->b->landed = 1;
}

void
rs_on_batch(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	struct rstore	*st = s->st;
	struct wbatch	*b = rc->b, *first;
	uint64_t	 n, before = s->base.durable_seq;
	const char	*sp;

	if (b->orphan || s->closed || s->failed)
		return;
	/* Batches that landed and wait for replicas come before it. */
	first = TAILQ_FIRST(&s->inflight);
	while (first != NULL && first->landed)
		first = TAILQ_NEXT(first, entry);
	if (b != first) {
		rs_sess_fail(s, EIO, "write replies out of order");
		return;
	}
	if (r == NULL) {
		/* It may or may not have landed: the user re-opens. */
		rs_sess_fail(s, EIO, "the store connection was lost with "
		    "writes in flight");
		return;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		TAILQ_REMOVE(&s->inflight, b, entry);
		s->ninflight--;
		b->orphan = 1;
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
	if (b->inpos[0] != '\0')
		memcpy(s->inpos_landed, b->inpos, sizeof(s->inpos_landed));
	if (st->wait_n > 0)
		rs_wait_send(s, rc);
	else
		rs_batch_durable(s, b);
}

/*
 * store-wait: the replicas hold the log up to seq, so followers may read
 * it: raise the meta's 'durable' mark and publish the notice.  Nobody
 * waits for the reply: a lost mark only delays followers until the next
 * one, or their poll.
 */
static void
rs_mark_durable(struct rsess *s, uint64_t seq)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;

	if (st->closing || (rc = rs_cmd_new(st, RC_FIRE, NULL, NULL)) == NULL) {
		log_warnx("store: session %s: could not tell followers of "
		    "events up to %" PRIu64 " (out of memory); they read "
		    "them at their next poll", s->base.id, seq);
		return;
	}
	rc->slot = (int)s->slot;
	rs_args_init(&a, 8, 2);
	rs_args_script(&a, st, SC_DURABLE, 2);
	rs_args_str(&a, s->k_meta);
	rs_args_str(&a, s->k_owner);
	rs_args_str(&a, s->token);
	rs_args_u64(&a, seq);
	rs_args_str(&a, s->ch_ev);
	if (rs_eval(st, rc, SC_DURABLE, &a) == -1)
		log_warnx("store: session %s: could not tell followers of "
		    "events up to %" PRIu64 " (the store connection is "
		    "down); they read them at their next poll", s->base.id,
		    seq);
	rs_args_free(&a);
}

static void	rs_on_wait_one(struct rcmd *, redisReply *);

/* The reply to a WAIT: for its batch, then for those riding on it. */
void
rs_on_wait(struct rcmd *rc, redisReply *r)
{
	struct rstore	*st = rc->st;
	struct rcmd	*rider, *order = NULL;

	if (rc->conn->wait == rc)
		rc->conn->wait = NULL;
	rs_on_wait_one(rc, r);
	/* Riders were put first: their batches' order is the reverse. */
	while ((rider = rc->riders) != NULL) {
		rc->riders = rider->rnext;
		rider->rnext = order;
		order = rider;
	}
	while ((rider = order) != NULL) {
		order = rider->rnext;
		if (!st->closing)
			rs_on_wait_one(rider, r);
		rs_cmd_free(rider);
	}
}

/* The reply to the WAIT after a batch (rc owns the batch). */
static void
rs_on_wait_one(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	struct rstore	*st = s->st;
	struct wbatch	*b = rc->b;

	if (b == NULL || b->orphan || s->closed || s->failed)
		return;
	if (r == NULL) {
		rs_sess_fail(s, EIO, "the store connection was lost waiting "
		    "for replicas: events %" PRIu64 "-%" PRIu64 " are not "
		    "acknowledged", b->prev + 1, b->last);
		return;
	}
	if (r->type != REDIS_REPLY_INTEGER) {
		rs_sess_fail(s, EIO, "WAIT failed: %s", rs_errstr(r));
		return;
	}
	if (r->integer < (long long)st->wait_n) {
		char node[300];

		/* On a cluster, the master the batch ran on. */
		rs_cl_name(st, rc->conn, node, sizeof(node));
		rs_sess_fail(s, EIO, "only %lld of the %u replicas store-wait "
		    "asks for acknowledged %s within %u ms: not acknowledged; "
		    "check the replicas and their link to the master (INFO "
		    "replication on %s) or lower store-wait", r->integer,
		    st->wait_n, b->meta ? "a state write" : "the events",
		    st->wait_ms, node);
		return;
	}
	/* WAITs on two masters (a batch sent again after MOVED) may answer
	 * out of order: a batch is durable once every earlier one is.  The
	 * session keeps a waited batch until then (its rc goes now). */
	rc->b = NULL;
	b->waited = 1;
	while (!s->closed && !s->failed &&
	    (b = TAILQ_FIRST(&s->inflight)) != NULL && b->waited) {
		if (!b->meta)
			rs_mark_durable(s, b->last);
		rs_batch_durable(s, b);		/* takes it off the list */
		rs_batch_free(b);
	}
}

/* --- reading the log --- */

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

void
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

int
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
	if ((rc = rs_cmd_new(st, RC_FETCH, s, req)) == NULL)
		return -1;
	rc->count = count;
	snprintf(f, sizeof(f), "%" PRIu64 "-0", from);
	snprintf(t, sizeof(t), "%" PRIu64 "-0", to);
	rs_args_init(&a, 6, 1);
	rs_args_str(&a, "XRANGE");
	rs_args_str(&a, s->k_log);
	rs_args_str(&a, f);
	rs_args_str(&a, t);
	rs_args_str(&a, "COUNT");
	rs_args_u64(&a, count);
	r = rs_send(st, rc, &a);
	rs_args_free(&a);
	return r;
}

/*
 * Walks an XRANGE reply of the log: fn gets each record, non-zero stops.
 * Returns entries walked (the stopping one included), -1 if malformed.
 */
ssize_t
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
rs_range_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct rreq	*req = arg;
	struct rsess	*s = req->s;

	if (seq < req->next)
		return 0;
	rs_sess_cache_offer(s, seq, ts, json, len);
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

void
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
size_t
rs_cache_deliver(struct rsess *s, uint64_t from, uint64_t to,
    store_range_cb cb, void *arg)
{
	struct rrec	*r;
	uint64_t	 seq;
	size_t		 n = 0;

	rs_sess_ref(s);
	for (seq = from; seq <= to; seq++) {
		if ((r = rs_cache_find(&s->cache, seq)) == NULL)
			break;
		n++;
		if (cb(arg, seq, r->ts, r->json, r->len) != 0 || s->closed)
			break;
	}
	rs_sess_unref(s);
	return n;
}

struct store_req *
rs_range_async(struct store_sess *bs, uint64_t after, size_t limit,
    store_range_cb cb, store_done_cb done, void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rstore	*st = s->st;
	struct rreq	*req;
	uint64_t	 start, end = rs_sess_readable(s), stop;

	start = after + 1 < s->base.first_seq ? s->base.first_seq : after + 1;
	if (start > end)
		return rs_done_now(done, arg, 0, 0);
	stop = limit != 0 && limit - 1 < end - start ? start + limit - 1 : end;
	/* Cached: no round trip. */
	if (rs_cache_covers(&s->cache, start, stop))
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

	if (req->tmp.n > 0 && seq != rs_cache_last(&req->tmp) + 1)
		rs_cache_clear(&req->tmp);		/* trimmed meanwhile */
	if (req->tmp.bytes + s->cache.bytes + sizeof(*r) + len + 1 >
	    STORE_CACHE_MAX || req->tmp.n + s->cache.n >= RS_PRELOAD_RECS ||
	    (r = rs_rec_new(seq, ts, json, len)) == NULL) {
		req->toobig = 1;
		return 1;
	}
	if (rs_cache_push_back(&req->tmp, r) == -1) {
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
	tf = rs_cache_first(t);
	tl = rs_cache_last(t);
	if (c->n == 0 || tf > rs_cache_last(c) + 1) {
		/* Nothing cached, or disjoint and newer: it replaces. */
		rs_cache_clear(c);
		for (i = 0; i < t->n; i++)
			if (rs_cache_push_back(c, rs_cache_at(t, i)) == -1)
				free(rs_cache_at(t, i));
	} else if (tl + 1 < rs_cache_first(c)) {
		/* Older with a hole (the cache moved on): no use. */
		rs_cache_clear(t);
		return;
	} else {
		/* Overlapping or adjacent: what precedes the cache goes in
		 * front, what follows it behind, the rest is a copy. */
		cf = rs_cache_first(c);
		cl = rs_cache_last(c);
		for (i = t->n; i-- > 0;) {
			r = rs_cache_at(t, i);
			if (r->seq < cf && rs_cache_push_front(c, r) == -1)
				free(r);
		}
		for (i = 0; i < t->n; i++) {
			r = rs_cache_at(t, i);
			if (r->seq > cl && rs_cache_push_back(c, r) == -1)
				free(r);
			else if (r->seq >= cf && r->seq <= cl)
				free(r);
		}
	}
	t->n = 0;
	t->bytes = 0;
	rs_sess_cache_bound(s);
}

void
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
		rs_cache_clear(&req->tmp);
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

struct store_req *
rs_preload_async(struct store_sess *bs, uint64_t after, store_done_cb done,
    void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rcache	*c = &s->cache;
	struct rreq	*req;
	uint64_t	 start, end = rs_sess_readable(s), from, to;

	start = after + 1 < s->base.first_seq ? s->base.first_seq : after + 1;
	if (start > end || rs_cache_covers(c, start, end))
		return rs_done_now(done, arg, 0, 0);
	if (s->st->link != LINK_UP)
		return rs_done_now(done, arg, -1, EIO);
	/* From now on this session's cache may hold this much. */
	s->cmax_recs = RS_PRELOAD_RECS;
	s->cmax_bytes = STORE_CACHE_MAX;
	from = start;
	to = end;
	if (c->n > 0 && rs_cache_first(c) <= start && start <= rs_cache_last(c) + 1)
		from = rs_cache_last(c) + 1;	/* only what follows it */
	else if (c->n > 0 && rs_cache_first(c) > start && rs_cache_last(c) >= end)
		to = rs_cache_first(c) - 1;	/* only what precedes it */
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

	if ((rc = rs_cmd_new(st, RC_TRIM_SCAN, s, NULL)) == NULL)
		return -1;
	rc->u1 = cutoff;
	rc->u2 = s->base.durable_seq;
	rc->count = rs_fetch_count(s);
	snprintf(f, sizeof(f), "%" PRIu64 "-0", from);
	snprintf(t, sizeof(t), "%" PRIu64 "-0", s->base.durable_seq);
	rs_args_init(&a, 6, 1);
	rs_args_str(&a, "XRANGE");
	rs_args_str(&a, s->k_log);
	rs_args_str(&a, f);
	rs_args_str(&a, t);
	rs_args_str(&a, "COUNT");
	rs_args_u64(&a, rc->count);
	r = rs_send(st, rc, &a);
	rs_args_free(&a);
	return r;
}

/*
 * Retention by time, in the background: find the first record to keep
 * (newer than the cutoff, or the newest), then XTRIM MINID to it through
 * the fenced script.  Returns 0: first_seq moves when it is done.
 */
int
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

void
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
	    (trc = rs_cmd_new(st, RC_TRIM, s, NULL)) == NULL)
		return;
	trc->u1 = t.target;
	snprintf(minid, sizeof(minid), "%" PRIu64 "-0", t.target);
	rs_args_init(&a, 8, 1);
	rs_args_script(&a, st, SC_TRIM, 2);
	rs_args_str(&a, s->k_log);
	rs_args_str(&a, s->k_owner);
	rs_args_str(&a, s->token);
	rs_args_str(&a, minid);
	if (rs_eval(st, trc, SC_TRIM, &a) == 0)
		s->trimming = 1;
	rs_args_free(&a);
}

void
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
		rs_sess_cache_below(s, rc->u1);
	}
	/* Followers learn the new first seq from a read of the state. */
	if (r->integer > 0)
		rs_publish_look(s, "trimmed");
}
