/*
 * A step's tool calls.  Each call's risk comes from the operator's
 * tool-policy and the tool's annotations; it runs over MCP at once, is
 * denied, or waits for a logged answer (approve.c) without holding
 * anything but a timer.  Every answer is logged as a tool_result and kept
 * in the step; the turn hears when the step's calls have all answered
 * (struct turn's cbs), and never the other way round.
 */
#include <sys/time.h>

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
#include "approve.h"
#include "ctool.h"
#include "kb.h"
#include "kgtool.h"
#include "mcp.h"
#include "sess.h"
#include "team.h"
#include "tools.h"
#include "turn.h"
#include "wk.h"

#define MAX_TOOL_RESULT		(256 * 1024)	/* bytes of a result kept */
#define MAX_ASKED		4	/* a call's questions open at once (MCP
					   elicitation), as mcp.c allows */

/* A question an MCP server asks the user during a call. */
struct asked {
	char			*id;		/* elicitationId */
	struct mcp_elicit	*h;
};

struct tool_run {
	TAILQ_ENTRY(tool_run)	 entry;
	struct sess		*s;
	struct mcp_call		*mc;
	struct kb_call		*kc;	/* the built-in kb_search (kb.c) */
	struct kgtool_call	*kt;	/* a knowledge tool (kgtool.c) */
	char			*id;
	char			*name;
	uint64_t		 started_ms;
	char			*args;
	uint64_t		 call_at;	/* runs once this seq (its
						   tool_start) is stored */
	/* A call waiting for an answer (approve.c): an approval, or the
	 * result of a client's tool (client). */
	int			 waiting;
	int			 client;
	enum policy_risk	 risk;
	struct event		*timer;		/* approval-timeout,
						   client-tool-timeout */
	struct asked		 asked[MAX_ASKED];
	unsigned		 nasked;	/* questions so far */
};

static uint64_t	tool_start_log(struct sess *, const char *id,
		    const char *name, const char *args, enum policy_risk);
static void	step_add_logged(struct turn *, const char *id,
		    const char *name, const cJSON *found);

static void
run_free(struct tool_run *r)
{
	size_t i;

	if (r->timer != NULL)
		event_free(r->timer);
	for (i = 0; i < MAX_ASKED; i++)
		free(r->asked[i].id);
	free(r->id);
	free(r->name);
	free(r->args);
	free(r);
}

int
tools_parked(const struct turn *t)
{
	const struct tool_run *r;

	if (TAILQ_EMPTY(&t->runs) || t->call != NULL)
		return 0;
	TAILQ_FOREACH(r, &t->runs, entry)
		if (!r->waiting)
			return 0;
	return 1;
}

void
tools_close_waits(struct sess *s)
{
	struct tool_run *r, *next;

	for (r = TAILQ_FIRST(&s->turn->runs); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (!r->waiting)
			continue;
		approve_close(s, r->id, "cancelled");
		TAILQ_REMOVE(&s->turn->runs, r, entry);
		run_free(r);
	}
}

void
tools_drop(struct turn *t)
{
	struct tool_run *r;

	while ((r = TAILQ_FIRST(&t->runs)) != NULL) {
		TAILQ_REMOVE(&t->runs, r, entry);
		if (r->mc != NULL)
			mcp_cancel(r->mc);
		kb_tool_cancel(r->kc);
		kgtool_cancel(r->kt);
		run_free(r);
	}
}

int
tools_answered(const struct turn *t, const char *id)
{
	const cJSON *e;
	const char *tid;
	int in_step = 0, found = 0;

	cJSON_ArrayForEach(e, t->steps) {
		if (cJSON_GetArraySize(cJSON_GetObjectItem(e, "calls")) > 0) {
			in_step = 1;
			found = 0;
			continue;
		}
		tid = cJSON_GetStringValue(cJSON_GetObjectItem(e, "toolCallId"));
		if (in_step && tid != NULL && strcmp(tid, id) == 0)
			found = 1;
	}
	return found;
}

/* 1 when name is one of Parley's own tools offered to s (no MCP). */
static int
builtin_tool(struct sess *s, const char *name)
{
	return kb_tool(s, name) || kgtool_is(s, name);
}

/*
 * What the operator's tool-policy and the tool's annotations say of a call
 * by this session (a tool nobody offers has no hints, so high).
 */
