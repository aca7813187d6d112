/*
 * Unit tests for the Redis store when Redis itself fails over: Sentinel
 * discovery and failover, store-wait (WAIT after each batch) and the log
 * epoch, against real redis-servers (a master, its replica, a sentinel)
 * driven on a real event base.  Split from test_store_redis.c.
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

START_TEST(test_sentinel)
{
	struct srv		 r, sen;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st, *bad;
	struct store_sess	*s;
	struct tev		 t, tbad;
	struct tcoll		 col;
	char			 url[128], err[256], buf[64];

	srv_start(&r);
	sentinel_start(&sen, r.port);
	/* A dead sentinel first: the next one is asked. */
	snprintf(url, sizeof(url), "sentinel://127.0.0.1:%d,127.0.0.1:%d/m",
	    free_port(), sen.port);
	st = tstore_url(base, url, "h/1", 5000, &t);
	ck_assert_msg(store_ping(st, 2000, err, sizeof(err)) == 0, "%s", err);
	WAIT(base, t.health == 1, 5000);
	ck_assert_int_eq(((struct rstore *)st)->master.port, r.port);
	s = topen(base, st, "sn", 1, 0, STORE_OWNER);
	tappend(s, "sn", 1, 10);
	WAIT(base, t.durable == 10, 3000);
	c = sconn(r.port);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{sn}:meta last"), "10");
	redisFree(c);
	store_sess_close(s);
	s = topen(base, st, "sn", 0, 0, STORE_OWNER);
	memset(&col, 0, sizeof(col));
	col.tag = "sn";
	ck_assert_int_eq(trange_async(base, s, 0, 0, &col), 10);
	ck_assert_int_eq(col.bad, 0);
	store_sess_close(s);

	snprintf(url, sizeof(url), "sentinel://127.0.0.1:%d/nosuch", sen.port);
	bad = tstore_url(base, url, "h/1", 5000, &tbad);
	ck_assert_int_eq(store_ping(bad, 1000, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "does not know master nosuch") != NULL, "%s",
	    err);
	WAIT(base, tbad.health == 0, 3000);
	store_close(bad);
	store_close(st);
	tbase_free(base, nudge);
	srv_stop(&sen);
	srv_stop(&r);
}
END_TEST

/* How many replicas the sentinel holds good for promotion. */
static int
sentinel_good_replicas(int sport)
{
	redisContext	*c = sconn(sport);
	redisReply	*rp, *e;
	size_t		 i, j;
	int		 good = 0;

	rp = scmd(c, "SENTINEL REPLICAS m");
	for (i = 0; rp->type == REDIS_REPLY_ARRAY && i < rp->elements; i++) {
		e = rp->element[i];
		for (j = 0; j + 1 < e->elements; j += 2)
			if (strcmp(e->element[j]->str, "flags") == 0 &&
			    strcmp(e->element[j + 1]->str, "slave") == 0)
				good++;
	}
	freeReplyObject(rp);
	redisFree(c);
	return good;
}

/*
 * A failover under an owner that is not writing at that moment: its
 * renewal meets READONLY (or the old master drops it), the store asks
 * the sentinel again, finds the new master, and the session goes on.
 */
