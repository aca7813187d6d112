/*
 * Sessions.  Every event is appended to the session's log with the next
 * seq before any connection sees it; connections that keep up are fed the
 * shared encoded event, the others catch up from the log.  The meta object
 * (agents, usage, the running turn, queued input, history) is rewritten at
 * each turn boundary so another worker can continue the session.
 */
#include <sys/time.h>

#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/metrics.h"
#include "parley/proto.h"
#include "parley/sse.h"
#include "parley/store.h"
#include "parley/util.h"
#include "parley/ws.h"
#include "conn.h"
#include "llm.h"
#include "mcp.h"
#include "sess.h"
#include "worker.h"

#define MAX_ATTEMPTS	3	/* runs of one turn before it is reported failed */
#define MAX_HISTORY	200	/* messages kept as conversation history */
#define MAX_HISTORY_BYTES (1024 * 1024)	/* and their text, so meta stays small */
#define MAX_QUEUE	64	/* accepted messages waiting for their turn */
#define ID_SCAN		2000	/* log records read back for client ids */

static void	turn_next(struct sess *);
static void	turn_start(struct sess *, uint64_t input_seq, unsigned attempt,
		    const cJSON *from);

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

static double
secs_since(uint64_t us)
{
	uint64_t now = util_mono_us();

	return now > us ? (double)(now - us) / 1e6 : 0;
}

/* --- shared encoded events --- */

struct evt *
evt_new(uint64_t seq, const char *json, size_t len)
{
	static const char pfx[] = "{\"v\":1,\"type\":\"";
	struct evt *e;
	const char *t, *q;

	if ((e = calloc(1, sizeof(*e))) == NULL ||
	    (e->json = malloc(len + 1)) == NULL) {
		free(e);
		return NULL;
	}
	memcpy(e->json, json, len);
	e->json[len] = '\0';
	e->len = len;
	e->seq = seq;
	e->refs = 1;
	/* Every event this server writes starts with v then type. */
	if (strncmp(json, pfx, sizeof(pfx) - 1) == 0) {
		t = json + sizeof(pfx) - 1;
		if ((q = memchr(t, '"', len - (size_t)(t - json))) != NULL &&
		    (size_t)(q - t) < sizeof(e->type))
			memcpy(e->type, t, (size_t)(q - t));
	}
	return e;
}

void
evt_unref(struct evt *e)
{
	if (e == NULL || --e->refs > 0)
		return;
	free(e->json);
	free(e->ws);
	free(e->sse);
	free(e);
}

void
evt_unref_cb(const void *data, size_t len, void *arg)
{
	evt_unref(arg);
}

const unsigned char *
evt_ws(struct evt *e, size_t *len)
{
	unsigned char hdr[10];
	size_t h;

	if (e->ws == NULL) {
		h = ws_frame_header(hdr, WS_OP_TEXT, e->len);
		if ((e->ws = malloc(h + e->len)) == NULL)
			return NULL;
		memcpy(e->ws, hdr, h);
		memcpy(e->ws + h, e->json, e->len);
		e->wslen = h + e->len;
	}
	*len = e->wslen;
	return e->ws;
}

const char *
evt_sse(struct evt *e, size_t *len)
{
	if (e->sse == NULL &&
	    (e->sse = sse_event_string(e->seq, e->type[0] ? e->type : NULL,
	    e->json, e->len, &e->sselen)) == NULL)
		return NULL;
	*len = e->sselen;
	return e->sse;
}

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
	return s->fanned;
}

uint64_t
sess_first_seq(const struct sess *s)
{
	return store_first_seq(s->st);
}

int
sess_range(struct sess *s, uint64_t after, size_t limit,
    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t), void *arg)
{
	return store_range(s->st, after, limit, cb, arg);
}

/*
 * Reads this owner's log after `after` (limit 0: all) into cb: what the
 * store holds as durable, then the appends still on their way to it.
 * Returns the records read, or -1 when the store cannot answer at once.
 */
static int
log_read(struct sess *s, uint64_t after, size_t limit,
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

struct store_req *
sess_range_async(struct sess *s, uint64_t after, size_t limit,
    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t),
    void (*done)(void *, ssize_t), void *arg)
{
	return store_range_async(s->st, after, limit, cb, done, arg);
}

int
sess_busy(const struct sess *s)
{
	const cJSON *q = cJSON_GetObjectItem(s->meta, "queue");

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
	return s->turn != NULL || (cJSON_GetArraySize(q) > 0 &&
	    !sess_paused(s)) || s->recover_ev != NULL;
}

int
sess_paused(const struct sess *s)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(s->meta, "paused"));
}

const char *
sess_status(const struct sess *s)
{
	const cJSON *st = cJSON_GetObjectItem(s->meta, "status");

	if (s->ended)
		return "completed";
	if (cJSON_IsString(st) && strcmp(st->valuestring, "failed") == 0 &&
	    s->turn == NULL)
		return "failed";
	if (sess_paused(s))
		return "paused";
	if (s->nconns == 0)
		return "suspended";
	if (s->turn != NULL)
		return "running";
	if (cJSON_GetNumberValue(cJSON_GetObjectItem(s->meta, "turns")) == 0)
		return "created";
	return "idle";
}

/* --- persistence --- */

/* A non-negative number field, 0 when absent or not a number (never NaN). */
static double
json_count(const cJSON *o, const char *key)
{
	const cJSON *f = cJSON_GetObjectItem(o, key);

	if (!cJSON_IsNumber(f) || !(f->valuedouble >= 0) ||
	    f->valuedouble > 9007199254740991.0)
		return 0;
	return f->valuedouble;
}

/* Sets key to item (consumed), whether or not key was there. */
static void
json_set(cJSON *o, const char *key, cJSON *item)
{
	if (cJSON_GetObjectItemCaseSensitive(o, key) != NULL)
		cJSON_ReplaceItemInObjectCaseSensitive(o, key, item);
	else
		cJSON_AddItemToObject(o, key, item);
}

static void	sess_break(struct sess *, int err);

static void
meta_save(struct sess *s)
{
	char *txt;

	/* A follower's meta is the owner's, read-only; a broken session
	 * is being let go. */
	if (s->follower || s->broken || s->st == NULL)
		return;
	json_set(s->meta, "status",
	    cJSON_CreateString(sess_status(s)));
	json_set(s->meta, "updatedAt",
	    cJSON_CreateNumber((double)util_now_ms()));
	if ((txt = cJSON_PrintUnformatted(s->meta)) == NULL)
		return;
	if (store_meta_write_async(s->st, txt, strlen(txt)) == -1) {
		s->wk->metrics.store_errors++;
		log_warn("session %s: meta write", s->id);
		if (errno == EPIPE || errno == EIO)
			sess_break(s, EIO);
	}
	free(txt);
}

/*
 * Events a session with observers keeps for those that fall behind.  Read
 * back from the store, each client got a copy of every event it caught up
 * on (JSON and frame): 5,000 observers behind a fast turn took a worker to
 * 3.7 GB and stalled it in page faults past its lease.  At most
 * SESS_RECENT events and SESS_RECENT_BYTES of their JSON; kept only while
 * the session has two connections or more.
 */
#define SESS_RECENT		1024
#define SESS_RECENT_BYTES	(1024 * 1024)

static void
recent_drop_oldest(struct sess *s)
{
	struct evt **slot = &s->recent[s->recent_lo % SESS_RECENT];

	if (*slot != NULL) {
		s->recent_bytes -= (*slot)->len;
		evt_unref(*slot);
		*slot = NULL;
	}
	s->recent_lo++;
}

static void
recent_put(struct sess *s, struct evt *e)
{
	struct evt **slot;

	if (s->recent == NULL) {
		/* A session alone with its client keeps none. */
		if (s->nconns < 2 ||
		    (s->recent = calloc(SESS_RECENT, sizeof(*s->recent))) ==
		    NULL)
			return;
	}
	if (s->recent_hi != 0 && e->seq != s->recent_hi + 1) {
		/* A gap or a repeat (a follower's view, a promotion). */
		while (s->recent_lo <= s->recent_hi)
			recent_drop_oldest(s);
		s->recent_hi = 0;
	}
	if (s->recent_hi == 0)
		s->recent_lo = e->seq;
	while (s->recent_hi != 0 && (e->seq - s->recent_lo >= SESS_RECENT ||
	    s->recent_bytes + e->len > SESS_RECENT_BYTES) &&
	    s->recent_lo <= s->recent_hi)
		recent_drop_oldest(s);
	slot = &s->recent[e->seq % SESS_RECENT];
	e->refs++;
	*slot = e;
	s->recent_bytes += e->len;
	s->recent_hi = e->seq;
}

