/*
 * An in-memory search index: documents, their chunks, a BM25 keyword
 * index over the chunks' tokens (kbtext.h) and optional vectors, with
 * hybrid search fused by reciprocal rank.  One index belongs to one
 * thread; nothing here blocks.
 *
 * Scoring, fixed so tests can compute it by hand:
 *   BM25(q, c) = sum over the distinct tokens t of q that occur in the
 *     index of idf(t) * tf(t,c) * (k1 + 1) / (tf(t,c) + k1 * (1 - b +
 *     b * |c| / avgdl)), idf(t) = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5)),
 *     k1 = 1.2, b = 0.75, N the live chunks, n(t) those holding t, |c| a
 *     chunk's tokens, avgdl their mean over the live chunks.
 *   keyword score = BM25 / (sum over the same t of idf(t) * (k1 + 1)):
 *     0..1, how fully a chunk matches the query's (rarity-weighted) words.
 *   vector score = cosine similarity of the chunk's vector and the
 *     query's (chunks without a vector have none).
 *   With a query vector and chunks with vectors, each list is ranked (the
 *     keyword list by BM25, the vector list by cosine, those > 0 only, each
 *     cut at KBI_DEPTH), and hits are ranked by the reciprocal rank fusion
 *     sum of 1 / (KBI_RRF_K + rank) over the lists a chunk is in; score =
 *     that sum / (2 / (KBI_RRF_K + 1)), so 1 means first in both.
 *     Otherwise score = the keyword score.
 *   A query vector of another dim than the index's, or a zero one, is
 *   ignored (keyword only).  Without fusion the keyword list is as deep
 *   as the limit (it may pass KBI_DEPTH).
 *   Hits with score < threshold are dropped.  Ties (in each list and in
 *   the fusion) go to the chunk whose document's name sorts first
 *   (strcmp), then to the one that comes first in its document, so a
 *   segment (kbseg.h), which renumbers chunks, ranks exactly the same.
 *   A fused hit carries both components even when it is in one list
 *   only: keyword/bm25 when it holds a query word, vector when it has a
 *   vector (its cosine, maybe <= 0).
 * A search allocates scratch as large as the chunk count (an
 * accumulator) and gives 0 hits when out of memory; it changes nothing,
 * so searches of one index need no lock among themselves.
 */
#ifndef PARLEY_KBINDEX_H
#define PARLEY_KBINDEX_H

#include <stddef.h>
#include <stdint.h>

#define KBI_K1		1.2
#define KBI_B		0.75
#define KBI_RRF_K	60
#define KBI_DEPTH	100	/* each list's depth before fusion */
#define KBI_DIM_MAX	8192	/* a vector's most dimensions */

struct kbi;

struct kbi	*kbi_new(void);
void		 kbi_free(struct kbi *);

/*
 * Adds a document: name (1..4096 bytes, unique: a documentId or a path)
 * and meta (any NUL-terminated text, kept as given: JSON for a session's
 * document, the file's hash and stat for the index), both copied.
 * Returns its number (>= 0), or -1 with errno EEXIST, EINVAL (no name,
 * or a longer one) or ENOMEM.  A removed document's name may be added
 * again (under a new number).
 */
int		 kbi_doc_add(struct kbi *, const char *name, const char *meta);
/* The document's number, or -1. */
int		 kbi_doc_find(const struct kbi *, const char *name);
/* Removes a document and its chunks: 1, or 0 when there was none.  Chunk
 * ids of other documents do not change. */
int		 kbi_doc_remove(struct kbi *, const char *name);

/*
 * Adds a chunk of document doc: text copied and tokenised; lines its
 * range in the document (0, 0 when it has none).  Returns the chunk's id
 * (>= 0), or -1 with errno EINVAL (no such document, a removed one, or
 * more than 1 GiB of text) or ENOMEM; a failure changes nothing.
 */
int		 kbi_chunk_add(struct kbi *, int doc, const char *text,
		    size_t len, unsigned line_first, unsigned line_last);
/* Sets a chunk's vector (copied).  Every vector of an index has the same
 * dim, 1..KBI_DIM_MAX: -1 EINVAL otherwise (and for a removed chunk or a
 * value that is not finite); ENOMEM.  Once no live chunk has a vector
 * (their documents removed) the index takes another dim. */
int		 kbi_vec_set(struct kbi *, uint32_t chunk, const float *v,
		    unsigned dim);

struct kbi_chunk_info {
	const char	*doc;		/* its document's name */
	const char	*meta;		/* and meta */
	const char	*text;		/* not NUL-terminated */
	size_t		 len;
	unsigned	 line_first, line_last;
	const float	*vec;		/* NULL when it has none */
	unsigned	 dim;
};
/* 0 and *out filled (pointers valid until the index changes), or -1 when
 * there is no live chunk with that id. */
int		 kbi_chunk_get(const struct kbi *, uint32_t chunk,
		    struct kbi_chunk_info *out);

size_t		 kbi_ndocs(const struct kbi *);		/* live */
size_t		 kbi_nchunks(const struct kbi *);	/* live */
size_t		 kbi_bytes(const struct kbi *);		/* live chunks' text */
unsigned	 kbi_dim(const struct kbi *);		/* 0: no vectors */

/* Calls fn for each live document in the order added, with its number of
 * chunks and bytes of text; fn returns non-zero to stop. */
typedef int	(*kbi_doc_fn)(void *arg, const char *name, const char *meta,
		    size_t nchunks, size_t bytes);
void		 kbi_docs(const struct kbi *, kbi_doc_fn, void *arg);

struct kbi_query {
	const char	*text;		/* the words */
	size_t		 len;
	const float	*vec;		/* NULL: keyword only */
	unsigned	 dim;
	size_t		 limit;		/* hits wanted, >= 1 */
	double		 threshold;	/* drop hits scoring less, 0..1 */
};

struct kbi_hit {
	uint32_t	 chunk;
	double		 score;		/* 0..1, see above */
	double		 keyword;	/* 0..1; 0 when not matched */
	double		 bm25;		/* raw */
	double		 vector;	/* cosine; 0 when none */
	unsigned	 kw_rank;	/* 1-based; 0: not in that list */
	unsigned	 vec_rank;
};

/* Fills out (room for q->limit hits), best first.  Returns the number of
 * hits; 0 also when the query has no token and no vector. */
size_t		 kbi_search(const struct kbi *, const struct kbi_query *q,
		    struct kbi_hit *out);

/*
 * The fusion alone (kbs_search uses it too): kw and vec are ranked lists
 * (best first, kw_rank/vec_rank and the component scores set: kw's
 * keyword, bm25 and kw_rank, vec's vector and vec_rank are taken; a
 * chunk in both is one hit); writes at most limit fused hits scoring >=
 * threshold to out.  Fused ties go to the smaller chunk number (callers
 * number chunks in the tie order first: kbi_search does, a segment's
 * numbers are that order).  With use_vec 0, vec is ignored and score =
 * keyword score, in kw's order.  Returns the number written (0 also when
 * out of memory).
 */
size_t		 kbi_fuse(const struct kbi_hit *kw, size_t nkw,
		    const struct kbi_hit *vec, size_t nvec, int use_vec,
		    size_t limit, double threshold, struct kbi_hit *out);

#endif
