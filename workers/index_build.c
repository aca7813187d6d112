/*
 * The directory index's build: which paths may be indexed (under an
 * index root, after realpath), which files a source takes (its globs and
 * the default excludes), and the thread that walks the sources and
 * writes a new segment, reusing what the current one has of every file
 * whose size and mtime, or else content hash, did not change.
 */
#include <sys/types.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/kbindex.h"
#include "parley/kbseg.h"
#include "parley/kbtext.h"
#include "parley/log.h"
#include "parley/util.h"
#include "embed.h"
#include "index_int.h"

int
index_under(const char *root, const char *path)
{
	size_t n = strlen(root);

	/* "/" is every absolute path's root. */
	if (n == 1 && root[0] == '/')
		return path[0] == '/';
	return strncmp(root, path, n) == 0 &&
	    (path[n] == '\0' || path[n] == '/');
}

/*
 * path made canonical without the file system: ".", ".." and repeated
 * '/' removed (".." above "/" stays at "/").  0, or -1 when it does not
 * fit out.
 */
static int
lexical(const char *path, char out[PATH_MAX])
{
	const char *s = path, *e;
	size_t n = 0, l;

	while (*s != '\0') {
		while (*s == '/')
			s++;
		if (*s == '\0')
			break;
		e = strchr(s, '/');
		l = e != NULL ? (size_t)(e - s) : strlen(s);
		if (l == 1 && s[0] == '.')
			;
		else if (l == 2 && s[0] == '.' && s[1] == '.') {
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
		} else {
			if (n + 1 + l >= PATH_MAX)
				return -1;
			out[n++] = '/';
			memcpy(out + n, s, l);
			n += l;
		}
		s += l;
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return 0;
}

/* The state directory's real path (as written when it cannot be
 * resolved), or "" when conf has none. */
static void
state_real(const struct config *conf, char out[PATH_MAX])
{
	out[0] = '\0';
	if (conf->state_dir == NULL)
		return;
	if (realpath(conf->state_dir, out) == NULL &&
	    lexical(conf->state_dir, out) == -1)
		out[0] = '\0';
}

/* Whether real (a real path) is at or under the state directory. */
static int
in_state(const struct config *conf, const char *real)
{
	char sd[PATH_MAX];

	state_real(conf, sd);
	return sd[0] != '\0' && index_under(sd, real);
}

static int
under_a_root(const struct config *conf, const char *path)
{
	const struct cfg_name *r;

	TAILQ_FOREACH(r, &conf->index_roots, entry)
		if (index_under(r->name, path))
			return 1;
	return 0;
}

int
index_resolve(const struct config *conf, const char *path,
    char real[PATH_MAX], int *status, char *msg, size_t msglen)
{
	char lex[PATH_MAX];
	struct stat st;

	*status = 400;
	if (TAILQ_EMPTY(&conf->index_roots)) {
		*status = 403;
		snprintf(msg, msglen, "indexing is off on this server: its "
		    "configuration has no index-root (parleyd.conf(5), "
		    "KNOWLEDGE)");
		return -1;
	}
	if (path[0] != '/') {
		snprintf(msg, msglen, "field 'path' must be an absolute path "
		    "(it was '%.200s')", path);
		return -1;
	}
	if (strlen(path) >= PATH_MAX || lexical(path, lex) == -1) {
		snprintf(msg, msglen, "field 'path' is longer than %d bytes",
		    PATH_MAX - 1);
		return -1;
	}
	/*
	 * Out of every root as written: refused before the file system is
	 * asked, so the answer says nothing of what exists there; and one
	 * message for that and for a link leading out (the resolved path
	 * is never shown: it would tell where the link goes).
	 */
	*status = 403;
	if (!under_a_root(conf, lex))
		goto out;
	if (realpath(path, real) == NULL) {
		*status = errno == ENOENT || errno == ENOTDIR ? 404 : 403;
		snprintf(msg, msglen, "path '%.200s' cannot be resolved: %s",
		    path, strerror(errno));
		return -1;
	}
	if (!under_a_root(conf, real))
		goto out;
	if (in_state(conf, real) || in_state(conf, lex)) {
		snprintf(msg, msglen, "path '%.200s' is this server's "
		    "state-dir or inside it (sessions' documents and logs "
		    "must not be indexed); index a directory beside it", path);
		return -1;
	}
	if (stat(real, &st) == -1 || !S_ISDIR(st.st_mode)) {
		*status = 400;
		snprintf(msg, msglen, "path '%.200s' is not a directory; "
		    "index the directory that holds it", path);
		return -1;
	}
	return 0;
out:
	snprintf(msg, msglen, "path '%.200s' is not under an index-root of "
	    "this server (a symbolic link leading out of one counts as "
	    "out); index a directory under one of them", path);
	return -1;
}

int
index_src_ok(const struct config *conf, const char *path, char *why,
    size_t whylen)
{
	char real[PATH_MAX];

	if (!under_a_root(conf, path)) {
		snprintf(why, whylen, "no index-root holds it any more");
		return 0;
	}
	if (in_state(conf, path)) {
		snprintf(why, whylen, "it is in the state-dir");
		return 0;
	}
	/* Gone (for now): kept, it walks as empty. */
	if (realpath(path, real) == NULL)
		return 1;
	if (strcmp(real, path) != 0) {
		snprintf(why, whylen, "it is a symbolic link now, or a "
		    "directory above it is (it resolves to another path)");
		return 0;
	}
	return 1;
}

size_t
index_srcs_check(const struct config *conf, struct index_src *s, size_t n)
{
	char why[128];
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (!index_src_ok(conf, s[i].path, why, sizeof(why))) {
			log_warnx("index: %s dropped from the index: %s",
			    s[i].path, why);
			index_src_clear(&s[i]);
			continue;
		}
		if (k != i) {
			s[k] = s[i];
			memset(&s[i], 0, sizeof(s[i]));
		}
		k++;
	}
	return k;
}

