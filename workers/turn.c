/*
 * Turns and the tool loop.  A turn answers one logged user message: the
 * model streams tokens (coalesced into token events), asks for tools
 * (run over MCP, all of a step at once), and is asked again until it
 * answers without calls.  Its checkpoint in meta lets another worker
 * continue it after a crash, without re-running a tool whose result the
 * log holds.
 */
#include <sys/time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/jsonw.h"
#include "parley/log.h"
#include "parley/metrics.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "action.h"
#include "approve.h"
#include "ctool.h"
#include "kb.h"
#include "kgtool.h"
#include "llm.h"
#include "mcp.h"
#include "sess.h"
#include "team.h"
#include "thought.h"
#include "tools.h"
#include "turn.h"
#include "wk.h"

#define MAX_ATTEMPTS	3	/* runs of one turn before it is reported failed */
#define MAX_HISTORY	200	/* messages kept as conversation history */
#define MAX_HISTORY_BYTES (1024 * 1024)	/* and their text, so meta stays small */
#define MAX_CALL_IDS	256	/* ids of the last calls, to keep ids unique */

static void	turn_start(struct sess *, uint64_t input_seq, unsigned attempt,
		    const cJSON *from, const char *agent, unsigned hop);
static void	turn_flush(struct sess *);
static void	tokens_flush(struct sess *);
static void	turn_model(struct sess *);

/*
 * The time the loop pass began (libevent's cached clock), in
 * microseconds.  Token coalescing compares chunks by it: timers are set
 * from it, so two chunks of a timer 20 ms apart are 20 ms apart by it,
 * while by the clock they may be 10 ms apart when the first came late in
 * its pass, and the second would wait.
 */
static uint64_t
loop_us(struct wk *wk)
{
	struct timeval tv;

	if (event_base_gettimeofday_cached(wk->base, &tv) == -1)
		gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000000 + (uint64_t)tv.tv_usec;
}



/*
 * The token event, the one a turn logs most, is written as text: a cJSON
 * object of three strings cost a dozen allocations a token (jsonw.h).
 */
static void
turn_flush(struct sess *s)
{
	const char *body;
	char stk[512];
	struct jw w;
	size_t n, len;

	if (s->toklen == 0 || s->turn == NULL)
		return;
	if ((n = utf8_whole(s->tok, s->toklen)) == 0)
		return;
	jw_init(&w, stk, sizeof(stk), STORE_JSON_MAX);
	jw_raw(&w, "{", 1);
	jw_key(&w, "agentId");
	jw_str(&w, s->agent_id, strlen(s->agent_id));
	jw_key(&w, "messageId");
	jw_str(&w, s->turn->msgid, strlen(s->turn->msgid));
	jw_key(&w, "content");
	/* As cJSON took it: up to the first NUL. */
	jw_str(&w, s->tok, strnlen(s->tok, n));
	jw_raw(&w, "}", 1);
	if ((body = jw_text(&w, &len)) == NULL) {
		jw_free(&w);
		return;
	}
	memmove(s->tok, s->tok + n, s->toklen - n);
	s->toklen -= n;
	s->flushed_us = loop_us(s->wk);
	sess_emit_json(s, "token", body, len);
	jw_free(&w);
}

static void
flush_cb(evutil_socket_t fd, short ev, void *arg)
{
	tokens_flush(arg);
}

#define CONGEST_RETRY_MS	5

/*
 * The streaming path's flush: while the store's write queue is near its
 * bound the tokens wait in s->tok and go later as one event (a token
 * refused by a full queue was lost, and the turn went on without it);
 * the room left is for what cannot wait, which flushes with turn_flush.
 */
static void
tokens_flush(struct sess *s)
{
	struct timeval tv;

	if (s->st == NULL || !store_congested(s->st)) {
		turn_flush(s);
		return;
	}
	if (s->flush_ev == NULL &&
	    (s->flush_ev = evtimer_new(s->wk->base, flush_cb, s)) == NULL) {
		turn_flush(s);
		return;
	}
	util_tv(&tv, CONGEST_RETRY_MS);
	evtimer_add(s->flush_ev, &tv);
}

/* The provider the agent answering uses, by its configured name. */
static const char *
prov_name(const struct sess *s)
{
	const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(
	    team_agent(s, s->agent_id), "provider"));

	if (p != NULL && *p != '\0')
		return p;
	return s->wk->conf->default_provider ?
	    s->wk->conf->default_provider : "?";
}

/* The model call answered: its first byte is the latency users feel. */
static void
call_byte(struct sess *s)
{
	struct turn *t = s->turn;

	if (t == NULL || t->call_byte)
		return;
	t->call_byte = 1;
	metrics_observe(&s->wk->metrics.provider_latency[t->prov],
	    MSC_SECONDS, util_secs_since(t->call_us));
}

static void
on_token(void *arg, const char *text, size_t len)
{
	struct sess *s = arg;
	struct turn *t = s->turn;
	struct timeval tv;
	uint64_t now, iv, wait;

	if (t == NULL)
		return;
	call_byte(s);
	/* Both grow by doubling: no allocation per token. */
	if (util_append(&s->tok, &s->toklen, &s->tokcap, text, len) == -1)
		return;
	util_append(&t->reply, &t->reply_len, &t->reply_cap, text, len);
	/*
	 * A chunk that comes an interval after the last token event goes
	 * out at once; the chunks after it wait for the interval's end and
	 * go together.  A timer armed from the first chunk would add the
	 * whole interval to every event of a reply that streams no faster
	 * than the interval.  A quarter of the interval is let off for the
	 * first chunk: chunks arriving an interval apart come a little
	 * early or late by the timers, and each late flush would push the
	 * next one back until every chunk waited the whole interval again.
	 */
	if (s->flush_ev != NULL && evtimer_pending(s->flush_ev, NULL))
		return;
	now = loop_us(s->wk);
	iv = s->wk->conf->flush_interval_ms * 1000;
	if (now < s->flushed_us || now - s->flushed_us >= iv - iv / 4) {
		tokens_flush(s);
		return;
	}
	/* The timer is made by the first turn that needs it: an idle
	 * session holds none.  Without one the chunk goes at once. */
	if (s->flush_ev == NULL &&
	    (s->flush_ev = evtimer_new(s->wk->base, flush_cb, s)) == NULL) {
		turn_flush(s);
		return;
	}
	wait = iv - (now - s->flushed_us);
	util_tv_us(&tv, wait);
	evtimer_add(s->flush_ev, &tv);
}

