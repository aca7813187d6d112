/*
 * Unit tests for the Redis store's documents (src/store_redis_doc.c),
 * against a real redis-server driven on a real event base.
 */
#include "../../src/store.c"
#include "../../src/store_redis.c"
#include "../../src/store_redis_link.c"
#include "../../src/store_redis_lease.c"
#include "../../src/store_redis_inbox.c"
#include "../../src/store_redis_feed.c"
#include "../../src/store_redis_log.c"
#include "../../src/store_redis_doc.c"
#include "store_redis_fixture.h"

/* What store_doc_all delivered. */
struct tdocs {
	struct tdone	 d;
	size_t		 n;
	size_t		 stop_after;	/* 0: never */
	int		 bad;		/* a document not as written */
	int		 dup;		/* a name twice */
	unsigned char	*seen;		/* [i]: "doc<i>" delivered */
	size_t		 nseen;
	size_t		 bytes;
	char		 last[STORE_ID_MAX + 1];
	char		 json[256];	/* the last one, when short */
	struct store_sess *close;	/* closed from inside, at the 2nd */
};

/* The json of document i: checkable byte for byte, pad bytes long. */
static size_t
docjson(char *buf, size_t len, size_t i, size_t pad)
{
	int	 n;

	n = snprintf(buf, len, "{\"i\":%zu,\"pad\":\"", i);
	ck_assert_uint_lt((size_t)n + pad + 2, len);
	memset(buf + n, 'a' + (int)(i % 26), pad);
	memcpy(buf + n + pad, "\"}", 3);
	return (size_t)n + pad + 2;
}

static int
tdocs_cb(void *arg, const char *name, const char *json, size_t len)
{
	struct tdocs	*t = arg;
	char		 want[8192];
	size_t		 i;

	ck_assert_uint_eq(strlen(json), len);
	snprintf(t->last, sizeof(t->last), "%s", name);
	if (len < sizeof(t->json))
		memcpy(t->json, json, len + 1);
	t->n++;
	t->bytes += len;
	if (t->seen != NULL) {
		if (sscanf(name, "doc%zu", &i) != 1 || i >= t->nseen) {
			t->bad = 1;
		} else {
			if (t->seen[i])
				t->dup = 1;
			t->seen[i] = 1;
			if (len < sizeof(want) && (docjson(want, sizeof(want),
			    i, len - (docjson(want, sizeof(want), i, 0))) !=
			    len || memcmp(want, json, len) != 0))
				t->bad = 1;
		}
	}
	if (t->close != NULL && t->n == 2)
		store_sess_close(t->close);
	return t->stop_after != 0 && t->n >= t->stop_after;
}

/* store_doc_all, waited for: done's n. */
static ssize_t
tdoc_all(struct event_base *base, struct store_sess *s, struct tdocs *t)
{
	memset(&t->d, 0, sizeof(t->d));
	t->n = t->bytes = 0;
	t->bad = t->dup = 0;
	if (t->seen != NULL)
		memset(t->seen, 0, t->nseen);
	store_doc_all(s, tdocs_cb, tdone_cb, t);
	WAIT(base, t->d.n > 0, 10000);
	spin(base, 10);
	ck_assert_int_eq(t->d.n, 1);
	return t->d.r;
}

static ssize_t
tdoc_put(struct event_base *base, struct store_sess *s, const char *name,
    const char *json, size_t len, int *err)
{
	struct tdone	 d = { 0, 0, 0 };

	store_doc_put(s, name, json, len, tdone_cb, &d);
	WAIT(base, d.n > 0, 5000);
	ck_assert_int_eq(d.n, 1);
	if (err != NULL)
		*err = d.err;
	return d.r;
}

static ssize_t
tdoc_del(struct event_base *base, struct store_sess *s, const char *name,
    int *err)
{
	struct tdone	 d = { 0, 0, 0 };

	store_doc_del(s, name, tdone_cb, &d);
	WAIT(base, d.n > 0, 5000);
	ck_assert_int_eq(d.n, 1);
	if (err != NULL)
		*err = d.err;
	return d.r;
}

