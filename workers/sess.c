/*
 * Sessions: the registry, loading, meta, the log and the life cycle.
 * Every event is appended to the session's log with the next seq before
 * any connection sees it; once the store has it, delivery is told
 * (deliver_fan_out) and feeds the subscribers.  The meta object (agents,
 * usage, the running turn, queued input, history) is rewritten at each
 * turn boundary so another worker can continue the session; its turns
 * run in turn.c (wk->agent), its client messages come through input.c.
 */
#include <sys/time.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/jsonw.h"
#include "parley/kg.h"
#include "parley/log.h"
#include "parley/metrics.h"
#include "parley/proto.h"
#include "parley/quota.h"
#include "parley/store.h"
#include "parley/util.h"
#include "parley/ws.h"
#include "evt.h"
#include "sess.h"
#include "wk.h"


#define ID_SCAN		2000	/* log records read back for client ids */


/* --- lookup --- */

static unsigned
sess_bucket(const char *id)
{
	uint32_t h = 2166136261u;

	while (*id)
		h = (h ^ (unsigned char)*id++) * 16777619u;
	return h % WK_SESS_BUCKETS;
}

struct sess *
sess_find(struct wk *wk, const char *id)
{
	struct sess *s;

	TAILQ_FOREACH(s, &wk->buckets[sess_bucket(id)], hentry)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

/* What connections can be given: durable and fanned out. */
uint64_t
sess_last_seq(const struct sess *s)
{
	return deliver_last(&s->feed);
}

/*
 * Reads this owner's log after `after` (limit 0: all) into cb: what the
 * store holds as durable, then the appends still on their way to it.
 * Returns the records read, or -1 when the store cannot answer at once.
 */
int
sess_log_read(struct sess *s, uint64_t after, size_t limit,
    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t), void *arg)
{
	uint64_t durable = store_durable_seq(s->st);
	struct evt *e;
	int n = 0, r;

	if (after < durable) {
		if ((r = store_range(s->st, after, limit == 0 ||
		    limit > durable - after ? durable - after : limit, cb,
		    arg)) < 0)
			return -1;
		n = r;
		/* Stopped by cb, or the limit reached. */
		if ((limit != 0 && (size_t)n >= limit) ||
		    (uint64_t)n < durable - after)
			return n;
	}
	for (e = s->phead; e != NULL; e = e->next) {
		if (e->seq <= after)
			continue;
		if (limit != 0 && (size_t)n >= limit)
			break;
		n++;
		if (cb(arg, e->seq, 0, e->json, e->len) != 0)
			break;
	}
	return n;
}

int
sess_busy(const struct sess *s)
{
	const cJSON *q = cJSON_GetObjectItem(sess_meta(s), "queue");

	/* Answers still on their way keep it, too: a follower's posts.  So
	 * do events not yet durable: its clients have not been sent them. */
	if (!TAILQ_EMPTY(&s->acks) || s->phead != NULL)
		return 1;
	if (s->follower || s->loading)
		return s->promote != NULL || s->loading;
	if (s->promote != NULL)
		return 1;	/* reading an interrupted turn back */

	/* Queued input of a paused session waits for an operator, not for
	 * this worker: it may idle out or drain (pause is in its meta). */
	if (s->wk->agent->busy(s) || (cJSON_GetArraySize(q) > 0 &&
	    !sess_paused(s) && !sess_held(s)) || s->recover_ev != NULL)
		return 1;
	PARTS(s, part)
		if (part->busy != NULL && part->busy(s))
			return 1;
	return 0;
}

int
sess_held(const struct sess *s)
{
	PARTS(s, part)
		if (part->holds != NULL && part->holds(s))
			return 1;
	return 0;
}

int
sess_paused(const struct sess *s)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(sess_meta(s), "paused"));
}

/* The status as the log and the turn say, before the parts' word; live:
 * it has subscribers. */
static const char *
sess_status_own(const struct sess *s, int live)
{
	const cJSON *st = cJSON_GetObjectItem(sess_meta(s), "status");

	if (s->ended)
		return "completed";
	if (cJSON_IsString(st) && strcmp(st->valuestring, "failed") == 0 &&
	    s->turn == NULL)
		return "failed";
	if (sess_paused(s))
		return "paused";
	if (!live)
		return "suspended";
	if (s->turn != NULL)
		return "running";
	if (cJSON_GetNumberValue(cJSON_GetObjectItem(sess_meta(s),
	    "turns")) == 0)
		return "created";
	return "idle";
}

const char *
sess_status_as(const struct sess *s, int live)
{
	const char *r = sess_status_own(s, live);

	PARTS(s, part)
		if (part->status != NULL)
			r = part->status(s, r);
	return r;
}

const char *
sess_status(const struct sess *s)
{
	/* The metrics ask every session each second: a frozen one answers
	 * from what its meta said when frozen, unless what the status reads
	 * besides meta moved since. */
	if (s->mtxt != NULL && s->turn == NULL && s->ended == s->mended)
		return s->mstatus[s->feed.nsubs > 0];
	return sess_status_as(s, s->feed.nsubs > 0);
}

/* --- persistence --- */


void
sess_req_note(struct sess *s, uint64_t seq, const char *reqid)
{
	unsigned i;

	/* Without memory the log lines go without the request id. */
	if (s->chat_req == NULL && (s->chat_req = calloc(SESS_CHAT_REQS,
	    sizeof(*s->chat_req))) == NULL)
		return;
	i = s->chat_req_next++ % SESS_CHAT_REQS;
	s->chat_req[i].seq = seq;
	snprintf(s->chat_req[i].req, sizeof(s->chat_req[i].req), "%s",
	    reqid != NULL ? reqid : "");
}

