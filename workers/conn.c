/*
 * Client connections in a worker.  A connection arrives from the
 * supervisor with the bytes already read; it is answered as plain HTTP,
 * upgraded to WebSocket, or turned into an event stream.  Streams are fed
 * from the session's recent events or its log until they are level with
 * it, then by fan-out; a stream whose output passes its bound drops back
 * to catching up.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/sse.h"
#include "parley/store.h"
#include "parley/util.h"
#include "conn.h"
#include "sess.h"
#include "worker.h"

#define HOLD_MS		250	/* wait for a resume before going live */
#define CLOSE_WAIT_MS	5000	/* peer's answer to our close frame */
#define WRITE_TMO_MS	60000	/* no write progress: the client is gone */
#define PUMP_BATCH	256
#define EVT_COPY_MAX	512	/* events copied, not referenced */
/*
 * Catch-up reads of a shared store in flight per worker.  They share the
 * store's connection with lease renewals and appends, whose replies wait
 * behind theirs: 5,000 observers falling behind a fast turn at once kept
 * a renewal's answer back past the lease, and the worker let the
 * session go.  The others wait their turn (wk->read_wait).
 */
#define PUMP_READS	16

static void	conn_free(struct conn *);

/* The session a connection is about, for its log lines; NULL if none. */
static const char *
conn_sid(const struct conn *c)
{
	if (c->sess != NULL)
		return c->sess->id;
	if (c->ic.session[0] != '\0')
		return c->ic.session;
	if (c->park_sid[0] != '\0')
		return c->park_sid;
	return NULL;
}

static const char *
conn_transport(const struct conn *c)
{
	return c->kind == CONN_WS ? "websocket" : c->kind == CONN_SSE ?
	    "sse" : "http";
}

/* A resume began reading the log for this client. */
static void
replay_begin(struct conn *c)
{
	c->wk->metrics.replays++;
	c->replaying = 1;
	c->replay_n = 0;
}

/* ... and it is level with the log (or gone): how much it replayed. */
static void
replay_end(struct conn *c)
{
	if (!c->replaying)
		return;
	c->replaying = 0;
	metrics_observe(&c->wk->metrics.replay_events, MSC_COUNT,
	    (double)c->replay_n);
}

static void	pump(struct conn *, int woken);

/* A read of a session's log ended or was cancelled. */
static void
range_clear(struct conn *c)
{
	struct wk *wk = c->wk;

	c->range = NULL;
	if (c->range_sess != NULL)
		c->range_sess->nreaders--;
	c->range_sess = NULL;
	if (c->pump_read) {
		c->pump_read = 0;
		wk->pump_reads--;
		if (!TAILQ_EMPTY(&wk->read_wait))
			event_active(wk->read_ev, EV_TIMEOUT, 1);
	}
}

/* Pumps the clients waiting for a catch-up read, as reads end. */
void
conn_read_wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct wk *wk = arg;
	struct conn *c;

	(void)fd;
	(void)ev;
	while (wk->pump_reads < PUMP_READS &&
	    (c = TAILQ_FIRST(&wk->read_wait)) != NULL) {
		TAILQ_REMOVE(&wk->read_wait, c, rwentry);
		c->read_waiting = 0;
		pump(c, 1);	/* may free c */
	}
}

/* A GET .../log answer being read from the log. */
struct page {
	struct evbuffer	*out;
	int		 n;
};
static void	conn_route(struct conn *, const unsigned char *, size_t);
static void	ws_input(struct conn *);
static int	acts_on_session(const char *, size_t);

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
	if (c->sess != NULL)
		sess_detach(c->sess, c);
	c->closing = c->close_sent = c->freeing = c->cut = 1;
	bufferevent_disable(c->bev, EV_READ);
}

/* Bytes waiting for the client, gathered ones included. */
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

static void
send_error(struct conn *c, const char *code, const char *msg, const char *id)
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
static void
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
static void
http_reply(struct conn *c, int status, cJSON *body)
{
	char *s = cJSON_PrintUnformatted(body);

	conn_respond(c, status, s, strlen(s), NULL);
	free(s);
	cJSON_Delete(body);
	c->closing = 1;
	c->close_sent = 1;
}

static void
http_error(struct conn *c, int status, const char *code, const char *msg)
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
	if (c->range != NULL && c->page == NULL) {
		/* Nothing more is written after the close. */
		store_req_cancel(c->range);
		range_clear(c);
	}
	unsigned char p[125];
	size_t n;
	struct timeval tv;

	if (c->closing)
		return;
	if (c->sess != NULL)
		sess_detach(c->sess, c);
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
 * Bytes of an event sent at once (see gather), within the loop pass's
 * budget; the pass is told by libevent's cached time, which changes once
 * a pass.  Nothing for a client with bytes queued or gathered.
 */
