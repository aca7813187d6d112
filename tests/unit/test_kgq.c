/*
 * Unit tests for kgq: the reader, the special forms, every function over
 * a graph folded from knowledge_batch bodies, both printed forms, errors
 * as data, every bound (steps, depth, mem, out) and that no query
 * changes the graph.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/kg.h"
#include "parley/kgq.h"
#include "check_main.h"

#define H1 \
	"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
#define H2 \
	"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"
#define H3 \
	"2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"

static const char actions[] =
    "[[\"record-principle\",{\"name\":\"contagious-materialization\","
    "\"description\":\"Syncing spreads from root automatically\","
    "\"confidence\":0.95,\"locations\":[\"plexus/README.md:28\"],"
    "\"evidence\":[\"tested-in-production\"],"
    "\"tags\":[\"plexus\",\"sync\"]}],"
    "[\"record-principle\",{\"name\":\"wrong-impossible-through-structure\","
    "\"description\":\"Make invalid states \\\"impossible\\\"\\n\","
    "\"confidence\":0.7,\"tags\":[\"architecture\"]}],"
    "[\"record-principle\",{\"name\":\"no-confidence\","
    "\"description\":\"A principle without a confidence\"}],"
    "[\"record-pattern\",{\"name\":\"plexus-model-with-decorators\","
    "\"type\":\"plexus-model\",\"description\":\"Class extends "
    "PlexusModel\",\"location\":\"plexus/src/PlexusModel.ts:15\","
    "\"confidence\":0.9,\"tags\":[\"plexus\",\"pattern\"]}],"
    "[\"record-pattern\",{\"name\":\"catamorphism\","
    "\"type\":\"catamorphism-usage\",\"description\":\"Folds over trees\","
    "\"confidence\":0.6}],"
    "[\"record-file-understanding\",{\"path\":\"plexus/src/PlexusModel.ts\","
    "\"hash\":\"" H1 "\","
    "\"summary\":\"Base class for all Plexus entities\","
    "\"concepts\":[\"decorators\",\"CRDT\"],"
    "\"importantSymbols\":[\"PlexusModel\"],"
    "\"relatedFiles\":[\"plexus/src/Plexus.ts\"]}],"
    "[\"record-file-understanding\",{\"path\":\"plexus/src/tracking.ts\","
    "\"hash\":\"" H2 "\",\"summary\":\"Tracks reads\"}],"
    "[\"record-decision\",{\"name\":\"use-stage3-decorators\","
    "\"description\":\"Use Stage 3 decorators\",\"rationale\":\"Native\","
    "\"status\":\"active\",\"impact\":9,"
    "\"locations\":[\"plexus/README.md:45\"]}],"
    "[\"record-decision\",{\"name\":\"old-way\",\"description\":\"Legacy\","
    "\"status\":\"deprecated\",\"impact\":2}],"
    "[\"link-entities\",{\"from\":\"contagious-materialization\","
    "\"to\":\"wrong-impossible-through-structure\",\"type\":\"supports\","
    "\"description\":\"Root materialization triggers child sync\"}],"
    "[\"link-entities\",{\"from\":\"plexus/src/tracking.ts\","
    "\"to\":\"plexus/src/PlexusModel.ts\",\"type\":\"uses\"}],"
    "[\"link-entities\",{\"from\":\"plexus/src/PlexusModel.ts\","
    "\"to\":\"contagious-materialization\",\"type\":\"implements\"}]]";

static struct kg *
mkgraph(void)
{
	struct kg	*g = kg_new("test");
	cJSON		*acts, *body, *st, *ents, *e;

	ck_assert_ptr_nonnull(g);
	acts = cJSON_Parse(actions);
	ck_assert_ptr_nonnull(acts);
	body = kg_batch_body(acts, "b1", 1000000, "h/1", 1000, "tester");
	ck_assert_ptr_nonnull(body);
	ck_assert_int_eq(kg_fold(g, 1, "knowledge_batch", body), 0);
	cJSON_Delete(body);
	cJSON_Delete(acts);

	st = cJSON_CreateObject();
	cJSON_AddNumberToObject(st, "hlc", 2000000);
	cJSON_AddStringToObject(st, "origin", "h/1");
	cJSON_AddStringToObject(st, "path", "plexus/src/tracking.ts");
	cJSON_AddStringToObject(st, "hash", H3);
	cJSON_AddStringToObject(st, "was", H2);
	ents = cJSON_AddArrayToObject(st, "entities");
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "kind", "file");
	cJSON_AddStringToObject(e, "name", "plexus/src/tracking.ts");
	cJSON_AddItemToArray(ents, e);
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "kind", "pattern");
	cJSON_AddStringToObject(e, "name", "catamorphism");
	cJSON_AddItemToArray(ents, e);
	ck_assert_int_eq(kg_fold(g, 2, "knowledge_stale", st), 0);
	cJSON_Delete(st);
	return g;
}

static char *
runq(const struct kg *g, const char *q, enum kgq_format fmt,
    const struct kgq_limits *lim, int *err)
{
	size_t	 len = 12345;
	char	*s;

	s = kgq_eval(g, q, strlen(q), fmt, lim, err, &len);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(len, strlen(s));
	return s;
}

/* q's compact answer is want. */
static void
ok(const struct kg *g, const char *q, const char *want)
{
	int	 err = -1;
	char	*s = runq(g, q, KGQ_SEXP, NULL, &err);

	ck_assert_msg(err == 0 && strcmp(s, want) == 0,
	    "%.200s\n  got  %.300s\n  want %.300s", q, s, want);
	free(s);
}

/* q fails with code, and its message holds part. */
static void
bad_lim(const struct kg *g, const char *q, const struct kgq_limits *lim,
    const char *code, const char *part)
{
	int	 err = -1;
	char	*s = runq(g, q, KGQ_SEXP, lim, &err), pre[64];

	snprintf(pre, sizeof(pre), "(error \"%s\" \"", code);
	ck_assert_msg(err == 1 && strncmp(s, pre, strlen(pre)) == 0 &&
	    strstr(s, part) != NULL && s[strlen(s) - 1] == ')',
	    "%.200s\n  got  %.300s\n  want %s ... %s", q, s, code, part);
	free(s);
}

static void
bad(const struct kg *g, const char *q, const char *code, const char *part)
{
	bad_lim(g, q, NULL, code, part);
}

