/*
 * Local store, a session whose records are in the shared segments: its
 * index file sessions/<id>/index (layout in store_seg.c), flock()ed while
 * the session is open, says where each record is.
 *
 * Entries are written lazily: held per session and written by a timer
 * within LOCAL_IX_MS, at close and before a trim, except the first record
 * a session puts in a segment, whose entry is written by the group commit
 * itself.  So the records an index lacks (its writer died) are all after
 * its last entry, in that entry's segment: the next open scans that
 * segment from there, not everything.  The header's CLEAN flag says there
 * is nothing to scan for: set at close and whenever nothing of the
 * session is held or queued (local_ix_idle: after an unattached append,
 * by the timer for a session idle a tick), cleared before its next frame
 * is queued (local_ix_dirty).  So only a session appending when its
 * writer died is scanned, over about a second of that writer's output.
 *
 * Opening a session that still has a v1 log converts it: its records are
 * written to a segment and synced, the index written as index.tmp, synced
 * and renamed over index, then the log removed.  A crash before the
 * rename leaves the log (converted again, the first copy unreferenced); a
 * crash after it leaves an index and a stale log, removed at open once
 * its last seq is seen to be indexed (a log going further was written by
 * an older parleyd after a rollback: the open is refused, nothing lost).
 */
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"
#include "store_local.h"
#include "store_seg.h"

#define IX_BATCH	1024		/* entries read at once */
#define IX_CONV_CHUNK	(4u << 20)	/* conversion: bytes per write */
#define IX_ABSENT	(-2)		/* ix_frame: read, frame not there */

static off_t
ix_off(uint64_t k)
{
	return (off_t)(SEG_IHDR_LEN + k * SEG_IENT_LEN);
}

/* Every header carries the crashes the session has seen (its epochs). */
static int
ix_hdr_write(const struct local_sess *ls, int fd, uint64_t base, int clean,
    uint64_t last)
{
	unsigned char	 h[SEG_IHDR_LEN];
	struct seg_ihdr	 ih;

	ih.crashes = ls->crash_seen;
	ih.base = base;
	ih.flags = clean ? SEG_IDX_CLEAN : 0;
	ih.clean_last = clean ? last : 0;
	seg_ihdr_encode(h, &ih);
	return local_pwrite_full(fd, h, sizeof(h), 0);
}

/*
 * Writes the header's open/closed state without making the session look
 * used: expiry goes by the index's mtime, which only entries (and meta)
 * move, as a v1 log's did.
 */
static int
ix_hdr_mark(struct local_sess *ls, int clean)
{
	struct timespec	 ts[2];
	struct stat	 sb;
	int		 keep = fstat(ls->ixfd, &sb) == 0;

	if (ix_hdr_write(ls, ls->ixfd, ls->base.first_seq, clean,
	    ls->written) == -1)
		return -1;
	if (keep) {
		ts[0].tv_sec = 0;
		ts[0].tv_nsec = UTIME_OMIT;
		ts[1] = sb.st_mtim;
		(void)futimens(ls->ixfd, ts);
	}
	return 0;
}

/* Entries go to the index file: synced as the mode wants. */
static int
ix_synced(struct local_sess *ls)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;

	if (local_nosync(&lst->base))
		return 0;
	if (lst->base.fsync == STORE_FSYNC_BATCH) {
		lst->unsynced = 1;
		return 0;
	}
	return fdatasync(ls->ixfd);
}

