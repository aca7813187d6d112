/*
 * AG-UI's RunAgentInput as Parley client messages (agui_int.h): the last
 * user message a chat, resume[] entries tool_approve, trailing tool
 * messages mcp_result, the client's tools an mcp_tools registration of
 * the server "agui".  The body is checked whole here, before a session is
 * opened (agui.c checks the answers against the session before applying
 * any), so a bad body changes nothing.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/proto.h"
#include "agui_int.h"

static int
bad(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* Whether array a holds the string s. */
static int
has_id(const cJSON *a, const char *s)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, a)
		if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0)
			return 1;
	return 0;
}

static const char *
jstr(const cJSON *e, const char *k)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, k));
}

/*
 * A message's content as text: the string, or its text parts joined;
 * malloc'd, NULL when it is neither.
 */
static char *
content_text(const cJSON *c)
{
	const cJSON *p;
	size_t n = 0;
	char *t;

	if (cJSON_IsString(c))
		return strdup(c->valuestring);
	if (!cJSON_IsArray(c))
		return NULL;
	cJSON_ArrayForEach(p, c)
		if (jstr(p, "type") != NULL && strcmp(jstr(p, "type"),
		    "text") == 0 && jstr(p, "text") != NULL)
			n += strlen(jstr(p, "text"));
	if ((t = malloc(n + 1)) == NULL)
		return NULL;
	t[0] = '\0';
	cJSON_ArrayForEach(p, c)
		if (jstr(p, "type") != NULL && strcmp(jstr(p, "type"),
		    "text") == 0 && jstr(p, "text") != NULL)
			strcat(t, jstr(p, "text"));
	return t;
}

/* Whether a client tool name is one Parley takes (parley-protocol(7)). */
static int
tool_name_ok(const char *n)
{
	size_t i, len = strlen(n);

	if (len == 0 || len + sizeof(AGUI_SERVER) + 1 > 64)
		return 0;
	for (i = 0; i < len; i++)
		if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' &&
		    n[i] <= 'Z') || (n[i] >= '0' && n[i] <= '9') ||
		    n[i] == '_' || n[i] == '-'))
			return 0;
	return 1;
}

/*
 * Tool i as the session will check it (ctool.c's bounds), before anything
 * is opened: 0, or -1 with msg saying what is wrong.
 */
static int
tool_ok(const cJSON *t, int i, const cJSON *list, char *msg, size_t len)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(t, "description");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(t, "parameters");
	const cJSON *md, *h, *o;
	const char *name = jstr(t, "name");
	char *txt;
	size_t n;

	if (!cJSON_IsObject(t) || name == NULL || !tool_name_ok(name))
		return bad(msg, len, "tools[%d].name must be 1-58 letters, "
		    "digits, '_' or '-' (Parley offers it to the model as "
		    AGUI_SERVER "__NAME)", i);
	cJSON_ArrayForEach(o, list)
		if (strcmp(jstr(o, "name"), name) == 0)
			return bad(msg, len, "tools[%d]: name '%s' repeats an "
			    "earlier tool's; give each tool its own name", i,
			    name);
	if (d != NULL && !cJSON_IsNull(d) && (!cJSON_IsString(d) ||
	    strlen(d->valuestring) > AGUI_TOOL_DESC_MAX))
		return bad(msg, len, "tools[%d].description must be a string "
		    "of at most %d bytes", i, AGUI_TOOL_DESC_MAX);
	if (p != NULL && !cJSON_IsObject(p) && !cJSON_IsNull(p))
		return bad(msg, len, "tools[%d].parameters must be a JSON "
		    "Schema object", i);
	if (cJSON_IsObject(p)) {
		if ((txt = cJSON_PrintUnformatted(p)) == NULL)
			return bad(msg, len, "out of memory; retry");
		n = strlen(txt);
		free(txt);
		if (n > AGUI_TOOL_SCHEMA_MAX)
			return bad(msg, len, "tools[%d].parameters is longer "
			    "than %d bytes as JSON", i, AGUI_TOOL_SCHEMA_MAX);
	}
	md = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(t,
	    "metadata"), "annotations");
	if (md != NULL && !cJSON_IsObject(md))
		return bad(msg, len, "tools[%d].metadata.annotations must be "
		    "an object of MCP hints (readOnlyHint, ...)", i);
	cJSON_ArrayForEach(h, md)
		if (!cJSON_IsBool(h) && !cJSON_IsString(h))
			return bad(msg, len, "tools[%d].metadata.annotations."
			    "%.40s must be a boolean (a title a string)", i,
			    h->string ? h->string : "?");
	return 0;
}

