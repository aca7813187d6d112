/*
 * Unit tests for delivery (workers/deliver.c): subscribers fed live by the
 * fan-out, from the recent cache, or from a local store's log, through a
 * fake connection (struct deliver_ops).
 */
#include <sys/stat.h>

#include <check.h>
#include <event2/event.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/deliver.c"
#include "../../workers/evt.c"
#include "check_main.h"

#define NSEQ	64

/* A subscriber's owner as delivery sees it: what it was written. */
struct fake {
	struct deliver_sub	 sub;		/* first: the ops cast back */
	uint64_t		 seqs[NSEQ];
	char			 types[NSEQ][32];
	int			 live[NSEQ];
	int			 n;
	size_t			 queued;
	int			 closing;
	int			 behind;
	int			 closed;
	int			 aborted;
	int			 flushes;	/* flush calls */
	int			 flushed_at[NSEQ]; /* n at each */
	int			 close_at;	/* write of this seq closes */
};

static char		 tdir[64];
static struct config	 conf;
static struct wk	 wk;
static struct store	*st;
static struct store_sess *ss;
static int		 changes;

static int
f_write(struct deliver_sub *sub, struct evt *e, int live)
{
	struct fake *f = (struct fake *)sub;

	ck_assert_int_lt(f->n, NSEQ);
	f->live[f->n] = live;
	memcpy(f->types[f->n], e->type, sizeof(e->type));
	f->seqs[f->n++] = e->seq;
	sub->next_seq = e->seq + 1;
	if (f->close_at != 0 && e->seq == (uint64_t)f->close_at) {
		f->closing = 1;
		return 1;
	}
	return 0;
}

static void
f_flush(struct deliver_sub *sub)
{
	struct fake *f = (struct fake *)sub;

	ck_assert_int_lt(f->flushes, NSEQ);
	f->flushed_at[f->flushes++] = f->n;
}

static size_t
f_queued(struct deliver_sub *sub)
{
	return ((struct fake *)sub)->queued;
}

static int
f_closing(struct deliver_sub *sub)
{
	return ((struct fake *)sub)->closing;
}

static void
f_behind(struct deliver_sub *sub)
{
	((struct fake *)sub)->behind++;
}

static void
f_gap(struct deliver_sub *sub, uint64_t first, uint64_t last)
{
	(void)sub;
	(void)first;
	(void)last;
}

static void
f_close(struct deliver_sub *sub, uint16_t code, const char *why)
{
	(void)code;
	(void)why;
	((struct fake *)sub)->closed++;
	((struct fake *)sub)->closing = 1;
}

static void
f_abort(struct deliver_sub *sub)
{
	((struct fake *)sub)->aborted++;
}

static const struct deliver_ops fops = {
	f_write, f_queued, f_closing, f_behind, f_gap, f_close, f_abort, NULL,
	f_flush
};

static void
changed(void *arg)
{
	(void)arg;
	changes++;
}

static const char *
ev_json(uint64_t seq, char *buf, size_t len)
{
	snprintf(buf, len, "{\"v\":1,\"type\":\"token\",\"seq\":%llu}",
	    (unsigned long long)seq);
	return buf;
}

/* Appends seqs from..to to the store's log, as a session does. */
static void
append(uint64_t from, uint64_t to)
{
	char j[96];
	uint64_t q;

	for (q = from; q <= to; q++) {
		ev_json(q, j, sizeof(j));
		ck_assert_int_eq(store_append(ss, q, 1000 * q, j, strlen(j)),
		    0);
	}
}

static void
fake_init(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	deliver_sub_init(&f->sub, &wk, &fops, "0000000000000001");
}

