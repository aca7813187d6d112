/*
 * parley-load: a load generator for parleyd and the peers it is compared
 * with (a Node `ws` server and Socket.IO 4), see issue 6 and bench/run.
 *
 * One libevent loop per process drives many client connections; --procs
 * forks several such processes (a process may be capped near 20,000
 * files) and the parent merges their reports.  Every client checks that
 * the logged events it sees have contiguous seq numbers, across the
 * reconnects it makes, and token events whose content starts with a
 * stamp (the provider's CLOCK_REALTIME in microseconds, then a space)
 * give latency samples.
 *
 * Modes (clients are spread over --sessions round-robin; client i < S
 * is its session's sender).  In every mode the parent prints "HOLDING n"
 * on stderr once all processes are ready (n clients connected).
 *	idle	connect everyone, hold --duration.
 *	stream	each sender starts a turn; all read to its done; latency
 *		from stamped tokens received live, events/s first to last.
 *	fanout	stream with one session and observers.
 *	--observe (stream, fanout) no client is a sender: every one is an
 *		observer of sessions another process drives (bench/run's
 *		multihost scenario follows a session from a host that does
 *		not own it); each reads to the turn's done.
 *	replay	connect with lastSeq --from and read --expect events;
 *		events/s from the first connect to the last event.
 *	storm	connect with lastSeq 0, start a turn, drop every connection
 *		with RST 100ms later, resume all with lastSeq; time from the
 *		drop until every client has caught up, then read to done.
 *	thoughts (parley only) each sender is an external agent
 *		(?role=agent&agentId=bench-agent) that sends --thoughts
 *		thought_share at once; the others are observers, each done
 *		once it has --thoughts "thought" or "filtered" events;
 *		events/s counts the observers' ones, first to last.  The
 *		sessions must exist (POST /sessions with the
 *		config.thoughtVisibility to measure: bench/run does it).
 *
 * Processes agree on phases over pipes: each child writes "READY" once
 * its clients are connected (in replay mode: have their events), the
 * parent answers "G" when all are ready, and each child then runs the
 * mode's second half and writes its report as one JSON line.
 */
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "parley/sse.h"
#include "parley/ws.h"
#include "parley-load.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT	24
#endif

#define MAX_HTTP_HEAD	16384
#define MAX_FRAME	(4 * 1024 * 1024)
#define RETRY_MS	200		/* wait before reconnecting after a failure */
#define SETTLE_MS	300		/* parleyd holds a stream without lastSeq 250ms */
#define STORM_DROP_MS	100		/* from the storm's chat to the drop */
#define TICK_MS		10
#define SID_MARK	"@@session@@"

/* The RFC 6455 sample nonce: clients need not be unpredictable here. */
#define WS_KEY		"dGhlIHNhbXBsZSBub25jZQ=="

const char *const proto_names[] = { "parley", "ws", "socketio" };
const char *const mode_names[] = {
	"idle", "stream", "fanout", "replay", "storm", "thoughts"
};





/* Connection states. */
enum { C_IDLE, C_CONNECTING, C_HTTP, C_OPEN, C_UP };

/*
 * One client.  Kept small: a bench process holds 20,000 of them.  The
 * Socket.IO recovery strings and the SSE parser exist only for those
 * transports.
 */
struct client {
	struct bufferevent	*bev;
	struct sse_parser	*sse;
	char			*sio_pid;
	char			*sio_off;
	uint64_t		 last;		/* highest seq seen */
	uint64_t		 end;		/* last when it was done */
	uint64_t		 top;		/* server's lastSeq at connect */
	uint64_t		 t_conn;	/* us, first connect */
	uint64_t		 due;		/* us, queued: not before */
	uint32_t		 id;		/* global index */
	uint32_t		 sess;		/* session index */
	uint32_t		 events;
	uint32_t		 gaps;		/* seqs skipped, not yet seen */
	uint32_t		 thoughts;	/* thought/filtered events seen */
	uint32_t		 qnext;		/* queue link, UINT32_MAX = end */
	uint8_t			 st;
	uint8_t			 has_last;	/* resume after last */
	uint8_t			 has_base;	/* last is meaningful */
	uint8_t			 live;		/* caught up since this connect */
	uint8_t			 once;		/* was up at least once */
	uint8_t			 done;		/* saw done after GO */
	uint8_t			 reached;	/* replay: got --expect events */
	uint8_t			 queued;
	uint8_t			 inflight;
	uint8_t			 sender;
	uint8_t			 nolast;	/* this connect named no lastSeq */
};



/* The process's state (parley-load.h). */
struct load g;

static void	client_connect(struct client *);
static void	client_lost(struct client *, const char *);
static void	check_phase(void);

uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "parley-load: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void __attribute__((format(printf, 1, 2)))
error_add(const char *fmt, ...)
{
	va_list ap;
	char buf[256];

	g.nerrors_total++;
	if (g.nerrors == MAX_ERRORS)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	g.errors[g.nerrors++] = strdup(buf);
}

static unsigned
h_index(uint64_t v)
{
	unsigned msb;

	if (v < 2 * H_SUB)
		return (unsigned)v;
	msb = 63 - (unsigned)__builtin_clzll(v);
	if (msb > 63 - 1)
		msb = 62;
	/* v >> (msb - 5) is in [32, 63] */
	return 2 * H_SUB + (msb - 6) * H_SUB +
	    (unsigned)((v >> (msb - 5)) - H_SUB);
}

