/*
 * The control socket: parleyctl's way in (protocol in parley/ctl.h).  A
 * Unix stream socket whose peers are checked by uid; their requests go
 * through the listener's bounded HTTP reader, and those under
 * /control/v1/ are answered here.  Questions about sessions go to every
 * worker and are answered when all have replied or after CTL_QUERY_MS.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "parley/config.h"
#include "parley/proto.h"
#include "parley/ctl.h"
#include "parley/http.h"
#include "parley/log.h"
#include "parley/util.h"
#include "supervisor.h"

#define CTL_QUERY_MS	3000
#define CTL_ASK_MAX	512	/* workers of both generations */
#define CTL_CLIENT_QUERIES 64	/* GET /sessions waiting at once */

/* A sessions question waiting for the workers' answers. */
struct ctlq {
	TAILQ_ENTRY(ctlq)	 entry;
	struct sup		*sup;
	uint32_t		 id;
	int			 fd;
	unsigned		 nwait;
	pid_t			 asked[CTL_ASK_MAX];	/* 0 once answered */
	int			 truncated;
	cJSON			*list;
	struct event		*tmo;
	/* GET /sessions from a client: whose list it is (see
	 * control_sessions); NULL for parleyctl, who sees everything. */
	struct ipc_conn		*who;
};

static void
ctl_json(struct sup *sup, int fd, int status, cJSON *body)
{
	struct evbuffer *out = evbuffer_new();
	char *s = cJSON_PrintUnformatted(body);

	if (out == NULL || s == NULL) {
		free(s);
		if (out != NULL)
			evbuffer_free(out);
		cJSON_Delete(body);
		close(fd);
		return;
	}
	http_respond(out, status, "application/json", s, strlen(s), NULL);
	free(s);
	cJSON_Delete(body);
	listener_reply(sup, fd, out);
}

static void
ctl_error(struct sup *sup, int fd, int status, const char *code,
    const char *msg)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		close(fd);
		return;
	}
	http_respond_error(out, status, code, msg);
	listener_reply(sup, fd, out);
}

static const char *
level_name(enum log_level l)
{
	static const char *names[] = { "error", "warn", "info", "debug" };

	return (unsigned)l < 4 ? names[l] : "info";
}

static const char *
worker_state(const struct worker *w, int old)
{
	if (old || w->draining)
		return "draining";
	if (w->pid == 0)
		return "restarting";
	return w->ready ? "ready" : "starting";
}

static void
answer_status(struct sup *sup, int fd)
{
	struct pool_totals t;
	cJSON *o = cJSON_CreateObject(), *st, *wo;

	pool_totals(sup, &t);
	cJSON_AddStringToObject(o, "name", "parleyd");
	cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
	cJSON_AddNumberToObject(o, "protocol", 1);
	cJSON_AddNumberToObject(o, "control", CTL_VERSION);
	cJSON_AddNumberToObject(o, "pid", (double)getpid());
	cJSON_AddStringToObject(o, "hostId", sup->conf->host_id);
	cJSON_AddNumberToObject(o, "uptimeSeconds",
	    (double)((util_mono_ms() - sup->started_ms) / 1000));
	cJSON_AddStringToObject(o, "state", sup->stopping ? "stopping" :
	    sup->draining ? "draining" : "serving");
	if (sup->conf->path != NULL)
		cJSON_AddStringToObject(o, "config", sup->conf->path);
	else
		cJSON_AddNullToObject(o, "config");
	st = cJSON_AddObjectToObject(o, "store");
	cJSON_AddStringToObject(st, "type",
	    strcmp(sup->conf->store, "local") == 0 ? "local" : "redis");
	cJSON_AddStringToObject(st, "status", t.store_down ? "unreachable" :
	    "ok");
	wo = cJSON_AddObjectToObject(o, "workers");
	cJSON_AddNumberToObject(wo, "total", t.workers);
	cJSON_AddNumberToObject(wo, "ready", t.ready);
	cJSON_AddNumberToObject(wo, "draining", t.draining);
	cJSON_AddNumberToObject(o, "connections", t.connections);
	cJSON_AddNumberToObject(o, "sessions", t.sessions);
	cJSON_AddNumberToObject(o, "running", t.running);
	cJSON_AddNumberToObject(o, "eventsAppended", t.events);
	cJSON_AddNumberToObject(o, "workerRestarts",
	    (double)sup->worker_restarts);
	cJSON_AddStringToObject(o, "logLevel", level_name(log_getlevel()));
	ctl_json(sup, fd, 200, o);
}

