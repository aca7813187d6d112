/*
 * The query evaluator (kgq.h): a sandboxed interpreter over a read-only
 * knowledge graph.  The forms come from kgq_read.c, the functions from
 * kgq_fn.c, the answer's text from kgq_print.c.
 *
 * Sandbox: the only names a query can reach are its own (define, let,
 * lambda) and the functions of kgq_fntab, none of which writes, does I/O
 * or evaluates text.  Bounds: every eval and every call is a step; eval
 * nesting (tail calls aside: a tail call reuses its frame, so a loop
 * written as recursion runs until steps), reader nesting, printing and
 * equality count depth, clamped to KGQ_DEPTH_HARD; every byte a run
 * allocates comes from its arena and counts against mem; the answer's
 * text against out.  Going past any of them is QUERY_LIMIT naming it.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/utf8.h"
#include "kgq_int.h"

struct kgq_val kgq_nil = { .type = KQ_NIL };
struct kgq_val kgq_true = { .type = KQ_BOOL, .u.b = 1 };
struct kgq_val kgq_false = { .type = KQ_BOOL, .u.b = 0 };

#define KGQ_CHUNK	(32 * 1024)

static const char *const special[] = {
	"quote", "if", "and", "or", "let", "lambda", "define", NULL
};

void
kgq_defaults(struct kgq_limits *lim)
{
	lim->steps = 200000;
	lim->depth = 64;
	lim->mem = 8 * 1024 * 1024;
	lim->out = 1024 * 1024;
}

void
kgq_fail(struct kgq_run *r, const char *code, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	/* a cut message must not end inside a UTF-8 sequence */
	r->msg[utf8_whole(r->msg, strlen(r->msg))] = '\0';
	r->code = code;
	longjmp(r->jb, 1);
}

/* Out of memory for real (not the mem bound): kgq_eval returns NULL. */
static void __attribute__((noreturn))
kgq_enomem(struct kgq_run *r)
{
	r->code = NULL;
	longjmp(r->jb, 1);
}

/* size bytes from the arena, zeroed, counted against mem. */
void *
kgq_alloc(struct kgq_run *r, size_t size)
{
	struct kgq_chunk	*c = r->chunks;
	size_t			 hdr, cap;
	void			*p;

	size = (size + 15) & ~(size_t)15;
	if (size == 0)
		size = 16;
	if (size > r->lim.mem || r->mem > r->lim.mem - size)
		kgq_fail(r, "QUERY_LIMIT", "mem: the query needs more than "
		    "%zu bytes of memory; build smaller lists or strings, "
		    "narrow it with filter and take", r->lim.mem);
	hdr = (sizeof(*c) + 15) & ~(size_t)15;
	if (c == NULL || c->cap - c->used < size) {
		cap = size > KGQ_CHUNK ? size : KGQ_CHUNK;
		if ((c = malloc(hdr + cap)) == NULL)
			kgq_enomem(r);
		c->used = 0;
		c->cap = cap;
		c->next = r->chunks;
		r->chunks = c;
	}
	p = (char *)c + hdr + c->used;
	c->used += size;
	r->mem += size;
	memset(p, 0, size);
	return p;
}

static size_t
kgq_maxdepth(const struct kgq_run *r)
{
	return r->lim.depth < KGQ_DEPTH_HARD ? r->lim.depth : KGQ_DEPTH_HARD;
}

void
kgq_enter(struct kgq_run *r)
{
	if (++r->depth > kgq_maxdepth(r))
		kgq_fail(r, "QUERY_LIMIT", "depth: the query nests deeper "
		    "than depth %zu (forms, calls or data inside each other); "
		    "flatten it, or end the recursion sooner",
		    kgq_maxdepth(r));
}

void
kgq_leave(struct kgq_run *r)
{
	r->depth--;
}

void
kgq_step(struct kgq_run *r)
{
	if (++r->steps > r->lim.steps)
		kgq_fail(r, "QUERY_LIMIT", "steps: the query took more than "
		    "%zu evaluation steps; a recursion that never ends? "
		    "narrow it with filter and take", r->lim.steps);
}

/* units more steps (and one), at once. */
void
kgq_cost(struct kgq_run *r, size_t units)
{
	if (units >= r->lim.steps - r->steps)
		r->steps = r->lim.steps;
	else
		r->steps += units;
	kgq_step(r);
}

