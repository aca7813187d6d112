/*
 * An internal HTTP call to the worker that owns a knowledge project
 * (session "kg:P"), wherever the supervisor routes it: one end of a
 * socketpair goes to the supervisor as IPC_REROUTE with the request's
 * bytes, as if a client had sent them; the other end is read here until
 * the answer is complete or the peer closes.  Bounded (KGCALL_ANSWER_MAX),
 * timed (KGCALL_TIMEOUT_MS), cancellable.
 */
#ifndef PARLEY_WORKERS_KGCALL_H
#define PARLEY_WORKERS_KGCALL_H

#include <stddef.h>
#include <stdint.h>

#define KGCALL_ANSWER_MAX	(4u * 1024 * 1024)	/* bytes of an answer */
#define KGCALL_HEAD_MAX		(16u * 1024)		/* of its head */
#ifndef KGCALL_TIMEOUT_MS	/* a unit test may shorten it */
#define KGCALL_TIMEOUT_MS	30000
#endif

struct wk;

/* Who calls: carried into the handed connection (struct ipc_conn). */
struct kgcall_who {
	int		 role;		/* IPC_ROLE_* (observer..admin) */
	const char	*subject;	/* JWT "sub", or NULL */
	uint64_t	 conn_id;	/* request id for the logs, or 0 */
	const char	*scope;		/* the sessions the caller's token may
					   use (ipc scope); NULL or "": any */
};

/*
 * The answer: status, Content-Type ("" when none) and body (len bytes,
 * followed by a NUL), or status 0 and err (what went wrong, for a
 * person).  Everything is valid during the call only.
 */
typedef void	(*kgcall_fn)(void *arg, int status, const char *ctype,
		    const char *body, size_t len, const char *err);

struct kgcall;
/*
 * Sends method target (a path under /knowledge/PROJECT, e.g. "/query",
 * "" or "?format=md") with body (may be NULL; JSON) to project's worker;
 * done(arg, ...) is called once, never before this returns.  NULL only
 * when out of memory (nothing will be called).
 */
struct kgcall	*kgcall_start(struct wk *, const char *project,
		    const char *method, const char *target, const char *body,
		    size_t len, const struct kgcall_who *, kgcall_fn done,
		    void *arg);
/* Ends a call whose done has not been called: it never will be. */
void		 kgcall_cancel(struct kgcall *);

/* --- the answer's parser (exposed for the unit test) --- */

struct kgcall_resp {
	int		 status;
	char		 ctype[128];	/* Content-Type, or "" */
	const char	*body;		/* into the parsed buffer */
	size_t		 body_len;
	size_t		 need;		/* on 0: the bytes of buf it needs
					   before it can say more (0: unknown,
					   SIZE_MAX: until eof) */
};
/*
 * Parses an HTTP/1.x answer in buf (len bytes; eof: nothing more will
 * come).  1: complete (r filled); 0: more is needed; -1: malformed, or
 * over the bounds, with a reason in err.  Interim 1xx answers are
 * skipped.
 */
int		 kgcall_parse(const char *buf, size_t len, int eof,
		    struct kgcall_resp *r, char *err, size_t errlen);

#endif
