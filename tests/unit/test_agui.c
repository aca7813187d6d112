/*
 * AG-UI's translation of a turn's events and its RunAgentInput parsing
 * (workers/agui_tr.c, workers/agui_in.c): the events and their order, the
 * SSE ids SEQ:K and exact resume, the holds of a POST of answers and of
 * a GET without an id, and what a body becomes or why it is refused.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/adapt.c"
#include "../../workers/agui_tr.c"
#include "../../workers/agui_in.c"
#include "check_main.h"

#define TS	"2026-11-26T12:00:00.250Z"
#define TS_MS	1795694400250ULL

/* The chunks of a list of logged events, as one text. */
static char *
play(struct agui *st, const char **evs, size_t *len)
{
	char *out = NULL;
	size_t i;

	*len = 0;
	for (i = 0; evs[i] != NULL; i++) {
		cJSON *e = cJSON_Parse(evs[i]);
		char *one = NULL;
		size_t n = 0;

		ck_assert_ptr_nonnull(e);
		agui_translate(st, cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "type")), e, (uint64_t)proto_count(e, "seq"), &one, &n);
		if (n > 0) {
			out = realloc(out, *len + n + 1);
			memcpy(out + *len, one, n);
			*len += n;
		}
		free(one);
		cJSON_Delete(e);
	}
	if (out == NULL)
		out = calloc(1, 1);
	out[*len] = '\0';
	return out;
}

/* The blocks of SSE text: an array of {id, ev}. */
static cJSON *
blocks(const char *text)
{
	cJSON *a = cJSON_CreateArray();
	const char *p = text;

	while (*p != '\0') {
		const char *end = strstr(p, "\n\n"), *d;
		cJSON *b = cJSON_CreateObject();
		char id[64];

		ck_assert_ptr_nonnull(end);
		ck_assert(strncmp(p, "id: ", 4) == 0);
		d = strchr(p, '\n');
		snprintf(id, sizeof(id), "%.*s", (int)(d - p - 4), p + 4);
		cJSON_AddStringToObject(b, "id", id);
		ck_assert(strncmp(d + 1, "data: ", 6) == 0);
		cJSON_AddItemToObject(b, "ev", cJSON_ParseWithLength(d + 7,
		    (size_t)(end - d - 7)));
		cJSON_AddItemToArray(a, b);
		p = end + 2;
	}
	return a;
}

/* "TYPE TYPE ..." of blocks. */
static char *
types(const cJSON *bl)
{
	static char buf[4096];
	const cJSON *b;

	buf[0] = '\0';
	cJSON_ArrayForEach(b, bl) {
		if (buf[0] != '\0')
			strcat(buf, " ");
		strcat(buf, cJSON_GetStringValue(cJSON_GetObjectItem(
		    cJSON_GetObjectItem(b, "ev"), "type")));
	}
	return buf;
}

static const cJSON *
ev(const cJSON *bl, int i)
{
	return cJSON_GetObjectItem(cJSON_GetArrayItem(bl, i), "ev");
}

static const char *
field(const cJSON *bl, int i, const char *k)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(ev(bl, i), k));
}

static struct agui *
fresh(const char *chat)
{
	struct agui *st = agui_new();

	ck_assert_ptr_nonnull(st);
	snprintf(st->thread, sizeof(st->thread), "t1");
	if (chat != NULL)
		snprintf(st->chatid, sizeof(st->chatid), "%s", chat);
	st->approval_ms = 3600000;
	return st;
}

static const char *reply[] = {
	"{\"type\":\"user_message\",\"seq\":2,\"ts\":\"" TS "\","
	    "\"id\":\"agui:r1\",\"message\":\"hi\"}",
	"{\"type\":\"agent_state\",\"seq\":3,\"ts\":\"" TS "\","
	    "\"status\":\"thinking\"}",
	"{\"type\":\"token\",\"seq\":4,\"ts\":\"" TS "\","
	    "\"messageId\":\"m-2\",\"content\":\"Hel\"}",
	"{\"type\":\"token\",\"seq\":5,\"ts\":\"" TS "\","
	    "\"messageId\":\"m-9\",\"content\":\"other turn\"}",
	"{\"type\":\"token\",\"seq\":6,\"ts\":\"" TS "\","
	    "\"messageId\":\"m-2\",\"content\":\"lo\"}",
	"{\"type\":\"done\",\"seq\":7,\"ts\":\"" TS "\",\"messageId\":\"m-2\","
	    "\"usage\":{\"inputTokens\":3,\"outputTokens\":4,\"tokens\":7}}",
	"{\"type\":\"agent_state\",\"seq\":8,\"ts\":\"" TS "\","
	    "\"status\":\"idle\"}",
	NULL
};