static void
answer_workers(struct sup *sup, int fd)
{
	struct workerq *lists[2] = { &sup->workers, &sup->old };
	cJSON *o = cJSON_CreateObject(), *arr, *x;
	struct worker *w;
	uint64_t now = util_mono_ms();
	int i;

	arr = cJSON_AddArrayToObject(o, "workers");
	for (i = 0; i < 2; i++)
		TAILQ_FOREACH(w, lists[i], entry) {
			x = cJSON_CreateObject();
			cJSON_AddNumberToObject(x, "slot", w->slot);
			cJSON_AddNumberToObject(x, "pid", (double)w->pid);
			cJSON_AddStringToObject(x, "state",
			    worker_state(w, i == 1));
			cJSON_AddNumberToObject(x, "uptimeSeconds", w->pid > 0 ?
			    (double)((now - w->started_ms) / 1000) : 0);
			cJSON_AddNumberToObject(x, "sessions",
			    w->stats.sessions);
			cJSON_AddNumberToObject(x, "connections",
			    w->stats.connections);
			cJSON_AddNumberToObject(x, "running", w->stats.running);
			cJSON_AddNumberToObject(x, "restarts",
			    (double)w->restarts);
			cJSON_AddNumberToObject(x, "eventsAppended",
			    (double)w->stats.events);
			cJSON_AddBoolToObject(x, "storeDown",
			    w->ready && w->stats.store_down);
			cJSON_AddItemToArray(arr, x);
		}
	ctl_json(sup, fd, 200, o);
}

static void
ctlq_free(struct ctlq *q)
{
	TAILQ_REMOVE(&q->sup->ctlqs, q, entry);
	event_free(q->tmo);
	cJSON_Delete(q->list);
	if (q->fd != -1)
		close(q->fd);
	free(q->who);
	free(q);
}

static void
ctlq_finish(struct ctlq *q, int incomplete)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddItemToObject(o, "sessions", q->list);
	q->list = NULL;
	cJSON_AddBoolToObject(o, "truncated", q->truncated);
	if (incomplete)
		cJSON_AddNumberToObject(o, "workersNotAnswering", q->nwait);
	ctl_json(q->sup, q->fd, 200, o);
	q->fd = -1;
	ctlq_free(q);
}

static void
ctlq_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct ctlq *q = arg;

	log_warnx("control: %u workers did not answer a sessions question "
	    "in %d ms", q->nwait, CTL_QUERY_MS);
	ctlq_finish(q, 1);
}

/*
 * Asks every worker for the sessions in memory, answering fd when all
 * have answered; who (copied; NULL for parleyctl) limits the list to what
 * that client may open.
 */
