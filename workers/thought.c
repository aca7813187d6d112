/*
 * Thoughts.  An agent's reasoning step is logged as a "thought" event
 * ({agentId, thought}) whose thought links to earlier ones by
 * inResponseTo and by references that name thoughts ("th_..."): a DAG,
 * since a link may only name a thought already known and a new thought
 * cannot name itself.  The known thoughts are meta's "thoughts" array
 * (in seq order, at most THOUGHT_MAX), saved after each one; a new owner
 * adds those its log's tail holds past the checkpoint (thought_adopt).
 * Delivery asks thought_view what each recipient may see of one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/util.h"
#include "deliver.h"
#include "evt.h"
#include "sess.h"
#include "thought.h"
#include "wk.h"

#define RATE_AGENTS	32	/* agents whose window a session keeps */

/* One agent's accepted thoughts in the last window: a ring of times. */
struct thought_rate {
	char		 agent[SESS_AGENT_MAX + 1];
	uint64_t	*at;		/* ms, monotonic; oldest at head */
	unsigned	 cap;		/* thought-rate when made */
	unsigned	 n;
	unsigned	 head;
	uint64_t	 used;		/* last thought, for eviction */
};

struct thought_state {
	struct thought_rate	 rates[RATE_AGENTS];
	int			 mode_known;	/* mode read from meta */
	enum thought_vis	 mode;
};

/* What the delivery view keeps with one thought event (evt->view). */
struct thought_evt {
	char		 author[SESS_AGENT_MAX + 1];
	char		 category[16];
	int		 shared;
	int		 bad;		/* not a thought event: hidden */
	struct evt	*alt[2];	/* REDUCED, HIDDEN forms, made once */
};

static const char *categories[] = { "observation", "analysis",
    "hypothesis", "plan", "critique", "synthesis", "question" };

int
thought_vis_parse(const char *name, enum thought_vis *out)
{
	if (strcmp(name, "all") == 0)
		*out = THOUGHT_VIS_ALL;
	else if (strcmp(name, "selective") == 0)
		*out = THOUGHT_VIS_SELECTIVE;
	else if (strcmp(name, "summary") == 0)
		*out = THOUGHT_VIS_SUMMARY;
	else
		return -1;
	return 0;
}

static struct thought_state *
state_of(struct sess *s)
{
	if (s->thoughts == NULL)
		s->thoughts = calloc(1, sizeof(*s->thoughts));
	return s->thoughts;
}

/*
 * Read once per session and kept: POST /sessions sets the mode when it
 * creates the session and nothing changes it, and delivery asks for it
 * once per recipient of each thought.
 */
enum thought_vis
thought_mode(struct sess *s)
{
	struct thought_state *st = state_of(s);
	const char *v;
	enum thought_vis m = THOUGHT_VIS_ALL;

	if (st != NULL && st->mode_known)
		return st->mode;
	v = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(
	    sess_meta(s), "config"), "thoughtVisibility"));
	if (v != NULL)
		(void)thought_vis_parse(v, &m);
	if (st != NULL) {
		st->mode = m;
		st->mode_known = 1;
	}
	return m;
}

int
thought_sees(enum thought_vis mode, int role, const char *agent,
    const char *author, const char *category, int shared)
{
	/* An admin audits everything; an agent always sees its own. */
	if (role == IPC_ROLE_ADMIN || (role == IPC_ROLE_AGENT &&
	    agent != NULL && agent[0] != '\0' && strcmp(agent, author) == 0))
		return THOUGHT_FULL;
	if (mode == THOUGHT_VIS_ALL)
		return THOUGHT_FULL;
	if (!shared)
		return THOUGHT_HIDDEN;
	if (mode == THOUGHT_VIS_SELECTIVE ||
	    strcmp(category, "synthesis") == 0)
		return THOUGHT_FULL;
	return THOUGHT_REDUCED;
}

/* --- validation --- */

