/*
 * Unit tests for the store interface and its local backend.
 */
#include "store_local_fixture.h"

START_TEST(test_valid_id)
{
	char	 id[200];

	ck_assert_int_eq(store_valid_id("s1"), 1);
	ck_assert_int_eq(store_valid_id("A-z_0.9:x"), 1);
	ck_assert_int_eq(store_valid_id("a.."), 1);
	ck_assert_int_eq(store_valid_id(""), 0);
	ck_assert_int_eq(store_valid_id(NULL), 0);
	ck_assert_int_eq(store_valid_id("."), 0);
	ck_assert_int_eq(store_valid_id(".."), 0);
	ck_assert_int_eq(store_valid_id(".hidden"), 0);
	ck_assert_int_eq(store_valid_id("../etc"), 0);
	ck_assert_int_eq(store_valid_id("a/b"), 0);
	ck_assert_int_eq(store_valid_id("a b"), 0);
	ck_assert_int_eq(store_valid_id("a\nb"), 0);
	ck_assert_int_eq(store_valid_id("caf\xc3\xa9"), 0);
	memset(id, 'x', 128);
	id[128] = '\0';
	ck_assert_int_eq(store_valid_id(id), 1);
	id[128] = 'x';
	id[129] = '\0';
	ck_assert_int_eq(store_valid_id(id), 0);
}
END_TEST

START_TEST(test_bad_ids_refused)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	static const char *const bad[] = { "", ".", "..", "../x", "a/b",
	    "/abs", "x y", ".x" };
	size_t			 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_int_eq(store_sess_open(st, bad[i], 1, &s), -1);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_ptr_null(s);
		ck_assert_int_eq(store_exists(st, bad[i]), 0);
		errno = 0;
		ck_assert_ptr_null(store_meta_peek(st, bad[i]));
		ck_assert_int_eq(errno, EINVAL);
	}
	store_close(st);
}
END_TEST

START_TEST(test_open_errors)
{
	char			 err[256], p[512];
	struct store		*st;
	struct store_sess	*s, *s2;

	err[0] = '\0';
	ck_assert_ptr_null(store_open("redis://x", tdir, STORE_FSYNC_NO, err,
	    sizeof(err)));
	ck_assert_int_ne(err[0], '\0');
	ck_assert_ptr_null(store_open("locally", tdir, STORE_FSYNC_NO, err,
	    sizeof(err)));

	/* mkdir -p of a nested state dir */
	snprintf(p, sizeof(p), "%s/a/b//c/", tdir);
	st = store_open("local", p, STORE_FSYNC_NO, err, sizeof(err));
	ck_assert_msg(st != NULL, "%s", err);
	ck_assert_int_eq(store_exists(st, "s1"), 0);
	errno = 0;
	ck_assert_int_eq(store_sess_open(st, "s1", 0, &s), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(store_sess_open(st, "s1", 1, &s), 0);
	ck_assert_int_eq(store_exists(st, "s1"), 1);
	ck_assert_str_eq(store_sess_id(s), "s1");
	ck_assert_ptr_eq(store_sess_find(st, "s1"), s);
	ck_assert_uint_eq(store_last_seq(s), 0);
	ck_assert_uint_eq(store_first_seq(s), 1);
	errno = 0;
	ck_assert_int_eq(store_sess_open(st, "s1", 1, &s2), -1);
	ck_assert_int_eq(errno, EBUSY);
	store_sess_close(s);
	ck_assert_ptr_null(store_sess_find(st, "s1"));
	ck_assert_int_eq(store_sess_open(st, "s1", 0, &s), 0);
	store_close(st);	/* closes s */

	/* a state dir that is a file */
	snprintf(p, sizeof(p), "%s/file", tdir);
	close(open(p, O_WRONLY | O_CREAT, 0600));
	ck_assert_ptr_null(store_open("local", p, STORE_FSYNC_NO, err,
	    sizeof(err)));
}
END_TEST

START_TEST(test_round_trip)
{
	struct store		*st = open_store(STORE_FSYNC_BATCH);
	struct store_sess	*s;
	uint64_t		 first;
	char			 p[512], line[64];
	FILE			*f;

	/* In the segments, and (retained) in a v1 log. */
	ck_assert_int_eq(store_sess_open(st, "rt", 1, &s), 0);
	fill(s, 1, 100);
	ck_assert_uint_eq(store_last_seq(s), 100);
	ck_assert_uint_eq(store_first_seq(s), 1);
	ck_assert_int_eq(range_count(s, 0, 0, &first), 100);
	ck_assert_uint_eq(first, 1);
	ck_assert_int_eq(file_size("rt", "log"), -1);
	ck_assert_int_eq(store_sess_open(st, "kg:rt", 1, &s), 0);
	fill(s, 1, 100);
	ck_assert_int_eq(range_count(s, 0, 0, &first), 100);
	store_sync(st);

	/* the documented on-disk format */
	path_of(p, sizeof(p), "kg:rt", "log");
	f = fopen(p, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_str_eq(line, "1 1000 {\"n\":1}\n");
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_str_eq(line, "2 2000 {\"n\":2}\n");
	fclose(f);
	store_close(st);
}
END_TEST

START_TEST(test_range_limits)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	struct collect		 c;
	uint64_t		 first, after;
	int			 r;

	ck_assert_int_eq(store_sess_open(st, "rl", 1, &s), 0);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), 0);
	fill(s, 1, 50);
	for (after = 0; after <= 52; after++) {
		r = range_count(s, after, 0, &first);
		ck_assert_int_eq(r, after >= 50 ? 0 : (int)(50 - after));
		if (r > 0)
			ck_assert_uint_eq(first, after + 1);
		r = range_count(s, after, 7, &first);
		ck_assert_int_eq(r, after >= 50 ? 0 :
		    (int)(50 - after < 7 ? 50 - after : 7));
	}
	ck_assert_int_eq(range_count(s, UINT64_MAX, 0, NULL), 0);

	/* cb stops: the stopping record counts */
	memset(&c, 0, sizeof(c));
	c.stop_after = 3;
	ck_assert_int_eq(store_range(s, 10, 0, collect_cb, &c), 3);
	ck_assert_uint_eq(c.seqs[0], 11);
	ck_assert_uint_eq(c.seqs[2], 13);
	ck_assert_int_eq(store_range(s, 0, 0, NULL, NULL), -1);
	store_close(st);
}
END_TEST

