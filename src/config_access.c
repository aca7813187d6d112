/*
 * parleyd.conf(5): who may reach parleyd and as whom it runs.  The
 * listen, token, token-env, jwt-*, control-socket, user and group
 * directives.
 */

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "parley/config.h"
#include "parley/proxyproto.h"
#include "config_int.h"

#define CFG_MAX_SECRET	1024
#define CFG_MAX_KEYFILE	(1024 * 1024)	/* a JWKS; a PEM key is a few KB */
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

static int listen_addr(struct parser *, const struct keyword *, const char *);

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

int
cfg_kw_listen(struct parser *p, const struct keyword *kw, int argc, char **argv)
{
	struct cfg_listen	*last, *l;
	int			 i, tls = 0, pp = 0;

	last = TAILQ_LAST(&p->conf->listens, cfg_listens);
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "tls") == 0 && !tls)
			tls = 1;
		else if (strcmp(argv[i], "proxy-protocol") == 0 && !pp)
			pp = 1;
		else
			return perr(p, "%s: unknown or repeated option "
			    "'%.80s'; usage: %s", kw->name, argv[i], kw->usage);
	}
	/* The PROXY header comes before the TLS handshake, which tls.c
	 * starts at once: not read there yet. */
	if (tls && pp)
		return perr(p, "%s: tls and proxy-protocol on one listener are "
		    "not supported; let the proxy terminate TLS, or pass TLS "
		    "through without a PROXY header", kw->name);
	if (listen_addr(p, kw, argv[0]) == -1)
		return -1;
	/* Every listener this line added. */
	for (l = last ? TAILQ_NEXT(last, entry) :
	    TAILQ_FIRST(&p->conf->listens); l != NULL;
	    l = TAILQ_NEXT(l, entry)) {
		l->proxy_protocol = pp;
		if (tls) {
			l->tls = 1;
			p->conf->ntls++;
		}
	}
	return 0;
}

/* tls-certificate and tls-key: an absolute path; tls.c reads the file. */
int
cfg_kw_tls_file(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	struct config	*c = p->conf;

	if (argv[0][0] != '/')
		return perr(p, "%s: must be an absolute path, got '%.80s'",
		    kw->name, argv[0]);
	if (kw->off == C(tls_cert))
		c->tls_cert_line = p->line;
	else
		c->tls_key_line = p->line;
	return cfg_set_string(p, cfg_field(p, kw), argv[0]);
}

/* An OpenSSL cipher list: tls.c tells whether OpenSSL knows it. */
int
cfg_kw_tls_ciphers(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	if (!cfg_is_word(argv[0], 1024))
		return perr(p, "%s: expected an OpenSSL cipher list such as "
		    "ECDHE+AESGCM:ECDHE+CHACHA20, got '%.80s'", kw->name,
		    argv[0]);
	p->conf->tls_ciphers_line = p->line;
	return cfg_set_string(p, &p->conf->tls_ciphers, argv[0]);
}

/* TLS 1.2 and 1.3 only: older versions have known attacks (RFC 8996). */
int
cfg_kw_tls_protocols(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	unsigned	 set = 0;
	int		 i;

	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "TLSv1.2") == 0)
			set |= CFG_TLS_1_2;
		else if (strcmp(argv[i], "TLSv1.3") == 0)
			set |= CFG_TLS_1_3;
		else if (strncmp(argv[i], "TLSv1", 5) == 0 ||
		    strncmp(argv[i], "SSLv", 4) == 0)
			return perr(p, "%s: %.20s is not offered: versions "
			    "before TLS 1.2 are deprecated (RFC 8996); use "
			    "TLSv1.2 and/or TLSv1.3", kw->name, argv[i]);
		else
			return perr(p, "%s: expected TLSv1.2 or TLSv1.3, got "
			    "'%.80s'", kw->name, argv[i]);
	}
	p->conf->tls_protocols = set;
	return 0;
}

