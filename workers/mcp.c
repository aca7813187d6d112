/*
 * MCP client, Streamable HTTP transport (protocol revisions 2025-06-18 and
 * 2025-03-26): every JSON-RPC message is its own POST to the server's
 * endpoint; a request is answered with application/json or with a
 * text/event-stream carrying the response and maybe notifications and
 * requests of the server's, a notification with 202.
 *
 * The server's requests in any event stream we read are answered the way
 * ours are sent, each response its own POST (the server says 202) that
 * nobody waits for: ping with an empty result, elicitation/create by the
 * call's caller or with "decline", anything else with "method not found",
 * so that a tool never waits out its timeout for an answer that cannot
 * come.  Notifications are ignored.
 *
 * Per server: initialize (no session yet) -> notifications/initialized ->
 * tools/list (following nextCursor) -> ready.  The Mcp-Session-Id of the
 * initialize answer goes on every later request, with MCP-Protocol-Version.
 * A failed step drops the server's tools and retries the whole sequence
 * after a backoff.  A tool call answered 404 while it carried a session id
 * means the server forgot the session: the server is initialized again
 * and the call re-sent once.
 *
 * libcurl forbids removing handles from inside its callbacks; the write
 * and header callbacks only store bytes, and everything that may free or
 * start transfers (and every user callback) runs after
 * curl_multi_socket_action has returned.
 */
#include <sys/queue.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/sse.h"
#include "parley/util.h"
#include "curlev.h"
#include "mcp.h"

#define MCP_PROTO_LATEST	"2025-06-18"
#define MCP_PROTO_OLDER		"2025-03-26"
#define MCP_MAX_BODY		(4 * 1024 * 1024)	/* one response */
#define MCP_MAX_SID		256		/* Mcp-Session-Id */
#define MCP_MAX_TOOLS		256		/* per server */
#define MCP_MAX_PAGES		64		/* tools/list pages */
#define MCP_MAX_NAME		64		/* SERVER__TOOL */
#define MCP_MAX_ERRMSG		1024
#define MCP_BACKOFF_FIRST	1000		/* ms */
#define MCP_BACKOFF_CAP		60000		/* ms */
#define MCP_NOTIFY_TIMEOUT	5000		/* ms, fire-and-forget: our
						   notifications and answers */
#define MCP_MAX_ASKS		16		/* server requests queued or
						   being answered, per ctx */
#define MCP_MAX_ELICITS		4		/* questions open per call */
#define MCP_MAX_ELICIT_TEXT	(64 * 1024)	/* message, schema, content */
#define MCP_MAX_RPC_ID		128		/* a server's string id */
#define MCP_ELICIT_MARGIN	5000		/* ms: an open question is
						   declined this long (or a
						   quarter of the time left,
						   if less) before its call
						   times out, so the tool
						   can finish */
#define MCP_CONNECT_TIMEOUT	10000		/* ms */
#define MCP_EMPTY_SCHEMA	"{\"type\":\"object\"}"

enum xfer_kind {
	X_INIT,			/* initialize */
	X_INITIALIZED,		/* notifications/initialized */
	X_LIST,			/* tools/list */
	X_CALL,			/* tools/call */
	X_NOTIFY,		/* notifications/cancelled, nobody waits */
	X_ANSWER		/* our response to a server's request, the same */
};

enum srv_state {
	S_INIT,			/* initialize .. tools/list in flight */
	S_READY,
	S_BACKOFF		/* waiting to start over */
};

struct mcp_srv;
struct mcp_call;

/* One HTTP request/response. */
struct xfer {
	struct mcp_ctx		*ctx;
	struct mcp_srv		*srv;		/* NULL: X_NOTIFY, X_ANSWER */
	struct mcp_call		*call;		/* X_CALL */
	enum xfer_kind		 kind;
	TAILQ_ENTRY(xfer)	 entry;
	CURL			*easy;
	struct curl_slist	*hdrs;
	char			*body;
	long			 id;		/* JSON-RPC id, 0: notification */
	int			 sent_sid;	/* carried an Mcp-Session-Id */
	unsigned		 gen;		/* srv->gen when sent */
	int			 is_sse;
	int			 too_big;
	int			 dropped;	/* a request unanswered */
	struct sse_parser	*sse;
	char			*resp;		/* JSON body */
	size_t			 rlen, rcap;
	cJSON			*msg;		/* the matching response */
	char			 sid[MCP_MAX_SID + 1];
	char			 errbuf[CURL_ERROR_SIZE];
};

struct stool {
	char			*name, *full, *desc, *schema;
	int			 read_only, destructive;
	struct policy_annotations ann;
};

struct mcp_srv {
	struct mcp_ctx			*ctx;
	const struct cfg_mcp_server	*cfg;
	TAILQ_ENTRY(mcp_srv)		 entry;
	enum srv_state			 state;
	int				 tried;		/* first attempt over */
	char				*sid;
	const char			*version;
	unsigned			 gen;		/* sessions begun */
	struct xfer			*x;		/* step in flight */
	struct event			*retry;
	uint64_t			 backoff_ms;
	struct stool			*tools;
	size_t				 ntools;
	struct stool			*pend;		/* being listed */
	size_t				 npend;
	unsigned			 pages;
	TAILQ_HEAD(, mcp_call)		 waiting;	/* for a session */
};

/*
 * A request of the server's, read inside libcurl where nothing may be
 * started, kept until mcp_after answers it.
 */
struct ask {
	TAILQ_ENTRY(ask)	 entry;		/* ctx->asks */
	struct mcp_srv		*srv;
	struct mcp_call		*call;		/* whose stream it came in */
	unsigned		 gen;		/* srv->gen then */
	char			 sid[MCP_MAX_SID + 1];	/* "" none */
	cJSON			*msg;
};

