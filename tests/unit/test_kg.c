/*
 * Unit tests for the knowledge graph (kg.h): the fold's merge rules,
 * snapshots, the read API and the exports (the validator's are in
 * test_kg_check.c).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kg.h"
#include "check_main.h"

#include "kgtest.h"

START_TEST(test_basics)
{
	uint64_t	c = 0;

	ck_assert(kg_valid_project("foundation"));
	ck_assert(kg_valid_project("a.b_c-D9"));
	ck_assert(!kg_valid_project(".hidden"));
	ck_assert(!kg_valid_project(""));
	ck_assert(!kg_valid_project("a/b"));
	ck_assert(!kg_valid_project("a b"));
	{
		char	long_id[KG_PROJECT_MAX + 2];

		memset(long_id, 'a', sizeof(long_id) - 1);
		long_id[KG_PROJECT_MAX] = '\0';
		ck_assert(kg_valid_project(long_id));
		long_id[KG_PROJECT_MAX] = 'a';
		long_id[KG_PROJECT_MAX + 1] = '\0';
		ck_assert(!kg_valid_project(long_id));
	}
	ck_assert_str_eq(kg_kind_name(KG_FILE), "file");
	ck_assert_str_eq(kg_kind_name(KG_RELATIONSHIP), "relationship");
	/* the clock: wall time, or one past what it has seen */
	ck_assert_uint_eq(kg_clock_next(&c, 5), 5000);
	ck_assert_uint_eq(kg_clock_next(&c, 5), 5001);
	ck_assert_uint_eq(kg_clock_next(&c, 4), 5002);
	c = 9000;
	ck_assert_uint_eq(kg_clock_next(&c, 6), 9001);
	ck_assert_uint_eq(kg_clock_next(&c, 10), 10000);
	/* a clock raised to (or past) the limit still stamps below it */
	c = KG_HLC_LIMIT - 1;
	ck_assert_uint_eq(kg_clock_next(&c, 10), KG_HLC_LIMIT - 1);
	c = KG_HLC_LIMIT + 5;
	ck_assert_uint_eq(kg_clock_next(&c, 10), KG_HLC_LIMIT - 1);
	c = 0;
	ck_assert_uint_lt(kg_clock_next(&c, UINT64_MAX / 2), KG_HLC_LIMIT);
}
END_TEST

START_TEST(test_record_read)
{
	struct kg		*g = kg_new("p");
	const struct kg_entity	*e, *out[8];
	const char *const	*f;
	struct kg_val		 v;

	fold(g, 1, 1000, "h/1", "[['record-principle',{'name':'wrong-"
	    "impossible','description':'Make invalid states impossible',"
	    "'confidence':0.95,'locations':['README.md:12','CLAUDE.md:234'],"
	    "'evidence':['e2','e1'],'relatedPrinciples':['x'],"
	    "'tags':['b','a']}],"
	    "['record-pattern',{'name':'pm','type':'plexus-model',"
	    "'location':'src/m.ts:15','confidence':0.5}],"
	    "['record-decision',{'name':'d','status':'active','impact':9,"
	    "'rationale':'why'}],"
	    "['record-file-understanding',{'path':'src/m.ts','summary':'s',"
	    "'concepts':['c1'],'importantSymbols':['S'],"
	    "'relatedFiles':['src/n.ts']}],"
	    "['link-entities',{'from':'wrong-impossible','to':'pm',"
	    "'type':'implements','description':'dd'}]]");
	ck_assert_uint_eq(kg_seq(g), 1);
	ck_assert_uint_eq(kg_hlc(g), 1000);
	ck_assert_uint_eq(kg_batches(g), 1);
	ck_assert_str_eq(kg_project(g), "p");
	ck_assert_uint_eq(kg_count(g, KG_PRINCIPLE), 1);
	ck_assert_uint_eq(kg_count(g, KG_RELATIONSHIP), 1);
	e = get(g, KG_PRINCIPLE, "wrong-impossible");
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(kg_entity_kind(e), KG_PRINCIPLE);
	ck_assert_str_eq(kg_entity_name(e), "wrong-impossible");
	ck_assert_str_eq(str(e, "name"), "wrong-impossible");
	ck_assert_str_eq(str(e, "description"),
	    "Make invalid states impossible");
	ck_assert(num(e, "confidence") == 0.95);
	ck_assert_str_eq(list(e, "locations"), "README.md:12,CLAUDE.md:234");
	/* evidence of one add stamp: by value; tags: by value */
	ck_assert_str_eq(list(e, "evidence"), "e1,e2");
	ck_assert_str_eq(list(e, "tags"), "a,b");
	ck_assert_str_eq(list(e, "relatedPrinciples"), "x");
	ck_assert(num(e, "stale") == 0);
	ck_assert(num(e, "seq") == 1);
	ck_assert_int_eq(kg_field(e, "nope", &v), -1);
	f = kg_fields(KG_PRINCIPLE);
	ck_assert_str_eq(f[0], "name");
	ck_assert_str_eq(f[6], "tags");
	ck_assert_str_eq(f[7], "stale");
	ck_assert_str_eq(f[8], "seq");
	ck_assert_ptr_null(f[9]);
	ck_assert_str_eq(kg_fields(KG_FILE)[6], "lastAnalyzed");
	ck_assert_str_eq(kg_fields(KG_RELATIONSHIP)[2], "type");
	e = get(g, KG_PATTERN, "pm");
	ck_assert_str_eq(str(e, "type"), "plexus-model");
	ck_assert_str_eq(str(e, "location"), "src/m.ts:15");
	ck_assert(!isset(e, "description"));
	ck_assert(!isset(e, "tags"));
	e = get(g, KG_DECISION, "d");
	ck_assert(num(e, "impact") == 9);
	ck_assert_str_eq(str(e, "status"), "active");
	e = get(g, KG_FILE, "src/m.ts");
	ck_assert_str_eq(str(e, "path"), "src/m.ts");
	/* lastAnalyzed: the batch's time when not given */
	ck_assert(num(e, "lastAnalyzed") == 1700000000000.0);
	ck_assert_str_eq(list(e, "importantSymbols"), "S");
	ck_assert_uint_eq(kg_all(g, KG_RELATIONSHIP, out, 8), 1);
	ck_assert_str_eq(str(out[0], "from"), "wrong-impossible");
	ck_assert_str_eq(str(out[0], "to"), "pm");
	ck_assert_str_eq(str(out[0], "type"), "implements");
	ck_assert_str_eq(kg_entity_name(out[0]), "wrong-impossible");
	ck_assert_ptr_null(kg_get(g, KG_RELATIONSHIP, "wrong-impossible"));
	ck_assert_ptr_null(kg_get(g, KG_PRINCIPLE, "pm"));
	/* an explicit lastAnalyzed holds */
	fold(g, 2, 2000, "h/1", "[['record-file-understanding',{'path':"
	    "'src/m.ts','lastAnalyzed':42}]]");
	ck_assert(num(get(g, KG_FILE, "src/m.ts"), "lastAnalyzed") == 42);
	ck_assert_str_eq(str(get(g, KG_FILE, "src/m.ts"), "summary"), "s");
	kg_free(g);
}
END_TEST

