/*
 * The directory index's watcher (index-watch yes): one thread, in the
 * worker holding STATE_DIR/index/watch.lock, watching every directory of
 * the index's sources with inotify(7).  After a burst of changes has been
 * quiet for WATCH_QUIET_MS (or has lasted WATCH_BURST_MS) it tells the
 * loop, which runs an incremental build; the sources are read again from
 * status.json every WATCH_POLL_MS, so a directory indexed by another
 * worker is watched too.
 */
#include <sys/types.h>
#include <sys/inotify.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <cjson/cJSON.h>

#include "parley/log.h"
#include "parley/util.h"
#include "index_int.h"

#define WATCH_QUIET_MS	300
#define WATCH_BURST_MS	1000
#define WATCH_POLL_MS	1000
#define WATCH_MASK	(IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | \
			    IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
			    IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | \
			    IN_EXCL_UNLINK)

struct index_watch {
	const struct config *conf;
	char		 dir[PATH_MAX];
	int		 lock_fd;	/* watch.lock, held */
	int		 notify[2];	/* thread -> loop */
	int		 ctl[2];	/* loop -> thread: stop */
	struct event	*ev;
	void		(*changed)(void *);
	void		*arg;
	pthread_t	 thr;
	volatile int	 stop;
	int		 ino;		/* the thread's */
	unsigned	 nwatch;
	int		 full_warned;
};

/* status.json's sources as text (malloc'd), or NULL. */
static char *
sources_text(const struct index_watch *w)
{
	char *buf = index_status_text(w->dir), *t = NULL;
	cJSON *o;

	if (buf != NULL && (o = cJSON_Parse(buf)) != NULL) {
		t = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "sources"));
		cJSON_Delete(o);
	}
	free(buf);
	return t;
}

static int
add_one(void *arg, const char *path)
{
	struct index_watch *w = arg;

	if (w->stop)
		return 1;
	if (inotify_add_watch(w->ino, path, WATCH_MASK) == -1) {
		if (errno == ENOSPC && !w->full_warned) {
			w->full_warned = 1;
			log_warnx("index: cannot watch %s: too many watches; "
			    "raise fs.inotify.max_user_watches", path);
		}
		return 0;
	}
	w->nwatch++;
	return 0;
}

/* Watches every directory of the sources in text (status.json's). */
static void
watch_all(struct index_watch *w, const char *text)
{
	struct index_src *srcs;
	cJSON *a = text != NULL ? cJSON_Parse(text) : NULL;
	size_t n, i;

	srcs = index_srcs_from(a, &n);
	/* A source no root holds now, or swapped for a link, is not
	 * watched (index_walk_dirs checks); the next build drops it. */
	for (i = 0; i < n && !w->stop; i++)
		index_walk_dirs(w->conf, &srcs[i], add_one, w);
	index_srcs_free(srcs, n);
	cJSON_Delete(a);
}

