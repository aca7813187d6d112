/*
 * Unit tests for the AI SDK UI message stream's translation
 * (workers/aisdk_tr.c): logged events in, chunks out, with their SSE ids,
 * the turn filter, steps, approvals (asked, approved, rejected, the stream
 * ending only while a call still waits), errors, and exact resume: the
 * same events read again with a cursor give exactly the rest.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/adapt.c"
#include "../../workers/aisdk_tr.c"
#include "check_main.h"

/* A turn: user_message 5 (id "ui-u1"), a thought, text, two tools (one
 * asked), the wait, the approval, the rest, done. */
static const char *turn[] = {
	"user_message", "{\"seq\":4,\"id\":\"ui-other\",\"message\":\"x\"}",
	"user_message", "{\"seq\":5,\"id\":\"ui-u1\",\"message\":\"hi\"}",
	"agent_state", "{\"status\":\"thinking\"}",
	"thought", "{\"thought\":{\"thoughtId\":\"th_m-5-0-1\","
	    "\"content\":\"hmm\"}}",
	"thought", "{\"thought\":{\"thoughtId\":\"th_m-50-0-1\","
	    "\"content\":\"another turn's\"}}",
	"token", "{\"messageId\":\"m-5\",\"content\":\"Let me \"}",
	"token", "{\"messageId\":\"m-4\",\"content\":\"not ours\"}",
	"token", "{\"messageId\":\"m-5\",\"content\":\"see.\"}",
	"audit_entry", "{\"messageId\":\"m-5\",\"toolCallId\":\"c1\","
	    "\"decision\":\"auto\"}",
	"tool_start", "{\"messageId\":\"m-5\",\"step\":1,\"toolCallId\":"
	    "\"c1\",\"tool\":\"sum\",\"args\":{\"a\":2}}",
	"tool_approve_request", "{\"messageId\":\"m-5\",\"step\":1,"
	    "\"toolCallId\":\"c2\",\"tool\":\"echo\",\"args\":{\"m\":\"e\"}}",
	"tool_result", "{\"messageId\":\"m-5\",\"toolCallId\":\"c1\","
	    "\"tool\":\"sum\",\"result\":\"5\"}",
	"agent_state", "{\"status\":\"waiting_approval\"}",
	"audit_entry", "{\"messageId\":\"m-5\",\"toolCallId\":\"c2\","
	    "\"decision\":\"approved\"}",
	"tool_start", "{\"messageId\":\"m-5\",\"step\":1,\"toolCallId\":"
	    "\"c2\",\"tool\":\"echo\",\"args\":{\"m\":\"e\"}}",
	"tool_result", "{\"messageId\":\"m-5\",\"toolCallId\":\"c2\","
	    "\"tool\":\"echo\",\"result\":\"Echo: e\"}",
	"token", "{\"messageId\":\"m-5\",\"content\":\"Done.\"}",
	"done", "{\"messageId\":\"m-5\",\"usage\":{}}",
	"agent_state", "{\"status\":\"idle\"}",
	NULL
};
#define FIRST_SEQ	4	/* turn[0]'s seq */
#define WAIT_SEQ	16	/* the waiting agent_state */

static int	waiting;	/* what the waits callback says */

static int
waits(void *arg, const char *id)
{
	(void)arg;
	(void)id;
	return waiting;
}

/* Feeds the turn's events from seq from; the text out, *ended at seq. */
static char *
feed(struct aisdk_tr *t, uint64_t from, uint64_t *ended)
{
	char *all = calloc(1, 1), *b;
	size_t alen = 0, len;
	uint64_t seq;
	int i, end;
	cJSON *e;

	*ended = 0;
	for (i = 0; turn[i] != NULL; i += 2) {
		seq = FIRST_SEQ + (uint64_t)i / 2;
		if (seq < from)
			continue;
		e = cJSON_Parse(turn[i + 1]);
		ck_assert_ptr_nonnull(e);
		b = aisdk_tr_event(t, seq, turn[i], e, &len, &end);
		cJSON_Delete(e);
		if (b != NULL) {
			all = realloc(all, alen + len + 1);
			memcpy(all + alen, b, len);
			alen += len;
			all[alen] = '\0';
			free(b);
		}
		if (end) {
			*ended = seq;
			break;
		}
	}
	return all;
}

