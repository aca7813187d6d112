/* Unit tests for kbseg: round trip, the same answers as the index, damage. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/kbseg.c"
#include "check_main.h"

static char	dir[64];
static char	segpath[128];

static void
setup(void)
{
	strcpy(dir, "/tmp/test_kbseg.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(segpath, sizeof(segpath), "%s/segment", dir);
}

static void
teardown(void)
{
	check_rmtree(dir);
}

static unsigned	rnd_state = 1;

static unsigned
rnd(unsigned n)
{
	rnd_state = rnd_state * 1103515245 + 12345;
	return (rnd_state >> 16) % n;
}

static const char *words[] = { "alpha", "beta", "gamma", "delta", "eps",
	"zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi",
	"omicron", "pi", "rho", "sigma", "tau", "upsilon", "snake_case",
	"camelCase", "src/kb.c", "caf\xc3\xa9" };
#define NWORDS	(sizeof(words) / sizeof(words[0]))
#define DIM	8

/* A random index: ndocs documents of 1..4 chunks of 1..15 words (some
 * documents alike, for ties), vectors on most chunks, a few documents
 * removed. */
static struct kbi *
random_index(size_t ndocs, int vectors)
{
	struct kbi	*x = kbi_new();
	char		 name[32], meta[64], text[512];
	float		 v[DIM];
	size_t		 i, j, k, nc, nw, len;
	int		 d, c;

	ck_assert_ptr_nonnull(x);
	for (i = 0; i < ndocs; i++) {
		/* names in another order than added */
		snprintf(name, sizeof(name), "doc/%05u",
		    (unsigned)(i * 7919 % 100000));
		snprintf(meta, sizeof(meta), "{\"i\":%zu}", i);
		d = kbi_doc_add(x, name, meta);
		ck_assert_int_ge(d, 0);
		nc = 1 + rnd(4);
		for (j = 0; j < nc; j++) {
			len = 0;
			nw = 1 + rnd(15);
			for (k = 0; k < nw; k++)
				len += (size_t)snprintf(text + len,
				    sizeof(text) - len, "%s ",
				    words[i % 10 == 0 ? k % NWORDS :
				    rnd(NWORDS)]);
			c = kbi_chunk_add(x, d, text, len, (unsigned)j * 10 + 1,
			    (unsigned)j * 10 + 9);
			ck_assert_int_ge(c, 0);
			if (vectors && rnd(10) != 0) {
				for (k = 0; k < DIM; k++)
					v[k] = (float)rnd(200) / 100 - 1;
				if (i % 10 == 0)	/* alike: ties */
					for (k = 0; k < DIM; k++)
						v[k] = (float)(k % 3) - 1;
				ck_assert_int_eq(kbi_vec_set(x, (uint32_t)c,
				    v, DIM), 0);
			}
		}
	}
	/* remove every seventh, so the index has dead chunks */
	for (i = 0; i < ndocs; i += 7) {
		snprintf(name, sizeof(name), "doc/%05u",
		    (unsigned)(i * 7919 % 100000));
		ck_assert_int_eq(kbi_doc_remove(x, name), 1);
	}
	return x;
}

struct doclist {
	char	*names[4096];
	size_t	 n;
};

static int
doclist_cb(void *arg, const char *name, const char *meta, size_t nchunks,
    size_t bytes)
{
	struct doclist	*l = arg;

	(void)meta;
	(void)nchunks;
	(void)bytes;
	l->names[l->n++] = (char *)(uintptr_t)name;
	return 0;
}

static struct kbs *
write_open(const struct kbi *x)
{
	char		 err[256];
	struct kbs	*s;

	err[0] = '\0';
	ck_assert_msg(kbs_write(x, segpath, err, sizeof(err)) == 0, "%s",
	    err);
	s = kbs_open(segpath, err, sizeof(err));
	ck_assert_msg(s != NULL, "%s", err);
	return s;
}

