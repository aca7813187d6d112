/*
 * What the llm suites share (test_llm.c, test_llm_script.c): a call's
 * output collected by callbacks, a provider, tool definitions.  Included
 * after the workers/llm*.c files it tests.
 */
#ifndef PARLEY_TESTS_LLM_FIXTURE_H
#define PARLEY_TESTS_LLM_FIXTURE_H

struct out {
	char		 text[16384];
	size_t		 tlen;
	char		 tools[16384];
	int		 ntools;
	int		 done;
	int		 errors;
	int		 retrying;
	char		 stop[32];
	char		 err[512];
	char		 why[512];
	struct llm_usage usage;
	struct event_base *base;	/* loopexit on done/error, if set */
	struct llm_call	*call;		/* to cancel from on_token */
	int		 cancel_at;	/* cancel at this token count */
	int		 ntok;
	char		 thoughts[4096];	/* each block, then '|' */
};

static void
o_token(void *arg, const char *t, size_t len)
{
	struct out *o = arg;

	ck_assert_uint_gt(len, 0);
	ck_assert_uint_lt(o->tlen + len, sizeof(o->text));
	memcpy(o->text + o->tlen, t, len);
	o->tlen += len;
	o->text[o->tlen] = '\0';
	o->ntok++;
	if (o->cancel_at && o->ntok == o->cancel_at) {
		llm_cancel(o->call);
		o->call = NULL;
		if (o->base)
			event_base_loopexit(o->base, NULL);
	}
}

static void
o_tool(void *arg, const char *id, const char *name, const char *args)
{
	struct out *o = arg;
	size_t n = strlen(o->tools);

	ck_assert_int_eq(o->done, 0);
	snprintf(o->tools + n, sizeof(o->tools) - n, "%s %s %s;", id, name,
	    args);
	o->ntools++;
}

static void
o_done(void *arg, const struct llm_usage *u, const char *stop)
{
	struct out *o = arg;

	o->done++;
	o->usage = *u;
	snprintf(o->stop, sizeof(o->stop), "%s", stop);
	o->call = NULL;
	if (o->base)
		event_base_loopexit(o->base, NULL);
}

static void
o_error(void *arg, const char *code, const char *msg)
{
	struct out *o = arg;

	ck_assert_str_eq(code, "LLM_ERROR");
	o->errors++;
	snprintf(o->err, sizeof(o->err), "%s", msg);
	o->call = NULL;
	if (o->base)
		event_base_loopexit(o->base, NULL);
}

static void
o_retrying(void *arg, const char *why)
{
	struct out *o = arg;

	o->retrying++;
	snprintf(o->why, sizeof(o->why), "%s", why);
	o->tlen = 0;
	o->text[0] = '\0';
}

static void
o_thought(void *arg, const char *t, size_t len)
{
	struct out *o = arg;
	size_t n = strlen(o->thoughts);

	ck_assert_uint_gt(len, 0);
	snprintf(o->thoughts + n, sizeof(o->thoughts) - n, "%.*s|", (int)len,
	    t);
}

static const struct llm_cbs ocbs = {
	o_token, o_done, o_error, o_tool, o_retrying, o_thought
};

static struct cfg_provider *
prov(const char *type, const char *url)
{
	static struct cfg_provider p;

	memset(&p, 0, sizeof(p));
	snprintf(p.type, sizeof(p.type), "%s", type);
	snprintf(p.name, sizeof(p.name), "t");
	p.url = (char *)url;
	p.model = (char *)"m-1";
	p.max_retries = 2;
	p.timeout_ms = 5000;
	p.idle_timeout_ms = 5000;
	return &p;
}

static const struct llm_tool_def tl_defs[] = {
	{ "srv__add", "Adds two numbers.", "{\"type\":\"object\","
	    "\"properties\":{\"a\":{\"type\":\"number\"}}}" },
	{ "srv__now", NULL, NULL },
	{ "srv__bad", "x", "[1,2]" },
};

#endif