static struct policy_decision
tool_policy(struct sess *s, const char *name)
{
	enum policy_autonomy a = s->wk->conf->autonomy;
	const char *lv = cJSON_GetStringValue(cJSON_GetObjectItem(sess_meta(s),
	    "autonomy"));
	const struct mcp_tool *mt = mcp_tool_find(s->wk->mcp, name);
	const cJSON *ct = mt == NULL ? ctool_find(s, name) : NULL;
	struct policy_annotations ann;

	if (lv != NULL)
		(void)policy_autonomy_parse(lv, &a);
	/* A cap lowered by a reload holds for sessions set before it. */
	if (policy_autonomy_cmp(a, s->wk->conf->max_autonomy) > 0)
		a = s->wk->conf->max_autonomy;
	if (ct != NULL)
		mcp_annotations(cJSON_GetObjectItem(ct, "annotations"), &ann);
	if (mt == NULL && ct == NULL && kb_tool(s, name)) {
		/* kb_search reads the session's knowledge: low risk. */
		memset(&ann, 0, sizeof(ann));
		ann.read_only = POLICY_HINT_TRUE;
		ann.destructive = POLICY_HINT_FALSE;
		ann.open_world = POLICY_HINT_FALSE;
		return policy_decide(&s->wk->conf->tool_policies, name, &ann,
		    a);
	}
	if (mt == NULL && ct == NULL && kgtool_is(s, name)) {
		/* knowledge_query reads: low risk.  knowledge_act writes the
		 * project's knowledge, a log whose past stays readable: a
		 * write, not destructive (medium). */
		memset(&ann, 0, sizeof(ann));
		ann.read_only = kgtool_spec(name)->read_only ?
		    POLICY_HINT_TRUE : POLICY_HINT_FALSE;
		ann.destructive = POLICY_HINT_FALSE;
		ann.open_world = POLICY_HINT_FALSE;
		return policy_decide(&s->wk->conf->tool_policies, name, &ann,
		    a);
	}
	return policy_decide(&s->wk->conf->tool_policies, name,
	    mt ? &mt->ann : ct ? &ann : NULL, a);
}

/* 1 when a call in flight waits for a person's approval. */
static int
approval_waits(const struct turn *t)
{
	const struct tool_run *r;

	TAILQ_FOREACH(r, &t->runs, entry)
		if (r->waiting && !r->client)
			return 1;
	return 0;
}

/*
 * The step moved on: the turn checkpoints it and, once every call has
 * answered, asks the model again; while every call waits for an answer,
 * the agent says so (say_waiting: not already said).
 */
static void
step_changed(struct sess *s, int say_waiting)
{
	struct turn *t = s->turn;
	int answered = TAILQ_EMPTY(&t->runs) && !t->starting;

	t->stepped(s, answered);
	if (!answered && say_waiting && !t->starting && tools_parked(t) &&
	    approval_waits(t))
		sess_emit(s, "agent_state", sess_agent_json(s,
		    "waiting_approval"));
}

/* Logs a tool's result and keeps it for the model (step_changed). */
static void
tool_done(struct sess *s, const char *id, const char *name, uint64_t ms,
    int is_error, const char *text, const char *code)
{
	struct turn *t = s->turn;
	cJSON *b;
	char *kept = NULL;

	if (text == NULL)
		text = "";
	if (is_error)
		s->wk->metrics.tool_errors++;
	log_rinfo(t->req, s->id, "tool %s: call %s %s in %llu ms%s%s", name,
	    id, is_error ? "failed" : "answered", (unsigned long long)ms,
	    is_error ? ": " : "", is_error ? (code ? code : "TOOL_ERROR") : "");
	if (strlen(text) > MAX_TOOL_RESULT &&
	    (kept = strndup(text, utf8_whole(text, MAX_TOOL_RESULT))) != NULL)
		text = kept;
	b = approve_result_body(s->agent_id, t->msgid, t->model_calls, id,
	    name, ms, is_error, text, code);
	step_add_logged(t, id, name, b);
	sess_emit(s, "tool_result", b);
	free(kept);
	step_changed(s, 1);
}