/* --- turns --- */

/*
 * Appends one message (consumed) to the agent's history, bounded by count
 * and bytes.
 */
static void
history_add_item(struct sess *s, const char *agent, cJSON *m)
{
	cJSON *h = team_history(s, agent);

	cJSON_AddItemToArray(h, m);
	for (;;) {
		size_t bytes = 0;
		const cJSON *e, *c;

		cJSON_ArrayForEach(e, h) {
			const char *t = cJSON_GetStringValue(
			    cJSON_GetObjectItem(e, "content"));

			bytes += t ? strlen(t) : 0;
			cJSON_ArrayForEach(c, cJSON_GetObjectItem(e, "calls")) {
				t = cJSON_GetStringValue(cJSON_GetObjectItem(c,
				    "args"));
				bytes += t ? strlen(t) : 0;
			}
		}
		/* The newest message stays even when it alone is too big. */
		if (cJSON_GetArraySize(h) <= 1 ||
		    (cJSON_GetArraySize(h) <= MAX_HISTORY &&
		    bytes <= MAX_HISTORY_BYTES))
			break;
		/* Whole exchanges go, so the history never starts with a
		 * tool result whose call was dropped. */
		cJSON_DeleteItemFromArray(h, 0);
		while (cJSON_GetArraySize(h) > 1 &&
		    strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(
		    cJSON_GetArrayItem(h, 0), "role")) ?
		    cJSON_GetStringValue(cJSON_GetObjectItem(
		    cJSON_GetArrayItem(h, 0), "role")) : "", "user") != 0)
			cJSON_DeleteItemFromArray(h, 0);
	}
}

static void
history_add(struct sess *s, const char *agent, const char *role,
    const char *content)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddStringToObject(m, "role", role);
	cJSON_AddStringToObject(m, "content", content);
	history_add_item(s, agent, m);
}

/* Stops and frees the running turn; meta still names it (see turn_free). */
static void
turn_drop(struct sess *s)
{
	struct turn *t = s->turn;

	if (t == NULL)
		return;
	if (t->call != NULL)
		llm_cancel(t->call);
	tools_drop(t);
	cJSON_Delete(t->steps);
	cJSON_Delete(t->calls);
	free(t->reply);
	free(t->input);
	free(t->rag);
	free(t);
	s->turn = NULL;
	s->toklen = 0;
	if (s->flush_ev)
		evtimer_del(s->flush_ev);
}

/* The turn is over: it no longer needs re-running by anyone. */
static void
turn_free(struct sess *s)
{
	turn_drop(s);
	/* Before what approve_clear saves: a meta with the turn's history
	 * must not still name the turn, or its end would be applied twice. */
	proto_set(sess_meta(s), "turn", cJSON_CreateNull());
	approve_clear(s);
}

static void
usage_add(struct sess *s, const struct llm_usage *u, cJSON *into)
{
	cJSON *tot = cJSON_GetObjectItem(sess_meta(s), "usage");
	double in = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "inputTokens"));
	double out = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "outputTokens"));
	double cost = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "cost"));

	s->wk->metrics.tokens_input += u->input_tokens;
	s->wk->metrics.tokens_output += u->output_tokens;
	s->wk->metrics.cost_usd += u->cost;
	team_usage_add(s, s->agent_id, u);
	in = (in != in ? 0 : in) + (double)u->input_tokens;
	out = (out != out ? 0 : out) + (double)u->output_tokens;
	cost = (cost != cost ? 0 : cost) + u->cost;
	tot = cJSON_CreateObject();
	cJSON_AddNumberToObject(tot, "inputTokens", in);
	cJSON_AddNumberToObject(tot, "outputTokens", out);
	cJSON_AddNumberToObject(tot, "tokens", in + out);
	cJSON_AddNumberToObject(tot, "cost", cost);
	proto_set(sess_meta(s), "usage", tot);
	if (into != NULL) {
		cJSON *x = cJSON_CreateObject();

		cJSON_AddNumberToObject(x, "inputTokens", (double)u->input_tokens);
		cJSON_AddNumberToObject(x, "outputTokens",
		    (double)u->output_tokens);
		cJSON_AddNumberToObject(x, "tokens",
		    (double)(u->input_tokens + u->output_tokens));
		cJSON_AddNumberToObject(x, "cost", u->cost);
		cJSON_AddItemToObject(into, "usage", x);
	}
}

/*
 * The turn's state in meta: enough for another worker to continue it, or
 * (end: its end event and final reply) to finish it.  Tool results are
 * not in it: the log has them (tools_step reads them back).
 */
static void
turn_checkpoint_end(struct sess *s, cJSON *end)
{
	struct turn *t = s->turn;
	cJSON *ts = cJSON_CreateObject();

	cJSON_AddStringToObject(ts, "messageId", t->msgid);
	cJSON_AddStringToObject(ts, "agentId", t->agent);
	if (t->hop > 0)
		cJSON_AddNumberToObject(ts, "hop", t->hop);
	cJSON_AddNumberToObject(ts, "inputSeq", (double)t->input_seq);
	cJSON_AddNumberToObject(ts, "attempt", t->attempt);
	cJSON_AddNumberToObject(ts, "modelCalls", t->model_calls);
	cJSON_AddNumberToObject(ts, "inputTokens", (double)t->in_tokens);
	cJSON_AddNumberToObject(ts, "outputTokens", (double)t->out_tokens);
	cJSON_AddNumberToObject(ts, "cost", t->cost);
	cJSON_AddItemToObject(ts, "steps", cJSON_Duplicate(t->steps, 1));
	/* Only answers are awaited: a new owner waits on, silently. */
	t->parked = tools_parked(t);
	if (t->parked)
		cJSON_AddBoolToObject(ts, "parked", 1);
	if (end != NULL)
		cJSON_AddItemToObject(ts, "end", end);
	proto_set(sess_meta(s), "turn", ts);
	sess_meta_save(s);
}

static void
turn_checkpoint(struct sess *s)
{
	turn_checkpoint_end(s, NULL);
}

/* Whose turn ended, on what: what its end leads to in a team. */
struct end_of {
	const char	*agent;
	uint64_t	 seq;
	unsigned	 hop;
	const char	*type;		/* done, error */
	const cJSON	*body;		/* its event's */
};

/*
 * What ends a turn, once its end is logged (or found logged): the
 * exchange joins the agent's history at once (reply NULL: the turn
 * failed, only the user's input does), the turn is forgotten, the agent
 * is idle, and a team's round goes on or ends (team.c).
 */
