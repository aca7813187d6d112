#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "../../src/http.c"
#include "check_main.h"

/*
 * Feeds s in chunks of chunk bytes (0: all at once) after an optional first
 * split at split; re-feeds leftover bytes the way a caller would until the
 * parser stops needing more.  Returns the result; *total is bytes consumed.
 */
static enum http_result
feed(struct http_parser *p, const char *s, size_t len, size_t split,
    size_t chunk, size_t *total)
{
	enum http_result rv = HTTP_NEED_MORE;
	size_t		 off = 0, n, used;

	*total = 0;
	while (off < len) {
		if (split > 0 && off < split)
			n = split - off;
		else if (chunk > 0)
			n = chunk;
		else
			n = len - off;
		if (n > len - off)
			n = len - off;
		rv = http_parse(p, s + off, n, &used);
		ck_assert_uint_le(used, n);
		off += used;
		*total += used;
		if (rv != HTTP_NEED_MORE)
			break;
		ck_assert_uint_eq(used, n);	/* NEED_MORE consumes everything */
	}
	return rv;
}

static enum http_result
parse_str(struct http_parser *p, const char *s, size_t *total)
{
	http_parser_init(p, NULL);
	return feed(p, s, strlen(s), 0, 0, total);
}

/* A text summary of everything parsed, to compare feeding strategies. */
static void
summary(struct http_parser *p, enum http_result rv, size_t used, char *out,
    size_t outlen)
{
	size_t		 n;
	unsigned	 i;

	n = snprintf(out, outlen, "rv=%d used=%zu", rv, used);
	if (rv == HTTP_ERROR) {
		snprintf(out + n, outlen - n, " st=%d err=%s", p->status,
		    p->error);
		return;
	}
	if (rv != HTTP_DONE)
		return;
	n += snprintf(out + n, outlen - n, " m=%s t=%s p=%s q=%s v=%d hl=%zu "
	    "tl=%zu b=%zu:%s", p->req.method, p->req.target, p->req.path,
	    p->req.query ? p->req.query : "(null)", p->req.minor,
	    p->req.head_len, p->req.total_len, p->req.body_len, p->req.body);
	for (i = 0; i < p->req.nheaders && n < outlen; i++)
		n += snprintf(out + n, outlen - n, " [%s|%s]",
		    p->req.headers[i].name, p->req.headers[i].value);
}

static void
expect_error(const char *s, size_t len, int status, const char *errpart)
{
	struct http_parser p;
	size_t		 used;

	http_parser_init(&p, NULL);
	ck_assert_int_eq(feed(&p, s, len, 0, 0, &used), HTTP_ERROR);
	ck_assert_msg(p.status == status, "%s: status %d want %d (%s)", s,
	    p.status, status, p.error);
	ck_assert_ptr_nonnull(p.error);
	if (errpart != NULL)
		ck_assert_msg(strstr(p.error, errpart) != NULL,
		    "error '%s' lacks '%s'", p.error, errpart);
	http_parser_free(&p);

	/* Byte by byte must find the same error. */
	http_parser_init(&p, NULL);
	ck_assert_int_eq(feed(&p, s, len, 0, 1, &used), HTTP_ERROR);
	ck_assert_int_eq(p.status, status);
	http_parser_free(&p);
}

#define ERR(s, st, part)	expect_error((s), sizeof(s) - 1, (st), (part))

START_TEST(test_get)
{
	struct http_parser p;
	size_t		 used;
	const char	*s = "GET /sessions/abc/events?lastSeq=5&x=y HTTP/1.1\r\n"
	    "Host: example.com\r\n"
	    "Accept:   text/event-stream  \r\n"
	    "X-Empty:\r\n"
	    "Connection: keep-alive, Upgrade\r\n"
	    "\r\n";

	ck_assert_int_eq(parse_str(&p, s, &used), HTTP_DONE);
	ck_assert_uint_eq(used, strlen(s));
	ck_assert_str_eq(p.req.method, "GET");
	ck_assert_str_eq(p.req.target, "/sessions/abc/events?lastSeq=5&x=y");
	ck_assert_str_eq(p.req.path, "/sessions/abc/events");
	ck_assert_str_eq(p.req.query, "lastSeq=5&x=y");
	ck_assert_int_eq(p.req.minor, 1);
	ck_assert_uint_eq(p.req.nheaders, 4);
	ck_assert_str_eq(http_header(&p.req, "accept"), "text/event-stream");
	ck_assert_str_eq(http_header(&p.req, "HOST"), "example.com");
	ck_assert_str_eq(http_header(&p.req, "x-empty"), "");
	ck_assert_ptr_null(http_header(&p.req, "Content-Length"));
	ck_assert(http_has_token(http_header(&p.req, "connection"), "upgrade"));
	ck_assert_uint_eq(p.req.body_len, 0);
	ck_assert_str_eq(p.req.body, "");
	ck_assert_uint_eq(p.req.head_len, strlen(s));
	ck_assert_uint_eq(p.req.total_len, strlen(s));

	/* Further calls consume nothing. */
	ck_assert_int_eq(http_parse(&p, "GET", 3, &used), HTTP_DONE);
	ck_assert_uint_eq(used, 0);
	http_parser_free(&p);
	http_parser_free(&p);	/* twice is harmless */
}
END_TEST

