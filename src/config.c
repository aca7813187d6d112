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

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "parley/config.h"

#define CFG_MAX_FILE	(1024 * 1024)
#define CFG_MAX_LINE	65536
#define CFG_MAX_WORDS	16
#define CFG_MAX_PATH	1024
#define CFG_MAX_SECRET	1024
#define CFG_MAX_SESSION	128
#define CFG_MAX_REPLY	65536
#define CFG_MAX_URL	2048
#define CFG_MAX_MODEL	256
#define CFG_MAX_ENV	255
#define CFG_MAX_MCP	64		/* mcp-server blocks */
#define CFG_MAX_HEADER	8192		/* one mcp-server header line */

#define MS_S	1000ULL
#define MS_M	(60 * MS_S)
#define MS_H	(60 * MS_M)
#define MS_D	(24 * MS_H)
#define KIB	1024ULL
#define MIB	(1024 * KIB)
#define GIB	(1024 * MIB)

#define DEMO_REPLY "Hello from Parley. This is the built-in demo provider: " \
	"it streams this fixed reply so you can see sessions, streaming and " \
	"resume work. To talk to a real model, add a provider block to " \
	"parleyd.conf (see parleyd.conf(5)) and set default-provider."

/* Where a directive may appear. */
#define KW_TOP		0x01
#define KW_PROVIDER	0x02
#define KW_MCP		0x04	/* in an mcp-server block */
/* Flags. */
#define KWF_MULTI	0x01	/* may repeat */
#define KWF_BLOCK	0x02	/* opens a block: last word is '{' */
#define KWF_SCRIPT	0x04	/* in a provider block: type script only */
#define KWF_HTTP	0x08	/* in a provider block: openai/anthropic only */

struct parser;
struct keyword;
typedef int (*kw_fn)(struct parser *, const struct keyword *, int, char **);

struct keyword {
	const char	*name;
	int		 where;
	int		 minargs, maxargs;
	int		 flags;
	kw_fn		 fn;
	size_t		 off;		/* field in struct config, for generic handlers */
	uint64_t	 lo, hi;	/* accepted range, for generic handlers */
	const char	*usage;
};

#define C(f)	offsetof(struct config, f)
#define P(f)	offsetof(struct cfg_provider, f)

/* Range of a provider's timeout and idle-timeout (first byte, gaps). */
#define PROV_TIMEOUT_LO	100
#define PROV_TIMEOUT_HI	MS_H

/*
 * The one list of directives; both the keyword table and
 * config_directives() are generated from it so they cannot drift apart.
 * X(name, where, min, max, flags, handler, field, lo, hi, usage)
 */
