/*
 * What kb.c (documents, messages, loading) and kb_rag.c (queries,
 * retrieval in the turn, the tool) share of a session's knowledge base.
 */
#ifndef PARLEY_WORKERS_KB_INT_H
#define PARLEY_WORKERS_KB_INT_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>

#include "parley/kbindex.h"

struct sess;
struct event;
struct embed_req;
struct store_req;

enum kb_load { KB_UNLOADED, KB_LOADING, KB_READY, KB_FAILED };

/* A search's query on its way to a vector (kb_search, the tool, RAG). */
struct kb_q {
	struct kb_state		*kb;
	struct sess		*s;
	char			*text;
	size_t			 limit;
	double			 threshold;
	struct embed_req	*er;
	struct event		*timer;	/* the bound on the wait */
	void			(*done)(struct kb_q *, const float *vec,
				    unsigned dim, const char *note);
	void			(*drop)(struct kb_q *);	/* the session
					   leaves memory first: arg goes */
	void			*arg;
	uint64_t		 wait_ms;	/* 0: as long as the embedder */
	int			 parked;	/* waits for the documents */
	TAILQ_ENTRY(kb_q)	 entry;
};
TAILQ_HEAD(kb_qs, kb_q);

struct kb_op;
TAILQ_HEAD(kb_ops, kb_op);

struct kb_state {
	struct kbi		*idx;
	enum kb_load		 load;
	struct store_req	*lr;
	struct kbi		*building;
	size_t			 loaded;
	struct kb_ops		 ops;	/* queued and in flight */
	size_t			 pend_docs;	/* adds under way */
	size_t			 pend_bytes;
	size_t			 held_bytes;	/* content the ops hold */
	int			 in_own;
	int			 as_follower;	/* read while following */	/* inside the part's own hook */
	struct kb_qs		 qs;	/* queries waiting for a vector */
};

/* The session's state, made when absent (NULL out of memory). */
struct kb_state	*kb_state_of(struct sess *);
/* Reads the documents from the store (again, after a failure). */
void		 kb_load_start(struct sess *);
/*
 * Gets the query's vector when an embedder is configured (wait_ms > 0:
 * at most that long), then calls done(q, vec, dim, note) (note: why
 * there is no vector).  Returns 0 when done ran before returning, 1 when
 * it will, -1 out of memory (done not called).  drop may be NULL.
 * While the documents are being read, the query waits for them.
 */
int		 kb_q_start(struct sess *, const char *text, size_t limit,
		    double threshold, uint64_t wait_ms,
		    void (*done)(struct kb_q *, const float *, unsigned,
		    const char *), void (*drop)(struct kb_q *), void *arg);
/* Searches idx (NULL: none) as q asks, with vec when its dim fits. */
size_t		 kb_q_kb(const struct kbi *idx, const struct kb_q *q,
		    const float *vec, unsigned dim, struct kbi_hit *out);
/* The documents are read: the queries that waited for them go on. */
void		 kb_q_unpark(struct kb_state *);
/* The session leaves memory: every query goes, its owner dropped. */
void		 kb_q_drop_all(struct kb_state *);

#endif
