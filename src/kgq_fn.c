/*
 * The functions a query may call (kgq.h): the graph's, which only read it
 * through kg.h's read API, and the list and value functions.  None of
 * them writes, does I/O or evaluates text; each checks its arguments'
 * types and says what it wanted.  Lists they return live in the run's
 * arena; strings and entities point into the graph, which does not
 * change during a run.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kgq_int.h"

#define ARGS	struct kgq_run *r, struct kgq_val **a, size_t n
#define MANY	SIZE_MAX

static void __attribute__((noreturn))
badarg(struct kgq_run *r, const char *fn, size_t i, const char *want,
    const struct kgq_val *got)
{
	const struct kgq_fn	*f = kgq_lookup_fn(fn);

	kgq_fail(r, "QUERY_ERROR", "%s: argument %zu must be %s, got %s; "
	    "write %s", fn, i + 1, want, kgq_typename(got),
	    f ? f->usage : fn);
}

static const char *
want_str(struct kgq_run *r, const char *fn, struct kgq_val **a, size_t i)
{
	if (a[i]->type != KQ_STR)
		badarg(r, fn, i, "a string", a[i]);
	return a[i]->u.str.s;
}

/* A list argument; nil counts as the empty list. */
static struct kgq_val *
want_list(struct kgq_run *r, const char *fn, struct kgq_val **a, size_t i)
{
	static struct kgq_val	empty = { .type = KQ_LIST };

	if (a[i]->type == KQ_NIL)
		return &empty;
	if (a[i]->type != KQ_LIST)
		badarg(r, fn, i, "a list", a[i]);
	return a[i];
}

static void
want_fn(struct kgq_run *r, const char *fn, struct kgq_val **a, size_t i)
{
	if (a[i]->type != KQ_FN && a[i]->type != KQ_LAMBDA &&
	    a[i]->type != KQ_KW)
		badarg(r, fn, i, "a function (lambda (x) ...) or a "
		    ":keyword", a[i]);
}

static struct kgq_val *
ent(struct kgq_run *r, const struct kg_entity *e)
{
	struct kgq_val	*v;

	if (e == NULL)
		return &kgq_nil;
	v = kgq_new(r, KQ_ENT);
	v->u.ent = e;
	return v;
}

/* A list of the n entities of es. */
static struct kgq_val *
entlist(struct kgq_run *r, const struct kg_entity **es, size_t n)
{
	struct kgq_val	*l = kgq_list(r, n), *vs;
	size_t		 i;

	kgq_cost(r, n / KGQ_COST_ITEMS);
	if (n > 0) {
		vs = kgq_alloc(r, n * sizeof(*vs));
		for (i = 0; i < n; i++) {
			vs[i].type = KQ_ENT;
			vs[i].u.ent = es[i];
			l->u.list.v[i] = &vs[i];
		}
	}
	return l;
}

/* Room for n entity pointers, counted against mem. */
static const struct kg_entity **
entbuf(struct kgq_run *r, size_t n)
{
	if (n > SIZE_MAX / sizeof(void *) / 4)
		kgq_fail(r, "QUERY_LIMIT", "mem: %zu entities is too many",
		    n);
	return kgq_alloc(r, (n ? n : 1) * sizeof(struct kg_entity *));
}

/* Live entities of every kind. */
static size_t
total(struct kgq_run *r)
{
	size_t	tot = 0;
	int	k;

	for (k = 0; k < KG_NKINDS; k++)
		tot += kg_count(r->g, k);
	return tot;
}

static struct kgq_val *
all(struct kgq_run *r, enum kg_kind k)
{
	size_t			  n = kg_all(r->g, k, NULL, 0);
	const struct kg_entity	**es = entbuf(r, n);

	n = kg_all(r->g, k, es, n);
	return entlist(r, es, n);
}

/* Live entities of kind k whose field equals value (a string). */
static struct kgq_val *
where(struct kgq_run *r, enum kg_kind k, const char *field,
    const char *value)
{
	size_t			  n = kg_all(r->g, k, NULL, 0), i, m = 0;
	const struct kg_entity	**es = entbuf(r, n);
	struct kg_val		  fv;

	n = kg_all(r->g, k, es, n);
	kgq_cost(r, n / KGQ_COST_SCAN);
	for (i = 0; i < n; i++)
		if (kg_field(es[i], field, &fv) == 0 &&
		    fv.type == KG_V_STR && strcmp(fv.str, value) == 0)
			es[m++] = es[i];
	return entlist(r, es, m);
}

