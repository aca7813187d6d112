/*
 * A session's client messages: chat is logged and queued for its turn,
 * cancel, terminate, pause and resume_session act on it; on a follower
 * they go to the owner's inbox (follow.c), and the owner applies what
 * its inbox brings here, each once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "action.h"
#include "approve.h"
#include "auditlog.h"
#include "ctool.h"
#include "follow.h"
#include "index.h"
#include "input.h"
#include "kb.h"
#include "kgs.h"
#include "life.h"
#include "sess.h"
#include "thought.h"
#include "team.h"
#include "tools.h"
#include "turn.h"
#include "wk.h"

#define MAX_QUEUE	64	/* accepted messages waiting for their turn */
#define MAX_RESULT	(256 * 1024)	/* bytes of a client's result kept */

/* terminate: the session ends (life.c), reason "terminated". */
static int
input_terminate(struct sess *s, const char *why)
{
	return life_complete(s, "terminated", why);
}

/*
 * pause and resume_session, from an admin (the control channel, a
 * stream, or POST .../messages).  A pause is an operator's hold on the
 * session, not a state of this worker: it is kept in meta ("paused":
 * true), so whoever owns the session next (after a restart, a drain or
 * a failover) keeps it paused, and it is logged as a session_state event
 * (status "paused", "paused": true, with a seq) so every client and the
 * log see it.  While paused, chat is still accepted, logged as
 * user_message and queued, but no turn starts; a turn already running
 * finishes.  resume_session clears the hold, logs session_state with the
 * status the session resumes in ("paused": false), then starts the
 * queued turns in order.  Pausing a paused session, or resuming one that
 * is not paused, changes nothing and is acknowledged (no seq).
 */
static void
input_pause(struct sess *s, struct sess_client *c, int pause,
    struct proto_in *in, struct sess_result *r)
{
	cJSON *b;
	uint64_t seq;

	if (s->ended) {
		sess_result_err(r, "SESSION_ENDED", 409, "%s",
		    "the session has "
		    "completed");
		return;
	}
	if (sess_paused(s) == pause) {
		/* Nothing new; the change that made it so may be in flight. */
		r->http = 200;
		sess_answer_durable(s, c, in->id, store_last_seq(s->st),
		    ANSWER_NOOP, r);
		return;
	}
	proto_set(sess_meta(s), "paused", cJSON_CreateBool(pause));
	b = sess_state(s);
	cJSON_AddBoolToObject(b, "paused", pause);
	if ((seq = sess_emit(s, "session_state", b)) == 0) {
		proto_set(sess_meta(s), "paused", cJSON_CreateBool(!pause));
		sess_result_err(r, "OVERLOADED", 503, "%s",
		    "the change could not "
		    "be logged; it was not applied, retry");
		return;
	}
	log_rinfo(c != NULL ? c->reqid : NULL, s->id, "session %s by an "
	    "operator at seq %llu", pause ? "paused" : "resumed",
	    (unsigned long long)seq);
	sess_meta_save(s);
	r->seq = seq;
	sess_answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
	if (pause)
		sess_check_idle(s);
	else
		turn_next(s);
}

/* A role's name, as an answer's "by" names who decided. */
static const char *
role_name(int role)
{
	return role == IPC_ROLE_ADMIN ? "admin" : role == IPC_ROLE_USER ?
	    "user" : role == IPC_ROLE_AGENT ? "agent" : "observer";
}

