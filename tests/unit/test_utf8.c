/* Unit tests for the UTF-8 validator: tables, incremental feeding, splits. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/utf8.c"
#include "check_main.h"

struct vec {
	const char	*name;
	const char	*s;
	size_t		 len;
	int		 valid;
};

#define V(name, lit, ok)	{ name, lit, sizeof(lit) - 1, ok }

static const struct vec vecs[] = {
	V("empty", "", 1),
	V("ascii", "Hello, world", 1),
	V("nul", "a\0b", 1),
	V("2-byte e-acute", "caf\xc3\xa9", 1),
	V("3-byte euro", "\xe2\x82\xac", 1),
	V("4-byte emoji", "\xf0\x9f\x98\x80", 1),
	V("U+007F", "\x7f", 1),
	V("U+0080", "\xc2\x80", 1),
	V("U+07FF", "\xdf\xbf", 1),
	V("U+0800", "\xe0\xa0\x80", 1),
	V("U+D7FF", "\xed\x9f\xbf", 1),
	V("U+E000", "\xee\x80\x80", 1),
	V("U+FFFF", "\xef\xbf\xbf", 1),
	V("U+10000", "\xf0\x90\x80\x80", 1),
	V("U+10FFFF", "\xf4\x8f\xbf\xbf", 1),
	V("mixed", "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z", 1),
	V("overlong slash C0", "\xc0\xaf", 0),
	V("overlong C1", "\xc1\xbf", 0),
	V("overlong 3-byte", "\xe0\x80\xaf", 0),
	V("overlong 3-byte max", "\xe0\x9f\xbf", 0),
	V("overlong 4-byte", "\xf0\x80\x80\xaf", 0),
	V("overlong 4-byte max", "\xf0\x8f\xbf\xbf", 0),
	V("surrogate D800", "\xed\xa0\x80", 0),
	V("surrogate DFFF", "\xed\xbf\xbf", 0),
	V("surrogate pair", "\xed\xa0\xbd\xed\xb8\x80", 0),
	V("U+110000", "\xf4\x90\x80\x80", 0),
	V("F5 lead", "\xf5\x80\x80\x80", 0),
	V("FF", "\xff", 0),
	V("FE", "\xfe", 0),
	V("lone continuation", "\x80", 0),
	V("continuation after ascii", "a\xbf", 0),
	V("truncated 2-byte", "\xc3", 0),
	V("truncated 3-byte", "\xe2\x82", 0),
	V("truncated 4-byte", "\xf0\x9f\x98", 0),
	V("truncated then ascii", "\xe2\x82" "a", 0),
	V("lead then lead", "\xc3\xc3\xa9", 0),
	V("5-byte form", "\xf8\x88\x80\x80\x80", 0),
	V("valid then invalid", "Hello\xce\xba\xcf\x8c\xf4\x90\x80\x80", 0),
};

START_TEST(test_table_whole)
{
	const struct vec	*v = &vecs[_i];

	ck_assert_msg(utf8_valid((const unsigned char *)v->s, v->len) ==
	    v->valid, "%s", v->name);
}
END_TEST

/* Feeding byte by byte and in every 2-way split gives the same verdict. */
START_TEST(test_table_incremental)
{
	const struct vec	*v = &vecs[_i];
	const unsigned char	*b = (const unsigned char *)v->s;
	struct utf8_state	 st;
	size_t			 i, k;
	int			 bad;

	utf8_init(&st);
	bad = 0;
	for (i = 0; i < v->len; i++)
		if (utf8_feed(&st, b + i, 1) == -1)
			bad = 1;
	ck_assert_msg((!bad && utf8_complete(&st)) == v->valid,
	    "bytewise %s", v->name);

	for (k = 0; k <= v->len; k++) {
		utf8_init(&st);
		bad = utf8_feed(&st, b, k) == -1;
		bad |= utf8_feed(&st, b + k, v->len - k) == -1;
		ck_assert_msg((!bad && utf8_complete(&st)) == v->valid,
		    "split %zu %s", k, v->name);
	}
}
END_TEST

