/*
 * parleyd.conf(5) parser: a line tokenizer feeding a keyword table.
 *
 * Each line is split into words (blanks separate, '#' starts a comment
 * outside quotes, "..." with \" \\ \n escapes), the first word is looked up
 * in the table, and the entry decides where it may appear, how many
 * arguments it takes, whether it may repeat, and which handler stores it.
 * Cross-directive checks run once the whole file has been read.
 */

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parley/config.h"
#include "parley/util.h"
#include "config_int.h"

#define CFG_MAX_FILE	(1024 * 1024)
#define CFG_MAX_PATH	1024
#define CFG_MAX_ENV	255
#define CFG_MAX_GLOB	256

#define DEMO_REPLY "Hello from Parley. This is the built-in demo provider: " \
	"it streams this fixed reply so you can see sessions, streaming and " \
	"resume work. To talk to a real model, add a provider block to " \
	"parleyd.conf (see parleyd.conf(5)) and set default-provider."

/* The handlers in this file; config_int.h declares the others (cfg_kw_*). */
static cfg_kw_fn kw_workers, kw_path, kw_store, kw_host_id, kw_fsync,
    kw_duration, kw_size, kw_number, kw_count, kw_default_provider, kw_log_level,
    kw_log_format, kw_log_file, kw_tool_policy, kw_autonomy, kw_audit_log,
    kw_store_wait;

/*
 * The one list of directives; both the keyword table and
 * config_directives() are generated from it so they cannot drift apart.
 * X(name, where, min, max, flags, handler, field, lo, hi, usage)
 */
