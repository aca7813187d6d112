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
struct llm_proto;
struct cJSON;

struct llm_usage {
	uint64_t	input_tokens;
	uint64_t	output_tokens;
	double		cost;		/* USD */
};

/* One tool call the model made, as it goes back into a request. */
struct llm_tool_call {
	const char	*id;
	const char	*name;
	const char	*args_json;	/* NULL or "" is read as {} */
};

struct llm_msg {
	const char	*role;		/* "system", "user", "assistant", "tool" */
	const char	*content;	/* text, may be "" (never NULL) */
	const struct llm_tool_call *calls;	/* assistant: its tool calls */
	size_t		 ncalls;
	const char	*tool_call_id;	/* tool: the call this answers */
	const char	*tool_name;	/* tool: its name (some APIs want it) */
	int		 is_error;	/* tool: the result is an error */
};

/* A tool offered to the model; names are [a-zA-Z0-9_-]{1,64}. */
struct llm_tool_def {
	const char	*name;
	const char	*description;	/* may be NULL */
	const char	*schema_json;	/* JSON Schema; NULL or invalid: any object */
};

/*
 * All but token, done and error may be NULL.  stop_reason is normalized:
 * "stop", "length", "tool_calls", "content_filter", or the provider's own
 * word for anything else.
 */
struct llm_cbs {
	void	(*token)(void *arg, const char *text, size_t len);
	/* The call is already freed when done or error runs. */
	void	(*done)(void *arg, const struct llm_usage *,
		    const char *stop_reason);
	void	(*error)(void *arg, const char *code, const char *message);
	/* Each complete tool call, after the last token, before done, in
	 * index order; args_json is the arguments text as the model wrote it. */
	void	(*tool_call)(void *arg, const char *id, const char *name,
		    const char *args_json);
	/* Tokens were delivered, then the stream broke and is started over:
	 * the reply so far is void.  llm_cancel may be called from it. */
	void	(*retrying)(void *arg, const char *why);
	/* One complete block of the model's streamed reasoning (Anthropic
	 * thinking, OpenAI-compatible reasoning_content or reasoning), as
	 * it ends; may be NULL. */
	void	(*thought)(void *arg, const char *text, size_t len);
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
			    size_t nmsgs, const struct llm_tool_def *,
			    size_t ntools, const struct llm_cbs *, void *arg);
	void		 (*cancel)(struct llm_call *);
};

struct llm_ctx	*llm_ctx_new(struct event_base *);
void		 llm_ctx_free(struct llm_ctx *);
/*
 * Starts a streamed reply to msgs, offering tools (none when ntools is 0).
 * Everything passed is copied as needed before it returns.  Returns NULL
 * (and calls nothing) when the provider type is unknown or on failure.
 */
struct llm_call	*llm_start(struct llm_ctx *, const struct cfg_provider *,
		    const struct llm_msg *, size_t nmsgs,
		    const struct llm_tool_def *tools, size_t ntools,
		    const struct llm_cbs *, void *arg);
void		 llm_cancel(struct llm_call *);

extern const struct llm_ops llm_script_ops;
extern const struct llm_ops llm_openai_ops;
extern const struct llm_ops llm_anthropic_ops;

/*
 * Stream decoders, pure functions over the response body bytes so tests
 * can drive them without a network.  A decoder calls cbs->token as text
 * arrives and cbs->tool_call when the reply is complete; done and error
 * are left to its owner, which reads the outcome with llm_stream_result.
 */
#define LLM_MORE	0	/* feed more */
#define LLM_DONE	1	/* the reply is complete */
#define LLM_FAIL	(-1)	/* an error event, or a stream that is not valid */

#define LLM_MAX_EVENT	(1024 * 1024)	/* one SSE event's data */
#define LLM_MAX_TOOLS	64		/* tool calls in one reply */
#define LLM_MAX_ARGS	(1024 * 1024)	/* one tool call's arguments */
#define LLM_MAX_REASON	(256 * 1024)	/* one reasoning block kept */

struct llm_result {
	struct llm_usage usage;		/* as reported; cost left 0 */
	char	stop_reason[32];
	char	err_type[64];		/* the provider's error type, or "" */
	char	err_msg[256];		/* the provider's own message */
};

struct llm_stream;

/* type is "openai" or "anthropic"; NULL for another or out of memory. */
struct llm_stream	*llm_stream_new(const char *type, const struct llm_cbs *,
			    void *arg);
/* Returns LLM_MORE, LLM_DONE or LLM_FAIL; once not LLM_MORE, it sticks. */
int			 llm_stream_feed(struct llm_stream *, const void *,
			    size_t);