START_TEST(test_sentinel_failover)
{
	struct srv		 m, rep, sen;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	redisReply		*rp;
	struct store		*st;
	struct store_sess	*s;
	struct tev		 t;
	char			 url[128], buf[64];
	uint64_t		 deadline;

	srv_start(&m);
	srv_start_of(&rep, m.port);
	c = sconn(m.port);
	deadline = util_mono_ms() + 5000;
	for (;;) {
		rp = scmd(c, "INFO replication");
		if (strstr(rp->str, "state=online") != NULL) {
			freeReplyObject(rp);
			break;
		}
		freeReplyObject(rp);
		ck_assert_msg(util_mono_ms() < deadline, "replica not online");
		usleep(20000);
	}
	redisFree(c);
	sentinel_start(&sen, m.port);
	deadline = util_mono_ms() + 10000;
	while (sentinel_good_replicas(sen.port) < 1) {
		ck_assert_msg(util_mono_ms() < deadline, "no replica known");
		usleep(50000);
	}

	snprintf(url, sizeof(url), "sentinel://127.0.0.1:%d/m", sen.port);
	st = tstore_url(base, url, "h/1", 10000, &t);
	((struct rstore *)st)->connect_ms = 1000;
	WAIT(base, t.health == 1, 5000);
	s = topen(base, st, "fo", 1, 0, STORE_OWNER);
	tappend(s, "fo", 1, 5);
	WAIT(base, t.durable == 5, 3000);
	/* On the replica too (after a full sync Redis streams only once the
	 * replica has acknowledged, up to a second later). */
	c = sconn(rep.port);
	deadline = util_mono_ms() + 5000;
	while (strcmp(sget(c, buf, sizeof(buf), "HGET parley:{fo}:meta last"),
	    "5") != 0 || sint(c, "EXISTS parley:{fo}:owner") != 1) {
		ck_assert_msg(util_mono_ms() < deadline, "not replicated");
		usleep(20000);
	}
	redisFree(c);

	c = sconn(sen.port);
	rp = scmd(c, "SENTINEL FAILOVER m");
	ck_assert_msg(rp->type == REDIS_REPLY_STATUS, "failover: %s",
	    rp->str);
	freeReplyObject(rp);
	redisFree(c);
	/* Renewals (every lease/3) run into the demoted master. */
	WAIT(base, t.ndown >= 1, 10000);
	WAIT(base, t.health == 1 &&
	    ((struct rstore *)st)->master.port == rep.port, 10000);
	ck_assert_int_eq(t.nfailed, 0);
	tappend(s, "fo", 6, 7);
	WAIT(base, t.durable == 7, 3000);
	ck_assert_int_eq(t.nfailed, 0);
	c = sconn(rep.port);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{fo}:meta last"), "7");
	ck_assert_int_eq(sint(c, "XLEN parley:{fo}:log"), 7);
	redisFree(c);
	store_sess_close(s);
	store_close(st);
	tbase_free(base, nudge);
	srv_stop(&sen);
	srv_stop(&rep);
	srv_stop(&m);
}
END_TEST

/* Waits until the master at port sees n replicas online. */
static void
replicas_online(int port, int n)
{
	redisContext	*c = sconn(port);
	redisReply	*rp;
	uint64_t	 deadline = util_mono_ms() + 5000;
	char		 want[32];

	snprintf(want, sizeof(want), "connected_slaves:%d", n);
	for (;;) {
		rp = scmd(c, "INFO replication");
		if (strstr(rp->str, want) != NULL &&
		    strstr(rp->str, "state=online") != NULL) {
			freeReplyObject(rp);
			break;
		}
		freeReplyObject(rp);
		ck_assert_msg(util_mono_ms() < deadline, "replica not online");
		usleep(20000);
	}
	redisFree(c);
}

static struct store *
tstore_wait(struct event_base *base, int port, unsigned n, unsigned ms,
    struct tev *t)
{
	struct store_params	 p;
	struct store		*st;
	char			 url[64], err[256];

	memset(t, 0, sizeof(*t));
	t->health = -1;
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	st = store_open(url, "/nonexistent", STORE_FSYNC_NO, err, sizeof(err));
	ck_assert_msg(st != NULL, "store_open: %s", err);
	memset(&p, 0, sizeof(p));
	p.base = base;
	p.node = "hw/1";
	p.lease_ms = 30000;
	p.retention_ms = 3600 * 1000;
	p.wait_replicas = n;
	p.wait_ms = ms;
	p.ev = &tevents;
	p.arg = t;
	ck_assert_msg(store_attach(st, &p, err, sizeof(err)) == 0,
	    "store_attach: %s", err);
	return st;
}

/*
 * store-wait: a write is durable only once the replicas hold it; fewer
 * than asked for in time fail the session's writes, none reported
 * durable.
 */