START_TEST(test_doc_round_trip)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	struct tdocs		 td;
	struct tdone		 d = { 0, 0, 0 };
	char			 buf[256], *big;
	int			 err;

	memset(&td, 0, sizeof(td));
	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 10000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "d1", 1, 0, STORE_OWNER);

	/* none yet */
	ck_assert_int_eq(tdoc_all(base, s, &td), 0);
	ck_assert_int_eq(tdoc_del(base, s, "a", NULL), 0);

	ck_assert_int_eq(tdoc_put(base, s, "a", "{\"v\":1}", 7, NULL), 0);
	ck_assert_int_eq(tdoc_put(base, s, "b", "[2]", 3, NULL), 0);
	ck_assert_int_eq(tdoc_put(base, s, "a", "{\"v\":22}", 8, NULL), 0);
	/* the documented layout: beside the session's keys, with its TTL */
	ck_assert_str_eq(sget(c, buf, sizeof(buf), "HGET parley:{d1}:kb a"),
	    "{\"v\":22}");
	ck_assert_int_eq(sint(c, "HLEN parley:{d1}:kb"), 2);
	ck_assert_int_gt(sint(c, "PTTL parley:{d1}:kb"), 3000 * 1000);
	/* the retention plus the renewal interval (a minute here) */
	ck_assert_int_le(sint(c, "PTTL parley:{d1}:kb"), 3660 * 1000);

	ck_assert_int_eq(tdoc_all(base, s, &td), 2);
	ck_assert_uint_eq(td.n, 2);
	ck_assert_uint_eq(td.bytes, 11);
	td.stop_after = 1;
	ck_assert_int_eq(tdoc_all(base, s, &td), 1);
	td.stop_after = 0;

	ck_assert_int_eq(tdoc_del(base, s, "a", NULL), 1);
	ck_assert_int_eq(tdoc_del(base, s, "a", NULL), 0);
	ck_assert_int_eq(tdoc_all(base, s, &td), 1);
	ck_assert_str_eq(td.last, "b");
	ck_assert_str_eq(td.json, "[2]");

	/* refused by store.c at once, nothing sent */
	ck_assert_ptr_null(store_doc_put(s, "bad name", "{}", 2, tdone_cb,
	    &d));
	ck_assert_int_eq(d.n, 1);
	ck_assert_int_eq(d.err, EINVAL);
	ck_assert_ptr_nonnull(big = malloc(STORE_DOC_MAX + 1));
	memset(big, ' ', STORE_DOC_MAX + 1);
	memset(&d, 0, sizeof(d));
	ck_assert_ptr_null(store_doc_put(s, "big", big, STORE_DOC_MAX + 1,
	    tdone_cb, &d));
	ck_assert_int_eq(d.err, EMSGSIZE);
	/* a big one goes through (STORE_DOC_MAX's own is test_store's:
	 * 32 MiB through Redis takes seconds on a slow host) */
	ck_assert_int_eq(tdoc_put(base, s, "big", big, 4u << 20, &err), 0);
	free(big);
	ck_assert_int_eq(sint(c, "HSTRLEN parley:{d1}:kb big"), 4u << 20);
	ck_assert_int_eq(tdoc_put(base, s, "nul", "{\0}", 3, &err), -1);
	ck_assert_int_eq(err, EINVAL);

	/* another process finds them */
	store_close(st);
	st = tstore(base, r.port, "h/2", 10000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "d1", 0, 0, STORE_OWNER);
	ck_assert_int_eq(tdoc_all(base, s, &td), 2);
	ck_assert_uint_eq(td.bytes, 3 + (4u << 20));
	ck_assert_int_eq(t.nfailed, 0);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/* The documents' TTL follows the session's: the writes that renew it
 * (test_ttl_renew says when) and the lease's renewals. */
START_TEST(test_doc_ttl)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;

	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 1500, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "tt", 1, 0, STORE_OWNER);
	ck_assert_int_eq(tdoc_put(base, s, "a", "{}", 2, NULL), 0);

	/* an append refreshes it */
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tt}:kb 60000"), 1);
	tappend(s, "tt", 1, 1);
	WAIT(base, t.durable == 1, 3000);
	ck_assert_int_gt(sint(c, "PTTL parley:{tt}:kb"), 3000 * 1000);
	/* soon after: the lease's renewal (a write renews it at most once a
	 * minute at this retention, test_ttl_renew in test_store_redis) */
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tt}:kb 60000"), 1);
	ck_assert_int_eq(store_meta_write_async(s, "{}", 2), 0);
	WAIT(base, sint(c, "PTTL parley:{tt}:kb") > 3000 * 1000, 3000);
	/* the lease's renewal, idle (every lease/3) */
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tt}:kb 60000"), 1);
	WAIT(base, sint(c, "PTTL parley:{tt}:kb") > 3000 * 1000, 3000);
	/* and taking the lease */
	store_sess_close(s);
	spin(base, 20);
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tt}:kb 60000"), 1);
	s = topen(base, st, "tt", 0, 0, STORE_OWNER);
	ck_assert_int_gt(sint(c, "PTTL parley:{tt}:kb"), 3000 * 1000);
	ck_assert_int_eq(t.nfailed, 0);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/* A project's knowledge (kg:) has no TTL: retention keeps it. */