void
sess_req_find(const struct sess *s, uint64_t seq, char out[17])
{
	unsigned i;

	out[0] = '\0';
	for (i = 0; s->chat_req != NULL && i < SESS_CHAT_REQS; i++)
		if (s->chat_req[i].seq == seq && seq != 0)
			memcpy(out, s->chat_req[i].req, 17);
}

int
sess_log_room(struct sess *s, size_t need, struct sess_result *r)
{
	size_t quota = s->wk->conf->session_log_quota;

	if (quota == 0 || (s->log_bytes <= quota &&
	    need <= quota - s->log_bytes))
		return 1;
	sess_result_err(r, "QUOTA_EXCEEDED", 413, "the session's log has "
	    "taken in %llu KiB; with this message it would pass its quota of "
	    "%zu KiB (session-log-quota): nothing was logged; start a new "
	    "session, or ask the operator to raise the quota",
	    (unsigned long long)(s->log_bytes >> 10), quota >> 10);
	return 0;
}

static void	acks_settle(struct sess *, int failed);

void
sess_store_durable(void *arg, struct store_sess *st, uint64_t seq)
{
	struct sess *s = st->udata;
	struct evt *e, *first, *last = NULL, *next;
	size_t n = 0;

	(void)arg;
	if (s == NULL)
		return;
	first = s->phead;
	/* The run now durable leaves the pending list whole: it is fanned
	 * out together (deliver_fan_out), still linked. */
	for (e = s->phead; e != NULL && e->seq <= seq; e = e->next) {
		metrics_observe(&s->wk->metrics.store_latency, MSC_SECONDS,
		    util_secs_since(e->appended_us));
		last = e;
		n++;
	}
	if (n > 0) {
		s->phead = last->next;
		if (s->phead == NULL)
			s->ptail = NULL;
		last->next = NULL;
		deliver_fan_out(&s->feed, first, n);
		for (e = first; e != NULL; e = next) {
			next = e->next;
			e->next = NULL;
			evt_unref(e);
		}
	}
	/* An encoded copy was not made: pumps read. */
	if (seq > deliver_last(&s->feed))
		deliver_set_last(&s->feed, seq);
	acks_settle(s, 0);
	s->wk->agent->durable(s, seq);
	sess_idle_again(s);
}

/*
 * What was in flight (events, answers) kept s busy: once none is, it may
 * idle out (no client) or drain.
 */
void
sess_idle_again(struct sess *s)
{
	if (s->phead == NULL && TAILQ_EMPTY(&s->acks) && (s->feed.nsubs == 0 ||
	    s->wk->draining))
		sess_check_idle(s);
}

static uint64_t	emit(struct sess *, const char *, const cJSON *, const char *,
		    size_t);

/*
 * Appends one event and fans it out once the store has it.  body's fields
 * are moved into the event (body is consumed).  Returns the seq, or 0
 * when the store refused it, in which case no client saw it.
 */
uint64_t
sess_emit(struct sess *s, const char *type, cJSON *body)
{
	uint64_t seq;

	seq = emit(s, type, body, NULL, 0);
	cJSON_Delete(body);
	return seq;
}

uint64_t
sess_emit_json(struct sess *s, const char *type, const char *body,
    size_t len)
{
	return emit(s, type, NULL, body, len);
}

/*
 * sess_emit and sess_emit_json: the head ({"v":1,"type","sessionId",
 * "seq","ts"}) then the body's members, written as text in one pass (see
 * jsonw.h for why not through cJSON); the same bytes the tree printed.
 */
static uint64_t
emit(struct sess *s, const char *type, const cJSON *body, const char *text,
    size_t textlen)
{
	struct evt *e;
	struct jw w;
	char ts[32], stk[1024];
	const char *txt;
	uint64_t seq, now = util_now_ms();
	size_t len;

	if (s->follower || s->broken || s->st == NULL)
		return 0;
	seq = store_last_seq(s->st) + 1;
	util_iso8601(ts, now);
	jw_init(&w, stk, sizeof(stk), STORE_JSON_MAX);
	jw_raw(&w, "{", 1);
	jw_key(&w, "v");
	jw_u64(&w, PROTO_VERSION);
	jw_key(&w, "type");
	jw_str(&w, type, strlen(type));
	jw_key(&w, "sessionId");
	jw_str(&w, s->id, strlen(s->id));
	jw_key(&w, "seq");
	jw_u64(&w, seq);
	jw_key(&w, "ts");
	jw_str(&w, ts, strlen(ts));
	if (body != NULL)
		jw_cjson_members(&w, body);
	else if (text != NULL) {
		/* {"a":..} goes in as ,"a":..; {} adds nothing. */
		if (textlen < 2 || text[0] != '{' || text[textlen - 1] != '}')
			w.err = 1;
		else if (textlen > 2) {
			jw_raw(&w, ",", 1);
			jw_raw(&w, text + 1, textlen - 2);
		}
	}
	jw_raw(&w, "}", 1);
	if ((txt = jw_text(&w, &len)) == NULL) {
		log_warnx("session %s: a %s event could not be encoded (out "
		    "of memory, or past %u bytes); not logged", s->id, type,
		    STORE_JSON_MAX);
		jw_free(&w);
		return 0;
	}
	e = evt_new(seq, txt, len);
	jw_free(&w);
	if (e == NULL)
		return 0;
	/* Queued before the append: a store that answers at once reports
	 * it durable inside the call. */
	if (s->ptail != NULL)
		s->ptail->next = e;
	else
		s->phead = e;
	s->ptail = e;
	e->appended_us = util_mono_us();
	if (store_append_async(s->st, seq, now, e->json, e->len) == -1) {
		s->wk->metrics.store_errors++;
		log_warn("session %s: append of seq %llu failed", s->id,
		    (unsigned long long)seq);
		/* Still queued (nothing after it can be), so never sent. */
		if (s->phead == e)
			s->phead = s->ptail = NULL;
		else {
			struct evt *p = s->phead;

			while (p != NULL && p->next != e)
				p = p->next;
			if (p != NULL) {
				p->next = NULL;
				s->ptail = p;
			}
		}
		evt_unref(e);
		if (errno == EPIPE || errno == EIO)
			sess_break(s, EIO);
		return 0;
	}
	s->wk->events++;
	s->log_bytes += len;	/* e may be gone: a local append is durable
				   inside the call */
	if (s->wk->conf->fsync == CFG_FSYNC_BATCH && s->wk->sync_ev &&
	    !evtimer_pending(s->wk->sync_ev, NULL)) {
		struct timeval tv;

		util_tv(&tv, 200);
		evtimer_add(s->wk->sync_ev, &tv);
	}
	return seq;
}

