/*
 * Unit tests for the staleness of knowledge (workers/kgstale.c): a real
 * graph (kg.h) folded from batches, against a fake index whose files and
 * generation the test sets (index_file_hash itself is test_index's).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/kgstale.c"
#include "check_main.h"

#define H1	"1111111111111111111111111111111111111111111111111111111111111111"
#define H2	"2222222222222222222222222222222222222222222222222222222222222222"
#define H3	"3333333333333333333333333333333333333333333333333333333333333333"
#define HB	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* The fake index: what index_file_hash answers per path. */
struct fake_file {
	const char	*path;
	int		 rc;		/* 1 held, -1 removed, 0 not judged */
	const char	*hex;
};
static struct fake_file files[8];
static size_t nfiles;
static uint64_t gen;
static unsigned lookups;

uint64_t
index_generation(struct wk *wk)
{
	(void)wk;
	return gen;
}

int
index_file_hash(struct wk *wk, const char *path, char hex[65])
{
	size_t i;

	(void)wk;
	lookups++;
	hex[0] = '\0';
	for (i = 0; i < nfiles; i++)
		if (strcmp(files[i].path, path) == 0) {
			if (files[i].rc == 1)
				snprintf(hex, 65, "%s", files[i].hex);
			return files[i].rc;
		}
	return 0;
}

static void
index_set(const char *path, int rc, const char *hex)
{
	size_t i;

	for (i = 0; i < nfiles; i++)
		if (strcmp(files[i].path, path) == 0)
			break;
	ck_assert_uint_lt(i, sizeof(files) / sizeof(files[0]));
	if (i == nfiles)
		nfiles++;
	files[i].path = path;
	files[i].rc = rc;
	files[i].hex = hex;
	gen++;
}

static struct kg *g;
static uint64_t seq, hlc = 1000000;

static void
setup(void)
{
	nfiles = 0;
	gen = 0;
	lookups = 0;
	seq = 0;
	ck_assert_ptr_nonnull(g = kg_new("p"));
}

static void
teardown(void)
{
	kg_free(g);
}

/* Folds a batch of actions (JSON text). */
static void
batch(const char *json)
{
	cJSON *a = cJSON_Parse(json), *b;
	char id[32];

	ck_assert_ptr_nonnull(a);
	snprintf(id, sizeof(id), "b%llu", (unsigned long long)seq + 1);
	ck_assert_ptr_nonnull(b = kg_batch_body(a, id, ++hlc, "h/1", 1000,
	    NULL));
	ck_assert_int_eq(kg_fold(g, ++seq, "knowledge_batch", b), 0);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

/* Folds a body kgstale_check made, as the owner logs it. */
static void
fold_stale(cJSON *body)
{
	cJSON_AddNumberToObject(body, "hlc", (double)++hlc);
	cJSON_AddStringToObject(body, "origin", "h/1");
	ck_assert_int_eq(kg_fold(g, ++seq, "knowledge_stale", body), 0);
}

static int
is_stale(enum kg_kind k, const char *key)
{
	const struct kg_entity *e = kg_get(g, k, key);
	struct kg_val v;

	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(kg_field(e, "stale", &v), 0);
	return v.type == KG_V_BOOL && v.num != 0;
}

/* Whether body's entities hold kind/name. */
static int
names(const cJSON *body, const char *kind, const char *name)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(body, "entities"))
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "kind")), kind) == 0 && strcmp(cJSON_GetStringValue(
		    cJSON_GetObjectItem(e, "name")), name) == 0)
			return 1;
	return 0;
}

static const char *
str(const cJSON *o, const char *k)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));

	ck_assert_ptr_nonnull(s);
	return s;
}

