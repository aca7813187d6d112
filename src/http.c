#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>

#include "parley/http.h"

enum {
	ST_REQLINE,
	ST_HEADERS,
	ST_BODY,
	ST_CHUNK_LINE,		/* chunk-size [ chunk-ext ] CRLF */
	ST_CHUNK_DATA,
	ST_CHUNK_END,		/* the CRLF after chunk-data */
	ST_TRAILER,		/* trailer field lines, then CRLF */
	ST_DONE,
	ST_ERROR
};

void
http_limits_default(struct http_limits *lim)
{
	lim->max_request_line = HTTP_DEFAULT_MAX_REQUEST_LINE;
	lim->max_header_bytes = HTTP_DEFAULT_MAX_HEADER_BYTES;
	lim->max_headers = HTTP_DEFAULT_MAX_HEADERS;
	lim->max_body = HTTP_DEFAULT_MAX_BODY;
}

void
http_parser_init(struct http_parser *p, const struct http_limits *lim)
{
	memset(p, 0, sizeof(*p));
	if (lim != NULL)
		p->lim = *lim;
	else
		http_limits_default(&p->lim);
	p->state = ST_REQLINE;
}

void
http_parser_free(struct http_parser *p)
{
	unsigned	 i;

	free(p->line);
	free(p->req.target);
	free(p->req.path);
	free(p->req.query);
	for (i = 0; i < p->req.nheaders; i++)
		free(p->req.headers[i].name);	/* value shares it */
	free(p->req.headers);
	free(p->req.body);
	memset(&p->req, 0, sizeof(p->req));
	p->line = NULL;
	p->linelen = p->linecap = 0;
	p->hdrcap = 0;
}

static enum http_result
parse_fail(struct http_parser *p, int status, const char *why)
{
	p->state = ST_ERROR;
	p->status = status;
	p->error = why;
	return HTTP_ERROR;
}

/* Appends c to the line buffer, grown up to max bytes (limits checked). */
static enum http_result
line_add(struct http_parser *p, unsigned char c, size_t max)
{
	size_t		 ncap;
	char		*nl;

	if (p->linelen == p->linecap) {
		ncap = p->linecap ? p->linecap * 2 : 256;
		if (ncap > max)
			ncap = max;
		if (ncap <= p->linelen)		/* limits checked before */
			return parse_fail(p, 431, "header section too large");
		if ((nl = realloc(p->line, ncap)) == NULL)
			return parse_fail(p, 500, "out of memory");
		p->line = nl;
		p->linecap = ncap;
	}
	p->line[p->linelen++] = (char)c;
	return HTTP_NEED_MORE;
}

static int
is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Takes the raw path of len bytes; returns a malloc'd decoded copy or sets the error. */
static char *
decode_path(struct http_parser *p, const char *s, size_t len)
{
	char		*d, *seg;
	size_t		 i, n = 0;
	int		 hi, lo;
	unsigned char	 c;

	if ((d = malloc(len + 1)) == NULL) {
		parse_fail(p, 500, "out of memory");
		return NULL;
	}
	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		if (c == '%') {
			if (len - i < 3)
				goto badpct;
			if ((hi = hexval((unsigned char)s[i + 1])) < 0 ||
			    (lo = hexval((unsigned char)s[i + 2])) < 0)
				goto badpct;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
			if (c == 0) {
				free(d);
				parse_fail(p, 400, "NUL (%00) in path");
				return NULL;
			}
			if (c < 0x20 || c == 0x7f) {
				free(d);
				parse_fail(p, 400, "control character in path");
				return NULL;
			}
		}
		d[n++] = (char)c;
	}
	d[n] = '\0';

	/* Dot-dot segments would let a path escape its prefix once decoded. */
	for (seg = d; seg != NULL; seg = strchr(seg, '/')) {
		seg++;
		if (seg[0] == '.' && seg[1] == '.' &&
		    (seg[2] == '/' || seg[2] == '\0')) {
			free(d);
			parse_fail(p, 400, "'..' segment in path");
			return NULL;
		}
	}
	return d;

 badpct:
	free(d);
	parse_fail(p, 400, "invalid percent-encoding in path");
	return NULL;
}

static const char *const methods[] = {
	"GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS", "PATCH"
};