cJSON *
sess_agent_json(struct sess *s, const char *status)
{
	const cJSON *a = NULL, *e;
	cJSON *o = cJSON_CreateObject();

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s), "agents"))
		if (cJSON_IsString(cJSON_GetObjectItem(e, "agentId")) &&
		    strcmp(cJSON_GetObjectItem(e, "agentId")->valuestring,
		    s->agent_id) == 0)
			a = e;
	if (a == NULL)
		a = cJSON_GetArrayItem(cJSON_GetObjectItem(sess_meta(s),
		    "agents"), 0);

	cJSON_AddStringToObject(o, "agentId", s->agent_id);
	if (status != NULL)
		cJSON_AddStringToObject(o, "status", status);
	cJSON_AddItemToObject(o, "role", cJSON_Duplicate(
	    cJSON_GetObjectItem(a, "role"), 1));
	cJSON_AddItemToObject(o, "provider", cJSON_Duplicate(
	    cJSON_GetObjectItem(a, "provider"), 1));
	if (cJSON_IsString(cJSON_GetObjectItem(a, "model")))
		cJSON_AddItemToObject(o, "model", cJSON_Duplicate(
		    cJSON_GetObjectItem(a, "model"), 1));
	return o;
}

/* --- at-most-once input --- */

int
sess_id_find(struct sess *s, const char *id, uint64_t *seq)
{
	unsigned i;

	for (i = 0; i < s->id_n; i++)
		if (s->idr[i].id != NULL && strcmp(s->idr[i].id, id) == 0) {
			*seq = s->idr[i].seq;
			return 1;
		}
	return 0;
}

/*
 * Remembers id (the last SESS_IDS of them).  The ring grows as ids come
 * (most sessions see a few, and idle ones none: 16 KiB each up front was
 * most of an idle session's memory); only full does it wrap.
 */
int
sess_id_repeat(struct sess *s, struct sess_client *c, const char *id,
    struct sess_result *r)
{
	uint64_t seq;

	if (id == NULL || !sess_id_find(s, id, &seq))
		return 0;
	r->seq = seq;
	r->duplicate = 1;
	r->http = 200;
	/* Accepted, but perhaps not yet stored. */
	sess_answer_durable(s, c, id, seq, ANSWER_DUP, r);
	return 1;
}

void
sess_id_add(struct sess *s, const char *id, uint64_t seq)
{
	struct sess_id *r;
	unsigned i, cap;
	char *dup;

	if ((dup = strdup(id)) == NULL)
		return;		/* forgetting an id only risks a repeat */
	if (s->id_n == s->id_cap && s->id_cap < SESS_IDS) {
		cap = s->id_cap ? s->id_cap * 2 : 8;
		if (cap > SESS_IDS)
			cap = SESS_IDS;
		if ((r = reallocarray(s->idr, cap, sizeof(*r))) == NULL) {
			free(dup);
			return;
		}
		s->idr = r;
		s->id_cap = cap;
	}
	if (s->id_n < s->id_cap)
		i = s->id_n++;
	else {
		i = s->id_next;
		s->id_next = (s->id_next + 1) % s->id_cap;
		free(s->idr[i].id);
	}
	s->idr[i].id = dup;
	s->idr[i].seq = seq;
}

static int
ids_scan(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct sess *s = arg;
	cJSON *o, *id;

	cJSON *p;

	if (strstr(json, "\"type\":\"session_state\"") != NULL) {
		/* The last logged pause or resume wins over meta: the meta
		 * write behind it may not have landed (a crash between). */
		o = cJSON_ParseWithLength(json, len);
		if (cJSON_IsBool(p = cJSON_GetObjectItem(o, "paused")))
			s->scan_paused = cJSON_IsTrue(p);
		cJSON_Delete(o);
		return 0;
	}
	PARTS(s, part)
		if (part->scan != NULL)
			part->scan(s, seq, json, len);
	/* Every event a client message made names its id (user_message,
	 * action_proposed, thought, directive, team_update): applied once,
	 * here too. */
	if (strstr(json, "\"id\":\"") == NULL)
		return 0;
	o = cJSON_ParseWithLength(json, len);
	if (cJSON_IsString(id = cJSON_GetObjectItem(o, "id")))
		sess_id_add(s, id->valuestring, seq);
	cJSON_Delete(o);
	return 0;
}

/* --- life cycle --- */

static void
idle_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sess *s = arg;

	if ((s->feed.nsubs == 0 || s->wk->draining) && !sess_busy(s))
		sess_release(s);
}

