/*
 * The worker pool: forking, restarting with backoff, the session routing
 * table, and reload by generations.  A session is routed to exactly one
 * worker at a time; that is what makes each session log single-writer.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/log.h"
#include "parley/util.h"
#include "parley/worker.h"
#include "supervisor.h"
#include "tls.h"

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	10000
#define STABLE_MS	10000	/* a worker that lived this long restarts at once */
#define MAX_HELD	1024	/* connections waiting for one restarting worker */

static void	worker_spawn(struct worker *);

static uint32_t
route_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

static struct route **
route_slot(struct sup *sup, const char *sid)
{
	struct route **rp;

	if (sup->nbuckets == 0) {
		sup->nbuckets = 1024;
		sup->routes = calloc(sup->nbuckets, sizeof(*sup->routes));
		if (sup->routes == NULL)
			fatal("calloc");
	}
	rp = &sup->routes[route_hash(sid) & (sup->nbuckets - 1)];
	while (*rp != NULL && strcmp((*rp)->sid, sid) != 0)
		rp = &(*rp)->next;
	return rp;
}

static void
route_grow(struct sup *sup)
{
	struct route **old = sup->routes, *r, *next;
	size_t i, n = sup->nbuckets;

	sup->nbuckets = n * 2;
	if ((sup->routes = calloc(sup->nbuckets, sizeof(*sup->routes))) == NULL)
		fatal("calloc");
	for (i = 0; i < n; i++)
		for (r = old[i]; r != NULL; r = next) {
			next = r->next;
			r->next = sup->routes[route_hash(r->sid) &
			    (sup->nbuckets - 1)];
			sup->routes[route_hash(r->sid) & (sup->nbuckets - 1)] = r;
		}
	free(old);
}

/* Drops every route that points at w (it died while draining, or left). */
static void
route_drop_worker(struct sup *sup, struct worker *w)
{
	struct route **rp, *r;
	size_t i;

	for (i = 0; i < sup->nbuckets; i++)
		for (rp = &sup->routes[i]; (r = *rp) != NULL;) {
			if (r->w == w) {
				*rp = r->next;
				free(r);
				sup->nroutes--;
			} else
				rp = &r->next;
		}
	w->routes = 0;
}

struct worker *
pool_least_loaded(struct sup *sup)
{
	struct worker *w, *best = NULL;
	uint64_t load, best_load = UINT64_MAX;

	TAILQ_FOREACH(w, &sup->workers, entry) {
		/* A restarting worker still takes work: it is held for it. */
		load = (uint64_t)w->routes * 4 + w->stats.connections +
		    (w->ready ? 0 : 1000000);
		if (load < best_load) {
			best = w;
			best_load = load;
		}
	}
	return best;
}

struct worker *
pool_route(struct sup *sup, const char *sid, int create)
{
	struct route **rp = route_slot(sup, sid), *r;
	struct worker *w;

	if (*rp != NULL)
		return (*rp)->w;
	if (!create || (w = pool_least_loaded(sup)) == NULL)
		return NULL;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	snprintf(r->sid, sizeof(r->sid), "%s", sid);
	r->w = w;
	*rp = r;
	w->routes++;
	if (++sup->nroutes > sup->nbuckets * 2)
		route_grow(sup);
	return w;
}

void
pool_forget(struct sup *sup, const char *sid, struct worker *w)
{
	struct route **rp = route_slot(sup, sid), *r = *rp;

	if (r == NULL || r->w != w)
		return;
	*rp = r->next;
	free(r);
	sup->nroutes--;
	w->routes--;
}

/*
 * A worker let go of sid after it had been handed connection hseq; a later
 * hand-off means it holds the session again, so the route stays.
 */
static void
route_release(struct sup *sup, const char *sid, struct worker *w,
    uint64_t hseq)
{
	struct route *r = *route_slot(sup, sid);

	if (r != NULL && r->w == w && r->hseq <= hseq)
		pool_forget(sup, sid, w);
}

/* Closes a connection no worker could take, with a short HTTP answer. */
static void
refuse(int fd)
{
	static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\n"
	    "Content-Type: application/json\r\nContent-Length: 77\r\n"
	    "Retry-After: 1\r\nConnection: close\r\n\r\n"
	    "{\"error\":{\"code\":\"OVERLOADED\",\"message\":\"worker restarting; retry\"}}";

	if (write(fd, msg, sizeof(msg) - 1) < 0)
		log_debug("refuse: write failed");
	close(fd);
}