int
local_ix_flush(struct local_sess *ls)
{
	unsigned char	*buf;
	size_t		 i, n = ls->npend;

	if (n == 0)
		return 0;
	if ((buf = malloc(n * SEG_IENT_LEN)) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		seg_ient_encode(buf + i * SEG_IENT_LEN, &ls->pend[i]);
	if (local_pwrite_full(ls->ixfd, buf, n * SEG_IENT_LEN,
	    ix_off(ls->ix_n)) == -1) {
		free(buf);
		/* A part written is cut at the next open (bad CRC). */
		if (ftruncate(ls->ixfd, ix_off(ls->ix_n)) == -1)
			log_warn("store: session %s: index", ls->base.id);
		return -1;
	}
	free(buf);
	ls->ix_n += n;
	ls->ix_segid = ls->pend[n - 1].segid;
	ls->npend = 0;
	return 0;
}

/*
 * Adds the entry of a record just written to a segment: held, or written
 * now when eager, when the hold is full, or when it is the session's
 * first record in that segment (what an open after a crash relies on).
 */
int
local_ix_add(struct local_sess *ls, const struct seg_ient *e, int eager)
{
	struct seg_ient	*p;
	size_t		 ncap;
	int		 first = e->segid != ls->ix_segid;

	if (ls->npend == ls->pcap) {
		ncap = ls->pcap ? ls->pcap * 2 : 16;
		if ((p = reallocarray(ls->pend, ncap, sizeof(*p))) == NULL)
			return -1;
		ls->pend = p;
		ls->pcap = ncap;
	}
	if (ls->npend == 0)
		ls->pend_us = util_mono_us();
	ls->pend[ls->npend++] = *e;
	if (!eager && !first && ls->npend < LOCAL_PEND_MAX)
		return 0;
	if (local_ix_flush(ls) == -1) {
		ls->npend--;
		return -1;
	}
	return first ? ix_synced(ls) : 0;
}

/* The entry of seq (first_seq <= seq <= written); 0 or -1/errno. */
int
local_ix_get(struct local_sess *ls, uint64_t seq, struct seg_ient *e)
{
	unsigned char	 b[SEG_IENT_LEN];
	uint64_t	 k = seq - ls->base.first_seq;

	if (seq < ls->base.first_seq || seq > ls->written) {
		errno = ENOENT;
		return -1;
	}
	if (k >= ls->ix_n) {
		*e = ls->pend[k - ls->ix_n];
		return 0;
	}
	if (local_pread_full(ls->ixfd, b, sizeof(b), ix_off(k)) == -1)
		return -1;
	if (seg_ient_decode(b, e) == -1 || e->seq != seq) {
		errno = EIO;
		return -1;
	}
	return 0;
}

/* A block of a segment read for frames. */
struct ix_blk {
	unsigned char	*buf;
	size_t		 cap;		/* one more byte: a NUL */
	uint64_t	 segid;
	off_t		 off;
	size_t		 len;
};

/*
 * The frame e points to, checked (its session and seq): 0 with f filled
 * (pointers into blk); IX_ABSENT (errno EIO) when the segment was read
 * and the frame is not there (short, torn, another record); -1 with
 * errno when it could not be read (EIO for a missing segment: said).
 */
static int
ix_frame(struct local_sess *ls, struct ix_blk *blk, const struct seg_ient *e,
    uint64_t span, struct seg_frame *f)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;
	unsigned char		*nb;
	size_t			 want, flen, got;
	ssize_t			 r;
	int			 fd;

	if (blk->buf == NULL || blk->segid != e->segid ||
	    (off_t)e->off < blk->off ||
	    (off_t)(e->off + e->len) > blk->off + (off_t)blk->len) {
		/* What the records read next need, up to a block. */
		want = span > LOCAL_BLOCK ? LOCAL_BLOCK : (size_t)span;
		if (want < e->len)
			want = e->len;
		if (want + 1 > blk->cap) {
			if ((nb = realloc(blk->buf, want + 1)) == NULL)
				return -1;
			blk->buf = nb;
			blk->cap = want + 1;
		}
		if ((fd = local_seg_fd(lst, e->segid)) == -1) {
			if (errno == ENOENT) {
				log_warnx("store: session %s: segment %016"
				    PRIx64 " is missing (seq %" PRIu64 " is "
				    "indexed there): restore segments/ from "
				    "a backup", ls->base.id, e->segid, e->seq);
				errno = EIO;
			}
			return -1;
		}
		blk->len = 0;
		blk->segid = e->segid;
		blk->off = (off_t)e->off;
		for (got = 0; got < want; got += (size_t)r) {
			r = pread(fd, blk->buf + got, want - got,
			    (off_t)e->off + (off_t)got);
			if (r == -1 && errno == EINTR) {
				r = 0;
				continue;
			}
			if (r == -1)
				return -1;
			if (r == 0)
				break;
		}
		blk->len = got;
	}
	/* Bytes a short read did not fill are not decoded: the segment
	 * ends before the frame does. */
	if ((off_t)(e->off + e->len) > blk->off + (off_t)blk->len ||
	    seg_frame_decode(blk->buf + (e->off - (uint64_t)blk->off),
	    e->len, f, &flen) != 1 || flen != e->len || f->seq != e->seq ||
	    f->idlen != strlen(ls->base.id) ||
	    memcmp(f->id, ls->base.id, f->idlen) != 0) {
		log_warnx("store: session %s: segment %016" PRIx64 " does not "
		    "match the index at seq %" PRIu64, ls->base.id, e->segid,
		    e->seq);
		errno = EIO;
		return IX_ABSENT;
	}
	return 0;
}