static struct kgq_val *
links(struct kgq_run *r, const char *name, int dir)
{
	size_t			  n = kg_links(r->g, name, dir, NULL, 0);
	const struct kg_entity	**es = entbuf(r, n);

	n = kg_links(r->g, name, dir, es, n);
	return entlist(r, es, n);
}

struct kgq_val *
kgq_field(struct kgq_run *r, const struct kg_entity *e, const char *field)
{
	const char *const	*f;
	struct kg_val		 fv;
	struct kgq_val		*l;
	char			 names[512];
	size_t			 i, at = 0;

	if (kg_field(e, field, &fv) != 0) {
		names[0] = '\0';
		f = kg_fields(kg_entity_kind(e));
		for (i = 0; f[i] != NULL && at < sizeof(names); i++)
			at += (size_t)snprintf(names + at, sizeof(names) - at,
			    "%s:%s", i ? " " : "", f[i]);
		kgq_fail(r, "QUERY_ERROR", "a %s has no field :%s; its fields "
		    "are %s", kg_kind_name(kg_entity_kind(e)), field, names);
	}
	switch (fv.type) {
	case KG_V_STR:
		return kgq_str(r, fv.str, strlen(fv.str));
	case KG_V_NUM:
		return kgq_num(r, fv.num);
	case KG_V_BOOL:
		return kgq_bool(fv.num != 0);
	case KG_V_LIST:
		l = kgq_list(r, fv.n);
		for (i = 0; i < fv.n; i++)
			l->u.list.v[i] = kgq_str(r, fv.list[i],
			    strlen(fv.list[i]));
		return l;
	case KG_V_NONE:
		break;
	}
	return &kgq_nil;
}

/* --- the graph --- */

static struct kgq_val *
f_principles(ARGS)
{
	(void)a, (void)n;
	return all(r, KG_PRINCIPLE);
}

static struct kgq_val *
f_principle(ARGS)
{
	(void)n;
	return ent(r, kg_get(r->g, KG_PRINCIPLE,
	    want_str(r, "get-principle", a, 0)));
}

static struct kgq_val *
f_patterns(ARGS)
{
	(void)a, (void)n;
	return all(r, KG_PATTERN);
}

static struct kgq_val *
f_pattern(ARGS)
{
	(void)n;
	return ent(r, kg_get(r->g, KG_PATTERN,
	    want_str(r, "get-pattern", a, 0)));
}

static struct kgq_val *
f_patterns_by_type(ARGS)
{
	(void)n;
	return where(r, KG_PATTERN, "type",
	    want_str(r, "get-patterns-by-type", a, 0));
}

static struct kgq_val *
f_decisions(ARGS)
{
	(void)a, (void)n;
	return all(r, KG_DECISION);
}

static struct kgq_val *
f_decision(ARGS)
{
	(void)n;
	return ent(r, kg_get(r->g, KG_DECISION,
	    want_str(r, "get-decision", a, 0)));
}

static struct kgq_val *
f_decisions_by_status(ARGS)
{
	(void)n;
	return where(r, KG_DECISION, "status",
	    want_str(r, "get-decisions-by-status", a, 0));
}

static struct kgq_val *
f_files(ARGS)
{
	(void)a, (void)n;
	return all(r, KG_FILE);
}

static struct kgq_val *
f_file(ARGS)
{
	(void)n;
	return ent(r, kg_get(r->g, KG_FILE,
	    want_str(r, "get-file-understanding", a, 0)));
}

static int
strp_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 when name is a file: a file understanding's path, or no entity's. */
static int
is_file(const struct kg *g, const char *name)
{
	return kg_get(g, KG_FILE, name) != NULL ||
	    (kg_get(g, KG_PRINCIPLE, name) == NULL &&
	    kg_get(g, KG_PATTERN, name) == NULL &&
	    kg_get(g, KG_DECISION, name) == NULL);
}

