/*
 * A worker process: one libevent loop that owns a set of sessions and all
 * of their connections.  It talks to the supervisor only through the IPC
 * channel; any message it does not expect ends it.
 */
#include <sys/resource.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"
#include "parley/worker.h"
#include "parley/ws.h"
#include "action.h"
#include "auditlog.h"
#include "conn.h"
#include "dash.h"
#include "deliver.h"
#include "follow.h"
#include "index.h"
#include "input.h"
#include "kb.h"
#include "kgs.h"
#include "life.h"
#include "route.h"
#include "llm.h"
#include "mcp.h"
#include "sess.h"
#include "team.h"
#include "thought.h"
#include "turn.h"
#include "wk.h"

/*
 * The parts of every session (sess.h), in the order their hooks run: the
 * team's roster comes first in a session_state, external agents after.
 */
static const struct sess_part *const parts[] = { &team_part, &life_part,
    &action_part, &thought_part, &dash_part, &kb_part, &index_part,
    &kgs_part, NULL };

#define STATS_MS	1000
#define SWEEP_MS	60000

static void	wk_terminate(struct wk *, uint64_t);
static void	wk_exit(struct wk *, int) __attribute__((noreturn));
static void	wk_metrics_send(struct wk *);

static void
wk_exit(struct wk *wk, int code)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&wk->conns)) != NULL)
		conn_drop(c);
	sess_release_all(wk, 0);
	/* Completes or drops opens still in flight; then free the rest. */
	store_close(wk->store);
	sess_release_all(wk, 1);
	index_free(wk);
	mcp_ctx_free(wk->mcp);
	llm_ctx_free(wk->llm);
	if (wk->chan != NULL) {
		/* The last counters: the supervisor keeps them once we are
		 * gone, so its totals never go backwards. */
		wk_metrics_send(wk);
		ipc_flush(wk->chan, 1000);
		ipc_chan_free(wk->chan);
	}
	event_free(wk->stats_ev);
	event_free(wk->sync_ev);
	if (wk->gather_ev != NULL)
		event_free(wk->gather_ev);
	if (wk->read_ev != NULL)
		event_free(wk->read_ev);
	event_free(wk->sweep_ev);
	if (wk->meta_ev != NULL)
		event_free(wk->meta_ev);
	event_free(wk->exit_ev);
	event_free(wk->sigterm_ev);
	event_base_free(wk->base);
	auditlog_close();
	config_free(wk->conf);
	free(wk);
	exit(code);
}

static void
exit_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct wk *wk = arg;

	if (!wk->terminating) {
		/* The drain bound passed: stop the rest as on SIGTERM. */
		wk_terminate(wk, 1000);
		return;
	}
	if (wk->nconns > 0 || wk->nsessions > 0)
		log_info("stopping with %u connections and %u sessions still "
		    "open", wk->nconns, wk->nsessions);
	wk_exit(wk, 0);
}

/* Stop now: log what is buffered, close every client with 1001. */
static void
wk_terminate(struct wk *wk, uint64_t timeout_ms)
{
	struct sess *s, *snext;
	struct conn *c, *cnext;
	struct timeval tv;

	if (wk->terminating)
		return;
	wk->terminating = 1;
	TAILQ_FOREACH(s, &wk->sessions, entry)
		sess_stop(s);
	store_sync(wk->store);
	for (c = TAILQ_FIRST(&wk->conns); c != NULL; c = cnext) {
		cnext = TAILQ_NEXT(c, entry);
		conn_close(c, WS_CLOSE_GOING_AWAY, "server shutting down; "
		    "reconnect with your lastSeq");
	}
	for (s = TAILQ_FIRST(&wk->sessions); s != NULL; s = snext) {
		snext = TAILQ_NEXT(s, entry);
		sess_release(s);
	}
	util_tv(&tv, timeout_ms < 2000 ? timeout_ms : 2000);
	evtimer_add(wk->exit_ev, &tv);
	wk_maybe_exit(wk);
}