int
pool_handoff(struct worker *w, int fd, const struct ipc_conn *ic0,
    const void *bytes)
{
	struct sup *sup = w->sup;
	struct ipc_conn icbuf = *ic0, *ic = &icbuf;
	struct held *h = NULL;
	struct route *r;
	struct timeval tv;

	ic->flags = 0;
	if (w->ready && w->chan != NULL) {
		ic->hseq = ++sup->next_hseq;
		if (ic->session[0] != '\0' &&
		    (r = *route_slot(sup, ic->session)) != NULL && r->w == w)
			r->hseq = ic->hseq;
		if (ipc_send(w->chan, IPC_CONN, fd, ic, sizeof(*ic), bytes,
		    ic->bytes_len) == -1) {
			log_warn("worker %d: hand-off failed", w->slot);
			return -1;
		}
		return 0;
	}
	if (w->nheld >= MAX_HELD || (h = calloc(1, sizeof(*h))) == NULL ||
	    (h->bytes = malloc(ic->bytes_len + 1)) == NULL) {
		if (h != NULL)
			free(h);
		refuse(fd);
		return -1;
	}
	h->fd = fd;
	h->ic = *ic;
	memcpy(h->bytes, bytes, ic->bytes_len);
	TAILQ_INSERT_TAIL(&w->held, h, entry);
	/* A worker that never comes up must not hold clients forever. */
	if (w->nheld++ == 0) {
		util_tv(&tv, w->conf->handshake_timeout_ms);
		evtimer_add(w->held_ev, &tv);
	}
	return 0;
}

static void
held_flush(struct worker *w, int refuse_all)
{
	struct held *h;

	evtimer_del(w->held_ev);
	while ((h = TAILQ_FIRST(&w->held)) != NULL) {
		TAILQ_REMOVE(&w->held, h, entry);
		w->nheld--;
		if (refuse_all)
			refuse(h->fd);
		else
			pool_handoff(w, h->fd, &h->ic, h->bytes);
		free(h->bytes);
		free(h);
	}
}

void
sup_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;
	socklen_t len;
	int fd;

	if (path == NULL || (path[0] != '/' && path[0] != '@') ||
	    strlen(path) >= sizeof(sun.sun_path))
		return;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	if (path[0] == '@')
		sun.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return;
	/* Never wait for systemd: the supervisor must not block. */
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT,
	    (struct sockaddr *)&sun, len) == -1)
		log_warn("sd_notify");
	close(fd);
}

static void
held_expire(evutil_socket_t fd, short ev, void *arg)
{
	struct worker *w = arg;

	log_warnx("worker %d: not ready in time; refusing %u waiting "
	    "connections", w->slot, w->nheld);
	held_flush(w, 1);
}

static void
worker_adopt_all(struct sup *sup, struct worker *w)
{
	struct ipc_sess is;
	struct route *r;
	size_t i;

	for (i = 0; i < sup->nbuckets; i++)
		for (r = sup->routes[i]; r != NULL; r = r->next)
			if (r->w == w) {
				memset(&is, 0, sizeof(is));
				snprintf(is.session, sizeof(is.session), "%s",
				    r->sid);
				ipc_send(w->chan, IPC_ADOPT, -1, &is,
				    sizeof(is), NULL, 0);
			}
}