static void
tool_cb(void *arg, int is_error, const char *text, const char *code)
{
	struct tool_run *r = arg;
	struct sess *s = r->s;
	size_t i;

	TAILQ_REMOVE(&s->turn->runs, r, entry);
	/* Questions nobody answered end with the call (mcp.c has declined
	 * them to the server by now). */
	for (i = 0; i < MAX_ASKED; i++)
		if (r->asked[i].id != NULL)
			approve_close(s, r->asked[i].id, "cancelled");
	tool_done(s, r->id, r->name, util_mono_ms() - r->started_ms,
	    is_error, text, code);
	run_free(r);
}

/* Has the log an event of this type for this call (a worker died after
 * it, or the turn waited and is resumed)? */
struct logged_result {
	const char	*type;		/* tool_result, audit_entry */
	const char	*id;
	char		 base[48];	/* the turn's messageId, whatever its
					   attempt */
	unsigned	 step;
	cJSON		*found;
};

static int
find_result(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct logged_result *lr = arg;
	const char *tid, *mid;
	char want[48];
	size_t n;
	cJSON *o;

	snprintf(want, sizeof(want), "\"type\":\"%s\"", lr->type);
	if (strstr(json, want) == NULL || strstr(json, lr->id) == NULL)
		return 0;
	o = cJSON_ParseWithLength(json, len);
	tid = cJSON_GetStringValue(cJSON_GetObjectItem(o, "toolCallId"));
	mid = cJSON_GetStringValue(cJSON_GetObjectItem(o, "messageId"));
	n = strlen(lr->base);
	if (tid != NULL && strcmp(tid, lr->id) == 0 && mid != NULL &&
	    strncmp(mid, lr->base, n) == 0 && (mid[n] == '\0' ||
	    mid[n] == '.') &&
	    proto_count(o, "step") == lr->step) {
		/* When it was logged, for a request waited for again. */
		cJSON_AddNumberToObject(o, "loggedMs", (double)ts);
		lr->found = o;
		return 1;
	}
	cJSON_Delete(o);
	return 0;
}

/* The logged event of type for call id of the turn's step, or NULL. */
static cJSON *
step_logged(struct sess *s, const char *type, const char *id)
{
	struct turn *t = s->turn;
	struct logged_result lr;

	lr.type = type;
	lr.id = id;
	snprintf(lr.base, sizeof(lr.base), "%s", t->msgid);
	lr.base[strcspn(lr.base, ".")] = '\0';
	lr.step = t->model_calls;
	lr.found = NULL;
	sess_log_read(s, t->input_seq, 0, find_result, &lr);
	return lr.found;
}

/* Takes a logged tool_result as the call's answer, without running it. */
static void
step_add_logged(struct turn *t, const char *id, const char *name,
    const cJSON *found)
{
	const cJSON *e = cJSON_GetObjectItem(found, "error");
	const char *text = e ? cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "message")) : cJSON_GetStringValue(cJSON_GetObjectItem(found,
	    "result"));
	cJSON *b = cJSON_CreateObject();

	cJSON_AddStringToObject(b, "role", "tool");
	cJSON_AddStringToObject(b, "toolCallId", id);
	cJSON_AddStringToObject(b, "tool", name);
	cJSON_AddStringToObject(b, "content", text ? text : "");
	if (e != NULL)
		cJSON_AddBoolToObject(b, "isError", 1);
	cJSON_AddItemToArray(t->steps, b);
}

static cJSON	*call_json(struct sess *, const char *id, const char *name,
		    const char *args, enum policy_risk);

/*
 * An MCP server asks the user something during run r's call
 * (elicitation/create): the question is logged for the session's clients
 * (elicitation_request) and h kept until one answers (tools_elicited) or
 * the call ends.  Declined at once when it cannot be logged.
 */
static void
tool_elicit(void *arg, const char *message, const char *schema_json,
    struct mcp_elicit *h)
{
	struct tool_run *r = arg;
	struct sess *s = r->s;
	struct asked *q = NULL;
	char *eid = NULL;
	cJSON *c;
	size_t i;