static struct kgq_val *
f_related_files(ARGS)
{
	const char		 *path = want_str(r, "get-related-files", a, 0);
	const struct kg_entity	 *fe, **ls;
	const char		**names, *o;
	struct kg_val		  fv;
	struct kgq_val		 *l;
	size_t			  nrel = 0, nf, nt, i, m = 0, k;

	(void)n;
	if ((fe = kg_get(r->g, KG_FILE, path)) != NULL &&
	    kg_field(fe, "relatedFiles", &fv) == 0 && fv.type == KG_V_LIST)
		nrel = fv.n;
	nf = kg_links(r->g, path, 0, NULL, 0);
	nt = kg_links(r->g, path, 1, NULL, 0);
	ls = entbuf(r, nf + nt);
	nf = kg_links(r->g, path, 0, ls, nf);
	nt = kg_links(r->g, path, 1, ls + nf, nt);
	names = (const char **)entbuf(r, nrel + nf + nt);
	for (i = 0; i < nrel; i++)
		names[m++] = fv.list[i];
	for (i = 0; i < nf + nt; i++) {
		if (i < nf) {
			struct kg_val	to;

			if (kg_field(ls[i], "to", &to) != 0 ||
			    to.type != KG_V_STR)
				continue;
			o = to.str;
		} else
			o = kg_entity_name(ls[i]);
		if (strcmp(o, path) != 0 && is_file(r->g, o))
			names[m++] = o;
	}
	qsort(names, m, sizeof(*names), strp_cmp);
	for (i = k = 0; i < m; i++)
		if (k == 0 || strcmp(names[k - 1], names[i]) != 0)
			names[k++] = names[i];
	l = kgq_list(r, k);
	for (i = 0; i < k; i++)
		l->u.list.v[i] = kgq_str(r, names[i], strlen(names[i]));
	return l;
}

static struct kgq_val *
f_relationships(ARGS)
{
	(void)a, (void)n;
	return all(r, KG_RELATIONSHIP);
}

static struct kgq_val *
f_rel_from(ARGS)
{
	(void)n;
	return links(r, want_str(r, "get-relationships-from", a, 0), 0);
}

static struct kgq_val *
f_rel_to(ARGS)
{
	(void)n;
	return links(r, want_str(r, "get-relationships-to", a, 0), 1);
}

static struct kgq_val *
f_search(ARGS)
{
	const char		 *t = want_str(r, "search-knowledge", a, 0);
	size_t			  m;
	const struct kg_entity	**es;

	(void)n;
	if (*t == '\0')
		kgq_fail(r, "QUERY_ERROR", "search-knowledge: the text is "
		    "empty; write (search-knowledge \"word\")");
	kgq_cost(r, total(r) / KGQ_COST_SCAN);
	m = kg_search(r->g, t, NULL, 0);
	es = entbuf(r, m);
	m = kg_search(r->g, t, es, m);
	return entlist(r, es, m);
}

static struct kgq_val *
f_refs(ARGS)
{
	const char		 *p = want_str(r, "get-refs", a, 0);
	size_t			  m;
	const struct kg_entity	**es;

	(void)n;
	kgq_cost(r, total(r) / KGQ_COST_SCAN);
	m = kg_refs(r->g, p, NULL, 0);
	es = entbuf(r, m);
	m = kg_refs(r->g, p, es, m);
	return entlist(r, es, m);
}

/*
 * Entities of every kind, in kind then key order, that keep() accepts
 * (arg: its argument).
 */
static struct kgq_val *
every(struct kgq_run *r, int (*keep)(const struct kg_entity *,
    const char *), const char *arg)
{
	size_t			  tot, n, i, m = 0, kept;
	const struct kg_entity	**es;
	int			  k;

	tot = total(r);
	kgq_cost(r, tot / KGQ_COST_SCAN);
	es = entbuf(r, tot);
	for (k = 0; k < KG_NKINDS; k++) {
		n = kg_all(r->g, k, es + m, tot - m);
		for (i = kept = 0; i < n; i++)
			if (keep(es[m + i], arg))
				es[m + kept++] = es[m + i];
		m += kept;
	}
	return entlist(r, es, m);
}

static int
is_stale(const struct kg_entity *e, const char *arg)
{
	struct kg_val	fv;

	(void)arg;
	return kg_field(e, "stale", &fv) == 0 && fv.type == KG_V_BOOL &&
	    fv.num != 0;
}

static int
has_tag(const struct kg_entity *e, const char *tag)
{
	struct kg_val	fv;
	size_t		i;

	if (kg_field(e, "tags", &fv) != 0 || fv.type != KG_V_LIST)
		return 0;
	for (i = 0; i < fv.n; i++)
		if (strcmp(fv.list[i], tag) == 0)
			return 1;
	return 0;
}

