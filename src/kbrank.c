/*
 * The search of an index or a segment (kb_int.h, the scoring of
 * parley/kbindex.h): query terms, BM25 term at a time, cosine, the
 * top of each list, reciprocal rank fusion.  One copy of this code serves
 * kbindex.c and kbseg.c, so both compute bit-identical scores.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kbindex.h"
#include "parley/kbtext.h"
#include "kb_int.h"

/* A query term: its postings and its idf. */
struct kbi_qterm {
	const struct kbi_post	*p;
	size_t			 n;
	double			 idf;
};

struct kbi_qctx {
	const struct kbi_corpus	*co;
	struct kbi_qterm	*t;
	size_t			 n, cap;
	int			 err;
};

/* A candidate in a list's selection. */
struct kbi_cand {
	double		s;
	uint32_t	c;
};

/* The best k candidates seen, as a heap with the worst on top. */
struct kbi_sel {
	const struct kbi_corpus	*co;
	struct kbi_cand		*h;
	size_t			 n, k;
};

static void
kbi_q_cb(void *arg, const char *tok, size_t len)
{
	struct kbi_qctx		*q = arg;
	const struct kbi_post	*p;
	struct kbi_qterm	*nt;
	size_t			 n = 0, df = 0, i;

	if (q->err || (p = q->co->lookup(q->co->ctx, tok, len, &n,
	    &df)) == NULL || df == 0)
		return;
	/* distinct terms, in the order they first appear; a term's list
	 * is its identity */
	for (i = 0; i < q->n; i++)
		if (q->t[i].p == p)
			return;
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 16;

		if ((nt = reallocarray(q->t, cap, sizeof(*nt))) == NULL) {
			q->err = ENOMEM;
			return;
		}
		q->t = nt;
		q->cap = cap;
	}
	q->t[q->n].p = p;
	q->t[q->n].n = n;
	/* idf(t) = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5)) */
	q->t[q->n].idf = log(1.0 + ((double)q->co->nlive - (double)df +
	    0.5) / ((double)df + 0.5));
	q->n++;
}

/* One term's part of BM25 for a chunk of dl tokens. */
static double
kbi_tfw(double idf, uint32_t tf, uint32_t dl, double avgdl)
{
	double	f = tf;

	return idf * f * (KBI_K1 + 1) / (f + KBI_K1 * (1 - KBI_B + KBI_B *
	    (double)dl / avgdl));
}

static uint32_t
kbi_dl(const struct kbi_corpus *co, uint32_t c)
{
	uint32_t	v;

	if (c >= co->nchunks)
		return KBI_DEAD;
	memcpy(&v, co->dl + (size_t)c * co->dlstride, sizeof(v));
	return v;
}

/* Eight floats: GNU C vectors, so the product runs in SIMD registers
 * without -O3 or -march flags. */
typedef float	kbi_v4 __attribute__((vector_size(16)));

/* The dot product, in 8 float lanes summed in double at the end; the
 * same code for every caller, so the same bits. */
