/*
 * Session store: the per-session event log (seq-ordered, append-only) and
 * an opaque meta document, behind a backend-neutral interface.  store.c
 * dispatches through a table of function pointers; store_local.c is the
 * embedded file backend.  All calls block (disk or network).
 */
#ifndef PARLEY_STORE_H
#define PARLEY_STORE_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STORE_ID_MAX	128		/* session id length bound */
#define STORE_JSON_MAX	(16u << 20)	/* one event's json bound */
#define STORE_META_MAX	(4u << 20)	/* meta document bound */

enum store_fsync { STORE_FSYNC_ALWAYS, STORE_FSYNC_BATCH, STORE_FSYNC_NO };

struct store;		/* one per process */
struct store_sess;	/* an open session */

/*
 * url: "local", "redis://..." or "sentinel://..." (store_redis.c).  For
 * local, state_dir is created (mkdir -p, 0750) if missing.  Opening a
 * Redis store checks the URL only.  NULL and a message in err on failure.
 */
struct store	*store_open(const char *url, const char *state_dir,
		    enum store_fsync, char *err, size_t errlen);
/* Syncs and closes every session still open, then frees the store. */
void		 store_close(struct store *);
/* 1 if id is 1..128 chars of [A-Za-z0-9._:-] not starting with '.'. */
int		 store_valid_id(const char *id);
/*
 * 1 when retention never trims nor expires the session: a project's
 * knowledge graph ("kg:" ids, parley-knowledge(7)) is not session chatter.
 */
int		 store_retained(const char *id);
/* Local: 1 if the session has a directory with a meta or a log. */
int		 store_exists(struct store *, const char *id);
/* File descriptors an open session holds (a worker budgets them). */
int		 store_sess_fds(const struct store *);

/*
 * Opens (create=1: creating if absent) a session for writing.  0 ok; -1
 * with errno: ENOENT absent and create=0, EINVAL bad id, EBUSY already
 * open in this process or locked by another, others from the OS.
 */
int		 store_sess_open(struct store *, const char *id, int create,
		    struct store_sess **out);
/* Frees the session; its unsynced appends go with the next store_sync(). */
void		 store_sess_close(struct store_sess *);
const char	*store_sess_id(const struct store_sess *);
/* The open session with that id in this process, or NULL. */
struct store_sess *store_sess_find(struct store *, const char *id);
uint64_t	 store_last_seq(const struct store_sess *);	/* 0 when empty */
/* seq of the oldest retained record; last+1 when empty. */
uint64_t	 store_first_seq(const struct store_sess *);

/*
 * Appends one event; seq must be last+1 (else -1, errno EINVAL: the
 * fencing rule).  json: 1..STORE_JSON_MAX bytes, no '\n', '\r' or NUL
 * (EINVAL; EMSGSIZE when too long).  0 once written (and fsynced when
 * ALWAYS).  On a failed write nothing of the record is left in the log.
 */
int		 store_append(struct store_sess *, uint64_t seq, uint64_t ts_ms,
		    const char *json, size_t len);

/*
 * Calls cb for each record with seq > after, in order, at most limit
 * records (0 = no limit).  json is NUL-terminated and valid only during
 * the call.  cb returns 0 to continue, non-zero to stop (that record
 * counts as delivered).  Returns records delivered, or -1 on I/O error
 * (EIO if the log no longer matches the index).
 */
typedef int (*store_range_cb)(void *arg, uint64_t seq, uint64_t ts_ms,
		    const char *json, size_t len);
int		 store_range(struct store_sess *, uint64_t after, size_t limit,
		    store_range_cb cb, void *arg);

/*
 * Meta: opaque JSON text up to STORE_META_MAX bytes, no NUL.  Replaced
 * atomically.  Reads return malloc'd NUL-terminated text, or NULL with
 * errno (ENOENT if none).
 */
int		 store_meta_write(struct store_sess *, const char *json,
		    size_t len);
char		*store_meta_read(struct store_sess *);
/* Reads a session's meta without opening the session. */
char		*store_meta_peek(struct store *, const char *id);

/*
 * BATCH: makes every append so far durable.  The local store starts the
 * sync on a thread and returns; store_close() waits for it.
 */
void		 store_sync(struct store *);
/*
 * Retention: drops records with ts_ms < cutoff_ms from the front of the
 * log, never the newest one.  Returns records dropped, or -1.
 */
int		 store_trim(struct store_sess *, uint64_t cutoff_ms);
/*
 * Deletes sessions not open anywhere whose log and meta were last
 * modified before cutoff_ms.  Returns how many were removed.
 */
int		 store_expire(struct store *, uint64_t cutoff_ms);

