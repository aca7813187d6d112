/*
 * The MCP client's HTTP transfers, Streamable HTTP: every JSON-RPC message
 * is its own POST to the server's endpoint; a request is answered with
 * application/json or with a text/event-stream carrying the response and
 * maybe notifications and requests of the server's, a notification with
 * 202.  Here: starting a POST with its session headers, reading what comes
 * back (a JSON body, a batch or an event stream), picking our response out
 * of it by id, and queueing the server's requests for mcp_ask.c.
 *
 * Apart from mcp.c so that the wire plumbing stands alone: nothing here
 * calls the servers, calls or answers above it; a finished transfer goes
 * back up through curlev's done callback (xfer_done in mcp.c).
 *
 * libcurl forbids removing handles from inside its callbacks; the write
 * and header callbacks only store bytes, and everything that may free or
 * start transfers (and every user callback) runs after
 * curl_multi_socket_action has returned.
 */
#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/sse.h"
#include "parley/util.h"
#include "curlev.h"
#include "mcp_int.h"

#define MCP_MAX_BODY		(4 * 1024 * 1024)	/* one response but a
							   tools/call's */
#define MCP_MAX_ASKS		16		/* server requests queued or
						   being answered, per ctx */
#define MCP_MAX_RPC_ID		128		/* a server's string id */
#define MCP_CONNECT_TIMEOUT	10000		/* ms */

/* --- transfers --- */

void
xfer_free(struct xfer *x)
{
	if (x->easy != NULL) {
		curlev_remove(x->ctx->cv, x->easy);
		curl_easy_cleanup(x->easy);
	}
	curl_slist_free_all(x->hdrs);
	sse_parser_free(x->sse);
	cJSON_Delete(x->msg);
	free(x->resp);
	free(x->body);
	if (x->kind == X_ANSWER)
		x->ctx->nanswers--;
	TAILQ_REMOVE(&x->ctx->xfers, x, entry);
	free(x);
}

/* Keeps msg when it is the response to x's request. */
static int
take_response(struct xfer *x, cJSON *msg)
{
	cJSON	*id;

	if (!cJSON_IsObject(msg) || x->msg != NULL)
		return 0;
	id = cJSON_GetObjectItemCaseSensitive(msg, "id");
	if (!cJSON_IsNumber(id) || id->valuedouble != (double)x->id ||
	    (cJSON_GetObjectItemCaseSensitive(msg, "result") == NULL &&
	    cJSON_GetObjectItemCaseSensitive(msg, "error") == NULL))
		return 0;
	x->msg = msg;
	return 1;
}

/*
 * Keeps msg for mcp_after when it is a request of the server's (a method
 * and an id we can echo); 1 when it took msg.  Runs inside libcurl.
 */
static int
ask_queue(struct xfer *x, cJSON *msg)
{
	struct mcp_ctx	*ctx = x->ctx;
	const cJSON	*m, *id;
	struct ask	*a;

	m = cJSON_GetObjectItemCaseSensitive(msg, "method");
	id = cJSON_GetObjectItemCaseSensitive(msg, "id");
	if (!cJSON_IsString(m) || !(cJSON_IsNumber(id) ||
	    (cJSON_IsString(id) && strlen(id->valuestring) <= MCP_MAX_RPC_ID)))
		return 0;
	if (ctx == NULL || x->srv == NULL)
		return 0;
	/* Answers are not free: a server that floods us gets silence. */
	if (ctx->nasks + ctx->nanswers >= MCP_MAX_ASKS) {
		if (!x->dropped)
			log_warnx("mcp server %s: more than %d requests of "
			    "the server's at once, %.64s and any more in this "
			    "stream not answered", x->srv->cfg->name,
			    MCP_MAX_ASKS, m->valuestring);
		x->dropped = 1;
		return 0;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return 0;
	a->srv = x->srv;
	a->call = x->kind == X_CALL ? x->call : NULL;
	a->gen = x->gen;
	/* During initialize the session is only in this answer's header. */
	snprintf(a->sid, sizeof(a->sid), "%s", x->kind == X_INIT ? x->sid :
	    x->srv->sid != NULL ? x->srv->sid : "");
	a->msg = msg;
	TAILQ_INSERT_TAIL(&ctx->asks, a, entry);
	ctx->nasks++;
	return 1;
}

/* One SSE event: a JSON-RPC message; non-zero stops at our response. */
static int
sse_cb(void *arg, const char *type, const char *data, size_t len)
{
	struct xfer	*x = arg;
	cJSON		*msg;

	if (strcmp(type, "message") != 0 || len == 0)
		return 0;
	if ((msg = cJSON_ParseWithLength(data, len)) == NULL)
		return 0;
	if (take_response(x, msg))
		return 1;
	if (!ask_queue(x, msg))
		cJSON_Delete(msg);
	return 0;
}

/*
 * The body's bytes, JSON or an event stream, count against x->max, so a
 * stream of notifications without end is cut as a big result is.
 */
static size_t
write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct xfer	*x = arg;
	size_t		 len = size * n;

	if (len > x->max - x->got) {
		x->too_big = 1;
		return 0;
	}
	x->got += len;
	if (x->is_sse) {
		if (x->sse == NULL &&
		    (x->sse = sse_parser_new(x->max, sse_cb, x)) == NULL)
			return 0;
		/* Our response is in: abort, the rest is not ours. */
		if (sse_parser_feed(x->sse, p, len) != 0)
			return 0;
		return len;
	}
	if (util_append(&x->resp, &x->rlen, &x->rcap, p, len) == -1)
		return 0;
	return len;
}

