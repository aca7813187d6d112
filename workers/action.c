/*
 * Agents' proposed actions and users' directives (action.h).  An action
 * waits in approve.c's list (kind "action") with its phase: "proposed"
 * (waiting for approvals), "approved" (action_approved is logged, its
 * action_execute not yet) and "executing" (waiting for the executor's
 * result).  Every step is logged before meta changes, and meta's
 * "actionsSeq" says up to which seq it reflects the log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/log.h"
#include "parley/policy.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "action.h"
#include "approve.h"
#include "auditlog.h"
#include "sess.h"
#include "team.h"
#include "wk.h"

#define ACTIONS_MAX	64	/* actions pending in one session */
#define SCAN_BACK	2000	/* log records a new owner reads back at most */
#define SUMMARY_MAX	160	/* bytes of a description in an audit_entry */
#define RETRY_MS	1000	/* a step the log refused is tried again */

#define NAME_CHARS	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" \
			"0123456789._-"

static void	sweep(struct sess *);

static const char *
str(const cJSON *o, const char *key)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));

	return v != NULL ? v : "";
}

/* A role's name, as events' "by" names who acted. */
static const char *
role_name(int role)
{
	return role == IPC_ROLE_ADMIN ? "admin" : role == IPC_ROLE_USER ?
	    "user" : role == IPC_ROLE_AGENT ? "agent" : "observer";
}

/* 1 when v is 1 to max bytes, each of chars. */
static int
name_ok(const char *v, size_t max, const char *chars)
{
	size_t n = strlen(v);

	return n > 0 && n <= max && strspn(v, chars) == n;
}

