/*
 * JSON Web Tokens (RFC 7519) in the compact JWS form (RFC 7515): a pure
 * decoder and verifier on bytes.  The algorithm of a token is pinned by
 * the key that verifies it (RFC 8725 2.1, 3.1): a key is loaded with its
 * algorithm, and a token whose header names another one is refused, so
 * "alg":"none" and HS256 signed with an RSA public key never verify.
 */
#ifndef PARLEY_JWT_H
#define PARLEY_JWT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "parley/ipc.h"

#define JWT_TOKEN_MAX	8192	/* bytes of a whole token */
#define JWT_HEADER_MAX	1024	/* bytes of the decoded JOSE header */
#define JWT_PAYLOAD_MAX	6144	/* bytes of the decoded claims */
#define JWT_KID_MAX	128	/* bytes of a key id */
#define JWT_KEYS_MAX	64	/* keys in one set (all jwt-key and JWKS) */
#define JWT_ISS_MAX	255	/* bytes of jwt-issuer / jwt-audience */

enum jwt_alg {
	JWT_RS256 = 1, JWT_PS256, JWT_ES256, JWT_ES384, JWT_EDDSA,
	JWT_HS256, JWT_HS512
};

/* Why a token was refused; 0 (JWT_OK) when it was not. */
enum jwt_error {
	JWT_OK = 0,
	JWT_EMALFORMED,		/* not three base64url parts of JSON objects */
	JWT_ESIZE,		/* token, header, claim or signature too long */
	JWT_EALG,		/* alg not the one pinned by the key(s) */
	JWT_EKID,		/* no key with that kid */
	JWT_ESIG,		/* signature does not verify */
	JWT_EEXPIRED,
	JWT_ENBF,		/* not valid yet (nbf, or iat in the future) */
	JWT_EISS,
	JWT_EAUD,
	JWT_ECLAIM		/* a claim missing or of the wrong form */
};

struct evp_pkey_st;

struct jwt_key {
	TAILQ_ENTRY(jwt_key)	 entry;
	enum jwt_alg		 alg;
	char			 kid[JWT_KID_MAX + 1];	/* "" when none */
	struct evp_pkey_st	*pkey;		/* RSA, EC, Ed25519; owned */
	unsigned char		*secret;	/* HS*; owned, wiped on free */
	size_t			 secretlen;
};

/*
 * What verifies tokens: the keys and the claims every token must carry.
 * issuer and audience "" mean unchecked (but a token naming an audience
 * is refused unless that audience is configured, RFC 7519 4.1.3).
 */
struct jwt_keys {
	TAILQ_HEAD(, jwt_key)	 keys;
	unsigned		 nkeys;
	char			 issuer[JWT_ISS_MAX + 1];
	char			 audience[JWT_ISS_MAX + 1];
	int64_t			 leeway;	/* seconds of clock skew allowed */
	int			 require_exp;	/* 1: a token without exp is refused */
};

struct jwt_claims {
	char		 sub[IPC_SUB_MAX + 1];
	int		 role;			/* enum ipc_role */
	char		 scope[IPC_SCOPE_MAX + 1];	/* as ipc_conn.scope */
	int64_t		 exp;			/* Unix seconds; 0: none */
	int64_t		 nbf;
	int64_t		 iat;
};

void	jwt_keys_init(struct jwt_keys *);
void	jwt_keys_free(struct jwt_keys *);

/* "RS256" ... -> enum jwt_alg, or 0; and back ("?" for 0). */
int	jwt_alg_parse(const char *);
const char *jwt_alg_name(int);

/*
 * Adds a key from bytes: a PEM public key (SubjectPublicKeyInfo) for the
 * asymmetric algorithms, the raw secret for HS256/HS512 (one trailing
 * newline dropped).  kid may be NULL.  0, or -1 with err saying why.
 */
int	jwt_key_add(struct jwt_keys *, enum jwt_alg, const char *kid,
	    const unsigned char *data, size_t len, char *err, size_t errlen);

/* Adds every key of a JWKS document (RFC 7517): 0, or -1 with err. */
int	jwt_jwks_add(struct jwt_keys *, const char *json, size_t len,
	    char *err, size_t errlen);

/*
 * Verifies tok (len bytes, need not be NUL-terminated) at now (Unix
 * seconds): signature by a key of the set (the one named by the header's
 * kid when there is one), then exp, nbf, iat, iss, aud, and the claims
 * sub, role, sessions.  JWT_OK with *out filled, or the reason with err
 * a message for the client that holds no secret.
 */
int	jwt_verify(const struct jwt_keys *, const char *tok, size_t len,
	    int64_t now, struct jwt_claims *out, char *err, size_t errlen);

#endif