static enum http_result
request_line(struct http_parser *p)
{
	struct http_request *r = &p->req;
	const char	*l = p->line, *sp1, *sp2, *tgt, *ver, *q;
	size_t		 len = p->linelen, mlen, tlen, vlen, i;
	int		 known = 0;

	if ((sp1 = memchr(l, ' ', len)) == NULL)
		return parse_fail(p, 400, "malformed request line");
	mlen = sp1 - l;
	tgt = sp1 + 1;
	if ((sp2 = memchr(tgt, ' ', len - mlen - 1)) == NULL)
		return parse_fail(p, 400, "malformed request line");
	tlen = sp2 - tgt;
	ver = sp2 + 1;
	vlen = len - (ver - l);
	if (mlen == 0 || tlen == 0 || memchr(ver, ' ', vlen) != NULL)
		return parse_fail(p, 400, "malformed request line");

	for (i = 0; i < mlen; i++)
		if (!is_tchar((unsigned char)l[i]))
			return parse_fail(p, 400, "invalid character in method");
	for (i = 0; i < tlen; i++)
		if ((unsigned char)tgt[i] <= 0x20 ||
		    (unsigned char)tgt[i] >= 0x7f || tgt[i] == '#')
			return parse_fail(p, 400,
			    "invalid character in request-target");
	if (vlen != 8 || memcmp(ver, "HTTP/", 5) != 0 ||
	    ver[5] < '0' || ver[5] > '9' || ver[6] != '.' ||
	    ver[7] < '0' || ver[7] > '9')
		return parse_fail(p, 400, "malformed HTTP version");
	if (ver[5] != '1' || (ver[7] != '0' && ver[7] != '1'))
		return parse_fail(p, 505, "unsupported HTTP version");
	r->minor = ver[7] - '0';

	if (mlen < sizeof(r->method)) {
		for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
			if (strlen(methods[i]) == mlen &&
			    memcmp(methods[i], l, mlen) == 0)
				known = 1;
	}
	if (!known)
		return parse_fail(p, 501, "unsupported method");
	memcpy(r->method, l, mlen);
	r->method[mlen] = '\0';

	if (tgt[0] != '/')
		return parse_fail(p, 400, "request-target must be origin-form");
	if ((r->target = strndup(tgt, tlen)) == NULL)
		return parse_fail(p, 500, "out of memory");
	if ((q = memchr(tgt, '?', tlen)) != NULL) {
		if ((r->query = strndup(q + 1, tlen - (q - tgt) - 1)) == NULL)
			return parse_fail(p, 500, "out of memory");
	} else
		q = tgt + tlen;
	if ((r->path = decode_path(p, tgt, q - tgt)) == NULL)
		return HTTP_ERROR;
	return HTTP_NEED_MORE;
}

/*
 * Checks a field line l of len bytes (a header or a trailer): on success
 * *nlen is the name's length and [*v, *e) the value without its OWS;
 * else returns what is wrong.
 */