static void
setup(void)
{
	char err[256];

	snprintf(tdir, sizeof(tdir), "/tmp/test_deliver.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	st = store_open("local", tdir, STORE_FSYNC_NO, err, sizeof(err));
	ck_assert_msg(st != NULL, "store_open: %s", err);
	ck_assert_int_eq(store_sess_open(st, "s1", 1, &ss), 0);
	memset(&conf, 0, sizeof(conf));
	conf.max_output_buffer = 1000;
	memset(&wk, 0, sizeof(wk));
	wk.conf = &conf;
	wk.base = event_base_new();
	wk.read_ev = event_new(wk.base, -1, 0, deliver_read_wake_cb, &wk);
	TAILQ_INIT(&wk.read_wait);
	metrics_init(&wk.metrics);
	changes = 0;
}

static void
teardown(void)
{
	store_sess_close(ss);
	store_close(st);
	event_free(wk.read_ev);
	event_base_free(wk.base);
	check_rmtree(tdir);
}

/* Durable events go live to subscribers level with the log, in order. */
START_TEST(test_fan_out_live)
{
	struct deliver d;
	struct fake a, b;
	struct evt *e;
	char j[96];
	uint64_t q;

	deliver_init(&d, "s1", changed, NULL);
	d.st = ss;
	fake_init(&a);
	fake_init(&b);
	deliver_subscribe(&d, &a.sub);
	deliver_subscribe(&d, &b.sub);
	ck_assert_int_eq(changes, 2);
	ck_assert_uint_eq(d.nsubs, 2);
	a.sub.live = b.sub.live = 1;
	a.sub.next_seq = b.sub.next_seq = 1;
	b.sub.hold = 1;		/* waits for its first message: skipped */
	for (q = 1; q <= 3; q++) {
		append(q, q);
		ck_assert_ptr_nonnull(e = evt_new(q, ev_json(q, j, sizeof(j)),
		    strlen(j)));
		deliver_fan_out(&d, e, 1);
		evt_unref(e);
	}
	ck_assert_uint_eq(deliver_last(&d), 3);
	ck_assert_int_eq(a.n, 3);
	ck_assert_uint_eq(a.seqs[2], 3);
	ck_assert_int_eq(a.live[0], 1);
	ck_assert_int_eq(b.n, 0);
	/* Two subscribers or more: the events stay shared for catch-up. */
	ck_assert_ptr_nonnull(recent_get(&d, 2));
	deliver_unsubscribe(&b.sub);
	ck_assert_ptr_null(b.sub.feed);
	ck_assert_ptr_null(recent_get(&d, 2));
	deliver_unsubscribe(&b.sub);	/* again: nothing */
	ck_assert_uint_eq(d.nsubs, 1);
	deliver_unsubscribe(&a.sub);
	deliver_free(&d);
}
END_TEST

/*
 * A run of durable events goes to each subscriber whole, then its flush;
 * one closed by a write gets neither the rest nor a flush (it may be
 * gone); one past its bound stops and is flushed.
 */
START_TEST(test_fan_out_run)
{
	struct deliver d;
	struct fake a, b, c;
	struct evt *e[4];
	char j[96];
	uint64_t q;

	deliver_init(&d, "s1", changed, NULL);
	d.st = ss;
	fake_init(&a);
	fake_init(&b);
	fake_init(&c);
	deliver_subscribe(&d, &a.sub);
	deliver_subscribe(&d, &b.sub);
	deliver_subscribe(&d, &c.sub);
	a.sub.live = b.sub.live = c.sub.live = 1;
	a.sub.next_seq = b.sub.next_seq = 1;
	c.sub.next_seq = 3;	/* a follower's view that lags: 1, 2 sent */
	b.close_at = 2;
	append(1, 4);
	for (q = 1; q <= 4; q++) {
		ck_assert_ptr_nonnull(e[q - 1] = evt_new(q,
		    ev_json(q, j, sizeof(j)), strlen(j)));
		if (q > 1)
			e[q - 2]->next = e[q - 1];
	}
	deliver_fan_out(&d, e[0], 4);
	ck_assert_uint_eq(deliver_last(&d), 4);
	ck_assert_int_eq(a.n, 4);
	ck_assert_uint_eq(a.seqs[3], 4);
	ck_assert_int_eq(a.flushes, 1);
	ck_assert_int_eq(a.flushed_at[0], 4);
	ck_assert_int_eq(b.n, 2);
	ck_assert_int_eq(b.flushes, 0);
	ck_assert_int_eq(c.n, 2);
	ck_assert_uint_eq(c.seqs[0], 3);
	ck_assert_int_eq(c.flushes, 1);
	for (q = 0; q < 4; q++) {
		e[q]->next = NULL;
		evt_unref(e[q]);
	}
	deliver_unsubscribe(&a.sub);
	deliver_unsubscribe(&b.sub);
	deliver_unsubscribe(&c.sub);
	deliver_free(&d);
}
END_TEST

/* A resume is fed from the log until level, then goes live. */
START_TEST(test_catch_up_from_log)
{
	struct deliver d;
	struct fake a;

	deliver_init(&d, "s1", changed, NULL);
	d.st = ss;
	append(1, 5);
	deliver_set_last(&d, 5);
	fake_init(&a);
	deliver_subscribe(&d, &a.sub);
	a.sub.next_seq = 3;
	deliver_replay_begin(&a.sub);
	deliver_pump(&a.sub);
	ck_assert_int_eq(a.n, 3);
	ck_assert_uint_eq(a.seqs[0], 3);
	ck_assert_uint_eq(a.seqs[2], 5);
	ck_assert_int_eq(a.live[0], 0);
	ck_assert_int_eq(a.sub.live, 1);
	ck_assert_int_eq(a.sub.replaying, 0);
	ck_assert_uint_eq(wk.metrics.replays, 1);
	deliver_unsubscribe(&a.sub);
	deliver_free(&d);
}
END_TEST

/* A slow subscriber drops off the live feed; its owner resumes it. */
START_TEST(test_slow_drops_to_log)
{
	struct deliver d;
	struct fake a;
	struct evt *e;
	char j[96];

	deliver_init(&d, "s1", changed, NULL);
	d.st = ss;
	fake_init(&a);
	deliver_subscribe(&d, &a.sub);
	a.sub.live = 1;
	a.sub.next_seq = 1;
	a.queued = conf.max_output_buffer;	/* over its bound */
	append(1, 1);
	ck_assert_ptr_nonnull(e = evt_new(1, ev_json(1, j, sizeof(j)),
	    strlen(j)));
	deliver_fan_out(&d, e, 1);
	evt_unref(e);
	ck_assert_int_eq(a.n, 0);
	ck_assert_int_eq(a.sub.live, 0);
	ck_assert_int_eq(a.behind, 1);
	ck_assert_uint_eq(wk.metrics.slow_catchups, 1);
	/* Drained: the write callback pumps, from the log. */
	a.queued = 0;
	deliver_pump(&a.sub);
	ck_assert_int_eq(a.n, 1);
	ck_assert_int_eq(a.live[0], 0);
	ck_assert_int_eq(a.sub.live, 1);
	deliver_unsubscribe(&a.sub);
	deliver_free(&d);
}
END_TEST

/* Closing the feed unsubscribes everyone, then closes them. */
START_TEST(test_close_all)
{
	struct deliver d;
	struct fake a, b;

	deliver_init(&d, "s1", changed, NULL);
	d.st = ss;
	fake_init(&a);
	fake_init(&b);
	deliver_subscribe(&d, &a.sub);
	deliver_subscribe(&d, &b.sub);
	deliver_close_all(&d, 1001, "moved");
	ck_assert_uint_eq(d.nsubs, 0);
	ck_assert_int_eq(a.closed, 1);
	ck_assert_int_eq(b.closed, 1);
	ck_assert_ptr_null(a.sub.feed);
	deliver_free(&d);
	ck_assert_int_eq(a.aborted, 0);
}
END_TEST

/* A GET .../log read sees only what subscribers may: durable events. */
struct page {
	struct deliver_sub	*sub;
	int			 n;
	int			 done;
	ssize_t			 result;
};

static int
page_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	(void)seq;
	(void)ts;
	(void)json;
	(void)len;
	((struct page *)arg)->n++;
	return 0;
}

