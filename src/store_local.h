/*
 * The local store backend's internals, shared by its files: store_local.c
 * (the store, sessions, expiry), store_local_meta.c (meta slots),
 * store_local_run.c (the run file; epochs after a machine crash),
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
#include "store_seg.h"

#define LOCAL_BLOCK	(256u * 1024)		/* read size for scan and range */
#define LOCAL_HDR_MAX	48			/* "<seq> <ts> " worst case */
#define LOCAL_LINE_MAX	(STORE_JSON_MAX + LOCAL_HDR_MAX + 1)

#define LOCAL_SEG_MAX	(64u << 20)	/* a segment is sealed past this */
#define LOCAL_GC_MAX	(4u << 20)	/* queued bytes flushed at once */
#define LOCAL_BUF_KEEP	(2 * LOCAL_GC_MAX) /* queue buffer kept past a flush */
#define LOCAL_RD_FDS	8		/* segments kept open for reading */
#define LOCAL_PEND_MAX	4096		/* index entries held per session */
#define LOCAL_IX_MS	1000		/* index entries written within */
#define LOCAL_GC_US	1000		/* a queued write waits at most */
#define LOCAL_META_SLOTS 3		/* meta.0 .. meta.2 */

struct local_sess;

/* A record queued for the next group commit. */
struct local_q {
	struct local_sess	*ls;
	uint64_t		 seq;
	uint64_t		 ts;
	size_t			 off;		/* of its frame in the buffer */
	uint32_t		 len;		/* of its frame */
};

/*
 * The process's segment writer (store_local_seg.c): the active segment,
 * flock()ed while this process writes it, and the queue of the next group
 * commit.
 */
struct local_writer {
	int			 fd;		/* active segment, or -1 */
	uint64_t		 segid;
	off_t			 end;		/* where the next frame goes */
	unsigned char		*buf;		/* frames queued */
	size_t			 blen;
	size_t			 bcap;
	struct local_q		*q;
	size_t			 nq;
	size_t			 qcap;
	struct local_sess	**mq;		/* sessions with a meta queued */
	size_t			 nmq;
	size_t			 mqcap;
	struct event		*flush_ev;	/* made active by the first queued */
	int			 armed;		/* flush_ev is active */
	uint64_t		 gen;		/* flushes so far */
	uint64_t		 first_us;	/* when the oldest queued was */
	uint64_t		 wait_us;	/* LOCAL_GC_US (tests: longer) */
	struct event		*ix_ev;		/* writes held index entries */
	struct {
		uint64_t	 segid;
		int		 fd;
	}			 rd[LOCAL_RD_FDS];	/* read descriptors */
	unsigned		 rd_next;
};

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
	int			 seg_dirty;	/* BATCH: segment bytes unsynced */
	struct local_writer	 w;
	struct local_syncer	 syncer;
	int			 rootfd;	/* STATE_DIR */
	uint32_t		 crashes;	/* the newest machine crash
						   (store_local_run.c) */
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
	int			 meta_dslot;	/* newest known on disk, or -1 */
	int			 meta_exists[LOCAL_META_SLOTS];
	size_t			 meta_size[LOCAL_META_SLOTS];
	uint64_t		 meta_gen;	/* the newest's generation */
	uint64_t		 meta_ticket;	/* local_synced() of the newest */
	/*
	 * Records in segments (store_local_ix.c), when seg is set: the
	 * index file holds first_seq .. first_seq + ix_n - 1, pend the
	 * entries after them (written to segments, not yet to the index),
	 * the writer's queue the rest up to last_seq.
	 */
	int			 seg;
	int			 ixfd;		/* sessions/<id>/index, locked */
	uint64_t		 ix_n;		/* entries in the index file */
	uint64_t		 ix_segid;	/* segment of its last entry */
	struct seg_ient		*pend;
	size_t			 npend;
	size_t			 pcap;
	uint64_t		 pend_us;	/* when pend's first was held */
	uint64_t		 written;	/* last seq in a segment */
	int			 ix_clean;	/* the header says clean */
	uint64_t		 tick_written;	/* written at the last tick */
	size_t			 queued;	/* records in the writer's queue */
	char			*meta_q;	/* a meta write queued */
	size_t			 meta_qlen;
	int			 failed;	/* a group commit failed: EPIPE */
	int			 rep_refs;	/* in group commits reporting */
	int			 zombie;	/* closed while reporting */
	uint64_t		 rep_seq;	/* the seq to report durable */
	uint64_t		 rep_gen;	/* the flush it was last in */
	uint32_t		 crash_seen;	/* the newest crash it has seen */
	char			*epochs;	/* its epochs' text, or NULL */
};

/* store_local_run.c */
int		 local_run_load(struct local_store *);
int		 local_run_begin(struct store *, char *, size_t);
int		 local_run_end(struct store *);
int		 local_epochs_load(struct local_sess *);
int		 local_epochs_check(struct local_sess *, int);
const char	*local_epochs(const struct store_sess *);

/* store_local.c */
int		 local_nosync(const struct store *);
int		 local_async(const struct store *);
void		 local_path(char *, size_t, const char *, const char *);
int		 local_pread_full(int, void *, size_t, off_t);
int		 local_pwrite_full(int, const void *, size_t, off_t);
int		 local_dir_open(struct local_sess *);
void		 local_dir_close(struct local_sess *);
int		 local_write_full(int, const char *, size_t);
int		 local_replace(int, const char *, const char *, const char *,
		    size_t, int);
char		*local_read_file(int, const char *, size_t, size_t *);

void		 local_sess_free(struct local_sess *);

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

/* store_local_seg.c */
int		 local_seg_init(struct local_store *, char *, size_t);
void		 local_seg_close(struct local_store *);
int		 local_seg_attach(struct local_store *);
int		 local_seg_fd(struct local_store *, uint64_t);
int		 local_seg_queue(struct local_sess *, uint64_t, uint64_t,
		    const char *, size_t);
int		 local_seg_flush(struct local_store *);
int		 local_seg_due(struct local_store *);
void		 local_seg_kick(struct local_store *);
int		 local_seg_write_raw(struct local_store *, const void *, size_t,
		    uint64_t *, off_t *);
int		 local_seg_cut(struct local_store *, uint64_t, off_t);
void		 local_seg_forget(struct local_store *, struct local_sess *);
int		 local_seg_queue_meta(struct local_sess *, const char *,
		    size_t);
int		 local_seg_gc(struct local_store *, uint64_t);

/* store_local_ix.c */
int		 local_ix_open(struct local_sess *, int);
int		 local_ix_convert(struct local_sess *);
void		 local_ix_close(struct local_sess *);
int		 local_ix_add(struct local_sess *, const struct seg_ient *, int);
int		 local_ix_flush(struct local_sess *);
int		 local_ix_dirty(struct local_sess *);
void		 local_ix_idle(struct local_sess *);
int		 local_ix_get(struct local_sess *, uint64_t, struct seg_ient *);
int		 local_ix_append(struct store_sess *, uint64_t, uint64_t,
		    const char *, size_t);
int		 local_ix_range(struct store_sess *, uint64_t, size_t,
		    store_range_cb, void *);
int		 local_ix_trim(struct local_sess *, uint64_t);
int		 local_ix_refs(struct local_store *, const char *, uint64_t,
		    uint64_t, uint64_t);

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
