/*
 * proto: envelope validation, typed field access, reply encoding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <cjson/cJSON.h>

#include "parley/proto.h"
#include "check_main.h"

#define DEPTH	8

struct res {
	int		 rc;
	const char	*code;
	char		 msg[256];
	struct proto_in	 in;
};

/* Parses s (its strlen) into r; returns rc. */
static int
parse(struct res *r, const char *s, unsigned depth)
{
	memset(r, 0, sizeof(*r));
	r->code = NULL;
	r->rc = proto_parse(s, strlen(s), depth, &r->in, &r->code, r->msg,
	    sizeof(r->msg));
	if (r->rc == -1) {
		ck_assert_ptr_null(r->in.root);
		ck_assert_ptr_nonnull(r->code);
		ck_assert_msg(r->msg[0] != '\0', "no message for %s", s);
	}
	return r->rc;
}

/* Expects rejection as BAD_REQUEST with a message mentioning word. */
static void
bad(const char *s, const char *word)
{
	struct res r;

	ck_assert_msg(parse(&r, s, DEPTH) == -1, "accepted: %s", s);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
	if (word != NULL)
		ck_assert_msg(strstr(r.msg, word) != NULL,
		    "'%s' not in '%s' for %s", word, r.msg, s);
}

static void
good(const char *s)
{
	struct res r;

	ck_assert_msg(parse(&r, s, DEPTH) == 0, "rejected (%s): %s", r.msg, s);
	ck_assert_ptr_nonnull(r.in.root);
	proto_in_free(&r.in);
	ck_assert_ptr_null(r.in.root);
}

static char *
repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* {"v":1,"type":"chat","sessionId":SID[,"id":ID]} in a static buffer. */
static const char *
msg_with(const char *sid, const char *id)
{
	static char buf[1024];

	if (id != NULL)
		snprintf(buf, sizeof(buf), "{\"v\":1,\"type\":\"chat\","
		    "\"sessionId\":\"%s\",\"id\":\"%s\"}", sid, id);
	else
		snprintf(buf, sizeof(buf), "{\"v\":1,\"type\":\"chat\","
		    "\"sessionId\":\"%s\"}", sid);
	return buf;
}

/* ---- proto_parse ---- */

START_TEST(parse_chat)
{
	const char *s = "{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s1\","
	    "\"id\":\"c-17\",\"message\":\"Explain the retry logic\"}";
	struct res r;

	ck_assert_int_eq(parse(&r, s, DEPTH), 0);
	ck_assert_str_eq(r.in.type, "chat");
	ck_assert_str_eq(r.in.session, "s1");
	ck_assert_str_eq(r.in.id, "c-17");
	ck_assert_str_eq(cJSON_GetObjectItem(r.in.root, "message")->valuestring,
	    "Explain the retry logic");
	proto_in_free(&r.in);

	/* id is optional; null counts as absent; v may be written 1.0 */
	ck_assert_int_eq(parse(&r, "{\"v\":1,\"type\":\"ping\","
	    "\"sessionId\":\"a.b_c:d-E9\"}", DEPTH), 0);
	ck_assert_ptr_null(r.in.id);
	ck_assert_str_eq(r.in.session, "a.b_c:d-E9");
	proto_in_free(&r.in);
	good("{\"v\":1.0,\"type\":\"chat\",\"sessionId\":\"s\",\"id\":null}");
	good(" \n{\"sessionId\":\"s\",\"type\":\"chat\",\"v\":1}\t ");
}
END_TEST

START_TEST(parse_len_bounds_input)
{
	const char *s = "{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s1\"}GARBAGE";
	size_t n = strchr(s, '}') - s + 1;
	struct res r;
	size_t i;

	/* only len bytes are looked at */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(proto_parse(s, n, DEPTH, &r.in, &r.code, r.msg,
	    sizeof(r.msg)), 0);
	proto_in_free(&r.in);
	/* every cut short of the whole object is rejected */
	for (i = 0; i < n; i++) {
		memset(&r, 0, sizeof(r));
		ck_assert_int_eq(proto_parse(s, i, DEPTH, &r.in, &r.code,
		    r.msg, sizeof(r.msg)), -1);
		ck_assert_ptr_null(r.in.root);
		ck_assert_str_eq(r.code, "BAD_REQUEST");
	}
}
END_TEST

