/*
 * Unit tests for the directory index's build (workers/index_build.c):
 * which paths may be indexed (roots, "..", symbolic links, a root's name
 * as another's prefix), the globs and default excludes, the progress
 * throttle, and builds of a scratch tree run on the test's thread
 * (skips, incremental re-runs, removals, bounds); a file's hash from a
 * built segment (index_hash.c: roots' order, removed files, bad paths).
 */
#include <sys/stat.h>
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../workers/index_build.c"
#include "../../workers/index_hash.c"
#include "check_main.h"

static char tmp[PATH_MAX];		/* scratch, real path */
static char root[PATH_MAX + 8];		/* tmp/root: the index root */
static struct config conf;
static struct cfg_name rootname;

static void
put(const char *rel, const char *text)
{
	char p[PATH_MAX * 2];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
}

static void
mk(const char *rel)
{
	char p[PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	ck_assert_int_eq(mkdir(p, 0700), 0);
}

static void
setup(void)
{
	char t[] = "/tmp/test_index.XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(t));
	ck_assert_ptr_nonnull(realpath(t, tmp));
	snprintf(root, sizeof(root), "%s/root", tmp);
	mk("root");
	mk("root2");
	mk("outside");
	mk("root/sub");
	put("outside/secret.txt", "the secret word is swordfish\n");
	put("root2/other.txt", "other\n");
	put("root/file.txt", "hello\n");
	memset(&conf, 0, sizeof(conf));
	TAILQ_INIT(&conf.index_roots);
	rootname.name = root;
	TAILQ_INSERT_TAIL(&conf.index_roots, &rootname, entry);
	conf.index_max_file = 1 << 20;
	conf.index_max_files = 100000;
	conf.index_max_bytes = (size_t)1 << 30;
}

static void
teardown(void)
{
	check_rmtree(tmp);
}

START_TEST(under_boundary)
{
	ck_assert_int_eq(index_under("/srv/root", "/srv/root"), 1);
	ck_assert_int_eq(index_under("/srv/root", "/srv/root/a/b"), 1);
	/* a root's name as another's prefix is not under it */
	ck_assert_int_eq(index_under("/srv/root", "/srv/root2"), 0);
	ck_assert_int_eq(index_under("/srv/root", "/srv/root2/a"), 0);
	ck_assert_int_eq(index_under("/srv/root", "/srv"), 0);
	ck_assert_int_eq(index_under("/", "/anything"), 1);
}
END_TEST

/* Resolves p (relative to tmp when not absolute): the status, real. */
static int
resolve(const char *p, char real[PATH_MAX], char *msg, size_t len)
{
	char full[PATH_MAX * 2];
	int status = 0;

	if (p[0] == '@')	/* as given */
		snprintf(full, sizeof(full), "%s", p + 1);
	else
		snprintf(full, sizeof(full), "%s/%s", tmp, p);
	if (index_resolve(&conf, full, real, &status, msg, len) == 0)
		return 0;
	return status;
}

START_TEST(resolve_paths)
{
	char real[PATH_MAX], msg[512], want[PATH_MAX * 2];
	char link[PATH_MAX * 2];

	ck_assert_int_eq(resolve("root", real, msg, sizeof(msg)), 0);
	ck_assert_str_eq(real, root);
	ck_assert_int_eq(resolve("root/sub/", real, msg, sizeof(msg)), 0);
	snprintf(want, sizeof(want), "%s/sub", root);
	ck_assert_str_eq(real, want);
	/* .. back inside is fine; out is not */
	ck_assert_int_eq(resolve("root/sub/..", real, msg, sizeof(msg)), 0);
	ck_assert_int_eq(resolve("root/../outside", real, msg, sizeof(msg)),
	    403);
	ck_assert_ptr_nonnull(strstr(msg, "not under an index-root"));
	ck_assert_int_eq(resolve("root/sub/../../outside", real, msg,
	    sizeof(msg)), 403);
	/* a symbolic link pointing out */
	snprintf(link, sizeof(link), "%s/root/out", tmp);
	ck_assert_int_eq(symlink("../outside", link), 0);
	ck_assert_int_eq(resolve("root/out", real, msg, sizeof(msg)), 403);
	/* root2 starts with root's name */
	ck_assert_int_eq(resolve("root2", real, msg, sizeof(msg)), 403);
	ck_assert_int_eq(resolve("@root", real, msg, sizeof(msg)), 400);
	ck_assert_ptr_nonnull(strstr(msg, "absolute"));
	ck_assert_int_eq(resolve("root/nope", real, msg, sizeof(msg)), 404);
	ck_assert_int_eq(resolve("root/file.txt", real, msg, sizeof(msg)),
	    400);
	ck_assert_ptr_nonnull(strstr(msg, "not a directory"));
	/* the link's target is never told */
	ck_assert_int_eq(resolve("root/out", real, msg, sizeof(msg)), 403);
	ck_assert_ptr_null(strstr(msg, "outside"));
	/* out of every root as written: one answer, whether it exists or
	 * not (it is not looked at) */
	ck_assert_int_eq(resolve("@/etc", real, msg, sizeof(msg)), 403);
	ck_assert_ptr_nonnull(strstr(msg, "'/etc' is not under an "
	    "index-root"));
	ck_assert_int_eq(resolve("@/nonexistent-ti", real, msg, sizeof(msg)),
	    403);
	ck_assert_ptr_nonnull(strstr(msg, "'/nonexistent-ti' is not under an "
	    "index-root"));
	ck_assert_int_eq(resolve("outside/nope", real, msg, sizeof(msg)),
	    403);
	/* the state-dir and what is in it */
	mk("root/state");
	mk("root/state/sessions");
	snprintf(want, sizeof(want), "%s/state", root);
	conf.state_dir = want;
	ck_assert_int_eq(resolve("root/state", real, msg, sizeof(msg)), 403);
	ck_assert_ptr_nonnull(strstr(msg, "state-dir"));
	ck_assert_int_eq(resolve("root/state/sessions/", real, msg,
	    sizeof(msg)), 403);
	ck_assert_int_eq(resolve("root/sub", real, msg, sizeof(msg)), 0);
	conf.state_dir = NULL;
	TAILQ_INIT(&conf.index_roots);
	ck_assert_int_eq(resolve("root", real, msg, sizeof(msg)), 403);
	ck_assert_ptr_nonnull(strstr(msg, "no index-root"));
}
END_TEST

START_TEST(globs)
{
	ck_assert_int_eq(index_glob("*.c", "x.c"), 1);
	ck_assert_int_eq(index_glob("*.c", "a/b/x.c"), 1);
	ck_assert_int_eq(index_glob("*.c", "a/x.h"), 0);
	ck_assert_int_eq(index_glob("src/*.c", "src/x.c"), 1);
	ck_assert_int_eq(index_glob("src/*.c", "src/a/x.c"), 0);
	ck_assert_int_eq(index_glob("src/*.c", "lib/src/x.c"), 0);
	ck_assert_int_eq(index_glob("/src/*.c", "src/x.c"), 1);
	ck_assert_int_eq(index_glob("src/**", "src"), 1);
	ck_assert_int_eq(index_glob("src/**", "src/a/b/c.py"), 1);
	ck_assert_int_eq(index_glob("src/**", "srcx/a"), 0);
	ck_assert_int_eq(index_glob("**/test_*.py", "test_a.py"), 1);
	ck_assert_int_eq(index_glob("**/test_*.py", "a/b/test_a.py"), 1);
	ck_assert_int_eq(index_glob("**/test_*.py", "a/b/atest_a.py"), 0);
	ck_assert_int_eq(index_glob("**/build/**", "x/build/y/z.o"), 1);
	ck_assert_int_eq(index_glob("**/build/**", "x/builder/y"), 0);
	ck_assert_int_eq(index_glob("a/**/z.c", "a/z.c"), 1);
	ck_assert_int_eq(index_glob("a/**/z.c", "a/b/c/z.c"), 1);
	ck_assert_int_eq(index_glob("docs/*.md", "docs.md"), 0);
	ck_assert_int_eq(index_glob("[ab].txt", "b.txt"), 1);
	ck_assert_int_eq(index_glob("a/**/**/b", "a/b"), 1);
	ck_assert_int_eq(index_glob("a/**/b/**/c", "a/x/b/y/b/c"), 1);
	ck_assert_int_eq(index_glob("a/**/b/**/c", "a/x/b/y/b/d"), 0);
	ck_assert_int_eq(index_glob("**/x/**", "a/x"), 1);
	ck_assert_int_eq(index_glob("**/x/**", "a/xy/b"), 0);
	ck_assert_int_eq(index_glob("**", "a/b"), 1);
}
END_TEST

/* Many "**" do not take exponential time (each try was every split). */
START_TEST(globs_bounded)
{
	char pat[INDEX_GLOB_MAX + 1], rel[PATH_MAX];
	size_t i, pl = 0, rl = 0;

	for (i = 0; i < 60; i++)
		pl += (size_t)snprintf(pat + pl, sizeof(pat) - pl, "**/*/");
	snprintf(pat + pl, sizeof(pat) - pl, "zz");
	for (i = 0; i < 64; i++)
		rl += (size_t)snprintf(rel + rl, sizeof(rel) - rl, "d%zu/", i);
	snprintf(rel + rl, sizeof(rel) - rl, "f.txt");
	/* before: 2^60 tries; Check's timeout ends a hang */
	ck_assert_int_eq(index_glob(pat, rel), 0);
	rel[rl - 1] = '\0';
	strcat(rel, "/zz");
	ck_assert_int_eq(index_glob(pat, rel), 1);
	ck_assert_uint_eq(glob_stars("**/a/**/**/b/**"), 3);
}
END_TEST

START_TEST(wanted)
{
	char *inc[] = { "*.py", "node_modules/keep/**" }, *exc[] = {
	    "vendor/**", "*.min.js" };
	struct index_src s = { .path = "/x" };

	/* default excludes */
	ck_assert_int_eq(index_wanted(&s, ".git", 1), 0);
	ck_assert_int_eq(index_wanted(&s, "a/.cache", 1), 0);
	ck_assert_int_eq(index_wanted(&s, "node_modules", 1), 0);
	ck_assert_int_eq(index_wanted(&s, "src", 1), 1);
	ck_assert_int_eq(index_wanted(&s, ".gitignore", 0), 1);
	ck_assert_int_eq(index_wanted(&s, "a.c", 0), 1);
	s.inc = inc;
	s.ninc = 2;
	s.exc = exc;
	s.nexc = 2;
	/* an include naming a default-excluded directory opens it */
	ck_assert_int_eq(index_wanted(&s, "node_modules", 1), 1);
	ck_assert_int_eq(index_wanted(&s, "node_modules/keep", 1), 1);
	ck_assert_int_eq(index_wanted(&s, ".git", 1), 0);
	ck_assert_int_eq(index_wanted(&s, "vendor", 1), 0);
	ck_assert_int_eq(index_wanted(&s, "vendor/a.py", 0), 0);
	ck_assert_int_eq(index_wanted(&s, "x/a.py", 0), 1);
	ck_assert_int_eq(index_wanted(&s, "x/a.c", 0), 0);
	ck_assert_int_eq(index_wanted(&s, "node_modules/keep/a.js", 0), 1);
	ck_assert_int_eq(index_wanted(&s, "a.min.js", 0), 0);
}
END_TEST

START_TEST(throttle)
{
	uint64_t last = 0, t;
	unsigned n = 0;

	ck_assert_int_eq(index_throttle(&last, 1000, 500), 1);
	ck_assert_int_eq(index_throttle(&last, 1499, 500), 0);
	ck_assert_int_eq(index_throttle(&last, 1500, 500), 1);
	/* a message a millisecond for 10 s: 20 go through */
	last = 0;
	for (t = 1; t <= 10000; t++)
		n += (unsigned)index_throttle(&last, t, 500);
	ck_assert_uint_eq(n, 20);
}
END_TEST

START_TEST(parse_body)
{
	struct index_src src;
	char msg[512], body[PATH_MAX * 3];
	cJSON *b;
	int status;

	snprintf(body, sizeof(body), "{\"path\":\"%s/sub\",\"include\":"
	    "[\"*.c\"],\"exclude\":[\"b/**\"]}", root);
	b = cJSON_Parse(body);
	ck_assert_int_eq(index_src_parse(&conf, b, &src, &status, msg,
	    sizeof(msg)), 0);
	ck_assert_uint_eq(src.ninc, 1);
	ck_assert_str_eq(src.exc[0], "b/**");
	index_src_clear(&src);
	cJSON_Delete(b);
	b = cJSON_Parse("{\"path\":\"/etc\"}");
	ck_assert_int_eq(index_src_parse(&conf, b, &src, &status, msg,
	    sizeof(msg)), -1);
	ck_assert_int_eq(status, 403);
	cJSON_Delete(b);
	snprintf(body, sizeof(body), "{\"path\":\"%s\",\"include\":\"*.c\"}",
	    root);
	b = cJSON_Parse(body);
	ck_assert_int_eq(index_src_parse(&conf, b, &src, &status, msg,
	    sizeof(msg)), -1);
	ck_assert_int_eq(status, 400);
	ck_assert_ptr_nonnull(strstr(msg, "'include'"));
	cJSON_Delete(b);
	b = cJSON_Parse("{}");
	ck_assert_int_eq(index_src_parse(&conf, b, &src, &status, msg,
	    sizeof(msg)), -1);
	ck_assert_ptr_nonnull(strstr(msg, "'path'"));
	cJSON_Delete(b);
	/* at most 4 "**" a pattern (a run counts once) */
	snprintf(body, sizeof(body), "{\"path\":\"%s\",\"exclude\":"
	    "[\"**/a/**/b/**/c/**/d/**\"]}", root);
	b = cJSON_Parse(body);
	ck_assert_int_eq(index_src_parse(&conf, b, &src, &status, msg,
	    sizeof(msg)), -1);
	ck_assert_int_eq(status, 400);
	ck_assert_ptr_nonnull(strstr(msg, "at most 4"));
	cJSON_Delete(b);
	snprintf(body, sizeof(body), "{\"path\":\"%s\",\"exclude\":"
	    "[\"**/**/**/**/**/**/x/**\"]}", root);
	b = cJSON_Parse(body);
	ck_assert_int_eq(index_src_parse(&conf, b, &src, &status, msg,
	    sizeof(msg)), 0);
	index_src_clear(&src);
	cJSON_Delete(b);
}
END_TEST

/* Runs a build of source path (its only one) here: its counts. */
static struct index_counts
build_of(const char *path, int target)
{
	struct index_build b;
	struct index_counts c;
	int p[2];

	memset(&b, 0, sizeof(b));
	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	b.conf = &conf;
	if (snprintf(b.dir, sizeof(b.dir), "%s/state", tmp) >=
	    (int)sizeof(b.dir))
		ck_abort_msg("scratch path too long");
	mkdir(b.dir, 0700);
	b.srcs = calloc(1, sizeof(*b.srcs));
	b.srcs[0].path = strdup(path);
	b.nsrcs = 1;
	b.target = target;
	b.wake_fd = p[1];
	pthread_mutex_init(&b.mu, NULL);
	index_build_main(&b);
	c = b.c;
	pthread_mutex_destroy(&b.mu);
	index_srcs_free(b.srcs, b.nsrcs);
	close(p[0]);
	close(p[1]);
	ck_assert_int_eq(c.phase, 2);
	return c;
}

static struct index_counts
build(int target)
{
	return build_of(root, target);
}

static void
tree(void)
{
	char big[4096], link[PATH_MAX * 2];
	size_t i;

	put("root/a.c", "int\nmain(void)\n{\n\treturn frobnicate();\n}\n");
	put("root/sub/b.py", "def frobnicate():\n    return 42\n");
	mk("root/node_modules");
	put("root/node_modules/dep.js", "module.exports = 1;\n");
	mk("root/.git");
	put("root/.git/HEAD", "ref: refs/heads/main\n");
	put("root/bin.dat", "text then\x01");
	{
		char p[PATH_MAX * 2];
		FILE *f;

		snprintf(p, sizeof(p), "%s/root/bin.dat", tmp);
		f = fopen(p, "wb");
		fwrite("ab\0cd", 1, 5, f);
		fclose(f);
	}
	for (i = 0; i < sizeof(big) - 1; i++)
		big[i] = 'x';
	big[sizeof(big) - 1] = '\0';
	put("root/big.txt", big);
	snprintf(link, sizeof(link), "%s/root/out", tmp);
	ck_assert_int_eq(symlink("../outside", link), 0);
	snprintf(link, sizeof(link), "%s/root/secret.txt", tmp);
	ck_assert_int_eq(symlink("../outside/secret.txt", link), 0);
	conf.index_max_file = 2048;
}

START_TEST(build_incremental)
{
	struct index_counts c;
	struct kbs *k;
	char seg[PATH_MAX * 2], err[256], p[PATH_MAX * 2];
	struct kbi_query q;
	struct kbi_hit hits[4];

	tree();
	c = build(-1);
	ck_assert_int_eq(c.failed, 0);
	/* file.txt, a.c, sub/b.py; not node_modules, .git, links */
	ck_assert_uint_eq(c.files, 3);
	ck_assert_uint_eq(c.read, 4);	/* and bin.dat, found binary */
	ck_assert_uint_eq(c.binary, 1);
	ck_assert_uint_eq(c.too_large, 1);
	ck_assert_uint_eq(c.symlinks, 2);
	ck_assert_uint_eq(c.added, 3);
	ck_assert_int_eq(c.unchanged, 0);
	snprintf(seg, sizeof(seg), "%s/state/segment", tmp);
	ck_assert_ptr_nonnull(k = kbs_open(seg, err, sizeof(err)));
	memset(&q, 0, sizeof(q));
	q.text = "swordfish";
	q.len = strlen(q.text);
	q.limit = 4;
	ck_assert_uint_eq(kbs_search(k, &q, hits), 0);
	q.text = "frobnicate";
	q.len = strlen(q.text);
	ck_assert_uint_eq(kbs_search(k, &q, hits), 2);
	kbs_close(k);

	/* again: nothing read, nothing written */
	c = build(-1);
	ck_assert_uint_eq(c.read, 0);
	ck_assert_uint_eq(c.binary, 1);	/* remembered, not read */
	ck_assert_int_eq(c.unchanged, 1);
	ck_assert_uint_eq(c.files, 3);

	/* a changed file is read; a removed one goes */
	put("root/sub/b.py", "def frobnicate():\n    return 43\n");
	snprintf(p, sizeof(p), "%s/root/file.txt", tmp);
	unlink(p);
	c = build(0);
	ck_assert_uint_eq(c.changed, 1);
	ck_assert_uint_eq(c.removed, 1);
	ck_assert_uint_eq(c.files, 2);
	ck_assert_int_eq(c.unchanged, 0);

	/* bounds */
	conf.index_max_files = 1;
	c = build(0);
	ck_assert_uint_eq(c.files, 1);
	ck_assert_ptr_nonnull(strstr(c.stopped, "bound reached"));
}
END_TEST

START_TEST(walk_dirs)
{
	struct index_src s = { .path = root };
	char link[PATH_MAX * 2];

	tree();
	snprintf(link, sizeof(link), "%s/root/linkdir", tmp);
	ck_assert_int_eq(symlink("sub", link), 0);
	/* root and sub: not node_modules, .git, the links */
	ck_assert_uint_eq(index_walk_dirs(&conf, &s, NULL, NULL), 2);
	/* a source that is a link now: not walked, not watched */
	s.path = link;
	ck_assert_uint_eq(index_walk_dirs(&conf, &s, NULL, NULL), 0);
}
END_TEST

static size_t
hits_for(const char *word)
{
	struct kbs *k;
	char seg[PATH_MAX * 2], err[256];
	struct kbi_query q;
	struct kbi_hit hits[4];
	size_t n;

	snprintf(seg, sizeof(seg), "%s/state/segment", tmp);
	ck_assert_ptr_nonnull(k = kbs_open(seg, err, sizeof(err)));
	memset(&q, 0, sizeof(q));
	q.text = word;
	q.len = strlen(q.text);
	q.limit = 4;
	n = kbs_search(k, &q, hits);
	kbs_close(k);
	return n;
}

/*
 * A source swapped for a symbolic link out of its root after it was
 * indexed: the next build (the watcher's, or of every source) walks
 * nothing there and drops what it had; before, it followed the link.
 */
START_TEST(build_source_swapped)
{
	struct index_counts c;
	char a[PATH_MAX * 2], old[PATH_MAX * 2], out[PATH_MAX * 2];
	struct index_src s[2];
	char why[160];

	mk("root/a");
	put("root/a/f.txt", "harmless words\n");
	snprintf(a, sizeof(a), "%s/a", root);
	c = build_of(a, -1);
	ck_assert_uint_eq(c.files, 1);
	snprintf(old, sizeof(old), "%s/a-old", tmp);
	snprintf(out, sizeof(out), "%s/outside", tmp);
	ck_assert_int_eq(rename(a, old), 0);
	ck_assert_int_eq(symlink(out, a), 0);
	c = build_of(a, -1);
	ck_assert_uint_eq(c.files, 0);
	ck_assert_uint_eq(c.read, 0);
	ck_assert_uint_eq(hits_for("swordfish"), 0);
	ck_assert_uint_eq(hits_for("harmless"), 0);
	ck_assert_int_eq(index_src_ok(&conf, a, why, sizeof(why)), 0);
	ck_assert_ptr_nonnull(strstr(why, "symbolic link"));
	/* a link to a directory inside the root is refused too: the path
	 * no longer names what was resolved */
	ck_assert_int_eq(unlink(a), 0);
	ck_assert_int_eq(symlink("sub", a), 0);
	ck_assert_int_eq(index_src_ok(&conf, a, why, sizeof(why)), 0);
	/* the checks of status.json's sources: a root gone on a reload */
	memset(s, 0, sizeof(s));
	s[0].path = strdup(root);
	snprintf(a, sizeof(a), "%s/sub", root);
	s[1].path = strdup(a);
	ck_assert_uint_eq(index_srcs_check(&conf, s, 2), 2);
	rootname.name = a;	/* root's sub only now */
	ck_assert_uint_eq(index_srcs_check(&conf, s, 2), 1);
	ck_assert_str_eq(s[0].path, rootname.name);
	rootname.name = root;
	index_src_clear(&s[0]);
}
END_TEST

/* A FIFO in a file's place since the walk: not opened blocking. */
START_TEST(read_fifo)
{
	struct index_build b;
	struct dcache dc = { .src = -1, .fd = -1 };
	struct wfile f;
	struct stat st;
	char p[PATH_MAX * 2];
	int fd;
	size_t len;

	snprintf(p, sizeof(p), "%s/fifo", root);
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	ck_assert_int_eq(stat(p, &st), 0);
	memset(&b, 0, sizeof(b));
	fd = open(root, O_RDONLY | O_DIRECTORY);
	b.srcfd = &fd;
	memset(&f, 0, sizeof(f));
	f.path = p;
	f.srclen = strlen(root);
	f.dev = st.st_dev;
	f.ino = st.st_ino;
	ck_assert_ptr_null(read_file(&b, &dc, &f, 1 << 20, &len));
	/* and a file beneath a directory swapped for a link is not read */
	snprintf(p, sizeof(p), "%s/sub", root);
	ck_assert_int_eq(rmdir(p), 0);
	ck_assert_int_eq(symlink("../outside", p), 0);
	snprintf(p, sizeof(p), "%s/sub/secret.txt", root);
	ck_assert_int_eq(stat(p, &st), 0);
	f.path = p;
	f.dev = st.st_dev;
	f.ino = st.st_ino;
	ck_assert_ptr_null(read_file(&b, &dc, &f, 1 << 20, &len));
	if (dc.fd != -1)
		close(dc.fd);
	close(fd);
}
END_TEST

/* The state-dir inside a source, however named: not walked. */
START_TEST(build_skips_state)
{
	struct index_counts c;
	char sd[PATH_MAX * 2];

	mk("root/st");
	mk("root/st/sessions");
	put("root/st/sessions/doc", "launch code sekritvalue\n");
	snprintf(sd, sizeof(sd), "%s/root/../root/st", tmp);
	conf.state_dir = sd;
	c = build(-1);
	conf.state_dir = NULL;
	ck_assert_uint_eq(c.files, 1);		/* file.txt */
	ck_assert_uint_eq(hits_for("sekritvalue"), 0);
}
END_TEST

static int
count_cb(void *arg, const char *path)
{
	(void)path;
	(*(int *)arg)++;
	return 0;
}

START_TEST(walk_skips_state)
{
	struct index_src s = { .path = root };
	char state[PATH_MAX * 2];
	int n = 0;

	mk("root/state");
	snprintf(state, sizeof(state), "%s/root/state", tmp);
	conf.state_dir = state;
	ck_assert_uint_eq(index_walk_dirs(&conf, &s, count_cb, &n), 2);
	conf.state_dir = NULL;
	ck_assert_int_eq(n, 2);
}
END_TEST

#define A_C_SHA	"5496cbe9b2588ba917fdfd6ca864ef1605067b7a9a08e5f74ac66016fba60b84"
#define A_C_SHA2 "2c9f774aef55da2559a99765e15d7aac688adebf2e4dddc022e919f550417fac"

/* index_seg_hash of path on the segment built in tmp/state. */
static int
seg_hash(const char *const *roots, size_t nroots, const char *path,
    char hex[65])
{
	struct index_src src = { .path = root };
	char seg[PATH_MAX * 2], err[256];
	struct kbs *k;
	int rc;

	snprintf(seg, sizeof(seg), "%s/state/segment", tmp);
	ck_assert_ptr_nonnull(k = kbs_open(seg, err, sizeof(err)));
	rc = index_seg_hash(k, roots, nroots, &src, 1, path, hex);
	kbs_close(k);
	return rc;
}

START_TEST(file_hash)
{
	char hex[65], abs[PATH_MAX * 2], root2[PATH_MAX * 2];
	const char *roots[2];
	static const char *bad[] = { "", "/", "./a.c", "a.c/", "sub//b.py",
	    "sub/../a.c", "../outside/secret.txt", "..", "." };
	size_t i;

	tree();
	ck_assert_int_eq(build(-1).failed, 0);
	roots[0] = root;
	ck_assert_int_eq(seg_hash(roots, 1, "a.c", hex), 1);
	ck_assert_str_eq(hex, A_C_SHA);
	ck_assert_int_eq(seg_hash(roots, 1, "sub/b.py", hex), 1);
	ck_assert_uint_eq(strlen(hex), 64);
	snprintf(abs, sizeof(abs), "%s/a.c", root);
	ck_assert_int_eq(seg_hash(roots, 1, abs, hex), 1);
	ck_assert_str_eq(hex, A_C_SHA);
	/* held but not judged: binary, too large, excluded, a link */
	ck_assert_int_eq(seg_hash(roots, 1, "bin.dat", hex), 0);
	ck_assert_str_eq(hex, "");
	ck_assert_int_eq(seg_hash(roots, 1, "big.txt", hex), 0);
	ck_assert_int_eq(seg_hash(roots, 1, "node_modules/dep.js", hex), 0);
	ck_assert_int_eq(seg_hash(roots, 1, "secret.txt", hex), 0);
	/* in the indexed directory and gone from disk: removed */
	ck_assert_int_eq(seg_hash(roots, 1, "nothere.c", hex), -1);
	ck_assert_str_eq(hex, "");
	snprintf(abs, sizeof(abs), "%s/outside/nothere.c", tmp);
	ck_assert_int_eq(seg_hash(roots, 1, abs, hex), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(seg_hash(roots, 1, bad[i], hex) == 0, "%s",
		    bad[i]);
	/* no segment: nothing judged */
	ck_assert_int_eq(index_seg_hash(NULL, roots, 1, NULL, 0, "a.c", hex),
	    0);
	/* two roots: the first that holds the path; removal likewise */
	snprintf(root2, sizeof(root2), "%s/root2", tmp);
	put("root2/a.c", "another a.c, not indexed\n");
	roots[0] = root2;
	roots[1] = root;
	ck_assert_int_eq(seg_hash(roots, 2, "a.c", hex), 1);
	ck_assert_str_eq(hex, A_C_SHA);
	ck_assert_int_eq(seg_hash(roots, 2, "nothere.c", hex), -1);
	/* a change the next build indexes, then a removal */
	put("root/a.c", "int\nmain(void)\n{\n\treturn 0;\n}\n");
	ck_assert_int_eq(build(-1).failed, 0);
	ck_assert_int_eq(seg_hash(roots, 2, "a.c", hex), 1);
	ck_assert_str_eq(hex, A_C_SHA2);
	snprintf(abs, sizeof(abs), "%s/a.c", root);
	ck_assert_int_eq(unlink(abs), 0);
	ck_assert_int_eq(seg_hash(roots, 2, "a.c", hex), 1);	/* not yet */
	ck_assert_int_eq(build(-1).failed, 0);
	ck_assert_int_eq(seg_hash(roots, 2, "a.c", hex), -1);
	/* the removed file comes back: not indexed yet, not judged */
	put("root/a.c", "back\n");
	ck_assert_int_eq(seg_hash(roots, 2, "a.c", hex), 0);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, under_boundary);
	tcase_add_test(tc, resolve_paths);
	tcase_add_test(tc, globs);
	tcase_add_test(tc, wanted);
	tcase_add_test(tc, throttle);
	tcase_add_test(tc, parse_body);
	tcase_add_test(tc, build_incremental);
	tcase_add_test(tc, walk_dirs);
	tcase_add_test(tc, walk_skips_state);
	tcase_add_test(tc, globs_bounded);
	tcase_add_test(tc, build_source_swapped);
	tcase_add_test(tc, read_fifo);
	tcase_add_test(tc, build_skips_state);
	tcase_add_test(tc, file_hash);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