START_TEST(test_ts)
{
	ck_assert_uint_eq(agui_ts_ms(TS), TS_MS);
	ck_assert_uint_eq(agui_ts_ms("2026-11-26T12:00:00Z"), TS_MS - 250);
	ck_assert_uint_eq(agui_ts_ms("nonsense"), 0);
	ck_assert_uint_eq(agui_ts_ms(NULL), 0);
}
END_TEST

START_TEST(test_reply)
{
	struct agui *st = fresh("agui:r1");
	size_t len;
	char *t = play(st, reply, &len);
	cJSON *bl = blocks(t), *u;

	ck_assert_str_eq(types(bl), "RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_CONTENT "
	    "TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED");
	ck_assert_str_eq(field(bl, 0, "threadId"), "t1");
	ck_assert_str_eq(field(bl, 0, "runId"), "r1");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(bl, 0), "id")), "2:1");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(bl, 5), "id")), "6:1");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(bl, 8), "id")), "7:3");
	ck_assert_str_eq(field(bl, 3, "messageId"), "m-2");
	ck_assert_str_eq(field(bl, 3, "role"), "assistant");
	ck_assert_str_eq(field(bl, 4, "delta"), "Hel");
	ck_assert_str_eq(field(bl, 5, "delta"), "lo");
	ck_assert_str_eq(field(bl, 2, "stepName"), "step 1");
	ck_assert_uint_eq((uint64_t)proto_count(ev(bl, 4), "timestamp"),
	    TS_MS);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(ev(bl, 8), "outcome"), "type")), "success");
	u = cJSON_GetArrayItem(cJSON_GetObjectItem(ev(bl, 8), "usage"), 0);
	ck_assert_int_eq((int)proto_count(u, "totalTokens"), 7);
	ck_assert_int_eq(st->end, 1);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

/* Exact resume: from any id on, the rest of the same translation. */
START_TEST(test_cursor)
{
	struct agui *st = fresh("agui:r1"), *again;
	size_t len, len2;
	char *all = play(st, reply, &len), *rest;
	cJSON *bl = blocks(all);
	int i, n = cJSON_GetArraySize(bl);

	for (i = 0; i < n; i++) {
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(
		    cJSON_GetArrayItem(bl, i), "id"));
		const char *at;

		again = fresh(NULL);
		snprintf(again->msgid, sizeof(again->msgid), "m-2");
		ck_assert_int_eq(adapt_cursor_parse(&again->cur, id), 0);
		rest = play(again, reply, &len2);
		/* What follows block i in the whole, byte for byte. */
		at = strstr(all, id);
		at = strstr(at, "\n\n") + 2;
		ck_assert_str_eq(rest, at);
		/* The turn's end ends the stream, also when the client
		 * has its RUN_FINISHED (a resume from past it). */
		ck_assert_int_eq(again->end, 1);
		free(rest);
		agui_free(again);
	}
	cJSON_Delete(bl);
	free(all);
	agui_free(st);
}
END_TEST

/*
 * A resume from past the turn's last chunk (nothing left to send) ends
 * at the turn's end: done, a failing error, team_done; a resume past a
 * run that waits for an answer does not.
 */
START_TEST(test_past_end)
{
	static const char *failed[] = {
		"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
		    "\"id\":\"agui:r1\",\"message\":\"x\"}",
		"{\"type\":\"error\",\"seq\":2,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"code\":\"LLM_ERROR\","
		    "\"message\":\"down\"}",
		NULL
	}, *team[] = {
		"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
		    "\"id\":\"agui:r1\",\"message\":\"x\"}",
		"{\"type\":\"done\",\"seq\":2,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"teamRound\":true}",
		"{\"type\":\"team_done\",\"seq\":3,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\"}",
		NULL
	}, *waits[] = {
		"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
		    "\"id\":\"agui:r1\",\"message\":\"x\"}",
		"{\"type\":\"tool_approve_request\",\"seq\":2,\"ts\":\"" TS
		    "\",\"messageId\":\"m-1\",\"step\":1,\"toolCallId\":"
		    "\"call_1\",\"tool\":\"srv__echo\",\"args\":{}}",
		"{\"type\":\"agent_state\",\"seq\":3,\"ts\":\"" TS "\","
		    "\"status\":\"waiting_approval\"}",
		NULL
	};
	static const struct {
		const char	**evs;
		const char	 *msgid, *last;
		int		  end;
	} c[] = {
		{ reply, "m-2", "18446744073709551615:1", 1 },
		{ reply, "m-2", "7:99", 1 },
		{ failed, "m-1", "2:99", 1 },
		{ team, "m-1", "99", 1 },
		{ waits, "m-1", "3:99", 0 },
	};
	struct agui *st;
	size_t i, len;
	char *t;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		st = fresh(NULL);
		snprintf(st->msgid, sizeof(st->msgid), "%s", c[i].msgid);
		ck_assert_int_eq(adapt_cursor_parse(&st->cur, c[i].last), 0);
		t = play(st, c[i].evs, &len);
		ck_assert_uint_eq(len, 0);
		ck_assert_msg(st->end == c[i].end, "case %zu: end %d", i,
		    st->end);
		free(t);
		agui_free(st);
	}
}
END_TEST