/* An elicitation/create waiting for the caller's answer. */
struct mcp_elicit {
	struct mcp_call		*call;
	TAILQ_ENTRY(mcp_elicit)	 entry;		/* call->elicits */
	cJSON			*id;		/* the server's request id */
	unsigned		 gen;
	char			 sid[MCP_MAX_SID + 1];
	struct event		*ev;		/* the bound */
	uint64_t		 wait_ms;
	int			 expired;	/* declined at the bound */
};

struct mcp_call {
	struct mcp_ctx		*ctx;
	struct mcp_srv		*srv;		/* NULL: unknown tool */
	TAILQ_ENTRY(mcp_call)	 entry;		/* ctx->calls */
	TAILQ_ENTRY(mcp_call)	 wentry;	/* srv->waiting */
	int			 waiting;
	char			*tool;		/* the server's name */
	char			*args;
	mcp_result_cb		 cb;
	void			*arg;
	struct event		*ev;		/* timeout, or early failure */
	struct xfer		*x;
	long			 rpc_id;	/* of the last send, 0 none */
	uint64_t		 deadline_ms;	/* when ev times it out */
	mcp_elicit_cb		 ecb;
	void			*earg;
	TAILQ_HEAD(, mcp_elicit) elicits;
	unsigned		 nelicits;
	int			 retried;
	int			 failed;	/* fail_* set, ev fires now */
	int			 fail_err;
	const char		*fail_code;
	char			*fail_text;
};

struct mcp_ctx {
	struct event_base	*base;
	struct curlev		*cv;
	long			 next_id;
	TAILQ_HEAD(, mcp_srv)	 srvs;
	TAILQ_HEAD(, mcp_call)	 calls;
	TAILQ_HEAD(, xfer)	 xfers;
	TAILQ_HEAD(, ask)	 asks;
	unsigned		 nasks;		/* queued */
	unsigned		 nanswers;	/* X_ANSWER in flight */
	struct mcp_tool		*view;		/* what mcp_tools returns */
	size_t			 nview;
	int			 dirty;		/* view needs a rebuild */
};

static void	xfer_done(struct xfer *, CURLcode);
static void	srv_start(struct mcp_srv *);
static void	call_send(struct mcp_call *);
static void	asks_run(struct mcp_ctx *);

/* --- libcurl's multi interface on libevent (curlev.c) --- */

static void
mcp_done(void *owner, CURLcode rc)
{
	xfer_done(owner, rc);
}

/* libcurl has returned: the server's requests may be answered now. */
static void
mcp_after(void *arg)
{
	asks_run(arg);
}

/* --- transfers --- */

static void
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

static size_t
write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct xfer	*x = arg;
	size_t		 len = size * n;

	if (x->is_sse) {
		if (x->sse == NULL &&
		    (x->sse = sse_parser_new(MCP_MAX_BODY, sse_cb, x)) == NULL)
			return 0;
		/* Our response is in: abort, the rest is not ours. */
		if (sse_parser_feed(x->sse, p, len) != 0)
			return 0;
		return len;
	}
	if (len > MCP_MAX_BODY - x->rlen) {
		x->too_big = 1;
		return 0;
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
static struct xfer *
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

/* {"jsonrpc":"2.0",["id":id,]"method":method[,"params":params]}. */
static char *
rpc_body(long id, const char *method, cJSON *params)
{
	cJSON	*o;
	char	*s = NULL;

	if ((o = cJSON_CreateObject()) == NULL) {
		cJSON_Delete(params);
		return NULL;
	}
	if (cJSON_AddStringToObject(o, "jsonrpc", "2.0") != NULL &&
	    (id == 0 || cJSON_AddNumberToObject(o, "id", (double)id) != NULL) &&
	    cJSON_AddStringToObject(o, "method", method) != NULL) {
		if (params == NULL ||
		    cJSON_AddItemToObject(o, "params", params))
			s = cJSON_PrintUnformatted(o);
		params = NULL;
	}
	cJSON_Delete(params);
	cJSON_Delete(o);
	return s;
}

/*
 * What came back: 0 with x->msg holding a result, or -1 with why set.
 * *rpc_error is set when the server answered with a JSON-RPC error.
 */
static int
xfer_outcome(struct xfer *x, CURLcode rc, char *why, size_t wlen,
    int *rpc_error)
{
	cJSON	*doc, *it, *err, *m;
	long	 status = 0;

	*rpc_error = 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
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
			if (cJSON_IsString(m)) {
				snprintf(why, wlen, "HTTP %ld: %.200s", status,
				    m->valuestring);
				cJSON_Delete(doc);
				return -1;
			}
			cJSON_Delete(doc);
		}
		if (x->too_big)
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
		if (cJSON_IsString(m))
			snprintf(why, wlen, "%.*s", MCP_MAX_ERRMSG,
			    m->valuestring);
		else
			snprintf(why, wlen, "JSON-RPC error %d",
			    cJSON_IsNumber(it) ? it->valueint : 0);
		return -1;
	}
	return 0;
}

/* --- servers --- */

static void
stools_free(struct stool *t, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		free(t[i].name);
		free(t[i].full);
		free(t[i].desc);
		free(t[i].schema);
	}
	free(t);
}

