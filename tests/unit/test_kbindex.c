/* Unit tests for kbindex: BM25 by hand, ranking, removal, vectors, fusion. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kbindex.c"
#include "check_main.h"

#define EPS	1e-12

static int
add_doc(struct kbi *x, const char *name, const char *const *chunks,
    size_t n)
{
	size_t	i;
	int	d;

	d = kbi_doc_add(x, name, "{}");
	ck_assert_int_ge(d, 0);
	for (i = 0; i < n; i++)
		ck_assert_int_ge(kbi_chunk_add(x, d, chunks[i],
		    strlen(chunks[i]), (unsigned)i + 1, (unsigned)i + 1), 0);
	return d;
}

static size_t
search(const struct kbi *x, const char *text, size_t limit, double thr,
    struct kbi_hit *out)
{
	struct kbi_query	q;

	memset(&q, 0, sizeof(q));
	q.text = text;
	q.len = strlen(text);
	q.limit = limit;
	q.threshold = thr;
	return kbi_search(x, &q, out);
}

static const char *
hit_doc(const struct kbi *x, const struct kbi_hit *h)
{
	struct kbi_chunk_info	ci;

	ck_assert_int_eq(kbi_chunk_get(x, h->chunk, &ci), 0);
	return ci.doc;
}

/*
 * The corpus of three chunks, one a document:
 *   a: "apple banana apple"      |c| = 3, tf(apple) 2, tf(banana) 1
 *   b: "banana cherry"           |c| = 2
 *   c: "cherry date elder fig"   |c| = 4
 * N = 3, avgdl = 9 / 3 = 3; n(apple) 1, n(banana) 2, n(cherry) 2.
 *   idf(apple)  = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3)
 *   idf(banana) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6)
 * norm(c) = 1 - b + b |c| / avgdl: a 1, b 0.25 + 0.75 * 2/3 = 0.75.
 * "banana":
 *   a: ln(1.6) * 1 * 2.2 / (1 + 1.2 * 1)    = ln(1.6) * 2.2 / 2.2
 *   b: ln(1.6) * 1 * 2.2 / (1 + 1.2 * 0.75) = ln(1.6) * 2.2 / 1.9
 *   keyword = BM25 / (ln(1.6) * 2.2): a 1/2.2, b 1/1.9.
 * "apple banana apple" (distinct: apple, banana):
 *   a: ln(8/3) * 2 * 2.2 / (2 + 1.2) + ln(1.6) * 2.2 / 2.2
 *   b: ln(1.6) * 2.2 / 1.9
 *   divisor 2.2 * (ln(8/3) + ln(1.6)).
 */
static struct kbi *
corpus3(void)
{
	static const char *a[] = { "apple banana apple" };
	static const char *b[] = { "banana cherry" };
	static const char *c[] = { "cherry date elder fig" };
	struct kbi	*x = kbi_new();

	ck_assert_ptr_nonnull(x);
	add_doc(x, "a", a, 1);
	add_doc(x, "b", b, 1);
	add_doc(x, "c", c, 1);
	return x;
}

START_TEST(test_bm25_by_hand)
{
	struct kbi	*x = corpus3();
	struct kbi_hit	 h[10];
	double		 ia = log(8.0 / 3.0), ib = log(1.6), want;

	ck_assert_uint_eq(kbi_ndocs(x), 3);
	ck_assert_uint_eq(kbi_nchunks(x), 3);
	ck_assert_uint_eq(kbi_bytes(x), 18 + 13 + 21);

	ck_assert_uint_eq(search(x, "banana", 10, 0, h), 2);
	ck_assert_str_eq(hit_doc(x, &h[0]), "b");
	ck_assert_str_eq(hit_doc(x, &h[1]), "a");
	ck_assert_double_eq_tol(h[0].bm25, ib * 2.2 / 1.9, EPS);
	ck_assert_double_eq_tol(h[1].bm25, ib * 2.2 / 2.2, EPS);
	ck_assert_double_eq_tol(h[0].keyword, 1 / 1.9, EPS);
	ck_assert_double_eq_tol(h[1].keyword, 1 / 2.2, EPS);
	ck_assert_double_eq_tol(h[0].score, h[0].keyword, EPS);
	ck_assert_uint_eq(h[0].kw_rank, 1);
	ck_assert_uint_eq(h[1].kw_rank, 2);
	ck_assert_uint_eq(h[0].vec_rank, 0);
	ck_assert(h[0].vector == 0);

	ck_assert_uint_eq(search(x, "Apple BANANA apple", 10, 0, h), 2);
	ck_assert_str_eq(hit_doc(x, &h[0]), "a");
	want = ia * 2 * 2.2 / 3.2 + ib * 2.2 / 2.2;
	ck_assert_double_eq_tol(h[0].bm25, want, EPS);
	ck_assert_double_eq_tol(h[0].keyword, want / (2.2 * (ia + ib)), EPS);
	ck_assert_str_eq(hit_doc(x, &h[1]), "b");
	ck_assert_double_eq_tol(h[1].keyword, ib * 2.2 / 1.9 /
	    (2.2 * (ia + ib)), EPS);
	/* unknown words count for nothing, not even in the divisor */
	ck_assert_uint_eq(search(x, "apple banana zebra quux", 10, 0, h), 2);
	ck_assert_double_eq_tol(h[0].keyword, want / (2.2 * (ia + ib)), EPS);
	kbi_free(x);
}
END_TEST

