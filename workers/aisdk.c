/*
 * POST /api/chat and GET /api/chat/{id}/stream: the Vercel AI SDK's UI
 * message stream, v1, over the session log (adapt.h).  The chat id is
 * the session; Parley keeps the history, so only the posted messages'
 * last one counts:
 *
 *	a user message		its text parts, joined, are a chat with id
 *				"ui-" + the message's id (a retried POST
 *				replays the turn instead of running it
 *				twice); the answer is that turn's stream
 *	an assistant message	its tool parts in state approval-responded
 *				are tool_approve answers (approve, reject),
 *				all checked before any is applied; the
 *				answer is the rest of the turn that asked
 *				them, after what the log held before
 *
 * GET .../stream replays the running (or waiting) turn from its start
 * and goes on live; with Last-Event-ID "SEQ:K" it leaves out what the
 * client has; 204 when no turn runs.  The chunks: aisdk_tr.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "adapt.h"
#include "aisdk.h"
#include "aisdk_tr.h"
#include "approve.h"
#include "conn.h"
#include "evt.h"
#include "input.h"
#include "route.h"
#include "sess.h"
#include "turn.h"
#include "wk.h"

#define AISDK_HDR	"x-vercel-ai-ui-message-stream: v1\r\n"
#define AISDK_MSGID_MAX	96	/* bytes of a UI message id */
#define AISDK_APPROVALS	32	/* approvals one POST may answer */
#define AISDK_FIND_MS	30000	/* a follower waits this long for its
				   chat to come back logged */

#define AISDK(c)	((struct aisdk *)(c)->adapt_st)

/* What a POST asks, from its body. */
struct aisdk_req {
	const char	*chat;		/* the chat id: the session */
	const cJSON	*last;		/* the last message */
	int		 approval;	/* 1: answers approvals, 0: a chat */
	char		*text;		/* a chat's text (malloc'd) */
	const char	*msg_id;	/* the last message's id */
};

/* A connection's state. */
struct aisdk {
	struct aisdk_tr	 tr;		/* first: its cursor is adapt.h's */
	int		 approving;	/* applying cJSON approvals */
	cJSON		*approvals;	/* [{toolCallId, decision, reason}] */
	int		 next;		/* the next to apply */
	uint64_t	 from;		/* the log's end before the POST */
	char		 msgid[48];	/* an approval's turn, or "" */
};

static void	aisdk_reply(struct conn *, struct sess *,
		    const struct sess_result *);

static int
aisdk_waits(void *arg, const char *id)
{
	struct conn *c = arg;

	return c->sess != NULL && approve_waits(c->sess, id);
}

static char *
aisdk_chunks(struct conn *c, const struct evt *ev, size_t *len, int *end)
{
	struct aisdk *st = AISDK(c);
	int was = st->tr.started;
	cJSON *e;
	char *out;

	*len = 0;
	*end = 0;
	if ((e = cJSON_ParseWithLength(ev->json, ev->len)) == NULL)
		return NULL;
	out = aisdk_tr_event(&st->tr, ev->seq, ev->type, e, len, end);
	cJSON_Delete(e);
	/* A follower's chat came back logged: no more waiting for it. */
	if (!was && st->tr.started)
		evtimer_del(c->tmo_ev);
	return out;
}

static void
aisdk_free(void *arg)
{
	struct aisdk *st = arg;

	if (st == NULL)
		return;
	aisdk_tr_clear(&st->tr);
	cJSON_Delete(st->approvals);
	free(st);
}

const struct adapt_ops aisdk_adapt = {
	.name = "aisdk",
	.chunks = aisdk_chunks,
	.reply = aisdk_reply,
	.free = aisdk_free,
};

int
aisdk_path(const struct conn *c)
{
	const char *p = c->hp.req.path;

	return strcmp(p, "/api/chat") == 0 || strncmp(p, "/api/chat/", 10) == 0;
}

/* 1 when s is 1 to max bytes of A-Z a-z 0-9 . _ : - */
static int
id_ok(const char *s, size_t max)
{
	size_t n = s != NULL ? strlen(s) : 0;

	return n > 0 && n <= max && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcd"
	    "efghijklmnopqrstuvwxyz0123456789._:-") == n;
}

