/*
 * Supervisor <-> worker messages over a Unix stream socket.  Every message
 * is a fixed header followed by a payload whose size is checked against its
 * type; a connection's file descriptor travels with the message (SCM_RIGHTS
 * on the message's first byte).  Anything unexpected is fatal to the
 * receiver's view of the peer: a worker exits, the supervisor restarts the
 * worker that sent it.
 */
#ifndef PARLEY_IPC_H
#define PARLEY_IPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#define IPC_VERSION	2
#define IPC_MAX_PAYLOAD	(4u * 1024 * 1024)
#define IPC_SID_MAX	128	/* bytes of a session id, without NUL */
#define IPC_SCOPE_MAX	1024	/* bytes of a token's session scope */
#define IPC_SUB_MAX	128	/* bytes of a token's subject */

enum ipc_type {
	IPC_HELLO = 1,		/* W->S: ready; payload struct ipc_hello */
	IPC_CONN,		/* S->W: fd + struct ipc_conn + bytes */
	IPC_REROUTE,		/* W->S: fd + struct ipc_conn + bytes */
	IPC_RELEASED,		/* W->S: struct ipc_sess: no longer in memory */
	IPC_ADOPT,		/* S->W: struct ipc_sess: re-open, a turn may be cut */
	IPC_STATS,		/* W->S: struct ipc_stats */
	IPC_SHUTDOWN,		/* S->W: struct ipc_shutdown */
	IPC_METRICS,		/* W->S: struct metrics (parley/metrics.h) */
	IPC_QUERY,		/* S->W: struct ipc_query */
	IPC_ANSWER,		/* W->S: struct ipc_answer + JSON text */
	IPC_LOG,		/* S->W: struct ipc_log */
	IPC_TYPE_MAX
};

#define IPC_F_FD	0x1

struct ipc_hdr {
	uint16_t	version;
	uint16_t	type;
	uint32_t	flags;
	uint32_t	len;		/* payload bytes after the header */
};

struct ipc_hello {
	uint32_t	slot;
	uint32_t	pid;
};

enum ipc_conn_kind {
	IPC_CONN_HTTP = 1,	/* bytes: the raw request read so far */
	IPC_CONN_WS_CHAT,	/* upgraded /chat: bytes = first message, then raw frames */
};

/*
 * IPC_ROLE_METRICS reads /metrics and /api/info only; the supervisor
 * answers both, so a worker never sees it.
 */
enum ipc_role {
	IPC_ROLE_OBSERVER = 1, IPC_ROLE_USER, IPC_ROLE_AGENT, IPC_ROLE_ADMIN,
	IPC_ROLE_METRICS
};

#define IPC_CONN_F_NOT_HELD	0x1	/* REROUTE: sender does not hold it */

struct ipc_conn {
	uint32_t	kind;
	uint32_t	role;
	uint32_t	first_len;	/* WS_CHAT: bytes of the first message */
	uint32_t	bytes_len;	/* bytes following this struct */
	uint64_t	conn_id;	/* request id carried into logs */
	uint64_t	hseq;		/* hand-off order, set by the supervisor */
	uint32_t	flags;
	uint32_t	pad;
	char		session[IPC_SID_MAX + 1];	/* routed session, or "" */
	/*
	 * The sessions the token may open: ids and "prefix*" patterns, one
	 * per line; "" allows any.  ipc_scope_allows() reads it.
	 */
	char		scope[IPC_SCOPE_MAX + 1];
	char		subject[IPC_SUB_MAX + 1];	/* JWT "sub", or "" */
	uint64_t	expires_ms;	/* token expiry, Unix ms; 0: never */
	char		peer[64];
};

/*
 * RELEASED carries the hseq of the last connection the worker had been
 * handed when it let go: a connection for the session handed after that
 * means the worker holds it again, and the route must stay.
 */
struct ipc_sess {
	uint64_t	hseq;
	char		session[IPC_SID_MAX + 1];
};

