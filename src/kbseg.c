/*
 * Index segments (see parley/kbseg.h): a struct kbi written to one file,
 * mapped read-only and searched in place with kbrank.c, the code that
 * searches the index, so both answer alike.
 *
 * The file, little-endian, every table at a multiple of 8:
 *
 *   header    160 bytes: magic "PKBSEG01", u32 version (1), u32 dim
 *             (0: no vectors), u64 ndocs, nchunks, nterms, nposts,
 *             ntokens (the chunks' tokens: avgdl = ntokens / nchunks),
 *             bytes (the chunks' text), f64 avgdl (for readers' eyes;
 *             the search divides ntokens itself), u64 offsets of the
 *             docs, chunks, terms, postings, vectors, norms and blob
 *             tables, u64 blob length, u64 file length, 16 bytes 0.
 *   docs      ndocs x 32: u64 name off, u32 name len, u32 meta len,
 *             u64 meta off, u32 first chunk, u32 chunks; sorted by name
 *             (strcmp), their chunks contiguous in that order, so chunk
 *             order is the tie order of kbindex.h.
 *   chunks    nchunks x 40: u32 doc, u32 tokens, u64 text off, u64 text
 *             len, u32 line first, u32 line last, u32 flags (1: has a
 *             vector), u32 0.
 *   terms     nterms x 32: u64 token off, u32 token len, u32 df, u64
 *             first posting, u64 postings; sorted by token (memcmp, then
 *             length) for binary search.
 *   postings  nposts x 8: u32 chunk, u32 tf; each term's by chunk.
 *   vectors   nchunks x dim float32 (zeros for a chunk without one) and
 *   norms     nchunks x f64, the index's own norms; both absent (offset
 *             0) when dim is 0.
 *   blob      names and metas (each followed by a NUL), texts, tokens.
 *
 * kbs_open() checks the header, that every table and every string lies
 * inside the file, the documents' order and chunk ranges, the chunks'
 * documents and the sums the header states; a posting naming a chunk
 * that does not exist is skipped by the search.  The map is never read
 * outside a checked range.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parley/kbseg.h"
#include "parley/kbtext.h"
#include "kb_int.h"

#define KBS_MAGIC	"PKBSEG01"
#define KBS_VERSION	1
#define KBS_HDR		160
#define KBS_FHASVEC	1

struct kbs_hdr {
	char		magic[8];
	uint32_t	version;
	uint32_t	dim;
	uint64_t	ndocs, nchunks, nterms, nposts, ntokens, bytes;
	double		avgdl;
	uint64_t	off_docs, off_chunks, off_terms, off_posts, off_vecs;
	uint64_t	off_norms, off_blob, blob_len, file_len;
	uint64_t	pad[2];
};

struct kbs_doc {
	uint64_t	name_off;
	uint32_t	name_len, meta_len;
	uint64_t	meta_off;
	uint32_t	first, n;
};

struct kbs_chunk {
	uint32_t	doc, ntok;
	uint64_t	text_off, text_len;
	uint32_t	line_first, line_last, flags, pad;
};

struct kbs_term {
	uint64_t	tok_off;
	uint32_t	tok_len, df;
	uint64_t	post_first, npost;
};

_Static_assert(sizeof(struct kbs_hdr) == KBS_HDR, "segment header");
_Static_assert(sizeof(struct kbs_doc) == 32, "segment doc");
_Static_assert(sizeof(struct kbs_chunk) == 40, "segment chunk");
_Static_assert(sizeof(struct kbs_term) == 32, "segment term");

struct kbs {
	unsigned char		*map;
	size_t			 len;
	struct kbs_hdr		 h;
	const struct kbs_doc	*docs;
	const struct kbs_chunk	*chunks;
	const struct kbs_term	*terms;
	const struct kbi_post	*posts;
	const float		*vecs;
	const double		*norms;
	const char		*blob;
	size_t			 nvec;
	uint32_t		*dl;	/* the chunks' token counts, packed:
					   the search reads one per posting */
};

