/*
 * type anthropic: the Messages API, streaming.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "llm.h"

#define ANTHROPIC_MAX_TOKENS	4096	/* the API insists on a value */

/* See llm_openai.c: a body short of memory is dropped, never sent short. */
#define OK(x)	do { if ((x) == NULL) ok = 0; } while (0)

/* Adds item to array, or frees it; 0 on failure. */
static int
an_push(cJSON *array, cJSON *item)
{
	if (item == NULL)
		return 0;
	if (!cJSON_AddItemToArray(array, item)) {
		cJSON_Delete(item);
		return 0;
	}
	return 1;
}

/* [{"type":"text",..} (if any), {"type":"tool_use",id,name,input}...] */
static cJSON *
an_assistant_calls(const struct llm_msg *m)
{
	cJSON	*o, *a, *b, *in;
	size_t	 i;
	int	 ok = 1;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	OK(cJSON_AddStringToObject(o, "role", "assistant"));
	OK(a = cJSON_AddArrayToObject(o, "content"));
	/* The API refuses an empty text block. */
	if (ok && m->content != NULL && *m->content != '\0') {
		OK(b = cJSON_CreateObject());
		if (ok && !an_push(a, b))
			ok = 0;
		if (ok) {
			OK(cJSON_AddStringToObject(b, "type", "text"));
			OK(cJSON_AddStringToObject(b, "text", m->content));
		}
	}
	for (i = 0; ok && i < m->ncalls; i++) {
		if (!an_push(a, b = cJSON_CreateObject())) {
			ok = 0;
			break;
		}
		OK(cJSON_AddStringToObject(b, "type", "tool_use"));
		OK(cJSON_AddStringToObject(b, "id", m->calls[i].id ?
		    m->calls[i].id : ""));
		OK(cJSON_AddStringToObject(b, "name", m->calls[i].name ?
		    m->calls[i].name : ""));
		/* input must be an object: what the model wrote, or {}. */
		if ((in = llm_tool_args(m->calls[i].args_json)) == NULL ||
		    !cJSON_AddItemToObject(b, "input", in)) {
			cJSON_Delete(in);
			ok = 0;
		}
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* {"type":"tool_result","tool_use_id",content?,"is_error"?} onto blocks. */
static int
an_tool_result(cJSON *blocks, const struct llm_msg *m)
{
	cJSON	*b;
	int	 ok = 1;

	if (!an_push(blocks, b = cJSON_CreateObject()))
		return 0;
	OK(cJSON_AddStringToObject(b, "type", "tool_result"));
	OK(cJSON_AddStringToObject(b, "tool_use_id", m->tool_call_id ?
	    m->tool_call_id : ""));
	/* content is optional, and an empty one is best left out. */
	if (m->content != NULL && *m->content != '\0')
		OK(cJSON_AddStringToObject(b, "content", m->content));
	if (m->is_error)
		OK(cJSON_AddBoolToObject(b, "is_error", 1));
	return ok;
}

/* "tools":[{name,description,input_schema}] */
static int
an_tools_req(cJSON *o, const struct llm_tool_def *tools, size_t ntools)
{
	cJSON	*a, *t;
	size_t	 i;
	int	 ok = 1;

	if (ntools == 0 || tools == NULL)
		return 1;
	if ((a = cJSON_AddArrayToObject(o, "tools")) == NULL)
		return 0;
	for (i = 0; ok && i < ntools; i++) {
		if (!an_push(a, t = cJSON_CreateObject()))
			return 0;
		if (!llm_tool_def_json(t, &tools[i], "input_schema"))
			return 0;
	}
	return ok;
}

static char *
anthropic_body(const struct cfg_provider *p, const struct llm_msg *msgs,
    size_t n, const struct llm_tool_def *tools, size_t ntools)
{
	const struct llm_msg *mg;
	cJSON	*o, *a, *m, *results = NULL;
	char	*s = NULL, *sys = NULL, *ns;
	size_t	 i, slen = 0, len;
	int	 ok = 1;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (p->model != NULL)
		OK(cJSON_AddStringToObject(o, "model", p->model));
	OK(cJSON_AddNumberToObject(o, "max_tokens",
	    p->max_tokens ? p->max_tokens : ANTHROPIC_MAX_TOKENS));
	OK(a = cJSON_AddArrayToObject(o, "messages"));
	for (i = 0; ok && i < n; i++) {
		mg = &msgs[i];
		if (strcmp(mg->role, "tool") == 0) {
			/* Results of one round go back in a single user turn
			 * right after the assistant's tool_use turn. */
			if (results == NULL) {
				OK(m = cJSON_CreateObject());
				if (!ok || !an_push(a, m)) {
					ok = 0;
					break;
				}
				OK(cJSON_AddStringToObject(m, "role", "user"));
				OK(results = cJSON_AddArrayToObject(m,
				    "content"));
				if (!ok)
					break;
			}
			if (!an_tool_result(results, mg))
				ok = 0;
			continue;
		}
		if (strcmp(mg->role, "assistant") == 0 && mg->ncalls > 0 &&
		    mg->calls != NULL) {
			if (!an_push(a, an_assistant_calls(mg)))
				ok = 0;
			results = NULL;
			continue;
		}
		/* The API refuses empty text; a turn that said nothing adds
		 * nothing (consecutive turns of one role are joined by the
		 * API itself). */
		if (mg->content == NULL || mg->content[0] == '\0')
			continue;
		if (strcmp(mg->role, "system") == 0) {
			len = strlen(mg->content);
			if ((ns = realloc(sys, slen + len + 3)) == NULL) {
				ok = 0;
				break;
			}
			sys = ns;
			if (slen > 0) {
				memcpy(sys + slen, "\n\n", 2);
				slen += 2;
			}
			memcpy(sys + slen, mg->content, len + 1);
			slen += len;
			continue;
		}
		results = NULL;
		OK(m = cJSON_CreateObject());
		if (!ok || !an_push(a, m)) {
			ok = 0;
			break;
		}
		OK(cJSON_AddStringToObject(m, "role", mg->role));
		OK(cJSON_AddStringToObject(m, "content", mg->content));
	}
	if (ok && sys != NULL)
		OK(cJSON_AddStringToObject(o, "system", sys));
	free(sys);
	if (ok && !an_tools_req(o, tools, ntools))
		ok = 0;
	OK(cJSON_AddBoolToObject(o, "stream", 1));
	if (p->has_temperature)
		OK(cJSON_AddNumberToObject(o, "temperature", p->temperature));
	if (ok)
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

#undef OK

static const char *
an_str(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int
an_count(const cJSON *o, const char *key, uint64_t *v)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0) ||
	    n->valuedouble > 1e15)
		return 0;
	*v = (uint64_t)n->valuedouble;
	return 1;
}

static long
an_index(const cJSON *o)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "index");

	if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0) ||
	    n->valuedouble > 1e9)
		return -1;
	return (long)n->valuedouble;
}

