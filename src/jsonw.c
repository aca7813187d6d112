/*
 * The JSON writer (jsonw.h).  Its output for a cJSON tree is the one
 * cJSON_PrintUnformatted gives, down to the escapes and the digits of a
 * number (test_jsonw compares the two), so that switching a path to it
 * changes no byte of the log.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/jsonw.h"

void
jw_init(struct jw *w, char *stk, size_t stklen, size_t max)
{
	memset(w, 0, sizeof(*w));
	w->buf = stk;
	w->cap = stk != NULL ? stklen : 0;
	/* Bounded well below SIZE_MAX: jw_str's worst case, 6 bytes a
	 * byte, is counted without a wrap. */
	w->max = max < SIZE_MAX / 8 ? max : SIZE_MAX / 8;
	if (w->cap > 0)
		w->buf[0] = '\0';
}

void
jw_free(struct jw *w)
{
	if (w->heap)
		free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
	w->heap = 0;
}

const char *
jw_text(const struct jw *w, size_t *len)
{
	if (w->err || w->buf == NULL)
		return NULL;
	*len = w->len;
	return w->buf;
}

/* Room for n more bytes and the NUL; 0, or -1 with w->err set. */
static int
room(struct jw *w, size_t n)
{
	size_t ncap;
	char *p;

	if (w->err)
		return -1;
	if (n > w->max || w->len > w->max - n) {
		w->err = 1;
		return -1;
	}
	if (w->len + n < w->cap)
		return 0;
	ncap = w->cap > 0 ? w->cap : 256;
	while (ncap <= w->len + n)
		ncap *= 2;
	if (w->heap)
		p = realloc(w->buf, ncap);
	else if ((p = malloc(ncap)) != NULL && w->len > 0)
		memcpy(p, w->buf, w->len);
	if (p == NULL) {
		w->err = 1;
		return -1;
	}
	w->buf = p;
	w->cap = ncap;
	w->heap = 1;
	return 0;
}

void
jw_raw(struct jw *w, const char *s, size_t n)
{
	if (room(w, n) == -1)
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void
put(struct jw *w, char c)
{
	if (room(w, 1) == -1)
		return;
	w->buf[w->len++] = c;
	w->buf[w->len] = '\0';
}

/*
 * cJSON's escapes: the quote, the backslash, \b \f \n \r \t, other
 * control bytes as \u00xx in lowercase hex; every other byte (UTF-8, DEL)
 * as it is.  The length is counted first, so that the text is written
 * with one check of the room.
 */
void
jw_str(struct jw *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	size_t out = n + 2;
	char *o;

	if (n > w->max) {
		w->err = 1;
		return;
	}
	for (; p < end; p++)
		if (*p < 0x20 || *p == '"' || *p == '\\')
			out += *p == '"' || *p == '\\' || *p == '\b' ||
			    *p == '\f' || *p == '\n' || *p == '\r' ||
			    *p == '\t' ? 1 : 5;
	if (room(w, out) == -1)
		return;
	o = w->buf + w->len;
	*o++ = '"';
	if (out == n + 2) {
		memcpy(o, s, n);
		o += n;
	} else
		for (p = (const unsigned char *)s; p < end; p++) {
			if (*p >= 0x20 && *p != '"' && *p != '\\') {
				*o++ = (char)*p;
				continue;
			}
			*o++ = '\\';
			switch (*p) {
			case '"':	*o++ = '"'; break;
			case '\\':	*o++ = '\\'; break;
			case '\b':	*o++ = 'b'; break;
			case '\f':	*o++ = 'f'; break;
			case '\n':	*o++ = 'n'; break;
			case '\r':	*o++ = 'r'; break;
			case '\t':	*o++ = 't'; break;
			default:
				*o++ = 'u';
				*o++ = '0';
				*o++ = '0';
				*o++ = hex[*p >> 4];
				*o++ = hex[*p & 0xf];
			}
		}
	*o++ = '"';
	*o = '\0';
	w->len = (size_t)(o - w->buf);
}

void
jw_key(struct jw *w, const char *key)
{
	if (w->len > 0 && w->buf[w->len - 1] != '{' &&
	    w->buf[w->len - 1] != '[')
		put(w, ',');
	jw_str(w, key, strlen(key));
	put(w, ':');
}

void
jw_u64(struct jw *w, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	jw_raw(w, d + i, sizeof(d) - i);
}

/*
 * A number as cJSON writes it: null for NaN and infinities, else the
 * shortest of %1.15g and %1.17g that reads back (within cJSON's relative
 * DBL_EPSILON).  Integers below 1e15, the common case (seq, counts,
 * times), print the same without either.
 */
static void
number(struct jw *w, double d)
{
	char b[32];
	double back, m;
	int n;

	if (isnan(d) || isinf(d)) {
		jw_raw(w, "null", 4);
		return;
	}
	if (d == floor(d) && fabs(d) < 1e15 && (d != 0 || !signbit(d))) {
		if (d < 0)
			put(w, '-');
		jw_u64(w, (uint64_t)fabs(d));
		return;
	}
	n = snprintf(b, sizeof(b), "%1.15g", d);
	back = strtod(b, NULL);
	m = fabs(back) > fabs(d) ? fabs(back) : fabs(d);
	if (!(fabs(back - d) <= m * DBL_EPSILON))
		n = snprintf(b, sizeof(b), "%1.17g", d);
	if (n < 0 || (size_t)n >= sizeof(b)) {
		w->err = 1;
		return;
	}
	jw_raw(w, b, (size_t)n);
}

static void
value(struct jw *w, const cJSON *v, unsigned depth)
{
	const cJSON *c;

	/* cJSON's own nesting limit is smaller; this only stops a loop. */
	if (v == NULL || depth > 10000) {
		w->err = 1;
		return;
	}
	switch (v->type & 0xff) {
	case cJSON_NULL:
		jw_raw(w, "null", 4);
		break;
	case cJSON_False:
		jw_raw(w, "false", 5);
		break;
	case cJSON_True:
		jw_raw(w, "true", 4);
		break;
	case cJSON_Number:
		number(w, v->valuedouble);
		break;
	case cJSON_String:
		if (v->valuestring == NULL)
			jw_raw(w, "\"\"", 2);
		else
			jw_str(w, v->valuestring, strlen(v->valuestring));
		break;
	case cJSON_Raw:
		if (v->valuestring == NULL)
			w->err = 1;
		else
			jw_raw(w, v->valuestring, strlen(v->valuestring));
		break;
	case cJSON_Array:
		put(w, '[');
		for (c = v->child; c != NULL; c = c->next) {
			if (c != v->child)
				put(w, ',');
			value(w, c, depth + 1);
		}
		put(w, ']');
		break;
	case cJSON_Object:
		put(w, '{');
		for (c = v->child; c != NULL; c = c->next) {
			if (c != v->child)
				put(w, ',');
			if (c->string == NULL)
				jw_raw(w, "\"\"", 2);
			else
				jw_str(w, c->string, strlen(c->string));
			put(w, ':');
			value(w, c, depth + 1);
		}
		put(w, '}');
		break;
	default:
		/* cJSON_Invalid: cJSON prints nothing at all. */
		w->err = 1;
	}
}

void
jw_cjson(struct jw *w, const cJSON *v)
{
	value(w, v, 0);
}

void
jw_cjson_members(struct jw *w, const cJSON *o)
{
	const cJSON *c;

	if (o == NULL || !cJSON_IsObject(o)) {
		w->err = 1;
		return;
	}
	for (c = o->child; c != NULL; c = c->next) {
		jw_key(w, c->string != NULL ? c->string : "");
		value(w, c, 1);
	}
}
