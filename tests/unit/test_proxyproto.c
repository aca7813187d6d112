#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/proxyproto.c"
#include "check_main.h"

#define V2SIG "\r\n\r\n\0\r\nQUIT\n"

/* Parses s whole, then every prefix, which must ask for more (or fail
 * the same way once the fault is in). */
static enum pp_result
parse_all(const unsigned char *s, size_t len, struct pp_header *h)
{
	struct pp_header pre;
	enum pp_result	 rv, r;
	size_t		 k;

	rv = pp_parse(s, len, h);
	for (k = 0; k < len; k++) {
		r = pp_parse(s, k, &pre);
		if (rv == PP_DONE)
			ck_assert_msg(r == PP_NEED_MORE || (r == PP_DONE &&
			    pre.len <= k), "prefix %zu of a good header: %d",
			    k, r);
		ck_assert_int_ne(r, PP_NONE);
	}
	return rv;
}

#define V1(s, res) parse_all((const unsigned char *)(s), sizeof(s) - 1, (res))

START_TEST(test_v1)
{
	struct pp_header h;
	const char	 s[] = "PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n"
	    "GET / HTTP/1.1\r\n";

	ck_assert_int_eq(pp_parse((const unsigned char *)s, sizeof(s) - 1,
	    &h), PP_DONE);
	ck_assert_uint_eq(h.len, strlen("PROXY TCP4 192.0.2.7 198.51.100.1 "
	    "56324 443\r\n"));
	ck_assert_str_eq(h.src, "192.0.2.7");
	ck_assert_uint_eq(h.src_port, 56324);
	ck_assert_int_eq(h.local, 0);

	ck_assert_int_eq(V1("PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n",
	    &h), PP_DONE);
	ck_assert_str_eq(h.src, "2001:db8::1");
	ck_assert_int_eq(V1("PROXY TCP6 ::ffff:10.0.0.1 ::1 1 2\r\n", &h),
	    PP_DONE);
	ck_assert_str_eq(h.src, "10.0.0.1");
	ck_assert_int_eq(V1("PROXY UNKNOWN\r\n", &h), PP_DONE);
	ck_assert_int_eq(h.local, 1);
	ck_assert_int_eq(V1("PROXY UNKNOWN ffff::1 ffff::2 1 2 x y\r\n", &h),
	    PP_DONE);
	ck_assert_int_eq(h.local, 1);

	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", &h), PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rx", &h), PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", &h),
	    PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", &h), PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", &h),
	    PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 ::1 5.6.7.8 1 2\r\n", &h), PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP6 1.2.3.4 ::1 1 2\r\n", &h), PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", &h),
	    PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", &h),
	    PP_ERROR);
	ck_assert_int_eq(V1("PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", &h),
	    PP_ERROR);
	ck_assert_int_eq(V1("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", &h),
	    PP_ERROR);
	ck_assert_int_eq(V1("PROXY \r\n", &h), PP_ERROR);
	ck_assert_ptr_nonnull(h.error);

	/* Not a PROXY header at all. */
	ck_assert_int_eq(pp_parse((const unsigned char *)"GET / HTTP/1.1", 14,
	    &h), PP_NONE);
	ck_assert_int_eq(pp_parse((const unsigned char *)"PROXy", 5, &h),
	    PP_NONE);
	ck_assert_int_eq(pp_parse((const unsigned char *)"PRO", 3, &h),
	    PP_NEED_MORE);
	ck_assert_int_eq(pp_parse((const unsigned char *)"", 0, &h),
	    PP_NEED_MORE);
}
END_TEST

START_TEST(test_v1_bound)
{
	struct pp_header h;
	unsigned char	 buf[300];

	/* No CRLF within 107 bytes: an error, not an endless wait. */
	memcpy(buf, "PROXY UNKNOWN ", 14);
	memset(buf + 14, 'a', sizeof(buf) - 14);
	ck_assert_int_eq(pp_parse(buf, PP_V1_MAX - 1, &h), PP_NEED_MORE);
	ck_assert_int_eq(pp_parse(buf, PP_V1_MAX, &h), PP_ERROR);
	ck_assert_int_eq(pp_parse(buf, sizeof(buf), &h), PP_ERROR);
	/* Exactly 107 with its CRLF is fine. */
	buf[PP_V1_MAX - 2] = '\r';
	buf[PP_V1_MAX - 1] = '\n';
	ck_assert_int_eq(pp_parse(buf, sizeof(buf), &h), PP_DONE);
	ck_assert_uint_eq(h.len, PP_V1_MAX);
	buf[PP_V1_MAX - 2] = 'a';
	buf[PP_V1_MAX - 1] = '\r';
	buf[PP_V1_MAX] = '\n';
	ck_assert_int_eq(pp_parse(buf, sizeof(buf), &h), PP_ERROR);
}
END_TEST

