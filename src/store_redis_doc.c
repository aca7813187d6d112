/*
 * Redis store backend: a session's documents (store_doc_put, _del, _all),
 * the knowledge base workers/kb.c keeps.
 *
 *   parley:{ID}:kb	hash, field <name> -> the document's json
 *
 * - Same hash tag as the session's other keys (one Cluster slot).  Its
 *   TTL is the retention, set by every document write and refreshed with
 *   the session's other keys: the scripts that do that (the lease's and
 *   the log's) take it as their KEYS[6].  A session's documents
 *   therefore expire with it.
 * - A write is a Lua script that first checks the owner key still holds
 *   this handle's token, as an append does (else "FENCED"): a process that
 *   lost the session never writes its documents.  A fenced write answers
 *   ESTALE and fails the handle like a fenced append (failed(ESTALE)).
 * - Writes go out on the command connection, not through the session's
 *   write queue: they land in the order they were made, in no particular
 *   order with the appends (nothing needs one).  At most RS_DOC_INFLIGHT
 *   bytes of them are on the wire at once (a larger one alone), the rest
 *   held back in order (up to RS_DOC_QUEUE, then EAGAIN): hiredis moves
 *   its whole output buffer after every partial write, and everything
 *   else of the worker on that connection, lease renewals included,
 *   waits behind what is ahead of it.  A write cancelled (or whose
 *   session closed) before it went out never does.  A read sees the
 *   writes whose done came before it started.
 * - store_doc_all reads with HSCAN, in pages whose COUNT aims at
 *   RS_DOC_PAGE_BYTES from the sizes seen so far, so one reply stays near
 *   that (at worst a few times STORE_DOC_MAX) however large the knowledge
 *   base, and the loop is never held by one huge HGETALL.  HSCAN returns
 *   a field twice when the hash is resized during the scan: names
 *   already delivered are skipped.
 * - Requests are store_redis.c's (struct rreq, kind REQ_DOC): cancel,
 *   session close and connection loss work as for the others; a reply
 *   that finds its request dead calls nobody.
 */
#include <sys/types.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parley/log.h"
#include "parley/store.h"

#include "store_redis.h"

#define RS_DOC_PAGE_BYTES	(4u << 20)	/* what one HSCAN reply aims at */
#define RS_DOC_COUNT_FIRST	16		/* before sizes are known */
#define RS_DOC_COUNT_MAX	1000
#define RS_DOC_INFLIGHT		(4u << 20)	/* write bytes on the wire */
#define RS_DOC_QUEUE		(256u << 20)	/* write bytes held back */

/* rcmd u1; DOC_WAITED + what: the WAIT after a write (store-wait). */
enum { DOC_PUT, DOC_DEL, DOC_SCAN, DOC_WAITED };

/* KEYS owner kb; ARGV token retention name json */
const char rs_lua_docput[] =
	"if redis.call('GET', KEYS[1]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])\n"
	RS_TTL("KEYS[2]", "ARGV[2]")
	"return 1\n";

/* KEYS owner kb; ARGV token name.  Returns 1 removed, 0 absent. */
const char rs_lua_docdel[] =
	"if redis.call('GET', KEYS[1]) ~= ARGV[1] then\n"
	"  return redis.error_reply('FENCED not the owner')\n"
	"end\n"
	"return redis.call('HDEL', KEYS[2], ARGV[2])\n";

/* A store_doc_all in progress. */
struct rdocs {
	store_doc_cb		 cb;
	char			 cursor[RS_NUMLEN];
	uint64_t		 count;		/* HSCAN COUNT to ask next */
	uint64_t		 bytes;		/* of the documents seen */
	uint64_t		 seen;		/* documents seen */
	/* names delivered: open addressing, a power of two */
	char			**names;
	size_t			 nnames;
	size_t			 capnames;
};

/* A document write held back (doc_write); holds a reference on req. */
struct rdocw {
	TAILQ_ENTRY(rdocw)	 entry;		/* st->docq */
	struct rreq		*req;
	int			 what;
	size_t			 len;		/* json and name: the bound's */
	size_t			 jlen;
	char			*json;
	char			 name[];
};

