/*
 * The Redis store backend's internals, shared by its files (each one's
 * job is in store_redis.c's first comment): store_redis.c (the ops, the
 * store's life, dispatch, the tick), store_redis_link.c (connections,
 * commands), store_redis_lease.c (a session's open and lease),
 * store_redis_inbox.c (follower resync, the inbox), store_redis_feed.c
 * (when to resync: subscriptions, the safety net, owners' heartbeats),
 * store_redis_log.c (the log, its cache, writes), store_redis_doc.c (a
 * session's documents) and store_redis_cluster.c (routing on a Redis
 * Cluster).  Nothing else includes this.
 */
#ifndef PARLEY_STORE_REDIS_H
#define PARLEY_STORE_REDIS_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdint.h>

#include <event2/util.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "parley/epoch.h"
#include "parley/store.h"

#define RS_HOSTS_MAX	16		/* sentinels in one url */
#define RS_HOST_MAX	255
#define RS_PASS_MAX	512
#define RS_NAME_MAX	128		/* sentinel master name */
#define RS_DB_MAX	65535
#define RS_NODE_MAX	256		/* "<host-id>/<pid>" */
#define RS_TOKEN_MAX	(RS_NODE_MAX + 24)	/* "<node>#<fence>" */
#define RS_KEY_MAX	(STORE_ID_MAX + 32)
#define RS_SID_MAX	48		/* a stream entry id "<ms>-<n>" */
#define RS_NUMLEN	24		/* a formatted uint64_t */

#define RS_DEADLINE_MS	5000		/* one command */
#define RS_CONNECT_MS	3000		/* connect and handshake */
#define RS_BACKOFF_MIN	100
#define RS_BACKOFF_MAX	2000
#define RS_TICK_MS	100
#define RS_POLL_MS	30000		/* each session resynced at least this
					   often: pub/sub's safety net */
#define RS_WATCH_MS	1000		/* Sentinel's master, the cluster's map */
#define RS_NODES_MAX	4096		/* processes a store keeps track of */
#define RS_NODE_BUCKETS	256		/* their hash table */
#define RS_NODES_CHAN	"parley:nodes"	/* heartbeats: node names */
#define RS_HB_GRACE_MS	(2 * RS_TICK_MS)	/* a lease + this: quiet */
#define RS_LEASE_MIN	1000		/* renewed every lease/3 on a tick */

#define RS_BATCH_RECS	256		/* records in one append call */
#define RS_BATCH_BYTES	(1u << 20)
#define RS_INFLIGHT	4		/* batches of one session in flight */
#define RS_QUEUE_RECS	16384		/* queued + in flight, per session */
#define RS_QUEUE_BYTES	(64u << 20)
#define RS_CONGEST_RECS	256		/* room kept for what cannot wait */
#define RS_CONGEST_BYTES (1u << 20)
#define RS_CACHE_RECS	4096		/* default cache bound, per session */
#define RS_CACHE_BYTES	(8u << 20)
#define RS_PRELOAD_RECS	(1u << 20)	/* once preloaded (and CACHE_MAX) */
#define RS_CHUNK	1000		/* XRANGE COUNT, at most */
#define RS_FETCH_FIRST	100		/* before the record size is known */
#define RS_FETCH_BYTES	(4u << 20)	/* what one XRANGE reply aims at */
#define RS_INBOX_CHUNK	128
#define RS_INBOX_MAXLEN	"10000"		/* XADD MAXLEN ~: the inbox bound */
/*
 * An owner's writes renew its keys' TTL at most once per retention/8, at
 * most once a minute (the renewal is most of a small batch's cost), and
 * the TTL is the retention plus that interval, so no key expires sooner
 * than the retention after the last event that was sent.
 */
#define RS_TTL_EVERY_DIV 8
#define RS_TTL_EVERY_MAX 60000		/* ms */