/* A v2 header: cmd, fam, then len bytes of addresses/TLVs. */
static size_t
v2(unsigned char *out, unsigned cmd, unsigned fam, const void *addr,
    size_t len)
{
	memcpy(out, V2SIG, 12);
	out[12] = (unsigned char)(0x20 | cmd);
	out[13] = (unsigned char)fam;
	out[14] = (unsigned char)(len >> 8);
	out[15] = (unsigned char)len;
	memcpy(out + 16, addr, len);
	return 16 + len;
}

/*
 * Found by fuzz/proxyproto.c: a bare LF, then a CR later in the line; the
 * verdict was an error at the LF and "need more" once the CR came.
 */
START_TEST(test_v1_lf_then_cr)
{
	static const char in[] = "PROXY UNKO\nG\rNNWET /health q";
	struct pp_header h;
	size_t n;

	for (n = 1; n <= strlen("PROXY UNKO"); n++)
		ck_assert_int_eq(pp_parse((const unsigned char *)in, n, &h),
		    PP_NEED_MORE);
	for (; n <= sizeof(in) - 1; n++) {
		ck_assert_int_eq(pp_parse((const unsigned char *)in, n, &h),
		    PP_ERROR);
		ck_assert_str_eq(h.error, "PROXY v1 line must end in CRLF");
	}
}
END_TEST

START_TEST(test_v2)
{
	struct pp_header h;
	unsigned char	 buf[2048], a[1100];
	size_t		 n;

	memset(a, 0, sizeof(a));
	memcpy(a, "\xc0\x00\x02\x07" "\x0a\x00\x00\x01" "\xdc\x04\x01\xbb", 12);
	n = v2(buf, 1, 0x11, a, 12);
	memcpy(buf + n, "GET", 3);
	ck_assert_int_eq(parse_all(buf, n + 3, &h), PP_DONE);
	ck_assert_uint_eq(h.len, 28);
	ck_assert_str_eq(h.src, "192.0.2.7");
	ck_assert_uint_eq(h.src_port, 56324);

	/* With TLVs after the addresses. */
	n = v2(buf, 1, 0x11, a, 40);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_DONE);
	ck_assert_uint_eq(h.len, 56);

	memset(a, 0, 36);
	a[0] = 0x20; a[1] = 0x01; a[2] = 0x0d; a[3] = 0xb8; a[15] = 1;
	a[32] = 0; a[33] = 80;
	n = v2(buf, 1, 0x21, a, 36);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_DONE);
	ck_assert_str_eq(h.src, "2001:db8::1");
	ck_assert_uint_eq(h.src_port, 80);
	memset(a, 0, 16);
	a[10] = a[11] = 0xff; a[12] = 10; a[15] = 9;
	n = v2(buf, 1, 0x21, a, 36);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_DONE);
	ck_assert_str_eq(h.src, "10.0.0.9");

	/* LOCAL, UNSPEC and unix: the peer speaks for itself. */
	n = v2(buf, 0, 0x11, a, 12);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_DONE);
	ck_assert_int_eq(h.local, 1);
	n = v2(buf, 1, 0x00, a, 0);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_DONE);
	ck_assert_int_eq(h.local, 1);
	n = v2(buf, 1, 0x31, a, 216);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_DONE);
	ck_assert_int_eq(h.local, 1);

	/* Errors. */
	n = v2(buf, 1, 0x11, a, 11);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_ERROR);
	n = v2(buf, 1, 0x21, a, 35);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_ERROR);
	n = v2(buf, 2, 0x11, a, 12);
	ck_assert_int_eq(parse_all(buf, n, &h), PP_ERROR);
	n = v2(buf, 1, 0x11, a, 12);
	buf[12] = 0x11;
	ck_assert_int_eq(parse_all(buf, n, &h), PP_ERROR);
	n = v2(buf, 1, 0x11, a, PP_V2_MAX - 16 + 1);
	ck_assert_int_eq(pp_parse(buf, 16, &h), PP_ERROR);
	ck_assert_ptr_nonnull(strstr(h.error, "too long"));
	n = v2(buf, 1, 0x11, a, PP_V2_MAX - 16);
	ck_assert_int_eq(pp_parse(buf, n, &h), PP_DONE);

	/* A broken signature is not a PROXY header. */
	n = v2(buf, 1, 0x11, a, 12);
	buf[5] = 'x';
	ck_assert_int_eq(pp_parse(buf, n, &h), PP_NONE);
	ck_assert_int_eq(pp_looks_like(buf, 5), 1);
	ck_assert_int_eq(pp_looks_like(buf, 6), 0);
}
END_TEST

