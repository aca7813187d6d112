/*
 * Internal agent teams.  meta "agents" is the roster: the first agent is
 * the lead (the default "assistant", or the first agent POST /sessions
 * named), each with its own provider, model, role, goal, domain, usage
 * and history.  meta "team" (present once the session is a team) holds
 * the strategy; meta "round" the exchange under way for one user message:
 * its seq, the hop running, the next speaker once one is chosen, and what
 * the team said so far.  A round's every step is in meta before the next
 * agent starts, so a worker kill or a failover continues it with the
 * right agent.
 *
 * Strategies (the names users of AutoGen, CrewAI and LangGraph know):
 *	lead		one agent answers (the lead, or `to`); it may pass
 *			the message on with the built-in handoff tool
 *			(AutoGen Swarm handoffs, CrewAI hierarchical,
 *			LangGraph supervisor)
 *	round_robin	the agents speak in roster order, each seeing what
 *			the others said, until one calls conclude or the
 *			team turn cap (AutoGen RoundRobinGroupChat with a
 *			termination condition)
 *	sequential	each agent once, in roster order (CrewAI sequential)
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "llm.h"
#include "life.h"
#include "sess.h"
#include "team.h"
#include "wk.h"

#define TRANSCRIPT_ITEM	(16 * 1024)	/* bytes of one agent's words kept */
#define HISTORY_KEY	"history"

static const char *strategies[] = { "lead", "round_robin", "sequential" };

int
team_is(const struct sess *s)
{
	return cJSON_IsObject(cJSON_GetObjectItem(sess_meta(s), "team"));
}

static const char *
str(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
}

/* key's string, or def when o has none (a meta written by hand). */
static const char *
str_or(const cJSON *o, const char *key, const char *def)
{
	return str(o, key) ? str(o, key) : def;
}

cJSON *
team_agent(const struct sess *s, const char *id)
{
	cJSON *a;

	if (id == NULL)
		return NULL;
	cJSON_ArrayForEach(a, cJSON_GetObjectItem(sess_meta(s), "agents")) {
		if ((str(a, "agentId") && strcmp(str(a, "agentId"), id) == 0) ||
		    (str(a, "name") && strcmp(str(a, "name"), id) == 0))
			return a;
	}
	return NULL;
}

const char *
team_lead(const struct sess *s)
{
	const char *id = str(cJSON_GetArrayItem(cJSON_GetObjectItem(
	    sess_meta(s), "agents"), 0), "agentId");

	return id ? id : s->agent_id;
}

static const char *
strategy(const struct sess *s)
{
	const char *st = str(cJSON_GetObjectItem(sess_meta(s), "team"),
	    "strategy");

	return st ? st : "lead";
}

/* The lead's history is meta's own "history" (as before teams). */
cJSON *
team_history(struct sess *s, const char *agent)
{
	cJSON *owner = sess_meta(s), *h;

	if (agent != NULL && strcmp(agent, team_lead(s)) != 0 &&
	    team_agent(s, agent) != NULL)
		owner = team_agent(s, agent);
	h = cJSON_GetObjectItem(owner, HISTORY_KEY);
	if (!cJSON_IsArray(h)) {
		h = cJSON_CreateArray();
		proto_set(owner, HISTORY_KEY, h);
	}
	return h;
}

static void
usage_json_add(cJSON *o, const char *key, double add)
{
	proto_set(o, key, cJSON_CreateNumber(proto_count(o, key) + add));
}

void
team_usage_add(struct sess *s, const char *agent, const struct llm_usage *u)
{
	cJSON *a = team_agent(s, agent), *us;

	if (a == NULL)
		return;
	us = cJSON_GetObjectItem(a, "usage");
	if (!cJSON_IsObject(us)) {
		us = cJSON_CreateObject();
		proto_set(a, "usage", us);
	}
	usage_json_add(us, "inputTokens", (double)u->input_tokens);
	usage_json_add(us, "outputTokens", (double)u->output_tokens);
	usage_json_add(us, "tokens", (double)(u->input_tokens +
	    u->output_tokens));
	usage_json_add(us, "cost", u->cost);
}

/*
 * The built-in tools agent gets (leaving: with one agent fewer, for the
 * roster after a removal): names into out; their count.
 */
static size_t
builtins(struct sess *s, const char *agent, const char **out, int leaving)
{
	int n = cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
	    "agents")) - leaving;
	size_t k = 0;

	if (!team_is(s))
		return 0;
	if (n > 1 && strcmp(strategy(s), "lead") == 0)
		out[k++] = "handoff";
	if (n > 1 && strcmp(strategy(s), "round_robin") == 0)
		out[k++] = "conclude";
	if (agent != NULL && strcmp(agent, team_lead(s)) == 0 &&
	    cJSON_IsString(cJSON_GetObjectItem(sess_meta(s), "objective")))
		out[k++] = "complete_objective";
	return k;
}

/*
 * One roster entry, as team_update (tools 1; 2 while an agent leaves) and
 * session_state (tools 0) give it.
 */
static cJSON *
roster_entry(struct sess *s, const cJSON *a, int tools)
{
	static const char *keys[] = { "agentId", "name", "role", "roles",
	    "provider", "model", "goal", "domain" };
	const char *names[TEAM_TOOLS];
	cJSON *o = cJSON_CreateObject(), *t;
	size_t i, n;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (cJSON_GetObjectItem(a, keys[i]) != NULL)
			cJSON_AddItemToObject(o, keys[i], cJSON_Duplicate(
			    cJSON_GetObjectItem(a, keys[i]), 1));
	if (tools) {
		n = builtins(s, str(a, "agentId"), names, tools - 1);
		t = cJSON_AddArrayToObject(o, "tools");
		for (i = 0; i < n; i++)
			cJSON_AddItemToArray(t, cJSON_CreateString(names[i]));
	}
	return o;
}

