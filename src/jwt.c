/*
 * JWT verification: strict base64url, JOSE header, signature by a key
 * whose algorithm is fixed when it is loaded, then the registered claims
 * and Parley's own (role, sessions).  Nothing here does I/O: config.c
 * reads the key files, the supervisor and the workers call jwt_verify().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "parley/jwt.h"
#include "parley/store.h"
#include "parley/util.h"

#define JWT_SIG_MAX	1024	/* bytes of a signature: RSA 8192 bits */
#define JWT_RSA_MIN	2048	/* bits of the smallest RSA key taken */

static const char *alg_names[] = {
	[JWT_RS256] = "RS256", [JWT_PS256] = "PS256", [JWT_ES256] = "ES256",
	[JWT_ES384] = "ES384", [JWT_EDDSA] = "EdDSA", [JWT_HS256] = "HS256",
	[JWT_HS512] = "HS512",
};

#define NELEM(a)	(sizeof(a) / sizeof(*(a)))

static int
jerr(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

int
jwt_alg_parse(const char *s)
{
	size_t i;

	for (i = 1; i < NELEM(alg_names); i++)
		if (strcmp(s, alg_names[i]) == 0)
			return (int)i;
	return 0;
}

const char *
jwt_alg_name(int alg)
{
	if (alg <= 0 || (size_t)alg >= NELEM(alg_names))
		return "?";
	return alg_names[alg];
}

void
jwt_keys_init(struct jwt_keys *ks)
{
	memset(ks, 0, sizeof(*ks));
	TAILQ_INIT(&ks->keys);
	ks->leeway = 30;
	ks->require_exp = 1;
}

static void
key_free(struct jwt_key *k)
{
	EVP_PKEY_free(k->pkey);
	if (k->secret != NULL) {
		OPENSSL_cleanse(k->secret, k->secretlen);
		free(k->secret);
	}
	free(k);
}

void
jwt_keys_free(struct jwt_keys *ks)
{
	struct jwt_key *k;

	while ((k = TAILQ_FIRST(&ks->keys)) != NULL) {
		TAILQ_REMOVE(&ks->keys, k, entry);
		key_free(k);
	}
	ks->nkeys = 0;
}

/*
 * Strict base64url without padding (RFC 7515 2, appendix C): only the
 * 64 letters, no '=', no length that leaves 1 char over, and the unused
 * low bits of the last char zero, so each value has one spelling.
 * Decodes into out (at most outcap bytes); the length, or -1.
 */
static long
b64url_decode(const char *s, size_t len, unsigned char *out, size_t outcap)
{
	size_t i, n = 0;
	unsigned acc = 0;
	int bits = 0, v;

	if (len % 4 == 1)
		return -1;
	for (i = 0; i < len; i++) {
		if ((v = util_b64_value((unsigned char)s[i], 1)) < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		if ((bits += 6) >= 8) {
			bits -= 8;
			if (n >= outcap)
				return -1;
			out[n++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (acc != 0)
		return -1;
	return (long)n;
}

/* Decodes a JWKS member (a base64url string) into a fresh buffer. */
static unsigned char *
b64url_member(const cJSON *o, const char *name, size_t max, size_t *outlen)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
	unsigned char *buf;
	size_t len;
	long n;

	if (!cJSON_IsString(f) || (len = strlen(f->valuestring)) == 0 ||
	    len > max * 4 / 3 + 4 || (buf = malloc(len)) == NULL)
		return NULL;
	if ((n = b64url_decode(f->valuestring, len, buf, len)) <= 0) {
		free(buf);
		return NULL;
	}
	*outlen = (size_t)n;
	return buf;
}

/* 1 if the key's type (and curve) is the one alg needs. */
static int
pkey_fits(EVP_PKEY *pk, enum jwt_alg alg, char *err, size_t errlen)
{
	char group[32];

	switch (alg) {
	case JWT_RS256:
	case JWT_PS256:
		if (!EVP_PKEY_is_a(pk, "RSA"))
			return jerr(err, errlen, 0, "%s needs an RSA key",
			    jwt_alg_name(alg));
		if (EVP_PKEY_get_bits(pk) < JWT_RSA_MIN)
			return jerr(err, errlen, 0, "RSA key of %d bits; "
			    "%s needs at least %d", EVP_PKEY_get_bits(pk),
			    jwt_alg_name(alg), JWT_RSA_MIN);
		return 1;
	case JWT_ES256:
	case JWT_ES384:
		if (!EVP_PKEY_is_a(pk, "EC") ||
		    !EVP_PKEY_get_utf8_string_param(pk,
		    OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), NULL) ||
		    strcmp(group, alg == JWT_ES256 ? "prime256v1" :
		    "secp384r1") != 0)
			return jerr(err, errlen, 0, "%s needs an EC key on "
			    "curve %s", jwt_alg_name(alg),
			    alg == JWT_ES256 ? "P-256" : "P-384");
		return 1;
	case JWT_EDDSA:
		if (!EVP_PKEY_is_a(pk, "ED25519"))
			return jerr(err, errlen, 0, "EdDSA needs an Ed25519 "
			    "key");
		return 1;
	default:
		return jerr(err, errlen, 0, "%s takes a secret, not a public "
		    "key", jwt_alg_name(alg));
	}
}

static int
key_insert(struct jwt_keys *ks, enum jwt_alg alg, const char *kid,
    EVP_PKEY *pk, const unsigned char *secret, size_t secretlen, char *err,
    size_t errlen)
{
	struct jwt_key *k, *o;

	if (kid != NULL && (kid[0] == '\0' || strlen(kid) > JWT_KID_MAX)) {
		EVP_PKEY_free(pk);
		return jerr(err, errlen, -1, "kid must be 1 to %d bytes",
		    JWT_KID_MAX);
	}
	TAILQ_FOREACH(o, &ks->keys, entry)
		if (kid != NULL && strcmp(o->kid, kid) == 0) {
			EVP_PKEY_free(pk);
			return jerr(err, errlen, -1, "duplicate kid '%s'", kid);
		}
	if (ks->nkeys >= JWT_KEYS_MAX) {
		EVP_PKEY_free(pk);
		return jerr(err, errlen, -1, "more than %d keys", JWT_KEYS_MAX);
	}
	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (secret != NULL && (k->secret = malloc(secretlen)) == NULL)) {
		free(k);
		EVP_PKEY_free(pk);
		return jerr(err, errlen, -1, "out of memory");
	}
	k->alg = alg;
	if (kid != NULL)
		snprintf(k->kid, sizeof(k->kid), "%s", kid);
	k->pkey = pk;
	if (secret != NULL) {
		memcpy(k->secret, secret, secretlen);
		k->secretlen = secretlen;
	}
	TAILQ_INSERT_TAIL(&ks->keys, k, entry);
	ks->nkeys++;
	return 0;
}

/* The shortest HMAC key RFC 7518 3.2 allows: the hash's size. */
static size_t
hs_min(enum jwt_alg alg)
{
	return alg == JWT_HS512 ? 64 : 32;
}

int
jwt_key_add(struct jwt_keys *ks, enum jwt_alg alg, const char *kid,
    const unsigned char *data, size_t len, char *err, size_t errlen)
{
	EVP_PKEY *pk;
	BIO *b;

	if (alg == JWT_HS256 || alg == JWT_HS512) {
		if (len > 0 && data[len - 1] == '\n')
			len--;
		if (len > 0 && data[len - 1] == '\r')
			len--;
		if (len < hs_min(alg) || len > 1024)
			return jerr(err, errlen, -1, "an %s secret must be %zu "
			    "to 1024 bytes, got %zu", jwt_alg_name(alg),
			    hs_min(alg), len);
		return key_insert(ks, alg, kid, NULL, data, len, err, errlen);
	}
	if (alg < JWT_RS256 || alg > JWT_EDDSA)
		return jerr(err, errlen, -1, "unknown algorithm");
	if (len > 65536 || (b = BIO_new_mem_buf(data, (int)len)) == NULL)
		return jerr(err, errlen, -1, "not a PEM public key");
	pk = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
	BIO_free(b);
	if (pk == NULL)
		return jerr(err, errlen, -1, "not a PEM public key (a "
		    "'BEGIN PUBLIC KEY' block, e.g. from openssl pkey "
		    "-pubout)");
	if (!pkey_fits(pk, alg, err, errlen)) {
		EVP_PKEY_free(pk);
		return -1;
	}
	return key_insert(ks, alg, kid, pk, NULL, 0, err, errlen);
}

/* An EVP_PKEY from OSSL_PARAMs built by the caller; NULL on failure. */
static EVP_PKEY *
pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
	EVP_PKEY_CTX *ctx = NULL;
	OSSL_PARAM *params = NULL;
	EVP_PKEY *pk = NULL;

	if ((params = OSSL_PARAM_BLD_to_param(bld)) == NULL ||
	    (ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL)) == NULL ||
	    EVP_PKEY_fromdata_init(ctx) <= 0 ||
	    EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, params) <= 0)
		pk = NULL;
	OSSL_PARAM_free(params);
	EVP_PKEY_CTX_free(ctx);
	return pk;
}

