/*
 * src/config_access.c: how clients reach the server and who they are:
 * listeners (tls, proxy-protocol), trusted proxies and per-address
 * limits, tokens, JWT keys, server names and allowed origins.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/config.c"
#include "../../src/config_access.c"
#include "../../src/config_block.c"
#include "check_main.h"
#include "config_fixture.h"

START_TEST(test_front_door)
{
	struct config		*c;
	struct cfg_listen	*l;

	c = parse("listen 127.0.0.1:80\nlisten 8080 proxy-protocol\n"
	    "trusted-proxy 10.0.0.0/8\ntrusted-proxy ::1\n"
	    "max-connections-per-address 7 rate 9\nlingering-time 0\n"
	    "lingering-timeout 250ms\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	l = TAILQ_FIRST(&c->listens);
	ck_assert_int_eq(l->proxy_protocol, 0);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "127.0.0.1");
	ck_assert_int_eq(l->proxy_protocol, 1);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "::1");
	ck_assert_int_eq(l->proxy_protocol, 1);
	ck_assert_uint_eq(c->ntrusted, 2);
	ck_assert(pp_trusted(c->trusted, c->ntrusted, "10.9.8.7"));
	ck_assert(pp_trusted(c->trusted, c->ntrusted, "::1"));
	ck_assert(!pp_trusted(c->trusted, c->ntrusted, "127.0.0.1"));
	ck_assert_uint_eq(c->max_conn_per_addr, 7);
	ck_assert_uint_eq(c->conn_rate_per_addr, 9);
	ck_assert_uint_eq(c->lingering_time_ms, 0);
	ck_assert_uint_eq(c->lingering_timeout_ms, 250);
	config_free(c);

	expect_err("listen 80 tls-ish\n", "x.conf:1: listen: unknown or "
	    "repeated option 'tls-ish'; usage: listen [HOST:]PORT [tls] "
	    "[proxy-protocol]");
	expect_err("listen 80 proxy-protocol proxy-protocol\n", "x.conf:1: "
	    "listen: unknown or repeated option 'proxy-protocol'; usage: "
	    "listen [HOST:]PORT [tls] [proxy-protocol]");
	expect_err("listen 80 tls proxy-protocol\n", "x.conf:1: listen: tls "
	    "and proxy-protocol on one listener are not supported; let the "
	    "proxy terminate TLS, or pass TLS through without a PROXY header");
	expect_err("trusted-proxy 10.0.0.0/33\n", "x.conf:1: trusted-proxy: "
	    "expected a numeric IPv4 or IPv6 address with an optional /PREFIX, "
	    "got '10.0.0.0/33'");
	expect_err("trusted-proxy proxy.example\n", "x.conf:1: trusted-proxy: "
	    "expected a numeric IPv4 or IPv6 address with an optional /PREFIX, "
	    "got 'proxy.example'");
	expect_err("max-connections-per-address 5 rate\n", "x.conf:1: "
	    "max-connections-per-address: usage: max-connections-per-address "
	    "N [rate PER-SECOND]");
	expect_err("max-connections-per-address 5 speed 3\n", "x.conf:1: "
	    "max-connections-per-address: usage: max-connections-per-address "
	    "N [rate PER-SECOND]");
	expect_err("max-connections-per-address 5 rate 0\n", "x.conf:1: "
	    "max-connections-per-address: rate must be a number of new "
	    "connections a second from 1 to 1000000, got '0'");
	expect_err("lingering-timeout 10ms\n", "x.conf:1: lingering-timeout: "
	    "expected a duration from 100ms to 10m (a number with ms, s, m, h or d), "
	    "got '10ms'");
}
END_TEST

START_TEST(test_listen)
{
	struct config		*c;
	struct cfg_listen	*l;

	c = parse("token t role admin\n"
	    "listen 7777\nlisten [::1]:7778\nlisten 0.0.0.0:80\n"
	    "listen localhost:81\nlisten 127.9.9.9:82\nlisten [::]:83\n"
	    "listen example.org:84\nlisten [::ffff:127.0.0.1]:85\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	/* A bare port and localhost: both loopback addresses, ::1 optional. */
	l = TAILQ_FIRST(&c->listens);
	ck_assert_str_eq(l->host, "127.0.0.1");
	ck_assert_str_eq(l->port, "7777");
	ck_assert_int_eq(l->loopback, 1);
	ck_assert_int_eq(l->optional, 0);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "::1");
	ck_assert_str_eq(l->port, "7777");
	ck_assert_int_eq(l->loopback, 1);
	ck_assert_int_eq(l->optional, 1);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "::1");
	ck_assert_str_eq(l->port, "7778");
	ck_assert_int_eq(l->loopback, 1);
	ck_assert_int_eq(l->optional, 0);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "0.0.0.0");
	ck_assert_int_eq(l->loopback, 0);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "127.0.0.1");
	ck_assert_str_eq(l->port, "81");
	ck_assert_int_eq(l->loopback, 1);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "::1");
	ck_assert_str_eq(l->port, "81");
	ck_assert_int_eq(l->optional, 1);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "127.9.9.9");
	ck_assert_int_eq(l->loopback, 1);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "::");
	ck_assert_int_eq(l->loopback, 0);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "example.org");
	ck_assert_int_eq(l->loopback, 0);
	l = TAILQ_NEXT(l, entry);
	ck_assert_int_eq(l->loopback, 1);
	ck_assert_ptr_null(TAILQ_NEXT(l, entry));
	config_free(c);

	/* Loopback-only listeners need no token. */
	c = parse("listen [::1]:7777\nlisten LocalHost:7778\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	config_free(c);

}
END_TEST

