/*
 * Local store backend: files under the state directory, one process
 * writing a session at a time.
 *
 * On-disk format (version 1 of the segment log; the byte layouts of
 * segments, index entries and meta slots are in store_seg.c):
 *
 *   STATE_DIR/segments/<16 hex>.seg the shared segment log: a header
 *                                   (magic, format version, id), then
 *                                   frames, each one record of any
 *                                   session (length, CRC-32C, seq, ts,
 *                                   session id, json).  Each process
 *                                   appends to its own active segment,
 *                                   flock()ed while it writes, sealed
 *                                   past 64 MiB (store_local_seg.c).
 *   STATE_DIR/sessions/<id>/        one directory per session (0750)
 *   STATE_DIR/sessions/<id>/index   where the session's records are: a
 *                                   header (format version, first seq,
 *                                   closed clean or not) and one
 *                                   checksummed entry per record, seq ->
 *                                   segment, offset, length, ts
 *                                   (store_local_ix.c).  flock()ed while
 *                                   the session is open.
 *   STATE_DIR/sessions/<id>/meta.0, meta.1, meta.2
 *                                   the meta document in checksummed
 *                                   slots rewritten in place, never the
 *                                   newest one nor the newest synced one
 *                                   (meta.2 only while, under BATCH, the
 *                                   newest is not synced yet); the valid
 *                                   one with the highest generation is
 *                                   the meta (store_local_meta.c).
 *   STATE_DIR/sessions/<id>/log     the v1 event log, one record per line,
 *                                     "<seq> <unix-ms> <json>\n"
 *                                   (store_local_v1.c): kept by sessions
 *                                   store_retained() says are never
 *                                   trimmed (kg:), whose records in shared
 *                                   segments would keep those forever;
 *                                   any other session's is converted to
 *                                   segments when it is opened (an older
 *                                   parleyd's state directory).
 *                                   flock()ed while the session is open.
 *   STATE_DIR/sessions/<id>/meta    v1 meta (plain JSON, tmp + rename):
 *                                   read while no slot exists, removed
 *                                   once one is on disk.
 *   STATE_DIR/sessions/<id>/epochs  the log's epochs and the newest machine
 *                                   crash it has seen (store_local_run.c):
 *                                   only once the session was opened after
 *                                   such a crash, or made after one (v1).
 *   STATE_DIR/store-run             which boot ran parleyd last, and
 *                                   whether that run ended clean.
 *   STATE_DIR/sessions/<id>/kb/<name>
 *                                   one document of the session's
 *                                   knowledge base (store_doc_put):
 *                                   opaque JSON text, replaced through
 *                                   kb/.<name>.tmp and a rename (a leading
 *                                   '.' is never a name); kb/ is made by
 *                                   the first put and removed with the
 *                                   session.
 *   index.tmp, log.tmp, meta.tmp    leftovers of an interrupted trim or
 *                                   conversion, or of a v1 meta write;
 *                                   removed at open (a document's, by
 *                                   store_doc_all).
 *
 * A segment or index of an unknown format version is refused with a
 * message saying so: at open for segments, when read for an index.
 *
 * Writing: in a worker (store_attach), appends and meta writes are queued
 * and one group commit per event-loop pass writes them all with a single
 * pwrite() to the process's active segment, then reports them durable
 * (store_local_seg.c).  Unattached (parleyctl, tests), each append is
 * written at once.  A crash leaves at most a torn frame at the end of a
 * segment: it fails its length or CRC and is never served; the next open
 * of a session whose records lead there cuts it, once no live process
 * holds the segment's lock.
 *
 * fsync modes: ALWAYS fdatasyncs the segment once per group commit (and
 * the index when a session's first record in a segment is indexed);
 * BATCH leaves it to store_sync(); NO never syncs (meta and trim
 * included).
 *
 * BATCH syncs on a thread of its own: one fdatasync per dirty log in the
 * event loop stalled every client of the worker (1,000 streaming sessions:
 * 1,000 fdatasyncs every 200 ms, p99 delivery 210 ms), and so did the four
 * fsyncs of a new session's directory and meta (1,000 sessions starting
 * together: seconds).  store_sync() asks the thread for one syncfs() of
 * the sessions directory's file system (and the segments', should that be
 * another), which covers every segment, index and slot written so far; it
 * never waits, and requests made while a sync runs are served by one
 * more.  Once the store is attached to an event loop, meta slots and a
 * new session's directory are not synced in the loop either: both are
 * left to a sync within 200 ms.  A crashed process leaves the newest
 * acknowledged meta or the one being written (a write never goes to the
 * newest slot); a power failure loses at most what the thread had not
 * synced yet, like the appends.
 *
 * Retention: store_trim() drops index entries from the front (the index
 * rewritten through index.tmp); store_expire() removes sessions, then
 * deletes segments last written before the cutoff that no live process
 * writes and no session's index still points into.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/log.h"
#include "parley/store.h"
#include "store_local.h"

static struct store	*local_open(const char *, const char *,
			    enum store_fsync, char *, size_t);
static void		 local_close(struct store *);
static int		 local_exists(struct store *, const char *);
static int		 local_sess_open(struct store *, const char *, int,
			    struct store_sess **);
static void		 local_sess_close(struct store_sess *);
static int		 local_expire(struct store *, uint64_t);
static int		 local_attach(struct store *, char *, size_t);
static int		 local_append_op(struct store_sess *, uint64_t,
			    uint64_t, const char *, size_t);
static int		 local_range_op(struct store_sess *, uint64_t, size_t,
			    store_range_cb, void *);
static int		 local_trim_op(struct store_sess *, uint64_t);
static char		*local_meta_read_op(struct store_sess *);
static int		 local_append_async(struct store_sess *, uint64_t,
			    uint64_t, const char *, size_t);
static int		 local_meta_write_async(struct store_sess *,
			    const char *, size_t);

const struct store_ops store_local_ops = {
	.scheme = "local",
	.open = local_open,
	.close = local_close,
	.exists = local_exists,
	.sess_open = local_sess_open,
	.sess_close = local_sess_close,
	.append = local_append_op,
	.range = local_range_op,
	.meta_write = local_meta_write,
	.meta_read = local_meta_read_op,
	.meta_peek = local_meta_peek,
	.sync = local_sync,
	.trim = local_trim_op,
	.expire = local_expire,
	.attach = local_attach,
	.append_async = local_append_async,
	.meta_write_async = local_meta_write_async,
	.doc_put = local_doc_put,
	.doc_del = local_doc_del,
	.doc_all = local_doc_all,
	.epochs = local_epochs,
	.run_begin = local_run_begin,
	.run_end = local_run_end,
};

int
local_nosync(const struct store *st)
{
	return st->fsync == STORE_FSYNC_NO;
}

/* BATCH in a worker: meta writes and new directories are synced off the
 * event loop, by the sync thread. */
