/*
 * A session's knowledge base (kb.h).  Its documents live in the store
 * (store_doc_*), one JSON text each: {"documentId","content","metadata",
 * "createdAt","vectors":{"dim","data":[base64 of each chunk's float32
 * little-endian]}}.  When the session is owned here they are read into a
 * struct kbi; until they are, its turns wait and kb_* requests queue.
 * kb_add chunks a document, embeds the chunks when an embedder is
 * configured, stores it, then logs kb_added; kb_remove deletes it and
 * logs kb_removed; kb_search and kb_list answer the requester only.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/evp.h>

#include "parley/config.h"
#include "parley/kbindex.h"
#include "parley/kbtext.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "embed.h"
#include "follow.h"
#include "kb.h"
#include "kb_int.h"
#include "sess.h"
#include "wk.h"


enum kb_kind { OP_ADD, OP_REMOVE, OP_SEARCH, OP_LIST };

/* A kb_* request, from its check to its answer. */
struct kb_op {
	TAILQ_ENTRY(kb_op)	 entry;
	struct kb_state		*kb;
	struct sess		*s;
	struct sess_client	*c;	/* NULL: nobody waits (inbox, gone) */
	char			*id;	/* the message's id, or NULL */
	enum kb_kind		 kind;
	int			 queued;	/* waits for the load */
	cJSON			*msg;	/* the message */
	char			 doc[KB_DOCID_LEN + 1];
	size_t			 bytes;		/* kb_add: reserved */
	size_t			 held;		/* kb_add: its content's bytes */
	struct kbt_chunk	*chunks;
	size_t			 nchunks;
	float			*vecs;		/* nchunks * dim, or NULL */
	unsigned		 dim;
	char			*note;		/* why vectors are missing */
	struct embed_req	*er;
	struct store_req	*sr;
	char			 created[32];
};

#define STATE(s)	((struct kb_state *)(s)->kb)

static void	op_run(struct kb_op *);

struct kb_state *
kb_state_of(struct sess *s)
{
	struct kb_state *kb;

	if (s->kb == NULL && (kb = calloc(1, sizeof(*kb))) != NULL) {
		TAILQ_INIT(&kb->ops);
		TAILQ_INIT(&kb->qs);
		s->kb = kb;
	}
	return s->kb;
}

int
kb_type(const char *type)
{
	return strcmp(type, "kb_add") == 0 || strcmp(type, "kb_remove") == 0 ||
	    strcmp(type, "kb_search") == 0 || strcmp(type, "kb_list") == 0;
}

/* --- vectors in the stored document --- */

/* base64 of n floats as float32 little-endian; malloc'd. */
static char *
vec_b64(const float *v, unsigned n)
{
	unsigned char *raw;
	char *out;
	uint32_t u;
	unsigned i;

	if ((raw = malloc((size_t)n * 4)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		memcpy(&u, &v[i], 4);
		u = htole32(u);
		memcpy(raw + (size_t)i * 4, &u, 4);
	}
	if ((out = malloc(((size_t)n * 4 + 2) / 3 * 4 + 1)) != NULL)
		EVP_EncodeBlock((unsigned char *)out, raw, (int)n * 4);
	free(raw);
	return out;
}

/* Decodes b64 into exactly n floats: 0, or -1. */
static int
vec_unb64(const char *b64, float *v, unsigned n)
{
	size_t len = strlen(b64), want = (size_t)n * 4;
	unsigned char *raw;
	uint32_t u;
	unsigned i;
	int got;

	if (len != (want + 2) / 3 * 4 || (raw = malloc(len / 4 * 3)) == NULL)
		return -1;
	/* EVP_DecodeBlock counts the padding's zero bytes too. */
	got = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)len);
	if (got < 0 || (size_t)got < want) {
		free(raw);
		return -1;
	}
	for (i = 0; i < n; i++) {
		memcpy(&u, raw + (size_t)i * 4, 4);
		u = le32toh(u);
		memcpy(&v[i], &u, 4);
	}
	free(raw);
	return 0;
}

/* --- the index: a document's meta and chunks --- */

/*
 * What the index keeps of a document beside its chunks (kb_list's,
 * search's metadata): {"metadata"?,"createdAt","length","preview"}.
 */
static char *
doc_meta(const char *content, size_t len, const cJSON *metadata,
    const char *created)
{
	cJSON *m = cJSON_CreateObject();
	char *pv, *txt;
	size_t n = kb_prefix(content, len, KB_PREVIEW);

	if (cJSON_IsObject(metadata))
		cJSON_AddItemToObject(m, "metadata",
		    cJSON_Duplicate(metadata, 1));
	cJSON_AddStringToObject(m, "createdAt", created);
	cJSON_AddNumberToObject(m, "length", (double)kb_chars(content, len));
	if ((pv = strndup(content, n)) != NULL)
		cJSON_AddStringToObject(m, "preview", pv);
	free(pv);
	txt = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	return txt;
}

