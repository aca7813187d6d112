/*
 * The host's directory index, the loop's side: POST /api/index, GET
 * /api/index/status, POST /api/search, DELETE /api/index and a session's
 * "index" message; the build's start and end (its thread is
 * index_build.c's), status.json, and searches of the current segment.
 *
 * STATE_DIR/index/ holds "segment" (a kbseg file, replaced by rename),
 * "status.json" (written tmp + rename, only by the holder of build.lock),
 * "build.lock" (flock: one build per host; a worker SIGKILLed while
 * building frees it, so a status.json saying "running" with build.lock
 * free reads "interrupted" and the next worker to look runs the build
 * again) and "watch.lock" (the worker holding it runs the watcher).
 */
#include <sys/types.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/kbseg.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/util.h"
#include "conn.h"
#include "embed.h"
#include "index.h"
#include "index_int.h"
#include "sess.h"
#include "wk.h"

#define SEG_RECHECK_MS	200	/* stat the segment at most this often */
#define TICK_MS		5000	/* watch.lock tries, interrupted builds */
#define RETRY_MS	500	/* a watcher's build waits for build.lock */
#define ATTEMPTS_MAX	3	/* interrupted builds re-run */
#define QUERY_MAX	4096	/* bytes of a search's query */
#define LIMIT_MAX	50

/* A search waiting for its query's vector (embed_async). */
struct index_query {
	LIST_ENTRY(index_query)	 entry;
	struct index		*ix;
	struct conn		*c;
	uint64_t		 conn_id;	/* c's, to know it again */
	char			*text;
	size_t			 limit;
	struct embed_req	*er;
};

struct index {
	struct wk		*wk;
	char			 dir[PATH_MAX];
	char			 seg_path[PATH_MAX + 16];
	struct kbs		*seg;		/* mapped, or NULL */
	dev_t			 seg_dev;
	ino_t			 seg_ino;
	struct timespec		 seg_mtim;
	uint64_t		 seg_checked;	/* monotonic ms, 0: never */
	uint64_t		 gen;		/* bumped when seg changes */
	/* index_file_hash's view, made again when gen or conf moves: */
	uint64_t		 hv_gen;
	const struct config	*hv_conf;
	uint64_t		 hv_ms;		/* monotonic, when made */
	char			**hv_roots;	/* real paths, conf's order */
	size_t			 hv_nroots;
	struct index_src	*hv_srcs;	/* status.json's sources */
	size_t			 hv_nsrcs;
	struct index_build	*b;		/* running here, or NULL */
	int			 lock_fd;	/* build.lock, held by b */
	int			 pipe[2];	/* b's wake-ups */
	struct event		*wake_ev;
	int			 start_sent;	/* index_start logged */
	uint64_t		 prog_ms;	/* last progress handed on */
	int			 rerun;		/* the watcher saw changes */
	struct event		*tick_ev;
	struct event		*retry_ev;
	struct index_watch	*watch;		/* index_watch.c, or NULL */
	LIST_HEAD(, index_query) queries;	/* waiting for vectors */
};

static void	tick_cb(evutil_socket_t, short, void *);

/* The worker's index state, made on first use: NULL out of memory. */
static struct index *
index_get(struct wk *wk)
{
	struct index *ix = wk->index;

	if (ix != NULL)
		return ix;
	if ((ix = calloc(1, sizeof(*ix))) == NULL)
		return NULL;
	ix->wk = wk;
	ix->lock_fd = -1;
	ix->pipe[0] = ix->pipe[1] = -1;
	LIST_INIT(&ix->queries);
	snprintf(ix->dir, sizeof(ix->dir), "%s/index", wk->conf->state_dir);
	snprintf(ix->seg_path, sizeof(ix->seg_path), "%s/segment", ix->dir);
	if (mkdir(ix->dir, 0700) == -1 && errno != EEXIST)
		log_warn("index: mkdir %s", ix->dir);
	wk->index = ix;
	return ix;
}

/* ---- status.json ---- */

static cJSON *
status_load(struct index *ix)
{
	char *t = index_status_text(ix->dir);
	cJSON *o = t != NULL ? cJSON_Parse(t) : NULL;

	free(t);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "state", "idle");
		cJSON_AddArrayToObject(o, "sources");
	}
	return o;
}

/*
 * Writes st as status.json (tmp + rename): 0, or -1 logged.  Progress
 * is written without fsync (on the loop, twice a second: a slow disk
 * must not stall the sessions); a build's start and end are synced.
 */
static int
status_write(struct index *ix, const cJSON *st, int sync)
{
	char path[PATH_MAX + 16], tmp[PATH_MAX + 32], *t;
	size_t len;
	int fd, rc = -1;

	snprintf(path, sizeof(path), "%s/status.json", ix->dir);
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	if ((t = cJSON_Print(st)) == NULL)
		return -1;
	len = strlen(t);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) != -1) {
		if (write(fd, t, len) == (ssize_t)len &&
		    (!sync || fsync(fd) == 0))
			rc = 0;
		close(fd);
	}
	if (rc == 0 && rename(tmp, path) == -1)
		rc = -1;
	if (rc == -1) {
		log_warn("index: cannot write %s", path);
		unlink(tmp);
	}
	free(t);
	return rc;
}

