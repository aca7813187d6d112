/*
 * Client connections in a worker: the transport.  A connection arrives
 * from the supervisor with the bytes already read; its requests and
 * messages go to its handler (route.c), which answers it as plain HTTP,
 * upgrades it to WebSocket, or turns it into an event stream.  A stream
 * is a delivery subscriber (deliver.c): delivery says which logged events
 * to write, this frames and writes them; a stream whose output passes its
 * bound drops back to catching up.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/jwt.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/sse.h"
#include "parley/util.h"
#include "conn.h"
#include "deliver.h"
#include "input.h"
#include "adapt.h"
#include "life.h"
#include "sess.h"
#include "wk.h"

#define CLOSE_WAIT_MS	5000	/* peer's answer to our close frame */
#define WRITE_TMO_MS	60000	/* no write progress: the client is gone */
#define EVT_COPY_MAX	512	/* events copied, not referenced */

static void	auth_cb(evutil_socket_t, short, void *);
/* " sub NAME" after "from PEER" in a connection's log lines, for JWTs. */
#define SUB_LOG(c)	((c)->ic.subject[0] ? " sub " : ""), (c)->ic.subject

static void	conn_free(struct conn *);

/* The session a connection is about, for its log lines; NULL if none. */
static const char *
conn_sid(const struct conn *c)
{
	if (c->sess != NULL)
		return c->sess->id;
	if (c->ic.session[0] != '\0')
		return c->ic.session;
	if (c->park_sid != NULL)
		return c->park_sid;
	return NULL;
}

/* What conn_who_str answers for an empty string: never freed. */
static char who_none[1];

char *
conn_who_str(const char *s)
{
	return s[0] == '\0' ? who_none : strdup(s);
}

void
conn_who_free(char *s)
{
	if (s != who_none)
		free(s);
}

void
conn_who_ipc(const struct conn *c, struct ipc_conn *ic)
{
	memset(ic, 0, sizeof(*ic));
	ic->kind = c->ic.kind;
	ic->role = c->ic.role;
	ic->conn_id = c->ic.conn_id;
	ic->hseq = c->ic.hseq;
	ic->expires_ms = c->ic.expires_ms;
	/* Each fits: conn_new and conn_auth copied them from the wire's. */
	snprintf(ic->session, sizeof(ic->session), "%s", c->ic.session);
	snprintf(ic->scope, sizeof(ic->scope), "%s", c->ic.scope);
	snprintf(ic->subject, sizeof(ic->subject), "%s", c->ic.subject);
	snprintf(ic->peer, sizeof(ic->peer), "%s", c->ic.peer);
}

static const char *
conn_transport(const struct conn *c)
{
	return c->kind == CONN_WS ? "websocket" : c->kind == CONN_SSE ?
	    "sse" : "http";
}

/* The connection a delivery cursor is part of. */
static struct conn *
sub_conn(struct deliver_sub *sub)
{
	return (struct conn *)(void *)((char *)sub -
	    offsetof(struct conn, sub));
}

/* Subscribes c to s's events; conn_detach undoes it. */
void
conn_attach(struct conn *c, struct sess *s)
{
	c->sess = s;
	deliver_subscribe(&s->feed, &c->sub);
	/* An external agent's stream is its presence (life.c); a detach
	 * and attach to reposition a stream is not a leave. */
	if (c->agent[0] != '\0' && c->kind != CONN_HTTP && !c->post_sse &&
	    !c->present) {
		c->present = 1;
		life_conn(s, c->agent, 1);
	}
}

/* The stream of an external agent goes for good: its presence drops. */
static void
conn_absent(struct conn *c)
{
	if (c->present && c->sess != NULL) {
		c->present = 0;
		life_conn(c->sess, c->agent, -1);
	}
}

void
conn_detach(struct conn *c)
{
	deliver_unsubscribe(&c->sub);
	c->sess = NULL;
}

static int	write_evt(struct conn *, struct evt *, int);
static void	stage_flush(struct conn *, struct evbuffer *);
static void	stage_drop(struct conn *);
static size_t	out_len(struct conn *);
static struct evbuffer *out_of(struct conn *);
static void	read_abort(struct deliver_sub *);

/* --- what a connection does for delivery (struct deliver_ops) --- */

static int
sub_write(struct deliver_sub *sub, struct evt *e, int live)
{
	return write_evt(sub_conn(sub), e, live);
}

static void
sub_flush(struct deliver_sub *sub)
{
	stage_flush(sub_conn(sub), NULL);
}

static size_t
sub_queued(struct deliver_sub *sub)
{
	return out_len(sub_conn(sub));
}

static int
sub_closing(struct deliver_sub *sub)
{
	return sub_conn(sub)->closing;
}

/* Gathered bytes go to the output, so its write callback resumes it:
 * a writev that took them all would leave it waiting. */
static void
sub_behind(struct deliver_sub *sub)
{
	(void)out_of(sub_conn(sub));
}

static void
sub_gap(struct deliver_sub *sub, uint64_t first, uint64_t last)
{
	conn_send_gap(sub_conn(sub), first, last);
}

/* Delivery unsubscribed it (its session left, or its log is unreadable). */
static void
sub_close(struct deliver_sub *sub, uint16_t code, const char *why)
{
	struct conn *c = sub_conn(sub);

	c->sess = NULL;
	conn_close(c, code, why);
}

static void
sub_notice(struct deliver_sub *sub, const char *json)
{
	conn_send_json(sub_conn(sub), json);
}

static const struct deliver_ops conn_deliver_ops = {
	.write = sub_write,
	.queued = sub_queued,
	.closing = sub_closing,
	.behind = sub_behind,
	.gap = sub_gap,
	.close = sub_close,
	.abort = read_abort,
	.notice = sub_notice,
	.flush = sub_flush,
};


