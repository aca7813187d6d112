/*
 * The query reader (kgq.h): compact S-expressions to forms in the run's
 * arena.  Numbers, "strings" (escapes \" \\ \n \t \r \xHH), symbols,
 * :keywords, #t #f nil, (lists), [vectors], 'quote and ; comments.
 * Nesting counts against the depth bound, so no query can take the C
 * stack with it; every mistake is QUERY_SYNTAX with its line and column.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/utf8.h"
#include "parley/util.h"
#include "kgq_int.h"

struct rd {
	struct kgq_run	*r;
	const char	*s;
	size_t		 len, at;
};

/* Line and column (1-based) of offset pos, for messages. */
static void
rd_where(const struct rd *d, size_t pos, size_t *line, size_t *col)
{
	size_t	i;

	*line = 1;
	*col = 1;
	for (i = 0; i < pos && i < d->len; i++) {
		if (d->s[i] == '\n') {
			(*line)++;
			*col = 1;
		} else
			(*col)++;
	}
}

static void __attribute__((format(printf, 3, 4), noreturn))
rd_fail(const struct rd *d, size_t pos, const char *fmt, ...)
{
	char	m[384];
	size_t	line, col;
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	rd_where(d, pos, &line, &col);
	kgq_fail(d->r, "QUERY_SYNTAX", "line %zu column %zu: %s", line, col,
	    m);
}