/* After a reload: hand idle sessions back now, busy ones after their turn. */
static void
wk_drain(struct wk *wk, uint64_t timeout_ms)
{
	struct sess *s, *next;
	struct timeval tv;

	wk->draining = 1;
	for (s = TAILQ_FIRST(&wk->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		log_debug("drain: session %s %s", s->id, sess_busy(s) ?
		    "finishes its turn first" : "released");
		if (!sess_busy(s))
			sess_release(s);
	}
	util_tv(&tv, timeout_ms);
	event_del(wk->exit_ev);
	evtimer_assign(wk->exit_ev, wk->base, exit_cb, wk);
	/* Past the drain bound, whatever remains stops as on SIGTERM. */
	evtimer_add(wk->exit_ev, &tv);
	wk_maybe_exit(wk);
}

/* The session_state status a session counts under in the metrics. */
static enum metrics_state
wk_state(const struct sess *s)
{
	static const char *names[MS_NSTATES] = {
		[MS_CREATED] = "created", [MS_RUNNING] = "running",
		[MS_IDLE] = "idle", [MS_SUSPENDED] = "suspended",
		[MS_PAUSED] = "paused", [MS_COMPLETED] = "completed",
		[MS_FAILED] = "failed"
	};
	const char *st;
	int i;

	if (s->follower)
		return MS_FOLLOWING;
	st = sess_status(s);
	for (i = 0; i < MS_FOLLOWING; i++)
		if (strcmp(names[i], st) == 0)
			return (enum metrics_state)i;
	return MS_IDLE;
}

/*
 * Answers parleyctl's question about the sessions in memory (ipc.h).
 * A follower matches only "following": it mirrors another process's
 * session, which that process reports with its own status.
 */
static int
wk_query(struct wk *wk, const struct ipc_query *q)
{
	static const char more[] = "]";
	struct ipc_answer ans;
	struct evbuffer *out;
	struct sess *s;
	cJSON *o;
	char *txt;
	size_t len, need;
	int rc;

	if (memchr(q->state, '\0', sizeof(q->state)) == NULL ||
	    q->what != IPC_Q_SESSIONS)
		return -1;
	memset(&ans, 0, sizeof(ans));
	ans.id = q->id;
	if ((out = evbuffer_new()) == NULL)
		return 0;	/* the supervisor times the question out */
	evbuffer_add(out, "[", 1);
	TAILQ_FOREACH(s, &wk->sessions, entry) {
		if (s->loading || s->released || !sess_has_meta(s))
			continue;
		if (q->state[0] != '\0' && (s->follower ?
		    strcmp(q->state, "following") != 0 :
		    strcmp(q->state, sess_status(s)) != 0))
			continue;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "sessionId", s->id);
		cJSON_AddStringToObject(o, "status", s->follower ?
		    "following" : sess_status(s));
		cJSON_AddNumberToObject(o, "connections", s->feed.nsubs);
		cJSON_AddNumberToObject(o, "lastSeq",
		    (double)sess_last_seq(s));
		cJSON_AddBoolToObject(o, "paused", sess_paused(s));
		cJSON_AddBoolToObject(o, "follower", s->follower);
		/* For the supervisor's filter on GET /sessions; it is not
		 * passed on to a client. */
		if (cJSON_IsString(cJSON_GetObjectItem(sess_meta(s), "owner")))
			cJSON_AddStringToObject(o, "owner", cJSON_GetStringValue(
			    cJSON_GetObjectItem(sess_meta(s), "owner")));
		txt = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		if (txt == NULL)
			continue;
		len = evbuffer_get_length(out);
		need = len + (len > 1) + strlen(txt) + sizeof(more) - 1;
		if (need > IPC_ANSWER_MAX) {
			/* Cut at a whole object, and say so. */
			free(txt);
			ans.truncated = 1;
			break;
		}
		if (len > 1)
			evbuffer_add(out, ",", 1);
		evbuffer_add(out, txt, strlen(txt));
		free(txt);
	}
	evbuffer_add(out, more, sizeof(more) - 1);
	ans.len = (uint32_t)evbuffer_get_length(out);
	rc = 0;
	if (wk->chan != NULL)
		rc = ipc_send(wk->chan, IPC_ANSWER, -1, &ans, sizeof(ans),
		    evbuffer_pullup(out, -1), ans.len);
	evbuffer_free(out);
	if (rc == -1)
		log_warnx("could not answer the supervisor's query %u", q->id);
	return 0;
}

/* Log level and log file changes the operator asked for. */
static int
wk_log(const struct ipc_log *l)
{
	if (l->level != IPC_LOG_KEEP) {
		if (l->level > LOG_LEVEL_DEBUG)
			return -1;
		log_setlevel((enum log_level)l->level);
	}
	if (l->reopen && log_reopen() == -1)
		log_warn("reopening the log file");
	if (l->reopen)
		auditlog_reopen();
	return 0;
}

