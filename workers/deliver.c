/*
 * Delivery.  A subscriber is a cursor: the next seq it needs.  One that
 * keeps up is handed each event as its session fans it out (the shared
 * encoded event); one that falls behind, or resumes, is fed from the
 * session's recent events or its log until it is level again.  Sessions
 * notify (deliver_fan_out); connections frame and write (struct
 * deliver_ops); neither reaches into the other.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/store.h"
#include "parley/ws.h"
#include "deliver.h"
#include "evt.h"
#include "wk.h"

#define PUMP_BATCH	256
/*
 * Catch-up reads of a shared store in flight per worker.  They share the
 * store's connection with lease renewals and appends, whose replies wait
 * behind theirs: 5,000 observers falling behind a fast turn at once kept
 * a renewal's answer back past the lease, and the worker let the
 * session go.  The others wait their turn (wk->read_wait).
 */
#define PUMP_READS	16

/*
 * Events a session with observers keeps for those that fall behind.  Read
 * back from the store, each client got a copy of every event it caught up
 * on (JSON and frame): 5,000 observers behind a fast turn took a worker to
 * 3.7 GB and stalled it in page faults past its lease.  At most
 * DELIVER_RECENT events and DELIVER_RECENT_BYTES of their JSON; kept only
 * while the session has two subscribers or more.
 */
#define DELIVER_RECENT		1024
#define DELIVER_RECENT_BYTES	(1024 * 1024)

static void	pump(struct deliver_sub *, int woken);

void
deliver_init(struct deliver *d, const char *id, void (*changed)(void *),
    void *owner)
{
	memset(d, 0, sizeof(*d));
	TAILQ_INIT(&d->subs);
	TAILQ_INIT(&d->readers);
	d->id = id;
	d->changed = changed;
	d->owner = owner;
}

void
deliver_sub_init(struct deliver_sub *sub, struct wk *wk,
    const struct deliver_ops *ops, const char *reqid)
{
	memset(sub, 0, sizeof(*sub));
	sub->wk = wk;
	sub->ops = ops;
	sub->reqid = reqid;
}

/* --- the recent cache --- */

static void
recent_drop_oldest(struct deliver *d)
{
	struct evt **slot = &d->recent[d->recent_lo % DELIVER_RECENT];

	if (*slot != NULL) {
		d->recent_bytes -= (*slot)->len;
		evt_unref(*slot);
		*slot = NULL;
	}
	d->recent_lo++;
}

static void
recent_put(struct deliver *d, struct evt *e)
{
	struct evt **slot;

	if (d->recent == NULL) {
		/* A session alone with its client keeps none. */
		if (d->nsubs < 2 ||
		    (d->recent = calloc(DELIVER_RECENT, sizeof(*d->recent))) ==
		    NULL)
			return;
	}
	if (d->recent_hi != 0 && e->seq != d->recent_hi + 1) {
		/* A gap or a repeat (a follower's view, a promotion). */
		while (d->recent_lo <= d->recent_hi)
			recent_drop_oldest(d);
		d->recent_hi = 0;
	}
	if (d->recent_hi == 0)
		d->recent_lo = e->seq;
	while (d->recent_hi != 0 && (e->seq - d->recent_lo >= DELIVER_RECENT ||
	    d->recent_bytes + e->len > DELIVER_RECENT_BYTES) &&
	    d->recent_lo <= d->recent_hi)
		recent_drop_oldest(d);
	slot = &d->recent[e->seq % DELIVER_RECENT];
	e->refs++;
	*slot = e;
	d->recent_bytes += e->len;
	d->recent_hi = e->seq;
}

/* The event seq when the cache holds it, borrowed; else NULL. */
static struct evt *
recent_get(struct deliver *d, uint64_t seq)
{
	struct evt *e;

	if (d->recent == NULL || d->recent_hi == 0 || seq < d->recent_lo ||
	    seq > d->recent_hi)
		return NULL;
	e = d->recent[seq % DELIVER_RECENT];
	return e != NULL && e->seq == seq ? e : NULL;
}

static void
recent_free(struct deliver *d)
{
	size_t i;

	if (d->recent == NULL)
		return;
	for (i = 0; i < DELIVER_RECENT; i++)
		evt_unref(d->recent[i]);
	free(d->recent);
	d->recent = NULL;
	d->recent_hi = 0;
	d->recent_bytes = 0;
}

/* --- subscribers --- */

void
deliver_subscribe(struct deliver *d, struct deliver_sub *sub)
{
	TAILQ_INSERT_TAIL(&d->subs, sub, entry);
	d->nsubs++;
	d->ndash += sub->dash != 0;
	sub->feed = d;
	d->changed(d->owner);
}