static void
ask_sessions(struct sup *sup, int fd, const struct http_request *req,
    const struct ipc_conn *who)
{
	static const char *states[] = { "created", "running", "idle",
	    "suspended", "paused", "completed", "failed", "following" };
	struct ctlq *q;
	struct timeval tv;
	char state[16];
	size_t i;
	int r;

	r = http_query_param(req->query, "state", state, sizeof(state));
	if (r == -2) {
		ctl_error(sup, fd, 400, "BAD_REQUEST", "state: too long");
		return;
	}
	if (r == 0) {
		for (i = 0; i < sizeof(states) / sizeof(states[0]); i++)
			if (strcmp(state, states[i]) == 0)
				break;
		if (i == sizeof(states) / sizeof(states[0])) {
			ctl_error(sup, fd, 400, "BAD_REQUEST", "state must be "
			    "created, running, idle, suspended, paused, "
			    "completed, failed or following");
			return;
		}
	}
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->list = cJSON_CreateArray()) == NULL ||
	    (q->tmo = evtimer_new(sup->base, ctlq_timeout, q)) == NULL) {
		if (q != NULL) {
			cJSON_Delete(q->list);
			free(q);
		}
		ctl_error(sup, fd, 500, "INTERNAL", "out of memory");
		return;
	}
	if (who != NULL) {
		if ((q->who = malloc(sizeof(*q->who))) == NULL) {
			cJSON_Delete(q->list);
			event_free(q->tmo);
			free(q);
			ctl_error(sup, fd, 500, "INTERNAL", "out of memory");
			return;
		}
		memcpy(q->who, who, sizeof(*who));
	}
	q->sup = sup;
	q->fd = fd;
	q->id = ++sup->next_query;
	TAILQ_INSERT_TAIL(&sup->ctlqs, q, entry);
	q->nwait = pool_query(sup, q->id, r == 0 ? state : "", q->asked,
	    CTL_ASK_MAX);
	if (q->nwait == 0) {
		ctlq_finish(q, 0);
		return;
	}
	util_tv(&tv, CTL_QUERY_MS);
	evtimer_add(q->tmo, &tv);
}

void
control_sessions(struct sup *sup, int fd, const struct http_request *req,
    const struct ipc_conn *who)
{
	struct ctlq *q;
	unsigned n = 0;

	/* Each waits up to CTL_QUERY_MS outside the pending limits and asks
	 * every worker: clients get a bounded share. */
	TAILQ_FOREACH(q, &sup->ctlqs, entry)
		if (q->who != NULL)
			n++;
	if (n >= CTL_CLIENT_QUERIES) {
		ctl_error(sup, fd, 503, "OVERLOADED", "too many session lists "
		    "are being made at once; retry in a moment");
		return;
	}
	ask_sessions(sup, fd, req, who);
}

/*
 * Whether a worker's entry x goes to q's client, trimmed to what a client
 * is told: a session it may open (scope and owner, as when it connects),
 * once (not the mirrors other workers follow), without where it runs.
 */
static int
ctlq_keep(const struct ctlq *q, cJSON *x)
{
	const char *sid = cJSON_GetStringValue(cJSON_GetObjectItem(x,
	    "sessionId")), *owner = cJSON_GetStringValue(
	    cJSON_GetObjectItem(x, "owner"));

	if (q->who == NULL)
		return 1;
	if (sid == NULL || cJSON_IsTrue(cJSON_GetObjectItem(x, "follower")) ||
	    !ipc_scope_allows(q->who->scope, sid) ||
	    !ipc_owner_allows(owner, q->who, sid))
		return 0;
	cJSON_DeleteItemFromObject(x, "owner");
	cJSON_DeleteItemFromObject(x, "follower");
	cJSON_DeleteItemFromObject(x, "connections");
	return 1;
}

void
control_answer(struct sup *sup, struct worker *w, uint32_t id,
    int truncated, const char *json, size_t len)
{
	struct ctlq *q;
	cJSON *arr, *x, *next;

	unsigned i;

	TAILQ_FOREACH(q, &sup->ctlqs, entry)
		if (q->id == id)
			break;
	if (q == NULL)
		return;		/* it timed out */
	/* One answer from each worker asked, no more. */
	for (i = 0; i < CTL_ASK_MAX; i++)
		if (q->asked[i] != 0 && q->asked[i] == w->pid)
			break;
	if (i == CTL_ASK_MAX) {
		log_warnx("worker %d: an answer it was not asked for; ignored",
		    w->slot);
		return;
	}
	q->asked[i] = 0;
	/* A worker's answer is trusted no further than its shape. */
	if ((arr = cJSON_ParseWithLength(json, len)) == NULL ||
	    !cJSON_IsArray(arr)) {
		log_warnx("worker %d: sessions answer is not a JSON array",
		    w->slot);
		cJSON_Delete(arr);
	} else {
		for (x = arr->child; x != NULL; x = next) {
			next = x->next;
			if (!cJSON_IsObject(x) || !ctlq_keep(q, x))
				continue;
			cJSON_DetachItemViaPointer(arr, x);
			if (q->who == NULL) {
				cJSON_AddNumberToObject(x, "worker", w->slot);
				cJSON_AddNumberToObject(x, "pid",
				    (double)w->pid);
			}
			cJSON_AddItemToArray(q->list, x);
		}
		cJSON_Delete(arr);
	}
	q->truncated |= truncated;
	if (q->nwait > 0 && --q->nwait == 0)
		ctlq_finish(q, 0);
}

