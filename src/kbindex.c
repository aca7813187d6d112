/*
 * The in-memory search index (see parley/kbindex.h).
 *
 * Documents and chunks are flat arrays indexed by their numbers; names
 * and tokens are found through open-addressing hash tables with a
 * per-index random seed (a document cannot be written to make them
 * collide).  Each term keeps its postings (chunk, tf) in chunk order.
 * Removing a document frees its chunks' text and marks them dead (their
 * token count becomes KBI_DEAD): N, the token total and every n(t) are
 * updated at once (the chunk's text is tokenised again to know its
 * terms), so scores are exactly those of an index built without it; the
 * dead postings stay, skipped by the search, until dead chunks outnumber
 * live ones and every list is compacted.
 *
 * The search (kbi_rank, kbrank.c) is shared with kbseg.c through
 * src/kb_int.h: term at a time over the query terms' postings into an
 * accumulator, a bounded heap for the top of each list, then kbi_fuse().
 */
#include <sys/random.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kbindex.h"
#include "parley/kbtext.h"
#include "kb_int.h"

#define KBI_NAME_MAX	4096
#define KBI_TEXT_MAX	((size_t)1 << 30)	/* a chunk's bytes */
#define KBI_DOC_EMPTY	(-1)
#define KBI_DOC_GONE	(-2)

/* A seeded hash of short keys (names, tokens): 8 bytes at a time. */
static uint64_t
kbi_hash(uint64_t seed, const char *s, size_t n)
{
	uint64_t	h = seed ^ ((uint64_t)n * 0x9e3779b97f4a7c15ULL), w;

	while (n >= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
		s += 8;
		n -= 8;
	}
	w = 0;
	memcpy(&w, s, n);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 32;
	return h;
}

struct kbi *
kbi_new(void)
{
	struct kbi	*x;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		return NULL;
	if (getrandom(&x->seed, sizeof(x->seed), GRND_NONBLOCK) !=
	    sizeof(x->seed))
		x->seed = (uint64_t)(uintptr_t)x ^ 0x2545f4914f6cdd1dULL;
	return x;
}

void
kbi_free(struct kbi *x)
{
	size_t	i;

	if (x == NULL)
		return;
	for (i = 0; i < x->ndocs; i++) {
		free(x->docs[i].name);
		free(x->docs[i].meta);
		free(x->docs[i].chunks);
	}
	for (i = 0; i < x->nchunks; i++)
		free(x->chunks[i].text);
	for (i = 0; i < x->nterms; i++) {
		free(x->terms[i].tok);
		free(x->terms[i].post);
	}
	free(x->docs);
	free(x->dtab);
	free(x->chunks);
	free(x->dl);
	free(x->terms);
	free(x->ttab);
	free(x->scratch);
	free(x->vecs);
	free(x);
}

