/*
 * Unit tests for the requests that wait for someone (workers/approve.c):
 * approvals and client tool calls, against a fake session whose log is an
 * array (fake_sess.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/approve.c"
#include "../../workers/wk.h"
#include "check_main.h"
#include "fake_sess.h"

static struct config conf;
static struct wk wk;
static int copied;	/* audit entries handed to the audit-log file */

/* workers/auditlog.c's, which has its own suite: counts what it gets. */
uint64_t
auditlog_event(struct sess *s, uint64_t seq)
{
	(void)s;
	if (seq != 0)
		copied++;
	return seq;
}

static void
setup(void)
{
	memset(&conf, 0, sizeof(conf));
	conf.approval_timeout_ms = 60000;
	conf.client_tool_timeout_ms = 60000;
	wk.conf = &conf;
	fake_sess_init(&wk);
	copied = 0;
}

static void
teardown(void)
{
	fake_sess_free();
}

/* A call's tool_start fields, as tools.c makes them. */
static cJSON *
call(const char *id, const char *tool)
{
	cJSON *c = cJSON_CreateObject();

	cJSON_AddStringToObject(c, "agentId", "agent-1");
	cJSON_AddStringToObject(c, "messageId", "m-3");
	cJSON_AddNumberToObject(c, "step", 1);
	cJSON_AddStringToObject(c, "toolCallId", id);
	cJSON_AddStringToObject(c, "tool", tool);
	cJSON_AddItemToObject(c, "args", cJSON_Parse("{\"path\":\"/tmp/x\"}"));
	cJSON_AddStringToObject(c, "risk", "high");
	return c;
}

static int
npending(int calls)
{
	cJSON *p = approve_pending(&fs.s, calls);
	int n = cJSON_GetArraySize(p);

	cJSON_Delete(p);
	return n;
}

START_TEST(request_answer_once)
{
	struct sess_result r;
	const char *logged = NULL;
	cJSON *c = call("c1", "fs__write"), *req, *au;

	ck_assert_uint_gt(approve_request(&fs.s, c), 0);
	/* Asked again (a resumed turn): not logged twice. */
	ck_assert_uint_gt(approve_request(&fs.s, c), 0);
	ck_assert_int_eq(fake_count("tool_approve_request"), 1);
	req = fake_logged("tool_approve_request", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(req,
	    "summary")), "fs__write({\"path\":\"/tmp/x\"})");
	ck_assert_int_eq(npending(0), 1);
	ck_assert_int_eq(npending(1), 0);
	ck_assert(approve_waits(&fs.s, "c1"));

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "c1", "maybe", "user", NULL,
	    &logged, &r), -1);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	ck_assert_int_eq(npending(0), 1);

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "c1", "approve", "user", NULL,
	    &logged, &r), 1);
	ck_assert_str_eq(logged, "approved");
	ck_assert(approve_runs(logged));
	au = fake_logged("audit_entry", 0);
	ck_assert_ptr_nonnull(au);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(au,
	    "decision")), "approved");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(au, "by")),
	    "user");
	ck_assert_uint_eq(r.seq, (uint64_t)proto_count(au, "seq"));
	ck_assert_int_eq(npending(0), 0);

	/* A second answer is a duplicate and logs nothing. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "c1", "reject", "admin", NULL,
	    &logged, &r), 0);
	ck_assert(r.duplicate);
	ck_assert_int_eq(fake_count("audit_entry"), 1);
	ck_assert_int_eq(copied, 1);

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "nope", "approve", "user", NULL,
	    &logged, &r), -1);
	ck_assert_str_eq(r.code, "NOT_FOUND");
	cJSON_Delete(c);
}
END_TEST

START_TEST(always_and_refused_log)
{
	struct sess_result r;
	const char *logged = NULL;
	cJSON *c = call("c2", "fs__write");

	approve_request(&fs.s, c);
	/* The log refuses the decision: nothing changes. */
	fs.refuse = 1;
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "c2", "always", "user", NULL,
	    &logged, &r), -1);
	ck_assert_str_eq(r.code, "OVERLOADED");
	ck_assert_int_eq(npending(0), 1);
	ck_assert(!approve_always(&fs.s, "fs__write"));
	fs.refuse = 0;
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "c2", "always", "user", NULL,
	    &logged, &r), 1);
	ck_assert(approve_always(&fs.s, "fs__write"));
	ck_assert(!approve_always(&fs.s, "fs__read"));
	cJSON_Delete(c);
}
END_TEST

