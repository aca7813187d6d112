/*
 * Requests that wait for someone: a tool approval (tool_approve_request,
 * answered by an audit_entry) and a client-side tool call (mcp_call,
 * answered by its tool_result).  The request and its answer are events
 * of the session's log; meta keeps what is pending ("kind" "call" for a
 * client's call) so that session_state can list it and a new owner can
 * wait on.  Nothing here runs or stops a tool: tools.c does, on what
 * these functions return.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/proto.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "approve.h"
#include "auditlog.h"
#include "mcp.h"
#include "sess.h"
#include "wk.h"

#define MAX_ANSWERED	64	/* ids of answered calls kept for duplicates */
#define SUMMARY_ARGS	96	/* bytes of the arguments in a summary */

static uint64_t	wait_keep(struct sess *, cJSON *, const char *kind,
		    const cJSON *full, uint64_t ts);
static uint64_t	result_log(struct sess *, int, cJSON *, int is_error,
		    const char *text, const char *code, cJSON **logged);
static uint64_t	elicit_log(struct sess *, int, cJSON *, const char *action,
		    const cJSON *content, const char *by);

/* The array meta keeps under key, made when absent. */
static cJSON *
meta_array(struct sess *s, const char *key)
{
	cJSON *a = cJSON_GetObjectItem(sess_meta(s), key);

	if (!cJSON_IsArray(a)) {
		a = cJSON_CreateArray();
		proto_set(sess_meta(s), key, a);
	}
	return a;
}

/*
 * Index of request id in meta's waiting list, or -1: a call's
 * toolCallId, or a question's elicitationId.
 */
static const char *
wait_id(const cJSON *w)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(w,
	    "elicitationId"));

	if (id == NULL)
		id = cJSON_GetStringValue(cJSON_GetObjectItem(w, "actionId"));
	return id != NULL ? id : cJSON_GetStringValue(cJSON_GetObjectItem(w,
	    "toolCallId"));
}

static int
waiting_find(struct sess *s, const char *id, cJSON **w)
{
	cJSON *a = meta_array(s, "waiting"), *e;
	int i = 0;

	cJSON_ArrayForEach(e, a) {
		const char *tid = wait_id(e);

		if (tid != NULL && strcmp(tid, id) == 0) {
			*w = e;
			return i;
		}
		i++;
	}
	return -1;
}

/*
 * A waiting entry's kind: an approval, a client's call, a question, an
 * agent's proposed action (action.c's, which outlives any turn).
 */
enum wait_kind {
	WAIT_APPROVAL,
	WAIT_CALL,
	WAIT_ELICIT,
	WAIT_ACTION
};

static enum wait_kind
kind_of(const cJSON *w)
{
	const char *k = cJSON_GetStringValue(cJSON_GetObjectItem(w, "kind"));

	if (k != NULL && strcmp(k, "call") == 0)
		return WAIT_CALL;
	if (k != NULL && strcmp(k, "elicit") == 0)
		return WAIT_ELICIT;
	if (k != NULL && strcmp(k, "action") == 0)
		return WAIT_ACTION;
	return WAIT_APPROVAL;
}

static int
is_call(const cJSON *w)
{
	return kind_of(w) == WAIT_CALL;
}

/* Remembers id as answered (for duplicates) and forgets waiting entry i. */
static void
answered(struct sess *s, int i, const char *id)
{
	cJSON *ans = meta_array(s, "answered");

	if (id != NULL)
		cJSON_AddItemToArray(ans, cJSON_CreateString(id));
	while (cJSON_GetArraySize(ans) > MAX_ANSWERED)
		cJSON_DeleteItemFromArray(ans, 0);
	cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
	sess_meta_save(s);
}

/* 1 when id was answered lately. */
static int
was_answered(struct sess *s, const char *id)
{
	return proto_holds(meta_array(s, "answered"), id);
}

/*
 * The waiting entry an answer is for: its index (w set), or -1 with r
 * saying why there is none: a repeat of an answer (duplicate, 0 to the
 * caller) or nothing of this kind (calls: client calls) waits (NOT_FOUND).
 */
