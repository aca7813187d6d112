/*
 * A session's life beyond its turns.
 *
 * Presence.  An external agent connects with a stream
 * ?role=agent&agentId=NAME.  The session's owner counts its streams per
 * (agent, node): its own, and those followers on other hosts report
 * through its inbox ({"presence":{agentId,node,n,t}}, an entry clients
 * cannot make: follow.c wraps their messages in "m").  Followers report
 * their count on every change and again every PRESENCE_REFRESH_MS while
 * it is not zero; the owner forgets a node's count not refreshed within
 * PRESENCE_STALE_MS (a follower host that died).  agent_joined is logged
 * when an agent's count leaves zero, agent_left when it returns to it,
 * so two streams of one agent, on one host or two, log one of each.
 *
 * Meta keeps what was logged: "external" [{agentId, required,
 * connected, deadline?}], "active" (every required agent has joined once)
 * and "deadline" (config.maxDurationMs after creation).  The counts are
 * not kept: a new owner (worker restart, failover) learns them again
 * from the streams that reconnect.  Agents meta says are connected get
 * PRESENCE_STALE_MS to do so before agent_left is logged for them, so a
 * failover does not log a leave and a join for every agent.
 *
 * Deadlines.  A required agent that leaves an active session gets an
 * error AGENT_DISCONNECT (recoverable) and until agent-reconnect-timeout
 * to come back (its deadline in meta); the time limit is in meta too.
 * The owner arms one timer for the earliest; a new owner re-arms it from
 * meta, so a worker kill or a failover ends the session on time as long
 * as some process owns it (a session nobody is connected to leaves
 * memory, and is ended when it is next loaded).
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
#include "approve.h"
#include "life.h"
#include "llm.h"
#include "sess.h"
#include "wk.h"

#define PRESENCE_REFRESH_MS	5000	/* a follower reports its counts */
#define PRESENCE_STALE_MS	15000	/* a count not refreshed is gone */
#define LIFE_PEERS		256	/* (agent, node) counts kept */
#define MAX_DURATION_MS		(30ull * 24 * 3600 * 1000)
#define SUMMARY_SCAN		200000	/* log records a summary counts */
#define SUMMARY_TIMEOUT_MS	20000	/* the lead's summary, at most */
#define SUMMARY_MAX		8192	/* bytes of it kept */
#define SUMMARY_INPUT		32768	/* bytes of conversation it reads */

struct life_peer {
	char		 agent[SESS_AGENT_MAX + 1];
	char		 node[96];
	int		 n;		/* its streams there */
	uint64_t	 t;		/* the sender's stamp: newest wins */
	uint64_t	 seen;		/* owner's clock, when reported */
};

/* The lead agent writing the summary of a session that ends. */
struct life_sum {
	struct llm_call		*call;
	struct event		*tmo;
	char			 reason[16];
	char			 why[160];	/* for a plain summary */
	char			*text;
	size_t			 len;
};

struct life {
	struct sess		*s;
	struct life_sum		*sum;	/* summarizing: the end is not logged */
	struct event		*ev;	/* the earliest deadline */
	uint64_t		 grace;	/* until then, meta's connected stand */
	int			 due;	/* counts changed: log on the next pass */
	struct life_peer	*peers;
	unsigned		 npeers;
};

static void	life_arm(struct sess *);
static int	finish(struct sess *, const char *, const char *,
		    const char *);
static int	complete(struct sess *, const char *, const char *, int);

static struct life *
life_get(struct sess *s)
{
	if (s->life == NULL && (s->life = calloc(1, sizeof(*s->life))) != NULL)
		s->life->s = s;
	return s->life;
}

/* --- creation --- */

/* The entry of agent in an "external" array, or NULL. */
static cJSON *
ext_find_in(const cJSON *ext, const char *agent)
{
	cJSON *e;
	const char *id;

	cJSON_ArrayForEach(e, ext)
		if ((id = cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "agentId"))) != NULL && strcmp(id, agent) == 0)
			return e;
	return NULL;
}

static cJSON *
ext_find(struct sess *s, const char *agent)
{
	return ext_find_in(cJSON_GetObjectItem(sess_meta(s), "external"),
	    agent);
}

