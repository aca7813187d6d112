/*
 * Unit tests for the Redis store backend, against a real redis-server
 * (started per test on a free port, killed at the end) driven on a real
 * event base.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "../../src/store.c"
#include "../../src/store_redis.c"
#include "../../src/store_redis_link.c"
#include "../../src/store_redis_lease.c"
#include "../../src/store_redis_inbox.c"
#include "../../src/store_redis_feed.c"
#include "../../src/store_redis_log.c"
#include "check_main.h"
#include "store_redis_fixture.h"

/* --- tests --- */

static void
url_bad(const char *url, const char *want)
{
	struct store	*st;
	char		 err[512];

	st = store_open(url, "/nonexistent", STORE_FSYNC_NO, err, sizeof(err));
	ck_assert_msg(st == NULL, "%s opened", url);
	ck_assert_msg(strstr(err, want) != NULL, "%s: \"%s\" lacks \"%s\"",
	    url, err, want);
	ck_assert_msg(strstr(err, "sekrit") == NULL, "password in \"%s\"",
	    err);
}

START_TEST(test_url)
{
	struct store	*st;
	struct rstore	*rs;
	char		 err[512];

	url_bad("redis", "must start with redis://");
	url_bad("redis:localhost", "must start with redis://");
	url_bad("redis://", "missing HOST:PORT");
	url_bad("redis://localhost", "missing :PORT after host");
	url_bad("redis://h:0", "port \"0\" is not a number");
	url_bad("redis://h:99999", "port \"99999\"");
	url_bad("redis://h:63x9", "port \"63x9\"");
	url_bad("redis://h:", "port \"\"");
	url_bad("redis://:6379", "empty host");
	url_bad("redis://h:6379/x", "database \"x\"");
	url_bad("redis://h:6379/", "database \"\"");
	url_bad("redis://h:1,g:2", "only one HOST:PORT");
	url_bad("redis://user:sekrit@h:1", "user names are not supported");
	url_bad("redis://:@h:1", "empty password");
	url_bad("redis://:sekrit%zz@h:1", "bad %-escape");
	url_bad("redis://:sekrit@h:0", "port \"0\"");
	url_bad("redis://h:1?db=2", "no query");
	url_bad("redis://::1:6379", "IPv6 addresses go in brackets");
	url_bad("redis://[::1:6379", "unterminated");
	url_bad("redis://h$st:1", "bad character in host");
	url_bad("sentinel://h:1", "missing /MASTER name");
	url_bad("sentinel://h:1/", "missing /MASTER name");
	url_bad("sentinel://h:1/bad name", "bad character in master name");
	url_bad("sentinel://h:1,g/m", "missing :PORT after host \"g\"");
	url_bad("sentinel://1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9,10:10,11:11,"
	    "12:12,13:13,14:14,15:15,16:16,17:17/m", "more than 16");

	st = store_open("redis://127.0.0.1:6380/3", "/x", STORE_FSYNC_NO,
	    err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	rs = (struct rstore *)st;
	ck_assert_str_eq(rs->hosts[0].host, "127.0.0.1");
	ck_assert_int_eq(rs->hosts[0].port, 6380);
	ck_assert_int_eq(rs->db, 3);
	ck_assert_str_eq(rs->chsuffix, ":3");
	ck_assert_ptr_null(rs->pass);
	store_close(st);

	st = store_open("redis://:p%40ss@[::1]:7000", "/x", STORE_FSYNC_NO,
	    err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	rs = (struct rstore *)st;
	ck_assert_str_eq(rs->pass, "p@ss");
	ck_assert_str_eq(rs->hosts[0].host, "::1");
	ck_assert_int_eq(rs->db, 0);
	ck_assert_str_eq(rs->chsuffix, "");
	store_close(st);

	st = store_open("sentinel://:pw@a:1,b.example:2,[::1]:3/my-master",
	    "/x", STORE_FSYNC_NO, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	rs = (struct rstore *)st;
	ck_assert_int_eq(rs->nhosts, 3);
	ck_assert_str_eq(rs->hosts[1].host, "b.example");
	ck_assert_int_eq(rs->hosts[2].port, 3);
	ck_assert_str_eq(rs->name, "my-master");
	ck_assert_str_eq(rs->pass, "pw");
	/* Synchronous calls a redis store cannot serve. */
	{
		struct store_sess *s;

		errno = 0;
		ck_assert_int_eq(store_sess_open(st, "x", 1, &s), -1);
		ck_assert_int_eq(errno, ENOTSUP);
		ck_assert_int_eq(store_exists(st, "x"), 0);
		ck_assert_ptr_null(store_meta_peek(st, "x"));
		ck_assert_int_eq(errno, ENOTSUP);
		ck_assert_int_eq(store_expire(st, 0), 0);
		ck_assert_int_eq(store_healthy(st), 0);
	}
	store_close(st);
}
END_TEST

START_TEST(test_open_create_enoent)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	struct topen		 o = { 0, 0, NULL, 0 }, o2 = { 0, 0, NULL, 0 };

	srv_start(&r);
	st = tstore(base, r.port, "h/1", 3000, &t);
	ck_assert_int_eq(store_healthy(st), 0);
	WAIT(base, t.health == 1, 3000);
	ck_assert_int_eq(store_healthy(st), 1);
	ck_assert_int_eq(t.nup, 1);
	ck_assert_int_eq(store_ping(st, 1000, NULL, 0), 0);

	store_open_async(st, "nope", 0, 0, topen_cb, &o);
	WAIT(base, o.n > 0, 3000);
	ck_assert_int_eq(o.err, ENOENT);
	ck_assert_ptr_null(o.s);

	/* A second open of an id still opening: EBUSY, at once. */
	memset(&o, 0, sizeof(o));
	store_open_async(st, "new", 1, 0, topen_cb, &o);
	store_open_async(st, "new", 1, 0, topen_cb, &o2);
	ck_assert_int_eq(o2.n, 1);
	ck_assert_int_eq(o2.err, EBUSY);
	WAIT(base, o.n > 0, 3000);
	ck_assert_int_eq(o.err, 0);
	ck_assert_int_eq(o.role, STORE_OWNER);
	s = o.s;
	ck_assert_ptr_eq(store_sess_find(st, "new"), s);
	ck_assert_int_eq(store_last_seq(s), 0);
	ck_assert_int_eq(store_first_seq(s), 1);
	ck_assert_ptr_null(store_meta_read(s));
	ck_assert_int_eq(errno, ENOENT);
	/* Synchronous writes are refused: async only. */
	ck_assert_int_eq(store_append(s, 1, 1, "{}", 2), -1);
	ck_assert_int_eq(errno, ENOTSUP);
	store_sess_close(s);

	/* Created: it exists now. */
	s = topen(base, st, "new", 0, 0, STORE_OWNER);
	store_sess_close(s);
	store_close(st);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_append_range_meta)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	redisReply		*rp;
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	struct tcoll		 col;
	char			 buf[256], *m, *p;
	long long		 evals;
	const char		*doc = "{\"title\":\"hello\",\"n\":1}";

	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 5000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "s1", 1, 0, STORE_OWNER);

	/* 1000 appends in one pass of the loop: a handful of script calls. */
	freeReplyObject(scmd(c, "CONFIG RESETSTAT"));
	tappend(s, "a", 1, 1000);
	ck_assert_int_eq(store_last_seq(s), 1000);
	ck_assert_int_eq(store_durable_seq(s), 0);
	/* Not durable yet: not readable either. */
	ck_assert_int_eq(store_range(s, 0, 0, tcoll_cb, &col), 0);
	ck_assert_int_eq(store_meta_write_async(s, doc, strlen(doc)), 0);
	WAIT(base, t.durable == 1000 && t.ndurable > 0 &&
	    store_durable_seq(s) == 1000, 5000);
	spin(base, 50);		/* the meta write's durable */
	ck_assert_int_eq(t.durable_back, 0);
	ck_assert_int_eq(t.nfailed, 0);
	ck_assert_int_le(t.ndurable, 12);
	rp = scmd(c, "INFO commandstats");
	p = strstr(rp->str, "cmdstat_evalsha:calls=");
	ck_assert_ptr_nonnull(p);
	evals = strtoll(p + strlen("cmdstat_evalsha:calls="), NULL, 10);
	freeReplyObject(rp);
	ck_assert_msg(evals >= 4 && evals <= 12, "%lld script calls", evals);

	/* In the store, in order. */
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{s1}:meta last"), "1000");
	ck_assert_int_eq(sint(c, "XLEN parley:{s1}:log"), 1000);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{s1}:meta doc"), doc);
	mkjson(buf + 128, 128, "a", 77);
	rp = scmd(c, "XRANGE parley:{s1}:log 77-0 77-0");
	ck_assert_int_eq(rp->elements, 1);
	ck_assert_str_eq(rp->element[0]->element[1]->element[3]->str,
	    buf + 128);
	freeReplyObject(rp);
	ck_assert_int_gt(sint(c, "PTTL parley:{s1}:log"), 3000 * 1000);
	ck_assert_int_gt(sint(c, "PTTL parley:{s1}:owner"), 0);
	store_sess_close(s);
	spin(base, 20);
	/* Closing gave the lease back. */
	ck_assert_int_eq(sint(c, "EXISTS parley:{s1}:owner"), 0);

	/* Re-open without a tail: meta and last from the store, range from
	 * the store. */
	s = topen(base, st, "s1", 0, 0, STORE_OWNER);
	ck_assert_int_eq(store_last_seq(s), 1000);
	ck_assert_int_eq(store_durable_seq(s), 1000);
	ck_assert_int_eq(store_first_seq(s), 1);
	ck_assert_ptr_nonnull(m = store_meta_read(s));
	ck_assert_str_eq(m, doc);
	free(m);
	ck_assert_int_eq(store_range(s, 0, 0, tcoll_cb, &col), -1);
	ck_assert_int_eq(errno, EAGAIN);

	memset(&col, 0, sizeof(col));
	col.tag = "a";
	ck_assert_int_eq(trange_async(base, s, 0, 0, &col), 1000);
	ck_assert_int_eq(col.n, 1000);
	ck_assert_int_eq(col.first, 1);
	ck_assert_int_eq(col.last, 1000);
	ck_assert_int_eq(col.bad, 0);

	memset(&col, 0, sizeof(col));
	col.tag = "a";
	ck_assert_int_eq(trange_async(base, s, 100, 50, &col), 50);
	ck_assert_int_eq(col.first, 101);
	ck_assert_int_eq(col.last, 150);
	ck_assert_int_eq(col.bad, 0);

	/* The callback stops it: that record counts. */
	memset(&col, 0, sizeof(col));
	col.tag = "a";
	col.stop_after = 3;
	ck_assert_int_eq(trange_async(base, s, 500, 0, &col), 3);
	ck_assert_int_eq(col.last, 503);

	/* Appends go on from where the store is. */
	tappend(s, "a", 1001, 1002);
	WAIT(base, t.durable == 1002, 3000);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{s1}:meta last"), "1002");
	/* A wrong seq is refused at once (store.c), no I/O. */
	ck_assert_int_eq(store_append_async(s, 1004, 1, "{}", 2), -1);
	ck_assert_int_eq(errno, EINVAL);
	store_sess_close(s);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_cache)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	struct tcoll		 col;
	struct tdone		 d = { 0, 0, 0 };

	srv_start(&r);
	st = tstore(base, r.port, "h/1", 5000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "c", 1, 0, STORE_OWNER);
	tappend(s, "c", 1, 50);
	WAIT(base, t.durable == 50, 3000);
	/* Durable appends are cached. */
	memset(&col, 0, sizeof(col));
	col.tag = "c";
	ck_assert_int_eq(store_range(s, 0, 0, tcoll_cb, &col), 50);
	ck_assert_int_eq(col.bad, 0);
	store_sess_close(s);

	/* tail 10: the last 10 answer synchronously, older ones not. */
	s = topen(base, st, "c", 0, 10, STORE_OWNER);
	memset(&col, 0, sizeof(col));
	col.tag = "c";
	ck_assert_int_eq(store_range(s, 40, 0, tcoll_cb, &col), 10);
	ck_assert_int_eq(col.first, 41);
	ck_assert_int_eq(col.last, 50);
	ck_assert_int_eq(col.bad, 0);
	memset(&col, 0, sizeof(col));
	col.tag = "c";
	ck_assert_int_eq(store_range(s, 45, 2, tcoll_cb, &col), 2);
	ck_assert_int_eq(col.last, 47);
	errno = 0;
	ck_assert_int_eq(store_range(s, 39, 0, tcoll_cb, &col), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(store_range(s, 0, 5, tcoll_cb, &col), -1);
	ck_assert_int_eq(errno, EAGAIN);
	/* range_async over the cache completes at once. */
	memset(&col, 0, sizeof(col));
	col.tag = "c";
	ck_assert_ptr_null(store_range_async(s, 44, 0, tcoll_cb, tdone_cb,
	    &col));
	ck_assert_int_eq(col.d.n, 1);
	ck_assert_int_eq(col.d.r, 6);
	ck_assert_int_eq(col.n, 6);
	ck_assert_int_eq(col.bad, 0);

	/* Preload makes the rest readable synchronously. */
	memset(&d, 0, sizeof(d));
	ck_assert_ptr_nonnull(store_preload_async(s, 0, tdone_cb, &d));
	WAIT(base, d.n > 0, 3000);
	ck_assert_int_eq(d.r, 40);
	memset(&col, 0, sizeof(col));
	col.tag = "c";
	ck_assert_int_eq(store_range(s, 0, 0, tcoll_cb, &col), 50);
	ck_assert_int_eq(col.first, 1);
	ck_assert_int_eq(col.bad, 0);
	/* Nothing left to preload: done at once. */
	memset(&d, 0, sizeof(d));
	ck_assert_ptr_null(store_preload_async(s, 0, tdone_cb, &d));
	ck_assert_int_eq(d.n, 1);
	ck_assert_int_eq(d.r, 0);

	/* A queued append is not readable until durable. */
	tappend(s, "c", 51, 51);
	memset(&col, 0, sizeof(col));
	col.tag = "c";
	ck_assert_int_eq(store_range(s, 50, 0, tcoll_cb, &col), 0);
	WAIT(base, t.durable == 51, 3000);
	ck_assert_int_eq(store_range(s, 50, 0, tcoll_cb, &col), 1);
	ck_assert_int_eq(col.last, 51);
	store_sess_close(s);
	store_close(st);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_follower)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct tcoll		 col;
	char			*m;

	srv_start(&r);
	a = tstore(base, r.port, "hostA/100", 5000, &ta);
	b = tstore(base, r.port, "hostB/200", 5000, &tb);
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "f", 1, 0, STORE_OWNER);
	tappend(sa, "f", 1, 5);
	ck_assert_int_eq(store_meta_write_async(sa, "{\"m\":1}", 7), 0);
	WAIT(base, ta.durable == 5, 3000);
	spin(base, 30);

	sb = topen(base, b, "f", 0, 3, STORE_FOLLOWER);
	ck_assert_int_eq(store_last_seq(sb), 5);
	ck_assert_int_eq(store_durable_seq(sb), 5);
	ck_assert_ptr_nonnull(m = store_meta_read(sb));
	ck_assert_str_eq(m, "{\"m\":1}");
	free(m);
	/* Its tail is cached. */
	memset(&col, 0, sizeof(col));
	col.tag = "f";
	ck_assert_int_eq(store_range(sb, 2, 0, tcoll_cb, &col), 3);
	/* Followers do not write. */
	ck_assert_int_eq(store_append_async(sb, 6, 1, "{}", 2), -1);
	ck_assert_int_eq(errno, EPERM);

	/* The owner's appends: grown, from the notifications. */
	tappend(sa, "f", 6, 20);
	WAIT(base, tb.grown == 20, 3000);
	ck_assert_int_eq(tb.grown_bad, 0);
	ck_assert_int_eq(store_last_seq(sb), 20);
	memset(&col, 0, sizeof(col));
	col.tag = "f";
	ck_assert_int_eq(trange_async(base, sb, 5, 0, &col), 15);
	ck_assert_int_eq(col.first, 6);
	ck_assert_int_eq(col.last, 20);
	ck_assert_int_eq(col.bad, 0);
	/* What it fetched joined its cache. */
	memset(&col, 0, sizeof(col));
	col.tag = "f";
	ck_assert_int_eq(store_range(sb, 2, 0, tcoll_cb, &col), 18);
	ck_assert_int_eq(col.bad, 0);
	/* Grown past the cache, then a preload from before it: both ends
	 * join (cache 3..20 -> 1..25). */
	tappend(sa, "f", 21, 25);
	WAIT(base, tb.grown == 25, 3000);
	errno = 0;
	ck_assert_int_eq(store_range(sb, 0, 0, tcoll_cb, &col), -1);
	ck_assert_int_eq(errno, EAGAIN);
	{
		struct tdone d = { 0, 0, 0 };

		ck_assert_ptr_nonnull(store_preload_async(sb, 0, tdone_cb,
		    &d));
		WAIT(base, d.n > 0, 3000);
		ck_assert_int_eq(d.r, 25);
	}
	memset(&col, 0, sizeof(col));
	col.tag = "f";
	ck_assert_int_eq(store_range(sb, 0, 0, tcoll_cb, &col), 25);
	ck_assert_int_eq(col.first, 1);
	ck_assert_int_eq(col.bad, 0);

	/* The owner closes: the follower hears the lease is free. */
	store_sess_close(sa);
	WAIT(base, tb.nvacant == 1, 2000);
	store_sess_close(sb);
	store_close(a);
	store_close(b);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/*
 * A notice that never came (the append reached Redis but no PUBLISH did,
 * while the subscriber stayed connected): the safety net still finds the
 * growth, within its period.
 */
