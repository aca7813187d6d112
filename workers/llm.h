/*
 * The provider interface: a turn asks a provider for a streamed reply and
 * gets tokens, then exactly one of done or error, all from the worker's
 * event loop.  llm_cancel stops a call and guarantees no further callback.
 */
#ifndef PARLEY_LLM_H
#define PARLEY_LLM_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct cfg_provider;

struct llm_usage {
	uint64_t	input_tokens;
	uint64_t	output_tokens;
	double		cost;		/* USD */
};

struct llm_msg {
	const char	*role;		/* "user", "assistant", "system" */
	const char	*content;
};

struct llm_cbs {
	void	(*token)(void *arg, const char *text, size_t len);
	/* The call is already freed when done or error runs. */
	void	(*done)(void *arg, const struct llm_usage *);
	void	(*error)(void *arg, const char *code, const char *message);
};

struct llm_call;

/*
 * What providers share in one worker: its event loop, and (for the HTTP
 * providers) one libcurl multi handle driven by that loop.
 */
struct llm_ctx {
	struct event_base	*base;
	void			*http;		/* llm_http.c's state, or NULL */
};

struct llm_ops {
	const char	*type;
	struct llm_call	*(*start)(struct llm_ctx *,
			    const struct cfg_provider *, const struct llm_msg *,
			    size_t nmsgs, const struct llm_cbs *, void *arg);
	void		 (*cancel)(struct llm_call *);
};

struct llm_ctx	*llm_ctx_new(struct event_base *);
void		 llm_ctx_free(struct llm_ctx *);
/* Returns NULL (and calls nothing) when the provider type is unknown. */
struct llm_call	*llm_start(struct llm_ctx *, const struct cfg_provider *,
		    const struct llm_msg *, size_t nmsgs, const struct llm_cbs *,
		    void *arg);
void		 llm_cancel(struct llm_call *);

extern const struct llm_ops llm_script_ops;

#endif