	for (i = 0; i < MAX_ASKED && q == NULL; i++)
		if (r->asked[i].h == NULL)
			q = &r->asked[i];
	/* The attempt too: a re-run's questions are new ones. */
	if (q == NULL || asprintf(&eid, "%s.q%u.%u", r->id, s->turn->attempt,
	    ++r->nasked) == -1) {
		(void)mcp_elicit_answer(h, "decline", NULL);
		return;
	}
	c = call_json(s, r->id, r->name, r->args, r->risk);
	if (approve_elicit(s, c, eid, message, schema_json) == 0) {
		(void)mcp_elicit_answer(h, "decline", NULL);
		free(eid);
	} else {
		free(q->id);
		q->id = eid;
		q->h = h;
		log_rinfo(s->turn->req, s->id, "tool %s: call %s asks the user "
		    "(%s)", r->name, r->id, eid);
	}
	cJSON_Delete(c);
}

void
tools_elicited(struct sess *s, const char *eid, const char *action,
    const cJSON *content)
{
	struct tool_run *r;
	char *json;
	size_t i;
	int rc;

	if (s->turn == NULL)
		return;
	TAILQ_FOREACH(r, &s->turn->runs, entry)
		for (i = 0; i < MAX_ASKED; i++) {
			if (r->asked[i].h == NULL ||
			    strcmp(r->asked[i].id, eid) != 0)
				continue;
			json = content ? cJSON_PrintUnformatted(content) : NULL;
			if ((rc = mcp_elicit_answer(r->asked[i].h, action,
			    json)) == -1)
				rc = mcp_elicit_answer(r->asked[i].h, "decline",
				    NULL);
			free(json);
			r->asked[i].h = NULL;
			log_rinfo(s->turn->req, s->id, "tool %s: call %s: the "
			    "user's answer to %s (%s)%s", r->name, r->id, eid,
			    action, rc == 1 ? " came too late: the server was "
			    "told decline" : " is passed on");
			return;
		}
}

/*
 * Call id waits for a client whose tool is no longer registered: it is
 * answered with an error the model reads (logged once, as its result).
 * 1 when it was.
 */
static int
client_gone(struct sess *s, const char *id, const char *name)
{
	struct sess_result res;
	cJSON *logged = NULL;

	memset(&res, 0, sizeof(res));
	if (approve_result(s, id, 1, "the client withdrew this tool before "
	    "it answered the call", "TOOL_ERROR", &logged, &res) != 1)
		return 0;
	step_add_logged(s->turn, id, name, logged);
	cJSON_Delete(logged);
	return 1;
}

static void	tool_cb(void *, int, const char *, const char *);

/* kb_search's answer (kb.c), as an MCP tool's. */
static void
kb_cb(void *arg, int is_error, const char *text, const char *code)
{
	struct tool_run *r = arg;

	r->kc = NULL;	/* kb.c frees it once this returns */
	tool_cb(r, is_error, text, code);
}

/* A knowledge tool's answer (kgtool.c), as an MCP tool's. */
static void
kg_cb(void *arg, int is_error, const char *text, const char *code)
{
	struct tool_run *r = arg;

	r->kt = NULL;	/* kgtool.c frees it once this returns */
	tool_cb(r, is_error, text, code);
}

/* Calls run r's tool over MCP (its tool_start is stored). */
static void
run_start(struct sess *s, struct tool_run *r)
{
	r->call_at = 0;
	r->started_ms = util_mono_ms();
	if (mcp_tool_find(s->wk->mcp, r->name) == NULL &&
	    kb_tool(s, r->name)) {
		if ((r->kc = kb_tool_run(s, r->args, kb_cb, r)) == NULL) {
			TAILQ_REMOVE(&s->turn->runs, r, entry);
			tool_done(s, r->id, r->name, 0, 1, "the tool call could "
			    "not be started", "TOOL_ERROR");
			run_free(r);
		}
		return;
	}
	if (mcp_tool_find(s->wk->mcp, r->name) == NULL &&
	    kgtool_is(s, r->name)) {
		if ((r->kt = kgtool_run(s, r->name, r->id, r->args, kg_cb,
		    r)) == NULL) {
			TAILQ_REMOVE(&s->turn->runs, r, entry);
			tool_done(s, r->id, r->name, 0, 1, "the tool call could "
			    "not be started", "TOOL_ERROR");
			run_free(r);
		}
		return;
	}
	if ((r->mc = mcp_call(s->wk->mcp, r->name, *r->args ? r->args : "{}",
	    0, tool_cb, r)) == NULL) {
		TAILQ_REMOVE(&s->turn->runs, r, entry);
		tool_done(s, r->id, r->name, 0, 1, "the tool call could not be "
		    "started", "TOOL_ERROR");
		run_free(r);
		return;
	}
	mcp_call_on_elicit(r->mc, tool_elicit, r);
}