/* A thoughtId: "th_" then 1 to 61 letters, digits, '_' or '-'. */
static int
id_valid(const char *id)
{
	size_t n = strlen(id);

	return n > 3 && n <= THOUGHT_ID_MAX && strncmp(id, "th_", 3) == 0 &&
	    strspn(id + 3, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
	    "WXYZ0123456789_-") == n - 3;
}

/* Whether a reference names a thought (else a path, a URL, ...). */
static int
ref_is_thought(const char *ref)
{
	return strncmp(ref, "th_", 3) == 0;
}

int
thought_check(const cJSON *t, char *msg, size_t len)
{
	static const char *fields[] = { "thoughtId", "content", "category",
	    "confidence", "references", "inResponseTo", "actionable",
	    "shared" };
	const cJSON *f, *r;
	size_t i, n;
	int ok;

	if (!cJSON_IsObject(t)) {
		snprintf(msg, len, "field 'thought' must be an object: "
		    "{content, category, confidence, references, ...}");
		return -1;
	}
	cJSON_ArrayForEach(f, t) {
		for (ok = 0, i = 0; i < sizeof(fields) / sizeof(*fields); i++)
			if (strcmp(f->string, fields[i]) == 0)
				ok = 1;
		if (!ok) {
			snprintf(msg, len, "field 'thought.%.64s' is not a "
			    "thought field; see parley-protocol(7)", f->string);
			return -1;
		}
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "thoughtId");
	if (f != NULL && (!cJSON_IsString(f) || !id_valid(f->valuestring))) {
		snprintf(msg, len, "field 'thought.thoughtId' must be \"th_\" "
		    "then 1 to 61 letters, digits, '_' or '-' (or leave it "
		    "out: the server assigns one)");
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "content");
	if (!cJSON_IsString(f) || f->valuestring[0] == '\0' ||
	    strlen(f->valuestring) > THOUGHT_CONTENT_MAX) {
		snprintf(msg, len, "field 'thought.content' must be a string "
		    "of 1 to %d bytes", THOUGHT_CONTENT_MAX);
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "category");
	for (ok = 0, i = 0; cJSON_IsString(f) &&
	    i < sizeof(categories) / sizeof(*categories); i++)
		if (strcmp(f->valuestring, categories[i]) == 0)
			ok = 1;
	if (!ok) {
		snprintf(msg, len, "field 'thought.category' must be "
		    "observation, analysis, hypothesis, plan, critique, "
		    "synthesis or question");
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "confidence");
	if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) ||
	    f->valuedouble < 0 || f->valuedouble > 1) {
		snprintf(msg, len, "field 'thought.confidence' must be a "
		    "number from 0 to 1");
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "references");
	if (f != NULL) {
		if (!cJSON_IsArray(f) ||
		    (n = (size_t)cJSON_GetArraySize(f)) > THOUGHT_REFS_MAX) {
			snprintf(msg, len, "field 'thought.references' must be "
			    "an array of at most %d strings", THOUGHT_REFS_MAX);
			return -1;
		}
		cJSON_ArrayForEach(r, f)
			if (!cJSON_IsString(r) || r->valuestring[0] == '\0' ||
			    strlen(r->valuestring) > THOUGHT_REF_MAX) {
				snprintf(msg, len, "field 'thought.references' "
				    "holds strings of 1 to %d bytes (file "
				    "paths, URLs or thoughtIds)",
				    THOUGHT_REF_MAX);
				return -1;
			}
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "inResponseTo");
	if (f != NULL && !cJSON_IsNull(f) && (!cJSON_IsString(f) ||
	    !id_valid(f->valuestring))) {
		snprintf(msg, len, "field 'thought.inResponseTo' must be the "
		    "thoughtId of an earlier thought");
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "actionable");
	if (f != NULL && !cJSON_IsBool(f)) {
		snprintf(msg, len, "field 'thought.actionable' must be true or "
		    "false");
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(t, "shared");
	if (f != NULL && !cJSON_IsBool(f)) {
		snprintf(msg, len, "field 'thought.shared' must be true or "
		    "false");
		return -1;
	}
	return 0;
}

