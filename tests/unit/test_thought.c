/*
 * Unit tests for thoughts (workers/thought.c): the field checks, the DAG
 * checks, the per-recipient rule and views, the rate limit, adoption from
 * the log and the graph, against a fake session whose log is an array
 * (fake_sess.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/thought.c"
#include "../../workers/evt.c"
#include "../../workers/wk.h"
#include "check_main.h"
#include "fake_sess.h"

static struct config conf;
static struct wk wk;
static int warnings;		/* throttle_warnings sent */
static char warned_to[80];

void
deliver_notify(struct deliver *d, const char *agent, const char *json)
{
	(void)d;
	ck_assert_ptr_nonnull(strstr(json, "\"type\":\"throttle_warning\""));
	snprintf(warned_to, sizeof(warned_to), "%s", agent);
	warnings++;
}

void
sess_answer_durable(struct sess *s, struct sess_client *c, const char *id,
    uint64_t seq, enum sess_answer a, struct sess_result *r)
{
	(void)s;
	(void)c;
	(void)id;
	(void)a;
	r->seq = seq;
}

static void
setup(void)
{
	memset(&conf, 0, sizeof(conf));
	conf.thought_rate = 20;
	conf.thought_queue_depth = 50;
	wk.conf = &conf;
	fake_sess_init(&wk);
	snprintf(fs.s.id, sizeof(fs.s.id), "s1");
	warnings = 0;
	warned_to[0] = '\0';
}

static void
teardown(void)
{
	thought_free(&fs.s);
	fake_sess_free();
}

/* A thought object from JSON text (the caller's). */
static cJSON *
T(const char *json)
{
	cJSON *t = cJSON_Parse(json);

	ck_assert_ptr_nonnull(t);
	return t;
}

/* thought_check's verdict on json; msg must name field when refused. */
static void
check_field(const char *json, const char *field)
{
	cJSON *t = T(json);
	char msg[256];
	int rc = thought_check(t, msg, sizeof(msg));

	if (field == NULL)
		ck_assert_msg(rc == 0, "%s refused: %s", json, msg);
	else {
		ck_assert_msg(rc == -1, "%s accepted", json);
		ck_assert_msg(strstr(msg, field) != NULL, "%s: '%s' does not "
		    "name %s", json, msg, field);
	}
	cJSON_Delete(t);
}

START_TEST(test_fields)
{
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0.5}", NULL);
	check_field("{\"thoughtId\":\"th_a-1_B\",\"content\":\"c\","
	    "\"category\":\"synthesis\",\"confidence\":1,\"references\":"
	    "[\"src/a.c:1\",\"th_x\"],\"inResponseTo\":\"th_y\","
	    "\"actionable\":true,\"shared\":false}", NULL);
	check_field("[]", "'thought'");
	check_field("{\"category\":\"plan\",\"confidence\":0.5}", "content");
	check_field("{\"content\":\"\",\"category\":\"plan\","
	    "\"confidence\":0.5}", "content");
	check_field("{\"content\":\"c\",\"category\":\"musing\","
	    "\"confidence\":0.5}", "category");
	check_field("{\"content\":\"c\",\"category\":\"plan\"}", "confidence");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":1.01}", "confidence");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":-0.01}", "confidence");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":\"high\"}", "confidence");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0,\"references\":\"th_a\"}", "references");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0,\"references\":[\"\"]}", "references");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0,\"references\":[1]}", "references");
	check_field("{\"thoughtId\":\"x1\",\"content\":\"c\","
	    "\"category\":\"plan\",\"confidence\":0}", "thoughtId");
	check_field("{\"thoughtId\":\"th_\",\"content\":\"c\","
	    "\"category\":\"plan\",\"confidence\":0}", "thoughtId");
	check_field("{\"thoughtId\":\"th_a b\",\"content\":\"c\","
	    "\"category\":\"plan\",\"confidence\":0}", "thoughtId");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0,\"inResponseTo\":\"nope\"}", "inResponseTo");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0,\"actionable\":1}", "actionable");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0,\"shared\":\"no\"}", "shared");
	check_field("{\"content\":\"c\",\"category\":\"plan\","
	    "\"confidence\":0,\"mood\":\"ok\"}", "mood");
}
END_TEST

