/*
 * Unit tests for the JWT verifier: every algorithm with keys made here,
 * the refusals RFC 8725 asks for (alg none, HS256 keyed with a public
 * key), claims, base64url strictness, JWKS.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "../../src/jwt.c"
#include "check_main.h"

#define NOW	1700000000

static void
b64url(const unsigned char *in, size_t len, char *out)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t i, o = 0;
	unsigned acc = 0;
	int bits = 0;

	for (i = 0; i < len; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = al[(acc >> bits) & 63];
		}
	}
	if (bits > 0)
		out[o++] = al[(acc << (6 - bits)) & 63];
	out[o] = '\0';
}

static char *
pem_of(EVP_PKEY *pk, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p, *r;
	long n;

	ck_assert(PEM_write_bio_PUBKEY(b, pk) == 1);
	n = BIO_get_mem_data(b, &p);
	r = malloc((size_t)n + 1);
	memcpy(r, p, (size_t)n);
	r[n] = '\0';
	*len = (size_t)n;
	BIO_free(b);
	return r;
}

/* header.claims.signature; pk NULL: HMAC with secret; nosig: "". */
static char *
mk(int alg, EVP_PKEY *pk, const char *secret, const char *hdr,
    const char *cl)
{
	static char tok[16384];
	unsigned char sig[1024];
	size_t siglen = sizeof(sig), n;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_PKEY_CTX *pctx;
	const EVP_MD *md = NULL;

	b64url((const unsigned char *)hdr, strlen(hdr), tok);
	n = strlen(tok);
	tok[n++] = '.';
	b64url((const unsigned char *)cl, strlen(cl), tok + n);
	n = strlen(tok);
	if (alg == JWT_HS256 || alg == JWT_HS512) {
		ck_assert_ptr_nonnull(EVP_Q_mac(NULL, "HMAC", NULL,
		    alg == JWT_HS256 ? "SHA256" : "SHA512", NULL, secret,
		    strlen(secret), (unsigned char *)tok, n, sig, sizeof(sig),
		    &siglen));
	} else if (alg != 0) {
		if (alg == JWT_RS256 || alg == JWT_PS256 || alg == JWT_ES256)
			md = EVP_sha256();
		else if (alg == JWT_ES384)
			md = EVP_sha384();
		ck_assert(EVP_DigestSignInit(ctx, &pctx, md, NULL, pk) == 1);
		if (alg == JWT_PS256) {
			EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING);
			EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx,
			    RSA_PSS_SALTLEN_DIGEST);
		}
		ck_assert(EVP_DigestSign(ctx, sig, &siglen,
		    (unsigned char *)tok, n) == 1);
		if (alg == JWT_ES256 || alg == JWT_ES384) {
			const unsigned char *p = sig;
			size_t half = alg == JWT_ES256 ? 32 : 48;
			ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)siglen);
			unsigned char rs[96];

			BN_bn2binpad(ECDSA_SIG_get0_r(es), rs, (int)half);
			BN_bn2binpad(ECDSA_SIG_get0_s(es), rs + half, (int)half);
			ECDSA_SIG_free(es);
			memcpy(sig, rs, 2 * half);
			siglen = 2 * half;
		}
	}
	EVP_MD_CTX_free(ctx);
	tok[n++] = '.';
	b64url(sig, alg == 0 ? 0 : siglen, tok + n);
	return tok;
}

#define CLAIMS	"{\"sub\":\"alice\",\"role\":\"user\",\"exp\":1700000600," \
		"\"iat\":1699999990}"
#define HS_SECRET "0123456789abcdef0123456789abcdef"

static int
vf(struct jwt_keys *ks, const char *tok, struct jwt_claims *c, char *err)
{
	return jwt_verify(ks, tok, strlen(tok), NOW, c, err, 200);
}

static EVP_PKEY *
keygen(int alg)
{
	switch (alg) {
	case JWT_RS256:
	case JWT_PS256:
		return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	case JWT_ES256:
		return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	case JWT_ES384:
		return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
	default:
		return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	}
}

