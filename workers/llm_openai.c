/*
 * type openai: Chat Completions streaming, as OpenAI and the servers that
 * copy its API (vLLM, llama.cpp, Ollama, LiteLLM...) speak it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "llm.h"

/*
 * The body builders count on cJSON's add functions returning NULL when out
 * of memory: ok goes to 0 and the body is dropped rather than sent short.
 */
#define OK(x)	do { if ((x) == NULL) ok = 0; } while (0)

/* {"role":"assistant","content":<text or null>,"tool_calls":[...]} */
static cJSON *
openai_assistant_calls(const struct llm_msg *m)
{
	cJSON		*o, *a, *c, *fn = NULL;
	const char	*args;
	size_t		 i;
	int		 ok = 1;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	OK(cJSON_AddStringToObject(o, "role", "assistant"));
	if (m->content != NULL && *m->content != '\0')
		OK(cJSON_AddStringToObject(o, "content", m->content));
	else
		OK(cJSON_AddNullToObject(o, "content"));
	OK(a = cJSON_AddArrayToObject(o, "tool_calls"));
	for (i = 0; ok && i < m->ncalls; i++) {
		OK(c = cJSON_CreateObject());
		if (!ok || !cJSON_AddItemToArray(a, c)) {
			cJSON_Delete(c);
			ok = 0;
			break;
		}
		OK(cJSON_AddStringToObject(c, "id", m->calls[i].id ?
		    m->calls[i].id : ""));
		OK(cJSON_AddStringToObject(c, "type", "function"));
		OK(fn = cJSON_AddObjectToObject(c, "function"));
		if (!ok)
			break;
		OK(cJSON_AddStringToObject(fn, "name", m->calls[i].name ?
		    m->calls[i].name : ""));
		/* The API wants the arguments as a string holding JSON. */
		args = m->calls[i].args_json;
		OK(cJSON_AddStringToObject(fn, "arguments",
		    args != NULL && *args != '\0' ? args : "{}"));
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *
openai_msg(const struct llm_msg *m)
{
	cJSON	*o;
	int	 ok = 1;

	if (strcmp(m->role, "assistant") == 0 && m->ncalls > 0 &&
	    m->calls != NULL)
		return openai_assistant_calls(m);
	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	OK(cJSON_AddStringToObject(o, "role", m->role));
	if (strcmp(m->role, "tool") == 0)
		OK(cJSON_AddStringToObject(o, "tool_call_id",
		    m->tool_call_id ? m->tool_call_id : ""));
	OK(cJSON_AddStringToObject(o, "content", m->content ? m->content :
	    ""));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* "tools":[{"type":"function","function":{name,description,parameters}}] */
static int
openai_tools_req(cJSON *o, const struct llm_tool_def *tools, size_t ntools)
{
	cJSON	*a, *t, *fn;
	size_t	 i;
	int	 ok = 1;

	if (ntools == 0 || tools == NULL)
		return 1;
	if ((a = cJSON_AddArrayToObject(o, "tools")) == NULL)
		return 0;
	for (i = 0; ok && i < ntools; i++) {
		if ((t = cJSON_CreateObject()) == NULL)
			return 0;
		if (!cJSON_AddItemToArray(a, t)) {
			cJSON_Delete(t);
			return 0;
		}
		OK(cJSON_AddStringToObject(t, "type", "function"));
		if ((fn = cJSON_AddObjectToObject(t, "function")) == NULL)
			return 0;
		if (!llm_tool_def_json(fn, &tools[i], "parameters"))
			return 0;
	}
	return ok;
}

static char *
openai_body(const struct cfg_provider *p, const struct llm_msg *msgs,
    size_t n, const struct llm_tool_def *tools, size_t ntools)
{
	cJSON	*o, *a, *m, *so = NULL;
	char	*s = NULL;
	size_t	 i;
	int	 ok = 1;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (p->model != NULL)
		OK(cJSON_AddStringToObject(o, "model", p->model));
	OK(a = cJSON_AddArrayToObject(o, "messages"));
	for (i = 0; ok && i < n; i++) {
		OK(m = openai_msg(&msgs[i]));
		if (ok && !cJSON_AddItemToArray(a, m)) {
			cJSON_Delete(m);
			ok = 0;
		}
	}
	if (ok && !openai_tools_req(o, tools, ntools))
		ok = 0;
	OK(cJSON_AddBoolToObject(o, "stream", 1));
	OK(so = cJSON_AddObjectToObject(o, "stream_options"));
	if (ok)
		OK(cJSON_AddBoolToObject(so, "include_usage", 1));
	/* The reasoning models refuse max_tokens and any temperature. */
	if (p->max_tokens > 0)
		OK(cJSON_AddNumberToObject(o, llm_openai_reasoning_model(
		    p->model) ? "max_completion_tokens" : "max_tokens",
		    p->max_tokens));
	if (p->has_temperature && !llm_openai_reasoning_model(p->model))
		OK(cJSON_AddNumberToObject(o, "temperature", p->temperature));
	if (ok)
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

#undef OK

static const char *
oa_str(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static uint64_t
oa_count(const cJSON *o, const char *key)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0) ||
	    n->valuedouble > 1e15)
		return 0;
	return (uint64_t)n->valuedouble;
}

static int
openai_tools(struct llm_stream *st, const cJSON *tcs)
{
	const cJSON	*tc, *fn, *ix, *args;
	const char	*a;
	long		 index;
	int		 r = LLM_MORE;

	cJSON_ArrayForEach(tc, tcs) {
		ix = cJSON_GetObjectItemCaseSensitive(tc, "index");
		/* Without an index (some servers), the n-th entry is index n. */
		index = cJSON_IsNumber(ix) && ix->valuedouble >= 0 &&
		    ix->valuedouble < 1e9 ? (long)ix->valuedouble :
		    (long)(st->ntools);
		fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
		args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		a = cJSON_GetStringValue(args);
		r = llm_stream_tool(st, index, oa_str(tc, "id"), oa_str(fn, "name"),
		    a ? a : "", a ? strlen(a) : 0);
		if (r != LLM_MORE)
			break;
	}
	return r;
}

static int
openai_event(struct llm_stream *st, const char *type, const char *data,
    size_t len)
{
	cJSON		*o;
	const cJSON	*ch, *c0, *delta, *fr, *usage, *e, *fc;
	const char	*text, *a;
	int		 r = LLM_MORE;

	if (len == 6 && memcmp(data, "[DONE]", 6) == 0)
		return llm_stream_complete(st);
	if ((o = cJSON_ParseWithLength(data, len)) == NULL)
		return llm_stream_fail(st, NULL, "a stream chunk is "
		    "not JSON");
	e = cJSON_GetObjectItemCaseSensitive(o, "error");
	if (cJSON_IsObject(e) || cJSON_IsString(e)) {
		struct llm_result *res = &st->res;

		llm_error_json(data, len, res);
		if (res->err_msg[0] == '\0')
			snprintf(res->err_msg, sizeof(res->err_msg),
			    "error event in the stream");
		cJSON_Delete(o);
		st->status = LLM_FAIL;
		return LLM_FAIL;
	}
	if ((usage = cJSON_GetObjectItemCaseSensitive(o, "usage")) != NULL &&
	    cJSON_IsObject(usage)) {
		st->res.usage.input_tokens = oa_count(usage, "prompt_tokens");
		st->res.usage.output_tokens = oa_count(usage,
		    "completion_tokens");
	}
	ch = cJSON_GetObjectItemCaseSensitive(o, "choices");
	c0 = NULL;
	cJSON_ArrayForEach(c0, ch) {
		const cJSON *ix = cJSON_GetObjectItemCaseSensitive(c0, "index");

		/* With n > 1 only the first choice is the reply. */
		if (!cJSON_IsNumber(ix) || ix->valuedouble == 0)
			break;
	}
	if (c0 != NULL) {
		delta = cJSON_GetObjectItemCaseSensitive(c0, "delta");
		/* Reasoning (DeepSeek, vLLM: reasoning_content; OpenRouter,
		 * Ollama: reasoning) comes before the answer: the answer's
		 * first text or call ends its block. */
		if ((text = oa_str(delta, "reasoning_content")) != NULL ||
		    (text = oa_str(delta, "reasoning")) != NULL)
			llm_stream_reason(st, text, strlen(text));
		if (((text = oa_str(delta, "content")) != NULL && *text) ||
		    cJSON_GetObjectItemCaseSensitive(delta, "tool_calls"))
			llm_stream_reason_end(st);
		if ((text = oa_str(delta, "content")) != NULL)
			llm_stream_token(st, text, strlen(text));
		r = openai_tools(st, cJSON_GetObjectItemCaseSensitive(delta,
		    "tool_calls"));
		/* The older single function_call is tool call 0. */
		fc = cJSON_GetObjectItemCaseSensitive(delta, "function_call");
		if (r == LLM_MORE && cJSON_IsObject(fc)) {
			a = oa_str(fc, "arguments");
			r = llm_stream_tool(st, 0, NULL, oa_str(fc, "name"),
			    a ? a : "", a ? strlen(a) : 0);
		}
		fr = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
		if (r == LLM_MORE && cJSON_IsString(fr)) {
			st->finished = 1;
			llm_stream_stop(st, strcmp(fr->valuestring,
			    "function_call") == 0 ? "tool_calls" :
			    fr->valuestring);
		}
	}
	cJSON_Delete(o);
	(void)type;
	return r;
}

/* A server that closes after the finish chunk without [DONE] still finished. */
static int
openai_end(struct llm_stream *st)
{
	if (st->finished)
		return llm_stream_complete(st);
	return llm_stream_fail(st, NULL, "the stream ended before "
	    "the reply was complete");
}

static const char *const openai_headers[] = { NULL };

const struct llm_proto llm_openai_proto = {
	.type = "openai",
	.default_url = "https://api.openai.com/v1",
	.path = "/chat/completions",
	.key_header = "Authorization: Bearer ",
	.headers = openai_headers,
	.body = openai_body,
	.event = openai_event,
	.end = openai_end,
};

const struct llm_ops llm_openai_ops = {
	"openai", llm_http_start, llm_http_cancel
};