cJSON *
action_check(const cJSON *a, const char *proposer, char *msg, size_t len)
{
	static const char *known[] = { "type", "description", "params",
	    "executor", "risk" };
	enum policy_risk risk = POLICY_MEDIUM;
	const cJSON *f, *t, *d, *p, *x, *rk;
	size_t k, n = sizeof(known) / sizeof(known[0]);
	char *txt;
	cJSON *o;

	if (!cJSON_IsObject(a)) {
		snprintf(msg, len, "%s", "field 'action' must be an object: "
		    "{\"type\",\"description\",\"params\"?,\"executor\"?,"
		    "\"risk\"?}");
		return NULL;
	}
	cJSON_ArrayForEach(f, a) {
		for (k = 0; k < n && strcmp(f->string, known[k]) != 0; k++)
			;
		if (k == n) {
			snprintf(msg, len, "field 'action.%.64s' is not known; "
			    "an action has type, description, params, "
			    "executor and risk", f->string);
			return NULL;
		}
	}
	t = cJSON_GetObjectItemCaseSensitive(a, "type");
	if (!cJSON_IsString(t) || !name_ok(t->valuestring, ACTION_TYPE_MAX,
	    NAME_CHARS ":/")) {
		snprintf(msg, len, "field 'action.type' must be 1 to %d "
		    "letters, digits, '.', '_', '-', ':' or '/' (the kind of "
		    "action, e.g. code_change)", ACTION_TYPE_MAX);
		return NULL;
	}
	d = cJSON_GetObjectItemCaseSensitive(a, "description");
	if (!cJSON_IsString(d) || d->valuestring[0] == '\0' ||
	    strlen(d->valuestring) > ACTION_DESC_MAX) {
		snprintf(msg, len, "field 'action.description' must be a "
		    "string of 1 to %d bytes saying what the action does",
		    ACTION_DESC_MAX);
		return NULL;
	}
	p = cJSON_GetObjectItemCaseSensitive(a, "params");
	if (p != NULL && !cJSON_IsNull(p)) {
		if (!cJSON_IsObject(p)) {
			snprintf(msg, len, "%s", "field 'action.params' must be "
			    "an object (the action's arguments)");
			return NULL;
		}
		txt = cJSON_PrintUnformatted(p);
		k = txt != NULL ? strlen(txt) : ACTION_PARAMS_MAX + 1;
		free(txt);
		if (k > ACTION_PARAMS_MAX) {
			snprintf(msg, len, "field 'action.params' is %zu bytes "
			    "of JSON; at most %d", k, ACTION_PARAMS_MAX);
			return NULL;
		}
	}
	x = cJSON_GetObjectItemCaseSensitive(a, "executor");
	if (x != NULL && !cJSON_IsNull(x) && (!cJSON_IsString(x) ||
	    !name_ok(x->valuestring, SESS_AGENT_MAX, NAME_CHARS))) {
		snprintf(msg, len, "field 'action.executor' must be an agentId "
		    "(1 to %d letters, digits, '.', '_' or '-'): the agent "
		    "that runs the action once approved (default: the "
		    "proposer)", SESS_AGENT_MAX);
		return NULL;
	}
	rk = cJSON_GetObjectItemCaseSensitive(a, "risk");
	if (rk != NULL && !cJSON_IsNull(rk) && (!cJSON_IsString(rk) ||
	    policy_risk_parse(rk->valuestring, &risk) == -1)) {
		snprintf(msg, len, "%s", "field 'action.risk' must be low, "
		    "medium, high or critical (default medium)");
		return NULL;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", t->valuestring);
	cJSON_AddStringToObject(o, "description", d->valuestring);
	cJSON_AddItemToObject(o, "params", cJSON_IsObject(p) ?
	    cJSON_Duplicate(p, 1) : cJSON_CreateObject());
	cJSON_AddStringToObject(o, "executor", cJSON_IsString(x) ?
	    x->valuestring : proposer);
	cJSON_AddStringToObject(o, "risk", policy_risk_name(risk));
	return o;
}

/* The session's autonomy level, within the operator's max-autonomy. */
static enum policy_autonomy
level(struct sess *s)
{
	enum policy_autonomy a = s->wk->conf->autonomy;
	const char *lv = cJSON_GetStringValue(cJSON_GetObjectItem(sess_meta(s),
	    "autonomy"));

	if (lv != NULL)
		(void)policy_autonomy_parse(lv, &a);
	if (policy_autonomy_cmp(a, s->wk->conf->max_autonomy) > 0)
		a = s->wk->conf->max_autonomy;
	return a;
}

/*
 * Logs body (consumed) as type, copied to the audit file when audited;
 * meta notes the seq as reflected (the caller saves).  The seq, or 0.
 */
static uint64_t
emit(struct sess *s, const char *type, cJSON *b, int audited)
{
	uint64_t seq = sess_emit(s, type, b);

	if (seq != 0 && audited)
		(void)auditlog_event(s, seq);
	if (seq != 0)
		proto_set(sess_meta(s), "actionsSeq",
		    cJSON_CreateNumber((double)seq));
	return seq;
}

static int
phase_is(const cJSON *w, const char *phase)
{
	return strcmp(str(w, "phase"), phase) == 0;
}

/* When the pending action w expires (ms since the epoch). */
static uint64_t
deadline(struct sess *s, const cJSON *w)
{
	return (uint64_t)proto_count(w, phase_is(w, "executing") ?
	    "executeTs" : "ts") + s->wk->conf->action_timeout_ms;
}

/* Who answered, as an action's approvals list them: "agent:ID", "user". */
static void
who_key(int role, const char *agent, char *out, size_t len)
{
	if (role == IPC_ROLE_AGENT)
		snprintf(out, len, "agent:%s", agent);
	else
		snprintf(out, len, "%s", role_name(role));
}

/*
 * Adds "by", for an agent "approverId", and for a JWT its "subject" to
 * an answer's body b.
 */
static void
add_by(cJSON *b, int role, const char *agent, const char *subject)
{
	cJSON_AddStringToObject(b, "by", role_name(role));
	if (role == IPC_ROLE_AGENT)
		cJSON_AddStringToObject(b, "approverId", agent);
	if (subject != NULL && subject[0] != '\0')
		cJSON_AddStringToObject(b, "subject", subject);
}

/* Logs that pending action w expired and forgets it; the seq, or 0. */
static uint64_t
expire(struct sess *s, cJSON *w)
{
	cJSON *b = cJSON_CreateObject();
	char id[80];
	uint64_t seq;

	snprintf(id, sizeof(id), "%s", str(w, "actionId"));
	cJSON_AddStringToObject(b, "actionId", id);
	cJSON_AddStringToObject(b, "agentId", str(w, "agentId"));
	cJSON_AddStringToObject(b, "phase", phase_is(w, "executing") ?
	    "execution" : "approval");
	cJSON_AddNumberToObject(b, "timeoutMs",
	    (double)s->wk->conf->action_timeout_ms);
	cJSON_AddStringToObject(b, "by", "parleyd");
	if ((seq = emit(s, "action_expired", b, 1)) == 0)
		return 0;
	log_info("session %s: action %s expired (action-timeout)", s->id, id);
	approve_answered(s, id);
	return seq;
}

/* Logs action_execute of approved action w, to its executor; 1 or 0. */
static int
execute(struct sess *s, cJSON *w)
{
	const cJSON *a = cJSON_GetObjectItem(w, "action");
	cJSON *b = cJSON_CreateObject();

	cJSON_AddStringToObject(b, "actionId", str(w, "actionId"));
	cJSON_AddStringToObject(b, "agentId", str(a, "executor"));
	cJSON_AddStringToObject(b, "proposer", str(w, "agentId"));
	cJSON_AddItemToObject(b, "action", cJSON_Duplicate(a, 1));
	if (emit(s, "action_execute", b, 1) == 0)
		return 0;
	proto_set(w, "phase", cJSON_CreateString("executing"));
	proto_set(w, "executeTs", cJSON_CreateNumber((double)util_now_ms()));
	sess_meta_save(s);
	return 1;
}

static int
is_action(const cJSON *w)
{
	return strcmp(str(w, "kind"), "action") == 0;
}

static void
timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	sweep(arg);
}