void
rs_doc_req_free(struct rreq *req)
{
	struct rdocs	*d = req->docs;
	size_t		 i;

	if (d == NULL)
		return;
	for (i = 0; i < d->capnames; i++)
		free(d->names[i]);
	free(d->names);
	free(d);
	req->docs = NULL;
}

static size_t
doc_hash(const char *p)
{
	uint64_t	 h = 1469598103934665603ULL;	/* FNV-1a */

	for (; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return (size_t)h;
}

/* Adds name to the delivered set: 1 added, 0 already there, -1 no memory. */
static int
doc_seen_add(struct rdocs *d, const char *name)
{
	char	**nv, *copy;
	size_t	 i, j, ncap;

	if (d->nnames + 1 > d->capnames / 2) {
		ncap = d->capnames ? d->capnames * 2 : 64;
		if (ncap > SIZE_MAX / sizeof(*nv) ||
		    (nv = calloc(ncap, sizeof(*nv))) == NULL)
			return -1;
		for (i = 0; i < d->capnames; i++) {
			if (d->names[i] == NULL)
				continue;
			for (j = doc_hash(d->names[i]) & (ncap - 1);
			    nv[j] != NULL; j = (j + 1) & (ncap - 1))
				;
			nv[j] = d->names[i];
		}
		free(d->names);
		d->names = nv;
		d->capnames = ncap;
	}
	for (i = doc_hash(name) & (d->capnames - 1); d->names[i] != NULL;
	    i = (i + 1) & (d->capnames - 1))
		if (strcmp(d->names[i], name) == 0)
			return 0;
	if ((copy = strdup(name)) == NULL)
		return -1;
	d->names[i] = copy;
	d->nnames++;
	return 1;
}

/*
 * Sends a write (put, del) with the lease check; its bytes count in
 * st->doc_bytes until its reply.  0, or -1 with errno.
 */
static int
doc_send(struct rsess *s, struct rreq *req, int what, const char *name,
    const char *json, size_t len)
{
	struct rstore	*st = s->st;
	struct rcmd	*rc;
	struct rargs	 a;
	int		 r;

	if ((rc = rs_cmd_new(st, RC_DOC, s, req)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	rc->u1 = (uint64_t)what;
	rc->u2 = len + strlen(name);
	rs_args_init(&a, 10, 1);
	rs_args_script(&a, st, what == DOC_PUT ? SC_DOCPUT : SC_DOCDEL, 2);
	rs_args_str(&a, s->k_owner);
	rs_args_str(&a, s->k_kb);
	rs_args_str(&a, s->token);
	if (what == DOC_PUT)
		rs_args_str(&a, rs_retention(s));
	rs_args_str(&a, name);
	if (what == DOC_PUT)
		rs_args_add(&a, json, len);
	r = rs_eval(st, rc, what == DOC_PUT ? SC_DOCPUT : SC_DOCDEL, &a);
	rs_args_free(&a);
	if (r == -1) {
		errno = EIO;
		return -1;
	}
	st->doc_bytes += len + strlen(name);
	return 0;
}

static void
docw_free(struct rdocw *w)
{
	rs_req_unref(w->req);
	free(w->json);
	free(w);
}

/*
 * Sends the writes held back while what is in flight leaves room, in
 * order; one always goes when nothing is in flight.  Those whose request
 * died (cancelled, session closed) are dropped unsent.
 */
static void
doc_pump(struct rstore *st)
{
	struct rdocw	*w;

	while ((w = TAILQ_FIRST(&st->docq)) != NULL && !st->closing) {
		if (st->doc_bytes > 0 &&
		    st->doc_bytes + w->len > RS_DOC_INFLIGHT)
			return;
		TAILQ_REMOVE(&st->docq, w, entry);
		st->docq_bytes -= w->len;
		/* (a write ahead of it may have failed the handle) */
		if (!w->req->dead && !w->req->s->closed) {
			if (w->req->s->failed)
				rs_req_finish(w->req, -1, EPIPE);
			else if (doc_send(w->req->s, w->req, w->what, w->name,
			    w->json, w->jlen) == -1)
				rs_req_finish(w->req, -1, errno);
		}
		docw_free(w);
	}
}

void
rs_doc_close(struct rstore *st)
{
	struct rdocw	*w;

	while ((w = TAILQ_FIRST(&st->docq)) != NULL) {
		TAILQ_REMOVE(&st->docq, w, entry);
		docw_free(w);
	}
	st->docq_bytes = 0;
}

/*
 * A write (put, del), arguments checked by store.c.  Writes in flight on
 * the command connection are bounded (RS_DOC_INFLIGHT): hiredis moves
 * its whole output buffer after every partial write, and the session's
 * lease renewals wait behind what is ahead of them.  Beyond it they are
 * held back, in order, up to RS_DOC_QUEUE bytes (then EAGAIN).
 */
static struct store_req *
doc_write(struct rsess *s, int what, const char *name, const char *json,
    size_t len, store_done_cb done, void *arg)
{
	struct rstore	*st = s->st;
	struct rreq	*req;
	struct rdocw	*w;
	size_t		 nlen = strlen(name);

	if (s->failed)
		return rs_done_now(done, arg, -1, EPIPE);
	if (st->link != LINK_UP)
		return rs_done_now(done, arg, -1, EIO);
	if (st->docq_bytes + len + nlen > RS_DOC_QUEUE)
		return rs_done_now(done, arg, -1, EAGAIN);
	if ((req = rs_req_new(s, REQ_DOC, NULL, done, arg)) == NULL)
		return rs_done_now(done, arg, -1, ENOMEM);
	if (TAILQ_EMPTY(&st->docq) && (st->doc_bytes == 0 ||
	    st->doc_bytes + len + nlen <= RS_DOC_INFLIGHT)) {
		if (doc_send(s, req, what, name, json, len) == -1) {
			rs_req_finish(req, -1, errno);
			return NULL;
		}
		return (struct store_req *)req;
	}
	if ((w = calloc(1, sizeof(*w) + nlen + 1)) == NULL ||
	    (len > 0 && (w->json = malloc(len)) == NULL)) {
		free(w);
		rs_req_finish(req, -1, ENOMEM);
		return NULL;
	}
	w->req = req;
	req->refs++;
	w->what = what;
	w->len = len + nlen;
	w->jlen = len;
	if (len > 0)
		memcpy(w->json, json, len);
	memcpy(w->name, name, nlen + 1);
	TAILQ_INSERT_TAIL(&st->docq, w, entry);
	st->docq_bytes += w->len;
	return (struct store_req *)req;
}

struct store_req *
rs_doc_put(struct store_sess *bs, const char *name, const char *json,
    size_t len, store_done_cb done, void *arg)
{
	return doc_write((struct rsess *)bs, DOC_PUT, name, json, len, done,
	    arg);
}

struct store_req *
rs_doc_del(struct store_sess *bs, const char *name, store_done_cb done,
    void *arg)
{
	return doc_write((struct rsess *)bs, DOC_DEL, name, NULL, 0, done,
	    arg);
}

static void	doc_write_answer(struct rcmd *, redisReply *);

/*
 * store-wait: a write that landed waits for the replicas before it is
 * answered; the WAIT carries the write's answer (count) and its bytes,
 * still in flight.  0 sent; 1 none needed (answer the write as it is);
 * -1 needed but not sent (the write is not acknowledged).
 */
static int
doc_wait_send(struct rcmd *rc, redisReply *r)
{
	struct rstore	*st = rc->st;
	struct rcmd	*wrc;
	struct rargs	 a;
	int		 rv;

	if (st->wait_n == 0 || rc->u1 >= DOC_WAITED || r == NULL ||
	    r->type != REDIS_REPLY_INTEGER || rc->req->dead || rc->s->closed)
		return 1;
	if ((wrc = rs_cmd_new(st, RC_DOC, rc->s, rc->req)) == NULL)
		return -1;
	wrc->u1 = DOC_WAITED + rc->u1;
	wrc->u2 = rc->u2;
	wrc->count = r->integer > 0 ? 1 : 0;
	rs_args_init(&a, 3, 2);
	rs_args_str(&a, "WAIT");
	rs_args_u64(&a, st->wait_n);
	rs_args_u64(&a, st->wait_ms);
	/* Where the write ran (after an ASK, not where the map says). */
	wrc->conn = rc->conn;
	rv = rs_send(st, wrc, &a);
	rs_args_free(&a);
	return rv;
}

static void
doc_on_write(struct rcmd *rc, redisReply *r)
{
	struct rstore	*st = rc->st;
	int		 rv;

	if ((rv = doc_wait_send(rc, r)) == 0)
		return;
	st->doc_bytes -= rc->u2 < st->doc_bytes ? rc->u2 : st->doc_bytes;
	/* After this one's callbacks, which may close anything: held ones
	 * go in order behind it (rs_reply runs nothing once closing).  A
	 * write store-wait could not WAIT for is answered as one whose
	 * connection was lost: EIO, it may or may not be on a replica. */
	if (rv == -1)
		log_warnx("store: session %s: could not send WAIT after a "
		    "document write (out of memory, or the connection is "
		    "down)", rc->s->base.id);
	doc_write_answer(rc, rv == -1 ? NULL : r);
	if (!st->closing)
		doc_pump(st);
}

static void
doc_write_answer(struct rcmd *rc, redisReply *r)
{
	struct rreq	*req = rc->req;
	struct rsess	*s = rc->s;

	if (req->dead || s->closed)
		return;
	if (rc->u1 >= DOC_WAITED && r != NULL &&
	    r->type == REDIS_REPLY_INTEGER) {
		if (r->integer >= (long long)s->st->wait_n) {
			rs_req_finish(req, rc->u1 == DOC_WAITED + DOC_DEL ?
			    (ssize_t)rc->count : 0, 0);
			return;
		}
		log_warnx("store: session %s: only %lld of the %u replicas "
		    "store-wait asks for acknowledged a document write within "
		    "%u ms: not acknowledged; check the replicas and their "
		    "link to the master or lower store-wait", s->base.id,
		    r->integer, s->st->wait_n, s->st->wait_ms);
		rs_req_finish(req, -1, EIO);
		return;
	}
	if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
		rs_req_finish(req, rc->u1 == DOC_DEL && r->integer > 0 ? 1 : 0,
		    0);
		return;
	}
	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "FENCED", 6) == 0) {
		/* The request's answer first, then the handle's: either
		 * callback may close the session (rc holds it). */
		rs_req_finish(req, -1, ESTALE);
		rs_sess_fail(s, ESTALE, "fenced: another process owns the "
		    "session now");
		return;
	}
	/* Lost with the connection, it may or may not have landed: the
	 * caller hears EIO and may write it again. */
	log_warnx("store: session %s: document %s: %s", s->base.id,
	    rc->u1 % DOC_WAITED == DOC_PUT ? "write" : "removal",
	    rs_errstr(r));
	rs_req_finish(req, -1, EIO);
}