START_TEST(test_wait)
{
	struct srv		 m, rep;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*st, *st2, *fst;
	struct store_sess	*s, *s2, *fs;
	struct tev		 t, t2, ft;
	struct store_params	 p;
	struct tdone		 d;
	char			 buf[64], err[256], url[64];
	int			 nd;

	srv_start(&m);
	srv_start_of(&rep, m.port);
	replicas_online(m.port, 1);

	/* A timeout the command deadline would cut short is refused. */
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", m.port);
	st = store_open(url, "/nonexistent", STORE_FSYNC_NO, err, sizeof(err));
	ck_assert_ptr_nonnull(st);
	memset(&p, 0, sizeof(p));
	p.base = base;
	p.node = "hw/1";
	p.lease_ms = 30000;
	p.retention_ms = 3600 * 1000;
	p.wait_replicas = 1;
	p.wait_ms = 6000;
	p.ev = &tevents;
	p.arg = &t;
	ck_assert_int_eq(store_attach(st, &p, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "WAIT timeout") != NULL, "%s", err);
	store_close(st);

	st = tstore_wait(base, m.port, 1, 1000, &t);
	WAIT(base, t.health == 1, 3000);
	s = topen(base, st, "w", 1, 0, STORE_OWNER);
	tappend(s, "w", 1, 40);
	WAIT(base, t.durable == 40, 5000);
	/* Durable means on the replica, already. */
	c = sconn(rep.port);
	ck_assert_int_eq(sint(c, "XLEN parley:{w}:log"), 40);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{w}:meta last"), "40");
	nd = t.ndurable;
	ck_assert_int_eq(store_meta_write_async(s, "{\"v\":1}", 7), 0);
	WAIT(base, t.ndurable > nd, 3000);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{w}:meta doc"), "{\"v\":1}");
	/* A document write too. */
	memset(&d, 0, sizeof(d));
	store_doc_put(s, "k", "{\"a\":1}", 7, tdone_cb, &d);
	WAIT(base, d.n == 1, 3000);
	ck_assert_int_eq(d.r, 0);
	ck_assert_str_eq(sget(c, buf, sizeof(buf), "HGET parley:{w}:kb k"),
	    "{\"a\":1}");
	ck_assert_int_eq(t.nfailed, 0);
	ck_assert_int_eq(t.durable_back, 0);

	/* Two replicas asked for, one there: the write lands on the master
	 * but is never reported durable; the session fails. */
	st2 = tstore_wait(base, m.port, 2, 100, &t2);
	WAIT(base, t2.health == 1, 3000);
	s2 = topen(base, st2, "w2", 1, 0, STORE_OWNER);
	memset(&d, 0, sizeof(d));
	store_doc_put(s2, "k", "{}", 2, tdone_cb, &d);
	WAIT(base, d.n == 1, 3000);
	ck_assert_int_eq(d.r, -1);
	ck_assert_int_eq(d.err, EIO);
	tappend(s2, "w2", 1, 3);
	WAIT(base, t2.nfailed == 1, 3000);
	ck_assert_int_eq(t2.failed, EIO);
	ck_assert_int_eq(t2.durable, 0);
	ck_assert_int_eq(store_durable_seq(s2), 0);
	ck_assert_int_eq(store_append_async(s2, 1, 1004, "{}", 2), -1);
	ck_assert_int_eq(errno, EPIPE);

	/* A follower (on another store) learns of events once they are
	 * durable, by the notice sent after WAIT. */
	fst = tstore(base, m.port, "hf/2", 30000, &ft);
	WAIT(base, ft.health == 1, 3000);
	fs = topen(base, fst, "w", 0, 3, STORE_FOLLOWER);
	ck_assert_int_eq(store_last_seq(fs), 40);
	tappend(s, "w", 41, 42);
	WAIT(base, t.durable == 42 && ft.grown == 42, 3000);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{w}:meta durable"), "42");

	/* A stopped replica: the same, within the timeout; the follower
	 * never hears of (nor reads) what no replica holds. */
	kill(rep.pid, SIGSTOP);
	tappend(s, "w", 43, 43);
	WAIT(base, t.nfailed == 1, 3000);
	ck_assert_int_eq(t.failed, EIO);
	ck_assert_int_eq(t.durable, 42);
	spin(base, 100);
	ck_assert_int_eq(ft.grown, 42);
	ck_assert_int_eq(store_last_seq(fs), 42);
	kill(rep.pid, SIGCONT);
	store_sess_close(fs);
	store_close(fst);

	store_sess_close(s2);
	store_close(st2);
	store_sess_close(s);
	store_close(st);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&rep);
	srv_stop(&m);
}
END_TEST

/*
 * One WAIT covers every write its connection sent before it: the batches
 * of ten sessions sent in one pass, answered in one read, wait for the
 * replica together (they ride on the first one's WAIT), and each is on
 * the replica once reported durable.  With the replica stopped, that one
 * WAIT fails all ten sessions' writes, none reported durable.
 */