#define CFG_KEYWORDS(X) \
	X("listen", KW_TOP, 1, 1, KWF_MULTI, kw_listen, 0, 0, 0, \
	    "listen [HOST:]PORT") \
	X("workers", KW_TOP, 1, 1, 0, kw_workers, 0, 0, 0, \
	    "workers auto|N") \
	X("state-dir", KW_TOP, 1, 1, 0, kw_path, C(state_dir), 0, 0, \
	    "state-dir PATH") \
	X("store", KW_TOP, 1, 1, 0, kw_store, 0, 0, 0, \
	    "store local|redis://HOST:PORT[/DB]|sentinel://HOST:PORT,.../NAME") \
	X("host-id", KW_TOP, 1, 1, 0, kw_host_id, 0, 0, 0, "host-id NAME") \
	X("lease-time", KW_TOP, 1, 1, 0, kw_duration, C(lease_ms), \
	    500, 10 * MS_M, "lease-time DURATION") \
	X("fsync", KW_TOP, 1, 1, 0, kw_fsync, 0, 0, 0, \
	    "fsync always|batch|no") \
	X("retention", KW_TOP, 1, 1, 0, kw_duration, C(retention_ms), \
	    MS_S, 3650 * MS_D, "retention DURATION") \
	X("idle-timeout", KW_TOP | KW_PROVIDER, 1, 1, KWF_HTTP, \
	    kw_idle_timeout, C(idle_timeout_ms), MS_S, 30 * MS_D, \
	    "idle-timeout DURATION") \
	X("flush-interval", KW_TOP, 1, 1, 0, kw_duration, \
	    C(flush_interval_ms), 0, MS_S, "flush-interval DURATION") \
	X("heartbeat-interval", KW_TOP, 1, 1, 0, kw_duration, \
	    C(heartbeat_ms), MS_S, MS_H, "heartbeat-interval DURATION") \
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
	X("tool-timeout", KW_TOP, 1, 1, 0, kw_duration, C(tool_timeout_ms), \
	    100, MS_H, "tool-timeout DURATION") \
	X("max-connections-per-address", KW_TOP, 1, 1, 0, kw_number, \
	    C(max_conn_per_addr), 0, 1000000, \
	    "max-connections-per-address N") \
	X("default-provider", KW_TOP, 1, 1, 0, kw_default_provider, 0, 0, 0, \
	    "default-provider NAME") \
	X("token", KW_TOP, 3, 5, KWF_MULTI, kw_token, 0, 0, 0, \
	    "token SECRET role ROLE [session ID]") \
	X("token-env", KW_TOP, 3, 5, KWF_MULTI, kw_token_env, 0, 0, 0, \
	    "token-env VARIABLE role ROLE [session ID]") \
	X("log-level", KW_TOP, 1, 1, 0, kw_log_level, 0, 0, 0, \
	    "log-level error|warn|info|debug") \
	X("pid-file", KW_TOP, 1, 1, 0, kw_path, C(pid_file), 0, 0, \
	    "pid-file PATH") \
	X("log-format", KW_TOP, 1, 1, 0, kw_log_format, 0, 0, 0, \
	    "log-format text|json") \
	X("log-file", KW_TOP, 1, 1, 0, kw_log_file, 0, 0, 0, \
	    "log-file stderr|syslog|PATH") \
	X("control-socket", KW_TOP, 1, 7, 0, kw_control_socket, 0, 0, 0, \
	    "control-socket PATH|none [owner USER] [group GROUP] [mode MODE]") \
	X("user", KW_TOP, 1, 1, 0, kw_account, C(user), 0, 0, "user NAME") \
	X("group", KW_TOP, 1, 1, 0, kw_account, C(group), 0, 0, "group NAME") \
	X("drain-timeout", KW_TOP, 1, 1, 0, kw_duration, C(drain_timeout_ms), \
	    0, MS_H, "drain-timeout DURATION") \
	X("provider", KW_TOP, 1, 1, KWF_MULTI | KWF_BLOCK, kw_provider, \
	    0, 0, 0, "provider NAME {") \
	X("type", KW_PROVIDER, 1, 1, 0, kw_ptype, 0, 0, 0, \
	    "type openai|anthropic|script") \
	X("reply", KW_PROVIDER, 1, 1, KWF_SCRIPT, kw_preply, 0, 0, 0, \
	    "reply \"TEXT\"") \
	X("chunk", KW_PROVIDER, 1, 1, KWF_SCRIPT, kw_pchunk, 0, 1, 65536, \
	    "chunk N") \
	X("delay", KW_PROVIDER, 1, 1, KWF_SCRIPT, kw_pdelay, 0, 0, \
	    60 * MS_S, "delay DURATION") \
	X("stamp", KW_PROVIDER, 1, 1, KWF_SCRIPT, kw_pstamp, 0, 0, 0, \
	    "stamp yes|no") \
	X("url", KW_PROVIDER | KW_MCP, 1, 1, KWF_HTTP, kw_purl, 0, 0, 0, \
	    "url URL") \
	X("api-key-env", KW_PROVIDER, 1, 1, KWF_HTTP, kw_pkeyenv, 0, 0, 0, \
	    "api-key-env VARIABLE") \
	X("model", KW_PROVIDER, 1, 1, KWF_HTTP, kw_pmodel, 0, 0, 0, \
	    "model NAME") \
	X("max-tokens", KW_PROVIDER, 1, 1, KWF_HTTP, kw_pnumber, \
	    P(max_tokens), 1, 1000000, "max-tokens N") \
	X("temperature", KW_PROVIDER, 1, 1, KWF_HTTP, kw_pdecimal, \
	    P(temperature), 0, 2, "temperature NUMBER") \
	X("timeout", KW_PROVIDER | KW_MCP, 1, 1, KWF_HTTP, kw_timeout, \
	    P(timeout_ms), PROV_TIMEOUT_LO, PROV_TIMEOUT_HI, \
	    "timeout DURATION") \
	X("price-input", KW_PROVIDER, 1, 1, KWF_HTTP, kw_pdecimal, \
	    P(price_input), 0, 1000000, "price-input NUMBER") \
	X("price-output", KW_PROVIDER, 1, 1, KWF_HTTP, kw_pdecimal, \
	    P(price_output), 0, 1000000, "price-output NUMBER") \
	X("max-retries", KW_PROVIDER, 1, 1, KWF_HTTP, kw_pnumber, \
	    P(max_retries), 0, 10, "max-retries N") \
	X("mcp-server", KW_TOP, 1, 1, KWF_MULTI | KWF_BLOCK, kw_mcp_server, \
	    0, 0, 0, "mcp-server NAME {") \
	X("header", KW_MCP, 1, 1, KWF_MULTI, kw_header, 0, 0, 0, \
	    "header \"NAME: VALUE\"")

#define KW_PROTO(n, w, mn, mx, fl, fn, off, lo, hi, u) \
	static int fn(struct parser *, const struct keyword *, int, char **);
#define KW_ENTRY(n, w, mn, mx, fl, fn, off, lo, hi, u) \
	{ n, w, mn, mx, fl, fn, off, lo, hi, u },
#define KW_NAME(n, w, mn, mx, fl, fn, off, lo, hi, u) n,

CFG_KEYWORDS(KW_PROTO)

static const struct keyword keywords[] = {
	CFG_KEYWORDS(KW_ENTRY)
};
#define NKEYWORDS	(sizeof(keywords) / sizeof(keywords[0]))

static const char *const keyword_names[] = {
	CFG_KEYWORDS(KW_NAME)
	NULL
};

struct parser {
	const char		*name;
	const char		*pos, *end;
	unsigned		 line;
	struct config		*conf;
	char			*err;
	size_t			 errlen;
	unsigned		 seen[NKEYWORDS];	/* line of first use */
	unsigned		 bseen[NKEYWORDS];	/* same, current block */
	struct cfg_provider	*block;
	struct cfg_mcp_server	*mblock;
	unsigned		 default_provider_line;
	char			*words[CFG_MAX_WORDS];
	int			 quoted[CFG_MAX_WORDS];
	int			 nwords;
	char			 buf[CFG_MAX_LINE + 2];
};

