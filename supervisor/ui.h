/*
 * The web page at /ui/: its files, built into parleyd (ui/embed), and the
 * answer to a request for one of them.
 */
#ifndef PARLEY_UI_H
#define PARLEY_UI_H

#include <stddef.h>

struct config;
struct evbuffer;
struct http_request;

struct ui_asset {
	const char		*path;	/* "/index.html", "/js/app.js" */
	const unsigned char	*data;
	size_t			 len;
};

/* The table ui/embed generates; ends with a NULL path. */
extern const struct ui_asset ui_assets[];

/* Whether path is the page's (/, /ui, /ui/...) and the page is on. */
int	ui_wants(const struct config *, const char *path);

/*
 * Answers req into out when its path is the page's (/, /ui, /ui/...) and
 * the page is on (web-ui); extra_headers (may be NULL) go into the
 * response.  1 when answered, 0 when the path is not the page's.
 */
int	ui_answer(const struct config *, const struct http_request *,
	    const char *extra_headers, struct evbuffer *out);

#endif