static void
page_done(void *arg, ssize_t n)
{
	struct page *p = arg;

	p->done = 1;
	p->result = n;
	if (p->sub->ranging)
		p->sub->ranging = 2;	/* answered inside the call */
}

START_TEST(test_read_bounded)
{
	struct deliver d;
	struct fake a;
	struct page p;

	deliver_init(&d, "s1", changed, NULL);
	d.st = ss;
	append(1, 4);
	deliver_set_last(&d, 2);
	fake_init(&a);
	memset(&p, 0, sizeof(p));
	p.sub = &a.sub;
	deliver_read(&a.sub, &d, 0, 100, page_cb, page_done, &p);
	ck_assert_int_eq(p.done, 1);
	ck_assert_int_eq(p.n, 2);
	ck_assert_ptr_null(a.sub.range);
	ck_assert(TAILQ_EMPTY(&d.readers));
	memset(&p, 0, sizeof(p));
	p.sub = &a.sub;
	deliver_read(&a.sub, &d, 2, 100, page_cb, page_done, &p);
	ck_assert_int_eq(p.done, 1);
	ck_assert_int_eq(p.n, 0);
	deliver_sub_end(&a.sub);
	deliver_free(&d);
}
END_TEST

/* The other form of a scoped event observers get (the view's job). */
#define FILTERED	"{\"v\":1,\"type\":\"filtered\"}"
static struct evt *v_other;

