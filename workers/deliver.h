/*
 * Delivery: a session's subscribers, each a cursor (the next seq it
 * needs), fed live by the fan-out or from the recent cache and the log.
 * Sessions append and notify; connections frame and write.
 */
#ifndef PARLEY_WORKERS_DELIVER_H
#define PARLEY_WORKERS_DELIVER_H

#include <sys/queue.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

struct wk;
struct evt;
struct store_req;
struct store_sess;
struct deliver_sub;

/* What a subscriber's owner (a connection) does for delivery. */
struct deliver_ops {
	/* Writes one logged event (live: from the fan-out) and moves the
	 * cursor past it; may close, and then free, the subscriber: returns
	 * nonzero then, and the subscriber is not touched again. */
	int	(*write)(struct deliver_sub *, struct evt *, int live);
	/* Bytes waiting to be written. */
	size_t	(*queued)(struct deliver_sub *);
	/* Whether it takes no more events. */
	int	(*closing)(struct deliver_sub *);
	/* Off the live feed: what waits goes out, and its write
	 * callback calls deliver_pump once it has drained. */
	void	(*behind)(struct deliver_sub *);
	/* Retention removed the events after last; the log starts at first. */
	void	(*gap)(struct deliver_sub *, uint64_t first, uint64_t last);
	/* Unsubscribed, it cannot be fed on: close it (code, reason). */
	void	(*close)(struct deliver_sub *, uint16_t code, const char *why);
	/* Its read was cancelled: the log it read is going away. */
	void	(*abort)(struct deliver_sub *);
	/* Sends a message that is not logged (no seq); may be NULL. */
	void	(*notice)(struct deliver_sub *, const char *json);
	/* The live events of one fan-out were all written: what write
	 * kept of them (borrowed until now) goes out.  May be NULL. */
	void	(*flush)(struct deliver_sub *);
};

/* A session's side of delivery (embedded in struct sess). */
struct deliver {
	TAILQ_HEAD(, deliver_sub) subs;
	unsigned		 nsubs;
	unsigned		 ndash;		/* of them dashboards */
	TAILQ_HEAD(, deliver_sub) readers;	/* reads of this log */
	struct store_sess	*st;		/* the log, once opened */
	const char		*id;		/* the session's, for logs */
	struct evt		**recent;	/* shared: seq % DELIVER_RECENT */
	uint64_t		 recent_lo;	/* seqs held: lo..hi, or none */
	uint64_t		 recent_hi;
	size_t			 recent_bytes;	/* JSON held in recent */
	uint64_t		 last;		/* highest seq fanned out */
	void			(*changed)(void *owner);	/* subs came or went */
	void			*owner;
	/* While set, sees every event fanned out (dash.c counts them). */
	void			(*tap)(void *arg, const struct evt *);
	void			*tap_arg;
	/*
	 * What a subscriber may see of a scoped event (struct evt): e
	 * itself, another form of the same seq (borrowed from e), or NULL
	 * when none could be made.  NULL view: everyone sees everything.
	 */
	struct evt		*(*view)(void *owner, const struct deliver_sub *,
				    struct evt *e);
};

/* A subscriber's cursor (embedded in struct conn). */
struct deliver_sub {
	TAILQ_ENTRY(deliver_sub) entry;		/* feed->subs */
	TAILQ_ENTRY(deliver_sub) rwentry;	/* wk->read_wait */
	TAILQ_ENTRY(deliver_sub) rentry;	/* range_feed->readers */
	struct wk		*wk;
	const struct deliver_ops *ops;
	const char		*reqid;		/* its owner's, for logs */
	int			 role;		/* its reader's (IPC_ROLE_*), */
	const char		*agent;		/* and agentId or "": filters */
	int			 dash;		/* a dashboard (dash.c), set
						   before it subscribes */
	struct deliver		*feed;		/* subscribed to, or NULL */
	uint64_t		 next_seq;	/* next logged event it needs */
	int			 live;		/* fed by fan-out, not the log */
	int			 hold;		/* waits for a first message */
	uint64_t		 live_from;	/* first seq sent after the hold */
	int			 read_waiting;	/* on wk->read_wait */
	int			 pump_read;	/* its read counts in pump_reads */
	struct store_req	*range;		/* reading the log */
	int			 ranging;	/* 1 inside the read call */
	struct deliver		*range_feed;	/* whose log range reads */
	int			 replaying;	/* a resume reads the log */
	uint64_t		 replay_n;	/* events it has sent */
	unsigned		 depth;		/* events written since its
						   output was last seen empty */
	int			 delayed;	/* a scoped event waits for
						   the output to drain */
	int			(*read_cb)(void *, uint64_t, uint64_t,
				    const char *, size_t); /* deliver_read's */
	void			(*read_done)(void *, ssize_t);
	void			*read_arg;
	struct deliver		*read_feed;
};

void	deliver_init(struct deliver *, const char *id,
	    void (*changed)(void *), void *owner);
/* The session leaves memory: reads of its log end (ops->abort). */
void	deliver_free(struct deliver *);
void	deliver_sub_init(struct deliver_sub *, struct wk *,
	    const struct deliver_ops *, const char *reqid);
/* Its owner is freed: a read or a wait for one ends. */
void	deliver_sub_end(struct deliver_sub *);
void	deliver_subscribe(struct deliver *, struct deliver_sub *);
/* No-op when not subscribed. */
void	deliver_unsubscribe(struct deliver_sub *);
/* Unsubscribes everyone and closes them (ops->close). */
void	deliver_close_all(struct deliver *, uint16_t code, const char *why);
/*
 * Hands n durable events (borrowed: first and the ones after it through
 * ->next, oldest first) to the subscribers, each taking all n before the
 * next one does.
 */
void	deliver_fan_out(struct deliver *, struct evt *first, size_t n);
/* Feeds everyone from the log after a change of owner. */
void	deliver_pump_all(struct deliver *);
/* What subscribers can be given: durable and fanned out. */
uint64_t deliver_last(const struct deliver *);
void	deliver_set_last(struct deliver *, uint64_t);
uint64_t deliver_first(const struct deliver *);
/* Feeds sub from the recent cache or the log until level or full. */
void	deliver_pump(struct deliver_sub *);
/* Pumps subscribers that waited for a catch-up read (wk->read_ev). */
void	deliver_read_wake_cb(evutil_socket_t, short, void *);
/* A resume began reading the log; and it is level with it, or gone. */
void	deliver_replay_begin(struct deliver_sub *);
void	deliver_replay_end(struct deliver_sub *);
/*
 * Reads up to limit events after `after` that subscribers may see, for
 * sub (store_range_async's contract).  done may run inside the call: it
 * finds sub->ranging 1 then, and must set it to 2.
 */
void	deliver_read(struct deliver_sub *, struct deliver *, uint64_t after,
	    size_t limit,
	    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t),
	    void (*done)(void *, ssize_t), void *arg);
/*
 * Sends json (not logged) to the subscribers that are external agent
 * agent's connections (a throttle_warning).
 */
void	deliver_notify(struct deliver *, const char *agent, const char *json);
/* A read of sub's ended; deliver_read_cancel: stop it first. */
void	deliver_read_end(struct deliver_sub *);
void	deliver_read_cancel(struct deliver_sub *);

#endif
