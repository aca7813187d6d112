/*
 * Unit tests for internal agent teams (workers/team.c): the checks of
 * POST /sessions' agents, agent_add and agent_remove with their
 * team_update, and the strategies' rounds (who speaks next, handoff,
 * conclude, the turn cap), against a fake session (fake_sess.h).
 */
#include <check.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/team.c"
#include "parley/proto.h"
#include "check_main.h"
#include "fake_sess.h"

static struct config conf;
static struct wk wk;
static struct cfg_provider prov[3];
static int answered;

/* What team.c asks of sess.c besides fake_sess.h's. */
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
	answered++;
}

/* life.c's end of a session, as team.c asks for it: logged, ended. */
int
life_complete(struct sess *s, const char *reason, const char *summary)
{
	cJSON *b = cJSON_CreateObject();

	cJSON_AddStringToObject(b, "reason", reason);
	cJSON_AddStringToObject(b, "summary", summary ? summary : "");
	if (sess_emit(s, "session_complete", b) == 0)
		return -1;
	s->ended = 1;
	return 0;
}

static void
setup(void)
{
	static const char *names[] = { "demo", "alpha", "beta" };
	cJSON *a, *agents;
	size_t i;

	memset(&conf, 0, sizeof(conf));
	TAILQ_INIT(&conf.providers);
	for (i = 0; i < 3; i++) {
		memset(&prov[i], 0, sizeof(prov[i]));
		snprintf(prov[i].name, sizeof(prov[i].name), "%s", names[i]);
		snprintf(prov[i].type, sizeof(prov[i].type), "script");
		TAILQ_INSERT_TAIL(&conf.providers, &prov[i], entry);
	}
	conf.default_provider = "demo";
	conf.max_agents = 4;
	conf.max_team_turns = 5;
	wk.conf = &conf;
	fake_sess_init(&wk);
	/* As meta_new makes a session: one default agent. */
	agents = cJSON_AddArrayToObject(fs.s.mtree, "agents");
	a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "agentId", "assistant-00000000");
	cJSON_AddStringToObject(a, "name", "assistant");
	cJSON_AddStringToObject(a, "role", "assistant");
	cJSON_AddStringToObject(a, "provider", "demo");
	cJSON_AddItemToArray(agents, a);
	snprintf(fs.s.agent_id, sizeof(fs.s.agent_id), "assistant-00000000");
	answered = 0;
}

static void
teardown(void)
{
	fake_sess_free();
}

/* team_input of msg's JSON (with "type"); r says how it went. */
static int
msg_in(const char *json, int role, struct sess_result *r)
{
	struct proto_in in;
	struct sess_from from = { role, "", NULL, 0 };
	int rc;

	memset(&in, 0, sizeof(in));
	in.root = cJSON_Parse(json);
	ck_assert_ptr_nonnull(in.root);
	in.type = cJSON_GetStringValue(cJSON_GetObjectItem(in.root, "type"));
	memset(r, 0, sizeof(*r));
	rc = team_input(&fs.s, NULL, &from, &in, r);
	cJSON_Delete(in.root);
	return rc;
}

static const char *
id_of(const char *name)
{
	return str(team_agent(&fs.s, name), "agentId");
}

START_TEST(create_checks)
{
	char msg[256];
	cJSON *b;

	b = cJSON_Parse("{\"agents\":[\"manus\",{\"role\":\"planner\","
	    "\"provider\":\"alpha\",\"roles\":[\"x\",\"y\"]}],"
	    "\"config\":{\"strategy\":\"round_robin\",\"maxTeamTurns\":5}}");
	ck_assert_int_eq(team_create_check(&conf, b, msg, sizeof(msg)), 0);
	cJSON_Delete(b);
	b = cJSON_Parse("{\"agents\":[{\"role\":\"r\"},{\"role\":\"r\","
	    "\"provider\":\"gpt\"}]}");
	ck_assert_int_eq(team_create_check(&conf, b, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "agents[1].provider"));
	ck_assert_ptr_nonnull(strstr(msg, "demo, alpha, beta"));
	cJSON_Delete(b);
	b = cJSON_Parse("{\"agents\":[{\"role\":\"r\",\"name\":\"a\"},"
	    "{\"role\":\"q\",\"name\":\"a\"}]}");
	ck_assert_int_eq(team_create_check(&conf, b, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "agents[1].name"));
	cJSON_Delete(b);
	b = cJSON_Parse("{\"agents\":[{\"role\":\"a\"},{\"role\":\"b\"},"
	    "{\"role\":\"c\"},{\"role\":\"d\"},{\"role\":\"e\"}]}");
	ck_assert_int_eq(team_create_check(&conf, b, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "max-agents"));
	cJSON_Delete(b);
	b = cJSON_Parse("{\"config\":{\"maxTeamTurns\":6}}");
	ck_assert_int_eq(team_create_check(&conf, b, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "config.maxTeamTurns"));
	cJSON_Delete(b);
	b = cJSON_Parse("{\"agents\":[{\"role\":\"\\u0001\"}]}");
	ck_assert_int_eq(team_create_check(&conf, b, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "agents[0].role"));
	cJSON_Delete(b);
}
END_TEST