START_TEST(test_feed_lost_notice)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct tcoll		 col;
	char			 j[256];

	srv_start(&r);
	c = sconn(r.port);
	a = tstore(base, r.port, "hostA/100", 5000, &ta);
	b = tstore(base, r.port, "hostB/200", 5000, &tb);
	((struct rstore *)b)->poll_ms = 400;
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "lp", 1, 0, STORE_OWNER);
	tappend(sa, "lp", 1, 3);
	WAIT(base, ta.durable == 3, 3000);
	sb = topen(base, b, "lp", 0, 3, STORE_FOLLOWER);
	ck_assert_int_eq(store_last_seq(sb), 3);
	/* Past the read its subscription's confirmation starts. */
	spin(base, 100);

	/* What the append script writes, without its PUBLISH. */
	mkjson(j, sizeof(j), "lp", 4);
	freeReplyObject(scmd(c, "XADD parley:{lp}:log 4-0 t 1004 e %s", j));
	freeReplyObject(scmd(c, "HSET parley:{lp}:meta last 4"));
	WAIT(base, tb.grown == 4, 3000);
	ck_assert_int_eq(tb.grown_bad, 0);
	memset(&col, 0, sizeof(col));
	col.tag = "lp";
	ck_assert_int_eq(trange_async(base, sb, 3, 0, &col), 1);
	ck_assert_int_eq(col.last, 4);
	ck_assert_int_eq(col.bad, 0);

	store_sess_close(sa);
	store_sess_close(sb);
	store_close(a);
	store_close(b);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/*
 * An owner process that dies says nothing and its lease lapses: its
 * heartbeat stops, and the follower reads the session again and finds it
 * vacant about a lease later, with the safety net far off.
 */