/*
 * The output.  Live events gathered for this loop pass (see write_evt)
 * are moved in first, so whatever is added after them goes after them.
 */
static struct evbuffer *
out_of(struct conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	if (c->pend != NULL && evbuffer_get_length(c->pend) > 0)
		evbuffer_add_buffer(out, c->pend);
	if (c->wk->stage_c == c)
		stage_flush(c, out);
	return out;
}

/* Whether nothing waits to be written: an event may go straight out. */
static int
out_idle(struct conn *c)
{
	return !c->handing_off &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0 &&
	    (c->pend == NULL || evbuffer_get_length(c->pend) == 0);
}

/*
 * Takes a client off at once, without a close frame (it is behind or
 * its output cannot be buffered); it resumes from its lastSeq.
 */
static void
conn_cut(struct conn *c)
{
	conn_absent(c);
	if (c->sess != NULL)
		conn_detach(c);
	stage_drop(c);	/* nothing more is written */
	c->closing = c->close_sent = c->freeing = c->cut = 1;
	bufferevent_disable(c->bev, EV_READ);
}

/*
 * Bytes waiting for the client, gathered ones included.  A fan-out run's
 * staged frames are not: the socket has not been offered them, so a fast
 * client's output is empty at every event of the run, as when each was
 * sent at once (delivery's bound and thought depth read this), and
 * stage_add keeps a run's under a quarter of the bound.
 */
static size_t
out_len(struct conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev)) +
	    (c->pend != NULL ? evbuffer_get_length(c->pend) : 0);
}

/*
 * Replies a client provokes (pongs, acks, errors) are not bounded by the
 * log catch-up; a client that asks without reading is cut off instead.
 */
static int
out_full(struct conn *c)
{
	if (out_len(c) <= 4 * c->wk->conf->max_output_buffer)
		return 0;
	c->wk->metrics.slow_closes++;
	log_rinfo(c->reqid, conn_sid(c), "%s from %s: output over its bound "
	    "while the client keeps sending; closed with 1008",
	    conn_transport(c), c->ic.peer);
	conn_cut(c);
	return 1;
}

static void
ws_send(struct conn *c, int opcode, const void *data, size_t len)
{
	unsigned char hdr[10];
	size_t h = ws_frame_header(hdr, opcode, len);

	if (opcode != WS_OP_CLOSE && out_full(c))
		return;
	evbuffer_add(out_of(c), hdr, h);
	if (len)
		evbuffer_add(out_of(c), data, len);
	c->last_out_ms = util_mono_ms();
}

void
conn_send_json(struct conn *c, const char *json)
{
	char type[32] = "";
	const char *t;

	if (json == NULL || c->closing)
		return;
	if (c->kind == CONN_WS) {
		ws_send(c, WS_OP_TEXT, json, strlen(json));
		return;
	}
	if (c->kind == CONN_SSE) {
		if ((t = strstr(json, "\"type\":\"")) != NULL)
			sscanf(t + 8, "%31[^\"]", type);
		sse_event(out_of(c), 0, type[0] ? type : NULL, json,
		    strlen(json));
		c->last_out_ms = util_mono_ms();
	}
}

void
conn_send_raw(struct conn *c, const void *data, size_t len)
{
	if (c->closing || len == 0)
		return;
	evbuffer_add(out_of(c), data, len);
	c->last_out_ms = util_mono_ms();
}

void
conn_send_error(struct conn *c, const char *code, const char *msg,
    const char *id)
{
	cJSON *extra = NULL;
	char *j;

	if (id != NULL) {
		extra = cJSON_CreateObject();
		cJSON_AddStringToObject(extra, "id", id);
	}
	j = proto_error(c->sess ? c->sess->id : NULL, code, msg, "warning",
	    extra);
	conn_send_json(c, j);
	free(j);
}

/*
 * Every HTTP answer carries the request id, so a client's report can be
 * matched with the server's log lines; extra is NULL or CRLF lines.
 */
void
conn_respond(struct conn *c, int status, const char *body, size_t len,
    const char *extra)
{
	char hdrs[256];

	snprintf(hdrs, sizeof(hdrs), "X-Request-Id: %s\r\n%s", c->reqid,
	    extra != NULL ? extra : "");
	http_respond(out_of(c), status, "application/json", body, len, hdrs);
	c->status = status;
}

/* Answers a plain HTTP request and closes once it is written. */
void
conn_respond_as(struct conn *c, int status, const char *type,
    const char *body, size_t len)
{
	char hdrs[64];

	snprintf(hdrs, sizeof(hdrs), "X-Request-Id: %s\r\n", c->reqid);
	http_respond(out_of(c), status, type, body, len, hdrs);
	c->status = status;
	c->closing = 1;
	c->close_sent = 1;
}

void
conn_http_reply(struct conn *c, int status, cJSON *body)
{
	char *s = cJSON_PrintUnformatted(body);

	conn_respond(c, status, s, strlen(s), NULL);
	free(s);
	cJSON_Delete(body);
	c->closing = 1;
	c->close_sent = 1;
}

void
conn_http_error(struct conn *c, int status, const char *code, const char *msg)
{
	cJSON *o = cJSON_CreateObject(), *e;
	char *s = NULL;

	if (o != NULL && (e = cJSON_AddObjectToObject(o, "error")) != NULL &&
	    cJSON_AddStringToObject(e, "code", code) != NULL &&
	    cJSON_AddStringToObject(e, "message", msg) != NULL)
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (s == NULL) {
		/* Out of memory: the plain answer needs none. */
		http_respond_error(out_of(c), status, code, msg);
		c->status = status;
	} else
		conn_respond(c, status, s, strlen(s), NULL);
	free(s);
	c->closing = 1;
	c->close_sent = 1;
}

