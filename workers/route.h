/* Routing a connection's requests and messages to sessions. */
#ifndef PARLEY_WORKERS_ROUTE_H
#define PARLEY_WORKERS_ROUTE_H

struct conn;
struct conn_handler;
struct http_request;
struct proto_in;
struct sess;
struct conn_who;

/* Given to conn_new: the REST endpoints and the streams' messages. */
extern const struct conn_handler route_handler;

/*
 * Who creates a session this connection's request may make, or NULL when
 * its role may not: user, agent and admin create; an observer (or a
 * request for ?role=observer, r: the HTTP request or NULL) only reads.
 */
const struct sess_creator *route_creator(struct conn *,
		    const struct http_request *r);
/*
 * Whether a valid client message may create its session: a chat with a
 * valid message and no 'to' (a new session has no agent to name).
 */
int		 route_msg_creates(const struct conn *, const struct proto_in *);
/*
 * Whether the connection's token may use session s: 1 yes, 0 no.  A
 * session created under a JWT subject is its owner's (meta "owner");
 * another token needs the admin role or a share (a scope that names the
 * id itself, not a prefix*).  An unowned session is anyone's in scope.
 */
int		 route_may_access(const struct sess *, const struct conn_who *);

#endif
