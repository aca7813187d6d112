/*
 * The providers: stream decoders fed recorded provider bytes whole, byte
 * by byte and in odd splits, request bodies (with tools, tool calls and
 * tool results), the libcurl path against an in-process fake server
 * (retries, timeouts, cancel, the attempt's deadline and size), and the script provider's "@tool" fixture.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "../../workers/llm.c"
#include "../../workers/llm_openai.c"
#include "../../workers/llm_anthropic.c"
#include "../../workers/llm_http.c"
#include "../../workers/llm_script.c"
#include "check_main.h"
#include "llm_fixture.h"


/*
 * Feeds in to a new decoder step bytes at a time (0 = all at once), with
 * LF turned into CRLF when crlf, then ends it; returns the last status.
 */
static int
run(const char *type, const char *in, size_t step, int crlf, struct out *o,
    struct llm_result *res)
{
	struct llm_stream	*st;
	char			*buf;
	size_t			 len = 0, off = 0, k, i;
	int			 r = LLM_MORE;

	memset(o, 0, sizeof(*o));
	buf = malloc(strlen(in) * 2 + 1);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; in[i] != '\0'; i++) {
		if (crlf && in[i] == '\n')
			buf[len++] = '\r';
		buf[len++] = in[i];
	}
	st = llm_stream_new(type, &ocbs, o);
	ck_assert_ptr_nonnull(st);
	while (off < len) {
		k = step == 0 || len - off < step ? len - off : step;
		r = llm_stream_feed(st, buf + off, k);
		off += k;
		if (r != LLM_MORE)
			ck_assert_int_eq(llm_stream_feed(st, "data: x\n\n", 9),
			    r);
	}
	if (r == LLM_MORE)
		r = llm_stream_end(st);
	*res = *llm_stream_result(st);
	llm_stream_free(st);
	free(buf);
	return r;
}

/* Every split of in gives the same status, text, tools and result. */
static struct llm_result
run_all(const char *type, const char *in, int want, const char *text,
    const char *tools)
{
	static const size_t steps[] = { 0, 1, 2, 3, 7, 13, 64, 1000 };
	struct llm_result res;
	struct out o;
	size_t i;
	int crlf;

	for (crlf = 0; crlf < 2; crlf++)
		for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			ck_assert_int_eq(run(type, in, steps[i], crlf, &o,
			    &res), want);
			ck_assert_msg(strcmp(o.text, text) == 0,
			    "step %zu: text \"%s\"", steps[i], o.text);
			ck_assert_msg(strcmp(o.tools, tools) == 0,
			    "step %zu: tools \"%s\"", steps[i], o.tools);
		}
	return res;
}

/* --- reasoning --- */

/* DeepSeek's reasoning_content deltas, then the answer. */
static const char oa_reason[] =
    "data: {\"id\":\"1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
    "\"assistant\",\"content\":null,\"reasoning_content\":\"\"},"
    "\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
    "null,\"reasoning_content\":\"Think \"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
    "null,\"reasoning_content\":\"twice.\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
    "\"Answer\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"1\",\"choices\":[{\"index\":0,\"delta\":{},"
    "\"finish_reason\":\"stop\"}]}\n\n"
    "data: [DONE]\n\n";

/* Anthropic's extended thinking: a thinking block, then a text block. */
static const char an_reason[] =
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":"
    "{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}"
    "\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\","
    "\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":"
    "\"\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
    "\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":"
    "\"Let me \"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
    "\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":"
    "\"see.\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
    "\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":"
    "\"EqQB\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
    "\"index\":0}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\","
    "\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
    "\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Yes\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
    "\"index\":1}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"
    "{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