static size_t
send_now(struct conn *c, const void *data, size_t len)
{
	struct wk *wk = c->wk;
	struct timeval tv;
	ssize_t n;

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
	n = send(bufferevent_getfd(c->bev), data, len,
	    MSG_DONTWAIT | MSG_NOSIGNAL);
	return n > 0 ? (size_t)n : 0;
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

/*
 * Writes one logged event (live: see gather); ends a turn stream after
 * its last event.
 */
static void
write_evt(struct conn *c, struct evt *e, int live)
{
	struct evbuffer *buf = NULL;
	const char *data;
	size_t len, off = 0;
	char pat[80];

	if (c->kind == CONN_WS)
		data = (const char *)evt_ws(e, &len);
	else
		data = evt_sse(e, &len);
	if (data == NULL)
		return;
	/* Only what the socket did not take is gathered. */
	if (live && (off = send_now(c, data, len)) < len)
		buf = gather(c);
	if (buf == NULL)
		buf = out_of(c);
	if (off < len) {
		int r;

		/*
		 * A reference costs libevent a chain of its own (512 bytes
		 * or more); a small event is copied into the space of the
		 * last one instead.  With references, 5,000 observers of
		 * 200-byte tokens held three times their output bound.
		 */
		if (len - off <= EVT_COPY_MAX)
			r = evbuffer_add(buf, data + off, len - off);
		else {
			e->refs++;
			if ((r = evbuffer_add_reference(buf, data + off,
			    len - off, evt_unref_cb, e)) == -1)
				e->refs--;
		}
		if (r == -1) {
			struct timeval tv = { 0, 0 };

			/* No memory: the event (or its rest, after half
			 * of it went out) cannot be sent, so the client
			 * goes now and resumes from its lastSeq. */
			conn_cut(c);
			evtimer_add(c->tmo_ev, &tv);
			return;
		}
	}
	c->wk->metrics.events_delivered++;
	c->sent++;
	if (c->replaying)
		c->replay_n++;
	c->next_seq = e->seq + 1;
	c->last_out_ms = util_mono_ms();
	if (c->turn_msgid[0] != '\0') {
		snprintf(pat, sizeof(pat), "\"messageId\":\"%s\"", c->turn_msgid);
		/* An error that says the provider starts over is not the
		 * end of the turn. */
		if (strcmp(e->type, "session_complete") == 0 ||
		    ((strcmp(e->type, "done") == 0 ||
		    (strcmp(e->type, "error") == 0 &&
		    strstr(e->json, "\"retrying\":true") == NULL)) &&
		    strstr(e->json, pat)))
			conn_close(c, WS_CLOSE_NORMAL, NULL);
	}
}

static int
pump_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct conn *c = arg;
	struct evt *e;

	if (seq != c->next_seq)
		return 1;
	if ((e = evt_new(seq, json, len)) == NULL)
		return 1;
	write_evt(c, e, 0);
	evt_unref(e);
	return c->closing;
}

/* Tells a client that retention removed events it asked for. */
static void
send_gap(struct conn *c, uint64_t first, uint64_t last)
{
	cJSON *x = cJSON_CreateObject();
	char *j;

	c->wk->metrics.resume_gaps++;
	log_rinfo(c->reqid, c->sess->id, "RESUME_GAP: the client asked for "
	    "seq %llu, the log starts at %llu", (unsigned long long)last + 1,
	    (unsigned long long)first);
	cJSON_AddNumberToObject(x, "oldestSeq", (double)first);
	cJSON_AddNumberToObject(x, "lastSeq", (double)last);
	j = proto_error(c->sess->id, "RESUME_GAP", "events after your lastSeq "
	    "were removed by retention; replaying from oldestSeq", "warning", x);
	conn_send_json(c, j);
	free(j);
}

static void
pump_done(void *arg, ssize_t n)
{
	struct conn *c = arg;

	range_clear(c);
	if (c->ranging) {
		/* Answered inside the call: conn_pump goes on. */
		c->ranging = 2 + (n <= 0);
		return;
	}
	if (n <= 0) {
		c->wk->metrics.store_errors++;
		log_rwarnx(c->reqid, conn_sid(c), "cannot read seq %llu for "
		    "the client; closing it", (unsigned long long)c->next_seq);
		conn_close(c, WS_CLOSE_INTERNAL, "log unreadable");	/* may free c */
		return;
	}
	conn_pump(c);
}

void
conn_pump(struct conn *c)
{
	pump(c, 0);
}

/* conn_pump; woken: it is this client's turn for a catch-up read. */
static void
pump(struct conn *c, int woken)
{
	struct sess *s = c->sess;
	size_t bound = c->wk->conf->max_output_buffer;
	uint64_t before;
	int n;

	if (s == NULL || c->hold || c->closing || c->range != NULL)
		return;
	while (!c->closing && c->next_seq <= sess_last_seq(s) &&
	    out_len(c) < bound) {
		struct evt *e;

		if (c->next_seq < sess_first_seq(s)) {
			/* Trimmed while this client was catching up. */
			send_gap(c, sess_first_seq(s), c->next_seq - 1);
			c->next_seq = sess_first_seq(s);
		}
		/* Recent ones are shared, not read back and copied. */
		if ((e = sess_recent(s, c->next_seq)) != NULL) {
			before = c->next_seq;
			write_evt(c, e, 0);
			if (c->next_seq == before && !c->closing) {
				/* Not even its framing could be made. */
				conn_close(c, WS_CLOSE_INTERNAL,
				    "out of memory");	/* may free c */
				return;
			}
			continue;
		}
		before = c->next_seq;
		n = sess_range(s, c->next_seq - 1, PUMP_BATCH, pump_cb, c);
		if (n < 0 && errno == EAGAIN) {
			struct store_req *req;

			/* In turn: one that just read queues behind the
			 * waiting ones. */
			if (c->wk->pump_reads >= PUMP_READS ||
			    (!TAILQ_EMPTY(&c->wk->read_wait) && !woken)) {
				if (!c->read_waiting) {
					TAILQ_INSERT_TAIL(&c->wk->read_wait, c,
					    rwentry);
					c->read_waiting = 1;
				}
				return;
			}
			/* Not at hand (a shared store): read it, then go on. */
			c->ranging = 1;
			req = sess_range_async(s, c->next_seq - 1, PUMP_BATCH,
			    pump_cb, pump_done, c);
			if (c->ranging == 1) {
				c->ranging = 0;
				c->range = req;
				c->range_sess = s;
				s->nreaders++;
				c->pump_read = 1;
				c->wk->pump_reads++;
				return;
			}
			n = c->ranging == 3 ? -1 : 1;
			c->ranging = 0;
		}
		if (n < 0 || c->next_seq == before) {
			log_warnx("session %s: cannot read seq %llu for a "
			    "client; closing it", s->id,
			    (unsigned long long)c->next_seq);
			conn_close(c, WS_CLOSE_INTERNAL, "log unreadable");
			return;
		}
	}
	if (!c->closing && c->next_seq > sess_last_seq(s)) {
		c->live = 1;
		replay_end(c);
	}
}

