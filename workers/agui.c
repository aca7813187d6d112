/*
 * AG-UI over the session log (adapt.h): POST /api/agui takes a
 * RunAgentInput and answers with the run's events as Server-Sent Events;
 * GET /api/agui/{threadId}/stream replays and continues the current run.
 * The threadId is the Parley session, the history lives in Parley: a run
 * is the last user message of `messages` (a chat whose id is "agui:" and
 * the runId, so a retried POST replays the run), or the answers that let
 * a waiting turn go on (resume[] for approvals, tool messages for the
 * client's own tools).  One Parley turn may span several AG-UI runs: a
 * run ends where the turn waits (RUN_FINISHED with an interrupt outcome
 * for approvals, with pendingToolCallIds for client tool calls) and the
 * next run continues it.
 *
 *	user_message (the run's)	RUN_STARTED, STATE_SNAPSHOT
 *	token				[STEP_STARTED] TEXT_MESSAGE_START,
 *					TEXT_MESSAGE_CONTENT (messageId m-SEQ)
 *	thought				REASONING_START, _MESSAGE_START,
 *					_MESSAGE_CONTENT, _MESSAGE_END, _END
 *	tool_start, tool_approve_request, mcp_call (first of a call)
 *					TOOL_CALL_START, _ARGS (the args'
 *					JSON text), _END
 *	tool_result			TOOL_CALL_RESULT
 *	agent_state waiting_approval	RUN_FINISHED outcome interrupt
 *	mcp_call			RUN_FINISHED pendingToolCallIds
 *	done, team_done (a team's)	RUN_FINISHED (usage; cancelled)
 *	error (not retrying)		RUN_ERROR
 *
 * Every event's timestamp is the logged event's ts and every SSE block
 * has the id "SEQ:K" (an extension: AG-UI has no resumable transport), so
 * the translation is a pure function of the log from the turn's
 * user_message and a client resumes exactly with Last-Event-ID.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/proto.h"
#include "parley/util.h"
#include "adapt.h"
#include "approve.h"
#include "conn.h"
#include "evt.h"
#include "input.h"
#include "route.h"
#include "sess.h"
#include "wk.h"
#include "agui.h"
#include "agui_int.h"

#define AGUI(c)		((struct agui *)(c)->adapt_st)
#define AGUI_FIND_MS	30000	/* a follower waits this long for its
				   chat to come back logged */

static char	*agui_chunks(struct conn *, const struct evt *, size_t *,
		    int *);
static void	 agui_reply(struct conn *, struct sess *,
		    const struct sess_result *);

const struct adapt_ops agui_adapt = {
	.name = "agui",
	.chunks = agui_chunks,
	.reply = agui_reply,
	.free = agui_free,
};

static char *
agui_chunks(struct conn *c, const struct evt *ev, size_t *len, int *end)
{
	struct agui *st = AGUI(c);
	char *out = NULL;
	int was = st->found;
	cJSON *e;

	*len = 0;
	*end = 0;
	if ((e = cJSON_ParseWithLength(ev->json, ev->len)) == NULL)
		return NULL;
	agui_translate(st, ev->type, e, ev->seq, &out, len);
	cJSON_Delete(e);
	if (!was && st->found)
		evtimer_del(c->tmo_ev);
	*end = st->end;
	return out;
}

static const char *
str_of(const cJSON *e, const char *k)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, k));
}

/*
 * The seq of a turn's messageId: m-SEQ, its re-run m-SEQ.N or a team's
 * next speaker m-SEQ-HOP (adapt_msgid_seq's checks on m-SEQ); else 0.
 */
static uint64_t
turn_seq_of(const char *mid)
{
	char base[48];
	size_t n;

	if (mid == NULL || strncmp(mid, "m-", 2) != 0)
		return 0;
	n = 2 + strspn(mid + 2, "0123456789");
	if (n >= sizeof(base) || (mid[n] != '\0' && mid[n] != '.' &&
	    mid[n] != '-'))
		return 0;
	memcpy(base, mid, n);
	base[n] = '\0';
	return adapt_msgid_seq(base);
}

/*
 * A turn that waits for an answer, by meta's waiting list (a host that
 * only follows the session knows no running turn, but keeps that list
 * from the log); 0, or -1 when nothing waits.
 */
static int
waiting_turn(struct sess *s, char *msgid, size_t len, uint64_t *seq)
{
	const cJSON *w;
	const char *mid;

	cJSON_ArrayForEach(w, cJSON_GetObjectItem(sess_meta(s), "waiting"))
		/* An approval (no kind) or a client's call: a turn's. */
		if ((str_of(w, "kind") == NULL || strcmp(str_of(w, "kind"),
		    "call") == 0) && (mid = str_of(w, "messageId")) != NULL &&
		    (*seq = turn_seq_of(mid)) > 0) {
			snprintf(msgid, len, "m-%llu",
			    (unsigned long long)*seq);
			return 0;
		}
	return -1;
}