/*
 * Adds a document to idx: its chunks (given, or cut here when NULL) and
 * their vectors (NULL: none).  0, or -1 (idx unchanged).
 */
static int
idx_add(struct kbi *idx, const char *name, const char *content, size_t len,
    const cJSON *metadata, const char *created,
    const struct kbt_chunk *given, size_t n, const float *vecs,
    unsigned dim)
{
	struct kbt_chunk *cut = NULL;
	const struct kbt_chunk *ch = given;
	char *meta;
	size_t i;
	int doc, id;

	if (ch == NULL) {
		if ((n = kbt_chunks(content, len, KBT_CHUNK_BYTES, &cut)) ==
		    (size_t)-1)
			return -1;
		ch = cut;
	}
	if ((meta = doc_meta(content, len, metadata, created)) == NULL ||
	    (doc = kbi_doc_add(idx, name, meta)) < 0) {
		free(meta);
		free(cut);
		return -1;
	}
	free(meta);
	for (i = 0; i < n; i++) {
		if ((id = kbi_chunk_add(idx, doc, content + ch[i].off,
		    ch[i].len, ch[i].line_first, ch[i].line_last)) < 0)
			goto fail;
		/* A dim the index does not take (an embedder changed its
		 * model) leaves the chunk keyword-only. */
		if (vecs != NULL && kbi_vec_set(idx, (uint32_t)id,
		    vecs + i * dim, dim) == -1)
			vecs = NULL;
	}
	free(cut);
	return 0;
fail:
	kbi_doc_remove(idx, name);
	free(cut);
	return -1;
}

/* --- answers --- */

/* The requester's answer, once; the op leaves its requester. */
static void
op_answer(struct kb_op *op, struct sess_result *r)
{
	struct sess_client *c = op->c;

	op->c = NULL;
	if (c == NULL)
		return;
	c->waits--;
	c->done(c, op->s, op->id, r);
}

/* The answer to a change logged at r->seq: the ack waits until that
 * event is durable (sess.c), then the requester has it. */
static void
op_answer_logged(struct kb_op *op, struct sess_result *r)
{
	if (op->c == NULL)
		return;
	sess_answer_durable(op->s, op->c, op->id, r->seq, ANSWER_NEW, r);
	if (r->pending) {
		op->c->waits--;
		op->c = NULL;
	} else
		op_answer(op, r);
}

static void
op_err(struct kb_op *op, const char *code, int http, const char *msg)
{
	struct sess_result r;

	memset(&r, 0, sizeof(r));
	sess_result_err(&r, code, http, "%s", msg);
	op_answer(op, &r);
}

/* A requester-only answer: the message type with body (consumed). */
static void
op_reply(struct kb_op *op, const char *type, cJSON *body)
{
	struct sess_result r;

	if (sess_reply(op->s, type, op->id, body, 200, &r) == -1) {
		op_err(op, "INTERNAL", 500, "out of memory; retry");
		return;
	}
	op_answer(op, &r);
	free((char *)r.reply);
}

static void
op_free(struct kb_op *op)
{
	op->kb->held_bytes -= op->held;
	if (op->er != NULL)
		embed_cancel(op->er);
	store_req_cancel(op->sr);
	if (op->c != NULL)
		op->c->waits--;
	cJSON_Delete(op->msg);
	free(op->chunks);
	free(op->vecs);
	free(op->note);
	free(op->id);
	free(op);
}

/* The op is over: off the list, freed; the session may idle again. */
static void
op_end(struct kb_op *op)
{
	struct sess *s = op->s;
	struct kb_state *kb = op->kb;

	if (op->kind == OP_ADD && op->bytes > 0) {
		kb->pend_docs--;
		kb->pend_bytes -= op->bytes;
	}
	TAILQ_REMOVE(&kb->ops, op, entry);
	op_free(op);
	sess_idle_again(s);
}

/* --- kb_add --- */

