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

#endif