static int
answer_find(struct sess *s, const char *id, enum wait_kind kind, cJSON **w,
    struct sess_result *r)
{
	static const char *what[][3] = {
		{ "approval", "toolCallId", "pendingApprovals" },
		{ "client tool call", "toolCallId", "pendingClientCalls" },
		{ "question", "elicitationId", "pendingElicitations" } };
	int i = waiting_find(s, id, w);
	uint64_t limit = kind == WAIT_APPROVAL ?
	    s->wk->conf->approval_timeout_ms : kind == WAIT_CALL ?
	    s->wk->conf->client_tool_timeout_ms : 0;
	char at[32];

	/* Past its timeout while its session was out of memory: it is
	 * closed now, and the late answer changes nothing. */
	if (i >= 0 && kind_of(*w) == kind && limit > 0 &&
	    (uint64_t)proto_count(*w, "ts") + limit <= util_now_ms()) {
		util_iso8601(at, (uint64_t)proto_count(*w, "ts") + limit);
		approve_close(s, id, "timeout");
		sess_result_err(r, "NOT_FOUND", 404, "this request expired at "
		    "%s (%s) and was answered timeout; the answer was not "
		    "applied", at, kind == WAIT_APPROVAL ? "approval-timeout" :
		    "client-tool-timeout");
		return -1;
	}
	if (i >= 0 && kind_of(*w) == kind)
		return i;
	if (i < 0 && was_answered(s, id)) {
		r->duplicate = 1;
		r->http = 200;
		return -1;
	}
	sess_result_err(r, "NOT_FOUND", 404, "no %s is pending for this %s; "
	    "session_state lists the pending ones (%s)", what[kind][0],
	    what[kind][1], what[kind][2]);
	return -1;
}

/*
 * Logs request b (consumed) as an event of type and waits for its answer:
 * meta's waiting list gets a copy, of kind (NULL: an approval), with the
 * tool's full name (client calls) and the time asked, which it returns
 * (ms since the epoch); 0 when it could not be logged.
 */
static uint64_t
ask(struct sess *s, const char *type, cJSON *b, const char *kind,
    const cJSON *full)
{
	cJSON *w = cJSON_Duplicate(b, 1);
	uint64_t now = util_now_ms();

	if (sess_emit(s, type, b) == 0) {
		cJSON_Delete(w);
		return 0;
	}
	return wait_keep(s, w, kind, full, now);
}

/* Meta's waiting list takes w (consumed), asked at ts; returns ts. */
static uint64_t
wait_keep(struct sess *s, cJSON *w, const char *kind, const cJSON *full,
    uint64_t ts)
{
	if (kind != NULL)
		cJSON_AddStringToObject(w, "kind", kind);
	if (full != NULL)
		cJSON_AddItemToObject(w, "fullName", cJSON_Duplicate(full, 1));
	cJSON_AddNumberToObject(w, "ts", (double)ts);
	cJSON_AddItemToArray(meta_array(s, "waiting"), w);
	sess_meta_save(s);
	return ts;
}

/* "tool(arguments…)", a line a person can decide on. */
static void
summary(char *out, size_t len, const char *tool, const char *args)
{
	size_t n = args ? strlen(args) : 0;

	/* A cut inside a UTF-8 sequence would not be valid text. */
	if (n > SUMMARY_ARGS)
		snprintf(out, len, "%s(%.*s...)", tool,
		    (int)utf8_whole(args, SUMMARY_ARGS), args);
	else
		snprintf(out, len, "%s(%s)", tool, n ? args : "");
}

/* A copy of call (its tool_start fields) with the summary a person reads. */
static cJSON *
call_fields(const cJSON *call)
{
	char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(call, "args"));
	char sum[SUMMARY_ARGS + 160];
	cJSON *b = cJSON_Duplicate(call, 1);

	summary(sum, sizeof(sum), cJSON_GetStringValue(cJSON_GetObjectItem(
	    call, "tool")), args);
	cJSON_AddStringToObject(b, "summary", sum);
	free(args);
	return b;
}

uint64_t
approve_request(struct sess *s, const cJSON *call)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(call,
	    "toolCallId"));
	cJSON *b, *w;

	if (id == NULL)
		return 0;
	if (waiting_find(s, id, &w) >= 0)
		return (uint64_t)proto_count(w, "ts");
	b = call_fields(call);
	return ask(s, "tool_approve_request", b, NULL, NULL);
}

