/*
 * Unit tests for the local store's shared segment log: group commit,
 * sessions changing processes, a writer dead mid-frame, trimming, the
 * sweep of segments, the conversion of v1 logs, format versions; and the
 * review of the first version: read errors at open, the torn-tail cut,
 * torn meta slots, idle sessions' clean headers, closing sessions'
 * queued frames, the queue buffer's bound, locks, stale v1 logs.
 */
#include <sys/resource.h>

#include <signal.h>

#include "store_local_fixture.h"

/* --- group commit into the shared segments --- */

struct gc_seen {
	struct store_sess	*s[8];
	uint64_t		 seq[8];
	int			 calls;
	int			 failed;
};

static struct gc_seen	 gc_seen;

static void
gc_durable(void *arg, struct store_sess *s, uint64_t seq)
{
	int	 i;

	(void)arg;
	gc_seen.calls++;
	for (i = 0; i < 8; i++)
		if (gc_seen.s[i] == s || gc_seen.s[i] == NULL) {
			gc_seen.s[i] = s;
			ck_assert_uint_ge(seq, gc_seen.seq[i]);
			gc_seen.seq[i] = seq;
			return;
		}
}

static void
gc_failed(void *arg, struct store_sess *s, int err)
{
	(void)arg;
	(void)s;
	(void)err;
	gc_seen.failed++;
}

static const struct store_events gc_events = {
	.durable = gc_durable,
	.failed = gc_failed,
};

static struct store *
open_grouped(struct event_base *base, enum store_fsync fs)
{
	struct store		*st = open_store(fs);
	struct store_params	 sp;
	char			 err[256];

	memset(&sp, 0, sizeof(sp));
	sp.base = base;
	sp.node = "test/1";
	sp.ev = &gc_events;
	ck_assert_int_eq(store_attach(st, &sp, err, sizeof(err)), 0);
	memset(&gc_seen, 0, sizeof(gc_seen));
	return st;
}

static uint64_t
durable_of(struct store_sess *s)
{
	int	 i;

	for (i = 0; i < 8; i++)
		if (gc_seen.s[i] == s)
			return gc_seen.seq[i];
	return 0;
}

static void
fill_async(struct store_sess *s, uint64_t first, uint64_t last)
{
	char		 j[64];
	uint64_t	 q;
	int		 n;

	for (q = first; q <= last; q++) {
		n = snprintf(j, sizeof(j), "{\"n\":%" PRIu64 "}", q);
		ck_assert_int_eq(store_append_async(s, q, 1000 * q, j,
		    (size_t)n), 0);
	}
}

/* The segment files in the state directory. */
static int
count_segments(void)
{
	char		 p[512];
	DIR		*d;
	struct dirent	*de;
	int		 n = 0;

	snprintf(p, sizeof(p), "%s/segments", tdir);
	ck_assert_ptr_nonnull(d = opendir(p));
	while ((de = readdir(d)) != NULL)
		n += strstr(de->d_name, ".seg") != NULL;
	closedir(d);
	return n;
}

/* One pass of the loop: every queued write of it in one group commit. */
START_TEST(test_group_commit)
{
	static const enum store_fsync modes[] = { STORE_FSYNC_ALWAYS,
	    STORE_FSYNC_BATCH, STORE_FSYNC_NO };
	struct event_base	*base;
	struct store		*st;
	struct store_sess	*a, *b, *c;
	struct local_writer	*w;
	uint64_t		 gen;
	char			*m;
	size_t			 i;

	for (i = 0; i < 3; i++) {
		base = event_base_new();
		st = open_grouped(base, modes[i]);
		w = &((struct local_store *)st)->w;
		/* No time bound here: a slow run (sanitizers) must not
		 * split the pass. */
		w->wait_us = UINT64_MAX;
		ck_assert_int_eq(store_sess_open(st, "ga", 1, &a), 0);
		ck_assert_int_eq(store_sess_open(st, "gb", 1, &b), 0);
		ck_assert_int_eq(store_sess_open(st, "gc", 1, &c), 0);
		gen = w->gen;
		fill_async(a, 1, 50);
		fill_async(b, 1, 20);
		ck_assert_int_eq(store_meta_write_async(b, "{\"m\":1}", 7),
		    0);
		fill_async(c, 1, 5);
		fill_async(a, 51, 60);
		/* Queued: counted, not durable, not readable. */
		ck_assert_uint_eq(store_last_seq(a), 60);
		ck_assert_uint_eq(store_durable_seq(a), 0);
		ck_assert_int_eq(gc_seen.calls, 0);
		ck_assert_int_eq(range_count(a, 0, 0, NULL), 0);
		event_base_loop(base, EVLOOP_NONBLOCK);
		/* One flush wrote them all, each session reported once. */
		ck_assert_uint_eq(w->gen, gen + 1);
		ck_assert_int_eq(gc_seen.calls, 3);
		ck_assert_uint_eq(durable_of(a), 60);
		ck_assert_uint_eq(durable_of(b), 20);
		ck_assert_uint_eq(durable_of(c), 5);
		ck_assert_uint_eq(store_durable_seq(a), 60);
		ck_assert_int_eq(range_count(a, 0, 0, NULL), 60);
		ck_assert_int_eq(range_count(b, 10, 0, NULL), 10);
		m = meta_on_disk("gb");
		ck_assert_str_eq(m, "{\"m\":1}");
		free(m);
		/* A pass with nothing queued flushes nothing. */
		event_base_loop(base, EVLOOP_NONBLOCK);
		ck_assert_uint_eq(w->gen, gen + 1);
		/* Bounded: a write queued longer than the bound goes
		 * before the pass ends (here at once). */
		w->wait_us = 0;
		fill_async(a, 61, 62);
		ck_assert_uint_eq(w->gen, gen + 3);
		ck_assert_uint_eq(store_durable_seq(a), 62);
		w->wait_us = UINT64_MAX;
		/* Closing with writes queued writes them first. */
		fill_async(c, 6, 9);
		store_sess_close(c);
		store_close(st);
		event_base_free(base);
		st = open_store(modes[i]);
		ck_assert_int_eq(store_sess_open(st, "gc", 0, &c), 0);
		ck_assert_uint_eq(store_last_seq(c), 9);
		ck_assert_int_eq(range_count(c, 0, 0, NULL), 9);
		ck_assert_int_eq(store_sess_open(st, "ga", 0, &a), 0);
		ck_assert_int_eq(range_count(a, 0, 0, NULL), 62);
		store_close(st);
		check_rmtree(tdir);
		ck_assert_int_eq(mkdir(tdir, 0700), 0);
	}
}
END_TEST