/* The middle of a bucket, as the value reported for it. */
uint64_t
h_value(unsigned i)
{
	unsigned msb, sub;
	uint64_t lo;

	if (i < 2 * H_SUB)
		return i;
	msb = (i - 2 * H_SUB) / H_SUB + 6;
	sub = (i - 2 * H_SUB) % H_SUB + H_SUB;
	lo = (uint64_t)sub << (msb - 5);
	return lo + ((uint64_t)1 << (msb - 5)) / 2;
}

static void
lat_add(uint64_t us)
{
	unsigned i = h_index(us);

	if (i >= H_BUCKETS)
		i = H_BUCKETS - 1;
	g.hist[i]++;
	g.lat_n++;
	if (us > g.lat_max)
		g.lat_max = us;
}

static const char *
memfind(const char *h, size_t hlen, const char *n)
{
	size_t nlen = strlen(n);

	return memmem(h, hlen, n, nlen);
}

/* The unsigned number after key in buf; -1 when absent. */
static int
scan_u64(const char *buf, size_t len, const char *key, uint64_t *v)
{
	const char *p = memfind(buf, len, key), *e = buf + len;
	uint64_t x = 0;

	if (p == NULL)
		return -1;
	p += strlen(key);
	if (p == e || *p < '0' || *p > '9')
		return -1;
	while (p < e && *p >= '0' && *p <= '9')
		x = x * 10 + (uint64_t)(*p++ - '0');
	*v = x;
	return 0;
}

/* A stamp ("<digits> ") at the start of a JSON string value for key. */
static int
scan_stamp(const char *buf, size_t len, const char *key, uint64_t *v)
{
	const char *p = memfind(buf, len, key), *e = buf + len;
	uint64_t x = 0;
	int nd = 0;

	if (p == NULL)
		return -1;
	p += strlen(key);
	while (p < e && *p >= '0' && *p <= '9' && nd < 20) {
		x = x * 10 + (uint64_t)(*p++ - '0');
		nd++;
	}
	if (nd < 10 || p == e || *p != ' ')
		return -1;
	*v = x;
	return 0;
}

static void
session_id(char *out, size_t len, uint32_t sess)
{
	snprintf(out, len, "%s-%u", g.o.prefix, sess);
}

/* --- sending --- */

/* A masked client frame (RFC 6455 5.3); the server's header is ours too. */
static void
ws_send(struct client *c, int op, const void *data, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	unsigned char hdr[14], *p, mask[4];
	const unsigned char *d = data;
	size_t hl, i;
	uint32_t m;

	hl = ws_frame_header(hdr, op, len);
	hdr[1] |= 0x80;
	/* Masking defends proxies against crafted payloads; any key will do
	 * between a bench client and its server. */
	m = (g.nonce = g.nonce * 1103515245 + 12345);
	memcpy(mask, &m, 4);
	memcpy(hdr + hl, mask, 4);
	evbuffer_add(out, hdr, hl + 4);
	if (len == 0)
		return;
	if ((p = malloc(len)) == NULL)
		return;
	for (i = 0; i < len; i++)
		p[i] = d[i] ^ mask[i & 3];
	evbuffer_add(out, p, len);
	free(p);
}

static void
ws_send_text(struct client *c, const char *s, size_t len)
{
	if (g.trace)
		fprintf(stderr, "%u> %.*s\n", c->id, (int)len, s);
	ws_send(c, WS_OP_TEXT, s, len);
}

/* The chat that starts a turn, in the peer's own words. */
static void
build_chat(void)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char *j;

	switch (g.o.proto) {
	case P_PARLEY:
		/* sessionId is filled in per client; see send_chat. */
		cJSON_AddNumberToObject(o, "v", 1);
		if (g.o.mode == M_THOUGHTS) {
			cJSON *t, *r;

			cJSON_AddStringToObject(o, "type", "thought_share");
			cJSON_AddStringToObject(o, "sessionId", SID_MARK);
			t = cJSON_AddObjectToObject(o, "thought");
			/* About the size of a reasoning step (~200 bytes). */
			cJSON_AddStringToObject(t, "content", "The retry loop "
			    "backs off exponentially but never resets its "
			    "delay after a success, so a single transient "
			    "failure slows every later request; resetting "
			    "it in on_success would fix the tail latency.");
			cJSON_AddStringToObject(t, "category", g.o.category);
			cJSON_AddNumberToObject(t, "confidence", 0.7);
			r = cJSON_AddArrayToObject(t, "references");
			cJSON_AddItemToArray(r, cJSON_CreateString(
			    "src/retry.c"));
			cJSON_AddItemToArray(r, cJSON_CreateString(
			    "src/client.c"));
			if (g.o.private)
				cJSON_AddBoolToObject(t, "shared", 0);
			break;
		}
		cJSON_AddStringToObject(o, "type", "chat");
		cJSON_AddStringToObject(o, "sessionId", SID_MARK);
		cJSON_AddStringToObject(o, "message", g.o.chat);
		break;
	case P_WS:
		cJSON_AddStringToObject(o, "type", "chat");
		cJSON_AddStringToObject(o, "message", g.o.chat);
		cJSON_AddNumberToObject(o, "tokens", g.o.tokens);
		cJSON_AddNumberToObject(o, "interval", g.o.interval);
		break;
	case P_SIO:
		cJSON_AddStringToObject(o, "message", g.o.chat);
		cJSON_AddNumberToObject(o, "tokens", g.o.tokens);
		cJSON_AddNumberToObject(o, "interval", g.o.interval);
		a = cJSON_CreateArray();
		cJSON_AddItemToArray(a, cJSON_CreateString("chat"));
		cJSON_AddItemToArray(a, o);
		o = a;
		break;
	}
	if ((j = cJSON_PrintUnformatted(o)) == NULL)
		die("out of memory");
	cJSON_Delete(o);
	if (g.o.proto == P_SIO) {
		if (asprintf(&g.chat_frame, "42%s", j) == -1)
			die("out of memory");
		free(j);
	} else
		g.chat_frame = j;
	g.chat_len = strlen(g.chat_frame);
}

