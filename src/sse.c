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

/* --- client-side parser --- */

#define SSE_TYPE_MAX	64
#define SSE_ID_MAX	256

struct sse_parser {
	sse_event_cb	 cb;
	void		*arg;
	size_t		 max;
	char		*line;		/* the line being read, not terminated */
	size_t		 llen;
	size_t		 lcap;
	char		*data;		/* joined data lines, each + LF */
	size_t		 dlen;
	size_t		 dcap;
	char		 type[SSE_TYPE_MAX];
	char		 id[SSE_ID_MAX];
	unsigned	 bom;		/* BOM bytes matched so far */
	int		 started;	/* past the BOM check */
	int		 cr;		/* last byte was CR: skip one LF */
	int		 status;	/* sticky result */
};

static const unsigned char sse_bom[3] = { 0xef, 0xbb, 0xbf };

struct sse_parser *
sse_parser_new(size_t max, sse_event_cb cb, void *arg)
{
	struct sse_parser *p;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	p->cb = cb;
	p->arg = arg;
	p->max = max ? max : 1;
	return p;
}

void
sse_parser_free(struct sse_parser *p)
{
	if (p == NULL)
		return;
	free(p->line);
	free(p->data);
	free(p);
}

const char *
sse_parser_last_id(const struct sse_parser *p)
{
	return p->id;
}

/* Grows *buf to hold need bytes plus a NUL, within max. -1 past max. */
static int
sse_reserve(char **buf, size_t *cap, size_t need, size_t max)
{
	size_t	 ncap;
	char	*nb;

	if (need > max)
		return -1;
	if (need + 1 <= *cap)
		return 0;
	ncap = *cap ? *cap : 256;
	while (ncap < need + 1)
		ncap = ncap > SIZE_MAX / 2 ? need + 1 : ncap * 2;
	if ((nb = realloc(*buf, ncap)) == NULL)
		return -1;
	*buf = nb;
	*cap = ncap;
	return 0;
}

static int
sse_line_add(struct sse_parser *p, const char *s, size_t n)
{
	if (n == 0)
		return 0;
	if (sse_reserve(&p->line, &p->lcap, p->llen + n, p->max) == -1)
		return -1;
	memcpy(p->line + p->llen, s, n);
	p->llen += n;
	return 0;
}

static int
sse_dispatch(struct sse_parser *p)
{
	int	 r = 0;

	if (p->dlen > 0) {
		p->dlen--;		/* the LF after the last data line */
		p->data[p->dlen] = '\0';
		r = p->cb(p->arg, p->type[0] ? p->type : "message", p->data,
		    p->dlen);
	}
	p->dlen = 0;
	p->type[0] = '\0';
	return r;
}

/* Handles one complete line; returns what sse_parser_feed should stick. */
static int
sse_line(struct sse_parser *p)
{
	const char	*f = p->line, *v, *colon;
	size_t		 flen, vlen;

	if (p->llen == 0)
		return sse_dispatch(p);
	if (f[0] == ':')
		return 0;
	if ((colon = memchr(f, ':', p->llen)) != NULL) {
		flen = (size_t)(colon - f);
		v = colon + 1;
		vlen = p->llen - flen - 1;
		if (vlen > 0 && *v == ' ') {
			v++;
			vlen--;
		}
	} else {
		flen = p->llen;
		v = "";
		vlen = 0;
	}
	if (flen == 5 && memcmp(f, "event", 5) == 0) {
		if (vlen >= sizeof(p->type))
			vlen = sizeof(p->type) - 1;
		memcpy(p->type, v, vlen);
		p->type[vlen] = '\0';
	} else if (flen == 4 && memcmp(f, "data", 4) == 0) {
		if (sse_reserve(&p->data, &p->dcap, p->dlen + vlen + 1,
		    p->max + 1) == -1)
			return -1;
		memcpy(p->data + p->dlen, v, vlen);
		p->dlen += vlen;
		p->data[p->dlen++] = '\n';
	} else if (flen == 2 && memcmp(f, "id", 2) == 0) {
		/* An id holding NUL is ignored, as the standard says. */
		if (memchr(v, '\0', vlen) == NULL && vlen < sizeof(p->id)) {
			memcpy(p->id, v, vlen);
			p->id[vlen] = '\0';
		}
	}
	/* "retry" and unknown fields change nothing for us. */
	return 0;
}

int
sse_parser_feed(struct sse_parser *p, const void *buf, size_t len)
{
	const char	*s = buf, *end = s + len, *q;
	int		 r;

	if (p->status != 0)
		return p->status;
	while (!p->started && s < end) {
		if ((unsigned char)*s == sse_bom[p->bom]) {
			s++;
			if (++p->bom == sizeof(sse_bom))
				p->started = 1;
			continue;
		}
		/* Not a BOM after all: what matched was text. */
		p->started = 1;
		if (sse_line_add(p, (const char *)sse_bom, p->bom) == -1)
			return (p->status = -1);
	}
	while (s < end) {
		if (p->cr) {
			p->cr = 0;
			if (*s == '\n') {
				s++;
				continue;
			}
		}
		for (q = s; q < end && *q != '\r' && *q != '\n'; q++)
			;
		if (sse_line_add(p, s, (size_t)(q - s)) == -1)
			return (p->status = -1);
		if (q == end)
			break;
		p->cr = *q == '\r';
		s = q + 1;
		r = sse_line(p);
		p->llen = 0;
		if (r != 0)
			return (p->status = r);
	}
	return 0;
}