/*
 * Past AGUI_CALLS_MAX calls in a turn the stream ends with RUN_ERROR
 * instead of starting a call it no longer remembers again.
 */
START_TEST(test_calls_max)
{
	struct agui *st = fresh("agui:r1");
	const char **evs;
	char *t, *p;
	size_t len, n = 0;
	int i, starts = 0;
	cJSON *bl;

	evs = calloc(AGUI_CALLS_MAX * 2 + 8, sizeof(*evs));
	ck_assert_ptr_nonnull(evs);
	evs[n++] = "{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS
	    "\",\"id\":\"agui:r1\",\"message\":\"x\"}";
	for (i = 0; i <= AGUI_CALLS_MAX; i++) {
		ck_assert_int_ne(asprintf(&p, "{\"type\":\"tool_start\","
		    "\"seq\":%d,\"messageId\":\"m-1\",\"step\":1,"
		    "\"toolCallId\":\"c%d\",\"tool\":\"s__t\",\"args\":{}}",
		    i * 2 + 2, i), -1);
		evs[n++] = p;
		ck_assert_int_ne(asprintf(&p, "{\"type\":\"tool_result\","
		    "\"seq\":%d,\"messageId\":\"m-1\",\"step\":1,"
		    "\"toolCallId\":\"c%d\",\"result\":\"r\"}", i * 2 + 3,
		    i), -1);
		evs[n++] = p;
	}
	t = play(st, evs, &len);
	bl = blocks(t);
	for (i = 0; i < cJSON_GetArraySize(bl); i++)
		if (strcmp(field(bl, i, "type"), "TOOL_CALL_START") == 0)
			starts++;
	ck_assert_int_eq(starts, AGUI_CALLS_MAX);
	ck_assert_str_eq(field(bl, cJSON_GetArraySize(bl) - 1, "type"),
	    "RUN_ERROR");
	ck_assert_str_eq(field(bl, cJSON_GetArraySize(bl) - 1, "code"),
	    "TOO_MANY_CALLS");
	ck_assert_int_eq(st->end, 1);
	for (i = 1; i < (int)n; i++)
		free((char *)evs[i]);
	free(evs);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

static const char *approval[] = {
	"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
	    "\"id\":\"agui:r1\",\"message\":\"echo\"}",
	"{\"type\":\"audit_entry\",\"seq\":2,\"ts\":\"" TS "\","
	    "\"messageId\":\"m-1\",\"toolCallId\":\"call_1\","
	    "\"decision\":\"auto\"}",
	"{\"type\":\"tool_start\",\"seq\":3,\"ts\":\"" TS "\",\"messageId\":"
	    "\"m-1\",\"step\":1,\"toolCallId\":\"call_1\",\"tool\":\"srv__sum\","
	    "\"args\":{\"a\":2}}",
	"{\"type\":\"tool_approve_request\",\"seq\":4,\"ts\":\"" TS "\","
	    "\"messageId\":\"m-1\",\"step\":1,\"toolCallId\":\"call_2\","
	    "\"tool\":\"srv__echo\",\"args\":{\"m\":\"x\"},\"summary\":"
	    "\"srv__echo({\\\"m\\\":\\\"x\\\"})\"}",
	"{\"type\":\"tool_result\",\"seq\":5,\"ts\":\"" TS "\",\"messageId\":"
	    "\"m-1\",\"step\":1,\"toolCallId\":\"call_1\",\"result\":\"5\"}",
	"{\"type\":\"agent_state\",\"seq\":6,\"ts\":\"" TS "\","
	    "\"status\":\"waiting_approval\"}",
	"{\"type\":\"audit_entry\",\"seq\":7,\"ts\":\"" TS "\","
	    "\"messageId\":\"m-1\",\"toolCallId\":\"call_2\","
	    "\"decision\":\"approved\"}",
	"{\"type\":\"tool_start\",\"seq\":8,\"ts\":\"" TS "\",\"messageId\":"
	    "\"m-1\",\"step\":1,\"toolCallId\":\"call_2\",\"tool\":"
	    "\"srv__echo\",\"args\":{\"m\":\"x\"}}",
	"{\"type\":\"tool_result\",\"seq\":9,\"ts\":\"" TS "\",\"messageId\":"
	    "\"m-1\",\"step\":1,\"toolCallId\":\"call_2\",\"result\":"
	    "{\"content\":1}}",
	"{\"type\":\"token\",\"seq\":10,\"ts\":\"" TS "\","
	    "\"messageId\":\"m-1\",\"content\":\"ok\"}",
	"{\"type\":\"done\",\"seq\":11,\"ts\":\"" TS "\",\"messageId\":\"m-1\","
	    "\"usage\":{\"inputTokens\":1,\"outputTokens\":1}}",
	NULL
};

START_TEST(test_interrupt)
{
	struct agui *st = fresh("agui:r1");
	size_t len;
	char *t = play(st, approval, &len), exp[32];
	cJSON *bl = blocks(t);
	const cJSON *out, *i;

	/* The first run: it ends where the approval waits. */
	ck_assert_str_eq(types(bl), "RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_START "
	    "TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT STEP_FINISHED "
	    "RUN_FINISHED RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "TOOL_CALL_RESULT STEP_FINISHED STEP_STARTED TEXT_MESSAGE_START "
	    "TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED");
	ck_assert_str_eq(field(bl, 3, "toolCallName"), "srv__sum");
	ck_assert_str_eq(field(bl, 3, "parentMessageId"), "m-1");
	ck_assert_str_eq(field(bl, 4, "delta"), "{\"a\":2}");
	ck_assert_str_eq(field(bl, 9, "content"), "5");
	ck_assert_str_eq(field(bl, 9, "role"), "tool");
	ck_assert_str_eq(field(bl, 9, "messageId"), "parley-result-call_1");
	out = cJSON_GetObjectItem(ev(bl, 11), "outcome");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(out,
	    "type")), "interrupt");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(out,
	    "interrupts")), 1);
	i = cJSON_GetArrayItem(cJSON_GetObjectItem(out, "interrupts"), 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(i, "id")),
	    "call_2");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(i,
	    "toolCallId")), "call_2");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(i,
	    "reason")), "tool_approval");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(i,
	    "message")), "srv__echo({\"m\":\"x\"})");
	util_iso8601(exp, TS_MS + 3600000);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(i,
	    "expiresAt")), exp);
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(i, "responseSchema"), "properties"),
	    "approved"));
	/* A JSON result is its text. */
	ck_assert_str_eq(field(bl, 15, "content"), "{\"content\":1}");
	/* Run ids from the log: the chat's, then it and the seq the next
	 * run starts at (the answer's audit_entry). */
	ck_assert_str_eq(field(bl, 0, "runId"), "r1");
	ck_assert_str_eq(field(bl, 11, "runId"), "r1");
	ck_assert_str_eq(field(bl, 12, "runId"), "r1.7");
	ck_assert_str_eq(field(bl, 22, "runId"), "r1.7");
	ck_assert_str_eq(field(bl, 17, "stepName"), "step 2");
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

