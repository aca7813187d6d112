/*
 * Inside the query interpreter (kgq.h): values, the run, and what the
 * reader (kgq_read.c), the evaluator (kgq.c), the functions (kgq_fn.c)
 * and the printers (kgq_print.c) share.
 *
 * Every value and form of a run lives in the run's arena, counted against
 * the mem bound and freed at once when the run ends.  An error anywhere
 * (a bound, a syntax or evaluation error) fills r->code and r->msg and
 * longjmps back to kgq_eval(), which frees the arena: nothing is left to
 * unwind because nothing outside the arena is held across a call that
 * may fail, but for the answer's buffer (r->out), freed there too.
 */
#ifndef PARLEY_KGQ_INT_H
#define PARLEY_KGQ_INT_H

#include <setjmp.h>
#include <stddef.h>

#include "parley/kg.h"
#include "parley/kgq.h"

/*
 * The C stack is what depth protects: whatever the caller asks, no run
 * nests deeper than this (eval, calls, the reader, printing, equality).
 */
#define KGQ_DEPTH_HARD	256

/*
 * Work a function does without calling back costs steps too, so no run
 * is slow for long within its steps: a step per KGQ_COST_SCAN entities
 * whose fields it reads (search-knowledge, get-by-tag...: about 0.3 us
 * each), per KGQ_COST_ITEMS list items or entities it only lists or
 * walks, per KGQ_COST_BYTES bytes it compares or copies.
 */
#define KGQ_COST_SCAN	4
#define KGQ_COST_ITEMS	16
#define KGQ_COST_BYTES	4096

enum kgq_type {
	KQ_NIL, KQ_BOOL, KQ_NUM, KQ_STR, KQ_SYM, KQ_KW, KQ_LIST, KQ_FN,
	KQ_LAMBDA, KQ_ENT
};

struct kgq_run;
struct kgq_val;
struct kgq_env;

typedef struct kgq_val *(*kgq_impl)(struct kgq_run *, struct kgq_val **,
    size_t);

/* A function a query may call. */
struct kgq_fn {
	const char	*name;
	size_t		 min, max;	/* arguments */
	const char	*usage;		/* "(take N LIST)" */
	kgq_impl	 impl;
	const char	*doc;		/* one line, for parley-knowledge(7) */
};

struct kgq_lambda {
	struct kgq_val	 *params;	/* a list of symbols */
	struct kgq_val	**body;		/* one or more forms */
	size_t		  nbody;
	struct kgq_env	 *env;
	const char	 *name;		/* define's name, or "lambda" */
};

struct kgq_val {
	enum kgq_type	 type;
	union {
		int		 b;			/* BOOL */
		double		 num;			/* NUM */
		struct {
			const char	*s;		/* STR SYM KW: not */
			size_t		 len;		/* NUL-terminated
							   for SYM KW */
		} str;
		struct {
			struct kgq_val	**v;		/* LIST */
			size_t		  n;
			int		  vec;		/* read as [...] */
		} list;
		const struct kgq_fn	*fn;		/* FN */
		struct kgq_lambda	*lam;		/* LAMBDA */
		const struct kg_entity	*ent;		/* ENT */
	} u;
};

struct kgq_bind {
	struct kgq_bind	*next;
	const char	*name;
	struct kgq_val	*v;
};

struct kgq_env {
	struct kgq_env	*up;
	struct kgq_bind	*b;
};

struct kgq_chunk {
	struct kgq_chunk	*next;
	size_t			 used, cap;
	/* data follows, max_align_t aligned */
};

/* The answer being printed: bounded by lim.out. */
struct kgq_buf {
	char	*s;
	size_t	 len, cap;
};

struct kgq_run {
	const struct kg		*g;
	struct kgq_limits	 lim;
	size_t			 steps, depth, mem;
	struct kgq_chunk	*chunks;
	const char		*src;		/* the query */
	size_t			 srclen;
	struct kgq_val		*fnv;		/* a value per function */
	struct kgq_buf		 out;
	jmp_buf			 jb;
	const char		*code;		/* on error */
	char			 msg[512];
};

extern const struct kgq_fn	kgq_fntab[];
extern const size_t		kgq_nfn;
extern struct kgq_val		kgq_nil, kgq_true, kgq_false;

/* kgq.c */
void		*kgq_alloc(struct kgq_run *, size_t);
void		 kgq_fail(struct kgq_run *, const char *code, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4), noreturn));
void		 kgq_enter(struct kgq_run *);
void		 kgq_leave(struct kgq_run *);
void		 kgq_step(struct kgq_run *);
void		 kgq_cost(struct kgq_run *, size_t units);
struct kgq_val	*kgq_new(struct kgq_run *, enum kgq_type);
struct kgq_val	*kgq_num(struct kgq_run *, double);
struct kgq_val	*kgq_str(struct kgq_run *, const char *, size_t);
struct kgq_val	*kgq_list(struct kgq_run *, size_t n);
struct kgq_val	*kgq_bool(int);
int		 kgq_truthy(const struct kgq_val *);
struct kgq_val	*kgq_apply(struct kgq_run *, struct kgq_val *fn,
		    struct kgq_val **args, size_t n);
const char	*kgq_typename(const struct kgq_val *);
const struct kgq_fn *kgq_lookup_fn(const char *name);

/* kgq_read.c: the forms of the whole query, as a list. */
struct kgq_val	*kgq_read(struct kgq_run *);

/* kgq_fn.c */
struct kgq_val	*kgq_field(struct kgq_run *, const struct kg_entity *,
		    const char *field);
int		 kgq_equal(struct kgq_run *, const struct kgq_val *,
		    const struct kgq_val *);

/* kgq_print.c: appends v to r->out. */
void		 kgq_print_sexp(struct kgq_run *, const struct kgq_val *);
void		 kgq_print_json(struct kgq_run *, const struct kgq_val *);
void		 kgq_put(struct kgq_run *, const char *, size_t);
void		 kgq_fmtnum(double, char *, size_t);

#endif