static int
status_save(struct index *ix, const cJSON *st)
{
	return status_write(ix, st, 1);
}

static void
set_num(cJSON *o, const char *k, double v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
	cJSON_AddNumberToObject(o, k, v);
}

static void
set_str(cJSON *o, const char *k, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
	if (v != NULL)
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

static void
set_item(cJSON *o, const char *k, cJSON *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
	cJSON_AddItemToObject(o, k, v);
}

static void
set_time(cJSON *o, const char *k, uint64_t ms)
{
	char t[32];

	util_iso8601(t, ms);
	set_str(o, k, t);
}

/* Writes a build's counts into st. */
static void
status_counts(cJSON *st, const struct index_counts *c)
{
	cJSON *p = cJSON_CreateObject(), *sk = cJSON_CreateObject();

	cJSON_AddNumberToObject(p, "indexedFiles", c->indexed);
	cJSON_AddNumberToObject(p, "totalFiles", c->total);
	if (c->current[0] != '\0')
		cJSON_AddStringToObject(p, "currentFile", c->current);
	else
		cJSON_AddNullToObject(p, "currentFile");
	set_item(st, "progress", p);
	set_num(st, "filesRead", c->read);
	cJSON_AddNumberToObject(sk, "binary", c->binary);
	cJSON_AddNumberToObject(sk, "tooLarge", c->too_large);
	cJSON_AddNumberToObject(sk, "symlinks", c->symlinks);
	cJSON_AddNumberToObject(sk, "unreadable", c->unreadable);
	set_item(st, "skipped", sk);
	set_num(st, "added", c->added);
	set_num(st, "changed", c->changed);
	set_num(st, "removed", c->removed);
	set_str(st, "stopped", c->stopped[0] ? c->stopped : NULL);
	set_num(st, "unembedded", c->unembedded);
	set_str(st, "embedderError", c->embed_err[0] ? c->embed_err : NULL);
}

/* A lock file of dir taken (its fd) or -1 (EWOULDBLOCK: someone has it). */
static int
lock_take(struct index *ix, const char *name)
{
	char path[PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", ix->dir, name);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		close(fd);
		errno = EWOULDBLOCK;
		return -1;
	}
	return fd;
}

/* Whether another open of the lock holds it (this process's too). */
static int
lock_held(struct index *ix, const char *name)
{
	int fd = lock_take(ix, name);

	if (fd == -1)
		return errno == EWOULDBLOCK;
	close(fd);
	return 0;
}

/* ---- the segment ---- */

/* The current segment, mapped again when the file changed; or NULL. */
static struct kbs *
seg_current(struct index *ix)
{
	struct stat st;
	struct kbs *k;
	char err[256];
	uint64_t now = util_mono_ms();

	if (ix->seg_checked != 0 && now - ix->seg_checked < SEG_RECHECK_MS)
		return ix->seg;
	ix->seg_checked = now;
	if (stat(ix->seg_path, &st) == -1) {
		if (ix->seg != NULL) {
			kbs_close(ix->seg);
			ix->gen++;
		}
		ix->seg = NULL;
		return NULL;
	}
	if (ix->seg != NULL && st.st_dev == ix->seg_dev &&
	    st.st_ino == ix->seg_ino &&
	    st.st_mtim.tv_sec == ix->seg_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == ix->seg_mtim.tv_nsec)
		return ix->seg;
	if ((k = kbs_open(ix->seg_path, err, sizeof(err))) == NULL) {
		/* A new file is whole (rename): keep what we have. */
		log_warnx("index: %s: %s", ix->seg_path, err);
		return ix->seg;
	}
	if (ix->seg != NULL)
		kbs_close(ix->seg);
	ix->seg = k;
	ix->gen++;
	ix->seg_dev = st.st_dev;
	ix->seg_ino = st.st_ino;
	ix->seg_mtim = st.st_mtim;
	return k;
}

int
index_present(struct wk *wk)
{
	struct index *ix = index_get(wk);

	return ix != NULL && seg_current(ix) != NULL &&
	    kbs_nchunks(ix->seg) > 0;
}

uint64_t
index_generation(struct wk *wk)
{
	struct index *ix = index_get(wk);

	if (ix == NULL || seg_current(ix) == NULL)
		return 0;
	return ix->gen;
}

static void
hv_clear(struct index *ix)
{
	size_t i;

	for (i = 0; i < ix->hv_nroots; i++)
		free(ix->hv_roots[i]);
	free(ix->hv_roots);
	ix->hv_roots = NULL;
	ix->hv_nroots = 0;
	index_srcs_free(ix->hv_srcs, ix->hv_nsrcs);
	ix->hv_srcs = NULL;
	ix->hv_nsrcs = 0;
	ix->hv_conf = NULL;
}

/*
 * The roots' real paths and the sources, read again when the segment or
 * the configuration changed, or HV_MAX_MS passed (a root's directory
 * swapped).  0, or -1 out of memory (nothing kept).
 */
#define HV_MAX_MS	5000
static int
hv_current(struct index *ix)
{
	const struct config *conf = ix->wk->conf;
	const struct cfg_name *r;
	char real[PATH_MAX], *t;
	cJSON *st;
	size_t n = 0;
	uint64_t now = util_mono_ms();

	if (ix->hv_conf == conf && ix->hv_gen == ix->gen &&
	    now - ix->hv_ms < HV_MAX_MS)
		return 0;
	hv_clear(ix);
	TAILQ_FOREACH(r, &conf->index_roots, entry)
		n++;
	if (n > 0 && (ix->hv_roots = calloc(n, sizeof(char *))) == NULL)
		return -1;
	TAILQ_FOREACH(r, &conf->index_roots, entry) {
		/* A root that does not resolve holds nothing for now. */
		if (realpath(r->name, real) == NULL)
			continue;
		if ((ix->hv_roots[ix->hv_nroots] = strdup(real)) == NULL) {
			hv_clear(ix);
			return -1;
		}
		ix->hv_nroots++;
	}
	t = index_status_text(ix->dir);
	st = t != NULL ? cJSON_Parse(t) : NULL;
	free(t);
	ix->hv_srcs = index_srcs_from(cJSON_GetObjectItem(st, "sources"),
	    &ix->hv_nsrcs);
	cJSON_Delete(st);
	ix->hv_conf = conf;
	ix->hv_gen = ix->gen;
	ix->hv_ms = now;
	return 0;
}

int
index_file_hash(struct wk *wk, const char *path, char hex[65])
{
	struct index *ix = index_get(wk);
	struct kbs *seg;

	hex[0] = '\0';
	if (ix == NULL || (seg = seg_current(ix)) == NULL ||
	    hv_current(ix) == -1)
		return 0;
	return index_seg_hash(seg, (const char *const *)ix->hv_roots,
	    ix->hv_nroots, ix->hv_srcs, ix->hv_nsrcs, path, hex);
}

/*
 * A session whose build runs on this worker stays in memory until the
 * build ends, so its index_progress and index_done reach its log.
 */
static int
part_busy(const struct sess *s)
{
	struct index *ix = s->wk->index;

	return ix != NULL && ix->b != NULL && strcmp(ix->b->sid, s->id) == 0;
}

const struct sess_part index_part = {
	.busy = part_busy,
};

size_t
index_search(struct wk *wk, const struct kbi_query *q, struct kbi_hit *out,
    struct kbi_chunk_info *info)
{
	struct index *ix = index_get(wk);
	struct kbi_query kq;
	struct kbs *seg;
	size_t n, i, k;

	if (ix == NULL || (seg = seg_current(ix)) == NULL || q->limit == 0)
		return 0;
	kq = *q;
	/* A vector of another model's size cannot be compared. */
	if (kq.vec != NULL && kq.dim != kbs_dim(seg)) {
		kq.vec = NULL;
		kq.dim = 0;
	}
	n = kbs_search(seg, &kq, out);
	for (i = 0, k = 0; i < n; i++)
		if (kbs_chunk_get(seg, out[i].chunk, &info[k]) == 0)
			out[k++] = out[i];
	return k;
}

/* ---- builds ---- */

static void	wake_cb(evutil_socket_t, short, void *);

/* A session that asked for the build, when this worker has it. */
static struct sess *
asker(struct index *ix)
{
	struct sess *s;

	if (ix->b == NULL || ix->b->sid[0] == '\0' ||
	    (s = sess_find(ix->wk, ix->b->sid)) == NULL || s->loading ||
	    s->follower || s->ended)
		return NULL;
	return s;
}

static const char *
build_path(const struct index_build *b)
{
	return b->target >= 0 ? b->srcs[b->target].path : "(all sources)";
}

/*
 * Starts a build: of src (taken: it replaces the source of its path, or
 * is added) or, src NULL, of every source again (rerun: an interrupted
 * one).  sid: the session that asked, or NULL.  0, or -1 with *status
 * and msg (409: another build runs on this host).
 */
static int
build_begin(struct index *ix, struct index_src *src, const char *sid,
    int rerun, int *status, char *msg, size_t msglen)
{
	struct index_build *b = NULL;
	struct index_src *srcs;
	cJSON *st;
	const char *state;
	char path[PATH_MAX + 16];
	size_t n, i;
	int fd, attempts;

	*status = 409;
	if (ix->b != NULL || (fd = lock_take(ix, "build.lock")) == -1) {
		snprintf(msg, msglen, "an index build is already running on "
		    "this host; wait until GET /api/index/status says "
		    "\"idle\", then send this again");
		if (src != NULL)
			index_srcs_free(src, 1);
		return -1;
	}
	st = status_load(ix);
	state = cJSON_GetStringValue(cJSON_GetObjectItem(st, "state"));
	attempts = (int)proto_count(st, "attempts");
	if (rerun) {
		/* Only a build that died is run again. */
		if (state == NULL || strcmp(state, "running") != 0) {
			*status = 0;
			goto out;
		}
		if (attempts >= ATTEMPTS_MAX) {
			set_str(st, "state", "failed");
			snprintf(msg, msglen, "the build was interrupted %d "
			    "times (a worker died while building); see the "
			    "log, then POST /api/index again", attempts);
			set_str(st, "lastError", msg);
			set_time(st, "finishedAt", util_now_ms());
			status_save(ix, st);
			*status = 500;
			goto out;
		}
		attempts++;
	} else
		attempts = 1;
	srcs = index_srcs_from(cJSON_GetObjectItem(st, "sources"), &n);
	/* A source no root holds since a reload, or swapped for a link,
	 * leaves status.json; its documents leave the segment with it. */
	if ((n = index_srcs_check(ix->wk->conf, srcs, n)) == 0) {
		free(srcs);
		srcs = NULL;
	}
	if ((b = calloc(1, sizeof(*b))) == NULL)
		goto oom;
	b->target = -1;
	if (src != NULL) {
		for (i = 0; i < n; i++)
			if (strcmp(srcs[i].path, src->path) == 0)
				break;
		if (i == n && n >= INDEX_SOURCES_MAX) {
			index_srcs_free(srcs, n);
			*status = 400;
			snprintf(msg, msglen, "the index holds %d directories "
			    "already; DELETE /api/index or index a directory "
			    "above some of them", INDEX_SOURCES_MAX);
			goto out;
		}
		if (i == n) {
			struct index_src *ns = reallocarray(srcs, n + 1,
			    sizeof(*ns));

			if (ns == NULL) {
				index_srcs_free(srcs, n);
				goto oom;
			}
			srcs = ns;
			n++;
		} else
			index_src_clear(&srcs[i]);
		srcs[i] = *src;
		free(src);
		src = NULL;
		b->target = (int)i;
	}
	b->srcs = srcs;
	b->nsrcs = n;
	b->conf = ix->wk->conf;
	b->started_ms = util_now_ms();
	snprintf(b->dir, sizeof(b->dir), "%s", ix->dir);
	/* A re-run tells the session that asked, if this worker has it. */
	if (sid == NULL && rerun)
		sid = cJSON_GetStringValue(cJSON_GetObjectItem(st, "session"));
	if (sid != NULL)
		snprintf(b->sid, sizeof(b->sid), "%s", sid);
	pthread_mutex_init(&b->mu, NULL);
	if (pipe2(ix->pipe, O_CLOEXEC | O_NONBLOCK) == -1)
		goto oom;
	b->wake_fd = ix->pipe[1];
	if ((ix->wake_ev = event_new(ix->wk->base, ix->pipe[0],
	    EV_READ | EV_PERSIST, wake_cb, ix)) == NULL)
		goto oom;
	/* The old segment stays whole; a torn new one goes. */
	snprintf(path, sizeof(path), "%s/segment.tmp", ix->dir);
	unlink(path);
	set_str(st, "state", "running");
	set_item(st, "sources", index_srcs_json(srcs, n));
	set_str(st, "path", build_path(b));
	set_str(st, "session", b->sid[0] != '\0' ? b->sid : NULL);
	set_time(st, "startedAt", b->started_ms);
	set_item(st, "finishedAt", cJSON_CreateNull());
	set_item(st, "durationMs", cJSON_CreateNull());
	set_num(st, "attempts", attempts);
	set_str(st, "lastError", NULL);
	status_counts(st, &b->c);
	if (status_save(ix, st) == -1) {
		*status = 500;
		snprintf(msg, msglen, "cannot write the index's status.json; "
		    "see the log");
		goto fail;
	}
	ix->b = b;
	ix->lock_fd = fd;
	ix->start_sent = 0;
	ix->prog_ms = 0;
	if (pthread_create(&b->thr, NULL, index_build_main, b) != 0) {
		ix->b = NULL;
		ix->lock_fd = -1;
		goto oom;
	}
	event_add(ix->wake_ev, NULL);
	cJSON_Delete(st);
	log_info("index: building %s%s%s", build_path(b), b->sid[0] ?
	    " for session " : "", b->sid);
	return 0;
oom:
	*status = 503;
	snprintf(msg, msglen, "out of memory or descriptors starting the "
	    "build; retry in a moment");
fail:
	if (ix->wake_ev != NULL)
		event_free(ix->wake_ev);
	ix->wake_ev = NULL;
	for (i = 0; i < 2; i++)
		if (ix->pipe[i] != -1)
			close(ix->pipe[i]);
	ix->pipe[0] = ix->pipe[1] = -1;
	if (b != NULL) {
		index_srcs_free(b->srcs, b->nsrcs);
		pthread_mutex_destroy(&b->mu);
		free(b);
	}
out:
	if (src != NULL)
		index_srcs_free(src, 1);
	cJSON_Delete(st);
	close(fd);
	return -1;
}

/* Logs an event to the session that asked, if this worker owns it. */
static void
tell(struct index *ix, const char *type, cJSON *body)
{
	struct sess *s = asker(ix);

	if (s == NULL || sess_emit(s, type, body) == 0)
		cJSON_Delete(body);
}

static void	build_retry(struct index *);

/* The thread ended: join it, write the status, tell the session. */
static void
build_end(struct index *ix, const struct index_counts *c)
{
	struct index_build *b = ix->b;
	uint64_t now = util_now_ms();
	struct sess *s;
	cJSON *st, *e;

	pthread_join(b->thr, NULL);
	st = status_load(ix);
	status_counts(st, c);
	set_str(st, "state", c->failed ? "failed" : "idle");
	set_str(st, "lastError", c->failed ? c->err : NULL);
	set_time(st, "finishedAt", now);
	set_num(st, "durationMs", (double)(now - b->started_ms));
	set_num(st, "files", (double)c->files);
	set_num(st, "chunks", (double)c->chunks);
	set_num(st, "bytes", (double)c->bytes);
	set_item(st, "unchanged", cJSON_CreateBool(c->unchanged));
	set_num(st, "attempts", 0);
	status_save(ix, st);
	cJSON_Delete(st);
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "path", build_path(b));
	if (c->failed)
		cJSON_AddStringToObject(e, "error", c->err);
	else {
		cJSON_AddNumberToObject(e, "fileCount", (double)c->files);
		cJSON_AddNumberToObject(e, "chunkCount", (double)c->chunks);
		cJSON_AddNumberToObject(e, "bytes", (double)c->bytes);
		cJSON_AddNumberToObject(e, "filesRead", c->read);
		cJSON_AddBoolToObject(e, "unchanged", c->unchanged);
		if (c->stopped[0] != '\0')
			cJSON_AddStringToObject(e, "stopped", c->stopped);
	}
	cJSON_AddNumberToObject(e, "durationMs", (double)(now -
	    b->started_ms));
	tell(ix, "index_done", e);
	log_info("index: %s %s: %zu files, %zu chunks, %u read, %u skipped, "
	    "%llu ms%s%s", build_path(b), c->failed ? "failed" : "done",
	    c->files, c->chunks, c->read, c->binary + c->too_large +
	    c->symlinks + c->unreadable, (unsigned long long)(now -
	    b->started_ms), c->failed ? ": " : "", c->failed ? c->err : "");
	event_free(ix->wake_ev);
	ix->wake_ev = NULL;
	close(ix->pipe[0]);
	close(ix->pipe[1]);
	ix->pipe[0] = ix->pipe[1] = -1;
	/* Last: the status is written before another build may start. */
	close(ix->lock_fd);
	ix->lock_fd = -1;
	index_srcs_free(b->srcs, b->nsrcs);
	pthread_mutex_destroy(&b->mu);
	ix->b = NULL;
	/* The session that asked may leave memory now (part_busy). */
	if (b->sid[0] != '\0' && (s = sess_find(ix->wk, b->sid)) != NULL)
		sess_check_idle(s);
	free(b);
	ix->seg_checked = 0;
	if (ix->watch != NULL)
		index_watch_poke(ix->watch);
	if (ix->rerun)
		build_retry(ix);
}