/* ---- writing ---- */

struct kbs_w {
	FILE		*f;
	uint64_t	 at;
};

static void
kbs_put(struct kbs_w *w, const void *p, size_t n)
{
	if (n > 0 && fwrite(p, 1, n, w->f) != n)
		return;		/* ferror() tells at the end */
	w->at += n;
}

static void
kbs_pad(struct kbs_w *w)
{
	static const char	zero[8];

	kbs_put(w, zero, (size_t)(-w->at & 7));
}

struct kbs_name {
	const char	*s;
	size_t		 len;
	uint32_t	 id;
};

static int
kbs_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kbs_name *)a)->s,
	    ((const struct kbs_name *)b)->s);
}

static int
kbs_tok_cmp(const void *a, const void *b)
{
	const struct kbs_name	*x = a, *y = b;
	int			 c;

	c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

static int
kbs_post_cmp(const void *a, const void *b)
{
	uint32_t	x = ((const struct kbi_post *)a)->chunk;
	uint32_t	y = ((const struct kbi_post *)b)->chunk;

	return x < y ? -1 : x > y;
}

/* The parts of a write, gathered before the file is opened. */
struct kbs_plan {
	struct kbs_name	*docs;		/* live, by name */
	struct kbs_name	*terms;		/* df > 0, by token */
	uint32_t	*newid;		/* index chunk -> segment's */
	struct kbi_post	*tmp;		/* a term's postings, renumbered */
	size_t		 ndocs, nchunks, nterms, nposts;
};

static void
kbs_plan_free(struct kbs_plan *p)
{
	free(p->docs);
	free(p->terms);
	free(p->newid);
	free(p->tmp);
}

static int
kbs_plan(const struct kbi *x, struct kbs_plan *p)
{
	size_t	i, j, maxpost = 0;
	uint32_t id = 0;

	memset(p, 0, sizeof(*p));
	p->docs = calloc(x->live_docs + 1, sizeof(*p->docs));
	p->terms = calloc(x->nterms + 1, sizeof(*p->terms));
	p->newid = calloc(x->nchunks + 1, sizeof(*p->newid));
	if (p->docs == NULL || p->terms == NULL || p->newid == NULL)
		return -1;
	for (i = 0; i < x->ndocs; i++)
		if (x->docs[i].name != NULL) {
			p->docs[p->ndocs].s = x->docs[i].name;
			p->docs[p->ndocs++].id = (uint32_t)i;
		}
	qsort(p->docs, p->ndocs, sizeof(*p->docs), kbs_name_cmp);
	for (i = 0; i < x->nchunks; i++)
		p->newid[i] = KBI_DEAD;
	for (i = 0; i < p->ndocs; i++) {
		const struct kbi_doc *d = &x->docs[p->docs[i].id];

		for (j = 0; j < d->nchunks; j++)
			p->newid[d->chunks[j]] = id++;
	}
	p->nchunks = id;
	for (i = 0; i < x->nterms; i++)
		if (x->terms[i].df > 0) {
			p->terms[p->nterms].s = x->terms[i].tok;
			p->terms[p->nterms].len = x->terms[i].len;
			p->terms[p->nterms++].id = (uint32_t)i;
			p->nposts += x->terms[i].df;
			if (x->terms[i].npost > maxpost)
				maxpost = x->terms[i].npost;
		}
	qsort(p->terms, p->nterms, sizeof(*p->terms), kbs_tok_cmp);
	if ((p->tmp = calloc(maxpost + 1, sizeof(*p->tmp))) == NULL)
		return -1;
	return 0;
}

/* Writes the segment to f: 0, or -1 (a write failed: ferror(f)). */
static int
kbs_emit(const struct kbi *x, struct kbs_plan *p, FILE *f)
{
	struct kbs_w	 w = { f, 0 };
	struct kbs_hdr	 h;
	uint64_t	 blob, docstr = 0, text = 0;
	size_t		 i, j, k;
	float		 zero = 0;

	for (i = 0; i < p->ndocs; i++) {
		const struct kbi_doc *d = &x->docs[p->docs[i].id];

		docstr += strlen(d->name) + 1 + strlen(d->meta) + 1;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, KBS_MAGIC, 8);
	h.version = KBS_VERSION;
	h.dim = x->dim;
	h.ndocs = p->ndocs;
	h.nchunks = p->nchunks;
	h.nterms = p->nterms;
	h.nposts = p->nposts;
	h.ntokens = x->live_tokens;
	h.bytes = x->live_bytes;
	h.avgdl = p->nchunks ? (double)x->live_tokens / p->nchunks : 0;
	h.off_docs = KBS_HDR;
	h.off_chunks = h.off_docs + 32 * h.ndocs;
	h.off_terms = h.off_chunks + 40 * h.nchunks;
	h.off_posts = h.off_terms + 32 * h.nterms;
	blob = h.off_posts + 8 * h.nposts;
	if (h.dim > 0) {
		h.off_vecs = blob;
		h.off_norms = (h.off_vecs + 4ULL * h.nchunks * h.dim + 7) &
		    ~7ULL;
		blob = h.off_norms + 8 * h.nchunks;
	}
	h.off_blob = blob;
	for (i = 0; i < p->nterms; i++)
		h.blob_len += p->terms[i].len;
	h.blob_len += docstr + x->live_bytes;
	h.file_len = h.off_blob + h.blob_len;
	kbs_put(&w, &h, sizeof(h));

	/* docs: strings first in the blob */
	blob = 0;
	k = 0;
	for (i = 0; i < p->ndocs; i++) {
		const struct kbi_doc	*d = &x->docs[p->docs[i].id];
		struct kbs_doc		 e;

		memset(&e, 0, sizeof(e));
		e.name_off = blob;
		e.name_len = (uint32_t)strlen(d->name);
		blob += e.name_len + 1;
		e.meta_off = blob;
		e.meta_len = (uint32_t)strlen(d->meta);
		blob += e.meta_len + 1;
		e.first = (uint32_t)k;
		e.n = (uint32_t)d->nchunks;
		k += d->nchunks;
		kbs_put(&w, &e, sizeof(e));
	}
	/* chunks, their texts after the documents' strings */
	text = docstr;
	for (i = 0; i < p->ndocs; i++) {
		const struct kbi_doc *d = &x->docs[p->docs[i].id];

		for (j = 0; j < d->nchunks; j++) {
			const struct kbi_chk	*c;
			struct kbs_chunk	 e;

			c = &x->chunks[d->chunks[j]];
			memset(&e, 0, sizeof(e));
			e.doc = (uint32_t)i;
			e.ntok = x->dl[d->chunks[j]];
			e.text_off = text;
			e.text_len = c->len;
			text += c->len;
			e.line_first = c->line_first;
			e.line_last = c->line_last;
			e.flags = c->hasvec ? KBS_FHASVEC : 0;
			kbs_put(&w, &e, sizeof(e));
		}
	}
	/* terms, their tokens last in the blob */
	for (i = k = 0; i < p->nterms; i++) {
		const struct kbi_term	*t = &x->terms[p->terms[i].id];
		struct kbs_term		 e;

		memset(&e, 0, sizeof(e));
		e.tok_off = text;
		e.tok_len = (uint32_t)t->len;
		text += t->len;
		e.df = (uint32_t)t->df;
		e.post_first = k;
		e.npost = t->df;
		k += t->df;
		kbs_put(&w, &e, sizeof(e));
	}
	for (i = 0; i < p->nterms; i++) {
		const struct kbi_term *t = &x->terms[p->terms[i].id];

		for (j = k = 0; j < t->npost; j++)
			if (p->newid[t->post[j].chunk] != KBI_DEAD) {
				p->tmp[k].chunk = p->newid[t->post[j].chunk];
				p->tmp[k++].tf = t->post[j].tf;
			}
		qsort(p->tmp, k, sizeof(*p->tmp), kbs_post_cmp);
		kbs_put(&w, p->tmp, k * sizeof(*p->tmp));
	}
	if (h.dim > 0) {
		for (i = 0; i < p->ndocs; i++) {
			const struct kbi_doc *d = &x->docs[p->docs[i].id];

			for (j = 0; j < d->nchunks; j++) {
				const struct kbi_chk *c =
				    &x->chunks[d->chunks[j]];

				if (c->hasvec)
					kbs_put(&w, kbi_chunk_vec(x,
					    d->chunks[j]), h.dim *
					    sizeof(float));
				else
					for (k = 0; k < h.dim; k++)
						kbs_put(&w, &zero,
						    sizeof(zero));
			}
		}
		kbs_pad(&w);
		for (i = 0; i < p->ndocs; i++) {
			const struct kbi_doc *d = &x->docs[p->docs[i].id];

			for (j = 0; j < d->nchunks; j++)
				kbs_put(&w, &x->chunks[d->chunks[j]].norm,
				    sizeof(double));
		}
	}
	for (i = 0; i < p->ndocs; i++) {
		const struct kbi_doc *d = &x->docs[p->docs[i].id];

		kbs_put(&w, d->name, strlen(d->name) + 1);
		kbs_put(&w, d->meta, strlen(d->meta) + 1);
	}
	for (i = 0; i < p->ndocs; i++) {
		const struct kbi_doc *d = &x->docs[p->docs[i].id];

		for (j = 0; j < d->nchunks; j++)
			kbs_put(&w, x->chunks[d->chunks[j]].text,
			    x->chunks[d->chunks[j]].len);
	}
	for (i = 0; i < p->nterms; i++)
		kbs_put(&w, p->terms[i].s, p->terms[i].len);
	if (fflush(f) != 0 || ferror(f) || w.at != h.file_len)
		return -1;
	return 0;
}

/* fsyncs the directory holding path (so the rename is durable). */
static int
kbs_sync_dir(const char *path)
{
	char	*copy, *dir;
	int	 fd, rc = -1;

	if ((copy = strdup(path)) == NULL)
		return -1;
	dir = dirname(copy);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		rc = fsync(fd);
		close(fd);
	}
	free(copy);
	return rc;
}