START_TEST(test_feed_dead_owner)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct tdone		 d = { 0, 0, 0 };

	srv_start(&r);
	c = sconn(r.port);
	a = tstore(base, r.port, "hostA/100", 1500, &ta);
	b = tstore(base, r.port, "hostB/200", 1500, &tb);
	((struct rstore *)a)->poll_ms = 600000;
	((struct rstore *)b)->poll_ms = 600000;
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "dz", 1, 0, STORE_OWNER);
	tappend(sa, "dz", 1, 2);
	WAIT(base, ta.durable == 2, 3000);
	store_sess_close(sa);
	spin(base, 30);
	/* A process that will never be heard (another host: no pid check). */
	ck_assert_int_eq(sint(c, "EXISTS parley:{dz}:owner"), 0);
	freeReplyObject(scmd(c, "SET parley:{dz}:owner ghost/1#9 PX 2000"));
	sb = topen(base, b, "dz", 0, 0, STORE_FOLLOWER);
	ck_assert_int_eq(tb.nvacant, 0);
	WAIT(base, tb.nvacant == 1, 6000);
	store_promote(sb, tdone_cb, &d);
	WAIT(base, d.n > 0, 3000);
	ck_assert_int_eq(d.r, 0);
	ck_assert_int_eq(store_role(sb), STORE_OWNER);
	ck_assert_int_eq(store_last_seq(sb), 2);

	store_sess_close(sb);
	store_close(a);
	store_close(b);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