/* Logs the audit_entry of call w (its fields as call_fields makes them). */
static uint64_t
audit_log(struct sess *s, const cJSON *w, const char *decision,
    const char *by, const char *subject)
{
	cJSON *b = cJSON_CreateObject();
	static const char *copy[] = { "agentId", "messageId", "step",
	    "toolCallId", "tool", "risk", "summary" };
	char ts[32];
	size_t k;

	for (k = 0; k < sizeof(copy) / sizeof(copy[0]); k++)
		cJSON_AddItemToObject(b, copy[k], cJSON_Duplicate(
		    cJSON_GetObjectItem(w, copy[k]), 1));
	cJSON_AddStringToObject(b, "decision", decision);
	cJSON_AddStringToObject(b, "by", by);
	if (subject != NULL && subject[0] != '\0')
		cJSON_AddStringToObject(b, "subject", subject);
	util_iso8601(ts, util_now_ms());
	cJSON_AddStringToObject(b, "timestamp", ts);
	if (cJSON_IsNumber(cJSON_GetObjectItem(w, "ts")))
		cJSON_AddNumberToObject(b, "askedAt", proto_count(w, "ts"));
	return auditlog_event(s, sess_emit(s, "audit_entry", b));
}

void
approve_audit(struct sess *s, const cJSON *call, const char *decision)
{
	cJSON *w = call_fields(call);

	(void)audit_log(s, w, decision, "parleyd", NULL);
	cJSON_Delete(w);
}

/*
 * Logs the audit_entry that answers waiting entry w (index i), and forgets
 * w; returns the entry's seq, 0 when it could not be logged.
 */
static uint64_t
decide(struct sess *s, int i, cJSON *w, const char *decision, const char *by,
    const char *subject)
{
	uint64_t seq;

	/* Nothing changes unless the decision is in the log. */
	if ((seq = audit_log(s, w, decision, by, subject)) == 0)
		return 0;
	if (strcmp(decision, "always") == 0 && !approve_always(s,
	    cJSON_GetStringValue(cJSON_GetObjectItem(w, "tool"))))
		cJSON_AddItemToArray(meta_array(s, "alwaysAllow"),
		    cJSON_Duplicate(cJSON_GetObjectItem(w, "tool"), 1));
	answered(s, i, cJSON_GetStringValue(cJSON_GetObjectItem(w,
	    "toolCallId")));
	return seq;
}

/* An answer's outcome: logged at seq (1), or not (-1, r says so). */
static int
answer_logged(struct sess_result *r, uint64_t seq)
{
	if ((r->seq = seq) == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the answer could "
		    "not be logged; nothing changed, retry");
		return -1;
	}
	return 1;
}

int
approve_answer(struct sess *s, const char *id, const char *decision,
    const char *by, const char *subject, const char **logged_out,
    struct sess_result *r)
{
	static const char *words[][2] = { { "approve", "approved" },
	    { "reject", "rejected" }, { "always", "always" } };
	const char *logged = NULL;
	cJSON *w;
	size_t k;
	int i;

	for (k = 0; k < sizeof(words) / sizeof(words[0]); k++)
		if (strcmp(decision, words[k][0]) == 0)
			logged = words[k][1];
	if (logged == NULL) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "field 'decision' "
		    "must be approve, reject or always");
		return -1;
	}
	if ((i = answer_find(s, id, WAIT_APPROVAL, &w, r)) < 0)
		return r->duplicate ? 0 : -1;
	*logged_out = logged;
	return answer_logged(r, decide(s, i, w, logged, by, subject));
}

void
approve_close(struct sess *s, const char *id, const char *decision)
{
	cJSON *w;
	int i;

	if ((i = waiting_find(s, id, &w)) >= 0 && kind_of(w) == WAIT_ELICIT) {
		if (elicit_log(s, i, w, "cancel", NULL, "parleyd") == 0) {
			cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
			sess_meta_save(s);
		}
		return;
	}
	if (i >= 0 && is_call(w)) {
		if (result_log(s, i, w, 1, strcmp(decision, "timeout") == 0 ?
		    "no client answered the call in time (client-tool-timeout)"
		    : "the call was cancelled before a client answered it",
		    strcmp(decision, "timeout") == 0 ? "TOOL_TIMEOUT" :
		    "TOOL_ERROR", NULL) == 0) {
			cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
			sess_meta_save(s);
		}
		return;
	}
	/* Not listed as pending again even if the log refused the close. */
	if (i >= 0 && decide(s, i, w, decision, "parleyd", NULL) == 0) {
		cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
		sess_meta_save(s);
	}
}