/* Opens id in a fresh store: last seq and every record there. */
static void
st_reopen_check(const char *id, uint64_t last)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct store_sess	*s;

	ck_assert_int_eq(store_sess_open(st, id, 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), last);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), (int)last);
	store_close(st);
}

/* Two processes' stores write their own segments; each reads the
 * other's records once a session moves. */
START_TEST(test_two_writers)
{
	struct event_base	*b1 = event_base_new(), *b2 = event_base_new();
	struct store		*s1 = open_grouped(b1, STORE_FSYNC_BATCH);
	struct store		*s2 = open_grouped(b2, STORE_FSYNC_BATCH);
	struct store_sess	*x, *y, *busy;

	ck_assert_int_eq(store_sess_open(s1, "wx", 1, &x), 0);
	ck_assert_int_eq(store_sess_open(s2, "wy", 1, &y), 0);
	/* One writer per session, across processes too. */
	errno = 0;
	ck_assert_int_eq(store_sess_open(s2, "wx", 0, &busy), -1);
	ck_assert_int_eq(errno, EBUSY);
	fill_async(x, 1, 30);
	fill_async(y, 1, 40);
	event_base_loop(b1, EVLOOP_NONBLOCK);
	event_base_loop(b2, EVLOOP_NONBLOCK);
	ck_assert_int_eq(count_segments(), 2);
	/* They change hands: each finds the other's records. */
	store_sess_close(x);
	store_sess_close(y);
	ck_assert_int_eq(store_sess_open(s2, "wx", 0, &x), 0);
	ck_assert_int_eq(store_sess_open(s1, "wy", 0, &y), 0);
	ck_assert_uint_eq(store_last_seq(x), 30);
	ck_assert_uint_eq(store_last_seq(y), 40);
	fill_async(x, 31, 35);
	fill_async(y, 41, 45);
	event_base_loop(b1, EVLOOP_NONBLOCK);
	event_base_loop(b2, EVLOOP_NONBLOCK);
	ck_assert_int_eq(range_count(x, 0, 0, NULL), 35);
	ck_assert_int_eq(range_count(y, 25, 0, NULL), 20);
	store_close(s1);
	store_close(s2);
	event_base_free(b1);
	event_base_free(b2);
	st_reopen_check("wx", 35);
	st_reopen_check("wy", 45);
}
END_TEST

/*
 * A worker SIGKILLed mid-write: its index lags (lazy entries), its
 * segment ends in a torn frame.  The next open finds every record it
 * completed, cuts the torn one away, and appends go on.
 */
