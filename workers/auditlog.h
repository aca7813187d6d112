/*
 * The audit trail: a session's audit_entry and autonomy_changed events.
 * GET /api/audit reads them from the log (route.c); with audit-log set,
 * each worker also appends every one it logs to the operator's file, one
 * JSON line each, for whoever keeps records longer than retention.
 */
#ifndef PARLEY_WORKERS_AUDITLOG_H
#define PARLEY_WORKERS_AUDITLOG_H

#include <stddef.h>
#include <stdint.h>

struct sess;

#define AUDITLOG_LINE_MAX	65536	/* a longer entry is written short */

/* 1 if json (a logged event, compact JSON) belongs to the audit trail. */
int		 auditlog_type(const char *json, size_t len);
/*
 * Opens path (NULL: none) for appending, closing what was open; -1 with
 * errno when it cannot be, which is logged.
 */
int		 auditlog_open(const char *path);
/* SIGUSR1: opens the path again; the old file stays in use if it fails. */
int		 auditlog_reopen(void);
void		 auditlog_close(void);
/*
 * Appends logged event seq of s (0: none) to the file, if there is one;
 * never blocks the session and returns seq, so that a caller may write
 * `return auditlog_event(s, sess_emit(...))`.
 */
uint64_t	 auditlog_event(struct sess *, uint64_t seq);

#endif