static void	call_fail(struct mcp_call *, const char *, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

static void
srv_fail(struct mcp_srv *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
srv_fail(struct mcp_srv *srv, const char *fmt, ...)
{
	struct mcp_call	*c;
	struct timeval	 tv;
	va_list		 ap;
	char		 why[512];

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (srv->backoff_ms == 0)
		srv->backoff_ms = MCP_BACKOFF_FIRST;
	log_warnx("mcp server %s: %s; retrying in %llu s", srv->cfg->name,
	    why, (unsigned long long)(srv->backoff_ms / 1000));
	srv->state = S_BACKOFF;
	srv->tried = 1;
	if (srv->x != NULL) {
		xfer_free(srv->x);
		srv->x = NULL;
	}
	stools_free(srv->pend, srv->npend);
	srv->pend = NULL;
	srv->npend = 0;
	if (srv->ntools > 0)
		srv->ctx->dirty = 1;
	stools_free(srv->tools, srv->ntools);
	srv->tools = NULL;
	srv->ntools = 0;
	while ((c = TAILQ_FIRST(&srv->waiting)) != NULL) {
		TAILQ_REMOVE(&srv->waiting, c, wentry);
		c->waiting = 0;
		call_fail(c, "TOOL_ERROR", "MCP server %s is unavailable: %s",
		    srv->cfg->name, why);
	}
	util_tv(&tv, srv->backoff_ms);
	evtimer_add(srv->retry, &tv);
	srv->backoff_ms = srv->backoff_ms * 2 > MCP_BACKOFF_CAP ?
	    MCP_BACKOFF_CAP : srv->backoff_ms * 2;
}

static void
retry_ev(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	srv_start(arg);
}

static void
srv_step(struct mcp_srv *srv, enum xfer_kind kind, const char *method,
    cJSON *params)
{
	struct mcp_ctx	*ctx = srv->ctx;
	long		 id = kind == X_INITIALIZED ? 0 : ++ctx->next_id;

	srv->x = xfer_start(ctx, srv, kind, id, rpc_body(id, method, params),
	    (long)srv->cfg->timeout_ms, kind == X_INIT ? NULL : srv->sid);
	if (srv->x == NULL)
		srv_fail(srv, "out of memory");
}

static void
srv_start(struct mcp_srv *srv)
{
	cJSON	*p, *caps, *ci;

	evtimer_del(srv->retry);
	if (srv->x != NULL) {
		xfer_free(srv->x);
		srv->x = NULL;
	}
	srv->state = S_INIT;
	free(srv->sid);
	srv->sid = NULL;
	srv->version = NULL;
	srv->gen++;
	if ((p = cJSON_CreateObject()) == NULL) {
		srv_fail(srv, "out of memory");
		return;
	}
	/* elicitation: we answer, the caller's way or with "decline";
	 * servers offer tools that ask only to clients that say so. */
	if (cJSON_AddStringToObject(p, "protocolVersion",
	    MCP_PROTO_LATEST) == NULL ||
	    (caps = cJSON_AddObjectToObject(p, "capabilities")) == NULL ||
	    cJSON_AddObjectToObject(caps, "elicitation") == NULL ||
	    (ci = cJSON_AddObjectToObject(p, "clientInfo")) == NULL ||
	    cJSON_AddStringToObject(ci, "name", "parleyd") == NULL ||
	    cJSON_AddStringToObject(ci, "version", "1.0") == NULL) {
		cJSON_Delete(p);
		srv_fail(srv, "out of memory");
		return;
	}
	srv_step(srv, X_INIT, "initialize", p);
}

static void
srv_list(struct mcp_srv *srv, const char *cursor)
{
	cJSON	*p = NULL;

	if (cursor != NULL && ((p = cJSON_CreateObject()) == NULL ||
	    cJSON_AddStringToObject(p, "cursor", cursor) == NULL)) {
		cJSON_Delete(p);
		srv_fail(srv, "out of memory");
		return;
	}
	srv->pages++;
	srv_step(srv, X_LIST, "tools/list", p);
}

/* SERVER__TOOL with what the model APIs refuse in names made '_'. */
static char *
full_name(const char *server, const char *tool)
{
	char	*s;
	size_t	 i, n;

	if (asprintf(&s, "%s__%s", server, tool) == -1)
		return NULL;
	n = strlen(s);
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			s[i] = '_';
	return s;
}

static int
json_true(const cJSON *o, const char *name, int dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* A hint as the server sent it: unset when it sent none. */
static enum policy_hint
json_hint(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsBool(v))
		return POLICY_HINT_UNSET;
	return cJSON_IsTrue(v) ? POLICY_HINT_TRUE : POLICY_HINT_FALSE;
}

void
mcp_annotations(const cJSON *ann, struct policy_annotations *out)
{
	out->read_only = json_hint(ann, "readOnlyHint");
	out->destructive = json_hint(ann, "destructiveHint");
	out->idempotent = json_hint(ann, "idempotentHint");
	out->open_world = json_hint(ann, "openWorldHint");
}

/* Adds one tools/list entry to srv->pend; -1 only when out of memory. */
static int
pend_add(struct mcp_srv *srv, const cJSON *t)
{
	const cJSON	*name, *desc, *schema, *ann;
	struct stool	*st, *nt;
	size_t		 i;
	char		*full;

	name = cJSON_GetObjectItemCaseSensitive(t, "name");
	if (!cJSON_IsString(name) || name->valuestring[0] == '\0' ||
	    strlen(name->valuestring) > 128) {
		log_warnx("mcp server %s: a tool without a usable name "
		    "skipped", srv->cfg->name);
		return 0;
	}
	if ((full = full_name(srv->cfg->name, name->valuestring)) == NULL)
		return -1;
	if (strlen(full) > MCP_MAX_NAME) {
		log_warnx("mcp server %s: tool %.80s skipped: %s is longer "
		    "than %d characters", srv->cfg->name, name->valuestring,
		    full, MCP_MAX_NAME);
		free(full);
		return 0;
	}
	for (i = 0; i < srv->npend; i++)
		if (strcmp(srv->pend[i].full, full) == 0) {
			log_warnx("mcp server %s: tool %.80s skipped: its name "
			    "%s is taken", srv->cfg->name, name->valuestring,
			    full);
			free(full);
			return 0;
		}
	if (srv->npend >= MCP_MAX_TOOLS) {
		log_warnx("mcp server %s: more than %d tools, %.80s skipped",
		    srv->cfg->name, MCP_MAX_TOOLS, name->valuestring);
		free(full);
		return 0;
	}
	if ((nt = reallocarray(srv->pend, srv->npend + 1,
	    sizeof(*nt))) == NULL) {
		free(full);
		return -1;
	}
	srv->pend = nt;
	st = &srv->pend[srv->npend];
	memset(st, 0, sizeof(*st));
	st->full = full;
	srv->npend++;
	desc = cJSON_GetObjectItemCaseSensitive(t, "description");
	schema = cJSON_GetObjectItemCaseSensitive(t, "inputSchema");
	ann = cJSON_GetObjectItemCaseSensitive(t, "annotations");
	st->read_only = json_true(ann, "readOnlyHint", 0);
	/* The spec's default for destructiveHint is true; it means
	 * nothing for a read-only tool. */
	st->destructive = st->read_only ? 0 :
	    json_true(ann, "destructiveHint", 1);
	mcp_annotations(ann, &st->ann);
	if ((st->name = strdup(name->valuestring)) == NULL ||
	    (st->desc = strdup(cJSON_IsString(desc) ? desc->valuestring :
	    "")) == NULL)
		return -1;
	st->schema = cJSON_IsObject(schema) ?
	    cJSON_PrintUnformatted(schema) : strdup(MCP_EMPTY_SCHEMA);
	return st->schema == NULL ? -1 : 0;
}

static void
srv_ready(struct mcp_srv *srv)
{
	struct mcp_call	*c;

	stools_free(srv->tools, srv->ntools);
	srv->tools = srv->pend;
	srv->ntools = srv->npend;
	srv->pend = NULL;
	srv->npend = 0;
	srv->state = S_READY;
	srv->tried = 1;
	srv->backoff_ms = 0;
	srv->ctx->dirty = 1;
	log_info("mcp server %s: ready, %zu tools (protocol %s)",
	    srv->cfg->name, srv->ntools, srv->version);
	while ((c = TAILQ_FIRST(&srv->waiting)) != NULL) {
		TAILQ_REMOVE(&srv->waiting, c, wentry);
		c->waiting = 0;
		call_send(c);
	}
}

/* The answer to one step of the start-up sequence. */
static void
srv_step_done(struct xfer *x, CURLcode rc)
{
	struct mcp_srv	*srv = x->srv;
	const cJSON	*res, *v, *tools, *t;
	char		 why[MCP_MAX_ERRMSG + 64];
	long		 status = 0;
	int		 rpcerr;

	srv->x = NULL;
	if (x->kind == X_INITIALIZED) {
		/* A notification: 202 and no body, but any 2xx will do. */
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
		xfer_free(x);
		if (rc != CURLE_OK || status < 200 || status >= 300) {
			srv_fail(srv, "notifications/initialized: %s",
			    rc != CURLE_OK ? curl_easy_strerror(rc) :
			    "not accepted");
			return;
		}
		srv->pages = 0;
		srv_list(srv, NULL);
		return;
	}
	if (xfer_outcome(x, rc, why, sizeof(why), &rpcerr) == -1) {
		srv_fail(srv, "%s: %s", x->kind == X_INIT ? "initialize" :
		    "tools/list", why);
		xfer_free(x);
		return;
	}
	res = cJSON_GetObjectItemCaseSensitive(x->msg, "result");
	if (x->kind == X_INIT) {
		v = cJSON_GetObjectItemCaseSensitive(res, "protocolVersion");
		if (!cJSON_IsString(v)) {
			srv_fail(srv, "initialize: no protocolVersion");
		} else if (strcmp(v->valuestring, MCP_PROTO_LATEST) != 0 &&
		    strcmp(v->valuestring, MCP_PROTO_OLDER) != 0) {
			srv_fail(srv, "initialize: unsupported protocol "
			    "version %.40s", v->valuestring);
		} else if (x->sid[0] != '\0' &&
		    (srv->sid = strdup(x->sid)) == NULL) {
			srv_fail(srv, "out of memory");
		} else {
			srv->version = strcmp(v->valuestring,
			    MCP_PROTO_LATEST) == 0 ? MCP_PROTO_LATEST :
			    MCP_PROTO_OLDER;
			srv_step(srv, X_INITIALIZED,
			    "notifications/initialized", NULL);
		}
		xfer_free(x);
		return;
	}
	tools = cJSON_GetObjectItemCaseSensitive(res, "tools");
	if (!cJSON_IsArray(tools)) {
		xfer_free(x);
		srv_fail(srv, "tools/list: no tools array");
		return;
	}
	cJSON_ArrayForEach(t, tools)
		if (pend_add(srv, t) == -1) {
			xfer_free(x);
			srv_fail(srv, "out of memory");
			return;
		}
	v = cJSON_GetObjectItemCaseSensitive(res, "nextCursor");
	if (cJSON_IsString(v) && v->valuestring[0] != '\0') {
		if (srv->pages >= MCP_MAX_PAGES) {
			log_warnx("mcp server %s: tools/list: more than %d "
			    "pages, the rest ignored", srv->cfg->name,
			    MCP_MAX_PAGES);
		} else {
			srv_list(srv, v->valuestring);
			xfer_free(x);
			return;
		}
	}
	xfer_free(x);
	srv_ready(srv);
}

/* --- the server's requests --- */

/*
 * POSTs our response to the server's request id in session sid ("" none):
 * result, or when it is NULL the error code and message.  Nobody waits
 * for it.  0, or -1 when the session is gone or out of memory.  Takes
 * result.
 */
static int
answer_send(struct mcp_srv *srv, unsigned gen, const char *sid,
    const cJSON *id, cJSON *result, int code, const char *message)
{
	cJSON	*o, *e, *idc = NULL;
	char	*body = NULL;

	/* A new session does not know the old one's requests. */
	if (srv->gen != gen || (o = cJSON_CreateObject()) == NULL) {
		cJSON_Delete(result);
		return -1;
	}
	if (cJSON_AddStringToObject(o, "jsonrpc", "2.0") != NULL &&
	    (idc = cJSON_Duplicate(id, 0)) != NULL &&
	    cJSON_AddItemToObject(o, "id", idc)) {
		idc = NULL;
		if (result != NULL) {
			if (cJSON_AddItemToObject(o, "result", result))
				body = cJSON_PrintUnformatted(o);
			else
				cJSON_Delete(result);
		} else if ((e = cJSON_AddObjectToObject(o, "error")) != NULL &&
		    cJSON_AddNumberToObject(e, "code", code) != NULL &&
		    cJSON_AddStringToObject(e, "message", message) != NULL)
			body = cJSON_PrintUnformatted(o);
	} else
		cJSON_Delete(result);
	cJSON_Delete(idc);
	cJSON_Delete(o);
	if (xfer_start(srv->ctx, srv, X_ANSWER, 0, body, MCP_NOTIFY_TIMEOUT,
	    sid[0] != '\0' ? sid : NULL) == NULL)
		return -1;
	return 0;
}

/* {"action":action[,"content":content]}; takes content. */
static int
elicit_send(struct mcp_elicit *e, const char *action, cJSON *content)
{
	cJSON	*r;

	if ((r = cJSON_CreateObject()) == NULL ||
	    cJSON_AddStringToObject(r, "action", action) == NULL) {
		cJSON_Delete(r);
		cJSON_Delete(content);
		return -1;
	}
	if (content != NULL && !cJSON_AddItemToObject(r, "content", content)) {
		cJSON_Delete(r);
		cJSON_Delete(content);
		return -1;
	}
	return answer_send(e->call->srv, e->gen, e->sid, e->id, r, 0, NULL);
}

static void
elicit_free(struct mcp_elicit *e)
{
	TAILQ_REMOVE(&e->call->elicits, e, entry);
	e->call->nelicits--;
	if (e->ev != NULL)
		event_free(e->ev);
	cJSON_Delete(e->id);
	free(e);
}

/* Nobody answered in time: decline, so the tool can still finish. */
static void
elicit_ev(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_elicit	*e = arg;

	(void)fd;
	(void)what;
	e->expired = 1;
	log_info("mcp server %s: tool %.64s: its question was not answered "
	    "in %llu ms, declined", e->call->srv->cfg->name, e->call->tool,
	    (unsigned long long)e->wait_ms);
	elicit_send(e, "decline", NULL);
}

/* Answers the ask with {"action":"decline"} and says why. */
static void
ask_decline(struct ask *a, const char *why)
{
	cJSON	*r;

	log_info("mcp server %s: a question of %s%.64s declined: %s",
	    a->srv->cfg->name, a->call != NULL ? "tool " : "the server",
	    a->call != NULL ? a->call->tool : "", why);
	if ((r = cJSON_CreateObject()) == NULL ||
	    cJSON_AddStringToObject(r, "action", "decline") == NULL) {
		cJSON_Delete(r);
		return;
	}
	answer_send(a->srv, a->gen, a->sid,
	    cJSON_GetObjectItemCaseSensitive(a->msg, "id"), r, 0, NULL);
}

/* elicitation/create: to the call's caller, or declined. */
static void
elicit_start(struct ask *a)
{
	struct mcp_call		*c = a->call;
	struct mcp_elicit	*e;
	const cJSON		*p, *msg, *schema;
	struct timeval		 tv;
	uint64_t		 now, left;
	char			*sj;

	p = cJSON_GetObjectItemCaseSensitive(a->msg, "params");
	msg = cJSON_GetObjectItemCaseSensitive(p, "message");
	schema = cJSON_GetObjectItemCaseSensitive(p, "requestedSchema");
	if (!cJSON_IsString(msg) || !cJSON_IsObject(schema)) {
		answer_send(a->srv, a->gen, a->sid,
		    cJSON_GetObjectItemCaseSensitive(a->msg, "id"), NULL,
		    -32602, "Invalid params: elicitation/create needs a "
		    "message and a requestedSchema object");
		return;
	}
	if (c == NULL || c->ecb == NULL) {
		ask_decline(a, "nobody to ask");
		return;
	}
	now = util_mono_ms();
	if (c->nelicits >= MCP_MAX_ELICITS || now >= c->deadline_ms) {
		ask_decline(a, c->nelicits >= MCP_MAX_ELICITS ?
		    "too many open at once" : "no time left");
		return;
	}
	if (strlen(msg->valuestring) > MCP_MAX_ELICIT_TEXT) {
		ask_decline(a, "its message is too long");
		return;
	}
	if ((sj = cJSON_PrintUnformatted(schema)) == NULL ||
	    strlen(sj) > MCP_MAX_ELICIT_TEXT) {
		free(sj);
		ask_decline(a, "its schema is too long");
		return;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL ||
	    (e->id = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(a->msg,
	    "id"), 0)) == NULL ||
	    (e->ev = evtimer_new(c->ctx->base, elicit_ev, e)) == NULL) {
		if (e != NULL) {
			cJSON_Delete(e->id);
			free(e);
		}
		free(sj);
		ask_decline(a, "out of memory");
		return;
	}
	e->call = c;
	e->gen = a->gen;
	memcpy(e->sid, a->sid, sizeof(e->sid));
	TAILQ_INSERT_TAIL(&c->elicits, e, entry);
	c->nelicits++;
	/* Leave the tool a little of the call's time to use the answer. */
	left = c->deadline_ms - now;
	e->wait_ms = left - (left / 4 < MCP_ELICIT_MARGIN ? left / 4 :
	    MCP_ELICIT_MARGIN);
	util_tv(&tv, e->wait_ms);
	evtimer_add(e->ev, &tv);
	/* e may be answered or freed by the time this returns. */
	c->ecb(c->earg, msg->valuestring, sj, e);
	free(sj);
}

static void
ask_handle(struct ask *a)
{
	const char	*m;
	const cJSON	*id;
	cJSON		*r;
	char		 why[128];

	m = cJSON_GetObjectItemCaseSensitive(a->msg, "method")->valuestring;
	id = cJSON_GetObjectItemCaseSensitive(a->msg, "id");
	if (strcmp(m, "ping") == 0) {
		if ((r = cJSON_CreateObject()) != NULL)
			answer_send(a->srv, a->gen, a->sid, id, r, 0, NULL);
	} else if (strcmp(m, "elicitation/create") == 0)
		elicit_start(a);
	else {
		log_info("mcp server %s: it asked for %.64s, which parleyd "
		    "does not offer", a->srv->cfg->name, m);
		snprintf(why, sizeof(why), "Method not found: %.64s", m);
		answer_send(a->srv, a->gen, a->sid, id, NULL, -32601, why);
	}
}

static void
asks_run(struct mcp_ctx *ctx)
{
	struct ask	*a;

	while ((a = TAILQ_FIRST(&ctx->asks)) != NULL) {
		TAILQ_REMOVE(&ctx->asks, a, entry);
		ctx->nasks--;
		ask_handle(a);
		cJSON_Delete(a->msg);
		free(a);
	}
}

/* --- calls --- */

static void
call_free(struct mcp_call *c)
{
	struct mcp_elicit	*e;
	struct ask		*a;

	if (c->x != NULL)
		xfer_free(c->x);
	if (c->waiting)
		TAILQ_REMOVE(&c->srv->waiting, c, wentry);
	if (c->ev != NULL)
		event_free(c->ev);
	while ((e = TAILQ_FIRST(&c->elicits)) != NULL)
		elicit_free(e);
	/* Its questions not yet handled go on without it. */
	TAILQ_FOREACH(a, &c->ctx->asks, entry)
		if (a->call == c)
			a->call = NULL;
	TAILQ_REMOVE(&c->ctx->calls, c, entry);
	free(c->fail_text);
	free(c->tool);
	free(c->args);
	free(c);
}

/* Frees c, then reports; text may be NULL for "". */
static void
call_finish(struct mcp_call *c, int is_error, const char *text,
    const char *code)
{
	mcp_result_cb	 cb = c->cb;
	void		*arg = c->arg;

	call_free(c);
	cb(arg, is_error, text != NULL ? text : "", code);
}

/* Reports a failure from c->ev at the next loop turn (never right now). */
static void
call_fail(struct mcp_call *c, const char *code, const char *fmt, ...)
{
	struct timeval	tv = { 0, 0 };
	va_list		ap;

	if (c->x != NULL) {
		xfer_free(c->x);
		c->x = NULL;
	}
	free(c->fail_text);
	va_start(ap, fmt);
	if (vasprintf(&c->fail_text, fmt, ap) == -1)
		c->fail_text = NULL;
	va_end(ap);
	c->failed = 1;
	c->fail_err = 1;
	c->fail_code = code;
	evtimer_del(c->ev);
	evtimer_add(c->ev, &tv);
}

/* Tells the server to stop working on c's request; nobody waits. */
static void
call_notify_cancel(struct mcp_call *c, const char *reason)
{
	cJSON	*p;

	if (c->rpc_id == 0 || c->srv == NULL || c->srv->state != S_READY)
		return;
	if ((p = cJSON_CreateObject()) == NULL)
		return;
	if (cJSON_AddNumberToObject(p, "requestId", (double)c->rpc_id) ==
	    NULL || cJSON_AddStringToObject(p, "reason", reason) == NULL) {
		cJSON_Delete(p);
		return;
	}
	xfer_start(c->ctx, c->srv, X_NOTIFY, 0,
	    rpc_body(0, "notifications/cancelled", p), MCP_NOTIFY_TIMEOUT,
	    c->srv->sid);
}

static void
call_ev(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_call	*c = arg;
	char		 msg[128];

	(void)fd;
	(void)what;
	if (c->failed) {
		char *text = c->fail_text;

		c->fail_text = NULL;
		call_finish(c, c->fail_err, text != NULL ? text :
		    "out of memory", c->fail_code);
		free(text);
		return;
	}
	call_notify_cancel(c, "timeout");
	snprintf(msg, sizeof(msg), "MCP tool %.64s on server %s timed out",
	    c->tool, c->srv->cfg->name);
	call_finish(c, 1, msg, "TOOL_TIMEOUT");
}

static void
call_send(struct mcp_call *c)
{
	struct mcp_ctx	*ctx = c->ctx;
	cJSON		*p, *args;

	if ((p = cJSON_CreateObject()) == NULL ||
	    cJSON_AddStringToObject(p, "name", c->tool) == NULL ||
	    (args = cJSON_Parse(c->args)) == NULL ||
	    !cJSON_AddItemToObject(p, "arguments", args)) {
		cJSON_Delete(p);
		call_fail(c, "TOOL_ERROR", "out of memory");
		return;
	}
	c->rpc_id = ++ctx->next_id;
	if ((c->x = xfer_start(ctx, c->srv, X_CALL, c->rpc_id,
	    rpc_body(c->rpc_id, "tools/call", p), 0, c->srv->sid)) == NULL) {
		call_fail(c, "TOOL_ERROR", "out of memory");
		return;
	}
	c->x->call = c;
}

/* The result's content as text: text items joined with "\n". */
static char *
result_text(const cJSON *res)
{
	const cJSON	*content, *it, *t;
	char		*out = NULL, *piece, *n;
	size_t		 len = 0, plen;
	int		 first = 1;

	content = cJSON_GetObjectItemCaseSensitive(res, "content");
	if (!cJSON_IsArray(content) || cJSON_GetArraySize(content) == 0) {
		/* Only structured output: give the model that. */
		t = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
		return t != NULL ? cJSON_PrintUnformatted(t) : strdup("");
	}
	if ((out = strdup("")) == NULL)
		return NULL;
	cJSON_ArrayForEach(it, content) {
		t = cJSON_GetObjectItemCaseSensitive(it, "text");
		if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "type")) &&
		    strcmp(cJSON_GetObjectItemCaseSensitive(it,
		    "type")->valuestring, "text") == 0 && cJSON_IsString(t))
			piece = strdup(t->valuestring);
		else
			piece = cJSON_PrintUnformatted(it);
		if (piece == NULL) {
			free(out);
			return NULL;
		}
		plen = strlen(piece);
		if ((n = realloc(out, len + plen + 2)) == NULL) {
			free(piece);
			free(out);
			return NULL;
		}
		out = n;
		if (!first)
			out[len++] = '\n';
		memcpy(out + len, piece, plen);
		len += plen;
		out[len] = '\0';
		free(piece);
		first = 0;
	}
	return out;
}