void
conn_close(struct conn *c, uint16_t code, const char *reason)
{
	if (c->sub.range != NULL && c->page == NULL)
		/* Nothing more is written after the close. */
		deliver_read_cancel(&c->sub);
	unsigned char p[125];
	size_t n;
	struct timeval tv;

	if (c->closing)
		return;
	conn_absent(c);
	if (c->sess != NULL)
		conn_detach(c);
	if (c->kind == CONN_WS) {
		n = ws_close_payload(p, code, reason);
		ws_send(c, WS_OP_CLOSE, p, n);
	}
	c->closing = 1;
	c->close_sent = 1;
	util_tv(&tv, CLOSE_WAIT_MS);
	evtimer_add(c->tmo_ev, &tv);
	if (evbuffer_get_length(out_of(c)) == 0 && c->kind != CONN_WS)
		conn_free(c);
}

/*
 * Live events for a client with nothing queued skip the bufferevent,
 * through which every event cost an EV_WRITE arm and disarm (two
 * epoll_ctl calls) and a loop pass: the first DIRECT_PER_PASS of a loop
 * pass are sent at once, the others gathered and written with one writev
 * per client when the callbacks of the pass so far are done
 * (conn_gather_cb).  Sent one by one, a store reply acknowledging a
 * hundred appends to a session with 5,000 observers would cost half a
 * million send calls instead of 5,000.  Returns the buffer to gather in,
 * or NULL for the output.
 */
#define DIRECT_PER_PASS	1024

static struct evbuffer *
gather(struct conn *c)
{
	struct wk *wk = c->wk;

	if (c->handing_off ||
	    evbuffer_get_length(bufferevent_get_output(c->bev)) != 0)
		return NULL;
	if (c->pend == NULL && (c->pend = evbuffer_new()) == NULL)
		return NULL;
	if (!c->gathering) {
		if (TAILQ_EMPTY(&wk->gather))
			event_active(wk->gather_ev, EV_TIMEOUT, 1);
		TAILQ_INSERT_TAIL(&wk->gather, c, gentry);
		c->gathering = 1;
	}
	return c->pend;
}

/*
 * Bytes of n frames sent at once (see gather), within the loop pass's
 * budget; the pass is told by libevent's cached time, which changes once
 * a pass.  Nothing for a client with bytes queued or gathered.
 */