/*
 * Opens rel (components separated by '/', none "." or "..") beneath
 * directory dfd, no component followed if it is a symbolic link: every
 * directory with O_DIRECTORY | O_NOFOLLOW, the last with flags |
 * O_NOFOLLOW.  An fd, or -1 (errno set).
 */
static int
open_beneath(int dfd, const char *rel, int flags)
{
	char comp[NAME_MAX + 1];
	const char *s = rel, *e;
	size_t l;
	int fd = dfd, nfd;

	for (;;) {
		while (*s == '/')
			s++;
		e = strchr(s, '/');
		l = e != NULL ? (size_t)(e - s) : strlen(s);
		if (l == 0 || l > NAME_MAX || (l == 1 && s[0] == '.') ||
		    (l == 2 && s[0] == '.' && s[1] == '.')) {
			if (fd != dfd)
				close(fd);
			errno = EINVAL;
			return -1;
		}
		memcpy(comp, s, l);
		comp[l] = '\0';
		s += l;
		while (*s == '/')
			s++;
		if (*s == '\0')
			break;
		nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (fd != dfd)
			close(fd);
		if (nfd == -1)
			return -1;
		fd = nfd;
	}
	nfd = openat(fd, comp, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd != dfd)
		close(fd);
	return nfd;
}

/*
 * Opens source path for a walk after checking it again (index_src_ok):
 * from "/" one component at a time, none a symbolic link, so a source
 * (or a directory above it) swapped for a link since it was resolved
 * is not followed out of its root.  An fd, or -1 logged.
 */
