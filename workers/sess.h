/* Sessions: registry, loading, meta, the append-then-notify log, life cycle. */
#ifndef PARLEY_WORKERS_SESS_H
#define PARLEY_WORKERS_SESS_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "parley/epoch.h"
#include "parley/ipc.h"
#include "deliver.h"
#include "evt.h"

struct wk;
struct proto_in;
struct store_sess;
struct store_req;
struct llm_call;
struct dash;
struct thought_state;
struct life;
struct kb_state;
struct kgs_state;

#define SESS_IDS	1024	/* client message ids remembered for at-most-once */

struct turn;

/* What a waiting answer says once its seq is durable. */
enum sess_answer {
	ANSWER_NEW,	/* 202 with the seq */
	ANSWER_DUP,	/* 200 with the seq, "duplicate": a repeat */
	ANSWER_NOOP	/* 200, no seq: nothing changed */
};

struct sess;
struct sess_result;

#define SESS_AGENT_MAX	64	/* bytes of an agentId, without NUL */

/*
 * Who sent a client message: the role it acts in (the token's, or the
 * narrower one its stream asked for) and, for an external agent's
 * connection (?role=agent&agentId=), that agent's id; "" for others.
 */
struct sess_from {
	int		 role;
	const char	*agent;
	const char	*subject;	/* its JWT's sub, or NULL / "" */
	int		 inbox;		/* 1: the owner's inbox forwarded it
					   (never inferred from a missing
					   client: a client may go away) */
};

/*
 * Who sent a client message (embedded in a connection): its answer goes
 * to done, at once or once the store has the message.
 */
struct sess_client {
	char		 cid[19];	/* clientId: "c-" and 16 random hex
					   digits, one per connection */
	const char	*reqid;		/* for the log */
	unsigned	 waits;		/* answers waiting in sessions */
	void		(*done)(struct sess_client *, struct sess *,
			    const char *id, const struct sess_result *);
};