/* A run of call id, in the turn's list; NULL when out of memory. */
static struct tool_run *
run_new(struct sess *s, const char *id, const char *name, const char *args,
    enum policy_risk risk)
{
	struct tool_run *r;

	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->id = strdup(id)) == NULL || (r->name = strdup(name)) == NULL ||
	    (r->args = strdup(args ? args : "")) == NULL) {
		if (r != NULL)
			run_free(r);
		return NULL;
	}
	r->s = s;
	r->risk = risk;
	r->started_ms = util_mono_ms();
	TAILQ_INSERT_TAIL(&s->turn->runs, r, entry);
	return r;
}

static void	client_start(struct sess *, const char *id, const char *name,
		    const char *args, enum policy_risk, const cJSON *tool);

/*
 * Logs tool_start and calls the tool (its answer comes to tool_cb) once
 * the tool_start is stored: a worker that dies before leaves a call that
 * never ran, and one that dies after leaves it in the log (see
 * tools_step).  A client's tool is asked of the clients instead.
 */
static void
call_start(struct sess *s, const char *id, const char *name,
    const char *args, enum policy_risk risk)
{
	struct turn *t = s->turn;
	const struct mcp_tool *mt = mcp_tool_find(s->wk->mcp, name);
	const cJSON *ct = mt == NULL ? ctool_find(s, name) : NULL;
	struct tool_run *r;
	uint64_t seq;

	if (ct != NULL) {
		client_start(s, id, name, args, risk, ct);
		return;
	}
	seq = tool_start_log(s, id, name, args, risk);
	s->wk->metrics.tool_calls++;
	if ((mt == NULL && !builtin_tool(s, name)) || seq == 0 ||
	    (r = run_new(s, id, name, args, risk)) == NULL) {
		tool_done(s, id, name, 0, 1, mt == NULL ? "no such tool: it "
		    "is not offered by any connected MCP server or client" :
		    "the tool call could not be started", "TOOL_ERROR");
		return;
	}
	log_rinfo(t->req, s->id, "tool %s: call %s started", name, id);
	if (seq > store_durable_seq(s->st))
		r->call_at = seq;	/* tools_durable starts it */
	else
		run_start(s, r);
}

/* A call's tool_start fields (also its approval's and audit's). */
static cJSON *
call_json(struct sess *s, const char *id, const char *name,
    const char *args, enum policy_risk risk)
{
	cJSON *b = cJSON_CreateObject(), *a;

	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", s->turn->msgid);
	cJSON_AddNumberToObject(b, "step", s->turn->model_calls);
	cJSON_AddStringToObject(b, "toolCallId", id);
	cJSON_AddStringToObject(b, "tool", name);
	a = cJSON_Parse(args && *args ? args : "{}");
	cJSON_AddItemToObject(b, "args", a ? a : cJSON_CreateObject());
	cJSON_AddStringToObject(b, "risk", policy_risk_name(risk));
	return b;
}

/* Logs a call's tool_start; its seq, 0 when it could not be. */
static uint64_t
tool_start_log(struct sess *s, const char *id, const char *name,
    const char *args, enum policy_risk risk)
{
	return sess_emit(s, "tool_start", call_json(s, id, name, args, risk));
}

/* Logs the audit_entry of a call nobody was asked about. */
static void
call_audit(struct sess *s, const char *id, const char *name,
    const char *args, enum policy_risk risk, const char *decision)
{
	cJSON *c = call_json(s, id, name, args, risk);

	approve_audit(s, c, decision);
	cJSON_Delete(c);
}

/* A call the operator's tool-policy denies: logged, never run. */
static void
call_start_denied(struct sess *s, const char *id, const char *name,
    const char *args, struct policy_decision pd, char *why, size_t len)
{
	call_audit(s, id, name, args, pd.risk, "denied");
	tool_start_log(s, id, name, args, pd.risk);
	snprintf(why, len, "denied by the operator's tool-policy (%s, line %u "
	    "of the configuration): the tool was not run", pd.rule->glob,
	    pd.rule->line);
	tool_done(s, id, name, 0, 1, why, "TOOL_ERROR");
}

