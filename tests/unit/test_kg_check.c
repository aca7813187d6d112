/*
 * Unit tests for the knowledge graph's validator (src/kg_check.c): every
 * refusal names its action, op and field; a batch is checked whole and
 * changes nothing; kg_check_fill names the kind it resolved.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kg.h"
#include "check_main.h"
#include "kgtest.h"

/* The writer names the kind an update-confidence resolved; no phantom. */
START_TEST(test_check_fill)
{
	struct kg	*g = kg_new("p");
	struct kg_err	 err;
	struct kg_val	 v;
	cJSON		*a;
	const cJSON	*f;

	fold(g, 1, 1000, "a/1", "[['record-pattern',{'name':'x','type':'t'}]]");
	a = qj("[['record-principle',{'name':'y'}],['update-confidence',"
	    "{'name':'x','confidence':0.5}],['update-confidence',{'name':'y',"
	    "'confidence':0.7}]]");
	ck_assert_int_eq(kg_check_fill(g, a, 0, &err), 0);
	f = cJSON_GetArrayItem(cJSON_GetArrayItem(a, 1), 1);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(f, "kind")),
	    "pattern");
	f = cJSON_GetArrayItem(cJSON_GetArrayItem(a, 2), 1);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(f, "kind")),
	    "principle");
	/* kg_check leaves the actions as they are */
	cJSON_Delete(a);
	a = qj("[['update-confidence',{'name':'x','confidence':0.5}]]");
	ck_assert_int_eq(kg_check(g, a, 0, &err), 0);
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetArrayItem(
	    cJSON_GetArrayItem(a, 0), 1), "kind"));
	ck_assert_int_eq(kg_check_fill(g, a, 0, &err), 0);
	{
		cJSON *b = kg_batch_body(a, "b2", 2000, "a/1",
		    1700000000000ULL, NULL);

		ck_assert_int_eq(kg_fold(g, 2, "knowledge_batch", b), 0);
		cJSON_Delete(b);
	}
	cJSON_Delete(a);
	/* a principle x recorded later has no confidence of the pattern's */
	fold(g, 3, 3000, "a/1", "[['record-principle',{'name':'x'}]]");
	ck_assert_int_eq(kg_field(kg_get(g, KG_PRINCIPLE, "x"), "confidence",
	    &v), 0);
	ck_assert_int_eq(v.type, KG_V_NONE);
	ck_assert_int_eq(kg_field(kg_get(g, KG_PATTERN, "x"), "confidence",
	    &v), 0);
	ck_assert(v.type == KG_V_NUM && v.num == 0.5);
	kg_free(g);
}
END_TEST

struct ecase {
	const char	*actions;
	int		 action;
	const char	*op;
	const char	*field;
	const char	*msg;	/* a part of the message */
};

