/*
 * What a connection's requests and messages are routed to: the REST
 * endpoints, the upgrade to a stream (its position in the log is
 * position.c's), and a stream's client messages, each handed to its
 * session.  A request or
 * first message about a session not in memory waits for it to load.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/epoch.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "auditlog.h"
#include "conn.h"
#include "dash.h"
#include "deliver.h"
#include "index.h"
#include "input.h"
#include "kb.h"
#include "kgmcp.h"
#include "kgs.h"
#include "logpage.h"
#include "position.h"
#include "life.h"
#include "route.h"
#include "adapt.h"
#include "agui.h"
#include "aisdk.h"
#include "seed.h"
#include "sess.h"
#include "thought.h"
#include "team.h"
#include "wk.h"

#define HOLD_MS		250	/* wait for a resume before going live */

static void	route_http(struct conn *, const unsigned char *, size_t);
static void	route_answer(struct conn *, struct sess *, const char *,
		    const struct sess_result *);

static struct conn *
cl_conn(struct sess_client *cl)
{
	return (struct conn *)(void *)((char *)cl - offsetof(struct conn, cl));
}

const struct sess_creator *
route_creator(struct conn *c, const struct http_request *r)
{
	int role = (int)c->ic.role;
	char v[16];

	if (role != IPC_ROLE_USER && role != IPC_ROLE_AGENT &&
	    role != IPC_ROLE_ADMIN)
		return NULL;
	/* Before route_who narrows the role, the query says it will. */
	if (r != NULL && r->query != NULL && http_query_param(r->query,
	    "role", v, sizeof(v)) == 0 && strcmp(v, "observer") == 0)
		return NULL;
	c->creator.peer = c->ic.peer;
	c->creator.subject = c->ic.subject;
	c->creator.scope = c->ic.scope;
	return &c->creator;
}

int
route_msg_creates(const struct conn *c, const struct proto_in *in)
{
	const char *m = NULL;
	char msg[160];

	/* A project's knowledge is made by knowledge_act (kgs.c). */
	return strcmp(in->type, "chat") == 0 && !kgs_session(in->session) &&
	    proto_str(in->root, "message",
	    1, c->wk->conf->max_message, &m, msg, sizeof(msg)) == 0 &&
	    m != NULL && cJSON_GetObjectItemCaseSensitive(in->root, "to") ==
	    NULL;
}

int
route_may_access(const struct sess *s, const struct conn_who *w)
{
	return ipc_who_allows(cJSON_GetStringValue(cJSON_GetObjectItem(
	    sess_meta(s), "owner")), w->role, w->subject, w->scope, s->id);
}

/* The message a session that could not be opened is answered with. */
static const char *
open_error(struct wk *wk, const char *err)
{
	if (strcmp(err, "OVERLOADED") == 0)
		return sess_overloaded_why(wk);
	if (strcmp(err, "NOT_FOUND") == 0)
		return "no such session (it never existed or its retention "
		    "period passed); a first chat creates one";
	if (strcmp(err, "RATE_LIMITED") == 0)
		return "too many sessions were created from this address or "
		    "by this subject (max-sessions-per-address, "
		    "max-sessions-per-subject); retry later";
	if (strcmp(err, "FORBIDDEN") == 0)
		return "the session belongs to another subject; it needs "
		    "the admin role or a token whose sessions name it";
	return "the session could not be opened";
}

/*
 * A resume message's epoch into out ("" when absent).  0, or -1 with a
 * message in msg.
 */
static int
resume_epoch(cJSON *root, char *out, char *msg, size_t msglen)
{
	cJSON *e = cJSON_GetObjectItem(root, "epoch");

	out[0] = '\0';
	if (e == NULL || cJSON_IsNull(e))
		return 0;
	if (!cJSON_IsString(e) || !epoch_valid(e->valuestring)) {
		snprintf(msg, msglen, "epoch must be the string session_state "
		    "or RESUME_GAP gave (8 hex digits), or \"\"");
		return -1;
	}
	snprintf(out, EPOCH_TOKEN_LEN + 1, "%s", e->valuestring);
	return 0;
}

/* ?epoch=E into out ("" when absent).  0, or -1: a 400 was sent. */
static int
query_epoch(struct conn *c, const struct http_request *r, char *out)
{
	char v[EPOCH_TOKEN_LEN + 2];
	int rc;

	out[0] = '\0';
	if (r->query == NULL ||
	    (rc = http_query_param(r->query, "epoch", v, sizeof(v))) == -1)
		return 0;
	if (rc != 0 || !epoch_valid(v)) {
		conn_http_error(c, 400, "BAD_REQUEST", "epoch must be what "
		    "session_state or RESUME_GAP gave (8 hex digits)");
		return -1;
	}
	memcpy(out, v, EPOCH_TOKEN_LEN + 1);
	return 0;
}

/* As /stream's (route_request): a resume as first message must not
 * find events already sent live; they are held briefly. */
static void
stream_hold(struct conn *c)
{
	struct timeval tv;

	c->sub.hold = 1;
	c->sub.live = 0;
	util_tv(&tv, HOLD_MS);
	evtimer_add(c->tmo_ev, &tv);
}

static void	post_reply(struct conn *, struct sess *,
		    const struct sess_result *);

/* Answers a client message once its session says (ack, error, HTTP). */
static void
route_answer(struct conn *c, struct sess *s, const char *id,
    const struct sess_result *r)
{
	cJSON *b;
	char *j;

	if (c->kind == CONN_HTTP) {
		post_reply(c, s, r);
		return;
	}
	if (c->closing)
		return;
	if (r->code != NULL)
		conn_send_error(c, r->code, r->msg, id);
	else if (r->reply != NULL)
		conn_send_json(c, r->reply);	/* kb_search_result, ... */
	else if (id != NULL) {
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "id", id);
		if (r->seq)
			cJSON_AddNumberToObject(b, "eventSeq", (double)r->seq);
		if (r->duplicate)
			cJSON_AddBoolToObject(b, "duplicate", 1);
		j = proto_reply("ack", s->id, b);
		conn_send_json(c, j);
		free(j);
	}
}

static void	route_loaded(void *, const char *);
static void	route_text(struct conn *, const char *, size_t);