cJSON *
team_roster(struct sess *s, const char *running, const char *status,
    int info)
{
	cJSON *r = cJSON_CreateArray(), *o, *a;
	const char *id;

	cJSON_ArrayForEach(a, cJSON_GetObjectItem(sess_meta(s), "agents")) {
		id = str(a, "agentId");
		o = roster_entry(s, a, 0);
		cJSON_AddStringToObject(o, "status", running != NULL &&
		    id != NULL && strcmp(id, running) == 0 ? status : "idle");
		if (id != NULL && strcmp(id, team_lead(s)) == 0)
			cJSON_AddBoolToObject(o, "lead", 1);
		if (info) {
			cJSON_AddItemToObject(o, "usage",
			    cJSON_GetObjectItem(a, "usage") ? cJSON_Duplicate(
			    cJSON_GetObjectItem(a, "usage"), 1) :
			    cJSON_CreateObject());
			cJSON_AddNumberToObject(o, "turns",
			    proto_count(a, "turns"));
		}
		cJSON_AddItemToArray(r, o);
	}
	return r;
}

/*
 * Logs team_update: the roster (but skip, an agent being removed) and the
 * strategy; its seq or 0.
 */
static uint64_t
team_update(struct sess *s, const char *change, const char *agent,
    const cJSON *skip, const char *id)
{
	cJSON *b = cJSON_CreateObject(), *list, *a;

	list = cJSON_AddArrayToObject(b, "agents");
	cJSON_ArrayForEach(a, cJSON_GetObjectItem(sess_meta(s), "agents"))
		if (a != skip)
			cJSON_AddItemToArray(list, roster_entry(s, a,
			    skip != NULL ? 2 : 1));
	cJSON_AddStringToObject(b, "strategy", strategy(s));
	cJSON_AddStringToObject(b, "lead", team_lead(s));
	cJSON_AddNumberToObject(b, "maxTeamTurns", proto_count(
	    cJSON_GetObjectItem(sess_meta(s), "team"), "maxTeamTurns"));
	if (change != NULL)
		cJSON_AddStringToObject(b, "change", change);
	if (agent != NULL)
		cJSON_AddStringToObject(b, "agentId", agent);
	/* The client's message id: a new owner knows it from the log. */
	if (id != NULL)
		cJSON_AddStringToObject(b, "id", id);
	return sess_emit(s, "team_update", b);
}

/* --- the roster's fields --- */

static int
valid_name(const char *n)
{
	size_t i;

	if (*n == '\0' || strlen(n) > TEAM_NAME_MAX)
		return 0;
	for (i = 0; n[i]; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '_' && n[i] != '-')
			return 0;
	return 1;
}

/* Printable text with no control characters, 1..max bytes. */
static int
valid_text(const char *t, size_t max)
{
	size_t i;

	if (*t == '\0' || strlen(t) > max)
		return 0;
	for (i = 0; t[i]; i++)
		if ((unsigned char)t[i] < 0x20 && t[i] != '\n' && t[i] != '\t')
			return 0;
	return 1;
}

/* The names of the configured providers, for an error message. */
static void
provider_names(const struct config *conf, char *buf, size_t len)
{
	const struct cfg_provider *p;
	size_t off = 0;

	buf[0] = '\0';
	TAILQ_FOREACH(p, &conf->providers, entry) {
		int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "",
		    p->name);

		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
	}
}

/*
 * Checks one agent's fields (agent_add's, or an object of POST
 * /sessions' agents; at names where the fields are, for messages): 0 or
 * -1 with msg set.
 */
static int
agent_check(const struct config *conf, const cJSON *o, const char *at,
    char *msg, size_t len)
{
	static const struct {
		const char	*key;
		size_t		 max;
		int		 required;
	} f[] = {
		{ "role", TEAM_ROLE_MAX, 1 },
		{ "name", TEAM_NAME_MAX, 0 },
		{ "provider", 63, 0 },
		{ "model", TEAM_MODEL_MAX, 0 },
		{ "goal", TEAM_GOAL_MAX, 0 },
		{ "domain", TEAM_DOMAIN_MAX, 0 },
	};
	const cJSON *v, *e;
	char names[256];
	size_t i;

	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		v = cJSON_GetObjectItem(o, f[i].key);
		if (v == NULL && !f[i].required)
			continue;
		if (!cJSON_IsString(v) || !valid_text(v->valuestring,
		    f[i].max)) {
			snprintf(msg, len, "field '%s%s' must be a string of "
			    "1-%zu bytes without control characters%s", at,
			    f[i].key, f[i].max, f[i].required ?
			    " (required)" : "");
			return -1;
		}
	}
	if ((v = cJSON_GetObjectItem(o, "name")) != NULL &&
	    !valid_name(v->valuestring)) {
		snprintf(msg, len, "field '%sname' must be 1-%d characters of "
		    "A-Z a-z 0-9 _ -", at, TEAM_NAME_MAX);
		return -1;
	}
	if ((v = cJSON_GetObjectItem(o, "provider")) != NULL &&
	    config_provider(conf, v->valuestring) == NULL) {
		provider_names(conf, names, sizeof(names));
		snprintf(msg, len, "field '%sprovider': no provider '%.63s' is "
		    "configured; use one of: %s", at, v->valuestring, names);
		return -1;
	}
	if ((v = cJSON_GetObjectItem(o, "roles")) != NULL) {
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > TEAM_ROLES_MAX) {
			snprintf(msg, len, "field '%sroles' must be an array of "
			    "at most %d roles", at, TEAM_ROLES_MAX);
			return -1;
		}
		cJSON_ArrayForEach(e, v)
			if (!cJSON_IsString(e) || !valid_text(e->valuestring,
			    TEAM_ROLE_MAX)) {
				snprintf(msg, len, "field '%sroles' must hold "
				    "strings of 1-%d bytes", at, TEAM_ROLE_MAX);
				return -1;
			}
	}
	return 0;
}