START_TEST(test_reasoning)
{
	static const size_t steps[] = { 0, 1, 5, 64 };
	struct llm_result res;
	struct cfg_provider p;
	struct llm_msg m = { "user", "hi", NULL, 0, NULL, NULL, 0 };
	struct out o;
	char *body;
	size_t i;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		ck_assert_int_eq(run("openai", oa_reason, steps[i], 0, &o,
		    &res), LLM_DONE);
		ck_assert_str_eq(o.text, "Answer");
		ck_assert_str_eq(o.thoughts, "Think twice.|");
		ck_assert_int_eq(run("anthropic", an_reason, steps[i], 1, &o,
		    &res), LLM_DONE);
		ck_assert_str_eq(o.text, "Yes");
		ck_assert_str_eq(o.thoughts, "Let me see.|");
	}
	/* OpenRouter's "reasoning", ended by the finish. */
	ck_assert_int_eq(run("openai", "data: {\"choices\":[{\"index\":0,"
	    "\"delta\":{\"reasoning\":\"hmm\"}}]}\n\ndata: {\"choices\":"
	    "[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	    "data: [DONE]\n\n", 0, 0, &o, &res), LLM_DONE);
	ck_assert_str_eq(o.thoughts, "hmm|");

	ck_assert(llm_openai_reasoning_model("o1"));
	ck_assert(llm_openai_reasoning_model("o3-mini"));
	ck_assert(llm_openai_reasoning_model("openai/o4-mini"));
	ck_assert(llm_openai_reasoning_model("gpt-5.1"));
	ck_assert(!llm_openai_reasoning_model("gpt-4o"));
	ck_assert(!llm_openai_reasoning_model("o10x"));
	ck_assert(!llm_openai_reasoning_model(NULL));
	memset(&p, 0, sizeof(p));
	p.max_tokens = 300;
	p.temperature = 0.5;
	p.has_temperature = 1;
	p.model = "o3-mini";
	body = openai_body(&p, &m, 1, NULL, 0);
	ck_assert_ptr_nonnull(strstr(body, "\"max_completion_tokens\":300"));
	ck_assert_ptr_null(strstr(body, "\"max_tokens\""));
	ck_assert_ptr_null(strstr(body, "temperature"));
	free(body);
	p.model = "gpt-4o";
	body = openai_body(&p, &m, 1, NULL, 0);
	ck_assert_ptr_nonnull(strstr(body, "\"max_tokens\":300"));
	ck_assert_ptr_nonnull(strstr(body, "\"temperature\":0.5"));
	free(body);
}
END_TEST

/* --- OpenAI --- */

static const char oa_text[] =
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
    "\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
    "\"finish_reason\":null}],\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":"
    "{\"content\":\"Hello\"},\"finish_reason\":null}],\"usage\":null}\n\n"
    ": keep-alive\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":"
    "{\"content\":\", w\\u00f6rld\\n\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},"
    "\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":"
    "{\"prompt_tokens\":12,\"completion_tokens\":5,\"total_tokens\":17}}\n\n"
    "data: [DONE]\n\n";

START_TEST(test_openai_text)
{
	struct llm_result res;

	res = run_all("openai", oa_text, LLM_DONE, "Hello, w\xc3\xb6rld\n", "");
	ck_assert_str_eq(res.stop_reason, "stop");
	ck_assert_uint_eq(res.usage.input_tokens, 12);
	ck_assert_uint_eq(res.usage.output_tokens, 5);
	ck_assert_str_eq(res.err_msg, "");
}
END_TEST

/* Two parallel calls whose fragments interleave. */
static const char oa_tools[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
    "\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_a\","
    "\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
    "\"function\":{\"arguments\":\"{\\\"ci\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,"
    "\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":"
    "\"get_time\",\"arguments\":\"{\\\"tz\\\":\"}}]},"
    "\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
    "\"function\":{\"arguments\":\"ty\\\": \\\"Paris\\\"}\"}},{\"index\":1,"
    "\"function\":{\"arguments\":\"\\\"CET\\\"}\"}}]},"
    "\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
    "\"tool_calls\"}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":80,"
    "\"completion_tokens\":40}}\n\n"
    "data: [DONE]\n\n";

START_TEST(test_openai_tools)
{
	struct llm_result res;

	res = run_all("openai", oa_tools, LLM_DONE, "",
	    "call_a get_weather {\"city\": \"Paris\"};"
	    "call_b get_time {\"tz\":\"CET\"};");
	ck_assert_str_eq(res.stop_reason, "tool_calls");
	ck_assert_uint_eq(res.usage.input_tokens, 80);
	ck_assert_uint_eq(res.usage.output_tokens, 40);
}
END_TEST

START_TEST(test_openai_tools_order)
{
	/* Index 1 seen first; emitted in index order; no id, no args. */
	run_all("openai",
	    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":["
	    "{\"index\":1,\"function\":{\"name\":\"b\"}},"
	    "{\"index\":0,\"id\":\"x\",\"function\":{\"name\":\"a\","
	    "\"arguments\":\"{}\"}}]}}]}\n\n"
	    "data: {\"choices\":[{\"index\":0,\"delta\":{},"
	    "\"finish_reason\":\"tool_calls\"}]}\n\n"
	    "data: [DONE]\n\n", LLM_DONE, "", "x a {};call_1 b {};");
}
END_TEST

START_TEST(test_openai_finish_reasons)
{
	static const char *const in[][2] = {
		{ "length", "length" },
		{ "content_filter", "content_filter" },
		{ "tool_calls", "tool_calls" },
		{ "stop", "stop" },
		{ "something_new", "something_new" },
	};
	struct llm_result res;
	char buf[512];
	size_t i;

	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		snprintf(buf, sizeof(buf), "data: {\"choices\":[{\"index\":0,"
		    "\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n"
		    "data: {\"choices\":[{\"index\":0,\"delta\":{},"
		    "\"finish_reason\":\"%s\"}]}\n\ndata: [DONE]\n\n", in[i][0]);
		res = run_all("openai", buf, LLM_DONE, "x", "");
		ck_assert_str_eq(res.stop_reason, in[i][1]);
	}
	/* The older function_call is tool call 0. */
	res = run_all("openai",
	    "data: {\"choices\":[{\"index\":0,\"delta\":{\"function_call\":"
	    "{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}}]}\n\n"
	    "data: {\"choices\":[{\"index\":0,\"delta\":{\"function_call\":"
	    "{\"arguments\":\":1}\"}}}]}\n\n"
	    "data: {\"choices\":[{\"index\":0,\"delta\":{},"
	    "\"finish_reason\":\"function_call\"}]}\n\n"
	    "data: [DONE]\n\n", LLM_DONE, "", "call_0 f {\"a\":1};");
	ck_assert_str_eq(res.stop_reason, "tool_calls");
}
END_TEST

START_TEST(test_openai_errors)
{
	struct llm_result res;

	/* An error chunk mid-stream. */
	res = run_all("openai",
	    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}"
	    "\n\ndata: {\"error\":{\"message\":\"The server had an error\","
	    "\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"
	    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"no\"}}]}"
	    "\n\n", LLM_FAIL, "Hi", "");
	ck_assert_str_eq(res.err_type, "server_error");
	ck_assert_str_eq(res.err_msg, "The server had an error");

	/* Cut short: before the finish, and a finish without [DONE]. */
	res = run_all("openai",
	    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}"
	    "\n\n", LLM_FAIL, "Hi", "");
	ck_assert_str_eq(res.err_type, "");
	ck_assert_ptr_nonnull(strstr(res.err_msg, "ended"));
	res = run_all("openai",
	    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},"
	    "\"finish_reason\":\"stop\"}]}\n\n", LLM_DONE, "Hi", "");
	ck_assert_str_eq(res.stop_reason, "stop");
	/* An event still in the buffer at the end is not seen. */
	run_all("openai", "data: [DONE]", LLM_FAIL, "", "");

	/* Not JSON. */
	res = run_all("openai", "data: {\"choices\":\n\n", LLM_FAIL, "", "");
	ck_assert_ptr_nonnull(strstr(res.err_msg, "not JSON"));
	/* Odd but valid shapes change nothing. */
	run_all("openai", "data: 5\n\ndata: {\"choices\":7}\n\n"
	    "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"z\"}}]}"
	    "\n\ndata: {\"choices\":[{\"delta\":{\"content\":7,"
	    "\"tool_calls\":5}}]}\n\ndata: [DONE]\n\n", LLM_DONE, "", "");
	/* Nothing at all. */
	run_all("openai", "", LLM_FAIL, "", "");
}
END_TEST

