/*
 * Provider dispatch, and the parts of the HTTP providers' stream decoding
 * that do not depend on the provider: SSE framing, tool call assembly,
 * error bodies.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/sse.h"
#include "curlev.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "llm.h"

static const struct llm_ops *const providers[] = {
	&llm_script_ops,
	&llm_openai_ops,
	&llm_anthropic_ops,
};

static const struct llm_proto *const protos[] = {
	&llm_openai_proto,
	&llm_anthropic_proto,
};

struct llm_ctx *
llm_ctx_new(struct event_base *base)
{
	struct llm_ctx *ctx;

	/* Once per process, before any thread exists in it. */
	if (curlev_global_init() == -1)
		return NULL;
	if ((ctx = calloc(1, sizeof(*ctx))) == NULL)
		return NULL;
	ctx->base = base;
	return ctx;
}

void
llm_ctx_free(struct llm_ctx *ctx)
{
	if (ctx == NULL)
		return;
	llm_http_free(ctx);
	free(ctx);
}

struct llm_call *
llm_start(struct llm_ctx *ctx, const struct cfg_provider *p,
    const struct llm_msg *msgs, size_t n, const struct llm_tool_def *tools,
    size_t ntools, const struct llm_cbs *cbs, void *arg)
{
	size_t i;

	if (ntools == 0)
		tools = NULL;
	for (i = 0; i < sizeof(providers) / sizeof(providers[0]); i++)
		if (strcmp(providers[i]->type, p->type) == 0)
			return providers[i]->start(ctx, p, msgs, n, tools,
			    ntools, cbs, arg);
	return NULL;
}

void
llm_cancel(struct llm_call *c)
{
	/* Every provider's call starts with its ops. */
	if (c != NULL)
		(*(const struct llm_ops *const *)(void *)c)->cancel(c);
}

const struct llm_proto *
llm_proto_find(const char *type)
{
	size_t i;

	for (i = 0; i < sizeof(protos) / sizeof(protos[0]); i++)
		if (strcmp(protos[i]->type, type) == 0)
			return protos[i];
	return NULL;
}

/* --- stream decoding --- */

static int
stream_event(void *arg, const char *type, const char *data, size_t len)
{
	struct llm_stream *st = arg;

	if (st->status != LLM_MORE)
		return 1;
	st->status = st->proto->event(st, type, data, len);
	return st->status != LLM_MORE;
}

struct llm_stream *
llm_stream_new(const char *type, const struct llm_cbs *cbs, void *arg)
{
	struct llm_stream *st;
	const struct llm_proto *pr;

	if ((pr = llm_proto_find(type)) == NULL)
		return NULL;
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NULL;
	st->proto = pr;
	st->cbs = *cbs;
	st->arg = arg;
	st->rindex = -1;
	if ((st->sse = sse_parser_new(LLM_MAX_EVENT, stream_event, st)) ==
	    NULL) {
		free(st);
		return NULL;
	}
	return st;
}

void
llm_stream_free(struct llm_stream *st)
{
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < st->ntools; i++)
		free(st->tools[i].args);
	sse_parser_free(st->sse);
	free(st->reason);
	free(st);
}

int
llm_stream_feed(struct llm_stream *st, const void *buf, size_t len)
{
	if (st->status != LLM_MORE)
		return st->status;
	if (sse_parser_feed(st->sse, buf, len) == -1 &&
	    st->status == LLM_MORE)
		llm_stream_fail(st, NULL, "a stream event passed %u bytes",
		    (unsigned)LLM_MAX_EVENT);
	return st->status;
}

int
llm_stream_end(struct llm_stream *st)
{
	if (st->status == LLM_MORE)
		st->status = st->proto->end(st);
	return st->status;
}

const struct llm_result *
llm_stream_result(const struct llm_stream *st)
{
	return &st->res;
}

void
llm_stream_token(struct llm_stream *st, const char *text, size_t len)
{
	if (len > 0)
		st->cbs.token(st->arg, text, len);
}

/* Appends s to a NUL-terminated fixed buffer, cutting what does not fit. */
static void
strappend(char *dst, size_t size, const char *s)
{
	size_t n = strlen(dst);

	if (n + 1 < size)
		snprintf(dst + n, size - n, "%s", s);
}

int
llm_stream_tool(struct llm_stream *st, long index, const char *id,
    const char *name, const char *args, size_t alen)
{
	struct llm_tool	*t = NULL;
	size_t		 i;

	for (i = 0; i < st->ntools; i++)
		if (st->tools[i].index == index) {
			t = &st->tools[i];
			break;
		}
	if (t == NULL) {
		if (st->ntools == LLM_MAX_TOOLS)
			return llm_stream_fail(st, NULL, "more than %d tool "
			    "calls in one reply", LLM_MAX_TOOLS);
		t = &st->tools[st->ntools++];
		memset(t, 0, sizeof(*t));
		t->index = index;
	}
	if (id != NULL && *id != '\0' && t->id[0] == '\0')
		snprintf(t->id, sizeof(t->id), "%s", id);
	if (name != NULL)
		strappend(t->name, sizeof(t->name), name);
	if (alen == 0)
		return LLM_MORE;
	if (alen > LLM_MAX_ARGS - t->alen)
		return llm_stream_fail(st, NULL, "tool call arguments "
		    "passed %u bytes", (unsigned)LLM_MAX_ARGS);
	if (util_append(&t->args, &t->alen, &t->acap, args, alen) == -1)
		return llm_stream_fail(st, NULL, "out of memory");
	return LLM_MORE;
}