int
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
	struct stat		 a, b;
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
	ls->segfd = -1;
	ls->sessfd = openat(fd, "sessions", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC | O_NOFOLLOW);
	if (ls->sessfd == -1) {
		save = errno;
		snprintf(err, errlen, "%s/sessions: %s", state_dir,
		    strerror(save));
		goto fail;
	}
	if ((mkdirat(fd, "segments", 0750) == -1 && errno != EEXIST) ||
	    (ls->segfd = openat(fd, "segments", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC | O_NOFOLLOW)) == -1 || fstat(ls->sessfd, &a) == -1 ||
	    fstat(ls->segfd, &b) == -1) {
		save = errno;
		snprintf(err, errlen, "%s/segments: %s", state_dir,
		    strerror(save));
		goto fail;
	}
	ls->seg_otherfs = a.st_dev != b.st_dev;
	if (local_seg_init(ls, err, errlen) == -1) {
		save = errno;
		goto fail;
	}
	ls->rootfd = fd;
	local_run_load(ls);
	return &ls->base;
fail:
	if (ls->sessfd != -1)
		close(ls->sessfd);
	if (ls->segfd != -1)
		close(ls->segfd);
	free(ls);
	close(fd);
	errno = save;
	return NULL;
}

static void
local_close(struct store *st)
{
	struct local_store	*ls = (struct local_store *)st;

	/* Sessions are closed by now: their unsynced appends are in
	 * unsynced.  No thread is started for a last sync. */
	local_seg_close(ls);
	if (ls->seg_dirty)
		ls->unsynced = 1;
	if (ls->syncer_on)
		local_sync(st);
	else if (ls->unsynced && !local_nosync(st))
		local_syncfs(ls);
	local_syncer_stop(ls);
	if (ls->soon_ev != NULL)
		event_free(ls->soon_ev);
	close(ls->sessfd);
	close(ls->segfd);
	close(ls->rootfd);
	free(ls);
}