/* Keeps a request or first message until its session is loaded. */
static void
route_park(struct conn *c, const unsigned char *bytes, size_t len, int text)
{
	free(c->park);
	c->park = NULL;
	c->park_len = 0;
	if (len > 0 && (c->park = malloc(len)) != NULL) {
		memcpy(c->park, bytes, len);
		c->park_len = len;
	}
	c->park_text = text;
	c->parked = 1;
	bufferevent_disable(c->bev, EV_READ);
}

/*
 * The session a parked connection waits for is loaded (err NULL) or
 * could not be: handles what was parked as if it had just arrived.
 */
static void
route_loaded(void *arg, const char *err)
{
	struct conn *c = arg;
	unsigned char *park = c->park;
	size_t len = c->park_len;
	char sid[IPC_SID_MAX + 1];

	c->parked = 0;
	c->park = NULL;
	c->park_len = 0;
	bufferevent_enable(c->bev, EV_READ);
	if (c->park_text) {
		c->park_text = 0;
		if (err != NULL) {
			conn_send_error(c, err, open_error(c->wk, err), NULL);
			if (strcmp(err, "NOT_FOUND") == 0 ||
			    strcmp(err, "RATE_LIMITED") == 0)
				conn_close(c, WS_CLOSE_POLICY, err);
			else
				conn_close(c, WS_CLOSE_SERVICE_RESTART,
				    "session unavailable; retry");
		} else if (park != NULL)
			route_text(c, (const char *)park, len);
	} else {
		snprintf(sid, sizeof(sid), "%s", c->park_sid ?
		    c->park_sid : c->ic.session);
		if (err != NULL) {
			/* Routing answers it like a failed open. */
			c->wk->fail_sid = sid;
			c->wk->fail_err = err;
		}
		route_http(c, park, len);
		c->wk->fail_sid = NULL;
		c->wk->fail_err = NULL;
	}
	free(park);
	/* Inside sess_load, the caller goes on with the connection. */
	if (c->parking)
		return;
	if (c->kind == CONN_WS && !c->closing && !c->parked)
		conn_ws_input(c);
	conn_settle(c);
}

static void
route_text(struct conn *c, const char *text, size_t len)
{
	struct proto_in in;
	struct sess_result r;
	struct sess *s;
	const struct sess_creator *cr;
	const char *code, *err;
	char msg[256], cep[EPOCH_TOKEN_LEN + 1];
	uint64_t last = 0;
	char *j;
	cJSON *b;

	if (len == 4 && memcmp(text, "ping", 4) == 0)
		return;
	if (proto_parse(text, len, c->wk->conf->max_json_depth, &in, &code,
	    msg, sizeof(msg)) == -1) {
		conn_send_error(c, code, msg, NULL);
		conn_hold_end(c);
		return;
	}
	/* A renewed token is the connection's, whatever its session. */
	if (strcmp(in.type, "auth") == 0) {
		conn_auth(c, &in);
		proto_in_free(&in);
		return;
	}
	if (c->chat && c->sess == NULL) {
		if (!c->ic.session[0] || ((c->wk->draining ||
		    c->wk->terminating) && sess_find(c->wk, in.session) == NULL)) {
			/* Not yet at the owner (or this worker is leaving and
			 * does not hold it): hand it there. */
			if ((c->first = malloc(len)) != NULL) {
				memcpy(c->first, text, len);
				c->first_len = len;
				snprintf(c->ic.session, sizeof(c->ic.session),
				    "%s", in.session);
				c->handing_off = 1;
				bufferevent_disable(c->bev, EV_READ);
			}
			proto_in_free(&in);
			return;
		}
		if (strcmp(c->ic.session, in.session) != 0 ||
		    !ipc_scope_allows(c->ic.scope, in.session)) {
			conn_send_error(c, "FORBIDDEN",
			    "this token is scoped to "
			    "another session", in.id);
			proto_in_free(&in);
			return;
		}
		/* Only a first chat makes a session: a resume or anything
		 * else for an id that does not exist is NOT_FOUND. */
		cr = route_msg_creates(c, &in) ? route_creator(c, NULL) : NULL;
		if (!c->parked && ((s = sess_find(c->wk, in.session)) == NULL ||
		    s->loading)) {
			/* Opened first (a shared store answers later); the
			 * message is handled again once it is. */
			/* in.session is c->ic.session: the log lines'
			 * (conn_sid) and nothing else needs it kept. */
			route_park(c, (const unsigned char *)text, len, 1);
			c->parking = 1;
			sess_load(c->wk, in.session, cr, route_loaded, c);
			c->parking = 0;
			proto_in_free(&in);
			return;
		}
		if ((s = sess_get(c->wk, in.session, cr, NULL, NULL,
		    &err)) == NULL || !route_may_access(s, &c->ic)) {
			if (s != NULL)
				err = "FORBIDDEN";
			conn_send_error(c, err, open_error(c->wk, err), in.id);
			if (strcmp(err, "NOT_FOUND") == 0 ||
			    strcmp(err, "RATE_LIMITED") == 0 ||
			    strcmp(err, "FORBIDDEN") == 0)
				conn_close(c, WS_CLOSE_POLICY, err);
			proto_in_free(&in);
			return;
		}
		if (strcmp(in.type, "resume") == 0) {
			if (proto_u64(in.root, "lastSeq", 1, &last, msg,
			    sizeof(msg)) == -1 || resume_epoch(in.root, cep,
			    msg, sizeof(msg)) == -1) {
				conn_send_error(c, "BAD_REQUEST", msg, in.id);
				proto_in_free(&in);
				return;
			}
			c->got_first = 1;
			position_open(c, s, 1, last, cep);
			proto_in_free(&in);
			return;
		}
		position_open(c, s, 0, 0, "");
	}
	s = c->sess;
	if (s == NULL) {
		proto_in_free(&in);
		return;
	}
	if (strcmp(in.session, s->id) != 0) {
		conn_send_error(c, "SESSION_MISMATCH",
		    "this connection belongs to "
		    "another session; open one connection per session", in.id);
		goto out;
	}
	if (c->control && strcmp(in.type, "resume") == 0 &&
	    cJSON_GetObjectItem(in.root, "lastSeq") == NULL) {
		cJSON *t = cJSON_CreateString("resume_session");

		/* On the control channel, PROTOCOL.md's "resume" resumes the
		 * session; with lastSeq it is the replay it is elsewhere.
		 * The root changes too: a follower forwards it. */
		cJSON_ReplaceItemInObjectCaseSensitive(in.root, "type", t);
		in.type = t->valuestring;
	}
	if (strcmp(in.type, "resume") == 0) {
		if (c->got_first) {
			conn_send_error(c, "BAD_REQUEST",
			    "resume must be the first "
			    "message on a connection", in.id);
			goto out;
		}
		if (proto_u64(in.root, "lastSeq", 1, &last, msg,
		    sizeof(msg)) == -1 || resume_epoch(in.root, cep, msg,
		    sizeof(msg)) == -1) {
			conn_send_error(c, "BAD_REQUEST", msg, in.id);
			goto out;
		}
		/* Held, nothing was sent live yet: reposition.  Once events
		 * flowed, going back would send some twice. */
		if (!c->sub.hold) {
			if (last + 1 < c->sub.live_from)
				conn_send_error(c, "BAD_REQUEST",
				    "resume came after "
				    "live delivery began; reconnect with "
				    "?lastSeq=N, or send resume as the first "
				    "message at once", in.id);
			c->got_first = 1;
			goto out;
		}
		conn_detach(c);
		c->sub.hold = 0;
		evtimer_del(c->tmo_ev);
		deliver_replay_begin(&c->sub);
		conn_attach(c, s);
		if (position_set(c, s, last, cep) == -1)
			goto out;	/* cut: a follower catching up */
		c->sub.live = 0;
		c->got_first = 1;
		deliver_pump(&c->sub);
		goto out;
	}
	c->got_first = 1;
	conn_hold_end(c);
	if (strcmp(in.type, "ping") == 0) {
		b = cJSON_CreateObject();
		if (in.id)
			cJSON_AddStringToObject(b, "id", in.id);
		j = proto_reply("pong", s->id, b);
		conn_send_json(c, j);
		free(j);
		goto out;
	}
	if (c->control && strcmp(in.type, "pause") != 0 &&
	    strcmp(in.type, "resume_session") != 0 &&
	    strcmp(in.type, "terminate") != 0) {
		conn_send_error(c, "BAD_REQUEST",
		    "the control channel takes pause, "
		    "resume_session (or resume) and terminate; chat on "
		    "/sessions/{id}/stream", in.id);
		goto out;
	}
	/* The message goes again to the new owner, once c reconnects. */
	if (sess_drain_now(s)) {
		conn_close(c, WS_CLOSE_GOING_AWAY, "session moved; "
		    "reconnect with your lastSeq");
		goto out;
	}
	input_apply(s, &c->cl, &(struct sess_from){ (int)c->ic.role,
	    c->agent, c->ic.subject, 0 }, &in, &r);
	if (!r.pending)
		route_answer(c, s, in.id, &r);
out:
	proto_in_free(&in);
}

