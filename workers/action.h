/*
 * Agents' proposed actions and users' directives (parley-protocol(7),
 * ACTIONS and DIRECTIVES).
 *
 * An action is one request of approve.c's "waiting for someone"
 * mechanism (kind APPROVE_ACTIONS): action_proposed is the logged
 * request; a different agent's or a person's action_approve answers it,
 * logged as action_approved (then action_execute, addressed to the agent
 * that runs it) or action_rejected; the executor's action_result, or
 * action_expired after action-timeout, ends it.  When the session's
 * autonomy asks a person about the action's risk, an agent's approval is
 * logged as an audit_entry that awaits a person, and only a user's or
 * admin's approval lets it run.  Meta keeps what is pending, and
 * "actionsSeq", the last seq it reflects: a new owner reads the log after
 * it.
 *
 * A directive is a user's guidance to every agent: logged, so external
 * agents receive it on their streams; internal agents get the directives
 * logged since their last model call through action_directives.
 */
#ifndef PARLEY_WORKERS_ACTION_H
#define PARLEY_WORKERS_ACTION_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct sess_client;
struct sess_from;
struct sess_result;
struct proto_in;

#define ACTION_TYPE_MAX		64		/* bytes of action.type */
#define ACTION_DESC_MAX		4096		/* of action.description */
#define ACTION_PARAMS_MAX	(64 * 1024)	/* of action.params as JSON */
#define ACTION_RESULT_MAX	(256 * 1024)	/* of a result as JSON */
#define ACTION_REASON_MAX	1024		/* of a rejection's reason */
#define DIRECTIVE_MAX		4096		/* bytes of a directive */
#define DIRECTIVES_KEPT		16		/* directives meta keeps */

/*
 * Checks a proposed action (an object: type, description, params?,
 * executor?, risk?) and returns its normal form (a new object, executor
 * filled with proposer, risk with "medium"); NULL with msg naming the
 * field and what to send.
 */
cJSON		*action_check(const cJSON *action, const char *proposer,
		    char *msg, size_t len);
/*
 * Agent proposer proposes action: logs action_proposed with a new
 * actionId and waits for its answers.  id: the client's message id (or
 * NULL), kept in the event.  The seq, or 0 with r's error set.  For
 * internal agents too (a built-in tool).
 */
uint64_t	 action_propose(struct sess *, const char *proposer,
		    const cJSON *action, const char *id, struct sess_result *);
/* action_propose, action_approve, action_result and directive (input.c). */
void		 action_input(struct sess *, struct sess_client *,
		    const struct sess_from *, struct proto_in *,
		    struct sess_result *);
/*
 * The directives logged since agent's last call, as one user-role
 * message's text ("Directive from the user: ..."), NULL when none; the
 * caller's to free.  They count as seen by agent in meta, which the
 * caller saves with the message (its turn's checkpoint), so each is
 * given once.
 */
char		*action_directives(struct sess *, const char *agent);
/* The actions waiting for answers or results, for session_state. */
/* The session's part (sess.h): pendingActions, recovery, expiry. */
extern const struct sess_part action_part;
cJSON		*action_pending(struct sess *);
/*
 * The session is owned here now (sess_own): what the log says after
 * meta's checkpoint is taken in, overdue actions expire, the next expiry
 * is timed.
 */
void		 action_own(struct sess *);
/* On a follower: the owner logged ev (type, at ts); meta follows it. */
void		 action_follow(struct sess *, const char *type,
		    const cJSON *ev, uint64_t ts);
/* The session leaves memory: its timer goes (the log keeps the rest). */
void		 action_free(struct sess *);

#endif
