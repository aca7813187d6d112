/*
 * Unit tests for the WebSocket framing: RFC 6455 examples, every input
 * fed whole, byte by byte and in every 2-way split, and each protocol
 * violation with the close code it must produce.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/ws.c"
#include "check_main.h"

#define MAXMSG		16
#define BIG		(1024 * 1024)

static const unsigned char rfc_mask[4] = { 0x37, 0xfa, 0x21, 0x3d };

/*
 * Builds a masked client frame into out (>= len + 14): b0 is FIN|RSV|opcode,
 * ext forces the length form (-1 minimal, 0 7-bit, 2 16-bit, 8 64-bit).
 * Returns the frame length.
 */
static size_t
mkframe_ext(unsigned char *out, int b0, const void *payload, uint64_t len,
    int ext, int masked)
{
	const unsigned char	*pl = payload;
	size_t			 n = 0, i;

	out[n++] = (unsigned char)b0;
	if (ext == -1)
		ext = len < 126 ? 0 : len <= 0xffff ? 2 : 8;
	if (ext == 0)
		out[n++] = (unsigned char)len;
	else if (ext == 2) {
		out[n++] = 126;
		out[n++] = (unsigned char)(len >> 8);
		out[n++] = (unsigned char)len;
	} else {
		out[n++] = 127;
		for (i = 0; i < 8; i++)
			out[n++] = (unsigned char)(len >> (56 - 8 * i));
	}
	if (masked) {
		out[1] |= 0x80;
		memcpy(out + n, rfc_mask, 4);
		n += 4;
	}
	for (i = 0; pl != NULL && i < len; i++)
		out[n + i] = pl[i] ^ (masked ? rfc_mask[i & 3] : 0);
	return n + (pl != NULL ? (size_t)len : 0);
}

static size_t
mkframe(unsigned char *out, int b0, const void *payload, size_t len)
{
	return mkframe_ext(out, b0, payload, len, -1, 1);
}

struct got {
	int		 n;
	int		 op[MAXMSG];
	unsigned char	*data[MAXMSG];
	size_t		 len[MAXMSG];
	uint16_t	 code[MAXMSG];
	size_t		 rlen[MAXMSG];
	char		 reason[MAXMSG][126];
	int		 failed;
	uint16_t	 fail_code;
	size_t		 consumed;	/* bytes consumed in total */
};

static void
got_free(struct got *g)
{
	int	i;

	for (i = 0; i < g->n; i++)
		free(g->data[i]);
	memset(g, 0, sizeof(*g));
}

/* Feeds buf[0..len) in the two pieces [0,cut) and [cut,len), recording all. */
static void
feed_piece(struct ws_parser *p, const unsigned char *buf, size_t len,
    struct got *g)
{
	struct ws_message	m;
	enum ws_status		st;
	size_t			used;

	while (!g->failed) {
		used = 12345;
		st = ws_parse(p, buf, len, &used, &m);
		ck_assert_uint_le(used, len);
		g->consumed += used;
		if (st == WS_FAIL) {
			g->failed = 1;
			g->fail_code = ws_parser_close_code(p);
			ck_assert_ptr_nonnull(ws_parser_error(p));
			return;
		}
		if (st == WS_NEED_MORE) {
			ck_assert_uint_eq(used, len);
			return;
		}
		ck_assert_int_eq(st, WS_MESSAGE);
		ck_assert_uint_gt(used, 0);
		ck_assert_int_lt(g->n, MAXMSG);
		ck_assert_ptr_nonnull(m.data);
		ck_assert_int_ne(m.opcode, WS_OP_CONT);
		g->op[g->n] = m.opcode;
		g->len[g->n] = m.len;
		g->data[g->n] = malloc(m.len + 1);
		ck_assert_ptr_nonnull(g->data[g->n]);
		memcpy(g->data[g->n], m.data, m.len);
		g->code[g->n] = m.close_code;
		if (m.opcode == WS_OP_CLOSE) {
			ck_assert_uint_le(m.close_reason_len, 123);
			memcpy(g->reason[g->n], m.close_reason,
			    m.close_reason_len);
			g->rlen[g->n] = m.close_reason_len;
		}
		g->n++;
		buf += used;
		len -= used;
		if (len == 0)
			return;
	}
}