/*
 * The mcp_tools registration of the client's tools, or -1.  Every tool is
 * checked here as the session would (tool_ok), so a bad one is refused
 * before a session is opened or made.
 */
static int
tools_of(const cJSON *tools, const char *sid, cJSON *inputs, char *msg,
    size_t len)
{
	const cJSON *t, *p, *md;
	cJSON *m, *list, *o;
	const char *name;
	int i = 0;

	if (tools == NULL || cJSON_IsNull(tools))
		return 0;
	if (!cJSON_IsArray(tools))
		return bad(msg, len, "field 'tools' must be an array of "
		    "{name, description, parameters}");
	if (cJSON_GetArraySize(tools) == 0)
		return 0;
	if (cJSON_GetArraySize(tools) > AGUI_TOOLS_MAX)
		return bad(msg, len, "field 'tools': at most %d tools",
		    AGUI_TOOLS_MAX);
	list = cJSON_CreateArray();
	cJSON_ArrayForEach(t, tools) {
		if (tool_ok(t, i, list, msg, len) == -1) {
			cJSON_Delete(list);
			return -1;
		}
		name = jstr(t, "name");
		p = cJSON_GetObjectItemCaseSensitive(t, "parameters");
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "server", AGUI_SERVER);
		cJSON_AddStringToObject(o, "name", name);
		if (jstr(t, "description") != NULL)
			cJSON_AddStringToObject(o, "description", jstr(t,
			    "description"));
		if (cJSON_IsObject(p))
			cJSON_AddItemToObject(o, "inputSchema",
			    cJSON_Duplicate(p, 1));
		/* An extension: MCP annotations (readOnlyHint...) in the
		 * tool's metadata decide its risk as for any MCP tool. */
		md = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(t,
		    "metadata"), "annotations");
		if (cJSON_IsObject(md))
			cJSON_AddItemToObject(o, "annotations",
			    cJSON_Duplicate(md, 1));
		cJSON_AddItemToArray(list, o);
		i++;
	}
	m = proto_head("mcp_tools", sid);
	cJSON_AddItemToObject(m, "tools", list);
	cJSON_AddItemToObject(m, "servers", cJSON_CreateStringArray(
	    (const char *[]){ AGUI_SERVER }, 1));
	cJSON_AddItemToArray(inputs, m);
	return 0;
}

/* tool_approve for each resume entry, or -1. */
static int
resume_of(const cJSON *resume, const char *sid, struct agui_req *rq,
    char *msg, size_t len)
{
	const cJSON *r, *p, *ok;
	const char *id, *status;
	cJSON *m;
	int i = 0;

	cJSON_ArrayForEach(r, resume) {
		if ((id = jstr(r, "interruptId")) == NULL || id[0] == '\0' ||
		    strlen(id) > PROTO_ID_MAX)
			return bad(msg, len, "resume[%d].interruptId must be "
			    "the id of an interrupt of the run that ended (its "
			    "toolCallId)", i);
		status = jstr(r, "status");
		p = cJSON_GetObjectItemCaseSensitive(r, "payload");
		ok = cJSON_GetObjectItemCaseSensitive(p, "approved");
		if (status == NULL || (strcmp(status, "resolved") != 0 &&
		    strcmp(status, "cancelled") != 0))
			return bad(msg, len, "resume[%d].status must be "
			    "\"resolved\" or \"cancelled\"", i);
		if (strcmp(status, "resolved") == 0 && !cJSON_IsBool(ok))
			return bad(msg, len, "resume[%d].payload must be "
			    "{\"approved\": true|false} (the interrupt's "
			    "responseSchema)", i);
		if (has_id(rq->answered, id))
			return bad(msg, len, "resume[%d]: interrupt '%.64s' is "
			    "answered twice", i, id);
		m = proto_head("tool_approve", sid);
		cJSON_AddStringToObject(m, "toolCallId", id);
		cJSON_AddStringToObject(m, "decision", strcmp(status,
		    "resolved") == 0 && cJSON_IsTrue(ok) ? "approve" :
		    "reject");
		cJSON_AddItemToArray(rq->inputs, m);
		cJSON_AddItemToArray(rq->answered, cJSON_CreateString(id));
		i++;
	}
	return 0;
}

