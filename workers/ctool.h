/*
 * Client-side MCP tools: tools that a connected client registers
 * (mcp_tools) and executes (mcp_call, answered by mcp_result).  The
 * registrations belong to the session: each change is logged as a
 * client_tools event with the whole list, and meta keeps the list
 * ("clientTools"), so they survive reconnects, restarts and failover.
 * The model sees them as SERVER__TOOL like the operator's MCP tools, which
 * win a clash of names.
 */
#ifndef PARLEY_WORKERS_CTOOL_H
#define PARLEY_WORKERS_CTOOL_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct sess;
struct sess_result;
struct llm_tool_def;

#define CTOOL_MAX		64	/* tools registered in a session */

/*
 * mcp_tools from a client (msg: its fields), by role: replaces the tools
 * of every server it names ("tools" entries and "servers"); no tool and
 * no server withdraws them all.  Returns the seq of the logged
 * client_tools event, or 0 with r's error set (nothing changed).
 */
uint64_t	 ctool_register(struct sess *, const cJSON *msg,
		    const char *by, struct sess_result *r);
/* The registration of tool full_name (SERVER__TOOL), or NULL. */
const cJSON	*ctool_find(struct sess *, const char *full_name);
/*
 * Fills defs (room for max) with the session's tools, for the model,
 * leaving out names taken(arg, name) says are taken; returns how many.
 * The strings belong to meta: valid until it changes.
 */
size_t		 ctool_defs(struct sess *, struct llm_tool_def *defs,
		    size_t max, int (*taken)(void *, const char *), void *arg);
/*
 * A client's mcp_result as the text the model reads: "result" (a string
 * as it is; an MCP CallToolResult's content as text, its isError kept;
 * other JSON as its text) or "error" (a string, or an object's
 * "message").  Returns malloc'd text and *is_error, or NULL with err set
 * when the message is not one of these.
 */
char		*ctool_result_text(const cJSON *msg, int *is_error, char *err,
		    size_t errlen);

#endif
