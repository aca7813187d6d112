#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/proto.h"
#include "parley/store.h"

/* Depth of nesting, stopping as soon as it passes limit. */
static unsigned
json_depth(const cJSON *j, unsigned limit)
{
	const cJSON *c;
	unsigned d, max = 0;

	if (!cJSON_IsArray(j) && !cJSON_IsObject(j))
		return 0;
	if (limit == 0)
		return 1;
	for (c = j->child; c != NULL; c = c->next) {
		d = json_depth(c, limit - 1);
		if (d > max)
			max = d;
		if (max >= limit)
			break;
	}
	return max + 1;
}

int
proto_str(const cJSON *o, const char *field, int required, size_t maxlen,
    const char **out, char *msg, size_t msglen)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, field);

	if (f == NULL || cJSON_IsNull(f)) {
		if (!required)
			return 0;
		snprintf(msg, msglen, "missing field '%s'", field);
		return -1;
	}
	if (!cJSON_IsString(f)) {
		snprintf(msg, msglen, "field '%s' must be a string", field);
		return -1;
	}
	if (strlen(f->valuestring) > maxlen) {
		snprintf(msg, msglen, "field '%s' is longer than %zu bytes",
		    field, maxlen);
		return -1;
	}
	*out = f->valuestring;
	return 0;
}

int
proto_u64(const cJSON *o, const char *field, int required, uint64_t *out,
    char *msg, size_t msglen)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, field);
	double d;

	if (f == NULL || cJSON_IsNull(f)) {
		if (!required)
			return 0;
		snprintf(msg, msglen, "missing field '%s'", field);
		return -1;
	}
	if (cJSON_IsString(f) && f->valuestring[0] >= '0' &&
	    f->valuestring[0] <= '9') {
		char *end;
		unsigned long long v;

		/* The same bound as a JSON number, so both spellings agree. */
		errno = 0;
		v = strtoull(f->valuestring, &end, 10);
		if (*end == '\0' && errno == 0 && v <= 9007199254740991ULL) {
			*out = v;
			return 0;
		}
		snprintf(msg, msglen, "field '%s' must be a whole number from "
		    "0 to 2^53-1", field);
		return -1;
	}
	if (!cJSON_IsNumber(f)) {
		snprintf(msg, msglen, "field '%s' must be a number", field);
		return -1;
	}
	d = f->valuedouble;
	if (d < 0 || d != floor(d) || d > 9007199254740991.0) {
		snprintf(msg, msglen,
		    "field '%s' must be a whole number >= 0", field);
		return -1;
	}
	*out = (uint64_t)d;
	return 0;
}

/*
 * cJSON turns the escape \u0000 into a terminator, silently cutting the
 * string; a message carrying one is refused instead.
 */
static int
has_nul_escape(const char *text, size_t len)
{
	const char *p = text, *end = text + len, *q;
	size_t bs;

	while ((p = memmem(p, (size_t)(end - p), "u0000", 5)) != NULL) {
		for (bs = 0, q = p; q > text && q[-1] == '\\'; q--)
			bs++;
		if (bs % 2 == 1)
			return 1;
		p += 5;
	}
	return 0;
}

int
proto_parse(const char *text, size_t len, unsigned max_depth,
    struct proto_in *in, const char **code, char *msg, size_t msglen)
{
	const cJSON *v;

	memset(in, 0, sizeof(*in));
	*code = "BAD_REQUEST";
	if (has_nul_escape(text, len)) {
		snprintf(msg, msglen, "strings must not contain \\u0000");
		return -1;
	}
	in->root = cJSON_ParseWithLength(text, len);
	if (in->root == NULL) {
		snprintf(msg, msglen, "message is not valid JSON");
		return -1;
	}
	if (!cJSON_IsObject(in->root)) {
		snprintf(msg, msglen, "message must be a JSON object");
		goto bad;
	}
	if (json_depth(in->root, max_depth + 1) > max_depth) {
		snprintf(msg, msglen, "message nests deeper than %u levels",
		    max_depth);
		goto bad;
	}
	v = cJSON_GetObjectItemCaseSensitive(in->root, "v");
	if (v == NULL) {
		snprintf(msg, msglen, "missing field 'v' (protocol version, "
		    "must be %d)", PROTO_VERSION);
		goto bad;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble != PROTO_VERSION) {
		*code = "PROTOCOL_MISMATCH";
		snprintf(msg, msglen, "field 'v' must be %d: this server speaks "
		    "protocol version %d", PROTO_VERSION, PROTO_VERSION);
		goto bad;
	}
	if (proto_str(in->root, "type", 1, 64, &in->type, msg, msglen) == -1 ||
	    proto_str(in->root, "sessionId", 1, 128, &in->session, msg,
	    msglen) == -1 ||
	    proto_str(in->root, "id", 0, PROTO_ID_MAX, &in->id, msg,
	    msglen) == -1)
		goto bad;
	if (!store_valid_id(in->session)) {
		snprintf(msg, msglen, "field 'sessionId' must be 1-128 "
		    "characters of A-Z a-z 0-9 . _ : - (not starting with '.')");
		goto bad;
	}
	return 0;
bad:
	cJSON_Delete(in->root);
	in->root = NULL;
	return -1;
}

void
proto_in_free(struct proto_in *in)
{
	cJSON_Delete(in->root);
	memset(in, 0, sizeof(*in));
}

/* A non-negative number field, 0 when absent or not a number (never NaN). */
double
proto_count(const cJSON *o, const char *key)
{
	const cJSON *f = cJSON_GetObjectItem(o, key);

	if (!cJSON_IsNumber(f) || !(f->valuedouble >= 0) ||
	    f->valuedouble > 9007199254740991.0)
		return 0;
	return f->valuedouble;
}

/* Sets key to item (consumed), whether or not key was there. */
void
proto_set(cJSON *o, const char *key, cJSON *item)
{
	if (cJSON_GetObjectItemCaseSensitive(o, key) != NULL)
		cJSON_ReplaceItemInObjectCaseSensitive(o, key, item);
	else
		cJSON_AddItemToObject(o, key, item);
}

/* 1 when array holds the string s (NULL: never). */
int
proto_holds(const cJSON *array, const char *s)
{
	const cJSON *e;

	if (s == NULL)
		return 0;
	cJSON_ArrayForEach(e, array)
		if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0)
			return 1;
	return 0;
}

cJSON *
proto_head(const char *type, const char *sid)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "v", PROTO_VERSION);
	cJSON_AddStringToObject(o, "type", type);
	if (sid != NULL)
		cJSON_AddStringToObject(o, "sessionId", sid);
	return o;
}

char *
proto_reply(const char *type, const char *sid, cJSON *body)
{
	cJSON *o = proto_head(type, sid), *c;
	char *s;

	if (body != NULL) {
		while ((c = body->child) != NULL) {
			cJSON_DetachItemViaPointer(body, c);
			cJSON_AddItemToObject(o, c->string, c);
		}
		cJSON_Delete(body);
	}
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

char *
proto_error(const char *sid, const char *code, const char *message,
    const char *severity, cJSON *extra)
{
	cJSON *b = extra ? extra : cJSON_CreateObject();

	cJSON_AddStringToObject(b, "code", code);
	cJSON_AddStringToObject(b, "message", message);
	cJSON_AddStringToObject(b, "severity", severity);
	return proto_reply("error", sid, b);
}