/* The known thought id, or NULL. */
static cJSON *
node_find(const cJSON *nodes, const char *id)
{
	cJSON *n;

	cJSON_ArrayForEach(n, nodes)
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(n,
		    "thoughtId")) ? cJSON_GetStringValue(cJSON_GetObjectItem(n,
		    "thoughtId")) : "", id) == 0)
			return n;
	return NULL;
}

/* One link of a thought to target (field names it): 0, or -1 with msg. */
static int
link_check(const cJSON *nodes, const char *self, const char *field,
    const char *target, char *msg, size_t len)
{
	if (self != NULL && strcmp(self, target) == 0) {
		snprintf(msg, len, "field 'thought.%s': thought '%.64s' would "
		    "answer itself, a cycle; thoughts form a DAG", field,
		    target);
		return -1;
	}
	if (node_find(nodes, target) == NULL) {
		snprintf(msg, len, "field 'thought.%s' names '%.64s', no "
		    "thought of this session; name an earlier thought's "
		    "thoughtId", field, target);
		return -1;
	}
	return 0;
}

int
thought_dag_check(const cJSON *nodes, const cJSON *t, char *msg, size_t len)
{
	const char *self = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(t, "thoughtId"));
	const char *up = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(t, "inResponseTo"));
	const cJSON *r;

	if (self != NULL && node_find(nodes, self) != NULL) {
		snprintf(msg, len, "field 'thought.thoughtId': '%.64s' already "
		    "exists in this session; use a new id or leave it out",
		    self);
		return -1;
	}
	/*
	 * Every link names a thought already known and the new one is not
	 * known yet, so it cannot close a cycle through others: only a
	 * link to itself could.
	 */
	if (up != NULL && link_check(nodes, self, "inResponseTo", up, msg,
	    len) == -1)
		return -1;
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(t,
	    "references"))
		if (cJSON_IsString(r) && ref_is_thought(r->valuestring) &&
		    link_check(nodes, self, "references", r->valuestring, msg,
		    len) == -1)
			return -1;
	return 0;
}

/* DFS state of thought_acyclic. */
struct walk {
	const cJSON	**node;
	unsigned char	*color;		/* 0 new, 1 on the path, 2 done */
	int		 n;
};

/* The index of id among w's nodes, or -1. */
static int
walk_find(const struct walk *w, const char *id)
{
	int i;

	for (i = 0; i < w->n; i++)
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(w->node[i],
		    "thoughtId")) ? cJSON_GetStringValue(cJSON_GetObjectItem(
		    w->node[i], "thoughtId")) : "", id) == 0)
			return i;
	return -1;
}

/* 1 when a cycle runs through node i's descendants (*on: a node on it). */
static int
walk_from(struct walk *w, int i, int *on)
{
	const cJSON *r, *up;
	int j;

	w->color[i] = 1;
	up = cJSON_GetObjectItem(w->node[i], "inResponseTo");
	if (cJSON_IsString(up) && (j = walk_find(w, up->valuestring)) >= 0 &&
	    (w->color[j] == 1 || (w->color[j] == 0 && walk_from(w, j, on)))) {
		*on = j;
		return 1;
	}
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(w->node[i], "references"))
		if (cJSON_IsString(r) && ref_is_thought(r->valuestring) &&
		    (j = walk_find(w, r->valuestring)) >= 0 &&
		    (w->color[j] == 1 || (w->color[j] == 0 &&
		    walk_from(w, j, on)))) {
			*on = j;
			return 1;
		}
	w->color[i] = 2;
	return 0;
}

