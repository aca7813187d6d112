/*
 * POST /api/agents/stream, the turn stream of the system seed 001 describes
 * (clients POST {"sessionId","message"} and read Server-Sent Events whose
 * data lines are chunks {"type","data","timestamp"}), so such clients work
 * unchanged.  The turn is an ordinary one: the message is a chat, logged
 * as user_message, answered like POST /sessions/{id}/messages with Accept:
 * text/event-stream (route.c's post_reply), and this connection is that
 * turn stream with another framing: each logged event of the turn becomes
 * the chunks below instead of an SSE event with id and type, because those
 * clients only read blocks that begin with "data: ".
 *
 *	token			content, data: the text
 *	tool_start		metadata {status:"executing_tool", toolId, ...}
 *	tool_result		tool_call {toolId, toolCallId, input, result|error,
 *				duration}
 *	tool_approve_request	metadata {status:"awaiting_approval", ...}
 *	done			metadata {status:"done", usage, tokenUsage, ...},
 *				then metadata {status:"complete"}
 *	error (the turn's)	error {message, code, severity}; a retrying one
 *				is metadata {status:"retrying", ...}
 *
 * Events of other turns (messages queued before this one) are not shown.
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
#include "conn.h"
#include "adapt.h"
#include "deliver.h"
#include "evt.h"
#include "input.h"
#include "route.h"
#include "seed.h"
#include "sess.h"
#include "wk.h"

#define SEED_ARGS_MAX	64	/* tool calls whose input is remembered */

#define SEED(c)	((struct seed *)(c)->adapt_st)

#define SEED_FIND_MS	30000	/* a follower waits this long for its
				   message to come back logged */

static char	*seed_chunks(struct conn *, const struct evt *, size_t *,
		    int *);
static void	 seed_free(void *);

const struct adapt_ops seed_adapt = {
	.name = "seed",
	.chunks = seed_chunks,
	.reply = seed_reply,
	.free = seed_free,
};

/* What a stream remembers between events. */
struct seed {
	struct adapt_cursor cur;	/* first: adapt.h's; no ids */
	char	 id[80];	/* the chat's client id */
	uint64_t from;		/* the log's end before the chat */
	cJSON	*args;		/* toolCallId: the args of its tool_start */
	int	 nargs;
	int	 complete;	/* "complete" sent */
};

/* Appends one chunk, data: {"type":type,"data":data,"timestamp":ms}. */
static void
chunk_add(struct seed *sd, char **out, size_t *len, const char *type,
    cJSON *data)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddItemToObject(o, "data", data);
	cJSON_AddNumberToObject(o, "timestamp", (double)util_now_ms());
	/* No ids: nothing to resume by, so nothing is left out. */
	adapt_sse(&sd->cur, out, len, 0, o);
}

/* A metadata chunk's data: {"status":status}. */
static cJSON *
status_obj(const char *status)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "status", status);
	return o;
}

static void
copy_field(cJSON *to, const cJSON *from, const char *key, const char *as)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(from, key);

	if (f != NULL)
		cJSON_AddItemToObject(to, as, cJSON_Duplicate(f, 1));
}

/* done's usage, as the seed's tokenUsage names it. */
static cJSON *
token_usage(const cJSON *u)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "inputTokens", proto_count(u,
	    "inputTokens"));
	cJSON_AddNumberToObject(o, "outputTokens", proto_count(u,
	    "outputTokens"));
	cJSON_AddNumberToObject(o, "totalTokens", proto_count(u, "tokens"));
	cJSON_AddNumberToObject(o, "estimatedCost", proto_count(u, "cost"));
	return o;
}

static void
tool_start(struct seed *sd, const cJSON *e, char **out, size_t *len)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "toolCallId"));
	cJSON *m = status_obj("executing_tool");

	copy_field(m, e, "tool", "toolId");
	copy_field(m, e, "toolCallId", "toolCallId");
	copy_field(m, e, "agentId", "agentId");
	chunk_add(sd, out, len, "metadata", m);
	/* tool_result does not repeat the input: kept until it comes. */
	if (id != NULL && sd->nargs < SEED_ARGS_MAX &&
	    cJSON_GetObjectItemCaseSensitive(sd->args, id) == NULL) {
		cJSON_AddItemToObject(sd->args, id, cJSON_Duplicate(
		    cJSON_GetObjectItem(e, "args"), 1));
		sd->nargs++;
	}
}