/*
 * Checks every answer of the request against s before any is applied
 * (meta's waiting list, which a host that only follows the session keeps
 * from the log too): each names a request that waits now, of its kind (an
 * approval for a resume entry, a client's call for a tool message), or
 * one answered already (a repeat, which changes nothing); none is past
 * its timeout; and those that wait are all of one turn, whose
 * user_message seq goes to st->turn_seq (0 when every answer is a
 * repeat).  0, or -1 with the HTTP error sent, nothing applied.
 */
static int
answers_check(struct conn *c, struct sess *s, struct agui *st)
{
	const cJSON *a, *w;
	uint64_t seq, limit;
	char msg[400], at[32];
	int k;

	st->turn_seq = 0;
	for (k = 0; k < 2; k++)
		cJSON_ArrayForEach(a, (k == 0 ? st->answered : st->replied)) {
			w = approve_entry(s, a->valuestring, k == 0 ?
			    APPROVE_APPROVALS : APPROVE_CALLS);
			if (w == NULL && approve_was_answered(s,
			    a->valuestring))
				continue;
			if (w == NULL) {
				snprintf(msg, sizeof(msg), "%s '%.128s': "
				    "nothing of this thread waits for it "
				    "(unknown, timed out, or of the other "
				    "kind); nothing was applied: answer only "
				    "what the last run ended with", k == 0 ?
				    "resume: interrupt" : "tool message for "
				    "toolCallId", a->valuestring);
				conn_http_error(c, 404, "NOT_FOUND", msg);
				return -1;
			}
			/* Past its timeout, not yet closed (its session was
			 * out of memory): input_apply would refuse it. */
			limit = k == 0 ? c->wk->conf->approval_timeout_ms :
			    c->wk->conf->client_tool_timeout_ms;
			if (limit > 0 && (uint64_t)proto_count(w, "ts") +
			    limit <= util_now_ms()) {
				util_iso8601(at, (uint64_t)proto_count(w,
				    "ts") + limit);
				snprintf(msg, sizeof(msg), "'%.128s' expired "
				    "at %s (its timeout); nothing was "
				    "applied", a->valuestring, at);
				conn_http_error(c, 404, "NOT_FOUND", msg);
				return -1;
			}
			seq = turn_seq_of(str_of(w, "messageId"));
			if (seq == 0 || (st->turn_seq != 0 &&
			    seq != st->turn_seq)) {
				snprintf(msg, sizeof(msg), "'%.128s' is not "
				    "of the run the other answers are for; "
				    "nothing was applied: answer one run per "
				    "request",
				    a->valuestring);
				conn_http_error(c, 409, "CONFLICT", msg);
				return -1;
			}
			st->turn_seq = seq;
		}
	return 0;
}

/* Applies the request's next Parley message; its answer is agui_reply. */
static void
apply_next(struct conn *c)
{
	struct agui *st = AGUI(c);
	const char *code, *err;
	struct sess_result res;
	struct proto_in in;
	struct sess *s;
	cJSON *m = cJSON_GetArrayItem(st->inputs, st->next);
	char msg[256], *txt;

	st->next++;
	txt = cJSON_PrintUnformatted(m);
	if (txt == NULL || proto_parse(txt, strlen(txt),
	    c->wk->conf->max_json_depth, &in, &code, msg, sizeof(msg)) == -1) {
		free(txt);
		conn_http_error(c, txt == NULL ? 500 : 400, txt == NULL ?
		    "INTERNAL" : code, txt == NULL ? "out of memory" : msg);
		return;
	}
	free(txt);
	/* Only a run that chats may make the thread's session. */
	if ((s = sess_get(c->wk, c->ic.session, st->kind == AGUI_CHAT ?
	    route_creator(c, NULL) : NULL, NULL, NULL, &err)) == NULL) {
		proto_in_free(&in);
		adapt_open_error(c, err);
		return;
	}
	if (st->from == 0) {
		st->from = sess_last_seq(s) + 1;
		/* All of them, before any is applied: then they still wait. */
		if (st->kind == AGUI_ANSWER && answers_check(c, s, st) == -1) {
			proto_in_free(&in);
			return;
		}
		if (st->turn_seq != 0)
			snprintf(st->msgid, sizeof(st->msgid), "m-%llu",
			    (unsigned long long)st->turn_seq);
	}
	input_apply(s, &c->cl, &(struct sess_from){ (int)c->ic.role,
	    c->agent, c->ic.subject, 0 }, &in, &res);
	proto_in_free(&in);
	if (!res.pending)
		agui_reply(c, s, &res);
}

