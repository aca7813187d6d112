/*
 * The host's directory index (STATE_DIR/index/): one kbseg segment built
 * from the files under the configured index roots, by a thread of the
 * worker that took the request, and searched by every worker through
 * mmap.
 */
#ifndef PARLEY_WORKERS_INDEX_H
#define PARLEY_WORKERS_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "parley/kbindex.h"

struct wk;
struct conn;
struct sess;
struct sess_from;
struct sess_result;
struct sess_part;
struct proto_in;

/* Searches the host's directory index (none built: 0).  out and info
 * have room for q->limit; info[i] describes out[i]'s chunk (pointers
 * valid until the next index_ call). */
size_t	index_search(struct wk *, const struct kbi_query *q,
	    struct kbi_hit *out, struct kbi_chunk_info *info);

/* Keeps a session in memory while the build it asked for runs. */
extern const struct sess_part index_part;

/* 1 when the host has an index with at least one chunk (kb.c: whether
 * retrieval and the kb_search tool have something to search). */
int	index_present(struct wk *);

/*
 * POST /api/index, GET /api/index/status, POST /api/search and DELETE
 * /api/index (route.c): 1 when c's request was one of them (answered),
 * 0 when it is not the index's.
 */
int	index_http(struct conn *c);
/*
 * A session's "index" message {path, include?, exclude?} (input.c): a
 * build of path starts on a thread of this worker and the session logs
 * index_start, index_progress (one per 500 ms at most) and index_done;
 * r says 202, or the error (403 outside the index roots, 409 while
 * another build runs).
 */
void	index_input(struct sess *, const struct sess_from *,
	    const struct proto_in *, struct sess_result *r);
/*
 * A number that moves whenever the host's segment does (a build or the
 * watcher wrote a new one, or it was deleted); 0 while there is none.
 * Cheap: the segment is stat'ed at most every 200 ms.
 */
uint64_t index_generation(struct wk *);
/*
 * The SHA-256 (64 lowercase hex digits, what sha256sum prints) the index
 * holds for path: relative to an index root (each index-root tried in
 * parleyd.conf's order, the first whose directory holds it wins) or
 * absolute.  1 with hex; -1 with hex "": the file was removed (its path
 * lies in a directory the index holds and is gone from disk); 0: not
 * judged (no index, not indexed, binary, outside the indexed
 * directories).
 */
int	index_file_hash(struct wk *, const char *path, char hex[65]);

/* The worker starts: the watcher's and the re-runs' timer (worker.c). */
void	index_init(struct wk *);
/* The worker exits: a running build is stopped (re-run by the next). */
void	index_free(struct wk *);

#endif
