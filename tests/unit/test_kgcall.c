/*
 * Unit tests for the internal knowledge call (workers/kgcall.c): the
 * answer's parser (complete, partial, bounds, malformed), and whole calls
 * against a stand-in for the supervisor (wk_reroute below) that checks
 * the hand-off and answers on the socket: in one piece, in two, not at
 * all (closed, timed out), cancelled.
 */
#define KGCALL_TIMEOUT_MS	300
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "../../workers/kgcall.c"
#include "check_main.h"

/* --- the parser --- */

static int
parse(const char *s, int eof, struct kgcall_resp *r, char *err)
{
	return kgcall_parse(s, strlen(s), eof, r, err, 160);
}

START_TEST(t_parse_complete)
{
	struct kgcall_resp r;
	char err[160];
	const char *a = "HTTP/1.1 202 Accepted\r\nContent-Type:  application/"
	    "json \r\nContent-Length: 7\r\nConnection: close\r\n\r\n{\"a\":1}";

	ck_assert_int_eq(parse(a, 0, &r, err), 1);
	ck_assert_int_eq(r.status, 202);
	ck_assert_str_eq(r.ctype, "application/json");
	ck_assert_uint_eq(r.body_len, 7);
	ck_assert_int_eq(memcmp(r.body, "{\"a\":1}", 7), 0);
	/* Bytes after the body are not part of it. */
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
	    "okJUNK", 0, &r, err), 1);
	ck_assert_uint_eq(r.body_len, 2);
	/* HTTP/1.0 and a status line without a reason. */
	ck_assert_int_eq(parse("HTTP/1.0 404\r\nContent-Length: 0\r\n\r\n", 0,
	    &r, err), 1);
	ck_assert_int_eq(r.status, 404);
	ck_assert_uint_eq(r.body_len, 0);
	ck_assert_str_eq(r.ctype, "");
}
END_TEST

START_TEST(t_parse_partial)
{
	struct kgcall_resp r;
	char err[160];

	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\nContent-Le", 0, &r, err), 0);
	ck_assert_uint_eq(r.need, 0);
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
	    "12345", 0, &r, err), 0);
	/* What it waits for: the head (39 bytes) and the 10 of the body. */
	ck_assert_uint_eq(r.need, 39 + 10);
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\n\r\nabc", 0, &r, err), 0);
	ck_assert_uint_eq(r.need, SIZE_MAX);
	/* The peer closed before the Content-Length was in. */
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
	    "12345", 1, &r, err), -1);
	ck_assert_ptr_nonnull(strstr(err, "Content-Length"));
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\nContent-Le", 1, &r, err),
	    -1);
	ck_assert_int_eq(parse("", 1, &r, err), -1);
	/* No Content-Length: the body runs to the end. */
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\n\r\nabc", 0, &r, err), 0);
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\n\r\nabc", 1, &r, err), 1);
	ck_assert_uint_eq(r.body_len, 3);
	/* 204 has no body whatever follows. */
	ck_assert_int_eq(parse("HTTP/1.1 204 No Content\r\n\r\n", 0, &r, err),
	    1);
	ck_assert_uint_eq(r.body_len, 0);
}
END_TEST

START_TEST(t_parse_interim)
{
	struct kgcall_resp r;
	char err[160];

	ck_assert_int_eq(parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
	    "Content-Length: 2\r\n\r\nhi", 0, &r, err), 1);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(memcmp(r.body, "hi", 2), 0);
	ck_assert_int_eq(parse("HTTP/1.1 100 Continue\r\n\r\n", 0, &r, err), 0);
	ck_assert_int_eq(parse("HTTP/1.1 101 Switching\r\n\r\n", 0, &r, err),
	    -1);
}
END_TEST

START_TEST(t_parse_bad)
{
	static const char *bad[] = {
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 099 Low\r\n\r\n",
		"HTTP/1.1 600 High\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n"
		    "\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 4194305\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		NULL
	};
	struct kgcall_resp r;
	char err[160];
	size_t i;

	for (i = 0; bad[i] != NULL; i++) {
		err[0] = '\0';
		ck_assert_msg(parse(bad[i], 1, &r, err) == -1, "accepted %s",
		    bad[i]);
		ck_assert_msg(err[0] != '\0', "no reason for %s", bad[i]);
	}
	/* The same Content-Length twice is one. */
	ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	    "content-length: 2\r\n\r\nab", 0, &r, err), 1);
}
END_TEST