void
deliver_unsubscribe(struct deliver_sub *sub)
{
	struct deliver *d = sub->feed;

	if (d == NULL)
		return;
	TAILQ_REMOVE(&d->subs, sub, entry);
	d->nsubs--;
	d->ndash -= sub->dash != 0;
	sub->feed = NULL;
	if (d->nsubs < 2)
		recent_free(d);
	d->changed(d->owner);
}

void
deliver_close_all(struct deliver *d, uint16_t code, const char *why)
{
	struct deliver_sub *sub;

	while ((sub = TAILQ_FIRST(&d->subs)) != NULL) {
		deliver_unsubscribe(sub);
		sub->ops->close(sub, code, why);
	}
}

void
deliver_free(struct deliver *d)
{
	struct deliver_sub *sub;

	/* Reads of this log must not outlive its store handle. */
	while ((sub = TAILQ_FIRST(&d->readers)) != NULL) {
		deliver_read_cancel(sub);
		sub->ops->abort(sub);
	}
	recent_free(d);
}

void
deliver_sub_end(struct deliver_sub *sub)
{
	deliver_read_cancel(sub);
	if (sub->read_waiting) {
		TAILQ_REMOVE(&sub->wk->read_wait, sub, rwentry);
		sub->read_waiting = 0;
	}
}

uint64_t
deliver_last(const struct deliver *d)
{
	return d->last;
}

void
deliver_set_last(struct deliver *d, uint64_t seq)
{
	d->last = seq;
}

uint64_t
deliver_first(const struct deliver *d)
{
	return store_first_seq(d->st);
}

void
deliver_replay_begin(struct deliver_sub *sub)
{
	sub->wk->metrics.replays++;
	sub->replaying = 1;
	sub->replay_n = 0;
}

void
deliver_replay_end(struct deliver_sub *sub)
{
	if (!sub->replaying)
		return;
	sub->replaying = 0;
	metrics_observe(&sub->wk->metrics.replay_events, MSC_COUNT,
	    (double)sub->replay_n);
}

/* --- per-recipient views --- */

/* e as sub's reader may see it (d->view), or NULL when none was made. */
static struct evt *
viewed(struct deliver *d, const struct deliver_sub *sub, struct evt *e)
{
	return e->scoped && d->view != NULL ? d->view(d->owner, sub, e) : e;
}

/*
 * Whether a scoped event waits before it goes to sub: its output holds
 * thought-queue-depth events or more (written since the output was last
 * seen empty).  Delayed, never dropped: it goes out from the cache or
 * the log, in order, once the write callback finds the output drained.
 */
static int
deep(struct deliver_sub *sub)
{
	if (sub->ops->queued(sub) == 0) {
		sub->depth = 0;
		return 0;
	}
	return sub->depth >= sub->wk->conf->thought_queue_depth;
}

void
deliver_notify(struct deliver *d, const char *agent, const char *json)
{
	struct deliver_sub *sub;

	TAILQ_FOREACH(sub, &d->subs, entry)
		if (sub->ops->notice != NULL && sub->agent != NULL &&
		    agent[0] != '\0' && strcmp(sub->agent, agent) == 0 &&
		    !sub->ops->closing(sub))
			sub->ops->notice(sub, json);
}

/* --- live --- */

/* What push did with an event: sub takes the next one, takes no more of
 * this fan-out, or may be gone (closed by the write, or by the pump). */
#define PUSH_MORE	0
#define PUSH_STOP	1
#define PUSH_GONE	2

/* One fanned-out event for sub: written, or sub drops back to the log. */
static int
push(struct deliver_sub *sub, struct evt *e)
{
	size_t bound = sub->wk->conf->max_output_buffer, q;
	struct evt *v;

	if (sub->ops->closing(sub) || sub->hold || !sub->live)
		return PUSH_STOP;
	if (e->seq < sub->next_seq)
		return PUSH_MORE;	/* (already sent: a follower's view
					   can lag) */
	if ((q = sub->ops->queued(sub)) == 0)
		sub->depth = 0;
	/* A thought it may not see, or that waits, takes the log path. */
	if (e->seq == sub->next_seq && q < bound &&
	    (!e->scoped || !deep(sub)) &&
	    (v = viewed(sub->feed, sub, e)) != NULL) {
		sub->depth++;
		return sub->ops->write(sub, v, 1) ? PUSH_GONE : PUSH_MORE;
	}
	if (sub->ops->queued(sub) >= bound)
		sub->wk->metrics.slow_catchups++;
	log_rdebug(sub->reqid, sub->feed->id, "off live feed at seq %llu "
	    "(expected %llu, %zu bytes queued)", (unsigned long long)e->seq,
	    (unsigned long long)sub->next_seq, sub->ops->queued(sub));
	/* Slow, or it missed one: the log has everything, in order.  The
	 * write callback resumes it once its output drains. */
	sub->live = 0;
	sub->ops->behind(sub);
	if (sub->ops->queued(sub) >= bound)
		return PUSH_STOP;
	deliver_pump(sub);	/* may free sub */
	return PUSH_GONE;
}

