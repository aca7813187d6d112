/*
 * The supervisor's side of a client connection: accept, read one bounded
 * HTTP request, answer process-level endpoints itself, authenticate, and
 * hand everything else to the worker that owns the session.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "parley/config.h"
#include "parley/ctl.h"
#include "parley/http.h"
#include "parley/kg.h"
#include "parley/log.h"
#include "parley/proxyproto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "supervisor.h"
#include "ui.h"
#include "tls.h"

#define MAX_PENDING	4096	/* connections still sending their request */
#define CTL_PENDING_MAX	64	/* the same on the control socket */
#define MAX_LINGER	4096	/* answered connections still lingering */
#define DRAINING_MSG	"this host is draining and takes no new sessions; " \
			"retry on another host"

struct pending {
	TAILQ_ENTRY(pending)	 entry;
	struct sup		*sup;
	int			 fd;
	struct event		*rev;
	struct event		*tmo;
	struct http_parser	 hp;
	unsigned char		*raw;
	size_t			 len;
	size_t			 cap;
	size_t			 max;		/* cap may grow to this */
	int			 control;	/* came in on the control socket */
	int			 detached;	/* off the pending list */
	int			 continued;	/* sent "100 Continue" */
	int			 proxy;		/* a trusted proxy: the client is
						   behind it */
	int			 pp;		/* a PROXY header comes first */
	int			 pp_checked;	/* looked for a PROXY header */
	size_t			 skip;		/* bytes of PROXY header in raw */
	int			 admitted;	/* checked against the limits */
	int			 limited;	/* 0, or 429/503 to answer */
	uint64_t		 reqid;		/* its request id */
	char			 req[17];	/* reqid in hex */
	char			 hdr[40];	/* "X-Request-Id: ...\r\n" */
	char			 peer[64];	/* the client */
	char			 sockpeer[64];	/* the socket's peer */
	struct guard_local	 local;		/* the address it reached */
};

/* New connections from one client address in one second. */
#define RATE_SLOTS	4096
#define RATE_PROBE	8
struct peer_rate {
	char			 addr[64];	/* as pending.peer */
	uint64_t		 sec;
	unsigned		 n;
};

static void
pending_detach(struct pending *p)
{
	struct sup *sup = p->sup;

	TAILQ_REMOVE(&sup->pending, p, entry);
	sup->npending--;
	if (p->control)
		sup->nctlpending--;
	p->detached = 1;
}

static void
pending_free(struct pending *p, int close_fd)
{
	struct sup *sup = p->sup;

	if (!p->detached)
		pending_detach(p);
	if (sup->npending == 0)
		util_trim(&sup->trimmed_ms, 1000);
	event_free(p->rev);
	event_free(p->tmo);
	http_parser_free(&p->hp);
	free(p->raw);
	if (close_fd && p->fd != -1)
		close(p->fd);
	free(p);
}

/* An answer the supervisor writes itself, until its peer has it. */
struct reply {
	TAILQ_ENTRY(reply)	 entry;
	struct sup		*sup;
	struct bufferevent	*bev;
	uint64_t		 linger_end;	/* monotonic ms; 0: not yet */
};

static void
reply_free(struct reply *r)
{
	TAILQ_REMOVE(&r->sup->replies, r, entry);
	r->sup->nreplies--;
	bufferevent_free(r->bev);
	free(r);
}

static void
reply_event(struct bufferevent *bev, short what, void *arg)
{
	reply_free(arg);
}

void
listener_replies_free(struct sup *sup)
{
	struct reply *r;

	while ((r = TAILQ_FIRST(&sup->replies)) != NULL)
		reply_free(r);
}

/*
 * The read timeout of a lingering close: lingering-timeout per read, but
 * never past lingering-time in all, like nginx's lingering_timeout and
 * lingering_time; 0 once the time is up.
 */
static uint64_t
linger_left(struct reply *r)
{
	uint64_t now = util_mono_ms(), each = r->sup->conf->lingering_timeout_ms;

	if (now >= r->linger_end)
		return 0;
	return r->linger_end - now < each ? r->linger_end - now : each;
}

static void
reply_drain(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	struct timeval tv;
	uint64_t left;

	evbuffer_drain(in, evbuffer_get_length(in));
	/* A client that trickles bytes must not keep it open for ever. */
	if ((left = linger_left(arg)) == 0) {
		reply_free(arg);
		return;
	}
	util_tv(&tv, left);
	bufferevent_set_timeouts(bev, &tv, NULL);
}

/*
 * Once the answer is out, half-close and read what the client still
 * sends (a body we refused, say) until it closes or the lingering bounds
 * end: closing with unread bytes would reset the connection and lose the
 * answer before the client reads it.
 */
static void
reply_done(struct bufferevent *bev, void *arg)
{
	struct reply *r = arg;
	struct timeval tv;
	uint64_t left;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	/* Lingering is a courtesy: when many linger, new ones close. */
	if (r->sup->nreplies > MAX_LINGER) {
		reply_free(r);
		return;
	}
	r->linger_end = util_mono_ms() + r->sup->conf->lingering_time_ms;
	if ((left = linger_left(r)) == 0) {
		reply_free(r);
		return;
	}
	util_tv(&tv, left);
	bufferevent_set_timeouts(bev, &tv, NULL);
	bufferevent_setcb(bev, reply_drain, NULL, reply_event, arg);
	bufferevent_enable(bev, EV_READ);
}


