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

#define STORE_ID_MAX	128		/* session id length bound */
#define STORE_JSON_MAX	(16u << 20)	/* one event's json bound */
#define STORE_META_MAX	(4u << 20)	/* meta document bound */

enum store_fsync { STORE_FSYNC_ALWAYS, STORE_FSYNC_BATCH, STORE_FSYNC_NO };

struct store;		/* one per process */
struct store_sess;	/* an open session */

/*
 * url: "local" (only backend for now).  state_dir is created (mkdir -p,
 * 0750) if missing.  NULL and a message in err on failure.
 */
struct store	*store_open(const char *url, const char *state_dir,
		    enum store_fsync, char *err, size_t errlen);
/* Syncs and closes every session still open, then frees the store. */
void		 store_close(struct store *);
/* 1 if id is 1..128 chars of [A-Za-z0-9._:-] not starting with '.'. */
int		 store_valid_id(const char *id);
/* 1 if the session has a directory with a meta or a log. */
int		 store_exists(struct store *, const char *id);

/*
 * Opens (create=1: creating if absent) a session for writing.  0 ok; -1
 * with errno: ENOENT absent and create=0, EINVAL bad id, EBUSY already
 * open in this process or locked by another, others from the OS.
 */
int		 store_sess_open(struct store *, const char *id, int create,
		    struct store_sess **out);
/* Syncs pending appends (unless fsync no) and frees the session. */
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

/* fsyncs every session log with appends since the last sync (BATCH). */
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
};

struct store_sess {
	LIST_ENTRY(store_sess)	 entry;
	struct store		*store;
	uint64_t		 first_seq;	/* maintained by the backend */
	uint64_t		 last_seq;
	char			 id[STORE_ID_MAX + 1];
};

struct store {
	const struct store_ops	*ops;
	enum store_fsync	 fsync;
	LIST_HEAD(, store_sess)	 sessions;
};

extern const struct store_ops store_local_ops;

#endif
