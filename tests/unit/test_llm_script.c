/*
 * The script provider (workers/llm_script.c): plain replies, streamed
 * reasoning (@think), stamps, tool calls, bad tool scripts, cancel.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "../../workers/llm.c"
#include "../../workers/llm_openai.c"
#include "../../workers/llm_anthropic.c"
#include "../../workers/llm_http.c"
#include "../../workers/llm_script.c"
#include "check_main.h"
#include "llm_fixture.h"

/* --- the script provider --- */

#define SCRIPT_TOOLS "@tool {\"calls\":[{\"name\":\"srv__add\"," \
	"\"arguments\":{\"a\":1,\"b\":[2, 3]}},{\"name\":\"srv__now\"}]," \
	"\"then\":\"final text\"}"

/* Runs one script call to its end; returns the call llm_start gave. */
static void
script_run(struct cfg_provider *p, const struct llm_msg *msgs, size_t n,
    struct out *o)
{
	struct event_base *base = event_base_new();
	struct llm_ctx *ctx;
	struct timeval tv = { 5, 0 };

	ck_assert_ptr_nonnull(base);
	memset(o, 0, sizeof(*o));
	o->base = base;
	ctx = llm_ctx_new(base);
	ck_assert_ptr_nonnull(ctx);
	o->call = llm_start(ctx, p, msgs, n, tl_defs, 3, &ocbs, o);
	ck_assert_ptr_nonnull(o->call);
	/* Never synchronous: nothing has run yet. */
	ck_assert_int_eq(o->ntok + o->ntools + o->done + o->errors, 0);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	if (o->call != NULL)
		llm_cancel(o->call);
	llm_ctx_free(ctx);
	event_base_free(base);
}

static struct cfg_provider *
script_prov(const char *reply)
{
	struct cfg_provider *p = prov("script", NULL);

	p->reply = (char *)reply;
	p->chunk = 3;
	p->delay_ms = 1;
	return p;
}

START_TEST(test_script_plain)
{
	static const struct llm_msg m[] = {
		{ .role = "user", .content = "hello" },
	};
	struct out o;

	script_run(script_prov("h\xc3\xa9llo w\xc3\xb6rld"), m, 1, &o);
	ck_assert_int_eq(o.done, 1);
	ck_assert_str_eq(o.text, "h\xc3\xa9llo w\xc3\xb6rld");
	ck_assert_int_eq(o.ntok, 4);
	ck_assert_str_eq(o.stop, "stop");
	ck_assert_int_eq(o.ntools, 0);
	ck_assert_uint_eq(o.usage.input_tokens, 2);
}
END_TEST

/* @think: the thinking as one reasoning block, then "then" streamed. */
START_TEST(test_script_think)
{
	static const struct llm_msg m[] = {
		{ .role = "user", .content = "hello" },
	};
	struct out o;

	script_run(script_prov("@think {\"thinking\":\"Hmm, a greeting.\","
	    "\"then\":\"Hi there\"}"), m, 1, &o);
	ck_assert_int_eq(o.done, 1);
	ck_assert_str_eq(o.thoughts, "Hmm, a greeting.|");
	ck_assert_str_eq(o.text, "Hi there");
	script_run(script_prov("@think not json"), m, 1, &o);
	ck_assert_str_eq(o.thoughts, "");
	ck_assert_str_eq(o.text, "@think not json");
}
END_TEST

