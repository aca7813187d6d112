/*
 * Unit tests for the session knowledge base (workers/kb.c, kb_rag.c,
 * kb_text.c): the messages' checks, the documentId, previews and lengths
 * in characters, the bounds (refused, nothing changed), kb_list and
 * kb_search answers, loading stored documents with their vectors, and
 * what retrieval gives the model (the choice by score, top-k and budget,
 * the context text, the rag_context event).  The store, the embedder and
 * the index are fakes here; the log is fake_sess.h's array.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/kb.c"
#include "../../workers/kb_rag.c"
#include "../../workers/kb_text.c"
#include "check_main.h"
#include "fake_sess.h"

static struct config conf;
static struct wk wk;
static struct cfg_provider embedder;

/* --- fakes: the store's documents --- */

#define DOCS	16
static struct {
	char	*name;
	char	*json;
}		 docs[DOCS];
static int	 store_fail;	/* the next doc call fails */
static int	 idle_agains;

int
store_valid_id(const char *id)
{
	return id != NULL && id[0] != '\0' && id[0] != '.' &&
	    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._:-") == strlen(id);
}

/* store_async: store_doc_all answers when load_finish() says. */
static int		 store_async;
static store_doc_cb	 pend_cb;
static store_done_cb	 pend_done;
static void		*pend_arg;

void
store_req_cancel(struct store_req *r)
{
	if (r != NULL) {
		ck_assert_ptr_eq(r, (struct store_req *)&pend_done);
		pend_done = NULL;
	}
}

static int
doc_find(const char *name)
{
	int i;

	for (i = 0; i < DOCS; i++)
		if (docs[i].name != NULL && strcmp(docs[i].name, name) == 0)
			return i;
	return -1;
}

static int
doc_count(void)
{
	int i, n = 0;

	for (i = 0; i < DOCS; i++)
		n += docs[i].name != NULL;
	return n;
}

struct store_req *
store_doc_put(struct store_sess *st, const char *name, const char *json,
    size_t len, store_done_cb done, void *arg)
{
	int i = doc_find(name);

	(void)st;
	if (store_fail) {
		store_fail = 0;
		done(arg, -1);
		return NULL;
	}
	if (i == -1)
		for (i = 0; i < DOCS && docs[i].name != NULL; i++)
			;
	ck_assert_int_lt(i, DOCS);
	free(docs[i].name);
	free(docs[i].json);
	docs[i].name = strdup(name);
	docs[i].json = strndup(json, len);
	done(arg, 1);
	return NULL;
}

struct store_req *
store_doc_del(struct store_sess *st, const char *name, store_done_cb done,
    void *arg)
{
	int i = doc_find(name);

	(void)st;
	if (i >= 0) {
		free(docs[i].name);
		free(docs[i].json);
		docs[i].name = docs[i].json = NULL;
	}
	done(arg, i >= 0);
	return NULL;
}

struct store_req *
store_doc_all(struct store_sess *st, store_doc_cb cb, store_done_cb done,
    void *arg)
{
	int i, n = 0;

	(void)st;
	if (store_async) {
		store_async = 0;
		pend_cb = cb;
		pend_done = done;
		pend_arg = arg;
		return (struct store_req *)&pend_done;
	}
	if (store_fail) {
		/* As store.c refuses a reader that does not own it. */
		errno = store_fail == 2 ? EPERM : EIO;
		store_fail = 0;
		done(arg, -1);
		return NULL;
	}
	for (i = 0; i < DOCS; i++)
		if (docs[i].name != NULL) {
			n++;
			if (cb(arg, docs[i].name, docs[i].json,
			    strlen(docs[i].json)) != 0)
				break;
		}
	done(arg, n);
	return NULL;
}

/* The pending store_doc_all completes. */
static void
load_finish(void)
{
	store_done_cb d = pend_done;
	int i, n = 0;

	ck_assert_ptr_nonnull(d);
	pend_done = NULL;
	for (i = 0; i < DOCS; i++)
		if (docs[i].name != NULL) {
			n++;
			pend_cb(pend_arg, docs[i].name, docs[i].json,
			    strlen(docs[i].json));
		}
	d(pend_arg, n);
}

static void
docs_clear(void)
{
	int i;

	for (i = 0; i < DOCS; i++) {
		free(docs[i].name);
		free(docs[i].json);
		docs[i].name = docs[i].json = NULL;
	}
}

static void
add_stored_noop(void *arg, ssize_t n)
{
	(void)arg;
	ck_assert_int_eq(n, 1);
}

/* --- fakes: the embedder (a word's vector: "car" and "automobile"
 * point the same way), answered when a test says --- */

#define VDIM	3
static int		 embed_on;
static embed_done_fn	 emb_done;
static void		*emb_arg;
static float		*emb_vecs;
static size_t		 emb_n;
static int		 emb_fail;

int
embed_enabled(const struct config *c)
{
	(void)c;
	return embed_on;
}

static void
vec_of(const char *t, size_t len, float *v)
{
	v[0] = v[1] = v[2] = 0.01f;
	if (memmem(t, len, "car", 3) || memmem(t, len, "automobile", 10))
		v[0] = 1;
	if (memmem(t, len, "boat", 4))
		v[1] = 1;
	if (memmem(t, len, "plane", 5))
		v[2] = 1;
}