/* A one-shot HTTP request (SSE transport: create a session, post a chat). */
struct oneshot {
	struct bufferevent	*bev;
	char			 what[32];
};

static void
oneshot_read(struct bufferevent *bev, void *arg)
{
	struct oneshot *os = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char line[64];
	size_t n;

	if (evbuffer_search(in, "\r\n", 2, NULL).pos == -1)
		return;
	n = evbuffer_copyout(in, line, sizeof(line) - 1);
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (strncmp(line, "HTTP/1.1 2", 10) != 0 &&
	    !(strcmp(os->what, "create") == 0 &&
	    strncmp(line, "HTTP/1.1 409", 12) == 0))
		error_add("%s: %s", os->what, line);
	bufferevent_free(bev);
	free(os);
}

static void
oneshot_event(struct bufferevent *bev, short what, void *arg)
{
	struct oneshot *os = arg;

	if (what & BEV_EVENT_CONNECTED)
		return;
	error_add("%s: connection failed", os->what);
	bufferevent_free(bev);
	free(os);
}

static void
oneshot(const char *what, const char *path, const char *body)
{
	struct oneshot *os;
	struct evbuffer *out;

	if ((os = calloc(1, sizeof(*os))) == NULL)
		return;
	snprintf(os->what, sizeof(os->what), "%s", what);
	os->bev = bufferevent_socket_new(g.base, -1, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(os->bev, oneshot_read, NULL, oneshot_event, os);
	bufferevent_enable(os->bev, EV_READ);
	out = bufferevent_get_output(os->bev);
	evbuffer_add_printf(out, "POST %s HTTP/1.1\r\nHost: %s:%d\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n", path, g.o.host, g.o.port, strlen(body));
	if (g.o.token != NULL)
		evbuffer_add_printf(out, "Authorization: Bearer %s\r\n",
		    g.o.token);
	evbuffer_add_printf(out, "\r\n%s", body);
	if (bufferevent_socket_connect(os->bev, (struct sockaddr *)&g.sa,
	    sizeof(g.sa)) == -1) {
		error_add("%s: connect failed", what);
		bufferevent_free(os->bev);
		free(os);
	}
}

static void
send_chat(struct client *c)
{
	char sid[96], path[160], *j, *p;

	if (g.o.proto != P_PARLEY) {
		if (c->st == C_UP)
			ws_send_text(c, g.chat_frame, g.chat_len);
		return;
	}
	session_id(sid, sizeof(sid), c->sess);
	/* The placeholder becomes the session id. */
	if ((p = strstr(g.chat_frame, SID_MARK)) == NULL ||
	    asprintf(&j, "%.*s%s%s", (int)(p - g.chat_frame), g.chat_frame,
	    sid, p + strlen(SID_MARK)) == -1)
		return;
	if (g.o.mode == M_THOUGHTS) {
		unsigned k;

		/* All at once: the daemon paces them, not the client. */
		for (k = 0; k < g.o.thoughts && c->st == C_UP; k++)
			ws_send_text(c, j, strlen(j));
	} else if (g.o.transport == T_SSE) {
		snprintf(path, sizeof(path), "/sessions/%s/messages", sid);
		oneshot("chat", path, j);
	} else if (c->st == C_UP)
		ws_send_text(c, j, strlen(j));
	free(j);
}

/* --- receiving --- */

static void
on_replay_reached(struct client *c, uint64_t now)
{
	double dt = (double)(now - c->t_conn) / 1e6;

	c->reached = 1;
	g.nreached++;
	if (g.rates != NULL)
		g.rates[c - g.cl] = dt > 0 ? c->events / dt : 0;
}

static void
on_live(struct client *c)
{
	if (c->live)
		return;
	c->live = 1;
	g.nlive++;
	if (g.dropped && g.ttl == 0 && g.nlive == g.n)
		g.ttl = now_us() - g.t_drop;
}

/* A logged event with sequence number seq; 0 when it carries none. */
static void
on_event(struct client *c, const char *type, size_t tlen, uint64_t seq,
    const char *buf, size_t len)
{
	uint64_t now = now_us(), stamp;
	int was_live = c->live;

	/*
	 * The ws peer replays its whole log to a client that names no
	 * lastSeq; a client that did not ask for those has not missed them.
	 */
	if (seq > 0 && c->nolast && seq <= c->top)
		return;
	if (seq > 0) {
		if (!c->has_base) {
			/* Socket.IO says nothing before its first event. */
			c->last = seq - 1;
			c->has_base = 1;
		}
		if (seq == c->last + 1)
			c->last = seq;
		else if (seq > c->last + 1) {
			g.lost += seq - c->last - 1;
			c->gaps += (uint32_t)(seq - c->last - 1);
			error_add("client %u: seq %" PRIu64 " after %" PRIu64,
			    c->id, seq, c->last);
			c->last = seq;
		} else if (c->gaps > 0) {
			/* One of the missing ones, late. */
			c->gaps--;
			g.lost--;
			g.reorder++;
		} else {
			g.dup++;
			if (g.dup == 1)
				error_add("client %u: seq %" PRIu64 " again "
				    "(at %" PRIu64 ")", c->id, seq, c->last);
		}
		c->events++;
		if (g.o.mode != M_THOUGHTS) {
			g.events++;
			if (g.t_first == 0 || now < g.t_first)
				g.t_first = now;
			g.t_last = now;
		} else if ((tlen == 7 && memcmp(type, "thought", 7) == 0) ||
		    (tlen == 8 && memcmp(type, "filtered", 8) == 0)) {
			/* Only the observers' thoughts, in any form. */
			c->thoughts++;
			if (!c->sender) {
				g.events++;
				if (g.t_first == 0 || now < g.t_first)
					g.t_first = now;
				g.t_last = now;
			}
			if (g.phase == 1 && !c->done &&
			    c->thoughts >= g.o.thoughts) {
				c->done = 1;
				c->end = c->last;
				g.ndone++;
			}
		}
		if (!c->live && c->st == C_UP && c->last >= c->top)
			on_live(c);
	}
	if (tlen == 5 && memcmp(type, "token", 5) == 0) {
		/* Replayed tokens are old by design: only live ones count. */
		if (was_live && g.o.mode != M_REPLAY &&
		    scan_stamp(buf, len, "\"content\":\"", &stamp) == 0)
			lat_add(now > stamp ? now - stamp : 0);
	} else if (tlen == 4 && memcmp(type, "done", 4) == 0) {
		if (g.phase == 1 && !c->done) {
			c->done = 1;
			c->end = c->last;
			g.ndone++;
		}
	} else if (tlen == 5 && memcmp(type, "error", 5) == 0)
		error_add("client %u: %.*s", c->id, (int)(len > 200 ? 200 :
		    len), buf);
	if (g.o.mode == M_REPLAY && !c->reached && c->events >= g.o.expect)
		on_replay_reached(c, now);
}

/* The handshake is over: the client is up (maybe still replaying). */
static void
on_up(struct client *c, uint64_t top, int have_top)
{
	c->st = C_UP;
	if (c->inflight) {
		c->inflight = 0;
		g.inflight--;
	}
	if (!c->once) {
		c->once = 1;
		g.nup++;
	}
	if (have_top) {
		c->top = top;
		if (!c->has_base) {
			c->last = top;
			c->has_base = 1;
		}
	}
	c->has_last = c->has_base;
	if (!have_top || c->last >= c->top)
		on_live(c);
}

/* A parley or ws-peer JSON event. */
static void
on_json(struct client *c, const char *buf, size_t len)
{
	const char *t, *te;
	uint64_t seq = 0, top = 0;

	if ((t = memfind(buf, len, "\"type\":\"")) == NULL)
		return;
	t += 8;
	if ((te = memchr(t, '"', (size_t)(buf + len - t))) == NULL)
		return;
	if (c->st == C_OPEN) {
		size_t tl = (size_t)(te - t);
		int have = scan_u64(buf, len, "\"lastSeq\":", &top) == 0;

		/* parleyd's session_state, or the ws peer's hello. */
		if ((tl == 13 && memcmp(t, "session_state", 13) == 0) ||
		    (tl == 5 && memcmp(t, "hello", 5) == 0))
			on_up(c, top, have);
		else if (tl == 5 && memcmp(t, "error", 5) == 0)
			error_add("client %u: %.*s", c->id, (int)(len > 200 ?
			    200 : len), buf);
		return;
	}
	(void)scan_u64(buf, len, "\"seq\":", &seq);
	on_event(c, t, (size_t)(te - t), seq, buf, len);
}

/* An Engine.IO packet over WebSocket. */
static void
on_eio(struct client *c, const char *buf, size_t len)
{
	char sid[96], *j = NULL, *p;
	const char *t, *te, *e = buf + len;
	uint64_t seq = 0, top = 0;
	int n;

	if (len == 0)
		return;
	switch (buf[0]) {
	case '0':	/* open: connect to the default namespace */
		session_id(sid, sizeof(sid), c->sess);
		if (c->sio_pid != NULL && c->sio_off != NULL)
			n = asprintf(&j, "40{\"session\":\"%s\",\"role\":\"%s\","
			    "\"pid\":\"%s\",\"offset\":\"%s\"}", sid,
			    c->sender ? "user" : "observer", c->sio_pid,
			    c->sio_off);
		else if (g.o.have_from)
			n = asprintf(&j, "40{\"session\":\"%s\",\"role\":\"%s\","
			    "\"lastSeq\":%" PRIu64 "}", sid,
			    c->sender ? "user" : "observer", g.o.from);
		else
			n = asprintf(&j, "40{\"session\":\"%s\",\"role\":\"%s\"}",
			    sid, c->sender ? "user" : "observer");
		if (n != -1) {
			ws_send_text(c, j, (size_t)n);
			free(j);
		}
		return;
	case '2':	/* ping */
		ws_send_text(c, "3", 1);
		return;
	case '1':	/* close */
		client_lost(c, "engine.io close");
		return;
	case '4':
		break;
	default:
		return;
	}
	if (len < 2)
		return;
	if (buf[1] == '0') {		/* CONNECT ack */
		const char *q;

		if ((q = memfind(buf, len, "\"pid\":\"")) != NULL) {
			q += 7;
			if ((te = memchr(q, '"', (size_t)(e - q))) != NULL) {
				free(c->sio_pid);
				c->sio_pid = strndup(q, (size_t)(te - q));
			}
		}
		on_up(c, 0, 0);
		return;
	}
	if (buf[1] == '4') {
		error_add("client %u: connect error %.*s", c->id,
		    (int)(len > 200 ? 200 : len), buf);
		client_lost(c, NULL);
		return;
	}
	if (buf[1] != '2' || len < 5 || buf[2] != '[' || buf[3] != '"')
		return;
	t = buf + 4;
	if ((te = memchr(t, '"', (size_t)(e - t))) == NULL)
		return;
	/* With recovery the last argument is the packet's offset. */
	if (e[-1] == ']' && e - buf > 3 && e[-2] == '"') {
		const char *q = e - 3;

		while (q > te && *q != '"')
			q--;
		if (q > te && q[-1] == ',') {
			free(c->sio_off);
			if ((p = strndup(q + 1, (size_t)(e - 2 - (q + 1)))) !=
			    NULL)
				c->sio_off = p;
			else
				c->sio_off = NULL;
		}
	}
	if ((size_t)(te - t) == 5 && memcmp(t, "hello", 5) == 0) {
		if (scan_u64(buf, len, "\"lastSeq\":", &top) == 0 &&
		    !c->has_base) {
			c->last = top;
			c->has_base = 1;
		}
		return;
	}
	(void)scan_u64(buf, len, "\"seq\":", &seq);
	on_event(c, t, (size_t)(te - t), seq, buf, len);
}

static void
on_text(struct client *c, const char *buf, size_t len)
{
	if (g.trace)
		fprintf(stderr, "%u< %.*s\n", c->id, (int)(len > 300 ? 300 :
		    len), buf);
	if (g.o.proto == P_SIO)
		on_eio(c, buf, len);
	else
		on_json(c, buf, len);
}

static int
sse_cb(void *arg, const char *type, const char *data, size_t len)
{
	struct client *c = arg;

	(void)type;
	on_json(c, data, len);
	return 0;
}

/* Server frames are unmasked and, from these servers, not fragmented. */
static void
read_frames(struct client *c)
{
	struct bufferevent *bev = c->bev;
	struct evbuffer *in = bufferevent_get_input(bev);
	unsigned char h[10], *p;
	size_t avail, hl, n;
	uint64_t len;
	int op;

	while (c->bev == bev && (avail = evbuffer_get_length(in)) >= 2) {
		n = evbuffer_copyout(in, h, avail < 10 ? avail : 10);
		op = h[0] & 0x0f;
		len = h[1] & 0x7f;
		hl = 2;
		if (len == 126)
			hl = 4;
		else if (len == 127)
			hl = 10;
		if (n < hl)
			return;
		if (hl == 4)
			len = (uint64_t)h[2] << 8 | h[3];
		else if (hl == 10) {
			size_t i;

			for (len = 0, i = 2; i < 10; i++)
				len = len << 8 | h[i];
		}
		if ((h[1] & 0x80) || !(h[0] & 0x80) || len > MAX_FRAME) {
			error_add("client %u: unexpected frame (%s)", c->id,
			    (h[1] & 0x80) ? "masked" : !(h[0] & 0x80) ?
			    "fragmented" : "too big");
			client_lost(c, NULL);
			return;
		}
		if (avail < hl + len)
			return;
		evbuffer_drain(in, hl);
		p = len > 0 ? evbuffer_pullup(in, (ev_ssize_t)len) :
		    (unsigned char *)"";
		switch (op) {
		case WS_OP_TEXT:
		case WS_OP_BINARY:
			on_text(c, (const char *)p, (size_t)len);
			break;
		case WS_OP_PING:
			ws_send(c, WS_OP_PONG, p, (size_t)len);
			break;
		case WS_OP_CLOSE:
			evbuffer_drain(in, (size_t)len);
			client_lost(c, "server closed");
			return;
		default:
			break;
		}
		if (c->bev == bev)
			evbuffer_drain(in, (size_t)len);
	}
}

static void
read_http(struct client *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer_ptr ep;
	char line[128];
	size_t n;
	int ok;

	ep = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (ep.pos == -1) {
		if (evbuffer_get_length(in) > MAX_HTTP_HEAD)
			client_lost(c, "response head too long");
		return;
	}
	n = evbuffer_copyout(in, line, sizeof(line) - 1);
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	evbuffer_drain(in, (size_t)ep.pos + 4);
	ok = g.o.transport == T_SSE ? strncmp(line, "HTTP/1.1 200", 12) == 0 :
	    strncmp(line, "HTTP/1.1 101", 12) == 0;
	if (!ok) {
		/*
		 * An SSE client, or an observer, may come before its
		 * session is created (by the sender, maybe through the
		 * other worker): it tries again after RETRY_MS.
		 */
		if (!((g.o.transport == T_SSE || !c->sender) &&
		    strncmp(line, "HTTP/1.1 404", 12) == 0))
			error_add("client %u: %s", c->id, line);
		client_lost(c, NULL);
		return;
	}
	c->st = C_OPEN;
	if (g.o.transport == T_SSE) {
		if (c->sse == NULL &&
		    (c->sse = sse_parser_new(MAX_FRAME, sse_cb, c)) == NULL)
			die("out of memory");
	}
}

static void
client_read(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;
	struct evbuffer *in;
	unsigned char *p;
	size_t n;

	if (c->st == C_HTTP) {
		read_http(c);
		if (c->bev != bev || c->st == C_HTTP)
			return;
	}
	if (g.o.transport == T_WS) {
		read_frames(c);
	} else {
		in = bufferevent_get_input(bev);
		while (c->bev == bev && (n = evbuffer_get_length(in)) > 0) {
			n = evbuffer_get_contiguous_space(in);
			p = evbuffer_pullup(in, (ev_ssize_t)n);
			if (sse_parser_feed(c->sse, p, n) != 0) {
				client_lost(c, "bad event stream");
				return;
			}
			if (c->bev == bev)
				evbuffer_drain(in, n);
		}
	}
	check_phase();
}

static void
send_request(struct client *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	char sid[96];
	const char *role = g.o.mode == M_THOUGHTS ? (c->sender ?
	    "agent&agentId=bench-agent" : "observer") :
	    c->sender || (g.o.mode != M_FANOUT && !g.o.observe) ? "user" :
	    "observer";
	int resume = c->has_last && c->has_base;
	uint64_t last = resume ? c->last : g.o.from;
	int with_last = resume || g.o.have_from;

	c->nolast = !with_last;
	session_id(sid, sizeof(sid), c->sess);
	if (g.o.proto == P_SIO)
		evbuffer_add_printf(out, "GET /socket.io/?EIO=4&transport="
		    "websocket HTTP/1.1\r\n");
	else if (g.o.proto == P_WS) {
		evbuffer_add_printf(out, "GET /?session=%s&role=%s", sid, role);
		if (with_last)
			evbuffer_add_printf(out, "&lastSeq=%" PRIu64, last);
		evbuffer_add_printf(out, " HTTP/1.1\r\n");
	} else if (g.o.transport == T_SSE) {
		evbuffer_add_printf(out, "GET /sessions/%s/events", sid);
		if (with_last)
			evbuffer_add_printf(out, "?lastSeq=%" PRIu64, last);
		evbuffer_add_printf(out, " HTTP/1.1\r\n"
		    "Accept: text/event-stream\r\n");
		if (with_last)
			evbuffer_add_printf(out, "Last-Event-ID: %" PRIu64
			    "\r\n", last);
	} else {
		evbuffer_add_printf(out, "GET /sessions/%s/stream", sid);
		if (with_last)
			evbuffer_add_printf(out, "?lastSeq=%" PRIu64 "&role=%s",
			    last, role);
		else
			evbuffer_add_printf(out, "?role=%s", role);
		evbuffer_add_printf(out, " HTTP/1.1\r\n");
	}
	evbuffer_add_printf(out, "Host: %s:%d\r\n", g.o.host, g.o.port);
	if (g.o.transport == T_WS)
		evbuffer_add_printf(out, "Upgrade: websocket\r\n"
		    "Connection: Upgrade\r\nSec-WebSocket-Key: " WS_KEY "\r\n"
		    "Sec-WebSocket-Version: 13\r\n");
	if (g.o.token != NULL)
		evbuffer_add_printf(out, "Authorization: Bearer %s\r\n",
		    g.o.token);
	evbuffer_add(out, "\r\n", 2);
}

static void
client_event(struct bufferevent *bev, short what, void *arg)
{
	struct client *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		c->st = C_HTTP;
		send_request(c);
		return;
	}
	client_lost(c, (what & BEV_EVENT_EOF) ? "connection closed" :
	    "connection error");
	check_phase();
}