/* A name made of role: its letters and digits, lower-cased, bounded. */
static void
name_from(const char *role, char *out, size_t len)
{
	size_t i, k = 0;

	for (i = 0; role[i] && k + 1 < len && k < TEAM_NAME_MAX; i++) {
		unsigned char ch = (unsigned char)role[i];

		if (isalnum(ch) || ch == '_' || ch == '-')
			out[k++] = (char)tolower(ch);
		else if (k > 0 && out[k - 1] != '-')
			out[k++] = '-';
	}
	while (k > 0 && out[k - 1] == '-')
		k--;
	if (k == 0)
		k = (size_t)snprintf(out, len, "agent");
	out[k] = '\0';
}

/*
 * A new agent object from checked fields (o), its id {name}-{8 hex};
 * NULL when its name is taken in agents.
 */
static cJSON *
agent_new(const struct config *conf, const cJSON *agents, const cJSON *o,
    char *msg, size_t len)
{
	static const char *copy[] = { "role", "roles", "model", "goal",
	    "domain" };
	const char *prov = str(o, "provider");
	const struct cfg_provider *p;
	char name[TEAM_NAME_MAX + 1], hex[9], id[TEAM_NAME_MAX + 10];
	const cJSON *e;
	cJSON *a;
	size_t i;

	if (str(o, "name") != NULL)
		snprintf(name, sizeof(name), "%s", str(o, "name"));
	else
		name_from(str(o, "role"), name, sizeof(name));
	cJSON_ArrayForEach(e, agents)
		if (str(e, "name") != NULL && strcmp(str(e, "name"), name) == 0) {
			snprintf(msg, len, "field 'name': the session has an "
			    "agent named '%s' already; choose another name",
			    name);
			return NULL;
		}
	if (prov == NULL)
		prov = conf->default_provider ? conf->default_provider : "";
	p = config_provider(conf, prov);
	util_randhex(hex, 4);
	snprintf(id, sizeof(id), "%s-%s", name, hex);
	a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "agentId", id);
	cJSON_AddStringToObject(a, "name", name);
	cJSON_AddStringToObject(a, "provider", prov);
	cJSON_AddStringToObject(a, "providerType", p ? p->type : "");
	for (i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
		if (cJSON_GetObjectItem(o, copy[i]) != NULL)
			cJSON_AddItemToObject(a, copy[i], cJSON_Duplicate(
			    cJSON_GetObjectItem(o, copy[i]), 1));
	return a;
}

static int
strategy_valid(const char *st)
{
	size_t i;

	for (i = 0; i < sizeof(strategies) / sizeof(strategies[0]); i++)
		if (strcmp(st, strategies[i]) == 0)
			return 1;
	return 0;
}

/* config.strategy and config.maxTeamTurns, where config is; 0 or -1. */
static int
config_check(const struct config *conf, const cJSON *cfg, char *msg,
    size_t len)
{
	const cJSON *v;

	v = cJSON_GetObjectItem(cfg, "strategy");
	if (v != NULL && (!cJSON_IsString(v) ||
	    !strategy_valid(v->valuestring))) {
		snprintf(msg, len, "field 'config.strategy' must be lead, "
		    "round_robin or sequential");
		return -1;
	}
	v = cJSON_GetObjectItem(cfg, "maxTeamTurns");
	if (v != NULL && (!cJSON_IsNumber(v) || v->valuedouble < 1 ||
	    v->valuedouble > conf->max_team_turns ||
	    v->valuedouble != (double)(int)v->valuedouble)) {
		snprintf(msg, len, "field 'config.maxTeamTurns' must be a "
		    "whole number from 1 to %u (max-team-turns in "
		    "parleyd.conf)", conf->max_team_turns);
		return -1;
	}
	return 0;
}

int
team_create_check(const struct config *conf, const cJSON *body, char *msg,
    size_t len)
{
	const cJSON *agents = cJSON_GetObjectItem(body, "agents"), *e, *o;
	char at[32];
	int i = 0, n = 0, j;

	if (config_check(conf, cJSON_GetObjectItem(body, "config"), msg,
	    len) == -1)
		return -1;
	if (agents != NULL && !cJSON_IsArray(agents)) {
		snprintf(msg, len, "field 'agents' must be an array");
		return -1;
	}
	cJSON_ArrayForEach(e, agents) {
		if (cJSON_IsObject(e)) {
			snprintf(at, sizeof(at), "agents[%d].", i);
			if (agent_check(conf, e, at, msg, len) == -1)
				return -1;
			/* Names must differ (ids are made from them). */
			j = 0;
			cJSON_ArrayForEach(o, agents) {
				if (j++ >= i || !cJSON_IsObject(o) ||
				    str(o, "name") == NULL || str(e, "name") ==
				    NULL)
					continue;
				if (strcmp(str(o, "name"), str(e, "name")) == 0) {
					snprintf(msg, len, "field 'agents[%d]."
					    "name': '%s' names an earlier agent "
					    "too", i, str(e, "name"));
					return -1;
				}
			}
			n++;
		}
		i++;
	}
	if ((unsigned)n > conf->max_agents) {
		snprintf(msg, len, "field 'agents': at most %u agents per "
		    "session (max-agents in parleyd.conf)", conf->max_agents);
		return -1;
	}
	return 0;
}

