/*
 * AG-UI's translation of a turn's logged events (agui.c has the table):
 * a pure function of the events from the turn's user_message, with the
 * hold of struct agui (agui_int.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "parley/proto.h"
#include "parley/util.h"
#include "adapt.h"
#include "agui_int.h"

/* Unix ms of a logged event's ts ("2026-11-26T12:17:55.723Z"), or 0. */
uint64_t
agui_ts_ms(const char *ts)
{
	struct tm tm;
	unsigned ms = 0;
	char *p;

	if (ts == NULL)
		return 0;
	memset(&tm, 0, sizeof(tm));
	if ((p = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return 0;
	if (*p == '.' && isdigit((unsigned char)p[1]) &&
	    isdigit((unsigned char)p[2]) && isdigit((unsigned char)p[3]))
		ms = (unsigned)((p[1] - '0') * 100 + (p[2] - '0') * 10 +
		    (p[3] - '0'));
	return (uint64_t)timegm(&tm) * 1000 + ms;
}

struct agui *
agui_new(void)
{
	struct agui *st;

	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NULL;
	st->cur.ids = 1;
	if ((st->started = cJSON_CreateObject()) == NULL ||
	    (st->appr = cJSON_CreateArray()) == NULL ||
	    (st->pend = cJSON_CreateArray()) == NULL ||
	    (st->answered = cJSON_CreateArray()) == NULL ||
	    (st->replied = cJSON_CreateArray()) == NULL) {
		agui_free(st);
		return NULL;
	}
	return st;
}

void
agui_free(void *arg)
{
	struct agui *st = arg;

	if (st == NULL)
		return;
	cJSON_Delete(st->started);
	cJSON_Delete(st->appr);
	cJSON_Delete(st->pend);
	cJSON_Delete(st->answered);
	cJSON_Delete(st->replied);
	cJSON_Delete(st->inputs);
	free(st->held);
	free(st);
}

/* Whether array a holds the string s. */
static int
has_str(const cJSON *a, const char *s)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, a)
		if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0)
			return 1;
	return 0;
}

static void
del_str(cJSON *a, const char *s)
{
	int i = 0;
	const cJSON *e;

	cJSON_ArrayForEach(e, a) {
		if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0) {
			cJSON_DeleteItemFromArray(a, i);
			return;
		}
		i++;
	}
}

/* What a translation of one event appends to, and how it ends. */
struct emit {
	struct agui	*st;
	uint64_t	 seq;
	uint64_t	 ts;
	char		**out;
	size_t		*len;
};

/*
 * Appends one AG-UI event {type, timestamp, ...o's fields} (o consumed)
 * to the held text while the stream holds, else to the output; a run's
 * start or end moves the hold (see struct agui).
 */
static void
emit(struct emit *em, const char *type, cJSON *o)
{
	struct agui *st = em->st;
	int start = strcmp(type, "RUN_STARTED") == 0;
	int fin = strcmp(type, "RUN_FINISHED") == 0 ||
	    strcmp(type, "RUN_ERROR") == 0;
	int dropped;
	cJSON *e = cJSON_CreateObject();

	cJSON_AddStringToObject(e, "type", type);
	if (em->ts > 0)
		cJSON_AddNumberToObject(e, "timestamp", (double)em->ts);
	if (o != NULL) {
		while (o->child != NULL) {
			cJSON *f = o->child;

			cJSON_AddItemToObject(e, f->string,
			    cJSON_DetachItemViaPointer(o, f));
		}
		cJSON_Delete(o);
	}
	if (st->holding) {
		if (start && !st->hold_answered) {
			/* Only the last run before the hold's end is shown. */
			free(st->held);
			st->held = NULL;
			st->heldlen = 0;
		}
		adapt_sse(&st->cur, &st->held, &st->heldlen, em->seq, e);
		if (start)
			st->held_end = 0;
		if (fin)
			st->held_end = 1;
		if (fin && st->hold_answered && st->names_answered) {
			/* The run the client answers: it has it. */
			free(st->held);
			st->held = NULL;
			st->heldlen = 0;
			st->held_end = 0;
		}
		return;
	}
	adapt_sse(&st->cur, em->out, em->len, em->seq, e);
	/* Left out by the cursor: the client has it (and its end). */
	dropped = em->seq < st->cur.skip_seq || (em->seq == st->cur.skip_seq &&
	    st->cur.k <= st->cur.skip_k);
	/* The turn's own end ends the stream even when the client has it
	 * (a resume from past it); a run's end where the turn waits ends it
	 * only when sent. */
	if (fin && (!dropped || st->ended))
		st->end = 1;
}