static void
add_stored(void *arg, ssize_t n)
{
	struct kb_op *op = arg;
	struct kb_state *kb = op->kb;
	struct sess *s = op->s;
	const cJSON *content = cJSON_GetObjectItem(op->msg, "content");
	const cJSON *md = cJSON_GetObjectItem(op->msg, "metadata");
	struct sess_result r;
	size_t len = strlen(content->valuestring);
	cJSON *b;

	op->sr = NULL;
	if (n < 0) {
		s->wk->metrics.store_errors++;
		log_warnx("session %s: kb_add %s could not be stored", s->id,
		    op->doc);
		op_err(op, "OVERLOADED", 503, "the document could not be "
		    "stored; it was not added, retry");
		op_end(op);
		return;
	}
	if (idx_add(kb->idx, op->doc, content->valuestring, len, md,
	    op->created, op->chunks, op->nchunks, op->vecs, op->dim) == -1) {
		log_warnx("session %s: kb_add %s is stored but not indexed "
		    "(out of memory); it is read again with the session",
		    s->id, op->doc);
		op_err(op, "INTERNAL", 500, "the document was stored but "
		    "could not be indexed (out of memory); it is searchable "
		    "once the session is loaded again");
		op_end(op);
		return;
	}
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "documentId", op->doc);
	cJSON_AddNumberToObject(b, "length",
	    (double)kb_chars(content->valuestring, len));
	cJSON_AddNumberToObject(b, "chunks", (double)op->nchunks);
	if (cJSON_IsObject(md))
		cJSON_AddItemToObject(b, "metadata", cJSON_Duplicate(md, 1));
	cJSON_AddBoolToObject(b, "vectors", op->vecs != NULL);
	if (op->note != NULL)
		cJSON_AddStringToObject(b, "note", op->note);
	memset(&r, 0, sizeof(r));
	r.http = 202;
	if ((r.seq = sess_emit(s, "kb_added", b)) == 0) {
		/* Stored and indexed: the log alone missed it. */
		sess_result_err(&r, "OVERLOADED", 503, "the document %s "
		    "was added (kb_list shows it) but its kb_added event "
		    "could not be logged", op->doc);
		op_answer(op, &r);
		op_end(op);
		return;
	}
	log_info("session %s: kb_add %s, %zu chunks%s at seq %llu", s->id,
	    op->doc, op->nchunks, op->vecs != NULL ? " with vectors" : "",
	    (unsigned long long)r.seq);
	if (op->id != NULL)
		sess_id_add(s, op->id, r.seq);
	op_answer_logged(op, &r);
	op_end(op);
}

/* Stores the document (its chunks and vectors ready). */
static void
add_store(struct kb_op *op)
{
	cJSON *d = cJSON_CreateObject(), *v, *data;
	const cJSON *md = cJSON_GetObjectItem(op->msg, "metadata");
	struct store_req *req;
	char *txt, *b;
	size_t i;

	cJSON_AddStringToObject(d, "documentId", op->doc);
	cJSON_AddItemToObject(d, "content", cJSON_Duplicate(
	    cJSON_GetObjectItem(op->msg, "content"), 1));
	if (cJSON_IsObject(md))
		cJSON_AddItemToObject(d, "metadata", cJSON_Duplicate(md, 1));
	cJSON_AddStringToObject(d, "createdAt", op->created);
	if (op->vecs != NULL) {
		v = cJSON_AddObjectToObject(d, "vectors");
		cJSON_AddNumberToObject(v, "dim", op->dim);
		data = cJSON_AddArrayToObject(v, "data");
		for (i = 0; i < op->nchunks; i++) {
			if ((b = vec_b64(op->vecs + i * op->dim,
			    op->dim)) == NULL)
				break;
			cJSON_AddItemToArray(data, cJSON_CreateString(b));
			free(b);
		}
	}
	txt = cJSON_PrintUnformatted(d);
	cJSON_Delete(d);
	if (txt == NULL || strlen(txt) > STORE_DOC_MAX) {
		free(txt);
		op_err(op, "BAD_REQUEST", 413, "the document with its vectors "
		    "is too large for the store; split it");
		op_end(op);
		return;
	}
	op->sr = (struct store_req *)&op->sr;
	req = store_doc_put(op->s->st, op->doc, txt, strlen(txt), add_stored,
	    op);
	free(txt);
	/* add_stored may have run (and freed op) inside. */
	if (req != NULL)
		op->sr = req;
}

static void
add_embedded(void *arg, int err, const char *msg, const float *vecs,
    unsigned dim)
{
	struct kb_op *op = arg;

	op->er = NULL;
	if (err == 0 && dim > 0 && dim <= KBI_DIM_MAX &&
	    (kbi_dim(op->kb->idx) == 0 || kbi_dim(op->kb->idx) == dim) &&
	    (op->vecs = malloc(op->nchunks * dim * sizeof(float))) != NULL) {
		memcpy(op->vecs, vecs, op->nchunks * dim * sizeof(float));
		op->dim = dim;
	} else {
		char note[300];

		snprintf(note, sizeof(note), "the embedder failed (%.200s): "
		    "the document is searched by keyword only", err != 0 &&
		    msg != NULL ? msg : err == 0 ? "its vectors do not match "
		    "the knowledge base's" : "no message");
		log_warnx("session %s: kb_add %s: %s", op->s->id, op->doc,
		    note);
		op->note = strdup(note);
	}
	add_store(op);
}

