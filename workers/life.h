/*
 * A session's life beyond its turns: the external agents it requires and
 * who of them is connected (presence), the deadlines that end it (time
 * limit, a dropped agent's reconnect bound) and its completion.
 */
#ifndef PARLEY_WORKERS_LIFE_H
#define PARLEY_WORKERS_LIFE_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct sess;

#define LIFE_AGENTS	64	/* external agents a session keeps */

/*
 * POST /sessions: checks the strings of "agents" (external agents the
 * session requires; objects are left to the internal agents' module) and
 * config.maxDurationMs.  0, or -1 with msg naming the field.
 */
int	life_check(const cJSON *body, char *msg, size_t len);
/* meta_new: required agents, the time limit's deadline (body may be NULL). */
/* The session's part (sess.h): presence, required agents, the end. */
extern const struct sess_part life_part;
void	life_meta_new(cJSON *meta, const cJSON *body);
/* This process owns s now (created, loaded or taken over): arm its timers. */
void	life_own(struct sess *);
/* s leaves memory. */
void	life_free(struct sess *);

/*
 * An external agent's stream (?role=agent&agentId=) attached to s (+1)
 * or went (-1).  The owner counts it; a follower forwards its count to
 * the owner's inbox.
 */
void	life_conn(struct sess *, const char *agent, int delta);
/* Owner: a follower's presence entry from the inbox ({"presence":{...}}). */
void	life_inbox(struct sess *, const cJSON *presence);
/* Follower: a logged agent_joined/agent_left/session_state updates meta. */
void	life_follow(struct sess *, const char *type, const cJSON *ev);

/* "created" while required agents have not all joined yet, else NULL. */
const char *life_status(const struct sess *);
/* Whether s requires external agents (then a session without turns idles). */
int	life_team(const struct sess *);
/* No turn starts while required agents have not all joined. */
int	life_holds(const struct sess *);
/* Whether agent is an external agent the session knows (required or seen). */
int	life_external(const struct sess *, const char *agent);
/* The lead agent writes its summary: keep s (like a running turn). */
int	life_busy(const struct sess *);
/* Whether s ended failed (reason error). */
int	life_failed(const struct sess *);
/* Adds the external agents (and waitingFor) to a session_state body. */
void	life_state(struct sess *, cJSON *state);

/*
 * Ends s: cancels its turn, logs session_complete {summary, usage,
 * reason} and keeps the result in meta (served by GET /sessions/{id} for
 * the retention period).  reason: "objective", "time_limit",
 * "terminated" or "error" (status failed).  summary: the caller's text
 * (the lead agent's own words), logged at once followed by the plain
 * counts; NULL: the lead agent's provider is asked for one (bounded by
 * 20 s; the end is logged when it answers, and no input is taken
 * meanwhile), a plain summary (counts from the log, duration) when it
 * cannot be reached.  "terminated" is always logged at once.  0 (done or
 * under way; already ended is 0 too), or -1 when it could not be logged
 * (nothing changed).  Owner only.
 */
int	life_complete(struct sess *, const char *reason, const char *summary);

#endif
