/*
 * Dashboards.  A dashboard is a stream of the session (route.c opens it
 * like /stream, resumable with ?lastSeq=) that reads as an observer, so
 * delivery filters it as one and input refuses its writes, and that gets
 * a metrics event, not logged and without seq: once at connect and every
 * dashboard-interval.  The timer and the counts of the last minute exist
 * only while a session has a dashboard: a session gets its struct dash
 * with its first dashboard and loses it with its last (dash_changed, on
 * every change of subscribers), so sessions nobody watches pay nothing.
 *
 * The metrics body (dash_body) reads meta, which the other parts keep:
 * "agents" (with a per-agent "usage" or "status" when they keep one),
 * "usage", "turn", "queue", "waiting" (a pending request per entry, by
 * "kind") and "actions".  A new kind of pending request is counted under
 * its kind's name without a change here.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/proto.h"
#include "parley/util.h"
#include "conn.h"
#include "dash.h"
#include "deliver.h"
#include "evt.h"
#include "sess.h"
#include "wk.h"

#define DASH_WINDOW	60	/* seconds counted for the per-minute rates */

struct dash {
	struct sess	*s;
	struct event	*ev;		/* the metrics timer */
	uint64_t	 since_ms;	/* counting since (monotonic) */
	struct dash_sec {
		uint64_t	 sec;	/* monotonic second it counts */
		unsigned	 thoughts;
		unsigned	 events;
	}		 secs[DASH_WINDOW];
};

static struct conn *
sub_conn(struct deliver_sub *sub)
{
	return (struct conn *)(void *)((char *)sub -
	    offsetof(struct conn, sub));
}

/* Every event the session fans out (deliver's tap): counted. */
static void
dash_tap(void *arg, const struct evt *e)
{
	struct dash *d = arg;
	uint64_t sec = util_mono_ms() / 1000;
	struct dash_sec *b = &d->secs[sec % DASH_WINDOW];

	if (b->sec != sec) {
		b->sec = sec;
		b->thoughts = b->events = 0;
	}
	b->events++;
	if (strcmp(e->type, "thought") == 0)
		b->thoughts++;
}

/* Keeps the DASH_SLOWEST subscribers furthest behind, most first. */
static void
slow_keep(struct dash_stats *st, const struct deliver_sub *sub, size_t bytes,
    uint64_t behind)
{
	int i;

	if (behind == 0 && bytes == 0)
		return;
	for (i = st->nslowest; i > 0; i--) {
		const struct dash_slow *p = &st->slowest[i - 1];

		if (p->behind > behind || (p->behind == behind &&
		    p->bytes >= bytes))
			break;
		if (i < DASH_SLOWEST)
			st->slowest[i] = *p;
	}
	if (i >= DASH_SLOWEST)
		return;
	st->slowest[i] = (struct dash_slow){ sub->role, sub->dash, bytes,
	    behind };
	if (st->nslowest < DASH_SLOWEST)
		st->nslowest++;
}

static void
stats(struct sess *s, struct dash_stats *st)
{
	struct deliver_sub *sub;
	uint64_t now = util_mono_ms(), sec = now / 1000, last, behind;
	size_t q;
	int i;

	memset(st, 0, sizeof(*st));
	last = deliver_last(&s->feed);
	TAILQ_FOREACH(sub, &s->feed.subs, entry) {
		if (sub->dash)
			st->dashboards++;
		else if (sub->role > 0 && sub->role < 5)
			st->conns[sub->role]++;
		q = sub->ops->queued(sub);
		st->bytes_total += q;
		if (q > st->bytes_max)
			st->bytes_max = q;
		behind = sub->next_seq > 0 && sub->next_seq <= last ?
		    last - sub->next_seq + 1 : 0;
		st->behind_total += behind;
		if (behind > st->behind_max)
			st->behind_max = behind;
		slow_keep(st, sub, q, behind);
	}
	if (s->dash != NULL) {
		for (i = 0; i < DASH_WINDOW; i++)
			if (s->dash->secs[i].sec + DASH_WINDOW > sec) {
				st->thoughts += s->dash->secs[i].thoughts;
				st->events += s->dash->secs[i].events;
			}
		st->window_ms = now - s->dash->since_ms;
		if (st->window_ms > DASH_WINDOW * 1000)
			st->window_ms = DASH_WINDOW * 1000;
	}
	st->status = sess_status(s);
	st->turn_running = s->turn != NULL;
	st->last_seq = sess_last_seq(s);
	st->interval_ms = s->wk->conf->dashboard_ms;
}

/* The metrics event, as text (malloc'd), or NULL. */
static char *
metrics_json(struct sess *s)
{
	struct dash_stats st;
	char ts[32];
	cJSON *b;

	stats(s, &st);
	b = dash_body(sess_meta(s), &st);
	util_iso8601(ts, util_now_ms());
	cJSON_AddStringToObject(b, "ts", ts);
	return proto_reply("metrics", s->id, b);
}

