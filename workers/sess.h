/* Sessions: the state machine, the append-then-fan-out log, turns. */
#ifndef PARLEY_WORKERS_SESS_H
#define PARLEY_WORKERS_SESS_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "parley/ipc.h"

struct wk;
struct conn;
struct proto_in;
struct store_sess;
struct llm_call;

/*
 * One logged event, encoded once and shared by reference by every
 * connection it is written to; the framings are built on first use.
 */
struct evt {
	unsigned	 refs;
	uint64_t	 seq;
	char		*json;
	size_t		 len;
	unsigned char	*ws;		/* frame header + json */
	size_t		 wslen;
	char		*sse;
	size_t		 sselen;
	char		 type[32];
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
};

struct sess {
	TAILQ_ENTRY(sess)	 entry;
	TAILQ_ENTRY(sess)	 hentry;
	struct wk		*wk;
	char			 id[IPC_SID_MAX + 1];
	struct store_sess	*st;
	TAILQ_HEAD(, conn)	 conns;
	unsigned		 nconns;
	cJSON			*meta;		/* the persisted state */
	char			 agent_id[64];
	struct turn		*turn;
	char			*tok;		/* coalesced, not yet logged */
	size_t			 toklen;
	size_t			 tokcap;
	struct event		*flush_ev;
	struct event		*idle_ev;
	struct event		*recover_ev;
	struct event		*start_ev;	/* a turn waits for MCP start-up */
	char			*ids[SESS_IDS];	/* ring of client ids */
	uint64_t		 id_seq[SESS_IDS];
	unsigned		 id_next;
	int			 ended;		/* completed: no more input */
	int			 released;
};

/* Result of applying one client message. */
struct sess_result {
	uint64_t	 seq;		/* the logged event it produced, or 0 */
	int		 duplicate;	/* its id was already accepted */
	const char	*code;		/* error code, or NULL */
	char		 msg[256];
	int		 http;		/* status for the HTTP answer */
};

/* Finds or loads a session; create makes a new one. NULL with *err set. */
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
cJSON		*sess_state(struct sess *);	/* session_state body */
cJSON		*sess_info(struct sess *);	/* GET /sessions/{id} */
int		 sess_terminate(struct sess *, const char *why);
int		 sess_busy(const struct sess *);
const char	*sess_status(const struct sess *);
/* Drops a session from memory; its state stays in the store. */
void		 sess_release(struct sess *);
/* Shutdown: log what is buffered, leave running turns to be re-run. */
void		 sess_stop(struct sess *);
void		 sess_check_idle(struct sess *);

#endif
