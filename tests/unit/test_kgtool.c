/*
 * Unit tests for the knowledge tools (workers/kgtool.c): their arguments
 * checked, the request each makes of the project's worker (kgcall_start
 * below stands in and records it), the batch id of an agent's call (the
 * same on a re-run of the turn, another for another call), and the
 * answers as the model or an MCP client reads them.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../workers/kgtool.c"
#include "check_main.h"

static struct config conf;
static struct wk wk;
static char got_project[128], got_method[8], got_target[32], got_body[4096];
static struct kgcall_who got_who;
static kgcall_fn got_done;
static void *got_arg;
static int ncalls;

struct kgcall *
kgcall_start(struct wk *w, const char *project, const char *method,
    const char *target, const char *body, size_t len,
    const struct kgcall_who *who, kgcall_fn done, void *arg)
{
	(void)w;
	ncalls++;
	snprintf(got_project, sizeof(got_project), "%s", project);
	snprintf(got_method, sizeof(got_method), "%s", method);
	snprintf(got_target, sizeof(got_target), "%s", target);
	snprintf(got_body, sizeof(got_body), "%.*s", (int)len, body);
	got_who = *who;
	got_done = done;
	got_arg = arg;
	return (struct kgcall *)&got_done;	/* any non-NULL handle */
}

void
kgcall_cancel(struct kgcall *c)
{
	(void)c;
}

struct answer {
	int	 calls;
	int	 is_error;
	char	 text[1024];
};

static void
done_cb(void *arg, int is_error, const char *text, const char *code)
{
	struct answer *a = arg;

	(void)code;
	a->calls++;
	a->is_error = is_error;
	snprintf(a->text, sizeof(a->text), "%s", text);
}

static void
setup(void)
{
	memset(&conf, 0, sizeof(conf));
	conf.knowledge_tools = 1;
	memset(&wk, 0, sizeof(wk));
	wk.conf = &conf;
	wk.base = event_base_new();
	ncalls = 0;
	got_body[0] = '\0';
}

static void
teardown(void)
{
	event_base_free(wk.base);
}

static int
check_args(const char *name, const char *json, char *msg)
{
	cJSON *a = cJSON_Parse(json);
	int rc = kgtool_check(name, a, msg, 300);

	cJSON_Delete(a);
	return rc;
}

START_TEST(t_check)
{
	char msg[300];

	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\"p\","
	    "\"query\":\"(get-principles)\"}", msg), 0);
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\"p\","
	    "\"query\":\"x\",\"format\":\"json\"}", msg), 0);
	ck_assert_int_eq(check_args(KGTOOL_ACT, "{\"projectId\":\"p.1_x-y\","
	    "\"actions\":[[\"record-principle\",{}]]}", msg), 0);
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"query\":\"x\"}", msg),
	    -1);
	ck_assert_ptr_nonnull(strstr(msg, "projectId"));
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\".p\","
	    "\"query\":\"x\"}", msg), -1);
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\"a/b\","
	    "\"query\":\"x\"}", msg), -1);
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\"p\"}",
	    msg), -1);
	ck_assert_ptr_nonnull(strstr(msg, "query"));
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\"p\","
	    "\"query\":\"\"}", msg), -1);
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\"p\","
	    "\"query\":\"x\",\"format\":\"xml\"}", msg), -1);
	ck_assert_ptr_nonnull(strstr(msg, "format"));
	ck_assert_int_eq(check_args(KGTOOL_QUERY, "{\"projectId\":\"p\","
	    "\"query\":\"x\",\"actions\":[]}", msg), -1);
	ck_assert_ptr_nonnull(strstr(msg, "unknown argument 'actions'"));
	ck_assert_int_eq(check_args(KGTOOL_ACT, "{\"projectId\":\"p\","
	    "\"actions\":[]}", msg), -1);
	ck_assert_int_eq(check_args(KGTOOL_ACT, "{\"projectId\":\"p\","
	    "\"actions\":{}}", msg), -1);
	ck_assert_int_eq(check_args(KGTOOL_ACT, "[1]", msg), -1);
	ck_assert_int_eq(check_args("kb_search", "{}", msg), -1);
	ck_assert_int_eq(kgtool_check(KGTOOL_ACT, NULL, msg, sizeof(msg)), -1);
}
END_TEST