static size_t
send_now(struct conn *c, const struct iovec *iov, unsigned n)
{
	struct wk *wk = c->wk;
	struct timeval tv;
	ssize_t w;

	if (!out_idle(c))
		return 0;
	if (event_base_gettimeofday_cached(wk->base, &tv) == 0 &&
	    (tv.tv_sec != wk->pass.tv_sec || tv.tv_usec != wk->pass.tv_usec)) {
		wk->pass = tv;
		wk->direct_left = DIRECT_PER_PASS;
	}
	if (wk->direct_left == 0)
		return 0;
	wk->direct_left--;
	if (n == 1)
		w = send(bufferevent_getfd(c->bev), iov[0].iov_base,
		    iov[0].iov_len, MSG_DONTWAIT | MSG_NOSIGNAL);
	else {
		struct msghdr mh;

		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = (struct iovec *)(uintptr_t)iov;
		mh.msg_iovlen = n;
		w = sendmsg(bufferevent_getfd(c->bev), &mh,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	return w > 0 ? (size_t)w : 0;
}

/*
 * Adds len bytes of e's encoding to buf.  A reference costs libevent a
 * chain of its own (512 bytes or more); a small event is copied into the
 * space of the last one instead.  With references, 5,000 observers of
 * 200-byte tokens held three times their output bound.  Returns -1 when
 * out of memory.
 */
static int
evt_put(struct evbuffer *buf, struct evt *e, const char *data, size_t len)
{
	int r;

	if (len <= EVT_COPY_MAX)
		return evbuffer_add(buf, data, len);
	e->refs++;
	if ((r = evbuffer_add_reference(buf, data, len, evt_unref_cb,
	    e)) == -1)
		e->refs--;
	return r;
}

/*
 * The event (or its rest, after part of it went out) cannot be queued
 * for lack of memory: the client goes now and resumes from its lastSeq.
 */
static void
evt_lost(struct conn *c)
{
	struct timeval tv = { 0, 0 };

	conn_cut(c);
	evtimer_add(c->tmo_ev, &tv);
}

/*
 * The live frames staged for c (see write_evt) go out: to `to` (the
 * output, when something else is written after them), or else at once
 * as one sendmsg, their rest gathered.  Until then they are borrowed from
 * their events, which the fan-out holds.
 */
static void
stage_flush(struct conn *c, struct evbuffer *to)
{
	struct wk *wk = c->wk;
	struct iovec *iov = wk->stage_iov;
	struct evbuffer *buf = to;
	unsigned i, n = wk->stage_n;
	size_t sent = 0;

	if (wk->stage_c != c)
		return;
	stage_drop(c);
	if (to == NULL)
		sent = send_now(c, iov, n);
	c->last_out_ms = util_mono_ms();
	for (i = 0; i < n; i++) {
		if (sent >= iov[i].iov_len) {
			sent -= iov[i].iov_len;
			continue;
		}
		/* Only what the socket did not take is gathered. */
		if (buf == NULL && (buf = gather(c)) == NULL)
			buf = out_of(c);
		if (evt_put(buf, wk->stage_ev[i],
		    (const char *)iov[i].iov_base + sent,
		    iov[i].iov_len - sent) == -1) {
			evt_lost(c);
			return;
		}
		sent = 0;
	}
}

/* Forgets c's staged frames (stage_flush has them, or c is cut). */
static void
stage_drop(struct conn *c)
{
	struct wk *wk = c->wk;

	if (wk->stage_c != c)
		return;
	wk->stage_c = NULL;
	wk->stage_n = 0;
	wk->stage_bytes = 0;
}

/*
 * Stages a live frame for c (borrowed from e until stage_flush).  Returns
 * -1 when c was cut instead (flushing a full stage ran out of memory).
 */
static int
stage_add(struct conn *c, struct evt *e, const void *data, size_t len)
{
	struct wk *wk = c->wk;

	if (wk->stage_c != c && wk->stage_c != NULL)
		stage_flush(wk->stage_c, NULL);	/* (a run flushes its own) */
	if (wk->stage_n == WK_STAGE || (wk->stage_n > 0 && wk->stage_bytes +
	    len > wk->conf->max_output_buffer / 4)) {
		stage_flush(c, NULL);
		if (c->cut)
			return -1;
	}
	wk->stage_c = c;
	wk->stage_iov[wk->stage_n].iov_base = (void *)(uintptr_t)data;
	wk->stage_iov[wk->stage_n].iov_len = len;
	wk->stage_ev[wk->stage_n++] = e;
	wk->stage_bytes += len;
	return 0;
}

void
conn_gather_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct wk *wk = arg;
	struct evbuffer *out;
	struct conn *c;

	(void)fd;
	(void)ev;
	while ((c = TAILQ_FIRST(&wk->gather)) != NULL) {
		TAILQ_REMOVE(&wk->gather, c, gentry);
		c->gathering = 0;
		if (evbuffer_get_length(c->pend) == 0)
			continue;
		out = bufferevent_get_output(c->bev);
		if (evbuffer_get_length(out) == 0 && !c->handing_off)
			(void)evbuffer_write(c->pend, bufferevent_getfd(c->bev));
		/* The rest, or an error to meet: the bufferevent's. */
		if (evbuffer_get_length(c->pend) > 0)
			evbuffer_add_buffer(out, c->pend);
	}
}

static int	evt_written(struct conn *, struct evt *);

/*
 * Writes one logged event (live: staged until the fan-out's flush, see
 * stage_flush); ends a turn stream after its last event.  Returns 1 when
 * c was closed, and may be gone.
 */
static int
write_evt(struct conn *c, struct evt *e, int live)
{
	const char *data;
	size_t len;

	if (c->adapt != NULL) {
		int end = 0;
		char *chunks = c->adapt->chunks(c, e, &len, &end);

		if (((struct adapt_cursor *)c->adapt_st)->failed) {
			/* A chunk was lost (no memory): the client goes
			 * now and resumes from the last one it has. */
			free(chunks);
			evt_lost(c);
			return 1;
		}
		/* Translated: another protocol's framing (adapt.h). */
		if (chunks != NULL)
			evbuffer_add(out_of(c), chunks, len);
		free(chunks);
		c->last_out_ms = util_mono_ms();
		if (evt_written(c, e))
			return 1;
		if (end) {
			conn_close(c, WS_CLOSE_NORMAL, NULL);
			return 1;
		}
		return 0;
	}
	if (c->kind == CONN_WS)
		data = (const char *)evt_ws(e, &len);
	else
		data = evt_sse(e, sess_epoch(c->sess), &len);
	if (data == NULL)
		return 0;
	if (live) {
		if (stage_add(c, e, data, len) == -1)
			return 1;
	} else {
		if (evt_put(out_of(c), e, data, len) == -1) {
			evt_lost(c);
			return 1;
		}
		c->last_out_ms = util_mono_ms();
	}
	return evt_written(c, e);
}

/*
 * An event went out: the cursor moves on; a turn stream may end (1: c
 * was closed, and may be gone).
 */
static int
evt_written(struct conn *c, struct evt *e)
{
	char pat[80];

	c->wk->metrics.events_delivered++;
	c->sent++;
	if (c->sub.replaying)
		c->sub.replay_n++;
	c->sub.next_seq = e->seq + 1;
	if (c->turn_msgid[0] != '\0') {
		snprintf(pat, sizeof(pat), "\"messageId\":\"%s\"", c->turn_msgid);
		/* An error that says the provider starts over is not the
		 * end of the turn; a team's round ends with team_done, not
		 * its first done. */
		if (strcmp(e->type, "session_complete") == 0 ||
		    ((strcmp(e->type, "team_done") == 0 ||
		    (strcmp(e->type, "done") == 0 &&
		    strstr(e->json, "\"teamRound\":true") == NULL) ||
		    (strcmp(e->type, "error") == 0 &&
		    strstr(e->json, "\"retrying\":true") == NULL)) &&
		    strstr(e->json, pat))) {
			conn_close(c, WS_CLOSE_NORMAL, NULL);
			return 1;
		}
	}
	return 0;
}

/* Tells a client that retention removed events it asked for. */
void
conn_send_gap(struct conn *c, uint64_t first, uint64_t last)
{
	cJSON *x = cJSON_CreateObject();
	char *j;

	c->wk->metrics.resume_gaps++;
	log_rinfo(c->reqid, c->sess->id, "RESUME_GAP: the client asked for "
	    "seq %llu, the log starts at %llu", (unsigned long long)last + 1,
	    (unsigned long long)first);
	/* Another protocol's translation starts at its turn's first event
	 * (adapt.h): without it, it cannot go on, and its parser would
	 * choke on Parley's event.  The stream is cut, as on a lost chunk. */
	if (c->adapt != NULL) {
		struct timeval tv = { 0, 0 };

		cJSON_Delete(x);
		conn_cut(c);
		evtimer_add(c->tmo_ev, &tv);
		return;
	}
	cJSON_AddNumberToObject(x, "oldestSeq", (double)first);
	cJSON_AddNumberToObject(x, "lastSeq", (double)last);
	j = proto_error(c->sess->id, "RESUME_GAP", "events after your lastSeq "
	    "were removed by retention; replaying from oldestSeq", "warning", x);
	conn_send_json(c, j);
	free(j);
}

void
conn_hold_end(struct conn *c)
{
	if (!c->sub.hold)
		return;
	c->sub.hold = 0;
	c->sub.live_from = c->sub.next_seq;
	evtimer_del(c->tmo_ev);
	deliver_pump(&c->sub);
}

static void
heartbeat_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *c = arg;
	char *j;
	cJSON *b;
	char ts[32];

	if (c->closing || util_mono_ms() - c->last_out_ms + 50 <
	    c->wk->conf->heartbeat_ms)
		return;
	if (c->kind == CONN_SSE) {
		sse_comment(out_of(c), "heartbeat");
		c->last_out_ms = util_mono_ms();
		return;
	}
	b = cJSON_CreateObject();
	util_iso8601(ts, util_now_ms());
	cJSON_AddStringToObject(b, "ts", ts);
	j = proto_reply("heartbeat", c->sess ? c->sess->id : NULL, b);
	conn_send_json(c, j);
	free(j);
	if (c->cut)
		conn_free(c);
}