/* The later stamp holds, whatever order the batches were folded in. */
START_TEST(test_lww_by_hlc)
{
	struct kg	*g = kg_new("p");

	fold(g, 1, 2000, "a/1", "[['record-principle',{'name':'x',"
	    "'confidence':0.9,'description':'new'}]]");
	fold(g, 2, 1000, "b/1", "[['record-principle',{'name':'x',"
	    "'confidence':0.5,'description':'old','locations':['l']}]]");
	ck_assert(num(get(g, KG_PRINCIPLE, "x"), "confidence") == 0.9);
	ck_assert_str_eq(str(get(g, KG_PRINCIPLE, "x"), "description"),
	    "new");
	/* a field only the older write gave is still set by it */
	ck_assert_str_eq(list(get(g, KG_PRINCIPLE, "x"), "locations"), "l");
	/* the higher stamp was folded first: hlc stays the highest */
	ck_assert_uint_eq(kg_hlc(g), 2000);
	/* null clears a field, by the same rule */
	fold(g, 3, 3000, "a/1", "[['record-principle',{'name':'x',"
	    "'description':null}]]");
	ck_assert(!isset(get(g, KG_PRINCIPLE, "x"), "description"));
	/* update-confidence is a write to the same register */
	fold(g, 4, 2500, "a/1", "[['update-confidence',{'name':'x',"
	    "'confidence':0.1}]]");
	ck_assert(num(get(g, KG_PRINCIPLE, "x"), "confidence") == 0.1);
	fold(g, 5, 2400, "a/1", "[['update-confidence',{'name':'x',"
	    "'confidence':0.2,'kind':'principle'}]]");
	ck_assert(num(get(g, KG_PRINCIPLE, "x"), "confidence") == 0.1);
	/* a seq already folded is ignored */
	fold(g, 5, 9000, "a/1", "[['update-confidence',{'name':'x',"
	    "'confidence':0.7}]]");
	ck_assert(num(get(g, KG_PRINCIPLE, "x"), "confidence") == 0.1);
	ck_assert_uint_eq(kg_seq(g), 5);
	kg_free(g);
}
END_TEST

START_TEST(test_origin_tiebreak)
{
	struct kg	*g1 = kg_new("p"), *g2 = kg_new("p");
	const char	*a = "[['record-principle',{'name':'r','confidence':"
			    "0.8}]]";
	const char	*b = "[['record-principle',{'name':'r','confidence':"
			    "0.9}]]";

	fold(g1, 1, 5000, "host-a/1", a);
	fold(g1, 2, 5000, "host-b/1", b);
	fold(g2, 1, 5000, "host-b/1", b);
	fold(g2, 2, 5000, "host-a/1", a);
	ck_assert(num(get(g1, KG_PRINCIPLE, "r"), "confidence") == 0.9);
	ck_assert(num(get(g2, KG_PRINCIPLE, "r"), "confidence") == 0.9);
	/* same hlc and origin: the later action in the batch wins */
	fold(g1, 3, 6000, "a/1", "[['update-confidence',{'name':'r',"
	    "'confidence':0.3}],['update-confidence',{'name':'r',"
	    "'confidence':0.4}]]");
	ck_assert(num(get(g1, KG_PRINCIPLE, "r"), "confidence") == 0.4);
	kg_free(g1);
	kg_free(g2);
}
END_TEST

START_TEST(test_add_wins_sets)
{
	struct kg	*g = kg_new("p");

	fold(g, 1, 3000, "a/1", "[['record-principle',{'name':'s',"
	    "'tags':['x','y'],'evidence':['zz']}]]");
	fold(g, 2, 1000, "b/1", "[['record-principle',{'name':'s',"
	    "'tags':['z','y'],'evidence':['mm']}]]");
	ck_assert_str_eq(list(get(g, KG_PRINCIPLE, "s"), "tags"), "x,y,z");
	/* evidence: by first add stamp (mm at 1000 before zz at 3000) */
	ck_assert_str_eq(list(get(g, KG_PRINCIPLE, "s"), "evidence"),
	    "mm,zz");
	fold(g, 3, 2000, "c/1", "[['add-evidence',{'name':'s','evidence':"
	    "'aa'}],['add-evidence',{'name':'s','evidence':['zz','bb']}]]");
	ck_assert_str_eq(list(get(g, KG_PRINCIPLE, "s"), "evidence"),
	    "mm,aa,bb,zz");
	/* a record's list field is a register, not a union */
	fold(g, 4, 4000, "a/1", "[['record-decision',{'name':'d',"
	    "'locations':['a','b']}]]");
	fold(g, 5, 5000, "a/1", "[['record-decision',{'name':'d',"
	    "'locations':['c']}]]");
	ck_assert_str_eq(list(get(g, KG_DECISION, "d"), "locations"), "c");
	kg_free(g);
}
END_TEST

