/* Unit tests for util.c's timestamps: the per-second cache of iso8601. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../../src/util.c"
#include "check_main.h"

/* What util_iso8601 wrote before its cache: gmtime, strftime, millis. */
static void
want(char out[32], uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char b[24];

	gmtime_r(&t, &tm);
	strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, 32, "%s.%03uZ", b, (unsigned)(ms % 1000));
}

START_TEST(t_iso8601)
{
	static const uint64_t at[] = {
		0, 1, 999, 1000, 1771236333218ull, 1771236333999ull,
		1771236334000ull, 1771236333001ull, 1795706954209ull,
		1795706954209ull, 253402300799999ull, 951782400000ull,
	};
	char got[32], w[32];
	size_t i;
	uint64_t ms;

	for (i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		util_iso8601(got, at[i]);
		want(w, at[i]);
		ck_assert_str_eq(got, w);
	}
	ck_assert_str_eq((util_iso8601(got, 1771236333218ull), got),
	    "2026-02-16T10:05:33.218Z");
	/* Back and forth across second and day boundaries. */
	for (ms = 1771199999000ull - 2500; ms < 1771199999000ull + 2500;
	    ms += 7) {
		util_iso8601(got, ms);
		want(w, ms);
		ck_assert_str_eq(got, w);
		util_iso8601(got, ms - 86400000);
		want(w, ms - 86400000);
		ck_assert_str_eq(got, w);
	}
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, t_iso8601);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