START_TEST(test_fencing)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	char			*big;

	ck_assert_int_eq(store_sess_open(st, "f", 1, &s), 0);
	errno = 0;
	ck_assert_int_eq(store_append(s, 0, 1, "{}", 2), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(store_append(s, 2, 1, "{}", 2), -1);
	fill(s, 1, 5);
	errno = 0;
	ck_assert_int_eq(store_append(s, 5, 1, "{}", 2), -1);	/* dup */
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(store_append(s, 4, 1, "{}", 2), -1);
	ck_assert_int_eq(store_append(s, 7, 1, "{}", 2), -1);
	ck_assert_int_eq(store_append(s, UINT64_MAX, 1, "{}", 2), -1);
	/* bad json text */
	ck_assert_int_eq(store_append(s, 6, 1, "{\n}", 3), -1);
	ck_assert_int_eq(store_append(s, 6, 1, "{\r}", 3), -1);
	ck_assert_int_eq(store_append(s, 6, 1, "{\0}", 3), -1);
	ck_assert_int_eq(store_append(s, 6, 1, "", 0), -1);
	ck_assert_int_eq(store_append(s, 6, 1, NULL, 2), -1);
	big = malloc(STORE_JSON_MAX + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', STORE_JSON_MAX + 1);
	errno = 0;
	ck_assert_int_eq(store_append(s, 6, 1, big, STORE_JSON_MAX + 1), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	free(big);
	ck_assert_uint_eq(store_last_seq(s), 5);
	ck_assert_int_eq(file_size("f", "index"), 64 + 5 * 40);
	fill(s, 6, 6);
	store_close(st);
}
END_TEST

START_TEST(test_reopen_index)
{
	struct store		*st = open_store(STORE_FSYNC_BATCH);
	struct store_sess	*s;
	uint64_t		 first;
	char			*big;
	int			 i;

	ck_assert_int_eq(store_sess_open(st, "ro", 1, &s), 0);
	fill(s, 1, 2000);
	store_close(st);

	st = open_store(STORE_FSYNC_BATCH);
	ck_assert_int_eq(store_exists(st, "ro"), 1);
	ck_assert_int_eq(store_sess_open(st, "ro", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 2000);
	ck_assert_uint_eq(store_first_seq(s), 1);
	ck_assert_int_eq(range_count(s, 1500, 10, &first), 10);
	ck_assert_uint_eq(first, 1501);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), 2000);
	fill(s, 2001, 2010);
	store_sess_close(s);

	/* records larger than a read block, across reopen */
	ck_assert_int_eq(store_sess_open(st, "big", 1, &s), 0);
	big = malloc(LOCAL_BLOCK * 3);
	ck_assert_ptr_nonnull(big);
	memset(big, 'y', LOCAL_BLOCK * 3);
	for (i = 1; i <= 4; i++)
		ck_assert_int_eq(store_append(s, (uint64_t)i, 1,
		    big, LOCAL_BLOCK * 3 - (size_t)i), 0);
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "big", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 4);
	ck_assert_int_eq(file_size("big", "index"), 64 + 4 * 40);
	free(big);
	store_close(st);
}
END_TEST

static int
size_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	(void)ts;
	(void)json;
	if (len != LOCAL_BLOCK * 3 - seq)
		*(int *)arg = 1;
	return 0;
}

START_TEST(test_big_range)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	char			*big;
	int			 i, bad = 0;

	ck_assert_int_eq(store_sess_open(st, "big", 1, &s), 0);
	big = malloc(LOCAL_BLOCK * 3);
	ck_assert_ptr_nonnull(big);
	memset(big, 'y', LOCAL_BLOCK * 3);
	for (i = 1; i <= 4; i++)
		ck_assert_int_eq(store_append(s, (uint64_t)i, 1,
		    big, LOCAL_BLOCK * 3 - (size_t)i), 0);
	ck_assert_int_eq(store_range(s, 0, 0, size_cb, &bad), 4);
	ck_assert_int_eq(bad, 0);
	ck_assert_int_eq(store_range(s, 2, 0, size_cb, &bad), 2);
	ck_assert_int_eq(bad, 0);
	free(big);
	store_close(st);
}
END_TEST

/* Writes 5 good records to session id, closes, appends tail, reopens. */
static struct store_sess *
torn_case(struct store **stp, const char *id, const char *tail,
    uint64_t want_last)
{
	struct store		*st = open_store(STORE_FSYNC_ALWAYS);
	struct store_sess	*s;

	ck_assert_int_eq(store_sess_open(st, id, 1, &s), 0);
	fill(s, 1, 5);
	store_sess_close(s);
	raw_append(id, tail, strlen(tail));
	ck_assert_int_eq(store_sess_open(st, id, 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), want_last);
	*stp = st;
	return s;
}

START_TEST(test_torn_tail)
{
	static const struct {
		const char	*tail;
		uint64_t	 last;
	} cases[] = {
		{ "6 6000 {\"n\"", 5 },			/* half a line */
		{ "6", 5 },
		{ "garbage\n", 5 },
		{ "\n", 5 },
		{ "6 6000 \n", 5 },			/* empty json */
		{ "6 6000\n", 5 },
		{ "6  6000 {}\n", 5 },
		{ "x6 6000 {}\n", 5 },
		{ "7 7000 {\"n\":7}\n", 5 },		/* gap */
		{ "5 5000 {\"n\":5}\n", 5 },		/* dup */
		{ "99999999999999999999999 1 {}\n", 5 },	/* overflow */
		{ "6 6000 {\"n\":6}\n7 7000 {\"n\":7}\nxx", 7 },
		{ "6 6000 {\"n\":6}\n8 8000 {\"n\":8}\n9 9000 {}\n", 6 },
	};
	struct store		*st;
	struct store_sess	*s;
	char			 id[16];
	size_t			 i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* v1 logs: retained sessions keep them. */
		snprintf(id, sizeof(id), "kg:t%zu", i);
		s = torn_case(&st, id, cases[i].tail, cases[i].last);
		ck_assert_int_eq(file_size(id, "log"),
		    (off_t)(cases[i].last * 15));
		ck_assert_int_eq(range_count(s, 0, 0, NULL),
		    (int)cases[i].last);
		/* appends continue from the repaired log */
		fill(s, cases[i].last + 1, cases[i].last + 2);
		store_sess_close(s);
		ck_assert_int_eq(store_sess_open(st, id, 0, &s), 0);
		ck_assert_uint_eq(store_last_seq(s), cases[i].last + 2);
		ck_assert_int_eq(range_count(s, 0, 0, NULL),
		    (int)cases[i].last + 2);
		store_close(st);
	}
}
END_TEST

