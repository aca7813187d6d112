/*
 * A provider's streamed reply (workers/llm_openai.c, llm_anthropic.c,
 * through llm_stream_* in workers/llm.c): the response body as the
 * network delivers it.  Built twice, with LLM_TYPE "openai" and
 * "anthropic".  Checks that tokens are never empty, each tool call has
 * strings, the decoder's verdict sticks, and the result's strings are
 * terminated within their arrays.
 */
#include "../workers/llm.c"
#include "../workers/llm_openai.c"
#include "../workers/llm_anthropic.c"
#include "../workers/llm_http.c"
#include "../workers/llm_script.c"

#include "fuzz.h"

#ifndef LLM_TYPE
#define LLM_TYPE	"openai"
#endif

struct seen {
	size_t	text;
	int	tools;
	int	thoughts;
};

static void
on_token(void *arg, const char *text, size_t len)
{
	struct seen *s = arg;

	FUZZ_CHECK(text != NULL && len > 0);
	s->text += len;
}

static void
on_tool(void *arg, const char *id, const char *name, const char *args)
{
	struct seen *s = arg;

	FUZZ_CHECK(id != NULL && name != NULL && args != NULL);
	FUZZ_CHECK(strlen(args) <= LLM_MAX_ARGS);
	s->tools++;
	FUZZ_CHECK(s->tools <= LLM_MAX_TOOLS);
}

static void
on_thought(void *arg, const char *text, size_t len)
{
	struct seen *s = arg;

	FUZZ_CHECK(text != NULL && len <= LLM_MAX_REASON);
	s->thoughts++;
}

static void
on_done(void *arg, const struct llm_usage *u, const char *stop)
{
	FUZZ_CHECK(!"a decoder never calls done");
}

static void
on_error(void *arg, const char *code, const char *msg)
{
	FUZZ_CHECK(!"a decoder never calls error");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct llm_cbs cbs = {
		.token = on_token, .done = on_done, .error = on_error,
		.tool_call = on_tool, .thought = on_thought,
	};
	const struct llm_result	*res;
	struct llm_stream	*st;
	struct seen		 seen;
	struct fuzz_cut		 cut;
	const uint8_t		*frag;
	size_t			 n;
	int			 r = LLM_MORE, end;

	fuzz_quiet();
	memset(&seen, 0, sizeof(seen));
	if ((st = llm_stream_new(LLM_TYPE, &cbs, &seen)) == NULL)
		abort();
	fuzz_cut_init(&cut, data, size);
	while (r == LLM_MORE && (n = fuzz_cut_next(&cut, &frag)) > 0) {
		r = llm_stream_feed(st, frag, n);
		FUZZ_CHECK(r == LLM_MORE || r == LLM_DONE || r == LLM_FAIL);
	}
	fuzz_cut_done(&cut);
	if (r != LLM_MORE)
		FUZZ_CHECK(llm_stream_feed(st, "data: x\n\n", 9) == r);
	end = llm_stream_end(st);
	FUZZ_CHECK(end == LLM_DONE || end == LLM_FAIL);
	if (r != LLM_MORE)
		FUZZ_CHECK(end == r);
	res = llm_stream_result(st);
	FUZZ_CHECK(memchr(res->stop_reason, '\0', sizeof(res->stop_reason)));
	FUZZ_CHECK(memchr(res->err_type, '\0', sizeof(res->err_type)));
	FUZZ_CHECK(memchr(res->err_msg, '\0', sizeof(res->err_msg)));
	llm_stream_free(st);
	return 0;
}
