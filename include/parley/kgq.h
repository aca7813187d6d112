/*
 * Discovery queries over a knowledge graph (kg.h): a small Scheme-like
 * language read from compact S-expressions and evaluated by a sandboxed
 * interpreter that can only read the graph.  Every run is bounded in
 * evaluation steps, nesting depth, memory and answer size; going past a
 * bound, like any other error, comes back as data, never as a crash.
 *
 * The language (parley-knowledge(7) lists every function):
 *   atoms: numbers, "strings", symbols, :keywords, #t #f nil;
 *   [a b c] is a vector literal (a list); ; starts a comment;
 *   special forms: quote ('x), if, and, or, let, lambda, define (local
 *   to the query);
 *   (@ entity :field) reads a field; the graph functions
 *   get-principles, get-principle, get-patterns, get-pattern,
 *   get-patterns-by-type, get-decisions, get-decision,
 *   get-decisions-by-status, get-files, get-file-understanding,
 *   get-related-files, get-relationships, get-relationships-from,
 *   get-relationships-to, search-knowledge, get-stale, get-by-tag,
 *   get-entity; the list and value functions filter, map, sort-by,
 *   take, count, length, first, rest, list, not, =, <, >, <=, >=,
 *   contains?, starts-with?, lower, str.
 * Answers print entities the compact way, positional key then keyword
 * fields, unset and empty ones left out:
 *   (principle "name" "description" :confidence 0.95 :locations ["a" "b"])
 * or as JSON (kg_entity_json's shape).
 */
#ifndef PARLEY_KGQ_H
#define PARLEY_KGQ_H

#include <stddef.h>

struct kg;

#define KGQ_QUERY_MAX	(64 * 1024)	/* bytes of a query */

struct kgq_limits {
	size_t	steps;		/* evaluation steps (calls, forms) */
	size_t	depth;		/* nesting, of the reader and of calls */
	size_t	mem;		/* bytes the run may allocate in all */
	size_t	out;		/* bytes of the answer */
};
/* 200,000 steps, depth 64, 8 MiB, 1 MiB. */
void		 kgq_defaults(struct kgq_limits *);

enum kgq_format { KGQ_SEXP, KGQ_JSON };

/*
 * Evaluates query (len bytes, one or more forms: the answer is the last
 * one's value) over g, which it never changes.  Returns the answer as
 * malloc'd text in fmt (JSON: a JSON text), *is_error 0; or an error as
 * data, *is_error 1: (error "CODE" "message") or
 * {"error":{"code":"CODE","message":"..."}}, CODE one of QUERY_SYNTAX,
 * QUERY_ERROR (unknown function, wrong arguments or types), QUERY_LIMIT
 * (a bound: the message names it and its value).  NULL only when out of
 * memory.  *outlen (may be NULL) gets the answer's length.
 */
char		*kgq_eval(const struct kg *g, const char *query, size_t len,
		    enum kgq_format fmt, const struct kgq_limits *lim,
		    int *is_error, size_t *outlen);
/* The functions a query may call, NULL-terminated (docs, tests). */
extern const char *const kgq_functions[];

#endif