struct evt *
sess_recent(struct sess *s, uint64_t seq)
{
	struct evt *e;

	if (s->recent == NULL || s->recent_hi == 0 || seq < s->recent_lo ||
	    seq > s->recent_hi)
		return NULL;
	e = s->recent[seq % SESS_RECENT];
	return e != NULL && e->seq == seq ? e : NULL;
}

static void
recent_free(struct sess *s)
{
	size_t i;

	if (s->recent == NULL)
		return;
	for (i = 0; i < SESS_RECENT; i++)
		evt_unref(s->recent[i]);
	free(s->recent);
	s->recent = NULL;
	s->recent_hi = 0;
	s->recent_bytes = 0;
}

/* Hands durable events to the connections, oldest first. */
static void
fan_out(struct sess *s, struct evt *e)
{
	struct conn *c, *next;

	recent_put(s, e);
	if (e->seq > s->fanned)
		s->fanned = e->seq;
	for (c = TAILQ_FIRST(&s->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, sentry);
		conn_push(c, e);
	}
}

static void	acks_settle(struct sess *, int failed);
static int	ack_wait(struct sess *, struct conn *, const char *, uint64_t,
		    enum sess_answer);
static void	answer_durable(struct sess *, struct conn *, const char *,
		    uint64_t, enum sess_answer, struct sess_result *);
static void	idle_again(struct sess *);
static void	follower_input(struct sess *, struct conn *, int,
		    struct proto_in *, struct sess_result *);

void
sess_store_durable(void *arg, struct store_sess *st, uint64_t seq)
{
	struct sess *s = st->udata;
	struct evt *e;

	(void)arg;
	if (s == NULL)
		return;
	while ((e = s->phead) != NULL && e->seq <= seq) {
		s->phead = e->next;
		if (s->phead == NULL)
			s->ptail = NULL;
		e->next = NULL;
		metrics_observe(&s->wk->metrics.store_latency, MSC_SECONDS,
		    secs_since(e->appended_us));
		fan_out(s, e);
		evt_unref(e);
	}
	if (seq > s->fanned)
		s->fanned = seq;	/* encoded copy was not made: pumps read */
	acks_settle(s, 0);
	idle_again(s);
}

/*
 * What was in flight (events, answers) kept s busy: once none is, it may
 * idle out (no client) or drain.
 */
static void
idle_again(struct sess *s)
{
	if (s->phead == NULL && TAILQ_EMPTY(&s->acks) && (s->nconns == 0 ||
	    s->wk->draining))
		sess_check_idle(s);
}

/*
 * Appends one event and fans it out once the store has it.  body's fields
 * are moved into the event (body is consumed).  Returns the seq, or 0
 * when the store refused it, in which case no client saw it.
 */
static uint64_t
emit(struct sess *s, const char *type, cJSON *body)
{
	struct evt *e;
	cJSON *o, *f;
	char ts[32], *txt;
	uint64_t seq, now = util_now_ms();

	if (s->follower || s->broken || s->st == NULL) {
		cJSON_Delete(body);
		return 0;
	}
	seq = store_last_seq(s->st) + 1;
	o = proto_head(type, s->id);
	cJSON_AddNumberToObject(o, "seq", (double)seq);
	util_iso8601(ts, now);
	cJSON_AddStringToObject(o, "ts", ts);
	if (body != NULL) {
		while ((f = body->child) != NULL) {
			cJSON_DetachItemViaPointer(body, f);
			cJSON_AddItemToObject(o, f->string, f);
		}
		cJSON_Delete(body);
	}
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL || (e = evt_new(seq, txt, strlen(txt))) == NULL) {
		free(txt);
		return 0;
	}
	free(txt);
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
	if (s->wk->conf->fsync == CFG_FSYNC_BATCH && s->wk->sync_ev &&
	    !evtimer_pending(s->wk->sync_ev, NULL)) {
		struct timeval tv;

		util_tv(&tv, 200);
		evtimer_add(s->wk->sync_ev, &tv);
	}
	return seq;
}

static cJSON *
agent_json(struct sess *s, const char *status)
{
	const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(s->meta,
	    "agents"), 0);
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "agentId", s->agent_id);
	if (status != NULL)
		cJSON_AddStringToObject(o, "status", status);
	cJSON_AddItemToObject(o, "role", cJSON_Duplicate(
	    cJSON_GetObjectItem(a, "role"), 1));
	cJSON_AddItemToObject(o, "provider", cJSON_Duplicate(
	    cJSON_GetObjectItem(a, "provider"), 1));
	return o;
}

/* --- token coalescing --- */

/* Bytes of buf that end on a whole UTF-8 sequence. */
static size_t
utf8_whole(const char *buf, size_t len)
{
	size_t i = len, need;
	unsigned char b;

	while (i > 0 && len - i < 4) {
		b = (unsigned char)buf[i - 1];
		if ((b & 0xc0) != 0x80) {
			need = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
			return (len - (i - 1) >= need) ? len : i - 1;
		}
		i--;
	}
	return len;
}

static void
tokens_flush(struct sess *s)
{
	size_t n;
	cJSON *b;
	char *content;

	if (s->toklen == 0 || s->turn == NULL)
		return;
	if ((n = utf8_whole(s->tok, s->toklen)) == 0)
		return;
	if ((content = strndup(s->tok, n)) == NULL)
		return;
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", s->turn->msgid);
	cJSON_AddStringToObject(b, "content", content);
	free(content);
	memmove(s->tok, s->tok + n, s->toklen - n);
	s->toklen -= n;
	s->flushed_us = loop_us(s->wk);
	emit(s, "token", b);
}

static void
flush_cb(evutil_socket_t fd, short ev, void *arg)
{
	tokens_flush(arg);
}

/* The provider the turns use, by its configured name, for the log. */
static const char *
prov_name(const struct sess *s)
{
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
	    MSC_SECONDS, secs_since(t->call_us));
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
	if (evtimer_pending(s->flush_ev, NULL))
		return;
	now = loop_us(s->wk);
	iv = s->wk->conf->flush_interval_ms * 1000;
	if (now < s->flushed_us || now - s->flushed_us >= iv - iv / 4) {
		tokens_flush(s);
		return;
	}
	wait = iv - (now - s->flushed_us);
	util_tv_us(&tv, wait);
	evtimer_add(s->flush_ev, &tv);
}

/* --- turns --- */

/* Appends one message (consumed) to the history, bounded by count and bytes. */
static void
history_add_item(struct sess *s, cJSON *m)
{
	cJSON *h = cJSON_GetObjectItem(s->meta, "history");

	if (h == NULL)
		cJSON_AddItemToObject(s->meta, "history",
		    h = cJSON_CreateArray());
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
history_add(struct sess *s, const char *role, const char *content)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddStringToObject(m, "role", role);
	cJSON_AddStringToObject(m, "content", content);
	history_add_item(s, m);
}

/* --- turns and the tool loop --- */

#define MAX_TOOL_RESULT		(256 * 1024)	/* bytes of a result kept */

struct tool_run {
	TAILQ_ENTRY(tool_run)	 entry;
	struct sess		*s;
	struct mcp_call		*mc;
	char			*id;
	char			*name;
	uint64_t		 started_ms;
};

static void	turn_model(struct sess *);
static void	tools_run(struct sess *, cJSON *calls);