/* Acts on a call's logged decision (approve.c): run it, or answer why not. */
static void
call_decided(struct sess *s, const char *id, const char *name,
    const char *args, enum policy_risk risk, const char *decision)
{
	char why[160];

	if (approve_runs(decision)) {
		call_start(s, id, name, args, risk);
		return;
	}
	snprintf(why, sizeof(why), "%s: the tool was not run",
	    strcmp(decision, "timeout") == 0 ? "no one answered the approval "
	    "request in time" : strcmp(decision, "cancelled") == 0 ?
	    "the approval request was cancelled" : "the user declined this "
	    "tool call");
	tool_done(s, id, name, 0, 1, why, strcmp(decision, "timeout") == 0 ?
	    "APPROVAL_TIMEOUT" : "TOOL_ERROR");
}

/* Client run r has its answer, logged: the step takes it. */
static void
run_answered(struct sess *s, struct tool_run *r, const cJSON *logged)
{
	TAILQ_REMOVE(&s->turn->runs, r, entry);
	log_rinfo(s->turn->req, s->id, "tool %s: call %s %s by a client "
	    "after %llu ms", r->name, r->id, cJSON_GetObjectItem(logged,
	    "error") ? "failed" : "answered", (unsigned long long)(
	    util_mono_ms() - r->started_ms));
	if (cJSON_GetObjectItem(logged, "error") != NULL)
		s->wk->metrics.tool_errors++;
	step_add_logged(s->turn, r->id, r->name, logged);
	run_free(r);
	step_changed(s, 1);
}

static void
wait_timeout_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct tool_run *r = arg;
	struct sess *s = r->s;
	struct sess_result res;
	cJSON *logged = NULL;

	if (r->client) {
		memset(&res, 0, sizeof(res));
		if (approve_result(s, r->id, 1, "no client answered the call "
		    "in time (client-tool-timeout): the tool may not have run",
		    "TOOL_TIMEOUT", &logged, &res) == 1) {
			run_answered(s, r, logged);
			cJSON_Delete(logged);
			return;
		}
		/* Not logged: the step must still go on. */
		TAILQ_REMOVE(&s->turn->runs, r, entry);
		approve_settle(s, r->id);
		tool_done(s, r->id, r->name, util_mono_ms() - r->started_ms, 1,
		    "no client answered the call in time", "TOOL_TIMEOUT");
		run_free(r);
		return;
	}
	TAILQ_REMOVE(&s->turn->runs, r, entry);
	approve_close(s, r->id, "timeout");
	call_decided(s, r->id, r->name, r->args, r->risk, "timeout");
	run_free(r);
}

/*
 * Waits for the answer to call id asked at asked (ms since the epoch;
 * 0: it could not be asked), up to timeout_ms from then.  -1 when it
 * cannot wait: the model is answered why.
 */
static int
wait_add(struct sess *s, const char *id, const char *name, const char *args,
    enum policy_risk risk, uint64_t asked, uint64_t timeout_ms, int client)
{
	struct tool_run *r = NULL;
	struct timeval tv;
	uint64_t now = util_now_ms(), until = asked + timeout_ms;

	if (asked == 0 || (r = run_new(s, id, name, args, risk)) == NULL ||
	    (r->timer = evtimer_new(s->wk->base, wait_timeout_cb,
	    r)) == NULL) {
		if (r != NULL) {
			TAILQ_REMOVE(&s->turn->runs, r, entry);
			run_free(r);
		}
		tool_done(s, id, name, 0, 1, client ? "the call could not be "
		    "logged for the client: the tool was not run" : "the "
		    "approval request could not be logged: the tool was not "
		    "run", "TOOL_ERROR");
		return -1;
	}
	r->waiting = 1;
	r->client = client;
	util_tv(&tv, until > now ? until - now : 0);
	evtimer_add(r->timer, &tv);
	return 0;
}

/*
 * A request of type for call id that a continued turn finds logged but
 * meta does not list (the worker died between the two) is waited for
 * again rather than asked twice.
 */
static void
wait_adopt(struct sess *s, const char *type, const char *id, int calls,
    const char *full)
{
	cJSON *found;
	uint64_t ts;

	if ((s->turn->attempt == 0 && !s->turn->resumed) ||
	    approve_waits(s, id) ||
	    (found = step_logged(s, type, id)) == NULL)
		return;
	ts = (uint64_t)proto_count(found, "loggedMs");
	cJSON_DeleteItemFromObject(found, "loggedMs");
	(void)approve_adopt(s, found, calls, full, ts);
	cJSON_Delete(found);
}