/* --- connection management --- */

static void
queue_push(struct client *c, uint64_t due)
{
	uint32_t i = (uint32_t)(c - g.cl);

	if (c->queued)
		return;
	c->queued = 1;
	c->due = due;
	c->qnext = UINT32_MAX;
	if (g.qhead == UINT32_MAX)
		g.qhead = i;
	else
		g.cl[g.qtail].qnext = i;
	g.qtail = i;
}

/* Starts queued connects while fewer than --inflight handshakes run. */
static void
queue_run(void)
{
	struct client *c;
	uint64_t now = now_us();

	while (g.qhead != UINT32_MAX && g.inflight < g.o.inflight) {
		c = &g.cl[g.qhead];
		if (c->due > now)
			break;
		g.qhead = c->qnext;
		c->queued = 0;
		client_connect(c);
	}
}

static void
client_free_conn(struct client *c, int rst)
{
	if (c->bev != NULL) {
		if (rst) {
			struct linger l = { 1, 0 };

			(void)setsockopt(bufferevent_getfd(c->bev), SOL_SOCKET,
			    SO_LINGER, &l, sizeof(l));
		}
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	if (c->sse != NULL) {
		sse_parser_free(c->sse);
		c->sse = NULL;
	}
	if (c->inflight) {
		c->inflight = 0;
		g.inflight--;
	}
	if (c->live) {
		c->live = 0;
		g.nlive--;
	}
	c->st = C_IDLE;
}

/*
 * The connection ended without us asking: resume after what was seen,
 * as a real client would, until the run is over.
 */
static void
client_lost(struct client *c, const char *why)
{
	int was_up = c->st == C_UP;

	client_free_conn(c, 0);
	if (g.phase == 2)
		return;
	if (was_up) {
		g.resumes++;
		if (why != NULL && g.resumes <= 3)
			error_add("client %u: %s; resuming", c->id, why);
		queue_push(c, now_us());
	} else
		queue_push(c, now_us() + RETRY_MS * 1000);
}

static void
client_connect(struct client *c)
{
	struct sockaddr_in src;
	evutil_socket_t fd;
	int one = 1;
	uint32_t nsrc = g.o.src_hi - g.o.src_lo + 1;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1) {
		error_add("socket: %s", strerror(errno));
		queue_push(c, now_us() + RETRY_MS * 1000);
		return;
	}
	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_closeonexec(fd);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Ports are then chosen per 4-tuple at connect, not per address. */
	(void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
	    sizeof(one));
	memset(&src, 0, sizeof(src));
	src.sin_family = AF_INET;
	src.sin_addr.s_addr = htonl(g.o.src_lo + c->id % nsrc);
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) == -1) {
		error_add("bind %s: %s", inet_ntoa(src.sin_addr),
		    strerror(errno));
		close(fd);
		queue_push(c, now_us() + RETRY_MS * 1000);
		return;
	}
	c->bev = bufferevent_socket_new(g.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		die("out of memory");
	bufferevent_setcb(c->bev, client_read, NULL, client_event, c);
	bufferevent_enable(c->bev, EV_READ);
	c->st = C_CONNECTING;
	c->inflight = 1;
	g.inflight++;
	if (c->t_conn == 0)
		c->t_conn = now_us();
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&g.sa,
	    sizeof(g.sa)) == -1)
		client_lost(c, NULL);
}