START_TEST(test_fail_fast_and_sticky)
{
	struct utf8_state	st;

	utf8_init(&st);
	ck_assert_int_eq(utf8_feed(&st, (const unsigned char *)"ab\xe2", 3), 0);
	ck_assert_int_eq(utf8_complete(&st), 0);
	ck_assert_int_eq(utf8_feed(&st, (const unsigned char *)"\x82", 1), 0);
	ck_assert_int_eq(utf8_complete(&st), 0);
	ck_assert_int_eq(utf8_feed(&st, (const unsigned char *)"\xac", 1), 0);
	ck_assert_int_eq(utf8_complete(&st), 1);

	/* invalid reported on the piece carrying it, and stays invalid */
	ck_assert_int_eq(utf8_feed(&st, (const unsigned char *)"x\xed\xa0", 3),
	    -1);
	ck_assert_int_eq(utf8_feed(&st, (const unsigned char *)"a", 1), -1);
	ck_assert_int_eq(utf8_complete(&st), 0);

	/* an impossible continuation fails before the sequence ends */
	utf8_init(&st);
	ck_assert_int_eq(utf8_feed(&st, (const unsigned char *)"\xf4\x90", 2),
	    -1);
	utf8_init(&st);
	ck_assert_int_eq(utf8_feed(&st, NULL, 0), 0);
	ck_assert_int_eq(utf8_complete(&st), 1);
}
END_TEST

/* Every code point encoded by hand must validate; every surrogate must not. */
START_TEST(test_all_code_points)
{
	unsigned char	b[4];
	uint32_t	cp;
	size_t		n;
	int		want;

	for (cp = 0; cp <= 0x10ffff; cp++) {
		if (cp < 0x80) {
			b[0] = (unsigned char)cp;
			n = 1;
		} else if (cp < 0x800) {
			b[0] = 0xc0 | (cp >> 6);
			b[1] = 0x80 | (cp & 0x3f);
			n = 2;
		} else if (cp < 0x10000) {
			b[0] = 0xe0 | (cp >> 12);
			b[1] = 0x80 | ((cp >> 6) & 0x3f);
			b[2] = 0x80 | (cp & 0x3f);
			n = 3;
		} else {
			b[0] = 0xf0 | (cp >> 18);
			b[1] = 0x80 | ((cp >> 12) & 0x3f);
			b[2] = 0x80 | ((cp >> 6) & 0x3f);
			b[3] = 0x80 | (cp & 0x3f);
			n = 4;
		}
		want = !(cp >= 0xd800 && cp <= 0xdfff);
		if (utf8_valid(b, n) != want)
			ck_abort_msg("code point U+%04X", (unsigned int)cp);
	}
}
END_TEST

/* Every 2-byte string: valid iff a well-formed 1- or 2-byte sequence pair. */
START_TEST(test_all_two_byte_strings)
{
	unsigned char	b[2];
	unsigned int	x, y;
	int		want;

	for (x = 0; x < 256; x++)
		for (y = 0; y < 256; y++) {
			b[0] = x;
			b[1] = y;
			if (x < 0x80)
				want = y < 0x80;
			else
				want = x >= 0xc2 && x <= 0xdf &&
				    y >= 0x80 && y <= 0xbf;
			if (utf8_valid(b, 2) != want)
				ck_abort_msg("%02x %02x", x, y);
		}
}
END_TEST

static Suite *
utf8_suite(void)
{
	Suite	*s = suite_create("utf8");
	TCase	*tc = tcase_create("core");

	tcase_add_loop_test(tc, test_table_whole, 0,
	    sizeof(vecs) / sizeof(vecs[0]));
	tcase_add_loop_test(tc, test_table_incremental, 0,
	    sizeof(vecs) / sizeof(vecs[0]));
	tcase_add_test(tc, test_fail_fast_and_sticky);
	tcase_add_test(tc, test_all_code_points);
	tcase_add_test(tc, test_all_two_byte_strings);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(utf8_suite());
}
