/*
 * A JSON writer for the hot path: text appended into a buffer that starts
 * in the caller's stack space and moves to the heap only when it outgrows
 * it.  Each logged event was a tree of cJSON nodes (a malloc per field,
 * key and value), printed with a sprintf and an sscanf per number, then
 * freed: a third of a streaming worker's CPU went there.  The writer
 * prints cJSON trees too, byte for byte as cJSON_PrintUnformatted does, so
 * what the log and the clients see does not change.
 */
#ifndef PARLEY_JSONW_H
#define PARLEY_JSONW_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct jw {
	char	*buf;
	size_t	 len;
	size_t	 cap;
	size_t	 max;		/* bound on len */
	int	 heap;		/* buf is ours (malloc'd) */
	int	 err;		/* out of memory, over max or a bad node */
};

/* Starts w in stk (stklen bytes, may be 0), never longer than max bytes. */
void	jw_init(struct jw *, char *stk, size_t stklen, size_t max);
void	jw_free(struct jw *);
/*
 * The text so far, NUL-terminated, and its length; NULL once anything
 * failed (w->err), which stays so: the caller checks once at the end.
 */
const char *jw_text(const struct jw *, size_t *len);
void	jw_raw(struct jw *, const char *, size_t);
/* A JSON string: quoted and escaped as cJSON escapes. */
void	jw_str(struct jw *, const char *, size_t);
/* ,"key": (the comma unless the last byte is { or [). */
void	jw_key(struct jw *, const char *key);
void	jw_u64(struct jw *, uint64_t);
/* A value as cJSON_PrintUnformatted prints it. */
void	jw_cjson(struct jw *, const cJSON *);
/* An object's members (no braces), each after jw_key's comma rule. */
void	jw_cjson_members(struct jw *, const cJSON *object);

#endif
