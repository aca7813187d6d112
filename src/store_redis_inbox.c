/*
 * Redis store backend: what a session hears from other processes (see
 * store_redis.c for the model).  A follower learns a new last seq from
 * the owner's notice, and reads the log's state (SC_PEEK, which its open
 * uses too) when store_redis_feed.c says.  A follower posts to the
 * owner's inbox (SC_POST); the owner reads its inbox when told of a post,
 * and when store_redis_feed.c says.
 */
#include <sys/types.h>
#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "parley/log.h"
#include "parley/store.h"

#include "store_redis.h"

/* KEYS log meta owner; ARGV with_doc.  'last' is the durable mark when
 * there is one (store-wait: what the replicas hold, see rs_lua_append). */
const char rs_lua_peek[] =
	"local f = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)\n"
	"local doc = false\n"
	"if ARGV[1] == '1' then doc = redis.call('HGET', KEYS[2], 'doc') end\n"
	"return {redis.call('HGET', KEYS[2], 'durable') or\n"
	"  redis.call('HGET', KEYS[2], 'last') or '0',\n"
	"  redis.call('GET', KEYS[3]), f[1] and f[1][1] or false, doc,\n"
	"  redis.call('HGET', KEYS[2], 'epochs') or ''}\n";

/* KEYS in; ARGV message retention channel maxlen */
const char rs_lua_post[] =
	"local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*',\n"
	"  'm', ARGV[1])\n"
	RS_TTL("KEYS[1]", "ARGV[2]")
	"redis.call('PUBLISH', ARGV[3], id)\n"
	"return id\n";

/* PEEK: {last, owner's token or nil, first id or nil, doc or nil, epochs}. */
int
rs_parse_peek(const redisReply *r, uint64_t *last, int *exists,
    uint64_t *first)
{
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 5 ||
	    rs_replyu64(r->element[0], last) == -1 ||
	    (r->element[1]->type != REDIS_REPLY_NIL &&
	    !rs_isstr(r->element[1])))
		return -1;
	*exists = rs_isstr(r->element[1]);
	if (rs_isstr(r->element[2]))
		return rs_idseq(r->element[2]->str, r->element[2]->len, first);
	*first = *last + 1;
	return 0;
}

int
rs_set_epochs(struct rsess *s, const redisReply *r)
{
	struct epochs	 e;

	if (!rs_isstr(r)) {
		s->epochs[0] = '\0';
		return 0;
	}
	if (r->len >= sizeof(s->epochs) ||
	    epoch_parse(&e, r->str, r->len) == -1) {
		log_warnx("store: session %s: the epochs field of %s is "
		    "malformed (%.*s); it was not written by parleyd: delete "
		    "the field (HDEL %s epochs)", s->base.id, s->k_meta,
		    (int)(r->len > 80 ? 80 : r->len), r->str, s->k_meta);
		return -1;
	}
	memcpy(s->epochs, r->str, r->len);
	s->epochs[r->len] = '\0';
	return 0;
}

/* store_resync: a follower PEEKs now (once; one in flight is enough). */
void
rs_resync_sess(struct store_sess *bs)
{
	struct rsess	*s = (struct rsess *)bs;

	if (s->base.role == STORE_FOLLOWER)
		rs_poll_send(s);
}

const char *
rs_epochs(const struct store_sess *bs)
{
	return ((const struct rsess *)bs)->epochs;
}

/*
 * The earliest from among the epochs of cur that old does not hold into
 * *from: where the history was rewritten since old.  1 found, 0 none,
 * -1 unreadable.
 */
int
rs_rewritten(const char *old, const char *cur, size_t curlen,
    uint64_t *from)
{
	struct epochs	 o, c;
	size_t		 i, j;
	int		 found = 0;

	if (epoch_parse(&o, old, strlen(old)) == -1 ||
	    curlen >= EPOCH_TEXT_MAX || epoch_parse(&c, cur, curlen) == -1)
		return -1;
	*from = UINT64_MAX;
	for (i = 0; i < c.n; i++) {
		for (j = 0; j < o.n; j++)
			if (strcmp(c.v[i].token, o.v[j].token) == 0)
				break;
		if (j == o.n && c.v[i].from < *from) {
			*from = c.v[i].from;
			found = 1;
		}
	}
	return found;
}

/*
 * A follower's resync found other epochs: the log's history was
 * rewritten from the earliest new epoch's from.  The handle fails, and
 * its clients read the session again: when that reaches into what it
 * read, its records are not the log's any more; when not, its clients
 * must learn the epoch (see below).  0 taken, -1 failed.
 */
