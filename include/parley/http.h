/*
 * A strict, bounded, incremental HTTP/1.1 request parser (RFC 9112) and
 * helpers to write simple responses.  Only requests are parsed: we are the
 * server.  The parser buffers at most the limits it was given.
 */
#ifndef PARLEY_HTTP_H
#define PARLEY_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/*
 * max_request_line: bytes of the request line, line ending excluded (414).
 * max_header_bytes: bytes of the header field lines, their line endings
 *   included; neither the request line nor the blank line ending the head
 *   count (431).
 * max_headers: number of header field lines (431).
 * max_body: Content-Length, or the decoded size of a chunked body (413).
 *   The framing of a chunked body (chunk-size lines with their extensions,
 *   CRLFs) may add at most max_body + 2 * HTTP_CHUNK_LINE_MAX bytes (413);
 *   its trailer section is bound like the header section (431) and is
 *   checked, then dropped.
 */
struct http_limits {
	size_t		 max_request_line;
	size_t		 max_header_bytes;
	unsigned	 max_headers;
	size_t		 max_body;
};

#define HTTP_DEFAULT_MAX_REQUEST_LINE	8192
#define HTTP_DEFAULT_MAX_HEADER_BYTES	16384
#define HTTP_DEFAULT_MAX_HEADERS	64
#define HTTP_DEFAULT_MAX_BODY		1048576
#define HTTP_CHUNK_LINE_MAX		1024	/* chunk-size line, CRLF excluded */

void	http_limits_default(struct http_limits *);

struct http_header {
	char		*name;		/* as received; owns the allocation */
	char		*value;		/* surrounding OWS trimmed; same allocation */
};

struct http_request {
	char		 method[16];	/* GET POST DELETE PUT HEAD OPTIONS PATCH */
	char		*target;	/* raw request-target, origin-form */
	char		*path;		/* up to '?', percent-decoded */
	char		*query;		/* raw, after '?', or NULL */
	int		 minor;		/* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */
	struct http_header *headers;
	unsigned	 nheaders;
	char		*body;		/* NUL-terminated copy, chunked bodies
					   decoded; "" when none */
	size_t		 body_len;
	size_t		 head_len;	/* request line + headers + final CRLF */
	size_t		 total_len;	/* bytes of the whole message as sent */
};

struct http_parser {
	struct http_limits lim;
	struct http_request req;
	int		 status;	/* HTTP status to answer on HTTP_ERROR */
	const char	*error;		/* static human reason on HTTP_ERROR */

	/* internal */
	int		 state;
	int		 cr;		/* last byte was a CR ending a line */
	char		*line;		/* the line being read */
	size_t		 linelen;
	size_t		 linecap;
	size_t		 hdr_bytes;
	unsigned	 hdrcap;
	size_t		 body_got;
	size_t		 body_cap;	/* allocated for body */
	int		 chunked;	/* the body is chunked */
	size_t		 chunk_left;	/* of the current chunk-data */
	size_t		 frame_bytes;	/* chunked framing read */
	unsigned	 ntrailers;
};

void	http_parser_init(struct http_parser *, const struct http_limits *);
/* Frees everything the request owns; the parser may then be re-inited. */
void	http_parser_free(struct http_parser *);

enum http_result { HTTP_NEED_MORE, HTTP_DONE, HTTP_ERROR };

/*
 * Feeds len bytes; *used is set to the bytes consumed.  HTTP_DONE once the
 * head and the body (Content-Length bytes, or a chunked body to the end of
 * its trailer section) are in: bytes after the body are
 * not consumed (they belong to whatever follows, e.g. WebSocket frames).
 * Calls after HTTP_DONE or HTTP_ERROR consume nothing and repeat the result.
 * On HTTP_ERROR p->status is 400, 411, 413, 414, 431, 500 (no memory), 501
 * or 505, and p->error a static string naming what was wrong.
 * Line endings in the head may be CRLF or bare LF; a bare CR is an error.
 * Chunked framing takes CRLF only.  Content-Length with Transfer-Encoding
 * is a 400 (request smuggling); a Transfer-Encoding not ending in chunked
 * a 400, any coding other than chunked a 501 (RFC 9112 §6.1, §6.3).
 */
enum http_result http_parse(struct http_parser *, const char *buf, size_t len,
	    size_t *used);

/*
 * 1 once the head is parsed and the body is still coming with
 * "Expect: 100-continue": the client waits for a 100 before sending it.
 */
int	http_wants_continue(const struct http_parser *);

/* 1 once the whole head is parsed (the body may still be coming). */
int	http_head_done(const struct http_parser *);

/* Case-insensitive, first match, or NULL. */
const char *http_header(const struct http_request *, const char *name);

/* 1 if the comma-separated value has element token (case-insensitive). */
int	http_has_token(const char *value, const char *token);

/*
 * Finds parameter name in a raw query string (may be NULL) and
 * percent-decodes its value ('+' is space) into out.  Returns 0 found,
 * -1 absent, -2 too long for out or malformed (bad %xx, %00); out is ""
 * unless 0 is returned.
 */
/* Query parameter name as a whole number: 1 with *out set, 0 when it is
 * absent, -1 when it is not one. */
int	http_query_u64(const struct http_request *, const char *name,
	    uint64_t *out);
int	http_query_param(const char *query, const char *name, char *out,
	    size_t outlen);

/* "OK", "Bad Request", ...; "Unknown" for statuses we do not use. */
const char *http_reason(int status);

/*
 * Appends a complete response with Content-Length and "Connection: close".
 * content_type may be NULL; extra_headers is NULL or CRLF-terminated lines.
 * 1xx and 204 get neither Content-Length nor body.
 */
void	http_respond(struct evbuffer *out, int status, const char *content_type,
	    const char *body, size_t len, const char *extra_headers);

/* Responds {"error":{"code":CODE,"message":MSG}} as application/json. */
void	http_respond_error(struct evbuffer *out, int status, const char *code,
	    const char *message);
/* The same with extra_headers (NULL or CRLF-terminated lines). */
void	http_respond_error_h(struct evbuffer *out, int status, const char *code,
	    const char *message, const char *extra_headers);

#endif
