#include <check.h>
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

static Suite *
sse_suite(void)
{
	Suite		*s = suite_create("sse");
	TCase		*tc = tcase_create("core");

	tcase_add_test(tc, test_event_basic);
	tcase_add_test(tc, test_event_multiline);
	tcase_add_test(tc, test_comment_head);
	tcase_add_test(tc, test_event_binary_len);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(sse_suite());
}
