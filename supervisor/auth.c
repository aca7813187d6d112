/*
 * Who is asking: the supervisor finds the role, session scope, subject
 * and expiry of a request's credentials before it routes the request.
 * A credential is a static token (parleyd.conf token) or a JWT, passed
 * as "Authorization: Bearer", ?access_token= or, for browsers, which
 * cannot set headers on a WebSocket, as the subprotocol "bearer.TOKEN"
 * offered beside "parley" in Sec-WebSocket-Protocol.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "parley/config.h"
#include "parley/http.h"
#include "parley/ipc.h"
#include "parley/jwt.h"
#include "parley/util.h"
#include "supervisor.h"

/*
 * The longest credential taken, by any way in: a JWT with a few claims
 * is 300 to 1,500 bytes; a generous scope list stays well under this.
 */
#define AUTH_TOKEN_MAX	JWT_TOKEN_MAX
#define AUTH_PROTO_PREFIX	"bearer."

/*
 * The credential's bytes into buf (NUL-terminated, at most AUTH_TOKEN_MAX):
 * its length, 0 when the request carries none, -1 when too long.
 */
static long
credential(const struct http_request *req, char *buf, size_t cap)
{
	const char *h, *p, *e;
	size_t n;

	buf[0] = '\0';
	if ((h = http_header(req, "Authorization")) != NULL &&
	    strncasecmp(h, "Bearer ", 7) == 0) {
		if ((n = strlen(h + 7)) >= cap)
			return -1;
		memcpy(buf, h + 7, n + 1);
		return (long)n;
	}
	if (req->query != NULL) {
		switch (http_query_param(req->query, "access_token", buf,
		    cap)) {
		case 0:
			return (long)strlen(buf);
		case -2:
			return -1;
		}
	}
	/* Sec-WebSocket-Protocol: parley, bearer.TOKEN (RFC 6455 4.1). */
	if ((h = http_header(req, "Sec-WebSocket-Protocol")) == NULL)
		return 0;
	for (p = h; *p != '\0'; p = *e ? e + 1 : e) {
		p += strspn(p, " \t");
		if ((e = strchr(p, ',')) == NULL)
			e = p + strlen(p);
		n = (size_t)(e - p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n > strlen(AUTH_PROTO_PREFIX) && strncmp(p,
		    AUTH_PROTO_PREFIX, strlen(AUTH_PROTO_PREFIX)) == 0) {
			p += strlen(AUTH_PROTO_PREFIX);
			n -= strlen(AUTH_PROTO_PREFIX);
			if (n >= cap)
				return -1;
			memcpy(buf, p, n);
			buf[n] = '\0';
			return (long)n;
		}
	}
	return 0;
}

/* The role of a static token equal to tok, or 0; its scope into ic. */
static int
static_token(const struct config *conf, const char *tok, size_t tlen,
    struct ipc_conn *ic)
{
	const struct cfg_token *t;
	int role = 0;

	/* Walk every token so timing does not tell which prefix matched. */
	TAILQ_FOREACH(t, &conf->tokens, entry) {
		if (strlen(t->secret) != tlen ||
		    CRYPTO_memcmp(t->secret, tok, tlen) != 0 || role != 0)
			continue;
		role = ipc_role_parse(t->role);
		if (t->session != NULL)
			snprintf(ic->scope, sizeof(ic->scope), "%s",
			    t->session);
	}
	return role;
}

/* A JWT's role, or 0 with msg; its claims into ic. */
static int
auth_jwt(const struct config *conf, const char *tok, size_t len,
    struct ipc_conn *ic, char *msg, size_t msglen)
{
	struct jwt_claims cl;

	/* Not time(): glibc reads the coarse clock, which can still say the
	 * last second when the issuer's precise clock says this one, so a
	 * token minted at once failed iat with jwt-leeway 0. */
	if (jwt_verify(&conf->jwt, tok, len, (int64_t)(util_now_ms() / 1000),
	    &cl, msg, msglen) != JWT_OK)
		return 0;
	memcpy(ic->scope, cl.scope, sizeof(ic->scope));
	memcpy(ic->subject, cl.sub, sizeof(ic->subject));
	ic->expires_ms = cl.exp > 0 ? (uint64_t)cl.exp * 1000 : 0;
	return cl.role;
}

int
authenticate(struct sup *sup, const struct http_request *req,
    struct ipc_conn *ic, char *msg, size_t msglen)
{
	const struct config *conf = sup->conf;
	char tok[AUTH_TOKEN_MAX + 1];
	long len;
	int role;

	ic->scope[0] = ic->subject[0] = '\0';
	ic->expires_ms = 0;
	if (TAILQ_EMPTY(&conf->tokens) && conf->jwt.nkeys == 0)
		/* Loopback only: config_check sees to it. */
		return IPC_ROLE_ADMIN;
	if ((len = credential(req, tok, sizeof(tok))) <= 0) {
		snprintf(msg, msglen, len == 0 ? "missing bearer token: send "
		    "'Authorization: Bearer TOKEN', ?access_token=TOKEN or "
		    "the WebSocket subprotocols 'parley, bearer.TOKEN'" :
		    "the bearer token is longer than %d bytes or badly "
		    "percent-encoded", AUTH_TOKEN_MAX);
		return 0;
	}
	if ((role = static_token(conf, tok, (size_t)len, ic)) != 0)
		return role;
	if (conf->jwt.nkeys > 0 && strchr(tok, '.') != NULL) {
		char why[200];

		if ((role = auth_jwt(conf, tok, (size_t)len, ic, why,
		    sizeof(why))) == 0)
			snprintf(msg, msglen, "invalid JWT: %s", why);
		explicit_bzero(tok, sizeof(tok));
		return role;
	}
	explicit_bzero(tok, sizeof(tok));
	snprintf(msg, msglen, "unknown bearer token");
	return 0;
}