/* Writes out (consumed) to the pending connection's socket, then closes it. */
static void
pending_send(struct pending *p, struct evbuffer *out)
{
	struct sup *sup = p->sup;
	int fd = p->fd;

	p->fd = -1;
	pending_free(p, 0);
	listener_reply(sup, fd, out);
}

void
listener_reply(struct sup *sup, int fd, struct evbuffer *out)
{
	struct bufferevent *bev;
	struct reply *r;
	struct timeval tv;

	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (bev = bufferevent_socket_new(sup->base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		free(r);
		close(fd);
		evbuffer_free(out);
		return;
	}
	r->sup = sup;
	r->bev = bev;
	TAILQ_INSERT_TAIL(&sup->replies, r, entry);
	sup->nreplies++;
	util_tv(&tv, 10000);
	bufferevent_set_timeouts(bev, NULL, &tv);
	bufferevent_setcb(bev, NULL, reply_done, reply_event, r);
	bufferevent_enable(bev, EV_WRITE);
	bufferevent_write_buffer(bev, out);
	evbuffer_free(out);
}

static void
pending_error(struct pending *p, int status, const char *code, const char *msg)
{
	struct evbuffer *out = evbuffer_new();

	log_rdebug(p->req, NULL, "%s %s %d: %s", p->peer,
	    p->hp.req.path ? p->hp.req.path : "-", status, msg);
	http_respond_error_h(out, status, code, msg, p->hdr);
	pending_send(p, out);
}

static void
pending_json(struct pending *p, int status, cJSON *body)
{
	struct evbuffer *out = evbuffer_new();
	char *s = cJSON_PrintUnformatted(body);

	http_respond(out, status, "application/json", s, strlen(s), p->hdr);
	free(s);
	cJSON_Delete(body);
	pending_send(p, out);
}

static void
answer_health(struct pending *p, const char *path)
{
	struct sup *sup = p->sup;
	struct pool_totals t;
	cJSON *o = cJSON_CreateObject();
	int ok;

	pool_totals(sup, &t);
	if (strcmp(path, "/health/live") == 0) {
		cJSON_AddStringToObject(o, "status", "ok");
		pending_json(p, 200, o);
		return;
	}
	/* A worker that cannot reach the store cannot log an event; a
	 * draining host is alive but must get no new clients. */
	if (strcmp(path, "/health/ready") == 0)
		ok = t.ready > 0;
	else
		ok = t.ready == t.workers;
	ok = ok && !sup->stopping && !sup->draining && t.store_down == 0;
	cJSON_AddStringToObject(o, "status", ok ? "ok" :
	    sup->stopping ? "stopping" : sup->draining ? "draining" :
	    "degraded");
	cJSON_AddNumberToObject(o, "workers", t.workers);
	cJSON_AddNumberToObject(o, "workersReady", t.ready);
	cJSON_AddStringToObject(o, "store", t.store_down ? "unreachable" :
	    "ok");
	pending_json(p, ok ? 200 : 503, o);
}

static void
answer_info(struct pending *p)
{
	struct sup *sup = p->sup;
	struct pool_totals t;
	cJSON *o = cJSON_CreateObject();

	pool_totals(sup, &t);
	cJSON_AddStringToObject(o, "name", "parleyd");
	cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
	cJSON_AddNumberToObject(o, "protocol", 1);
	cJSON_AddNumberToObject(o, "workers", t.workers);
	cJSON_AddNumberToObject(o, "activeSessions", t.sessions);
	cJSON_AddNumberToObject(o, "runningSessions", t.running);
	cJSON_AddNumberToObject(o, "connections", t.connections);
	cJSON_AddNumberToObject(o, "eventsAppended", t.events);
	cJSON_AddNumberToObject(o, "workerRestarts",
	    (double)sup->worker_restarts);
	cJSON_AddNumberToObject(o, "uptimeSeconds",
	    (double)((util_mono_ms() - sup->started_ms) / 1000));
	pending_json(p, 200, o);
}

/*
 * GET /api/audit?sessionId=ID: into sid, the session whose worker answers
 * it, as for /sessions/ID.  An audit trail is for the operator (admin)
 * and for those the session was given to (a token scoped to it).
 * -1 once answered with an error.
 */
static int
audit_session(struct pending *p, int role, const char *scope, char *sid,
    size_t sidlen)
{
	const struct http_request *req = &p->hp.req;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		pending_error(p, 405, "BAD_REQUEST",
		    "use GET /api/audit?sessionId=ID");
		return -1;
	}
	rc = http_query_param(req->query, "sessionId", sid, sidlen);
	if (rc == -1 || (rc == 0 && sid[0] == '\0')) {
		pending_error(p, 400, "BAD_REQUEST", "parameter 'sessionId' is "
		    "missing: GET /api/audit?sessionId=ID");
		return -1;
	}
	if (rc != 0 || !store_valid_id(sid)) {
		pending_error(p, 400, "BAD_REQUEST", "parameter 'sessionId' "
		    "must be 1-128 characters of A-Z a-z 0-9 . _ : -");
		return -1;
	}
	if (role != IPC_ROLE_ADMIN && !ipc_scope_names(scope, sid)) {
		pending_error(p, 403, "FORBIDDEN", "the audit trail needs the "
		    "admin role or a token scoped to this session");
		return -1;
	}
	return 0;
}