static int
worker_msg(struct ipc_chan *chan, const struct ipc_hdr *h, const void *p,
    int fd, void *arg)
{
	struct worker *w = arg, *to;
	struct sup *sup = w->sup;
	const struct ipc_hello *hello;
	const struct ipc_sess *is;
	struct ipc_conn ic;
	const char *why;

	switch (h->type) {
	case 0:
		/* Broken or lying channel: never trust the worker again.  A
		 * worker that was asked to stop closes it as it exits. */
		if (w->pid > 0 && !w->draining && !sup->stopping) {
			log_warnx("worker %d (pid %d): ipc channel closed or "
			    "invalid; killing it", w->slot, (int)w->pid);
			kill(w->pid, SIGKILL);
		}
		return 0;
	case IPC_HELLO:
		hello = p;
		if (hello->slot != (uint32_t)w->slot ||
		    hello->pid != (uint32_t)w->pid || w->ready)
			return -1;
		w->ready = 1;
		log_debug("worker %d (pid %d) ready", w->slot, (int)w->pid);
		if (w->restarts > 0)
			worker_adopt_all(sup, w);
		held_flush(w, 0);
		if (!sup->notified_ready && pool_ready(sup) > 0) {
			TAILQ_FOREACH(to, &sup->workers, entry)
				if (!to->ready)
					return 0;
			sup->notified_ready = 1;
			sup_notify("READY=1\nSTATUS=serving");
			log_info("ready");
		}
		return 0;
	case IPC_REROUTE:
		memcpy(&ic, p, sizeof(ic));
		if (ipc_conn_check(&ic, h->len, &why) == -1 ||
		    ic.session[0] == '\0') {
			log_warnx("worker %d: %s", w->slot, why);
			close(fd);
			return -1;
		}
		/* A worker gives back a session it no longer holds. */
		if (ic.flags & IPC_CONN_F_NOT_HELD)
			route_release(sup, ic.session, w, ic.hseq);
		to = pool_route(sup, ic.session, 1);
		if (to == NULL || sup->stopping) {
			close(fd);
			return 0;
		}
		pool_handoff(to, fd, &ic, (const char *)p + sizeof(ic));
		return 0;
	case IPC_RELEASED:
		is = p;
		if (memchr(is->session, '\0', sizeof(is->session)) == NULL)
			return -1;
		route_release(sup, is->session, w, is->hseq);
		return 0;
	case IPC_STATS:
		memcpy(&w->stats, p, sizeof(w->stats));
		return 0;
	case IPC_METRICS:
		if (((const struct metrics *)p)->version != METRICS_VERSION)
			return -1;
		memcpy(&w->metrics, p, sizeof(w->metrics));
		return 0;
	case IPC_ANSWER: {
		const struct ipc_answer *a = p;

		if (a->len != h->len - sizeof(*a) || a->truncated > 1)
			return -1;
		control_answer(sup, w, a->id, (int)a->truncated,
		    (const char *)(a + 1), a->len);
		return 0;
	}
	default:
		if (fd != -1)
			close(fd);
		return -1;
	}
}

static void
worker_restart_cb(evutil_socket_t fd, short ev, void *arg)
{
	worker_spawn(arg);
}

static void
worker_spawn(struct worker *w)
{
	struct sup *sup = w->sup;
	sigset_t block, saved;
	int sv[2], i;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
		fatal("socketpair");
	/* Held until the child has its own dispositions: between dropping
	 * the supervisor's handlers and ignoring these, a group-wide HUP or
	 * USR1 would kill it. */
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &saved);
	switch (pid = fork()) {
	case -1:
		fatal("fork");
	case 0:
		/* The worker builds its own loop.  The supervisor's shares
		 * its epoll instance, so it is not freed here; only its
		 * signal events are dropped (that touches no fd). */
		for (i = 0; i < SUP_NSIGS; i++)
			if (sup->sigs[i] != NULL)
				event_del(sup->sigs[i]);
		/* A worker never needs the TLS private key. */
		tls_forget(sup);
		/* ^C in a terminal reaches the whole group, and so may
		 * `pkill -HUP/-USR1 parleyd`: the supervisor decides and
		 * tells workers over IPC. */
		signal(SIGHUP, SIG_IGN);
		signal(SIGUSR1, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		sigprocmask(SIG_SETMASK, &saved, NULL);
		log_forget_fd();
		if (dup2(sv[1], 3) == -1)
			_exit(1);
		close_range(4, ~0U, 0);
		/* close_range took the log file with it. */
		log_reopen();
		worker_main(w->conf, w->slot, 3, sup->quota);
	}
	sigprocmask(SIG_SETMASK, &saved, NULL);
	close(sv[1]);
	w->pid = pid;
	w->ready = 0;
	w->started_ms = util_mono_ms();
	memset(&w->stats, 0, sizeof(w->stats));
	if ((w->chan = ipc_chan_new(sup->base, sv[0], worker_msg, w)) == NULL)
		fatal("ipc channel");
	log_info("worker %d started (pid %d)", w->slot, (int)pid);
}

static struct worker *
worker_new(struct sup *sup, struct config *conf, int slot)
{
	struct worker *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	w->sup = sup;
	w->slot = slot;
	w->conf = conf;
	w->backoff_ms = BACKOFF_MIN_MS;
	TAILQ_INIT(&w->held);
	w->restart_ev = evtimer_new(sup->base, worker_restart_cb, w);
	w->held_ev = evtimer_new(sup->base, held_expire, w);
	return w;
}