START_TEST(test_keep_ttl)
{
	static const char *const keys[] = { "log", "meta", "kb", "fence" };
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s, *o;
	struct tev		 t;
	char			 cmd[64];
	size_t			 i;

	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 1500, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "kg:p", 1, 0, STORE_OWNER);
	o = topen(base, st, "plain", 1, 0, STORE_OWNER);
	ck_assert_int_eq(tdoc_put(base, s, "snapshot", "{}", 2, NULL), 0);
	ck_assert_int_eq(tdoc_put(base, o, "a", "{}", 2, NULL), 0);
	tappend(s, "kg:p", 1, 1);
	tappend(o, "plain", 1, 1);
	WAIT(base, t.durable == 1, 3000);
	ck_assert_int_eq(store_meta_write_async(s, "{}", 2), 0);
	ck_assert_int_eq(store_meta_write_async(o, "{}", 2), 0);
	WAIT(base, sint(c, "HEXISTS parley:{kg:p}:meta doc") == 1 &&
	    sint(c, "HEXISTS parley:{plain}:meta doc") == 1, 3000);
	/* past a renewal (every lease/3) too */
	spin(base, 700);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(cmd, sizeof(cmd), "EXISTS parley:{kg:p}:%s", keys[i]);
		ck_assert_int_eq(sint(c, cmd), 1);
		snprintf(cmd, sizeof(cmd), "PTTL parley:{kg:p}:%s", keys[i]);
		ck_assert_msg(sint(c, cmd) == -1, "%s has a TTL", cmd);
		snprintf(cmd, sizeof(cmd), "PTTL parley:{plain}:%s", keys[i]);
		ck_assert_msg(sint(c, cmd) > 3000 * 1000, "%s", cmd);
	}
	/* the lease itself still lapses */
	ck_assert_int_gt(sint(c, "PTTL parley:{kg:p}:owner"), 0);
	ck_assert_int_eq(t.nfailed, 0);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/* A process that lost the session cannot write its documents. */