static void
session_error(struct conn *c, const char *err, const char *sid)
{
	char msg[200];

	/* Not opened here: the supervisor need not route it here again. */
	if (sess_find(c->wk, sid) == NULL)
		wk_released(c->wk, sid);
	if (strcmp(err, "NOT_FOUND") == 0 && kgs_session(sid)) {
		snprintf(msg, sizeof(msg), "no project '%s' yet: its first "
		    "batch (POST /knowledge/%s/actions) creates it", sid + 3,
		    sid + 3);
		conn_http_error(c, 404, "NOT_FOUND", msg);
	} else if (strcmp(err, "NOT_FOUND") == 0) {
		snprintf(msg, sizeof(msg), "no session '%s' (it never existed "
		    "or its retention period passed)", sid);
		conn_http_error(c, 404, "NOT_FOUND", msg);
	} else if (strcmp(err, "OVERLOADED") == 0)
		conn_http_error(c, 503, "OVERLOADED",
		    sess_overloaded_why(c->wk));
	else if (strcmp(err, "RATE_LIMITED") == 0 ||
	    strcmp(err, "FORBIDDEN") == 0)
		conn_http_error(c, err[0] == 'R' ? 429 : 403, err,
		    open_error(c->wk, err));
	else
		conn_http_error(c, 500, "INTERNAL", "the session could not be "
		    "opened; see the server log");
}

/*
 * The body of POST /sessions/SID/messages as a client message: 0 with in
 * filled, or -1 with *code and msg (HTTP 400).  A body without sessionId
 * is about the path's session.
 */
static int
post_parse(struct conn *c, const char *sid, struct proto_in *in,
    const char **code, char *msg, size_t msglen)
{
	const struct http_request *r = &c->hp.req;
	cJSON *o, *f;
	char *txt;
	int rc;

	memset(in, 0, sizeof(*in));
	*code = "BAD_REQUEST";
	if ((o = proto_json(r->body ? r->body : "", r->body_len,
	    c->wk->conf->max_json_depth, msg, msglen)) == NULL)
		return -1;
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		snprintf(msg, msglen, "body must be one JSON client event, "
		    "e.g. {\"v\":1,\"type\":\"chat\",\"message\":\"hi\"}");
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(o, "sessionId");
	if (f == NULL)
		cJSON_AddStringToObject(o, "sessionId", sid);
	else if (!cJSON_IsString(f) || strcmp(f->valuestring, sid) != 0) {
		cJSON_Delete(o);
		*code = "SESSION_MISMATCH";
		snprintf(msg, msglen, "sessionId in the body differs from the "
		    "session in the path");
		return -1;
	}
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	rc = proto_parse(txt, strlen(txt), c->wk->conf->max_json_depth, in,
	    code, msg, msglen);
	free(txt);
	if (rc == 0 && (strcmp(in->type, "resume") == 0 ||
	    strcmp(in->type, "ping") == 0)) {
		proto_in_free(in);
		snprintf(msg, msglen, "resume and ping belong on a stream, not "
		    "in POST /sessions/{id}/messages");
		return -1;
	}
	return rc;
}

/* Whether POST .../messages may create sid: a valid chat from a creator. */
static int
post_creates(struct conn *c, const char *sid)
{
	struct proto_in in;
	const char *code;
	char msg[256];
	int yes;

	if (route_creator(c, &c->hp.req) == NULL ||
	    post_parse(c, sid, &in, &code, msg, sizeof(msg)) == -1)
		return 0;
	yes = route_msg_creates(c, &in);
	proto_in_free(&in);
	return yes;
}