static int
wk_msg(struct ipc_chan *chan, const struct ipc_hdr *h, const void *p,
    int fd, void *arg)
{
	struct wk *wk = arg;
	const struct ipc_conn *ic;
	const struct ipc_sess *is;
	const struct ipc_shutdown *sd;
	const char *err;

	switch (h->type) {
	case 0:
		/* The supervisor is gone or spoke nonsense: stop cleanly. */
		log_warnx("supervisor channel closed; stopping");
		wk->chan = NULL;
		wk_terminate(wk, 1000);
		return 0;
	case IPC_CONN:
		ic = p;
		if (ipc_conn_check(ic, h->len, &err) == -1 ||
		    ic->hseq <= wk->hseq) {
			log_warnx("supervisor: %s", err);
			close(fd);
			return -1;
		}
		wk->hseq = ic->hseq;
		conn_new(wk, fd, ic, (const unsigned char *)(ic + 1),
		    &route_handler);
		return 0;
	case IPC_ADOPT:
		is = p;
		if (memchr(is->session, '\0', sizeof(is->session)) == NULL ||
		    !store_valid_id(is->session))
			return -1;
		/* A failed load tells the supervisor itself. */
		if (wk->draining || wk->terminating)
			wk_released(wk, is->session);
		else
			sess_load(wk, is->session, 0, NULL, NULL);
		return 0;
	case IPC_SHUTDOWN:
		sd = p;
		if (sd->mode == IPC_SHUT_TERMINATE)
			wk_terminate(wk, sd->timeout_ms);
		else if (sd->mode == IPC_SHUT_DRAIN)
			wk_drain(wk, sd->timeout_ms);
		else
			return -1;
		return 0;
	case IPC_QUERY:
		return wk_query(wk, p);
	case IPC_LOG:
		return wk_log(p);
	default:
		if (fd != -1)
			close(fd);
		return -1;
	}
}

static void
stats_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct wk *wk = arg;
	struct ipc_stats st;
	struct sess *s;

	util_trim(&wk->trimmed_ms, 5000);

	memset(&st, 0, sizeof(st));
	st.sessions = wk->nsessions;
	st.connections = wk->nconns;
	TAILQ_FOREACH(s, &wk->sessions, entry)
		if (s->turn != NULL)
			st.running++;
	st.events = wk->events;
	st.store_down = !wk->store_up;
	if (wk->chan != NULL)
		ipc_send(wk->chan, IPC_STATS, -1, &st, sizeof(st), NULL, 0);
	wk_metrics_send(wk);
}

/* The counters, with the gauges as they are now, to the supervisor. */
static void
wk_metrics_send(struct wk *wk)
{
	struct metrics *m = &wk->metrics;
	struct sess *s;
	struct conn *c;

	memset(m->connections, 0, sizeof(m->connections));
	memset(m->sessions, 0, sizeof(m->sessions));
	TAILQ_FOREACH(c, &wk->conns, entry)
		m->connections[c->kind == CONN_WS ? MT_WEBSOCKET :
		    c->kind == CONN_SSE ? MT_SSE : MT_HTTP]++;
	TAILQ_FOREACH(s, &wk->sessions, entry)
		if (!s->loading && sess_has_meta(s))
			m->sessions[wk_state(s)]++;
	m->events_appended = wk->events;
	if (wk->chan != NULL)
		ipc_send(wk->chan, IPC_METRICS, -1, m, sizeof(*m), NULL, 0);
}

/* The store's reachability: /health/ready follows it at once. */
static void
store_health(void *arg, int up)
{
	struct wk *wk = arg;

	if (wk->store_up == up)
		return;
	wk->store_up = up;
	if (up)
		log_info("store reachable");
	else
		log_warnx("store unreachable; sessions wait for it");
	stats_cb(-1, 0, wk);
}

static const struct store_events wk_store_events = {
	.durable = sess_store_durable,
	.failed = sess_store_failed,
	.grown = follow_grown,
	.input = input_inbox,
	.vacant = follow_vacant,
	.health = store_health,
};

static void
sync_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct wk *wk = arg;

	store_sync(wk->store);
}

static void
sweep_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct wk *wk = arg;
	struct sess *s;
	uint64_t cutoff = util_now_ms() - wk->conf->retention_ms;
	int n;

	/* A project's knowledge (kg:) is kept: store_retained(). */
	TAILQ_FOREACH(s, &wk->sessions, entry)
		if (s->st != NULL && !store_retained(s->id))
			store_trim(s->st, cutoff);
	/* One worker removes expired sessions; the store skips open ones. */
	if (wk->slot == 0 && (n = store_expire(wk->store, cutoff)) > 0)
		log_info("retention: removed %d expired sessions", n);
}

static void
sigterm_cb(evutil_socket_t sig, short ev, void *arg)
{
	wk_terminate(arg, 2000);
}