static const char *
field_check(const char *l, size_t len, size_t *nlen, const char **v,
    const char **e)
{
	const char	*colon;
	size_t		 i;
	unsigned char	 c;

	if (l[0] == ' ' || l[0] == '\t')
		return "obsolete line folding in header";
	if ((colon = memchr(l, ':', len)) == NULL)
		return "header line without colon";
	*nlen = colon - l;
	if (*nlen == 0)
		return "empty header name";
	for (i = 0; i < *nlen; i++) {
		c = (unsigned char)l[i];
		if (c == ' ' || c == '\t')
			return "whitespace in header name or before colon";
		if (!is_tchar(c))
			return "invalid character in header name";
	}
	*v = colon + 1;
	*e = l + len;
	while (*v < *e && (**v == ' ' || **v == '\t'))
		(*v)++;
	while (*e > *v && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
		(*e)--;
	for (i = 0; i < (size_t)(*e - *v); i++) {
		c = (unsigned char)(*v)[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "control character in header value";
	}
	return NULL;
}

static enum http_result
header_line(struct http_parser *p)
{
	struct http_request *r = &p->req;
	struct http_header *h;
	const char	*v, *e, *why;
	size_t		 nlen;
	unsigned	 ncap;
	char		*mem;

	if ((why = field_check(p->line, p->linelen, &nlen, &v, &e)) != NULL)
		return parse_fail(p, 400, why);
	if (r->nheaders == p->hdrcap) {
		ncap = p->hdrcap ? p->hdrcap * 2 : 8;
		if (ncap > p->lim.max_headers)
			ncap = p->lim.max_headers;
		if (ncap <= r->nheaders)	/* cannot happen: counted earlier */
			return parse_fail(p, 431, "too many headers");
		h = reallocarray(r->headers, ncap, sizeof(*h));
		if (h == NULL)
			return parse_fail(p, 500, "out of memory");
		r->headers = h;
		p->hdrcap = ncap;
	}
	if ((mem = malloc(nlen + 1 + (e - v) + 1)) == NULL)
		return parse_fail(p, 500, "out of memory");
	h = &r->headers[r->nheaders++];
	h->name = mem;
	memcpy(h->name, p->line, nlen);
	h->name[nlen] = '\0';
	h->value = mem + nlen + 1;
	memcpy(h->value, v, e - v);
	h->value[e - v] = '\0';
	return HTTP_NEED_MORE;
}

/*
 * Checks a Content-Length value, a comma list of 1*DIGIT; adds each element
 * to *n and stores it (saturated) in *cl, setting *conflict when elements
 * differ.  Returns -1 when an element is not a number.
 */
static int
content_length(const char *v, size_t *cl, unsigned *n, int *conflict)
{
	size_t		 val;
	int		 digits;

	for (;;) {
		while (*v == ' ' || *v == '\t')
			v++;
		val = 0;
		digits = 0;
		while (*v >= '0' && *v <= '9') {
			if (val > (SIZE_MAX - 9) / 10)
				val = SIZE_MAX;
			else
				val = val * 10 + (*v - '0');
			v++;
			digits++;
		}
		if (digits == 0)
			return -1;
		while (*v == ' ' || *v == '\t')
			v++;
		if (*n > 0 && val != *cl)
			*conflict = 1;
		(*n)++;
		*cl = val;
		if (*v == '\0')
			return 0;
		if (*v++ != ',')
			return -1;
	}
}

/*
 * Checks the Transfer-Encoding field lines of the request together, as one
 * list (RFC 9112 §6.1, §6.3).  Only "chunked", applied once and last, is a
 * body we can read; a list not ending in it cannot be framed (400), another
 * coding before it is one we do not implement (501).
 */
static enum http_result
transfer_encoding(struct http_parser *p)
{
	struct http_request *r = &p->req;
	const char	*v, *s, *e, *comma;
	unsigned	 i, n = 0, nchunked = 0;
	int		 last_chunked = 0;

	for (i = 0; i < r->nheaders; i++) {
		if (strcasecmp(r->headers[i].name, "Transfer-Encoding") != 0)
			continue;
		for (v = r->headers[i].value; v != NULL;
		    v = comma ? comma + 1 : NULL) {
			comma = strchr(v, ',');
			e = comma ? comma : v + strlen(v);
			for (s = v; s < e && (*s == ' ' || *s == '\t'); s++)
				;
			while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if (s == e)	/* empty list elements do not count */
				continue;
			n++;
			last_chunked = e - s == 7 &&
			    strncasecmp(s, "chunked", 7) == 0;
			nchunked += last_chunked;
		}
	}
	if (n == 0 || !last_chunked)
		return parse_fail(p, 400, "Transfer-Encoding must end in "
		    "chunked (or send Content-Length instead)");
	if (nchunked > 1)
		return parse_fail(p, 400, "Transfer-Encoding applies chunked "
		    "more than once");
	if (n > 1)
		return parse_fail(p, 501, "transfer coding not supported: "
		    "only chunked is (send the body uncompressed)");
	return HTTP_NEED_MORE;
}

static enum http_result
end_of_head(struct http_parser *p)
{
	struct http_request *r = &p->req;
	struct http_header *h;
	unsigned	 i, nhost = 0, ncl = 0;
	size_t		 cl = 0;
	int		 te = 0, conflict = 0;

	for (i = 0; i < r->nheaders; i++) {
		h = &r->headers[i];
		if (strcasecmp(h->name, "Host") == 0)
			nhost++;
		else if (strcasecmp(h->name, "Transfer-Encoding") == 0)
			te = 1;
		else if (strcasecmp(h->name, "Content-Length") == 0 &&
		    content_length(h->value, &cl, &ncl, &conflict) == -1)
			return parse_fail(p, 400, "non-numeric Content-Length");
	}
	if (nhost == 0 && r->minor == 1)
		return parse_fail(p, 400, "missing Host header");
	if (nhost > 1)
		return parse_fail(p, 400, "duplicate Host header");
	/* Both framings in one message is how requests are smuggled past a
	 * proxy that reads the other one: RFC 9112 §6.3 says error and close. */
	if (te && ncl > 0)
		return parse_fail(p, 400, "both Content-Length and "
		    "Transfer-Encoding: send one");
	if (te && r->minor == 0)
		return parse_fail(p, 400, "Transfer-Encoding in an HTTP/1.0 "
		    "request");
	if (te && transfer_encoding(p) == HTTP_ERROR)
		return HTTP_ERROR;
	if (conflict)
		return parse_fail(p, 400, "conflicting Content-Length values");
	if (ncl > 1)
		return parse_fail(p, 400, "duplicate Content-Length");
	if (ncl == 1 && cl > p->lim.max_body)
		return parse_fail(p, 413, "Content-Length too large");
	if (!te && ncl == 0 && (strcmp(r->method, "POST") == 0 ||
	    strcmp(r->method, "PUT") == 0 || strcmp(r->method, "PATCH") == 0))
		return parse_fail(p, 411, "Content-Length required");

	/* The head is parsed; the line buffer is kept for chunk lines. */
	if (!te) {
		free(p->line);
		p->line = NULL;
		p->linelen = p->linecap = 0;
	}

	if ((r->body = malloc(cl + 1)) == NULL)
		return parse_fail(p, 500, "out of memory");
	r->body[0] = '\0';
	r->body_len = te ? 0 : cl;
	p->body_cap = cl + 1;
	p->body_got = 0;
	if (te) {
		p->chunked = 1;
		p->state = ST_CHUNK_LINE;
		return HTTP_NEED_MORE;
	}
	if (cl == 0) {
		p->state = ST_DONE;
		return HTTP_DONE;
	}
	p->state = ST_BODY;
	return HTTP_NEED_MORE;
}

/*
 * Parses a chunk-size line (RFC 9112 §7.1.1) in p->line: 1*HEXDIG then
 * chunk extensions, which are checked and ignored.
 */
static enum http_result
chunk_line(struct http_parser *p)
{
	const char	*l = p->line, *e = p->line + p->linelen;
	size_t		 size = 0;
	int		 h, digits = 0;

	for (; l < e && (h = hexval((unsigned char)*l)) >= 0; l++, digits++) {
		if (size > (p->lim.max_body + 1) / 16)
			return parse_fail(p, 413, "chunked body too large");
		size = size * 16 + (size_t)h;
	}
	if (digits == 0)
		return parse_fail(p, 400, "malformed chunk size");
	/* *( BWS ";" BWS ext-name [ BWS "=" BWS ( token / quoted-string ) ] ) */
	while (l < e) {
		while (l < e && (*l == ' ' || *l == '\t'))
			l++;
		if (l == e)
			break;
		if (*l++ != ';')
			return parse_fail(p, 400, "malformed chunk extension");
		while (l < e && (*l == ' ' || *l == '\t'))
			l++;
		if (l == e || !is_tchar((unsigned char)*l))
			return parse_fail(p, 400, "malformed chunk extension");
		while (l < e && is_tchar((unsigned char)*l))
			l++;
		while (l < e && (*l == ' ' || *l == '\t'))
			l++;
		if (l == e || *l != '=')
			continue;
		l++;
		while (l < e && (*l == ' ' || *l == '\t'))
			l++;
		if (l < e && *l == '"') {
			for (l++; l < e && *l != '"'; l++) {
				if (*l == '\\' && ++l == e)
					break;
				if (((unsigned char)*l < 0x20 && *l != '\t') ||
				    *l == 0x7f)
					break;
			}
			if (l == e || *l++ != '"')
				return parse_fail(p, 400,
				    "malformed chunk extension");
		} else if (l == e || !is_tchar((unsigned char)*l))
			return parse_fail(p, 400, "malformed chunk extension");
		else
			while (l < e && is_tchar((unsigned char)*l))
				l++;
	}
	if (size > p->lim.max_body - p->req.body_len)
		return parse_fail(p, 413, "chunked body too large");
	p->chunk_left = size;
	if (size == 0) {
		p->state = ST_TRAILER;
		p->hdr_bytes = 0;
		p->ntrailers = 0;
	} else
		p->state = ST_CHUNK_DATA;
	return HTTP_NEED_MORE;
}

/* A trailer field line, or the empty line ending the message. */
static enum http_result
trailer_line(struct http_parser *p)
{
	const char	*v, *e, *why;
	size_t		 nlen;

	if (p->linelen == 0) {
		p->req.body[p->req.body_len] = '\0';
		p->state = ST_DONE;
		return HTTP_DONE;
	}
	/* Checked, then dropped: a field the head did not carry must not
	 * gain a say (an Authorization in a trailer, say). */
	if ((why = field_check(p->line, p->linelen, &nlen, &v, &e)) != NULL)
		return parse_fail(p, 400, why);
	if (++p->ntrailers > p->lim.max_headers)
		return parse_fail(p, 431, "too many trailer fields");
	return HTTP_NEED_MORE;
}

/*
 * One byte of chunked framing (not chunk-data): lines end in CRLF only,
 * since a lenient reading of bare LF or CR inside a body is where a proxy
 * and its server can disagree on where the body ends.
 */
static enum http_result
chunk_byte(struct http_parser *p, unsigned char c)
{
	enum http_result rv;
	size_t		 max;

	/* Framing costs at most as many bytes as the body bound allows,
	 * plus the trailer section. */
	if (++p->frame_bytes > p->lim.max_body + 2 * HTTP_CHUNK_LINE_MAX)
		return parse_fail(p, 413, "chunked framing too large: send "
		    "fewer, larger chunks");
	if (p->state == ST_TRAILER && ++p->hdr_bytes > p->lim.max_header_bytes)
		return parse_fail(p, 431, "trailer section too large");
	if (p->cr) {
		p->cr = 0;
		if (c != '\n')
			return parse_fail(p, 400, "bare CR in chunked body");
		if (p->state == ST_CHUNK_END) {
			p->state = ST_CHUNK_LINE;
			return HTTP_NEED_MORE;
		}
		if (p->state == ST_CHUNK_LINE)
			rv = chunk_line(p);
		else
			rv = trailer_line(p);
		p->linelen = 0;
		return rv;
	}
	if (c == '\r') {
		p->cr = 1;
		return HTTP_NEED_MORE;
	}
	if (c == '\n')
		return parse_fail(p, 400, "bare LF in chunked body (end lines "
		    "with CRLF)");
	if (p->state == ST_CHUNK_END)
		return parse_fail(p, 400, "chunk data longer than its size");
	max = p->state == ST_TRAILER ? p->lim.max_header_bytes :
	    HTTP_CHUNK_LINE_MAX;
	if (p->linelen >= max)
		return parse_fail(p, p->state == ST_TRAILER ? 431 : 400,
		    p->state == ST_TRAILER ? "trailer field too large" :
		    "chunk-size line too long");
	return line_add(p, c, max);
}

/* Appends up to len bytes of chunk-data; returns how many it took. */
static size_t
chunk_data(struct http_parser *p, const char *buf, size_t len)
{
	struct http_request *r = &p->req;
	size_t		 n = p->chunk_left < len ? p->chunk_left : len;
	size_t		 need = r->body_len + n + 1, ncap;
	char		*nb;

	if (need > p->body_cap) {
		ncap = p->body_cap * 2 > need ? p->body_cap * 2 : need;
		if (ncap > p->lim.max_body + 1)
			ncap = p->lim.max_body + 1;
		if ((nb = realloc(r->body, ncap)) == NULL) {
			parse_fail(p, 500, "out of memory");
			return 0;
		}
		r->body = nb;
		p->body_cap = ncap;
	}
	memcpy(r->body + r->body_len, buf, n);
	r->body_len += n;
	p->chunk_left -= n;
	if (p->chunk_left == 0)
		p->state = ST_CHUNK_END;
	return n;
}

static enum http_result
line_end(struct http_parser *p)
{
	enum http_result rv;
	size_t		 n = p->linelen;

	p->linelen = 0;
	if (p->state == ST_REQLINE) {
		if (n == 0)		/* RFC 9112 §2.2: ignore leading empties */
			return HTTP_NEED_MORE;
		p->linelen = n;
		rv = request_line(p);
		p->linelen = 0;
		if (rv == HTTP_NEED_MORE) {
			p->state = ST_HEADERS;
			p->hdr_bytes = 0;
		}
		return rv;
	}
	if (n == 0)
		return end_of_head(p);
	p->linelen = n;
	rv = header_line(p);
	p->linelen = 0;
	return rv;
}

/* Counts one head byte against the limit of the current state. */
static enum http_result
count(struct http_parser *p, int content)
{
	if (p->state == ST_REQLINE) {
		if (content) {
			if (p->linelen + 1 > p->lim.max_request_line)
				return parse_fail(p, 414, "request line too long");
		} else if (p->linelen == 0 &&
		    ++p->hdr_bytes > p->lim.max_request_line)
			return parse_fail(p, 400, "too many empty lines before "
			    "request line");
		return HTTP_NEED_MORE;
	}
	if (!content && p->linelen == 0)
		return HTTP_NEED_MORE;	/* the blank line ending the head */
	if (content && p->linelen == 0 &&
	    p->req.nheaders >= p->lim.max_headers)
		return parse_fail(p, 431, "too many headers");
	if (++p->hdr_bytes > p->lim.max_header_bytes)
		return parse_fail(p, 431, "header section too large");
	return HTTP_NEED_MORE;
}

static enum http_result
head_byte(struct http_parser *p, unsigned char c)
{
	size_t		 max;

	p->req.head_len++;
	if (p->cr) {
		p->cr = 0;
		if (c != '\n')
			return parse_fail(p, 400, "bare CR in request head");
		if (count(p, 0) == HTTP_ERROR)
			return HTTP_ERROR;
		return line_end(p);
	}
	if (c == '\r' || c == '\n') {
		if (count(p, 0) == HTTP_ERROR)
			return HTTP_ERROR;
		if (c == '\r') {
			p->cr = 1;
			return HTTP_NEED_MORE;
		}
		return line_end(p);
	}
	if (count(p, 1) == HTTP_ERROR)
		return HTTP_ERROR;
	max = p->lim.max_request_line > p->lim.max_header_bytes ?
	    p->lim.max_request_line : p->lim.max_header_bytes;
	return line_add(p, c, max);
}

enum http_result
http_parse(struct http_parser *p, const char *buf, size_t len, size_t *used)
{
	struct http_request *r = &p->req;
	enum http_result rv = HTTP_NEED_MORE;
	size_t		 i = 0, n;

	if (p->state == ST_DONE || p->state == ST_ERROR) {
		*used = 0;
		return p->state == ST_DONE ? HTTP_DONE : HTTP_ERROR;
	}
	while (i < len) {
		if (p->state == ST_BODY) {
			n = r->body_len - p->body_got;
			if (n > len - i)
				n = len - i;
			memcpy(r->body + p->body_got, buf + i, n);
			p->body_got += n;
			i += n;
			if (p->body_got == r->body_len) {
				r->body[r->body_len] = '\0';
				p->state = ST_DONE;
				rv = HTTP_DONE;
			}
			break;
		}
		if (p->state == ST_CHUNK_DATA) {
			n = chunk_data(p, buf + i, len - i);
			i += n;
			if (p->state == ST_ERROR) {
				rv = HTTP_ERROR;
				break;
			}
			continue;
		}
		if (p->chunked)
			rv = chunk_byte(p, (unsigned char)buf[i++]);
		else
			rv = head_byte(p, (unsigned char)buf[i++]);
		if (rv != HTTP_NEED_MORE)
			break;
	}
	r->total_len += i;	/* every byte of the message */
	*used = i;
	return rv;
}

int
http_head_done(const struct http_parser *p)
{
	return p->state != ST_REQLINE && p->state != ST_HEADERS &&
	    p->state != ST_ERROR;
}

int
http_wants_continue(const struct http_parser *p)
{
	const char	*v;

	if (!http_head_done(p) || p->state == ST_DONE || p->req.minor < 1)
		return 0;
	if (p->state == ST_BODY ? p->body_got != 0 : p->req.body_len != 0 ||
	    p->frame_bytes != 0)
		return 0;
	return (v = http_header(&p->req, "Expect")) != NULL &&
	    strcasecmp(v, "100-continue") == 0;
}

const char *
http_header(const struct http_request *r, const char *name)
{
	unsigned	 i;

	for (i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

int
http_has_token(const char *value, const char *token)
{
	const char	*s, *e, *next;
	size_t		 tlen;

	if (value == NULL || token == NULL)
		return 0;
	if ((tlen = strlen(token)) == 0)
		return 0;
	for (s = value; s != NULL; s = next) {
		if ((e = strchr(s, ',')) != NULL)
			next = e + 1;
		else {
			e = s + strlen(s);
			next = NULL;
		}
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if ((size_t)(e - s) == tlen && strncasecmp(s, token, tlen) == 0)
			return 1;
	}
	return 0;
}

/*
 * Percent-decodes s[0..len) ('+' is space) into out; returns the decoded
 * length, or -1 when malformed, holding a NUL, or not fitting with its NUL.
 */
static ssize_t
query_decode(const char *s, size_t len, char *out, size_t outlen)
{
	size_t		 i, n = 0;
	int		 hi, lo;
	unsigned char	 c;

	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		if (c == '+')
			c = ' ';
		else if (c == '%') {
			if (len - i < 3 ||
			    (hi = hexval((unsigned char)s[i + 1])) < 0 ||
			    (lo = hexval((unsigned char)s[i + 2])) < 0)
				return -1;
			c = (unsigned char)(hi << 4 | lo);
			if (c == 0)
				return -1;
			i += 2;
		}
		if (n + 1 >= outlen)
			return -1;
		out[n++] = (char)c;
	}
	if (n >= outlen)
		return -1;
	out[n] = '\0';
	return n;
}

int
http_query_param(const char *query, const char *name, char *out, size_t outlen)
{
	char		 key[256];
	const char	*s, *amp, *eq;
	size_t		 plen;

	if (outlen > 0)
		out[0] = '\0';
	if (query == NULL || name == NULL)
		return -1;
	for (s = query; ; s = amp + 1) {
		if ((amp = strchr(s, '&')) == NULL)
			amp = s + strlen(s);
		plen = amp - s;
		if ((eq = memchr(s, '=', plen)) == NULL)
			eq = amp;
		/* A key we cannot decode cannot be the one asked for. */
		if (query_decode(s, eq - s, key, sizeof(key)) >= 0 &&
		    strcmp(key, name) == 0) {
			if (outlen == 0)
				return -2;
			if (eq == amp)
				return 0;
			if (query_decode(eq + 1, amp - eq - 1, out, outlen) < 0) {
				out[0] = '\0';
				return -2;
			}
			return 0;
		}
		if (*amp == '\0')
			return -1;
	}
}

const char *
http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 421: return "Misdirected Request";
	case 422: return "Unprocessable Content";
	case 426: return "Upgrade Required";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

void
http_respond(struct evbuffer *out, int status, const char *content_type,
    const char *body, size_t len, const char *extra_headers)
{
	int		 nobody;

	if (status < 100 || status > 999)
		status = 500;
	nobody = status < 200 || status == 204 || status == 304;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status,
	    http_reason(status));
	if (content_type != NULL && !nobody)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", content_type);
	if (!nobody)
		evbuffer_add_printf(out, "Content-Length: %zu\r\n",
		    body != NULL ? len : 0);
	evbuffer_add_printf(out, "Connection: close\r\n");
	if (extra_headers != NULL)
		evbuffer_add(out, extra_headers, strlen(extra_headers));
	evbuffer_add(out, "\r\n", 2);
	if (!nobody && body != NULL && len > 0)
		evbuffer_add(out, body, len);
}

void
http_respond_error(struct evbuffer *out, int status, const char *code,
    const char *message)
{
	http_respond_error_h(out, status, code, message, NULL);
}

void
http_respond_error_h(struct evbuffer *out, int status, const char *code,
    const char *message, const char *extra_headers)
{
	static const char fallback[] =
	    "{\"error\":{\"code\":\"INTERNAL\",\"message\":\"out of memory\"}}";
	cJSON		*root, *err;
	char		*s = NULL;

	if ((root = cJSON_CreateObject()) != NULL &&
	    (err = cJSON_AddObjectToObject(root, "error")) != NULL &&
	    cJSON_AddStringToObject(err, "code", code ? code : "") != NULL &&
	    cJSON_AddStringToObject(err, "message",
	    message ? message : "") != NULL)
		s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (s == NULL)
		http_respond(out, status, "application/json", fallback,
		    sizeof(fallback) - 1, extra_headers);
	else {
		http_respond(out, status, "application/json", s, strlen(s),
		    extra_headers);
		cJSON_free(s);
	}
}

int
http_query_u64(const struct http_request *r, const char *name, uint64_t *out)
{
	char v[32], *end;
	int rc;

	if (r->query == NULL ||
	    (rc = http_query_param(r->query, name, v, sizeof(v))) == -1)
		return 0;
	if (rc != 0 || v[0] < '0' || v[0] > '9')
		return -1;
	errno = 0;
	*out = strtoull(v, &end, 10);
	return *end == '\0' && errno == 0 ? 1 : -1;
}