#define CFG_KEYWORDS(X) \
	X("listen", KW_TOP, 1, 3, KWF_MULTI, cfg_kw_listen, 0, 0, 0, \
	    "listen [HOST:]PORT [tls] [proxy-protocol]") \
	X("tls-certificate", KW_TOP, 1, 1, 0, cfg_kw_tls_file, C(tls_cert), \
	    0, 0, "tls-certificate PATH") \
	X("tls-key", KW_TOP, 1, 1, 0, cfg_kw_tls_file, C(tls_key), \
	    0, 0, "tls-key PATH") \
	X("tls-ciphers", KW_TOP, 1, 1, 0, cfg_kw_tls_ciphers, 0, 0, 0, \
	    "tls-ciphers LIST") \
	X("tls-protocols", KW_TOP, 1, 2, 0, cfg_kw_tls_protocols, 0, 0, 0, \
	    "tls-protocols TLSv1.2|TLSv1.3 ...") \
	X("workers", KW_TOP, 1, 1, 0, kw_workers, 0, 0, 0, \
	    "workers auto|N") \
	X("state-dir", KW_TOP, 1, 1, 0, kw_path, C(state_dir), 0, 0, \
	    "state-dir PATH") \
	X("store", KW_TOP, 1, 1, 0, kw_store, 0, 0, 0, \
	    "store local|redis://HOST:PORT[/DB]|sentinel://HOST:PORT,.../NAME"\
	    "|cluster://HOST:PORT,...") \
	X("host-id", KW_TOP, 1, 1, 0, kw_host_id, 0, 0, 0, "host-id NAME") \
	X("lease-time", KW_TOP, 1, 1, 0, kw_duration, C(lease_ms), \
	    500, 10 * MS_M, "lease-time DURATION") \
	X("store-wait", KW_TOP, 1, 2, 0, kw_store_wait, 0, 0, 0, \
	    "store-wait REPLICAS [TIMEOUT]") \
	X("fsync", KW_TOP, 1, 1, 0, kw_fsync, 0, 0, 0, \
	    "fsync always|batch|no") \
	X("retention", KW_TOP, 1, 1, 0, kw_duration, C(retention_ms), \
	    MS_S, 3650 * MS_D, "retention DURATION") \
	X("idle-timeout", KW_TOP | KW_PROVIDER, 1, 1, KWF_HTTP, \
	    cfg_kw_idle_timeout, C(idle_timeout_ms), MS_S, 30 * MS_D, \
	    "idle-timeout DURATION") \
	X("flush-interval", KW_TOP, 1, 1, 0, kw_duration, \
	    C(flush_interval_ms), 0, MS_S, "flush-interval DURATION") \
	X("heartbeat-interval", KW_TOP, 1, 1, 0, kw_duration, \
	    C(heartbeat_ms), MS_S, MS_H, "heartbeat-interval DURATION") \
	X("dashboard-interval", KW_TOP, 1, 1, 0, kw_duration, \
	    C(dashboard_ms), 100, MS_H, "dashboard-interval DURATION") \
	X("handshake-timeout", KW_TOP, 1, 1, 0, kw_duration, \
	    C(handshake_timeout_ms), 100, 10 * MS_M, \
	    "handshake-timeout DURATION") \
	X("shutdown-timeout", KW_TOP, 1, 1, 0, kw_duration, \
	    C(shutdown_timeout_ms), 0, MS_H, "shutdown-timeout DURATION") \
	X("max-request-line", KW_TOP, 1, 1, 0, kw_size, \
	    C(max_request_line), 256, MIB, "max-request-line SIZE") \
	X("max-header-size", KW_TOP, 1, 1, 0, kw_size, C(max_header_size), \
	    KIB, MIB, "max-header-size SIZE") \
	X("max-headers", KW_TOP, 1, 1, 0, kw_number, C(max_headers), \
	    1, 1024, "max-headers N") \
	X("max-body", KW_TOP, 1, 1, 0, kw_size, C(max_body), KIB, GIB, \
	    "max-body SIZE") \
	X("max-frame", KW_TOP, 1, 1, 0, kw_size, C(max_frame), KIB, GIB, \
	    "max-frame SIZE") \
	X("max-message", KW_TOP, 1, 1, 0, kw_size, C(max_message), KIB, GIB, \
	    "max-message SIZE") \
	X("max-json-depth", KW_TOP, 1, 1, 0, kw_number, C(max_json_depth), \
	    1, 1024, "max-json-depth N") \
	X("max-output-buffer", KW_TOP, 1, 1, 0, kw_size, \
	    C(max_output_buffer), 4 * KIB, GIB, "max-output-buffer SIZE") \
	X("max-sessions", KW_TOP, 1, 1, 0, kw_number, C(max_sessions), \
	    1, 1000000, "max-sessions N") \
	X("max-connections", KW_TOP, 1, 1, 0, kw_number, \
	    C(max_connections), 1, 1000000, "max-connections N") \
	X("max-turns", KW_TOP, 1, 1, 0, kw_number, C(max_turns), 1, 100, \
	    "max-turns N") \
	X("max-agents", KW_TOP, 1, 1, 0, kw_number, C(max_agents), 1, 64, \
	    "max-agents N") \
	X("max-team-turns", KW_TOP, 1, 1, 0, kw_number, C(max_team_turns), \
	    1, 100, "max-team-turns N") \
	X("tool-timeout", KW_TOP, 1, 1, 0, kw_duration, C(tool_timeout_ms), \
	    100, MS_H, "tool-timeout DURATION") \
	X("tool-policy", KW_TOP, 2, 2, KWF_MULTI, kw_tool_policy, 0, 0, 0, \
	    "tool-policy GLOB low|medium|high|critical|allow|deny") \
	X("autonomy", KW_TOP, 1, 1, 0, kw_autonomy, C(autonomy), 0, 0, \
	    "autonomy FULL_AUTO|SUPERVISED|CAUTIOUS|MANUAL") \
	X("max-autonomy", KW_TOP, 1, 1, 0, kw_autonomy, C(max_autonomy), \
	    0, 0, "max-autonomy FULL_AUTO|SUPERVISED|CAUTIOUS|MANUAL") \
	X("approval-timeout", KW_TOP, 1, 1, 0, kw_duration, \
	    C(approval_timeout_ms), MS_S, 30 * MS_D, \
	    "approval-timeout DURATION") \
	X("client-tool-timeout", KW_TOP, 1, 1, 0, kw_duration, \
	    C(client_tool_timeout_ms), 100, 30 * MS_D, \
	    "client-tool-timeout DURATION") \
	X("action-timeout", KW_TOP, 1, 1, 0, kw_duration, \
	    C(action_timeout_ms), MS_S, 30 * MS_D, \
	    "action-timeout DURATION") \
	X("thought-rate", KW_TOP, 1, 1, 0, kw_number, C(thought_rate), \
	    1, 10000, "thought-rate N") \
	X("thought-queue-depth", KW_TOP, 1, 1, 0, kw_number, \
	    C(thought_queue_depth), 1, 1000000, "thought-queue-depth N") \
	X("agent-reconnect-timeout", KW_TOP, 1, 1, 0, kw_duration, \
	    C(agent_reconnect_timeout_ms), 100, MS_D, \
	    "agent-reconnect-timeout DURATION") \
	X("audit-log", KW_TOP, 1, 1, 0, kw_audit_log, C(audit_log), 0, 0, \
	    "audit-log PATH|none") \
	X("max-connections-per-address", KW_TOP, 1, 3, 0, \
	    cfg_kw_max_conn_addr, C(max_conn_per_addr), 0, 1000000, \
	    "max-connections-per-address N [rate PER-SECOND]") \
	X("trusted-proxy", KW_TOP, 1, 1, KWF_MULTI, cfg_kw_trusted_proxy, \
	    0, 0, 0, "trusted-proxy ADDRESS[/PREFIX]") \
	X("lingering-time", KW_TOP, 1, 1, 0, kw_duration, \
	    C(lingering_time_ms), 0, 10 * MS_M, "lingering-time DURATION") \
	X("lingering-timeout", KW_TOP, 1, 1, 0, kw_duration, \
	    C(lingering_timeout_ms), 100, 10 * MS_M, \
	    "lingering-timeout DURATION") \
	X("max-sessions-per-address", KW_TOP, 1, 1, 0, kw_number, \
	    C(max_sess_per_addr), 0, 1000000, \
	    "max-sessions-per-address N") \
	X("max-sessions-per-subject", KW_TOP, 1, 1, 0, kw_number, \
	    C(max_sess_per_subject), 0, 1000000, \
	    "max-sessions-per-subject N") \
	X("session-create-window", KW_TOP, 1, 1, 0, kw_duration, \
	    C(sess_create_window_ms), MS_S, MS_D, \
	    "session-create-window DURATION") \
	X("session-log-quota", KW_TOP, 1, 1, 0, kw_size, \
	    C(session_log_quota), 0, 1024 * GIB, "session-log-quota SIZE") \
	X("default-provider", KW_TOP, 1, 1, 0, kw_default_provider, 0, 0, 0, \
	    "default-provider NAME") \
	X("token", KW_TOP, 3, 5, KWF_MULTI, cfg_kw_token, 0, 0, 0, \
	    "token SECRET role ROLE [session ID]") \
	X("token-env", KW_TOP, 3, 5, KWF_MULTI, cfg_kw_token_env, 0, 0, 0, \
	    "token-env VARIABLE role ROLE [session ID]") \
	X("allowed-origin", KW_TOP, 1, 1, KWF_MULTI, cfg_kw_allowed_origin, \
	    0, 0, 0, "allowed-origin SCHEME://HOST[:PORT]|*") \
	X("server-name", KW_TOP, 1, 1, KWF_MULTI, cfg_kw_server_name, 0, 0, 0, \
	    "server-name NAME[:PORT]|*") \
	X("jwt-key", KW_TOP, 2, 4, KWF_MULTI, cfg_kw_jwt_key, 0, 0, 0, \
	    "jwt-key FILE RS256|PS256|ES256|ES384|EdDSA|HS256|HS512 [kid ID]") \
	X("jwt-jwks", KW_TOP, 1, 1, KWF_MULTI, cfg_kw_jwt_jwks, 0, 0, 0, \
	    "jwt-jwks FILE") \
	X("jwt-issuer", KW_TOP, 1, 1, 0, cfg_kw_jwt_claim, \
	    C(jwt.issuer), 0, 0, "jwt-issuer ISSUER") \
	X("jwt-audience", KW_TOP, 1, 1, 0, cfg_kw_jwt_claim, \
	    C(jwt.audience), 0, 0, "jwt-audience AUDIENCE") \
	X("jwt-leeway", KW_TOP, 1, 1, 0, kw_duration, C(jwt_leeway_ms), \
	    0, 10 * MS_M, "jwt-leeway DURATION") \
	X("jwt-require-exp", KW_TOP, 1, 1, 0, cfg_kw_yesno, \
	    C(jwt.require_exp), 0, 0, "jwt-require-exp yes|no") \
	X("jwt-grace", KW_TOP, 1, 1, 0, kw_duration, C(jwt_grace_ms), \
	    0, MS_H, "jwt-grace DURATION") \
	X("log-level", KW_TOP, 1, 1, 0, kw_log_level, 0, 0, 0, \
	    "log-level error|warn|info|debug") \
	X("pid-file", KW_TOP, 1, 1, 0, kw_path, C(pid_file), 0, 0, \
	    "pid-file PATH") \
	X("log-format", KW_TOP, 1, 1, 0, kw_log_format, 0, 0, 0, \
	    "log-format text|json") \
	X("log-file", KW_TOP, 1, 1, 0, kw_log_file, 0, 0, 0, \
	    "log-file stderr|syslog|PATH") \
	X("control-socket", KW_TOP, 1, 7, 0, cfg_kw_control_socket, 0, 0, 0, \
	    "control-socket PATH|none [owner USER] [group GROUP] [mode MODE]") \
	X("user", KW_TOP, 1, 1, 0, cfg_kw_account, C(user), 0, 0, "user NAME") \
	X("group", KW_TOP, 1, 1, 0, cfg_kw_account, C(group), 0, 0, \
	    "group NAME") \
	X("web-ui", KW_TOP, 1, 1, 0, cfg_kw_yesno, C(web_ui), 0, 0, \
	    "web-ui yes|no") \
	X("index-root", KW_TOP, 1, 1, KWF_MULTI, cfg_kw_index_root, 0, 0, 0, \
	    "index-root PATH") \
	X("index-watch", KW_TOP, 1, 1, 0, cfg_kw_yesno, C(index_watch), \
	    0, 0, "index-watch yes|no") \
	X("index-max-file", KW_TOP, 1, 1, 0, kw_size, C(index_max_file), \
	    KIB, GIB, "index-max-file SIZE") \
	X("index-max-files", KW_TOP, 1, 1, 0, kw_number, \
	    C(index_max_files), 1, 10000000, "index-max-files N") \
	X("index-max-bytes", KW_TOP, 1, 1, 0, kw_size, C(index_max_bytes), \
	    MIB, 1024 * GIB, "index-max-bytes SIZE") \
	X("kb-max-documents", KW_TOP, 1, 1, 0, kw_number, \
	    C(kb_max_documents), 1, 1000000, "kb-max-documents N") \
	X("kb-max-bytes", KW_TOP, 1, 1, 0, kw_size, C(kb_max_bytes), KIB, \
	    GIB, "kb-max-bytes SIZE") \
	X("knowledge-tools", KW_TOP, 1, 1, 0, cfg_kw_onoff, \
	    C(knowledge_tools), 0, 0, "knowledge-tools on|off") \
	X("knowledge-max-entities", KW_TOP, 1, 1, 0, kw_count, \
	    C(knowledge_max_entities), 1, 10000000, \
	    "knowledge-max-entities N") \
	X("rag", KW_TOP, 1, 1, 0, cfg_kw_onoff, C(rag), 0, 0, "rag on|off") \
	X("rag-top-k", KW_TOP, 1, 1, 0, kw_number, C(rag_top_k), 1, 100, \
	    "rag-top-k N") \
	X("rag-budget", KW_TOP, 1, 1, 0, kw_number, C(rag_budget), 50, \
	    1000000, "rag-budget TOKENS") \
	X("embedder", KW_TOP, 1, 1, KWF_BLOCK, cfg_kw_embedder, 0, 0, 0, \
	    "embedder NAME {") \
	X("drain-timeout", KW_TOP, 1, 1, 0, kw_duration, C(drain_timeout_ms), \
	    0, MS_H, "drain-timeout DURATION") \
	X("provider", KW_TOP, 1, 1, KWF_MULTI | KWF_BLOCK, cfg_kw_provider, \
	    0, 0, 0, "provider NAME {") \
	X("type", KW_PROVIDER, 1, 1, KWF_EMBED, cfg_kw_ptype, 0, 0, 0, \
	    "type openai|anthropic|script") \
	X("reply", KW_PROVIDER, 1, 1, KWF_SCRIPT, cfg_kw_preply, 0, 0, 0, \
	    "reply \"TEXT\"") \
	X("chunk", KW_PROVIDER, 1, 1, KWF_SCRIPT, kw_number, P(chunk), \
	    1, 65536, "chunk N") \
	X("delay", KW_PROVIDER, 1, 1, KWF_SCRIPT, cfg_kw_pdelay, 0, 0, \
	    60 * MS_S, "delay DURATION") \
	X("stamp", KW_PROVIDER, 1, 1, KWF_SCRIPT, cfg_kw_yesno, P(stamp), \
	    0, 0, "stamp yes|no") \
	X("url", KW_PROVIDER | KW_MCP, 1, 1, KWF_HTTP | KWF_EMBED, \
	    cfg_kw_purl, 0, 0, 0, \
	    "url URL") \
	X("api-key-env", KW_PROVIDER, 1, 1, KWF_HTTP | KWF_EMBED, \
	    cfg_kw_pkeyenv, 0, 0, 0, \
	    "api-key-env VARIABLE") \
	X("model", KW_PROVIDER, 1, 1, KWF_HTTP | KWF_EMBED, \
	    cfg_kw_pmodel, 0, 0, 0, \
	    "model NAME") \
	X("max-tokens", KW_PROVIDER, 1, 1, KWF_HTTP, kw_number, \
	    P(max_tokens), 1, 1000000, "max-tokens N") \
	X("temperature", KW_PROVIDER, 1, 1, KWF_HTTP, cfg_kw_pdecimal, \
	    P(temperature), 0, 2, "temperature NUMBER") \
	X("timeout", KW_PROVIDER | KW_MCP, 1, 1, KWF_HTTP | KWF_EMBED, \
	    cfg_kw_timeout, \
	    P(timeout_ms), PROV_TIMEOUT_LO, PROV_TIMEOUT_HI, \
	    "timeout DURATION") \
	X("price-input", KW_PROVIDER, 1, 1, KWF_HTTP, cfg_kw_pdecimal, \
	    P(price_input), 0, 1000000, "price-input NUMBER") \
	X("price-output", KW_PROVIDER, 1, 1, KWF_HTTP, cfg_kw_pdecimal, \
	    P(price_output), 0, 1000000, "price-output NUMBER") \
	X("max-retries", KW_PROVIDER, 1, 1, KWF_HTTP, kw_number, \
	    P(max_retries), 0, 10, "max-retries N") \
	X("attempt-timeout", KW_PROVIDER, 1, 1, KWF_HTTP, kw_duration, \
	    P(attempt_timeout_ms), MS_S, MS_D, "attempt-timeout DURATION") \
	X("max-reply", KW_PROVIDER, 1, 1, KWF_HTTP, kw_size, P(max_reply), \
	    64 * KIB, GIB, "max-reply SIZE") \
	X("max-result", KW_MCP, 1, 1, 0, kw_size, M(max_result), KIB, \
	    256 * MIB, "max-result SIZE") \
	X("mcp-server", KW_TOP, 1, 1, KWF_MULTI | KWF_BLOCK, \
	    cfg_kw_mcp_server, 0, 0, 0, "mcp-server NAME {") \
	X("header", KW_MCP, 1, 1, KWF_MULTI, cfg_kw_header, 0, 0, 0, \
	    "header \"NAME: VALUE\"")