static void
set_log_level(struct sup *sup, int fd, const struct http_request *req)
{
	cJSON *b, *lv, *o;
	enum log_level l;
	char msg[200];

	/* The one check for JSON from outside, as every endpoint's. */
	b = proto_json(req->body ? req->body : "", req->body_len,
	    sup->conf->max_json_depth, msg, sizeof(msg));
	lv = cJSON_GetObjectItemCaseSensitive(b, "level");
	if (!cJSON_IsString(lv) || log_level_parse(lv->valuestring, &l) == -1) {
		cJSON_Delete(b);
		ctl_error(sup, fd, 400, "BAD_REQUEST", "body must be "
		    "{\"level\":\"error\"|\"warn\"|\"info\"|\"debug\"}");
		return;
	}
	cJSON_Delete(b);
	log_setlevel(l);
	pool_log(sup, (uint32_t)l, 0);
	log_info("control: log level set to %s", level_name(l));
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "logLevel", level_name(l));
	ctl_json(sup, fd, 200, o);
}

static void
do_drain(struct sup *sup, int fd, const struct http_request *req)
{
	char v[32], *end;
	unsigned long long ms = sup->conf->drain_timeout_ms;
	cJSON *o;
	int r;

	r = http_query_param(req->query, "timeout", v, sizeof(v));
	if (r == 0) {
		errno = 0;
		ms = strtoull(v, &end, 10);
		if (errno != 0 || *end != '\0' || end == v || ms > 3600000) {
			ctl_error(sup, fd, 400, "BAD_REQUEST", "timeout must be "
			    "milliseconds, 0 to 3600000");
			return;
		}
	} else if (r == -2) {
		ctl_error(sup, fd, 400, "BAD_REQUEST", "timeout: malformed");
		return;
	}
	if (sup->stopping) {
		ctl_error(sup, fd, 409, "CONFLICT", "parleyd is already "
		    "stopping");
		return;
	}
	sup_drain(sup, ms);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "draining");
	cJSON_AddNumberToObject(o, "timeoutMs", (double)ms);
	ctl_json(sup, fd, 202, o);
}

static void
do_reload(struct sup *sup, int fd)
{
	struct worker *w;
	char err[1024];
	unsigned n = 0;
	cJSON *o;

	if (sup->stopping || sup->draining) {
		ctl_error(sup, fd, 409, "CONFLICT", "parleyd is stopping or "
		    "draining; a reload would start new workers");
		return;
	}
	if (sup_reload(sup, err, sizeof(err)) == -1) {
		ctl_error(sup, fd, 422, "CONFIG_INVALID", err);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "reloaded");
	TAILQ_FOREACH(w, &sup->workers, entry)
		n++;
	cJSON_AddNumberToObject(o, "workers", n);
	ctl_json(sup, fd, 200, o);
}

