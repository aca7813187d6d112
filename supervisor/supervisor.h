/* The supervisor role: listeners, request heads, auth, routing, worker pool. */
#ifndef PARLEY_SUPERVISOR_H
#define PARLEY_SUPERVISOR_H

#include <sys/queue.h>
#include <sys/types.h>
#include <stdint.h>

#include "parley/ipc.h"
#include "parley/metrics.h"

struct config;
struct event;
struct event_base;
struct evconnlistener;

struct worker {
	TAILQ_ENTRY(worker)	 entry;
	struct sup		*sup;
	int			 slot;
	pid_t			 pid;		/* 0 while not running */
	struct ipc_chan		*chan;
	struct event		*restart_ev;
	struct event		*held_ev;	/* refuses held ones in the end */
	struct config		*conf;		/* the config it was forked with */
	int			 ready;
	int			 draining;
	uint64_t		 started_ms;
	uint64_t		 backoff_ms;
	uint64_t		 restarts;
	unsigned		 routes;	/* sessions the table gives it */
	struct ipc_stats	 stats;
	struct metrics		 metrics;	/* its last IPC_METRICS */
	TAILQ_HEAD(, held)	 held;		/* connections waiting for it */
	unsigned		 nheld;
};
TAILQ_HEAD(workerq, worker);

/* A connection handed to a worker that is not ready yet. */
struct held {
	TAILQ_ENTRY(held)	 entry;
	int			 fd;
	int			 type;		/* IPC_CONN */
	struct ipc_conn		 ic;
	unsigned char		*bytes;
};

struct route {
	struct route		*next;
	struct worker		*w;
	uint64_t		 hseq;		/* last hand-off for it */
	char			 sid[IPC_SID_MAX + 1];
};

struct listener {
	TAILQ_ENTRY(listener)	 entry;
	struct sup		*sup;
	struct evconnlistener	*evl;
	char			 name[80];
	int			 loopback;
	int			 tls;		/* accepted into tls.c */
	int			 proxy_protocol; /* `listen ... proxy-protocol` */
};

struct pending;
struct reply;
struct tls;
struct peer_rate;
struct ctlq;
struct evbuffer;
struct http_request;

#define SUP_NSIGS	5

struct sup {
	struct event_base	*base;
	struct config		*conf;
	const char		*conf_path;
	int			 conf_must_exist;
	TAILQ_HEAD(, listener)	 listeners;
	struct workerq		 workers;	/* current generation */
	struct workerq		 old;		/* draining after a reload */
	TAILQ_HEAD(, pending)	 pending;
	TAILQ_HEAD(, reply)	 replies;	/* answers on their way out */
	unsigned		 nreplies;
	unsigned		 npending;
	unsigned		 nctlpending;	/* of those, control peers */
	struct peer_rate	*rates;		/* new connections a second by
						   client address, or NULL */
	uint64_t		 limit_log_ms;	/* last warning about them */
	unsigned		 limit_refused;	/* refused since */
	uint64_t		 trimmed_ms;	/* last util_trim */
	struct route		**routes;
	size_t			 nbuckets;
	size_t			 nroutes;
	uint64_t		 next_conn_id;
	uint64_t		 next_hseq;
	uint64_t		 started_ms;
	int			 stopping;
	int			 draining;	/* parleyctl drain: exit when empty */
	int			 notified_ready;
	struct event		*stop_ev;
	struct event		*status_ev;	/* STATUS= for systemd */
	struct event		*sigs[SUP_NSIGS];
	uint64_t		 worker_restarts;
	struct metrics		 gone;		/* counters of exited workers */
	/* the control socket */
	struct evconnlistener	*ctl_evl;
	char			 ctl_path[108];
	uid_t			 ctl_uid;	/* its owner, or -1 */
	gid_t			 ctl_gid;	/* its group, or -1 */
	TAILQ_HEAD(, ctlq)	 ctlqs;		/* questions waiting for workers */
	uint32_t		 next_query;
	struct tls		*tls;		/* tls.c's state, NULL until used */
	struct quota		*quota;		/* shared with the workers */
};

/* What the workers last reported, summed over both generations. */
struct pool_totals {
	unsigned	 workers;	/* current generation */
	unsigned	 ready;		/* of those */
	unsigned	 draining;	/* old generations */
	unsigned	 store_down;	/* ready workers that cannot reach it */
	double		 sessions;
	double		 connections;
	double		 running;
	double		 events;
};