START_TEST(test_openai_limits)
{
	char *in, *p;
	struct llm_result res;
	struct out o;
	int i;

	in = malloc(200 * 100);
	ck_assert_ptr_nonnull(in);
	p = in;
	for (i = 0; i <= LLM_MAX_TOOLS; i++)
		p += sprintf(p, "data: {\"choices\":[{\"index\":0,\"delta\":"
		    "{\"tool_calls\":[{\"index\":%d,\"function\":"
		    "{\"name\":\"f\"}}]}}]}\n\n", i);
	ck_assert_int_eq(run("openai", in, 0, 0, &o, &res), LLM_FAIL);
	ck_assert_ptr_nonnull(strstr(res.err_msg, "tool calls"));
	ck_assert_int_eq(o.ntools, 0);
	free(in);

	/* One event past LLM_MAX_EVENT. */
	in = malloc(LLM_MAX_EVENT + 64);
	ck_assert_ptr_nonnull(in);
	memcpy(in, "data: ", 6);
	memset(in + 6, 'a', LLM_MAX_EVENT + 10);
	strcpy(in + 6 + LLM_MAX_EVENT + 10, "\n\n");
	ck_assert_int_eq(run("openai", in, 4096, 0, &o, &res), LLM_FAIL);
	ck_assert_ptr_nonnull(strstr(res.err_msg, "passed"));
	free(in);
}
END_TEST

/* --- Anthropic --- */