/* tool_approve: the decision is logged, then the waiting call acts on it. */
static void
input_approve(struct sess *s, struct sess_client *c,
    const struct sess_from *from, struct proto_in *in, struct sess_result *r)
{
	const char *id = NULL, *decision = NULL, *logged = NULL;
	int rc;

	if (proto_str(in->root, "toolCallId", 1, 256, &id, r->msg,
	    sizeof(r->msg)) == -1 || proto_str(in->root, "decision", 1, 16,
	    &decision, r->msg, sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if ((rc = approve_answer(s, id, decision, role_name(from->role),
	    from->subject, &logged, r)) == -1)
		return;
	if (rc == 1)
		tools_decided(s, id, logged, r->seq);
	sess_answer_durable(s, c, in->id, r->seq, rc == 1 ? ANSWER_NEW :
	    ANSWER_DUP, r);
}

/* mcp_tools: the session's client tools change, logged. */
static void
input_tools(struct sess *s, struct sess_client *c, int role,
    struct proto_in *in, struct sess_result *r)
{
	if ((r->seq = ctool_register(s, in->root, role_name(role), r)) == 0)
		return;
	sess_answer_durable(s, c, in->id, r->seq, ANSWER_NEW, r);
}

/* mcp_result: a client's answer to an mcp_call, logged once, then taken. */
static void
input_result(struct sess *s, struct sess_client *c, struct proto_in *in,
    struct sess_result *r)
{
	const char *id = NULL;
	cJSON *logged = NULL;
	char *text;
	int is_error = 0, rc;

	if (proto_str(in->root, "toolCallId", 1, 256, &id, r->msg,
	    sizeof(r->msg)) == -1 || (text = ctool_result_text(in->root,
	    &is_error, r->msg, sizeof(r->msg))) == NULL) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if (strlen(text) > MAX_RESULT)
		text[utf8_whole(text, MAX_RESULT)] = '\0';
	rc = approve_result(s, id, is_error, text, "TOOL_ERROR", &logged, r);
	free(text);
	if (rc == -1)
		return;
	if (rc == 1)
		tools_result(s, id, logged);
	cJSON_Delete(logged);
	sess_answer_durable(s, c, in->id, r->seq, rc == 1 ? ANSWER_NEW :
	    ANSWER_DUP, r);
}

/* elicitation_answer: the user's answer to an MCP server's question. */
static void
input_elicit(struct sess *s, struct sess_client *c, int role,
    struct proto_in *in, struct sess_result *r)
{
	const char *id = NULL, *action = NULL;
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(in->root,
	    "content");
	int rc;

	if (proto_str(in->root, "elicitationId", 1, 300, &id, r->msg,
	    sizeof(r->msg)) == -1 || proto_str(in->root, "action", 1, 16,
	    &action, r->msg, sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if ((rc = approve_elicit_answer(s, id, action, content,
	    role_name(role), r)) == -1)
		return;
	if (rc == 1)
		tools_elicited(s, id, action, content);
	sess_answer_durable(s, c, in->id, r->seq, rc == 1 ? ANSWER_NEW :
	    ANSWER_DUP, r);
}

/* set_autonomy: within the operator's max-autonomy, logged. */
static void
input_autonomy(struct sess *s, struct sess_client *c,
    const struct sess_from *from,
    struct proto_in *in, struct sess_result *r)
{
	const struct config *conf = s->wk->conf;
	enum policy_autonomy level;
	const char *name = NULL;
	cJSON *b;

	if (proto_str(in->root, "level", 1, 16, &name, r->msg,
	    sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if (policy_autonomy_parse(name, &level) == -1) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "field 'level' "
		    "must be FULL_AUTO, SUPERVISED, CAUTIOUS or MANUAL");
		return;
	}
	if (policy_autonomy_cmp(level, conf->max_autonomy) > 0) {
		snprintf(r->msg, sizeof(r->msg), "the operator allows at most "
		    "%s (max-autonomy in parleyd.conf)",
		    policy_autonomy_name(conf->max_autonomy));
		r->code = "FORBIDDEN";
		r->http = 403;
		return;
	}
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "level", name);
	cJSON_AddItemToObject(b, "previous", cJSON_Duplicate(
	    cJSON_GetObjectItem(sess_meta(s), "autonomy"), 1));
	cJSON_AddStringToObject(b, "by", role_name(from->role));
	if (from->subject != NULL && from->subject[0] != '\0')
		cJSON_AddStringToObject(b, "subject", from->subject);
	if ((r->seq = sess_emit(s, "autonomy_changed", b)) == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the change could "
		    "not be logged; it was not made, retry");
		return;
	}
	auditlog_event(s, r->seq);
	proto_set(sess_meta(s), "autonomy", cJSON_CreateString(name));
	sess_meta_save(s);
	sess_answer_durable(s, c, in->id, r->seq, ANSWER_NEW, r);
}

/*
 * Whether the message fits in the session's log quota (sess_log_room),
 * counting it as it would be logged: 1, or 0 with r set.  What only
 * decides on or stops work already in the log (cancel, terminate, pause,
 * resume_session, tool_approve, elicitation_answer, action_approve)
 * always passes: a full session can still be finished.
 */
static int
input_log_room(struct sess *s, const struct proto_in *in,
    struct sess_result *r)
{
	static const char *free_types[] = { "ping", "resume", "cancel",
	    "terminate", "pause", "resume_session", "tool_approve",
	    "elicitation_answer", "action_approve" };
	size_t i, need;
	char *txt;

	if (s->wk->conf->session_log_quota == 0)
		return 1;
	for (i = 0; i < sizeof(free_types) / sizeof(free_types[0]); i++)
		if (strcmp(in->type, free_types[i]) == 0)
			return 1;
	if ((txt = cJSON_PrintUnformatted(in->root)) == NULL) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "out of memory; "
		    "retry");
		return 0;
	}
	/* and the envelope the session adds: seq, ts, clientId */
	need = strlen(txt) + 128;
	free(txt);
	return sess_log_room(s, need, r);
}

