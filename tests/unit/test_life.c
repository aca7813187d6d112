/*
 * Unit tests for a session's life beyond its turns (workers/life.c):
 * POST /sessions' checks, presence counted per agent over streams and
 * nodes (one agent_joined / agent_left each), activation once every
 * required agent joined, AGENT_DISCONNECT and its deadline, the end
 * (plain summary, the lead agent's summary, an end left half done by a
 * dead owner).  The session is fake_sess.h's; the provider a stub whose
 * callbacks the test drives.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../../workers/life.c"
#include "../../workers/wk.h"
#include "check_main.h"
#include "fake_sess.h"

static struct config		 conf;
static struct cfg_provider	 prov;
static struct wk		 wk;
static struct sess		*s = &fs.s;
static int			 llm_on;	/* llm_start answers */
static const struct llm_cbs	*llm_cbs;
static void			*llm_arg;
static int			 llm_cancelled;

cJSON *
sess_state(struct sess *x)
{
	cJSON *o = cJSON_CreateObject();

	(void)x;
	cJSON_AddStringToObject(o, "status", "idle");
	return o;
}

void
sess_check_idle(struct sess *x)
{
	(void)x;
}

/* The fake log, as the plain summary counts it. */
int
sess_log_read(struct sess *x, uint64_t after, size_t limit,
    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t), void *arg)
{
	cJSON *e;
	char *j;
	int n = 0;

	(void)x;
	(void)after;
	(void)limit;
	cJSON_ArrayForEach(e, fs.log) {
		j = cJSON_PrintUnformatted(e);
		n++;
		if (cb(arg, 0, 0, j, strlen(j)) != 0) {
			free(j);
			break;
		}
		free(j);
	}
	return n;
}

/* The turns, as life.c asks for them (wk.agent). */
static void
agent_next(struct sess *x)
{
	(void)x;
}

static void
agent_cancel(struct sess *x)
{
	(void)x;
}

static const struct sess_agent turns = {
	.next = agent_next,
	.cancel = agent_cancel,
};

void
approve_clear(struct sess *x)
{
	(void)x;
}

struct llm_call *
llm_start(struct llm_ctx *ctx, const struct cfg_provider *p,
    const struct llm_msg *msgs, size_t n, const struct llm_tool_def *t,
    size_t nt, const struct llm_cbs *cbs, void *arg)
{
	(void)ctx;
	(void)t;
	(void)nt;
	ck_assert_ptr_eq(p, &prov);
	ck_assert_uint_eq(n, 2);
	ck_assert_ptr_nonnull(strstr(msgs[1].content, "Ship it"));
	if (!llm_on)
		return NULL;
	llm_cbs = cbs;
	llm_arg = arg;
	return (struct llm_call *)&llm_cbs;
}

void
llm_cancel(struct llm_call *c)
{
	(void)c;
	llm_cancelled++;
}

static void
setup(void)
{
	cJSON *body;

	memset(&conf, 0, sizeof(conf));
	memset(&prov, 0, sizeof(prov));
	TAILQ_INIT(&conf.providers);
	snprintf(prov.name, sizeof(prov.name), "lead");
	snprintf(prov.type, sizeof(prov.type), "script");
	TAILQ_INSERT_TAIL(&conf.providers, &prov, entry);
	conf.default_provider = prov.name;
	conf.agent_reconnect_timeout_ms = 60000;
	memset(&wk, 0, sizeof(wk));
	wk.conf = &conf;
	wk.agent = &turns;
	wk.base = event_base_new();
	wk.llm = (struct llm_ctx *)&wk;
	snprintf(wk.node, sizeof(wk.node), "h0/1");
	fake_sess_init(&wk);
	fs.s.st = (struct store_sess *)&fs;	/* owned, never used */
	body = cJSON_Parse("{\"objective\":\"Ship it\",\"agents\":[\"m\","
	    "{\"name\":\"inner\"},\"c\"]}");
	life_meta_new(sess_meta(s), body);
	cJSON_Delete(body);
	cJSON_AddNumberToObject(sess_meta(s), "createdAt",
	    (double)util_now_ms());
	cJSON_AddStringToObject(sess_meta(s), "objective", "Ship it");
	cJSON_AddItemToObject(sess_meta(s), "usage", cJSON_CreateObject());
	llm_on = llm_cancelled = 0;
	life_own(s);
}

