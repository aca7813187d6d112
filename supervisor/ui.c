/*
 * The web page: static files served by the supervisor itself, before any
 * token is read (the page holds no secret; what it fetches asks for one).
 * A strict Content-Security-Policy makes text that reaches the page as
 * data unable to run as script even if a view slipped: no inline script
 * or style, nothing from another origin, no framing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "parley/config.h"
#include "parley/http.h"
#include "ui.h"

#define UI_PREFIX	"/ui"

#define UI_SECURITY_HEADERS \
	"Content-Security-Policy: default-src 'none'; script-src 'self'; " \
	"style-src 'self'; img-src 'self' data:; connect-src 'self'; " \
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n" \
	"X-Content-Type-Options: nosniff\r\n" \
	"X-Frame-Options: DENY\r\n" \
	"Referrer-Policy: no-referrer\r\n" \
	"Cross-Origin-Opener-Policy: same-origin\r\n" \
	"Cross-Origin-Resource-Policy: same-origin\r\n"

static const struct {
	const char	*ext;
	const char	*type;
} ui_types[] = {
	{ ".html",	"text/html; charset=utf-8" },
	{ ".js",	"text/javascript; charset=utf-8" },
	{ ".css",	"text/css; charset=utf-8" },
	{ ".svg",	"image/svg+xml" },
	{ ".png",	"image/png" },
	{ ".json",	"application/json" },
};

static const char *
ui_type(const char *path)
{
	size_t	i, n = strlen(path), e;

	for (i = 0; i < sizeof(ui_types) / sizeof(ui_types[0]); i++) {
		e = strlen(ui_types[i].ext);
		if (n > e && strcmp(path + n - e, ui_types[i].ext) == 0)
			return ui_types[i].type;
	}
	return "application/octet-stream";
}

/* A strong validator: FNV-1a 64 of the bytes, which change only with a
 * new binary. */
static void
ui_etag(const struct ui_asset *a, char *buf, size_t len)
{
	uint64_t	h = 14695981039346656037ull;
	size_t		i;

	for (i = 0; i < a->len; i++)
		h = (h ^ a->data[i]) * 1099511628211ull;
	snprintf(buf, len, "\"%016llx\"", (unsigned long long)h);
}

/* Whether the If-None-Match header names etag (or is "*"). */
static int
ui_not_modified(const struct http_request *req, const char *etag)
{
	const char	*v = http_header(req, "If-None-Match");

	return v != NULL && (strcmp(v, "*") == 0 || strstr(v, etag) != NULL);
}

/* Like http_respond; for HEAD, without the body but with its length. */
static void
ui_respond(const struct http_request *req, struct evbuffer *out, int status,
    const char *type, const void *body, size_t len, const char *headers)
{
	struct evbuffer	*tmp;

	if (strcmp(req->method, "HEAD") != 0) {
		http_respond(out, status, type, body, len, headers);
		return;
	}
	if ((tmp = evbuffer_new()) == NULL)
		return;
	http_respond(tmp, status, type, body, len, headers);
	evbuffer_remove_buffer(tmp, out, evbuffer_get_length(tmp) - len);
	evbuffer_free(tmp);
}

static void
ui_error(const struct http_request *req, struct evbuffer *out, int status,
    const char *msg, const char *extra)
{
	char	hdr[1024];

	snprintf(hdr, sizeof(hdr), "%s%s%s", extra ? extra : "",
	    UI_SECURITY_HEADERS, status == 405 ? "Allow: GET, HEAD\r\n" : "");
	ui_respond(req, out, status, "text/plain; charset=utf-8", msg,
	    strlen(msg), hdr);
}

int
ui_wants(const struct config *conf, const char *path)
{
	return conf->web_ui && (strcmp(path, "/") == 0 ||
	    strcmp(path, UI_PREFIX) == 0 ||
	    strncmp(path, UI_PREFIX "/", sizeof(UI_PREFIX)) == 0);
}

int
ui_answer(const struct config *conf, const struct http_request *req,
    const char *extra, struct evbuffer *out)
{
	const struct ui_asset	*a;
	const char		*path = req->path, *rel;
	char			 hdr[1536], etag[24];

	if (!ui_wants(conf, path))
		return 0;
	if (strcmp(req->method, "GET") != 0 &&
	    strcmp(req->method, "HEAD") != 0) {
		ui_error(req, out, 405, "the page answers GET and HEAD only\n",
		    extra);
		return 1;
	}
	if (strcmp(path, UI_PREFIX "/") != 0 &&
	    strncmp(path, UI_PREFIX "/", sizeof(UI_PREFIX)) != 0) {
		/* / and /ui: the page's one address, so its relative
		 * links resolve. */
		snprintf(hdr, sizeof(hdr), "%sLocation: " UI_PREFIX "/\r\n"
		    UI_SECURITY_HEADERS, extra ? extra : "");
		ui_respond(req, out, 302, "text/plain; charset=utf-8",
		    "see /ui/\n", 9, hdr);
		return 1;
	}
	rel = path + strlen(UI_PREFIX);
	if (strcmp(rel, "/") == 0)
		rel = "/index.html";
	for (a = ui_assets; a->path != NULL; a++)
		if (strcmp(a->path, rel) == 0)
			break;
	if (a->path == NULL) {
		ui_error(req, out, 404, "no such file in the page; open /ui/\n",
		    extra);
		return 1;
	}
	ui_etag(a, etag, sizeof(etag));
	/* no-cache: revalidated each time, so an upgraded daemon's page is
	 * never mixed with files of the old one. */
	snprintf(hdr, sizeof(hdr), "%sETag: %s\r\nCache-Control: no-cache\r\n"
	    UI_SECURITY_HEADERS, extra ? extra : "", etag);
	if (ui_not_modified(req, etag))
		ui_respond(req, out, 304, NULL, NULL, 0, hdr);
	else
		ui_respond(req, out, 200, ui_type(a->path), a->data, a->len,
		    hdr);
	return 1;
}