static const struct ecase ecases[] = {
	/* the batch as a whole */
	{ "{}", -1, "", "", "must be an array" },
	{ "[]", -1, "", "", "1 to 256" },
	{ "[5]", 0, "", "", "must be a pair" },
	{ "[['record-principle']]", 0, "", "", "must be a pair" },
	{ "[['record-principle',{'name':'a'},1]]", 0, "", "",
	    "must be a pair" },
	{ "[['make-tea',{}]]", 0, "make-tea", "", "unknown op \"make-tea\": "
	    "use one of record-principle" },
	/* record-principle */
	{ "[['record-principle',{'description':'x'}]]", 0, "record-principle",
	    "name", "is required" },
	{ "[['record-principle',{'name':7}]]", 0, "record-principle", "name",
	    "must be a string, got 7" },
	{ "[['record-principle',{'name':''}]]", 0, "record-principle", "name",
	    "must not be empty" },
	{ "[['record-principle',{'name':'a\\nb'}]]", 0, "record-principle",
	    "name", "control characters" },
	{ "[['record-principle',{'name':'a','confidence':'high'}]]", 0,
	    "record-principle", "confidence",
	    "action 0 (record-principle): field \"confidence\": must be a "
	    "number from 0 to 1, got \"high\"" },
	{ "[['record-principle',{'name':'a','confidence':1.5}]]", 0,
	    "record-principle", "confidence", "from 0 to 1, got 1.5" },
	{ "[['record-principle',{'name':'a','tags':'x'}]]", 0,
	    "record-principle", "tags", "must be an array of strings" },
	{ "[['record-principle',{'name':'a','tags':['x',3]}]]", 0,
	    "record-principle", "tags", "item 1 must be a string" },
	{ "[['record-principle',{'name':'a','colour':'red'}]]", 0,
	    "record-principle", "colour", "unknown field \"colour\": "
	    "record-principle takes name, description, confidence, locations, "
	    "evidence, relatedPrinciples, tags" },
	{ "[['record-principle',{'name':'a','name':'b'}]]", 0,
	    "record-principle", "name", "twice" },
	/* record-pattern */
	{ "[['record-pattern',{'type':'t'}]]", 0, "record-pattern", "name",
	    "is required" },
	{ "[['record-pattern',{'name':'np'}]]", 0, "record-pattern", "type",
	    "is required for a new pattern" },
	{ "[['record-pattern',{'name':'np','type':null}]]", 0,
	    "record-pattern", "type", "is required for a new pattern" },
	{ "[['record-pattern',{'name':'np','type':['t']}]]", 0,
	    "record-pattern", "type", "must be a string" },
	{ "[['record-pattern',{'name':'np','type':'t','location':''}]]", 0,
	    "record-pattern", "location", "must not be empty" },
	/* record-decision */
	{ "[['record-decision',{'status':'active'}]]", 0, "record-decision",
	    "name", "is required" },
	{ "[['record-decision',{'name':'d','status':'maybe'}]]", 0,
	    "record-decision", "status", "must be one of active, proposed, "
	    "deprecated, superseded, got \"maybe\"" },
	{ "[['record-decision',{'name':'d','impact':11}]]", 0,
	    "record-decision", "impact", "integer from 0 to 10, got 11" },
	{ "[['record-decision',{'name':'d','impact':2.5}]]", 0,
	    "record-decision", "impact", "integer from 0 to 10" },
	{ "[['record-decision',{'name':'d','rationale':5}]]", 0,
	    "record-decision", "rationale", "must be a string" },
	/* record-file-understanding */
	{ "[['record-file-understanding',{'summary':'s'}]]", 0,
	    "record-file-understanding", "path", "is required" },
	{ "[['record-file-understanding',{'path':'/etc/passwd'}]]", 0,
	    "record-file-understanding", "path", "relative to the project" },
	{ "[['record-file-understanding',{'path':'a/../b'}]]", 0,
	    "record-file-understanding", "path", "\"..\"" },
	{ "[['record-file-understanding',{'path':'a//b'}]]", 0,
	    "record-file-understanding", "path", "empty" },
	{ "[['record-file-understanding',{'path':'a/'}]]", 0,
	    "record-file-understanding", "path", "empty" },
	{ "[['record-file-understanding',{'path':'a','hash':'abc'}]]", 0,
	    "record-file-understanding", "hash", "64 lowercase hex digits "
	    "(as sha256sum prints it)" },
	{ "[['record-file-understanding',{'path':'a','hash':'0123456789"
	    "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef'}]]", 0,
	    "record-file-understanding", "hash", "lowercase" },
	{ "[['record-file-understanding',{'path':'a','lastAnalyzed':-1}]]",
	    0, "record-file-understanding", "lastAnalyzed", "milliseconds" },
	{ "[['record-file-understanding',{'path':'a','concepts':[" 
	    "'1','2','3','4','5','6','7','8','9','10','11','12','13','14','15',"
	    "'16','17','18','19','20','21','22','23','24','25','26','27','28',"
	    "'29','30','31','32','33','34','35','36','37','38','39','40','41',"
	    "'42','43','44','45','46','47','48','49','50','51','52','53','54',"
	    "'55','56','57','58','59','60','61','62','63','64','65']}]]", 0,
	    "record-file-understanding", "concepts", "at most 64 items" },
	/* link-entities */
	{ "[['link-entities',{'from':'P','to':'P'}]]", 0, "link-entities",
	    "type", "is required" },
	{ "[['link-entities',{'from':'nobody','to':'P','type':'uses'}]]", 0,
	    "link-entities", "from", "no principle, pattern, decision or file "
	    "understanding is named \"nobody\"" },
	{ "[['link-entities',{'from':'P','to':'nobody','type':'uses'}]]", 0,
	    "link-entities", "to", "record it first" },
	{ "[['link-entities',{'from':'P','to':'P','type':'Uses'}]]", 0,
	    "link-entities", "type", "a-z, 0-9" },
	{ "[['link-entities',{'from':'P','to':'P','type':'uses',"
	    "'confidence':-0.1}]]", 0, "link-entities", "confidence",
	    "from 0 to 1" },
	/* deletes */
	{ "[['delete-principle',{}]]", 0, "delete-principle", "name",
	    "is required" },
	{ "[['delete-principle',{'name':'gone'}]]", 0, "delete-principle",
	    "name", "no principle is named \"gone\"" },
	{ "[['delete-pattern',{'name':'P'}]]", 0, "delete-pattern", "name",
	    "no pattern is named" },
	{ "[['delete-decision',{'name':1}]]", 0, "delete-decision", "name",
	    "must be a string" },
	{ "[['delete-decision',{'name':'D','why':'x'}]]", 0,
	    "delete-decision", "why", "takes name" },
	/* update-confidence */
	{ "[['update-confidence',{'name':'P'}]]", 0, "update-confidence",
	    "confidence", "is required" },
	{ "[['update-confidence',{'name':'P','confidence':2}]]", 0,
	    "update-confidence", "confidence", "from 0 to 1" },
	{ "[['update-confidence',{'confidence':0.5}]]", 0,
	    "update-confidence", "name", "is required" },
	{ "[['update-confidence',{'name':'nobody','confidence':0.5}]]", 0,
	    "update-confidence", "name", "no principle or pattern" },
	{ "[['update-confidence',{'name':'Both','confidence':0.5}]]", 0,
	    "update-confidence", "name", "both a principle and a pattern" },
	{ "[['update-confidence',{'name':'P','confidence':0.5,'kind':"
	    "'decision'}]]", 0, "update-confidence", "kind",
	    "one of principle, pattern, relationship" },
	{ "[['update-confidence',{'name':'P','confidence':0.5,'kind':"
	    "'pattern'}]]", 0, "update-confidence", "name",
	    "no pattern is named" },
	{ "[['update-confidence',{'kind':'relationship','from':'P','to':'P',"
	    "'confidence':0.5}]]", 0, "update-confidence", "type",
	    "is required" },
	{ "[['update-confidence',{'kind':'relationship','from':'P','to':'F',"
	    "'type':'uses','confidence':0.5}]]", 0, "update-confidence",
	    "from", "no relationship" },
	{ "[['update-confidence',{'kind':'relationship','name':'P',"
	    "'confidence':0.5}]]", 0, "update-confidence", "name",
	    "named by from, to and type" },
	{ "[['update-confidence',{'name':'P','from':'P','confidence':0.5}]]",
	    0, "update-confidence", "from", "only for kind" },
	/* add-evidence */
	{ "[['add-evidence',{'name':'P'}]]", 0, "add-evidence", "evidence",
	    "is required" },
	{ "[['add-evidence',{'name':'P','evidence':5}]]", 0, "add-evidence",
	    "evidence", "(or one string)" },
	{ "[['add-evidence',{'name':'Both2','evidence':'e'}]]", 0,
	    "add-evidence", "name", "no principle is named" },
	/* the failing action is named by its index */
	{ "[['record-principle',{'name':'ok'}],['record-principle',{'name':"
	    "'ok2'}],['delete-principle',{'name':'ok'}],['add-evidence',"
	    "{'name':'ok','evidence':'x'}]]", 3, "add-evidence", "name",
	    "action 3 (add-evidence): field \"name\": no principle" },
};