static int
src_open(const struct config *conf, const char *path)
{
	char why[160];
	int root, fd;

	if (!index_src_ok(conf, path, why, sizeof(why))) {
		log_warnx("index: %s not walked: %s", path, why);
		return -1;
	}
	if (strcmp(path, "/") == 0)
		return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if ((root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	fd = open_beneath(root, path + 1, O_RDONLY | O_DIRECTORY);
	if (fd == -1 && errno != ENOENT)
		log_warn("index: %s not walked (a symbolic link in it?)",
		    path);
	close(root);
	return fd;
}

/* The end of the segment at s (before e): its '/' or e. */
static const char *
seg_end(const char *s, const char *e)
{
	const char *n = memchr(s, '/', (size_t)(e - s));

	return n != NULL ? n : e;
}

/* The segment after the one at s that ends at se. */
static const char *
seg_next(const char *se, const char *e)
{
	return se < e ? se + 1 : e;
}

static int
is_stars(const char *s, const char *se)
{
	return se - s == 2 && s[0] == '*' && s[1] == '*';
}

/* One pattern segment [p, pe) against one path segment [r, re). */
static int
seg_match(const char *p, const char *pe, const char *r, const char *re)
{
	char ps[INDEX_GLOB_MAX + 1], rs[NAME_MAX + 1];
	size_t pl = (size_t)(pe - p), rl = (size_t)(re - r);

	if (pl > INDEX_GLOB_MAX || rl > NAME_MAX)
		return 0;
	memcpy(ps, p, pl);
	ps[pl] = '\0';
	memcpy(rs, r, rl);
	rs[rl] = '\0';
	return fnmatch(ps, rs, 0) == 0;
}

/*
 * pat's segments [p, pe) against rel's [r, re), "**" standing for any
 * number of segments.  Every other segment matches exactly one, so the
 * last "**" seen is the only one to go back to (as with '*' in a
 * wildcard match of characters): at most segments(pat) * segments(rel)
 * comparisons, where trying every split of every "**" was exponential
 * in their number.
 */
static int
glob_segs(const char *p, const char *pe, const char *r, const char *re)
{
	const char *sp = NULL, *sr = NULL, *pse, *rse;

	while (r < re) {
		if (p < pe) {
			pse = seg_end(p, pe);
			if (is_stars(p, pse)) {
				/* first: "**" as no segment */
				sp = p = seg_next(pse, pe);
				sr = r;
				continue;
			}
			rse = seg_end(r, re);
			if (seg_match(p, pse, r, rse)) {
				p = seg_next(pse, pe);
				r = seg_next(rse, re);
				continue;
			}
		}
		if (sp == NULL)
			return 0;
		/* the last "**" takes one more segment */
		sr = seg_next(seg_end(sr, re), re);
		r = sr;
		p = sp;
	}
	while (p < pe && is_stars(p, seg_end(p, pe)))
		p = seg_next(seg_end(p, pe), pe);
	return p >= pe;
}

/* The "**" segments of pat, a run of them counted once. */
static unsigned
glob_stars(const char *pat)
{
	const char *p = pat, *pe = pat + strlen(pat), *se;
	unsigned n = 0;
	int prev = 0;

	while (p < pe) {
		se = seg_end(p, pe);
		if (is_stars(p, se)) {
			n += !prev;
			prev = 1;
		} else
			prev = 0;
		p = seg_next(se, pe);
	}
	return n;
}

int
index_glob(const char *pat, const char *rel)
{
	const char *base;

	if (strchr(pat, '/') == NULL) {
		base = strrchr(rel, '/');
		return fnmatch(pat, base != NULL ? base + 1 : rel, 0) == 0;
	}
	if (pat[0] == '/')
		pat++;
	return glob_segs(pat, pat + strlen(pat), rel, rel + strlen(rel));
}

/* An include names directory rel: matches it or starts with "rel/". */
static int
named(const struct index_src *s, const char *rel)
{
	size_t i, n = strlen(rel);

	for (i = 0; i < s->ninc; i++)
		if (index_glob(s->inc[i], rel) ||
		    (strncmp(s->inc[i], rel, n) == 0 && s->inc[i][n] == '/'))
			return 1;
	return 0;
}

int
index_wanted(const struct index_src *s, const char *rel, int isdir)
{
	const char *base = strrchr(rel, '/');
	size_t i;

	base = base != NULL ? base + 1 : rel;
	for (i = 0; i < s->nexc; i++)
		if (index_glob(s->exc[i], rel))
			return 0;
	if (isdir)
		return !(base[0] == '.' || strcmp(base, "node_modules") == 0) ||
		    named(s, rel);
	if (s->ninc == 0)
		return 1;
	for (i = 0; i < s->ninc; i++)
		if (index_glob(s->inc[i], rel))
			return 1;
	return 0;
}

int
index_throttle(uint64_t *last, uint64_t now, uint64_t every)
{
	if (*last != 0 && now - *last < every)
		return 0;
	*last = now;
	return 1;
}

void
index_src_clear(struct index_src *s)
{
	size_t i;

	free(s->path);
	for (i = 0; i < s->ninc; i++)
		free(s->inc[i]);
	for (i = 0; i < s->nexc; i++)
		free(s->exc[i]);
	free(s->inc);
	free(s->exc);
	memset(s, 0, sizeof(*s));
}

void
index_srcs_free(struct index_src *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		index_src_clear(&s[i]);
	free(s);
}

/* An array of pattern strings into *out: 0, or -1 with msg. */
static int
globs_from(const cJSON *a, const char *field, char ***out, size_t *n,
    char *msg, size_t msglen)
{
	const cJSON *e;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (a == NULL || cJSON_IsNull(a))
		return 0;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > INDEX_GLOBS_MAX) {
		snprintf(msg, msglen, "field '%s' must be an array of at most "
		    "%d glob patterns", field, INDEX_GLOBS_MAX);
		return -1;
	}
	if ((*out = calloc((size_t)cJSON_GetArraySize(a) + 1,
	    sizeof(**out))) == NULL) {
		snprintf(msg, msglen, "out of memory; retry");
		return -1;
	}
	cJSON_ArrayForEach(e, a) {
		if (!cJSON_IsString(e) || e->valuestring[0] == '\0' ||
		    strlen(e->valuestring) > INDEX_GLOB_MAX) {
			snprintf(msg, msglen, "field '%s': each pattern must be "
			    "a string of 1 to %d bytes", field, INDEX_GLOB_MAX);
			goto fail;
		}
		if (glob_stars(e->valuestring) > INDEX_GLOB_STARS) {
			snprintf(msg, msglen, "field '%s': pattern '%.64s' has "
			    "more than %d \"**\" segments (apart); use at most "
			    "%d", field, e->valuestring, INDEX_GLOB_STARS,
			    INDEX_GLOB_STARS);
			goto fail;
		}
		if (((*out)[k] = strdup(e->valuestring)) == NULL) {
			snprintf(msg, msglen, "out of memory; retry");
			goto fail;
		}
		k++;
	}
	*n = k;
	return 0;
fail:
	while (k > 0)
		free((*out)[--k]);
	free(*out);
	*out = NULL;
	return -1;
}

int
index_src_parse(const struct config *conf, const cJSON *body,
    struct index_src *src, int *status, char *msg, size_t msglen)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "path");
	char real[PATH_MAX];

	memset(src, 0, sizeof(*src));
	*status = 400;
	if (!cJSON_IsObject(body)) {
		snprintf(msg, msglen, "the body must be a JSON object "
		    "{\"path\": \"/dir\", \"include\": [...], \"exclude\": "
		    "[...]}");
		return -1;
	}
	if (!cJSON_IsString(p) || p->valuestring[0] == '\0') {
		snprintf(msg, msglen, "field 'path' is missing: give the "
		    "absolute path of a directory under an index-root");
		return -1;
	}
	if (index_resolve(conf, p->valuestring, real, status, msg,
	    msglen) == -1)
		return -1;
	*status = 400;
	if (globs_from(cJSON_GetObjectItemCaseSensitive(body, "include"),
	    "include", &src->inc, &src->ninc, msg, msglen) == -1)
		return -1;
	if (globs_from(cJSON_GetObjectItemCaseSensitive(body, "exclude"),
	    "exclude", &src->exc, &src->nexc, msg, msglen) == -1 ||
	    (src->path = strdup(real)) == NULL) {
		if (src->path == NULL && src->exc != NULL)
			snprintf(msg, msglen, "out of memory; retry");
		index_src_clear(src);
		return -1;
	}
	return 0;
}

struct index_src *
index_srcs_from(const cJSON *a, size_t *n)
{
	struct index_src *s;
	const cJSON *e;
	char msg[128];
	size_t k = 0;

	*n = 0;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0)
		return NULL;
	if ((s = calloc((size_t)cJSON_GetArraySize(a), sizeof(*s))) == NULL)
		return NULL;
	cJSON_ArrayForEach(e, a) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "path");

		if (!cJSON_IsString(p) || k >= INDEX_SOURCES_MAX)
			continue;
		if ((s[k].path = strdup(p->valuestring)) == NULL ||
		    globs_from(cJSON_GetObjectItemCaseSensitive(e, "include"),
		    "include", &s[k].inc, &s[k].ninc, msg, sizeof(msg)) ||
		    globs_from(cJSON_GetObjectItemCaseSensitive(e, "exclude"),
		    "exclude", &s[k].exc, &s[k].nexc, msg, sizeof(msg))) {
			index_src_clear(&s[k]);
			continue;
		}
		k++;
	}
	if ((*n = k) == 0) {
		free(s);
		return NULL;
	}
	return s;
}

