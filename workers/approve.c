/*
 * Tool approvals: the request and its answer are events of the session's
 * log; meta keeps what is pending so that session_state can list it and a
 * new owner can wait on.  Nothing here runs or stops a tool: turn.c does,
 * on what these functions return.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/proto.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "approve.h"
#include "auditlog.h"
#include "sess.h"

#define MAX_ANSWERED	64	/* ids of answered calls kept for duplicates */
#define SUMMARY_ARGS	96	/* bytes of the arguments in a summary */

/* The array meta keeps under key, made when absent. */
static cJSON *
meta_array(struct sess *s, const char *key)
{
	cJSON *a = cJSON_GetObjectItem(s->meta, key);

	if (!cJSON_IsArray(a)) {
		a = cJSON_CreateArray();
		proto_set(s->meta, key, a);
	}
	return a;
}

/* Index of call id in meta's waiting list, or -1. */
static int
waiting_find(struct sess *s, const char *id, cJSON **w)
{
	cJSON *a = meta_array(s, "waiting"), *e;
	int i = 0;

	cJSON_ArrayForEach(e, a) {
		const char *tid = cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "toolCallId"));

		if (tid != NULL && strcmp(tid, id) == 0) {
			*w = e;
			return i;
		}
		i++;
	}
	return -1;
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
	uint64_t now = util_now_ms();

	if (id == NULL)
		return 0;
	if (waiting_find(s, id, &w) >= 0)
		return (uint64_t)proto_count(w, "ts");
	b = call_fields(call);
	w = cJSON_Duplicate(b, 1);
	if (sess_emit(s, "tool_approve_request", b) == 0) {
		cJSON_Delete(w);
		return 0;
	}
	cJSON_AddNumberToObject(w, "ts", (double)now);
	cJSON_AddItemToArray(meta_array(s, "waiting"), w);
	sess_meta_save(s);
	return now;
}

/* Logs the audit_entry of call w (its fields as call_fields makes them). */
static uint64_t
audit_log(struct sess *s, const cJSON *w, const char *decision,
    const char *by)
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

	(void)audit_log(s, w, decision, "parleyd");
	cJSON_Delete(w);
}

/*
 * Logs the audit_entry that answers waiting entry w (index i), and forgets
 * w; returns the entry's seq, 0 when it could not be logged.
 */
static uint64_t
decide(struct sess *s, int i, cJSON *w, const char *decision, const char *by)
{
	cJSON *ans;
	uint64_t seq;

	/* Nothing changes unless the decision is in the log. */
	if ((seq = audit_log(s, w, decision, by)) == 0)
		return 0;
	if (strcmp(decision, "always") == 0 && !approve_always(s,
	    cJSON_GetStringValue(cJSON_GetObjectItem(w, "tool"))))
		cJSON_AddItemToArray(meta_array(s, "alwaysAllow"),
		    cJSON_Duplicate(cJSON_GetObjectItem(w, "tool"), 1));
	ans = meta_array(s, "answered");
	cJSON_AddItemToArray(ans, cJSON_Duplicate(cJSON_GetObjectItem(w,
	    "toolCallId"), 1));
	while (cJSON_GetArraySize(ans) > MAX_ANSWERED)
		cJSON_DeleteItemFromArray(ans, 0);
	cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
	sess_meta_save(s);
	return seq;
}

int
approve_answer(struct sess *s, const char *id, const char *decision,
    const char *by, const char **logged_out, struct sess_result *r)
{
	static const char *words[][2] = { { "approve", "approved" },
	    { "reject", "rejected" }, { "always", "always" } };
	const char *logged = NULL;
	cJSON *w, *e;
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
	if ((i = waiting_find(s, id, &w)) < 0) {
		cJSON_ArrayForEach(e, meta_array(s, "answered"))
			if (cJSON_IsString(e) && strcmp(e->valuestring,
			    id) == 0) {
				r->duplicate = 1;
				r->http = 200;
				return 0;
			}
		sess_result_err(r, "NOT_FOUND", 404, "%s", "no approval is "
		    "pending for this toolCallId; session_state lists the "
		    "pending ones (pendingApprovals)");
		return -1;
	}
	if ((r->seq = decide(s, i, w, logged, by)) == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the decision could "
		    "not be logged; retry");
		return -1;
	}
	*logged_out = logged;
	return 1;
}

void
approve_close(struct sess *s, const char *id, const char *decision)
{
	cJSON *w;
	int i;

	/* Not listed as pending again even if the log refused the close. */
	if ((i = waiting_find(s, id, &w)) >= 0 &&
	    decide(s, i, w, decision, "parleyd") == 0) {
		cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
		sess_meta_save(s);
	}
}

void
approve_settle(struct sess *s, const char *id)
{
	cJSON *w;
	int i;

	if ((i = waiting_find(s, id, &w)) >= 0) {
		cJSON_DeleteItemFromArray(meta_array(s, "waiting"), i);
		sess_meta_save(s);
	}
}

void
approve_clear(struct sess *s)
{
	const char *id;
	cJSON *w;

	while ((w = cJSON_GetArrayItem(cJSON_GetObjectItem(s->meta,
	    "waiting"), 0)) != NULL) {
		if ((id = cJSON_GetStringValue(cJSON_GetObjectItem(w,
		    "toolCallId"))) == NULL) {
			cJSON_DeleteItemFromArray(meta_array(s, "waiting"), 0);
			continue;
		}
		approve_close(s, id, "cancelled");
	}
}

int
approve_always(struct sess *s, const char *tool)
{
	cJSON *e;

	if (tool == NULL)
		return 0;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(s->meta, "alwaysAllow"))
		if (cJSON_IsString(e) && strcmp(e->valuestring, tool) == 0)
			return 1;
	return 0;
}


cJSON *
approve_pending(struct sess *s)
{
	cJSON *a = cJSON_Duplicate(cJSON_GetObjectItem(s->meta, "waiting"),
	    1);

	return cJSON_IsArray(a) ? a : (cJSON_Delete(a), cJSON_CreateArray());
}

int
approve_runs(const char *decision)
{
	return strcmp(decision, "approved") == 0 ||
	    strcmp(decision, "always") == 0 || strcmp(decision, "auto") == 0;
}
