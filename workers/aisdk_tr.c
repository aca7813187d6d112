/*
 * One turn's logged events as the Vercel AI SDK's UI message stream, v1
 * (aisdk_tr.h).  What each event becomes:
 *
 *	user_message (the turn's)	start {messageId: "m-SEQ"}
 *	thought (th_m-SEQ-...)		reasoning-start, -delta, -end
 *	token				text-start (first), text-delta
 *	tool_start			tool-input-start, tool-input-available
 *					(dynamic: the client declares no tools)
 *	tool_approve_request		the same if not yet, tool-approval-request
 *					{approvalId = toolCallId}
 *	audit_entry "rejected"		tool-output-denied (its tool_result: none)
 *	tool_result			tool-output-available | tool-output-error
 *	agent_state waiting_approval	finish-step, finish "tool-calls", [DONE]
 *					(the stream ends if the call still waits)
 *	done				finish-step, finish, [DONE]
 *	error, severity "fatal"		error {errorText}, [DONE]
 *	error, "recoverable"		held: the turn's next agent_state "idle"
 *					makes it error {errorText}, [DONE] (the
 *					turn failed); an event of the turn
 *					(a re-run, m-SEQ.N, after its worker
 *					stopped) drops it and the stream goes on
 *	error, retrying			the open text ends; the re-run's is new
 *	a call past AISDK_TR_CALLS	error {errorText}, [DONE] (not remembered,
 *					its chunks would repeat)
 *	no user_message at m-SEQ's seq	error {errorText}, [DONE] (no such turn)
 *
 * A step ends (finish-step) and the next begins (start-step) when the
 * model speaks again after tools ran, or a tool event names a new step.
 * Nothing depends on the clock or on what was sent before: only on the
 * events from the turn's start.  The one exception is whether the wait
 * ends the stream (agent_state waiting_approval): the chunks are the
 * log's, but a reading made once the call was answered goes on through
 * the wait instead of ending there (t->waits, the session's live state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "adapt.h"
#include "aisdk_tr.h"

/* Per-call states in t->calls. */
#define CALL_IN		"in"	/* its input sent */
#define CALL_ASK	"ask"	/* approval asked, not answered */
#define CALL_NO		"no"	/* rejected: denied sent */
#define CALL_OUT	"out"	/* its output sent */

struct out {
	char	*buf;
	size_t	 len;
	uint64_t seq;
};

static const char *
str(const cJSON *e, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, key));
}

uint64_t
aisdk_tr_input_seq(const char *msgid)
{
	char seq[32];
	size_t n;

	if (msgid == NULL || strncmp(msgid, "m-", 2) != 0)
		return 0;
	/* "m-SEQ" before a re-run's ".N" or a hop's "-HOP". */
	n = 2 + strcspn(msgid + 2, ".-");
	if (n >= sizeof(seq) || msgid[2] == '0' ||
	    (msgid[n] != '\0' && msgid[n + 1] == '\0'))
		return 0;
	memcpy(seq, msgid, n);
	seq[n] = '\0';
	return adapt_msgid_seq(seq);
}

int
aisdk_tr_init(struct aisdk_tr *t, const char *chat, const char *msgid)
{
	memset(t, 0, sizeof(*t));
	t->cur.ids = 1;
	if (chat != NULL)
		snprintf(t->chat, sizeof(t->chat), "%s", chat);
	if (msgid != NULL) {
		if ((t->input_seq = aisdk_tr_input_seq(msgid)) == 0)
			return -1;
		/* The turn itself, not a re-run or a hop of it. */
		snprintf(t->msgid, sizeof(t->msgid), "m-%llu",
		    (unsigned long long)t->input_seq);
	}
	if ((t->calls = cJSON_CreateObject()) == NULL)
		return -1;
	return 0;
}

void
aisdk_tr_clear(struct aisdk_tr *t)
{
	cJSON_Delete(t->calls);
	t->calls = NULL;
}

/* Appends chunk o ({"type":type,...}, consumed). */
static void
put(struct aisdk_tr *t, struct out *o, cJSON *chunk)
{
	if (chunk == NULL)
		return;
	adapt_sse(&t->cur, &o->buf, &o->len, o->seq, chunk);
}

static cJSON *
mk(const char *type)
{
	cJSON *c = cJSON_CreateObject();

	cJSON_AddStringToObject(c, "type", type);
	return c;
}

static cJSON *
mk_id(const char *type, const char *key, const char *id)
{
	cJSON *c = mk(type);

	cJSON_AddStringToObject(c, key, id);
	return c;
}

static const char *
call_state(struct aisdk_tr *t, const char *id)
{
	return str(t->calls, id);
}