/* --- Asynchronous use, in a worker (both backends) ---
 *
 * A worker calls store_attach() once after store_open(); from then on it
 * uses the calls below, which never block.  Every callback is called
 * exactly once and may be called before the call that started it returns
 * (the local backend completes everything at once): callers must be ready
 * for that.  The Redis backend runs on the worker's libevent base through
 * hiredis's async API; its model is in store_redis.c.
 */
struct event_base;
struct store_req;		/* a pending asynchronous request */

enum store_role { STORE_OWNER = 1, STORE_FOLLOWER = 2 };

/* What a backend reports without being asked; arg is store_params.arg. */
struct store_events {
	/* Owner: every append and meta write up to and including the
	 * append of seq is durable (in order; one call may cover many; a
	 * meta write is reported with the seq it followed, so a seq may
	 * repeat). */
	void	(*durable)(void *arg, struct store_sess *, uint64_t seq);
	/* Owner: a write of this session failed.  err ESTALE: fenced
	 * (another process owns the session now); EIO: the store is
	 * unreachable or answered an error.  Writes not yet reported
	 * durable never will be; the backend accepts no more writes on this
	 * handle (EPIPE) and the user must close it. */
	void	(*failed)(void *arg, struct store_sess *, int err);
	/* Follower: the log now ends at last (last > store_last_seq()
	 * before the call; store_last_seq() returns last during it). */
	void	(*grown)(void *arg, struct store_sess *, uint64_t last);
	/* Owner: one message a follower posted with store_post(), in the
	 * order posted.  Each is delivered at least once per owner: the
	 * user drops repeats by the message's id.  json is NUL-terminated
	 * and valid only during the call. */
	void	(*input)(void *arg, struct store_sess *, const char *json,
		    size_t len);
	/* Follower: the owner's lease lapsed; store_promote() may win it. */
	void	(*vacant)(void *arg, struct store_sess *);
	/* The store became reachable (up 1) or unreachable (up 0). */
	void	(*health)(void *arg, int up);
};

struct store_params {
	struct event_base	*base;
	/* This process's name in leases: "<host-id>/<pid>". */
	const char		*node;
	unsigned		 lease_ms;	/* ownership lease (redis) */
	uint64_t		 retention_ms;	/* keys expire after (redis) */
	/* Redis: after each write a WAIT for this many replicas (0: none)
	 * for at most wait_ms; a write is durable only once they answer. */
	unsigned		 wait_replicas;
	unsigned		 wait_ms;
	const struct store_events *ev;
	void			*arg;
};

/* Goes asynchronous on params->base.  0, or -1 with a message in err. */
int		 store_attach(struct store *, const struct store_params *,
		    char *err, size_t errlen);
/* 1 when the store is reachable (always 1 for local). */
int		 store_healthy(struct store *);
/*
 * Synchronous reachability check with a deadline, for the supervisor at
 * start-up and `parleyd -t`.  0, or -1 with a message in err.
 */
int		 store_ping(struct store *, unsigned timeout_ms, char *err,
		    size_t errlen);

/*
 * Opens a session: as its owner when this process can hold the lease,
 * else (redis only) as a follower.  err: 0; ENOENT absent and create=0;
 * EBUSY local session locked by another process; EIO store unreachable;
 * EINVAL bad id.  On success, store_last_seq/first_seq are valid and
 * store_meta_read() answers at once from what the open loaded.  tail:
 * the open also caches the last `tail` records, so store_range() over
 * them answers synchronously.
 */
typedef void (*store_open_cb)(void *arg, int err, struct store_sess *,
		    enum store_role);
void		 store_open_async(struct store *, const char *id, int create,
		    size_t tail, store_open_cb, void *arg);
enum store_role	 store_role(const struct store_sess *);
/*
 * The log's epochs (parley/epoch.h's text form; "" for a log never
 * rewritten), as of the open (owner) or the last resync (follower).
 * Redis starts one when a session is taken after a failover (its
 * previous owners may have acknowledged events that were lost).  A backend that can cut a log's tail (the local
 * store at open, after a crash) reports it here too: it sets the ops'
 * epochs and keeps the list with the log.
 */
const char	*store_epochs(const struct store_sess *);
/*
 * parleyd's supervisor, once before its workers start and once after the
 * last one is gone on a clean stop.  The local store tells from them
 * whether the machine crashed while parleyd ran (its page cache, with the
 * last acknowledged appends, then lost): each session written before
 * starts a new epoch at its next open (store_local_run.c).  0, or -1
 * (begin: a message in err; end: errno, the run counts as not clean).
 */
int		 store_run_begin(struct store *, char *err, size_t errlen);
int		 store_run_end(struct store *);
/* A follower: read the log's state again soon (a client named an epoch
 * it does not know yet).  Does nothing where there is nothing to read. */