/* The body ended: LLM_DONE if the reply is complete, else LLM_FAIL. */
int			 llm_stream_end(struct llm_stream *);
const struct llm_result	*llm_stream_result(const struct llm_stream *);
void			 llm_stream_free(struct llm_stream *);

/* --- shared by the HTTP providers (llm.c, llm_http.c, llm_*.c) --- */

struct sse_parser;

struct llm_tool {
	long	 index;			/* the provider's index for it */
	char	 id[128];
	char	 name[128];
	char	*args;
	size_t	 alen;
	size_t	 acap;
};

struct llm_stream {
	const struct llm_proto	*proto;
	struct sse_parser	*sse;
	struct llm_cbs		 cbs;
	void			*arg;
	struct llm_result	 res;
	int			 status;	/* LLM_MORE, LLM_DONE, LLM_FAIL */
	int			 finished;	/* a stop reason was seen */
	size_t			 ntools;
	struct llm_tool		 tools[LLM_MAX_TOOLS];
	char			*reason;	/* the reasoning block so far */
	size_t			 rlen;
	size_t			 rcap;
	long			 rindex;	/* its block (Anthropic), or -1 */
};

/* What one HTTP provider type tells llm_http.c. */
struct llm_proto {
	const char	 *type;
	const char	 *default_url;	/* as the official SDKs take it */
	const char	 *path;		/* appended to the URL */
	const char	 *key_header;	/* followed by the key */
	const char *const *headers;	/* more, NULL-terminated */
	/* The request body (malloc'd JSON), or NULL when out of memory. */
	char		*(*body)(const struct cfg_provider *,
			    const struct llm_msg *, size_t nmsgs,
			    const struct llm_tool_def *, size_t ntools);
	/* One SSE event: LLM_MORE, LLM_DONE or LLM_FAIL. */
	int		 (*event)(struct llm_stream *, const char *type,
			    const char *data, size_t len);
	/* The body ended before the event that completes a reply. */
	int		 (*end)(struct llm_stream *);
};

extern const struct llm_proto llm_openai_proto;
extern const struct llm_proto llm_anthropic_proto;

const struct llm_proto	*llm_proto_find(const char *type);
/* Delivers text as a token (nothing when empty). */
void			 llm_stream_token(struct llm_stream *, const char *,
			    size_t);
/*
 * Adds to the tool call with this index (created on first sight): id and
 * name when not NULL (id kept from the first, name appended), args
 * appended.  LLM_FAIL (with the reason set) past the bounds.
 */
int			 llm_stream_tool(struct llm_stream *, long index,
			    const char *id, const char *name, const char *args,
			    size_t alen);
/* Adds to the reasoning block (kept up to LLM_MAX_REASON bytes). */
void			 llm_stream_reason(struct llm_stream *, const char *,
			    size_t);
/* The reasoning block ended: cbs->thought gets it, if it holds any. */
void			 llm_stream_reason_end(struct llm_stream *);
/* A model that takes OpenAI's reasoning parameters (o1, o3, o4, gpt-5). */
int			 llm_openai_reasoning_model(const char *model);
/* Emits the tool calls in index order, then says the reply is complete. */
int			 llm_stream_complete(struct llm_stream *);
/* Records an error (type may be NULL) and returns LLM_FAIL. */
int			 llm_stream_fail(struct llm_stream *, const char *type,
			    const char *fmt, ...)
			    __attribute__((format(printf, 3, 4)));
/* Copies a stop reason, truncated to fit. */
void			 llm_stream_stop(struct llm_stream *, const char *);
/*
 * Reads an error body ({"error":{"type","message"}} or
 * {"type":"error","error":{...}}) into res; 0 if it held none.
 */
int			 llm_error_json(const char *json, size_t len,
			    struct llm_result *res);

struct llm_call	*llm_http_start(struct llm_ctx *, const struct cfg_provider *,
		    const struct llm_msg *, size_t nmsgs,
		    const struct llm_tool_def *, size_t ntools,
		    const struct llm_cbs *, void *arg);
/* A tool's schema, parsed; {"type":"object"} when absent or not an object. */
struct cJSON	*llm_tool_schema(const char *schema_json);
/* name, description and the schema under schema_key, into an object;
 * 1, or 0 when out of memory. */
int		 llm_tool_def_json(struct cJSON *into,
		    const struct llm_tool_def *, const char *schema_key);
/* A call's arguments, parsed; {} when absent or not an object. */
struct cJSON	*llm_tool_args(const char *args_json);
void		 llm_http_cancel(struct llm_call *);
/* Frees llm_http.c's state (cancelling what still runs, silently). */
void		 llm_http_free(struct llm_ctx *);

#endif
