/*
 * Unit tests for client-side tools (workers/ctool.c): registration,
 * replacement and withdrawal, what the model is offered, and a client's
 * result as the model reads it; against a fake session (fake_sess.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/ctool.c"
#include "../../workers/llm.h"
#include "check_main.h"
#include "fake_sess.h"

static struct config conf;
static struct wk wk;
static struct cfg_mcp_server everything;

static void
setup(void)
{
	memset(&conf, 0, sizeof(conf));
	TAILQ_INIT(&conf.mcp_servers);
	snprintf(everything.name, sizeof(everything.name), "everything");
	TAILQ_INSERT_TAIL(&conf.mcp_servers, &everything, entry);
	wk.conf = &conf;
	fake_sess_init(&wk);
}

static void
teardown(void)
{
	fake_sess_free();
}

/* ctool_register with msg's JSON; the seq, or 0 with *r's error. */
static uint64_t
reg(const char *json, struct sess_result *r)
{
	cJSON *m = cJSON_Parse(json);
	uint64_t seq;

	ck_assert_ptr_nonnull(m);
	memset(r, 0, sizeof(*r));
	seq = ctool_register(&fs.s, m, "user", r);
	cJSON_Delete(m);
	return seq;
}

static int
ntools(void)
{
	return cJSON_GetArraySize(cJSON_GetObjectItem(fs.s.mtree,
	    "clientTools"));
}

START_TEST(register_and_find)
{
	struct sess_result r;
	const cJSON *t, *ev;

	ck_assert_uint_gt(reg("{\"tools\":[{\"server\":\"ide\",\"name\":"
	    "\"read_file\",\"description\":\"Reads\",\"inputSchema\":{\"type\":"
	    "\"object\"},\"annotations\":{\"readOnlyHint\":true,\"title\":"
	    "\"Read\"}},{\"server\":\"ide\",\"name\":\"write\"}]}", &r), 0);
	ck_assert_int_eq(ntools(), 2);
	t = ctool_find(&fs.s, "ide__read_file");
	ck_assert_ptr_nonnull(t);
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(t,
	    "annotations"), "readOnlyHint")));
	t = ctool_find(&fs.s, "ide__write");
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(t,
	    "schemaJson")), "{\"type\":\"object\"}");
	ck_assert_ptr_null(ctool_find(&fs.s, "ide__nope"));
	ck_assert_ptr_null(ctool_find(&fs.s, NULL));
	/* The log shows the list without meta's own fields. */
	ev = fake_logged("client_tools", 0);
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(ev, "by")),
	    "user");
	t = cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "tools"), 0);
	ck_assert_ptr_null(cJSON_GetObjectItem(t, "schemaJson"));
	ck_assert_ptr_null(cJSON_GetObjectItem(t, "fullName"));
	ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(t, "name")),
	    "read_file");
}
END_TEST

START_TEST(refused_changes_nothing)
{
	static const char *bad[] = {
		"{}",
		"{\"tools\":{}}",
		"{\"tools\":[1]}",
		"{\"tools\":[{\"server\":\"ide\"}]}",
		"{\"tools\":[{\"server\":\"ide\",\"name\":\"a b\"}]}",
		"{\"tools\":[{\"server\":\"i.de\",\"name\":\"a\"}]}",
		"{\"tools\":[{\"server\":\"everything\",\"name\":\"a\"}]}",
		"{\"tools\":[{\"server\":\"ide\",\"name\":\"a\","
		    "\"inputSchema\":[]}]}",
		"{\"tools\":[{\"server\":\"ide\",\"name\":\"a\","
		    "\"annotations\":{\"readOnlyHint\":1}}]}",
		"{\"tools\":[{\"server\":\"ide\",\"name\":\"a\"},"
		    "{\"server\":\"ide\",\"name\":\"a\"}]}",
		"{\"tools\":[],\"servers\":\"ide\"}",
		"{\"tools\":[],\"servers\":[\"a b\"]}",
		/* SERVER__NAME longer than 64 characters */
		"{\"tools\":[{\"server\":\"ssssssssssssssssssssssssssssssss\","
		    "\"name\":\"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\"}]}",
	};
	struct sess_result r;
	size_t i;

	ck_assert_uint_gt(reg("{\"tools\":[{\"server\":\"ide\",\"name\":"
	    "\"a\"}]}", &r), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(reg(bad[i], &r) == 0, "accepted %s", bad[i]);
		ck_assert_str_eq(r.code, "BAD_REQUEST");
		ck_assert_int_eq(r.http, 400);
		ck_assert(r.msg[0] != '\0');
		ck_assert_int_eq(ntools(), 1);
	}
	ck_assert_int_eq(fake_count("client_tools"), 1);
	/* The log refuses: nothing changes either. */
	fs.refuse = 1;
	ck_assert_uint_eq(reg("{\"tools\":[]}", &r), 0);
	ck_assert_str_eq(r.code, "OVERLOADED");
	fs.refuse = 0;
	ck_assert_int_eq(ntools(), 1);
}
END_TEST