START_TEST(test_delete_no_resurrect)
{
	struct kg		*g = kg_new("p");
	const struct kg_entity	*e;

	fold(g, 1, 1000, "a/1", "[['record-principle',{'name':'d',"
	    "'description':'one','confidence':0.5,'tags':['t1']}]]");
	fold(g, 2, 3000, "b/1", "[['delete-principle',{'name':'d'}]]");
	ck_assert_ptr_null(get(g, KG_PRINCIPLE, "d"));
	ck_assert_uint_eq(kg_count(g, KG_PRINCIPLE), 0);
	/* older and concurrent writes arriving late do not bring it back */
	fold(g, 3, 2000, "c/1", "[['record-principle',{'name':'d',"
	    "'description':'two','tags':['t2']}]]");
	fold(g, 4, 3000, "a/1", "[['update-confidence',{'name':'d',"
	    "'confidence':0.9,'kind':'principle'}],['add-evidence',"
	    "{'name':'d','evidence':'old'}]]");
	ck_assert_ptr_null(get(g, KG_PRINCIPLE, "d"));
	ck_assert_uint_eq(kg_all(g, KG_PRINCIPLE, NULL, 0), 0);
	ck_assert_uint_eq(kg_search(g, "two", NULL, 0), 0);
	/* a later record creates it anew, with only its own fields */
	fold(g, 5, 4000, "c/1", "[['record-principle',{'name':'d',"
	    "'description':'three','tags':['t3']}]]");
	e = get(g, KG_PRINCIPLE, "d");
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(str(e, "description"), "three");
	ck_assert_str_eq(list(e, "tags"), "t3");
	ck_assert(!isset(e, "confidence"));
	ck_assert(!isset(e, "evidence"));
	ck_assert(num(e, "seq") == 5);
	/* a delete stamped before that record, arriving now: no effect */
	fold(g, 6, 3500, "z/1", "[['delete-principle',{'name':'d'}]]");
	ck_assert_ptr_nonnull(get(g, KG_PRINCIPLE, "d"));
	ck_assert_str_eq(list(get(g, KG_PRINCIPLE, "d"), "tags"), "t3");
	/* delete-pattern and delete-decision alike */
	fold(g, 7, 5000, "a/1", "[['record-pattern',{'name':'pt','type':"
	    "'t'}],['record-decision',{'name':'dc'}]]");
	fold(g, 8, 6000, "a/1", "[['delete-pattern',{'name':'pt'}],"
	    "['delete-decision',{'name':'dc'}]]");
	ck_assert_ptr_null(get(g, KG_PATTERN, "pt"));
	ck_assert_ptr_null(get(g, KG_DECISION, "dc"));
	ck_assert_uint_eq(kg_count(g, KG_PATTERN), 0);
	kg_free(g);
}
END_TEST

START_TEST(test_stale)
{
	struct kg		*g = kg_new("p");
	const struct kg_entity	*out[4];
	const char		*h1 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
				    "aaaaaaaaaaaaaaaaaaaaaaa";
	struct kg_val		 v;

	fold(g, 1, 1000, "a/1", "[['record-file-understanding',{'path':"
	    "'src/a.c','summary':'x'}],['record-pattern',{'name':'pa',"
	    "'type':'t','location':'src/a.c:3'}],['record-principle',"
	    "{'name':'pr'}]]");
	fold_stale(g, 2, 2000, "a/1", "src/a.c", h1,
	    "[{'kind':'file','name':'src/a.c'},{'kind':'pattern','name':"
	    "'pa'}]");
	ck_assert(num(get(g, KG_FILE, "src/a.c"), "stale") == 1);
	ck_assert(num(get(g, KG_PATTERN, "pa"), "stale") == 1);
	ck_assert(num(get(g, KG_PRINCIPLE, "pr"), "stale") == 0);
	ck_assert_int_eq(kg_field(get(g, KG_FILE, "src/a.c"), "staleHash",
	    &v), 0);
	ck_assert_int_eq(v.type, KG_V_STR);
	ck_assert_str_eq(v.str, h1);
	ck_assert(num(get(g, KG_FILE, "src/a.c"), "seq") == 2);
	ck_assert_uint_eq(kg_hlc(g), 2000);
	/* a record stamped before the mark does not clear it */
	fold(g, 3, 1500, "b/1", "[['record-file-understanding',{'path':"
	    "'src/a.c','summary':'y'}]]");
	ck_assert(num(get(g, KG_FILE, "src/a.c"), "stale") == 1);
	/* one stamped after does, for that entity only */
	fold(g, 4, 3000, "b/1", "[['record-file-understanding',{'path':"
	    "'src/a.c','summary':'z'}]]");
	ck_assert(num(get(g, KG_FILE, "src/a.c"), "stale") == 0);
	ck_assert_int_eq(kg_field(get(g, KG_FILE, "src/a.c"), "staleHash",
	    &v), 0);
	ck_assert_int_eq(v.type, KG_V_NONE);
	ck_assert(num(get(g, KG_PATTERN, "pa"), "stale") == 1);
	/* the export shows it; a bad stale body changes nothing but seq */
	{
		char	*s = export(g);

		ck_assert_ptr_nonnull(strstr(s, "\"stale\":true"));
		free(s);
	}
	{
		cJSON *b = qj("{'origin':'a/1','path':'x'}");

		ck_assert_int_eq(kg_fold(g, 9, "knowledge_stale", b), -1);
		ck_assert_uint_eq(kg_seq(g), 9);
		cJSON_Delete(b);
	}
	ck_assert_uint_eq(kg_refs(g, "src/a.c", out, 4), 2);
	kg_free(g);
}
END_TEST

