/*
 * The local store's checksummed on-disk records (store_seg.c): the shared
 * segment log's header and frames, a session's index file, a meta slot.
 * Encoding, decoding and checking only: no policy, and the only I/O is
 * seg_scan() reading a segment.  Every integer is little-endian.  The
 * layouts are in store_seg.c's header comment.  Used by the local backend
 * (store_local*.c) only.
 */
#ifndef PARLEY_STORE_SEG_H
#define PARLEY_STORE_SEG_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "parley/store.h"

#define SEG_VERSION	1		/* what this code writes and reads */
#define SEG_HDR_LEN	32		/* segment header */
#define SEG_FRAME_HDR	32		/* frame header, before id and json */
#define SEG_FRAME_MAX	(SEG_FRAME_HDR + STORE_ID_MAX + STORE_JSON_MAX)
#define SEG_IHDR_LEN	64		/* index file header */
#define SEG_IENT_LEN	40		/* one index entry */
#define SEG_META_HDR	32		/* meta slot header */

#define SEG_IDX_CLEAN	0x1		/* index flag: closed, nothing after */

/* CRC-32C (Castagnoli) of len bytes, continuing from crc (0 to start). */
uint32_t	 seg_crc32c(uint32_t crc, const void *, size_t len);

/*
 * Segment header.  decode: 0, or -1 with errno EINVAL (not a segment:
 * bad magic, length or checksum) or EPROTONOSUPPORT (a version this code
 * does not know: *version says which).
 */
void		 seg_hdr_encode(unsigned char out[SEG_HDR_LEN], uint64_t segid);
int		 seg_hdr_decode(const unsigned char *, size_t len,
		    uint64_t *segid, uint32_t *version);

/* One record in a segment, as decoded (pointers into the buffer). */
struct seg_frame {
	uint64_t	 seq;
	uint64_t	 ts;
	const char	*id;
	size_t		 idlen;
	const char	*json;
	size_t		 len;
};

/* Bytes a frame of an id and a json of these lengths takes. */
size_t		 seg_frame_size(size_t idlen, size_t len);
/* Writes the frame into out (seg_frame_size() bytes). */
void		 seg_frame_encode(unsigned char *out, uint64_t seq,
		    uint64_t ts, const char *id, size_t idlen, const char *json,
		    size_t len);
/*
 * Decodes the frame at p (avail bytes there).  1: a whole valid frame,
 * *flen its size; 0: p holds the start of a plausible frame but not all of
 * it (*flen the size it claims, or SEG_FRAME_HDR when even the header is
 * short); -1: not a valid frame (a torn or corrupt write).
 */
int		 seg_frame_decode(const unsigned char *p, size_t avail,
		    struct seg_frame *, size_t *flen);

/*
 * Reads the frames of segment fd from offset from (just past the header
 * or a frame) to the end, calling cb(arg, frame, offset, size) for each
 * valid one; cb returns non-zero to stop.  Stops at the first invalid or
 * incomplete frame.  *good: the end of the last valid frame read; *end:
 * the file's size (good < end: a torn or corrupt tail); when cb stopped
 * the scan, both are the end of that frame.  0, or -1 with errno (I/O).  The frame's json is not NUL-terminated.
 */
typedef int	(*seg_scan_cb)(void *arg, const struct seg_frame *, off_t off,
		    size_t flen);
int		 seg_scan(int fd, off_t from, seg_scan_cb cb, void *arg,
		    off_t *good, off_t *end);

/* A session's index: where each of its records is. */
struct seg_ient {
	uint64_t	 seq;
	uint64_t	 segid;
	uint64_t	 off;		/* of the frame in the segment */
	uint64_t	 ts;
	uint32_t	 len;		/* of the frame */
};
void		 seg_ient_encode(unsigned char out[SEG_IENT_LEN],
		    const struct seg_ient *);
/* 0, or -1 (EINVAL) when the checksum or a field is wrong. */
int		 seg_ient_decode(const unsigned char *, struct seg_ient *);

struct seg_ihdr {
	uint64_t	 base;		/* seq of the first entry */
	uint64_t	 clean_last;	/* CLEAN: the last seq at close */
	uint32_t	 flags;
	uint32_t	 crashes;	/* machine crashes it has seen
					   (store_local_run.c); 0: none */
};
void		 seg_ihdr_encode(unsigned char out[SEG_IHDR_LEN],
		    const struct seg_ihdr *);
/* As seg_hdr_decode: EINVAL, or EPROTONOSUPPORT with *version. */
int		 seg_ihdr_decode(const unsigned char *, size_t len,
		    struct seg_ihdr *, uint32_t *version);

/* A meta slot: header then the JSON text. */
void		 seg_meta_encode(unsigned char out[SEG_META_HDR], uint64_t gen,
		    const char *json, size_t len);
/*
 * Checks a slot read whole (size bytes at p): 0 with its generation and
 * text (a pointer into p), or -1 with errno (EINVAL torn or not a slot,
 * EPROTONOSUPPORT with *version).
 */
int		 seg_meta_decode(const unsigned char *p, size_t size,
		    uint64_t *gen, const char **json, size_t *len,
		    uint32_t *version);

#endif
