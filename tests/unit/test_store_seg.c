/*
 * Unit tests for the local store's checksummed records (store_seg.c):
 * CRC-32C, segment headers and versions, frames (whole, torn at every
 * byte, corrupt), the segment scan, index entries and meta slots.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/store_seg.c"
#include "check_main.h"

static char	 tpath[64];
static int	 tfd = -1;

static void
setup(void)
{
	snprintf(tpath, sizeof(tpath), "/tmp/test_seg.XXXXXX");
	tfd = mkstemp(tpath);
	ck_assert_int_ne(tfd, -1);
}

static void
teardown(void)
{
	close(tfd);
	unlink(tpath);
}

START_TEST(test_crc32c)
{
	/* The check value of CRC-32C (RFC 3720, B.4) and its vectors. */
	unsigned char	 z[32], o[32], inc[32];
	size_t		 i;

	ck_assert_uint_eq(seg_crc32c(0, "123456789", 9), 0xe3069283u);
	memset(z, 0, sizeof(z));
	memset(o, 0xff, sizeof(o));
	for (i = 0; i < sizeof(inc); i++)
		inc[i] = (unsigned char)i;
	ck_assert_uint_eq(seg_crc32c(0, z, 32), 0x8a9136aau);
	ck_assert_uint_eq(seg_crc32c(0, o, 32), 0x62a8ab43u);
	ck_assert_uint_eq(seg_crc32c(0, inc, 32), 0x46dd794eu);
	/* In pieces as at once. */
	ck_assert_uint_eq(seg_crc32c(seg_crc32c(0, inc, 13), inc + 13, 19),
	    0x46dd794eu);
	ck_assert_uint_eq(seg_crc32c(0, "", 0), 0);
}
END_TEST

START_TEST(test_seg_header)
{
	unsigned char	 h[SEG_HDR_LEN];
	uint64_t	 id;
	uint32_t	 v;
	size_t		 i;

	seg_hdr_encode(h, 0x1234567890abcdefULL);
	ck_assert_int_eq(seg_hdr_decode(h, sizeof(h), &id, &v), 0);
	ck_assert_uint_eq(id, 0x1234567890abcdefULL);
	ck_assert_uint_eq(v, SEG_VERSION);
	ck_assert_int_eq(seg_hdr_decode(h, sizeof(h) - 1, &id, &v), -1);
	ck_assert_int_eq(errno, EINVAL);
	for (i = 0; i < sizeof(h); i++) {
		if (i >= 24 && i < 28)
			continue;	/* reserved, under the CRC though */
		h[i] ^= 0x40;
		ck_assert_int_eq(seg_hdr_decode(h, sizeof(h), &id, &v), -1);
		ck_assert_int_eq(errno, EINVAL);
		h[i] ^= 0x40;
	}
	/* A later version, well formed: refused as such. */
	h[8] = 2;
	memcpy(h + 28, (unsigned char[4]){ 0 }, 4);
	{
		uint32_t c = seg_crc32c(0, h, 28);

		h[28] = (unsigned char)c;
		h[29] = (unsigned char)(c >> 8);
		h[30] = (unsigned char)(c >> 16);
		h[31] = (unsigned char)(c >> 24);
	}
	ck_assert_int_eq(seg_hdr_decode(h, sizeof(h), &id, &v), -1);
	ck_assert_int_eq(errno, EPROTONOSUPPORT);
	ck_assert_uint_eq(v, 2);
}
END_TEST

static size_t
mkframe(unsigned char *buf, uint64_t seq, const char *id, const char *json)
{
	size_t	 n = seg_frame_size(strlen(id), strlen(json));

	seg_frame_encode(buf, seq, seq * 1000, id, strlen(id), json,
	    strlen(json));
	return n;
}