/* Whether tool message t is one Parley's TOOL_CALL_RESULT made. */
static int
own_result(const cJSON *t, const char *call)
{
	const char *id = jstr(t, "id");
	size_t n = sizeof(AGUI_RESULT_PREFIX) - 1;

	return id != NULL && strncmp(id, AGUI_RESULT_PREFIX, n) == 0 &&
	    strcmp(id + n, call) == 0;
}

/* mcp_result for each tool message at the end of messages, or -1. */
static int
answers_of(const cJSON *msgs, const char *sid, struct agui_req *rq,
    char *msg, size_t len)
{
	int n = cJSON_GetArraySize(msgs), first = n, i;
	const cJSON *t;
	const char *id, *role;
	char *text;
	cJSON *m;

	while (first > 0 && (role = jstr(cJSON_GetArrayItem(msgs,
	    first - 1), "role")) != NULL && strcmp(role, "tool") == 0)
		first--;
	if (n - first > AGUI_ANSWERS_MAX)
		return bad(msg, len, "at most %d tool messages answer a run",
		    AGUI_ANSWERS_MAX);
	for (i = first; i < n; i++) {
		t = cJSON_GetArrayItem(msgs, i);
		if ((id = jstr(t, "toolCallId")) == NULL || id[0] == '\0' ||
		    strlen(id) > PROTO_ID_MAX)
			return bad(msg, len, "messages[%d].toolCallId must name "
			    "the pending tool call it answers", i);
		/* Parley's own results (TOOL_CALL_RESULT) answer nothing. */
		if (has_id(rq->replied, id) || own_result(t, id))
			continue;
		if ((text = content_text(cJSON_GetObjectItemCaseSensitive(t,
		    "content"))) == NULL)
			return bad(msg, len, "messages[%d].content must be a "
			    "string or an array of parts", i);
		m = proto_head("mcp_result", sid);
		cJSON_AddStringToObject(m, "toolCallId", id);
		if (jstr(t, "error") != NULL)
			cJSON_AddStringToObject(m, "error", jstr(t, "error"));
		else
			cJSON_AddStringToObject(m, "result", text);
		free(text);
		cJSON_AddItemToArray(rq->inputs, m);
		cJSON_AddItemToArray(rq->replied, cJSON_CreateString(id));
	}
	return 0;
}

/* The last user message as a chat with the run's id, or -1. */
static int
chat_of(const cJSON *last, int i, const char *sid, size_t max_message,
    struct agui_req *rq, char *msg, size_t len)
{
	char *text, id[PROTO_ID_MAX + sizeof(AGUI_CHAT_PREFIX)];
	cJSON *m;

	if ((text = content_text(cJSON_GetObjectItemCaseSensitive(last,
	    "content"))) == NULL || text[0] == '\0') {
		free(text);
		return bad(msg, len, "messages[%d].content (the user message "
		    "this run answers) must be a non-empty string or text "
		    "parts", i);
	}
	if (strlen(text) > max_message) {
		free(text);
		return bad(msg, len, "messages[%d].content: at most %zu bytes",
		    i, max_message);
	}
	snprintf(id, sizeof(id), "%s%s", AGUI_CHAT_PREFIX, rq->run);
	m = proto_head("chat", sid);
	cJSON_AddStringToObject(m, "message", text);
	cJSON_AddStringToObject(m, "id", id);
	free(text);
	cJSON_AddItemToArray(rq->inputs, m);
	return 0;
}