static void
add_run(struct kb_op *op)
{
	struct sess *s = op->s;
	struct kb_state *kb = op->kb;
	const struct config *conf = s->wk->conf;
	const char *content = cJSON_GetObjectItem(op->msg,
	    "content")->valuestring, **texts = NULL;
	size_t len = strlen(content), i, *lens = NULL;
	struct sess_result r;
	struct kb_op *o;
	char msg[256];

	if (op->id != NULL) {
		kb_doc_id(s->id, op->id, op->doc);
		memset(&r, 0, sizeof(r));
		if (sess_id_repeat(s, op->c, op->id, &r)) {
			/* A resend: the same document, answered again. */
			if (r.pending && op->c != NULL) {
				op->c->waits--;
				op->c = NULL;
			}
			op_answer(op, &r);
			op_end(op);
			return;
		}
	} else {
		memcpy(op->doc, "doc-", 4);
		util_randhex(op->doc + 4, 8);
	}
	TAILQ_FOREACH(o, &kb->ops, entry)
		if (o != op && o->kind == OP_ADD && o->bytes > 0 &&
		    strcmp(o->doc, op->doc) == 0)
			break;
	if (o != NULL || kbi_doc_find(kb->idx, op->doc) >= 0) {
		/* Being added, or added and its id forgotten since. */
		memset(&r, 0, sizeof(r));
		r.http = 200;
		r.duplicate = 1;
		op_answer(op, &r);
		op_end(op);
		return;
	}
	if (kbi_ndocs(kb->idx) + kb->pend_docs + 1 > conf->kb_max_documents) {
		snprintf(msg, sizeof(msg), "the session's knowledge base holds "
		    "%zu documents, its most (kb-max-documents %u): nothing "
		    "was added; remove documents (kb_remove) or ask the "
		    "operator to raise the bound", kbi_ndocs(kb->idx) +
		    kb->pend_docs, conf->kb_max_documents);
		op_err(op, "QUOTA_EXCEEDED", 413, msg);
		op_end(op);
		return;
	}
	if (kbi_bytes(kb->idx) + kb->pend_bytes + len > conf->kb_max_bytes) {
		snprintf(msg, sizeof(msg), "the session's knowledge base holds "
		    "%zu KiB; with this document (%zu KiB) it would pass its "
		    "bound of %zu KiB (kb-max-bytes): nothing was added; "
		    "remove documents (kb_remove) or ask the operator to raise "
		    "the bound", (kbi_bytes(kb->idx) + kb->pend_bytes) >> 10,
		    len >> 10, conf->kb_max_bytes >> 10);
		op_err(op, "QUOTA_EXCEEDED", 413, msg);
		op_end(op);
		return;
	}
	memset(&r, 0, sizeof(r));
	if (!sess_log_room(s, 512 + (cJSON_GetObjectItem(op->msg,
	    "metadata") != NULL ? KB_META_MAX : 0), &r)) {
		op_answer(op, &r);
		op_end(op);
		return;
	}
	if ((op->nchunks = kbt_chunks(content, len, KBT_CHUNK_BYTES,
	    &op->chunks)) == (size_t)-1) {
		op->nchunks = 0;
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		op_end(op);
		return;
	}
	op->bytes = len;
	kb->pend_docs++;
	kb->pend_bytes += len;
	util_iso8601(op->created, util_now_ms());
	if (!embed_enabled(conf)) {
		add_store(op);
		return;
	}
	texts = calloc(op->nchunks, sizeof(*texts));
	lens = calloc(op->nchunks, sizeof(*lens));
	for (i = 0; texts != NULL && lens != NULL && i < op->nchunks; i++) {
		texts[i] = content + op->chunks[i].off;
		lens[i] = op->chunks[i].len;
	}
	if (texts != NULL && lens != NULL)
		op->er = embed_async(s->wk, texts, lens, op->nchunks,
		    add_embedded, op);
	free(texts);
	free(lens);
	if (op->er == NULL) {
		log_warnx("session %s: kb_add %s: the embedder could not be "
		    "asked; keyword only", s->id, op->doc);
		op->note = strdup("the embedder could not be asked: the "
		    "document is searched by keyword only");
		add_store(op);
	}
}

/* --- kb_remove --- */