static struct kg *G;

static void
setup(void)
{
	G = mkgraph();
}

static void
teardown(void)
{
	kg_free(G);
	G = NULL;
}

START_TEST(reader_atoms)
{
	ok(G, "42", "42");
	ok(G, "-7", "-7");
	ok(G, "2.5", "2.5");
	ok(G, "0.1", "0.1");
	ok(G, "1e3", "1000");
	ok(G, "1e21", "1e+21");
	ok(G, "-0.0", "0");
	ok(G, ".5", "0.5");
	ok(G, "0.30000000000000004", "0.30000000000000004");
	ok(G, "123456789012", "123456789012");
	ok(G, "\"plain\"", "\"plain\"");
	ok(G, "\"q\\\"b\\\\s\\nn\\tt\\rr\\x01\"",
	    "\"q\\\"b\\\\s\\nn\\tt\\rr\\x01\"");
	ok(G, "\"h\\xc3\\xa9\"", "\"h\xc3\xa9\"");
	bad(G, "\"a\\xff\"", "QUERY_SYNTAX", "not UTF-8 once");
	ok(G, "\"\"", "\"\"");
	ok(G, ":confidence", ":confidence");
	ok(G, "'sym", "sym");
	ok(G, "#t", "#t");
	ok(G, "#f", "#f");
	ok(G, "nil", "nil");
	ok(G, "; a comment\n  42 ; another\n", "42");
	ok(G, "1 2 3", "3");
	ok(G, "'(1 \"a\" b :c #t #f nil [1 2] ())",
	    "(list 1 \"a\" b :c #t #f nil (list 1 2) (list))");
	ok(G, "[1 \"x\" (list 2)]", "(list 1 \"x\" (list 2))");
	ok(G, "()", "(list)");
	ok(G, "[]", "(list)");
	ok(G, "'-", "-");
	ok(G, "'+x", "+x");
}
END_TEST

START_TEST(reader_errors)
{
	bad(G, "", "QUERY_SYNTAX", "empty");
	bad(G, "  ; only a comment", "QUERY_SYNTAX", "empty");
	bad(G, "(get-principles", "QUERY_SYNTAX", "'(' not closed");
	bad(G, "(list 1 2))", "QUERY_SYNTAX", "stray ')'");
	bad(G, ")", "QUERY_SYNTAX", "line 1 column 1");
	bad(G, "(list 1\n  ]", "QUERY_SYNTAX", "line 2 column 3");
	bad(G, "[1 2)", "QUERY_SYNTAX", "closes a '['");
	bad(G, "\"abc", "QUERY_SYNTAX", "string not closed");
	bad(G, "\"a\\qb\"", "QUERY_SYNTAX", "bad escape \\\\q");
	bad(G, "\"a\\x0g\"", "QUERY_SYNTAX", "bad escape \\\\x");
	bad(G, "\"a\\x00\"", "QUERY_SYNTAX", "bad escape \\\\x");
	bad(G, "12abc", "QUERY_SYNTAX", "bad number");
	bad(G, "0x10", "QUERY_SYNTAX", "bad number");
	bad(G, "1e999", "QUERY_SYNTAX", "out of range");
	bad(G, "#x", "QUERY_SYNTAX", "#t and #f");
	bad(G, ":", "QUERY_SYNTAX", "lone");
	bad(G, "'", "QUERY_SYNTAX", "ends where a form");
	bad(G, "\"\xff\"", "QUERY_SYNTAX", "UTF-8");
}
END_TEST

START_TEST(reader_nul_and_size)
{
	int	 err;
	char	*s, *big;
	size_t	 n = KGQ_QUERY_MAX + 1;

	s = kgq_eval(G, "(list)\0x", 8, KGQ_SEXP, NULL, &err, NULL);
	ck_assert_int_eq(err, 1);
	ck_assert_ptr_nonnull(strstr(s, "NUL"));
	free(s);
	s = kgq_eval(G, NULL, 0, KGQ_SEXP, NULL, &err, NULL);
	ck_assert_int_eq(err, 1);
	ck_assert_ptr_nonnull(strstr(s, "QUERY_SYNTAX"));
	free(s);
	big = malloc(n + 1);
	memset(big, ' ', n);
	big[n] = '\0';
	big[0] = '1';
	bad(G, big, "QUERY_LIMIT", "65536");
	free(big);
}
END_TEST

START_TEST(special_forms)
{
	ok(G, "(quote (a b))", "(list a b)");
	ok(G, "'(quote x)", "(list quote x)");
	ok(G, "(if #t 1 2)", "1");
	ok(G, "(if #f 1 2)", "2");
	ok(G, "(if nil 1 2)", "2");
	ok(G, "(if 0 1 2)", "1");
	ok(G, "(if '() 1 2)", "1");
	ok(G, "(if #f 1)", "nil");
	ok(G, "(and)", "#t");
	ok(G, "(and 1 2 3)", "3");
	ok(G, "(and 1 #f (undefined-fn))", "#f");
	ok(G, "(or)", "#f");
	ok(G, "(or #f nil 7 (undefined-fn))", "7");
	ok(G, "(or #f nil)", "nil");
	ok(G, "(let ((x 1) (y \"a\")) (list x y))", "(list 1 \"a\")");
	ok(G, "(let [(x 1)] x)", "1");
	ok(G, "(let ((x 1)) (let ((x 2) (y x)) (list x y)))", "(list 2 1)");
	ok(G, "(let ((x 1)) 5 x)", "1");
	ok(G, "((lambda (x y) (list y x)) 1 2)", "(list 2 1)");
	ok(G, "(define (adder x) (lambda (y) (list x y))) ((adder 1) 2)",
	    "(list 1 2)");
	ok(G, "(define x 5) x", "5");
	ok(G, "(define x 5)", "nil");
	ok(G, "(define x 5) (define x 6) x", "6");
	ok(G, "(define (f) 1 2 3) (f)", "3");
	ok(G, "(define (len l) (if (= (count l) 0) 0 "
	    "(count (list (len (rest l)) 1)))) (len '(1 2 3))", "2");
	/* define in a body is local to that call */
	bad(G, "(define (f) (define z 1) z) (f) z", "QUERY_ERROR",
	    "unknown name \\\"z\\\"");
	ok(G, "(define (f) (define z 1) z) (f)", "1");
	/* closures see later defines of the run */
	ok(G, "(define (f) g) (define g 3) (f)", "3");
	ok(G, "(lambda (x) x)", "#<lambda lambda>");
	ok(G, "(define (sq x) x) sq", "#<lambda sq>");
	ok(G, "filter", "#<function filter>");
	ok(G, "(:confidence (get-principle \"contagious-materialization\"))",
	    "0.95");
	/* a loop written as tail recursion runs in constant depth */
	ok(G, "(define (loop l) (if (= (count l) 0) 'done (loop (rest l))))"
	    " (loop '(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"
	    " 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44"
	    " 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66"
	    " 67 68 69 70))", "done");
}
END_TEST

