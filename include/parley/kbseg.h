/*
 * An index segment: a struct kbi written to one file, read back with
 * mmap(2) and searched in place, so every worker of a host shares one copy
 * in the page cache and a new segment replaces the old with one rename.
 * A search of a segment answers exactly what kbi_search() answered on the
 * index it was written from (the same chunks, by document and lines, in
 * the same order, with the same scores); chunk ids are renumbered:
 * documents are sorted by name and each one's chunks are contiguous.
 *
 * The file is little-endian with fixed-size tables (header, documents,
 * chunks, sorted term dictionary, postings, vectors, string blob); its
 * layout is described in kbseg.c.  kbs_open() checks the magic, the
 * version and that every offset and length lies inside the file, so a
 * torn or hostile file is refused, never read past.
 */
#ifndef PARLEY_KBSEG_H
#define PARLEY_KBSEG_H

#include <stddef.h>
#include <stdint.h>

#include "parley/kbindex.h"

struct kbs;

/* Writes the index's live documents and chunks to path: path.tmp, fsync,
 * rename, fsync of the directory.  0, or -1 with a message in err (the
 * old file, if any, is left as it was). */
int		 kbs_write(const struct kbi *, const char *path, char *err,
		    size_t errlen);

/* Maps and checks a segment.  NULL with a message in err and errno
 * (ENOENT: "no segment"; EINVAL: damaged, the message says what to do).
 * The map stays valid when kbs_write() replaces the file (a new inode);
 * a file truncated in place, which kbs_write() never does, would fault. */
struct kbs	*kbs_open(const char *path, char *err, size_t errlen);
void		 kbs_close(struct kbs *);

size_t		 kbs_ndocs(const struct kbs *);
size_t		 kbs_nchunks(const struct kbs *);
size_t		 kbs_bytes(const struct kbs *);
unsigned	 kbs_dim(const struct kbs *);	/* 0: no chunk has a vector */

/* Document i (0..ndocs-1): its name, meta and chunk ids first..first+n-1.
 * 0, or -1 when out of range.  Pointers valid until kbs_close(). */
int		 kbs_doc_get(const struct kbs *, size_t i, const char **name,
		    const char **meta, uint32_t *first, uint32_t *n);
/* The number of the document with that name, or -1 (binary search). */
int		 kbs_doc_find(const struct kbs *, const char *name);
int		 kbs_chunk_get(const struct kbs *, uint32_t chunk,
		    struct kbi_chunk_info *out);

/* As kbi_search(); it changes nothing in s, so threads may share one. */
size_t		 kbs_search(const struct kbs *, const struct kbi_query *q,
		    struct kbi_hit *out);

/* Copies document i with its chunks and vectors into dst under the meta
 * given (an incremental build keeps an unchanged file this way without
 * reading it).  0, or -1 with errno (EEXIST: dst has that name; EINVAL: i
 * out of range, or dst's vectors have another dim; ENOMEM), nothing of
 * the document left in dst. */
int		 kbs_copy_doc(const struct kbs *, size_t i, struct kbi *dst,
		    const char *meta);

#endif