static void
remove_done(void *arg, ssize_t n)
{
	struct kb_op *op = arg;
	struct sess *s = op->s;
	struct sess_result r;
	cJSON *b;

	op->sr = NULL;
	if (n < 0) {
		s->wk->metrics.store_errors++;
		op_err(op, "OVERLOADED", 503, "the document could not be "
		    "removed from the store; retry");
		op_end(op);
		return;
	}
	kbi_doc_remove(op->kb->idx, op->doc);
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "documentId", op->doc);
	cJSON_AddBoolToObject(b, "found", n > 0);
	if (n == 0) {
		op_reply(op, "kb_removed", b);
		op_end(op);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.http = 202;
	if ((r.seq = sess_emit(s, "kb_removed", b)) == 0) {
		sess_result_err(&r, "OVERLOADED", 503, "%s", "the document "
		    "was removed but its kb_removed event could not be "
		    "logged");
		op_answer(op, &r);
		op_end(op);
		return;
	}
	log_info("session %s: kb_remove %s at seq %llu", s->id, op->doc,
	    (unsigned long long)r.seq);
	op_answer_logged(op, &r);
	op_end(op);
}

static void
remove_run(struct kb_op *op)
{
	struct store_req *req;

	snprintf(op->doc, sizeof(op->doc), "%s", cJSON_GetStringValue(
	    cJSON_GetObjectItem(op->msg, "documentId")));
	op->sr = (struct store_req *)&op->sr;
	req = store_doc_del(op->s->st, op->doc, remove_done, op);
	if (req != NULL)
		op->sr = req;
}

/* --- kb_search, kb_list --- */

static void
search_done(struct kb_q *q, const float *vec, unsigned dim,
    const char *note)
{
	struct kb_op *op = q->arg;
	struct kbi *idx = op->kb->idx;
	struct kbi_hit *hits;
	struct kbi_chunk_info ci;
	cJSON *b, *res, *e, *m;
	size_t n, i;
	int hybrid;

	op->er = NULL;
	hybrid = vec != NULL && dim == kbi_dim(idx);
	if (vec != NULL && !hybrid)
		note = kbi_dim(idx) == 0 ? "keyword search only: no document "
		    "has vectors" : "keyword search only: the query's vector "
		    "does not match the documents' (the embedder changed)";
	if ((hits = calloc(q->limit, sizeof(*hits))) == NULL) {
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		op_end(op);
		return;
	}
	n = kb_q_kb(idx, q, vec, dim, hits);
	b = cJSON_CreateObject();
	res = cJSON_AddArrayToObject(b, "results");
	for (i = 0; i < n; i++) {
		if (kbi_chunk_get(idx, hits[i].chunk, &ci) == -1)
			continue;
		e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "documentId", ci.doc);
		{
			char *t = strndup(ci.text, ci.len);

			cJSON_AddStringToObject(e, "content", t ? t : "");
			free(t);
		}
		cJSON_AddNumberToObject(e, "score", hits[i].score);
		cJSON_AddNumberToObject(e, "keywordScore", hits[i].keyword);
		if (hybrid)
			cJSON_AddNumberToObject(e, "vectorScore",
			    hits[i].vector);
		m = cJSON_Parse(ci.meta);
		cJSON_AddItemToObject(e, "metadata", cJSON_IsObject(
		    cJSON_GetObjectItem(m, "metadata")) ? cJSON_DetachItemFromObject(m,
		    "metadata") : cJSON_CreateObject());
		cJSON_Delete(m);
		m = cJSON_AddArrayToObject(e, "lines");
		cJSON_AddItemToArray(m, cJSON_CreateNumber(ci.line_first));
		cJSON_AddItemToArray(m, cJSON_CreateNumber(ci.line_last));
		cJSON_AddItemToArray(res, e);
	}
	free(hits);
	cJSON_AddStringToObject(b, "mode", hybrid ? "hybrid" : "keyword");
	if (!hybrid && note != NULL)
		cJSON_AddStringToObject(b, "note", note);
	op_reply(op, "kb_search_result", b);
	op_end(op);
}

static void
search_run(struct kb_op *op)
{
	const char *query;
	size_t limit;
	double threshold;
	char msg[128];

	(void)kb_check_search(op->msg, &query, &limit, &threshold, msg,
	    sizeof(msg));
	/* The op waits for its query in the list (ended by search_done,
	 * or by part_free with the query dropped). */
	if (kb_q_start(op->s, query, limit, threshold, 0, search_done, NULL,
	    op) == -1) {
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		op_end(op);
	}
}