START_TEST(test_writer_died)
{
	struct store		*st;
	struct store_sess	*s;
	char			 p[512];
	struct stat		 sb;
	pid_t			 pid;
	int			 status;
	off_t			 before;
	uint64_t		 q;

	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		struct event_base *base = event_base_new();
		struct store *cst = open_grouped(base, STORE_FSYNC_NO);
		struct local_writer *w;
		struct store_sess *cs;
		unsigned char torn[40];

		if (store_sess_open(cst, "died", 1, &cs) == -1)
			_exit(2);
		fill_async(cs, 1, 25);
		event_base_loop(base, EVLOOP_NONBLOCK);
		fill_async(cs, 26, 40);
		event_base_loop(base, EVLOOP_NONBLOCK);
		w = &((struct local_store *)cst)->w;
		/* Half a frame, as a write cut short by the kill. */
		seg_frame_encode(torn, 41, 41000, "died", 4, "{}", 2);
		if (pwrite(w->fd, torn, 20, w->end) != 20)
			_exit(3);
		/* Only the first entry reached the index. */
		if (((struct local_sess *)cs)->ix_n != 1)
			_exit(4);
		_exit(0);		/* no close: as a SIGKILL */
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(file_size("died", "index"), 64 + 40);
	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(store_sess_open(st, "died", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 40);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), 40);
	/* The scan indexed them; the torn frame is gone. */
	ck_assert_int_eq(file_size("died", "index"), 64 + 40 * 40);
	{
		DIR *d;
		struct dirent *de;

		snprintf(p, sizeof(p), "%s/segments", tdir);
		ck_assert_ptr_nonnull(d = opendir(p));
		while ((de = readdir(d)) != NULL)
			if (strstr(de->d_name, ".seg") != NULL)
				break;
		ck_assert_ptr_nonnull(de);
		snprintf(p, sizeof(p), "%s/segments/%s", tdir, de->d_name);
		closedir(d);
	}
	ck_assert_int_eq(stat(p, &sb), 0);
	for (before = SEG_HDR_LEN, q = 1; q <= 40; q++)
		before += 32 + 4 + (q < 10 ? 7 : 8);
	ck_assert_int_eq(sb.st_size, before);
	fill(s, 41, 42);
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "died", 0, &s), 0);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), 42);
	store_close(st);
}
END_TEST

/* The path of the only (or first listed) segment, in p. */
static void
first_segment(char *p, size_t len)
{
	DIR		*d;
	struct dirent	*de;

	snprintf(p, len, "%s/segments", tdir);
	ck_assert_ptr_nonnull(d = opendir(p));
	while ((de = readdir(d)) != NULL)
		if (strstr(de->d_name, ".seg") != NULL)
			break;
	ck_assert_ptr_nonnull(de);
	snprintf(p, len, "%s/segments/%s", tdir, de->d_name);
	closedir(d);
}

/*
 * An open that cannot read a segment (no descriptor left, the segment
 * gone) fails and leaves the index whole: only a frame read and found
 * missing drops an entry.
 */
START_TEST(test_open_read_error_keeps_index)
{
	struct store		*st;
	struct store_sess	*s;
	struct rlimit		 rl, low;
	char			 p[512], q[520];
	int			 fds[256], n = 0, i, r;

	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(store_sess_open(st, "a", 1, &s), 0);
	fill(s, 1, 20);
	store_sess_close(s);
	store_close(st);
	ck_assert_int_eq(file_size("a", "index"), 64 + 20 * 40);

	/* No descriptor for the segment: EMFILE, nothing dropped. */
	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	low = rl;
	low.rlim_cur = 64;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (n < 256 && (fds[n] = dup(0)) != -1)
		n++;
	ck_assert_int_ge(n, 2);
	close(fds[--n]);
	close(fds[--n]);	/* two free: the directory and the index */
	r = store_sess_open(st, "a", 0, &s);
	for (i = 0; i < n; i++)
		close(fds[i]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ck_assert_int_eq(r, -1);
	ck_assert_int_eq(file_size("a", "index"), 64 + 20 * 40);
	store_close(st);

	/* The segment missing: the open fails loudly, nothing dropped. */
	first_segment(p, sizeof(p));
	snprintf(q, sizeof(q), "%s.away", p);
	ck_assert_int_eq(rename(p, q), 0);
	st = open_store(STORE_FSYNC_NO);
	errno = 0;
	ck_assert_int_eq(store_sess_open(st, "a", 0, &s), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_eq(file_size("a", "index"), 64 + 20 * 40);
	store_close(st);
	ck_assert_int_eq(rename(q, p), 0);

	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(store_sess_open(st, "a", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 20);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), 20);
	store_sess_close(s);

	/* A frame really missing (the segment cut short): dropped. */
	ck_assert_int_eq(truncate(p, SEG_HDR_LEN + 9 * 40 + 20), 0);
	ck_assert_int_eq(store_sess_open(st, "a", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 9);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), 9);
	store_sess_close(s);
	store_close(st);
}
END_TEST

/*
 * A torn tail seen by a scan made without the lock, completed by its
 * writer, acknowledged, then the writer dead: the cut scans again under
 * the lock and keeps the frame.
 */