/* Stops and frees the running turn; meta still names it (see turn_free). */
static void
turn_drop(struct sess *s)
{
	struct turn *t = s->turn;
	struct tool_run *r;

	if (t == NULL)
		return;
	if (t->call != NULL)
		llm_cancel(t->call);
	while ((r = TAILQ_FIRST(&t->runs)) != NULL) {
		TAILQ_REMOVE(&t->runs, r, entry);
		mcp_cancel(r->mc);
		free(r->id);
		free(r->name);
		free(r);
	}
	cJSON_Delete(t->steps);
	cJSON_Delete(t->calls);
	free(t->reply);
	free(t->input);
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
	json_set(s->meta, "turn", cJSON_CreateNull());
}

static void
usage_add(struct sess *s, const struct llm_usage *u, cJSON *into)
{
	cJSON *tot = cJSON_GetObjectItem(s->meta, "usage");
	double in = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "inputTokens"));
	double out = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "outputTokens"));
	double cost = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "cost"));

	s->wk->metrics.tokens_input += u->input_tokens;
	s->wk->metrics.tokens_output += u->output_tokens;
	s->wk->metrics.cost_usd += u->cost;
	in = (in != in ? 0 : in) + (double)u->input_tokens;
	out = (out != out ? 0 : out) + (double)u->output_tokens;
	cost = (cost != cost ? 0 : cost) + u->cost;
	tot = cJSON_CreateObject();
	cJSON_AddNumberToObject(tot, "inputTokens", in);
	cJSON_AddNumberToObject(tot, "outputTokens", out);
	cJSON_AddNumberToObject(tot, "tokens", in + out);
	cJSON_AddNumberToObject(tot, "cost", cost);
	json_set(s->meta, "usage", tot);
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

/* The turn's state in meta: enough for another worker to continue it. */
static void
turn_checkpoint(struct sess *s)
{
	struct turn *t = s->turn;
	cJSON *ts = cJSON_CreateObject();

	cJSON_AddStringToObject(ts, "messageId", t->msgid);
	cJSON_AddNumberToObject(ts, "inputSeq", (double)t->input_seq);
	cJSON_AddNumberToObject(ts, "attempt", t->attempt);
	cJSON_AddNumberToObject(ts, "modelCalls", t->model_calls);
	cJSON_AddNumberToObject(ts, "inputTokens", (double)t->in_tokens);
	cJSON_AddNumberToObject(ts, "outputTokens", (double)t->out_tokens);
	cJSON_AddNumberToObject(ts, "cost", t->cost);
	cJSON_AddItemToObject(ts, "steps", cJSON_Duplicate(t->steps, 1));
	json_set(s->meta, "turn", ts);
	meta_save(s);
}

/*
 * Has the current step (the tool messages after the last assistant message
 * with calls) an answer for call id?  Made-up ids repeat across steps.
 */
static int
step_answered(const struct turn *t, const char *id)
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
		if (id == NULL || step_answered(t, id))
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
static void
turn_finish(struct sess *s, int cancelled, int max_turns)
{
	struct turn *t = s->turn;
	struct llm_usage u;
	cJSON *b, *e;
	double turns;

	tokens_flush(s);
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
	emit(s, "done", b);
	log_rinfo(t->req, s->id, "turn %s %s: %u model calls, %llu input and "
	    "%llu output tokens, cost %.6f", t->msgid, cancelled ? "cancelled" :
	    "finished", t->model_calls, (unsigned long long)u.input_tokens,
	    (unsigned long long)u.output_tokens, u.cost);
	/* The whole exchange joins the history at once, so a re-run after a
	 * crash (which starts from meta saved before this) adds it once. */
	history_add(s, "user", t->input ? t->input : "");
	steps_close(t);
	cJSON_ArrayForEach(e, t->steps)
		history_add_item(s, cJSON_Duplicate(e, 1));
	history_add(s, "assistant", t->reply ? t->reply + t->step_from : "");
	turns = cJSON_GetNumberValue(cJSON_GetObjectItem(s->meta, "turns"));
	json_set(s->meta, "turns",
	    cJSON_CreateNumber((turns != turns ? 0 : turns) + 1));
	turn_free(s);
	emit(s, "agent_state", agent_json(s, "idle"));
	meta_save(s);
}

/* Ends the turn with an error event (no done: the model did not finish). */
static void
turn_fail(struct sess *s, const char *code, const char *message)
{
	struct llm_usage u;
	cJSON *b;

	tokens_flush(s);
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "code", code);
	cJSON_AddStringToObject(b, "message", message);
	cJSON_AddStringToObject(b, "severity", "recoverable");
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", s->turn->msgid);
	emit(s, "error", b);
	log_rinfo(s->turn->req, s->id, "turn %s failed: %s: %s",
	    s->turn->msgid, code, message);
	/* Model calls that finished before the failure were spent. */
	u.input_tokens = s->turn->in_tokens;
	u.output_tokens = s->turn->out_tokens;
	u.cost = s->turn->cost;
	usage_add(s, &u, NULL);
	history_add(s, "user", s->turn->input ? s->turn->input : "");
	turn_free(s);
	emit(s, "agent_state", agent_json(s, "idle"));
	meta_save(s);
}

static void
on_tool_call(void *arg, const char *id, const char *name, const char *args)
{
	struct sess *s = arg;
	cJSON *c;

	if (s->turn == NULL)
		return;
	call_byte(s);
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "id", id);
	cJSON_AddStringToObject(c, "name", name);
	cJSON_AddStringToObject(c, "args", args ? args : "");
	cJSON_AddItemToArray(s->turn->calls, c);
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
	    t->model_calls + 1, secs_since(t->call_us) * 1000,
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
	tokens_flush(s);
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
	tools_run(s, calls);
	cJSON_Delete(calls);
}

static void
on_error(void *arg, const char *code, const char *message)
{
	struct sess *s = arg;

	s->wk->metrics.provider_errors[s->turn->prov]++;
	log_rinfo(s->turn->req, s->id, "provider %s: model call %u failed "
	    "after %.0f ms: %s: %s", prov_name(s), s->turn->model_calls + 1,
	    secs_since(s->turn->call_us) * 1000, code, message);
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
	    s->turn->model_calls + 1, secs_since(s->turn->call_us) * 1000, why);
	tokens_flush(s);
	s->toklen = 0;
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "code", "LLM_ERROR");
	cJSON_AddStringToObject(b, "message", why);
	cJSON_AddStringToObject(b, "severity", "recoverable");
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", s->turn->msgid);
	cJSON_AddBoolToObject(b, "retrying", 1);
	emit(s, "error", b);
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

/* Risk of a tool from its MCP annotations, for approvals to come. */
static const char *
tool_risk(const struct mcp_tool *mt)
{
	if (mt == NULL)
		return "unknown";
	if (mt->read_only)
		return "low";
	return mt->destructive ? "high" : "medium";
}

static const struct mcp_tool *
tool_find(struct sess *s, const char *name)
{
	const struct mcp_tool *tools;
	size_t i, n = s->wk->mcp ? mcp_tools(s->wk->mcp, &tools) : 0;

	for (i = 0; i < n; i++)
		if (strcmp(tools[i].full_name, name) == 0)
			return &tools[i];
	return NULL;
}

/* Logs a tool's result and keeps it for the model; runs the model on
 * once every call of the step has answered. */
static void
tool_done(struct sess *s, const char *id, const char *name, uint64_t ms,
    int is_error, const char *text, const char *code)
{
	struct turn *t = s->turn;
	cJSON *b, *m;
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
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "agentId", s->agent_id);
	cJSON_AddStringToObject(b, "messageId", t->msgid);
	cJSON_AddNumberToObject(b, "step", t->model_calls);
	cJSON_AddStringToObject(b, "toolCallId", id);
	cJSON_AddStringToObject(b, "tool", name);
	cJSON_AddNumberToObject(b, "duration", (double)ms);
	if (is_error) {
		cJSON *e = cJSON_AddObjectToObject(b, "error");

		cJSON_AddStringToObject(e, "code", code ? code : "TOOL_ERROR");
		cJSON_AddStringToObject(e, "message", text);
	} else
		cJSON_AddStringToObject(b, "result", text);
	emit(s, "tool_result", b);
	m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "role", "tool");
	cJSON_AddStringToObject(m, "toolCallId", id);
	cJSON_AddStringToObject(m, "tool", name);
	cJSON_AddStringToObject(m, "content", text);
	if (is_error)
		cJSON_AddBoolToObject(m, "isError", 1);
	cJSON_AddItemToArray(t->steps, m);
	free(kept);
	turn_checkpoint(s);
	if (TAILQ_EMPTY(&t->runs) && !t->starting) {
		emit(s, "agent_state", agent_json(s, "thinking"));
		turn_model(s);
	}
}