START_TEST(test_fold_bad_and_other)
{
	struct kg	*g = kg_new("p");
	cJSON		*b;
	char		*s0, *s1;

	s0 = snap(g);
	b = qj("{'hlc':'x','origin':'a','actions':[]}");
	ck_assert_int_eq(kg_fold(g, 1, "knowledge_batch", b), -1);
	cJSON_Delete(b);
	b = qj("{'hlc':5,'origin':'a'}");
	ck_assert_int_eq(kg_fold(g, 2, "knowledge_batch", b), -1);
	cJSON_Delete(b);
	b = qj("{'text':'hello'}");
	ck_assert_int_eq(kg_fold(g, 3, "chat", b), 0);
	cJSON_Delete(b);
	ck_assert_uint_eq(kg_seq(g), 3);
	ck_assert_uint_eq(kg_batches(g), 0);
	/* an action the fold cannot read is skipped, the rest applied */
	b = qj("{'hlc':5,'origin':'a','time':1,'actions':[['nope',{}],"
	    "['record-principle',{'name':'ok'}]]}");
	ck_assert_int_eq(kg_fold(g, 4, "knowledge_batch", b), 0);
	cJSON_Delete(b);
	ck_assert_ptr_nonnull(get(g, KG_PRINCIPLE, "ok"));
	s1 = snap(g);
	ck_assert_str_ne(s0, s1);
	free(s0);
	free(s1);
	kg_free(g);
	ck_assert_ptr_null(kg_new(NULL));
}
END_TEST

START_TEST(test_snapshot_restore)
{
	struct kg	*all = kg_new("proj"), *half = kg_new("proj"), *r, *r2;
	char		*s, *s_all, *s_r, err[128], *e1, *e2;
	size_t		 n = sizeof(hist) / sizeof(hist[0]), len, cut;

	fold_hist(all, 0, n);
	fold_stale(all, n + 1, 99000, "a/1", "f.c", "ab", "[]");
	for (cut = 0; cut <= n; cut++) {
		kg_free(half);
		half = kg_new("proj");
		fold_hist(half, 0, cut);
		s = kg_snapshot(half, &len);
		ck_assert_ptr_nonnull(s);
		r = kg_restore(s, len, err, sizeof(err));
		ck_assert_msg(r != NULL, "restore: %s", err);
		free(s);
		fold_hist(r, cut, n);
		fold_stale(r, n + 1, 99000, "a/1", "f.c", "ab", "[]");
		s_all = snap(all);
		s_r = snap(r);
		ck_assert_str_eq(s_all, s_r);
		e1 = export(all);
		e2 = export(r);
		ck_assert_str_eq(e1, e2);
		ck_assert_uint_eq(kg_seq(r), kg_seq(all));
		ck_assert_uint_eq(kg_hlc(r), kg_hlc(all));
		ck_assert_uint_eq(kg_batches(r), kg_batches(all));
		ck_assert_uint_eq(kg_count(r, KG_PRINCIPLE),
		    kg_count(all, KG_PRINCIPLE));
		/* a restored graph snapshots to the same bytes */
		r2 = kg_restore(s_r, strlen(s_r), err, sizeof(err));
		ck_assert_ptr_nonnull(r2);
		s = snap(r2);
		ck_assert_str_eq(s, s_r);
		free(s);
		kg_free(r2);
		free(s_all);
		free(s_r);
		free(e1);
		free(e2);
		kg_free(r);
	}
	ck_assert_ptr_nonnull(get(all, KG_PRINCIPLE, "p2"));
	ck_assert_ptr_null(get(all, KG_PRINCIPLE, "p1"));
	ck_assert_str_eq(str(get(all, KG_PATTERN, "pa"), "type"), "t2");
	ck_assert(!isset(get(all, KG_PATTERN, "pa"), "location"));
	kg_free(half);
	kg_free(all);
	/* what restore refuses */
	ck_assert_ptr_null(kg_restore("nope", 4, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "JSON"));
	ck_assert_ptr_null(kg_restore("{\"v\":2}", 7, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "version"));
	s = q("{'v':1,'project':'p','seq':1,'hlc':1,'batches':1,'origins':['','a'],"
	    "'entities':[{'k':'thing','key':'x'}]}");
	ck_assert_ptr_null(kg_restore(s, strlen(s), err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "kind"));
	free(s);
	s = q("{'v':1,'project':'p','seq':1,'hlc':1,'batches':1,'origins':['','a'],"
	    "'entities':[{'k':'principle','key':'x','seq':1,'rec':[1,1,0],"
	    "'f':{'confidence':[[0,1,0],0.5]}}]}");
	ck_assert_ptr_null(kg_restore(s, strlen(s), err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "bad field"));
	free(s);
	s = q("{'v':1,'project':'p','seq':1,'hlc':1,'batches':1,'origins':['','a'],"
	    "'entities':[{'k':'principle','key':'x','seq':1,'rec':[1,1,0]},"
	    "{'k':'principle','key':'x','seq':1,'rec':[1,1,0]}]}");
	ck_assert_ptr_null(kg_restore(s, strlen(s), err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "twice"));
	free(s);
}
END_TEST

