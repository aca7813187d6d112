/*
 * The MCP server of Parley's knowledge (kgmcp.h): POST /mcp, one JSON-RPC
 * message (or, before revision 2025-06-18, a batch of them) per request,
 * always answered as application/json, never as an event stream (this
 * server sends nothing of its own accord).  No state is kept between
 * requests: initialize hands out an Mcp-Session-Id ("pk-" and 32 hex
 * digits) that later requests may carry; a value of any other form
 * cannot be one of ours and is answered 404, so the client initializes
 * again.  The supervisor checked Host and Origin (guard.c: a browser page
 * of another origin is refused) and the token; the role decides here,
 * per call: knowledge_act needs user, agent or admin (kgtool.c), and a
 * token scoped to sessions reaches only the projects "kg:P" it allows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/http.h"
#include "parley/kbtext.h"
#include "parley/ipc.h"
#include "parley/kg.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/util.h"
#include "conn.h"
#include "kgcall.h"
#include "kgmcp.h"
#include "kgtool.h"
#include "wk.h"

#define PROTO_LATEST	"2025-06-18"
#define URI_PREFIX	"parley-knowledge://"
#define SID_PREFIX	"pk-"

/* JSON-RPC 2.0 and MCP error codes. */
#define E_PARSE		-32700
#define E_REQUEST	-32600
#define E_METHOD	-32601
#define E_PARAMS	-32602
#define E_INTERNAL	-32603
#define E_FORBIDDEN	-32001	/* server-defined: the token may not */
#define E_NOT_FOUND	-32002	/* MCP: resource not found */

static const char *const versions[] = {
	"2025-06-18", "2025-03-26", "2024-11-05", NULL
};

/* One POST: its messages' answers, some of them still to come. */
struct mcp_req {
	struct wk	*wk;
	struct conn	*c;
	uint64_t	 conn_id;	/* c's, to find it again */
	int		 role;
	char		 subject[IPC_SUB_MAX + 1];
	char		 scope[IPC_SCOPE_MAX + 1];
	int		 batch;
	size_t		 n;
	size_t		 pending;	/* answers to come, +1 while starting */
	cJSON		**out;		/* n answers; NULL: none (a
					   notification, a response) */
	char		 sid[40];	/* Mcp-Session-Id to send, or "" */
	char		 in_sid[40];	/* the one the client sent, or "" */
};

/* A message answered later: tools/call, resources/read. */
struct mcp_op {
	struct mcp_req	*r;
	size_t		 i;
	cJSON		*id;
	char		 uri[sizeof(URI_PREFIX) + KG_PROJECT_MAX + 8];
	int		 json;
};

static int
supported(const char *v)
{
	size_t i;

	for (i = 0; versions[i] != NULL; i++)
		if (strcmp(v, versions[i]) == 0)
			return 1;
	return 0;
}

static cJSON *
rpc_head(const cJSON *id)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddItemToObject(o, "id", id != NULL ? cJSON_Duplicate(id, 1) :
	    cJSON_CreateNull());
	return o;
}

static cJSON *
rpc_result(const cJSON *id, cJSON *result)
{
	cJSON *o = rpc_head(id);

	cJSON_AddItemToObject(o, "result", result);
	return o;
}

static cJSON *
rpc_error(const cJSON *id, int code, const char *msg)
{
	cJSON *o = rpc_head(id), *e;

	e = cJSON_AddObjectToObject(o, "error");
	cJSON_AddNumberToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", msg);
	return o;
}

/* Answers a request with one JSON-RPC message, HTTP status st. */
static void
reply_one(struct conn *c, int st, cJSON *msg, const char *extra)
{
	char *s = cJSON_PrintUnformatted(msg);

	cJSON_Delete(msg);
	if (s == NULL)
		conn_http_error(c, 500, "INTERNAL", "out of memory");
	else {
		conn_respond(c, st, s, strlen(s), extra);
		c->closing = c->close_sent = 1;
	}
	free(s);
}

static void
req_free(struct mcp_req *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		cJSON_Delete(r->out[i]);
	free(r->out);
	free(r);
}