/* A SIGKILL can cut the last write at any byte. */
START_TEST(test_torn_every_byte)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	off_t			 full, cut;

	ck_assert_int_eq(store_sess_open(st, "kg:cut", 1, &s), 0);
	fill(s, 1, 3);
	ck_assert_int_eq(store_append(s, 4, 4000, "{\"n\":4}", 7), 0);
	store_sess_close(s);
	full = file_size("kg:cut", "log");
	ck_assert_int_eq(full, 60);
	for (cut = full; cut >= 45; cut--) {
		raw_truncate("kg:cut", cut);
		ck_assert_int_eq(store_sess_open(st, "kg:cut", 0, &s), 0);
		ck_assert_uint_eq(store_last_seq(s), cut == full ? 4 : 3);
		ck_assert_int_eq(file_size("kg:cut", "log"),
		    cut == full ? full : 45);
		store_sess_close(s);
		/* restore for the next cut */
		if (cut != full) {
			ck_assert_int_eq(store_sess_open(st, "kg:cut", 0, &s), 0);
			fill(s, 4, 4);
			store_sess_close(s);
		}
	}
	/* the first record torn: empty log */
	raw_truncate("kg:cut", 7);
	ck_assert_int_eq(store_sess_open(st, "kg:cut", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 0);
	ck_assert_uint_eq(store_first_seq(s), 1);
	ck_assert_int_eq(file_size("kg:cut", "log"), 0);
	store_close(st);
}
END_TEST

START_TEST(test_meta)
{
	struct store		*st = open_store(STORE_FSYNC_ALWAYS);
	struct store_sess	*s;
	char			*m, p[512];
	struct stat		 sb;

	ck_assert_int_eq(store_sess_open(st, "m", 1, &s), 0);
	errno = 0;
	ck_assert_ptr_null(store_meta_read(s));
	ck_assert_int_eq(errno, ENOENT);
	errno = 0;
	ck_assert_ptr_null(store_meta_peek(st, "m"));
	ck_assert_int_eq(errno, ENOENT);
	errno = 0;
	ck_assert_ptr_null(store_meta_peek(st, "nosuch"));
	ck_assert_int_eq(errno, ENOENT);

	ck_assert_int_eq(store_meta_write(s, "{\"a\":1}", 7), 0);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "{\"a\":1}");
	free(m);
	ck_assert_int_eq(store_meta_write(s, "{\"b\":\n2}", 8), 0);
	m = store_meta_peek(st, "m");
	ck_assert_str_eq(m, "{\"b\":\n2}");
	free(m);
	ck_assert_int_eq(store_meta_write(s, "", 0), 0);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "");
	free(m);
	ck_assert_int_eq(store_meta_write(s, "{\0}", 3), -1);
	ck_assert_int_eq(store_meta_write(s, "{}", STORE_META_MAX + 1), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	path_of(p, sizeof(p), "m", "meta.tmp");
	ck_assert_int_eq(stat(p, &sb), -1);

	/* a leftover meta.tmp from a crash is ignored and cleaned */
	ck_assert_int_eq(store_meta_write(s, "{\"c\":3}", 7), 0);
	store_sess_close(s);
	close(open(p, O_WRONLY | O_CREAT, 0600));
	m = store_meta_peek(st, "m");
	ck_assert_str_eq(m, "{\"c\":3}");
	free(m);
	ck_assert_int_eq(store_sess_open(st, "m", 0, &s), 0);
	ck_assert_int_eq(stat(p, &sb), -1);
	store_close(st);

	/* a session with only meta exists */
	st = open_store(STORE_FSYNC_ALWAYS);
	path_of(p, sizeof(p), "m", "index");
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(store_exists(st, "m"), 1);
	ck_assert_int_eq(store_sess_open(st, "m", 0, &s), 0);
	store_close(st);
}
END_TEST

START_TEST(test_trim)
{
	struct store		*st = open_store(STORE_FSYNC_ALWAYS);
	struct store_sess	*s;
	uint64_t		 first;
	char			 p[512];
	struct stat		 sb;

	ck_assert_int_eq(store_sess_open(st, "tr", 1, &s), 0);
	ck_assert_int_eq(store_trim(s, UINT64_MAX), 0);	/* empty */
	fill(s, 1, 100);
	ck_assert_int_eq(store_trim(s, 0), 0);
	ck_assert_int_eq(store_trim(s, 1000), 0);	/* ts 1000 kept */
	ck_assert_int_eq(store_trim(s, 30500), 30);
	ck_assert_uint_eq(store_first_seq(s), 31);
	ck_assert_uint_eq(store_last_seq(s), 100);
	ck_assert_int_eq(range_count(s, 0, 0, &first), 70);
	ck_assert_uint_eq(first, 31);
	ck_assert_int_eq(range_count(s, 30, 0, &first), 70);
	ck_assert_int_eq(range_count(s, 31, 5, &first), 5);
	ck_assert_uint_eq(first, 32);
	ck_assert_int_eq(range_count(s, 99, 0, &first), 1);
	ck_assert_uint_eq(first, 100);
	fill(s, 101, 105);
	path_of(p, sizeof(p), "tr", "index.tmp");
	ck_assert_int_eq(stat(p, &sb), -1);
	store_sess_close(s);

	ck_assert_int_eq(store_sess_open(st, "tr", 0, &s), 0);
	ck_assert_uint_eq(store_first_seq(s), 31);
	ck_assert_uint_eq(store_last_seq(s), 105);
	/* everything old: the newest survives */
	ck_assert_int_eq(store_trim(s, UINT64_MAX), 74);
	ck_assert_uint_eq(store_first_seq(s), 105);
	ck_assert_uint_eq(store_last_seq(s), 105);
	ck_assert_int_eq(range_count(s, 0, 0, &first), 1);
	ck_assert_uint_eq(first, 105);
	ck_assert_int_eq(store_trim(s, UINT64_MAX), 0);
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "tr", 0, &s), 0);
	ck_assert_uint_eq(store_first_seq(s), 105);
	ck_assert_int_eq(file_size("tr", "index"), 64 + 40);
	fill(s, 106, 106);
	store_close(st);
}
END_TEST


