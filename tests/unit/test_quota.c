/* The shared fixed-window counters: bounds, windows, all-or-none, fork. */
#include <sys/wait.h>

#include <check.h>
#include <stdlib.h>
#include <unistd.h>

#include <stdio.h>

#include "parley/quota.h"
#include "check_main.h"

static int
take(struct quota *q, const char *a, unsigned la, const char *s,
    unsigned ls, uint64_t now, size_t *which, uint64_t *retry)
{
	struct quota_key k[2] = { { a, la }, { s, ls } };

	return quota_take(q, k, 2, 1000, now, which, retry);
}

START_TEST(bound_and_window)
{
	struct quota *q = quota_new(64);
	uint64_t retry = 0;
	size_t which = 9;
	int i;

	ck_assert_ptr_nonnull(q);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(take(q, "a:1", 3, "", 3, 5000 + i, &which,
		    &retry), 0);
	ck_assert_int_eq(take(q, "a:1", 3, "", 3, 5100, &which, &retry), -1);
	ck_assert_uint_eq(which, 0);
	ck_assert_uint_eq(retry, 900);
	/* another key has its own count */
	ck_assert_int_eq(take(q, "a:2", 3, "", 3, 5100, &which, &retry), 0);
	/* the window ends: counting starts again */
	ck_assert_int_eq(take(q, "a:1", 3, "", 3, 6000, &which, &retry), 0);
	/* 0: no bound */
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(take(q, "a:3", 0, "", 0, 7000, &which,
		    &retry), 0);
	/* a NULL table refuses nothing */
	ck_assert_int_eq(take(NULL, "a:1", 1, "", 1, 7000, &which, &retry), 0);
	quota_free(q);
}
END_TEST

START_TEST(all_or_none)
{
	struct quota *q = quota_new(64);
	uint64_t retry = 0;
	size_t which = 9;

	ck_assert_int_eq(take(q, "a:1", 5, "s:x", 1, 100, &which, &retry), 0);
	/* the subject is at its bound: refused, and the address is not
	 * charged for it */
	ck_assert_int_eq(take(q, "a:1", 5, "s:x", 1, 101, &which, &retry), -1);
	ck_assert_uint_eq(which, 1);
	ck_assert_int_eq(take(q, "a:1", 2, "", 1, 102, &which, &retry), 0);
	ck_assert_int_eq(take(q, "a:1", 2, "", 1, 103, &which, &retry), -1);
	quota_free(q);
}
END_TEST

START_TEST(full_table_lets_through)
{
	struct quota *q = quota_new(8);
	uint64_t retry;
	size_t which;
	char k[32];
	int i;

	/* more live keys than slots: the oldest is forgotten, never a
	 * refusal for a key that did not make its number */
	for (i = 0; i < 100; i++) {
		snprintf(k, sizeof(k), "a:%d", i);
		ck_assert_int_eq(take(q, k, 1, "", 0, 100 + i, &which,
		    &retry), 0);
	}
	quota_free(q);
}
END_TEST

START_TEST(shared_with_children)
{
	struct quota *q = quota_new(64);
	uint64_t retry;
	size_t which;
	int i, st, ok = 0;
	pid_t pid;

	for (i = 0; i < 4; i++) {
		if ((pid = fork()) == 0)
			_exit(take(q, "a:shared", 3, "", 0, 100, &which,
			    &retry) == 0 ? 0 : 1);
		ck_assert_int_ne(pid, -1);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	/* three processes made their session, the fourth was refused */
	ck_assert_int_eq(ok, 3);
	ck_assert_int_eq(take(q, "a:shared", 3, "", 0, 100, &which, &retry),
	    -1);
	quota_free(q);
}
END_TEST

static Suite *
quota_suite(void)
{
	Suite *s = suite_create("quota");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, bound_and_window);
	tcase_add_test(tc, all_or_none);
	tcase_add_test(tc, full_table_lets_through);
	tcase_add_test(tc, shared_with_children);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(quota_suite());
}
