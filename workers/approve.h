/*
 * Requests that wait for someone, on one mechanism: a logged request
 * awaiting a logged answer.  A tool approval is a tool_approve_request
 * answered by an audit_entry with the decision; a client-side tool call
 * is an mcp_call answered by its tool_result; an MCP server's question to
 * the user is an elicitation_request answered by an elicitation_result.
 * The session's meta holds what is pending ("waiting"), the ids answered
 * lately ("answered") and the tools approved for the rest of the session
 * ("alwaysAllow"), checkpoints of what the log says, so a new owner finds
 * them.  tools.c asks and acts on answers; client messages (input.c)
 * answer.
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
 * A client's answer (approve, reject or always) to call id, by role
 * (and subject, its JWT's sub, NULL or "" for none).
 * Returns 1 when logged (*logged: the decision as logged, for the turn to
 * act on), 0 when the call was answered before (r says duplicate) and -1
 * with r's error set.
 */
int		 approve_answer(struct sess *, const char *id,
		    const char *decision, const char *by, const char *subject,
		    const char **logged, struct sess_result *);
/*
 * The audit_entry of a call that was not asked about: "auto" (it ran as
 * the policy allows), "always" (approved earlier for the session) or
 * "denied" (a tool-policy rule).
 */
void		 approve_audit(struct sess *, const cJSON *call,
		    const char *decision);
/*
 * Ends a wait without a client's answer: "timeout" or "cancelled" (a
 * client call's is logged as its tool_result, an error).
 */
void		 approve_close(struct sess *, const char *id,
		    const char *decision);
/* A logged decision was acted on: call id waits no more (no event). */
void		 approve_settle(struct sess *, const char *id);
/* Call id's answer is in the log: it waits no more, of any kind. */
void		 approve_answered(struct sess *, const char *id);
/* The turn is gone: every request still pending is closed "cancelled". */
void		 approve_clear(struct sess *);
/* 1 when the client chose "always" for this tool in this session. */
int		 approve_always(struct sess *, const char *tool);
/* The kinds of request, for approve_pending. */
#define APPROVE_APPROVALS	0
#define APPROVE_CALLS		1
#define APPROVE_ELICITS		2
#define APPROVE_ACTIONS		3	/* action.c's proposed actions */
/* The pending requests of a kind, for session_state (a new array). */
cJSON		*approve_pending(struct sess *, int kind);
/*
 * The waiting entry of request id if it is of kind (APPROVE_*), or NULL;
 * meta's own object, for the caller to change (then sess_meta_save).
 */
cJSON		*approve_entry(struct sess *, const char *id, int kind);
/* 1 when request id was answered lately (a repeat is a duplicate). */
int		 approve_was_answered(struct sess *, const char *id);
/*
 * Meta's waiting list takes request w (consumed, its body as logged), of
 * kind (APPROVE_*), asked at ts (ms since the epoch); saves meta and
 * returns ts.  Answered with approve_answered.
 */
uint64_t	 approve_keep(struct sess *, cJSON *w, int kind, uint64_t ts);
/* 1 while call id waits for an answer of either kind. */
int		 approve_waits(struct sess *, const char *id);
/*
 * Asks a client to run call (the fields of its tool_start) as tool name
 * of server: logs mcp_call unless meta already waits for it.  Returns
 * the request's time in ms since the epoch (its timeout counts from it),
 * 0 when it could not be logged.
 */
uint64_t	 approve_call(struct sess *, const cJSON *call,
		    const char *server, const char *name);
/*
 * A client's answer to call id: logs its tool_result (text; is_error with
 * code).  Returns 1 when logged (*logged: a copy of the body, the
 * caller's), 0 when it was answered before (r says duplicate) and -1 with
 * r's error set.
 */
int		 approve_result(struct sess *, const char *id, int is_error,
		    const char *text, const char *code, cJSON **logged,
		    struct sess_result *);
/* A tool_result event's body (a new object). */
cJSON		*approve_result_body(const char *agent, const char *msgid,
		    double step, const char *id, const char *tool, uint64_t ms,
		    int is_error, const char *text, const char *code);
/* Decision names: 1 for those that let the call run (approved, always,
 * auto). */
int		 approve_runs(const char *decision);
/*
 * An MCP server asks the user a question (elicitation/create) during call
 * (the fields of its tool_start): logs elicitation_request, id eid, unless
 * meta already waits for it.  Returns the time it was asked (ms since the
 * epoch), 0 when it could not be logged.
 */
uint64_t	 approve_elicit(struct sess *, const cJSON *call,
		    const char *eid, const char *message,
		    const char *schema_json);
/*
 * A client's answer to question eid: action accept (with content, an
 * object), decline or cancel, logged as elicitation_result.  Returns 1
 * when logged, 0 when answered before (r says duplicate), -1 with r's
 * error set.
 */
int		 approve_elicit_answer(struct sess *, const char *eid,
		    const char *action, const cJSON *content, const char *by,
		    struct sess_result *);
/*
 * A request found logged (logged: its event, asked at ts) that meta does
 * not list (its worker died between the two): waited for again, without
 * asking twice.  calls: a client's call (full: the tool's full name).
 * Returns ts.
 */
uint64_t	 approve_adopt(struct sess *, const cJSON *logged, int calls,
		    const char *full, uint64_t ts);
/*
 * On a follower: the owner logged event ev (of type, at ts); what is
 * pending follows the log, so session_state lists what the owner's does.
 */
void		 approve_follow(struct sess *, const char *type,
		    const cJSON *ev, uint64_t ts);
/* Every question still pending is closed (its call is gone). */
void		 approve_clear_elicits(struct sess *);

#endif