void		 store_resync(struct store_sess *);
/*
 * Owner: 1 when the session's queue of writes is near its bound (Redis:
 * RS_QUEUE_RECS records), so that a writer that can wait (a turn's
 * tokens, which coalesce) holds back and leaves room for the events that
 * cannot (a turn's end, a tool call).  0 for a backend without a bound.
 */
int		 store_congested(const struct store_sess *);

/*
 * Owner: queues an append (same checks as store_append).  0 queued:
 * durable or failed is reported later (local: durable before this
 * returns); -1 with errno when refused at once (EINVAL not last+1,
 * EPIPE handle failed, EAGAIN too many writes pending: the user says
 * OVERLOADED).  store_last_seq() counts queued appends.
 */
int		 store_append_async(struct store_sess *, uint64_t seq,
		    uint64_t ts_ms, const char *json, size_t len);
/* Owner: queues a meta replacement, ordered with the appends. */
int		 store_meta_write_async(struct store_sess *, const char *json,
		    size_t len);
/* Highest seq reported durable (owner), or the last seq seen (follower). */
uint64_t	 store_durable_seq(const struct store_sess *);

/*
 * Reads records after `after` (at most limit; 0 = no limit) into cb, then
 * calls done with the count delivered or -1 and errno set.  Returns the
 * request, or NULL when it completed before returning (cb and done were
 * already called).  Records not yet durable are never read.
 */
typedef void (*store_done_cb)(void *arg, ssize_t n);
struct store_req *store_range_async(struct store_sess *, uint64_t after,
		    size_t limit, store_range_cb cb, store_done_cb done,
		    void *arg);
/* Cancels a pending request: neither of its callbacks is called.  (A
 * backend's request struct begins with its struct store pointer.) */
void		 store_req_cancel(struct store_req *);
/*
 * Makes records after `after` readable synchronously by store_range()
 * (redis: fetched into the session's cache, up to STORE_CACHE_MAX bytes),
 * then calls done with the records fetched, or -1 (EFBIG: more than fits,
 * EIO).  Local: done at once.  Redis's synchronous store_range() answers
 * -1 EAGAIN for a range it does not hold in full; store_trim() returns 0
 * and trims in the background.
 */
#define STORE_CACHE_MAX	(64u << 20)
struct store_req *store_preload_async(struct store_sess *, uint64_t after,
		    store_done_cb done, void *arg);

/*
 * Follower: posts one input message to the owner's inbox.  done(arg, 0)
 * once it is stored, or -1 (errno EIO): it was not.  Local: ENOTSUP.
 */
struct store_req *store_post(struct store_sess *, const char *json,
		    size_t len, store_done_cb done, void *arg);
/*
 * Follower: tries to take the lease.  done(arg, 0): this handle is now the
 * owner (meta re-read, last seq current; input from the inbox follows);
 * -1 errno EBUSY: still owned elsewhere; EIO.
 */
struct store_req *store_promote(struct store_sess *, store_done_cb done,
		    void *arg);

/*
 * A session's named documents (its knowledge base, workers/kb.c): each
 * an opaque JSON text of 1..STORE_DOC_MAX bytes (no NUL) under a name
 * that passes store_valid_id().  They live and expire with the session:
 * local, files STATE_DIR/sessions/<id>/kb/<name> (tmp + rename; synced
 * as the meta is), removed with the session; Redis, one hash per
 * session beside its keys (same hash tag), its TTL refreshed with the
 * session's.  Writes owner only (EPERM otherwise); store_doc_all a
 * follower's too (it answers kb_search itself).  Like the other async
 * calls: callbacks exactly once, maybe before the call returns; NULL
 * when it completed at once.  Refused arguments: done(-1) at once with
 * EINVAL (bad name, empty, a NUL) or EMSGSIZE (too long); a store that
 * failed answers -1 with EIO (ESTALE: fenced, another process owns the
 * session now; EPIPE: the handle failed before; EAGAIN: too many writes
 * pending, the user says OVERLOADED).
 */
#define STORE_DOC_MAX	(32u << 20)
struct store_req *store_doc_put(struct store_sess *, const char *name,
		    const char *json, size_t len, store_done_cb done,
		    void *arg);
/* done n: 1 removed, 0 absent. */
struct store_req *store_doc_del(struct store_sess *, const char *name,
		    store_done_cb done, void *arg);
/*
 * Calls cb for every document, in no particular order (json is
 * NUL-terminated and valid only during the call; cb returns non-zero to
 * stop, that document counting as read), then done with the count read.
 */
typedef int (*store_doc_cb)(void *arg, const char *name,
		    const char *json, size_t len);
struct store_req *store_doc_all(struct store_sess *, store_doc_cb cb,
		    store_done_cb done, void *arg);

