#include <stdlib.h>
#include <string.h>

#include "parley/config.h"
#include "llm.h"

/* Every call starts with its ops, so cancel can find its provider. */
struct llm_call {
	const struct llm_ops	*ops;
};

static const struct llm_ops *const providers[] = {
	&llm_script_ops,
};

struct llm_ctx *
llm_ctx_new(struct event_base *base)
{
	struct llm_ctx *ctx;

	if ((ctx = calloc(1, sizeof(*ctx))) == NULL)
		return NULL;
	ctx->base = base;
	return ctx;
}

void
llm_ctx_free(struct llm_ctx *ctx)
{
	free(ctx);
}

struct llm_call *
llm_start(struct llm_ctx *ctx, const struct cfg_provider *p,
    const struct llm_msg *msgs, size_t n, const struct llm_cbs *cbs, void *arg)
{
	size_t i;

	for (i = 0; i < sizeof(providers) / sizeof(providers[0]); i++)
		if (strcmp(providers[i]->type, p->type) == 0)
			return providers[i]->start(ctx, p, msgs, n, cbs, arg);
	return NULL;
}

void
llm_cancel(struct llm_call *c)
{
	if (c != NULL)
		c->ops->cancel(c);
}