int
kbs_write(const struct kbi *x, const char *path, char *err, size_t errlen)
{
	struct kbs_plan	 p;
	char		 tmp[4096];
	FILE		*f = NULL;
	int		 fd, e;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >=
	    sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		errno = ENAMETOOLONG;
		return -1;
	}
	if (kbs_plan(x, &p) == -1) {
		kbs_plan_free(&p);
		snprintf(err, errlen, "%s: out of memory", path);
		errno = ENOMEM;
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd == -1 || (f = fdopen(fd, "w")) == NULL) {
		e = errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(e));
		if (fd != -1) {
			close(fd);
			unlink(tmp);
		}
		kbs_plan_free(&p);
		errno = e;
		return -1;
	}
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	if (kbs_emit(x, &p, f) == -1 || fsync(fileno(f)) == -1) {
		e = errno ? errno : EIO;
		snprintf(err, errlen, "%s: write: %s", tmp, strerror(e));
		goto fail;
	}
	if (fclose(f) != 0) {
		f = NULL;
		e = errno;
		snprintf(err, errlen, "%s: close: %s", tmp, strerror(e));
		goto fail;
	}
	f = NULL;
	if (rename(tmp, path) == -1) {
		e = errno;
		snprintf(err, errlen, "rename %s to %s: %s", tmp, path,
		    strerror(e));
		goto fail;
	}
	kbs_plan_free(&p);
	if (kbs_sync_dir(path) == -1) {
		e = errno;
		snprintf(err, errlen, "%s: directory sync: %s", path,
		    strerror(e));
		errno = e;
		return -1;
	}
	return 0;