void
approve_settle(struct sess *s, const char *id)
{
	cJSON *w;
	int i;

	if ((i = waiting_find(s, id, &w)) >= 0 &&
	    kind_of(w) == WAIT_APPROVAL) {
		cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
		sess_meta_save(s);
	}
}

void
approve_clear(struct sess *s)
{
	const char *id;
	cJSON *w;
	int i = 0;

	/* An action is no turn's: it stays (action.c ends it). */
	while ((w = cJSON_GetArrayItem(cJSON_GetObjectItem(sess_meta(s),
	    "waiting"), i)) != NULL) {
		if (kind_of(w) == WAIT_ACTION) {
			i++;
			continue;
		}
		if ((id = wait_id(w)) != NULL)
			approve_close(s, id, "cancelled");
		/* Closed, or not closable: either way it waits no more. */
		if (cJSON_GetArrayItem(cJSON_GetObjectItem(sess_meta(s),
		    "waiting"), i) == w) {
			cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
			sess_meta_save(s);
		}
	}
}

int
approve_always(struct sess *s, const char *tool)
{
	return proto_holds(cJSON_GetObjectItem(sess_meta(s), "alwaysAllow"),
	    tool);
}


cJSON *
approve_pending(struct sess *s, int kind)
{
	cJSON *a = cJSON_CreateArray(), *w, *c;

	cJSON_ArrayForEach(w, cJSON_GetObjectItem(sess_meta(s), "waiting")) {
		if ((int)kind_of(w) != kind)
			continue;
		c = cJSON_Duplicate(w, 1);
		cJSON_DeleteItemFromObject(c, "kind");
		cJSON_DeleteItemFromObject(c, "fullName");
		cJSON_AddItemToArray(a, c);
	}
	return a;
}

cJSON *
approve_entry(struct sess *s, const char *id, int kind)
{
	cJSON *w;

	if (waiting_find(s, id, &w) >= 0 && (int)kind_of(w) == kind)
		return w;
	return NULL;
}

int
approve_was_answered(struct sess *s, const char *id)
{
	return was_answered(s, id);
}

uint64_t
approve_keep(struct sess *s, cJSON *w, int kind, uint64_t ts)
{
	static const char *names[] = { NULL, "call", "elicit", "action" };

	return wait_keep(s, w, kind >= 0 && kind < 4 ? names[kind] : NULL,
	    NULL, ts);
}

int
approve_waits(struct sess *s, const char *id)
{
	cJSON *w;

	return waiting_find(s, id, &w) >= 0;
}

cJSON *
approve_result_body(const char *agent, const char *msgid, double step,
    const char *id, const char *tool, uint64_t ms, int is_error,
    const char *text, const char *code)
{
	cJSON *b = cJSON_CreateObject(), *e;

	cJSON_AddStringToObject(b, "agentId", agent ? agent : "");
	cJSON_AddStringToObject(b, "messageId", msgid ? msgid : "");
	cJSON_AddNumberToObject(b, "step", step);
	cJSON_AddStringToObject(b, "toolCallId", id);
	cJSON_AddStringToObject(b, "tool", tool ? tool : "");
	cJSON_AddNumberToObject(b, "duration", (double)ms);
	if (is_error) {
		e = cJSON_AddObjectToObject(b, "error");
		cJSON_AddStringToObject(e, "code", code ? code : "TOOL_ERROR");
		cJSON_AddStringToObject(e, "message", text);
	} else
		cJSON_AddStringToObject(b, "result", text);
	return b;
}

/*
 * Logs the tool_result that answers client call w (index i) and forgets
 * it; *logged (when not NULL) gets a copy of the body.  The seq, or 0.
 */