static unsigned
worker_count(const struct config *conf)
{
	long n;

	if (conf->workers > 0)
		return conf->workers;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

void
pool_start(struct sup *sup)
{
	unsigned i, n = worker_count(sup->conf);
	struct worker *w;

	for (i = 0; i < n; i++) {
		w = worker_new(sup, sup->conf, (int)i);
		TAILQ_INSERT_TAIL(&sup->workers, w, entry);
		worker_spawn(w);
	}
}

static int
conf_in_use(struct sup *sup, struct config *conf)
{
	struct worker *w;

	if (conf == sup->conf)
		return 1;
	TAILQ_FOREACH(w, &sup->workers, entry)
		if (w->conf == conf)
			return 1;
	TAILQ_FOREACH(w, &sup->old, entry)
		if (w->conf == conf)
			return 1;
	return 0;
}

static void
worker_free(struct sup *sup, struct workerq *q, struct worker *w)
{
	struct config *conf = w->conf;

	TAILQ_REMOVE(q, w, entry);
	route_drop_worker(sup, w);
	held_flush(w, 1);
	if (w->chan)
		ipc_chan_free(w->chan);
	event_free(w->restart_ev);
	event_free(w->held_ev);
	free(w);
	if (!conf_in_use(sup, conf))
		config_free(conf);
}

static void
shutdown_send(struct worker *w, enum ipc_shutdown_mode mode, uint64_t ms)
{
	struct ipc_shutdown s;

	s.mode = mode;
	s.timeout_ms = (uint32_t)ms;
	if (w->chan != NULL)
		ipc_send(w->chan, IPC_SHUTDOWN, -1, &s, sizeof(s), NULL, 0);
}

/*
 * The current generation drains within ms: the table keeps its sessions
 * until each is released, so no session ever has two writers.  Workers
 * not running (restarting) have nothing to drain and go at once.
 */
static void
retire_all(struct sup *sup, uint64_t ms)
{
	struct worker *w, *next;

	while ((w = TAILQ_FIRST(&sup->workers)) != NULL) {
		TAILQ_REMOVE(&sup->workers, w, entry);
		TAILQ_INSERT_TAIL(&sup->old, w, entry);
		w->draining = 1;
		event_del(w->restart_ev);
		if (w->pid > 0)
			shutdown_send(w, IPC_SHUT_DRAIN, ms);
	}
	for (w = TAILQ_FIRST(&sup->old); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (w->pid == 0)
			worker_free(sup, &sup->old, w);
	}
}

void
pool_reload(struct sup *sup, struct config *conf)
{
	struct worker *w;
	unsigned i, n;

	/* First: a retired worker's config is freed with its last user. */
	sup->conf = conf;
	retire_all(sup, conf->drain_timeout_ms);
	n = worker_count(conf);
	for (i = 0; i < n; i++) {
		w = worker_new(sup, conf, (int)i);
		TAILQ_INSERT_TAIL(&sup->workers, w, entry);
		worker_spawn(w);
	}
}

void
pool_stop(struct sup *sup)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	struct worker *w;
	int i;

	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry) {
			event_del(w->restart_ev);
			held_flush(w, 1);
			if (w->pid > 0)
				shutdown_send(w, IPC_SHUT_TERMINATE,
				    sup->conf->shutdown_timeout_ms);
		}
}

void
pool_kill_all(struct sup *sup)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	struct worker *w;
	int i;

	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry)
			if (w->pid > 0) {
				log_warnx("worker %d (pid %d) did not stop in "
				    "time; killing it", w->slot, (int)w->pid);
				kill(w->pid, SIGKILL);
			}
}

int
pool_alive(struct sup *sup)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	struct worker *w;
	int i, n = 0;

	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry)
			if (w->pid > 0)
				n++;
	return n;
}

unsigned
pool_ready(struct sup *sup)
{
	struct worker *w;
	unsigned n = 0;

	TAILQ_FOREACH(w, &sup->workers, entry)
		if (w->ready)
			n++;
	return n;
}

static struct worker *
find_pid(struct sup *sup, pid_t pid, struct workerq **q)
{
	struct worker *w;

	TAILQ_FOREACH(w, &sup->workers, entry)
		if (w->pid == pid) {
			*q = &sup->workers;
			return w;
		}
	TAILQ_FOREACH(w, &sup->old, entry)
		if (w->pid == pid) {
			*q = &sup->old;
			return w;
		}
	return NULL;
}

