/*
 * A session knowledge base's queries (kb_int.h): a vector for the query
 * first when an embedder is configured, bounded in time; retrieval in
 * the turn (kb_rag: the session's kb and the host's index, the best
 * chunks by score within rag-top-k and rag-budget, logged as rag_context)
 * and the agents' built-in tool kb_search.
 */
#include <sys/stat.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/kbindex.h"
#include "parley/log.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "embed.h"
#include "index.h"
#include "kb.h"
#include "kb_int.h"
#include "llm.h"
#include "sess.h"
#include "wk.h"

#define STATE(s)	((struct kb_state *)(s)->kb)

/* --- queries: a vector first when an embedder is configured --- */

static void
q_free(struct kb_q *q)
{
	if (q->er != NULL)
		embed_cancel(q->er);
	if (q->timer != NULL)
		event_free(q->timer);
	free(q->text);
	free(q);
}

static void
q_finish(struct kb_q *q, const float *vec, unsigned dim, const char *note)
{
	if (q->er != NULL) {
		embed_cancel(q->er);
		q->er = NULL;
	}
	TAILQ_REMOVE(&q->kb->qs, q, entry);
	q->done(q, vec, dim, note);
	q_free(q);
}

static void
q_embedded(void *arg, int err, const char *msg, const float *vecs,
    unsigned dim)
{
	struct kb_q *q = arg;
	char note[300];

	q->er = NULL;
	if (err != 0) {
		snprintf(note, sizeof(note), "keyword search only: the "
		    "embedder failed (%.200s)", msg != NULL ? msg : "no "
		    "message");
		log_warnx("session %s: a query's vector: %s", q->s->id, note);
		q_finish(q, NULL, 0, note);
		return;
	}
	q_finish(q, vecs, dim, NULL);
}

static void
q_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct kb_q *q = arg;

	(void)fd;
	(void)ev;
	log_warnx("session %s: a query's vector took too long; keyword "
	    "search only", q->s->id);
	q_finish(q, NULL, 0, "keyword search only: the embedder did not "
	    "answer in time");
}

/* Asks for q's vector, or answers it at once: 1 asked, 0 answered. */
static int
q_go(struct kb_q *q)
{
	struct sess *s = q->s;
	struct timeval tv;
	size_t len = strlen(q->text);

	if (!embed_enabled(s->wk->conf)) {
		q_finish(q, NULL, 0, "keyword search only: no embedder is "
		    "configured");
		return 0;
	}
	if (q->wait_ms > 0) {
		if ((q->timer = evtimer_new(s->wk->base, q_timeout, q)) ==
		    NULL) {
			q_finish(q, NULL, 0, "keyword search only: out of "
			    "memory");
			return 0;
		}
		util_tv(&tv, q->wait_ms);
		evtimer_add(q->timer, &tv);
	}
	if ((q->er = embed_async(s->wk, (const char *const *)&q->text, &len,
	    1, q_embedded, q)) == NULL) {
		q_finish(q, NULL, 0, "keyword search only: the embedder could "
		    "not be asked");
		return 0;
	}
	return 1;
}

int
kb_q_start(struct sess *s, const char *text, size_t limit, double threshold,
    uint64_t wait_ms, void (*done)(struct kb_q *, const float *, unsigned,
    const char *), void (*drop)(struct kb_q *), void *arg)
{
	struct kb_state *kb = kb_state_of(s);
	struct kb_q *q;

	if (kb == NULL || (q = calloc(1, sizeof(*q))) == NULL)
		return -1;
	if ((q->text = strdup(text)) == NULL) {
		free(q);
		return -1;
	}
	q->kb = kb;
	q->s = s;
	q->limit = limit;
	q->threshold = threshold;
	q->done = done;
	q->drop = drop;
	q->arg = arg;
	q->wait_ms = wait_ms;
	TAILQ_INSERT_TAIL(&kb->qs, q, entry);
	/* The documents are being read: searched once they are. */
	if (kb->load == KB_LOADING) {
		q->parked = 1;
		return 1;
	}
	return q_go(q);
}

void
kb_q_unpark(struct kb_state *kb)
{
	struct kb_q *q;

again:
	TAILQ_FOREACH(q, &kb->qs, entry)
		if (q->parked) {
			q->parked = 0;
			(void)q_go(q);	/* may free q */
			goto again;
		}
}

