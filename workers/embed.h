/*
 * The embedder: text to vectors through the OpenAI-compatible
 * POST {url}/embeddings (OpenAI, llama.cpp's server, Ollama, vLLM), as
 * the parleyd.conf "embedder NAME { ... }" block configures it.
 *
 * embed_async runs on the worker's event loop (libcurl's multi interface
 * through curlev.c), embed_sync blocks, for the index's build thread.
 * Either splits the texts into requests of at most EMBED_BATCH_MAX
 * inputs and EMBED_BODY_MAX bytes of body, sent one after the other, and
 * gives the vectors back in the texts' order.  Each request is bounded
 * by the block's timeout (start to end) and its reply by max-reply (64m).
 */
#ifndef PARLEY_WORKERS_EMBED_H
#define PARLEY_WORKERS_EMBED_H

#include <stddef.h>

struct config;
struct cfg_provider;
struct wk;
struct embed_req;

#define EMBED_BATCH_MAX	64		/* inputs of one request */
#define EMBED_BODY_MAX	(512u << 10)	/* bytes of one request's body */
#define EMBED_TEXTS_MAX	1000000		/* texts of one call */
#define EMBED_VECS_MAX	((size_t)1 << 30)	/* bytes of one call's vectors */

/* 1 when an embedder is configured. */
int	embed_enabled(const struct config *);

/*
 * Asks for the vectors of n texts (texts[i] of lens[i] bytes, copied
 * before it returns; not NUL-terminated; invalid UTF-8 is sent as
 * U+FFFD, an empty text as one space, since the API refuses empty
 * inputs).  done(arg, 0, NULL, vecs, dim): vecs is n*dim floats the
 * callee owns until done returns (copy what you keep); n 0 gives vecs
 * NULL and dim 0.  done(arg, -1, "message", NULL, 0) on any failure (an
 * HTTP status with the server's message, a timeout, bad JSON, a count or
 * dim mismatch, a text too large for one request).  Never calls done
 * before returning.  NULL (done not called) when no embedder or out of
 * memory.
 */
typedef void	(*embed_done_fn)(void *arg, int err, const char *msg,
		    const float *vecs, unsigned dim);
struct embed_req *embed_async(struct wk *, const char *const *texts,
		    const size_t *lens, size_t n, embed_done_fn, void *arg);
/* Stops a request and frees it; done is not called.  Not after done. */
void	embed_cancel(struct embed_req *);

/*
 * Blocking, for a thread (its own curl easy handle, no shared state;
 * curl_global_init must have run, as the worker does at start): 0 and
 * *vecs (malloc'd n*dim floats, NULL when n is 0) and *dim, or -1 with
 * a message in err.
 */
int	embed_sync(const struct cfg_provider *, const char *const *texts,
	    const size_t *lens, size_t n, float **vecs, unsigned *dim,
	    char *err, size_t errlen);

#endif
