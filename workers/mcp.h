/*
 * A Model Context Protocol client over Streamable HTTP: one per worker,
 * on the worker's event loop through its own libcurl multi handle, so
 * nothing here blocks.  Every configured mcp-server is initialized and
 * its tools listed in the background; a server that fails is retried
 * with backoff.  Tools are named SERVER__TOOL towards the model.
 */
#ifndef PARLEY_MCP_H
#define PARLEY_MCP_H

#include <stddef.h>
#include <stdint.h>

#include "parley/policy.h"

struct cJSON;
struct event_base;
struct config;

struct mcp_tool {
	const char	*server;
	const char	*name;		/* as the server names it */
	const char	*full_name;	/* SERVER__TOOL, [a-zA-Z0-9_-]{1,64} */
	const char	*description;	/* "" when the server gave none */
	const char	*schema_json;	/* inputSchema, '{"type":"object"}'
					   when the server gave none */
	int		 read_only;	/* annotations.readOnlyHint */
	int		 destructive;	/* annotations.destructiveHint (the
					   spec's default is true) */
	struct policy_annotations ann;	/* the hints as sent, for the risk */
};

struct mcp_ctx;
struct mcp_call;

/*
 * Starts initialize + tools/list for every mcp-server in the config (the
 * config must outlive the ctx).  NULL when out of memory.
 */
struct mcp_ctx	*mcp_ctx_new(struct event_base *, const struct config *);
/* Cancels every call silently; not from inside an mcp callback. */
void		 mcp_ctx_free(struct mcp_ctx *);
/*
 * The tools known right now, over all servers, in config order; the
 * array is owned by ctx and valid until the next event-loop turn.
 */
size_t		 mcp_tools(struct mcp_ctx *, const struct mcp_tool **out);
/* The tool named full_name (SERVER__TOOL) right now, or NULL (ctx too). */
const struct mcp_tool *mcp_tool_find(struct mcp_ctx *, const char *full_name);
/* A tool's "annotations" object (NULL: none) as policy weighs it. */
void		 mcp_annotations(const struct cJSON *ann,
		    struct policy_annotations *);
/* 1 once every server's first initialize has succeeded or failed. */
int		 mcp_settled(struct mcp_ctx *);

/*
 * A call's one result.  text: the result content as text (text items
 * joined with "\n", other items as their JSON); is_error: the tool's
 * isError, or a failure; code: NULL on success and isError, "TOOL_ERROR"
 * for JSON-RPC errors, transport failures and unknown tools,
 * "TOOL_TIMEOUT" when the timeout passed.  The call is already freed.
 */
typedef void	(*mcp_result_cb)(void *arg, int is_error, const char *text,
		    const char *code);

/*
 * Calls the tool full_name (SERVER__TOOL) with args_json (an object;
 * NULL or "" mean {}).  timeout_ms 0 takes the server's timeout.  Never
 * calls cb synchronously; returns NULL only when out of memory.
 */
struct mcp_call	*mcp_call(struct mcp_ctx *, const char *full_name,
		    const char *args_json, uint64_t timeout_ms, mcp_result_cb,
		    void *arg);
/* No callback after this; aborts the HTTP transfer. */
void		 mcp_cancel(struct mcp_call *);

/*
 * Requests of the server's: a ping is answered at once, elicitation/create
 * as below, anything else with JSON-RPC error -32601 at once.
 *
 * elicitation/create during a call: the server asks the user something.
 * Without an elicit callback on the call it is declined at once.  With
 * one, the callback gets the question and a handle; message and
 * schema_json (the requestedSchema, a flat JSON object schema) are valid
 * during the callback only.  The handle is the caller's to answer, from
 * inside the callback or later, and stays valid until whichever comes
 * first: mcp_elicit_answer (which frees it) or the end of the call (its
 * result callback, mcp_cancel, mcp_ctx_free), which frees it silently;
 * so a caller drops every handle of a call when the call ends (a worker
 * that dies takes its calls and their handles with it).  The callback
 * may answer or mcp_cancel the call before it returns, not free the
 * ctx; it never runs inside mcp_call.  When no
 * answer has come before a bound (the call's time left, less a margin
 * for the tool to finish) the server is told "decline" and a later
 * mcp_elicit_answer says it was too late.  A call may have a few
 * questions open at once; more are declined.
 */
struct mcp_elicit;
/* Bytes of a question's message, schema or answer's content, at most. */
#define MCP_MAX_ELICIT_TEXT	(64 * 1024)
typedef void	(*mcp_elicit_cb)(void *arg, const char *message,
		    const char *schema_json, struct mcp_elicit *);

/* Sets (or with NULL clears) c's elicit callback, right after mcp_call. */
void		 mcp_call_on_elicit(struct mcp_call *c, mcp_elicit_cb,
		    void *arg);
/*
 * Answers e: action "accept" with content_json (a JSON object, the
 * user's values for the schema's fields), or "decline" or "cancel" with
 * NULL.  0: sent, e freed.  1: too late (already declined at the bound,
 * or the server's session is gone) or out of memory, e freed all the
 * same.  -1: action or content_json not valid, nothing sent, e still
 * valid.
 */
int		 mcp_elicit_answer(struct mcp_elicit *e, const char *action,
		    const char *content_json);

#endif