/* A user message's text parts joined by newlines, bounded by max. */
static char *
user_text(const cJSON *parts, size_t max, char *msg, size_t msglen)
{
	const cJSON *p, *t;
	char *buf = NULL, *grown;
	size_t len = 0, n;

	cJSON_ArrayForEach(p, parts) {
		t = cJSON_GetObjectItemCaseSensitive(p, "text");
		if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p,
		    "type")) || strcmp(cJSON_GetObjectItemCaseSensitive(p,
		    "type")->valuestring, "text") != 0 || !cJSON_IsString(t))
			continue;
		n = strlen(t->valuestring);
		if (len + n + 1 > max) {
			free(buf);
			snprintf(msg, msglen, "the message's text is longer "
			    "than max-message (%zu bytes)", max);
			return NULL;
		}
		if ((grown = realloc(buf, len + n + 2)) == NULL) {
			free(buf);
			snprintf(msg, msglen, "out of memory; retry");
			return NULL;
		}
		buf = grown;
		if (len > 0)
			buf[len++] = '\n';
		memcpy(buf + len, t->valuestring, n + 1);
		len += n;
	}
	if (buf == NULL || len == 0) {
		free(buf);
		snprintf(msg, msglen, "the last message has no text: give it a "
		    "part {\"type\":\"text\",\"text\":\"...\"}");
		return NULL;
	}
	return buf;
}

/* Whether part p is a tool part answered by the user (approval-responded). */
static int
answered_part(const cJSON *p)
{
	const char *type = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(p, "type"));
	const char *state = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(p, "state"));

	return type != NULL && (strncmp(type, "tool-", 5) == 0 ||
	    strcmp(type, "dynamic-tool") == 0) && state != NULL &&
	    strcmp(state, "approval-responded") == 0;
}

/*
 * Checks the body of a POST; 0 with r filled (r->text the caller's), or
 * -1 with msg saying what is wrong and what to send instead.
 */
static int
req_parse(const cJSON *o, size_t max, struct aisdk_req *r, char *msg,
    size_t msglen)
{
	const cJSON *msgs, *parts, *p, *a;
	const char *trig, *role;
	int n = 0;

	memset(r, 0, sizeof(*r));
	if (!cJSON_IsObject(o)) {
		snprintf(msg, msglen, "the body must be a JSON object {\"id\","
		    "\"messages\",\"trigger\",\"messageId\"} as the AI SDK's "
		    "DefaultChatTransport posts it");
		return -1;
	}
	r->chat = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o,
	    "id"));
	if (r->chat == NULL || adapt_session_id(r->chat, msg, msglen) == -1) {
		if (r->chat == NULL || !store_valid_id(r->chat))
			snprintf(msg, msglen, "field 'id' (the chat id, Parley's "
			    "session) must be 1-128 characters of A-Z a-z 0-9 . "
			    "_ : - (not starting with '.')");
		return -1;
	}
	trig = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o,
	    "trigger"));
	if (trig != NULL && strcmp(trig, "regenerate-message") == 0) {
		snprintf(msg, msglen, "trigger 'regenerate-message' is not "
		    "supported: the session's log keeps every turn; send the "
		    "question again as a new user message");
		return -1;
	}
	if (cJSON_GetObjectItemCaseSensitive(o, "trigger") != NULL &&
	    (trig == NULL || strcmp(trig, "submit-message") != 0)) {
		snprintf(msg, msglen, "field 'trigger' must be "
		    "\"submit-message\"");
		return -1;
	}
	msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
	if (!cJSON_IsArray(msgs) || (n = cJSON_GetArraySize(msgs)) == 0) {
		snprintf(msg, msglen, "field 'messages' must be a non-empty "
		    "array of UI messages (Parley keeps the history: the last "
		    "one is enough)");
		return -1;
	}
	r->last = cJSON_GetArrayItem(msgs, n - 1);
	role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r->last,
	    "role"));
	parts = cJSON_GetObjectItemCaseSensitive(r->last, "parts");
	r->msg_id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	    r->last, "id"));
	if (role == NULL || !cJSON_IsArray(parts)) {
		snprintf(msg, msglen, "the last message must be an object with "
		    "'role' and an array 'parts'");
		return -1;
	}
	if (strcmp(role, "user") == 0) {
		if (!id_ok(r->msg_id, AISDK_MSGID_MAX)) {
			snprintf(msg, msglen, "the last message's 'id' must be "
			    "1-%d characters of A-Z a-z 0-9 . _ : -",
			    AISDK_MSGID_MAX);
			return -1;
		}
		/* The SDK's edit: the log cannot take a turn back. */
		if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o,
		    "messageId"))) {
			snprintf(msg, msglen, "replacing a sent message "
			    "(messageId) is not supported: the log keeps every "
			    "turn; send a new message");
			return -1;
		}
		if ((r->text = user_text(parts, max, msg, msglen)) == NULL)
			return -1;
		return 0;
	}
	if (strcmp(role, "assistant") == 0) {
		n = 0;
		cJSON_ArrayForEach(p, parts) {
			if (!answered_part(p))
				continue;
			a = cJSON_GetObjectItemCaseSensitive(p, "approval");
			if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(a,
			    "id")) || !cJSON_IsBool(
			    cJSON_GetObjectItemCaseSensitive(a, "approved")) ||
			    strlen(cJSON_GetObjectItemCaseSensitive(a,
			    "id")->valuestring) > 256) {
				snprintf(msg, msglen, "a tool part in state "
				    "approval-responded needs approval "
				    "{\"id\",\"approved\":true|false}");
				return -1;
			}
			n++;
		}
		if (n == 0 || n > AISDK_APPROVALS) {
			snprintf(msg, msglen, "the last message is the "
			    "assistant's: it must answer 1-%d tool approvals "
			    "(tool parts in state approval-responded), or send "
			    "a user message", AISDK_APPROVALS);
			return -1;
		}
		r->approval = 1;
		return 0;
	}
	snprintf(msg, msglen, "the last message's role must be 'user' (a "
	    "question) or 'assistant' (answered tool approvals), not '%.32s'",
	    role);
	return -1;
}