/* All answers are in: written, if the client is still there. */
static void
req_reply(struct mcp_req *r)
{
	struct conn *c;
	cJSON *arr = NULL;
	char extra[64], *s;
	size_t i, k = 0;

	/* Found again by address, request id and path: never used stale. */
	TAILQ_FOREACH(c, &r->wk->conns, entry)
		if (c == r->c && c->ic.conn_id == r->conn_id &&
		    strcmp(c->path, KGMCP_PATH) == 0)
			break;
	if (c == NULL || c->closing) {
		req_free(r);
		return;
	}
	extra[0] = '\0';
	if (r->sid[0] != '\0')
		snprintf(extra, sizeof(extra), "Mcp-Session-Id: %s\r\n", r->sid);
	for (i = 0; i < r->n; i++)
		k += r->out[i] != NULL;
	if (k == 0) {
		/* Notifications and responses only. */
		conn_respond(c, 202, NULL, 0, extra);
		c->closing = c->close_sent = 1;
		req_free(r);
		return;
	}
	if (r->batch) {
		arr = cJSON_CreateArray();
		for (i = 0; i < r->n; i++)
			if (r->out[i] != NULL) {
				cJSON_AddItemToArray(arr, r->out[i]);
				r->out[i] = NULL;
			}
		s = cJSON_PrintUnformatted(arr);
		cJSON_Delete(arr);
	} else
		s = cJSON_PrintUnformatted(r->out[0]);
	if (s == NULL)
		conn_http_error(c, 500, "INTERNAL", "out of memory");
	else {
		conn_respond(c, 200, s, strlen(s), extra);
		c->closing = c->close_sent = 1;
	}
	free(s);
	req_free(r);
}

/* Message i has its answer (taken; NULL: none). */
static void
req_answer(struct mcp_req *r, size_t i, cJSON *ans)
{
	r->out[i] = ans;
	if (--r->pending == 0)
		req_reply(r);
}

/* --- the methods --- */

static cJSON *
m_initialize(struct mcp_req *r, const cJSON *id, const cJSON *params)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	    params, "protocolVersion"));
	cJSON *res, *caps, *o;

	if (r->batch)
		return rpc_error(id, E_REQUEST, "initialize must not be part "
		    "of a JSON-RPC batch: send it alone");
	if (v == NULL)
		return rpc_error(id, E_PARAMS, "initialize needs "
		    "params.protocolVersion, e.g. \"" PROTO_LATEST "\"");
	res = cJSON_CreateObject();
	/* The client's revision when this server speaks it, else ours. */
	cJSON_AddStringToObject(res, "protocolVersion", supported(v) ? v :
	    PROTO_LATEST);
	caps = cJSON_AddObjectToObject(res, "capabilities");
	o = cJSON_AddObjectToObject(caps, "tools");
	cJSON_AddFalseToObject(o, "listChanged");
	o = cJSON_AddObjectToObject(caps, "resources");
	cJSON_AddFalseToObject(o, "subscribe");
	cJSON_AddFalseToObject(o, "listChanged");
	o = cJSON_AddObjectToObject(res, "serverInfo");
	cJSON_AddStringToObject(o, "name", "parleyd");
	cJSON_AddStringToObject(o, "title", "Parley knowledge");
	cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
	cJSON_AddStringToObject(res, "instructions", "A project's shared "
	    "knowledge graph, kept across sessions: query it with "
	    "knowledge_query before exploring the project, record what you "
	    "learn with knowledge_act.  Resources parley-knowledge://PROJECT "
	    "(Markdown) and parley-knowledge://PROJECT/json export it whole.");
	memcpy(r->sid, SID_PREFIX, strlen(SID_PREFIX));
	util_randhex(r->sid + strlen(SID_PREFIX), 16);
	return rpc_result(id, res);
}

static cJSON *
m_tools_list(const cJSON *id)
{
	cJSON *res = cJSON_CreateObject(), *arr, *t, *a;
	const struct kgtool_spec *sp;
	size_t i;

	arr = cJSON_AddArrayToObject(res, "tools");
	for (i = 0; i < KGTOOL_N; i++) {
		sp = &kgtool_specs[i];
		t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "name", sp->name);
		cJSON_AddStringToObject(t, "title", sp->title);
		cJSON_AddStringToObject(t, "description", sp->description);
		cJSON_AddItemToObject(t, "inputSchema", cJSON_Parse(sp->schema));
		a = cJSON_AddObjectToObject(t, "annotations");
		cJSON_AddStringToObject(a, "title", sp->title);
		cJSON_AddBoolToObject(a, "readOnlyHint", sp->read_only);
		cJSON_AddFalseToObject(a, "destructiveHint");
		cJSON_AddBoolToObject(a, "idempotentHint", sp->read_only);
		cJSON_AddFalseToObject(a, "openWorldHint");
		cJSON_AddItemToArray(arr, t);
	}
	return rpc_result(id, res);
}