static void
tool_cb(void *arg, int is_error, const char *text, const char *code)
{
	struct tool_run *r = arg;
	struct sess *s = r->s;

	TAILQ_REMOVE(&s->turn->runs, r, entry);
	tool_done(s, r->id, r->name, util_mono_ms() - r->started_ms,
	    is_error, text, code);
	free(r->id);
	free(r->name);
	free(r);
}

/* Has the log a tool_result for this call (a worker died after it)? */
struct logged_result {
	const char	*id;
	uint64_t	 input_seq;	/* the turn, whatever its attempt */
	unsigned	 step;
	cJSON		*found;
};

static int
find_result(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct logged_result *lr = arg;
	const char *tid, *mid;
	char want[32];
	size_t n;
	cJSON *o;

	if (strstr(json, "\"type\":\"tool_result\"") == NULL ||
	    strstr(json, lr->id) == NULL)
		return 0;
	o = cJSON_ParseWithLength(json, len);
	tid = cJSON_GetStringValue(cJSON_GetObjectItem(o, "toolCallId"));
	mid = cJSON_GetStringValue(cJSON_GetObjectItem(o, "messageId"));
	snprintf(want, sizeof(want), "m-%llu", (unsigned long long)lr->input_seq);
	n = strlen(want);
	if (tid != NULL && strcmp(tid, lr->id) == 0 && mid != NULL &&
	    strncmp(mid, want, n) == 0 && (mid[n] == '\0' || mid[n] == '.') &&
	    json_count(o, "step") == lr->step) {
		lr->found = o;
		return 1;
	}
	cJSON_Delete(o);
	return 0;
}

/*
 * Runs a step's tool calls, all at once.  A call whose result the log
 * already holds is not run again; an unknown tool answers an error the
 * model can read.
 */
static void
tools_run(struct sess *s, cJSON *calls)
{
	struct turn *t = s->turn;
	const struct mcp_tool *mt;
	struct tool_run *r;
	struct logged_result lr;
	const char *id, *name, *args, *text;
	cJSON *c, *b, *a, *e;

	if (s->broken)
		return;	/* being let go: nothing more runs */

	emit(s, "agent_state", agent_json(s, "tool"));
	t->starting = 1;
	cJSON_ArrayForEach(c, calls) {
		id = cJSON_GetStringValue(cJSON_GetObjectItem(c, "id"));
		name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
		args = cJSON_GetStringValue(cJSON_GetObjectItem(c, "args"));
		if (id == NULL || name == NULL)
			continue;
		/* Answered before a crash: in the checkpoint, or the log. */
		if (step_answered(t, id))
			continue;
		lr.id = id;
		lr.input_seq = t->input_seq;
		lr.step = t->model_calls;
		lr.found = NULL;
		if (t->attempt > 0)
			log_read(s, t->input_seq, 0, find_result, &lr);
		if (lr.found != NULL) {
			e = cJSON_GetObjectItem(lr.found, "error");
			text = e ? cJSON_GetStringValue(cJSON_GetObjectItem(e,
			    "message")) : cJSON_GetStringValue(
			    cJSON_GetObjectItem(lr.found, "result"));
			b = cJSON_CreateObject();
			cJSON_AddStringToObject(b, "role", "tool");
			cJSON_AddStringToObject(b, "toolCallId", id);
			cJSON_AddStringToObject(b, "tool", name);
			cJSON_AddStringToObject(b, "content", text ? text : "");
			if (e != NULL)
				cJSON_AddBoolToObject(b, "isError", 1);
			cJSON_AddItemToArray(t->steps, b);
			cJSON_Delete(lr.found);
			continue;
		}
		mt = tool_find(s, name);
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "agentId", s->agent_id);
		cJSON_AddStringToObject(b, "messageId", t->msgid);
		cJSON_AddNumberToObject(b, "step", t->model_calls);
		cJSON_AddStringToObject(b, "toolCallId", id);
		cJSON_AddStringToObject(b, "tool", name);
		a = cJSON_Parse(args && *args ? args : "{}");
		cJSON_AddItemToObject(b, "args", a ? a : cJSON_CreateObject());
		cJSON_AddStringToObject(b, "risk", tool_risk(mt));
		emit(s, "tool_start", b);
		if ((r = calloc(1, sizeof(*r))) == NULL)
			continue;
		r->s = s;
		r->id = strdup(id);
		r->name = strdup(name);
		r->started_ms = util_mono_ms();
		s->wk->metrics.tool_calls++;
		log_rinfo(t->req, s->id, "tool %s: call %s started", name, id);
		TAILQ_INSERT_TAIL(&t->runs, r, entry);
		if (mt == NULL || (r->mc = mcp_call(s->wk->mcp, name,
		    args && *args ? args : "{}", 0, tool_cb,
		    r)) == NULL) {
			TAILQ_REMOVE(&t->runs, r, entry);
			tool_done(s, id, name, 0, 1, mt == NULL ? "no such "
			    "tool: it is not offered by any connected MCP "
			    "server" : "the tool call could not be started",
			    "TOOL_ERROR");
			free(r->id);
			free(r->name);
			free(r);
		}
	}
	t->starting = 0;
	turn_checkpoint(s);
	if (TAILQ_EMPTY(&t->runs)) {
		emit(s, "agent_state", agent_json(s, "thinking"));
		turn_model(s);
	}
}