struct kgq_val *
kgq_new(struct kgq_run *r, enum kgq_type t)
{
	struct kgq_val	*v = kgq_alloc(r, sizeof(*v));

	v->type = t;
	return v;
}

struct kgq_val *
kgq_num(struct kgq_run *r, double x)
{
	struct kgq_val	*v = kgq_new(r, KQ_NUM);

	v->u.num = x;
	return v;
}

/* A string value pointing at s (not copied: the graph's or the arena's). */
struct kgq_val *
kgq_str(struct kgq_run *r, const char *s, size_t len)
{
	struct kgq_val	*v = kgq_new(r, KQ_STR);

	v->u.str.s = s;
	v->u.str.len = len;
	return v;
}

/* A list of n items, every one nil until the caller sets it. */
struct kgq_val *
kgq_list(struct kgq_run *r, size_t n)
{
	struct kgq_val	*v = kgq_new(r, KQ_LIST);
	size_t		 i;

	if (n > SIZE_MAX / sizeof(*v->u.list.v) / 2)
		kgq_fail(r, "QUERY_LIMIT", "mem: a list of %zu items is "
		    "too big", n);
	v->u.list.v = kgq_alloc(r, (n ? n : 1) * sizeof(*v->u.list.v));
	v->u.list.n = n;
	for (i = 0; i < n; i++)
		v->u.list.v[i] = &kgq_nil;
	return v;
}

struct kgq_val *
kgq_bool(int b)
{
	return b ? &kgq_true : &kgq_false;
}

/* Only #f and nil are false. */
int
kgq_truthy(const struct kgq_val *v)
{
	return !(v->type == KQ_NIL || (v->type == KQ_BOOL && !v->u.b));
}

const char *
kgq_typename(const struct kgq_val *v)
{
	switch (v->type) {
	case KQ_NIL:
		return "nil";
	case KQ_BOOL:
		return "a boolean";
	case KQ_NUM:
		return "a number";
	case KQ_STR:
		return "a string";
	case KQ_SYM:
		return "a symbol";
	case KQ_KW:
		return "a keyword";
	case KQ_LIST:
		return "a list";
	case KQ_FN:
	case KQ_LAMBDA:
		return "a function";
	case KQ_ENT:
		return kg_kind_name(kg_entity_kind(v->u.ent));
	}
	return "a value";
}

const struct kgq_fn *
kgq_lookup_fn(const char *name)
{
	size_t	i;

	for (i = 0; i < kgq_nfn; i++)
		if (strcmp(kgq_fntab[i].name, name) == 0)
			return &kgq_fntab[i];
	return NULL;
}

static int
is_special(const char *name)
{
	size_t	i;

	for (i = 0; special[i] != NULL; i++)
		if (strcmp(special[i], name) == 0)
			return 1;
	return 0;
}

/* Edit distance of a and b, both at most KG_NAME_MAX bytes. */
static size_t
editdist(const char *a, const char *b)
{
	size_t	la = strlen(a), lb = strlen(b), i, j, prev, tmp, best;
	size_t	row[KG_NAME_MAX + 2];

	if (la > KG_NAME_MAX || lb > KG_NAME_MAX)
		return SIZE_MAX;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			tmp = row[j];
			best = prev + (a[i - 1] != b[j - 1]);
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb];
}

static void
consider(const char *name, const char *cand, const char **best,
    size_t *bestd)
{
	size_t	d = editdist(name, cand);

	if (d < *bestd) {
		*bestd = d;
		*best = cand;
	}
}

/* The nearest known name to name (within a third of it), or NULL. */
static const char *
suggest(const char *name, const struct kgq_env *e)
{
	const struct kgq_bind	*b;
	const char		*best = NULL;
	size_t			 bestd = SIZE_MAX, i, len = strlen(name);

	for (i = 0; i < kgq_nfn; i++)
		consider(name, kgq_fntab[i].name, &best, &bestd);
	for (i = 0; special[i] != NULL; i++)
		consider(name, special[i], &best, &bestd);
	for (; e != NULL; e = e->up)
		for (b = e->b; b != NULL; b = b->next)
			consider(name, b->name, &best, &bestd);
	if (best != NULL && bestd <= (len < 6 ? 1 : len / 3))
		return best;
	return NULL;
}