START_TEST(special_form_errors)
{
	bad(G, "(quote)", "QUERY_ERROR", "(quote X)");
	bad(G, "(quote a b)", "QUERY_ERROR", "(quote X)");
	bad(G, "(if 1)", "QUERY_ERROR", "(if TEST THEN ELSE)");
	bad(G, "(if 1 2 3 4)", "QUERY_ERROR", "(if TEST THEN ELSE)");
	bad(G, "(let x 1)", "QUERY_ERROR", "bindings must be a list");
	bad(G, "(let ((x)) x)", "QUERY_ERROR", "(NAME VALUE)");
	bad(G, "(let ((1 2)) 1)", "QUERY_ERROR", "not a name");
	bad(G, "(let ((x 1)))", "QUERY_ERROR", "wrong number");
	bad(G, "(lambda x x)", "QUERY_ERROR", "list of names");
	bad(G, "(lambda (1) 1)", "QUERY_ERROR", "not a name");
	bad(G, "(lambda (x))", "QUERY_ERROR", "wrong number");
	bad(G, "(define)", "QUERY_ERROR", "define");
	bad(G, "(define x)", "QUERY_ERROR", "define");
	bad(G, "(define x 1 2)", "QUERY_ERROR", "(define NAME VALUE)");
	bad(G, "(define 5 1)", "QUERY_ERROR", "not a name");
	bad(G, "(define if 1)", "QUERY_ERROR", "cannot be rebound");
	bad(G, "(define () 1)", "QUERY_ERROR", "names nothing");
	bad(G, "(define (lambda) 1)", "QUERY_ERROR", "cannot be rebound");
	bad(G, "if", "QUERY_ERROR", "special form");
	bad(G, "((lambda (x) x))", "QUERY_ERROR",
	    "lambda takes 1 argument, got 0");
	bad(G, "(define (f a b) a) (f 1)", "QUERY_ERROR",
	    "f takes 2 arguments, got 1");
	bad(G, "(1 2)", "QUERY_ERROR", "a number is not a function");
	bad(G, "(\"get-principles\")", "QUERY_ERROR", "not a function");
	bad(G, "(define x 1) (x)", "QUERY_ERROR", "not a function");
	bad(G, "(:name 1)", "QUERY_ERROR", "reads a field of one entity; "
	    "got a number");
	bad(G, "(:name 1 2)", "QUERY_ERROR", "got 2 arguments");
	ok(G, "(:name nil)", "nil");
	bad(G, "(get-principal \"x\")", "QUERY_ERROR",
	    "unknown function \\\"get-principal\\\": did you mean "
	    "get-principle? the functions are listed in parley-knowledge(7)");
	bad(G, "(flter (lambda (x) x) '())", "QUERY_ERROR",
	    "did you mean filter?");
	bad(G, "(zzzzzzzz)", "QUERY_ERROR",
	    "unknown function \\\"zzzzzzzz\\\": the functions are listed");
	bad(G, "(define (myfun) 1) (myfum)", "QUERY_ERROR",
	    "did you mean myfun?");
	bad(G, "(list principle)", "QUERY_ERROR",
	    "unknown name \\\"principle\\\"");
}
END_TEST