static int
perr_at(struct parser *p, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
perr_at(struct parser *p, unsigned line, const char *fmt, ...)
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

#define perr(p, ...)	perr_at((p), (p)->line, __VA_ARGS__)

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

/* Locale-independent character classes: config syntax is ASCII. */
static int
is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int
is_alnum(int c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
is_name(const char *s, size_t maxlen)
{
	size_t	n;

	for (n = 0; s[n] != '\0'; n++)
		if (!is_alnum((unsigned char)s[n]) && s[n] != '.' &&
		    s[n] != '_' && s[n] != '-')
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

static int
parse_uint(const char *s, uint64_t *v)
{
	const char	*q = parse_digits(s, v);

	return q != NULL && *q == '\0' ? 0 : -1;
}

/*
 * "2", "0.7", "15.25": digits with an optional fraction, no sign or
 * exponent, parsed without the locale (strtod would honour LC_NUMERIC).
 */
static int
parse_decimal(const char *s, double *v)
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

static const char *
fmt_size(uint64_t b, char *buf, size_t len)
{
	if (b != 0 && b % GIB == 0)
		snprintf(buf, len, "%llug", (unsigned long long)(b / GIB));
	else if (b != 0 && b % MIB == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(b / MIB));
	else if (b != 0 && b % KIB == 0)
		snprintf(buf, len, "%lluk", (unsigned long long)(b / KIB));
	else
		snprintf(buf, len, "%llu", (unsigned long long)b);
	return buf;
}

static int
set_string(struct parser *p, char **field, const char *val)
{
	char	*s;

	if ((s = strdup(val)) == NULL)
		return perr(p, "out of memory");
	free(*field);
	*field = s;
	return 0;
}

/* Handlers: argv holds the arguments after the directive name. */

/* Appends a listener to c's; NULL when out of memory. */
static struct cfg_listen *
listen_new(struct config *c, const char *host, uint64_t port, int loopback,
    int optional)
{
	struct cfg_listen	*l;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	snprintf(l->host, sizeof(l->host), "%s", host);
	snprintf(l->port, sizeof(l->port), "%u", (unsigned)port);
	l->loopback = loopback;
	l->optional = optional;
	TAILQ_INSERT_TAIL(&c->listens, l, entry);
	return l;
}

/*
 * Adds one listener of a listen line a (for its messages); optional: a
 * bind that finds no such address on this host is a warning, not an error.
 */
static int
listen_add(struct parser *p, const struct keyword *kw, const char *a,
    const char *host, const char *port, int loopback, int optional)
{
	struct cfg_listen	*l, *o;
	uint64_t		 pv;

	if (strlen(port) > 5 || parse_uint(port, &pv) == -1 || pv < 1 ||
	    pv > 65535)
		return perr(p, "%s: port must be a number from 1 to 65535, "
		    "got '%.80s'", kw->name, port);

	TAILQ_FOREACH(o, &p->conf->listens, entry)
		if (strcasecmp(o->host, host) == 0 &&
		    (uint64_t)strtoul(o->port, NULL, 10) == pv)
			return perr(p, "%s %.80s: duplicate listener (first on "
			    "line %u)", kw->name, a, o->line);

	if ((l = listen_new(p->conf, host, pv, loopback, optional)) == NULL)
		return perr(p, "out of memory");
	l->line = p->line;
	return 0;
}

/*
 * "listen PORT" and "listen localhost:PORT": both loopback addresses, as a
 * client that resolves localhost to either expects; ::1 only where the
 * host has IPv6.
 */
static int
listen_loopback(struct parser *p, const struct keyword *kw, const char *a,
    const char *port)
{
	if (listen_add(p, kw, a, "127.0.0.1", port, 1, 0) == -1)
		return -1;
	return listen_add(p, kw, a, "::1", port, 1, 1);
}

static int
kw_listen(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	const char		*a = argv[0], *host, *port, *colon, *rb;
	char			 hbuf[64], canon[INET6_ADDRSTRLEN];
	struct in_addr		 in4;
	struct in6_addr		 in6;
	size_t			 hlen, i;
	int			 loopback = 0, numeric = 1;

	(void)argc;
	if (strchr(a, ':') == NULL ||
	    (strncasecmp(a, "localhost:", 10) == 0 && strchr(a + 10, ':') == NULL))
		return listen_loopback(p, kw, a, strchr(a, ':') ?
		    strchr(a, ':') + 1 : a);
	if (a[0] == '[') {
		if ((rb = strchr(a, ']')) == NULL)
			return perr(p, "%s: missing ']' in '%.80s'",
			    kw->name, a);
		if (rb[1] != ':')
			return perr(p, "%s: expected [ADDRESS]:PORT, "
			    "got '%.80s'", kw->name, a);
		host = a + 1;
		hlen = (size_t)(rb - host);
		port = rb + 2;
		if (hlen >= sizeof(hbuf))
			return perr(p, "%s: address too long in '%.80s'",
			    kw->name, a);
		memcpy(hbuf, host, hlen);
		hbuf[hlen] = '\0';
		if (inet_pton(AF_INET6, hbuf, &in6) != 1)
			return perr(p, "%s: '%s' is not an IPv6 address",
			    kw->name, hbuf);
		inet_ntop(AF_INET6, &in6, canon, sizeof(canon));
		snprintf(hbuf, sizeof(hbuf), "%s", canon);
		loopback = IN6_IS_ADDR_LOOPBACK(&in6) ||
		    (IN6_IS_ADDR_V4MAPPED(&in6) && in6.s6_addr[12] == 127);
	} else {
		colon = strrchr(a, ':');
		if (strchr(a, ':') != colon)
			return perr(p, "%s: IPv6 addresses must be in "
			    "brackets, as in [::1]:7777, got '%.80s'",
			    kw->name, a);
		host = a;
		hlen = (size_t)(colon - a);
		port = colon + 1;
		if (hlen == 0)
			return perr(p, "%s: missing address before ':' in "
			    "'%.80s'", kw->name, a);
		if (hlen >= sizeof(hbuf))
			return perr(p, "%s: address too long in '%.80s'",
			    kw->name, a);
		memcpy(hbuf, host, hlen);
		hbuf[hlen] = '\0';
		for (i = 0; i < hlen; i++)
			if (!is_digit((unsigned char)hbuf[i]) && hbuf[i] != '.')
				numeric = 0;
		if (inet_pton(AF_INET, hbuf, &in4) == 1) {
			inet_ntop(AF_INET, &in4, canon, sizeof(canon));
			snprintf(hbuf, sizeof(hbuf), "%s", canon);
			loopback = ((const unsigned char *)&in4)[0] == 127;
		} else if (numeric) {
			return perr(p, "%s: '%s' is not a valid IPv4 address",
			    kw->name, hbuf);
		} else {
			for (i = 0; i < hlen; i++)
				if (!is_alnum((unsigned char)hbuf[i]) &&
				    hbuf[i] != '.' && hbuf[i] != '-')
					return perr(p, "%s: '%s' is not a valid "
					    "address or host name",
					    kw->name, hbuf);
			if (!is_alnum((unsigned char)hbuf[0]))
				return perr(p, "%s: '%s' is not a valid "
				    "address or host name", kw->name, hbuf);
		}
	}
	return listen_add(p, kw, a, hbuf, port, loopback, 0);
}

static int
kw_workers(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	v;

	(void)argc;
	if (strcmp(argv[0], "auto") == 0) {
		p->conf->workers = 0;
		return 0;
	}
	if (parse_uint(argv[0], &v) == -1 || v < 1 || v > 256)
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
	return set_string(p, (char **)(void *)((char *)p->conf + kw->off),
	    argv[0]);
}

static int
kw_store(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "local") == 0)
		return set_string(p, &p->conf->store, "local");
	/* Not echoed: a redis URL may carry a password.  The store checks
	 * the rest of the URL when parleyd opens it. */
	if (strncmp(argv[0], "redis://", 8) == 0 ||
	    strncmp(argv[0], "sentinel://", 11) == 0)
		return set_string(p, &p->conf->store, argv[0]);
	if (strncmp(argv[0], "rediss://", 9) == 0)
		return perr(p, "%s: TLS to Redis (rediss://) is not supported; "
		    "use redis:// over a private network or a TLS tunnel",
		    kw->name);
	return perr(p, "%s: expected local, redis://HOST:PORT or "
	    "sentinel://HOST:PORT/NAME", kw->name);
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
	return set_string(p, &p->conf->host_id, argv[0]);
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
	char		lo[32], hi[32];
	uint64_t	ms;

	(void)argc;
	if (parse_duration(argv[0], &ms) == -1 || ms < kw->lo || ms > kw->hi)
		return perr(p, "%s: expected a duration from %s to %s (a number "
		    "with ms, s, m, h or d), got '%.80s'", kw->name,
		    fmt_duration(kw->lo, lo, sizeof(lo)),
		    fmt_duration(kw->hi, hi, sizeof(hi)), argv[0]);
	memcpy((char *)p->conf + kw->off, &ms, sizeof(ms));
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
		    fmt_size(kw->lo, lo, sizeof(lo)),
		    fmt_size(kw->hi, hi, sizeof(hi)), argv[0]);
	sz = (size_t)v;
	memcpy((char *)p->conf + kw->off, &sz, sizeof(sz));
	return 0;
}