/*
 * Subscriber by subscriber, not event by event: a run of events touches
 * each connection once, while it is in the cache, and its frames go out
 * together (ops->flush).
 */
void
deliver_fan_out(struct deliver *d, struct evt *first, size_t n)
{
	struct deliver_sub *sub, *next;
	struct evt *e;
	size_t i;
	int r;

	for (i = 0, e = first; i < n; i++, e = e->next) {
		recent_put(d, e);
		if (e->seq > d->last)
			d->last = e->seq;
		if (d->tap != NULL)
			d->tap(d->tap_arg, e);
	}
	for (sub = TAILQ_FIRST(&d->subs); sub != NULL; sub = next) {
		next = TAILQ_NEXT(sub, entry);
		r = PUSH_MORE;
		for (i = 0, e = first; i < n && r == PUSH_MORE; i++, e = e->next)
			r = push(sub, e);
		if (r != PUSH_GONE && sub->ops->flush != NULL)
			sub->ops->flush(sub);
	}
}

void
deliver_pump_all(struct deliver *d)
{
	struct deliver_sub *sub, *next;

	for (sub = TAILQ_FIRST(&d->subs); sub != NULL; sub = next) {
		next = TAILQ_NEXT(sub, entry);
		deliver_pump(sub);	/* may free sub */
	}
}

/* --- catching up from the log --- */

void
deliver_read_end(struct deliver_sub *sub)
{
	struct wk *wk = sub->wk;

	sub->range = NULL;
	if (sub->range_feed != NULL)
		TAILQ_REMOVE(&sub->range_feed->readers, sub, rentry);
	sub->range_feed = NULL;
	if (sub->pump_read) {
		sub->pump_read = 0;
		wk->pump_reads--;
		if (!TAILQ_EMPTY(&wk->read_wait))
			event_active(wk->read_ev, EV_TIMEOUT, 1);
	}
}

void
deliver_read_cancel(struct deliver_sub *sub)
{
	store_req_cancel(sub->range);
	deliver_read_end(sub);
}

/* Records a read under way (not answered inside the call). */
static void
reading(struct deliver_sub *sub, struct deliver *d, struct store_req *req)
{
	sub->range = req;
	sub->range_feed = d;
	TAILQ_INSERT_TAIL(&d->readers, sub, rentry);
}

/* A record deliver_read gives its caller as sub's reader may see it. */
static int
read_view_cb(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct deliver_sub *sub = arg;
	struct evt *e, *v;
	int r;

	if (sub->read_feed->view == NULL || !evt_json_scoped(json, len))
		return sub->read_cb(sub->read_arg, seq, ts, json, len);
	/* Stopped short of a thought it could not be shown: the caller's
	 * page ends before it. */
	if ((e = evt_new(seq, json, len)) == NULL ||
	    (v = viewed(sub->read_feed, sub, e)) == NULL) {
		evt_unref(e);
		return 1;
	}
	r = sub->read_cb(sub->read_arg, seq, ts, v->json, v->len);
	evt_unref(e);
	return r;
}

static void
read_view_done(void *arg, ssize_t n)
{
	struct deliver_sub *sub = arg;

	sub->read_done(sub->read_arg, n);
}

void
deliver_read(struct deliver_sub *sub, struct deliver *d, uint64_t after,
    size_t limit, int (*cb)(void *, uint64_t, uint64_t, const char *, size_t),
    void (*done)(void *, ssize_t), void *arg)
{
	struct store_req *req;

	sub->read_cb = cb;
	sub->read_done = done;
	sub->read_arg = arg;
	sub->read_feed = d;
	sub->ranging = 1;
	if (after >= d->last) {
		/* Only what subscribers may see: durable events. */
		done(arg, 0);
		req = NULL;
	} else {
		if (limit > d->last - after)
			limit = (size_t)(d->last - after);
		req = store_range_async(d->st, after, limit, read_view_cb,
		    read_view_done, sub);
	}
	if (sub->ranging == 1)
		reading(sub, d, req);
	sub->ranging = 0;
}

/* Pumps the subscribers waiting for a catch-up read, as reads end. */
void
deliver_read_wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct wk *wk = arg;
	struct deliver_sub *sub;

	(void)fd;
	(void)ev;
	while (wk->pump_reads < PUMP_READS &&
	    (sub = TAILQ_FIRST(&wk->read_wait)) != NULL) {
		TAILQ_REMOVE(&wk->read_wait, sub, rwentry);
		sub->read_waiting = 0;
		pump(sub, 1);	/* may free sub */
	}
}