START_TEST(parse_not_json)
{
	bad("", "JSON");
	bad("hello", "JSON");
	bad("ping", "JSON");
	bad("{", "JSON");
	bad("{\"v\":1,}", "JSON");
	bad("{\"v\":1 \"type\":\"chat\"}", "JSON");
	bad("\xff\xfe", "JSON");
}
END_TEST

START_TEST(parse_not_object)
{
	bad("[]", "object");
	bad("[{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s\"}]", "object");
	bad("\"chat\"", "object");
	bad("42", "object");
	bad("null", "object");
	bad("true", "object");
}
END_TEST

START_TEST(parse_version)
{
	struct res r;
	const char *mismatch[] = {
		"{\"v\":2,\"type\":\"chat\",\"sessionId\":\"s\"}",
		"{\"v\":0,\"type\":\"chat\",\"sessionId\":\"s\"}",
		"{\"v\":1.5,\"type\":\"chat\",\"sessionId\":\"s\"}",
		"{\"v\":\"1\",\"type\":\"chat\",\"sessionId\":\"s\"}",
		"{\"v\":true,\"type\":\"chat\",\"sessionId\":\"s\"}",
		"{\"v\":null,\"type\":\"chat\",\"sessionId\":\"s\"}",
		"{\"v\":[1],\"type\":\"chat\",\"sessionId\":\"s\"}",
	};
	size_t i;

	bad("{\"type\":\"chat\",\"sessionId\":\"s\"}", "'v'");
	bad("{\"V\":1,\"type\":\"chat\",\"sessionId\":\"s\"}", "'v'");
	bad("{}", "'v'");
	for (i = 0; i < sizeof(mismatch) / sizeof(mismatch[0]); i++) {
		ck_assert_int_eq(parse(&r, mismatch[i], DEPTH), -1);
		ck_assert_msg(strcmp(r.code, "PROTOCOL_MISMATCH") == 0,
		    "%s for %s", r.code, mismatch[i]);
		ck_assert_ptr_nonnull(strstr(r.msg, "'v'"));
	}
}
END_TEST

START_TEST(parse_type)
{
	char buf[256], *t;

	bad("{\"v\":1,\"sessionId\":\"s\"}", "'type'");
	bad("{\"v\":1,\"type\":null,\"sessionId\":\"s\"}", "'type'");
	bad("{\"v\":1,\"type\":5,\"sessionId\":\"s\"}", "'type'");
	bad("{\"v\":1,\"type\":true,\"sessionId\":\"s\"}", "'type'");
	bad("{\"v\":1,\"type\":{},\"sessionId\":\"s\"}", "'type'");
	bad("{\"v\":1,\"type\":[\"chat\"],\"sessionId\":\"s\"}", "'type'");
	t = repeat('t', 65);
	snprintf(buf, sizeof(buf), "{\"v\":1,\"type\":\"%s\",\"sessionId\":\"s\"}", t);
	bad(buf, "'type'");
	free(t);
}
END_TEST