void
conn_push(struct conn *c, struct evt *e)
{
	if (c->closing || c->hold || !c->live || e->seq < c->next_seq)
		return;	/* (already sent: a follower's view can lag) */
	if (e->seq == c->next_seq &&
	    out_len(c) < c->wk->conf->max_output_buffer) {
		write_evt(c, e, 1);
		return;
	}
	if (out_len(c) >= c->wk->conf->max_output_buffer)
		c->wk->metrics.slow_catchups++;
	log_rdebug(c->reqid, conn_sid(c), "off live feed at seq %llu "
	    "(expected %llu, %zu bytes queued)", (unsigned long long)e->seq,
	    (unsigned long long)c->next_seq, out_len(c));
	/* Slow, or it missed one: the log has everything, in order.  The
	 * write callback resumes it once its output drains. */
	c->live = 0;
	/* Its write callback resumes it: gathered bytes go to the output,
	 * or a writev that took them all would leave it waiting. */
	(void)out_of(c);
	if (out_len(c) < c->wk->conf->max_output_buffer)
		conn_pump(c);
}

/*
 * Positions a stream: session_state first, then RESUME_GAP if the log no
 * longer holds what the client asks for, then replay and live.
 */
static void
stream_open(struct conn *c, struct sess *s, int have_last, uint64_t last)
{
	char *j;
	uint64_t first = sess_first_seq(s), top = sess_last_seq(s);

	sess_attach(s, c);
	j = proto_reply("session_state", s->id, sess_state(s));
	conn_send_json(c, j);
	free(j);
	c->live = 0;
	if (!have_last) {
		c->next_seq = top + 1;
	} else {
		replay_begin(c);
		/* Past the end: the owner knows the log ends at top; a
		 * follower may not have heard of what the client saw. */
		if (last > top && !s->follower)
			last = top;
		c->next_seq = last + 1;
		if (c->next_seq < first) {
			send_gap(c, first, last);
			c->next_seq = first;
		}
	}
	c->live_from = c->next_seq;
	conn_pump(c);
}

static void
hold_end(struct conn *c)
{
	if (!c->hold)
		return;
	c->hold = 0;
	c->live_from = c->next_seq;
	evtimer_del(c->tmo_ev);
	conn_pump(c);
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

static void
stream_common(struct conn *c)
{
	struct timeval tv;

	util_tv(&tv, WRITE_TMO_MS);
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	c->hb_ev = event_new(c->wk->base, -1, EV_PERSIST, heartbeat_cb, c);
	event_add(c->hb_ev, c->wk->hb_tv);
	c->last_out_ms = util_mono_ms();
}

/* Completes the WebSocket handshake (RFC 6455 §4.2.2); 0, or -1 answered. */
static int
ws_upgrade(struct conn *c)
{
	const struct http_request *r = &c->hp.req;
	const char *key = http_header(r, "Sec-WebSocket-Key");
	const char *ver = http_header(r, "Sec-WebSocket-Version");
	const char *up = http_header(r, "Upgrade");
	const char *con = http_header(r, "Connection");
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
		http_error(c, 400, "BAD_REQUEST", "missing or malformed "
		    "Sec-WebSocket-Key");
		return -1;
	}
	evbuffer_add_printf(out_of(c), "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: %s\r\nX-Request-Id: %s\r\n\r\n", accept,
	    c->reqid);
	c->status = 101;
	c->kind = CONN_WS;
	c->wk->metrics.connections_total[MT_WEBSOCKET]++;
	log_rinfo(c->reqid, conn_sid(c), "websocket open: %s from %s",
	    c->path, c->ic.peer);
	ws_parser_init(&c->wp, c->wk->conf->max_frame, c->wk->conf->max_message);
	stream_common(c);
	return 0;
}

static void
sse_start(struct conn *c)
{
	/* sse_head's lines and the request id (sse_head takes no more). */
	evbuffer_add_printf(out_of(c), "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
	    "Connection: keep-alive\r\nX-Accel-Buffering: no\r\n"
	    "X-Request-Id: %s\r\n\r\n", c->reqid);
	c->status = 200;
	c->kind = CONN_SSE;
	c->wk->metrics.connections_total[MT_SSE]++;
	log_rinfo(c->reqid, conn_sid(c), "sse open: %s %s from %s",
	    c->method, c->path, c->ic.peer);
	stream_common(c);
}