START_TEST(graph_functions)
{
	ok(G, "(get-principle \"contagious-materialization\")",
	    "(principle \"contagious-materialization\" \"Syncing spreads from "
	    "root automatically\" :confidence 0.95 :locations "
	    "[\"plexus/README.md:28\"] :evidence [\"tested-in-production\"] "
	    ":tags [\"plexus\" \"sync\"])");
	ok(G, "(get-principle \"wrong-impossible-through-structure\")",
	    "(principle \"wrong-impossible-through-structure\" \"Make invalid "
	    "states \\\"impossible\\\"\\n\" :confidence 0.7 :tags "
	    "[\"architecture\"])");
	ok(G, "(get-principle \"nope\")", "nil");
	ok(G, "(map (lambda (p) (@ p :name)) (get-principles))",
	    "(list \"contagious-materialization\" \"no-confidence\" "
	    "\"wrong-impossible-through-structure\")");
	ok(G, "(map :name (get-patterns))",
	    "(list \"catamorphism\" \"plexus-model-with-decorators\")");
	ok(G, "(get-pattern \"plexus-model-with-decorators\")",
	    "(pattern \"plexus-model-with-decorators\" \"Class extends "
	    "PlexusModel\" :type \"plexus-model\" :confidence 0.9 :location "
	    "\"plexus/src/PlexusModel.ts:15\" :tags [\"pattern\" \"plexus\"])");
	ok(G, "(get-pattern \"none\")", "nil");
	ok(G, "(map :name (get-patterns-by-type \"plexus-model\"))",
	    "(list \"plexus-model-with-decorators\")");
	ok(G, "(get-patterns-by-type \"nothing\")", "(list)");
	ok(G, "(map :name (get-decisions))",
	    "(list \"old-way\" \"use-stage3-decorators\")");
	ok(G, "(get-decision \"use-stage3-decorators\")",
	    "(decision \"use-stage3-decorators\" \"Use Stage 3 decorators\" "
	    ":rationale \"Native\" :status \"active\" :impact 9 :locations "
	    "[\"plexus/README.md:45\"])");
	ok(G, "(map :name (get-decisions-by-status \"deprecated\"))",
	    "(list \"old-way\")");
	ok(G, "(map :path (get-files))",
	    "(list \"plexus/src/PlexusModel.ts\" \"plexus/src/tracking.ts\")");
	ok(G, "(get-file-understanding \"plexus/src/PlexusModel.ts\")",
	    "(file \"plexus/src/PlexusModel.ts\" \"Base class for all Plexus "
	    "entities\" :hash \"" H1 "\" :concepts [\"decorators\" \"CRDT\"] "
	    ":importantSymbols [\"PlexusModel\"] :relatedFiles "
	    "[\"plexus/src/Plexus.ts\"] :lastAnalyzed 1000)");
	ok(G, "(get-file-understanding \"plexus/src/tracking.ts\")",
	    "(file \"plexus/src/tracking.ts\" \"Tracks reads\" :hash "
	    "\"" H2 "\" :lastAnalyzed 1000 "
	    ":stale #t)");
	ok(G, "(get-related-files \"plexus/src/PlexusModel.ts\")",
	    "(list \"plexus/src/Plexus.ts\" \"plexus/src/tracking.ts\")");
	ok(G, "(get-related-files \"plexus/src/tracking.ts\")",
	    "(list \"plexus/src/PlexusModel.ts\")");
	ok(G, "(get-related-files \"nowhere.c\")", "(list)");
	ok(G, "(count (get-relationships))", "3");
	ok(G, "(get-relationships-from \"contagious-materialization\")",
	    "(list (relationship \"contagious-materialization\" \"Root "
	    "materialization triggers child sync\" :to "
	    "\"wrong-impossible-through-structure\" :type \"supports\"))");
	ok(G, "(map (lambda (r) (@ r :from)) (get-relationships-to "
	    "\"contagious-materialization\"))",
	    "(list \"plexus/src/PlexusModel.ts\")");
	ok(G, "(get-relationships-from \"nobody\")", "(list)");
	ok(G, "(map (lambda (e) (list (kind e) (if (= (kind e) \"file\") "
	    "(@ e :path) (@ e :name)))) (search-knowledge \"DECORATORS\"))",
	    "(list (list \"pattern\" \"plexus-model-with-decorators\") "
	    "(list \"decision\" \"use-stage3-decorators\") "
	    "(list \"file\" \"plexus/src/PlexusModel.ts\"))");
	bad(G, "(map (lambda (e) (@ e :name)) (get-files))", "QUERY_ERROR",
	    "a file has no field :name; its fields are :path :hash");
	ok(G, "(map kind (get-refs \"plexus/src/PlexusModel.ts\"))",
	    "(list \"pattern\" \"file\" \"relationship\" \"relationship\")");
	ok(G, "(map (lambda (e) (list (kind e) (:stale e))) (get-stale))",
	    "(list (list \"pattern\" #t) (list \"file\" #t))");
	ok(G, "(map (lambda (e) (list (kind e) (@ e \"name\"))) "
	    "(get-by-tag \"plexus\"))",
	    "(list (list \"principle\" \"contagious-materialization\") "
	    "(list \"pattern\" \"plexus-model-with-decorators\"))");
	ok(G, "(get-by-tag \"none\")", "(list)");
	ok(G, "(kind (get-entity \"old-way\"))", "\"decision\"");
	ok(G, "(kind (get-entity \"catamorphism\"))", "\"pattern\"");
	ok(G, "(kind (get-entity \"plexus/src/tracking.ts\"))", "\"file\"");
	ok(G, "(kind (get-entity \"no-confidence\"))", "\"principle\"");
	ok(G, "(get-entity \"nothing\")", "nil");
	ok(G, "(@ (get-principle \"no-confidence\") :confidence)", "nil");
	ok(G, "(count (@ (get-principle \"no-confidence\") :tags))", "0");
	ok(G, "(@ (get-principle \"no-confidence\") :stale)", "#f");
	ok(G, "(@ nil :name)", "nil");
	ok(G, "(> (@ (get-principle \"old\") :seq) 0)", "#f");
	ok(G, "(@ (get-principle \"no-confidence\") :seq)", "1");
	/* the seed's queries */
	ok(G, "(map :name (filter (lambda (p) (> (@ p :confidence) 0.8)) "
	    "(get-principles)))", "(list \"contagious-materialization\")");
	ok(G, "(map :name (filter (lambda (pat) (> (@ pat :confidence) 0.9))"
	    " (get-patterns)))", "(list)");
	ok(G, "(map :name (take 5 (sort-by (lambda (p) (@ p :confidence)) "
	    "(get-patterns) :desc)))",
	    "(list \"plexus-model-with-decorators\" \"catamorphism\")");
}
END_TEST

START_TEST(graph_function_errors)
{
	bad(G, "(get-principles 1)", "QUERY_ERROR",
	    "get-principles takes 0 arguments, got 1: write "
	    "(get-principles)");
	bad(G, "(get-principle)", "QUERY_ERROR",
	    "get-principle takes 1 argument, got 0");
	bad(G, "(get-principle 5)", "QUERY_ERROR",
	    "get-principle: argument 1 must be a string, got a number");
	bad(G, "(get-pattern 'x)", "QUERY_ERROR", "got a symbol");
	bad(G, "(get-patterns-by-type nil)", "QUERY_ERROR", "got nil");
	bad(G, "(get-decision :x)", "QUERY_ERROR", "got a keyword");
	bad(G, "(get-decisions-by-status 1)", "QUERY_ERROR", "a string");
	bad(G, "(get-file-understanding (list))", "QUERY_ERROR", "a list");
	bad(G, "(get-related-files #t)", "QUERY_ERROR", "a boolean");
	bad(G, "(get-relationships-from 1)", "QUERY_ERROR", "a string");
	bad(G, "(get-relationships-to 1)", "QUERY_ERROR", "a string");
	bad(G, "(search-knowledge 1)", "QUERY_ERROR", "a string");
	bad(G, "(search-knowledge \"\")", "QUERY_ERROR", "empty");
	bad(G, "(get-refs 1)", "QUERY_ERROR", "a string");
	bad(G, "(get-by-tag 1)", "QUERY_ERROR", "a string");
	bad(G, "(get-entity 1)", "QUERY_ERROR", "a string");
	bad(G, "(get-stale 1)", "QUERY_ERROR", "0 arguments");
	bad(G, "(@ 1 :name)", "QUERY_ERROR", "must be an entity");
	bad(G, "(@ (get-principle \"no-confidence\") 1)", "QUERY_ERROR",
	    "a :keyword");
	bad(G, "(@ (get-principle \"no-confidence\") :foo)", "QUERY_ERROR",
	    "a principle has no field :foo; its fields are :name "
	    ":description");
	bad(G, "(kind 1)", "QUERY_ERROR", "an entity");
}
END_TEST