/*
 * Arms s's idle timer for ms, made on first use: a session with clients
 * (most of those held in memory) needs none.
 */
static void
idle_arm(struct sess *s, uint64_t ms)
{
	struct timeval tv;

	if (s->idle_ev == NULL &&
	    (s->idle_ev = evtimer_new(s->wk->base, idle_cb, s)) == NULL) {
		log_warnx("session %s: no memory for its idle timer; it stays "
		    "in memory until a client comes and goes", s->id);
		return;
	}
	util_tv(&tv, ms);
	evtimer_add(s->idle_ev, &tv);
}

void
sess_check_idle(struct sess *s)
{
	if (s->released)
		return;
	if (s->wk->draining && !sess_busy(s)) {
		/* Its turn is over: clients move to the new owner. */
		idle_arm(s, 0);
		return;
	}
	if (s->feed.nsubs > 0 || sess_busy(s)) {
		if (s->idle_ev != NULL) {
			event_free(s->idle_ev);
			s->idle_ev = NULL;
		}
		return;
	}
	if (s->wk->draining || s->wk->terminating) {
		/* Nothing left to finish here: let the new owner have it. */
		idle_arm(s, 0);
		return;
	}
	idle_arm(s, s->wk->conf->idle_timeout_ms);
}

static cJSON *
meta_new(struct sess *s, cJSON *body)
{
	cJSON *m = cJSON_CreateObject(), *a, *agents, *u, *cfg;
	const char *prov = s->wk->conf->default_provider;
	const struct cfg_provider *p = config_provider(s->wk->conf, prov);
	char hex[9], aid[64];
	uint64_t now = util_now_ms();

	cJSON_AddNumberToObject(m, "version", 1);
	cJSON_AddStringToObject(m, "sessionId", s->id);
	cJSON_AddNumberToObject(m, "createdAt", (double)now);
	cJSON_AddStringToObject(m, "status", "created");
	util_randhex(hex, 4);
	snprintf(aid, sizeof(aid), "assistant-%s", hex);
	agents = cJSON_AddArrayToObject(m, "agents");
	a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "agentId", aid);
	cJSON_AddStringToObject(a, "name", "assistant");
	cJSON_AddStringToObject(a, "role", "assistant");
	cJSON_AddStringToObject(a, "provider", prov ? prov : "");
	cJSON_AddStringToObject(a, "providerType", p ? p->type : "");
	cJSON_AddItemToArray(agents, a);
	cfg = cJSON_GetObjectItem(body, "config");
	cJSON_AddItemToObject(m, "config", cJSON_IsObject(cfg) ?
	    cJSON_Duplicate(cfg, 1) : cJSON_CreateObject());
	/* route.c checked a config.autonomy against the operator's levels. */
	cfg = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "config"), "autonomy");
	cJSON_AddStringToObject(m, "autonomy", cJSON_IsString(cfg) ?
	    cfg->valuestring : policy_autonomy_name(s->wk->conf->autonomy));
	if (cJSON_IsString(cJSON_GetObjectItem(body, "objective")))
		cJSON_AddItemToObject(m, "objective", cJSON_Duplicate(
		    cJSON_GetObjectItem(body, "objective"), 1));
	if (cJSON_IsObject(cJSON_GetObjectItem(body, "metadata")))
		cJSON_AddItemToObject(m, "metadata", cJSON_Duplicate(
		    cJSON_GetObjectItem(body, "metadata"), 1));
	u = cJSON_AddObjectToObject(m, "usage");
	cJSON_AddNumberToObject(u, "inputTokens", 0);
	cJSON_AddNumberToObject(u, "outputTokens", 0);
	cJSON_AddNumberToObject(u, "tokens", 0);
	cJSON_AddNumberToObject(u, "cost", 0);
	cJSON_AddNumberToObject(m, "turns", 0);
	cJSON_AddNullToObject(m, "turn");
	cJSON_AddArrayToObject(m, "queue");
	cJSON_AddArrayToObject(m, "history");
	PARTS(s, part)
		if (part->meta_new != NULL)
			part->meta_new(s, m, body);
	return sess_meta_share_keys(m);
}

/* --- loading --- */

static void	sess_opened(void *, int, struct store_sess *, enum store_role);
static void	sess_free(struct sess *);

/* Subscribers came or went: it may idle out, or must not. */
static void
feed_changed(void *arg)
{
	struct sess *s = arg;

	PARTS(s, part)
		if (part->changed != NULL)
			part->changed(s);
	sess_check_idle(s);
}

static struct sess *
sess_new(struct wk *wk, const char *id)
{
	struct sess *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->wk = wk;
	snprintf(s->id, sizeof(s->id), "%s", id);
	deliver_init(&s->feed, s->id, feed_changed, s);
	TAILQ_INIT(&s->loads);
	TAILQ_INIT(&s->acks);
	if (wk->agent->init != NULL)
		wk->agent->init(s);
	PARTS(s, part)
		if (part->init != NULL)
			part->init(s);
	TAILQ_INSERT_TAIL(&wk->sessions, s, entry);
	TAILQ_INSERT_TAIL(&wk->buckets[sess_bucket(id)], s, hentry);
	wk->nsessions++;
	return s;
}

/* Calls the load waiters; each is removed before its call. */
static void
loads_settle(struct sess *s, const char *err)
{
	struct sess_wait *w;

	while ((w = TAILQ_FIRST(&s->loads)) != NULL) {
		TAILQ_REMOVE(&s->loads, w, entry);
		if (w->loaded != NULL)
			w->loaded(w->arg, err);
		free(w);
	}
}