/* The /chat connection goes to the session's owner with its first message. */
static void
chat_handoff(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t rest = evbuffer_get_length(in);
	unsigned char *buf;
	struct ipc_conn ic = c->ic;
	int fd;

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

static void	post_reply(struct conn *, struct sess *,
		    const struct sess_result *);

void
conn_input_done(struct conn *c, struct sess *s, const char *id,
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
		send_error(c, r->code, r->msg, id);
	else if (id != NULL) {
		b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "id", id);
		if (r->seq)
			cJSON_AddNumberToObject(b, "seq", (double)r->seq);
		if (r->duplicate)
			cJSON_AddBoolToObject(b, "duplicate", 1);
		j = proto_reply("ack", s->id, b);
		conn_send_json(c, j);
		free(j);
	}
}

static void	conn_loaded(void *, const char *);
static void	on_text(struct conn *, const char *, size_t);

/* Keeps a request or first message until its session is loaded. */
static void
conn_park(struct conn *c, const unsigned char *bytes, size_t len, int text)
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

static void	conn_route(struct conn *, const unsigned char *, size_t);
static void	conn_settle(struct conn *);

/*
 * The session a parked connection waits for is loaded (err NULL) or
 * could not be: handles what was parked as if it had just arrived.
 */
static void
conn_loaded(void *arg, const char *err)
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
			send_error(c, err, "the session could not be opened",
			    NULL);
			conn_close(c, WS_CLOSE_SERVICE_RESTART, "session "
			    "unavailable; retry");
		} else if (park != NULL)
			on_text(c, (const char *)park, len);
	} else {
		snprintf(sid, sizeof(sid), "%s", c->park_sid);
		if (err != NULL) {
			/* Routing answers it like a failed open. */
			c->wk->fail_sid = sid;
			c->wk->fail_err = err;
		}
		conn_route(c, park, len);
		c->wk->fail_sid = NULL;
		c->wk->fail_err = NULL;
	}
	free(park);
	/* Inside sess_load, the caller goes on with the connection. */
	if (c->parking)
		return;
	if (c->kind == CONN_WS && !c->closing && !c->parked)
		ws_input(c);
	conn_settle(c);
}

static void
on_text(struct conn *c, const char *text, size_t len)
{
	struct proto_in in;
	struct sess_result r;
	struct sess *s;
	const char *code, *err;
	char msg[256];
	uint64_t last = 0;
	char *j;
	cJSON *b;

	if (len == 4 && memcmp(text, "ping", 4) == 0)
		return;
	if (proto_parse(text, len, c->wk->conf->max_json_depth, &in, &code,
	    msg, sizeof(msg)) == -1) {
		send_error(c, code, msg, NULL);
		hold_end(c);
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
		    (c->ic.scope[0] && strcmp(c->ic.scope, in.session) != 0)) {
			send_error(c, "FORBIDDEN", "this token is scoped to "
			    "another session", in.id);
			proto_in_free(&in);
			return;
		}
		if (!c->parked && ((s = sess_find(c->wk, in.session)) == NULL ||
		    s->loading)) {
			/* Opened first (a shared store answers later); the
			 * message is handled again once it is. */
			conn_park(c, (const unsigned char *)text, len, 1);
			snprintf(c->park_sid, sizeof(c->park_sid), "%s",
			    in.session);
			c->parking = 1;
			sess_load(c->wk, in.session, 1, conn_loaded, c);
			c->parking = 0;
			proto_in_free(&in);
			return;
		}
		if ((s = sess_get(c->wk, in.session, 1, NULL, NULL,
		    &err)) == NULL) {
			send_error(c, err, "the session could not be opened",
			    in.id);
			proto_in_free(&in);
			return;
		}
		if (strcmp(in.type, "resume") == 0) {
			if (proto_u64(in.root, "lastSeq", 1, &last, msg,
			    sizeof(msg)) == -1) {
				send_error(c, "BAD_REQUEST", msg, in.id);
				proto_in_free(&in);
				return;
			}
			c->got_first = 1;
			stream_open(c, s, 1, last);
			proto_in_free(&in);
			return;
		}
		stream_open(c, s, 0, 0);
	}
	s = c->sess;
	if (s == NULL) {
		proto_in_free(&in);
		return;
	}
	if (strcmp(in.session, s->id) != 0) {
		send_error(c, "SESSION_MISMATCH", "this connection belongs to "
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
			send_error(c, "BAD_REQUEST", "resume must be the first "
			    "message on a connection", in.id);
			goto out;
		}
		if (proto_u64(in.root, "lastSeq", 1, &last, msg,
		    sizeof(msg)) == -1) {
			send_error(c, "BAD_REQUEST", msg, in.id);
			goto out;
		}
		/* Held, nothing was sent live yet: reposition.  Once events
		 * flowed, going back would send some twice. */
		if (!c->hold) {
			if (last + 1 < c->live_from)
				send_error(c, "BAD_REQUEST", "resume came after "
				    "live delivery began; reconnect with "
				    "?lastSeq=N, or send resume as the first "
				    "message at once", in.id);
			c->got_first = 1;
			goto out;
		}
		sess_detach(s, c);
		c->hold = 0;
		evtimer_del(c->tmo_ev);
		replay_begin(c);
		{
			uint64_t top = sess_last_seq(s), first;

			if (last > top && !s->follower)
				last = top;
			c->next_seq = last + 1;
			first = sess_first_seq(s);
			sess_attach(s, c);
			if (c->next_seq < first) {
				send_gap(c, first, last);
				c->next_seq = first;
			}
		}
		c->live = 0;
		c->got_first = 1;
		conn_pump(c);
		goto out;
	}
	c->got_first = 1;
	hold_end(c);
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
		send_error(c, "BAD_REQUEST", "the control channel takes pause, "
		    "resume_session (or resume) and terminate; chat on "
		    "/sessions/{id}/stream", in.id);
		goto out;
	}
	sess_input(s, c, (int)c->ic.role, &in, &r);
	if (!r.pending)
		conn_input_done(c, s, in.id, &r);