static void
agui_reply(struct conn *c, struct sess *s, const struct sess_result *res)
{
	struct agui *st = AGUI(c);
	uint64_t seq;

	if (res->code != NULL) {
		const cJSON *in = cJSON_GetArrayItem(st->inputs, st->next - 1);
		const char *id = str_of(in, "toolCallId");
		char msg[512];

		/* Which answer it was, in AG-UI's terms. */
		if (id != NULL) {
			snprintf(msg, sizeof(msg), "%s '%.128s': %s",
			    strcmp(str_of(in, "type"), "tool_approve") == 0 ?
			    "resume: interrupt" : "tool message for toolCallId",
			    id, res->msg);
			conn_http_error(c, res->http, res->code, msg);
		} else
			conn_http_error(c, res->http, res->code, res->msg);
		return;
	}
	if (st->next < cJSON_GetArraySize(st->inputs)) {
		apply_next(c);
		return;
	}
	if (st->kind == AGUI_CHAT) {
		if (res->seq > 0) {
			snprintf(st->msgid, sizeof(st->msgid), "m-%llu",
			    (unsigned long long)res->seq);
			adapt_stream(c, s, &agui_adapt, st, NULL, res->seq);
		} else {
			struct timeval tv;

			/* A follower handed it to the owner, which logs it
			 * soon: found by its id after the log's old end. */
			util_tv(&tv, AGUI_FIND_MS);
			evtimer_add(c->tmo_ev, &tv);
			adapt_stream(c, s, &agui_adapt, st, NULL, st->from);
		}
		return;
	}
	/* Answers: the turn they let go on, from its start, the runs the
	 * client answered left out (struct agui). */
	if ((seq = st->turn_seq) == 0 && !adapt_current_turn(s, st->msgid,
	    sizeof(st->msgid), &seq)) {
		conn_http_error(c, 409, "CONFLICT", "the thread has no run "
		    "waiting for these answers (its turn has finished); read "
		    "the thread's messages from GET /sessions/ID/log");
		return;
	}
	st->hold_until = sess_last_seq(s);
	st->hold_answered = 1;
	adapt_stream(c, s, &agui_adapt, st, NULL, seq);
}

/*
 * Whether rq registers client tools under a server name this host's
 * configuration already gives an mcp-server (the session would refuse
 * them, after the session was made).
 */
static int
server_taken(const struct conn *c, const struct agui_req *rq)
{
	const struct cfg_mcp_server *m;
	const char *t = str_of(cJSON_GetArrayItem(rq->inputs, 0), "type");

	if (t == NULL || strcmp(t, "mcp_tools") != 0)
		return 0;
	TAILQ_FOREACH(m, &c->wk->conf->mcp_servers, entry)
		if (strcmp(m->name, AGUI_SERVER) == 0)
			return 1;
	return 0;
}

int
agui_path(const struct conn *c)
{
	const char *p = c->hp.req.path;

	return strcmp(p, "/api/agui") == 0 || strncmp(p, "/api/agui/", 10) == 0;
}

int
agui_session(struct conn *c, char *sid, size_t sidlen, int *create)
{
	struct agui_req rq;
	char msg[256];
	cJSON *o;

	*create = 0;
	/* Not a thread (also a project's kg: id): agui_http says why. */
	if (adapt_session_id(c->ic.session, msg, sizeof(msg)) == -1)
		return 0;
	if (strcmp(c->hp.req.method, "POST") == 0 &&
	    strcmp(c->hp.req.path, "/api/agui") == 0 &&
	    (o = adapt_body(c, msg, sizeof(msg))) != NULL) {
		/* Only a valid run that chats makes the session. */
		if (agui_parse(o, c->wk->conf->max_message, &rq,
		    msg, sizeof(msg)) == 0) {
			*create = rq.kind == AGUI_CHAT && !server_taken(c,
			    &rq);
			agui_req_free(&rq);
		}
		cJSON_Delete(o);
	}
	snprintf(sid, sidlen, "%s", c->ic.session);
	return 1;
}

