/*
 * Unit tests for the dashboards' metrics (workers/dash.c): the body made
 * from meta and the counts (agents' states and usage, pending requests by
 * kind, connections), and the per-session state: made with the first
 * dashboard, counting what is fanned out, gone with the last.  Sessions,
 * delivery and connections are stubs.
 */
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../workers/dash.c"
#include "check_main.h"

static struct config	 conf;
static struct wk	 wk;
static struct sess	 sess;
static int		 sent;		/* metrics events sent */

/* Never frozen here: the tree is the meta. */
cJSON *
sess_meta_thaw(const struct sess *s)
{
	return s->mtree;
}

const char *
sess_status(const struct sess *s)
{
	(void)s;
	return "idle";
}

uint64_t
sess_last_seq(const struct sess *s)
{
	(void)s;
	return 42;
}

uint64_t
deliver_last(const struct deliver *d)
{
	(void)d;
	return 42;
}

void
conn_send_json(struct conn *c, const char *json)
{
	(void)c;
	ck_assert_ptr_nonnull(strstr(json, "\"type\":\"metrics\""));
	sent++;
}

static size_t
queued(struct deliver_sub *sub)
{
	return sub->role == IPC_ROLE_USER ? 100 : 0;
}

static const struct deliver_ops ops = { .queued = queued };

static cJSON *
meta(const char *json)
{
	cJSON *m = cJSON_Parse(json);

	ck_assert_ptr_nonnull(m);
	return m;
}

static double
num(const cJSON *o, const char *path)
{
	char buf[128], *p, *save = NULL;
	const cJSON *x = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = strtok_r(buf, ".", &save); p != NULL;
	    p = strtok_r(NULL, ".", &save))
		x = isdigit((unsigned char)*p) ? cJSON_GetArrayItem(x, atoi(p)) :
		    cJSON_GetObjectItem(x, p);
	ck_assert_msg(cJSON_IsNumber(x), "%s is not a number", path);
	return x->valuedouble;
}

static const char *
str(const cJSON *o, int agent, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(
	    cJSON_GetObjectItem(o, "agents"), agent), key));
}

#define ONE_AGENT "{\"agents\":[{\"agentId\":\"a-1\",\"name\":\"assistant\"," \
	"\"role\":\"assistant\",\"provider\":\"p\"}],\"usage\":{" \
	"\"inputTokens\":3,\"outputTokens\":4,\"tokens\":7,\"cost\":0.5}," \
	"\"turns\":2,\"queue\":[5,9],\"turn\":{\"messageId\":\"m-5\"}"

START_TEST(test_one_agent)
{
	struct dash_stats st = { .status = "running", .turn_running = 1,
	    .last_seq = 9, .interval_ms = 5000, .dashboards = 1,
	    .bytes_total = 30, .bytes_max = 20, .behind_total = 4,
	    .behind_max = 3, .thoughts = 6, .events = 50, .window_ms = 60000 };
	cJSON *m = meta(ONE_AGENT "}"), *b;

	st.conns[IPC_ROLE_USER] = 1;
	st.conns[IPC_ROLE_OBSERVER] = 2;
	b = dash_body(m, &st);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(b,
	    "status")), "running");
	ck_assert(num(b, "connections.user") == 1);
	ck_assert(num(b, "connections.observer") == 2);
	ck_assert(num(b, "connections.agent") == 0);
	ck_assert(num(b, "connections.admin") == 0);
	ck_assert(num(b, "connections.dashboard") == 1);
	ck_assert(num(b, "connections.total") == 4);
	/* The running turn's agent thinks; the lone agent has the usage. */
	ck_assert_str_eq(str(b, 0, "status"), "thinking");
	ck_assert_str_eq(str(b, 0, "provider"), "p");
	ck_assert(num(b, "agents.0.usage.tokens") == 7);
	ck_assert(num(b, "agents.0.usage.cost") == 0.5);
	ck_assert(num(b, "usage.inputTokens") == 3);
	ck_assert(num(b, "turns") == 2);
	ck_assert(num(b, "lastSeq") == 9);
	ck_assert(num(b, "intervalMs") == 5000);
	ck_assert(num(b, "rates.thoughtsPerMinute") == 6);
	ck_assert(num(b, "rates.eventsPerMinute") == 50);
	ck_assert(num(b, "queues.messages") == 2);
	ck_assert(num(b, "queues.bytesQueued") == 30);
	ck_assert(num(b, "queues.maxEventsBehind") == 3);
	ck_assert(num(b, "pending.total") == 0);
	cJSON_Delete(b);
	cJSON_Delete(m);
}
END_TEST