struct embed_req *
embed_async(struct wk *w, const char *const *texts, const size_t *lens,
    size_t n, embed_done_fn done, void *arg)
{
	size_t i;

	(void)w;
	ck_assert_ptr_null(emb_done);	/* one at a time here */
	emb_done = done;
	emb_arg = arg;
	emb_n = n;
	emb_vecs = calloc(n * VDIM, sizeof(float));
	for (i = 0; i < n; i++)
		vec_of(texts[i], lens[i], emb_vecs + i * VDIM);
	return (struct embed_req *)&emb_done;
}

void
embed_cancel(struct embed_req *r)
{
	(void)r;
	emb_done = NULL;
	free(emb_vecs);
	emb_vecs = NULL;
}

/* Answers the embedder's pending request (fail: with an error). */
static void
embed_answer(void)
{
	embed_done_fn d = emb_done;
	float *v = emb_vecs;

	ck_assert_ptr_nonnull(d);
	emb_done = NULL;
	emb_vecs = NULL;
	if (emb_fail)
		d(emb_arg, -1, "HTTP 500", NULL, 0);
	else
		d(emb_arg, 0, NULL, v, VDIM);
	free(v);
}

/* --- fakes: the host's index, the session's other calls --- */

static struct kbi_chunk_info ix_info[2];
static struct kbi_hit ix_hits[2];
static size_t ix_n;

int
index_present(struct wk *w)
{
	(void)w;
	return ix_n > 0;
}

size_t
index_search(struct wk *w, const struct kbi_query *q, struct kbi_hit *out,
    struct kbi_chunk_info *info)
{
	size_t i;

	(void)w;
	for (i = 0; i < ix_n && i < q->limit; i++) {
		out[i] = ix_hits[i];
		info[i] = ix_info[i];
	}
	return i;
}

void
follow_input(struct sess *s, struct sess_client *c,
    const struct sess_from *from, struct proto_in *in, struct sess_result *r)
{
	(void)s;
	(void)c;
	(void)from;
	(void)in;
	r->code = "FORWARDED";
}

void
sess_idle_again(struct sess *s)
{
	(void)s;
	idle_agains++;
}

int
sess_log_room(struct sess *s, size_t need, struct sess_result *r)
{
	(void)s;
	(void)need;
	(void)r;
	return 1;
}

/* As sess.c's: the answer the requester reads is the point of the tests. */
int
sess_reply(struct sess *s, const char *type, const char *id, cJSON *body,
    int http, struct sess_result *r)
{
	memset(r, 0, sizeof(*r));
	r->http = http;
	if (id != NULL)
		cJSON_AddStringToObject(body, "id", id);
	return (r->reply = proto_reply(type, s->id, body)) == NULL ? -1 : 0;
}

void
sess_answer_durable(struct sess *s, struct sess_client *c, const char *id,
    uint64_t seq, enum sess_answer a, struct sess_result *r)
{
	(void)s;
	(void)c;
	(void)id;
	(void)a;
	r->seq = seq;
}

static int nexts;
static void
agent_next(struct sess *s)
{
	(void)s;
	nexts++;
}
static const struct sess_agent agent = { .next = agent_next };

/* --- a requester --- */

static struct {
	int		 n;
	char		 code[32];
	char		 msg[256];
	uint64_t	 seq;
	int		 duplicate;
	cJSON		*reply;
}		 ans;

static void
client_done(struct sess_client *c, struct sess *s, const char *id,
    const struct sess_result *r)
{
	(void)c;
	(void)s;
	(void)id;
	ans.n++;
	snprintf(ans.code, sizeof(ans.code), "%s", r->code ? r->code : "");
	snprintf(ans.msg, sizeof(ans.msg), "%s", r->msg);
	ans.seq = r->seq;
	ans.duplicate = r->duplicate;
	cJSON_Delete(ans.reply);
	ans.reply = r->reply != NULL ? cJSON_Parse(r->reply) : NULL;
}

static struct sess_client cl = { "c-0", NULL, 0, client_done };

/* Sends one message as role; returns r's code ("" none). */
static const char *
send_as(int role, const char *json)
{
	static char code[32];
	struct proto_in in;
	struct sess_result r;
	const char *c;
	char msg[256], *full;
	unsigned waits;

	/* The envelope every message has. */
	ck_assert_int_ne(asprintf(&full, "{\"v\":1,\"sessionId\":\"s1\",%s",
	    json + 1), -1);
	ck_assert_int_eq(proto_parse(full, strlen(full), 32, &in, &c, msg,
	    sizeof(msg)), 0);
	free(full);
	memset(&r, 0, sizeof(r));
	waits = cl.waits;
	kb_input(&fs.s, &cl, &(struct sess_from){ role, "", "", 0 }, &in, &r);
	proto_in_free(&in);
	if (r.pending)
		return "";
	ck_assert_int_eq(cl.waits, waits);	/* a refusal holds nothing */
	snprintf(ans.msg, sizeof(ans.msg), "%s", r.msg);
	snprintf(code, sizeof(code), "%s", r.code ? r.code : "");
	return code;
}

static const char *
send_msg(const char *json)
{
	return send_as(IPC_ROLE_USER, json);
}

static void
setup(void)
{
	memset(&conf, 0, sizeof(conf));
	memset(&ans, 0, sizeof(ans));
	conf.kb_max_documents = 3;
	conf.kb_max_bytes = 4096;
	conf.rag = 1;
	conf.rag_top_k = 5;
	conf.rag_budget = 2000;
	memset(&embedder, 0, sizeof(embedder));
	embedder.timeout_ms = 1000;
	wk.conf = &conf;
	wk.agent = &agent;
	wk.base = event_base_new();
	fake_sess_init(&wk);
	snprintf(fs.s.id, sizeof(fs.s.id), "s1");
	fs.s.st = (struct store_sess *)&fs;	/* any: the fakes ignore it */
	store_fail = embed_on = emb_fail = store_async = 0;
	pend_done = NULL;
	ix_n = 0;
	nexts = idle_agains = 0;
}