/*
 * The owner's round: approved actions get their action_execute, overdue
 * ones expire, and the timer is set for the next deadline.
 */
static void
sweep(struct sess *s)
{
	uint64_t now = util_now_ms(), next = 0, d;
	struct timeval tv;
	cJSON *w;
	int again = 1;

	/* A completed session logs nothing more: its actions stay open. */
	if (s->follower || s->broken || s->released || !sess_has_meta(s) ||
	    s->ended)
		return;
	while (again) {
		again = 0;
		cJSON_ArrayForEach(w, cJSON_GetObjectItem(sess_meta(s),
		    "waiting")) {
			if (!is_action(w))
				continue;
			if (phase_is(w, "approved"))
				(void)execute(s, w);
			else if (deadline(s, w) <= now && expire(s, w) != 0) {
				again = 1;	/* w is gone */
				break;
			}
		}
	}
	cJSON_ArrayForEach(w, cJSON_GetObjectItem(sess_meta(s), "waiting")) {
		if (!is_action(w))
			continue;
		d = deadline(s, w);
		/* The log refused it: again in a while. */
		if (phase_is(w, "approved") || d <= now)
			d = now + RETRY_MS;
		if (next == 0 || d < next)
			next = d;
	}
	if (next == 0) {
		if (s->action_ev != NULL)
			evtimer_del(s->action_ev);
		return;
	}
	if (s->action_ev == NULL &&
	    (s->action_ev = evtimer_new(s->wk->base, timer_cb, s)) == NULL)
		return;
	util_tv(&tv, next - now);
	evtimer_add(s->action_ev, &tv);
}

uint64_t
action_propose(struct sess *s, const char *proposer, const cJSON *action,
    const char *id, struct sess_result *r)
{
	enum policy_risk risk = POLICY_MEDIUM;
	char hex[17], aid[24], at[32], msg[256];
	uint64_t now = util_now_ms(), seq;
	cJSON *norm, *b, *w;

	if (s->ended) {
		sess_result_err(r, "SESSION_ENDED", 409, "%s", "the session "
		    "has completed");
		return 0;
	}
	if (action == NULL) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "missing field "
		    "'action': {\"type\",\"description\",\"params\"?,"
		    "\"executor\"?,\"risk\"?}");
		return 0;
	}
	if ((norm = action_check(action, proposer, msg, sizeof(msg))) ==
	    NULL) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", msg);
		return 0;
	}
	if (team_agent(s, str(norm, "executor")) != NULL) {
		/* An internal agent has no stream to take action_execute. */
		sess_result_err(r, "BAD_REQUEST", 400, "field "
		    "'action.executor': %.64s is an internal agent of the "
		    "session; an action runs at an external agent",
		    str(norm, "executor"));
		cJSON_Delete(norm);
		return 0;
	}
	b = approve_pending(s, APPROVE_ACTIONS);
	if (cJSON_GetArraySize(b) >= ACTIONS_MAX) {
		cJSON_Delete(b);
		cJSON_Delete(norm);
		sess_result_err(r, "RATE_LIMITED", 429, "%d actions are "
		    "pending in this session; wait for their answers, results "
		    "or expiry (action-timeout)", ACTIONS_MAX);
		return 0;
	}
	cJSON_Delete(b);
	/* Kept whole while it waits, and as it was answered. */
	if (!sess_meta_room(s, norm, 2, r)) {
		cJSON_Delete(norm);
		return 0;
	}
	(void)policy_risk_parse(str(norm, "risk"), &risk);
	util_randhex(hex, 8);
	snprintf(aid, sizeof(aid), "act-%s", hex);
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "actionId", aid);
	cJSON_AddStringToObject(b, "agentId", proposer);
	cJSON_AddItemToObject(b, "action", norm);
	cJSON_AddBoolToObject(b, "needsHuman", policy_asks(level(s), risk));
	util_iso8601(at, now + s->wk->conf->action_timeout_ms);
	cJSON_AddStringToObject(b, "expiresAt", at);
	if (id != NULL)
		cJSON_AddStringToObject(b, "id", id);
	w = cJSON_Duplicate(b, 1);
	if ((seq = emit(s, "action_proposed", b, 1)) == 0) {
		cJSON_Delete(w);
		sess_result_err(r, "OVERLOADED", 503, "%s", "the proposal could "
		    "not be logged; nothing changed, retry");
		return 0;
	}
	cJSON_AddStringToObject(w, "phase", "proposed");
	cJSON_AddArrayToObject(w, "approvals");
	(void)approve_keep(s, w, APPROVE_ACTIONS, now);
	log_info("session %s: agent %s proposed action %s at seq %llu",
	    s->id, proposer, aid, (unsigned long long)seq);
	r->seq = seq;
	sweep(s);
	return seq;
}

