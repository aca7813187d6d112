/*
 * kb-bench: the knowledge modules measured on their own (bench/kb, see
 * bench/README.md), away from the daemon's loop and sockets.
 *
 *   kb-bench build SEGMENT DIR...   index DIRs (text files up to 1 MiB, no
 *                                   symlinks, no dot or node_modules
 *                                   directories) into SEGMENT; prints
 *                                   files, bytes, chunks, seconds
 *   kb-bench query SEGMENT N        N queries of 1 to 3 words drawn from
 *                                   the segment's own text (seeded), each
 *                                   searched for 10 hits in the mapped
 *                                   segment; prints p50, p99, mean (us)
 *   kb-bench dump SEGMENT N OUTDIR  for the reference comparison: the
 *                                   chunks' tokens (chunks.txt, one chunk
 *                                   a line), N queries' tokens (queries.txt)
 *                                   and Parley's top 10 for each (ours.txt:
 *                                   "query chunk score" lines)
 *
 * Every figure goes to stdout as one JSON object.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parley/kbindex.h"
#include "parley/kbseg.h"
#include "parley/kbtext.h"

#define MAX_FILE	(1024 * 1024)
#define MAX_DEPTH	32

struct build {
	struct kbi	*idx;
	size_t		 files, bytes, chunks, skipped;
	char		*buf;
};

static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
die(const char *what)
{
	fprintf(stderr, "kb-bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
add_file(struct build *b, const char *path, off_t size)
{
	struct kbt_chunk	*ch;
	ssize_t			 n;
	size_t			 nch, i, got = 0;
	int			 fd, doc;

	if (size > MAX_FILE) {
		b->skipped++;
		return;
	}
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW)) == -1) {
		b->skipped++;
		return;
	}
	while (got < (size_t)size &&
	    (n = read(fd, b->buf + got, (size_t)size - got)) > 0)
		got += (size_t)n;
	close(fd);
	if (!kbt_is_text(b->buf, got)) {
		b->skipped++;
		return;
	}
	if ((doc = kbi_doc_add(b->idx, path, "{}")) == -1)
		die("kbi_doc_add");
	nch = kbt_chunks(b->buf, got, KBT_CHUNK_BYTES, &ch);
	if (nch == (size_t)-1)
		die("kbt_chunks");
	for (i = 0; i < nch; i++)
		if (kbi_chunk_add(b->idx, doc, b->buf + ch[i].off, ch[i].len,
		    ch[i].line_first, ch[i].line_last) == -1)
			die("kbi_chunk_add");
	free(ch);
	b->files++;
	b->bytes += got;
	b->chunks += nch;
}

static void
walk(struct build *b, const char *dir, int depth)
{
	struct dirent	*de;
	struct stat	 sb;
	char		 path[PATH_MAX];
	DIR		*d;

	if (depth > MAX_DEPTH || (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    strcmp(de->d_name, "node_modules") == 0)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
		    de->d_name) >= sizeof(path))
			continue;
		if (lstat(path, &sb) == -1)
			continue;
		if (S_ISDIR(sb.st_mode))
			walk(b, path, depth + 1);
		else if (S_ISREG(sb.st_mode))
			add_file(b, path, sb.st_size);
	}
	closedir(d);
}

static int
build(const char *seg, char **dirs, int ndirs)
{
	struct build	b = { 0 };
	char		err[256];
	double		t0, t1, t2;
	int		i;

	if ((b.idx = kbi_new()) == NULL || (b.buf = malloc(MAX_FILE)) == NULL)
		die("malloc");
	t0 = now_s();
	for (i = 0; i < ndirs; i++)
		walk(&b, dirs[i], 0);
	t1 = now_s();
	if (kbs_write(b.idx, seg, err, sizeof(err)) == -1) {
		fprintf(stderr, "kb-bench: %s\n", err);
		return 1;
	}
	t2 = now_s();
	printf("{\"files\":%zu,\"bytes\":%zu,\"chunks\":%zu,\"skipped\":%zu,"
	    "\"indexSeconds\":%.3f,\"writeSeconds\":%.3f,"
	    "\"filesPerSecond\":%.0f,\"mbPerSecond\":%.2f}\n", b.files,
	    b.bytes, b.chunks, b.skipped, t1 - t0, t2 - t1,
	    (double)b.files / (t2 - t0),
	    (double)b.bytes / (1024.0 * 1024.0) / (t2 - t0));
	kbi_free(b.idx);
	free(b.buf);
	return 0;
}

/* Tokens of a chunk, collected for query drawing and the dump. */
struct toks {
	char	**v;
	size_t	  n, cap;
};

static void
tok_cb(void *arg, const char *tok, size_t len)
{
	struct toks	*t = arg;

	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		if ((t->v = realloc(t->v, t->cap * sizeof(*t->v))) == NULL)
			die("realloc");
	}
	if ((t->v[t->n] = strndup(tok, len)) == NULL)
		die("strndup");
	t->n++;
}

static void
toks_clear(struct toks *t)
{
	while (t->n > 0)
		free(t->v[--t->n]);
}