static EVP_PKEY *
jwk_rsa(const cJSON *o)
{
	unsigned char *n = NULL, *e = NULL;
	size_t nl = 0, el = 0;
	BIGNUM *bn = NULL, *be = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *pk = NULL;

	if ((n = b64url_member(o, "n", 1024, &nl)) != NULL &&
	    (e = b64url_member(o, "e", 16, &el)) != NULL &&
	    (bn = BN_bin2bn(n, (int)nl, NULL)) != NULL &&
	    (be = BN_bin2bn(e, (int)el, NULL)) != NULL &&
	    (bld = OSSL_PARAM_BLD_new()) != NULL &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
		pk = pkey_fromdata("RSA", bld);
	OSSL_PARAM_BLD_free(bld);
	BN_free(bn);
	BN_free(be);
	free(n);
	free(e);
	return pk;
}

static EVP_PKEY *
jwk_ec(const cJSON *o, const char *group, size_t clen)
{
	unsigned char *x = NULL, *y = NULL, pt[1 + 2 * 66];
	size_t xl = 0, yl = 0;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *pk = NULL;

	if ((x = b64url_member(o, "x", clen, &xl)) != NULL &&
	    (y = b64url_member(o, "y", clen, &yl)) != NULL &&
	    xl == clen && yl == clen) {
		pt[0] = 0x04;	/* uncompressed point (SEC 1 2.3.3) */
		memcpy(pt + 1, x, clen);
		memcpy(pt + 1 + clen, y, clen);
		if ((bld = OSSL_PARAM_BLD_new()) != NULL &&
		    OSSL_PARAM_BLD_push_utf8_string(bld,
		    OSSL_PKEY_PARAM_GROUP_NAME, group, 0) &&
		    OSSL_PARAM_BLD_push_octet_string(bld,
		    OSSL_PKEY_PARAM_PUB_KEY, pt, 1 + 2 * clen))
			pk = pkey_fromdata("EC", bld);
	}
	OSSL_PARAM_BLD_free(bld);
	free(x);
	free(y);
	return pk;
}

/* Adds one JWK: 0, or -1 with err. */
static int
jwk_add(struct jwt_keys *ks, const cJSON *o, char *err, size_t errlen)
{
	const cJSON *kty = cJSON_GetObjectItemCaseSensitive(o, "kty");
	const cJSON *crv = cJSON_GetObjectItemCaseSensitive(o, "crv");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "alg");
	const cJSON *kid = cJSON_GetObjectItemCaseSensitive(o, "kid");
	const cJSON *use = cJSON_GetObjectItemCaseSensitive(o, "use");
	const char *c = cJSON_IsString(crv) ? crv->valuestring : "";
	EVP_PKEY *pk = NULL;
	unsigned char *sec;
	size_t len;
	int alg = 0, rc;

	if (!cJSON_IsObject(o) || !cJSON_IsString(kty))
		return jerr(err, errlen, -1, "a key without 'kty'");
	if (kid != NULL && !cJSON_IsString(kid))
		return jerr(err, errlen, -1, "'kid' must be a string");
	if (use != NULL && (!cJSON_IsString(use) ||
	    strcmp(use->valuestring, "sig") != 0))
		return jerr(err, errlen, -1, "a key whose 'use' is not 'sig'");
	if (a != NULL && (!cJSON_IsString(a) ||
	    (alg = jwt_alg_parse(a->valuestring)) == 0))
		return jerr(err, errlen, -1, "unsupported 'alg'; use RS256, "
		    "PS256, ES256, ES384, EdDSA, HS256 or HS512");
	if (strcmp(kty->valuestring, "RSA") == 0) {
		/* RS256 and PS256 share keys: the JWK must say which. */
		if (alg == 0)
			return jerr(err, errlen, -1, "an RSA key needs 'alg' "
			    "(RS256 or PS256)");
		pk = jwk_rsa(o);
	} else if (strcmp(kty->valuestring, "EC") == 0) {
		if (alg == 0)
			alg = strcmp(c, "P-256") == 0 ? JWT_ES256 :
			    strcmp(c, "P-384") == 0 ? JWT_ES384 : 0;
		if ((alg == JWT_ES256 && strcmp(c, "P-256") == 0) ||
		    (alg == JWT_ES384 && strcmp(c, "P-384") == 0))
			pk = jwk_ec(o, alg == JWT_ES256 ? "prime256v1" :
			    "secp384r1", alg == JWT_ES256 ? 32 : 48);
		else
			return jerr(err, errlen, -1, "an EC key must be P-256 "
			    "(ES256) or P-384 (ES384)");
	} else if (strcmp(kty->valuestring, "OKP") == 0) {
		if (strcmp(c, "Ed25519") != 0 || (alg != 0 && alg != JWT_EDDSA))
			return jerr(err, errlen, -1, "an OKP key must be "
			    "Ed25519 (EdDSA)");
		alg = JWT_EDDSA;
		if ((sec = b64url_member(o, "x", 32, &len)) != NULL &&
		    len == 32)
			pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519,
			    NULL, sec, len);
		free(sec);
	} else if (strcmp(kty->valuestring, "oct") == 0) {
		if (alg != JWT_HS256 && alg != JWT_HS512)
			return jerr(err, errlen, -1, "an oct key needs 'alg' "
			    "HS256 or HS512");
		if ((sec = b64url_member(o, "k", 1024, &len)) == NULL)
			return jerr(err, errlen, -1, "an oct key without a "
			    "base64url 'k'");
		if (len < hs_min(alg)) {
			OPENSSL_cleanse(sec, len);
			free(sec);
			return jerr(err, errlen, -1, "an %s secret must be at "
			    "least %zu bytes", jwt_alg_name(alg), hs_min(alg));
		}
		rc = key_insert(ks, alg, kid ? kid->valuestring : NULL, NULL,
		    sec, len, err, errlen);
		OPENSSL_cleanse(sec, len);
		free(sec);
		return rc;
	} else
		return jerr(err, errlen, -1, "unsupported kty '%.16s'; use "
		    "RSA, EC, OKP or oct", kty->valuestring);
	if (pk == NULL)
		return jerr(err, errlen, -1, "a %s key with missing or bad "
		    "members", kty->valuestring);
	if (!pkey_fits(pk, alg, err, errlen)) {
		EVP_PKEY_free(pk);
		return -1;
	}
	return key_insert(ks, alg, kid ? kid->valuestring : NULL, pk, NULL, 0,
	    err, errlen);
}