static void
tool_result(struct seed *sd, const cJSON *e, char **out, size_t *len)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "toolCallId"));
	cJSON *t = cJSON_CreateObject(), *in = NULL;

	copy_field(t, e, "tool", "toolId");
	copy_field(t, e, "toolCallId", "toolCallId");
	if (id != NULL && (in = cJSON_DetachItemFromObjectCaseSensitive(
	    sd->args, id)) != NULL)
		sd->nargs--;
	cJSON_AddItemToObject(t, "input", in != NULL ? in :
	    cJSON_CreateObject());
	copy_field(t, e, "result", "result");
	copy_field(t, e, "error", "error");
	cJSON_AddStringToObject(t, "status", cJSON_GetObjectItem(e, "error") ?
	    "error" : "success");
	copy_field(t, e, "duration", "executionTime");
	chunk_add(sd, out, len, "tool_call", t);
}

/*
 * The stream's turn is known by its user_message: through a follower,
 * whose answer has no seq, that is the user_message with the chat's id.
 */
static int
turn_found(struct conn *c, const cJSON *e)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(e, "id"));

	if (c->turn_msgid[0] != '\0')
		return (uint64_t)proto_count(e, "seq") ==
		    strtoull(c->turn_msgid + 2, NULL, 10);
	if (id == NULL || strcmp(id, SEED(c)->id) != 0)
		return 0;
	snprintf(c->turn_msgid, sizeof(c->turn_msgid), "m-%llu",
	    (unsigned long long)proto_count(e, "seq"));
	evtimer_del(c->tmo_ev);
	return 1;
}

static char *
seed_chunks(struct conn *c, const struct evt *ev, size_t *len, int *end)
{
	struct seed *sd = SEED(c);
	const char *type = ev->type;
	cJSON *e, *m;
	char *out = NULL;

	*len = 0;
	*end = 0;	/* evt_written ends it, by c->turn_msgid */
	if ((e = cJSON_ParseWithLength(ev->json, ev->len)) == NULL)
		return NULL;
	if (strcmp(type, "session_complete") == 0) {
		m = status_obj("complete");
		copy_field(m, e, "reason", "reason");
		chunk_add(sd, &out, len, "metadata", m);
		goto out;
	}
	/* The turn's own events (an earlier turn may still be running). */
	if (strcmp(type, "user_message") != 0 && !adapt_turn_of(c->turn_msgid, e))
		goto out;
	if (strcmp(type, "user_message") == 0) {
		if (turn_found(c, e)) {
			m = status_obj("accepted");
			copy_field(m, e, "sessionId", "sessionId");
			copy_field(m, e, "seq", "seq");
			cJSON_AddStringToObject(m, "messageId", c->turn_msgid);
			chunk_add(sd, &out, len, "metadata", m);
		}
	} else if (strcmp(type, "token") == 0)
		chunk_add(sd, &out, len, "content", cJSON_CreateString(
		    cJSON_GetStringValue(cJSON_GetObjectItem(e, "content")) ?:
		    ""));
	else if (strcmp(type, "tool_start") == 0)
		tool_start(sd, e, &out, len);
	else if (strcmp(type, "tool_result") == 0)
		tool_result(sd, e, &out, len);
	else if (strcmp(type, "tool_approve_request") == 0) {
		m = status_obj("awaiting_approval");
		copy_field(m, e, "tool", "toolId");
		copy_field(m, e, "toolCallId", "toolCallId");
		copy_field(m, e, "risk", "risk");
		copy_field(m, e, "summary", "summary");
		chunk_add(sd, &out, len, "metadata", m);
	} else if (strcmp(type, "done") == 0) {
		m = status_obj("done");
		copy_field(m, e, "sessionId", "sessionId");
		copy_field(m, e, "agentId", "agentId");
		copy_field(m, e, "messageId", "messageId");
		copy_field(m, e, "seq", "seq");
		copy_field(m, e, "usage", "usage");
		cJSON_AddItemToObject(m, "tokenUsage", token_usage(
		    cJSON_GetObjectItem(e, "usage")));
		copy_field(m, e, "turns", "turns");
		copy_field(m, e, "cancelled", "cancelled");
		chunk_add(sd, &out, len, "metadata", m);
		/* A team's answer goes on with its next speaker. */
		if (!cJSON_IsTrue(cJSON_GetObjectItem(e, "teamRound")) &&
		    !sd->complete) {
			chunk_add(sd, &out, len, "metadata", status_obj(
			    "complete"));
			sd->complete = 1;
		}
	} else if (strcmp(type, "team_done") == 0 && !sd->complete) {
		chunk_add(sd, &out, len, "metadata", status_obj("complete"));
		sd->complete = 1;
	} else if (strcmp(type, "error") == 0) {
		m = cJSON_CreateObject();
		copy_field(m, e, "message", "message");
		copy_field(m, e, "code", "code");
		copy_field(m, e, "severity", "severity");
		if (cJSON_IsTrue(cJSON_GetObjectItem(e, "retrying"))) {
			proto_set(m, "status", cJSON_CreateString("retrying"));
			chunk_add(sd, &out, len, "metadata", m);
		} else
			chunk_add(sd, &out, len, "error", m);
	}
out:
	cJSON_Delete(e);
	return out;
}

