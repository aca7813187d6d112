/* Unit tests for the web page's answers (supervisor/ui.c). */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../supervisor/ui.c"
#include "check_main.h"
#include "config_fixture.h"

/* A page of two files in place of the one ui/embed makes. */
static const unsigned char index_html[] = "<!doctype html><p>hi</p>";
static const unsigned char app_js[] = "export {};";
const struct ui_asset ui_assets[] = {
	{ "/index.html", index_html, sizeof(index_html) - 1 },
	{ "/js/app.js", app_js, sizeof(app_js) - 1 },
	{ NULL, NULL, 0 }
};

static struct http_parser hp;
static char *answer;

/* Answers the request head text under conf; the response, or NULL when
 * the page does not answer it. */
static const char *
ask(const struct config *conf, const char *text)
{
	struct http_limits lim;
	struct evbuffer *out = evbuffer_new();
	size_t used, n;
	int rc;

	http_parser_free(&hp);
	http_limits_default(&lim);
	http_parser_init(&hp, &lim);
	ck_assert_int_eq(http_parse(&hp, text, strlen(text), &used), HTTP_DONE);
	rc = ui_answer(conf, &hp.req, "X-Request-Id: 1\r\n", out);
	free(answer);
	answer = NULL;
	if (rc) {
		n = evbuffer_get_length(out);
		answer = malloc(n + 1);
		evbuffer_remove(out, answer, n);
		answer[n] = '\0';
	} else
		ck_assert_int_eq(evbuffer_get_length(out), 0);
	evbuffer_free(out);
	return answer;
}

/* A config from text, which must parse. */
static struct config *
conf(const char *text)
{
	struct config *c = parse(text);

	ck_assert_msg(c != NULL, "%s", errbuf);
	return c;
}

START_TEST(test_paths)
{
	struct config *c = conf("");
	const char *r;

	r = ask(c, "GET / HTTP/1.1\nHost: x\n\n");
	ck_assert_ptr_nonnull(r);
	ck_assert(strncmp(r, "HTTP/1.1 302 ", 13) == 0);
	ck_assert(strstr(r, "\r\nLocation: /ui/\r\n") != NULL);
	r = ask(c, "GET /ui HTTP/1.1\nHost: x\n\n");
	ck_assert(strstr(r, "\r\nLocation: /ui/\r\n") != NULL);
	r = ask(c, "GET /ui/ HTTP/1.1\nHost: x\n\n");
	ck_assert(strncmp(r, "HTTP/1.1 200 ", 13) == 0);
	ck_assert(strstr(r, "Content-Type: text/html; charset=utf-8\r\n"));
	ck_assert(strstr(r, "\r\n\r\n<!doctype html><p>hi</p>") != NULL);
	ck_assert(strstr(r, "X-Request-Id: 1\r\n") != NULL);
	r = ask(c, "GET /ui/js/app.js?v=2 HTTP/1.1\nHost: x\n\n");
	ck_assert(strstr(r, "Content-Type: text/javascript") != NULL);
	/* Only the table's names: no file system, no traversal (the
	 * HTTP reader refuses '..' segments before the page sees them). */
	r = ask(c, "GET /ui/js/..%2e%2fapp.js HTTP/1.1\nHost: x\n\n");
	ck_assert(strncmp(r, "HTTP/1.1 404 ", 13) == 0);
	r = ask(c, "GET /ui/index.html/ HTTP/1.1\nHost: x\n\n");
	ck_assert(strncmp(r, "HTTP/1.1 404 ", 13) == 0);
	r = ask(c, "GET /ui/js/ HTTP/1.1\nHost: x\n\n");
	ck_assert(strncmp(r, "HTTP/1.1 404 ", 13) == 0);
	/* Not the page's. */
	ck_assert_ptr_null(ask(c, "GET /uix HTTP/1.1\nHost: x\n\n"));
	ck_assert_ptr_null(ask(c, "GET /sessions HTTP/1.1\nHost: x\n\n"));
	ck_assert_ptr_null(ask(c, "GET /health HTTP/1.1\nHost: x\n\n"));
	config_free(c);
	expect_err("web-ui maybe\n",
	    "x.conf:1: web-ui: expected yes or no, got 'maybe'");
	/* web-ui no: nothing is the page's. */
	c = conf("web-ui no\n");
	ck_assert_ptr_null(ask(c, "GET /ui/ HTTP/1.1\nHost: x\n\n"));
	ck_assert_ptr_null(ask(c, "GET / HTTP/1.1\nHost: x\n\n"));
	config_free(c);
}
END_TEST

START_TEST(test_headers)
{
	struct config *c = conf("");
	const char *paths[] = { "/", "/ui/", "/ui/js/app.js", "/ui/nope" };
	char req[128];
	const char *r;
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\nHost: x\n\n",
		    paths[i]);
		r = ask(c, req);
		ck_assert_msg(strstr(r, "Content-Security-Policy: default-src "
		    "'none'; script-src 'self'; style-src 'self';") != NULL,
		    "%s: no CSP", paths[i]);
		ck_assert(strstr(r, "frame-ancestors 'none'") != NULL);
		ck_assert(strstr(r, "'unsafe-inline'") == NULL);
		ck_assert(strstr(r, "X-Content-Type-Options: nosniff\r\n"));
	}
	config_free(c);
}
END_TEST

START_TEST(test_methods_and_cache)
{
	struct config *c = conf("");
	char req[256], etag[24];
	const char *r, *e;

	r = ask(c, "HEAD /ui/js/app.js HTTP/1.1\nHost: x\n\n");
	ck_assert(strncmp(r, "HTTP/1.1 200 ", 13) == 0);
	ck_assert(strstr(r, "Content-Length: 10\r\n") != NULL);
	ck_assert(strstr(r, "\r\n\r\n")[4] == '\0');
	r = ask(c, "DELETE /ui/ HTTP/1.1\nHost: x\n\n");
	ck_assert(strncmp(r, "HTTP/1.1 405 ", 13) == 0);
	ck_assert(strstr(r, "Allow: GET, HEAD\r\n") != NULL);
	r = ask(c, "GET /ui/ HTTP/1.1\nHost: x\n\n");
	ck_assert((e = strstr(r, "ETag: \"")) != NULL);
	memcpy(etag, e + 6, 18);
	etag[18] = '\0';
	snprintf(req, sizeof(req), "GET /ui/ HTTP/1.1\nHost: x\n"
	    "If-None-Match: W/\"0\", %s\n\n", etag);
	r = ask(c, req);
	ck_assert(strncmp(r, "HTTP/1.1 304 ", 13) == 0);
	ck_assert(strstr(r, "Content-Length") == NULL);
	ck_assert(strstr(r, "\r\n\r\n")[4] == '\0');
	/* Another file's tag is not this one's. */
	snprintf(req, sizeof(req), "GET /ui/js/app.js HTTP/1.1\nHost: x\n"
	    "If-None-Match: %s\n\n", etag);
	r = ask(c, req);
	ck_assert(strncmp(r, "HTTP/1.1 200 ", 13) == 0);
	config_free(c);
	http_parser_free(&hp);
	free(answer);
	answer = NULL;
}
END_TEST

static Suite *
ui_suite(void)
{
	Suite *s = suite_create("ui");
	TCase *tc = tcase_create("ui");

	tcase_add_test(tc, test_paths);
	tcase_add_test(tc, test_headers);
	tcase_add_test(tc, test_methods_and_cache);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(ui_suite());
}