static double
kbi_dot(const float *a, const float *b, unsigned dim)
{
	kbi_v4	s0 = { 0, 0, 0, 0 }, s1 = { 0, 0, 0, 0 }, x0, x1, y0, y1;
	size_t	i, n = dim;
	double	s;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&x0, a + i, sizeof(x0));
		memcpy(&x1, a + i + 4, sizeof(x1));
		memcpy(&y0, b + i, sizeof(y0));
		memcpy(&y1, b + i + 4, sizeof(y1));
		s0 += x0 * y0;
		s1 += x1 * y1;
	}
	s = (double)s0[0] + s0[1] + s0[2] + s0[3] + s1[0] + s1[1] + s1[2] +
	    s1[3];
	for (; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

double
kbi_norm(const float *v, unsigned dim)
{
	double	n = sqrt(kbi_dot(v, v, dim));

	return isfinite(n) && n > 0 ? n : 0;
}

/* 1 when a ranks below b. */
static int
kbi_worse(const struct kbi_sel *s, const struct kbi_cand *a,
    const struct kbi_cand *b)
{
	if (a->s != b->s)
		return a->s < b->s;
	return s->co->before(s->co->ctx, b->c, a->c);
}

static void
kbi_sel_down(struct kbi_sel *s, size_t i)
{
	struct kbi_cand	tmp;
	size_t		l, m;

	for (;;) {
		l = 2 * i + 1;
		if (l >= s->n)
			return;
		m = l;
		if (l + 1 < s->n && kbi_worse(s, &s->h[l + 1], &s->h[l]))
			m = l + 1;
		if (!kbi_worse(s, &s->h[m], &s->h[i]))
			return;
		tmp = s->h[i];
		s->h[i] = s->h[m];
		s->h[m] = tmp;
		i = m;
	}
}

static void
kbi_sel_offer(struct kbi_sel *s, double score, uint32_t c)
{
	struct kbi_cand	x = { score, c }, tmp;
	size_t		i, p;

	if (!(score > 0) || s->k == 0)	/* NaN too */
		return;
	if (s->n == s->k) {
		if (!kbi_worse(s, &s->h[0], &x))
			return;
		s->h[0] = x;
		kbi_sel_down(s, 0);
		return;
	}
	i = s->n++;
	s->h[i] = x;
	while (i > 0) {
		p = (i - 1) / 2;
		if (!kbi_worse(s, &s->h[i], &s->h[p]))
			break;
		tmp = s->h[i];
		s->h[i] = s->h[p];
		s->h[p] = tmp;
		i = p;
	}
}

/* Empties the selection into h, best first: the count. */
static size_t
kbi_sel_take(struct kbi_sel *s)
{
	struct kbi_cand	tmp;
	size_t		n = s->n;

	/* heap sort: the worst goes last */
	while (s->n > 1) {
		tmp = s->h[0];
		s->h[0] = s->h[s->n - 1];
		s->h[s->n - 1] = tmp;
		s->n--;
		kbi_sel_down(s, 0);
	}
	s->n = 0;
	return n;
}

/*
 * BM25 of every chunk holding a query term, offered to sel: term at a
 * time into an accumulator as long as the chunk ids, each chunk's terms
 * thus summed in query order (as kbi_bm25_one() sums them), then only
 * the chunks touched are offered.  0, or -1 (ENOMEM).
 */
static int
kbi_bm25_all(const struct kbi_corpus *co, const struct kbi_qterm *t,
    size_t nt, double avgdl, struct kbi_sel *sel)
{
	const struct kbi_post	*p;
	double			*acc;
	uint32_t		*touched, c, dl;
	size_t			 cap = 0, n = 0, i, j;

	for (i = 0; i < nt; i++)
		cap += t[i].n;
	if (cap > co->nchunks)
		cap = co->nchunks;
	acc = calloc(co->nchunks + 1, sizeof(*acc));
	touched = malloc((cap + 1) * sizeof(*touched));
	if (acc == NULL || touched == NULL) {
		free(acc);
		free(touched);
		return -1;
	}
	for (i = 0; i < nt; i++) {
		p = t[i].p;
		for (j = 0; j < t[i].n; j++) {
			c = p[j].chunk;
			if ((dl = kbi_dl(co, c)) == KBI_DEAD || p[j].tf == 0)
				continue;
			if (acc[c] == 0) {
				/* only a damaged segment */
				if (n == cap)
					continue;
				touched[n++] = c;
			}
			acc[c] += kbi_tfw(t[i].idf, p[j].tf, dl, avgdl);
		}
	}
	for (i = 0; i < n; i++)
		kbi_sel_offer(sel, acc[touched[i]], touched[i]);
	free(acc);
	free(touched);
	return 0;
}

/* BM25 of one chunk (one not in the keyword list): the same sum, each
 * tf found by binary search in the chunk-ordered lists. */
static double
kbi_bm25_one(const struct kbi_corpus *co, const struct kbi_qterm *t,
    size_t nt, double avgdl, uint32_t c)
{
	size_t		i, lo, hi, mid;
	uint32_t	dl = kbi_dl(co, c);
	double		s = 0;

	if (dl == KBI_DEAD)
		return 0;
	for (i = 0; i < nt; i++) {
		lo = 0;
		hi = t[i].n;
		while (lo < hi) {
			mid = lo + (hi - lo) / 2;
			if (t[i].p[mid].chunk < c)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < t[i].n && t[i].p[lo].chunk == c)
			s += kbi_tfw(t[i].idf, t[i].p[lo].tf, dl, avgdl);
	}
	return s;
}

static double
kbi_cosine(const struct kbi_corpus *co, const struct kbi_query *q,
    double qnorm, uint32_t c)
{
	const float	*v;
	double		 norm;

	if (kbi_dl(co, c) == KBI_DEAD ||
	    (v = co->vec(co->ctx, c, &norm)) == NULL || !(norm > 0))
		return 0;
	return kbi_dot(v, q->vec, co->dim) / (norm * qnorm);
}

static int
kbi_fuse_cmp(const void *a, const void *b)
{
	const struct kbi_hit	*x = a, *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->chunk < y->chunk ? -1 : x->chunk > y->chunk;
}

size_t
kbi_fuse(const struct kbi_hit *kw, size_t nkw, const struct kbi_hit *vec,
    size_t nvec, int use_vec, size_t limit, double threshold,
    struct kbi_hit *out)
{
	struct kbi_hit	*all, *h;
	size_t		 n = 0, i, j;
	double		 s;

	if (!use_vec) {
		for (i = 0; i < nkw && n < limit; i++)
			if (kw[i].keyword >= threshold) {
				out[n] = kw[i];
				out[n].score = kw[i].keyword;
				n++;
			}
		return n;
	}
	if (nkw + nvec == 0)
		return 0;
	if ((all = calloc(nkw + nvec, sizeof(*all))) == NULL)
		return 0;
	for (i = 0; i < nkw; i++) {
		h = &all[n++];
		*h = kw[i];
		h->vec_rank = 0;
		h->vector = 0;
	}
	for (j = 0; j < nvec; j++) {
		for (i = 0; i < nkw && all[i].chunk != vec[j].chunk; i++)
			;
		if (i == nkw) {
			h = &all[n++];
			memset(h, 0, sizeof(*h));
			h->chunk = vec[j].chunk;
		} else
			h = &all[i];
		h->vec_rank = vec[j].vec_rank;
		h->vector = vec[j].vector;
	}
	for (i = 0; i < n; i++) {
		h = &all[i];
		s = 0;
		if (h->kw_rank > 0)
			s += 1.0 / (KBI_RRF_K + (double)h->kw_rank);
		if (h->vec_rank > 0)
			s += 1.0 / (KBI_RRF_K + (double)h->vec_rank);
		h->score = s / (2.0 / (KBI_RRF_K + 1));
	}
	qsort(all, n, sizeof(*all), kbi_fuse_cmp);
	for (i = j = 0; i < n && j < limit; i++)
		if (all[i].score >= threshold)
			out[j++] = all[i];
	free(all);
	return j;
}

/* Ranks the union of two lists by the tie rule and gives each chunk its
 * place in it, so kbi_fuse(), which breaks ties by chunk number, breaks
 * them by document name and place; back maps places to chunks. */
static void
kbi_tie_keys(const struct kbi_corpus *co, struct kbi_hit *kw, size_t nkw,
    struct kbi_hit *vec, size_t nvec, uint32_t *back)
{
	size_t		n = 0, i, j;
	uint32_t	tmp;

	for (i = 0; i < nkw; i++)
		back[n++] = kw[i].chunk;
	for (i = 0; i < nvec; i++) {
		for (j = 0; j < nkw && kw[j].chunk != vec[i].chunk; j++)
			;
		if (j == nkw)
			back[n++] = vec[i].chunk;
	}
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && co->before(co->ctx, back[j],
		    back[j - 1]); j--) {
			tmp = back[j];
			back[j] = back[j - 1];
			back[j - 1] = tmp;
		}
	for (i = 0; i < nkw; i++)
		for (j = 0; j < n; j++)
			if (back[j] == kw[i].chunk) {
				kw[i].chunk = (uint32_t)j;
				break;
			}
	for (i = 0; i < nvec; i++)
		for (j = 0; j < n; j++)
			if (back[j] == vec[i].chunk) {
				vec[i].chunk = (uint32_t)j;
				break;
			}
}