/*
 * Backend interface: for store.c and store_*.c only.  A backend embeds
 * struct store / struct store_sess as the first member of its own state.
 */
struct store_ops {
	const char	*scheme;	/* url is "scheme" or "scheme:..." */
	struct store	*(*open)(const char *url, const char *state_dir,
			    enum store_fsync, char *err, size_t errlen);
	void		 (*close)(struct store *);
	int		 (*exists)(struct store *, const char *id);
	/* Returns a zeroed-then-filled session; store.c links it in. */
	int		 (*sess_open)(struct store *, const char *id,
			    int create, struct store_sess **);
	void		 (*sess_close)(struct store_sess *);
	int		 (*append)(struct store_sess *, uint64_t, uint64_t,
			    const char *, size_t);
	int		 (*range)(struct store_sess *, uint64_t, size_t,
			    store_range_cb, void *);
	int		 (*meta_write)(struct store_sess *, const char *,
			    size_t);
	char		*(*meta_read)(struct store_sess *);
	char		*(*meta_peek)(struct store *, const char *);
	void		 (*sync)(struct store *);
	int		 (*trim)(struct store_sess *, uint64_t);
	int		 (*expire)(struct store *, uint64_t);
	/*
	 * Asynchronous operations.  A backend that leaves them NULL is
	 * synchronous: store.c runs the calls above and completes at once.
	 * A backend that sets them gets only checked arguments, and must
	 * link the sessions it opens with store_sess_link().
	 */
	int		 (*attach)(struct store *, char *, size_t);
	int		 (*healthy)(struct store *);
	int		 (*ping)(struct store *, unsigned, char *, size_t);
	void		 (*open_async)(struct store *, const char *, int,
			    size_t, store_open_cb, void *);
	int		 (*append_async)(struct store_sess *, uint64_t,
			    uint64_t, const char *, size_t);
	int		 (*meta_write_async)(struct store_sess *,
			    const char *, size_t);
	struct store_req *(*range_async)(struct store_sess *, uint64_t,
			    size_t, store_range_cb, store_done_cb, void *);
	struct store_req *(*preload_async)(struct store_sess *, uint64_t,
			    store_done_cb, void *);
	void		 (*req_cancel)(struct store_req *);
	struct store_req *(*post)(struct store_sess *, const char *, size_t,
			    store_done_cb, void *);
	struct store_req *(*promote)(struct store_sess *, store_done_cb,
			    void *);
	/*
	 * Documents, checked arguments.  A synchronous backend sets the
	 * first three (put 0, del 1 or 0, all the count, or -1/errno); an
	 * asynchronous one the last three.
	 */
	int		 (*doc_put)(struct store_sess *, const char *,
			    const char *, size_t);
	int		 (*doc_del)(struct store_sess *, const char *);
	ssize_t		 (*doc_all)(struct store_sess *, store_doc_cb,
			    void *);
	struct store_req *(*doc_put_async)(struct store_sess *, const char *,
			    const char *, size_t, store_done_cb, void *);
	struct store_req *(*doc_del_async)(struct store_sess *, const char *,
			    store_done_cb, void *);
	struct store_req *(*doc_all_async)(struct store_sess *, store_doc_cb,
			    store_done_cb, void *);
	/* The log's epochs; NULL: never rewritten (""). */
	const char	*(*epochs)(const struct store_sess *);
	/* A follower reads the log's state (epochs too) again; NULL: its
	 * state is always current. */
	void		 (*resync)(struct store_sess *);
	/* store_congested(); NULL: never. */
	int		 (*congested)(const struct store_sess *);
	/* store_run_begin() and store_run_end(); NULL: nothing to do. */
	int		 (*run_begin)(struct store *, char *, size_t);
	int		 (*run_end)(struct store *);
};

struct store_sess {
	LIST_ENTRY(store_sess)	 entry;
	struct store		*store;
	uint64_t		 first_seq;	/* maintained by the backend */
	uint64_t		 last_seq;	/* incl. queued appends */
	uint64_t		 durable_seq;	/* async backends */
	enum store_role		 role;
	void			*udata;		/* the user's, untouched */
	char			 id[STORE_ID_MAX + 1];
};

struct store {
	const struct store_ops	*ops;
	enum store_fsync	 fsync;
	LIST_HEAD(, store_sess)	 sessions;
	struct store_params	 params;	/* set by store_attach */
	int			 attached;
};

/* For async backends: links a session they opened (id already set). */
void		 store_sess_link(struct store *, struct store_sess *);

extern const struct store_ops store_local_ops;
extern const struct store_ops store_redis_ops;
extern const struct store_ops store_sentinel_ops;
extern const struct store_ops store_cluster_ops;

#endif