/* Asks for approval of a call and waits, up to approval-timeout. */
static void
call_wait(struct sess *s, const char *id, const char *name,
    const char *args, enum policy_risk risk)
{
	cJSON *c;
	uint64_t asked;

	wait_adopt(s, "tool_approve_request", id, 0, NULL);
	c = call_json(s, id, name, args, risk);
	asked = approve_request(s, c);

	cJSON_Delete(c);
	(void)wait_add(s, id, name, args, risk, asked,
	    s->wk->conf->approval_timeout_ms, 0);
}

/*
 * Logs tool_start and asks the clients to run their tool (mcp_call);
 * waits for the result up to client-tool-timeout.  A call asked before
 * (a resumed turn) is waited for again, not asked twice.
 */
static void
client_start(struct sess *s, const char *id, const char *name,
    const char *args, enum policy_risk risk, const cJSON *tool)
{
	cJSON *c;
	uint64_t asked;

	wait_adopt(s, "mcp_call", id, 1, name);
	if (!approve_waits(s, id))
		tool_start_log(s, id, name, args, risk);
	s->wk->metrics.tool_calls++;
	c = call_json(s, id, name, args, risk);
	asked = approve_call(s, c, cJSON_GetStringValue(cJSON_GetObjectItem(
	    tool, "server")), cJSON_GetStringValue(cJSON_GetObjectItem(tool,
	    "name")));
	cJSON_Delete(c);
	if (wait_add(s, id, name, args, risk, asked,
	    s->wk->conf->client_tool_timeout_ms, 1) == 0)
		log_rinfo(s->turn->req, s->id, "tool %s: call %s asked of the "
		    "clients", name, id);
}

void
tools_result(struct sess *s, const char *id, const cJSON *logged)
{
	struct tool_run *r;

	if (s->turn == NULL)
		return;		/* the resumed turn reads it from the log */
	TAILQ_FOREACH(r, &s->turn->runs, entry)
		if (r->client && strcmp(r->id, id) == 0) {
			run_answered(s, r, logged);
			return;
		}
}

/* The answered run r leaves the waiting and acts on its decision. */
static void
run_decided(struct sess *s, struct tool_run *r, const char *decision)
{
	struct turn *t = s->turn;

	TAILQ_REMOVE(&t->runs, r, entry);
	if (approve_runs(decision))
		sess_emit(s, "agent_state", sess_agent_json(s, "tool"));
	t->starting = 1;
	call_decided(s, r->id, r->name, r->args, r->risk, decision);
	t->starting = 0;
	run_free(r);
	step_changed(s, 0);
}

void
tools_decided(struct sess *s, const char *id, const char *decision,
    uint64_t seq)
{
	struct turn *t = s->turn;
	struct tool_run *r;

	if (t == NULL)
		return;		/* the resumed turn reads it from the log */
	/* The tool runs once its tool_start, logged after the decision, is
	 * stored (call_start): a crash before leaves it not run. */
	TAILQ_FOREACH(r, &t->runs, entry)
		if (r->waiting && !r->client && strcmp(r->id, id) == 0)
			break;
	if (r != NULL)
		run_decided(s, r, decision);
}

void
tools_durable(struct sess *s, uint64_t seq)
{
	struct tool_run *r, *next;

	if (s->turn == NULL)
		return;
	for (r = TAILQ_FIRST(&s->turn->runs); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (r->call_at != 0 && r->call_at <= seq) {
			run_start(s, r);
			if (s->turn == NULL)
				return;
			next = TAILQ_FIRST(&s->turn->runs);
		}
	}
}

/* A built-in tool's call: logged like any, answered by team.c. */
static void
builtin_run(struct sess *s, const char *id, const char *name,
    const char *args)
{
	struct turn *t = s->turn;
	cJSON *found = NULL;
	char *text;
	int is_error;

	/* A re-run does not log its tool_start twice. */
	if (t->attempt == 0 || (found = step_logged(s, "tool_start",
	    id)) == NULL)
		tool_start_log(s, id, name, args, POLICY_LOW);
	cJSON_Delete(found);
	text = team_tool(s, t->agent, name, args, &is_error);
	tool_done(s, id, name, 0, is_error, text ? text : "out of memory",
	    is_error || text == NULL ? "TOOL_ERROR" : NULL);
	free(text);
}