START_TEST(t_defs)
{
	struct llm_tool_def defs[KGTOOL_N];
	struct sess s;
	size_t i;
	cJSON *j;

	memset(&s, 0, sizeof(s));
	s.wk = &wk;
	ck_assert_uint_eq(kgtool_defs(&s, defs, NULL, NULL), 2);
	for (i = 0; i < KGTOOL_N; i++) {
		/* Every schema is JSON, an object with its required fields. */
		ck_assert_ptr_nonnull(j = cJSON_Parse(defs[i].schema_json));
		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j,
		    "required")), 2);
		cJSON_Delete(j);
	}
	ck_assert(kgtool_is(&s, KGTOOL_ACT));
	conf.knowledge_tools = 0;	/* knowledge-tools off */
	ck_assert_uint_eq(kgtool_defs(&s, defs, NULL, NULL), 0);
	ck_assert(!kgtool_is(&s, KGTOOL_ACT));
}
END_TEST

static void
loop(void)
{
	event_base_loop(wk.base, EVLOOP_NONBLOCK);
}

static void
answer(int status, const char *body)
{
	got_done(got_arg, status, "application/json", body, strlen(body),
	    status == 0 ? body : NULL);
}

/* The batch id in the last request's body. */
static void
last_batch(char *out)
{
	cJSON *b = cJSON_Parse(got_body);

	snprintf(out, 48, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(b,
	    "batchId")));
	cJSON_Delete(b);
}

START_TEST(t_run_batch_id)
{
	static const char args[] = "{\"projectId\":\"proj\",\"actions\":"
	    "[[\"record-principle\",{\"name\":\"n\",\"description\":\"d\"}]]}";
	struct sess s;
	struct turn t;
	struct answer a;
	char b1[48], b2[48], b3[48], b4[48];

	memset(&s, 0, sizeof(s));
	memset(&t, 0, sizeof(t));
	s.wk = &wk;
	snprintf(s.id, sizeof(s.id), "sess-a");
	s.mtree = cJSON_Parse("{\"owner\":\"alice\"}");
	s.turn = &t;
	snprintf(t.msgid, sizeof(t.msgid), "m-1");
	snprintf(t.req, sizeof(t.req), "00000000000000ff");
	t.model_calls = 1;
	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgtool_run(&s, KGTOOL_ACT, "call_1", args,
	    done_cb, &a));
	ck_assert_int_eq(ncalls, 1);
	ck_assert_str_eq(got_project, "proj");
	ck_assert_str_eq(got_method, "POST");
	ck_assert_str_eq(got_target, "/actions");
	ck_assert_int_eq(got_who.role, IPC_ROLE_AGENT);
	ck_assert_str_eq(got_who.subject, "alice");
	ck_assert_uint_eq(got_who.conn_id, 0xff);
	last_batch(b1);
	ck_assert_int_eq(strncmp(b1, "tc-", 3), 0);
	ck_assert_uint_eq(strlen(b1), 35);
	answer(202, "{\"seq\":7,\"batchId\":\"x\",\"actions\":1}");
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.is_error, 0);
	ck_assert_str_eq(a.text, "{\"seq\":7,\"batchId\":\"x\",\"actions\":1}");
	/* The turn's re-run (attempt 1: "m-1.1"): the same batch. */
	snprintf(t.msgid, sizeof(t.msgid), "m-1.1");
	ck_assert_ptr_nonnull(kgtool_run(&s, KGTOOL_ACT, "call_1", args,
	    done_cb, &a));
	last_batch(b2);
	ck_assert_str_eq(b1, b2);
	answer(200, "{\"seq\":7,\"batchId\":\"x\",\"actions\":1,"
	    "\"duplicate\":true}");
	ck_assert_str_eq(a.text, "{\"seq\":7,\"batchId\":\"x\",\"actions\":1,"
	    "\"duplicate\":true}");
	/* Another call id, another step, another session: another batch. */
	ck_assert_ptr_nonnull(kgtool_run(&s, KGTOOL_ACT, "call_2", args,
	    done_cb, &a));
	last_batch(b3);
	answer(202, "{}");
	t.model_calls = 2;
	ck_assert_ptr_nonnull(kgtool_run(&s, KGTOOL_ACT, "call_1", args,
	    done_cb, &a));
	last_batch(b4);
	answer(202, "{}");
	ck_assert_str_ne(b1, b3);
	ck_assert_str_ne(b1, b4);
	ck_assert_str_ne(b3, b4);
	cJSON_Delete(s.mtree);
}
END_TEST

/* Runs tool name with args, answers status body; the answer. */
static struct answer
run(const char *name, const char *args, int role, int status,
    const char *body)
{
	struct kgcall_who who = { role, "", 0, NULL };
	struct answer a;
	cJSON *j = cJSON_Parse(args);
	int before = ncalls;

	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgtool_start(&wk, name, j, NULL, &who, done_cb,
	    &a));
	cJSON_Delete(j);
	ck_assert_int_eq(a.calls, 0);	/* never before it returns */
	if (ncalls > before)
		answer(status, body);
	else
		loop();
	ck_assert_int_eq(a.calls, 1);
	return a;
}

