/*
 * The directory index's parts (index.c: the loop's side, endpoints,
 * status and search; index_build.c: paths, globs, the build thread;
 * index_watch.c: the inotify thread).  Not for other modules.
 */
#ifndef PARLEY_WORKERS_INDEX_INT_H
#define PARLEY_WORKERS_INDEX_INT_H

#include <sys/types.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct config;

#define INDEX_GLOBS_MAX		64	/* include or exclude patterns */
#define INDEX_GLOB_MAX		512	/* bytes of one */
#define INDEX_GLOB_STARS	4	/* "**" segments in one (a run: one) */
#define INDEX_SOURCES_MAX	64	/* directories one index holds */
#define INDEX_DEPTH_MAX		64	/* directories below a source */
#define INDEX_PROGRESS_MS	500	/* one progress message at most */
#define INDEX_CUR_MAX		1024	/* bytes of currentFile */
#define INDEX_STATUS_MAX	(16 << 20)	/* bytes of status.json */

/* One indexed directory and its patterns (status.json's "sources"). */
struct index_src {
	char		*path;		/* a realpath under an index root */
	char		**inc;
	size_t		 ninc;
	char		**exc;
	size_t		 nexc;
};

/* What a build counts, shared by its thread and the loop (under mu). */
struct index_counts {
	int		 phase;		/* 0 walking, 1 indexing, 2 done */
	unsigned	 total;		/* files to index */
	unsigned	 indexed;	/* of those, done */
	char		 current[INDEX_CUR_MAX];
	unsigned	 read;		/* files read (not copied) */
	unsigned	 binary, too_large, symlinks, unreadable;
	unsigned	 added, changed, removed;
	size_t		 files, chunks, bytes;	/* the index after */
	int		 unchanged;	/* nothing written */
	int		 failed;
	char		 err[256];	/* why it failed */
	char		 stopped[192];	/* a bound stopped it */
	unsigned	 unembedded;	/* chunks left without a vector */
	char		 embed_err[200];	/* the embedder's last error */
};

/*
 * A build: made by the loop (index.c), run by index_build_main on its
 * own thread; the fields before mu do not change while it runs.
 */
struct index_build {
	const struct config	*conf;
	char			 dir[PATH_MAX];	/* STATE_DIR/index */
	struct index_src	*srcs;		/* every source, owned */
	size_t			 nsrcs;
	int			 target;	/* srcs[target] only, -1: all */
	int			 wake_fd;	/* the pipe's write end */
	uint64_t		 started_ms;	/* wall clock */
	char			 sid[130];	/* a session asked, or "" */
	pthread_t		 thr;
	pthread_mutex_t		 mu;
	struct index_counts	 c;		/* under mu */
	uint64_t		 woke_ms;	/* the thread's last wake-up */
	size_t			 nbinary;	/* the thread's: binary docs */
	struct pending		*pend;		/* the thread's: chunks to embed */
	int			*srcfd;		/* the thread's: srcs' dirs, -1 */
	volatile int		 cancel;	/* the worker exits */
};

/* 1 when path is root or lies under it (a '/' boundary). */
int	index_under(const char *root, const char *path);
/*
 * Resolves path (absolute, an existing directory) and checks it lies
 * under one of conf's index roots, as written (else 403 before the file
 * system is asked) and resolved, and not in the state-dir: 0 and real
 * filled, or -1 with *status (400, 403 or 404) and msg saying what was
 * wrong and what to do (never the resolved path).
 */
int	index_resolve(const struct config *, const char *path,
	    char real[PATH_MAX], int *status, char *msg, size_t msglen);
/*
 * Whether a source's path (status.json's: a real path) may still be
 * walked: under a root of conf (roots change on a reload), not in the
 * state-dir, and resolving to itself (no component swapped for a
 * symbolic link; a path gone for now passes).  1, or 0 with why.
 */
int	index_src_ok(const struct config *, const char *path, char *why,
	    size_t whylen);
/* Drops (log_warnx) the sources index_src_ok refuses: the count left. */
size_t	index_srcs_check(const struct config *, struct index_src *,
	    size_t n);
/*
 * Whether one pattern matches rel (a path relative to the source, no
 * leading '/'): without '/', rel's base name by fnmatch(3); with '/', the
 * whole of rel segment by segment, a "**" segment standing for any
 * number of segments (a trailing one: a whole subtree; a leading one:
 * at any depth).
 */
int	index_glob(const char *pat, const char *rel);
/*
 * Whether the walk takes rel: a directory (isdir) is entered unless an
 * exclude matches it or it is a default exclude (.git, node_modules, a
 * dot-directory) no include names; a file is taken unless an exclude
 * matches it, and only if an include does when there are any.
 */
int	index_wanted(const struct index_src *, const char *rel, int isdir);
/* 1 (and *last = now) when every ms passed since *last, else 0. */
int	index_throttle(uint64_t *last, uint64_t now, uint64_t every);
/*
 * Sources from status.json's "sources" (NULL: none): a malloc'd array
 * of *n, or NULL with *n 0.  index_srcs_free frees one.
 */
struct index_src *index_srcs_from(const cJSON *, size_t *n);
void	index_srcs_free(struct index_src *, size_t n);
void	index_src_clear(struct index_src *);	/* frees what it holds */
cJSON	*index_srcs_json(const struct index_src *, size_t n);
/*
 * Fills src from a request body's path, include and exclude (resolved
 * and checked): 0, or -1 with *status and msg.
 */
int	index_src_parse(const struct config *, const cJSON *body,
	    struct index_src *src, int *status, char *msg, size_t msglen);

/*
 * index_hash.c.  Whether path may name a document: not empty, no
 * empty, "." or ".." segment, shorter than PATH_MAX (a leading '/' is
 * allowed).  1 or 0.
 */
int	index_path_ok(const char *path);
/*
 * What seg (NULL: none) holds for path (relative: joined to each of
 * roots, real paths in parleyd.conf's order, the first held wins; or
 * absolute): 1 and hex its SHA-256; -1 (hex "") removed: the first
 * root's join inside one of srcs (status.json's sources) is gone from
 * disk; 0 not judged (not held, binary, outside every source, a bad
 * path).
 */
struct kbs;
int	index_seg_hash(const struct kbs *seg, const char *const *roots,
	    size_t nroots, const struct index_src *srcs, size_t nsrcs,
	    const char *path, char hex[65]);

/* dir's status.json, malloc'd and NUL-terminated, or NULL. */
char	*index_status_text(const char *dir);
/* The build thread (arg: struct index_build). */
void	*index_build_main(void *);
/*
 * Calls fn for every directory the walk of src enters (src's own first),
 * skipping conf's state-dir; none when src fails index_src_ok or leads
 * through a symbolic link; stops when fn returns non-zero.  Returns the
 * directories given.
 */
size_t	index_walk_dirs(const struct config *, const struct index_src *,
	    int (*fn)(void *, const char *path), void *arg);

/*
 * The watcher: a thread watching every directory of status.json's
 * sources (those index_src_ok takes; conf outlives it); changed(arg)
 * runs on base's loop after a burst of changes.
 * Takes lock_fd (watch.lock, held).  NULL when it cannot start.
 */
struct event_base;
struct index_watch;
struct index_watch *index_watch_start(struct event_base *,
	    const struct config *, const char *dir, int lock_fd,
	    void (*changed)(void *), void *arg);
/* The sources may have changed: the watcher reads them again now. */
void	index_watch_poke(struct index_watch *);
void	index_watch_stop(struct index_watch *);

#endif