#define KW_ENTRY(n, w, mn, mx, fl, fn, off, lo, hi, u) \
	{ n, w, mn, mx, fl, fn, off, lo, hi, u },
#define KW_NAME(n, w, mn, mx, fl, fn, off, lo, hi, u) n,

static const struct keyword keywords[] = {
	CFG_KEYWORDS(KW_ENTRY)
};
#define NKEYWORDS	(sizeof(keywords) / sizeof(keywords[0]))
_Static_assert(NKEYWORDS <= CFG_MAX_KEYWORDS,
    "raise CFG_MAX_KEYWORDS in config_int.h");

static const char *const keyword_names[] = {
	CFG_KEYWORDS(KW_NAME)
	NULL
};

int
cfg_perr_at(struct parser *p, unsigned line, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	if (p->err == NULL || p->errlen == 0)
		return -1;
	n = snprintf(p->err, p->errlen, "%s:%u: ", p->name, line);
	if (n < 0 || (size_t)n >= p->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int
cfg_is_name(const char *s, size_t maxlen)
{
	size_t	n;

	for (n = 0; s[n] != '\0'; n++)
		if (!is_alnum((unsigned char)s[n]) && s[n] != '.' &&
		    s[n] != '_' && s[n] != '-')
			return 0;
	return n > 0 && n <= maxlen;
}

int
cfg_is_word(const char *s, size_t maxlen)
{
	size_t	n;

	for (n = 0; s[n] != '\0'; n++)
		if ((unsigned char)s[n] <= ' ' || (unsigned char)s[n] >= 0x7f)
			return 0;
	return n > 0 && n <= maxlen;
}

/* Decimal digits only into *v; returns the first non-digit or NULL. */
static const char *
parse_digits(const char *s, uint64_t *v)
{
	uint64_t	x = 0;
	const char	*q;

	if (!is_digit((unsigned char)*s))
		return NULL;
	for (q = s; is_digit((unsigned char)*q); q++) {
		if (x > (UINT64_MAX - (uint64_t)(*q - '0')) / 10)
			return NULL;
		x = x * 10 + (uint64_t)(*q - '0');
	}
	*v = x;
	return q;
}

int
cfg_parse_uint(const char *s, uint64_t *v)
{
	const char	*q = parse_digits(s, v);

	return q != NULL && *q == '\0' ? 0 : -1;
}

/*
 * "2", "0.7", "15.25": digits with an optional fraction, no sign or
 * exponent, parsed without the locale (strtod would honour LC_NUMERIC).
 */
int
cfg_parse_decimal(const char *s, double *v)
{
	const char	*q;
	uint64_t	 ip, frac = 0, scale = 1;

	if ((q = parse_digits(s, &ip)) == NULL || ip > 1000000000000ULL)
		return -1;
	if (*q == '.') {
		if (!is_digit((unsigned char)*++q))
			return -1;
		/* Digits past the 15th cannot change a double; skip them. */
		for (; is_digit((unsigned char)*q); q++)
			if (scale < 1000000000000000ULL) {
				frac = frac * 10 + (uint64_t)(*q - '0');
				scale *= 10;
			}
	}
	if (*q != '\0')
		return -1;
	*v = (double)ip + (double)frac / (double)scale;
	return 0;
}

/* "20ms", "30s", "10m", "24h", "7d", or bare seconds, into milliseconds. */
static int
parse_duration(const char *s, uint64_t *ms)
{
	const char	*q;
	uint64_t	 v, mul;

	if ((q = parse_digits(s, &v)) == NULL)
		return -1;
	if (*q == '\0' || strcmp(q, "s") == 0)
		mul = MS_S;
	else if (strcmp(q, "ms") == 0)
		mul = 1;
	else if (strcmp(q, "m") == 0)
		mul = MS_M;
	else if (strcmp(q, "h") == 0)
		mul = MS_H;
	else if (strcmp(q, "d") == 0)
		mul = MS_D;
	else
		return -1;
	if (v > UINT64_MAX / mul)
		return -1;
	*ms = v * mul;
	return 0;
}

/* Bytes with an optional binary k, m or g suffix. */
static int
parse_size(const char *s, uint64_t *bytes)
{
	const char	*q;
	uint64_t	 v, mul;

	if ((q = parse_digits(s, &v)) == NULL)
		return -1;
	if (*q == '\0')
		mul = 1;
	else if (q[1] != '\0')
		return -1;
	else if (*q == 'k' || *q == 'K')
		mul = KIB;
	else if (*q == 'm' || *q == 'M')
		mul = MIB;
	else if (*q == 'g' || *q == 'G')
		mul = GIB;
	else
		return -1;
	if (v > UINT64_MAX / mul)
		return -1;
	*bytes = v * mul;
	return 0;
}

static const char *
fmt_duration(uint64_t ms, char *buf, size_t len)
{
	if (ms != 0 && ms % MS_D == 0)
		snprintf(buf, len, "%llud", (unsigned long long)(ms / MS_D));
	else if (ms != 0 && ms % MS_H == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / MS_H));
	else if (ms != 0 && ms % MS_M == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / MS_M));
	else if (ms != 0 && ms % MS_S == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / MS_S));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	return buf;
}