static int
kw_number(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	v;
	unsigned	u;

	(void)argc;
	if (parse_uint(argv[0], &v) == -1 || v < kw->lo || v > kw->hi)
		return perr(p, "%s: expected a number from %llu to %llu, "
		    "got '%.80s'", kw->name, (unsigned long long)kw->lo,
		    (unsigned long long)kw->hi, argv[0]);
	u = (unsigned)v;
	memcpy((char *)p->conf + kw->off, &u, sizeof(u));
	return 0;
}

static int
kw_default_provider(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	if (!is_name(argv[0], 63))
		return perr(p, "%s: '%.80s' is not a valid provider name",
		    kw->name, argv[0]);
	p->default_provider_line = p->line;
	return set_string(p, &p->conf->default_provider, argv[0]);
}

/* Shared tail of token and token-env: argv is "role ROLE [session ID]". */
static int
add_token(struct parser *p, const struct keyword *kw, const char *secret,
    int argc, char **argv)
{
	static const char *const roles[] = { "user", "agent", "observer",
	    "admin" };
	struct cfg_token	*t, *o;
	const char		*session = NULL;
	size_t			 i, n;
	int			 ok = 0;

	if (argc == 4)
		return perr(p, "%s: wrong number of arguments; usage: %s",
		    kw->name, kw->usage);
	if (strcmp(argv[0], "role") != 0)
		return perr(p, "%s: expected 'role', got '%.80s'", kw->name,
		    argv[0]);
	for (i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (strcmp(argv[1], roles[i]) == 0)
			ok = 1;
	if (!ok)
		return perr(p, "%s: role must be user, agent, observer or admin, "
		    "got '%.80s'", kw->name, argv[1]);
	if (argc == 5) {
		if (strcmp(argv[2], "session") != 0)
			return perr(p, "%s: expected 'session', got '%.80s'",
			    kw->name, argv[2]);
		session = argv[3];
		n = strlen(session);
		for (i = 0; i < n; i++)
			if ((unsigned char)session[i] <= ' ' ||
			    (unsigned char)session[i] >= 0x7f ||
			    session[i] == '/')
				break;
		if (n == 0 || n > CFG_MAX_SESSION || i < n)
			return perr(p, "%s: session id must be 1 to %d printable "
			    "characters without blanks or '/'", kw->name,
			    CFG_MAX_SESSION);
	}
	TAILQ_FOREACH(o, &p->conf->tokens, entry)
		if (strcmp(o->secret, secret) == 0)
			return perr(p, "%s: duplicate secret (first on line %u)",
			    kw->name, o->line);

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return perr(p, "out of memory");
	if ((t->secret = strdup(secret)) == NULL ||
	    (session != NULL && (t->session = strdup(session)) == NULL)) {
		free(t->secret);
		free(t);
		return perr(p, "out of memory");
	}
	snprintf(t->role, sizeof(t->role), "%s", argv[1]);
	t->line = p->line;
	TAILQ_INSERT_TAIL(&p->conf->tokens, t, entry);
	return 0;
}

/* Secrets travel in "Authorization: Bearer", so no blanks or controls. */
static int
valid_secret(const char *s)
{
	size_t	n;

	for (n = 0; s[n] != '\0'; n++)
		if ((unsigned char)s[n] <= ' ' || (unsigned char)s[n] >= 0x7f)
			return 0;
	return n > 0 && n <= CFG_MAX_SECRET;
}

static int
kw_token(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	if (!valid_secret(argv[0]))
		return perr(p, "%s: the secret must be 1 to %d printable "
		    "characters without blanks", kw->name, CFG_MAX_SECRET);
	return add_token(p, kw, argv[0], argc, argv + 1);
}

/* Letters, digits and '_', not starting with a digit. */
static int
valid_env_name(const char *v)
{
	size_t	i;

	for (i = 0; v[i] != '\0'; i++)
		if (!is_alnum((unsigned char)v[i]) && v[i] != '_')
			return 0;
	return i > 0 && i <= CFG_MAX_ENV && !is_digit((unsigned char)v[0]);
}

static int
kw_token_env(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	const char	*v = argv[0], *secret;

	if (!valid_env_name(v))
		return perr(p, "%s: '%.80s' is not a valid environment variable "
		    "name", kw->name, v);
	if ((secret = getenv(v)) == NULL)
		return perr(p, "%s: environment variable '%s' is not set",
		    kw->name, v);
	if (!valid_secret(secret))
		return perr(p, "%s: the value of '%s' must be 1 to %d printable "
		    "characters without blanks", kw->name, v, CFG_MAX_SECRET);
	return add_token(p, kw, secret, argc, argv + 1);
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
	return set_string(p, &p->conf->log_level, argv[0]);
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
		return set_string(p, &p->conf->log_file, argv[0]);
	(void)argc;
	if (argv[0][0] != '/')
		return perr(p, "%s: expected stderr, syslog or an absolute "
		    "path, got '%.80s'", kw->name, argv[0]);
	if (strlen(argv[0]) >= CFG_MAX_PATH)
		return perr(p, "%s: path longer than %d bytes", kw->name,
		    CFG_MAX_PATH - 1);
	return set_string(p, &p->conf->log_file, argv[0]);
}

/* A user or group name as useradd(8) takes it; existence is parleyd's. */
static int
valid_account(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 32 || s[0] == '-')
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    *s != '.')
			return 0;
	return 1;
}