/* The thread says something: progress (throttled), start, end. */
static void
wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct index *ix = arg;
	struct index_build *b = ix->b;
	struct index_counts c;
	char buf[64];
	cJSON *st, *e;

	(void)ev;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	if (b == NULL)
		return;
	pthread_mutex_lock(&b->mu);
	c = b->c;
	pthread_mutex_unlock(&b->mu);
	if (c.phase >= 1 && !ix->start_sent) {
		ix->start_sent = 1;
		e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "path", build_path(b));
		cJSON_AddNumberToObject(e, "totalFiles", c.total);
		tell(ix, "index_start", e);
		ix->prog_ms = util_mono_ms();
	}
	if (c.phase == 2) {
		build_end(ix, &c);
		return;
	}
	if (c.phase == 1 && index_throttle(&ix->prog_ms, util_mono_ms(),
	    INDEX_PROGRESS_MS)) {
		st = status_load(ix);
		status_counts(st, &c);
		status_write(ix, st, 0);
		cJSON_Delete(st);
		e = cJSON_CreateObject();
		cJSON_AddNumberToObject(e, "indexedFiles", c.indexed);
		cJSON_AddNumberToObject(e, "totalFiles", c.total);
		cJSON_AddStringToObject(e, "currentFile", c.current);
		tell(ix, "index_progress", e);
	}
}

