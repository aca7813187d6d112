/*
 * Worker counters and their Prometheus text exposition (format 0.0.4).
 * Workers count into a struct metrics and send it whole; the supervisor
 * sums them with metrics_add and renders the sum, so everything here is
 * plain arithmetic on plain data.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "parley/metrics.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION	"unknown"
#endif

#define NFINITE		(METRICS_BUCKETS - 1)	/* the last bucket is +Inf */

/*
 * Upper bounds, as numbers and as the le labels Prometheus users expect
 * to read.  Latencies span a local fsync (about a millisecond) to a slow
 * model's first byte; replay sizes a few events to a whole retained log.
 * A scale with fewer bounds leaves the rest of the array unused (0).
 */
static const struct scale {
	size_t		 n;
	double		 le[NFINITE];
	const char	*label[NFINITE];
} scales[] = {
	[MSC_SECONDS] = { 13,
	    { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
	    60 },
	    { "0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
	    "1", "2.5", "5", "10", "60" } },
	[MSC_COUNT] = { 7,
	    { 1, 10, 100, 1000, 10000, 100000, 1000000 },
	    { "1", "10", "100", "1000", "10000", "100000", "1000000" } },
};

static const char *const transports[MT_NTRANSPORTS] = {
	"websocket", "sse", "http"
};
static const char *const states[MS_NSTATES] = {
	"created", "running", "idle", "suspended", "paused", "completed",
	"failed", "following"
};
static const char *const providers[MP_NPROVIDERS] = {
	"openai", "anthropic", "script"
};

void
metrics_init(struct metrics *m)
{
	memset(m, 0, sizeof(*m));
	m->version = METRICS_VERSION;
}

void
metrics_observe(struct metrics_hist *h, enum metrics_scale sc, double v)
{
	const struct scale *s = &scales[sc == MSC_COUNT ? MSC_COUNT :
	    MSC_SECONDS];
	size_t i;

	/* A clock that stepped back or a NaN must not poison the sum. */
	if (!(v >= 0))
		v = 0;
	for (i = 0; i < s->n; i++)
		if (v <= s->le[i])
			break;
	h->bucket[i < s->n ? i : METRICS_BUCKETS - 1]++;
	h->count++;
	h->sum += v;
}

static void
hist_add(struct metrics_hist *d, const struct metrics_hist *s)
{
	size_t i;

	for (i = 0; i < METRICS_BUCKETS; i++)
		d->bucket[i] += s->bucket[i];
	d->count += s->count;
	d->sum += s->sum;
}

void
metrics_add(struct metrics *d, const struct metrics *s, int gauges)
{
	size_t i;

	if (gauges) {
		for (i = 0; i < MT_NTRANSPORTS; i++)
			d->connections[i] += s->connections[i];
		for (i = 0; i < MS_NSTATES; i++)
			d->sessions[i] += s->sessions[i];
	}
	for (i = 0; i < MT_NTRANSPORTS; i++)
		d->connections_total[i] += s->connections_total[i];
	d->events_appended += s->events_appended;
	d->events_delivered += s->events_delivered;
	d->replays += s->replays;
	hist_add(&d->replay_events, &s->replay_events);
	d->resume_gaps += s->resume_gaps;
	d->slow_catchups += s->slow_catchups;
	d->slow_closes += s->slow_closes;
	for (i = 0; i < MP_NPROVIDERS; i++) {
		d->provider_requests[i] += s->provider_requests[i];
		d->provider_errors[i] += s->provider_errors[i];
		hist_add(&d->provider_latency[i], &s->provider_latency[i]);
	}
	d->tokens_input += s->tokens_input;
	d->tokens_output += s->tokens_output;
	d->cost_usd += s->cost_usd;
	d->tool_calls += s->tool_calls;
	d->tool_errors += s->tool_errors;
	d->store_errors += s->store_errors;
	hist_add(&d->store_latency, &s->store_latency);
}

enum metrics_provider
metrics_provider(const char *type)
{
	if (type != NULL && strcmp(type, "openai") == 0)
		return MP_OPENAI;
	if (type != NULL && strcmp(type, "anthropic") == 0)
		return MP_ANTHROPIC;
	return MP_SCRIPT;
}

