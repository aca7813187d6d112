/*
 * Unit tests for session log epochs (src/epoch.c): the text form, the
 * bound on kept epochs, and what a resume decides.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "parley/epoch.h"
#include "check_main.h"

START_TEST(test_parse_format)
{
	struct epochs	 e;
	char		 buf[EPOCH_TEXT_MAX];

	ck_assert_int_eq(epoch_parse(&e, "", 0), 0);
	ck_assert_uint_eq(e.n, 0);
	ck_assert_str_eq(epoch_current(&e), "");
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3d:51,DEADBEEF:40", 23), 0);
	ck_assert_uint_eq(e.n, 2);
	ck_assert_str_eq(e.v[0].token, "0a1b2c3d");
	ck_assert_uint_eq(e.v[0].from, 51);
	ck_assert_str_eq(epoch_current(&e), "deadbeef");
	epoch_format(&e, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0a1b2c3d:51,deadbeef:40");
	/* Malformed: each leaves nothing. */
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3d:51,", 12), -1);
	ck_assert_uint_eq(e.n, 0);
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3:51", 10), -1);
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3g:51", 11), -1);
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3d:0", 10), -1);
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3d:", 9), -1);
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3d:5x", 11), -1);
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3d:99999999999999999999",
	    29), -1);
	ck_assert_int_eq(epoch_parse(&e, ",0a1b2c3d:5", 11), -1);
	/* More than EPOCH_KEEP. */
	ck_assert_int_eq(epoch_parse(&e, "00000001:1,00000002:2,00000003:3,"
	    "00000004:4,00000005:5,00000006:6,00000007:7,00000008:8,"
	    "00000009:9", 98), -1);
}
END_TEST

START_TEST(test_valid_token)
{
	char	 t[EPOCH_TOKEN_LEN + 1], u[EPOCH_TOKEN_LEN + 1];

	ck_assert(epoch_valid(""));
	ck_assert(epoch_valid("0a1b2c3d"));
	ck_assert(epoch_valid("DEADBEEF"));
	ck_assert(!epoch_valid("0a1b2c3"));
	ck_assert(!epoch_valid("0a1b2c3d0"));
	ck_assert(!epoch_valid("0a1b2c3z"));
	ck_assert(!epoch_valid("0a1b 2c3"));
	epoch_token(t);
	epoch_token(u);
	ck_assert_uint_eq(strlen(t), EPOCH_TOKEN_LEN);
	ck_assert(epoch_valid(t));
	ck_assert_str_ne(t, u);
}
END_TEST

/* Past EPOCH_KEEP the oldest goes; its from is folded into the next. */
START_TEST(test_push_bound)
{
	struct epochs	 e;
	char		 tok[EPOCH_TOKEN_LEN + 1], buf[EPOCH_TEXT_MAX];
	uint64_t	 from;
	int		 i;

	memset(&e, 0, sizeof(e));
	for (i = 0; i < EPOCH_KEEP; i++) {
		snprintf(tok, sizeof(tok), "%08x", i + 1);
		epoch_push(&e, tok, (uint64_t)(100 + 10 * i));
	}
	ck_assert_uint_eq(e.n, EPOCH_KEEP);
	epoch_push(&e, "0000000a", 50);
	ck_assert_uint_eq(e.n, EPOCH_KEEP);
	ck_assert_str_eq(e.v[0].token, "00000002");
	ck_assert_uint_eq(e.v[0].from, 100);	/* folded from the first */
	ck_assert_str_eq(epoch_current(&e), "0000000a");
	epoch_format(&e, buf, sizeof(buf));
	ck_assert_int_eq(epoch_parse(&e, buf, strlen(buf)), 0);
	ck_assert_uint_eq(e.n, EPOCH_KEEP);
	/* A client of the forgotten first epoch: from no later than 100,
	 * and the later rewrite at 50 comes first. */
	ck_assert_int_eq(epoch_resume(&e, "00000001", 120, &from), 1);
	ck_assert_uint_eq(from, 50);
}
END_TEST

/* A follower asks whether a client's epoch is in its list (route.c). */
START_TEST(test_known)
{
	struct epochs	 e;

	ck_assert_int_eq(epoch_parse(&e, "", 0), 0);
	ck_assert_int_eq(epoch_known(&e, "0a1b2c3d"), 0);
	ck_assert_int_eq(epoch_parse(&e, "0a1b2c3d:51,DEADBEEF:60", 23), 0);
	ck_assert_int_eq(epoch_known(&e, "0a1b2c3d"), 1);
	ck_assert_int_eq(epoch_known(&e, "deadbeef"), 1);
	ck_assert_int_eq(epoch_known(&e, "deadbee0"), 0);
	ck_assert_int_eq(epoch_known(&e, ""), 0);
}
END_TEST

START_TEST(test_resume)
{
	struct epochs	 e;
	uint64_t	 from = 0;

	/* Never rewritten: everything resumes. */
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(epoch_resume(&e, "", 1000, &from), 0);
	ck_assert_int_eq(epoch_resume(&e, "0a1b2c3d", 1000, &from), 0);

	/* One rewrite from 51. */
	epoch_push(&e, "aaaaaaaa", 51);
	ck_assert_int_eq(epoch_resume(&e, "aaaaaaaa", 80, &from), 0);
	ck_assert_int_eq(epoch_resume(&e, "AAAAAAAA", 80, &from), 0);
	/* Absent = "": stale; what it saw from 51 on may differ. */
	ck_assert_int_eq(epoch_resume(&e, "", 60, &from), 1);
	ck_assert_uint_eq(from, 51);
	ck_assert_int_eq(epoch_resume(&e, "", 51, &from), 1);
	ck_assert_uint_eq(from, 51);
	/* Stale but below the rewrite: nothing it saw changed. */
	ck_assert_int_eq(epoch_resume(&e, "", 50, &from), 0);
	ck_assert_int_eq(epoch_resume(&e, "", 0, &from), 0);

	/* A second rewrite reaching further back (40), then a third (70). */
	epoch_push(&e, "bbbbbbbb", 40);
	epoch_push(&e, "cccccccc", 70);
	/* Two epochs behind: the smallest from after its epoch. */
	ck_assert_int_eq(epoch_resume(&e, "", 45, &from), 1);
	ck_assert_uint_eq(from, 40);
	ck_assert_int_eq(epoch_resume(&e, "aaaaaaaa", 45, &from), 1);
	ck_assert_uint_eq(from, 40);
	ck_assert_int_eq(epoch_resume(&e, "aaaaaaaa", 39, &from), 0);
	/* One behind. */
	ck_assert_int_eq(epoch_resume(&e, "bbbbbbbb", 75, &from), 1);
	ck_assert_uint_eq(from, 70);
	ck_assert_int_eq(epoch_resume(&e, "bbbbbbbb", 69, &from), 0);
	ck_assert_int_eq(epoch_resume(&e, "cccccccc", 75, &from), 0);
	/* Not this log's: older than all it holds. */
	ck_assert_int_eq(epoch_resume(&e, "12345678", 45, &from), 1);
	ck_assert_uint_eq(from, 40);
}
END_TEST

static Suite *
epoch_suite(void)
{
	Suite	*s = suite_create("epoch");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, test_parse_format);
	tcase_add_test(tc, test_valid_token);
	tcase_add_test(tc, test_push_bound);
	tcase_add_test(tc, test_resume);
	tcase_add_test(tc, test_known);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(epoch_suite());
}