static void
seed_free(void *arg)
{
	struct seed *sd = arg;

	if (sd == NULL)
		return;
	cJSON_Delete(sd->args);
	free(sd);
}

/*
 * Answers with one error chunk and ends the stream.  Status 200: the
 * clients this endpoint serves read errors from the stream, and one that
 * checks the status first would show none of the message.
 */
static void
seed_error(struct conn *c, const char *code, const char *msg, int http)
{
	struct seed one;
	cJSON *d = cJSON_CreateObject();
	char *out = NULL;
	size_t len = 0;

	memset(&one, 0, sizeof(one));

	cJSON_AddStringToObject(d, "message", msg);
	cJSON_AddStringToObject(d, "code", code);
	cJSON_AddNumberToObject(d, "httpStatus", http);
	chunk_add(&one, &out, &len, "error", d);
	conn_sse_start(c);
	if (out != NULL)
		conn_send_raw(c, out, len);
	free(out);
	conn_close(c, WS_CLOSE_NORMAL, NULL);
}

/* The body as an object (adapt.h), else NULL with msg saying what to send. */
static cJSON *
body_of(struct conn *c, char *msg, size_t msglen)
{
	cJSON *o = adapt_body(c, msg, msglen);

	if (o == NULL && strstr(msg, "JSON object") != NULL)
		snprintf(msg, msglen, "body must be a JSON object "
		    "{\"sessionId\":\"ID\",\"message\":\"TEXT\"}");
	return o;
}

int
seed_session(struct conn *c, char *sid, size_t sidlen, int *create)
{
	char msg[256];
	cJSON *o = body_of(c, msg, sizeof(msg));

	const char *m = NULL;

	/* The supervisor routed it by the body's sessionId; a body that
	 * seed_post refuses creates nothing. */
	*create = o != NULL && proto_str(o, "message", 1,
	    c->wk->conf->max_message, &m, msg, sizeof(msg)) == 0 && m != NULL;
	cJSON_Delete(o);
	snprintf(sid, sidlen, "%s", c->ic.session);
	return store_valid_id(sid);
}