/* A client message whose answer waits for the store. */
struct sess_wait {
	TAILQ_ENTRY(sess_wait)	 entry;
	struct sess_client	*conn;	/* NULL: a load with no connection */
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

#define SESS_CHAT_REQS	16	/* chats whose request id a turn finds */

struct sess {
	TAILQ_ENTRY(sess)	 entry;
	TAILQ_ENTRY(sess)	 hentry;
	struct wk		*wk;
	char			 id[IPC_SID_MAX + 1];
	struct store_sess	*st;
	char			 epoch[EPOCH_TOKEN_LEN + 1]; /* sess_epoch's */
	/* A follower cut a client whose epoch it did not know, and asked
	 * the store to read the epochs again (route.c, stream_position). */
	char			 cut_epoch[EPOCH_TOKEN_LEN + 1];
	uint64_t		 cut_ms;
	struct deliver		 feed;		/* its subscribers */
	/*
	 * The persisted state, read and written through sess_meta().  A
	 * session left alone holds it as its printed text (mtxt, mtree
	 * NULL): a tree costs some 2 KiB an idle session does not use.
	 * sess_meta parses it back (thaws), sess_meta_sweep prints it
	 * again; mstatus is sess_status while frozen (no subscriber, some).
	 */
	cJSON			*mtree;
	char			*mtxt;
	const char		*mstatus[2];
	uint64_t		 mthawed_ms;	/* on wk->thawed since */
	TAILQ_ENTRY(sess)	 mentry;	/* wk->thawed */
	int			 mlisted;	/* on wk->thawed */
	int			 mended;	/* s->ended when frozen */
	char			 agent_id[64];
	struct turn		*turn;
	char			*tok;		/* coalesced, not yet logged */
	size_t			 toklen;
	size_t			 tokcap;
	struct event		*flush_ev;
	uint64_t		 flushed_us;	/* last token event (loop_us) */
	struct event		*idle_ev;	/* made when it has no client */
	struct event		*recover_ev;
	int			 cancel_due;	/* a cancel came while the
						   turn was being read back */
	struct event		*start_ev;	/* a turn waits for MCP start-up */
	struct event		*action_ev;	/* next action expiry (action.c) */
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
	int			 may_create;	/* a waiter may create it */
	char			 cr_peer[64];	/* that waiter's address */
	char			 cr_sub[IPC_SUB_MAX + 1];	/* and subject */
	uint64_t		 log_bytes;	/* its log took in (quota) */
	/* A chat's request id, for its turn's log lines: SESS_CHAT_REQS
	 * of them once the first comes (an idle session holds none). */
	struct sess_chat_req {
		uint64_t	 seq;
		char		 req[17];
	}			*chat_req;
	unsigned		 chat_req_next;
	int			 follower;	/* another process owns it */
	int			 broken;	/* the store failed it */
	int			 scan_paused;	/* the log tail's last pause
						   state, -1 none (sess_own) */
	struct evt		*phead;		/* appended, not yet durable */
	struct evt		*ptail;
	struct sess_waits	 loads;		/* waiting for the open */
	struct sess_waits	 acks;		/* answers waiting for the store */
	struct store_req	*fetch;		/* follower: reading new records */
	struct store_req	*promote;	/* follower: taking the lease */
	struct event		*broken_ev;
	struct dash		*dash;		/* its dashboards' (dash.c) */
	struct thought_state	*thoughts;	/* thought.c: rates, mode */
	struct life		*life;		/* presence, deadlines (life.c) */
	struct kb_state		*kb;		/* its knowledge base (kb.c) */
	struct kgs_state	*kgs;		/* a project's graph (kgs.c) */
};

/* Result of applying one client message. */
struct sess_result {
	uint64_t	 seq;		/* the logged event it produced, or 0 */
	int		 duplicate;	/* its id was already accepted */
	const char	*code;		/* error code, or NULL */
	char		 msg[256];
	int		 http;		/* status for the HTTP answer */
	int		 pending;	/* answered later: sess_client.done */
	int		 no_turn;	/* a chat no agent here answers */
	const char	*reply;		/* an answer for the requester only
					   (kb.c): a whole message (JSON),
					   sent instead of the ack; borrowed
					   for the done call */
};

/*
 * Who asks for a session that may not exist yet, and may create it:
 * route.c makes one only for a role that creates (user, agent, admin)
 * and a request that is valid.  Creating one counts against the host's
 * max-sessions-per-address and max-sessions-per-subject (wk->quota).
 */
struct sess_creator {
	const char	*peer;		/* the client's address */
	const char	*subject;	/* the token's subject, "" for static */
	const char	*scope;		/* the token's sessions ("" or NULL:
					   any), kept in meta "scope" for
					   its agents' knowledge tools */
};

/*
 * Loads a session into memory (cr: making it when absent, for cr; NULL:
 * only an existing one).  Calls loaded(arg, NULL) once it is, or
 * loaded(arg, err) with NOT_FOUND, OVERLOADED, RATE_LIMITED (cr made too
 * many) or INTERNAL; at once when it completes before returning (local
 * store, already loaded).  sess_load_cancel forgets a waiter.
 */
void		 sess_load(struct wk *, const char *id,
		    const struct sess_creator *cr,
		    void (*loaded)(void *, const char *err), void *arg);
void		 sess_load_cancel(struct wk *, void *arg);
/* Forgets the answers a closing connection was waiting for. */
void		 sess_client_gone(struct wk *, struct sess_client *);
/* Store events, for the worker's struct store_events. */
void		 sess_store_durable(void *wk, struct store_sess *, uint64_t);
void		 sess_store_failed(void *wk, struct store_sess *, int err);
/*
 * Finds a loaded session; when it is not loaded, loads it if that
 * completes at once (local store).  NULL with *err set: NOT_FOUND,
 * OVERLOADED, INTERNAL, or PENDING (use sess_load first).
 */
struct sess	*sess_get(struct wk *, const char *id,
		    const struct sess_creator *cr, int *created,
		    cJSON *create_body, const char **err);
struct sess	*sess_find(struct wk *, const char *id);
uint64_t	 sess_last_seq(const struct sess *);
cJSON		*sess_state(struct sess *);	/* session_state body */
cJSON		*sess_info(struct sess *);	/* GET /sessions/{id} */
int		 sess_busy(const struct sess *);
const char	*sess_status(const struct sess *);
/* The status as it would be with subscribers (live 1) or without. */
const char	*sess_status_as(const struct sess *, int live);
/* Lets a session whose store writes failed go (err: why). */
void		 sess_break(struct sess *, int err);
/*
 * The log's current epoch ("" for a log never rewritten) and all of them
 * (parley/epoch.h's text form), as the store last said.
 */
const char	*sess_epoch(struct sess *);
const char	*sess_epochs(const struct sess *);
/*
 * What an OVERLOADED answer to a session that could not be opened says:
 * the store is unreachable, or this worker holds its most sessions.
 */
const char	*sess_overloaded_why(struct wk *);
/* Paused by an operator: input is logged, no turn starts (sess.c). */
int		 sess_paused(const struct sess *);
/*
 * Appends one event and fans it out once the store has it.  body's
 * fields are moved into the event (body is consumed).  Returns the seq,
 * or 0 when the store refused it, in which case no client saw it.
 */
uint64_t	 sess_emit(struct sess *, const char *type, cJSON *body);
/* As sess_emit, the body given as a JSON object's text ({} or {..}). */
uint64_t	 sess_emit_json(struct sess *, const char *type,
		    const char *body, size_t len);
#include "sess_meta.h"	/* where struct sess is whole */
/* Remembers (in a small ring) the request id of the chat logged at seq. */
void		 sess_req_note(struct sess *, uint64_t seq, const char *reqid);
/* The request id of the chat at seq into out, when remembered; else "". */
void		 sess_req_find(const struct sess *, uint64_t seq, char out[17]);
/*
 * Whether the session's log may take in need more bytes within
 * session-log-quota: 1, or 0 with r set (QUOTA_EXCEEDED, 413).
 */
int		 sess_log_room(struct sess *, size_t need, struct sess_result *);
/* The agent as events name it: agentId, status, role, provider. */
cJSON		*sess_agent_json(struct sess *, const char *status);
/* Reads this owner's log after `after` (limit 0: all) into cb, durable
 * and still in flight; the records read, or -1 if not at hand at once. */
int		 sess_log_read(struct sess *, uint64_t after, size_t limit,
		    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t),
		    void *arg);