static struct kgq_val *
lookup(struct kgq_run *r, const struct kgq_val *sym, struct kgq_env *e,
    int head)
{
	const struct kgq_env	*f;
	const struct kgq_bind	*b;
	const struct kgq_fn	*fn;
	const char		*name = sym->u.str.s, *hint;
	size_t			 seen = 0;

	/* A long walk costs steps, so thousands of defines cannot make
	 * every lookup of a long run slow. */
	for (f = e; f != NULL; f = f->up)
		for (b = f->b; b != NULL; b = b->next) {
			if (++seen % KGQ_COST_ITEMS == 0)
				kgq_step(r);
			if (strcmp(b->name, name) == 0)
				return b->v;
		}
	if ((fn = kgq_lookup_fn(name)) != NULL)
		return &r->fnv[fn - kgq_fntab];
	if (is_special(name))
		kgq_fail(r, "QUERY_ERROR", "%s is a special form, not a "
		    "value: write (%s ...)", name, name);
	hint = suggest(name, e);
	if (head)
		kgq_fail(r, "QUERY_ERROR", "unknown function \"%s\": %s%s%s"
		    "the functions are listed in parley-knowledge(7)", name,
		    hint ? "did you mean " : "", hint ? hint : "",
		    hint ? "? " : "");
	kgq_fail(r, "QUERY_ERROR", "unknown name \"%s\": %s%s%sbind it with "
	    "(define %s ...) or (let ((%s ...)) ...), or quote it, or write "
	    "a \"string\"", name, hint ? "did you mean " : "",
	    hint ? hint : "", hint ? "? " : "", name, name);
}

static void
bind(struct kgq_run *r, struct kgq_env *e, const char *name,
    struct kgq_val *v)
{
	struct kgq_bind	*b;

	for (b = e->b; b != NULL; b = b->next)
		if (strcmp(b->name, name) == 0) {
			b->v = v;
			return;
		}
	b = kgq_alloc(r, sizeof(*b));
	b->name = name;
	b->v = v;
	b->next = e->b;
	e->b = b;
}

static struct kgq_env *
newenv(struct kgq_run *r, struct kgq_env *up)
{
	struct kgq_env	*e = kgq_alloc(r, sizeof(*e));

	e->up = up;
	return e;
}

/* A name a query may bind: a symbol, not a special form or constant. */
static const char *
bindable(struct kgq_run *r, const struct kgq_val *s, const char *form)
{
	if (s->type != KQ_SYM)
		kgq_fail(r, "QUERY_ERROR", "%s: %s is not a name; write a "
		    "symbol such as x", form, kgq_typename(s));
	if (is_special(s->u.str.s))
		kgq_fail(r, "QUERY_ERROR", "%s: %s is a special form and "
		    "cannot be rebound; choose another name", form,
		    s->u.str.s);
	return s->u.str.s;
}

static struct kgq_val *
mklambda(struct kgq_run *r, struct kgq_val *params, struct kgq_val **body,
    size_t nbody, struct kgq_env *e, const char *name)
{
	struct kgq_val	*v;
	size_t		 i;

	if (params->type != KQ_LIST)
		kgq_fail(r, "QUERY_ERROR", "lambda: the parameters must be a "
		    "list of names, as in (lambda (p) ...), not %s",
		    kgq_typename(params));
	for (i = 0; i < params->u.list.n; i++)
		bindable(r, params->u.list.v[i], "lambda");
	if (nbody == 0)
		kgq_fail(r, "QUERY_ERROR", "lambda: no body: write "
		    "(lambda (p) EXPR)");
	v = kgq_new(r, KQ_LAMBDA);
	v->u.lam = kgq_alloc(r, sizeof(*v->u.lam));
	v->u.lam->params = params;
	v->u.lam->body = body;
	v->u.lam->nbody = nbody;
	v->u.lam->env = e;
	v->u.lam->name = name;
	return v;
}

