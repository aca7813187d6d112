/*
 * The host's directory index.  This first version only answers searches
 * with nothing (no segment yet); the builder, the watcher and the HTTP
 * endpoints follow.
 */
#include <stddef.h>

#include "index.h"
#include "wk.h"

size_t
index_search(struct wk *wk, const struct kbi_query *q, struct kbi_hit *out,
    struct kbi_chunk_info *info)
{
	(void)wk;
	(void)q;
	(void)out;
	(void)info;
	return 0;
}
