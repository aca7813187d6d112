/*
 * The worker's shared state (its loop, sessions, connections, counters)
 * and the services every module of it uses: telling the supervisor a
 * session left, handing a connection back, the descriptor budget, exit.
 */
#ifndef PARLEY_WORKERS_WK_H
#define PARLEY_WORKERS_WK_H

#include <sys/queue.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <stdint.h>

#include "parley/ipc.h"
#include "parley/metrics.h"

struct config;
struct event;
struct event_base;
struct store;
struct llm_ctx;
struct mcp_ctx;
struct sess;
struct conn;
struct deliver_sub;
struct sess_agent;
struct sess_part;

#define WK_SESS_BUCKETS	4096

struct index;

#define WK_STAGE	64

struct evt;

struct wk {
	struct event_base	*base;
	struct config		*conf;
	struct quota		*quota;		/* the host's, shared */
	struct store		*store;
	struct ipc_chan		*chan;
	struct index		*index;		/* the host's directory
						   index (index.c), or NULL */
	struct llm_ctx		*llm;
	struct mcp_ctx		*mcp;
	const struct sess_agent	*agent;		/* runs the turns */
	const struct sess_part	*const *parts;	/* NULL-terminated */
	int			 slot;
	int			 draining;
	int			 terminating;
	TAILQ_HEAD(, sess)	 sessions;
	TAILQ_HEAD(, sess)	 buckets[WK_SESS_BUCKETS];
	unsigned		 nsessions;
	TAILQ_HEAD(, sess)	 thawed;	/* meta as a tree (sess.c) */
	struct event		*meta_ev;	/* freezes them */
	unsigned		 meta_wait_ms;	/* between sweeps; 0: the least */
	TAILQ_HEAD(, conn)	 conns;
	TAILQ_HEAD(, conn)	 gather;	/* live events to write */
	struct event		*gather_ev;
	unsigned		 direct_left;	/* sends at once left this pass */
	struct timeval		 pass;		/* the pass direct_left is for */
	/* A fan-out's live frames for one connection, borrowed until they
	 * go out together (conn.c, stage_flush). */
	struct conn		*stage_c;
	unsigned		 stage_n;
	size_t			 stage_bytes;
	struct iovec		 stage_iov[WK_STAGE];
	struct evt		*stage_ev[WK_STAGE];
	TAILQ_HEAD(, deliver_sub) read_wait;	/* for a catch-up read */
	unsigned		 pump_reads;	/* catch-up reads in flight */
	struct event		*read_ev;
	unsigned		 nconns;
	uint64_t		 events;
	struct metrics		 metrics;	/* counters sent to the supervisor */
	uint64_t		 hseq;		/* last hand-off received */
	uint64_t		 started_ms;	/* monotonic */
	uint64_t		 trimmed_ms;	/* last util_trim */
	unsigned		 fd_limit;	/* RLIMIT_NOFILE */
	unsigned		 sess_fds;	/* fds an open session holds */
	uint64_t		 fd_warned_ms;
	const char		*fail_sid;	/* a load that failed, while */
	const char		*fail_err;	/* its waiters route */
	int			 store_up;	/* store reachable */
	char			 node[96];	/* "<host-id>/<pid>" */
	uint64_t		 kg_clock;	/* the knowledge graphs' hybrid
						   logical clock (kg.h) */
	const struct timeval	*hb_tv;		/* libevent common timeout */
	struct event		*stats_ev;
	struct event		*sync_ev;
	struct event		*sweep_ev;
	struct event		*exit_ev;
	struct event		*sigterm_ev;
};

/* Tells the supervisor a session left this worker's memory. */
void	wk_released(struct wk *, const char *sid);
/* Gives a connection back to the supervisor for sid's owner; takes fd. */
int	wk_reroute(struct wk *, int fd, const struct ipc_conn *,
	    const void *bytes, size_t len);
/*
 * Whether extra more descriptors fit under RLIMIT_NOFILE with room to
 * spare: refusing a client is better than a hand-off the kernel cannot
 * deliver (its descriptor would be lost with the IPC message).
 */
int	wk_fd_room(struct wk *, unsigned extra);
/* Exits once a terminating or drained worker holds nothing more. */
void	wk_maybe_exit(struct wk *);

#endif
