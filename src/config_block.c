/*
 * parleyd.conf(5): the provider and mcp-server blocks.  A block's
 * directives are stored as they come; the checks that depend on the whole
 * block (type, required directives) run at its closing '}'.
 */

#include <sys/stat.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parley/config.h"
#include "config_int.h"

#define CFG_MAX_REPLY	65536
#define CFG_MAX_URL	2048
#define CFG_MAX_MODEL	256
#define CFG_MAX_MCP	64		/* mcp-server blocks */
#define CFG_MAX_HEADER	8192		/* one mcp-server header line */

struct cfg_provider *
cfg_provider_new(const char *name, unsigned line)
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
	pr->attempt_timeout_ms = CFG_ATTEMPT_TIMEOUT;
	pr->max_reply = CFG_MAX_REPLY_BODY;
	pr->line = line;
	return pr;
}

void
cfg_provider_free(struct cfg_provider *pr)
{
	if (pr == NULL)
		return;
	free(pr->reply);
	free(pr->url);
	free(pr->api_key_env);
	free(pr->model);
	free(pr);
}

/* A provider's or embedder's NAME: 0, or -1 with the parse error set. */
static int
block_name(struct parser *p, const struct keyword *kw, const char *name)
{
	size_t	max = sizeof(((struct cfg_provider *)0)->name) - 1;

	if (!cfg_is_name(name, max))
		return perr(p, "%s: name must be 1 to %zu letters, digits, '.', "
		    "'_' or '-', got '%.80s'", kw->name, max, name);
	return 0;
}

/*
 * embedder NAME { ... }: a provider block of its own kind, for the
 * OpenAI-compatible /v1/embeddings; checked at its '}' like a provider.
 */
int
cfg_kw_embedder(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct cfg_provider	*pr;

	(void)argc;
	if (block_name(p, kw, argv[0]) == -1)
		return -1;
	if ((pr = cfg_provider_new(argv[0], p->line)) == NULL)
		return perr(p, "out of memory");
	pr->embedder = 1;
	p->conf->embedder = pr;
	p->block = pr;
	memset(p->bseen, 0, sizeof(p->bseen));
	return 0;
}

/*
 * index-root PATH: a directory the index may read under, kept as its
 * realpath(3) so a later check compares canonical paths only.
 */
int
cfg_kw_index_root(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct cfg_name	*n;
	struct stat	 sb;
	char		*rp;

	(void)argc;
	if (argv[0][0] != '/')
		return perr(p, "%s: must be an absolute path, got '%.80s'",
		    kw->name, argv[0]);
	if ((rp = realpath(argv[0], NULL)) == NULL)
		return perr(p, "%s: %.200s: %s", kw->name, argv[0],
		    strerror(errno));
	if (stat(rp, &sb) == -1 || !S_ISDIR(sb.st_mode)) {
		free(rp);
		return perr(p, "%s: %.200s: not a directory", kw->name,
		    argv[0]);
	}
	TAILQ_FOREACH(n, &p->conf->index_roots, entry)
		if (strcmp(n->name, rp) == 0) {
			free(rp);
			return perr(p, "%s: '%.200s' is already a root (line "
			    "%u)", kw->name, argv[0], n->line);
		}
	if ((n = calloc(1, sizeof(*n))) == NULL) {
		free(rp);
		return perr(p, "out of memory");
	}
	n->name = rp;
	n->line = p->line;
	TAILQ_INSERT_TAIL(&p->conf->index_roots, n, entry);
	return 0;
}

int
cfg_kw_provider(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct cfg_provider	*pr;

	(void)argc;
	if (block_name(p, kw, argv[0]) == -1)
		return -1;
	TAILQ_FOREACH(pr, &p->conf->providers, entry)
		if (strcmp(pr->name, argv[0]) == 0)
			return perr(p, "%s: duplicate provider '%s' (first on "
			    "line %u)", kw->name, argv[0], pr->line);
	if ((pr = cfg_provider_new(argv[0], p->line)) == NULL)
		return perr(p, "out of memory");
	TAILQ_INSERT_TAIL(&p->conf->providers, pr, entry);
	p->block = pr;
	memset(p->bseen, 0, sizeof(p->bseen));
	return 0;
}

int
cfg_kw_ptype(struct parser *p, const struct keyword *kw, int argc, char **argv)
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

int
cfg_kw_preply(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	size_t	n = strlen(argv[0]);

	(void)argc;
	if (n == 0 || n > CFG_MAX_REPLY)
		return perr(p, "%s: must be 1 to %d bytes long", kw->name,
		    CFG_MAX_REPLY);
	return cfg_set_string(p, &p->block->reply, argv[0]);
}

int
cfg_kw_pdelay(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	uint64_t	ms;

	(void)argc;
	if (cfg_duration_arg(p, kw, argv[0], &ms) == -1)
		return -1;
	p->block->delay_ms = (unsigned)ms;
	return 0;
}

/*
 * A boolean for the benchmarks: chunks carry the send time, so a load
 * generator can measure provider -> client latency.
 */