/* The POST that answers call_2: the first run is left out. */
START_TEST(test_hold_answered)
{
	struct agui *st = fresh(NULL);
	size_t len;
	char *t;
	cJSON *bl;

	snprintf(st->msgid, sizeof(st->msgid), "m-1");
	st->hold_until = 7;	/* the log's end: the answer is logged */
	st->hold_answered = 1;
	cJSON_AddItemToArray(st->answered, cJSON_CreateString("call_2"));
	t = play(st, approval, &len);
	bl = blocks(t);
	ck_assert_str_eq(types(bl), "RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "TOOL_CALL_RESULT STEP_FINISHED STEP_STARTED TEXT_MESSAGE_START "
	    "TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED");
	/* The log's: the chat's runId and the seq the run starts at. */
	ck_assert_str_eq(field(bl, 0, "runId"), "r1.7");
	ck_assert_str_eq(field(bl, 10, "runId"), "r1.7");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(bl, 0), "id")), "7:1");
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

/* A GET without an id: the last run from its start. */
START_TEST(test_hold_last_run)
{
	struct agui *st = fresh(NULL);
	size_t len;
	char *t;
	cJSON *bl;

	snprintf(st->msgid, sizeof(st->msgid), "m-1");
	st->hold_until = 9;
	t = play(st, approval, &len);
	bl = blocks(t);
	ck_assert_str_eq(field(bl, 0, "type"), "RUN_STARTED");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(bl, 0), "id")), "7:1");
	/* The run after the answer: the chat's runId and its seq. */
	ck_assert_str_eq(field(bl, 0, "runId"), "r1.7");
	ck_assert_int_eq(st->end, 1);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
	/* Held while the turn waits: that finished run, then the end. */
	st = fresh(NULL);
	snprintf(st->msgid, sizeof(st->msgid), "m-1");
	st->hold_until = 6;
	t = play(st, approval, &len);
	bl = blocks(t);
	ck_assert_str_eq(field(bl, 0, "type"), "RUN_STARTED");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(bl, 0), "id")), "1:1");
	ck_assert_int_eq(st->end, 1);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