int
cfg_set_string(struct parser *p, char **field, const char *val)
{
	char	*s;

	if ((s = strdup(val)) == NULL)
		return perr(p, "out of memory");
	free(*field);
	*field = s;
	return 0;
}

int
cfg_duration_arg(struct parser *p, const struct keyword *kw, const char *arg,
    uint64_t *ms)
{
	char	lo[32], hi[32];

	if (parse_duration(arg, ms) == -1 || *ms < kw->lo || *ms > kw->hi)
		return perr(p, "%s: expected a duration from %s to %s (a number "
		    "with ms, s, m, h or d), got '%.80s'", kw->name,
		    fmt_duration(kw->lo, lo, sizeof(lo)),
		    fmt_duration(kw->hi, hi, sizeof(hi)), arg);
	return 0;
}

int
cfg_number_arg(struct parser *p, const struct keyword *kw, const char *arg,
    uint64_t *v)
{
	if (cfg_parse_uint(arg, v) == -1 || *v < kw->lo || *v > kw->hi)
		return perr(p, "%s: expected a number from %llu to %llu, "
		    "got '%.80s'", kw->name, (unsigned long long)kw->lo,
		    (unsigned long long)kw->hi, arg);
	return 0;
}

void *
cfg_field(struct parser *p, const struct keyword *kw)
{
	if (p->mblock != NULL)
		return (char *)p->mblock + kw->off;
	return (p->block != NULL ? (char *)p->block : (char *)p->conf) +
	    kw->off;
}

/* Handlers: argv holds the arguments after the directive name. */

static int
kw_workers(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	v;

	(void)argc;
	if (strcmp(argv[0], "auto") == 0) {
		p->conf->workers = 0;
		return 0;
	}
	if (cfg_parse_uint(argv[0], &v) == -1 || v < 1 || v > 256)
		return perr(p, "%s: expected 'auto' or a number from 1 to 256, "
		    "got '%.80s'", kw->name, argv[0]);
	p->conf->workers = (unsigned)v;
	return 0;
}

static int
kw_path(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (argv[0][0] != '/')
		return perr(p, "%s: must be an absolute path, got '%.80s'",
		    kw->name, argv[0]);
	if (strlen(argv[0]) >= CFG_MAX_PATH)
		return perr(p, "%s: path longer than %d bytes", kw->name,
		    CFG_MAX_PATH - 1);
	return cfg_set_string(p, cfg_field(p, kw), argv[0]);
}

static int
kw_store(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "local") == 0)
		return cfg_set_string(p, &p->conf->store, "local");
	/* Not echoed: a redis URL may carry a password.  The store checks
	 * the rest of the URL when parleyd opens it. */
	if (strncmp(argv[0], "redis://", 8) == 0 ||
	    strncmp(argv[0], "sentinel://", 11) == 0 ||
	    strncmp(argv[0], "cluster://", 10) == 0)
		return cfg_set_string(p, &p->conf->store, argv[0]);
	if (strncmp(argv[0], "rediss://", 9) == 0)
		return perr(p, "%s: TLS to Redis (rediss://) is not supported; "
		    "use redis:// over a private network or a TLS tunnel",
		    kw->name);
	return perr(p, "%s: expected local, redis://HOST:PORT, "
	    "sentinel://HOST:PORT/NAME or cluster://HOST:PORT[,HOST:PORT...]",
	    kw->name);
}

/*
 * store-wait REPLICAS [TIMEOUT]: a Redis WAIT after every write.  The
 * timeout stays under the store's command deadline (5s): WAIT holds the
 * connection, and a reply later than that tears the link down.
 */
static int
kw_store_wait(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	uint64_t	n, ms = CFG_STORE_WAIT_MS;

	if (cfg_parse_uint(argv[0], &n) == -1 || n > CFG_STORE_WAIT_MAX)
		return perr(p, "%s: expected a number of replicas from 0 (off) "
		    "to %u, got '%.80s'", kw->name, CFG_STORE_WAIT_MAX,
		    argv[0]);
	if (argc > 1 && (parse_duration(argv[1], &ms) == -1 || ms < 10 ||
	    ms > CFG_STORE_WAIT_MAX_MS))
		return perr(p, "%s: expected a timeout from 10ms to %ums, got "
		    "'%.80s'", kw->name, CFG_STORE_WAIT_MAX_MS, argv[1]);
	p->conf->store_wait = (unsigned)n;
	p->conf->store_wait_ms = (unsigned)ms;
	return 0;
}