/* Reads meta into sess_meta(s); a default one (saved when owned) if none. */
static void
meta_load(struct sess *s)
{
	char *txt;
	cJSON *t, *m;

	sess_meta_set(s, NULL);
	s->fresh = 0;
	if ((txt = store_meta_read(s->st)) != NULL) {
		m = cJSON_Parse(txt);
		free(txt);
		if (!cJSON_IsObject(m)) {
			log_warnx("session %s: meta is not a JSON object; "
			    "starting a fresh one (the log is kept)", s->id);
			cJSON_Delete(m);
		} else
			sess_meta_set(s, sess_meta_share_keys(m));
	}
	if (!sess_has_meta(s)) {
		sess_meta_set(s, meta_new(s, NULL));
		s->fresh = !s->follower && store_last_seq(s->st) == 0;
		sess_meta_save(s);
	}
	t = cJSON_GetArrayItem(cJSON_GetObjectItem(sess_meta(s), "agents"), 0);
	snprintf(s->agent_id, sizeof(s->agent_id), "%s",
	    cJSON_GetStringValue(cJSON_GetObjectItem(t, "agentId")) ?
	    cJSON_GetStringValue(cJSON_GetObjectItem(t, "agentId")) :
	    "assistant");
	if (!cJSON_IsArray(cJSON_GetObjectItem(sess_meta(s), "queue")))
		proto_set(sess_meta(s), "queue", cJSON_CreateArray());
	s->log_bytes = (uint64_t)proto_count(sess_meta(s), "logBytes");
	t = cJSON_GetObjectItem(sess_meta(s), "status");
	s->ended = cJSON_IsString(t) && strcmp(t->valuestring, "completed") == 0;
	if (cJSON_IsObject(cJSON_GetObjectItem(sess_meta(s), "result")))
		s->ended = 1;	/* life_complete: completed or failed */
}

/* This process owns the session now: continue what its meta says. */
void
sess_own(struct sess *s)
{
	uint64_t last = store_last_seq(s->st);

	s->follower = 0;
	meta_load(s);
	deliver_set_last(&s->feed, store_durable_seq(s->st));
	s->scan_paused = -1;
	store_range(s->st, last > ID_SCAN ? last - ID_SCAN : 0, 0, ids_scan, s);
	if (s->scan_paused != -1 && s->scan_paused != sess_paused(s))
		proto_set(sess_meta(s), "paused",
		    cJSON_CreateBool(s->scan_paused));
	PARTS(s, part)
		if (part->own != NULL)
			part->own(s);
	s->wk->agent->resume(s);
}

/*
 * Charges a session about to be created to its creator's address and
 * subject, on the host's shared counters: 0, or -1 (logged) when either
 * already made its max-sessions-per-address or -subject in the window.
 */
static int
sess_create_quota(struct sess *s)
{
	const struct config *conf = s->wk->conf;
	char ka[80], ks[IPC_SUB_MAX + 4];
	struct quota_key k[2];
	uint64_t retry = 0;
	size_t which = 0;

	snprintf(ka, sizeof(ka), "a:%s", s->cr_peer);
	snprintf(ks, sizeof(ks), "s:%s", s->cr_sub);
	k[0].key = ka;
	k[0].limit = conf->max_sess_per_addr;
	k[1].key = s->cr_sub[0] != '\0' ? ks : "";
	k[1].limit = conf->max_sess_per_subject;
	if (quota_take(s->wk->quota, k, 2, conf->sess_create_window_ms,
	    util_now_ms(), &which, &retry) == 0)
		return 0;
	log_info("session %s not created: %s '%s' created %u sessions in "
	    "the window (max-sessions-per-%s); %llu ms left", s->id,
	    which == 0 ? "address" : "subject", which == 0 ? s->cr_peer :
	    s->cr_sub, k[which].limit, which == 0 ? "address" : "subject",
	    (unsigned long long)retry);
	return -1;
}

static void
sess_opened(void *arg, int err, struct store_sess *st, enum store_role role)
{
	struct sess *s = arg;
	struct wk *wk = s->wk;

	s->loading = 0;
	if (s->released) {
		/* Let go while it loaded (the worker is stopping). */
		if (err == 0) {
			st->udata = NULL;
			store_sess_close(st);
		}
		sess_free(s);
		wk_maybe_exit(wk);
		return;
	}
	if (err != 0) {
		if (err == ENOENT && s->load_created == 0 && s->may_create) {
			/* Absent, and a waiter may create it: if its address
			 * and subject are within their bounds. */
			if (sess_create_quota(s) == -1) {
				loads_settle(s, "RATE_LIMITED");
				wk_released(wk, s->id);
				sess_free(s);
				wk_maybe_exit(wk);
				return;
			}
			s->loading = s->load_created = 1;
			store_open_async(wk->store, s->id, 1, ID_SCAN,
			    sess_opened, s);
			return;
		}
		if (err != ENOENT) {
			wk->metrics.store_errors++;
			log_warnx("session %s: open: %s", s->id, strerror(err));
		}
		/* A store that is down is no fault of the request: 503, to
		 * retry (sess_overloaded_why says so), not 500. */
		loads_settle(s, err == ENOENT ? "NOT_FOUND" :
		    !store_healthy(wk->store) ? "OVERLOADED" : "INTERNAL");
		wk_released(wk, s->id);
		sess_free(s);
		wk_maybe_exit(wk);
		return;
	}
	s->st = st;
	s->feed.st = st;
	st->udata = s;
	s->fresh = 0;
	if (role == STORE_FOLLOWER) {
		s->follower = 1;
		meta_load(s);
		deliver_set_last(&s->feed, store_last_seq(st));
	} else
		sess_own(s);
	log_debug("session %s: %s, last seq %llu", s->id,
	    s->follower ? "following" : s->fresh ? "created" : "opened",
	    (unsigned long long)store_last_seq(st));
	loads_settle(s, NULL);
	if (!s->released)
		sess_check_idle(s);
}