static void
end_apply(struct sess *s, const char *input, const cJSON *steps,
    const char *reply, const struct end_of *eo)
{
	char agent[sizeof(s->agent_id)], *said;
	const cJSON *e;
	cJSON *kept;
	double turns;

	snprintf(agent, sizeof(agent), "%s", eo->agent);
	history_add(s, agent, "user", input ? input : "");
	if (reply != NULL) {
		cJSON_ArrayForEach(e, steps)
			history_add_item(s, agent, cJSON_Duplicate(e, 1));
		history_add(s, agent, "assistant", reply);
		turns = cJSON_GetNumberValue(cJSON_GetObjectItem(sess_meta(s),
		    "turns"));
		proto_set(sess_meta(s), "turns",
		    cJSON_CreateNumber((turns != turns ? 0 : turns) + 1));
	}
	/* steps and reply may be the turn's, which turn_free frees. */
	kept = cJSON_Duplicate(steps, 1);
	said = reply != NULL ? strdup(reply) : NULL;
	turn_free(s);
	sess_emit(s, "agent_state", sess_agent_json(s, "idle"));
	team_turn_end(s, agent, eo->seq, eo->hop, eo->type, eo->body, kept,
	    reply != NULL ? (said ? said : "") : NULL);
	cJSON_Delete(kept);
	free(said);
	/* Between turns, what is said for the session is the lead's. */
	snprintf(s->agent_id, sizeof(s->agent_id), "%s", team_lead(s));
	sess_meta_save(s);
}

/*
 * Ends the turn with its type event (done, or error) and body, in two
 * steps: meta records the end before the event is logged, so a worker
 * that dies between them finishes the turn (turn_end_logged) instead of
 * running it again, and spending again.
 */
static void
turn_end(struct sess *s, const char *type, cJSON *body, const char *reply)
{
	struct turn *t = s->turn;
	cJSON *end = cJSON_CreateObject(), *kept;
	struct end_of eo = { t->agent, t->input_seq, t->hop, type, NULL };

	cJSON_AddStringToObject(end, "type", type);
	cJSON_AddItemToObject(end, "body", cJSON_Duplicate(body, 1));
	if (reply != NULL)
		cJSON_AddStringToObject(end, "reply", reply);
	turn_checkpoint_end(s, end);
	kept = cJSON_Duplicate(body, 1);
	sess_emit(s, type, body);
	eo.body = kept;
	end_apply(s, t->input, t->steps, reply, &eo);
	cJSON_Delete(kept);
}

/*
 * A turn that ends with calls unanswered (cancelled mid-step) answers them
 * as cancelled: a history with a call and no result is refused by the
 * providers on every later request.
 */
static void
steps_close(struct turn *t)
{
	const cJSON *e, *last = NULL, *c;
	const char *id, *name;
	cJSON *m;

	cJSON_ArrayForEach(e, t->steps)
		if (cJSON_GetArraySize(cJSON_GetObjectItem(e, "calls")) > 0)
			last = e;
	if (last == NULL)
		return;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(last, "calls")) {
		id = cJSON_GetStringValue(cJSON_GetObjectItem(c, "id"));
		name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
		if (id == NULL || tools_answered(t, id))
			continue;
		m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "role", "tool");
		cJSON_AddStringToObject(m, "toolCallId", id);
		cJSON_AddStringToObject(m, "tool", name ? name : "");
		cJSON_AddStringToObject(m, "content",
		    "cancelled before it finished");
		cJSON_AddBoolToObject(m, "isError", 1);
		cJSON_AddItemToArray(t->steps, m);
	}
}

/* Ends the running turn with a done event (after its last tokens). */
void
turn_finish(struct sess *s, int cancelled, int max_turns)
{
	struct turn *t = s->turn;
	struct llm_usage u;
	cJSON *b;

	tools_close_waits(s);
	turn_flush(s);
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", t->msgid);
	u.input_tokens = t->in_tokens;
	u.output_tokens = t->out_tokens;
	u.cost = t->cost;
	if (cancelled && t->call != NULL) {
		/* The provider never reports usage for a cancelled call, but
		 * what was streamed was spent: count it the way providers
		 * do, about four bytes a token, and say it is an estimate. */
		u.input_tokens += t->input ? (strlen(t->input) + 3) / 4 : 0;
		u.output_tokens += (t->reply_len - t->step_from + 3) / 4;
		usage_add(s, &u, b);
		cJSON_AddBoolToObject(cJSON_GetObjectItem(b, "usage"),
		    "estimated", 1);
	} else
		usage_add(s, &u, b);
	cJSON_AddNumberToObject(b, "turns", t->model_calls > 0 ?
	    t->model_calls : 1);
	if (cancelled)
		cJSON_AddBoolToObject(b, "cancelled", 1);
	if (max_turns)
		cJSON_AddBoolToObject(b, "maxTurnsReached", 1);
	/* Not the answer's end: a team's team_done is (conn.c). */
	if (team_in_round(s, t->input_seq))
		cJSON_AddBoolToObject(b, "teamRound", 1);
	log_rinfo(t->req, s->id, "turn %s %s: %u model calls, %llu input and "
	    "%llu output tokens, cost %.6f", t->msgid, cancelled ? "cancelled" :
	    "finished", t->model_calls, (unsigned long long)u.input_tokens,
	    (unsigned long long)u.output_tokens, u.cost);
	steps_close(t);
	turn_end(s, "done", b, t->reply ? t->reply + t->step_from : "");
}

/* Ends the turn with an error event (no done: the model did not finish). */
static void
turn_fail(struct sess *s, const char *code, const char *message)
{
	struct llm_usage u;
	cJSON *b;

	tools_close_waits(s);
	turn_flush(s);
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "code", code);
	cJSON_AddStringToObject(b, "message", message);
	cJSON_AddStringToObject(b, "severity", "recoverable");
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", s->turn->msgid);
	log_rinfo(s->turn->req, s->id, "turn %s failed: %s: %s",
	    s->turn->msgid, code, message);
	/* Model calls that finished before the failure were spent. */
	u.input_tokens = s->turn->in_tokens;
	u.output_tokens = s->turn->out_tokens;
	u.cost = s->turn->cost;
	usage_add(s, &u, NULL);
	turn_end(s, "error", b, NULL);
}