START_TEST(test_doc_fenced)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*a, *b;
	struct store_sess	*sa, *sb, *sg;
	struct tev		 ta, tb;
	struct tdone		 d = { 0, 0, 0 };
	struct tdocs		 td;
	char			 buf[64];
	int			 err;

	memset(&td, 0, sizeof(td));
	srv_start(&r);
	c = sconn(r.port);
	/* A long lease: A's renewal must not notice before its write. */
	a = tstore(base, r.port, "hostA/100", 30000, &ta);
	b = tstore(base, r.port, "hostB/200", 3000, &tb);
	/* The owner key deleted behind a live owner's back (its heartbeat
	 * goes on): only the safety net sees it, so a short one. */
	((struct rstore *)b)->poll_ms = 300;
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "f", 1, 0, STORE_OWNER);
	ck_assert_int_eq(tdoc_put(base, sa, "k", "{\"by\":\"A\"}", 10, NULL),
	    0);
	sb = topen(base, b, "f", 0, 0, STORE_FOLLOWER);
	/* a follower: a write is EPERM at once; it reads (kb.c answers
	 * kb_search there) */
	ck_assert_ptr_null(store_doc_put(sb, "k", "{}", 2, tdone_cb, &d));
	ck_assert_int_eq(d.err, EPERM);
	memset(&td, 0, sizeof(td));
	ck_assert_int_eq(tdoc_all(base, sb, &td), 1);
	ck_assert_str_eq(td.json, "{\"by\":\"A\"}");

	ck_assert_int_eq(sint(c, "DEL parley:{f}:owner"), 1);
	WAIT(base, tb.nvacant == 1, 2500);
	memset(&d, 0, sizeof(d));
	store_promote(sb, tdone_cb, &d);
	WAIT(base, d.n > 0, 3000);
	ck_assert_int_eq(d.r, 0);

	/* A still believes it owns it: fenced, the handle fails like an
	 * append's, nothing lands. */
	ck_assert_int_eq(tdoc_del(base, sa, "k", &err), -1);
	ck_assert_int_eq(err, ESTALE);
	WAIT(base, ta.nfailed == 1, 3000);
	ck_assert_int_eq(ta.failed, ESTALE);
	ck_assert_int_eq(tdoc_put(base, sa, "k", "{\"by\":\"old\"}", 12, &err),
	    -1);
	ck_assert_int_eq(err, EPIPE);
	ck_assert_int_eq(tdoc_all(base, sa, &td), -1);
	ck_assert_int_eq(td.d.err, EPIPE);
	ck_assert_str_eq(sget(c, buf, sizeof(buf), "HGET parley:{f}:kb k"),
	    "{\"by\":\"A\"}");
	/* a put fenced the same way (A owning another session) */
	store_sess_close(sa);
	sa = topen(base, a, "g", 1, 0, STORE_OWNER);
	sg = topen(base, b, "g", 0, 0, STORE_FOLLOWER);
	ck_assert_int_eq(sint(c, "DEL parley:{g}:owner"), 1);
	WAIT(base, tb.nvacant == 2, 2500);
	memset(&d, 0, sizeof(d));
	store_promote(sg, tdone_cb, &d);
	WAIT(base, d.n > 0, 3000);
	ck_assert_int_eq(d.r, 0);
	ck_assert_int_eq(tdoc_put(base, sa, "k", "{\"by\":\"A\"}", 10, &err),
	    -1);
	ck_assert_int_eq(err, ESTALE);
	WAIT(base, ta.nfailed == 2, 3000);
	ck_assert_int_eq(sint(c, "EXISTS parley:{g}:kb"), 0);
	/* the owners go on */
	ck_assert_int_eq(tdoc_put(base, sg, "k", "{\"by\":\"B\"}", 10, NULL),
	    0);
	ck_assert_int_eq(tdoc_all(base, sg, &td), 1);
	ck_assert_str_eq(td.json, "{\"by\":\"B\"}");
	ck_assert_int_eq(tdoc_put(base, sb, "k", "{\"by\":\"B2\"}", 11, NULL),
	    0);
	ck_assert_int_eq(tdoc_all(base, sb, &td), 1);
	ck_assert_str_eq(td.json, "{\"by\":\"B2\"}");
	ck_assert_int_eq(tb.nfailed, 0);
	store_close(a);
	store_close(b);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/* Many documents: read in pages, each once, whatever their sizes. */
START_TEST(test_doc_paging)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s, *t2;
	struct tev		 t;
	struct tdocs		 td;
	struct tdone		 d;
	char			 name[32], *j;
	size_t			 i, n, ndocs = 3000;
	long long		 before;

	memset(&td, 0, sizeof(td));
	ck_assert_ptr_nonnull(j = malloc((1u << 20) + 64));
	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 10000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "pg", 1, 0, STORE_OWNER);
	/* many at once: they all land, in order */
	memset(&d, 0, sizeof(d));
	for (i = 0; i < ndocs; i++) {
		snprintf(name, sizeof(name), "doc%zu", i);
		n = docjson(j, 512, i, 100 + i % 200);
		store_doc_put(s, name, j, n, tdone_cb, &d);
	}
	WAIT(base, d.n == (int)ndocs, 10000);
	ck_assert_int_eq(d.r, 0);
	ck_assert_int_eq(sint(c, "HLEN parley:{pg}:kb"), (long long)ndocs);

	td.seen = calloc(ndocs, 1);
	td.nseen = ndocs;
	before = cmdcalls(c, "hscan");
	ck_assert_int_eq(tdoc_all(base, s, &td), (ssize_t)ndocs);
	ck_assert_int_eq(td.bad, 0);
	ck_assert_int_eq(td.dup, 0);
	for (i = 0; i < ndocs; i++)
		ck_assert_msg(td.seen[i], "doc%zu not read", i);
	ck_assert_int_gt(cmdcalls(c, "hscan") - before, 2);

	/* puts and removals while reading: each name at most once */
	memset(td.seen, 0, ndocs);
	memset(&td.d, 0, sizeof(td.d));
	td.n = 0;
	store_doc_all(s, tdocs_cb, tdone_cb, &td);
	memset(&d, 0, sizeof(d));
	for (i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "doc%zu", i);
		store_doc_del(s, name, tdone_cb, &d);
	}
	WAIT(base, td.d.n > 0 && d.n == 2000, 10000);
	ck_assert_int_eq(td.dup, 0);
	ck_assert_int_eq(td.bad, 0);
	ck_assert_int_ge(td.n, ndocs - 2000);
	ck_assert_int_eq(sint(c, "HLEN parley:{pg}:kb"), 1000);

	/* bigger ones: pages shrink to about 4 MiB (64 of 64 KiB) */
	t2 = topen(base, st, "pg2", 1, 0, STORE_OWNER);
	memset(&d, 0, sizeof(d));
	for (i = 0; i < 120; i++) {
		snprintf(name, sizeof(name), "doc%zu", i);
		n = docjson(j, (1u << 20) + 64, i, 64u << 10);
		store_doc_put(t2, name, j, n, tdone_cb, &d);
	}
	WAIT(base, d.n == 120, 10000);
	ck_assert_int_eq(d.r, 0);
	before = cmdcalls(c, "hscan");
	ck_assert_int_eq(tdoc_all(base, t2, &td), 120);
	ck_assert_int_eq(td.bad, 0);
	ck_assert_int_eq(td.dup, 0);
	/* 16 first, then 64 and 40: not all in the second */
	ck_assert_int_ge(cmdcalls(c, "hscan") - before, 3);
	store_sess_close(t2);

	/* stopped by the callback, cancelled, closed inside: no more */
	td.stop_after = 5;
	ck_assert_int_eq(tdoc_all(base, s, &td), 5);
	ck_assert_uint_eq(td.n, 5);
	td.stop_after = 0;
	memset(&td.d, 0, sizeof(td.d));
	td.n = 0;
	store_req_cancel(store_doc_all(s, tdocs_cb, tdone_cb, &td));
	spin(base, 200);
	ck_assert_int_eq(td.d.n, 0);
	ck_assert_uint_eq(td.n, 0);
	td.close = s;
	ck_assert_ptr_nonnull(store_doc_all(s, tdocs_cb, tdone_cb, &td));
	spin(base, 300);
	ck_assert_int_eq(td.d.n, 0);
	ck_assert_uint_eq(td.n, 2);
	ck_assert_int_eq(t.nfailed, 0);
	free(td.seen);
	free(j);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