/*
 * /knowledge/P/...: into sid, the project's session "kg:P".  -1 once
 * answered with 400 when P is not a projectId.
 */
static int
knowledge_session(struct pending *p, const char *path, char *sid,
    size_t sidlen)
{
	char project[KG_PROJECT_MAX + 2];
	size_t n;

	path += strlen("/knowledge/");
	n = strcspn(path, "/");
	if (n >= sizeof(project))
		n = sizeof(project) - 1;
	memcpy(project, path, n);
	project[n] = '\0';
	if (!kg_valid_project(project)) {
		pending_error(p, 400, "BAD_REQUEST", "bad projectId in the "
		    "path: a projectId is 1 to 100 characters of A-Z a-z 0-9 "
		    "'.' '_' '-', not starting with '.'");
		return -1;
	}
	snprintf(sid, sidlen, "%s%s", KG_SID_PREFIX, project);
	return 0;
}

/*
 * POST /api/agents/stream, /api/chat, /api/agui: into sid, the body's
 * field (sessionId, id, threadId) when the body is a JSON object with a
 * valid one; else "".
 */
static void
body_sid(const struct http_request *req, const char *field, char *sid,
    size_t sidlen)
{
	cJSON *b = NULL, *f;

	sid[0] = '\0';
	if (strcmp(req->method, "POST") == 0 && req->body_len > 0 &&
	    (b = cJSON_ParseWithLength(req->body, req->body_len)) != NULL &&
	    (f = cJSON_GetObjectItemCaseSensitive(b, field)) != NULL &&
	    cJSON_IsString(f) && store_valid_id(f->valuestring))
		snprintf(sid, sidlen, "%s", f->valuestring);
	cJSON_Delete(b);
}

/*
 * GET /api/chat/{id}/stream, GET /api/agui/{id}/stream: into sid, the id
 * when path is one of them and it is valid; else "".
 */
static void
resume_sid(const char *path, char *sid, size_t sidlen)
{
	const char *p;
	size_t n;

	sid[0] = '\0';
	if (strncmp(path, "/api/chat/", 10) == 0)
		p = path + 10;
	else if (strncmp(path, "/api/agui/", 10) == 0)
		p = path + 10;
	else
		return;
	n = strcspn(p, "/");
	if (n == 0 || n >= sidlen || strcmp(p + n, "/stream") != 0)
		return;
	memcpy(sid, p, n);
	sid[n] = '\0';
	if (!store_valid_id(sid))
		sid[0] = '\0';
}

/*
 * The worker for the directory index's endpoints: any could answer
 * (status.json, the mapped segment, build.lock are the host's), but one
 * chosen the same way each time, the ready worker of the lowest slot,
 * keeps a host's builds and their progress in one process.
 */
static struct worker *
index_worker(struct sup *sup)
{
	struct worker *w, *best = NULL;

	TAILQ_FOREACH(w, &sup->workers, entry)
		if (w->ready && !w->draining &&
		    (best == NULL || w->slot < best->slot))
			best = w;
	return best != NULL ? best : pool_least_loaded(sup);
}

/* The web page, when req asks for it: 1 once answered. */
static int
answer_ui(struct pending *p)
{
	struct evbuffer *out;

	/* Asked first: no buffer for the requests that are not the page's. */
	if (!ui_wants(p->sup->conf, p->hp.req.path) ||
	    (out = evbuffer_new()) == NULL)
		return 0;
	ui_answer(p->sup->conf, &p->hp.req, p->hdr, out);
	pending_send(p, out);
	return 1;
}

static int
is_health(const char *path)
{
	return strcmp(path, "/health") == 0 ||
	    strcmp(path, "/health/live") == 0 ||
	    strcmp(path, "/health/ready") == 0;
}