int
local_ix_range(struct store_sess *s, uint64_t after, size_t limit,
    store_range_cb cb, void *arg)
{
	struct local_sess	*ls = (struct local_sess *)s;
	struct ix_blk		 blk;
	struct seg_ient		*ents = NULL;
	struct seg_frame	 f;
	unsigned char		*raw = NULL;
	uint64_t		 seq, count, k, i, j, n, infile, span;
	size_t			 done = 0;
	char			*end, save;
	int			 stop = 0, err;

	if (after >= ls->written)
		return 0;
	seq = after < s->first_seq ? s->first_seq : after + 1;
	count = ls->written - seq + 1;
	if (limit != 0 && limit < count)
		count = limit;
	if (count > INT_MAX)
		count = INT_MAX;
	memset(&blk, 0, sizeof(blk));
	n = count < IX_BATCH ? count : IX_BATCH;
	if ((ents = calloc(n, sizeof(*ents))) == NULL ||
	    (raw = malloc(n * SEG_IENT_LEN)) == NULL)
		goto fail;
	while (done < count && !stop) {
		/* A batch of entries: from the file, then the held ones. */
		n = count - done < IX_BATCH ? count - done : IX_BATCH;
		k = seq - s->first_seq;
		infile = k < ls->ix_n ? ls->ix_n - k : 0;
		if (infile > n)
			infile = n;
		if (infile > 0 && local_pread_full(ls->ixfd, raw, infile *
		    SEG_IENT_LEN, ix_off(k)) == -1)
			goto fail;
		for (i = 0; i < n; i++) {
			if (i < infile) {
				if (seg_ient_decode(raw + i * SEG_IENT_LEN,
				    &ents[i]) == -1 || ents[i].seq != seq + i) {
					log_warnx("store: session %s: index "
					    "entry %" PRIu64 " is corrupt",
					    s->id, seq + i);
					errno = EIO;
					goto fail;
				}
			} else
				ents[i] = ls->pend[k + i - ls->ix_n];
		}
		for (i = 0; i < n && !stop; i++) {
			/* Span: to the end of the batch's last record in
			 * the same segment (frames of one session in one
			 * segment are in order). */
			for (j = n; j > i + 1 && ents[j - 1].segid !=
			    ents[i].segid; j--)
				;
			span = ents[j - 1].off + ents[j - 1].len >
			    ents[i].off ? ents[j - 1].off + ents[j - 1].len -
			    ents[i].off : ents[i].len;
			if (ix_frame(ls, &blk, &ents[i], span, &f) != 0)
				goto fail;
			/* The byte after the json is the block's (cap has
			 * one more): NUL-terminated for the callback. */
			end = (char *)(uintptr_t)f.json + f.len;
			save = *end;
			*end = '\0';
			done++;
			stop = cb(arg, f.seq, f.ts, f.json, f.len) != 0;
			*end = save;
		}
		seq += n;
	}
	free(blk.buf);
	free(ents);
	free(raw);
	return (int)done;
fail:
	err = errno;
	free(blk.buf);
	free(ents);
	free(raw);
	errno = err;
	return -1;
}

/* The open's scan of what the index lacks. */
struct ix_tail {
	struct local_sess	*ls;
	uint64_t		 segid;
	int			 err;
	uint64_t		 found;
};

static int
ix_tail_cb(void *arg, const struct seg_frame *f, off_t off, size_t flen)
{
	struct ix_tail		*t = arg;
	struct local_sess	*ls = t->ls;
	struct seg_ient		 e;

	if (f->idlen != strlen(ls->base.id) ||
	    memcmp(f->id, ls->base.id, f->idlen) != 0 ||
	    f->seq != ls->written + 1)
		return 0;
	e.seq = f->seq;
	e.segid = t->segid;
	e.off = (uint64_t)off;
	e.ts = f->ts;
	e.len = (uint32_t)flen;
	if (local_ix_add(ls, &e, 0) == -1) {
		t->err = errno;
		return 1;
	}
	ls->written = f->seq;
	t->found++;
	return 0;
}

/*
 * Checks the index's last entries against their frames, dropping those
 * that point at nothing (an index written, its segment not, then a power
 * failure).  An entry goes only when its segment was read and the frame
 * is not there, or the entry itself is torn: any other error (no
 * descriptor, EACCES, a missing segment) fails the open and changes
 * nothing, or a process short of descriptors would lose the index.
 * 0 or -1/errno.
 */
static int
ix_check_tail(struct local_sess *ls)
{
	struct ix_blk		 blk;
	struct seg_ient		 e;
	struct seg_frame	 f;
	unsigned char		 b[SEG_IENT_LEN];
	int			 r, save;

	memset(&blk, 0, sizeof(blk));
	while (ls->ix_n > 0) {
		if (local_pread_full(ls->ixfd, b, sizeof(b),
		    ix_off(ls->ix_n - 1)) == -1)
			goto fail;
		if (seg_ient_decode(b, &e) == 0 &&
		    e.seq == ls->base.first_seq + ls->ix_n - 1) {
			if ((r = ix_frame(ls, &blk, &e, e.len, &f)) == 0) {
				ls->ix_segid = e.segid;
				break;
			}
			if (r != IX_ABSENT)
				goto fail;
		}
		log_warnx("store: session %s: dropping index entry %" PRIu64
		    " (no such record in its segment)", ls->base.id,
		    ls->base.first_seq + ls->ix_n - 1);
		ls->ix_n--;
		if (ftruncate(ls->ixfd, ix_off(ls->ix_n)) == -1)
			goto fail;
	}
	free(blk.buf);
	return 0;
fail:
	save = errno;
	free(blk.buf);
	errno = save;
	return -1;
}