START_TEST(t_answers)
{
	static const char q[] = "{\"projectId\":\"p\",\"query\":\"(x)\"}";
	static const char act[] = "{\"projectId\":\"p\",\"actions\":[[\"a\","
	    "{}]]}";
	struct answer a;

	a = run(KGTOOL_QUERY, q, IPC_ROLE_USER, 200, "{\"format\":\"sexp\","
	    "\"result\":\"(list (principle \\\"n\\\"))\"}");
	ck_assert_int_eq(a.is_error, 0);
	ck_assert_str_eq(a.text, "(list (principle \"n\"))");
	ck_assert_str_eq(got_body, "{\"query\":\"(x)\",\"format\":\"sexp\"}");
	ck_assert_str_eq(got_target, "/query");
	a = run(KGTOOL_QUERY, q, IPC_ROLE_OBSERVER, 200, "{\"format\":\"json\","
	    "\"result\":[{\"name\":\"n\"}]}");
	ck_assert_int_eq(a.is_error, 0);
	ck_assert_str_eq(a.text, "[{\"name\":\"n\"}]");
	/* An evaluation error is data for the service, an error here. */
	a = run(KGTOOL_QUERY, q, IPC_ROLE_USER, 200, "{\"format\":\"sexp\","
	    "\"error\":{\"code\":\"QUERY_LIMIT\",\"message\":\"steps: over "
	    "200000\"}}");
	ck_assert_int_eq(a.is_error, 1);
	ck_assert_str_eq(a.text, "QUERY_LIMIT: steps: over 200000");
	/* INVALID_ACTION: the message, and the field should it not say. */
	a = run(KGTOOL_ACT, act, IPC_ROLE_USER, 400, "{\"error\":{\"code\":"
	    "\"INVALID_ACTION\",\"message\":\"action 0 (a): field \\\"x\\\": "
	    "bad\",\"action\":0,\"op\":\"a\",\"field\":\"x\"}}");
	ck_assert_int_eq(a.is_error, 1);
	ck_assert_str_eq(a.text, "INVALID_ACTION: action 0 (a): field \"x\": "
	    "bad");
	a = run(KGTOOL_ACT, act, IPC_ROLE_USER, 400, "{\"error\":{\"code\":"
	    "\"INVALID_ACTION\",\"message\":\"bad value\",\"field\":\"conf\"}}");
	ck_assert_str_eq(a.text, "INVALID_ACTION: bad value (field \"conf\")");
	a = run(KGTOOL_ACT, act, IPC_ROLE_AGENT, 503, "not json");
	ck_assert_int_eq(a.is_error, 1);
	ck_assert_ptr_nonnull(strstr(a.text, "503"));
	a = run(KGTOOL_ACT, act, IPC_ROLE_AGENT, 0, "no answer in time");
	ck_assert_int_eq(a.is_error, 1);
	ck_assert_ptr_nonnull(strstr(a.text, "could not be reached: no answer"));
	/* Refused before any request: bad arguments, an observer's act. */
	ncalls = 0;
	a = run(KGTOOL_QUERY, "{\"query\":\"x\"}", IPC_ROLE_USER, 0, "");
	ck_assert_int_eq(a.is_error, 1);
	ck_assert_ptr_nonnull(strstr(a.text, "projectId"));
	a = run(KGTOOL_ACT, act, IPC_ROLE_OBSERVER, 0, "");
	ck_assert_int_eq(a.is_error, 1);
	ck_assert_ptr_nonnull(strstr(a.text, "FORBIDDEN"));
	ck_assert_int_eq(ncalls, 0);
}
END_TEST

START_TEST(t_cancel)
{
	struct kgcall_who who = { IPC_ROLE_USER, "", 0, NULL };
	struct answer a;
	struct kgtool_call *kt;
	cJSON *j = cJSON_Parse("{\"query\":\"x\"}");

	/* An answer waiting for the loop, cancelled: never given. */
	memset(&a, 0, sizeof(a));
	kt = kgtool_start(&wk, KGTOOL_QUERY, j, NULL, &who, done_cb, &a);
	cJSON_Delete(j);
	kgtool_cancel(kt);
	loop();
	ck_assert_int_eq(a.calls, 0);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("kgtool");
	TCase *tc = tcase_create("kgtool");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, t_check);
	tcase_add_test(tc, t_defs);
	tcase_add_test(tc, t_run_batch_id);
	tcase_add_test(tc, t_answers);
	tcase_add_test(tc, t_cancel);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}

/* Never frozen here: the tree is the meta (sess_meta.c's thaw is not linked). */
cJSON *
sess_meta_thaw(const struct sess *s)
{
	return s->mtree;
}
