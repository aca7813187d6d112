/*
 * Unit tests for agents' proposed actions and directives
 * (workers/action.c): the validation of an action, and its answers on
 * approve.c's waiting list, against a fake session whose log is an array
 * (fake_sess.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../workers/approve.c"
#include "../../workers/action.c"
#include "../../workers/wk.h"
#include "check_main.h"
#include "fake_sess.h"

static struct config conf;
static struct wk wk;

/* The team (team.c): "internal" is an internal agent. */
cJSON *
team_agent(const struct sess *s, const char *id)
{
	static cJSON *a;

	(void)s;
	if (a == NULL)
		a = cJSON_CreateObject();
	return id != NULL && strcmp(id, "internal") == 0 ? a : NULL;
}

/* workers/auditlog.c's, which has its own suite. */
uint64_t
auditlog_event(struct sess *s, uint64_t seq)
{
	(void)s;
	return seq;
}

/* sess.c's: action_input's answer goes nowhere here. */
void
sess_answer_durable(struct sess *s, struct sess_client *c, const char *id,
    uint64_t seq, enum sess_answer a, struct sess_result *r)
{
	(void)s;
	(void)c;
	(void)id;
	(void)seq;
	(void)a;
	(void)r;
}

static void
setup(void)
{
	memset(&conf, 0, sizeof(conf));
	conf.autonomy = POLICY_SUPERVISED;
	conf.max_autonomy = POLICY_FULL_AUTO;
	conf.action_timeout_ms = 60000;
	wk.conf = &conf;
	wk.base = event_base_new();
	fake_sess_init(&wk);
}

static void
teardown(void)
{
	action_free(&fs.s);
	fake_sess_free();
	event_base_free(wk.base);
}

/* action_check of JSON text: the normal form, or NULL with msg. */
static cJSON *
checked(const char *json, char *msg, size_t len)
{
	cJSON *a = cJSON_Parse(json), *o;

	msg[0] = '\0';
	o = action_check(a, "manus", msg, len);
	cJSON_Delete(a);
	return o;
}

START_TEST(check_normal_form)
{
	char msg[256];
	cJSON *o = checked("{\"type\":\"code_change\",\"description\":\"fix "
	    "it\"}", msg, sizeof(msg));

	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(str(o, "executor"), "manus");
	ck_assert_str_eq(str(o, "risk"), "medium");
	ck_assert(cJSON_IsObject(cJSON_GetObjectItem(o, "params")));
	cJSON_Delete(o);
	o = checked("{\"type\":\"shell/run\",\"description\":\"ls\","
	    "\"params\":{\"cmd\":\"ls\"},\"executor\":\"claude\","
	    "\"risk\":\"critical\"}", msg, sizeof(msg));
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(str(o, "executor"), "claude");
	ck_assert_str_eq(str(o, "risk"), "critical");
	ck_assert_str_eq(str(cJSON_GetObjectItem(o, "params"), "cmd"), "ls");
	cJSON_Delete(o);
}
END_TEST

START_TEST(check_refusals)
{
	static const struct {
		const char	*json, *field;
	} bad[] = {
		{ "\"do it\"", "'action'" },
		{ "{\"description\":\"x\"}", "action.type" },
		{ "{\"type\":\"a b\",\"description\":\"x\"}", "action.type" },
		{ "{\"type\":\"\",\"description\":\"x\"}", "action.type" },
		{ "{\"type\":7,\"description\":\"x\"}", "action.type" },
		{ "{\"type\":\"t\"}", "action.description" },
		{ "{\"type\":\"t\",\"description\":\"\"}", "action.description" },
		{ "{\"type\":\"t\",\"description\":\"x\",\"params\":[]}",
		    "action.params" },
		{ "{\"type\":\"t\",\"description\":\"x\",\"executor\":\"a/b\"}",
		    "action.executor" },
		{ "{\"type\":\"t\",\"description\":\"x\",\"risk\":\"huge\"}",
		    "action.risk" },
		{ "{\"type\":\"t\",\"description\":\"x\",\"actionId\":\"a\"}",
		    "action.actionId" },
	};
	char msg[256], *big;
	cJSON *o;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = checked(bad[i].json, msg, sizeof(msg));
		ck_assert_msg(o == NULL, "%s accepted", bad[i].json);
		ck_assert_msg(strstr(msg, bad[i].field) != NULL,
		    "%s: '%s' does not name %s", bad[i].json, msg,
		    bad[i].field);
	}
	/* Bounds: a type, a description and params one byte too long. */
	big = malloc(ACTION_PARAMS_MAX + 64);
	memset(big, 'a', ACTION_PARAMS_MAX + 63);
	big[ACTION_PARAMS_MAX + 63] = '\0';
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "description", "x");
	big[ACTION_TYPE_MAX + 1] = '\0';
	cJSON_AddStringToObject(o, "type", big);
	ck_assert_ptr_null(action_check(o, "m", msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "action.type"));
	big[ACTION_TYPE_MAX + 1] = 'a';
	proto_set(o, "type", cJSON_CreateString("t"));
	big[ACTION_DESC_MAX + 1] = '\0';
	proto_set(o, "description", cJSON_CreateString(big));
	ck_assert_ptr_null(action_check(o, "m", msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "action.description"));
	big[ACTION_DESC_MAX + 1] = 'a';
	proto_set(o, "description", cJSON_CreateString("x"));
	big[ACTION_PARAMS_MAX] = '\0';
	proto_set(o, "params", cJSON_CreateObject());
	cJSON_AddStringToObject(cJSON_GetObjectItem(o, "params"), "k", big);
	ck_assert_ptr_null(action_check(o, "m", msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "action.params"));
	cJSON_Delete(o);
	free(big);
}
END_TEST