static void
post_message(struct conn *c, const char *sid)
{
	const struct http_request *r = &c->hp.req;
	const char *accept = http_header(r, "Accept"), *code, *err;
	struct sess_result res;
	struct proto_in in;
	struct sess *s;
	char msg[256];

	if (post_parse(c, sid, &in, &code, msg, sizeof(msg)) == -1) {
		conn_http_error(c, 400, code, msg);
		return;
	}
	if ((s = sess_get(c->wk, sid, route_msg_creates(c, &in) ?
	    route_creator(c, NULL) : NULL, NULL, NULL, &err)) == NULL) {
		proto_in_free(&in);
		session_error(c, err, sid);
		return;
	}
	c->post_sse = accept != NULL && strstr(accept, "text/event-stream") &&
	    strcmp(in.type, "chat") == 0;
	input_apply(s, &c->cl, &(struct sess_from){ (int)c->ic.role,
	    c->agent, c->ic.subject, 0 }, &in, &res);
	proto_in_free(&in);
	/* An external agent's chat has no turn here to stream. */
	if (res.no_turn)
		c->post_sse = 0;
	if (!res.pending)
		post_reply(c, s, &res);
}

/* The answer to POST .../messages: an error, 202/200, or the turn as SSE. */
static void
post_reply(struct conn *c, struct sess *s, const struct sess_result *res)
{
	cJSON *o;

	if (c->adapt != NULL) {
		c->adapt->reply(c, s, res);
		return;
	}
	if (c->kg_kind != 0) {
		kgs_http_reply(c, s, res);
		return;
	}
	if (res->code != NULL) {
		conn_http_error(c, res->http, res->code, res->msg);
		return;
	}
	if (c->deleting) {
		/* Through a follower the owner has it in its inbox, no more. */
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "sessionId", s->id);
		cJSON_AddStringToObject(o, "status", c->deleting == 2 ?
		    "terminating" : "completed");
		conn_http_reply(c, c->deleting == 2 ? 202 : 200, o);
		return;
	}
	if (c->post_sse && res->seq > 0) {
		snprintf(c->turn_msgid, sizeof(c->turn_msgid), "m-%llu",
		    (unsigned long long)res->seq);
		conn_sse_start(c);
		conn_attach(c, s);
		c->sub.next_seq = res->seq;
		c->sub.live = 0;
		deliver_pump(&c->sub);
		return;
	}
	if (res->reply != NULL) {
		/* A requester-only answer (kb.c) is the body. */
		if ((o = cJSON_Parse(res->reply)) == NULL)
			conn_http_error(c, 500, "INTERNAL", "out of memory");
		else
			conn_http_reply(c, res->http ? res->http : 200, o);
		return;
	}
	o = cJSON_CreateObject();
	if (c->kb_doc[0] != '\0')
		cJSON_AddStringToObject(o, "documentId", c->kb_doc);
	if (res->seq)
		cJSON_AddNumberToObject(o, "seq", (double)res->seq);
	if (res->duplicate)
		cJSON_AddBoolToObject(o, "duplicate", 1);
	/* 200: nothing new was accepted (a repeat, or nothing to do). */
	conn_http_reply(c,
	    res->duplicate || (res->http == 200 && res->seq == 0) ?
	    200 : 202, o);
}

/*
 * A config.autonomy that is no level (400) or more autonomous than the
 * operator's max-autonomy (403): that status with msg; else 0.
 */
static int
autonomy_check(const struct config *conf, const cJSON *body, char *msg,
    size_t msglen)
{
	const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(body,
	    "config"), "autonomy");
	enum policy_autonomy level;

	if (a == NULL)
		return 0;
	if (!cJSON_IsString(a) || policy_autonomy_parse(a->valuestring,
	    &level) == -1) {
		snprintf(msg, msglen, "field 'config.autonomy' must be "
		    "FULL_AUTO, SUPERVISED, CAUTIOUS or MANUAL");
		return 400;
	}
	if (policy_autonomy_cmp(level, conf->max_autonomy) > 0) {
		snprintf(msg, msglen, "field 'config.autonomy': the operator "
		    "allows at most %s (max-autonomy in parleyd.conf)",
		    policy_autonomy_name(conf->max_autonomy));
		return 403;
	}
	return 0;
}

/*
 * The body of POST /sessions, checked before anything is made: 0 with
 * *bodyp (NULL when empty; the caller's), or the HTTP status to answer
 * with, *code and msg.
 */
static int
create_check(struct conn *c, cJSON **bodyp, const char **code, char *msg,
    size_t msglen)
{
	const struct http_request *r = &c->hp.req;
	const cJSON *v;
	cJSON *body = NULL;
	enum thought_vis m;
	int http;

	*bodyp = NULL;
	*code = "BAD_REQUEST";
	if (r->body_len > 0) {
		if ((body = proto_json(r->body, r->body_len,
		    c->wk->conf->max_json_depth, msg, msglen)) == NULL)
			return 400;
		if (!cJSON_IsObject(body)) {
			snprintf(msg, msglen, "body must be a JSON object");
			goto bad;
		}
	}
	if ((http = autonomy_check(c->wk->conf, body, msg, msglen)) != 0) {
		if (http == 403)
			*code = "FORBIDDEN";
		cJSON_Delete(body);
		return http;
	}
	v = cJSON_GetObjectItem(cJSON_GetObjectItem(body, "config"),
	    "thoughtVisibility");
	if (v != NULL && (!cJSON_IsString(v) ||
	    thought_vis_parse(v->valuestring, &m) == -1)) {
		snprintf(msg, msglen, "field 'config.thoughtVisibility' must "
		    "be all, selective or summary");
		goto bad;
	}
	v = cJSON_GetObjectItem(cJSON_GetObjectItem(body, "config"), "rag");
	if (v != NULL && !cJSON_IsBool(v)) {
		snprintf(msg, msglen, "field 'config.rag' must be true or false "
		    "(retrieval from the knowledge base in the turns)");
		goto bad;
	}
	if (life_check(body, msg, msglen) == -1 ||
	    team_create_check(c->wk->conf, body, msg, msglen) == -1)
		goto bad;
	*bodyp = body;
	return 0;
bad:
	cJSON_Delete(body);
	return 400;
}

/*
 * GET /sessions/ID/thoughts[?agentId=A][&category=C]: the thought DAG as
 * the requester (its role, and with role=agent the agent ?agentId=
 * names) may see it.  ?author=A keeps agent A's thoughts; so does
 * ?agentId=A when it does not name the requester (a role other than
 * agent); ?category=C keeps one category.
 */