START_TEST(close_and_clear)
{
	cJSON *a = call("c3", "fs__write"), *b = call("c4", "fs__rm");

	approve_request(&fs.s, a);
	approve_request(&fs.s, b);
	approve_close(&fs.s, "c3", "timeout");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("audit_entry", 0), "decision")), "timeout");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("audit_entry", 0), "by")), "parleyd");
	approve_clear(&fs.s);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("audit_entry", 1), "decision")), "cancelled");
	ck_assert_int_eq(npending(0), 0);
	/* Settling a decision acted on logs nothing. */
	approve_request(&fs.s, a);
	approve_settle(&fs.s, "c3");
	ck_assert_int_eq(npending(0), 0);
	ck_assert_int_eq(fake_count("audit_entry"), 2);
	cJSON_Delete(a);
	cJSON_Delete(b);
}
END_TEST

START_TEST(client_call_once)
{
	struct sess_result r;
	cJSON *c = call("k1", "ide__read_file"), *mc, *res, *logged = NULL,
	    *p;

	ck_assert_uint_gt(approve_call(&fs.s, c, "ide", "read_file"), 0);
	ck_assert_uint_gt(approve_call(&fs.s, c, "ide", "read_file"), 0);
	ck_assert_int_eq(fake_count("mcp_call"), 1);
	mc = fake_logged("mcp_call", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(mc,
	    "server")), "ide");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(mc,
	    "tool")), "read_file");
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(mc, "args"));
	ck_assert_int_eq(npending(1), 1);
	ck_assert_int_eq(npending(0), 0);
	p = approve_pending(&fs.s, 1);
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetArrayItem(p, 0),
	    "kind"));
	cJSON_Delete(p);

	/* An approval's answer does not answer a client's call. */
	memset(&r, 0, sizeof(r));
	{
		const char *l;

		ck_assert_int_eq(approve_answer(&fs.s, "k1", "approve",
		    "user", NULL, &l, &r), -1);
		ck_assert_str_eq(r.code, "NOT_FOUND");
	}
	/* Settling an approval leaves a client's call waiting. */
	approve_settle(&fs.s, "k1");
	ck_assert_int_eq(npending(1), 1);

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_result(&fs.s, "k1", 0, "contents", NULL,
	    &logged, &r), 1);
	res = fake_logged("tool_result", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(res,
	    "result")), "contents");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(res,
	    "tool")), "ide__read_file");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(logged,
	    "toolCallId")), "k1");
	cJSON_Delete(logged);
	ck_assert_int_eq(npending(1), 0);

	memset(&r, 0, sizeof(r));
	logged = NULL;
	ck_assert_int_eq(approve_result(&fs.s, "k1", 0, "again", NULL,
	    &logged, &r), 0);
	ck_assert(r.duplicate);
	ck_assert_ptr_null(logged);
	ck_assert_int_eq(fake_count("tool_result"), 1);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_result(&fs.s, "k9", 0, "x", NULL, &logged,
	    &r), -1);
	ck_assert_str_eq(r.code, "NOT_FOUND");
	cJSON_Delete(c);
}
END_TEST

START_TEST(client_call_closed)
{
	cJSON *c = call("k2", "ide__write"), *res, *e;

	approve_call(&fs.s, c, "ide", "write");
	approve_clear(&fs.s);
	ck_assert_int_eq(npending(1), 0);
	/* A client call is closed by its tool_result, not an audit_entry. */
	ck_assert_int_eq(fake_count("audit_entry"), 0);
	res = fake_logged("tool_result", 0);
	e = cJSON_GetObjectItem(res, "error");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")),
	    "TOOL_ERROR");
	approve_call(&fs.s, c, "ide", "write");
	cJSON_Delete(c);
	c = call("k3", "ide__write");
	approve_call(&fs.s, c, "ide", "write");
	approve_close(&fs.s, "k3", "timeout");
	e = cJSON_GetObjectItem(fake_logged("tool_result", 1), "error");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")),
	    "TOOL_TIMEOUT");
	cJSON_Delete(c);
}
END_TEST