/* --- phases --- */

static void
report(void)
{
	cJSON *o = cJSON_CreateObject(), *h, *e, *r;
	unsigned i;
	char *j;

	cJSON_AddNumberToObject(o, "connected", g.nup);
	cJSON_AddNumberToObject(o, "events", (double)g.events);
	cJSON_AddNumberToObject(o, "resumes", (double)g.resumes);
	cJSON_AddNumberToObject(o, "lost", (double)g.lost);
	cJSON_AddNumberToObject(o, "duplicated", (double)g.dup);
	cJSON_AddNumberToObject(o, "reordered", (double)g.reorder);
	cJSON_AddNumberToObject(o, "done", g.ndone);
	cJSON_AddNumberToObject(o, "reached", g.nreached);
	cJSON_AddNumberToObject(o, "t_start", (double)g.t_start);
	cJSON_AddNumberToObject(o, "t_go", (double)g.t_go);
	cJSON_AddNumberToObject(o, "t_first", (double)g.t_first);
	cJSON_AddNumberToObject(o, "t_last", (double)g.t_last);
	cJSON_AddNumberToObject(o, "ttl", (double)g.ttl);
	cJSON_AddNumberToObject(o, "lat_max", (double)g.lat_max);
	cJSON_AddNumberToObject(o, "errors_total", (double)g.nerrors_total);
	h = cJSON_AddArrayToObject(o, "hist");
	for (i = 0; i < H_BUCKETS; i++) {
		if (g.hist[i] == 0)
			continue;
		e = cJSON_CreateArray();
		cJSON_AddItemToArray(e, cJSON_CreateNumber(i));
		cJSON_AddItemToArray(e, cJSON_CreateNumber((double)g.hist[i]));
		cJSON_AddItemToArray(h, e);
	}
	e = cJSON_AddArrayToObject(o, "errors");
	for (i = 0; i < g.nerrors; i++)
		cJSON_AddItemToArray(e, cJSON_CreateString(g.errors[i]));
	if (g.rates != NULL) {
		r = cJSON_AddArrayToObject(o, "rates");
		for (i = 0; i < g.n; i++)
			if (g.cl[i].reached)
				cJSON_AddItemToArray(r,
				    cJSON_CreateNumber(g.rates[i]));
	}
	if ((j = cJSON_PrintUnformatted(o)) == NULL)
		die("out of memory");
	cJSON_Delete(o);
	dprintf(g.res_out, "%s\n", j);
	free(j);
}