/* 1 when list (a step's calls) names call id. */
static int
calls_name(const cJSON *list, const char *id)
{
	const cJSON *e;
	const char *x;

	cJSON_ArrayForEach(e, list) {
		x = cJSON_GetStringValue(cJSON_GetObjectItem(e, "id"));
		if (x != NULL && strcmp(x, id) == 0)
			return 1;
	}
	return 0;
}

static void
on_tool_call(void *arg, const char *id, const char *name, const char *args)
{
	struct sess *s = arg;
	struct turn *t = s->turn;
	const char *base = id;
	char uniq[128];
	cJSON *c, *seen;
	unsigned n;

	if (t == NULL)
		return;
	call_byte(s);
	/* Ids the provider made up (or a server that numbers from 1 each
	 * time) repeat across steps and turns; clients and answers go by id,
	 * so a repeat gets a name of its own, as the model APIs allow ids to
	 * be.  meta keeps the ids of the session's last calls. */
	seen = cJSON_GetObjectItem(sess_meta(s), "callIds");
	if (!cJSON_IsArray(seen)) {
		seen = cJSON_CreateArray();
		proto_set(sess_meta(s), "callIds", seen);
	}
	for (n = 1; calls_name(t->calls, id) || proto_holds(seen, id); n++) {
		snprintf(uniq, sizeof(uniq), "%.64s_%llu_%u%s%.0u", base,
		    (unsigned long long)t->input_seq, t->model_calls,
		    n > 1 ? "_" : "", n > 1 ? n : 0);
		id = uniq;
	}
	cJSON_AddItemToArray(seen, cJSON_CreateString(id));
	while (cJSON_GetArraySize(seen) > MAX_CALL_IDS)
		cJSON_DeleteItemFromArray(seen, 0);
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "id", id);
	cJSON_AddStringToObject(c, "name", name);
	cJSON_AddStringToObject(c, "args", args ? args : "");
	cJSON_AddItemToArray(s->turn->calls, c);
}

/*
 * A block of the model's reasoning, complete: the agent's thought, logged
 * after the tokens before it.  Its id names the turn's step, so a re-run
 * says the same thought under the same id.
 */
static void
on_thought(void *arg, const char *text, size_t len)
{
	struct sess *s = arg;
	struct turn *t = s->turn;
	struct sess_result r;
	char id[THOUGHT_ID_MAX + 1], *content;
	cJSON *th;

	if (t == NULL || len == 0)
		return;
	/* A thought holds THOUGHT_CONTENT_MAX bytes: a longer block is
	 * cut at a character's end. */
	if (len > THOUGHT_CONTENT_MAX)
		len = utf8_whole(text, THOUGHT_CONTENT_MAX);
	if ((content = strndup(text, len)) == NULL)
		return;
	call_byte(s);
	turn_flush(s);
	/* Named by the step, not the attempt (a re-run's message id ends
	 * ".N"): the re-run's thought is the same one, refused as known. */
	snprintf(id, sizeof(id), "th_%.*s-%u-%u", (int)strcspn(t->msgid, "."),
	    t->msgid, t->model_calls, ++t->thoughts);
	th = cJSON_CreateObject();
	cJSON_AddStringToObject(th, "thoughtId", id);
	cJSON_AddStringToObject(th, "content", content);
	cJSON_AddStringToObject(th, "category", "analysis");
	cJSON_AddNumberToObject(th, "confidence", 1);
	cJSON_AddItemToObject(th, "references", cJSON_CreateArray());
	cJSON_AddBoolToObject(th, "actionable", 0);
	/* Internal reasoning is private in the selective mode (seed 000). */
	cJSON_AddBoolToObject(th, "shared", 0);
	free(content);
	memset(&r, 0, sizeof(r));
	/* A re-run's thought has the same id and is refused as known; one
	 * past thought-rate or the session's bound is not logged. */
	if (thought_log(s, t->agent, th, &r) == 0)
		log_rdebug(t->req, s->id, "agent %s: reasoning not shared as "
		    "a thought: %s", t->agent, r.msg);
	cJSON_Delete(th);
}

static void
on_done(void *arg, const struct llm_usage *u, const char *stop_reason)
{
	struct sess *s = arg;
	struct turn *t = s->turn;
	cJSON *calls, *step;

	call_byte(s);
	log_rinfo(t->req, s->id, "provider %s: model call %u done in %.0f ms, "
	    "stop %s, %llu input and %llu output tokens", prov_name(s),
	    t->model_calls + 1, util_secs_since(t->call_us) * 1000,
	    stop_reason ? stop_reason : "?",
	    (unsigned long long)u->input_tokens,
	    (unsigned long long)u->output_tokens);
	t->call = NULL;
	t->model_calls++;
	t->in_tokens += u->input_tokens;
	t->out_tokens += u->output_tokens;
	t->cost += u->cost;
	if (cJSON_GetArraySize(t->calls) == 0) {
		turn_finish(s, 0, 0);
		turn_next(s);
		return;
	}
	if (t->model_calls >= s->wk->conf->max_turns) {
		turn_finish(s, 0, 1);
		turn_next(s);
		return;
	}
	/* The model's words so far and the calls it made are one message. */
	turn_flush(s);
	calls = t->calls;
	t->calls = cJSON_CreateArray();
	step = cJSON_CreateObject();
	cJSON_AddStringToObject(step, "role", "assistant");
	cJSON_AddStringToObject(step, "content",
	    t->reply ? t->reply + t->step_from : "");
	cJSON_AddItemToObject(step, "calls", cJSON_Duplicate(calls, 1));
	cJSON_AddItemToArray(t->steps, step);
	t->step_from = t->reply_len;
	turn_checkpoint(s);
	tools_step(s, calls);
	cJSON_Delete(calls);
}

static void
on_error(void *arg, const char *code, const char *message)
{
	struct sess *s = arg;

	s->wk->metrics.provider_errors[s->turn->prov]++;
	log_rinfo(s->turn->req, s->id, "provider %s: model call %u failed "
	    "after %.0f ms: %s: %s", prov_name(s), s->turn->model_calls + 1,
	    util_secs_since(s->turn->call_us) * 1000, code, message);
	s->turn->call = NULL;
	turn_fail(s, code, message);
	turn_next(s);
}

/*
 * The provider's stream broke after tokens went out and it starts over:
 * say so in the log (clients saw part of a reply that will not finish),
 * then the retried output follows under the same messageId.
 */
