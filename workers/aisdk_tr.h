/*
 * The Vercel AI SDK's UI message stream (v1) made from one turn's logged
 * events: a pure function of the log read from the turn's user_message,
 * so a resume that reads it again gets the same chunks (adapt.h).
 * aisdk.c serves it; the unit tests feed it events.
 */
#ifndef PARLEY_WORKERS_AISDK_TR_H
#define PARLEY_WORKERS_AISDK_TR_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "adapt.h"

#define AISDK_TR_CALLS	256	/* tool calls of a turn remembered */
#define AISDK_TR_ID	160	/* bytes of a chat id, with NUL */
#define AISDK_TR_ERR	512	/* bytes of an error chunk's text */

struct aisdk_tr {
	struct adapt_cursor cur;	/* first: adapt.h's */
	char	 chat[AISDK_TR_ID];	/* the user_message id to find */
	char	 msgid[48];	/* the turn: "m-SEQ", "" until found */
	uint64_t input_seq;	/* its user_message */
	int	 started;	/* "start" made */
	int	 in_step;	/* "start-step" made, no "finish-step" yet */
	int	 after_tools;	/* the step ran tools: output starts a new one */
	unsigned step;		/* the model step of the last tool event */
	int	 finished;	/* the turn ended */
	char	 text[48];	/* the open text part's id, or "" */
	char	 text_mid[48];	/* the messageId its tokens carry */
	char	 reason[48];	/* the open reasoning part's id, or "" */
	cJSON	*calls;		/* toolCallId: "in", "ask", "no", "out" */
	int	 ncalls;
	int	 overflow;	/* a call past AISDK_TR_CALLS: the stream ends */
	char	 failed[AISDK_TR_ERR];	/* a held recoverable error, or "" */
	/* 1 while call id still waits for an answer (NULL: it does) */
	int	(*waits)(void *, const char *id);
	void	*arg;
};

/*
 * Readies t for the turn of user_message id chat, or, when msgid is not
 * NULL, the turn msgid ("m-SEQ"); 0, or -1 when out of memory or msgid
 * is no turn's.
 */
int	aisdk_tr_init(struct aisdk_tr *, const char *chat, const char *msgid);
void	aisdk_tr_clear(struct aisdk_tr *);
/*
 * The SSE blocks event e (logged as seq, of type) becomes, malloc'd (*len
 * bytes), or NULL with *len 0; *end 1 when the stream ends after them.
 */
char	*aisdk_tr_event(struct aisdk_tr *, uint64_t seq, const char *type,
	    const cJSON *e, size_t *len, int *end);
/*
 * The seq of the user_message of msgid ("m-SEQ[.N][-HOP]"), or 0 when it
 * is not one (or SEQ is past 2^53).
 */
uint64_t aisdk_tr_input_seq(const char *msgid);

#endif