void
pool_reap(struct sup *sup)
{
	struct workerq *q;
	struct worker *w;
	struct timeval tv;
	uint64_t lived;
	pid_t pid;
	int status;
	char why[64];

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if ((w = find_pid(sup, pid, &q)) == NULL)
			continue;
		if (WIFSIGNALED(status))
			snprintf(why, sizeof(why), "killed by signal %d (%s)",
			    WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			snprintf(why, sizeof(why), "exited with status %d",
			    WEXITSTATUS(status));
		w->pid = 0;
		w->ready = 0;
		/* Its last words: final counters, sessions it let go. */
		ipc_drain(w->chan);
		/* Counters stay monotonic over restarts: what the worker
		 * counted moves to the host's total (its last second of
		 * counting, if it crashed, is lost). */
		metrics_add(&sup->gone, &w->metrics, 0);
		metrics_init(&w->metrics);
		ipc_chan_free(w->chan);
		w->chan = NULL;
		if (w->draining || sup->stopping) {
			if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
				log_warnx("worker %d %s", w->slot, why);
			else
				log_info("worker %d (pid %d) stopped", w->slot,
				    (int)pid);
			if (w->draining)
				worker_free(sup, q, w);
			continue;
		}
		lived = util_mono_ms() - w->started_ms;
		if (lived >= STABLE_MS)
			w->backoff_ms = BACKOFF_MIN_MS;
		log_warnx("worker %d (pid %d) %s after %llu ms; restarting in "
		    "%llu ms", w->slot, (int)pid, why, (unsigned long long)lived,
		    (unsigned long long)w->backoff_ms);
		w->restarts++;
		sup->worker_restarts++;
		util_tv(&tv, w->backoff_ms);
		evtimer_add(w->restart_ev, &tv);
		w->backoff_ms *= 2;
		if (w->backoff_ms > BACKOFF_MAX_MS)
			w->backoff_ms = BACKOFF_MAX_MS;
	}
}

void
pool_totals(struct sup *sup, struct pool_totals *t)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	struct worker *w;
	int i;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry) {
			if (i == 0) {
				t->workers++;
				t->ready += w->ready != 0;
			} else
				t->draining++;
			if (w->ready && w->stats.store_down)
				t->store_down++;
			t->sessions += w->stats.sessions;
			t->connections += w->stats.connections;
			t->running += w->stats.running;
			t->events += (double)w->stats.events;
		}
}

void
pool_metrics_render(struct sup *sup, struct evbuffer *out)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	struct pool_totals t;
	struct metrics sum;
	struct metrics_sup ms;
	struct worker *w;
	int i;

	memset(&ms, 0, sizeof(ms));
	sum = sup->gone;
	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry)
			if (w->pid > 0)
				metrics_add(&sum, &w->metrics, 1);
	pool_totals(sup, &t);
	ms.workers = t.workers;
	ms.workers_ready = t.ready;
	ms.workers_draining = t.draining;
	ms.store_down = t.store_down;
	ms.worker_restarts = sup->worker_restarts;
	ms.uptime_seconds = (double)(util_mono_ms() - sup->started_ms) / 1000;
	metrics_render(out, &sum, &ms);
	tls_metrics(sup, out);
}

unsigned
pool_query(struct sup *sup, uint32_t id, const char *state, pid_t *asked,
    unsigned max)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	struct ipc_query q;
	struct worker *w;
	unsigned n = 0;
	int i;

	memset(&q, 0, sizeof(q));
	q.id = id;
	q.what = IPC_Q_SESSIONS;
	snprintf(q.state, sizeof(q.state), "%s", state);
	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry)
			if (n < max && w->ready && w->chan != NULL &&
			    ipc_send(w->chan, IPC_QUERY, -1, &q, sizeof(q),
			    NULL, 0) == 0)
				asked[n++] = w->pid;
	return n;
}

void
pool_log(struct sup *sup, uint32_t level, int reopen)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	struct ipc_log l;
	struct worker *w;
	int i;

	l.level = level;
	l.reopen = reopen ? 1 : 0;
	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry)
			if (w->chan != NULL)
				ipc_send(w->chan, IPC_LOG, -1, &l, sizeof(l),
				    NULL, 0);
}

void
pool_drain(struct sup *sup, uint64_t ms)
{
	struct worker *w;

	/* Older generations get the new bound too (the supervisor kills
	 * what outlives it). */
	TAILQ_FOREACH(w, &sup->old, entry)
		if (w->pid > 0)
			shutdown_send(w, IPC_SHUT_DRAIN, ms);
	retire_all(sup, ms);
}

/* Frees every worker record and the routing table once all have exited. */
void
pool_free_all(struct sup *sup)
{
	struct worker *w;
	size_t i;
	struct route *r;

	while ((w = TAILQ_FIRST(&sup->old)) != NULL)
		worker_free(sup, &sup->old, w);
	while ((w = TAILQ_FIRST(&sup->workers)) != NULL)
		worker_free(sup, &sup->workers, w);
	for (i = 0; i < sup->nbuckets; i++)
		while ((r = sup->routes[i]) != NULL) {
			sup->routes[i] = r->next;
			free(r);
		}
	free(sup->routes);
	sup->routes = NULL;
	sup->nbuckets = 0;
}