START_TEST(value_functions)
{
	ok(G, "(filter (lambda (x) (> x 1)) '(1 2 3))", "(list 2 3)");
	ok(G, "(filter (lambda (x) x) nil)", "(list)");
	ok(G, "(map (lambda (x) (list x)) [1 2])", "(list (list 1) (list 2))");
	ok(G, "(map lower '(\"A\" \"b\"))", "(list \"a\" \"b\")");
	ok(G, "(sort-by (lambda (x) x) '(3 1 2))", "(list 1 2 3)");
	ok(G, "(sort-by (lambda (x) x) '(3 1 2) :desc)", "(list 3 2 1)");
	ok(G, "(sort-by (lambda (x) x) '(3 1 2) :asc)", "(list 1 2 3)");
	ok(G, "(sort-by (lambda (x) x) '(\"b\" \"a\" \"ab\"))",
	    "(list \"a\" \"ab\" \"b\")");
	ok(G, "(sort-by first '((2 a) (1 b) (nil c) (1 d)))",
	    "(list (list 1 b) (list 1 d) (list 2 a) (list nil c))");
	ok(G, "(sort-by first '((2 a) (1 b) (nil c) (1 d)) :desc)",
	    "(list (list 2 a) (list 1 b) (list 1 d) (list nil c))");
	ok(G, "(map :name (sort-by :confidence (get-principles)))",
	    "(list \"wrong-impossible-through-structure\" "
	    "\"contagious-materialization\" \"no-confidence\")");
	ok(G, "(take 2 '(1 2 3))", "(list 1 2)");
	ok(G, "(take 0 '(1 2 3))", "(list)");
	ok(G, "(take 9 '(1 2 3))", "(list 1 2 3)");
	ok(G, "(count '(1 2 3))", "3");
	ok(G, "(count nil)", "0");
	ok(G, "(count (get-principles))", "3");
	ok(G, "(length \"h\xc3\xa9\")", "3");
	ok(G, "(length '(1))", "1");
	ok(G, "(first '(1 2))", "1");
	ok(G, "(first '())", "nil");
	ok(G, "(rest '(1 2))", "(list 2)");
	ok(G, "(rest '())", "(list)");
	ok(G, "(list)", "(list)");
	ok(G, "(list 1 \"a\" :b)", "(list 1 \"a\" :b)");
	ok(G, "(not #f)", "#t");
	ok(G, "(not nil)", "#t");
	ok(G, "(not 0)", "#f");
	ok(G, "(= 1 1 1)", "#t");
	ok(G, "(= 1 2)", "#f");
	ok(G, "(= \"a\" \"a\")", "#t");
	ok(G, "(= \"a\" 'a)", "#f");
	ok(G, "(= '(1 (2)) [1 [2]])", "#t");
	ok(G, "(= nil nil)", "#t");
	ok(G, "(= :a :a)", "#t");
	ok(G, "(= (get-principle \"no-confidence\") (get-entity "
	    "\"no-confidence\"))", "#t");
	ok(G, "(< 1 2 3)", "#t");
	ok(G, "(< 1 3 2)", "#f");
	ok(G, "(> 3 2)", "#t");
	ok(G, "(<= 2 2 3)", "#t");
	ok(G, "(>= 3 3 4)", "#f");
	ok(G, "(< \"a\" \"b\")", "#t");
	ok(G, "(> \"a\" \"ab\")", "#f");
	ok(G, "(> nil 0.8)", "#f");
	ok(G, "(< 0.8 nil)", "#f");
	ok(G, "(contains? \"hello world\" \"o w\")", "#t");
	ok(G, "(contains? \"hello\" \"Hello\")", "#f");
	ok(G, "(contains? \"hi\" \"\")", "#t");
	ok(G, "(contains? \"hi\" \"hi!\")", "#f");
	ok(G, "(contains? \"abab\" \"bab\")", "#t");
	ok(G, "(contains? '(1 \"a\") \"a\")", "#t");
	ok(G, "(contains? '(1 \"a\") 2)", "#f");
	ok(G, "(contains? nil 2)", "#f");
	ok(G, "(contains? (@ (get-principle \"contagious-materialization\") "
	    ":tags) \"sync\")", "#t");
	ok(G, "(starts-with? \"plexus/src\" \"plexus/\")", "#t");
	ok(G, "(starts-with? \"plexus\" \"plexus/\")", "#f");
	ok(G, "(starts-with? nil \"x\")", "#f");
	ok(G, "(lower \"MiXeD \xc3\x89\")", "\"mixed \xc3\x89\"");
	ok(G, "(lower nil)", "nil");
	ok(G, "(str \"a\" 1 2.5 'b :c #t #f nil)", "\"a12.5b:c#t#f\"");
	ok(G, "(str)", "\"\"");
}
END_TEST