static struct evt *
f_view(void *owner, const struct deliver_sub *sub, struct evt *e)
{
	(void)owner;
	if (sub->role != 1)
		return e;
	evt_unref(v_other);
	v_other = evt_new(e->seq, FILTERED, strlen(FILTERED));
	return v_other;
}

/* Appends and fans out seq as a thought (scoped) or a token. */
static void
fan(struct deliver *d, uint64_t seq, int thought)
{
	char j[96];
	struct evt *e;

	if (thought)
		snprintf(j, sizeof(j), "{\"v\":1,\"type\":\"thought\","
		    "\"seq\":%llu}", (unsigned long long)seq);
	else
		ev_json(seq, j, sizeof(j));
	ck_assert_int_eq(store_append(ss, seq, 1000 * seq, j, strlen(j)), 0);
	ck_assert_ptr_nonnull(e = evt_new(seq, j, strlen(j)));
	ck_assert_int_eq(e->scoped, thought);
	deliver_fan_out(d, e, 1);
	evt_unref(e);
}

/*
 * A scoped event goes to each subscriber as the feed's view says; one
 * whose output holds thought-queue-depth events gets it later, in order,
 * once its output drained (never dropped); others are not held back.
 */
START_TEST(test_scoped_view_and_delay)
{
	struct deliver d;
	struct fake a, b;

	conf.thought_queue_depth = 2;
	deliver_init(&d, "s1", changed, NULL);
	d.st = ss;
	d.view = f_view;
	fake_init(&a);
	fake_init(&b);
	a.sub.role = 4;		/* admin */
	b.sub.role = 1;		/* observer */
	deliver_subscribe(&d, &a.sub);
	deliver_subscribe(&d, &b.sub);
	a.sub.live = b.sub.live = 1;
	a.sub.next_seq = b.sub.next_seq = 1;
	fan(&d, 1, 0);
	fan(&d, 2, 1);
	ck_assert_int_eq(a.n, 2);
	ck_assert_int_eq(b.n, 2);
	ck_assert_str_eq(a.types[1], "thought");
	ck_assert_str_eq(b.types[1], "filtered");
	ck_assert_uint_eq(b.seqs[1], 2);
	ck_assert_int_eq(b.live[1], 1);
	/* b's output fills: tokens still flow, the thought waits */
	b.queued = 10;
	fan(&d, 3, 0);
	fan(&d, 4, 0);
	fan(&d, 5, 1);
	fan(&d, 6, 0);
	ck_assert_int_eq(a.n, 6);
	ck_assert_int_eq(b.n, 4);
	ck_assert_uint_eq(b.seqs[3], 4);
	ck_assert_int_eq(b.sub.live, 0);
	ck_assert_int_ge(b.behind, 1);
	/* still full: the pump keeps it waiting */
	deliver_pump(&b.sub);
	ck_assert_int_eq(b.n, 4);
	/* drained: the rest in order, the thought as b may see it */
	b.queued = 0;
	deliver_pump(&b.sub);
	ck_assert_int_eq(b.n, 6);
	ck_assert_uint_eq(b.seqs[4], 5);
	ck_assert_str_eq(b.types[4], "filtered");
	ck_assert_uint_eq(b.seqs[5], 6);
	ck_assert_int_eq(b.sub.live, 1);
	deliver_unsubscribe(&a.sub);
	/* one subscriber: no cache, the log path applies the view too */
	b.queued = 10;
	b.sub.depth = 5;
	fan(&d, 7, 1);
	ck_assert_int_eq(b.n, 6);
	b.queued = 0;
	deliver_pump(&b.sub);
	ck_assert_int_eq(b.n, 7);
	ck_assert_str_eq(b.types[6], "filtered");
	ck_assert_uint_eq(b.seqs[6], 7);
	deliver_unsubscribe(&b.sub);
	deliver_free(&d);
	evt_unref(v_other);
	v_other = NULL;
}
END_TEST

static Suite *
deliver_suite(void)
{
	Suite *s = suite_create("deliver");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fan_out_live);
	tcase_add_test(tc, test_fan_out_run);
	tcase_add_test(tc, test_catch_up_from_log);
	tcase_add_test(tc, test_slow_drops_to_log);
	tcase_add_test(tc, test_close_all);
	tcase_add_test(tc, test_read_bounded);
	tcase_add_test(tc, test_scoped_view_and_delay);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(deliver_suite());
}
