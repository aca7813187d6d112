/*
 * What a request may reach: before its token is read, whether it comes
 * from this server's own site (Host and Origin: no DNS rebinding, no
 * cross-site request forgery or WebSocket hijacking by a page the local
 * user visits); after, whether its role may use the endpoint (the one
 * table of endpoints and roles, which parley-protocol(7) shows).
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "parley/config.h"
#include "parley/http.h"
#include "supervisor.h"

#define R_OBS		(1u << IPC_ROLE_OBSERVER)
#define R_USER		(1u << IPC_ROLE_USER)
#define R_AGENT		(1u << IPC_ROLE_AGENT)
#define R_ADMIN		(1u << IPC_ROLE_ADMIN)
#define R_METRICS	(1u << IPC_ROLE_METRICS)
#define R_SESSION	(R_OBS | R_USER | R_AGENT | R_ADMIN)

#define G_PUBLIC	0x1	/* no token needed */
#define G_SERVER	0x2	/* server-wide data: no token limited to sessions */

/*
 * The endpoints, first match wins.  method NULL: any (the handler answers
 * 405 for one it does not serve); '*' in a path stands for one segment, a
 * session id.  The handlers check more on some: the worker refuses every
 * type but ping and resume from an observer's messages (over
 * /api/agents/stream as an error in the stream), and /api/audit needs
 * admin or a token scoped to that session (listener.c, audit_session).
 * A token's scope is checked against the session id when it is routed.
 */
static const struct guard_route {
	const char	*method;
	const char	*path;
	unsigned	 roles;
	unsigned	 flags;
} routes[] = {
	{ "GET",	"/health",		0,		G_PUBLIC },
	{ "GET",	"/health/live",		0,		G_PUBLIC },
	{ "GET",	"/health/ready",	0,		G_PUBLIC },
	{ NULL,		"/api/info",		R_ADMIN | R_METRICS, G_SERVER },
	{ NULL,		"/metrics",		R_ADMIN | R_METRICS, G_SERVER },
	{ NULL,		"/chat",		R_SESSION,	0 },
	{ "POST",	"/sessions",		R_USER | R_AGENT | R_ADMIN, 0 },
	{ NULL,		"/sessions",		R_SESSION,	0 },
	{ "DELETE",	"/sessions/*",		R_USER | R_AGENT | R_ADMIN, 0 },
	{ NULL,		"/sessions/*",		R_SESSION,	0 },
	{ NULL,		"/sessions/*/stream",	R_SESSION,	0 },
	{ NULL,		"/sessions/*/events",	R_SESSION,	0 },
	{ NULL,		"/sessions/*/messages",	R_SESSION,	0 },
	{ NULL,		"/sessions/*/log",	R_SESSION,	0 },
	{ NULL,		"/sessions/*/thoughts",	R_SESSION,	0 },
	{ NULL,		"/sessions/*/dashboard", R_SESSION,	0 },
	{ NULL,		"/sessions/*/kb",	R_SESSION,	0 },
	{ "POST",	"/sessions/*/kb/search", R_SESSION,	0 },
	{ "DELETE",	"/sessions/*/kb/*",	R_USER | R_AGENT | R_ADMIN, 0 },
	{ NULL,		"/sessions/*/control",	R_ADMIN,	0 },
	/* A project's knowledge (kgs.c): observers read, writers write. */
	{ "GET",	"/knowledge/*",		R_SESSION,	0 },
	{ "POST",	"/knowledge/*/actions",	R_USER | R_AGENT | R_ADMIN, 0 },
	{ "POST",	"/knowledge/*/query",	R_SESSION,	0 },
	{ NULL,		"/knowledge/*/stream",	R_SESSION,	0 },
	{ NULL,		"/api/agents/stream",	R_SESSION,	0 },
	/* The AI SDK's and AG-UI's (aisdk.c, agui.c): a run is a chat, so
	 * the worker refuses an observer's post as it does a chat. */
	{ NULL,		"/api/chat",		R_SESSION,	0 },
	{ NULL,		"/api/chat/*/stream",	R_SESSION,	0 },
	{ NULL,		"/api/agui",		R_SESSION,	0 },
	{ NULL,		"/api/agui/*/stream",	R_SESSION,	0 },
	{ NULL,		"/api/audit",		R_SESSION,	0 },
	{ NULL,		"/api/index",		R_ADMIN,	G_SERVER },
	{ NULL,		"/api/index/status",	R_ADMIN,	G_SERVER },
	{ NULL,		"/api/search",		R_ADMIN,	G_SERVER },
	/* The knowledge MCP server: knowledge_act needs user, agent or
	 * admin, which the worker checks per call (kgmcp.c). */
	{ NULL,		"/mcp",			R_SESSION,	0 },
};