int
thought_acyclic(const cJSON *nodes, char *msg, size_t len)
{
	struct walk w;
	const cJSON *n;
	int i, on = -1, rc = 0;

	w.n = cJSON_GetArraySize(nodes);
	if (w.n > 4 * THOUGHT_MAX) {
		snprintf(msg, len, "more than %d thoughts", 4 * THOUGHT_MAX);
		return -1;
	}
	w.node = calloc((size_t)w.n + 1, sizeof(*w.node));
	w.color = calloc((size_t)w.n + 1, 1);
	if (w.node == NULL || w.color == NULL) {
		free(w.node);
		free(w.color);
		snprintf(msg, len, "out of memory");
		return -1;
	}
	i = 0;
	cJSON_ArrayForEach(n, nodes)
		w.node[i++] = n;
	for (i = 0; i < w.n && rc == 0; i++)
		if (w.color[i] == 0 && walk_from(&w, i, &on)) {
			snprintf(msg, len, "thought '%.64s' is on a cycle",
			    cJSON_GetStringValue(cJSON_GetObjectItem(
			    w.node[on], "thoughtId")) ?
			    cJSON_GetStringValue(cJSON_GetObjectItem(
			    w.node[on], "thoughtId")) : "?");
			rc = -1;
		}
	free(w.node);
	free(w.color);
	return rc;
}

/* --- the rate limit --- */

static struct thought_rate *
rate_of(struct sess *s, const char *agent)
{
	struct thought_state *st;
	struct thought_rate *r, *old = NULL;
	int i;

	if ((st = state_of(s)) == NULL)
		return NULL;
	for (i = 0; i < RATE_AGENTS; i++) {
		r = &st->rates[i];
		if (strcmp(r->agent, agent) == 0)
			return r;
		if (old == NULL || r->used < old->used)
			old = r;
	}
	/* A new agent takes the slot used longest ago. */
	free(old->at);
	memset(old, 0, sizeof(*old));
	snprintf(old->agent, sizeof(old->agent), "%s", agent);
	return old;
}

/* Thoughts r accepted in the window up to now, forgetting older ones. */
static unsigned
rate_count(struct thought_rate *r, unsigned limit, uint64_t now)
{
	if (r->cap != limit) {
		/* Made under another thought-rate (a reload): start over. */
		free(r->at);
		r->n = r->head = 0;
		if ((r->at = calloc(limit, sizeof(*r->at))) == NULL) {
			r->cap = 0;
			return limit;	/* refused until memory returns */
		}
		r->cap = limit;
	}
	while (r->n > 0 && r->at[r->head] + THOUGHT_WINDOW_MS <= now) {
		r->head = (r->head + 1) % r->cap;
		r->n--;
	}
	return r->n;
}

static void
rate_take(struct thought_rate *r, uint64_t now)
{
	r->at[(r->head + r->n) % r->cap] = now;
	r->n++;
	r->used = now;
}

/* Tells agent's connections it nears thought-rate (not logged). */
static void
throttle_warning(struct sess *s, const char *agent, unsigned limit,
    unsigned count)
{
	cJSON *b = cJSON_CreateObject();
	char *j;

	cJSON_AddStringToObject(b, "agentId", agent);
	cJSON_AddNumberToObject(b, "limit", limit);
	cJSON_AddNumberToObject(b, "windowMs", THOUGHT_WINDOW_MS);
	cJSON_AddNumberToObject(b, "count", count);
	if ((j = proto_reply("throttle_warning", s->id, b)) != NULL)
		deliver_notify(&s->feed, agent, j);
	free(j);
}

/* --- logging --- */

/* The thought as logged: its fields in order, with defaults. */
static cJSON *
normal(const cJSON *t, const char *id)
{
	cJSON *o = cJSON_CreateObject(), *f;

	cJSON_AddStringToObject(o, "thoughtId", id);
	cJSON_AddStringToObject(o, "content", cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(t, "content")));
	cJSON_AddStringToObject(o, "category", cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(t, "category")));
	cJSON_AddNumberToObject(o, "confidence", cJSON_GetNumberValue(
	    cJSON_GetObjectItemCaseSensitive(t, "confidence")));
	f = cJSON_GetObjectItemCaseSensitive(t, "references");
	cJSON_AddItemToObject(o, "references", f != NULL ?
	    cJSON_Duplicate(f, 1) : cJSON_CreateArray());
	f = cJSON_GetObjectItemCaseSensitive(t, "inResponseTo");
	if (cJSON_IsString(f))
		cJSON_AddStringToObject(o, "inResponseTo", f->valuestring);
	cJSON_AddBoolToObject(o, "actionable", cJSON_IsTrue(
	    cJSON_GetObjectItemCaseSensitive(t, "actionable")));
	f = cJSON_GetObjectItemCaseSensitive(t, "shared");
	if (f != NULL)
		cJSON_AddBoolToObject(o, "shared", cJSON_IsTrue(f));
	return o;
}