out:
	proto_in_free(&in);
}

static void
ws_input(struct conn *c)
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
				on_text(c, (const char *)m.data, m.len);
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
			http_error(c, c->hp.status, "BAD_REQUEST", c->hp.error);
			break;
		case HTTP_DONE:
			evbuffer_drain(in, used);
			conn_route(c, NULL, 0);
			break;
		}
		break;
	case CONN_WS:
		ws_input(c);
		break;
	case CONN_SSE:
		evbuffer_drain(in, evbuffer_get_length(in));
		break;
	}
	conn_settle(c);
}

void
conn_read_abort(struct conn *c)
{
	store_req_cancel(c->range);
	range_clear(c);
	if (c->page != NULL) {
		evbuffer_free(((struct page *)c->page)->out);
		free(c->page);
		c->page = NULL;
		http_error(c, 503, "OVERLOADED", "the session was let go "
		    "while its log was read; retry");
		conn_settle(c);
	} else
		conn_close(c, WS_CLOSE_SERVICE_RESTART, "session moved; "
		    "reconnect with your lastSeq");
}

/* After input was handled: frees, hands off or keeps the connection. */
static void
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
	if (!c->live)
		conn_pump(c);
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

	if (c->hold && !c->closing) {
		hold_end(c);
		return;
	}
	conn_free(c);
}

static void
conn_free(struct conn *c)
{
	struct wk *wk = c->wk;

	replay_end(c);
	if (c->kind != CONN_HTTP)
		log_rinfo(c->reqid, conn_sid(c), "%s closed: %s from %s, "
		    "%llu events in %.1f s%s", conn_transport(c), c->path,
		    c->ic.peer, (unsigned long long)c->sent,
		    (double)(util_mono_ms() - c->opened_ms) / 1000,
		    c->handing_off ? ", handed to the session's owner" : "");
	else if (c->status != 0) {
		/* One line per request, like an access log. */
		wk->metrics.connections_total[MT_HTTP]++;
		log_rinfo(c->reqid, conn_sid(c), "%s %s %d from %s",
		    c->method[0] ? c->method : "-", c->path[0] ? c->path : "-",
		    c->status, c->ic.peer);
	}
	if (c->sess != NULL)
		sess_detach(c->sess, c);
	if (c->parked)
		sess_load_cancel(wk, c);
	sess_conn_gone(wk, c);
	store_req_cancel(c->range);
	range_clear(c);
	if (c->page != NULL) {
		evbuffer_free(((struct page *)c->page)->out);
		free(c->page);
	}
	free(c->park);
	if (c->gathering)
		TAILQ_REMOVE(&wk->gather, c, gentry);
	if (c->read_waiting)
		TAILQ_REMOVE(&wk->read_wait, c, rwentry);
	if (c->pend != NULL)
		evbuffer_free(c->pend);
	TAILQ_REMOVE(&wk->conns, c, entry);
	wk->nconns--;
	if (c->hb_ev)
		event_free(c->hb_ev);
	event_free(c->tmo_ev);
	bufferevent_free(c->bev);
	http_parser_free(&c->hp);
	if (c->kind == CONN_WS)
		ws_parser_free(&c->wp);
	free(c->first);
	free(c);
	wk_maybe_exit(wk);
}

void
conn_drop(struct conn *c)
{
	conn_free(c);
}

/* --- routing of a complete request --- */

/* 1 with *out set, 0 when name is absent, -1 when it is not a number. */
static int
query_u64(const struct http_request *r, const char *name, uint64_t *out)
{
	char v[32], *end;
	int rc;

	if (r->query == NULL ||
	    (rc = http_query_param(r->query, name, v, sizeof(v))) == -1)
		return 0;
	if (rc != 0 || v[0] < '0' || v[0] > '9')
		return -1;
	errno = 0;
	*out = strtoull(v, &end, 10);
	return *end == '\0' && errno == 0 ? 1 : -1;
}

static void
sess_error(struct conn *c, const char *err, const char *sid)
{
	char msg[200];

	/* Not opened here: the supervisor need not route it here again. */
	if (sess_find(c->wk, sid) == NULL)
		wk_released(c->wk, sid);
	if (strcmp(err, "NOT_FOUND") == 0) {
		snprintf(msg, sizeof(msg), "no session '%s' (it never existed "
		    "or its retention period passed)", sid);
		http_error(c, 404, "NOT_FOUND", msg);
	} else if (strcmp(err, "OVERLOADED") == 0)
		http_error(c, 503, "OVERLOADED", "this worker holds its "
		    "maximum number of sessions; retry later");
	else
		http_error(c, 500, "INTERNAL", "the session could not be "
		    "opened; see the server log");
}

#define PAGE_BYTES	(4u * 1024 * 1024)	/* a page stops past this */