/*
 * Lua: gives key k the TTL r (ms), or none when r is "keep": a session
 * retention does not expire (store_retained(), a project's knowledge).
 * r is never '' here: the scripts that may skip the renewal test it.
 */
#define RS_TTL(k, r) "if " r " == 'keep' then redis.call('PERSIST', " k \
	") else redis.call('PEXPIRE', " k ", " r ") end\n"

#define RS_KEEP_CHAN	"parley:-keep"	/* never a session's channel */

/* Lua scripts; rs_scripts[] is indexed by these. */
enum { SC_APPEND, SC_META, SC_RENEW, SC_ACQUIRE, SC_RELEASE, SC_PEEK,
    SC_POST, SC_TRIM, SC_DOCPUT, SC_DOCDEL, SC_DURABLE, SC_COUNT };
/* The session's keys a script that refreshes their TTL is given. */
#define RS_SKEYS	6

enum rs_link { LINK_DOWN, LINK_CONNECTING, LINK_UP };

/* What a command's reply is for. */
enum rs_kind {
	RC_HS,		/* handshake step */
	RC_FIRE,	/* nobody waits (release) */
	RC_SENTINEL,	/* get-master-addr-by-name */
	RC_ACQUIRE,
	RC_PEEK,	/* follower open */
	RC_POLL,	/* follower resync */
	RC_FETCH,	/* XRANGE of the log */
	RC_BATCH,	/* append or meta write */
	RC_RENEW,
	RC_INBOX,
	RC_POST,
	RC_TRIM_SCAN,
	RC_TRIM,
	RC_DOC,		/* a document command (store_redis_doc.c) */
	RC_SLOTS,	/* CLUSTER SLOTS (store_redis_cluster.c) */
	RC_WAIT		/* WAIT after a batch (store-wait) */
};

enum rs_hs { HS_AUTH, HS_SELECT, HS_ROLE, HS_SCRIPT };

enum rs_reqkind { REQ_RANGE, REQ_PRELOAD, REQ_POST, REQ_PROMOTE,
    REQ_DOC };

struct rhost {
	char			 host[RS_HOST_MAX + 1];
	int			 port;
};

/* One log record; json is NUL-terminated. */
struct rrec {
	uint64_t		 seq;
	uint64_t		 ts;
	size_t			 len;
	char			 json[];
};

/* Contiguous run of records, a ring: v[(head + i) & (cap - 1)]. */
struct rcache {
	struct rrec		**v;
	size_t			 head;
	size_t			 n;
	size_t			 cap;		/* 0 or a power of two */
	size_t			 bytes;
};

/* A queued write: an append (rec) or a meta replacement (doc). */
struct wop {
	TAILQ_ENTRY(wop)	 entry;
	struct rrec		*rec;
	char			*doc;
	size_t			 doclen;
};
TAILQ_HEAD(wopq, wop);

/* Writes sent in one script call; owned by its rcmd. */
struct wbatch {
	TAILQ_ENTRY(wbatch)	 entry;		/* s->inflight */
	struct wopq		 ops;
	uint64_t		 prev;		/* the log must end here */
	uint64_t		 last;		/* and ends here after */
	size_t			 nrec;
	size_t			 bytes;
	int			 meta;
	int			 orphan;	/* off s->inflight: ignore */
	int			 landed;	/* in the log, WAIT pending */
	int			 waited;	/* WAIT answered, an earlier
						 * batch's not: the session
						 * owns it, not an rcmd */
	char			 inpos[RS_SID_MAX];
};

struct rstore;
struct rsess;
struct rclu;
struct rdocs;
struct rdocw;

/* A process heard of: its heartbeat, the sessions this follows that it
 * owns (store_redis_feed.c). */
struct rnode {
	LIST_ENTRY(rnode)	 entry;		/* st->nodes[hash] */
	TAILQ_HEAD(, rsess)	 sess;		/* its sessions this follows */
	size_t			 nsess;
	uint64_t		 seen;		/* its last heartbeat, mono ms */
	uint64_t		 next_check;	/* when quiet: next read */
	int			 nobody;	/* st->nobody: no owner */
	char			 name[RS_NODE_MAX + 1];
};