/* Meta's known thoughts (made when absent). */
static cJSON *
nodes_of(struct sess *s)
{
	cJSON *n = cJSON_GetObjectItem(sess_meta(s), "thoughts");

	if (!cJSON_IsArray(n)) {
		n = cJSON_CreateArray();
		proto_set(sess_meta(s), "thoughts", n);
	}
	return n;
}

static uint64_t	thought_log_id(struct sess *, const char *, const cJSON *,
		    const char *, struct sess_result *);

uint64_t
thought_log(struct sess *s, const char *agent_id, const cJSON *t,
    struct sess_result *r)
{
	return thought_log_id(s, agent_id, t, NULL, r);
}

/* thought_log, the event naming the client message id it came as. */
static uint64_t
thought_log_id(struct sess *s, const char *agent_id, const cJSON *t,
    const char *msgid, struct sess_result *r)
{
	const struct config *conf = s->wk->conf;
	struct thought_rate *rate;
	cJSON *nodes, *body, *node;
	const char *given;
	char id[THOUGHT_ID_MAX + 1];
	uint64_t seq, now = util_mono_ms();
	unsigned count, limit = conf->thought_rate, warn;
	int tries;

	if (s->ended) {
		sess_result_err(r, "SESSION_ENDED", 409, "%s", "the session "
		    "has completed");
		return 0;
	}
	if (agent_id == NULL || agent_id[0] == '\0' ||
	    strlen(agent_id) > SESS_AGENT_MAX) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "a thought needs "
		    "its agent's id (1 to 64 bytes)");
		return 0;
	}
	if (thought_check(t, r->msg, sizeof(r->msg)) == -1 ||
	    thought_dag_check(nodes = nodes_of(s), t, r->msg,
	    sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return 0;
	}
	if (cJSON_GetArraySize(nodes) >= THOUGHT_MAX) {
		sess_result_err(r, "RATE_LIMITED", 429, "the session holds "
		    "its maximum of %d thoughts; share a synthesis in a new "
		    "session", THOUGHT_MAX);
		return 0;
	}
	if ((rate = rate_of(s, agent_id)) == NULL ||
	    (count = rate_count(rate, limit, now)) >= limit) {
		sess_result_err(r, "RATE_LIMITED", 429, "agent '%s' shared %u "
		    "thoughts in the last minute, the most thought-rate "
		    "allows; wait before sharing more", agent_id, limit);
		return 0;
	}
	if ((given = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t,
	    "thoughtId"))) != NULL)
		snprintf(id, sizeof(id), "%s", given);
	else {
		tries = 0;
		do {
			memcpy(id, "th_", 3);
			util_randhex(id + 3, 6);
		} while (node_find(nodes, id) != NULL && ++tries < 8);
	}
	/* Meta keeps the thought (the graph): it must have room for it. */
	if (!sess_meta_room(s, t, 1, r))
		return 0;
	body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "agentId", agent_id);
	cJSON_AddItemToObject(body, "thought", normal(t, id));
	/* A new owner knows the client's id again from the log. */
	if (msgid != NULL)
		cJSON_AddStringToObject(body, "id", msgid);
	node = cJSON_Duplicate(cJSON_GetObjectItem(body, "thought"), 1);
	if ((seq = sess_emit(s, "thought", body)) == 0) {
		cJSON_Delete(node);
		sess_result_err(r, "OVERLOADED", 503, "%s", "the thought could "
		    "not be logged; it was not shared, retry");
		return 0;
	}
	cJSON_AddStringToObject(node, "agentId", agent_id);
	cJSON_AddNumberToObject(node, "seq", (double)seq);
	cJSON_AddItemToArray(nodes, node);
	sess_meta_save(s);
	rate_take(rate, now);
	/* Near the limit: 80% of it, and at least one below it. */
	warn = limit - limit / 5;
	if (warn >= limit)
		warn = limit - 1;
	if (count + 1 >= warn && warn > 0)
		throttle_warning(s, agent_id, limit, count + 1);
	r->seq = seq;
	return seq;
}

