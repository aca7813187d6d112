/*
 * Internals of the MCP client, for workers/mcp*.c only (other modules use
 * mcp.h).  mcp.c holds the API, the servers (initialize, tools/list,
 * backoff) and the tool calls; mcp_xfer.c the HTTP transfers (POSTs, SSE,
 * matching our responses, queueing the server's requests); mcp_ask.c the
 * answers to the server's requests (ping, elicitation/create, -32601).
 * Calls go one way, mcp.c -> mcp_ask.c -> mcp_xfer.c and mcp.c ->
 * mcp_xfer.c; what comes back up does so through curlev's callbacks.
 */
#ifndef PARLEY_MCP_INT_H
#define PARLEY_MCP_INT_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "mcp.h"

struct event;
struct curlev;
struct sse_parser;
struct cfg_mcp_server;

#define MCP_MAX_SID		256		/* Mcp-Session-Id */
#define MCP_MAX_ERRMSG		1024
#define MCP_NOTIFY_TIMEOUT	5000		/* ms, fire-and-forget: our
						   notifications and answers */

enum xfer_kind {
	X_INIT,			/* initialize */
	X_INITIALIZED,		/* notifications/initialized */
	X_LIST,			/* tools/list */
	X_CALL,			/* tools/call */
	X_NOTIFY,		/* notifications/cancelled, nobody waits */
	X_ANSWER		/* our response to a server's request, the same */
};

enum srv_state {
	S_INIT,			/* initialize .. tools/list in flight */
	S_READY,
	S_BACKOFF		/* waiting to start over */
};

struct mcp_srv;
struct mcp_call;

/* One HTTP request/response. */
struct xfer {
	struct mcp_ctx		*ctx;
	struct mcp_srv		*srv;		/* NULL: X_NOTIFY, X_ANSWER */
	struct mcp_call		*call;		/* X_CALL */
	enum xfer_kind		 kind;
	TAILQ_ENTRY(xfer)	 entry;
	CURL			*easy;
	struct curl_slist	*hdrs;
	char			*body;
	long			 id;		/* JSON-RPC id, 0: notification */
	int			 sent_sid;	/* carried an Mcp-Session-Id */
	unsigned		 gen;		/* srv->gen when sent */
	int			 is_sse;
	int			 too_big;	/* the body passed max */
	size_t			 max, got;	/* body bytes allowed, read */
	int			 dropped;	/* a request unanswered */
	struct sse_parser	*sse;
	char			*resp;		/* JSON body */
	size_t			 rlen, rcap;
	cJSON			*msg;		/* the matching response */
	char			 sid[MCP_MAX_SID + 1];
	char			 errbuf[CURL_ERROR_SIZE];
};

struct stool {
	char			*name, *full, *desc, *schema;
	int			 read_only, destructive;
	struct policy_annotations ann;
};

struct mcp_srv {
	struct mcp_ctx			*ctx;
	const struct cfg_mcp_server	*cfg;
	TAILQ_ENTRY(mcp_srv)		 entry;
	enum srv_state			 state;
	int				 tried;		/* first attempt over */
	char				*sid;
	const char			*version;
	unsigned			 gen;		/* sessions begun */
	struct xfer			*x;		/* step in flight */
	struct event			*retry;
	uint64_t			 backoff_ms;
	struct stool			*tools;
	size_t				 ntools;
	struct stool			*pend;		/* being listed */
	size_t				 npend;
	unsigned			 pages;
	TAILQ_HEAD(, mcp_call)		 waiting;	/* for a session */
};

/*
 * A request of the server's, read inside libcurl where nothing may be
 * started, kept until mcp_after answers it.
 */
struct ask {
	TAILQ_ENTRY(ask)	 entry;		/* ctx->asks */
	struct mcp_srv		*srv;
	struct mcp_call		*call;		/* whose stream it came in */
	unsigned		 gen;		/* srv->gen then */
	char			 sid[MCP_MAX_SID + 1];	/* "" none */
	cJSON			*msg;
};

/* An elicitation/create waiting for the caller's answer. */
struct mcp_elicit {
	struct mcp_call		*call;
	TAILQ_ENTRY(mcp_elicit)	 entry;		/* call->elicits */
	cJSON			*id;		/* the server's request id */
	unsigned		 gen;
	char			 sid[MCP_MAX_SID + 1];
	struct event		*ev;		/* the bound */
	uint64_t		 wait_ms;
	int			 expired;	/* declined at the bound */
};

struct mcp_call {
	struct mcp_ctx		*ctx;
	struct mcp_srv		*srv;		/* NULL: unknown tool */
	TAILQ_ENTRY(mcp_call)	 entry;		/* ctx->calls */
	TAILQ_ENTRY(mcp_call)	 wentry;	/* srv->waiting */
	int			 waiting;
	char			*tool;		/* the server's name */
	char			*args;
	mcp_result_cb		 cb;
	void			*arg;
	struct event		*ev;		/* timeout, or early failure */
	struct xfer		*x;
	long			 rpc_id;	/* of the last send, 0 none */
	uint64_t		 deadline_ms;	/* when ev times it out */
	mcp_elicit_cb		 ecb;
	void			*earg;
	TAILQ_HEAD(, mcp_elicit) elicits;
	unsigned		 nelicits;
	int			 retried;
	int			 failed;	/* fail_* set, ev fires now */
	int			 fail_err;
	const char		*fail_code;
	char			*fail_text;
};

struct mcp_ctx {
	struct event_base	*base;
	struct curlev		*cv;
	long			 next_id;
	TAILQ_HEAD(, mcp_srv)	 srvs;
	TAILQ_HEAD(, mcp_call)	 calls;
	TAILQ_HEAD(, xfer)	 xfers;
	TAILQ_HEAD(, ask)	 asks;
	unsigned		 nasks;		/* queued */
	unsigned		 nanswers;	/* X_ANSWER in flight */
	struct mcp_tool		*view;		/* what mcp_tools returns */
	size_t			 nview;
	int			 dirty;		/* view needs a rebuild */
};

/* mcp_xfer.c */
void		 xfer_free(struct xfer *);
struct xfer	*xfer_start(struct mcp_ctx *, struct mcp_srv *, enum xfer_kind,
		    long, char *, long, const char *);
int		 xfer_outcome(struct xfer *, CURLcode, char *, size_t, int *);

/* mcp_ask.c */
/* Answers the server's requests queued in ctx->asks; after libcurl only. */
void		 ask_run(struct mcp_ctx *);
/* Drops an open question of a call's, unanswered. */
void		 ask_elicit_free(struct mcp_elicit *);

#endif
