#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "parley/sse.h"

/* Appends s[0..len) as lines prefixed by prefix, each ending in "\n". */
static void
sse_lines(struct evbuffer *out, const char *prefix, const char *s, size_t len)
{
	size_t		 i, start = 0, plen = strlen(prefix);

	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '\r' && s[i] != '\n')
			continue;
		evbuffer_add(out, prefix, plen);
		if (i > start)
			evbuffer_add(out, s + start, i - start);
		evbuffer_add(out, "\n", 1);
		if (i < len && s[i] == '\r' && i + 1 < len && s[i + 1] == '\n')
			i++;
		start = i + 1;
	}
}

void
sse_event(struct evbuffer *out, uint64_t seq, const char *type,
    const char *data, size_t len)
{
	if (seq > 0)
		evbuffer_add_printf(out, "id: %" PRIu64 "\n", seq);
	if (type != NULL) {
		evbuffer_add(out, "event: ", 7);
		evbuffer_add(out, type, strcspn(type, "\r\n"));
		evbuffer_add(out, "\n", 1);
	}
	if (data == NULL)
		len = 0;
	sse_lines(out, "data: ", data, len);
	evbuffer_add(out, "\n", 1);
}

char *
sse_event_string(uint64_t seq, const char *type, const char *data,
    size_t len, size_t *outlen)
{
	struct evbuffer	*b;
	char		*s = NULL;
	size_t		 n;

	if ((b = evbuffer_new()) == NULL)
		return NULL;
	sse_event(b, seq, type, data, len);
	n = evbuffer_get_length(b);
	if ((s = malloc(n + 1)) != NULL) {
		evbuffer_remove(b, s, n);
		s[n] = '\0';
		if (outlen != NULL)
			*outlen = n;
	}
	evbuffer_free(b);
	return s;
}

void
sse_comment(struct evbuffer *out, const char *text)
{
	if (text == NULL)
		text = "";
	sse_lines(out, ": ", text, strlen(text));
	evbuffer_add(out, "\n", 1);
}

void
sse_head(struct evbuffer *out)
{
	static const char head[] =
	    "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/event-stream\r\n"
	    "Cache-Control: no-cache\r\n"
	    "Connection: keep-alive\r\n"
	    "X-Accel-Buffering: no\r\n"
	    "\r\n";

	evbuffer_add(out, head, sizeof(head) - 1);
}