START_TEST(value_function_errors)
{
	bad(G, "(filter 1 '())", "QUERY_ERROR",
	    "filter: argument 1 must be a function");
	bad(G, "(filter (lambda (x) x) 1)", "QUERY_ERROR",
	    "argument 2 must be a list, got a number");
	bad(G, "(filter (lambda (x y) x) '(1))", "QUERY_ERROR",
	    "takes 2 arguments, got 1");
	bad(G, "(map \"f\" '())", "QUERY_ERROR", "a function");
	bad(G, "(map (lambda (x) x) \"s\")", "QUERY_ERROR", "a list");
	bad(G, "(sort-by 1 '())", "QUERY_ERROR", "a function");
	bad(G, "(sort-by first 1)", "QUERY_ERROR", "a list");
	bad(G, "(sort-by (lambda (x) x) '(1 2) :up)", "QUERY_ERROR",
	    ":asc or :desc");
	bad(G, "(sort-by (lambda (x) x) '(1 \"a\"))", "QUERY_ERROR",
	    "mix numbers and strings");
	bad(G, "(sort-by (lambda (x) x) '((1)))", "QUERY_ERROR",
	    "keys must be numbers or strings");
	bad(G, "(take \"2\" '())", "QUERY_ERROR", "a whole number");
	bad(G, "(take -1 '())", "QUERY_ERROR", "a whole number");
	bad(G, "(take 1.5 '())", "QUERY_ERROR", "a whole number");
	ok(G, "(take 1e300 '(1))", "(list 1)");
	bad(G, "(take 1 2)", "QUERY_ERROR", "a list");
	bad(G, "(count \"abc\")", "QUERY_ERROR", "a list");
	bad(G, "(length 1)", "QUERY_ERROR", "a list");
	bad(G, "(first 1)", "QUERY_ERROR", "a list");
	bad(G, "(rest \"x\")", "QUERY_ERROR", "a list");
	bad(G, "(not)", "QUERY_ERROR", "not takes 1 argument");
	bad(G, "(= 1)", "QUERY_ERROR", "at least 2 arguments");
	bad(G, "(< 1 \"a\")", "QUERY_ERROR", "compares numbers with numbers");
	bad(G, "(> '(1) 2)", "QUERY_ERROR", "compares numbers");
	bad(G, "(<= :a :b)", "QUERY_ERROR", "compares");
	bad(G, "(>= 1)", "QUERY_ERROR", "at least 2");
	bad(G, "(contains? 1 2)", "QUERY_ERROR", "a string or a list");
	bad(G, "(contains? \"a\" 2)", "QUERY_ERROR", "a string");
	bad(G, "(starts-with? 1 \"a\")", "QUERY_ERROR", "a string");
	bad(G, "(starts-with? \"a\" 1)", "QUERY_ERROR", "a string");
	bad(G, "(lower 1)", "QUERY_ERROR", "a string");
	bad(G, "(str '(1))", "QUERY_ERROR", "str: argument 1 must be");
	bad(G, "(str (get-principle \"no-confidence\"))", "QUERY_ERROR",
	    "got principle");
}
END_TEST

/* A JSON answer parses, and prints back as want (cJSON's form). */
static void
okjson(const struct kg *g, const char *q, const char *want)
{
	int	 err = -1;
	char	*s = runq(g, q, KGQ_JSON, NULL, &err), *back;
	cJSON	*j = cJSON_Parse(s);

	ck_assert_msg(err == 0 && j != NULL, "%s: %s", q, s);
	back = cJSON_PrintUnformatted(j);
	ck_assert_msg(strcmp(back, want) == 0, "%s\n  got  %s\n  want %s", q,
	    back, want);
	free(back);
	cJSON_Delete(j);
	free(s);
}

START_TEST(json_format)
{
	const struct kg_entity	*e;
	cJSON			*j;
	char			*want, *arr;
	size_t			 len;
	int			 err;
	char			*s;

	okjson(G, "nil", "null");
	okjson(G, "#t", "true");
	okjson(G, "#f", "false");
	okjson(G, "42", "42");
	okjson(G, "0.95", "0.95");
	okjson(G, "\"a\\\"b\\\\c\\nd\\x01\"", "\"a\\\"b\\\\c\\nd\\u0001\"");
	okjson(G, "'sym", "\"sym\"");
	okjson(G, ":kw", "\":kw\"");
	okjson(G, "'(1 \"a\" (2) ())", "[1,\"a\",[2],[]]");
	okjson(G, "filter", "\"#<function filter>\"");
	/* an exact text: numbers as the sexp form prints them */
	s = runq(G, "'(1 2.5 -3 1e21)", KGQ_JSON, NULL, &err);
	ck_assert_str_eq(s, "[1,2.5,-3,1e+21]");
	free(s);

	e = kg_get(G, KG_PRINCIPLE, "contagious-materialization");
	ck_assert_ptr_nonnull(e);
	j = kg_entity_json(e);
	want = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	okjson(G, "(get-principle \"contagious-materialization\")", want);
	len = strlen(want);
	arr = malloc(len + 3);
	snprintf(arr, len + 3, "[%s]", want);
	okjson(G, "(filter (lambda (p) (> (@ p :confidence) 0.8)) "
	    "(get-principles))", arr);
	free(arr);
	free(want);

	s = runq(G, "(get-principal)", KGQ_JSON, NULL, &err);
	ck_assert_int_eq(err, 1);
	j = cJSON_Parse(s);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"),
	    "code")->valuestring, "QUERY_ERROR");
	ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(
	    j, "error"), "message")->valuestring,
	    "unknown function \"get-principal\": did you mean get-principle?"));
	cJSON_Delete(j);
	free(s);
	s = runq(G, "(\"x", KGQ_JSON, NULL, &err);
	ck_assert_int_eq(err, 1);
	ck_assert_ptr_nonnull(strstr(s, "{\"error\":{\"code\":\"QUERY_SYNTAX\","
	    "\"message\":\"line 1 column 2: string not closed: add a \\\" at "
	    "its end\"}}"));
	free(s);
}
END_TEST

START_TEST(compact_whole_list)
{
	/* the exact compact form of a whole list of entities */
	ok(G, "(get-decisions)",
	    "(list (decision \"old-way\" \"Legacy\" :status \"deprecated\" "
	    ":impact 2) (decision \"use-stage3-decorators\" \"Use Stage 3 "
	    "decorators\" :rationale \"Native\" :status \"active\" :impact 9 "
	    ":locations [\"plexus/README.md:45\"]))");
	ok(G, "(get-relationships-to \"plexus/src/PlexusModel.ts\")",
	    "(list (relationship \"plexus/src/tracking.ts\" :to "
	    "\"plexus/src/PlexusModel.ts\" :type \"uses\"))");
}
END_TEST

static struct kgq_limits
lims(size_t steps, size_t depth, size_t mem, size_t out)
{
	struct kgq_limits	l;

	kgq_defaults(&l);
	if (steps)
		l.steps = steps;
	if (depth)
		l.depth = depth;
	if (mem)
		l.mem = mem;
	if (out)
		l.out = out;
	return l;
}

START_TEST(bound_defaults)
{
	struct kgq_limits	l;

	kgq_defaults(&l);
	ck_assert_uint_eq(l.steps, 200000);
	ck_assert_uint_eq(l.depth, 64);
	ck_assert_uint_eq(l.mem, 8 * 1024 * 1024);
	ck_assert_uint_eq(l.out, 1024 * 1024);
}
END_TEST