START_TEST(test_check_errors)
{
	const struct ecase	*c = &ecases[_i];
	struct kg		*g = kg_new("p");
	struct kg_err		 err;
	char			*s0, *s1, *want;

	fold(g, 1, 1000, "a/1", "[['record-principle',{'name':'P'}],"
	    "['record-decision',{'name':'D'}],['record-file-understanding',"
	    "{'path':'F'}],['record-principle',{'name':'Both'}],"
	    "['record-pattern',{'name':'Both','type':'t'}],"
	    "['record-pattern',{'name':'Both2','type':'t'}]]");
	s0 = snap(g);
	ck_assert_int_eq(check(g, c->actions, 0, &err), -1);
	want = q(c->msg);
	ck_assert_msg(strstr(err.msg, want) != NULL, "case %d: \"%s\" not in "
	    "\"%s\"", _i, want, err.msg);
	free(want);
	ck_assert_int_eq(err.action, c->action);
	ck_assert_str_eq(err.op, c->op);
	ck_assert_str_eq(err.field, c->field);
	if (c->action >= 0)
		ck_assert_msg(strncmp(err.msg, "action ", 7) == 0, "%s",
		    err.msg);
	s1 = snap(g);
	ck_assert_str_eq(s0, s1);
	free(s0);
	free(s1);
	kg_free(g);
}
END_TEST