/* Drops a session from memory; its state stays in the store. */
void		 sess_release(struct sess *);
int		 sess_drain_now(struct sess *);
/*
 * At exit, before and after store_close: lets every session go; those
 * still loading are freed once the store is closed (store_closed 1).
 */
void		 sess_release_all(struct wk *, int store_closed);
/* Shutdown: log what is buffered, leave running turns to be re-run. */
void		 sess_stop(struct sess *);
void		 sess_check_idle(struct sess *);
/* What was in flight kept it busy: once none is, it may idle out. */
void		 sess_idle_again(struct sess *);
/* This process owns the session now: continue what its meta says. */
void		 sess_own(struct sess *);
/* Fills r with an error: code, HTTP status, message (printf's fmt). */
void		 sess_result_err(struct sess_result *, const char *code,
		    int http, const char *fmt, ...)
		    __attribute__((__format__(__printf__, 4, 5)));
/* The client ids accepted (at most once): seq of id's message, if any. */
int		 sess_id_find(struct sess *, const char *id, uint64_t *seq);
void		 sess_id_add(struct sess *, const char *id, uint64_t seq);
/*
 * A message whose id the session accepted before: answered as the
 * repeat it is (200, "duplicate", the seq it made, once that is stored)
 * and 1; 0 for a new one (or no id).
 */
int		 sess_id_repeat(struct sess *, struct sess_client *c,
		    const char *id, struct sess_result *r);