static void
dash_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct dash *d = arg;
	struct deliver_sub *sub, *next;
	char *j;

	(void)fd;
	(void)ev;
	if ((j = metrics_json(d->s)) == NULL)
		return;
	for (sub = TAILQ_FIRST(&d->s->feed.subs); sub != NULL; sub = next) {
		next = TAILQ_NEXT(sub, entry);
		if (sub->dash)
			conn_send_json(sub_conn(sub), j);
	}
	free(j);
}

void
dash_hello(struct conn *c)
{
	char *j;

	if (c->sess == NULL || (j = metrics_json(c->sess)) == NULL)
		return;
	conn_send_json(c, j);
	free(j);
}

void
dash_free(struct sess *s)
{
	if (s->dash == NULL)
		return;
	event_free(s->dash->ev);
	free(s->dash);
	s->dash = NULL;
	s->feed.tap = NULL;
	s->feed.tap_arg = NULL;
}

void
dash_changed(struct sess *s)
{
	struct timeval tv;
	struct dash *d;

	/* Counted by delivery: a session with many streams is not walked
	 * on each change. */
	if (s->feed.ndash == 0) {
		dash_free(s);
		return;
	}
	if (s->dash != NULL)
		return;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return;		/* no metrics; the stream itself works */
	d->s = s;
	d->since_ms = util_mono_ms();
	if ((d->ev = event_new(s->wk->base, -1, EV_PERSIST, dash_cb,
	    d)) == NULL) {
		free(d);
		return;
	}
	util_tv(&tv, s->wk->conf->dashboard_ms);
	event_add(d->ev, &tv);
	s->dash = d;
	s->feed.tap = dash_tap;
	s->feed.tap_arg = d;
}

/* --- the body --- */

/* An agent's status: its own in meta, else what the turn says. */
static const char *
agent_status(const cJSON *a, const char *running, int approvals)
{
	const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(a,
	    "status"));
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(a,
	    "agentId"));

	if (st != NULL)
		return st;
	if (running == NULL || id == NULL || strcmp(id, running) != 0)
		return "idle";
	return approvals > 0 ? "waiting_approval" : "thinking";
}

static cJSON *
usage_copy(const cJSON *u)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "inputTokens", proto_count(u,
	    "inputTokens"));
	cJSON_AddNumberToObject(o, "outputTokens", proto_count(u,
	    "outputTokens"));
	cJSON_AddNumberToObject(o, "tokens", proto_count(u, "tokens"));
	cJSON_AddNumberToObject(o, "cost", proto_count(u, "cost"));
	return o;
}

/* Whether an entry of meta "actions" still waits for someone. */
static int
action_pending(const cJSON *a)
{
	const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(a,
	    "status"));

	return st == NULL || strcmp(st, "proposed") == 0 ||
	    strcmp(st, "pending") == 0;
}

/*
 * pending: meta "waiting" by kind (none: an approval; "call": a client's
 * tool call; "elicit": a question; any other kind under its own name),
 * and actions: waiting entries of a kind "action...", or else the
 * pending entries of meta "actions".
 */
static cJSON *
pending(const cJSON *meta, int *approvals)
{
	cJSON *p = cJSON_CreateObject(), *w, *n;
	const char *k, *key;
	int total = 0, actions = 0;

	cJSON_AddNumberToObject(p, "approvals", 0);
	cJSON_AddNumberToObject(p, "clientCalls", 0);
	cJSON_AddNumberToObject(p, "questions", 0);
	cJSON_AddNumberToObject(p, "actions", 0);
	cJSON_ArrayForEach(w, cJSON_GetObjectItem(meta, "waiting")) {
		k = cJSON_GetStringValue(cJSON_GetObjectItem(w, "kind"));
		if (k == NULL)
			key = "approvals";
		else if (strcmp(k, "call") == 0)
			key = "clientCalls";
		else if (strcmp(k, "elicit") == 0)
			key = "questions";
		else if (strncmp(k, "action", 6) == 0) {
			key = "actions";
			actions++;
		} else
			key = k;
		if ((n = cJSON_GetObjectItemCaseSensitive(p, key)) == NULL)
			n = cJSON_AddNumberToObject(p, key, 0);
		if (n != NULL)
			cJSON_SetNumberValue(n, n->valuedouble + 1);
		total++;
	}
	if (actions == 0) {
		cJSON_ArrayForEach(w, cJSON_GetObjectItem(meta, "actions"))
			if (action_pending(w))
				actions++;
		cJSON_SetNumberValue(cJSON_GetObjectItem(p, "actions"),
		    actions);
		total += actions;
	}
	cJSON_AddNumberToObject(p, "total", total);
	*approvals = (int)proto_count(p, "approvals");
	return p;
}