/*
 * Every client of a session that saw the turn end must have ended on the
 * same seq: the same events reached all of them.  The seq is the one it
 * was done at: events after the turn's done (the agent going idle) reach
 * some clients before the run stops and some after.
 */
static void
check_sessions(void)
{
	uint64_t *end;
	unsigned i, bad = 0;

	if ((end = calloc(g.o.sessions, sizeof(*end))) == NULL)
		return;
	for (i = 0; i < g.n; i++) {
		struct client *c = &g.cl[i];

		if (!c->done)
			continue;
		if (end[c->sess] == 0)
			end[c->sess] = c->end;
		else if (end[c->sess] != c->end && bad++ == 0)
			error_add("session %u: clients ended at seq %" PRIu64
			    " and %" PRIu64, c->sess, end[c->sess], c->end);
	}
	if (bad > 0)
		error_add("%u clients disagree with their session", bad);
	free(end);
}

static void
finish(void)
{
	unsigned i;

	if (g.phase == 2)
		return;
	if (g.o.mode == M_STREAM || g.o.mode == M_FANOUT ||
	    g.o.mode == M_STORM || g.o.mode == M_THOUGHTS)
		check_sessions();
	g.phase = 2;
	for (i = 0; i < g.n; i++)
		client_free_conn(&g.cl[i], 0);
	report();
	event_base_loopexit(g.base, NULL);
}