static cJSON *
obj_str(const char *k, const char *v)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, k, v);
	return o;
}

static const char *
str_of(const cJSON *e, const char *k)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, k));
}

/*
 * Opens the run when it is not open: RUN_STARTED, STATE_SNAPSHOT.  Its
 * runId is a function of the log: the first run's is the runId its chat
 * id carries ("agui:RUNID", else the turn's messageId), a run that goes
 * on after answers is that, '.', and the seq of the event it starts at
 * (no logged event keeps the answering POST's own runId).
 */
static void
run_open(struct emit *em, const char *status)
{
	struct agui *st = em->st;
	const char *base = st->runid[0] ? st->runid : st->msgid;
	cJSON *o, *snap;

	if (st->run_open)
		return;
	st->run_open = 1;
	st->runs++;
	if (st->runs == 1)
		snprintf(st->runcur, sizeof(st->runcur), "%s", base);
	else
		snprintf(st->runcur, sizeof(st->runcur), "%s.%llu", base,
		    (unsigned long long)em->seq);
	cJSON_Delete(st->pend);
	st->pend = cJSON_CreateArray();
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "threadId", st->thread);
	cJSON_AddStringToObject(o, "runId", st->runcur);
	emit(em, "RUN_STARTED", o);
	/* Parley's own view of the run, not the client's input state. */
	snap = cJSON_CreateObject();
	cJSON_AddStringToObject(snap, "sessionId", st->thread);
	cJSON_AddStringToObject(snap, "messageId", st->msgid);
	cJSON_AddStringToObject(snap, "status", status);
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "snapshot", snap);
	emit(em, "STATE_SNAPSHOT", o);
}

static void
text_close(struct emit *em)
{
	struct agui *st = em->st;

	if (!st->text_open)
		return;
	st->text_open = 0;
	emit(em, "TEXT_MESSAGE_END", obj_str("messageId", st->textid));
}

static void
step_close(struct emit *em)
{
	struct agui *st = em->st;
	char name[32];

	text_close(em);
	if (!st->step_open)
		return;
	st->step_open = 0;
	snprintf(name, sizeof(name), "step %u", st->step);
	emit(em, "STEP_FINISHED", obj_str("stepName", name));
}

/*
 * The model step n is open (0: the one the event belongs to: the current
 * one, or the next after tool results).
 */
static void
step_open(struct emit *em, unsigned n)
{
	struct agui *st = em->st;
	char name[32];

	if (n == 0)
		n = st->step == 0 ? 1 : st->after_tools ? st->step + 1 :
		    st->step;
	if (st->step_open && st->step == n)
		return;
	step_close(em);
	st->step = n;
	st->step_open = 1;
	st->after_tools = 0;
	snprintf(name, sizeof(name), "step %u", n);
	emit(em, "STEP_STARTED", obj_str("stepName", name));
}

/* The client's name for a tool: its own, without the "agui__" prefix. */
static const char *
tool_name(const char *tool)
{
	if (tool == NULL)
		return "";
	if (strncmp(tool, AGUI_SERVER "__", sizeof(AGUI_SERVER) + 1) == 0)
		return tool + sizeof(AGUI_SERVER) + 1;
	return tool;
}

/* TOOL_CALL_START, _ARGS, _END of a call, once. */
static void
call_open(struct emit *em, const cJSON *e)
{
	struct agui *st = em->st;
	const char *id = str_of(e, "toolCallId"), *tool = str_of(e, "tool");
	const char *server = str_of(e, "server");
	char *args, why[160];
	cJSON *o;

	if (id == NULL || cJSON_GetObjectItemCaseSensitive(st->started, id))
		return;
	if (cJSON_GetArraySize(st->started) >= AGUI_CALLS_MAX) {
		/* Not remembered, it would start again on its next event. */
		st->ended = 1;
		st->run_open = 0;
		step_close(em);
		snprintf(why, sizeof(why), "the turn made more than %d tool "
		    "calls, more than an AG-UI stream follows; read the rest "
		    "from GET /sessions/ID/log", AGUI_CALLS_MAX);
		o = obj_str("message", why);
		cJSON_AddStringToObject(o, "code", "TOO_MANY_CALLS");
		emit(em, "RUN_ERROR", o);
		return;
	}
	cJSON_AddTrueToObject(st->started, id);
	text_close(em);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "toolCallId", id);
	/* mcp_call names the client's tool without its server. */
	cJSON_AddStringToObject(o, "toolCallName", server != NULL ?
	    (tool ? tool : "") : tool_name(tool));
	cJSON_AddStringToObject(o, "parentMessageId", st->msgid);
	emit(em, "TOOL_CALL_START", o);
	args = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(e,
	    "args"));
	o = obj_str("toolCallId", id);
	cJSON_AddStringToObject(o, "delta", args != NULL ? args : "{}");
	free(args);
	emit(em, "TOOL_CALL_ARGS", o);
	emit(em, "TOOL_CALL_END", obj_str("toolCallId", id));
}

