/*
 * What the local store's unit tests share (test_store.c,
 * test_store_seglog.c): the sources under test, a scratch state directory
 * and helpers that fill, read back and poke at sessions on disk.
 */
#ifndef PARLEY_STORE_LOCAL_FIXTURE_H
#define PARLEY_STORE_LOCAL_FIXTURE_H
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <check.h>
#include <dirent.h>
#include <event2/event.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../src/store.c"
#include "../../src/store_local.c"
#include "../../src/store_local_meta.c"
#include "../../src/store_local_v1.c"
#include "../../src/store_local_seg.c"
#include "../../src/store_local_ix.c"
#include "../../src/store_seg.c"
#include "../../src/store_local_sync.c"
#include "../../src/store_local_doc.c"
#include "../../src/store_local_run.c"
#include "check_main.h"

static char	 tdir[64];

static inline void
setup(void)
{
	snprintf(tdir, sizeof(tdir), "/tmp/test_store.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
}

static inline void
teardown(void)
{
	check_rmtree(tdir);
}

static inline struct store *
open_store(enum store_fsync fs)
{
	char		 err[256];
	struct store	*st;

	st = store_open("local", tdir, fs, err, sizeof(err));
	ck_assert_msg(st != NULL, "store_open: %s", err);
	return st;
}

static inline void
path_of(char *buf, size_t len, const char *id, const char *file)
{
	snprintf(buf, len, "%s/sessions/%s/%s", tdir, id, file);
}

static inline off_t
file_size(const char *id, const char *file)
{
	char		 p[512];
	struct stat	 sb;

	path_of(p, sizeof(p), id, file);
	if (stat(p, &sb) == -1)
		return -1;
	return sb.st_size;
}

static inline void
raw_append(const char *id, const char *bytes, size_t len)
{
	char	 p[512];
	int	 fd;

	path_of(p, sizeof(p), id, "log");
	fd = open(p, O_WRONLY | O_APPEND);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
	close(fd);
}

static inline void
raw_truncate(const char *id, off_t len)
{
	char	 p[512];

	path_of(p, sizeof(p), id, "log");
	ck_assert_int_eq(truncate(p, len), 0);
}

/* Appends seqs first..last with ts = 1000 * seq and json {"n":seq}. */
static inline void
fill(struct store_sess *s, uint64_t first, uint64_t last)
{
	char		 j[64];
	uint64_t	 q;
	int		 n;

	for (q = first; q <= last; q++) {
		n = snprintf(j, sizeof(j), "{\"n\":%" PRIu64 "}", q);
		ck_assert_int_eq(store_append(s, q, 1000 * q, j, (size_t)n),
		    0);
	}
}

struct collect {
	uint64_t	 seqs[256];
	uint64_t	 last;
	size_t		 n;
	size_t		 stop_after;	/* 0: never stop */
	int		 bad;
};

static inline int
collect_cb(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct collect	*c = arg;
	char		 want[64];
	int		 n;

	n = snprintf(want, sizeof(want), "{\"n\":%" PRIu64 "}", seq);
	if ((size_t)n != len || memcmp(want, json, len) != 0 ||
	    json[len] != '\0' || ts != 1000 * seq)
		c->bad = 1;
	if (c->n > 0 && c->last + 1 != seq)
		c->bad = 1;
	c->last = seq;
	if (c->n < sizeof(c->seqs) / sizeof(c->seqs[0]))
		c->seqs[c->n] = seq;
	c->n++;
	return c->stop_after != 0 && c->n >= c->stop_after;
}

static inline int
range_count(struct store_sess *s, uint64_t after, size_t limit,
    uint64_t *firstp)
{
	struct collect	 c;
	int		 r;

	memset(&c, 0, sizeof(c));
	r = store_range(s, after, limit, collect_cb, &c);
	ck_assert_int_eq(c.bad, 0);
	ck_assert_int_eq((size_t)r, c.n);
	if (firstp != NULL)
		*firstp = c.n > 0 ? c.seqs[0] : 0;
	return r;
}

static inline char *
meta_on_disk(const char *id)
{
	/* The newest valid slot, as a reader that is not the store. */
	unsigned char	 b[3][512];
	char		 p[512], *out = NULL;
	const char	*j;
	uint64_t	 gen, best = 0;
	uint32_t	 v;
	size_t		 len;
	ssize_t		 n;
	int		 i, fd;

	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/sessions/%s/meta.%d", tdir, id, i);
		if ((fd = open(p, O_RDONLY)) == -1)
			continue;
		n = read(fd, b[i], sizeof(b[i]));
		close(fd);
		if (n < 0 || seg_meta_decode(b[i], (size_t)n, &gen, &j, &len,
		    &v) == -1 || (out != NULL && gen <= best))
			continue;
		free(out);
		out = strndup(j, len);
		best = gen;
	}
	return out;
}

static inline void
write_file(const char *id, const char *file, const void *buf, size_t len)
{
	char	 p[512];
	int	 fd;

	path_of(p, sizeof(p), id, file);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static inline void
age(const char *id, const char *file, time_t when)
{
	char		 p[512];
	struct timespec	 ts[2];

	path_of(p, sizeof(p), id, file);
	ts[0].tv_sec = ts[1].tv_sec = when;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
}

#endif