/* A build of every source for the watcher; again later when busy. */
static void
build_retry(struct index *ix)
{
	struct timeval tv;
	char msg[256];
	int status;

	ix->rerun = 0;
	if (build_begin(ix, NULL, NULL, 0, &status, msg, sizeof(msg)) == 0)
		return;
	if (status == 409) {
		/* Waits for build.lock. */
		ix->rerun = 1;
		util_tv(&tv, RETRY_MS);
		if (ix->b == NULL)
			evtimer_add(ix->retry_ev, &tv);
	} else
		log_warnx("index: the watcher's build: %s", msg);
}

static void
retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	build_retry(arg);
}

/* index_watch.c saw changes under the sources. */
static void
watch_changed(void *arg)
{
	struct index *ix = arg;

	if (ix->b != NULL)
		ix->rerun = 1;	/* after this one */
	else if (!evtimer_pending(ix->retry_ev, NULL))
		build_retry(ix);
}

/* ---- the status answer ---- */

static cJSON *
status_view(struct index *ix)
{
	cJSON *st = status_load(ix);
	const char *state = cJSON_GetStringValue(cJSON_GetObjectItem(st,
	    "state"));
	struct index_counts c;

	if (ix->b != NULL) {
		pthread_mutex_lock(&ix->b->mu);
		c = ix->b->c;
		pthread_mutex_unlock(&ix->b->mu);
		status_counts(st, &c);
	} else if (state != NULL && strcmp(state, "running") == 0 &&
	    !lock_held(ix, "build.lock"))
		/* Its builder died (a worker killed): run again soon. */
		set_str(st, "state", "interrupted");
	cJSON_DeleteItemFromObjectCaseSensitive(st, "attempts");
	set_item(st, "watching", cJSON_CreateBool(ix->watch != NULL ||
	    (ix->wk->conf->index_watch && lock_held(ix, "watch.lock"))));
	set_str(st, "embedder", ix->wk->conf->embedder != NULL ?
	    ix->wk->conf->embedder->name : NULL);
	return st;
}

