/*
 * The local store backend's internals, shared by its files: store_local.c
 * (the store, sessions, meta, expiry), store_local_v1.c (the v1 text
 * log), store_local_sync.c (BATCH's sync thread) and store_local_doc.c
 * (documents).  Nothing else includes this.
 */
#ifndef PARLEY_STORE_LOCAL_H
#define PARLEY_STORE_LOCAL_H

#include <sys/types.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "parley/store.h"

#define LOCAL_BLOCK	(256u * 1024)		/* read size for scan and range */
#define LOCAL_HDR_MAX	48			/* "<seq> <ts> " worst case */
#define LOCAL_LINE_MAX	(STORE_JSON_MAX + LOCAL_HDR_MAX + 1)

/* The BATCH sync thread; mu guards the fields after it. */
struct local_syncer {
	pthread_t		 thr;
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	int			 want;		/* a sync asked for */
	int			 stop;		/* exit once nothing is asked */
	int			 err;		/* errno of a failed sync, or 0 */
	uint64_t		 done;		/* syncs completed */
};

struct local_store {
	struct store		 base;		/* first: store.c casts */
	int			 sessfd;	/* STATE_DIR/sessions */
	int			 unsynced;	/* closed logs, new dirs */
	int			 syncer_on;	/* thread and syncer initialised */
	int			 nothread_said;
	struct event		*soon_ev;	/* a sync within 200 ms */
	struct local_syncer	 syncer;
};

struct local_sess {
	struct store_sess	 base;		/* first: store.c casts */
	int			 dirfd;
	int			 logfd;
	int			 dirty;		/* appends since last fsync */
	int			 broken;	/* failed write not undone */
	off_t			*idx;		/* [i]: seq first+i; [n]: end */
	size_t			 n;		/* records */
	size_t			 cap;		/* entries allocated in idx */
};

/* store_local.c */
int		 local_nosync(const struct store *);
int		 local_async(const struct store *);
void		 local_path(char *, size_t, const char *, const char *);
int		 local_dir_open(struct local_sess *);
void		 local_dir_close(struct local_sess *);
int		 local_write_full(int, const char *, size_t);
int		 local_replace(int, const char *, const char *, const char *,
		    size_t, int);
char		*local_read_file(int, const char *, size_t, size_t *);

/* store_local_v1.c */
int		 local_scan(struct local_sess *);
int		 local_append(struct store_sess *, uint64_t, uint64_t,
		    const char *, size_t);
int		 local_range(struct store_sess *, uint64_t, size_t,
		    store_range_cb, void *);
int		 local_trim(struct store_sess *, uint64_t);
int		 local_pread_full(int, char *, size_t, off_t);

/* store_local_sync.c */
void		 local_sync(struct store *);
void		 local_sync_soon(struct local_store *);
void		 local_syncfs(struct local_store *);
void		 local_syncer_stop(struct local_store *);

/* store_local_doc.c */
int		 local_doc_put(struct store_sess *, const char *, const char *,
		    size_t);
int		 local_doc_del(struct store_sess *, const char *);
ssize_t		 local_doc_all(struct store_sess *, store_doc_cb, void *);
void		 local_kb_remove(struct local_store *, const char *);

#endif
