/* The one main() every unit test shares: run a suite, exit 0 iff it passed. */
#ifndef PARLEY_CHECK_MAIN_H
#define PARLEY_CHECK_MAIN_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include <check.h>

static int
check_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

/* Removes a test's scratch directory and everything in it. */
static inline void
check_rmtree(const char *dir)
{
	nftw(dir, check_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline int
check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