static void
post_one(struct event_base *base, struct store_sess *s, const char *msg)
{
	struct tdone	 d = { 0, 0, 0 };

	ck_assert_ptr_nonnull(store_post(s, msg, strlen(msg), tdone_cb, &d));
	WAIT(base, d.n > 0, 3000);
	ck_assert_int_eq(d.r, 0);
}

START_TEST(test_post_input)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct tdone		 d = { 0, 0, 0 };
	char			 msg[64];
	int			 i;
	redisContext		*c;
	redisReply		*rp;

	srv_start(&r);
	a = tstore(base, r.port, "hostA/100", 5000, &ta);
	b = tstore(base, r.port, "hostB/200", 5000, &tb);
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "p", 1, 0, STORE_OWNER);
	sb = topen(base, b, "p", 0, 0, STORE_FOLLOWER);
	/* Owners do not post. */
	ck_assert_ptr_null(store_post(sa, "{}", 2, tdone_cb, &d));
	ck_assert_int_eq(d.r, -1);

	/* Five posts, the last two without waiting: in order, once each. */
	for (i = 1; i <= 3; i++) {
		snprintf(msg, sizeof(msg), "{\"id\":\"m%d\"}", i);
		post_one(base, sb, msg);
	}
	{
		struct tdone d4 = { 0, 0, 0 }, d5 = { 0, 0, 0 };

		store_post(sb, "{\"id\":\"m4\"}", 11, tdone_cb, &d4);
		store_post(sb, "{\"id\":\"m5\"}", 11, tdone_cb, &d5);
		WAIT(base, d4.n > 0 && d5.n > 0, 3000);
		ck_assert_int_eq(d4.r, 0);
		ck_assert_int_eq(d5.r, 0);
	}
	WAIT(base, ta.ninputs == 5, 3000);
	spin(base, 50);
	ck_assert_int_eq(ta.ninputs, 5);
	for (i = 0; i < 5; i++) {
		snprintf(msg, sizeof(msg), "{\"id\":\"m%d\"}", i + 1);
		ck_assert_str_eq(ta.inputs[i], msg);
	}
	/* Handling them logged an event: the inbox position moves with it,
	 * once: the appends after carry none (no HSET, no XTRIM each). */
	tappend(sa, "p", 1, 1);
	WAIT(base, ta.durable == 1, 3000);
	c = sconn(r.port);
	rp = scmd(c, "HGET parley:{p}:meta inpos");
	ck_assert_int_eq(rp->type, REDIS_REPLY_STRING);
	ck_assert_str_eq(rp->str, ((struct rsess *)sa)->in_cursor);
	freeReplyObject(rp);
	freeReplyObject(scmd(c, "CONFIG RESETSTAT"));
	for (i = 2; i <= 6; i++) {
		tappend(sa, "p", (uint64_t)i, (uint64_t)i);
		WAIT(base, ta.durable == (uint64_t)i, 3000);
	}
	ck_assert_int_eq(cmdcalls(c, "xtrim"), 0);
	ck_assert_int_eq(cmdcalls(c, "xadd"), 5);
	redisFree(c);
	store_sess_close(sa);
	WAIT(base, tb.nvacant == 1, 2000);

	/* The owner again: nothing consumed comes back. */
	ta.ninputs = 0;
	sa = topen(base, a, "p", 0, 0, STORE_OWNER);
	post_one(base, sb, "{\"id\":\"m6\"}");
	WAIT(base, ta.ninputs == 1, 3000);
	spin(base, 50);
	ck_assert_int_eq(ta.ninputs, 1);
	ck_assert_str_eq(ta.inputs[0], "{\"id\":\"m6\"}");

	/* m6 logged nothing: a new owner sees it again (at least once). */
	store_sess_close(sa);
	ta.ninputs = 0;
	sa = topen(base, a, "p", 0, 0, STORE_OWNER);
	WAIT(base, ta.ninputs == 1, 3000);
	ck_assert_str_eq(ta.inputs[0], "{\"id\":\"m6\"}");

	store_sess_close(sa);
	store_sess_close(sb);
	store_close(a);
	store_close(b);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/*
 * A failover that lost the batch which carried the inbox position (Redis
 * restarted from an older snapshot) makes the owner append again from its
 * cache: the position goes with it, or a new owner would hand the
 * consumed message over again.
 */