static void
agui_post(struct conn *c)
{
	struct agui_req rq;
	struct agui *st;
	char msg[300];
	cJSON *o;

	if ((o = adapt_body(c, msg, sizeof(msg))) == NULL) {
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return;
	}
	if (agui_parse(o, c->wk->conf->max_message, &rq, msg,
	    sizeof(msg)) == -1) {
		cJSON_Delete(o);
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return;
	}
	cJSON_Delete(o);
	if (server_taken(c, &rq)) {
		agui_req_free(&rq);
		conn_http_error(c, 400, "BAD_REQUEST", "field 'tools': this "
		    "host's configuration has an mcp-server named '"
		    AGUI_SERVER "', the name Parley gives AG-UI clients' "
		    "tools; send no tools, or ask the operator to rename it");
		return;
	}
	if (strcmp(rq.thread, c->ic.session) != 0) {
		agui_req_free(&rq);
		conn_http_error(c, 500, "INTERNAL", "the request reached a "
		    "worker for another thread; retry");
		return;
	}
	if (c->ic.role == IPC_ROLE_OBSERVER) {
		agui_req_free(&rq);
		conn_http_error(c, 403, "FORBIDDEN", "an observer only reads: "
		    "run the agent with a user's token, or follow the thread "
		    "with GET /api/agui/THREAD/stream");
		return;
	}
	if ((st = agui_new()) == NULL) {
		agui_req_free(&rq);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	snprintf(st->thread, sizeof(st->thread), "%s", rq.thread);
	snprintf(st->chatid, sizeof(st->chatid), "%s%s", AGUI_CHAT_PREFIX,
	    rq.run);
	st->kind = rq.kind;
	st->inputs = rq.inputs;
	cJSON_Delete(st->answered);
	st->answered = rq.answered;
	cJSON_Delete(st->replied);
	st->replied = rq.replied;
	st->approval_ms = c->wk->conf->approval_timeout_ms;
	/* Set before input_apply: a follower's answer comes to reply. */
	c->adapt = &agui_adapt;
	c->adapt_st = st;
	apply_next(c);
}

/* GET /api/agui/{threadId}/stream: the current run, replayed and live. */
static void
agui_get(struct conn *c)
{
	struct agui *st;
	struct sess *s;
	const char *err;
	char last[64], msg[200], why[256];
	uint64_t seq;
	int have;

	if (adapt_session_id(c->ic.session, msg, sizeof(msg)) == -1) {
		snprintf(why, sizeof(why), "the threadId in "
		    "/api/agui/THREAD/stream: %s", msg);
		conn_http_error(c, 400, "BAD_REQUEST", why);
		return;
	}
	if ((s = sess_get(c->wk, c->ic.session, NULL, NULL, NULL, &err)) ==
	    NULL) {
		adapt_open_error(c, err);
		return;
	}
	if ((st = agui_new()) == NULL) {
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	if ((have = adapt_last_id(c, last, sizeof(last))) == -2) {
		agui_free(st);
		conn_http_error(c, 400, "BAD_REQUEST", "Last-Event-ID (or "
		    "?lastEventId=) is too long for an id of this stream, "
		    "SEQ:K");
		return;
	}
	have = have == 0;
	if (have && adapt_cursor_parse(&st->cur, last) == -1) {
		agui_free(st);
		conn_http_error(c, 400, "BAD_REQUEST", "Last-Event-ID (or "
		    "?lastEventId=) must be an id of this stream, SEQ:K");
		return;
	}
	if (have && adapt_resume_check(c, s, &st->cur) == -1) {
		agui_free(st);
		return;
	}
	if (!adapt_current_turn(s, st->msgid, sizeof(st->msgid), &seq) &&
	    waiting_turn(s, st->msgid, sizeof(st->msgid), &seq) == -1) {
		agui_free(st);
		conn_respond(c, 204, NULL, 0, NULL);
		return;
	}
	snprintf(st->thread, sizeof(st->thread), "%s", s->id);
	st->kind = AGUI_CHAT;
	st->approval_ms = c->wk->conf->approval_timeout_ms;
	/* Without an id: the last run from its start. */
	if (!have)
		st->hold_until = sess_last_seq(s);
	adapt_stream(c, s, &agui_adapt, st, NULL, seq);
}

void
agui_http(struct conn *c)
{
	const char *p = c->hp.req.path, *m = c->hp.req.method;
	size_t n = strlen(p);

	if (strcmp(p, "/api/agui") == 0) {
		if (strcmp(m, "POST") != 0) {
			conn_http_error(c, 405, "BAD_REQUEST", "use POST "
			    "/api/agui with a RunAgentInput");
			return;
		}
		agui_post(c);
		return;
	}
	if (n > 17 && strcmp(p + n - 7, "/stream") == 0) {
		if (strcmp(m, "GET") != 0) {
			conn_http_error(c, 405, "BAD_REQUEST", "use GET "
			    "/api/agui/THREAD/stream");
			return;
		}
		agui_get(c);
		return;
	}
	conn_http_error(c, 404, "NOT_FOUND", "no such endpoint: POST "
	    "/api/agui, GET /api/agui/THREAD/stream");
}