static void
teardown(void)
{
	life_free(s);
	fake_sess_free();
	event_base_free(wk.base);
}

/* What the next loop pass does with what changed. */
static void
pass(void)
{
	life_cb(-1, 0, s);
}

static cJSON *
ext(const char *agent)
{
	return ext_find(s, agent);
}

/* A node's report of agent's streams, from the inbox, then a pass. */
static void
report(const char *agent, const char *node, int n, int stamp)
{
	cJSON *e = cJSON_CreateObject();

	cJSON_AddStringToObject(e, "agentId", agent);
	cJSON_AddStringToObject(e, "node", node);
	cJSON_AddNumberToObject(e, "n", n);
	cJSON_AddNumberToObject(e, "t", stamp);
	life_inbox(s, e);
	cJSON_Delete(e);
	pass();
}

START_TEST(create_checks)
{
	static const char *bad[] = {
		"{\"agents\":\"m\"}", "{\"agents\":[\"\"]}",
		"{\"agents\":[\"a\",3]}", "{\"agents\":[\"a\",\"a\"]}",
		"{\"agents\":[\"a b\"]}",
		"{\"config\":{\"maxDurationMs\":\"1m\"}}",
		"{\"config\":{\"maxDurationMs\":99}}" };
	static const char *field[] = { "'agents'", "agents[0]", "agents[1]",
	    "agents[1]", "agents[0]", "config.maxDurationMs",
	    "config.maxDurationMs" };
	char msg[256];
	cJSON *b;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = cJSON_Parse(bad[i]);
		ck_assert_int_eq(life_check(b, msg, sizeof(msg)), -1);
		ck_assert_msg(strstr(msg, field[i]) != NULL, "%s: %s", bad[i],
		    msg);
		cJSON_Delete(b);
	}
	b = cJSON_Parse("{\"agents\":[\"m\",{\"x\":1}],\"config\":"
	    "{\"maxDurationMs\":1000}}");
	ck_assert_int_eq(life_check(b, msg, sizeof(msg)), 0);
	cJSON_Delete(b);
	ck_assert_int_eq(life_check(NULL, msg, sizeof(msg)), 0);
	/* setup's: two required (the object is not ours), waiting */
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
	    "external")), 2);
	ck_assert(life_holds(s) && life_team(s));
	ck_assert_str_eq(life_status(s), "created");
}
END_TEST

START_TEST(presence_once_per_agent)
{
	cJSON *e;

	life_conn(s, "m", 1);
	life_conn(s, "m", 1);		/* a second stream */
	ck_assert_int_eq(fake_count("agent_joined"), 0);	/* next pass */
	pass();
	ck_assert_int_eq(fake_count("agent_joined"), 1);
	ck_assert(life_holds(s));
	life_conn(s, "c", 1);
	pass();
	ck_assert_int_eq(fake_count("agent_joined"), 2);
	e = fake_logged("session_state", 0);
	ck_assert_ptr_nonnull(e);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(e, "active")));
	ck_assert(!life_holds(s) && life_status(s) == NULL);
	life_conn(s, "m", -1);
	pass();
	ck_assert_int_eq(fake_count("agent_left"), 0);
	life_conn(s, "m", -1);
	pass();
	ck_assert_int_eq(fake_count("agent_left"), 1);
	e = fake_logged("error", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")),
	    "AGENT_DISCONNECT");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "severity")), "recoverable");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "agentId")), "m");
	ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(ext("m"), "deadline")));

	/* Back through another node: rejoined, the deadline gone. */
	report("m", "h1/2", 1, 5);
	ck_assert_int_eq(fake_count("agent_joined"), 3);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(fake_logged(
	    "agent_joined", 2), "reconnected")));
	ck_assert_ptr_null(cJSON_GetObjectItem(ext("m"), "deadline"));
	/* An older report delivered again changes nothing; a newer does. */
	report("m", "h1/2", 0, 3);
	ck_assert_int_eq(fake_count("agent_left"), 1);
	/* This node's own report, read back from the inbox: ignored. */
	report("c", "h0/1", 0, 9);
	ck_assert_int_eq(fake_count("agent_left"), 1);
	report("m", "h1/2", 0, 7);
	ck_assert_int_eq(fake_count("agent_left"), 2);
	/* An agent the session does not require is logged too. */
	life_conn(s, "guest", 1);
	pass();
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("agent_joined", 3), "agentId")), "guest");
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(fake_logged(
	    "agent_joined", 3), "required")));
}
END_TEST