int
cfg_kw_pdecimal(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	double	v;

	(void)argc;
	if (strlen(argv[0]) > 32 || cfg_parse_decimal(argv[0], &v) == -1 ||
	    v < (double)kw->lo || v > (double)kw->hi)
		return perr(p, "%s: expected a decimal number from %llu to %llu, "
		    "got '%.80s'", kw->name, (unsigned long long)kw->lo,
		    (unsigned long long)kw->hi, argv[0]);
	memcpy(cfg_field(p, kw), &v, sizeof(v));
	if (kw->off == P(temperature))
		p->block->has_temperature = 1;
	return 0;
}

int
cfg_kw_pkeyenv(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	/* Only the name: workers read the value per request (key rotation). */
	if (!cfg_valid_env_name(argv[0]))
		return perr(p, "%s: '%.80s' is not a valid environment variable "
		    "name", kw->name, argv[0]);
	return cfg_set_string(p, &p->block->api_key_env, argv[0]);
}

int
cfg_kw_pmodel(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	(void)argc;
	if (!cfg_is_word(argv[0], CFG_MAX_MODEL))
		return perr(p, "%s: must be 1 to %d printable characters "
		    "without blanks", kw->name, CFG_MAX_MODEL);
	return cfg_set_string(p, &p->block->model, argv[0]);
}

/*
 * Top level: how long an unused session stays in memory. In a provider
 * block: the longest gap between bytes of a model's stream.
 */
int
cfg_kw_idle_timeout(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct keyword	pk = *kw;
	uint64_t	ms;

	(void)argc;
	if (p->block != NULL) {
		pk.lo = PROV_TIMEOUT_LO;
		pk.hi = PROV_TIMEOUT_HI;
	}
	if (cfg_duration_arg(p, &pk, argv[0], &ms) == -1)
		return -1;
	if (p->block != NULL)
		p->block->idle_timeout_ms = ms;
	else
		p->conf->idle_timeout_ms = ms;
	return 0;
}

/*
 * A base URL as the vendors' SDKs take it; the workers append the API
 * path. Not echoed in errors: it may carry user:password.
 */
int
cfg_kw_purl(struct parser *p, const struct keyword *kw, int argc, char **argv)
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
int
cfg_kw_timeout(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	uint64_t	ms;

	(void)argc;
	if (cfg_duration_arg(p, kw, argv[0], &ms) == -1)
		return -1;
	if (p->mblock != NULL)
		p->mblock->timeout_ms = ms;
	else
		p->block->timeout_ms = ms;
	return 0;
}

/*
 * Type-dependent checks and defaults, once the whole block is known (type
 * may come after the directives it governs).
 */
int
cfg_provider_close(struct parser *p)
{
	struct cfg_provider	*pr = p->block;
	const struct keyword	*bad;
	const char		*def;
	unsigned		 badline;
	int			 script;

	p->block = NULL;
	if (pr->type[0] == '\0')
		return cfg_perr_at(p, pr->line, "%s '%s': missing 'type'",
		    pr->embedder ? "embedder" : "provider", pr->name);
	if (pr->embedder && strcmp(pr->type, "openai") != 0)
		return cfg_perr_at(p, pr->line, "embedder '%s': type must be "
		    "openai (the OpenAI-compatible /v1/embeddings that "
		    "OpenAI, llama.cpp, Ollama and vLLM serve)", pr->name);
	script = strcmp(pr->type, "script") == 0;
	bad = cfg_block_first(p, script ? KWF_HTTP : KWF_SCRIPT, &badline);
	if (bad != NULL)
		return cfg_perr_at(p, badline, "%s: not used by type %s (only "
		    "by %s)", bad->name, pr->type, (bad->flags & KWF_SCRIPT) ?
		    "script" : "openai and anthropic");
	if (script) {
		if (pr->reply == NULL)
			return cfg_perr_at(p, pr->line, "provider '%s': a "
			    "script provider needs a 'reply'", pr->name);
		return 0;
	}
	if (pr->model == NULL)
		return cfg_perr_at(p, pr->line, "%s '%s': model is "
		    "required for type %s", pr->embedder ? "embedder" :
		    "provider", pr->name, pr->type);
	if (strcmp(pr->type, "anthropic") == 0) {
		def = "https://api.anthropic.com";
		/* The Messages API rejects a request without max_tokens. */
		if (pr->max_tokens == 0)
			pr->max_tokens = 1024;
	} else
		def = "https://api.openai.com/v1";
	if (pr->url == NULL && (pr->url = strdup(def)) == NULL)
		return cfg_perr_at(p, pr->line, "out of memory");
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

int
cfg_kw_mcp_server(struct parser *p, const struct keyword *kw, int argc,
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
	m->max_result = CFG_MAX_RESULT;
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
int
cfg_kw_header(struct parser *p, const struct keyword *kw, int argc, char **argv)
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

int
cfg_mcp_close(struct parser *p)
{
	struct cfg_mcp_server	*m = p->mblock;

	p->mblock = NULL;
	if (m->url == NULL)
		return cfg_perr_at(p, m->line, "mcp-server '%s': missing "
		    "'url'", m->name);
	return 0;
}
