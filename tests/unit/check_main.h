/* The one main() every unit test shares: run a suite, exit 0 iff it passed. */
#ifndef PARLEY_CHECK_MAIN_H
#define PARLEY_CHECK_MAIN_H

#include <stdlib.h>

#include <check.h>

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