static int
kw_account(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (!valid_account(argv[0]))
		return perr(p, "%s: '%.80s' is not a user or group name "
		    "(1-32 of A-Z a-z 0-9 _ - .)", kw->name, argv[0]);
	return set_string(p, (char **)(void *)((char *)p->conf + kw->off),
	    argv[0]);
}

static int
kw_control_socket(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct config *c = p->conf;
	unsigned long mode;
	char *end;
	int i;

	if (strcmp(argv[0], "none") != 0 && argv[0][0] != '/')
		return perr(p, "%s: expected an absolute path or none, got "
		    "'%.80s'", kw->name, argv[0]);
	/* sun_path holds 108 bytes with the NUL. */
	if (strlen(argv[0]) > 107)
		return perr(p, "%s: path longer than 107 bytes (the limit of "
		    "a Unix socket address)", kw->name);
	if (set_string(p, &c->control_socket, argv[0]) == -1)
		return -1;
	if ((argc - 1) % 2 != 0)
		return perr(p, "usage: %s", kw->usage);
	for (i = 1; i < argc; i += 2) {
		if (strcmp(argv[i], "owner") == 0 ||
		    strcmp(argv[i], "group") == 0) {
			if (!valid_account(argv[i + 1]))
				return perr(p, "%s: %s '%.80s' is not a user or "
				    "group name", kw->name, argv[i],
				    argv[i + 1]);
			if (set_string(p, argv[i][0] == 'o' ?
			    &c->control_owner : &c->control_group,
			    argv[i + 1]) == -1)
				return -1;
		} else if (strcmp(argv[i], "mode") == 0) {
			errno = 0;
			mode = strtoul(argv[i + 1], &end, 8);
			if (errno != 0 || *end != '\0' || end == argv[i + 1] ||
			    mode > 0777 || (mode & 0600) != 0600)
				return perr(p, "%s: mode '%.80s' must be octal, "
				    "at most 0777, with owner read and write "
				    "(0600)", kw->name, argv[i + 1]);
			c->control_mode = (unsigned)mode;
		} else
			return perr(p, "%s: unknown option '%.80s' (expected "
			    "owner, group or mode)", kw->name, argv[i]);
	}
	return 0;
}

static struct cfg_provider *
provider_new(const char *name, unsigned line)
{
	struct cfg_provider	*pr;

	if ((pr = calloc(1, sizeof(*pr))) == NULL)
		return NULL;
	snprintf(pr->name, sizeof(pr->name), "%s", name);
	pr->chunk = 4;
	pr->delay_ms = 20;
	pr->timeout_ms = 60 * MS_S;
	pr->idle_timeout_ms = 60 * MS_S;
	pr->max_retries = 2;
	pr->line = line;
	return pr;
}