int
aisdk_session(struct conn *c, char *sid, size_t sidlen, int *create)
{
	struct aisdk_req r;
	char msg[256];
	cJSON *o;

	*create = 0;
	/* Nothing is loaded for an id that names no chat: aisdk_http says. */
	if (adapt_session_id(c->ic.session, msg, sizeof(msg)) == -1)
		return 0;
	if (strcmp(c->hp.req.method, "POST") == 0 &&
	    strcmp(c->hp.req.path, "/api/chat") == 0) {
		/* Only a valid question may make the session. */
		if ((o = adapt_body(c, msg, sizeof(msg))) != NULL &&
		    req_parse(o, c->wk->conf->max_message, &r, msg,
		    sizeof(msg)) == 0) {
			*create = !r.approval;
			free(r.text);
		}
		cJSON_Delete(o);
	}
	snprintf(sid, sidlen, "%s", c->ic.session);
	return 1;
}

/* Applies client message m (consumed) to s; res filled. */
static int
apply(struct conn *c, struct sess *s, cJSON *m, struct sess_result *res)
{
	struct proto_in in;
	const char *code;
	char msg[256], *txt = cJSON_PrintUnformatted(m);

	cJSON_Delete(m);
	memset(res, 0, sizeof(*res));
	if (txt == NULL || proto_parse(txt, strlen(txt),
	    c->wk->conf->max_json_depth, &in, &code, msg, sizeof(msg)) == -1) {
		sess_result_err(res, txt == NULL ? "INTERNAL" : code,
		    txt == NULL ? 500 : 400, "%s", txt == NULL ?
		    "out of memory" : msg);
		free(txt);
		return -1;
	}
	free(txt);
	input_apply(s, &c->cl, &(struct sess_from){ (int)c->ic.role,
	    c->agent, c->ic.subject, 0 }, &in, res);
	proto_in_free(&in);
	return 0;
}

