/*
 * Protocol v1 envelope (PROTOCOL.md): validation of client messages and the
 * encoding of connection-level replies.  Logged events are encoded by the
 * session, which owns seq.
 */
#ifndef PARLEY_PROTO_H
#define PARLEY_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define PROTO_VERSION	1
#define PROTO_ID_MAX	128	/* client message id bytes */

struct proto_in {
	cJSON		*root;		/* owned */
	const char	*type;
	const char	*session;
	const char	*id;		/* client message id or NULL */
};

/*
 * The one check every JSON text from outside passes before anything reads
 * or logs it (client messages on every transport, every JSON request
 * body): valid UTF-8, no raw control byte, \u0000 or lone-surrogate \u
 * escape in a string, one JSON value with only whitespace after it,
 * nesting within max_depth.  Returns the value (the caller's), or NULL
 * with msg saying what was wrong; the error code is always BAD_REQUEST.
 */
cJSON	*proto_json(const char *text, size_t len, unsigned max_depth,
	    char *msg, size_t msglen);

/*
 * Parses one client message (through proto_json).  0 with in filled, or -1 with *code set to
 * "PROTOCOL_MISMATCH" or "BAD_REQUEST" and msg naming the field.  A
 * message that cannot be parsed at all still yields *sid_out = NULL.
 */
int	proto_parse(const char *text, size_t len, unsigned max_depth,
	    struct proto_in *in, const char **code, char *msg, size_t msglen);
void	proto_in_free(struct proto_in *);

/* Typed field access; -1 with msg naming the field when absent (and
 * required) or ill-typed.  An absent optional field leaves *out alone. */
int	proto_str(const cJSON *, const char *field, int required,
	    size_t maxlen, const char **out, char *msg, size_t msglen);
int	proto_u64(const cJSON *, const char *field, int required,
	    uint64_t *out, char *msg, size_t msglen);

/* A connection-level event (no seq): {"v":1,"type":T,"sessionId":S,...}.
 * body (may be NULL) is consumed; returns malloc'd text. */
char	*proto_reply(const char *type, const char *sid, cJSON *body);
/* An error event; severity "warning", "recoverable" or "fatal". */
char	*proto_error(const char *sid, const char *code, const char *message,
	    const char *severity, cJSON *extra);
/* New object {"v":1,"type":T,"sessionId":S}. */
cJSON	*proto_head(const char *type, const char *sid);
/* A non-negative number field, 0 when absent or not a number (never NaN). */
double	proto_count(const cJSON *, const char *key);
/* Sets key to item (consumed), whether or not key was there. */
void	proto_set(cJSON *, const char *key, cJSON *item);
/* 1 when the array holds the string (NULL: never). */
int	proto_holds(const cJSON *array, const char *);

#endif