void
control_request(struct sup *sup, int fd, const struct http_request *req)
{
	const char *what = req->path + strlen(CTL_PREFIX);
	int get = strcmp(req->method, "GET") == 0;
	int post = strcmp(req->method, "POST") == 0;

	if (strcmp(what, "status") == 0 && get)
		answer_status(sup, fd);
	else if (strcmp(what, "workers") == 0 && get)
		answer_workers(sup, fd);
	else if (strcmp(what, "sessions") == 0 && get)
		ask_sessions(sup, fd, req, NULL);
	else if (strcmp(what, "reload") == 0 && post)
		do_reload(sup, fd);
	else if (strcmp(what, "drain") == 0 && post)
		do_drain(sup, fd, req);
	else if (strcmp(what, "log-level") == 0 && post)
		set_log_level(sup, fd, req);
	else if (strcmp(what, "status") == 0 || strcmp(what, "workers") == 0 ||
	    strcmp(what, "sessions") == 0 || strcmp(what, "reload") == 0 ||
	    strcmp(what, "drain") == 0 || strcmp(what, "log-level") == 0)
		ctl_error(sup, fd, 405, "BAD_REQUEST", "wrong method for this "
		    "control endpoint; see include/parley/ctl.h");
	else
		ctl_error(sup, fd, 404, "NOT_FOUND", "no such control "
		    "endpoint; this parleyd speaks control protocol 1");
}

/* Whether the peer has gid as its primary or a supplementary group. */
static int
peer_in_group(int fd, gid_t primary, gid_t gid)
{
	gid_t groups[256];
	socklen_t len = sizeof(groups);
	size_t i;

	if (gid == (gid_t)-1)
		return 0;
	if (primary == gid)
		return 1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == -1)
		return 0;	/* more than 256 groups, or an old kernel */
	for (i = 0; i < len / sizeof(groups[0]); i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

static void
ctl_accept(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct sup *sup = arg;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct evbuffer *out;
	char peer[64];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == -1) {
		log_warn("control: SO_PEERCRED");
		close(fd);
		return;
	}
	/* The file mode already keeps others out; this holds if someone
	 * loosens it. */
	if (cr.uid != 0 && cr.uid != geteuid() && cr.uid != sup->ctl_uid &&
	    !peer_in_group(fd, cr.gid, sup->ctl_gid)) {
		log_warnx("control: refused uid %u gid %u (pid %d): not root, "
		    "parleyd's user, the socket's owner or its group",
		    (unsigned)cr.uid, (unsigned)cr.gid, (int)cr.pid);
		if ((out = evbuffer_new()) == NULL) {
			close(fd);
			return;
		}
		http_respond_error(out, 403, "FORBIDDEN", "this uid may not use "
		    "the control socket; run parleyctl as root, as parleyd's "
		    "user, or as a member of the socket's group");
		listener_reply(sup, fd, out);
		return;
	}
	snprintf(peer, sizeof(peer), "uid %u pid %d", (unsigned)cr.uid,
	    (int)cr.pid);
	listener_take(sup, fd, LT_CONTROL, peer, NULL);
}

/*
 * The default path: /run for root, the user's runtime dir otherwise.
 * Returns -1 if it does not fit a socket address.
 */
static int
default_path(const struct config *conf, char *out, size_t outlen)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (geteuid() == 0)
		n = snprintf(out, outlen, "%s", CTL_DEFAULT_SOCKET);
	else if (xdg != NULL && xdg[0] == '/')
		n = snprintf(out, outlen, "%s/parleyd/control.sock", xdg);
	else
		n = snprintf(out, outlen, "%s/control.sock", conf->state_dir);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/*
 * Binds the control socket (before privileges are dropped): a stale socket
 * is replaced, a live one means another parleyd and is an error.
 */