static void
send_ready(void)
{
	g.ready_sent = 1;
	dprintf(g.res_out, "READY %u %u\n", g.nup, g.n - g.nup);
}

static void
drop_all(void)
{
	unsigned i;
	uint64_t now;

	g.dropped = 1;
	g.t_drop = now = now_us();
	for (i = 0; i < g.n; i++) {
		struct client *c = &g.cl[i];

		if (c->st == C_UP)
			g.resumes++;
		client_free_conn(c, 1);
		if (c->queued)
			continue;
		queue_push(c, now);
	}
	queue_run();
}

static void
check_phase(void)
{
	uint64_t now;
	unsigned i;

	if (g.phase == 0 && !g.ready_sent) {
		if (g.o.mode == M_REPLAY ? g.nreached == g.n :
		    g.nup == g.n && g.nlive == g.n)
			send_ready();
		return;
	}
	if (g.phase != 1)
		return;
	now = now_us();
	switch (g.o.mode) {
	case M_IDLE:
		if (now >= g.t_go + (uint64_t)(g.o.duration * 1e6))
			finish();
		break;
	case M_REPLAY:
		finish();
		break;
	case M_STREAM:
	case M_FANOUT:
	case M_STORM:
	case M_THOUGHTS:
		if (!g.chats_sent) {
			if (g.o.mode != M_STORM && g.o.proto == P_PARLEY &&
			    now < g.t_go + SETTLE_MS * 1000)
				break;
			g.chats_sent = 1;
			g.t_chat = now;
			for (i = 0; i < g.n; i++)
				if (g.cl[i].sender)
					send_chat(&g.cl[i]);
			break;
		}
		if (g.o.mode == M_STORM && !g.dropped) {
			if (now >= g.t_chat + STORM_DROP_MS * 1000)
				drop_all();
			break;
		}
		if (g.ndone == g.n && (g.o.mode != M_STORM || g.ttl != 0))
			finish();
		break;
	}
}