START_TEST(test_every_alg)
{
	static const int algs[] = { JWT_RS256, JWT_PS256, JWT_ES256,
	    JWT_ES384, JWT_EDDSA, JWT_HS256, JWT_HS512 };
	struct jwt_keys ks;
	struct jwt_claims c;
	char err[200], hdr[80], *tok, *pem;
	EVP_PKEY *pk = NULL;
	size_t len, n;
	int alg = algs[_i], rc;
	const char *sec = alg == JWT_HS512 ? HS_SECRET HS_SECRET : HS_SECRET;

	jwt_keys_init(&ks);
	if (alg == JWT_HS256 || alg == JWT_HS512) {
		ck_assert_int_eq(jwt_key_add(&ks, alg, NULL,
		    (const unsigned char *)sec, strlen(sec), err, sizeof(err)), 0);
	} else {
		pk = keygen(alg);
		pem = pem_of(pk, &len);
		ck_assert_msg(jwt_key_add(&ks, alg, "k1", (unsigned char *)pem,
		    len, err, sizeof(err)) == 0, "%s", err);
		free(pem);
	}
	snprintf(hdr, sizeof(hdr), "{\"alg\":\"%s\",\"typ\":\"JWT\"}",
	    jwt_alg_name(alg));
	tok = mk(alg, pk, sec, hdr, CLAIMS);
	rc = vf(&ks, tok, &c, err);
	ck_assert_msg(rc == JWT_OK, "%s: %d %s", jwt_alg_name(alg), rc, err);
	ck_assert_str_eq(c.sub, "alice");
	ck_assert_int_eq(c.role, IPC_ROLE_USER);
	ck_assert_str_eq(c.scope, "");
	ck_assert_int_eq(c.exp, 1700000600);
	/* one flipped signature bit */
	n = strlen(tok) - 3;
	tok[n] = tok[n] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(vf(&ks, tok, &c, err), JWT_ESIG);
	/* alg none: the same claims, unsigned */
	tok = mk(0, NULL, NULL, "{\"alg\":\"none\"}", CLAIMS);
	ck_assert_int_eq(vf(&ks, tok, &c, err), JWT_EALG);
	ck_assert_ptr_nonnull(strstr(err, "none"));
	EVP_PKEY_free(pk);
	jwt_keys_free(&ks);
}
END_TEST

/* RFC 8725 2.1: HS256 keyed with the RSA public key's PEM bytes. */
START_TEST(test_hs256_with_public_key)
{
	struct jwt_keys ks;
	struct jwt_claims c;
	char err[200], *pem, *tok;
	EVP_PKEY *pk = keygen(JWT_RS256);
	size_t len;

	jwt_keys_init(&ks);
	pem = pem_of(pk, &len);
	ck_assert_int_eq(jwt_key_add(&ks, JWT_RS256, NULL, (unsigned char *)pem,
	    len, err, sizeof(err)), 0);
	tok = mk(JWT_HS256, NULL, pem, "{\"alg\":\"HS256\"}", CLAIMS);
	ck_assert_int_eq(vf(&ks, tok, &c, err), JWT_EALG);
	/* and the public key refused as an HS256 "secret" of the wrong kind
	 * is impossible: an RSA key never computes an HMAC */
	ck_assert_int_eq(jwt_key_add(&ks, JWT_HS256, NULL, (unsigned char *)"short",
	    5, err, sizeof(err)), -1);
	free(pem);
	EVP_PKEY_free(pk);
	jwt_keys_free(&ks);
}
END_TEST

START_TEST(test_claims)
{
	static const struct {
		const char *cl;
		int rc;
	} v[] = {
		{ CLAIMS, JWT_OK },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1699999000}", JWT_EEXPIRED },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1699999980}", JWT_OK },	/* leeway */
		{ "{\"sub\":\"a\",\"role\":\"user\"}", JWT_ECLAIM },	/* no exp */
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1700000600,\"nbf\":1700000100}", JWT_ENBF },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1700000600,\"iat\":1700000100}", JWT_ENBF },
		{ "{\"sub\":\"a\",\"role\":\"root\",\"exp\":1700000600}", JWT_ECLAIM },
		{ "{\"role\":\"user\",\"exp\":1700000600}", JWT_ECLAIM },
		{ "{\"sub\":\"a b\",\"role\":\"user\",\"exp\":1700000600}", JWT_ECLAIM },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":\"soon\"}", JWT_ECLAIM },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1700000600,\"aud\":\"x\"}", JWT_EAUD },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1700000600,\"sessions\":[]}", JWT_ECLAIM },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1700000600,\"sessions\":[\"a/b\"]}", JWT_ECLAIM },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1700000600,\"sessions\":[\"a*b\"]}", JWT_ECLAIM },
		{ "{\"sub\":\"a\",\"role\":\"user\",\"exp\":1700000600,\"sub\":\"b\"}", JWT_EMALFORMED },
	};
	struct jwt_keys ks;
	struct jwt_claims c;
	char err[200], *tok;

	jwt_keys_init(&ks);
	ck_assert_int_eq(jwt_key_add(&ks, JWT_HS256, NULL,
	    (const unsigned char *)HS_SECRET "\n", 33, err, sizeof(err)), 0);
	tok = mk(JWT_HS256, NULL, HS_SECRET, "{\"alg\":\"HS256\"}", v[_i].cl);
	ck_assert_msg(vf(&ks, tok, &c, err) == v[_i].rc, "%s: %s", v[_i].cl, err);
	jwt_keys_free(&ks);
}
END_TEST