START_TEST(test_http10_lf_and_leading_empty)
{
	struct http_parser p;
	size_t		 used;
	const char	*s = "\r\n\nHEAD /%7Euser/a%20b HTTP/1.0\nX-A: 1\n\n";

	ck_assert_int_eq(parse_str(&p, s, &used), HTTP_DONE);
	ck_assert_uint_eq(used, strlen(s));
	ck_assert_str_eq(p.req.method, "HEAD");
	ck_assert_int_eq(p.req.minor, 0);
	ck_assert_str_eq(p.req.path, "/~user/a b");
	ck_assert_str_eq(p.req.target, "/%7Euser/a%20b");
	ck_assert_ptr_null(p.req.query);
	ck_assert_str_eq(http_header(&p.req, "x-a"), "1");
	ck_assert_uint_eq(p.req.head_len, strlen(s));
	http_parser_free(&p);

	/* Empty query is present but empty. */
	ck_assert_int_eq(parse_str(&p, "OPTIONS /x? HTTP/1.0\r\n\r\n", &used),
	    HTTP_DONE);
	ck_assert_str_eq(p.req.query, "");
	ck_assert_str_eq(p.req.path, "/x");
	http_parser_free(&p);
}
END_TEST

START_TEST(test_post_body)
{
	struct http_parser p;
	size_t		 used;
	const char	*s = "POST /sessions HTTP/1.1\r\nHost: h\r\n"
	    "Content-Length: 11\r\n\r\n{\"a\":\"b\"}\r\nEXTRA";

	ck_assert_int_eq(parse_str(&p, s, &used), HTTP_DONE);
	ck_assert_uint_eq(used, strlen(s) - 5);
	ck_assert_uint_eq(p.req.body_len, 11);
	ck_assert_str_eq(p.req.body, "{\"a\":\"b\"}\r\n");
	ck_assert_uint_eq(p.req.total_len, p.req.head_len + 11);
	ck_assert_uint_eq(p.req.total_len, used);
	http_parser_free(&p);

	/* Body arriving later. */
	http_parser_init(&p, NULL);
	ck_assert_int_eq(http_parse(&p, s, 44, &used), HTTP_NEED_MORE);
	ck_assert_uint_eq(used, 44);
	ck_assert_int_eq(http_parse(&p, s + 44, 4, &used), HTTP_NEED_MORE);
	ck_assert_int_eq(http_parse(&p, s + 48, 100, &used), HTTP_DONE);
	ck_assert_uint_eq(used, strlen(s) - 48 - 5);
	ck_assert_str_eq(p.req.body, "{\"a\":\"b\"}\r\n");
	http_parser_free(&p);

	/* Zero-length body, and a body on DELETE/GET. */
	ck_assert_int_eq(parse_str(&p, "PUT /a HTTP/1.1\r\nHost: h\r\n"
	    "Content-Length: 0\r\n\r\nzz", &used), HTTP_DONE);
	ck_assert_uint_eq(p.req.body_len, 0);
	ck_assert_str_eq(p.req.body, "");
	http_parser_free(&p);
	ck_assert_int_eq(parse_str(&p, "DELETE /a HTTP/1.1\r\nHost: h\r\n"
	    "Content-Length: 002\r\n\r\nokno", &used), HTTP_DONE);
	ck_assert_str_eq(p.req.body, "ok");
	http_parser_free(&p);
}
END_TEST

START_TEST(test_pipelined_ws)
{
	struct http_parser p;
	size_t		 used;
	const char	 s[] = "GET /sessions/x/ws HTTP/1.1\r\nHost: h\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
	    "\x81\x85\x01\x02\x03\x04hello";
	size_t		 head = strstr(s, "\r\n\r\n") + 4 - s;

	http_parser_init(&p, NULL);
	ck_assert_int_eq(http_parse(&p, s, sizeof(s) - 1, &used), HTTP_DONE);
	ck_assert_uint_eq(used, head);
	ck_assert_uint_eq(p.req.total_len, head);
	http_parser_free(&p);

	/* Byte by byte stops at the same place. */
	http_parser_init(&p, NULL);
	ck_assert_int_eq(feed(&p, s, sizeof(s) - 1, 0, 1, &used), HTTP_DONE);
	ck_assert_uint_eq(used, head);
	http_parser_free(&p);
}
END_TEST