/* The new frame of a lambda's call with its arguments bound. */
static struct kgq_env *
callenv(struct kgq_run *r, const struct kgq_lambda *l, struct kgq_val **a,
    size_t n)
{
	struct kgq_env	*e;
	size_t		 i;

	if (n != l->params->u.list.n)
		kgq_fail(r, "QUERY_ERROR", "%s takes %zu argument%s, got %zu",
		    l->name, l->params->u.list.n,
		    l->params->u.list.n == 1 ? "" : "s", n);
	e = newenv(r, l->env);
	for (i = 0; i < n; i++)
		bind(r, e, l->params->u.list.v[i]->u.str.s, a[i]);
	return e;
}

static struct kgq_val	*ev(struct kgq_run *, struct kgq_val *,
			    struct kgq_env *);

static struct kgq_val *
callfn(struct kgq_run *r, const struct kgq_fn *f, struct kgq_val **a,
    size_t n)
{
	if (n < f->min || n > f->max) {
		if (f->min == f->max)
			kgq_fail(r, "QUERY_ERROR", "%s takes %zu argument%s, "
			    "got %zu: write %s", f->name, f->min,
			    f->min == 1 ? "" : "s", n, f->usage);
		if (f->max == SIZE_MAX)
			kgq_fail(r, "QUERY_ERROR", "%s takes at least %zu "
			    "argument%s, got %zu: write %s", f->name, f->min,
			    f->min == 1 ? "" : "s", n, f->usage);
		kgq_fail(r, "QUERY_ERROR", "%s takes %zu to %zu arguments, "
		    "got %zu: write %s", f->name, f->min, f->max, n,
		    f->usage);
	}
	return f->impl(r, a, n);
}

/* (:field e): a keyword called on an entity reads that field. */
static struct kgq_val *
callkw(struct kgq_run *r, const struct kgq_val *kw, struct kgq_val **a,
    size_t n)
{
	if (n != 1)
		kgq_fail(r, "QUERY_ERROR", "(:%s ENTITY) reads a field of "
		    "one entity; got %zu arguments", kw->u.str.s, n);
	if (a[0]->type == KQ_NIL)
		return &kgq_nil;
	if (a[0]->type != KQ_ENT)
		kgq_fail(r, "QUERY_ERROR", "(:%s ENTITY) reads a field of "
		    "one entity; got %s", kw->u.str.s, kgq_typename(a[0]));
	return kgq_field(r, a[0]->u.ent, kw->u.str.s);
}

static void __attribute__((noreturn))
notfn(struct kgq_run *r, const struct kgq_val *fn)
{
	kgq_fail(r, "QUERY_ERROR", "%s is not a function: the first item "
	    "of (...) is what is called; use (list ...) or [...] for a list",
	    kgq_typename(fn));
}

/* Calls fn (a function value or keyword) from C: a non-tail call. */
struct kgq_val *
kgq_apply(struct kgq_run *r, struct kgq_val *fn, struct kgq_val **a,
    size_t n)
{
	struct kgq_val	*v = &kgq_nil;
	struct kgq_env	*e;
	size_t		 i;

	kgq_step(r);
	switch (fn->type) {
	case KQ_FN:
		return callfn(r, fn->u.fn, a, n);
	case KQ_KW:
		return callkw(r, fn, a, n);
	case KQ_LAMBDA:
		e = callenv(r, fn->u.lam, a, n);
		for (i = 0; i < fn->u.lam->nbody; i++)
			v = ev(r, fn->u.lam->body[i], e);
		return v;
	default:
		notfn(r, fn);
	}
}

static void
nargs(struct kgq_run *r, const char *form, size_t n, size_t min,
    size_t max, const char *usage)
{
	if (n < min || n > max)
		kgq_fail(r, "QUERY_ERROR", "%s: wrong number of parts: write "
		    "%s", form, usage);
}

/*
 * Evaluates x in e.  Forms in tail position (if's branches, the last of
 * and/or/let/a lambda's body) loop here instead of recursing.
 */
