/*
 * What the knowledge graph's unit suites (test_kg.c, test_kg_check.c)
 * share: batches written with ' for ", folding them, reading fields.
 * static inline: each suite uses a part.
 */
#ifndef PARLEY_TESTS_KGTEST_H
#define PARLEY_TESTS_KGTEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kg.h"

/* A SHA-256 shaped hash. */
#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* JSON text with ' for " (keeps the tests readable); malloc'd. */
static inline char *
q(const char *s)
{
	char	*o = strdup(s), *p;

	ck_assert_ptr_nonnull(o);
	for (p = o; *p != '\0'; p++)
		if (*p == '\'')
			*p = '"';
	return o;
}

static inline cJSON *
qj(const char *s)
{
	char	*t = q(s);
	cJSON	*j = cJSON_Parse(t);

	ck_assert_msg(j != NULL, "bad test JSON: %s", t);
	free(t);
	return j;
}

/* Folds one batch of actions (quoted JSON) at seq, stamped hlc/origin. */
static inline void
fold(struct kg *g, uint64_t seq, uint64_t hlc, const char *origin,
    const char *actions)
{
	cJSON	*a = qj(actions), *b;

	b = kg_batch_body(a, "b", hlc, origin, 1700000000000ULL, NULL);
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(kg_fold(g, seq, "knowledge_batch", b), 0);
	cJSON_Delete(b);
	cJSON_Delete(a);
}

static inline void
fold_stale(struct kg *g, uint64_t seq, uint64_t hlc, const char *origin,
    const char *path, const char *hash, const char *entities)
{
	char	 buf[2048];
	cJSON	*b;

	snprintf(buf, sizeof(buf), "{'hlc':%llu,'origin':'%s','path':'%s',"
	    "'hash':'%s','was':'','entities':%s}", (unsigned long long)hlc,
	    origin, path, hash, entities);
	b = qj(buf);
	ck_assert_int_eq(kg_fold(g, seq, "knowledge_stale", b), 0);
	cJSON_Delete(b);
}

static inline int
check(const struct kg *g, const char *actions, size_t max, struct kg_err *e)
{
	cJSON	*a = qj(actions);
	int	 r;

	memset(e, 0, sizeof(*e));
	r = kg_check(g, a, max, e);
	cJSON_Delete(a);
	return r;
}

static inline const struct kg_entity *
get(const struct kg *g, enum kg_kind k, const char *key)
{
	return kg_get(g, k, key);
}

static inline double
num(const struct kg_entity *e, const char *f)
{
	struct kg_val	v;

	ck_assert_int_eq(kg_field(e, f, &v), 0);
	ck_assert_msg(v.type == KG_V_NUM || v.type == KG_V_BOOL,
	    "%s is not a number", f);
	return v.num;
}

static inline const char *
str(const struct kg_entity *e, const char *f)
{
	struct kg_val	v;

	ck_assert_int_eq(kg_field(e, f, &v), 0);
	return v.type == KG_V_STR ? v.str : NULL;
}

/* A list field joined with commas ("" when unset). */
static inline const char *
list(const struct kg_entity *e, const char *f)
{
	static char	buf[1024];
	struct kg_val	v;
	size_t		i;

	buf[0] = '\0';
	ck_assert_int_eq(kg_field(e, f, &v), 0);
	if (v.type == KG_V_NONE)
		return buf;
	ck_assert_int_eq(v.type, KG_V_LIST);
	for (i = 0; i < v.n; i++) {
		if (i)
			strcat(buf, ",");
		strcat(buf, v.list[i]);
	}
	return buf;
}

static inline int
isset(const struct kg_entity *e, const char *f)
{
	struct kg_val	v;

	ck_assert_int_eq(kg_field(e, f, &v), 0);
	return v.type != KG_V_NONE;
}

static inline char *
export(const struct kg *g)
{
	cJSON	*j = kg_export_json(g);
	char	*s;

	ck_assert_ptr_nonnull(j);
	s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	ck_assert_ptr_nonnull(s);
	return s;
}

static inline char *
snap(const struct kg *g)
{
	size_t	 len;
	char	*s = kg_snapshot(g, &len);

	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(strlen(s), len);
	return s;
}

/* A graph with a bit of everything, folded from seq 1 to n. */
static const char *const hist[] = {
	"[['record-principle',{'name':'p1','description':'D','confidence':"
	"0.5,'tags':['a'],'evidence':['e1']}],['record-pattern',{'name':"
	"'pa','type':'t','location':'f.c:1'}]]",
	"[['record-file-understanding',{'path':'f.c','hash':'"
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'"
	"}],['link-entities',{'from':'p1','to':'f.c','type':'uses',"
	"'confidence':0.7}]]",
	"[['delete-pattern',{'name':'pa'}],['add-evidence',{'name':'p1',"
	"'evidence':['e2']}]]",
	"[['record-decision',{'name':'d1','status':'proposed','impact':3}],"
	"['update-confidence',{'kind':'relationship','from':'p1','to':'f.c',"
	"'type':'uses','confidence':0.1}]]",
	"[['record-principle',{'name':'p1','tags':['b']}],['record-pattern',"
	"{'name':'pa','type':'t2'}]]",
	"[['delete-principle',{'name':'p1'}],['record-principle',{'name':"
	"'p2','locations':['f.c:9']}]]",
};

static inline void
fold_hist(struct kg *g, size_t from, size_t to)
{
	size_t	i;

	for (i = from; i < to; i++)
		fold(g, i + 1, 1000 * (i + 1), i % 2 ? "b/1" : "a/1", hist[i]);
}

#endif