struct ipc_stats {
	uint32_t	sessions;
	uint32_t	connections;
	uint32_t	running;	/* sessions with a turn in progress */
	uint32_t	store_down;	/* 1: the store is unreachable */
	uint64_t	events;		/* events appended since start */
};

enum ipc_shutdown_mode { IPC_SHUT_TERMINATE = 1, IPC_SHUT_DRAIN };

struct ipc_shutdown {
	uint32_t	mode;
	uint32_t	timeout_ms;
};

/*
 * A question for a worker (parleyctl sessions): the worker answers with
 * IPC_ANSWER carrying the same id and a JSON array, one object per session
 * in its memory: {"sessionId","status","connections","lastSeq","paused",
 * "follower"}.  state is a status to keep ("" = all).  An answer longer
 * than IPC_ANSWER_MAX is cut at a whole object and says so in truncated.
 */
enum ipc_query_what { IPC_Q_SESSIONS = 1 };
#define IPC_ANSWER_MAX	(1024u * 1024)

struct ipc_query {
	uint32_t	id;
	uint32_t	what;
	char		state[16];
};

struct ipc_answer {
	uint32_t	id;
	uint32_t	truncated;
	uint32_t	len;		/* JSON bytes after this struct */
	uint32_t	pad;
};

/* Logging changes: level (enum log_level, or IPC_LOG_KEEP), reopen files. */
#define IPC_LOG_KEEP	0xffffffffu
struct ipc_log {
	uint32_t	level;
	uint32_t	reopen;
};

struct event_base;
struct ipc_chan;

/*
 * Called for each complete message; payload is valid only during the call
 * and fd (or -1) becomes the callee's.  type 0 means the peer closed or the
 * stream broke.  Returning -1 declares the message unexpected: the channel
 * stops reading and the owner is told through a type-0 call.  The callback
 * must not free the channel; the owner defers that to its event loop.
 */
typedef int (*ipc_cb)(struct ipc_chan *, const struct ipc_hdr *,
    const void *payload, int fd, void *arg);

struct ipc_chan	*ipc_chan_new(struct event_base *, int fd, ipc_cb, void *arg);
void		 ipc_chan_free(struct ipc_chan *);	/* closes the socket */
/* Queues a message; fd (or -1) is sent with it and closed once sent. */
int		 ipc_send(struct ipc_chan *, enum ipc_type, int fd,
		    const void *p1, size_t l1, const void *p2, size_t l2);
size_t		 ipc_pending(const struct ipc_chan *);
/* Checks an IPC_CONN/REROUTE payload of len bytes: 0 ok, -1 with a reason. */
int		 ipc_conn_check(const struct ipc_conn *, size_t len,
		    const char **why);
/* Checks a header and payload size for its type: 0 ok, -1 with a reason. */
int		 ipc_check(const struct ipc_hdr *, int have_fd, const char **why);
/* A role's name ("observer" ... "metrics"); NULL for no role. */
const char	*ipc_role_name(int role);
/* The role a name stands for; 0 for none. */
int		 ipc_role_parse(const char *name);
/* Whether a token scope (struct ipc_conn.scope) lets it open session sid. */
int		 ipc_scope_allows(const char *scope, const char *sid);
/* Whether the scope names sid itself, not through a pattern: a share. */
int		 ipc_scope_names(const char *scope, const char *sid);
/*
 * Whether connection ic may use session sid owned by owner (the JWT
 * subject that created it; NULL or "": unowned, anyone in scope): its
 * subject, the admin role, or a share (ipc_scope_names) lets it in.
 */
int		 ipc_owner_allows(const char *owner, const struct ipc_conn *ic,
		    const char *sid);
/* The same, of a role, subject and scope held apart (a worker's copy). */
int		 ipc_who_allows(const char *owner, uint32_t role,
		    const char *subject, const char *scope, const char *sid);
/*
 * Delivers what the peer sent before it exited and is still unread (the
 * supervisor, reaping a worker); never waits.
 */
void		 ipc_drain(struct ipc_chan *);
/* Blocks until everything queued is written (shutdown paths only). */
void		 ipc_flush(struct ipc_chan *, int timeout_ms);

#endif