struct rreq {
	struct store		*st;		/* first: store.c reads it */
	LIST_ENTRY(rreq)	 entry;		/* s->reqs while alive */
	struct rsess		*s;		/* holds a reference */
	int			 refs;
	enum rs_reqkind		 kind;
	int			 dead;		/* done, cancelled or closed */
	int			 toobig;	/* preload over the bound */
	int			 stop;	/* range: cb or limit stopped it */
	store_range_cb		 cb;
	store_done_cb		 done;
	void			*arg;
	uint64_t		 next;		/* next seq to read */
	uint64_t		 end;		/* last seq to read */
	size_t			 limit;		/* 0: all */
	size_t			 count;		/* delivered or fetched */
	struct rcache		 tmp;		/* preload: not merged yet */
	struct rdocs		*docs;		/* store_doc_all's state */
};

struct rsess {
	struct store_sess	 base;		/* first: store.c casts */
	struct rstore		*st;
	int			 refs;
	int			 closed;	/* closed, or its open failed */
	int			 linked;	/* on st->base.sessions */
	int			 failed;	/* errno reported by failed() */
	/* opening (on st->opening until linked) */
	LIST_ENTRY(rsess)	 oentry;
	int			 opening;
	int			 parked;	/* waiting for the link */
	int			 create;
	int			 forced;	/* takeover already tried */
	uint64_t		 open_deadline;
	store_open_cb		 open_cb;
	void			*open_arg;
	size_t			 tail;
	uint64_t		 fill_next;	/* cache fill in progress */
	uint64_t		 fill_end;
	struct rreq		*promoting;	/* lease won, filling */
	/* lease */
	char			 token[RS_TOKEN_MAX];
	uint64_t		 lease_from;	/* send time of last renewal */
	unsigned		 lease_gen; /* bumped when the token changes */
	int			 renewing;
	/* the log's epochs (parley/epoch.h text), from acquire or peek */
	char			 epochs[EPOCH_TEXT_MAX];
	/* meta (the latest written, queued or not) */
	char			*doc;
	size_t			 doclen;
	/* writes */
	struct wopq		 wq;
	size_t			 wq_recs;	/* queued + in flight */
	size_t			 wq_bytes;
	TAILQ_HEAD(, wbatch)	 inflight;
	int			 ninflight;
	/* Batches being sent again (NOSCRIPT, a cluster redirection): the
	 * session's later writes wait for them. */
	int			 noscript;
	uint64_t		 sent_seq;	/* last seq sent (or durable) */
	/* The next write renews the keys' TTL (the log may be new since the
	 * acquire's), and, without store-wait, drops an earlier owner's
	 * 'durable' mark; set by an acquire and a repair. */
	int			 ttl_due;
	int			 mark_due;
	uint64_t		 ttl_at;	/* when a write last renewed it */
	int			 dirty;		/* on st->dirty */
	TAILQ_ENTRY(rsess)	 dentry;
	/* inbox (owner) */
	char			 in_cursor[RS_SID_MAX];	/* last delivered */
	char			 inpos_next[RS_SID_MAX]; /* for appends */
	char			 inpos_landed[RS_SID_MAX]; /* by a batch */
	int			 inbox_busy;
	int			 inbox_again;
	/* the feed (store_redis_feed.c) */
	TAILQ_ENTRY(rsess)	 rentry;		/* st->ring */
	int			 inring;
	struct rnode		*node;		/* follower: its owner's */
	TAILQ_ENTRY(rsess)	 nentry;		/* node->sess */
	/* follower */
	int			 polling;
	uint64_t		 poll_from;	/* last_seq when it was sent */
	int			 vacant;	/* vacant() reported */
	int			 trimming;
	size_t			 avg_rec; /* bytes per record, 0: unknown */
	/* keys */
	char			 k_log[RS_KEY_MAX];
	char			 k_meta[RS_KEY_MAX];
	char			 k_owner[RS_KEY_MAX];
	char			 k_fence[RS_KEY_MAX];
	char			 k_in[RS_KEY_MAX];
	char			 k_kb[RS_KEY_MAX];
	char			 ch_ev[RS_KEY_MAX];
	char			 ch_in[RS_KEY_MAX];
	unsigned		 slot;		/* the keys' cluster slot */
	/* cache */
	struct rcache		 cache;
	size_t			 cmax_recs;
	size_t			 cmax_bytes;
	LIST_HEAD(, rreq)	 reqs;
};