START_TEST(parse_session)
{
	char *s;

	bad("{\"v\":1,\"type\":\"chat\"}", "sessionId");
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":null}", "sessionId");
	bad("{\"v\":1,\"type\":\"chat\",\"sessionid\":\"s\"}", "sessionId");
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":7}", "sessionId");
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":[\"s\"]}", "sessionId");
	bad(msg_with("", NULL), "sessionId");
	bad(msg_with(".hidden", NULL), "sessionId");
	bad(msg_with(".", NULL), "sessionId");
	bad(msg_with("..", NULL), "sessionId");
	bad(msg_with("a/b", NULL), "sessionId");
	bad(msg_with("../etc", NULL), "sessionId");
	bad(msg_with("a b", NULL), "sessionId");
	bad(msg_with("a\\nb", NULL), "sessionId");
	bad(msg_with("caf\xc3\xa9", NULL), "sessionId");
	bad(msg_with("x%2e", NULL), "sessionId");
	good(msg_with("a.", NULL));
	good(msg_with("0", NULL));
	s = repeat('s', 128);
	good(msg_with(s, NULL));
	free(s);
	s = repeat('s', 129);
	bad(msg_with(s, NULL), "sessionId");
	free(s);
	s = repeat('s', 600);
	bad(msg_with(s, NULL), "sessionId");
	free(s);
}
END_TEST

START_TEST(parse_session_nul)
{
	/* cJSON decodes \u0000 into a NUL, so C code sees only "a" */
	bad(msg_with("a\\u0000b", NULL), "u0000");
	bad(msg_with("\\u0000", NULL), "u0000");
}
END_TEST

START_TEST(parse_id)
{
	char *s;
	struct res r;

	s = repeat('i', 128);
	ck_assert_int_eq(parse(&r, msg_with("s", s), DEPTH), 0);
	ck_assert_uint_eq(strlen(r.in.id), 128);
	proto_in_free(&r.in);
	free(s);
	s = repeat('i', 129);
	bad(msg_with("s", s), "'id'");
	free(s);
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s\",\"id\":17}", "'id'");
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s\",\"id\":{}}", "'id'");
}
END_TEST

START_TEST(parse_depth)
{
	const char *head = "{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s\",\"x\":";
	char buf[8192];
	struct res r;
	unsigned d, k;
	size_t n;

	/* the root counts as level 1; x adds levels 2..d */
	for (d = 1; d <= 6; d++) {
		n = (size_t)snprintf(buf, sizeof(buf), "%s", head);
		for (k = 2; k <= d; k++)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s",
			    (k % 2) ? "[" : "{\"k\":");
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "0");
		for (k = d; k >= 2; k--)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s",
			    (k % 2) ? "]" : "}");
		snprintf(buf + n, sizeof(buf) - n, "}");
		ck_assert_msg(parse(&r, buf, d) == 0, "depth %u rejected at %u",
		    d, d);
		proto_in_free(&r.in);
		if (d > 1) {
			ck_assert_msg(parse(&r, buf, d - 1) == -1,
			    "depth %u accepted at %u", d, d - 1);
			ck_assert_str_eq(r.code, "BAD_REQUEST");
			ck_assert_ptr_nonnull(strstr(r.msg, "nests"));
		}
	}
	/* depth counts the deepest branch, not the first one */
	ck_assert_int_eq(parse(&r, "{\"v\":1,\"type\":\"chat\",\"sessionId\":"
	    "\"s\",\"a\":[],\"b\":{\"c\":[[]]}}", 3), -1);
	ck_assert_int_eq(parse(&r, "{\"v\":1,\"type\":\"chat\",\"sessionId\":"
	    "\"s\",\"a\":[],\"b\":{\"c\":[[]]}}", 4), 0);
	proto_in_free(&r.in);
	/* empty containers count */
	ck_assert_int_eq(parse(&r, "{\"v\":1,\"type\":\"chat\",\"sessionId\":"
	    "\"s\",\"a\":[[[]]]}", 3), -1);

	/* far deeper than any limit: rejected, no crash */
	n = 0;
	n += (size_t)snprintf(buf, sizeof(buf), "%s", head);
	while (n < 4000)
		buf[n++] = '[';
	while (n < 7900)
		buf[n++] = ']';
	buf[n++] = '}';
	buf[n] = '\0';
	ck_assert_int_eq(parse(&r, buf, DEPTH), -1);
	ck_assert_str_eq(r.code, "BAD_REQUEST");
}
END_TEST