static void
get_thoughts(struct conn *c, struct sess *s)
{
	const struct http_request *r = &c->hp.req;
	char fagent[SESS_AGENT_MAX + 2], fcat[32];
	int ha, hc;

	if (strcmp(r->method, "GET") != 0) {
		conn_http_error(c, 405, "BAD_REQUEST", "use GET");
		return;
	}
	ha = r->query != NULL && (http_query_param(r->query, "author", fagent,
	    sizeof(fagent)) == 0 || (c->ic.role != IPC_ROLE_AGENT &&
	    http_query_param(r->query, "agentId", fagent,
	    sizeof(fagent)) == 0));
	hc = r->query != NULL && http_query_param(r->query, "category", fcat,
	    sizeof(fcat)) == 0;
	conn_http_reply(c, 200, thought_graph(s, (int)c->ic.role, c->agent,
	    ha ? fagent : NULL, hc ? fcat : NULL));
}

static void
create_session(struct conn *c)
{
	const char *err, *code, *sid = c->ic.session;
	struct sess *s;
	cJSON *body, *o;
	char ts[32], msg[256];
	int created, http;

	if ((http = create_check(c, &body, &code, msg, sizeof(msg))) != 0) {
		conn_http_error(c, http, code, msg);
		return;
	}
	s = sess_get(c->wk, sid, route_creator(c, NULL), &created, body, &err);
	cJSON_Delete(body);
	if (s == NULL) {
		session_error(c, err, sid);
		return;
	}
	if (!created) {
		conn_http_error(c, 409, "BAD_REQUEST", "a session with this "
		    "sessionId already exists");
		return;
	}
	team_created(s);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "sessionId", s->id);
	cJSON_AddStringToObject(o, "status", "created");
	util_iso8601(ts, cJSON_IsNumber(cJSON_GetObjectItem(sess_meta(s),
	    "createdAt")) ? (uint64_t)cJSON_GetObjectItem(sess_meta(s),
	    "createdAt")->valuedouble : util_now_ms());
	cJSON_AddStringToObject(o, "createdAt", ts);
	conn_http_reply(c, 201, o);
}

/*
 * The knowledge base's REST (kb.c has its messages): GET .../kb lists,
 * POST .../kb adds {content, metadata?}, POST .../kb/search searches
 * {query, limit?, threshold?}, DELETE .../kb/{documentId} removes; each
 * made the message it stands for and answered as POST .../messages
 * answers it.  rest is what follows "kb" in the path.  A POST's
 * Idempotency-Key header (else a random one) is its message id, so a
 * retried add is the same document.
 */
static void
kb_rest(struct conn *c, struct sess *s, const char *rest)
{
	const struct http_request *r = &c->hp.req;
	const char *type = NULL, *code, *key;
	static const char *fields[] = { "content", "metadata", "query",
	    "limit", "threshold" };
	struct sess_result res;
	struct proto_in in;
	cJSON *o, *body = NULL;
	char msg[256], *txt, gen[33];
	size_t i;

	if (*rest == '\0' && strcmp(r->method, "GET") == 0)
		type = "kb_list";
	else if (*rest == '\0' && strcmp(r->method, "POST") == 0)
		type = "kb_add";
	else if (strcmp(rest, "/search") == 0 && strcmp(r->method,
	    "POST") == 0)
		type = "kb_search";
	else if (*rest == '/' && rest[1] != '\0' && strcmp(rest,
	    "/search") != 0 && strcmp(r->method, "DELETE") == 0)
		type = "kb_remove";
	if (type == NULL) {
		conn_http_error(c, 405, "BAD_REQUEST", *rest == '\0' ?
		    "use GET (list) or POST (add)" : strcmp(rest, "/search") ==
		    0 ? "use POST" : "use DELETE");
		return;
	}
	o = proto_head(type, s->id);
	if (strcmp(type, "kb_add") == 0 || strcmp(type, "kb_search") == 0) {
		if ((body = proto_json(r->body, r->body_len,
		    c->wk->conf->max_json_depth, msg, sizeof(msg))) == NULL ||
		    !cJSON_IsObject(body)) {
			cJSON_Delete(body);
			cJSON_Delete(o);
			conn_http_error(c, 400, "BAD_REQUEST", body == NULL ?
			    msg : "body must be a JSON object");
			return;
		}
		for (i = 0; i < sizeof(fields) / sizeof(*fields); i++)
			if (cJSON_GetObjectItem(body, fields[i]) != NULL)
				cJSON_AddItemToObject(o, fields[i],
				    cJSON_DetachItemFromObject(body,
				    fields[i]));
		cJSON_Delete(body);
	}
	if (strcmp(type, "kb_remove") == 0)
		cJSON_AddStringToObject(o, "documentId", rest + 1);
	if (strcmp(type, "kb_add") == 0) {
		key = http_header(r, "Idempotency-Key");
		if (key != NULL && (strlen(key) == 0 || strlen(key) > 128)) {
			cJSON_Delete(o);
			conn_http_error(c, 400, "BAD_REQUEST", "Idempotency-Key "
			    "must hold 1 to 128 characters");
			return;
		}
		if (key == NULL) {
			util_randhex(gen, 16);
			key = gen;
		}
		cJSON_AddStringToObject(o, "id", key);
		kb_doc_id(s->id, key, c->kb_doc);
	}
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL || proto_parse(txt, strlen(txt),
	    c->wk->conf->max_json_depth, &in, &code, msg, sizeof(msg)) == -1) {
		free(txt);
		c->kb_doc[0] = '\0';
		conn_http_error(c, txt == NULL ? 500 : 400, txt == NULL ?
		    "INTERNAL" : code, txt == NULL ? "out of memory" : msg);
		return;
	}
	free(txt);
	input_apply(s, &c->cl, &(struct sess_from){ (int)c->ic.role,
	    c->agent, c->ic.subject, 0 }, &in, &res);
	proto_in_free(&in);
	if (!res.pending)
		post_reply(c, s, &res);
}

static void	route_request(struct conn *, const unsigned char *, size_t);
/*
 * The session a request is about, and whether the request may create it;
 * 0 when it needs none loaded.
 */