/* A query of 1 to 3 tokens of one random chunk, space-joined, into q. */
static void
draw_query(const struct kbs *s, unsigned *seed, char *q, size_t qlen)
{
	struct kbi_chunk_info	 ci;
	struct toks		 t = { 0 };
	size_t			 nw, i;

	q[0] = '\0';
	while (q[0] == '\0') {
		if (kbs_chunk_get(s, (uint32_t)(rand_r(seed) %
		    kbs_nchunks(s)), &ci) == -1)
			continue;
		kbt_tokens(ci.text, ci.len, tok_cb, &t);
		if (t.n == 0)
			continue;
		nw = 1 + (size_t)rand_r(seed) % 3;
		for (i = 0; i < nw; i++) {
			if (i > 0)
				strncat(q, " ", qlen - strlen(q) - 1);
			strncat(q, t.v[(size_t)rand_r(seed) % t.n],
			    qlen - strlen(q) - 1);
		}
		toks_clear(&t);
	}
	free(t.v);
}

static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct kbs *
open_seg(const char *path)
{
	struct kbs	*s;
	char		 err[256];

	if ((s = kbs_open(path, err, sizeof(err))) == NULL) {
		fprintf(stderr, "kb-bench: %s\n", err);
		exit(1);
	}
	if (kbs_nchunks(s) == 0) {
		fprintf(stderr, "kb-bench: %s: no chunks\n", path);
		exit(1);
	}
	return s;
}

static int
query(const char *seg, long n)
{
	struct kbs	*s = open_seg(seg);
	struct kbi_hit	 hits[10];
	struct kbi_query q = { 0 };
	unsigned	 seed = 18;
	double		*lat, sum = 0, t0;
	size_t		 hit_total = 0;
	char		 text[512];
	long		 i;

	if (n < 1 || (lat = calloc((size_t)n, sizeof(*lat))) == NULL)
		die("calloc");
	for (i = 0; i < n; i++) {
		draw_query(s, &seed, text, sizeof(text));
		q.text = text;
		q.len = strlen(text);
		q.limit = 10;
		t0 = now_s();
		hit_total += kbs_search(s, &q, hits);
		lat[i] = (now_s() - t0) * 1e6;
		sum += lat[i];
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
	printf("{\"chunks\":%zu,\"queries\":%ld,\"p50Us\":%.1f,\"p99Us\":%.1f,"
	    "\"maxUs\":%.1f,\"meanUs\":%.1f,\"hitsPerQuery\":%.2f}\n",
	    kbs_nchunks(s), n, lat[n / 2], lat[(n * 99) / 100], lat[n - 1],
	    sum / (double)n, (double)hit_total / (double)n);
	free(lat);
	kbs_close(s);
	return 0;
}

static FILE *
out_file(const char *dir, const char *name)
{
	char	 path[PATH_MAX];
	FILE	*f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "w")) == NULL)
		die(path);
	return f;
}

static int
dump(const char *seg, long n, const char *dir)
{
	struct kbs		*s = open_seg(seg);
	struct kbi_chunk_info	 ci;
	struct kbi_hit		 hits[10];
	struct kbi_query	 q = { 0 };
	struct toks		 t = { 0 };
	unsigned		 seed = 18;
	char			 text[512];
	FILE			*fc, *fq, *fo;
	size_t			 c, j, nh;
	long			 i;

	fc = out_file(dir, "chunks.txt");
	for (c = 0; c < kbs_nchunks(s); c++) {
		if (kbs_chunk_get(s, (uint32_t)c, &ci) == 0)
			kbt_tokens(ci.text, ci.len, tok_cb, &t);
		for (j = 0; j < t.n; j++)
			fprintf(fc, "%s%s", j ? " " : "", t.v[j]);
		fputc('\n', fc);
		toks_clear(&t);
	}
	fq = out_file(dir, "queries.txt");
	fo = out_file(dir, "ours.txt");
	for (i = 0; i < n; i++) {
		draw_query(s, &seed, text, sizeof(text));
		/* The query as Parley searches it: its tokens (a compound
		 * drawn gives its parts too). */
		kbt_tokens(text, strlen(text), tok_cb, &t);
		for (j = 0; j < t.n; j++)
			fprintf(fq, "%s%s", j ? " " : "", t.v[j]);
		fputc('\n', fq);
		toks_clear(&t);
		q.text = text;
		q.len = strlen(text);
		q.limit = 10;
		nh = kbs_search(s, &q, hits);
		for (j = 0; j < nh; j++)
			fprintf(fo, "%ld %u %.6f\n", i, hits[j].chunk,
			    hits[j].bm25);
	}
	if (fclose(fc) || fclose(fq) || fclose(fo))
		die("write");
	free(t.v);
	kbs_close(s);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "build") == 0)
		return build(argv[2], argv + 3, argc - 3);
	if (argc == 4 && strcmp(argv[1], "query") == 0)
		return query(argv[2], strtol(argv[3], NULL, 10));
	if (argc == 5 && strcmp(argv[1], "dump") == 0)
		return dump(argv[2], strtol(argv[3], NULL, 10), argv[4]);
	fprintf(stderr, "usage: kb-bench build SEGMENT DIR...\n"
	    "       kb-bench query SEGMENT N\n"
	    "       kb-bench dump SEGMENT N OUTDIR\n");
	return 2;
}