/* listen ... tls and the tls-* lines; tls.c loads the files themselves. */
START_TEST(test_tls)
{
	struct config		*c;
	struct cfg_listen	*l;
	static const struct { const char *text, *err; } bad[] = {
		{ "listen 7777 tls\n", "x.conf:1: listen 127.0.0.1:7777 tls: "
		  "needs tls-certificate and tls-key (PEM files)" },
		{ "listen 7777\nlisten 7778 tls\ntls-key /k\n", "x.conf:2: "
		  "listen 127.0.0.1:7778 tls: needs tls-certificate and "
		  "tls-key (PEM files)" },
		{ "listen 7777 ssl\n", "x.conf:1: listen: unknown or repeated "
		  "option 'ssl'; usage: listen [HOST:]PORT [tls] "
		  "[proxy-protocol]" },
		{ "listen 7777 tls x\n", "x.conf:1: listen: unknown or repeated "
		  "option 'x'; usage: listen [HOST:]PORT [tls] "
		  "[proxy-protocol]" },
		{ "listen 7777 tls x y\n", "x.conf:1: listen: wrong number of "
		  "arguments; usage: listen [HOST:]PORT [tls] "
		  "[proxy-protocol]" },
		{ "tls-certificate cert.pem\n", "x.conf:1: tls-certificate: "
		  "must be an absolute path, got 'cert.pem'" },
		{ "tls-key k\n", "x.conf:1: tls-key: must be an absolute path, "
		  "got 'k'" },
		{ "tls-protocols TLSv1.1\n", "x.conf:1: tls-protocols: TLSv1.1 "
		  "is not offered: versions before TLS 1.2 are deprecated "
		  "(RFC 8996); use TLSv1.2 and/or TLSv1.3" },
		{ "tls-protocols TLSv1.3 SSLv3\n", "x.conf:1: tls-protocols: "
		  "SSLv3 is not offered: versions before TLS 1.2 are deprecated "
		  "(RFC 8996); use TLSv1.2 and/or TLSv1.3" },
		{ "tls-protocols tls1.3\n", "x.conf:1: tls-protocols: expected "
		  "TLSv1.2 or TLSv1.3, got 'tls1.3'" },
		{ "tls-protocols TLSv1.2 TLSv1.3 TLSv1.3\n", "x.conf:1: "
		  "tls-protocols: wrong number of arguments; usage: "
		  "tls-protocols TLSv1.2|TLSv1.3 ..." },
		{ "tls-ciphers \"A B\"\n", "x.conf:1: tls-ciphers: expected an "
		  "OpenSSL cipher list such as ECDHE+AESGCM:ECDHE+CHACHA20, got "
		  "'A B'" },
		{ "tls-key /a\ntls-key /b\n", "x.conf:2: tls-key: duplicate "
		  "directive (first on line 1)" },
	};
	size_t			 i;

	/* Plain and TLS side by side; both loopback addresses of a port. */
	c = parse("listen 7777\nlisten 7778 tls\nlisten 127.0.0.2:7779 tls\n"
	    "tls-certificate /etc/c.pem\ntls-key /etc/k.pem\n"
	    "tls-ciphers ECDHE+AESGCM\ntls-protocols TLSv1.3\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_uint_eq(c->ntls, 3);
	l = TAILQ_FIRST(&c->listens);
	ck_assert_int_eq(l->tls, 0);
	l = TAILQ_NEXT(TAILQ_NEXT(l, entry), entry);
	ck_assert_str_eq(l->host, "127.0.0.1");
	ck_assert_str_eq(l->port, "7778");
	ck_assert_int_eq(l->tls, 1);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "::1");
	ck_assert_int_eq(l->tls, 1);
	l = TAILQ_NEXT(l, entry);
	ck_assert_str_eq(l->host, "127.0.0.2");
	ck_assert_int_eq(l->tls, 1);
	ck_assert_str_eq(c->tls_cert, "/etc/c.pem");
	ck_assert_uint_eq(c->tls_cert_line, 4);
	ck_assert_str_eq(c->tls_key, "/etc/k.pem");
	ck_assert_uint_eq(c->tls_key_line, 5);
	ck_assert_str_eq(c->tls_ciphers, "ECDHE+AESGCM");
	ck_assert_uint_eq(c->tls_ciphers_line, 6);
	ck_assert_uint_eq(c->tls_protocols, CFG_TLS_1_3);
	config_free(c);

	/* Defaults: TLS 1.2 and 1.3; a certificate with no tls listener
	 * is allowed (a reload may add one). */
	c = parse("tls-certificate /c\ntls-key /k\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_uint_eq(c->ntls, 0);
	ck_assert_uint_eq(c->tls_protocols, CFG_TLS_1_2 | CFG_TLS_1_3);
	ck_assert_ptr_null(c->tls_ciphers);
	config_free(c);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c = parse(bad[i].text);
		ck_assert_msg(c == NULL, "accepted: %s", bad[i].text);
		ck_assert_str_eq(errbuf, bad[i].err);
	}
}
END_TEST