START_TEST(test_iss_aud_scope)
{
	struct jwt_keys ks;
	struct jwt_claims c;
	char err[200], *tok;

	jwt_keys_init(&ks);
	snprintf(ks.issuer, sizeof(ks.issuer), "https://idp");
	snprintf(ks.audience, sizeof(ks.audience), "parley");
	ck_assert_int_eq(jwt_key_add(&ks, JWT_HS256, "a",
	    (const unsigned char *)HS_SECRET, 32, err, sizeof(err)), 0);
	tok = mk(JWT_HS256, NULL, HS_SECRET, "{\"alg\":\"HS256\",\"kid\":\"a\"}",
	    "{\"sub\":\"a\",\"role\":\"agent\",\"exp\":1700000600,"
	    "\"iss\":\"https://idp\",\"aud\":[\"x\",\"parley\"],"
	    "\"sessions\":[\"s-1\",\"team-*\"]}");
	ck_assert_msg(vf(&ks, tok, &c, err) == JWT_OK, "%s", err);
	ck_assert_str_eq(c.scope, "s-1\nteam-*");
	ck_assert(ipc_scope_allows(c.scope, "team-42"));
	ck_assert(!ipc_scope_allows(c.scope, "s-2"));
	tok = mk(JWT_HS256, NULL, HS_SECRET, "{\"alg\":\"HS256\",\"kid\":\"a\"}",
	    "{\"sub\":\"a\",\"role\":\"agent\",\"exp\":1700000600,"
	    "\"iss\":\"https://evil\",\"aud\":\"parley\"}");
	ck_assert_int_eq(vf(&ks, tok, &c, err), JWT_EISS);
	tok = mk(JWT_HS256, NULL, HS_SECRET, "{\"alg\":\"HS256\",\"kid\":\"a\"}",
	    "{\"sub\":\"a\",\"role\":\"agent\",\"exp\":1700000600,"
	    "\"iss\":\"https://idp\",\"aud\":\"other\"}");
	ck_assert_int_eq(vf(&ks, tok, &c, err), JWT_EAUD);
	tok = mk(JWT_HS256, NULL, HS_SECRET, "{\"alg\":\"HS256\",\"kid\":\"b\"}",
	    CLAIMS);
	ck_assert_int_eq(vf(&ks, tok, &c, err), JWT_EKID);
	jwt_keys_free(&ks);
}
END_TEST

START_TEST(test_malformed)
{
	static const char *bad[] = {
		"", "a", "a.b", "a.b.c.d", "...",
		"eyJhbGciOiJIUzI1NiJ9.e30.",	/* no signature */
		"eyJhbGciOiJIUzI1NiJ9=.e30.AAAA",	/* padding */
		"eyJhbGciOiJIUzI1NiJ9.e31.AAAA",	/* non-zero spare bits */
		"eyJhbGciOiJIUzI1NiJ9.e30+.AAAA",	/* base64, not url */
		"WzFd.e30.AAAA",			/* header an array */
		"eyJhbGciOiJIUzI1NiJ9.e30.A",	/* 1 char over */
	};
	struct jwt_keys ks;
	struct jwt_claims c;
	char err[200], *big;

	jwt_keys_init(&ks);
	ck_assert_int_eq(jwt_key_add(&ks, JWT_HS256, NULL,
	    (const unsigned char *)HS_SECRET, 32, err, sizeof(err)), 0);
	ck_assert_msg(vf(&ks, bad[_i], &c, err) != JWT_OK, "%s", bad[_i]);
	big = malloc(JWT_TOKEN_MAX + 2);
	memset(big, 'A', JWT_TOKEN_MAX + 1);
	big[JWT_TOKEN_MAX + 1] = '\0';
	ck_assert_int_eq(vf(&ks, big, &c, err), JWT_ESIZE);
	free(big);
	jwt_keys_free(&ks);
}
END_TEST