/*
 * The pending action id, or NULL with r saying why not: answered before
 * (a duplicate), expired just now (the session was out of memory past
 * its deadline), or unknown.
 */
static cJSON *
find(struct sess *s, const char *id, struct sess_result *r)
{
	cJSON *w = approve_entry(s, id, APPROVE_ACTIONS);
	char at[32];

	if (w != NULL && !phase_is(w, "approved") &&
	    deadline(s, w) <= util_now_ms()) {
		util_iso8601(at, deadline(s, w));
		(void)expire(s, w);
		sess_result_err(r, "NOT_FOUND", 404, "action %s expired at %s "
		    "(action-timeout); nothing was applied", id, at);
		return NULL;
	}
	if (w != NULL)
		return w;
	if (approve_was_answered(s, id)) {
		r->duplicate = 1;
		r->http = 200;
		return NULL;
	}
	sess_result_err(r, "NOT_FOUND", 404, "no action %s is pending; "
	    "session_state lists the pending ones (pendingActions)", id);
	return NULL;
}

/* The audit_entry of an agent's approval that still awaits a person. */
static uint64_t
approval_noted(struct sess *s, cJSON *w, const char *agent)
{
	const cJSON *a = cJSON_GetObjectItem(w, "action");
	const char *desc = str(a, "description");
	char tool[ACTION_TYPE_MAX + 8], sum[SUMMARY_MAX + 4], ts[32];
	cJSON *b = cJSON_CreateObject();

	snprintf(tool, sizeof(tool), "action:%s", str(a, "type"));
	/* A cut inside a UTF-8 sequence would not be valid text. */
	if (strlen(desc) > SUMMARY_MAX)
		snprintf(sum, sizeof(sum), "%.*s...", (int)utf8_whole(desc,
		    SUMMARY_MAX), desc);
	else
		snprintf(sum, sizeof(sum), "%s", desc);
	cJSON_AddStringToObject(b, "actionId", str(w, "actionId"));
	cJSON_AddStringToObject(b, "agentId", str(w, "agentId"));
	cJSON_AddStringToObject(b, "tool", tool);
	cJSON_AddStringToObject(b, "risk", str(a, "risk"));
	cJSON_AddStringToObject(b, "decision", "approved");
	add_by(b, IPC_ROLE_AGENT, agent, NULL);
	cJSON_AddStringToObject(b, "awaiting", "human");
	cJSON_AddStringToObject(b, "summary", sum);
	util_iso8601(ts, util_now_ms());
	cJSON_AddStringToObject(b, "timestamp", ts);
	return emit(s, "audit_entry", b, 1);
}

/*
 * An answer to action id from (role, agent, JWT subject or NULL): approve
 * or reject.  1 when logged (r->seq), 0 when a repeat (r says duplicate),
 * -1 with r's error.
 */