void
team_meta_init(struct sess *s, cJSON *m, const cJSON *body)
{
	const cJSON *agents = cJSON_GetObjectItem(body, "agents"), *e;
	const cJSON *cfg = cJSON_GetObjectItem(body, "config");
	cJSON *list = NULL, *a, *t;
	char msg[256];

	cJSON_ArrayForEach(e, agents) {
		if (!cJSON_IsObject(e))
			continue;	/* external agents: not this module's */
		if (list == NULL)
			list = cJSON_CreateArray();
		if ((a = agent_new(s->wk->conf, list, e, msg,
		    sizeof(msg))) != NULL)
			cJSON_AddItemToArray(list, a);
	}
	if (list != NULL)
		proto_set(m, "agents", list);
	if (list == NULL && cJSON_GetObjectItem(cfg, "strategy") == NULL)
		return;
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "strategy", str(cfg, "strategy") ?
	    str(cfg, "strategy") : "lead");
	cJSON_AddNumberToObject(t, "maxTeamTurns", cJSON_IsNumber(
	    cJSON_GetObjectItem(cfg, "maxTeamTurns")) ? cJSON_GetObjectItem(
	    cfg, "maxTeamTurns")->valuedouble : s->wk->conf->max_team_turns);
	proto_set(m, "team", t);
}

void
team_created(struct sess *s)
{
	if (team_is(s))
		(void)team_update(s, "created", NULL, NULL, NULL);
}

/* Makes the session a team (its first agent_add or set_strategy). */
static void
team_make(struct sess *s)
{
	cJSON *t;

	if (team_is(s))
		return;
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "strategy", "lead");
	cJSON_AddNumberToObject(t, "maxTeamTurns", s->wk->conf->max_team_turns);
	proto_set(sess_meta(s), "team", t);
}

/* --- messages --- */

static int
can_manage(struct sess *s, const struct sess_from *from, const char *type,
    struct sess_result *r)
{
	if (from->role != IPC_ROLE_USER && from->role != IPC_ROLE_ADMIN) {
		sess_result_err(r, "FORBIDDEN", 403, "%s needs the user or "
		    "admin role", type);
		return 0;
	}
	if (s->ended) {
		sess_result_err(r, "SESSION_ENDED", 409, "%s", "the session "
		    "has completed");
		return 0;
	}
	return 1;
}

static void
agent_add(struct sess *s, struct sess_client *c, struct proto_in *in,
    struct sess_result *r)
{
	cJSON *agents = cJSON_GetObjectItem(sess_meta(s), "agents"), *a, *team;
	uint64_t seq;