/* ---- requests ---- */

static const char *
code_of(int status)
{
	switch (status) {
	case 400:
		return "BAD_REQUEST";
	case 403:
		return "FORBIDDEN";
	case 404:
		return "NOT_FOUND";
	case 500:
		return "INTERNAL";
	default:
		return "OVERLOADED";	/* 409: busy, 503: retry */
	}
}

/* POST /api/index and the session message: a build of body's path. */
static int
index_start(struct index *ix, const cJSON *body, const char *sid,
    struct index_src **srcp, int *status, char *msg, size_t msglen)
{
	struct index_src src, *sp;

	if (index_src_parse(ix->wk->conf, body, &src, status, msg,
	    msglen) == -1)
		return -1;
	if ((sp = malloc(sizeof(*sp))) == NULL) {
		index_src_clear(&src);
		*status = 503;
		snprintf(msg, msglen, "out of memory; retry");
		return -1;
	}
	*sp = src;
	*srcp = sp;
	return build_begin(ix, sp, sid, 0, status, msg, msglen);
}

static void
post_index(struct index *ix, struct conn *c, const cJSON *body)
{
	struct index_src *src;
	char msg[512];
	int status;
	cJSON *st, *o;

	if (index_start(ix, body, NULL, &src, &status, msg,
	    sizeof(msg)) == -1) {
		conn_http_error(c, status, code_of(status), msg);
		return;
	}
	st = status_view(ix);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "state", "running");
	cJSON_AddStringToObject(o, "path", build_path(ix->b));
	cJSON_AddItemToObject(o, "include", cJSON_Duplicate(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(st,
	    "sources"), ix->b->target), "include"), 1));
	cJSON_AddItemToObject(o, "exclude", cJSON_Duplicate(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(st,
	    "sources"), ix->b->target), "exclude"), 1));
	cJSON_AddItemToObject(o, "sources", cJSON_DetachItemFromObject(st,
	    "sources"));
	cJSON_AddItemToObject(o, "startedAt", cJSON_DetachItemFromObject(st,
	    "startedAt"));
	cJSON_AddStringToObject(o, "status", "GET /api/index/status");
	cJSON_Delete(st);
	conn_http_reply(c, 202, o);
}