struct rconn {
	redisAsyncContext	*ac;
	int			 connected;	/* onConnect(OK) seen */
	uint64_t		 nsent;		/* commands sent on it */
	struct rcmd		*wait;		/* its last WAIT, unanswered */
};

struct rcmd {
	TAILQ_ENTRY(rcmd)	 entry;		/* st->inflight */
	struct rstore		*st;
	struct rsess		*s;		/* holds a reference */
	struct rreq		*req;		/* holds a reference */
	struct wbatch		*b;		/* owned */
	enum rs_kind		 kind;
	int			 tracked;	/* on st->inflight */
	struct rconn		*conn;		/* sent on */
	int			 script;	/* SC_*, or -1 */
	int			 retried;	/* re-sent after NOSCRIPT */
	int			 slot;	/* cluster slot, -1: the session's */
	int			 asked;		/* re-sent after ASK */
	int			 tries;		/* re-sent after TRYAGAIN */
	unsigned		 epoch;		/* st->epoch when sent */
	char			*fmt;		/* for a NOSCRIPT retry */
	size_t			 fmtlen;
	uint64_t		 sent;		/* mono ms */
	uint64_t		 started;	/* the reply before it on its
						 * connection came (0: none) */
	uint64_t		 u1;		/* kind-specific */
	uint64_t		 u2;
	size_t			 count;		/* XRANGE COUNT sent */
	uint64_t		 no;		/* conn->nsent when sent */
	/* A WAIT sent after this one's batch ran covers it: it rides on
	 * that WAIT (rs_wait_send), not sent itself; the riders of a WAIT
	 * that was sent. */
	struct rcmd		*riders;
	struct rcmd		*rnext;
};