/* A waiter that may create the session: the first one is charged. */
static void
sess_may_create(struct sess *s, const struct sess_creator *cr)
{
	if (cr == NULL || s->may_create)
		return;
	s->may_create = 1;
	snprintf(s->cr_peer, sizeof(s->cr_peer), "%s", cr->peer ? cr->peer :
	    "");
	snprintf(s->cr_sub, sizeof(s->cr_sub), "%s", cr->subject ?
	    cr->subject : "");
}

void
sess_load(struct wk *wk, const char *id, const struct sess_creator *cr,
    void (*loaded)(void *, const char *), void *arg)
{
	struct sess_wait *w = NULL;
	struct sess *s;

	if ((s = sess_find(wk, id)) != NULL && !s->loading) {
		if (loaded != NULL)
			loaded(arg, NULL);
		return;
	}
	if (s == NULL && (wk->nsessions >= wk->conf->max_sessions ||
	    !wk_fd_room(wk, wk->sess_fds))) {
		if (loaded != NULL)
			loaded(arg, "OVERLOADED");
		wk_released(wk, id);
		return;
	}
	if (loaded != NULL && (w = calloc(1, sizeof(*w))) == NULL) {
		loaded(arg, "INTERNAL");
		return;
	}
	if (s == NULL && (s = sess_new(wk, id)) == NULL) {
		free(w);
		if (loaded != NULL)
			loaded(arg, "INTERNAL");
		wk_released(wk, id);
		return;
	}
	if (w != NULL) {
		w->loaded = loaded;
		w->arg = arg;
		TAILQ_INSERT_TAIL(&s->loads, w, entry);
	}
	sess_may_create(s, cr);
	if (s->loading)
		return;
	/* Opened as it is first: only an absent one is made, and only once
	 * its creator is within its bounds (sess_opened). */
	s->loading = 1;
	s->load_created = 0;
	store_open_async(wk->store, id, 0, ID_SCAN, sess_opened, s);
}

void
sess_load_cancel(struct wk *wk, void *arg)
{
	struct sess_wait *w, *next;
	struct sess *s;

	TAILQ_FOREACH(s, &wk->sessions, entry) {
		if (!s->loading)
			continue;
		for (w = TAILQ_FIRST(&s->loads); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->arg == arg) {
				TAILQ_REMOVE(&s->loads, w, entry);
				free(w);
			}
		}
	}
}

struct get_result {
	int		 done;
	const char	*err;
};

static void
get_loaded(void *arg, const char *err)
{
	struct get_result *r = arg;

	r->done = 1;
	r->err = err;
}

struct sess *
sess_get(struct wk *wk, const char *id, const struct sess_creator *cr,
    int *created, cJSON *body, const char **err)
{
	struct get_result r = { 0, NULL };
	struct sess *s;

	if (created)
		*created = 0;
	if (wk->fail_sid != NULL && strcmp(wk->fail_sid, id) == 0) {
		*err = wk->fail_err;
		return NULL;
	}
	if ((s = sess_find(wk, id)) == NULL || s->loading) {
		sess_load(wk, id, cr, get_loaded, &r);
		if (!r.done) {
			sess_load_cancel(wk, &r);
			*err = "PENDING";
			return NULL;
		}
		if (r.err != NULL) {
			*err = r.err;
			return NULL;
		}
		if ((s = sess_find(wk, id)) == NULL) {
			*err = "INTERNAL";
			return NULL;
		}
	}
	if (cr != NULL && s->fresh && !s->follower) {
		/* Its first user says what it is, and whose it is. */
		if (body != NULL) {
			sess_meta_set(s, NULL);
			sess_meta_set(s, meta_new(s, body));
			snprintf(s->agent_id, sizeof(s->agent_id), "%s",
			    cJSON_GetStringValue(cJSON_GetObjectItem(
			    cJSON_GetArrayItem(cJSON_GetObjectItem(sess_meta(s),
			    "agents"), 0), "agentId")));
			PARTS(s, part)
				if (part->own != NULL)
					part->own(s);
		}
		/* A project's knowledge (kg:) is everyone's who may use
		 * the project, not its first writer's. */
		if (cr->subject != NULL && cr->subject[0] != '\0' &&
		    strncmp(s->id, KG_SID_PREFIX, strlen(KG_SID_PREFIX)) != 0)
			proto_set(sess_meta(s), "owner",
			    cJSON_CreateString(cr->subject));
		/* Its agents reach only the projects (kg:P) this scope
		 * allows: a scoped token's agent no wider than the token. */
		if (cr->scope != NULL && cr->scope[0] != '\0' &&
		    strncmp(s->id, KG_SID_PREFIX, strlen(KG_SID_PREFIX)) != 0)
			proto_set(sess_meta(s), "scope",
			    cJSON_CreateString(cr->scope));
		sess_meta_save(s);
		if (created)
			*created = 1;
		s->fresh = 0;
	}
	return s;
}

const char *
sess_overloaded_why(struct wk *wk)
{
	if (!store_healthy(wk->store))
		return "the session store is unreachable; retry when GET "
		    "/health/ready answers 200";
	return "this worker holds its maximum number of sessions; retry "
	    "later";
}

