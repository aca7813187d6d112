/*
 * The host's directory index (STATE_DIR/index/): one kbseg segment built
 * from the files under the configured index roots, by a thread of the
 * worker that took the request, and searched by every worker through
 * mmap.
 */
#ifndef PARLEY_WORKERS_INDEX_H
#define PARLEY_WORKERS_INDEX_H

#include <stddef.h>

#include "parley/kbindex.h"

struct wk;

/* Searches the host's directory index (none built: 0).  out and info
 * have room for q->limit; info[i] describes out[i]'s chunk (pointers
 * valid until the next index_ call). */
size_t	index_search(struct wk *, const struct kbi_query *q,
	    struct kbi_hit *out, struct kbi_chunk_info *info);

#endif
