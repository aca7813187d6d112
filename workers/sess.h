/* Sessions: the state machine, the append-then-fan-out log, turns. */
#ifndef PARLEY_WORKERS_SESS_H
#define PARLEY_WORKERS_SESS_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "parley/ipc.h"

struct wk;
struct conn;
struct proto_in;
struct store_sess;
struct store_req;
struct llm_call;

/*
 * One logged event, encoded once and shared by every connection it is
 * written to (by reference when large, else copied from it); the
 * framings are built on first use.
 */
struct evt {
	struct evt	*next;		/* sess pending list, not yet durable */
	unsigned	 refs;
	uint64_t	 seq;
	char		*json;
	size_t		 len;
	unsigned char	*ws;		/* frame header + json */
	size_t		 wslen;
	char		*sse;
	size_t		 sselen;
	char		 type[32];
	uint64_t	 appended_us;	/* handed to the store (monotonic) */
};

struct evt	*evt_new(uint64_t seq, const char *json, size_t len);
void		 evt_unref(struct evt *);
void		 evt_unref_cb(const void *data, size_t len, void *arg);
const unsigned char *evt_ws(struct evt *, size_t *len);
const char	*evt_sse(struct evt *, size_t *len);

#define SESS_IDS	1024	/* client message ids remembered for at-most-once */

struct tool_run;

struct turn {
	char		 msgid[48];
	uint64_t	 input_seq;
	unsigned	 attempt;
	struct llm_call	*call;
	char		*input;		/* the user's message it answers */
	char		*reply;		/* the assistant's text so far */
	size_t		 reply_len;
	size_t		 reply_cap;
	size_t		 step_from;	/* reply bytes before this model step */
	cJSON		*steps;		/* its assistant and tool messages */
	cJSON		*calls;		/* tool calls of the current step */
	TAILQ_HEAD(, tool_run) runs;	/* tool calls in flight */
	unsigned	 model_calls;
	int		 starting;	/* tools_run is starting calls */
	uint64_t	 in_tokens;	/* usage over all its model calls */
	uint64_t	 out_tokens;
	double		 cost;
	char		 req[17];	/* request id of the message's client */
	int		 prov;		/* enum metrics_provider of the call */
	uint64_t	 call_us;	/* the model call started (monotonic) */
	int		 call_byte;	/* it has sent something back */
};

/* What a waiting answer says once its seq is durable. */
enum sess_answer {
	ANSWER_NEW,	/* 202 with the seq */
	ANSWER_DUP,	/* 200 with the seq, "duplicate": a repeat */
	ANSWER_NOOP	/* 200, no seq: nothing changed */
};

/* A client message whose answer waits for the store. */
struct sess_wait {
	TAILQ_ENTRY(sess_wait)	 entry;
	struct conn		*conn;	/* NULL: a load with no connection */
	char			*id;	/* the message's id, or NULL */
	uint64_t		 seq;	/* answered once durable */
	enum sess_answer	 answer;
	struct store_req	*req;	/* a follower's post to the owner */
	int			 posting; /* 1 inside store_post, 2/3 answered */
	struct sess		*sess;
	void			(*loaded)(void *, const char *err);
	void			*arg;
};
TAILQ_HEAD(sess_waits, sess_wait);

struct sess {
	TAILQ_ENTRY(sess)	 entry;
	TAILQ_ENTRY(sess)	 hentry;
	struct wk		*wk;
	char			 id[IPC_SID_MAX + 1];
	struct store_sess	*st;
	TAILQ_HEAD(, conn)	 conns;
	unsigned		 nconns;
	struct evt		**recent;	/* shared: seq % SESS_RECENT */
	uint64_t		 recent_lo;	/* seqs held: lo..hi, or none */
	uint64_t		 recent_hi;
	size_t			 recent_bytes;	/* JSON held in recent */
	cJSON			*meta;		/* the persisted state */
	char			 agent_id[64];
	struct turn		*turn;
	char			*tok;		/* coalesced, not yet logged */
	size_t			 toklen;
	size_t			 tokcap;
	struct event		*flush_ev;
	uint64_t		 flushed_us;	/* last token event (loop_us) */
	struct event		*idle_ev;
	struct event		*recover_ev;
	struct event		*start_ev;	/* a turn waits for MCP start-up */
	struct sess_id {
		char		*id;
		uint64_t	 seq;
	}			*idr;		/* client ids, a ring once full */
	unsigned		 id_n;		/* in use */
	unsigned		 id_cap;	/* allocated, up to SESS_IDS */
	unsigned		 id_next;	/* oldest, once full */
	int			 ended;		/* completed: no more input */
	int			 released;
	int			 loading;	/* the store is opening it */
	int			 load_created;	/* opened with create */
	int			 fresh;		/* its load created it */
	int			 follower;	/* another process owns it */
	int			 broken;	/* the store failed it */
	int			 scan_paused;	/* the log tail's last pause
						   state, -1 none (sess_own) */
	uint64_t		 fanned;	/* highest seq fanned out */
	struct evt		*phead;		/* appended, not yet durable */
	struct evt		*ptail;
	struct sess_waits	 loads;		/* waiting for the open */
	struct sess_waits	 acks;		/* answers waiting for the store */
	struct store_req	*fetch;		/* follower: reading new records */
	struct store_req	*promote;	/* follower: taking the lease */
	struct event		*broken_ev;
	unsigned		 nreaders;	/* conns reading its log */
};