	if (agent_check(s->wk->conf, in->root, "", r->msg,
	    sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if ((a = agent_new(s->wk->conf, agents, in->root, r->msg,
	    sizeof(r->msg))) == NULL) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if ((unsigned)cJSON_GetArraySize(agents) >= s->wk->conf->max_agents) {
		cJSON_Delete(a);
		sess_result_err(r, "BAD_REQUEST", 409, "the session has %d "
		    "agents, the most it may have (max-agents in "
		    "parleyd.conf); remove one first",
		    cJSON_GetArraySize(agents));
		return;
	}
	team = cJSON_Duplicate(cJSON_GetObjectItem(sess_meta(s), "team"), 1);
	team_make(s);
	cJSON_AddItemToArray(agents, a);
	if ((seq = team_update(s, "added", str(a, "agentId"), NULL,
	    in->id)) == 0) {
		cJSON_DeleteItemFromArray(agents, cJSON_GetArraySize(agents) -
		    1);
		proto_set(sess_meta(s), "team", team ? team :
		    cJSON_CreateNull());
		if (team == NULL)
			cJSON_DeleteItemFromObject(sess_meta(s), "team");
		sess_result_err(r, "OVERLOADED", 503, "%s", "the change could "
		    "not be logged; it was not made, retry");
		return;
	}
	cJSON_Delete(team);
	log_rinfo(c != NULL ? c->reqid : NULL, s->id, "agent %s added (role "
	    "%s, provider %s)", str(a, "agentId"), str(a, "role"),
	    str(a, "provider"));
	sess_meta_save(s);
	r->seq = seq;
	sess_answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
}

/*
 * agent_remove: the lead stays (it answers what is addressed to nobody
 * and holds the session's history), and an agent whose turn runs is
 * removed once it is done.
 */
static void
agent_remove(struct sess *s, struct sess_client *c, struct proto_in *in,
    struct sess_result *r)
{
	cJSON *a;
	const char *id = NULL;
	char aid[SESS_AGENT_MAX + 1];
	uint64_t seq;

	if (proto_str(in->root, "agentId", 1, SESS_AGENT_MAX, &id, r->msg,
	    sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if ((a = team_agent(s, id)) == NULL) {
		sess_result_err(r, "NOT_FOUND", 404, "field 'agentId': the "
		    "session has no agent '%.64s'", id);
		return;
	}
	snprintf(aid, sizeof(aid), "%s", str(a, "agentId"));
	if (strcmp(aid, team_lead(s)) == 0) {
		sess_result_err(r, "BAD_REQUEST", 409, "field 'agentId': %s is "
		    "the session's lead, which cannot be removed", aid);
		return;
	}
	if (s->turn != NULL && strcmp(s->agent_id, aid) == 0) {
		sess_result_err(r, "BAD_REQUEST", 409, "field 'agentId': %s is "
		    "answering; cancel its turn or wait for its done", aid);
		return;
	}
	if ((seq = team_update(s, "removed", aid, a, in->id)) == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the change could "
		    "not be logged; it was not made, retry");
		return;
	}
	cJSON_Delete(cJSON_DetachItemViaPointer(cJSON_GetObjectItem(
	    sess_meta(s), "agents"), a));
	log_rinfo(c != NULL ? c->reqid : NULL, s->id, "agent %s removed", aid);
	sess_meta_save(s);
	r->seq = seq;
	sess_answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
}

/* set_strategy: strategy?, maxTeamTurns?; logged as team_update. */
static void
set_strategy(struct sess *s, struct sess_client *c, struct proto_in *in,
    struct sess_result *r)
{
	cJSON *old, *t, *v;
	uint64_t seq;

	if (config_check(s->wk->conf, in->root, r->msg, sizeof(r->msg)) ==
	    -1) {
		/* The same checks as POST /sessions' config, named as here. */
		if (strncmp(r->msg, "field 'config.", 14) == 0)
			memmove(r->msg + 7, r->msg + 14, strlen(r->msg + 14) +
			    1);
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if (cJSON_GetObjectItem(in->root, "strategy") == NULL &&
	    cJSON_GetObjectItem(in->root, "maxTeamTurns") == NULL) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "set_strategy "
		    "needs 'strategy' or 'maxTeamTurns'");
		return;
	}
	old = cJSON_Duplicate(cJSON_GetObjectItem(sess_meta(s), "team"), 1);
	team_make(s);
	t = cJSON_GetObjectItem(sess_meta(s), "team");
	if ((v = cJSON_GetObjectItem(in->root, "strategy")) != NULL)
		proto_set(t, "strategy", cJSON_CreateString(v->valuestring));
	if ((v = cJSON_GetObjectItem(in->root, "maxTeamTurns")) != NULL)
		proto_set(t, "maxTeamTurns",
		    cJSON_CreateNumber(v->valuedouble));
	if ((seq = team_update(s, "strategy", NULL, NULL, in->id)) == 0) {
		if (old != NULL)
			proto_set(sess_meta(s), "team", old);
		else
			cJSON_DeleteItemFromObject(sess_meta(s), "team");
		sess_result_err(r, "OVERLOADED", 503, "%s", "the change could "
		    "not be logged; it was not made, retry");
		return;
	}
	cJSON_Delete(old);
	sess_meta_save(s);
	r->seq = seq;
	sess_answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
}

int
team_input(struct sess *s, struct sess_client *c, const struct sess_from *from,
    struct proto_in *in, struct sess_result *r)
{
	if (strcmp(in->type, "agent_add") != 0 &&
	    strcmp(in->type, "agent_remove") != 0 &&
	    strcmp(in->type, "set_strategy") != 0)
		return 0;
	if (!can_manage(s, from, in->type, r))
		return 1;
	if (sess_id_repeat(s, c, in->id, r))
		return 1;
	if (strcmp(in->type, "agent_add") == 0)
		agent_add(s, c, in, r);
	else if (strcmp(in->type, "agent_remove") == 0)
		agent_remove(s, c, in, r);
	else
		set_strategy(s, c, in, r);
	if (r->code == NULL && in->id != NULL && r->seq != 0)
		sess_id_add(s, in->id, r->seq);
	return 1;
}

/* --- rounds --- */

static void	round_end(struct sess *, const char *, unsigned, const char *);

static unsigned
team_cap(const struct sess *s)
{
	double n = proto_count(cJSON_GetObjectItem(sess_meta(s), "team"),
	    "maxTeamTurns");

	if (n < 1 || n > s->wk->conf->max_team_turns)
		return s->wk->conf->max_team_turns;
	return (unsigned)n;
}

/* Position of agent in the roster, or -1. */
static int
roster_pos(const struct sess *s, const char *agent)
{
	const cJSON *a;
	int i = 0;

	cJSON_ArrayForEach(a, cJSON_GetObjectItem(sess_meta(s), "agents")) {
		if (str(a, "agentId") && strcmp(str(a, "agentId"), agent) == 0)
			return i;
		i++;
	}
	return -1;
}

void
team_first(struct sess *s, uint64_t seq, const char *to, char *agent,
    size_t len)
{
	const cJSON *a = to != NULL ? team_agent(s, to) : NULL;
	cJSON *r;

	/* A `to` checked at chat time whose agent was removed since:
	 * the lead answers. */
	snprintf(agent, len, "%s", a != NULL ? str(a, "agentId") :
	    team_lead(s));
	if (!team_is(s) || cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
	    "agents")) < 2)
		return;
	r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "inputSeq", (double)seq);
	cJSON_AddNumberToObject(r, "hop", 0);
	cJSON_AddStringToObject(r, "agentId", agent);
	cJSON_AddArrayToObject(r, "transcript");
	proto_set(sess_meta(s), "round", r);
}

int
team_in_round(const struct sess *s, uint64_t seq)
{
	const cJSON *r = cJSON_GetObjectItem(sess_meta(s), "round");

	return cJSON_IsObject(r) && (uint64_t)proto_count(r, "inputSeq") == seq;
}

int
team_pending(const struct sess *s)
{
	return cJSON_IsObject(cJSON_GetObjectItem(cJSON_GetObjectItem(
	    sess_meta(s), "round"), "next"));
}