static ino_t
inode_of(const char *id, const char *file)
{
	char		 p[512];
	struct stat	 sb;

	path_of(p, sizeof(p), id, file);
	if (stat(p, &sb) == -1)
		return 0;
	return sb.st_ino;
}

/* Two slots, in place: no inode per write, a torn slot never read. */
START_TEST(test_meta_slots)
{
	struct store		*st = open_store(STORE_FSYNC_ALWAYS);
	struct store_sess	*s;
	char			*m, j[32];
	ino_t			 i0, i1;
	off_t			 size;
	int			 k;

	ck_assert_int_eq(store_sess_open(st, "ms", 1, &s), 0);
	ck_assert_int_eq(store_meta_write(s, "{\"k\":1}", 7), 0);
	ck_assert_int_eq(store_meta_write(s, "{\"k\":2}", 7), 0);
	i0 = inode_of("ms", "meta.0");
	i1 = inode_of("ms", "meta.1");
	ck_assert(i0 != 0 && i1 != 0);
	for (k = 3; k <= 40; k++) {
		snprintf(j, sizeof(j), "{\"k\":%d}", k);
		ck_assert_int_eq(store_meta_write(s, j, strlen(j)), 0);
	}
	ck_assert(inode_of("ms", "meta.0") == i0);
	ck_assert(inode_of("ms", "meta.1") == i1);
	ck_assert_int_eq(file_size("ms", "meta"), -1);
	ck_assert_int_eq(file_size("ms", "meta.tmp"), -1);
	/* 40 went to meta.1: tear it, meta.0 (39) answers. */
	size = file_size("ms", "meta.1");
	{
		char p[512];

		path_of(p, sizeof(p), "ms", "meta.1");
		ck_assert_int_eq(truncate(p, size - 1), 0);
	}
	m = store_meta_peek(st, "ms");
	ck_assert_str_eq(m, "{\"k\":39}");
	free(m);
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "ms", 0, &s), 0);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "{\"k\":39}");
	free(m);
	/* The next write replaces the torn slot, not the good one. */
	ck_assert_int_eq(store_meta_write(s, "{\"k\":41}", 8), 0);
	m = meta_on_disk("ms");
	ck_assert_str_eq(m, "{\"k\":41}");
	free(m);
	/* A shorter text than the slot held: no stale bytes read back. */
	ck_assert_int_eq(store_meta_write(s, "{}", 2), 0);
	ck_assert_int_eq(store_meta_write(s, "[]", 2), 0);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "[]");
	free(m);
	ck_assert_int_eq(file_size("ms", "meta.0"), SEG_META_HDR + 2);
	/* Both slots torn: no meta, said, not garbage. */
	write_file("ms", "meta.0", "PARLEYMT", 8);
	write_file("ms", "meta.1", "junk", 4);
	errno = 0;
	ck_assert_ptr_null(store_meta_read(s));
	ck_assert_int_eq(errno, ENOENT);
	store_close(st);
}
END_TEST

/* A state directory of the v1 format: its meta file is read, then
 * replaced by slots; a slot of an unknown version is refused. */
START_TEST(test_meta_upgrade)
{
	struct store		*st = open_store(STORE_FSYNC_ALWAYS);
	struct store_sess	*s;
	unsigned char		 b[SEG_META_HDR + 2];
	char			 p[512], *m;
	uint32_t		 c;

	snprintf(p, sizeof(p), "%s/sessions/old", tdir);
	ck_assert_int_eq(mkdir(p, 0750), 0);
	write_file("old", "meta", "{\"v1\":true}", 11);
	ck_assert_int_eq(store_exists(st, "old"), 1);
	m = store_meta_peek(st, "old");
	ck_assert_str_eq(m, "{\"v1\":true}");
	free(m);
	ck_assert_int_eq(store_sess_open(st, "old", 0, &s), 0);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "{\"v1\":true}");
	free(m);
	ck_assert_int_eq(store_meta_write(s, "{\"v\":2}", 7), 0);
	ck_assert_int_eq(file_size("old", "meta"), -1);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "{\"v\":2}");
	free(m);
	store_sess_close(s);

	/* A slot written by a later format version. */
	seg_meta_encode(b, 9, "{}", 2);
	memcpy(b + SEG_META_HDR, "{}", 2);
	b[20] = 7;
	c = seg_crc32c(seg_crc32c(0, b + 8, 20), "{}", 2);
	b[28] = (unsigned char)c;
	b[29] = (unsigned char)(c >> 8);
	b[30] = (unsigned char)(c >> 16);
	b[31] = (unsigned char)(c >> 24);
	write_file("old", "meta.1", b, sizeof(b));
	errno = 0;
	ck_assert_ptr_null(store_meta_peek(st, "old"));
	ck_assert_int_eq(errno, EPROTONOSUPPORT);
	store_close(st);
}
END_TEST