/* Loads an open, locked index file fd into ls; 0 or -1/errno. */
static int
ix_load(struct local_sess *ls, int fd, int fresh)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;
	struct store_sess	*s = &ls->base;
	unsigned char		 h[SEG_IHDR_LEN];
	struct seg_ihdr		 ih;
	struct ix_tail		 t;
	struct seg_ient		 e;
	struct stat		 sb;
	off_t			 good, end;
	uint32_t		 version;
	int			 segfd;

	ls->ixfd = fd;
	ls->seg = 1;
	if (fstat(fd, &sb) == -1)
		return -1;

	if (fresh || sb.st_size == 0) {
		/* New, or made and never written by a process that died. */
		if (ix_hdr_write(ls, fd, 1, 0, 0) == -1 || ftruncate(fd,
		    SEG_IHDR_LEN) == -1)
			return -1;
		ih.base = 1;
		ih.flags = 0;
		ih.clean_last = 0;
		ih.crashes = ls->crash_seen;
		sb.st_size = SEG_IHDR_LEN;
	} else if (local_pread_full(fd, h, sizeof(h), 0) == -1 ||
	    seg_ihdr_decode(h, sizeof(h), &ih, &version) == -1) {
		if (errno == EPROTONOSUPPORT) {
			log_warnx("store: session %s: its index is in format "
			    "version %u; this parleyd reads version %u only: "
			    "run the parleyd that wrote it", s->id, version,
			    SEG_VERSION);
			return -1;
		}
		log_warnx("store: session %s: the index header is corrupt; "
		    "move sessions/%s away to start it afresh", s->id, s->id);
		errno = EIO;
		return -1;
	}
	s->first_seq = ih.base;
	if (ih.crashes > ls->crash_seen)
		ls->crash_seen = ih.crashes;
	ls->ix_n = (uint64_t)(sb.st_size - SEG_IHDR_LEN) / SEG_IENT_LEN;
	if (ix_off(ls->ix_n) != sb.st_size &&
	    ftruncate(fd, ix_off(ls->ix_n)) == -1)
		return -1;
	ls->ix_segid = 0;
	if (ix_check_tail(ls) == -1)
		return -1;
	ls->written = s->first_seq + ls->ix_n - 1;
	if (ls->ix_n > 0 && !((ih.flags & SEG_IDX_CLEAN) &&
	    ih.clean_last == ls->written)) {
		/* Its writer died: the records after the last entry. */
		if (local_ix_get(ls, ls->written, &e) == -1)
			return -1;
		if ((segfd = local_seg_fd(lst, e.segid)) == -1)
			return -1;
		memset(&t, 0, sizeof(t));
		t.ls = ls;
		t.segid = e.segid;
		if (seg_scan(segfd, (off_t)(e.off + e.len), ix_tail_cb, &t,
		    &good, &end) == -1)
			return -1;
		if (t.err != 0) {
			errno = t.err;
			return -1;
		}
		/* Cut where a scan under the segment's lock says. */
		if (good < end && local_seg_cut(lst, e.segid, good) == -1)
			log_warn("store: session %s: cutting segment %016"
			    PRIx64, s->id, e.segid);
		if (t.found > 0 && (local_ix_flush(ls) == -1 ||
		    ix_synced(ls) == -1))
			return -1;
	}
	/* A clean header that says it all stays clean until a frame is
	 * queued (local_ix_dirty); a stale one is marked now. */
	ls->ix_clean = ls->ix_n > 0 && (ih.flags & SEG_IDX_CLEAN) &&
	    ih.clean_last == ls->written;
	if ((ih.flags & SEG_IDX_CLEAN) && !ls->ix_clean &&
	    (ix_hdr_mark(ls, 0) == -1 || ix_synced(ls) == -1))
		return -1;
	ls->tick_written = ls->written;
	s->last_seq = s->durable_seq = ls->written;
	return 0;
}

/*
 * After fd (opened as dirfd/name) is flock()ed: 0 when name still is
 * that file, else -1 with errno EBUSY.  The owner's trim or conversion
 * may have renamed another file over name between our open and flock:
 * the lock would then be on an unlinked inode, beside the owner's.
 */
static int
ix_lock_same(int dirfd, const char *name, int fd)
{
	struct stat	 a, b;

	if (fstat(fd, &a) == -1)
		return -1;
	if (fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == -1 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		errno = EBUSY;
		return -1;
	}
	return 0;
}

