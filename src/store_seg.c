/*
 * The local store's checksummed records.  Layouts (little-endian; CRC is
 * CRC-32C; reserved bytes are written 0 and not checked):
 *
 * Segment header, 32 bytes, at offset 0 of STATE_DIR/segments/<hex>.seg:
 *   0 "PARLEYSG"  8 u32 version  12 u32 header length (32)
 *   16 u64 segment id (the file's name)  24 u32 reserved
 *   28 u32 CRC of bytes 0..27
 *
 * Frame (one record), after the header, back to back:
 *   0 u32 frame length (header + id + json)  4 u32 CRC of bytes 8..end
 *   8 u64 seq  16 u64 ts (unix ms)  24 u8 id length (1..128)
 *   25 u8 type (1: a record)  26 u16 reserved  28 u32 reserved
 *   32 the session id, then the json (1 byte or more)
 * A frame is whole and valid or it is the torn end of the segment: length
 * and CRC together tell (a zero-filled or garbage tail fails them).
 *
 * Index header, 64 bytes, at offset 0 of sessions/<id>/index:
 *   0 "PARLEYIX"  8 u32 version  12 u32 flags (1: closed clean)
 *   16 u64 base (seq of entry 0)  24 u64 last seq when closed clean
 *   32 u32 machine crashes seen (store_local_run.c; an index written
 *   before it existed has 0 there)  36..59 reserved
 *   60 u32 CRC of bytes 0..59
 * Index entry, 40 bytes each after the header; entry k is seq base + k:
 *   0 u64 seq  8 u64 segment id  16 u64 frame offset  24 u64 ts
 *   32 u32 frame length  36 u32 CRC of bytes 0..35
 *
 * Meta slot, sessions/<id>/meta.0, meta.1 and meta.2:
 *   0 "PARLEYMT"  8 u64 generation  16 u32 text length  20 u32 version
 *   24 u32 reserved  28 u32 CRC of bytes 8..27 and the text;  32 the text
 */
#include <sys/stat.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_seg.h"

#define SEG_TYPE_REC	1
#define SEG_BLOCK	(256u * 1024)	/* scan read size */

static const char seg_magic[8] = { 'P', 'A', 'R', 'L', 'E', 'Y', 'S', 'G' };
static const char ix_magic[8] = { 'P', 'A', 'R', 'L', 'E', 'Y', 'I', 'X' };
static const char mt_magic[8] = { 'P', 'A', 'R', 'L', 'E', 'Y', 'M', 'T' };

/* --- CRC-32C: slicing by 8, the table made once --- */

static uint32_t		 crc_tab[8][256];
static pthread_once_t	 crc_once = PTHREAD_ONCE_INIT;