cJSON *
index_srcs_json(const struct index_src *s, size_t n)
{
	cJSON *a = cJSON_CreateArray(), *o, *g;
	size_t i, j;

	for (i = 0; i < n; i++) {
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "path", s[i].path);
		g = cJSON_AddArrayToObject(o, "include");
		for (j = 0; j < s[i].ninc; j++)
			cJSON_AddItemToArray(g, cJSON_CreateString(s[i].inc[j]));
		g = cJSON_AddArrayToObject(o, "exclude");
		for (j = 0; j < s[i].nexc; j++)
			cJSON_AddItemToArray(g, cJSON_CreateString(s[i].exc[j]));
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

char *
index_status_text(const char *dir)
{
	char path[PATH_MAX + 16], *buf = NULL;
	struct stat st;
	size_t off = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/status.json", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	if (fstat(fd, &st) == 0 && st.st_size > 0 &&
	    st.st_size <= INDEX_STATUS_MAX &&
	    (buf = malloc((size_t)st.st_size + 1)) != NULL) {
		while (off < (size_t)st.st_size && (n = read(fd, buf + off,
		    (size_t)st.st_size - off)) > 0)
			off += (size_t)n;
		buf[off] = '\0';
	}
	close(fd);
	return buf;
}

/* ---- the walk ---- */

/* A file the walk found. */
struct wfile {
	char		*path;
	int		 src;
	size_t		 srclen;	/* its source's path's */
	off_t		 size;
	int64_t		 mtime_ns;
	dev_t		 dev;
	ino_t		 ino;
};

struct walk {
	struct index_build	*b;
	const struct index_src	*src;
	int			 srcno;
	int			 skip;		/* skip_dev/ino are set */
	dev_t			 skip_dev;	/* the state-dir's */
	ino_t			 skip_ino;
	struct wfile		*files;
	size_t			 n, cap;
	int			 full;		/* index-max-files reached */
	int			 (*dirfn)(void *, const char *);
	void			*arg;
	size_t			 ndirs;
	int			 stop;
};

/* Counts one more of what (a field of b->c). */
static void
bump(struct index_build *b, unsigned *what)
{
	pthread_mutex_lock(&b->mu);
	(*what)++;
	pthread_mutex_unlock(&b->mu);
}

/*
 * Walks directory fd (path, rel to the source: "" for the source) at
 * depth; closes fd.  Symbolic links are never followed: lstat-like
 * fstatat and O_NOFOLLOW opens, so none leads out of the source.
 */
static void
walk_dir(struct walk *w, int fd, const char *path, const char *rel,
    int depth)
{
	DIR *d;
	struct dirent *de;
	struct stat st;
	char cpath[PATH_MAX], crel[PATH_MAX];
	int cfd;

	w->ndirs++;
	if (w->dirfn != NULL) {
		if (w->dirfn(w->arg, path) != 0) {
			w->stop = 1;
			close(fd);
			return;
		}
	}
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while (!w->stop && (de = readdir(d)) != NULL) {
		if (w->b != NULL && w->b->cancel)
			break;
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (snprintf(cpath, sizeof(cpath), "%s/%s", strcmp(path, "/") ?
		    path : "", de->d_name) >= (int)sizeof(cpath) ||
		    snprintf(crel, sizeof(crel), "%s%s%s", rel, rel[0] ? "/" :
		    "", de->d_name) >= (int)sizeof(crel))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) == -1)
			continue;
		if (S_ISLNK(st.st_mode)) {
			if (w->b != NULL)
				bump(w->b, &w->b->c.symlinks);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			/* Never the state-dir, however it is named: it holds
			 * every session's documents and logs. */
			if (depth + 1 > INDEX_DEPTH_MAX || (w->skip &&
			    st.st_dev == w->skip_dev &&
			    st.st_ino == w->skip_ino) ||
			    !index_wanted(w->src, crel, 1))
				continue;
			cfd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd != -1)
				walk_dir(w, cfd, cpath, crel, depth + 1);
			continue;
		}
		if (!S_ISREG(st.st_mode) || w->b == NULL ||
		    !index_wanted(w->src, crel, 0))
			continue;
		if (w->n >= w->b->conf->index_max_files) {
			w->full = 1;
			continue;
		}
		if (w->n == w->cap) {
			size_t ncap = w->cap ? w->cap * 2 : 256;
			struct wfile *nf = reallocarray(w->files, ncap,
			    sizeof(*nf));

			if (nf == NULL)
				continue;
			w->files = nf;
			w->cap = ncap;
		}
		if ((w->files[w->n].path = strdup(cpath)) == NULL)
			continue;
		w->files[w->n].src = w->srcno;
		w->files[w->n].srclen = strlen(w->src->path);
		w->files[w->n].size = st.st_size;
		w->files[w->n].mtime_ns = (int64_t)st.st_mtim.tv_sec *
		    1000000000 + st.st_mtim.tv_nsec;
		w->files[w->n].dev = st.st_dev;
		w->files[w->n].ino = st.st_ino;
		w->n++;
	}
	closedir(d);
}

/* The state-dir's identity, skipped by the walk (none: nothing). */
static void
walk_skip(struct walk *w, const struct config *conf)
{
	struct stat st;

	w->skip = conf->state_dir != NULL &&
	    stat(conf->state_dir, &st) == 0;
	if (w->skip) {
		w->skip_dev = st.st_dev;
		w->skip_ino = st.st_ino;
	}
}

/*
 * Walks w->src from srcfd (src_open's, kept: the build reads the files
 * beneath it); -1: nothing.
 */
