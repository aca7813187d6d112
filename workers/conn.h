/* Client connections inside a worker: HTTP, WebSocket and SSE. */
#ifndef PARLEY_WORKERS_CONN_H
#define PARLEY_WORKERS_CONN_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>

#include "parley/http.h"
#include "parley/ipc.h"
#include "parley/ws.h"

struct wk;
struct sess;
struct evt;
struct bufferevent;
struct event;
struct store_req;

enum conn_kind { CONN_HTTP, CONN_WS, CONN_SSE };

struct conn {
	TAILQ_ENTRY(conn)	 entry;		/* wk->conns */
	TAILQ_ENTRY(conn)	 sentry;	/* sess->conns */
	TAILQ_ENTRY(conn)	 gentry;	/* wk->gather */
	int			 gathering;	/* on wk->gather */
	struct evbuffer		*pend;		/* gathered live events */
	TAILQ_ENTRY(conn)	 rwentry;	/* wk->read_wait */
	int			 read_waiting;	/* on wk->read_wait */
	int			 pump_read;	/* its read counts in pump_reads */
	struct wk		*wk;
	struct bufferevent	*bev;
	struct ipc_conn		 ic;		/* who, role, scope */
	enum conn_kind		 kind;
	struct http_parser	 hp;
	struct ws_parser	 wp;
	struct sess		*sess;
	uint64_t		 next_seq;	/* next logged event it needs */
	int			 live;		/* fed by fan-out, not the log */
	int			 hold;		/* waits for a first message */
	uint64_t		 live_from;	/* first seq sent after the hold */
	int			 chat;		/* /chat: bound by first message */
	int			 got_first;
	int			 closing;
	int			 close_sent;
	int			 handing_off;
	int			 freeing;
	int			 cut;		/* over its bound: drop now */
	int			 routed;	/* its one request was answered */
	char			*first;		/* /chat first message, during hand-off */
	size_t			 first_len;
	char			 turn_msgid[48];/* POST messages as SSE: ends with it */
	uint64_t		 last_out_ms;
	unsigned		 waits;		/* answers waiting in sessions */
	int			 parked;	/* waits for its session to load */
	int			 park_text;	/* parked: a /chat first message */
	unsigned char		*park;		/* the request or the message */
	size_t			 park_len;
	int			 parking;	/* 1 inside sess_load */
	char			 park_sid[IPC_SID_MAX + 1];
	int			 post_sse;	/* POST messages answered as SSE */
	int			 deleting;	/* a DELETE: 1, 2 through a follower */
	struct store_req	*range;		/* reading the log */
	int			 ranging;	/* 1 inside the read call */
	void			*page;		/* GET log being read */
	struct sess		*range_sess;	/* whose log range reads */
	struct event		*hb_ev;
	struct event		*tmo_ev;
	char			 reqid[17];	/* ic.conn_id, as logs show it */
	char			 method[16];	/* the request, for the log */
	char			 path[128];
	int			 status;	/* HTTP status answered */
	int			 control;	/* /sessions/{id}/control */
	int			 replaying;	/* a resume reads the log */
	uint64_t		 replay_n;	/* events it has sent */
	uint64_t		 sent;		/* logged events written */
	uint64_t		 opened_ms;	/* monotonic */
};

void	conn_new(struct wk *, int fd, const struct ipc_conn *,
	    const unsigned char *bytes);
/* Pumps clients that waited for a catch-up read (wk->read_ev). */
void	conn_read_wake_cb(evutil_socket_t, short, void *);
/* Writes the live events gathered in this loop pass (wk->gather_ev). */
void	conn_gather_cb(evutil_socket_t, short, void *);
/* Fan-out of a logged event: copied if small, else referenced (evt refs). */
void	conn_push(struct conn *, struct evt *);
/* A connection-level event (no seq): pong, ack, error, heartbeat. */
void	conn_send_json(struct conn *, const char *json);
/* Closes gracefully: WebSocket close frame with code, SSE end of stream. */
void	conn_close(struct conn *, uint16_t code, const char *reason);
/* Frees a connection at once (worker exit): no close handshake. */
void	conn_drop(struct conn *);
/* Resumes feeding a connection from the log after a pause. */
void	conn_pump(struct conn *);
struct sess_result;
/* Its session is leaving memory: a log read under way ends (503, 1012). */
void	conn_read_abort(struct conn *);
/* Answers a client message once its session says (ack, error, HTTP). */
void	conn_input_done(struct conn *, struct sess *, const char *id,
	    const struct sess_result *);

#endif