static void
teardown(void)
{
	part_free(&fs.s);
	fake_sess_free();
	docs_clear();
	cJSON_Delete(ans.reply);
	ans.reply = NULL;
	event_base_free(wk.base);
	ck_assert_ptr_null(emb_done);
}

/* --- the pure helpers --- */

START_TEST(test_doc_id)
{
	char id[KB_DOCID_LEN + 1], id2[KB_DOCID_LEN + 1];

	/* python3: hashlib.sha256(b"s1\nm1").hexdigest()[:16] */
	kb_doc_id("s1", "m1", id);
	ck_assert_str_eq(id, "doc-eaad0cf16d09304a");
	kb_doc_id("s1", "m2", id2);
	ck_assert_str_ne(id, id2);
	ck_assert_int_eq(strlen(id2), KB_DOCID_LEN);
}
END_TEST

START_TEST(test_chars)
{
	/* "é" is 2 bytes, "€" 3, "😀" 4. */
	const char *t = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";
	char big[400];
	size_t i;

	ck_assert_uint_eq(kb_chars(t, strlen(t)), 5);
	ck_assert_uint_eq(kb_prefix(t, strlen(t), 0), 0);
	ck_assert_uint_eq(kb_prefix(t, strlen(t), 2), 3);
	ck_assert_uint_eq(kb_prefix(t, strlen(t), 3), 6);
	ck_assert_uint_eq(kb_prefix(t, strlen(t), 4), 10);
	ck_assert_uint_eq(kb_prefix(t, strlen(t), 99), strlen(t));
	/* 150 "é": the preview is 100 characters, 200 bytes, never cut. */
	for (i = 0; i < 150; i++)
		memcpy(big + 2 * i, "\xc3\xa9", 2);
	big[300] = '\0';
	ck_assert_uint_eq(kb_prefix(big, 300, KB_PREVIEW), 200);
	ck_assert_uint_eq(kb_chars(big, 300), 150);
}
END_TEST

static int
check_add(const char *json, size_t max)
{
	cJSON *m = cJSON_Parse(json);
	char msg[256];
	int rc = kb_check_add(m, max, msg, sizeof(msg));

	cJSON_Delete(m);
	return rc;
}

START_TEST(test_check_add)
{
	cJSON *m;
	char msg[256], *big;
	size_t n = KB_META_MAX + 10;

	ck_assert_int_eq(check_add("{\"content\":\"x\"}", 10), 0);
	ck_assert_int_eq(check_add("{\"content\":\"x\",\"metadata\":{\"a\":1}}",
	    10), 0);
	ck_assert_int_eq(check_add("{}", 10), -1);
	ck_assert_int_eq(check_add("{\"content\":\"\"}", 10), -1);
	ck_assert_int_eq(check_add("{\"content\":5}", 10), -1);
	ck_assert_int_eq(check_add("{\"content\":\"0123456789a\"}", 10), -1);
	ck_assert_int_eq(check_add("{\"content\":\"0123456789\"}", 10), 0);
	ck_assert_int_eq(check_add("{\"content\":\"x\",\"metadata\":[1]}",
	    10), -1);
	/* Not UTF-8. */
	m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "content", "a\xff");
	ck_assert_int_eq(kb_check_add(m, 10, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "UTF-8"));
	cJSON_Delete(m);
	/* Metadata past 64 KiB as JSON. */
	m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "content", "x");
	big = malloc(n + 1);
	memset(big, 'a', n);
	big[n] = '\0';
	cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "metadata"), "k",
	    big);
	free(big);
	ck_assert_int_eq(kb_check_add(m, 10, msg, sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "metadata"));
	cJSON_Delete(m);
}
END_TEST

static int
check_search(const char *json, size_t *limit, double *th)
{
	cJSON *m = cJSON_Parse(json);
	const char *q;
	char msg[256];
	int rc = kb_check_search(m, &q, limit, th, msg, sizeof(msg));

	cJSON_Delete(m);
	return rc;
}

START_TEST(test_check_search)
{
	size_t l;
	double th;

	ck_assert_int_eq(check_search("{\"query\":\"a\"}", &l, &th), 0);
	ck_assert_uint_eq(l, 5);
	ck_assert(th == 0);
	ck_assert_int_eq(check_search("{\"query\":\"a\",\"limit\":50,"
	    "\"threshold\":0.5}", &l, &th), 0);
	ck_assert_uint_eq(l, 50);
	ck_assert(th == 0.5);
	ck_assert_int_eq(check_search("{\"query\":\"\"}", &l, &th), -1);
	ck_assert_int_eq(check_search("{}", &l, &th), -1);
	ck_assert_int_eq(check_search("{\"query\":\"a\",\"limit\":0}", &l,
	    &th), -1);
	ck_assert_int_eq(check_search("{\"query\":\"a\",\"limit\":51}", &l,
	    &th), -1);
	ck_assert_int_eq(check_search("{\"query\":\"a\",\"limit\":2.5}", &l,
	    &th), -1);
	ck_assert_int_eq(check_search("{\"query\":\"a\",\"threshold\":1.5}",
	    &l, &th), -1);
	ck_assert_int_eq(check_search("{\"query\":\"a\",\"threshold\":-0.1}",
	    &l, &th), -1);
}
END_TEST