static void
walk_src(struct walk *w, int srcfd)
{
	int fd;

	if (srcfd == -1 || (fd = openat(srcfd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1)
		return;
	walk_dir(w, fd, w->src->path, "", 0);
}

size_t
index_walk_dirs(const struct config *conf, const struct index_src *src,
    int (*fn)(void *, const char *), void *arg)
{
	struct walk w;
	int fd;

	memset(&w, 0, sizeof(w));
	w.src = src;
	walk_skip(&w, conf);
	w.dirfn = fn;
	w.arg = arg;
	if ((fd = src_open(conf, src->path)) != -1) {
		walk_src(&w, fd);
		close(fd);
	}
	return w.ndirs;
}

/* By path; for one path, the entry of the innermost source first. */
static int
wfile_cmp(const void *a, const void *b)
{
	const struct wfile *fa = a, *fb = b;
	int c = strcmp(fa->path, fb->path);

	return c != 0 ? c : (fa->srclen < fb->srclen) - (fa->srclen >
	    fb->srclen);
}

/*
 * Whether source srcno owns path: no other source holding it is deeper,
 * so a file under two sources (one inside the other) is always the inner
 * one's, with its patterns.
 */
static int
owns(const struct index_build *b, int srcno, const char *path)
{
	size_t i, n = strlen(b->srcs[srcno].path);

	for (i = 0; i < b->nsrcs; i++)
		if ((int)i != srcno && strlen(b->srcs[i].path) > n &&
		    index_under(b->srcs[i].path, path))
			return 0;
	return 1;
}

/* ---- the build ---- */

/* Tells the loop, at most every INDEX_PROGRESS_MS unless force. */
static void
wake(struct index_build *b, int force)
{
	char x = 'p';

	/* under b->mu */
	if (index_throttle(&b->woke_ms, util_mono_ms(), INDEX_PROGRESS_MS) ||
	    force) {
		if (write(b->wake_fd, &x, 1) == -1) {
			/* a full pipe already wakes the loop */
		}
	}
}

/*
 * The directory the build last read a file from (files come sorted by
 * path, so mostly the same one), opened beneath its source's fd.
 */
struct dcache {
	int		 src;
	char		 rel[PATH_MAX];	/* "" for the source itself */
	int		 fd;		/* -1: none */
};

/*
 * Opens f beneath its source's fd (b->srcfd), no component followed if
 * it is a symbolic link, and without blocking (a FIFO or a device put
 * in a file's place since the walk would hang the thread in open).
 */
static int
file_open(struct index_build *b, struct dcache *dc, const struct wfile *f)
{
	const char *rel = f->path + f->srclen, *slash;
	size_t dl;

	while (*rel == '/')
		rel++;
	slash = strrchr(rel, '/');
	dl = slash != NULL ? (size_t)(slash - rel) : 0;
	if (dl >= sizeof(dc->rel) || b->srcfd == NULL ||
	    b->srcfd[f->src] == -1)
		return -1;
	if (dc->fd == -1 || dc->src != f->src || strlen(dc->rel) != dl ||
	    strncmp(dc->rel, rel, dl) != 0) {
		if (dc->fd != -1)
			close(dc->fd);
		memcpy(dc->rel, rel, dl);
		dc->rel[dl] = '\0';
		dc->src = f->src;
		dc->fd = dl == 0 ? openat(b->srcfd[f->src], ".", O_RDONLY |
		    O_DIRECTORY | O_CLOEXEC) : open_beneath(b->srcfd[f->src],
		    dc->rel, O_RDONLY | O_DIRECTORY);
		if (dc->fd == -1)
			return -1;
	}
	return openat(dc->fd, slash != NULL ? slash + 1 : rel, O_RDONLY |
	    O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

/* Reads a whole regular file of at most max bytes: malloc'd, or NULL. */
static char *
read_file(struct index_build *b, struct dcache *dc, const struct wfile *f,
    size_t max, size_t *len)
{
	struct stat st;
	char *buf;
	size_t off = 0;
	ssize_t n;
	int fd;

	if ((fd = file_open(b, dc, f)) == -1)
		return NULL;
	/* The same file the walk saw: no directory swapped for a link. */
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_dev != f->dev || st.st_ino != f->ino ||
	    (size_t)st.st_size > max ||
	    (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return NULL;
	}
	while (off < (size_t)st.st_size && !b->cancel &&
	    (n = read(fd, buf + off, (size_t)st.st_size - off)) > 0)
		off += (size_t)n;
	close(fd);
	buf[off] = '\0';
	*len = off;
	return buf;
}

/*
 * A document's meta: the file's hash, size, mtime and source; a binary
 * file is kept as a document without chunks whose meta says "binary", so
 * a build need not read it again while its size and mtime stay.
 */
static char *
meta_text(const char *sha, const struct wfile *f, const char *source)
{
	cJSON *o = cJSON_CreateObject();
	char *t, ns[24];

	if (sha != NULL)
		cJSON_AddStringToObject(o, "sha256", sha);
	else
		cJSON_AddBoolToObject(o, "binary", 1);
	cJSON_AddNumberToObject(o, "size", (double)f->size);
	/* A string: nanoseconds since 1970 need more than a double's 53
	 * bits, and cJSON prints 15 digits when they read back "close". */
	snprintf(ns, sizeof(ns), "%lld", (long long)f->mtime_ns);
	cJSON_AddStringToObject(o, "mtimeNs", ns);
	cJSON_AddStringToObject(o, "source", source);
	t = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return t;
}

/* An old document's meta. */
struct ometa {
	char		 sha[65];	/* "" for a binary file */
	int		 binary;
	double		 size;
	int64_t		 mtime;
	char		 source[PATH_MAX];
};

static int
meta_parse(const char *meta, struct ometa *m)
{
	cJSON *o = cJSON_Parse(meta);
	const char *s, *src;

	memset(m, 0, sizeof(*m));
	s = cJSON_GetStringValue(cJSON_GetObjectItem(o, "sha256"));
	src = cJSON_GetStringValue(cJSON_GetObjectItem(o, "source"));
	m->binary = cJSON_IsTrue(cJSON_GetObjectItem(o, "binary"));
	if ((s == NULL && !m->binary) || src == NULL) {
		cJSON_Delete(o);
		return -1;
	}
	snprintf(m->sha, sizeof(m->sha), "%s", s != NULL ? s : "");
	snprintf(m->source, sizeof(m->source), "%s", src);
	m->size = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "size"));
	s = cJSON_GetStringValue(cJSON_GetObjectItem(o, "mtimeNs"));
	m->mtime = s != NULL ? strtoll(s, NULL, 10) : -1;
	cJSON_Delete(o);
	return 0;
}

/* Whether the build re-indexes source path (else it keeps its docs). */
static int
is_target(const struct index_build *b, const char *source)
{
	size_t i;

	if (b->target >= 0)
		return strcmp(b->srcs[b->target].path, source) == 0;
	for (i = 0; i < b->nsrcs; i++)
		if (strcmp(b->srcs[i].path, source) == 0)
			return 1;
	return 0;
}

static int
known_source(const struct index_build *b, const char *source)
{
	size_t i;

	for (i = 0; i < b->nsrcs; i++)
		if (strcmp(b->srcs[i].path, source) == 0)
			return 1;
	return 0;
}

static void
build_fail(struct index_build *b, const char *fmt, const char *arg)
{
	pthread_mutex_lock(&b->mu);
	b->c.failed = 1;
	snprintf(b->c.err, sizeof(b->c.err), fmt, arg);
	pthread_mutex_unlock(&b->mu);
}

/*
 * Chunks waiting for their vectors (an embedder is configured): sent in
 * requests of EMBED_BATCH_MAX texts across files, not one per file.
 */
struct pending {
	uint32_t	 id[EMBED_BATCH_MAX];
	char		*text[EMBED_BATCH_MAX];
	size_t		 len[EMBED_BATCH_MAX];
	size_t		 n, bytes;
};

/* Asks the embedder for the pending chunks' vectors and sets them. */
static void
embed_flush(struct index_build *b, struct kbi *ix)
{
	struct pending *p = b->pend;
	float *vecs = NULL;
	unsigned dim = 0;
	char err[200];
	size_t i = 0;

	if (p == NULL || p->n == 0)
		return;
	/* The worker exits: no new request (one under way has its own
	 * timeout). */
	if (b->cancel) {
		for (i = 0; i < p->n; i++)
			free(p->text[i]);
		p->n = 0;
		p->bytes = 0;
		return;
	}
	if (embed_sync(b->conf->embedder, (const char *const *)p->text,
	    p->len, p->n, &vecs, &dim, err, sizeof(err)) == 0) {
		for (i = 0; i < p->n; i++)
			if (kbi_vec_set(ix, p->id[i], vecs + i * dim,
			    dim) == -1)
				break;
		if (i < p->n)
			snprintf(err, sizeof(err), "vectors of %u dimensions "
			    "do not fit the index's %u (the embedder's model "
			    "changed?): DELETE /api/index and index again",
			    dim, kbi_dim(ix));
	}
	if (vecs == NULL || i < p->n) {
		pthread_mutex_lock(&b->mu);
		b->c.unembedded += (unsigned)p->n;
		snprintf(b->c.embed_err, sizeof(b->c.embed_err), "%s", err);
		pthread_mutex_unlock(&b->mu);
	}
	free(vecs);
	for (i = 0; i < p->n; i++)
		free(p->text[i]);
	p->n = 0;
	p->bytes = 0;
}

/* Queues chunk id's text for a vector. */
static void
embed_add(struct index_build *b, struct kbi *ix, uint32_t id,
    const char *text, size_t len)
{
	struct pending *p = b->pend;

	if (p == NULL)
		return;
	if (p->n == EMBED_BATCH_MAX || p->bytes + len > EMBED_BODY_MAX / 2)
		embed_flush(b, ix);
	if ((p->text[p->n] = malloc(len ? len : 1)) == NULL)
		return;
	memcpy(p->text[p->n], text, len);
	p->len[p->n] = len;
	p->id[p->n++] = id;
	p->bytes += len;
}

/* Indexes the text of one file into doc: its chunks. 0, or -1. */
static int
add_chunks(struct index_build *b, struct kbi *ix, int doc, const char *text,
    size_t len)
{
	struct kbt_chunk *ch = NULL;
	size_t n, i;
	int id;

	n = kbt_chunks(text, len, KBT_CHUNK_BYTES, &ch);
	if (n == (size_t)-1)
		return -1;
	for (i = 0; i < n; i++) {
		if ((id = kbi_chunk_add(ix, doc, text + ch[i].off, ch[i].len,
		    ch[i].line_first, ch[i].line_last)) == -1) {
			free(ch);
			return -1;
		}
		embed_add(b, ix, (uint32_t)id, text + ch[i].off, ch[i].len);
	}
	free(ch);
	return 0;
}

/* Adds a document for f: meta and, for a text, its chunks.  0, or -1. */
static int
add_doc(struct index_build *b, struct kbi *ix, const struct wfile *f,
    const char *sha, const char *text, size_t len)
{
	char *meta;
	int doc;

	if ((meta = meta_text(sha, f, b->srcs[f->src].path)) == NULL)
		return -1;
	doc = kbi_doc_add(ix, f->path, meta);
	free(meta);
	if (doc == -1)
		return -1;
	if (text != NULL && add_chunks(b, ix, doc, text, len) == -1) {
		kbi_doc_remove(ix, f->path);
		return -1;
	}
	return 0;
}

/* The files (not binary) the new index holds. */
static size_t
nfiles(const struct index_build *b, const struct kbi *ix)
{
	return kbi_ndocs(ix) - b->nbinary;
}

/*
 * Handles one walked file: copied from the old segment when its size
 * and mtime (else its hash) did not change, else read and indexed.
 * *dirty: the new index differs from the old.
 */
static void
one_file(struct index_build *b, const struct kbs *old, struct kbi *ix,
    struct dcache *dc, const struct wfile *f, int *dirty)
{
	const char *name, *ometa, *source = b->srcs[f->src].path;
	struct ometa om;
	uint32_t first, n;
	char sha[65], *text;
	size_t len;
	int i = -1, have = 0;

	if ((size_t)f->size > b->conf->index_max_file) {
		bump(b, &b->c.too_large);
		return;
	}
	if (kbi_bytes(ix) + (size_t)f->size > b->conf->index_max_bytes ||
	    nfiles(b, ix) >= b->conf->index_max_files) {
		pthread_mutex_lock(&b->mu);
		if (b->c.stopped[0] == '\0')
			snprintf(b->c.stopped, sizeof(b->c.stopped), "stopped: "
			    "bound reached (index-max-%s); raise it in "
			    "parleyd.conf or index less", nfiles(b, ix) >=
			    b->conf->index_max_files ? "files" : "bytes");
		pthread_mutex_unlock(&b->mu);
		return;
	}
	/* Another source's copy of the same file gives way to this one. */
	if (kbi_doc_find(ix, f->path) >= 0)
		kbi_doc_remove(ix, f->path);
	if (old != NULL && (i = kbs_doc_find(old, f->path)) >= 0 &&
	    kbs_doc_get(old, (size_t)i, &name, &ometa, &first, &n) == 0 &&
	    meta_parse(ometa, &om) == 0)
		have = 1;
	if (have && om.size == (double)f->size &&
	    om.mtime == f->mtime_ns && strcmp(om.source, source) == 0 &&
	    kbs_copy_doc(old, (size_t)i, ix, ometa) == 0) {
		if (om.binary) {
			b->nbinary++;
			bump(b, &b->c.binary);
		}
		return;
	}
	if (b->cancel)
		return;
	if ((text = read_file(b, dc, f, b->conf->index_max_file,
	    &len)) == NULL) {
		bump(b, &b->c.unreadable);
		if (i >= 0)
			*dirty = 1;
		return;
	}
	bump(b, &b->c.read);
	*dirty = 1;
	if (!kbt_is_text(text, len < KBT_SNIFF ? len : KBT_SNIFF)) {
		bump(b, &b->c.binary);
		if (add_doc(b, ix, f, NULL, NULL, 0) == 0)
			b->nbinary++;
		free(text);
		return;
	}
	kbt_sha256(text, len, sha);
	if (have && !om.binary && strcmp(om.sha, sha) == 0) {
		/* Touched, not changed: kept, with its new stat. */
		char *meta = meta_text(sha, f, source);

		if (meta != NULL && kbs_copy_doc(old, (size_t)i, ix,
		    meta) == 0) {
			free(meta);
			free(text);
			return;
		}
		free(meta);
	}
	if (add_doc(b, ix, f, sha, text, len) == -1)
		build_fail(b, "out of memory indexing %s", f->path);
	else if (have && !om.binary)
		bump(b, &b->c.changed);
	else
		bump(b, &b->c.added);
	free(text);
}

/* Copies the old documents of sources this build does not redo. */
static int
keep_others(struct index_build *b, const struct kbs *old, struct kbi *ix,
    int *dirty)
{
	const char *name, *meta;
	struct ometa om;
	uint32_t first, n;
	size_t i;

	for (i = 0; old != NULL && i < kbs_ndocs(old); i++) {
		if (kbs_doc_get(old, i, &name, &meta, &first, &n) == -1 ||
		    meta_parse(meta, &om) == -1)
			continue;
		if (!known_source(b, om.source)) {
			*dirty = 1;	/* a source that was removed */
			continue;
		}
		if (is_target(b, om.source))
			continue;
		if (kbs_copy_doc(old, i, ix, meta) == -1)
			return -1;
		if (om.binary)
			b->nbinary++;
	}
	return 0;
}

/* Old documents of the redone sources no longer there: removed. */
static void
count_removed(struct index_build *b, const struct kbs *old,
    const struct kbi *ix, int *dirty)
{
	const char *name, *meta;
	struct ometa om;
	uint32_t first, n;
	size_t i;

	for (i = 0; old != NULL && i < kbs_ndocs(old); i++)
		if (kbs_doc_get(old, i, &name, &meta, &first, &n) == 0 &&
		    meta_parse(meta, &om) == 0 && is_target(b, om.source) &&
		    kbi_doc_find(ix, name) < 0) {
			pthread_mutex_lock(&b->mu);
			b->c.removed++;
			pthread_mutex_unlock(&b->mu);
			*dirty = 1;
		}
}

/*
 * Whether the walked files are exactly what the old segment holds of the
 * sources rebuilt, by size, mtime and source: then the build is done
 * without copying anything (an unchanged tree costs a walk and a stat
 * per file).  Fills the counts when it is.
 */
static int
same_as_old(struct index_build *b, const struct kbs *old,
    const struct walk *w)
{
	const char *name, *meta;
	struct ometa om;
	uint32_t first, n;
	size_t i, ntarget = 0, matched = 0, nbin = 0, large = 0, bin = 0;
	int k;

	if (old == NULL)
		return w->n == 0;
	for (i = 0; i < kbs_ndocs(old); i++) {
		if (kbs_doc_get(old, i, &name, &meta, &first, &n) == -1 ||
		    meta_parse(meta, &om) == -1 || !known_source(b, om.source))
			return 0;
		nbin += om.binary;
		ntarget += is_target(b, om.source);
	}
	for (i = 0; i < w->n; i++) {
		const struct wfile *f = &w->files[i];

		k = kbs_doc_find(old, f->path);
		if ((size_t)f->size > b->conf->index_max_file) {
			if (k >= 0)
				return 0;
			large++;
			continue;
		}
		if (k < 0 || kbs_doc_get(old, (size_t)k, &name, &meta, &first,
		    &n) == -1 || meta_parse(meta, &om) == -1 ||
		    om.size != (double)f->size || om.mtime != f->mtime_ns ||
		    strcmp(om.source, b->srcs[f->src].path) != 0)
			return 0;
		bin += om.binary;
		matched++;
	}
	if (matched != ntarget)
		return 0;
	pthread_mutex_lock(&b->mu);
	b->c.too_large = (unsigned)large;
	b->c.binary = (unsigned)bin;
	b->c.indexed = (unsigned)w->n;
	b->c.unchanged = 1;
	b->c.files = kbs_ndocs(old) - nbin;
	b->c.chunks = kbs_nchunks(old);
	b->c.bytes = kbs_bytes(old);
	pthread_mutex_unlock(&b->mu);
	return 1;
}

void *
index_build_main(void *arg)
{
	struct index_build *b = arg;
	struct walk w;
	struct dcache dc;
	struct kbs *old;
	struct kbi *ix;
	char path[PATH_MAX + 16], err[200];
	size_t i, k;
	int dirty = 0;

	dc.fd = -1;
	dc.src = -1;
	dc.rel[0] = '\0';

	snprintf(path, sizeof(path), "%s/segment", b->dir);
	if ((old = kbs_open(path, err, sizeof(err))) == NULL &&
	    errno != ENOENT)
		/* Unreadable: rebuilt from the files. */
		dirty = 1;
	memset(&w, 0, sizeof(w));
	w.b = b;
	walk_skip(&w, b->conf);
	/* Each source checked and opened again now, whoever asked: its
	 * files are read beneath that fd, never by path. */
	if ((b->srcfd = calloc(b->nsrcs + 1, sizeof(*b->srcfd))) == NULL)
		build_fail(b, "%s", "out of memory");
	for (i = 0; b->srcfd != NULL && i < b->nsrcs; i++) {
		b->srcfd[i] = -1;
		if ((b->target >= 0 && (int)i != b->target) || b->cancel)
			continue;
		b->srcfd[i] = src_open(b->conf, b->srcs[i].path);
		w.src = &b->srcs[i];
		w.srcno = (int)i;
		walk_src(&w, b->srcfd[i]);
	}
	if (w.n > 0)
		qsort(w.files, w.n, sizeof(*w.files), wfile_cmp);
	/* A file under two sources is indexed once, by the inner one. */
	for (i = 0, k = 0; i < w.n; i++) {
		if ((k > 0 && strcmp(w.files[k - 1].path,
		    w.files[i].path) == 0) ||
		    !owns(b, w.files[i].src, w.files[i].path)) {
			free(w.files[i].path);
			continue;
		}
		w.files[k++] = w.files[i];
	}
	w.n = k;
	pthread_mutex_lock(&b->mu);
	b->c.phase = 1;
	b->c.total = (unsigned)w.n;
	if (w.full)
		snprintf(b->c.stopped, sizeof(b->c.stopped), "stopped: bound "
		    "reached (index-max-files, %u); raise it in parleyd.conf "
		    "or index less", b->conf->index_max_files);
	wake(b, 1);
	pthread_mutex_unlock(&b->mu);
	if (b->conf->embedder != NULL &&
	    (b->pend = calloc(1, sizeof(*b->pend))) == NULL)
		build_fail(b, "%s", "out of memory");
	ix = NULL;
	if (!dirty && same_as_old(b, old, &w))
		;
	else if ((ix = kbi_new()) == NULL ||
	    keep_others(b, old, ix, &dirty) == -1)
		build_fail(b, "%s", "out of memory");
	for (i = 0; ix != NULL && i < w.n && !b->cancel && !b->c.failed;
	    i++) {
		one_file(b, old, ix, &dc, &w.files[i], &dirty);
		pthread_mutex_lock(&b->mu);
		b->c.indexed = (unsigned)i + 1;
		snprintf(b->c.current, sizeof(b->c.current), "%s",
		    w.files[i].path);
		wake(b, 0);
		pthread_mutex_unlock(&b->mu);
	}
	if (ix != NULL && !b->cancel && !b->c.failed) {
		embed_flush(b, ix);
		count_removed(b, old, ix, &dirty);
		if (dirty && kbs_write(ix, path, err, sizeof(err)) == -1)
			build_fail(b, "cannot write the segment: %s", err);
		pthread_mutex_lock(&b->mu);
		b->c.unchanged = !dirty;
		b->c.files = nfiles(b, ix);
		b->c.chunks = kbi_nchunks(ix);
		b->c.bytes = kbi_bytes(ix);
		pthread_mutex_unlock(&b->mu);
	}
	if (b->pend != NULL) {
		for (i = 0; i < b->pend->n; i++)
			free(b->pend->text[i]);
		free(b->pend);
		b->pend = NULL;
	}
	if (dc.fd != -1)
		close(dc.fd);
	for (i = 0; b->srcfd != NULL && i < b->nsrcs; i++)
		if (b->srcfd[i] != -1)
			close(b->srcfd[i]);
	free(b->srcfd);
	b->srcfd = NULL;
	if (ix != NULL)
		kbi_free(ix);
	if (old != NULL)
		kbs_close(old);
	for (i = 0; i < w.n; i++)
		free(w.files[i].path);
	free(w.files);
	pthread_mutex_lock(&b->mu);
	b->c.phase = 2;
	wake(b, 1);
	pthread_mutex_unlock(&b->mu);
	return NULL;
}