/* The n-th (from 0) "data: " line's JSON "type", or "[DONE]". */
static char **
types(const char *s, int *n)
{
	char **v = calloc(256, sizeof(*v));
	const char *p = s, *q;

	*n = 0;
	while ((p = strstr(p, "data: ")) != NULL && *n < 256) {
		p += 6;
		q = strchr(p, '\n');
		if (strncmp(p, "[DONE]", 6) == 0)
			v[(*n)++] = strdup("[DONE]");
		else {
			char *line = strndup(p, (size_t)(q - p));
			cJSON *o = cJSON_Parse(line);

			v[(*n)++] = strdup(cJSON_GetStringValue(
			    cJSON_GetObjectItem(o, "type")));
			cJSON_Delete(o);
			free(line);
		}
		p = q;
	}
	return v;
}

static void
types_free(char **v, int n)
{
	while (n-- > 0)
		free(v[n]);
	free(v);
}

static void
expect(const char *s, const char *const *want)
{
	int n, i;
	char **v = types(s, &n);

	for (i = 0; want[i] != NULL; i++) {
		ck_assert_msg(i < n, "chunk %d: none, want %s", i, want[i]);
		ck_assert_msg(strcmp(v[i], want[i]) == 0, "chunk %d: %s, want "
		    "%s\n%s", i, v[i], want[i], s);
	}
	ck_assert_msg(i == n, "%d chunks, want %d:\n%s", n, i, s);
	types_free(v, n);
}

static const char *const first_part[] = {
	"start", "start-step", "reasoning-start", "reasoning-delta",
	"reasoning-end", "text-start", "text-delta", "text-delta", "text-end",
	"tool-input-start", "tool-input-available",
	"tool-input-start", "tool-input-available", "tool-approval-request",
	"tool-output-available",
	"finish-step", "finish", "[DONE]", NULL
};

static const char *const whole[] = {
	"start", "start-step", "reasoning-start", "reasoning-delta",
	"reasoning-end", "text-start", "text-delta", "text-delta", "text-end",
	"tool-input-start", "tool-input-available",
	"tool-input-start", "tool-input-available", "tool-approval-request",
	"tool-output-available",
	"finish-step", "finish", "[DONE]",
	"start-step", "tool-output-available",
	"finish-step", "start-step", "text-start", "text-delta", "text-end",
	"finish-step", "finish", "[DONE]", NULL
};

START_TEST(test_turn)
{
	struct aisdk_tr t;
	uint64_t ended;
	char *s;

	/* Found by the chat's id; waiting: the stream ends at the wait. */
	ck_assert_int_eq(aisdk_tr_init(&t, "ui-u1", NULL), 0);
	t.waits = waits;
	waiting = 1;
	s = feed(&t, FIRST_SEQ, &ended);
	ck_assert_str_eq(t.msgid, "m-5");
	ck_assert_uint_eq(ended, WAIT_SEQ);
	expect(s, first_part);
	ck_assert_ptr_nonnull(strstr(s, "id: 5:1\ndata: {\"type\":\"start\","
	    "\"messageId\":\"m-5\"}\n\n"));
	ck_assert_ptr_nonnull(strstr(s, "{\"type\":\"tool-approval-request\","
	    "\"approvalId\":\"c2\",\"toolCallId\":\"c2\"}"));
	ck_assert_ptr_nonnull(strstr(s, "{\"type\":\"tool-input-available\","
	    "\"toolCallId\":\"c1\",\"toolName\":\"sum\",\"input\":{\"a\":2},"
	    "\"dynamic\":true}"));
	ck_assert_ptr_nonnull(strstr(s, "{\"type\":\"text-delta\",\"id\":"
	    "\"txt-9\",\"delta\":\"Let me \"}"));
	ck_assert_ptr_null(strstr(s, "not ours"));
	ck_assert_ptr_null(strstr(s, "another turn"));
	ck_assert_ptr_nonnull(strstr(s, "\"finishReason\":\"tool-calls\""));
	free(s);
	aisdk_tr_clear(&t);

	/* Read again once it was answered: it goes through the wait. */
	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-5"), 0);
	t.waits = waits;
	waiting = 0;
	s = feed(&t, FIRST_SEQ, &ended);
	ck_assert_uint_eq(ended, FIRST_SEQ + 17);
	expect(s, whole);
	ck_assert_ptr_nonnull(strstr(s, "\"finishReason\":\"stop\"}\n\n"
	    "id: 21:"));
	free(s);
	aisdk_tr_clear(&t);
}
END_TEST

