/* Unit tests for the Host, Origin and role checks (supervisor/guard.c). */

#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../supervisor/guard.c"
#include "check_main.h"

static struct http_parser hp;

/* Parses a request head (LF line ends are fine) into hp. */
static const struct http_request *
req(const char *text)
{
	struct http_limits lim;
	size_t used;

	http_parser_free(&hp);
	http_limits_default(&lim);
	http_parser_init(&hp, &lim);
	ck_assert_int_eq(http_parse(&hp, text, strlen(text), &used), HTTP_DONE);
	return &hp.req;
}

static struct config *
conf(const char *text)
{
	char err[256];
	struct config *c = config_parse_string("t.conf", text, err,
	    sizeof(err));

	ck_assert_msg(c != NULL, "%s", err);
	return c;
}

START_TEST(test_path_match)
{
	ck_assert(path_match("/sessions/*", "/sessions/a"));
	ck_assert(path_match("/sessions/*/log", "/sessions/a.b/log"));
	ck_assert(!path_match("/sessions/*", "/sessions/"));
	ck_assert(!path_match("/sessions/*", "/sessions/a/log"));
	ck_assert(!path_match("/sessions/*/log", "/sessions//log"));
	ck_assert(!path_match("/sessions/*/log", "/sessions/a/logs"));
	ck_assert(!path_match("/metrics", "/metric"));
	ck_assert(!path_match("/metrics", "/metrics/"));
}
END_TEST

START_TEST(test_roles)
{
	struct guard_err e;

	/* The server-wide endpoints: admin or metrics, never scoped. */
	ck_assert_int_eq(guard_role(req("GET /metrics HTTP/1.0\n\n"),
	    IPC_ROLE_METRICS, "", &e), 0);
	ck_assert_int_eq(guard_role(req("GET /api/info HTTP/1.0\n\n"),
	    IPC_ROLE_ADMIN, "", &e), 0);
	ck_assert_int_eq(guard_role(req("GET /api/info HTTP/1.0\n\n"),
	    IPC_ROLE_USER, "", &e), -1);
	ck_assert_int_eq(e.status, 403);
	ck_assert_str_eq(e.msg, "GET /api/info needs the admin or metrics "
	    "role; this token's role is user");
	ck_assert_int_eq(guard_role(req("GET /metrics HTTP/1.0\n\n"),
	    IPC_ROLE_ADMIN, "s1", &e), -1);
	ck_assert_int_eq(e.status, 403);
	ck_assert(strstr(e.msg, "server-wide") != NULL);
	/* A metrics token reaches nothing else, not even a 404 of a worker. */
	ck_assert_int_eq(guard_role(req("GET /sessions/a/log HTTP/1.0\n\n"),
	    IPC_ROLE_METRICS, "", &e), -1);
	ck_assert_str_eq(e.msg, "GET /sessions/*/log needs the observer, "
	    "user, agent or admin role; this token's role is metrics");
	ck_assert_int_eq(guard_role(req("GET /sessions/a/x HTTP/1.0\n\n"),
	    IPC_ROLE_METRICS, "", &e), -1);
	ck_assert_int_eq(e.status, 404);
	ck_assert_int_eq(guard_role(req("GET /nope HTTP/1.0\n\n"),
	    IPC_ROLE_ADMIN, "", &e), -1);
	ck_assert_int_eq(e.status, 404);
	/* Method-specific rows come first. */
	ck_assert_int_eq(guard_role(req("DELETE /sessions/a HTTP/1.0\n\n"),
	    IPC_ROLE_OBSERVER, "", &e), -1);
	ck_assert_int_eq(guard_role(req("GET /sessions/a HTTP/1.0\n\n"),
	    IPC_ROLE_OBSERVER, "", &e), 0);
	ck_assert_int_eq(guard_role(req("POST /sessions HTTP/1.0\n"
	    "Content-Length: 0\n\n"), IPC_ROLE_OBSERVER, "", &e), -1);
	ck_assert_int_eq(guard_role(req("GET /sessions HTTP/1.0\n\n"),
	    IPC_ROLE_OBSERVER, "", &e), 0);	/* the 405 is the handler's */
	ck_assert_int_eq(guard_role(req("GET /sessions/a/control HTTP/1.0\n\n"),
	    IPC_ROLE_USER, "", &e), -1);
	ck_assert_int_eq(guard_role(req("GET /sessions/a/control HTTP/1.0\n\n"),
	    IPC_ROLE_ADMIN, "a", &e), 0);
	/* A project's knowledge: observers read, writers write. */
	ck_assert_int_eq(guard_role(req("GET /knowledge/p HTTP/1.0\n\n"),
	    IPC_ROLE_OBSERVER, "", &e), 0);
	ck_assert_int_eq(guard_role(req("GET /knowledge/p/stream "
	    "HTTP/1.0\n\n"), IPC_ROLE_OBSERVER, "", &e), 0);
	ck_assert_int_eq(guard_role(req("POST /knowledge/p/query HTTP/1.0\n"
	    "Content-Length: 0\n\n"), IPC_ROLE_OBSERVER, "", &e), 0);
	ck_assert_int_eq(guard_role(req("POST /knowledge/p/actions HTTP/1.0\n"
	    "Content-Length: 0\n\n"), IPC_ROLE_OBSERVER, "", &e), -1);
	ck_assert_int_eq(e.status, 403);
	ck_assert_str_eq(e.msg, "POST /knowledge/*/actions needs the user, "
	    "agent or admin role; this token's role is observer");
	ck_assert_int_eq(guard_role(req("POST /knowledge/p/actions HTTP/1.0\n"
	    "Content-Length: 0\n\n"), IPC_ROLE_AGENT, "kg:p", &e), 0);
	ck_assert_int_eq(guard_role(req("GET /knowledge/p HTTP/1.0\n\n"),
	    IPC_ROLE_METRICS, "", &e), -1);
	ck_assert_int_eq(guard_role(req("GET /knowledge/p/other "
	    "HTTP/1.0\n\n"), IPC_ROLE_ADMIN, "", &e), -1);
	ck_assert_int_eq(e.status, 404);
	/* Health is public. */
	ck_assert_int_eq(guard_role(req("GET /health/ready HTTP/1.0\n\n"),
	    0, "", &e), 0);
	ck_assert_int_eq(guard_role(req("GET /chat HTTP/1.0\n\n"), 0, "", &e),
	    -1);
	ck_assert_str_eq(e.msg, "GET /chat needs the observer, user, agent or "
	    "admin role; this token's role is none");
}
END_TEST

