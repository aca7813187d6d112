/*
 * Redis store backend: a session's open and its lease (see store_redis.c
 * for the model).  An owner's open acquires the lease (SC_ACQUIRE), a
 * follower's only reads the log's state (SC_PEEK); both then fill the
 * cache with the log's tail before the user hears of the open.  A
 * follower's promote acquires the lease the same way.  An owner renews
 * its lease every lease/3 (SC_RENEW) and releases it at close or demote
 * (SC_RELEASE).
 */
#include <sys/types.h>
#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "parley/epoch.h"
#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"

#include "rcluster.h"
#include "store_redis.h"

/* KEYS log meta owner fence in kb; ARGV token lease retention.  An
 * open session's keys must not expire under it, idle or not. */
const char rs_lua_renew[] =
	"if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {0} end\n"
	"redis.call('PEXPIRE', KEYS[3], ARGV[2])\n"
	"for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]}) do\n"
	"  " RS_TTL("k", "ARGV[3]")
	"end\n"
	"return {1, redis.call('HGET', KEYS[2], 'last') or '0'}\n";

/*
 * KEYS log meta owner fence in kb; ARGV node lease create force
 * retention epoch channel.  When the data changed hands since the last acquire
 * (a failover or a restart gives the master a new replication id,
 * recorded here as 'replid'), events the last owner had acknowledged may
 * be gone and the next events would take their seqs: a new epoch starts
 * after the last seq (parley/epoch.h; at most 8 kept, the oldest's from
 * folded into the next).  Without one the master still holds all it
 * acknowledged: a dead worker's session keeps its epoch.  A session
 * acquired before (a replid recorded) gets one even at last 0: the
 * failover may have lost its first events, and the next would take
 * their seqs.
 */
const char rs_lua_acquire[] =
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
	"local m = redis.call('HMGET', KEYS[2], 'doc', 'last', 'inpos',\n"
	"  'replid', 'epochs')\n"
	"local ep = m[5] or ''\n"
	"local rid = string.match(redis.call('INFO', 'replication'),\n"
	"  'master_replid:(%x+)') or ''\n"
	"redis.call('HSET', KEYS[2], 'replid', rid)\n"
	"if m[4] and m[4] ~= rid then\n"
	"  local v = {}\n"
	"  for t, f in string.gmatch(ep, '(%x+):(%d+)') do\n"
	"    v[#v + 1] = {t, tonumber(f)}\n"
	"  end\n"
	"  v[#v + 1] = {ARGV[6], tonumber(m[2]) + 1}\n"
	"  if #v > 8 then\n"
	"    if v[1][2] < v[2][2] then v[2][2] = v[1][2] end\n"
	"    table.remove(v, 1)\n"
	"  end\n"
	"  local o = {}\n"
	"  for i, e in ipairs(v) do\n"
	"    o[i] = e[1] .. ':' .. string.format('%.0f', e[2])\n"
	"  end\n"
	"  ep = table.concat(o, ',')\n"
	"  redis.call('HSET', KEYS[2], 'epochs', ep)\n"
	"  redis.call('PUBLISH', ARGV[7], 'epoch')\n"
	"end\n"
	"local f = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)\n"
	"return {1, tok, m[1], m[2], m[3], f[1] and f[1][1] or false, ep}\n";

/* KEYS owner; ARGV token channel */
const char rs_lua_release[] =
	"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
	"redis.call('DEL', KEYS[1])\n"
	"redis.call('PUBLISH', ARGV[2], 'vacant')\n"
	"return 1\n";

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
	s->slot = rcl_keyslot(s->k_log, strlen(s->k_log));
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

/* Gives a lease back if it is still this token's (best effort). */
static void
rs_release_token(struct rsess *s, const char *token, size_t len)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;

	if (len == 0 || st->link != LINK_UP ||
	    (rc = rs_cmd_new(st, RC_FIRE, NULL, NULL)) == NULL)
		return;
	rc->slot = (int)s->slot;
	rs_args_init(&a, 8, 1);
	rs_args_script(&a, st, SC_RELEASE, 1);
	rs_args_str(&a, s->k_owner);
	rs_args_add(&a, token, len);
	rs_args_str(&a, s->ch_ev);
	rs_eval(st, rc, SC_RELEASE, &a);
	rs_args_free(&a);
}

/* Back to follower after a promote that was cancelled or failed. */
void
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
	char		 tok[EPOCH_TOKEN_LEN + 1];
	int		 r;

	if ((rc = rs_cmd_new(st, RC_ACQUIRE, s, req)) == NULL)
		return -1;
	rc->u1 = (uint64_t)create;
	rs_args_init(&a, 16, 1);
	rs_args_script(&a, st, SC_ACQUIRE, RS_SKEYS);
	rs_args_skeys(&a, s);
	rs_args_str(&a, st->node);
	rs_args_str(&a, st->lease_s);
	rs_args_str(&a, create ? "1" : "0");
	rs_args_add(&a, force, forcelen);
	rs_args_str(&a, rs_retention(s));
	epoch_token(tok);
	rs_args_str(&a, tok);
	rs_args_str(&a, s->ch_ev);
	r = rs_eval(st, rc, SC_ACQUIRE, &a);
	rs_args_free(&a);
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

	if (r->elements < 7 || !rs_isstr(e[1]) ||
	    e[1]->len >= sizeof(s->token) || rs_replyu64(e[3], &last) == -1)
		return -1;
	if (rs_isstr(e[5])) {
		if (rs_idseq(e[5]->str, e[5]->len, &first) == -1)
			return -1;
	} else
		first = last + 1;
	if (rs_set_epochs(s, e[6]) == -1)
		return -1;
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
	s->ttl_due = s->mark_due = 1;
	if (rs_isstr(e[4]) && e[4]->len < sizeof(s->in_cursor))
		memcpy(s->in_cursor, e[4]->str, e[4]->len + 1);
	else
		s->in_cursor[0] = '\0';
	s->inpos_next[0] = '\0';
	s->inpos_landed[0] = '\0';
	s->base.last_seq = s->base.durable_seq = s->sent_seq = last;
	s->base.first_seq = first;
	rs_sess_cache_below(s, first);
	return 0;
}