START_TEST(replace_and_withdraw)
{
	struct sess_result r;
	char big[8192];
	size_t n;
	int i;

	reg("{\"tools\":[{\"server\":\"ide\",\"name\":\"a\"},{\"server\":"
	    "\"ide\",\"name\":\"b\"}]}", &r);
	reg("{\"tools\":[{\"server\":\"cli\",\"name\":\"ls\"}]}", &r);
	ck_assert_int_eq(ntools(), 3);
	/* Registering ide again replaces ide's tools only. */
	reg("{\"tools\":[{\"server\":\"ide\",\"name\":\"c\"}]}", &r);
	ck_assert_int_eq(ntools(), 2);
	ck_assert_ptr_nonnull(ctool_find(&fs.s, "ide__c"));
	ck_assert_ptr_null(ctool_find(&fs.s, "ide__a"));
	ck_assert_ptr_nonnull(ctool_find(&fs.s, "cli__ls"));
	reg("{\"tools\":[],\"servers\":[\"cli\"]}", &r);
	ck_assert_int_eq(ntools(), 1);
	ck_assert_ptr_null(ctool_find(&fs.s, "cli__ls"));
	reg("{\"tools\":[]}", &r);
	ck_assert_int_eq(ntools(), 0);
	/* At most CTOOL_MAX. */
	n = (size_t)snprintf(big, sizeof(big), "{\"tools\":[");
	for (i = 0; i <= CTOOL_MAX; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "%s{\"server\":"
		    "\"s\",\"name\":\"t%d\"}", i ? "," : "", i);
	snprintf(big + n, sizeof(big) - n, "]}");
	ck_assert_uint_eq(reg(big, &r), 0);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	ck_assert_int_eq(ntools(), 0);
}
END_TEST

static int
taken(void *arg, const char *name)
{
	return strcmp(name, (const char *)arg) == 0;
}

START_TEST(defs_for_the_model)
{
	struct llm_tool_def defs[4];
	struct sess_result r;

	reg("{\"tools\":[{\"server\":\"ide\",\"name\":\"a\",\"description\":"
	    "\"A\"},{\"server\":\"ide\",\"name\":\"b\"},{\"server\":\"ide\","
	    "\"name\":\"c\"}]}", &r);
	ck_assert_uint_eq(ctool_defs(&fs.s, defs, 4, taken, "ide__b"), 2);
	ck_assert_str_eq(defs[0].name, "ide__a");
	ck_assert_str_eq(defs[0].description, "A");
	ck_assert_str_eq(defs[0].schema_json, "{\"type\":\"object\"}");
	ck_assert_str_eq(defs[1].name, "ide__c");
	ck_assert_uint_eq(ctool_defs(&fs.s, defs, 1, taken, ""), 1);
}
END_TEST

/* ctool_result_text of msg's JSON. */
static char *
text(const char *json, int *is_error, char *err)
{
	cJSON *m = cJSON_Parse(json);
	char *t;

	*is_error = -1;
	err[0] = '\0';
	t = ctool_result_text(m, is_error, err, 200);
	cJSON_Delete(m);
	return t;
}

START_TEST(result_text)
{
	char err[200], *t;
	int e;

	t = text("{\"result\":\"plain\"}", &e, err);
	ck_assert_str_eq(t, "plain");
	ck_assert_int_eq(e, 0);
	free(t);
	t = text("{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
	    "{\"type\":\"image\",\"data\":\"x\"},{\"type\":\"text\",\"text\":"
	    "\"b\"}],\"isError\":true}}", &e, err);
	ck_assert_str_eq(t, "a\n{\"type\":\"image\",\"data\":\"x\"}\nb");
	ck_assert_int_eq(e, 1);
	free(t);
	t = text("{\"result\":{\"content\":[]}}", &e, err);
	ck_assert_str_eq(t, "");
	free(t);
	t = text("{\"result\":{\"n\":1}}", &e, err);
	ck_assert_str_eq(t, "{\"n\":1}");
	free(t);
	t = text("{\"error\":\"boom\"}", &e, err);
	ck_assert_str_eq(t, "boom");
	ck_assert_int_eq(e, 1);
	free(t);
	t = text("{\"error\":{\"message\":\"disk full\",\"code\":5}}", &e, err);
	ck_assert_str_eq(t, "disk full");
	free(t);
	ck_assert_ptr_null(text("{}", &e, err));
	ck_assert(err[0] != '\0');
	ck_assert_ptr_null(text("{\"result\":1,\"error\":\"x\"}", &e, err));
	ck_assert_ptr_null(text("{\"error\":{\"code\":5}}", &e, err));
	ck_assert(strstr(err, "message") != NULL);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ctool");
	TCase *tc = tcase_create("ctool");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, register_and_find);
	tcase_add_test(tc, refused_changes_nothing);
	tcase_add_test(tc, replace_and_withdraw);
	tcase_add_test(tc, defs_for_the_model);
	tcase_add_test(tc, result_text);
	suite_add_tcase(s, tc);
	return check_run(s);
}