/* A chunk holding every query word as often as the best can is 1; the
 * score never leaves 0..1. */
START_TEST(test_keyword_norm)
{
	static const char	*d[] = { "alpha", "beta gamma", "alpha beta" };
	struct kbi		*x = kbi_new();
	struct kbi_hit		 h[10];
	size_t			 n, i;

	add_doc(x, "d", d, 3);
	n = search(x, "alpha beta gamma", 10, 0, h);
	ck_assert_uint_eq(n, 3);
	for (i = 0; i < n; i++) {
		ck_assert(h[i].keyword > 0 && h[i].keyword <= 1);
		ck_assert(h[i].score == h[i].keyword);
	}
	/* tf -> infinity: the keyword score tends to 1 */
	{
		char	 big[40000];
		size_t	 at = 0;

		while (at + 7 < sizeof(big)) {
			memcpy(big + at, "omega ", 6);
			at += 6;
		}
		big[at] = '\0';
		ck_assert_int_ge(kbi_chunk_add(x, 0, big, at, 9, 9), 0);
		ck_assert_int_ge(kbi_chunk_add(x, 0, "beta", 4, 10, 10), 0);
		ck_assert_uint_eq(search(x, "omega", 10, 0, h), 1);
		ck_assert(h[0].keyword > 0.99 && h[0].keyword <= 1);
	}
	kbi_free(x);
}
END_TEST

/* Equal scores: the document whose name sorts first, then the chunk that
 * comes first in its document, whatever the order they were added. */
START_TEST(test_ties)
{
	static const char	*two[] = { "same words here", "same words here" };
	static const char	*one[] = { "same words here" };
	struct kbi		*x = kbi_new();
	struct kbi_hit		 h[10];
	struct kbi_chunk_info	 ci;
	size_t			 i;

	add_doc(x, "zeta", one, 1);
	add_doc(x, "mid", two, 2);
	add_doc(x, "alpha", one, 1);
	ck_assert_uint_eq(search(x, "words", 10, 0, h), 4);
	for (i = 1; i < 4; i++)
		ck_assert(h[i].score == h[0].score);
	ck_assert_str_eq(hit_doc(x, &h[0]), "alpha");
	ck_assert_int_eq(kbi_chunk_get(x, h[1].chunk, &ci), 0);
	ck_assert_str_eq(ci.doc, "mid");
	ck_assert_uint_eq(ci.line_first, 1);
	ck_assert_int_eq(kbi_chunk_get(x, h[2].chunk, &ci), 0);
	ck_assert_str_eq(ci.doc, "mid");
	ck_assert_uint_eq(ci.line_first, 2);
	ck_assert_str_eq(hit_doc(x, &h[3]), "zeta");
	/* the limit cuts after the tie order */
	ck_assert_uint_eq(search(x, "words", 1, 0, h), 1);
	ck_assert_str_eq(hit_doc(x, &h[0]), "alpha");
	kbi_free(x);
}
END_TEST