/* Asks for the next page of the hash.  0, or -1 (the request is not
 * finished). */
static int
doc_scan_send(struct rsess *s, struct rreq *req)
{
	struct rstore	*st = s->st;
	struct rcmd	*rc;
	struct rargs	 a;
	int		 r;

	if ((rc = rs_cmd_new(st, RC_DOC, s, req)) == NULL)
		return -1;
	rc->u1 = DOC_SCAN;
	rs_args_init(&a, 6, 1);
	rs_args_str(&a, "HSCAN");
	rs_args_str(&a, s->k_kb);
	rs_args_str(&a, req->docs->cursor);
	rs_args_str(&a, "COUNT");
	rs_args_u64(&a, req->docs->count);
	r = rs_send(st, rc, &a);
	rs_args_free(&a);
	return r;
}

struct store_req *
rs_doc_all(struct store_sess *bs, store_doc_cb cb, store_done_cb done,
    void *arg)
{
	struct rsess	*s = (struct rsess *)bs;
	struct rreq	*req;

	if (s->failed)
		return rs_done_now(done, arg, -1, EPIPE);
	if (s->st->link != LINK_UP)
		return rs_done_now(done, arg, -1, EIO);
	if ((req = rs_req_new(s, REQ_DOC, NULL, done, arg)) == NULL)
		return rs_done_now(done, arg, -1, ENOMEM);
	if ((req->docs = calloc(1, sizeof(*req->docs))) == NULL) {
		rs_req_finish(req, -1, ENOMEM);
		return NULL;
	}
	req->docs->cb = cb;
	req->docs->count = RS_DOC_COUNT_FIRST;
	memcpy(req->docs->cursor, "0", 2);
	if (doc_scan_send(s, req) == -1) {
		rs_req_finish(req, -1, EIO);
		return NULL;
	}
	return (struct store_req *)req;
}