static void
delete_index(struct index *ix, struct conn *c)
{
	char path[PATH_MAX + 32];
	cJSON *st;
	int fd;

	if (ix->b != NULL || (fd = lock_take(ix, "build.lock")) == -1) {
		conn_http_error(c, 409, "OVERLOADED", "an index build is "
		    "running on this host; wait until GET /api/index/status "
		    "says \"idle\", then delete");
		return;
	}
	snprintf(path, sizeof(path), "%s/segment.tmp", ix->dir);
	unlink(path);
	if (unlink(ix->seg_path) == -1 && errno != ENOENT) {
		close(fd);
		conn_http_error(c, 500, "INTERNAL", "cannot remove the "
		    "segment; see the log");
		log_warn("index: unlink %s", ix->seg_path);
		return;
	}
	st = cJSON_CreateObject();
	cJSON_AddStringToObject(st, "state", "idle");
	cJSON_AddArrayToObject(st, "sources");
	status_save(ix, st);
	cJSON_Delete(st);
	close(fd);
	ix->seg_checked = 0;
	st = cJSON_CreateObject();
	cJSON_AddBoolToObject(st, "removed", 1);
	conn_http_reply(c, 200, st);
}

/* The text of a chunk as a JSON string (it is UTF-8: kbt_is_text). */
static cJSON *
text_json(const char *t, size_t len)
{
	char *s = malloc(len + 1);
	cJSON *j;

	if (s == NULL)
		return cJSON_CreateNull();
	memcpy(s, t, len);
	s[len] = '\0';
	j = cJSON_CreateString(s);
	free(s);
	return j;
}

/*
 * Searches for text (vec: its vector, or NULL) and answers c; note says
 * why a search with an embedder is keyword-only (NULL: it is not).
 */