START_TEST(test_expire)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s, *b;
	time_t			 old = time(NULL) - 3600;
	uint64_t		 cutoff = (uint64_t)(time(NULL) - 60) * 1000;
	char			 p[512];
	int			 fd;

	ck_assert_int_eq(store_sess_open(st, "a", 1, &s), 0);
	fill(s, 1, 3);
	ck_assert_int_eq(store_meta_write(s, "{}", 2), 0);
	store_sess_close(s);
	age("a", "index", old);
	age("a", "meta.0", old);

	ck_assert_int_eq(store_sess_open(st, "b", 1, &b), 0);	/* open */
	fill(b, 1, 3);
	age("b", "index", old);

	ck_assert_int_eq(store_sess_open(st, "c", 1, &s), 0);	/* fresh */
	fill(s, 1, 3);
	ck_assert_int_eq(store_meta_write(s, "{}", 2), 0);
	store_sess_close(s);

	ck_assert_int_eq(store_sess_open(st, "d", 1, &s), 0);	/* meta new */
	fill(s, 1, 3);
	ck_assert_int_eq(store_meta_write(s, "{}", 2), 0);
	store_sess_close(s);
	age("d", "index", old);

	ck_assert_int_eq(store_sess_open(st, "e", 1, &s), 0);	/* locked */
	store_sess_close(s);
	age("e", "index", old);
	path_of(p, sizeof(p), "e", "index");
	fd = open(p, O_RDWR);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);

	/* a project's knowledge: never expired, never trimmed */
	ck_assert_int_eq(store_sess_open(st, "kg:p", 1, &s), 0);
	fill(s, 1, 3);
	ck_assert_int_eq(store_meta_write(s, "{}", 2), 0);
	ck_assert_int_eq(store_trim(s, UINT64_MAX), 0);
	ck_assert_uint_eq(store_first_seq(s), 1);
	store_sess_close(s);
	age("kg:p", "log", old);
	age("kg:p", "meta.0", old);

	snprintf(p, sizeof(p), "%s/sessions/.junk", tdir);
	ck_assert_int_eq(mkdir(p, 0700), 0);

	ck_assert_int_eq(store_expire(st, cutoff), 1);
	ck_assert_int_eq(store_exists(st, "a"), 0);
	snprintf(p, sizeof(p), "%s/sessions/a", tdir);
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_int_eq(store_exists(st, "b"), 1);
	ck_assert_int_eq(store_exists(st, "c"), 1);
	ck_assert_int_eq(store_exists(st, "d"), 1);
	ck_assert_int_eq(store_exists(st, "e"), 1);
	close(fd);
	ck_assert_int_eq(store_expire(st, cutoff), 1);	/* e now */
	ck_assert_int_eq(store_exists(st, "e"), 0);
	store_sess_close(b);
	ck_assert_int_eq(store_expire(st, cutoff), 1);	/* b now */
	ck_assert_int_eq(store_expire(st, cutoff), 0);
	ck_assert_int_eq(store_expire(st, UINT64_MAX), 2);	/* c, d */
	ck_assert_int_eq(store_exists(st, "kg:p"), 1);
	store_close(st);
}
END_TEST

START_TEST(test_fsync_modes)
{
	static const enum store_fsync modes[] = { STORE_FSYNC_ALWAYS,
	    STORE_FSYNC_BATCH, STORE_FSYNC_NO };
	struct store		*st;
	struct store_sess	*s;
	char			 id[16], *m;
	size_t			 i;

	for (i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "fs%zu", i);
		st = open_store(modes[i]);
		ck_assert_int_eq(store_sess_open(st, id, 1, &s), 0);
		fill(s, 1, 20);
		store_sync(st);
		fill(s, 21, 30);
		ck_assert_int_eq(store_meta_write(s, "{\"x\":1}", 7), 0);
		ck_assert_int_eq(store_trim(s, 5500), 5);
		fill(s, 31, 31);
		store_close(st);

		st = open_store(modes[i]);
		ck_assert_int_eq(store_sess_open(st, id, 0, &s), 0);
		ck_assert_uint_eq(store_first_seq(s), 6);
		ck_assert_uint_eq(store_last_seq(s), 31);
		ck_assert_int_eq(range_count(s, 0, 0, NULL), 26);
		m = store_meta_read(s);
		ck_assert_str_eq(m, "{\"x\":1}");
		free(m);
		store_close(st);
	}
}
END_TEST

/* --- BATCH off the event loop: the sync thread --- */

static const struct store_events no_events;

static struct store *
open_attached(struct event_base *base)
{
	struct store		*st = open_store(STORE_FSYNC_BATCH);
	struct store_params	 sp;
	char			 err[256];

	memset(&sp, 0, sizeof(sp));
	sp.base = base;
	sp.node = "test/1";
	sp.ev = &no_events;
	ck_assert_int_eq(store_attach(st, &sp, err, sizeof(err)), 0);
	return st;
}

static uint64_t
syncs_done(struct store *st)
{
	struct local_syncer	*sy = &((struct local_store *)st)->syncer;
	uint64_t		 n;

	pthread_mutex_lock(&sy->mu);
	n = sy->done;
	pthread_mutex_unlock(&sy->mu);
	return n;
}

/* Runs the loop for ms milliseconds. */
static void
loop_for(struct event_base *base, int ms)
{
	struct timeval	 tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Waits (10 s at most) for a sync the thread starts after `after`. */
static int
sync_after(struct store *st, uint64_t after)
{
	int	 i;

	for (i = 0; i < 1000 && syncs_done(st) <= after; i++)
		usleep(10000);
	return syncs_done(st) > after;
}

START_TEST(test_batch_async_meta)
{
	struct event_base	*base = event_base_new();
	struct store		*st = open_attached(base);
	struct store_sess	*s, *t;
	char			*m, id[16];
	uint64_t		 before;
	int			 i;

	/* A new session's directory is synced by the thread within 200 ms,
	 * from the loop. */
	ck_assert_int_eq(store_sess_open(st, "am1", 1, &s), 0);
	ck_assert_int_eq(((struct local_store *)st)->unsynced, 1);
	loop_for(base, 300);
	ck_assert_int_eq(((struct local_store *)st)->syncer_on, 1);
	ck_assert_int_eq(((struct local_store *)st)->unsynced, 0);
	/* A meta write is in place after the loop's pass (the group
	 * commit; no fsync in the loop) and is synced within 200 ms.  Read
	 * back before, it is the queued one. */
	before = syncs_done(st);
	ck_assert_int_eq(store_meta_write_async(s, "{\"a\":1}", 7), 0);
	ck_assert_ptr_null(meta_on_disk("am1"));
	m = store_meta_read(s);
	ck_assert_str_eq(m, "{\"a\":1}");
	free(m);
	event_base_loop(base, EVLOOP_NONBLOCK);
	m = meta_on_disk("am1");
	ck_assert_str_eq(m, "{\"a\":1}");
	free(m);
	ck_assert_int_eq(file_size("am1", "meta.tmp"), -1);
	ck_assert_int_eq(((struct local_store *)st)->unsynced, 1);
	loop_for(base, 300);
	ck_assert_msg(sync_after(st, before), "no sync after a meta write");
	for (i = 2; i <= 5; i++) {
		char j[16];

		snprintf(j, sizeof(j), "{\"a\":%d}", i);
		ck_assert_int_eq(store_meta_write_async(s, j, 7), 0);
	}
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "am1", 0, &s), 0);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "{\"a\":5}");
	free(m);

	/* Many new sessions at once: one sync for all of them. */
	before = syncs_done(st);
	for (i = 0; i < 50; i++) {
		snprintf(id, sizeof(id), "many%d", i);
		ck_assert_int_eq(store_sess_open(st, id, 1, &t), 0);
		ck_assert_int_eq(store_meta_write_async(t, "{\"b\":1}", 7),
		    0);
	}
	loop_for(base, 300);
	ck_assert_msg(sync_after(st, before), "no sync after the writes");
	ck_assert_uint_le(syncs_done(st), before + 2);
	store_close(st);
	event_base_free(base);
}
END_TEST