/* Searches the session's index (NULL: none) as q asks, with vec. */
size_t
kb_q_kb(const struct kbi *idx, const struct kb_q *q, const float *vec,
    unsigned dim, struct kbi_hit *out)
{
	struct kbi_query kq;

	if (idx == NULL)
		return 0;
	memset(&kq, 0, sizeof(kq));
	kq.text = q->text;
	kq.len = strlen(q->text);
	kq.limit = q->limit;
	kq.threshold = q->threshold;
	if (vec != NULL && dim == kbi_dim(idx)) {
		kq.vec = vec;
		kq.dim = dim;
	}
	return kbi_search(idx, &kq, out);
}

void
kb_q_drop_all(struct kb_state *kb)
{
	struct kb_q *q;

	while ((q = TAILQ_FIRST(&kb->qs)) != NULL) {
		TAILQ_REMOVE(&kb->qs, q, entry);
		if (q->drop != NULL)
			q->drop(q);
		q_free(q);
	}
}

/*
 * The best hits for q of the session's kb and of the host's index,
 * chosen by kb_rag_select (top_k, budget tokens) into *hitsp and *keepp
 * (the caller frees both; pointers valid until the next index_ call or
 * change of the kb).  Returns how many, 0 also out of memory.
 */
static size_t
gather(struct kb_q *q, const float *vec, unsigned dim, size_t top_k,
    size_t budget, struct kb_hit **hitsp, size_t **keepp)
{
	struct kb_state *kb = q->kb;
	struct kbi_hit *kh, *ih;
	struct kbi_chunk_info ci, *ii;
	struct kbi_query iq;
	struct kb_hit *hits;
	size_t nk = 0, ni, n = 0, i, *keep, k = 0;

	kh = calloc(q->limit, sizeof(*kh));
	ih = calloc(q->limit, sizeof(*ih));
	ii = calloc(q->limit, sizeof(*ii));
	hits = calloc(q->limit * 2, sizeof(*hits));
	keep = calloc(q->limit * 2, sizeof(*keep));
	if (kh == NULL || ih == NULL || ii == NULL || hits == NULL ||
	    keep == NULL)
		goto out;
	if (kb->load == KB_READY)
		nk = kb_q_kb(kb->idx, q, vec, dim, kh);
	memset(&iq, 0, sizeof(iq));
	iq.text = q->text;
	iq.len = strlen(q->text);
	iq.vec = vec;
	iq.dim = dim;
	iq.limit = q->limit;
	iq.threshold = q->threshold;
	ni = index_search(q->s->wk, &iq, ih, ii);
	for (i = 0; i < nk; i++)
		if (kbi_chunk_get(kb->idx, kh[i].chunk, &ci) == 0)
			hits[n++] = (struct kb_hit){ 0, ci.doc, ci.meta,
			    ci.text, ci.len, ci.line_first, ci.line_last,
			    kh[i].score };
	for (i = 0; i < ni && i < q->limit; i++)
		hits[n++] = (struct kb_hit){ 1, ii[i].doc, NULL, ii[i].text,
		    ii[i].len, ii[i].line_first, ii[i].line_last,
		    ih[i].score };
	k = kb_rag_select(hits, n, top_k, budget, keep);
out:
	free(kh);
	free(ih);
	free(ii);
	if (k == 0) {
		free(hits);
		free(keep);
		hits = NULL;
		keep = NULL;
	}
	*hitsp = hits;
	*keepp = keep;
	return k;
}

/* A hit's source fields: source, documentId or path, lines, score. */
static cJSON *
hit_json(const struct kb_hit *h)
{
	cJSON *e = cJSON_CreateObject(), *l;

	cJSON_AddStringToObject(e, "source", h->index ? "index" : "kb");
	cJSON_AddStringToObject(e, h->index ? "path" : "documentId",
	    h->name);
	l = cJSON_AddArrayToObject(e, "lines");
	cJSON_AddItemToArray(l, cJSON_CreateNumber(h->line_first));
	cJSON_AddItemToArray(l, cJSON_CreateNumber(h->line_last));
	cJSON_AddNumberToObject(e, "score", h->score);
	return e;
}

/* --- retrieval in the turn --- */

struct rag {
	kb_rag_fn	 done;
	char		 agent[SESS_AGENT_MAX + 1];
	char		 msgid[48];
};

/* Whether retrieval runs for this session: rag on, config.rag not false. */
static int
rag_on(struct sess *s)
{
	return s->wk->conf->rag && !cJSON_IsFalse(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(sess_meta(s), "config"), "rag"));
}

static void
rag_drop(struct kb_q *q)
{
	free(q->arg);
}