static const char an_text[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
    "\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":"
    "\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,"
    "\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
    "{\"type\":\"text\",\"text\":\"\"}}\n\n"
    "event: ping\n"
    "data: {\"type\": \"ping\"}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
    "{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
    "{\"type\":\"text_delta\",\"text\":\"!\\nBye \\ud83d\\ude00\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
    "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}"
    "\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

START_TEST(test_anthropic_text)
{
	struct llm_result res;

	res = run_all("anthropic", an_text, LLM_DONE,
	    "Hello!\nBye \xf0\x9f\x98\x80", "");
	ck_assert_str_eq(res.stop_reason, "stop");
	ck_assert_uint_eq(res.usage.input_tokens, 25);
	ck_assert_uint_eq(res.usage.output_tokens, 15);
}
END_TEST

static const char an_tools[] =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"usage\":"
    "{\"input_tokens\":472,\"output_tokens\":2}}}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
    "{\"type\":\"text\",\"text\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
    "{\"type\":\"text_delta\",\"text\":\"Let me check.\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":"
    "{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"get_weather\","
    "\"input\":{}}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
    "{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
    "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"location\\\":\"}}"
    "\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
    "{\"type\":\"input_json_delta\",\"partial_json\":\" \\\"SF\\\"}\"}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
    "event: content_block_start\n"
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":"
    "{\"type\":\"tool_use\",\"id\":\"toolu_02\",\"name\":\"now\","
    "\"input\":{}}}\n\n"
    "event: content_block_stop\n"
    "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
    "\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}"
    "\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

START_TEST(test_anthropic_tools)
{
	struct llm_result res;

	res = run_all("anthropic", an_tools, LLM_DONE, "Let me check.",
	    "toolu_01 get_weather {\"location\": \"SF\"};toolu_02 now {};");
	ck_assert_str_eq(res.stop_reason, "tool_calls");
	ck_assert_uint_eq(res.usage.input_tokens, 472);
	ck_assert_uint_eq(res.usage.output_tokens, 89);
}
END_TEST

START_TEST(test_anthropic_stops_errors)
{
	struct llm_result res;

	res = run_all("anthropic",
	    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"
	    "{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":3}}"
	    "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	    LLM_DONE, "", "");
	ck_assert_str_eq(res.stop_reason, "length");
	ck_assert_uint_eq(res.usage.output_tokens, 3);

	/* An overloaded error inside a 200 stream, after some text. */
	res = run_all("anthropic",
	    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
	    "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	    "event: error\ndata: {\"type\":\"error\",\"error\":{\"details\":null,"
	    "\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	    LLM_FAIL, "Hi", "");
	ck_assert_str_eq(res.err_type, "overloaded_error");
	ck_assert_str_eq(res.err_msg, "Overloaded");

	/* Cut before message_stop, even after the stop reason. */
	res = run_all("anthropic", an_text + 0, LLM_DONE,
	    "Hello!\nBye \xf0\x9f\x98\x80", "");
	res = run_all("anthropic",
	    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"
	    "{\"stop_reason\":\"end_turn\"}}\n\n", LLM_FAIL, "", "");
	ck_assert_ptr_nonnull(strstr(res.err_msg, "message_stop"));

	/* The data's type wins over the event name; junk is refused. */
	run_all("anthropic", "event: message_stop\ndata: {\"type\":\"ping\"}"
	    "\n\n", LLM_FAIL, "", "");
	run_all("anthropic", "event: ping\ndata: ping\n\n", LLM_FAIL, "", "");
	/* Deltas for blocks never started, odd shapes: ignored. */
	run_all("anthropic",
	    "data: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":"
	    "{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"
	    "data: {\"type\":\"content_block_start\",\"index\":\"x\","
	    "\"content_block\":{\"type\":\"thinking\"}}\n\n"
	    "data: {\"type\":\"content_block_delta\",\"delta\":7}\n\n"
	    "data: {\"type\":\"message_start\",\"message\":{\"usage\":"
	    "{\"input_tokens\":-4}}}\n\n"
	    "data: {\"type\":\"message_stop\"}\n\n", LLM_DONE, "", "");
	res = run_all("anthropic",
	    "data: {\"type\":\"content_block_start\",\"content_block\":"
	    "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\"}}\n\n",
	    LLM_FAIL, "", "");
	ck_assert_ptr_nonnull(strstr(res.err_msg, "index"));
}
END_TEST

START_TEST(test_error_json)
{
	struct llm_result r;

#define EJ(s)	llm_error_json((s), sizeof(s) - 1, &r)
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(EJ("{\"type\":\"error\",\"error\":{\"type\":"
	    "\"overloaded_error\",\"message\":\"Overloaded\"}}"), 1);
	ck_assert_str_eq(r.err_type, "overloaded_error");
	ck_assert_str_eq(r.err_msg, "Overloaded");
	ck_assert_int_eq(EJ("{\"error\":{\"message\":\"Rate limit\",\"type\":"
	    "null,\"code\":\"rate_limit_exceeded\"}}"), 1);
	ck_assert_str_eq(r.err_type, "rate_limit_exceeded");
	ck_assert_str_eq(r.err_msg, "Rate limit");
	ck_assert_int_eq(EJ("{\"error\":\"model not found\"}"), 1);
	ck_assert_str_eq(r.err_type, "");
	ck_assert_str_eq(r.err_msg, "model not found");
	ck_assert_int_eq(EJ("<html>Bad gateway</html>"), 0);
	ck_assert_int_eq(EJ("{\"detail\":\"x\"}"), 0);
	ck_assert_int_eq(llm_error_json("", 0, &r), 0);
#undef EJ
}
END_TEST

/* --- request bodies --- */


START_TEST(test_bodies)
{
	static const struct llm_msg msgs[] = {
		{ .role = "system", .content = "Be brief." },
		{ .role = "user", .content = "Hi" },
		{ .role = "assistant", .content = "" },
		{ .role = "system", .content = "Be kind." },
		{ .role = "user", .content = "Again \"quoted\"" },
	};
	struct cfg_provider *p;
	char *s;

	p = prov("openai", NULL);
	s = llm_openai_proto.body(p, msgs, 5, NULL, 0);
	ck_assert_str_eq(s, "{\"model\":\"m-1\",\"messages\":["
	    "{\"role\":\"system\",\"content\":\"Be brief.\"},"
	    "{\"role\":\"user\",\"content\":\"Hi\"},"
	    "{\"role\":\"assistant\",\"content\":\"\"},"
	    "{\"role\":\"system\",\"content\":\"Be kind.\"},"
	    "{\"role\":\"user\",\"content\":\"Again \\\"quoted\\\"\"}],"
	    "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
	free(s);
	p->max_tokens = 100;
	p->has_temperature = 1;
	p->temperature = 0.5;
	s = llm_openai_proto.body(p, msgs + 1, 1, NULL, 0);
	ck_assert_str_eq(s, "{\"model\":\"m-1\",\"messages\":["
	    "{\"role\":\"user\",\"content\":\"Hi\"}],\"stream\":true,"
	    "\"stream_options\":{\"include_usage\":true},\"max_tokens\":100,"
	    "\"temperature\":0.5}");
	free(s);

	p = prov("anthropic", NULL);
	s = llm_anthropic_proto.body(p, msgs, 5, NULL, 0);
	ck_assert_str_eq(s, "{\"model\":\"m-1\",\"max_tokens\":4096,"
	    "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},"
	    "{\"role\":\"user\",\"content\":\"Again \\\"quoted\\\"\"}],"
	    "\"system\":\"Be brief.\\n\\nBe kind.\",\"stream\":true}");
	free(s);
	p->max_tokens = 10;
	s = llm_anthropic_proto.body(p, msgs + 1, 1, NULL, 0);
	ck_assert_str_eq(s, "{\"model\":\"m-1\",\"max_tokens\":10,"
	    "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
	    "\"stream\":true}");
	free(s);
}
END_TEST

/* --- the libcurl path, against a fake server in this process --- */

/* One canned reply per connection, in order; the last one repeats. */
struct fake {
	struct event_base	*base;
	struct evconnlistener	*l;
	int			 port;
	const char *const	*replies;
	size_t			 nreplies;
	size_t			 served;
	char			 req[8192];	/* the last request */
	int			 stall;		/* never reply */
	int			 drip_ms;	/* after the reply, a keep-alive
						   comment this often, forever */
	struct fconn		*conns[16];
};

struct fconn {
	struct fake		*f;
	struct bufferevent	*bev;
	struct event		*tick;		/* drip */
	int			 slot;
};

static void
fc_free(struct fconn *fc)
{
	fc->f->conns[fc->slot] = NULL;
	if (fc->tick != NULL)
		event_free(fc->tick);
	bufferevent_free(fc->bev);
	free(fc);
}

static void
fc_drip(evutil_socket_t fd, short what, void *arg)
{
	struct fconn	*fc = arg;
	struct timeval	 tv;

	bufferevent_write(fc->bev, ": ping\n\n", 8);
	util_tv(&tv, fc->f->drip_ms);
	evtimer_add(fc->tick, &tv);
}

static void
fc_write(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		fc_free(arg);
}

static void
fc_event(struct bufferevent *bev, short what, void *arg)
{
	fc_free(arg);
}

static void
fc_read(struct bufferevent *bev, void *arg)
{
	struct fconn	*fc = arg;
	struct fake	*f = fc->f;
	struct evbuffer	*in = bufferevent_get_input(bev);
	struct evbuffer_ptr p;
	size_t		 n, head, clen = 0;
	const char	*cl, *r;
	char		*buf;

	n = evbuffer_get_length(in);
	p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (p.pos < 0)
		return;
	head = (size_t)p.pos + 4;
	buf = (char *)evbuffer_pullup(in, -1);
	if (n >= sizeof(f->req))
		n = sizeof(f->req) - 1;
	if ((cl = strcasestr(buf, "content-length:")) != NULL &&
	    (size_t)(cl - buf) < head)
		clen = strtoul(cl + 15, NULL, 10);
	if (evbuffer_get_length(in) < head + clen)
		return;
	memcpy(f->req, buf, n);
	f->req[n] = '\0';
	evbuffer_drain(in, head + clen);
	if (f->stall)
		return;
	r = f->replies[f->served < f->nreplies ? f->served : f->nreplies - 1];
	f->served++;
	bufferevent_write(bev, r, strlen(r));
	if (f->drip_ms > 0) {
		fc->tick = evtimer_new(f->base, fc_drip, fc);
		fc_drip(-1, 0, fc);
		bufferevent_setcb(bev, NULL, NULL, fc_event, fc);
		return;
	}
	bufferevent_setcb(bev, NULL, fc_write, fc_event, fc);
}

static void
fake_accept(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct fconn *fc = calloc(1, sizeof(*fc));
	struct fake *f = arg;
	struct bufferevent *bev;
	int i;

	ck_assert_ptr_nonnull(fc);
	fc->f = f;
	for (i = 0; i < 16 && f->conns[i] != NULL; i++)
		;
	ck_assert_int_lt(i, 16);
	f->conns[i] = fc;
	fc->slot = i;
	bev = bufferevent_socket_new(evconnlistener_get_base(l), fd,
	    BEV_OPT_CLOSE_ON_FREE);
	fc->bev = bev;
	bufferevent_setcb(bev, fc_read, NULL, fc_event, fc);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void
fake_init(struct fake *f, const char *const *replies, size_t n)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	memset(f, 0, sizeof(*f));
	f->base = event_base_new();
	f->replies = replies;
	f->nreplies = n;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->l = evconnlistener_new_bind(f->base, fake_accept, f,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
	    (struct sockaddr *)&sin, sizeof(sin));
	ck_assert_ptr_nonnull(f->l);
	getsockname(evconnlistener_get_fd(f->l), (struct sockaddr *)&sin, &len);
	f->port = ntohs(sin.sin_port);
}

static void
fake_free(struct fake *f)
{
	int i;

	for (i = 0; i < 16; i++)
		if (f->conns[i] != NULL)
			fc_free(f->conns[i]);
	if (f->l != NULL)
		evconnlistener_free(f->l);
	event_base_free(f->base);
}

/* Runs one call to the fake server; the loop ends on done or error. */
static void
fake_run_with(struct fake *f, struct cfg_provider *p, struct out *o,
    const struct llm_msg *msgs, size_t n, const struct llm_tool_def *tools,
    size_t ntools)
{
	struct llm_ctx *ctx;
	struct timeval tv = { 20, 0 };

	memset(o, 0, sizeof(*o));
	o->base = f->base;
	ctx = llm_ctx_new(f->base);
	ck_assert_ptr_nonnull(ctx);
	o->call = llm_start(ctx, p, msgs, n, tools, ntools, &ocbs, o);
	ck_assert_ptr_nonnull(o->call);
	event_base_loopexit(f->base, &tv);
	event_base_dispatch(f->base);
	if (o->call != NULL)
		llm_cancel(o->call);
	llm_ctx_free(ctx);
	fake_free(f);
}

static void
fake_run(struct fake *f, struct cfg_provider *p, struct out *o)
{
	static const struct llm_msg msg = { .role = "user",
	    .content = "hello" };

	fake_run_with(f, p, o, &msg, 1, NULL, 0);
}

static char *
url_of(struct fake *f)
{
	static char url[64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/", f->port);
	return url;
}

#define SSE_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" \
	"Connection: close\r\n\r\n"

START_TEST(test_http_openai)
{
	static const char *const r[] = { SSE_HEAD "data: {\"choices\":[{"
	    "\"index\":0,\"delta\":{\"content\":\"Hi there\"},"
	    "\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":"
	    "{\"prompt_tokens\":1000000,\"completion_tokens\":500000}}\n\n"
	    "data: [DONE]\n\n" };
	struct fake f;
	struct out o;
	struct cfg_provider *p;

	fake_init(&f, r, 1);
	p = prov("openai", url_of(&f));
	p->api_key_env = (char *)"PARLEY_TEST_KEY";
	p->price_input = 2.5;
	p->price_output = 10;
	setenv("PARLEY_TEST_KEY", "sk-test-123", 1);
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.done, 1);
	ck_assert_int_eq(o.errors, 0);
	ck_assert_str_eq(o.text, "Hi there");
	ck_assert_str_eq(o.stop, "stop");
	ck_assert_uint_eq(o.usage.input_tokens, 1000000);
	ck_assert(o.usage.cost > 7.4999 && o.usage.cost < 7.5001);
	ck_assert_ptr_nonnull(strstr(f.req, "POST /v1/chat/completions "));
	ck_assert_ptr_nonnull(strstr(f.req,
	    "Authorization: Bearer sk-test-123\r\n"));
	ck_assert_ptr_nonnull(strstr(f.req, "\"stream\":true"));
	unsetenv("PARLEY_TEST_KEY");

	/* A key variable that is not set is an error, not a keyless call. */
	fake_init(&f, r, 1);
	p->url = url_of(&f);
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_ptr_nonnull(strstr(o.err, "PARLEY_TEST_KEY"));
	ck_assert_uint_eq(f.served, 0);
}
END_TEST

START_TEST(test_http_retry)
{
	static const char *const r[] = {
	    "HTTP/1.1 529 Overloaded\r\nContent-Type: application/json\r\n"
	    "retry-after-ms: 10\r\nContent-Length: 75\r\n"
	    "Connection: close\r\n\r\n"
	    "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
	    "\"message\":\"Overloaded\"}}",
	    SSE_HEAD "event: error\ndata: {\"type\":\"error\",\"error\":"
	    "{\"type\":\"api_error\",\"message\":\"boom\"}}\n\n",
	    SSE_HEAD "event: message_start\ndata: {\"type\":\"message_start\","
	    "\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n"
	    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\""
	    ",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}"
	    "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	};
	struct fake f;
	struct out o;
	struct cfg_provider *p;

	fake_init(&f, r, 3);
	p = prov("anthropic", url_of(&f));
	p->url[strlen(p->url) - 4] = '\0';	/* no /v1 for anthropic */
	p->api_key_env = (char *)"PARLEY_TEST_KEY";
	setenv("PARLEY_TEST_KEY", "sk-ant", 1);
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.done, 1);
	ck_assert_int_eq(o.retrying, 0);
	ck_assert_str_eq(o.text, "ok");
	ck_assert_uint_eq(f.served, 3);
	ck_assert_ptr_nonnull(strstr(f.req, "POST /v1/messages "));
	ck_assert_ptr_nonnull(strstr(f.req, "x-api-key: sk-ant\r\n"));
	ck_assert_ptr_nonnull(strstr(f.req, "anthropic-version: 2023-06-01"));

	/* Out of retries: the last error is reported. */
	fake_init(&f, r, 1);
	p = prov("anthropic", url_of(&f));
	p->max_retries = 1;
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 2);
	ck_assert_str_eq(o.err, "anthropic: 529 overloaded_error: Overloaded");
	unsetenv("PARLEY_TEST_KEY");
}
END_TEST

START_TEST(test_http_no_retry)
{
	static const char *const r400[] = {
	    "HTTP/1.1 400 Bad Request\r\nContent-Length: 50\r\n"
	    "Connection: close\r\n\r\n"
	    "{\"error\":{\"message\":\"bad model\",\"type\":\"invalid\"}}",
	};
	static const char *const r500[] = {
	    "HTTP/1.1 500 Oops\r\nx-should-retry: false\r\n"
	    "Content-Length: 9\r\nConnection: close\r\n\r\n<b>no</b>",
	};
	static const char *const r400yes[] = {
	    "HTTP/1.1 400 Bad\r\nx-should-retry: true\r\nretry-after: 0\r\n"
	    "Content-Length: 0\r\nConnection: close\r\n\r\n",
	};
	static const char *const r200json[] = {
	    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	    "Connection: close\r\n\r\n{\"error\":\"model 'x' not found\"}",
	};
	struct fake f;
	struct out o;

	fake_init(&f, r200json, 1);
	fake_run(&f, prov("openai", url_of(&f)), &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 1);
	ck_assert_str_eq(o.err, "openai: model 'x' not found");

	fake_init(&f, r400, 1);
	fake_run(&f, prov("openai", url_of(&f)), &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 1);
	ck_assert_str_eq(o.err, "openai: 400 invalid: bad model");

	fake_init(&f, r500, 1);
	fake_run(&f, prov("openai", url_of(&f)), &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 1);
	ck_assert_str_eq(o.err, "openai: 500: <b>no</b>");

	fake_init(&f, r400yes, 1);
	fake_run(&f, prov("openai", url_of(&f)), &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 3);
	ck_assert_str_eq(o.err, "openai: 400");
}
END_TEST

/* Tokens, then a break: retrying, then the whole reply again. */
START_TEST(test_http_retrying)
{
	static const char *const r[] = {
	    SSE_HEAD "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
	    "\"par\"}}]}\n\n",
	    SSE_HEAD "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
	    "\"full\"},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n",
	};
	struct fake f;
	struct out o;
	struct llm_cbs nore = ocbs;
	struct llm_ctx *ctx;
	static const struct llm_msg msg = { .role = "user", .content = "x" };
	struct timeval tv = { 10, 0 };

	fake_init(&f, r, 2);
	fake_run(&f, prov("openai", url_of(&f)), &o);
	ck_assert_int_eq(o.done, 1);
	ck_assert_int_eq(o.retrying, 1);
	ck_assert_ptr_nonnull(strstr(o.why, "ended"));
	ck_assert_str_eq(o.text, "full");
	ck_assert_str_eq(o.stop, "length");

	/* Without a retrying callback, a break after tokens is final. */
	fake_init(&f, r, 2);
	nore.retrying = NULL;
	memset(&o, 0, sizeof(o));
	o.base = f.base;
	ctx = llm_ctx_new(f.base);
	o.call = llm_start(ctx, prov("openai", url_of(&f)), &msg, 1, NULL, 0,
	    &nore, &o);
	event_base_loopexit(f.base, &tv);
	event_base_dispatch(f.base);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 1);
	ck_assert_str_eq(o.text, "par");
	llm_ctx_free(ctx);
	fake_free(&f);
}
END_TEST

START_TEST(test_http_timeout_cancel)
{
	static const char *const r[] = {
	    SSE_HEAD "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
	    "\"a\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":"
	    "{\"content\":\"b\"}}]}\n\n",
	};
	struct fake f;
	struct out o;
	struct cfg_provider *p;

	/* No first byte. */
	fake_init(&f, r, 1);
	f.stall = 1;
	p = prov("openai", url_of(&f));
	p->timeout_ms = 200;
	p->max_retries = 0;
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_str_eq(o.err, "timeout: no first byte within 200ms");

	/* Cancel from inside a token callback: nothing more comes. */
	fake_init(&f, r, 1);
	p = prov("openai", url_of(&f));
	memset(&o, 0, sizeof(o));
	{
		static const struct llm_msg msg = { .role = "user",
		    .content = "x" };
		struct llm_ctx *ctx = llm_ctx_new(f.base);

		o.base = f.base;
		o.cancel_at = 1;
		o.call = llm_start(ctx, p, &msg, 1, NULL, 0, &ocbs, &o);
		event_base_dispatch(f.base);
		ck_assert_int_eq(o.ntok, 1);
		ck_assert_int_eq(o.done + o.errors, 0);
		llm_ctx_free(ctx);
	}
	fake_free(&f);

	/* Connection refused, retried, then reported. */
	fake_init(&f, r, 1);
	p = prov("openai", url_of(&f));
	evconnlistener_free(f.l);
	f.l = NULL;
	p->max_retries = 1;
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_ptr_nonnull(strstr(o.err, "openai: connection error: "));
}
END_TEST

/* Pings forever, and a reply without end: each attempt has its bounds. */
START_TEST(test_http_bounds)
{
	static const char *const r[] = {
	    SSE_HEAD "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
	    "\"a\"}}]}\n\n",
	};
	static const char *const big[] = {
	    SSE_HEAD "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
	    "\"0123456789\"}}]}\n\ndata: {\"choices\":[{\"index\":0,"
	    "\"delta\":{\"content\":\"0123456789\"}}]}\n\ndata: {\"choices\":"
	    "[{\"index\":0,\"delta\":{\"content\":\"0123456789\"}}]}\n\n"
	    "data: [DONE]\n\n",
	};
	struct fake f;
	struct out o;
	struct cfg_provider *p;
	uint64_t t0;

	/* The wait for a byte never passes the deadline. */
	ck_assert_uint_eq(run_wait_ms(5000, 100, 1100), 1000);
	ck_assert_uint_eq(run_wait_ms(200, 100, 1100), 200);
	ck_assert_uint_eq(run_wait_ms(200, 1100, 1100), 0);
	ck_assert_uint_eq(run_wait_ms(200, 2000, 1100), 0);

	/* Keep-alive comments every 50ms reset the idle timeout, not the
	 * deadline; it is retried like the other timeouts. */
	fake_init(&f, r, 1);
	f.drip_ms = 50;
	p = prov("openai", url_of(&f));
	p->idle_timeout_ms = 1000;
	p->attempt_timeout_ms = 400;
	p->max_retries = 1;
	t0 = util_mono_ms();
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 2);
	ck_assert_uint_ge(util_mono_ms() - t0, 800);
	ck_assert_str_eq(o.err, "openai: the reply did not end within "
	    "attempt-timeout 400ms (raise it in provider t for longer "
	    "replies)");

	/* Past max-reply: not retried, the stream stops at once. */
	fake_init(&f, big, 1);
	p = prov("anthropic", url_of(&f));
	p->max_reply = 100;
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.errors, 1);
	ck_assert_uint_eq(f.served, 1);
	ck_assert_int_eq(o.done, 0);
	ck_assert_str_eq(o.err, "anthropic: the reply is larger than "
	    "max-reply 100 (raise it in provider t for longer replies)");

	/* Within both, the same reply completes. */
	fake_init(&f, big, 1);
	p = prov("openai", url_of(&f));
	p->max_reply = 1024;
	p->attempt_timeout_ms = 5000;
	fake_run(&f, p, &o);
	ck_assert_int_eq(o.errors, 0);
	ck_assert_int_eq(o.done, 1);
	ck_assert_str_eq(o.text, "012345678901234567890123456789");
}
END_TEST