void
agui_req_free(struct agui_req *rq)
{
	cJSON_Delete(rq->inputs);
	cJSON_Delete(rq->answered);
	cJSON_Delete(rq->replied);
	rq->inputs = rq->answered = rq->replied = NULL;
}

int
agui_parse(const cJSON *o, size_t max_message, struct agui_req *rq,
    char *msg, size_t len)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
	const cJSON *resume = cJSON_GetObjectItemCaseSensitive(o, "resume");
	const cJSON *last, *m;
	const char *thread = jstr(o, "threadId"), *run = jstr(o, "runId");
	const char *role;
	char idmsg[200];
	int n, i = 0, rc = -1;

	memset(rq, 0, sizeof(*rq));
	if (thread == NULL)
		return bad(msg, len, "field 'threadId' (the Parley session) "
		    "must be 1-128 characters of A-Z a-z 0-9 . _ : -");
	if (adapt_session_id(thread, idmsg, sizeof(idmsg)) == -1)
		return bad(msg, len, "field 'threadId': %s", idmsg);
	if (run == NULL || run[0] == '\0' || strlen(run) > PROTO_ID_MAX -
	    (sizeof(AGUI_CHAT_PREFIX) - 1))
		return bad(msg, len, "field 'runId' must be a string of 1-%zu "
		    "bytes", (size_t)PROTO_ID_MAX - (sizeof(AGUI_CHAT_PREFIX) -
		    1));
	if (!cJSON_IsArray(msgs))
		return bad(msg, len, "field 'messages' must be an array of "
		    "AG-UI messages (the last one a user message, or tool "
		    "messages answering the run's pending tool calls)");
	cJSON_ArrayForEach(m, msgs) {
		if (!cJSON_IsObject(m) || jstr(m, "role") == NULL)
			return bad(msg, len, "messages[%d] must be an object "
			    "with a 'role'", i);
		i++;
	}
	if (resume != NULL && !cJSON_IsNull(resume) && (!cJSON_IsArray(resume)
	    || cJSON_GetArraySize(resume) > AGUI_ANSWERS_MAX))
		return bad(msg, len, "field 'resume' must be an array of at "
		    "most %d {interruptId, status, payload}", AGUI_ANSWERS_MAX);
	snprintf(rq->thread, sizeof(rq->thread), "%s", thread);
	snprintf(rq->run, sizeof(rq->run), "%s", run);
	rq->inputs = cJSON_CreateArray();
	rq->answered = cJSON_CreateArray();
	rq->replied = cJSON_CreateArray();
	n = cJSON_GetArraySize(msgs);
	last = n > 0 ? cJSON_GetArrayItem(msgs, n - 1) : NULL;
	role = last != NULL ? jstr(last, "role") : "";
	if (cJSON_GetArraySize(resume) > 0) {
		rq->kind = AGUI_ANSWER;
		if (resume_of(resume, thread, rq, msg, len) == -1 ||
		    (strcmp(role, "tool") == 0 && answers_of(msgs, thread, rq,
		    msg, len) == -1))
			goto out;
	} else if (strcmp(role, "tool") == 0) {
		rq->kind = AGUI_ANSWER;
		if (answers_of(msgs, thread, rq, msg, len) == -1)
			goto out;
		if (cJSON_GetArraySize(rq->inputs) == 0) {
			bad(msg, len, "nothing to run: the tool messages at the "
			    "end are results Parley sent; add a user message, "
			    "or a tool message answering a pending tool call");
			goto out;
		}
	} else if (strcmp(role, "user") == 0) {
		rq->kind = AGUI_CHAT;
		/* The tools first: the turn the chat starts offers them. */
		if (tools_of(cJSON_GetObjectItemCaseSensitive(o, "tools"),
		    thread, rq->inputs, msg, len) == -1 ||
		    chat_of(last, n - 1, thread, max_message, rq, msg,
		    len) == -1)
			goto out;
	} else {
		bad(msg, len, "nothing to run: the last message must be a user "
		    "message (a new run), or tool messages answering the "
		    "pending tool calls, or 'resume' must answer the "
		    "interrupts of the run that ended");
		goto out;
	}
	rc = 0;
out:
	if (rc == -1)
		agui_req_free(rq);
	return rc;
}