static void
search_reply(struct index *ix, struct conn *c, const char *text,
    size_t limit, const float *vec, unsigned dim, const char *why)
{
	struct kbi_hit *hits;
	struct kbi_chunk_info *info;
	struct kbi_query q;
	struct kbs *seg;
	cJSON *o, *a, *h, *l;
	size_t n, i;
	int hybrid;

	hits = calloc(limit, sizeof(*hits));
	info = calloc(limit, sizeof(*info));
	if (hits == NULL || info == NULL) {
		free(hits);
		free(info);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	memset(&q, 0, sizeof(q));
	q.text = text;
	q.len = strlen(text);
	q.limit = limit;
	q.vec = vec;
	q.dim = dim;
	n = index_search(ix->wk, &q, hits, info);
	seg = ix->seg;
	hybrid = vec != NULL && seg != NULL && kbs_dim(seg) == dim;
	o = cJSON_CreateObject();
	a = cJSON_AddArrayToObject(o, "results");
	for (i = 0; i < n; i++) {
		h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "path", info[i].doc);
		l = cJSON_AddArrayToObject(h, "lines");
		cJSON_AddItemToArray(l, cJSON_CreateNumber(info[i].line_first));
		cJSON_AddItemToArray(l, cJSON_CreateNumber(info[i].line_last));
		cJSON_AddItemToObject(h, "content", text_json(info[i].text,
		    info[i].len));
		cJSON_AddNumberToObject(h, "score", hits[i].score);
		cJSON_AddNumberToObject(h, "keywordScore", hits[i].keyword);
		if (hybrid && hits[i].vec_rank != 0)
			cJSON_AddNumberToObject(h, "vectorScore",
			    hits[i].vector);
		cJSON_AddItemToArray(a, h);
	}
	cJSON_AddStringToObject(o, "mode", hybrid ? "hybrid" : "keyword");
	if (seg == NULL)
		cJSON_AddStringToObject(o, "note", "nothing is indexed yet: "
		    "POST /api/index first");
	else if (ix->wk->conf->embedder == NULL)
		cJSON_AddStringToObject(o, "note", "no embedder is "
		    "configured: keyword search only");
	else if (!hybrid)
		cJSON_AddStringToObject(o, "note", why != NULL ? why :
		    "the index has no vectors (built before the embedder "
		    "was configured, or it failed): keyword search only");
	free(hits);
	free(info);
	conn_http_reply(c, 200, o);
}

/* The query's vector came (or not): answer, if c is still there. */
static void
query_embedded(void *arg, int err, const char *msg, const float *vecs,
    unsigned dim)
{
	struct index_query *q = arg;
	struct conn *c;
	char why[300];

	LIST_REMOVE(q, entry);
	/* The connection may have gone meanwhile: found again by its
	 * address and request id, never used stale. */
	TAILQ_FOREACH(c, &q->ix->wk->conns, entry)
		if (c == q->c && c->ic.conn_id == q->conn_id)
			break;
	if (c != NULL && !c->closing) {
		snprintf(why, sizeof(why), "the embedder failed (%.200s): "
		    "keyword search only", err ? msg : "");
		search_reply(q->ix, c, q->text, q->limit, err ? NULL : vecs,
		    err ? 0 : dim, why);
	}
	free(q->text);
	free(q);
}

static void
post_search(struct index *ix, struct conn *c, const cJSON *body)
{
	const cJSON *qj = cJSON_GetObjectItemCaseSensitive(body, "query");
	const cJSON *lj = cJSON_GetObjectItemCaseSensitive(body, "limit");
	struct index_query *q;
	struct kbs *seg;
	size_t limit = 10, len;
	const char *t;

	if (!cJSON_IsString(qj) || qj->valuestring[0] == '\0' ||
	    strlen(qj->valuestring) > QUERY_MAX) {
		conn_http_error(c, 400, "BAD_REQUEST", "field 'query' must be "
		    "a string of 1 to 4096 bytes: {\"query\": \"words\", "
		    "\"limit\": 10}");
		return;
	}
	if (lj != NULL) {
		if (!cJSON_IsNumber(lj) || lj->valuedouble < 1 ||
		    lj->valuedouble > LIMIT_MAX ||
		    lj->valuedouble != (double)(int)lj->valuedouble) {
			conn_http_error(c, 400, "BAD_REQUEST", "field 'limit' "
			    "must be an integer from 1 to 50");
			return;
		}
		limit = (size_t)lj->valuedouble;
	}
	t = qj->valuestring;
	/* Hybrid when the index has vectors: the query's first. */
	if (!embed_enabled(ix->wk->conf) || (seg = seg_current(ix)) == NULL ||
	    kbs_dim(seg) == 0) {
		search_reply(ix, c, t, limit, NULL, 0, NULL);
		return;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->text = strdup(t)) == NULL) {
		free(q);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	q->ix = ix;
	q->c = c;
	q->conn_id = c->ic.conn_id;
	q->limit = limit;
	len = strlen(t);
	LIST_INSERT_HEAD(&ix->queries, q, entry);
	if ((q->er = embed_async(ix->wk, (const char *const *)&q->text, &len,
	    1, query_embedded, q)) == NULL) {
		LIST_REMOVE(q, entry);
		free(q->text);
		free(q);
		search_reply(ix, c, t, limit, NULL, 0, "the embedder could "
		    "not be asked (out of memory): keyword search only");
	}
}