/* The answer's stream: what the log held at the POST is left out. */
START_TEST(test_continue)
{
	static const char *const rest[] = {
		"start-step", "tool-output-available",
		"finish-step", "start-step", "text-start", "text-delta",
		"text-end", "finish-step", "finish", "[DONE]", NULL
	};
	struct aisdk_tr t;
	uint64_t ended;
	char *s;

	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-5.1"), 0);
	ck_assert_str_eq(t.msgid, "m-5");
	t.waits = waits;
	waiting = 1;	/* the wait is left out: it does not end it */
	t.cur.skip_seq = WAIT_SEQ;
	t.cur.skip_k = (unsigned)-1;
	s = feed(&t, FIRST_SEQ, &ended);
	ck_assert_uint_eq(ended, FIRST_SEQ + 17);
	expect(s, rest);
	ck_assert_ptr_eq(strstr(s, "id: 19:1\n"), s);
	free(s);
	aisdk_tr_clear(&t);
}
END_TEST

/* Resuming after each chunk gives exactly the rest of the whole. */
START_TEST(test_resume_exact)
{
	struct aisdk_tr t;
	uint64_t ended;
	char *all, *s, *p, id[48];
	size_t off;

	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-5"), 0);
	waiting = 0;
	t.waits = waits;
	all = feed(&t, FIRST_SEQ, &ended);
	aisdk_tr_clear(&t);
	for (p = all; (p = strstr(p, "id: ")) != NULL; p++) {
		sscanf(p + 4, "%47[0-9:]", id);
		off = (size_t)(strstr(p, "\n\n") + 2 - all);
		ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-5"), 0);
		t.waits = waits;
		ck_assert_int_eq(adapt_cursor_parse(&t.cur, id), 0);
		s = feed(&t, FIRST_SEQ, &ended);
		ck_assert_msg(strcmp(s, all + off) == 0, "after %s:\n%s\n"
		    "want:\n%s", id, s, all + off);
		free(s);
		aisdk_tr_clear(&t);
	}
	free(all);
}
END_TEST

static char *
one(struct aisdk_tr *t, uint64_t seq, const char *type, const char *json,
    int *end)
{
	cJSON *e = cJSON_Parse(json);
	size_t len;
	char *s;

	s = aisdk_tr_event(t, seq, type, e, &len, end);
	cJSON_Delete(e);
	return s;
}

START_TEST(test_reject_error)
{
	struct aisdk_tr t;
	int end;
	char *s;

	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-2"), 0);
	free(one(&t, 2, "user_message", "{\"id\":\"x\"}", &end));
	free(one(&t, 3, "tool_approve_request", "{\"messageId\":\"m-2\","
	    "\"step\":1,\"toolCallId\":\"k\",\"tool\":\"t\"}", &end));
	s = one(&t, 4, "audit_entry", "{\"messageId\":\"m-2\",\"toolCallId\":"
	    "\"k\",\"decision\":\"rejected\"}", &end);
	ck_assert_str_eq(s, "id: 4:1\ndata: {\"type\":\"tool-output-denied\","
	    "\"toolCallId\":\"k\"}\n\n");
	free(s);
	/* Its tool_result says no more. */
	s = one(&t, 5, "tool_result", "{\"messageId\":\"m-2\",\"toolCallId\":"
	    "\"k\",\"error\":\"rejected\"}", &end);
	ck_assert_ptr_null(s);
	/* A provider's retry is not the end; a failure is. */
	free(one(&t, 6, "token", "{\"messageId\":\"m-2\",\"content\":\"a\"}",
	    &end));
	s = one(&t, 7, "error", "{\"messageId\":\"m-2\",\"retrying\":true,"
	    "\"message\":\"again\"}", &end);
	ck_assert_int_eq(end, 0);
	ck_assert_ptr_nonnull(strstr(s, "text-end"));
	free(s);
	s = one(&t, 8, "token", "{\"messageId\":\"m-2.1\",\"content\":\"b\"}",
	    &end);
	ck_assert_ptr_nonnull(strstr(s, "{\"type\":\"text-start\",\"id\":"
	    "\"txt-8\"}"));
	free(s);
	s = one(&t, 9, "error", "{\"messageId\":\"m-2.1\",\"code\":\"LLM_ERROR\","
	    "\"message\":\"down\"}", &end);
	ck_assert_int_eq(end, 1);
	ck_assert_ptr_nonnull(strstr(s, "{\"type\":\"error\",\"errorText\":"
	    "\"LLM_ERROR: down\"}\n\nid: 9:4\ndata: [DONE]\n\n"));
	free(s);
	/* Ended: nothing more. */
	ck_assert_ptr_null(one(&t, 10, "token", "{\"messageId\":\"m-2\","
	    "\"content\":\"c\"}", &end));
	aisdk_tr_clear(&t);
}
END_TEST

