#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "../../src/sse.c"
#include "check_main.h"

static char *
drain(struct evbuffer *b, size_t *lenp)
{
	size_t		 n = evbuffer_get_length(b);
	char		*s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	if (lenp != NULL)
		*lenp = n;
	return s;
}

/* Encodes through both entry points and checks both give want. */
static void
check_event(uint64_t seq, const char *type, const char *data, size_t len,
    const char *want)
{
	struct evbuffer	*b = evbuffer_new();
	char		*s;
	size_t		 n;

	ck_assert_ptr_nonnull(b);
	sse_event(b, seq, type, data, len);
	s = drain(b, &n);
	ck_assert_str_eq(s, want);
	ck_assert_uint_eq(n, strlen(want));
	free(s);
	evbuffer_free(b);

	s = sse_event_string(seq, type, data, len, &n);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, want);
	ck_assert_uint_eq(n, strlen(want));
	free(s);
}

#define EV(seq, type, data, want) \
	check_event((seq), (type), (data), sizeof(data) - 1, (want))

START_TEST(test_event_basic)
{
	EV(7, "message", "{\"a\":1}",
	    "id: 7\nevent: message\ndata: {\"a\":1}\n\n");
	EV(0, "session_state", "x", "event: session_state\ndata: x\n\n");
	EV(0, NULL, "x", "data: x\n\n");
	EV(18446744073709551615ULL, NULL, "x",
	    "id: 18446744073709551615\ndata: x\n\n");
	EV(1, NULL, "", "id: 1\ndata: \n\n");
	check_event(0, NULL, NULL, 0, "data: \n\n");
	/* Only len bytes are used. */
	check_event(0, NULL, "abcdef", 3, "data: abc\n\n");
}
END_TEST

START_TEST(test_event_multiline)
{
	EV(0, NULL, "a\nb\nc", "data: a\ndata: b\ndata: c\n\n");
	EV(0, NULL, "a\r\nb", "data: a\ndata: b\n\n");
	EV(0, NULL, "a\rb", "data: a\ndata: b\n\n");
	EV(0, NULL, "a\r\rb", "data: a\ndata: \ndata: b\n\n");
	EV(0, NULL, "a\n\rb", "data: a\ndata: \ndata: b\n\n");
	EV(0, NULL, "a\r\n\r\nb", "data: a\ndata: \ndata: b\n\n");
	EV(0, NULL, "a\n", "data: a\ndata: \n\n");
	EV(0, NULL, "a\r", "data: a\ndata: \n\n");
	EV(0, NULL, "a\r\n", "data: a\ndata: \n\n");
	EV(0, NULL, "\n", "data: \ndata: \n\n");
	EV(0, NULL, "\r\n", "data: \ndata: \n\n");
	EV(3, "t", "x\ny", "id: 3\nevent: t\ndata: x\ndata: y\n\n");
	/* A newline in the type cannot forge another field. */
	EV(0, "evil\ndata: x", "y", "event: evil\ndata: y\n\n");
	EV(0, "evil\rid: 9", "y", "event: evil\ndata: y\n\n");
}
END_TEST

START_TEST(test_comment_head)
{
	struct evbuffer	*b = evbuffer_new();
	char		*s;

	sse_comment(b, "ping");
	s = drain(b, NULL);
	ck_assert_str_eq(s, ": ping\n\n");
	free(s);

	sse_comment(b, "a\nb\r\nc");
	s = drain(b, NULL);
	ck_assert_str_eq(s, ": a\n: b\n: c\n\n");
	free(s);

	sse_comment(b, NULL);
	s = drain(b, NULL);
	ck_assert_str_eq(s, ": \n\n");
	free(s);

	sse_head(b);
	s = drain(b, NULL);
	ck_assert_str_eq(s, "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/event-stream\r\n"
	    "Cache-Control: no-cache\r\n"
	    "Connection: keep-alive\r\n"
	    "X-Accel-Buffering: no\r\n"
	    "\r\n");
	ck_assert_ptr_null(strstr(s, "Content-Length"));
	free(s);
	evbuffer_free(b);
}
END_TEST

START_TEST(test_event_binary_len)
{
	char		*s;
	size_t		 n;

	/* A NUL inside data is carried, not a terminator. */
	s = sse_event_string(0, NULL, "a\0b", 3, &n);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(n, 11);
	ck_assert_int_eq(memcmp(s, "data: a\0b\n\n", 11), 0);
	free(s);
}
END_TEST

/* --- client-side parser --- */

struct rec {
	char	 out[4096];
	size_t	 n;
	int	 stop_after;	/* stop with 7 after this many events, 0 never */
	int	 events;
};

