/*
 * Local store backend: plain files under the state directory, blocking
 * I/O, one process writing a session at a time.
 *
 * On-disk format:
 *
 *   STATE_DIR/sessions/<id>/        one directory per session (0750)
 *   STATE_DIR/sessions/<id>/log     the event log, one record per line:
 *                                     "<seq> <unix-ms> <json>\n"
 *                                   seq and unix-ms in decimal, seqs
 *                                   contiguous and increasing (the first
 *                                   may be > 1 once trimmed), json 1 byte
 *                                   or more without '\n', '\r' or NUL.
 *                                   Each record is appended with a single
 *                                   writev(), so a crash leaves at most a
 *                                   torn last line; open truncates it away
 *                                   (together with anything unparsable or
 *                                   out of sequence after it).
 *   STATE_DIR/sessions/<id>/meta    opaque JSON text, replaced atomically:
 *                                   meta.tmp, fsync, rename, fsync dir.
 *   STATE_DIR/sessions/<id>/kb/<name>
 *                                   one document of the session's
 *                                   knowledge base (store_doc_put):
 *                                   opaque JSON text, replaced as meta is
 *                                   through kb/.<name>.tmp (a leading '.'
 *                                   is never a name); kb/ is made by the
 *                                   first put and removed with the
 *                                   session.
 *   log.tmp, meta.tmp               leftovers of an interrupted trim or
 *                                   meta write; removed at open (a
 *                                   document's, by store_doc_all).
 *
 * While a session is open its log is flock()ed (LOCK_EX): a second writer
 * or another process's expiry sweep backs off, and the lock dies with a
 * SIGKILLed worker.  fsync modes: ALWAYS fdatasyncs every append; BATCH
 * leaves that to store_sync(); NO never syncs (meta and trim included).
 *
 * BATCH syncs on a thread of its own: one fdatasync per dirty log in the
 * event loop stalled every client of the worker (1,000 streaming sessions:
 * 1,000 fdatasyncs every 200 ms, p99 delivery 210 ms), and so did the four
 * fsyncs of a new session's directory and meta (1,000 sessions starting
 * together: seconds).  store_sync() asks the thread for one syncfs() of
 * the sessions directory's filesystem, which covers every log written so
 * far, open or closed; it never waits, and requests made while a sync
 * runs are served by one more.  Once the store is attached to an event
 * loop, a meta write is meta.tmp written and renamed over meta in the
 * loop, with no fsync there, and a new session's directory is not synced
 * either: both are left to a sync within 200 ms.  A crashed process
 * leaves the old meta or the new one, as before; a power failure loses at
 * most what the thread had not synced yet, like the appends, and relies
 * on the file system ordering a replacing rename after the file's data
 * (ext4's default does) for meta to be whole.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/log.h"
#include "parley/store.h"

#define LOCAL_BLOCK	(256u * 1024)		/* read size for scan and range */
#define LOCAL_HDR_MAX	48			/* "<seq> <ts> " worst case */
#define LOCAL_LINE_MAX	(STORE_JSON_MAX + LOCAL_HDR_MAX + 1)

/* The BATCH sync thread; mu guards the fields after it. */
struct local_syncer {
	pthread_t		 thr;
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	int			 want;		/* a sync asked for */
	int			 stop;		/* exit once nothing is asked */
	int			 err;		/* errno of a failed sync, or 0 */
	uint64_t		 done;		/* syncs completed */
};

struct local_store {
	struct store		 base;		/* first: store.c casts */
	int			 sessfd;	/* STATE_DIR/sessions */
	int			 unsynced;	/* closed logs, new dirs */
	int			 syncer_on;	/* thread and syncer initialised */
	int			 nothread_said;
	struct event		*soon_ev;	/* a sync within 200 ms */
	struct local_syncer	 syncer;
};

struct local_sess {
	struct store_sess	 base;		/* first: store.c casts */
	int			 dirfd;
	int			 logfd;
	int			 dirty;		/* appends since last fsync */
	int			 broken;	/* failed write not undone */
	off_t			*idx;		/* [i]: seq first+i; [n]: end */
	size_t			 n;		/* records */
	size_t			 cap;		/* entries allocated in idx */
};

static struct store	*local_open(const char *, const char *,
			    enum store_fsync, char *, size_t);
static void		 local_close(struct store *);
static int		 local_exists(struct store *, const char *);
static int		 local_sess_open(struct store *, const char *, int,
			    struct store_sess **);
static void		 local_sess_close(struct store_sess *);
static int		 local_append(struct store_sess *, uint64_t, uint64_t,
			    const char *, size_t);
static int		 local_range(struct store_sess *, uint64_t, size_t,
			    store_range_cb, void *);
static int		 local_meta_write(struct store_sess *, const char *,
			    size_t);
static char		*local_meta_read(struct store_sess *);
static char		*local_meta_peek(struct store *, const char *);
static void		 local_sync(struct store *);
static int		 local_trim(struct store_sess *, uint64_t);
static int		 local_expire(struct store *, uint64_t);
static int		 local_doc_put(struct store_sess *, const char *,
			    const char *, size_t);
static int		 local_doc_del(struct store_sess *, const char *);
static ssize_t		 local_doc_all(struct store_sess *, store_doc_cb,
			    void *);

