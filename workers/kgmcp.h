/*
 * Parley's knowledge as an MCP server (parley-knowledge(7)): POST /mcp,
 * the Streamable HTTP transport (protocol revisions 2025-06-18,
 * 2025-03-26, 2024-11-05), the tools knowledge_query and knowledge_act
 * (kgtool.h) and the resources parley-knowledge://P (Markdown) and
 * parley-knowledge://P/json.  Any worker answers it; the project's own
 * worker is reached through kgcall.c.
 */
#ifndef PARLEY_WORKERS_KGMCP_H
#define PARLEY_WORKERS_KGMCP_H

#define KGMCP_PATH	"/mcp"
#define KGMCP_BODY_MAX	(2u * 1024 * 1024)	/* bytes of a POST */
#define KGMCP_BATCH_MAX	64			/* messages of a batch */

struct conn;

/* Answers c's request when it is for /mcp: 1, else 0 (not ours). */
int	kgmcp_http(struct conn *);

#endif