static int
pump_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct deliver_sub *sub = arg;
	struct evt *e, *v;

	if (seq != sub->next_seq || sub->feed == NULL)
		return 1;
	if ((e = evt_new(seq, json, len)) == NULL)
		return 1;
	if (e->scoped && deep(sub)) {
		sub->delayed = 1;
		evt_unref(e);
		return 1;
	}
	if ((v = viewed(sub->feed, sub, e)) != NULL) {
		sub->depth++;
		sub->ops->write(sub, v, 0);
	}
	evt_unref(e);
	return v == NULL || sub->ops->closing(sub);
}

static void
pump_done(void *arg, ssize_t n)
{
	struct deliver_sub *sub = arg;
	const char *sid = sub->range_feed != NULL ? sub->range_feed->id : NULL;

	deliver_read_end(sub);
	if (sub->ranging) {
		/* Answered inside the call: pump goes on. */
		sub->ranging = 2 + (n <= 0 && !sub->delayed);
		return;
	}
	if (sub->delayed) {
		/* Its write callback pumps it once the output drained. */
		sub->delayed = 0;
		sub->ops->behind(sub);
		return;
	}
	if (n <= 0) {
		sub->wk->metrics.store_errors++;
		log_rwarnx(sub->reqid, sid, "cannot read seq %llu for the "
		    "client; closing it", (unsigned long long)sub->next_seq);
		deliver_unsubscribe(sub);
		/* may free sub */
		sub->ops->close(sub, WS_CLOSE_INTERNAL, "log unreadable");
		return;
	}
	deliver_pump(sub);
}

void
deliver_pump(struct deliver_sub *sub)
{
	pump(sub, 0);
}

/* deliver_pump; woken: it is this subscriber's turn for a catch-up read. */
static void
pump(struct deliver_sub *sub, int woken)
{
	struct deliver *d = sub->feed;
	struct wk *wk = sub->wk;
	size_t bound = wk->conf->max_output_buffer;
	uint64_t before;
	int n;

	if (d == NULL || sub->hold || sub->ops->closing(sub) ||
	    sub->range != NULL)
		return;
	while (!sub->ops->closing(sub) && sub->next_seq <= d->last &&
	    sub->ops->queued(sub) < bound) {
		struct evt *e, *v;

		if (sub->next_seq < deliver_first(d)) {
			/* Trimmed while this client was catching up. */
			sub->ops->gap(sub, deliver_first(d), sub->next_seq - 1);
			sub->next_seq = deliver_first(d);
		}
		/* Recent ones are shared, not read back and copied. */
		if ((e = recent_get(d, sub->next_seq)) != NULL) {
			if (e->scoped && deep(sub)) {
				sub->ops->behind(sub);
				return;
			}
			before = sub->next_seq;
			if ((v = viewed(d, sub, e)) != NULL) {
				sub->depth++;
				sub->ops->write(sub, v, 0);
			}
			if (sub->next_seq == before &&
			    !sub->ops->closing(sub)) {
				/* Not even its framing could be made. */
				deliver_unsubscribe(sub);
				sub->ops->close(sub, WS_CLOSE_INTERNAL,
				    "out of memory");	/* may free sub */
				return;
			}
			continue;
		}
		before = sub->next_seq;
		n = store_range(d->st, sub->next_seq - 1, PUMP_BATCH, pump_cb,
		    sub);
		if (n < 0 && errno == EAGAIN) {
			struct store_req *req;

			/* In turn: one that just read queues behind the
			 * waiting ones. */
			if (wk->pump_reads >= PUMP_READS ||
			    (!TAILQ_EMPTY(&wk->read_wait) && !woken)) {
				if (!sub->read_waiting) {
					TAILQ_INSERT_TAIL(&wk->read_wait, sub,
					    rwentry);
					sub->read_waiting = 1;
				}
				return;
			}
			/* Not at hand (a shared store): read it, then go on. */
			sub->ranging = 1;
			req = store_range_async(d->st, sub->next_seq - 1,
			    PUMP_BATCH, pump_cb, pump_done, sub);
			if (sub->ranging == 1) {
				sub->ranging = 0;
				reading(sub, d, req);
				sub->pump_read = 1;
				wk->pump_reads++;
				return;
			}
			n = sub->ranging == 3 ? -1 : 1;
			sub->ranging = 0;
		}
		if (sub->delayed) {
			sub->delayed = 0;
			sub->ops->behind(sub);
			return;
		}
		if (n < 0 || sub->next_seq == before) {
			log_warnx("session %s: cannot read seq %llu for a "
			    "client; closing it", d->id,
			    (unsigned long long)sub->next_seq);
			deliver_unsubscribe(sub);
			sub->ops->close(sub, WS_CLOSE_INTERNAL,
			    "log unreadable");
			return;
		}
	}
	if (!sub->ops->closing(sub) && sub->next_seq > d->last) {
		sub->live = 1;
		deliver_replay_end(sub);
	}
}