static void
graph(void)
{
	batch("[[\"record-file-understanding\",{\"path\":\"a.c\",\"hash\":\""
	    H1 "\",\"summary\":\"the main\"}],"
	    "[\"record-file-understanding\",{\"path\":\"b.c\",\"hash\":\""
	    HB "\",\"summary\":\"unchanged\"}],"
	    "[\"record-file-understanding\",{\"path\":\"c.c\","
	    "\"summary\":\"no hash\"}],"
	    "[\"record-file-understanding\",{\"path\":\"d.c\",\"hash\":\""
	    H1 "\",\"summary\":\"not indexed\"}],"
	    "[\"record-pattern\",{\"name\":\"loop\",\"type\":\"idiom\","
	    "\"description\":\"an event loop\",\"confidence\":0.5,"
	    "\"location\":\"a.c:3\"}],"
	    "[\"record-principle\",{\"name\":\"small\",\"description\":"
	    "\"keep it small\",\"confidence\":0.9,\"locations\":[\"a.c:1\","
	    "\"b.c\"]}],"
	    "[\"record-decision\",{\"name\":\"elsewhere\",\"description\":"
	    "\"not about a.c\",\"rationale\":\"r\",\"status\":\"active\","
	    "\"locations\":[\"a.cc:1\"]}],"
	    "[\"link-entities\",{\"from\":\"loop\",\"to\":\"a.c\","
	    "\"type\":\"implemented-in\"}]]");
}

START_TEST(no_index)
{
	graph();
	ck_assert_ptr_null(kgstale_check(NULL, g));
	ck_assert_uint_eq(kgstale_generation(NULL), 0);
	ck_assert_uint_eq(lookups, 0);
}
END_TEST

START_TEST(empty_graph)
{
	index_set("a.c", 1, H2);
	ck_assert_ptr_null(kgstale_check(NULL, g));
	ck_assert_ptr_null(kgstale_check(NULL, NULL));
}
END_TEST

START_TEST(changed)
{
	cJSON *a, *b, *e;
	uint64_t g0;

	graph();
	index_set("a.c", 1, H1);
	index_set("b.c", 1, HB);
	index_set("c.c", 1, H2);	/* recorded without a hash */
	g0 = kgstale_generation(NULL);
	ck_assert_uint_ne(g0, 0);
	ck_assert_ptr_null(kgstale_check(NULL, g));
	/* d.c is not in the index; c.c has no hash: never looked up */
	ck_assert_uint_eq(lookups, 3);

	index_set("a.c", 1, H2);
	ck_assert_uint_ne(kgstale_generation(NULL), g0);
	ck_assert_ptr_nonnull(a = kgstale_check(NULL, g));
	ck_assert_int_eq(cJSON_GetArraySize(a), 1);
	b = cJSON_GetArrayItem(a, 0);
	ck_assert_str_eq(str(b, "path"), "a.c");
	ck_assert_str_eq(str(b, "hash"), H2);
	ck_assert_str_eq(str(b, "was"), H1);
	ck_assert_int_eq(names(b, "file", "a.c"), 1);
	ck_assert_int_eq(names(b, "pattern", "loop"), 1);
	ck_assert_int_eq(names(b, "principle", "small"), 1);
	ck_assert_int_eq(names(b, "relationship", "loop"), 1);
	ck_assert_int_eq(names(b, "decision", "elsewhere"), 0);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(b,
	    "entities")), 4);
	/* a relationship is named by from, to and type */
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(b, "entities"))
		if (strcmp(str(e, "kind"), "relationship") == 0) {
			ck_assert_str_eq(str(e, "to"), "a.c");
			ck_assert_str_eq(str(e, "type"), "implemented-in");
		}
	ck_assert_ptr_null(cJSON_GetObjectItem(b, "hlc"));

	fold_stale(b);
	ck_assert_int_eq(is_stale(KG_FILE, "a.c"), 1);
	ck_assert_int_eq(is_stale(KG_PATTERN, "loop"), 1);
	ck_assert_int_eq(is_stale(KG_PRINCIPLE, "small"), 1);
	ck_assert_int_eq(is_stale(KG_DECISION, "elsewhere"), 0);
	ck_assert_int_eq(is_stale(KG_FILE, "b.c"), 0);
	cJSON_Delete(a);

	/* stale at that hash already: nothing more */
	ck_assert_ptr_null(kgstale_check(NULL, g));
	/* changed again: reported again, was the recorded hash */
	index_set("a.c", 1, H3);
	ck_assert_ptr_nonnull(a = kgstale_check(NULL, g));
	ck_assert_int_eq(cJSON_GetArraySize(a), 1);
	b = cJSON_GetArrayItem(a, 0);
	ck_assert_str_eq(str(b, "hash"), H3);
	ck_assert_str_eq(str(b, "was"), H1);
	fold_stale(b);
	cJSON_Delete(a);
	ck_assert_ptr_null(kgstale_check(NULL, g));

	/* recorded again at the new hash: fresh, and nothing to report */
	batch("[[\"record-file-understanding\",{\"path\":\"a.c\",\"hash\":\""
	    H3 "\",\"summary\":\"the main, again\"}]]");
	ck_assert_int_eq(is_stale(KG_FILE, "a.c"), 0);
	ck_assert_ptr_null(kgstale_check(NULL, g));
}
END_TEST