START_TEST(test_search_refs_links_all)
{
	struct kg		*g = kg_new("p");
	const struct kg_entity	*out[16];
	size_t			 n;

	fold(g, 1, 1000, "a/1", "[['record-principle',{'name':'zeta',"
	    "'description':'About PLEXUS sync','locations':['src/a.c:12',"
	    "'src/a.cc:1']}],['record-principle',{'name':'alpha','tags':"
	    "['Plexus']}],['record-principle',{'name':'mid'}],"
	    "['record-pattern',{'name':'pat','type':'t','location':"
	    "'src/a.c'}],['record-decision',{'name':'dec','locations':"
	    "['src/a.c:99']}],['record-file-understanding',{'path':'src/a.c',"
	    "'summary':'plexUs core'}],['record-file-understanding',{'path':"
	    "'src/a.cc'}],['link-entities',{'from':'zeta','to':'src/a.c',"
	    "'type':'uses'}],['link-entities',{'from':'zeta','to':'alpha',"
	    "'type':'supports'}],['link-entities',{'from':'alpha','to':"
	    "'zeta','type':'contradicts'}],['link-entities',{'from':'zeta',"
	    "'to':'alpha','type':'extends'}]]");
	/* kg_all: by key, relationships by from, to, type */
	n = kg_all(g, KG_PRINCIPLE, out, 16);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(kg_entity_name(out[0]), "alpha");
	ck_assert_str_eq(kg_entity_name(out[1]), "mid");
	ck_assert_str_eq(kg_entity_name(out[2]), "zeta");
	ck_assert_uint_eq(kg_all(g, KG_PRINCIPLE, out, 2), 3);
	ck_assert_uint_eq(kg_all(g, KG_RELATIONSHIP, out, 16), 4);
	ck_assert_str_eq(str(out[0], "from"), "alpha");
	ck_assert_str_eq(str(out[1], "to"), "alpha");
	ck_assert_str_eq(str(out[1], "type"), "extends");
	ck_assert_str_eq(str(out[2], "type"), "supports");
	ck_assert_str_eq(str(out[3], "to"), "src/a.c");
	/* new entities sort in among the old */
	fold(g, 2, 2000, "a/1", "[['record-principle',{'name':'beta'}],"
	    "['record-principle',{'name':'aaa'}]]");
	n = kg_all(g, KG_PRINCIPLE, out, 16);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(kg_entity_name(out[0]), "aaa");
	ck_assert_str_eq(kg_entity_name(out[1]), "alpha");
	ck_assert_str_eq(kg_entity_name(out[2]), "beta");
	ck_assert_str_eq(kg_entity_name(out[4]), "zeta");
	/* kg_links */
	ck_assert_uint_eq(kg_links(g, "zeta", 0, out, 16), 3);
	ck_assert_str_eq(str(out[0], "type"), "extends");
	ck_assert_str_eq(str(out[2], "to"), "src/a.c");
	ck_assert_uint_eq(kg_links(g, "zeta", 1, out, 16), 1);
	ck_assert_str_eq(str(out[0], "from"), "alpha");
	ck_assert_uint_eq(kg_links(g, "alpha", 1, out, 1), 2);
	ck_assert_uint_eq(kg_links(g, "nobody", 0, out, 16), 0);
	/* kg_search: case-folded, kind then key order */
	n = kg_search(g, "pLeXuS", out, 16);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(kg_entity_kind(out[0]), KG_PRINCIPLE);
	ck_assert_str_eq(kg_entity_name(out[0]), "alpha");
	ck_assert_str_eq(kg_entity_name(out[1]), "zeta");
	ck_assert_int_eq(kg_entity_kind(out[2]), KG_FILE);
	ck_assert_uint_eq(kg_search(g, "CONTRADICTS", out, 16), 1);
	ck_assert_int_eq(kg_entity_kind(out[0]), KG_RELATIONSHIP);
	ck_assert_uint_eq(kg_search(g, "nothing-like-it", out, 16), 0);
	/* kg_refs: "path" and "path:N", not a longer path */
	n = kg_refs(g, "src/a.c", out, 16);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(kg_entity_name(out[0]), "zeta");
	ck_assert_int_eq(kg_entity_kind(out[1]), KG_PATTERN);
	ck_assert_int_eq(kg_entity_kind(out[2]), KG_DECISION);
	ck_assert_int_eq(kg_entity_kind(out[3]), KG_FILE);
	ck_assert_int_eq(kg_entity_kind(out[4]), KG_RELATIONSHIP);
	ck_assert_uint_eq(kg_refs(g, "src/a.cc", out, 16), 2);
	ck_assert_uint_eq(kg_refs(g, "src/a", out, 16), 0);
	/* deleted entities are never returned */
	fold(g, 3, 3000, "a/1", "[['delete-principle',{'name':'zeta'}]]");
	ck_assert_uint_eq(kg_refs(g, "src/a.c", out, 16), 4);
	ck_assert_uint_eq(kg_search(g, "plexus", out, 16), 2);
	ck_assert_uint_eq(kg_all(g, KG_PRINCIPLE, NULL, 0), 4);
	kg_free(g);
}
END_TEST

