/*
 * The knowledge base's pure helpers (kb.h): a document's id, characters
 * and previews, the checks of kb_add and kb_search, and what retrieval
 * gives the model (the choice of chunks by score, top-k and budget, and
 * the text of its system message).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/kbtext.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "kb.h"

#define RAG_HEAD_MAX	512	/* bytes of one source's line */

void
kb_doc_id(const char *sid, const char *msgid, char out[KB_DOCID_LEN + 1])
{
	char hex[65], *buf;
	size_t a = strlen(sid), b = strlen(msgid);

	if ((buf = malloc(a + b + 1)) == NULL) {
		/* Without memory the id cannot be derived: a fresh one. */
		memcpy(out, "doc-", 4);
		util_randhex(out + 4, 8);
		return;
	}
	memcpy(buf, sid, a);
	buf[a] = '\n';
	memcpy(buf + a + 1, msgid, b);
	kbt_sha256(buf, a + b + 1, hex);
	free(buf);
	snprintf(out, KB_DOCID_LEN + 1, "doc-%.16s", hex);
}

size_t
kb_chars(const char *text, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		if (((unsigned char)text[i] & 0xc0) != 0x80)
			n++;
	return n;
}

size_t
kb_prefix(const char *text, size_t len, size_t n)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (((unsigned char)text[i] & 0xc0) != 0x80 && n-- == 0)
			break;
	return i;
}

int
kb_check_add(const cJSON *m, size_t max_bytes, char *msg, size_t len)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(m, "metadata");
	size_t n;
	char *txt;

	if (!cJSON_IsString(c)) {
		snprintf(msg, len, "field 'content' is required: the "
		    "document's text, a string");
		return -1;
	}
	n = strlen(c->valuestring);
	if (n == 0 || n > max_bytes) {
		snprintf(msg, len, "field 'content' must hold 1 to %zu bytes "
		    "(kb-max-bytes); it has %zu: split a larger document",
		    max_bytes, n);
		return -1;
	}
	if (!utf8_valid((const unsigned char *)c->valuestring, n)) {
		snprintf(msg, len, "field 'content' is not valid UTF-8");
		return -1;
	}
	if (md == NULL || cJSON_IsNull(md))
		return 0;
	if (!cJSON_IsObject(md)) {
		snprintf(msg, len, "field 'metadata' must be an object");
		return -1;
	}
	if ((txt = cJSON_PrintUnformatted(md)) == NULL) {
		snprintf(msg, len, "out of memory; retry");
		return -1;
	}
	n = strlen(txt);
	free(txt);
	if (n > KB_META_MAX) {
		snprintf(msg, len, "field 'metadata' takes %zu bytes as JSON; "
		    "at most %d are kept: keep it to a few fields", n,
		    KB_META_MAX);
		return -1;
	}
	return 0;
}

int
kb_check_search(const cJSON *m, const char **query, size_t *limit,
    double *threshold, char *msg, size_t len)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(m, "query");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(m, "limit");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "threshold");
	size_t n;

	if (!cJSON_IsString(q) || (n = strlen(q->valuestring)) == 0 ||
	    n > KB_QUERY_MAX) {
		snprintf(msg, len, "field 'query' must be a string of 1 to %d "
		    "bytes", KB_QUERY_MAX);
		return -1;
	}
	*query = q->valuestring;
	*limit = KB_LIMIT;
	*threshold = 0;
	if (l != NULL && !cJSON_IsNull(l)) {
		if (!cJSON_IsNumber(l) || l->valuedouble < 1 ||
		    l->valuedouble > KB_LIMIT_MAX ||
		    l->valuedouble != (double)(int)l->valuedouble) {
			snprintf(msg, len, "field 'limit' must be a whole number "
			    "from 1 to %d", KB_LIMIT_MAX);
			return -1;
		}
		*limit = (size_t)l->valuedouble;
	}
	if (t != NULL && !cJSON_IsNull(t)) {
		if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 &&
		    t->valuedouble <= 1)) {
			snprintf(msg, len, "field 'threshold' must be a number "
			    "from 0 to 1");
			return -1;
		}
		*threshold = t->valuedouble;
	}
	return 0;
}