/*
 * A v1 log beside a loaded index: the leftover of a conversion that
 * crashed after its rename (its records all indexed: removed), or one an
 * older parleyd wrote after a rollback (records past the index: kept,
 * and the open refused, or they would be lost).  0 or -1/errno.
 */
static int
ix_stale_log(struct local_sess *ls)
{
	struct store_sess	*s = &ls->base;
	uint64_t		 first = s->first_seq, last = s->last_seq;
	uint64_t		 durable = s->durable_seq, loglast;
	int			 r = -1, save;

	ls->logfd = openat(ls->dirfd, "log", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (ls->logfd == -1)
		return errno == ENOENT ? 0 : -1;
	if (flock(ls->logfd, LOCK_EX | LOCK_NB) == -1) {
		if (errno == EWOULDBLOCK)
			errno = EBUSY;
		goto out;
	}
	if (local_scan(ls) == -1)
		goto out;
	loglast = s->last_seq;
	s->first_seq = first;
	s->last_seq = last;
	s->durable_seq = durable;
	if (loglast > ls->written) {
		log_warnx("store: session %s: sessions/%s/log has records up "
		    "to seq %" PRIu64 ", past its index (%" PRIu64 "): an "
		    "older parleyd wrote it after the upgrade.  Move "
		    "sessions/%s/index away to convert the log again, or the "
		    "log away to keep the index", s->id, s->id, loglast,
		    ls->written, s->id);
		errno = EEXIST;
		goto out;
	}
	if (unlinkat(ls->dirfd, "log", 0) == -1)
		goto out;
	r = 0;
out:
	save = errno;
	s->first_seq = first;
	s->last_seq = last;
	s->durable_seq = durable;
	free(ls->idx);
	ls->idx = NULL;
	ls->n = ls->cap = 0;
	close(ls->logfd);
	ls->logfd = -1;
	errno = save;
	return r;
}

/*
 * Opens the index of the session (its directory open in ls->dirfd),
 * creating it when fresh.  0, or -1 with errno (EBUSY locked elsewhere).
 */
int
local_ix_open(struct local_sess *ls, int fresh)
{
	struct stat	 sb;
	int		 fd, save;

	fd = openat(ls->dirfd, "index", O_RDWR | (fresh ? O_CREAT : 0) |
	    O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd == -1)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == -1 ||
	    ix_lock_same(ls->dirfd, "index", fd) == -1) {
		save = errno == EWOULDBLOCK ? EBUSY : errno;
		close(fd);
		errno = save;
		return -1;
	}
	/* Leftovers: a trim's or a conversion's tmp, a converted log. */
	if (unlinkat(ls->dirfd, "index.tmp", 0) == -1 && errno != ENOENT)
		goto fail;
	if (ix_load(ls, fd, fresh) == -1)
		goto fail;
	if (!fresh && fstatat(ls->dirfd, "log", &sb,
	    AT_SYMLINK_NOFOLLOW) == 0 && ix_stale_log(ls) == -1)
		goto fail;
	return 0;
fail:
	save = errno;
	close(fd);
	ls->ixfd = -1;
	ls->seg = 0;
	errno = save;
	return -1;
}

/* Writes a new index file tmp: header, then entries [from, ix_n). */
static int
ix_write_tmp(struct local_sess *ls, int tfd, uint64_t base, int clean,
    uint64_t last, const struct seg_ient *ents, uint64_t from, uint64_t n)
{
	unsigned char	*buf;
	uint64_t	 k, m, i;
	int		 nosync = local_nosync(ls->base.store);

	if (ix_hdr_write(ls, tfd, base, clean, last) == -1)
		return -1;
	if ((buf = malloc(IX_BATCH * SEG_IENT_LEN)) == NULL)
		return -1;
	for (k = 0; k < n; k += m) {
		m = n - k < IX_BATCH ? n - k : IX_BATCH;
		if (ents != NULL) {
			for (i = 0; i < m; i++)
				seg_ient_encode(buf + i * SEG_IENT_LEN,
				    &ents[k + i]);
		} else if (local_pread_full(ls->ixfd, buf, m * SEG_IENT_LEN,
		    ix_off(from + k)) == -1)
			goto fail;
		if (local_pwrite_full(tfd, buf, m * SEG_IENT_LEN,
		    ix_off(k)) == -1)
			goto fail;
	}
	free(buf);
	if (!nosync && fsync(tfd) == -1)
		return -1;
	return 0;
fail:
	free(buf);
	return -1;
}