START_TEST(t_parse_bounds)
{
	struct kgcall_resp r;
	char err[160], *big;
	size_t n = KGCALL_HEAD_MAX + 64;

	/* A head that never ends, past 16 KiB: refused before EOF. */
	big = malloc(n + 1);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	memset(big + 20, 'a', n - 20);
	big[n] = '\0';
	ck_assert_int_eq(kgcall_parse(big, n, 0, &r, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "16 KiB"));
	free(big);
	/* A body without length over 4 MiB, at EOF. */
	n = KGCALL_ANSWER_MAX + 30;
	big = malloc(n);
	memcpy(big, "HTTP/1.1 200 OK\r\n\r\n", 19);
	memset(big + 19, 'b', n - 19);
	ck_assert_int_eq(kgcall_parse(big, n, 1, &r, err, sizeof(err)), -1);
	free(big);
}
END_TEST

/* --- whole calls, against a stand-in supervisor --- */

static struct wk wk;
static int peer = -1;		/* the handed end, as the owner holds it */
static int reroute_fail;
static struct ipc_conn got_ic;
static char got_req[4096];
static size_t got_len;

int
wk_reroute(struct wk *w, int fd, const struct ipc_conn *ic,
    const void *bytes, size_t len)
{
	const char *why;

	(void)w;
	if (reroute_fail) {
		close(fd);
		return -1;
	}
	got_ic = *ic;
	got_ic.bytes_len = (uint32_t)len;
	/* What the supervisor checks of a worker's hand-off. */
	ck_assert_int_eq(ipc_conn_check(&got_ic, sizeof(got_ic) + len, &why),
	    0);
	ck_assert_uint_lt(len, sizeof(got_req));
	memcpy(got_req, bytes, len);
	got_req[len] = '\0';
	got_len = len;
	peer = fd;
	return 0;
}

struct answer {
	int	 calls;
	int	 status;
	char	 ctype[64];
	char	 body[256];
	char	 err[256];
};

static void
done_cb(void *arg, int status, const char *ctype, const char *body,
    size_t len, const char *err)
{
	struct answer *a = arg;

	a->calls++;
	a->status = status;
	snprintf(a->ctype, sizeof(a->ctype), "%s", ctype);
	if (body != NULL) {
		ck_assert_int_eq(body[len], '\0');
		snprintf(a->body, sizeof(a->body), "%s", body);
	}
	if (err != NULL)
		snprintf(a->err, sizeof(a->err), "%s", err);
}

static void
setup(void)
{
	memset(&wk, 0, sizeof(wk));
	wk.base = event_base_new();
	peer = -1;
	reroute_fail = 0;
	got_len = 0;
}

static void
teardown(void)
{
	if (peer != -1)
		close(peer);
	event_base_free(wk.base);
}

/* Runs the loop until a->calls or ms pass. */
static void
loop_until(struct answer *a, int ms)
{
	int i;

	for (i = 0; i < ms && a->calls == 0; i++) {
		event_base_loop(wk.base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

static const struct kgcall_who who = { IPC_ROLE_AGENT, "alice", 0x1234, NULL };

START_TEST(t_call_answered)
{
	struct answer a;
	struct kgcall *c;
	static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Type: "
	    "application/json\r\nContent-Length: 13\r\nConnection: close\r\n"
	    "\r\n{\"result\":1}\n";

	memset(&a, 0, sizeof(a));
	c = kgcall_start(&wk, "p1", "POST", "/query", "{\"q\":1}", 7, &who,
	    done_cb, &a);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(a.calls, 0);
	/* The hand-off: the project's session, the caller's role and
	 * subject, a scope of that session only, and a whole request. */
	ck_assert_str_eq(got_ic.session, "kg:p1");
	ck_assert_str_eq(got_ic.scope, "kg:p1");
	ck_assert_str_eq(got_ic.subject, "alice");
	ck_assert_str_eq(got_ic.peer, "internal");
	ck_assert_uint_eq(got_ic.role, IPC_ROLE_AGENT);
	ck_assert_uint_eq(got_ic.kind, IPC_CONN_HTTP);
	ck_assert_uint_eq(got_ic.conn_id, 0x1234);
	ck_assert_uint_eq(got_ic.flags, 0);
	ck_assert_str_eq(got_req, "POST /knowledge/p1/query HTTP/1.1\r\n"
	    "Host: parley.internal\r\nContent-Type: application/json\r\n"
	    "Content-Length: 7\r\nConnection: close\r\n\r\n{\"q\":1}");
	/* Answered in two pieces: nothing before the whole body. */
	ck_assert_int_eq(write(peer, ans, 50), 50);
	loop_until(&a, 50);
	ck_assert_int_eq(a.calls, 0);
	ck_assert_int_eq(write(peer, ans + 50, sizeof(ans) - 1 - 50),
	    (ssize_t)(sizeof(ans) - 1 - 50));
	loop_until(&a, 1000);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(a.ctype, "application/json");
	ck_assert_str_eq(a.body, "{\"result\":1}\n");
}
END_TEST

START_TEST(t_call_get_eof)
{
	struct answer a;
	static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Type: "
	    "text/markdown\r\n\r\n# p1\n";

	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgcall_start(&wk, "p1", "GET", "?format=md",
	    NULL, 0, &who, done_cb, &a));
	ck_assert_str_eq(got_req, "GET /knowledge/p1?format=md HTTP/1.1\r\n"
	    "Host: parley.internal\r\nConnection: close\r\n\r\n");
	/* No Content-Length: the body is what came before the close. */
	ck_assert_int_eq(write(peer, ans, sizeof(ans) - 1),
	    (ssize_t)(sizeof(ans) - 1));
	close(peer);
	peer = -1;
	loop_until(&a, 1000);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(a.ctype, "text/markdown");
	ck_assert_str_eq(a.body, "# p1\n");
}
END_TEST

START_TEST(t_call_closed)
{
	struct answer a;

	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgcall_start(&wk, "p1", "POST", "/actions",
	    "{}", 2, &who, done_cb, &a));
	close(peer);	/* the supervisor had no worker for it */
	peer = -1;
	loop_until(&a, 1000);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.status, 0);
	ck_assert_ptr_nonnull(strstr(a.err, "without an answer"));
}
END_TEST