int
control_open(struct sup *sup, const struct config *conf, char *err,
    size_t errlen)
{
	struct sockaddr_un sun;
	struct passwd *pw;
	struct group *gr;
	struct stat sb;
	const char *owner, *group;
	char dir[sizeof(sun.sun_path)], *slash;
	mode_t mask;
	int fd, probe, rc;

	TAILQ_INIT(&sup->ctlqs);
	if (conf->control_socket != NULL &&
	    strcmp(conf->control_socket, "none") == 0)
		return 0;
	if ((conf->control_socket != NULL ? snprintf(sup->ctl_path,
	    sizeof(sup->ctl_path), "%s", conf->control_socket) >=
	    (int)sizeof(sup->ctl_path) : default_path(conf, sup->ctl_path,
	    sizeof(sup->ctl_path)) == -1)) {
		snprintf(err, errlen, "control-socket: the path is longer than "
		    "a Unix socket address holds (107 bytes); set "
		    "control-socket to a shorter one");
		sup->ctl_path[0] = '\0';
		return -1;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, sup->ctl_path, strlen(sup->ctl_path));
	owner = conf->control_owner ? conf->control_owner : conf->user;
	group = conf->control_group ? conf->control_group : conf->group;
	sup->ctl_uid = (uid_t)-1;
	sup->ctl_gid = (gid_t)-1;
	/* Only root gives files away; like user and group, the socket's
	 * owner and group are ignored otherwise. */
	if (geteuid() != 0)
		owner = group = NULL;
	if (owner != NULL) {
		if ((pw = getpwnam(owner)) == NULL) {
			snprintf(err, errlen, "control-socket owner %s: no such "
			    "user", owner);
			return -1;
		}
		sup->ctl_uid = pw->pw_uid;
		if (group == NULL)
			sup->ctl_gid = pw->pw_gid;
	}
	if (group != NULL) {
		if ((gr = getgrnam(group)) == NULL) {
			snprintf(err, errlen, "control-socket group %s: no such "
			    "group", group);
			return -1;
		}
		sup->ctl_gid = gr->gr_gid;
	}
	/*
	 * Its directory, made for it if missing (/run/parleyd without
	 * systemd): root's, entered by the socket's group.  Never the
	 * daemon user's, which could then swap the socket for a link.
	 */
	snprintf(dir, sizeof(dir), "%s", sup->ctl_path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0750) == 0 && sup->ctl_gid != (gid_t)-1 &&
		    lchown(dir, (uid_t)-1, sup->ctl_gid) == -1) {
			snprintf(err, errlen, "control-socket: chown %s: %s",
			    dir, strerror(errno));
			return -1;
		}
	}
	if (lstat(sup->ctl_path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			snprintf(err, errlen, "control-socket %s: exists and is "
			    "not a socket; remove it or choose another path",
			    sup->ctl_path);
			return -1;
		}
		if ((probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC,
		    0)) != -1) {
			if (connect(probe, (struct sockaddr *)&sun,
			    sizeof(sun)) == 0) {
				close(probe);
				snprintf(err, errlen, "control-socket %s: "
				    "another parleyd is serving it; stop it or "
				    "set control-socket to another path",
				    sup->ctl_path);
				return -1;
			}
			close(probe);
		}
		unlink(sup->ctl_path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1) {
		snprintf(err, errlen, "control-socket: socket: %s",
		    strerror(errno));
		return -1;
	}
	/* Made with its mode (no chmod by path); lchown never follows a
	 * link put in its place. */
	mask = umask(~conf->control_mode & 0777);
	rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(mask);
	if (rc == -1 || ((sup->ctl_uid != (uid_t)-1 ||
	    sup->ctl_gid != (gid_t)-1) && lchown(sup->ctl_path, sup->ctl_uid,
	    sup->ctl_gid) == -1) || listen(fd, 64) == -1) {
		snprintf(err, errlen, "control-socket %s: %s", sup->ctl_path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if ((sup->ctl_evl = evconnlistener_new(sup->base, ctl_accept, sup,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd)) == NULL) {
		snprintf(err, errlen, "control-socket: listener failed");
		close(fd);
		return -1;
	}
	log_info("control socket %s", sup->ctl_path);
	return 0;
}

void
control_close(struct sup *sup)
{
	struct ctlq *q;

	while ((q = TAILQ_FIRST(&sup->ctlqs)) != NULL)
		ctlq_free(q);
	if (sup->ctl_evl == NULL)
		return;
	evconnlistener_free(sup->ctl_evl);
	sup->ctl_evl = NULL;
	/* May fail once privileges are dropped: the next start replaces a
	 * stale socket. */
	unlink(sup->ctl_path);
}