static void
call_done(struct xfer *x, CURLcode rc)
{
	struct mcp_call	*c = x->call;
	struct mcp_srv	*srv = c->srv;
	const cJSON	*res;
	char		 why[MCP_MAX_ERRMSG + 64], *text;
	long		 status = 0;
	unsigned	 gen = x->gen;
	int		 rpcerr, is_error;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status == 404 && x->sent_sid && !c->retried) {
		/* The server forgot our session: a new one, then once more. */
		c->retried = 1;
		c->x = NULL;
		c->rpc_id = 0;
		xfer_free(x);
		if (srv->state == S_READY && srv->gen == gen) {
			log_info("mcp server %s: session expired, "
			    "initializing again", srv->cfg->name);
			srv_start(srv);
		}
		if (srv->state == S_READY)
			call_send(c);
		else if (srv->state == S_INIT) {
			TAILQ_INSERT_TAIL(&srv->waiting, c, wentry);
			c->waiting = 1;
		} else
			call_fail(c, "TOOL_ERROR", "MCP server %s is "
			    "unavailable", srv->cfg->name);
		return;
	}
	if (xfer_outcome(x, rc, why, sizeof(why), &rpcerr) == -1) {
		c->x = NULL;
		xfer_free(x);
		if (rpcerr)
			call_finish(c, 1, why, "TOOL_ERROR");
		else {
			char msg[sizeof(why) + 128];

			snprintf(msg, sizeof(msg), "MCP server %s: %s",
			    srv->cfg->name, why);
			call_finish(c, 1, msg, "TOOL_ERROR");
		}
		return;
	}
	res = cJSON_GetObjectItemCaseSensitive(x->msg, "result");
	is_error = json_true(res, "isError", 0);
	text = result_text(res);
	c->x = NULL;
	xfer_free(x);
	if (text == NULL) {
		call_finish(c, 1, "out of memory", "TOOL_ERROR");
		return;
	}
	call_finish(c, is_error, text, NULL);
	free(text);
}

