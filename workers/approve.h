/*
 * Tool approvals: a logged request (tool_approve_request) awaiting a
 * logged answer (audit_entry with the decision).  The session's meta holds
 * what is pending ("waiting"), the ids answered lately ("answered") and the
 * tools approved for the rest of the session ("alwaysAllow"), checkpoints
 * of what the log says, so a new owner finds them.  The turn (turn.c) asks
 * and acts on answers; client messages (input.c) answer.
 */
#ifndef PARLEY_WORKERS_APPROVE_H
#define PARLEY_WORKERS_APPROVE_H

#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct sess_result;

/*
 * Asks for approval of call (the fields of its tool_start: agentId,
 * messageId, step, toolCallId, tool, args, risk): logs
 * tool_approve_request unless meta already waits for it (a resumed turn).
 * Returns the request's time in ms since the epoch (its timeout counts
 * from it), 0 when it could not be logged.
 */
uint64_t	 approve_request(struct sess *, const cJSON *call);
/*
 * A client's answer (approve, reject or always) to call id, by role.
 * Returns 1 when logged (*logged: the decision as logged, for the turn to
 * act on), 0 when the call was answered before (r says duplicate) and -1
 * with r's error set.
 */
int		 approve_answer(struct sess *, const char *id,
		    const char *decision, const char *by, const char **logged,
		    struct sess_result *);
/*
 * The audit_entry of a call that was not asked about: "auto" (it ran as
 * the policy allows), "always" (approved earlier for the session) or
 * "denied" (a tool-policy rule).
 */
void		 approve_audit(struct sess *, const cJSON *call,
		    const char *decision);
/* Ends a wait without a client's answer: "timeout" or "cancelled". */
void		 approve_close(struct sess *, const char *id,
		    const char *decision);
/* A logged decision was acted on: call id waits no more (no event). */
void		 approve_settle(struct sess *, const char *id);
/* The turn is gone: every request still pending is closed "cancelled". */
void		 approve_clear(struct sess *);
/* 1 when the client chose "always" for this tool in this session. */
int		 approve_always(struct sess *, const char *tool);
/* The pending requests, for session_state (a new array). */
cJSON		*approve_pending(struct sess *);
/* Decision names: 1 for those that let the call run (approved, always,
 * auto). */
int		 approve_runs(const char *decision);

#endif