cJSON *
dash_body(const cJSON *meta, const struct dash_stats *st)
{
	static const char *roles[] = { NULL, "observer", "user", "agent",
	    "admin" };
	const cJSON *agents = cJSON_GetObjectItem(meta, "agents"), *a;
	const cJSON *turn = cJSON_GetObjectItem(meta, "turn");
	cJSON *b = cJSON_CreateObject(), *o, *arr, *x, *p;
	const char *running = NULL;
	unsigned total = st->dashboards;
	int i, approvals, n = cJSON_GetArraySize(agents);

	cJSON_AddStringToObject(b, "status", st->status ? st->status : "");
	cJSON_AddNumberToObject(b, "lastSeq", (double)st->last_seq);
	cJSON_AddNumberToObject(b, "intervalMs", (double)st->interval_ms);
	o = cJSON_AddObjectToObject(b, "connections");
	for (i = 1; i < 5; i++) {
		cJSON_AddNumberToObject(o, roles[i], st->conns[i]);
		total += st->conns[i];
	}
	cJSON_AddNumberToObject(o, "dashboard", st->dashboards);
	cJSON_AddNumberToObject(o, "total", total);
	p = pending(meta, &approvals);
	if (st->turn_running) {
		/* The turn's agent, else the session's first. */
		running = cJSON_GetStringValue(cJSON_GetObjectItem(turn,
		    "agentId"));
		if (running == NULL)
			running = cJSON_GetStringValue(cJSON_GetObjectItem(
			    cJSON_GetArrayItem(agents, 0), "agentId"));
	}
	arr = cJSON_AddArrayToObject(b, "agents");
	cJSON_ArrayForEach(a, agents) {
		x = cJSON_CreateObject();
		cJSON_AddStringToObject(x, "agentId", cJSON_GetStringValue(
		    cJSON_GetObjectItem(a, "agentId")) ?: "");
		if (cJSON_IsString(cJSON_GetObjectItem(a, "name")))
			cJSON_AddStringToObject(x, "name", cJSON_GetStringValue(
			    cJSON_GetObjectItem(a, "name")));
		if (cJSON_IsString(cJSON_GetObjectItem(a, "role")))
			cJSON_AddStringToObject(x, "role", cJSON_GetStringValue(
			    cJSON_GetObjectItem(a, "role")));
		if (cJSON_IsString(cJSON_GetObjectItem(a, "provider")))
			cJSON_AddStringToObject(x, "provider",
			    cJSON_GetStringValue(cJSON_GetObjectItem(a,
			    "provider")));
		cJSON_AddStringToObject(x, "status", agent_status(a, running,
		    approvals));
		/* Its own usage; a lone agent's is the session's. */
		if (cJSON_IsObject(cJSON_GetObjectItem(a, "usage")))
			cJSON_AddItemToObject(x, "usage", usage_copy(
			    cJSON_GetObjectItem(a, "usage")));
		else if (n == 1)
			cJSON_AddItemToObject(x, "usage", usage_copy(
			    cJSON_GetObjectItem(meta, "usage")));
		else
			cJSON_AddNullToObject(x, "usage");
		cJSON_AddItemToArray(arr, x);
	}
	cJSON_AddItemToObject(b, "usage", usage_copy(cJSON_GetObjectItem(meta,
	    "usage")));
	cJSON_AddNumberToObject(b, "turns", proto_count(meta, "turns"));
	o = cJSON_AddObjectToObject(b, "rates");
	cJSON_AddNumberToObject(o, "thoughtsPerMinute", st->thoughts);
	cJSON_AddNumberToObject(o, "eventsPerMinute", st->events);
	cJSON_AddNumberToObject(o, "windowMs", (double)st->window_ms);
	o = cJSON_AddObjectToObject(b, "queues");
	cJSON_AddNumberToObject(o, "messages", cJSON_GetArraySize(
	    cJSON_GetObjectItem(meta, "queue")));
	cJSON_AddNumberToObject(o, "bytesQueued", (double)st->bytes_total);
	cJSON_AddNumberToObject(o, "maxBytesQueued", (double)st->bytes_max);
	cJSON_AddNumberToObject(o, "eventsBehind", (double)st->behind_total);
	cJSON_AddNumberToObject(o, "maxEventsBehind", (double)st->behind_max);
	arr = cJSON_AddArrayToObject(o, "slowest");
	for (i = 0; i < st->nslowest; i++) {
		x = cJSON_CreateObject();
		cJSON_AddStringToObject(x, "role", st->slowest[i].dash ?
		    "dashboard" : st->slowest[i].role > 0 &&
		    st->slowest[i].role < 5 ? roles[st->slowest[i].role] : "");
		cJSON_AddNumberToObject(x, "bytesQueued",
		    (double)st->slowest[i].bytes);
		cJSON_AddNumberToObject(x, "eventsBehind",
		    (double)st->slowest[i].behind);
		cJSON_AddItemToArray(arr, x);
	}
	cJSON_AddItemToObject(b, "pending", p);
	return b;
}

const struct sess_part dash_part = {
	.changed = dash_changed,
	.free = dash_free,
};