int
team_next(struct sess *s, uint64_t *seq, char *agent, size_t len,
    unsigned *hop)
{
	cJSON *r = cJSON_GetObjectItem(sess_meta(s), "round");
	cJSON *next = cJSON_GetObjectItem(r, "next");
	const char *id = str(next, "agentId");

	if (!cJSON_IsObject(next))
		return 0;
	*seq = (uint64_t)proto_count(r, "inputSeq");
	*hop = (unsigned)proto_count(next, "hop");
	if (id == NULL || team_agent(s, id) == NULL || *seq == 0) {
		/* Its agent was removed meanwhile: the round ends. */
		round_end(s, id ? id : "", *hop > 0 ? *hop - 1 : 0,
		    "agent_removed");
		return 0;
	}
	snprintf(agent, len, "%s", id);
	proto_set(r, "hop", cJSON_CreateNumber(*hop));
	proto_set(r, "agentId", cJSON_CreateString(id));
	cJSON_DeleteItemFromObject(r, "next");
	return 1;
}

char *
team_compose(struct sess *s, const char *message, uint64_t seq, unsigned hop)
{
	cJSON *r = cJSON_GetObjectItem(sess_meta(s), "round"), *e;
	char *out = NULL, *line;
	size_t len = 0, cap = 0;

	if (message == NULL)
		message = "";
	if (hop == 0 || r == NULL || (uint64_t)proto_count(r, "inputSeq") !=
	    seq)
		return strdup(message);
	util_append(&out, &len, &cap, message, strlen(message));
	util_append(&out, &len, &cap, "\n\n(What your team said about it "
	    "so far:)", 38);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(r, "transcript")) {
		const char *note = str(e, "handoff");

		if (asprintf(&line, "\n\n[%s, %s]: %s%s%s%s", str_or(e, "name",
		    "?"), str_or(e, "role", "agent"), str_or(e, "content", ""),
		    note ? "\n(handed off to you: " : "", note ? note : "",
		    note ? ")" : "") == -1)
			continue;
		util_append(&out, &len, &cap, line, strlen(line));
		free(line);
	}
	return out ? out : strdup(message);
}

char *
team_prompt(struct sess *s, const char *agent)
{
	const cJSON *a = team_agent(s, agent), *e;
	const char *st = strategy(s);
	char *out = NULL, *line;
	size_t len = 0, cap = 0;
	int first = 1;

	if (!team_is(s) || a == NULL)
		return NULL;
	if (asprintf(&line, "You are %s, an AI agent with the role %s",
	    str_or(a, "name", "?"), str_or(a, "role", "assistant")) ==
	    -1)
		return NULL;
	util_append(&out, &len, &cap, line, strlen(line));
	free(line);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(a, "roles")) {
		util_append(&out, &len, &cap, first ? " (also " : ", ",
		    first ? 7 : 2);
		util_append(&out, &len, &cap, e->valuestring,
		    strlen(e->valuestring));
		first = 0;
	}
	util_append(&out, &len, &cap, first ? "." : ").", first ? 1 : 2);
	if (str(a, "goal") != NULL && asprintf(&line, " Your goal: %s",
	    str(a, "goal")) != -1) {
		util_append(&out, &len, &cap, line, strlen(line));
		free(line);
	}
	if (str(a, "domain") != NULL && asprintf(&line, " Your domain: %s.",
	    str(a, "domain")) != -1) {
		util_append(&out, &len, &cap, line, strlen(line));
		free(line);
	}
	util_append(&out, &len, &cap, "\nYour team:", 11);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "agents"))
		if (asprintf(&line, "\n- %s (agentId %s): %s%s", str_or(e,
		    "name", "?"), str_or(e, "agentId", "?"), str_or(e, "role",
		    "assistant"), e == a ? " (you)" : "") != -1) {
			util_append(&out, &len, &cap, line, strlen(line));
			free(line);
		}
	line = strcmp(st, "round_robin") == 0 ? "\nThe agents answer the "
	    "user's message in turn, each seeing what the others said. When "
	    "the team's answer is complete, call the conclude tool." :
	    strcmp(st, "sequential") == 0 ? "\nThe agents answer the user's "
	    "message one after another, each building on what the others "
	    "said." : "\nAnswer the user's message, or pass it to the "
	    "teammate best placed to answer it with the handoff tool.";
	util_append(&out, &len, &cap, line, strlen(line));
	if (strcmp(agent, team_lead(s)) == 0 && cJSON_IsString(
	    cJSON_GetObjectItem(sess_meta(s), "objective")) &&
	    asprintf(&line, "\nThe session's objective: %s\nWhen it is met, "
	    "call complete_objective with a summary.", str(sess_meta(s),
	    "objective")) != -1) {
		util_append(&out, &len, &cap, line, strlen(line));
		free(line);
	}
	return out;
}

size_t
team_tool_defs(struct sess *s, const char *agent, struct llm_tool_def *defs,
    size_t room)
{
	static const struct llm_tool_def all[] = {
		{ "handoff", "Pass the user's message to a teammate, who "
		    "answers it after you.",
		    "{\"type\":\"object\",\"properties\":{\"agentId\":{\"type\":"
		    "\"string\",\"description\":\"the teammate's agentId or "
		    "name\"},\"reason\":{\"type\":\"string\"}},\"required\":"
		    "[\"agentId\"]}" },
		{ "conclude", "End the team's exchange on this message after "
		    "your reply.",
		    "{\"type\":\"object\",\"properties\":{\"summary\":{\"type\":"
		    "\"string\"}}}" },
		{ "complete_objective", "Declare the session's objective met; "
		    "the session completes with your summary.",
		    "{\"type\":\"object\",\"properties\":{\"summary\":{\"type\":"
		    "\"string\"}},\"required\":[\"summary\"]}" },
	};
	const char *names[TEAM_TOOLS];
	size_t n = builtins(s, agent, names, 0), i, j, k = 0;

	for (i = 0; i < n; i++)
		for (j = 0; j < sizeof(all) / sizeof(all[0]); j++)
			if (strcmp(names[i], all[j].name) == 0 && k < room)
				defs[k++] = all[j];
	return k;
}