/* Remembers call id's state (ev_tool checks the bound before a new one). */
static void
call_set(struct aisdk_tr *t, const char *id, const char *state)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(t->calls, id);

	if (v != NULL) {
		cJSON_SetValuestring(v, state);
		return;
	}
	cJSON_AddStringToObject(t->calls, id, state);
	t->ncalls++;
}

static void
text_end(struct aisdk_tr *t, struct out *o)
{
	if (t->text[0] != '\0')
		put(t, o, mk_id("text-end", "id", t->text));
	t->text[0] = '\0';
	t->text_mid[0] = '\0';
}

static void
reason_end(struct aisdk_tr *t, struct out *o)
{
	if (t->reason[0] != '\0')
		put(t, o, mk_id("reasoning-end", "id", t->reason));
	t->reason[0] = '\0';
}

/* Open parts end, then the step. */
static void
step_end(struct aisdk_tr *t, struct out *o)
{
	text_end(t, o);
	reason_end(t, o);
	if (t->in_step)
		put(t, o, mk("finish-step"));
	t->in_step = 0;
	t->after_tools = 0;
}

/* Before output: a step is open; a new one when asked (newstep). */
static void
step_need(struct aisdk_tr *t, struct out *o, int newstep)
{
	if (newstep && t->in_step)
		step_end(t, o);
	if (!t->in_step)
		put(t, o, mk("start-step"));
	t->in_step = 1;
}

/* A tool event of model step n (0: unknown) may begin a new step. */
static void
tool_step(struct aisdk_tr *t, struct out *o, unsigned n)
{
	int newstep = n != 0 && t->step != 0 && n != t->step;

	if (n != 0)
		t->step = n;
	text_end(t, o);
	reason_end(t, o);
	step_need(t, o, newstep);
}

static void
tool_input(struct aisdk_tr *t, struct out *o, const cJSON *e,
    const char *id)
{
	const char *name = str(e, "tool");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
	cJSON *c;

	c = mk_id("tool-input-start", "toolCallId", id);
	cJSON_AddStringToObject(c, "toolName", name ? name : "");
	cJSON_AddBoolToObject(c, "dynamic", 1);
	put(t, o, c);
	c = mk_id("tool-input-available", "toolCallId", id);
	cJSON_AddStringToObject(c, "toolName", name ? name : "");
	cJSON_AddItemToObject(c, "input", args != NULL ?
	    cJSON_Duplicate(args, 1) : cJSON_CreateObject());
	cJSON_AddBoolToObject(c, "dynamic", 1);
	put(t, o, c);
	call_set(t, id, CALL_IN);
}

static void
ev_tool(struct aisdk_tr *t, struct out *o, const char *type,
    const cJSON *e)
{
	const char *id = str(e, "toolCallId"), *st, *d;
	cJSON *c;

	if (id == NULL)
		return;
	st = call_state(t, id);
	/* A call not remembered would have its chunks sent again. */
	if (st == NULL && strcmp(type, "audit_entry") != 0 &&
	    t->ncalls >= AISDK_TR_CALLS) {
		t->overflow = 1;
		return;
	}
	if (strcmp(type, "tool_start") == 0) {
		/* An approved call starts: its input was sent with the ask. */
		if (st != NULL)
			return;
		tool_step(t, o, (unsigned)cJSON_GetNumberValue(
		    cJSON_GetObjectItemCaseSensitive(e, "step")));
		tool_input(t, o, e, id);
	} else if (strcmp(type, "tool_approve_request") == 0) {
		if (st != NULL && strcmp(st, CALL_IN) != 0)
			return;
		tool_step(t, o, (unsigned)cJSON_GetNumberValue(
		    cJSON_GetObjectItemCaseSensitive(e, "step")));
		if (st == NULL)
			tool_input(t, o, e, id);
		c = mk_id("tool-approval-request", "approvalId", id);
		cJSON_AddStringToObject(c, "toolCallId", id);
		put(t, o, c);
		call_set(t, id, CALL_ASK);
	} else if (strcmp(type, "audit_entry") == 0) {
		if (st == NULL || strcmp(st, CALL_ASK) != 0 ||
		    (d = str(e, "decision")) == NULL)
			return;
		if (strcmp(d, "rejected") == 0) {
			step_need(t, o, 0);
			put(t, o, mk_id("tool-output-denied", "toolCallId",
			    id));
			call_set(t, id, CALL_NO);
		} else
			call_set(t, id, CALL_IN);
	} else if (strcmp(type, "tool_result") == 0) {
		if (st != NULL && (strcmp(st, CALL_NO) == 0 ||
		    strcmp(st, CALL_OUT) == 0))
			return;
		if (st == NULL) {
			/* Its input was not seen (no tool_start logged). */
			tool_step(t, o, 0);
			tool_input(t, o, e, id);
		}
		text_end(t, o);
		reason_end(t, o);
		step_need(t, o, 0);
		if (cJSON_GetObjectItemCaseSensitive(e, "error") != NULL) {
			const cJSON *err = cJSON_GetObjectItemCaseSensitive(e,
			    "error");
			char *txt = cJSON_IsString(err) ? NULL :
			    cJSON_PrintUnformatted(err);

			c = mk_id("tool-output-error", "toolCallId", id);
			cJSON_AddStringToObject(c, "errorText",
			    cJSON_IsString(err) ? err->valuestring :
			    txt != NULL ? txt : "the tool failed");
			free(txt);
		} else {
			const cJSON *r = cJSON_GetObjectItemCaseSensitive(e,
			    "result");

			c = mk_id("tool-output-available", "toolCallId", id);
			cJSON_AddItemToObject(c, "output", r != NULL ?
			    cJSON_Duplicate(r, 1) : cJSON_CreateNull());
		}
		cJSON_AddBoolToObject(c, "dynamic", 1);
		put(t, o, c);
		call_set(t, id, CALL_OUT);
		t->after_tools = 1;
	}
}

