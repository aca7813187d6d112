/*
 * Internal agent teams (team.c): a session's roster of LLM agents, who
 * answers a user's message, and the strategies that pass the floor
 * between them (lead with handoffs, round_robin, sequential).  turn.c
 * runs each agent's turn; this module decides whose it is and what comes
 * after it.  Everything is kept in meta ("agents", "team", "round").
 */
#ifndef PARLEY_WORKERS_TEAM_H
#define PARLEY_WORKERS_TEAM_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct sess_client;
struct sess_from;
struct sess_result;
struct proto_in;
struct config;
struct llm_usage;
struct llm_tool_def;

#define TEAM_NAME_MAX	32	/* an agent's name: [A-Za-z0-9_-] */
#define TEAM_ROLE_MAX	64
#define TEAM_GOAL_MAX	2000
#define TEAM_DOMAIN_MAX	200
#define TEAM_MODEL_MAX	128
#define TEAM_ROLES_MAX	8	/* roles of a multi-role agent */
#define TEAM_TOOLS	3	/* built-in tools an agent may be offered */

/* A team session: agents were added, or a strategy was asked for. */
int		 team_is(const struct sess *);
/* The agent object in meta with this agentId or name, or NULL. */
cJSON		*team_agent(const struct sess *, const char *id_or_name);
/* The lead: the first agent of the roster (it cannot be removed). */
const char	*team_lead(const struct sess *);
/* That agent's conversation history in meta (created when absent). */
cJSON		*team_history(struct sess *, const char *agent);
/* Adds one model call's usage to the agent's own totals in meta. */
void		 team_usage_add(struct sess *, const char *agent,
		    const struct llm_usage *);
/*
 * The roster for session_state (status: the running agent's, "idle" for
 * the others; info: with each agent's usage and turns, for GET).
 */
cJSON		*team_roster(struct sess *, const char *running,
		    const char *status, int info);

/*
 * POST /sessions: checks body's agent objects (strings are left alone)
 * and config.strategy; 0, or -1 with msg saying which field is wrong.
 */
int		 team_create_check(const struct config *, const cJSON *body,
		    char *msg, size_t len);
/* meta_new: the agents body asks for replace the default agent in m. */
void		 team_meta_init(struct sess *, cJSON *m, const cJSON *body);
/* The session's part (sess.h): the roster in session_state and GET. */
extern const struct sess_part team_part;
/* A session just created as a team logs its first team_update. */
void		 team_created(struct sess *);

/*
 * agent_add, agent_remove and set_strategy: 1 when in is one of them
 * (r says how it went), 0 for another type.
 */
int		 team_input(struct sess *, struct sess_client *,
		    const struct sess_from *, struct proto_in *,
		    struct sess_result *);

/* --- the turns (turn.c) --- */

/*
 * Who answers the user's message at seq (to: the chat's `to`, or NULL),
 * into agent; a team session opens its round for the message here.
 */
void		 team_first(struct sess *, uint64_t seq, const char *to,
		    char *agent, size_t len);
/* A round's next speaker is due: 1 with its message's seq, agent, hop. */
int		 team_next(struct sess *, uint64_t *seq, char *agent,
		    size_t len, unsigned *hop);
/* The message at seq is answered by a team's round (team_done ends it). */
int		 team_in_round(const struct sess *, uint64_t seq);
/* A round waits for its next speaker (a new owner starts it). */
int		 team_pending(const struct sess *);
/* What the agent at hop reads: message, then the team's words (malloc'd). */
char		*team_compose(struct sess *, const char *message, uint64_t seq,
		    unsigned hop);
/* The agent's system prompt (malloc'd), or NULL outside a team. */
char		*team_prompt(struct sess *, const char *agent);
/* The built-in tools agent is offered, into defs (room of them). */
size_t		 team_tool_defs(struct sess *, const char *agent,
		    struct llm_tool_def *defs, size_t room);
/* 1 when name is a built-in tool of this session's agent. */
int		 team_builtin(struct sess *, const char *agent,
		    const char *name);
/* Runs built-in tool name: its result text (malloc'd), *is_error set. */
char		*team_tool(struct sess *, const char *agent, const char *name,
		    const char *args, int *is_error);
/*
 * The turn of agent at hop for the message at seq ended (type "done" or
 * "error", body its event's, reply NULL when it failed, steps its tool
 * round trips): the round goes on to the next speaker, or ends.
 */
void		 team_turn_end(struct sess *, const char *agent, uint64_t seq,
		    unsigned hop, const char *type, const cJSON *body,
		    const cJSON *steps, const char *reply);

#endif