int
life_check(const cJSON *body, char *msg, size_t len)
{
	const cJSON *a = cJSON_GetObjectItem(body, "agents"), *e, *d;
	int i, j, n;
	size_t l;

	d = cJSON_GetObjectItem(cJSON_GetObjectItem(body, "config"),
	    "maxDurationMs");
	if (d != NULL && (!cJSON_IsNumber(d) || d->valuedouble < 100 ||
	    d->valuedouble > (double)MAX_DURATION_MS)) {
		snprintf(msg, len, "field 'config.maxDurationMs' must be a "
		    "number of milliseconds from 100 to %llu (30 days)",
		    (unsigned long long)MAX_DURATION_MS);
		return -1;
	}
	if (a == NULL)
		return 0;
	if (!cJSON_IsArray(a) || (n = cJSON_GetArraySize(a)) > LIFE_AGENTS) {
		snprintf(msg, len, "field 'agents' must be an array of at "
		    "most %d agents", LIFE_AGENTS);
		return -1;
	}
	for (i = 0; i < n; i++) {
		e = cJSON_GetArrayItem(a, i);
		if (cJSON_IsObject(e))
			continue;	/* an internal agent: not ours */
		if (!cJSON_IsString(e) || (l = strlen(e->valuestring)) == 0 ||
		    l > SESS_AGENT_MAX || strspn(e->valuestring,
		    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789._-") != l) {
			snprintf(msg, len, "field 'agents[%d]' must be an "
			    "external agent's id (1 to %d letters, digits, "
			    "'.', '_' or '-') or an internal agent (an object)",
			    i, SESS_AGENT_MAX);
			return -1;
		}
		for (j = 0; j < i; j++)
			if (cJSON_IsString(d = cJSON_GetArrayItem(a, j)) &&
			    strcmp(d->valuestring, e->valuestring) == 0) {
				snprintf(msg, len, "field 'agents[%d]': agent "
				    "'%s' is named twice", i, e->valuestring);
				return -1;
			}
	}
	return 0;
}

void
life_meta_new(cJSON *m, const cJSON *body)
{
	const cJSON *a = cJSON_GetObjectItem(body, "agents"), *e, *d;
	cJSON *ext, *o;
	int req = 0;

	ext = cJSON_AddArrayToObject(m, "external");
	cJSON_ArrayForEach(e, a) {
		/* life_check vetted POST /sessions; other callers' bodies
		 * are bounded here all the same. */
		if (!cJSON_IsString(e) || e->valuestring[0] == '\0' ||
		    strlen(e->valuestring) > SESS_AGENT_MAX ||
		    req >= LIFE_AGENTS || ext_find_in(ext, e->valuestring))
			continue;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "agentId", e->valuestring);
		cJSON_AddBoolToObject(o, "required", 1);
		cJSON_AddBoolToObject(o, "connected", 0);
		cJSON_AddItemToArray(ext, o);
		req++;
	}
	cJSON_AddBoolToObject(m, "active", req == 0);
	d = cJSON_GetObjectItem(cJSON_GetObjectItem(body, "config"),
	    "maxDurationMs");
	if (cJSON_IsNumber(d))
		cJSON_AddNumberToObject(m, "deadline", (double)(util_now_ms() +
		    (uint64_t)d->valuedouble));
}


static int
is_true(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(o, k));
}

int
life_team(const struct sess *s)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "external"))
		if (is_true(e, "required"))
			return 1;
	return 0;
}

int
life_external(const struct sess *s, const char *agent)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "external"))
		if (cJSON_IsString(cJSON_GetObjectItem(e, "agentId")) &&
		    strcmp(cJSON_GetObjectItem(e, "agentId")->valuestring,
		    agent) == 0)
			return 1;
	return 0;
}

int
life_holds(const struct sess *s)
{
	return cJSON_IsFalse(cJSON_GetObjectItem(sess_meta(s), "active"));
}

const char *
life_status(const struct sess *s)
{
	return life_holds(s) ? "created" : NULL;
}

int
life_busy(const struct sess *s)
{
	return s->life != NULL && s->life->sum != NULL;
}

int
life_failed(const struct sess *s)
{
	const cJSON *r = cJSON_GetObjectItem(sess_meta(s), "result");
	const char *why;

	if (r == NULL)	/* ending: the lead agent writes the summary */
		r = cJSON_GetObjectItem(sess_meta(s), "ending");
	why = cJSON_GetStringValue(cJSON_GetObjectItem(r, "reason"));

	return why != NULL && strcmp(why, "error") == 0;
}

void
life_state(struct sess *s, cJSON *state)
{
	cJSON *agents = cJSON_GetObjectItem(state, "agents"), *e, *o, *w;
	const cJSON *d;
	char ts[32];

	w = life_holds(s) ? cJSON_AddArrayToObject(state, "waitingFor") : NULL;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "external")) {
		o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "agentId", cJSON_Duplicate(
		    cJSON_GetObjectItem(e, "agentId"), 1));
		cJSON_AddStringToObject(o, "kind", "external");
		cJSON_AddBoolToObject(o, "required", is_true(e, "required"));
		cJSON_AddStringToObject(o, "status", is_true(e, "connected") ?
		    "connected" : "disconnected");
		if (cJSON_IsNumber(d = cJSON_GetObjectItem(e, "deadline"))) {
			util_iso8601(ts, (uint64_t)d->valuedouble);
			cJSON_AddStringToObject(o, "reconnectBy", ts);
		}
		cJSON_AddItemToArray(agents, o);
		if (w != NULL && is_true(e, "required") &&
		    !is_true(e, "connected"))
			cJSON_AddItemToArray(w, cJSON_Duplicate(
			    cJSON_GetObjectItem(e, "agentId"), 1));
	}
}