START_TEST(test_wait_shared)
{
	struct srv		 m, rep;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c, *rc;
	struct store		*st;
	struct store_sess	*s[10];
	struct tev		 t;
	char			 id[8], cmd[64];
	int			 i;

	srv_start(&m);
	srv_start_of(&rep, m.port);
	replicas_online(m.port, 1);
	st = tstore_wait(base, m.port, 1, 1000, &t);
	WAIT(base, t.health == 1, 3000);
	for (i = 0; i < 10; i++) {
		snprintf(id, sizeof(id), "ws%d", i);
		s[i] = topen(base, st, id, 1, 0, STORE_OWNER);
	}
	c = sconn(m.port);
	freeReplyObject(scmd(c, "CONFIG RESETSTAT"));
	for (i = 0; i < 10; i++) {
		snprintf(id, sizeof(id), "ws%d", i);
		tappend(s[i], id, 1, 1);
	}
	WAIT(base, t.ndurable >= 10, 5000);
	ck_assert_int_eq(t.nfailed, 0);
	ck_assert_int_eq(cmdcalls(c, "wait"), 1);
	rc = sconn(rep.port);
	for (i = 0; i < 10; i++) {
		snprintf(cmd, sizeof(cmd), "XLEN parley:{ws%d}:log", i);
		ck_assert_int_eq(sint(rc, cmd), 1);
	}
	redisFree(rc);

	kill(rep.pid, SIGSTOP);
	freeReplyObject(scmd(c, "CONFIG RESETSTAT"));
	for (i = 0; i < 10; i++) {
		snprintf(id, sizeof(id), "ws%d", i);
		tappend(s[i], id, 2, 2);
	}
	WAIT(base, t.nfailed == 10, 5000);
	ck_assert_int_eq(t.failed, EIO);
	ck_assert_int_eq(t.ndurable, 10);
	ck_assert_int_eq(t.ndown, 0);
	ck_assert_int_eq(cmdcalls(c, "wait"), 1);
	kill(rep.pid, SIGCONT);
	redisFree(c);
	for (i = 0; i < 10; i++)
		store_sess_close(s[i]);
	store_close(st);
	tbase_free(base, nudge);
	srv_stop(&rep);
	srv_stop(&m);
}
END_TEST

/*
 * WAITs of several sessions queue on the one connection: document writes
 * each have their own (batches share one, test_wait_shared).  With a
 * replica stopped each takes the whole timeout, together longer than the
 * command deadline.  Each write fails (EIO), and the link stays up (it
 * went down, and the leases queued behind lapsed, when a deadline
 * counted from the send rather than from the reply before it).
 */
START_TEST(test_wait_queue)
{
	struct srv		 m, rep;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	struct store		*st;
	struct store_sess	*s[3];
	struct tev		 t;
	struct tdone		 d[3];
	char			 id[8];
	int			 i;

	srv_start(&m);
	srv_start_of(&rep, m.port);
	replicas_online(m.port, 1);
	st = tstore_wait(base, m.port, 1, 600, &t);
	((struct rstore *)st)->deadline_ms = 1000;
	WAIT(base, t.health == 1, 3000);
	for (i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "q%d", i);
		s[i] = topen(base, st, id, 1, 0, STORE_OWNER);
	}
	kill(rep.pid, SIGSTOP);
	memset(d, 0, sizeof(d));
	for (i = 0; i < 3; i++)
		store_doc_put(s[i], "k", "{}", 2, tdone_cb, &d[i]);
	WAIT(base, d[0].n + d[1].n + d[2].n == 3, 6000);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(d[i].r, -1);
		ck_assert_int_eq(d[i].err, EIO);
	}
	ck_assert_int_eq(t.ndown, 0);
	kill(rep.pid, SIGCONT);
	for (i = 0; i < 3; i++)
		store_sess_close(s[i]);
	store_close(st);
	tbase_free(base, nudge);
	srv_stop(&rep);
	srv_stop(&m);
}
END_TEST

