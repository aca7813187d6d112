/*
 * Internals of the parleyd.conf parser, for src/config*.c only (other
 * modules use parley/config.h).  config.c holds the keyword table, the
 * tokenizer, the value parsers and the simple directives; config_access.c
 * the listen, token, control-socket, user and group directives;
 * config_block.c the provider and mcp-server blocks.
 */
#ifndef PARLEY_CONFIG_INT_H
#define PARLEY_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>

#include "parley/config.h"

#define CFG_MAX_LINE	65536
#define CFG_MAX_WORDS	16
#define CFG_MAX_KEYWORDS 128		/* room in struct parser; config.c
					   asserts the table fits */

#define MS_S	1000ULL
#define MS_M	(60 * MS_S)
#define MS_H	(60 * MS_M)
#define MS_D	(24 * MS_H)
#define KIB	1024ULL
#define MIB	(1024 * KIB)
#define GIB	(1024 * MIB)

/* Where a directive may appear. */
#define KW_TOP		0x01
#define KW_PROVIDER	0x02
#define KW_MCP		0x04	/* in an mcp-server block */
/* Flags. */
#define KWF_MULTI	0x01	/* may repeat */
#define KWF_BLOCK	0x02	/* opens a block: last word is '{' */
#define KWF_SCRIPT	0x04	/* in a provider block: type script only */
#define KWF_HTTP	0x08	/* in a provider block: openai/anthropic only */
#define KWF_EMBED	0x10	/* also in an embedder block */

#define C(f)	offsetof(struct config, f)
#define P(f)	offsetof(struct cfg_provider, f)
#define M(f)	offsetof(struct cfg_mcp_server, f)

/* Range of a provider's timeout and idle-timeout (first byte, gaps). */
#define PROV_TIMEOUT_LO	100
#define PROV_TIMEOUT_HI	MS_H

struct parser;
struct keyword;

/* A directive's handler: argv holds the argc words after its name. */
typedef int cfg_kw_fn(struct parser *, const struct keyword *, int, char **);

struct keyword {
	const char	*name;
	int		 where;
	int		 minargs, maxargs;
	int		 flags;
	cfg_kw_fn	*fn;
	size_t		 off;		/* see cfg_field() */
	uint64_t	 lo, hi;	/* accepted range, for generic handlers */
	const char	*usage;
};

struct parser {
	const char		*name;
	const char		*pos, *end;
	unsigned		 line;
	struct config		*conf;
	char			*err;
	size_t			 errlen;
	/* Line of each directive's first use: in the file, in this block. */
	unsigned		 seen[CFG_MAX_KEYWORDS];
	unsigned		 bseen[CFG_MAX_KEYWORDS];
	struct cfg_provider	*block;
	struct cfg_mcp_server	*mblock;
	unsigned		 default_provider_line;
	char			*words[CFG_MAX_WORDS];
	int			 quoted[CFG_MAX_WORDS];
	int			 nwords;
	char			 buf[CFG_MAX_LINE + 2];
};

/* Locale-independent character classes: config syntax is ASCII. */
static inline int
is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static inline int
is_alnum(int c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* config.c: errors, values. */
/* Sets "NAME:LINE: message" as the parse error; always returns -1. */
int	cfg_perr_at(struct parser *, unsigned, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
#define perr(p, ...)	cfg_perr_at((p), (p)->line, __VA_ARGS__)
/* Replaces *field with a copy of val; -1 (error set) when out of memory. */
int	cfg_set_string(struct parser *, char **, const char *);
int	cfg_parse_uint(const char *, uint64_t *);
int	cfg_parse_decimal(const char *, double *);
/*
 * One argument as a duration (in ms) or number within kw->lo..kw->hi;
 * -1 with the error set (naming the range) otherwise.
 */
int	cfg_duration_arg(struct parser *, const struct keyword *,
	    const char *, uint64_t *);
int	cfg_number_arg(struct parser *, const struct keyword *, const char *,
	    uint64_t *);
/*
 * Where a generic handler (number, duration, ...) stores: the field at
 * kw->off of the provider block being read, else of the config; the table
 * pairs each field with a handler of its type.
 */
void	*cfg_field(struct parser *, const struct keyword *);
/* yes or no into the int at the field (cfg_field). */
cfg_kw_fn cfg_kw_yesno, cfg_kw_onoff;
/* 1 to maxlen of [A-Za-z0-9._-]. */
int	cfg_is_name(const char *, size_t);
/* 1 to maxlen printable ASCII characters, no blanks. */
int	cfg_is_word(const char *, size_t);
int	cfg_valid_env_name(const char *);
/*
 * Of the directives seen in the current block that have any of flags, the
 * first in the file; its line in *line.  NULL if none.
 */
const struct keyword *cfg_block_first(struct parser *, int, unsigned *);

/* config_access.c */
cfg_kw_fn cfg_kw_listen, cfg_kw_token, cfg_kw_token_env, cfg_kw_account,
	    cfg_kw_control_socket, cfg_kw_allowed_origin, cfg_kw_server_name,
	    cfg_kw_tls_file, cfg_kw_tls_ciphers, cfg_kw_tls_protocols,
	    cfg_kw_jwt_key, cfg_kw_jwt_jwks, cfg_kw_jwt_claim,
	    cfg_kw_max_conn_addr, cfg_kw_trusted_proxy;
void	cfg_names_free(struct cfg_names *);
/* Once the file is read: a tls listener has its certificate and key. */
int	cfg_tls_check(struct parser *);
/* Appends a listener to the config's; NULL when out of memory. */
struct cfg_listen *cfg_listen_new(struct config *, const char *, uint64_t,
	    int, int);

/* config_block.c */
cfg_kw_fn cfg_kw_provider, cfg_kw_ptype, cfg_kw_preply, cfg_kw_pdelay,
	    cfg_kw_purl, cfg_kw_pkeyenv, cfg_kw_pmodel,
	    cfg_kw_pdecimal, cfg_kw_timeout, cfg_kw_idle_timeout,
	    cfg_kw_mcp_server, cfg_kw_header;
/* A provider with the defaults every type starts from; NULL: no memory. */
struct cfg_provider *cfg_provider_new(const char *, unsigned);
void	cfg_provider_free(struct cfg_provider *);
cfg_kw_fn cfg_kw_embedder, cfg_kw_index_root;
/* At a block's '}': checks and completes it; -1 with the error set. */
int	cfg_provider_close(struct parser *);
int	cfg_mcp_close(struct parser *);

#endif