/* A string of a tool's result or error (JSON printed). */
static char *
result_text(const cJSON *v)
{
	const cJSON *m;

	if (v == NULL)
		return strdup("");
	if (cJSON_IsString(v))
		return strdup(v->valuestring);
	if ((m = cJSON_GetObjectItemCaseSensitive(v, "message")) != NULL &&
	    cJSON_IsString(m))
		return strdup(m->valuestring);
	return cJSON_PrintUnformatted(v);
}

/* Whether the ids the run that ends now waits for include an answer. */
static int
names_answered(const cJSON *ids, const cJSON *answers)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, ids)
		if (cJSON_IsString(e) && has_str(answers, e->valuestring))
			return 1;
	return 0;
}

/*
 * Ends the run: RUN_FINISHED with outcome (consumed) and usage; ids, what
 * it waits for, of the kind answers holds (NULL: none).
 */
static void
run_finish(struct emit *em, cJSON *outcome, cJSON *usage, const cJSON *ids,
    const cJSON *answers)
{
	struct agui *st = em->st;
	cJSON *o;

	step_close(em);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "threadId", st->thread);
	cJSON_AddStringToObject(o, "runId", st->runcur);
	if (outcome != NULL)
		cJSON_AddItemToObject(o, "outcome", outcome);
	if (usage != NULL)
		cJSON_AddItemToObject(o, "usage", usage);
	st->names_answered = ids != NULL && names_answered(ids, answers);
	st->run_open = 0;
	emit(em, "RUN_FINISHED", o);
	st->names_answered = 0;
}

/* The interrupt outcome of the approvals waiting now. */
static void
interrupt(struct emit *em)
{
	struct agui *st = em->st;
	cJSON *out = cJSON_CreateObject(), *list = cJSON_CreateArray();
	cJSON *ids = cJSON_CreateArray(), *a, *i, *sch, *p;
	char exp[32];

	cJSON_AddStringToObject(out, "type", "interrupt");
	cJSON_ArrayForEach(a, st->appr) {
		const char *id = str_of(a, "toolCallId");

		i = cJSON_CreateObject();
		cJSON_AddStringToObject(i, "id", id);
		cJSON_AddStringToObject(i, "reason", "tool_approval");
		cJSON_AddStringToObject(i, "message", str_of(a, "summary") ?
		    str_of(a, "summary") : "");
		cJSON_AddStringToObject(i, "toolCallId", id);
		util_iso8601(exp, (uint64_t)proto_count(a, "asked") +
		    st->approval_ms);
		cJSON_AddStringToObject(i, "expiresAt", exp);
		sch = cJSON_CreateObject();
		cJSON_AddStringToObject(sch, "type", "object");
		p = cJSON_AddObjectToObject(sch, "properties");
		cJSON_AddItemToObject(p, "approved", obj_str("type",
		    "boolean"));
		cJSON_AddItemToObject(p, "reason", obj_str("type", "string"));
		cJSON_AddItemToObject(sch, "required", cJSON_CreateStringArray(
		    (const char *[]){ "approved" }, 1));
		cJSON_AddItemToObject(i, "responseSchema", sch);
		cJSON_AddItemToArray(list, i);
		cJSON_AddItemToArray(ids, cJSON_CreateString(id));
	}
	cJSON_AddItemToObject(out, "interrupts", list);
	run_finish(em, out, NULL, ids, st->answered);
	cJSON_Delete(ids);
}

/* RUN_FINISHED's usage: one entry, from done's. */
static cJSON *
usage_of(const cJSON *u)
{
	cJSON *a, *o;

	if (!cJSON_IsObject(u))
		return NULL;
	a = cJSON_CreateArray();
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "inputTokens", proto_count(u,
	    "inputTokens"));
	cJSON_AddNumberToObject(o, "outputTokens", proto_count(u,
	    "outputTokens"));
	cJSON_AddNumberToObject(o, "totalTokens", proto_count(u,
	    "inputTokens") + proto_count(u, "outputTokens"));
	cJSON_AddItemToArray(a, o);
	return a;
}