#define NROLES	(IPC_ROLE_METRICS + 1)

static int
refuse(struct guard_err *e, int status, const char *code, const char *fmt,
    ...)
{
	va_list ap;

	e->status = status;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* Whether path is pat, each '*' of pat standing for one non-empty segment. */
static int
path_match(const char *pat, const char *path)
{
	size_t n;

	while (*pat != '\0') {
		if (*pat == '*') {
			if ((n = strcspn(path, "/")) == 0)
				return 0;
			path += n;
			pat++;
		} else if (*pat++ != *path++)
			return 0;
	}
	return *path == '\0';
}

/* "user, agent or admin" for a role mask, into buf. */
static void
roles_text(unsigned mask, char *buf, size_t len)
{
	size_t i, n = 0, k = 0;

	for (i = 1; i < NROLES; i++)
		if (mask & (1u << i))
			n++;
	buf[0] = '\0';
	for (i = 1; i < NROLES; i++) {
		if (!(mask & (1u << i)))
			continue;
		k++;
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
		    k == 1 ? "" : k == n ? " or " : ", ", ipc_role_name(i));
	}
}

int
guard_role(const struct http_request *req, int role, const char *scope,
    struct guard_err *e)
{
	const struct guard_route *r;
	char need[64];
	size_t i;

	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		r = &routes[i];
		if ((r->method == NULL || strcmp(r->method, req->method) == 0) &&
		    path_match(r->path, req->path))
			break;
	}
	/* An unknown path goes no further, so a metrics token never
	 * reaches a worker. */
	if (i == sizeof(routes) / sizeof(routes[0]))
		return refuse(e, 404, "NOT_FOUND", "no such endpoint; see "
		    "parley-protocol(7)");
	if (r->flags & G_PUBLIC)
		return 0;
	if (role <= 0 || (size_t)role >= NROLES ||
	    !(r->roles & (1u << role))) {
		roles_text(r->roles, need, sizeof(need));
		return refuse(e, 403, "FORBIDDEN", "%s %s needs the %s role; "
		    "this token's role is %s", req->method, r->path, need,
		    role > 0 && (size_t)role < NROLES ? ipc_role_name(role) :
		    "none");
	}
	if ((r->flags & G_SERVER) && scope[0] != '\0')
		return refuse(e, 403, "FORBIDDEN", "%s is server-wide data; a "
		    "token limited to sessions cannot read it: use an admin "
		    "or metrics token without a session", r->path);
	return 0;
}

/* Splits HOST[:PORT] (IPv6 in brackets): host bytes into *hlen, port or NULL. */
static const char *
split_port(const char *s, size_t *hlen)
{
	const char *c, *b;

	b = s[0] == '[' ? strchr(s, ']') : s;
	if (b == NULL || (c = strrchr(b, ':')) == NULL) {
		*hlen = strlen(s);
		return NULL;
	}
	*hlen = (size_t)(c - s);
	return c + 1;
}

static int
same(const char *a, size_t alen, const char *b)
{
	return strlen(b) == alen && strncasecmp(a, b, alen) == 0;
}

/*
 * Whether Host names this listener: its address and port (own, addr:port
 * as a URL writes it; a default port may be left out), localhost on a
 * loopback listener, or a server-name.
 */