/*
 * A stream opened with a JWT lives as long as the token: at exp a
 * WebSocket client is asked for a new one (token_expiring) and has
 * jwt-grace to send it (auth); then the stream is closed, a WebSocket
 * with CONN_CLOSE_TOKEN_EXPIRED.  An SSE client cannot send, so it is
 * closed at exp + grace and reconnects with a new token and Last-Event-ID.
 */
static void
auth_arm(struct conn *c)
{
	uint64_t now = util_now_ms(), at;
	struct timeval tv;

	if (c->ic.expires_ms == 0 || c->closing)
		return;
	if (c->auth_ev == NULL &&
	    (c->auth_ev = evtimer_new(c->wk->base, auth_cb, c)) == NULL)
		return;
	at = now < c->ic.expires_ms ? c->ic.expires_ms :
	    c->ic.expires_ms + c->wk->conf->jwt_grace_ms;
	util_tv(&tv, at > now ? at - now : 0);
	evtimer_add(c->auth_ev, &tv);
}

static void
auth_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *c = arg;
	uint64_t now = util_now_ms(), end;
	cJSON *b;
	char *j;

	(void)fd;
	(void)ev;
	end = c->ic.expires_ms + c->wk->conf->jwt_grace_ms;
	if (c->closing)
		return;
	if (now >= end) {
		log_rinfo(c->reqid, conn_sid(c), "%s from %s%s%s: token "
		    "expired and not renewed in jwt-grace; closed",
		    conn_transport(c), c->ic.peer, SUB_LOG(c));
		conn_close(c, CONN_CLOSE_TOKEN_EXPIRED, "token expired");
		return;
	}
	if (now >= c->ic.expires_ms && !c->auth_asked && c->kind == CONN_WS) {
		b = cJSON_CreateObject();
		cJSON_AddNumberToObject(b, "expiresAt",
		    (double)c->ic.expires_ms);
		cJSON_AddNumberToObject(b, "closeAt", (double)end);
		j = proto_reply("token_expiring", conn_sid(c), b);
		conn_send_json(c, j);
		free(j);
		c->auth_asked = 1;
	}
	auth_arm(c);
}

void
conn_auth(struct conn *c, const struct proto_in *in)
{
	const struct config *conf = c->wk->conf;
	const char *tok = NULL, *sid = conn_sid(c);
	const struct sess *s;
	struct jwt_claims cl;
	uint32_t role;
	char *scope;
	char msg[300], why[200];
	cJSON *b;
	char *j;

	if (proto_str(in->root, "token", 1, JWT_TOKEN_MAX, &tok, msg,
	    sizeof(msg)) == -1) {
		conn_send_error(c, "BAD_REQUEST", msg, in->id);
		return;
	}
	if (c->ic.subject[0] == '\0' || conf->jwt.nkeys == 0) {
		conn_send_error(c, "BAD_REQUEST", "this connection was not "
		    "opened with a JWT: there is nothing to renew", in->id);
		return;
	}
	if (jwt_verify(&conf->jwt, tok, strlen(tok), (int64_t)(util_now_ms() /
	    1000), &cl, why, sizeof(why)) != JWT_OK) {
		snprintf(msg, sizeof(msg), "invalid JWT: %s; the connection "
		    "keeps its old token until it runs out", why);
		conn_send_error(c, "UNAUTHORIZED", msg, in->id);
		return;
	}
	if (strcmp(cl.sub, c->ic.subject) != 0) {
		conn_send_error(c, "FORBIDDEN", "the new token is for another "
		    "subject; open a new connection for it", in->id);
		return;
	}
	if (sid[0] != '\0' && !ipc_scope_allows(cl.scope, sid)) {
		conn_send_error(c, "FORBIDDEN", "the new token does not cover "
		    "this connection's session", in->id);
		return;
	}
	role = c->ic.role;
	/* An observer stream or dashboard stays one, whatever the token. */
	if (role != IPC_ROLE_OBSERVER)
		role = (uint32_t)cl.role;
	/* A session reached through the old token's admin role or share
	 * must still be reachable through the new one's. */
	if (sid[0] != '\0' && (s = sess_find(c->wk, sid)) != NULL &&
	    sess_has_meta(s) && !ipc_who_allows(cJSON_GetStringValue(
	    cJSON_GetObjectItem(sess_meta(s), "owner")), role, c->ic.subject,
	    cl.scope, sid)) {
		conn_send_error(c, "FORBIDDEN", "the session belongs to "
		    "another subject and the new token neither has the admin "
		    "role nor names the session", in->id);
		return;
	}
	if ((scope = conn_who_str(cl.scope)) == NULL) {
		conn_send_error(c, "INTERNAL", "out of memory: the connection "
		    "keeps its old token; retry", in->id);
		return;
	}
	conn_who_free(c->ic.scope);
	c->ic.scope = scope;
	c->ic.expires_ms = cl.exp > 0 ? (uint64_t)cl.exp * 1000 : 0;
	c->ic.role = role;
	c->sub.role = (int)c->ic.role;
	c->auth_asked = 0;
	if (c->auth_ev != NULL)
		evtimer_del(c->auth_ev);
	auth_arm(c);
	log_rinfo(c->reqid, sid, "%s from %s%s%s: token renewed",
	    conn_transport(c), c->ic.peer, SUB_LOG(c));
	b = cJSON_CreateObject();
	if (in->id != NULL)
		cJSON_AddStringToObject(b, "id", in->id);
	cJSON_AddNumberToObject(b, "expiresAt", (double)c->ic.expires_ms);
	j = proto_reply("auth_ok", sid, b);
	conn_send_json(c, j);
	free(j);
}