/* index.tmp made, locked, written; renamed over index.  The fd or -1. */
static int
ix_replace(struct local_sess *ls, uint64_t base, int clean, uint64_t last,
    const struct seg_ient *ents, uint64_t from, uint64_t n)
{
	int	 tfd, save;

	tfd = openat(ls->dirfd, "index.tmp", O_RDWR | O_CREAT | O_TRUNC |
	    O_CLOEXEC | O_NOFOLLOW, 0640);
	if (tfd == -1)
		return -1;
	/* Hold the lock on the file that becomes the index. */
	if (flock(tfd, LOCK_EX | LOCK_NB) == -1 ||
	    ix_write_tmp(ls, tfd, base, clean, last, ents, from, n) == -1 ||
	    renameat(ls->dirfd, "index.tmp", ls->dirfd, "index") == -1) {
		save = errno;
		close(tfd);
		unlinkat(ls->dirfd, "index.tmp", 0);
		errno = save;
		return -1;
	}
	if (!local_nosync(ls->base.store) && fsync(ls->dirfd) == -1)
		log_warn("store: session %s: fsync of its directory",
		    ls->base.id);
	return tfd;
}

struct ix_conv {
	struct local_sess	*ls;
	unsigned char		*buf;
	size_t			 len;
	struct seg_ient		*ents;
	size_t			 n;		/* entries made */
	size_t			 chunk0;	/* first entry of buf */
	int			 err;
};

/* Writes the frames gathered so far and fixes their entries' places. */
static int
conv_write(struct ix_conv *c)
{
	struct local_store	*lst = (struct local_store *)c->ls->base.store;
	uint64_t		 segid;
	off_t			 at;
	size_t			 i;

	if (c->len == 0)
		return 0;
	if (local_seg_write_raw(lst, c->buf, c->len, &segid, &at) == -1)
		return -1;
	for (i = c->chunk0; i < c->n; i++) {
		c->ents[i].segid = segid;
		c->ents[i].off += (uint64_t)at;
	}
	c->chunk0 = c->n;
	c->len = 0;
	return 0;
}

static int
conv_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct ix_conv	*c = arg;
	size_t		 idlen = strlen(c->ls->base.id);
	size_t		 flen = seg_frame_size(idlen, len);

	if (c->len + flen > IX_CONV_CHUNK && conv_write(c) == -1) {
		c->err = errno;
		return 1;
	}
	if (c->len + flen > IX_CONV_CHUNK) {
		/* One record bigger than a chunk: a buffer of its own. */
		unsigned char *nb = realloc(c->buf, flen);

		if (nb == NULL) {
			c->err = errno;
			return 1;
		}
		c->buf = nb;
	}
	seg_frame_encode(c->buf + c->len, seq, ts, c->ls->base.id, idlen,
	    json, len);
	c->ents[c->n].seq = seq;
	c->ents[c->n].ts = ts;
	c->ents[c->n].off = c->len;	/* in buf until written */
	c->ents[c->n].len = (uint32_t)flen;
	c->n++;
	c->len += flen;
	return 0;
}

/*
 * Converts the session's v1 log (ls->dirfd open, no index) into segment
 * records and an index, then opens that.  0, or -1 with errno (EBUSY: the
 * log is locked by another process).
 */
int
local_ix_convert(struct local_sess *ls)
{
	struct store_sess	*s = &ls->base;
	struct ix_conv		 c;
	struct stat		 lsb;
	struct timespec		 ts[2];
	int			 fd, save, r;

	memset(&c, 0, sizeof(c));
	ls->logfd = openat(ls->dirfd, "log", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (ls->logfd == -1)
		return -1;
	if (flock(ls->logfd, LOCK_EX | LOCK_NB) == -1 ||
	    ix_lock_same(ls->dirfd, "log", ls->logfd) == -1) {
		if (errno == EWOULDBLOCK)
			errno = EBUSY;
		goto fail;
	}
	if (local_scan(ls) == -1 || fstat(ls->logfd, &lsb) == -1)
		goto fail;
	c.ls = ls;
	if ((c.ents = calloc(ls->n + 1, sizeof(*c.ents))) == NULL ||
	    (c.buf = malloc(IX_CONV_CHUNK)) == NULL)
		goto fail;
	if (ls->n > 0) {
		r = local_range(s, 0, 0, conv_cb, &c);
		if (r == -1 || c.err != 0 || (size_t)r != ls->n) {
			if (c.err != 0)
				errno = c.err;
			else if (r != -1)
				errno = EIO;
			goto fail;
		}
		if (conv_write(&c) == -1)
			goto fail;
	}
	/* Records synced (local_seg_write_raw), then the index. */
	if ((fd = ix_replace(ls, s->first_seq, 1, s->last_seq, c.ents, 0,
	    ls->n)) == -1)
		goto fail;
	/* As old as the log was: converting is not a use. */
	ts[0].tv_sec = 0;
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1] = lsb.st_mtim;
	(void)futimens(fd, ts);
	log_info("store: session %s: converted its v1 log (%zu records) to "
	    "the segment log", s->id, ls->n);
	free(c.ents);
	free(c.buf);
	c.ents = NULL;
	c.buf = NULL;
	free(ls->idx);
	ls->idx = NULL;
	ls->n = ls->cap = 0;
	if (unlinkat(ls->dirfd, "log", 0) == -1)
		log_warn("store: session %s: removing its converted log",
		    s->id);
	close(ls->logfd);
	ls->logfd = -1;
	if (ix_load(ls, fd, 0) == -1) {
		save = errno;
		close(fd);
		ls->ixfd = -1;
		ls->seg = 0;
		errno = save;
		return -1;
	}
	return 0;
fail:
	save = errno;
	free(c.ents);
	free(c.buf);
	free(ls->idx);
	ls->idx = NULL;
	ls->n = ls->cap = 0;
	if (ls->logfd != -1)
		close(ls->logfd);
	ls->logfd = -1;
	errno = save;
	return -1;
}