/* --- presence --- */

static struct life_peer *
peer_find(struct life *l, const char *agent, const char *node, int add)
{
	struct life_peer *p;
	unsigned i;

	for (i = 0; i < l->npeers; i++)
		if (strcmp(l->peers[i].agent, agent) == 0 &&
		    strcmp(l->peers[i].node, node) == 0)
			return &l->peers[i];
	if (!add)
		return NULL;
	/* Reuse a slot whose count fell to zero before growing. */
	for (i = 0; i < l->npeers; i++)
		if (l->peers[i].n == 0)
			break;
	if (i == l->npeers) {
		if (l->npeers >= LIFE_PEERS || (p = reallocarray(l->peers,
		    l->npeers + 1, sizeof(*p))) == NULL)
			return NULL;
		l->peers = p;
		l->npeers++;
	}
	p = &l->peers[i];
	memset(p, 0, sizeof(*p));
	snprintf(p->agent, sizeof(p->agent), "%s", agent);
	snprintf(p->node, sizeof(p->node), "%s", node);
	return p;
}

static int
peer_count(struct life *l, const char *agent)
{
	unsigned i;
	int n = 0;

	for (i = 0; l != NULL && i < l->npeers; i++)
		if (strcmp(l->peers[i].agent, agent) == 0)
			n += l->peers[i].n;
	return n;
}

/* All required agents have joined: the session is active, logged. */
static void
activate(struct sess *s)
{
	cJSON *e, *b;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "external"))
		if (is_true(e, "required") && !is_true(e, "connected"))
			return;
	proto_set(sess_meta(s), "active", cJSON_CreateTrue());
	b = sess_state(s);
	cJSON_AddBoolToObject(b, "active", 1);
	if (sess_emit(s, "session_state", b) == 0) {
		proto_set(sess_meta(s), "active", cJSON_CreateFalse());
		return;		/* the next presence change tries again */
	}
	log_info("session %s: every required agent has joined; active",
	    s->id);
	s->wk->agent->next(s);
}

/*
 * Owner: logs what changed in agent's presence (its count against what
 * meta says was logged), and what follows from it.
 */
static void
presence_update(struct sess *s, const char *agent)
{
	struct life *l = s->life;
	int n = peer_count(l, agent), req, was;
	cJSON *e, *b;
	char msg[256];
	uint64_t now = util_now_ms(), tmo;

	if (s->follower || s->broken || s->released || s->ended ||
	    s->st == NULL)
		return;
	e = ext_find(s, agent);
	was = is_true(e, "connected");
	if ((n > 0) == was)
		return;
	if (n == 0 && l != NULL && l->grace > now)
		return;		/* a new owner: it may come back */
	if (e == NULL) {
		if (cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
		    "external")) >= LIFE_AGENTS) {
			log_warnx("session %s: agent %s not logged: the "
			    "session keeps %d external agents", s->id, agent,
			    LIFE_AGENTS);
			return;
		}
		if (!cJSON_IsArray(cJSON_GetObjectItem(sess_meta(s),
		    "external")))
			proto_set(sess_meta(s), "external",
			    cJSON_CreateArray());
		e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "agentId", agent);
		cJSON_AddBoolToObject(e, "required", 0);
		cJSON_AddBoolToObject(e, "connected", 0);
		cJSON_AddItemToArray(cJSON_GetObjectItem(sess_meta(s),
		    "external"), e);
	}
	req = is_true(e, "required");
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "agentId", agent);
	cJSON_AddBoolToObject(b, "required", req);
	if (n > 0 && cJSON_GetObjectItem(e, "deadline") != NULL)
		cJSON_AddBoolToObject(b, "reconnected", 1);
	if (sess_emit(s, n > 0 ? "agent_joined" : "agent_left", b) == 0)
		return;		/* the next change, or the timer, retries */
	proto_set(e, "connected", cJSON_CreateBool(n > 0));
	if (n > 0 && cJSON_GetObjectItem(e, "deadline") != NULL) {
		cJSON_DeleteItemFromObject(e, "deadline");
		log_info("session %s: required agent %s is back; the session "
		    "goes on", s->id, agent);
	}
	if (n == 0 && req && !life_holds(s)) {
		tmo = s->wk->conf->agent_reconnect_timeout_ms;
		proto_set(e, "deadline", cJSON_CreateNumber((double)(now +
		    tmo)));
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "code", "AGENT_DISCONNECT");
		snprintf(msg, sizeof(msg), "required agent %s disconnected; "
		    "the session waits %llu ms for it to reconnect, then "
		    "fails", agent, (unsigned long long)tmo);
		cJSON_AddStringToObject(b, "message", msg);
		cJSON_AddStringToObject(b, "severity", "recoverable");
		cJSON_AddStringToObject(b, "agentId", agent);
		cJSON_AddNumberToObject(b, "reconnectTimeoutMs", (double)tmo);
		sess_emit(s, "error", b);
		log_info("session %s: %s", s->id, msg);
	}
	if (n > 0 && life_holds(s))
		activate(s);
	sess_meta_save(s);
	life_arm(s);
}