void
worker_main(struct config *conf, int slot, int ipc_fd, struct quota *quota)
{
	static const struct timeval stats_tv = { STATS_MS / 1000, 0 };
	struct timeval hb, sweep_tv;
	struct ipc_hello hello;
	struct store_params sp;
	struct wk *wk;
	char name[32], err[512];
	int i;

	snprintf(name, sizeof(name), "worker %d", slot);
	log_procname(name);
	/* ^C in a terminal reaches the whole group; the supervisor decides. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if ((wk = calloc(1, sizeof(*wk))) == NULL)
		fatal("calloc");
	wk->conf = conf;
	wk->quota = quota;
	wk->slot = slot;
	wk->started_ms = util_mono_ms();
	metrics_init(&wk->metrics);
	wk->agent = &turn_agent;
	wk->parts = parts;
	TAILQ_INIT(&wk->sessions);
	TAILQ_INIT(&wk->thawed);
	TAILQ_INIT(&wk->conns);
	TAILQ_INIT(&wk->gather);
	TAILQ_INIT(&wk->read_wait);
	for (i = 0; i < WK_SESS_BUCKETS; i++)
		TAILQ_INIT(&wk->buckets[i]);
	if ((wk->base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((wk->store = store_open(conf->store, conf->state_dir,
	    (enum store_fsync)conf->fsync, err, sizeof(err))) == NULL)
		fatalx("store: %s", err);
	snprintf(wk->node, sizeof(wk->node), "%s/%d", conf->host_id,
	    (int)getpid());
	memset(&sp, 0, sizeof(sp));
	sp.base = wk->base;
	sp.node = wk->node;
	sp.lease_ms = (unsigned)conf->lease_ms;
	sp.retention_ms = conf->retention_ms;
	sp.wait_replicas = conf->store_wait;
	sp.wait_ms = conf->store_wait_ms;
	sp.ev = &wk_store_events;
	sp.arg = wk;
	wk->store_up = 1;
	if (store_attach(wk->store, &sp, err, sizeof(err)) == -1)
		fatalx("store: %s", err);
	wk->store_up = store_healthy(wk->store);
	wk->sess_fds = (unsigned)store_sess_fds(wk->store);
	{
		struct rlimit rl;

		wk->fd_limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < UINT_MAX ?
		    (unsigned)rl.rlim_cur : UINT_MAX;
	}
	if ((wk->chan = ipc_chan_new(wk->base, ipc_fd, wk_msg, wk)) == NULL)
		fatalx("ipc channel");
	/* The supervisor made it ours; a failure is logged and costs the
	 * file its entries, not the sessions their work. */
	auditlog_open(conf->audit_log);
	if ((wk->llm = llm_ctx_new(wk->base)) == NULL ||
	    (wk->mcp = mcp_ctx_new(wk->base, conf)) == NULL)
		fatalx("llm or mcp context: out of memory");
	util_tv(&hb, conf->heartbeat_ms);
	wk->hb_tv = event_base_init_common_timeout(wk->base, &hb);
	wk->stats_ev = event_new(wk->base, -1, EV_PERSIST, stats_cb, wk);
	event_add(wk->stats_ev, &stats_tv);
	wk->sync_ev = evtimer_new(wk->base, sync_cb, wk);
	wk->gather_ev = event_new(wk->base, -1, 0, conn_gather_cb, wk);
	wk->read_ev = event_new(wk->base, -1, 0, deliver_read_wake_cb, wk);
	if (wk->gather_ev == NULL || wk->read_ev == NULL)
		fatalx("worker: cannot make events");
	wk->sweep_ev = event_new(wk->base, -1, EV_PERSIST, sweep_cb, wk);
	/* Often enough that nothing outlives retention by more than a
	 * quarter of it (a minute at most). */
	util_tv(&sweep_tv, conf->retention_ms / 4 < 1000 ? 1000 :
	    conf->retention_ms / 4 > SWEEP_MS ? SWEEP_MS :
	    conf->retention_ms / 4);
	event_add(wk->sweep_ev, &sweep_tv);
	wk->exit_ev = evtimer_new(wk->base, exit_cb, wk);
	wk->sigterm_ev = evsignal_new(wk->base, SIGTERM, sigterm_cb, wk);
	evsignal_add(wk->sigterm_ev, NULL);
	/* The directory index's watcher and re-runs (index.c). */
	index_init(wk);

	memset(&hello, 0, sizeof(hello));
	hello.slot = (uint32_t)slot;
	hello.pid = (uint32_t)getpid();
	ipc_send(wk->chan, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0);
	event_base_dispatch(wk->base);
	wk_exit(wk, 0);
}