static int
kw_provider(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct cfg_provider	*pr;

	(void)argc;
	if (!is_name(argv[0], sizeof(pr->name) - 1))
		return perr(p, "%s: name must be 1 to %zu letters, digits, '.', "
		    "'_' or '-', got '%.80s'", kw->name, sizeof(pr->name) - 1,
		    argv[0]);
	TAILQ_FOREACH(pr, &p->conf->providers, entry)
		if (strcmp(pr->name, argv[0]) == 0)
			return perr(p, "%s: duplicate provider '%s' (first on "
			    "line %u)", kw->name, argv[0], pr->line);
	if ((pr = provider_new(argv[0], p->line)) == NULL)
		return perr(p, "out of memory");
	TAILQ_INSERT_TAIL(&p->conf->providers, pr, entry);
	p->block = pr;
	memset(p->bseen, 0, sizeof(p->bseen));
	return 0;
}

static int
kw_ptype(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "openai") != 0 &&
	    strcmp(argv[0], "anthropic") != 0 &&
	    strcmp(argv[0], "script") != 0)
		return perr(p, "%s: expected openai, anthropic or script, got "
		    "'%.80s'", kw->name, argv[0]);
	snprintf(p->block->type, sizeof(p->block->type), "%s", argv[0]);
	return 0;
}

static int
kw_preply(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	size_t	n = strlen(argv[0]);

	(void)argc;
	if (n == 0 || n > CFG_MAX_REPLY)
		return perr(p, "%s: must be 1 to %d bytes long", kw->name,
		    CFG_MAX_REPLY);
	return set_string(p, &p->block->reply, argv[0]);
}

static int
kw_pchunk(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	v;

	(void)argc;
	if (parse_uint(argv[0], &v) == -1 || v < kw->lo || v > kw->hi)
		return perr(p, "%s: expected a number from %llu to %llu, "
		    "got '%.80s'", kw->name, (unsigned long long)kw->lo,
		    (unsigned long long)kw->hi, argv[0]);
	p->block->chunk = (unsigned)v;
	return 0;
}

static int
kw_pdelay(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	char		lo[32], hi[32];
	uint64_t	ms;

	(void)argc;
	if (parse_duration(argv[0], &ms) == -1 || ms < kw->lo || ms > kw->hi)
		return perr(p, "%s: expected a duration from %s to %s (a number "
		    "with ms, s, m, h or d), got '%.80s'", kw->name,
		    fmt_duration(kw->lo, lo, sizeof(lo)),
		    fmt_duration(kw->hi, hi, sizeof(hi)), argv[0]);
	p->block->delay_ms = (unsigned)ms;
	return 0;
}

/*
 * A boolean for the benchmarks: chunks carry the send time, so a load
 * generator can measure provider -> client latency.
 */
static int
kw_pstamp(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "yes") == 0)
		p->block->stamp = 1;
	else if (strcmp(argv[0], "no") == 0)
		p->block->stamp = 0;
	else
		return perr(p, "%s: expected yes or no, got '%.80s'", kw->name,
		    argv[0]);
	return 0;
}

/*
 * Where a generic handler stores into the provider block: the field at
 * kw->off, which the table pairs with the handler's type.
 */
static void *
pfield(struct parser *p, const struct keyword *kw)
{
	return (char *)p->block + kw->off;
}

static int
kw_pnumber(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	v;
	unsigned	u;

	(void)argc;
	if (parse_uint(argv[0], &v) == -1 || v < kw->lo || v > kw->hi)
		return perr(p, "%s: expected a number from %llu to %llu, "
		    "got '%.80s'", kw->name, (unsigned long long)kw->lo,
		    (unsigned long long)kw->hi, argv[0]);
	u = (unsigned)v;
	memcpy(pfield(p, kw), &u, sizeof(u));
	return 0;
}

static int
kw_pdecimal(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	double	v;

	(void)argc;
	if (strlen(argv[0]) > 32 || parse_decimal(argv[0], &v) == -1 ||
	    v < (double)kw->lo || v > (double)kw->hi)
		return perr(p, "%s: expected a decimal number from %llu to %llu, "
		    "got '%.80s'", kw->name, (unsigned long long)kw->lo,
		    (unsigned long long)kw->hi, argv[0]);
	memcpy(pfield(p, kw), &v, sizeof(v));
	if (kw->off == P(temperature))
		p->block->has_temperature = 1;
	return 0;
}

static int
kw_pduration(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	char		lo[32], hi[32];
	uint64_t	ms;

	(void)argc;
	if (parse_duration(argv[0], &ms) == -1 || ms < kw->lo || ms > kw->hi)
		return perr(p, "%s: expected a duration from %s to %s (a number "
		    "with ms, s, m, h or d), got '%.80s'", kw->name,
		    fmt_duration(kw->lo, lo, sizeof(lo)),
		    fmt_duration(kw->hi, hi, sizeof(hi)), argv[0]);
	memcpy(pfield(p, kw), &ms, sizeof(ms));
	return 0;
}

/*
 * Top level: how long an unused session stays in memory. In a provider
 * block: the longest gap between bytes of a model's stream.
 */
static int
kw_idle_timeout(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct keyword	pk;

	if (p->block == NULL)
		return kw_duration(p, kw, argc, argv);
	pk = *kw;
	pk.off = P(idle_timeout_ms);
	pk.lo = PROV_TIMEOUT_LO;
	pk.hi = PROV_TIMEOUT_HI;
	return kw_pduration(p, &pk, argc, argv);
}

/*
 * A base URL as the vendors' SDKs take it; the workers append the API
 * path. Not echoed in errors: it may carry user:password.
 */