static void
posted(void *arg, ssize_t n)
{
	(void)arg;
	(void)n;	/* a lost report is made again on refresh */
}

/* Owner: logs every agent's change, those meta knows and new ones. */
static void
presence_all(struct sess *s)
{
	struct life *l = s->life;
	cJSON *e;
	unsigned i;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "external"))
		if (cJSON_IsString(cJSON_GetObjectItem(e, "agentId")))
			presence_update(s, cJSON_GetObjectItem(e,
			    "agentId")->valuestring);
	for (i = 0; i < l->npeers; i++)
		if (l->peers[i].n > 0)
			presence_update(s, l->peers[i].agent);
}

/* Follower: reports this node's count of agent to the owner's inbox. */
static void
presence_post(struct sess *s, const struct life_peer *p)
{
	cJSON *o, *b;
	char *txt;

	o = cJSON_CreateObject();
	b = cJSON_AddObjectToObject(o, "presence");
	cJSON_AddStringToObject(b, "agentId", p->agent);
	cJSON_AddStringToObject(b, "node", p->node);
	cJSON_AddNumberToObject(b, "n", p->n);
	cJSON_AddNumberToObject(b, "t", (double)p->t);
	if ((txt = cJSON_PrintUnformatted(o)) != NULL)
		store_post(s->st, txt, strlen(txt), posted, NULL);
	free(txt);
	cJSON_Delete(o);
}

void
life_conn(struct sess *s, const char *agent, int delta)
{
	struct life *l;
	struct life_peer *p;

	if (agent == NULL || agent[0] == '\0' || (l = life_get(s)) == NULL)
		return;
	if ((p = peer_find(l, agent, s->wk->node, delta > 0)) == NULL)
		return;
	p->n += delta;
	if (p->n < 0)
		p->n = 0;
	/* Stamps order a node's reports even within one millisecond. */
	p->t = util_now_ms() * 1000 + (p->t % 1000 + 1) % 1000;
	p->seen = util_now_ms();
	if (s->released || s->broken)
		return;		/* moving: it reconnects to the next owner */
	if (s->follower)
		presence_post(s, p);
	else
		l->due = 1;	/* not inside a fan-out that closed it */
	life_arm(s);
}

void
life_inbox(struct sess *s, const cJSON *pr)
{
	const char *agent = cJSON_GetStringValue(cJSON_GetObjectItem(pr,
	    "agentId"));
	const char *node = cJSON_GetStringValue(cJSON_GetObjectItem(pr,
	    "node"));
	struct life_peer *p;
	struct life *l;
	uint64_t t = (uint64_t)proto_count(pr, "t");
	int n = (int)proto_count(pr, "n");

	if (agent == NULL || node == NULL || strlen(agent) > SESS_AGENT_MAX ||
	    strcmp(node, s->wk->node) == 0 || (l = life_get(s)) == NULL ||
	    (p = peer_find(l, agent, node, n > 0)) == NULL)
		return;
	if (t < p->t)
		return;		/* an older report, delivered again */
	p->t = t;
	p->n = n < 0 ? 0 : n > 100000 ? 100000 : n;
	p->seen = util_now_ms();
	l->due = 1;
	life_arm(s);
}

static void	ended_by(struct sess *, const cJSON *);

void
life_follow(struct sess *s, const char *type, const cJSON *ev)
{
	const char *agent = cJSON_GetStringValue(cJSON_GetObjectItem(ev,
	    "agentId"));
	cJSON *e;

	if (strcmp(type, "session_state") == 0) {
		if (is_true(ev, "active"))
			proto_set(sess_meta(s), "active", cJSON_CreateTrue());
		return;
	}
	if (strcmp(type, "session_complete") == 0) {
		ended_by(s, ev);	/* failed or completed, as the owner says */
		return;
	}
	if (agent == NULL || (e = ext_find(s, agent)) == NULL)
		return;
	proto_set(e, "connected", cJSON_CreateBool(strcmp(type,
	    "agent_joined") == 0));
}

/* --- deadlines --- */