static int
host_ok(const struct config *conf, const char *host, const char *own,
    int loopback)
{
	const struct cfg_name *n;
	const char *hport, *oport, *nport;
	size_t hlen, olen, nlen;

	if (own[0] != '\0' && strcasecmp(host, own) == 0)
		return 1;
	hport = split_port(host, &hlen);
	oport = split_port(own, &olen);
	if (oport != NULL && (hport == NULL ? strcmp(oport, "80") == 0 ||
	    strcmp(oport, "443") == 0 : strcmp(hport, oport) == 0)) {
		if (hlen == olen && strncasecmp(host, own, hlen) == 0)
			return 1;
		if (loopback && same(host, hlen, "localhost"))
			return 1;
	}
	TAILQ_FOREACH(n, &conf->server_names, entry) {
		if (strcmp(n->name, "*") == 0)
			return 1;
		nport = split_port(n->name, &nlen);
		if (nport != NULL ? strcasecmp(n->name, host) == 0 :
		    nlen == hlen && strncasecmp(n->name, host, hlen) == 0)
			return 1;
	}
	return 0;
}

/*
 * Whether a browser page of origin may use this server: its own origin
 * (the scheme and the Host it reached, which host_ok checked) or one an
 * allowed-origin line names.
 */
static int
origin_ok(const struct config *conf, const char *origin, const char *host)
{
	const struct cfg_name *n;
	const char *rest = NULL;

	if (strncasecmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	if (rest != NULL && strcasecmp(rest, host) == 0)
		return 1;
	TAILQ_FOREACH(n, &conf->allowed_origins, entry)
		if (strcmp(n->name, "*") == 0 ||
		    strcasecmp(n->name, origin) == 0)
			return 1;
	return 0;
}

/* A header value fit to quote in an error: printable, bounded. */
static void
quote(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < len; i++)
		buf[i] = s[i] > ' ' && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
}

void
guard_local(int fd, struct guard_local *l)
{
	struct sockaddr_storage ss;
	const struct sockaddr_in *sin;
	const struct sockaddr_in6 *sin6;
	socklen_t sl = sizeof(ss);
	char addr[INET6_ADDRSTRLEN];

	l->own[0] = '\0';
	l->loopback = 0;
	/* inet_ntop, not getnameinfo: the latter costs 10 us a request. */
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == -1)
		ss.ss_family = AF_UNSPEC;	/* only server-names match */
	if (ss.ss_family == AF_INET6) {
		sin6 = (const struct sockaddr_in6 *)&ss;
		if (inet_ntop(AF_INET6, &sin6->sin6_addr, addr,
		    sizeof(addr)) != NULL)
			snprintf(l->own, sizeof(l->own), "[%s]:%u", addr,
			    ntohs(sin6->sin6_port));
		l->loopback = IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr);
	} else if (ss.ss_family == AF_INET) {
		sin = (const struct sockaddr_in *)&ss;
		if (inet_ntop(AF_INET, &sin->sin_addr, addr,
		    sizeof(addr)) != NULL)
			snprintf(l->own, sizeof(l->own), "%s:%u", addr,
			    ntohs(sin->sin_port));
		l->loopback = (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
	}
}

int
guard_site(const struct config *conf, const struct guard_local *l,
    const struct http_request *req, struct guard_err *e)
{
	const char *host = http_header(req, "Host");
	const char *origin = http_header(req, "Origin");
	const char *own = l->own;
	char q[96];
	int loopback = l->loopback;

	/* Browsers always send Host; a client without one is no page. */
	if (host != NULL && !host_ok(conf, host, own, loopback)) {
		quote(host, q, sizeof(q));
		return refuse(e, 421, "BAD_REQUEST", "Host '%s' is not this "
		    "server's address (%s); if it is a name of this server, "
		    "add 'server-name %s' to parleyd.conf", q, own, q);
	}
	/* Only browsers send Origin; a page of another site is refused. */
	if (origin != NULL && !origin_ok(conf, origin, host != NULL ? host :
	    own)) {
		quote(origin, q, sizeof(q));
		return refuse(e, 403, "FORBIDDEN", "Origin '%s' is not allowed "
		    "to use this server; if pages of that origin may, add "
		    "'allowed-origin %s' to parleyd.conf", q, q);
	}
	return 0;
}