static uint64_t
result_log(struct sess *s, int i, cJSON *w, int is_error, const char *text,
    const char *code, cJSON **logged)
{
	uint64_t now = util_now_ms(), ts = (uint64_t)proto_count(w, "ts");
	cJSON *b;
	uint64_t seq;

	b = approve_result_body(cJSON_GetStringValue(cJSON_GetObjectItem(w,
	    "agentId")), cJSON_GetStringValue(cJSON_GetObjectItem(w,
	    "messageId")), proto_count(w, "step"), cJSON_GetStringValue(
	    cJSON_GetObjectItem(w, "toolCallId")), cJSON_GetStringValue(
	    cJSON_GetObjectItem(w, "fullName")), now > ts ? now - ts : 0,
	    is_error, text, code);
	if (logged != NULL)
		*logged = cJSON_Duplicate(b, 1);
	if ((seq = sess_emit(s, "tool_result", b)) == 0) {
		if (logged != NULL) {
			cJSON_Delete(*logged);
			*logged = NULL;
		}
		return 0;
	}
	answered(s, i, cJSON_GetStringValue(cJSON_GetObjectItem(w,
	    "toolCallId")));
	return seq;
}

uint64_t
approve_call(struct sess *s, const cJSON *call, const char *server,
    const char *name)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(call,
	    "toolCallId"));
	static const char *copy[] = { "agentId", "messageId", "step",
	    "toolCallId", "args", "risk" };
	cJSON *b, *w;
	size_t k;

	if (id == NULL)
		return 0;
	if (waiting_find(s, id, &w) >= 0)
		return (uint64_t)proto_count(w, "ts");
	b = cJSON_CreateObject();
	for (k = 0; k < sizeof(copy) / sizeof(copy[0]); k++)
		cJSON_AddItemToObject(b, copy[k], cJSON_Duplicate(
		    cJSON_GetObjectItem(call, copy[k]), 1));
	cJSON_AddStringToObject(b, "server", server);
	cJSON_AddStringToObject(b, "tool", name);
	return ask(s, "mcp_call", b, "call", cJSON_GetObjectItem(call, "tool"));
}

int
approve_result(struct sess *s, const char *id, int is_error,
    const char *text, const char *code, cJSON **logged,
    struct sess_result *r)
{
	cJSON *w;
	int i;

	if ((i = answer_find(s, id, WAIT_CALL, &w, r)) < 0)
		return r->duplicate ? 0 : -1;
	return answer_logged(r, result_log(s, i, w, is_error, text, code,
	    logged));
}

int
approve_runs(const char *decision)
{
	return strcmp(decision, "approved") == 0 ||
	    strcmp(decision, "always") == 0 || strcmp(decision, "auto") == 0;
}

uint64_t
approve_elicit(struct sess *s, const cJSON *call, const char *eid,
    const char *message, const char *schema_json)
{
	static const char *copy[] = { "agentId", "messageId", "step",
	    "toolCallId", "tool" };
	cJSON *b, *w, *sc;
	size_t k;

	if (waiting_find(s, eid, &w) >= 0)
		return (uint64_t)proto_count(w, "ts");
	b = cJSON_CreateObject();
	for (k = 0; k < sizeof(copy) / sizeof(copy[0]); k++)
		cJSON_AddItemToObject(b, copy[k], cJSON_Duplicate(
		    cJSON_GetObjectItem(call, copy[k]), 1));
	cJSON_AddStringToObject(b, "elicitationId", eid);
	cJSON_AddStringToObject(b, "message", message ? message : "");
	sc = schema_json ? cJSON_Parse(schema_json) : NULL;
	cJSON_AddItemToObject(b, "requestedSchema", sc ? sc :
	    cJSON_CreateObject());
	return ask(s, "elicitation_request", b, "elicit", NULL);
}

/* Logs the elicitation_result that answers question w (index i). */
static uint64_t
elicit_log(struct sess *s, int i, cJSON *w, const char *action,
    const cJSON *content, const char *by)
{
	static const char *copy[] = { "agentId", "messageId", "toolCallId",
	    "tool", "elicitationId" };
	cJSON *b = cJSON_CreateObject();
	uint64_t seq;
	size_t k;

	for (k = 0; k < sizeof(copy) / sizeof(copy[0]); k++)
		cJSON_AddItemToObject(b, copy[k], cJSON_Duplicate(
		    cJSON_GetObjectItem(w, copy[k]), 1));
	cJSON_AddStringToObject(b, "action", action);
	if (content != NULL)
		cJSON_AddItemToObject(b, "content", cJSON_Duplicate(content, 1));
	cJSON_AddStringToObject(b, "by", by);
	if ((seq = sess_emit(s, "elicitation_result", b)) == 0)
		return 0;
	answered(s, i, cJSON_GetStringValue(cJSON_GetObjectItem(w,
	    "elicitationId")));
	return seq;
}

