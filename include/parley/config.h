/*
 * parleyd.conf(5): parsed once, in the supervisor, from a keyword table.
 * Errors come back as "FILE:LINE: what was wrong".
 */
#ifndef PARLEY_CONFIG_H
#define PARLEY_CONFIG_H

#include <sys/queue.h>
#include <stddef.h>
#include <stdint.h>

#include "parley/jwt.h"
#include "parley/policy.h"

#define CFG_DEFAULT_PATH	"/etc/parleyd/parleyd.conf"

enum cfg_fsync { CFG_FSYNC_ALWAYS, CFG_FSYNC_BATCH, CFG_FSYNC_NO };

/*
 * "listen 127.0.0.1:7777", "listen [::1]:7777", "listen 7777" (= 127.0.0.1).
 * host is stored without brackets; loopback = 1 for 127.0.0.0/8, ::1
 * (and ::ffff:127.x) or "localhost".
 */
struct pp_cidr;

struct cfg_listen {
	char			 host[64];
	char			 port[8];
	TAILQ_ENTRY(cfg_listen)	 entry;
	int			 loopback;
	int			 optional;	/* ::1 of a bare port */
	int			 tls;		/* "listen ... tls" */
	int			 proxy_protocol; /* trusted peers send a
						   PROXY header first */
	unsigned		 line;		/* 0 = built-in default */
};

/* tls-protocols: which TLS versions a tls listener offers. */
#define CFG_TLS_1_2	0x01
#define CFG_TLS_1_3	0x02

/* token SECRET role ROLE [session ID], or token-env VAR role ROLE [...]. */
struct cfg_token {
	char			*secret;
	char			 role[16];	/* user|agent|observer|admin */
	char			*session;	/* NULL = any session */
	TAILQ_ENTRY(cfg_token)	 entry;
	unsigned		 line;
};

/*
 * One word of a repeatable directive: allowed-origin ORIGIN (scheme://host
 * [:port], lower-cased, or "*"), server-name NAME[:PORT] (or "*").
 */
struct cfg_name {
	char			*name;
	TAILQ_ENTRY(cfg_name)	 entry;
	unsigned		 line;
};
TAILQ_HEAD(cfg_names, cfg_name);

/*
 * provider NAME { type openai|anthropic|script; ... }. reply, chunk,
 * delay and stamp are only set for script; url .. max_reply only for
 * openai and anthropic (for script they keep their defaults).
 */
#define CFG_STORE_WAIT_MAX	16	/* store-wait replicas */
#define CFG_STORE_WAIT_MS	1000	/* its default timeout */
#define CFG_STORE_WAIT_MAX_MS	4000	/* under the store's 5s deadline */
#define CFG_ATTEMPT_TIMEOUT	(10 * 60 * 1000ULL)	/* ms */
#define CFG_MAX_REPLY_BODY	((size_t)64 * 1024 * 1024)
#define CFG_MAX_RESULT		((size_t)1024 * 1024)	/* mcp-server */

struct cfg_provider {
	char			 name[64];
	char			 type[16];	/* "openai", "anthropic", "script" */
	char			*reply;
	unsigned		 chunk;		/* default 4, 1..65536 */
	unsigned		 delay_ms;	/* default 20 */
	int			 stamp;		/* chunks are the CLOCK_REALTIME
						   us + ' ', default 0 */
	char			*url;		/* no trailing '/'; the type's
						   default filled in, NULL for
						   script */
	char			*api_key_env;	/* variable name, NULL = no key;
						   read per request, not here */
	char			*model;		/* required for openai/anthropic */
	unsigned		 max_tokens;	/* 1..1000000; default 1024 for
						   anthropic, 0 = not sent */
	double			 temperature;	/* 0..2, if has_temperature */
	int			 has_temperature;
	uint64_t		 timeout_ms;	/* first byte, default 60s */
	uint64_t		 idle_timeout_ms;	/* between bytes, default 60s */
	double			 price_input;	/* USD per 1M tokens, default 0 */
	double			 price_output;	/* same */
	unsigned		 max_retries;	/* 0..10, default 2 */
	uint64_t		 attempt_timeout_ms;	/* one attempt, start to
						   end, default 10m */
	size_t			 max_reply;	/* body bytes of one attempt,
						   default 64m */
	int			 embedder;	/* an embedder block: type
						   openai, /v1/embeddings */
	TAILQ_ENTRY(cfg_provider) entry;
	unsigned		 line;		/* 0 = built-in demo */
};