START_TEST(test_inpos_repair)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	redisContext		*c;
	char			 buf[64], cur[64];

	srv_start(&r);
	a = tstore(base, r.port, "hostA/100", 5000, &ta);
	b = tstore(base, r.port, "hostB/200", 5000, &tb);
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "q", 1, 100, STORE_OWNER);
	sb = topen(base, b, "q", 0, 100, STORE_FOLLOWER);
	tappend(sa, "q", 1, 2);
	WAIT(base, ta.durable == 2, 3000);
	c = sconn(r.port);
	freeReplyObject(scmd(c, "SAVE"));
	redisFree(c);
	post_one(base, sb, "{\"id\":\"m1\"}");
	WAIT(base, ta.ninputs == 1, 3000);
	tappend(sa, "q", 3, 3);
	WAIT(base, ta.durable == 3, 3000);
	snprintf(cur, sizeof(cur), "%s", ((struct rsess *)sa)->in_cursor);
	c = sconn(r.port);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{q}:meta inpos"), cur);
	redisFree(c);
	/* back to the snapshot: seq 3 and the position are gone */
	srv_kill(&r);
	WAIT(base, ta.health == 0, 3000);
	srv_restart(&r);
	c = sconn(r.port);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{q}:meta inpos"), "");
	WAIT(base, ta.health == 1, 5000);
	WAIT(base, strcmp(sget(c, buf, sizeof(buf),
	    "HGET parley:{q}:meta last"), "3") == 0, 5000);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{q}:meta inpos"), cur);
	redisFree(c);
	store_sess_close(sa);
	store_sess_close(sb);
	store_close(a);
	store_close(b);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_fencing)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	redisReply		*rp;
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct tdone		 d = { 0, 0, 0 };
	char			 buf[256], j[256];
	size_t			 n;
	int			 rv;

	srv_start(&r);
	c = sconn(r.port);
	/* A long lease: A's renewal must not notice before its write. */
	a = tstore(base, r.port, "hostA/100", 30000, &ta);
	b = tstore(base, r.port, "hostB/200", 3000, &tb);
	/* The owner key deleted behind a live owner's back (its heartbeat
	 * goes on): only the safety net sees it, so a short one. */
	((struct rstore *)b)->poll_ms = 300;
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "x", 1, 0, STORE_OWNER);
	tappend(sa, "x", 1, 3);
	WAIT(base, ta.durable == 3, 3000);
	sb = topen(base, b, "x", 0, 0, STORE_FOLLOWER);

	/* Promote while owned: EBUSY. */
	store_promote(sb, tdone_cb, &d);
	WAIT(base, d.n > 0, 3000);
	ck_assert_int_eq(d.r, -1);
	ck_assert_int_eq(d.err, EBUSY);
	ck_assert_int_eq(store_role(sb), STORE_FOLLOWER);

	/* The lease goes away under the owner: the follower hears it. */
	ck_assert_int_eq(sint(c, "DEL parley:{x}:owner"), 1);
	WAIT(base, tb.nvacant == 1, 2500);
	memset(&d, 0, sizeof(d));
	store_promote(sb, tdone_cb, &d);
	WAIT(base, d.n > 0, 3000);
	ck_assert_int_eq(d.r, 0);
	ck_assert_int_eq(store_role(sb), STORE_OWNER);
	ck_assert_int_eq(store_last_seq(sb), 3);
	ck_assert_int_eq(store_durable_seq(sb), 3);

	/* The old owner writes: fenced, and nothing of it lands. */
	n = mkjson(j, sizeof(j), "OLD", 4);
	rv = store_append_async(sa, 4, 1004, j, n);
	ck_assert_int_eq(rv, 0);
	WAIT(base, ta.nfailed == 1, 3000);
	ck_assert_int_eq(ta.failed, ESTALE);
	ck_assert_int_eq(store_append_async(sa, 4, 1004, j, n), -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_assert_int_eq(store_meta_write_async(sa, "{}", 2), -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_assert_str_eq(sget(c, buf, sizeof(buf), "HGET parley:{x}:meta last"),
	    "3");
	ck_assert_int_eq(sint(c, "XLEN parley:{x}:log"), 3);

	/* The new owner goes on. */
	tappend(sb, "x", 4, 4);
	WAIT(base, tb.durable == 4, 3000);
	rp = scmd(c, "XRANGE parley:{x}:log 4-0 4-0");
	ck_assert_int_eq(rp->elements, 1);
	mkjson(j, sizeof(j), "x", 4);
	ck_assert_str_eq(rp->element[0]->element[1]->element[3]->str, j);
	freeReplyObject(rp);
	ck_assert_int_eq(ta.nfailed, 1);

	/* The old handle's close must not release the new owner's lease. */
	store_sess_close(sa);
	spin(base, 30);
	ck_assert_int_eq(sint(c, "EXISTS parley:{x}:owner"), 1);
	store_sess_close(sb);
	store_close(a);
	store_close(b);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/*
 * A meta write queued behind an append must not land when the append
 * does not: the next owner would read a meta that names events the log
 * never got.
 */
START_TEST(test_meta_behind_failed_append)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*a;
	struct store_sess	*sa;
	struct tev		 ta;
	char			 buf[256], j[256];
	size_t			 n;
	int			 nd;

	srv_start(&r);
	c = sconn(r.port);
	a = tstore(base, r.port, "hostA/100", 30000, &ta);
	WAIT(base, ta.health == 1, 3000);
	sa = topen(base, a, "m", 1, 0, STORE_OWNER);
	tappend(sa, "m", 1, 3);
	WAIT(base, ta.durable == 3, 3000);
	nd = ta.ndurable;
	ck_assert_int_eq(store_meta_write_async(sa, "{\"v\":1}", 7), 0);
	WAIT(base, ta.ndurable > nd, 3000);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{m}:meta doc"), "{\"v\":1}");
	/* Someone else's write (or a bug) moved last on: our append is
	 * refused, and the meta write pipelined behind it must be too. */
	ck_assert_int_eq(sint(c, "HSET parley:{m}:meta last 99"), 0);
	n = mkjson(j, sizeof(j), "m", 4);
	ck_assert_int_eq(store_append_async(sa, 4, 1004, j, n), 0);
	ck_assert_int_eq(store_meta_write_async(sa, "{\"v\":2}", 7), 0);
	WAIT(base, ta.nfailed == 1, 3000);
	ck_assert_int_eq(ta.failed, EIO);
	spin(base, 100);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{m}:meta doc"), "{\"v\":1}");
	ck_assert_int_eq(sint(c, "XLEN parley:{m}:log"), 3);
	store_sess_close(sa);
	store_close(a);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_takeover)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	char			 node[64];
	pid_t			 dead;
	uint64_t		 t0;

	/* A pid that does not exist: a child that has exited. */
	dead = fork();
	ck_assert_int_ge(dead, 0);
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	ck_assert_int_eq(kill(dead, 0), -1);

	srv_start(&r);
	c = sconn(r.port);
	snprintf(node, sizeof(node), "thishost/%d", (int)getpid());
	st = tstore(base, r.port, node, 60000, &t);
	WAIT(base, t.health == 1, 3000);

	/* A dead worker of this host: taken over at once, not in 60 s. */
	freeReplyObject(scmd(c, "SET parley:{t1}:owner thishost/%d#7 PX 60000",
	    (int)dead));
	t0 = util_mono_ms();
	s = topen(base, st, "t1", 1, 0, STORE_OWNER);
	ck_assert_int_lt(util_mono_ms() - t0, 1000);
	store_sess_close(s);

	/* This very process's own stale lease (a lost handle). */
	freeReplyObject(scmd(c, "SET parley:{t2}:owner %s#3 PX 60000", node));
	s = topen(base, st, "t2", 1, 0, STORE_OWNER);
	store_sess_close(s);

	/* Another host's dead pid means nothing here: follow. */
	freeReplyObject(scmd(c, "SET parley:{t3}:owner otherhost/%d#7 PX 60000",
	    (int)dead));
	s = topen(base, st, "t3", 1, 0, STORE_FOLLOWER);
	store_sess_close(s);

	/* A live process of this host (pid 1): follow. */
	freeReplyObject(scmd(c, "SET parley:{t4}:owner thishost/1#7 PX 60000"));
	s = topen(base, st, "t4", 1, 0, STORE_FOLLOWER);
	store_sess_close(s);

	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/*
 * Redis killed and started again from a snapshot older than what the
 * owner was told is durable: both stores report health, the owner puts
 * the lost events back from its cache and goes on, the follower re-syncs.
 */
START_TEST(test_restart)
{
	struct srv		 r;
	struct event		*n1, *n2;
	struct event_base	*b1 = tbase(&n1), *b2 = tbase(&n2);
	redisContext		*c;
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct tcoll		 col;
	char			 buf[64];

	srv_start(&r);
	a = tstore(b1, r.port, "hostA/100", 5000, &ta);
	b = tstore(b2, r.port, "hostB/200", 5000, &tb);
	WAIT2(b1, b2, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(b1, a, "r", 1, 100, STORE_OWNER);
	tappend(sa, "r", 1, 5);
	WAIT(b1, ta.durable == 5, 3000);
	sb = topen(b2, b, "r", 0, 100, STORE_FOLLOWER);
	c = sconn(r.port);
	freeReplyObject(scmd(c, "SAVE"));
	redisFree(c);
	tappend(sa, "r", 6, 7);
	WAIT2(b1, b2, ta.durable == 7 && tb.grown == 7, 3000);

	srv_kill(&r);
	WAIT2(b1, b2, ta.health == 0 && tb.health == 0, 3000);
	ck_assert_int_eq(store_healthy(a), 0);
	srv_restart(&r);
	c = sconn(r.port);
	ck_assert_str_eq(sget(c, buf, sizeof(buf), "HGET parley:{r}:meta last"),
	    "5");

	/* Only the owner's loop runs: it is back, and repairs 6-7. */
	WAIT(b1, ta.health == 1, 5000);
	WAIT(b1, strcmp(sget(c, buf, sizeof(buf),
	    "HGET parley:{r}:meta last"), "7") == 0, 3000);
	ck_assert_int_eq(ta.nfailed, 0);
	tappend(sa, "r", 8, 9);
	WAIT(b1, ta.durable == 9, 3000);
	ck_assert_int_eq(ta.nfailed, 0);
	ck_assert_int_eq(sint(c, "XLEN parley:{r}:log"), 9);

	/* The follower missed 8-9 while away: re-synced, grown. */
	WAIT(b2, tb.health == 1 && tb.grown == 9, 5000);
	ck_assert_int_eq(tb.grown_bad, 0);
	memset(&col, 0, sizeof(col));
	col.tag = "r";
	ck_assert_int_eq(trange_async(b2, sb, 0, 0, &col), 9);
	ck_assert_int_eq(col.bad, 0);
	ck_assert_int_eq(col.last, 9);

	store_sess_close(sa);
	store_sess_close(sb);
	store_close(a);
	store_close(b);
	redisFree(c);
	tbase_free(b1, n1);
	tbase_free(b2, n2);
	srv_stop(&r);
}
END_TEST

START_TEST(test_deadline)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	struct topen		 o = { 0, 0, NULL, 0 };
	uint64_t		 t0, el;

	srv_start(&r);
	st = tstore(base, r.port, "h/1", 5000, &t);
	((struct rstore *)st)->deadline_ms = 600;
	((struct rstore *)st)->connect_ms = 800;
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "d", 1, 0, STORE_OWNER);
	tappend(s, "d", 1, 1);
	WAIT(base, t.durable == 1, 3000);

	ck_assert_int_eq(kill(r.pid, SIGSTOP), 0);
	t0 = util_mono_ms();
	tappend(s, "d", 2, 2);
	WAIT(base, t.nfailed == 1, 3000);
	el = util_mono_ms() - t0;
	ck_assert_int_eq(t.failed, EIO);
	ck_assert_msg(el >= 500 && el < 1500, "failed after %" PRIu64 " ms",
	    el);
	WAIT(base, t.health == 0, 500);
	ck_assert_int_eq(store_healthy(st), 0);
	/* Meanwhile opens fail rather than hang. */
	store_open_async(st, "d2", 1, 0, topen_cb, &o);
	WAIT(base, o.n > 0, 2500);
	ck_assert_int_eq(o.err, EIO);

	ck_assert_int_eq(kill(r.pid, SIGCONT), 0);
	WAIT(base, t.health == 1, 5000);
	store_sess_close(s);
	/* The same process re-opens it (its own lease) and goes on. */
	s = topen(base, st, "d", 0, 0, STORE_OWNER);
	tappend(s, "d", store_last_seq(s) + 1, store_last_seq(s) + 1);
	WAIT(base, t.durable == store_last_seq(s), 3000);
	store_sess_close(s);
	store_close(st);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

static void
never_done(void *arg, ssize_t n)
{
	(void)n;
	*(int *)arg += 1;
}

static int
never_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	(void)seq;
	(void)ts;
	(void)json;
	(void)len;
	*(int *)arg += 1;
	return 0;
}

