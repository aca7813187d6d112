/*
 * The answer's text (kgq.h), bounded by the out limit: going past it is
 * QUERY_LIMIT naming out, never a cut text.
 *
 * The compact form (sexp):
 *   nil #t #f; numbers shortest round-trip, integers without ".0";
 *   "strings" with \" \\ \n \t \r and \xHH for other control bytes (the
 *   reader reads them back); symbols bare; :keywords; a list
 *   (list a b c), the empty list (list); a function #<function NAME> or
 *   #<lambda NAME>; an entity (KIND "KEY" "TEXT" :field value ...):
 *   its key (name, path, a relationship's from), its text (description;
 *   a file's summary) when set, then every other set field in
 *   kg_fields() order as :name value, list fields as ["a" "b"], empty
 *   lists and unset fields left out, :stale #t only when stale, seq left
 *   out (read it with (@ e :seq)).
 * JSON: null true false, numbers as above, strings, symbols as strings,
 *   keywords as ":name" strings, lists as arrays, entities as
 *   kg_entity_json() gives them, functions as "#<lambda NAME>".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgq_int.h"

static void __attribute__((noreturn))
over(struct kgq_run *r)
{
	kgq_fail(r, "QUERY_LIMIT", "out: the answer is over %zu bytes; "
	    "narrow the query with filter or take, or ask for (count ...)",
	    r->lim.out);
}

/* Appends len bytes of s to the answer, within the out bound; the text
 * stays NUL-terminated. */
void
kgq_put(struct kgq_run *r, const char *s, size_t len)
{
	struct kgq_buf	*b = &r->out;
	size_t		 cap;
	char		*ns;

	if (len > r->lim.out || b->len > r->lim.out - len)
		over(r);
	if (b->len + len + 1 > b->cap) {
		cap = b->cap ? b->cap : 256;
		while (cap < b->len + len + 1)
			cap *= 2;
		if ((ns = realloc(b->s, cap)) == NULL) {
			r->code = NULL;
			longjmp(r->jb, 1);
		}
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, len);
	b->len += len;
	b->s[b->len] = '\0';	/* room kept above */
}

static void
puts_(struct kgq_run *r, const char *s)
{
	kgq_put(r, s, strlen(s));
}