/* Mode: 0 whole, 1 byte by byte, 2 split at cut. */
static void
run(const unsigned char *buf, size_t len, size_t max_frame, size_t max_msg,
    int mode, size_t cut, struct got *g)
{
	struct ws_parser	p;
	size_t			i;

	memset(g, 0, sizeof(*g));
	ws_parser_init(&p, max_frame, max_msg);
	if (mode == 0)
		feed_piece(&p, buf, len, g);
	else if (mode == 1)
		for (i = 0; i < len && !g->failed; i++)
			feed_piece(&p, buf + i, 1, g);
	else {
		feed_piece(&p, buf, cut, g);
		if (!g->failed)
			feed_piece(&p, buf + cut, len - cut, g);
	}
	ws_parser_free(&p);
}

struct expect {
	int		 op;
	const char	*data;
	size_t		 len;
	uint16_t	 code;		/* close only */
	const char	*reason;	/* close only */
};

static void
compare(const struct got *g, const struct expect *e, int ne,
    uint16_t fail_code, const char *how, size_t cut)
{
	int	i;

	ck_assert_msg(g->n == ne, "%s %zu: %d messages, want %d", how, cut,
	    g->n, ne);
	for (i = 0; i < ne; i++) {
		ck_assert_msg(g->op[i] == e[i].op, "%s %zu: msg %d op %d",
		    how, cut, i, g->op[i]);
		ck_assert_msg(g->len[i] == e[i].len &&
		    memcmp(g->data[i], e[i].data, e[i].len) == 0,
		    "%s %zu: msg %d data", how, cut, i);
		if (e[i].op == WS_OP_CLOSE) {
			ck_assert_uint_eq(g->code[i], e[i].code);
			ck_assert_uint_eq(g->rlen[i], strlen(e[i].reason));
			ck_assert(memcmp(g->reason[i], e[i].reason,
			    g->rlen[i]) == 0);
		}
	}
	if (fail_code == 0)
		ck_assert_msg(!g->failed, "%s %zu: unexpected fail %u", how,
		    cut, g->fail_code);
	else
		ck_assert_msg(g->failed && g->fail_code == fail_code,
		    "%s %zu: failed %d code %u, want %u", how, cut, g->failed,
		    g->fail_code, fail_code);
}

/* Runs buf whole, byte by byte and in every 2-way split (sampled if big). */
static void
check_all(const unsigned char *buf, size_t len, size_t max_frame,
    size_t max_msg, const struct expect *e, int ne, uint16_t fail_code)
{
	struct got	g;
	size_t		cut, step;

	run(buf, len, max_frame, max_msg, 0, 0, &g);
	compare(&g, e, ne, fail_code, "whole", 0);
	if (fail_code == 0)
		ck_assert_uint_eq(g.consumed, len);
	got_free(&g);
	run(buf, len, max_frame, max_msg, 1, 0, &g);
	compare(&g, e, ne, fail_code, "bytewise", 0);
	got_free(&g);
	step = len > 4096 ? len / 997 : 1;
	for (cut = 1; cut < len; cut += step) {
		run(buf, len, max_frame, max_msg, 2, cut, &g);
		compare(&g, e, ne, fail_code, "split", cut);
		got_free(&g);
	}
}

static void
check_fail(const unsigned char *buf, size_t len, uint16_t code)
{
	check_all(buf, len, BIG, BIG, NULL, 0, code);
}