const char *
sess_epochs(const struct sess *s)
{
	return s->st != NULL ? store_epochs(s->st) : "";
}

const char *
sess_epoch(struct sess *s)
{
	struct epochs	 e;
	const char	*t = sess_epochs(s);

	if (t[0] == '\0' || epoch_parse(&e, t, strlen(t)) == -1)
		return "";
	memcpy(s->epoch, epoch_current(&e), sizeof(s->epoch));
	return s->epoch;
}

/* session_state's body (info 0), or the start of GET /sessions/{id}'s. */
static cJSON *
state_build(struct sess *s, int info)
{
	cJSON *o = cJSON_CreateObject(), *agents;

	cJSON_AddStringToObject(o, "status", sess_status(s));
	agents = cJSON_AddArrayToObject(o, "agents");
	cJSON_AddNumberToObject(o, "lastSeq", (double)sess_last_seq(s));
	/* Only once rewritten: a log never rewritten looks as it did. */
	if (sess_epoch(s)[0] != '\0')
		cJSON_AddStringToObject(o, "epoch", sess_epoch(s));
	cJSON_AddItemToObject(o, "autonomy", cJSON_Duplicate(
	    cJSON_GetObjectItem(sess_meta(s), "autonomy"), 1));
	cJSON_AddItemToObject(o, "config", cJSON_Duplicate(
	    cJSON_GetObjectItem(sess_meta(s), "config"), 1));
	s->wk->agent->waiting(s, o);
	cJSON_AddItemToArray(agents, sess_agent_json(s, cJSON_GetArraySize(
	    cJSON_GetObjectItem(o, "pendingApprovals")) > 0 ?
	    "waiting_approval" : s->turn ? "thinking" : "idle"));
	PARTS(s, part)
		if (part->state != NULL)
			part->state(s, o, info);
	return o;
}

cJSON *
sess_state(struct sess *s)
{
	return state_build(s, 0);
}