/* Records "type|data" per event, data's NUL-termination checked. */
static int
rec_cb(void *arg, const char *type, const char *data, size_t len)
{
	struct rec *r = arg;
	int k;

	ck_assert_int_eq(data[len], '\0');
	k = snprintf(r->out + r->n, sizeof(r->out) - r->n, "%s|", type);
	ck_assert(k > 0 && (size_t)k < sizeof(r->out) - r->n);
	r->n += (size_t)k;
	ck_assert_uint_lt(r->n + len + 1, sizeof(r->out));
	memcpy(r->out + r->n, data, len);
	r->n += len;
	r->out[r->n++] = ';';
	r->out[r->n] = '\0';
	r->events++;
	return r->stop_after && r->events >= r->stop_after ? 7 : 0;
}

/* Parses in in pieces of step bytes (0 = whole) and returns the record. */
static int
parse_steps(const char *in, size_t len, size_t step, size_t max,
    struct rec *r)
{
	struct sse_parser *p;
	size_t off = 0, k;
	int ret = 0;

	p = sse_parser_new(max, rec_cb, r);
	ck_assert_ptr_nonnull(p);
	while (off < len) {
		k = step == 0 || len - off < step ? len - off : step;
		ret = sse_parser_feed(p, in + off, k);
		off += k;
	}
	sse_parser_free(p);
	return ret;
}

/* Every split (whole, byte by byte, 2, 3, 5, 7 bytes) gives want. */
static void
check_parse(const char *in, size_t len, const char *want)
{
	static const size_t steps[] = { 0, 1, 2, 3, 5, 7, 64 };
	struct rec r;
	size_t i, cut;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		memset(&r, 0, sizeof(r));
		ck_assert_int_eq(parse_steps(in, len, steps[i], 1024, &r), 0);
		ck_assert_msg(strcmp(r.out, want) == 0, "step %zu: got "
		    "\"%s\" want \"%s\"", steps[i], r.out, want);
	}
	/* And every two-piece cut. */
	for (cut = 0; cut <= len; cut++) {
		struct sse_parser *p;

		memset(&r, 0, sizeof(r));
		p = sse_parser_new(1024, rec_cb, &r);
		ck_assert_int_eq(sse_parser_feed(p, in, cut), 0);
		ck_assert_int_eq(sse_parser_feed(p, in + cut, len - cut), 0);
		sse_parser_free(p);
		ck_assert_msg(strcmp(r.out, want) == 0, "cut %zu: got "
		    "\"%s\" want \"%s\"", cut, r.out, want);
	}
}

#define PARSE(in, want)	check_parse((in), sizeof(in) - 1, (want))

START_TEST(test_parse_basic)
{
	PARSE("event: a\ndata: x\n\n", "a|x;");
	PARSE("data: x\n\n", "message|x;");
	PARSE("data:x\n\n", "message|x;");
	PARSE("data:  x\n\n", "message| x;");
	PARSE("data: a\ndata: b\n\ndata: c\n\n", "message|a\nb;message|c;");
	PARSE("data\n\n", "message|;");
	PARSE("data:\n\n", "message|;");
	PARSE("data:\ndata:\n\n", "message|\n;");
	/* No data: nothing, and the type does not leak into the next. */
	PARSE("event: a\n\ndata: x\n\n", "message|x;");
	PARSE("\n\n\n", "");
	/* Comments, unknown fields, id and retry. */
	PARSE(": hi\nfoo: bar\nid: 4\nretry: 10\ndata: y\n\n", "message|y;");
	PARSE(":\n\n", "");
	/* A partial event at the end is lost. */
	PARSE("data: x\n\ndata: y\n", "message|x;");
	PARSE("data: x", "");
	/* The type resets after each event. */
	PARSE("event: e\ndata: 1\n\ndata: 2\n\n", "e|1;message|2;");
	/* The last event line wins; a colon in the value is kept. */
	PARSE("event: a\nevent: b\ndata: {\"k\":1}\n\n", "b|{\"k\":1};");
}
END_TEST

START_TEST(test_parse_newlines)
{
	PARSE("data: x\r\n\r\n", "message|x;");
	PARSE("data: x\r\rdata: y\r\r", "message|x;message|y;");
	PARSE("data: a\r\ndata: b\ndata: c\r\r\n", "message|a\nb\nc;");
	/* CR then LF is one line end, LF then CR two. */
	PARSE("data: a\n\rdata: b\n\n", "message|a;message|b;");
	PARSE("event: t\r\ndata: 1\r\n\r\nevent: u\rdata: 2\r\r",
	    "t|1;u|2;");
}
END_TEST