START_TEST(bound_steps)
{
	struct kgq_limits	l = lims(50, 0, 0, 0);

	bad(G, "(define (f) (f)) (f)", "QUERY_LIMIT",
	    "steps: the query took more than 200000 evaluation steps");
	bad(G, "((lambda (x) (x x)) (lambda (x) (x x)))", "QUERY_LIMIT",
	    "steps");
	bad(G, "(define (f x) (if x (f x) 1)) (f #t)", "QUERY_LIMIT",
	    "steps");
	bad_lim(G, "(map (lambda (x) (list x x x)) '(1 2 3 4 5 6 7 8 9 10))",
	    &l, "QUERY_LIMIT", "more than 50 evaluation steps");
	ok(G, "(map (lambda (x) (list x x x)) '(1 2))",
	    "(list (list 1 1 1) (list 2 2 2))");
}
END_TEST

/* Work inside a function costs steps: no run is slow within its steps. */
START_TEST(bound_steps_cost)
{
	static const char	 dbl[] = "(define (g x) (if (> (length x) "
	    "1000000) x (g (str x x)))) (length (g \"0123456789abcdef\"))";
	struct kgq_limits	 l = lims(100, 0, 0, 0);
	char			*q = malloc(8192), *p;
	size_t			 i;

	p = q + sprintf(q, "(define l '(");
	for (i = 0; i < 2000; i++)
		p += sprintf(p, "1 ");
	sprintf(p, ")) (contains? l 5)");
	bad_lim(G, q, &l, "QUERY_LIMIT", "more than 100 evaluation steps");
	ok(G, q, "#f");
	sprintf(p, ")) (= l l)");
	bad_lim(G, q, &l, "QUERY_LIMIT", "steps");
	sprintf(p, ")) (sort-by (lambda (x) x) (take 5 l))");
	ok(G, q, "(list 1 1 1 1 1)");
	free(q);
	l.steps = 300;
	ok(G, dbl, "1048576");
	bad_lim(G, dbl, &l, "QUERY_LIMIT", "more than 300 evaluation steps");
	/* a long walk through thousands of names costs steps too */
	q = malloc(65536);
	p = q;
	for (i = 0; i < 3000; i++)
		p += sprintf(p, "(define v%zu 1)", i);
	sprintf(p, "(define (f x) (if (= x v0) (f x) 1)) (f 1)");
	l.steps = 200000;
	bad_lim(G, q, &l, "QUERY_LIMIT", "steps");
	free(q);
}
END_TEST

START_TEST(bound_depth)
{
	struct kgq_limits	 l = lims(0, 1000000, 0, 0);
	char			*q;
	size_t			 n = 100000, i;

	q = malloc(n + 1);
	memset(q, '(', n);
	q[n] = '\0';
	bad(G, q, "QUERY_LIMIT", "the query is 100000 bytes, at most 65536");
	n = 60000;
	q[n] = '\0';
	bad(G, q, "QUERY_LIMIT", "depth: the query nests deeper than depth "
	    "64");
	/* the caller's depth is clamped where the C stack is safe */
	bad_lim(G, q, &l, "QUERY_LIMIT", "deeper than depth 256");
	for (i = 0; i < n; i++)
		q[i] = (i % 2) ? '[' : '\'';
	bad(G, q, "QUERY_LIMIT", "depth");
	free(q);
	bad(G, "(define (f x) (list (f x))) (f 1)", "QUERY_LIMIT",
	    "depth: the query nests deeper than depth 64");
	bad_lim(G, "(define (f x) (list (f x))) (f 1)", &l, "QUERY_LIMIT",
	    "depth 256");
	bad(G, "(define (f x) (filter f (list x))) (f 1)", "QUERY_LIMIT",
	    "depth");
	/* data nested deeper than depth cannot be printed or compared */
	bad(G, "(define (nest x l) (if (= (count l) 0) x "
	    "(nest (list x) (rest l)))) "
	    "(define l (map (lambda (x) x) '(1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"
	    " 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"
	    " 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1)))"
	    "(nest 1 l)", "QUERY_LIMIT", "depth");
	bad(G, "(define (nest x l) (if (= (count l) 0) x "
	    "(nest (list x) (rest l)))) "
	    "(define l '(1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"
	    " 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"
	    " 1 1 1 1 1 1 1 1 1 1))"
	    "(= (nest 1 l) (nest 1 l))", "QUERY_LIMIT", "depth");
}
END_TEST

START_TEST(bound_mem)
{
	struct kgq_limits	l = lims(10000000, 0, 0, 0);
	struct kgq_limits	small = lims(0, 0, 4096, 0);

	bad(G, "(define (g x) (g (str x x))) (g \"x\")", "QUERY_LIMIT",
	    "mem: the query needs more than 8388608 bytes");
	bad_lim(G, "(define (g x) (g (list x x))) (g 1)", &l, "QUERY_LIMIT",
	    "mem: the query needs more than 8388608 bytes");
	bad_lim(G, "(get-principles) (get-principles) (get-principles)"
	    "(map (lambda (x) (list x x x x x x x x x)) '(1 2 3 4 5 6 7 8 9 0 "
	    "1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0))", &small,
	    "QUERY_LIMIT", "more than 4096 bytes");
}
END_TEST

START_TEST(bound_out)
{
	struct kgq_limits	 l = lims(0, 0, 0, 60);
	int			 err;
	char			*s;
	size_t			 len;

	bad_lim(G, "(get-principles)", &l, "QUERY_LIMIT",
	    "out: the answer is over 60 bytes");
	s = kgq_eval(G, "(get-principles)", 16, KGQ_JSON, &l, &err, &len);
	ck_assert_int_eq(err, 1);
	ck_assert_ptr_nonnull(strstr(s, "\"code\":\"QUERY_LIMIT\""));
	ck_assert_ptr_nonnull(strstr(s, "out: the answer is over 60"));
	free(s);
	/* exactly at the bound is fine */
	l.out = 7;
	s = kgq_eval(G, "\"12345\"", 7, KGQ_SEXP, &l, &err, &len);
	ck_assert_int_eq(err, 0);
	ck_assert_str_eq(s, "\"12345\"");
	free(s);
	l.out = 6;
	bad_lim(G, "\"12345\"", &l, "QUERY_LIMIT", "over 6 bytes");
	/* a huge answer from a small query, with the default bound */
	bad(G, "(define (g x) (if (> (length x) 2000000) x (g (str x x)))) "
	    "(g \"0123456789\")", "QUERY_LIMIT", "out: the answer is over "
	    "1048576 bytes");
}
END_TEST

