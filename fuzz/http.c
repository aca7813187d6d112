/*
 * The HTTP/1.1 request reader (src/http.c) fed as a socket delivers it:
 * one request or several pipelined, cut into fragments.  Checks what
 * http_parse promises: it never consumes more than it was given, a parsed
 * request's lengths add up and its body is NUL-terminated, an error has a
 * 4xx/5xx status and a reason, both results stick, and the requests and
 * the verdict are the same whether the bytes come cut or whole.
 */
#include <stdio.h>

#include "parley/http.h"
#include "fuzz.h"

/*
 * Reads a finished request the way the supervisor and the worker do; a
 * chunked body's framing (size lines, CRLFs, trailers) is sent but not
 * in the body.
 */
static void
look(const struct http_parser *p)
{
	const struct http_request *r = &p->req;
	char		 buf[1024];
	const char	*v;
	unsigned	 i;

	if (p->chunked)
		FUZZ_CHECK(r->total_len > r->head_len + r->body_len);
	else
		FUZZ_CHECK(r->total_len == r->head_len + r->body_len);
	FUZZ_CHECK(r->body != NULL && r->body[r->body_len] == '\0');
	FUZZ_CHECK(r->minor == 0 || r->minor == 1);
	FUZZ_CHECK(r->target != NULL && r->path != NULL);
	FUZZ_CHECK(memchr(r->method, '\0', sizeof(r->method)) != NULL);
	for (i = 0; i < r->nheaders; i++)
		FUZZ_CHECK(r->headers[i].name != NULL &&
		    r->headers[i].value != NULL);
	if ((v = http_header(r, "connection")) != NULL)
		(void)http_has_token(v, "upgrade");
	if ((v = http_header(r, "Upgrade")) != NULL)
		(void)http_has_token(v, "websocket");
	(void)http_header(r, "Host");
	if (http_query_param(r->query, "access_token", buf, sizeof(buf)) == 0)
		FUZZ_CHECK(strlen(buf) < sizeof(buf));
	if (http_query_param(r->query, "since", buf, 8) == 0)
		FUZZ_CHECK(strlen(buf) < 8);
}

/*
 * Feeds what cut hands out to a parser, a fresh one for each pipelined
 * request, until an error or the end; returns a digest of the requests
 * and the verdict.
 */
static uint64_t
run(struct fuzz_cut *cut, const struct http_limits *lim)
{
	struct http_parser	 p;
	const uint8_t		*frag;
	enum http_result	 r = HTTP_NEED_MORE;
	uint64_t		 sum = 14695981039346656037ULL;
	size_t			 n, off, used, again;
	unsigned		 i;

	http_parser_init(&p, lim);
	while (r != HTTP_ERROR && (n = fuzz_cut_next(cut, &frag)) > 0) {
		for (off = 0; off < n; off += used) {
			used = (size_t)-1;
			r = http_parse(&p, (const char *)frag + off, n - off,
			    &used);
			FUZZ_CHECK(used <= n - off);
			if (r == HTTP_ERROR) {
				FUZZ_CHECK(p.status >= 400 && p.status < 600);
				FUZZ_CHECK(p.error != NULL);
				FUZZ_CHECK(http_parse(&p, "x", 1, &again) ==
				    HTTP_ERROR && again == 0);
				fuzz_sum(&sum, &p.status, sizeof(p.status));
				break;
			}
			if (r == HTTP_NEED_MORE) {
				FUZZ_CHECK(used == n - off);
				continue;
			}
			/* What completes a request is always a byte of it. */
			FUZZ_CHECK(used > 0);
			look(&p);
			FUZZ_CHECK(http_parse(&p, "x", 1, &again) == HTTP_DONE &&
			    again == 0);
			fuzz_sum(&sum, p.req.method, strlen(p.req.method));
			fuzz_sum(&sum, p.req.target, strlen(p.req.target) + 1);
			fuzz_sum(&sum, &p.req.total_len, sizeof(size_t));
			fuzz_sum(&sum, p.req.body, p.req.body_len);
			for (i = 0; i < p.req.nheaders; i++) {
				fuzz_sum(&sum, p.req.headers[i].name,
				    strlen(p.req.headers[i].name) + 1);
				fuzz_sum(&sum, p.req.headers[i].value,
				    strlen(p.req.headers[i].value) + 1);
			}
			/* The next pipelined request gets a fresh parser. */
			http_parser_free(&p);
			http_parser_init(&p, lim);
			r = HTTP_NEED_MORE;
		}
	}
	fuzz_cut_done(cut);
	http_parser_free(&p);
	return sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_limits	 lim;
	struct fuzz_cut		 cut, whole;
	uint64_t		 a, b;

	fuzz_quiet();
	http_limits_default(&lim);
	/* Small enough that the fuzzer reaches every bound. */
	lim.max_request_line = 512;
	lim.max_header_bytes = 1024;
	lim.max_headers = 8;
	lim.max_body = 2048;
	fuzz_cut_init(&cut, data, size);
	fuzz_cut_whole(&whole, &cut);
	a = run(&cut, &lim);
	b = run(&whole, &lim);
	/* Where the reads end must not change what was read. */
	FUZZ_CHECK(a == b);
	return 0;
}
