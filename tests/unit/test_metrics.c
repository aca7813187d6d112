/*
 * metrics: bucketing, sums across workers, and the rendered text read
 * back line by line the way a Prometheus scraper reads it.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <event2/buffer.h>

#include "parley/metrics.h"
#include "check_main.h"

/* The rendered exposition as one NUL-terminated string (caller frees). */
static char *
render(const struct metrics *m, const struct metrics_sup *sup)
{
	struct evbuffer *b = evbuffer_new();
	size_t len;
	char *s;

	ck_assert_ptr_nonnull(b);
	metrics_render(b, m, sup);
	len = evbuffer_get_length(b);
	s = malloc(len + 1);
	ck_assert_ptr_nonnull(s);
	evbuffer_remove(b, s, len);
	s[len] = '\0';
	evbuffer_free(b);
	return s;
}

/*
 * The value of the sample whose name and labels are exactly series
 * (e.g. `parley_tokens_total{direction="input"}`); fails when absent.
 */
static double
value(const char *text, const char *series)
{
	const char *p = text, *nl;
	size_t n = strlen(series);
	char *end;
	double v;

	while (*p != '\0') {
		nl = strchr(p, '\n');
		if (strncmp(p, series, n) == 0 && p[n] == ' ') {
			v = strtod(p + n + 1, &end);
			ck_assert_msg(end != p + n + 1 && (*end == '\n' ||
			    *end == '\0'), "bad value for %s", series);
			return v;
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	ck_abort_msg("no sample %s", series);
	return 0;
}

/*
 * Checks a histogram: buckets non-decreasing, le ascending and ending
 * in +Inf, +Inf equal to _count.  Returns _count.
 */
static double
check_hist(const char *text, const char *name, const char *labels)
{
	char pfx[160], series[200];
	const char *p = text, *nl, *le;
	double prev = -1, prev_le = -INFINITY, v, lev, count;
	int seen_inf = 0, n = 0;
	char *end;

	snprintf(pfx, sizeof(pfx), "%s_bucket{%s%s", name, labels,
	    *labels ? "," : "");
	while (*p != '\0') {
		nl = strchr(p, '\n');
		if (strncmp(p, pfx, strlen(pfx)) == 0) {
			le = p + strlen(pfx);
			ck_assert_msg(strncmp(le, "le=\"", 4) == 0, "%.60s", p);
			le += 4;
			ck_assert_msg(!seen_inf, "bucket after +Inf");
			if (strncmp(le, "+Inf\"", 5) == 0) {
				seen_inf = 1;
				lev = INFINITY;
			} else {
				lev = strtod(le, &end);
				ck_assert_msg(*end == '"', "%.60s", p);
			}
			ck_assert_msg(lev > prev_le, "le not ascending");
			prev_le = lev;
			le = strchr(le, '}');
			ck_assert_ptr_nonnull(le);
			v = strtod(le + 2, &end);
			ck_assert_msg(v >= prev, "bucket decreases: %.80s", p);
			prev = v;
			n++;
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	ck_assert_msg(seen_inf && n >= 2, "%s: no +Inf bucket", name);
	snprintf(series, sizeof(series), "%s_count%s%s%s", name,
	    *labels ? "{" : "", labels, *labels ? "}" : "");
	count = value(text, series);
	ck_assert_msg(prev == count, "%s: +Inf %g != count %g", name, prev,
	    count);
	return count;
}

START_TEST(observe_buckets)
{
	struct metrics_hist h;

	memset(&h, 0, sizeof(h));
	metrics_observe(&h, MSC_SECONDS, 0.0005);	/* <= 1 ms */
	metrics_observe(&h, MSC_SECONDS, 0.001);	/* on the bound */
	metrics_observe(&h, MSC_SECONDS, 0.3);		/* <= 0.5 */
	metrics_observe(&h, MSC_SECONDS, 61);		/* +Inf */
	metrics_observe(&h, MSC_SECONDS, -1);		/* clamped to 0 */
	metrics_observe(&h, MSC_SECONDS, NAN);		/* clamped to 0 */
	ck_assert_uint_eq(h.count, 6);
	ck_assert_uint_eq(h.bucket[0], 4);
	ck_assert_uint_eq(h.bucket[7], 1);
	ck_assert_uint_eq(h.bucket[METRICS_BUCKETS - 1], 1);
	ck_assert(fabs(h.sum - 61.3015) < 1e-9);

	memset(&h, 0, sizeof(h));
	metrics_observe(&h, MSC_COUNT, 0);
	metrics_observe(&h, MSC_COUNT, 1);
	metrics_observe(&h, MSC_COUNT, 2);
	metrics_observe(&h, MSC_COUNT, 1000000);
	metrics_observe(&h, MSC_COUNT, 1000001);
	ck_assert_uint_eq(h.bucket[0], 2);
	ck_assert_uint_eq(h.bucket[1], 1);
	ck_assert_uint_eq(h.bucket[6], 1);
	ck_assert_uint_eq(h.bucket[METRICS_BUCKETS - 1], 1);
	ck_assert_uint_eq(h.count, 5);
}
END_TEST

START_TEST(add_sums)
{
	struct metrics a, b, sum;

	metrics_init(&a);
	metrics_init(&b);
	metrics_init(&sum);
	ck_assert_uint_eq(a.version, METRICS_VERSION);
	a.connections[MT_WEBSOCKET] = 3;
	b.connections[MT_WEBSOCKET] = 4;
	a.sessions[MS_PAUSED] = 1;
	a.connections_total[MT_SSE] = 10;
	b.connections_total[MT_SSE] = 5;
	a.events_appended = 100;
	b.events_appended = 1;
	a.cost_usd = 0.25;
	b.cost_usd = 0.5;
	a.provider_requests[MP_ANTHROPIC] = 2;
	metrics_observe(&a.provider_latency[MP_ANTHROPIC], MSC_SECONDS, 0.2);
	metrics_observe(&b.provider_latency[MP_ANTHROPIC], MSC_SECONDS, 2);
	metrics_observe(&b.store_latency, MSC_SECONDS, 0.002);

	metrics_add(&sum, &a, 0);
	metrics_add(&sum, &b, 0);
	ck_assert_uint_eq(sum.connections[MT_WEBSOCKET], 0);	/* no gauges */
	ck_assert_uint_eq(sum.connections_total[MT_SSE], 15);
	ck_assert_uint_eq(sum.events_appended, 101);
	ck_assert(sum.cost_usd == 0.75);
	ck_assert_uint_eq(sum.provider_requests[MP_ANTHROPIC], 2);
	ck_assert_uint_eq(sum.provider_latency[MP_ANTHROPIC].count, 2);
	ck_assert_uint_eq(sum.store_latency.count, 1);
	ck_assert(fabs(sum.provider_latency[MP_ANTHROPIC].sum - 2.2) < 1e-12);

	metrics_add(&sum, &a, 1);
	metrics_add(&sum, &b, 1);
	ck_assert_uint_eq(sum.connections[MT_WEBSOCKET], 7);
	ck_assert_uint_eq(sum.sessions[MS_PAUSED], 1);
	ck_assert_uint_eq(sum.events_appended, 202);
}
END_TEST

START_TEST(provider_names)
{
	ck_assert_int_eq(metrics_provider("openai"), MP_OPENAI);
	ck_assert_int_eq(metrics_provider("anthropic"), MP_ANTHROPIC);
	ck_assert_int_eq(metrics_provider("script"), MP_SCRIPT);
	ck_assert_int_eq(metrics_provider("nonsense"), MP_SCRIPT);
	ck_assert_int_eq(metrics_provider(NULL), MP_SCRIPT);
}
END_TEST

START_TEST(render_text)
{
	struct metrics m;
	struct metrics_sup sup;
	char *t, *p, *line, *save, *dup;
	int i, help = 0, type = 0;

	metrics_init(&m);
	memset(&sup, 0, sizeof(sup));
	m.connections[MT_SSE] = 2;
	m.connections_total[MT_HTTP] = 9;
	m.sessions[MS_FOLLOWING] = 4;
	m.events_appended = 12345678901234ULL;
	m.tokens_input = 7;
	m.tokens_output = 11;
	m.cost_usd = 0.1;
	m.replays = 3;
	for (i = 0; i < 3; i++)
		metrics_observe(&m.replay_events, MSC_COUNT, i * 40);
	for (i = 0; i < 50; i++)
		metrics_observe(&m.provider_latency[MP_OPENAI], MSC_SECONDS,
		    i * 0.05);
	metrics_observe(&m.store_latency, MSC_SECONDS, 100);
	sup.worker_restarts = 2;
	sup.workers = 4;
	sup.workers_ready = 3;
	sup.workers_draining = 1;
	sup.uptime_seconds = 12.5;
	t = render(&m, &sup);

	ck_assert(value(t, "parley_connections{transport=\"sse\"}") == 2);
	ck_assert(value(t, "parley_connections{transport=\"websocket\"}") == 0);
	ck_assert(value(t, "parley_connections_opened_total"
	    "{transport=\"http\"}") == 9);
	ck_assert(value(t, "parley_sessions{state=\"following\"}") == 4);
	ck_assert(value(t, "parley_sessions{state=\"paused\"}") == 0);
	ck_assert(value(t, "parley_events_appended_total") ==
	    12345678901234.0);
	ck_assert(value(t, "parley_tokens_total{direction=\"input\"}") == 7);
	ck_assert(value(t, "parley_tokens_total{direction=\"output\"}") == 11);
	ck_assert(value(t, "parley_cost_usd_total") == 0.1);
	ck_assert(value(t, "parley_replays_total") == 3);
	ck_assert(value(t, "parley_provider_requests_total"
	    "{provider=\"script\"}") == 0);
	ck_assert(value(t, "parley_worker_restarts_total") == 2);
	ck_assert(value(t, "parley_workers{state=\"ready\"}") == 3);
	ck_assert(value(t, "parley_workers{state=\"starting\"}") == 1);
	ck_assert(value(t, "parley_workers{state=\"draining\"}") == 1);
	ck_assert(value(t, "parley_store_up") == 1);
	ck_assert(value(t, "parley_uptime_seconds") == 12.5);
	ck_assert(value(t, "parley_build_info{version=\"" PACKAGE_VERSION
	    "\"}") == 1);

	ck_assert(check_hist(t, "parley_replay_events", "") == 3);
	ck_assert(value(t, "parley_replay_events_bucket{le=\"1\"}") == 1);
	ck_assert(value(t, "parley_replay_events_bucket{le=\"100\"}") == 3);
	ck_assert(check_hist(t, "parley_provider_latency_seconds",
	    "provider=\"openai\"") == 50);
	ck_assert(check_hist(t, "parley_provider_latency_seconds",
	    "provider=\"anthropic\"") == 0);
	ck_assert(value(t, "parley_provider_latency_seconds_bucket"
	    "{provider=\"openai\",le=\"1\"}") == 21);
	ck_assert(check_hist(t, "parley_store_latency_seconds", "") == 1);
	ck_assert(value(t, "parley_store_latency_seconds_bucket"
	    "{le=\"60\"}") == 0);
	ck_assert(value(t, "parley_store_latency_seconds_sum") == 100);

	/* Every family has HELP and TYPE, and counters end in _total. */
	dup = strdup(t);
	for (line = strtok_r(dup, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "# HELP parley_", 14) == 0)
			help++;
		if (strncmp(line, "# TYPE parley_", 14) != 0)
			continue;
		type++;
		p = strrchr(line, ' ');
		ck_assert(strcmp(p, " counter") == 0 ||
		    strcmp(p, " gauge") == 0 || strcmp(p, " histogram") == 0);
		if (strcmp(p, " counter") == 0) {
			*p = '\0';
			ck_assert_msg(strlen(line) > 6 && strcmp(line +
			    strlen(line) - 6, "_total") == 0, "%s", line);
		}
	}
	free(dup);
	ck_assert_int_gt(help, 10);
	ck_assert_int_eq(help, type);
	free(t);

	/* Without the supervisor's part, only the workers' families. */
	t = render(&m, NULL);
	ck_assert_ptr_null(strstr(t, "parley_worker_restarts_total"));
	ck_assert_ptr_nonnull(strstr(t, "parley_store_latency_seconds_count"));
	free(t);
}
END_TEST

START_TEST(render_every_line)
{
	struct metrics m;
	struct metrics_sup sup;
	char *t, *line, *next, *sp, *end;
	int families = 0, samples = 0;

	metrics_init(&m);
	memset(&sup, 0, sizeof(sup));
	m.cost_usd = 1.0 / 3.0;
	t = render(&m, &sup);
	for (line = t; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		ck_assert_ptr_nonnull(next);	/* every line ends in \n */
		*next++ = '\0';
		if (line[0] == '#') {
			families += strncmp(line, "# TYPE ", 7) == 0;
			continue;
		}
		ck_assert_msg(strncmp(line, "parley_", 7) == 0, "%s", line);
		sp = strrchr(line, ' ');
		ck_assert_ptr_nonnull(sp);
		if (strcmp(sp + 1, "+Inf") != 0) {
			strtod(sp + 1, &end);
			ck_assert_msg(*end == '\0' && end != sp + 1, "%s", line);
		}
		samples++;
	}
	ck_assert_int_ge(families, 24);
	ck_assert_int_gt(samples, families);
	free(t);
	/* A third reads back exactly. */
	t = render(&m, &sup);
	ck_assert(value(t, "parley_cost_usd_total") == 1.0 / 3.0);
	free(t);
}
END_TEST

static Suite *
metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");

	tcase_add_test(tc, observe_buckets);
	tcase_add_test(tc, add_sums);
	tcase_add_test(tc, provider_names);
	tcase_add_test(tc, render_text);
	tcase_add_test(tc, render_every_line);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(metrics_suite());
}