/* Reads exactly len bytes at off; a short file is EIO (a stale index). */
int
local_pread_full(int fd, void *buf, size_t len, off_t off)
{
	ssize_t	 r;
	size_t	 got = 0;

	while (got < len) {
		r = pread(fd, (char *)buf + got, len - got, off + (off_t)got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

/* Writes exactly len bytes at off (ENOSPC when the disk takes none). */
int
local_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t	 r;
	size_t	 done = 0;

	while (done < len) {
		r = pwrite(fd, (const char *)buf + done, len - done,
		    off + (off_t)done);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		if (r == 0) {
			errno = ENOSPC;
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

/* "<id>/<file>" into buf; ids are checked, so it always fits. */
void
local_path(char *buf, size_t len, const char *id, const char *file)
{
	snprintf(buf, len, "%.*s/%s", STORE_ID_MAX, id, file);
}

/* The files whose presence makes a session exist. */
static const char *const local_sess_files[] = { "index", "log", "meta.0",
    "meta.1", "meta.2", "meta" };

/* 1 if id has one of them (id NULL: atfd is the session's directory). */
static int
local_has_files(int atfd, const char *id)
{
	char		 path[STORE_ID_MAX + 16];
	struct stat	 sb;
	size_t		 i;

	for (i = 0; i < sizeof(local_sess_files) /
	    sizeof(local_sess_files[0]); i++) {
		if (id != NULL)
			local_path(path, sizeof(path), id, local_sess_files[i]);
		else
			snprintf(path, sizeof(path), "%s", local_sess_files[i]);
		if (fstatat(atfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			return 1;
	}
	return 0;
}

static int
local_exists(struct store *st, const char *id)
{
	return local_has_files(((struct local_store *)st)->sessfd, id);
}

/*
 * A session's directory is opened for the operation that needs it (a
 * meta write, a trim): an open session holds only its log, so an idle one
 * costs one descriptor, not two.
 */
int
local_dir_open(struct local_sess *ls)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;

	ls->dirfd = openat(lst->sessfd, ls->base.id, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC | O_NOFOLLOW);
	return ls->dirfd == -1 ? -1 : 0;
}

void
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
	int			 made = 0, tries, save, has_index, has_log;

	if ((ls = calloc(1, sizeof(*ls))) == NULL)
		return -1;
	ls->dirfd = ls->logfd = ls->ixfd = -1;
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
	if (!create && !local_has_files(ls->dirfd, NULL)) {
		errno = ENOENT;
		goto fail;
	}
	ls->base.store = st;
	memcpy(ls->base.id, id, strlen(id) + 1);
	ls->ixfd = -1;
	if (local_unlink_tmp(ls->dirfd, "log.tmp") == -1 ||
	    local_unlink_tmp(ls->dirfd, "meta.tmp") == -1)
		goto fail;
	/* Made now: it has seen every crash (its index header says so). */
	ls->crash_seen = made ? lst->crashes : 0;
	has_index = fstatat(ls->dirfd, "index", &sb, AT_SYMLINK_NOFOLLOW) == 0;
	has_log = fstatat(ls->dirfd, "log", &sb, AT_SYMLINK_NOFOLLOW) == 0;
	/*
	 * A project's knowledge (retained, never trimmed) stays in a v1
	 * log of its own: in the shared segments its records would keep
	 * every segment they are in.  Any other session's records go to
	 * the segments; a v1 log left by an older parleyd is converted.
	 */
	if (!store_retained(id) && (has_index || !has_log)) {
		if (local_ix_open(ls, !has_index) == -1)
			goto fail;
	} else if (!store_retained(id)) {
		if (local_ix_convert(ls) == -1)
			goto fail;
	} else {
		ls->logfd = openat(ls->dirfd, "log", O_RDWR | O_APPEND |
		    O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
		if (ls->logfd == -1)
			goto fail;
		if (flock(ls->logfd, LOCK_EX | LOCK_NB) == -1) {
			if (errno == EWOULDBLOCK)
				errno = EBUSY;
			goto fail;
		}
		if (local_scan(ls) == -1)
			goto fail;
		ls->base.durable_seq = ls->base.last_seq;
	}
	if (local_epochs_load(ls) == -1 || local_epochs_check(ls, made) == -1)
		goto fail;
	/* BATCH in a worker: the sync thread makes the new directory
	 * durable, off the loop. */
	if (made && local_async(st))
		local_sync_soon(lst);
	else if (made && !local_nosync(st) &&
	    (fsync(ls->dirfd) == -1 || fsync(lst->sessfd) == -1))
		goto fail;
	local_dir_close(ls);
	*out = &ls->base;
	return 0;
fail:
	save = errno;
	if (ls->logfd != -1)
		close(ls->logfd);
	if (ls->ixfd != -1)
		close(ls->ixfd);
	if (ls->dirfd != -1)
		close(ls->dirfd);
	free(ls->idx);
	free(ls->pend);
	free(ls->epochs);
	free(ls);
	errno = save;
	return -1;
}

/* Frees a closed session (once no group commit reports it). */
void
local_sess_free(struct local_sess *ls)
{
	free(ls->idx);
	free(ls->pend);
	free(ls->meta_q);
	free(ls->epochs);
	free(ls);
}

static void
local_sess_close(struct store_sess *s)
{
	struct local_sess	*ls = (struct local_sess *)s;
	struct local_store	*lst = (struct local_store *)s->store;
	int			 tries;

	if (ls->seg) {
		/* What it queued goes to disk before its index closes (a
		 * report may queue more: a few rounds, then it is left). */
		for (tries = 0; tries < 4 && (ls->queued > 0 ||
		    ls->meta_q != NULL); tries++)
			if (local_seg_flush(lst) == -1)
				log_warn("store: session %s: closing", s->id);
		local_seg_forget(lst, ls);
		local_ix_close(ls);
	}
	/* The next store_sync() covers it: syncfs needs no descriptor. */
	if (ls->dirty)
		lst->unsynced = 1;
	if (ls->logfd != -1)
		close(ls->logfd);
	ls->logfd = -1;
	local_dir_close(ls);
	if (ls->rep_refs > 0) {
		ls->zombie = 1;		/* the group commit frees it */
		return;
	}
	local_sess_free(ls);
}

static int
local_attach(struct store *st, char *err, size_t errlen)
{
	if (st->params.base == NULL)
		return 0;
	if (local_seg_attach((struct local_store *)st) == -1) {
		snprintf(err, errlen, "store: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int
local_append_op(struct store_sess *s, uint64_t seq, uint64_t ts_ms,
    const char *json, size_t len)
{
	if (((struct local_sess *)s)->seg) {
		if (local_ix_append(s, seq, ts_ms, json, len) == -1)
			return -1;
	} else if (local_append(s, seq, ts_ms, json, len) == -1)
		return -1;
	s->durable_seq = seq;
	return 0;
}

static int
local_range_op(struct store_sess *s, uint64_t after, size_t limit,
    store_range_cb cb, void *arg)
{
	if (((struct local_sess *)s)->seg)
		return local_ix_range(s, after, limit, cb, arg);
	return local_range(s, after, limit, cb, arg);
}

static int
local_trim_op(struct store_sess *s, uint64_t cutoff_ms)
{
	struct local_sess	*ls = (struct local_sess *)s;
	int			 r;

	if (!ls->seg)
		return local_trim(s, cutoff_ms);
	if (local_dir_open(ls) == -1)
		return -1;
	r = local_ix_trim(ls, cutoff_ms);
	local_dir_close(ls);
	return r;
}

static char *
local_meta_read_op(struct store_sess *s)
{
	struct local_sess	*ls = (struct local_sess *)s;
	char			*t;

	/* A meta write still queued is the session's meta. */
	if (ls->meta_q != NULL) {
		if ((t = malloc(ls->meta_qlen + 1)) == NULL)
			return NULL;
		memcpy(t, ls->meta_q, ls->meta_qlen);
		t[ls->meta_qlen] = '\0';
		return t;
	}
	return local_meta_read(s);
}

/* In a worker, a segment session's writes wait for the group commit. */
static int
local_grouped(const struct local_sess *ls)
{
	return ls->seg && ls->base.store->attached &&
	    ((struct local_store *)ls->base.store)->w.flush_ev != NULL;
}

static int
local_append_async(struct store_sess *s, uint64_t seq, uint64_t ts_ms,
    const char *json, size_t len)
{
	struct local_sess	*ls = (struct local_sess *)s;
	struct local_store	*lst = (struct local_store *)s->store;
	const struct store_events *ev = s->store->params.ev;

	if (!local_grouped(ls)) {
		/* Written at once, durable at once. */
		if (local_append_op(s, seq, ts_ms, json, len) == -1)
			return -1;
		if (ev != NULL && ev->durable != NULL)
			ev->durable(s->store->params.arg, s, seq);
		return 0;
	}
	if (ls->failed) {
		errno = EPIPE;
		return -1;
	}
	if (local_seg_queue(ls, seq, ts_ms, json, len) == -1)
		return -1;
	s->last_seq = seq;
	/* Bounded: a pass that queues much or long is written as it
	 * goes. */
	if (local_seg_due(lst))
		local_seg_flush(lst);
	else
		local_seg_kick(lst);
	return 0;
}

static int
local_meta_write_async(struct store_sess *s, const char *json, size_t len)
{
	struct local_sess	*ls = (struct local_sess *)s;
	struct local_store	*lst = (struct local_store *)s->store;

	if (!local_grouped(ls))
		return local_meta_write(s, json, len);
	if (ls->failed) {
		errno = EPIPE;
		return -1;
	}
	/* After the appends queued before it; a later one replaces it. */
	if (local_seg_queue_meta(ls, json, len) == -1)
		return -1;
	local_seg_kick(lst);
	return 0;
}

int
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
int
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

/*
 * Reads a whole file of at most max bytes as a C string (its length in
 * *lenp when not NULL): malloc'd, or NULL with errno (EFBIG larger,
 * EINVAL not a regular file).
 */
char *
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
	static const char *const files[] = { "index", "log", "meta.0",
	    "meta.1", "meta.2", "meta", "index.tmp", "log.tmp", "meta.tmp",
	    "epochs", "epochs.tmp" };
	char		 path[STORE_ID_MAX + 16];
	size_t		 i;
	int		 lfd;

	/* The lock tells whether some other process has it open. */
	local_path(path, sizeof(path), id, "index");
	lfd = openat(lst->sessfd, path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (lfd == -1) {
		local_path(path, sizeof(path), id, "log");
		lfd = openat(lst->sessfd, path, O_RDWR | O_CLOEXEC |
		    O_NOFOLLOW);
	}
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
	static const char *const files[] = { "index", "log", "meta.0",
	    "meta.1", "meta.2", "meta", "kb" };
	struct local_store	*lst = (struct local_store *)st;
	char			 path[STORE_ID_MAX + 16];
	struct dirent		*de;
	struct stat		 sb;
	DIR			*d;
	uint64_t		 newest, ms;
	size_t			 i;
	int			 fd, seen, removed = 0, segs;

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
	/* Then the segments no retained record is in any more. */
	if ((segs = local_seg_gc(lst, cutoff_ms)) > 0)
		log_info("retention: removed %d segments no session uses",
		    segs);
	return removed;
}