static struct kb_hit
hit(int index, const char *name, double score, size_t len)
{
	static const char text[2048] = { 'x' };

	return (struct kb_hit){ index, name, NULL, text, len, 1, 2, score };
}

START_TEST(test_rag_select)
{
	struct kb_hit h[6];
	size_t keep[6], k;

	/* Best first; top-k 3. */
	h[0] = hit(1, "/a.c", 0.2, 40);
	h[1] = hit(0, "doc-b", 0.9, 40);
	h[2] = hit(0, "doc-a", 0.5, 40);
	h[3] = hit(1, "/b.c", 0.7, 40);
	k = kb_rag_select(h, 4, 3, 1000, keep);
	ck_assert_uint_eq(k, 3);
	ck_assert_str_eq(h[0].name, "doc-b");
	ck_assert_str_eq(h[1].name, "/b.c");
	ck_assert_str_eq(h[2].name, "doc-a");
	ck_assert_uint_eq(keep[0], 40);

	/* Budget 30 tokens = 120 bytes: 100 fits, the 80 does not, the
	 * 20 after it does. */
	h[0] = hit(0, "doc-a", 0.9, 100);
	h[1] = hit(0, "doc-b", 0.8, 80);
	h[2] = hit(1, "/c", 0.7, 20);
	k = kb_rag_select(h, 3, 5, 30, keep);
	ck_assert_uint_eq(k, 2);
	ck_assert_str_eq(h[0].name, "doc-a");
	ck_assert_str_eq(h[1].name, "/c");
	ck_assert_uint_eq(keep[0] + keep[1], 120);

	/* The best alone is past the budget: it is cut to fit. */
	h[0] = hit(0, "doc-a", 0.9, 1000);
	k = kb_rag_select(h, 1, 5, 50, keep);
	ck_assert_uint_eq(k, 1);
	ck_assert_uint_eq(keep[0], 200);

	/* Ties: the session's kb first, then by name. */
	h[0] = hit(1, "/a", 0.5, 10);
	h[1] = hit(0, "doc-z", 0.5, 10);
	h[2] = hit(0, "doc-a", 0.5, 10);
	k = kb_rag_select(h, 3, 5, 1000, keep);
	ck_assert_uint_eq(k, 3);
	ck_assert_str_eq(h[0].name, "doc-a");
	ck_assert_str_eq(h[1].name, "doc-z");
	ck_assert_str_eq(h[2].name, "/a");
	ck_assert_uint_eq(kb_rag_select(h, 0, 5, 1000, keep), 0);
}
END_TEST

START_TEST(test_rag_text)
{
	struct kb_hit h[2] = {
		{ 0, "doc-1", "{\"metadata\":{\"title\":\"Guide\",\"v\":2}}",
		    "alpha text", 10, 1, 1, 0.9 },
		{ 1, "/src/x.c", NULL, "int x;\nmore", 11, 10, 40, 0.5 },
	};
	size_t keep[2] = { 10, 6 };
	char *t = kb_rag_text(h, keep, 2);

	ck_assert_str_eq(t, "Context from the session's knowledge base and "
	    "indexed files. Cite a source by its [n] when you use it.\n\n"
	    "[1] kb doc-1 (title=Guide, v=2)\nalpha text\n\n"
	    "[2] /src/x.c:10-40\nint x;");
	free(t);
	ck_assert_ptr_null(kb_rag_text(h, keep, 0));
}
END_TEST

START_TEST(test_vec_b64)
{
	float v[3] = { 1.5f, -2.0f, 0.25f }, w[3];
	char *b = vec_b64(v, 3);

	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(vec_unb64(b, w, 3), 0);
	ck_assert(memcmp(v, w, sizeof(v)) == 0);
	ck_assert_int_eq(vec_unb64(b, w, 2), -1);	/* wrong size */
	free(b);
}
END_TEST

/* --- through the messages --- */

/* Loads the (fake) store's documents: the session is owned. */
static void
own(void)
{
	part_own(&fs.s);
	ck_assert_int_eq(STATE(&fs.s)->load, KB_READY);
}