START_TEST(test_batch_sync_thread)
{
	struct event_base	*base = event_base_new();
	struct store		*st = open_attached(base);
	struct store_sess	*s;
	uint64_t		 before;

	ck_assert_int_eq(store_sess_open(st, "sy1", 1, &s), 0);
	/* The new directory alone is synced by the thread. */
	store_sync(st);
	ck_assert_int_eq(((struct local_store *)st)->syncer_on, 1);
	before = syncs_done(st);
	fill(s, 1, 10);
	store_sync(st);		/* returns at once; the thread syncs */
	ck_assert(sync_after(st, before));
	ck_assert_int_eq(((struct local_sess *)s)->dirty, 0);
	/* A closed dirty log is still synced by the next store_sync(). */
	fill(s, 11, 12);
	store_sess_close(s);
	ck_assert_int_eq(((struct local_store *)st)->unsynced, 1);
	before = syncs_done(st);
	store_sync(st);
	ck_assert_int_eq(((struct local_store *)st)->unsynced, 0);
	ck_assert(sync_after(st, before));
	store_close(st);
	event_base_free(base);

	/* Unattached (parleyd -t, the tests above): meta stays synchronous. */
	st = open_store(STORE_FSYNC_BATCH);
	ck_assert_int_eq(store_sess_open(st, "sy2", 1, &s), 0);
	ck_assert_int_eq(store_meta_write_async(s, "{\"c\":1}", 7), 0);
	{
		char *m = meta_on_disk("sy2");

		ck_assert_str_eq(m, "{\"c\":1}");
		free(m);
	}
	store_close(st);
}
END_TEST

struct rate {
	uint64_t	 n;
	uint64_t	 next;
	int		 bad;
};

static int
rate_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct rate	*r = arg;

	(void)ts;
	if (seq != r->next++ || len < 10 || json[0] != '{')
		r->bad = 1;
	r->n++;
	return 0;
}