/* stamp yes: every chunk is the send time in microseconds and a space. */
START_TEST(test_script_stamp)
{
	static const struct llm_msg m[] = {
		{ .role = "user", .content = "hello" },
	};
	struct cfg_provider *p = script_prov("h\xc3\xa9llo w\xc3\xb6rld");
	struct timespec ts;
	unsigned long long before, after, v;
	const char *c;
	char *end;
	struct out o;
	int n = 0;

	p->stamp = 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	before = (unsigned long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	script_run(p, m, 1, &o);
	clock_gettime(CLOCK_REALTIME, &ts);
	after = (unsigned long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	ck_assert_int_eq(o.done, 1);
	ck_assert_int_eq(o.ntok, 4);	/* paced as without stamps */
	for (c = o.text; *c != '\0'; c = end + 1, n++) {
		v = strtoull(c, &end, 10);
		ck_assert_msg(end > c && *end == ' ', "not a stamp: %s", c);
		ck_assert(v >= before && v <= after);
	}
	ck_assert_int_eq(n, 4);
}
END_TEST

/*
 * Chunks already due go in one tick, at most SCRIPT_BURST: delay 0
 * streams 64 a loop pass; a call that is late by 30 delays sends those
 * 30 (or more) at its first tick, not one a pass.
 */
START_TEST(test_script_burst)
{
	static const struct llm_msg m[] = {
		{ .role = "user", .content = "x" },
	};
	struct event_base *base = event_base_new();
	struct llm_ctx *ctx = llm_ctx_new(base);
	struct cfg_provider *p;
	char reply[151];
	struct out o;

	memset(reply, 'r', sizeof(reply) - 1);
	reply[sizeof(reply) - 1] = '\0';
	p = script_prov(reply);
	p->chunk = 1;
	p->delay_ms = 0;
	memset(&o, 0, sizeof(o));
	o.base = base;
	o.call = llm_start(ctx, p, m, 1, NULL, 0, &ocbs, &o);
	ck_assert_ptr_nonnull(o.call);
	event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(o.ntok, SCRIPT_BURST);
	event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(o.ntok, 2 * SCRIPT_BURST);
	ck_assert_int_eq(o.done, 0);
	event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(o.ntok, 150);
	ck_assert_int_eq(o.done, 1);
	ck_assert_int_eq((int)strlen(o.text), 150);

	p = script_prov(reply);
	p->chunk = 1;
	p->delay_ms = 1;
	memset(&o, 0, sizeof(o));
	o.base = base;
	o.call = llm_start(ctx, p, m, 1, NULL, 0, &ocbs, &o);
	usleep(30 * 1000);
	event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_ge(o.ntok, 30);
	ck_assert_int_le(o.ntok, SCRIPT_BURST);
	event_base_dispatch(base);
	ck_assert_int_eq(o.ntok, 150);
	ck_assert_int_eq(o.done, 1);
	llm_ctx_free(ctx);
	event_base_free(base);
}
END_TEST

START_TEST(test_script_tool)
{
	static const struct llm_msg first[] = {
		{ .role = "user", .content = "earlier" },
		{ .role = "tool", .content = "old", .tool_call_id = "c0" },
		{ .role = "user", .content = "add" },
	};
	static const struct llm_tool_call calls[] = {
		{ "call_1", "srv__add", "{\"a\":1,\"b\":[2,3]}" },
		{ "call_2", "srv__now", "{}" },
	};
	static const struct llm_msg second[] = {
		{ .role = "user", .content = "add" },
		{ .role = "assistant", .content = "", .calls = calls,
		    .ncalls = 2 },
		{ .role = "tool", .content = "5", .tool_call_id = "call_1" },
		{ .role = "tool", .content = "boom", .tool_call_id = "call_2",
		    .is_error = 1 },
	};
	struct out o;

	/* The first request of a turn: the calls, no text. */
	script_run(script_prov(SCRIPT_TOOLS), first, 3, &o);
	ck_assert_int_eq(o.done, 1);
	ck_assert_int_eq(o.errors, 0);
	ck_assert_int_eq(o.ntok, 0);
	ck_assert_int_eq(o.ntools, 2);
	ck_assert_str_eq(o.tools, "call_1 srv__add {\"a\":1,\"b\":[2,3]};"
	    "call_2 srv__now {};");
	ck_assert_str_eq(o.stop, "tool_calls");

	/* With the results: "then", and the results for all to see. */
	script_run(script_prov(SCRIPT_TOOLS), second, 4, &o);
	ck_assert_int_eq(o.done, 1);
	ck_assert_int_eq(o.ntools, 0);
	ck_assert_str_eq(o.text, "final text | 5 | boom");
	ck_assert_str_eq(o.stop, "stop");

	/* Only the results of this round count. */
	script_run(script_prov(SCRIPT_TOOLS), second + 2, 1, &o);
	ck_assert_str_eq(o.text, "final text | 5");

	/* No "then", no calls: only the results; then only "then". */
	script_run(script_prov("@tool {\"calls\":[]}"), second, 3, &o);
	ck_assert_str_eq(o.text, "5");
	script_run(script_prov("@tool {\"calls\":[],\"then\":\"ok\"}"),
	    first, 3, &o);
	ck_assert_str_eq(o.text, "ok");
	ck_assert_str_eq(o.stop, "stop");
}
END_TEST

START_TEST(test_script_tool_bad)
{
	static const char *const bad[] = {
		"@tool {\"calls\":", "@tool [1]", "@tool {\"then\":\"x\"}",
		"@tool", "@toolx {\"calls\":[]}", "@tool \"s\"",
	};
	static const struct llm_msg m[] = {
		{ .role = "user", .content = "x" },
	};
	struct out o;
	size_t i;

	/* Not a script: streamed as it is, never a crash or a call. */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		script_run(script_prov(bad[i]), m, 1, &o);
		ck_assert_int_eq(o.done, 1);
		ck_assert_int_eq(o.ntools, 0);
		ck_assert_str_eq(o.text, bad[i]);
	}
	/* Odd call entries still make calls; with no name, an empty one. */
	script_run(script_prov("@tool {\"calls\":[5,{\"arguments\":\"s\"}]}"),
	    m, 1, &o);
	ck_assert_str_eq(o.tools, "call_1  {};call_2  \"s\";");
	ck_assert_str_eq(o.stop, "tool_calls");
}
END_TEST

static void
cancel_tool(void *arg, const char *id, const char *name, const char *args)
{
	struct out *o = arg;

	(void)id;
	(void)name;
	(void)args;
	o->ntools++;
	llm_cancel(o->call);
	o->call = NULL;
	event_base_loopexit(o->base, NULL);
}

START_TEST(test_script_cancel)
{
	static const struct llm_msg m[] = {
		{ .role = "user", .content = "x" },
	};
	struct llm_cbs cbs = ocbs;
	struct event_base *base = event_base_new();
	struct llm_ctx *ctx = llm_ctx_new(base);
	struct timeval tv = { 0, 50000 };
	struct out o;

	/* Cancelled from inside a tool_call: nothing more, nothing leaks. */
	cbs.tool_call = cancel_tool;
	memset(&o, 0, sizeof(o));
	o.base = base;
	o.call = llm_start(ctx, script_prov(SCRIPT_TOOLS), m, 1, NULL, 0,
	    &cbs, &o);
	ck_assert_ptr_nonnull(o.call);
	event_base_dispatch(base);
	ck_assert_int_eq(o.ntools, 1);
	ck_assert_int_eq(o.done, 0);

	/* Cancelled from inside a token, and before its first tick. */
	memset(&o, 0, sizeof(o));
	o.base = base;
	o.cancel_at = 2;
	o.call = llm_start(ctx, script_prov("abcdefghijkl"), m, 1, NULL, 0,
	    &ocbs, &o);
	event_base_dispatch(base);
	ck_assert_int_eq(o.ntok, 2);
	ck_assert_int_eq(o.done, 0);
	llm_cancel(llm_start(ctx, script_prov(SCRIPT_TOOLS), m, 1, NULL, 0,
	    &ocbs, &o));
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	ck_assert_int_eq(o.done + o.errors, 0);

	/* An unknown type starts nothing. */
	ck_assert_ptr_null(llm_start(ctx, prov("nope", NULL), m, 1, NULL, 0,
	    &ocbs, &o));
	llm_ctx_free(ctx);
	event_base_free(base);
}
END_TEST

static Suite *
llm_script_suite(void)
{
	Suite *s = suite_create("llm_script");
	TCase *tc = tcase_create("script");

	tcase_add_test(tc, test_script_plain);
	tcase_add_test(tc, test_script_think);
	tcase_add_test(tc, test_script_stamp);
	tcase_add_test(tc, test_script_burst);
	tcase_add_test(tc, test_script_tool);
	tcase_add_test(tc, test_script_tool_bad);
	tcase_add_test(tc, test_script_cancel);
	suite_add_tcase(s, tc);
	return s;
}

int main(void);

int
main(void)
{
	return check_run(llm_script_suite());
}