/* Grows *p (elements of size sz, capacity *cap) to hold need: 0 or -1. */
static int
kbi_grow(void *p, size_t *cap, size_t need, size_t sz)
{
	void	*np;
	size_t	 ncap;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 8;
	while (ncap < need)
		ncap *= 2;
	if ((np = reallocarray(*(void **)p, ncap, sz)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	*(void **)p = np;
	*cap = ncap;
	return 0;
}

/* The slot of name in the document table: its own, or the empty one
 * (or first tombstone) where it would go. */
static size_t
kbi_dslot(const struct kbi *x, const char *name, int *found)
{
	size_t	mask = x->dtabcap - 1, i, gone = SIZE_MAX;
	int32_t	d;

	i = kbi_hash(x->seed, name, strlen(name)) & mask;
	for (;; i = (i + 1) & mask) {
		d = x->dtab[i];
		if (d == KBI_DOC_EMPTY)
			break;
		if (d == KBI_DOC_GONE) {
			if (gone == SIZE_MAX)
				gone = i;
			continue;
		}
		if (strcmp(x->docs[d].name, name) == 0) {
			*found = 1;
			return i;
		}
	}
	*found = 0;
	return gone != SIZE_MAX ? gone : i;
}

/* Rebuilds the document table at a size fit for one more: 0 or -1. */
static int
kbi_drehash(struct kbi *x)
{
	int32_t	*old = x->dtab, *nt;
	size_t	 oldcap = x->dtabcap, cap, i;
	int	 found;

	if ((x->dtabused + 1) * 2 <= x->dtabcap)
		return 0;
	for (cap = 16; cap < (x->live_docs + 1) * 4; cap *= 2)
		;
	if ((nt = malloc(cap * sizeof(*nt))) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < cap; i++)
		nt[i] = KBI_DOC_EMPTY;
	x->dtab = nt;
	x->dtabcap = cap;
	x->dtabused = 0;
	for (i = 0; i < oldcap; i++)
		if (old[i] >= 0) {
			x->dtab[kbi_dslot(x, x->docs[old[i]].name,
			    &found)] = old[i];
			x->dtabused++;
		}
	free(old);
	return 0;
}

int
kbi_doc_add(struct kbi *x, const char *name, const char *meta)
{
	struct kbi_doc	*d;
	size_t		 nlen, slot;
	int		 found;

	if (name == NULL || meta == NULL || (nlen = strlen(name)) == 0 ||
	    nlen > KBI_NAME_MAX || x->ndocs >= INT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (kbi_doc_find(x, name) != -1) {
		errno = EEXIST;
		return -1;
	}
	if (kbi_drehash(x) == -1 ||
	    kbi_grow(&x->docs, &x->capdocs, x->ndocs + 1, sizeof(*d)) == -1)
		return -1;
	d = &x->docs[x->ndocs];
	memset(d, 0, sizeof(*d));
	if ((d->name = strdup(name)) == NULL ||
	    (d->meta = strdup(meta)) == NULL) {
		free(d->name);
		errno = ENOMEM;
		return -1;
	}
	slot = kbi_dslot(x, name, &found);
	if (x->dtab[slot] == KBI_DOC_EMPTY)
		x->dtabused++;
	x->dtab[slot] = (int32_t)x->ndocs;
	x->live_docs++;
	return (int)x->ndocs++;
}

int
kbi_doc_find(const struct kbi *x, const char *name)
{
	size_t	slot;
	int	found;

	if (x->dtabcap == 0 || name == NULL)
		return -1;
	slot = kbi_dslot(x, name, &found);
	return found ? x->dtab[slot] : -1;
}

/* The number of tok's term, or -1. */
static int64_t
kbi_term_find(const struct kbi *x, const char *tok, size_t len, uint64_t h)
{
	const struct kbi_term	*t;
	size_t			 mask, i;

	if (x->ttabcap == 0)
		return -1;
	mask = x->ttabcap - 1;
	for (i = h & mask; x->ttab[i] != 0; i = (i + 1) & mask) {
		t = &x->terms[x->ttab[i] - 1];
		if (t->hash == h && t->len == len &&
		    memcmp(t->tok, tok, len) == 0)
			return x->ttab[i] - 1;
	}
	return -1;
}

/* The term of tok, or (create) a new one: its number, or -1 (absent, or
 * ENOMEM). */
static int64_t
kbi_term(struct kbi *x, const char *tok, size_t len, int create)
{
	struct kbi_term	*t;
	uint32_t	*nt;
	uint64_t	 h = kbi_hash(x->seed, tok, len);
	size_t		 mask, i, cap;
	int64_t		 id;

	if ((id = kbi_term_find(x, tok, len, h)) != -1)
		return id;
	if (!create || x->nterms >= UINT32_MAX - 1)
		return -1;
	if ((x->nterms + 1) * 2 > x->ttabcap) {
		cap = x->ttabcap ? x->ttabcap * 2 : 1024;
		if ((nt = calloc(cap, sizeof(*nt))) == NULL)
			return -1;
		for (i = 0; i < x->nterms; i++) {
			size_t j = x->terms[i].hash & (cap - 1);

			while (nt[j] != 0)
				j = (j + 1) & (cap - 1);
			nt[j] = (uint32_t)i + 1;
		}
		free(x->ttab);
		x->ttab = nt;
		x->ttabcap = cap;
	}
	if (kbi_grow(&x->terms, &x->capterms, x->nterms + 1,
	    sizeof(*t)) == -1)
		return -1;
	t = &x->terms[x->nterms];
	memset(t, 0, sizeof(*t));
	if ((t->tok = malloc(len)) == NULL)
		return -1;
	memcpy(t->tok, tok, len);
	t->len = len;
	t->hash = h;
	mask = x->ttabcap - 1;
	for (i = h & mask; x->ttab[i] != 0; i = (i + 1) & mask)
		;
	x->ttab[i] = (uint32_t)x->nterms + 1;
	return (int64_t)x->nterms++;
}

struct kbi_tokctx {
	struct kbi	*x;
	size_t		 n;
	int		 create;
	int		 err;
};

/* Collects a chunk's term numbers in x->scratch (creating terms), or,
 * not creating, those that exist. */
static void
kbi_tok_cb(void *arg, const char *tok, size_t len)
{
	struct kbi_tokctx	*k = arg;
	int64_t			 t;

	if (k->err)
		return;
	if ((t = kbi_term(k->x, tok, len, k->create)) == -1) {
		if (k->create)
			k->err = ENOMEM;
		return;
	}
	if (kbi_grow(&k->x->scratch, &k->x->scratchcap, k->n + 1,
	    sizeof(uint32_t)) == -1) {
		k->err = ENOMEM;
		return;
	}
	k->x->scratch[k->n++] = (uint32_t)t;
}

static int
kbi_u32cmp(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Tokenises text into x->scratch, sorted: the number of tokens, or
 * (size_t)-1 (ENOMEM). */
static size_t
kbi_chunk_terms(struct kbi *x, const char *text, size_t len, int create)
{
	struct kbi_tokctx	k = { x, 0, create, 0 };

	kbt_tokens(text, len, kbi_tok_cb, &k);
	if (k.err) {
		errno = k.err;
		return (size_t)-1;
	}
	if (k.n > 1)
		qsort(x->scratch, k.n, sizeof(uint32_t), kbi_u32cmp);
	return k.n;
}

int
kbi_chunk_add(struct kbi *x, int doc, const char *text, size_t len,
    unsigned line_first, unsigned line_last)
{
	struct kbi_doc	*d;
	struct kbi_chk	*c;
	size_t		 ntok, i, j;
	uint32_t	 id;
	char		*copy;

	if (doc < 0 || (size_t)doc >= x->ndocs || x->docs[doc].name ==
	    NULL || (text == NULL && len > 0) || len > KBI_TEXT_MAX ||
	    x->nchunks >= INT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	d = &x->docs[doc];
	id = (uint32_t)x->nchunks;
	/* reserve everything first, so a failure changes nothing */
	if ((ntok = kbi_chunk_terms(x, text, len, 1)) == (size_t)-1)
		return -1;
	for (i = 0; i < ntok; i = j) {
		struct kbi_term *t = &x->terms[x->scratch[i]];

		for (j = i + 1; j < ntok && x->scratch[j] == x->scratch[i];
		    j++)
			;
		if (kbi_grow(&t->post, &t->cap, t->npost + 1,
		    sizeof(*t->post)) == -1)
			return -1;
	}
	if (kbi_grow(&x->chunks, &x->capchunks, x->nchunks + 1,
	    sizeof(*c)) == -1 || kbi_grow(&d->chunks, &d->cap,
	    d->nchunks + 1, sizeof(uint32_t)) == -1)
		return -1;
	if (kbi_grow(&x->dl, &x->capdl, x->nchunks + 1,
	    sizeof(*x->dl)) == -1)
		return -1;
	if (x->vecs != NULL && kbi_grow(&x->vecs, &x->capvec, x->nchunks + 1,
	    x->dim * sizeof(float)) == -1)
		return -1;
	if ((copy = malloc(len ? len : 1)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if (len > 0)
		memcpy(copy, text, len);
	/* commit */
	for (i = 0; i < ntok; i = j) {
		struct kbi_term *t = &x->terms[x->scratch[i]];

		for (j = i + 1; j < ntok && x->scratch[j] == x->scratch[i];
		    j++)
			;
		t->post[t->npost].chunk = id;
		t->post[t->npost].tf = (uint32_t)(j - i);
		t->npost++;
		t->df++;
	}
	c = &x->chunks[id];
	memset(c, 0, sizeof(*c));
	c->doc = (uint32_t)doc;
	c->seq = (uint32_t)d->nchunks;
	c->text = copy;
	c->len = len;
	c->line_first = line_first;
	c->line_last = line_last;
	x->dl[id] = (uint32_t)ntok;
	d->chunks[d->nchunks++] = id;
	d->bytes += len;
	x->nchunks++;
	x->live_chunks++;
	x->live_bytes += len;
	x->live_tokens += ntok;
	return (int)id;
}

int
kbi_vec_set(struct kbi *x, uint32_t chunk, const float *v, unsigned dim)
{
	struct kbi_chk	*c;
	unsigned	 i;

	if (chunk >= x->nchunks || x->dl[chunk] == KBI_DEAD || v == NULL ||
	    dim == 0 || dim > KBI_DIM_MAX || (x->dim != 0 && dim != x->dim)) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < dim; i++)
		if (!isfinite(v[i])) {
			errno = EINVAL;
			return -1;
		}
	if (x->vecs == NULL && kbi_grow(&x->vecs, &x->capvec,
	    x->capchunks, dim * sizeof(float)) == -1)
		return -1;
	c = &x->chunks[chunk];
	if (!c->hasvec)
		x->live_vecs++;
	c->hasvec = 1;
	x->dim = dim;
	memcpy(x->vecs + (size_t)chunk * dim, v, dim * sizeof(float));
	c->norm = kbi_norm(x->vecs + (size_t)chunk * dim, dim);
	return 0;
}

/* Drops the postings of dead chunks from every list. */
static void
kbi_sweep(struct kbi *x)
{
	struct kbi_term	*t;
	size_t		 i, j, k;

	for (i = 0; i < x->nterms; i++) {
		t = &x->terms[i];
		for (j = k = 0; j < t->npost; j++)
			if (x->dl[t->post[j].chunk] != KBI_DEAD)
				t->post[k++] = t->post[j];
		t->npost = k;
		if (k == 0) {
			free(t->post);
			t->post = NULL;
			t->cap = 0;
		}
	}
	x->dead_unswept = 0;
}

int
kbi_doc_remove(struct kbi *x, const char *name)
{
	struct kbi_doc	*d;
	struct kbi_chk	*c;
	size_t		 slot, i, j, n;
	int		 found;
	uint32_t	 id;

	if (x->dtabcap == 0 || name == NULL)
		return 0;
	slot = kbi_dslot(x, name, &found);
	if (!found)
		return 0;
	d = &x->docs[x->dtab[slot]];
	for (i = 0; i < d->nchunks; i++) {
		id = d->chunks[i];
		c = &x->chunks[id];
		/* its terms exist: looking them up allocates nothing but
		 * scratch, which holds at least the tokens it held when
		 * added */
		n = kbi_chunk_terms(x, c->text, c->len, 0);
		for (j = 0; n != (size_t)-1 && j < n; j++)
			if (j == 0 || x->scratch[j] != x->scratch[j - 1])
				x->terms[x->scratch[j]].df--;
		x->live_tokens -= x->dl[id];
		x->dl[id] = KBI_DEAD;
		x->live_bytes -= c->len;
		x->live_chunks--;
		if (c->hasvec)
			x->live_vecs--;
		free(c->text);
		c->text = NULL;
		c->hasvec = 0;
		c->len = 0;
	}
	x->dead_unswept += d->nchunks;
	free(d->name);
	free(d->meta);
	free(d->chunks);
	memset(d, 0, sizeof(*d));
	x->dtab[slot] = KBI_DOC_GONE;
	x->live_docs--;
	if (x->live_vecs == 0 && x->vecs != NULL) {
		free(x->vecs);
		x->vecs = NULL;
		x->capvec = 0;
		x->dim = 0;
	}
	if (x->dead_unswept > 1024 && x->dead_unswept > x->live_chunks)
		kbi_sweep(x);
	return 1;
}

int
kbi_chunk_get(const struct kbi *x, uint32_t chunk,
    struct kbi_chunk_info *out)
{
	const struct kbi_chk	*c;

	if (chunk >= x->nchunks || x->dl[chunk] == KBI_DEAD)
		return -1;
	c = &x->chunks[chunk];
	out->doc = x->docs[c->doc].name;
	out->meta = x->docs[c->doc].meta;
	out->text = c->text;
	out->len = c->len;
	out->line_first = c->line_first;
	out->line_last = c->line_last;
	out->vec = kbi_chunk_vec(x, chunk);
	out->dim = c->hasvec ? x->dim : 0;
	return 0;
}

size_t
kbi_ndocs(const struct kbi *x)
{
	return x->live_docs;
}

size_t
kbi_nchunks(const struct kbi *x)
{
	return x->live_chunks;
}

size_t
kbi_bytes(const struct kbi *x)
{
	return x->live_bytes;
}

unsigned
kbi_dim(const struct kbi *x)
{
	return x->dim;
}

void
kbi_docs(const struct kbi *x, kbi_doc_fn fn, void *arg)
{
	size_t	i;

	for (i = 0; i < x->ndocs; i++)
		if (x->docs[i].name != NULL && fn(arg, x->docs[i].name,
		    x->docs[i].meta, x->docs[i].nchunks, x->docs[i].bytes))
			return;
}

/* The corpus callbacks of an index (kb_int.h). */
static const struct kbi_post *
kbi_lookup(const void *ctx, const char *tok, size_t len, size_t *n,
    size_t *df)
{
	const struct kbi	*x = ctx;
	const struct kbi_term	*t;
	int64_t			 id;

	if ((id = kbi_term_find(x, tok, len, kbi_hash(x->seed, tok,
	    len))) == -1)
		return NULL;
	t = &x->terms[id];
	if (t->df == 0)
		return NULL;
	*n = t->npost;
	*df = t->df;
	return t->post;
}

static const float *
kbi_vecof(const void *ctx, uint32_t chunk, double *norm)
{
	const struct kbi	*x = ctx;

	*norm = x->chunks[chunk].norm;
	return kbi_chunk_vec(x, chunk);
}

static int
kbi_before(const void *ctx, uint32_t a, uint32_t b)
{
	const struct kbi	*x = ctx;
	const struct kbi_chk	*ca = &x->chunks[a], *cb = &x->chunks[b];
	int			 c;

	if (ca->doc != cb->doc) {
		c = strcmp(x->docs[ca->doc].name, x->docs[cb->doc].name);
		if (c != 0)
			return c < 0;
	}
	return ca->seq < cb->seq;
}

size_t
kbi_search(const struct kbi *x, const struct kbi_query *q,
    struct kbi_hit *out)
{
	struct kbi_corpus	co;

	memset(&co, 0, sizeof(co));
	co.nchunks = (uint32_t)x->nchunks;
	co.nlive = x->live_chunks;
	co.ntokens = x->live_tokens;
	co.dl = (const unsigned char *)x->dl;
	co.dlstride = sizeof(uint32_t);
	co.dim = x->dim;
	co.nvec = x->live_vecs;
	co.ctx = x;
	co.lookup = kbi_lookup;
	co.vec = kbi_vecof;
	co.before = kbi_before;
	return kbi_rank(&co, q, out);
}