fail:
	if (f != NULL)
		fclose(f);
	unlink(tmp);
	kbs_plan_free(&p);
	errno = e;
	return -1;
}

/* ---- reading ---- */

/* 1 when count entries of size bytes at off lie inside len bytes. */
static int
kbs_inside(uint64_t len, uint64_t off, uint64_t count, uint64_t size)
{
	if (off > len || (off & 7) != 0)
		return 0;
	return size == 0 || count <= (len - off) / size;
}

/* 1 when the string at off (len bytes, then a NUL, none inside) lies in
 * the blob. */
static int
kbs_cstr(const struct kbs *s, uint64_t off, uint64_t len)
{
	if (off > s->h.blob_len || len >= s->h.blob_len - off)
		return 0;
	return s->blob[off + len] == '\0' &&
	    memchr(s->blob + off, '\0', len) == NULL;
}

static int
kbs_check(struct kbs *s, char *err, size_t errlen)
{
	const struct kbs_hdr	*h = &s->h;
	uint64_t		 ntok = 0, bytes = 0, next = 0, vsz;
	size_t			 i;

	if (s->len < KBS_HDR) {
		snprintf(err, errlen, "too short for a segment (%zu bytes)",
		    s->len);
		return -1;
	}
	memcpy(&s->h, s->map, sizeof(s->h));
	if (memcmp(h->magic, KBS_MAGIC, 8) != 0) {
		snprintf(err, errlen, "not a segment (bad magic)");
		return -1;
	}
	if (h->version != KBS_VERSION) {
		snprintf(err, errlen, "segment version %u, this parleyd "
		    "reads %u: rebuild the index", h->version, KBS_VERSION);
		return -1;
	}
	if (h->file_len != s->len) {
		snprintf(err, errlen, "segment is %zu bytes, its header says "
		    "%llu: torn or truncated, rebuild the index", s->len,
		    (unsigned long long)h->file_len);
		return -1;
	}
	vsz = (uint64_t)h->dim * 4;
	if (h->ndocs > INT32_MAX || h->nchunks >= KBI_DEAD ||
	    h->nterms > UINT32_MAX || h->dim > KBI_DIM_MAX ||
	    !kbs_inside(s->len, h->off_docs, h->ndocs, 32) ||
	    !kbs_inside(s->len, h->off_chunks, h->nchunks, 40) ||
	    !kbs_inside(s->len, h->off_terms, h->nterms, 32) ||
	    !kbs_inside(s->len, h->off_posts, h->nposts, 8) ||
	    (h->dim > 0 && (!kbs_inside(s->len, h->off_vecs, h->nchunks,
	    vsz) || !kbs_inside(s->len, h->off_norms, h->nchunks, 8))) ||
	    h->off_blob > s->len || h->blob_len != s->len - h->off_blob) {
		snprintf(err, errlen, "segment tables do not fit its %zu "
		    "bytes: damaged, rebuild the index", s->len);
		return -1;
	}
	s->docs = (const void *)(s->map + h->off_docs);
	s->chunks = (const void *)(s->map + h->off_chunks);
	s->terms = (const void *)(s->map + h->off_terms);
	s->posts = (const void *)(s->map + h->off_posts);
	s->vecs = h->dim ? (const void *)(s->map + h->off_vecs) : NULL;
	s->norms = h->dim ? (const void *)(s->map + h->off_norms) : NULL;
	s->blob = (const char *)s->map + h->off_blob;
	for (i = 0; i < h->ndocs; i++) {
		const struct kbs_doc *d = &s->docs[i];

		if (!kbs_cstr(s, d->name_off, d->name_len) ||
		    d->name_len == 0 ||
		    !kbs_cstr(s, d->meta_off, d->meta_len) ||
		    d->first != next || d->n > h->nchunks - next ||
		    (i > 0 && strcmp(s->blob + s->docs[i - 1].name_off,
		    s->blob + d->name_off) >= 0)) {
			snprintf(err, errlen, "segment document %zu is "
			    "damaged: rebuild the index", i);
			return -1;
		}
		next += d->n;
	}
	if (next != h->nchunks) {
		snprintf(err, errlen, "segment documents hold %llu chunks, "
		    "its header says %llu: rebuild the index",
		    (unsigned long long)next, (unsigned long long)h->nchunks);
		return -1;
	}
	if ((s->dl = calloc(h->nchunks + 1, sizeof(*s->dl))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < h->nchunks; i++) {
		const struct kbs_chunk *c = &s->chunks[i];

		if (c->doc >= h->ndocs || i < s->docs[c->doc].first ||
		    i - s->docs[c->doc].first >= s->docs[c->doc].n ||
		    c->ntok == KBI_DEAD || c->text_off > h->blob_len ||
		    c->text_len > h->blob_len - c->text_off ||
		    ((c->flags & KBS_FHASVEC) && h->dim == 0)) {
			snprintf(err, errlen, "segment chunk %zu is damaged: "
			    "rebuild the index", i);
			return -1;
		}
		s->dl[i] = c->ntok;
		ntok += c->ntok;
		bytes += c->text_len;
		s->nvec += (c->flags & KBS_FHASVEC) != 0;
	}
	if (ntok != h->ntokens || bytes != h->bytes) {
		snprintf(err, errlen, "segment totals do not match its "
		    "chunks: rebuild the index");
		return -1;
	}
	for (i = 0; i < h->nterms; i++) {
		const struct kbs_term *t = &s->terms[i];

		if (t->tok_len == 0 || t->tok_len > KBT_TOKEN_MAX ||
		    t->tok_off > h->blob_len ||
		    t->tok_len > h->blob_len - t->tok_off ||
		    t->post_first > h->nposts ||
		    t->npost > h->nposts - t->post_first ||
		    t->df > h->nchunks) {
			snprintf(err, errlen, "segment term %zu is damaged: "
			    "rebuild the index", i);
			return -1;
		}
	}
	return 0;
}

struct kbs *
kbs_open(const char *path, char *err, size_t errlen)
{
	struct kbs	*s;
	struct stat	 st;
	int		 fd, e;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		e = errno;
		if (e == ENOENT)
			snprintf(err, errlen, "%s: no segment", path);
		else
			snprintf(err, errlen, "%s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		e = errno ? errno : EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		errno = e;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	s->len = (size_t)st.st_size;
	if (s->len >= KBS_HDR && (s->map = mmap(NULL, s->len, PROT_READ,
	    MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
		e = errno;
		snprintf(err, errlen, "%s: mmap: %s", path, strerror(e));
		s->map = NULL;
		close(fd);
		free(s);
		errno = e;
		return NULL;
	}
	close(fd);
	if (kbs_check(s, err, errlen) == -1) {
		char	msg[512];

		snprintf(msg, sizeof(msg), "%s", err);
		snprintf(err, errlen, "%s: %s", path, msg);
		kbs_close(s);
		errno = EINVAL;
		return NULL;
	}
	return s;
}

void
kbs_close(struct kbs *s)
{
	if (s == NULL)
		return;
	if (s->map != NULL)
		munmap(s->map, s->len);
	free(s->dl);
	free(s);
}

size_t
kbs_ndocs(const struct kbs *s)
{
	return s->h.ndocs;
}

size_t
kbs_nchunks(const struct kbs *s)
{
	return s->h.nchunks;
}

size_t
kbs_bytes(const struct kbs *s)
{
	return s->h.bytes;
}

unsigned
kbs_dim(const struct kbs *s)
{
	return s->nvec > 0 ? s->h.dim : 0;
}

int
kbs_doc_get(const struct kbs *s, size_t i, const char **name,
    const char **meta, uint32_t *first, uint32_t *n)
{
	const struct kbs_doc	*d;

	if (i >= s->h.ndocs)
		return -1;
	d = &s->docs[i];
	if (name != NULL)
		*name = s->blob + d->name_off;
	if (meta != NULL)
		*meta = s->blob + d->meta_off;
	if (first != NULL)
		*first = d->first;
	if (n != NULL)
		*n = d->n;
	return 0;
}

int
kbs_doc_find(const struct kbs *s, const char *name)
{
	size_t	lo = 0, hi = s->h.ndocs, mid;
	int	c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = strcmp(s->blob + s->docs[mid].name_off, name);
		if (c == 0)
			return (int)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int
kbs_chunk_get(const struct kbs *s, uint32_t chunk,
    struct kbi_chunk_info *out)
{
	const struct kbs_chunk	*c;

	if (chunk >= s->h.nchunks)
		return -1;
	c = &s->chunks[chunk];
	out->doc = s->blob + s->docs[c->doc].name_off;
	out->meta = s->blob + s->docs[c->doc].meta_off;
	out->text = s->blob + c->text_off;
	out->len = c->text_len;
	out->line_first = c->line_first;
	out->line_last = c->line_last;
	if (c->flags & KBS_FHASVEC) {
		out->vec = s->vecs + (size_t)chunk * s->h.dim;
		out->dim = s->h.dim;
	} else {
		out->vec = NULL;
		out->dim = 0;
	}
	return 0;
}

/* The corpus callbacks of a segment (kb_int.h). */
static const struct kbi_post *
kbs_lookup(const void *ctx, const char *tok, size_t len, size_t *n,
    size_t *df)
{
	const struct kbs	*s = ctx;
	const struct kbs_term	*t;
	size_t			 lo = 0, hi = s->h.nterms, mid;
	int			 c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		t = &s->terms[mid];
		c = memcmp(s->blob + t->tok_off, tok,
		    t->tok_len < len ? t->tok_len : len);
		if (c == 0)
			c = t->tok_len < len ? -1 : t->tok_len > len;
		if (c == 0) {
			if (t->df == 0 || t->npost == 0)
				return NULL;
			*n = t->npost;
			*df = t->df;
			return s->posts + t->post_first;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static const float *
kbs_vecof(const void *ctx, uint32_t chunk, double *norm)
{
	const struct kbs	*s = ctx;

	if (!(s->chunks[chunk].flags & KBS_FHASVEC))
		return NULL;
	*norm = s->norms[chunk];
	return s->vecs + (size_t)chunk * s->h.dim;
}

/* Chunks are in the tie order (documents by name, then their order). */
static int
kbs_before(const void *ctx, uint32_t a, uint32_t b)
{
	(void)ctx;
	return a < b;
}

size_t
kbs_search(const struct kbs *s, const struct kbi_query *q,
    struct kbi_hit *out)
{
	struct kbi_corpus	co;

	memset(&co, 0, sizeof(co));
	co.nchunks = (uint32_t)s->h.nchunks;
	co.nlive = s->h.nchunks;
	co.ntokens = s->h.ntokens;
	co.dl = (const unsigned char *)s->dl;
	co.dlstride = sizeof(*s->dl);
	co.dim = kbs_dim(s);
	co.nvec = s->nvec;
	co.ctx = s;
	co.lookup = kbs_lookup;
	co.vec = kbs_vecof;
	co.before = kbs_before;
	return kbi_rank(&co, q, out);
}

int
kbs_copy_doc(const struct kbs *s, size_t i, struct kbi *dst,
    const char *meta)
{
	const struct kbs_doc	*d;
	const struct kbs_chunk	*c;
	const char		*name;
	uint32_t		 j;
	int			 doc, id, e;

	if (i >= s->h.ndocs) {
		errno = EINVAL;
		return -1;
	}
	d = &s->docs[i];
	name = s->blob + d->name_off;
	if ((doc = kbi_doc_add(dst, name, meta)) == -1)
		return -1;
	for (j = 0; j < d->n; j++) {
		c = &s->chunks[d->first + j];
		if ((id = kbi_chunk_add(dst, doc, s->blob + c->text_off,
		    c->text_len, c->line_first, c->line_last)) == -1 ||
		    ((c->flags & KBS_FHASVEC) && kbi_vec_set(dst,
		    (uint32_t)id, s->vecs + (size_t)(d->first + j) *
		    s->h.dim, s->h.dim) == -1)) {
			e = errno;
			kbi_doc_remove(dst, name);
			errno = e;
			return -1;
		}
	}
	return 0;
}