static void
life_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sess *s = arg;
	struct life *l = s->life;
	const cJSON *d;
	cJSON *e;
	unsigned i;
	uint64_t now = util_now_ms();
	char why[160], reason[16];

	if (s->follower) {
		/* Report the counts again: a new owner, or a lost post. */
		for (i = 0; i < l->npeers; i++)
			if (l->peers[i].n > 0)
				presence_post(s, &l->peers[i]);
		life_arm(s);
		return;
	}
	if (s->broken || s->released || l->sum != NULL)
		return;
	if (cJSON_IsString(d = cJSON_GetObjectItem(cJSON_GetObjectItem(
	    sess_meta(s), "ending"), "reason")) && !cJSON_IsObject(
	    cJSON_GetObjectItem(sess_meta(s), "result"))) {
		/* Its owner died while the lead wrote the summary.  Copies:
		 * finish() drops "ending" from meta. */
		snprintf(reason, sizeof(reason), "%s", d->valuestring);
		d = cJSON_GetObjectItem(cJSON_GetObjectItem(sess_meta(s),
		    "ending"), "why");
		snprintf(why, sizeof(why), "%s", cJSON_IsString(d) ?
		    d->valuestring : "");
		if (finish(s, reason, why[0] ? why : NULL, NULL) == -1)
			life_arm(s);
		return;
	}
	if (s->ended)
		return;
	l->due = 0;
	if (cJSON_IsNumber(d = cJSON_GetObjectItem(sess_meta(s), "deadline")) &&
	    (uint64_t)d->valuedouble <= now) {
		if (life_complete(s, "time_limit", NULL) == -1)
			life_arm(s);
		return;
	}
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "external"))
		if (cJSON_IsNumber(d = cJSON_GetObjectItem(e, "deadline")) &&
		    (uint64_t)d->valuedouble <= now &&
		    !is_true(e, "connected")) {
			snprintf(why, sizeof(why), "required agent %s did not "
			    "reconnect in time", cJSON_GetStringValue(
			    cJSON_GetObjectItem(e, "agentId")));
			if (complete(s, "error", why, 0) == -1)
				life_arm(s);
			return;
		}
	for (i = 0; i < l->npeers; i++)
		if (strcmp(l->peers[i].node, s->wk->node) != 0 &&
		    l->peers[i].n > 0 &&
		    l->peers[i].seen + PRESENCE_STALE_MS <= now) {
			log_info("session %s: node %s stopped reporting agent "
			    "%s; counting it gone", s->id, l->peers[i].node,
			    l->peers[i].agent);
			l->peers[i].n = 0;
		}
	if (l->grace != 0 && l->grace <= now)
		l->grace = 0;
	presence_all(s);
	life_arm(s);
}

/* Arms the timer for the earliest of what s waits for. */
static void
life_arm(struct sess *s)
{
	struct life *l;
	struct timeval tv;
	const cJSON *d;
	cJSON *e;
	uint64_t at = 0, now = util_now_ms(), t;
	unsigned i;

#define EARLIER(x) do { t = (x); if (at == 0 || t < at) at = t; } while (0)
	if ((l = life_get(s)) == NULL)
		return;
	if (l->ev != NULL)
		evtimer_del(l->ev);
	if (s->released || s->broken)
		return;
	if (s->follower) {
		for (i = 0; i < l->npeers; i++)
			if (l->peers[i].n > 0)
				EARLIER(now + PRESENCE_REFRESH_MS);
	} else if (!s->ended || (l->due && l->sum == NULL)) {
		if (cJSON_IsNumber(d = cJSON_GetObjectItem(sess_meta(s),
		    "deadline")))
			EARLIER((uint64_t)d->valuedouble);
		cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s),
		    "external"))
			if (cJSON_IsNumber(d = cJSON_GetObjectItem(e,
			    "deadline")))
				EARLIER((uint64_t)d->valuedouble);
		if (l->grace != 0)
			EARLIER(l->grace);
		if (l->due)
			EARLIER(now);
		for (i = 0; i < l->npeers; i++)
			if (l->peers[i].n > 0 &&
			    strcmp(l->peers[i].node, s->wk->node) != 0)
				EARLIER(l->peers[i].seen + PRESENCE_STALE_MS);
	}
#undef EARLIER
	/* Made on first use: most sessions wait for nothing here. */
	if (at == 0 || (l->ev == NULL && (l->ev = evtimer_new(s->wk->base,
	    life_cb, s)) == NULL))
		return;
	util_tv(&tv, at > now ? at - now : 0);
	evtimer_add(l->ev, &tv);
}

void
life_own(struct sess *s)
{
	struct life *l;
	cJSON *e;
	unsigned i;

	if ((l = life_get(s)) == NULL)
		return;
	/* Only this node's counts are known here; the others report. */
	for (i = 0; i < l->npeers; i++)
		if (strcmp(l->peers[i].node, s->wk->node) != 0)
			l->peers[i].n = 0;
	l->grace = 0;
	if (cJSON_IsObject(cJSON_GetObjectItem(sess_meta(s), "ending")) &&
	    !cJSON_IsObject(cJSON_GetObjectItem(sess_meta(s), "result")))
		s->ended = 1;	/* no input: life_cb logs its end */
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "external"))
		if (is_true(e, "connected"))
			l->grace = util_now_ms() + PRESENCE_STALE_MS;
	l->due = 1;
	life_arm(s);
}

static void	sum_free(struct life *);