static int
page_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct conn *c = arg;
	struct page *p = c->page;

	if (p->n++ > 0)
		evbuffer_add(p->out, ",", 1);
	evbuffer_add(p->out, json, len);
	/* Large events make a short page; the client pages on with after. */
	return evbuffer_get_length(p->out) >= PAGE_BYTES;
}

static void
page_done(void *arg, ssize_t n)
{
	struct conn *c = arg;
	struct page *p = c->page;
	size_t len;
	char *body;

	range_clear(c);
	c->page = NULL;
	if (n < 0) {
		c->wk->metrics.store_errors++;
		http_error(c, 500, "INTERNAL", "the log could not be read");
	} else {
		evbuffer_add(p->out, "]", 1);
		len = evbuffer_get_length(p->out);
		body = (char *)evbuffer_pullup(p->out, -1);
		conn_respond(c, 200, body, len, NULL);
		c->closing = c->close_sent = 1;
	}
	evbuffer_free(p->out);
	free(p);
	if (c->ranging)
		c->ranging = 2;	/* answered inside the call */
	else
		conn_settle(c);
}

static void
get_log(struct conn *c, struct sess *s)
{
	const struct http_request *r = &c->hp.req;
	struct store_req *req;
	struct page *p;
	uint64_t after = 0, limit = 100;

	if (query_u64(r, "after", &after) == -1 ||
	    query_u64(r, "limit", &limit) == -1 || limit == 0 || limit > 1000) {
		http_error(c, 400, "BAD_REQUEST", "after must be a seq (a whole "
		    "number) and limit a whole number from 1 to 1000");
		return;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->out = evbuffer_new()) == NULL) {
		free(p);
		http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return;
	}
	evbuffer_add(p->out, "[", 1);
	c->page = p;
	/* page_done may answer inside the call: the caller settles. */
	c->ranging = 1;
	if (after >= sess_last_seq(s)) {
		/* Only what clients may see: durable events. */
		page_done(c, 0);
		req = NULL;
	} else {
		if (limit > sess_last_seq(s) - after)
			limit = sess_last_seq(s) - after;
		req = sess_range_async(s, after, (size_t)limit, page_cb,
		    page_done, c);
	}
	if (c->ranging == 1) {
		c->range = req;
		c->range_sess = s;
		s->nreaders++;
	}
	c->ranging = 0;
}

static void
post_message(struct conn *c, const char *sid)
{
	const struct http_request *r = &c->hp.req;
	const char *accept = http_header(r, "Accept"), *code, *err;
	struct sess_result res;
	struct proto_in in;
	struct sess *s;
	cJSON *o, *f;
	char msg[256], *txt;

	o = cJSON_ParseWithLength(r->body ? r->body : "", r->body_len);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		http_error(c, 400, "BAD_REQUEST", "body must be one JSON "
		    "client event, e.g. {\"v\":1,\"type\":\"chat\",\"message\":"
		    "\"hi\"}");
		return;
	}
	f = cJSON_GetObjectItemCaseSensitive(o, "sessionId");
	if (f == NULL)
		cJSON_AddStringToObject(o, "sessionId", sid);
	else if (!cJSON_IsString(f) || strcmp(f->valuestring, sid) != 0) {
		cJSON_Delete(o);
		http_error(c, 400, "SESSION_MISMATCH", "sessionId in the body "
		    "differs from the session in the path");
		return;
	}
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (proto_parse(txt, strlen(txt), c->wk->conf->max_json_depth, &in,
	    &code, msg, sizeof(msg)) == -1) {
		free(txt);
		http_error(c, 400, code, msg);
		return;
	}
	free(txt);
	if (strcmp(in.type, "resume") == 0 || strcmp(in.type, "ping") == 0) {
		proto_in_free(&in);
		http_error(c, 400, "BAD_REQUEST", "resume and ping belong on a "
		    "stream, not in POST /sessions/{id}/messages");
		return;
	}
	if ((s = sess_get(c->wk, sid, !acts_on_session(r->body, r->body_len),
	    NULL, NULL, &err)) == NULL) {
		proto_in_free(&in);
		sess_error(c, err, sid);
		return;
	}
	c->post_sse = accept != NULL && strstr(accept, "text/event-stream") &&
	    strcmp(in.type, "chat") == 0;
	sess_input(s, c, (int)c->ic.role, &in, &res);
	proto_in_free(&in);
	if (!res.pending)
		post_reply(c, s, &res);
}

/* The answer to POST .../messages: an error, 202/200, or the turn as SSE. */
static void
post_reply(struct conn *c, struct sess *s, const struct sess_result *res)
{
	cJSON *o;

	if (res->code != NULL) {
		http_error(c, res->http, res->code, res->msg);
		return;
	}
	if (c->deleting) {
		/* Through a follower the owner has it in its inbox, no more. */
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "sessionId", s->id);
		cJSON_AddStringToObject(o, "status", c->deleting == 2 ?
		    "terminating" : "completed");
		http_reply(c, c->deleting == 2 ? 202 : 200, o);
		return;
	}
	if (c->post_sse && res->seq > 0) {
		snprintf(c->turn_msgid, sizeof(c->turn_msgid), "m-%llu",
		    (unsigned long long)res->seq);
		sse_start(c);
		sess_attach(s, c);
		c->next_seq = res->seq;
		c->live = 0;
		conn_pump(c);
		return;
	}
	o = cJSON_CreateObject();
	if (res->seq)
		cJSON_AddNumberToObject(o, "seq", (double)res->seq);
	if (res->duplicate)
		cJSON_AddBoolToObject(o, "duplicate", 1);
	/* 200: nothing new was accepted (a repeat, or nothing to do). */
	http_reply(c, res->duplicate || (res->http == 200 && res->seq == 0) ?
	    200 : 202, o);
}