START_TEST(test_round_trip)
{
	struct kbi		*x = kbi_new();
	struct kbs		*s;
	struct kbi_chunk_info	 ci;
	const char		*name, *meta;
	uint32_t		 first, n;
	float			 v[3] = { 0.5f, -1, 2 };
	int			 d;

	d = kbi_doc_add(x, "zz/last.c", "{\"m\":1}");
	kbi_chunk_add(x, d, "int\nmain(void)\n", 15, 1, 2);
	kbi_chunk_add(x, d, "{\n}\n", 4, 3, 4);
	d = kbi_doc_add(x, "aa/first.md", "");
	kbi_chunk_add(x, d, "# Title\n", 8, 1, 1);
	kbi_vec_set(x, 2, v, 3);
	d = kbi_doc_add(x, "gone", "x");
	kbi_chunk_add(x, d, "removed text", 12, 1, 1);
	kbi_doc_remove(x, "gone");
	s = write_open(x);
	ck_assert_uint_eq(kbs_ndocs(s), 2);
	ck_assert_uint_eq(kbs_nchunks(s), 3);
	ck_assert_uint_eq(kbs_bytes(s), 15 + 4 + 8);
	ck_assert_uint_eq(kbs_dim(s), 3);
	/* sorted by name: aa/first.md is 0, its chunk 0 */
	ck_assert_int_eq(kbs_doc_get(s, 0, &name, &meta, &first, &n), 0);
	ck_assert_str_eq(name, "aa/first.md");
	ck_assert_str_eq(meta, "");
	ck_assert_uint_eq(first, 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(kbs_doc_get(s, 1, &name, &meta, &first, &n), 0);
	ck_assert_str_eq(name, "zz/last.c");
	ck_assert_str_eq(meta, "{\"m\":1}");
	ck_assert_uint_eq(first, 1);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(kbs_doc_get(s, 2, &name, &meta, &first, &n), -1);
	ck_assert_int_eq(kbs_doc_find(s, "zz/last.c"), 1);
	ck_assert_int_eq(kbs_doc_find(s, "aa/first.md"), 0);
	ck_assert_int_eq(kbs_doc_find(s, "gone"), -1);
	ck_assert_int_eq(kbs_doc_find(s, "a"), -1);
	ck_assert_int_eq(kbs_doc_find(s, "zzz"), -1);
	ck_assert_int_eq(kbs_chunk_get(s, 0, &ci), 0);
	ck_assert_str_eq(ci.doc, "aa/first.md");
	ck_assert_uint_eq(ci.len, 8);
	ck_assert_int_eq(memcmp(ci.text, "# Title\n", 8), 0);
	ck_assert_uint_eq(ci.dim, 3);
	ck_assert(ci.vec[0] == 0.5f && ci.vec[1] == -1 && ci.vec[2] == 2);
	ck_assert_int_eq(kbs_chunk_get(s, 2, &ci), 0);
	ck_assert_str_eq(ci.doc, "zz/last.c");
	ck_assert_uint_eq(ci.line_first, 3);
	ck_assert_uint_eq(ci.line_last, 4);
	ck_assert_int_eq(memcmp(ci.text, "{\n}\n", 4), 0);
	ck_assert_ptr_null(ci.vec);
	ck_assert_int_eq(kbs_chunk_get(s, 3, &ci), -1);
	kbs_close(s);

	/* an empty index */
	kbi_free(x);
	x = kbi_new();
	s = write_open(x);
	ck_assert_uint_eq(kbs_ndocs(s), 0);
	ck_assert_uint_eq(kbs_dim(s), 0);
	{
		struct kbi_query	q = { "alpha", 5, NULL, 0, 5, 0 };
		struct kbi_hit		h[5];

		ck_assert_uint_eq(kbs_search(s, &q, h), 0);
	}
	kbs_close(s);
	kbi_free(x);
	/* no .tmp left behind */
	{
		char	tmp[160];

		snprintf(tmp, sizeof(tmp), "%s.tmp", segpath);
		ck_assert_int_eq(access(tmp, F_OK), -1);
	}
}
END_TEST

/* What the comparisons saw, so a test knows it compared something. */
static size_t	seen_hits, seen_fused, seen_ties;

/* Compares one query's hits: the same chunks (document, lines, text),
 * order and scores. */
static void
same_hits(const struct kbi *x, const struct kbs *s,
    const struct kbi_query *q)
{
	struct kbi_hit		a[64], b[64];
	struct kbi_chunk_info	ca, cb;
	size_t			na, nb, i;

	na = kbi_search(x, q, a);
	nb = kbs_search(s, q, b);
	ck_assert_uint_eq(na, nb);
	for (i = 0; i < na; i++) {
		ck_assert_int_eq(kbi_chunk_get(x, a[i].chunk, &ca), 0);
		ck_assert_int_eq(kbs_chunk_get(s, b[i].chunk, &cb), 0);
		ck_assert_str_eq(ca.doc, cb.doc);
		ck_assert_uint_eq(ca.line_first, cb.line_first);
		ck_assert_uint_eq(ca.len, cb.len);
		ck_assert_int_eq(memcmp(ca.text, cb.text, ca.len), 0);
		ck_assert_double_eq_tol(a[i].score, b[i].score, 1e-9);
		/* the same code on the same numbers: the same bits */
		ck_assert(a[i].score == b[i].score);
		ck_assert(a[i].bm25 == b[i].bm25);
		ck_assert(a[i].keyword == b[i].keyword);
		ck_assert(a[i].vector == b[i].vector);
		ck_assert_uint_eq(a[i].kw_rank, b[i].kw_rank);
		ck_assert_uint_eq(a[i].vec_rank, b[i].vec_rank);
		seen_hits++;
		seen_fused += a[i].kw_rank > 0 && a[i].vec_rank > 0;
		seen_ties += i > 0 && a[i].score == a[i - 1].score;
	}
}

START_TEST(test_same_as_index)
{
	struct kbi		*x;
	struct kbs		*s;
	struct kbi_query	 q;
	char			 qt[256];
	float			 qv[DIM];
	size_t			 i, k, len, nw;

	rnd_state = 42;
	seen_hits = seen_fused = seen_ties = 0;
	x = random_index(400, 1);
	s = write_open(x);
	ck_assert_uint_eq(kbs_ndocs(s), kbi_ndocs(x));
	ck_assert_uint_eq(kbs_nchunks(s), kbi_nchunks(x));
	ck_assert_uint_eq(kbs_bytes(s), kbi_bytes(x));
	ck_assert_uint_eq(kbs_dim(s), kbi_dim(x));
	for (i = 0; i < 600; i++) {
		len = 0;
		nw = rnd(5);
		for (k = 0; k < nw; k++)
			len += (size_t)snprintf(qt + len, sizeof(qt) - len,
			    "%s ", rnd(8) == 0 ? "unknownword" :
			    words[rnd(NWORDS)]);
		for (k = 0; k < DIM; k++)
			qv[k] = (float)rnd(200) / 100 - 1;
		if (i % 7 == 0)
			for (k = 0; k < DIM; k++)
				qv[k] = (float)(k % 3) - 1;
		memset(&q, 0, sizeof(q));
		q.text = qt;
		q.len = len;
		q.vec = i % 3 == 0 ? NULL : qv;
		q.dim = DIM;
		q.limit = 1 + rnd(64);
		q.threshold = rnd(4) == 0 ? (double)rnd(100) / 200 : 0;
		same_hits(x, s, &q);
	}
	ck_assert_uint_gt(seen_hits, 5000);
	ck_assert_uint_gt(seen_fused, 500);
	ck_assert_uint_gt(seen_ties, 500);
	kbs_close(s);
	kbi_free(x);
}
END_TEST

/* Keyword only, a deep list (past KBI_DEPTH) of equal scores. */
START_TEST(test_same_deep_ties)
{
	struct kbi		*x = kbi_new();
	struct kbs		*s;
	struct kbi_query	 q = { "same", 4, NULL, 0, 64, 0 };
	struct kbi_hit		 a[300], b[300];
	struct kbi_chunk_info	 ca, cb;
	char			 name[32];
	size_t			 i, na;
	int			 d;

	for (i = 0; i < 250; i++) {
		snprintf(name, sizeof(name), "n%u", (unsigned)(i * 7919) %
		    1000);
		d = kbi_doc_add(x, name, "");
		kbi_chunk_add(x, d, "same text", 9, 1, 1);
		kbi_chunk_add(x, d, "same text", 9, 2, 2);
	}
	s = write_open(x);
	same_hits(x, s, &q);
	q.limit = 300;
	na = kbi_search(x, &q, a);
	ck_assert_uint_eq(na, 300);
	ck_assert_uint_eq(kbs_search(s, &q, b), 300);
	for (i = 0; i < na; i++) {
		kbi_chunk_get(x, a[i].chunk, &ca);
		kbs_chunk_get(s, b[i].chunk, &cb);
		ck_assert_str_eq(ca.doc, cb.doc);
		ck_assert_uint_eq(ca.line_first, cb.line_first);
		ck_assert_uint_eq(b[i].chunk, i);	/* the tie order */
	}
	kbs_close(s);
	kbi_free(x);
}
END_TEST

static size_t
file_bytes(const char *path, unsigned char **buf)
{
	struct stat	st;
	FILE		*f;

	ck_assert_int_eq(stat(path, &st), 0);
	*buf = malloc((size_t)st.st_size);
	f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(*buf, 1, (size_t)st.st_size, f),
	    (size_t)st.st_size);
	fclose(f);
	return (size_t)st.st_size;
}

