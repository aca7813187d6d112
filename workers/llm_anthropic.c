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

static char *
anthropic_body(const struct cfg_provider *p, const struct llm_msg *msgs,
    size_t n)
{
	cJSON	*o, *a, *m;
	char	*s, *sys = NULL, *ns;
	size_t	 i, slen = 0, len;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (p->model != NULL)
		cJSON_AddStringToObject(o, "model", p->model);
	cJSON_AddNumberToObject(o, "max_tokens",
	    p->max_tokens ? p->max_tokens : ANTHROPIC_MAX_TOKENS);
	a = cJSON_AddArrayToObject(o, "messages");
	for (i = 0; a != NULL && i < n; i++) {
		/* The API refuses empty text; a turn that said nothing adds
		 * nothing, and it joins consecutive turns of one role. */
		if (msgs[i].content[0] == '\0')
			continue;
		if (strcmp(msgs[i].role, "system") == 0) {
			len = strlen(msgs[i].content);
			if ((ns = realloc(sys, slen + len + 3)) == NULL)
				continue;
			sys = ns;
			if (slen > 0) {
				memcpy(sys + slen, "\n\n", 2);
				slen += 2;
			}
			memcpy(sys + slen, msgs[i].content, len + 1);
			slen += len;
			continue;
		}
		if ((m = cJSON_CreateObject()) == NULL)
			break;
		cJSON_AddStringToObject(m, "role", msgs[i].role);
		cJSON_AddStringToObject(m, "content", msgs[i].content);
		cJSON_AddItemToArray(a, m);
	}
	if (sys != NULL)
		cJSON_AddStringToObject(o, "system", sys);
	free(sys);
	cJSON_AddBoolToObject(o, "stream", 1);
	if (p->has_temperature)
		cJSON_AddNumberToObject(o, "temperature", p->temperature);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

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
	} else if (strcmp(type, "message_stop") == 0)
		r = llm_stream_complete(st);
	/* ping, content_block_stop and unknown events change nothing. */
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