/* x (finite) in the fewest digits that read back as x. */
void
kgq_fmtnum(double x, char *buf, size_t len)
{
	int	p;

	if (x == 0) {
		snprintf(buf, len, "0");
		return;
	}
	if (x == floor(x) && fabs(x) < 1e15) {
		snprintf(buf, len, "%.0f", x);
		return;
	}
	for (p = 1; p <= 17; p++) {
		snprintf(buf, len, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			return;
	}
}

static void
putnum(struct kgq_run *r, double x)
{
	char	b[40];

	kgq_fmtnum(x, b, sizeof(b));
	puts_(r, b);
}

/*
 * A quoted string: \" \\ \n \t \r, other control bytes as \xHH (sexp)
 * or \u00HH (json, which leaves DEL as it is).
 */
static void
put_str(struct kgq_run *r, const char *s, size_t len, int json)
{
	size_t	i, run = 0;
	char	e[8];

	kgq_put(r, "\"", 1);
	for (i = 0; i < len; i++) {
		unsigned char	c = (unsigned char)s[i];

		if (c >= 0x20 && (c != 0x7f || json) && c != '"' && c != '\\')
			continue;
		kgq_put(r, s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"':
			kgq_put(r, "\\\"", 2);
			break;
		case '\\':
			kgq_put(r, "\\\\", 2);
			break;
		case '\n':
			kgq_put(r, "\\n", 2);
			break;
		case '\t':
			kgq_put(r, "\\t", 2);
			break;
		case '\r':
			kgq_put(r, "\\r", 2);
			break;
		default:
			snprintf(e, sizeof(e), json ? "\\u%04x" : "\\x%02x", c);
			kgq_put(r, e, json ? 6 : 4);
		}
	}
	kgq_put(r, s + run, len - run);
	kgq_put(r, "\"", 1);
}

static void
sexp_str(struct kgq_run *r, const char *s, size_t len)
{
	put_str(r, s, len, 0);
}

static void
json_str(struct kgq_run *r, const char *s, size_t len)
{
	put_str(r, s, len, 1);
}


/* The field printed right after the key, without its keyword. */
static const char *
textfield(enum kg_kind k)
{
	return k == KG_FILE ? "summary" : "description";
}

static void
sexp_ent(struct kgq_run *r, const struct kg_entity *ent)
{
	enum kg_kind		 k = kg_entity_kind(ent);
	const char *const	*f = kg_fields(k);
	const char		*text = textfield(k), *key;
	struct kg_val		 fv;
	size_t			 i, j;

	kgq_put(r, "(", 1);
	puts_(r, kg_kind_name(k));
	kgq_put(r, " ", 1);
	key = kg_entity_name(ent);
	sexp_str(r, key, strlen(key));
	if (kg_field(ent, text, &fv) == 0 && fv.type == KG_V_STR) {
		kgq_put(r, " ", 1);
		sexp_str(r, fv.str, strlen(fv.str));
	}
	for (i = 1; f[i] != NULL; i++) {
		if (strcmp(f[i], text) == 0 || strcmp(f[i], "seq") == 0)
			continue;
		if (kg_field(ent, f[i], &fv) != 0)
			continue;
		if (fv.type == KG_V_NONE ||
		    (fv.type == KG_V_LIST && fv.n == 0) ||
		    (fv.type == KG_V_BOOL && fv.num == 0))
			continue;
		kgq_put(r, " :", 2);
		puts_(r, f[i]);
		kgq_put(r, " ", 1);
		switch (fv.type) {
		case KG_V_STR:
			sexp_str(r, fv.str, strlen(fv.str));
			break;
		case KG_V_NUM:
			putnum(r, fv.num);
			break;
		case KG_V_BOOL:
			kgq_put(r, "#t", 2);
			break;
		case KG_V_LIST:
			kgq_put(r, "[", 1);
			for (j = 0; j < fv.n; j++) {
				if (j > 0)
					kgq_put(r, " ", 1);
				sexp_str(r, fv.list[j], strlen(fv.list[j]));
			}
			kgq_put(r, "]", 1);
			break;
		case KG_V_NONE:
			break;
		}
	}
	kgq_put(r, ")", 1);
}

static void
putfn(struct kgq_run *r, const struct kgq_val *v, int json)
{
	char	b[KG_NAME_MAX + 32];

	snprintf(b, sizeof(b), "%s#<%s %s>%s", json ? "\"" : "",
	    v->type == KQ_FN ? "function" : "lambda",
	    v->type == KQ_FN ? v->u.fn->name : v->u.lam->name,
	    json ? "\"" : "");
	puts_(r, b);
}

void
kgq_print_sexp(struct kgq_run *r, const struct kgq_val *v)
{
	size_t	i;

	switch (v->type) {
	case KQ_NIL:
		kgq_put(r, "nil", 3);
		break;
	case KQ_BOOL:
		kgq_put(r, v->u.b ? "#t" : "#f", 2);
		break;
	case KQ_NUM:
		putnum(r, v->u.num);
		break;
	case KQ_STR:
		sexp_str(r, v->u.str.s, v->u.str.len);
		break;
	case KQ_SYM:
		kgq_put(r, v->u.str.s, v->u.str.len);
		break;
	case KQ_KW:
		kgq_put(r, ":", 1);
		kgq_put(r, v->u.str.s, v->u.str.len);
		break;
	case KQ_LIST:
		kgq_enter(r);
		kgq_put(r, "(list", 5);
		for (i = 0; i < v->u.list.n; i++) {
			kgq_put(r, " ", 1);
			kgq_print_sexp(r, v->u.list.v[i]);
		}
		kgq_put(r, ")", 1);
		kgq_leave(r);
		break;
	case KQ_FN:
	case KQ_LAMBDA:
		putfn(r, v, 0);
		break;
	case KQ_ENT:
		sexp_ent(r, v->u.ent);
		break;
	}
}

static void
json_ent(struct kgq_run *r, const struct kg_entity *ent)
{
	cJSON	*j;
	char	*s;
	size_t	 len;

	if ((j = kg_entity_json(ent)) == NULL) {
		r->code = NULL;
		longjmp(r->jb, 1);
	}
	s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (s == NULL) {
		r->code = NULL;
		longjmp(r->jb, 1);
	}
	len = strlen(s);
	/* Checked here so that s is not lost to kgq_put's longjmp. */
	if (len > r->lim.out || r->out.len > r->lim.out - len) {
		free(s);
		over(r);
	}
	kgq_put(r, s, len);
	free(s);
}

void
kgq_print_json(struct kgq_run *r, const struct kgq_val *v)
{
	size_t	 i;
	char	*kw;

	switch (v->type) {
	case KQ_NIL:
		kgq_put(r, "null", 4);
		break;
	case KQ_BOOL:
		puts_(r, v->u.b ? "true" : "false");
		break;
	case KQ_NUM:
		putnum(r, v->u.num);
		break;
	case KQ_STR:
	case KQ_SYM:
		json_str(r, v->u.str.s, v->u.str.len);
		break;
	case KQ_KW:
		kw = kgq_alloc(r, v->u.str.len + 2);
		kw[0] = ':';
		memcpy(kw + 1, v->u.str.s, v->u.str.len);
		json_str(r, kw, v->u.str.len + 1);
		break;
	case KQ_LIST:
		kgq_enter(r);
		kgq_put(r, "[", 1);
		for (i = 0; i < v->u.list.n; i++) {
			if (i > 0)
				kgq_put(r, ",", 1);
			kgq_print_json(r, v->u.list.v[i]);
		}
		kgq_put(r, "]", 1);
		kgq_leave(r);
		break;
	case KQ_FN:
	case KQ_LAMBDA:
		putfn(r, v, 1);
		break;
	case KQ_ENT:
		json_ent(r, v->u.ent);
		break;
	}
}