START_TEST(test_client_call)
{
	static const char *evs[] = {
		"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
		    "\"id\":\"agui:r1\",\"message\":\"x\"}",
		"{\"type\":\"tool_start\",\"seq\":2,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"step\":1,\"toolCallId\":"
		    "\"call_1\",\"tool\":\"agui__lookup\",\"args\":{}}",
		"{\"type\":\"mcp_call\",\"seq\":3,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"step\":1,\"toolCallId\":"
		    "\"call_1\",\"server\":\"agui\",\"tool\":\"lookup\","
		    "\"args\":{}}",
		NULL
	};
	struct agui *st = fresh("agui:r1");
	size_t len;
	char *t = play(st, evs, &len);
	cJSON *bl = blocks(t), *out;

	ck_assert_str_eq(types(bl), "RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED "
	    "RUN_FINISHED");
	ck_assert_str_eq(field(bl, 3, "toolCallName"), "lookup");
	out = cJSON_GetObjectItem(ev(bl, 7), "outcome");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(out,
	    "type")), "success");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetArrayItem(
	    cJSON_GetObjectItem(out, "pendingToolCallIds"), 0)), "call_1");
	ck_assert_int_eq(st->end, 1);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

/*
 * A client tool asked about first: its approval is answered, and the
 * client's call that follows (the same toolCallId) is the new run.
 */
START_TEST(test_approved_client_call)
{
	static const char *evs[] = {
		"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
		    "\"id\":\"agui:r1\",\"message\":\"x\"}",
		"{\"type\":\"tool_approve_request\",\"seq\":2,\"ts\":\"" TS
		    "\",\"messageId\":\"m-1\",\"step\":1,\"toolCallId\":"
		    "\"call_1\",\"tool\":\"agui__lookup\",\"args\":{}}",
		"{\"type\":\"agent_state\",\"seq\":3,\"ts\":\"" TS "\","
		    "\"status\":\"waiting_approval\"}",
		"{\"type\":\"audit_entry\",\"seq\":4,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"toolCallId\":\"call_1\","
		    "\"decision\":\"approved\"}",
		"{\"type\":\"tool_start\",\"seq\":5,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"step\":1,\"toolCallId\":"
		    "\"call_1\",\"tool\":\"agui__lookup\",\"args\":{}}",
		"{\"type\":\"mcp_call\",\"seq\":6,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"step\":1,\"toolCallId\":"
		    "\"call_1\",\"server\":\"agui\",\"tool\":\"lookup\","
		    "\"args\":{}}",
		NULL
	};
	struct agui *st = fresh(NULL);
	size_t len;
	char *t;
	cJSON *bl;

	/* The resume's POST: the call was asked of the client before the
	 * stream began (the log's end is 6). */
	snprintf(st->msgid, sizeof(st->msgid), "m-1");
	st->hold_until = 6;
	st->hold_answered = 1;
	cJSON_AddItemToArray(st->answered, cJSON_CreateString("call_1"));
	t = play(st, evs, &len);
	bl = blocks(t);
	ck_assert_str_eq(types(bl), "RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "STEP_FINISHED RUN_FINISHED");
	ck_assert_str_eq(field(bl, 0, "runId"), "r1.4");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(ev(bl, 4), "outcome"),
	    "pendingToolCallIds"), 0)), "call_1");
	ck_assert_int_eq(st->end, 1);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