START_TEST(test_bounds)
{
	char *big = malloc(THOUGHT_CONTENT_MAX + 200), *p;
	cJSON *t, *refs;
	char msg[256];
	int i;

	p = big + sprintf(big, "{\"category\":\"plan\",\"confidence\":0,"
	    "\"content\":\"");
	memset(p, 'x', THOUGHT_CONTENT_MAX);
	strcpy(p + THOUGHT_CONTENT_MAX, "\"}");
	t = T(big);
	ck_assert_int_eq(thought_check(t, msg, sizeof(msg)), 0);
	cJSON_Delete(t);
	strcpy(p + THOUGHT_CONTENT_MAX, "y\"}");
	t = T(big);
	ck_assert_int_eq(thought_check(t, msg, sizeof(msg)), -1);
	cJSON_Delete(t);
	free(big);
	t = T("{\"content\":\"c\",\"category\":\"plan\",\"confidence\":0}");
	refs = cJSON_AddArrayToObject(t, "references");
	for (i = 0; i < THOUGHT_REFS_MAX; i++)
		cJSON_AddItemToArray(refs, cJSON_CreateString("a.c"));
	ck_assert_int_eq(thought_check(t, msg, sizeof(msg)), 0);
	cJSON_AddItemToArray(refs, cJSON_CreateString("a.c"));
	ck_assert_int_eq(thought_check(t, msg, sizeof(msg)), -1);
	cJSON_Delete(t);
}
END_TEST

START_TEST(test_dag)
{
	cJSON *nodes = T("[{\"thoughtId\":\"th_a\"},{\"thoughtId\":\"th_b\","
	    "\"inResponseTo\":\"th_a\"}]"), *t;
	char msg[256];

	t = T("{\"inResponseTo\":\"th_b\",\"references\":[\"th_a\","
	    "\"src/x.c\",\"https://example.org/th_q\"]}");
	ck_assert_int_eq(thought_dag_check(nodes, t, msg, sizeof(msg)), 0);
	cJSON_Delete(t);
	t = T("{\"inResponseTo\":\"th_c\"}");
	ck_assert_int_eq(thought_dag_check(nodes, t, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "inResponseTo"));
	ck_assert_ptr_nonnull(strstr(msg, "th_c"));
	cJSON_Delete(t);
	t = T("{\"references\":[\"th_a\",\"th_zz\"]}");
	ck_assert_int_eq(thought_dag_check(nodes, t, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "th_zz"));
	cJSON_Delete(t);
	t = T("{\"thoughtId\":\"th_b\"}");
	ck_assert_int_eq(thought_dag_check(nodes, t, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "already exists"));
	cJSON_Delete(t);
	t = T("{\"thoughtId\":\"th_s\",\"inResponseTo\":\"th_s\"}");
	ck_assert_int_eq(thought_dag_check(nodes, t, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "cycle"));
	cJSON_Delete(t);
	t = T("{\"thoughtId\":\"th_s\",\"references\":[\"th_a\",\"th_s\"]}");
	ck_assert_int_eq(thought_dag_check(nodes, t, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "cycle"));
	cJSON_Delete(t);
	cJSON_Delete(nodes);
}
END_TEST