/* Scores after a removal are those of an index built without it. */
START_TEST(test_remove_stats)
{
	static const char	*a[] = { "apple banana apple" };
	static const char	*b[] = { "banana cherry" };
	struct kbi		*x = corpus3(), *y = kbi_new();
	struct kbi_hit		 h[10], g[10];
	size_t			 n, i;

	ck_assert_int_eq(kbi_doc_remove(x, "c"), 1);
	ck_assert_int_eq(kbi_doc_remove(x, "c"), 0);
	ck_assert_int_eq(kbi_doc_find(x, "c"), -1);
	ck_assert_uint_eq(kbi_ndocs(x), 2);
	ck_assert_uint_eq(kbi_nchunks(x), 2);
	ck_assert_uint_eq(kbi_bytes(x), 18 + 13);
	add_doc(y, "a", a, 1);
	add_doc(y, "b", b, 1);
	n = search(x, "banana cherry apple", 10, 0, h);
	ck_assert_uint_eq(n, search(y, "banana cherry apple", 10, 0, g));
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(hit_doc(x, &h[i]), hit_doc(y, &g[i]));
		ck_assert(h[i].bm25 == g[i].bm25);
		ck_assert(h[i].keyword == g[i].keyword);
	}
	/* by hand: N 2, avgdl 5/2, n(banana) 2: idf ln(1.2); b: |c| 2,
	 * 1 - 0.75 + 0.75 * 2 / 2.5 = 0.85 */
	ck_assert_uint_eq(search(x, "banana", 10, 0, h), 2);
	ck_assert_str_eq(hit_doc(x, &h[0]), "b");
	ck_assert_double_eq_tol(h[0].bm25, log(1.2) * 2.2 / (1 + 1.2 * 0.85),
	    EPS);
	/* "date" only lived in c */
	ck_assert_uint_eq(search(x, "date", 10, 0, h), 0);
	/* chunk ids of the others did not change; c's is gone */
	ck_assert_int_eq(kbi_chunk_get(x, 2, &(struct kbi_chunk_info){ 0 }),
	    -1);
	ck_assert_int_eq(kbi_chunk_get(x, 0, &(struct kbi_chunk_info){ 0 }),
	    0);
	/* the name can be used again */
	ck_assert_int_ge(kbi_doc_add(x, "c", "{}"), 0);
	kbi_free(x);
	kbi_free(y);
}
END_TEST

/* Many removals (the postings are swept) give the same scores as a fresh
 * index of what is left. */
START_TEST(test_remove_sweep)
{
	struct kbi	*x = kbi_new(), *y = kbi_new();
	struct kbi_hit	 h[20], g[20];
	char		 name[32], text[128];
	const char	*t[1];
	size_t		 n, i;

	t[0] = text;
	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "doc%04zu", i);
		snprintf(text, sizeof(text), "common w%zu w%zu w%zu%s", i % 7,
		    i % 13, i % 101, i % 3 ? " extra" : "");
		add_doc(x, name, t, 1);
		if (i % 10 == 0)
			add_doc(y, name, t, 1);
	}
	for (i = 0; i < 3000; i++)
		if (i % 10 != 0) {
			snprintf(name, sizeof(name), "doc%04zu", i);
			ck_assert_int_eq(kbi_doc_remove(x, name), 1);
		}
	ck_assert_uint_lt(x->dead_unswept, 2700);	/* it swept */
	ck_assert_uint_eq(kbi_nchunks(x), 300);
	n = search(x, "common w3 w5 extra w50", 20, 0, h);
	ck_assert_uint_eq(n, 20);
	ck_assert_uint_eq(search(y, "common w3 w5 extra w50", 20, 0, g), 20);
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(hit_doc(x, &h[i]), hit_doc(y, &g[i]));
		ck_assert(h[i].bm25 == g[i].bm25);
	}
	kbi_free(x);
	kbi_free(y);
}
END_TEST

struct ref {
	const char	*text;
	size_t		 n;
	char		 toks[64][KBT_TOKEN_MAX + 1];
};

static void
ref_cb(void *arg, const char *t, size_t len)
{
	struct ref	*r = arg;

	if (r->n < 64) {
		memcpy(r->toks[r->n], t, len);
		r->toks[r->n][len] = '\0';
	}
	r->n++;
}

/* A random corpus against BM25 computed chunk by chunk from the
 * definition: every hit has its reference score, the list is the top. */