START_TEST(test_tokens)
{
	struct config		*c;
	struct cfg_token	*t;

	setenv("PARLEY_TEST_SECRET", "from-env", 1);
	setenv("PARLEY_TEST_EMPTY", "", 1);
	c = parse("token-env PARLEY_TEST_SECRET role observer session s-1\n"
	    "token abc role user\n"
	    "token \"q#x\" role agent session s2\n"
	    "listen 0.0.0.0:7777\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	t = TAILQ_FIRST(&c->tokens);
	ck_assert_str_eq(t->secret, "from-env");
	ck_assert_str_eq(t->role, "observer");
	ck_assert_str_eq(t->session, "s-1");
	t = TAILQ_NEXT(t, entry);
	ck_assert_str_eq(t->secret, "abc");
	ck_assert_str_eq(t->role, "user");
	ck_assert_ptr_null(t->session);
	t = TAILQ_NEXT(t, entry);
	ck_assert_str_eq(t->secret, "q#x");
	ck_assert_str_eq(t->session, "s2");
	config_free(c);

	expect_err("token-env PARLEY_TEST_EMPTY role admin\n", "x.conf:1: "
	    "token-env: the value of 'PARLEY_TEST_EMPTY' must be 1 to 1024 "
	    "printable characters without blanks");
	expect_err("token-env PARLEY_TEST_SECRET role admin\n"
	    "token from-env role user\n",
	    "x.conf:2: token: duplicate secret (first on line 1)");
	expect_err("token a role user session a/b\n", "x.conf:1: token: "
	    "session id must be 1 to 128 printable characters without blanks "
	    "or '/'");
	unsetenv("PARLEY_TEST_SECRET");
	unsetenv("PARLEY_TEST_EMPTY");
}
END_TEST

/* allowed-origin and server-name: normalised, checked, repeatable. */
START_TEST(test_site_names)
{
	struct config		*c;
	struct cfg_name		*n;

	c = parse("allowed-origin HTTPS://App.Example:443\n"
	    "allowed-origin http://127.0.0.1:8080\n"
	    "allowed-origin http://[::1]:80\n"
	    "server-name Chat.Example\n"
	    "server-name chat.example:8443\n"
	    "server-name [::1]:7777\n"
	    "token t role metrics\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	n = TAILQ_FIRST(&c->allowed_origins);
	ck_assert_str_eq(n->name, "https://app.example");
	n = TAILQ_NEXT(n, entry);
	ck_assert_str_eq(n->name, "http://127.0.0.1:8080");
	n = TAILQ_NEXT(n, entry);
	ck_assert_str_eq(n->name, "http://[::1]");
	n = TAILQ_FIRST(&c->server_names);
	ck_assert_str_eq(n->name, "chat.example");
	ck_assert_str_eq(TAILQ_NEXT(n, entry)->name, "chat.example:8443");
	ck_assert_str_eq(TAILQ_FIRST(&c->tokens)->role, "metrics");
	config_free(c);
	c = parse("allowed-origin *\nserver-name *\ntoken t role admin\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	config_free(c);

	expect_err("allowed-origin app.example\n", "x.conf:1: allowed-origin: "
	    "'app.example' must be http://HOST[:PORT] or https://HOST[:PORT] "
	    "(as the browser's Origin header sends it), or *");
	expect_err("allowed-origin https://app.example/\n", "x.conf:1: "
	    "allowed-origin: 'https://app.example/': an origin has no path, "
	    "not even '/'; remove it");
	expect_err("allowed-origin https://app.example:0\n", "x.conf:1: "
	    "allowed-origin: 'https://app.example:0' must be "
	    "SCHEME://HOST[:PORT], HOST a name or address, PORT 1-65535");
	expect_err("allowed-origin https://a.example/x\n", "x.conf:1: "
	    "allowed-origin: 'https://a.example/x' must be "
	    "SCHEME://HOST[:PORT], HOST a name or address, PORT 1-65535");
	expect_err("allowed-origin http://a.example\n"
	    "allowed-origin HTTP://A.example:80\n", "x.conf:2: allowed-origin "
	    "HTTP://A.example: duplicate (first on line 1)");
	expect_err("allowed-origin *\n", "x.conf:1: allowed-origin *: with no "
	    "token any web page the user visits could drive this server; "
	    "name the origins, or add a token");
	expect_err("server-name *\n", "x.conf:1: server-name *: with no token "
	    "any web page the user visits could reach this server by its own "
	    "name (DNS rebinding); name the server, or add a token");
	expect_err("server-name a_b\n", "x.conf:1: server-name: 'a_b' must be "
	    "a host name or address, with an optional :PORT, or *");
	expect_err("server-name a.example:\n", "x.conf:1: server-name: "
	    "'a.example:' must be a host name or address, with an optional "
	    ":PORT, or *");
	expect_err("server-name [::1\n", "x.conf:1: server-name: '[::1' must "
	    "be a host name or address, with an optional :PORT, or *");
}
END_TEST

/* jwt-*: key files read at load, their errors at the line. */
START_TEST(test_jwt_keys)
{
	char dir[] = "/tmp/parley-cfg-jwt-XXXXXX", path[64], text[512];
	char want[512];
	struct config *c;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/hs", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("0123456789abcdef0123456789abcdef\n", f);
	fclose(f);
	snprintf(text, sizeof(text), "listen 0.0.0.0:7777\njwt-key %s HS256 "
	    "kid a\njwt-issuer me\njwt-leeway 5s\njwt-grace 10s\n", path);
	c = parse(text);
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_int_eq(c->jwt.nkeys, 1);
	ck_assert_int_eq(c->jwt.leeway, 5);
	ck_assert_int_eq(c->jwt.require_exp, 1);
	ck_assert_str_eq(c->jwt.issuer, "me");
	ck_assert_int_eq(c->jwt_grace_ms, 10000);
	config_free(c);
	snprintf(text, sizeof(text), "\njwt-key %s RS256\n", path);
	snprintf(want, sizeof(want), "x.conf:2: jwt-key: %s: not a PEM "
	    "public key (a 'BEGIN PUBLIC KEY' block, e.g. from openssl pkey "
	    "-pubout)", path);
	expect_err(text, want);
	snprintf(text, sizeof(text), "jwt-key %s HS512\n", path);
	snprintf(want, sizeof(want), "x.conf:1: jwt-key: %s: an HS512 "
	    "secret must be 64 to 1024 bytes, got 32", path);
	expect_err(text, want);
	expect_err("jwt-key relative HS256\n",
	    "x.conf:1: jwt-key: must be an absolute path, got 'relative'");
	expect_err("jwt-audience x\n", "x.conf:1: jwt-audience needs a "
	    "jwt-key or jwt-jwks to verify tokens with");
	unlink(path);
	rmdir(dir);
}
END_TEST

static Suite *
config_access_suite(void)
{
	Suite	*s = suite_create("config_access");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, test_front_door);
	tcase_add_test(tc, test_listen);
	tcase_add_test(tc, test_tls);
	tcase_add_test(tc, test_tokens);
	tcase_add_test(tc, test_site_names);
	tcase_add_test(tc, test_jwt_keys);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(config_access_suite());
}