static int
route_session(struct conn *c, char *sid, size_t sidlen, int *create)
{
	const struct http_request *r = &c->hp.req;
	const char *path = r->path, *sub;
	size_t n;

	*create = 0;
	/* The supervisor routed it by ?sessionId=, which it checked. */
	if (strcmp(path, "/api/audit") == 0) {
		snprintf(sid, sidlen, "%s", c->ic.session);
		return store_valid_id(sid);
	}
	if (kgs_http_session(c, sid, sidlen, create))
		return 1;
	if (strcmp(path, "/api/agents/stream") == 0) {
		if (seed_session(c, sid, sidlen, create) == 0)
			return 0;
		*create = *create && route_creator(c, r) != NULL;
		return 1;
	}
	/* The AI SDK's and AG-UI's endpoints (aisdk.c, agui.c). */
	if (aisdk_path(c) || agui_path(c)) {
		if ((aisdk_path(c) ? aisdk_session(c, sid, sidlen, create) :
		    agui_session(c, sid, sidlen, create)) == 0)
			return 0;
		*create = *create && route_creator(c, r) != NULL;
		return 1;
	}
	if (strcmp(path, "/sessions") == 0 && strcmp(r->method, "POST") == 0) {
		cJSON *body;
		const char *code;
		char msg[256];

		/* Made only for a creator and a valid body: else nothing
		 * is loaded and create_session answers. */
		if (route_creator(c, r) == NULL || !c->ic.session[0] ||
		    create_check(c, &body, &code, msg, sizeof(msg)) != 0)
			return 0;
		cJSON_Delete(body);
		snprintf(sid, sidlen, "%s", c->ic.session);
		*create = 1;
		return 1;
	}
	if (strncmp(path, "/sessions/", 10) != 0)
		return 0;
	n = strcspn(path + 10, "/");
	if (n == 0 || n >= sidlen)
		return 0;
	memcpy(sid, path + 10, n);
	sid[n] = '\0';
	sub = path[10 + n] == '/' ? path + 10 + n + 1 : "";
	if (!store_valid_id(sid))
		return 0;
	/* An EventSource may open before the page posts its first message;
	 * a POST creates only with a valid chat (post_creates). */
	if (strcmp(sub, "stream") == 0 || strcmp(sub, "events") == 0)
		*create = route_creator(c, r) != NULL;
	else if (strcmp(sub, "messages") == 0)
		*create = post_creates(c, sid);
	else if (*sub != '\0' && strcmp(sub, "log") != 0 &&
	    strcmp(sub, "control") != 0 && strcmp(sub, "dashboard") != 0 &&
	    strcmp(sub, "thoughts") != 0 && strcmp(sub, "kb") != 0 &&
	    strncmp(sub, "kb/", 3) != 0)
		return 0;
	return store_valid_id(sid);
}

/*
 * Keeps sid as the session c is about, for route_loaded and the log lines
 * (conn_sid), unless c->ic.session says it already (the common case: no
 * copy held for the connection's life).  0, or -1 when out of memory.
 */
static int
route_note_sid(struct conn *c, const char *sid)
{
	free(c->park_sid);
	c->park_sid = NULL;
	if (strcmp(sid, c->ic.session) == 0)
		return 0;
	return (c->park_sid = strdup(sid)) == NULL ? -1 : 0;
}

/*
 * Routes a complete request; the parsed request is not needed after.
 * A request about a session not in memory waits for it to load.
 */
static void
route_http(struct conn *c, const unsigned char *raw, size_t rawlen)
{
	struct wk *wk = c->wk;
	struct sess *s;
	char sid[IPC_SID_MAX + 1];
	int create;

	if (c->method[0] == '\0') {
		/* The query stays out of logs: it may hold a token. */
		snprintf(c->method, sizeof(c->method), "%s", c->hp.req.method);
		snprintf(c->path, sizeof(c->path), "%s", c->hp.req.path);
	}
	if (!c->parked && !wk->draining && !wk->terminating &&
	    wk->fail_sid == NULL && route_session(c, sid, sizeof(sid),
	    &create)) {
		if (route_note_sid(c, sid) == -1) {
			conn_http_error(c, 500, "INTERNAL", "out of memory");
			http_parser_free(&c->hp);
			return;
		}
		if ((s = sess_find(wk, sid)) == NULL || s->loading) {
			route_park(c, raw, rawlen, 0);
			c->parking = 1;
			sess_load(wk, sid, create ? route_creator(c,
			    &c->hp.req) : NULL, route_loaded, c);
			c->parking = 0;
			return;
		}
	}
	c->routed = 1;
	/* Loaded: an owned session is its owner's (route_may_access). */
	if (route_session(c, sid, sizeof(sid), &create) &&
	    (s = sess_find(wk, sid)) != NULL && !s->loading &&
	    !route_may_access(s, &c->ic))
		conn_http_error(c, 403, "FORBIDDEN", open_error(c->wk,
		    "FORBIDDEN"));
	else
		route_request(c, raw, rawlen);
	http_parser_free(&c->hp);
}

/*
 * DELETE: a terminate message with the admin role (the DELETE was allowed
 * here; an owner trusts its peers).  The answer waits until the
 * session_complete is durable, or, on a follower, in the owner's inbox.
 */
static void
delete_session(struct conn *c, struct sess *s)
{
	struct sess_result res;
	struct proto_in in;
	const char *code;
	char msg[256], *txt;
	cJSON *o = proto_head("terminate", s->id);

	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL || proto_parse(txt, strlen(txt),
	    c->wk->conf->max_json_depth, &in, &code, msg, sizeof(msg)) == -1) {
		free(txt);
		conn_http_error(c, 500, "INTERNAL", "out of memory");
		return;
	}
	free(txt);
	/* As it is now: it may be promoted before the owner answers. */
	c->deleting = s->follower ? 2 : 1;
	input_apply(s, &c->cl, &(struct sess_from){ IPC_ROLE_ADMIN, "",
	    c->ic.subject, 0 }, &in, &res);
	proto_in_free(&in);
	if (!res.pending)
		post_reply(c, s, &res);
}

/*
 * A request about session sid reached a worker that is leaving and does
 * not hold it: 1 once handed back to the supervisor, which finds the new
 * owner, or answered.
 */
static int
route_leaving(struct conn *c, const char *sid, const unsigned char *raw,
    size_t rawlen)
{
	struct sess *s;

	if (!c->wk->draining && !c->wk->terminating)
		return 0;
	if ((s = sess_find(c->wk, sid)) != NULL && !sess_drain_now(s))
		return 0;
	if (raw != NULL && c->wk->draining) {
		int fd = dup(bufferevent_getfd(c->bev));
		struct ipc_conn ic;

		conn_who_ipc(c, &ic);
		snprintf(ic.session, sizeof(ic.session), "%s", sid);
		ic.flags = IPC_CONN_F_NOT_HELD;
		if (fd != -1)
			wk_reroute(c->wk, fd, &ic, raw, rawlen);
		c->closing = c->close_sent = c->freeing = 1;
		return 1;
	}
	conn_http_error(c, 503, "OVERLOADED", "worker restarting; retry");
	return 1;
}