START_TEST(test_exports)
{
	struct kg		*g = kg_new("proj");
	char			*md, *s;
	cJSON			*j;

	fold_hist(g, 0, 4);
	md = kg_export_md(g);
	ck_assert_ptr_nonnull(md);
	ck_assert_ptr_nonnull(strstr(md, "# Knowledge of proj\n"));
	ck_assert_ptr_nonnull(strstr(md, "\n## Principles\n\n### p1\n\nD\n"));
	ck_assert_ptr_nonnull(strstr(md, "- Confidence: 0.5\n"));
	ck_assert_ptr_nonnull(strstr(md, "- Evidence: `e1`, `e2`\n"));
	ck_assert_ptr_nonnull(strstr(md, "\n## Patterns\n\nNone.\n"));
	ck_assert_ptr_nonnull(strstr(md, "\n## Decisions\n\n### d1\n"));
	ck_assert_ptr_nonnull(strstr(md, "- Status: proposed\n"));
	ck_assert_ptr_nonnull(strstr(md, "\n## Files\n\n### f.c\n"));
	ck_assert_ptr_nonnull(strstr(md, "- Last analyzed: "
	    "2023-11-14T22:13:20.000Z\n"));
	ck_assert_ptr_nonnull(strstr(md, "- Hash: " H64 "\n"));
	ck_assert_ptr_nonnull(strstr(md, "\n## Relationships\n\n- `p1` "
	    "**uses** `f.c` (confidence 0.1)\n"));
	free(md);
	s = export(g);
	ck_assert_str_eq(s, "{\"projectId\":\"proj\",\"seq\":4,\"principles\":"
	    "[{\"name\":\"p1\",\"description\":\"D\",\"confidence\":0.5,"
	    "\"evidence\":[\"e1\",\"e2\"],\"tags\":[\"a\"]}],\"patterns\":[],"
	    "\"decisions\":[{\"name\":\"d1\",\"status\":\"proposed\","
	    "\"impact\":3}],\"files\":[{\"path\":\"f.c\",\"hash\":\"" H64
	    "\",\"lastAnalyzed\":1700000000000}],\"relationships\":[{\"from\":"
	    "\"p1\",\"to\":\"f.c\",\"type\":\"uses\",\"confidence\":0.1}]}");
	free(s);
	j = kg_entity_json(get(g, KG_DECISION, "d1"));
	s = cJSON_PrintUnformatted(j);
	ck_assert_str_eq(s, "{\"kind\":\"decision\",\"name\":\"d1\","
	    "\"status\":\"proposed\",\"impact\":3,\"seq\":4}");
	free(s);
	cJSON_Delete(j);
	kg_free(g);
}
END_TEST

/* --- convergence: random batches folded in several orders --- */

static unsigned rnd(unsigned *);


struct ev {
	char		*type;
	cJSON		*body;
};

static unsigned
rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 16) & 0x7fff;
}

static const char *const rnames[] = { "n0", "n1", "n2", "n3", "n4" };
static const char *const rpaths[] = { "a.c", "b/c.h", "n1" };
static const char *const rtags[] = { "t0", "t1", "t2", "t3" };

static cJSON *
rtaglist(unsigned *s)
{
	cJSON	*a = cJSON_CreateArray();
	size_t	 i;

	for (i = 0; i < 4; i++)
		if (rnd(s) % 3 == 0)
			cJSON_AddItemToArray(a, cJSON_CreateString(rtags[i]));
	return a;
}

static cJSON *
raction(unsigned *s)
{
	cJSON		*a = cJSON_CreateArray(), *f = cJSON_CreateObject();
	const char	*name = rnames[rnd(s) % 5];
	char		 d[32];
	unsigned	 op = rnd(s) % 12;
	static const char *const kinds[] = { "principle", "pattern",
	    "decision" };

	snprintf(d, sizeof(d), "d%u", rnd(s) % 7);
	switch (op) {
	case 0:
	case 1:
		cJSON_AddItemToArray(a, cJSON_CreateString("record-principle"));
		cJSON_AddStringToObject(f, "name", name);
		if (rnd(s) % 2)
			cJSON_AddStringToObject(f, "description", d);
		if (rnd(s) % 2)
			cJSON_AddNumberToObject(f, "confidence",
			    (rnd(s) % 11) / 10.0);
		if (rnd(s) % 2)
			cJSON_AddItemToObject(f, "tags", rtaglist(s));
		if (rnd(s) % 2)
			cJSON_AddItemToObject(f, "evidence", rtaglist(s));
		if (rnd(s) % 3 == 0)
			cJSON_AddItemToObject(f, "locations", rtaglist(s));
		break;
	case 2:
		cJSON_AddItemToArray(a, cJSON_CreateString("record-pattern"));
		cJSON_AddStringToObject(f, "name", name);
		cJSON_AddStringToObject(f, "type", d);
		if (rnd(s) % 2)
			cJSON_AddStringToObject(f, "location", "a.c:3");
		if (rnd(s) % 2)
			cJSON_AddItemToObject(f, "tags", rtaglist(s));
		break;
	case 3:
		cJSON_AddItemToArray(a, cJSON_CreateString("record-decision"));
		cJSON_AddStringToObject(f, "name", name);
		if (rnd(s) % 2)
			cJSON_AddNumberToObject(f, "impact", rnd(s) % 11);
		if (rnd(s) % 2)
			cJSON_AddItemToObject(f, "relatedDecisions",
			    rtaglist(s));
		if (rnd(s) % 2)
			cJSON_AddNullToObject(f, "description");
		break;
	case 4:
		cJSON_AddItemToArray(a, cJSON_CreateString(
		    "record-file-understanding"));
		cJSON_AddStringToObject(f, "path", rpaths[rnd(s) % 3]);
		if (rnd(s) % 2)
			cJSON_AddStringToObject(f, "summary", d);
		if (rnd(s) % 2)
			cJSON_AddItemToObject(f, "concepts", rtaglist(s));
		if (rnd(s) % 2)
			cJSON_AddItemToObject(f, "relatedFiles", rtaglist(s));
		break;
	case 5:
	case 6:
		cJSON_AddItemToArray(a, cJSON_CreateString("link-entities"));
		cJSON_AddStringToObject(f, "from", name);
		cJSON_AddStringToObject(f, "to", rnames[rnd(s) % 5]);
		cJSON_AddStringToObject(f, "type", rnd(s) % 2 ? "uses" :
		    "supports");
		if (rnd(s) % 2)
			cJSON_AddNumberToObject(f, "confidence",
			    (rnd(s) % 11) / 10.0);
		if (rnd(s) % 2)
			cJSON_AddStringToObject(f, "description", d);
		break;
	case 7:
	case 8:
		snprintf(d, sizeof(d), "delete-%s", kinds[rnd(s) % 3]);
		cJSON_AddItemToArray(a, cJSON_CreateString(d));
		cJSON_AddStringToObject(f, "name", name);
		break;
	case 9:
		cJSON_AddItemToArray(a, cJSON_CreateString(
		    "update-confidence"));
		cJSON_AddNumberToObject(f, "confidence", (rnd(s) % 11) / 10.0);
		switch (rnd(s) % 4) {
		case 0:
			cJSON_AddStringToObject(f, "name", name);
			break;
		case 1:
		case 2:
			cJSON_AddStringToObject(f, "name", name);
			cJSON_AddStringToObject(f, "kind", kinds[rnd(s) % 2]);
			break;
		default:
			cJSON_AddStringToObject(f, "kind", "relationship");
			cJSON_AddStringToObject(f, "from", name);
			cJSON_AddStringToObject(f, "to", rnames[rnd(s) % 5]);
			cJSON_AddStringToObject(f, "type", "uses");
			break;
		}
		break;
	default:
		cJSON_AddItemToArray(a, cJSON_CreateString("add-evidence"));
		cJSON_AddStringToObject(f, "name", name);
		if (rnd(s) % 2)
			cJSON_AddStringToObject(f, "evidence",
			    rtags[rnd(s) % 4]);
		else
			cJSON_AddItemToObject(f, "evidence", rtaglist(s));
		break;
	}
	cJSON_AddItemToArray(a, f);
	return a;
}