static void
tick_cb(evutil_socket_t fd, short ev, void *arg)
{
	uint64_t now = now_us();
	unsigned i, k;

	(void)fd;
	(void)ev;
	(void)arg;
	queue_run();
	check_phase();
	if (g.phase == 2 || now < g.deadline)
		return;
	/* Out of time: say who is missing, then report what we have. */
	if (g.phase == 0) {
		for (i = k = 0; i < g.n; i++) {
			struct client *c = &g.cl[i];

			if (g.o.mode == M_REPLAY ? c->reached : c->live)
				continue;
			if (k++ == 0)
				error_add("timeout: client %u not %s (state %d, "
				    "%u events)", c->id, g.o.mode == M_REPLAY ?
				    "done replaying" : "live", c->st, c->events);
		}
		error_add("timeout: %u of %u clients not ready", k, g.n);
		send_ready();
		/* The parent's GO moves us on. */
		g.deadline = UINT64_MAX;
		return;
	}
	if (g.o.mode == M_STORM && g.ttl == 0)
		error_add("timeout: %u of %u clients live after the drop",
		    g.nlive, g.n);
	for (i = k = 0; i < g.n; i++) {
		if (g.cl[i].done)
			continue;
		if (k++ == 0)
			error_add("timeout: client %u did not see done (last "
			    "seq %" PRIu64 ")", g.cl[i].id, g.cl[i].last);
	}
	if (k > 0)
		error_add("timeout: %u of %u clients did not see done", k,
		    g.n);
	finish();
}

static void
ctl_cb(evutil_socket_t fd, short ev, void *arg)
{
	char b;
	ssize_t n;

	(void)ev;
	(void)arg;
	n = read(fd, &b, 1);
	if (n <= 0) {
		/* The parent went away. */
		event_del(g.ctl_ev);
		finish();
		return;
	}
	if (g.phase != 0)
		return;
	g.phase = 1;
	g.t_go = now_us();
	g.deadline = g.t_go + (uint64_t)(g.o.timeout * 1e6);
	if (g.o.mode == M_IDLE)
		g.deadline = UINT64_MAX;
	check_phase();
}

rlim_t
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur;
}

/* One process's share: clients procno, procno + procs, ... */
void
child_main(unsigned procno, int ctl_in, int res_out)
{
	struct timeval tv;
	uint32_t i, id;
	char sid[96], path[128], *body;
	rlim_t lim;

	g.procno = procno;
	g.ctl_in = ctl_in;
	g.res_out = res_out;
	g.nonce = (unsigned)getpid() * 2654435761u;
	lim = raise_nofile();
	for (id = procno, g.n = 0; id < g.o.clients; id += g.o.procs)
		g.n++;
	if (lim != 0 && g.n + 32 > lim)
		error_add("process %u: %u clients but only %llu files: use "
		    "more --procs", procno, g.n, (unsigned long long)lim);
	if ((g.cl = calloc(g.n ? g.n : 1, sizeof(*g.cl))) == NULL)
		die("out of memory");
	if (g.o.mode == M_REPLAY &&
	    (g.rates = calloc(g.n ? g.n : 1, sizeof(double))) == NULL)
		die("out of memory");
	if ((g.base = event_base_new()) == NULL)
		die("event_base_new failed");
	build_chat();
	g.qhead = g.qtail = UINT32_MAX;
	g.t_start = now_us();
	g.deadline = g.t_start + (uint64_t)(g.o.timeout * 1e6);
	for (i = 0, id = procno; i < g.n; i++, id += g.o.procs) {
		struct client *c = &g.cl[i];

		c->id = id;
		c->sess = id % g.o.sessions;
		c->sender = !g.o.observe && id < g.o.sessions;
		if (g.o.have_from) {
			c->last = g.o.from;
			c->has_base = 1;
		} else if (g.o.mode == M_STORM && g.o.proto != P_SIO) {
			/* Everything the session holds, to check it all. */
			c->last = 0;
			c->has_base = c->has_last = 1;
		}
		queue_push(c, 0);
	}
	/* SSE needs the session first; over WebSocket the stream makes it. */
	if (g.o.proto == P_PARLEY && g.o.transport == T_SSE &&
	    !g.o.have_from) {
		for (i = 0; i < g.n; i++) {
			if (!g.cl[i].sender)
				continue;
			session_id(sid, sizeof(sid), g.cl[i].sess);
			snprintf(path, sizeof(path), "/sessions");
			if (asprintf(&body, "{\"sessionId\":\"%s\"}", sid) ==
			    -1)
				die("out of memory");
			oneshot("create", path, body);
			free(body);
		}
	}
	g.ctl_ev = event_new(g.base, ctl_in, EV_READ | EV_PERSIST, ctl_cb,
	    NULL);
	event_add(g.ctl_ev, NULL);
	g.tick_ev = event_new(g.base, -1, EV_PERSIST, tick_cb, NULL);
	tv.tv_sec = 0;
	tv.tv_usec = TICK_MS * 1000;
	event_add(g.tick_ev, &tv);
	queue_run();
	if (g.n == 0)
		send_ready();
	event_base_dispatch(g.base);
	if (g.phase != 2)
		finish();
	exit(0);
}