static void
on_retrying(void *arg, const char *why)
{
	struct sess *s = arg;
	cJSON *b;

	if (s->turn == NULL)
		return;
	log_rinfo(s->turn->req, s->id, "provider %s: model call %u broke "
	    "after %.0f ms and starts over: %s", prov_name(s),
	    s->turn->model_calls + 1, util_secs_since(s->turn->call_us) * 1000,
	        why);
	turn_flush(s);
	s->toklen = 0;
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "code", "LLM_ERROR");
	cJSON_AddStringToObject(b, "message", why);
	cJSON_AddStringToObject(b, "severity", "recoverable");
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", s->turn->msgid);
	cJSON_AddBoolToObject(b, "retrying", 1);
	sess_emit(s, "error", b);
	/* This step starts over: its text and calls so far are void. */
	s->turn->reply_len = s->turn->step_from;
	if (s->turn->reply != NULL)
		s->turn->reply[s->turn->reply_len] = '\0';
	cJSON_Delete(s->turn->calls);
	s->turn->calls = cJSON_CreateArray();
}

#define MCP_WAIT_MS	5000	/* a new worker waits this long for its tools */

/*
 * A worker that just started may not have heard from its MCP servers:
 * a turn started now would find no tools, so it waits a little.
 */
static int
tools_pending(struct sess *s)
{
	return s->wk->mcp != NULL && !mcp_settled(s->wk->mcp) &&
	    util_mono_ms() - s->wk->started_ms < MCP_WAIT_MS;
}

static void
start_cb(evutil_socket_t fd, short ev, void *arg)
{
	turn_next(arg);
}

struct fetch {
	char	*text;
	char	 req[17];	/* its client's request id, or "" */
	char	 to[SESS_AGENT_MAX + 1];	/* the agent it names, or "" */
};

static int
fetch_message(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct fetch *f = arg;
	cJSON *o = cJSON_ParseWithLength(json, len), *m;

	m = cJSON_GetObjectItem(o, "message");
	if (cJSON_IsString(m))
		f->text = strdup(m->valuestring);
	m = cJSON_GetObjectItem(o, "to");
	if (cJSON_IsString(m))
		snprintf(f->to, sizeof(f->to), "%s", m->valuestring);
	cJSON_Delete(o);
	return 1;
}

/* One history or step entry as a provider message; calls is its storage. */
static int
msg_from(const cJSON *e, struct llm_msg *m, struct llm_tool_call **calls)
{
	const cJSON *cs = cJSON_GetObjectItem(e, "calls"), *c;
	size_t n = 0;

	memset(m, 0, sizeof(*m));
	m->role = cJSON_GetStringValue(cJSON_GetObjectItem(e, "role"));
	m->content = cJSON_GetStringValue(cJSON_GetObjectItem(e, "content"));
	if (m->role == NULL)
		return -1;
	if (m->content == NULL)
		m->content = "";
	m->tool_call_id = cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "toolCallId"));
	m->tool_name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "tool"));
	m->is_error = cJSON_IsTrue(cJSON_GetObjectItem(e, "isError"));
	*calls = NULL;
	if (cJSON_GetArraySize(cs) > 0 &&
	    (*calls = calloc((size_t)cJSON_GetArraySize(cs),
	    sizeof(**calls))) != NULL) {
		cJSON_ArrayForEach(c, cs) {
			(*calls)[n].id = cJSON_GetStringValue(
			    cJSON_GetObjectItem(c, "id"));
			(*calls)[n].name = cJSON_GetStringValue(
			    cJSON_GetObjectItem(c, "name"));
			(*calls)[n].args_json = cJSON_GetStringValue(
			    cJSON_GetObjectItem(c, "args"));
			if ((*calls)[n].id && (*calls)[n].name)
				n++;
		}
		m->calls = *calls;
		m->ncalls = n;
	}
	return 0;
}

/* 1 when an MCP server of the operator's offers tool name. */
static int
mcp_taken(void *arg, const char *name)
{
	struct sess *s = arg;

	return mcp_tool_find(s->wk->mcp, name) != NULL;
}

/* 1 when an MCP server's or a client's tool has this name. */
static int
builtin_taken(void *arg, const char *name)
{
	struct sess *s = arg;

	return mcp_taken(s, name) || ctool_find(s, name) != NULL;
}

static void	turn_model(struct sess *);

/*
 * The retrieved context for the turn msgid (kb.c): kept for each of its
 * model calls (they are stateless); the first goes on if it waited.
 */
static void
turn_rag(struct sess *s, char *text, const char *msgid)
{
	struct turn *t = s->turn;
	int waited;

	if (t == NULL || strcmp(t->msgid, msgid) != 0 ||
	    (t->rag_state != 1 && t->rag_state != 3)) {
		free(text);
		return;
	}
	waited = t->rag_state == 3;
	free(t->rag);
	t->rag = text;
	t->rag_state = 2;
	if (waited && t->call == NULL)
		turn_model(s);
}