START_TEST(test_random_reference)
{
	static const char	*words[] = { "alpha", "beta", "gamma", "delta",
	    "eps", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu" };
	enum { NC = 400 };
	struct kbi		*x = kbi_new();
	static struct ref	 r[NC];
	static char		 text[NC][200];
	struct kbi_hit		 h[50];
	double			 ref[NC], avgdl, idf, s, sorted[NC];
	size_t			 total = 0, df, tf, i, j, k, n, q, nq;
	unsigned		 seed = 7;
	char			 name[16], qt[200];
	struct ref		 qr;

	for (i = 0; i < NC; i++) {
		size_t len = 0, nw;

		seed = seed * 1103515245 + 12345;
		nw = 1 + (seed >> 16) % 12;
		for (j = 0; j < nw; j++) {
			seed = seed * 1103515245 + 12345;
			len += (size_t)snprintf(text[i] + len, 200 - len,
			    "%s ", words[(seed >> 16) % 12]);
		}
		snprintf(name, sizeof(name), "n%03zu", (i * 37) % NC);
		{
			const char *t[1] = { text[i] };

			add_doc(x, name, t, 1);
		}
		memset(&r[i], 0, sizeof(r[i]));
		kbt_tokens(text[i], strlen(text[i]), ref_cb, &r[i]);
		total += r[i].n;
	}
	avgdl = (double)total / NC;
	for (q = 0; q < 200; q++) {
		size_t len = 0;

		seed = seed * 1103515245 + 12345;
		nq = 1 + (seed >> 16) % 4;
		for (j = 0; j < nq; j++) {
			seed = seed * 1103515245 + 12345;
			len += (size_t)snprintf(qt + len, sizeof(qt) - len,
			    "%s ", words[(seed >> 16) % 12]);
		}
		memset(&qr, 0, sizeof(qr));
		kbt_tokens(qt, len, ref_cb, &qr);
		for (i = 0; i < NC; i++)
			ref[i] = 0;
		for (j = 0; j < qr.n; j++) {
			for (k = 0; k < j; k++)
				if (strcmp(qr.toks[k], qr.toks[j]) == 0)
					break;
			if (k < j)
				continue;
			for (i = df = 0; i < NC; i++)
				for (k = 0; k < r[i].n; k++)
					if (strcmp(r[i].toks[k],
					    qr.toks[j]) == 0) {
						df++;
						break;
					}
			if (df == 0)
				continue;
			idf = log(1 + (NC - df + 0.5) / (df + 0.5));
			for (i = 0; i < NC; i++) {
				for (k = tf = 0; k < r[i].n; k++)
					tf += strcmp(r[i].toks[k],
					    qr.toks[j]) == 0;
				if (tf > 0)
					ref[i] += idf * tf * 2.2 / (tf + 1.2 *
					    (0.25 + 0.75 * r[i].n / avgdl));
			}
		}
		n = search(x, qt, 50, 0, h);
		memcpy(sorted, ref, sizeof(ref));
		/* the reference's top scores, descending */
		for (i = 0; i < NC; i++)
			for (j = i + 1; j < NC; j++)
				if (sorted[j] > sorted[i]) {
					s = sorted[i];
					sorted[i] = sorted[j];
					sorted[j] = s;
				}
		for (i = 0, k = 0; i < NC; i++)
			k += ref[i] > 0;
		ck_assert_uint_eq(n, k < 50 ? k : 50);
		for (i = 0; i < n; i++) {
			ck_assert_double_eq_tol(h[i].bm25, ref[h[i].chunk],
			    1e-9);
			ck_assert_double_eq_tol(h[i].bm25, sorted[i], 1e-9);
			if (i > 0)
				ck_assert(h[i].bm25 <= h[i - 1].bm25);
		}
	}
	kbi_free(x);
}
END_TEST

START_TEST(test_threshold_limit_empty)
{
	struct kbi		*x = corpus3();
	struct kbi_hit		 h[10];
	struct kbi_query	 q;

	/* keyword a 1/2.2 = 0.4545, b 1/1.9 = 0.526 */
	ck_assert_uint_eq(search(x, "banana", 10, 0.5, h), 1);
	ck_assert_str_eq(hit_doc(x, &h[0]), "b");
	ck_assert_uint_eq(search(x, "banana", 10, 0.6, h), 0);
	ck_assert_uint_eq(search(x, "banana", 10, 1 / 1.9 - 1e-9, h), 1);
	ck_assert_uint_eq(search(x, "banana", 1, 0, h), 1);
	ck_assert_str_eq(hit_doc(x, &h[0]), "b");
	ck_assert_uint_eq(search(x, "", 10, 0, h), 0);
	ck_assert_uint_eq(search(x, "  -- . ", 10, 0, h), 0);
	ck_assert_uint_eq(search(x, "zebra", 10, 0, h), 0);
	ck_assert_uint_eq(search(x, "banana", 0, 0, h), 0);
	memset(&q, 0, sizeof(q));
	q.limit = 5;
	ck_assert_uint_eq(kbi_search(x, &q, h), 0);	/* NULL text */
	kbi_free(x);

	/* an empty index */
	x = kbi_new();
	ck_assert_uint_eq(search(x, "banana", 10, 0, h), 0);
	kbi_free(x);
}
END_TEST

/* Keyword only, the limit is not cut at KBI_DEPTH. */
START_TEST(test_limit_deep)
{
	struct kbi	*x = kbi_new();
	struct kbi_hit	*h;
	char		 name[16];
	const char	*t[1] = { "needle hay" };
	size_t		 i;

	for (i = 0; i < 250; i++) {
		snprintf(name, sizeof(name), "d%03zu", i);
		add_doc(x, name, t, 1);
	}
	h = calloc(300, sizeof(*h));
	ck_assert_uint_eq(search(x, "needle", 300, 0, h), 250);
	ck_assert_str_eq(hit_doc(x, &h[0]), "d000");
	ck_assert_str_eq(hit_doc(x, &h[249]), "d249");
	free(h);
	kbi_free(x);
}
END_TEST

START_TEST(test_errors)
{
	struct kbi	*x = kbi_new();
	char		 longname[KBI_NAME_MAX + 2];
	float		 v[4] = { 1, 0, 0, 0 }, w[8] = { 0 };
	int		 d, c;

	d = kbi_doc_add(x, "doc", "meta");
	ck_assert_int_eq(d, 0);
	errno = 0;
	ck_assert_int_eq(kbi_doc_add(x, "doc", "other"), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(kbi_doc_add(x, "", "m"), -1);
	ck_assert_int_eq(errno, EINVAL);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(kbi_doc_add(x, longname, "m"), -1);
	longname[KBI_NAME_MAX] = '\0';
	ck_assert_int_ge(kbi_doc_add(x, longname, "m"), 0);
	errno = 0;
	ck_assert_int_eq(kbi_chunk_add(x, 7, "x", 1, 1, 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(kbi_chunk_add(x, -1, "x", 1, 1, 1), -1);
	c = kbi_chunk_add(x, d, "some text", 9, 1, 1);
	ck_assert_int_eq(c, 0);
	ck_assert_int_eq(kbi_chunk_add(x, d, "", 0, 0, 0), 1);
	errno = 0;
	ck_assert_int_eq(kbi_vec_set(x, 0, v, 0), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(kbi_vec_set(x, 0, v, KBI_DIM_MAX + 1), -1);
	ck_assert_int_eq(kbi_vec_set(x, 9, v, 4), -1);
	ck_assert_uint_eq(kbi_dim(x), 0);
	ck_assert_int_eq(kbi_vec_set(x, 0, v, 4), 0);
	ck_assert_uint_eq(kbi_dim(x), 4);
	errno = 0;
	ck_assert_int_eq(kbi_vec_set(x, 1, w, 8), -1);	/* another dim */
	ck_assert_int_eq(errno, EINVAL);
	w[0] = NAN;
	ck_assert_int_eq(kbi_vec_set(x, 1, w, 4), -1);
	ck_assert_int_eq(kbi_vec_set(x, 1, v, 4), 0);
	/* the last vector gone, another dim is welcome */
	ck_assert_int_eq(kbi_doc_remove(x, "doc"), 1);
	ck_assert_uint_eq(kbi_dim(x), 0);
	ck_assert_int_eq(kbi_vec_set(x, 0, v, 4), -1);	/* dead chunk */
	d = kbi_doc_add(x, "doc", "meta2");
	c = kbi_chunk_add(x, d, "text", 4, 1, 1);
	w[0] = 1;
	ck_assert_int_eq(kbi_vec_set(x, (uint32_t)c, w, 8), 0);
	ck_assert_uint_eq(kbi_dim(x), 8);
	kbi_free(x);
}
END_TEST

struct list {
	char	names[8][32];
	size_t	n;
	size_t	chunks[8], bytes[8];
};

static int
list_cb(void *arg, const char *name, const char *meta, size_t nchunks,
    size_t bytes)
{
	struct list	*l = arg;

	(void)meta;
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
	l->chunks[l->n] = nchunks;
	l->bytes[l->n] = bytes;
	l->n++;
	return l->n == 3;
}

START_TEST(test_docs_and_get)
{
	static const char	*two[] = { "first chunk", "second" };
	struct kbi		*x = kbi_new();
	struct kbi_chunk_info	 ci;
	struct list		 l;
	float			 v[3] = { 1, 2, 3 };

	add_doc(x, "b", two, 2);
	add_doc(x, "a", two, 1);
	add_doc(x, "gone", two, 1);
	add_doc(x, "c", two, 2);
	add_doc(x, "d", two, 1);
	kbi_doc_remove(x, "gone");
	memset(&l, 0, sizeof(l));
	kbi_docs(x, list_cb, &l);
	ck_assert_uint_eq(l.n, 3);		/* stopped by the callback */
	ck_assert_str_eq(l.names[0], "b");
	ck_assert_str_eq(l.names[1], "a");
	ck_assert_str_eq(l.names[2], "c");
	ck_assert_uint_eq(l.chunks[0], 2);
	ck_assert_uint_eq(l.bytes[0], 11 + 6);
	ck_assert_int_eq(kbi_doc_find(x, "c"), 3);

	ck_assert_int_eq(kbi_vec_set(x, 1, v, 3), 0);
	ck_assert_int_eq(kbi_chunk_get(x, 1, &ci), 0);
	ck_assert_str_eq(ci.doc, "b");
	ck_assert_str_eq(ci.meta, "{}");
	ck_assert_uint_eq(ci.len, 6);
	ck_assert_int_eq(memcmp(ci.text, "second", 6), 0);
	ck_assert_uint_eq(ci.line_first, 2);
	ck_assert_uint_eq(ci.dim, 3);
	ck_assert(ci.vec[2] == 3);
	ck_assert_int_eq(kbi_chunk_get(x, 0, &ci), 0);
	ck_assert_ptr_null(ci.vec);
	ck_assert_uint_eq(ci.dim, 0);
	ck_assert_int_eq(kbi_chunk_get(x, 3, &ci), -1);	/* "gone" */
	ck_assert_int_eq(kbi_chunk_get(x, 99, &ci), -1);
	kbi_free(x);
}
END_TEST

static double
rrf(unsigned kr, unsigned vr)
{
	double	s = 0;

	if (kr)
		s += 1.0 / (60 + kr);
	if (vr)
		s += 1.0 / (60 + vr);
	return s / (2.0 / 61);
}

/*
 * Vectors (dim 2) and fusion by hand.  Chunks (one a document):
 *   p "apple pie"     vec (1, 0)     cos with q (1, 1): 0.7071
 *   q "apple apple"   vec (0, 1)     0.7071
 *   r "pear"          vec (1, 1)     1
 *   s "apple"         vec (-1, -1)   -1: not in the vector list
 *   t "apple tart"    no vector
 * "apple": N 5, n 4, BM25 ranks: q (tf 2) first; s (|c| 1) next; p and t
 * (|c| 2) tie: p before t.  keyword ranks q 1, s 2, p 3, t 4.
 * vector ranks: r 1, p 2 (tie with q: p's name sorts first), q 3.
 * fused: q rrf(1,3), p rrf(3,2), r rrf(0,1), s rrf(2,0), t rrf(4,0).
 */
START_TEST(test_vectors_fusion)
{
	static const struct {
		const char	*name, *text;
		float		 v[2];
		int		 hasvec;
	} c[] = {
		{ "p", "apple pie", { 1, 0 }, 1 },
		{ "q", "apple apple", { 0, 1 }, 1 },
		{ "r", "pear", { 1, 1 }, 1 },
		{ "s", "apple", { -1, -1 }, 1 },
		{ "t", "apple tart", { 0, 0 }, 0 },
	};
	static const char	*want[] = { "q", "p", "r", "s", "t" };
	struct kbi		*x = kbi_new();
	struct kbi_hit		 h[10];
	struct kbi_query	 qu;
	float			 qv[2] = { 1, 1 }, qbad[3] = { 1, 1, 1 };
	double			 ws[5];
	size_t			 i, n;
	int			 d, id;

	for (i = 0; i < 5; i++) {
		d = kbi_doc_add(x, c[i].name, "{}");
		id = kbi_chunk_add(x, d, c[i].text, strlen(c[i].text), 1, 1);
		if (c[i].hasvec)
			ck_assert_int_eq(kbi_vec_set(x, (uint32_t)id, c[i].v,
			    2), 0);
	}
	ws[0] = rrf(1, 3);
	ws[1] = rrf(3, 2);
	ws[2] = rrf(0, 1);
	ws[3] = rrf(2, 0);
	ws[4] = rrf(4, 0);
	memset(&qu, 0, sizeof(qu));
	qu.text = "apple";
	qu.len = 5;
	qu.vec = qv;
	qu.dim = 2;
	qu.limit = 10;
	n = kbi_search(x, &qu, h);
	ck_assert_uint_eq(n, 5);
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(hit_doc(x, &h[i]), want[i]);
		ck_assert_double_eq_tol(h[i].score, ws[i], EPS);
	}
	ck_assert_uint_eq(h[0].kw_rank, 1);
	ck_assert_uint_eq(h[0].vec_rank, 3);
	ck_assert_double_eq_tol(h[0].vector, sqrt(0.5), 1e-7);
	/* r: in the vector list only, keyword 0 (no "apple") */
	ck_assert_uint_eq(h[2].kw_rank, 0);
	ck_assert(h[2].keyword == 0);
	ck_assert_double_eq_tol(h[2].vector, 1, 1e-7);
	/* s: its cosine is given though it is in no vector list */
	ck_assert_double_eq_tol(h[3].vector, -1, 1e-7);
	ck_assert(h[3].keyword > 0);
	ck_assert(h[4].vector == 0);

	/* threshold and limit on the fused score */
	qu.threshold = rrf(0, 1);
	ck_assert_uint_eq(kbi_search(x, &qu, h), 3);
	qu.threshold = 0;
	qu.limit = 2;
	ck_assert_uint_eq(kbi_search(x, &qu, h), 2);
	ck_assert_str_eq(hit_doc(x, &h[1]), "p");

	/* no words, a vector: the vector list alone */
	qu.text = "";
	qu.len = 0;
	qu.limit = 10;
	ck_assert_uint_eq(kbi_search(x, &qu, h), 3);
	ck_assert_str_eq(hit_doc(x, &h[0]), "r");
	ck_assert_double_eq_tol(h[0].score, rrf(0, 1), EPS);
	ck_assert_str_eq(hit_doc(x, &h[1]), "p");
	ck_assert_str_eq(hit_doc(x, &h[2]), "q");

	/* a vector of another dim, or zero: keyword only */
	qu.text = "apple";
	qu.len = 5;
	qu.vec = qbad;
	qu.dim = 3;
	ck_assert_uint_eq(kbi_search(x, &qu, h), 4);
	ck_assert(h[0].score == h[0].keyword);
	qv[0] = qv[1] = 0;
	qu.vec = qv;
	qu.dim = 2;
	ck_assert_uint_eq(kbi_search(x, &qu, h), 4);
	ck_assert(h[0].score == h[0].keyword);
	kbi_free(x);
}
END_TEST

/* Vectors set while chunks keep coming (their array grows) keep their
 * values; removed, their dim can change. */
START_TEST(test_vectors_grow)
{
	struct kbi		*x = kbi_new();
	struct kbi_chunk_info	 ci;
	float			 v[5];
	char			 name[16];
	size_t			 i, k;
	int			 d, c;

	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "d%zu", i);
		d = kbi_doc_add(x, name, "");
		c = kbi_chunk_add(x, d, "word", 4, 1, 1);
		ck_assert_int_eq(c, (int)i);
		if (i % 3 == 0)
			continue;	/* some without */
		for (k = 0; k < 5; k++)
			v[k] = (float)(i * 10 + k);
		ck_assert_int_eq(kbi_vec_set(x, (uint32_t)c, v, 5), 0);
	}
	for (i = 0; i < 300; i++) {
		ck_assert_int_eq(kbi_chunk_get(x, (uint32_t)i, &ci), 0);
		if (i % 3 == 0) {
			ck_assert_ptr_null(ci.vec);
			continue;
		}
		ck_assert_uint_eq(ci.dim, 5);
		for (k = 0; k < 5; k++)
			ck_assert(ci.vec[k] == (float)(i * 10 + k));
	}
	/* set again: replaced, not counted twice */
	v[0] = 7;
	ck_assert_int_eq(kbi_vec_set(x, 1, v, 5), 0);
	ck_assert_int_eq(kbi_chunk_get(x, 1, &ci), 0);
	ck_assert(ci.vec[0] == 7);
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "d%zu", i);
		ck_assert_int_eq(kbi_doc_remove(x, name), 1);
		ck_assert_uint_eq(kbi_dim(x), (i < 299 ? 5 : 0));
	}
	d = kbi_doc_add(x, "new", "");
	c = kbi_chunk_add(x, d, "word", 4, 1, 1);
	ck_assert_int_eq(kbi_vec_set(x, (uint32_t)c, v, 2), 0);
	ck_assert_int_eq(kbi_chunk_get(x, (uint32_t)c, &ci), 0);
	ck_assert_uint_eq(ci.dim, 2);
	ck_assert(ci.vec[0] == 7 && ci.vec[1] == 2991);
	kbi_free(x);
}
END_TEST