START_TEST(recorded_outdated)
{
	cJSON *a;

	index_set("a.c", 1, H2);
	/* the after-batch check: an understanding of an older a.c */
	graph();
	ck_assert_ptr_nonnull(a = kgstale_check(NULL, g));
	ck_assert_int_eq(cJSON_GetArraySize(a), 1);
	ck_assert_str_eq(str(cJSON_GetArrayItem(a, 0), "was"), H1);
	cJSON_Delete(a);
}
END_TEST

START_TEST(removed)
{
	cJSON *a, *b;

	graph();
	index_set("a.c", -1, NULL);
	index_set("b.c", -1, NULL);
	ck_assert_ptr_nonnull(a = kgstale_check(NULL, g));
	ck_assert_int_eq(cJSON_GetArraySize(a), 2);
	b = cJSON_GetArrayItem(a, 0);
	ck_assert_str_eq(str(b, "path"), "a.c");
	ck_assert_str_eq(str(b, "hash"), "");
	ck_assert_str_eq(str(b, "was"), H1);
	fold_stale(cJSON_DetachItemFromArray(a, 0));
	cJSON_Delete(b);
	ck_assert_int_eq(is_stale(KG_FILE, "a.c"), 1);
	cJSON_Delete(a);
	/* a.c once (at ""), b.c still to log */
	ck_assert_ptr_nonnull(a = kgstale_check(NULL, g));
	ck_assert_int_eq(cJSON_GetArraySize(a), 1);
	ck_assert_str_eq(str(cJSON_GetArrayItem(a, 0), "path"), "b.c");
	cJSON_Delete(a);
}
END_TEST

START_TEST(many_refs)
{
	char buf[256];
	cJSON *a, *b;
	int i;

	batch("[[\"record-file-understanding\",{\"path\":\"a.c\",\"hash\":\""
	    H1 "\"}]]");
	for (i = 0; i < KGSTALE_ENTITIES_MAX + 5; i++) {
		snprintf(buf, sizeof(buf), "[[\"record-pattern\",{\"name\":"
		    "\"p%04d\",\"type\":\"t\",\"description\":\"d\","
		    "\"location\":\"a.c:%d\"}]]", i, i + 1);
		batch(buf);
	}
	index_set("a.c", 1, H2);
	ck_assert_ptr_nonnull(a = kgstale_check(NULL, g));
	b = cJSON_GetArrayItem(a, 0);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(b,
	    "entities")), KGSTALE_ENTITIES_MAX);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(b, "truncated")));
	cJSON_Delete(a);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("kgstale");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, no_index);
	tcase_add_test(tc, empty_graph);
	tcase_add_test(tc, changed);
	tcase_add_test(tc, recorded_outdated);
	tcase_add_test(tc, removed);
	tcase_add_test(tc, many_refs);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(suite());
}