size_t
kbi_rank(const struct kbi_corpus *co, const struct kbi_query *q,
    struct kbi_hit *out)
{
	struct kbi_qctx	 qc;
	struct kbi_sel	 sel;
	struct kbi_hit	*kw = NULL, *vh = NULL;
	uint32_t	*back = NULL;
	size_t		 nkw = 0, nvh = 0, n = 0, depth, i;
	double		 avgdl, norm = 0, qnorm = 0;
	int		 use_vec;

	memset(&sel, 0, sizeof(sel));
	memset(&qc, 0, sizeof(qc));
	if (q == NULL || out == NULL || q->limit == 0 || co->nlive == 0 ||
	    (q->text == NULL && q->len > 0))
		return 0;
	qc.co = co;
	if (q->len > 0)
		kbt_tokens(q->text, q->len, kbi_q_cb, &qc);
	if (qc.err)
		goto done;
	avgdl = (double)co->ntokens / (double)co->nlive;
	/* the keyword score's divisor: sum of idf(t) * (k1 + 1) */
	for (i = 0; i < qc.n; i++)
		norm += qc.t[i].idf * (KBI_K1 + 1);
	use_vec = q->vec != NULL && co->dim > 0 && q->dim == co->dim &&
	    co->nvec > 0 && (qnorm = kbi_norm(q->vec, q->dim)) > 0;
	if (qc.n == 0 && !use_vec)
		goto done;

