/*
 * Internals shared by the in-memory index (kbindex.c), its search
 * (kbrank.c) and the segment (kbseg.c), for those files only.  Both the
 * index and the segment hand their data to one search (kbi_rank())
 * through struct kbi_corpus, so a
 * segment scores and orders with the very code its index used: the same
 * query terms in the same order, the same floating-point operations, the
 * same selection and tie rule, hence bit-identical scores.
 */
#ifndef PARLEY_KB_INT_H
#define PARLEY_KB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "parley/kbindex.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kbindex/kbseg use little-endian postings and vectors in place"
#endif

#define KBI_DEAD	UINT32_MAX	/* a removed chunk's token count */

/* One posting: a chunk holding the term and how often.  A list is sorted
 * by chunk; the segment stores the same 8 bytes, little-endian. */
struct kbi_post {
	uint32_t	chunk;
	uint32_t	tf;
};

/*
 * What the search needs from an index or a segment.  Chunk ids are below
 * nchunks; a chunk's token count is the uint32_t at dl + id * dlstride
 * (KBI_DEAD: removed, skipped).
 */
struct kbi_corpus {
	uint32_t	 nchunks;
	size_t		 nlive;		/* N */
	uint64_t	 ntokens;	/* over the live chunks */
	const unsigned char *dl;
	size_t		 dlstride;
	unsigned	 dim;		/* 0: no vectors */
	size_t		 nvec;		/* live chunks with vectors */
	const void	*ctx;
	/* The postings of a token, NULL when no live chunk holds it. */
	const struct kbi_post *(*lookup)(const void *ctx, const char *tok,
			    size_t len, size_t *n, size_t *df);
	/* A live chunk's vector and its norm, NULL when it has none. */
	const float	*(*vec)(const void *ctx, uint32_t chunk,
			    double *norm);
	/* 1 when chunk a ranks before chunk b on a tie (kbindex.h). */
	int		 (*before)(const void *ctx, uint32_t a, uint32_t b);
};

/*
 * The index itself: kbindex.c's, read by kbseg.c's writer.
 */
struct kbi_doc {
	char		*name;		/* NULL: removed */
	char		*meta;
	uint32_t	*chunks;	/* in the order added */
	size_t		 nchunks, cap;
	size_t		 bytes;
};

struct kbi_chk {
	uint32_t	 doc;
	uint32_t	 seq;		/* its place in the document */
	char		*text;		/* NULL: removed */
	size_t		 len;
	unsigned	 line_first, line_last;
	int		 hasvec;	/* in kbi.vecs */
	double		 norm;
};

struct kbi_term {
	char		*tok;
	size_t		 len;
	uint64_t	 hash;
	struct kbi_post	*post;
	size_t		 npost, cap;
	size_t		 df;		/* live chunks holding it */
};

struct kbi {
	uint64_t	 seed;
	struct kbi_doc	*docs;
	size_t		 ndocs, capdocs;
	int32_t		*dtab;		/* doc numbers, EMPTY, GONE */
	size_t		 dtabcap, dtabused;	/* with GONE */
	struct kbi_chk	*chunks;
	uint32_t	*dl;		/* tokens per chunk, KBI_DEAD */
	size_t		 nchunks, capchunks, capdl;
	struct kbi_term	*terms;
	size_t		 nterms, capterms;
	uint32_t	*ttab;		/* term number + 1; 0: empty */
	size_t		 ttabcap;
	size_t		 live_docs, live_chunks, live_bytes, live_vecs;
	uint64_t	 live_tokens;
	size_t		 dead_unswept;	/* dead chunks, postings left */
	unsigned	 dim;
	float		*vecs;		/* dim floats a chunk, flat: a scan
					   over them streams */
	size_t		 capvec;	/* chunks */
	uint32_t	*scratch;	/* a chunk's terms, while added */
	size_t		 scratchcap;
};

/* A chunk's vector, NULL when it has none. */
static inline const float *
kbi_chunk_vec(const struct kbi *x, uint32_t id)
{
	return x->chunks[id].hasvec ? x->vecs + (size_t)id * x->dim : NULL;
}

/* The search both kbi_search() and kbs_search() are. */
size_t		 kbi_rank(const struct kbi_corpus *,
		    const struct kbi_query *, struct kbi_hit *out);
/* The Euclidean norm a vector's cosine divides by (0 for a zero or a
 * non-finite vector, which then has no direction). */
double		 kbi_norm(const float *, unsigned dim);

#endif