/* Whether e is the turn's user_message; finds the turn by the chat id. */
static int
turn_found(struct agui *st, const cJSON *e, uint64_t seq)
{
	const char *id = str_of(e, "id");

	if (st->msgid[0] != '\0')
		return seq == strtoull(st->msgid + 2, NULL, 10);
	if (id == NULL || st->chatid[0] == '\0' || strcmp(id, st->chatid) != 0)
		return 0;
	snprintf(st->msgid, sizeof(st->msgid), "m-%llu",
	    (unsigned long long)seq);
	return 1;
}

/* The chunks of one event, to the output or the hold (emit). */
static void
translate(struct agui *st, const char *type, const cJSON *e, uint64_t seq,
    char **out, size_t *len)
{
	struct emit em = { st, seq, agui_ts_ms(str_of(e, "ts")), out, len };
	const char *id;
	char *t;
	cJSON *o;

	if (strcmp(type, "user_message") == 0) {
		if (!st->found && turn_found(st, e, seq)) {
			st->found = 1;
			if (st->runid[0] == '\0' && (id = str_of(e, "id")) !=
			    NULL && strncmp(id, AGUI_CHAT_PREFIX,
			    sizeof(AGUI_CHAT_PREFIX) - 1) == 0)
				snprintf(st->runid, sizeof(st->runid), "%s", id +
				    sizeof(AGUI_CHAT_PREFIX) - 1);
			run_open(&em, "running");
		}
		return;
	}
	if (!st->found || st->ended)
		return;
	if (strcmp(type, "agent_state") == 0) {
		/* No messageId: the session's one running turn is ours. */
		if (st->run_open && cJSON_GetArraySize(st->appr) > 0 &&
		    strcmp(str_of(e, "status") ? str_of(e, "status") : "",
		    "waiting_approval") == 0)
			interrupt(&em);
		return;
	}
	if (strcmp(type, "thought") == 0) {
		/* The block is {thought: {thoughtId, content, ...}}. */
		const cJSON *th = cJSON_GetObjectItemCaseSensitive(e, "thought");

		if (!adapt_thought_of(st->msgid, th) ||
		    (id = str_of(th, "thoughtId")) == NULL)
			return;
		e = th;
		run_open(&em, "running");
		step_open(&em, 0);
		text_close(&em);
		emit(&em, "REASONING_START", obj_str("messageId", id));
		o = obj_str("messageId", id);
		cJSON_AddStringToObject(o, "role", "reasoning");
		emit(&em, "REASONING_MESSAGE_START", o);
		o = obj_str("messageId", id);
		cJSON_AddStringToObject(o, "delta", str_of(e, "content") ?
		    str_of(e, "content") : "");
		emit(&em, "REASONING_MESSAGE_CONTENT", o);
		emit(&em, "REASONING_MESSAGE_END", obj_str("messageId", id));
		emit(&em, "REASONING_END", obj_str("messageId", id));
		return;
	}
	if (!adapt_turn_of(st->msgid, e))
		return;
	id = str_of(e, "toolCallId");
	if (strcmp(type, "token") == 0) {
		const char *mid = str_of(e, "messageId");

		run_open(&em, "running");
		step_open(&em, 0);
		if (st->text_open && strcmp(st->textid, mid) != 0)
			text_close(&em);
		if (!st->text_open) {
			st->text_open = 1;
			snprintf(st->textid, sizeof(st->textid), "%s", mid);
			o = obj_str("messageId", mid);
			cJSON_AddStringToObject(o, "role", "assistant");
			emit(&em, "TEXT_MESSAGE_START", o);
		}
		o = obj_str("messageId", mid);
		cJSON_AddStringToObject(o, "delta", str_of(e, "content") ?
		    str_of(e, "content") : "");
		emit(&em, "TEXT_MESSAGE_CONTENT", o);
	} else if (strcmp(type, "tool_start") == 0 ||
	    strcmp(type, "tool_approve_request") == 0 ||
	    strcmp(type, "mcp_call") == 0) {
		run_open(&em, "running");
		step_open(&em, (unsigned)proto_count(e, "step"));
		call_open(&em, e);
		if (id == NULL || st->ended)
			return;
		if (strcmp(type, "tool_approve_request") == 0 &&
		    cJSON_GetArraySize(st->appr) < AGUI_CALLS_MAX) {
			o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "toolCallId", id);
			cJSON_AddStringToObject(o, "summary", str_of(e,
			    "summary") ? str_of(e, "summary") : "");
			cJSON_AddNumberToObject(o, "asked", (double)em.ts);
			cJSON_AddItemToArray(st->appr, o);
		} else if (strcmp(type, "mcp_call") == 0) {
			/* The client runs it: this run is done. */
			if (!has_str(st->pend, id))
				cJSON_AddItemToArray(st->pend,
				    cJSON_CreateString(id));
			o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "type", "success");
			cJSON_AddItemToObject(o, "pendingToolCallIds",
			    cJSON_Duplicate(st->pend, 1));
			run_finish(&em, o, NULL, st->pend, st->replied);
		}
	} else if (strcmp(type, "audit_entry") == 0 && id != NULL) {
		int i = 0;
		cJSON *a;

		cJSON_ArrayForEach(a, st->appr) {
			if (strcmp(str_of(a, "toolCallId") ? str_of(a,
			    "toolCallId") : "", id) == 0) {
				cJSON_DeleteItemFromArray(st->appr, i);
				/* The answer is where the next run starts. */
				run_open(&em, "running");
				break;
			}
			i++;
		}
	} else if (strcmp(type, "tool_result") == 0 && id != NULL) {
		run_open(&em, "running");
		step_open(&em, (unsigned)proto_count(e, "step"));
		call_open(&em, e);
		if (st->ended)
			return;
		o = cJSON_CreateObject();
		t = malloc(strlen(id) + sizeof(AGUI_RESULT_PREFIX));
		if (t != NULL) {
			snprintf(t, strlen(id) + sizeof(AGUI_RESULT_PREFIX),
			    "%s%s", AGUI_RESULT_PREFIX, id);
			cJSON_AddStringToObject(o, "messageId", t);
			free(t);
		}
		cJSON_AddStringToObject(o, "toolCallId", id);
		t = result_text(cJSON_GetObjectItemCaseSensitive(e, "error") ?
		    cJSON_GetObjectItemCaseSensitive(e, "error") :
		    cJSON_GetObjectItemCaseSensitive(e, "result"));
		cJSON_AddStringToObject(o, "content", t ? t : "");
		free(t);
		cJSON_AddStringToObject(o, "role", "tool");
		emit(&em, "TOOL_CALL_RESULT", o);
		del_str(st->pend, id);
		st->after_tools = 1;
	} else if (strcmp(type, "done") == 0) {
		/* A team's round goes on with its next speaker. */
		if (cJSON_IsTrue(cJSON_GetObjectItem(e, "teamRound")))
			return;
		run_open(&em, "running");
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", cJSON_IsTrue(
		    cJSON_GetObjectItem(e, "cancelled")) ? "cancelled" :
		    "success");
		st->ended = 1;
		run_finish(&em, o, usage_of(cJSON_GetObjectItem(e, "usage")),
		    NULL, NULL);
	} else if (strcmp(type, "team_done") == 0) {
		/* A team's round ends here, after its speakers' dones. */
		run_open(&em, "running");
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "success");
		st->ended = 1;
		run_finish(&em, o, NULL, NULL, NULL);
	} else if (strcmp(type, "error") == 0) {
		/* The provider starts over: the text restarts (m-SEQ.N). */
		if (cJSON_IsTrue(cJSON_GetObjectItem(e, "retrying"))) {
			text_close(&em);
			return;
		}
		run_open(&em, "running");
		o = obj_str("message", str_of(e, "message") ? str_of(e,
		    "message") : "the turn failed");
		if (str_of(e, "code") != NULL)
			cJSON_AddStringToObject(o, "code", str_of(e, "code"));
		st->ended = 1;
		st->run_open = 0;
		emit(&em, "RUN_ERROR", o);
	}
}

void
agui_translate(struct agui *st, const char *type, const cJSON *e,
    uint64_t seq, char **out, size_t *len)
{
	char *both;

	st->holding = st->hold_until != 0 && seq <= st->hold_until;
	translate(st, type, e, seq, out, len);
	if (st->hold_until == 0 || seq < st->hold_until)
		return;
	/* The hold ends: what it kept goes out first. */
	st->hold_until = 0;
	st->holding = 0;
	if (st->held != NULL && (both = malloc(st->heldlen + *len + 1)) !=
	    NULL) {
		memcpy(both, st->held, st->heldlen);
		if (*out != NULL)
			memcpy(both + st->heldlen, *out, *len);
		free(*out);
		*out = both;
		*len += st->heldlen;
	}
	free(st->held);
	st->held = NULL;
	st->heldlen = 0;
	if (st->held_end)
		st->end = 1;
}