/* --- rendering --- */

/*
 * A float as the exposition format reads it: the shortest of %.15g and
 * %.17g that reads back exactly, and Prometheus's spellings of the
 * special values.
 */
static void
fmt_double(char *buf, size_t len, double v)
{
	if (isnan(v))
		snprintf(buf, len, "NaN");
	else if (isinf(v))
		snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
	else {
		snprintf(buf, len, "%.15g", v);
		if (strtod(buf, NULL) != v)
			snprintf(buf, len, "%.17g", v);
	}
}

static void
family(struct evbuffer *b, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(b, "# HELP parley_%s %s\n# TYPE parley_%s %s\n",
	    name, help, name, type);
}

/* One sample; labels is "" or `k="v",...` without braces. */
static void
sample_u64(struct evbuffer *b, const char *name, const char *labels,
    uint64_t v)
{
	evbuffer_add_printf(b, "parley_%s%s%s%s %llu\n", name,
	    *labels ? "{" : "", labels, *labels ? "}" : "",
	    (unsigned long long)v);
}

static void
sample_double(struct evbuffer *b, const char *name, const char *labels,
    double v)
{
	char num[40];

	fmt_double(num, sizeof(num), v);
	evbuffer_add_printf(b, "parley_%s%s%s%s %s\n", name,
	    *labels ? "{" : "", labels, *labels ? "}" : "", num);
}

/* One histogram's series: cumulative buckets, +Inf, _sum, _count. */
static void
hist_series(struct evbuffer *b, const char *name, const char *labels,
    const struct metrics_hist *h, enum metrics_scale sc)
{
	const struct scale *s = &scales[sc];
	const char *sep = *labels ? "," : "";
	uint64_t cum = 0;
	size_t i;

	for (i = 0; i < s->n; i++) {
		cum += h->bucket[i];
		evbuffer_add_printf(b, "parley_%s_bucket{%s%sle=\"%s\"} %llu\n",
		    name, labels, sep, s->label[i], (unsigned long long)cum);
	}
	/* Buckets a scale leaves unused are 0 but counted all the same,
	 * so +Inf equals _count even for a sum from a mismatched peer. */
	for (; i < METRICS_BUCKETS; i++)
		cum += h->bucket[i];
	evbuffer_add_printf(b, "parley_%s_bucket{%s%sle=\"+Inf\"} %llu\n",
	    name, labels, sep, (unsigned long long)cum);
	{
		char n[128];

		snprintf(n, sizeof(n), "%s_sum", name);
		sample_double(b, n, labels, h->sum);
		snprintf(n, sizeof(n), "%s_count", name);
		sample_u64(b, n, labels, h->count);
	}
}

/* One sample per value of label key (names[i] = v[i]). */
static void
by_label(struct evbuffer *b, const char *name, const char *key,
    const char *const *names, size_t n, const uint64_t *v)
{
	char l[64];
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(l, sizeof(l), "%s=\"%s\"", key, names[i]);
		sample_u64(b, name, l, v[i]);
	}
}

#define by_transport(b, name, v) \
	by_label(b, name, "transport", transports, MT_NTRANSPORTS, v)
#define by_provider(b, name, v) \
	by_label(b, name, "provider", providers, MP_NPROVIDERS, v)

/* A family of one unlabelled sample. */
static void
one_u64(struct evbuffer *b, const char *name, const char *type,
    const char *help, uint64_t v)
{
	family(b, name, type, help);
	sample_u64(b, name, "", v);
}