int
jwt_jwks_add(struct jwt_keys *ks, const char *json, size_t len, char *err,
    size_t errlen)
{
	cJSON *doc, *keys, *k;
	char why[200];
	int i = 0, rc = 0;

	if (len > 1024 * 1024 ||
	    (doc = cJSON_ParseWithLength(json, len)) == NULL)
		return jerr(err, errlen, -1, "not JSON");
	keys = cJSON_GetObjectItemCaseSensitive(doc, "keys");
	if (!cJSON_IsArray(keys) || cJSON_GetArraySize(keys) == 0)
		rc = jerr(err, errlen, -1, "no \"keys\" array");
	else
		cJSON_ArrayForEach(k, keys) {
			if (jwk_add(ks, k, why, sizeof(why)) == -1) {
				rc = jerr(err, errlen, -1, "key %d: %s", i,
				    why);
				break;
			}
			i++;
		}
	cJSON_Delete(doc);
	return rc;
}

/* 1 if the object has two members of one name (which would be read?). */
static int
has_duplicates(const cJSON *o)
{
	const cJSON *a, *b;

	for (a = o->child; a != NULL; a = a->next)
		for (b = a->next; b != NULL; b = b->next)
			if (strcmp(a->string, b->string) == 0)
				return 1;
	return 0;
}