static int
rd_delim(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(' ||
	    c == ')' || c == '[' || c == ']' || c == '"' || c == ';' ||
	    c == '\'' || c == '\f' || c == '\v';
}

static void
rd_space(struct rd *d)
{
	while (d->at < d->len) {
		int c = (unsigned char)d->s[d->at];

		if (c == ';') {
			while (d->at < d->len && d->s[d->at] != '\n')
				d->at++;
		} else if (isspace(c))
			d->at++;
		else
			break;
	}
}

/* A "string": at points at the opening quote. */
static struct kgq_val *
rd_string(struct rd *d)
{
	size_t		 start = d->at, n = 0, i;
	char		*buf;
	struct kgq_val	*v;

	/* The text is never longer than its source. */
	for (i = d->at + 1; i < d->len && d->s[i] != '"'; i++)
		if (d->s[i] == '\\')
			i++;
	if (i >= d->len)
		rd_fail(d, start, "string not closed: add a \" at its end");
	buf = kgq_alloc(d->r, i - d->at);
	for (d->at++; d->s[d->at] != '"'; d->at++) {
		char	c = d->s[d->at];
		int	h, l;

		if (c != '\\') {
			buf[n++] = c;
			continue;
		}
		c = d->s[++d->at];
		switch (c) {
		case '"':
		case '\\':
			buf[n++] = c;
			break;
		case 'n':
			buf[n++] = '\n';
			break;
		case 't':
			buf[n++] = '\t';
			break;
		case 'r':
			buf[n++] = '\r';
			break;
		case 'x':
			if (d->at + 2 >= d->len ||
			    (h = util_hexval((unsigned char)d->s[d->at + 1])) < 0 ||
			    (l = util_hexval((unsigned char)d->s[d->at + 2])) < 0 ||
			    (h == 0 && l == 0))
				rd_fail(d, d->at - 1, "bad escape \\x: write "
				    "two hex digits, not 00");
			buf[n++] = (char)(h * 16 + l);
			d->at += 2;
			break;
		default:
			rd_fail(d, d->at - 1, "bad escape \\%c in a string: "
			    "use \\\" \\\\ \\n \\t \\r or \\xHH",
			    isprint((unsigned char)c) ? c : '?');
		}
	}
	d->at++;
	buf[n] = '\0';
	if (!utf8_valid((unsigned char *)buf, n))
		rd_fail(d, start, "the string is not UTF-8 once its \\x "
		    "escapes are read: write characters, not their bytes");
	v = kgq_new(d->r, KQ_STR);
	v->u.str.s = buf;
	v->u.str.len = n;
	return v;
}

/* A number, symbol, keyword, #t, #f or nil. */
static struct kgq_val *
rd_atom(struct rd *d)
{
	size_t		 start = d->at, len;
	const char	*t = d->s + d->at;
	char		*name, *end;
	struct kgq_val	*v;
	double		 x;
	int		 c0;

	while (d->at < d->len && !rd_delim((unsigned char)d->s[d->at]))
		d->at++;
	len = d->at - start;
	if (len > KG_NAME_MAX)
		rd_fail(d, start, "a name or number of %zu bytes is too long "
		    "(at most %d)", len, KG_NAME_MAX);
	name = kgq_alloc(d->r, len + 1);
	memcpy(name, t, len);
	name[len] = '\0';
	c0 = (unsigned char)name[0];
	if (isdigit(c0) || ((c0 == '-' || c0 == '+' || c0 == '.') &&
	    len > 1 && (isdigit((unsigned char)name[1]) ||
	    (name[1] == '.' && len > 2 && isdigit((unsigned char)name[2]))))) {
		errno = 0;
		x = strtod(name, &end);
		if (*end != '\0' || strchr(name, 'x') || strchr(name, 'X') ||
		    strchr(name, 'n') || strchr(name, 'N'))
			rd_fail(d, start, "bad number \"%s\": write digits, "
			    "an optional .fraction and e-exponent", name);
		if (!isfinite(x) || errno == ERANGE)
			rd_fail(d, start, "number \"%s\" is out of range",
			    name);
		v = kgq_num(d->r, x);
		return v;
	}
	if (name[0] == '#') {
		if (strcmp(name, "#t") == 0)
			return &kgq_true;
		if (strcmp(name, "#f") == 0)
			return &kgq_false;
		rd_fail(d, start, "unknown \"%s\": the only # forms are #t "
		    "and #f", name);
	}
	if (strcmp(name, "nil") == 0)
		return &kgq_nil;
	if (name[0] == ':') {
		if (len == 1)
			rd_fail(d, start, "a lone ':': write a keyword such as "
			    ":confidence");
		v = kgq_new(d->r, KQ_KW);
		v->u.str.s = name + 1;
		v->u.str.len = len - 1;
	} else {
		v = kgq_new(d->r, KQ_SYM);
		v->u.str.s = name;
		v->u.str.len = len;
	}
	return v;
}

static struct kgq_val *rd_form(struct rd *);

/* (...) or [...]: at points at the opening bracket. */
static struct kgq_val *
rd_list(struct rd *d)
{
	size_t		  start = d->at, n = 0, cap = 8;
	char		  open = d->s[d->at];
	char		  close = open == '(' ? ')' : ']';
	struct kgq_val	**v, **nv, *l;

	kgq_enter(d->r);
	d->at++;
	v = kgq_alloc(d->r, cap * sizeof(*v));
	for (;;) {
		rd_space(d);
		if (d->at >= d->len)
			rd_fail(d, start, "'%c' not closed: add a '%c'", open,
			    close);
		if (d->s[d->at] == ')' || d->s[d->at] == ']') {
			if (d->s[d->at] != close)
				rd_fail(d, d->at, "'%c' closes a '%c': write "
				    "'%c'", d->s[d->at], open, close);
			d->at++;
			break;
		}
		if (n == cap) {
			nv = kgq_alloc(d->r, 2 * cap * sizeof(*v));
			memcpy(nv, v, n * sizeof(*v));
			v = nv;
			cap *= 2;
		}
		v[n++] = rd_form(d);
	}
	kgq_leave(d->r);
	l = kgq_new(d->r, KQ_LIST);
	l->u.list.v = v;
	l->u.list.n = n;
	l->u.list.vec = open == '[';
	return l;
}

static struct kgq_val *
rd_form(struct rd *d)
{
	struct kgq_val	*q, *l;

	rd_space(d);
	if (d->at >= d->len)
		rd_fail(d, d->at, "the query ends where a form was expected");
	switch (d->s[d->at]) {
	case '(':
	case '[':
		return rd_list(d);
	case ')':
	case ']':
		rd_fail(d, d->at, "stray '%c': nothing to close; remove it",
		    d->s[d->at]);
	case '"':
		return rd_string(d);
	case '\'':
		d->at++;
		kgq_enter(d->r);
		q = rd_form(d);
		kgq_leave(d->r);
		l = kgq_list(d->r, 2);
		l->u.list.v[0] = kgq_new(d->r, KQ_SYM);
		l->u.list.v[0]->u.str.s = "quote";
		l->u.list.v[0]->u.str.len = 5;
		l->u.list.v[1] = q;
		return l;
	default:
		return rd_atom(d);
	}
}

struct kgq_val *
kgq_read(struct kgq_run *r)
{
	struct rd	  d = { r, r->src, r->srclen, 0 };
	size_t		  n = 0, cap = 4;
	struct kgq_val	**v, **nv, *l;

	v = kgq_alloc(r, cap * sizeof(*v));
	for (;;) {
		rd_space(&d);
		if (d.at >= d.len)
			break;
		if (n == cap) {
			nv = kgq_alloc(r, 2 * cap * sizeof(*v));
			memcpy(nv, v, n * sizeof(*v));
			v = nv;
			cap *= 2;
		}
		v[n++] = rd_form(&d);
	}
	if (n == 0)
		kgq_fail(r, "QUERY_SYNTAX", "the query is empty: write a form "
		    "such as (get-principles)");
	l = kgq_new(r, KQ_LIST);
	l->u.list.v = v;
	l->u.list.n = n;
	return l;
}