/* The snapshot without the slots' seq (where in the log: order-bound). */
static char *
snap_noseq(const struct kg *g)
{
	char	*s = snap(g), *o;
	cJSON	*j = cJSON_Parse(s), *e;

	ck_assert_ptr_nonnull(j);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "entities"))
		cJSON_DeleteItemFromObject(e, "seq");
	o = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	free(s);
	return o;
}

START_TEST(test_convergence)
{
	enum { NEV = 220, NPERM = 5 };
	static const char *const origins[] = { "host-a/11", "host-b/22",
	    "host-c/33" };
	struct ev	 evs[NEV];
	uint64_t	 last[3] = { 1000000, 1000000, 1000000 };
	size_t		 order[NEV], i, j, p, nact, tmp;
	unsigned	 s = 12345, o;
	char		*snap0 = NULL, *exp0 = NULL, *sn, *ex, *full0 = NULL;
	struct kg	*g;
	char		 hash[65];

	memset(hash, 'c', 64);
	hash[64] = '\0';
	for (i = 0; i < NEV; i++) {
		cJSON *acts = cJSON_CreateArray();

		o = rnd(&s) % 3;
		/* each origin's clock rises; the three interleave and tie */
		last[o] += 1 + rnd(&s) % 3;
		if (i % 20 == 19) {
			char buf[512];

			snprintf(buf, sizeof(buf), "{'hlc':%llu,'origin':'%s',"
			    "'path':'%s','hash':'%c%s','entities':[{'kind':"
			    "'principle','name':'%s'},{'kind':'relationship',"
			    "'name':'%s','to':'%s','type':'uses'}]}",
			    (unsigned long long)last[o], origins[o],
			    rpaths[rnd(&s) % 3], 'a' + (int)(rnd(&s) % 3),
			    hash + 1, rnames[rnd(&s) % 5],
			    rnames[rnd(&s) % 5], rnames[rnd(&s) % 5]);
			evs[i].type = "knowledge_stale";
			evs[i].body = qj(buf);
			cJSON_Delete(acts);
			continue;
		}
		nact = 1 + rnd(&s) % 4;
		for (j = 0; j < nact; j++)
			cJSON_AddItemToArray(acts, raction(&s));
		evs[i].type = "knowledge_batch";
		evs[i].body = kg_batch_body(acts, "b", last[o], origins[o],
		    last[o] / 1000, NULL);
		cJSON_Delete(acts);
	}
	for (i = 0; i < NEV; i++)
		order[i] = i;
	for (p = 0; p < NPERM; p++) {
		if (p == 1)
			for (i = 0; i < NEV / 2; i++) {
				tmp = order[i];
				order[i] = order[NEV - 1 - i];
				order[NEV - 1 - i] = tmp;
			}
		else if (p > 1)
			for (i = NEV - 1; i > 0; i--) {
				j = rnd(&s) % (i + 1);
				tmp = order[i];
				order[i] = order[j];
				order[j] = tmp;
			}
		g = kg_new("conv");
		for (i = 0; i < NEV; i++)
			ck_assert_int_eq(kg_fold(g, i + 1, evs[order[i]].type,
			    evs[order[i]].body), 0);
		sn = snap_noseq(g);
		ex = export(g);
		if (p == 0) {
			snap0 = sn;
			exp0 = ex;
			full0 = snap(g);
			/* the run exercises something */
			ck_assert_uint_gt(kg_count(g, KG_RELATIONSHIP), 0);
			ck_assert_ptr_nonnull(strstr(full0, "\"del\""));
			ck_assert_ptr_nonnull(strstr(full0, "\"stale\""));
			ck_assert_ptr_nonnull(strstr(exp0, "\"tags\""));
		} else {
			ck_assert_msg(strcmp(snap0, sn) == 0,
			    "permutation %zu: snapshots differ", p);
			ck_assert_msg(strcmp(exp0, ex) == 0,
			    "permutation %zu: exports differ", p);
			free(sn);
			free(ex);
		}
		kg_free(g);
	}
	free(snap0);
	free(exp0);
	free(full0);
	for (i = 0; i < NEV; i++)
		cJSON_Delete(evs[i].body);
}
END_TEST