/* Decodes one base64url part holding a JSON object; NULL if it is not. */
static cJSON *
part_json(const char *s, size_t len, size_t max)
{
	unsigned char *buf;
	cJSON *o = NULL;
	long n;

	if ((buf = malloc(max)) == NULL)
		return NULL;
	if ((n = b64url_decode(s, len, buf, max)) > 0)
		o = cJSON_ParseWithLength((const char *)buf, (size_t)n);
	free(buf);
	if (o != NULL && (!cJSON_IsObject(o) || has_duplicates(o))) {
		cJSON_Delete(o);
		o = NULL;
	}
	return o;
}

/*
 * JOSE r||s (RFC 7518 3.4) to the DER ECDSA-Sig-Value OpenSSL verifies;
 * the DER length, or -1.
 */
static int
ecdsa_der(const unsigned char *sig, size_t siglen, size_t half,
    unsigned char **der)
{
	ECDSA_SIG *es;
	BIGNUM *r, *s;
	int n;

	if (siglen != 2 * half || (es = ECDSA_SIG_new()) == NULL)
		return -1;
	r = BN_bin2bn(sig, (int)half, NULL);
	s = BN_bin2bn(sig + half, (int)half, NULL);
	if (r == NULL || s == NULL || !ECDSA_SIG_set0(es, r, s)) {
		BN_free(r);
		BN_free(s);
		ECDSA_SIG_free(es);
		return -1;
	}
	*der = NULL;
	n = i2d_ECDSA_SIG(es, der);
	ECDSA_SIG_free(es);
	return n;
}