static void
create_session(struct conn *c)
{
	const struct http_request *r = &c->hp.req;
	const char *err, *sid = c->ic.session;
	struct sess *s;
	cJSON *body = NULL, *o;
	char ts[32];
	int created;

	if (r->body_len > 0) {
		body = cJSON_ParseWithLength(r->body, r->body_len);
		if (!cJSON_IsObject(body)) {
			cJSON_Delete(body);
			http_error(c, 400, "BAD_REQUEST", "body must be a JSON "
			    "object");
			return;
		}
	}
	s = sess_get(c->wk, sid, 1, &created, body, &err);
	cJSON_Delete(body);
	if (s == NULL) {
		sess_error(c, err, sid);
		return;
	}
	if (!created) {
		http_error(c, 409, "BAD_REQUEST", "a session with this "
		    "sessionId already exists");
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "sessionId", s->id);
	cJSON_AddStringToObject(o, "status", "created");
	util_iso8601(ts, cJSON_IsNumber(cJSON_GetObjectItem(s->meta,
	    "createdAt")) ? (uint64_t)cJSON_GetObjectItem(s->meta,
	    "createdAt")->valuedouble : util_now_ms());
	cJSON_AddStringToObject(o, "createdAt", ts);
	http_reply(c, 201, o);
}

static void	route_request(struct conn *, const unsigned char *, size_t);
/*
 * Whether a POSTed message only acts on a session that must exist (pause,
 * resume_session, terminate, cancel): such a message for a session that
 * never existed is a mistake (404), and creates nothing.
 */
static int
acts_on_session(const char *body, size_t len)
{
	static const char *types[] = { "pause", "resume_session",
	    "terminate", "cancel" };
	cJSON *o = cJSON_ParseWithLength(body ? body : "", len);
	const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o,
	    "type"));
	size_t i;
	int yes = 0;

	for (i = 0; t != NULL && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(t, types[i]) == 0)
			yes = 1;
	cJSON_Delete(o);
	return yes;
}

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
	if (strcmp(path, "/sessions") == 0 && strcmp(r->method, "POST") == 0) {
		if (c->ic.role == IPC_ROLE_OBSERVER || !c->ic.session[0])
			return 0;
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
	if (strcmp(sub, "stream") == 0)
		*create = 1;
	else if (strcmp(sub, "messages") == 0)
		*create = !acts_on_session(r->body, r->body_len);
	else if (*sub != '\0' && strcmp(sub, "events") != 0 &&
	    strcmp(sub, "log") != 0 && strcmp(sub, "control") != 0)
		return 0;
	return store_valid_id(sid);
}

/*
 * Routes a complete request; the parsed request is not needed after.
 * A request about a session not in memory waits for it to load.
 */
static void
conn_route(struct conn *c, const unsigned char *raw, size_t rawlen)
{
	struct wk *wk = c->wk;
	struct sess *s;
	int create;

	if (c->method[0] == '\0') {
		/* The query stays out of logs: it may hold a token. */
		snprintf(c->method, sizeof(c->method), "%s", c->hp.req.method);
		snprintf(c->path, sizeof(c->path), "%s", c->hp.req.path);
	}
	if (!c->parked && !wk->draining && !wk->terminating &&
	    wk->fail_sid == NULL && route_session(c, c->park_sid,
	    sizeof(c->park_sid), &create) &&
	    ((s = sess_find(wk, c->park_sid)) == NULL || s->loading)) {
		conn_park(c, raw, rawlen, 0);
		c->parking = 1;
		sess_load(wk, c->park_sid, create, conn_loaded, c);
		c->parking = 0;
		return;
	}
	c->routed = 1;
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
		http_error(c, 500, "INTERNAL", "out of memory");
		return;
	}
	free(txt);
	/* As it is now: it may be promoted before the owner answers. */
	c->deleting = s->follower ? 2 : 1;
	sess_input(s, c, IPC_ROLE_ADMIN, &in, &res);
	proto_in_free(&in);
	if (!res.pending)
		post_reply(c, s, &res);
}

