/*
 * The control protocol between parleyctl and parleyd's supervisor, version
 * CTL_VERSION.  It is HTTP/1.1 over the Unix stream socket named by
 * `control-socket`, one request per connection (Connection: close), so the
 * supervisor reuses its bounded request parser and an operator can also
 * drive it with `curl --unix-socket`.  The peer is authenticated by its
 * uid (SO_PEERCRED), never by a token: a peer passes as admin.
 *
 * Supervisor endpoints (answers are JSON; errors are
 * {"error":{"code","message"}} with a 4xx/5xx status):
 *
 *   GET  /control/v1/status
 *        {"name":"parleyd","version","protocol":1,"control":1,"pid",
 *         "hostId","uptimeSeconds","state":"serving"|"draining"|"stopping",
 *         "config":PATH|null,"store":{"type":"local"|"redis","status":
 *         "ok"|"unreachable"},"workers":{"total","ready","draining"},
 *         "connections","sessions","running","eventsAppended",
 *         "workerRestarts","logLevel"}
 *   GET  /control/v1/workers
 *        {"workers":[{"slot","pid","state":"ready"|"starting"|
 *         "restarting"|"draining","uptimeSeconds","sessions",
 *         "connections","running","restarts","eventsAppended",
 *         "storeDown":bool}]}
 *   GET  /control/v1/sessions[?state=STATUS]
 *        {"sessions":[{"sessionId","status","worker","pid","connections",
 *         "lastSeq","paused","follower"}],"truncated":bool}
 *        STATUS is one of the session_state statuses or "following".
 *   POST /control/v1/reload
 *        200 {"status":"reloaded","workers":N} once new workers are forked;
 *        422 CONFIG_INVALID with "FILE:LINE: what" in message otherwise
 *        (the running configuration stays).
 *   POST /control/v1/drain[?timeout=MS]
 *        202 {"status":"draining","timeoutMs":N}: no new sessions on this
 *        host, /health/ready answers 503, idle sessions are let go at once
 *        (their clients get 1001 and reconnect, through the balancer,
 *        elsewhere), busy ones after their turn or the timeout; parleyd
 *        then exits 0.  The default timeout is drain-timeout.
 *   POST /control/v1/log-level   body {"level":"error"|"warn"|"info"|"debug"}
 *        200 {"logLevel":LEVEL}, applied to the supervisor and every worker
 *        until the next reload.
 *
 * Session endpoints are the public ones of parley-protocol(7), served with
 * the admin role: GET /sessions/ID, GET /sessions/ID/log?after=N&limit=M,
 * GET /sessions/ID/events?lastSeq=N (SSE), POST /sessions/ID/messages,
 * DELETE /sessions/ID.
 */
#ifndef PARLEY_CTL_H
#define PARLEY_CTL_H

#define CTL_VERSION		1
#define CTL_PREFIX		"/control/v1/"
#define CTL_DEFAULT_SOCKET	"/run/parleyd/control.sock"

#endif