START_TEST(parse_small_msg_buffer)
{
	struct proto_in in;
	const char *code;
	char m[8];

	memset(m, 'Z', sizeof(m));
	ck_assert_int_eq(proto_parse("{\"v\":1}", 7, DEPTH, &in, &code, m, 4), -1);
	ck_assert_uint_eq(strlen(m), 3);
	ck_assert_int_eq(m[4], 'Z');
}
END_TEST

/* ---- proto_str / proto_u64 ---- */

static cJSON *
obj(const char *s)
{
	cJSON *o = cJSON_Parse(s);

	ck_assert_ptr_nonnull(o);
	return o;
}

START_TEST(str_cases)
{
	cJSON *o = obj("{\"a\":\"xyz\",\"n\":3,\"z\":null,\"e\":\"\",\"b\":true}");
	const char *out;
	char m[128];

	out = NULL;
	ck_assert_int_eq(proto_str(o, "a", 1, 3, &out, m, sizeof(m)), 0);
	ck_assert_str_eq(out, "xyz");
	ck_assert_int_eq(proto_str(o, "e", 1, 3, &out, m, sizeof(m)), 0);
	ck_assert_str_eq(out, "");

	ck_assert_int_eq(proto_str(o, "a", 1, 2, &out, m, sizeof(m)), -1);
	ck_assert_ptr_nonnull(strstr(m, "'a'"));
	ck_assert_int_eq(proto_str(o, "n", 0, 10, &out, m, sizeof(m)), -1);
	ck_assert_ptr_nonnull(strstr(m, "'n'"));
	ck_assert_int_eq(proto_str(o, "b", 1, 10, &out, m, sizeof(m)), -1);
	ck_assert_ptr_nonnull(strstr(m, "'b'"));

	ck_assert_int_eq(proto_str(o, "missing", 1, 10, &out, m, sizeof(m)), -1);
	ck_assert_ptr_nonnull(strstr(m, "'missing'"));
	ck_assert_int_eq(proto_str(o, "z", 1, 10, &out, m, sizeof(m)), -1);
	ck_assert_ptr_nonnull(strstr(m, "'z'"));

	/* absent optional leaves out alone */
	out = "keep";
	ck_assert_int_eq(proto_str(o, "missing", 0, 10, &out, m, sizeof(m)), 0);
	ck_assert_str_eq(out, "keep");
	ck_assert_int_eq(proto_str(o, "z", 0, 10, &out, m, sizeof(m)), 0);
	ck_assert_str_eq(out, "keep");
	/* field names are case-sensitive */
	ck_assert_int_eq(proto_str(o, "A", 1, 10, &out, m, sizeof(m)), -1);
	cJSON_Delete(o);
}
END_TEST

static int
u64(const char *json, uint64_t *out)
{
	cJSON *o = obj(json);
	char m[128];
	int r;

	m[0] = '\0';
	r = proto_u64(o, "n", 1, out, m, sizeof(m));
	if (r == -1)
		ck_assert_msg(strstr(m, "'n'") != NULL, "msg '%s'", m);
	cJSON_Delete(o);
	return r;
}

START_TEST(u64_cases)
{
	uint64_t v;
	char m[128];
	cJSON *o;

	v = 99;
	ck_assert_int_eq(u64("{\"n\":0}", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(u64("{\"n\":42}", &v), 0);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(u64("{\"n\":42.0}", &v), 0);
	ck_assert_uint_eq(v, 42);
	ck_assert_int_eq(u64("{\"n\":1e3}", &v), 0);
	ck_assert_uint_eq(v, 1000);
	ck_assert_int_eq(u64("{\"n\":9007199254740991}", &v), 0);
	ck_assert_uint_eq(v, 9007199254740991ull);

	/* digits in a string */
	ck_assert_int_eq(u64("{\"n\":\"17\"}", &v), 0);
	ck_assert_uint_eq(v, 17);
	ck_assert_int_eq(u64("{\"n\":\"0\"}", &v), 0);
	ck_assert_uint_eq(v, 0);

	v = 5;
	ck_assert_int_eq(u64("{\"n\":-1}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":-0.5}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":1.5}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":0.0001}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":9007199254740992}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":1e300}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":\"-1\"}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":\" 1\"}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":\"+1\"}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":\"12abc\"}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":\"1.5\"}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":\"\"}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":\"abc\"}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":true}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":[1]}", &v), -1);
	ck_assert_int_eq(u64("{\"n\":null}", &v), -1);
	ck_assert_int_eq(u64("{}", &v), -1);
	ck_assert_uint_eq(v, 5);	/* failures leave it alone */

	/* absent optional leaves out alone */
	o = obj("{\"n\":null}");
	ck_assert_int_eq(proto_u64(o, "n", 0, &v, m, sizeof(m)), 0);
	ck_assert_int_eq(proto_u64(o, "x", 0, &v, m, sizeof(m)), 0);
	ck_assert_uint_eq(v, 5);
	cJSON_Delete(o);
}
END_TEST