static void
never_done_ok(void *arg, ssize_t n)
{
	(void)arg;
	ck_assert_int_eq(n, 0);
}

static void
never_open(void *arg, int err, struct store_sess *s, enum store_role role)
{
	(void)err;
	(void)s;
	(void)role;
	*(int *)arg += 1;
}

/* Cancelled or closed: no callback, ever. */
START_TEST(test_cancel)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*st;
	struct store_sess	*s;
	struct store_req	*req;
	struct tev		 t;
	int			 calls = 0;

	srv_start(&r);
	st = tstore(base, r.port, "h/1", 5000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "k", 1, 0, STORE_OWNER);
	tappend(s, "k", 1, 30);
	WAIT(base, t.durable == 30, 3000);
	store_sess_close(s);
	s = topen(base, st, "k", 0, 0, STORE_OWNER);

	req = store_range_async(s, 0, 0, never_rec, never_done, &calls);
	ck_assert_ptr_nonnull(req);
	store_req_cancel(req);
	req = store_preload_async(s, 0, never_done, &calls);
	ck_assert_ptr_nonnull(req);
	store_req_cancel(req);
	spin(base, 100);
	ck_assert_int_eq(calls, 0);

	/* Pending requests die with their session. */
	ck_assert_ptr_nonnull(store_range_async(s, 0, 0, never_rec,
	    never_done, &calls));
	ck_assert_ptr_nonnull(store_preload_async(s, 0, never_done, &calls));
	store_sess_close(s);
	spin(base, 100);
	ck_assert_int_eq(calls, 0);

	/* And opens with their store; so do the sessions' events. */
	s = topen(base, st, "k", 0, 0, STORE_OWNER);
	tappend(s, "k", 31, 40);
	store_open_async(st, "k2", 1, 0, never_open, &calls);
	ck_assert_ptr_nonnull(store_range_async(s, 0, 0, never_rec,
	    never_done, &calls));
	t.ndurable = 0;
	store_close(st);
	spin(base, 100);
	ck_assert_int_eq(calls, 0);
	ck_assert_int_eq(t.ndurable, 0);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