static void
pending_dispatch(struct pending *p)
{
	struct sup *sup = p->sup;
	const struct http_request *req = &p->hp.req;
	struct ipc_conn ic;
	struct worker *w;
	const char *path = req->path, *rest;
	struct guard_err ge;
	char sid[IPC_SID_MAX + 1], msg[300];
	size_t idlen;
	int role, fd;

	if (is_health(path)) {
		answer_health(p, path);
		return;
	}
	if (!p->control && guard_site(sup->conf, &p->local, req, &ge) == -1) {
		pending_error(p, ge.status, ge.code, ge.msg);
		return;
	}
	if (!p->control && answer_ui(p))
		return;
	memset(&ic, 0, sizeof(ic));
	/* The control socket's peers were let in by their uid. */
	if (p->control) {
		role = IPC_ROLE_ADMIN;
		if (strncmp(path, CTL_PREFIX, strlen(CTL_PREFIX)) == 0) {
			fd = p->fd;
			p->fd = -1;
			/* A reload may close every pending connection;
			 * this one is answered, not closed. */
			pending_detach(p);
			control_request(sup, fd, req);
			pending_free(p, 0);
			return;
		}
	} else if ((role = authenticate(sup, req, &ic, msg,
	    sizeof(msg))) == 0) {
		pending_error(p, 401, "UNAUTHORIZED", msg);
		return;
	}
	if (guard_role(req, role, ic.scope, &ge) == -1) {
		pending_error(p, ge.status, ge.code, ge.msg);
		return;
	}
	if (strcmp(path, "/api/info") == 0) {
		answer_info(p);
		return;
	}
	if (strcmp(path, "/metrics") == 0) {
		struct evbuffer *out = evbuffer_new(), *body = evbuffer_new();

		pool_metrics_render(sup, body);
		http_respond(out, 200, "text/plain; version=0.0.4; "
		    "charset=utf-8", (const char *)evbuffer_pullup(body, -1),
		    evbuffer_get_length(body), p->hdr);
		evbuffer_free(body);
		pending_send(p, out);
		return;
	}
	if (sup->stopping) {
		pending_error(p, 503, "OVERLOADED", "server is shutting down; "
		    "retry on another host or in a moment");
		return;
	}
	sid[0] = '\0';
	if (sup->draining && (strcmp(path, "/chat") == 0 ||
	    (strcmp(path, "/sessions") == 0 &&
	    strcmp(req->method, "POST") == 0))) {
		pending_error(p, 503, "OVERLOADED", DRAINING_MSG);
		return;
	}
	if (strcmp(path, "/chat") == 0) {
		w = pool_least_loaded(sup);
	} else if (strcmp(path, "/sessions") == 0) {
		cJSON *b = NULL, *f;

		if (strcmp(req->method, "GET") == 0) {
			ic.role = (uint32_t)role;
			fd = p->fd;
			p->fd = -1;
			pending_detach(p);
			control_sessions(sup, fd, req, &ic);
			pending_free(p, 0);
			return;
		}
		if (strcmp(req->method, "POST") != 0) {
			pending_error(p, 405, "BAD_REQUEST", "use GET /sessions "
			    "to list sessions, POST /sessions to create one");
			return;
		}
		if (req->body_len > 0 &&
		    (b = cJSON_ParseWithLength(req->body, req->body_len)) &&
		    (f = cJSON_GetObjectItemCaseSensitive(b, "sessionId")) &&
		    cJSON_IsString(f))
			snprintf(sid, sizeof(sid), "%s", f->valuestring);
		cJSON_Delete(b);
		if (sid[0] == '\0') {
			memcpy(sid, "s-", 2);
			util_randhex(sid + 2, 12);
		}
		if (!store_valid_id(sid)) {
			pending_error(p, 400, "BAD_REQUEST", "field 'sessionId' "
			    "must be 1-128 characters of A-Z a-z 0-9 . _ : -");
			return;
		}
		w = pool_route(sup, sid, 1);
	} else if (strcmp(path, "/api/agents/stream") == 0) {
		/* The seed-compatible turn stream: routed by its body's
		 * sessionId; one it cannot route by goes to any worker,
		 * which answers the client's mistake as the stream's error. */
		body_sid(req, "sessionId", sid, sizeof(sid));
		w = sid[0] != '\0' ? pool_route(sup, sid, !sup->draining) :
		    pool_least_loaded(sup);
	} else if (strcmp(path, "/api/chat") == 0 ||
	    strcmp(path, "/api/agui") == 0 ||
	    strncmp(path, "/api/chat/", 10) == 0 ||
	    strncmp(path, "/api/agui/", 10) == 0) {
		/* The AI SDK's and AG-UI's endpoints (aisdk.c, agui.c): the
		 * session is the body's chat id or thread id, or the resume
		 * path's; as above, one without goes to any worker, which
		 * answers what is wrong with the request. */
		if (strcmp(path, "/api/chat") == 0)
			body_sid(req, "id", sid, sizeof(sid));
		else if (strcmp(path, "/api/agui") == 0)
			body_sid(req, "threadId", sid, sizeof(sid));
		else
			resume_sid(path, sid, sizeof(sid));
		w = sid[0] != '\0' ? pool_route(sup, sid, !sup->draining) :
		    pool_least_loaded(sup);
	} else if (strcmp(path, "/api/index") == 0 ||
	    strcmp(path, "/api/index/status") == 0 ||
	    strcmp(path, "/api/search") == 0) {
		w = index_worker(sup);
	} else if (strcmp(path, "/mcp") == 0) {
		/* The knowledge MCP server: any worker answers, reaching
		 * each project's own through the supervisor (kgcall.c). */
		w = pool_least_loaded(sup);
	} else if (strcmp(path, "/api/audit") == 0) {
		if (audit_session(p, role, ic.scope, sid, sizeof(sid)) == -1)
			return;
		/* Draining: sessions this host holds still reach it. */
		w = pool_route(sup, sid, !sup->draining);
	} else if (strncmp(path, "/knowledge/", 11) == 0) {
		/* A project's knowledge is the session kg:P, its owner's. */
		if (knowledge_session(p, path, sid, sizeof(sid)) == -1)
			return;
		w = pool_route(sup, sid, !sup->draining);
	} else if (strncmp(path, "/sessions/", 10) == 0) {
		rest = strchr(path + 10, '/');
		idlen = rest ? (size_t)(rest - (path + 10)) : strlen(path + 10);
		if (idlen == 0 || idlen > IPC_SID_MAX) {
			pending_error(p, 404, "NOT_FOUND", "no such endpoint");
			return;
		}
		memcpy(sid, path + 10, idlen);
		sid[idlen] = '\0';
		if (!store_valid_id(sid)) {
			pending_error(p, 400, "BAD_REQUEST", "session id must be "
			    "1-128 characters of A-Z a-z 0-9 . _ : -");
			return;
		}
		if (!ipc_scope_allows(ic.scope, sid)) {
			pending_error(p, 403, "FORBIDDEN",
			    "this token is scoped to another session");
			return;
		}
		/* Draining: sessions this host holds still reach it. */
		w = pool_route(sup, sid, !sup->draining);
	} else {
		pending_error(p, 404, "NOT_FOUND", "no such endpoint; see "
		    "parley-protocol(7)");
		return;
	}
	if (sid[0] != '\0' && !ipc_scope_allows(ic.scope, sid)) {
		pending_error(p, 403, "FORBIDDEN",
		    "this token is scoped to another session");
		return;
	}
	if (w == NULL) {
		pending_error(p, 503, "OVERLOADED", sup->draining ?
		    DRAINING_MSG : "no worker is available; retry in a moment");
		return;
	}
	ic.kind = IPC_CONN_HTTP;
	ic.role = (uint32_t)role;
	/* The worker reads the request again: not the PROXY header. */
	ic.bytes_len = (uint32_t)(p->len - p->skip);
	ic.conn_id = p->reqid;
	snprintf(ic.session, sizeof(ic.session), "%s", sid);
	snprintf(ic.peer, sizeof(ic.peer), "%s", p->peer);
	fd = p->fd;
	p->fd = -1;
	pool_handoff(w, fd, &ic, p->raw + p->skip);
	pending_free(p, 0);
}