const struct store_ops store_local_ops = {
	.scheme = "local",
	.open = local_open,
	.close = local_close,
	.exists = local_exists,
	.sess_open = local_sess_open,
	.sess_close = local_sess_close,
	.append = local_append,
	.range = local_range,
	.meta_write = local_meta_write,
	.meta_read = local_meta_read,
	.meta_peek = local_meta_peek,
	.sync = local_sync,
	.trim = local_trim,
	.expire = local_expire,
	.doc_put = local_doc_put,
	.doc_del = local_doc_del,
	.doc_all = local_doc_all,
};

static int
local_nosync(const struct store *st)
{
	return st->fsync == STORE_FSYNC_NO;
}

/* BATCH in a worker: meta writes and new directories are synced off the
 * event loop, by the sync thread. */
static int
local_async(const struct store *st)
{
	return st->fsync == STORE_FSYNC_BATCH && st->attached &&
	    st->params.base != NULL;
}

/* mkdir -p with mode 0750; 0 or -1 with errno. */
static int
local_mkdirs(const char *path)
{
	char	 buf[PATH_MAX];
	size_t	 i, len;

	len = strlen(path);
	if (len == 0 || len >= sizeof(buf)) {
		errno = len == 0 ? EINVAL : ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		if (buf[i - 1] == '/')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0750) == -1 && errno != EEXIST)
			return -1;
		buf[i] = path[i];
	}
	return 0;
}