static int
close_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct tcoll	*c = arg;

	(void)ts;
	(void)json;
	(void)len;
	c->n++;
	c->last = seq;
	if (c->n == 2)
		store_sess_close((struct store_sess *)(uintptr_t)c->stop_after);
	return 0;
}

/* The user closes from inside callbacks: nothing after, nothing freed
 * under hiredis (ASan watches). */
START_TEST(test_close_in_callback)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct tcoll		 col;
	int			 n;

	srv_start(&r);
	a = tstore(base, r.port, "hostA/100", 5000, &ta);
	b = tstore(base, r.port, "hostB/200", 5000, &tb);
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);
	sa = topen(base, a, "cc", 1, 0, STORE_OWNER);
	tappend(sa, "cc", 1, 5);
	WAIT(base, ta.durable == 5, 3000);
	sb = topen(base, b, "cc", 0, 0, STORE_FOLLOWER);

	/* A session closed by its own range callback: no done. */
	memset(&col, 0, sizeof(col));
	col.stop_after = (size_t)(uintptr_t)sb;
	store_range_async(sb, 0, 0, close_rec, tdone_cb, &col);
	spin(base, 100);
	ck_assert_int_eq(col.n, 2);
	ck_assert_int_eq(col.d.n, 0);
	sb = topen(base, b, "cc", 0, 0, STORE_FOLLOWER);

	/* The owner's session closed by its first input: no more inputs. */
	ta.close_on = CLOSE_INPUT;
	ta.close_sess = sa;
	store_post(sb, "{\"id\":1}", 8, never_done_ok, NULL);
	store_post(sb, "{\"id\":2}", 8, never_done_ok, NULL);
	store_post(sb, "{\"id\":3}", 8, never_done_ok, NULL);
	WAIT(base, ta.ninputs >= 1, 3000);
	spin(base, 100);
	ck_assert_int_eq(ta.ninputs, 1);
	ta.close_sess = NULL;

	/* The follower's store closed from grown (a pub/sub callback). */
	sa = topen(base, a, "cc", 0, 0, STORE_OWNER);
	tb.close_on = CLOSE_GROWN;
	tb.close_store = b;
	tappend(sa, "cc", 6, 6);
	WAIT(base, tb.ngrown == 1, 3000);
	/* The owner's store closed from durable (a reply callback), with
	 * more writes queued behind. */
	ta.close_on = CLOSE_DURABLE;
	ta.close_store = a;
	tappend(sa, "cc", 7, 7);
	WAIT(base, ta.ndurable > 0 && ta.close_on == CLOSE_NONE, 3000);
	n = ta.ndurable;
	spin(base, 150);
	ck_assert_int_eq(ta.ndurable, n);
	ck_assert_int_eq(tb.ngrown, 1);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_trim)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st, *fst;
	struct store_sess	*s, *fs;
	struct tev		 t, ft;
	struct tcoll		 col;

	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 5000, &t);
	/* A follower elsewhere, its safety net far off. */
	fst = tstore(base, r.port, "g/1", 5000, &ft);
	((struct rstore *)fst)->poll_ms = 600000;
	WAIT(base, t.health == 1 && ft.health == 1, 3000);
	s = topen(base, st, "tr", 1, 0, STORE_OWNER);
	tappend(s, "tr", 1, 2500);	/* ts 1001..3500 */
	WAIT(base, t.durable == 2500, 5000);
	fs = topen(base, fst, "tr", 0, 0, STORE_FOLLOWER);
	ck_assert_int_eq(store_first_seq(fs), 1);
	/* Records with ts < 3001 (seq < 2001) go; the follower is told. */
	ck_assert_int_eq(store_trim(s, 3001), 0);
	WAIT(base, store_first_seq(s) == 2001, 3000);
	WAIT(base, store_first_seq(fs) == 2001, 3000);
	store_sess_close(fs);
	store_close(fst);
	ck_assert_int_eq(sint(c, "XLEN parley:{tr}:log"), 500);
	memset(&col, 0, sizeof(col));
	col.tag = "tr";
	ck_assert_int_eq(store_range(s, 0, 0, tcoll_cb, &col), 500);
	ck_assert_int_eq(col.first, 2001);
	/* Never the newest one. */
	ck_assert_int_eq(store_trim(s, UINT64_MAX), 0);
	WAIT(base, store_first_seq(s) == 2500, 3000);
	ck_assert_int_eq(sint(c, "XLEN parley:{tr}:log"), 1);
	store_sess_close(s);
	s = topen(base, st, "tr", 0, 0, STORE_OWNER);
	ck_assert_int_eq(store_first_seq(s), 2500);
	ck_assert_int_eq(store_last_seq(s), 2500);
	store_sess_close(s);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_noscript)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	struct tcoll		 col;
	uint64_t		 seq;

	srv_start(&r);
	c = sconn(r.port);
	st = tstore(base, r.port, "h/1", 5000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "ns", 1, 0, STORE_OWNER);
	/* The script cache emptied under us, twice, while appends keep
	 * coming: the writes land, in order, without a reconnect. */
	freeReplyObject(scmd(c, "SCRIPT FLUSH"));
	tappend(s, "ns", 1, 600);
	for (seq = 601; seq <= 1200; seq += 50) {
		event_base_loop(base, EVLOOP_ONCE);
		if (seq == 901)
			freeReplyObject(scmd(c, "SCRIPT FLUSH"));
		tappend(s, "ns", seq, seq + 49);
	}
	WAIT(base, t.durable == 1200, 3000);
	ck_assert_int_eq(t.nfailed, 0);
	ck_assert_int_eq(sint(c, "XLEN parley:{ns}:log"), 1200);
	ck_assert_int_eq(t.nup, 1);
	store_sess_close(s);
	s = topen(base, st, "ns", 0, 0, STORE_OWNER);
	memset(&col, 0, sizeof(col));
	col.tag = "ns";
	ck_assert_int_eq(trange_async(base, s, 0, 0, &col), 1200);
	ck_assert_int_eq(col.bad, 0);
	store_sess_close(s);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

