/* Client connections inside a worker: HTTP, WebSocket and SSE. */
#ifndef PARLEY_WORKERS_CONN_H
#define PARLEY_WORKERS_CONN_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>

#include "parley/http.h"
#include "parley/ipc.h"
#include "parley/ws.h"

#include <cjson/cJSON.h>

#include "deliver.h"
#include "sess.h"

struct wk;
struct adapt_ops;
struct bufferevent;
struct event;

enum conn_kind { CONN_HTTP, CONN_WS, CONN_SSE };

struct conn;

/* What a connection's requests and messages are handed to (route.c). */
struct conn_handler {
	/* A complete HTTP request (raw: its bytes, when at hand). */
	void	(*request)(struct conn *, const unsigned char *raw, size_t);
	/* A WebSocket text message. */
	void	(*text)(struct conn *, const char *, size_t);
	/* A session's answer to a client message (sess_client.done). */
	void	(*answer)(struct sess_client *, struct sess *, const char *id,
		    const struct sess_result *);
};

/* A GET .../log or /api/audit answer being read from the log. */
struct conn_page {
	struct evbuffer	*out;
	int		 n;
	int		 audit;		/* only the audit trail's events */
	int		 want;		/* audit: entries at most */
	int		 more;		/* audit: stopped before the end */
	uint64_t	 next;		/* audit: read up to this seq */
	uint64_t	 end;		/* audit: the log's end at the start */
	size_t		 scanned;	/* audit: bytes read */
};

/*
 * Who a connection is: the worker's copy of its hand-off (struct
 * ipc_conn).  The token's scope and subject are heap strings of their
 * length, or the shared "" when the token has none (conn_who_str), not
 * the wire's fixed 1 KiB and 129 bytes: an idle connection holds them
 * for its whole life.
 */
struct conn_who {
	uint32_t	 kind;		/* enum ipc_conn_kind */
	uint32_t	 role;		/* enum ipc_role */
	uint64_t	 conn_id;	/* request id carried into logs */
	uint64_t	 hseq;		/* hand-off order (REROUTE's release) */
	uint64_t	 expires_ms;	/* token expiry, Unix ms; 0: never */
	char		*scope;		/* as ipc_conn.scope: "" allows any */
	char		*subject;	/* JWT "sub", or "" */
	char		 session[IPC_SID_MAX + 1];	/* routed, or "" */
	char		 peer[64];
};

struct conn {
	TAILQ_ENTRY(conn)	 entry;		/* wk->conns */
	TAILQ_ENTRY(conn)	 gentry;	/* wk->gather */
	int			 gathering;	/* on wk->gather */
	struct evbuffer		*pend;		/* gathered live events */
	struct wk		*wk;
	const struct conn_handler *h;
	struct bufferevent	*bev;
	struct conn_who		 ic;		/* who, role, scope */
	enum conn_kind		 kind;
	struct http_parser	 hp;
	struct ws_parser	 wp;
	struct sess		*sess;		/* subscribed to */
	struct deliver_sub	 sub;		/* its cursor in sess's log */
	struct sess_client	 cl;		/* what it sends sessions */
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
	int			 parked;	/* waits for its session to load */
	int			 park_text;	/* parked: a /chat first message */
	unsigned char		*park;		/* the request or the message */
	size_t			 park_len;
	int			 parking;	/* 1 inside sess_load */
	char			*park_sid;	/* the session it waits for (heap) */
	int			 post_sse;	/* POST messages answered as SSE */
	int			 deleting;	/* a DELETE: 1, 2 through a follower */
	char			 kb_doc[24];	/* POST .../kb: the documentId */
	int			 kg_kind;	/* /knowledge/P: 1 + kgs_kind */
	int			 kg_md;		/* its export as Markdown */
	int			 kg_nact;	/* POST .../actions: actions */
	char			*kg_batch;	/* and its batchId (heap) */
	struct conn_page	*page;		/* GET log being read */
	struct event		*hb_ev;
	struct event		*tmo_ev;
	struct event		*auth_ev;	/* the JWT's exp, then its grace */
	int			 auth_asked;	/* token_expiring sent */
	char			 reqid[17];	/* ic.conn_id, as logs show it */
	char			 method[16];	/* the request, for the log */
	char			 path[128];
	int			 status;	/* HTTP status answered */
	int			 control;	/* /sessions/{id}/control */
	int			 present;	/* counted in its agent's presence */
	char			 agent[SESS_AGENT_MAX + 1]; /* ?agentId=, or "" */
	struct sess_creator	 creator;	/* route_creator's answer */
	uint64_t		 sent;		/* logged events written */
	uint64_t		 opened_ms;	/* monotonic */
	const struct adapt_ops	*adapt;		/* another protocol (adapt.h) */
	void			*adapt_st;	/* its state */
};