static int
kw_purl(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	const char	*u = argv[0], *host;
	size_t		 n, i;
	char		*s;

	(void)argc;
	n = strlen(u);
	if (strncasecmp(u, "http://", 7) == 0)
		host = u + 7;
	else if (strncasecmp(u, "https://", 8) == 0)
		host = u + 8;
	else
		return perr(p, "%s: must start with http:// or https://",
		    kw->name);
	if (n > CFG_MAX_URL)
		return perr(p, "%s: longer than %d bytes", kw->name,
		    CFG_MAX_URL);
	for (i = 0; i < n; i++)
		if ((unsigned char)u[i] <= ' ' || (unsigned char)u[i] >= 0x7f ||
		    u[i] == '?' || u[i] == '#' || u[i] == '"' || u[i] == '\\')
			return perr(p, "%s: must be printable ASCII without "
			    "blanks, quotes, backslashes, '?' or '#'",
			    kw->name);
	/* A provider's is a base URL; an MCP server's, the endpoint itself. */
	while (p->mblock == NULL && n > (size_t)(host - u) && u[n - 1] == '/')
		n--;
	if (n == (size_t)(host - u) || *host == '/')
		return perr(p, "%s: missing host name", kw->name);
	if ((s = strndup(u, n)) == NULL)
		return perr(p, "out of memory");
	if (p->mblock != NULL) {
		free(p->mblock->url);
		p->mblock->url = s;
	} else {
		free(p->block->url);
		p->block->url = s;
	}
	return 0;
}

/* A provider's first-byte timeout, or an MCP server's per-call default. */
static int
kw_timeout(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	char		lo[32], hi[32];
	uint64_t	ms;

	if (p->mblock == NULL)
		return kw_pduration(p, kw, argc, argv);
	if (parse_duration(argv[0], &ms) == -1 || ms < kw->lo || ms > kw->hi)
		return perr(p, "%s: expected a duration from %s to %s (a number "
		    "with ms, s, m, h or d), got '%.80s'", kw->name,
		    fmt_duration(kw->lo, lo, sizeof(lo)),
		    fmt_duration(kw->hi, hi, sizeof(hi)), argv[0]);
	p->mblock->timeout_ms = ms;
	return 0;
}

/* MCP server names become tool-name prefixes: [A-Za-z0-9_-], no "__". */
static int
valid_mcp_name(const char *s)
{
	size_t	n;

	for (n = 0; s[n] != '\0'; n++)
		if (!is_alnum((unsigned char)s[n]) && s[n] != '_' &&
		    s[n] != '-')
			return 0;
	return n > 0 && n <= 32 && strstr(s, "__") == NULL;
}

static int
kw_mcp_server(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct cfg_mcp_server	*m;
	unsigned		 n = 0;

	(void)argc;
	if (!valid_mcp_name(argv[0]))
		return perr(p, "%s: name must be 1 to 32 letters, digits, '_' "
		    "or '-' without \"__\", got '%.80s'", kw->name, argv[0]);
	TAILQ_FOREACH(m, &p->conf->mcp_servers, entry) {
		if (strcmp(m->name, argv[0]) == 0)
			return perr(p, "%s: duplicate server '%s' (first on "
			    "line %u)", kw->name, argv[0], m->line);
		n++;
	}
	if (n >= CFG_MAX_MCP)
		return perr(p, "%s: more than %d servers", kw->name,
		    CFG_MAX_MCP);
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return perr(p, "out of memory");
	snprintf(m->name, sizeof(m->name), "%s", argv[0]);
	m->timeout_ms = 0;	/* tool-timeout, unless the block sets one */
	m->line = p->line;
	TAILQ_INSERT_TAIL(&p->conf->mcp_servers, m, entry);
	p->mblock = m;
	memset(p->bseen, 0, sizeof(p->bseen));
	return 0;
}

/*
 * "Name: value", added to every request to the server.  Not echoed: it
 * usually carries a credential.  The headers the transport itself sets
 * are refused, since a second copy would break the protocol.
 */
static int
kw_header(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	static const char *const reserved[] = { "content-length",
	    "content-type", "transfer-encoding", "accept", "host",
	    "mcp-session-id", "mcp-protocol-version", "connection" };
	struct cfg_mcp_server	*m = p->mblock;
	const char		*h = argv[0], *colon;
	size_t			 nl, i;
	char			*s;

	(void)argc;
	if (strlen(h) > CFG_MAX_HEADER)
		return perr(p, "%s: longer than %d bytes", kw->name,
		    CFG_MAX_HEADER);
	if ((colon = strchr(h, ':')) == NULL || colon == h)
		return perr(p, "%s: expected \"NAME: VALUE\"", kw->name);
	nl = (size_t)(colon - h);
	/* RFC 9110 token characters. */
	for (i = 0; i < nl; i++)
		if (!is_alnum((unsigned char)h[i]) &&
		    strchr("!#$%&'*+-.^_`|~", h[i]) == NULL)
			return perr(p, "%s: the name must be an HTTP token "
			    "(letters, digits, '-', ...)", kw->name);
	for (i = nl + 1; h[i] != '\0'; i++)
		if ((unsigned char)h[i] < ' ' && h[i] != '\t')
			return perr(p, "%s: control character in the value",
			    kw->name);
	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strlen(reserved[i]) == nl &&
		    strncasecmp(h, reserved[i], nl) == 0)
			return perr(p, "%s: %.*s is set by parleyd itself",
			    kw->name, (int)nl, h);
	if (m->nheaders >= CFG_MCP_MAX_HEADERS)
		return perr(p, "%s: more than %d headers", kw->name,
		    CFG_MCP_MAX_HEADERS);
	if ((s = strdup(h)) == NULL)
		return perr(p, "out of memory");
	m->headers[m->nheaders++] = s;
	return 0;
}

static int
mcp_block_close(struct parser *p)
{
	struct cfg_mcp_server	*m = p->mblock;

	p->mblock = NULL;
	if (m->url == NULL)
		return perr_at(p, m->line, "mcp-server '%s': missing 'url'",
		    m->name);
	return 0;
}