START_TEST(expired_answer)
{
	struct sess_result r;
	const char *logged = NULL;
	cJSON *c = call("c7", "fs__write"), *w, *au;

	approve_request(&fs.s, c);
	/* Asked two minutes ago, timeout one: its session was away. */
	w = cJSON_GetArrayItem(cJSON_GetObjectItem(fs.s.mtree, "waiting"), 0);
	proto_set(w, "ts", cJSON_CreateNumber((double)(util_now_ms() -
	    120000)));
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "c7", "approve", "user", NULL,
	    &logged, &r), -1);
	ck_assert_str_eq(r.code, "NOT_FOUND");
	ck_assert_ptr_nonnull(strstr(r.msg, "expired"));
	au = fake_logged("audit_entry", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(au,
	    "decision")), "timeout");
	ck_assert_int_eq(npending(APPROVE_APPROVALS), 0);
	/* Then it is an answered request: a duplicate. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_answer(&fs.s, "c7", "approve", "user", NULL,
	    &logged, &r), 0);
	ck_assert(r.duplicate);
	cJSON_Delete(c);
}
END_TEST

START_TEST(elicit_once)
{
	struct sess_result r;
	cJSON *c = call("c5", "everything__ask"), *content, *q, *res;

	ck_assert_uint_gt(approve_elicit(&fs.s, c, "c5.q1", "Your name?",
	    "{\"type\":\"object\"}"), 0);
	ck_assert_uint_gt(approve_elicit(&fs.s, c, "c5.q1", "Your name?",
	    NULL), 0);
	ck_assert_int_eq(fake_count("elicitation_request"), 1);
	q = fake_logged("elicitation_request", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(q,
	    "toolCallId")), "c5");
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(q, "requestedSchema"));
	ck_assert_int_eq(npending(APPROVE_ELICITS), 1);
	/* Found by its own id only: the call's id is no question's. */
	ck_assert(!approve_waits(&fs.s, "c5"));
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_elicit_answer(&fs.s, "c5.q1", "accept", NULL,
	    "user", &r), -1);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_elicit_answer(&fs.s, "c5.q1", "maybe", NULL,
	    "user", &r), -1);
	content = cJSON_Parse("{\"name\":\"Ada\"}");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_elicit_answer(&fs.s, "c5.q1", "decline",
	    content, "user", &r), -1);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_elicit_answer(&fs.s, "c5.q1", "accept",
	    content, "user", &r), 1);
	res = fake_logged("elicitation_result", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(res, "content"), "name")), "Ada");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(approve_elicit_answer(&fs.s, "c5.q1", "cancel", NULL,
	    "user", &r), 0);
	ck_assert(r.duplicate);
	ck_assert_int_eq(npending(APPROVE_ELICITS), 0);
	/* A question left when its call is gone is closed, by parleyd. */
	approve_elicit(&fs.s, c, "c5.q2", "Again?", NULL);
	approve_request(&fs.s, c);
	approve_clear_elicits(&fs.s);
	ck_assert_int_eq(npending(APPROVE_ELICITS), 0);
	ck_assert_int_eq(npending(APPROVE_APPROVALS), 1);
	res = fake_logged("elicitation_result", 1);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(res,
	    "by")), "parleyd");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(res,
	    "action")), "cancel");
	/* The turn's end closes an open question too (and returns). */
	approve_elicit(&fs.s, c, "c5.q3", "Last?", NULL);
	approve_clear(&fs.s);
	ck_assert_int_eq(npending(APPROVE_ELICITS), 0);
	ck_assert_int_eq(npending(APPROVE_APPROVALS), 0);
	ck_assert_int_eq(fake_count("elicitation_result"), 3);
	cJSON_Delete(content);
	cJSON_Delete(c);
}
END_TEST

START_TEST(result_body)
{
	cJSON *b = approve_result_body("a", "m-1", 2, "id", "t", 15, 1, "why",
	    NULL), *e = cJSON_GetObjectItem(b, "error");

	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")),
	    "TOOL_ERROR");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "message")), "why");
	ck_assert_ptr_null(cJSON_GetObjectItem(b, "result"));
	ck_assert_int_eq((int)proto_count(b, "duration"), 15);
	cJSON_Delete(b);
	b = approve_result_body("a", "m-1", 2, "id", "t", 0, 0, "ok", NULL);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(b,
	    "result")), "ok");
	ck_assert_ptr_null(cJSON_GetObjectItem(b, "error"));
	cJSON_Delete(b);
}
END_TEST

START_TEST(summary_cut_whole)
{
	char out[256], args[200];

	/* A cut inside a UTF-8 sequence would not be valid text. */
	memset(args, 'a', sizeof(args));
	memcpy(args + SUMMARY_ARGS - 1, "\xc3\xa9", 2);
	args[sizeof(args) - 1] = '\0';
	summary(out, sizeof(out), "t", args);
	ck_assert_ptr_nonnull(strstr(out, "..."));
	ck_assert_ptr_null(strstr(out, "\xc3..."));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("approve");
	TCase *tc = tcase_create("approve");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, request_answer_once);
	tcase_add_test(tc, always_and_refused_log);
	tcase_add_test(tc, close_and_clear);
	tcase_add_test(tc, client_call_once);
	tcase_add_test(tc, client_call_closed);
	tcase_add_test(tc, elicit_once);
	tcase_add_test(tc, expired_answer);
	tcase_add_test(tc, result_body);
	tcase_add_test(tc, summary_cut_whole);
	suite_add_tcase(s, tc);
	return check_run(s);
}