void
metrics_render(struct evbuffer *b, const struct metrics *m,
    const struct metrics_sup *sup)
{
	char l[64];
	size_t i;

	family(b, "connections", "gauge", "Client connections open, by "
	    "transport.");
	by_transport(b, "connections", m->connections);
	/* Not parley_connections_total: a counter's family name drops
	 * _total in OpenMetrics and would clash with the gauge. */
	family(b, "connections_opened_total", "counter", "Client "
	    "connections opened, by transport.");
	by_transport(b, "connections_opened_total", m->connections_total);

	family(b, "sessions", "gauge", "Sessions in worker memory, by state.");
	by_label(b, "sessions", "state", states, MS_NSTATES, m->sessions);

	one_u64(b, "events_appended_total", "counter", "Events appended to "
	    "session logs.",
	    m->events_appended);
	one_u64(b, "events_delivered_total", "counter", "Logged events "
	    "written to clients.",
	    m->events_delivered);

	one_u64(b, "replays_total", "counter", "Resumes that replayed the "
	    "session log after a client's lastSeq.",
	    m->replays);
	family(b, "replay_events", "histogram", "Events one replay sent "
	    "before the client was live.");
	hist_series(b, "replay_events", "", &m->replay_events, MSC_COUNT);
	one_u64(b, "resume_gaps_total", "counter", "RESUME_GAP errors sent: "
	    "retention had removed events a client asked for.",
	    m->resume_gaps);
	one_u64(b, "slow_consumer_catchups_total", "counter", "Live "
	    "connections that passed max-output-buffer and were fed from the "
	    "log instead.",
	    m->slow_catchups);
	one_u64(b, "slow_consumer_closes_total", "counter", "Connections "
	    "closed with 1008 because they could not keep up.",
	    m->slow_closes);

	family(b, "provider_requests_total", "counter", "Model requests "
	    "started, by provider type.");
	by_provider(b, "provider_requests_total", m->provider_requests);
	family(b, "provider_errors_total", "counter", "Model requests that "
	    "ended in an error, by provider type.");
	by_provider(b, "provider_errors_total", m->provider_errors);
	family(b, "provider_latency_seconds", "histogram", "Seconds from a "
	    "model request to its first streamed byte, by provider type.");
	for (i = 0; i < MP_NPROVIDERS; i++) {
		snprintf(l, sizeof(l), "provider=\"%s\"", providers[i]);
		hist_series(b, "provider_latency_seconds", l,
		    &m->provider_latency[i], MSC_SECONDS);
	}

	family(b, "tokens_total", "counter", "Model tokens, by direction.");
	sample_u64(b, "tokens_total", "direction=\"input\"", m->tokens_input);
	sample_u64(b, "tokens_total", "direction=\"output\"",
	    m->tokens_output);
	family(b, "cost_usd_total", "counter", "Model cost in US dollars, "
	    "as the provider configuration prices it.");
	sample_double(b, "cost_usd_total", "", m->cost_usd);
	one_u64(b, "tool_calls_total", "counter", "Tool calls started.",
	    m->tool_calls);
	one_u64(b, "tool_errors_total", "counter", "Tool calls that ended in "
	    "an error.",
	    m->tool_errors);

	one_u64(b, "store_errors_total", "counter", "Store operations that "
	    "failed.",
	    m->store_errors);
	family(b, "store_latency_seconds", "histogram", "Seconds from an "
	    "append to the store saying it is durable.");
	hist_series(b, "store_latency_seconds", "", &m->store_latency,
	    MSC_SECONDS);

	if (sup == NULL)
		return;
	one_u64(b, "worker_restarts_total", "counter", "Workers that died and "
	    "were started again.",
	    sup->worker_restarts);
	family(b, "workers", "gauge", "Worker processes, by state.");
	sample_u64(b, "workers", "state=\"ready\"", sup->workers_ready);
	sample_u64(b, "workers", "state=\"starting\"",
	    sup->workers > sup->workers_ready ?
	    sup->workers - sup->workers_ready : 0);
	sample_u64(b, "workers", "state=\"draining\"", sup->workers_draining);
	one_u64(b, "store_up", "gauge", "1 when every worker reaches the "
	    "store.",
	    sup->store_down ? 0 : 1);
	family(b, "uptime_seconds", "gauge", "Seconds since parleyd started.");
	sample_double(b, "uptime_seconds", "", sup->uptime_seconds);
	family(b, "build_info", "gauge", "Always 1; the version is a label.");
	sample_u64(b, "build_info", "version=\"" PACKAGE_VERSION "\"", 1);
}