static int
answer(struct sess *s, int role, const char *agent, const char *subject,
    const char *id, int approve, const char *reason, struct sess_result *r)
{
	char key[SESS_AGENT_MAX + 8];
	cJSON *w, *b, *ap;
	uint64_t seq;

	if (role == IPC_ROLE_AGENT && agent[0] == '\0') {
		sess_result_err(r, "FORBIDDEN", 403, "%s", "an agent answers "
		    "actions from a stream opened with ?role=agent&agentId=NAME");
		return -1;
	}
	if ((w = find(s, id, r)) == NULL)
		return r->duplicate ? 0 : -1;
	if (role == IPC_ROLE_AGENT && strcmp(agent, str(w, "agentId")) == 0) {
		sess_result_err(r, "FORBIDDEN", 403, "%s", "an agent cannot "
		    "answer its own proposal; another agent or a user must");
		return -1;
	}
	who_key(role, agent, key, sizeof(key));
	ap = cJSON_GetObjectItem(w, "approvals");
	if (!cJSON_IsArray(ap)) {
		ap = cJSON_CreateArray();
		proto_set(w, "approvals", ap);
	}
	/* Decided already, or this one's approval is in: a repeat. */
	if (!phase_is(w, "proposed") || (approve && proto_holds(ap, key))) {
		r->duplicate = 1;
		r->http = 200;
		return 0;
	}
	if (!approve) {
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "actionId", id);
		cJSON_AddStringToObject(b, "agentId", str(w, "agentId"));
		add_by(b, role, agent, subject);
		if (reason != NULL)
			cJSON_AddStringToObject(b, "reason", reason);
		if ((seq = emit(s, "action_rejected", b, 1)) != 0)
			approve_answered(s, id);
	} else if (cJSON_IsTrue(cJSON_GetObjectItem(w, "needsHuman")) &&
	    role == IPC_ROLE_AGENT) {
		if ((seq = approval_noted(s, w, agent)) != 0) {
			cJSON_AddItemToArray(ap, cJSON_CreateString(key));
			sess_meta_save(s);
		}
	} else {
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "actionId", id);
		cJSON_AddStringToObject(b, "agentId", str(w, "agentId"));
		add_by(b, role, agent, subject);
		cJSON_AddItemToArray(ap, cJSON_CreateString(key));
		cJSON_AddItemToObject(b, "approvals", cJSON_Duplicate(ap, 1));
		if ((seq = emit(s, "action_approved", b, 1)) == 0)
			cJSON_DeleteItemFromArray(ap, cJSON_GetArraySize(ap) -
			    1);
		else {
			proto_set(w, "phase", cJSON_CreateString("approved"));
			sess_meta_save(s);
			(void)execute(s, w);
		}
	}
	if (seq == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the answer could "
		    "not be logged; nothing changed, retry");
		return -1;
	}
	log_info("session %s: action %s %s by %s at seq %llu", s->id, id,
	    approve ? "approved" : "rejected", key, (unsigned long long)seq);
	r->seq = seq;
	return 1;
}

/*
 * The executor's result of action id: result (any JSON) or error (a
 * string).  1 logged, 0 a repeat, -1 with r's error.
 */
static int
result(struct sess *s, int role, const char *agent, const char *id,
    const cJSON *res, const char *error, struct sess_result *r)
{
	const char *executor;
	cJSON *w, *b;
	uint64_t seq, now = util_now_ms(), ets;

	if ((w = find(s, id, r)) == NULL)
		return r->duplicate ? 0 : -1;
	ets = (uint64_t)proto_count(w, "executeTs");
	executor = str(cJSON_GetObjectItem(w, "action"), "executor");
	if (role != IPC_ROLE_AGENT || strcmp(agent, executor) != 0) {
		sess_result_err(r, "FORBIDDEN", 403, "only agent %s, the "
		    "action's executor, reports its result (from a stream with "
		    "?role=agent&agentId=%s)", executor, executor);
		return -1;
	}
	if (!phase_is(w, "executing")) {
		sess_result_err(r, "BAD_REQUEST", 409, "action %s is not "
		    "approved yet; run it once action_execute comes", id);
		return -1;
	}
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "actionId", id);
	cJSON_AddStringToObject(b, "agentId", executor);
	cJSON_AddStringToObject(b, "proposer", str(w, "agentId"));
	if (error != NULL)
		cJSON_AddStringToObject(b, "error", error);
	else
		cJSON_AddItemToObject(b, "result", cJSON_Duplicate(res, 1));
	cJSON_AddNumberToObject(b, "duration", (double)(now > ets ? now - ets :
	    0));
	if ((seq = emit(s, "action_result", b, 1)) == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the result could "
		    "not be logged; nothing changed, retry");
		return -1;
	}
	log_info("session %s: action %s result from %s at seq %llu", s->id,
	    id, executor, (unsigned long long)seq);
	approve_answered(s, id);
	r->seq = seq;
	return 1;
}

