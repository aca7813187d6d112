/*
 * Unit tests for what the protocol adapters share (workers/adapt.c): the
 * SSE blocks and their SEQ:K ids, the cursor that leaves out what a
 * resuming client has (and marks a lost chunk), Last-Event-ID parsing,
 * the turn and thought filters, m-SEQ ids, and which ids may be chats.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/adapt.c"
#include "check_main.h"

/* Three chunks of event 7, two of event 9, into one text. */
static char *
play(struct adapt_cursor *cur, size_t *len)
{
	char *out = NULL;

	*len = 0;
	adapt_sse_text(cur, &out, len, 7, "a");
	adapt_sse(cur, &out, len, 7, cJSON_CreateString("b"));
	adapt_sse_text(cur, &out, len, 7, "c");
	adapt_sse_text(cur, &out, len, 9, "d");
	adapt_sse_text(cur, &out, len, 9, "[DONE]");
	return out;
}

START_TEST(test_ids)
{
	struct adapt_cursor cur;
	size_t len;
	char *out;

	memset(&cur, 0, sizeof(cur));
	cur.ids = 1;
	out = play(&cur, &len);
	ck_assert_str_eq(out, "id: 7:1\ndata: a\n\n" "id: 7:2\ndata: \"b\"\n\n"
	    "id: 7:3\ndata: c\n\n" "id: 9:1\ndata: d\n\n"
	    "id: 9:2\ndata: [DONE]\n\n");
	ck_assert_uint_eq(len, strlen(out));
	ck_assert_int_eq(cur.failed, 0);
	free(out);
	/* Once the log has an epoch, ids name it. */
	memset(&cur, 0, sizeof(cur));
	cur.ids = 1;
	snprintf(cur.epoch, sizeof(cur.epoch), "0a1b2c3d");
	out = play(&cur, &len);
	ck_assert(strncmp(out, "id: 7:1.0a1b2c3d\ndata: a\n\n", 26) == 0);
	ck_assert_ptr_nonnull(strstr(out, "id: 9:2.0a1b2c3d\ndata: [DONE]"));
	free(out);
	/* No ids for clients that have nothing to resume by. */
	memset(&cur, 0, sizeof(cur));
	out = play(&cur, &len);
	ck_assert_ptr_null(strstr(out, "id:"));
	free(out);
}
END_TEST

START_TEST(test_skip)
{
	static const char *ids[] = { "0:0", "7:1", "7:2", "7", "9:1", "9:2" };
	static const char *rest[] = { "id: 7:1", "id: 7:2", "id: 7:3",
	    "id: 9:1", "id: 9:2", NULL };
	struct adapt_cursor cur;
	size_t i, len;
	char *out;

	/* Resumed after each chunk: exactly the ones after it. */
	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		memset(&cur, 0, sizeof(cur));
		cur.ids = 1;
		ck_assert_int_eq(adapt_cursor_parse(&cur, ids[i]), 0);
		out = play(&cur, &len);
		if (rest[i] == NULL)
			ck_assert_ptr_null(out);
		else
			ck_assert_msg(out != NULL && strncmp(out, rest[i],
			    strlen(rest[i])) == 0, "after %s: %s", ids[i],
			    out ? out : "(nothing)");
		free(out);
	}
}
END_TEST