START_TEST(test_check_ok)
{
	struct kg	*g = kg_new("p");
	struct kg_err	 err;

	fold(g, 1, 1000, "a/1", "[['record-principle',{'name':'P'}],"
	    "['record-pattern',{'name':'T','type':'t'}]]");
	/* the seed's example batch */
	ck_assert_msg(check(g, "[['record-principle',{'name':"
	    "'contagious-materialization','description':'Syncing spreads',"
	    "'confidence':0.95,'locations':['plexus/README.md:28'],"
	    "'evidence':['tested-in-production'],'tags':['plexus','sync']}],"
	    "['record-principle',{'name':'world-state-tree'}],"
	    "['link-entities',{'from':'contagious-materialization','to':"
	    "'world-state-tree','type':'implements','description':'Root'}],"
	    "['record-pattern',{'name':'plexus-model-with-decorators','type':"
	    "'plexus-model','location':'plexus/src/PlexusModel.ts:15',"
	    "'confidence':0.9,'tags':['plexus','pattern']}],"
	    "['record-file-understanding',{'path':'plexus/src/PlexusModel.ts',"
	    "'hash':'" H64 "','summary':'Base class','concepts':['decorators'],"
	    "'importantSymbols':['PlexusModel'],'relatedFiles':["
	    "'plexus/src/Plexus.ts']}],"
	    "['record-decision',{'name':'use-stage3-decorators','description':"
	    "'d','rationale':'r','status':'active','impact':9,'locations':"
	    "['plexus/README.md:45']}]]", 0, &err) == 0, "%s", err.msg);
	/* earlier in the batch counts; a known pattern needs no type */
	ck_assert_msg(check(g, "[['record-pattern',{'name':'N','type':'t'}],"
	    "['record-pattern',{'name':'N','description':'more'}],"
	    "['record-pattern',{'name':'T'}],['update-confidence',{'name':'N',"
	    "'confidence':0.3}],['link-entities',{'from':'N','to':'P','type':"
	    "'uses'}],['update-confidence',{'kind':'relationship','from':'N',"
	    "'to':'P','type':'uses','confidence':0.2}],['add-evidence',{'name':"
	    "'P','evidence':['a','b']}],['delete-principle',{'name':'P'}],"
	    "['record-principle',{'name':'P','description':null}]]", 0,
	    &err) == 0, "%s", err.msg);
	/* deleted earlier in the batch: gone for the rest of it */
	ck_assert_int_eq(check(g, "[['delete-pattern',{'name':'T'}],"
	    "['update-confidence',{'name':'T','confidence':0.1}]]", 0, &err),
	    -1);
	ck_assert_int_eq(err.action, 1);
	ck_assert_int_eq(check(g, "[['delete-pattern',{'name':'T'}],"
	    "['delete-pattern',{'name':'T'}]]", 0, &err), -1);
	ck_assert_int_eq(err.action, 1);
	kg_free(g);
}
END_TEST

/* A bad action anywhere: the checker refuses and g is unchanged. */
START_TEST(test_check_rollback)
{
	struct kg	*g = kg_new("p");
	struct kg_err	 err;
	char		*s0, *s1;
	cJSON		*a;

	fold_hist(g, 0, 2);
	s0 = snap(g);
	a = qj("[['record-principle',{'name':'n1'}],['record-principle',"
	    "{'name':'n2'}],['delete-principle',{'name':'p1'}],"
	    "['link-entities',{'from':'n1','to':'n2','type':'uses'}],"
	    "['record-decision',{'name':'d','impact':99}]]");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(kg_check(g, a, 0, &err), -1);
	ck_assert_int_eq(err.action, 4);
	ck_assert_str_eq(err.op, "record-decision");
	ck_assert_str_eq(err.field, "impact");
	s1 = snap(g);
	ck_assert_str_eq(s0, s1);
	ck_assert_ptr_null(get(g, KG_PRINCIPLE, "n1"));
	ck_assert_ptr_nonnull(get(g, KG_PRINCIPLE, "p1"));
	cJSON_Delete(a);
	free(s0);
	free(s1);
	kg_free(g);
}
END_TEST