START_TEST(test_pending_kinds)
{
	struct dash_stats st = { .turn_running = 1 };
	cJSON *m = meta(ONE_AGENT ",\"waiting\":[{\"toolCallId\":\"c1\"},"
	    "{\"toolCallId\":\"c2\",\"kind\":\"call\"},{\"elicitationId\":"
	    "\"e\",\"kind\":\"elicit\"},{\"kind\":\"vote\"},{\"kind\":\"vote\"}],"
	    "\"actions\":[{\"status\":\"proposed\"},{\"status\":\"done\"}]}");
	cJSON *b = dash_body(m, &st);

	ck_assert(num(b, "pending.approvals") == 1);
	ck_assert(num(b, "pending.clientCalls") == 1);
	ck_assert(num(b, "pending.questions") == 1);
	ck_assert(num(b, "pending.vote") == 2);
	/* None waits as a kind of its own: meta "actions" says. */
	ck_assert(num(b, "pending.actions") == 1);
	ck_assert(num(b, "pending.total") == 6);
	ck_assert_str_eq(str(b, 0, "status"), "waiting_approval");
	cJSON_Delete(b);
	cJSON_Delete(m);
	m = meta(ONE_AGENT ",\"waiting\":[{\"kind\":\"action\"}],"
	    "\"actions\":[{\"status\":\"proposed\"}]}");
	b = dash_body(m, &st);
	ck_assert(num(b, "pending.actions") == 1);
	ck_assert(num(b, "pending.total") == 1);
	ck_assert_str_eq(str(b, 0, "status"), "thinking");
	cJSON_Delete(b);
	cJSON_Delete(m);
}
END_TEST

START_TEST(test_agents)
{
	struct dash_stats st = { .turn_running = 1 };
	cJSON *m = meta("{\"agents\":[{\"agentId\":\"a-1\"},{\"agentId\":"
	    "\"a-2\",\"usage\":{\"tokens\":11}},{\"agentId\":\"a-3\","
	    "\"status\":\"waiting_approval\"}],\"usage\":{\"tokens\":30},"
	    "\"turn\":{\"agentId\":\"a-2\"}}");
	cJSON *b = dash_body(m, &st);

	ck_assert_str_eq(str(b, 0, "status"), "idle");
	ck_assert_str_eq(str(b, 1, "status"), "thinking");
	ck_assert_str_eq(str(b, 2, "status"), "waiting_approval");
	/* Several agents: only their own usage, never the session's. */
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(
	    cJSON_GetObjectItem(b, "agents"), 0), "usage")));
	ck_assert(num(b, "agents.1.usage.tokens") == 11);
	ck_assert(num(b, "usage.tokens") == 30);
	cJSON_Delete(b);
	cJSON_Delete(m);
	st.turn_running = 0;
	m = meta(ONE_AGENT "}");
	b = dash_body(m, &st);
	ck_assert_str_eq(str(b, 0, "status"), "idle");
	cJSON_Delete(b);
	cJSON_Delete(m);
}
END_TEST

static struct evt *
evt(const char *type)
{
	static struct evt e;

	memset(&e, 0, sizeof(e));
	snprintf(e.type, sizeof(e.type), "%s", type);
	return &e;
}

/* What delivery does as a subscriber comes or goes (the changed call). */
static void
sub_add(struct deliver_sub *sub)
{
	TAILQ_INSERT_TAIL(&sess.feed.subs, sub, entry);
	sess.feed.ndash += sub->dash;
	dash_changed(&sess);
}

static void
sub_del(struct deliver_sub *sub)
{
	TAILQ_REMOVE(&sess.feed.subs, sub, entry);
	sess.feed.ndash -= sub->dash;
	dash_changed(&sess);
}