START_TEST(test_add_list_remove)
{
	cJSON *e, *d, *doc;
	const char *id;

	own();
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"id\":\"m1\",\"content\":"
	    "\"h\xc3\xa9llo world\\nsecond line\",\"metadata\":{\"t\":\"x\"}}"),
	    "");
	ck_assert_int_eq(ans.n, 1);
	ck_assert_str_eq(ans.code, "");
	e = fake_logged("kb_added", 0);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(ans.seq, (uint64_t)proto_count(e, "seq"));
	id = cJSON_GetStringValue(cJSON_GetObjectItem(e, "documentId"));
	ck_assert_str_eq(id, "doc-eaad0cf16d09304a");
	ck_assert_int_eq((int)proto_count(e, "length"), 23);
	ck_assert_int_eq((int)proto_count(e, "chunks"), 1);
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(e, "vectors")));
	/* Never the content in the log. */
	ck_assert_ptr_null(cJSON_GetObjectItem(e, "content"));
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(e, "metadata"));
	/* Stored as the brief says. */
	ck_assert_int_eq(doc_count(), 1);
	doc = cJSON_Parse(docs[doc_find(id)].json);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(doc,
	    "documentId")), id);
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(doc, "createdAt"));
	ck_assert_ptr_null(cJSON_GetObjectItem(doc, "vectors"));
	cJSON_Delete(doc);
	ck_assert_int_eq(cl.waits, 0);

	/* The same message again: the same document, not a second one. */
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"id\":\"m1\",\"content\":"
	    "\"h\xc3\xa9llo world\\nsecond line\"}"), "");
	ck_assert_int_eq(ans.duplicate, 1);
	ck_assert_int_eq(fake_count("kb_added"), 1);
	ck_assert_int_eq(doc_count(), 1);

	ck_assert_str_eq(send_msg("{\"type\":\"kb_list\",\"id\":\"l1\"}"), "");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(ans.reply,
	    "type")), "kb_list_result");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(ans.reply,
	    "id")), "l1");
	ck_assert_int_eq((int)proto_count(ans.reply, "totalCount"), 1);
	d = cJSON_GetArrayItem(cJSON_GetObjectItem(ans.reply, "documents"), 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(d,
	    "preview")), "h\xc3\xa9llo world\nsecond line");
	ck_assert_int_eq((int)proto_count(d, "length"), 23);
	ck_assert_int_eq((int)proto_count(d, "chunks"), 1);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(d, "metadata"), "t")), "x");
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(d, "createdAt"));
	/* Nothing logged by a list. */
	ck_assert_int_eq(cJSON_GetArraySize(fs.log), 1);

	/* Unknown: answered, not logged. */
	ck_assert_str_eq(send_msg("{\"type\":\"kb_remove\",\"documentId\":"
	    "\"doc-nope\"}"), "");
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(ans.reply, "found")));
	ck_assert_int_eq(fake_count("kb_removed"), 0);
	ck_assert_str_eq(send_msg("{\"type\":\"kb_remove\",\"documentId\":"
	    "\"doc-eaad0cf16d09304a\"}"), "");
	ck_assert_ptr_null(ans.reply);
	e = fake_logged("kb_removed", 0);
	ck_assert_ptr_nonnull(e);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(e, "found")));
	ck_assert_int_eq(doc_count(), 0);
	ck_assert_uint_eq(kbi_ndocs(STATE(&fs.s)->idx), 0);
	ck_assert_str_eq(send_msg("{\"type\":\"kb_remove\",\"documentId\":"
	    "\"../x\"}"), "BAD_REQUEST");
}
END_TEST

START_TEST(test_bounds)
{
	char big[5000];

	own();
	/* An observer reads, never adds. */
	ck_assert_str_eq(send_as(IPC_ROLE_OBSERVER, "{\"type\":\"kb_add\","
	    "\"content\":\"x\"}"), "FORBIDDEN");
	ck_assert_str_eq(send_as(IPC_ROLE_OBSERVER, "{\"type\":\"kb_list\"}"),
	    "");
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"content\":\"one\"}"),
	    "");
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"content\":\"two\"}"),
	    "");
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"content\":\"three\"}"),
	    "");
	ck_assert_int_eq(doc_count(), 3);
	/* A fourth: refused, nothing changed, the bound named. */
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"content\":\"four\"}"),
	    "");
	ck_assert_str_eq(ans.code, "QUOTA_EXCEEDED");
	ck_assert_ptr_nonnull(strstr(ans.msg, "kb-max-documents 3"));
	ck_assert_int_eq(doc_count(), 3);
	ck_assert_int_eq(fake_count("kb_added"), 3);
	/* Bytes: 4096 in all. */
	conf.kb_max_documents = 10;
	memset(big, 'a', 4090);
	big[4090] = '\0';
	{
		char *m;

		ck_assert_int_ne(asprintf(&m, "{\"type\":\"kb_add\",\"content\":"
		    "\"%s\"}", big), -1);
		ck_assert_str_eq(send_msg(m), "");
		free(m);
	}
	ck_assert_str_eq(ans.code, "QUOTA_EXCEEDED");
	ck_assert_ptr_nonnull(strstr(ans.msg, "kb-max-bytes"));
	ck_assert_int_eq(doc_count(), 3);
	/* Past kb-max-bytes alone: a bad request. */
	memset(big, 'a', 4097);
	big[4097] = '\0';
	{
		char *m;

		ck_assert_int_ne(asprintf(&m, "{\"type\":\"kb_add\",\"content\":"
		    "\"%s\"}", big), -1);
		ck_assert_str_eq(send_msg(m), "BAD_REQUEST");
		free(m);
	}
	/* A store failure: nothing indexed or logged. */
	store_fail = 1;
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"content\":\"five\"}"),
	    "");
	ck_assert_str_eq(ans.code, "OVERLOADED");
	ck_assert_uint_eq(kbi_ndocs(STATE(&fs.s)->idx), 3);
	ck_assert_int_eq(fake_count("kb_added"), 3);
	ck_assert_uint_eq(STATE(&fs.s)->pend_docs, 0);
	ck_assert_uint_eq(STATE(&fs.s)->pend_bytes, 0);
}
END_TEST