START_TEST(test_jwks)
{
	struct jwt_keys ks;
	struct jwt_claims c;
	EVP_PKEY *ec = keygen(JWT_ES256), *ed = keygen(JWT_EDDSA);
	BIGNUM *x = NULL, *y = NULL;
	unsigned char bx[32], by[32], raw[32], kk[32];
	char sx[64], sy[64], sed[64], sk[64], json[1024], err[200], *tok;
	size_t rl = sizeof(raw);

	EVP_PKEY_get_bn_param(ec, OSSL_PKEY_PARAM_EC_PUB_X, &x);
	EVP_PKEY_get_bn_param(ec, OSSL_PKEY_PARAM_EC_PUB_Y, &y);
	BN_bn2binpad(x, bx, 32);
	BN_bn2binpad(y, by, 32);
	b64url(bx, 32, sx);
	b64url(by, 32, sy);
	EVP_PKEY_get_raw_public_key(ed, raw, &rl);
	b64url(raw, 32, sed);
	memcpy(kk, HS_SECRET, 32);
	b64url(kk, 32, sk);
	snprintf(json, sizeof(json), "{\"keys\":["
	    "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"e\",\"x\":\"%s\",\"y\":\"%s\"},"
	    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"d\",\"x\":\"%s\",\"use\":\"sig\"},"
	    "{\"kty\":\"oct\",\"alg\":\"HS256\",\"kid\":\"h\",\"k\":\"%s\"}]}",
	    sx, sy, sed, sk);
	jwt_keys_init(&ks);
	ck_assert_msg(jwt_jwks_add(&ks, json, strlen(json), err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(ks.nkeys, 3);
	tok = mk(JWT_ES256, ec, NULL, "{\"alg\":\"ES256\",\"kid\":\"e\"}", CLAIMS);
	ck_assert_msg(vf(&ks, tok, &c, err) == JWT_OK, "%s", err);
	tok = mk(JWT_EDDSA, ed, NULL, "{\"alg\":\"EdDSA\",\"kid\":\"d\"}", CLAIMS);
	ck_assert_msg(vf(&ks, tok, &c, err) == JWT_OK, "%s", err);
	/* the EdDSA key's token presented under the EC key's kid */
	tok = mk(JWT_EDDSA, ed, NULL, "{\"alg\":\"EdDSA\",\"kid\":\"e\"}", CLAIMS);
	ck_assert_int_eq(vf(&ks, tok, &c, err), JWT_EALG);
	tok = mk(JWT_HS256, NULL, HS_SECRET, "{\"alg\":\"HS256\",\"kid\":\"h\"}",
	    CLAIMS);
	ck_assert_msg(vf(&ks, tok, &c, err) == JWT_OK, "%s", err);
	/* an RSA JWK must say RS256 or PS256 */
	ck_assert_int_eq(jwt_jwks_add(&ks, "{\"keys\":[{\"kty\":\"RSA\","
	    "\"n\":\"AQAB\",\"e\":\"AQAB\"}]}", 48, err, sizeof(err)), -1);
	ck_assert_int_eq(jwt_jwks_add(&ks, "[]", 2, err, sizeof(err)), -1);
	BN_free(x);
	BN_free(y);
	EVP_PKEY_free(ec);
	EVP_PKEY_free(ed);
	jwt_keys_free(&ks);
}
END_TEST

static Suite *
jwt_suite(void)
{
	Suite *s = suite_create("jwt");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_every_alg, 0, 7);
	tcase_add_test(tc, test_hs256_with_public_key);
	tcase_add_loop_test(tc, test_claims, 0, 15);
	tcase_add_test(tc, test_iss_aud_scope);
	tcase_add_loop_test(tc, test_malformed, 0, 11);
	tcase_add_test(tc, test_jwks);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(jwt_suite());
}
