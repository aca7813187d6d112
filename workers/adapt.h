/*
 * Protocol adapters: a connection that speaks another client library's
 * stream protocol over the one session log.  The seed's turn stream
 * (seed.c), the Vercel AI SDK's UI message stream (aisdk.c) and AG-UI
 * (agui.c) are each one struct adapt_ops.  An adapted connection is an
 * ordinary subscriber of its session: it reads the logged events like any
 * SSE client and only their framing changes, so no event is stored twice
 * and auth, bounds, audit and metrics are the session's own.
 *
 * Exact resume: a translation is a pure function of the log read from the
 * turn's first event, so reading it again gives the same chunks (whether
 * a stream closes at a wait, with the same chunks, is the one exception:
 * it closes only while the call still waits).  Each
 * chunk's SSE id is "SEQ:K", the K-th chunk (from 1) made from the event
 * of that seq; a client that comes back with Last-Event-ID "SEQ:K" is
 * given the same translation from the turn's start with every chunk up
 * to that one left out (struct adapt_cursor).
 */
#ifndef PARLEY_WORKERS_ADAPT_H
#define PARLEY_WORKERS_ADAPT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "parley/epoch.h"

struct conn;
struct evt;
struct sess;
struct sess_result;

struct adapt_ops {
	const char	*name;		/* for the log: "seed", "aisdk", "agui" */
	/*
	 * The bytes one logged event becomes, malloc'd (*len bytes), or
	 * NULL with *len 0 for none; *end set to 1 ends the stream once
	 * they are written (conn.c closes it).
	 */
	char		*(*chunks)(struct conn *, const struct evt *,
			    size_t *len, int *end);
	/*
	 * The session's answer to what the request applied (a chat, an
	 * approval), given at once or, through a follower, later (route.c's
	 * post_reply); it starts the stream or answers the error.
	 */
	void		 (*reply)(struct conn *, struct sess *,
			    const struct sess_result *);
	void		 (*free)(void *);
};

/*
 * Numbering and leaving out chunks for exact resume; the first member of
 * every adapter's state (conn.c reads failed through c->adapt_st), which
 * adapt_sse takes.
 */
struct adapt_cursor {
	uint64_t	 seq;		/* the event being translated */
	unsigned	 k;		/* chunks made from it so far */
	uint64_t	 skip_seq;	/* leave out through chunk skip_k */
	unsigned	 skip_k;	/* of event skip_seq */
	int		 ids;		/* 0: no id lines (the seed's clients) */
	int		 failed;	/* a chunk was lost (no memory): the
					   client must go and resume */
	int		 resumed;	/* skip_seq came from the client */
	char		 epoch[EPOCH_TOKEN_LEN + 1];	/* the log's, in ids */
	char		 client[EPOCH_TOKEN_LEN + 1];	/* the client's */
};

/*
 * Appends one SSE block for the event of seq: "id: SEQ:K", or "SEQ:K.E"
 * once the log has an epoch E (unless cur->ids is 0), and "data: " data
 * printed on one line; data is consumed.  A chunk the cursor says the
 * client has is counted and left out.
 */
void	adapt_sse(struct adapt_cursor *, char **out, size_t *len,
	    uint64_t seq, cJSON *data);
/* The same with data given as text ("[DONE]"). */
void	adapt_sse_text(struct adapt_cursor *, char **out, size_t *len,
	    uint64_t seq, const char *text);
/*
 * Parses a Last-Event-ID ("SEQ:K", or "SEQ" for all of SEQ's chunks, then
 * ".E" when the log had epoch E) into the cursor's skip; -1 when it is
 * not one.
 */
int	adapt_cursor_parse(struct adapt_cursor *, const char *);
/*
 * A resume (the cursor parsed from the client's id) of s's log: 0 when
 * the events the client has are the log's; else the history it saw was
 * rewritten from some seq on (a crash or failover lost events it had,
 * parley/epoch.h): c answered 409 RESUME_GAP, -1.  These streams cannot
 * take events back, so the client starts the chat's view again.
 */
int	adapt_resume_check(struct conn *, struct sess *,
	    const struct adapt_cursor *);
/*
 * Whether event e belongs to the turn whose messageId is msgid: m-SEQ
 * itself, a re-run of it (m-SEQ.N) or a team's next speaker (m-SEQ-HOP).
 */
int	adapt_turn_of(const char *msgid, const cJSON *e);
/*
 * Makes c an adapted stream of s: ops and state (owned by c from now),
 * SSE headers with extra (CRLF-terminated lines, or NULL) written, and
 * the events from seq from on translated, live ones as they come.
 */
void	adapt_stream(struct conn *, struct sess *, const struct adapt_ops *,
	    void *state, const char *extra, uint64_t from);
/*
 * The request's Last-Event-ID header, else its ?lastEventId=, into buf;
 * 0, -1 when it has neither, -2 when it has one that does not fit (answer
 * 400: replaying the whole turn would repeat what the client has).
 */
int	adapt_last_id(const struct conn *, char *buf, size_t len);
/* SEQ of a turn's messageId "m-SEQ" (digits, 1 to 2^53), else 0. */
uint64_t adapt_msgid_seq(const char *msgid);
/*
 * Whether s has a turn running or waiting (s->turn on the owner, else the
 * meta's "turn"): 1 with its messageId in msgid and its input seq, else 0.
 */
int	adapt_current_turn(const struct sess *, char *msgid, size_t len,
	    uint64_t *input_seq);
/*
 * The HTTP answer to sess_get's error code for c's session (NOT_FOUND
 * 404, RATE_LIMITED 429, FORBIDDEN 403, OVERLOADED 503, else 500); a
 * session this worker did not open is released to the supervisor.
 */
void	adapt_open_error(struct conn *, const char *err);
/* The request body as a JSON object (proto_json's bounds), or NULL, msg. */
cJSON	*adapt_body(struct conn *, char *msg, size_t msglen);
/* Whether a thought ("th_" + the turn's messageId + "-...") is the turn's. */
int	adapt_thought_of(const char *msgid, const cJSON *thought);
/*
 * 0 when sid may name a chat or a thread: a valid session id that is not
 * a project's ("kg:"); else -1 with msg saying what is wrong.
 */
int	adapt_session_id(const char *sid, char *msg, size_t msglen);
#endif