static int
list_doc(void *arg, const char *name, const char *meta, size_t nchunks,
    size_t bytes)
{
	cJSON *docs = arg, *e, *m = cJSON_Parse(meta), *v;

	(void)bytes;
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "documentId", name);
	if ((v = cJSON_DetachItemFromObject(m, "preview")) == NULL)
		v = cJSON_CreateString("");
	cJSON_AddItemToObject(e, "preview", v);
	cJSON_AddNumberToObject(e, "length", proto_count(m, "length"));
	if ((v = cJSON_DetachItemFromObject(m, "metadata")) == NULL)
		v = cJSON_CreateObject();
	cJSON_AddItemToObject(e, "metadata", v);
	if ((v = cJSON_DetachItemFromObject(m, "createdAt")) != NULL)
		cJSON_AddItemToObject(e, "createdAt", v);
	cJSON_AddNumberToObject(e, "chunks", (double)nchunks);
	cJSON_AddItemToArray(docs, e);
	cJSON_Delete(m);
	return 0;
}

static void
list_run(struct kb_op *op)
{
	cJSON *b = cJSON_CreateObject(), *docs;

	docs = cJSON_AddArrayToObject(b, "documents");
	kbi_docs(op->kb->idx, list_doc, docs);
	cJSON_AddNumberToObject(b, "totalCount",
	    (double)kbi_ndocs(op->kb->idx));
	op_reply(op, "kb_list_result", b);
	op_end(op);
}

static void
op_run(struct kb_op *op)
{
	op->queued = 0;
	switch (op->kind) {
	case OP_ADD:
		add_run(op);
		break;
	case OP_REMOVE:
		remove_run(op);
		break;
	case OP_SEARCH:
		search_run(op);
		break;
	case OP_LIST:
		list_run(op);
		break;
	}
}

/* --- loading --- */

static int
load_doc(void *arg, const char *name, const char *json, size_t len)
{
	struct sess *s = arg;
	struct kb_state *kb = STATE(s);
	cJSON *d = cJSON_ParseWithLength(json, len), *v, *data, *e;
	const char *content, *created;
	struct kbt_chunk *ch = NULL;
	float *vecs = NULL;
	unsigned dim = 0, i = 0;
	size_t n, clen;

	content = cJSON_GetStringValue(cJSON_GetObjectItem(d, "content"));
	created = cJSON_GetStringValue(cJSON_GetObjectItem(d, "createdAt"));
	if (content == NULL || (clen = strlen(content)) == 0) {
		log_warnx("session %s: knowledge document %s is not one "
		    "(no content); skipped", s->id, name);
		cJSON_Delete(d);
		return 0;
	}
	if ((n = kbt_chunks(content, clen, KBT_CHUNK_BYTES, &ch)) ==
	    (size_t)-1)
		goto nomem;
	v = cJSON_GetObjectItem(d, "vectors");
	data = cJSON_GetObjectItem(v, "data");
	dim = (unsigned)proto_count(v, "dim");
	if (dim > 0 && dim <= KBI_DIM_MAX &&
	    (size_t)cJSON_GetArraySize(data) == n &&
	    (vecs = malloc(n * dim * sizeof(float))) != NULL) {
		cJSON_ArrayForEach(e, data) {
			if (!cJSON_IsString(e) || vec_unb64(e->valuestring,
			    vecs + (size_t)i * dim, dim) == -1) {
				log_warnx("session %s: knowledge document %s "
				    "has bad vectors; keyword only", s->id,
				    name);
				free(vecs);
				vecs = NULL;
				break;
			}
			i++;
		}
	}
	if (idx_add(kb->building, name, content, clen, cJSON_GetObjectItem(d,
	    "metadata"), created != NULL ? created : "", ch, n, vecs,
	    dim) == -1)
		goto nomem;
	kb->loaded++;
	free(ch);
	free(vecs);
	cJSON_Delete(d);
	return 0;
nomem:
	free(ch);
	free(vecs);
	cJSON_Delete(d);
	return 1;
}