static const char *
propose_one(const char *json, struct sess_result *r)
{
	cJSON *a = cJSON_Parse(json);
	uint64_t seq;

	memset(r, 0, sizeof(*r));
	seq = action_propose(&fs.s, "manus", a, "c-1", r);
	cJSON_Delete(a);
	if (seq == 0)
		return NULL;
	return str(fake_logged("action_proposed", fake_count(
	    "action_proposed") - 1), "actionId");
}

START_TEST(approve_execute_result_once)
{
	struct sess_result r;
	const char *id = propose_one("{\"type\":\"t\",\"description\":\"d\"}",
	    &r);
	cJSON *p, *w, *res = cJSON_CreateString("ok");

	ck_assert_ptr_nonnull(id);
	p = fake_logged("action_proposed", 0);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(p, "needsHuman")));
	/* An internal agent cannot be its executor: nothing is logged. */
	{
		struct sess_result r2;

		memset(&r2, 0, sizeof(r2));
		ck_assert_ptr_null(propose_one("{\"type\":\"t\","
		    "\"description\":\"d\",\"executor\":\"internal\"}", &r2));
		ck_assert_str_eq(r2.code, "BAD_REQUEST");
		ck_assert_ptr_null(fake_logged("action_proposed", 1));
	}
	ck_assert_uint_eq(r.seq, (uint64_t)proto_count(p, "seq"));
	ck_assert_uint_eq((uint64_t)proto_count(fs.s.mtree, "actionsSeq"),
	    r.seq);
	w = approve_entry(&fs.s, id, APPROVE_ACTIONS);
	ck_assert_str_eq(str(w, "phase"), "proposed");
	/* A turn's end does not close it. */
	approve_clear(&fs.s);
	ck_assert_ptr_nonnull(approve_entry(&fs.s, id, APPROVE_ACTIONS));

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_AGENT, "manus", NULL, id, 1, NULL,
	    &r), -1);
	ck_assert_str_eq(r.code, "FORBIDDEN");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_AGENT, "", NULL, id, 1, NULL, &r),
	    -1);
	ck_assert_str_eq(r.code, "FORBIDDEN");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(result(&fs.s, IPC_ROLE_AGENT, "manus", id, res, NULL,
	    &r), -1);
	ck_assert_int_eq(r.http, 409);

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_AGENT, "claude", NULL, id, 1, NULL,
	    &r), 1);
	ck_assert_int_eq(fake_count("action_approved"), 1);
	ck_assert_int_eq(fake_count("action_execute"), 1);
	ck_assert_str_eq(str(fake_logged("action_execute", 0), "agentId"),
	    "manus");
	w = approve_entry(&fs.s, id, APPROVE_ACTIONS);
	ck_assert_str_eq(str(w, "phase"), "executing");

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_USER, "", NULL, id, 0, NULL, &r), 0);
	ck_assert(r.duplicate);
	ck_assert_int_eq(fake_count("action_rejected"), 0);
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(result(&fs.s, IPC_ROLE_AGENT, "claude", id, res, NULL,
	    &r), -1);
	ck_assert_str_eq(r.code, "FORBIDDEN");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(result(&fs.s, IPC_ROLE_AGENT, "manus", id, res, NULL,
	    &r), 1);
	ck_assert_int_eq(fake_count("action_result"), 1);
	ck_assert_ptr_null(approve_entry(&fs.s, id, APPROVE_ACTIONS));
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(result(&fs.s, IPC_ROLE_AGENT, "manus", id, res, NULL,
	    &r), 0);
	ck_assert(r.duplicate);
	ck_assert_int_eq(fake_count("action_result"), 1);
	cJSON_Delete(res);
}
END_TEST

START_TEST(human_needed_and_refused_log)
{
	struct sess_result r;
	const char *id;
	cJSON *w;

	proto_set(fs.s.mtree, "autonomy", cJSON_CreateString("MANUAL"));
	id = propose_one("{\"type\":\"t\",\"description\":\"d\",\"risk\":"
	    "\"low\"}", &r);
	ck_assert_ptr_nonnull(id);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(fake_logged(
	    "action_proposed", 0), "needsHuman")));
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_AGENT, "claude", NULL, id, 1, NULL,
	    &r), 1);
	ck_assert_int_eq(fake_count("action_approved"), 0);
	ck_assert_str_eq(str(fake_logged("audit_entry", 0), "awaiting"),
	    "human");
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_AGENT, "claude", NULL, id, 1, NULL,
	    &r), 0);
	ck_assert(r.duplicate);
	/* The log refuses the person's approval: nothing changes. */
	fs.refuse = 1;
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_USER, "", NULL, id, 1, NULL, &r),
	    -1);
	ck_assert_str_eq(r.code, "OVERLOADED");
	w = approve_entry(&fs.s, id, APPROVE_ACTIONS);
	ck_assert_str_eq(str(w, "phase"), "proposed");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(w,
	    "approvals")), 1);
	fs.refuse = 0;
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_USER, "", NULL, id, 1, NULL, &r), 1);
	ck_assert_int_eq(fake_count("action_approved"), 1);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(fake_logged(
	    "action_approved", 0), "approvals")), 2);
}
END_TEST

