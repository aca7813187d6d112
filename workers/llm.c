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

struct llm_call *
llm_start(struct event_base *base, const struct cfg_provider *p,
    const struct llm_msg *msgs, size_t n, const struct llm_cbs *cbs, void *arg)
{
	size_t i;

	for (i = 0; i < sizeof(providers) / sizeof(providers[0]); i++)
		if (strcmp(providers[i]->type, p->type) == 0)
			return providers[i]->start(base, p, msgs, n, cbs, arg);
	return NULL;
}

void
llm_cancel(struct llm_call *c)
{
	if (c != NULL)
		c->ops->cancel(c);
}