struct fetch {
	char	*text;
	char	 req[17];	/* its client's request id, or "" */
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
	/* clientId is "c-" and the connection's id in decimal (sess_input):
	 * the request id the client's log lines carry, in hex. */
	m = cJSON_GetObjectItem(o, "clientId");
	if (cJSON_IsString(m) && strncmp(m->valuestring, "c-", 2) == 0 &&
	    m->valuestring[2] >= '0' && m->valuestring[2] <= '9')
		log_reqid(f->req, strtoull(m->valuestring + 2, NULL, 10));
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

/* Asks the model for the next step: history, the user's input, the steps. */
static void
turn_model(struct sess *s)
{
	static const struct llm_cbs cbs = { on_token, on_done, on_error,
	    on_tool_call, on_retrying };
	struct turn *t = s->turn;
	const struct cfg_provider *p;
	const cJSON *h = cJSON_GetObjectItem(s->meta, "history"), *e;
	const struct mcp_tool *mt = NULL;
	struct llm_tool_def *defs = NULL;
	struct llm_tool_call **store;
	struct llm_msg *msgs;
	size_t n = 0, i, ntools, cap;

	if (s->broken)
		return;	/* being let go: nothing more runs */

	cap = (size_t)cJSON_GetArraySize(h) + (size_t)cJSON_GetArraySize(
	    t->steps) + 1;
	msgs = calloc(cap, sizeof(*msgs));
	store = calloc(cap, sizeof(*store));
	ntools = s->wk->mcp ? mcp_tools(s->wk->mcp, &mt) : 0;
	if (ntools > 0 && (defs = calloc(ntools, sizeof(*defs))) != NULL)
		for (i = 0; i < ntools; i++) {
			defs[i].name = mt[i].full_name;
			defs[i].description = mt[i].description;
			defs[i].schema_json = mt[i].schema_json;
		}
	if (msgs != NULL && store != NULL) {
		cJSON_ArrayForEach(e, h)
			if (msg_from(e, &msgs[n], &store[n]) == 0)
				n++;
		msgs[n].role = "user";
		msgs[n].content = t->input ? t->input : "";
		n++;
		cJSON_ArrayForEach(e, t->steps)
			if (msg_from(e, &msgs[n], &store[n]) == 0)
				n++;
	}
	p = config_provider(s->wk->conf, s->wk->conf->default_provider);
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
	if (t->call == NULL) {
		s->wk->metrics.provider_errors[t->prov]++;
		turn_fail(s, "LLM_ERROR", "the provider could not start the "
		    "request; check the provider configuration");
		turn_next(s);
	}
}

/*
 * Starts (or, after a crash, continues) the turn answering the message
 * logged at input_seq.  from is the turn's checkpoint from meta, or NULL.
 */
static void
turn_start(struct sess *s, uint64_t input_seq, unsigned attempt,
    const cJSON *from)
{
	const cJSON *steps = cJSON_GetObjectItem(from, "steps");
	struct fetch f = { NULL, "" };
	struct turn *t;
	cJSON *calls, *e;

	if (s->broken)
		return;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return;
	t->input_seq = input_seq;
	t->attempt = attempt;
	TAILQ_INIT(&t->runs);
	if (attempt == 0)
		snprintf(t->msgid, sizeof(t->msgid), "m-%llu",
		    (unsigned long long)input_seq);
	else
		snprintf(t->msgid, sizeof(t->msgid), "m-%llu.%u",
		    (unsigned long long)input_seq, attempt);
	t->steps = cJSON_IsArray(steps) ? cJSON_Duplicate(steps, 1) :
	    cJSON_CreateArray();
	/* What the turn spent before the crash still counts, and so do its
	 * model calls against max-turns. */
	t->model_calls = (unsigned)json_count(from, "modelCalls");
	t->in_tokens = (uint64_t)json_count(from, "inputTokens");
	t->out_tokens = (uint64_t)json_count(from, "outputTokens");
	t->cost = json_count(from, "cost");
	t->calls = cJSON_CreateArray();
	if (log_read(s, input_seq - 1, 1, fetch_message, &f) < 0)
		log_warnx("session %s: the message of seq %llu is not at hand; "
		    "the turn runs without it", s->id,
		    (unsigned long long)input_seq);
	t->input = f.text;
	memcpy(t->req, f.req, sizeof(t->req));
	s->turn = t;
	log_rinfo(t->req, s->id, "turn %s started for message seq %llu%s",
	    t->msgid, (unsigned long long)input_seq, attempt > 0 ?
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
		tools_run(s, calls);
		cJSON_Delete(calls);
		return;
	}
	emit(s, "agent_state", agent_json(s, "thinking"));
	turn_model(s);
}

/* Starts the next queued input, if no turn runs and the session lives. */
static void
turn_next(struct sess *s)
{
	cJSON *q = cJSON_GetObjectItem(s->meta, "queue"), *first;
	struct timeval tv;
	uint64_t seq;

	/* The interrupted turn goes first; recover_cb calls back here (after
	 * its events are read back: s->promote, on an owner). */
	if (s->recover_ev != NULL || s->broken ||
	    (s->promote != NULL && !s->follower) || sess_paused(s)) {
		sess_check_idle(s);
		return;
	}
	if (s->turn == NULL && cJSON_GetArraySize(q) > 0 && tools_pending(s)) {
		util_tv(&tv, 100);
		evtimer_add(s->start_ev, &tv);
		return;
	}
	while (s->turn == NULL && !s->ended && cJSON_GetArraySize(q) > 0) {
		first = cJSON_GetArrayItem(q, 0);
		seq = cJSON_IsNumber(first) && first->valuedouble >= 1 ?
		    (uint64_t)first->valuedouble : 0;
		cJSON_DeleteItemFromArray(q, 0);
		if (seq == 0)
			continue;
		turn_start(s, seq, 0, NULL);
	}
	sess_check_idle(s);
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
	cJSON *t = cJSON_GetObjectItem(s->meta, "turn"), *b, *from;
	uint64_t seq = (uint64_t)json_count(t, "inputSeq");
	unsigned attempt = (unsigned)json_count(t, "attempt");
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
	if (!cJSON_IsObject(t) || seq == 0 || mid == NULL || s->turn != NULL) {
		turn_next(s);
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
		emit(s, "error", b);
		json_set(s->meta, "turn", cJSON_CreateNull());
		json_set(s->meta, "status",
		    cJSON_CreateString("failed"));
		emit(s, "agent_state", agent_json(s, "idle"));
		meta_save(s);
		turn_next(s);
		return;
	}
	snprintf(msg, sizeof(msg), "the worker running this turn stopped; "
	    "its partial output stays logged and the turn continues from its "
	    "last step (tool calls with logged results are not run again)");
	cJSON_AddStringToObject(b, "message", msg);
	cJSON_AddStringToObject(b, "severity", "recoverable");
	emit(s, "error", b);
	from = cJSON_Duplicate(t, 1);
	turn_start(s, seq, attempt + 1, from);
	cJSON_Delete(from);
}

/* --- at-most-once input --- */

static int
ids_find(struct sess *s, const char *id, uint64_t *seq)
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
static void
ids_add(struct sess *s, const char *id, uint64_t seq)
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
	if (strstr(json, "\"type\":\"user_message\"") == NULL)
		return 0;
	o = cJSON_ParseWithLength(json, len);
	if (cJSON_IsString(id = cJSON_GetObjectItem(o, "id")))
		ids_add(s, id->valuestring, seq);
	cJSON_Delete(o);
	return 0;
}

/* --- life cycle --- */

static void
idle_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sess *s = arg;

	if ((s->nconns == 0 || s->wk->draining) && !sess_busy(s))
		sess_release(s);
}

void
sess_check_idle(struct sess *s)
{
	struct timeval tv;

	if (s->released)
		return;
	if (s->wk->draining && !sess_busy(s)) {
		/* Its turn is over: clients move to the new owner. */
		util_tv(&tv, 0);
		evtimer_add(s->idle_ev, &tv);
		return;
	}
	if (s->nconns > 0 || sess_busy(s)) {
		evtimer_del(s->idle_ev);
		return;
	}
	if (s->wk->draining || s->wk->terminating) {
		/* Nothing left to finish here: let the new owner have it. */
		util_tv(&tv, 0);
		evtimer_add(s->idle_ev, &tv);
		return;
	}
	util_tv(&tv, s->wk->conf->idle_timeout_ms);
	evtimer_add(s->idle_ev, &tv);
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
	cfg = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "config"), "autonomy");
	cJSON_AddStringToObject(m, "autonomy", cJSON_IsString(cfg) ?
	    cfg->valuestring : "SUPERVISED");
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
	return m;
}

/* --- loading --- */

static void	sess_opened(void *, int, struct store_sess *, enum store_role);
static void	sess_free(struct sess *);