START_TEST(test_splits)
{
	static const char *const reqs[] = {
		"GET /a/b?c=d HTTP/1.1\r\nHost: h\r\nX:  y z \r\n\r\nNEXT",
		"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloNEXT",
		"GET / HTTP/1.0\n\n",
		"\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nBad\rLine: 1\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "0\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "3;a=b\r\nabc\r\n1\r\nd\r\n0\r\nT: v\r\n\r\nNEXT",
		"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "3\r\nabcd\r\n",
		"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /x HTTP/2.0\r\n\r\n",
	};
	struct http_parser p;
	char		 want[2048], got[2048];
	size_t		 i, k, c, len, used;
	enum http_result rv;

	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		len = strlen(reqs[i]);
		http_parser_init(&p, NULL);
		rv = feed(&p, reqs[i], len, 0, 0, &used);
		summary(&p, rv, used, want, sizeof(want));
		http_parser_free(&p);
		ck_assert_int_ne(rv, HTTP_NEED_MORE);

		for (c = 1; c <= 3; c++) {
			http_parser_init(&p, NULL);
			rv = feed(&p, reqs[i], len, 0, c, &used);
			summary(&p, rv, used, got, sizeof(got));
			http_parser_free(&p);
			ck_assert_str_eq(got, want);
		}
		for (k = 1; k < len; k++) {
			http_parser_init(&p, NULL);
			rv = feed(&p, reqs[i], len, k, 0, &used);
			summary(&p, rv, used, got, sizeof(got));
			http_parser_free(&p);
			ck_assert_msg(strcmp(got, want) == 0,
			    "req %zu split %zu: %s != %s", i, k, got, want);
		}
	}
}
END_TEST

START_TEST(test_errors)
{
	/* Request line. */
	ERR("GET\r\n\r\n", 400, "request line");
	ERR("GET /\r\n\r\n", 400, "request line");
	ERR("GET  / HTTP/1.1\r\n\r\n", 400, "request line");
	ERR("GET / HTTP/1.1 \r\n\r\n", 400, "request line");
	ERR(" GET / HTTP/1.1\r\n\r\n", 400, "request line");
	ERR("G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "method");
	ERR("GET /a b HTTP/1.1\r\n\r\n", 400, "request line");
	ERR("GET /a\tb HTTP/1.1\r\n\r\n", 400, "request-target");
	ERR("GET /a#f HTTP/1.1\r\n\r\n", 400, "request-target");
	ERR("GET /\x80 HTTP/1.1\r\n\r\n", 400, "request-target");
	ERR("GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, "origin-form");
	ERR("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", 400, "origin-form");
	ERR("GET / http/1.1\r\n\r\n", 400, "version");
	ERR("GET / HTTP/1\r\n\r\n", 400, "version");
	ERR("GET / HTTP/1.10\r\n\r\n", 400, "version");
	ERR("GET / HTTP/2.0\r\n\r\n", 505, "version");
	ERR("GET / HTTP/1.2\r\n\r\n", 505, "version");
	ERR("GET / HTTP/0.9\r\n\r\n", 505, "version");
	ERR("BREW / HTTP/1.1\r\nHost: h\r\n\r\n", 501, "method");
	ERR("get / HTTP/1.1\r\nHost: h\r\n\r\n", 501, "method");
	ERR("VERYLONGMETHODNAMEX / HTTP/1.1\r\n\r\n", 501, "method");
	ERR("GET /a%2 HTTP/1.1\r\nHost: h\r\n\r\n", 400, "percent");
	ERR("GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400, "percent");
	ERR("GET /a%00b HTTP/1.1\r\nHost: h\r\n\r\n", 400, "NUL");
	ERR("GET /a%0ab HTTP/1.1\r\nHost: h\r\n\r\n", 400, "control");
	ERR("GET /a/../b HTTP/1.1\r\nHost: h\r\n\r\n", 400, "..");
	ERR("GET /a/.. HTTP/1.1\r\nHost: h\r\n\r\n", 400, "..");
	ERR("GET /.. HTTP/1.1\r\nHost: h\r\n\r\n", 400, "..");
	ERR("GET /a/%2e%2E/b HTTP/1.1\r\nHost: h\r\n\r\n", 400, "..");
	ERR("GET /a/..?x HTTP/1.1\r\nHost: h\r\n\r\n", 400, "..");
	ERR("GET /a\x00 HTTP/1.1\r\n\r\n", 400, NULL);

	/* Line endings. */
	ERR("GET / HTTP/1.1\rHost: h\r\n\r\n", 400, "bare CR");
	ERR("GET / HTTP/1.1\r\nHost: h\r\r\n", 400, "bare CR");
	ERR("GET / HTTP/1.1\r\nHost: h\r\n\r\r", 400, "bare CR");

	/* Header lines. */
	ERR("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400, "colon");
	ERR("GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400, "folding");
	ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400, "folding");
	ERR("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "whitespace");
	ERR("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400, "whitespace");
	ERR("GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400, "empty header");
	ERR("GET / HTTP/1.1\r\nHost: h\r\nX(: v\r\n\r\n", 400, "header name");
	ERR("GET / HTTP/1.1\r\nHost: h\r\nX\x80: v\r\n\r\n", 400, "header name");
	ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\x01" "b\r\n\r\n", 400, "control");
	ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", 400, "control");
	ERR("GET / HTTP/1.1\r\nHost: h\r\nX: a\x00" "b\r\n\r\n", 400, "control");

	/* Semantics. */
	ERR("GET / HTTP/1.1\r\nX: y\r\n\r\n", 400, "Host");
	ERR("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400, "Host");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
	    "Content-Length: 3\r\n\r\nabc", 400, "both");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "both");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Length: 0\r\n\r\n0\r\n\r\n", 400, "both");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
	    "\r\n", 400, "end in chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip"
	    "\r\n\r\n", 400, "end in chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: identity\r\n\r\n", 400, "end in chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n",
	    400, "end in chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n"
	    "\r\n", 400, "end in chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked;q=1\r\n"
	    "\r\n", 400, "end in chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked"
	    "\r\n\r\n", 501, "only chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", 501, "only chunked");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, "
	    "chunked\r\n\r\n", 400, "more than once");
	ERR("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "0\r\n\r\n", 400, "HTTP/1.0");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
	    "Content-Length: 3\r\n\r\nabc", 400, "duplicate Content-Length");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
	    "content-length: 4\r\n\r\nabcd", 400, "conflicting");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 4\r\n\r\nabcd",
	    400, "conflicting");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3,3\r\n\r\nabc",
	    400, "duplicate");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n",
	    400, "non-numeric");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
	    400, "non-numeric");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\nx",
	    400, "non-numeric");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\nx",
	    400, "non-numeric");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n",
	    400, "non-numeric");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n",
	    400, "non-numeric");
	ERR("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: "
	    "99999999999999999999999999999\r\n\r\n", 413, "too large");
	ERR("POST / HTTP/1.1\r\nHost: h\r\n\r\n", 411, "Content-Length");
	ERR("PUT / HTTP/1.1\r\nHost: h\r\n\r\n", 411, "Content-Length");
	ERR("PATCH / HTTP/1.1\r\nHost: h\r\n\r\n", 411, "Content-Length");

	/* After an error, nothing more is consumed. */
	{
		struct http_parser p;
		size_t		 used;

		http_parser_init(&p, NULL);
		ck_assert_int_eq(http_parse(&p, "GET / HTTP/3.0\r\n", 16,
		    &used), HTTP_ERROR);
		ck_assert_int_eq(http_parse(&p, "x", 1, &used), HTTP_ERROR);
		ck_assert_uint_eq(used, 0);
		http_parser_free(&p);
	}
}
END_TEST