/* Meta keeps the last DIRECTIVES_KEPT directives (seq, message, from). */
static void
directive_keep(struct sess *s, uint64_t seq, const char *message,
    const char *from)
{
	cJSON *a = cJSON_GetObjectItem(sess_meta(s), "directives"), *d;

	if (!cJSON_IsArray(a)) {
		a = cJSON_CreateArray();
		proto_set(sess_meta(s), "directives", a);
	}
	cJSON_ArrayForEach(d, a)
		if ((uint64_t)proto_count(d, "seq") == seq)
			return;
	d = cJSON_CreateObject();
	cJSON_AddNumberToObject(d, "seq", (double)seq);
	cJSON_AddStringToObject(d, "message", message);
	cJSON_AddStringToObject(d, "from", from);
	cJSON_AddItemToArray(a, d);
	while (cJSON_GetArraySize(a) > DIRECTIVES_KEPT)
		cJSON_DeleteItemFromArray(a, 0);
}

/* directive: a user's guidance to every agent, logged. */
static int
directive(struct sess *s, const struct sess_from *f, struct proto_in *in,
    struct sess_result *r)
{
	const char *message = NULL;
	cJSON *b;
	uint64_t seq;

	if (f->role != IPC_ROLE_USER && f->role != IPC_ROLE_ADMIN) {
		sess_result_err(r, "FORBIDDEN", 403, "%s", "directives come "
		    "from a user or an admin; an agent shares a thought or "
		    "proposes an action");
		return -1;
	}
	if (s->ended) {
		sess_result_err(r, "SESSION_ENDED", 409, "%s", "the session "
		    "has completed");
		return -1;
	}
	if (proto_str(in->root, "message", 1, DIRECTIVE_MAX, &message, r->msg,
	    sizeof(r->msg)) == -1 || message[0] == '\0') {
		sess_result_err(r, "BAD_REQUEST", 400, "field 'message' must "
		    "be a string of 1 to %d bytes: the guidance for the "
		    "agents", DIRECTIVE_MAX);
		return -1;
	}
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "message", message);
	cJSON_AddStringToObject(b, "from", role_name(f->role));
	if (in->id != NULL)
		cJSON_AddStringToObject(b, "id", in->id);
	if ((seq = emit(s, "directive", b, 0)) == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the directive could "
		    "not be logged; it was not accepted, retry");
		return -1;
	}
	directive_keep(s, seq, message, role_name(f->role));
	sess_meta_save(s);
	r->seq = seq;
	return 1;
}

/* The fields of action_approve and action_result, and their answer. */
static int
answer_input(struct sess *s, const struct sess_from *f, struct proto_in *in,
    struct sess_result *r)
{
	const char *id = NULL, *decision = "approve", *reason = NULL,
	    *error = NULL;
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(in->root,
	    "result");
	char *txt;
	size_t n;

	if (s->ended) {
		sess_result_err(r, "SESSION_ENDED", 409, "%s", "the session "
		    "has completed; its unfinished actions stay as they are");
		return -1;
	}
	if (proto_str(in->root, "actionId", 1, 64, &id, r->msg,
	    sizeof(r->msg)) == -1) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", r->msg);
		return -1;
	}
	if (strcmp(in->type, "action_approve") == 0) {
		if (proto_str(in->root, "decision", 0, 16, &decision, r->msg,
		    sizeof(r->msg)) == -1 || proto_str(in->root, "reason", 0,
		    ACTION_REASON_MAX, &reason, r->msg, sizeof(r->msg)) == -1) {
			sess_result_err(r, "BAD_REQUEST", 400, "%s", r->msg);
			return -1;
		}
		if (strcmp(decision, "approve") != 0 &&
		    strcmp(decision, "reject") != 0) {
			sess_result_err(r, "BAD_REQUEST", 400, "%s", "field "
			    "'decision' must be approve or reject (default "
			    "approve)");
			return -1;
		}
		return answer(s, f->role, f->agent, f->subject, id,
		    strcmp(decision, "approve") == 0, reason, r);
	}
	if (proto_str(in->root, "error", 0, ACTION_REASON_MAX, &error, r->msg,
	    sizeof(r->msg)) == -1) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", r->msg);
		return -1;
	}
	if ((res == NULL || cJSON_IsNull(res)) == (error == NULL)) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "send field "
		    "'result' (any JSON: what the action produced) or field "
		    "'error' (a string: why it failed), one of the two");
		return -1;
	}
	if (res != NULL && (txt = cJSON_PrintUnformatted(res)) != NULL) {
		n = strlen(txt);
		free(txt);
		if (n > ACTION_RESULT_MAX) {
			sess_result_err(r, "BAD_REQUEST", 400, "field 'result' "
			    "is %zu bytes of JSON; at most %d", n,
			    ACTION_RESULT_MAX);
			return -1;
		}
	}
	return result(s, f->role, f->agent, id, res, error, r);
}