struct rstore {
	struct store		 base;		/* first: store.c casts */
	/* from the url */
	int			 sentinel;
	int			 cluster;	/* hosts are the seeds */
	struct rclu		*clu;		/* store_redis_cluster.c */
	char			*pass;		/* NULL: no AUTH */
	int			 db;
	char			 name[RS_NAME_MAX + 1];
	struct rhost		 hosts[RS_HOSTS_MAX];
	size_t			 nhosts;
	char			 chsuffix[8];	/* ":<db>" or "" */
	/* from store_attach */
	struct event_base	*evbase;
	const struct store_events *ev;
	void			*arg;
	char			 node[RS_NODE_MAX + 1];
	size_t			 hostlen;	/* node's "<host-id>" part */
	unsigned		 lease_ms;
	char			 lease_s[RS_NUMLEN];
	char			 retention_s[RS_NUMLEN]; /* + ttl_every */
	uint64_t		 ttl_every;	/* ms between TTL renewals */
	unsigned		 wait_n;	/* WAIT for replicas, 0: off */
	unsigned		 wait_ms;
	unsigned		 deadline_ms;	/* tests shorten these */
	unsigned		 connect_ms;
	unsigned		 poll_ms;
	/* state */
	int			 refs;
	int			 closing;
	int			 live;		/* attached */
	enum rs_link		 link;
	unsigned		 epoch;		/* one per connect attempt */
	int			 health;	/* last reported, -1 none */
	struct rconn		 cmd;
	struct rconn		 sub;
	struct rconn		 sen;
	int			 hs_cmd;	/* handshake replies awaited */
	int			 hs_sub;
	int			 hs_cmd_sent;
	int			 hs_sub_sent;
	int			 keep_seen;	/* RS_KEEP_CHAN confirmed */
	size_t			 sen_idx;	/* sentinel to ask next */
	size_t			 sen_tried;
	int			 sen_answered; /* this attempt's master known */
	int			 sen_busy;	/* connecting or asking */
	uint64_t		 sen_sent;	/* since when */
	struct rhost		 master;	/* address in use */
	unsigned		 backoff;
	char			 sha[SC_COUNT][41];
	TAILQ_HEAD(, rcmd)	 inflight;	/* command conn, oldest first */
	TAILQ_HEAD(, rsess)	 dirty;		/* writes to send */
	TAILQ_HEAD(, rdocw)	 docq;		/* document writes held back */
	size_t			 docq_bytes;
	size_t			 doc_bytes;	/* document writes in flight */
	LIST_HEAD(, rsess)	 opening;
	int			 flush_pending;
	uint64_t		 next_renew;
	uint64_t		 last_tick;	/* when rs_tick last ran */
	uint64_t		 next_watch;	/* sentinel, cluster map */
	/* the feed (store_redis_feed.c) */
	TAILQ_HEAD(, rsess)	 ring;		/* linked sessions, next first */
	size_t			 nring;
	uint64_t		 credit;	/* ring: ms x sessions not read */
	uint64_t		 ring_at;	/* last ring step */
	LIST_HEAD(, rnode)	 nodes[RS_NODE_BUCKETS];
	size_t			 nnodes;
	uint64_t		 up_at;		/* the link last came up */
	struct rnode		 nobody;	/* sessions with no owner */
	char			 ch_nodes[RS_KEY_MAX];
	struct event		*ev_tick;
	struct event		*ev_retry;
	struct event		*ev_timeout;
	struct event		*ev_flush;
	struct event		*ev_kill;
	char			 lasterr[512];
};

/* Arguments of one command, with room for formatted numbers. */
#define RS_ARGS_INLINE	32
struct rargs {
	const char		**v;
	size_t			*len;
	char			*num;
	int			 n;
	int			 cap;
	int			 nnum;
	int			 numcap;
	int			 oom;
	const char		*iv[RS_ARGS_INLINE];
	size_t			 ilen[RS_ARGS_INLINE];
	char			 inum[8 * RS_NUMLEN];
};

/* Walked by rs_entries(): one record of the log; non-zero stops the walk. */
typedef int (*rs_entry_fn)(void *, uint64_t, uint64_t, const char *,
    size_t);

/* store_redis.c */
extern const char *const rs_scripts[SC_COUNT];
/* The TTL a session's keys get: the retention plus the renewal
 * interval, or "keep" (RS_TTL). */
const char	*rs_retention(const struct rsess *);
void		 rs_store_ref(struct rstore *);
void		 rs_store_unref(struct rstore *);
void		 rs_sess_ref(struct rsess *);
void		 rs_sess_unref(struct rsess *);
/* A command for s and req (each referenced while it lives), or NULL. */
struct rcmd	*rs_cmd_new(struct rstore *, enum rs_kind, struct rsess *,
		    struct rreq *);
void		 rs_cmd_free(struct rcmd *);
/* A request on s->reqs holding the user's reference, or NULL. */
struct rreq	*rs_req_new(struct rsess *, enum rs_reqkind, store_range_cb,
		    store_done_cb, void *);
/* Drops a reference on a request (and the session's it holds). */
void		 rs_req_unref(struct rreq *);
/* Calls done once (never after a cancel, a close or store_close) and
 * drops the user's reference. */
void		 rs_req_finish(struct rreq *, ssize_t n, int err);
/* done(arg, n) with errno err; NULL, for the caller to return. */
struct store_req *rs_done_now(store_done_cb, void *, ssize_t n, int err);
/* The link failed: its connections go, a retry is timed, parked opens
 * fail. */