static void
never_done(void *arg, ssize_t n)
{
	(void)n;
	(*(int *)arg)++;
}

/* Many big writes at once: a bounded amount on the wire, all in order. */
START_TEST(test_doc_held_back)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct rstore		*rst;
	struct store_sess	*s;
	struct tev		 t;
	struct tdocs		 td;
	struct tdone		 d;
	struct store_req	*req;
	char			*j;
	size_t			 i, n;
	int			 calls = 0, err;

	memset(&td, 0, sizeof(td));
	ck_assert_ptr_nonnull(j = malloc((1u << 20) + 64));
	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 10000, &t);
	rst = (struct rstore *)st;
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "hb", 1, 0, STORE_OWNER);
	/* 12 versions of one document, 1 MiB each, then its removal and a
	 * last small one: held back beyond 4 MiB, sent in order */
	memset(&d, 0, sizeof(d));
	for (i = 0; i < 12; i++) {
		n = docjson(j, (1u << 20) + 64, i, 1u << 20);
		ck_assert_ptr_nonnull(store_doc_put(s, "v", j, n, tdone_cb,
		    &d));
	}
	ck_assert_ptr_nonnull(store_doc_del(s, "gone", tdone_cb, &d));
	ck_assert_uint_le(rst->doc_bytes, RS_DOC_INFLIGHT);
	ck_assert_uint_gt(rst->docq_bytes, 7u << 20);
	/* one cancelled while held: never sent, never answered */
	n = docjson(j, (1u << 20) + 64, 99, 10);
	ck_assert_ptr_nonnull(req = store_doc_put(s, "cancelled", j, n,
	    never_done, &calls));
	store_req_cancel(req);
	ck_assert_ptr_nonnull(store_doc_put(s, "last", "[1]", 3, tdone_cb,
	    &d));
	WAIT(base, d.n == 14, 10000);
	spin(base, 50);
	ck_assert_int_eq(d.r, 0);
	ck_assert_int_eq(calls, 0);
	ck_assert_uint_eq(rst->doc_bytes, 0);
	ck_assert_uint_eq(rst->docq_bytes, 0);
	ck_assert_int_eq(tdoc_all(base, s, &td), 2);	/* v, last */
	n = docjson(j, (1u << 20) + 64, 11, 1u << 20);
	ck_assert_int_eq(sint(c, "HSTRLEN parley:{hb}:kb v"), (long long)n);
	ck_assert_int_eq(sint(c, "HEXISTS parley:{hb}:kb cancelled"), 0);
	/* over the bound of what may wait: EAGAIN at once */
	rst->docq_bytes = RS_DOC_QUEUE;
	ck_assert_int_eq(tdoc_put(base, s, "x", "{}", 2, &err), -1);
	ck_assert_int_eq(err, EAGAIN);
	rst->docq_bytes = 0;

	/* held ones die with their session, and with their store */
	for (i = 0; i < 8; i++) {
		n = docjson(j, (1u << 20) + 64, i, 1u << 20);
		store_doc_put(s, "w", j, n, never_done, &calls);
	}
	ck_assert_uint_gt(rst->docq_bytes, 0);
	store_sess_close(s);
	spin(base, 300);
	ck_assert_int_eq(calls, 0);
	ck_assert_uint_eq(rst->docq_bytes, 0);
	s = topen(base, st, "hb", 0, 0, STORE_OWNER);
	for (i = 0; i < 8; i++) {
		n = docjson(j, (1u << 20) + 64, i, 1u << 20);
		store_doc_put(s, "w", j, n, never_done, &calls);
	}
	ck_assert_uint_gt(rst->docq_bytes, 0);
	store_close(st);
	spin(base, 100);
	ck_assert_int_eq(calls, 0);
	free(j);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/* Fields no put writes are skipped; the script cache may empty. */