/*
 * The log's epochs: a session taken on the master that acknowledged its
 * events keeps its epoch, whether its last owner gave it back or died;
 * after a failover (another replication id), even one given back cleanly
 * (a later owner's whole tenure may be what was lost), the next owner
 * starts one after the last seq; a follower that read into a rewrite
 * fails; at most EPOCH_KEEP are kept.
 */
START_TEST(test_epochs)
{
	struct srv		 r;
	struct event		*nudge;
	struct event_base	*base = tbase(&nudge);
	redisContext		*c;
	struct store		*a, *b;
	struct store_sess	*sa, *sb;
	struct tev		 ta, tb;
	struct epochs		 e;
	char			 buf[EPOCH_TEXT_MAX], ep1[EPOCH_TOKEN_LEN + 1];
	int			 i;

	srv_start(&r);
	c = sconn(r.port);
	a = tstore(base, r.port, "hostA/100", 30000, &ta);
	b = tstore(base, r.port, "hostB/200", 30000, &tb);
	((struct rstore *)b)->poll_ms = 100;
	WAIT(base, ta.health == 1 && tb.health == 1, 3000);

	/* New, closed, reopened: no epoch; the master's id recorded. */
	sa = topen(base, a, "e", 1, 0, STORE_OWNER);
	ck_assert_str_eq(store_epochs(sa), "");
	tappend(sa, "e", 1, 3);
	WAIT(base, ta.durable == 3, 3000);
	store_sess_close(sa);
	spin(base, 50);
	sa = topen(base, a, "e", 0, 0, STORE_OWNER);
	ck_assert_str_eq(store_epochs(sa), "");
	ck_assert_uint_eq(strlen(sget(c, buf, sizeof(buf),
	    "HGET parley:{e}:meta replid")), 40);

	/* The lease lapses (a host died) on the same master: what it
	 * acknowledged is there, the epoch stays. */
	tappend(sa, "e", 4, 4);
	WAIT(base, ta.durable == 4, 3000);
	ck_assert_int_eq(sint(c, "DEL parley:{e}:owner"), 1);
	sb = topen(base, b, "e", 0, 0, STORE_OWNER);
	ck_assert_str_eq(store_epochs(sb), "");
	ck_assert_int_eq(sint(c, "DEL parley:{e}:owner"), 1);
	store_sess_close(sb);
	store_sess_close(sa);

	/* Given back cleanly, then a failover (the data's master changed:
	 * another replication id): the next owner starts one after 4. */
	ck_assert_int_eq(sint(c, "HSET parley:{e}:meta replid 0f0f"), 0);
	sb = topen(base, b, "e", 0, 0, STORE_OWNER);
	ck_assert_int_eq(epoch_parse(&e, store_epochs(sb),
	    strlen(store_epochs(sb))), 0);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_uint_eq(e.v[0].from, 5);
	snprintf(ep1, sizeof(ep1), "%s", e.v[0].token);
	ck_assert_str_eq(sget(c, buf, sizeof(buf),
	    "HGET parley:{e}:meta epochs"), store_epochs(sb));

	/* A follower that has read up to 8. */
	tappend(sb, "e", 5, 8);
	WAIT(base, tb.durable == 8, 3000);
	sa = topen(base, a, "e", 0, 0, STORE_FOLLOWER);
	ck_assert_int_eq(store_last_seq(sa), 8);
	ck_assert_str_eq(store_epochs(sa), store_epochs(sb));

	/* A failover lost 7-8 with their owner: an epoch from 7, and the
	 * follower that read them fails. */
	ck_assert_int_eq(sint(c, "DEL parley:{e}:owner"), 1);
	store_sess_close(sb);
	ck_assert_int_eq(sint(c, "XDEL parley:{e}:log 7-0 8-0"), 2);
	/* The replica never had them: its stream's top is 6. */
	freeReplyObject(scmd(c, "XSETID parley:{e}:log 6-0"));
	ck_assert_int_eq(sint(c, "HSET parley:{e}:meta last 6"), 0);
	ck_assert_int_eq(sint(c, "HSET parley:{e}:meta replid 0f0f"), 0);
	sb = topen(base, b, "e", 0, 0, STORE_OWNER);
	ck_assert_int_eq(epoch_parse(&e, store_epochs(sb),
	    strlen(store_epochs(sb))), 0);
	ck_assert_uint_eq(e.n, 2);
	ck_assert_str_eq(e.v[0].token, ep1);
	ck_assert_uint_eq(e.v[1].from, 7);
	ck_assert_str_ne(e.v[1].token, ep1);
	WAIT(base, ta.nfailed == 1, 3000);
	ck_assert_int_eq(ta.failed, EIO);
	store_sess_close(sa);
	tappend(sb, "e", 7, 9);
	WAIT(base, tb.durable == 9, 3000);
	store_sess_close(sb);

	/* At most EPOCH_KEEP, the newest last. */
	for (i = 0; i < EPOCH_KEEP + 2; i++) {
		ck_assert_int_eq(sint(c, "HSET parley:{e}:meta replid 0f0f"),
		    0);
		sb = topen(base, b, "e", 0, 0, STORE_OWNER);
		store_sess_close(sb);
		spin(base, 20);
	}
	sb = topen(base, b, "e", 0, 0, STORE_OWNER);
	ck_assert_int_eq(epoch_parse(&e, store_epochs(sb),
	    strlen(store_epochs(sb))), 0);
	ck_assert_uint_eq(e.n, EPOCH_KEEP);
	ck_assert_uint_eq(e.v[0].from, 5);	/* folded: ep1's */
	ck_assert_uint_eq(e.v[EPOCH_KEEP - 1].from, 10);
	store_sess_close(sb);

	/* A failover lost a new session's first events (its create
	 * replicated, they did not): last is 0 again, and the next events
	 * take their seqs, so an epoch starts at 1. */
	sa = topen(base, a, "e0", 1, 0, STORE_OWNER);
	tappend(sa, "e0", 1, 3);
	WAIT(base, ta.durable == 3, 3000);
	ck_assert_int_eq(sint(c, "DEL parley:{e0}:owner"), 1);
	store_sess_close(sa);
	ck_assert_int_eq(sint(c, "DEL parley:{e0}:log"), 1);
	ck_assert_int_eq(sint(c, "HSET parley:{e0}:meta last 0"), 0);
	ck_assert_int_eq(sint(c, "HSET parley:{e0}:meta replid 0f0f"), 0);
	sb = topen(base, b, "e0", 0, 0, STORE_OWNER);
	ck_assert_int_eq(epoch_parse(&e, store_epochs(sb),
	    strlen(store_epochs(sb))), 0);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_uint_eq(e.v[0].from, 1);
	store_sess_close(sb);

	/* A failover that lost nothing: the follower has read all there
	 * is, yet it lets the session go, so that its clients resume
	 * below the new epoch and learn it without a RESUME_GAP. */
	sa = topen(base, a, "e2", 1, 0, STORE_OWNER);
	tappend(sa, "e2", 1, 3);
	WAIT(base, ta.durable == 3, 3000);
	sb = topen(base, b, "e2", 0, 3, STORE_FOLLOWER);
	ck_assert_int_eq(store_last_seq(sb), 3);
	i = tb.nfailed;
	ck_assert_int_eq(sint(c, "DEL parley:{e2}:owner"), 1);
	store_sess_close(sa);
	ck_assert_int_eq(sint(c, "HSET parley:{e2}:meta replid 0f0f"), 0);
	sa = topen(base, a, "e2", 0, 0, STORE_OWNER);
	ck_assert_int_eq(epoch_parse(&e, store_epochs(sa),
	    strlen(store_epochs(sa))), 0);
	ck_assert_uint_eq(e.v[0].from, 4);
	WAIT(base, tb.nfailed == i + 1, 3000);
	ck_assert_int_eq(tb.failed, EIO);
	store_sess_close(sb);
	store_sess_close(sa);
	store_close(a);
	store_close(b);
	redisFree(c);
	tbase_free(base, nudge);
	srv_stop(&r);
}
END_TEST

static Suite *
store_redis_ha_suite(void)
{
	Suite	*s = suite_create("store_redis_ha");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_sentinel);
	tcase_add_test(tc, test_sentinel_failover);
	tcase_add_test(tc, test_wait);
	tcase_add_test(tc, test_wait_queue);
	tcase_add_test(tc, test_wait_shared);
	tcase_add_test(tc, test_epochs);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);	/* as parleyd: hiredis writes */
	log_init("test_store_redis_ha", 1, LOG_LEVEL_WARN);
	return check_run(store_redis_ha_suite());
}