int
index_http(struct conn *c)
{
	const struct http_request *r = &c->hp.req;
	struct index *ix;
	cJSON *body = NULL;
	char msg[256];
	int post = strcmp(r->method, "POST") == 0;

	if (strcmp(r->path, "/api/index") != 0 &&
	    strcmp(r->path, "/api/index/status") != 0 &&
	    strcmp(r->path, "/api/search") != 0)
		return 0;
	if (c->ic.role != IPC_ROLE_ADMIN) {
		conn_http_error(c, 403, "FORBIDDEN", "the index needs the "
		    "admin role");
		return 1;
	}
	if ((ix = index_get(c->wk)) == NULL) {
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return 1;
	}
	if (post && (body = proto_json(r->body, r->body_len,
	    c->wk->conf->max_json_depth, msg, sizeof(msg))) == NULL) {
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return 1;
	}
	if (strcmp(r->path, "/api/index/status") == 0) {
		if (strcmp(r->method, "GET") == 0)
			conn_http_reply(c, 200, status_view(ix));
		else
			conn_http_error(c, 405, "BAD_REQUEST", "use GET "
			    "/api/index/status");
	} else if (strcmp(r->path, "/api/search") == 0) {
		if (post)
			post_search(ix, c, body);
		else
			conn_http_error(c, 405, "BAD_REQUEST", "use POST "
			    "/api/search {\"query\": \"words\"}");
	} else if (post)
		post_index(ix, c, body);
	else if (strcmp(r->method, "DELETE") == 0)
		delete_index(ix, c);
	else
		conn_http_error(c, 405, "BAD_REQUEST", "use POST /api/index "
		    "{\"path\": \"/dir\"} to index a directory, DELETE "
		    "/api/index to remove the index");
	cJSON_Delete(body);
	return 1;
}

void
index_input(struct sess *s, const struct sess_from *from,
    const struct proto_in *in, struct sess_result *r)
{
	struct index *ix;
	struct index_src *src;
	char msg[512];
	int status;

	if (from->role != IPC_ROLE_USER && from->role != IPC_ROLE_AGENT &&
	    from->role != IPC_ROLE_ADMIN) {
		sess_result_err(r, "FORBIDDEN", 403, "%s", "index needs the "
		    "user, agent or admin role");
		return;
	}
	if ((ix = index_get(s->wk)) == NULL) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "out of memory; "
		    "retry");
		return;
	}
	if (index_start(ix, in->root, s->id, &src, &status, msg,
	    sizeof(msg)) == -1) {
		sess_result_err(r, code_of(status), status, "%s", msg);
		return;
	}
	r->http = 202;
}

/* ---- the worker's life ---- */

/* Every TICK_MS: take watch.lock if free; re-run a build that died. */
static void
tick_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct index *ix = arg;
	const char *state;
	char msg[256];
	cJSON *st;
	int lfd, status;

	(void)fd;
	(void)ev;
	if (ix->wk->draining || ix->wk->terminating) {
		/* A worker on its way out hands the watch to the new ones. */
		if (ix->watch != NULL)
			index_watch_stop(ix->watch);
		ix->watch = NULL;
		return;
	}
	if (ix->wk->conf->index_watch && ix->watch == NULL &&
	    (lfd = lock_take(ix, "watch.lock")) != -1 &&
	    (ix->watch = index_watch_start(ix->wk->base, ix->wk->conf,
	    ix->dir, lfd, watch_changed, ix)) == NULL)
		close(lfd);
	if (ix->b != NULL)
		return;
	st = status_load(ix);
	state = cJSON_GetStringValue(cJSON_GetObjectItem(st, "state"));
	if (state != NULL && strcmp(state, "running") == 0 &&
	    build_begin(ix, NULL, NULL, 1, &status, msg, sizeof(msg)) == -1 &&
	    status != 409 && status != 0)
		log_warnx("index: %s", msg);
	cJSON_Delete(st);
}

void
index_init(struct wk *wk)
{
	static const struct timeval tick = { TICK_MS / 1000, 0 };
	struct index *ix;

	if ((ix = index_get(wk)) == NULL)
		return;
	ix->tick_ev = event_new(wk->base, -1, EV_PERSIST, tick_cb, ix);
	ix->retry_ev = evtimer_new(wk->base, retry_cb, ix);
	if (ix->tick_ev == NULL || ix->retry_ev == NULL) {
		log_warnx("index: cannot make events");
		return;
	}
	event_add(ix->tick_ev, &tick);
	tick_cb(-1, 0, ix);
}

void
index_free(struct wk *wk)
{
	struct index *ix = wk->index;
	struct index_query *q;
	cJSON *st;

	if (ix == NULL || ix->wk != wk)
		return;
	if (ix->b != NULL) {
		/* Left "running": the next worker to look runs it again,
		 * and a worker's planned exit is not one of its tries. */
		ix->b->cancel = 1;
		pthread_join(ix->b->thr, NULL);
		st = status_load(ix);
		set_num(st, "attempts", 0);
		status_save(ix, st);
		cJSON_Delete(st);
		close(ix->lock_fd);
		index_srcs_free(ix->b->srcs, ix->b->nsrcs);
		pthread_mutex_destroy(&ix->b->mu);
		free(ix->b);
		event_free(ix->wake_ev);
		close(ix->pipe[0]);
		close(ix->pipe[1]);
	}
	while ((q = LIST_FIRST(&ix->queries)) != NULL) {
		LIST_REMOVE(q, entry);
		embed_cancel(q->er);
		free(q->text);
		free(q);
	}
	if (ix->watch != NULL)
		index_watch_stop(ix->watch);
	if (ix->tick_ev != NULL)
		event_free(ix->tick_ev);
	if (ix->retry_ev != NULL)
		event_free(ix->retry_ev);
	if (ix->seg != NULL)
		kbs_close(ix->seg);
	hv_clear(ix);
	free(ix);
	wk->index = NULL;
}