START_TEST(test_cut_rescans_under_lock)
{
	struct store		*st;
	struct store_sess	*a, *b;
	struct local_store	*lst;
	char			 segp[600], c;
	unsigned char		 part[20];
	uint64_t		 segid;
	off_t			 good, end, sz;
	struct stat		 sb;
	int			 p1[2], p2[2], status, fd;
	pid_t			 pid;

	ck_assert_int_eq(pipe(p1), 0);
	ck_assert_int_eq(pipe(p2), 0);
	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		/* P1, the writer: a closed unclean, b goes on. */
		st = store_open("local", tdir, STORE_FSYNC_ALWAYS, segp, 100);
		if (st == NULL || store_sess_open(st, "a", 1, &a) == -1 ||
		    store_sess_open(st, "b", 1, &b) == -1)
			_exit(2);
		fill(a, 1, 2);
		fill(b, 1, 2);
		((struct local_sess *)a)->failed = 1;
		store_sess_close(a);
		segid = ((struct local_store *)st)->w.segid;
		if (write(p1[1], &segid, sizeof(segid)) != sizeof(segid) ||
		    read(p2[0], &c, 1) != 1)
			_exit(3);
		fill(b, 3, 3);		/* acknowledged: fdatasynced */
		raise(SIGKILL);
		_exit(4);
	}
	ck_assert_int_eq(read(p1[0], &segid, sizeof(segid)), sizeof(segid));
	snprintf(segp, sizeof(segp), "%s/segments/%016" PRIx64 ".seg", tdir,
	    segid);
	/* P1 mid-pwrite of b:3: the start of a frame at the end. */
	ck_assert_int_eq(stat(segp, &sb), 0);
	memset(part, 0, sizeof(part));
	part[0] = 60;
	ck_assert_int_ne(fd = open(segp, O_WRONLY), -1);
	ck_assert_int_eq(pwrite(fd, part, sizeof(part), sb.st_size),
	    sizeof(part));
	close(fd);
	/* P2 opening a: its scan, without the lock, sees the torn tail. */
	st = open_store(STORE_FSYNC_ALWAYS);
	lst = (struct local_store *)st;
	ck_assert_int_eq(seg_scan(local_seg_fd(lst, segid), SEG_HDR_LEN,
	    NULL, NULL, &good, &end), 0);
	ck_assert_int_lt(good, end);
	ck_assert_int_eq(write(p2[1], "x", 1), 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(stat(segp, &sb), 0);
	sz = sb.st_size;
	/* P1 is dead, its lock gone: the cut finds b:3 whole. */
	ck_assert_int_eq(local_seg_cut(lst, segid, good), 0);
	ck_assert_int_eq(stat(segp, &sb), 0);
	ck_assert_int_eq(sb.st_size, sz);
	store_close(st);
	st = open_store(STORE_FSYNC_ALWAYS);
	ck_assert_int_eq(store_sess_open(st, "b", 0, &b), 0);
	ck_assert_uint_eq(store_last_seq(b), 3);
	ck_assert_int_eq(range_count(b, 0, 0, NULL), 3);
	store_sess_close(b);
	store_close(st);
}
END_TEST

/*
 * BATCH in a worker: gen 1 synced, gen 2 written (acknowledged), gen 3
 * torn by a crash.  The reader gets gen 2, not gen 1: a write never goes
 * to the newest slot, nor to the newest synced one.
 */
START_TEST(test_meta_torn_keeps_newest)
{
	struct event_base	*base = event_base_new();
	struct store		*st = open_grouped(base, STORE_FSYNC_BATCH);
	struct local_store	*lst = (struct local_store *)st;
	struct store_sess	*s;
	struct local_sess	*ls;
	char			 p[512], *m;
	int			 fd, i, s1, s2, s3;

	ck_assert_int_eq(store_sess_open(st, "m", 1, &s), 0);
	ls = (struct local_sess *)s;
	ck_assert_int_eq(store_meta_write_async(s, "{\"g\":1}", 7), 0);
	local_seg_flush(lst);
	store_sync(st);
	for (i = 0; i < 500 && !local_synced(lst, ls->meta_ticket); i++)
		usleep(10000);
	ck_assert(local_synced(lst, ls->meta_ticket));
	s1 = ls->meta_slot;
	ck_assert_int_eq(store_meta_write_async(s, "{\"g\":2}", 7), 0);
	local_seg_flush(lst);
	s2 = ls->meta_slot;
	ck_assert_int_eq(store_meta_write_async(s, "{\"g\":3}", 7), 0);
	local_seg_flush(lst);
	s3 = ls->meta_slot;
	ck_assert_int_ne(s3, s2);
	ck_assert_int_ne(s3, s1);
	/* A crash mid-write of gen 3: its slot torn. */
	snprintf(p, sizeof(p), "%s/sessions/m/meta.%d", tdir, s3);
	ck_assert_int_ne(fd = open(p, O_WRONLY), -1);
	ck_assert_int_eq(pwrite(fd, "X", 1, SEG_META_HDR + 2), 1);
	close(fd);
	m = meta_on_disk("m");
	ck_assert_str_eq(m, "{\"g\":2}");
	free(m);
	/* The store's reader agrees, and writes go on. */
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "m", 0, &s), 0);
	m = store_meta_read(s);
	ck_assert_str_eq(m, "{\"g\":2}");
	free(m);
	ck_assert_int_eq(store_meta_write_async(s, "{\"g\":4}", 7), 0);
	local_seg_flush(lst);
	m = meta_on_disk("m");
	ck_assert_str_eq(m, "{\"g\":4}");
	free(m);
	store_sess_close(s);
	store_close(st);
	event_base_free(base);
}
END_TEST

/* The index header of session id as on disk. */
static void
ihdr_of(const char *id, struct seg_ihdr *ih)
{
	unsigned char	 h[SEG_IHDR_LEN];
	char		 p[512];
	uint32_t	 v;
	int		 fd;

	path_of(p, sizeof(p), id, "index");
	ck_assert_int_ne(fd = open(p, O_RDONLY), -1);
	ck_assert_int_eq(pread(fd, h, sizeof(h), 0), sizeof(h));
	close(fd);
	ck_assert_int_eq(seg_ihdr_decode(h, sizeof(h), ih, &v), 0);
}