/*
 * mcp-server NAME { url URL; header "K: V"; timeout DURATION; max-result
 * SIZE }: a Model Context Protocol server reached over Streamable HTTP.
 * NAME is 1 to 32 of [A-Za-z0-9_-] without "__": tools are offered as
 * NAME__TOOL.
 */
#define CFG_MCP_MAX_HEADERS	32
struct cfg_mcp_server {
	char			 name[33];
	char			*url;		/* the MCP endpoint, as given */
	char			*headers[CFG_MCP_MAX_HEADERS];	/* "K: V" */
	unsigned		 nheaders;
	uint64_t		 timeout_ms;	/* per tool call, default 30s */
	size_t			 max_result;	/* a tools/call response,
						   default 1m */
	TAILQ_ENTRY(cfg_mcp_server) entry;
	unsigned		 line;
};

struct config {
	char			*path;		/* NULL for built-in defaults */
	TAILQ_HEAD(cfg_listens, cfg_listen) listens;	/* default 127.0.0.1:7777 */
	unsigned		 workers;	/* 0 = auto (one per CPU) */
	char			*state_dir;	/* default /var/lib/parleyd */
	char			*store;		/* "local" */
	char			*host_id;	/* default: the host name */
	uint64_t		 lease_ms;	/* default 10s (redis) */
	/* Redis WAIT after each write: replicas (0 = off), its timeout. */
	unsigned		 store_wait;
	unsigned		 store_wait_ms;		/* default 1s */
	enum cfg_fsync		 fsync;		/* default batch */
	uint64_t		 retention_ms;	/* default 24h */
	uint64_t		 idle_timeout_ms;	/* default 10m */
	uint64_t		 flush_interval_ms;	/* default 20ms, 0..1000ms */
	uint64_t		 heartbeat_ms;		/* default 15s */
	uint64_t		 dashboard_ms;	/* metrics events, default 5s */
	uint64_t		 handshake_timeout_ms;	/* default 10s */
	uint64_t		 shutdown_timeout_ms;	/* default 10s */
	size_t			 max_request_line;	/* default 8k */
	size_t			 max_header_size;	/* default 16k */
	unsigned		 max_headers;		/* default 64 */
	size_t			 max_body;		/* default 1m */
	size_t			 max_frame;		/* default 1m */
	size_t			 max_message;		/* default 1m */
	unsigned		 max_json_depth;	/* default 32 */
	size_t			 max_output_buffer;	/* default 256k */
	unsigned		 max_sessions;		/* per worker, default 10000 */
	unsigned		 max_connections;	/* per worker, default 20000 */
	unsigned		 max_conn_per_addr;	/* default 1000, 0 =
							   unlimited */
	unsigned		 conn_rate_per_addr;	/* new ones a second,
							   0 (default) = any */
	struct pp_cidr		*trusted;	/* trusted-proxy prefixes */
	unsigned		 ntrusted;
	uint64_t		 lingering_time_ms;	/* default 30s */
	int			 web_ui;	/* serve /ui/ (default 1) */
	uint64_t		 lingering_timeout_ms;	/* default 5s */
	/* Sessions created per window (session-create-window, default 1m)
	 * by one client address and by one token subject, summed over the
	 * host's workers; 0 = unlimited.  Default 1000 each. */
	unsigned		 max_sess_per_addr;
	unsigned		 max_sess_per_subject;
	uint64_t		 sess_create_window_ms;
	/* Bytes a session's log may take in (client and server events),
	 * default 256m; 0 = unlimited. */
	size_t			 session_log_quota;
	unsigned		 max_turns;	/* model calls in one turn, default 10 */
	unsigned		 max_agents;	/* internal agents a session may
						   have, default 8 */
	unsigned		 max_team_turns; /* agents' turns on one user
						   message, default 8 */
	uint64_t		 tool_timeout_ms;	/* one tool call, default 30s */
	/* Tool approvals: see "TOOL APPROVALS" in parleyd.conf(5). */
	struct policy_rules	 tool_policies;	/* tool-policy, in file order */
	enum policy_autonomy	 autonomy;	/* a session's, default
						   SUPERVISED */
	enum policy_autonomy	 max_autonomy;	/* most autonomous a client
						   may set, default FULL_AUTO */
	uint64_t		 approval_timeout_ms;	/* default 24h */
	uint64_t		 client_tool_timeout_ms; /* default 10m */
	uint64_t		 action_timeout_ms;	/* an agent's proposed
						   action, default 1h */
	unsigned		 thought_rate;	/* per agent per minute, 20 */
	unsigned		 thought_queue_depth;	/* default 50 events */
	uint64_t		 agent_reconnect_timeout_ms; /* default 2m */
	char			*audit_log;	/* JSON lines PATH, NULL = none */
	char			*default_provider;	/* default "demo" */
	TAILQ_HEAD(, cfg_provider) providers;
	TAILQ_HEAD(, cfg_token)	 tokens;
	struct cfg_names	 allowed_origins;	/* browser pages of
							   other origins */
	struct cfg_names	 server_names;	/* Host names besides the
						   listener's address */
	/* jwt-key, jwt-jwks, jwt-issuer, ...: keys read at load, so workers
	 * forked after the privilege drop hold them; nkeys 0: no JWTs. */
	struct jwt_keys		 jwt;
	uint64_t		 jwt_leeway_ms;	/* default 30s */
	uint64_t		 jwt_grace_ms;	/* refresh window after exp,
						   default 60s */
	TAILQ_HEAD(, cfg_mcp_server) mcp_servers;
	/* Knowledge: see "KNOWLEDGE" in parleyd.conf(5). */
	struct cfg_names	 index_roots;	/* index-root, each the
						   directory's realpath(3) */
	int			 index_watch;	/* inotify, default 0 */
	size_t			 index_max_file;	/* bigger files are
							   skipped, default 1m */
	unsigned		 index_max_files;	/* default 100000 */
	size_t			 index_max_bytes;	/* text indexed in
							   all, default 1g */
	unsigned		 kb_max_documents;	/* per session,
							   default 1000 */
	size_t			 kb_max_bytes;	/* per session, default 16m */
	int			 knowledge_tools;	/* agents' knowledge_*
							   tools, default 1 */
	size_t			 knowledge_max_entities;	/* live, per
							   project, default
							   100000 */
	int			 rag;		/* retrieval in turns, default 1 */
	unsigned		 rag_top_k;	/* chunks, default 5 */
	unsigned		 rag_budget;	/* tokens of them, default 2000 */
	struct cfg_provider	*embedder;	/* NULL: keyword search only */
	char			*log_level;	/* error|warn|info|debug, default info */
	char			*pid_file;	/* default NULL (none) */
	int			 log_json;	/* log-format json */
	char			*log_file;	/* stderr|syslog|PATH, NULL = by -d */
	char			*control_socket;	/* PATH, "none", NULL =
							   parleyd's default */
	char			*control_owner;	/* NULL = user */
	char			*control_group;	/* NULL = group */
	unsigned		 control_mode;	/* default 0660 */
	char			*user;		/* drop to it when root */
	char			*group;
	uint64_t		 drain_timeout_ms;	/* default 30s */
	/* TLS listeners (supervisor/tls.c loads and checks the files);
	 * each *_line is where the directive was, for its errors. */
	char			*tls_cert;	/* tls-certificate PATH */
	char			*tls_key;	/* tls-key PATH */
	char			*tls_ciphers;	/* OpenSSL list, NULL = its
						   default */
	unsigned		 tls_protocols;	/* CFG_TLS_*, default both */
	unsigned		 tls_cert_line, tls_key_line, tls_ciphers_line;
	unsigned		 ntls;		/* listeners with "tls" */
};

/* Built-in defaults, with the "demo" script provider as default provider. */
struct config		*config_default(void);
/*
 * Parses path. If must_exist is 0 and the file does not exist, returns the
 * defaults (path NULL). On error returns NULL with "file:line: reason" (or
 * "file: strerror") in err.
 */
struct config		*config_load(const char *path, int must_exist, char *err,
			    size_t errlen);
/* Same from a string (for tests); name is used in messages. */
struct config		*config_parse_string(const char *name, const char *text,
			    char *err, size_t errlen);
void			 config_free(struct config *);
const struct cfg_provider *config_provider(const struct config *,
			    const char *name);
/* Every directive the parser knows, NULL-terminated. */
const char *const	*config_directives(void);

#endif