/* 1 if sig is k's signature of the signing input msg. */
static int
sig_ok(const struct jwt_key *k, const unsigned char *msg, size_t msglen,
    const unsigned char *sig, size_t siglen)
{
	unsigned char mac[EVP_MAX_MD_SIZE], *der = NULL;
	const EVP_MD *md = NULL;
	EVP_PKEY_CTX *pctx = NULL;
	EVP_MD_CTX *ctx;
	size_t maclen = 0;
	int n, ok = 0;

	switch (k->alg) {
	case JWT_HS256:
	case JWT_HS512:
		if (EVP_Q_mac(NULL, "HMAC", NULL, k->alg == JWT_HS256 ?
		    "SHA256" : "SHA512", NULL, k->secret, k->secretlen, msg,
		    msglen, mac, sizeof(mac), &maclen) == NULL)
			return 0;
		return maclen == siglen && CRYPTO_memcmp(mac, sig, siglen) == 0;
	case JWT_ES256:
	case JWT_ES384:
		if ((n = ecdsa_der(sig, siglen, k->alg == JWT_ES256 ? 32 : 48,
		    &der)) <= 0)
			return 0;
		sig = der;
		siglen = (size_t)n;
		md = k->alg == JWT_ES256 ? EVP_sha256() : EVP_sha384();
		break;
	case JWT_RS256:
	case JWT_PS256:
		md = EVP_sha256();
		break;
	case JWT_EDDSA:
		break;
	}
	if ((ctx = EVP_MD_CTX_new()) != NULL &&
	    EVP_DigestVerifyInit(ctx, &pctx, md, NULL, k->pkey) == 1 &&
	    (k->alg != JWT_PS256 ||
	    (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
	    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx,
	    RSA_PSS_SALTLEN_DIGEST) == 1 &&
	    EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256()) == 1)))
		ok = EVP_DigestVerify(ctx, sig, siglen, msg, msglen) == 1;
	EVP_MD_CTX_free(ctx);
	OPENSSL_free(der);
	return ok;
}