/*
 * Who the connection acts as: ?role= narrows the token's role (an admin
 * may act as anyone, any role as an observer), ?agentId= names the
 * external agent a role=agent connection is; filter: for another role,
 * ?agentId= is the endpoint's filter (GET .../thoughts).  0, or -1
 * answered.
 */
static int
route_who(struct conn *c, const struct http_request *r, int filter)
{
	static const char *names[] = { NULL, "observer", "user", "agent",
	    "admin" };
	char v[SESS_AGENT_MAX + 2];
	int want = 0, have = (int)c->ic.role, i;
	size_t n;

	if (r->query != NULL && http_query_param(r->query, "role", v,
	    sizeof(v)) == 0) {
		for (i = 1; i < (int)(sizeof(names) / sizeof(*names)); i++)
			if (strcmp(v, names[i]) == 0)
				want = i;
		if (want == 0) {
			conn_http_error(c, 400, "BAD_REQUEST", "role must be "
			    "user, agent, observer or admin");
			return -1;
		}
		if (want != have && have != IPC_ROLE_ADMIN &&
		    want != IPC_ROLE_OBSERVER) {
			conn_http_error(c, 403, "FORBIDDEN", "the token does "
			    "not allow this role; use a token with it");
			return -1;
		}
		c->ic.role = (uint32_t)want;
		c->sub.role = want;
	}
	if (r->query == NULL || http_query_param(r->query, "agentId", v,
	    sizeof(v)) != 0) {
		if (want == IPC_ROLE_AGENT) {
			conn_http_error(c, 400, "BAD_REQUEST", "role=agent "
			    "needs agentId=NAME, the agent's id");
			return -1;
		}
		return 0;
	}
	n = strlen(v);
	if (n == 0 || n > SESS_AGENT_MAX || strspn(v, "abcdefghijklmnopqrstuv"
	    "wxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n) {
		conn_http_error(c, 400, "BAD_REQUEST", "agentId must be 1 to 64 "
		    "letters, digits, '.', '_' or '-'");
		return -1;
	}
	if (c->ic.role != IPC_ROLE_AGENT) {
		if (filter)
			return 0;	/* the endpoint's filter, not who */
		conn_http_error(c, 400, "BAD_REQUEST", "agentId names an "
		    "external agent: add role=agent");
		return -1;
	}
	memcpy(c->agent, v, n + 1);
	return 0;
}

static void
route_request(struct conn *c, const unsigned char *raw, size_t rawlen)
{
	const struct http_request *r = &c->hp.req;
	const char *path = r->path, *sub = NULL, *err;
	char sid[IPC_SID_MAX + 1], lastbuf[32], cep[EPOCH_TOKEN_LEN + 1];
	const char *hv;
	struct sess *s;
	uint64_t last = 0;
	int have_last, role = (int)c->ic.role;
	size_t n;

	if (strcmp(path, "/chat") == 0) {
		if (conn_ws_upgrade(c) == 0) {
			c->chat = 1;
			c->ic.session[0] = '\0';	/* bound by its first message */
		}
		return;
	}
	if (strcmp(path, "/sessions") == 0 && strcmp(r->method, "POST") == 0) {
		if (role == IPC_ROLE_OBSERVER)
			conn_http_error(c, 403, "FORBIDDEN", "observers cannot "
			    "create sessions");
		else
			create_session(c);
		return;
	}
	if (strcmp(path, "/api/audit") == 0) {
		if (route_leaving(c, c->ic.session, raw, rawlen))
			return;
		if (strcmp(r->method, "GET") != 0)
			conn_http_error(c, 405, "BAD_REQUEST", "use GET");
		else if ((s = sess_get(c->wk, c->ic.session, 0, NULL, NULL,
		    &err)) == NULL)
			session_error(c, err, c->ic.session);
		else
			logpage_get(c, s, 1);
		return;
	}
	/* The host's directory index: no session (index.c). */
	if (index_http(c))
		return;
	/* The knowledge MCP server: no session (kgmcp.c). */
	if (kgmcp_http(c))
		return;
	if (strcmp(path, "/api/agents/stream") == 0) {
		/* The seed-compatible turn stream (seed.c); the supervisor
		 * routed it by its body's sessionId. */
		if (c->ic.session[0] != '\0' && route_leaving(c,
		    c->ic.session, raw, rawlen))
			return;
		seed_post(c);
		return;
	}
	/* The AI SDK's UI message stream and AG-UI (aisdk.c, agui.c): the
	 * supervisor routed them by the body's or the path's session. */
	if (aisdk_path(c) || agui_path(c)) {
		if (c->ic.session[0] != '\0' && route_leaving(c,
		    c->ic.session, raw, rawlen))
			return;
		if (aisdk_path(c))
			aisdk_http(c);
		else
			agui_http(c);
		return;
	}
	/* A project's knowledge (kgs_http.c); its stream is kg:P's. */
	if ((n = (size_t)kgs_http(c, sid, sizeof(sid))) == 1)
		return;
	if (n != 0)
		sub = n == 2 ? "stream" : "events";
	else if (strncmp(path, "/sessions/", 10) != 0) {
		conn_http_error(c, 404, "NOT_FOUND", "no such endpoint");
		return;
	} else {
		n = strcspn(path + 10, "/");
		if (n == 0 || n > IPC_SID_MAX) {
			conn_http_error(c, 404, "NOT_FOUND",
			    "no such endpoint");
			return;
		}
		memcpy(sid, path + 10, n);
		sid[n] = '\0';
		if (path[10 + n] == '/')
			sub = path + 10 + n + 1;
	}
	if (route_leaving(c, sid, raw, rawlen))
		return;
	if (route_who(c, r, sub != NULL &&
	    strcmp(sub, "thoughts") == 0) == -1)
		return;
	if (sub == NULL) {
		if (strcmp(r->method, "GET") == 0) {
			if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)))
				conn_http_reply(c, 200, sess_info(s));
			else
				session_error(c, err, sid);
		} else if (strcmp(r->method, "DELETE") == 0) {
			if (role == IPC_ROLE_OBSERVER) {
				conn_http_error(c, 403, "FORBIDDEN",
				    "observers "
				    "cannot terminate sessions");
			} else if ((s = sess_get(c->wk, sid, 0, NULL, NULL,
			    &err)) == NULL)
				session_error(c, err, sid);
			else
				delete_session(c, s);
		} else
			conn_http_error(c, 405, "BAD_REQUEST",
			    "use GET or DELETE");
		return;
	}
	if (http_query_u64(r, "lastSeq", &last) == -1) {
		conn_http_error(c, 400, "BAD_REQUEST",
		    "lastSeq must be a whole "
		    "number: the highest seq the client has seen");
		return;
	}
	if (query_epoch(c, r, cep) == -1)
		return;
	if (strcmp(sub, "stream") == 0) {
		/* Made only for a role that creates (route_creator); a
		 * project only by its first batch. */
		if ((s = sess_get(c->wk, sid, kgs_session(sid) ? NULL :
		    route_creator(c, NULL), NULL,
		    NULL, &err)) == NULL) {
			session_error(c, err, sid);
			return;
		}
		if (conn_ws_upgrade(c) == -1)
			return;
		if (c->agent[0] != '\0' && team_agent(s, c->agent) != NULL) {
			/* It would read that agent's private reasoning and
			 * speak for it. */
			conn_send_error(c, "FORBIDDEN", "agentId names an internal "
			    "agent of the session (team_update); an external "
			    "agent takes a name of its own", NULL);
			conn_close(c, WS_CLOSE_POLICY, "agentId taken");
			return;
		}
		have_last = http_query_u64(r, "lastSeq", &last) == 1;
		if (position_open(c, s, have_last, last, cep) == -1)
			return;
		if (!have_last) {
			struct timeval tv;

			/* A resume as first message must not find events
			 * already sent live; hold them briefly. */
			c->sub.hold = 1;
			c->sub.live = 0;
			util_tv(&tv, HOLD_MS);
			evtimer_add(c->tmo_ev, &tv);
		}
		return;
	}
	if (strcmp(sub, "events") == 0) {
		if (strcmp(r->method, "GET") != 0) {
			conn_http_error(c, 405, "BAD_REQUEST", "use GET");
			return;
		}
		have_last = http_query_u64(r, "lastSeq", &last) == 1;
		/* A project's stream also takes ?after= (its log's GET). */
		if (!have_last && kgs_session(sid))
			have_last = http_query_u64(r, "after", &last) == 1;
		if ((hv = http_header(r, "Last-Event-ID")) != NULL &&
		    hv[0] != '\0') {
			char *end = NULL;
			int ok;

			/* "SEQ" or "SEQ.EPOCH" (our id: lines).  Anything else
			 * is refused: dropping it would start the stream live
			 * and the client would miss events unawares. */
			ok = strlen(hv) < sizeof(lastbuf);
			if (ok) {
				snprintf(lastbuf, sizeof(lastbuf), "%s", hv);
				errno = 0;
				last = strtoull(lastbuf, &end, 10);
				ok = lastbuf[0] >= '0' && lastbuf[0] <= '9' &&
				    errno == 0 && (*end == '\0' ||
				    (*end == '.' && end[1] != '\0' &&
				    epoch_valid(end + 1)));
			}
			if (!ok) {
				conn_http_error(c, 400, "BAD_REQUEST",
				    "Last-Event-ID must be an event id this "
				    "stream sent: SEQ or SEQ.EPOCH (a decimal "
				    "seq, a hex epoch); resume with it as "
				    "received, or without it to start live");
				return;
			}
			have_last = 1;
			if (*end == '.')
				memcpy(cep, end + 1, EPOCH_TOKEN_LEN + 1);
			else
				cep[0] = '\0';
		}
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL) {
			session_error(c, err, sid);
			return;
		}
		conn_sse_start(c);
		position_open(c, s, have_last, last, cep);
		return;
	}
	if (strcmp(sub, "messages") == 0) {
		if (strcmp(r->method, "POST") != 0)
			conn_http_error(c, 405, "BAD_REQUEST", "use POST");
		else
			post_message(c, sid);
		return;
	}
	if (strcmp(sub, "log") == 0) {
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL)
			session_error(c, err, sid);
		else
			logpage_get(c, s, 0);
		return;
	}
	if (strcmp(sub, "thoughts") == 0) {
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL)
			session_error(c, err, sid);
		else
			get_thoughts(c, s);
		return;
	}
	if (strcmp(sub, "control") == 0) {
		/* The operator's channel: a stream of the session (it must
		 * exist) that takes pause, resume_session and terminate. */
		if (role != IPC_ROLE_ADMIN) {
			conn_http_error(c, 403, "FORBIDDEN",
			    "the control channel "
			    "needs the admin role");
			return;
		}
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL) {
			session_error(c, err, sid);
			return;
		}
		if (conn_ws_upgrade(c) == -1)
			return;
		c->control = 1;
		have_last = http_query_u64(r, "lastSeq", &last) == 1;
		position_open(c, s, have_last, last, cep);
		return;
	}
	if (strcmp(sub, "dashboard") == 0) {
		/* Read-only, as an observer, plus metrics (dash.c). */
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL) {
			session_error(c, err, sid);
			return;
		}
		if (conn_ws_upgrade(c) == -1)
			return;
		c->ic.role = IPC_ROLE_OBSERVER;
		c->sub.role = IPC_ROLE_OBSERVER;
		c->sub.dash = 1;
		c->agent[0] = '\0';	/* no agent's presence, no author's view */
		have_last = http_query_u64(r, "lastSeq", &last) == 1;
		if (position_open(c, s, have_last, last, cep) == -1)
			return;
		if (!have_last)
			stream_hold(c);
		dash_hello(c);
		return;
	}
	if (strcmp(sub, "kb") == 0 || strncmp(sub, "kb/", 3) == 0) {
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL)
			session_error(c, err, sid);
		else
			kb_rest(c, s, sub + 2);
		return;
	}
	conn_http_error(c, 404, "NOT_FOUND", "no such endpoint");
}

/* A session answers a client message (sess_client.done). */
static void
client_done(struct sess_client *cl, struct sess *s, const char *id,
    const struct sess_result *r)
{
	route_answer(cl_conn(cl), s, id, r);
}

const struct conn_handler route_handler = {
	.request = route_http,
	.text = route_text,
	.answer = client_done,
};