/* The approvals left to apply, one at a time (each may wait). */
static void
approve_next(struct conn *c, struct sess *s)
{
	struct aisdk *st = AISDK(c);
	struct sess_result res;
	cJSON *a, *m;

	memset(&res, 0, sizeof(res));
	while ((a = cJSON_GetArrayItem(st->approvals, st->next)) != NULL) {
		st->next++;
		m = proto_head("tool_approve", s->id);
		cJSON_AddItemToObject(m, "toolCallId", cJSON_Duplicate(
		    cJSON_GetObjectItemCaseSensitive(a, "toolCallId"), 1));
		cJSON_AddItemToObject(m, "decision", cJSON_Duplicate(
		    cJSON_GetObjectItemCaseSensitive(a, "decision"), 1));
		if (cJSON_GetObjectItemCaseSensitive(a, "reason") != NULL)
			cJSON_AddItemToObject(m, "reason", cJSON_Duplicate(
			    cJSON_GetObjectItemCaseSensitive(a, "reason"), 1));
		if (apply(c, s, m, &res) == -1 || res.code != NULL) {
			aisdk_reply(c, s, &res);
			return;
		}
		if (res.pending)
			return;		/* aisdk_reply goes on */
	}
	st->approving = 0;
	aisdk_reply(c, s, &res);
}

/*
 * Checks every answer of the POST before any is applied, so a bad one
 * changes nothing: each names a call that waits for its approval (meta's
 * waiting list, which a host that only follows the session keeps too) or
 * one answered already (a repeat, which changes nothing), and those that
 * wait are of one turn.  The turn is taken from them; the client's
 * message id only cross-checks it, or names the turn when every answer
 * is a repeat (its stream then ends at the turn's end, or at once when
 * that seq is no turn's user_message: aisdk_tr.c).  0 with st->msgid
 * set, or -1 with the HTTP error answered.
 */
static int
approvals_check(struct conn *c, struct sess *s, const char *msg_id)
{
	struct aisdk *st = AISDK(c);
	const cJSON *a, *w;
	const char *id;
	uint64_t seq = 0, n, client = aisdk_tr_input_seq(msg_id);
	char msg[400];

	cJSON_ArrayForEach(a, st->approvals) {
		id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a,
		    "toolCallId"));
		if ((w = approve_entry(s, id, APPROVE_APPROVALS)) == NULL) {
			if (approve_was_answered(s, id))
				continue;
			snprintf(msg, sizeof(msg), "no approval is pending for "
			    "toolCallId '%.100s' in this chat: answer only the "
			    "tool-approval-request chunks of its waiting turn "
			    "(nothing was applied)", id);
			conn_http_error(c, 404, "NOT_FOUND", msg);
			return -1;
		}
		n = aisdk_tr_input_seq(cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(w, "messageId")));
		if (n == 0 || (seq != 0 && n != seq) || (client != 0 &&
		    n != client)) {
			snprintf(msg, sizeof(msg), "the approval of toolCallId "
			    "'%.100s' belongs to another turn than %s: answer "
			    "one turn's approvals per request, in that turn's "
			    "assistant message (nothing was applied)", id,
			    seq != 0 || client == 0 ? "the others" :
			    "the message's id says");
			conn_http_error(c, 409, "CONFLICT", msg);
			return -1;
		}
		seq = n;
	}
	if (seq == 0 && client != 0 && client <= sess_last_seq(s))
		seq = client;
	if (seq == 0) {
		conn_http_error(c, 409, "CONFLICT", "no turn of this chat waits "
		    "for these approvals: they were answered, and the last "
		    "message's id names no turn of the chat");
		return -1;
	}
	snprintf(st->msgid, sizeof(st->msgid), "m-%llu",
	    (unsigned long long)seq);
	return 0;
}

/* Each answered approval of the last message as a tool_approve body. */
static cJSON *
approvals_of(const cJSON *last)
{
	cJSON *list = cJSON_CreateArray(), *x;
	const cJSON *p, *a, *reason;

	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(last,
	    "parts")) {
		if (!answered_part(p))
			continue;
		a = cJSON_GetObjectItemCaseSensitive(p, "approval");
		x = cJSON_CreateObject();
		/* The approval id is the toolCallId (tool-approval-request). */
		cJSON_AddStringToObject(x, "toolCallId",
		    cJSON_GetObjectItemCaseSensitive(a, "id")->valuestring);
		cJSON_AddStringToObject(x, "decision", cJSON_IsTrue(
		    cJSON_GetObjectItemCaseSensitive(a, "approved")) ?
		    "approve" : "reject");
		if (cJSON_IsString(reason = cJSON_GetObjectItemCaseSensitive(a,
		    "reason")))
			cJSON_AddStringToObject(x, "reason",
			    reason->valuestring);
		cJSON_AddItemToArray(list, x);
	}
	return list;
}