/*
 * Before a frame of ls is queued: a header marked clean says no frame
 * follows its last entry, so it is marked not clean first, synced as the
 * entries are (ALWAYS: before the frame can be reported durable).  One
 * write per idle-to-active change.  0 or -1/errno.
 */
int
local_ix_dirty(struct local_sess *ls)
{
	if (!ls->ix_clean)
		return 0;
	if (ix_hdr_mark(ls, 0) == -1 || ix_synced(ls) == -1)
		return -1;
	ls->ix_clean = 0;
	return 0;
}

/*
 * Marks the header clean when nothing of ls is held or queued: its last
 * frame is indexed, so an open after a crash need not scan (a scan from
 * an idle session's last entry could read a whole segment of other
 * sessions' frames).  Not synced: a clean mark lost only means a scan.
 */
void
local_ix_idle(struct local_sess *ls)
{
	if (ls->ix_clean || !ls->seg || ls->ixfd == -1 || ls->failed ||
	    ls->npend > 0 || ls->queued > 0 || ls->ix_n == 0)
		return;
	if (ix_hdr_mark(ls, 1) == -1) {
		log_warn("store: session %s: index header", ls->base.id);
		return;
	}
	ls->ix_clean = 1;
}

/* Closes the index: held entries written, the header CLEAN. */
void
local_ix_close(struct local_sess *ls)
{
	if (ls->ixfd == -1)
		return;
	if (!ls->failed && (local_ix_flush(ls) == -1 ||
	    ix_hdr_mark(ls, 1) == -1 || ix_synced(ls) == -1))
		log_warn("store: session %s: closing its index (the next open "
		    "scans for what it lacks)", ls->base.id);
	close(ls->ixfd);
	ls->ixfd = -1;
	free(ls->pend);
	ls->pend = NULL;
	ls->npend = ls->pcap = 0;
}

/* The synchronous append: queued and group-committed at once. */
int
local_ix_append(struct store_sess *s, uint64_t seq, uint64_t ts_ms,
    const char *json, size_t len)
{
	struct local_sess	*ls = (struct local_sess *)s;
	struct local_store	*lst = (struct local_store *)s->store;

	if (ls->failed) {
		errno = EIO;
		return -1;
	}
	if (local_seg_queue(ls, seq, ts_ms, json, len) == -1)
		return -1;
	s->last_seq = seq;
	if (local_seg_flush(lst) == -1 || ls->written != seq) {
		if (ls->written != seq && errno == 0)
			errno = EIO;
		s->last_seq = ls->written;
		return -1;
	}
	/* Unattached, the entry is written: nothing is held. */
	if (!s->store->attached)
		local_ix_idle(ls);
	return 0;
}

/* Drops records older than cutoff from the front, never the newest. */
int
local_ix_trim(struct local_sess *ls, uint64_t cutoff)
{
	struct store_sess	*s = &ls->base;
	struct local_store	*lst = (struct local_store *)s->store;
	unsigned char		*raw;
	struct seg_ient		 e;
	uint64_t		 n, drop = 0, k, m, i;
	int			 fd, stop = 0;

	if (ls->failed) {
		errno = EIO;
		return -1;
	}
	if ((ls->queued > 0 && local_seg_flush(lst) == -1) ||
	    local_ix_flush(ls) == -1)
		return -1;
	n = ls->ix_n;
	if (n < 2)
		return 0;
	if ((raw = malloc(IX_BATCH * SEG_IENT_LEN)) == NULL)
		return -1;
	for (k = 0; k < n - 1 && !stop; k += m) {
		m = n - 1 - k < IX_BATCH ? n - 1 - k : IX_BATCH;
		if (local_pread_full(ls->ixfd, raw, m * SEG_IENT_LEN,
		    ix_off(k)) == -1) {
			free(raw);
			return -1;
		}
		for (i = 0; i < m; i++) {
			if (seg_ient_decode(raw + i * SEG_IENT_LEN, &e) == -1) {
				free(raw);
				errno = EIO;
				return -1;
			}
			if (e.ts >= cutoff) {
				stop = 1;
				break;
			}
			drop++;
		}
	}
	free(raw);
	if (drop == 0)
		return 0;
	if ((fd = ix_replace(ls, s->first_seq + drop, 0, 0, NULL, drop,
	    n - drop)) == -1)
		return -1;
	close(ls->ixfd);
	ls->ixfd = fd;
	ls->ix_clean = 0;		/* the new header says not clean */
	ls->ix_n -= drop;
	s->first_seq += drop;
	return (int)(drop > INT_MAX ? INT_MAX : drop);
}