int
cfg_tls_check(struct parser *p)
{
	struct config		*c = p->conf;
	struct cfg_listen	*l;

	if (c->ntls == 0)
		return 0;
	TAILQ_FOREACH(l, &c->listens, entry)
		if (l->tls)
			break;
	if (c->tls_cert == NULL || c->tls_key == NULL)
		return cfg_perr_at(p, l->line, "listen %s%s%s:%s tls: needs "
		    "tls-certificate and tls-key (PEM files)",
		    strchr(l->host, ':') ? "[" : "", l->host,
		    strchr(l->host, ':') ? "]" : "", l->port);
	return 0;
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

/* The address of a listen line: one listener, or two for loopback. */
static int
listen_addr(struct parser *p, const struct keyword *kw, const char *a)
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
	struct cfg_token	*t, *o;
	const char		*session = NULL;
	size_t			 i, n;

	if (argc == 4)
		return perr(p, "%s: wrong number of arguments; usage: %s",
		    kw->name, kw->usage);
	if (strcmp(argv[0], "role") != 0)
		return perr(p, "%s: expected 'role', got '%.80s'", kw->name,
		    argv[0]);
	if (ipc_role_parse(argv[1]) == 0)
		return perr(p, "%s: role must be user, agent, observer, admin "
		    "or metrics, got '%.80s'", kw->name, argv[1]);
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

/*
 * HOST[:PORT] at s (n bytes): a DNS name or IPv4 address of [A-Za-z0-9.-],
 * or an IPv6 address in brackets, then an optional port 1-65535.
 */
static int
valid_hostport(const char *s, size_t n)
{
	size_t	i = 0, h;
	uint64_t v;
	char	port[8];

	if (n > 0 && s[0] == '[') {
		for (i = 1; i < n && (is_alnum(s[i]) || s[i] == ':' ||
		    s[i] == '.'); i++)
			;
		if (i == 1 || i >= n || s[i++] != ']')
			return 0;
	} else
		for (; i < n && (is_alnum(s[i]) || s[i] == '.' ||
		    s[i] == '-'); i++)
			;
	if (i == 0 || i > 255)
		return 0;
	if (i == n)
		return 1;
	if (s[i++] != ':' || (h = n - i) == 0 || h > 5)
		return 0;
	memcpy(port, s + i, h);
	port[h] = '\0';
	return cfg_parse_uint(port, &v) == 0 && v >= 1 && v <= 65535;
}

/* Appends a lower-cased copy of name to l, refusing a repeat. */
static int
add_name(struct parser *p, const struct keyword *kw, struct cfg_names *l,
    const char *name)
{
	struct cfg_name	*o;
	size_t		 i;

	TAILQ_FOREACH(o, l, entry)
		if (strcasecmp(o->name, name) == 0)
			return perr(p, "%s %.80s: duplicate (first on line %u)",
			    kw->name, name, o->line);
	if ((o = calloc(1, sizeof(*o))) == NULL ||
	    (o->name = strdup(name)) == NULL) {
		free(o);
		return perr(p, "out of memory");
	}
	for (i = 0; o->name[i] != '\0'; i++)
		if (o->name[i] >= 'A' && o->name[i] <= 'Z')
			o->name[i] += 'a' - 'A';
	o->line = p->line;
	TAILQ_INSERT_TAIL(l, o, entry);
	return 0;
}

void
cfg_names_free(struct cfg_names *l)
{
	struct cfg_name	*o;

	while ((o = TAILQ_FIRST(l)) != NULL) {
		TAILQ_REMOVE(l, o, entry);
		free(o->name);
		free(o);
	}
}

/*
 * allowed-origin ORIGIN: an origin as a browser sends it (RFC 6454),
 * scheme://host[:port] with no path; a default port is dropped, since
 * the browser drops it too and the line would then never match.
 */
int
cfg_kw_allowed_origin(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	const char	*a = argv[0], *hp;
	char		 buf[300];
	size_t		 n;

	if (strcmp(a, "*") == 0)
		return add_name(p, kw, &p->conf->allowed_origins, a);
	if (strncasecmp(a, "http://", 7) == 0)
		hp = a + 7;
	else if (strncasecmp(a, "https://", 8) == 0)
		hp = a + 8;
	else
		return perr(p, "%s: '%.80s' must be http://HOST[:PORT] or "
		    "https://HOST[:PORT] (as the browser's Origin header "
		    "sends it), or *", kw->name, a);
	n = strlen(hp);
	if (n > 0 && hp[n - 1] == '/')
		return perr(p, "%s: '%.80s': an origin has no path, not even "
		    "'/'; remove it", kw->name, a);
	if (!valid_hostport(hp, n))
		return perr(p, "%s: '%.80s' must be SCHEME://HOST[:PORT], HOST "
		    "a name or address, PORT 1-65535", kw->name, a);
	snprintf(buf, sizeof(buf), "%s", a);
	n = strlen(buf);
	if (hp == a + 7 && n > 3 && strcmp(buf + n - 3, ":80") == 0)
		buf[n - 3] = '\0';
	else if (hp == a + 8 && n > 4 && strcmp(buf + n - 4, ":443") == 0)
		buf[n - 4] = '\0';
	return add_name(p, kw, &p->conf->allowed_origins, buf);
}

/* server-name NAME[:PORT]: a Host a client may reach parleyd by. */
int
cfg_kw_server_name(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	const char	*a = argv[0];

	if (strcmp(a, "*") != 0 && !valid_hostport(a, strlen(a)))
		return perr(p, "%s: '%.80s' must be a host name or address, "
		    "with an optional :PORT, or *", kw->name, a);
	return add_name(p, kw, &p->conf->server_names, a);
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

/*
 * Reads a key file whole (at most CFG_MAX_KEYFILE bytes) into a fresh
 * buffer, *len its size; NULL with the error set.  The caller wipes it.
 */
static unsigned char *
key_file(struct parser *p, const struct keyword *kw, const char *path,
    size_t *len)
{
	unsigned char *buf;
	ssize_t n = 0;
	int fd;

	*len = 0;
	if (path[0] != '/') {
		perr(p, "%s: must be an absolute path, got '%.80s'", kw->name,
		    path);
		return NULL;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		perr(p, "%s: %s: %s", kw->name, path, strerror(errno));
		return NULL;
	}
	if ((buf = malloc(CFG_MAX_KEYFILE + 1)) == NULL) {
		close(fd);
		perr(p, "out of memory");
		return NULL;
	}
	while (*len <= CFG_MAX_KEYFILE &&
	    ((n = read(fd, buf + *len, CFG_MAX_KEYFILE + 1 - *len)) > 0 ||
	    (n == -1 && errno == EINTR)))
		if (n > 0)
			*len += (size_t)n;
	close(fd);
	if (n == -1 || *len > CFG_MAX_KEYFILE) {
		explicit_bzero(buf, *len);
		free(buf);
		perr(p, "%s: %s: %s", kw->name, path, n == -1 ?
		    strerror(errno) : "larger than 1 MB");
		return NULL;
	}
	return buf;
}

/* Reads path and adds its key (alg) or, alg 0, its JWKS. */
static int
key_load(struct parser *p, const struct keyword *kw, const char *path,
    int alg, const char *kid)
{
	unsigned char *buf;
	char why[200];
	size_t len;
	int rc;

	if ((buf = key_file(p, kw, path, &len)) == NULL)
		return -1;
	rc = alg == 0 ? jwt_jwks_add(&p->conf->jwt, (const char *)buf, len,
	    why, sizeof(why)) : jwt_key_add(&p->conf->jwt, alg, kid, buf, len,
	    why, sizeof(why));
	explicit_bzero(buf, len);
	free(buf);
	if (rc == -1)
		return perr(p, "%s: %s: %s", kw->name, path, why);
	return 0;
}

/* jwt-key FILE ALG [kid ID]: one key, its algorithm pinned here. */
int
cfg_kw_jwt_key(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	int alg;

	if ((alg = jwt_alg_parse(argv[1])) == 0)
		return perr(p, "%s: algorithm must be RS256, PS256, ES256, "
		    "ES384, EdDSA, HS256 or HS512, got '%.40s'", kw->name,
		    argv[1]);
	if (argc == 3 || (argc == 4 && strcmp(argv[2], "kid") != 0))
		return perr(p, "%s: expected 'kid ID' after the algorithm",
		    kw->name);
	if (argc == 4 && !cfg_is_word(argv[3], JWT_KID_MAX))
		return perr(p, "%s: kid must be 1 to %d printable characters",
		    kw->name, JWT_KID_MAX);
	return key_load(p, kw, argv[0], alg, argc == 4 ? argv[3] : NULL);
}

/* jwt-jwks FILE: every key of a JSON Web Key Set. */
int
cfg_kw_jwt_jwks(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	return key_load(p, kw, argv[0], 0, NULL);
}

/* jwt-issuer, jwt-audience: the exact string a token's claim must hold. */
int
cfg_kw_jwt_claim(struct parser *p, const struct keyword *kw, int argc,
    char **argv)
{
	(void)argc;
	if (!cfg_is_word(argv[0], JWT_ISS_MAX))
		return perr(p, "%s: must be 1 to %d printable characters "
		    "without blanks", kw->name, JWT_ISS_MAX);
	memcpy(cfg_field(p, kw), argv[0], strlen(argv[0]) + 1);
	return 0;
}