/* A NumericDate claim into *v (0 when absent): 0, or -1 if not a number. */
static int
num_claim(const cJSON *c, const char *name, int64_t *v)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, name);

	*v = 0;
	if (f == NULL)
		return 0;
	if (!cJSON_IsNumber(f) || f->valuedouble < 1 ||
	    f->valuedouble > 253402300799.0)	/* 9999-12-31 */
		return -1;
	*v = (int64_t)f->valuedouble;
	return 0;
}

/* sessions: an array of ids and "prefix*" patterns, one per line. */
static int
scope_claim(const cJSON *f, char *scope, size_t cap, char *err, size_t errlen)
{
	const cJSON *e;
	char id[IPC_SID_MAX + 1];
	size_t n, used = 0;

	scope[0] = '\0';
	if (f == NULL)
		return JWT_OK;
	if (!cJSON_IsArray(f) || cJSON_GetArraySize(f) == 0)
		return jerr(err, errlen, JWT_ECLAIM, "claim 'sessions' must "
		    "be a non-empty array of session ids or prefix* patterns");
	cJSON_ArrayForEach(e, f) {
		if (!cJSON_IsString(e) || (n = strlen(e->valuestring)) == 0 ||
		    n > IPC_SID_MAX)
			return jerr(err, errlen, JWT_ECLAIM, "claim 'sessions' "
			    "holds something that is not a session id");
		memcpy(id, e->valuestring, n + 1);
		/* "prefix*": the prefix must be a valid id or empty. */
		if (id[n - 1] == '*')
			id[--n] = '\0';
		if (strchr(id, '*') != NULL || (n > 0 && !store_valid_id(id)) ||
		    (n == 0 && e->valuestring[0] != '*'))
			return jerr(err, errlen, JWT_ECLAIM, "claim "
			    "'sessions': '%.40s' is not a session id or "
			    "prefix* pattern", e->valuestring);
		n = strlen(e->valuestring);
		if (used + (used > 0) + n >= cap)
			return jerr(err, errlen, JWT_ESIZE, "claim 'sessions' "
			    "is longer than %zu bytes", cap - 1);
		if (used > 0)
			scope[used++] = '\n';
		memcpy(scope + used, e->valuestring, n + 1);
		used += n;
	}
	return JWT_OK;
}

/* iss, aud: RFC 7519 4.1.1 and 4.1.3. */
static int
check_iss_aud(const struct jwt_keys *ks, const cJSON *c, char *err,
    size_t errlen)
{
	const cJSON *iss = cJSON_GetObjectItemCaseSensitive(c, "iss");
	const cJSON *aud = cJSON_GetObjectItemCaseSensitive(c, "aud"), *e;
	int found = 0;

	if (iss != NULL && !cJSON_IsString(iss))
		return jerr(err, errlen, JWT_EISS, "claim 'iss' is not a "
		    "string");
	if (ks->issuer[0] != '\0' && (iss == NULL ||
	    strcmp(iss->valuestring, ks->issuer) != 0))
		return jerr(err, errlen, JWT_EISS, "wrong issuer: this server "
		    "takes tokens issued by '%s'", ks->issuer);
	if (aud == NULL) {
		if (ks->audience[0] != '\0')
			return jerr(err, errlen, JWT_EAUD, "no audience: this "
			    "server takes tokens for '%s'", ks->audience);
		return JWT_OK;
	}
	if (cJSON_IsString(aud))
		found = strcmp(aud->valuestring, ks->audience) == 0;
	else if (cJSON_IsArray(aud))
		cJSON_ArrayForEach(e, aud)
			if (cJSON_IsString(e) &&
			    strcmp(e->valuestring, ks->audience) == 0)
				found = 1;
	if (!found || ks->audience[0] == '\0')
		return jerr(err, errlen, JWT_EAUD, ks->audience[0] != '\0' ?
		    "wrong audience: this server takes tokens for '%s'" :
		    "the token names an audience and this server has none "
		    "(set jwt-audience)", ks->audience);
	return JWT_OK;
}

