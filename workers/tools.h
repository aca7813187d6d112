/*
 * A step's tool calls (tools.c): run over MCP, denied, or waiting for a
 * logged answer (approve.c).  The turn (turn.c) hands it a step's calls
 * and hears back through struct turn's stepped callback.
 */
#ifndef PARLEY_WORKERS_TOOLS_H
#define PARLEY_WORKERS_TOOLS_H

#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct turn;

/*
 * Runs a step's tool calls (the assistant step's "calls"), all at once.
 * A call whose result the log already holds is not run again; an unknown
 * tool answers an error the model can read; a call the policy asks about
 * waits for its answer, or takes the one logged while the turn was away.
 * Each answer is logged and added to the turn's steps; then the turn's
 * stepped callback runs.
 */
void	tools_step(struct sess *, cJSON *calls);
/*
 * A logged decision (approve.c, at seq) for call id: runs the waiting call
 * once seq is stored, or answers the model why not.  A turn not in memory
 * finds it in the log.
 */
void	tools_decided(struct sess *, const char *id, const char *decision,
	    uint64_t seq);
/*
 * A client's logged answer (the tool_result body) to its call id: the
 * step takes it.  A turn not in memory finds it in the log.
 */
void	tools_result(struct sess *, const char *id, const cJSON *logged);
/*
 * A client's logged answer (action, content: an object for accept) to an
 * MCP server's question eid: passed on to the server while its call runs.
 */
void	tools_elicited(struct sess *, const char *eid, const char *action,
	    const cJSON *content);
/* The log is stored up to seq: calls whose tool_start it holds start. */
void	tools_durable(struct sess *, uint64_t seq);
/* 1 when every call in flight waits for an answer (the turn is parked). */
int	tools_parked(const struct turn *);
/*
 * Has the current step (the tool messages after the last assistant message
 * with calls) an answer for call id?  Made-up ids repeat across steps.
 */
int	tools_answered(const struct turn *, const char *id);
/* The turn ends: what waits for an answer is cancelled, in the log. */
void	tools_close_waits(struct sess *);
/* Stops every call in flight, logging nothing (the turn is dropped). */
void	tools_drop(struct turn *);

#endif