/* --- requests with tools, tool calls and tool results --- */

/* Long bodies: the failure message names only what was sent. */
#define ck_body_eq(got, want) \
	ck_assert_msg(strcmp((got), (want)) == 0, "body was %s", (got))

static const struct llm_tool_call tl_calls[] = {
	{ "call_a", "srv__add", "{\"a\":1,\"b\":2}" },
	{ "call_b", "srv__now", "" },
};

static const struct llm_tool_call tl_badcall[] = {
	{ "toolu_9", "srv__add", "{\"a\":" },
};

/* A two-round tool loop as the session would hand it over. */
static const struct llm_msg tl_msgs[] = {
	{ .role = "system", .content = "Use tools." },
	{ .role = "user", .content = "Add 1 and 2, and the time?" },
	{ .role = "assistant", .content = "", .calls = tl_calls, .ncalls = 2 },
	{ .role = "tool", .content = "3", .tool_call_id = "call_a",
	    .tool_name = "srv__add" },
	{ .role = "tool", .content = "no clock", .tool_call_id = "call_b",
	    .tool_name = "srv__now", .is_error = 1 },
	{ .role = "assistant", .content = "Trying again.",
	    .calls = tl_badcall, .ncalls = 1 },
	{ .role = "tool", .content = "", .tool_call_id = "toolu_9",
	    .tool_name = "srv__add" },
	{ .role = "assistant", .content = "It is 3." },
	{ .role = "user", .content = "Thanks" },
};