static const char *
an_stop(const char *r)
{
	if (strcmp(r, "end_turn") == 0 || strcmp(r, "stop_sequence") == 0)
		return "stop";
	if (strcmp(r, "max_tokens") == 0)
		return "length";
	if (strcmp(r, "tool_use") == 0)
		return "tool_calls";
	if (strcmp(r, "refusal") == 0)
		return "content_filter";
	return r;
}

/* Is block index a tool_use block we track? */
static int
an_is_tool(const struct llm_stream *st, long index)
{
	size_t i;

	for (i = 0; i < st->ntools; i++)
		if (st->tools[i].index == index)
			return 1;
	return 0;
}

static int
anthropic_event(struct llm_stream *st, const char *ev, const char *data,
    size_t len)
{
	cJSON		*o;
	const cJSON	*x, *u;
	const char	*type, *t;
	long		 index;
	int		 r = LLM_MORE;

	if ((o = cJSON_ParseWithLength(data, len)) == NULL)
		return llm_stream_fail(st, NULL, "a stream event "
		    "is not JSON");
	/* The data's own type is the authority; the SSE name backs it up. */
	if ((type = an_str(o, "type")) == NULL)
		type = ev;
	if (strcmp(type, "error") == 0) {
		if (!llm_error_json(data, len, &st->res))
			snprintf(st->res.err_msg, sizeof(st->res.err_msg),
			    "error event in the stream");
		r = LLM_FAIL;
		st->status = LLM_FAIL;
	} else if (strcmp(type, "message_start") == 0) {
		u = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(o, "message"), "usage");
		an_count(u, "input_tokens", &st->res.usage.input_tokens);
		an_count(u, "output_tokens", &st->res.usage.output_tokens);
	} else if (strcmp(type, "content_block_start") == 0) {
		index = an_index(o);
		x = cJSON_GetObjectItemCaseSensitive(o, "content_block");
		t = an_str(x, "type");
		if (t != NULL && strcmp(t, "text") == 0) {
			if ((t = an_str(x, "text")) != NULL)
				llm_stream_token(st, t, strlen(t));
		} else if (t != NULL && strcmp(t, "thinking") == 0) {
			llm_stream_reason_end(st);
			st->rindex = index;
			if ((t = an_str(x, "thinking")) != NULL)
				llm_stream_reason(st, t, strlen(t));
		} else if (t != NULL && strcmp(t, "tool_use") == 0) {
			if (index < 0)
				r = llm_stream_fail(st, NULL, "a "
				    "tool_use block without an index");
			else
				r = llm_stream_tool(st, index, an_str(x, "id"),
				    an_str(x, "name"), "", 0);
		}
	} else if (strcmp(type, "content_block_delta") == 0) {
		index = an_index(o);
		x = cJSON_GetObjectItemCaseSensitive(o, "delta");
		t = an_str(x, "type");
		if (t != NULL && strcmp(t, "text_delta") == 0) {
			if ((t = an_str(x, "text")) != NULL)
				llm_stream_token(st, t, strlen(t));
		} else if (t != NULL && strcmp(t, "thinking_delta") == 0 &&
		    index >= 0 && index == st->rindex) {
			if ((t = an_str(x, "thinking")) != NULL)
				llm_stream_reason(st, t, strlen(t));
		} else if (t != NULL && strcmp(t, "input_json_delta") == 0 &&
		    an_is_tool(st, index)) {
			t = an_str(x, "partial_json");
			if (t != NULL)
				r = llm_stream_tool(st, index, NULL, NULL, t,
				    strlen(t));
		}
	} else if (strcmp(type, "message_delta") == 0) {
		x = cJSON_GetObjectItemCaseSensitive(o, "delta");
		if ((t = an_str(x, "stop_reason")) != NULL) {
			st->finished = 1;
			llm_stream_stop(st, an_stop(t));
		}
		/* Counts here are cumulative: they replace, never add. */
		u = cJSON_GetObjectItemCaseSensitive(o, "usage");
		an_count(u, "input_tokens", &st->res.usage.input_tokens);
		an_count(u, "output_tokens", &st->res.usage.output_tokens);
	} else if (strcmp(type, "content_block_stop") == 0) {
		/* A thinking block is one thought. */
		if (st->rindex >= 0 && an_index(o) == st->rindex)
			llm_stream_reason_end(st);
	} else if (strcmp(type, "message_stop") == 0)
		r = llm_stream_complete(st);
	/* ping, signature_delta and unknown events change nothing. */
	cJSON_Delete(o);
	return r;
}

static int
anthropic_end(struct llm_stream *st)
{
	return llm_stream_fail(st, NULL, "the stream ended before "
	    "message_stop");
}

static const char *const anthropic_headers[] = {
	"anthropic-version: 2023-06-01",
	NULL
};

const struct llm_proto llm_anthropic_proto = {
	.type = "anthropic",
	.default_url = "https://api.anthropic.com",
	.path = "/v1/messages",
	.key_header = "x-api-key: ",
	.headers = anthropic_headers,
	.body = anthropic_body,
	.event = anthropic_event,
	.end = anthropic_end,
};

const struct llm_ops llm_anthropic_ops = {
	"anthropic", llm_http_start, llm_http_cancel
};