/* The claims after the signature verified: JWT_OK or the reason. */
static int
claims(const struct jwt_keys *ks, const cJSON *c, int64_t now,
    struct jwt_claims *out, char *err, size_t errlen)
{
	const cJSON *sub = cJSON_GetObjectItemCaseSensitive(c, "sub");
	const cJSON *role = cJSON_GetObjectItemCaseSensitive(c, "role");
	size_t i, n;
	int rc;

	if (num_claim(c, "exp", &out->exp) == -1 ||
	    num_claim(c, "nbf", &out->nbf) == -1 ||
	    num_claim(c, "iat", &out->iat) == -1)
		return jerr(err, errlen, JWT_ECLAIM, "claims exp, nbf and iat "
		    "must be NumericDates (seconds since 1970)");
	if (out->exp == 0 && ks->require_exp)
		return jerr(err, errlen, JWT_ECLAIM, "the token has no 'exp' "
		    "claim and this server requires one");
	if (out->exp != 0 && now >= out->exp + ks->leeway)
		return jerr(err, errlen, JWT_EEXPIRED, "the token expired %lld "
		    "s ago; get a new one", (long long)(now - out->exp));
	if (out->nbf != 0 && now + ks->leeway < out->nbf)
		return jerr(err, errlen, JWT_ENBF, "the token is not valid "
		    "for another %lld s (nbf)", (long long)(out->nbf - now));
	if (out->iat != 0 && now + ks->leeway < out->iat)
		return jerr(err, errlen, JWT_ENBF, "the token was issued in "
		    "the future (iat); check the issuer's clock");
	if ((rc = check_iss_aud(ks, c, err, errlen)) != JWT_OK)
		return rc;
	/* sub goes into log lines and the audit trail: no blanks, controls. */
	if (!cJSON_IsString(sub) || (n = strlen(sub->valuestring)) == 0 ||
	    n > IPC_SUB_MAX)
		return jerr(err, errlen, JWT_ECLAIM, "claim 'sub' must be a "
		    "string of 1 to %d bytes", IPC_SUB_MAX);
	for (i = 0; i < n; i++)
		if ((unsigned char)sub->valuestring[i] <= ' ' ||
		    (unsigned char)sub->valuestring[i] >= 0x7f)
			return jerr(err, errlen, JWT_ECLAIM, "claim 'sub' "
			    "must be printable ASCII without blanks");
	memcpy(out->sub, sub->valuestring, n + 1);
	out->role = cJSON_IsString(role) ?
	    ipc_role_parse(role->valuestring) : 0;
	if (out->role == 0)
		return jerr(err, errlen, JWT_ECLAIM, "claim 'role' must be "
		    "user, agent, observer, admin or metrics");
	return scope_claim(cJSON_GetObjectItemCaseSensitive(c, "sessions"),
	    out->scope, sizeof(out->scope), err, errlen);
}

