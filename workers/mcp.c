/*
 * MCP client, Streamable HTTP transport (protocol revisions 2025-06-18 and
 * 2025-03-26): the API of mcp.h, the servers and the tool calls.  The HTTP
 * transfers are in mcp_xfer.c and the answers to the server's requests in
 * mcp_ask.c, below this file: they never call it, and a finished transfer
 * comes back here through curlev's callbacks (mcp_done, mcp_after).
 *
 * Per server: initialize (no session yet) -> notifications/initialized ->
 * tools/list (following nextCursor) -> ready.  The Mcp-Session-Id of the
 * initialize answer goes on every later request, with MCP-Protocol-Version.
 * A failed step drops the server's tools and retries the whole sequence
 * after a backoff.  A tool call answered 404 while it carried a session id
 * means the server forgot the session: the server is initialized again
 * and the call re-sent once.
 *
 * curlev calls mcp_done and mcp_after once curl_multi_socket_action has
 * returned, so everything here may free or start transfers and call the
 * user's callbacks.
 */
#include <sys/queue.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/util.h"
#include "curlev.h"
#include "mcp.h"
#include "mcp_int.h"

#define MCP_PROTO_LATEST	"2025-06-18"
#define MCP_PROTO_OLDER		"2025-03-26"
#define MCP_MAX_TOOLS		256		/* per server */
#define MCP_MAX_PAGES		64		/* tools/list pages */
#define MCP_MAX_NAME		64		/* SERVER__TOOL */
#define MCP_BACKOFF_FIRST	1000		/* ms */
#define MCP_BACKOFF_CAP		60000		/* ms */
#define MCP_EMPTY_SCHEMA	"{\"type\":\"object\"}"

static void	xfer_done(struct xfer *, CURLcode);
static void	srv_start(struct mcp_srv *);
static void	call_send(struct mcp_call *);

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
	ask_run(arg);
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
		ask_elicit_free(e);
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

int
mcp_settled(struct mcp_ctx *ctx)
{
	struct mcp_srv *srv;

	TAILQ_FOREACH(srv, &ctx->srvs, entry)
		if (!srv->tried)
			return 0;
	return 1;
}