void
input_apply(struct sess *s, struct sess_client *c,
    const struct sess_from *from, struct proto_in *in, struct sess_result *r)
{
	const char *message = NULL, *to = NULL;
	int role = from->role, external;
	cJSON *b;
	uint64_t seq;

	memset(r, 0, sizeof(*r));
	r->http = 202;
	/* A project's knowledge session takes only its own messages, which
	 * go nowhere else (kgs.c); its roles are its own too. */
	if (kgs_input(s, c, from, in, r))
		return;
	/* One rule for every message: an observer (an observer stream, a
	 * dashboard) only reads; ping and resume are reading. */
	if (role == IPC_ROLE_OBSERVER && strcmp(in->type, "ping") != 0 &&
	    strcmp(in->type, "resume") != 0 &&
	    strcmp(in->type, "kb_search") != 0 &&
	    strcmp(in->type, "kb_list") != 0) {
		sess_result_err(r, "FORBIDDEN", 403, "this connection reads as "
		    "an observer (an observer stream or a dashboard) and may "
		    "not send '%.64s'; use a stream with the user role",
		    in->type);
		return;
	}
	if (from->agent[0] != '\0' && team_agent(s, from->agent) != NULL) {
		sess_result_err(r, "FORBIDDEN", 403, "agentId '%.64s' names an "
		    "internal agent of the session; an external agent takes a "
		    "name of its own", from->agent);
		return;
	}
	/* The knowledge base's (kb.c): its own bounds, and what it logs
	 * is not the message (kb_added holds no content). */
	if (kb_type(in->type)) {
		kb_input(s, c, from, in, r);
		return;
	}
	if (s->follower) {
		follow_input(s, c, from, in, r);
		return;
	}
	if (!input_log_room(s, in, r))
		return;
	if (strcmp(in->type, "chat") == 0) {
		if (sess_id_repeat(s, c, in->id, r))
			return;
		if (s->ended) {
			sess_result_err(r, "SESSION_ENDED", 409, "%s",
			    "the session "
			    "has completed; start a new session");
			return;
		}
		if (proto_str(in->root, "message", 1, s->wk->conf->max_message,
		    &message, r->msg, sizeof(r->msg)) == -1 ||
		    proto_str(in->root, "to", 0, 128, &to, r->msg,
		    sizeof(r->msg)) == -1) {
			r->code = "BAD_REQUEST";
			r->http = 400;
			return;
		}
		/* To an external agent: logged for it to read on its
		 * stream; no internal agent takes a turn for it. */
		external = to != NULL && team_agent(s, to) == NULL &&
		    life_external(s, to);
		if (to != NULL && team_agent(s, to) == NULL && !external) {
			sess_result_err(r, "BAD_REQUEST", 400, "field 'to': "
			    "the session has no agent '%.128s'; name an "
			    "agentId or name of its team_update, or an external "
			    "agent's id", to);
			return;
		}
		if (!external && cJSON_GetArraySize(cJSON_GetObjectItem(
		    sess_meta(s), "queue")) >= MAX_QUEUE) {
			sess_result_err(r, "RATE_LIMITED", 429, "%s",
			    "too many "
			    "messages are waiting for their turn; wait for a "
			    "done event");
			return;
		}
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "message", message);
		if (to != NULL)
			cJSON_AddStringToObject(b, "to", to);
		/* An opaque id per connection (conn.c), never the
		 * request id: other clients read it. */
		if (c != NULL)
			cJSON_AddStringToObject(b, "clientId", c->cid);
		if (in->id != NULL)
			cJSON_AddStringToObject(b, "id", in->id);
		if ((seq = sess_emit(s, "user_message", b)) == 0) {
			sess_result_err(r, "OVERLOADED", 503, "%s",
			    "the message "
			    "could not be logged; it was not accepted, retry");
			return;
		}
		if (in->id != NULL)
			sess_id_add(s, in->id, seq);
		if (c != NULL)
			sess_req_note(s, seq, c->reqid);
		r->seq = seq;
		r->no_turn = external;
		if (!external) {
			cJSON_AddItemToArray(cJSON_GetObjectItem(sess_meta(s),
			    "queue"), cJSON_CreateNumber((double)seq));
			sess_meta_save(s);
		}
		/* The answer says "stored": it waits until it is. */
		sess_answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
		turn_next(s);
		return;
	}
	if (strcmp(in->type, "cancel") == 0) {
		if (s->turn == NULL && cJSON_IsObject(cJSON_GetObjectItem(
		    sess_meta(s), "turn")) && (s->recover_ev != NULL ||
		    s->promote != NULL)) {
			/* Its turn is being read back (the session was out
			 * of memory): cancelled as soon as it is. */
			s->cancel_due = 1;
			r->seq = store_last_seq(s->st);
			sess_answer_durable(s, c, in->id, r->seq, ANSWER_NEW,
			    r);
			return;
		}
		if (s->turn == NULL) {
			r->http = 200;
			return;
		}
		turn_finish(s, 1, 0);
		r->seq = store_last_seq(s->st);
		sess_answer_durable(s, c, in->id, r->seq, ANSWER_NEW, r);
		turn_next(s);
		return;
	}
	if (strcmp(in->type, "terminate") == 0) {
		if (role != IPC_ROLE_ADMIN) {
			sess_result_err(r, "FORBIDDEN", 403, "%s",
			    "terminate needs the admin role");
			return;
		}
		if (input_terminate(s, "terminated by request") == -1) {
			sess_result_err(r, "OVERLOADED", 503, "%s", "the "
			    "termination could not be logged; retry");
			return;
		}
		r->seq = store_last_seq(s->st);
		sess_answer_durable(s, c, in->id, r->seq, ANSWER_NEW, r);
		return;
	}
	if (strcmp(in->type, "pause") == 0 ||
	    strcmp(in->type, "resume_session") == 0) {
		if (role != IPC_ROLE_ADMIN) {
			sess_result_err(r, "FORBIDDEN", 403,
			    "%s needs the admin "
			    "role", in->type);
			return;
		}
		input_pause(s, c, strcmp(in->type, "pause") == 0, in, r);
		return;
	}
	if (strcmp(in->type, "tool_approve") == 0 ||
	    strcmp(in->type, "set_autonomy") == 0 ||
	    strcmp(in->type, "elicitation_answer") == 0) {
		if (role != IPC_ROLE_USER && role != IPC_ROLE_ADMIN) {
			sess_result_err(r, "FORBIDDEN", 403, "%s needs the user "
			    "or admin role", in->type);
			return;
		}
		if (strcmp(in->type, "tool_approve") == 0)
			input_approve(s, c, from, in, r);
		else if (strcmp(in->type, "elicitation_answer") == 0)
			input_elicit(s, c, role, in, r);
		else
			input_autonomy(s, c, from, in, r);
		return;
	}
	if (strcmp(in->type, "mcp_tools") == 0 ||
	    strcmp(in->type, "mcp_result") == 0) {
		if (strcmp(in->type, "mcp_tools") == 0)
			input_tools(s, c, role, in, r);
		else
			input_result(s, c, in, r);
		return;
	}
	if (strcmp(in->type, "action_propose") == 0 ||
	    strcmp(in->type, "action_approve") == 0 ||
	    strcmp(in->type, "action_result") == 0 ||
	    strcmp(in->type, "directive") == 0) {
		action_input(s, c, from, in, r);
		return;
	}
	if (strcmp(in->type, "thought_share") == 0) {
		thought_share(s, c, from, in, r);
		return;
	}
	if (team_input(s, c, from, in, r))
		return;
	if (strcmp(in->type, "index") == 0) {
		index_input(s, from, in, r);
		return;
	}
	sess_result_err(r, "BAD_REQUEST", 400, "unknown message type '%s'; see "
	    "parley-protocol(7)", in->type);
}