static uint64_t
rchar(void)
{
	FILE			*f = fopen("/proc/self/io", "r");
	char			 l[128];
	unsigned long long	 v = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(l, sizeof(l), f) != NULL)
		if (sscanf(l, "rchar: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

/*
 * A session idle while its writer goes on with others, then the writer
 * killed: its header says clean, so its open reads its last entry, not
 * the rest of the segment.  Attached, the timer marks an idle session
 * clean; its next frame marks it not clean before it is queued.
 */
START_TEST(test_idle_session_clean)
{
	struct store		*st;
	struct store_sess	*a, *b;
	struct seg_ihdr		 ih;
	char			 j[1000];
	uint64_t		 q, r0;
	pid_t			 pid;
	int			 status;

	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		st = store_open("local", tdir, STORE_FSYNC_NO, j, 100);
		if (st == NULL || store_sess_open(st, "a", 1, &a) == -1 ||
		    store_sess_open(st, "b", 1, &b) == -1)
			_exit(2);
		fill(a, 1, 3);
		memset(j, 'x', sizeof(j));
		memcpy(j, "{\"x\":\"", 6);
		memcpy(j + sizeof(j) - 2, "\"}", 2);
		for (q = 1; q <= 4000; q++)
			if (store_append(b, q, q, j, sizeof(j)) == -1)
				_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	ihdr_of("a", &ih);
	ck_assert(ih.flags & SEG_IDX_CLEAN);
	ck_assert_uint_eq(ih.clean_last, 3);
	st = open_store(STORE_FSYNC_NO);
	r0 = rchar();
	ck_assert_int_eq(store_sess_open(st, "a", 0, &a), 0);
	/* 4 MB of b's frames follow a's last: none of it is read. */
	ck_assert_uint_lt(rchar() - r0, 512 * 1024);
	ck_assert_uint_eq(store_last_seq(a), 3);
	store_sess_close(a);
	store_close(st);

	/* Attached: the tick after an idle one marks it clean. */
	{
		struct event_base *base = event_base_new();
		struct local_store *lst;

		st = open_grouped(base, STORE_FSYNC_NO);
		lst = (struct local_store *)st;
		ck_assert_int_eq(store_sess_open(st, "c", 1, &a), 0);
		fill_async(a, 1, 5);
		event_base_loop(base, EVLOOP_NONBLOCK);
		ihdr_of("c", &ih);
		ck_assert(!(ih.flags & SEG_IDX_CLEAN));
		((struct local_sess *)a)->pend_us = 0;	/* held long */
		ix_tick(-1, 0, lst);
		ix_tick(-1, 0, lst);
		ihdr_of("c", &ih);
		ck_assert(ih.flags & SEG_IDX_CLEAN);
		ck_assert_uint_eq(ih.clean_last, 5);
		/* Not clean once a frame is queued, before it is written. */
		fill_async(a, 6, 6);
		ihdr_of("c", &ih);
		ck_assert(!(ih.flags & SEG_IDX_CLEAN));
		event_base_loop(base, EVLOOP_NONBLOCK);
		store_sess_close(a);
		store_close(st);
		event_base_free(base);
	}
}
END_TEST

struct frames_of {
	const char	*id;
	uint64_t	 max;
	int		 n;
};

static int
frames_of_cb(void *arg, const struct seg_frame *f, off_t off, size_t flen)
{
	struct frames_of	*c = arg;

	(void)off;
	(void)flen;
	if (f->idlen == strlen(c->id) && memcmp(f->id, c->id, f->idlen) == 0) {
		c->n++;
		if (f->seq > c->max)
			c->max = f->seq;
	}
	return 0;
}

/*
 * A closing session's frames still queued are dropped with it, not
 * written unindexed: such a frame would be taken for its seq by a later
 * scan of the session, over the real record written since.
 */
START_TEST(test_forget_drops_frames)
{
	struct event_base	*base = event_base_new();
	struct store		*st = open_grouped(base, STORE_FSYNC_NO);
	struct local_store	*lst = (struct local_store *)st;
	struct store_sess	*a, *b;
	struct frames_of	 c;
	char			 p[512];
	off_t			 good, end;
	int			 fd;

	ck_assert_int_eq(store_sess_open(st, "a", 1, &a), 0);
	ck_assert_int_eq(store_sess_open(st, "b", 1, &b), 0);
	fill_async(a, 1, 2);
	event_base_loop(base, EVLOOP_NONBLOCK);
	fill_async(b, 1, 1);
	fill_async(a, 3, 4);
	fill_async(b, 2, 3);
	local_seg_forget(lst, (struct local_sess *)a);
	ck_assert_uint_eq(((struct local_sess *)a)->queued, 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(range_count(b, 0, 0, NULL), 3);
	store_sess_close(a);
	store_sess_close(b);
	store_close(st);
	event_base_free(base);

	first_segment(p, sizeof(p));
	ck_assert_int_ne(fd = open(p, O_RDONLY), -1);
	memset(&c, 0, sizeof(c));
	c.id = "a";
	ck_assert_int_eq(seg_scan(fd, SEG_HDR_LEN, frames_of_cb, &c, &good,
	    &end), 0);
	ck_assert_int_eq(good, end);
	ck_assert_int_eq(c.n, 2);
	ck_assert_uint_eq(c.max, 2);
	memset(&c, 0, sizeof(c));
	c.id = "b";
	ck_assert_int_eq(seg_scan(fd, SEG_HDR_LEN, frames_of_cb, &c, &good,
	    &end), 0);
	ck_assert_int_eq(c.n, 3);
	close(fd);
}
END_TEST

/* One large event does not keep a large queue buffer for good. */
START_TEST(test_queue_buffer_shrinks)
{
	struct event_base	*base = event_base_new();
	struct store		*st = open_grouped(base, STORE_FSYNC_NO);
	struct local_store	*lst = (struct local_store *)st;
	struct store_sess	*s;
	size_t			 len = 10u << 20;
	char			*j;

	ck_assert_ptr_nonnull(j = malloc(len));
	memset(j, 'x', len);
	memcpy(j, "{\"x\":\"", 6);
	memcpy(j + len - 2, "\"}", 2);
	ck_assert_int_eq(store_sess_open(st, "big", 1, &s), 0);
	/* Past LOCAL_GC_MAX: written at once, from a 16 MiB buffer. */
	ck_assert_int_eq(store_append_async(s, 1, 1000, j, len), 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_uint_eq(durable_of(s), 1);
	ck_assert_uint_le(lst->w.bcap, LOCAL_BUF_KEEP);
	fill_async(s, 2, 3);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_uint_eq(durable_of(s), 3);
	ck_assert_uint_le(lst->w.bcap, LOCAL_BUF_KEEP);
	free(j);
	store_sess_close(s);
	store_close(st);
	event_base_free(base);
}
END_TEST

/*
 * A lock taken on an index that its owner has since replaced (a trim's
 * rename) is not taken: the name now is another file.
 */
START_TEST(test_lock_same_file)
{
	struct store		*st;
	struct store_sess	*s;
	char			 p[512], q[520];
	int			 dfd, fd;

	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(store_sess_open(st, "a", 1, &s), 0);
	fill(s, 1, 3);
	store_sess_close(s);
	path_of(p, sizeof(p), "a", "index");
	snprintf(q, sizeof(q), "%s.new", p);
	ck_assert_int_ne(fd = open(p, O_RDWR), -1);
	snprintf(q, sizeof(q), "%s/sessions/a", tdir);
	ck_assert_int_ne(dfd = open(q, O_RDONLY | O_DIRECTORY), -1);
	ck_assert_int_eq(ix_lock_same(dfd, "index", fd), 0);
	/* Replaced by a rename, as a trim does. */
	snprintf(q, sizeof(q), "%s.new", p);
	ck_assert_int_eq(link(p, q), 0);
	ck_assert_int_eq(unlink(p), 0);
	write_file("a", "index", "x", 1);
	errno = 0;
	ck_assert_int_eq(ix_lock_same(dfd, "index", fd), -1);
	ck_assert_int_eq(errno, EBUSY);
	ck_assert_int_eq(rename(q, p), 0);
	ck_assert_int_eq(ix_lock_same(dfd, "index", fd), 0);
	close(fd);
	close(dfd);
	ck_assert_int_eq(store_sess_open(st, "a", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 3);
	store_sess_close(s);
	store_close(st);
}
END_TEST

/*
 * A v1 log beside an index: removed when the index has its records (a
 * conversion that crashed after its rename), kept and the open refused
 * when it goes further (an older parleyd wrote it after a rollback).
 */
START_TEST(test_stale_log_checked)
{
	struct store		*st;
	struct store_sess	*s;
	const char		*v1 = "1 1000 {\"n\":1}\n2 2000 {\"n\":2}\n"
				    "3 3000 {\"n\":3}\n";
	const char		*more = "4 4000 {\"n\":4}\n";
	char			 buf[256];

	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(store_sess_open(st, "a", 1, &s), 0);
	fill(s, 1, 3);
	store_sess_close(s);
	snprintf(buf, sizeof(buf), "%s%s", v1, more);
	write_file("a", "log", buf, strlen(buf));
	errno = 0;
	ck_assert_int_eq(store_sess_open(st, "a", 0, &s), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(file_size("a", "log"), (off_t)strlen(buf));
	ck_assert_int_eq(file_size("a", "index"), 64 + 3 * 40);
	write_file("a", "log", v1, strlen(v1));
	ck_assert_int_eq(store_sess_open(st, "a", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 3);
	ck_assert_uint_eq(s->first_seq, 1);
	ck_assert_int_eq(file_size("a", "log"), -1);
	ck_assert_int_eq(range_count(s, 0, 0, NULL), 3);
	fill(s, 4, 4);
	store_sess_close(s);
	store_close(st);
}
END_TEST

/* The sweep's question, answered from blocks of entries: open or not. */
START_TEST(test_refs_blocks)
{
	struct store		*st = open_store(STORE_FSYNC_NO);
	struct local_store	*lst = (struct local_store *)st;
	struct store_sess	*s;
	uint64_t		 segid;

	ck_assert_int_eq(store_sess_open(st, "r", 1, &s), 0);
	fill(s, 1, 2500);
	segid = lst->w.segid;
	/* Open: its index file and what it holds. */
	ck_assert_int_eq(local_ix_refs(lst, "r", segid, 2400, 2500), 1);
	ck_assert_int_eq(local_ix_refs(lst, "r", segid + 1, 1, 2500), 0);
	ck_assert_int_eq(local_ix_refs(lst, "r", segid, 2600, 2700), 0);
	store_sess_close(s);
	/* Closed clean: the file only, past its end nothing. */
	ck_assert_int_eq(local_ix_refs(lst, "r", segid, 1, 1), 1);
	ck_assert_int_eq(local_ix_refs(lst, "r", segid, 2100, 2500), 1);
	ck_assert_int_eq(local_ix_refs(lst, "r", segid + 1, 1, 2500), 0);
	ck_assert_int_eq(local_ix_refs(lst, "r", segid, 2501, 2600), 0);
	store_close(st);
}
END_TEST

START_TEST(test_seg_trim_reopen)
{
	struct store		*st = open_store(STORE_FSYNC_ALWAYS);
	struct store_sess	*s;
	uint64_t		 first;

	ck_assert_int_eq(store_sess_open(st, "str", 1, &s), 0);
	fill(s, 1, 100);
	ck_assert_int_eq(store_trim(s, 40500), 40);
	ck_assert_uint_eq(store_first_seq(s), 41);
	ck_assert_int_eq(range_count(s, 0, 0, &first), 60);
	ck_assert_uint_eq(first, 41);
	fill(s, 101, 110);
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "str", 0, &s), 0);
	ck_assert_uint_eq(store_first_seq(s), 41);
	ck_assert_uint_eq(store_last_seq(s), 110);
	ck_assert_int_eq(range_count(s, 30, 5, &first), 5);
	ck_assert_uint_eq(first, 41);
	ck_assert_int_eq(file_size("str", "index"), 64 + 70 * 40);
	ck_assert_int_eq(file_size("str", "index.tmp"), -1);
	store_close(st);
}
END_TEST

static void
age_segments(time_t when)
{
	char		 p[512];
	DIR		*d;
	struct dirent	*de;
	struct timespec	 ts[2];

	ts[0].tv_sec = ts[1].tv_sec = when;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	snprintf(p, sizeof(p), "%s/segments", tdir);
	ck_assert_ptr_nonnull(d = opendir(p));
	while ((de = readdir(d)) != NULL) {
		if (strstr(de->d_name, ".seg") == NULL)
			continue;
		snprintf(p, sizeof(p), "%s/segments/%s", tdir, de->d_name);
		ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
	}
	closedir(d);
}

/* The sweep deletes old segments no retained record is in, only. */
START_TEST(test_expire_segments)
{
	struct store		*st;
	struct store_sess	*a, *b;
	time_t			 old = time(NULL) - 3600;
	uint64_t		 cutoff = (uint64_t)(time(NULL) - 60) * 1000;

	/* Segment 1: a and b. */
	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(store_sess_open(st, "xa", 1, &a), 0);
	ck_assert_int_eq(store_sess_open(st, "xb", 1, &b), 0);
	fill(a, 1, 10);
	fill(b, 1, 10);
	store_close(st);
	ck_assert_int_eq(count_segments(), 1);
	/* Segment 2: more of b (a new process, a new segment). */
	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(store_sess_open(st, "xb", 0, &b), 0);
	fill(b, 11, 12);
	store_sess_close(b);
	store_close(st);
	ck_assert_int_eq(count_segments(), 2);
	age_segments(old);
	/* b's first records keep segment 1, though a expired. */
	st = open_store(STORE_FSYNC_NO);
	age("xa", "index", old);
	ck_assert_int_eq(store_expire(st, cutoff), 1);
	ck_assert_int_eq(count_segments(), 2);
	/* Trimmed (ts 1000 * seq: all old), b keeps its newest, in
	 * segment 2: segment 1 goes. */
	ck_assert_int_eq(store_sess_open(st, "xb", 0, &b), 0);
	ck_assert_int_eq(store_trim(b, cutoff), 11);
	store_sess_close(b);
	age_segments(old);
	ck_assert_int_eq(store_expire(st, cutoff), 0);
	ck_assert_int_eq(count_segments(), 1);
	ck_assert_int_eq(store_sess_open(st, "xb", 0, &b), 0);
	ck_assert_int_eq(range_count(b, 0, 0, NULL), 1);
	store_sess_close(b);
	/* A young segment stays whatever is in it. */
	ck_assert_int_eq(store_sess_open(st, "xc", 1, &a), 0);
	fill(a, 1, 3);
	store_sess_close(a);
	store_close(st);
	st = open_store(STORE_FSYNC_NO);
	ck_assert_int_eq(count_segments(), 2);
	ck_assert_int_eq(store_expire(st, UINT64_MAX), 2);	/* xb, xc */
	ck_assert_int_eq(count_segments(), 0);
	store_close(st);
}
END_TEST

/* A v1 log (today's format, torn at the end) is converted at open. */
START_TEST(test_v1_convert)
{
	static const char v1[] = "3 3000 {\"n\":3}\n4 4000 {\"n\":4}\n"
	    "5 5000 {\"n\":5}\n6 60";
	struct store		*st;
	struct store_sess	*s;
	uint64_t		 first;
	char			 p[512];

	st = open_store(STORE_FSYNC_ALWAYS);
	snprintf(p, sizeof(p), "%s/sessions/v1", tdir);
	ck_assert_int_eq(mkdir(p, 0750), 0);
	write_file("v1", "log", v1, sizeof(v1) - 1);
	write_file("v1", "meta", "{\"old\":1}", 9);
	ck_assert_int_eq(store_exists(st, "v1"), 1);
	ck_assert_int_eq(store_sess_open(st, "v1", 0, &s), 0);
	ck_assert_int_eq(file_size("v1", "log"), -1);
	ck_assert_int_eq(file_size("v1", "index"), 64 + 3 * 40);
	ck_assert_uint_eq(store_first_seq(s), 3);
	ck_assert_uint_eq(store_last_seq(s), 5);
	ck_assert_int_eq(range_count(s, 0, 0, &first), 3);
	ck_assert_uint_eq(first, 3);
	fill(s, 6, 8);
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "v1", 0, &s), 0);
	ck_assert_int_eq(range_count(s, 0, 0, &first), 6);
	/* A crash after the index was renamed in, before the log went. */
	write_file("v1", "log", v1, sizeof(v1) - 1);
	store_sess_close(s);
	ck_assert_int_eq(store_sess_open(st, "v1", 0, &s), 0);
	ck_assert_int_eq(file_size("v1", "log"), -1);
	ck_assert_uint_eq(store_last_seq(s), 8);
	/* A retained session keeps its v1 log. */
	snprintf(p, sizeof(p), "%s/sessions/kg:v1", tdir);
	ck_assert_msg(mkdir(p, 0750) == 0, "%s: %s", p, strerror(errno));
	write_file("kg:v1", "log", v1, sizeof(v1) - 1);
	ck_assert_int_eq(store_sess_open(st, "kg:v1", 0, &s), 0);
	ck_assert_uint_eq(store_last_seq(s), 5);
	ck_assert_int_eq(file_size("kg:v1", "index"), -1);
	ck_assert_int_eq(file_size("kg:v1", "log"), 45);
	store_close(st);
}
END_TEST

/* A segment of a later format: refused at open, said clearly. */
START_TEST(test_seg_version)
{
	unsigned char	 h[SEG_HDR_LEN];
	char		 p[512], err[256];
	uint32_t	 c;
	int		 fd;

	store_close(open_store(STORE_FSYNC_NO));	/* the directories */
	seg_hdr_encode(h, 7);
	h[8] = 9;
	c = seg_crc32c(0, h, 28);
	h[28] = (unsigned char)c;
	h[29] = (unsigned char)(c >> 8);
	h[30] = (unsigned char)(c >> 16);
	h[31] = (unsigned char)(c >> 24);
	snprintf(p, sizeof(p), "%s/segments/0000000000000007.seg", tdir);
	ck_assert_int_ne(fd = open(p, O_WRONLY | O_CREAT, 0640), -1);
	ck_assert_int_eq(write(fd, h, sizeof(h)), (ssize_t)sizeof(h));
	close(fd);
	errno = 0;
	ck_assert_ptr_null(store_open("local", tdir, STORE_FSYNC_NO, err,
	    sizeof(err)));
	ck_assert_int_eq(errno, EPROTONOSUPPORT);
	ck_assert_msg(strstr(err, "format version 9") != NULL, "%s", err);
}
END_TEST

static Suite *
seglog_suite(void)
{
	Suite	*su = suite_create("store_seglog");
	TCase	*tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_group_commit);
	tcase_add_test(tc, test_two_writers);
	tcase_add_test(tc, test_writer_died);
	tcase_add_test(tc, test_seg_trim_reopen);
	tcase_add_test(tc, test_expire_segments);
	tcase_add_test(tc, test_v1_convert);
	tcase_add_test(tc, test_seg_version);
	tcase_add_test(tc, test_open_read_error_keeps_index);
	tcase_add_test(tc, test_cut_rescans_under_lock);
	tcase_add_test(tc, test_meta_torn_keeps_newest);
	tcase_add_test(tc, test_idle_session_clean);
	tcase_add_test(tc, test_forget_drops_frames);
	tcase_add_test(tc, test_queue_buffer_shrinks);
	tcase_add_test(tc, test_lock_same_file);
	tcase_add_test(tc, test_stale_log_checked);
	tcase_add_test(tc, test_refs_blocks);
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	return check_run(seglog_suite());
}