static void
xfer_done(struct xfer *x, CURLcode rc)
{
	/* Out of the multi now, so callbacks may start or free others. */
	curlev_remove(x->ctx->cv, x->easy);
	switch (x->kind) {
	case X_INIT:
	case X_INITIALIZED:
	case X_LIST:
		srv_step_done(x, rc);
		break;
	case X_CALL:
		call_done(x, rc);
		break;
	case X_NOTIFY:
	case X_ANSWER:
		xfer_free(x);
		break;
	}
}

/* --- API --- */

struct mcp_ctx *
mcp_ctx_new(struct event_base *base, const struct config *conf)
{
	const struct cfg_mcp_server	*cfg;
	struct mcp_ctx			*ctx;
	struct mcp_srv			*srv;

	if ((ctx = calloc(1, sizeof(*ctx))) == NULL)
		return NULL;
	ctx->base = base;
	TAILQ_INIT(&ctx->srvs);
	TAILQ_INIT(&ctx->calls);
	TAILQ_INIT(&ctx->xfers);
	TAILQ_INIT(&ctx->asks);
	if ((ctx->cv = curlev_new(base, mcp_done, mcp_after, ctx)) == NULL) {
		mcp_ctx_free(ctx);
		return NULL;
	}
	if (conf != NULL)
		TAILQ_FOREACH(cfg, &conf->mcp_servers, entry) {
			if ((srv = calloc(1, sizeof(*srv))) == NULL) {
				mcp_ctx_free(ctx);
				return NULL;
			}
			srv->ctx = ctx;
			srv->cfg = cfg;
			TAILQ_INIT(&srv->waiting);
			TAILQ_INSERT_TAIL(&ctx->srvs, srv, entry);
			if ((srv->retry = evtimer_new(base, retry_ev,
			    srv)) == NULL) {
				mcp_ctx_free(ctx);
				return NULL;
			}
		}
	TAILQ_FOREACH(srv, &ctx->srvs, entry)
		srv_start(srv);
	return ctx;
}