START_TEST(test_search_keyword)
{
	cJSON *r;

	own();
	send_msg("{\"type\":\"kb_add\",\"id\":\"a\",\"content\":\"the parser "
	    "reads tokens\",\"metadata\":{\"f\":\"p\"}}");
	send_msg("{\"type\":\"kb_add\",\"id\":\"b\",\"content\":\"a boat on the "
	    "lake\"}");
	ck_assert_str_eq(send_msg("{\"type\":\"kb_search\",\"query\":\"parser\"}"),
	    "");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(ans.reply,
	    "mode")), "keyword");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(ans.reply,
	    "note")), "keyword search only: no embedder is configured");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(ans.reply,
	    "results")), 1);
	r = cJSON_GetArrayItem(cJSON_GetObjectItem(ans.reply, "results"), 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r,
	    "content")), "the parser reads tokens");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(r, "metadata"), "f")), "p");
	ck_assert(proto_count(r, "score") > 0);
	ck_assert(proto_count(r, "score") == proto_count(r, "keywordScore"));
	ck_assert_ptr_null(cJSON_GetObjectItem(r, "vectorScore"));
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "lines")),
	    2);
	/* A threshold above every score: nothing. */
	send_msg("{\"type\":\"kb_search\",\"query\":\"parser boat\","
	    "\"threshold\":0.99}");
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(ans.reply,
	    "results")), 0);
	ck_assert_str_eq(send_msg("{\"type\":\"kb_search\",\"query\":\"x\","
	    "\"limit\":0}"), "BAD_REQUEST");
}
END_TEST

START_TEST(test_hybrid_and_load)
{
	struct kb_state *kb;
	cJSON *r, *doc;

	conf.embedder = &embedder;
	embed_on = 1;
	own();
	/* Embedded first, then stored with its vectors. */
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"id\":\"a\",\"content\":"
	    "\"my automobile is red\"}"), "");
	ck_assert_int_eq(ans.n, 0);
	ck_assert_int_eq(cl.waits, 1);
	ck_assert(part_busy(&fs.s));
	embed_answer();
	ck_assert_int_eq(ans.n, 1);
	ck_assert_int_eq(cl.waits, 0);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(fake_logged("kb_added", 0),
	    "vectors")));
	doc = cJSON_Parse(docs[0].json);
	ck_assert_int_eq((int)proto_count(cJSON_GetObjectItem(doc, "vectors"),
	    "dim"), VDIM);
	cJSON_Delete(doc);
	/* An embedder failure keeps the document, without vectors. */
	send_msg("{\"type\":\"kb_add\",\"id\":\"b\",\"content\":\"a boat\"}");
	emb_fail = 1;
	embed_answer();
	emb_fail = 0;
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(fake_logged("kb_added", 1),
	    "vectors")));
	ck_assert_int_eq(doc_count(), 2);

	/* "car" is in no document: only the vectors find it. */
	send_msg("{\"type\":\"kb_search\",\"query\":\"car\"}");
	embed_answer();
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(ans.reply,
	    "mode")), "hybrid");
	r = cJSON_GetArrayItem(cJSON_GetObjectItem(ans.reply, "results"), 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(r,
	    "content")), "my automobile is red");
	ck_assert(proto_count(r, "vectorScore") > 0.9);
	/* The query's vector fails: keyword, and why. */
	send_msg("{\"type\":\"kb_search\",\"query\":\"boat\"}");
	emb_fail = 1;
	embed_answer();
	emb_fail = 0;
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(ans.reply,
	    "mode")), "keyword");
	ck_assert_ptr_nonnull(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(
	    ans.reply, "note")), "HTTP 500"));

	/* Read back from the store as a new owner would: vectors too. */
	part_free(&fs.s);
	own();
	kb = STATE(&fs.s);
	ck_assert_uint_eq(kbi_ndocs(kb->idx), 2);
	ck_assert_uint_eq(kbi_dim(kb->idx), VDIM);
	send_msg("{\"type\":\"kb_search\",\"query\":\"car\"}");
	embed_answer();
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(cJSON_GetObjectItem(ans.reply, "results"), 0),
	    "content")), "my automobile is red");
}
END_TEST

START_TEST(test_load_queue_fail)
{
	/* Not loaded yet: requests wait; a failed read answers them and
	 * the next request reads again. */
	store_fail = 1;
	ck_assert_str_eq(send_msg("{\"type\":\"kb_list\"}"), "");
	ck_assert_int_eq(ans.n, 1);
	ck_assert_str_eq(ans.code, "INTERNAL");
	ck_assert_ptr_nonnull(strstr(ans.msg, "retry"));
	ck_assert_int_eq(STATE(&fs.s)->load, KB_FAILED);
	ck_assert(!part_holds(&fs.s));
	ck_assert_str_eq(send_msg("{\"type\":\"kb_list\"}"), "");
	ck_assert_int_eq(ans.n, 2);
	ck_assert_str_eq(ans.code, "");
	ck_assert_int_eq(STATE(&fs.s)->load, KB_READY);
	ck_assert_int_eq(nexts, 2);
}
END_TEST

START_TEST(test_under_way)
{
	char *m;

	/* While an add waits for its vectors, what requests may hold is
	 * bounded by kb-max-bytes: a second one past it waits its turn. */
	conf.embedder = &embedder;
	embed_on = 1;
	own();
	ck_assert_int_ne(asprintf(&m, "{\"type\":\"kb_add\",\"content\":"
	    "\"%03000d\"}", 1), -1);
	ck_assert_str_eq(send_msg(m), "");
	free(m);
	ck_assert_int_ne(asprintf(&m, "{\"type\":\"kb_add\",\"content\":"
	    "\"%02000d\"}", 2), -1);
	ck_assert_str_eq(send_msg(m), "RATE_LIMITED");
	free(m);
	ck_assert_int_eq(ans.n, 0);
	embed_answer();
	ck_assert_int_eq(ans.n, 1);
	ck_assert_str_eq(ans.code, "");
	ck_assert_uint_eq(STATE(&fs.s)->held_bytes, 0);
}
END_TEST