/* 1 if a field and value can be handed out as a document. */
static int
doc_ok(const redisReply *k, const redisReply *v)
{
	return strlen(k->str) == k->len && store_valid_id(k->str) &&
	    v->len > 0 && v->len <= STORE_DOC_MAX &&
	    memchr(v->str, '\0', v->len) == NULL;
}

static void
doc_on_scan(struct rcmd *rc, redisReply *r)
{
	struct rreq	*req = rc->req;
	struct rsess	*s = rc->s;
	struct rdocs	*d = req->docs;
	redisReply	*kv, *k, *v;
	uint64_t	 avg;
	size_t		 i;
	int		 stop;

	if (req->dead || s->closed)
		return;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    !rs_isstr(r->element[0]) || r->element[0]->len >= RS_NUMLEN ||
	    (kv = r->element[1])->type != REDIS_REPLY_ARRAY ||
	    kv->elements % 2 != 0) {
		log_warnx("store: session %s: reading the documents: %s",
		    s->base.id, r != NULL && r->type != REDIS_REPLY_ERROR ?
		    "unexpected reply" : rs_errstr(r));
		rs_req_finish(req, -1, EIO);
		return;
	}
	memcpy(d->cursor, r->element[0]->str, r->element[0]->len + 1);
	for (i = 0; i < kv->elements; i += 2) {
		k = kv->element[i];
		v = kv->element[i + 1];
		if (!rs_isstr(k) || !rs_isstr(v)) {
			log_warnx("store: session %s: reading the documents: "
			    "unexpected reply", s->base.id);
			rs_req_finish(req, -1, EIO);
			return;
		}
		d->bytes += v->len;
		d->seen++;
		if (!doc_ok(k, v)) {
			log_warnx("store: session %s: field \"%.*s\" of %s is "
			    "not a document (a bad name, empty, over %u "
			    "bytes or with a NUL); skipped: HDEL it",
			    s->base.id, (int)(k->len > 64 ? 64 : k->len),
			    k->str, s->k_kb, STORE_DOC_MAX);
			continue;
		}
		switch (doc_seen_add(d, k->str)) {
		case -1:
			rs_req_finish(req, -1, ENOMEM);
			return;
		case 0:
			continue;	/* again, after a resize */
		}
		req->count++;
		stop = d->cb(req->arg, k->str, v->str, v->len) != 0;
		/* The callback may have cancelled, closed anything. */
		if (req->dead || s->closed || s->st->closing)
			return;
		if (stop) {
			rs_req_finish(req, (ssize_t)req->count, 0);
			return;
		}
	}
	if (strcmp(d->cursor, "0") == 0) {
		rs_req_finish(req, (ssize_t)req->count, 0);
		return;
	}
	/* The next page's size from the documents' so far. */
	avg = d->seen > 0 ? d->bytes / d->seen : 0;
	d->count = avg == 0 ? RS_DOC_COUNT_MAX : RS_DOC_PAGE_BYTES / avg;
	if (d->count < 1)
		d->count = 1;
	if (d->count > RS_DOC_COUNT_MAX)
		d->count = RS_DOC_COUNT_MAX;
	if (doc_scan_send(s, req) == -1)
		rs_req_finish(req, -1, EIO);
}

void
rs_doc_reply(struct rcmd *rc, redisReply *r)
{
	if (rc->u1 == DOC_SCAN)
		doc_on_scan(rc, r);
	else
		doc_on_write(rc, r);
}
