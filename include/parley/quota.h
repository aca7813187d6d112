/*
 * Fixed-window counters shared by the supervisor and its workers: the
 * table lives in an anonymous shared mapping made before the workers are
 * forked, so a bound (sessions created per address, per subject) holds
 * across every worker of the host, and survives a worker's restart and a
 * reload.  A fixed number of slots: when every slot a key may use holds
 * a live window, the oldest is reused (that key is forgotten early: the
 * bound errs towards letting through, never towards refusing).
 */
#ifndef PARLEY_QUOTA_H
#define PARLEY_QUOTA_H

#include <stddef.h>
#include <stdint.h>

struct quota;

/* One bound to check: key (NUL-terminated; "" skips it), at most limit
 * events per window (0: no bound). */
struct quota_key {
	const char	*key;
	unsigned	 limit;
};

/* A table of nslots counters, shared with processes forked after; NULL
 * with errno on failure. */
struct quota	*quota_new(size_t nslots);
void		 quota_free(struct quota *);
/*
 * Counts one event against every key, all or none: 0 counted, or -1 when
 * a key already had its limit in the current window of window_ms, with
 * *which the index of that key and *retry_ms until its window ends.  A
 * NULL table counts nothing and refuses nothing.
 */
int		 quota_take(struct quota *, const struct quota_key *, size_t n,
		    uint64_t window_ms, uint64_t now_ms, size_t *which,
		    uint64_t *retry_ms);

#endif