static unsigned
addr_hash(const char *s)
{
	unsigned h = 2166136261u;

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

/*
 * 1 when addr opened more than max-connections-per-address's rate of
 * connections in this second; counts this one when it is let in.  A
 * table too full to track the address lets it in.
 */
static int
rate_exceeded(struct sup *sup, const char *addr, unsigned rate)
{
	struct peer_rate *r, *free_slot = NULL;
	uint64_t sec = util_mono_ms() / 1000;
	unsigned h = addr_hash(addr), i;

	if (sup->rates == NULL &&
	    (sup->rates = calloc(RATE_SLOTS, sizeof(*sup->rates))) == NULL)
		return 0;
	for (i = 0; i < RATE_PROBE; i++) {
		r = &sup->rates[(h + i) % RATE_SLOTS];
		if (strcmp(r->addr, addr) == 0) {
			if (r->sec != sec) {
				r->sec = sec;
				r->n = 0;
			}
			if (r->n >= rate)
				return 1;
			r->n++;
			return 0;
		}
		if (free_slot == NULL && r->sec != sec)
			free_slot = r;
	}
	if (free_slot != NULL) {
		snprintf(free_slot->addr, sizeof(free_slot->addr), "%s", addr);
		free_slot->sec = sec;
		free_slot->n = 1;
	}
	return 0;
}

/*
 * Checks the client against max-connections-per-address once its address
 * is known: past the count (connections from it still sending their
 * request) or its rate, p->limited says how to refuse it.  Such a
 * connection is still read up to its head, to answer a health check;
 * -1 when past twice the count, where it is closed unanswered.
 */
static int
pending_admit(struct pending *p)
{
	struct config *conf = p->sup->conf;
	struct pending *q;
	unsigned same = 0;

	p->admitted = 1;
	if (p->control)
		return 0;
	if (conf->max_conn_per_addr > 0) {
		TAILQ_FOREACH(q, &p->sup->pending, entry)
			if (q != p && q->admitted && strcmp(q->peer, p->peer) == 0)
				same++;
		if (same >= 2 * conf->max_conn_per_addr) {
			log_debug("%s: %u connections still sending their "
			    "request; closed", p->peer, same);
			return -1;
		}
		if (same >= conf->max_conn_per_addr) {
			p->limited = 503;
			return 0;
		}
	}
	if (conf->conn_rate_per_addr > 0 &&
	    rate_exceeded(p->sup, p->peer, conf->conn_rate_per_addr))
		p->limited = 429;
	return 0;
}

/* Warns of refusals at most once a second: a flood must not flood the log. */
static void
log_limited(struct pending *p)
{
	struct sup *sup = p->sup;
	uint64_t now = util_mono_ms();

	sup->limit_refused++;
	if (now - sup->limit_log_ms < 1000)
		return;
	log_warnx("%s: refused %d by max-connections-per-address%s; %u "
	    "refused since the last such warning", p->peer, p->limited,
	    p->limited == 429 ? " rate" : "", sup->limit_refused);
	sup->limit_log_ms = now;
	sup->limit_refused = 0;
}

/* Answers a limited client: health checks as usual, the rest refused. */
static void
pending_refuse(struct pending *p)
{
	char hdrs[80];
	int secs;

	if (p->hp.req.path != NULL && is_health(p->hp.req.path)) {
		answer_health(p, p->hp.req.path);
		return;
	}
	/* The pending ones are gone after the head timeout at the latest. */
	secs = p->limited == 429 ? 1 :
	    (int)((p->sup->conf->handshake_timeout_ms + 999) / 1000);
	snprintf(hdrs, sizeof(hdrs), "Retry-After: %d\r\n%s", secs, p->hdr);
	log_limited(p);
	{
		struct evbuffer *out = evbuffer_new();

		http_respond_error_h(out, p->limited, "OVERLOADED",
		    p->limited == 429 ? "too many new connections from this "
		    "address this second (max-connections-per-address rate); "
		    "retry after Retry-After seconds" : "too many connections "
		    "from this address are still sending their request "
		    "(max-connections-per-address); retry after Retry-After "
		    "seconds", hdrs);
		pending_send(p, out);
	}
}

/*
 * The client behind a trusted proxy without the PROXY protocol: from
 * X-Forwarded-For, once the head is in.
 */
static void
pending_forwarded(struct pending *p)
{
	const struct http_request *req = &p->hp.req;
	const struct config *conf = p->sup->conf;
	const char *vals[HTTP_DEFAULT_MAX_HEADERS];
	char client[PP_ADDR_MAX];
	unsigned i, n = 0;

	for (i = 0; i < req->nheaders && n < HTTP_DEFAULT_MAX_HEADERS; i++)
		if (strcasecmp(req->headers[i].name, "X-Forwarded-For") == 0)
			vals[n++] = req->headers[i].value;
	pp_forwarded_for(vals, n, conf->trusted, conf->ntrusted, p->sockpeer,
	    client);
	snprintf(p->peer, sizeof(p->peer), "%s", client);
}

/*
 * The PROXY header a trusted proxy sends first: 1 once read (p->skip
 * bytes of raw), 0 for more, -1 once answered.
 */
static int
pending_proxy_header(struct pending *p)
{
	struct pp_header h;

	switch (pp_parse(p->raw, p->len, &h)) {
	case PP_NEED_MORE:
		return 0;
	case PP_NONE:
		pending_error(p, 400, "BAD_REQUEST", "this listener takes "
		    "a PROXY protocol header first from a trusted-proxy");
		return -1;
	case PP_ERROR:
		pending_error(p, 400, "BAD_REQUEST", h.error);
		return -1;
	case PP_DONE:
		break;
	}
	p->skip = h.len;
	p->pp = 0;
	if (!h.local)
		snprintf(p->peer, sizeof(p->peer), "%s", h.src);
	return 1;
}

static void
pending_read(evutil_socket_t fd, short ev, void *arg)
{
	struct pending *p = arg;
	size_t used, off;
	ssize_t n;
	enum http_result r;

	if (p->len == p->cap) {
		unsigned char *grown;
		size_t cap = p->cap * 2 > p->max ? p->max : p->cap * 2;

		/* The parser's limits answer first; this is the last stop. */
		if (p->cap == p->max ||
		    (grown = realloc(p->raw, cap)) == NULL) {
			pending_error(p, 413, "BAD_REQUEST", "request too large");
			return;
		}
		p->raw = grown;
		p->cap = cap;
	}
	n = read(fd, p->raw + p->len, p->cap - p->len);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		pending_free(p, 1);
		return;
	}
	off = p->len;
	p->len += (size_t)n;
	if (p->pp) {
		if (pending_proxy_header(p) != 1)
			return;
		if (pending_admit(p) == -1) {
			pending_free(p, 1);
			return;
		}
		off = p->skip;
		if (off == p->len)
			return;
	} else if (!p->pp_checked && !p->control && p->len >= 6) {
		/* Only a trusted proxy may say who the client is. */
		p->pp_checked = 1;
		if (pp_looks_like(p->raw, p->len)) {
			pending_error(p, 400, "BAD_REQUEST", "a PROXY protocol "
			    "header from a peer that is not a trusted-proxy "
			    "(or on a listener without proxy-protocol)");
			return;
		}
	}
	r = http_parse(&p->hp, (char *)p->raw + off, p->len - off, &used);
	if (r == HTTP_ERROR) {
		pending_error(p, p->hp.status, "BAD_REQUEST", p->hp.error);
		return;
	}
	if (!p->admitted && http_head_done(&p->hp)) {
		pending_forwarded(p);
		if (pending_admit(p) == -1) {
			pending_free(p, 1);
			return;
		}
	}
	if (p->limited && http_head_done(&p->hp)) {
		pending_refuse(p);
		return;
	}
	if (r == HTTP_NEED_MORE && !p->continued &&
	    http_wants_continue(&p->hp)) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

		/* The client waits for it before sending its body; a
		 * socket that cannot take 25 bytes now is dead anyway. */
		p->continued = 1;
		if (write(fd, cont, sizeof(cont) - 1) == -1)
			log_debug("100 Continue: %s", strerror(errno));
	} else if (r == HTTP_DONE) {
		event_del(p->rev);
		pending_dispatch(p);
	}
}