START_TEST(test_parse_bom)
{
	PARSE("\xef\xbb\xbf" "data: x\n\n", "message|x;");
	/* Only one BOM, only at the start. */
	PARSE("\xef\xbb\xbf\xef\xbb\xbf" "data: x\n\n", "");
	PARSE("data: \xef\xbb\xbfx\n\n", "message|\xef\xbb\xbfx;");
	/* Something that starts like a BOM is text. */
	PARSE("\xef\xbb" "data: x\n\ndata: y\n\n", "message|y;");
	PARSE("\xef" "\n\ndata: y\n\n", "message|y;");
}
END_TEST

START_TEST(test_parse_limits)
{
	struct sse_parser *p;
	struct rec r;
	char big[200];
	int ret;

	/* A line past max fails, and the failure sticks. */
	memset(&r, 0, sizeof(r));
	memset(big, 'a', sizeof(big));
	memcpy(big, "data: ", 6);
	p = sse_parser_new(100, rec_cb, &r);
	ck_assert_int_eq(sse_parser_feed(p, big, 100), 0);
	ck_assert_int_eq(sse_parser_feed(p, big, 1), -1);
	ck_assert_int_eq(sse_parser_feed(p, "\n\ndata: x\n\n", 11), -1);
	ck_assert_int_eq(r.events, 0);
	sse_parser_free(p);

	/* Data joined from short lines past max fails too. */
	memset(&r, 0, sizeof(r));
	p = sse_parser_new(16, rec_cb, &r);
	ck_assert_int_eq(sse_parser_feed(p, "data: 12345678\n", 15), 0);
	ret = sse_parser_feed(p, "data: 12345678\n", 15);
	ck_assert_int_eq(ret, -1);
	sse_parser_free(p);

	/* Exactly max bytes of data is fine. */
	memset(&r, 0, sizeof(r));
	p = sse_parser_new(16, rec_cb, &r);
	ck_assert_int_eq(sse_parser_feed(p, "data:0123456789a\ndata:bcd\n\n",
	    27), 0);
	ck_assert_str_eq(r.out, "message|0123456789a\nbcd;");
	sse_parser_free(p);

	/* An overlong type is cut, not overflowed. */
	memset(&r, 0, sizeof(r));
	memset(big, 'e', sizeof(big));
	memcpy(big, "event:", 6);
	big[150] = '\n';
	p = sse_parser_new(1024, rec_cb, &r);
	ck_assert_int_eq(sse_parser_feed(p, big, 151), 0);
	ck_assert_int_eq(sse_parser_feed(p, "data: x\n\n", 9), 0);
	ck_assert_int_eq(r.events, 1);
	ck_assert_uint_eq(strlen(r.out), 63 + strlen("|x;"));
	sse_parser_free(p);
}
END_TEST

START_TEST(test_parse_stop_id)
{
	struct sse_parser *p;
	struct rec r;
	static const char in[] = "id: 5\ndata: a\n\nid: 6\ndata: b\n\n"
	    "data: c\n\n";

	memset(&r, 0, sizeof(r));
	r.stop_after = 1;
	p = sse_parser_new(1024, rec_cb, &r);
	ck_assert_int_eq(sse_parser_feed(p, in, sizeof(in) - 1), 7);
	ck_assert_str_eq(r.out, "message|a;");
	ck_assert_str_eq(sse_parser_last_id(p), "5");
	ck_assert_int_eq(sse_parser_feed(p, "data: d\n\n", 9), 7);
	ck_assert_int_eq(r.events, 1);
	sse_parser_free(p);

	memset(&r, 0, sizeof(r));
	p = sse_parser_new(1024, rec_cb, &r);
	ck_assert_str_eq(sse_parser_last_id(p), "");
	ck_assert_int_eq(sse_parser_feed(p, in, sizeof(in) - 1), 0);
	ck_assert_str_eq(sse_parser_last_id(p), "6");
	/* An id with a NUL is ignored. */
	ck_assert_int_eq(sse_parser_feed(p, "id: 7\0x\n\n", 9), 0);
	ck_assert_str_eq(sse_parser_last_id(p), "6");
	ck_assert_int_eq(r.events, 3);
	sse_parser_free(p);
	sse_parser_free(NULL);
}
END_TEST

static Suite *
sse_suite(void)
{
	Suite		*s = suite_create("sse");
	TCase		*tc = tcase_create("core");

	tcase_add_test(tc, test_event_basic);
	tcase_add_test(tc, test_event_multiline);
	tcase_add_test(tc, test_comment_head);
	tcase_add_test(tc, test_event_binary_len);
	tcase_add_test(tc, test_parse_basic);
	tcase_add_test(tc, test_parse_newlines);
	tcase_add_test(tc, test_parse_bom);
	tcase_add_test(tc, test_parse_limits);
	tcase_add_test(tc, test_parse_stop_id);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(sse_suite());
}