START_TEST(test_cidr)
{
	struct pp_cidr	 c[3];
	struct pp_addr	 a;

	ck_assert_int_eq(pp_cidr_parse("10.0.0.0/8", &c[0]), 0);
	ck_assert_int_eq(pp_cidr_parse("2001:db8::/32", &c[1]), 0);
	ck_assert_int_eq(pp_cidr_parse("192.0.2.1", &c[2]), 0);
	ck_assert_uint_eq(c[2].prefix, 32);
	ck_assert(pp_trusted(c, 3, "10.200.3.4"));
	ck_assert(pp_trusted(c, 3, "::ffff:10.1.1.1"));
	ck_assert(!pp_trusted(c, 3, "11.0.0.1"));
	ck_assert(pp_trusted(c, 3, "2001:db8:ffff::9"));
	ck_assert(!pp_trusted(c, 3, "2001:db9::1"));
	ck_assert(pp_trusted(c, 3, "192.0.2.1"));
	ck_assert(!pp_trusted(c, 3, "192.0.2.2"));
	ck_assert(!pp_trusted(c, 3, "garbage"));
	ck_assert(!pp_trusted(c, 0, "10.0.0.1"));

	ck_assert_int_eq(pp_cidr_parse("10.0.0.0/33", &c[0]), -1);
	ck_assert_int_eq(pp_cidr_parse("::/129", &c[0]), -1);
	ck_assert_int_eq(pp_cidr_parse("10.0.0.0/", &c[0]), -1);
	ck_assert_int_eq(pp_cidr_parse("10.0.0.0/x", &c[0]), -1);
	ck_assert_int_eq(pp_cidr_parse("/8", &c[0]), -1);
	ck_assert_int_eq(pp_cidr_parse("host.example", &c[0]), -1);
	ck_assert_int_eq(pp_cidr_parse("10.0.0.0/1000", &c[0]), -1);
	ck_assert_int_eq(pp_cidr_parse("::ffff:10.0.0.0/104", &c[0]), 0);
	ck_assert_uint_eq(c[0].prefix, 8);
	ck_assert_int_eq(pp_cidr_parse("::/0", &c[0]), 0);
	ck_assert_int_eq(pp_addr_parse("2001:db8::1", &a), 0);
	ck_assert(pp_cidr_match(&c[0], &a));
	ck_assert_int_eq(pp_cidr_parse("10.1.2.3/12", &c[0]), 0);
	ck_assert_int_eq(pp_addr_parse("10.15.0.0", &a), 0);
	ck_assert(pp_cidr_match(&c[0], &a));
	ck_assert_int_eq(pp_addr_parse("10.16.0.0", &a), 0);
	ck_assert(!pp_cidr_match(&c[0], &a));
}
END_TEST

START_TEST(test_xff)
{
	struct pp_cidr	 t[2];
	char		 out[PP_ADDR_MAX];
	const char	*one[] = { "203.0.113.9, 10.0.0.2" };
	const char	*two[] = { "198.51.100.1, 203.0.113.9", "10.0.0.3" };
	const char	*bad[] = { "203.0.113.9, unknown, 10.0.0.2" };
	const char	*all[] = { "10.0.0.5,10.0.0.6" };
	const char	*sp[] = { " 203.0.113.9 ,\t10.0.0.2 " };
	const char	*port[] = { "203.0.113.9:443" };
	const char	*v6[] = { "2001:db8::7, ::ffff:10.0.0.1" };

	ck_assert_int_eq(pp_cidr_parse("10.0.0.0/8", &t[0]), 0);
	ck_assert_int_eq(pp_cidr_parse("127.0.0.1", &t[1]), 0);
	pp_forwarded_for(one, 1, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "203.0.113.9");
	/* Rightmost untrusted: the client cannot choose it by prepending. */
	pp_forwarded_for(two, 2, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "203.0.113.9");
	pp_forwarded_for(bad, 1, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "10.0.0.2");
	pp_forwarded_for(all, 1, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "10.0.0.5");
	pp_forwarded_for(sp, 1, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "203.0.113.9");
	pp_forwarded_for(port, 1, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "127.0.0.1");
	pp_forwarded_for(v6, 1, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "2001:db8::7");
	pp_forwarded_for(NULL, 0, t, 2, "127.0.0.1", out);
	ck_assert_str_eq(out, "127.0.0.1");
}
END_TEST

static Suite *
proxyproto_suite(void)
{
	Suite		*s = suite_create("proxyproto");
	TCase		*tc = tcase_create("core");

	tcase_add_test(tc, test_v1);
	tcase_add_test(tc, test_v1_bound);
	tcase_add_test(tc, test_v1_lf_then_cr);
	tcase_add_test(tc, test_v2);
	tcase_add_test(tc, test_cidr);
	tcase_add_test(tc, test_xff);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(proxyproto_suite());
}
