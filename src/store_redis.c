/* Placeholder until the Redis backend lands: refuses to open. */
#include <errno.h>
#include <stdio.h>

#include "parley/store.h"

static struct store *
redis_open(const char *url, const char *state_dir, enum store_fsync fs,
    char *err, size_t errlen)
{
	(void)url; (void)state_dir; (void)fs;
	snprintf(err, errlen, "store: the redis store is not built yet");
	errno = ENOTSUP;
	return NULL;
}

const struct store_ops store_redis_ops = { .scheme = "redis",
    .open = redis_open };
const struct store_ops store_sentinel_ops = { .scheme = "sentinel",
    .open = redis_open };