void
input_inbox(void *arg, struct store_sess *st, const char *json,
    size_t len)
{
	struct sess *s = st->udata;
	struct proto_in in;
	struct sess_result r;
	struct sess_from from;
	const char *code, *agent;
	char msg[256], *txt, who[SESS_AGENT_MAX + 1], sub[IPC_SUB_MAX + 1];
	cJSON *o, *m;
	uint64_t seq;

	(void)arg;
	if (s == NULL || s->follower || s->broken)
		return;
	o = cJSON_ParseWithLength(json, len);
	m = cJSON_GetObjectItem(o, "m");
	from.role = (int)proto_count(o, "role");
	agent = cJSON_GetStringValue(cJSON_GetObjectItem(o, "agent"));
	snprintf(who, sizeof(who), "%s", agent != NULL ? agent : "");
	from.agent = who;
	agent = cJSON_GetStringValue(cJSON_GetObjectItem(o, "subject"));
	snprintf(sub, sizeof(sub), "%s", agent != NULL ? agent : "");
	from.subject = sub;
	from.inbox = 1;
	if (cJSON_IsObject(cJSON_GetObjectItem(o, "presence"))) {
		/* A follower's count of an agent's streams (life.c). */
		life_inbox(s, cJSON_GetObjectItem(o, "presence"));
		cJSON_Delete(o);
		return;
	}
	if (!cJSON_IsObject(m) || (txt = cJSON_PrintUnformatted(m)) == NULL) {
		log_warnx("session %s: dropped an inbox entry that is not a "
		    "forwarded message", s->id);
		cJSON_Delete(o);
		return;
	}
	cJSON_Delete(o);
	if (proto_parse(txt, strlen(txt), s->wk->conf->max_json_depth, &in,
	    &code, msg, sizeof(msg)) == -1) {
		log_warnx("session %s: forwarded message refused: %s", s->id,
		    msg);
		free(txt);
		return;
	}
	free(txt);
	/* The inbox delivers at least once (a new owner may see an entry
	 * again): every forwarded message has an id; apply each once. */
	if (in.id != NULL && sess_id_find(s, in.id, &seq)) {
		proto_in_free(&in);
		return;
	}
	input_apply(s, NULL, &from, &in, &r);
	if (r.code != NULL)
		log_info("session %s: forwarded %s refused: %s", s->id,
		    in.type, r.msg);
	else if (in.id != NULL && !r.pending && strcmp(in.type, "chat") != 0)
		/* A pending message (a knowledge_act queued while the graph
		 * loads) records its id itself once logged, at its own seq:
		 * recording it here would make it a repeat of itself. */
		sess_id_add(s, in.id, store_last_seq(s->st));
	proto_in_free(&in);
}
