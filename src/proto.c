#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/proto.h"
#include "parley/store.h"
#include "parley/utf8.h"

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

/* The value of the 4 hex digits at p, or -1. */
static long
hex4(const char *p, const char *end)
{
	long v = 0;
	int i;

	if (end - p < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		char h = p[i];

		v <<= 4;
		if (h >= '0' && h <= '9')
			v |= h - '0';
		else if (h >= 'a' && h <= 'f')
			v |= h - 'a' + 10;
		else if (h >= 'A' && h <= 'F')
			v |= h - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * What cJSON would let through into a string and every reader after it
 * would see differently: a raw control byte, \u0000 (cJSON's terminator
 * cuts the string there), a \u escape of a surrogate that is not a
 * high-low pair (no character; it would be written out as CESU bytes).
 * Syntax errors are left to the parser.  0, or -1 with msg.
 */
static int
strings_check(const char *text, size_t len, char *msg, size_t msglen)
{
	const char *p = text, *end = text + len;
	long u, lo;
	int in = 0;

	for (; p < end; p++) {
		if (!in) {
			in = *p == '"';
			continue;
		}
		if (*p == '"') {
			in = 0;
			continue;
		}
		if ((unsigned char)*p < 0x20) {
			snprintf(msg, msglen, "a string holds the raw control "
			    "byte 0x%02x; escape it (\\n, \\u001f)",
			    (unsigned char)*p);
			return -1;
		}
		if (*p != '\\' || ++p == end || *p != 'u')
			continue;
		if ((u = hex4(p + 1, end)) == -1)
			continue;	/* the parser says what is wrong */
		p += 4;
		if (u == 0) {
			snprintf(msg, msglen, "strings must not contain "
			    "\\u0000");
			return -1;
		}
		if (u >= 0xdc00 && u <= 0xdfff)
			goto lone;
		if (u < 0xd800 || u > 0xdbff)
			continue;
		if (end - p < 7 || p[1] != '\\' || p[2] != 'u' ||
		    (lo = hex4(p + 3, end)) < 0xdc00 || lo > 0xdfff)
			goto lone;
		p += 6;
	}
	return 0;
lone:
	snprintf(msg, msglen, "a string holds a \\u escape of a lone "
	    "surrogate (U+D800 to U+DFFF not in a high-low pair)");
	return -1;
}

cJSON *
proto_json(const char *text, size_t len, unsigned max_depth, char *msg,
    size_t msglen)
{
	const char *end = NULL;
	cJSON *root;

	if (!utf8_valid((const unsigned char *)text, len)) {
		snprintf(msg, msglen, "the JSON text is not valid UTF-8 (RFC 3629: "
		    "no overlong forms, surrogates or code points above "
		    "U+10FFFF)");
		return NULL;
	}
	if (strings_check(text, len, msg, msglen) == -1)
		return NULL;
	if ((root = cJSON_ParseWithLengthOpts(text, len, &end, 0)) == NULL) {
		snprintf(msg, msglen, "not valid JSON (RFC 8259); send one JSON "
		    "object");
		return NULL;
	}
	while (end < text + len && (*end == ' ' || *end == '\t' ||
	    *end == '\n' || *end == '\r'))
		end++;
	if (end != text + len) {
		snprintf(msg, msglen, "bytes follow the JSON value (at byte "
		    "%zu); send exactly one JSON value", (size_t)(end - text));
		goto bad;
	}
	if (json_depth(root, max_depth + 1) > max_depth) {
		snprintf(msg, msglen, "JSON nests deeper than %u levels",
		    max_depth);
		goto bad;
	}
	return root;
bad:
	cJSON_Delete(root);
	return NULL;
}

int
proto_parse(const char *text, size_t len, unsigned max_depth,
    struct proto_in *in, const char **code, char *msg, size_t msglen)
{
	const cJSON *v;

	memset(in, 0, sizeof(*in));
	*code = "BAD_REQUEST";
	if ((in->root = proto_json(text, len, max_depth, msg, msglen)) == NULL)
		return -1;
	if (!cJSON_IsObject(in->root)) {
		snprintf(msg, msglen, "message must be a JSON object");
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