static struct sess *
sess_new(struct wk *wk, const char *id)
{
	struct sess *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->wk = wk;
	snprintf(s->id, sizeof(s->id), "%s", id);
	TAILQ_INIT(&s->conns);
	TAILQ_INIT(&s->loads);
	TAILQ_INIT(&s->acks);
	s->flush_ev = evtimer_new(wk->base, flush_cb, s);
	s->idle_ev = evtimer_new(wk->base, idle_cb, s);
	s->start_ev = evtimer_new(wk->base, start_cb, s);
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

/* Reads meta into s->meta; a default one (saved when owned) if none. */
static void
meta_load(struct sess *s)
{
	char *txt;
	cJSON *t;

	cJSON_Delete(s->meta);
	s->meta = NULL;
	s->fresh = 0;
	if ((txt = store_meta_read(s->st)) != NULL) {
		s->meta = cJSON_Parse(txt);
		free(txt);
		if (!cJSON_IsObject(s->meta)) {
			log_warnx("session %s: meta is not a JSON object; "
			    "starting a fresh one (the log is kept)", s->id);
			cJSON_Delete(s->meta);
			s->meta = NULL;
		}
	}
	if (s->meta == NULL) {
		s->meta = meta_new(s, NULL);
		s->fresh = !s->follower && store_last_seq(s->st) == 0;
		meta_save(s);
	}
	t = cJSON_GetArrayItem(cJSON_GetObjectItem(s->meta, "agents"), 0);
	snprintf(s->agent_id, sizeof(s->agent_id), "%s",
	    cJSON_GetStringValue(cJSON_GetObjectItem(t, "agentId")) ?
	    cJSON_GetStringValue(cJSON_GetObjectItem(t, "agentId")) :
	    "assistant");
	if (!cJSON_IsArray(cJSON_GetObjectItem(s->meta, "queue")))
		json_set(s->meta, "queue", cJSON_CreateArray());
	t = cJSON_GetObjectItem(s->meta, "status");
	s->ended = cJSON_IsString(t) && strcmp(t->valuestring, "completed") == 0;
}

/* This process owns the session now: continue what its meta says. */
static void
sess_own(struct sess *s)
{
	cJSON *t;
	uint64_t last = store_last_seq(s->st), from;

	s->follower = 0;
	meta_load(s);
	s->fanned = store_durable_seq(s->st);
	s->scan_paused = -1;
	store_range(s->st, last > ID_SCAN ? last - ID_SCAN : 0, 0, ids_scan, s);
	if (s->scan_paused != -1 && s->scan_paused != sess_paused(s))
		json_set(s->meta, "paused", cJSON_CreateBool(s->scan_paused));
	t = cJSON_GetObjectItem(s->meta, "turn");
	if (cJSON_IsObject(t)) {
		/* The re-run reads the turn's logged events back (tool
		 * results, the message): make them readable at once. */
		from = (uint64_t)json_count(t, "inputSeq");
		s->promote = store_preload_async(s->st, from ? from - 1 : 0,
		    recover_ready, s);
	} else if (cJSON_GetArraySize(cJSON_GetObjectItem(s->meta, "queue")))
		turn_next(s);
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
		if (err == ENOENT && s->load_created == 0 && s->fresh) {
			/* A waiter that may create came while it loaded. */
			s->loading = s->load_created = 1;
			s->fresh = 0;
			store_open_async(wk->store, s->id, 1, ID_SCAN,
			    sess_opened, s);
			return;
		}
		if (err != ENOENT) {
			wk->metrics.store_errors++;
			log_warnx("session %s: open: %s", s->id, strerror(err));
		}
		loads_settle(s, err == ENOENT ? "NOT_FOUND" : "INTERNAL");
		wk_released(wk, s->id);
		sess_free(s);
		wk_maybe_exit(wk);
		return;
	}
	s->st = st;
	st->udata = s;
	s->fresh = 0;
	if (role == STORE_FOLLOWER) {
		s->follower = 1;
		meta_load(s);
		s->fanned = store_last_seq(st);
	} else
		sess_own(s);
	log_debug("session %s: %s, last seq %llu", s->id,
	    s->follower ? "following" : s->fresh ? "created" : "opened",
	    (unsigned long long)store_last_seq(st));
	loads_settle(s, NULL);
	if (!s->released)
		sess_check_idle(s);
}

void
sess_load(struct wk *wk, const char *id, int create,
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
	if (s->loading) {
		/* fresh doubles as "a later waiter may create" while loading */
		if (create && !s->load_created)
			s->fresh = 1;
		return;
	}
	s->loading = 1;
	s->load_created = create;
	store_open_async(wk->store, id, create, ID_SCAN, sess_opened, s);
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
sess_get(struct wk *wk, const char *id, int create, int *created,
    cJSON *body, const char **err)
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
		sess_load(wk, id, create, get_loaded, &r);
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
	if (create && s->fresh && !s->follower) {
		/* Its first user says what it is. */
		if (body != NULL) {
			cJSON_Delete(s->meta);
			s->meta = NULL;
			s->meta = meta_new(s, body);
			snprintf(s->agent_id, sizeof(s->agent_id), "%s",
			    cJSON_GetStringValue(cJSON_GetObjectItem(
			    cJSON_GetArrayItem(cJSON_GetObjectItem(s->meta,
			    "agents"), 0), "agentId")));
			meta_save(s);
		}
		if (created)
			*created = 1;
		s->fresh = 0;
	}
	return s;
}

void
sess_attach(struct sess *s, struct conn *c)
{
	TAILQ_INSERT_TAIL(&s->conns, c, sentry);
	s->nconns++;
	c->sess = s;
	sess_check_idle(s);
}

void
sess_detach(struct sess *s, struct conn *c)
{
	TAILQ_REMOVE(&s->conns, c, sentry);
	s->nconns--;
	c->sess = NULL;
	if (s->nconns < 2)
		recent_free(s);
	sess_check_idle(s);
}

cJSON *
sess_state(struct sess *s)
{
	cJSON *o = cJSON_CreateObject(), *agents, *a;

	cJSON_AddStringToObject(o, "status", sess_status(s));
	agents = cJSON_AddArrayToObject(o, "agents");
	a = agent_json(s, s->turn ? "thinking" : "idle");
	cJSON_AddItemToArray(agents, a);
	cJSON_AddNumberToObject(o, "lastSeq", (double)sess_last_seq(s));
	cJSON_AddItemToObject(o, "autonomy", cJSON_Duplicate(
	    cJSON_GetObjectItem(s->meta, "autonomy"), 1));
	cJSON_AddItemToObject(o, "config", cJSON_Duplicate(
	    cJSON_GetObjectItem(s->meta, "config"), 1));
	return o;
}

cJSON *
sess_info(struct sess *s)
{
	cJSON *o = sess_state(s), *r;
	char ts[32];
	static const char *copy[] = { "usage", "turns", "objective",
	    "metadata", "result" };
	size_t i;

	cJSON_AddStringToObject(o, "sessionId", s->id);
	util_iso8601(ts, (uint64_t)json_count(s->meta, "createdAt"));
	cJSON_AddStringToObject(o, "createdAt", ts);
	cJSON_AddNumberToObject(o, "firstSeq", (double)sess_first_seq(s));
	cJSON_AddNumberToObject(o, "connections", s->nconns);
	for (i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
		if ((r = cJSON_GetObjectItem(s->meta, copy[i])) != NULL)
			cJSON_AddItemToObject(o, copy[i], cJSON_Duplicate(r, 1));
	return o;
}

static int
sess_terminate(struct sess *s, const char *why)
{
	cJSON *b, *r;
	char ts[32];

	if (s->ended)
		return 0;
	if (s->turn != NULL)
		turn_finish(s, 1, 0);
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "summary", why);
	cJSON_AddItemToObject(b, "usage", cJSON_Duplicate(
	    cJSON_GetObjectItem(s->meta, "usage"), 1));
	cJSON_AddStringToObject(b, "reason", "terminated");
	/* Not logged: the queue and a turn being recovered stay (a running
	 * turn was cancelled, and its done logged); the queue goes on. */
	if (emit(s, "session_complete", b) == 0) {
		turn_next(s);
		return -1;
	}
	json_set(s->meta, "queue", cJSON_CreateArray());
	if (s->recover_ev != NULL || (s->promote != NULL && !s->follower)) {
		if (s->recover_ev != NULL)
			event_free(s->recover_ev);
		s->recover_ev = NULL;
		store_req_cancel(s->promote);	/* the turn's read-back */
		s->promote = NULL;
		json_set(s->meta, "turn", cJSON_CreateNull());
	}
	s->ended = 1;
	r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "summary", why);
	cJSON_AddStringToObject(r, "reason", "terminated");
	util_iso8601(ts, util_now_ms());
	cJSON_AddStringToObject(r, "completedAt", ts);
	json_set(s->meta, "result", r);
	meta_save(s);
	sess_check_idle(s);
	return 0;
}