/* A team's round: each speaker's text, one run to team_done. */
START_TEST(test_team)
{
	static const char *evs[] = {
		"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
		    "\"id\":\"agui:r1\",\"message\":\"x\"}",
		"{\"type\":\"token\",\"seq\":2,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"content\":\"a\"}",
		"{\"type\":\"done\",\"seq\":3,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"teamRound\":true}",
		"{\"type\":\"token\",\"seq\":4,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1-1\",\"content\":\"b\"}",
		"{\"type\":\"done\",\"seq\":5,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1-1\",\"teamRound\":true}",
		"{\"type\":\"team_done\",\"seq\":6,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"reason\":\"done\"}",
		NULL
	};
	struct agui *st = fresh("agui:r1");
	size_t len;
	char *t = play(st, evs, &len);
	cJSON *bl = blocks(t);

	ck_assert_str_eq(types(bl), "RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END "
	    "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END "
	    "STEP_FINISHED RUN_FINISHED");
	ck_assert_str_eq(field(bl, 6, "messageId"), "m-1-1");
	ck_assert_int_eq(st->end, 1);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

START_TEST(test_reasoning_error)
{
	static const char *evs[] = {
		"{\"type\":\"user_message\",\"seq\":1,\"ts\":\"" TS "\","
		    "\"id\":\"agui:r1\",\"message\":\"x\"}",
		"{\"type\":\"thought\",\"seq\":2,\"ts\":\"" TS "\","
		    "\"thought\":{\"thoughtId\":\"th_m-1-0-1\",\"content\":"
		    "\"hmm\"}}",
		"{\"type\":\"thought\",\"seq\":3,\"ts\":\"" TS "\","
		    "\"thought\":{\"thoughtId\":\"th_m-10-0-1\",\"content\":"
		    "\"not ours\"}}",
		"{\"type\":\"token\",\"seq\":4,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"content\":\"a\"}",
		"{\"type\":\"error\",\"seq\":5,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1\",\"code\":\"PROVIDER_ERROR\","
		    "\"message\":\"again\",\"retrying\":true}",
		"{\"type\":\"token\",\"seq\":6,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1.1\",\"content\":\"b\"}",
		"{\"type\":\"error\",\"seq\":7,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1.1\",\"code\":\"PROVIDER_ERROR\","
		    "\"message\":\"gone\"}",
		"{\"type\":\"done\",\"seq\":8,\"ts\":\"" TS "\","
		    "\"messageId\":\"m-1.1\"}",
		NULL
	};
	struct agui *st = fresh("agui:r1");
	size_t len;
	char *t = play(st, evs, &len);
	cJSON *bl = blocks(t);

	ck_assert_str_eq(types(bl), "RUN_STARTED STATE_SNAPSHOT STEP_STARTED "
	    "REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT "
	    "REASONING_MESSAGE_END REASONING_END TEXT_MESSAGE_START "
	    "TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TEXT_MESSAGE_START "
	    "TEXT_MESSAGE_CONTENT RUN_ERROR");
	ck_assert_str_eq(field(bl, 3, "messageId"), "th_m-1-0-1");
	ck_assert_str_eq(field(bl, 4, "role"), "reasoning");
	ck_assert_str_eq(field(bl, 5, "delta"), "hmm");
	ck_assert_str_eq(field(bl, 11, "messageId"), "m-1.1");
	ck_assert_str_eq(field(bl, 13, "message"), "gone");
	ck_assert_str_eq(field(bl, 13, "code"), "PROVIDER_ERROR");
	ck_assert_int_eq(st->end, 1);
	cJSON_Delete(bl);
	free(t);
	agui_free(st);
}
END_TEST

static int
parse(const char *body, struct agui_req *rq, char *msg, size_t len)
{
	cJSON *o = cJSON_Parse(body);
	int rc;

	ck_assert_ptr_nonnull(o);
	rc = agui_parse(o, 1000, rq, msg, len);
	cJSON_Delete(o);
	return rc;
}

static const char *
in_str(const struct agui_req *rq, int i, const char *k)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(
	    rq->inputs, i), k));
}

START_TEST(test_parse_chat)
{
	struct agui_req rq;
	char msg[300];
	const cJSON *tool;

	ck_assert_int_eq(parse("{\"threadId\":\"t1\",\"runId\":\"r1\","
	    "\"messages\":[{\"id\":\"a\",\"role\":\"assistant\",\"content\":"
	    "\"old\"},{\"id\":\"u\",\"role\":\"user\",\"content\":[{\"type\":"
	    "\"text\",\"text\":\"he\"},{\"type\":\"text\",\"text\":\"llo\"}]}],"
	    "\"tools\":[{\"name\":\"lookup\",\"description\":\"d\","
	    "\"parameters\":{\"type\":\"object\"},\"metadata\":{\"annotations\":"
	    "{\"readOnlyHint\":true}}}],\"state\":{},\"context\":[]}", &rq,
	    msg, sizeof(msg)), 0);
	ck_assert_int_eq(rq.kind, AGUI_CHAT);
	ck_assert_str_eq(rq.thread, "t1");
	ck_assert_int_eq(cJSON_GetArraySize(rq.inputs), 2);
	ck_assert_str_eq(in_str(&rq, 0, "type"), "mcp_tools");
	tool = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
	    rq.inputs, 0), "tools"), 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(tool,
	    "server")), "agui");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(tool,
	    "name")), "lookup");
	ck_assert(cJSON_IsObject(cJSON_GetObjectItem(tool, "inputSchema")));
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(tool,
	    "annotations"), "readOnlyHint")));
	ck_assert_str_eq(in_str(&rq, 1, "type"), "chat");
	ck_assert_str_eq(in_str(&rq, 1, "message"), "hello");
	ck_assert_str_eq(in_str(&rq, 1, "id"), "agui:r1");
	ck_assert_str_eq(in_str(&rq, 1, "sessionId"), "t1");
	agui_req_free(&rq);
}
END_TEST