void
action_input(struct sess *s, struct sess_client *c,
    const struct sess_from *f, struct proto_in *in, struct sess_result *r)
{
	int rc;

	if (sess_id_repeat(s, c, in->id, r))
		return;
	if (f->role == IPC_ROLE_OBSERVER) {
		sess_result_err(r, "FORBIDDEN", 403, "observers cannot send %s",
		    in->type);
		return;
	}
	if (strcmp(in->type, "directive") == 0)
		rc = directive(s, f, in, r);
	else if (strcmp(in->type, "action_propose") == 0) {
		if (f->role != IPC_ROLE_AGENT || f->agent[0] == '\0') {
			sess_result_err(r, "FORBIDDEN", 403, "%s", "actions "
			    "are proposed by agents, from a stream opened with "
			    "?role=agent&agentId=NAME");
			return;
		}
		rc = action_propose(s, f->agent,
		    cJSON_GetObjectItemCaseSensitive(in->root, "action"),
		    in->id, r) != 0 ? 1 : -1;
	} else
		rc = answer_input(s, f, in, r);
	sweep(s);
	if (rc == -1)
		return;
	if (rc == 1 && in->id != NULL)
		sess_id_add(s, in->id, r->seq);
	sess_answer_durable(s, c, in->id, r->seq, rc == 1 ? ANSWER_NEW :
	    ANSWER_DUP, r);
}

char *
action_directives(struct sess *s, const char *agent)
{
	const cJSON *a = cJSON_GetObjectItem(sess_meta(s), "directives"), *d;
	cJSON *seen = cJSON_GetObjectItem(sess_meta(s), "directivesSeen");
	double last = proto_count(seen, agent), top = last;
	size_t len = 0, off = 0;
	char *out;

	cJSON_ArrayForEach(d, a)
		if (proto_count(d, "seq") > last)
			len += strlen(str(d, "message")) + 64;
	if (len == 0 || (out = malloc(len)) == NULL)
		return NULL;
	cJSON_ArrayForEach(d, a) {
		if (proto_count(d, "seq") <= last)
			continue;
		off += (size_t)snprintf(out + off, len - off, "%sDirective "
		    "from the %s: %s", off ? "\n\n" : "", str(d, "from"),
		    str(d, "message"));
		if (proto_count(d, "seq") > top)
			top = proto_count(d, "seq");
	}
	if (!cJSON_IsObject(seen)) {
		seen = cJSON_CreateObject();
		proto_set(sess_meta(s), "directivesSeen", seen);
	}
	proto_set(seen, agent, cJSON_CreateNumber(top));
	return out;
}

cJSON *
action_pending(struct sess *s)
{
	cJSON *a = approve_pending(s, APPROVE_ACTIONS), *w;
	char at[32];

	/* The deadline of the phase it is in. */
	cJSON_ArrayForEach(w, a) {
		util_iso8601(at, deadline(s, w));
		proto_set(w, "expiresAt", cJSON_CreateString(at));
	}
	return a;
}

/*
 * Meta takes in logged event ev (type, at ts, seq): what a follower sees
 * its owner log, and what a new owner reads after meta's checkpoint.
 * Taking an event in twice changes nothing.
 */