static void
result_err(struct sess_result *r, const char *code, int http, const char *fmt,
    const char *arg)
{
	r->code = code;
	r->http = http;
	snprintf(r->msg, sizeof(r->msg), fmt, arg);
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
sess_pause(struct sess *s, struct conn *c, int pause, struct proto_in *in,
    struct sess_result *r)
{
	cJSON *b;
	uint64_t seq;

	if (s->ended) {
		result_err(r, "SESSION_ENDED", 409, "%s", "the session has "
		    "completed");
		return;
	}
	if (sess_paused(s) == pause) {
		/* Nothing new; the change that made it so may be in flight. */
		r->http = 200;
		answer_durable(s, c, in->id, store_last_seq(s->st),
		    ANSWER_NOOP, r);
		return;
	}
	json_set(s->meta, "paused", cJSON_CreateBool(pause));
	b = sess_state(s);
	cJSON_AddBoolToObject(b, "paused", pause);
	if ((seq = emit(s, "session_state", b)) == 0) {
		json_set(s->meta, "paused", cJSON_CreateBool(!pause));
		result_err(r, "OVERLOADED", 503, "%s", "the change could not "
		    "be logged; it was not applied, retry");
		return;
	}
	log_rinfo(c != NULL ? c->reqid : NULL, s->id, "session %s by an "
	    "operator at seq %llu", pause ? "paused" : "resumed",
	    (unsigned long long)seq);
	meta_save(s);
	r->seq = seq;
	answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
	if (pause)
		sess_check_idle(s);
	else
		turn_next(s);
}

void
sess_input(struct sess *s, struct conn *c, int role, struct proto_in *in,
    struct sess_result *r)
{
	const char *message = NULL, *to = NULL;
	char clientid[32];
	cJSON *b;
	uint64_t seq;

	memset(r, 0, sizeof(*r));
	r->http = 202;
	if (s->follower) {
		follower_input(s, c, role, in, r);
		return;
	}
	if (strcmp(in->type, "chat") == 0) {
		if (role == IPC_ROLE_OBSERVER) {
			result_err(r, "FORBIDDEN", 403, "%s", "observers "
			    "cannot send chat messages");
			return;
		}
		if (in->id != NULL && ids_find(s, in->id, &seq)) {
			r->seq = seq;
			r->duplicate = 1;
			r->http = 200;
			/* Accepted, but perhaps not yet stored. */
			answer_durable(s, c, in->id, seq, ANSWER_DUP, r);
			return;
		}
		if (s->ended) {
			result_err(r, "SESSION_ENDED", 409, "%s", "the session "
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
		if (cJSON_GetArraySize(cJSON_GetObjectItem(s->meta, "queue")) >=
		    MAX_QUEUE) {
			result_err(r, "RATE_LIMITED", 429, "%s", "too many "
			    "messages are waiting for their turn; wait for a "
			    "done event");
			return;
		}
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "message", message);
		if (to != NULL)
			cJSON_AddStringToObject(b, "to", to);
		if (c != NULL) {
			snprintf(clientid, sizeof(clientid), "c-%llu",
			    (unsigned long long)c->ic.conn_id);
			cJSON_AddStringToObject(b, "clientId", clientid);
		}
		if (in->id != NULL)
			cJSON_AddStringToObject(b, "id", in->id);
		if ((seq = emit(s, "user_message", b)) == 0) {
			result_err(r, "OVERLOADED", 503, "%s", "the message "
			    "could not be logged; it was not accepted, retry");
			return;
		}
		if (in->id != NULL)
			ids_add(s, in->id, seq);
		r->seq = seq;
		cJSON_AddItemToArray(cJSON_GetObjectItem(s->meta, "queue"),
		    cJSON_CreateNumber((double)seq));
		meta_save(s);
		/* The answer says "stored": it waits until it is. */
		answer_durable(s, c, in->id, seq, ANSWER_NEW, r);
		turn_next(s);
		return;
	}
	if (strcmp(in->type, "cancel") == 0) {
		if (role == IPC_ROLE_OBSERVER) {
			result_err(r, "FORBIDDEN", 403, "%s", "observers "
			    "cannot cancel turns");
			return;
		}
		if (s->turn == NULL) {
			r->http = 200;
			return;
		}
		turn_finish(s, 1, 0);
		r->seq = store_last_seq(s->st);
		answer_durable(s, c, in->id, r->seq, ANSWER_NEW, r);
		turn_next(s);
		return;
	}
	if (strcmp(in->type, "terminate") == 0) {
		if (role != IPC_ROLE_ADMIN) {
			result_err(r, "FORBIDDEN", 403, "%s",
			    "terminate needs the admin role");
			return;
		}
		if (sess_terminate(s, "terminated by request") == -1) {
			result_err(r, "OVERLOADED", 503, "%s", "the "
			    "termination could not be logged; retry");
			return;
		}
		r->seq = store_last_seq(s->st);
		answer_durable(s, c, in->id, r->seq, ANSWER_NEW, r);
		return;
	}
	if (strcmp(in->type, "pause") == 0 ||
	    strcmp(in->type, "resume_session") == 0) {
		if (role != IPC_ROLE_ADMIN) {
			result_err(r, "FORBIDDEN", 403, "%s needs the admin "
			    "role", in->type);
			return;
		}
		sess_pause(s, c, strcmp(in->type, "pause") == 0, in, r);
		return;
	}
	{
		static const char *later[] = { "agent_add", "agent_remove",
		    "tool_approve", "set_autonomy", "mcp_tools", "mcp_result",
		    "kb_add", "kb_search", "kb_list", "kb_remove",
		    "thought_share", "action_propose", "action_approve",
		    "action_result", "directive" };
		size_t i;

		for (i = 0; i < sizeof(later) / sizeof(later[0]); i++)
			if (strcmp(in->type, later[i]) == 0) {
				result_err(r, "BAD_REQUEST", 501, "message type "
				    "'%s' is part of protocol v1 but not "
				    "available in this build", in->type);
				return;
			}
	}
	result_err(r, "BAD_REQUEST", 400, "unknown message type '%s'; see "
	    "parley-protocol(7)", in->type);
}

void
sess_stop(struct sess *s)
{
	/* Log what was coalesced; the turn itself stays in meta as running
	 * so the next owner re-runs it after saying so. */
	tokens_flush(s);
	turn_drop(s);
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
	if (s->nreaders > 0) {
		struct conn *c, *cnext;

		/* Reads of this log must not outlive its store handle. */
		for (c = TAILQ_FIRST(&wk->conns); c != NULL &&
		    s->nreaders > 0; c = cnext) {
			cnext = TAILQ_NEXT(c, entry);
			if (c->range != NULL && c->range_sess == s)
				conn_read_abort(c);
		}
	}
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
	recent_free(s);
	TAILQ_REMOVE(&wk->sessions, s, entry);
	TAILQ_REMOVE(&wk->buckets[sess_bucket(s->id)], s, hentry);
	wk->nsessions--;
	event_free(s->flush_ev);
	event_free(s->idle_ev);
	event_free(s->start_ev);
	for (i = 0; i < s->id_n; i++)
		free(s->idr[i].id);
	free(s->idr);
	cJSON_Delete(s->meta);
	free(s->tok);
	free(s);
}

void
sess_release(struct sess *s)
{
	struct wk *wk = s->wk;
	struct conn *c;

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
	while ((c = TAILQ_FIRST(&s->conns)) != NULL) {
		sess_detach(s, c);
		conn_close(c, WS_CLOSE_GOING_AWAY, "session moved; reconnect "
		    "with your lastSeq");
	}
	if (s->turn != NULL)
		sess_stop(s);
	wk_released(wk, s->id);
	log_debug("session %s released", s->id);
	sess_free(s);
	wk_maybe_exit(wk);
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
	struct conn *c;

	/* Clients come back with their lastSeq; whoever owns the session
	 * by then serves them, and re-runs an interrupted turn. */
	while ((c = TAILQ_FIRST(&s->conns)) != NULL) {
		sess_detach(s, c);
		conn_close(c, WS_CLOSE_SERVICE_RESTART, "the session store "
		    "failed; reconnect with your lastSeq");
	}
	turn_drop(s);
	sess_release(s);
}

/*
 * The store failed this session (unreachable, or another process owns
 * it now).  Nothing not yet durable is sent; answers waiting for the
 * store are refused; the session leaves memory on the next loop pass
 * (the caller may be deep inside a turn).
 */
static void
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

/* --- answers that wait for the store --- */

static void
wait_free(struct sess_wait *w)
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
			conn_input_done(w->conn, s, w->id, &r);
		}
		wait_free(w);	/* cancels a post still under way */
	}
}

/* Queues c's answer until seq is durable (or, with req, posted). */
static int
ack_wait(struct sess *s, struct conn *c, const char *id, uint64_t seq,
    enum sess_answer answer)
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
static void
answer_durable(struct sess *s, struct conn *c, const char *id, uint64_t seq,
    enum sess_answer answer, struct sess_result *r)
{
	if (c != NULL && seq > store_durable_seq(s->st) &&
	    ack_wait(s, c, id, seq, answer) == 0)
		r->pending = 1;
}