static int
rs_epochs_changed(struct rsess *s, const redisReply *r)
{
	uint64_t	 from;
	int		 rw;

	if (!rs_isstr(r) || (r->len == strlen(s->epochs) &&
	    memcmp(r->str, s->epochs, r->len) == 0))
		return 0;
	if ((rw = rs_rewritten(s->epochs, r->str, r->len, &from)) == -1) {
		rs_sess_fail(s, EIO, "the log's epochs are unreadable; letting "
		    "the session go");
		return -1;
	}
	/* Also when from is past what it read: its clients hold no epoch
	 * or an older one and would get a needless RESUME_GAP at their
	 * next resume.  Cut, they resume below from, with none.  The owner
	 * publishes "epoch" when it starts one, so this is heard before
	 * the events that follow. */
	if (rw == 1) {
		rs_sess_fail(s, EIO, "the log's history was rewritten from seq "
		    "%" PRIu64 " (a store failover may have lost events; this "
		    "process had read to %" PRIu64 "); letting the session go "
		    "so its clients read it again", from, s->base.last_seq);
		return -1;
	}
	memcpy(s->epochs, r->str, r->len);
	s->epochs[r->len] = '\0';
	return 0;
}

int
rs_peek_send(struct rsess *s, enum rs_kind kind, int with_doc)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;
	int		 r;

	if ((rc = rs_cmd_new(st, kind, s, NULL)) == NULL)
		return -1;
	rs_args_init(&a, 8, 1);
	rs_args_script(&a, st, SC_PEEK, 3);
	rs_args_str(&a, s->k_log);
	rs_args_str(&a, s->k_meta);
	rs_args_str(&a, s->k_owner);
	rs_args_str(&a, with_doc ? "1" : "0");
	r = rs_eval(st, rc, SC_PEEK, &a);
	rs_args_free(&a);
	return r;
}

void
rs_poll_send(struct rsess *s)
{
	if (s->polling || s->st->link != LINK_UP || s->closed)
		return;
	if (rs_peek_send(s, RC_POLL, 0) == 0) {
		s->polling = 1;
		s->poll_from = s->base.last_seq;
	}
}

void
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
void
rs_on_poll(struct rcmd *rc, redisReply *r)
{
	struct rsess	*s = rc->s;
	struct rstore	*st = s->st;
	uint64_t	 last, first;
	int		 exists;

	s->polling = 0;
	if (s->closed || s->base.role != STORE_FOLLOWER ||
	    rs_parse_peek(r, &last, &exists, &first) == -1 ||
	    rs_epochs_changed(s, r->element[4]) == -1)
		return;
	if (exists)
		rs_feed_owner(s, r->element[1]->str, r->element[1]->len);
	else
		rs_feed_owner(s, NULL, 0);
	if (first > s->base.first_seq && first <= last + 1) {
		s->base.first_seq = first;
		rs_sess_cache_below(s, first);
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

void
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
	if ((rc = rs_cmd_new(st, RC_INBOX, s, NULL)) == NULL)
		return;
	if (s->in_cursor[0] != '\0')
		snprintf(start, sizeof(start), "(%s", s->in_cursor);
	else
		snprintf(start, sizeof(start), "-");
	rs_args_init(&a, 6, 1);
	rs_args_str(&a, "XRANGE");
	rs_args_str(&a, s->k_in);
	rs_args_str(&a, start);
	rs_args_str(&a, "+");
	rs_args_str(&a, "COUNT");
	rs_args_u64(&a, RS_INBOX_CHUNK);
	if (rs_send(st, rc, &a) == 0) {
		s->inbox_busy = 1;
		s->inbox_again = 0;
	}
	rs_args_free(&a);
}

void
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

/* Every session at once: the link just came up. */
void
rs_poll_all(struct rstore *st)
{
	struct store_sess	*bs;

	LIST_FOREACH(bs, &st->base.sessions, entry)
		rs_resync((struct rsess *)bs);
}

struct store_req *
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
	if ((rc = rs_cmd_new(st, RC_POST, s, req)) == NULL) {
		rs_req_finish(req, -1, ENOMEM);
		return NULL;
	}
	rs_args_init(&a, 8, 1);
	rs_args_script(&a, st, SC_POST, 1);
	rs_args_str(&a, s->k_in);
	rs_args_add(&a, json, len);
	rs_args_str(&a, rs_retention(s));
	rs_args_str(&a, s->ch_in);
	rs_args_str(&a, RS_INBOX_MAXLEN);
	r = rs_eval(st, rc, SC_POST, &a);
	rs_args_free(&a);
	if (r == -1) {
		rs_req_finish(req, -1, EIO);
		return NULL;
	}
	return (struct store_req *)req;
}

void
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