START_TEST(test_acyclic)
{
	cJSON *n;
	char msg[256];

	n = T("[{\"thoughtId\":\"th_a\"},{\"thoughtId\":\"th_b\","
	    "\"inResponseTo\":\"th_a\"},{\"thoughtId\":\"th_c\","
	    "\"inResponseTo\":\"th_b\",\"references\":[\"th_a\",\"x.c\"]},"
	    "{\"thoughtId\":\"th_d\",\"references\":[\"th_a\",\"th_c\"]}]");
	ck_assert_int_eq(thought_acyclic(n, msg, sizeof(msg)), 0);
	cJSON_Delete(n);
	/* a -> c (reference), b -> a, c -> b: a cycle of three */
	n = T("[{\"thoughtId\":\"th_a\",\"references\":[\"th_c\"]},"
	    "{\"thoughtId\":\"th_b\",\"inResponseTo\":\"th_a\"},"
	    "{\"thoughtId\":\"th_c\",\"inResponseTo\":\"th_b\"},"
	    "{\"thoughtId\":\"th_d\"}]");
	ck_assert_int_eq(thought_acyclic(n, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "cycle"));
	cJSON_Delete(n);
	n = T("[{\"thoughtId\":\"th_a\"},{\"thoughtId\":\"th_b\","
	    "\"inResponseTo\":\"th_b\"}]");
	ck_assert_int_eq(thought_acyclic(n, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "th_b"));
	cJSON_Delete(n);
	n = cJSON_CreateArray();
	ck_assert_int_eq(thought_acyclic(n, msg, sizeof(msg)), 0);
	cJSON_Delete(n);
}
END_TEST

START_TEST(test_rule)
{
	enum thought_vis m;

	ck_assert_int_eq(thought_vis_parse("summary", &m), 0);
	ck_assert_int_eq(m, THOUGHT_VIS_SUMMARY);
	ck_assert_int_eq(thought_vis_parse("ALL", &m), -1);
	/* all: everyone, shared or not */
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_ALL, IPC_ROLE_OBSERVER, "",
	    "a1", "plan", 0), THOUGHT_FULL);
	/* the author and an admin: always */
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SELECTIVE, IPC_ROLE_AGENT,
	    "a1", "a1", "plan", 0), THOUGHT_FULL);
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SUMMARY, IPC_ROLE_ADMIN, "",
	    "a1", "plan", 0), THOUGHT_FULL);
	/* selective: private ones hidden from others */
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SELECTIVE, IPC_ROLE_AGENT,
	    "a2", "a1", "plan", 0), THOUGHT_HIDDEN);
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SELECTIVE, IPC_ROLE_USER, "",
	    "a1", "plan", 0), THOUGHT_HIDDEN);
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SELECTIVE, IPC_ROLE_OBSERVER,
	    "", "a1", "plan", 1), THOUGHT_FULL);
	/* an agent connection without an id is not the author */
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SELECTIVE, IPC_ROLE_AGENT,
	    "", "", "plan", 0), THOUGHT_HIDDEN);
	/* summary: synthesis in full, the rest reduced, private hidden */
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SUMMARY, IPC_ROLE_AGENT,
	    "a2", "a1", "synthesis", 1), THOUGHT_FULL);
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SUMMARY, IPC_ROLE_OBSERVER,
	    "", "a1", "analysis", 1), THOUGHT_REDUCED);
	ck_assert_int_eq(thought_sees(THOUGHT_VIS_SUMMARY, IPC_ROLE_USER, "",
	    "a1", "synthesis", 0), THOUGHT_HIDDEN);
}
END_TEST

/* thought_log of json as agent: its seq (0 refused, r says why). */
static uint64_t
share(const char *agent, const char *json, struct sess_result *r)
{
	cJSON *t = T(json);
	uint64_t seq;

	memset(r, 0, sizeof(*r));
	seq = thought_log(&fs.s, agent, t, r);
	cJSON_Delete(t);
	return seq;
}