START_TEST(test_range_100k)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	struct timespec		 t0, t1;
	struct rate		 r;
	char			 j[160];
	uint64_t		 q;
	double			 secs;
	int			 n;

	ck_assert_int_eq(store_sess_open(st, "r100k", 1, &s), 0);
	for (q = 1; q <= 100000; q++) {
		n = snprintf(j, sizeof(j), "{\"v\":1,\"type\":\"token\","
		    "\"sessionId\":\"r100k\",\"seq\":%" PRIu64 ",\"content\":"
		    "\"The quick brown fox\"}", q);
		ck_assert_int_eq(store_append(s, q, 1700000000000ull + q, j,
		    (size_t)n), 0);
	}
	store_sess_close(s);
	/* reopen: scan crosses many block boundaries */
	ck_assert_int_eq(store_sess_open(st, "r100k", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 100000);

	memset(&r, 0, sizeof(r));
	r.next = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(store_range(s, 0, 0, rate_cb, &r), 100000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_eq(r.bad, 0);
	ck_assert_uint_eq(r.n, 100000);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("store: range of 100000 records in %.4f s (%.0f records/s)\n",
	    secs, secs > 0 ? 100000 / secs : 0.0);

	memset(&r, 0, sizeof(r));
	r.next = 77778;
	ck_assert_int_eq(store_range(s, 77777, 1000, rate_cb, &r), 1000);
	ck_assert_int_eq(r.bad, 0);
	store_close(st);
}
END_TEST

/* --- documents --- */

/* What store_doc_* delivered: done's n (and errno), the documents. */
struct docs {
	int		 calls;		/* done */
	ssize_t		 n;
	int		 err;
	size_t		 count;		/* cb */
	size_t		 stop_after;	/* 0: never */
	char		 names[16][STORE_ID_MAX + 1];
	char		*json[16];
	size_t		 len[16];
};

static void
docs_reset(struct docs *d)
{
	size_t	 i;

	for (i = 0; i < d->count && i < 16; i++)
		free(d->json[i]);
	memset(d, 0, sizeof(*d));
}

static void
docs_done(void *arg, ssize_t n)
{
	struct docs	*d = arg;

	d->calls++;
	d->n = n;
	d->err = n < 0 ? errno : 0;
}

static int
docs_cb(void *arg, const char *name, const char *json, size_t len)
{
	struct docs	*d = arg;

	ck_assert_uint_eq(strlen(json), len);	/* NUL-terminated */
	if (d->count < 16) {
		snprintf(d->names[d->count], sizeof(d->names[0]), "%s", name);
		d->json[d->count] = strdup(json);
		d->len[d->count] = len;
	}
	d->count++;
	return d->stop_after != 0 && d->count >= d->stop_after;
}

/* The json of document name in d, or NULL. */
static const char *
docs_get(const struct docs *d, const char *name)
{
	size_t	 i;

	for (i = 0; i < d->count && i < 16; i++)
		if (strcmp(d->names[i], name) == 0)
			return d->json[i];
	return NULL;
}

/* Puts synchronously (the local store completes at once): done's n. */
static ssize_t
doc_put(struct store_sess *s, const char *name, const char *json,
    size_t len, int *err)
{
	struct docs	 d;

	memset(&d, 0, sizeof(d));
	ck_assert_ptr_null(store_doc_put(s, name, json, len, docs_done, &d));
	ck_assert_int_eq(d.calls, 1);
	if (err != NULL)
		*err = d.err;
	return d.n;
}

static ssize_t
doc_del(struct store_sess *s, const char *name)
{
	struct docs	 d;

	memset(&d, 0, sizeof(d));
	ck_assert_ptr_null(store_doc_del(s, name, docs_done, &d));
	ck_assert_int_eq(d.calls, 1);
	return d.n;
}

/* Reads every document into d (reset first). */
static void
doc_all(struct store_sess *s, struct docs *d)
{
	size_t	 stop = d->stop_after;

	docs_reset(d);
	d->stop_after = stop;
	ck_assert_ptr_null(store_doc_all(s, docs_cb, docs_done, d));
	ck_assert_int_eq(d->calls, 1);
}

START_TEST(test_doc_round_trip)
{
	struct store		*st = open_store(STORE_FSYNC_ALWAYS);
	struct store_sess	*s;
	struct docs		 d;
	char			 p[512];
	struct stat		 sb;

	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(store_sess_open(st, "k", 1, &s), 0);
	/* no kb yet: nothing, and nothing made */
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 0);
	ck_assert_uint_eq(d.count, 0);
	ck_assert_int_eq(doc_del(s, "a"), 0);
	path_of(p, sizeof(p), "k", "kb");
	ck_assert_int_eq(stat(p, &sb), -1);

	ck_assert_int_eq(doc_put(s, "a", "{\"v\":1}", 7, NULL), 0);
	ck_assert_int_eq(doc_put(s, "b.tmp", "[2]", 3, NULL), 0);
	ck_assert_int_eq(doc_put(s, "a", "{\"v\":22}", 8, NULL), 0);
	/* the documented layout, no temporary left */
	ck_assert_int_eq(file_size("k", "kb/a"), 8);
	ck_assert_int_eq(file_size("k", "kb/b.tmp"), 3);
	ck_assert_int_eq(file_size("k", "kb/.a.tmp"), -1);
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 2);
	ck_assert_uint_eq(d.count, 2);
	ck_assert_str_eq(docs_get(&d, "a"), "{\"v\":22}");
	ck_assert_str_eq(docs_get(&d, "b.tmp"), "[2]");

	/* the callback stops it: that one counts */
	d.stop_after = 1;
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 1);
	ck_assert_uint_eq(d.count, 1);
	d.stop_after = 0;

	ck_assert_int_eq(doc_del(s, "a"), 1);
	ck_assert_int_eq(doc_del(s, "a"), 0);
	ck_assert_int_eq(doc_del(s, "zz"), 0);
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 1);
	ck_assert_ptr_null(docs_get(&d, "a"));
	ck_assert_str_eq(docs_get(&d, "b.tmp"), "[2]");

	/* not the owner: refused, nothing changed */
	s->role = STORE_FOLLOWER;
	ck_assert_int_eq(doc_put(s, "c", "{}", 2, &d.err), -1);
	ck_assert_int_eq(d.err, EPERM);
	ck_assert_int_eq(doc_del(s, "b.tmp"), -1);
	/* but it reads (kb.c answers kb_search on a follower) */
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 1);
	docs_reset(&d);
	s->role = STORE_OWNER;
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 1);
	docs_reset(&d);
	store_close(st);
}
END_TEST

START_TEST(test_doc_bounds)
{
	static const char *const bad[] = { "", ".a", "a/b", "../x", "a b",
	    "\xc3\xa9", NULL };
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	struct docs		 d;
	char			*big, longname[STORE_ID_MAX + 2];
	size_t			 i;
	int			 err;

	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(store_sess_open(st, "kbnd", 1, &s), 0);
	ck_assert_ptr_nonnull(big = malloc(STORE_DOC_MAX + 1));
	memset(big, 'x', STORE_DOC_MAX + 1);
	big[0] = '"';
	ck_assert_int_eq(doc_put(s, "big", big, STORE_DOC_MAX + 1, &err), -1);
	ck_assert_int_eq(err, EMSGSIZE);
	ck_assert_int_eq(file_size("kbnd", "kb"), -1);	/* nothing made */
	/* the bound itself fits, and comes back whole */
	ck_assert_int_eq(doc_put(s, "big", big, STORE_DOC_MAX, &err), 0);
	ck_assert_int_eq(file_size("kbnd", "kb/big"), STORE_DOC_MAX);
	free(big);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(doc_put(s, bad[i], "{}", 2, &err), -1);
		ck_assert_int_eq(err, EINVAL);
		ck_assert_int_eq(doc_del(s, bad[i]), -1);
	}
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(doc_put(s, longname, "{}", 2, &err), -1);
	ck_assert_int_eq(err, EINVAL);
	longname[STORE_ID_MAX] = '\0';
	ck_assert_int_eq(doc_put(s, longname, "{}", 2, &err), 0);
	ck_assert_int_eq(doc_put(s, "nul", "{\"a\0\"}", 6, &err), -1);
	ck_assert_int_eq(err, EINVAL);
	ck_assert_int_eq(doc_put(s, "empty", "", 0, &err), -1);
	ck_assert_int_eq(err, EINVAL);
	ck_assert_int_eq(doc_put(s, "null", NULL, 2, &err), -1);
	ck_assert_int_eq(err, EINVAL);
	ck_assert_ptr_null(store_doc_all(s, NULL, docs_done, &d));
	ck_assert_int_eq(d.n, -1);
	ck_assert_int_eq(d.err, EINVAL);
	/* only the two good ones */
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 2);
	ck_assert_uint_eq(d.len[0] + d.len[1], STORE_DOC_MAX + 2);
	docs_reset(&d);
	store_close(st);
}
END_TEST

/* Writes a file into a session's kb directory behind the store's back. */
static void
kb_raw(const char *id, const char *file, const char *text)
{
	char	 p[512];
	int	 fd;

	path_of(p, sizeof(p), id, file);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, text, strlen(text)),
	    (ssize_t)strlen(text));
	close(fd);
}

