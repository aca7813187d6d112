/*
 * AG-UI's translation and request parsing (agui.c, agui_in.c), apart
 * for the unit tests (tests/unit/test_agui.c).
 */
#ifndef PARLEY_WORKERS_AGUI_INT_H
#define PARLEY_WORKERS_AGUI_INT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "parley/proto.h"
#include "adapt.h"

#define AGUI_SERVER	 "agui"		/* client tools' Parley server */
#define AGUI_CHAT_PREFIX "agui:"	/* chat id: this and the runId */
#define AGUI_RESULT_PREFIX "parley-result-" /* TOOL_CALL_RESULT's messageId:
					   this and the toolCallId */
#define AGUI_CALLS_MAX	 256		/* tool calls a stream follows */
#define AGUI_ANSWERS_MAX 64		/* resume entries, tool messages */
#define AGUI_TOOLS_MAX	 64		/* as parley-protocol(7) allows */
#define AGUI_TOOL_DESC_MAX 4096		/* ctool.c's bounds */
#define AGUI_TOOL_SCHEMA_MAX (16 * 1024)

enum agui_kind {
	AGUI_CHAT = 1,		/* a user message: a new turn */
	AGUI_ANSWER		/* resume[] or tool messages: it goes on */
};

/* A RunAgentInput, as Parley client messages (agui_parse). */
struct agui_req {
	char		 thread[129];
	char		 run[PROTO_ID_MAX + 1];
	enum agui_kind	 kind;
	cJSON		*inputs;	/* Parley client messages, in order */
	cJSON		*answered;	/* the interrupts resume answers */
	cJSON		*replied;	/* the client calls it answers */
};

/*
 * What a stream remembers between events: the translation's state (a
 * pure function of the events from the turn's user_message) and the
 * hold.  While the stream holds (events up to hold_until, the log's end
 * when the request came) the chunks are kept in held: a GET without an
 * id keeps only the last run (held is emptied at each RUN_STARTED); a
 * POST of answers (hold_answered) leaves out the runs that ended naming
 * one of its answers (an interrupt it resumes, a client call it answers:
 * one call may be both, asked about, then run by the client), which the
 * client has.  At hold_until what is
 * held goes out, then the stream is live.
 */
struct agui {
	struct adapt_cursor cur;	/* first: adapt.h's */
	char		 thread[129];
	char		 runid[PROTO_ID_MAX + 1];	/* the chat's runId */
	char		 runcur[PROTO_ID_MAX + 24];	/* the open run's */
	char		 chatid[PROTO_ID_MAX + sizeof(AGUI_CHAT_PREFIX)];
					/* to find the chat */
	char		 msgid[48];	/* the turn, m-SEQ; "" until found */
	enum agui_kind	 kind;
	cJSON		*inputs;	/* what the POST applies */
	int		 next;		/* the next of them */
	uint64_t	 from;		/* a follower's log end before it */
	uint64_t	 turn_seq;	/* the turn answers are for, or 0 */
	uint64_t	 approval_ms;	/* approval-timeout */
	/* the hold */
	uint64_t	 hold_until;
	int		 hold_answered;
	int		 holding;	/* this event is held */
	cJSON		*answered;	/* as struct agui_req's */
	cJSON		*replied;
	char		*held;
	size_t		 heldlen;
	int		 held_end;	/* held ends with a run's end */
	int		 names_answered;
	int		 end;		/* the stream ends after this event */
	/* the translation */
	int		 found;		/* the user_message was seen */
	int		 ended;		/* the turn's done or error */
	int		 run_open;
	unsigned	 runs;
	int		 step_open;
	unsigned	 step;
	int		 after_tools;	/* a result since the step began */
	int		 text_open;
	char		 textid[64];
	cJSON		*started;	/* toolCallId: true, calls shown */
	cJSON		*appr;		/* approvals waiting: {toolCallId,
					   summary, asked} */
	cJSON		*pend;		/* the run's client calls unanswered */
};

struct agui	*agui_new(void);
void		 agui_free(void *);
/* Unix ms of an ISO 8601 ts as Parley logs it, or 0. */
uint64_t	 agui_ts_ms(const char *);
/*
 * Appends to *out (*len bytes) the SSE blocks that logged event e (of
 * type and seq) becomes, given every event of the session in order from
 * the turn's user_message (or, for a chat found by its id, from before
 * it); st->end is set once the stream is to end.
 */
void		 agui_translate(struct agui *, const char *type,
		    const cJSON *e, uint64_t seq, char **out, size_t *len);
/* Frees what agui_parse made. */
void		 agui_req_free(struct agui_req *);
/*
 * Checks a RunAgentInput body and makes the Parley messages it stands
 * for (rq->inputs, rq->answered: the caller's); 0, or -1 with msg saying
 * what is wrong and what to send.
 */
int		 agui_parse(const cJSON *body, size_t max_message,
		    struct agui_req *, char *msg, size_t msglen);

#endif