static void
stream_common(struct conn *c)
{
	struct timeval tv;

	util_tv(&tv, WRITE_TMO_MS);
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	c->hb_ev = event_new(c->wk->base, -1, EV_PERSIST, heartbeat_cb, c);
	event_add(c->hb_ev, c->wk->hb_tv);
	c->last_out_ms = util_mono_ms();
	auth_arm(c);
}

/* Completes the WebSocket handshake (RFC 6455 §4.2.2); 0, or -1 answered. */
int
conn_ws_upgrade(struct conn *c)
{
	const struct http_request *r = &c->hp.req;
	const char *key = http_header(r, "Sec-WebSocket-Key");
	const char *ver = http_header(r, "Sec-WebSocket-Version");
	const char *up = http_header(r, "Upgrade");
	const char *con = http_header(r, "Connection");
	const char *proto;
	char accept[29];

	if (strcmp(r->method, "GET") != 0 || r->minor < 1 || up == NULL ||
	    !http_has_token(up, "websocket") || con == NULL ||
	    !http_has_token(con, "upgrade")) {
		static const char m[] = "{\"error\":{\"code\":\"BAD_REQUEST\","
		    "\"message\":\"this endpoint needs a WebSocket upgrade "
		    "(GET, HTTP/1.1, Upgrade: websocket)\"}}";

		conn_respond(c, 426, m, sizeof(m) - 1,
		    "Upgrade: websocket\r\n");
		c->closing = c->close_sent = 1;
		return -1;
	}
	if (ver == NULL || strcmp(ver, "13") != 0) {
		static const char m[] = "{\"error\":{\"code\":\"BAD_REQUEST\","
		    "\"message\":\"only WebSocket version 13 is supported\"}}";

		conn_respond(c, 426, m, sizeof(m) - 1,
		    "Sec-WebSocket-Version: 13\r\n");
		c->closing = c->close_sent = 1;
		return -1;
	}
	if (key == NULL || ws_accept_key(key, accept) == -1) {
		conn_http_error(c, 400, "BAD_REQUEST", "missing or malformed "
		    "Sec-WebSocket-Key");
		return -1;
	}
	/* The answer names "parley" only, never the bearer.TOKEN the
	 * client may offer beside it (parley-protocol(7)). */
	proto = http_header(r, "Sec-WebSocket-Protocol");
	evbuffer_add_printf(out_of(c), "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: %s\r\n%sX-Request-Id: %s\r\n\r\n", accept,
	    proto != NULL && http_has_token(proto, "parley") ?
	    "Sec-WebSocket-Protocol: parley\r\n" : "", c->reqid);
	c->status = 101;
	c->kind = CONN_WS;
	c->wk->metrics.connections_total[MT_WEBSOCKET]++;
	log_rinfo(c->reqid, conn_sid(c), "websocket open: %s from %s%s%s",
	    c->path, c->ic.peer, SUB_LOG(c));
	ws_parser_init(&c->wp, c->wk->conf->max_frame, c->wk->conf->max_message);
	stream_common(c);
	return 0;
}

void
conn_sse_start(struct conn *c)
{
	conn_sse_start_ext(c, NULL);
}

void
conn_sse_start_ext(struct conn *c, const char *extra)
{
	/* sse_head's lines and the request id (sse_head takes no more). */
	evbuffer_add_printf(out_of(c), "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
	    "Connection: keep-alive\r\nX-Accel-Buffering: no\r\n"
	    "X-Request-Id: %s\r\n%s\r\n", c->reqid, extra ? extra : "");
	c->status = 200;
	c->kind = CONN_SSE;
	c->wk->metrics.connections_total[MT_SSE]++;
	log_rinfo(c->reqid, conn_sid(c), "sse open: %s %s from %s%s%s",
	    c->method, c->path, c->ic.peer, SUB_LOG(c));
	stream_common(c);
}

/* The /chat connection goes to the session's owner with its first message. */
static void
chat_handoff(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t rest = evbuffer_get_length(in);
	unsigned char *buf;
	struct ipc_conn ic;
	int fd;

	conn_who_ipc(c, &ic);
	if ((buf = malloc(c->first_len + rest + 1)) == NULL ||
	    (fd = dup(bufferevent_getfd(c->bev))) == -1) {
		free(buf);
		conn_free(c);
		return;
	}
	memcpy(buf, c->first, c->first_len);
	evbuffer_remove(in, buf + c->first_len, rest);
	ic.kind = IPC_CONN_WS_CHAT;
	ic.first_len = (uint32_t)c->first_len;
	ic.bytes_len = (uint32_t)(c->first_len + rest);
	ic.flags = sess_find(c->wk, ic.session) ? 0 : IPC_CONN_F_NOT_HELD;
	wk_reroute(c->wk, fd, &ic, buf, ic.bytes_len);
	free(buf);
	conn_free(c);
}

