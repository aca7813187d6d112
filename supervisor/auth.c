/*
 * Who is asking: the supervisor finds the role, session scope, subject
 * and expiry of a request's credentials before it routes the request.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "parley/config.h"
#include "parley/http.h"
#include "parley/ipc.h"
#include "supervisor.h"

/*
 * The longest credential taken, by any way in: a JWT with a few claims
 * is 300 to 1,500 bytes; a generous scope list stays well under this.
 */
#define AUTH_TOKEN_MAX	8192

static const char *role_names[] = {
	[IPC_ROLE_OBSERVER] = "observer", [IPC_ROLE_USER] = "user",
	[IPC_ROLE_AGENT] = "agent", [IPC_ROLE_ADMIN] = "admin",
};

int
authenticate(struct sup *sup, const struct http_request *req, char *scope,
    size_t scopelen)
{
	const struct cfg_token *t;
	const char *h;
	char qtok[AUTH_TOKEN_MAX + 1];
	const char *tok = NULL;
	size_t tlen;
	int role = 0;

	scope[0] = '\0';
	if (TAILQ_EMPTY(&sup->conf->tokens))
		return IPC_ROLE_ADMIN;	/* loopback only: config_load enforces it */
	if ((h = http_header(req, "Authorization")) != NULL &&
	    strncasecmp(h, "Bearer ", 7) == 0)
		tok = h + 7;
	else if (req->query != NULL &&
	    http_query_param(req->query, "access_token", qtok,
	    sizeof(qtok)) == 0)
		tok = qtok;
	if (tok == NULL || (tlen = strlen(tok)) > AUTH_TOKEN_MAX)
		return 0;
	/* Walk every token so timing does not tell which prefix matched. */
	TAILQ_FOREACH(t, &sup->conf->tokens, entry) {
		size_t i;
		int r;

		if (strlen(t->secret) != tlen ||
		    CRYPTO_memcmp(t->secret, tok, tlen) != 0 || role != 0)
			continue;
		for (r = 0, i = 1; i < sizeof(role_names) / sizeof(*role_names);
		    i++)
			if (strcmp(role_names[i], t->role) == 0)
				r = (int)i;
		role = r;
		if (t->session != NULL)
			snprintf(scope, scopelen, "%s", t->session);
	}
	return role;
}