START_TEST(test_ids)
{
	struct aisdk_tr t;

	ck_assert_uint_eq(aisdk_tr_input_seq("m-12"), 12);
	ck_assert_uint_eq(aisdk_tr_input_seq("m-12.3"), 12);
	ck_assert_uint_eq(aisdk_tr_input_seq("m-12-2"), 12);
	ck_assert_uint_eq(aisdk_tr_input_seq("m-0"), 0);
	ck_assert_uint_eq(aisdk_tr_input_seq("m-12x"), 0);
	ck_assert_uint_eq(aisdk_tr_input_seq("abc"), 0);
	ck_assert_uint_eq(aisdk_tr_input_seq(NULL), 0);
	/* Past 2^53 or past uint64_t: no seq (was UINT64_MAX). */
	ck_assert_uint_eq(aisdk_tr_input_seq("m-99999999999999999999"), 0);
	ck_assert_uint_eq(aisdk_tr_input_seq("m-9007199254740993.1"), 0);
	ck_assert_uint_eq(aisdk_tr_input_seq("m-9007199254740992"),
	    UINT64_C(9007199254740992));
	ck_assert_uint_eq(aisdk_tr_input_seq("m-7."), 0);
	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "u-1"), -1);
	aisdk_tr_clear(&t);
	/* Before its user_message, nothing of the turn is shown. */
	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-3"), 0);
	{
		int end;

		ck_assert_ptr_null(one(&t, 2, "token", "{\"messageId\":\"m-3\","
		    "\"content\":\"a\"}", &end));
		ck_assert_ptr_null(one(&t, 2, "user_message", "{\"id\":\"a\"}",
		    &end));
	}
	aisdk_tr_clear(&t);
}
END_TEST

/* A worker stopped mid-reply: the turn runs again (m-2.1) and finishes. */
START_TEST(test_recover)
{
	struct aisdk_tr t;
	int end;
	char *s;

	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-2"), 0);
	free(one(&t, 2, "user_message", "{\"id\":\"x\"}", &end));
	free(one(&t, 3, "token", "{\"messageId\":\"m-2\",\"content\":\"par\"}",
	    &end));
	s = one(&t, 4, "error", "{\"messageId\":\"m-2\",\"code\":\"INTERNAL\","
	    "\"severity\":\"recoverable\",\"message\":\"the worker stopped\"}",
	    &end);
	ck_assert_int_eq(end, 0);
	ck_assert_ptr_null(strstr(s, "\"error\""));
	ck_assert_ptr_nonnull(strstr(s, "text-end"));
	free(s);
	free(one(&t, 5, "agent_state", "{\"status\":\"thinking\"}", &end));
	ck_assert_int_eq(end, 0);
	s = one(&t, 6, "token", "{\"messageId\":\"m-2.1\",\"content\":"
	    "\"partial and whole\"}", &end);
	ck_assert_ptr_nonnull(strstr(s, "\"text-start\",\"id\":\"txt-6\""));
	free(s);
	s = one(&t, 7, "done", "{\"messageId\":\"m-2.1\"}", &end);
	ck_assert_int_eq(end, 1);
	ck_assert_ptr_nonnull(strstr(s, "\"finishReason\":\"stop\""));
	ck_assert_ptr_null(strstr(s, "\"error\""));
	free(s);
	/* The idle after it is another turn's business. */
	ck_assert_ptr_null(one(&t, 8, "agent_state", "{\"status\":\"idle\"}",
	    &end));
	aisdk_tr_clear(&t);

	/* The same error with the agent idle next: the turn failed. */
	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-2"), 0);
	free(one(&t, 2, "user_message", "{\"id\":\"x\"}", &end));
	s = one(&t, 3, "error", "{\"messageId\":\"m-2\",\"code\":\"LLM_ERROR\","
	    "\"severity\":\"recoverable\",\"message\":\"down\"}", &end);
	ck_assert_int_eq(end, 0);
	free(s);
	s = one(&t, 4, "agent_state", "{\"status\":\"idle\"}", &end);
	ck_assert_int_eq(end, 1);
	ck_assert_ptr_nonnull(strstr(s, "{\"type\":\"error\",\"errorText\":"
	    "\"LLM_ERROR: down\"}\n\nid: 4:2\ndata: [DONE]\n\n"));
	free(s);
	aisdk_tr_clear(&t);
}
END_TEST