START_TEST(u64_string_overflow)
{
	uint64_t v = 5;

	/* 2^64 and beyond do not fit: strtoull saturates to UINT64_MAX */
	ck_assert_msg(u64("{\"n\":\"18446744073709551616\"}", &v) == -1,
	    "string 2^64 accepted as %llu", (unsigned long long)v);
	ck_assert_msg(u64("{\"n\":\"99999999999999999999999999\"}", &v) == -1,
	    "huge digit string accepted as %llu", (unsigned long long)v);
}
END_TEST

/* ---- encoding ---- */

START_TEST(reply_roundtrip)
{
	cJSON *b, *o;
	char *s;

	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "id", "c-17");
	cJSON_AddNumberToObject(b, "n", 3);
	s = proto_reply("ack", "s1", b);
	ck_assert_ptr_nonnull(s);
	o = obj(s);
	ck_assert_int_eq(cJSON_GetObjectItem(o, "v")->valuedouble, 1);
	ck_assert_str_eq(cJSON_GetObjectItem(o, "type")->valuestring, "ack");
	ck_assert_str_eq(cJSON_GetObjectItem(o, "sessionId")->valuestring, "s1");
	ck_assert_str_eq(cJSON_GetObjectItem(o, "id")->valuestring, "c-17");
	ck_assert_int_eq(cJSON_GetObjectItem(o, "n")->valuedouble, 3);
	ck_assert_ptr_null(cJSON_GetObjectItem(o, "seq"));
	ck_assert_int_eq(cJSON_GetArraySize(o), 5);
	cJSON_Delete(o);
	free(s);

	s = proto_reply("pong", NULL, NULL);
	ck_assert_ptr_nonnull(s);
	o = obj(s);
	ck_assert_str_eq(cJSON_GetObjectItem(o, "type")->valuestring, "pong");
	ck_assert_ptr_null(cJSON_GetObjectItem(o, "sessionId"));
	ck_assert_int_eq(cJSON_GetArraySize(o), 2);
	cJSON_Delete(o);
	free(s);

	/* strings that need escaping survive */
	s = proto_reply("a\"b\\c\n", "s", NULL);
	o = obj(s);
	ck_assert_str_eq(cJSON_GetObjectItem(o, "type")->valuestring, "a\"b\\c\n");
	cJSON_Delete(o);
	free(s);

	o = proto_head("x", "y");
	ck_assert_int_eq(cJSON_GetArraySize(o), 3);
	ck_assert_str_eq(cJSON_GetObjectItem(o, "sessionId")->valuestring, "y");
	cJSON_Delete(o);
}
END_TEST

START_TEST(holds)
{
	cJSON *a = cJSON_Parse("[\"a\",1,\"bc\",null]");

	ck_assert(proto_holds(a, "a"));
	ck_assert(proto_holds(a, "bc"));
	ck_assert(!proto_holds(a, "b"));
	ck_assert(!proto_holds(a, "1"));
	ck_assert(!proto_holds(a, NULL));
	ck_assert(!proto_holds(NULL, "a"));
	cJSON_Delete(a);
}
END_TEST