/* host-id names this host in session leases; other hosts read it. */
static int
kw_host_id(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	const char *c;

	(void)argc;
	if (argv[0][0] == '\0' || strlen(argv[0]) > 64)
		return perr(p, "%s: must be 1 to 64 characters", kw->name);
	for (c = argv[0]; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' &&
		    *c != '_')
			return perr(p, "%s: '%.80s' may only hold letters, "
			    "digits, '.', '-' and '_'", kw->name, argv[0]);
	return cfg_set_string(p, &p->conf->host_id, argv[0]);
}

static int
kw_fsync(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "always") == 0)
		p->conf->fsync = CFG_FSYNC_ALWAYS;
	else if (strcmp(argv[0], "batch") == 0)
		p->conf->fsync = CFG_FSYNC_BATCH;
	else if (strcmp(argv[0], "no") == 0)
		p->conf->fsync = CFG_FSYNC_NO;
	else
		return perr(p, "%s: expected always, batch or no, got '%.80s'",
		    kw->name, argv[0]);
	return 0;
}

static int
kw_duration(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	ms;

	(void)argc;
	if (cfg_duration_arg(p, kw, argv[0], &ms) == -1)
		return -1;
	memcpy(cfg_field(p, kw), &ms, sizeof(ms));
	return 0;
}

/* on or off into the int at the keyword's field. */
int
cfg_kw_onoff(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	int	v;

	(void)argc;
	if (strcmp(argv[0], "on") == 0)
		v = 1;
	else if (strcmp(argv[0], "off") == 0)
		v = 0;
	else
		return perr(p, "%s: expected on or off, got '%.80s'", kw->name,
		    argv[0]);
	memcpy(cfg_field(p, kw), &v, sizeof(v));
	return 0;
}

/* yes or no into the int at the keyword's field. */
int
cfg_kw_yesno(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	int	v;

	(void)argc;
	if (strcmp(argv[0], "yes") == 0)
		v = 1;
	else if (strcmp(argv[0], "no") == 0)
		v = 0;
	else
		return perr(p, "%s: expected yes or no, got '%.80s'", kw->name,
		    argv[0]);
	memcpy(cfg_field(p, kw), &v, sizeof(v));
	return 0;
}

static int
kw_size(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	char		lo[32], hi[32];
	uint64_t	v;
	size_t		sz;

	(void)argc;
	if (parse_size(argv[0], &v) == -1 || v < kw->lo || v > kw->hi)
		return perr(p, "%s: expected a size from %s to %s (a number "
		    "with optional k, m or g), got '%.80s'", kw->name,
		    util_fmt_size(kw->lo, lo, sizeof(lo)),
		    util_fmt_size(kw->hi, hi, sizeof(hi)), argv[0]);
	sz = (size_t)v;
	memcpy(cfg_field(p, kw), &sz, sizeof(sz));
	return 0;
}

static int
kw_number(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	v;
	unsigned	u;

	(void)argc;
	if (cfg_number_arg(p, kw, argv[0], &v) == -1)
		return -1;
	u = (unsigned)v;
	memcpy(cfg_field(p, kw), &u, sizeof(u));
	return 0;
}

/* A number into the size_t at the keyword's field (kw_number: unsigned). */
static int
kw_count(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	v;
	size_t		n;

	(void)argc;
	if (cfg_number_arg(p, kw, argv[0], &v) == -1)
		return -1;
	n = (size_t)v;
	memcpy(cfg_field(p, kw), &n, sizeof(n));
	return 0;
}

static int
kw_default_provider(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	if (!cfg_is_name(argv[0], 63))
		return perr(p, "%s: '%.80s' is not a valid provider name",
		    kw->name, argv[0]);
	p->default_provider_line = p->line;
	return cfg_set_string(p, &p->conf->default_provider, argv[0]);
}

/* Letters, digits and '_', not starting with a digit. */
int
cfg_valid_env_name(const char *v)
{
	size_t	i;

	for (i = 0; v[i] != '\0'; i++)
		if (!is_alnum((unsigned char)v[i]) && v[i] != '_')
			return 0;
	return i > 0 && i <= CFG_MAX_ENV && !is_digit((unsigned char)v[0]);
}


static int
kw_log_level(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "error") != 0 && strcmp(argv[0], "warn") != 0 &&
	    strcmp(argv[0], "info") != 0 && strcmp(argv[0], "debug") != 0)
		return perr(p, "%s: expected error, warn, info or debug, "
		    "got '%.80s'", kw->name, argv[0]);
	return cfg_set_string(p, &p->conf->log_level, argv[0]);
}

static int
kw_log_format(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "text") == 0)
		p->conf->log_json = 0;
	else if (strcmp(argv[0], "json") == 0)
		p->conf->log_json = 1;
	else
		return perr(p, "%s: expected text or json, got '%.80s'",
		    kw->name, argv[0]);
	return 0;
}

static int
kw_log_file(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	if (strcmp(argv[0], "stderr") == 0 || strcmp(argv[0], "syslog") == 0)
		return cfg_set_string(p, &p->conf->log_file, argv[0]);
	(void)argc;
	if (argv[0][0] != '/')
		return perr(p, "%s: expected stderr, syslog or an absolute "
		    "path, got '%.80s'", kw->name, argv[0]);
	if (strlen(argv[0]) >= CFG_MAX_PATH)
		return perr(p, "%s: path longer than %d bytes", kw->name,
		    CFG_MAX_PATH - 1);
	return cfg_set_string(p, &p->conf->log_file, argv[0]);
}

/*
 * tool-policy GLOB VERDICT: kept in file order, since the first rule whose
 * glob matches a tool's SERVER__TOOL name decides for it.
 */
static int
kw_tool_policy(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct policy_rule	*r, *o;
	enum policy_verdict	 v;
	enum policy_risk	 risk = POLICY_LOW;

	(void)argc;
	if (!cfg_is_word(argv[0], CFG_MAX_GLOB))
		return perr(p, "%s: the pattern must be 1 to %d printable "
		    "characters without blanks", kw->name, CFG_MAX_GLOB);
	if (policy_verdict_parse(argv[1], &v, &risk) == -1)
		return perr(p, "%s: '%.80s' must be one of low, medium, high, "
		    "critical, allow or deny", kw->name, argv[1]);
	/* A repeated pattern could never decide anything: a mistake. */
	TAILQ_FOREACH(o, &p->conf->tool_policies, entry)
		if (strcmp(o->glob, argv[0]) == 0)
			return perr(p, "%s %.80s: duplicate pattern (first on "
			    "line %u, which decides)", kw->name, argv[0],
			    o->line);
	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->glob = strdup(argv[0])) == NULL) {
		free(r);
		return perr(p, "out of memory");
	}
	r->verdict = v;
	r->risk = risk;
	r->line = p->line;
	TAILQ_INSERT_TAIL(&p->conf->tool_policies, r, entry);
	return 0;
}

/* autonomy and max-autonomy: a level spelt as in the protocol. */
static int
kw_autonomy(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	enum policy_autonomy	a;

	(void)argc;
	if (policy_autonomy_parse(argv[0], &a) == -1)
		return perr(p, "%s: expected FULL_AUTO, SUPERVISED, CAUTIOUS or "
		    "MANUAL, got '%.80s'", kw->name, argv[0]);
	memcpy(cfg_field(p, kw), &a, sizeof(a));
	return 0;
}