START_TEST(test_accept_key)
{
	char	out[29];

	ck_assert_int_eq(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
	/* RFC 6455 1.3 (the brief quoted a mistyped value) */
	ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	ck_assert_int_eq(ws_accept_key("AAAAAAAAAAAAAAAAAAAAAA==", out), 0);
	ck_assert_uint_eq(strlen(out), 28);

	ck_assert_int_eq(ws_accept_key(NULL, out), -1);
	ck_assert_int_eq(ws_accept_key("", out), -1);
	/* 15 and 17 bytes */
	ck_assert_int_eq(ws_accept_key("AAAAAAAAAAAAAAAAAAAA", out), -1);
	ck_assert_int_eq(ws_accept_key("AAAAAAAAAAAAAAAAAAAAAAA=", out), -1);
	ck_assert_int_eq(ws_accept_key("AAAAAAAAAAAAAAAAAAAAAAAA", out), -1);
	/* not base64, wrong padding, whitespace, non-zero pad bits */
	ck_assert_int_eq(ws_accept_key("dGhlIHNhbXBsZSBub25j!Q==", out), -1);
	ck_assert_int_eq(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=A", out), -1);
	ck_assert_int_eq(ws_accept_key(" dGhlIHNhbXBsZSBub25jZQ==", out), -1);
	ck_assert_int_eq(ws_accept_key("dGhlIHNhbXBsZSBub25jZR==", out), -1);
	ck_assert_int_eq(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ===", out), -1);
}
END_TEST

START_TEST(test_rfc_hello)
{
	static const unsigned char	rfc[] = { 0x81, 0x85, 0x37, 0xfa, 0x21,
		0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	static const struct expect	e[] = { { WS_OP_TEXT, "Hello", 5, 0,
		NULL } };
	unsigned char			buf[64];

	check_all(rfc, sizeof(rfc), BIG, BIG, e, 1, 0);
	/* our helper builds the same bytes */
	ck_assert_uint_eq(mkframe(buf, 0x81, "Hello", 5), sizeof(rfc));
	ck_assert(memcmp(buf, rfc, sizeof(rfc)) == 0);
}
END_TEST

START_TEST(test_fragmented_hello)
{
	static const struct expect	e[] = { { WS_OP_TEXT, "Hello", 5, 0,
		NULL } };
	unsigned char			buf[64];
	size_t				n;

	n = mkframe(buf, 0x01, "Hel", 3);
	n += mkframe(buf + n, 0x80, "lo", 2);
	check_all(buf, n, BIG, BIG, e, 1, 0);
}
END_TEST

START_TEST(test_ping_pong)
{
	static const struct expect	e[] = {
		{ WS_OP_PING, "Hello", 5, 0, NULL },
		{ WS_OP_PONG, "Hello", 5, 0, NULL },
		{ WS_OP_PING, "", 0, 0, NULL },
	};
	unsigned char			buf[64];
	size_t				n;

	n = mkframe(buf, 0x89, "Hello", 5);
	ck_assert_uint_eq(n, 11);
	n += mkframe(buf + n, 0x8a, "Hello", 5);
	n += mkframe(buf + n, 0x89, NULL, 0);
	check_all(buf, n, BIG, BIG, e, 3, 0);
}
END_TEST

START_TEST(test_lengths)
{
	unsigned char	*pl, *buf;
	struct expect	 e[1];
	size_t		 n, i, sizes[] = { 125, 126, 256, 65535, 65536, 100000 };
	size_t		 k;

	pl = malloc(100000);
	buf = malloc(100000 + 14);
	ck_assert_ptr_nonnull(pl);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < 100000; i++)
		pl[i] = (unsigned char)(i * 7 + 3);
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		n = mkframe(buf, 0x82, pl, sizes[k]);
		ck_assert_uint_eq(n, sizes[k] + (sizes[k] < 126 ? 6 :
		    sizes[k] <= 0xffff ? 8 : 14));
		e[0].op = WS_OP_BINARY;
		e[0].data = (const char *)pl;
		e[0].len = sizes[k];
		check_all(buf, n, BIG, BIG, e, 1, 0);
	}
	free(pl);
	free(buf);
}
END_TEST

START_TEST(test_control_between_fragments)
{
	static const struct expect	e[] = {
		{ WS_OP_PING, "p1", 2, 0, NULL },
		{ WS_OP_PONG, "", 0, 0, NULL },
		{ WS_OP_TEXT, "Hello\xc3\xa9", 7, 0, NULL },
		{ WS_OP_CLOSE, "\x03\xe8" "bye", 5, 1000, "bye" },
	};
	unsigned char			buf[128];
	size_t				n;

	n = mkframe(buf, 0x01, "Hel", 3);
	n += mkframe(buf + n, 0x89, "p1", 2);
	n += mkframe(buf + n, 0x00, "lo\xc3", 3);	/* splits the é */
	n += mkframe(buf + n, 0x8a, NULL, 0);
	n += mkframe(buf + n, 0x80, "\xa9", 1);
	n += mkframe(buf + n, 0x88, "\x03\xe8" "bye", 5);
	check_all(buf, n, BIG, BIG, e, 4, 0);
}
END_TEST

START_TEST(test_several_messages)
{
	static const struct expect	e[] = {
		{ WS_OP_TEXT, "one", 3, 0, NULL },
		{ WS_OP_BINARY, "\x00\x01\x02", 3, 0, NULL },
		{ WS_OP_TEXT, "", 0, 0, NULL },
		{ WS_OP_BINARY, "", 0, 0, NULL },
		{ WS_OP_TEXT, "frag", 4, 0, NULL },
		{ WS_OP_CLOSE, "", 0, WS_CLOSE_NO_STATUS, "" },
	};
	unsigned char			buf[128];
	size_t				n;

	n = mkframe(buf, 0x81, "one", 3);
	n += mkframe(buf + n, 0x82, "\x00\x01\x02", 3);
	n += mkframe(buf + n, 0x81, NULL, 0);
	n += mkframe(buf + n, 0x02, NULL, 0);		/* empty fragments */
	n += mkframe(buf + n, 0x80, NULL, 0);
	n += mkframe(buf + n, 0x01, NULL, 0);
	n += mkframe(buf + n, 0x00, "fr", 2);
	n += mkframe(buf + n, 0x00, NULL, 0);
	n += mkframe(buf + n, 0x80, "ag", 2);
	n += mkframe(buf + n, 0x88, NULL, 0);
	check_all(buf, n, BIG, BIG, e, 6, 0);
}
END_TEST

START_TEST(test_fail_header)
{
	unsigned char	buf[64];
	size_t		n;
	int		op;

	/* unmasked */
	n = mkframe_ext(buf, 0x81, "Hello", 5, -1, 0);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	/* reserved bits */
	n = mkframe(buf, 0xc1, "a", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	n = mkframe(buf, 0xa1, "a", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	n = mkframe(buf, 0x91, "a", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	/* unknown opcodes */
	for (op = 3; op <= 0xf; op++) {
		if (op >= 8 && op <= 0xa)
			continue;
		n = mkframe(buf, 0x80 | op, "a", 1);
		check_fail(buf, n, WS_CLOSE_PROTOCOL);
	}
	/* fragmented control frames */
	n = mkframe(buf, 0x09, "a", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	n = mkframe(buf, 0x08, NULL, 0);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	/* control frame payload > 125 (16-bit form) */
	n = mkframe_ext(buf, 0x89, NULL, 126, 2, 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	/* continuation with no message */
	n = mkframe(buf, 0x80, "a", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	/* new message inside a fragmented one */
	n = mkframe(buf, 0x01, "a", 1);
	n += mkframe(buf + n, 0x81, "b", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	n = mkframe(buf, 0x02, "a", 1);
	n += mkframe(buf + n, 0x82, "b", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	/* 64-bit length with the top bit set */
	n = mkframe_ext(buf, 0x82, NULL, 0x8000000000000001ULL, 8, 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	/* non-minimal lengths */
	n = mkframe_ext(buf, 0x81, "Hello", 5, 2, 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	n = mkframe_ext(buf, 0x81, "Hello", 5, 8, 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	n = mkframe_ext(buf, 0x82, NULL, 0xffff, 8, 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	n = mkframe_ext(buf, 0x82, NULL, 125, 2, 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
}
END_TEST

/* Header-detected failures happen before any payload byte is needed. */
START_TEST(test_fail_early)
{
	static const unsigned char	big[] = { 0x82, 0xff, 0, 0, 0, 1,
		0, 0, 0, 0 };
	static const unsigned char	unmasked[] = { 0x81, 0x05 };
	struct ws_parser		p;
	struct ws_message		m;
	size_t				used;

	ws_parser_init(&p, 1000, 1000);
	ck_assert_int_eq(ws_parse(&p, big, sizeof(big), &used, &m), WS_FAIL);
	ck_assert_uint_eq(used, sizeof(big));
	ck_assert_uint_eq(ws_parser_close_code(&p), WS_CLOSE_TOO_BIG);
	ck_assert_str_eq(ws_parser_error(&p), "frame too big");
	/* stays failed, consumes nothing */
	ck_assert_int_eq(ws_parse(&p, unmasked, 2, &used, &m), WS_FAIL);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_eq(ws_parser_close_code(&p), WS_CLOSE_TOO_BIG);
	ws_parser_free(&p);

	ws_parser_init(&p, 1000, 1000);
	ck_assert_int_eq(ws_parse(&p, unmasked, 2, &used, &m), WS_FAIL);
	ck_assert_uint_eq(ws_parser_close_code(&p), WS_CLOSE_PROTOCOL);
	ck_assert_str_eq(ws_parser_error(&p), "unmasked client frame");
	ws_parser_free(&p);
}
END_TEST

START_TEST(test_limits)
{
	static const struct expect	ok1[] = { { WS_OP_BINARY, "0123456789",
		10, 0, NULL } };
	static const struct expect	ok2[] = {
		{ WS_OP_PING, "0123456789abcdef", 16, 0, NULL },
		{ WS_OP_TEXT, "0123456789", 10, 0, NULL },
	};
	unsigned char			buf[128];
	size_t				n;

	/* exactly at the frame limit */
	n = mkframe(buf, 0x82, "0123456789", 10);
	check_all(buf, n, 10, 10, ok1, 1, 0);
	/* one over the frame limit */
	check_all(buf, n, 9, 100, NULL, 0, WS_CLOSE_TOO_BIG);
	/* one over the message limit */
	check_all(buf, n, 100, 9, NULL, 0, WS_CLOSE_TOO_BIG);

	/* fragments each within max_frame, message at max_message */
	n = mkframe(buf, 0x01, "01234", 5);
	n += mkframe(buf + n, 0x89, "0123456789abcdef", 16); /* not limited */
	n += mkframe(buf + n, 0x80, "56789", 5);
	check_all(buf, n, 5, 10, ok2, 2, 0);
	/* message would exceed max_message on its second fragment */
	check_all(buf, n, 5, 9, ok2, 1, WS_CLOSE_TOO_BIG);

	/* empty messages fine with zero limits */
	n = mkframe(buf, 0x81, NULL, 0);
	check_all(buf, n, 0, 0, (const struct expect[]){ { WS_OP_TEXT, "", 0,
	    0, NULL } }, 1, 0);
}
END_TEST

START_TEST(test_fail_utf8)
{
	static const struct expect	e[] = { { WS_OP_BINARY, "\xff", 1, 0,
		NULL } };
	struct ws_parser		p;
	struct ws_message		m;
	unsigned char			buf[64];
	size_t				n, used;

	n = mkframe(buf, 0x81, "a\xff", 2);
	check_fail(buf, n, WS_CLOSE_INVALID_DATA);
	n = mkframe(buf, 0x81, "\xed\xa0\x80", 3);
	check_fail(buf, n, WS_CLOSE_INVALID_DATA);
	/* truncated at end of message */
	n = mkframe(buf, 0x81, "ab\xe2\x82", 4);
	check_fail(buf, n, WS_CLOSE_INVALID_DATA);
	n = mkframe(buf, 0x01, "ab\xe2", 3);
	n += mkframe(buf + n, 0x80, "\x82", 1);
	check_fail(buf, n, WS_CLOSE_INVALID_DATA);
	/* binary is not checked */
	n = mkframe(buf, 0x82, "\xff", 1);
	check_all(buf, n, BIG, BIG, e, 1, 0);
	/* text continuation checked */
	n = mkframe(buf, 0x01, "ok", 2);
	n += mkframe(buf + n, 0x80, "\xc0\xaf", 2);
	check_fail(buf, n, WS_CLOSE_INVALID_DATA);

	/* fail fast: first fragment carries the bad byte, no FIN needed */
	n = mkframe(buf, 0x01, "abc\xf4\x90zzzz", 9);
	ws_parser_init(&p, BIG, BIG);
	ck_assert_int_eq(ws_parse(&p, buf, n, &used, &m), WS_FAIL);
	ck_assert_uint_eq(ws_parser_close_code(&p), WS_CLOSE_INVALID_DATA);
	ws_parser_free(&p);
	/* even before the frame itself is complete */
	ws_parser_init(&p, BIG, BIG);
	ck_assert_int_eq(ws_parse(&p, buf, 6 + 5, &used, &m), WS_FAIL);
	ck_assert_uint_eq(ws_parser_close_code(&p), WS_CLOSE_INVALID_DATA);
	ws_parser_free(&p);
}
END_TEST

START_TEST(test_close)
{
	static const unsigned int	bad[] = { 0, 999, 1004, 1005, 1006,
		1015, 1016, 1100, 2000, 2999, 5000, 65535 };
	static const unsigned int	good[] = { 1000, 1001, 1002, 1003, 1007,
		1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4999 };
	struct expect			e[1];
	unsigned char			pl[125], buf[160];
	size_t				n, i;

	/* payload of one byte */
	n = mkframe(buf, 0x88, "\x03", 1);
	check_fail(buf, n, WS_CLOSE_PROTOCOL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pl[0] = bad[i] >> 8;
		pl[1] = bad[i] & 0xff;
		n = mkframe(buf, 0x88, pl, 2);
		check_fail(buf, n, WS_CLOSE_PROTOCOL);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		pl[0] = good[i] >> 8;
		pl[1] = good[i] & 0xff;
		memcpy(pl + 2, "why", 3);
		n = mkframe(buf, 0x88, pl, 5);
		e[0].op = WS_OP_CLOSE;
		e[0].data = (const char *)pl;
		e[0].len = 5;
		e[0].code = good[i];
		e[0].reason = "why";
		check_all(buf, n, BIG, BIG, e, 1, 0);
	}
	/* reason not UTF-8 */
	n = mkframe(buf, 0x88, "\x03\xe8\xc3", 3);
	check_fail(buf, n, WS_CLOSE_INVALID_DATA);
	n = mkframe(buf, 0x88, "\x03\xe8ok\xed\xa0\x80", 7);
	check_fail(buf, n, WS_CLOSE_INVALID_DATA);
	/* longest reason: 123 bytes */
	pl[0] = 0x03;
	pl[1] = 0xe8;
	memset(pl + 2, 'r', 123);
	n = mkframe(buf, 0x88, pl, 125);
	{
		char	reason[124];

		memset(reason, 'r', 123);
		reason[123] = '\0';
		e[0].op = WS_OP_CLOSE;
		e[0].data = (const char *)pl;
		e[0].len = 125;
		e[0].code = 1000;
		e[0].reason = reason;
		check_all(buf, n, BIG, BIG, e, 1, 0);
	}
}
END_TEST

/* A message buffer above the keep threshold is released and regrown. */
START_TEST(test_buffer_reuse)
{
	struct ws_parser	 p;
	struct ws_message	 m;
	unsigned char		*pl, *buf;
	size_t			 n, used, sz = WS_KEEP_BUF * 2, off;
	int			 round;

	pl = malloc(sz);
	buf = malloc(2 * (sz + 14) + 64);
	ck_assert_ptr_nonnull(pl);
	ck_assert_ptr_nonnull(buf);
	memset(pl, 'x', sz);
	n = mkframe(buf, 0x82, pl, sz);
	n += mkframe(buf + n, 0x81, "small", 5);
	n += mkframe(buf + n, 0x82, pl, sz);
	ws_parser_init(&p, BIG, BIG);
	off = 0;
	for (round = 0; round < 3; round++) {
		ck_assert_int_eq(ws_parse(&p, buf + off, n - off, &used, &m),
		    WS_MESSAGE);
		off += used;
		if (round == 1) {
			ck_assert_uint_eq(m.len, 5);
			ck_assert(memcmp(m.data, "small", 5) == 0);
		} else {
			ck_assert_uint_eq(m.len, sz);
			ck_assert(memcmp(m.data, pl, sz) == 0);
		}
	}
	ck_assert_uint_eq(off, n);
	ck_assert_int_eq(ws_parse(&p, buf + off, 0, &used, &m), WS_NEED_MORE);
	ws_parser_free(&p);
	ws_parser_free(&p);	/* idempotent */
	free(pl);
	free(buf);
}
END_TEST

/* Random garbage and mutated frames must never crash (run under ASan). */
START_TEST(test_garbage)
{
	struct ws_parser	p;
	struct ws_message	m;
	unsigned char		buf[512];
	size_t			n, used, i, off;
	unsigned int		seed = 12345;
	int			round;
	enum ws_status		st;

	for (round = 0; round < 20000; round++) {
		seed = seed * 1103515245 + 12345;
		if (round & 1) {
			n = mkframe(buf, 0x81, "Hello \xc3\xa9 world", 14);
			n += mkframe(buf + n, 0x01, "ab", 2);
			n += mkframe(buf + n, 0x88, "\x03\xe8x", 3);
			buf[(seed >> 8) % n] ^= 1u << ((seed >> 20) & 7);
		} else {
			n = 1 + (seed >> 8) % sizeof(buf);
			for (i = 0; i < n; i++) {
				seed = seed * 1103515245 + 12345;
				buf[i] = (unsigned char)(seed >> 16);
			}
		}
		ws_parser_init(&p, 256, 300);
		off = 0;
		do {
			st = ws_parse(&p, buf + off, n - off, &used, &m);
			ck_assert_uint_le(used, n - off);
			off += used;
		} while (st == WS_MESSAGE);
		if (st == WS_FAIL)
			ck_assert_uint_ne(ws_parser_close_code(&p), 0);
		ws_parser_free(&p);
	}
}
END_TEST

START_TEST(test_frame_header)
{
	unsigned char	h[10];
	static const unsigned char	h65536[] = { 0x82, 127, 0, 0, 0, 0, 0,
		1, 0, 0 };

	ck_assert_uint_eq(ws_frame_header(h, WS_OP_TEXT, 0), 2);
	ck_assert_uint_eq(h[0], 0x81);
	ck_assert_uint_eq(h[1], 0);
	ck_assert_uint_eq(ws_frame_header(h, WS_OP_PONG, 125), 2);
	ck_assert_uint_eq(h[0], 0x8a);
	ck_assert_uint_eq(h[1], 125);
	ck_assert_uint_eq(ws_frame_header(h, WS_OP_TEXT, 126), 4);
	ck_assert_uint_eq(h[1], 126);
	ck_assert_uint_eq(h[2], 0);
	ck_assert_uint_eq(h[3], 126);
	ck_assert_uint_eq(ws_frame_header(h, WS_OP_BINARY, 65535), 4);
	ck_assert_uint_eq(h[0], 0x82);
	ck_assert_uint_eq(h[2], 0xff);
	ck_assert_uint_eq(h[3], 0xff);
	ck_assert_uint_eq(ws_frame_header(h, WS_OP_BINARY, 65536), 10);
	ck_assert(memcmp(h, h65536, 10) == 0);
	ck_assert_uint_eq(ws_frame_header(h, WS_OP_CLOSE,
	    0x0102030405060708ULL), 10);
	ck_assert_uint_eq(h[0], 0x88);
	ck_assert_uint_eq(h[2], 1);
	ck_assert_uint_eq(h[9], 8);
}
END_TEST

START_TEST(test_close_payload)
{
	unsigned char	out[125];
	char		reason[300];
	size_t		n;

	n = ws_close_payload(out, WS_CLOSE_NORMAL, "bye");
	ck_assert_uint_eq(n, 5);
	ck_assert(memcmp(out, "\x03\xe8" "bye", 5) == 0);
	n = ws_close_payload(out, WS_CLOSE_TOO_BIG, NULL);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(out[0], 0x03);
	ck_assert_uint_eq(out[1], 0xf1);
	ck_assert_uint_eq(ws_close_payload(out, WS_CLOSE_NORMAL, ""), 2);
	ck_assert_uint_eq(ws_close_payload(out, WS_CLOSE_NO_STATUS, "x"), 0);

	/* exactly 123 fits; 124 and more truncated to 123 */
	memset(reason, 'a', sizeof(reason));
	reason[123] = '\0';
	ck_assert_uint_eq(ws_close_payload(out, 1000, reason), 125);
	reason[123] = 'a';
	reason[299] = '\0';
	ck_assert_uint_eq(ws_close_payload(out, 1000, reason), 125);
	ck_assert(utf8_valid(out + 2, 123));

	/* 122 ASCII + 2-byte char: cut before it */
	memset(reason, 'a', 122);
	strcpy(reason + 122, "\xc3\xa9zz");
	n = ws_close_payload(out, 1000, reason);
	ck_assert_uint_eq(n, 124);
	ck_assert(utf8_valid(out + 2, n - 2));
	/* 121 ASCII + 2-byte char fits exactly */
	memset(reason, 'a', 121);
	strcpy(reason + 121, "\xc3\xa9zz");
	n = ws_close_payload(out, 1000, reason);
	ck_assert_uint_eq(n, 125);
	ck_assert(memcmp(out + 123, "\xc3\xa9", 2) == 0);
	/* 4-byte emoji straddling the limit */
	memset(reason, 'a', 121);
	strcpy(reason + 121, "\xf0\x9f\x98\x80");
	n = ws_close_payload(out, 1000, reason);
	ck_assert_uint_eq(n, 123);
	ck_assert(utf8_valid(out + 2, n - 2));
	/* all multibyte */
	reason[0] = '\0';
	for (n = 0; n < 50; n++)
		strcat(reason, "\xe2\x82\xac");
	n = ws_close_payload(out, 1000, reason);
	ck_assert_uint_eq(n, 2 + 123);	/* 41 euros = 123 bytes */
	ck_assert(utf8_valid(out + 2, n - 2));
}
END_TEST

static Suite *
ws_suite(void)
{
	Suite	*s = suite_create("ws");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, test_accept_key);
	tcase_add_test(tc, test_rfc_hello);
	tcase_add_test(tc, test_fragmented_hello);
	tcase_add_test(tc, test_ping_pong);
	tcase_add_test(tc, test_lengths);
	tcase_add_test(tc, test_control_between_fragments);
	tcase_add_test(tc, test_several_messages);
	tcase_add_test(tc, test_fail_header);
	tcase_add_test(tc, test_fail_early);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_fail_utf8);
	tcase_add_test(tc, test_close);
	tcase_add_test(tc, test_buffer_reuse);
	tcase_add_test(tc, test_garbage);
	tcase_add_test(tc, test_frame_header);
	tcase_add_test(tc, test_close_payload);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(ws_suite());
}