START_TEST(expired_and_followed)
{
	struct sess_result r;
	const char *id;
	char keep[64];
	cJSON *w, *ev;

	id = propose_one("{\"type\":\"t\",\"description\":\"d\"}", &r);
	snprintf(keep, sizeof(keep), "%s", id);
	w = approve_entry(&fs.s, keep, APPROVE_ACTIONS);
	proto_set(w, "ts", cJSON_CreateNumber(1000));
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(answer(&fs.s, IPC_ROLE_USER, "", NULL, keep, 1, NULL,
	    &r), -1);
	ck_assert_str_eq(r.code, "NOT_FOUND");
	ck_assert_ptr_nonnull(strstr(r.msg, "expired"));
	ck_assert_int_eq(fake_count("action_expired"), 1);
	ck_assert_ptr_null(approve_entry(&fs.s, keep, APPROVE_ACTIONS));

	/* A follower takes the owner's events in, each once. */
	ev = cJSON_Parse("{\"type\":\"action_proposed\",\"seq\":9,"
	    "\"actionId\":\"act-f\",\"agentId\":\"manus\",\"action\":"
	    "{\"executor\":\"manus\"}}");
	action_follow(&fs.s, "action_proposed", ev, 5000);
	action_follow(&fs.s, "action_proposed", ev, 5000);
	cJSON_Delete(ev);
	w = action_pending(&fs.s);
	ck_assert_int_eq(cJSON_GetArraySize(w), 1);
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetArrayItem(w, 0),
	    "seq"));
	cJSON_Delete(w);
	ev = cJSON_Parse("{\"type\":\"action_execute\",\"actionId\":"
	    "\"act-f\"}");
	action_follow(&fs.s, "action_execute", ev, 6000);
	cJSON_Delete(ev);
	ck_assert_str_eq(str(approve_entry(&fs.s, "act-f", APPROVE_ACTIONS),
	    "phase"), "executing");
	ev = cJSON_Parse("{\"type\":\"action_result\",\"actionId\":"
	    "\"act-f\"}");
	action_follow(&fs.s, "action_result", ev, 7000);
	cJSON_Delete(ev);
	ck_assert_ptr_null(approve_entry(&fs.s, "act-f", APPROVE_ACTIONS));
}
END_TEST

START_TEST(directives_once_per_agent)
{
	char *t;

	ck_assert_ptr_null(action_directives(&fs.s, "a-1"));
	directive_keep(&fs.s, 4, "Focus on tests", "user");
	directive_keep(&fs.s, 4, "Focus on tests", "user");
	directive_keep(&fs.s, 7, "Be brief", "admin");
	t = action_directives(&fs.s, "a-1");
	ck_assert_str_eq(t, "Directive from the user: Focus on tests\n\n"
	    "Directive from the admin: Be brief");
	free(t);
	ck_assert_ptr_null(action_directives(&fs.s, "a-1"));
	t = action_directives(&fs.s, "b-2");
	ck_assert_ptr_nonnull(t);
	free(t);
	directive_keep(&fs.s, 9, "Stop", "user");
	t = action_directives(&fs.s, "a-1");
	ck_assert_str_eq(t, "Directive from the user: Stop");
	free(t);
}
END_TEST

/* An answer names its approver's JWT subject only when there is one. */
START_TEST(by_subject)
{
	cJSON *b = cJSON_CreateObject(), *n = cJSON_CreateObject();

	add_by(b, IPC_ROLE_USER, "", "alice");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(b, "by")),
	    "user");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(b,
	    "subject")), "alice");
	add_by(n, IPC_ROLE_AGENT, "critic", NULL);
	ck_assert_ptr_null(cJSON_GetObjectItem(n, "subject"));
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(n,
	    "approverId")), "critic");
	cJSON_Delete(b);
	cJSON_Delete(n);
}
END_TEST

int
main(void)
{
Suite *s = suite_create("action");
	TCase *tc = tcase_create("action");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, check_normal_form);
	tcase_add_test(tc, by_subject);
	tcase_add_test(tc, check_refusals);
	tcase_add_test(tc, approve_execute_result_once);
	tcase_add_test(tc, human_needed_and_refused_log);
	tcase_add_test(tc, expired_and_followed);
	tcase_add_test(tc, directives_once_per_agent);
	suite_add_tcase(s, tc);
	return check_run(s);
}