START_TEST(test_parse_answers)
{
	struct agui_req rq;
	char msg[300];

	/* resume: approve and reject; Parley's own result is no answer. */
	ck_assert_int_eq(parse("{\"threadId\":\"t1\",\"runId\":\"r2\","
	    "\"messages\":[{\"id\":\"u\",\"role\":\"user\",\"content\":\"x\"},"
	    "{\"id\":\"parley-result-call_1\",\"role\":\"tool\",\"toolCallId\":"
	    "\"call_1\",\"content\":\"5\"}],\"resume\":[{\"interruptId\":"
	    "\"call_2\",\"status\":\"resolved\",\"payload\":{\"approved\":"
	    "true}},{\"interruptId\":\"call_3\",\"status\":\"cancelled\"},"
	    "{\"interruptId\":\"call_4\",\"status\":\"resolved\",\"payload\":"
	    "{\"approved\":false,\"reason\":\"no\"}}]}", &rq, msg,
	    sizeof(msg)), 0);
	ck_assert_int_eq(rq.kind, AGUI_ANSWER);
	ck_assert_int_eq(cJSON_GetArraySize(rq.inputs), 3);
	ck_assert_str_eq(in_str(&rq, 0, "type"), "tool_approve");
	ck_assert_str_eq(in_str(&rq, 0, "toolCallId"), "call_2");
	ck_assert_str_eq(in_str(&rq, 0, "decision"), "approve");
	ck_assert_str_eq(in_str(&rq, 1, "decision"), "reject");
	ck_assert_str_eq(in_str(&rq, 2, "decision"), "reject");
	ck_assert_int_eq(cJSON_GetArraySize(rq.answered), 3);
	ck_assert_int_eq(cJSON_GetArraySize(rq.replied), 0);
	agui_req_free(&rq);
	/* Tool messages answer client calls. */
	ck_assert_int_eq(parse("{\"threadId\":\"t1\",\"runId\":\"r2\","
	    "\"messages\":[{\"id\":\"u\",\"role\":\"user\",\"content\":\"x\"},"
	    "{\"id\":\"a\",\"role\":\"assistant\",\"toolCalls\":[]},"
	    "{\"id\":\"t\",\"role\":\"tool\",\"toolCallId\":\"call_1\","
	    "\"content\":\"R\"},{\"id\":\"t2\",\"role\":\"tool\",\"toolCallId\":"
	    "\"call_2\",\"content\":\"\",\"error\":\"failed\"}]}", &rq, msg,
	    sizeof(msg)), 0);
	ck_assert_int_eq(rq.kind, AGUI_ANSWER);
	ck_assert_int_eq(cJSON_GetArraySize(rq.inputs), 2);
	ck_assert_str_eq(in_str(&rq, 0, "type"), "mcp_result");
	ck_assert_str_eq(in_str(&rq, 0, "result"), "R");
	ck_assert_str_eq(in_str(&rq, 1, "error"), "failed");
	ck_assert_int_eq(cJSON_GetArraySize(rq.replied), 2);
	ck_assert_int_eq(cJSON_GetArraySize(rq.answered), 0);
	agui_req_free(&rq);
}
END_TEST