static void
rag_done(struct kb_q *q, const float *vec, unsigned dim, const char *note)
{
	struct rag *rg = q->arg;
	struct sess *s = q->s;
	const struct config *conf = s->wk->conf;
	struct kb_hit *hits;
	size_t i, k, *keep;
	char *text = NULL, *qt;
	cJSON *b, *arr, *e;

	k = gather(q, vec, dim, conf->rag_top_k, conf->rag_budget, &hits,
	    &keep);
	if (k > 0) {
		text = kb_rag_text(hits, keep, k);
		/* What the agent was shown, for every client of the
		 * session: sources and sizes, not the text. */
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "agentId", rg->agent);
		qt = strndup(q->text, kb_prefix(q->text, strlen(q->text),
		    200));
		cJSON_AddStringToObject(b, "query", qt != NULL ? qt : "");
		free(qt);
		arr = cJSON_AddArrayToObject(b, "chunks");
		for (i = 0; i < k; i++) {
			e = hit_json(&hits[i]);
			cJSON_AddNumberToObject(e, "n", (double)(i + 1));
			cJSON_AddNumberToObject(e, "bytes", (double)keep[i]);
			cJSON_AddItemToArray(arr, e);
		}
		cJSON_AddStringToObject(b, "mode", vec != NULL ? "hybrid" :
		    "keyword");
		if (vec == NULL && note != NULL && embed_enabled(conf))
			cJSON_AddStringToObject(b, "note", note);
		sess_emit(s, "rag_context", b);
	}
	free(hits);
	free(keep);
	/* The turn may have ended meanwhile: the callee checks msgid. */
	rg->done(s, text, rg->msgid);
	free(rg);
}

int
kb_rag(struct sess *s, const char *agent, const char *msgid,
    const char *query, kb_rag_fn done)
{
	const struct config *conf = s->wk->conf;
	struct kb_state *kb;
	struct rag *rg;
	uint64_t wait;
	size_t qlen;
	char *qt;
	int rc;

	if (!rag_on(s) || query == NULL || *query == '\0' ||
	    (kb = kb_state_of(s)) == NULL) {
		done(s, NULL, msgid);
		return 0;
	}
	/* Nothing to look in: no model call waits for an embedder. */
	if (kb->load != KB_LOADING && (kb->idx == NULL ||
	    kbi_ndocs(kb->idx) == 0) && !index_present(s->wk)) {
		if (kb->load == KB_FAILED)
			kb_load_start(s);	/* for the next turn */
		done(s, NULL, msgid);
		return 0;
	}
	if ((rg = calloc(1, sizeof(*rg))) == NULL) {
		done(s, NULL, msgid);
		return 0;
	}
	rg->done = done;
	snprintf(rg->agent, sizeof(rg->agent), "%s", agent);
	snprintf(rg->msgid, sizeof(rg->msgid), "%s", msgid);
	/* The embedder's own timeout, at most KB_RAG_WAIT_MS: a slow
	 * embedder costs the turn its vectors, not its answer. */
	wait = conf->embedder != NULL && conf->embedder->timeout_ms > 0 &&
	    conf->embedder->timeout_ms < KB_RAG_WAIT_MS ?
	    conf->embedder->timeout_ms : KB_RAG_WAIT_MS;
	/* A long message: the query is what it begins with. */
	qlen = strlen(query);
	if ((qt = strndup(query, qlen > KB_QUERY_MAX ?
	    utf8_whole(query, KB_QUERY_MAX) : qlen)) == NULL) {
		free(rg);
		done(s, NULL, msgid);
		return 0;
	}
	/* Twice top-k of each source: room to choose within the budget. */
	rc = kb_q_start(s, qt, conf->rag_top_k > 0 ? 2 * conf->rag_top_k : 1,
	    0, wait, rag_done, rag_drop, rg);
	free(qt);
	if (rc == -1) {
		free(rg);
		done(s, NULL, msgid);
		return 0;
	}
	return rc;
}

/* --- the agents' tool --- */

struct kb_call {
	struct sess	*s;
	kb_call_fn	 done;
	void		*arg;
	struct kb_q	*q;	/* while it waits for the vector */
	struct event	*ev;	/* answers after kb_tool_run returns */
	char		*text;
	int		 error;
};

int
kb_tool_offered(struct sess *s)
{
	struct kb_state *kb = s->kb;

	return (kb != NULL && kb->idx != NULL && kbi_ndocs(kb->idx) > 0) ||
	    index_present(s->wk);
}

