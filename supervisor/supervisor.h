/* The supervisor role: listeners, request heads, auth, routing, worker pool. */
#ifndef PARLEY_SUPERVISOR_H
#define PARLEY_SUPERVISOR_H

#include <sys/queue.h>
#include <sys/types.h>
#include <stdint.h>

#include "parley/ipc.h"

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
	struct evconnlistener	*evl;
	char			 name[80];
	int			 loopback;
};

struct pending;

#define SUP_NSIGS	4

struct sup {
	struct event_base	*base;
	struct config		*conf;
	const char		*conf_path;
	int			 conf_must_exist;
	TAILQ_HEAD(, listener)	 listeners;
	struct workerq		 workers;	/* current generation */
	struct workerq		 old;		/* draining after a reload */
	TAILQ_HEAD(, pending)	 pending;
	unsigned		 npending;
	struct route		**routes;
	size_t			 nbuckets;
	size_t			 nroutes;
	uint64_t		 next_conn_id;
	uint64_t		 next_hseq;
	uint64_t		 started_ms;
	int			 stopping;
	int			 notified_ready;
	struct event		*stop_ev;
	struct event		*sigs[SUP_NSIGS];
	uint64_t		 worker_restarts;
};

/* pool.c */
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

/* listener.c */
int		 listener_open(struct sup *, struct config *, char *err,
		    size_t errlen);
void		 listener_close_all(struct sup *);
void		 listener_pause(struct sup *);

#endif
