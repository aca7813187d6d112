/*
 * Server-sent events (WHATWG HTML, text/event-stream) framing.
 */
#ifndef PARLEY_SSE_H
#define PARLEY_SSE_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/*
 * Appends one event: "id: <seq>\n" when seq > 0, "event: <type>\n" when
 * type is not NULL (cut at its first CR or LF so it cannot forge fields),
 * then data split on \n, \r\n and \r into one "data: <line>\n" per line
 * (empty data gives one empty data line), then "\n".
 */
void	sse_event(struct evbuffer *out, uint64_t seq, const char *type,
	    const char *data, size_t len);

/*
 * The same event as a malloc'd NUL-terminated string, its length in
 * *outlen, for encoding once and sharing.  NULL when out of memory.
 */
char	*sse_event_string(uint64_t seq, const char *type, const char *data,
	    size_t len, size_t *outlen);

/* ": <text>\n\n", a comment used as heartbeat; a CR/LF in text starts a new comment line. */
void	sse_comment(struct evbuffer *out, const char *text);

/*
 * The 200 response head of an event stream (text/event-stream, no-cache,
 * keep-alive, X-Accel-Buffering: no, no Content-Length).
 */
void	sse_head(struct evbuffer *out);

#endif