static void
pending_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct pending *p = arg;

	pending_error(p, 408, "BAD_REQUEST", "request not received in time");
}

/* See supervisor.h.  The client's address is peer's unless it is a
 * trusted proxy, which says who the client is. */
void
listener_take(struct sup *sup, int fd, int flags, const char *peer,
    const struct guard_local *local)
{
	struct config *conf = sup->conf;
	struct http_limits lim;
	struct pending *p;
	struct timeval tv;
	int control = (flags & LT_CONTROL) != 0;

	/* The operator's way in stays open while clients crowd the rest. */
	if (control ? sup->nctlpending >= CTL_PENDING_MAX :
	    sup->npending - sup->nctlpending >= MAX_PENDING) {
		close(fd);
		return;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		close(fd);
		return;
	}
	p->sup = sup;
	p->fd = fd;
	p->control = control;
	p->reqid = ++sup->next_conn_id;
	log_reqid(p->req, p->reqid);
	snprintf(p->hdr, sizeof(p->hdr), "X-Request-Id: %s\r\n", p->req);
	snprintf(p->peer, sizeof(p->peer), "%s", peer);
	snprintf(p->sockpeer, sizeof(p->sockpeer), "%s", peer);
	if (local != NULL)
		p->local = *local;
	else if (!control)
		guard_local(fd, &p->local);
	p->proxy = !control && pp_trusted(conf->trusted, conf->ntrusted, peer);
	p->pp = p->proxy && (flags & LT_PROXY);
	lim.max_request_line = conf->max_request_line;
	lim.max_header_bytes = conf->max_header_size;
	lim.max_headers = conf->max_headers;
	lim.max_body = conf->max_body;
	http_parser_init(&p->hp, &lim);
	/* Room for a whole request plus frames a client pipelined after it,
	 * grown as bytes come. */
	p->max = conf->max_request_line + conf->max_header_size +
	    conf->max_body + 16384;
	/* A chunked body's framing and trailer (see http_limits), and a
	 * PROXY header. */
	p->max += conf->max_body + 2 * HTTP_CHUNK_LINE_MAX +
	    conf->max_header_size + PP_V2_MAX;
	p->cap = 1024;	/* most request heads fit; grows as needed */
	p->raw = malloc(p->cap);
	p->rev = event_new(sup->base, fd, EV_READ | EV_PERSIST, pending_read, p);
	p->tmo = evtimer_new(sup->base, pending_timeout, p);
	TAILQ_INSERT_TAIL(&sup->pending, p, entry);
	sup->npending++;
	if (control)
		sup->nctlpending++;
	if (p->raw == NULL || p->rev == NULL || p->tmo == NULL) {
		pending_free(p, 1);
		return;
	}
	/* A client that is its own peer is counted now; one behind a
	 * trusted proxy once the proxy has said who it is. */
	if (!p->proxy && pending_admit(p) == -1) {
		pending_free(p, 1);
		return;
	}
	util_tv(&tv, conf->handshake_timeout_ms);
	event_add(p->tmo, &tv);
	event_add(p->rev, NULL);
}