static int
kw_audit_log(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	if (strcmp(argv[0], "none") == 0)
		return 0;
	if (argv[0][0] != '/')
		return perr(p, "%s: expected none or an absolute path, got "
		    "'%.80s'", kw->name, argv[0]);
	return kw_path(p, kw, argc, argv);
}


/* Splits [s, s+len) into p->words; -1 with the error set on bad syntax. */
static int
tokenize(struct parser *p, const char *s, size_t len)
{
	char	*out = p->buf;
	size_t	 i = 0;
	int	 c;

	p->nwords = 0;
	while (i < len) {
		c = (unsigned char)s[i];
		if (c == ' ' || c == '\t') {
			i++;
			continue;
		}
		if (c == '#')
			break;
		if (p->nwords == CFG_MAX_WORDS)
			return perr(p, "too many words on one line (at most %d)",
			    CFG_MAX_WORDS);
		p->words[p->nwords] = out;
		p->quoted[p->nwords] = c == '"';
		p->nwords++;
		if (c == '"') {
			i++;
			for (;;) {
				if (i >= len)
					return perr(p, "unterminated quoted "
					    "string");
				c = (unsigned char)s[i++];
				if (c == '"')
					break;
				if (c == '\\') {
					if (i >= len)
						return perr(p, "unterminated "
						    "quoted string");
					c = (unsigned char)s[i++];
					if (c == 'n')
						c = '\n';
					else if (c != '"' && c != '\\')
						return perr(p, "unknown escape "
						    "'\\%c' in quoted string",
						    c);
				}
				*out++ = (char)c;
			}
			if (i < len && s[i] != ' ' && s[i] != '\t' &&
			    s[i] != '#')
				return perr(p, "expected a blank after the "
				    "closing quote");
		} else {
			while (i < len && s[i] != ' ' && s[i] != '\t' &&
			    s[i] != '#') {
				if (s[i] == '"')
					return perr(p, "unexpected '\"' inside "
					    "a word (quote the whole word)");
				*out++ = s[i++];
			}
		}
		*out++ = '\0';
	}
	return 0;
}

static int
is_brace(struct parser *p, int i, const char *b)
{
	return !p->quoted[i] && strcmp(p->words[i], b) == 0;
}

static const struct keyword *
keyword_find(const char *name, size_t *idx)
{
	size_t	i;

	for (i = 0; i < NKEYWORDS; i++)
		if (strcmp(keywords[i].name, name) == 0) {
			*idx = i;
			return &keywords[i];
		}
	return NULL;
}

const struct keyword *
cfg_block_first(struct parser *p, int flags, unsigned *line)
{
	const struct keyword	*first = NULL;
	unsigned		 l = 0;
	size_t			 i;

	for (i = 0; i < NKEYWORDS; i++)
		if (p->bseen[i] != 0 && (keywords[i].flags & flags) &&
		    (l == 0 || p->bseen[i] < l)) {
			first = &keywords[i];
			l = p->bseen[i];
		}
	*line = l;
	return first;
}

static int
directive(struct parser *p)
{
	const struct keyword	*kw;
	size_t			 idx;
	unsigned		*seen;
	int			 n = p->nwords, closing = 0, argc, i;

	if (n == 0)
		return 0;
	if (is_brace(p, 0, "}")) {
		if (n > 1)
			return perr(p, "unexpected words after '}'");
		if (p->mblock != NULL)
			return cfg_mcp_close(p);
		if (p->block == NULL)
			return perr(p, "unexpected '}' outside a block");
		return cfg_provider_close(p);
	}
	if ((p->block != NULL || p->mblock != NULL) && n > 1 &&
	    is_brace(p, n - 1, "}")) {
		closing = 1;
		n--;
	}
	if (p->quoted[0])
		return perr(p, "expected a directive name, got a quoted string");
	if ((kw = keyword_find(p->words[0], &idx)) == NULL)
		return perr(p, "unknown directive '%.80s'", p->words[0]);
	if (p->block != NULL && !(kw->where & KW_PROVIDER))
		return perr(p, "%s: not allowed inside %s block", kw->name,
		    p->block->embedder ? "an embedder" : "a provider");
	if (p->block != NULL && p->block->embedder &&
	    !(kw->flags & KWF_EMBED))
		return perr(p, "%s: not used by an embedder (it takes type, "
		    "url, api-key-env, model and timeout)", kw->name);
	if (p->mblock != NULL && !(kw->where & KW_MCP))
		return perr(p, "%s: not allowed inside an mcp-server block",
		    kw->name);
	if (p->block == NULL && p->mblock == NULL && !(kw->where & KW_TOP))
		return perr(p, "%s: only allowed inside %s block", kw->name,
		    (kw->where & KW_PROVIDER) ? "a provider" : "an mcp-server");
	if (kw->flags & KWF_BLOCK) {
		if (n < 2 || !is_brace(p, n - 1, "{"))
			return perr(p, "%s: expected '%s' with the '{' on the "
			    "same line", kw->name, kw->usage);
		n--;
	}
	for (i = 1; i < n; i++)
		if (is_brace(p, i, "{") || is_brace(p, i, "}"))
			return perr(p, "%s: unexpected '%s'", kw->name,
			    p->words[i]);
	argc = n - 1;
	if (argc < kw->minargs || argc > kw->maxargs)
		return perr(p, "%s: wrong number of arguments; usage: %s",
		    kw->name, kw->usage);
	if (!(kw->flags & KWF_MULTI)) {
		seen = p->block != NULL || p->mblock != NULL ? p->bseen :
		    p->seen;
		if (seen[idx] != 0)
			return perr(p, "%s: duplicate directive (first on line "
			    "%u)", kw->name, seen[idx]);
		seen[idx] = p->line;
	}
	if (kw->fn(p, kw, argc, p->words + 1) == -1)
		return -1;
	if (closing)
		return p->mblock != NULL ? cfg_mcp_close(p) :
		    cfg_provider_close(p);
	return 0;
}