static cJSON *
m_templates(const cJSON *id)
{
	cJSON *res = cJSON_CreateObject(), *arr, *t;

	arr = cJSON_AddArrayToObject(res, "resourceTemplates");
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "uriTemplate", URI_PREFIX "{projectId}");
	cJSON_AddStringToObject(t, "name", "project-knowledge");
	cJSON_AddStringToObject(t, "title", "Project knowledge (Markdown)");
	cJSON_AddStringToObject(t, "description", "Everything recorded about "
	    "the project: principles, patterns, decisions, file "
	    "understandings and relationships, as readable Markdown");
	cJSON_AddStringToObject(t, "mimeType", "text/markdown");
	cJSON_AddItemToArray(arr, t);
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "uriTemplate", URI_PREFIX
	    "{projectId}/json");
	cJSON_AddStringToObject(t, "name", "project-knowledge-json");
	cJSON_AddStringToObject(t, "title", "Project knowledge (JSON)");
	cJSON_AddStringToObject(t, "description", "The same as JSON: "
	    "{projectId, seq, principles, patterns, decisions, files, "
	    "relationships, batches, hlc}");
	cJSON_AddStringToObject(t, "mimeType", "application/json");
	cJSON_AddItemToArray(arr, t);
	return rpc_result(id, res);
}

static void
op_free(struct mcp_op *op)
{
	cJSON_Delete(op->id);
	free(op);
}

/* A tool's answer (kgtool.c) as a CallToolResult. */
static void
tool_done(void *arg, int is_error, const char *text, const char *code)
{
	struct mcp_op *op = arg;
	cJSON *res = cJSON_CreateObject(), *arr, *t;

	(void)code;
	arr = cJSON_AddArrayToObject(res, "content");
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", text);
	cJSON_AddItemToArray(arr, t);
	cJSON_AddBoolToObject(res, "isError", is_error);
	req_answer(op->r, op->i, rpc_result(op->id, res));
	op_free(op);
}

/* 1 when the caller's token reaches project p ("kg:P"). */
static int
scope_ok(const struct mcp_req *r, const char *p)
{
	char sid[IPC_SID_MAX + 1];

	snprintf(sid, sizeof(sid), "%s%s", KG_SID_PREFIX, p);
	return ipc_scope_allows(r->scope, sid);
}

static struct mcp_op *
op_new(struct mcp_req *r, size_t i, const cJSON *id)
{
	struct mcp_op *op;

	if ((op = calloc(1, sizeof(*op))) == NULL)
		return NULL;
	op->r = r;
	op->i = i;
	op->id = cJSON_Duplicate(id, 1);
	return op;
}

/*
 * knowledge_act's batch id: a request id is never used twice in one MCP
 * session, so a client that sends the same request again (a retry after
 * a lost answer) records nothing twice.  "" without a session.
 */
static void
batch_id(const struct mcp_req *r, const cJSON *id, char *out, size_t len)
{
	char *key = NULL, *idtext = cJSON_PrintUnformatted(id), hex[65];

	out[0] = '\0';
	if (r->in_sid[0] != '\0' && idtext != NULL &&
	    asprintf(&key, "%s\n%s", r->in_sid, idtext) != -1) {
		kbt_sha256(key, strlen(key), hex);
		snprintf(out, len, "mcp-%.32s", hex);
	}
	free(key);
	free(idtext);
}

