/*
 * The HTTP/1.1 request reader (src/http.c) fed as a socket delivers it:
 * one request or several pipelined, cut into fragments.  Checks what
 * http_parse promises: it never consumes more than it was given, a parsed
 * request's lengths add up and its body is NUL-terminated, an error has a
 * 4xx/5xx status and a reason, and both results stick.
 */
#include <stdio.h>

#include "parley/http.h"
#include "fuzz.h"

/* Reads a finished request the way the supervisor and the worker do. */
static void
look(const struct http_request *r)
{
	char		 buf[1024];
	const char	*v;
	unsigned	 i;

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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_limits	 lim;
	struct http_parser	 p;
	struct fuzz_cut		 cut;
	const uint8_t		*frag;
	enum http_result	 r = HTTP_NEED_MORE;
	size_t			 n, off, used, again;

	fuzz_quiet();
	http_limits_default(&lim);
	/* Small enough that the fuzzer reaches every bound. */
	lim.max_request_line = 512;
	lim.max_header_bytes = 1024;
	lim.max_headers = 8;
	lim.max_body = 2048;
	http_parser_init(&p, &lim);
	fuzz_cut_init(&cut, data, size);
	while (r != HTTP_ERROR && (n = fuzz_cut_next(&cut, &frag)) > 0) {
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
				break;
			}
			if (r == HTTP_NEED_MORE) {
				FUZZ_CHECK(used == n - off);
				continue;
			}
			/* What completes a request is always a byte of it. */
			FUZZ_CHECK(used > 0);
			look(&p.req);
			FUZZ_CHECK(http_parse(&p, "x", 1, &again) == HTTP_DONE &&
			    again == 0);
			/* The next pipelined request gets a fresh parser. */
			http_parser_free(&p);
			http_parser_init(&p, &lim);
			r = HTTP_NEED_MORE;
		}
	}
	fuzz_cut_done(&cut);
	http_parser_free(&p);
	return 0;
}
