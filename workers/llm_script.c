/*
 * type script: streams a fixed reply in chunks of `chunk` characters, one
 * every `delay`.  It is the built-in demo provider and the fixture the
 * tests drive, so it behaves like a real one: asynchronous, cancellable,
 * with usage figures.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/util.h"
#include "llm.h"

struct llm_call {
	const struct llm_ops	*ops;
	struct event		*tick;
	const char		*reply;		/* the provider config's */
	size_t			 len;
	size_t			 off;
	unsigned		 chunk;
	unsigned		 delay_ms;
	uint64_t		 input_tokens;
	struct llm_cbs		 cbs;
	void			*arg;
};

/* A rough token count, as a provider would report: one per 4 bytes. */
static uint64_t
approx_tokens(size_t bytes)
{
	return (bytes + 3) / 4;
}

static void
script_free(struct llm_call *c)
{
	event_free(c->tick);
	free(c);
}

static void
script_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct llm_call *c = arg;
	struct llm_usage u;
	struct timeval tv;
	size_t end = c->off;
	unsigned n;

	/* chunk counts characters, so never split a UTF-8 sequence. */
	for (n = 0; n < c->chunk && end < c->len; n++) {
		end++;
		while (end < c->len && ((unsigned char)c->reply[end] & 0xc0) == 0x80)
			end++;
	}
	if (end > c->off) {
		size_t from = c->off;

		c->off = end;
		c->cbs.token(c->arg, c->reply + from, end - from);
	}
	if (c->off < c->len) {
		util_tv(&tv, c->delay_ms);
		evtimer_add(c->tick, &tv);
		return;
	}
	u.input_tokens = c->input_tokens;
	u.output_tokens = approx_tokens(c->len);
	u.cost = 0;
	{
		struct llm_cbs cbs = c->cbs;
		void *a = c->arg;

		script_free(c);
		cbs.done(a, &u, "stop");
	}
}

static struct llm_call *
script_start(struct llm_ctx *ctx, const struct cfg_provider *p,
    const struct llm_msg *msgs, size_t n, const struct llm_cbs *cbs, void *arg)
{
	struct llm_call *c;
	struct timeval tv;
	size_t i, in = 0;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->ops = &llm_script_ops;
	c->reply = p->reply ? p->reply : "";
	c->len = strlen(c->reply);
	c->chunk = p->chunk ? p->chunk : 1;
	c->delay_ms = p->delay_ms;
	c->cbs = *cbs;
	c->arg = arg;
	for (i = 0; i < n; i++)
		in += strlen(msgs[i].content);
	c->input_tokens = approx_tokens(in);
	if ((c->tick = evtimer_new(ctx->base, script_tick, c)) == NULL) {
		free(c);
		return NULL;
	}
	/* The first chunk, like a provider's first byte, comes after a delay. */
	util_tv(&tv, c->delay_ms);
	evtimer_add(c->tick, &tv);
	return c;
}

static void
script_cancel(struct llm_call *c)
{
	script_free(c);
}

const struct llm_ops llm_script_ops = {
	"script", script_start, script_cancel
};