void
mcp_ctx_free(struct mcp_ctx *ctx)
{
	struct mcp_srv	*srv;
	struct mcp_call	*c;
	struct xfer	*x;
	struct ask	*a;

	if (ctx == NULL)
		return;
	while ((c = TAILQ_FIRST(&ctx->calls)) != NULL)
		call_free(c);
	while ((a = TAILQ_FIRST(&ctx->asks)) != NULL) {
		TAILQ_REMOVE(&ctx->asks, a, entry);
		cJSON_Delete(a->msg);
		free(a);
	}
	while ((x = TAILQ_FIRST(&ctx->xfers)) != NULL)
		xfer_free(x);
	while ((srv = TAILQ_FIRST(&ctx->srvs)) != NULL) {
		TAILQ_REMOVE(&ctx->srvs, srv, entry);
		if (srv->retry != NULL)
			event_free(srv->retry);
		stools_free(srv->tools, srv->ntools);
		stools_free(srv->pend, srv->npend);
		free(srv->sid);
		free(srv);
	}
	curlev_free(ctx->cv);
	free(ctx->view);
	free(ctx);
}

const struct mcp_tool *
mcp_tool_find(struct mcp_ctx *ctx, const char *full_name)
{
	const struct mcp_tool *tools;
	size_t i, n = mcp_tools(ctx, &tools);

	for (i = 0; i < n; i++)
		if (strcmp(tools[i].full_name, full_name) == 0)
			return &tools[i];
	return NULL;
}