void
conn_ws_input(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct ws_message m;
	enum ws_status st;
	unsigned char *data;
	size_t len, used;

	/* A parked connection resumes once its session is loaded. */
	while (!c->handing_off && !c->parked &&
	    (len = evbuffer_get_length(in)) > 0) {
		data = evbuffer_pullup(in, -1);
		st = ws_parse(&c->wp, data, len, &used, &m);
		evbuffer_drain(in, used);
		if (st == WS_NEED_MORE)
			return;
		if (st == WS_FAIL) {
			log_rdebug(c->reqid, conn_sid(c), "websocket: %s",
			    ws_parser_error(&c->wp));
			if (!c->closing)
				conn_close(c, ws_parser_close_code(&c->wp),
				    ws_parser_error(&c->wp));
			bufferevent_disable(c->bev, EV_READ);
			c->freeing = 1;	/* no closing handshake after a failure */
			return;
		}
		switch (m.opcode) {
		case WS_OP_TEXT:
			if (!c->closing)
				c->h->text(c, (const char *)m.data, m.len);
			break;
		case WS_OP_BINARY:
			if (!c->closing)
				conn_close(c, WS_CLOSE_UNSUPPORTED, "binary "
				    "frames are not supported; send JSON text");
			break;
		case WS_OP_PING:
			if (!c->closing)
				ws_send(c, WS_OP_PONG, m.data, m.len);
			break;
		case WS_OP_PONG:
			break;
		case WS_OP_CLOSE:
			if (!c->closing)
				conn_close(c, m.close_code == WS_CLOSE_NO_STATUS ?
				    WS_CLOSE_NORMAL : m.close_code, NULL);
			/* The handshake is complete either way. */
			c->freeing = 1;
			bufferevent_disable(c->bev, EV_READ);
			return;
		}
	}
}

static void
read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t used, len;
	unsigned char *data;

	switch (c->kind) {
	case CONN_HTTP:
		len = evbuffer_get_length(in);
		if (c->routed) {
			/* One request per connection: what follows is noise. */
			evbuffer_drain(in, len);
			break;
		}
		data = evbuffer_pullup(in, -1);
		switch (http_parse(&c->hp, (char *)data, len, &used)) {
		case HTTP_NEED_MORE:
			evbuffer_drain(in, used);
			return;
		case HTTP_ERROR:
			evbuffer_drain(in, len);
			conn_http_error(c, c->hp.status, "BAD_REQUEST",
			    c->hp.error);
			break;
		case HTTP_DONE:
			evbuffer_drain(in, used);
			c->h->request(c, NULL, 0);
			break;
		}
		break;
	case CONN_WS:
		conn_ws_input(c);
		break;
	case CONN_SSE:
		evbuffer_drain(in, evbuffer_get_length(in));
		break;
	}
	conn_settle(c);
}

/* Its session is leaving memory: a log read under way ended (503, 1012). */
static void
read_abort(struct deliver_sub *sub)
{
	struct conn *c = sub_conn(sub);

	if (c->page != NULL) {
		evbuffer_free(c->page->out);
		free(c->page);
		c->page = NULL;
		conn_http_error(c, 503, "OVERLOADED", "the session was let go "
		    "while its log was read; retry");
		conn_settle(c);
	} else
		conn_close(c, WS_CLOSE_SERVICE_RESTART, "session moved; "
		    "reconnect with your lastSeq");
}

/* After input was handled: frees, hands off or keeps the connection. */
void
conn_settle(struct conn *c)
{
	if (c->cut)
		conn_free(c);
	else if (c->handing_off && evbuffer_get_length(out_of(c)) == 0)
		chat_handoff(c);
	else if ((c->closing || c->freeing) &&
	    evbuffer_get_length(out_of(c)) == 0 && (c->freeing ||
	    c->kind != CONN_WS))
		conn_free(c);
}

static void
write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->handing_off) {
		chat_handoff(c);
		return;
	}
	if (c->closing) {
		/* A WebSocket waits for the peer's close frame (or timeout). */
		if (c->kind != CONN_WS || c->freeing)
			conn_free(c);
		return;
	}
	if (!c->sub.live)
		deliver_pump(&c->sub);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_WRITING))
		log_rinfo(c->reqid, conn_sid(c), "%s from %s: client stopped "
		    "reading; closed, it resumes from the log when it returns",
		    conn_transport(c), c->ic.peer);
	conn_free(c);
}

static void
tmo_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *c = arg;

	if (c->sub.hold && !c->closing) {
		conn_hold_end(c);
		return;
	}
	conn_free(c);
}

static void
conn_free(struct conn *c)
{
	struct wk *wk = c->wk;

	deliver_replay_end(&c->sub);
	if (c->kind != CONN_HTTP)
		log_rinfo(c->reqid, conn_sid(c), "%s closed: %s from %s%s%s, "
		    "%llu events in %.1f s%s", conn_transport(c), c->path,
		    c->ic.peer, SUB_LOG(c), (unsigned long long)c->sent,
		    (double)(util_mono_ms() - c->opened_ms) / 1000,
		    c->handing_off ? ", handed to the session's owner" : "");
	else if (c->status != 0) {
		/* One line per request, like an access log. */
		wk->metrics.connections_total[MT_HTTP]++;
		log_rinfo(c->reqid, conn_sid(c), "%s %s %d from %s%s%s",
		    c->method[0] ? c->method : "-", c->path[0] ? c->path : "-",
		    c->status, c->ic.peer, SUB_LOG(c));
	}
	conn_absent(c);
	if (c->sess != NULL)
		conn_detach(c);
	if (c->parked || c->cl.waits > 0)
		sess_load_cancel(wk, c);
	sess_client_gone(wk, &c->cl);
	deliver_sub_end(&c->sub);
	if (c->page != NULL) {
		evbuffer_free(c->page->out);
		free(c->page);
	}
	free(c->park);
	free(c->park_sid);
	free(c->kg_batch);
	if (c->adapt != NULL)
		c->adapt->free(c->adapt_st);
	if (c->gathering)
		TAILQ_REMOVE(&wk->gather, c, gentry);
	stage_drop(c);
	if (c->pend != NULL)
		evbuffer_free(c->pend);
	TAILQ_REMOVE(&wk->conns, c, entry);
	wk->nconns--;
	if (c->hb_ev)
		event_free(c->hb_ev);
	if (c->auth_ev)
		event_free(c->auth_ev);
	event_free(c->tmo_ev);
	bufferevent_free(c->bev);
	http_parser_free(&c->hp);
	if (c->kind == CONN_WS)
		ws_parser_free(&c->wp);
	free(c->first);
	conn_who_free(c->ic.scope);
	conn_who_free(c->ic.subject);
	free(c);
	wk_maybe_exit(wk);
}