/*
 * A heap copy of s (a token's scope or subject), or the shared "" for an
 * empty one; NULL when out of memory.  conn_who_free releases it.
 */
char	*conn_who_str(const char *s);
void	conn_who_free(char *);
/* The wire form of c->ic, for handing the connection on (REROUTE). */
void	conn_who_ipc(const struct conn *, struct ipc_conn *);
void	conn_new(struct wk *, int fd, const struct ipc_conn *,
	    const unsigned char *bytes, const struct conn_handler *);
/* Writes the live events gathered in this loop pass (wk->gather_ev). */
void	conn_gather_cb(evutil_socket_t, short, void *);
/* A connection-level event (no seq): pong, ack, error, heartbeat. */
void	conn_send_json(struct conn *, const char *json);
/* Closes gracefully: WebSocket close frame with code, SSE end of stream. */
void	conn_close(struct conn *, uint16_t code, const char *reason);
/* Frees a connection at once (worker exit): no close handshake. */
void	conn_drop(struct conn *);
/* Subscribes c to s's events (c->sess); conn_detach undoes it. */
void	conn_attach(struct conn *, struct sess *);
void	conn_detach(struct conn *);
/* Bytes as they are (a framing of its own: seed.c's chunks). */
void	conn_send_raw(struct conn *, const void *, size_t);
/* An error event for the client, about message id (may be NULL). */
void	conn_send_error(struct conn *, const char *code, const char *msg,
	    const char *id);
/*
 * The client message auth: a new JWT for the same subject replaces the
 * connection's role, scope and expiry without a reconnect.
 */
struct proto_in;
void	conn_auth(struct conn *, const struct proto_in *);
/* The WebSocket close code when a token's grace runs out. */
#define CONN_CLOSE_TOKEN_EXPIRED	4001
/* Retention removed the events after last: RESUME_GAP from first. */
void	conn_send_gap(struct conn *, uint64_t first, uint64_t last);
/*
 * HTTP answers, with the request id; extra is NULL or CRLF lines.  The
 * reply (body consumed) and the error close the connection once written.
 */
void	conn_respond(struct conn *, int status, const char *body, size_t len,
	    const char *extra);
void	conn_http_reply(struct conn *, int status, cJSON *body);
/* As conn_respond, of a content type (text), closing once written. */
void	conn_respond_as(struct conn *, int status, const char *type,
	    const char *body, size_t len);
void	conn_http_error(struct conn *, int status, const char *code,
	    const char *msg);
/* Completes the WebSocket handshake (RFC 6455 4.2.2); 0, or -1 answered. */
int	conn_ws_upgrade(struct conn *);
/* Answers with an event stream. */
void	conn_sse_start(struct conn *);
/* The same with extra header lines (CRLF-terminated, or NULL). */
void	conn_sse_start_ext(struct conn *, const char *extra);
/* The first message came, or the hold timed out: go live. */
void	conn_hold_end(struct conn *);
/* Handles the WebSocket frames read so far (after a wait). */
void	conn_ws_input(struct conn *);
/* After input was handled: frees, hands off or keeps the connection. */
void	conn_settle(struct conn *);

#endif