START_TEST(test_host)
{
	struct config *c = conf("server-name chat.example\n"
	    "server-name other.example:8443\n");

	ck_assert(host_ok(c, "127.0.0.1:7777", "127.0.0.1:7777", 1));
	ck_assert(host_ok(c, "localhost:7777", "127.0.0.1:7777", 1));
	ck_assert(host_ok(c, "LOCALHOST:7777", "[::1]:7777", 1));
	ck_assert(!host_ok(c, "localhost:7777", "10.0.0.1:7777", 0));
	ck_assert(!host_ok(c, "localhost:7778", "127.0.0.1:7777", 1));
	ck_assert(!host_ok(c, "127.0.0.1", "127.0.0.1:7777", 1));
	ck_assert(host_ok(c, "127.0.0.1", "127.0.0.1:80", 1));
	ck_assert(host_ok(c, "[::1]", "[::1]:443", 1));
	ck_assert(host_ok(c, "[::1]:7777", "[::1]:7777", 1));
	ck_assert(!host_ok(c, "[::1]:7777", "127.0.0.1:7777", 1));
	ck_assert(host_ok(c, "chat.example", "10.0.0.1:7777", 0));
	ck_assert(host_ok(c, "Chat.Example:1234", "10.0.0.1:7777", 0));
	ck_assert(!host_ok(c, "chat.example.evil", "10.0.0.1:7777", 0));
	ck_assert(!host_ok(c, "chat.exampl", "10.0.0.1:7777", 0));
	ck_assert(host_ok(c, "other.example:8443", "10.0.0.1:7777", 0));
	ck_assert(!host_ok(c, "other.example", "10.0.0.1:7777", 0));
	ck_assert(!host_ok(c, "other.example:8444", "10.0.0.1:7777", 0));
	ck_assert(!host_ok(c, "evil.example:7777", "127.0.0.1:7777", 1));
	ck_assert(!host_ok(c, "", "127.0.0.1:7777", 1));
	ck_assert(!host_ok(c, ":7777", "127.0.0.1:7777", 1));
	/* The listener's address unknown: the names still count. */
	ck_assert(host_ok(c, "chat.example", "", 0));
	ck_assert(!host_ok(c, "", "", 0));
	config_free(c);
	c = conf("server-name *\ntoken t role admin\n");
	ck_assert(host_ok(c, "anything", "127.0.0.1:7777", 1));
	config_free(c);
}
END_TEST