START_TEST(test_parse_bad)
{
	static const struct {
		const char *body, *word;
	} bad[] = {
		{ "{\"runId\":\"r\",\"messages\":[]}", "threadId" },
		{ "{\"threadId\":\"a b\",\"runId\":\"r\",\"messages\":[]}",
		    "threadId" },
		{ "{\"threadId\":\"t\",\"messages\":[]}", "runId" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\"}", "messages" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[1]}",
		    "role" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[]}",
		    "nothing to run" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"user\",\"content\":\"\"}]}", "non-empty" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":"
		    "\"a.b\"}]}", "tools[0].name" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"user\",\"content\":\"x\"}],\"tools\":{}}", "tools" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[],"
		    "\"resume\":[{\"interruptId\":\"c\",\"status\":\"done\"}]}",
		    "status" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[],"
		    "\"resume\":[{\"interruptId\":\"c\",\"status\":"
		    "\"resolved\",\"payload\":{}}]}", "approved" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[],"
		    "\"resume\":[{\"interruptId\":\"c\",\"status\":"
		    "\"cancelled\"},{\"interruptId\":\"c\",\"status\":"
		    "\"cancelled\"}]}", "twice" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"tool\",\"content\":\"x\"}]}", "toolCallId" },
		/* What the session would refuse, refused before it is
		 * opened or made. */
		{ "{\"threadId\":\"kg:p\",\"runId\":\"r\",\"messages\":[{"
		    "\"role\":\"user\",\"content\":\"x\"}]}", "knowledge" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"a\"},"
		    "{\"name\":\"b\"},{\"name\":\"a\"}]}", "tools[2]: name 'a' "
		    "repeats" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"a\","
		    "\"description\":7}]}", "tools[0].description" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"a\","
		    "\"metadata\":{\"annotations\":[]}}]}", "annotations" },
		{ "{\"threadId\":\"t\",\"runId\":\"r\",\"messages\":[{\"role\":"
		    "\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"a\","
		    "\"metadata\":{\"annotations\":{\"readOnlyHint\":1}}}]}",
		    "readOnlyHint" },
	};
	struct agui_req rq;
	char msg[300];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(parse(bad[i].body, &rq, msg, sizeof(msg)) == -1,
		    "accepted %s", bad[i].body);
		ck_assert_msg(strstr(msg, bad[i].word) != NULL, "%s: %s",
		    bad[i].body, msg);
		ck_assert_ptr_null(rq.inputs);
	}
	/* A message over max-message. */
	{
		cJSON *o = cJSON_Parse("{\"threadId\":\"t\",\"runId\":\"r\","
		    "\"messages\":[{\"role\":\"user\",\"content\":\"abcdef\"}]}");

		ck_assert_int_eq(agui_parse(o, 5, &rq, msg, sizeof(msg)),
		    -1);
		ck_assert_ptr_nonnull(strstr(msg, "at most 5 bytes"));
		cJSON_Delete(o);
	}
	/* A description and parameters past ctool.c's bounds. */
	{
		char *big = malloc(AGUI_TOOL_SCHEMA_MAX + 100), *body;
		cJSON *o;

		ck_assert_ptr_nonnull(big);
		memset(big, 'x', AGUI_TOOL_SCHEMA_MAX + 99);
		big[AGUI_TOOL_DESC_MAX + 1] = '\0';
		ck_assert_int_ne(asprintf(&body, "{\"threadId\":\"t\","
		    "\"runId\":\"r\",\"messages\":[{\"role\":\"user\","
		    "\"content\":\"x\"}],\"tools\":[{\"name\":\"a\","
		    "\"description\":\"%s\"}]}", big), -1);
		ck_assert_int_eq(parse(body, &rq, msg, sizeof(msg)), -1);
		ck_assert_ptr_nonnull(strstr(msg, "description"));
		free(body);
		big[AGUI_TOOL_DESC_MAX + 1] = 'x';
		big[AGUI_TOOL_SCHEMA_MAX + 99] = '\0';
		o = cJSON_Parse("{\"threadId\":\"t\",\"runId\":\"r\","
		    "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		    "\"tools\":[{\"name\":\"a\",\"parameters\":{}}]}");
		cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetArrayItem(
		    cJSON_GetObjectItem(o, "tools"), 0), "parameters"),
		    "description", big);
		ck_assert_int_eq(agui_parse(o, 1000, &rq, msg, sizeof(msg)),
		    -1);
		ck_assert_ptr_nonnull(strstr(msg, "parameters is longer"));
		cJSON_Delete(o);
		free(big);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agui");
	TCase *tc = tcase_create("agui");

	tcase_add_test(tc, test_ts);
	tcase_add_test(tc, test_reply);
	tcase_add_test(tc, test_cursor);
	tcase_add_test(tc, test_past_end);
	tcase_add_test(tc, test_calls_max);
	tcase_add_test(tc, test_interrupt);
	tcase_add_test(tc, test_hold_answered);
	tcase_add_test(tc, test_hold_last_run);
	tcase_add_test(tc, test_client_call);
	tcase_add_test(tc, test_approved_client_call);
	tcase_add_test(tc, test_team);
	tcase_add_test(tc, test_reasoning_error);
	tcase_add_test(tc, test_parse_chat);
	tcase_add_test(tc, test_parse_answers);
	tcase_add_test(tc, test_parse_bad);
	suite_add_tcase(s, tc);
	return check_run(s);
}

/* Never frozen here: the tree is the meta (sess_meta.c's thaw is not linked). */
cJSON *
sess_meta_thaw(const struct sess *s)
{
	return s->mtree;
}
