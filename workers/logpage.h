/* Pages of a session's log for the REST endpoints (route.c). */
#ifndef PARLEY_WORKERS_LOGPAGE_H
#define PARLEY_WORKERS_LOGPAGE_H

struct conn;
struct sess;

/*
 * GET /sessions/ID/log: a JSON array of the events after seq N, at most L.
 * audit, GET /api/audit?sessionId=ID: of those, only the audit_entry and
 * autonomy_changed events, with where to go on (the supervisor checked
 * the role and the scope).  The answer may come inside the call: the
 * caller settles c.
 */
void	logpage_get(struct conn *, struct sess *, int audit);

#endif