START_TEST(deadline_fails_plainly)
{
	cJSON *r;

	life_conn(s, "m", 1);
	life_conn(s, "c", 1);
	pass();
	life_conn(s, "m", -1);
	pass();
	/* The deadline passes; no provider answers: a plain summary. */
	proto_set(ext("m"), "deadline", cJSON_CreateNumber(1));
	pass();
	r = fake_logged("session_complete", 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r,
	    "reason")), "error");
	ck_assert_ptr_nonnull(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(
	    r, "summary")), "required agent m did not reconnect in time. "
	    "Session ended (error)"));
	ck_assert(s->ended && life_failed(s));
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(sess_meta(s), "result"), "reason")), "error");
	/* Ended: nothing more is logged, not even a leave. */
	life_conn(s, "c", -1);
	pass();
	ck_assert_int_eq(fake_count("agent_left"), 1);
	ck_assert_int_eq(life_complete(s, "terminated", "again"), 0);
	ck_assert_int_eq(fake_count("session_complete"), 1);
}
END_TEST

START_TEST(time_limit_lead_summary)
{
	cJSON *r;

	llm_on = 1;
	proto_set(sess_meta(s), "active", cJSON_CreateTrue());
	proto_set(sess_meta(s), "deadline", cJSON_CreateNumber(1));
	pass();
	/* The lead writes: no input meanwhile, and meta says so. */
	ck_assert_int_eq(fake_count("session_complete"), 0);
	ck_assert(s->ended);
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(sess_meta(s), "ending"));
	llm_cbs->token(llm_arg, "All ", 4);
	llm_cbs->token(llm_arg, "shipped.", 8);
	llm_cbs->done(llm_arg, NULL, "stop");
	r = fake_logged("session_complete", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r,
	    "summary")), "All shipped.");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r,
	    "reason")), "time_limit");
	ck_assert_ptr_null(cJSON_GetObjectItem(sess_meta(s), "ending"));
	ck_assert(!life_failed(s));
}
END_TEST

START_TEST(owner_died_while_summarizing)
{
	llm_on = 1;
	proto_set(sess_meta(s), "active", cJSON_CreateTrue());
	ck_assert_int_eq(life_complete(s, "objective", NULL), 0);
	ck_assert_int_eq(fake_count("session_complete"), 0);
	/* The worker dies; the next owner reads meta and ends it plainly. */
	life_free(s);
	ck_assert_int_eq(llm_cancelled, 1);
	s->ended = 0;
	llm_on = 0;
	life_own(s);
	ck_assert(s->ended);
	pass();
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("session_complete", 0), "reason")), "objective");
	ck_assert_ptr_nonnull(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("session_complete", 0), "summary")),
	    "Session ended (objective)"));
}
END_TEST

START_TEST(terminate_at_once)
{
	fs.refuse = 1;
	ck_assert_int_eq(life_complete(s, "terminated", "terminated by "
	    "request"), -1);
	ck_assert(!s->ended);
	fs.refuse = 0;
	ck_assert_int_eq(life_complete(s, "terminated", "terminated by "
	    "request"), 0);
	ck_assert(s->ended);
	ck_assert_ptr_nonnull(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("session_complete", 0), "summary")),
	    "terminated by request. Session ended (terminated)"));
}
END_TEST

int
main(void)
{
	Suite *su = suite_create("life");
	TCase *tc = tcase_create("life");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, create_checks);
	tcase_add_test(tc, presence_once_per_agent);
	tcase_add_test(tc, deadline_fails_plainly);
	tcase_add_test(tc, time_limit_lead_summary);
	tcase_add_test(tc, owner_died_while_summarizing);
	tcase_add_test(tc, terminate_at_once);
	suite_add_tcase(su, tc);
	return check_run(su);
}