void
life_free(struct sess *s)
{
	if (s->life == NULL)
		return;
	/* A summary under way is dropped: meta's "ending" makes the next
	 * owner end the session with a plain one. */
	sum_free(s->life);
	if (s->life->ev != NULL)
		event_free(s->life->ev);
	free(s->life->peers);
	free(s->life);
	s->life = NULL;
}

/* --- completion --- */

struct tally {
	unsigned	 messages, replies, tools, thoughts, actions, events;
};

static int
tally_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct tally *t = arg;

	(void)seq;
	(void)ts;
	(void)len;
	t->events++;
	if (strstr(json, "\"type\":\"user_message\"") != NULL)
		t->messages++;
	else if (strstr(json, "\"type\":\"done\"") != NULL)
		t->replies++;
	else if (strstr(json, "\"type\":\"tool_start\"") != NULL)
		t->tools++;
	else if (strstr(json, "\"type\":\"thought\"") != NULL)
		t->thoughts++;
	else if (strstr(json, "\"type\":\"action_proposed\"") != NULL)
		t->actions++;
	return t->events >= SUMMARY_SCAN;
}

/*
 * The plain summary: what the log holds (counted over its first
 * SUMMARY_SCAN records), the agents and the duration.  Owned by the caller.
 */
static char *
plain_summary(struct sess *s, const char *lead, const char *reason)
{
	struct tally t;
	char *out = NULL;
	uint64_t secs = (util_now_ms() - (uint64_t)proto_count(sess_meta(s),
	    "createdAt")) / 1000;
	/* The internal agents (one, or a team's roster) and the external. */
	int agents = cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
	    "agents")) + cJSON_GetArraySize(cJSON_GetObjectItem(sess_meta(s),
	    "external"));

	memset(&t, 0, sizeof(t));
	if (sess_log_read(s, 0, SUMMARY_SCAN, tally_cb, &t) < 0)
		memset(&t, 0, sizeof(t));	/* not at hand: counts unknown */
	if (asprintf(&out, "%s%sSession ended (%s) after %llum%02llus: %u "
	    "messages, %u replies, %d agents, %u tool calls, %u thoughts, "
	    "%u actions, %u events logged.", lead ? lead : "",
	    lead ? ". " : "", reason, (unsigned long long)(secs / 60),
	    (unsigned long long)(secs % 60), t.messages, t.replies, agents,
	    t.tools, t.thoughts, t.actions, t.events + 1) == -1)
		return NULL;
	return out;
}

/*
 * Logs the end: session_complete with text (the lead's summary) or a
 * plain summary after lead, the result in meta.  0, or -1 when it could
 * not be logged (then s is as it was, but for ended when summarizing).
 */
static int
finish(struct sess *s, const char *reason, const char *lead,
    const char *text)
{
	cJSON *b, *r;
	char ts[32], *sum;

	if ((sum = text != NULL ? strdup(text) : plain_summary(s, lead,
	    reason)) == NULL)
		return -1;
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "summary", sum);
	cJSON_AddItemToObject(b, "usage", cJSON_Duplicate(
	    cJSON_GetObjectItem(sess_meta(s), "usage"), 1));
	cJSON_AddStringToObject(b, "reason", reason);
	/* Not logged: the queue and a turn being recovered stay (a running
	 * turn was cancelled, and its done logged); the queue goes on. */
	if (sess_emit(s, "session_complete", b) == 0) {
		free(sum);
		s->wk->agent->next(s);
		return -1;
	}
	proto_set(sess_meta(s), "queue", cJSON_CreateArray());
	if (s->recover_ev != NULL || (s->promote != NULL && !s->follower)) {
		if (s->recover_ev != NULL)
			event_free(s->recover_ev);
		s->recover_ev = NULL;
		store_req_cancel(s->promote);	/* the turn's read-back */
		s->promote = NULL;
		approve_clear(s);
		proto_set(sess_meta(s), "turn", cJSON_CreateNull());
	}
	s->ended = 1;
	r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "summary", sum);
	cJSON_AddStringToObject(r, "reason", reason);
	util_iso8601(ts, util_now_ms());
	cJSON_AddStringToObject(r, "completedAt", ts);
	cJSON_AddItemToObject(r, "usage", cJSON_Duplicate(
	    cJSON_GetObjectItem(sess_meta(s), "usage"), 1));
	proto_set(sess_meta(s), "result", r);
	cJSON_DeleteItemFromObject(sess_meta(s), "ending");
	log_info("session %s: completed (%s)", s->id, reason);
	free(sum);
	sess_meta_save(s);
	if (s->life != NULL && s->life->ev != NULL)
		evtimer_del(s->life->ev);
	sess_check_idle(s);
	return 0;
}

static void
sum_free(struct life *l)
{
	struct life_sum *m = l->sum;

	if (m == NULL)
		return;
	if (m->call != NULL)
		llm_cancel(m->call);
	if (m->tmo != NULL)
		event_free(m->tmo);
	free(m->text);
	free(m);
	l->sum = NULL;
}