START_TEST(test_follower)
{
	static const char added[] = "{\"v\":1,\"type\":\"kb_added\","
	    "\"seq\":9,\"documentId\":\"doc-2\"}";
	static const char doc2[] = "{\"documentId\":\"doc-2\",\"content\":"
	    "\"second\",\"createdAt\":\"2026-01-01T00:00:00.000Z\"}";

	own();
	send_msg("{\"type\":\"kb_add\",\"id\":\"a\",\"content\":\"first\"}");
	part_free(&fs.s);
	/* Another host owns it: reads are answered here, from the store;
	 * changes go to the owner's inbox. */
	fs.s.follower = 1;
	ck_assert_str_eq(send_msg("{\"type\":\"kb_list\"}"), "");
	ck_assert_int_eq((int)proto_count(ans.reply, "totalCount"), 1);
	ck_assert_str_eq(send_msg("{\"type\":\"kb_add\",\"content\":\"x\"}"),
	    "FORWARDED");
	ck_assert_str_eq(send_msg("{\"type\":\"kb_remove\",\"documentId\":"
	    "\"doc-1\"}"), "FORWARDED");
	/* The owner logs a kb_added: read again on the next request. */
	store_doc_put(NULL, "doc-2", doc2, strlen(doc2), add_stored_noop,
	    NULL);
	part_scan(&fs.s, 9, added, strlen(added));
	ck_assert_int_eq(STATE(&fs.s)->load, KB_UNLOADED);
	ck_assert_str_eq(send_msg("{\"type\":\"kb_list\"}"), "");
	ck_assert_int_eq((int)proto_count(ans.reply, "totalCount"), 2);
	/* Promoted: read again as the owner. */
	fs.s.follower = 0;
	store_fail = 1;
	part_own(&fs.s);
	ck_assert_int_eq(STATE(&fs.s)->load, KB_FAILED);
	/* A store that lets only the owner read: said so. */
	part_free(&fs.s);
	fs.s.follower = 1;
	store_fail = 2;
	ck_assert_str_eq(send_msg("{\"type\":\"kb_search\",\"query\":"
	    "\"first\"}"), "");
	ck_assert_str_eq(ans.code, "OVERLOADED");
	ck_assert_ptr_nonnull(strstr(ans.msg, "owns the session"));
}
END_TEST

static char *rag_text;
static int rag_calls;

static void
rag_cb(struct sess *s, char *text, const char *msgid)
{
	(void)s;
	ck_assert_str_eq(msgid, "m-1");
	free(rag_text);
	rag_text = text;
	rag_calls++;
}

START_TEST(test_rag)
{
	cJSON *e, *c;

	own();
	rag_calls = 0;
	/* Nothing known: nothing given, nothing logged. */
	ck_assert_int_eq(kb_rag(&fs.s, "a1", "m-1", "parser", rag_cb), 0);
	ck_assert_int_eq(rag_calls, 1);
	ck_assert_ptr_null(rag_text);
	send_msg("{\"type\":\"kb_add\",\"id\":\"a\",\"content\":\"the parser "
	    "reads tokens\",\"metadata\":{\"title\":\"P\"}}");
	ix_n = 1;
	ix_info[0] = (struct kbi_chunk_info){ "/src/parse.c", NULL,
	    "parse(void)", 11, 3, 9, NULL, 0 };
	ix_hits[0] = (struct kbi_hit){ 0, 0.4, 0.4, 1, 0, 1, 0 };
	ck_assert_int_eq(kb_rag(&fs.s, "a1", "m-1", "how does the parser "
	    "work", rag_cb), 0);
	ck_assert_ptr_nonnull(rag_text);
	ck_assert_ptr_nonnull(strstr(rag_text, "[1] kb doc-"));
	ck_assert_ptr_nonnull(strstr(rag_text, "(title=P)\nthe parser reads "
	    "tokens"));
	ck_assert_ptr_nonnull(strstr(rag_text, "[2] /src/parse.c:3-9\n"
	    "parse(void)"));
	e = fake_logged("rag_context", 0);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "agentId")), "a1");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "query")), "how does the parser work");
	c = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "chunks"), 1);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c,
	    "source")), "index");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c,
	    "path")), "/src/parse.c");
	ck_assert_int_eq((int)proto_count(c, "n"), 2);
	ck_assert_int_eq((int)proto_count(c, "bytes"), 11);
	/* Top-k 1: the best only. */
	conf.rag_top_k = 1;
	kb_rag(&fs.s, "a1", "m-1", "parser", rag_cb);
	ck_assert_ptr_null(strstr(rag_text, "[2]"));
	/* config.rag false: nothing, and nothing logged. */
	conf.rag_top_k = 5;
	cJSON_AddItemToObject(fs.s.mtree, "config", cJSON_Parse(
	    "{\"rag\":false}"));
	kb_rag(&fs.s, "a1", "m-1", "parser", rag_cb);
	ck_assert_ptr_null(rag_text);
	ck_assert_int_eq(fake_count("rag_context"), 2);
	/* The operator's rag off: the same. */
	cJSON_DeleteItemFromObject(fs.s.mtree, "config");
	conf.rag = 0;
	kb_rag(&fs.s, "a1", "m-1", "parser", rag_cb);
	ck_assert_ptr_null(rag_text);
	ix_n = 0;
}
END_TEST

