/*
 * A provider's streamed reply (workers/llm_openai.c, llm_anthropic.c,
 * through llm_stream_* in workers/llm.c): the response body as the
 * network delivers it.  Built twice, with LLM_TYPE "openai" and
 * "anthropic".  Checks that tokens are never empty, each tool call has
 * strings, the decoder's verdict sticks, the result's strings are
 * terminated within their arrays, and the reply is the same whether the
 * bytes come cut or whole.
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
	size_t		 text;
	int		 tools;
	int		 thoughts;
	uint64_t	 sum;	/* of everything delivered, in order */
};

static void
on_token(void *arg, const char *text, size_t len)
{
	struct seen *s = arg;

	FUZZ_CHECK(text != NULL && len > 0);
	s->text += len;
	fuzz_sum(&s->sum, text, len);
}

static void
on_tool(void *arg, const char *id, const char *name, const char *args)
{
	struct seen *s = arg;

	FUZZ_CHECK(id != NULL && name != NULL && args != NULL);
	FUZZ_CHECK(strlen(args) <= LLM_MAX_ARGS);
	s->tools++;
	FUZZ_CHECK(s->tools <= LLM_MAX_TOOLS);
	fuzz_sum(&s->sum, id, strlen(id) + 1);
	fuzz_sum(&s->sum, name, strlen(name) + 1);
	fuzz_sum(&s->sum, args, strlen(args) + 1);
}

static void
on_thought(void *arg, const char *text, size_t len)
{
	struct seen *s = arg;

	FUZZ_CHECK(text != NULL && len <= LLM_MAX_REASON);
	s->thoughts++;
	fuzz_sum(&s->sum, "T", 1);
	fuzz_sum(&s->sum, text, len);
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

/* Feeds what cut hands out to a decoder; a digest of what it delivered. */
static uint64_t
run(struct fuzz_cut *cut)
{
	static const struct llm_cbs cbs = {
		.token = on_token, .done = on_done, .error = on_error,
		.tool_call = on_tool, .thought = on_thought,
	};
	const struct llm_result	*res;
	struct llm_stream	*st;
	struct seen		 seen;
	const uint8_t		*frag;
	size_t			 n;
	int			 r = LLM_MORE, end;

	memset(&seen, 0, sizeof(seen));
	seen.sum = 14695981039346656037ULL;
	if ((st = llm_stream_new(LLM_TYPE, &cbs, &seen)) == NULL)
		abort();
	while (r == LLM_MORE && (n = fuzz_cut_next(cut, &frag)) > 0) {
		r = llm_stream_feed(st, frag, n);
		FUZZ_CHECK(r == LLM_MORE || r == LLM_DONE || r == LLM_FAIL);
	}
	fuzz_cut_done(cut);
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
	fuzz_sum(&seen.sum, &end, sizeof(end));
	fuzz_sum(&seen.sum, &res->usage.input_tokens, sizeof(uint64_t));
	fuzz_sum(&seen.sum, &res->usage.output_tokens, sizeof(uint64_t));
	fuzz_sum(&seen.sum, res->stop_reason, strlen(res->stop_reason));
	fuzz_sum(&seen.sum, res->err_type, strlen(res->err_type));
	fuzz_sum(&seen.sum, res->err_msg, strlen(res->err_msg));
	llm_stream_free(st);
	return seen.sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FUZZ_CUT_TWICE(data, size, run);
	return 0;
}