START_TEST(meta_from_body)
{
	cJSON *b = cJSON_Parse("{\"agents\":[\"ext\",{\"role\":\"Lead "
	    "Planner\"},{\"role\":\"coder\",\"name\":\"c\",\"model\":\"m1\"}],"
	    "\"config\":{\"strategy\":\"sequential\"}}");
	regex_t re;

	ck_assert(!team_is(&fs.s));
	team_meta_init(&fs.s, fs.s.mtree, b);
	cJSON_Delete(b);
	ck_assert(team_is(&fs.s));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(fs.s.mtree,
	    "agents")), 2);
	ck_assert_int_eq(regcomp(&re, "^lead-planner-[0-9a-f]{8}$",
	    REG_EXTENDED | REG_NOSUB), 0);
	ck_assert_int_eq(regexec(&re, team_lead(&fs.s), 0, NULL, 0), 0);
	regfree(&re);
	ck_assert_str_eq(str(team_agent(&fs.s, "c"), "model"), "m1");
	ck_assert_str_eq(str(team_agent(&fs.s, "c"), "provider"), "demo");
	ck_assert_str_eq(strategy(&fs.s), "sequential");
	team_created(&fs.s);
	ck_assert_int_eq(fake_count("team_update"), 1);
}
END_TEST

START_TEST(add_and_remove)
{
	struct sess_result r;
	cJSON *up, *a;
	const char *lead = "assistant-00000000";

	ck_assert_int_eq(msg_in("{\"type\":\"chat\"}", IPC_ROLE_USER, &r), 0);
	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"x\"}",
	    IPC_ROLE_OBSERVER, &r), 1);
	ck_assert_str_eq(r.code, "FORBIDDEN");
	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"planner\","
	    "\"provider\":\"alpha\",\"goal\":\"plan\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_ptr_null(r.code);
	ck_assert_uint_eq(r.seq, 1);
	ck_assert(team_is(&fs.s));
	up = fake_logged("team_update", 0);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(up, "agents")),
	    2);
	a = cJSON_GetArrayItem(cJSON_GetObjectItem(up, "agents"), 0);
	ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(a, "tools"),
	    0)->valuestring, "handoff");
	ck_assert_str_eq(str(up, "change"), "added");
	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"p\","
	    "\"name\":\"planner\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"c\"}",
	    IPC_ROLE_ADMIN, &r), 1);
	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"d\"}",
	    IPC_ROLE_ADMIN, &r), 1);
	ck_assert_ptr_null(r.code);
	/* The fifth is one too many; nothing is logged. */
	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"e\"}",
	    IPC_ROLE_ADMIN, &r), 1);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	ck_assert_int_eq(r.http, 409);
	ck_assert_int_eq(fake_count("team_update"), 3);
	/* The lead stays; a refused append changes nothing. */
	ck_assert_int_eq(msg_in("{\"type\":\"agent_remove\",\"agentId\":"
	    "\"assistant\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_int_eq(r.http, 409);
	fs.refuse = 1;
	ck_assert_int_eq(msg_in("{\"type\":\"agent_remove\",\"agentId\":"
	    "\"planner\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_str_eq(r.code, "OVERLOADED");
	ck_assert_ptr_nonnull(team_agent(&fs.s, "planner"));
	ck_assert_int_eq(roster_pos(&fs.s, id_of("planner")), 1);
	fs.refuse = 0;
	ck_assert_int_eq(msg_in("{\"type\":\"agent_remove\",\"agentId\":"
	    "\"planner\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_ptr_null(r.code);
	ck_assert_ptr_null(team_agent(&fs.s, "planner"));
	ck_assert_str_eq(team_lead(&fs.s), lead);
	/* Two agents stay: the lead still has handoff to offer. */
	up = fake_logged("team_update", 3);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(up, "agents")),
	    3);
	ck_assert_int_eq(msg_in("{\"type\":\"agent_remove\",\"agentId\":"
	    "\"planner\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_str_eq(r.code, "NOT_FOUND");
	/* The last teammate leaves: the lead has nobody to hand off to. */
	ck_assert_int_eq(msg_in("{\"type\":\"agent_remove\",\"agentId\":"
	    "\"c\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_int_eq(msg_in("{\"type\":\"agent_remove\",\"agentId\":"
	    "\"d\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_ptr_null(r.code);
	up = fake_logged("team_update", 5);
	a = cJSON_GetArrayItem(cJSON_GetObjectItem(up, "agents"), 0);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(up, "agents")),
	    1);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(a, "tools")),
	    0);
	ck_assert_int_eq(msg_in("{\"type\":\"set_strategy\",\"strategy\":"
	    "\"debate\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	ck_assert_ptr_nonnull(strstr(r.msg, "'strategy'"));
	ck_assert_int_eq(msg_in("{\"type\":\"set_strategy\",\"strategy\":"
	    "\"round_robin\",\"maxTeamTurns\":3}", IPC_ROLE_USER, &r), 1);
	ck_assert_ptr_null(r.code);
	ck_assert_uint_eq(team_cap(&fs.s), 3);
}
END_TEST

/* A turn's steps that called built-in name with args, answered ok. */
static cJSON *
steps_calling(const char *name, const char *args, int is_error)
{
	cJSON *steps = cJSON_CreateArray(), *a, *calls, *c, *t;

	a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "role", "assistant");
	calls = cJSON_AddArrayToObject(a, "calls");
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "id", "call_1");
	cJSON_AddStringToObject(c, "name", name);
	cJSON_AddStringToObject(c, "args", args);
	cJSON_AddItemToArray(calls, c);
	cJSON_AddItemToArray(steps, a);
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "role", "tool");
	cJSON_AddStringToObject(t, "toolCallId", "call_1");
	cJSON_AddStringToObject(t, "tool", name);
	if (is_error)
		cJSON_AddBoolToObject(t, "isError", 1);
	cJSON_AddItemToArray(steps, t);
	return steps;
}

static void
add3(const char *strategy_json)
{
	struct sess_result r;

	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"b\","
	    "\"name\":\"b\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_int_eq(msg_in("{\"type\":\"agent_add\",\"role\":\"c\","
	    "\"name\":\"c\"}", IPC_ROLE_USER, &r), 1);
	ck_assert_int_eq(msg_in(strategy_json, IPC_ROLE_USER, &r), 1);
	ck_assert_ptr_null(r.code);
}

START_TEST(lead_handoff)
{
	char agent[64], *in;
	cJSON *done = cJSON_Parse("{}"), *steps;
	uint64_t seq;
	unsigned hop;
	int err;

	add3("{\"type\":\"set_strategy\",\"strategy\":\"lead\"}");
	team_first(&fs.s, 7, NULL, agent, sizeof(agent));
	ck_assert_str_eq(agent, "assistant-00000000");
	ck_assert(!team_pending(&fs.s));
	/* The built-in answers. */
	free(team_tool(&fs.s, agent, "handoff", "{\"agentId\":\"zz\"}", &err));
	ck_assert_int_eq(err, 1);
	free(team_tool(&fs.s, agent, "handoff", "{\"agentId\":\"assistant\"}",
	    &err));
	ck_assert_int_eq(err, 1);
	in = team_tool(&fs.s, agent, "handoff", "{\"agentId\":\"c\"}", &err);
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_nonnull(strstr(in, "handed off to c"));
	free(in);
	ck_assert(team_builtin(&fs.s, agent, "handoff"));
	ck_assert(!team_builtin(&fs.s, agent, "conclude"));
	/* A failed handoff call does not count. */
	steps = steps_calling("handoff", "{\"agentId\":\"c\"}", 1);
	team_turn_end(&fs.s, agent, 7, 0, "done", done, steps, "hm");
	cJSON_Delete(steps);
	ck_assert_int_eq(fake_count("team_done"), 1);
	ck_assert_str_eq(str(fake_logged("team_done", 0), "reason"), "answered");
	/* A handoff: the next hop is c's, reading what the lead said. */
	team_first(&fs.s, 9, NULL, agent, sizeof(agent));
	steps = steps_calling("handoff", "{\"agentId\":\"c\",\"reason\":"
	    "\"code\"}", 0);
	team_turn_end(&fs.s, agent, 9, 0, "done", done, steps, "over to c");
	cJSON_Delete(steps);
	ck_assert_int_eq(fake_count("agent_handoff"), 1);
	ck_assert_str_eq(str(fake_logged("agent_handoff", 0), "to"),
	    id_of("c"));
	ck_assert(team_pending(&fs.s));
	ck_assert_int_eq(team_next(&fs.s, &seq, agent, sizeof(agent), &hop), 1);
	ck_assert_uint_eq(seq, 9);
	ck_assert_uint_eq(hop, 1);
	ck_assert_str_eq(agent, id_of("c"));
	ck_assert(!team_pending(&fs.s));
	in = team_compose(&fs.s, "build it", 9, 1);
	ck_assert_ptr_nonnull(strstr(in, "build it"));
	ck_assert_ptr_nonnull(strstr(in, "[assistant, assistant]: over to c"));
	ck_assert_ptr_nonnull(strstr(in, "handed off to you: code"));
	free(in);
	in = team_prompt(&fs.s, agent);
	ck_assert_ptr_nonnull(strstr(in, "You are c"));
	ck_assert_ptr_nonnull(strstr(in, "(you)"));
	ck_assert_ptr_nonnull(strstr(in, "handoff"));
	free(in);
	team_turn_end(&fs.s, agent, 9, 1, "done", done, NULL, "done it");
	ck_assert_int_eq(fake_count("team_done"), 2);
	ck_assert_uint_eq(proto_count(fake_logged("team_done", 1), "turns"), 2);
	ck_assert_ptr_null(cJSON_GetObjectItem(fs.s.mtree, "round"));
	cJSON_Delete(done);
}
END_TEST

START_TEST(round_robin_and_cap)
{
	char agent[64];
	cJSON *done = cJSON_Parse("{}"), *cancelled, *steps;
	uint64_t seq;
	unsigned hop, i;

	add3("{\"type\":\"set_strategy\",\"strategy\":\"round_robin\","
	    "\"maxTeamTurns\":4}");
	/* From the one addressed, around the roster, until the cap. */
	team_first(&fs.s, 3, "b", agent, sizeof(agent));
	ck_assert_str_eq(agent, id_of("b"));
	for (i = 0; i < 3; i++) {
		team_turn_end(&fs.s, agent, 3, i, "done", done, NULL, "words");
		ck_assert_int_eq(team_next(&fs.s, &seq, agent, sizeof(agent),
		    &hop), 1);
		ck_assert_uint_eq(hop, i + 1);
	}
	ck_assert_str_eq(agent, id_of("b"));
	team_turn_end(&fs.s, agent, 3, 3, "done", done, NULL, "words");
	ck_assert_str_eq(str(fake_logged("team_done", 0), "reason"),
	    "max_team_turns");
	/* conclude ends it. */
	team_first(&fs.s, 5, NULL, agent, sizeof(agent));
	steps = steps_calling("conclude", "{}", 0);
	team_turn_end(&fs.s, agent, 5, 0, "done", done, steps, "fine");
	cJSON_Delete(steps);
	ck_assert_str_eq(str(fake_logged("team_done", 1), "reason"),
	    "concluded");
	/* So do a cancel and an error. */
	cancelled = cJSON_Parse("{\"cancelled\":true}");
	team_first(&fs.s, 6, NULL, agent, sizeof(agent));
	team_turn_end(&fs.s, agent, 6, 0, "done", cancelled, NULL, "");
	ck_assert_str_eq(str(fake_logged("team_done", 2), "reason"),
	    "cancelled");
	team_first(&fs.s, 8, NULL, agent, sizeof(agent));
	team_turn_end(&fs.s, agent, 8, 0, "error", done, NULL, NULL);
	ck_assert_str_eq(str(fake_logged("team_done", 3), "reason"), "error");
	/* A next speaker removed meanwhile ends the round. */
	team_first(&fs.s, 10, NULL, agent, sizeof(agent));
	team_turn_end(&fs.s, agent, 10, 0, "done", done, NULL, "x");
	ck_assert(team_pending(&fs.s));
	cJSON_DeleteItemFromArray(cJSON_GetObjectItem(fs.s.mtree, "agents"), 1);
	ck_assert_int_eq(team_next(&fs.s, &seq, agent, sizeof(agent), &hop), 0);
	ck_assert_ptr_null(cJSON_GetObjectItem(fs.s.mtree, "round"));
	ck_assert_str_eq(str(fake_logged("team_done", 4), "reason"),
	    "agent_removed");
	cJSON_Delete(cancelled);
	cJSON_Delete(done);
}
END_TEST

START_TEST(sequential_and_usage)
{
	struct llm_usage u = { 10, 5, 0.5 };
	char agent[64];
	cJSON *done = cJSON_Parse("{}"), *roster;
	uint64_t seq;
	unsigned hop;

	add3("{\"type\":\"set_strategy\",\"strategy\":\"sequential\"}");
	team_first(&fs.s, 4, NULL, agent, sizeof(agent));
	team_turn_end(&fs.s, agent, 4, 0, "done", done, NULL, "one");
	ck_assert_int_eq(team_next(&fs.s, &seq, agent, sizeof(agent), &hop), 1);
	team_turn_end(&fs.s, agent, 4, 1, "done", done, NULL, "two");
	ck_assert_int_eq(team_next(&fs.s, &seq, agent, sizeof(agent), &hop), 1);
	ck_assert_str_eq(agent, id_of("c"));
	team_turn_end(&fs.s, agent, 4, 2, "done", done, NULL, "three");
	ck_assert(!team_pending(&fs.s));
	ck_assert_str_eq(str(fake_logged("team_done", 0), "reason"),
	    "answered");
	team_usage_add(&fs.s, id_of("b"), &u);
	team_usage_add(&fs.s, id_of("b"), &u);
	roster = team_roster(&fs.s, id_of("c"), "thinking", 1);
	ck_assert_str_eq(str(cJSON_GetArrayItem(roster, 2), "status"),
	    "thinking");
	ck_assert_str_eq(str(cJSON_GetArrayItem(roster, 1), "status"), "idle");
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(roster,
	    0), "lead")));
	ck_assert_int_eq((int)proto_count(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(roster, 1), "usage"), "tokens"), 30);
	ck_assert_int_eq((int)proto_count(cJSON_GetArrayItem(roster, 1),
	    "turns"), 1);
	cJSON_Delete(roster);
	/* Histories: the lead's is meta's own, the others' their agent's. */
	ck_assert_ptr_eq(team_history(&fs.s, team_lead(&fs.s)),
	    cJSON_GetObjectItem(fs.s.mtree, "history"));
	ck_assert_ptr_eq(team_history(&fs.s, id_of("b")),
	    cJSON_GetObjectItem(team_agent(&fs.s, "b"), "history"));
	cJSON_Delete(done);
}
END_TEST