START_TEST(test_frame)
{
	unsigned char		 buf[256];
	struct seg_frame	 f;
	size_t			 n, flen, i;
	int			 r;

	n = mkframe(buf, 7, "sess-1", "{\"n\":7}");
	ck_assert_uint_eq(n, 32 + 6 + 7);
	ck_assert_int_eq(seg_frame_decode(buf, n, &f, &flen), 1);
	ck_assert_uint_eq(flen, n);
	ck_assert_uint_eq(f.seq, 7);
	ck_assert_uint_eq(f.ts, 7000);
	ck_assert_uint_eq(f.idlen, 6);
	ck_assert(memcmp(f.id, "sess-1", 6) == 0);
	ck_assert_uint_eq(f.len, 7);
	ck_assert(memcmp(f.json, "{\"n\":7}", 7) == 0);
	/* Every prefix is incomplete, never valid. */
	for (i = 0; i < n; i++)
		ck_assert_int_eq(seg_frame_decode(buf, i, &f, &flen), 0);
	/* Every flipped bit is caught (or reads as a longer frame). */
	for (i = 0; i < n * 8; i++) {
		buf[i / 8] ^= (unsigned char)(1u << (i % 8));
		r = seg_frame_decode(buf, n, &f, &flen);
		ck_assert_msg(r == -1 || (r == 0 && flen > n),
		    "bit %zu: %d", i, r);
		buf[i / 8] ^= (unsigned char)(1u << (i % 8));
	}
	/* Zeroes (a file extended by a crash) are not a frame. */
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(seg_frame_decode(buf, sizeof(buf), &f, &flen), -1);
}
END_TEST

struct seen {
	uint64_t	 seqs[64];
	off_t		 offs[64];
	size_t		 n;
	size_t		 stop_at;
};

static int
seen_cb(void *arg, const struct seg_frame *f, off_t off, size_t flen)
{
	struct seen	*s = arg;

	(void)flen;
	ck_assert_uint_lt(s->n, 64);
	s->seqs[s->n] = f->seq;
	s->offs[s->n] = off;
	s->n++;
	return s->stop_at != 0 && s->n == s->stop_at;
}

/* A segment of 10 frames, two sessions interleaved; returns its size. */
static off_t
write_segment(off_t *ends)
{
	unsigned char	 buf[4096];
	size_t		 n = SEG_HDR_LEN, k;
	char		 json[32];

	seg_hdr_encode(buf, 42);
	for (k = 1; k <= 10; k++) {
		snprintf(json, sizeof(json), "{\"n\":%zu}", k);
		n += mkframe(buf + n, k, k % 2 ? "odd" : "even-session", json);
		ends[k - 1] = (off_t)n;
	}
	ck_assert_int_eq(ftruncate(tfd, 0), 0);
	ck_assert_int_eq(pwrite(tfd, buf, n, 0), (ssize_t)n);
	return (off_t)n;
}

START_TEST(test_scan_torn_every_byte)
{
	struct seen	 s;
	off_t		 ends[10], size, cut, good, end;
	size_t		 whole;

	size = write_segment(ends);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(seg_scan(tfd, SEG_HDR_LEN, seen_cb, &s, &good, &end),
	    0);
	ck_assert_uint_eq(s.n, 10);
	ck_assert_int_eq(good, size);
	ck_assert_int_eq(end, size);
	ck_assert_int_eq(s.offs[0], SEG_HDR_LEN);
	ck_assert_int_eq(s.offs[3], ends[2]);
	for (cut = size - 1; cut >= SEG_HDR_LEN; cut--) {
		ck_assert_int_eq(ftruncate(tfd, cut), 0);
		memset(&s, 0, sizeof(s));
		ck_assert_int_eq(seg_scan(tfd, SEG_HDR_LEN, seen_cb, &s, &good,
		    &end), 0);
		for (whole = 0; whole < 10 && ends[whole] <= cut; whole++)
			;
		ck_assert_uint_eq(s.n, whole);
		ck_assert_int_eq(good, whole ? ends[whole - 1] : SEG_HDR_LEN);
		ck_assert_int_eq(end, cut);
	}
}
END_TEST

START_TEST(test_scan_corrupt_middle)
{
	struct seen	 s;
	off_t		 ends[10], size, good, end;
	unsigned char	 c;

	size = write_segment(ends);
	/* A byte of frame 5's json: the scan stops before frame 5. */
	ck_assert_int_eq(pread(tfd, &c, 1, ends[4] - 2), 1);
	c ^= 1;
	ck_assert_int_eq(pwrite(tfd, &c, 1, ends[4] - 2), 1);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(seg_scan(tfd, SEG_HDR_LEN, seen_cb, &s, &good, &end),
	    0);
	ck_assert_uint_eq(s.n, 4);
	ck_assert_int_eq(good, ends[3]);
	ck_assert_int_eq(end, size);
	/* From an offset after it, and stopped by the callback. */
	memset(&s, 0, sizeof(s));
	s.stop_at = 2;
	ck_assert_int_eq(seg_scan(tfd, ends[5], seen_cb, &s, &good, &end), 0);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_uint_eq(s.seqs[0], 7);
	ck_assert_int_eq(good, ends[7]);
}
END_TEST