static void
ev_thought(struct aisdk_tr *t, struct out *o, const cJSON *th)
{
	const char *id = str(th, "thoughtId"), *content = str(th, "content");
	cJSON *c;

	text_end(t, o);
	step_need(t, o, t->after_tools);
	t->after_tools = 0;
	reason_end(t, o);
	snprintf(t->reason, sizeof(t->reason), "%s", id);
	put(t, o, mk_id("reasoning-start", "id", t->reason));
	c = mk_id("reasoning-delta", "id", t->reason);
	cJSON_AddStringToObject(c, "delta", content ? content : "");
	put(t, o, c);
	reason_end(t, o);
}

static void
ev_token(struct aisdk_tr *t, struct out *o, const cJSON *e)
{
	const char *content = str(e, "content"), *mid = str(e, "messageId");
	cJSON *c;

	step_need(t, o, t->after_tools);
	t->after_tools = 0;
	reason_end(t, o);
	/* A re-run's text (m-SEQ.N) is a part of its own. */
	if (t->text[0] != '\0' && mid != NULL && strcmp(mid, t->text_mid) != 0)
		text_end(t, o);
	if (t->text[0] == '\0') {
		snprintf(t->text, sizeof(t->text), "txt-%llu",
		    (unsigned long long)o->seq);
		snprintf(t->text_mid, sizeof(t->text_mid), "%s", mid ? mid :
		    "");
		put(t, o, mk_id("text-start", "id", t->text));
	}
	c = mk_id("text-delta", "id", t->text);
	cJSON_AddStringToObject(c, "delta", content ? content : "");
	put(t, o, c);
}

/* The turn ends: finish (reason) or error (errtext), then [DONE]. */
static void
finish(struct aisdk_tr *t, struct out *o, const char *reason,
    const char *errtext)
{
	cJSON *c;

	step_end(t, o);
	if (errtext != NULL) {
		c = mk("error");
		cJSON_AddStringToObject(c, "errorText", errtext);
	} else {
		c = mk("finish");
		cJSON_AddStringToObject(c, "finishReason", reason);
	}
	put(t, o, c);
	adapt_sse_text(&t->cur, &o->buf, &o->len, o->seq, "[DONE]");
}

/* An error event's text for the error chunk: "CODE: message". */
static void
error_text(const cJSON *e, char *buf, size_t len)
{
	const char *code = str(e, "code"), *m = str(e, "message");

	snprintf(buf, len, "%s: %s", code ? code : "ERROR",
	    m ? m : "the turn failed");
}

/* 1 when the chunks of o's event so far went out (were not left out). */
static int
sent(const struct aisdk_tr *t, const struct out *o)
{
	return o->seq > t->cur.skip_seq || (o->seq == t->cur.skip_seq &&
	    t->cur.seq == o->seq && t->cur.k > t->cur.skip_k);
}

/* Whether a call of the turn still waits for its approval. */
static int
still_waits(struct aisdk_tr *t)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, t->calls) {
		if (!cJSON_IsString(c) || strcmp(c->valuestring, CALL_ASK) != 0)
			continue;
		if (t->waits == NULL || t->waits(t->arg, c->string))
			return 1;
	}
	return 0;
}

static int
asking(const struct aisdk_tr *t)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, t->calls)
		if (cJSON_IsString(c) && strcmp(c->valuestring, CALL_ASK) == 0)
			return 1;
	return 0;
}