static struct store *
local_open(const char *url, const char *state_dir, enum store_fsync fs,
    char *err, size_t errlen)
{
	struct local_store	*ls;
	int			 fd, save;

	(void)url;
	(void)fs;
	if (local_mkdirs(state_dir) == -1) {
		save = errno;
		snprintf(err, errlen, "%s: %s", state_dir, strerror(save));
		errno = save;
		return NULL;
	}
	if ((fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		save = errno;
		snprintf(err, errlen, "%s: %s", state_dir, strerror(save));
		errno = save;
		return NULL;
	}
	if ((mkdirat(fd, "sessions", 0750) == -1 && errno != EEXIST)) {
		save = errno;
		snprintf(err, errlen, "%s/sessions: %s", state_dir,
		    strerror(save));
		close(fd);
		errno = save;
		return NULL;
	}
	if ((ls = calloc(1, sizeof(*ls))) == NULL) {
		save = errno;
		snprintf(err, errlen, "store: %s", strerror(save));
		close(fd);
		errno = save;
		return NULL;
	}
	ls->sessfd = openat(fd, "sessions", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC | O_NOFOLLOW);
	save = errno;
	close(fd);
	if (ls->sessfd == -1) {
		snprintf(err, errlen, "%s/sessions: %s", state_dir,
		    strerror(save));
		free(ls);
		errno = save;
		return NULL;
	}
	return &ls->base;
}

static void	local_syncer_stop(struct local_store *);
static void	local_syncfs(struct local_store *);
static void	local_sync_soon(struct local_store *);

static void
local_close(struct store *st)
{
	struct local_store	*ls = (struct local_store *)st;

	/* Sessions are closed by now: their unsynced appends are in
	 * unsynced.  No thread is started for a last sync. */
	if (ls->syncer_on)
		local_sync(st);
	else if (ls->unsynced && !local_nosync(st))
		local_syncfs(ls);
	local_syncer_stop(ls);
	if (ls->soon_ev != NULL)
		event_free(ls->soon_ev);
	close(ls->sessfd);
	free(ls);
}

/* "<id>/<file>" into buf; ids are checked, so it always fits. */
static void
local_path(char *buf, size_t len, const char *id, const char *file)
{
	snprintf(buf, len, "%.*s/%s", STORE_ID_MAX, id, file);
}

static int
local_exists(struct store *st, const char *id)
{
	struct local_store	*ls = (struct local_store *)st;
	char			 path[STORE_ID_MAX + 16];
	struct stat		 sb;

	local_path(path, sizeof(path), id, "meta");
	if (fstatat(ls->sessfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	local_path(path, sizeof(path), id, "log");
	return fstatat(ls->sessfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Decimal digits at p[*i..len) into *out, advancing *i; -1 if none/overflow. */
static int
local_parse_u64(const char *p, size_t len, size_t *i, uint64_t *out)
{
	uint64_t	 v = 0;
	size_t		 start = *i;
	unsigned	 d;

	while (*i < len && p[*i] >= '0' && p[*i] <= '9') {
		d = (unsigned)(p[*i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		(*i)++;
	}
	if (*i == start)
		return -1;
	*out = v;
	return 0;
}

/* Parses one line without its '\n'; *joff is where the json starts. */
static int
local_parse(const char *p, size_t len, uint64_t *seq, uint64_t *ts,
    size_t *joff)
{
	size_t	 i = 0;

	if (local_parse_u64(p, len, &i, seq) == -1 || i >= len || p[i] != ' ')
		return -1;
	i++;
	if (local_parse_u64(p, len, &i, ts) == -1 || i >= len || p[i] != ' ')
		return -1;
	i++;
	if (i >= len || *seq == 0)
		return -1;
	*joff = i;
	return 0;
}

/* Makes room for need index entries. */
static int
local_idx_reserve(struct local_sess *ls, size_t need)
{
	off_t	*p;
	size_t	 ncap;

	if (need <= ls->cap)
		return 0;
	/* Small first: most sessions are short, and idle ones many. */
	ncap = ls->cap ? ls->cap : 16;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2 / sizeof(off_t)) {
			errno = ENOMEM;
			return -1;
		}
		ncap *= 2;
	}
	if ((p = reallocarray(ls->idx, ncap, sizeof(off_t))) == NULL)
		return -1;
	ls->idx = p;
	ls->cap = ncap;
	return 0;
}

/*
 * Builds the index from the log in one pass, truncating a torn or
 * inconsistent tail.  0 or -1 with errno.
 */
static int
local_scan(struct local_sess *ls)
{
	struct store_sess	*s = &ls->base;
	char			*buf, *nl, *nbuf;
	size_t			 cap = LOCAL_BLOCK, have = 0, pos = 0, linelen;
	size_t			 joff, ncap;
	off_t			 base = 0, good = 0;
	uint64_t		 seq, ts, first = 0, prev = 0;
	ssize_t			 r;
	int			 eof = 0, torn = 0, save;

	ls->n = 0;
	if (local_idx_reserve(ls, 1) == -1)
		return -1;
	if ((buf = malloc(cap)) == NULL)
		return -1;
	while (!torn) {
		while ((nl = memchr(buf + pos, '\n', have - pos)) != NULL) {
			linelen = (size_t)(nl - (buf + pos));
			if (local_parse(buf + pos, linelen, &seq, &ts,
			    &joff) == -1 ||
			    (ls->n > 0 && (prev == UINT64_MAX ||
			    seq != prev + 1))) {
				torn = 1;
				break;
			}
			if (local_idx_reserve(ls, ls->n + 2) == -1)
				goto fail;
			ls->idx[ls->n++] = base + (off_t)pos;
			if (ls->n == 1)
				first = seq;
			prev = seq;
			pos += linelen + 1;
			good = base + (off_t)pos;
		}
		if (torn || eof)
			break;
		if (pos > 0) {
			memmove(buf, buf + pos, have - pos);
			base += (off_t)pos;
			have -= pos;
			pos = 0;
		}
		if (have == cap) {
			/* Longer than any record append writes. */
			if (cap >= LOCAL_LINE_MAX) {
				torn = 1;
				break;
			}
			ncap = cap * 2 < LOCAL_LINE_MAX ? cap * 2 :
			    LOCAL_LINE_MAX;
			if ((nbuf = realloc(buf, ncap)) == NULL)
				goto fail;
			buf = nbuf;
			cap = ncap;
		}
		r = pread(ls->logfd, buf + have, cap - have,
		    base + (off_t)have);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		if (r == 0)
			eof = 1;
		else
			have += (size_t)r;
	}
	if (torn || base + (off_t)have > good) {
		log_warnx("store: session %s: truncating torn log at offset "
		    "%lld", s->id, (long long)good);
		if (ftruncate(ls->logfd, good) == -1)
			goto fail;
		if (!local_nosync(s->store) && fdatasync(ls->logfd) == -1)
			goto fail;
	}
	free(buf);
	ls->idx[ls->n] = good;
	s->first_seq = ls->n > 0 ? first : 1;
	s->last_seq = ls->n > 0 ? prev : 0;
	return 0;
fail:
	save = errno;
	free(buf);
	errno = save;
	return -1;
}

/*
 * A session's directory is opened for the operation that needs it (a
 * meta write, a trim): an open session holds only its log, so an idle one
 * costs one descriptor, not two.
 */
static int
local_dir_open(struct local_sess *ls)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;

	ls->dirfd = openat(lst->sessfd, ls->base.id, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC | O_NOFOLLOW);
	return ls->dirfd == -1 ? -1 : 0;
}

static void
local_dir_close(struct local_sess *ls)
{
	int	save = errno;

	if (ls->dirfd != -1)
		close(ls->dirfd);
	ls->dirfd = -1;
	errno = save;
}

static int
local_unlink_tmp(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) == -1 && errno != ENOENT)
		return -1;
	return 0;
}

static int
local_sess_open(struct store *st, const char *id, int create,
    struct store_sess **out)
{
	struct local_store	*lst = (struct local_store *)st;
	struct local_sess	*ls;
	struct stat		 sb;
	int			 made = 0, tries, save;

	if ((ls = calloc(1, sizeof(*ls))) == NULL)
		return -1;
	ls->dirfd = ls->logfd = -1;
	/* A concurrent expiry may remove the directory between the two. */
	for (tries = 0; tries < 2; tries++) {
		if (create) {
			if (mkdirat(lst->sessfd, id, 0750) == 0)
				made = 1;
			else if (errno != EEXIST)
				goto fail;
		}
		ls->dirfd = openat(lst->sessfd, id, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC | O_NOFOLLOW);
		if (ls->dirfd != -1 || errno != ENOENT || !create)
			break;
	}
	if (ls->dirfd == -1)
		goto fail;
	if (!create && fstatat(ls->dirfd, "log", &sb,
	    AT_SYMLINK_NOFOLLOW) == -1 && fstatat(ls->dirfd, "meta", &sb,
	    AT_SYMLINK_NOFOLLOW) == -1) {
		errno = ENOENT;
		goto fail;
	}
	ls->logfd = openat(ls->dirfd, "log", O_RDWR | O_APPEND | O_CREAT |
	    O_CLOEXEC | O_NOFOLLOW, 0640);
	if (ls->logfd == -1)
		goto fail;
	if (flock(ls->logfd, LOCK_EX | LOCK_NB) == -1) {
		if (errno == EWOULDBLOCK)
			errno = EBUSY;
		goto fail;
	}
	if (local_unlink_tmp(ls->dirfd, "log.tmp") == -1 ||
	    local_unlink_tmp(ls->dirfd, "meta.tmp") == -1)
		goto fail;
	/* BATCH in a worker: the sync thread makes the new directory
	 * durable, off the loop. */
	if (made && local_async(st))
		local_sync_soon(lst);
	else if (made && !local_nosync(st) &&
	    (fsync(ls->dirfd) == -1 || fsync(lst->sessfd) == -1))
		goto fail;
	ls->base.store = st;
	memcpy(ls->base.id, id, strlen(id) + 1);
	if (local_scan(ls) == -1)
		goto fail;
	local_dir_close(ls);
	*out = &ls->base;
	return 0;
fail:
	save = errno;
	if (ls->logfd != -1)
		close(ls->logfd);
	if (ls->dirfd != -1)
		close(ls->dirfd);
	free(ls->idx);
	free(ls);
	errno = save;
	return -1;
}

static void
local_sess_close(struct store_sess *s)
{
	struct local_sess	*ls = (struct local_sess *)s;

	/* The next store_sync() covers it: syncfs needs no descriptor. */
	if (ls->dirty)
		((struct local_store *)s->store)->unsynced = 1;
	close(ls->logfd);
	local_dir_close(ls);
	free(ls->idx);
	free(ls);
}

static int
local_append(struct store_sess *s, uint64_t seq, uint64_t ts_ms,
    const char *json, size_t len)
{
	struct local_sess	*ls = (struct local_sess *)s;
	char			 hdr[LOCAL_HDR_MAX];
	struct iovec		 iov[3];
	size_t			 total;
	ssize_t			 r;
	off_t			 end;
	int			 hl, save;

	if (ls->broken) {
		errno = EIO;
		return -1;
	}
	/* Grow first: a written record must always make it into the index. */
	if (local_idx_reserve(ls, ls->n + 2) == -1)
		return -1;
	hl = snprintf(hdr, sizeof(hdr), "%" PRIu64 " %" PRIu64 " ", seq,
	    ts_ms);
	iov[0].iov_base = hdr;
	iov[0].iov_len = (size_t)hl;
	iov[1].iov_base = (void *)(uintptr_t)json;
	iov[1].iov_len = len;
	iov[2].iov_base = (void *)(uintptr_t)"\n";
	iov[2].iov_len = 1;
	total = (size_t)hl + len + 1;
	end = ls->idx[ls->n];
	do {
		r = writev(ls->logfd, iov, 3);
	} while (r == -1 && errno == EINTR);
	if (r == -1 || (size_t)r != total ||
	    (s->store->fsync == STORE_FSYNC_ALWAYS &&
	    fdatasync(ls->logfd) == -1)) {
		save = (r == -1 || (size_t)r == total) ? errno : ENOSPC;
		/* Leave no torn or unsynced record behind. */
		if (ftruncate(ls->logfd, end) == -1) {
			log_warn("store: session %s: cannot undo failed append",
			    s->id);
			ls->broken = 1;
		}
		errno = save;
		return -1;
	}
	ls->idx[++ls->n] = end + (off_t)total;
	if (ls->n == 1)
		s->first_seq = seq;
	s->last_seq = seq;
	if (s->store->fsync == STORE_FSYNC_BATCH)
		ls->dirty = 1;
	return 0;
}

/* Reads exactly len bytes at off; a short file means the index is stale. */
static int
local_pread_full(int fd, char *buf, size_t len, off_t off)
{
	ssize_t	 r;
	size_t	 got = 0;

	while (got < len) {
		r = pread(fd, buf + got, len - got, off + (off_t)got);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

/*
 * Delivers records i..i+count-1 to cb, reading whole records in large
 * blocks.  Returns records delivered or -1.  cb may append to the session
 * (the index is re-read each time) but must not trim it.
 */
static int
local_iter(struct local_sess *ls, size_t i, size_t count, store_range_cb cb,
    void *arg)
{
	struct store_sess	*s = &ls->base;
	char			*buf, *nbuf;
	size_t			 cap = LOCAL_BLOCK, done = 0, want, j, joff;
	off_t			 off, rs, re;
	uint64_t		 seq, ts;
	int			 save;

	if (count > INT_MAX)
		count = INT_MAX;
	if ((buf = malloc(cap)) == NULL)
		return -1;
	while (done < count) {
		off = ls->idx[i + done];
		re = ls->idx[i + done + 1];
		if (re - off > (off_t)LOCAL_LINE_MAX) {
			errno = EIO;
			goto fail;
		}
		if ((size_t)(re - off) > cap) {
			if ((nbuf = realloc(buf, (size_t)(re - off))) == NULL)
				goto fail;
			buf = nbuf;
			cap = (size_t)(re - off);
		}
		want = (size_t)(ls->idx[i + count] - off) < cap ?
		    (size_t)(ls->idx[i + count] - off) : cap;
		if (local_pread_full(ls->logfd, buf, want, off) == -1)
			goto fail;
		while (done < count) {
			j = i + done;
			rs = ls->idx[j] - off;
			re = ls->idx[j + 1] - off;
			if (re > (off_t)want)
				break;
			if (re - rs < 2 || buf[re - 1] != '\n' ||
			    local_parse(buf + rs, (size_t)(re - rs - 1), &seq,
			    &ts, &joff) == -1 || seq != s->first_seq + j) {
				log_warnx("store: session %s: log does not match "
				    "its index at offset %lld", s->id,
				    (long long)ls->idx[j]);
				errno = EIO;
				goto fail;
			}
			buf[re - 1] = '\0';
			done++;
			if (cb(arg, seq, ts, buf + rs + joff,
			    (size_t)(re - rs - 1) - joff) != 0)
				goto out;
		}
	}
out:
	free(buf);
	return (int)done;
fail:
	save = errno;
	free(buf);
	errno = save;
	return -1;
}

static int
local_range(struct store_sess *s, uint64_t after, size_t limit,
    store_range_cb cb, void *arg)
{
	struct local_sess	*ls = (struct local_sess *)s;
	size_t			 i, count;

	if (ls->n == 0 || after >= s->last_seq)
		return 0;
	i = after < s->first_seq ? 0 : (size_t)(after - s->first_seq + 1);
	count = ls->n - i;
	if (limit != 0 && limit < count)
		count = limit;
	return local_iter(ls, i, count, cb, arg);
}

static int
local_write_full(int fd, const char *p, size_t len)
{
	ssize_t	 r;

	while (len > 0) {
		if ((r = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/*
 * Replaces dirfd's file name with json atomically: tmp written (and
 * fsynced unless nosync), renamed over name, the directory fsynced.  0,
 * or -1 with errno and no tmp left behind.
 */
static int
local_replace(int dirfd, const char *tmp, const char *name, const char *json,
    size_t len, int nosync)
{
	int	 fd, save;

	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0640);
	if (fd == -1)
		return -1;
	if (local_write_full(fd, json, len) == -1 ||
	    (!nosync && fsync(fd) == -1)) {
		save = errno;
		close(fd);
		unlinkat(dirfd, tmp, 0);
		errno = save;
		return -1;
	}
	if (close(fd) == -1 || renameat(dirfd, tmp, dirfd, name) == -1) {
		save = errno;
		unlinkat(dirfd, tmp, 0);
		errno = save;
		return -1;
	}
	if (!nosync && fsync(dirfd) == -1)
		return -1;
	return 0;
}

static int
local_meta_write_in(struct store_sess *s, const char *json, size_t len)
{
	struct local_sess	*ls = (struct local_sess *)s;

	/* BATCH in a worker: the sync thread makes it durable. */
	return local_replace(ls->dirfd, "meta.tmp", "meta", json, len,
	    local_nosync(s->store) || local_async(s->store));
}

static int
local_meta_write(struct store_sess *s, const char *json, size_t len)
{
	struct local_sess	*ls = (struct local_sess *)s;
	int			 r;

	if (local_dir_open(ls) == -1)
		return -1;
	r = local_meta_write_in(s, json, len);
	local_dir_close(ls);
	/* Synced by the thread (local_meta_write_in did not). */
	if (r == 0 && local_async(s->store))
		local_sync_soon((struct local_store *)s->store);
	return r;
}

/*
 * Reads a whole file of at most max bytes as a C string (its length in
 * *lenp when not NULL): malloc'd, or NULL with errno (EFBIG larger,
 * EINVAL not a regular file).
 */
static char *
local_read_file(int atfd, const char *path, size_t max, size_t *lenp)
{
	struct stat	 sb;
	char		*buf;
	size_t		 got = 0;
	ssize_t		 r;
	int		 fd, save;

	if ((fd = openat(atfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return NULL;
	if (fstat(fd, &sb) == -1) {
		save = errno;
		close(fd);
		errno = save;
		return NULL;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_size > (off_t)max) {
		close(fd);
		errno = S_ISREG(sb.st_mode) ? EFBIG : EINVAL;
		return NULL;
	}
	if ((buf = malloc((size_t)sb.st_size + 1)) == NULL) {
		save = errno;
		close(fd);
		errno = save;
		return NULL;
	}
	while (got < (size_t)sb.st_size) {
		r = read(fd, buf + got, (size_t)sb.st_size - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			save = errno;
			free(buf);
			close(fd);
			errno = save;
			return NULL;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	if (lenp != NULL)
		*lenp = got;
	return buf;
}

/* Reads a whole small file (at most STORE_META_MAX) as a C string. */
static char *
local_read_text(int atfd, const char *path)
{
	return local_read_file(atfd, path, STORE_META_MAX, NULL);
}

static char *
local_meta_read(struct store_sess *s)
{
	struct local_sess	*ls = (struct local_sess *)s;
	char			*t;

	if (local_dir_open(ls) == -1)
		return NULL;
	t = local_read_text(ls->dirfd, "meta");
	local_dir_close(ls);
	return t;
}

static char *
local_meta_peek(struct store *st, const char *id)
{
	char	 path[STORE_ID_MAX + 16];

	local_path(path, sizeof(path), id, "meta");
	return local_read_text(((struct local_store *)st)->sessfd, path);
}

/* --- documents --- */

/*
 * The session's kb directory (mk: created if missing, durable as a new
 * session directory is): a descriptor, or -1 with errno (ENOENT: none).
 */
static int
local_kb_open(struct local_sess *ls, int mk)
{
	struct store	*st = ls->base.store;
	int		 fd, made = 0;

	if (local_dir_open(ls) == -1)
		return -1;
	if (mk) {
		if (mkdirat(ls->dirfd, "kb", 0750) == 0)
			made = 1;
		else if (errno != EEXIST)
			goto fail;
	}
	fd = openat(ls->dirfd, "kb", O_RDONLY | O_DIRECTORY | O_CLOEXEC |
	    O_NOFOLLOW);
	if (fd == -1)
		goto fail;
	if (made && local_async(st))
		local_sync_soon((struct local_store *)st);
	else if (made && !local_nosync(st) && fsync(ls->dirfd) == -1) {
		close(fd);
		goto fail;
	}
	local_dir_close(ls);
	return fd;
fail:
	local_dir_close(ls);
	return -1;
}

/* The temporary of a document: a leading '.', so never a valid name. */
static void
local_doc_tmp(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, ".%.*s.tmp", STORE_ID_MAX, name);
}

/* Once the kb directory changed: durable as a meta write is. */
static int
local_kb_synced(struct store *st, int kfd)
{
	if (local_async(st)) {
		local_sync_soon((struct local_store *)st);
		return 0;
	}
	if (!local_nosync(st) && fsync(kfd) == -1)
		return -1;
	return 0;
}

static int
local_doc_put(struct store_sess *s, const char *name, const char *json,
    size_t len)
{
	char	 tmp[STORE_ID_MAX + 8];
	int	 kfd, r, save;

	if ((kfd = local_kb_open((struct local_sess *)s, 1)) == -1)
		return -1;
	local_doc_tmp(tmp, sizeof(tmp), name);
	/* BATCH in a worker: the sync thread makes it durable. */
	r = local_replace(kfd, tmp, name, json, len,
	    local_nosync(s->store) || local_async(s->store));
	if (r == 0 && local_async(s->store))
		local_sync_soon((struct local_store *)s->store);
	save = errno;
	close(kfd);
	errno = save;
	return r;
}

static int
local_doc_del(struct store_sess *s, const char *name)
{
	int	 kfd, r, save;

	if ((kfd = local_kb_open((struct local_sess *)s, 0)) == -1)
		return errno == ENOENT ? 0 : -1;
	if (unlinkat(kfd, name, 0) == -1)
		r = errno == ENOENT ? 0 : -1;
	else
		r = local_kb_synced(s->store, kfd) == -1 ? -1 : 1;
	save = errno;
	close(kfd);
	errno = save;
	return r;
}

/* 1 if a directory entry is a document's leftover temporary. */
static int
local_doc_is_tmp(const char *n)
{
	size_t	 len = strlen(n);

	return n[0] == '.' && len > 5 && strcmp(n + len - 4, ".tmp") == 0;
}

static ssize_t
local_doc_all(struct store_sess *s, store_doc_cb cb, void *arg)
{
	struct dirent	*de;
	DIR		*d;
	char		*json;
	size_t		 len;
	ssize_t		 n = 0;
	int		 kfd, save, stop = 0;

	if ((kfd = local_kb_open((struct local_sess *)s, 0)) == -1)
		return errno == ENOENT ? 0 : -1;
	if ((d = fdopendir(kfd)) == NULL) {
		save = errno;
		close(kfd);
		errno = save;
		return -1;
	}
	while (!stop && (de = readdir(d)) != NULL) {
		/* A write that died before its rename (the session is ours:
		 * nobody else is writing it). */
		if (local_doc_is_tmp(de->d_name)) {
			if (unlinkat(kfd, de->d_name, 0) == -1 &&
			    errno != ENOENT)
				log_warn("store: session %s: kb/%s", s->id,
				    de->d_name);
			continue;
		}
		if (!store_valid_id(de->d_name))
			continue;
		json = local_read_file(kfd, de->d_name, STORE_DOC_MAX, &len);
		if (json == NULL) {
			if (errno == ENOENT)
				continue;
			if (errno != EFBIG && errno != EINVAL)
				goto fail;
		}
		/* Never written by local_doc_put: left alone, and said. */
		if (json == NULL || len == 0 || memchr(json, '\0', len)) {
			log_warnx("store: session %s: kb/%s is not a document "
			    "(not a file, empty, over %u bytes or with a NUL); "
			    "skipped: remove it", s->id, de->d_name,
			    STORE_DOC_MAX);
			free(json);
			continue;
		}
		n++;
		stop = cb(arg, de->d_name, json, len) != 0;
		free(json);
	}
	closedir(d);
	return n;
fail:
	save = errno;
	closedir(d);
	errno = save;
	return -1;
}

/*
 * Removes an expiring session's kb directory and its documents.  An
 * unlink during readdir may hide an entry, so it looks again (a bounded
 * number of times) while the directory is not empty.
 */
static void
local_kb_remove(struct local_store *lst, const char *id)
{
	char		 path[STORE_ID_MAX + 16];
	struct dirent	*de;
	DIR		*d;
	int		 fd, pass;

	local_path(path, sizeof(path), id, "kb");
	for (pass = 0; pass < 3; pass++) {
		fd = openat(lst->sessfd, path, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC | O_NOFOLLOW);
		if (fd == -1) {
			if (errno != ENOENT)
				log_warn("store: expire %s", path);
			return;
		}
		if ((d = fdopendir(fd)) == NULL) {
			log_warn("store: expire %s", path);
			close(fd);
			return;
		}
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			/* (an empty directory someone made there too) */
			if (unlinkat(fd, de->d_name, 0) == -1 &&
			    (errno != EISDIR || unlinkat(fd, de->d_name,
			    AT_REMOVEDIR) == -1) && errno != ENOENT)
				log_warn("store: expire %s/%s", path,
				    de->d_name);
		}
		closedir(d);
		if (unlinkat(lst->sessfd, path, AT_REMOVEDIR) == 0 ||
		    errno == ENOENT)
			return;
		if (errno != ENOTEMPTY && errno != EEXIST)
			break;
	}
	log_warn("store: expire %s", path);
}

static void
sync_failed(int err)
{
	errno = err;
	log_warn("store: syncfs of the sessions directory");
}

/* Syncs in the calling thread: at close, or when no thread could start. */
static void
local_syncfs(struct local_store *ls)
{
	if (syncfs(ls->sessfd) == -1)
		sync_failed(errno);
}

/* The sync thread: one syncfs() per request, requests made meanwhile
 * served by one more. */
static void *
local_syncer_main(void *arg)
{
	struct local_store	*ls = arg;
	struct local_syncer	*sy = &ls->syncer;
	int			 r, save;

	pthread_mutex_lock(&sy->mu);
	for (;;) {
		while (!sy->want && !sy->stop)
			pthread_cond_wait(&sy->cv, &sy->mu);
		if (!sy->want)
			break;
		sy->want = 0;
		pthread_mutex_unlock(&sy->mu);
		r = syncfs(ls->sessfd);
		save = errno;
		pthread_mutex_lock(&sy->mu);
		if (r == -1)
			sy->err = save;
		sy->done++;
	}
	pthread_mutex_unlock(&sy->mu);
	return NULL;
}

/* Starts the sync thread, signals blocked in it; 0, or -1 (sync inline). */
static int
local_syncer_start(struct local_store *ls)
{
	struct local_syncer	*sy = &ls->syncer;
	sigset_t		 all, old;
	int			 r;

	if (ls->syncer_on)
		return 0;
	if (pthread_mutex_init(&sy->mu, NULL) != 0)
		return -1;
	if (pthread_cond_init(&sy->cv, NULL) != 0) {
		pthread_mutex_destroy(&sy->mu);
		return -1;
	}
	/* Signals stay with the event loop's thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&sy->thr, NULL, local_syncer_main, ls);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		pthread_cond_destroy(&sy->cv);
		pthread_mutex_destroy(&sy->mu);
		errno = r;
		return -1;
	}
	ls->syncer_on = 1;
	return 0;
}

/* Serves what is still asked for, then joins the thread. */
static void
local_syncer_stop(struct local_store *ls)
{
	struct local_syncer	*sy = &ls->syncer;

	if (!ls->syncer_on)
		return;
	pthread_mutex_lock(&sy->mu);
	sy->stop = 1;
	pthread_cond_broadcast(&sy->cv);
	pthread_mutex_unlock(&sy->mu);
	pthread_join(sy->thr, NULL);
	if (sy->err != 0)
		sync_failed(sy->err);
	pthread_cond_destroy(&sy->cv);
	pthread_mutex_destroy(&sy->mu);
	ls->syncer_on = 0;
}

/*
 * Asks the sync thread for a sync of everything written so far and
 * returns; reports a sync that failed since the last call.  Without a
 * thread it syncs here.
 */
static void
local_kick(struct local_store *lst)
{
	struct local_syncer	*sy = &lst->syncer;
	int			 err;

	if (local_syncer_start(lst) == -1) {
		if (!lst->nothread_said)
			log_warn("store: no sync thread; syncing in the "
			    "event loop");
		lst->nothread_said = 1;
		local_syncfs(lst);
		return;
	}
	pthread_mutex_lock(&sy->mu);
	sy->want = 1;
	err = sy->err;
	sy->err = 0;
	pthread_cond_broadcast(&sy->cv);
	pthread_mutex_unlock(&sy->mu);
	if (err != 0)
		sync_failed(err);
}

static void
local_soon_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	local_sync(arg);
}

/*
 * A meta write or a new directory, in a worker: synced with the appends
 * within 200 ms (one syncfs for all of them), not each at once, which
 * kept the thread syncing and the loop's own file calls waiting on it.
 */
static void
local_sync_soon(struct local_store *lst)
{
	struct timeval	 tv = { 0, 200 * 1000 };

	lst->unsynced = 1;
	if (lst->soon_ev == NULL && (lst->soon_ev = evtimer_new(
	    lst->base.params.base, local_soon_cb, lst)) == NULL) {
		local_sync(&lst->base);
		return;
	}
	if (!evtimer_pending(lst->soon_ev, NULL))
		evtimer_add(lst->soon_ev, &tv);
}

/* BATCH: every append so far, through the sync thread (local_kick). */
static void
local_sync(struct store *st)
{
	struct local_store	*lst = (struct local_store *)st;
	struct store_sess	*s;
	struct local_sess	*ls;
	int			 any = lst->unsynced;

	if (local_nosync(st))
		return;
	LIST_FOREACH(s, &st->sessions, entry) {
		ls = (struct local_sess *)s;
		any |= ls->dirty;
		ls->dirty = 0;
	}
	lst->unsynced = 0;
	if (any)
		local_kick(lst);
}

struct local_trim_arg {
	uint64_t	 cutoff;
	size_t		 drop;
};

static int
local_trim_cb(void *arg, uint64_t seq, uint64_t ts_ms, const char *json,
    size_t len)
{
	struct local_trim_arg	*ta = arg;

	(void)seq;
	(void)json;
	(void)len;
	if (ts_ms >= ta->cutoff)
		return 1;
	ta->drop++;
	return 0;
}

static int
local_trim_in(struct store_sess *s, uint64_t cutoff_ms)
{
	struct local_sess	*ls = (struct local_sess *)s;
	struct local_trim_arg	 ta = { cutoff_ms, 0 };
	char			*buf = NULL;
	off_t			 from, end, pos;
	size_t			 k, chunk;
	int			 tfd = -1, save, nosync = local_nosync(s->store);

	if (ls->broken) {
		errno = EIO;
		return -1;
	}
	/* The newest record stays, so last_seq survives a restart. */
	if (ls->n < 2)
		return 0;
	if (local_iter(ls, 0, ls->n - 1, local_trim_cb, &ta) == -1)
		return -1;
	if (ta.drop == 0)
		return 0;
	from = ls->idx[ta.drop];
	end = ls->idx[ls->n];
	if ((buf = malloc(LOCAL_BLOCK)) == NULL)
		return -1;
	tfd = openat(ls->dirfd, "log.tmp", O_RDWR | O_APPEND | O_CREAT |
	    O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (tfd == -1)
		goto fail;
	/* Hold the lock on the file that becomes the log. */
	if (flock(tfd, LOCK_EX | LOCK_NB) == -1)
		goto fail;
	for (pos = from; pos < end; pos += (off_t)chunk) {
		chunk = end - pos < (off_t)LOCAL_BLOCK ? (size_t)(end - pos) :
		    LOCAL_BLOCK;
		if (local_pread_full(ls->logfd, buf, chunk, pos) == -1 ||
		    local_write_full(tfd, buf, chunk) == -1)
			goto fail;
	}
	if (!nosync && fsync(tfd) == -1)
		goto fail;
	if (renameat(ls->dirfd, "log.tmp", ls->dirfd, "log") == -1)
		goto fail;
	free(buf);
	if (!nosync && fsync(ls->dirfd) == -1)
		log_warn("store: session %s: fsync after trim", s->id);
	close(ls->logfd);
	ls->logfd = tfd;
	ls->dirty = 0;
	memmove(ls->idx, ls->idx + ta.drop,
	    (ls->n - ta.drop + 1) * sizeof(ls->idx[0]));
	ls->n -= ta.drop;
	for (k = 0; k <= ls->n; k++)
		ls->idx[k] -= from;
	s->first_seq += ta.drop;
	return (int)(ta.drop > INT_MAX ? INT_MAX : ta.drop);
fail:
	save = errno;
	if (tfd != -1) {
		close(tfd);
		unlinkat(ls->dirfd, "log.tmp", 0);
	}
	free(buf);
	errno = save;
	return -1;
}

static int
local_trim(struct store_sess *s, uint64_t cutoff_ms)
{
	struct local_sess	*ls = (struct local_sess *)s;
	int			 r;

	if (local_dir_open(ls) == -1)
		return -1;
	r = local_trim_in(s, cutoff_ms);
	local_dir_close(ls);
	return r;
}

static uint64_t
local_mtime_ms(const struct stat *sb)
{
	if (sb->st_mtim.tv_sec < 0)
		return 0;
	return (uint64_t)sb->st_mtim.tv_sec * 1000 +
	    (uint64_t)sb->st_mtim.tv_nsec / 1000000;
}

/* Removes one expired session directory; 1 removed, 0 skipped. */
static int
local_remove(struct local_store *lst, const char *id)
{
	static const char *const files[] = { "log", "meta", "log.tmp",
	    "meta.tmp" };
	char		 path[STORE_ID_MAX + 16];
	size_t		 i;
	int		 lfd;

	/* The lock tells whether some other process has it open. */
	local_path(path, sizeof(path), id, "log");
	lfd = openat(lst->sessfd, path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (lfd != -1 && flock(lfd, LOCK_EX | LOCK_NB) == -1) {
		close(lfd);
		return 0;
	}
	local_kb_remove(lst, id);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		local_path(path, sizeof(path), id, files[i]);
		if (unlinkat(lst->sessfd, path, 0) == -1 && errno != ENOENT)
			log_warn("store: expire %s", path);
	}
	if (unlinkat(lst->sessfd, id, AT_REMOVEDIR) == -1) {
		if (errno != ENOENT)
			log_warn("store: expire %s", id);
		if (lfd != -1)
			close(lfd);
		return 0;
	}
	if (lfd != -1)
		close(lfd);
	return 1;
}

static int
local_expire(struct store *st, uint64_t cutoff_ms)
{
	/* A document written is a use of the session, as an append is. */
	static const char *const files[] = { "log", "meta", "kb" };
	struct local_store	*lst = (struct local_store *)st;
	char			 path[STORE_ID_MAX + 16];
	struct dirent		*de;
	struct stat		 sb;
	DIR			*d;
	uint64_t		 newest, ms;
	size_t			 i;
	int			 fd, seen, removed = 0;

	/* A fresh open file description: sessfd's offset stays untouched. */
	fd = openat(lst->sessfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1 || (d = fdopendir(fd)) == NULL) {
		log_warn("store: expire");
		if (fd != -1)
			close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (!store_valid_id(de->d_name) ||
		    store_retained(de->d_name) ||
		    store_sess_find(st, de->d_name) != NULL)
			continue;
		newest = 0;
		seen = 0;
		for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			local_path(path, sizeof(path), de->d_name,
			    files[i]);
			if (fstatat(lst->sessfd, path, &sb,
			    AT_SYMLINK_NOFOLLOW) == -1)
				continue;
			seen = 1;
			if ((ms = local_mtime_ms(&sb)) > newest)
				newest = ms;
		}
		/* An empty leftover directory ages by its own mtime. */
		if (!seen) {
			if (fstatat(lst->sessfd, de->d_name, &sb,
			    AT_SYMLINK_NOFOLLOW) == -1 || !S_ISDIR(sb.st_mode))
				continue;
			newest = local_mtime_ms(&sb);
		}
		if (newest >= cutoff_ms)
			continue;
		removed += local_remove(lst, de->d_name);
	}
	closedir(d);
	return removed;
}
