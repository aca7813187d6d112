/*
 * Unit tests for the JSON writer: every tree it prints must come out
 * byte for byte as cJSON_PrintUnformatted prints it (the log must not
 * change when a path moves to it), growth from a stack buffer, the bound.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/jsonw.c"
#include "check_main.h"

/* v printed by the writer equals cJSON's own print (v is freed). */
static void
same(cJSON *v, size_t stk)
{
	char buf[64], *want = cJSON_PrintUnformatted(v);
	const char *got;
	struct jw w;
	size_t len;

	ck_assert_ptr_nonnull(want);
	jw_init(&w, stk ? buf : NULL, stk < sizeof(buf) ? stk : sizeof(buf),
	    1 << 20);
	jw_cjson(&w, v);
	got = jw_text(&w, &len);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(len, strlen(want));
	ck_assert_str_eq(got, want);
	jw_free(&w);
	free(want);
	cJSON_Delete(v);
}

START_TEST(t_scalars)
{
	same(cJSON_CreateNull(), 64);
	same(cJSON_CreateTrue(), 64);
	same(cJSON_CreateFalse(), 64);
	same(cJSON_CreateString(""), 64);
	same(cJSON_CreateString("plain"), 0);
	same(cJSON_CreateRaw("{\"a\":1}"), 64);
	same(cJSON_CreateObject(), 64);
	same(cJSON_CreateArray(), 64);
}
END_TEST

/* Every byte value in a string, and runs of escapes next to each other. */
START_TEST(t_string_bytes)
{
	char s[300];
	int i, n = 0;

	for (i = 1; i < 256; i++)
		s[n++] = (char)i;
	s[n] = '\0';
	same(cJSON_CreateString(s), 64);
	same(cJSON_CreateString("\"\\\b\f\n\r\t\x01\x1f\x7f\"\""), 8);
	same(cJSON_CreateString("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
	    64);
}
END_TEST

static const double nums[] = {
	0, 1, -1, 7, 42, 255, 65536, 1e6, 2147483647.0, 2147483648.0,
	-2147483648.0, -2147483649.0, 4294967296.0, 999999999999999.0,
	1e15, -1e15, 1e15 + 1, 1234567890123456.0, 9007199254740991.0,
	9007199254740992.0, 9007199254740993.0, 1e16, 1e17, 1e21, 1e300,
	-1e300, DBL_MAX, -DBL_MAX, DBL_MIN, 5e-324, 0.1, 0.2, 0.3, 1.0 / 3,
	2.0 / 3, -0.5, 1.5, 3.141592653589793, 2.718281828459045, 1e-5,
	1e-4, 123.456, 100.25, 0.1 + 0.2, 1795706954209485.0,
	1795706954.209485, 6.02214076e23, -123456.789e-10,
};

START_TEST(t_numbers)
{
	size_t i;
	unsigned r = 12345;

	for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		same(cJSON_CreateNumber(nums[i]), 64);
	same(cJSON_CreateNumber(-0.0), 64);
	same(cJSON_CreateNumber(NAN), 64);
	same(cJSON_CreateNumber(INFINITY), 64);
	same(cJSON_CreateNumber(-INFINITY), 64);
	/* Doubles from random bits: every exponent, every digit count. */
	for (i = 0; i < 20000; i++) {
		uint64_t b = 0;
		double d;
		int k;

		for (k = 0; k < 4; k++) {
			r = r * 1103515245u + 12345u;
			b = (b << 16) | ((r >> 8) & 0xffff);
		}
		memcpy(&d, &b, sizeof(d));
		same(cJSON_CreateNumber(d), 64);
		same(cJSON_CreateNumber((double)(int64_t)(b >> (i % 60))), 64);
	}
}
END_TEST

/* A nested tree of every kind, printed from a 16-byte start (grows). */
START_TEST(t_tree)
{
	cJSON *o = cJSON_CreateObject(), *a, *in;
	int i;

	cJSON_AddNumberToObject(o, "v", 1);
	cJSON_AddStringToObject(o, "type", "token");
	cJSON_AddStringToObject(o, "content", "line one\nline \"two\"");
	a = cJSON_AddArrayToObject(o, "list");
	for (i = 0; i < 50; i++)
		cJSON_AddItemToArray(a, i % 3 ? cJSON_CreateNumber(i * 1.25) :
		    cJSON_CreateString("x"));
	in = cJSON_AddObjectToObject(o, "in\tner");
	cJSON_AddNullToObject(in, "n");
	cJSON_AddBoolToObject(in, "b", 1);
	cJSON_AddItemToObject(in, "empty", cJSON_CreateArray());
	cJSON_AddItemToObject(in, "raw", cJSON_CreateRaw("[1,2]"));
	/* A repeated key is printed twice, as cJSON does. */
	cJSON_AddNumberToObject(in, "n", 2);
	same(o, 16);
}
END_TEST

/* Members after a head: the same text as the object moved into it. */
START_TEST(t_members)
{
	cJSON *o = cJSON_CreateObject(), *b = cJSON_CreateObject();
	char *want, buf[32];
	const char *got;
	struct jw w;
	size_t len;

	cJSON_AddNumberToObject(o, "v", 1);
	cJSON_AddStringToObject(o, "type", "x");
	cJSON_AddStringToObject(b, "a", "1");
	cJSON_AddItemToObject(b, "b", cJSON_CreateArray());
	jw_init(&w, buf, sizeof(buf), 1024);
	jw_raw(&w, "{", 1);
	jw_key(&w, "v");
	jw_u64(&w, 1);
	jw_key(&w, "type");
	jw_str(&w, "x", 1);
	jw_cjson_members(&w, b);
	jw_raw(&w, "}", 1);
	while (b->child != NULL) {
		cJSON *f = b->child;

		cJSON_DetachItemViaPointer(b, f);
		cJSON_AddItemToObject(o, f->string, f);
	}
	want = cJSON_PrintUnformatted(o);
	got = jw_text(&w, &len);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	/* An empty body adds nothing. */
	jw_free(&w);
	jw_init(&w, buf, sizeof(buf), 1024);
	jw_raw(&w, "{", 1);
	jw_cjson_members(&w, b);
	jw_raw(&w, "}", 1);
	ck_assert_str_eq(jw_text(&w, &len), "{}");
	jw_free(&w);
	free(want);
	cJSON_Delete(o);
	cJSON_Delete(b);
}
END_TEST

/* Over the bound: the text is gone for good, nothing is overrun. */
START_TEST(t_bound)
{
	char buf[8];
	struct jw w;
	size_t len;

	jw_init(&w, buf, sizeof(buf), 10);
	jw_raw(&w, "0123456789", 10);
	ck_assert_ptr_nonnull(jw_text(&w, &len));
	ck_assert_uint_eq(len, 10);
	jw_raw(&w, "x", 1);
	ck_assert_ptr_null(jw_text(&w, &len));
	jw_raw(&w, "", 0);
	ck_assert_ptr_null(jw_text(&w, &len));
	jw_free(&w);
	/* An invalid node fails the whole text, as cJSON's print does. */
	jw_init(&w, buf, sizeof(buf), 100);
	jw_cjson(&w, NULL);
	ck_assert_ptr_null(jw_text(&w, &len));
	jw_free(&w);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("jsonw");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, t_scalars);
	tcase_add_test(tc, t_string_bytes);
	tcase_add_test(tc, t_numbers);
	tcase_add_test(tc, t_tree);
	tcase_add_test(tc, t_members);
	tcase_add_test(tc, t_bound);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