START_TEST(test_parse)
{
	static const char *bad[] = { "", "x", "-1", "7:", "7:x", "7:1x",
	    " 7", "7 :1", "99999999999999999999", "7:99999999", "7:1.",
	    "7:1.0a1b2c3", "7:1.0a1b2c3d4", "7:1.0a1b2c3g", "7.x", "7:1.-" };
	struct adapt_cursor cur;
	size_t i;

	memset(&cur, 0, sizeof(cur));
	ck_assert_int_eq(adapt_cursor_parse(&cur, "18446744073709551615:1"), 0);
	ck_assert(cur.skip_seq == UINT64_MAX && cur.skip_k == 1);
	ck_assert_int_eq(adapt_cursor_parse(&cur, "5"), 0);
	ck_assert(cur.skip_seq == 5 && cur.skip_k == (unsigned)-1);
	ck_assert_str_eq(cur.client, "");
	ck_assert_int_eq(adapt_cursor_parse(&cur, "6:2.0A1b2c3d"), 0);
	ck_assert(cur.skip_seq == 6 && cur.skip_k == 2 && cur.resumed);
	ck_assert_str_eq(cur.client, "0A1b2c3d");
	memset(&cur, 0, sizeof(cur));
	ck_assert_int_eq(adapt_cursor_parse(&cur, "6.0a1b2c3d"), 0);
	ck_assert(cur.skip_seq == 6 && cur.skip_k == (unsigned)-1);
	ck_assert_str_eq(cur.client, "0a1b2c3d");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(adapt_cursor_parse(&cur, bad[i]) == -1,
		    "'%s' taken", bad[i]);
	ck_assert_int_eq(adapt_cursor_parse(&cur, NULL), -1);
}
END_TEST

START_TEST(test_filters)
{
	cJSON *e;

	e = cJSON_Parse("{\"messageId\":\"m-12\"}");
	ck_assert(adapt_turn_of("m-12", e));
	ck_assert(!adapt_turn_of("m-1", e));
	ck_assert(!adapt_turn_of("", e));
	cJSON_Delete(e);
	e = cJSON_Parse("{\"messageId\":\"m-12.2\"}");
	ck_assert(adapt_turn_of("m-12", e));
	cJSON_Delete(e);
	e = cJSON_Parse("{\"messageId\":\"m-12-1\"}");
	ck_assert(adapt_turn_of("m-12", e));
	cJSON_Delete(e);
	e = cJSON_Parse("{\"messageId\":\"m-123\"}");
	ck_assert(!adapt_turn_of("m-12", e));
	cJSON_Delete(e);
	e = cJSON_Parse("{\"thoughtId\":\"th_m-12-1-1\"}");
	ck_assert(adapt_thought_of("m-12", e));
	ck_assert(!adapt_thought_of("m-1", e));
	cJSON_Delete(e);
	e = cJSON_Parse("{\"thoughtId\":\"m-12-1-1\"}");
	ck_assert(!adapt_thought_of("m-12", e));
	cJSON_Delete(e);
}
END_TEST

START_TEST(test_msgid)
{
	char msg[160];

	ck_assert_uint_eq(adapt_msgid_seq("m-1"), 1);
	ck_assert_uint_eq(adapt_msgid_seq("m-9007199254740992"),
	    UINT64_C(9007199254740992));
	ck_assert_uint_eq(adapt_msgid_seq("m-9007199254740993"), 0);
	ck_assert_uint_eq(adapt_msgid_seq("m-99999999999999999999999"), 0);
	ck_assert_uint_eq(adapt_msgid_seq("m-"), 0);
	ck_assert_uint_eq(adapt_msgid_seq("m-1.2"), 0);
	ck_assert_uint_eq(adapt_msgid_seq("x-1"), 0);
	ck_assert_uint_eq(adapt_msgid_seq(NULL), 0);
	ck_assert_int_eq(adapt_session_id("chat-1", msg, sizeof(msg)), 0);
	ck_assert_int_eq(adapt_session_id("kg:proj", msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "project"));
	ck_assert_int_eq(adapt_session_id("a/b", msg, sizeof(msg)), -1);
	ck_assert_int_eq(adapt_session_id("", msg, sizeof(msg)), -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("adapt");
	TCase *tc = tcase_create("adapt");

	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_skip);
	tcase_add_test(tc, test_parse);
	tcase_add_test(tc, test_filters);
	tcase_add_test(tc, test_msgid);
	suite_add_tcase(s, tc);
	return check_run(s);
}

/* Never frozen here: the tree is the meta (sess_meta.c's thaw is not linked). */
cJSON *
sess_meta_thaw(const struct sess *s)
{
	return s->mtree;
}