/*
 * 1 when one of entries k0..k1 (inclusive) of index fd points into
 * segid, 0 when none does, -1/errno: read IX_BATCH entries at a time
 * (one pread per seq made a sweep over a repeated conversion's segments
 * 10^5-10^6 preads each).
 */
static int
ix_refs_file(int fd, uint64_t k0, uint64_t k1, uint64_t segid)
{
	unsigned char	*raw;
	struct seg_ient	 e;
	uint64_t	 k, m, i;
	int		 r = 0;

	if (k0 > k1)
		return 0;
	if ((raw = malloc(IX_BATCH * SEG_IENT_LEN)) == NULL)
		return -1;
	for (k = k0; k <= k1 && r == 0; k += m) {
		m = k1 - k + 1 < IX_BATCH ? k1 - k + 1 : IX_BATCH;
		if (local_pread_full(fd, raw, m * SEG_IENT_LEN,
		    ix_off(k)) == -1) {
			r = -1;
			break;
		}
		for (i = 0; i < m; i++) {
			if (seg_ient_decode(raw + i * SEG_IENT_LEN, &e) == -1) {
				errno = EIO;
				r = -1;
				break;
			}
			if (e.segid == segid) {
				r = 1;
				break;
			}
		}
	}
	free(raw);
	return r;
}

/*
 * For the segment sweep: 1 when a retained record of session id may be
 * in segment segid (whose frames of it have seqs lo..hi), 0 when none is,
 * -1 when it cannot tell (kept, then).
 */
int
local_ix_refs(struct local_store *lst, const char *id, uint64_t segid,
    uint64_t lo, uint64_t hi)
{
	struct store_sess	*s;
	struct local_sess	*ls;
	struct seg_ihdr		 ih;
	struct stat		 sb;
	unsigned char		 h[SEG_IHDR_LEN];
	char			 path[STORE_ID_MAX + 16];
	uint64_t		 q, n, last, from, to;
	uint32_t		 version;
	size_t			 i;
	int			 fd, r;

	if (!store_valid_id(id) || hi < lo)
		return 0;
	if ((s = store_sess_find(&lst->base, id)) != NULL) {
		ls = (struct local_sess *)s;
		if (!ls->seg)
			return 0;
		from = lo > s->first_seq ? lo : s->first_seq;
		to = hi < ls->written ? hi : ls->written;
		if (from > to)
			return 0;
		/* The index file's part, then the entries held. */
		if (ls->ix_n > 0 && from - s->first_seq < ls->ix_n) {
			q = to - s->first_seq < ls->ix_n ? to - s->first_seq :
			    ls->ix_n - 1;
			if ((r = ix_refs_file(ls->ixfd, from - s->first_seq, q,
			    segid)) != 0)
				return r;
		}
		for (i = 0; i < ls->npend; i++)
			if (ls->pend[i].seq >= from && ls->pend[i].seq <= to &&
			    ls->pend[i].segid == segid)
				return 1;
		return 0;
	}
	local_path(path, sizeof(path), id, "index");
	if ((fd = openat(lst->sessfd, path, O_RDONLY | O_CLOEXEC |
	    O_NOFOLLOW)) == -1)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &sb) == -1 || sb.st_size < SEG_IHDR_LEN ||
	    local_pread_full(fd, h, sizeof(h), 0) == -1 ||
	    seg_ihdr_decode(h, sizeof(h), &ih, &version) == -1) {
		close(fd);
		return -1;
	}
	n = (uint64_t)(sb.st_size - SEG_IHDR_LEN) / SEG_IENT_LEN;
	last = ih.base + n - 1;
	from = lo > ih.base ? lo : ih.base;
	to = hi < last ? hi : last;
	r = n > 0 && from <= to ? ix_refs_file(fd, from - ih.base,
	    to - ih.base, segid) : 0;
	/* Frames past the index of a session not closed clean: its open
	 * will index them from there. */
	if (r == 0 && hi > last && !((ih.flags & SEG_IDX_CLEAN) &&
	    ih.clean_last == last))
		r = 1;
	close(fd);
	return r;
}