static int
kw_pkeyenv(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	/* Only the name: workers read the value per request (key rotation). */
	if (!valid_env_name(argv[0]))
		return perr(p, "%s: '%.80s' is not a valid environment variable "
		    "name", kw->name, argv[0]);
	return set_string(p, &p->block->api_key_env, argv[0]);
}

static int
kw_pmodel(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	size_t	n;

	(void)argc;
	for (n = 0; argv[0][n] != '\0'; n++)
		if ((unsigned char)argv[0][n] <= ' ' ||
		    (unsigned char)argv[0][n] >= 0x7f)
			break;
	if (n == 0 || n > CFG_MAX_MODEL || argv[0][n] != '\0')
		return perr(p, "%s: must be 1 to %d printable characters "
		    "without blanks", kw->name, CFG_MAX_MODEL);
	return set_string(p, &p->block->model, argv[0]);
}

/*
 * Type-dependent checks and defaults, once the whole block is known (type
 * may come after the directives it governs).
 */
static int
block_close(struct parser *p)
{
	struct cfg_provider	*pr = p->block;
	const struct keyword	*bad = NULL;
	const char		*def;
	unsigned		 badline = 0;
	size_t			 i;
	int			 script;

	p->block = NULL;
	if (pr->type[0] == '\0')
		return perr_at(p, pr->line, "provider '%s': missing 'type'",
		    pr->name);
	script = strcmp(pr->type, "script") == 0;
	for (i = 0; i < NKEYWORDS; i++) {
		if (p->bseen[i] == 0 || (badline != 0 && p->bseen[i] > badline))
			continue;
		if ((script && (keywords[i].flags & KWF_HTTP)) ||
		    (!script && (keywords[i].flags & KWF_SCRIPT))) {
			bad = &keywords[i];
			badline = p->bseen[i];
		}
	}
	if (bad != NULL)
		return perr_at(p, badline, "%s: not used by type %s (only by "
		    "%s)", bad->name, pr->type, (bad->flags & KWF_SCRIPT) ?
		    "script" : "openai and anthropic");
	if (script) {
		if (pr->reply == NULL)
			return perr_at(p, pr->line, "provider '%s': a script "
			    "provider needs a 'reply'", pr->name);
		return 0;
	}
	if (pr->model == NULL)
		return perr_at(p, pr->line, "provider '%s': model is required "
		    "for type %s", pr->name, pr->type);
	if (strcmp(pr->type, "anthropic") == 0) {
		def = "https://api.anthropic.com";
		/* The Messages API rejects a request without max_tokens. */
		if (pr->max_tokens == 0)
			pr->max_tokens = 1024;
	} else
		def = "https://api.openai.com/v1";
	if (pr->url == NULL && (pr->url = strdup(def)) == NULL)
		return perr_at(p, pr->line, "out of memory");
	return 0;
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
			return mcp_block_close(p);
		if (p->block == NULL)
			return perr(p, "unexpected '}' outside a block");
		return block_close(p);
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
		return perr(p, "%s: not allowed inside a provider block",
		    kw->name);
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
		return p->mblock != NULL ? mcp_block_close(p) : block_close(p);
	return 0;
}

static void
config_init(struct config *c)
{
	TAILQ_INIT(&c->listens);
	TAILQ_INIT(&c->providers);
	TAILQ_INIT(&c->tokens);
	TAILQ_INIT(&c->mcp_servers);
	c->workers = 0;
	c->fsync = CFG_FSYNC_BATCH;
	c->retention_ms = 24 * MS_H;
	c->lease_ms = 10 * MS_S;
	c->idle_timeout_ms = 10 * MS_M;
	c->flush_interval_ms = 20;
	c->heartbeat_ms = 15 * MS_S;
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
	c->max_turns = 10;
	c->tool_timeout_ms = 30 * MS_S;
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
	    (listen_new(c, "127.0.0.1", 7777, 1, 0) == NULL ||
	    listen_new(c, "::1", 7777, 1, 1) == NULL))
		return -1;
	if (TAILQ_EMPTY(&c->providers)) {
		if ((pr = provider_new("demo", 0)) == NULL)
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
	struct cfg_mcp_server *ms;

	TAILQ_FOREACH(ms, &p->conf->mcp_servers, entry)
		if (ms->timeout_ms == 0)
			ms->timeout_ms = p->conf->tool_timeout_ms;
	struct config		*c = p->conf;
	struct cfg_listen	*l;

	if (config_provider(c, c->default_provider) == NULL)
		return perr_at(p, p->default_provider_line,
		    "default-provider: no provider named '%s'",
		    c->default_provider);
	if (!TAILQ_EMPTY(&c->tokens))
		return 0;
	TAILQ_FOREACH(l, &c->listens, entry)
		if (!l->loopback)
			return perr_at(p, l->line, "listen %s%s%s:%s: a "
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
		perr_at(p, p->block->line, "provider '%s': unterminated block "
		    "(missing '}')", p->block->name);
		goto done;
	}
	if (p->mblock != NULL) {
		perr_at(p, p->mblock->line, "mcp-server '%s': unterminated "
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
	unsigned		 i;

	if (c == NULL)
		return;
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
	while ((t = TAILQ_FIRST(&c->tokens)) != NULL) {
		TAILQ_REMOVE(&c->tokens, t, entry);
		if (t->secret != NULL) {
			explicit_bzero(t->secret, strlen(t->secret));
			free(t->secret);
		}
		free(t->session);
		free(t);
	}
	while ((pr = TAILQ_FIRST(&c->providers)) != NULL) {
		TAILQ_REMOVE(&c->providers, pr, entry);
		free(pr->reply);
		free(pr->url);
		free(pr->api_key_env);
		free(pr->model);
		free(pr);
	}
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