/* The keys that may verify a token with this header, tried in turn. */
static int
verify_sig(const struct jwt_keys *ks, const cJSON *h, const char *tok,
    size_t msglen, const unsigned char *sig, size_t siglen, char *err,
    size_t errlen)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(h, "alg");
	const cJSON *kid = cJSON_GetObjectItemCaseSensitive(h, "kid");
	const struct jwt_key *k;
	int named = 0, pinned = 0;

	if (!cJSON_IsString(a))
		return jerr(err, errlen, JWT_EMALFORMED, "the header has no "
		    "'alg'");
	if (kid != NULL && !cJSON_IsString(kid))
		return jerr(err, errlen, JWT_EMALFORMED, "the header's 'kid' "
		    "is not a string");
	/* RFC 7515 4.1.11: an extension we do not know must be refused. */
	if (cJSON_GetObjectItemCaseSensitive(h, "crit") != NULL)
		return jerr(err, errlen, JWT_EMALFORMED, "the header has "
		    "'crit' extensions this server does not understand");
	TAILQ_FOREACH(k, &ks->keys, entry) {
		if (kid != NULL && strcmp(k->kid, kid->valuestring) != 0)
			continue;
		named = 1;
		/* The key pins the algorithm; the header only has to agree. */
		if (strcmp(a->valuestring, jwt_alg_name(k->alg)) != 0)
			continue;
		pinned = 1;
		if (sig_ok(k, (const unsigned char *)tok, msglen, sig, siglen))
			return JWT_OK;
	}
	if (!named && kid != NULL)
		return jerr(err, errlen, JWT_EKID, "no key has kid '%.64s'",
		    kid->valuestring);
	if (!named)
		return jerr(err, errlen, JWT_EKID, "this server holds no JWT "
		    "keys");
	if (!pinned)
		return jerr(err, errlen, JWT_EALG, "algorithm '%.16s' is not "
		    "the one of the key(s) this server holds", a->valuestring);
	return jerr(err, errlen, JWT_ESIG, "bad signature");
}

int
jwt_verify(const struct jwt_keys *ks, const char *tok, size_t len,
    int64_t now, struct jwt_claims *out, char *err, size_t errlen)
{
	const char *d1, *d2;
	unsigned char sig[JWT_SIG_MAX];
	cJSON *h = NULL, *c = NULL;
	long siglen;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > JWT_TOKEN_MAX)
		return jerr(err, errlen, JWT_ESIZE, "the token is longer than "
		    "%d bytes", JWT_TOKEN_MAX);
	if ((d1 = memchr(tok, '.', len)) == NULL ||
	    (d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok))) == NULL ||
	    memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok)) != NULL)
		return jerr(err, errlen, JWT_EMALFORMED, "not a JWT: expected "
		    "three base64url parts separated by '.'");
	if ((size_t)(d1 - tok) > JWT_HEADER_MAX * 4 / 3 + 4 ||
	    (size_t)(d2 - d1 - 1) > JWT_PAYLOAD_MAX * 4 / 3 + 4)
		return jerr(err, errlen, JWT_ESIZE, "the token's header or "
		    "claims are too long");
	if ((h = part_json(tok, (size_t)(d1 - tok), JWT_HEADER_MAX)) == NULL ||
	    (c = part_json(d1 + 1, (size_t)(d2 - d1 - 1),
	    JWT_PAYLOAD_MAX)) == NULL) {
		rc = jerr(err, errlen, JWT_EMALFORMED, "not a JWT: the header "
		    "or claims are not strict base64url of a JSON object");
		goto out;
	}
	/* RFC 8725 3.1: an unsigned token is never accepted. */
	if (d2 + 1 == tok + len) {
		rc = jerr(err, errlen, JWT_EALG, "the token is not signed "
		    "(alg none is never accepted)");
		goto out;
	}
	if ((siglen = b64url_decode(d2 + 1, len - (size_t)(d2 + 1 - tok), sig,
	    sizeof(sig))) <= 0) {
		rc = jerr(err, errlen, JWT_EMALFORMED, "not a JWT: the "
		    "signature is not strict base64url or is too long");
		goto out;
	}
	if ((rc = verify_sig(ks, h, tok, (size_t)(d2 - tok), sig,
	    (size_t)siglen, err, errlen)) != JWT_OK)
		goto out;
	rc = claims(ks, c, now, out, err, errlen);
out:
	cJSON_Delete(h);
	cJSON_Delete(c);
	if (rc != JWT_OK)
		memset(out, 0, sizeof(*out));
	return rc;
}