START_TEST(error_roundtrip)
{
	cJSON *x, *o;
	char *s;

	s = proto_error("s1", "PROTOCOL_MISMATCH", "field 'v' must be 1",
	    "recoverable", NULL);
	ck_assert_ptr_nonnull(s);
	o = obj(s);
	ck_assert_int_eq(cJSON_GetObjectItem(o, "v")->valuedouble, 1);
	ck_assert_str_eq(cJSON_GetObjectItem(o, "type")->valuestring, "error");
	ck_assert_str_eq(cJSON_GetObjectItem(o, "sessionId")->valuestring, "s1");
	ck_assert_str_eq(cJSON_GetObjectItem(o, "code")->valuestring,
	    "PROTOCOL_MISMATCH");
	ck_assert_str_eq(cJSON_GetObjectItem(o, "message")->valuestring,
	    "field 'v' must be 1");
	ck_assert_str_eq(cJSON_GetObjectItem(o, "severity")->valuestring,
	    "recoverable");
	ck_assert_int_eq(cJSON_GetArraySize(o), 6);
	cJSON_Delete(o);
	free(s);

	x = cJSON_CreateObject();
	cJSON_AddNumberToObject(x, "oldestSeq", 17);
	s = proto_error(NULL, "RESUME_GAP", "trimmed", "warning", x);
	o = obj(s);
	ck_assert_ptr_null(cJSON_GetObjectItem(o, "sessionId"));
	ck_assert_str_eq(cJSON_GetObjectItem(o, "code")->valuestring, "RESUME_GAP");
	ck_assert_str_eq(cJSON_GetObjectItem(o, "severity")->valuestring, "warning");
	ck_assert_int_eq(cJSON_GetObjectItem(o, "oldestSeq")->valuedouble, 17);
	cJSON_Delete(o);
	free(s);

	/* a reply of ours parses as a client message would */
	{
		struct res r;

		s = proto_error("s-2", "BAD_REQUEST", "x", "fatal", NULL);
		ck_assert_int_eq(parse(&r, s, DEPTH), 0);
		ck_assert_str_eq(r.in.type, "error");
		ck_assert_str_eq(r.in.session, "s-2");
		proto_in_free(&r.in);
		free(s);
	}
}
END_TEST

/* ---- proto_json: the one check for every way in ---- */

/* proto_json on len bytes of s: 0 accepted, -1 refused with word in msg. */
static int
json_rc(const char *s, size_t len, const char *word)
{
	char msg[256] = "";
	cJSON *o = proto_json(s, len, DEPTH, msg, sizeof(msg));

	if (o != NULL) {
		cJSON_Delete(o);
		return 0;
	}
	ck_assert_msg(msg[0] != '\0', "no message");
	if (word != NULL)
		ck_assert_msg(strstr(msg, word) != NULL, "'%s' not in '%s'",
		    word, msg);
	return -1;
}

#define JSON_BAD(lit, word) \
	ck_assert_int_eq(json_rc(lit, sizeof(lit) - 1, word), -1)
#define JSON_GOOD(lit) \
	ck_assert_int_eq(json_rc(lit, sizeof(lit) - 1, NULL), 0)

START_TEST(json_utf8)
{
	JSON_GOOD("{\"m\":\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}");
	JSON_BAD("{\"m\":\"\xff\xfe\"}", "UTF-8");
	JSON_BAD("{\"m\":\"\xed\xa0\x80\"}", "UTF-8");	/* CESU surrogate */
	JSON_BAD("{\"m\":\"\xed\xbf\xbf\"}", "UTF-8");
	JSON_BAD("{\"m\":\"\xc0\xaf\"}", "UTF-8");	/* overlong '/' */
	JSON_BAD("{\"m\":\"\xe0\x80\xaf\"}", "UTF-8");
	JSON_BAD("{\"m\":\"\xf4\x90\x80\x80\"}", "UTF-8");	/* > U+10FFFF */
	JSON_BAD("{\"m\":\"\xe2\x82\"}", "UTF-8");	/* cut sequence */
	/* outside a string too */
	JSON_BAD("{\"m\":1}\xff", "UTF-8");
}
END_TEST