void
seed_post(struct conn *c)
{
	const char *sid, *message = NULL, *id = NULL, *code, *err;
	struct sess_result res;
	struct proto_in in;
	struct sess *s;
	cJSON *o, *m;
	char msg[256], *txt;

	if (strcmp(c->hp.req.method, "POST") != 0) {
		conn_http_error(c, 405, "BAD_REQUEST", "use POST "
		    "/api/agents/stream with {\"sessionId\",\"message\"}");
		return;
	}
	if ((o = body_of(c, msg, sizeof(msg))) == NULL) {
		seed_error(c, "BAD_REQUEST", msg, 400);
		return;
	}
	sid = cJSON_GetStringValue(cJSON_GetObjectItem(o, "sessionId"));
	if (sid == NULL || !store_valid_id(sid)) {
		cJSON_Delete(o);
		seed_error(c, "BAD_REQUEST", "field 'sessionId' must be 1-128 "
		    "characters of A-Z a-z 0-9 . _ : -", 400);
		return;
	}
	if (strcmp(sid, c->ic.session) != 0) {
		cJSON_Delete(o);
		seed_error(c, "INTERNAL", "the request reached a worker for "
		    "another session; retry", 500);
		return;
	}
	if (proto_str(o, "message", 1, c->wk->conf->max_message, &message,
	    msg, sizeof(msg)) == -1) {
		cJSON_Delete(o);
		seed_error(c, "BAD_REQUEST", msg, 400);
		return;
	}
	if ((c->adapt_st = calloc(1, sizeof(struct seed))) != NULL)
		c->adapt = &seed_adapt;
	if (c->adapt_st == NULL ||
	    (SEED(c)->args = cJSON_CreateObject()) == NULL) {
		cJSON_Delete(o);
		seed_error(c, "OVERLOADED", "out of memory; retry", 503);
		return;
	}
	/* The chat a client of the protocol would send, with an id that
	 * finds its user_message (an "id" the client gives makes a retry
	 * of the POST replay, not repeat, the turn). */
	if (proto_str(o, "id", 0, sizeof(SEED(c)->id) - 1, &id, msg,
	    sizeof(msg)) == -1) {
		cJSON_Delete(o);
		seed_error(c, "BAD_REQUEST", msg, 400);
		return;
	}
	if (id != NULL)
		snprintf(SEED(c)->id, sizeof(SEED(c)->id), "%s", id);
	else {
		char hex[33];

		/* Unique across hosts too (an id seen before is a repeat),
		 * and random: the log shows it to every reader, so it must
		 * not carry the request id. */
		util_randhex(hex, 16);
		snprintf(SEED(c)->id, sizeof(SEED(c)->id), "seed-%s", hex);
	}
	m = proto_head("chat", sid);
	cJSON_AddStringToObject(m, "message", message);
	cJSON_AddStringToObject(m, "id", SEED(c)->id);
	cJSON_Delete(o);
	txt = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	if (txt == NULL || proto_parse(txt, strlen(txt),
	    c->wk->conf->max_json_depth, &in, &code, msg, sizeof(msg)) == -1) {
		free(txt);
		seed_error(c, txt == NULL ? "INTERNAL" : code, txt == NULL ?
		    "out of memory" : msg, txt == NULL ? 500 : 400);
		return;
	}
	free(txt);
	if ((s = sess_get(c->wk, c->ic.session, route_creator(c, NULL), NULL,
	    NULL, &err)) ==
	    NULL) {
		proto_in_free(&in);
		/* Not opened here: the supervisor need not route it here. */
		if (sess_find(c->wk, c->ic.session) == NULL)
			wk_released(c->wk, c->ic.session);
		seed_error(c, err, "the session could not be opened; retry",
		    strcmp(err, "OVERLOADED") == 0 ? 503 : 500);
		return;
	}
	SEED(c)->from = sess_last_seq(s) + 1;
	input_apply(s, &c->cl, &(struct sess_from){ (int)c->ic.role,
	    c->agent, c->ic.subject, 0 }, &in, &res);
	proto_in_free(&in);
	if (!res.pending)
		seed_reply(c, s, &res);
}

void
seed_reply(struct conn *c, struct sess *s, const struct sess_result *res)
{
	if (res->code != NULL) {
		seed_error(c, res->code, res->msg, res->http);
		return;
	}
	/* The turn stream of POST .../messages, from its user_message. */
	conn_sse_start(c);
	conn_attach(c, s);
	if (res->seq > 0) {
		snprintf(c->turn_msgid, sizeof(c->turn_msgid), "m-%llu",
		    (unsigned long long)res->seq);
		c->sub.next_seq = res->seq;
	} else {
		struct timeval tv;

		/* A follower handed it to the owner, which logs it soon:
		 * found by its id among what is logged after the chat. */
		c->sub.next_seq = SEED(c)->from;
		util_tv(&tv, SEED_FIND_MS);
		evtimer_add(c->tmo_ev, &tv);
	}
	c->sub.live = 0;
	deliver_pump(&c->sub);
}