void
conn_drop(struct conn *c)
{
	conn_free(c);
}

/*
 * Puts bytes the supervisor (or a sibling) already read in front of what
 * the socket delivers.  A socket bufferevent keeps its input frozen
 * outside its own reads, hence the thaw.
 */
static void
input_inject(struct conn *c, const unsigned char *bytes, size_t len)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);

	/* Even an empty add gives the buffer a 1 KiB chain it keeps for
	 * the life of an idle connection. */
	if (len == 0)
		return;
	evbuffer_unfreeze(in, 0);
	evbuffer_add(in, bytes, len);
	evbuffer_freeze(in, 0);
}

void
conn_new(struct wk *wk, int fd, const struct ipc_conn *ic,
    const unsigned char *bytes, const struct conn_handler *h)
{
	struct http_limits lim;
	struct conn *c;
	struct timeval tv;
	size_t used;
	enum http_result hr;

	if (wk->nconns >= wk->conf->max_connections || !wk_fd_room(wk, 1)) {
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
		    "Connection: close\r\nContent-Length: 0\r\n\r\n";

		if (write(fd, busy, sizeof(busy) - 1) < 0)
			log_debug("busy: write failed");
		close(fd);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	c->ic.scope = conn_who_str(ic->scope);
	c->ic.subject = conn_who_str(ic->subject);
	if (c->ic.scope == NULL || c->ic.subject == NULL) {
		conn_who_free(c->ic.scope);
		conn_who_free(c->ic.subject);
		free(c);
		close(fd);
		return;
	}
	c->ic.kind = ic->kind;
	c->ic.role = ic->role;
	c->ic.conn_id = ic->conn_id;
	c->ic.hseq = ic->hseq;
	c->ic.expires_ms = ic->expires_ms;
	memcpy(c->ic.session, ic->session, sizeof(c->ic.session));
	memcpy(c->ic.peer, ic->peer, sizeof(c->ic.peer));
	evutil_make_socket_nonblocking(fd);
	c->wk = wk;
	log_reqid(c->reqid, ic->conn_id);
	deliver_sub_init(&c->sub, wk, &conn_deliver_ops, c->reqid);
	c->sub.role = (int)c->ic.role;
	c->sub.agent = c->agent;
	/* Random, not the request id: every reader of the log sees it. */
	memcpy(c->cl.cid, "c-", 2);
	util_randhex(c->cl.cid + 2, 8);
	c->cl.reqid = c->reqid;
	c->h = h;
	c->cl.done = h->answer;
	c->opened_ms = util_mono_ms();
	c->bev = bufferevent_socket_new(wk->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->tmo_ev = evtimer_new(wk->base, tmo_cb, c);
	if (c->bev == NULL || c->tmo_ev == NULL) {
		if (c->bev)
			bufferevent_free(c->bev);
		else
			close(fd);
		if (c->tmo_ev)
			event_free(c->tmo_ev);
		conn_who_free(c->ic.scope);
		conn_who_free(c->ic.subject);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&wk->conns, c, entry);
	wk->nconns++;
	util_tv(&tv, WRITE_TMO_MS);
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	lim.max_request_line = wk->conf->max_request_line;
	lim.max_header_bytes = wk->conf->max_header_size;
	lim.max_headers = wk->conf->max_headers;
	lim.max_body = wk->conf->max_body;
	http_parser_init(&c->hp, &lim);

	if (ic->kind == IPC_CONN_WS_CHAT) {
		/* Counted and logged as opened by the worker it came from. */
		snprintf(c->method, sizeof(c->method), "GET");
		snprintf(c->path, sizeof(c->path), "/chat");
		log_rdebug(c->reqid, ic->session, "websocket /chat from %s "
		    "handed over by a sibling", ic->peer);
		c->kind = CONN_WS;
		c->chat = 1;
		ws_parser_init(&c->wp, wk->conf->max_frame,
		    wk->conf->max_message);
		stream_common(c);
		input_inject(c, bytes + ic->first_len,
		    ic->bytes_len - ic->first_len);
		c->h->text(c, (const char *)bytes, ic->first_len);
		conn_ws_input(c);
	} else {
		hr = http_parse(&c->hp, (const char *)bytes, ic->bytes_len,
		    &used);
		if (hr == HTTP_DONE) {
			/* Bytes a client sent after the request are frames. */
			input_inject(c, bytes + used, ic->bytes_len - used);
			c->h->request(c, bytes, ic->bytes_len);
			if (c->kind == CONN_WS && !c->closing)
				conn_ws_input(c);
		} else if (hr == HTTP_ERROR)
			conn_http_error(c, c->hp.status, "BAD_REQUEST",
			    c->hp.error);
		else {
			util_tv(&tv, wk->conf->handshake_timeout_ms);
			evtimer_add(c->tmo_ev, &tv);
		}
	}
	if (c->handing_off && evbuffer_get_length(out_of(c)) == 0)
		chat_handoff(c);
	else if (c->freeing || (c->closing && c->kind != CONN_WS &&
	    evbuffer_get_length(out_of(c)) == 0))
		conn_free(c);
}