START_TEST(test_origin)
{
	struct config *c = conf("allowed-origin https://app.example\n"
	    "allowed-origin http://127.0.0.1:8080\n");

	ck_assert(origin_ok(c, "http://127.0.0.1:7777", "127.0.0.1:7777"));
	ck_assert(origin_ok(c, "https://127.0.0.1:7777", "127.0.0.1:7777"));
	ck_assert(origin_ok(c, "HTTP://LocalHost:7777", "localhost:7777"));
	ck_assert(!origin_ok(c, "http://localhost:7777", "127.0.0.1:7777"));
	ck_assert(!origin_ok(c, "http://evil.example", "127.0.0.1:7777"));
	ck_assert(!origin_ok(c, "null", "127.0.0.1:7777"));
	ck_assert(!origin_ok(c, "ws://127.0.0.1:7777", "127.0.0.1:7777"));
	ck_assert(origin_ok(c, "https://app.example", "127.0.0.1:7777"));
	ck_assert(!origin_ok(c, "http://app.example", "127.0.0.1:7777"));
	ck_assert(!origin_ok(c, "https://app.example:444", "127.0.0.1:7777"));
	ck_assert(origin_ok(c, "http://127.0.0.1:8080", "127.0.0.1:7777"));
	config_free(c);
	c = conf("allowed-origin *\ntoken t role admin\n");
	ck_assert(origin_ok(c, "null", "127.0.0.1:7777"));
	config_free(c);
}
END_TEST

/* guard_site on a real loopback connection: own address from the socket. */
START_TEST(test_site)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct config *c = conf("allowed-origin http://app.example\n");
	struct guard_err e;
	struct guard_local gl;
	char text[512];
	int l, s, a;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert((l = socket(AF_INET, SOCK_STREAM, 0)) != -1);
	ck_assert(bind(l, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ck_assert(listen(l, 1) == 0);
	ck_assert(getsockname(l, (struct sockaddr *)&sin, &sl) == 0);
	ck_assert((s = socket(AF_INET, SOCK_STREAM, 0)) != -1);
	ck_assert(connect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	ck_assert((a = accept(l, NULL, NULL)) != -1);
	guard_local(a, &gl);
	ck_assert(gl.loopback);

	snprintf(text, sizeof(text), "GET /chat HTTP/1.1\nHost: localhost:%u\n"
	    "Origin: http://localhost:%u\n\n", ntohs(sin.sin_port),
	    ntohs(sin.sin_port));
	ck_assert_int_eq(guard_site(c, &gl, req(text), &e), 0);
	ck_assert_int_eq(guard_site(c, &gl, req("GET /chat HTTP/1.0\n\n"), &e),
	    0);
	ck_assert_int_eq(guard_site(c, &gl, req("GET /chat HTTP/1.1\n"
	    "Host: evil.example\n\n"), &e), -1);
	ck_assert_int_eq(e.status, 421);
	snprintf(text, sizeof(text), "Host 'evil.example' is not this "
	    "server's address (127.0.0.1:%u); if it is a name of this server, "
	    "add 'server-name evil.example' to parleyd.conf",
	    ntohs(sin.sin_port));
	ck_assert_str_eq(e.msg, text);
	snprintf(text, sizeof(text), "GET /chat HTTP/1.1\nHost: 127.0.0.1:%u\n"
	    "Origin: http://evil.example\n\n", ntohs(sin.sin_port));
	ck_assert_int_eq(guard_site(c, &gl, req(text), &e), -1);
	ck_assert_int_eq(e.status, 403);
	ck_assert_str_eq(e.msg, "Origin 'http://evil.example' is not allowed "
	    "to use this server; if pages of that origin may, add "
	    "'allowed-origin http://evil.example' to parleyd.conf");
	/* No Host (HTTP/1.0): the origin is compared with the listener's
	 * address. */
	snprintf(text, sizeof(text), "GET /chat HTTP/1.0\n"
	    "Origin: http://127.0.0.1:%u\n\n", ntohs(sin.sin_port));
	ck_assert_int_eq(guard_site(c, &gl, req(text), &e), 0);
	ck_assert_int_eq(guard_site(c, &gl, req("GET /chat HTTP/1.0\n"
	    "Origin: http://app.example\n\n"), &e), 0);
	close(a);
	close(s);
	close(l);
	config_free(c);
	http_parser_free(&hp);
}
END_TEST

static Suite *
guard_suite(void)
{
	Suite *s = suite_create("guard");
	TCase *tc = tcase_create("guard");

	tcase_add_test(tc, test_path_match);
	tcase_add_test(tc, test_roles);
	tcase_add_test(tc, test_host);
	tcase_add_test(tc, test_origin);
	tcase_add_test(tc, test_site);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(guard_suite());
}