int
thought_share_check(const struct sess_from *from, const cJSON *msg,
    struct sess_result *r)
{
	if (from->role == IPC_ROLE_OBSERVER) {
		sess_result_err(r, "FORBIDDEN", 403, "%s", "observers cannot "
		    "share thoughts");
		return -1;
	}
	if (from->role != IPC_ROLE_AGENT) {
		sess_result_err(r, "FORBIDDEN", 403, "%s", "thought_share comes "
		    "from an agent: connect with ?role=agent&agentId=NAME "
		    "(users guide agents with directive)");
		return -1;
	}
	if (from->agent == NULL || from->agent[0] == '\0') {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "this agent "
		    "connection has no agentId: connect with "
		    "?role=agent&agentId=NAME");
		return -1;
	}
	if (thought_check(cJSON_GetObjectItemCaseSensitive(msg, "thought"),
	    r->msg, sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return -1;
	}
	return 0;
}

int
thought_forward_check(struct sess *s, const struct sess_from *from,
    const cJSON *msg, struct sess_result *r)
{
	if (thought_share_check(from, msg, r) == -1)
		return -1;
	if (thought_dag_check(cJSON_GetObjectItem(sess_meta(s), "thoughts"),
	    cJSON_GetObjectItemCaseSensitive(msg, "thought"), r->msg,
	    sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return -1;
	}
	return 0;
}

void
thought_share(struct sess *s, struct sess_client *c,
    const struct sess_from *from, struct proto_in *in, struct sess_result *r)
{
	uint64_t seq;

	if (thought_share_check(from, in->root, r) == -1)
		return;
	if (sess_id_repeat(s, c, in->id, r))
		return;
	if ((seq = thought_log_id(s, from->agent,
	    cJSON_GetObjectItemCaseSensitive(in->root, "thought"), in->id,
	    r)) == 0)
		return;
	if (in->id != NULL)
		sess_id_add(s, in->id, seq);
	sess_answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
}

void
thought_adopt(struct sess *s, uint64_t seq, const char *json, size_t len)
{
	cJSON *o = cJSON_ParseWithLength(json, len), *t, *node, *nodes;
	const char *type, *agent, *id;

	type = cJSON_GetStringValue(cJSON_GetObjectItem(o, "type"));
	agent = cJSON_GetStringValue(cJSON_GetObjectItem(o, "agentId"));
	t = cJSON_GetObjectItem(o, "thought");
	id = cJSON_GetStringValue(cJSON_GetObjectItem(t, "thoughtId"));
	if (type == NULL || strcmp(type, "thought") != 0 || agent == NULL ||
	    id == NULL || !sess_has_meta(s)) {
		cJSON_Delete(o);
		return;
	}
	nodes = nodes_of(s);
	if (node_find(nodes, id) == NULL) {
		if (cJSON_GetArraySize(nodes) >= THOUGHT_MAX)
			log_warnx("session %s: thought %s at seq %llu is past "
			    "the %d a session keeps", s->id, id,
			    (unsigned long long)seq, THOUGHT_MAX);
		else {
			node = cJSON_Duplicate(t, 1);
			cJSON_AddStringToObject(node, "agentId", agent);
			cJSON_AddNumberToObject(node, "seq", (double)seq);
			cJSON_AddItemToArray(nodes, node);
		}
	}
	cJSON_Delete(o);
}

/* --- what each recipient sees --- */

/* A node or thought as a reduced recipient sees it (a new object). */
static cJSON *
reduced(const cJSON *t)
{
	cJSON *o = cJSON_CreateObject(), *f;

	cJSON_AddItemToObject(o, "thoughtId", cJSON_Duplicate(
	    cJSON_GetObjectItem(t, "thoughtId"), 0));
	cJSON_AddItemToObject(o, "category", cJSON_Duplicate(
	    cJSON_GetObjectItem(t, "category"), 0));
	if ((f = cJSON_GetObjectItem(t, "inResponseTo")) != NULL)
		cJSON_AddItemToObject(o, "inResponseTo", cJSON_Duplicate(f, 0));
	cJSON_AddBoolToObject(o, "actionable", cJSON_IsTrue(
	    cJSON_GetObjectItem(t, "actionable")));
	cJSON_AddBoolToObject(o, "redacted", 1);
	return o;
}

/* The REDUCED or HIDDEN form of thought event e (same seq), or NULL. */
static struct evt *
alt_make(const struct evt *e, int kind)
{
	cJSON *o = cJSON_ParseWithLength(e->json, e->len), *a;
	struct evt *v = NULL;
	char *txt;

	a = proto_head(kind == THOUGHT_REDUCED ? "thought" : "filtered",
	    cJSON_GetStringValue(cJSON_GetObjectItem(o, "sessionId")));
	cJSON_AddItemToObject(a, "seq", cJSON_Duplicate(
	    cJSON_GetObjectItem(o, "seq"), 0));
	cJSON_AddItemToObject(a, "ts", cJSON_Duplicate(
	    cJSON_GetObjectItem(o, "ts"), 0));
	if (kind == THOUGHT_REDUCED) {
		cJSON_AddItemToObject(a, "agentId", cJSON_Duplicate(
		    cJSON_GetObjectItem(o, "agentId"), 0));
		cJSON_AddItemToObject(a, "thought", reduced(
		    cJSON_GetObjectItem(o, "thought")));
	}
	if ((txt = cJSON_PrintUnformatted(a)) != NULL)
		v = evt_new(e->seq, txt, strlen(txt));
	free(txt);
	cJSON_Delete(a);
	cJSON_Delete(o);
	return v;
}

static void
tview_free(void *arg)
{
	struct thought_evt *tv = arg;

	evt_unref(tv->alt[0]);
	evt_unref(tv->alt[1]);
	free(tv);
}

/* What a thought event says of who may see it, read once per event. */
static struct thought_evt *
tview_of(struct evt *e)
{
	struct thought_evt *tv;
	cJSON *o, *t;
	const char *v;

	if (e->view != NULL)
		return e->view;
	if ((tv = calloc(1, sizeof(*tv))) == NULL)
		return NULL;
	o = cJSON_ParseWithLength(e->json, e->len);
	t = cJSON_GetObjectItem(o, "thought");
	v = cJSON_GetStringValue(cJSON_GetObjectItem(o, "agentId"));
	tv->bad = v == NULL || !cJSON_IsObject(t);
	snprintf(tv->author, sizeof(tv->author), "%s", v ? v : "");
	v = cJSON_GetStringValue(cJSON_GetObjectItem(t, "category"));
	snprintf(tv->category, sizeof(tv->category), "%s", v ? v : "");
	tv->shared = !cJSON_IsFalse(cJSON_GetObjectItem(t, "shared"));
	cJSON_Delete(o);
	e->view = tv;
	e->view_free = tview_free;
	return tv;
}

struct evt *
thought_view(void *arg, const struct deliver_sub *sub, struct evt *e)
{
	struct sess *s = arg;
	enum thought_vis mode = thought_mode(s);
	struct thought_evt *tv;
	int k;

	if (mode == THOUGHT_VIS_ALL || sub->role == IPC_ROLE_ADMIN)
		return e;
	if ((tv = tview_of(e)) == NULL)
		return NULL;
	k = tv->bad ? THOUGHT_HIDDEN : thought_sees(mode, sub->role,
	    sub->agent, tv->author, tv->category, tv->shared);
	if (k == THOUGHT_FULL)
		return e;
	if (tv->alt[k - 1] == NULL)
		tv->alt[k - 1] = alt_make(e, k);
	return tv->alt[k - 1];
}

/* Whether id is among the first n nodes kept (kept[i] is one's id). */
static int
kept_has(const char **kept, int n, const char *id)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(kept[i], id) == 0)
			return 1;
	return 0;
}