START_TEST(test_check_limits)
{
	struct kg	*g = kg_new("p");
	struct kg_err	 err;
	cJSON		*a, *act, *f;
	char		*big, name[16];
	int		 i;

	fold(g, 1, 1000, "a/1", "[['record-principle',{'name':'a'}],"
	    "['record-principle',{'name':'b'}]]");
	/* max_entities: the batch's end state counts */
	ck_assert_int_eq(check(g, "[['record-principle',{'name':'c'}]]", 3,
	    &err), 0);
	ck_assert_int_eq(check(g, "[['record-principle',{'name':'c'}],"
	    "['record-principle',{'name':'d'}]]", 3, &err), -1);
	ck_assert_int_eq(err.action, -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "would leave 4 entities"));
	ck_assert_ptr_nonnull(strstr(err.msg, "limit of 3"));
	ck_assert_int_eq(check(g, "[['record-principle',{'name':'c'}],"
	    "['record-principle',{'name':'d'}],['delete-principle',{'name':"
	    "'a'}]]", 3, &err), 0);
	/* a re-record is not a new entity; 0 means no limit */
	ck_assert_int_eq(check(g, "[['record-principle',{'name':'a'}]]", 2,
	    &err), 0);
	ck_assert_int_eq(check(g, "[['record-principle',{'name':'c'}]]", 0,
	    &err), 0);
	/* bounds of a name, a text, an item, the batch */
	big = malloc(KG_BATCH_MAX + 16);
	ck_assert_ptr_nonnull(big);
	a = cJSON_CreateArray();
	act = cJSON_CreateArray();
	cJSON_AddItemToArray(a, act);
	cJSON_AddItemToArray(act, cJSON_CreateString("record-principle"));
	f = cJSON_CreateObject();
	cJSON_AddItemToArray(act, f);
	memset(big, 'n', KG_NAME_MAX + 1);
	big[KG_NAME_MAX + 1] = '\0';
	cJSON_AddStringToObject(f, "name", big);
	ck_assert_int_eq(kg_check(g, a, 0, &err), -1);
	ck_assert_str_eq(err.field, "name");
	ck_assert_ptr_nonnull(strstr(err.msg, "at most 256 bytes"));
	big[KG_NAME_MAX] = '\0';
	cJSON_ReplaceItemInObject(f, "name", cJSON_CreateString(big));
	ck_assert_int_eq(kg_check(g, a, 0, &err), 0);
	memset(big, 't', KG_TEXT_MAX + 1);
	big[KG_TEXT_MAX + 1] = '\0';
	cJSON_AddStringToObject(f, "description", big);
	ck_assert_int_eq(kg_check(g, a, 0, &err), -1);
	ck_assert_str_eq(err.field, "description");
	ck_assert_ptr_nonnull(strstr(err.msg, "at most 8192 bytes"));
	big[KG_TEXT_MAX] = '\0';
	cJSON_ReplaceItemInObject(f, "description", cJSON_CreateString(big));
	ck_assert_int_eq(kg_check(g, a, 0, &err), 0);
	memset(big, 'i', KG_ITEM_MAX + 1);
	big[KG_ITEM_MAX + 1] = '\0';
	{
		const char *items[1] = { big };

		cJSON_AddItemToObject(f, "tags",
		    cJSON_CreateStringArray(items, 1));
	}
	ck_assert_int_eq(kg_check(g, a, 0, &err), -1);
	ck_assert_str_eq(err.field, "tags");
	ck_assert_ptr_nonnull(strstr(err.msg, "item 0"));
	cJSON_DeleteItemFromObject(f, "tags");
	/* invalid UTF-8 */
	cJSON_ReplaceItemInObject(f, "description",
	    cJSON_CreateString("bad \xc3\x28 utf"));
	ck_assert_int_eq(kg_check(g, a, 0, &err), -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "UTF-8"));
	cJSON_DeleteItemFromObject(f, "description");
	/* 257 actions */
	for (i = 1; i < KG_BATCH_ACTIONS + 1; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		act = cJSON_CreateArray();
		cJSON_AddItemToArray(act, cJSON_CreateString("record-principle"));
		f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "name", name);
		cJSON_AddItemToArray(act, f);
		cJSON_AddItemToArray(a, act);
	}
	ck_assert_int_eq(kg_check(g, a, 0, &err), -1);
	ck_assert_int_eq(err.action, -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "1 to 256"));
	cJSON_DeleteItemFromArray(a, 0);
	ck_assert_int_eq(kg_check(g, a, 0, &err), 0);
	/* over KG_BATCH_MAX bytes: 256 actions of ~8 KB texts */
	memset(big, 'x', 8000);
	big[8000] = '\0';
	cJSON_ArrayForEach(act, a)
		cJSON_AddStringToObject(cJSON_GetArrayItem(act, 1),
		    "description", big);
	ck_assert_int_eq(kg_check(g, a, 0, &err), -1);
	ck_assert_int_eq(err.action, -1);
	ck_assert_ptr_nonnull(strstr(err.msg, "split the batch"));
	cJSON_Delete(a);
	free(big);
	kg_free(g);
}
END_TEST

static Suite *
kg_check_suite(void)
{
	Suite	*s = suite_create("kg_check");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_check_fill);
	tcase_add_loop_test(tc, test_check_errors, 0,
	    (int)(sizeof(ecases) / sizeof(ecases[0])));
	tcase_add_test(tc, test_check_ok);
	tcase_add_test(tc, test_check_rollback);
	tcase_add_test(tc, test_check_limits);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(kg_check_suite());
}