/* The lead's summary is in (text), or is not to be had (NULL): log the end. */
static void
sum_end(struct sess *s, const char *why)
{
	struct life *l = s->life;
	char reason[16], note[160], *text = NULL;

	snprintf(reason, sizeof(reason), "%s", l->sum->reason);
	snprintf(note, sizeof(note), "%s", l->sum->why);
	if (why == NULL && l->sum->len > 0)
		text = strdup(l->sum->text);
	else if (why != NULL)
		log_info("session %s: no summary from its lead agent (%s); "
		    "a plain one is logged", s->id, why);
	l->sum->call = NULL;	/* done or failed: already freed */
	sum_free(l);
	if (finish(s, reason, note[0] ? note : NULL, text) == -1) {
		l->due = 1;	/* meta's "ending": life_cb tries again */
		life_arm(s);
	}
	free(text);
}

static void
sum_token(void *arg, const char *text, size_t len)
{
	struct life_sum *m = ((struct sess *)arg)->life->sum;
	char *p;

	/* Cut at a character's end: the summary is logged as JSON text. */
	if (m->len + len > SUMMARY_MAX)
		len = utf8_whole(text, SUMMARY_MAX - m->len);
	if (len == 0 || (p = realloc(m->text, m->len + len + 1)) == NULL)
		return;
	memcpy(p + m->len, text, len);
	m->len += len;
	p[m->len] = '\0';
	m->text = p;
}

static void
sum_done(void *arg, const struct llm_usage *u, const char *stop)
{
	(void)u;
	(void)stop;
	sum_end(arg, NULL);
}

static void
sum_error(void *arg, const char *code, const char *message)
{
	(void)code;
	sum_end(arg, message);
}

static void
sum_retrying(void *arg, const char *why)
{
	struct life_sum *m = ((struct sess *)arg)->life->sum;

	(void)why;
	m->len = 0;	/* the reply starts over */
}

static void
sum_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct sess *s = arg;

	llm_cancel(s->life->sum->call);
	s->life->sum->call = NULL;
	sum_end(s, "it took too long");
}

/*
 * Asks the lead agent's provider for the summary: the objective and the
 * last SUMMARY_INPUT bytes of the conversation.  0 when under way (the
 * end is logged by sum_end), -1 when no provider can be asked.
 */
static int
sum_start(struct sess *s, const char *reason, const char *why)
{
	static const struct llm_cbs cbs = { sum_token, sum_done, sum_error,
	    NULL, sum_retrying, NULL };
	const struct cfg_provider *p;
	const char *prov = cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(cJSON_GetObjectItem(sess_meta(s), "agents"), 0),
	    "provider"));
	const char *obj = cJSON_GetStringValue(cJSON_GetObjectItem(sess_meta(s),
	    "objective"));
	const cJSON *e;
	struct llm_msg msgs[2];
	struct life *l = life_get(s);
	struct timeval tv;
	cJSON *end;
	char *conv = NULL, *in = NULL;
	size_t clen = 0;
	int rc = -1;

	if ((p = config_provider(s->wk->conf, prov != NULL && prov[0] ?
	    prov : s->wk->conf->default_provider)) == NULL || l == NULL ||
	    s->wk->llm == NULL || (l->sum = calloc(1, sizeof(*l->sum))) ==
	    NULL)
		return -1;
	snprintf(l->sum->reason, sizeof(l->sum->reason), "%s", reason);
	snprintf(l->sum->why, sizeof(l->sum->why), "%s", why ? why : "");
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "history")) {
		const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "role")), *c = cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "content"));
		char *line = NULL;
		int n;

		if (role == NULL || c == NULL || c[0] == '\0' ||
		    (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
			continue;
		if ((n = asprintf(&line, "%s%s: %s\n", conv ? conv : "", role,
		    c)) == -1)
			break;
		free(conv);
		conv = line;
		clen = (size_t)n;
	}
	if (asprintf(&in, "The session ends (%s%s%s).  Its objective: %s\n\n"
	    "The conversation (most recent part):\n%s\nWrite a short summary "
	    "of what was achieved toward the objective and what is left.",
	    reason, why ? ": " : "", why ? why : "", obj ? obj : "(none given)", conv == NULL ? "(empty)\n" :
	    clen > SUMMARY_INPUT ? conv + clen - SUMMARY_INPUT : conv) == -1)
		in = NULL;
	free(conv);
	msgs[0] = (struct llm_msg){ .role = "system", .content = "You are "
	    "the lead agent of this session.  Summarize it for the people "
	    "who will read its result, in at most five sentences." };
	msgs[1] = (struct llm_msg){ .role = "user", .content = in ? in : "" };
	/* Say so first: a new owner ends it plainly if this one dies. */
	s->ended = 1;
	end = cJSON_CreateObject();
	cJSON_AddStringToObject(end, "reason", reason);
	if (why != NULL)
		cJSON_AddStringToObject(end, "why", why);
	proto_set(sess_meta(s), "ending", end);
	sess_meta_save(s);
	if (in != NULL && (l->sum->tmo = evtimer_new(s->wk->base, sum_timeout,
	    s)) != NULL && (l->sum->call = llm_start(s->wk->llm, p, msgs, 2,
	    NULL, 0, &cbs, s)) != NULL) {
		util_tv(&tv, SUMMARY_TIMEOUT_MS);
		evtimer_add(l->sum->tmo, &tv);
		log_info("session %s: ends (%s); its lead agent writes the "
		    "summary", s->id, reason);
		rc = 0;
	} else {
		sum_free(l);
		s->ended = 0;
		cJSON_DeleteItemFromObject(sess_meta(s), "ending");
	}
	free(in);
	return rc;
}