void
tools_step(struct sess *s, cJSON *calls)
{
	struct turn *t = s->turn;
	const struct mcp_tool *mt;
	struct policy_decision pd;
	const char *id, *name, *args, *dec;
	cJSON *c, *found;
	char why[160];

	if (s->broken)
		return;	/* being let go: nothing more runs */

	sess_emit(s, "agent_state", sess_agent_json(s, "tool"));
	t->starting = 1;
	cJSON_ArrayForEach(c, calls) {
		id = cJSON_GetStringValue(cJSON_GetObjectItem(c, "id"));
		name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
		args = cJSON_GetStringValue(cJSON_GetObjectItem(c, "args"));
		if (id == NULL || name == NULL)
			continue;
		/* Answered before a crash: in the checkpoint, or the log. */
		if (tools_answered(t, id))
			continue;
		if ((t->attempt > 0 || t->resumed) &&
		    (found = step_logged(s, "tool_result", id)) != NULL) {
			/* Whatever waited for it (a client's call) is over. */
			approve_answered(s, id);
			step_add_logged(t, id, name, found);
			cJSON_Delete(found);
			continue;
		}
		/* A team's built-in tool (team.c) runs here, at once. */
		if (team_builtin(s, t->agent, name)) {
			builtin_run(s, id, name, args);
			continue;
		}
		/* A client's call whose tool was withdrawn meanwhile. */
		if ((t->attempt > 0 || t->resumed) &&
		    ctool_find(s, name) == NULL && approve_waits(s, id) &&
		    client_gone(s, id, name))
			continue;
		/* Started by a worker that died before its result: a tool
		 * with effects is not run twice (a client's tool is the
		 * client's to run, and is waited for again). */
		if ((t->attempt > 0 || t->resumed) &&
		    ctool_find(s, name) == NULL &&
		    (found = step_logged(s, "tool_start", id)) != NULL) {
			cJSON_Delete(found);
			mt = mcp_tool_find(s->wk->mcp, name);
			/* knowledge_act runs again: its batch id makes the
			 * repeat record nothing (kgtool_run). */
			if ((mt == NULL && !builtin_tool(s, name)) ||
			    (mt != NULL && !mt->read_only)) {
				approve_settle(s, id);
				tool_done(s, id, name, 0, 1, "interrupted: the "
				    "worker running this call stopped before its "
				    "result was logged; a tool that may have "
				    "effects is not run twice, so it was not run "
				    "again (check its effect before calling it "
				    "again)", "TOOL_ERROR");
				continue;
			}
		}
		/* A decision logged while the turn was away comes first:
		 * the policy may have changed since it was asked. */
		found = t->attempt > 0 || t->resumed ?
		    step_logged(s, "audit_entry", id) : NULL;
		dec = cJSON_GetStringValue(cJSON_GetObjectItem(found,
		    "decision"));
		if (dec != NULL && strcmp(dec, "denied") != 0) {
			approve_settle(s, id);
			call_decided(s, id, name, args, tool_policy(s,
			    name).risk, dec);
			cJSON_Delete(found);
			continue;
		}
		cJSON_Delete(found);
		if (mcp_tool_find(s->wk->mcp, name) == NULL &&
		    ctool_find(s, name) == NULL && !builtin_tool(s, name)) {
			/* Nothing to ask about: the model reads why. */
			approve_close(s, id, "cancelled");
			call_start(s, id, name, args, POLICY_HIGH);
			continue;
		}
		pd = tool_policy(s, name);
		if (pd.action == POLICY_DENY) {
			/* Never run; the model reads why. */
			call_start_denied(s, id, name, args, pd, why,
			    sizeof(why));
			continue;
		}
		if (pd.action == POLICY_RUN || approve_always(s, name)) {
			call_audit(s, id, name, args, pd.risk,
			    pd.action == POLICY_RUN ? "auto" : "always");
			call_start(s, id, name, args, pd.risk);
			continue;
		}
		call_wait(s, id, name, args, pd.risk);
	}
	t->starting = 0;
	step_changed(s, 1);
}