static void
config_init(struct config *c)
{
	TAILQ_INIT(&c->listens);
	TAILQ_INIT(&c->providers);
	TAILQ_INIT(&c->tokens);
	TAILQ_INIT(&c->allowed_origins);
	TAILQ_INIT(&c->server_names);
	jwt_keys_init(&c->jwt);
	c->jwt_leeway_ms = 30 * MS_S;
	c->jwt_grace_ms = MS_M;
	TAILQ_INIT(&c->mcp_servers);
	c->workers = 0;
	c->fsync = CFG_FSYNC_BATCH;
	c->retention_ms = 24 * MS_H;
	c->lease_ms = 10 * MS_S;
	c->store_wait_ms = CFG_STORE_WAIT_MS;
	c->idle_timeout_ms = 10 * MS_M;
	c->flush_interval_ms = 20;
	c->heartbeat_ms = 15 * MS_S;
	c->dashboard_ms = 5 * MS_S;
	c->handshake_timeout_ms = 10 * MS_S;
	c->shutdown_timeout_ms = 10 * MS_S;
	c->drain_timeout_ms = 30 * MS_S;
	c->control_mode = 0660;
	c->max_request_line = 8 * KIB;
	c->max_header_size = 16 * KIB;
	c->max_headers = 64;
	c->max_body = MIB;
	c->max_frame = MIB;
	c->max_message = MIB;
	c->max_json_depth = 32;
	c->max_output_buffer = 256 * KIB;
	c->max_sessions = 10000;
	c->max_connections = 20000;
	c->max_conn_per_addr = 1000;
	c->lingering_time_ms = 30 * MS_S;
	c->web_ui = 1;
	TAILQ_INIT(&c->index_roots);
	c->index_max_file = MIB;
	c->index_max_files = 100000;
	c->index_max_bytes = GIB;
	c->kb_max_documents = 1000;
	c->kb_max_bytes = 16 * MIB;
	c->knowledge_tools = 1;
	c->knowledge_max_entities = 100000;
	c->rag = 1;
	c->rag_top_k = 5;
	c->rag_budget = 2000;
	c->lingering_timeout_ms = 5 * MS_S;
	c->max_sess_per_addr = 1000;
	c->max_sess_per_subject = 1000;
	c->sess_create_window_ms = MS_M;
	c->session_log_quota = 256 * MIB;
	c->max_turns = 10;
	c->max_agents = 8;
	c->max_team_turns = 8;
	c->tool_timeout_ms = 30 * MS_S;
	TAILQ_INIT(&c->tool_policies);
	c->autonomy = POLICY_SUPERVISED;
	c->max_autonomy = POLICY_FULL_AUTO;
	c->approval_timeout_ms = 24 * MS_H;
	c->client_tool_timeout_ms = 10 * MS_M;
	c->action_timeout_ms = MS_H;
	c->thought_rate = 20;
	c->thought_queue_depth = 50;
	c->agent_reconnect_timeout_ms = 2 * MS_M;
	c->tls_protocols = CFG_TLS_1_2 | CFG_TLS_1_3;
}

/* Strings that have defaults are filled in last so a directive can own them. */
static int
config_fill(struct config *c)
{
	struct cfg_provider	*pr;

	if (c->state_dir == NULL &&
	    (c->state_dir = strdup("/var/lib/parleyd")) == NULL)
		return -1;
	if (c->store == NULL && (c->store = strdup("local")) == NULL)
		return -1;
	if (c->host_id == NULL) {
		char hn[256];
		size_t i;

		if (gethostname(hn, sizeof(hn)) == -1 || hn[0] == '\0')
			snprintf(hn, sizeof(hn), "localhost");
		hn[sizeof(hn) - 1] = '\0';
		hn[64] = '\0';
		/* A name kw_host_id would accept. */
		for (i = 0; hn[i]; i++)
			if (!isalnum((unsigned char)hn[i]) && hn[i] != '.' &&
			    hn[i] != '-' && hn[i] != '_')
				hn[i] = '_';
		if ((c->host_id = strdup(hn)) == NULL)
			return -1;
	}
	if (c->log_level == NULL && (c->log_level = strdup("info")) == NULL)
		return -1;
	if (TAILQ_EMPTY(&c->listens) &&
	    (cfg_listen_new(c, "127.0.0.1", 7777, 1, 0) == NULL ||
	    cfg_listen_new(c, "::1", 7777, 1, 1) == NULL))
		return -1;
	if (TAILQ_EMPTY(&c->providers)) {
		if ((pr = cfg_provider_new("demo", 0)) == NULL)
			return -1;
		TAILQ_INSERT_TAIL(&c->providers, pr, entry);
		snprintf(pr->type, sizeof(pr->type), "script");
		if ((pr->reply = strdup(DEMO_REPLY)) == NULL)
			return -1;
	}
	if (c->default_provider == NULL &&
	    (c->default_provider =
	    strdup(TAILQ_FIRST(&c->providers)->name)) == NULL)
		return -1;
	return 0;
}

static int
config_check(struct parser *p)
{
	struct config		*c = p->conf;
	struct cfg_mcp_server	*ms;
	struct cfg_listen	*l;
	struct cfg_name		*o;
	size_t			 ai, mi;

	TAILQ_FOREACH(ms, &c->mcp_servers, entry)
		if (ms->timeout_ms == 0)
			ms->timeout_ms = c->tool_timeout_ms;
	if (config_provider(c, c->default_provider) == NULL)
		return cfg_perr_at(p, p->default_provider_line,
		    "default-provider: no provider named '%s'",
		    c->default_provider);
	if (policy_autonomy_cmp(c->autonomy, c->max_autonomy) > 0 &&
	    keyword_find("autonomy", &ai) != NULL &&
	    keyword_find("max-autonomy", &mi) != NULL) {
		if (p->seen[ai] == 0)
			return cfg_perr_at(p, p->seen[mi], "max-autonomy: %s "
			    "is less autonomous than the default autonomy %s; "
			    "add an autonomy line no more autonomous than %s",
			    policy_autonomy_name(c->max_autonomy),
			    policy_autonomy_name(c->autonomy),
			    policy_autonomy_name(c->max_autonomy));
		return cfg_perr_at(p, p->seen[ai], "autonomy: %s is more "
		    "autonomous than max-autonomy %s (line %u); lower "
		    "autonomy or raise max-autonomy",
		    policy_autonomy_name(c->autonomy),
		    policy_autonomy_name(c->max_autonomy), p->seen[mi]);
	}
	if (cfg_tls_check(p) == -1)
		return -1;
	if (c->store_wait > 0 && strcmp(c->store, "local") == 0 &&
	    keyword_find("store-wait", &ai) != NULL)
		return cfg_perr_at(p, p->seen[ai], "store-wait: only a shared "
		    "store (redis:// or sentinel://) has replicas to wait for; "
		    "remove the line or set store-wait 0");
	/* Here, not at index-root: state-dir may come later in the file. */
	TAILQ_FOREACH(o, &c->index_roots, entry) {
		char	sd[PATH_MAX];
		size_t	rl = strlen(o->name);

		if (realpath(c->state_dir, sd) == NULL)
			snprintf(sd, sizeof(sd), "%s", c->state_dir);
		if ((rl == 1 && o->name[0] == '/') ||
		    (strncmp(o->name, sd, rl) == 0 &&
		    (sd[rl] == '\0' || sd[rl] == '/')))
			return cfg_perr_at(p, o->line, "index-root %s contains "
			    "state-dir %s: sessions' documents would be "
			    "indexed; name a directory beside it", o->name,
			    sd);
	}
	c->jwt.leeway = (int64_t)(c->jwt_leeway_ms / MS_S);
	if (c->jwt.nkeys == 0 && (c->jwt.issuer[0] != '\0' ||
	    c->jwt.audience[0] != '\0') &&
	    keyword_find(c->jwt.issuer[0] ? "jwt-issuer" : "jwt-audience",
	    &ai) != NULL)
		return cfg_perr_at(p, p->seen[ai], "%s needs a jwt-key or "
		    "jwt-jwks to verify tokens with", keywords[ai].name);
	/* A JWT key, like a static token, turns authentication on. */
	if (!TAILQ_EMPTY(&c->tokens) || c->jwt.nkeys > 0)
		return 0;
	TAILQ_FOREACH(o, &c->allowed_origins, entry)
		if (strcmp(o->name, "*") == 0)
			return cfg_perr_at(p, o->line, "allowed-origin *: with "
			    "no token any web page the user visits could drive "
			    "this server; name the origins, or add a token");
	TAILQ_FOREACH(o, &c->server_names, entry)
		if (strcmp(o->name, "*") == 0)
			return cfg_perr_at(p, o->line, "server-name *: with no "
			    "token any web page the user visits could reach "
			    "this server by its own name (DNS rebinding); name "
			    "the server, or add a token");
	TAILQ_FOREACH(l, &c->listens, entry)
		if (!l->loopback)
			return cfg_perr_at(p, l->line, "listen %s%s%s:%s: a "
			    "non-loopback listener needs at least one token; "
			    "add `token SECRET role admin`",
			    strchr(l->host, ':') ? "[" : "", l->host,
			    strchr(l->host, ':') ? "]" : "", l->port);
	return 0;
}