static void
take(struct sess *s, const char *type, const cJSON *ev, uint64_t ts)
{
	static const char *envelope[] = { "v", "type", "seq", "ts",
	    "sessionId" };
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(ev,
	    "actionId"));
	char key[SESS_AGENT_MAX + 8];
	cJSON *w, *ap;
	size_t k;

	if (strcmp(type, "directive") == 0) {
		directive_keep(s, (uint64_t)proto_count(ev, "seq"),
		    str(ev, "message"), str(ev, "from"));
		return;
	}
	if (id == NULL)
		return;
	w = approve_entry(s, id, APPROVE_ACTIONS);
	if (strcmp(type, "action_proposed") == 0) {
		if (w != NULL || approve_was_answered(s, id))
			return;
		w = cJSON_Duplicate(ev, 1);
		for (k = 0; k < sizeof(envelope) / sizeof(envelope[0]); k++)
			cJSON_DeleteItemFromObject(w, envelope[k]);
		cJSON_AddStringToObject(w, "phase", "proposed");
		cJSON_AddArrayToObject(w, "approvals");
		(void)approve_keep(s, w, APPROVE_ACTIONS, ts);
		return;
	}
	if (w == NULL)
		return;
	if (strcmp(type, "audit_entry") == 0) {
		who_key(strcmp(str(ev, "by"), "agent") == 0 ? IPC_ROLE_AGENT :
		    IPC_ROLE_USER, str(ev, "approverId"), key, sizeof(key));
		if (!proto_holds(ap = cJSON_GetObjectItem(w, "approvals"), key))
			cJSON_AddItemToArray(ap, cJSON_CreateString(key));
	} else if (strcmp(type, "action_approved") == 0 &&
	    phase_is(w, "proposed"))
		proto_set(w, "phase", cJSON_CreateString("approved"));
	else if (strcmp(type, "action_execute") == 0) {
		proto_set(w, "phase", cJSON_CreateString("executing"));
		proto_set(w, "executeTs", cJSON_CreateNumber((double)ts));
	} else if (strcmp(type, "action_rejected") == 0 ||
	    strcmp(type, "action_expired") == 0 ||
	    strcmp(type, "action_result") == 0)
		approve_answered(s, id);
	sess_meta_save(s);
}

void
action_follow(struct sess *s, const char *type, const cJSON *ev,
    uint64_t ts)
{
	if (strncmp(type, "action_", 7) == 0 || strcmp(type, "directive") ==
	    0 || (strcmp(type, "audit_entry") == 0 &&
	    cJSON_GetObjectItem(ev, "actionId") != NULL))
		take(s, type, ev, ts);
}

/* A record of the log after meta's checkpoint, for action_own. */
static int
scan_rec(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct sess *s = arg;
	const char *type;
	cJSON *ev;

	if (seq <= (uint64_t)proto_count(sess_meta(s), "actionsSeq") ||
	    (memmem(json, len, "\"action", 7) == NULL &&
	    memmem(json, len, "\"directive\"", 11) == NULL))
		return 0;
	if ((ev = cJSON_ParseWithLength(json, len)) == NULL)
		return 0;
	if ((type = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "type"))) !=
	    NULL) {
		action_follow(s, type, ev, ts);
		if (strncmp(type, "action_", 7) == 0 ||
		    strcmp(type, "directive") == 0 ||
		    strcmp(type, "audit_entry") == 0)
			proto_set(sess_meta(s), "actionsSeq",
			    cJSON_CreateNumber((double)seq));
	}
	cJSON_Delete(ev);
	return 0;
}

void
action_own(struct sess *s)
{
	uint64_t last = store_last_seq(s->st), from = (uint64_t)proto_count(
	    sess_meta(s), "actionsSeq");

	/* Logged, and its worker stopped before meta was saved: the log
	 * says what is pending.  Only what the open cached is read. */
	if (last > SCAN_BACK && from < last - SCAN_BACK)
		from = last - SCAN_BACK;
	if (from < last) {
		(void)store_range(s->st, from, 0, scan_rec, s);
		if ((uint64_t)proto_count(sess_meta(s), "actionsSeq") > from)
			sess_meta_save(s);
	}
	sweep(s);
}

void
action_free(struct sess *s)
{
	if (s->action_ev != NULL)
		event_free(s->action_ev);
	s->action_ev = NULL;
}

static void
part_state(struct sess *s, cJSON *state, int info)
{
	(void)info;
	cJSON_AddItemToObject(state, "pendingActions", action_pending(s));
}

const struct sess_part action_part = {
	.own = action_own,
	.follow = action_follow,
	.state = part_state,
	.free = action_free,
};