static void
crc_init(void)
{
	uint32_t	 c;
	unsigned	 i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^
			    crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

uint32_t
seg_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char	*p = buf;
	uint32_t		 c, lo, hi;

	pthread_once(&crc_once, crc_init);
	c = ~crc;
	while (len >= 8) {
		lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
		    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
		    (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		    crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^
		    crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
		    crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
}

/* --- little-endian fields --- */

static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static void
put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t
get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static uint64_t
get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* --- segment header --- */

void
seg_hdr_encode(unsigned char out[SEG_HDR_LEN], uint64_t segid)
{
	memset(out, 0, SEG_HDR_LEN);
	memcpy(out, seg_magic, 8);
	put32(out + 8, SEG_VERSION);
	put32(out + 12, SEG_HDR_LEN);
	put64(out + 16, segid);
	put32(out + 28, seg_crc32c(0, out, 28));
}

/*
 * A header's magic and checksum say what it is; the version is judged
 * only then, so that garbage is never reported as a newer format.
 */
static int
hdr_check(const unsigned char *p, size_t len, size_t want, const char *magic,
    size_t crc_at, uint32_t *version)
{
	*version = 0;
	if (len < want || memcmp(p, magic, 8) != 0 ||
	    get32(p + crc_at) != seg_crc32c(0, p, crc_at)) {
		errno = EINVAL;
		return -1;
	}
	*version = get32(p + 8);
	if (*version != SEG_VERSION) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return 0;
}

int
seg_hdr_decode(const unsigned char *p, size_t len, uint64_t *segid,
    uint32_t *version)
{
	if (hdr_check(p, len, SEG_HDR_LEN, seg_magic, 28, version) == -1)
		return -1;
	if (get32(p + 12) != SEG_HDR_LEN) {
		errno = EINVAL;
		return -1;
	}
	*segid = get64(p + 16);
	return 0;
}

/* --- frames --- */

size_t
seg_frame_size(size_t idlen, size_t len)
{
	return SEG_FRAME_HDR + idlen + len;
}

void
seg_frame_encode(unsigned char *out, uint64_t seq, uint64_t ts,
    const char *id, size_t idlen, const char *json, size_t len)
{
	size_t	 flen = seg_frame_size(idlen, len);

	put32(out, (uint32_t)flen);
	put64(out + 8, seq);
	put64(out + 16, ts);
	out[24] = (unsigned char)idlen;
	out[25] = SEG_TYPE_REC;
	memset(out + 26, 0, 6);
	memcpy(out + SEG_FRAME_HDR, id, idlen);
	memcpy(out + SEG_FRAME_HDR + idlen, json, len);
	put32(out + 4, seg_crc32c(0, out + 8, flen - 8));
}

int
seg_frame_decode(const unsigned char *p, size_t avail, struct seg_frame *f,
    size_t *flen)
{
	size_t	 n, idlen;

	*flen = SEG_FRAME_HDR;
	if (avail < SEG_FRAME_HDR)
		return 0;
	n = get32(p);
	idlen = p[24];
	if (n > SEG_FRAME_MAX || idlen == 0 || idlen > STORE_ID_MAX ||
	    n < SEG_FRAME_HDR + idlen + 1 || p[25] != SEG_TYPE_REC ||
	    get64(p + 8) == 0)
		return -1;
	*flen = n;
	if (avail < n)
		return 0;
	if (get32(p + 4) != seg_crc32c(0, p + 8, n - 8))
		return -1;
	f->seq = get64(p + 8);
	f->ts = get64(p + 16);
	f->id = (const char *)p + SEG_FRAME_HDR;
	f->idlen = idlen;
	f->json = f->id + idlen;
	f->len = n - SEG_FRAME_HDR - idlen;
	return 1;
}

/* pread() of up to len bytes, EINTR retried: bytes read or -1. */
static ssize_t
pread_some(int fd, unsigned char *buf, size_t len, off_t off)
{
	ssize_t	 r;

	do {
		r = pread(fd, buf, len, off);
	} while (r == -1 && errno == EINTR);
	return r;
}

int
seg_scan(int fd, off_t from, seg_scan_cb cb, void *arg, off_t *good,
    off_t *end)
{
	struct seg_frame	 f;
	unsigned char		*buf, *nbuf;
	size_t			 cap = SEG_BLOCK, have = 0, pos = 0, flen, ncap;
	off_t			 base = from;
	ssize_t			 r;
	struct stat		 sb;
	int			 d, save, eof = 0;

	*good = *end = from;
	if ((buf = malloc(cap)) == NULL)
		return -1;
	for (;;) {
		while ((d = seg_frame_decode(buf + pos, have - pos, &f,
		    &flen)) == 1) {
			if (cb != NULL && cb(arg, &f, base + (off_t)pos,
			    flen) != 0) {
				*good = *end = base + (off_t)(pos + flen);
				goto out;
			}
			pos += flen;
			*good = base + (off_t)pos;
		}
		if (d == -1 || eof)
			break;
		/* Keep the partial frame, read on after it. */
		memmove(buf, buf + pos, have - pos);
		base += (off_t)pos;
		have -= pos;
		pos = 0;
		if (flen > cap) {
			ncap = flen;
			if ((nbuf = realloc(buf, ncap)) == NULL)
				goto fail;
			buf = nbuf;
			cap = ncap;
		}
		if ((r = pread_some(fd, buf + have, cap - have, base +
		    (off_t)have)) == -1)
			goto fail;
		if (r == 0)
			eof = 1;
		have += (size_t)r;
	}
	/* What lies past the last good frame, to the end of the file. */
	*end = base + (off_t)have;
	if (!eof) {
		if (fstat(fd, &sb) == -1)
			goto fail;
		if (sb.st_size > *end)
			*end = sb.st_size;
	}
out:
	free(buf);
	return 0;
fail:
	save = errno;
	free(buf);
	errno = save;
	return -1;
}

/* --- index --- */

void
seg_ient_encode(unsigned char out[SEG_IENT_LEN], const struct seg_ient *e)
{
	put64(out, e->seq);
	put64(out + 8, e->segid);
	put64(out + 16, e->off);
	put64(out + 24, e->ts);
	put32(out + 32, e->len);
	put32(out + 36, seg_crc32c(0, out, 36));
}

int
seg_ient_decode(const unsigned char *p, struct seg_ient *e)
{
	if (get32(p + 36) != seg_crc32c(0, p, 36)) {
		errno = EINVAL;
		return -1;
	}
	e->seq = get64(p);
	e->segid = get64(p + 8);
	e->off = get64(p + 16);
	e->ts = get64(p + 24);
	e->len = get32(p + 32);
	if (e->seq == 0 || e->len < SEG_FRAME_HDR + 2 ||
	    e->len > SEG_FRAME_MAX || e->off < SEG_HDR_LEN) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

void
seg_ihdr_encode(unsigned char out[SEG_IHDR_LEN], const struct seg_ihdr *h)
{
	memset(out, 0, SEG_IHDR_LEN);
	memcpy(out, ix_magic, 8);
	put32(out + 8, SEG_VERSION);
	put32(out + 12, h->flags);
	put64(out + 16, h->base);
	put64(out + 24, h->clean_last);
	put32(out + 32, h->crashes);
	put32(out + 60, seg_crc32c(0, out, 60));
}

int
seg_ihdr_decode(const unsigned char *p, size_t len, struct seg_ihdr *h,
    uint32_t *version)
{
	if (hdr_check(p, len, SEG_IHDR_LEN, ix_magic, 60, version) == -1)
		return -1;
	h->flags = get32(p + 12);
	h->base = get64(p + 16);
	h->clean_last = get64(p + 24);
	h->crashes = get32(p + 32);
	if (h->base == 0) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* --- meta slots --- */

void
seg_meta_encode(unsigned char out[SEG_META_HDR], uint64_t gen,
    const char *json, size_t len)
{
	memcpy(out, mt_magic, 8);
	put64(out + 8, gen);
	put32(out + 16, (uint32_t)len);
	put32(out + 20, SEG_VERSION);
	put32(out + 24, 0);
	put32(out + 28, seg_crc32c(seg_crc32c(0, out + 8, 20), json, len));
}

int
seg_meta_decode(const unsigned char *p, size_t size, uint64_t *gen,
    const char **json, size_t *len, uint32_t *version)
{
	size_t	 n;

	*version = 0;
	if (size < SEG_META_HDR || memcmp(p, mt_magic, 8) != 0) {
		errno = EINVAL;
		return -1;
	}
	n = get32(p + 16);
	if (n > size - SEG_META_HDR || n > STORE_META_MAX ||
	    get32(p + 28) != seg_crc32c(seg_crc32c(0, p + 8, 20),
	    p + SEG_META_HDR, n)) {
		errno = EINVAL;
		return -1;
	}
	*version = get32(p + 20);
	if (*version != SEG_VERSION) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	*gen = get64(p + 8);
	*json = (const char *)p + SEG_META_HDR;
	*len = n;
	return 0;
}