static struct config *
config_parse(const char *name, const char *text, size_t len, char *err,
    size_t errlen)
{
	struct parser	*p;
	struct config	*c;
	const char	*nl, *s;
	size_t		 ll, i;
	int		 rv = -1;

	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (c = calloc(1, sizeof(*c))) == NULL) {
		free(p);
		set_err(err, errlen, "%s: out of memory", name);
		return NULL;
	}
	config_init(c);
	p->name = name;
	p->conf = c;
	p->err = err;
	p->errlen = errlen;
	p->pos = text;
	p->end = text + len;
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		p->pos += 3;

	while (p->pos < p->end) {
		p->line++;
		s = p->pos;
		if ((nl = memchr(s, '\n', (size_t)(p->end - s))) == NULL)
			nl = p->end;
		ll = (size_t)(nl - s);
		p->pos = nl < p->end ? nl + 1 : nl;
		if (ll > 0 && s[ll - 1] == '\r')
			ll--;
		if (ll > CFG_MAX_LINE) {
			perr(p, "line too long (more than %d bytes)",
			    CFG_MAX_LINE);
			goto done;
		}
		for (i = 0; i < ll; i++)
			if (((unsigned char)s[i] < ' ' && s[i] != '\t') ||
			    s[i] == 0x7f) {
				perr(p, "unexpected control character 0x%02x",
				    (unsigned char)s[i]);
				goto done;
			}
		if (tokenize(p, s, ll) == -1 || directive(p) == -1)
			goto done;
	}
	if (p->block != NULL) {
		cfg_perr_at(p, p->block->line, "%s '%s': unterminated "
		    "block (missing '}')", p->block->embedder ? "embedder" :
		    "provider", p->block->name);
		goto done;
	}
	if (p->mblock != NULL) {
		cfg_perr_at(p, p->mblock->line, "mcp-server '%s': unterminated "
		    "block (missing '}')", p->mblock->name);
		goto done;
	}
	if (config_fill(c) == -1) {
		perr(p, "out of memory");
		goto done;
	}
	if (config_check(p) == -1)
		goto done;
	if ((c->path = strdup(name)) == NULL) {
		perr(p, "out of memory");
		goto done;
	}
	rv = 0;
done:
	free(p);
	if (rv == -1) {
		config_free(c);
		return NULL;
	}
	return c;
}

struct config *
config_default(void)
{
	struct config	*c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	config_init(c);
	if (config_fill(c) == -1) {
		config_free(c);
		return NULL;
	}
	return c;
}

struct config *
config_parse_string(const char *name, const char *text, char *err,
    size_t errlen)
{
	if (name == NULL)
		name = "(string)";
	if (text == NULL) {
		set_err(err, errlen, "%s: no text", name);
		return NULL;
	}
	return config_parse(name, text, strlen(text), err, errlen);
}

struct config *
config_load(const char *path, int must_exist, char *err, size_t errlen)
{
	struct config	*c;
	struct stat	 st;
	char		*text;
	size_t		 len = 0;
	ssize_t		 n;
	int		 fd;

	if (path == NULL)
		path = CFG_DEFAULT_PATH;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT && !must_exist)
			return config_default();
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == -1) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		set_err(err, errlen, "%s: not a regular file", path);
		close(fd);
		return NULL;
	}
	if ((text = malloc(CFG_MAX_FILE + 1)) == NULL) {
		set_err(err, errlen, "%s: out of memory", path);
		close(fd);
		return NULL;
	}
	/* Read to EOF rather than trust st_size: the file may be changing. */
	while (len <= CFG_MAX_FILE) {
		n = read(fd, text + len, CFG_MAX_FILE + 1 - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			set_err(err, errlen, "%s: %s", path, strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > CFG_MAX_FILE) {
		set_err(err, errlen, "%s: file too large (more than %d bytes)",
		    path, CFG_MAX_FILE);
		goto fail;
	}
	if (memchr(text, '\0', len) != NULL) {
		set_err(err, errlen, "%s: contains a NUL byte", path);
		goto fail;
	}
	close(fd);
	c = config_parse(path, text, len, err, errlen);
	free(text);
	return c;
fail:
	close(fd);
	free(text);
	return NULL;
}

void
config_free(struct config *c)
{
	struct cfg_listen	*l;
	struct cfg_token	*t;
	struct cfg_provider	*pr;
	struct cfg_mcp_server	*m;
	struct policy_rule	*r;
	unsigned		 i;

	if (c == NULL)
		return;
	while ((r = TAILQ_FIRST(&c->tool_policies)) != NULL) {
		TAILQ_REMOVE(&c->tool_policies, r, entry);
		free(r->glob);
		free(r);
	}
	while ((m = TAILQ_FIRST(&c->mcp_servers)) != NULL) {
		TAILQ_REMOVE(&c->mcp_servers, m, entry);
		for (i = 0; i < m->nheaders; i++) {
			explicit_bzero(m->headers[i], strlen(m->headers[i]));
			free(m->headers[i]);
		}
		free(m->url);
		free(m);
	}
	while ((l = TAILQ_FIRST(&c->listens)) != NULL) {
		TAILQ_REMOVE(&c->listens, l, entry);
		free(l);
	}
	free(c->trusted);
	while ((t = TAILQ_FIRST(&c->tokens)) != NULL) {
		TAILQ_REMOVE(&c->tokens, t, entry);
		if (t->secret != NULL) {
			explicit_bzero(t->secret, strlen(t->secret));
			free(t->secret);
		}
		free(t->session);
		free(t);
	}
	cfg_names_free(&c->allowed_origins);
	cfg_names_free(&c->server_names);
	cfg_names_free(&c->index_roots);
	jwt_keys_free(&c->jwt);
	while ((pr = TAILQ_FIRST(&c->providers)) != NULL) {
		TAILQ_REMOVE(&c->providers, pr, entry);
		cfg_provider_free(pr);
	}
	cfg_provider_free(c->embedder);
	free(c->path);
	free(c->state_dir);
	free(c->host_id);
	free(c->store);
	free(c->default_provider);
	free(c->log_level);
	free(c->pid_file);
	free(c->log_file);
	free(c->control_socket);
	free(c->control_owner);
	free(c->control_group);
	free(c->user);
	free(c->group);
	free(c->audit_log);
	free(c->tls_cert);
	free(c->tls_key);
	free(c->tls_ciphers);
	free(c);
}

const struct cfg_provider *
config_provider(const struct config *c, const char *name)
{
	const struct cfg_provider	*pr;

	if (c == NULL || name == NULL)
		return NULL;
	TAILQ_FOREACH(pr, &c->providers, entry)
		if (strcmp(pr->name, name) == 0)
			return pr;
	return NULL;
}

const char *const *
config_directives(void)
{
	return keyword_names;
}