void		 rs_link_down(struct rstore *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
/* The handshake is done: parked opens go out, leases are renewed,
 * queued writes sent, followers and inboxes read again. */
void		 rs_link_up(struct rstore *);
/* hiredis callbacks: a command's reply (privdata an rcmd), a pub/sub
 * message (privdata the store). */
void		 rs_reply(redisAsyncContext *, void *, void *);
void		 rs_on_sub(redisAsyncContext *, void *, void *);
/* Writes what conn has buffered, without waiting. */
void		 rs_flush_out(struct rconn *);

/* store_redis_link.c */
/* Decimal digits into *out; -1 if none, other bytes, overflow. */
int		 rs_u64(const char *, size_t, uint64_t *);
/* The seq of a log entry id "<seq>-<n>". */
int		 rs_idseq(const char *, size_t, uint64_t *);
int		 rs_isstr(const redisReply *);
int		 rs_replyu64(const redisReply *, uint64_t *);
/* What went wrong with a reply (NULL: the connection went away). */
const char	*rs_errstr(const redisReply *);
void		 rs_args_init(struct rargs *, int cap, int numcap);
void		 rs_args_free(struct rargs *);
void		 rs_args_add(struct rargs *, const void *, size_t);
void		 rs_args_str(struct rargs *, const char *);
void		 rs_args_u64(struct rargs *, uint64_t);
/* A stream entry id, "<seq>-0". */
void		 rs_args_id(struct rargs *, uint64_t);
void		 rs_args_script(struct rargs *, struct rstore *, int script,
		    int nkeys);
/* Fills st from url; -1 with a message in err. */
int		 rs_parse_url(struct rstore *, const char *, int sentinel,
		    char *err, size_t errlen);
void		 rs_drop_conn(struct rstore *, struct rconn *);
/* Starts connecting; -1 with a reason in why. */
int		 rs_connect(struct rstore *, struct rconn *,
		    const struct rhost *, char *why, size_t whylen);
void		 rs_hs_send(struct rstore *, struct rconn *, enum rs_hs, int);
/* A failure where hiredis must not free: the link goes down soon. */
void		 rs_link_later(struct rstore *);
/* Sends a command; rc is freed on failure.  0 or -1. */
int		 rs_send(struct rstore *, struct rcmd *, struct rargs *);
int		 rs_eval(struct rstore *, struct rcmd *, int script,
		    struct rargs *);
/* After NOSCRIPT: the same call again as EVAL.  0 or -1. */
int		 rs_resend_eval(struct rstore *, struct rcmd *);
void		 rs_subscribe(struct rstore *, const char *);
void		 rs_unsubscribe(struct rstore *, const char *);
const char	*rs_sess_chan(const struct rsess *);
void		 rs_hs_check(struct rstore *);
/* Timers: ev_kill, ev_retry, ev_timeout. */
void		 rs_kill_cb(evutil_socket_t, short, void *);
void		 rs_retry_cb(evutil_socket_t, short, void *);
void		 rs_timeout_cb(evutil_socket_t, short, void *);
void		 rs_on_hs(struct rcmd *, redisReply *);
void		 rs_on_sentinel(struct rcmd *, redisReply *);
void		 rs_sentinel_watch(struct rstore *, uint64_t);
int		 rs_ping(struct store *, unsigned, char *, size_t);
redisContext	*rs_ping_connect(const struct rhost *, const char *what,
		    uint64_t deadline, char *err, size_t errlen);
redisReply	*rs_ping_cmd(redisContext *, const struct rhost *,
		    const char *what, uint64_t deadline, char *err,
		    size_t errlen, int argc, const char **argv);

/* store_redis_cluster.c */
/* Fills st's seeds and password from a cluster:// url; -1, err. */
int		 rs_cl_parse(struct rstore *, const char *, char *, size_t);
void		 rs_cl_free(struct rstore *);
/* Lets go of every master's connection (in-flight replies: NULL). */
void		 rs_cl_drop(struct rstore *);
struct rconn	*rs_cl_which(struct rstore *, const redisAsyncContext *);
int		 rs_cl_is_cmd(struct rstore *, const struct rconn *);
/* "host:port" of the server conn is to. */
void		 rs_cl_name(struct rstore *, const struct rconn *, char *,
		    size_t);
void		 rs_cl_start(struct rstore *);
void		 rs_cl_on_seed(struct rstore *);
void		 rs_cl_seed_failed(struct rstore *, const char *);
void		 rs_cl_on_slots(struct rcmd *, redisReply *);
void		 rs_cl_watch(struct rstore *, uint64_t);
void		 rs_cl_on_connect(struct rstore *, struct rconn *);
struct rconn	*rs_cl_route(struct rstore *, const struct rcmd *);
int		 rs_cl_redirect(struct rcmd *, const redisReply *);
void		 rs_cl_retry(struct rstore *);
void		 rs_cl_flush_out(struct rstore *);
int		 rs_cl_ping(struct rstore *, uint64_t deadline, char *,
		    size_t);

/* store_redis_lease.c */
extern const char rs_lua_renew[];
extern const char rs_lua_acquire[];
extern const char rs_lua_release[];
void		 rs_demote(struct rsess *);
void		 rs_open_fail(struct rsess *, int);
void		 rs_on_fill(struct rcmd *, redisReply *);
void		 rs_on_peek(struct rcmd *, redisReply *);
void		 rs_on_acquire(struct rcmd *, redisReply *);
void		 rs_open_send(struct rsess *);
void		 rs_open_async(struct store *, const char *, int, size_t,
		    store_open_cb, void *);
void		 rs_sess_close(struct store_sess *);
void		 rs_renew_all(struct rstore *);
void		 rs_on_renew(struct rcmd *, redisReply *);
struct store_req *rs_promote(struct store_sess *, store_done_cb, void *);

/* store_redis_inbox.c */
extern const char rs_lua_peek[];
extern const char rs_lua_post[];
int		 rs_parse_peek(const redisReply *, uint64_t *, int *,
		    uint64_t *);
/* Takes the epochs a script answered (nil: none).  0, -1 malformed. */
int		 rs_set_epochs(struct rsess *, const redisReply *);
const char	*rs_epochs(const struct store_sess *);
void		 rs_resync_sess(struct store_sess *);
/* Its write queue is within RS_CONGEST_RECS or _BYTES of its bound. */
int		 rs_congested(const struct store_sess *);
/* Where cur's epochs rewrote the history since old's: 1 (*from), 0 no,
 * -1 unreadable. */
int		 rs_rewritten(const char *, const char *, size_t, uint64_t *);
int		 rs_peek_send(struct rsess *, enum rs_kind, int with_doc);
void		 rs_poll_send(struct rsess *);
void		 rs_grown(struct rsess *, uint64_t);
void		 rs_on_poll(struct rcmd *, redisReply *);
void		 rs_inbox_read(struct rsess *);
void		 rs_on_inbox(struct rcmd *, redisReply *);
void		 rs_poll_all(struct rstore *);
struct store_req *rs_post(struct store_sess *, const char *, size_t,
		    store_done_cb, void *);
void		 rs_on_post(struct rcmd *, redisReply *);

/* store_redis_feed.c */
/* After the url is parsed (the channel's suffix is known). */
void		 rs_feed_init(struct rstore *);
void		 rs_resync(struct rsess *);
/* A linked session joins the safety net's ring; at close it leaves it
 * and its owner's node. */
void		 rs_feed_join(struct rsess *);
void		 rs_feed_leave(struct rsess *);
/* No longer a follower: filed under no node. */
void		 rs_feed_unwatch(struct rsess *);
/* A follower's owner's token (NULL: none) from its PEEK. */
void		 rs_feed_owner(struct rsess *, const char *, size_t);
void		 rs_feed_heard(struct rstore *, const char *, size_t);
void		 rs_feed_beat(struct rstore *);
/* Publishes a "look now" on s's followers' channel. */
void		 rs_publish_look(struct rsess *, const char *what);
void		 rs_feed_up(struct rstore *, uint64_t now);
void		 rs_feed_tick(struct rstore *, uint64_t now);
void		 rs_feed_free(struct rstore *);

/* store_redis_log.c */
extern const char rs_lua_append[];
extern const char rs_lua_durable[];
extern const char rs_lua_meta[];
extern const char rs_lua_trim[];
struct rrec	*rs_rec_new(uint64_t, uint64_t, const char *, size_t);
uint64_t	 rs_cache_last(const struct rcache *);
void		 rs_cache_clear(struct rcache *);
void		 rs_cache_free(struct rcache *);
int		 rs_cache_covers(const struct rcache *, uint64_t, uint64_t);
void		 rs_sess_cache_below(struct rsess *, uint64_t);
void		 rs_sess_cache_push(struct rsess *, struct rrec *);
uint64_t	 rs_sess_readable(const struct rsess *);
void		 rs_wopq_free(struct wopq *);
void		 rs_batch_free(struct wbatch *);
void		 rs_args_skeys(struct rargs *, const struct rsess *);
void		 rs_fetch_learn(struct rsess *, const redisReply *);
int		 rs_fetch_send(struct rsess *, struct rreq *, uint64_t,
		    uint64_t, size_t);
ssize_t		 rs_entries(const redisReply *, rs_entry_fn, void *,
		    uint64_t *);
int		 rs_batch_send(struct rsess *);
void		 rs_flush_sess(struct rsess *);
void		 rs_flush_cb(evutil_socket_t, short, void *);
void		 rs_mark_dirty(struct rsess *);
void		 rs_sess_fail(struct rsess *, int err, const char *fmt, ...)
		    __attribute__((format(printf, 3, 4)));
int		 rs_append_async(struct store_sess *, uint64_t, uint64_t,
		    const char *, size_t);
int		 rs_meta_write_async(struct store_sess *, const char *, size_t);
void		 rs_repair(struct rsess *, uint64_t, struct wbatch *);
void		 rs_on_batch(struct rcmd *, redisReply *);
void		 rs_on_wait(struct rcmd *, redisReply *);
void		 rs_on_range(struct rcmd *, redisReply *);
size_t		 rs_cache_deliver(struct rsess *, uint64_t, uint64_t,
		    store_range_cb, void *);
struct store_req *rs_range_async(struct store_sess *, uint64_t, size_t,
		    store_range_cb, store_done_cb, void *);
void		 rs_on_preload(struct rcmd *, redisReply *);
struct store_req *rs_preload_async(struct store_sess *, uint64_t,
		    store_done_cb, void *);
int		 rs_trim(struct store_sess *, uint64_t);
void		 rs_on_trim_scan(struct rcmd *, redisReply *);
void		 rs_on_trim(struct rcmd *, redisReply *);

/* store_redis_doc.c */
extern const char rs_lua_docput[];
extern const char rs_lua_docdel[];
struct store_req *rs_doc_put(struct store_sess *, const char *,
		    const char *, size_t, store_done_cb, void *);
struct store_req *rs_doc_del(struct store_sess *, const char *,
		    store_done_cb, void *);
struct store_req *rs_doc_all(struct store_sess *, store_doc_cb,
		    store_done_cb, void *);
/* The reply to an RC_DOC command (NULL: the connection went away). */
void		 rs_doc_reply(struct rcmd *, redisReply *);
/* Frees what a document request holds beyond struct rreq. */
void		 rs_doc_req_free(struct rreq *);
/* At store_close: drops the document writes held back. */
void		 rs_doc_close(struct rstore *);

#endif