int
team_builtin(struct sess *s, const char *agent, const char *name)
{
	const char *names[TEAM_TOOLS];
	size_t n = builtins(s, agent, names, 0), i;

	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return 1;
	return 0;
}

char *
team_tool(struct sess *s, const char *agent, const char *name,
    const char *args, int *is_error)
{
	cJSON *o = cJSON_Parse(args && *args ? args : "{}");
	const cJSON *to;
	char *out = NULL;

	*is_error = 0;
	if (strcmp(name, "handoff") == 0) {
		to = team_agent(s, str(o, "agentId"));
		if (to == NULL) {
			*is_error = 1;
			if (asprintf(&out, "no teammate '%.64s'; name one of "
			    "the team's agentIds", str(o, "agentId") ?
			    str(o, "agentId") : "") == -1)
				out = NULL;
		} else if (strcmp(str(to, "agentId"), agent) == 0) {
			*is_error = 1;
			out = strdup("you cannot hand off to yourself");
		} else if (asprintf(&out, "handed off to %s (%s): it answers "
		    "after you; end your turn with a short note",
		    str(to, "name"), str(to, "agentId")) == -1)
			out = NULL;
	} else if (strcmp(name, "conclude") == 0)
		out = strdup("the team's exchange ends after your reply");
	else if (strcmp(name, "complete_objective") == 0) {
		if (str(o, "summary") == NULL) {
			*is_error = 1;
			out = strdup("complete_objective needs a 'summary'");
		} else
			out = strdup("the session completes with your summary "
			    "after this reply");
	}
	cJSON_Delete(o);
	return out;
}

/*
 * The built-in call of this name the turn made and was answered without
 * error (its tool step): its arguments, parsed (the caller frees), or
 * NULL.  The last one counts.
 */
static cJSON *
intent(const cJSON *steps, const char *name)
{
	const cJSON *e, *c, *found = NULL;
	const char *id;

	cJSON_ArrayForEach(e, steps)
		if (str(e, "role") && strcmp(str(e, "role"), "tool") == 0 &&
		    str(e, "tool") && strcmp(str(e, "tool"), name) == 0 &&
		    !cJSON_IsTrue(cJSON_GetObjectItem(e, "isError")))
			found = e;
	if (found == NULL || (id = str(found, "toolCallId")) == NULL)
		return NULL;
	cJSON_ArrayForEach(e, steps)
		cJSON_ArrayForEach(c, cJSON_GetObjectItem(e, "calls"))
			if (str(c, "id") && strcmp(str(c, "id"), id) == 0)
				return cJSON_Parse(str(c, "args") &&
				    *str(c, "args") ? str(c, "args") : "{}");
	return NULL;
}

/* The lead declared the objective met: the session ends (life.c). */
static void
team_complete(struct sess *s, const char *agent, const char *summary)
{
	if (life_complete(s, "objective", summary) == -1)
		log_warnx("session %s: agent %s met the objective, but the "
		    "end could not be logged", s->id, agent);
}

/* The round for seq ends: team_done says why, to whoever waits on it. */
static void
round_end(struct sess *s, const char *agent, unsigned hop, const char *why)
{
	cJSON *r = cJSON_GetObjectItem(sess_meta(s), "round"), *b;
	char mid[32];

	b = cJSON_CreateObject();
	cJSON_AddNumberToObject(b, "inputSeq", proto_count(r, "inputSeq"));
	/* The first turn's: what a client of that turn waits on ends. */
	snprintf(mid, sizeof(mid), "m-%llu", (unsigned long long)proto_count(r,
	    "inputSeq"));
	cJSON_AddStringToObject(b, "messageId", mid);
	cJSON_AddStringToObject(b, "agentId", agent);
	cJSON_AddNumberToObject(b, "turns", hop + 1);
	cJSON_AddStringToObject(b, "reason", why);
	cJSON_AddStringToObject(b, "strategy", strategy(s));
	sess_emit(s, "team_done", b);
	cJSON_DeleteItemFromObject(sess_meta(s), "round");
}

/* Who speaks after agent in roster order; NULL past the end (no wrap). */
static const char *
after(const struct sess *s, const char *agent, int wrap)
{
	const cJSON *agents = cJSON_GetObjectItem(sess_meta(s), "agents");
	int n = cJSON_GetArraySize(agents), i = roster_pos(s, agent);

	if (n < 2 || i < 0)
		return NULL;
	if (i + 1 >= n && !wrap)
		return NULL;
	return str(cJSON_GetArrayItem(agents, (i + 1) % n), "agentId");
}

static void
round_next(struct sess *s, const char *agent, unsigned hop)
{
	cJSON *next = cJSON_CreateObject();

	cJSON_AddStringToObject(next, "agentId", agent);
	cJSON_AddNumberToObject(next, "hop", hop);
	proto_set(cJSON_GetObjectItem(sess_meta(s), "round"), "next", next);
}

