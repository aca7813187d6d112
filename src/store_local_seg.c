/*
 * Local store, the shared segment log: every session's records go to the
 * writing process's active segment, STATE_DIR/segments/<id>.seg (layout
 * in store_seg.c), flock()ed while it writes there (the lock dies with a
 * SIGKILLed worker); sealed past LOCAL_SEG_MAX and a new one started.
 *
 * Group commit: in a worker (attached), appends and meta writes are queued
 * in one buffer per process, and one flush per event-loop pass (an event
 * made active by the first queued write, so that it runs after the pass's
 * other callbacks) writes the whole buffer with one pwrite(), fdatasyncs
 * the segment once when fsync is ALWAYS, writes the queued meta slots,
 * then reports every session in it durable.  A write queued LOCAL_GC_US
 * ago (a long pass) or LOCAL_GC_MAX bytes are flushed at once instead.  Unattached, each append is
 * flushed at once.  Also here: descriptors for reading segments, cutting
 * a dead writer's torn tail, and deleting segments no record is in.
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"
#include "store_local.h"
#include "store_seg.h"

#define SEG_NAME_LEN	21		/* 16 hex digits and ".seg" */

static void
seg_name(char *buf, size_t len, uint64_t segid)
{
	snprintf(buf, len, "%016" PRIx64 ".seg", segid);
}

/* The segment id a file name says, or 0 when it is not a segment's. */
static uint64_t
seg_parse_name(const char *n)
{
	uint64_t	 v = 0;
	size_t		 i;
	char		 c;

	if (strlen(n) != 20 || strcmp(n + 16, ".seg") != 0)
		return 0;
	for (i = 0; i < 16; i++) {
		c = n[i];
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return 0;
	}
	return v;
}

/*
 * Checks the header of segment fd (name for messages): 0, or -1 with
 * errno EPROTONOSUPPORT (said) or EINVAL (not a segment).
 */
static int
seg_check(int fd, const char *name)
{
	unsigned char	 h[SEG_HDR_LEN];
	uint64_t	 segid;
	uint32_t	 version;

	if (local_pread_full(fd, h, sizeof(h), 0) == -1) {
		errno = EINVAL;
		return -1;
	}
	if (seg_hdr_decode(h, sizeof(h), &segid, &version) == -1) {
		if (errno == EPROTONOSUPPORT)
			log_warnx("store: segments/%s is in format version %u; "
			    "this parleyd reads version %u only: run the "
			    "parleyd that wrote it", name, version,
			    SEG_VERSION);
		return -1;
	}
	return 0;
}

/*
 * At open: every segment's header, so that a state directory written by
 * a later version is refused now, with a clear message, and not read
 * wrongly later.  0, or -1 with the message in err.
 */
