/*
 * The local store backend's internals, shared by its files: store_local.c
 * (the store, sessions, expiry), store_local_meta.c (meta slots),
 * store_local_v1.c (the v1 text
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
	uint64_t		 asked;		/* the last kick's ticket */
	uint64_t		 covered;	/* ticket of the last sync done */
};

struct local_store {
	struct store		 base;		/* first: store.c casts */
	int			 sessfd;	/* STATE_DIR/sessions */
	int			 unsynced;	/* closed logs, new dirs */
	int			 syncer_on;	/* thread and syncer initialised */
	int			 nothread_said;
	struct event		*soon_ev;	/* a sync within 200 ms */
	uint64_t		 kicks;		/* syncs asked for (tickets) */
	uint64_t		 covered_inline; /* synced in the loop up to */
	int			 segfd;		/* STATE_DIR/segments */
	int			 seg_otherfs;	/* not the sessions' fs */
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
	/* Meta slots (store_local_meta.c), known once meta_loaded. */
	int			 meta_loaded;
	int			 meta_slot;	/* the newest, or -1: none */
	int			 meta_legacy;	/* a v1 "meta" file is there */
	int			 meta_synced;	/* the newest is on disk */
	int			 meta_exists[2];
	size_t			 meta_size[2];
	uint64_t		 meta_gen;	/* the newest's generation */
	uint64_t		 meta_ticket;	/* local_synced() of the newest */
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

/* store_local_meta.c */
int		 local_meta_write(struct store_sess *, const char *, size_t);
char		*local_meta_read(struct store_sess *);
char		*local_meta_peek(struct store *, const char *);

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
int		 local_synced(struct local_store *, uint64_t);
uint64_t	 local_ticket(const struct local_store *);

/* store_local_doc.c */
int		 local_doc_put(struct store_sess *, const char *, const char *,
		    size_t);
int		 local_doc_del(struct store_sess *, const char *);
ssize_t		 local_doc_all(struct store_sess *, store_doc_cb, void *);
void		 local_kb_remove(struct local_store *, const char *);

#endif