/* Sets val (bounded, trimmed) when the header line is name's. */
static int
header_val(const char *line, size_t n, const char *name, char *val,
    size_t vsize)
{
	size_t	nl = strlen(name), i, j;

	if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return 0;
	for (i = nl + 1; i < n && (line[i] == ' ' || line[i] == '\t'); i++)
		;
	for (j = n; j > i && (line[j - 1] == '\r' || line[j - 1] == '\n' ||
	    line[j - 1] == ' ' || line[j - 1] == '\t'); j--)
		;
	if (j - i >= vsize)
		return -1;
	memcpy(val, line + i, j - i);
	val[j - i] = '\0';
	return 1;
}

static size_t
header_cb(char *p, size_t size, size_t n, void *arg)
{
	struct xfer	*x = arg;
	size_t		 len = size * n, i;
	char		 v[MCP_MAX_SID + 1];

	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* A new response (after 1xx): forget the last one's. */
		x->is_sse = 0;
		x->sid[0] = '\0';
		return len;
	}
	if (header_val(p, len, "content-type", v, sizeof(v)) == 1)
		x->is_sse = strncasecmp(v, "text/event-stream", 17) == 0;
	if (header_val(p, len, "mcp-session-id", v, sizeof(v)) == 1) {
		/* The spec allows visible ASCII only; anything else is
		 * dropped rather than sent back in our headers. */
		for (i = 0; v[i] != '\0'; i++)
			if ((unsigned char)v[i] < 0x21 ||
			    (unsigned char)v[i] > 0x7e)
				break;
		if (v[i] == '\0')
			snprintf(x->sid, sizeof(x->sid), "%s", v);
	}
	return len;
}

static int
add_header(struct xfer *x, const char *fmt, const char *val)
{
	struct curl_slist	*l;
	char			 buf[MCP_MAX_SID + 64];

	snprintf(buf, sizeof(buf), fmt, val);
	if ((l = curl_slist_append(x->hdrs, buf)) == NULL)
		return -1;
	x->hdrs = l;
	return 0;
}

/*
 * Starts a POST of the JSON-RPC message body (taken over, freed here on
 * failure) to srv in the session sid (NULL: none); id 0 for a
 * notification.  NULL when out of memory.
 */
struct xfer *
xfer_start(struct mcp_ctx *ctx, struct mcp_srv *srv, enum xfer_kind kind,
    long id, char *body, long timeout_ms, const char *sid)
{
	const struct cfg_mcp_server	*cfg = srv->cfg;
	struct curl_slist		*l;
	struct xfer			*x;
	unsigned			 i;

	if (body == NULL || (x = calloc(1, sizeof(*x))) == NULL) {
		free(body);
		return NULL;
	}
	x->ctx = ctx;
	x->srv = kind == X_NOTIFY || kind == X_ANSWER ? NULL : srv;
	x->kind = kind;
	if (kind == X_ANSWER)
		ctx->nanswers++;
	x->id = id;
	x->body = body;
	/* max-result bounds what a tool returns; the protocol's own answers
	 * (tools/list pages) keep the fixed bound. */
	x->max = kind == X_CALL && cfg->max_result > 0 ? cfg->max_result :
	    MCP_MAX_BODY;
	x->gen = srv->gen;
	TAILQ_INSERT_TAIL(&ctx->xfers, x, entry);
	if (add_header(x, "%s", "Content-Type: application/json") == -1 ||
	    add_header(x, "%s", "Accept: application/json, "
	    "text/event-stream") == -1 ||
	    add_header(x, "%s", "Expect:") == -1)
		goto fail;
	if (sid != NULL) {
		if (add_header(x, "Mcp-Session-Id: %s", sid) == -1)
			goto fail;
		x->sent_sid = 1;
	}
	if (kind != X_INIT) {
		if (srv->version != NULL && add_header(x,
		    "MCP-Protocol-Version: %s", srv->version) == -1)
			goto fail;
	}
	for (i = 0; i < cfg->nheaders; i++) {
		if ((l = curl_slist_append(x->hdrs, cfg->headers[i])) == NULL)
			goto fail;
		x->hdrs = l;
	}
	if ((x->easy = curl_easy_init()) == NULL)
		goto fail;
	curl_easy_setopt(x->easy, CURLOPT_URL, cfg->url);
	curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(x->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(x->body));
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, (char *)(void *)x);
	curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->easy, CURLOPT_USERAGENT, "parleyd");
	curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)MCP_CONNECT_TIMEOUT);
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, timeout_ms);
	if (curlev_add(ctx->cv, x->easy) == -1)
		goto fail;
	return x;