/* Result of applying one client message. */
struct sess_result {
	uint64_t	 seq;		/* the logged event it produced, or 0 */
	int		 duplicate;	/* its id was already accepted */
	const char	*code;		/* error code, or NULL */
	char		 msg[256];
	int		 http;		/* status for the HTTP answer */
	int		 pending;	/* answered later: conn_input_done */
};

/*
 * Loads a session into memory (create: making it when absent).  Calls
 * loaded(arg, NULL) once it is, or loaded(arg, err) with NOT_FOUND,
 * OVERLOADED or INTERNAL; at once when it completes before returning
 * (local store, already loaded).  sess_load_cancel forgets a waiter.
 */
void		 sess_load(struct wk *, const char *id, int create,
		    void (*loaded)(void *, const char *err), void *arg);
void		 sess_load_cancel(struct wk *, void *arg);
/* Forgets the answers a closing connection was waiting for. */
void		 sess_conn_gone(struct wk *, struct conn *);
/* Store events, for the worker's struct store_events. */
void		 sess_store_durable(void *wk, struct store_sess *, uint64_t);
void		 sess_store_failed(void *wk, struct store_sess *, int err);
void		 sess_store_grown(void *wk, struct store_sess *, uint64_t);
void		 sess_store_input(void *wk, struct store_sess *,
		    const char *json, size_t len);
void		 sess_store_vacant(void *wk, struct store_sess *);
/*
 * Finds a loaded session; when it is not loaded, loads it if that
 * completes at once (local store).  NULL with *err set: NOT_FOUND,
 * OVERLOADED, INTERNAL, or PENDING (use sess_load first).
 */
struct sess	*sess_get(struct wk *, const char *id, int create, int *created,
		    cJSON *create_body, const char **err);
struct sess	*sess_find(struct wk *, const char *id);
void		 sess_attach(struct sess *, struct conn *);
void		 sess_detach(struct sess *, struct conn *);
void		 sess_input(struct sess *, struct conn *, int role,
		    struct proto_in *, struct sess_result *);
uint64_t	 sess_last_seq(const struct sess *);
uint64_t	 sess_first_seq(const struct sess *);
/* Reads logged events after `after` into cb (store_range's contract). */
int		 sess_range(struct sess *, uint64_t after, size_t limit,
		    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t),
		    void *arg);
struct store_req *sess_range_async(struct sess *, uint64_t after,
		    size_t limit,
		    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t),
		    void (*done)(void *, ssize_t), void *arg);
cJSON		*sess_state(struct sess *);	/* session_state body */
cJSON		*sess_info(struct sess *);	/* GET /sessions/{id} */
int		 sess_busy(const struct sess *);
/* The last events fanned out, shared: a client catching up reads them
 * without a copy of its own.  Borrowed; NULL when seq is not held. */
struct evt	*sess_recent(struct sess *, uint64_t seq);
const char	*sess_status(const struct sess *);
/* Paused by an operator: input is logged, no turn starts (sess.c). */
int		 sess_paused(const struct sess *);
/* Drops a session from memory; its state stays in the store. */
void		 sess_release(struct sess *);
/*
 * At exit, before and after store_close: lets every session go; those
 * still loading are freed once the store is closed (store_closed 1).
 */
void		 sess_release_all(struct wk *, int store_closed);
/* Shutdown: log what is buffered, leave running turns to be re-run. */
void		 sess_stop(struct sess *);
void		 sess_check_idle(struct sess *);

#endif