static struct kgq_val *
ev(struct kgq_run *r, struct kgq_val *x, struct kgq_env *e)
{
	struct kgq_val	**p, *head, *fn, *v, **a, *b;
	struct kgq_env	 *ne;
	const char	 *name;
	size_t		  n, i;

	kgq_enter(r);
	for (;;) {
		kgq_step(r);
		if (x->type == KQ_SYM) {
			v = lookup(r, x, e, 0);
			break;
		}
		if (x->type != KQ_LIST) {
			v = x;
			break;
		}
		p = x->u.list.v;
		n = x->u.list.n;
		if (x->u.list.vec || n == 0) {
			v = kgq_list(r, n);
			for (i = 0; i < n; i++)
				v->u.list.v[i] = ev(r, p[i], e);
			break;
		}
		head = p[0];
		name = head->type == KQ_SYM ? head->u.str.s : "";
		if (strcmp(name, "quote") == 0) {
			nargs(r, "quote", n, 2, 2, "(quote X) or 'X");
			v = p[1];
			break;
		}
		if (strcmp(name, "if") == 0) {
			nargs(r, "if", n, 3, 4, "(if TEST THEN ELSE)");
			if (kgq_truthy(ev(r, p[1], e)))
				x = p[2];
			else if (n == 4)
				x = p[3];
			else {
				v = &kgq_nil;
				break;
			}
			continue;
		}
		if (strcmp(name, "and") == 0 || strcmp(name, "or") == 0) {
			int	isand = name[0] == 'a';

			if (n == 1) {
				v = kgq_bool(isand);
				break;
			}
			for (i = 1; i < n - 1; i++) {
				v = ev(r, p[i], e);
				if (kgq_truthy(v) != isand)
					break;
			}
			if (i < n - 1)
				break;
			x = p[n - 1];
			continue;
		}
		if (strcmp(name, "let") == 0) {
			nargs(r, "let", n, 3, SIZE_MAX,
			    "(let ((NAME VALUE) ...) BODY)");
			b = p[1];
			if (b->type != KQ_LIST)
				kgq_fail(r, "QUERY_ERROR", "let: the bindings "
				    "must be a list: (let ((x 1) (y 2)) ...)");
			ne = newenv(r, e);
			for (i = 0; i < b->u.list.n; i++) {
				struct kgq_val	*pr = b->u.list.v[i];

				if (pr->type != KQ_LIST || pr->u.list.n != 2)
					kgq_fail(r, "QUERY_ERROR", "let: each "
					    "binding is (NAME VALUE), as in "
					    "(let ((x 1)) ...)");
				bind(r, ne, bindable(r, pr->u.list.v[0],
				    "let"), ev(r, pr->u.list.v[1], e));
			}
			for (i = 2; i < n - 1; i++)
				ev(r, p[i], ne);
			x = p[n - 1];
			e = ne;
			continue;
		}
		if (strcmp(name, "lambda") == 0) {
			nargs(r, "lambda", n, 3, SIZE_MAX,
			    "(lambda (PARAMS) BODY)");
			v = mklambda(r, p[1], p + 2, n - 2, e, "lambda");
			break;
		}
		if (strcmp(name, "define") == 0) {
			nargs(r, "define", n, 3, SIZE_MAX,
			    "(define NAME VALUE) or (define (NAME PARAMS) "
			    "BODY)");
			if (p[1]->type == KQ_LIST && !p[1]->u.list.vec) {
				struct kgq_val	*sig = p[1], *ps;

				if (sig->u.list.n == 0)
					kgq_fail(r, "QUERY_ERROR", "define: "
					    "(define () ...) names nothing: "
					    "write (define (f x) ...)");
				name = bindable(r, sig->u.list.v[0], "define");
				ps = kgq_list(r, sig->u.list.n - 1);
				memcpy(ps->u.list.v, sig->u.list.v + 1,
				    (sig->u.list.n - 1) * sizeof(*p));
				v = mklambda(r, ps, p + 2, n - 2, e, name);
			} else {
				nargs(r, "define", n, 3, 3,
				    "(define NAME VALUE)");
				name = bindable(r, p[1], "define");
				v = ev(r, p[2], e);
			}
			bind(r, e, name, v);
			v = &kgq_nil;
			break;
		}
		fn = head->type == KQ_SYM ? lookup(r, head, e, 1) :
		    ev(r, head, e);
		a = kgq_alloc(r, (n - 1 ? n - 1 : 1) * sizeof(*a));
		for (i = 1; i < n; i++)
			a[i - 1] = ev(r, p[i], e);
		if (fn->type != KQ_LAMBDA) {
			v = kgq_apply(r, fn, a, n - 1);
			break;
		}
		kgq_step(r);
		e = callenv(r, fn->u.lam, a, n - 1);
		for (i = 0; i < fn->u.lam->nbody - 1; i++)
			ev(r, fn->u.lam->body[i], e);
		x = fn->u.lam->body[fn->u.lam->nbody - 1];
	}
	kgq_leave(r);
	return v;
}