/* tools/call: NULL when the answer comes later. */
static cJSON *
m_tools_call(struct mcp_req *r, size_t i, const cJSON *id,
    const cJSON *params)
{
	const char *name = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(params, "name"));
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(params,
	    "arguments");
	struct kgcall_who who;
	struct mcp_op *op;
	cJSON *empty = NULL, *res, *arr, *t;
	const char *p;
	char msg[400], bid[40];
	int rc;

	if (name == NULL || kgtool_spec(name) == NULL) {
		snprintf(msg, sizeof(msg), "Unknown tool: %.100s (the tools are "
		    "%s and %s)", name ? name : "(params.name missing)",
		    KGTOOL_QUERY, KGTOOL_ACT);
		return rpc_error(id, E_PARAMS, msg);
	}
	if (args == NULL)
		args = empty = cJSON_CreateObject();
	rc = kgtool_check(name, args, msg, sizeof(msg));
	if (rc == -1) {
		cJSON_Delete(empty);
		return rpc_error(id, E_PARAMS, msg);
	}
	p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args,
	    "projectId"));
	if (!scope_ok(r, p)) {
		/* The tool refuses, as a result the model can read. */
		cJSON_Delete(empty);
		snprintf(msg, sizeof(msg), "FORBIDDEN: this token is scoped to "
		    "sessions that do not include this project's knowledge "
		    "(%s%s)", KG_SID_PREFIX, p);
		res = cJSON_CreateObject();
		arr = cJSON_AddArrayToObject(res, "content");
		t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "type", "text");
		cJSON_AddStringToObject(t, "text", msg);
		cJSON_AddItemToArray(arr, t);
		cJSON_AddTrueToObject(res, "isError");
		return rpc_result(id, res);
	}
	memset(&who, 0, sizeof(who));
	who.role = r->role;
	who.subject = r->subject;
	who.conn_id = r->conn_id;
	batch_id(r, id, bid, sizeof(bid));
	if ((op = op_new(r, i, id)) == NULL ||
	    kgtool_start(r->wk, name, args, bid[0] ? bid : NULL, &who,
	    tool_done, op) == NULL) {
		if (op != NULL)
			op_free(op);
		cJSON_Delete(empty);
		return rpc_error(id, E_INTERNAL, "out of memory");
	}
	cJSON_Delete(empty);
	r->pending++;
	return NULL;
}

/* The export (kgcall.c) as a ReadResourceResult. */
static void
read_done(void *arg, int status, const char *ctype, const char *body,
    size_t len, const char *err)
{
	struct mcp_op *op = arg;
	cJSON *res, *arr, *t, *root;
	const char *m;
	char msg[400];

	(void)ctype;
	if (status != 200) {
		root = status != 0 ? cJSON_ParseWithLength(body, len) : NULL;
		m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(root, "error"), "message"));
		snprintf(msg, sizeof(msg), "reading %s failed: %s", op->uri,
		    status == 0 ? err : m != NULL ? m : "the knowledge service "
		    "answered with an error");
		cJSON_Delete(root);
		req_answer(op->r, op->i, rpc_error(op->id, status == 404 ?
		    E_NOT_FOUND : status == 403 ? E_FORBIDDEN : E_INTERNAL,
		    msg));
		op_free(op);
		return;
	}
	res = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(res, "contents");
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "uri", op->uri);
	cJSON_AddStringToObject(t, "mimeType", op->json ? "application/json" :
	    "text/markdown");
	cJSON_AddStringToObject(t, "text", body);
	cJSON_AddItemToArray(arr, t);
	req_answer(op->r, op->i, rpc_result(op->id, res));
	op_free(op);
}

/* resources/read: NULL when the answer comes later. */
static cJSON *
m_read(struct mcp_req *r, size_t i, const cJSON *id, const cJSON *params)
{
	const char *uri = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(params, "uri"));
	char p[KG_PROJECT_MAX + 8], msg[400];
	struct kgcall_who who;
	struct mcp_op *op;
	size_t n;
	int json = 0;

	if (uri == NULL || strncmp(uri, URI_PREFIX, strlen(URI_PREFIX)) != 0 ||
	    (n = strlen(uri + strlen(URI_PREFIX))) == 0 || n >= sizeof(p)) {
		snprintf(msg, sizeof(msg), "unknown resource '%.200s': the "
		    "resources are " URI_PREFIX "PROJECT (Markdown) and "
		    URI_PREFIX "PROJECT/json", uri ? uri : "(params.uri "
		    "missing)");
		return rpc_error(id, uri == NULL ? E_PARAMS : E_NOT_FOUND, msg);
	}
	memcpy(p, uri + strlen(URI_PREFIX), n + 1);
	if (n > 5 && strcmp(p + n - 5, "/json") == 0) {
		p[n - 5] = '\0';
		json = 1;
	}
	if (!kgtool_project_ok(p)) {
		snprintf(msg, sizeof(msg), "unknown resource '%.200s': a "
		    "projectId is 1 to %d of A-Z a-z 0-9 . _ - not starting "
		    "with '.'", uri, KG_PROJECT_MAX);
		return rpc_error(id, E_NOT_FOUND, msg);
	}
	if (!scope_ok(r, p))
		return rpc_error(id, E_FORBIDDEN, "this token is scoped to "
		    "sessions that do not include this project's knowledge");
	memset(&who, 0, sizeof(who));
	who.role = r->role;
	who.subject = r->subject;
	who.conn_id = r->conn_id;
	if ((op = op_new(r, i, id)) == NULL)
		return rpc_error(id, E_INTERNAL, "out of memory");
	snprintf(op->uri, sizeof(op->uri), "%s", uri);
	op->json = json;
	if (kgcall_start(r->wk, p, "GET", json ? "" : "?format=md", NULL, 0,
	    &who, read_done, op) == NULL) {
		op_free(op);
		return rpc_error(id, E_INTERNAL, "out of memory");
	}
	r->pending++;
	return NULL;
}