static int
tool_cmp(const void *a, const void *b)
{
	const struct llm_tool *x = a, *y = b;

	return (x->index > y->index) - (x->index < y->index);
}

int
llm_stream_complete(struct llm_stream *st)
{
	struct llm_tool	*t;
	char		 id[32];
	size_t		 i;

	llm_stream_reason_end(st);
	if (st->res.stop_reason[0] == '\0')
		llm_stream_stop(st, st->ntools > 0 ? "tool_calls" : "stop");
	qsort(st->tools, st->ntools, sizeof(st->tools[0]), tool_cmp);
	for (i = 0; i < st->ntools && st->cbs.tool_call != NULL; i++) {
		t = &st->tools[i];
		/* Some servers leave the id out; the reply still needs one. */
		if (t->id[0] == '\0')
			snprintf(id, sizeof(id), "call_%ld", t->index);
		st->cbs.tool_call(st->arg, t->id[0] ? t->id : id, t->name,
		    t->alen ? t->args : "{}");
	}
	return LLM_DONE;
}

void
llm_stream_reason(struct llm_stream *st, const char *text, size_t len)
{
	if (len > LLM_MAX_REASON - st->rlen)
		len = LLM_MAX_REASON - st->rlen;
	if (len > 0)
		util_append(&st->reason, &st->rlen, &st->rcap, text, len);
}

void
llm_stream_reason_end(struct llm_stream *st)
{
	size_t n = st->rlen;

	st->rlen = 0;
	st->rindex = -1;
	/* A block cut at the bound ends on a whole character. */
	if (n > 0 && (n = utf8_whole(st->reason, n)) > 0 &&
	    st->cbs.thought != NULL)
		st->cbs.thought(st->arg, st->reason, n);
}

/*
 * OpenAI's reasoning models (o1, o3, o4-mini, gpt-5...) take
 * max_completion_tokens, not max_tokens, and no temperature; a name may
 * carry a router's prefix ("openai/o3").
 */
int
llm_openai_reasoning_model(const char *model)
{
	static const char *fam[] = { "o1", "o3", "o4", "gpt-5" };
	const char *m;
	size_t i, n;

	if (model == NULL)
		return 0;
	m = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
	for (i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
		n = strlen(fam[i]);
		if (strncmp(m, fam[i], n) == 0 && (m[n] == '\0' ||
		    m[n] == '-' || m[n] == '.'))
			return 1;
	}
	return 0;
}

int
llm_stream_fail(struct llm_stream *st, const char *type, const char *fmt, ...)
{
	va_list ap;

	snprintf(st->res.err_type, sizeof(st->res.err_type), "%s",
	    type ? type : "");
	va_start(ap, fmt);
	vsnprintf(st->res.err_msg, sizeof(st->res.err_msg), fmt, ap);
	va_end(ap);
	st->status = LLM_FAIL;
	return LLM_FAIL;
}

void
llm_stream_stop(struct llm_stream *st, const char *reason)
{
	snprintf(st->res.stop_reason, sizeof(st->res.stop_reason), "%s",
	    reason);
}

/* Parses json when it is an object; else a new object holding type, if set. */
static cJSON *
json_object_or(const char *json, const char *type)
{
	cJSON *o = NULL;

	if (json != NULL && *json != '\0')
		o = cJSON_Parse(json);
	if (o != NULL && cJSON_IsObject(o))
		return o;
	cJSON_Delete(o);
	if ((o = cJSON_CreateObject()) != NULL && type != NULL)
		cJSON_AddStringToObject(o, "type", type);
	return o;
}

cJSON *
llm_tool_schema(const char *schema_json)
{
	return json_object_or(schema_json, "object");
}

int
llm_tool_def_json(cJSON *into, const struct llm_tool_def *t,
    const char *schema_key)
{
	cJSON *sc;

	if (!cJSON_AddStringToObject(into, "name", t->name ? t->name : "") ||
	    (t->description != NULL &&
	    !cJSON_AddStringToObject(into, "description", t->description)))
		return 0;
	if ((sc = llm_tool_schema(t->schema_json)) == NULL ||
	    !cJSON_AddItemToObject(into, schema_key, sc)) {
		cJSON_Delete(sc);
		return 0;
	}
	return 1;
}

cJSON *
llm_tool_args(const char *args_json)
{
	return json_object_or(args_json, NULL);
}

int
llm_error_json(const char *json, size_t len, struct llm_result *res)
{
	cJSON		*o, *e;
	const char	*type = NULL, *msg = NULL;

	if ((o = cJSON_ParseWithLength(json, len)) == NULL)
		return 0;
	e = cJSON_GetObjectItemCaseSensitive(o, "error");
	if (cJSON_IsObject(e)) {
		type = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(e, "type"));
		/* OpenAI-style servers sometimes put the kind in code. */
		if (type == NULL)
			type = cJSON_GetStringValue(
			    cJSON_GetObjectItemCaseSensitive(e, "code"));
		msg = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(e, "message"));
	} else if (cJSON_IsString(e))
		msg = e->valuestring;	/* {"error": "text"}, as Ollama says */
	else {
		cJSON_Delete(o);
		return 0;
	}
	snprintf(res->err_type, sizeof(res->err_type), "%s", type ? type : "");
	snprintf(res->err_msg, sizeof(res->err_msg), "%s", msg ? msg : "");
	cJSON_Delete(o);
	return 1;
}