static void
post_chat(struct conn *c)
{
	struct aisdk_req r;
	struct sess_result res;
	struct aisdk *st;
	struct sess *s;
	const char *err;
	char msg[256], cid[AISDK_TR_ID];
	cJSON *o, *m;

	if ((o = adapt_body(c, msg, sizeof(msg))) == NULL) {
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return;
	}
	if (req_parse(o, c->wk->conf->max_message, &r, msg, sizeof(msg)) ==
	    -1) {
		cJSON_Delete(o);
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return;
	}
	if (strcmp(r.chat, c->ic.session) != 0) {
		free(r.text);
		cJSON_Delete(o);
		conn_http_error(c, 500, "INTERNAL", "the request reached a "
		    "worker for another session; retry");
		return;
	}
	/* What an observer may not do, said before anything is opened. */
	if (route_creator(c, &c->hp.req) == NULL) {
		free(r.text);
		cJSON_Delete(o);
		conn_http_error(c, 403, "FORBIDDEN", "an observer cannot post "
		    "to /api/chat; use a user token");
		return;
	}
	if ((s = sess_get(c->wk, c->ic.session, r.approval ? NULL :
	    route_creator(c, NULL), NULL, NULL, &err)) == NULL) {
		free(r.text);
		cJSON_Delete(o);
		adapt_open_error(c, err);
		return;
	}
	if ((st = calloc(1, sizeof(*st))) == NULL) {
		free(r.text);
		cJSON_Delete(o);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	/* Set before input_apply: a follower's answer comes through them. */
	c->adapt = &aisdk_adapt;
	c->adapt_st = st;
	st->from = sess_last_seq(s);
	if (r.approval) {
		st->approvals = approvals_of(r.last);
		if (approvals_check(c, s, r.msg_id) == -1) {
			cJSON_Delete(o);
			return;
		}
		cJSON_Delete(o);
		st->approving = 1;
		approve_next(c, s);
		return;
	}
	/* A retried POST names the same message: the turn is replayed. */
	snprintf(cid, sizeof(cid), "ui-%s", r.msg_id);
	m = proto_head("chat", s->id);
	cJSON_AddStringToObject(m, "message", r.text);
	cJSON_AddStringToObject(m, "id", cid);
	free(r.text);
	cJSON_Delete(o);
	if (aisdk_tr_init(&st->tr, cid, NULL) == -1) {
		cJSON_Delete(m);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	if (apply(c, s, m, &res) == -1 || !res.pending)
		aisdk_reply(c, s, &res);
}

/*
 * Starts the stream of st's turn from seq from.  Until the turn's first
 * event is read (aisdk_chunks), it waits at most AISDK_FIND_MS: a chat a
 * follower handed on is logged by the owner soon, and a turn read from
 * its seq starts at once.
 */
static void
stream(struct conn *c, struct sess *s, uint64_t from)
{
	struct aisdk *st = AISDK(c);
	struct timeval tv;

	util_tv(&tv, AISDK_FIND_MS);
	evtimer_add(c->tmo_ev, &tv);
	st->tr.waits = aisdk_waits;
	st->tr.arg = c;
	adapt_stream(c, s, &aisdk_adapt, st, AISDK_HDR, from);
}

static void
aisdk_reply(struct conn *c, struct sess *s, const struct sess_result *res)
{
	struct aisdk *st = AISDK(c);

	if (res->code != NULL) {
		conn_http_error(c, res->http ? res->http : 500, res->code,
		    res->msg);
		return;
	}
	if (st->approving) {
		approve_next(c, s);
		return;
	}
	if (st->approvals != NULL) {
		/* The rest of the turn: from its start, with what the log
		 * held before the answers left out. */
		if (aisdk_tr_init(&st->tr, NULL, st->msgid) == -1) {
			conn_http_error(c, 503, "OVERLOADED", "out of memory; "
			    "retry");
			return;
		}
		st->tr.cur.skip_seq = st->from;
		st->tr.cur.skip_k = (unsigned)-1;
		stream(c, s, st->tr.input_seq);
		return;
	}
	if (res->no_turn) {
		/* Logged for an external agent: no turn here to stream. */
		conn_http_error(c, 409, "CONFLICT", "the message was logged "
		    "for the session's external agent; no turn of this server "
		    "answers it");
		return;
	}
	if (res->seq > 0) {
		/* Logged here: the turn is m-SEQ (a repeat: the first's). */
		st->tr.input_seq = res->seq;
		snprintf(st->tr.msgid, sizeof(st->tr.msgid), "m-%llu",
		    (unsigned long long)res->seq);
		stream(c, s, res->seq);
		return;
	}
	/* A follower handed it to the owner, which logs it soon: found by
	 * its id among what is logged after the POST. */
	stream(c, s, st->from + 1);
}

/* GET /api/chat/{id}/stream: the turn now running, replayed; else 204. */
static void
resume(struct conn *c)
{
	struct aisdk *st;
	struct sess *s;
	const char *err;
	char last[64], m[48];
	uint64_t seq;
	int have;

	if ((s = sess_get(c->wk, c->ic.session, NULL, NULL, NULL, &err)) ==
	    NULL) {
		if (strcmp(err, "NOT_FOUND") != 0) {
			adapt_open_error(c, err);
			return;
		}
		/* A chat not begun has no stream to resume. */
		wk_released(c->wk, c->ic.session);
		conn_respond_as(c, 204, NULL, NULL, 0);
		return;
	}
	if (!adapt_current_turn(s, m, sizeof(m), &seq)) {
		conn_respond_as(c, 204, NULL, NULL, 0);
		return;
	}
	/* The turn itself, from its user_message (m may be a re-run's). */
	snprintf(m, sizeof(m), "m-%llu", (unsigned long long)seq);
	if ((st = calloc(1, sizeof(*st))) == NULL ||
	    aisdk_tr_init(&st->tr, NULL, m) == -1) {
		aisdk_free(st);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	have = adapt_last_id(c, last, sizeof(last));
	if (have == -2 || (have == 0 && adapt_cursor_parse(&st->tr.cur,
	    last) == -1)) {
		aisdk_free(st);
		conn_http_error(c, 400, "BAD_REQUEST", "Last-Event-ID (or "
		    "?lastEventId=) must be an id of this stream, \"SEQ:K\"");
		return;
	}
	if (adapt_resume_check(c, s, &st->tr.cur) == -1) {
		aisdk_free(st);
		return;
	}
	c->adapt_st = st;
	stream(c, s, st->tr.input_seq);
}

void
aisdk_http(struct conn *c)
{
	const struct http_request *r = &c->hp.req;
	const char *p = r->path + 10;
	char msg[256];
	size_t n;

	/* Routed by an id that names no chat (aisdk_session loaded none). */
	if (c->ic.session[0] != '\0' && adapt_session_id(c->ic.session, msg,
	    sizeof(msg)) == -1) {
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return;
	}
	if (strcmp(r->path, "/api/chat") == 0) {
		if (strcmp(r->method, "POST") != 0)
			conn_http_error(c, 405, "BAD_REQUEST", "use POST "
			    "/api/chat with the AI SDK's body {\"id\","
			    "\"messages\",...}");
		else if (c->ic.session[0] == '\0') {
			struct aisdk_req q;
			cJSON *o = adapt_body(c, msg, sizeof(msg));

			/* Routed nowhere: the body says why. */
			if (o != NULL && req_parse(o, c->wk->conf->max_message,
			    &q, msg, sizeof(msg)) == 0) {
				free(q.text);
				snprintf(msg, sizeof(msg), "field 'id' must be "
				    "a valid chat id");
			}
			cJSON_Delete(o);
			conn_http_error(c, 400, "BAD_REQUEST", msg);
		} else
			post_chat(c);
		return;
	}
	n = strcspn(p, "/");
	if (n == 0 || strcmp(p + n, "/stream") != 0) {
		conn_http_error(c, 404, "NOT_FOUND", "no such endpoint: the AI "
		    "SDK's are POST /api/chat and GET /api/chat/{id}/stream");
		return;
	}
	if (strcmp(r->method, "GET") != 0) {
		conn_http_error(c, 405, "BAD_REQUEST", "use GET "
		    "/api/chat/{id}/stream");
		return;
	}
	if (c->ic.session[0] == '\0') {
		conn_http_error(c, 400, "BAD_REQUEST", "the chat id in "
		    "/api/chat/{id}/stream must be 1-128 characters of A-Z a-z "
		    "0-9 . _ : - (not starting with '.')");
		return;
	}
	resume(c);
}