char *
aisdk_tr_event(struct aisdk_tr *t, uint64_t seq, const char *type,
    const cJSON *e, size_t *len, int *end)
{
	struct out o = { NULL, 0, seq };
	char errtext[AISDK_TR_ERR];
	const cJSON *th;
	const char *s;

	*len = 0;
	*end = 0;
	if (t->finished || e == NULL)
		return NULL;
	/*
	 * A turn read from its seq whose first event is not its
	 * user_message (a message id that names no turn, or a log that now
	 * starts later): there is nothing to stream, and waiting would never
	 * end.
	 */
	if (!t->started && t->msgid[0] != '\0' && seq >= t->input_seq &&
	    (seq != t->input_seq || strcmp(type, "user_message") != 0)) {
		snprintf(errtext, sizeof(errtext), "NOT_FOUND: the chat's log "
		    "holds no turn %s (its first event is gone, or it is no "
		    "turn's id)", t->msgid);
		/* Said even to a client whose cursor is past it: it has
		 * nothing of a turn that is not there. */
		t->cur.skip_seq = 0;
		t->cur.skip_k = 0;
		finish(t, &o, NULL, errtext);
		t->finished = *end = 1;
		goto out;
	}
	if (strcmp(type, "user_message") == 0) {
		if (t->started)
			return NULL;
		if (t->msgid[0] == '\0') {
			if ((s = str(e, "id")) == NULL ||
			    strcmp(s, t->chat) != 0)
				return NULL;
			t->input_seq = seq;
			snprintf(t->msgid, sizeof(t->msgid), "m-%llu",
			    (unsigned long long)seq);
		} else if (seq != t->input_seq)
			return NULL;
		t->started = 1;
		put(t, &o, mk_id("start", "messageId", t->msgid));
		goto out;
	}
	if (!t->started)
		return NULL;
	if (strcmp(type, "session_complete") == 0) {
		finish(t, &o, "other", NULL);
		t->finished = *end = 1;
		goto out;
	}
	/* The wait has no messageId: the turn's, while it asks. */
	if (strcmp(type, "agent_state") == 0) {
		s = str(e, "status");
		/* A held error with the agent idle after it: the turn failed. */
		if (s != NULL && strcmp(s, "idle") == 0 && t->failed[0] != '\0') {
			finish(t, &o, NULL, t->failed);
			t->finished = *end = 1;
			goto out;
		}
		if (s == NULL || strcmp(s, "waiting_approval") != 0 ||
		    !asking(t))
			return NULL;
		finish(t, &o, "tool-calls", NULL);
		/* Another reading, once the call was answered, goes on. */
		*end = sent(t, &o) && still_waits(t);
		goto out;
	}
	if (strcmp(type, "thought") == 0) {
		if (cJSON_IsObject(th = cJSON_GetObjectItemCaseSensitive(e,
		    "thought")) && adapt_thought_of(t->msgid, th)) {
			t->failed[0] = '\0';
			ev_thought(t, &o, th);
		}
		goto out;
	}
	if (!adapt_turn_of(t->msgid, e))
		return NULL;
	/* The turn goes on after a held error: it was re-run, not failed. */
	if (strcmp(type, "error") != 0)
		t->failed[0] = '\0';
	if (strcmp(type, "token") == 0)
		ev_token(t, &o, e);
	else if (strcmp(type, "tool_start") == 0 ||
	    strcmp(type, "tool_approve_request") == 0 ||
	    strcmp(type, "audit_entry") == 0 ||
	    strcmp(type, "tool_result") == 0)
		ev_tool(t, &o, type, e);
	else if (strcmp(type, "done") == 0) {
		/* A team's answer goes on with its next speaker. */
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e,
		    "teamRound"))) {
			step_end(t, &o);
			goto out;
		}
		finish(t, &o, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e,
		    "cancelled")) ? "other" : "stop", NULL);
		t->finished = *end = 1;
	} else if (strcmp(type, "team_done") == 0) {
		finish(t, &o, "stop", NULL);
		t->finished = *end = 1;
	} else if (strcmp(type, "error") == 0) {
		/* The provider starts over: the re-run's text is new. */
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e,
		    "retrying"))) {
			text_end(t, &o);
			reason_end(t, &o);
			goto out;
		}
		error_text(e, errtext, sizeof(errtext));
		/*
		 * Recoverable: a failed turn (then the agent is idle) or its
		 * worker stopped and the turn runs again (its events follow);
		 * which one, the next events say.
		 */
		if ((s = str(e, "severity")) != NULL &&
		    strcmp(s, "recoverable") == 0) {
			text_end(t, &o);
			reason_end(t, &o);
			snprintf(t->failed, sizeof(t->failed), "%s", errtext);
			goto out;
		}
		finish(t, &o, NULL, errtext);
		t->finished = *end = 1;
	}
	if (t->overflow) {
		snprintf(errtext, sizeof(errtext), "TOO_MANY_CALLS: the turn made "
		    "more than %d tool calls, more than this stream follows; "
		    "the session's log (GET /sessions/{id}/log) has the rest",
		    AISDK_TR_CALLS);
		finish(t, &o, NULL, errtext);
		t->finished = *end = 1;
	}
out:
	*len = o.len;
	return o.buf;
}