/*
 * Message i (m) of the POST: its answer now, or later (r->pending
 * raised), or none (a notification or a client's response).
 */
static void
handle(struct mcp_req *r, size_t i, const cJSON *m)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(m, "params");
	const char *method, *jv;
	char msg[200];

	jv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m,
	    "jsonrpc"));
	if (!cJSON_IsObject(m) || jv == NULL || strcmp(jv, "2.0") != 0) {
		r->out[i] = rpc_error(NULL, E_REQUEST, "not a JSON-RPC 2.0 "
		    "message: an object with \"jsonrpc\": \"2.0\" and a "
		    "\"method\"");
		return;
	}
	method = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m,
	    "method"));
	if (method == NULL) {
		/* A client's answer to a request of ours: there are none. */
		if (cJSON_HasObjectItem(m, "result") ||
		    cJSON_HasObjectItem(m, "error"))
			return;
		r->out[i] = rpc_error(id, E_REQUEST, "a request needs a string "
		    "\"method\"");
		return;
	}
	if (id == NULL)
		return;		/* a notification: nothing to answer */
	if (!cJSON_IsString(id) && !cJSON_IsNumber(id)) {
		r->out[i] = rpc_error(NULL, E_REQUEST, "\"id\" must be a "
		    "string or a number");
		return;
	}
	if (params != NULL && !cJSON_IsObject(params)) {
		r->out[i] = rpc_error(id, E_PARAMS, "\"params\" must be an "
		    "object");
		return;
	}
	if (strcmp(method, "initialize") == 0)
		r->out[i] = m_initialize(r, id, params);
	else if (strcmp(method, "ping") == 0)
		r->out[i] = rpc_result(id, cJSON_CreateObject());
	else if (strcmp(method, "tools/list") == 0)
		r->out[i] = m_tools_list(id);
	else if (strcmp(method, "tools/call") == 0)
		r->out[i] = m_tools_call(r, i, id, params);
	else if (strcmp(method, "resources/list") == 0) {
		/* The projects are many and open-ended: the templates name
		 * them. */
		r->out[i] = rpc_result(id, cJSON_CreateObject());
		cJSON_AddArrayToObject(cJSON_GetObjectItem(r->out[i],
		    "result"), "resources");
	} else if (strcmp(method, "resources/templates/list") == 0)
		r->out[i] = m_templates(id);
	else if (strcmp(method, "resources/read") == 0)
		r->out[i] = m_read(r, i, id, params);
	else {
		snprintf(msg, sizeof(msg), "Method not found: %.100s", method);
		r->out[i] = rpc_error(id, E_METHOD, msg);
	}
}

/* An HTTP-level refusal with a JSON-RPC error body (no id). */
static void
refuse(struct conn *c, int st, int code, const char *msg)
{
	reply_one(c, st, rpc_error(NULL, code, msg), NULL);
}

/* Whether an Mcp-Session-Id can be one this server handed out. */
static int
sid_ours(const char *v)
{
	size_t n = strlen(SID_PREFIX);

	return strncmp(v, SID_PREFIX, n) == 0 && strlen(v + n) == 32 &&
	    strspn(v + n, "0123456789abcdef") == 32;
}