START_TEST(objective)
{
	struct llm_tool_def defs[TEAM_TOOLS];
	char agent[64];
	cJSON *done = cJSON_Parse("{}"), *steps;

	add3("{\"type\":\"set_strategy\",\"strategy\":\"lead\"}");
	cJSON_AddStringToObject(fs.s.mtree, "objective", "ship it");
	ck_assert_uint_eq(team_tool_defs(&fs.s, team_lead(&fs.s), defs,
	    TEAM_TOOLS), 2);
	ck_assert_str_eq(defs[1].name, "complete_objective");
	ck_assert_uint_eq(team_tool_defs(&fs.s, id_of("b"), defs, TEAM_TOOLS),
	    1);
	team_first(&fs.s, 2, NULL, agent, sizeof(agent));
	steps = steps_calling("complete_objective", "{\"summary\":\"shipped\"}",
	    0);
	team_turn_end(&fs.s, agent, 2, 0, "done", done, steps, "ok");
	cJSON_Delete(steps);
	ck_assert(fs.s.ended);
	ck_assert_str_eq(str(fake_logged("session_complete", 0), "reason"),
	    "objective");
	ck_assert_str_eq(str(fake_logged("session_complete", 0), "summary"),
	    "shipped");
	ck_assert_str_eq(str(fake_logged("team_done", 0), "reason"),
	    "objective");
	cJSON_Delete(done);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("team");
	TCase *tc = tcase_create("team");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, create_checks);
	tcase_add_test(tc, meta_from_body);
	tcase_add_test(tc, add_and_remove);
	tcase_add_test(tc, lead_handoff);
	tcase_add_test(tc, round_robin_and_cap);
	tcase_add_test(tc, sequential_and_usage);
	tcase_add_test(tc, objective);
	suite_add_tcase(s, tc);
	return check_run(s);
}