void
team_turn_end(struct sess *s, const char *agent, uint64_t seq, unsigned hop,
    const char *type, const cJSON *body, const cJSON *steps,
    const char *reply)
{
	cJSON *r = cJSON_GetObjectItem(sess_meta(s), "round"), *a, *e, *it, *b;
	const char *st = strategy(s), *next = NULL;
	char *said;

	if ((a = team_agent(s, agent)) != NULL && reply != NULL)
		proto_set(a, "turns", cJSON_CreateNumber(
		    proto_count(a, "turns") + 1));
	/* The lead declares the objective met: the session completes. */
	if (reply != NULL && team_is(s) && strcmp(agent, team_lead(s)) == 0 &&
	    (it = intent(steps, "complete_objective")) != NULL) {
		team_complete(s, agent, str(it, "summary") ? str(it,
		    "summary") : reply);
		cJSON_Delete(it);
	}
	if (!cJSON_IsObject(r) || (uint64_t)proto_count(r, "inputSeq") != seq)
		return;
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "agentId", agent);
	cJSON_AddStringToObject(e, "name", a ? str_or(a, "name", agent) :
	    agent);
	cJSON_AddStringToObject(e, "role", a && str(a, "role") ?
	    str(a, "role") : "assistant");
	/* Kept whole characters only, so the log stays valid UTF-8. */
	said = reply == NULL ? strdup("") : strlen(reply) <= TRANSCRIPT_ITEM ?
	    strdup(reply) : strndup(reply, utf8_whole(reply, TRANSCRIPT_ITEM));
	cJSON_AddStringToObject(e, "content", said ? said : "");
	free(said);
	cJSON_AddItemToArray(cJSON_GetObjectItem(r, "transcript"), e);
	if (s->ended) {
		round_end(s, agent, hop, "objective");
		return;
	}
	if (reply == NULL || strcmp(type, "done") != 0) {
		round_end(s, agent, hop, "error");
		return;
	}
	if (cJSON_IsTrue(cJSON_GetObjectItem(body, "cancelled"))) {
		round_end(s, agent, hop, "cancelled");
		return;
	}
	if (strcmp(st, "lead") == 0) {
		if ((it = intent(steps, "handoff")) == NULL) {
			round_end(s, agent, hop, "answered");
			return;
		}
		a = team_agent(s, str(it, "agentId"));
		if (a == NULL || strcmp(str(a, "agentId"), agent) == 0 ||
		    hop + 1 >= team_cap(s)) {
			cJSON_Delete(it);
			round_end(s, agent, hop, a == NULL ? "answered" :
			    "max_team_turns");
			return;
		}
		next = str(a, "agentId");
		proto_set(e, "handoff", cJSON_CreateString(str(it, "reason") ?
		    str(it, "reason") : "no reason given"));
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "from", agent);
		cJSON_AddStringToObject(b, "to", next);
		cJSON_AddStringToObject(b, "reason", str(it, "reason") ?
		    str(it, "reason") : "");
		cJSON_AddNumberToObject(b, "inputSeq", (double)seq);
		sess_emit(s, "agent_handoff", b);
		round_next(s, next, hop + 1);
		cJSON_Delete(it);
		return;
	}
	if (strcmp(st, "round_robin") == 0 &&
	    (it = intent(steps, "conclude")) != NULL) {
		cJSON_Delete(it);
		round_end(s, agent, hop, "concluded");
		return;
	}
	next = after(s, agent, strcmp(st, "round_robin") == 0);
	if (next == NULL) {
		round_end(s, agent, hop, "answered");
		return;
	}
	if (hop + 1 >= team_cap(s)) {
		round_end(s, agent, hop, "max_team_turns");
		return;
	}
	round_next(s, next, hop + 1);
}

/*
 * A follower's roster and strategy follow the owner's team_update (what
 * session_state and GET show there); the owner's whole meta, histories
 * and all, is read again if this process takes the session over.
 */
static void
team_follow(struct sess *s, const char *type, const cJSON *ev, uint64_t ts)
{
	const cJSON *agents = cJSON_GetObjectItem(ev, "agents"), *a;
	cJSON *list, *t;

	(void)ts;
	if (strcmp(type, "team_update") != 0 || !cJSON_IsArray(agents))
		return;
	list = cJSON_CreateArray();
	cJSON_ArrayForEach(a, agents)
		cJSON_AddItemToArray(list, cJSON_Duplicate(a, 1));
	proto_set(sess_meta(s), "agents", list);
	team_make(s);
	t = cJSON_GetObjectItem(sess_meta(s), "team");
	if (str(ev, "strategy") != NULL)
		proto_set(t, "strategy", cJSON_CreateString(str(ev,
		    "strategy")));
	if (cJSON_IsNumber(cJSON_GetObjectItem(ev, "maxTeamTurns")))
		proto_set(t, "maxTeamTurns", cJSON_CreateNumber(
		    cJSON_GetObjectItem(ev, "maxTeamTurns")->valuedouble));
}

/* --- the session's part (sess.h) --- */

/*
 * session_state names a team's whole roster and its strategy; GET
 * /sessions/{id} every agent's usage and turns, a single agent's too.
 */
static void
part_state(struct sess *s, cJSON *state, int info)
{
	const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(state,
	    "agents"), 0);
	char st[32];

	if (!info && !team_is(s))
		return;
	snprintf(st, sizeof(st), "%s", str(a, "status") ? str(a, "status") :
	    "idle");
	cJSON_ReplaceItemInObject(state, "agents", team_roster(s, s->turn ?
	    s->agent_id : NULL, st, info));
	if (team_is(s))
		cJSON_AddItemToObject(state, "strategy", cJSON_Duplicate(
		    cJSON_GetObjectItem(cJSON_GetObjectItem(sess_meta(s),
		    "team"), "strategy"), 1));
}

const struct sess_part team_part = {
	.meta_new = team_meta_init,
	.follow = team_follow,
	.state = part_state,
};
