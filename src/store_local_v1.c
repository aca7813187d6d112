/*
 * Local store, the v1 session log: one text file per session,
 * STATE_DIR/sessions/<id>/log, one record per line (the format is in
 * store_local.c's header comment).  Reading it back (the index of line
 * offsets, torn-tail repair), appending, ranges and trimming.
 */
#include <sys/file.h>
#include <sys/types.h>
#include <sys/uio.h>

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
#include "store_local.h"

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
int
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

int
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

int
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

int
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