int
kb_tool(struct sess *s, const char *name)
{
	return strcmp(name, KB_TOOL) == 0 && kb_tool_offered(s);
}

int
kb_tool_def(struct sess *s, struct llm_tool_def *def)
{
	if (!kb_tool_offered(s))
		return 0;
	def->name = KB_TOOL;
	def->description = "Searches the session's knowledge base and the "
	    "host's indexed files for text relevant to a query; returns the "
	    "best chunks with their source (documentId, or path and lines) "
	    "and score.";
	def->schema_json = "{\"type\":\"object\",\"properties\":{\"query\":"
	    "{\"type\":\"string\",\"description\":\"what to look for\"},"
	    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,"
	    "\"description\":\"hits wanted, default 5\"}},\"required\":"
	    "[\"query\"]}";
	return 1;
}

static void
call_answer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct kb_call *kc = arg;

	(void)fd;
	(void)ev;
	kc->done(kc->arg, kc->error || kc->text == NULL, kc->text != NULL ?
	    kc->text : "out of memory", kc->error || kc->text == NULL ?
	    "TOOL_ERROR" : NULL);
	kb_tool_cancel(kc);
}

/* Answers once the loop comes round: never inside kb_tool_run. */
static void
call_answer(struct kb_call *kc, int error, char *text)
{
	struct timeval tv = { 0, 0 };

	kc->error = error;
	kc->text = text;
	if (kc->ev == NULL && (kc->ev = evtimer_new(kc->s->wk->base,
	    call_answer_cb, kc)) == NULL) {
		/* Not even a timer: answered now, which tools.c takes. */
		call_answer_cb(-1, 0, kc);
		return;
	}
	evtimer_add(kc->ev, &tv);
}

static void
tool_drop(struct kb_q *q)
{
	((struct kb_call *)q->arg)->q = NULL;
}

static void
tool_done(struct kb_q *q, const float *vec, unsigned dim, const char *note)
{
	struct kb_call *kc = q->arg;
	struct kb_hit *hits;
	size_t i, k, *keep;
	cJSON *b, *arr, *e;
	char *t;

	kc->q = NULL;
	/* The best of both, as many as asked, whatever their size. */
	k = gather(q, vec, dim, q->limit, SIZE_MAX / 8, &hits, &keep);
	b = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(b, "results");
	for (i = 0; i < k; i++) {
		e = hit_json(&hits[i]);
		t = strndup(hits[i].text, hits[i].len);
		cJSON_AddStringToObject(e, "content", t != NULL ? t : "");
		free(t);
		cJSON_AddItemToArray(arr, e);
	}
	cJSON_AddStringToObject(b, "mode", vec != NULL ? "hybrid" :
	    "keyword");
	if (vec == NULL && note != NULL && embed_enabled(q->s->wk->conf))
		cJSON_AddStringToObject(b, "note", note);
	free(hits);
	free(keep);
	call_answer(kc, 0, cJSON_PrintUnformatted(b));
	cJSON_Delete(b);
}

struct kb_call *
kb_tool_run(struct sess *s, const char *args, kb_call_fn done, void *arg)
{
	struct kb_call *kc;
	cJSON *a = cJSON_Parse(args != NULL && *args ? args : "{}");
	const char *query;
	size_t limit;
	double th;
	char msg[160];
	int rc;

	if ((kc = calloc(1, sizeof(*kc))) == NULL) {
		cJSON_Delete(a);
		return NULL;
	}
	kc->s = s;
	kc->done = done;
	kc->arg = arg;
	if (kb_check_search(a, &query, &limit, &th, msg, sizeof(msg)) == -1) {
		cJSON_Delete(a);
		call_answer(kc, 1, strdup(msg));
		return kc;
	}
	rc = kb_q_start(s, query, limit, 0, KB_RAG_WAIT_MS, tool_done,
	    tool_drop, kc);
	cJSON_Delete(a);
	if (rc == -1) {
		call_answer(kc, 1, strdup("out of memory"));
		return kc;
	}
	if (rc == 1)
		kc->q = TAILQ_LAST(&STATE(s)->qs, kb_qs);
	return kc;
}

void
kb_tool_cancel(struct kb_call *kc)
{
	if (kc == NULL)
		return;
	if (kc->q != NULL) {
		TAILQ_REMOVE(&STATE(kc->s)->qs, kc->q, entry);
		q_free(kc->q);
	}
	if (kc->ev != NULL)
		event_free(kc->ev);
	free(kc->text);
	free(kc);
}