cJSON *
sess_info(struct sess *s)
{
	cJSON *o = state_build(s, 1), *r;
	char ts[32];
	static const char *copy[] = { "usage", "turns", "objective",
	    "metadata", "result" };
	size_t i;

	cJSON_AddStringToObject(o, "sessionId", s->id);
	util_iso8601(ts, (uint64_t)proto_count(sess_meta(s), "createdAt"));
	cJSON_AddStringToObject(o, "createdAt", ts);
	cJSON_AddNumberToObject(o, "firstSeq",
	    (double)deliver_first(&s->feed));
	cJSON_AddNumberToObject(o, "connections", s->feed.nsubs);
	for (i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
		if ((r = cJSON_GetObjectItem(sess_meta(s), copy[i])) != NULL)
			cJSON_AddItemToObject(o, copy[i], cJSON_Duplicate(r, 1));
	return o;
}

void
sess_stop(struct sess *s)
{
	/* Log what was coalesced; the turn itself stays in meta as running
	 * so the next owner re-runs it after saying so. */
	s->wk->agent->flush(s);
	s->wk->agent->drop(s);
}

/* Unlinks and frees a session that holds no connection. */
static void
sess_free(struct sess *s)
{
	struct wk *wk = s->wk;
	struct evt *e;
	unsigned i;

	loads_settle(s, "INTERNAL");
	acks_settle(s, 1);
	PARTS(s, part)
		if (part->free != NULL)
			part->free(s);
	deliver_free(&s->feed);
	store_req_cancel(s->fetch);
	store_req_cancel(s->promote);
	while ((e = s->phead) != NULL) {
		s->phead = e->next;
		evt_unref(e);
	}
	s->ptail = NULL;
	if (s->recover_ev != NULL)
		event_free(s->recover_ev);
	if (s->broken_ev != NULL)
		event_free(s->broken_ev);
	if (s->st != NULL) {
		s->st->udata = NULL;
		store_sess_close(s->st);
	}
	TAILQ_REMOVE(&wk->sessions, s, entry);
	TAILQ_REMOVE(&wk->buckets[sess_bucket(s->id)], s, hentry);
	wk->nsessions--;
	if (s->flush_ev != NULL)
		event_free(s->flush_ev);
	if (s->idle_ev != NULL)
		event_free(s->idle_ev);
	if (s->start_ev != NULL)
		event_free(s->start_ev);
	for (i = 0; i < s->id_n; i++)
		free(s->idr[i].id);
	free(s->idr);
	free(s->chat_req);
	sess_meta_set(s, NULL);
	free(s->tok);
	free(s);
}

void
sess_release(struct sess *s)
{
	struct wk *wk = s->wk;

	if (s->released)
		return;
	s->released = 1;
	if (s->loading) {
		/* The store still holds it as the open's callback argument:
		 * sess_opened frees it. */
		loads_settle(s, "INTERNAL");
		wk_released(wk, s->id);
		return;
	}
	deliver_close_all(&s->feed, WS_CLOSE_GOING_AWAY, "session moved; "
	    "reconnect with your lastSeq");
	if (s->turn != NULL)
		sess_stop(s);
	wk_released(wk, s->id);
	log_debug("session %s released", s->id);
	sess_free(s);
	wk_maybe_exit(wk);
}

/*
 * A draining worker hands a session over between turns, from a timer
 * (idle_cb); a request that reaches the session before the timer runs
 * would start a turn here instead and keep the old worker for as long as
 * its clients keep talking.  So input for an idle session of a draining
 * worker moves it first: its streams close with 1001 and the request goes
 * to the new owner (a WebSocket message unacknowledged: the client sends
 * it again there).  1 when s was released (and freed).
 */
int
sess_drain_now(struct sess *s)
{
	if (!s->wk->draining || s->released || s->loading || sess_busy(s))
		return 0;
	log_debug("drain: session %s released for a request", s->id);
	sess_release(s);
	return 1;
}

void
sess_release_all(struct wk *wk, int store_closed)
{
	struct sess *s, *next;

	for (s = TAILQ_FIRST(&wk->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		/* Released while loading: the store holds it until the open
		 * completes, and a closed store will never complete it. */
		if (s->released && s->loading) {
			if (store_closed)
				sess_free(s);
		} else
			sess_release(s);
	}
}

static void
broken_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sess *s = arg;

	/* Clients come back with their lastSeq; whoever owns the session
	 * by then serves them, and re-runs an interrupted turn. */
	deliver_close_all(&s->feed, WS_CLOSE_SERVICE_RESTART, "the session "
	    "store failed; reconnect with your lastSeq");
	s->wk->agent->drop(s);
	sess_release(s);
}

/*
 * The store failed this session (unreachable, or another process owns
 * it now).  Nothing not yet durable is sent; answers waiting for the
 * store are refused; the session leaves memory on the next loop pass
 * (the caller may be deep inside a turn).
 */
void
sess_break(struct sess *s, int err)
{
	struct evt *e;
	struct timeval tv = { 0, 0 };

	if (s->broken)
		return;
	s->broken = 1;
	log_warnx("session %s: %s; letting it go (clients reconnect and "
	    "resume)", s->id, err == ESTALE ? "fenced: another process owns "
	    "it now" : "the store failed a write");
	while ((e = s->phead) != NULL) {
		s->phead = e->next;
		evt_unref(e);
	}
	s->ptail = NULL;
	acks_settle(s, 1);
	if ((s->broken_ev = evtimer_new(s->wk->base, broken_cb, s)) != NULL)
		evtimer_add(s->broken_ev, &tv);
}

void
sess_store_failed(void *arg, struct store_sess *st, int err)
{
	struct wk *wk = arg;

	wk->metrics.store_errors++;
	if (st->udata != NULL)
		sess_break(st->udata, err);
}

/* Fills r with an error: code, HTTP status, message (fmt with one %s). */
void
sess_result_err(struct sess_result *r, const char *code, int http,
    const char *fmt, ...)
{
	va_list ap;

	r->code = code;
	r->http = http;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

/* --- answers that wait for the store --- */

void
sess_wait_free(struct sess_wait *w)
{
	store_req_cancel(w->req);
	free(w->id);
	free(w);
}

/*
 * Answers the waiting clients whose events are durable (all of them,
 * refused, when failed).
 */
static void
acks_settle(struct sess *s, int failed)
{
	struct sess_wait *w, *next;
	struct sess_result r;
	uint64_t durable = s->st ? store_durable_seq(s->st) : 0;

	for (w = TAILQ_FIRST(&s->acks); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (w->req != NULL && !failed)
			continue;	/* a post: its own callback */
		if (!failed && w->seq > durable)
			continue;
		TAILQ_REMOVE(&s->acks, w, entry);
		memset(&r, 0, sizeof(r));
		if (failed) {
			r.code = "OVERLOADED";
			r.http = 503;
			snprintf(r.msg, sizeof(r.msg), "the message could not "
			    "be stored; it was not accepted, retry");
		} else {
			r.seq = w->answer == ANSWER_NOOP ? 0 : w->seq;
			r.duplicate = w->answer == ANSWER_DUP;
			r.http = w->answer == ANSWER_NEW ? 202 : 200;
		}
		if (w->conn != NULL) {
			w->conn->waits--;
			w->conn->done(w->conn, s, w->id, &r);
		}
		sess_wait_free(w);	/* cancels a post still under way */
	}
}

/* Queues c's answer until seq is durable (or, with req, posted). */
int
sess_ack_wait(struct sess *s, struct sess_client *c, const char *id,
    uint64_t seq, enum sess_answer answer)
{
	struct sess_wait *w;

	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (id != NULL && (w->id = strdup(id)) == NULL)) {
		free(w);
		return -1;
	}
	w->conn = c;
	w->seq = seq;
	w->answer = answer;
	w->sess = s;
	c->waits++;
	TAILQ_INSERT_TAIL(&s->acks, w, entry);
	return 0;
}

/* r is answered only once seq is durable: pending until then. */
void
sess_answer_durable(struct sess *s, struct sess_client *c, const char *id,
    uint64_t seq, enum sess_answer answer, struct sess_result *r)
{
	if (c != NULL && seq > store_durable_seq(s->st) &&
	    sess_ack_wait(s, c, id, seq, answer) == 0)
		r->pending = 1;
}

int
sess_reply(struct sess *s, const char *type, const char *id, cJSON *body,
    int http, struct sess_result *r)
{
	memset(r, 0, sizeof(*r));
	r->http = http;
	if (id != NULL)
		cJSON_AddStringToObject(body, "id", id);
	/* proto_reply consumes body, also when it fails. */
	return (r->reply = proto_reply(type, s->id, body)) == NULL ? -1 : 0;
}

void
sess_client_gone(struct wk *wk, struct sess_client *c)
{
	struct sess_wait *w, *next;
	struct sess *s;

	if (c->waits == 0)
		return;
	TAILQ_FOREACH(s, &wk->sessions, entry) {
		for (w = TAILQ_FIRST(&s->acks); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->conn == c) {
				TAILQ_REMOVE(&s->acks, w, entry);
				sess_wait_free(w);
				sess_idle_again(s);
			}
		}
		PARTS(s, part)
			if (part->gone != NULL)
				part->gone(s, c);
	}
	c->waits = 0;
}