static void
load_done(void *arg, ssize_t n)
{
	struct sess *s = arg;
	struct kb_state *kb = STATE(s);
	struct kb_op *op, *next;
	int ok = n >= 0 && kb->loaded == (size_t)n;
	/* A store that lets only the owner read (errno set just before a
	 * refusal at once): a follower cannot answer. */
	int denied = n < 0 && errno == EPERM && s->follower;

	kb->lr = NULL;
	if (!ok) {
		if (n < 0)
			s->wk->metrics.store_errors++;
		log_warnx("session %s: its knowledge base could not be read "
		    "(%s); it is read again on the next kb request", s->id,
		    n < 0 ? "store error" : "out of memory");
		kbi_free(kb->building);
		kb->building = NULL;
		kb->load = KB_FAILED;
	} else {
		kbi_free(kb->idx);
		kb->idx = kb->building;
		kb->building = NULL;
		kb->load = KB_READY;
		if (n > 0)
			log_info("session %s: knowledge base read, %zu "
			    "documents, %zu chunks", s->id, kbi_ndocs(kb->idx),
			    kbi_nchunks(kb->idx));
	}
	for (op = TAILQ_FIRST(&kb->ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, entry);
		if (!op->queued)
			continue;
		if (ok) {
			op_run(op);
			/* op_run may end later ops too (none now). */
			continue;
		}
		op->queued = 0;
		if (denied)
			op_err(op, "OVERLOADED", 503, "the knowledge base is "
			    "read by the host that owns the session, not this "
			    "one (it follows it): retry, or connect to the "
			    "owner's host");
		else
			op_err(op, "INTERNAL", 500, "the knowledge base could "
			    "not be read from the store; retry");
		op_end(op);
	}
	kb_q_unpark(kb);
	/* Turns held by the load go on; inside part_own the session's
	 * resume (after the parts) decides what runs first. */
	if (!kb->in_own)
		s->wk->agent->next(s);
}

void
kb_load_start(struct sess *s)
{
	struct kb_state *kb = kb_state_of(s);
	struct store_req *r;

	if (kb == NULL || kb->load == KB_LOADING || s->st == NULL)
		return;
	/* A follower reads to answer kb_search and kb_list; its owner's
	 * kb_added and kb_removed make it read again (part_scan). */
	kb->as_follower = s->follower;
	if ((kb->building = kbi_new()) == NULL) {
		kb->load = KB_FAILED;
		return;
	}
	if (kb->idx == NULL && (kb->idx = kbi_new()) == NULL) {
		kbi_free(kb->building);
		kb->building = NULL;
		kb->load = KB_FAILED;
		return;
	}
	kb->loaded = 0;
	kb->load = KB_LOADING;
	kb->lr = (struct store_req *)&kb->lr;
	r = store_doc_all(s->st, load_doc, load_done, s);
	if (kb->lr == (struct store_req *)&kb->lr)
		kb->lr = r;
}

/* --- kb_* messages --- */

void
kb_input(struct sess *s, struct sess_client *c, const struct sess_from *from,
    struct proto_in *in, struct sess_result *r)
{
	const struct config *conf = s->wk->conf;
	struct kb_state *kb;
	struct kb_op *op = NULL, *o;
	enum kb_kind kind;
	const char *q, *doc = NULL;
	size_t limit, held, nops = 0;
	double th;