/* Queues c's answer until seq is durable (or, with req, posted); 0 or -1. */
int		 sess_ack_wait(struct sess *, struct sess_client *c,
		    const char *id, uint64_t seq, enum sess_answer);
/* r is answered only once seq is durable: pending until then. */
void		 sess_answer_durable(struct sess *, struct sess_client *c,
		    const char *id, uint64_t seq, enum sess_answer,
		    struct sess_result *r);
/*
 * A requester-only answer (kb.c, kgs.c): the message type with body
 * (consumed) and the message's id (may be NULL), into r (zeroed first)
 * as r->reply with status http.  0, the caller frees r->reply once it
 * has answered; -1 out of memory.
 */
int		 sess_reply(struct sess *, const char *type, const char *id,
		    cJSON *body, int http, struct sess_result *r);
/* Frees a wait taken off its list, cancelling a post under way. */
void		 sess_wait_free(struct sess_wait *);

/*
 * A part of every session beside its log and its turns: external agents
 * and the session's end (life.c), actions (action.c), thoughts
 * (thought.c), the team (team.c), dashboards (dash.c).  The worker lists
 * them (wk->parts), so sess.c names none of them; each hook may be NULL
 * and runs for every part, in the list's order.
 */
struct sess_part {
	/* made in memory: its hooks on the session (e.g. a delivery view) */
	void	(*init)(struct sess *);
	/* a new session's meta, from POST /sessions' body (NULL: none) */
	void	(*meta_new)(struct sess *, cJSON *meta, const cJSON *body);
	/* this process owns the session now (before its turn resumes) */
	void	(*own)(struct sess *);
	/* a logged event of the log's tail read when it is owned, and a
	 * follower's every event */
	void	(*scan)(struct sess *, uint64_t seq, const char *json,
		    size_t len);
	/* a follower's event of a type that changes meta (follow.c), parsed */
	void	(*follow)(struct sess *, const char *type, const cJSON *ev,
		    uint64_t ts);
	/* adds to a session_state (info 0) or to GET /sessions/{id} (1) */
	void	(*state)(struct sess *, cJSON *state, int info);
	/* the status as the part sees it, given the session's own */
	const char *(*status)(const struct sess *, const char *status);
	/* 1: no turn may start now */
	int	(*holds)(const struct sess *);
	/* 1: it works here, the session must not leave memory */
	int	(*busy)(const struct sess *);
	/* subscribers came or went */
	void	(*changed)(struct sess *);
	/* a client that may wait for an answer of the part is closing */
	void	(*gone)(struct sess *, struct sess_client *);
	/* the session leaves memory */
	void	(*free)(struct sess *);
};

/* Each part p of session s (struct sess_part), in the worker's order
 * (s->wk, struct wk of wk.h, holds the list). */
#define PARTS(s, p)							\
	for (const struct sess_part *const *p##_i = (s)->wk->parts,	\
	    *p = p##_i != NULL ? *p##_i : NULL; p != NULL;		\
	    p = *++p##_i)

/* 1 when a part holds the session's turns (sess_part.holds). */
int		 sess_held(const struct sess *);

/*
 * What runs a session's turns (turn.c's turn_agent), as its life cycle
 * drives it; the worker names it (wk->agent).
 */
struct sess_agent {
	void	(*init)(struct sess *);		/* made (may be NULL) */
	void	(*resume)(struct sess *);	/* owned here: go on */
	void	(*flush)(struct sess *);	/* log what is coalesced */
	void	(*drop)(struct sess *);		/* stop the turn, log nothing */
	void	(*durable)(struct sess *, uint64_t seq); /* stored up to seq */
	/* 1 while its turn works here; a turn that only waits for answers
	 * does not, and may leave memory (its meta says where it waits) */
	int	(*busy)(const struct sess *);
	/* adds the pending requests' lists to a session_state */
	void	(*waiting)(struct sess *, cJSON *state);
	/* starts the next queued turn, if one may start */
	void	(*next)(struct sess *);
	/* ends the running turn, if any, cancelled (its done logged) */
	void	(*cancel)(struct sess *);
};

#endif