static void
post(struct conn *c)
{
	const struct http_request *hr = &c->hp.req;
	const char *ct = http_header(hr, "Content-Type");
	const char *sid = http_header(hr, "Mcp-Session-Id");
	const char *pv = http_header(hr, "MCP-Protocol-Version");
	struct mcp_req *r;
	cJSON *body;
	char msg[300];
	size_t i, n;
	int batch;

	if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0) {
		refuse(c, 415, E_REQUEST, "Content-Type must be "
		    "application/json: one JSON-RPC message");
		return;
	}
	if (hr->body_len > KGMCP_BODY_MAX) {
		refuse(c, 413, E_REQUEST, "the body is over 2 MiB");
		return;
	}
	if (sid != NULL && !sid_ours(sid)) {
		refuse(c, 404, E_REQUEST, "unknown Mcp-Session-Id: not one this "
		    "server handed out; send initialize again, without it");
		return;
	}
	if (pv != NULL && !supported(pv)) {
		snprintf(msg, sizeof(msg), "unsupported MCP-Protocol-Version "
		    "'%.40s': this server speaks 2025-06-18, 2025-03-26 and "
		    "2024-11-05", pv);
		refuse(c, 400, E_REQUEST, msg);
		return;
	}
	if (hr->body_len == 0) {
		refuse(c, 400, E_PARSE, "the body is empty: send one JSON-RPC "
		    "message");
		return;
	}
	if ((body = proto_json(hr->body, hr->body_len,
	    c->wk->conf->max_json_depth, msg, sizeof(msg))) == NULL) {
		refuse(c, 400, E_PARSE, msg);
		return;
	}
	batch = cJSON_IsArray(body);
	n = batch ? (size_t)cJSON_GetArraySize(body) : 1;
	if (batch && pv != NULL && strcmp(pv, "2025-06-18") == 0) {
		cJSON_Delete(body);
		refuse(c, 400, E_REQUEST, "JSON-RPC batches are not part of "
		    "protocol revision 2025-06-18: send one message per POST");
		return;
	}
	if (batch && (n == 0 || n > KGMCP_BATCH_MAX)) {
		cJSON_Delete(body);
		refuse(c, 400, E_REQUEST, n == 0 ? "an empty batch" : "a batch "
		    "of more than 64 messages");
		return;
	}
	if (!batch && !cJSON_IsObject(body)) {
		cJSON_Delete(body);
		refuse(c, 400, E_REQUEST, "not a JSON-RPC 2.0 message: an "
		    "object with \"jsonrpc\": \"2.0\" and a \"method\"");
		return;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->out = calloc(n, sizeof(*r->out))) == NULL) {
		free(r);
		cJSON_Delete(body);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	r->wk = c->wk;
	r->c = c;
	r->conn_id = c->ic.conn_id;
	r->role = (int)c->ic.role;
	snprintf(r->subject, sizeof(r->subject), "%s", c->ic.subject);
	snprintf(r->scope, sizeof(r->scope), "%s", c->ic.scope);
	if (sid != NULL)
		snprintf(r->in_sid, sizeof(r->in_sid), "%s", sid);
	r->batch = batch;
	r->n = n;
	r->pending = 1;		/* until every message was looked at */
	for (i = 0; i < n; i++)
		handle(r, i, batch ? cJSON_GetArrayItem(body, (int)i) : body);
	cJSON_Delete(body);
	/* A single message the server cannot take is an HTTP error too. */
	if (!batch && r->pending == 1 && r->out[0] != NULL &&
	    cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(
	    r->out[0], "error"), "code")) == E_REQUEST) {
		reply_one(c, 400, r->out[0], NULL);
		r->out[0] = NULL;
		req_free(r);
		return;
	}
	if (--r->pending == 0)
		req_reply(r);
}

int
kgmcp_http(struct conn *c)
{
	const struct http_request *hr = &c->hp.req;

	if (strcmp(hr->path, KGMCP_PATH) != 0)
		return 0;
	if (strcmp(hr->method, "POST") == 0)
		post(c);
	else {
		/* No stream of our own (GET), no state to end (DELETE). */
		static const char m[] = "{\"error\":{\"code\":\"BAD_REQUEST\","
		    "\"message\":\"use POST /mcp: this MCP server sends no "
		    "stream of its own and keeps no session to end\"}}";

		conn_respond(c, 405, m, sizeof(m) - 1, "Allow: POST\r\n");
		c->closing = c->close_sent = 1;
	}
	return 1;
}