START_TEST(test_doc_odd)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	struct tdocs		 td;
	struct tdone		 d;
	int			 err;

	memset(&td, 0, sizeof(td));
	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 10000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "od", 1, 0, STORE_OWNER);
	ck_assert_int_eq(tdoc_put(base, s, "good", "{}", 2, NULL), 0);
	ck_assert_int_eq(sint(c, "HSET parley:{od}:kb %s %s", "bad name",
	    "{}"), 1);
	ck_assert_int_eq(sint(c, "HSET parley:{od}:kb %s %s", "empty", ""),
	    1);
	ck_assert_int_eq(sint(c, "HSET parley:{od}:kb %s %b", "nul", "{\0}",
	    (size_t)3), 1);
	ck_assert_int_eq(tdoc_all(base, s, &td), 1);
	ck_assert_str_eq(td.last, "good");

	freeReplyObject(scmd(c, "SCRIPT FLUSH"));
	ck_assert_int_eq(tdoc_put(base, s, "after", "[1]", 3, NULL), 0);
	freeReplyObject(scmd(c, "SCRIPT FLUSH"));
	ck_assert_int_eq(tdoc_del(base, s, "after", NULL), 1);

	/* the store gone: EIO, the handle is not failed for it */
	srv_kill(&r);
	memset(&d, 0, sizeof(d));
	store_doc_put(s, "x", "{}", 2, tdone_cb, &d);
	WAIT(base, d.n > 0, 8000);
	ck_assert_int_eq(d.r, -1);
	ck_assert_int_eq(d.err, EIO);
	ck_assert_int_eq(tdoc_all(base, s, &td), -1);
	ck_assert_int_eq(td.d.err, EIO);
	ck_assert_int_eq(tdoc_del(base, s, "x", &err), -1);
	ck_assert_int_eq(err, EIO);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/* The set of names delivered, which drops HSCAN's repeats. */
START_TEST(test_doc_seen)
{
	struct rreq	 req;
	struct rdocs	*d;
	char		 name[32];
	size_t		 i;

	memset(&req, 0, sizeof(req));
	ck_assert_ptr_nonnull(d = req.docs = calloc(1, sizeof(*d)));
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "n%zu", i);
		ck_assert_int_eq(doc_seen_add(d, name), 1);
		if (i % 7 == 0)
			ck_assert_int_eq(doc_seen_add(d, "n0"), 0);
	}
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "n%zu", i);
		ck_assert_int_eq(doc_seen_add(d, name), 0);
	}
	ck_assert_uint_eq(d->nnames, 5000);
	ck_assert_uint_le(d->nnames * 2, d->capnames);
	rs_doc_req_free(&req);
	ck_assert_ptr_null(req.docs);
}
END_TEST

static Suite *
store_redis_doc_suite(void)
{
	Suite	*su = suite_create("store_redis_doc");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_doc_seen);
	tcase_add_test(tc, test_doc_round_trip);
	tcase_add_test(tc, test_doc_ttl);
	tcase_add_test(tc, test_keep_ttl);
	tcase_add_test(tc, test_doc_fenced);
	tcase_add_test(tc, test_doc_paging);
	tcase_add_test(tc, test_doc_held_back);
	tcase_add_test(tc, test_doc_odd);
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	return check_run(store_redis_doc_suite());
}