START_TEST(json_escapes)
{
	JSON_GOOD("{\"m\":\"\\ud83d\\ude00 \\u00e9 \\\\u0000\"}");
	JSON_BAD("{\"m\":\"a\\u0000b\"}", "u0000");
	JSON_BAD("{\"m\":\"\\u0000\"}", "u0000");
	JSON_BAD("{\"\\u0000\":1}", "u0000");	/* in a key */
	JSON_BAD("{\"m\":\"\\ud800\"}", "surrogate");
	JSON_BAD("{\"m\":\"\\ud800x\"}", "surrogate");
	JSON_BAD("{\"m\":\"\\udc00\"}", "surrogate");
	JSON_BAD("{\"m\":\"\\ud800\\u0041\"}", "surrogate");
	JSON_BAD("{\"m\":\"\\ud800\\ud800\"}", "surrogate");
	JSON_BAD("{\"m\":\"a\tb\"}", "control");
	JSON_BAD("{\"m\":\"a\nb\"}", "control");
	/* a raw NUL inside a string would cut it as \u0000 does */
	ck_assert_int_eq(json_rc("{\"m\":\"a\0b\"}", 11, "control"), -1);
	/* an escaped quote does not end the string */
	JSON_BAD("{\"m\":\"\\\"\\u0000\"}", "u0000");
}
END_TEST

START_TEST(json_trailing)
{
	JSON_GOOD("{\"m\":1}");
	JSON_GOOD(" \r\n{\"m\":1}\t\r\n ");
	JSON_BAD("{\"m\":1}x", "follow");
	JSON_BAD("{\"m\":1}{\"m\":2}", "follow");
	JSON_BAD("{\"m\":1} 1", "follow");
	ck_assert_int_eq(json_rc("{\"m\":1}\0x", 9, "follow"), -1);
	JSON_BAD("", "JSON");
	JSON_BAD("{\"m\":", "JSON");
	JSON_BAD("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]"
	    "]]]]]]]]]]]]]]", "deeper");
}
END_TEST

START_TEST(json_parse_same)
{
	/* proto_parse answers what proto_json does, as BAD_REQUEST */
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s\",\"message\":"
	    "\"\xed\xa0\x80\"}", "UTF-8");
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s\"} x", "follow");
	bad("{\"v\":1,\"type\":\"chat\",\"sessionId\":\"s\",\"message\":"
	    "\"\\udfff\"}", "surrogate");
}
END_TEST

static Suite *
proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_test(tc, parse_chat);
	tcase_add_test(tc, parse_len_bounds_input);
	tcase_add_test(tc, parse_not_json);
	tcase_add_test(tc, parse_not_object);
	tcase_add_test(tc, parse_version);
	tcase_add_test(tc, parse_type);
	tcase_add_test(tc, parse_session);
	tcase_add_test(tc, parse_session_nul);
	tcase_add_test(tc, parse_id);
	tcase_add_test(tc, parse_depth);
	tcase_add_test(tc, parse_small_msg_buffer);
	suite_add_tcase(s, tc);

	tc = tcase_create("json");
	tcase_add_test(tc, json_utf8);
	tcase_add_test(tc, json_escapes);
	tcase_add_test(tc, json_trailing);
	tcase_add_test(tc, json_parse_same);
	suite_add_tcase(s, tc);

	tc = tcase_create("fields");
	tcase_add_test(tc, str_cases);
	tcase_add_test(tc, u64_cases);
	tcase_add_test(tc, u64_string_overflow);
	suite_add_tcase(s, tc);

	tc = tcase_create("encode");
	tcase_add_test(tc, reply_roundtrip);
	tcase_add_test(tc, error_roundtrip);
	tcase_add_test(tc, holds);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(proto_suite());
}