/*
 * Every function once (and each special form), the graph's snapshot
 * unchanged across the run.
 */
START_TEST(graph_unchanged)
{
	static const char *const qs[] = {
		"(get-principles)", "(get-principle \"no-confidence\")",
		"(get-patterns)", "(get-pattern \"catamorphism\")",
		"(get-patterns-by-type \"plexus-model\")", "(get-decisions)",
		"(get-decision \"old-way\")",
		"(get-decisions-by-status \"active\")", "(get-files)",
		"(get-file-understanding \"plexus/src/tracking.ts\")",
		"(get-related-files \"plexus/src/PlexusModel.ts\")",
		"(get-relationships)",
		"(get-relationships-from \"contagious-materialization\")",
		"(get-relationships-to \"plexus/src/PlexusModel.ts\")",
		"(search-knowledge \"plexus\")",
		"(get-refs \"plexus/src/PlexusModel.ts\")", "(get-stale)",
		"(get-by-tag \"plexus\")", "(get-entity \"old-way\")",
		"(@ (get-entity \"old-way\") :status)",
		"(kind (get-entity \"old-way\"))",
		"(filter (lambda (p) (> (@ p :confidence) 0.8)) "
		"(get-principles))",
		"(map :name (get-patterns))",
		"(sort-by :confidence (get-patterns) :desc)",
		"(take 1 (get-files))", "(count (get-stale))",
		"(length (get-decisions))", "(first (get-principles))",
		"(rest (get-principles))", "(list (get-principles))",
		"(not (get-files))", "(= (get-files) (get-files))",
		"(< 1 2)", "(> 1 2)", "(<= 1 2)", "(>= 1 2)",
		"(contains? (get-files) 1)", "(starts-with? \"ab\" \"a\")",
		"(lower \"A\")", "(str \"a\" 1)",
		"(let ((x (get-files))) (if (and x (or #f x)) 'q x))",
		"(define (f) (f)) (f)", "(get-principal)",
	};
	const char *const	*fn;
	char			*before, *after, *s;
	size_t			 blen, alen, i, j;
	int			 err, seen;

	before = kg_snapshot(G, &blen);
	ck_assert_ptr_nonnull(before);
	for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		s = runq(G, qs[i], KGQ_SEXP, NULL, &err);
		free(s);
		s = runq(G, qs[i], KGQ_JSON, NULL, &err);
		free(s);
	}
	/* every function is in the list above */
	for (fn = kgq_functions; *fn != NULL; fn++) {
		char	sp[64], cl[64];

		snprintf(sp, sizeof(sp), "(%s ", *fn);
		snprintf(cl, sizeof(cl), "(%s)", *fn);
		for (seen = 0, j = 0; j < sizeof(qs) / sizeof(qs[0]); j++)
			seen |= strstr(qs[j], sp) != NULL ||
			    strstr(qs[j], cl) != NULL;
		ck_assert_msg(seen, "%s not run", *fn);
	}
	after = kg_snapshot(G, &alen);
	ck_assert_uint_eq(blen, alen);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
}
END_TEST

START_TEST(function_list)
{
	/* kgq.h's comment names these; all of them must be callable */
	static const char *const named[] = {
		"get-principles", "get-principle", "get-patterns",
		"get-pattern", "get-patterns-by-type", "get-decisions",
		"get-decision", "get-decisions-by-status", "get-files",
		"get-file-understanding", "get-related-files",
		"get-relationships", "get-relationships-from",
		"get-relationships-to", "search-knowledge", "get-stale",
		"get-by-tag", "get-entity", "filter", "map", "sort-by",
		"take", "count", "length", "first", "rest", "list", "not",
		"=", "<", ">", "<=", ">=", "contains?", "starts-with?",
		"lower", "str", "@",
	};
	const char *const	*fn;
	size_t			 i, n = 0;
	char			 q[64], *s;
	int			 err, found;

	for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		for (found = 0, fn = kgq_functions; *fn != NULL; fn++)
			found |= strcmp(*fn, named[i]) == 0;
		ck_assert_msg(found, "%s missing", named[i]);
	}
	for (fn = kgq_functions; *fn != NULL; fn++, n++) {
		snprintf(q, sizeof(q), "%s", *fn);
		s = runq(G, q, KGQ_SEXP, NULL, &err);
		ck_assert_int_eq(err, 0);
		ck_assert_ptr_nonnull(strstr(s, "#<function "));
		free(s);
	}
	ck_assert_uint_ge(n, sizeof(named) / sizeof(named[0]));
}
END_TEST

START_TEST(empty_graph)
{
	struct kg	*g = kg_new("empty");

	ok(g, "(get-principles)", "(list)");
	ok(g, "(get-principle \"x\")", "nil");
	ok(g, "(get-stale)", "(list)");
	ok(g, "(get-related-files \"a\")", "(list)");
	ok(g, "(count (search-knowledge \"x\"))", "0");
	kg_free(g);
}
END_TEST

static Suite *
kgq_suite(void)
{
	Suite	*s = suite_create("kgq");
	TCase	*tc = tcase_create("kgq");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, reader_atoms);
	tcase_add_test(tc, reader_errors);
	tcase_add_test(tc, reader_nul_and_size);
	tcase_add_test(tc, special_forms);
	tcase_add_test(tc, special_form_errors);
	tcase_add_test(tc, graph_functions);
	tcase_add_test(tc, graph_function_errors);
	tcase_add_test(tc, value_functions);
	tcase_add_test(tc, value_function_errors);
	tcase_add_test(tc, json_format);
	tcase_add_test(tc, compact_whole_list);
	tcase_add_test(tc, bound_defaults);
	tcase_add_test(tc, bound_steps);
	tcase_add_test(tc, bound_steps_cost);
	tcase_add_test(tc, bound_depth);
	tcase_add_test(tc, bound_mem);
	tcase_add_test(tc, bound_out);
	tcase_add_test(tc, graph_unchanged);
	tcase_add_test(tc, function_list);
	tcase_add_test(tc, empty_graph);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(kgq_suite());
}
