/* Turns of a session's agent: the model's steps (their calls: tools.h). */
#ifndef PARLEY_WORKERS_TURN_H
#define PARLEY_WORKERS_TURN_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct llm_call;

struct tool_run;

struct turn {
	char		 msgid[48];
	char		 agent[64];	/* the agent answering (team.h) */
	unsigned	 hop;		/* its place in a team's round */
	unsigned	 thoughts;	/* reasoning blocks logged */
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
	int		 resumed;	/* continued where it waited (parked) */
	int		 parked;	/* as its last checkpoint says */
	char		*rag;		/* retrieved context (kb.c), or NULL */
	int		 rag_state;	/* 0 not asked, 1 asking, 2 answered,
					   3 waiting for the answer */
	/* tools.c: the step's calls moved on; answered: all of them. */
	void		(*stepped)(struct sess *, int answered);
};

/* How a session's life cycle drives its turns (struct sess_agent). */
extern const struct sess_agent turn_agent;

/* Starts the next queued input, if no turn runs and the session lives. */
void	turn_next(struct sess *);
/* Ends the running turn with a done event (after its last tokens). */
void	turn_finish(struct sess *, int cancelled, int max_turns);

#endif