START_TEST(test_unreachable)
{
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*st;
	struct tev		 t;
	struct topen		 o = { 0, 0, NULL, 0 };
	char			 err[256], url[64];
	int			 port = free_port();

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	st = tstore_url(base, url, "h/1", 3000, &t);
	ck_assert_int_eq(store_ping(st, 500, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "refused") != NULL, "%s", err);
	WAIT(base, t.health == 0, 3000);
	ck_assert_int_eq(t.nup, 0);
	store_open_async(st, "u", 1, 0, topen_cb, &o);
	WAIT(base, o.n > 0, 3000);
	ck_assert_int_eq(o.err, EIO);
	store_close(st);
	tbase_free(base, nudge);
}
END_TEST

/*
 * An owner's writes renew its keys' TTL (retention + the renewal
 * interval), the first append after an acquire always (the log is
 * created by it, after the acquire set the TTL of what existed), then
 * once per interval.  The lease is long: no renewal (every lease/3) runs here.
 */
START_TEST(test_ttl_renew)
{
	static const char *const keys[] = { "log", "meta", "fence" };
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st;
	struct store_sess	*s;
	struct rsess		*rs;
	struct tev		 t;
	char			 cmd[64];
	size_t			 i;
	long long		 ttl;

	srv_start(&r);
	c = sconn(r.port);
	/* A lease of 10 min: its renewals (PEXPIRE, every lease/3) must not
	 * come between the counts below, however slow the machine. */
	st = tstore(base, r.port, "h/1", 600000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "tr", 1, 0, STORE_OWNER);
	rs = (struct rsess *)s;
	/* a meta write first: the log does not exist yet */
	ck_assert_int_eq(store_meta_write_async(s, "{}", 2), 0);
	WAIT(base, sint(c, "HEXISTS parley:{tr}:meta doc") == 1, 3000);
	ck_assert_int_eq(sint(c, "EXISTS parley:{tr}:log"), 0);
	tappend(s, "tr", 1, 1);
	WAIT(base, t.durable == 1, 3000);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(cmd, sizeof(cmd), "PTTL parley:{tr}:%s", keys[i]);
		ttl = sint(c, cmd);
		ck_assert_msg(ttl > 3600 * 1000 && ttl <= 3660 * 1000,
		    "%s: %lld", cmd, ttl);
	}

	/* Within the interval (a minute at this retention) the appends and
	 * meta writes leave it alone: no PEXPIRE at all. */
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tr}:log 100000"), 1);
	freeReplyObject(scmd(c, "CONFIG RESETSTAT"));
	tappend(s, "tr", 2, 50);
	WAIT(base, t.durable == 50, 3000);
	ck_assert_int_eq(store_meta_write_async(s, "{}", 2), 0);
	tappend(s, "tr", 51, 60);
	WAIT(base, t.durable == 60, 3000);
	ck_assert_int_le(sint(c, "PTTL parley:{tr}:log"), 100000);
	ck_assert_int_eq(cmdcalls(c, "pexpire"), 0);

	/* Once the interval has passed, the next append renews all. */
	rs->ttl_at -= rs->st->ttl_every;
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tr}:meta 100000"), 1);
	tappend(s, "tr", 61, 61);
	WAIT(base, t.durable == 61, 3000);
	ck_assert_int_gt(sint(c, "PTTL parley:{tr}:log"), 3600 * 1000);
	ck_assert_int_gt(sint(c, "PTTL parley:{tr}:meta"), 3600 * 1000);
	/* and a meta write does too */
	rs->ttl_at -= rs->st->ttl_every;
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tr}:log 100000"), 1);
	ck_assert_int_eq(store_meta_write_async(s, "{\"a\":1}", 7), 0);
	WAIT(base, sint(c, "PTTL parley:{tr}:log") > 3600 * 1000, 3000);
	/* but leaves the next append due: a meta write a failover lost
	 * would go unnoticed (it moves no seq). */
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tr}:log 100000"), 1);
	tappend(s, "tr", 62, 62);
	WAIT(base, t.durable == 62, 3000);
	ck_assert_int_gt(sint(c, "PTTL parley:{tr}:log"), 3600 * 1000);

	/* A new tenure renews at its first write, whatever the time. */
	store_sess_close(s);
	spin(base, 20);
	s = topen(base, st, "tr", 0, 0, STORE_OWNER);
	ck_assert_int_eq(sint(c, "PEXPIRE parley:{tr}:log 100000"), 1);
	tappend(s, "tr", 63, 63);
	WAIT(base, t.durable == 63, 3000);
	ck_assert_int_gt(sint(c, "PTTL parley:{tr}:log"), 3600 * 1000);
	ck_assert_int_eq(t.nfailed, 0);
	store_sess_close(s);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

/*
 * Without store-wait the whole log is durable: the first append of a
 * tenure drops the 'durable' mark an earlier store-wait owner left
 * (followers would stop there), and publishes.
 */
START_TEST(test_drop_mark)
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
	st = tstore(base, r.port, "h/1", 30000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "dm", 1, 0, STORE_OWNER);
	tappend(s, "dm", 1, 3);
	WAIT(base, t.durable == 3, 3000);
	store_sess_close(s);
	spin(base, 20);
	ck_assert_int_eq(sint(c, "HSET parley:{dm}:meta durable 2"), 1);
	s = topen(base, st, "dm", 0, 0, STORE_OWNER);
	ck_assert_int_eq(sint(c, "HEXISTS parley:{dm}:meta durable"), 1);
	tappend(s, "dm", 4, 4);
	WAIT(base, t.durable == 4, 3000);
	ck_assert_int_eq(sint(c, "HEXISTS parley:{dm}:meta durable"), 0);
	ck_assert_int_eq(t.nfailed, 0);
	store_sess_close(s);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

static Suite *
store_redis_suite(void)
{
	Suite	*s = suite_create("store_redis");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_url);
	tcase_add_test(tc, test_open_create_enoent);
	tcase_add_test(tc, test_append_range_meta);
	tcase_add_test(tc, test_cache);
	tcase_add_test(tc, test_follower);
	tcase_add_test(tc, test_feed_lost_notice);
	tcase_add_test(tc, test_feed_dead_owner);
	tcase_add_test(tc, test_post_input);
	tcase_add_test(tc, test_inpos_repair);
	tcase_add_test(tc, test_fencing);
	tcase_add_test(tc, test_meta_behind_failed_append);
	tcase_add_test(tc, test_takeover);
	tcase_add_test(tc, test_restart);
	tcase_add_test(tc, test_deadline);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_close_in_callback);
	tcase_add_test(tc, test_trim);
	tcase_add_test(tc, test_noscript);
	tcase_add_test(tc, test_ttl_renew);
	tcase_add_test(tc, test_drop_mark);
	tcase_add_test(tc, test_unreachable);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);	/* as parleyd: hiredis writes */
	log_init("test_store_redis", 1, LOG_LEVEL_WARN);
	return check_run(store_redis_suite());
}