void
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
	rs_feed_join(s);
	rs_subscribe(st, rs_sess_chan(s));
	rs_sess_ref(s);
	cb(arg, 0, &s->base, s->base.role);
	if (!s->closed && s->base.role == STORE_OWNER)
		rs_inbox_read(s);
	rs_sess_unref(s);
}

static void
rs_promoted(struct rsess *s, struct rreq *req)
{
	struct rstore	*st = s->st;

	s->promoting = NULL;
	rs_feed_unwatch(s);
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
 * Starts loading the last `tail` records into the cache (keeping what it
 * holds when that joins up).  0 sent, 1 nothing to load, -1 failed.
 */
static int
rs_fill_start(struct rsess *s, struct rreq *req)
{
	struct rcache	*c = &s->cache;
	uint64_t	 last = s->base.last_seq, first = s->base.first_seq;
	uint64_t	 from;

	rs_sess_cache_below(s, first);
	if (c->n > 0 && rs_cache_last(c) > last)
		rs_cache_clear(c);		/* the store lost records */
	if (s->tail == 0 || last == 0 || last < first)
		return 1;
	from = last >= s->tail ? last - s->tail + 1 : 1;
	if (from < first)
		from = first;
	if (c->n > 0) {
		if (rs_cache_last(c) + 1 >= from)
			from = rs_cache_last(c) + 1;
		else
			rs_cache_clear(c);
	}
	if (from > last)
		return 1;
	s->fill_next = from;
	s->fill_end = last;
	return rs_fetch_send(s, req, from, last, RS_CHUNK) == 0 ? 0 : -1;
}

static int
rs_fill_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct rsess	*s = arg;
	struct rrec	*r;

	/* The cache is an optimisation: out of memory, it holds less. */
	if ((r = rs_rec_new(seq, ts, json, len)) != NULL)
		rs_sess_cache_push(s, r);
	return 0;
}

void
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

/* A follower's open: the state of the log, then its tail. */
void
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
	if (rs_set_epochs(s, r->element[4]) == -1) {
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

void
rs_on_acquire(struct rcmd *rc, redisReply *r)
{
	struct rsess		*s = rc->s;
	struct rreq		*req = rc->req;
	const redisReply	*h;
	long long		 code = -2;
	uint64_t		 seen, from;
	char			 old[EPOCH_TEXT_MAX];

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
		seen = s->base.last_seq;
		memcpy(old, s->epochs, sizeof(old));
		if (rs_take_lease(s, r, rc->sent) == -1) {
			if (r->elements >= 2 && rs_isstr(r->element[1]))
				rs_release_token(s, r->element[1]->str,
				    r->element[1]->len);
			break;
		}
		/* A follower that read past where the history was rewritten
		 * holds records that are not the log's: its user must read
		 * the session again.  So does one that did not: its clients
		 * hold no epoch or an older one, and would get a needless
		 * RESUME_GAP at their next resume; cut now, they resume
		 * below `from`, without one.  The lease goes back. */
		if (req != NULL && rs_rewritten(old, s->epochs,
		    strlen(s->epochs), &from) == 1) {
			rs_release_token(s, s->token, strlen(s->token));
			s->token[0] = '\0';
			s->lease_gen++;
			rs_req_finish(req, -1, EIO);
			rs_sess_fail(s, EIO, "the log's history was rewritten "
			    "from seq %" PRIu64 " (a store failover may have "
			    "lost events; this process had read to %" PRIu64
			    "); letting the session go so its clients read it "
			    "again", from, seen);
			return;
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

void
rs_open_send(struct rsess *s)
{
	s->parked = 0;
	if (rs_acquire_send(s, NULL, s->create, "", 0) == -1)
		rs_open_fail(s, EIO);
}

void
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

void
rs_sess_close(struct store_sess *bs)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rstore	*st = s->st;
	struct rreq	*req;
	struct wbatch	*b;

	s->closed = 1;
	s->linked = 0;
	rs_feed_leave(s);
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
		if (b->waited)
			rs_batch_free(b);
	}
	s->ninflight = 0;
	if (!st->closing)
		rs_unsubscribe(st, rs_sess_chan(s));
	rs_wopq_free(&s->wq);
	rs_sess_unref(s);
}

/* --- leases --- */

static void
rs_renew_send(struct rsess *s)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;

	if ((rc = rs_cmd_new(st, RC_RENEW, s, NULL)) == NULL)
		return;
	rc->u1 = s->lease_gen;
	rs_args_init(&a, 12, 1);
	rs_args_script(&a, st, SC_RENEW, RS_SKEYS);
	rs_args_skeys(&a, s);
	rs_args_str(&a, s->token);
	rs_args_str(&a, st->lease_s);
	rs_args_str(&a, rs_retention(s));
	if (rs_eval(st, rc, SC_RENEW, &a) == 0)
		s->renewing = 1;
	rs_args_free(&a);
}

void
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

void
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
		/* Followers hear of a lapse only from a silent owner process,
		 * and this one is not: tell them to look now. */
		rs_publish_look(s, "vacant");
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

struct store_req *
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