static void
accept_cb(struct evconnlistener *evl, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct listener *l = arg;
	char host[INET6_ADDRSTRLEN];
	int one = 1;

	if (getnameinfo(sa, (socklen_t)salen, host, sizeof(host), NULL, 0,
	    NI_NUMERICHOST) != 0)
		snprintf(host, sizeof(host), "?");
	/* Events are small writes: with Nagle, the second of a burst waited
	 * for the client's delayed ACK (40 ms from tool_approve to
	 * tool_start).  The option goes with the socket to the worker. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == -1)
		log_debug("TCP_NODELAY: %s", strerror(errno));
	if (l->tls)
		tls_accept(l->sup, fd, host);
	else
		listener_take(l->sup, fd, l->proxy_protocol ? LT_PROXY : 0,
		    host, NULL);
}

static void
accept_error(struct evconnlistener *evl, void *arg)
{
	log_warn("accept");
}

/* "HOST:PORT", with an IPv6 address in brackets, into buf. */
static void
listen_name(const struct cfg_listen *cl, char *buf, size_t len)
{
	int v6 = strchr(cl->host, ':') != NULL;

	snprintf(buf, len, "%s%s%s:%s", v6 ? "[" : "", cl->host, v6 ? "]" : "",
	    cl->port);
}

/*
 * Binds one listen line; NULL with err set, or with err empty when an
 * optional listener's address does not exist here (IPv6 turned off).
 */
static struct listener *
listener_bind(struct sup *sup, const struct cfg_listen *cl, char *err,
    size_t errlen)
{
	struct addrinfo hints, *res;
	struct listener *l;
	char name[80];
	int rc;

	listen_name(cl, name, sizeof(name));
	err[0] = '\0';

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((rc = getaddrinfo(cl->host, cl->port, &hints, &res)) != 0) {
		if (cl->optional) {
			log_warnx("not listening on %s: %s", name,
			    gai_strerror(rc));
			return NULL;
		}
		snprintf(err, errlen, "listen %s: %s", name, gai_strerror(rc));
		return NULL;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		freeaddrinfo(res);
		snprintf(err, errlen, "listen: out of memory");
		return NULL;
	}
	/* [::]:P beside 0.0.0.0:P: each family binds its own. */
	l->sup = sup;
	l->tls = cl->tls;
	l->evl = evconnlistener_new_bind(sup->base, accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC |
	    (res->ai_family == AF_INET6 ? LEV_OPT_BIND_IPV6ONLY : 0),
	    1024, res->ai_addr, (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (l->evl == NULL && cl->optional && (errno == EADDRNOTAVAIL ||
	    errno == EAFNOSUPPORT)) {
		log_warnx("not listening on %s: %s (this host has no IPv6 "
		    "loopback)", name, strerror(errno));
		free(l);
		return NULL;
	}
	if (l->evl == NULL) {
		snprintf(err, errlen, "listen %s: %s%s", name,
		    strerror(errno), errno == EACCES && geteuid() != 0 ?
		    " (a port below 1024 needs a restart of parleyd, which "
		    "binds as root)" : errno == EADDRINUSE ? " (moving a port "
		    "to another address of this host needs a restart)" : "");
		free(l);
		return NULL;
	}
	evconnlistener_set_error_cb(l->evl, accept_error);
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->loopback = cl->loopback;
	l->proxy_protocol = cl->proxy_protocol;
	return l;
}

int
listener_open(struct sup *sup, struct config *conf, char *err, size_t errlen)
{
	return listener_update(sup, conf, err, errlen);
}

static int
conf_listens(const struct config *conf, const char *name)
{
	const struct cfg_listen *cl;
	char n[80];

	TAILQ_FOREACH(cl, &conf->listens, entry) {
		listen_name(cl, n, sizeof(n));
		if (strcmp(n, name) == 0)
			return 1;
	}
	return 0;
}

/*
 * Makes the listeners conf's: those it still names stay open (their accept
 * queues and the clients still sending a request are kept), new ones are
 * bound before any old one closes, so on an error nothing has changed.
 */
int
listener_update(struct sup *sup, struct config *conf, char *err,
    size_t errlen)
{
	TAILQ_HEAD(, listener) fresh = TAILQ_HEAD_INITIALIZER(fresh);
	const struct cfg_listen *cl;
	struct listener *l, *next;
	char name[80];

	TAILQ_FOREACH(cl, &conf->listens, entry) {
		listen_name(cl, name, sizeof(name));
		TAILQ_FOREACH(l, &sup->listeners, entry)
			if (strcmp(l->name, name) == 0)
				break;
		if (l != NULL) {
			/* Kept open; its options are the new line's. */
			l->proxy_protocol = cl->proxy_protocol;
			continue;
		}
		if ((l = listener_bind(sup, cl, err, errlen)) == NULL) {
			if (err[0] == '\0')
				continue;
			while ((l = TAILQ_FIRST(&fresh)) != NULL) {
				TAILQ_REMOVE(&fresh, l, entry);
				evconnlistener_free(l->evl);
				free(l);
			}
			return -1;
		}
		TAILQ_INSERT_TAIL(&fresh, l, entry);
	}
	for (l = TAILQ_FIRST(&sup->listeners); l != NULL; l = next) {
		next = TAILQ_NEXT(l, entry);
		if (conf_listens(conf, l->name))
			continue;
		TAILQ_REMOVE(&sup->listeners, l, entry);
		log_info("no longer listening on %s", l->name);
		evconnlistener_free(l->evl);
		free(l);
	}
	/* A listen line kept may have gained or lost "tls". */
	TAILQ_FOREACH(cl, &conf->listens, entry) {
		listen_name(cl, name, sizeof(name));
		TAILQ_FOREACH(l, &sup->listeners, entry)
			if (strcmp(l->name, name) == 0)
				l->tls = cl->tls;
	}
	while ((l = TAILQ_FIRST(&fresh)) != NULL) {
		TAILQ_REMOVE(&fresh, l, entry);
		TAILQ_INSERT_TAIL(&sup->listeners, l, entry);
		log_info("listening on %s", l->name);
	}
	return 0;
}

void
listener_pause(struct sup *sup)
{
	struct listener *l;

	TAILQ_FOREACH(l, &sup->listeners, entry)
		evconnlistener_disable(l->evl);
}

void
listener_close_all(struct sup *sup)
{
	struct listener *l;
	struct pending *p;

	while ((l = TAILQ_FIRST(&sup->listeners)) != NULL) {
		TAILQ_REMOVE(&sup->listeners, l, entry);
		evconnlistener_free(l->evl);
		free(l);
	}
	while ((p = TAILQ_FIRST(&sup->pending)) != NULL)
		pending_free(p, 1);
	free(sup->rates);
	sup->rates = NULL;
}