START_TEST(test_log)
{
	struct sess_result r;
	cJSON *e, *nodes;
	const char *id;

	ck_assert_uint_eq(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 1);
	e = fake_logged("thought", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "agentId")), "a1");
	id = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(e,
	    "thought"), "thoughtId"));
	ck_assert_int_eq(strncmp(id, "th_", 3), 0);
	ck_assert_uint_eq(strlen(id), 15);
	/* defaults are filled in */
	ck_assert(cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetObjectItem(e,
	    "thought"), "references")));
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(e,
	    "thought"), "actionable")));
	nodes = cJSON_GetObjectItem(fs.s.mtree, "thoughts");
	ck_assert_int_eq(cJSON_GetArraySize(nodes), 1);
	ck_assert_int_eq(fs.saves, 1);
	ck_assert_double_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(nodes, 0), "seq")), 1);
	/* refused ones change nothing */
	ck_assert_uint_eq(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5,\"inResponseTo\":\"th_none\"}", &r),
	    0);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	ck_assert_uint_eq(share("", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	fs.refuse = 1;
	ck_assert_uint_eq(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	ck_assert_str_eq(r.code, "OVERLOADED");
	fs.refuse = 0;
	ck_assert_int_eq(cJSON_GetArraySize(nodes), 1);
	ck_assert_int_eq(fake_count("thought"), 1);
	fs.s.ended = 1;
	ck_assert_uint_eq(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	ck_assert_str_eq(r.code, "SESSION_ENDED");
}
END_TEST

START_TEST(test_rate)
{
	struct sess_result r;
	int i;

	conf.thought_rate = 5;
	for (i = 0; i < 5; i++) {
		ck_assert_uint_ne(share("a1", "{\"content\":\"c\",\"category\":"
		    "\"plan\",\"confidence\":0.5}", &r), 0);
		/* warned at 80%: the 4th and the 5th */
		ck_assert_int_eq(warnings, i < 3 ? 0 : i - 2);
	}
	ck_assert_str_eq(warned_to, "a1");
	ck_assert_uint_eq(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	ck_assert_str_eq(r.code, "RATE_LIMITED");
	ck_assert_int_eq(r.http, 429);
	/* another agent has its own window */
	ck_assert_uint_ne(share("a2", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	/* a window older than a minute is forgotten */
	for (i = 0; i < RATE_AGENTS; i++)
		if (strcmp(fs.s.thoughts->rates[i].agent, "a1") == 0) {
			struct thought_rate *t = &fs.s.thoughts->rates[i];
			unsigned k;

			for (k = 0; k < t->cap; k++)
				t->at[k] -= THOUGHT_WINDOW_MS;
		}
	ck_assert_uint_ne(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
}
END_TEST

START_TEST(test_max)
{
	struct sess_result r;
	int i;

	conf.thought_rate = 10000;
	for (i = 0; i < THOUGHT_MAX; i++)
		ck_assert_uint_ne(share("a1", "{\"content\":\"c\",\"category\":"
		    "\"plan\",\"confidence\":0.5}", &r), 0);
	ck_assert_uint_eq(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	ck_assert_str_eq(r.code, "RATE_LIMITED");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(fs.s.mtree,
	    "thoughts")), THOUGHT_MAX);
}
END_TEST

/* A session whose saved state is near its bound takes no more thoughts. */
START_TEST(test_meta_full)
{
	struct sess_result r;

	ck_assert_uint_ne(share("a1", "{\"content\":\"c\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	fs.meta_full = 1;
	ck_assert_uint_eq(share("a1", "{\"content\":\"d\",\"category\":"
	    "\"plan\",\"confidence\":0.5}", &r), 0);
	ck_assert_str_eq(r.code, "RATE_LIMITED");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(fs.s.mtree,
	    "thoughts")), 1);
	ck_assert_int_eq(cJSON_GetArraySize(fs.log), 1);
}
END_TEST

static const char ev1[] = "{\"v\":1,\"type\":\"thought\",\"sessionId\":"
    "\"s1\",\"seq\":7,\"ts\":\"t\",\"agentId\":\"a1\",\"thought\":{"
    "\"thoughtId\":\"th_p\",\"content\":\"secret\",\"category\":"
    "\"analysis\",\"confidence\":0.5,\"references\":[\"a.c\"],"
    "\"actionable\":true}}";
static const char ev2[] = "{\"v\":1,\"type\":\"thought\",\"sessionId\":"
    "\"s1\",\"seq\":8,\"ts\":\"t\",\"agentId\":\"a2\",\"thought\":{"
    "\"thoughtId\":\"th_q\",\"content\":\"sum\",\"category\":"
    "\"synthesis\",\"confidence\":0.5,\"references\":[\"th_p\"],"
    "\"inResponseTo\":\"th_p\",\"actionable\":false,\"shared\":false}}";

START_TEST(test_adopt_graph)
{
	cJSON *g;

	thought_adopt(&fs.s, 7, ev1, strlen(ev1));
	thought_adopt(&fs.s, 7, ev1, strlen(ev1));	/* once */
	thought_adopt(&fs.s, 8, ev2, strlen(ev2));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(fs.s.mtree,
	    "thoughts")), 2);
	g = thought_graph(&fs.s, IPC_ROLE_ADMIN, "", NULL, NULL);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "nodes")),
	    2);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "edges")),
	    2);
	cJSON_Delete(g);
	g = thought_graph(&fs.s, IPC_ROLE_ADMIN, "", "a2", NULL);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "nodes")),
	    1);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "edges")),
	    0);
	cJSON_Delete(g);
	proto_set(fs.s.mtree, "config", T("{\"thoughtVisibility\":"
	    "\"summary\"}"));
	thought_free(&fs.s);	/* the mode is read again */
	/* an observer: th_p reduced, th_q (private) left out, no edges */
	g = thought_graph(&fs.s, IPC_ROLE_OBSERVER, "", NULL, NULL);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "nodes")),
	    1);
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetArrayItem(
	    cJSON_GetObjectItem(g, "nodes"), 0), "content"));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "edges")),
	    0);
	cJSON_Delete(g);
	/* its author sees both */
	g = thought_graph(&fs.s, IPC_ROLE_AGENT, "a2", NULL, NULL);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "nodes")),
	    2);
	cJSON_Delete(g);
}
END_TEST