static void
edge_add(cJSON *edges, const char *from, const char *to, const char *kind)
{
	cJSON *e = cJSON_CreateObject();

	cJSON_AddStringToObject(e, "from", from);
	cJSON_AddStringToObject(e, "to", to);
	cJSON_AddStringToObject(e, "kind", kind);
	cJSON_AddItemToArray(edges, e);
}

cJSON *
thought_graph(struct sess *s, int role, const char *agent,
    const char *fagent, const char *fcat)
{
	enum thought_vis mode = thought_mode(s);
	cJSON *nodes = cJSON_GetObjectItem(sess_meta(s), "thoughts");
	cJSON *g = cJSON_CreateObject(), *out = cJSON_CreateArray();
	cJSON *edges = cJSON_CreateArray(), *n, *v, *r;
	const char **kept, *author, *cat, *id, *up;
	int k, nk = 0;

	cJSON_AddItemToObject(g, "nodes", out);
	cJSON_AddItemToObject(g, "edges", edges);
	if ((kept = calloc((size_t)cJSON_GetArraySize(nodes) + 1,
	    sizeof(*kept))) == NULL)
		return g;
	cJSON_ArrayForEach(n, nodes) {
		author = cJSON_GetStringValue(cJSON_GetObjectItem(n,
		    "agentId"));
		cat = cJSON_GetStringValue(cJSON_GetObjectItem(n, "category"));
		id = cJSON_GetStringValue(cJSON_GetObjectItem(n, "thoughtId"));
		if (author == NULL || cat == NULL || id == NULL ||
		    (fagent != NULL && strcmp(fagent, author) != 0) ||
		    (fcat != NULL && strcmp(fcat, cat) != 0))
			continue;
		k = thought_sees(mode, role, agent, author, cat,
		    !cJSON_IsFalse(cJSON_GetObjectItem(n, "shared")));
		if (k == THOUGHT_HIDDEN)
			continue;
		if (k == THOUGHT_FULL)
			v = cJSON_Duplicate(n, 1);
		else {
			v = reduced(n);
			cJSON_AddStringToObject(v, "agentId", author);
			cJSON_AddItemToObject(v, "seq", cJSON_Duplicate(
			    cJSON_GetObjectItem(n, "seq"), 0));
		}
		cJSON_AddItemToArray(out, v);
		kept[nk++] = id;
	}
	/* Edges between the nodes given, as each given node shows them. */
	cJSON_ArrayForEach(v, out) {
		id = cJSON_GetStringValue(cJSON_GetObjectItem(v, "thoughtId"));
		up = cJSON_GetStringValue(cJSON_GetObjectItem(v,
		    "inResponseTo"));
		if (up != NULL && kept_has(kept, nk, up))
			edge_add(edges, id, up, "inResponseTo");
		cJSON_ArrayForEach(r, cJSON_GetObjectItem(v, "references"))
			if (cJSON_IsString(r) && ref_is_thought(r->valuestring) &&
			    kept_has(kept, nk, r->valuestring))
				edge_add(edges, id, r->valuestring,
				    "reference");
	}
	free(kept);
	return g;
}

void
thought_free(struct sess *s)
{
	int i;

	if (s->thoughts == NULL)
		return;
	for (i = 0; i < RATE_AGENTS; i++)
		free(s->thoughts->rates[i].at);
	free(s->thoughts);
	s->thoughts = NULL;
}

/* --- the session's part (sess.h) --- */

static void
part_init(struct sess *s)
{
	s->feed.view = thought_view;
}

static void
part_scan(struct sess *s, uint64_t seq, const char *json, size_t len)
{
	/* A thought logged after meta's last checkpoint. */
	if (evt_json_scoped(json, len))
		thought_adopt(s, seq, json, len);
}

const struct sess_part thought_part = {
	.init = part_init,
	.scan = part_scan,
	.free = thought_free,
};