/* Asks the model for the next step: history, the user's input, the steps. */
static void
turn_model(struct sess *s)
{
	static const struct llm_cbs cbs = { on_token, on_done, on_error,
	    on_tool_call, on_retrying, on_thought };
	struct turn *t = s->turn;
	const struct cfg_provider *p;
	struct cfg_provider own;
	const cJSON *h = team_history(s, t->agent), *e, *a;
	const struct mcp_tool *mt = NULL;
	struct llm_tool_def *defs = NULL;
	struct llm_tool_call **store;
	struct llm_msg *msgs;
	size_t n = 0, i, ntools, nclient, cap;
	char *dir, *prompt;
	cJSON *dm;

	if (s->broken)
		return;	/* being let go: nothing more runs */

	/* Before its first model call, what the session knows of the
	 * user's message (kb.c); turn_rag calls back when it waited. */
	if (t->rag_state == 0) {
		t->rag_state = 1;
		if (kb_rag(s, t->agent[0] ? t->agent : s->agent_id, t->msgid,
		    t->input, turn_rag) == 1 && t->rag_state == 1) {
			t->rag_state = 3;
			return;
		}
	}
	if (t->rag_state == 3)
		return;

	/* Directives logged since the agent's last call join its steps:
	 * seen now, and kept in the history with the turn (action.c). */
	if ((dir = action_directives(s, s->agent_id)) != NULL) {
		dm = cJSON_CreateObject();
		cJSON_AddStringToObject(dm, "role", "user");
		cJSON_AddStringToObject(dm, "content", dir);
		cJSON_AddItemToArray(t->steps, dm);
		free(dir);
		turn_checkpoint(s);
	}
	cap = (size_t)cJSON_GetArraySize(h) + (size_t)cJSON_GetArraySize(
	    t->steps) + 3;
	msgs = calloc(cap, sizeof(*msgs));
	store = calloc(cap, sizeof(*store));
	ntools = s->wk->mcp ? mcp_tools(s->wk->mcp, &mt) : 0;
	nclient = (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
	    "clientTools"));
	if ((defs = calloc(ntools + nclient + TEAM_TOOLS + 1 + KGTOOL_N,
	    sizeof(*defs))) != NULL) {
		for (i = 0; i < ntools; i++) {
			defs[i].name = mt[i].full_name;
			defs[i].description = mt[i].description;
			defs[i].schema_json = mt[i].schema_json;
		}
		ntools += ctool_defs(s, defs + ntools, nclient, mcp_taken, s);
		ntools += team_tool_defs(s, t->agent, defs + ntools,
		    TEAM_TOOLS);
		/* kb_search, unless an MCP or a client's tool has its name. */
		if (kb_tool_def(s, &defs[ntools]) &&
		    !mcp_taken(s, KB_TOOL) && ctool_find(s, KB_TOOL) == NULL)
			ntools++;
		/* The knowledge tools, on the same terms. */
		ntools += kgtool_defs(s, defs + ntools, builtin_taken, s);
	}
	/* A team's agent knows who it is and who its teammates are. */
	prompt = team_prompt(s, t->agent);
	if (msgs != NULL && store != NULL) {
		if (prompt != NULL) {
			msgs[n].role = "system";
			msgs[n].content = prompt;
			n++;
		}
		cJSON_ArrayForEach(e, h)
			if (msg_from(e, &msgs[n], &store[n]) == 0)
				n++;
		/* Just before the message it was retrieved for. */
		if (t->rag != NULL) {
			msgs[n].role = "system";
			msgs[n].content = t->rag;
			n++;
		}
		msgs[n].role = "user";
		msgs[n].content = t->input ? t->input : "";
		n++;
		cJSON_ArrayForEach(e, t->steps)
			if (msg_from(e, &msgs[n], &store[n]) == 0)
				n++;
	}
	/* Each agent has its provider, and may name its own model. */
	a = team_agent(s, t->agent);
	p = config_provider(s->wk->conf, prov_name(s));
	if (p != NULL && cJSON_IsString(cJSON_GetObjectItem(a, "model"))) {
		own = *p;
		own.model = cJSON_GetObjectItem(a, "model")->valuestring;
		p = &own;
	}
	t->prov = metrics_provider(p != NULL ? p->type : NULL);
	t->call_us = util_mono_us();
	t->call_byte = 0;
	s->wk->metrics.provider_requests[t->prov]++;
	log_rdebug(t->req, s->id, "provider %s: model call %u for turn %s, "
	    "%zu messages, %zu tools", prov_name(s), t->model_calls + 1,
	    t->msgid, n, defs ? ntools : 0);
	if (p != NULL && msgs != NULL && store != NULL)
		t->call = llm_start(s->wk->llm, p, msgs, n, defs,
		    defs ? ntools : 0, &cbs, s);
	for (i = 0; store != NULL && i < cap; i++)
		free(store[i]);
	free(store);
	free(msgs);
	free(defs);
	free(prompt);
	if (t->call == NULL) {
		s->wk->metrics.provider_errors[t->prov]++;
		turn_fail(s, "LLM_ERROR", "the provider could not start the "
		    "request; check the provider configuration");
		turn_next(s);
	}
}

/*
 * The step's calls moved on (tools.c): all answered, the model goes on.
 * A result costs no checkpoint (the log holds it); whether only answers
 * are awaited (parked) does, when it changes.
 */
static void
turn_stepped(struct sess *s, int answered)
{
	if (!answered && tools_parked(s->turn) != s->turn->parked) {
		turn_checkpoint(s);
		sess_check_idle(s);
	}
	if (answered) {
		sess_emit(s, "agent_state", sess_agent_json(s, "thinking"));
		turn_model(s);
	}
}

/*
 * Starts (or, after a crash, continues) the turn answering the message
 * logged at input_seq.  from is the turn's checkpoint from meta, or NULL;
 * agent (NULL: the one from names, or whom the message is for) answers,
 * at hop of its team's round.
 */
static void
turn_start(struct sess *s, uint64_t input_seq, unsigned attempt,
    const cJSON *from, const char *agent, unsigned hop)
{
	const cJSON *steps = cJSON_GetObjectItem(from, "steps");
	struct fetch f = { NULL, "", "" };
	struct turn *t;
	cJSON *calls, *e;

	if (s->broken)
		return;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return;
	t->input_seq = input_seq;
	t->attempt = attempt;
	if (from != NULL) {
		agent = cJSON_GetStringValue(cJSON_GetObjectItem(from,
		    "agentId"));
		hop = (unsigned)proto_count(from, "hop");
	}
	t->resumed = cJSON_IsTrue(cJSON_GetObjectItem(from, "parked"));
	t->stepped = turn_stepped;
	TAILQ_INIT(&t->runs);
	t->hop = hop;
	/* m-SEQ, m-SEQ-HOP for a team's later speakers, .ATTEMPT a re-run */
	snprintf(t->msgid, sizeof(t->msgid), "m-%llu", (unsigned long long)
	    input_seq);
	if (hop > 0)
		snprintf(t->msgid + strlen(t->msgid), sizeof(t->msgid) -
		    strlen(t->msgid), "-%u", hop);
	if (attempt > 0)
		snprintf(t->msgid + strlen(t->msgid), sizeof(t->msgid) -
		    strlen(t->msgid), ".%u", attempt);
	t->steps = cJSON_IsArray(steps) ? cJSON_Duplicate(steps, 1) :
	    cJSON_CreateArray();
	/* What the turn spent before the crash still counts, and so do its
	 * model calls against max-turns. */
	t->model_calls = (unsigned)proto_count(from, "modelCalls");
	t->in_tokens = (uint64_t)proto_count(from, "inputTokens");
	t->out_tokens = (uint64_t)proto_count(from, "outputTokens");
	t->cost = proto_count(from, "cost");
	t->calls = cJSON_CreateArray();
	if (sess_log_read(s, input_seq - 1, 1, fetch_message, &f) < 0)
		log_warnx("session %s: the message of seq %llu is not at hand; "
		    "the turn runs without it", s->id,
		    (unsigned long long)input_seq);
	/* Its client's request id, for the turn's log lines. */
	sess_req_find(s, input_seq, f.req);
	if (agent == NULL || team_agent(s, agent) == NULL)
		team_first(s, input_seq, *f.to ? f.to : NULL, t->agent,
		    sizeof(t->agent));
	else
		snprintf(t->agent, sizeof(t->agent), "%s", agent);
	snprintf(s->agent_id, sizeof(s->agent_id), "%s", t->agent);
	t->input = team_compose(s, f.text, input_seq, hop);
	free(f.text);
	memcpy(t->req, f.req, sizeof(t->req));
	s->turn = t;
	log_rinfo(t->req, s->id, "turn %s of %s started for message seq "
	    "%llu%s", t->msgid, t->agent, (unsigned long long)input_seq,
	    t->resumed ?
	    " (waits on for its answers)" : attempt > 0 ?
	    " (re-run after an interruption)" : "");
	turn_checkpoint(s);
	/* A step whose calls have not all answered resumes with them. */
	calls = NULL;
	cJSON_ArrayForEach(e, t->steps)
		if (cJSON_GetArraySize(cJSON_GetObjectItem(e, "calls")) > 0)
			calls = cJSON_GetObjectItem(e, "calls");
	if (calls != NULL) {
		/* The last step's calls: those answered are skipped. */
		calls = cJSON_Duplicate(calls, 1);
		tools_step(s, calls);
		cJSON_Delete(calls);
		return;
	}
	sess_emit(s, "agent_state", sess_agent_json(s, "thinking"));
	turn_model(s);
}