static struct kgq_val *
f_stale(ARGS)
{
	(void)a, (void)n;
	return every(r, is_stale, NULL);
}

static struct kgq_val *
f_by_tag(ARGS)
{
	(void)n;
	return every(r, has_tag, want_str(r, "get-by-tag", a, 0));
}

static struct kgq_val *
f_entity(ARGS)
{
	const char		*key = want_str(r, "get-entity", a, 0);
	const struct kg_entity	*e;
	int			 k;

	(void)n;
	for (k = 0; k < KG_RELATIONSHIP; k++)
		if ((e = kg_get(r->g, k, key)) != NULL)
			return ent(r, e);
	return &kgq_nil;
}

static struct kgq_val *
f_at(ARGS)
{
	(void)n;
	if (a[0]->type == KQ_NIL)
		return &kgq_nil;
	if (a[0]->type != KQ_ENT)
		badarg(r, "@", 0, "an entity", a[0]);
	if (a[1]->type != KQ_KW && a[1]->type != KQ_STR)
		badarg(r, "@", 1, "a :keyword", a[1]);
	return kgq_field(r, a[0]->u.ent, a[1]->u.str.s);
}

static struct kgq_val *
f_kind(ARGS)
{
	const char	*k;

	(void)n;
	if (a[0]->type != KQ_ENT)
		badarg(r, "kind", 0, "an entity", a[0]);
	k = kg_kind_name(kg_entity_kind(a[0]->u.ent));
	return kgq_str(r, k, strlen(k));
}

/* --- lists and values --- */

static struct kgq_val *
f_filter(ARGS)
{
	struct kgq_val	*l, *out;
	size_t		 i, m = 0;

	(void)n;
	want_fn(r, "filter", a, 0);
	l = want_list(r, "filter", a, 1);
	out = kgq_list(r, l->u.list.n);
	for (i = 0; i < l->u.list.n; i++)
		if (kgq_truthy(kgq_apply(r, a[0], &l->u.list.v[i], 1)))
			out->u.list.v[m++] = l->u.list.v[i];
	out->u.list.n = m;
	return out;
}

static struct kgq_val *
f_map(ARGS)
{
	struct kgq_val	*l, *out;
	size_t		 i;

	(void)n;
	want_fn(r, "map", a, 0);
	l = want_list(r, "map", a, 1);
	out = kgq_list(r, l->u.list.n);
	for (i = 0; i < l->u.list.n; i++)
		out->u.list.v[i] = kgq_apply(r, a[0], &l->u.list.v[i], 1);
	return out;
}

struct sortkey {
	struct kgq_val	*key, *item;
	size_t		 idx;
	int		 desc;
};