static void
route_request(struct conn *c, const unsigned char *raw, size_t rawlen)
{
	const struct http_request *r = &c->hp.req;
	const char *path = r->path, *sub = NULL, *err;
	char sid[IPC_SID_MAX + 1], lastbuf[32];
	struct sess *s;
	uint64_t last = 0;
	int have_last, role = (int)c->ic.role;
	size_t n;

	if (strcmp(path, "/chat") == 0) {
		if (ws_upgrade(c) == 0) {
			c->chat = 1;
			c->ic.session[0] = '\0';	/* bound by its first message */
		}
		return;
	}
	if (strcmp(path, "/sessions") == 0 && strcmp(r->method, "POST") == 0) {
		if (role == IPC_ROLE_OBSERVER)
			http_error(c, 403, "FORBIDDEN", "observers cannot "
			    "create sessions");
		else
			create_session(c);
		return;
	}
	if (strncmp(path, "/sessions/", 10) != 0) {
		http_error(c, 404, "NOT_FOUND", "no such endpoint");
		return;
	}
	n = strcspn(path + 10, "/");
	if (n == 0 || n > IPC_SID_MAX) {
		http_error(c, 404, "NOT_FOUND", "no such endpoint");
		return;
	}
	memcpy(sid, path + 10, n);
	sid[n] = '\0';
	if (path[10 + n] == '/')
		sub = path + 10 + n + 1;
	if ((c->wk->draining || c->wk->terminating) &&
	    sess_find(c->wk, sid) == NULL) {
		/* This worker is leaving: the supervisor finds the new owner. */
		if (raw != NULL && c->wk->draining) {
			int fd = dup(bufferevent_getfd(c->bev));
			struct ipc_conn ic = c->ic;

			snprintf(ic.session, sizeof(ic.session), "%s", sid);
			ic.flags = IPC_CONN_F_NOT_HELD;
			if (fd != -1)
				wk_reroute(c->wk, fd, &ic, raw, rawlen);
			c->closing = c->close_sent = c->freeing = 1;
			return;
		}
		http_error(c, 503, "OVERLOADED", "worker restarting; retry");
		return;
	}
	if (sub == NULL) {
		if (strcmp(r->method, "GET") == 0) {
			if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)))
				http_reply(c, 200, sess_info(s));
			else
				sess_error(c, err, sid);
		} else if (strcmp(r->method, "DELETE") == 0) {
			if (role == IPC_ROLE_OBSERVER) {
				http_error(c, 403, "FORBIDDEN", "observers "
				    "cannot terminate sessions");
			} else if ((s = sess_get(c->wk, sid, 0, NULL, NULL,
			    &err)) == NULL)
				sess_error(c, err, sid);
			else
				delete_session(c, s);
		} else
			http_error(c, 405, "BAD_REQUEST", "use GET or DELETE");
		return;
	}
	if (query_u64(r, "lastSeq", &last) == -1) {
		http_error(c, 400, "BAD_REQUEST", "lastSeq must be a whole "
		    "number: the highest seq the client has seen");
		return;
	}
	if (strcmp(sub, "stream") == 0) {
		if (ws_upgrade(c) == -1)
			return;
		if ((s = sess_get(c->wk, sid, 1, NULL, NULL, &err)) == NULL) {
			conn_close(c, WS_CLOSE_INTERNAL, err);
			return;
		}
		have_last = query_u64(r, "lastSeq", &last) == 1;
		stream_open(c, s, have_last, last);
		if (!have_last) {
			struct timeval tv;

			/* A resume as first message must not find events
			 * already sent live; hold them briefly. */
			c->hold = 1;
			c->live = 0;
			util_tv(&tv, HOLD_MS);
			evtimer_add(c->tmo_ev, &tv);
		}
		return;
	}
	if (strcmp(sub, "events") == 0) {
		if (strcmp(r->method, "GET") != 0) {
			http_error(c, 405, "BAD_REQUEST", "use GET");
			return;
		}
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL) {
			sess_error(c, err, sid);
			return;
		}
		have_last = query_u64(r, "lastSeq", &last) == 1;
		if (http_header(r, "Last-Event-ID") != NULL) {
			char *end;

			snprintf(lastbuf, sizeof(lastbuf), "%s",
			    http_header(r, "Last-Event-ID"));
			last = strtoull(lastbuf, &end, 10);
			have_last = *end == '\0' && lastbuf[0] >= '0' &&
			    lastbuf[0] <= '9';
		}
		sse_start(c);
		stream_open(c, s, have_last, last);
		return;
	}
	if (strcmp(sub, "messages") == 0) {
		if (strcmp(r->method, "POST") != 0)
			http_error(c, 405, "BAD_REQUEST", "use POST");
		else
			post_message(c, sid);
		return;
	}
	if (strcmp(sub, "log") == 0) {
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL)
			sess_error(c, err, sid);
		else
			get_log(c, s);
		return;
	}
	if (strcmp(sub, "control") == 0) {
		/* The operator's channel: a stream of the session (it must
		 * exist) that takes pause, resume_session and terminate. */
		if (role != IPC_ROLE_ADMIN) {
			http_error(c, 403, "FORBIDDEN", "the control channel "
			    "needs the admin role");
			return;
		}
		if ((s = sess_get(c->wk, sid, 0, NULL, NULL, &err)) == NULL) {
			sess_error(c, err, sid);
			return;
		}
		if (ws_upgrade(c) == -1)
			return;
		c->control = 1;
		have_last = query_u64(r, "lastSeq", &last) == 1;
		stream_open(c, s, have_last, last);
		return;
	}
	if (strcmp(sub, "dashboard") == 0) {
		http_error(c, 501, "BAD_REQUEST", "this endpoint is part of "
		    "protocol v1 but not available in this build");
		return;
	}
	http_error(c, 404, "NOT_FOUND", "no such endpoint");
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
    const unsigned char *bytes)
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
	evutil_make_socket_nonblocking(fd);
	c->wk = wk;
	c->ic = *ic;
	log_reqid(c->reqid, ic->conn_id);
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
		on_text(c, (const char *)bytes, ic->first_len);
		ws_input(c);
	} else {
		hr = http_parse(&c->hp, (const char *)bytes, ic->bytes_len,
		    &used);
		if (hr == HTTP_DONE) {
			/* Bytes a client sent after the request are frames. */
			input_inject(c, bytes + used, ic->bytes_len - used);
			conn_route(c, bytes, ic->bytes_len);
			if (c->kind == CONN_WS && !c->closing)
				ws_input(c);
		} else if (hr == HTTP_ERROR)
			http_error(c, c->hp.status, "BAD_REQUEST", c->hp.error);
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