START_TEST(test_bodies_tools_openai)
{
	struct cfg_provider *p = prov("openai", NULL);
	char *s;

	s = llm_openai_proto.body(p, tl_msgs, 9, tl_defs, 3);
	ck_assert_ptr_nonnull(s);
	ck_body_eq(s, "{\"model\":\"m-1\",\"messages\":["
	    "{\"role\":\"system\",\"content\":\"Use tools.\"},"
	    "{\"role\":\"user\",\"content\":\"Add 1 and 2, and the time?\"},"
	    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
	    "{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":"
	    "\"srv__add\",\"arguments\":\"{\\\"a\\\":1,\\\"b\\\":2}\"}},"
	    "{\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":"
	    "\"srv__now\",\"arguments\":\"{}\"}}]},"
	    "{\"role\":\"tool\",\"tool_call_id\":\"call_a\",\"content\":\"3\"},"
	    "{\"role\":\"tool\",\"tool_call_id\":\"call_b\",\"content\":"
	    "\"no clock\"},"
	    "{\"role\":\"assistant\",\"content\":\"Trying again.\","
	    "\"tool_calls\":[{\"id\":\"toolu_9\",\"type\":\"function\","
	    "\"function\":{\"name\":\"srv__add\",\"arguments\":"
	    "\"{\\\"a\\\":\"}}]},"
	    "{\"role\":\"tool\",\"tool_call_id\":\"toolu_9\",\"content\":\"\"},"
	    "{\"role\":\"assistant\",\"content\":\"It is 3.\"},"
	    "{\"role\":\"user\",\"content\":\"Thanks\"}],"
	    "\"tools\":["
	    "{\"type\":\"function\",\"function\":{\"name\":\"srv__add\","
	    "\"description\":\"Adds two numbers.\",\"parameters\":{\"type\":"
	    "\"object\",\"properties\":{\"a\":{\"type\":\"number\"}}}}},"
	    "{\"type\":\"function\",\"function\":{\"name\":\"srv__now\","
	    "\"parameters\":{\"type\":\"object\"}}},"
	    "{\"type\":\"function\",\"function\":{\"name\":\"srv__bad\","
	    "\"description\":\"x\",\"parameters\":{\"type\":\"object\"}}}],"
	    "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
	free(s);

	/* No tools: no "tools" key at all, even with a non-NULL array. */
	s = llm_openai_proto.body(p, tl_msgs + 1, 1, tl_defs, 0);
	ck_assert_ptr_null(strstr(s, "tools"));
	free(s);
}
END_TEST

START_TEST(test_bodies_tools_anthropic)
{
	static const struct llm_msg tail[] = {
		/* A tool result that follows a user turn starts its own. */
		{ .role = "user", .content = "go" },
		{ .role = "tool", .content = "r", .tool_call_id = "t1" },
		{ .role = "system", .content = "" },
		{ .role = "tool", .content = "s", .tool_call_id = "t2" },
	};
	struct cfg_provider *p = prov("anthropic", NULL);
	char *s;

	s = llm_anthropic_proto.body(p, tl_msgs, 9, tl_defs, 3);
	ck_assert_ptr_nonnull(s);
	ck_body_eq(s, "{\"model\":\"m-1\",\"max_tokens\":4096,"
	    "\"messages\":["
	    "{\"role\":\"user\",\"content\":\"Add 1 and 2, and the time?\"},"
	    "{\"role\":\"assistant\",\"content\":["
	    "{\"type\":\"tool_use\",\"id\":\"call_a\",\"name\":\"srv__add\","
	    "\"input\":{\"a\":1,\"b\":2}},"
	    "{\"type\":\"tool_use\",\"id\":\"call_b\",\"name\":\"srv__now\","
	    "\"input\":{}}]},"
	    "{\"role\":\"user\",\"content\":["
	    "{\"type\":\"tool_result\",\"tool_use_id\":\"call_a\","
	    "\"content\":\"3\"},"
	    "{\"type\":\"tool_result\",\"tool_use_id\":\"call_b\","
	    "\"content\":\"no clock\",\"is_error\":true}]},"
	    "{\"role\":\"assistant\",\"content\":["
	    "{\"type\":\"text\",\"text\":\"Trying again.\"},"
	    "{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"srv__add\","
	    "\"input\":{}}]},"
	    "{\"role\":\"user\",\"content\":["
	    "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_9\"}]},"
	    "{\"role\":\"assistant\",\"content\":\"It is 3.\"},"
	    "{\"role\":\"user\",\"content\":\"Thanks\"}],"
	    "\"system\":\"Use tools.\","
	    "\"tools\":["
	    "{\"name\":\"srv__add\",\"description\":\"Adds two numbers.\","
	    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"a\":"
	    "{\"type\":\"number\"}}}},"
	    "{\"name\":\"srv__now\",\"input_schema\":{\"type\":\"object\"}},"
	    "{\"name\":\"srv__bad\",\"description\":\"x\",\"input_schema\":"
	    "{\"type\":\"object\"}}],"
	    "\"stream\":true}");
	free(s);

	s = llm_anthropic_proto.body(p, tail, 4, NULL, 0);
	ck_assert_str_eq(s, "{\"model\":\"m-1\",\"max_tokens\":4096,"
	    "\"messages\":[{\"role\":\"user\",\"content\":\"go\"},"
	    "{\"role\":\"user\",\"content\":["
	    "{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
	    "\"content\":\"r\"},"
	    "{\"type\":\"tool_result\",\"tool_use_id\":\"t2\","
	    "\"content\":\"s\"}]}],\"stream\":true}");
	free(s);
}
END_TEST

/* The tools reach the wire through llm_start and the HTTP path. */
START_TEST(test_http_tools)
{
	static const char *const r[] = { SSE_HEAD "data: {\"choices\":[{"
	    "\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":"
	    "\"call_x\",\"function\":{\"name\":\"srv__add\",\"arguments\":"
	    "\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
	    "data: [DONE]\n\n" };
	struct fake f;
	struct out o;

	fake_init(&f, r, 1);
	fake_run_with(&f, prov("openai", url_of(&f)), &o, tl_msgs + 1, 2,
	    tl_defs, 1);
	ck_assert_int_eq(o.done, 1);
	ck_assert_str_eq(o.stop, "tool_calls");
	ck_assert_str_eq(o.tools, "call_x srv__add {};");
	ck_assert_ptr_nonnull(strstr(f.req, "\"tools\":[{\"type\":"
	    "\"function\",\"function\":{\"name\":\"srv__add\""));
	ck_assert_ptr_nonnull(strstr(f.req, "\"tool_calls\":[{\"id\":"
	    "\"call_a\""));
	ck_assert_ptr_null(strstr(f.req, "srv__now\",\"parameters"));

	fake_init(&f, r, 1);
	fake_run_with(&f, prov("anthropic", url_of(&f)), &o, tl_msgs, 5,
	    tl_defs, 2);
	ck_assert_int_eq(o.errors, 1);	/* an OpenAI stream is not one */
	ck_assert_ptr_nonnull(strstr(f.req, "POST /v1/v1/messages "));
	ck_assert_ptr_nonnull(strstr(f.req, "\"input_schema\""));
	ck_assert_ptr_nonnull(strstr(f.req, "\"tool_result\""));
}
END_TEST

static Suite *
llm_suite(void)
{
	Suite *s = suite_create("llm");
	TCase *tc = tcase_create("decode");
	TCase *th = tcase_create("http");

	tcase_add_test(tc, test_reasoning);
	tcase_add_test(tc, test_openai_text);
	tcase_add_test(tc, test_openai_tools);
	tcase_add_test(tc, test_openai_tools_order);
	tcase_add_test(tc, test_openai_finish_reasons);
	tcase_add_test(tc, test_openai_errors);
	tcase_add_test(tc, test_openai_limits);
	tcase_add_test(tc, test_anthropic_text);
	tcase_add_test(tc, test_anthropic_tools);
	tcase_add_test(tc, test_anthropic_stops_errors);
	tcase_add_test(tc, test_error_json);
	tcase_add_test(tc, test_bodies);
	tcase_add_test(tc, test_bodies_tools_openai);
	tcase_add_test(tc, test_bodies_tools_anthropic);
	suite_add_tcase(s, tc);
	tcase_set_timeout(th, 30);
	tcase_add_test(th, test_http_openai);
	tcase_add_test(th, test_http_retry);
	tcase_add_test(th, test_http_no_retry);
	tcase_add_test(th, test_http_retrying);
	tcase_add_test(th, test_http_timeout_cancel);
	tcase_add_test(th, test_http_bounds);
	tcase_add_test(th, test_http_tools);
	suite_add_tcase(s, th);
	return s;
}

int main(void);

int
main(void)
{
	return check_run(llm_suite());
}
