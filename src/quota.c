/*
 * Fixed-window counters in shared memory (see parley/quota.h).  Keys are
 * hashed with a per-table random seed (a client cannot pick keys that
 * collide); a key probes QUOTA_PROBE slots from its hash.  One robust,
 * process-shared mutex guards the table: a worker killed while holding
 * it leaves it to the next process, which takes the counts as they are.
 */
#include <sys/mman.h>
#include <sys/random.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "parley/quota.h"

#define QUOTA_PROBE	8

struct quota_slot {
	uint64_t	hash;		/* 0: empty */
	uint64_t	start_ms;	/* the window began */
	uint32_t	count;
	uint32_t	pad;
};

struct quota {
	pthread_mutex_t		mu;
	uint64_t		seed;
	size_t			nslots;
	size_t			maplen;
	struct quota_slot	slots[];
};

struct quota *
quota_new(size_t nslots)
{
	pthread_mutexattr_t a;
	struct quota *q;
	size_t len;

	if (nslots < QUOTA_PROBE)
		nslots = QUOTA_PROBE;
	len = sizeof(*q) + nslots * sizeof(struct quota_slot);
	q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	    -1, 0);
	if (q == MAP_FAILED)
		return NULL;
	q->nslots = nslots;
	q->maplen = len;
	if (getrandom(&q->seed, sizeof(q->seed), 0) != sizeof(q->seed))
		q->seed = (uint64_t)(uintptr_t)q ^ 0x9e3779b97f4a7c15ULL;
	if (pthread_mutexattr_init(&a) != 0 ||
	    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) != 0 ||
	    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) != 0 ||
	    pthread_mutex_init(&q->mu, &a) != 0) {
		munmap(q, len);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutexattr_destroy(&a);
	return q;
}

void
quota_free(struct quota *q)
{
	if (q != NULL)
		munmap(q, q->maplen);
}

/* FNV-1a over the seed and the key; never 0 (0 marks an empty slot). */
static uint64_t
quota_hash(const struct quota *q, const char *key)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ q->seed;

	for (; *key != '\0'; key++) {
		h ^= (unsigned char)*key;
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 29;
	return h == 0 ? 1 : h;
}

/* The slot key uses now: its own, an empty or ended one, or the oldest. */
static struct quota_slot *
quota_slot(struct quota *q, uint64_t h, uint64_t window_ms, uint64_t now)
{
	struct quota_slot *sl, *empty = NULL, *old = NULL;
	size_t i;

	for (i = 0; i < QUOTA_PROBE; i++) {
		sl = &q->slots[(h + i) % q->nslots];
		if (sl->hash == h)
			return sl;
		if (empty == NULL && (sl->hash == 0 ||
		    sl->start_ms + window_ms <= now))
			empty = sl;
		if (old == NULL || sl->start_ms < old->start_ms)
			old = sl;
	}
	sl = empty != NULL ? empty : old;
	sl->hash = h;
	sl->start_ms = now;
	sl->count = 0;
	return sl;
}

int
quota_take(struct quota *q, const struct quota_key *keys, size_t n,
    uint64_t window_ms, uint64_t now_ms, size_t *which, uint64_t *retry_ms)
{
	struct quota_slot *sl[4];
	size_t i;
	int rc = 0;

	if (q == NULL || n > sizeof(sl) / sizeof(sl[0]))
		return 0;
	if (pthread_mutex_lock(&q->mu) == EOWNERDEAD)
		pthread_mutex_consistent(&q->mu);
	for (i = 0; i < n; i++) {
		sl[i] = NULL;
		if (keys[i].limit == 0 || keys[i].key == NULL ||
		    keys[i].key[0] == '\0')
			continue;
		sl[i] = quota_slot(q, quota_hash(q, keys[i].key), window_ms,
		    now_ms);
		if (sl[i]->start_ms + window_ms <= now_ms) {
			sl[i]->start_ms = now_ms;
			sl[i]->count = 0;
		}
		if (sl[i]->count >= keys[i].limit && rc == 0) {
			*which = i;
			*retry_ms = sl[i]->start_ms + window_ms - now_ms;
			rc = -1;
		}
	}
	for (i = 0; rc == 0 && i < n; i++)
		if (sl[i] != NULL)
			sl[i]->count++;
	pthread_mutex_unlock(&q->mu);
	return rc;
}