int
approve_elicit_answer(struct sess *s, const char *eid, const char *action,
    const cJSON *content, const char *by, struct sess_result *r)
{
	cJSON *w;
	char *txt;
	size_t n;
	int i;

	if (strcmp(action, "accept") != 0 && strcmp(action, "decline") != 0 &&
	    strcmp(action, "cancel") != 0) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "field 'action' "
		    "must be accept, decline or cancel");
		return -1;
	}
	if ((strcmp(action, "accept") == 0) != cJSON_IsObject(content)) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "field 'content' "
		    "(an object of the requested fields) goes with accept, "
		    "and only with accept");
		return -1;
	}
	if (content != NULL && (txt = cJSON_PrintUnformatted(content)) != NULL) {
		n = strlen(txt);
		free(txt);
		if (n > MCP_MAX_ELICIT_TEXT) {
			sess_result_err(r, "BAD_REQUEST", 400, "field 'content' "
			    "is %zu bytes of JSON; at most %d are passed on to "
			    "an MCP server", n, MCP_MAX_ELICIT_TEXT);
			return -1;
		}
	}
	if ((i = answer_find(s, eid, WAIT_ELICIT, &w, r)) < 0)
		return r->duplicate ? 0 : -1;
	return answer_logged(r, elicit_log(s, i, w, action, content, by));
}

void
approve_clear_elicits(struct sess *s)
{
	const char *id;
	cJSON *w;
	int again = 1;

	while (again) {
		again = 0;
		cJSON_ArrayForEach(w, cJSON_GetObjectItem(sess_meta(s),
		    "waiting"))
			if (kind_of(w) == WAIT_ELICIT && (id =
			    cJSON_GetStringValue(cJSON_GetObjectItem(w,
			    "elicitationId"))) != NULL) {
				approve_close(s, id, "cancelled");
				again = 1;
				break;
			}
	}
}

/* A logged request's body, without the envelope every event has. */
static cJSON *
request_body(const cJSON *logged)
{
	static const char *envelope[] = { "v", "type", "seq", "ts",
	    "sessionId" };
	cJSON *w = cJSON_Duplicate(logged, 1);
	size_t k;

	for (k = 0; k < sizeof(envelope) / sizeof(envelope[0]); k++)
		cJSON_DeleteItemFromObject(w, envelope[k]);
	return w;
}

uint64_t
approve_adopt(struct sess *s, const cJSON *logged, int calls,
    const char *full, uint64_t ts)
{
	cJSON *f = full ? cJSON_CreateString(full) : NULL;
	uint64_t at;

	at = wait_keep(s, request_body(logged), calls ? "call" : NULL, f, ts);
	cJSON_Delete(f);
	return at;
}

void
approve_follow(struct sess *s, const char *type, const cJSON *ev,
    uint64_t ts)
{
	static const struct {
		const char	*ask, *answer, *id, *kind;
		enum wait_kind	 k;
	} kinds[] = {
		{ "tool_approve_request", "audit_entry", "toolCallId", NULL,
		    WAIT_APPROVAL },
		{ "mcp_call", "tool_result", "toolCallId", "call", WAIT_CALL },
		{ "elicitation_request", "elicitation_result",
		    "elicitationId", "elicit", WAIT_ELICIT } };
	const char *id;
	cJSON *w;
	size_t k;
	int i;

	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		id = cJSON_GetStringValue(cJSON_GetObjectItem(ev, kinds[k].id));
		if (id == NULL)
			continue;
		i = waiting_find(s, id, &w);
		if (strcmp(type, kinds[k].ask) == 0 && i < 0)
			(void)wait_keep(s, request_body(ev), kinds[k].kind,
			    NULL, ts);
		else if (strcmp(type, kinds[k].answer) == 0 && i >= 0 &&
		    kind_of(w) == kinds[k].k)
			answered(s, i, id);
	}
}

void
approve_answered(struct sess *s, const char *id)
{
	cJSON *w;
	int i;

	if ((i = waiting_find(s, id, &w)) >= 0)
		answered(s, i, id);
}