/* Many entities: fold and read them all back (no timing asserted). */
START_TEST(test_many)
{
	enum { N = 20000 };
	struct kg		 *g = kg_new("big");
	const struct kg_entity	**out;
	char			  name[32];
	cJSON			 *acts, *act, *f, *b;
	size_t			  i, n;
	char			 *s;
	struct kg		 *r;
	char			  err[64];

	for (i = 0; i < N; i++) {
		acts = cJSON_CreateArray();
		act = cJSON_CreateArray();
		f = cJSON_CreateObject();
		/* keys arrive out of order */
		snprintf(name, sizeof(name), "p%05zu", (i * 7919) % N);
		cJSON_AddStringToObject(f, "name", name);
		cJSON_AddNumberToObject(f, "confidence", 0.5);
		cJSON_AddItemToArray(act, cJSON_CreateString(
		    "record-principle"));
		cJSON_AddItemToArray(act, f);
		cJSON_AddItemToArray(acts, act);
		b = kg_batch_body(acts, "x", 1000 + i, "o/1", 1, NULL);
		ck_assert_int_eq(kg_fold(g, i + 1, "knowledge_batch", b), 0);
		cJSON_Delete(b);
		cJSON_Delete(acts);
		if (i % 5000 == 0)
			ck_assert_uint_eq(kg_all(g, KG_PRINCIPLE, NULL, 0),
			    i + 1);
	}
	ck_assert_uint_eq(kg_count(g, KG_PRINCIPLE), N);
	out = calloc(N, sizeof(*out));
	n = kg_all(g, KG_PRINCIPLE, out, N);
	ck_assert_uint_eq(n, N);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "p%05zu", i);
		ck_assert_str_eq(kg_entity_name(out[i]), name);
		ck_assert_ptr_eq(kg_get(g, KG_PRINCIPLE, name), out[i]);
	}
	ck_assert_uint_eq(kg_search(g, "P1999", NULL, 0), 10);
	s = kg_snapshot(g, &n);
	r = kg_restore(s, n, err, sizeof(err));
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(kg_count(r, KG_PRINCIPLE), N);
	free(s);
	kg_free(r);
	free(out);
	kg_free(g);
}
END_TEST

/* Damaged snapshots and bodies: refused or folded, never a crash. */
START_TEST(test_garbage)
{
	struct kg	*g = kg_new("p"), *r;
	char		*s, *m, err[128];
	size_t		 len, i, k;
	unsigned	 seed = 7;
	static const char junk[] = "{}[],:\"0-9ae.\\x";
	static const char *const bodies[] = {
		"{'hlc':1e300,'origin':'a','actions':[]}",
		"{'hlc':-5,'origin':'a','actions':[]}",
		"{'hlc':5.5,'origin':'a','actions':[]}",
		"{'hlc':5,'origin':7,'actions':[]}",
		"{'hlc':5,'origin':'a','time':-1e300,'actions':[[1,2],"
		    "['record-principle',[]],['record-principle',{'name':"
		    "{}}],['link-entities',{'from':'a'}],[]]}",
		"{'hlc':5,'origin':'a','actions':{}}",
		"{'hlc':5,'origin':'a','path':'','hash':'x'}",
		"{'hlc':6,'origin':'a','path':'p','hash':'x','entities':[1,"
		    "{'kind':'nope','name':'x'},{'kind':'relationship',"
		    "'name':'x'},{'kind':'principle'},{'kind':'principle',"
		    "'name':''}]}",
	};

	fold_hist(g, 0, sizeof(hist) / sizeof(hist[0]));
	fold_stale(g, 50, 99000, "a/1", "f.c", "ab", "[{'kind':'principle',"
	    "'name':'p2'}]");
	s = kg_snapshot(g, &len);
	ck_assert_ptr_nonnull(s);
	m = malloc(len + 1);
	ck_assert_ptr_nonnull(m);
	for (i = 0; i < 1500; i++) {
		memcpy(m, s, len + 1);
		for (k = 0; k < 1 + i % 4; k++)
			m[rnd(&seed) % len] = junk[rnd(&seed) %
			    (sizeof(junk) - 1)];
		r = kg_restore(m, rnd(&seed) % 8 == 0 ? rnd(&seed) % len :
		    len, err, sizeof(err));
		if (r == NULL) {
			ck_assert_msg(err[0] != '\0', "no reason given");
			continue;
		}
		free(kg_snapshot(r, NULL));
		free(kg_export_md(r));
		cJSON_Delete(kg_export_json(r));
		kg_free(r);
	}
	free(m);
	free(s);
	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		cJSON *b = qj(bodies[i]);

		(void)kg_fold(g, 100 + i, i < 6 ? "knowledge_batch" :
		    "knowledge_stale", b);
		cJSON_Delete(b);
	}
	ck_assert_uint_eq(kg_seq(g), 100 + i - 1);
	kg_free(g);
}
END_TEST

static Suite *
kg_suite(void)
{
	Suite	*s = suite_create("kg");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_basics);
	tcase_add_test(tc, test_record_read);
	tcase_add_test(tc, test_lww_by_hlc);
	tcase_add_test(tc, test_origin_tiebreak);
	tcase_add_test(tc, test_add_wins_sets);
	tcase_add_test(tc, test_delete_no_resurrect);
	tcase_add_test(tc, test_stale);
	tcase_add_test(tc, test_fold_bad_and_other);
	tcase_add_test(tc, test_snapshot_restore);
	tcase_add_test(tc, test_search_refs_links_all);
	tcase_add_test(tc, test_exports);
	tcase_add_test(tc, test_convergence);
	tcase_add_test(tc, test_many);
	tcase_add_test(tc, test_garbage);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(kg_suite());
}