size_t
mcp_tools(struct mcp_ctx *ctx, const struct mcp_tool **out)
{
	struct mcp_srv	*srv;
	struct mcp_tool	*v;
	size_t		 n = 0, i;

	*out = NULL;
	if (ctx == NULL)
		return 0;
	if (ctx->dirty) {
		TAILQ_FOREACH(srv, &ctx->srvs, entry)
			n += srv->ntools;
		if ((v = calloc(n ? n : 1, sizeof(*v))) == NULL) {
			/* Keep the last view; try again next time. */
			*out = ctx->view;
			return ctx->nview;
		}
		n = 0;
		TAILQ_FOREACH(srv, &ctx->srvs, entry)
			for (i = 0; i < srv->ntools; i++, n++) {
				v[n].server = srv->cfg->name;
				v[n].name = srv->tools[i].name;
				v[n].full_name = srv->tools[i].full;
				v[n].description = srv->tools[i].desc;
				v[n].schema_json = srv->tools[i].schema;
				v[n].read_only = srv->tools[i].read_only;
				v[n].destructive = srv->tools[i].destructive;
				v[n].ann = srv->tools[i].ann;
			}
		free(ctx->view);
		ctx->view = v;
		ctx->nview = n;
		ctx->dirty = 0;
	}
	*out = ctx->nview ? ctx->view : NULL;
	return ctx->nview;
}