/*
 * Ends s for reason; why (or NULL) says more.  sync: logged now with a
 * plain summary after why; else the lead agent writes the summary when a
 * provider answers, or the plain one is logged.
 */
static int
complete(struct sess *s, const char *reason, const char *why, int sync)
{
	if (s->ended || (s->life != NULL && s->life->sum != NULL))
		return 0;
	if (s->follower || s->broken)
		return -1;
	s->wk->agent->cancel(s);
	if (!sync && sum_start(s, reason, why) == 0)
		return 0;
	return finish(s, reason, why, NULL);
}

int
life_complete(struct sess *s, const char *reason, const char *summary)
{
	/* terminate is an operator's: its end is logged before it is
	 * answered.  A caller's summary is its own (the lead's words). */
	return complete(s, reason, summary, summary != NULL ||
	    strcmp(reason, "terminated") == 0);
}

/* --- the session's part (sess.h) --- */

static void
part_meta_new(struct sess *s, cJSON *m, const cJSON *body)
{
	(void)s;
	life_meta_new(m, body);
}

static void
part_state(struct sess *s, cJSON *state, int info)
{
	(void)info;
	life_state(s, state);
}

/* An end by error is a failure; waiting for required agents is created;
 * a session of external agents is under way once they are there. */
static const char *
part_status(const struct sess *s, const char *st)
{
	if (s->ended)
		return life_failed(s) ? "failed" : st;
	if (strcmp(st, "failed") == 0 || strcmp(st, "paused") == 0)
		return st;
	if (life_holds(s))
		return "created";
	if (strcmp(st, "created") == 0 && life_team(s))
		return "idle";
	return st;
}

/*
 * A session_complete in the log's tail that meta does not know of: the
 * owner died between logging it and saving meta.  The session ended
 * then; it must not end a second time.
 */
static void
part_scan(struct sess *s, uint64_t seq, const char *json, size_t len)
{
	cJSON *o;

	(void)seq;
	if (strstr(json, "\"type\":\"session_complete\"") == NULL ||
	    cJSON_IsObject(cJSON_GetObjectItem(sess_meta(s), "result")) ||
	    (o = cJSON_ParseWithLength(json, len)) == NULL)
		return;
	ended_by(s, o);
	cJSON_Delete(o);
}

/* The session ended as the logged session_complete o says. */
static void
ended_by(struct sess *s, const cJSON *o)
{
	cJSON *r;
	char ts[32];

	if (cJSON_IsObject(cJSON_GetObjectItem(sess_meta(s), "result"))) {
		s->ended = 1;
		return;
	}
	r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "summary", cJSON_Duplicate(
	    cJSON_GetObjectItem(o, "summary"), 1));
	cJSON_AddItemToObject(r, "reason", cJSON_Duplicate(
	    cJSON_GetObjectItem(o, "reason"), 1));
	snprintf(ts, sizeof(ts), "%s", cJSON_GetStringValue(
	    cJSON_GetObjectItem(o, "ts")) ? cJSON_GetStringValue(
	    cJSON_GetObjectItem(o, "ts")) : "");
	cJSON_AddStringToObject(r, "completedAt", ts);
	cJSON_AddItemToObject(r, "usage", cJSON_Duplicate(
	    cJSON_GetObjectItem(o, "usage"), 1));
	proto_set(sess_meta(s), "result", r);
	proto_set(sess_meta(s), "queue", cJSON_CreateArray());
	proto_set(sess_meta(s), "turn", cJSON_CreateNull());
	cJSON_DeleteItemFromObject(sess_meta(s), "ending");
	s->ended = 1;
}

static void
part_follow(struct sess *s, const char *type, const cJSON *ev, uint64_t ts)
{
	(void)ts;
	life_follow(s, type, ev);
}

const struct sess_part life_part = {
	.meta_new = part_meta_new,
	.scan = part_scan,
	.follow = part_follow,
	.own = life_own,
	.state = part_state,
	.status = part_status,
	.holds = life_holds,
	.busy = life_busy,
	.free = life_free,
};