/* Starts the next queued input, if no turn runs and the session lives. */
void
turn_next(struct sess *s)
{
	cJSON *q = cJSON_GetObjectItem(sess_meta(s), "queue"), *first;
	char agent[SESS_AGENT_MAX + 1];
	struct timeval tv;
	uint64_t seq;
	unsigned hop;

	/* The interrupted turn goes first; recover_cb calls back here (after
	 * its events are read back: s->promote, on an owner). */
	if (s->recover_ev != NULL || s->broken ||
	    (s->promote != NULL && !s->follower) || sess_paused(s) ||
	    sess_held(s)) {
		sess_check_idle(s);
		return;
	}
	if (s->turn == NULL && (cJSON_GetArraySize(q) > 0 || team_pending(s)) &&
	    tools_pending(s)) {
		/* Made on first use: most sessions never wait for MCP. */
		if (s->start_ev == NULL && (s->start_ev = evtimer_new(
		    s->wk->base, start_cb, s)) == NULL) {
			log_warnx("session %s: no timer to wait for its MCP "
			    "tools; the queue waits for the next event",
			    s->id);
			return;
		}
		util_tv(&tv, 100);
		evtimer_add(s->start_ev, &tv);
		return;
	}
	/* A team's round goes on before the next message. */
	if (s->turn == NULL && !s->ended && team_next(s, &seq, agent,
	    sizeof(agent), &hop))
		turn_start(s, seq, 0, NULL, agent, hop);
	while (s->turn == NULL && !s->ended && cJSON_GetArraySize(q) > 0) {
		first = cJSON_GetArrayItem(q, 0);
		seq = cJSON_IsNumber(first) && first->valuedouble >= 1 ?
		    (uint64_t)first->valuedouble : 0;
		cJSON_DeleteItemFromArray(q, 0);
		if (seq == 0)
			continue;
		turn_start(s, seq, 0, NULL, NULL, 0);
	}
	sess_check_idle(s);
}

/* Is this the end event (type, messageId) of the turn? */
struct end_find {
	const char	*type;
	const char	*mid;
	int		 found;
};

static int
find_end(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct end_find *ef = arg;
	char want[48];
	cJSON *o;

	snprintf(want, sizeof(want), "\"type\":\"%s\"", ef->type);
	if (strstr(json, want) == NULL || strstr(json, ef->mid) == NULL)
		return 0;
	o = cJSON_ParseWithLength(json, len);
	ef->found = strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o,
	    "messageId")) ? cJSON_GetStringValue(cJSON_GetObjectItem(o,
	    "messageId")) : "", ef->mid) == 0;
	cJSON_Delete(o);
	return ef->found;
}

/*
 * A turn whose end meta records (turn_end) but whose worker stopped
 * before it was all done: its end event is logged unless the log has it,
 * and the rest is done.  It is never run again.
 */
static void
turn_end_logged(struct sess *s, const cJSON *t, uint64_t seq,
    const char *mid)
{
	const cJSON *end = cJSON_GetObjectItem(t, "end");
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(end,
	    "type"));
	char *reply = NULL, *m = strdup(mid), *input;
	struct fetch f = { NULL, "", "" };
	struct end_of eo;
	struct end_find ef;
	cJSON *steps, *body;
	int n;

	if (type == NULL || (strcmp(type, "done") != 0 &&
	    strcmp(type, "error") != 0))
		type = "error";
	ef.type = type;
	ef.mid = mid;
	ef.found = 0;
	if ((n = sess_log_read(s, seq, 0, find_end, &ef)) < 0)
		log_warnx("session %s: cannot read the log to see whether turn "
		    "%s's end was logged; logging it", s->id, mid);
	body = cJSON_Duplicate(cJSON_GetObjectItem(end, "body"), 1);
	eo.agent = s->agent_id;
	eo.seq = seq;
	eo.hop = (unsigned)proto_count(t, "hop");
	eo.type = type;
	eo.body = cJSON_GetObjectItem(end, "body");
	if (!ef.found)
		sess_emit(s, type, body ? body : cJSON_CreateObject());
	else
		cJSON_Delete(body);
	if (cJSON_IsString(cJSON_GetObjectItem(end, "reply")))
		reply = strdup(cJSON_GetObjectItem(end, "reply")->valuestring);
	steps = cJSON_Duplicate(cJSON_GetObjectItem(t, "steps"), 1);
	(void)sess_log_read(s, seq - 1, 1, fetch_message, &f);
	sess_req_find(s, seq, f.req);
	log_rinfo(f.req, s->id, "turn %s had ended (%s%s) when its worker "
	    "stopped; it is not run again", m ? m : "?", type, ef.found ?
	    ", logged" : ", now logged");
	/* t is meta's: end_apply replaces it (eo.body is copied first). */
	eo.body = body = cJSON_Duplicate(eo.body, 1);
	input = team_compose(s, f.text, seq, eo.hop);
	end_apply(s, input, steps, strcmp(type, "done") == 0 ?
	    (reply ? reply : "") : NULL, &eo);
	cJSON_Delete(body);
	free(input);
	cJSON_Delete(steps);
	free(reply);
	free(f.text);
	free(m);
	turn_next(s);
}

