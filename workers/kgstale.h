/*
 * Staleness of a project's knowledge (parley-knowledge(7)): the owner of a
 * project compares each live file understanding's recorded hash with the
 * host's directory index (index.h), which the index's watcher keeps
 * current, and logs knowledge_stale for a file that changed since.
 */
#ifndef PARLEY_WORKERS_KGSTALE_H
#define PARLEY_WORKERS_KGSTALE_H

#include <stdint.h>

#include <cjson/cJSON.h>

struct wk;
struct kg;

/*
 * A number that changes whenever the host's index does (a new segment, a
 * watched change applied); 0 when there is no index.  The owner checks
 * again when it moved, and after each batch it folds.
 */
uint64_t	 kgstale_generation(struct wk *);
/*
 * The knowledge_stale bodies to log now (a cJSON array, the caller's; NULL
 * when none): one per live file understanding whose path the index holds
 * with a hash other than the recorded one, unless it is already stale at
 * that hash.  Each body: {"path","hash","was","entities":[{"kind","name"}]}
 * (kg_refs of the path); the caller adds "hlc" and "origin" and logs it.
 */
cJSON		*kgstale_check(struct wk *, const struct kg *g);

#endif