static void
put_file(const char *path, const unsigned char *buf, size_t len)
{
	FILE	*f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

START_TEST(test_truncated)
{
	struct kbi	*x;
	struct kbs	*s;
	unsigned char	*buf;
	char		 bad[160], err[256];
	size_t		 len, i;

	rnd_state = 5;
	x = random_index(60, 1);
	s = write_open(x);
	kbs_close(s);
	len = file_bytes(segpath, &buf);
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	for (i = 0; i < 16; i++) {
		put_file(bad, buf, len * i / 16);
		err[0] = '\0';
		ck_assert_ptr_null(kbs_open(bad, err, sizeof(err)));
		ck_assert_msg(strlen(err) > 0 && strstr(err, bad) != NULL,
		    "%s", err);
	}
	/* one byte short, one too many */
	put_file(bad, buf, len - 1);
	ck_assert_ptr_null(kbs_open(bad, err, sizeof(err)));
	{
		unsigned char *more = calloc(1, len + 1);

		memcpy(more, buf, len);
		put_file(bad, more, len + 1);
		ck_assert_ptr_null(kbs_open(bad, err, sizeof(err)));
		free(more);
	}
	/* the whole file is fine */
	put_file(bad, buf, len);
	s = kbs_open(bad, err, sizeof(err));
	ck_assert_msg(s != NULL, "%s", err);
	kbs_close(s);
	free(buf);
	kbi_free(x);
}
END_TEST

/* Opens a copy of buf with the 8 bytes at off set to v: refused. */
static void
refused_u64(const unsigned char *buf, size_t len, size_t off, uint64_t v,
    const char *what)
{
	unsigned char	*b = malloc(len);
	char		 bad[160], err[256];
	struct kbs	*s;

	memcpy(b, buf, len);
	memcpy(b + off, &v, sizeof(v));
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	put_file(bad, b, len);
	err[0] = '\0';
	s = kbs_open(bad, err, sizeof(err));
	ck_assert_msg(s == NULL, "%s accepted", what);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert(strlen(err) > 0);
	free(b);
}

static void
refused_u32(const unsigned char *buf, size_t len, size_t off, uint32_t v,
    const char *what)
{
	unsigned char	*b = malloc(len);
	char		 bad[160], err[256];
	struct kbs	*s;

	memcpy(b, buf, len);
	memcpy(b + off, &v, sizeof(v));
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	put_file(bad, b, len);
	s = kbs_open(bad, err, sizeof(err));
	ck_assert_msg(s == NULL, "%s accepted", what);
	free(b);
}

START_TEST(test_hostile)
{
	struct kbi	*x;
	struct kbs	*s;
	struct kbs_hdr	 h;
	unsigned char	*buf;
	size_t		 len, co;

	rnd_state = 9;
	x = random_index(40, 1);
	s = write_open(x);
	kbs_close(s);
	len = file_bytes(segpath, &buf);
	memcpy(&h, buf, sizeof(h));
#define HOFF(f)	offsetof(struct kbs_hdr, f)
	refused_u64(buf, len, HOFF(off_posts), h.off_posts + 8 * 1000000,
	    "postings past the end");
	refused_u64(buf, len, HOFF(off_posts), h.off_posts + 4,
	    "misaligned postings");
	refused_u64(buf, len, HOFF(off_chunks), UINT64_MAX - 7,
	    "huge chunk offset");
	refused_u64(buf, len, HOFF(nchunks), h.nchunks + 1, "chunk count");
	refused_u64(buf, len, HOFF(nposts), UINT64_MAX / 4, "postings count");
	refused_u64(buf, len, HOFF(off_blob), h.off_blob + 8, "blob offset");
	refused_u64(buf, len, HOFF(ntokens), h.ntokens + 1, "token total");
	refused_u64(buf, len, HOFF(file_len), len + 8, "file length");
	refused_u32(buf, len, HOFF(version), 2, "version");
	refused_u32(buf, len, HOFF(dim), KBI_DIM_MAX + 1, "dim");
	refused_u32(buf, len, 0, 0x4b50, "magic");
	/* a document's name, a chunk's text, a term's postings */
	refused_u64(buf, len, h.off_docs + offsetof(struct kbs_doc,
	    name_off), h.blob_len, "name past the blob");
	refused_u32(buf, len, h.off_docs + offsetof(struct kbs_doc, n),
	    1000000, "doc chunks");
	co = h.off_chunks + offsetof(struct kbs_chunk, text_len);
	refused_u64(buf, len, co, h.blob_len + 1, "chunk text");
	refused_u32(buf, len, h.off_chunks + offsetof(struct kbs_chunk, doc),
	    (uint32_t)h.ndocs, "chunk doc");
	refused_u64(buf, len, h.off_terms + offsetof(struct kbs_term, npost),
	    h.nposts + 1, "term postings");
	refused_u32(buf, len, h.off_terms + offsetof(struct kbs_term,
	    tok_len), KBT_TOKEN_MAX + 1, "token length");
#undef HOFF
	free(buf);
	kbi_free(x);
}
END_TEST

/* Random damage anywhere: refused, or searched without reading outside
 * the map (the sanitizer build checks that). */
START_TEST(test_random_damage)
{
	struct kbi		*x;
	struct kbs		*s;
	struct kbi_chunk_info	 ci;
	struct kbi_hit		 h[20];
	unsigned char		*buf, *b;
	char			 bad[160], err[256];
	float			 qv[DIM] = { 1, 0, -1, 1, 0, -1, 1, 0 };
	size_t			 len, i, k;
	int			 opened = 0;

	rnd_state = 77;
	x = random_index(30, 1);
	s = write_open(x);
	kbs_close(s);
	len = file_bytes(segpath, &buf);
	b = malloc(len);
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	for (i = 0; i < 400; i++) {
		memcpy(b, buf, len);
		for (k = 0; k < 1 + rnd(4); k++)
			b[rnd((unsigned)len)] ^= (unsigned char)(1 << rnd(8));
		put_file(bad, b, len);
		if ((s = kbs_open(bad, err, sizeof(err))) == NULL)
			continue;
		opened++;
		for (k = 0; k < kbs_nchunks(s); k++)
			ck_assert_int_eq(kbs_chunk_get(s, (uint32_t)k, &ci), 0);
		for (k = 0; k < 5; k++) {
			struct kbi_query q = { words[rnd(NWORDS)], 0, qv, DIM,
			    20, 0 };

			q.len = strlen(q.text);
			ck_assert_uint_le(kbs_search(s, &q, h), 20);
		}
		kbs_close(s);
	}
	ck_assert_int_gt(opened, 0);	/* text damage is not detected */
	free(b);
	free(buf);
	kbi_free(x);
}
END_TEST

START_TEST(test_copy_doc)
{
	struct kbi		*x, *y;
	struct kbs		*s;
	struct kbi_query	 q;
	struct kbi_hit		 a[20], b[20];
	struct kbi_chunk_info	 ca, cb;
	struct doclist		 l;
	const char		*name, *meta;
	float			 qv[DIM] = { 1, 1, 0, 0, -1, 0, 1, 0 };
	size_t			 i, na, nb;

	rnd_state = 11;
	x = random_index(50, 1);
	s = write_open(x);
	y = kbi_new();
	for (i = 0; i < kbs_ndocs(s); i++) {
		ck_assert_int_eq(kbs_doc_get(s, i, &name, &meta, NULL, NULL),
		    0);
		ck_assert_int_eq(kbs_copy_doc(s, i, y, "new meta"), 0);
	}
	ck_assert_uint_eq(kbi_ndocs(y), kbi_ndocs(x));
	ck_assert_uint_eq(kbi_nchunks(y), kbi_nchunks(x));
	ck_assert_uint_eq(kbi_bytes(y), kbi_bytes(x));
	ck_assert_uint_eq(kbi_dim(y), kbi_dim(x));
	memset(&l, 0, sizeof(l));
	kbi_docs(y, doclist_cb, &l);
	ck_assert_uint_eq(l.n, kbs_ndocs(s));
	/* copying again: the name is taken */
	errno = 0;
	ck_assert_int_eq(kbs_copy_doc(s, 0, y, "m"), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(kbs_copy_doc(s, kbs_ndocs(s), y, "m"), -1);
	/* the copy answers as the original */
	memset(&q, 0, sizeof(q));
	q.text = "alpha beta snake case";
	q.len = strlen(q.text);
	q.vec = qv;
	q.dim = DIM;
	q.limit = 20;
	na = kbi_search(x, &q, a);
	nb = kbi_search(y, &q, b);
	ck_assert_uint_eq(na, nb);
	ck_assert_uint_gt(na, 0);
	for (i = 0; i < na; i++) {
		kbi_chunk_get(x, a[i].chunk, &ca);
		kbi_chunk_get(y, b[i].chunk, &cb);
		ck_assert_str_eq(ca.doc, cb.doc);
		ck_assert_uint_eq(ca.line_first, cb.line_first);
		ck_assert_str_eq(cb.meta, "new meta");
		ck_assert(a[i].score == b[i].score);
	}
	/* a document into an index of another dim: refused, not half
	 * copied */
	{
		struct kbi	*z = kbi_new();
		float		 w[3] = { 1, 2, 3 };
		uint32_t	 first, n;
		int		 d;

		d = kbi_doc_add(z, "other", "");
		kbi_chunk_add(z, d, "x y", 3, 1, 1);
		kbi_vec_set(z, 0, w, 3);
		for (i = 0; i < kbs_ndocs(s); i++) {
			struct kbi_chunk_info c0;

			kbs_doc_get(s, i, &name, NULL, &first, &n);
			kbs_chunk_get(s, first, &c0);
			if (c0.vec != NULL)
				break;
		}
		ck_assert_uint_lt(i, kbs_ndocs(s));
		ck_assert_int_eq(kbs_copy_doc(s, i, z, ""), -1);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_int_eq(kbi_doc_find(z, name), -1);
		ck_assert_uint_eq(kbi_nchunks(z), 1);
		kbi_free(z);
	}
	kbs_close(s);
	kbi_free(x);
	kbi_free(y);
}
END_TEST

START_TEST(test_open_errors)
{
	struct kbi	*x = kbi_new();
	char		 err[256], p[200];

	errno = 0;
	ck_assert_ptr_null(kbs_open(segpath, err, sizeof(err)));
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "no segment"));
	ck_assert_ptr_null(kbs_open(dir, err, sizeof(err)));	/* a dir */
	snprintf(p, sizeof(p), "%s/nodir/segment", dir);
	err[0] = '\0';
	ck_assert_int_eq(kbs_write(x, p, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "nodir"));
	/* a small file */
	put_file(segpath, (const unsigned char *)"PKBSEG01", 8);
	ck_assert_ptr_null(kbs_open(segpath, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "short"));
	kbi_free(x);
}
END_TEST