START_TEST(t_call_cut)
{
	struct answer a;
	static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n"
	    "\r\nshort";

	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgcall_start(&wk, "p1", "POST", "/query", "{}",
	    2, &who, done_cb, &a));
	ck_assert_int_eq(write(peer, ans, sizeof(ans) - 1),
	    (ssize_t)(sizeof(ans) - 1));
	close(peer);
	peer = -1;
	loop_until(&a, 1000);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.status, 0);
	ck_assert_ptr_nonnull(strstr(a.err, "could not be read"));
}
END_TEST

START_TEST(t_call_timeout)
{
	struct answer a;

	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgcall_start(&wk, "p1", "POST", "/query", "{}",
	    2, &who, done_cb, &a));
	loop_until(&a, 100);
	ck_assert_int_eq(a.calls, 0);
	loop_until(&a, 2000);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.status, 0);
	ck_assert_ptr_nonnull(strstr(a.err, "in time"));
}
END_TEST

START_TEST(t_call_cancel)
{
	struct answer a;
	struct kgcall *c;

	memset(&a, 0, sizeof(a));
	c = kgcall_start(&wk, "p1", "POST", "/query", "{}", 2, &who, done_cb,
	    &a);
	kgcall_cancel(c);
	ck_assert_int_eq(write(peer, "HTTP/1.1 200 OK\r\n\r\n", 19), 19);
	loop_until(&a, 500);
	ck_assert_int_eq(a.calls, 0);
}
END_TEST

START_TEST(t_call_refused)
{
	struct answer a;

	/* Not handed on; and a bad project, role or path: answered from the
	 * loop, never before kgcall_start returns. */
	memset(&a, 0, sizeof(a));
	reroute_fail = 1;
	ck_assert_ptr_nonnull(kgcall_start(&wk, "p1", "POST", "/query", "{}",
	    2, &who, done_cb, &a));
	ck_assert_int_eq(a.calls, 0);
	loop_until(&a, 500);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.status, 0);
	ck_assert_ptr_nonnull(strstr(a.err, "supervisor"));
	reroute_fail = 0;
	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgcall_start(&wk, "bad/project", "GET", "", NULL,
	    0, &who, done_cb, &a));
	loop_until(&a, 500);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_ptr_nonnull(strstr(a.err, "invalid"));
	ck_assert_uint_eq(got_len, 0);
	memset(&a, 0, sizeof(a));
	ck_assert_ptr_nonnull(kgcall_start(&wk, "p1", "GET", " HTTP/1.0\r\n",
	    NULL, 0, &who, done_cb, &a));
	loop_until(&a, 500);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_uint_eq(got_len, 0);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("kgcall");
	TCase *tc = tcase_create("parse"), *tw = tcase_create("call");

	tcase_add_test(tc, t_parse_complete);
	tcase_add_test(tc, t_parse_partial);
	tcase_add_test(tc, t_parse_interim);
	tcase_add_test(tc, t_parse_bad);
	tcase_add_test(tc, t_parse_bounds);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tw, setup, teardown);
	tcase_add_test(tw, t_call_answered);
	tcase_add_test(tw, t_call_get_eof);
	tcase_add_test(tw, t_call_closed);
	tcase_add_test(tw, t_call_cut);
	tcase_add_test(tw, t_call_timeout);
	tcase_add_test(tw, t_call_cancel);
	tcase_add_test(tw, t_call_refused);
	suite_add_tcase(s, tw);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