START_TEST(test_scan_big_frame)
{
	/* Larger than a read block: the scan grows its buffer. */
	size_t		 len = 700 * 1024, n;
	char		*json = malloc(len + 1);
	unsigned char	*buf = malloc(seg_frame_size(1, len) + SEG_HDR_LEN);
	struct seen	 s;
	off_t		 good, end;

	memset(json, 'x', len);
	json[len] = '\0';
	seg_hdr_encode(buf, 1);
	n = SEG_HDR_LEN + mkframe(buf + SEG_HDR_LEN, 1, "b", json);
	ck_assert_int_eq(pwrite(tfd, buf, n, 0), (ssize_t)n);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(seg_scan(tfd, SEG_HDR_LEN, seen_cb, &s, &good, &end),
	    0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_int_eq(good, (off_t)n);
	free(json);
	free(buf);
}
END_TEST

START_TEST(test_index)
{
	unsigned char	 b[SEG_IENT_LEN], h[SEG_IHDR_LEN];
	struct seg_ient	 e = { 5, 77, 4096, 123456, 60 }, d;
	struct seg_ihdr	 ih = { 3, 9, SEG_IDX_CLEAN, 7 }, dh;
	uint32_t	 v;
	size_t		 i;

	seg_ient_encode(b, &e);
	ck_assert_int_eq(seg_ient_decode(b, &d), 0);
	ck_assert_uint_eq(d.seq, 5);
	ck_assert_uint_eq(d.segid, 77);
	ck_assert_uint_eq(d.off, 4096);
	ck_assert_uint_eq(d.ts, 123456);
	ck_assert_uint_eq(d.len, 60);
	for (i = 0; i < sizeof(b); i++) {
		b[i] ^= 0x10;
		ck_assert_int_eq(seg_ient_decode(b, &d), -1);
		b[i] ^= 0x10;
	}
	memset(b, 0, sizeof(b));
	ck_assert_int_eq(seg_ient_decode(b, &d), -1);
	seg_ihdr_encode(h, &ih);
	ck_assert_int_eq(seg_ihdr_decode(h, sizeof(h), &dh, &v), 0);
	ck_assert_uint_eq(dh.base, 3);
	ck_assert_uint_eq(dh.clean_last, 9);
	ck_assert_uint_eq(dh.flags, SEG_IDX_CLEAN);
	ck_assert_uint_eq(dh.crashes, 7);
	h[20] ^= 1;
	ck_assert_int_eq(seg_ihdr_decode(h, sizeof(h), &dh, &v), -1);
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_meta_slot)
{
	unsigned char	 b[SEG_META_HDR + 16];
	const char	*j;
	uint64_t	 gen;
	size_t		 len, i;
	uint32_t	 v;

	seg_meta_encode(b, 12, "{\"a\":1}", 7);
	memcpy(b + SEG_META_HDR, "{\"a\":1}", 7);
	ck_assert_int_eq(seg_meta_decode(b, SEG_META_HDR + 7, &gen, &j, &len,
	    &v), 0);
	ck_assert_uint_eq(gen, 12);
	ck_assert_uint_eq(len, 7);
	ck_assert(memcmp(j, "{\"a\":1}", 7) == 0);
	/* Trailing bytes of an older, longer text do not matter. */
	ck_assert_int_eq(seg_meta_decode(b, sizeof(b), &gen, &j, &len, &v), 0);
	/* A short read (torn write) or any flipped byte is refused. */
	for (i = 0; i < SEG_META_HDR + 7; i++)
		ck_assert_int_eq(seg_meta_decode(b, i, &gen, &j, &len, &v),
		    -1);
	for (i = 0; i < SEG_META_HDR + 7; i++) {
		if (i >= 24 && i < 28)
			continue;
		b[i] ^= 0x08;
		ck_assert_int_eq(seg_meta_decode(b, SEG_META_HDR + 7, &gen,
		    &j, &len, &v), -1);
		b[i] ^= 0x08;
	}
}
END_TEST

static Suite *
seg_suite(void)
{
	Suite	*su = suite_create("store_seg");
	TCase	*tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_crc32c);
	tcase_add_test(tc, test_seg_header);
	tcase_add_test(tc, test_frame);
	tcase_add_test(tc, test_scan_torn_every_byte);
	tcase_add_test(tc, test_scan_corrupt_middle);
	tcase_add_test(tc, test_scan_big_frame);
	tcase_add_test(tc, test_index);
	tcase_add_test(tc, test_meta_slot);
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	return check_run(seg_suite());
}