/* A cancel that came while the turn was read back ends it now. */
static void
cancel_due(struct sess *s)
{
	if (!s->cancel_due)
		return;
	s->cancel_due = 0;
	if (s->turn != NULL) {
		turn_finish(s, 1, 0);
		turn_next(s);
	}
}

/*
 * A session whose meta says a turn was running when its worker stopped:
 * say so, then continue it from its checkpoint (or report it failed after
 * MAX_ATTEMPTS).
 */
static void
recover_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sess *s = arg;
	cJSON *t = cJSON_GetObjectItem(sess_meta(s), "turn"), *b, *from;
	uint64_t seq = (uint64_t)proto_count(t, "inputSeq");
	unsigned attempt = (unsigned)proto_count(t, "attempt");
	unsigned hop = (unsigned)proto_count(t, "hop");
	const char *mid = cJSON_GetStringValue(cJSON_GetObjectItem(t,
	    "messageId"));
	char msg[256];

	if (tools_pending(s)) {
		struct timeval tv;

		util_tv(&tv, 100);
		evtimer_add(s->recover_ev, &tv);
		return;
	}
	event_free(s->recover_ev);
	s->recover_ev = NULL;
	/* What is said of the interrupted turn is said as its agent's. */
	if (cJSON_IsString(cJSON_GetObjectItem(t, "agentId")) &&
	    team_agent(s, cJSON_GetObjectItem(t, "agentId")->valuestring))
		snprintf(s->agent_id, sizeof(s->agent_id), "%s",
		    cJSON_GetObjectItem(t, "agentId")->valuestring);
	/* A question asked during a call died with the call. */
	approve_clear_elicits(s);
	if (!cJSON_IsObject(t) || seq == 0 || mid == NULL || s->turn != NULL) {
		turn_next(s);
		return;
	}
	if (cJSON_IsObject(cJSON_GetObjectItem(t, "end"))) {
		turn_end_logged(s, t, seq, mid);
		return;
	}
	/* A turn that only waited for answers was not interrupted: it waits
	 * on (and takes the answers logged meanwhile), as the same attempt. */
	if (cJSON_IsTrue(cJSON_GetObjectItem(t, "parked"))) {
		from = cJSON_Duplicate(t, 1);
		turn_start(s, seq, attempt, from, NULL, 0);
		cJSON_Delete(from);
		cancel_due(s);
		return;
	}
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "code", "INTERNAL");
	cJSON_AddStringToObject(b, "messageId", mid);
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	if (attempt + 1 >= MAX_ATTEMPTS) {
		snprintf(msg, sizeof(msg), "the turn for message seq %llu was "
		    "interrupted %u times; it is reported failed",
		    (unsigned long long)seq, attempt + 1);
		cJSON_AddStringToObject(b, "message", msg);
		cJSON_AddStringToObject(b, "severity", "fatal");
		sess_emit(s, "error", b);
		approve_clear(s);
		proto_set(sess_meta(s), "turn", cJSON_CreateNull());
		proto_set(sess_meta(s), "status",
		    cJSON_CreateString("failed"));
		sess_emit(s, "agent_state", sess_agent_json(s, "idle"));
		/* A team's round ends with it (team_done, error). */
		team_turn_end(s, s->agent_id, seq, hop, "error", NULL, NULL,
		    NULL);
		snprintf(s->agent_id, sizeof(s->agent_id), "%s", team_lead(s));
		sess_meta_save(s);
		turn_next(s);
		return;
	}
	snprintf(msg, sizeof(msg), "the worker running this turn stopped; "
	    "its partial output stays logged and the turn continues from its "
	    "last step (tool calls with logged results are not run again)");
	cJSON_AddStringToObject(b, "message", msg);
	cJSON_AddStringToObject(b, "severity", "recoverable");
	sess_emit(s, "error", b);
	from = cJSON_Duplicate(t, 1);
	turn_start(s, seq, attempt + 1, from, NULL, 0);
	cJSON_Delete(from);
	cancel_due(s);
}

static void
recover_ready(void *arg, ssize_t n)
{
	struct sess *s = arg;
	struct timeval tv = { 0, 0 };

	s->promote = NULL;
	if (n < 0) {
		s->wk->metrics.store_errors++;
		log_warnx("session %s: could not read back the interrupted "
		    "turn's events; re-running it from its checkpoint", s->id);
	}
	s->recover_ev = evtimer_new(s->wk->base, recover_cb, s);
	evtimer_add(s->recover_ev, &tv);
}

/* A new owner continues what meta says: the interrupted turn, or the queue. */
static void
turn_resume(struct sess *s)
{
	cJSON *t;
	uint64_t from;

	t = cJSON_GetObjectItem(sess_meta(s), "turn");
	if (cJSON_IsObject(t)) {
		/* The re-run reads the turn's logged events back (tool
		 * results, the message): make them readable at once. */
		from = (uint64_t)proto_count(t, "inputSeq");
		s->promote = store_preload_async(s->st, from ? from - 1 : 0,
		    recover_ready, s);
	} else if (cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
	    "queue")) || team_pending(s))
		turn_next(s);
}

/*
 * A turn works here unless it only waits for answers (parked): then its
 * session may leave memory, and the answer, or a client, brings it back
 * (turn_resume waits on, and a timeout that passed meanwhile fires).
 */
static int
turn_busy(const struct sess *s)
{
	return s->turn != NULL && !tools_parked(s->turn);
}

/* What waits for someone, for session_state. */
static void
turn_waiting(struct sess *s, cJSON *state)
{
	cJSON_AddItemToObject(state, "pendingApprovals", approve_pending(s,
	    APPROVE_APPROVALS));
	cJSON_AddItemToObject(state, "pendingClientCalls",
	    approve_pending(s, APPROVE_CALLS));
	cJSON_AddItemToObject(state, "pendingElicitations",
	    approve_pending(s, APPROVE_ELICITS));
}

/* The running turn ends cancelled (its done logged). */
static void
turn_cancel(struct sess *s)
{
	if (s->turn != NULL)
		turn_finish(s, 1, 0);
}

const struct sess_agent turn_agent = {
	.resume = turn_resume,
	.flush = turn_flush,
	.drop = turn_drop,
	.durable = tools_durable,
	.waiting = turn_waiting,
	.busy = turn_busy,
	.next = turn_next,
	.cancel = turn_cancel,
};