START_TEST(test_rag_waits_for_load)
{
	static const char doc[] = "{\"documentId\":\"doc-1\",\"content\":"
	    "\"the parser reads tokens\",\"createdAt\":\"x\"}";

	store_doc_put(NULL, "doc-1", doc, strlen(doc), add_stored_noop, NULL);
	/* A store that answers later (Redis): the session holds its turns,
	 * requests and a resumed turn's retrieval wait for the documents. */
	store_async = 1;
	part_own(&fs.s);
	ck_assert_int_eq(STATE(&fs.s)->load, KB_LOADING);
	ck_assert(part_holds(&fs.s));
	ck_assert(part_busy(&fs.s));
	rag_calls = 0;
	ck_assert_int_eq(kb_rag(&fs.s, "a1", "m-1", "parser", rag_cb), 1);
	ck_assert_str_eq(send_msg("{\"type\":\"kb_list\"}"), "");
	ck_assert_int_eq(ans.n, 0);
	ck_assert_int_eq(rag_calls, 0);
	load_finish();
	ck_assert(!part_holds(&fs.s));
	ck_assert_int_eq(nexts, 1);	/* the held turns go on */
	ck_assert_int_eq(ans.n, 1);
	ck_assert_int_eq((int)proto_count(ans.reply, "totalCount"), 1);
	ck_assert_int_eq(rag_calls, 1);
	ck_assert_ptr_nonnull(rag_text);
	ck_assert_ptr_nonnull(strstr(rag_text, "the parser reads tokens"));
	free(rag_text);
	rag_text = NULL;
	/* Leaving memory while the read is under way cancels it. */
	part_free(&fs.s);
	store_async = 1;
	part_own(&fs.s);
	ck_assert_ptr_nonnull(pend_done);
	part_free(&fs.s);
	ck_assert_ptr_null(pend_done);
}
END_TEST

START_TEST(test_rag_embed_slow)
{
	conf.embedder = &embedder;
	embedder.timeout_ms = 10;
	embed_on = 1;
	own();
	send_msg("{\"type\":\"kb_add\",\"id\":\"a\",\"content\":\"the parser\"}");
	embed_answer();
	rag_calls = 0;
	/* The vector does not come: keyword after the bound. */
	ck_assert_int_eq(kb_rag(&fs.s, "a1", "m-1", "parser", rag_cb), 1);
	ck_assert_int_eq(rag_calls, 0);
	event_base_loop(wk.base, EVLOOP_ONCE);
	ck_assert_int_eq(rag_calls, 1);
	ck_assert_ptr_nonnull(rag_text);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(
	    fake_logged("rag_context", 0), "mode")), "keyword");
	free(rag_text);
	rag_text = NULL;
}
END_TEST

static int tool_calls;
static char tool_out[4096];

static void
tool_cb(void *arg, int is_error, const char *text, const char *code)
{
	(void)arg;
	(void)code;
	tool_calls++;
	snprintf(tool_out, sizeof(tool_out), "%s%s", is_error ? "ERR " : "",
	    text);
}

START_TEST(test_tool)
{
	struct llm_tool_def def;
	struct kb_call *kc;

	own();
	ck_assert(!kb_tool_offered(&fs.s));
	ck_assert_int_eq(kb_tool_def(&fs.s, &def), 0);
	send_msg("{\"type\":\"kb_add\",\"id\":\"a\",\"content\":\"the parser "
	    "reads tokens\"}");
	ck_assert(kb_tool(&fs.s, "kb_search"));
	ck_assert(!kb_tool(&fs.s, "other"));
	ck_assert_int_eq(kb_tool_def(&fs.s, &def), 1);
	ck_assert_str_eq(def.name, "kb_search");
	tool_calls = 0;
	kc = kb_tool_run(&fs.s, "{\"query\":\"parser\"}", tool_cb, NULL);
	ck_assert_ptr_nonnull(kc);
	ck_assert_int_eq(tool_calls, 0);	/* never before returning */
	event_base_loop(wk.base, EVLOOP_ONCE);
	ck_assert_int_eq(tool_calls, 1);
	ck_assert_ptr_nonnull(strstr(tool_out, "\"source\":\"kb\""));
	ck_assert_ptr_nonnull(strstr(tool_out, "\"content\":\"the parser "
	    "reads tokens\""));
	kc = kb_tool_run(&fs.s, "{\"limit\":3}", tool_cb, NULL);
	event_base_loop(wk.base, EVLOOP_ONCE);
	ck_assert_int_eq(tool_calls, 2);
	ck_assert_ptr_nonnull(strstr(tool_out, "ERR field 'query'"));
	/* Cancelled: never answered. */
	kc = kb_tool_run(&fs.s, "{\"query\":\"parser\"}", tool_cb, NULL);
	kb_tool_cancel(kc);
	event_base_loop(wk.base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(tool_calls, 2);
}
END_TEST

static Suite *
kb_suite(void)
{
	Suite *s = suite_create("kb");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_doc_id);
	tcase_add_test(tc, test_chars);
	tcase_add_test(tc, test_check_add);
	tcase_add_test(tc, test_check_search);
	tcase_add_test(tc, test_rag_select);
	tcase_add_test(tc, test_rag_text);
	tcase_add_test(tc, test_vec_b64);
	tcase_add_test(tc, test_add_list_remove);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_search_keyword);
	tcase_add_test(tc, test_hybrid_and_load);
	tcase_add_test(tc, test_load_queue_fail);
	tcase_add_test(tc, test_under_way);
	tcase_add_test(tc, test_follower);
	tcase_add_test(tc, test_rag);
	tcase_add_test(tc, test_rag_waits_for_load);
	tcase_add_test(tc, test_rag_embed_slow);
	tcase_add_test(tc, test_tool);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(kb_suite());
}