static void *
watch_main(void *arg)
{
	struct index_watch *w = arg;
	struct pollfd pf[2];
	char buf[16384] __attribute__((aligned(8))), *text = NULL, *t, x = 'c';
	const struct inotify_event *e;
	uint64_t now, first = 0, last = 0, polled = 0;
	ssize_t n;
	int timeout, rewatch;

	while (!w->stop) {
		now = util_mono_ms();
		if (now - polled >= WATCH_POLL_MS) {
			polled = now;
			t = sources_text(w);
			if (t != NULL && (text == NULL || strcmp(t, text))) {
				/* New sources: watched afresh. */
				close(w->ino);
				w->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
				w->nwatch = 0;
				watch_all(w, t);
				free(text);
				text = t;
				/* What changed before the watches were set is
				 * caught by a build now (one with nothing to do
				 * reads nothing). */
				if (strcmp(t, "[]") != 0 && write(w->notify[1],
				    &x, 1) == -1) {
					/* full: a wake-up is pending */
				}
			} else
				free(t);
		}
		timeout = WATCH_POLL_MS;
		if (first != 0)
			timeout = WATCH_QUIET_MS;
		pf[0].fd = w->ino;
		pf[0].events = POLLIN;
		pf[1].fd = w->ctl[0];
		pf[1].events = POLLIN;
		if (poll(pf, 2, timeout) == -1 && errno != EINTR)
			break;
		if (pf[1].revents & POLLIN) {
			/* stop, or read the sources again now */
			while (read(w->ctl[0], &x, 1) > 0)
				;
			x = 'c';
			polled = 0;
			continue;
		}
		rewatch = 0;
		if (pf[0].revents & POLLIN) {
			while ((n = read(w->ino, buf, sizeof(buf))) > 0)
				for (e = (const void *)buf; (const char *)e <
				    buf + n; e = (const void *)((const char *)e +
				    sizeof(*e) + e->len)) {
					if ((e->mask & IN_ISDIR) && (e->mask &
					    (IN_CREATE | IN_MOVED_TO)))
						rewatch = 1;
					if (e->mask & IN_Q_OVERFLOW)
						rewatch = 1;
					if (e->mask & IN_IGNORED)
						continue;
					last = util_mono_ms();
					if (first == 0)
						first = last;
				}
		}
		/* A new directory is watched at once, before its files
		 * change unseen. */
		if (rewatch)
			watch_all(w, text);
		now = util_mono_ms();
		if (first != 0 && (now - last >= WATCH_QUIET_MS ||
		    now - first >= WATCH_BURST_MS)) {
			first = 0;
			if (write(w->notify[1], &x, 1) == -1) {
				/* full: the loop has a wake-up already */
			}
		}
	}
	free(text);
	return NULL;
}

static void
notify_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct index_watch *w = arg;
	char buf[64];

	(void)ev;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	w->changed(w->arg);
}

struct index_watch *
index_watch_start(struct event_base *base, const struct config *conf,
    const char *dir, int lock_fd, void (*changed)(void *), void *arg)
{
	struct index_watch *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	w->conf = conf;
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	w->changed = changed;
	w->arg = arg;
	w->notify[0] = w->notify[1] = w->ctl[0] = w->ctl[1] = -1;
	if ((w->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) == -1 ||
	    pipe2(w->notify, O_CLOEXEC | O_NONBLOCK) == -1 ||
	    pipe2(w->ctl, O_CLOEXEC | O_NONBLOCK) == -1 ||
	    (w->ev = event_new(base, w->notify[0], EV_READ | EV_PERSIST,
	    notify_cb, w)) == NULL)
		goto fail;
	if (pthread_create(&w->thr, NULL, watch_main, w) != 0)
		goto fail;
	event_add(w->ev, NULL);
	w->lock_fd = lock_fd;
	log_info("index: watching the indexed directories");
	return w;
fail:
	log_warn("index: cannot start the watcher");
	if (w->ev != NULL)
		event_free(w->ev);
	if (w->ino != -1)
		close(w->ino);
	if (w->notify[0] != -1) {
		close(w->notify[0]);
		close(w->notify[1]);
	}
	if (w->ctl[0] != -1) {
		close(w->ctl[0]);
		close(w->ctl[1]);
	}
	free(w);
	return NULL;
}

void
index_watch_poke(struct index_watch *w)
{
	char x = 'r';

	if (write(w->ctl[1], &x, 1) == -1) {
		/* full: it reads them soon */
	}
}

void
index_watch_stop(struct index_watch *w)
{
	char x = 's';

	w->stop = 1;
	if (write(w->ctl[1], &x, 1) == -1) {
		/* the flag is enough within a poll's timeout */
	}
	pthread_join(w->thr, NULL);
	event_free(w->ev);
	close(w->ino);
	close(w->notify[0]);
	close(w->notify[1]);
	close(w->ctl[0]);
	close(w->ctl[1]);
	close(w->lock_fd);
	free(w);
}