void
sess_conn_gone(struct wk *wk, struct conn *c)
{
	struct sess_wait *w, *next;
	struct sess *s;

	if (c->waits == 0)
		return;
	sess_load_cancel(wk, c);
	TAILQ_FOREACH(s, &wk->sessions, entry)
		for (w = TAILQ_FIRST(&s->acks); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->conn == c) {
				TAILQ_REMOVE(&s->acks, w, entry);
				wait_free(w);
				idle_again(s);
			}
		}
	c->waits = 0;
}

/* --- following a session another process owns --- */

static void	follow_fetch(struct sess *);

static int
follow_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct sess *s = arg;
	struct evt *e;

	(void)ts;
	if (seq != s->fanned + 1)
		return 1;
	if ((e = evt_new(seq, json, len)) == NULL)
		return 1;
	if (strcmp(e->type, "session_state") == 0) {
		cJSON *o = cJSON_ParseWithLength(json, len), *p;

		/* The owner paused or resumed it: report it as the owner
		 * does (the owner's meta was read when following began). */
		if (cJSON_IsBool(p = cJSON_GetObjectItem(o, "paused")))
			json_set(s->meta, "paused",
			    cJSON_CreateBool(cJSON_IsTrue(p)));
		cJSON_Delete(o);
	}
	fan_out(s, e);
	evt_unref(e);
	return 0;
}

static void
follow_done(void *arg, ssize_t n)
{
	struct sess *s = arg;

	s->fetch = NULL;
	if (n < 0) {
		s->wk->metrics.store_errors++;
		log_warnx("session %s: could not read the owner's events; "
		    "retrying on the next notice", s->id);
		return;
	}
	if (s->follower && s->fanned < store_last_seq(s->st) && n > 0)
		follow_fetch(s);
}

/* Reads what the owner appended and fans it out, one read at a time. */
static void
follow_fetch(struct sess *s)
{
	struct store_req *r;

	if (s->fetch != NULL || s->released || s->broken)
		return;
	if (s->fanned >= store_last_seq(s->st))
		return;
	/* NULL when answered at once, and the answer may have started the
	 * next read: keep that one. */
	r = store_range_async(s->st, s->fanned, 1000, follow_rec, follow_done,
	    s);
	if (r != NULL)
		s->fetch = r;
}

void
sess_store_grown(void *arg, struct store_sess *st, uint64_t last)
{
	struct sess *s = st->udata;

	(void)arg;
	(void)last;
	if (s != NULL && s->follower)
		follow_fetch(s);
}

static void
promoted(void *arg, ssize_t n)
{
	struct sess *s = arg;
	struct conn *c, *next;

	s->promote = NULL;
	if (n < 0 || s->released || s->broken) {
		/* Still someone else's: the next vacancy says. */
		if (!s->released)
			sess_check_idle(s);
		return;
	}
	log_info("session %s: took over from its lapsed owner at seq %llu",
	    s->id, (unsigned long long)store_last_seq(s->st));
	store_req_cancel(s->fetch);
	s->fetch = NULL;
	sess_own(s);
	/* What the old owner logged and they have not been sent yet comes
	 * from the log; new events follow live. */
	for (c = TAILQ_FIRST(&s->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, sentry);
		conn_pump(c);	/* may free c */
	}
	sess_check_idle(s);
}

void
sess_store_vacant(void *arg, struct store_sess *st)
{
	struct sess *s = st->udata;
	struct store_req *r;

	(void)arg;
	if (s == NULL || !s->follower || s->promote != NULL || s->released ||
	    s->broken || s->wk->draining || s->wk->terminating)
		return;
	/* promoted() may run inside and start the owner's preload. */
	s->promote = (struct store_req *)&s->promote;
	r = store_promote(s->st, promoted, s);
	if (s->promote == (struct store_req *)&s->promote)
		s->promote = r;
}

static void
posted(void *arg, ssize_t n)
{
	struct sess_wait *w = arg;
	struct sess *s = w->sess;
	struct sess_result r;

	w->req = NULL;
	if (w->posting) {
		/* Answered inside store_post: follower_input settles it. */
		w->posting = 2 + (n < 0);
		return;
	}
	TAILQ_REMOVE(&s->acks, w, entry);
	memset(&r, 0, sizeof(r));
	if (n < 0) {
		s->wk->metrics.store_errors++;
		r.code = "OVERLOADED";
		r.http = 503;
		snprintf(r.msg, sizeof(r.msg), "the message could not be "
		    "handed to the session's owner; it was not accepted, "
		    "retry");
	} else
		r.http = 202;
	if (w->conn != NULL) {
		w->conn->waits--;
		conn_input_done(w->conn, s, w->id, &r);
	}
	wait_free(w);
	idle_again(s);
}

/*
 * A follower's client message goes to the owner's inbox; its answer
 * waits until the inbox has it.  The owner drops repeats by id.
 */
static void
follower_input(struct sess *s, struct conn *c, int role,
    struct proto_in *in, struct sess_result *r)
{
	struct sess_wait *w;
	struct store_req *req;
	cJSON *o;
	char *txt, gen[40];
	int failed;

	if (strcmp(in->type, "chat") != 0 && strcmp(in->type, "cancel") != 0 &&
	    strcmp(in->type, "terminate") != 0 &&
	    strcmp(in->type, "pause") != 0 &&
	    strcmp(in->type, "resume_session") != 0) {
		result_err(r, "BAD_REQUEST", 400, "message type '%s' cannot "
		    "be forwarded to the session's owner", in->type);
		return;
	}
	if (role == IPC_ROLE_OBSERVER) {
		result_err(r, "FORBIDDEN", 403, "%s", "observers cannot send "
		    "input");
		return;
	}
	if ((strcmp(in->type, "terminate") == 0 ||
	    strcmp(in->type, "pause") == 0 ||
	    strcmp(in->type, "resume_session") == 0) &&
	    role != IPC_ROLE_ADMIN) {
		result_err(r, "FORBIDDEN", 403, "%s needs the admin role",
		    in->type);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "role", role);
	cJSON_AddItemToObject(o, "m", cJSON_Duplicate(in->root, 1));
	if (in->id == NULL) {
		/* So a redelivery to a new owner is still one message. */
		util_randhex(gen, 12);
		cJSON_AddStringToObject(cJSON_GetObjectItem(o, "m"), "id",
		    gen);
	}
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL || c == NULL ||
	    ack_wait(s, c, in->id, 0, ANSWER_NEW) == -1) {
		free(txt);
		result_err(r, "INTERNAL", 500, "%s", "out of memory");
		return;
	}
	w = TAILQ_LAST(&s->acks, sess_waits);
	r->pending = 1;
	w->posting = 1;
	req = store_post(s->st, txt, strlen(txt), posted, w);
	free(txt);
	if (w->posting == 1) {
		w->posting = 0;
		w->req = req;
		return;
	}
	/* Answered at once: the caller answers the client. */
	failed = w->posting == 3;
	TAILQ_REMOVE(&s->acks, w, entry);
	c->waits--;
	wait_free(w);
	r->pending = 0;
	if (failed)
		result_err(r, "OVERLOADED", 503, "%s", "the message could not "
		    "be handed to the session's owner; it was not accepted, "
		    "retry");
}

void
sess_store_input(void *arg, struct store_sess *st, const char *json,
    size_t len)
{
	struct sess *s = st->udata;
	struct proto_in in;
	struct sess_result r;
	const char *code;
	char msg[256], *txt;
	cJSON *o, *m;
	uint64_t seq;
	int role;

	(void)arg;
	if (s == NULL || s->follower || s->broken)
		return;
	o = cJSON_ParseWithLength(json, len);
	m = cJSON_GetObjectItem(o, "m");
	role = (int)json_count(o, "role");
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
	if (in.id != NULL && ids_find(s, in.id, &seq)) {
		proto_in_free(&in);
		return;
	}
	sess_input(s, NULL, role, &in, &r);
	if (r.code != NULL)
		log_info("session %s: forwarded %s refused: %s", s->id,
		    in.type, r.msg);
	else if (in.id != NULL && strcmp(in.type, "chat") != 0)
		ids_add(s, in.id, store_last_seq(s->st));
	proto_in_free(&in);
}