START_TEST(test_doc_reopen)
{
	static const enum store_fsync modes[] = { STORE_FSYNC_ALWAYS,
	    STORE_FSYNC_BATCH, STORE_FSYNC_NO };
	struct store		*st;
	struct store_sess	*s;
	struct docs		 d;
	char			 id[16], p[512];
	size_t			 i;

	memset(&d, 0, sizeof(d));
	for (i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "kr%zu", i);
		st = open_store(modes[i]);
		ck_assert_int_eq(store_sess_open(st, id, 1, &s), 0);
		fill(s, 1, 2);
		ck_assert_int_eq(doc_put(s, "one", "{\"n\":1}", 7, NULL), 0);
		ck_assert_int_eq(doc_put(s, "two", "{\"n\":2}", 7, NULL), 0);
		ck_assert_int_eq(doc_put(s, "gone", "{}", 2, NULL), 0);
		ck_assert_int_eq(doc_del(s, "gone"), 1);
		store_close(st);

		/* a put that died before its rename, and files no put
		 * writes */
		kb_raw(id, "kb/.one.tmp", "{\"n\":\"torn");
		kb_raw(id, "kb/empty", "");
		kb_raw(id, "kb/nul", "{}");
		path_of(p, sizeof(p), id, "kb/nul");
		ck_assert_int_eq(truncate(p, 4), 0);	/* "{}\0\0" */
		path_of(p, sizeof(p), id, "kb/sub");
		ck_assert_int_eq(mkdir(p, 0750), 0);

		st = open_store(modes[i]);
		ck_assert_int_eq(store_sess_open(st, id, 0, &s), 0);
		doc_all(s, &d);
		ck_assert_int_eq(d.n, 2);
		ck_assert_str_eq(docs_get(&d, "one"), "{\"n\":1}");
		ck_assert_str_eq(docs_get(&d, "two"), "{\"n\":2}");
		ck_assert_int_eq(file_size(id, "kb/.one.tmp"), -1);
		ck_assert_int_eq(file_size(id, "kb/empty"), 0);	/* left */
		store_close(st);
	}
	docs_reset(&d);
}
END_TEST

START_TEST(test_doc_async_batch)
{
	struct event_base	*base = event_base_new();
	struct store		*st = open_attached(base);
	struct store_sess	*s;
	struct docs		 d;
	uint64_t		 before;

	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(store_sess_open(st, "ka", 1, &s), 0);
	loop_for(base, 300);
	/* In place at once, synced by the thread within 200 ms. */
	before = syncs_done(st);
	ck_assert_int_eq(doc_put(s, "d", "{\"a\":1}", 7, NULL), 0);
	ck_assert_int_eq(file_size("ka", "kb/d"), 7);
	ck_assert_int_eq(((struct local_store *)st)->unsynced, 1);
	loop_for(base, 300);
	ck_assert_msg(sync_after(st, before), "no sync after a put");
	before = syncs_done(st);
	ck_assert_int_eq(doc_del(s, "d"), 1);
	ck_assert_int_eq(((struct local_store *)st)->unsynced, 1);
	loop_for(base, 300);
	ck_assert_msg(sync_after(st, before), "no sync after a del");
	doc_all(s, &d);
	ck_assert_int_eq(d.n, 0);
	store_close(st);
	event_base_free(base);
}
END_TEST

START_TEST(test_doc_expire)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;
	time_t			 old = time(NULL) - 3600;
	uint64_t		 cutoff = (uint64_t)(time(NULL) - 60) * 1000;
	char			 p[512];

	/* old everywhere: removed, documents and all */
	ck_assert_int_eq(store_sess_open(st, "ke", 1, &s), 0);
	fill(s, 1, 3);
	ck_assert_int_eq(doc_put(s, "a", "{}", 2, NULL), 0);
	ck_assert_int_eq(doc_put(s, "b", "{}", 2, NULL), 0);
	store_sess_close(s);
	kb_raw("ke", "kb/.c.tmp", "{");
	age("ke", "index", old);
	age("ke", "kb", old);
	/* a document written lately keeps an old log's session */
	ck_assert_int_eq(store_sess_open(st, "kf", 1, &s), 0);
	fill(s, 1, 3);
	ck_assert_int_eq(doc_put(s, "a", "{}", 2, NULL), 0);
	store_sess_close(s);
	age("kf", "index", old);

	ck_assert_int_eq(store_expire(st, cutoff), 1);
	snprintf(p, sizeof(p), "%s/sessions/ke", tdir);
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_int_eq(store_exists(st, "kf"), 1);
	ck_assert_int_eq(file_size("kf", "kb/a"), 2);
	ck_assert_int_eq(store_expire(st, UINT64_MAX), 1);
	snprintf(p, sizeof(p), "%s/sessions/kf", tdir);
	ck_assert_int_eq(access(p, F_OK), -1);
	/* a new session of the same id starts with no documents */
	ck_assert_int_eq(store_sess_open(st, "ke", 1, &s), 0);
	ck_assert_int_eq(doc_del(s, "a"), 0);
	store_close(st);
}
END_TEST

static Suite *
store_suite(void)
{
	Suite	*su = suite_create("store");
	TCase	*tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_valid_id);
	tcase_add_test(tc, test_bad_ids_refused);
	tcase_add_test(tc, test_open_errors);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_range_limits);
	tcase_add_test(tc, test_fencing);
	tcase_add_test(tc, test_reopen_index);
	tcase_add_test(tc, test_big_range);
	tcase_add_test(tc, test_torn_tail);
	tcase_add_test(tc, test_torn_every_byte);
	tcase_add_test(tc, test_meta);
	tcase_add_test(tc, test_meta_slots);
	tcase_add_test(tc, test_meta_upgrade);
	tcase_add_test(tc, test_trim);
	tcase_add_test(tc, test_expire);
	tcase_add_test(tc, test_fsync_modes);
	tcase_add_test(tc, test_batch_async_meta);
	tcase_add_test(tc, test_batch_sync_thread);
	tcase_add_test(tc, test_range_100k);
	tcase_add_test(tc, test_doc_round_trip);
	tcase_add_test(tc, test_doc_bounds);
	tcase_add_test(tc, test_doc_reopen);
	tcase_add_test(tc, test_doc_async_batch);
	tcase_add_test(tc, test_doc_expire);
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	return check_run(store_suite());
}