/* The state comes with the first dashboard, counts, goes with the last. */
START_TEST(test_life)
{
	struct deliver_sub user, d1, d2;
	struct dash_stats st;
	cJSON *m = meta(ONE_AGENT "}");

	memset(&sess, 0, sizeof(sess));
	memset(&user, 0, sizeof(user));
	memset(&d1, 0, sizeof(d1));
	memset(&d2, 0, sizeof(d2));
	conf.dashboard_ms = 5000;
	wk.conf = &conf;
	wk.base = event_base_new();
	sess.wk = &wk;
	sess.mtree = m;
	snprintf(sess.id, sizeof(sess.id), "s1");
	TAILQ_INIT(&sess.feed.subs);
	user.ops = d1.ops = d2.ops = &ops;
	user.role = IPC_ROLE_USER;
	user.next_seq = 40;	/* 40, 41 and 42 to go */
	d1.role = d2.role = IPC_ROLE_OBSERVER;
	d1.dash = d2.dash = 1;
	d1.next_seq = d2.next_seq = 43;
	sub_add(&user);
	ck_assert_ptr_null(sess.dash);
	ck_assert_ptr_null(sess.feed.tap);
	sub_add(&d1);
	ck_assert_ptr_nonnull(sess.dash);
	ck_assert_ptr_nonnull(sess.feed.tap);
	sub_add(&d2);
	sess.feed.tap(sess.feed.tap_arg, evt("thought"));
	sess.feed.tap(sess.feed.tap_arg, evt("token"));
	sess.feed.tap(sess.feed.tap_arg, evt("thought"));
	stats(&sess, &st);
	ck_assert_uint_eq(st.thoughts, 2);
	ck_assert_uint_eq(st.events, 3);
	ck_assert_uint_eq(st.dashboards, 2);
	ck_assert_uint_eq(st.conns[IPC_ROLE_USER], 1);
	ck_assert_uint_eq(st.conns[IPC_ROLE_OBSERVER], 0);
	ck_assert_uint_eq(st.bytes_total, 100);
	ck_assert_uint_eq(st.behind_max, 3);
	ck_assert_uint_eq(st.interval_ms, 5000);
	ck_assert_int_eq(st.nslowest, 1);
	ck_assert_int_eq(st.slowest[0].role, IPC_ROLE_USER);
	ck_assert_uint_eq(st.slowest[0].behind, 3);
	/* The timer sends to each dashboard. */
	sent = 0;
	dash_cb(-1, EV_TIMEOUT, sess.dash);
	ck_assert_int_eq(sent, 2);
	sub_del(&d1);
	ck_assert_ptr_nonnull(sess.dash);
	sub_del(&d2);
	ck_assert_ptr_null(sess.dash);
	ck_assert_ptr_null(sess.feed.tap);
	dash_free(&sess);	/* twice is harmless */
	cJSON_Delete(m);
	event_base_free(wk.base);
}
END_TEST

/* The subscribers furthest behind, most first, at most DASH_SLOWEST. */
START_TEST(test_slowest)
{
	struct dash_stats st;
	struct deliver_sub sub;
	cJSON *m = meta(ONE_AGENT "}"), *b, *a;
	uint64_t behind[] = { 3, 0, 9, 1, 7, 7, 2, 5, 4, 8, 6 };
	size_t i;

	memset(&st, 0, sizeof(st));
	memset(&sub, 0, sizeof(sub));
	sub.role = IPC_ROLE_OBSERVER;
	for (i = 0; i < sizeof(behind) / sizeof(behind[0]); i++)
		slow_keep(&st, &sub, i, behind[i]);
	ck_assert_int_eq(st.nslowest, DASH_SLOWEST);
	ck_assert_uint_eq(st.slowest[0].behind, 9);
	ck_assert_uint_eq(st.slowest[1].behind, 8);
	/* Equally behind: more bytes first. */
	ck_assert_uint_eq(st.slowest[2].behind, 7);
	ck_assert_uint_eq(st.slowest[2].bytes, 5);
	ck_assert_uint_eq(st.slowest[3].bytes, 4);
	ck_assert_uint_eq(st.slowest[7].behind, 3);
	sub.dash = 1;
	slow_keep(&st, &sub, 1, 100);
	b = dash_body(m, &st);
	a = cJSON_GetObjectItem(cJSON_GetObjectItem(b, "queues"), "slowest");
	ck_assert_int_eq(cJSON_GetArraySize(a), DASH_SLOWEST);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(a, 0), "role")), "dashboard");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(a, 1), "role")), "observer");
	ck_assert(num(b, "queues.slowest.1.eventsBehind") == 9);
	cJSON_Delete(b);
	cJSON_Delete(m);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("dash");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_one_agent);
	tcase_add_test(tc, test_pending_kinds);
	tcase_add_test(tc, test_agents);
	tcase_add_test(tc, test_life);
	tcase_add_test(tc, test_slowest);
	suite_add_tcase(s, tc);
	return check_run(s);
}