struct mcp_call *
mcp_call(struct mcp_ctx *ctx, const char *full, const char *args_json,
    uint64_t timeout_ms, mcp_result_cb cb, void *arg)
{
	struct mcp_call	*c;
	struct mcp_srv	*srv, *found = NULL;
	struct timeval	 tv;
	const char	*tool = NULL;
	cJSON		*a = NULL;
	size_t		 i;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->ctx = ctx;
	c->cb = cb;
	c->arg = arg;
	TAILQ_INIT(&c->elicits);
	TAILQ_INSERT_TAIL(&ctx->calls, c, entry);
	if ((c->ev = evtimer_new(ctx->base, call_ev, c)) == NULL) {
		call_free(c);
		return NULL;
	}
	if (full == NULL)
		full = "";
	TAILQ_FOREACH(srv, &ctx->srvs, entry)
		for (i = 0; i < srv->ntools && found == NULL; i++)
			if (strcmp(srv->tools[i].full, full) == 0) {
				found = srv;
				tool = srv->tools[i].name;
			}
	if (args_json == NULL || args_json[0] == '\0')
		args_json = "{}";
	if (found == NULL) {
		call_fail(c, "TOOL_ERROR", "unknown tool %.80s", full);
		return c;
	}
	c->srv = found;
	if ((c->tool = strdup(tool)) == NULL ||
	    (c->args = strdup(args_json)) == NULL) {
		call_free(c);
		return NULL;
	}
	a = cJSON_Parse(args_json);
	if (!cJSON_IsObject(a)) {
		cJSON_Delete(a);
		call_fail(c, "TOOL_ERROR", "the arguments of %.80s are not a "
		    "JSON object", full);
		return c;
	}
	cJSON_Delete(a);
	if (timeout_ms == 0)
		timeout_ms = found->cfg->timeout_ms;
	c->deadline_ms = util_mono_ms() + timeout_ms;
	util_tv(&tv, timeout_ms);
	evtimer_add(c->ev, &tv);
	if (found->state == S_READY)
		call_send(c);
	else {
		/* Its session is being renewed. */
		TAILQ_INSERT_TAIL(&found->waiting, c, wentry);
		c->waiting = 1;
	}
	return c;
}

void
mcp_cancel(struct mcp_call *c)
{
	if (c == NULL)
		return;
	if (c->x != NULL && !c->failed)
		call_notify_cancel(c, "cancelled");
	call_free(c);
}

void
mcp_call_on_elicit(struct mcp_call *c, mcp_elicit_cb cb, void *arg)
{
	c->ecb = cb;
	c->earg = arg;
}

int
mcp_elicit_answer(struct mcp_elicit *e, const char *action,
    const char *content_json)
{
	cJSON	*content = NULL;
	int	 rv;

	if (e == NULL || action == NULL)
		return -1;
	if (strcmp(action, "accept") == 0) {
		if (content_json == NULL ||
		    strlen(content_json) > MCP_MAX_ELICIT_TEXT ||
		    (content = cJSON_Parse(content_json)) == NULL ||
		    !cJSON_IsObject(content)) {
			cJSON_Delete(content);
			return -1;
		}
	} else if ((strcmp(action, "decline") != 0 &&
	    strcmp(action, "cancel") != 0) || content_json != NULL)
		return -1;
	if (e->expired) {
		cJSON_Delete(content);
		elicit_free(e);
		return 1;
	}
	rv = elicit_send(e, action, content);
	elicit_free(e);
	return rv == 0 ? 0 : 1;
}

int
mcp_settled(struct mcp_ctx *ctx)
{
	struct mcp_srv *srv;

	TAILQ_FOREACH(srv, &ctx->srvs, entry)
		if (!srv->tried)
			return 0;
	return 1;
}
