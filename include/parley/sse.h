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

/*
 * An incremental text/event-stream parser, for reading a server's stream
 * (WHATWG rules: lines end in CRLF, LF or CR, a leading BOM is skipped,
 * ":" starts a comment, "data" lines join with LF, a blank line dispatches,
 * an event without data is dropped, a partial event at the end is lost).
 * cb gets the event type ("message" when none was given) and the data,
 * NUL-terminated with the final LF removed; it returns 0 to go on, or
 * non-zero to stop the parser, which then ignores the rest of its input.
 */
struct sse_parser;
typedef int	(*sse_event_cb)(void *arg, const char *type, const char *data,
		    size_t len);

/* max bounds one line and one event's data (bytes). NULL when out of memory. */
struct sse_parser	*sse_parser_new(size_t max, sse_event_cb cb, void *arg);
/*
 * Parses len more bytes. Returns 0, the non-zero value cb stopped with, or
 * -1 when a line or an event's data passed max; both stick.
 */
int			 sse_parser_feed(struct sse_parser *, const void *buf,
			    size_t len);
/* The last "id" field seen (empty when none). */
const char		*sse_parser_last_id(const struct sse_parser *);
void			 sse_parser_free(struct sse_parser *);

#endif