/* nil last either way; equal keys keep their order. */
static int
sortkey_cmp(const void *pa, const void *pb)
{
	const struct sortkey	*x = pa, *y = pb;
	int			 c;

	if (x->key->type == KQ_NIL || y->key->type == KQ_NIL) {
		if (x->key->type != y->key->type)
			return x->key->type == KQ_NIL ? 1 : -1;
		c = 0;
	} else if (x->key->type == KQ_NUM)
		c = x->key->u.num < y->key->u.num ? -1 :
		    x->key->u.num > y->key->u.num;
	else {
		size_t	l = x->key->u.str.len < y->key->u.str.len ?
		    x->key->u.str.len : y->key->u.str.len;

		c = memcmp(x->key->u.str.s, y->key->u.str.s, l);
		if (c == 0)
			c = x->key->u.str.len < y->key->u.str.len ? -1 :
			    x->key->u.str.len > y->key->u.str.len;
	}
	if (c != 0)
		return x->desc ? -c : c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static struct kgq_val *
f_sort_by(ARGS)
{
	struct kgq_val	*l, *out;
	struct sortkey	*ks;
	enum kgq_type	 t = KQ_NIL;
	size_t		 i;
	int		 desc = 0;

	want_fn(r, "sort-by", a, 0);
	l = want_list(r, "sort-by", a, 1);
	if (n == 3) {
		if (a[2]->type == KQ_KW && strcmp(a[2]->u.str.s, "desc") == 0)
			desc = 1;
		else if (a[2]->type != KQ_KW ||
		    strcmp(a[2]->u.str.s, "asc") != 0)
			badarg(r, "sort-by", 2, ":asc or :desc", a[2]);
	}
	ks = kgq_alloc(r, (l->u.list.n ? l->u.list.n : 1) * sizeof(*ks));
	for (i = 0; i < l->u.list.n; i++) {
		ks[i].item = l->u.list.v[i];
		ks[i].key = kgq_apply(r, a[0], &l->u.list.v[i], 1);
		ks[i].idx = i;
		ks[i].desc = desc;
		if (ks[i].key->type == KQ_NIL)
			continue;
		if (ks[i].key->type != KQ_NUM && ks[i].key->type != KQ_STR)
			kgq_fail(r, "QUERY_ERROR", "sort-by: the key of item "
			    "%zu is %s; keys must be numbers or strings (or "
			    "nil, sorted last)", i + 1,
			    kgq_typename(ks[i].key));
		if (t != KQ_NIL && t != ks[i].key->type)
			kgq_fail(r, "QUERY_ERROR", "sort-by: the keys mix "
			    "numbers and strings; make them all one");
		t = ks[i].key->type;
	}
	kgq_cost(r, l->u.list.n / 4);	/* n log n comparisons */
	qsort(ks, l->u.list.n, sizeof(*ks), sortkey_cmp);
	out = kgq_list(r, l->u.list.n);
	for (i = 0; i < l->u.list.n; i++)
		out->u.list.v[i] = ks[i].item;
	return out;
}

static struct kgq_val *
f_take(ARGS)
{
	struct kgq_val	*l, *out;
	double		 k;

	(void)n;
	if (a[0]->type != KQ_NUM || a[0]->u.num < 0 ||
	    a[0]->u.num != floor(a[0]->u.num))
		badarg(r, "take", 0, "a whole number from 0", a[0]);
	k = a[0]->u.num;
	l = want_list(r, "take", a, 1);
	out = kgq_list(r, 0);
	out->u.list.v = l->u.list.v;
	out->u.list.n = k < (double)l->u.list.n ? (size_t)k : l->u.list.n;
	return out;
}

static struct kgq_val *
f_count(ARGS)
{
	(void)n;
	return kgq_num(r, (double)want_list(r, "count", a, 0)->u.list.n);
}

static struct kgq_val *
f_length(ARGS)
{
	(void)n;
	if (a[0]->type == KQ_STR)
		return kgq_num(r, (double)a[0]->u.str.len);
	return kgq_num(r, (double)want_list(r, "length", a, 0)->u.list.n);
}

static struct kgq_val *
f_first(ARGS)
{
	struct kgq_val	*l = want_list(r, "first", a, 0);

	(void)n;
	return l->u.list.n ? l->u.list.v[0] : &kgq_nil;
}

static struct kgq_val *
f_rest(ARGS)
{
	struct kgq_val	*l = want_list(r, "rest", a, 0), *out;

	(void)n;
	out = kgq_list(r, 0);
	if (l->u.list.n > 0) {
		out->u.list.v = l->u.list.v + 1;
		out->u.list.n = l->u.list.n - 1;
	}
	return out;
}

static struct kgq_val *
f_list(ARGS)
{
	struct kgq_val	*l = kgq_list(r, n);

	if (n > 0)
		memcpy(l->u.list.v, a, n * sizeof(*a));
	return l;
}

static struct kgq_val *
f_not(ARGS)
{
	(void)r, (void)n;
	return kgq_bool(!kgq_truthy(a[0]));
}

int
kgq_equal(struct kgq_run *r, const struct kgq_val *x,
    const struct kgq_val *y)
{
	size_t	i;
	int	eq = 1;

	if (x->type != y->type)
		return 0;
	switch (x->type) {
	case KQ_NIL:
		return 1;
	case KQ_BOOL:
		return x->u.b == y->u.b;
	case KQ_NUM:
		return x->u.num == y->u.num;
	case KQ_STR:
	case KQ_SYM:
	case KQ_KW:
		if (x->u.str.len != y->u.str.len)
			return 0;
		kgq_cost(r, x->u.str.len / KGQ_COST_BYTES);
		return memcmp(x->u.str.s, y->u.str.s, x->u.str.len) == 0;
	case KQ_LIST:
		if (x->u.list.n != y->u.list.n)
			return 0;
		kgq_cost(r, x->u.list.n / KGQ_COST_ITEMS);
		kgq_enter(r);
		for (i = 0; i < x->u.list.n && eq; i++)
			eq = kgq_equal(r, x->u.list.v[i], y->u.list.v[i]);
		kgq_leave(r);
		return eq;
	case KQ_FN:
		return x->u.fn == y->u.fn;
	case KQ_LAMBDA:
		return x->u.lam == y->u.lam;
	case KQ_ENT:
		return x->u.ent == y->u.ent;
	}
	return 0;
}

static struct kgq_val *
f_eq(ARGS)
{
	size_t	i;

	for (i = 1; i < n; i++)
		if (!kgq_equal(r, a[0], a[i]))
			return &kgq_false;
	return &kgq_true;
}

/* <, >, <=, >=: numbers with numbers, strings with strings; nil: #f. */
static struct kgq_val *
order(struct kgq_run *r, struct kgq_val **a, size_t n, const char *op)
{
	size_t	i, l;
	int	c, ok;

	for (i = 0; i < n; i++)
		if (a[i]->type == KQ_NIL)
			return &kgq_false;
	for (i = 0; i < n; i++)
		if ((a[i]->type != KQ_NUM && a[i]->type != KQ_STR) ||
		    a[i]->type != a[0]->type)
			kgq_fail(r, "QUERY_ERROR", "%s compares numbers with "
			    "numbers or strings with strings; argument %zu "
			    "is %s and argument 1 %s", op, i + 1,
			    kgq_typename(a[i]), kgq_typename(a[0]));
	for (i = 0; i + 1 < n; i++) {
		if (a[i]->type == KQ_NUM)
			c = a[i]->u.num < a[i + 1]->u.num ? -1 :
			    a[i]->u.num > a[i + 1]->u.num;
		else {
			l = a[i]->u.str.len < a[i + 1]->u.str.len ?
			    a[i]->u.str.len : a[i + 1]->u.str.len;
			kgq_cost(r, l / KGQ_COST_BYTES);
			c = memcmp(a[i]->u.str.s, a[i + 1]->u.str.s, l);
			if (c == 0)
				c = a[i]->u.str.len < a[i + 1]->u.str.len ?
				    -1 : a[i]->u.str.len > a[i + 1]->u.str.len;
		}
		if (op[0] == '<')
			ok = op[1] == '=' ? c <= 0 : c < 0;
		else
			ok = op[1] == '=' ? c >= 0 : c > 0;
		if (!ok)
			return &kgq_false;
	}
	return &kgq_true;
}

static struct kgq_val *
f_lt(ARGS)
{
	return order(r, a, n, "<");
}

static struct kgq_val *
f_gt(ARGS)
{
	return order(r, a, n, ">");
}

static struct kgq_val *
f_le(ARGS)
{
	return order(r, a, n, "<=");
}

static struct kgq_val *
f_ge(ARGS)
{
	return order(r, a, n, ">=");
}

static struct kgq_val *
f_contains(ARGS)
{
	struct kgq_val	*s = a[0], *x = a[1];
	size_t		 i;

	(void)n;
	if (s->type == KQ_NIL)
		return &kgq_false;
	if (s->type == KQ_LIST) {
		kgq_cost(r, s->u.list.n / KGQ_COST_ITEMS);
		for (i = 0; i < s->u.list.n; i++)
			if (kgq_equal(r, s->u.list.v[i], x))
				return &kgq_true;
		return &kgq_false;
	}
	if (s->type != KQ_STR)
		badarg(r, "contains?", 0, "a string or a list", s);
	if (x->type != KQ_STR)
		badarg(r, "contains?", 1, "a string (the first is a string)",
		    x);
	/* memmem is linear: no pair of long strings makes this slow */
	kgq_cost(r, s->u.str.len / KGQ_COST_BYTES);
	return kgq_bool(x->u.str.len == 0 || memmem(s->u.str.s, s->u.str.len,
	    x->u.str.s, x->u.str.len) != NULL);
}

static struct kgq_val *
f_starts_with(ARGS)
{
	const char	*p;

	(void)n;
	if (a[0]->type == KQ_NIL)
		return &kgq_false;
	want_str(r, "starts-with?", a, 0);
	p = want_str(r, "starts-with?", a, 1);
	kgq_cost(r, a[1]->u.str.len / KGQ_COST_BYTES);
	return kgq_bool(a[1]->u.str.len <= a[0]->u.str.len &&
	    memcmp(a[0]->u.str.s, p, a[1]->u.str.len) == 0);
}

static struct kgq_val *
f_lower(ARGS)
{
	char	*s;
	size_t	 i;

	(void)n;
	if (a[0]->type == KQ_NIL)
		return &kgq_nil;
	want_str(r, "lower", a, 0);
	kgq_cost(r, a[0]->u.str.len / KGQ_COST_BYTES);
	s = kgq_alloc(r, a[0]->u.str.len + 1);
	for (i = 0; i < a[0]->u.str.len; i++) {
		char	c = a[0]->u.str.s[i];

		s[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	return kgq_str(r, s, a[0]->u.str.len);
}

/* The text str gives v, in (*p, *len); buf for numbers. */
static void
strpart(struct kgq_run *r, const struct kgq_val *v, size_t i, char *buf,
    size_t bufsz, const char **p, size_t *len)
{
	switch (v->type) {
	case KQ_STR:
	case KQ_SYM:
		*p = v->u.str.s;
		*len = v->u.str.len;
		return;
	case KQ_KW:
		*p = v->u.str.s - 1;	/* the reader's ':' before it */
		*len = v->u.str.len + 1;
		return;
	case KQ_NUM:
		kgq_fmtnum(v->u.num, buf, bufsz);
		break;
	case KQ_BOOL:
		snprintf(buf, bufsz, "%s", v->u.b ? "#t" : "#f");
		break;
	case KQ_NIL:
		buf[0] = '\0';
		break;
	default:
		badarg(r, "str", i, "a string, number, symbol, keyword, "
		    "boolean or nil", v);
	}
	*p = buf;
	*len = strlen(buf);
}

static struct kgq_val *
f_str(ARGS)
{
	char		 nb[40], *s;
	const char	*p;
	size_t		 i, len, tot = 0;

	for (i = 0; i < n; i++) {
		strpart(r, a[i], i, nb, sizeof(nb), &p, &len);
		if (len > r->lim.mem || tot > r->lim.mem - len)
			kgq_fail(r, "QUERY_LIMIT", "mem: the string would be "
			    "over %zu bytes", r->lim.mem);
		tot += len;
	}
	kgq_cost(r, tot / KGQ_COST_BYTES);
	s = kgq_alloc(r, tot + 1);
	for (tot = 0, i = 0; i < n; i++) {
		strpart(r, a[i], i, nb, sizeof(nb), &p, &len);
		memcpy(s + tot, p, len);
		tot += len;
	}
	return kgq_str(r, s, tot);
}

const struct kgq_fn kgq_fntab[] = {
	{ "get-principles", 0, 0, "(get-principles)", f_principles,
	  "every principle, by name" },
	{ "get-principle", 1, 1, "(get-principle \"NAME\")", f_principle,
	  "the principle NAME, or nil" },
	{ "get-patterns", 0, 0, "(get-patterns)", f_patterns,
	  "every pattern, by name" },
	{ "get-pattern", 1, 1, "(get-pattern \"NAME\")", f_pattern,
	  "the pattern NAME, or nil" },
	{ "get-patterns-by-type", 1, 1, "(get-patterns-by-type \"TYPE\")",
	  f_patterns_by_type, "the patterns whose type is TYPE" },
	{ "get-decisions", 0, 0, "(get-decisions)", f_decisions,
	  "every decision, by name" },
	{ "get-decision", 1, 1, "(get-decision \"NAME\")", f_decision,
	  "the decision NAME, or nil" },
	{ "get-decisions-by-status", 1, 1,
	  "(get-decisions-by-status \"STATUS\")", f_decisions_by_status,
	  "the decisions whose status is STATUS (active, deprecated, "
	  "superseded...)" },
	{ "get-files", 0, 0, "(get-files)", f_files,
	  "every file understanding, by path" },
	{ "get-file-understanding", 1, 1,
	  "(get-file-understanding \"PATH\")", f_file,
	  "the file understanding of PATH, or nil" },
	{ "get-related-files", 1, 1, "(get-related-files \"PATH\")",
	  f_related_files, "paths related to PATH: its understanding's "
	  "relatedFiles and the files linked to or from it, sorted, as "
	  "strings" },
	{ "get-relationships", 0, 0, "(get-relationships)",
	  f_relationships, "every relationship, by from, to, type" },
	{ "get-relationships-from", 1, 1,
	  "(get-relationships-from \"NAME\")", f_rel_from,
	  "the relationships whose from is NAME" },
	{ "get-relationships-to", 1, 1, "(get-relationships-to \"NAME\")",
	  f_rel_to, "the relationships whose to is NAME" },
	{ "search-knowledge", 1, 1, "(search-knowledge \"TEXT\")", f_search,
	  "entities any of whose text fields contain TEXT (ASCII case "
	  "ignored), by kind then key" },
	{ "get-refs", 1, 1, "(get-refs \"PATH\")", f_refs,
	  "entities that refer to PATH: its understanding, entities located "
	  "in it (\"PATH\" or \"PATH:line\"), relationships from or to it" },
	{ "get-stale", 0, 0, "(get-stale)", f_stale,
	  "entities marked stale (their file changed since), by kind then "
	  "key" },
	{ "get-by-tag", 1, 1, "(get-by-tag \"TAG\")", f_by_tag,
	  "entities tagged TAG, by kind then key" },
	{ "get-entity", 1, 1, "(get-entity \"KEY\")", f_entity,
	  "the principle, pattern, decision or file understanding of that "
	  "name or path (in that order), or nil" },
	{ "@", 2, 2, "(@ ENTITY :field)", f_at,
	  "a field of an entity (nil when unset; (@ nil :f) is nil); "
	  "(:field ENTITY) is the same" },
	{ "kind", 1, 1, "(kind ENTITY)", f_kind,
	  "\"principle\", \"pattern\", \"decision\", \"file\" or "
	  "\"relationship\"" },
	{ "filter", 2, 2, "(filter (lambda (x) TEST) LIST)", f_filter,
	  "the items for which the function is true (not #f or nil)" },
	{ "map", 2, 2, "(map (lambda (x) EXPR) LIST)", f_map,
	  "the function's value for each item" },
	{ "sort-by", 2, 3, "(sort-by (lambda (x) KEY) LIST [:desc])",
	  f_sort_by, "the items ordered by their keys (numbers or strings; "
	  "nil keys last), ascending or :desc, stable" },
	{ "take", 2, 2, "(take N LIST)", f_take, "the first N items" },
	{ "count", 1, 1, "(count LIST)", f_count,
	  "the number of items (nil: 0)" },
	{ "length", 1, 1, "(length LIST-OR-STRING)", f_length,
	  "the number of items, or of bytes of a string" },
	{ "first", 1, 1, "(first LIST)", f_first,
	  "the first item, or nil" },
	{ "rest", 1, 1, "(rest LIST)", f_rest,
	  "every item but the first" },
	{ "list", 0, MANY, "(list X ...)", f_list, "a list of its arguments" },
	{ "not", 1, 1, "(not X)", f_not, "#t when X is #f or nil" },
	{ "=", 2, MANY, "(= A B ...)", f_eq,
	  "#t when all are equal (lists item by item, entities the same "
	  "one)" },
	{ "<", 2, MANY, "(< A B ...)", f_lt,
	  "numbers or strings in increasing order; #f with a nil" },
	{ ">", 2, MANY, "(> A B ...)", f_gt,
	  "decreasing order; #f with a nil" },
	{ "<=", 2, MANY, "(<= A B ...)", f_le, "non-decreasing" },
	{ ">=", 2, MANY, "(>= A B ...)", f_ge, "non-increasing" },
	{ "contains?", 2, 2, "(contains? STRING-OR-LIST X)", f_contains,
	  "whether the string holds the substring X (case counts), or the "
	  "list an item equal to X" },
	{ "starts-with?", 2, 2, "(starts-with? STRING PREFIX)",
	  f_starts_with, "whether the string starts with PREFIX" },
	{ "lower", 1, 1, "(lower STRING)", f_lower,
	  "the string in ASCII lower case" },
	{ "str", 0, MANY, "(str X ...)", f_str,
	  "its arguments' text joined (numbers as printed, nil as \"\")" },
};
const size_t kgq_nfn = sizeof(kgq_fntab) / sizeof(kgq_fntab[0]);

const char *const kgq_functions[] = {
	"get-principles", "get-principle", "get-patterns", "get-pattern",
	"get-patterns-by-type", "get-decisions", "get-decision",
	"get-decisions-by-status", "get-files", "get-file-understanding",
	"get-related-files", "get-relationships", "get-relationships-from",
	"get-relationships-to", "search-knowledge", "get-refs", "get-stale",
	"get-by-tag", "get-entity", "@", "kind", "filter", "map", "sort-by",
	"take", "count", "length", "first", "rest", "list", "not", "=", "<",
	">", "<=", ">=", "contains?", "starts-with?", "lower", "str", NULL
};
