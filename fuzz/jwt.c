/*
 * JWT verification (src/jwt.c) on a token from outside, a JWKS document,
 * or claims the harness signs itself, so the fuzzer reaches the claim
 * checks that an unsigned token never passes.  The input's first byte
 * picks which: 0 a token as sent (`Authorization: Bearer ...`), 1 a JWKS
 * file, 2 "HEADER\nCLAIMS" (JSON texts) the harness base64url-encodes and
 * signs with its HS256 key.  Checks what jwt_verify promises: an accepted
 * token's claims are bounded and NUL-terminated, its role a role, an
 * error has a message, and the verdict does not change on a second call.
 */
#include <stdio.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "parley/jwt.h"
#include "fuzz.h"

#define NOW		1800000000
#define HS_SECRET	"fuzz-secret-0123456789abcdef-0123"
#define TOK_MAX		(JWT_TOKEN_MAX + 64)

static const char ed_pem[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEAgBx7/1CHz35ww23dxKjhW6gUaQY1BWID+RQZTElqjCQ=\n"
    "-----END PUBLIC KEY-----\n";

static struct jwt_keys *
keys(void)
{
	static struct jwt_keys	 ks;
	static int		 done;
	char			 err[256];

	if (!done) {
		jwt_keys_init(&ks);
		if (jwt_key_add(&ks, JWT_HS256, "hs", (const unsigned char *)
		    HS_SECRET, strlen(HS_SECRET), err, sizeof(err)) == -1 ||
		    jwt_key_add(&ks, JWT_EDDSA, "ed", (const unsigned char *)
		    ed_pem, strlen(ed_pem), err, sizeof(err)) == -1) {
			fprintf(stderr, "fuzz/jwt: %s\n", err);
			abort();
		}
		snprintf(ks.issuer, sizeof(ks.issuer), "iss");
		snprintf(ks.audience, sizeof(ks.audience), "aud");
		ks.leeway = 30;
		ks.require_exp = 1;
		done = 1;
	}
	return &ks;
}

/* base64url without padding of in[0..n) at out; the length written. */
static size_t
b64u(const unsigned char *in, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789-_";
	size_t i, o = 0;
	unsigned v;

	for (i = 0; i + 2 < n; i += 3) {
		v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = a[v & 63];
	}
	if (n - i == 1) {
		v = (unsigned)in[i] << 16;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
	} else if (n - i == 2) {
		v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
	}
	return o;
}

static void
verify(const char *tok, size_t len)
{
	struct jwt_claims	 cl, again;
	char			 err[256], err2[256];
	int			 rc, rc2;

	err[0] = '\0';
	rc = jwt_verify(keys(), tok, len, NOW, &cl, err, sizeof(err));
	rc2 = jwt_verify(keys(), tok, len, NOW, &again, err2, sizeof(err2));
	FUZZ_CHECK(rc == rc2);
	if (rc != JWT_OK) {
		FUZZ_CHECK(err[0] != '\0' && strlen(err) < sizeof(err));
		FUZZ_CHECK(strcmp(err, err2) == 0);
		return;
	}
	FUZZ_CHECK(memchr(cl.sub, '\0', sizeof(cl.sub)) != NULL);
	FUZZ_CHECK(memchr(cl.scope, '\0', sizeof(cl.scope)) != NULL);
	FUZZ_CHECK(ipc_role_name(cl.role) != NULL);
	FUZZ_CHECK(cl.exp > 0);		/* require_exp */
	FUZZ_CHECK(strcmp(cl.sub, again.sub) == 0 &&
	    strcmp(cl.scope, again.scope) == 0 && cl.role == again.role);
}

/* "HEADER\nCLAIMS" -> a token signed with the HS256 key, then verified. */
static void
signed_claims(const uint8_t *d, size_t n)
{
	static char		 tok[TOK_MAX * 2];
	const uint8_t		*nl = memchr(d, '\n', n);
	unsigned char		 mac[EVP_MAX_MD_SIZE];
	unsigned		 maclen = 0;
	size_t			 o, hl;

	if (nl == NULL || n > TOK_MAX)
		return;
	hl = (size_t)(nl - d);
	o = b64u(d, hl, tok);
	tok[o++] = '.';
	o += b64u(nl + 1, n - hl - 1, tok + o);
	if (HMAC(EVP_sha256(), HS_SECRET, (int)strlen(HS_SECRET),
	    (const unsigned char *)tok, o, mac, &maclen) == NULL)
		return;
	tok[o++] = '.';
	o += b64u(mac, maclen, tok + o);
	verify(tok, o);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jwt_keys	 ks;
	char		*copy, err[256];

	fuzz_quiet();
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		/* An exact-size copy: a read past the token is caught. */
		if ((copy = malloc(size - 1 ? size - 1 : 1)) == NULL)
			return 0;
		memcpy(copy, data + 1, size - 1);
		verify(copy, size - 1);
		free(copy);
		break;
	case 1:
		jwt_keys_init(&ks);
		err[0] = '\0';
		if (jwt_jwks_add(&ks, (const char *)data + 1, size - 1, err,
		    sizeof(err)) == -1)
			FUZZ_CHECK(err[0] != '\0');
		FUZZ_CHECK(ks.nkeys <= 64);
		jwt_keys_free(&ks);
		break;
	default:
		signed_claims(data + 1, size - 1);
		break;
	}
	return 0;
}