	kind = strcmp(in->type, "kb_add") == 0 ? OP_ADD :
	    strcmp(in->type, "kb_remove") == 0 ? OP_REMOVE :
	    strcmp(in->type, "kb_search") == 0 ? OP_SEARCH : OP_LIST;
	if ((kind == OP_ADD || kind == OP_REMOVE) &&
	    from->role == IPC_ROLE_OBSERVER) {
		sess_result_err(r, "FORBIDDEN", 403, "%s changes the knowledge "
		    "base: an observer only reads (kb_search, kb_list); use "
		    "a stream with the user role", in->type);
		return;
	}
	if (kind == OP_ADD && kb_check_add(in->root, conf->kb_max_bytes,
	    r->msg, sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if (kind == OP_REMOVE && (proto_str(in->root, "documentId", 1, 4096,
	    &doc, r->msg, sizeof(r->msg)) == -1 || !store_valid_id(doc))) {
		if (r->msg[0] == '\0' || doc != NULL)
			snprintf(r->msg, sizeof(r->msg), "field 'documentId' "
			    "must name a document (as kb_added or kb_list "
			    "gave it)");
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	if (kind == OP_SEARCH && kb_check_search(in->root, &q, &limit, &th,
	    r->msg, sizeof(r->msg)) == -1) {
		r->code = "BAD_REQUEST";
		r->http = 400;
		return;
	}
	/* A follower passes changes to the owner (answered once its inbox
	 * has them) and answers reads from the store itself: the owner's
	 * answer could not come back to the requester. */
	if (s->follower && (kind == OP_ADD || kind == OP_REMOVE)) {
		follow_input(s, c, from, in, r);
		return;
	}
	held = kind == OP_ADD ? strlen(cJSON_GetStringValue(
	    cJSON_GetObjectItem(in->root, "content"))) : 0;
	if ((kb = kb_state_of(s)) == NULL || (op = calloc(1, sizeof(*op))) ==
	    NULL || (op->msg = cJSON_Duplicate(in->root, 1)) == NULL ||
	    (in->id != NULL && (op->id = strdup(in->id)) == NULL)) {
		if (kb != NULL && op != NULL) {
			cJSON_Delete(op->msg);
			free(op);
		}
		sess_result_err(r, "OVERLOADED", 503, "%s", "out of memory; "
		    "retry");
		return;
	}
	/* What requests under way may hold: KB_QUEUE_MAX of them, and
	 * documents no larger in all than the knowledge base may be. */
	TAILQ_FOREACH(o, &kb->ops, entry)
		nops++;
	if (nops >= KB_QUEUE_MAX || kb->held_bytes + held >
	    conf->kb_max_bytes) {
		cJSON_Delete(op->msg);
		free(op->id);
		free(op);
		sess_result_err(r, "RATE_LIMITED", 429, "%zu knowledge base "
		    "requests (%zu KiB of documents) are under way; retry once "
		    "they are answered", nops, kb->held_bytes >> 10);
		return;
	}
	op->held = held;
	kb->held_bytes += held;
	op->kb = kb;
	op->s = s;
	op->kind = kind;
	op->c = c;
	if (c != NULL)
		c->waits++;
	TAILQ_INSERT_TAIL(&kb->ops, op, entry);
	r->pending = 1;
	if (kb->load == KB_READY) {
		op_run(op);
		return;
	}
	op->queued = 1;
	if (kb->load != KB_LOADING)
		kb_load_start(s);
}

/* --- the session's part --- */

static void
part_own(struct sess *s)
{
	struct kb_state *kb = kb_state_of(s);

	/* What a follower read may be behind: read again as the owner. */
	if (kb != NULL && (kb->load != KB_READY || kb->as_follower)) {
		kb->in_own = 1;
		kb_load_start(s);
		kb->in_own = 0;
	}
}

/* A follower's event: the owner changed the documents, read again. */
#define ADDED	"\"type\":\"kb_added\""
#define REMOVED	"\"type\":\"kb_removed\""
static void
part_scan(struct sess *s, uint64_t seq, const char *json, size_t len)
{
	struct kb_state *kb = s->kb;

	(void)seq;
	if (!s->follower || kb == NULL || kb->load != KB_READY ||
	    (memmem(json, len, ADDED, sizeof(ADDED) - 1) == NULL &&
	    memmem(json, len, REMOVED, sizeof(REMOVED) - 1) == NULL))
		return;
	kb->load = KB_UNLOADED;
}

static void
part_state(struct sess *s, cJSON *o, int info)
{
	struct kb_state *kb = s->kb;
	cJSON *k;

	if (!info || kb == NULL || kb->idx == NULL || kb->load != KB_READY)
		return;
	k = cJSON_AddObjectToObject(o, "knowledge");
	cJSON_AddNumberToObject(k, "documents", (double)kbi_ndocs(kb->idx));
	cJSON_AddNumberToObject(k, "bytes", (double)kbi_bytes(kb->idx));
	cJSON_AddNumberToObject(k, "chunks", (double)kbi_nchunks(kb->idx));
}

static int
part_holds(const struct sess *s)
{
	const struct kb_state *kb = s->kb;

	return kb != NULL && kb->load == KB_LOADING;
}

static int
part_busy(const struct sess *s)
{
	const struct kb_state *kb = s->kb;

	return kb != NULL && (kb->load == KB_LOADING ||
	    !TAILQ_EMPTY(&kb->ops) || !TAILQ_EMPTY(&kb->qs));
}

/* A requester closed: what it waits for goes on, unanswered. */
static void
part_gone(struct sess *s, struct sess_client *c)
{
	struct kb_state *kb = s->kb;
	struct kb_op *op;

	if (kb == NULL)
		return;
	TAILQ_FOREACH(op, &kb->ops, entry)
		if (op->c == c) {
			c->waits--;
			op->c = NULL;
		}
}

static void
part_free(struct sess *s)
{
	struct kb_state *kb = s->kb;
	struct kb_op *op;

	if (kb == NULL)
		return;
	while ((op = TAILQ_FIRST(&kb->ops)) != NULL) {
		TAILQ_REMOVE(&kb->ops, op, entry);
		op_err(op, "OVERLOADED", 503, "the session left this worker "
		    "before the knowledge base request was done; retry");
		op_free(op);
	}
	kb_q_drop_all(kb);
	store_req_cancel(kb->lr);
	kbi_free(kb->building);
	kbi_free(kb->idx);
	free(kb);
	s->kb = NULL;
}

const struct sess_part kb_part = {
	.own = part_own,
	.scan = part_scan,
	.state = part_state,
	.holds = part_holds,
	.busy = part_busy,
	.gone = part_gone,
	.free = part_free,
};
