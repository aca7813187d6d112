/*
 * parleyd.conf(5): who may reach parleyd and as whom it runs.  The
 * listen, token, token-env, control-socket, user and group directives.
 */

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parley/config.h"
#include "parley/proxyproto.h"
#include "config_int.h"

#define CFG_MAX_SECRET	1024
#define CFG_MAX_SESSION	128

struct cfg_listen *
cfg_listen_new(struct config *c, const char *host, uint64_t port, int loopback,
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

	if (strlen(port) > 5 || cfg_parse_uint(port, &pv) == -1 || pv < 1 ||
	    pv > 65535)
		return perr(p, "%s: port must be a number from 1 to 65535, "
		    "got '%.80s'", kw->name, port);

	TAILQ_FOREACH(o, &p->conf->listens, entry)
		if (strcasecmp(o->host, host) == 0 &&
		    (uint64_t)strtoul(o->port, NULL, 10) == pv)
			return perr(p, "%s %.80s: duplicate listener (first on "
			    "line %u)", kw->name, a, o->line);

	if ((l = cfg_listen_new(p->conf, host, pv, loopback, optional)) == NULL)
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

static int	listen_line(struct parser *, const struct keyword *,
		    const char *);

int
cfg_kw_listen(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	struct cfg_listen	*last, *l;
	int			 rc;

	last = TAILQ_LAST(&p->conf->listens, cfg_listens);
	if (argc == 2 && strcmp(argv[1], "proxy-protocol") != 0)
		return perr(p, "%s: unknown option '%.80s'; usage: %s",
		    kw->name, argv[1], kw->usage);
	if ((rc = listen_line(p, kw, argv[0])) == 0 && argc == 2) {
		/* Every listener this line added. */
		for (l = last ? TAILQ_NEXT(last, entry) :
		    TAILQ_FIRST(&p->conf->listens); l != NULL;
		    l = TAILQ_NEXT(l, entry))
			l->proxy_protocol = 1;
	}
	return rc;
}

/* max-connections-per-address N [rate PER-SECOND] */
int
cfg_kw_max_conn_addr(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	uint64_t		 v, r = 0;

	if (argc == 2 || (argc == 3 && strcmp(argv[1], "rate") != 0))
		return perr(p, "%s: usage: %s", kw->name, kw->usage);
	if (cfg_number_arg(p, kw, argv[0], &v) == -1)
		return -1;
	if (argc == 3 && (cfg_parse_uint(argv[2], &r) == -1 || r < 1 ||
	    r > 1000000))
		return perr(p, "%s: rate must be a number of new connections "
		    "a second from 1 to 1000000, got '%.80s'", kw->name,
		    argv[2]);
	p->conf->max_conn_per_addr = (unsigned)v;
	p->conf->conn_rate_per_addr = (unsigned)r;
	return 0;
}

/* trusted-proxy ADDRESS[/PREFIX], repeatable. */
int
cfg_kw_trusted_proxy(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct config		*c = p->conf;
	struct pp_cidr		 cidr, *t;

	(void)argc;
	if (pp_cidr_parse(argv[0], &cidr) == -1)
		return perr(p, "%s: expected a numeric IPv4 or IPv6 address "
		    "with an optional /PREFIX, got '%.80s'", kw->name, argv[0]);
	if (c->ntrusted >= 1024)
		return perr(p, "%s: at most 1024 of them", kw->name);
	if ((t = reallocarray(c->trusted, c->ntrusted + 1, sizeof(*t))) ==
	    NULL)
		return perr(p, "out of memory");
	t[c->ntrusted++] = cidr;
	c->trusted = t;
	return 0;
}

static int
listen_line(struct parser *p, const struct keyword *kw, const char *a)
{
	const char		*host, *port, *colon, *rb;
	char			 hbuf[64], canon[INET6_ADDRSTRLEN];
	struct in_addr		 in4;
	struct in6_addr		 in6;
	size_t			 hlen, i;
	int			 loopback = 0, numeric = 1;

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
	return cfg_is_word(s, CFG_MAX_SECRET);
}

int
cfg_kw_token(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	if (!valid_secret(argv[0]))
		return perr(p, "%s: the secret must be 1 to %d printable "
		    "characters without blanks", kw->name, CFG_MAX_SECRET);
	return add_token(p, kw, argv[0], argc, argv + 1);
}

int
cfg_kw_token_env(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	const char	*v = argv[0], *secret;

	if (!cfg_valid_env_name(v))
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

int
cfg_kw_account(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	if (!valid_account(argv[0]))
		return perr(p, "%s: '%.80s' is not a user or group name "
		    "(1-32 of A-Z a-z 0-9 _ - .)", kw->name, argv[0]);
	return cfg_set_string(p, cfg_field(p, kw), argv[0]);
}

int
cfg_kw_control_socket(struct parser *p, const struct keyword *kw, int argc,
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
	if (cfg_set_string(p, &c->control_socket, argv[0]) == -1)
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
			if (cfg_set_string(p, argv[i][0] == 'o' ?
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