/* Builds "GET /aaa... HTTP/1.1" of exactly n bytes, then a valid rest. */
static char *
reqline_of(size_t n)
{
	char		*s;
	size_t		 fixed = strlen("GET / HTTP/1.1");
	const char	*rest = "\r\nHost: h\r\n\r\n";

	s = malloc(n + strlen(rest) + 1);
	ck_assert_ptr_nonnull(s);
	memcpy(s, "GET /", 5);
	memset(s + 5, 'a', n - fixed);
	memcpy(s + 5 + (n - fixed), " HTTP/1.1", 9);
	strcpy(s + n, rest);
	return s;
}

START_TEST(test_limits)
{
	struct http_limits lim;
	struct http_parser p;
	size_t		 used, i, n;
	char		*s, buf[1024];

	http_limits_default(&lim);
	ck_assert_uint_eq(lim.max_request_line, 8192);
	ck_assert_uint_eq(lim.max_header_bytes, 16384);
	ck_assert_uint_eq(lim.max_headers, 64);
	ck_assert_uint_eq(lim.max_body, 1048576);

	/* Request line exactly at, then one past, the default bound. */
	s = reqline_of(8192);
	ck_assert_int_eq(parse_str(&p, s, &used), HTTP_DONE);
	http_parser_free(&p);
	free(s);
	s = reqline_of(8193);
	ck_assert_int_eq(parse_str(&p, s, &used), HTTP_ERROR);
	ck_assert_int_eq(p.status, 414);
	/* Detected before the line ends, without buffering more. */
	ck_assert_uint_eq(used, 8193);
	http_parser_free(&p);
	free(s);

	/* Header bytes: "Host: h\r\n" (9) + "X: " + v + "\r\n". */
	lim.max_header_bytes = 100;
	n = 100 - 9 - 5;
	for (i = 0; i < 2; i++) {
		memset(buf, 0, sizeof(buf));
		strcpy(buf, "GET / HTTP/1.1\r\nHost: h\r\nX: ");
		memset(buf + strlen(buf), 'v', n + i);
		strcat(buf, "\r\n\r\n");
		http_parser_init(&p, &lim);
		ck_assert_int_eq(feed(&p, buf, strlen(buf), 0, 0, &used),
		    i == 0 ? HTTP_DONE : HTTP_ERROR);
		if (i == 1) {
			ck_assert_int_eq(p.status, 431);
			ck_assert_ptr_nonnull(strstr(p.error, "too large"));
		}
		http_parser_free(&p);
	}
	/* Same with bare LF: one byte less per line, so one more allowed. */
	for (i = 0; i < 2; i++) {
		memset(buf, 0, sizeof(buf));
		strcpy(buf, "GET / HTTP/1.1\nHost: h\nX: ");
		memset(buf + strlen(buf), 'v', n + 2 + i);
		strcat(buf, "\n\n");
		http_parser_init(&p, &lim);
		ck_assert_int_eq(feed(&p, buf, strlen(buf), 0, 1, &used),
		    i == 0 ? HTTP_DONE : HTTP_ERROR);
		if (i == 1)
			ck_assert_int_eq(p.status, 431);
		http_parser_free(&p);
	}

	/* Header count exactly at and one past. */
	http_limits_default(&lim);
	lim.max_headers = 5;
	for (i = 0; i < 2; i++) {
		unsigned	 h;

		strcpy(buf, "GET / HTTP/1.1\r\nHost: h\r\n");
		for (h = 1; h < 5 + i; h++)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			    "X-%u: %u\r\n", h, h);
		strcat(buf, "\r\n");
		http_parser_init(&p, &lim);
		ck_assert_int_eq(feed(&p, buf, strlen(buf), 0, 0, &used),
		    i == 0 ? HTTP_DONE : HTTP_ERROR);
		if (i == 0)
			ck_assert_uint_eq(p.req.nheaders, 5);
		else {
			ck_assert_int_eq(p.status, 431);
			ck_assert_ptr_nonnull(strstr(p.error, "too many"));
		}
		http_parser_free(&p);
	}

	/* Body exactly at and one past. */
	lim.max_body = 4;
	http_parser_init(&p, &lim);
	strcpy(buf, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd");
	ck_assert_int_eq(feed(&p, buf, strlen(buf), 0, 0, &used), HTTP_DONE);
	ck_assert_str_eq(p.req.body, "abcd");
	http_parser_free(&p);
	http_parser_init(&p, &lim);
	strcpy(buf, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
	ck_assert_int_eq(feed(&p, buf, strlen(buf), 0, 0, &used), HTTP_ERROR);
	ck_assert_int_eq(p.status, 413);
	http_parser_free(&p);

	/* An endless header line stops at the bound. */
	http_limits_default(&lim);
	http_parser_init(&p, &lim);
	ck_assert_int_eq(http_parse(&p, "GET / HTTP/1.1\r\nX: ", 19, &used),
	    HTTP_NEED_MORE);
	memset(buf, 'z', sizeof(buf));
	for (i = 0; i < 100; i++)
		if (http_parse(&p, buf, sizeof(buf), &used) != HTTP_NEED_MORE)
			break;
	ck_assert_int_eq(p.status, 431);
	ck_assert_uint_le(p.linecap, 16384);
	http_parser_free(&p);

	/* Endless empty lines before a request line. */
	http_parser_init(&p, &lim);
	memset(buf, '\n', sizeof(buf));
	for (i = 0; i < 100; i++)
		if (http_parse(&p, buf, sizeof(buf), &used) != HTTP_NEED_MORE)
			break;
	ck_assert_int_eq(p.status, 400);
	http_parser_free(&p);
}
END_TEST

#define CHUNKED_HEAD "POST /s/x/messages HTTP/1.1\r\nHost: h\r\n" \
	"Transfer-Encoding: chunked\r\n\r\n"

START_TEST(test_chunked)
{
	struct http_parser p;
	struct http_limits lim;
	size_t		 used, i, n;
	char		*s, *big;
	const char	 req[] = CHUNKED_HEAD "5\r\nhello\r\n"
	    "6;ext=1 ; q = \"a \\\" b\";z\r\n world\r\n"
	    "0\r\nX-Trailer: 1\r\nAuthorization: Bearer x\r\n\r\nNEXT";

	ck_assert_int_eq(parse_str(&p, req, &used), HTTP_DONE);
	ck_assert_uint_eq(used, strlen(req) - 4);
	ck_assert_uint_eq(p.req.total_len, used);
	ck_assert_uint_eq(p.req.head_len, strlen(CHUNKED_HEAD));
	ck_assert_uint_eq(p.req.body_len, 11);
	ck_assert_str_eq(p.req.body, "hello world");
	/* Trailers are checked and dropped, never taken as headers. */
	ck_assert_ptr_null(http_header(&p.req, "X-Trailer"));
	ck_assert_ptr_null(http_header(&p.req, "Authorization"));
	http_parser_free(&p);

	/* Upper-case hex, leading zeros, no trailer. */
	ck_assert_int_eq(parse_str(&p, CHUNKED_HEAD "000A\r\n0123456789\r\n"
	    "00\r\n\r\n", &used), HTTP_DONE);
	ck_assert_str_eq(p.req.body, "0123456789");
	http_parser_free(&p);

	/* Empty list elements do not count; the coding is case-insensitive. */
	ck_assert_int_eq(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\n"
	    "Transfer-Encoding: , CHUNKED ,\r\n\r\n1\r\nz\r\n0\r\n\r\n",
	    &used), HTTP_DONE);
	ck_assert_str_eq(p.req.body, "z");
	http_parser_free(&p);

	/* An empty chunked body. */
	ck_assert_int_eq(parse_str(&p, CHUNKED_HEAD "0\r\n\r\n", &used),
	    HTTP_DONE);
	ck_assert_uint_eq(p.req.body_len, 0);
	ck_assert_str_eq(p.req.body, "");
	http_parser_free(&p);

	/* Not done before the final CRLF. */
	s = CHUNKED_HEAD "1\r\na\r\n0\r\n";
	ck_assert_int_eq(parse_str(&p, s, &used), HTTP_NEED_MORE);
	ck_assert_uint_eq(used, strlen(s));
	http_parser_free(&p);

	/* Framing errors. */
	ERR(CHUNKED_HEAD "\r\n", 400, "chunk size");
	ERR(CHUNKED_HEAD "zz\r\n", 400, "chunk size");
	ERR(CHUNKED_HEAD "-1\r\n", 400, "chunk size");
	ERR(CHUNKED_HEAD " 1\r\na\r\n", 400, "chunk size");
	ERR(CHUNKED_HEAD "1\na\r\n0\r\n\r\n", 400, "bare LF");
	ERR(CHUNKED_HEAD "1\r\na\n0\r\n\r\n", 400, "bare LF");
	ERR(CHUNKED_HEAD "1\ra\r\n", 400, "bare CR");
	ERR(CHUNKED_HEAD "1\r\nab\r\n", 400, "longer than its size");
	ERR(CHUNKED_HEAD "1x\r\na\r\n", 400, "extension");
	ERR(CHUNKED_HEAD "1;\r\na\r\n", 400, "extension");
	ERR(CHUNKED_HEAD "1;a=\r\na\r\n", 400, "extension");
	ERR(CHUNKED_HEAD "1;a=\"b\r\na\r\n", 400, "extension");
	ERR(CHUNKED_HEAD "1;a=\"\x01\"\r\na\r\n", 400, "extension");
	ERR(CHUNKED_HEAD "1;a\x7f\r\na\r\n", 400, "extension");
	ERR(CHUNKED_HEAD "0\r\nBad Trailer: 1\r\n\r\n", 400, "whitespace");
	ERR(CHUNKED_HEAD "0\r\nNoColon\r\n\r\n", 400, "colon");
	ERR(CHUNKED_HEAD "0\r\n folded\r\n\r\n", 400, "folding");
	ERR(CHUNKED_HEAD "fffffffffffffffffffffff\r\n", 413, "too large");
	ERR(CHUNKED_HEAD "100001\r\n", 413, "too large");

	/* Bounds: decoded body, chunk line, framing, trailer. */
	http_limits_default(&lim);
	lim.max_body = 4;
	lim.max_headers = 2;
	lim.max_header_bytes = 40;
	http_parser_init(&p, &lim);
	s = CHUNKED_HEAD "2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n";
	ck_assert_int_eq(feed(&p, s, strlen(s), 0, 1, &used), HTTP_DONE);
	ck_assert_str_eq(p.req.body, "abcd");
	http_parser_free(&p);
	http_parser_init(&p, &lim);
	s = CHUNKED_HEAD "2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n";
	ck_assert_int_eq(feed(&p, s, strlen(s), 0, 0, &used), HTTP_ERROR);
	ck_assert_int_eq(p.status, 413);
	http_parser_free(&p);

	big = malloc(8192);
	ck_assert_ptr_nonnull(big);
	/* A chunk-size line at, then past, HTTP_CHUNK_LINE_MAX. */
	for (i = 0; i < 2; i++) {
		strcpy(big, CHUNKED_HEAD "1;e=");
		memset(big + strlen(big), 'v', HTTP_CHUNK_LINE_MAX - 4 + i);
		strcpy(big + strlen(CHUNKED_HEAD) + HTTP_CHUNK_LINE_MAX + i,
		    "\r\na\r\n0\r\n\r\n");
		http_parser_init(&p, NULL);
		ck_assert_int_eq(feed(&p, big, strlen(big), 0, 7, &used),
		    i == 0 ? HTTP_DONE : HTTP_ERROR);
		if (i == 1) {
			ck_assert_int_eq(p.status, 400);
			ck_assert_ptr_nonnull(strstr(p.error, "too long"));
		}
		ck_assert_uint_le(p.linecap, HTTP_CHUNK_LINE_MAX);
		http_parser_free(&p);
	}
	/* Framing beyond the body bound: long extensions on 1-byte chunks. */
	strcpy(big, CHUNKED_HEAD);
	for (i = 0; i < 4; i++) {
		n = strlen(big);
		memcpy(big + n, "1;e=", 4);
		memset(big + n + 4, 'v', 1000);
		strcpy(big + n + 1004, "\r\nx\r\n");
	}
	strcat(big, "0\r\n\r\n");
	http_parser_init(&p, &lim);
	ck_assert_int_eq(feed(&p, big, strlen(big), 0, 0, &used), HTTP_ERROR);
	ck_assert_int_eq(p.status, 413);
	ck_assert_ptr_nonnull(strstr(p.error, "framing"));
	http_parser_free(&p);
	free(big);

	/* Trailer count and size, bound like the head. */
	http_parser_init(&p, &lim);
	s = CHUNKED_HEAD "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
	ck_assert_int_eq(feed(&p, s, strlen(s), 0, 0, &used), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
	http_parser_free(&p);
	http_parser_init(&p, &lim);
	s = CHUNKED_HEAD "0\r\nA: 0123456789012345678901234567890123456789\r\n"
	    "\r\n";
	ck_assert_int_eq(feed(&p, s, strlen(s), 0, 0, &used), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
	http_parser_free(&p);

	/* Expect: 100-continue is wanted until the body starts. */
	http_parser_init(&p, NULL);
	s = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n";
	ck_assert_int_eq(http_parse(&p, s, strlen(s) - 1, &used),
	    HTTP_NEED_MORE);
	ck_assert_int_eq(http_wants_continue(&p), 0);
	ck_assert_int_eq(http_head_done(&p), 0);
	ck_assert_int_eq(http_parse(&p, "\n", 1, &used), HTTP_NEED_MORE);
	ck_assert_int_eq(http_wants_continue(&p), 1);
	ck_assert_int_eq(http_head_done(&p), 1);
	ck_assert_int_eq(http_parse(&p, "1", 1, &used), HTTP_NEED_MORE);
	ck_assert_int_eq(http_wants_continue(&p), 0);
	http_parser_free(&p);
	http_parser_init(&p, NULL);
	s = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
	    "Content-Length: 2\r\n\r\n";
	ck_assert_int_eq(http_parse(&p, s, strlen(s), &used), HTTP_NEED_MORE);
	ck_assert_int_eq(http_wants_continue(&p), 1);
	ck_assert_int_eq(http_parse(&p, "a", 1, &used), HTTP_NEED_MORE);
	ck_assert_int_eq(http_wants_continue(&p), 0);
	http_parser_free(&p);
}
END_TEST

/*
 * Every request, valid or not, fed in random fragments as a socket
 * delivers them, parses the same as fed whole.
 */
START_TEST(test_random_fragments)
{
	static const char *const reqs[] = {
		CHUNKED_HEAD "5\r\nhello\r\n6;a=\"q\"\r\n world\r\n0\r\n"
		    "T: 1\r\n\r\n\x81\x80",
		CHUNKED_HEAD "1\r\nab\r\n",
		CHUNKED_HEAD "1\r\na\n",
		CHUNKED_HEAD "0\r\nA B: 1\r\n\r\n",
		"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
		    "Content-Length: 6\r\n\r\nhello!",
		"POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
		"GET /a?b=c HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\nxy",
		"POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked"
		    "\r\n\r\n",
	};
	struct http_parser p;
	char		 want[2048], got[2048];
	size_t		 i, k, off, n, len, used, total;
	enum http_result rv;

	srandom(16);
	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		len = strlen(reqs[i]);
		if (i == 0)
			len += 2;	/* the frame bytes after it */
		http_parser_init(&p, NULL);
		rv = feed(&p, reqs[i], len, 0, 0, &used);
		summary(&p, rv, used, want, sizeof(want));
		http_parser_free(&p);
		ck_assert_int_ne(rv, HTTP_NEED_MORE);
		for (k = 0; k < 200; k++) {
			http_parser_init(&p, NULL);
			rv = HTTP_NEED_MORE;
			for (off = total = 0; off < len; off += n) {
				n = 1 + (size_t)random() % 9;
				if (n > len - off)
					n = len - off;
				rv = http_parse(&p, reqs[i] + off, n, &used);
				total += used;
				if (rv != HTTP_NEED_MORE)
					break;
				ck_assert_uint_eq(used, n);
			}
			summary(&p, rv, total, got, sizeof(got));
			http_parser_free(&p);
			ck_assert_msg(strcmp(got, want) == 0, "req %zu: %s != %s",
			    i, got, want);
		}
	}
}
END_TEST

START_TEST(test_has_token)
{
	ck_assert(http_has_token("Upgrade", "upgrade"));
	ck_assert(http_has_token("keep-alive, Upgrade", "Upgrade"));
	ck_assert(http_has_token("keep-alive,Upgrade", "UPGRADE"));
	ck_assert(http_has_token(" keep-alive ,\tUpgrade\t", "keep-alive"));
	ck_assert(http_has_token("a,,upgrade", "upgrade"));
	ck_assert(!http_has_token("upgrade2", "upgrade"));
	ck_assert(!http_has_token("upgradex, keep", "upgrade"));
	ck_assert(!http_has_token("up grade", "upgrade"));
	ck_assert(!http_has_token("", "upgrade"));
	ck_assert(!http_has_token("a,,b", ""));
	ck_assert(!http_has_token(NULL, "upgrade"));
	ck_assert(!http_has_token("close", "keep-alive"));
}
END_TEST

START_TEST(test_query)
{
	char		 out[16];

	ck_assert_int_eq(http_query_param("lastSeq=42&x=y", "lastSeq", out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "42");
	ck_assert_int_eq(http_query_param("a=1&access_token=ab%2Bc+d%7e",
	    "access_token", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "ab+c d~");
	ck_assert_int_eq(http_query_param("a=1&a=2", "a", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "1");
	ck_assert_int_eq(http_query_param("flag&b=", "flag", out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(http_query_param("flag&b=", "b", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(http_query_param("x%5Fy=3", "x_y", out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "3");
	ck_assert_int_eq(http_query_param("a=b=c", "a", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "b=c");
	ck_assert_int_eq(http_query_param("ab=1", "a", out, sizeof(out)), -1);
	ck_assert_int_eq(http_query_param("", "a", out, sizeof(out)), -1);
	ck_assert_int_eq(http_query_param(NULL, "a", out, sizeof(out)), -1);
	ck_assert_int_eq(http_query_param("&&", "a", out, sizeof(out)), -1);
	ck_assert_int_eq(http_query_param("%zz=1&a=2", "a", out, sizeof(out)),
	    0);
	ck_assert_str_eq(out, "2");
	ck_assert_int_eq(http_query_param("a=%zz", "a", out, sizeof(out)), -2);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(http_query_param("a=%2", "a", out, sizeof(out)), -2);
	ck_assert_int_eq(http_query_param("a=x%00", "a", out, sizeof(out)), -2);
	/* 15 bytes fit in 16, 16 do not. */
	ck_assert_int_eq(http_query_param("a=123456789012345", "a", out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "123456789012345");
	ck_assert_int_eq(http_query_param("a=1234567890123456", "a", out,
	    sizeof(out)), -2);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(http_query_param("a=%41%42", "a", out, 3), 0);
	ck_assert_str_eq(out, "AB");
	ck_assert_int_eq(http_query_param("a=%41%42%43", "a", out, 3), -2);
	ck_assert_int_eq(http_query_param("a=1", "a", out, 0), -2);
}
END_TEST

START_TEST(test_reason)
{
	ck_assert_str_eq(http_reason(200), "OK");
	ck_assert_str_eq(http_reason(400), "Bad Request");
	ck_assert_str_eq(http_reason(431), "Request Header Fields Too Large");
	ck_assert_str_eq(http_reason(503), "Service Unavailable");
	ck_assert_str_eq(http_reason(101), "Switching Protocols");
	ck_assert_str_eq(http_reason(299), "Unknown");
	ck_assert_str_eq(http_reason(-1), "Unknown");
}
END_TEST

static char *
drain(struct evbuffer *b)
{
	size_t		 n = evbuffer_get_length(b);
	char		*s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}

START_TEST(test_respond)
{
	struct evbuffer	*b = evbuffer_new();
	char		*s;

	http_respond(b, 200, "text/plain", "hi", 2, "X-A: 1\r\n");
	s = drain(b);
	ck_assert_str_eq(s, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	    "Content-Length: 2\r\nConnection: close\r\nX-A: 1\r\n\r\nhi");
	free(s);

	http_respond(b, 404, NULL, NULL, 0, NULL);
	s = drain(b);
	ck_assert_str_eq(s, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
	    "Connection: close\r\n\r\n");
	free(s);

	http_respond(b, 204, "text/plain", "x", 1, NULL);
	s = drain(b);
	ck_assert_str_eq(s, "HTTP/1.1 204 No Content\r\nConnection: close\r\n"
	    "\r\n");
	free(s);

	/* A body holding NUL is sent whole. */
	http_respond(b, 200, "application/octet-stream", "a\0b", 3, NULL);
	ck_assert_uint_eq(evbuffer_get_length(b),
	    strlen("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream"
	    "\r\nContent-Length: 3\r\nConnection: close\r\n\r\n") + 3);
	evbuffer_drain(b, evbuffer_get_length(b));

	http_respond_error(b, 400, "BAD_REQUEST", "say \"hi\"\n<x>");
	s = drain(b);
	ck_assert_str_eq(s, "HTTP/1.1 400 Bad Request\r\n"
	    "Content-Type: application/json\r\nContent-Length: 60\r\n"
	    "Connection: close\r\n\r\n"
	    "{\"error\":{\"code\":\"BAD_REQUEST\",\"message\":\"say \\\"hi\\\"\\n<x>\"}}");
	free(s);

	http_respond_error(b, 503, NULL, NULL);
	s = drain(b);
	ck_assert_ptr_nonnull(strstr(s, "HTTP/1.1 503 Service Unavailable\r\n"));
	ck_assert_ptr_nonnull(strstr(s,
	    "{\"error\":{\"code\":\"\",\"message\":\"\"}}"));
	free(s);
	evbuffer_free(b);
}
END_TEST

static Suite *
http_suite(void)
{
	Suite		*s = suite_create("http");
	TCase		*tc = tcase_create("core");

	tcase_add_test(tc, test_get);
	tcase_add_test(tc, test_http10_lf_and_leading_empty);
	tcase_add_test(tc, test_post_body);
	tcase_add_test(tc, test_pipelined_ws);
	tcase_add_test(tc, test_splits);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_chunked);
	tcase_add_test(tc, test_random_fragments);
	tcase_add_test(tc, test_has_token);
	tcase_add_test(tc, test_query);
	tcase_add_test(tc, test_reason);
	tcase_add_test(tc, test_respond);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(http_suite());
}