/* Best first; ties: the session's kb first, then name, then line. */
static int
hit_cmp(const void *a, const void *b)
{
	const struct kb_hit *x = a, *y = b;
	int c;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->index != y->index)
		return x->index - y->index;
	if ((c = strcmp(x->name, y->name)) != 0)
		return c;
	return x->line_first < y->line_first ? -1 :
	    x->line_first > y->line_first;
}

size_t
kb_rag_select(struct kb_hit *hits, size_t n, size_t top_k, size_t budget,
    size_t *keep)
{
	size_t i, k = 0, left = budget * 4, take;
	struct kb_hit h;

	if (n == 0 || top_k == 0)
		return 0;
	qsort(hits, n, sizeof(*hits), hit_cmp);
	for (i = 0; i < n && k < top_k && left > 0; i++) {
		take = hits[i].len;
		if (take > left) {
			if (k > 0)
				continue;	/* a smaller one may fit */
			take = utf8_whole(hits[i].text, left);
			if (take == 0)
				break;
		}
		h = hits[i];
		memmove(hits + k + 1, hits + k, (i - k) * sizeof(*hits));
		hits[k] = h;
		keep[k++] = take;
		left -= take;
	}
	return k;
}

/* One source's line: "kb doc-… (k=v, …)" or "path:first-last". */
static void
rag_head(const struct kb_hit *h, char *out, size_t len)
{
	cJSON *m, *md, *e;
	size_t n;
	char *v;

	if (h->index) {
		if (h->line_first > 0)
			snprintf(out, len, "%s:%u-%u", h->name, h->line_first,
			    h->line_last);
		else
			snprintf(out, len, "%s", h->name);
		return;
	}
	snprintf(out, len, "kb %s", h->name);
	m = h->meta != NULL ? cJSON_Parse(h->meta) : NULL;
	md = cJSON_GetObjectItem(m, "metadata");
	if (cJSON_IsObject(md) && md->child != NULL) {
		n = strlen(out);
		snprintf(out + n, len - n, " (");
		cJSON_ArrayForEach(e, md) {
			n = strlen(out);
			if (n + 8 >= len)
				break;
			v = cJSON_IsString(e) ? NULL : cJSON_PrintUnformatted(e);
			snprintf(out + n, len - n, "%s%s=%s", e == md->child ?
			    "" : ", ", e->string, cJSON_IsString(e) ?
			    e->valuestring : v != NULL ? v : "");
			free(v);
		}
		n = strlen(out);
		if (n + 2 > len)
			n = len - 2;
		/* A cut line still closes, at a whole character. */
		n = utf8_whole(out, n);
		out[n] = ')';
		out[n + 1] = '\0';
	}
	cJSON_Delete(m);
}

char *
kb_rag_text(const struct kb_hit *hits, const size_t *keep, size_t n)
{
	static const char intro[] = "Context from the session's knowledge "
	    "base and indexed files. Cite a source by its [n] when you use "
	    "it.";
	char head[RAG_HEAD_MAX], num[32], *out = NULL;
	size_t len = 0, cap = 0, i;

	if (n == 0)
		return NULL;
	if (util_append(&out, &len, &cap, intro, sizeof(intro) - 1) == -1)
		goto fail;
	for (i = 0; i < n; i++) {
		rag_head(&hits[i], head, sizeof(head));
		snprintf(num, sizeof(num), "\n\n[%zu] ", i + 1);
		if (util_append(&out, &len, &cap, num, strlen(num)) == -1 ||
		    util_append(&out, &len, &cap, head, strlen(head)) == -1 ||
		    util_append(&out, &len, &cap, "\n", 1) == -1 ||
		    util_append(&out, &len, &cap, hits[i].text,
		    keep[i]) == -1)
			goto fail;
	}
	return out;
fail:
	free(out);
	return NULL;
}