/* kbi_fuse alone: RRF by hand, ties by chunk number. */
START_TEST(test_fuse)
{
	struct kbi_hit	kw[3], vec[2], out[10];
	size_t		n;

	memset(kw, 0, sizeof(kw));
	memset(vec, 0, sizeof(vec));
	kw[0].chunk = 7; kw[0].kw_rank = 1; kw[0].keyword = 0.9;
	kw[1].chunk = 3; kw[1].kw_rank = 2; kw[1].keyword = 0.5;
	kw[2].chunk = 5; kw[2].kw_rank = 3; kw[2].keyword = 0.1;
	vec[0].chunk = 5; vec[0].vec_rank = 1; vec[0].vector = 0.8;
	vec[1].chunk = 9; vec[1].vec_rank = 2; vec[1].vector = 0.7;
	/* 5: 1/63 + 1/61; 7: 1/61; 3: 1/62; 9: 1/62 (tie: 3 first) */
	n = kbi_fuse(kw, 3, vec, 2, 1, 10, 0, out);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(out[0].chunk, 5);
	ck_assert_double_eq_tol(out[0].score, (1.0 / 63 + 1.0 / 61) * 30.5,
	    EPS);
	ck_assert_double_eq_tol(out[0].keyword, 0.1, EPS);
	ck_assert_double_eq_tol(out[0].vector, 0.8, EPS);
	ck_assert_uint_eq(out[1].chunk, 7);
	ck_assert_double_eq_tol(out[1].score, 30.5 / 61, EPS);
	ck_assert_uint_eq(out[2].chunk, 3);
	ck_assert_uint_eq(out[3].chunk, 9);
	ck_assert(out[2].score == out[3].score);
	/* threshold 0.5 keeps 5 and 7 (exactly 0.5) */
	ck_assert_uint_eq(kbi_fuse(kw, 3, vec, 2, 1, 10, 0.5, out), 2);
	ck_assert_uint_eq(kbi_fuse(kw, 3, vec, 2, 1, 1, 0, out), 1);
	/* without vectors: the keyword scores, in order */
	n = kbi_fuse(kw, 3, NULL, 0, 0, 10, 0.2, out);
	ck_assert_uint_eq(n, 2);
	ck_assert(out[0].score == 0.9);
	ck_assert(out[1].score == 0.5);
	ck_assert_uint_eq(kbi_fuse(NULL, 0, NULL, 0, 1, 10, 0, out), 0);
}
END_TEST

static Suite *
kbindex_suite(void)
{
	Suite	*s = suite_create("kbindex");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, test_bm25_by_hand);
	tcase_add_test(tc, test_keyword_norm);
	tcase_add_test(tc, test_ties);
	tcase_add_test(tc, test_remove_stats);
	tcase_add_test(tc, test_remove_sweep);
	tcase_add_test(tc, test_random_reference);
	tcase_add_test(tc, test_threshold_limit_empty);
	tcase_add_test(tc, test_limit_deep);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_docs_and_get);
	tcase_add_test(tc, test_vectors_fusion);
	tcase_add_test(tc, test_vectors_grow);
	tcase_add_test(tc, test_fuse);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(kbindex_suite());
}