	depth = use_vec ? KBI_DEPTH : q->limit;
	if (depth > co->nlive)
		depth = co->nlive;
	sel.co = co;
	sel.k = depth;
	if ((sel.h = calloc(depth, sizeof(*sel.h))) == NULL ||
	    (kw = calloc(depth, sizeof(*kw))) == NULL ||
	    (use_vec && (vh = calloc(depth, sizeof(*vh))) == NULL) ||
	    (use_vec && (back = calloc(2 * depth, sizeof(*back))) == NULL))
		goto fail;
	if (qc.n > 0 && kbi_bm25_all(co, qc.t, qc.n, avgdl, &sel) == -1)
		goto fail;
	nkw = kbi_sel_take(&sel);
	for (i = 0; i < nkw; i++) {
		kw[i].chunk = sel.h[i].c;
		kw[i].bm25 = sel.h[i].s;
		kw[i].keyword = sel.h[i].s / norm;
		kw[i].kw_rank = (unsigned)i + 1;
	}
	if (use_vec) {
		for (i = 0; i < co->nchunks; i++)
			kbi_sel_offer(&sel, kbi_cosine(co, q, qnorm,
			    (uint32_t)i), (uint32_t)i);
		nvh = kbi_sel_take(&sel);
		for (i = 0; i < nvh; i++) {
			vh[i].chunk = sel.h[i].c;
			vh[i].vector = sel.h[i].s;
			vh[i].vec_rank = (unsigned)i + 1;
		}
		kbi_tie_keys(co, kw, nkw, vh, nvh, back);
	}
	n = kbi_fuse(kw, nkw, vh, nvh, use_vec, q->limit, q->threshold, out);
	if (use_vec) {
		/* back to chunk numbers; each hit's other component too */
		for (i = 0; i < n; i++) {
			out[i].chunk = back[out[i].chunk];
			if (out[i].kw_rank == 0 && qc.n > 0) {
				out[i].bm25 = kbi_bm25_one(co, qc.t, qc.n,
				    avgdl, out[i].chunk);
				out[i].keyword = out[i].bm25 / norm;
			}
			if (out[i].vec_rank == 0)
				out[i].vector = kbi_cosine(co, q, qnorm,
				    out[i].chunk);
		}
	}
	goto done;
fail:
	n = 0;
done:
	free(sel.h);
	free(kw);
	free(vh);
	free(back);
	free(qc.t);
	return n;
}