/* Not a thought, though its type starts like one. */
#define OTHER	"{\"v\":1,\"type\":\"thoughts\"}"

START_TEST(test_view)
{
	struct deliver_sub sub;
	struct evt *e1 = evt_new(7, ev1, strlen(ev1));
	struct evt *e2 = evt_new(8, ev2, strlen(ev2)), *v, *w;
	struct evt *other = evt_new(9, OTHER, strlen(OTHER));

	ck_assert(e1->scoped && e2->scoped && !other->scoped);
	memset(&sub, 0, sizeof(sub));
	sub.role = IPC_ROLE_OBSERVER;
	sub.agent = "";
	/* all (no config): itself */
	ck_assert_ptr_eq(thought_view(&fs.s, &sub, e1), e1);
	/* the mode is read once per session */
	proto_set(fs.s.mtree, "config", T("{\"thoughtVisibility\":"
	    "\"summary\"}"));
	ck_assert_ptr_eq(thought_view(&fs.s, &sub, e1), e1);
	thought_free(&fs.s);
	v = thought_view(&fs.s, &sub, e1);
	ck_assert_ptr_ne(v, e1);
	ck_assert_uint_eq(v->seq, 7);
	ck_assert_str_eq(v->type, "thought");
	ck_assert_ptr_null(strstr(v->json, "secret"));
	ck_assert_ptr_nonnull(strstr(v->json, "\"redacted\":true"));
	/* made once, shared */
	ck_assert_ptr_eq(thought_view(&fs.s, &sub, e1), v);
	w = thought_view(&fs.s, &sub, e2);
	ck_assert_str_eq(w->type, "filtered");
	ck_assert_uint_eq(w->seq, 8);
	ck_assert_ptr_null(strstr(w->json, "th_q"));
	ck_assert_ptr_null(strstr(w->json, "a2"));
	sub.role = IPC_ROLE_AGENT;
	sub.agent = "a2";
	ck_assert_ptr_eq(thought_view(&fs.s, &sub, e2), e2);
	sub.role = IPC_ROLE_ADMIN;
	sub.agent = "";
	ck_assert_ptr_eq(thought_view(&fs.s, &sub, e1), e1);
	evt_unref(e1);
	evt_unref(e2);
	evt_unref(other);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("thought");
	TCase *tc = tcase_create("thought");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fields);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_dag);
	tcase_add_test(tc, test_acyclic);
	tcase_add_test(tc, test_rule);
	tcase_add_test(tc, test_log);
	tcase_add_test(tc, test_rate);
	tcase_add_test(tc, test_max);
	tcase_add_test(tc, test_meta_full);
	tcase_add_test(tc, test_adopt_graph);
	tcase_add_test(tc, test_view);
	suite_add_tcase(s, tc);
	return check_run(s);
}