/* A cursor past every chunk still ends the stream where the turn ends. */
START_TEST(test_past_end)
{
	static const char *ends[][2] = {
		{ "done", "{\"messageId\":\"m-2\"}" },
		{ "team_done", "{\"messageId\":\"m-2\"}" },
		{ "error", "{\"messageId\":\"m-2\",\"severity\":\"fatal\"}" },
		{ "session_complete", "{}" },
	};
	struct aisdk_tr t;
	size_t i;
	int end;
	char *s;

	for (i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-2"), 0);
		ck_assert_int_eq(adapt_cursor_parse(&t.cur,
		    "18446744073709551615:1"), 0);
		ck_assert_ptr_null(one(&t, 2, "user_message", "{\"id\":\"x\"}",
		    &end));
		ck_assert_ptr_null(one(&t, 3, "token", "{\"messageId\":\"m-2\","
		    "\"content\":\"a\"}", &end));
		s = one(&t, 4, ends[i][0], ends[i][1], &end);
		ck_assert_msg(end == 1, "%s did not end", ends[i][0]);
		ck_assert_ptr_null(s);
		aisdk_tr_clear(&t);
	}
}
END_TEST

/* Past AISDK_TR_CALLS calls: an error ends it, no chunk twice. */
START_TEST(test_calls_bound)
{
	struct aisdk_tr t;
	char json[160], *s;
	int i, end = 0;

	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-2"), 0);
	free(one(&t, 2, "user_message", "{\"id\":\"x\"}", &end));
	for (i = 0; i < AISDK_TR_CALLS; i++) {
		snprintf(json, sizeof(json), "{\"messageId\":\"m-2\",\"step\":1,"
		    "\"toolCallId\":\"c%d\",\"tool\":\"t\"}", i);
		free(one(&t, 3 + (uint64_t)i, "tool_start", json, &end));
		ck_assert_int_eq(end, 0);
	}
	snprintf(json, sizeof(json), "{\"messageId\":\"m-2\",\"step\":1,"
	    "\"toolCallId\":\"c%d\",\"tool\":\"t\"}", i);
	s = one(&t, 3 + (uint64_t)i, "tool_start", json, &end);
	ck_assert_int_eq(end, 1);
	ck_assert_ptr_nonnull(strstr(s, "TOO_MANY_CALLS"));
	ck_assert_ptr_null(strstr(s, "tool-input-start"));
	ck_assert_ptr_nonnull(strstr(s, "data: [DONE]"));
	free(s);
	aisdk_tr_clear(&t);
}
END_TEST

/* A seq that is no turn's user_message: an error at once, not a wait. */
START_TEST(test_no_turn)
{
	struct aisdk_tr t;
	int end;
	char *s;

	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-3"), 0);
	s = one(&t, 3, "token", "{\"messageId\":\"m-1\",\"content\":\"a\"}",
	    &end);
	ck_assert_int_eq(end, 1);
	ck_assert_ptr_nonnull(strstr(s, "NOT_FOUND"));
	free(s);
	aisdk_tr_clear(&t);
	/* Its user_message is gone (the log starts later). */
	ck_assert_int_eq(aisdk_tr_init(&t, NULL, "m-3"), 0);
	s = one(&t, 9, "user_message", "{\"id\":\"x\"}", &end);
	ck_assert_int_eq(end, 1);
	free(s);
	aisdk_tr_clear(&t);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("aisdk");
	TCase *tc = tcase_create("aisdk");

	tcase_add_test(tc, test_turn);
	tcase_add_test(tc, test_continue);
	tcase_add_test(tc, test_resume_exact);
	tcase_add_test(tc, test_reject_error);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_recover);
	tcase_add_test(tc, test_past_end);
	tcase_add_test(tc, test_calls_bound);
	tcase_add_test(tc, test_no_turn);
	suite_add_tcase(s, tc);
	return check_run(s);
}

/* Never frozen here: the tree is the meta (sess_meta.c's thaw is not linked). */
cJSON *
sess_meta_thaw(const struct sess *s)
{
	return s->mtree;
}