/* pool.c */
void		 pool_totals(struct sup *, struct pool_totals *);
void		 pool_start(struct sup *);
void		 pool_reload(struct sup *, struct config *);
void		 pool_stop(struct sup *);
int		 pool_alive(struct sup *);
unsigned	 pool_ready(struct sup *);
struct worker	*pool_route(struct sup *, const char *sid, int create);
struct worker	*pool_least_loaded(struct sup *);
void		 pool_forget(struct sup *, const char *sid, struct worker *);
int		 pool_handoff(struct worker *, int fd, const struct ipc_conn *,
		    const void *bytes);
void		 sup_notify(const char *state);
void		 pool_kill_all(struct sup *);
void		 pool_reap(struct sup *);
void		 pool_free_all(struct sup *);
/* Appends /metrics: the sum over workers, living and exited. */
void		 pool_metrics_render(struct sup *, struct evbuffer *);
/* Asks every running worker (at most max, their pids into asked);
 * returns how many were asked. */
unsigned	 pool_query(struct sup *, uint32_t id, const char *state,
		    pid_t *asked, unsigned max);
/* Sets every worker's log level (IPC_LOG_KEEP: unchanged), reopens logs. */
void		 pool_log(struct sup *, uint32_t level, int reopen);
/* Lets every worker finish within ms and exit; none is replaced. */
void		 pool_drain(struct sup *, uint64_t ms);

/* parleyd.c */
int		 sup_reload(struct sup *, char *err, size_t errlen);
void		 sup_drain(struct sup *, uint64_t ms);

/* control.c */
int		 control_open(struct sup *, const struct config *, char *err,
		    size_t errlen);
void		 control_close(struct sup *);
/* Answers a /control/v1/ request; takes fd. */
void		 control_request(struct sup *, int fd,
		    const struct http_request *);
/* Answers GET /sessions for a client: the sessions in memory that who
 * may open (?state= as parleyctl's); takes fd. */
void		 control_sessions(struct sup *, int fd,
		    const struct http_request *, const struct ipc_conn *who);
/* A worker's answer to question id (see pool_query). */
void		 control_answer(struct sup *, struct worker *, uint32_t id,
		    int truncated, const char *json, size_t len);

/* guard.c: the listener address a connection came in on, as Host names it. */
struct guard_local {
	char		 own[64];	/* "[ADDR]:PORT"; "" when unknown */
	int		 loopback;
};
/* guard.c: a refusal, for the listener to answer. */
struct guard_err {
	int		 status;
	const char	*code;
	char		 msg[512];
};
/*
 * Whether the request on fd (a listener's socket) names this server in
 * Host and, from a browser, comes from its own origin or an
 * allowed-origin: 0, or -1 with *e set.
 */
int		 guard_site(const struct config *, const struct guard_local *,
		    const struct http_request *, struct guard_err *);
/* Into *l, the address the client reached on fd (a TCP socket). */
void		 guard_local(int fd, struct guard_local *l);
/*
 * Whether role, with its token's session scope, may use the request's
 * endpoint (the role table): 0, or -1 with *e set (404 for no endpoint).
 */
int		 guard_role(const struct http_request *, int role,
		    const char *scope, struct guard_err *);
/* auth.c */
/*
 * The role of the request's credential (static token or JWT), with
 * ic's scope, subject and expires_ms filled; 0 with msg saying what was
 * wrong (no secret in it) when it has none or a bad one.
 */
int		 authenticate(struct sup *, const struct http_request *,
		    struct ipc_conn *ic, char *msg, size_t msglen);

/* listener.c */
int		 listener_open(struct sup *, struct config *, char *err,
		    size_t errlen);
int		 listener_update(struct sup *, struct config *, char *err,
		    size_t errlen);
void		 listener_close_all(struct sup *);
/* Frees the answers still on their way out (the loop is over). */
void		 listener_replies_free(struct sup *);
void		 listener_pause(struct sup *);
/*
 * Starts reading a request on an accepted socket (takes fd) from peer
 * (its numeric address, or for the control socket who it is); flags:
 */
#define LT_CONTROL	0x01	/* the control socket: peers checked by uid */
#define LT_PROXY	0x02	/* the listener takes PROXY headers */
/* local: the address the client reached; NULL: fd's own. */
void		 listener_take(struct sup *, int fd, int flags,
		    const char *peer, const struct guard_local *local);
/* Writes out (consumed) to fd, then closes it. */
void		 listener_reply(struct sup *, int fd, struct evbuffer *out);

#endif