/* A failed write leaves the old segment as it was. */
START_TEST(test_write_keeps_old)
{
	struct kbi	*x = kbi_new();
	struct kbs	*s;
	char		 err[256], tmp[160];
	int		 d;

	d = kbi_doc_add(x, "one", "");
	kbi_chunk_add(x, d, "first version", 13, 1, 1);
	s = write_open(x);
	kbs_close(s);
	/* path.tmp is a directory: the write fails */
	snprintf(tmp, sizeof(tmp), "%s.tmp", segpath);
	ck_assert_int_eq(mkdir(tmp, 0700), 0);
	d = kbi_doc_add(x, "two", "");
	kbi_chunk_add(x, d, "second", 6, 1, 1);
	ck_assert_int_eq(kbs_write(x, segpath, err, sizeof(err)), -1);
	ck_assert(strlen(err) > 0);
	rmdir(tmp);
	s = kbs_open(segpath, err, sizeof(err));
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(kbs_ndocs(s), 1);
	kbs_close(s);
	kbi_free(x);
}
END_TEST

static Suite *
kbseg_suite(void)
{
	Suite	*s = suite_create("kbseg");
	TCase	*tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_same_as_index);
	tcase_add_test(tc, test_same_deep_ties);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_hostile);
	tcase_add_test(tc, test_random_damage);
	tcase_add_test(tc, test_copy_doc);
	tcase_add_test(tc, test_open_errors);
	tcase_add_test(tc, test_write_keeps_old);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(kbseg_suite());
}