fail:
	xfer_free(x);
	return NULL;
}

/*
 * xfer_outcome's reading of what came back, given the HTTP status: apart
 * so that it runs without a transfer (fuzz/mcp.c feeds it).
 */
static int
xfer_result(struct xfer *x, CURLcode rc, long status, char *why, size_t wlen,
    int *rpc_error)
{
	cJSON	*doc, *it, *err, *m;
	char	 v[32];

	*rpc_error = 0;
	if (x->msg == NULL && !x->is_sse && x->rlen > 0 && status >= 200 &&
	    status < 300 && (doc = cJSON_ParseWithLength(x->resp,
	    x->rlen)) != NULL) {
		if (cJSON_IsArray(doc)) {
			/* A batch: pick ours out of it. */
			cJSON_ArrayForEach(it, doc) {
				m = cJSON_Duplicate(it, 1);
				if (!take_response(x, m))
					cJSON_Delete(m);
			}
			cJSON_Delete(doc);
		} else if (!take_response(x, doc))
			cJSON_Delete(doc);
	}
	if (x->msg == NULL) {
		/* A JSON-RPC error may come with a 4xx; show its message. */
		if (status >= 400 && !x->is_sse && x->rlen > 0 &&
		    (doc = cJSON_ParseWithLength(x->resp, x->rlen)) != NULL) {
			err = cJSON_GetObjectItemCaseSensitive(doc, "error");
			m = cJSON_GetObjectItemCaseSensitive(err, "message");
			if (cJSON_IsString(m) && m->valuestring[0] != '\0') {
				snprintf(why, wlen, "HTTP %ld: %.200s", status,
				    m->valuestring);
				cJSON_Delete(doc);
				return -1;
			}
			cJSON_Delete(doc);
		}
		if (x->too_big && x->kind == X_CALL) {
			util_fmt_size(x->max, v, sizeof(v));
			snprintf(why, wlen, "the result is larger than "
			    "max-result %s (raise it in mcp-server %s for "
			    "larger results)", v, x->srv->cfg->name);
			log_warnx("mcp server %s: tools/call %ld: %s",
			    x->srv->cfg->name, x->id, why);
		} else if (x->too_big)
			snprintf(why, wlen, "response larger than %d bytes",
			    MCP_MAX_BODY);
		else if (rc != CURLE_OK)
			snprintf(why, wlen, "%s", x->errbuf[0] != '\0' ?
			    x->errbuf : curl_easy_strerror(rc));
		else if (status < 200 || status >= 300)
			snprintf(why, wlen, "HTTP status %ld", status);
		else
			snprintf(why, wlen, "no JSON-RPC response to request "
			    "%ld", x->id);
		return -1;
	}
	err = cJSON_GetObjectItemCaseSensitive(x->msg, "error");
	if (err != NULL) {
		*rpc_error = 1;
		m = cJSON_GetObjectItemCaseSensitive(err, "message");
		it = cJSON_GetObjectItemCaseSensitive(err, "code");
		/* An empty message (or one a NUL cuts short) says nothing. */
		if (cJSON_IsString(m) && m->valuestring[0] != '\0')
			snprintf(why, wlen, "%.*s", MCP_MAX_ERRMSG,
			    m->valuestring);
		else
			snprintf(why, wlen, "JSON-RPC error %d",
			    cJSON_IsNumber(it) ? it->valueint : 0);
		return -1;
	}
	return 0;
}

/*
 * What came back: 0 with x->msg holding a result, or -1 with why set.
 * *rpc_error is set when the server answered with a JSON-RPC error.
 */
int
xfer_outcome(struct xfer *x, CURLcode rc, char *why, size_t wlen,
    int *rpc_error)
{
	long	 status = 0;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	return xfer_result(x, rc, status, why, wlen, rpc_error);
}