static void
freerun(struct kgq_run *r)
{
	struct kgq_chunk	*c, *next;

	for (c = r->chunks; c != NULL; c = next) {
		next = c->next;
		free(c);
	}
	free(r->out.s);
	free(r);
}

/* The error as the answer, in fmt; out's bound does not apply. */
static char *
errtext(struct kgq_run *r, enum kgq_format fmt, size_t *outlen)
{
	struct kgq_val	code, msg;
	char		*s;

	free(r->out.s);
	memset(&r->out, 0, sizeof(r->out));
	r->lim.out = SIZE_MAX;
	r->depth = 0;
	code.type = msg.type = KQ_STR;
	code.u.str.s = r->code;
	code.u.str.len = strlen(r->code);
	msg.u.str.s = r->msg;
	msg.u.str.len = strlen(r->msg);
	if (setjmp(r->jb))
		return NULL;
	if (fmt == KGQ_JSON) {
		kgq_put(r, "{\"error\":{\"code\":", 17);
		kgq_print_json(r, &code);
		kgq_put(r, ",\"message\":", 11);
		kgq_print_json(r, &msg);
		kgq_put(r, "}}", 2);
	} else {
		kgq_put(r, "(error ", 7);
		kgq_print_sexp(r, &code);
		kgq_put(r, " ", 1);
		kgq_print_sexp(r, &msg);
		kgq_put(r, ")", 1);
	}
	s = r->out.s;
	if (outlen != NULL)
		*outlen = r->out.len;
	r->out.s = NULL;
	return s;
}

/* The run proper: reads, evaluates and prints into r->out. */
static void
run(struct kgq_run *r, enum kgq_format fmt)
{
	struct kgq_val	*forms, *v = &kgq_nil;
	struct kgq_env	*genv;
	size_t		 i;

	if (r->src == NULL)
		kgq_fail(r, "QUERY_SYNTAX", "no query: write a form such as "
		    "(get-principles)");
	if (r->srclen > KGQ_QUERY_MAX)
		kgq_fail(r, "QUERY_LIMIT", "the query is %zu bytes, at most "
		    "%d: shorten it", r->srclen, KGQ_QUERY_MAX);
	if (memchr(r->src, '\0', r->srclen) != NULL)
		kgq_fail(r, "QUERY_SYNTAX", "the query holds a NUL byte: "
		    "send text");
	if (!utf8_valid((const unsigned char *)r->src, r->srclen))
		kgq_fail(r, "QUERY_SYNTAX", "the query is not valid UTF-8");
	r->fnv = kgq_alloc(r, kgq_nfn * sizeof(*r->fnv));
	for (i = 0; i < kgq_nfn; i++) {
		r->fnv[i].type = KQ_FN;
		r->fnv[i].u.fn = &kgq_fntab[i];
	}
	forms = kgq_read(r);
	genv = newenv(r, NULL);
	for (i = 0; i < forms->u.list.n; i++)
		v = ev(r, forms->u.list.v[i], genv);
	if (fmt == KGQ_JSON)
		kgq_print_json(r, v);
	else
		kgq_print_sexp(r, v);
}

char *
kgq_eval(const struct kg *g, const char *query, size_t len,
    enum kgq_format fmt, const struct kgq_limits *lim, int *is_error,
    size_t *outlen)
{
	struct kgq_run	*r;
	char		*s;

	*is_error = 0;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->g = g;
	if (lim != NULL)
		r->lim = *lim;
	else
		kgq_defaults(&r->lim);
	r->src = query;
	r->srclen = len;
	if (setjmp(r->jb)) {
		if (r->code == NULL) {
			freerun(r);
			return NULL;
		}
		*is_error = 1;
		s = errtext(r, fmt, outlen);
		freerun(r);
		return s;
	}
	run(r, fmt);
	s = r->out.s;
	if (outlen != NULL)
		*outlen = r->out.len;
	r->out.s = NULL;
	freerun(r);
	return s;
}