int
local_seg_init(struct local_store *lst, char *err, size_t errlen)
{
	struct local_writer	*w = &lst->w;
	struct dirent		*de;
	DIR			*d;
	unsigned char		 h[SEG_HDR_LEN];
	uint64_t		 segid;
	uint32_t		 version;
	unsigned		 i;
	int			 fd, dfd;

	w->fd = -1;
	w->wait_us = LOCAL_GC_US;
	for (i = 0; i < LOCAL_RD_FDS; i++)
		w->rd[i].fd = -1;
	if ((dfd = openat(lst->segfd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1 || (d = fdopendir(dfd)) == NULL) {
		snprintf(err, errlen, "segments: %s", strerror(errno));
		if (dfd != -1)
			close(dfd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (seg_parse_name(de->d_name) == 0)
			continue;
		fd = openat(lst->segfd, de->d_name, O_RDONLY | O_CLOEXEC |
		    O_NOFOLLOW);
		if (fd == -1)
			continue;
		if (local_pread_full(fd, h, sizeof(h), 0) == 0 &&
		    seg_hdr_decode(h, sizeof(h), &segid, &version) == -1 &&
		    errno == EPROTONOSUPPORT) {
			snprintf(err, errlen, "segments/%s is in format version "
			    "%u; this parleyd reads version %u only: run the "
			    "parleyd that wrote the state directory",
			    de->d_name, version, SEG_VERSION);
			close(fd);
			closedir(d);
			errno = EPROTONOSUPPORT;
			return -1;
		}
		close(fd);
	}
	closedir(d);
	return 0;
}

static void
ix_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct local_store	*lst = arg;
	struct store_sess	*s;
	struct local_sess	*ls;
	uint64_t		 now = util_mono_us();

	(void)fd;
	(void)ev;
	/*
	 * Held entries go to the index within about a second: a session
	 * opened after this process dies scans a second of segment at most.
	 * A session still appending has them written by the group commit;
	 * this is for those that stopped.
	 */
	LIST_FOREACH(s, &lst->base.sessions, entry) {
		ls = (struct local_sess *)s;
		if (!ls->seg || ls->failed)
			continue;
		if (ls->npend > 0 &&
		    now - ls->pend_us >= LOCAL_IX_MS * 1000ULL &&
		    local_ix_flush(ls) == -1) {
			log_warn("store: session %s: index", s->id);
			continue;
		}
		/* Idle since the last tick, everything indexed: clean, so
		 * that an open after a crash does not scan for it.  A
		 * session still appending is left alone (no header write
		 * per second per session). */
		if (ls->written == ls->tick_written)
			local_ix_idle(ls);
		ls->tick_written = ls->written;
	}
}

static void
flush_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	local_seg_flush(arg);
}

/* In a worker: the flush event and the index timer. */
int
local_seg_attach(struct local_store *lst)
{
	struct local_writer	*w = &lst->w;
	struct timeval		 tv = { LOCAL_IX_MS / 1000,
				    (LOCAL_IX_MS % 1000) * 1000 };

	if ((w->flush_ev = event_new(lst->base.params.base, -1, 0, flush_cb,
	    lst)) == NULL || (w->ix_ev = event_new(lst->base.params.base, -1,
	    EV_PERSIST, ix_tick, lst)) == NULL)
		return -1;
	event_add(w->ix_ev, &tv);
	return 0;
}

void
local_seg_close(struct local_store *lst)
{
	struct local_writer	*w = &lst->w;
	unsigned		 i;

	local_seg_flush(lst);
	if (w->flush_ev != NULL)
		event_free(w->flush_ev);
	if (w->ix_ev != NULL)
		event_free(w->ix_ev);
	if (w->fd != -1)
		close(w->fd);
	for (i = 0; i < LOCAL_RD_FDS; i++)
		if (w->rd[i].fd != -1)
			close(w->rd[i].fd);
	free(w->buf);
	free(w->q);
	free(w->mq);
}

/* Syncs what a new file needs when this mode syncs at once. */
static int
seg_synced_new(struct local_store *lst, int fd)
{
	struct store	*st = &lst->base;

	if (local_nosync(st))
		return 0;
	if (local_async(st)) {
		lst->seg_dirty = 1;
		local_sync_soon(lst);
		return 0;
	}
	if (fdatasync(fd) == -1 || fsync(lst->segfd) == -1)
		return -1;
	return 0;
}

/* Starts a new active segment: made, locked, its header written. */
static int
seg_create(struct local_store *lst)
{
	struct local_writer	*w = &lst->w;
	unsigned char		 h[SEG_HDR_LEN];
	char			 name[SEG_NAME_LEN + 4];
	struct timeval		 tv;
	uint64_t		 segid;
	int			 fd = -1, tries, save;

	gettimeofday(&tv, NULL);
	/* Time first: names sort by age.  The pid keeps two processes
	 * starting one in the same millisecond apart; O_EXCL the rest. */
	segid = ((uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000) <<
	    16 | ((uint64_t)getpid() & 0xffff);
	for (tries = 0; tries < 64; tries++, segid++) {
		seg_name(name, sizeof(name), segid);
		fd = openat(lst->segfd, name, O_RDWR | O_CREAT | O_EXCL |
		    O_CLOEXEC | O_NOFOLLOW, 0640);
		if (fd != -1 || errno != EEXIST)
			break;
	}
	if (fd == -1)
		return -1;
	seg_hdr_encode(h, segid);
	if (flock(fd, LOCK_EX | LOCK_NB) == -1 ||
	    local_pwrite_full(fd, h, sizeof(h), 0) == -1 ||
	    seg_synced_new(lst, fd) == -1) {
		save = errno;
		close(fd);
		unlinkat(lst->segfd, name, 0);
		errno = save;
		return -1;
	}
	w->fd = fd;
	w->segid = segid;
	w->end = SEG_HDR_LEN;
	return 0;
}

/* An active segment with room for len more bytes (sealing a full one). */
static int
seg_room(struct local_store *lst, size_t len)
{
	struct local_writer	*w = &lst->w;

	if (w->fd != -1 && w->end > SEG_HDR_LEN &&
	    (uint64_t)w->end + len > LOCAL_SEG_MAX) {
		close(w->fd);		/* sealed: the lock goes */
		w->fd = -1;
	}
	if (w->fd == -1)
		return seg_create(lst);
	return 0;
}

/*
 * A descriptor to read segment segid: the active one's, or one of a few
 * kept open.  -1 with errno (EPROTONOSUPPORT: a later format, said).
 */
int
local_seg_fd(struct local_store *lst, uint64_t segid)
{
	struct local_writer	*w = &lst->w;
	char			 name[SEG_NAME_LEN + 4];
	unsigned		 i;
	int			 fd;

	if (w->fd != -1 && segid == w->segid)
		return w->fd;
	for (i = 0; i < LOCAL_RD_FDS; i++)
		if (w->rd[i].fd != -1 && w->rd[i].segid == segid)
			return w->rd[i].fd;
	seg_name(name, sizeof(name), segid);
	fd = openat(lst->segfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1)
		return -1;
	if (seg_check(fd, name) == -1) {
		close(fd);
		if (errno != EPROTONOSUPPORT)
			errno = EIO;
		return -1;
	}
	i = w->rd_next++ % LOCAL_RD_FDS;
	if (w->rd[i].fd != -1)
		close(w->rd[i].fd);
	w->rd[i].fd = fd;
	w->rd[i].segid = segid;
	return fd;
}

/* Makes room in the queue for one more frame of flen bytes. */
static int
seg_reserve(struct local_writer *w, size_t flen)
{
	unsigned char	*nb;
	struct local_q	*nq;
	size_t		 ncap;

	if (w->blen + flen > w->bcap) {
		ncap = w->bcap ? w->bcap : 64 * 1024;
		while (ncap < w->blen + flen)
			ncap *= 2;
		if ((nb = realloc(w->buf, ncap)) == NULL)
			return -1;
		w->buf = nb;
		w->bcap = ncap;
	}
	if (w->nq == w->qcap) {
		ncap = w->qcap ? w->qcap * 2 : 256;
		if ((nq = reallocarray(w->q, ncap, sizeof(*nq))) == NULL)
			return -1;
		w->q = nq;
		w->qcap = ncap;
	}
	return 0;
}

/* Flushes after this pass of the loop, or now when unattached. */
void
local_seg_kick(struct local_store *lst)
{
	struct local_writer	*w = &lst->w;

	if (w->flush_ev == NULL) {
		local_seg_flush(lst);
		return;
	}
	if (!w->armed) {
		w->armed = 1;
		event_active(w->flush_ev, EV_WRITE, 1);
	}
}

/* Queues one record of ls for the next group commit; 0 or -1/errno. */
int
local_seg_queue(struct local_sess *ls, uint64_t seq, uint64_t ts,
    const char *json, size_t len)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;
	struct local_writer	*w = &lst->w;
	size_t			 idlen = strlen(ls->base.id);
	size_t			 flen = seg_frame_size(idlen, len);
	struct local_q		*q;

	if (seg_reserve(w, flen) == -1 || local_ix_dirty(ls) == -1)
		return -1;
	seg_frame_encode(w->buf + w->blen, seq, ts, ls->base.id, idlen, json,
	    len);
	q = &w->q[w->nq++];
	q->ls = ls;
	q->seq = seq;
	q->ts = ts;
	q->off = w->blen;
	q->len = (uint32_t)flen;
	w->blen += flen;
	ls->queued++;
	if (w->nq == 1)
		w->first_us = util_mono_us();
	return 0;
}

/*
 * 1 when what is queued should go now rather than at the end of the pass:
 * a pass that does much (1,000 sessions' timers at once) would otherwise
 * hold its first events back for all of it; past LOCAL_GC_US, or
 * LOCAL_GC_MAX bytes, they are written as the pass goes.
 */
int
local_seg_due(struct local_store *lst)
{
	struct local_writer	*w = &lst->w;

	return w->nq > 0 && (w->blen >= LOCAL_GC_MAX ||
	    util_mono_us() - w->first_us >= w->wait_us);
}

/* Sessions a group commit reports, each once. */
struct seg_rep {
	struct local_sess	**v;
	size_t			 n;
	uint64_t		 gen;		/* this flush's */
};

static void
rep_add(struct seg_rep *r, struct local_sess *ls)
{
	if (r->v == NULL || ls->rep_gen == r->gen)
		return;
	ls->rep_gen = r->gen;
	r->v[r->n++] = ls;
	ls->rep_refs++;
}

/*
 * Takes a closing session out of the queue, its frames with it: written
 * unindexed after its clean close, a frame would wait in the segment for
 * a later scan of the session (after a crash of a later open) to take it
 * for the record of that seq, over the real one written since.
 */
void
local_seg_forget(struct local_store *lst, struct local_sess *ls)
{
	struct local_writer	*w = &lst->w;
	size_t			 i, n = 0, at = 0;

	if (ls->queued > 0) {
		for (i = 0; i < w->nq; i++) {
			if (w->q[i].ls == ls)
				continue;
			if (w->q[i].off != at)
				memmove(w->buf + at, w->buf + w->q[i].off,
				    w->q[i].len);
			w->q[i].off = at;
			at += w->q[i].len;
			w->q[n++] = w->q[i];
		}
		w->nq = n;
		w->blen = at;
		ls->queued = 0;
	}
	if (ls->meta_q != NULL) {
		for (i = 0; i < w->nmq; i++)
			if (w->mq[i] == ls)
				w->mq[i] = NULL;
		free(ls->meta_q);
		ls->meta_q = NULL;
	}
}

/* Queues a meta write of ls after its queued appends (a later one
 * replaces it); 0 or -1/errno. */
int
local_seg_queue_meta(struct local_sess *ls, const char *json, size_t len)
{
	struct local_writer	*w = &((struct local_store *)
				    ls->base.store)->w;
	struct local_sess	**nv;
	size_t			 ncap;
	char			*t;

	if ((t = malloc(len + 1)) == NULL)
		return -1;
	memcpy(t, json, len);
	t[len] = '\0';
	if (ls->meta_q == NULL) {
		if (w->nmq == w->mqcap) {
			ncap = w->mqcap ? w->mqcap * 2 : 64;
			if ((nv = reallocarray(w->mq, ncap,
			    sizeof(*nv))) == NULL) {
				free(t);
				return -1;
			}
			w->mq = nv;
			w->mqcap = ncap;
		}
		w->mq[w->nmq++] = ls;
	}
	free(ls->meta_q);
	ls->meta_q = t;
	ls->meta_qlen = len;
	return 0;
}

/*
 * The group commit: writes what is queued to the active segment, syncs
 * it (ALWAYS), adds the index entries, writes the queued meta, then
 * reports.  0, or -1 with errno when the write failed: the sessions in
 * it are failed (attached) or see their append fail (not).
 */
int
local_seg_flush(struct local_store *lst)
{
	struct local_writer	*w = &lst->w;
	struct store		*st = &lst->base;
	const struct store_events *ev = st->attached ? st->params.ev : NULL;
	struct local_sess	*ls, **mq = w->mq;
	struct seg_rep		 rep = { NULL, 0, 0 };
	struct seg_ient		 e;
	unsigned char		*buf = w->buf;
	struct local_q		*q = w->q;
	size_t			 blen = w->blen, bcap = w->bcap, nq = w->nq;
	size_t			 qcap = w->qcap, nmeta = w->nmq, i;
	off_t			 at = 0;
	uint64_t		 now;
	int			 err = 0;

	w->armed = 0;
	if (nq == 0 && nmeta == 0)
		return 0;
	/* This batch is ours: what the reports queue makes the next. */
	w->buf = NULL;
	w->q = NULL;
	w->blen = w->bcap = w->nq = w->qcap = 0;
	w->mq = NULL;
	w->nmq = w->mqcap = 0;
	rep.gen = ++w->gen;
	if ((rep.v = calloc(nq + nmeta + 1, sizeof(*rep.v))) == NULL)
		err = errno;
	if (!err && nq > 0) {
		if (seg_room(lst, blen) == -1)
			err = errno;
		else {
			at = w->end;
			if (local_pwrite_full(w->fd, buf, blen, at) == -1 ||
			    (st->fsync == STORE_FSYNC_ALWAYS &&
			    fdatasync(w->fd) == -1)) {
				err = errno;
				/* Leave no part of it behind. */
				if (ftruncate(w->fd, at) == -1) {
					log_warn("store: segment %016" PRIx64
					    ": cannot undo a failed write; "
					    "sealing it", w->segid);
					close(w->fd);
					w->fd = -1;
				}
			} else {
				w->end += (off_t)blen;
				if (st->fsync == STORE_FSYNC_BATCH)
					lst->seg_dirty = 1;
			}
		}
	}
	for (i = 0; i < nq; i++) {
		if ((ls = q[i].ls) == NULL)
			continue;		/* closed meanwhile */
		ls->queued--;
		rep_add(&rep, ls);
		if (err || ls->failed)
			continue;
		e.seq = q[i].seq;
		e.segid = w->segid;
		e.off = (uint64_t)at + q[i].off;
		e.ts = q[i].ts;
		e.len = q[i].len;
		/* Unattached, every entry at once: no timer writes them. */
		if (local_ix_add(ls, &e, !st->attached) == -1) {
			log_warn("store: session %s: index", ls->base.id);
			ls->failed = 1;
			continue;
		}
		ls->written = e.seq;
		ls->rep_seq = e.seq;
	}
	/* Entries held a second go to the index now: spread over the
	 * passes as the sessions' appends are, not all on one tick. */
	if (!err && st->attached && rep.v != NULL) {
		now = util_mono_us();
		for (i = 0; i < rep.n; i++) {
			ls = rep.v[i];
			if (ls->npend > 0 && !ls->failed && !ls->zombie &&
			    now - ls->pend_us >= LOCAL_IX_MS * 1000ULL &&
			    local_ix_flush(ls) == -1)
				log_warn("store: session %s: index",
				    ls->base.id);
		}
	}
	for (i = 0; i < nmeta; i++) {
		if ((ls = mq[i]) == NULL || ls->meta_q == NULL)
			continue;		/* closed meanwhile */
		rep_add(&rep, ls);
		if (!err && !ls->failed && local_meta_write(&ls->base,
		    ls->meta_q, ls->meta_qlen) == -1) {
			log_warn("store: session %s: meta", ls->base.id);
			ls->failed = 1;
		}
		free(ls->meta_q);
		ls->meta_q = NULL;
	}
	free(mq);
	/* Give the buffers back unless the reports below need new ones,
	 * or the frames buffer grew past a bound for one large event: kept,
	 * it would hold twice that for the process's lifetime. */
	if (bcap > LOCAL_BUF_KEEP) {
		free(buf);
		buf = NULL;
		bcap = 0;
	}
	if (w->buf == NULL) {
		w->buf = buf;
		w->bcap = bcap;
		w->q = q;
		w->qcap = qcap;
		buf = NULL;
		q = NULL;
	}
	free(buf);
	free(q);
	for (i = 0; i < rep.n; i++) {
		ls = rep.v[i];
		if (ls->zombie)
			continue;
		if (err || ls->failed) {
			if (st->attached)
				ls->failed = 1;
			if (ev != NULL && ev->failed != NULL)
				ev->failed(st->params.arg, &ls->base, EIO);
			continue;
		}
		if (ls->rep_seq > ls->base.durable_seq)
			ls->base.durable_seq = ls->rep_seq;
		if (ev != NULL && ev->durable != NULL)
			ev->durable(st->params.arg, &ls->base,
			    ls->base.durable_seq);
	}
	for (i = 0; i < rep.n; i++) {
		ls = rep.v[i];
		ls->rep_seq = 0;
		if (--ls->rep_refs == 0 && ls->zombie)
			local_sess_free(ls);
	}
	free(rep.v);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/*
 * Writes len bytes of whole frames to the active segment at once (the
 * queue flushed first), synced unless NO: a v1 log's conversion.  Where
 * they went in *segid and *off.
 */
int
local_seg_write_raw(struct local_store *lst, const void *buf, size_t len,
    uint64_t *segid, off_t *off)
{
	struct local_writer	*w = &lst->w;

	if (local_seg_flush(lst) == -1 || seg_room(lst, len) == -1)
		return -1;
	if (local_pwrite_full(w->fd, buf, len, w->end) == -1 ||
	    (!local_nosync(&lst->base) && fdatasync(w->fd) == -1)) {
		if (ftruncate(w->fd, w->end) == -1) {
			close(w->fd);
			w->fd = -1;
		}
		return -1;
	}
	*segid = w->segid;
	*off = w->end;
	w->end += (off_t)len;
	return 0;
}

/*
 * Cuts the torn tail of segment segid if no live process writes it: the
 * tail is found again from off (the end of a valid frame) once the lock
 * is held, since a scan made without it may have seen a frame half
 * copied by a writer that has since completed it, acknowledged it and
 * died.  Only what follows the last valid frame goes.  1 cut, 0 left
 * alone (a writer holds it, or nothing is torn), -1 on error.
 */
int
local_seg_cut(struct local_store *lst, uint64_t segid, off_t off)
{
	char	 name[SEG_NAME_LEN + 4];
	off_t	 good, end;
	int	 fd, save;

	if (lst->w.fd != -1 && segid == lst->w.segid)
		return 0;
	seg_name(name, sizeof(name), segid);
	if ((fd = openat(lst->segfd, name, O_RDWR | O_CLOEXEC |
	    O_NOFOLLOW)) == -1)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		close(fd);
		return 0;
	}
	if (seg_scan(fd, off, NULL, NULL, &good, &end) == -1)
		goto fail;
	if (good >= end) {
		close(fd);
		return 0;
	}
	log_warnx("store: segments/%s: cutting a torn tail at offset %lld "
	    "(its writer died mid-write)", name, (long long)good);
	if (ftruncate(fd, good) == -1 || (!local_nosync(&lst->base) &&
	    fdatasync(fd) == -1))
		goto fail;
	close(fd);
	return 1;
fail:
	save = errno;
	close(fd);
	errno = save;
	return -1;
}

/* --- deleting segments no retained record is in --- */

/* The sessions with frames in one segment: id -> seqs seen. */
struct gc_ent {
	char		 id[STORE_ID_MAX + 1];
	uint64_t	 lo, hi;
	int		 used;
};

struct gc_set {
	struct gc_ent	*v;
	size_t		 cap;		/* a power of two */
	size_t		 n;
	int		 err;
};

static int
gc_put(struct gc_set *g, const struct seg_frame *f)
{
	struct gc_ent	*nv, *e;
	size_t		 i, h, ncap;
	uint32_t	 c;

	if (g->n * 2 >= g->cap) {
		ncap = g->cap ? g->cap * 2 : 64;
		if ((nv = calloc(ncap, sizeof(*nv))) == NULL)
			return -1;
		for (i = 0; i < g->cap; i++) {
			if (!g->v[i].used)
				continue;
			c = seg_crc32c(0, g->v[i].id, strlen(g->v[i].id));
			for (h = c & (ncap - 1); nv[h].used; h = (h + 1) &
			    (ncap - 1))
				;
			nv[h] = g->v[i];
		}
		free(g->v);
		g->v = nv;
		g->cap = ncap;
	}
	c = seg_crc32c(0, f->id, f->idlen);
	for (h = c & (g->cap - 1); g->v[h].used; h = (h + 1) & (g->cap - 1)) {
		e = &g->v[h];
		if (strlen(e->id) == f->idlen &&
		    memcmp(e->id, f->id, f->idlen) == 0) {
			if (f->seq < e->lo)
				e->lo = f->seq;
			if (f->seq > e->hi)
				e->hi = f->seq;
			return 0;
		}
	}
	e = &g->v[h];
	memcpy(e->id, f->id, f->idlen);
	e->id[f->idlen] = '\0';
	e->lo = e->hi = f->seq;
	e->used = 1;
	g->n++;
	return 0;
}

static int
gc_scan_cb(void *arg, const struct seg_frame *f, off_t off, size_t flen)
{
	struct gc_set	*g = arg;

	(void)off;
	(void)flen;
	if (gc_put(g, f) == -1) {
		g->err = 1;
		return 1;
	}
	return 0;
}

/*
 * 1 when segment fd (segid) may go: no session's retained records are in
 * it.  A frame whose session has no index (expired, or never indexed:
 * never reported durable) holds nothing.
 */
static int
gc_unused(struct local_store *lst, int fd, uint64_t segid)
{
	struct gc_set	 g;
	off_t		 good, end;
	size_t		 i;
	int		 r = 1;

	memset(&g, 0, sizeof(g));
	if (seg_scan(fd, SEG_HDR_LEN, gc_scan_cb, &g, &good, &end) == -1 ||
	    g.err) {
		free(g.v);
		return 0;
	}
	for (i = 0; i < g.cap && r; i++)
		if (g.v[i].used && local_ix_refs(lst, g.v[i].id, segid,
		    g.v[i].lo, g.v[i].hi) != 0)
			r = 0;
	free(g.v);
	return r;
}

/*
 * The expiry sweep's part: deletes segments last written before cutoff
 * that no live process writes and no retained record is in.  Returns how
 * many were deleted.
 */
int
local_seg_gc(struct local_store *lst, uint64_t cutoff_ms)
{
	struct dirent	*de;
	struct stat	 sb;
	DIR		*d;
	uint64_t	 segid, ms;
	int		 fd, dfd, n = 0;

	if ((dfd = openat(lst->segfd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1 || (d = fdopendir(dfd)) == NULL) {
		log_warn("store: segments");
		if (dfd != -1)
			close(dfd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if ((segid = seg_parse_name(de->d_name)) == 0 ||
		    (lst->w.fd != -1 && segid == lst->w.segid))
			continue;
		if (fstatat(lst->segfd, de->d_name, &sb,
		    AT_SYMLINK_NOFOLLOW) == -1 || !S_ISREG(sb.st_mode))
			continue;
		ms = sb.st_mtim.tv_sec < 0 ? 0 :
		    (uint64_t)sb.st_mtim.tv_sec * 1000 +
		    (uint64_t)sb.st_mtim.tv_nsec / 1000000;
		if (ms >= cutoff_ms)
			continue;
		fd = openat(lst->segfd, de->d_name, O_RDWR | O_CLOEXEC |
		    O_NOFOLLOW);
		if (fd == -1)
			continue;
		/* A live writer's, or a later format's: left alone. */
		if (flock(fd, LOCK_EX | LOCK_NB) == -1 ||
		    (seg_check(fd, de->d_name) == -1 &&
		    errno == EPROTONOSUPPORT)) {
			close(fd);
			continue;
		}
		if (gc_unused(lst, fd, segid)) {
			if (unlinkat(lst->segfd, de->d_name, 0) == -1)
				log_warn("store: expire segments/%s",
				    de->d_name);
			else
				n++;
		}
		close(fd);
	}
	closedir(d);
	return n;
}
