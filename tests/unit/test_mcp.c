/*
 * Unit tests for the MCP client (workers/mcp*.c), against a fake MCP server
 * of our own on libevent's evhttp, in-process and on the same event loop,
 * bound to 127.0.0.1 on a free port.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "../../workers/mcp.c"
#include "../../workers/mcp_xfer.c"
#include "../../workers/mcp_ask.c"
#include "check_main.h"

#define MAXREQ	64

/* --- the fake server --- */

struct fake {
	struct event_base	*base;
	struct evhttp		*http;
	int			 port;
	char			 url[128];
	/* behaviour */
	const char		*version;	/* answered to initialize */
	int			 fail_inits;	/* this many 500s first */
	int			 expire;	/* next call: forget the session */
	/* what happened */
	int			 ninit;
	char			 caps[128];	/* initialize's */
	int			 nreq;
	char			 method[MAXREQ][64];
	char			 sid[MAXREQ][64];	/* "" when none */
	char			 ver[MAXREQ][32];	/* "" when none */
	char			 auth[MAXREQ][64];
	char			 accept[MAXREQ][64];
	char			 cur_sid[64];
	long			 cancelled_id;
	char			 last_args[256];
	struct evhttp_request	*open_req;	/* echo_open's stream */
	struct event		*open_ev;
	int			 open_closed;
	/* the client's answers to our requests */
	int			 nans;
	char			 ans[MAXREQ][512];
	char			 ans_sid[MAXREQ][64];
	char			 ans_ver[MAXREQ][32];
	struct evhttp_request	*ask_req;	/* ask's stream */
	long			 ask_call_id;
	int			 ask_wait_id;	/* ends it when answered */
	int			 ask_hold;	/* ...unless set */
};

static void
reply_json(struct evhttp_request *req, int code, const char *json)
{
	struct evbuffer	*b = evbuffer_new();

	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "application/json");
	evbuffer_add(b, json, strlen(json));
	evhttp_send_reply(req, code, code == 200 ? "OK" : "Error", b);
	evbuffer_free(b);
}

static void
copy_hdr(struct evhttp_request *req, const char *name, char *out, size_t len)
{
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
	    name);

	snprintf(out, len, "%s", v != NULL ? v : "");
}

/* A held stream's client hung up: libevent detached the unfinished
 * request and left it to us. */
static void
held_drop(struct evhttp_request **req)
{
	if (*req != NULL)
		evhttp_request_free(*req);
	*req = NULL;
}

/* The client hung up on the open stream (it should). */
static void
open_closed(struct evhttp_connection *conn, void *arg)
{
	struct fake *f = arg;

	(void)conn;
	held_drop(&f->open_req);
	f->open_closed = 1;
	evtimer_del(f->open_ev);
}

static void
open_end(evutil_socket_t fd, short what, void *arg)
{
	struct fake *f = arg;

	(void)fd;
	(void)what;
	if (f->open_req != NULL) {
		evhttp_connection_set_closecb(
		    evhttp_request_get_connection(f->open_req), NULL, NULL);
		evhttp_send_reply_end(f->open_req);
		f->open_req = NULL;
	}
}

/* The client hung up on ask's stream. */
static void
ask_closed(struct evhttp_connection *conn, void *arg)
{
	struct fake *f = arg;

	(void)conn;
	held_drop(&f->ask_req);
}

/* Ends ask's stream with the answer it waited for as the tool's text. */
static void
ask_finish(struct fake *f, const char *answer)
{
	struct evbuffer	*b = evbuffer_new();
	cJSON		*o = cJSON_CreateObject(), *r, *c, *t;
	char		*s;

	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddNumberToObject(o, "id", (double)f->ask_call_id);
	r = cJSON_AddObjectToObject(o, "result");
	c = cJSON_AddArrayToObject(r, "content");
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", answer);
	cJSON_AddItemToArray(c, t);
	s = cJSON_PrintUnformatted(o);
	evbuffer_add_printf(b, "data: %s\n\n", s);
	evhttp_connection_set_closecb(evhttp_request_get_connection(f->ask_req),
	    NULL, NULL);
	evhttp_send_reply_chunk(f->ask_req, b);
	evhttp_send_reply_end(f->ask_req);
	f->ask_req = NULL;
	evbuffer_free(b);
	free(s);
	cJSON_Delete(o);
}

/*
 * ask {method, params, count, hold}: an event stream with a ping, then
 * count (default 1) requests method with params, ids 500 on; the
 * client's answer to the last ends the call with that answer as text,
 * unless hold.
 */
static void
fake_ask(struct fake *f, struct evhttp_request *req, long id,
    const cJSON *args)
{
	const cJSON	*m = cJSON_GetObjectItem(args, "method");
	const cJSON	*cnt = cJSON_GetObjectItem(args, "count");
	struct evbuffer	*b = evbuffer_new();
	char		*ps = NULL;
	int		 i, count = cJSON_IsNumber(cnt) ? cnt->valueint : 1;

	if (cJSON_GetObjectItem(args, "params") != NULL)
		ps = cJSON_PrintUnformatted(cJSON_GetObjectItem(args,
		    "params"));
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/event-stream");
	evhttp_send_reply_start(req, 200, "OK");
	evbuffer_add_printf(b, "data: {\"jsonrpc\":\"2.0\",\"id\":\"p-%ld\","
	    "\"method\":\"ping\"}\n\n", id);
	for (i = 0; i < count; i++)
		evbuffer_add_printf(b, "data: {\"jsonrpc\":\"2.0\",\"id\":%d,"
		    "\"method\":\"%s\"%s%s}\n\n", 500 + i, m->valuestring,
		    ps != NULL ? ",\"params\":" : "", ps != NULL ? ps : "");
	evhttp_send_reply_chunk(req, b);
	evbuffer_free(b);
	free(ps);
	f->ask_req = req;
	f->ask_call_id = id;
	f->ask_wait_id = 500 + count - 1;
	f->ask_hold = cJSON_IsTrue(cJSON_GetObjectItem(args, "hold"));
	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
	    ask_closed, f);
}

/*
 * big {n, sse}: a text result of n bytes, as JSON or as an event stream;
 * notes {n}: an event stream of n progress notifications, then a short
 * result.
 */
static void
fake_big(struct evhttp_request *req, long id, const char *name,
    const cJSON *args)
{
	struct evbuffer	*b = evbuffer_new();
	int		 i, n = cJSON_GetObjectItem(args, "n")->valueint;
	int		 sse = strcmp(name, "notes") == 0 ||
			    cJSON_IsTrue(cJSON_GetObjectItem(args, "sse"));

	if (strcmp(name, "notes") == 0) {
		for (i = 0; i < n; i++)
			evbuffer_add_printf(b, "data: {\"jsonrpc\":\"2.0\","
			    "\"method\":\"notifications/progress\",\"params\":"
			    "{\"progress\":%d}}\n\n", i);
		n = 2;
	}
	evbuffer_add_printf(b, "%s{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":"
	    "{\"content\":[{\"type\":\"text\",\"text\":\"", sse ? "data: " : "",
	    id);
	for (i = 0; i < n; i++)
		evbuffer_add(b, "x", 1);
	evbuffer_add_printf(b, "\"}]}}%s", sse ? "\n\n" : "");
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", sse ? "text/event-stream" : "application/json");
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void
fake_call(struct fake *f, struct evhttp_request *req, long id,
    const cJSON *params)
{
	const cJSON	*name = cJSON_GetObjectItem(params, "name");
	const cJSON	*args = cJSON_GetObjectItem(params, "arguments");
	struct evbuffer	*b;
	char		 buf[1024], *a;
	const char	*n = cJSON_IsString(name) ? name->valuestring : "";

	a = cJSON_PrintUnformatted(args);
	snprintf(f->last_args, sizeof(f->last_args), "%s", a ? a : "");
	free(a);
	if (strcmp(n, "add") == 0) {
		int s = cJSON_GetObjectItem(args, "a")->valueint +
		    cJSON_GetObjectItem(args, "b")->valueint;

		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%ld,"
		    "\"result\":{\"content\":[{\"type\":\"text\","
		    "\"text\":\"sum=%d\"}]}}", id, s);
		reply_json(req, 200, buf);
	} else if (strcmp(n, "echo") == 0 || strcmp(n, "echo_open") == 0) {
		/* An event stream: a notification, a request of the
		 * server's, then the response, in odd pieces. */
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Content-Type", "text/event-stream");
		evhttp_send_reply_start(req, 200, "OK");
		b = evbuffer_new();
		evbuffer_add_printf(b, ": hello\n\nid: 1\ndata: {\"jsonrpc\":"
		    "\"2.0\",\"method\":\"notifications/progress\",\"params\":"
		    "{\"progress\":1}}\n\n");
		evbuffer_add_printf(b, "data: {\"jsonrpc\":\"2.0\",\"id\":%ld,"
		    "\"method\":\"ping\"}\n\n", id);
		evbuffer_add_printf(b, "event: message\r\ndata: {\"jsonrpc\":"
		    "\"2.0\",\"id\":%ld,\r\ndata: \"result\":{\"content\":"
		    "[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"image\","
		    "\"data\":\"AA==\",\"mimeType\":\"image/png\"}]}}\r\n\r\n",
		    id);
		evhttp_send_reply_chunk(req, b);
		evbuffer_free(b);
		/* echo_open leaves the stream open for a while: the client
		 * must not wait for its end. */
		if (strcmp(n, "echo") == 0)
			evhttp_send_reply_end(req);
		else {
			struct timeval tv = { 1, 0 };

			f->open_req = req;
			evhttp_connection_set_closecb(
			    evhttp_request_get_connection(req), open_closed, f);
			evtimer_add(f->open_ev, &tv);
		}
	} else if (strcmp(n, "boom") == 0) {
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%ld,"
		    "\"result\":{\"content\":[{\"type\":\"text\","
		    "\"text\":\"it broke\"}],\"isError\":true}}", id);
		reply_json(req, 200, buf);
	} else if (strcmp(n, "structured") == 0) {
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%ld,"
		    "\"result\":{\"content\":[],\"structuredContent\":"
		    "{\"x\":1}}}", id);
		reply_json(req, 200, buf);
	} else if (strcmp(n, "wrongid") == 0) {
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%ld,"
		    "\"result\":{\"content\":[]}}", id + 1000);
		reply_json(req, 200, buf);
	} else if (strcmp(n, "http500") == 0) {
		reply_json(req, 500, "oops");
	} else if (strcmp(n, "big") == 0 || strcmp(n, "notes") == 0) {
		fake_big(req, id, n, args);
	} else if (strcmp(n, "ask") == 0) {
		fake_ask(f, req, id, args);
	} else if (strcmp(n, "slow") == 0) {
		/* Never answered; evhttp_free cleans it up. */
	} else {
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%ld,"
		    "\"error\":{\"code\":-32602,\"message\":\"Unknown tool: "
		    "%.100s\"}}", id, n);
		reply_json(req, 200, buf);
	}
}

static void
fake_cb(struct evhttp_request *req, void *arg)
{
	struct fake	*f = arg;
	struct evbuffer	*in = evhttp_request_get_input_buffer(req);
	size_t		 len = evbuffer_get_length(in);
	cJSON		*msg, *m, *id, *params;
	char		 buf[1024], sid[64];
	const char	*method;
	int		 k;

	msg = cJSON_ParseWithLength((const char *)evbuffer_pullup(in, -1),
	    len);
	m = cJSON_GetObjectItem(msg, "method");
	id = cJSON_GetObjectItem(msg, "id");
	params = cJSON_GetObjectItem(msg, "params");
	method = cJSON_IsString(m) ? m->valuestring : "?";
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST ||
	    msg == NULL) {
		reply_json(req, 400, "{}");
		cJSON_Delete(msg);
		return;
	}
	k = f->nreq < MAXREQ ? f->nreq++ : MAXREQ - 1;
	snprintf(f->method[k], sizeof(f->method[k]), "%s", method);
	copy_hdr(req, "Mcp-Session-Id", f->sid[k], sizeof(f->sid[k]));
	copy_hdr(req, "MCP-Protocol-Version", f->ver[k], sizeof(f->ver[k]));
	copy_hdr(req, "Authorization", f->auth[k], sizeof(f->auth[k]));
	copy_hdr(req, "Accept", f->accept[k], sizeof(f->accept[k]));

	if (strcmp(method, "initialize") == 0) {
		f->ninit++;
		{
			char *c = cJSON_PrintUnformatted(cJSON_GetObjectItem(
			    params, "capabilities"));

			snprintf(f->caps, sizeof(f->caps), "%s", c ? c : "");
			free(c);
		}
		if (f->fail_inits > 0) {
			f->fail_inits--;
			reply_json(req, 500, "{}");
			goto out;
		}
		snprintf(f->cur_sid, sizeof(f->cur_sid), "sess-%d", f->ninit);
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Mcp-Session-Id", f->cur_sid);
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"id\":%d,"
		    "\"result\":{\"protocolVersion\":\"%s\",\"capabilities\":"
		    "{\"tools\":{}},\"serverInfo\":{\"name\":\"fake\","
		    "\"version\":\"1\"}}}", id->valueint, f->version);
		reply_json(req, 200, buf);
		goto out;
	}
	copy_hdr(req, "Mcp-Session-Id", sid, sizeof(sid));
	if (f->expire && strcmp(method, "tools/call") == 0) {
		f->expire = 0;
		f->cur_sid[0] = '\0';
	}
	if (strcmp(sid, f->cur_sid) != 0) {
		reply_json(req, 404, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":"
		    "-32001,\"message\":\"Session not found\"},\"id\":null}");
		goto out;
	}
	if (m == NULL && id != NULL) {
		/* The client's answer to one of our requests. */
		char *t = cJSON_PrintUnformatted(msg);

		k = f->nans < MAXREQ ? f->nans++ : MAXREQ - 1;
		snprintf(f->ans[k], sizeof(f->ans[k]), "%s", t);
		copy_hdr(req, "Mcp-Session-Id", f->ans_sid[k],
		    sizeof(f->ans_sid[k]));
		copy_hdr(req, "MCP-Protocol-Version", f->ans_ver[k],
		    sizeof(f->ans_ver[k]));
		evhttp_send_reply(req, 202, "Accepted", NULL);
		if (f->ask_req != NULL && !f->ask_hold && cJSON_IsNumber(id) &&
		    id->valueint == f->ask_wait_id)
			ask_finish(f, t);
		free(t);
		goto out;
	}
	if (id == NULL) {
		if (strcmp(method, "notifications/cancelled") == 0)
			f->cancelled_id = (long)cJSON_GetObjectItem(params,
			    "requestId")->valuedouble;
		evhttp_send_reply(req, 202, "Accepted", NULL);
		goto out;
	}
	if (strcmp(method, "tools/list") == 0) {
		if (cJSON_GetObjectItem(params, "cursor") == NULL)
			snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\","
			    "\"id\":%d,\"result\":{\"tools\":["
			    "{\"name\":\"add\",\"description\":\"Adds\","
			    "\"inputSchema\":{\"type\":\"object\",\"properties\":"
			    "{\"a\":{\"type\":\"number\"}}},\"annotations\":"
			    "{\"readOnlyHint\":true}},"
			    "{\"name\":\"echo\"},{\"name\":\"echo_open\"},"
			    "{\"name\":\"boom\",\"annotations\":"
			    "{\"destructiveHint\":false}},"
			    "{\"name\":\"\"},{\"description\":\"no name\"}],"
			    "\"nextCursor\":\"page2\"}}", id->valueint);
		else
			snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\","
			    "\"id\":%d,\"result\":{\"tools\":["
			    "{\"name\":\"slow\"},{\"name\":\"weird.name/x\"},"
			    "{\"name\":\"structured\"},{\"name\":\"nope\"},"
			    "{\"name\":\"wrongid\"},{\"name\":\"http500\"},"
			    "{\"name\":\"ask\"},{\"name\":\"big\"},"
			    "{\"name\":\"notes\"},{\"name\":\"add\"},"
			    "{\"name\":\"a_very_long_tool_name_that_does_not_fit_"
			    "in_sixty_four_characters_at_all\"}]}}",
			    id->valueint);
		reply_json(req, 200, buf);
	} else if (strcmp(method, "tools/call") == 0)
		fake_call(f, req, (long)id->valuedouble, params);
	else
		reply_json(req, 200, "{}");
out:
	cJSON_Delete(msg);
}

static void
fake_start(struct fake *f, struct event_base *base)
{
	struct evhttp_bound_socket	*bs;
	struct sockaddr_in		 sin;
	socklen_t			 slen = sizeof(sin);

	memset(f, 0, sizeof(*f));
	f->base = base;
	f->version = "2025-06-18";
	f->http = evhttp_new(base);
	ck_assert_ptr_nonnull(f->http);
	f->open_ev = evtimer_new(base, open_end, f);
	evhttp_set_gencb(f->http, fake_cb, f);
	bs = evhttp_bind_socket_with_handle(f->http, "127.0.0.1", 0);
	ck_assert_ptr_nonnull(bs);
	ck_assert_int_eq(getsockname(evhttp_bound_socket_get_fd(bs),
	    (struct sockaddr *)&sin, &slen), 0);
	f->port = ntohs(sin.sin_port);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d/mcp", f->port);
}

/* --- the client side --- */

struct fixture {
	struct event_base	*base;
	struct event		*tick;
	struct fake		 fake;
	struct config		*conf;
	struct mcp_ctx		*ctx;
};

struct result {
	int	 done;
	int	 is_error;
	char	 text[1024];
	char	 code[32];
};

static void
result_cb(void *arg, int is_error, const char *text, const char *code)
{
	struct result *r = arg;

	r->done++;
	r->is_error = is_error;
	snprintf(r->text, sizeof(r->text), "%s", text);
	snprintf(r->code, sizeof(r->code), "%s", code ? code : "(null)");
}

static void
tick_ev(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

static struct config *
conf_for(const char *url, const char *extra)
{
	char		 text[2048], err[256];
	struct config	*c;

	snprintf(text, sizeof(text), "mcp-server fake {\n url %s\n"
	    " header \"Authorization: Bearer t0k\"\n%s}\n", url,
	    extra ? extra : "");
	c = config_parse_string("t.conf", text, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	return c;
}

static void
fx_init(struct fixture *fx, const char *version, int fail_inits,
    const char *extra)
{
	struct timeval tv = { 0, 10000 };

	memset(fx, 0, sizeof(*fx));
	fx->base = event_base_new();
	ck_assert_ptr_nonnull(fx->base);
	/* A wake-up every 10 ms so the loop never blocks for good. */
	fx->tick = event_new(fx->base, -1, EV_PERSIST, tick_ev, NULL);
	event_add(fx->tick, &tv);
	fake_start(&fx->fake, fx->base);
	if (version != NULL)
		fx->fake.version = version;
	fx->fake.fail_inits = fail_inits;
	fx->conf = conf_for(fx->fake.url, extra);
	fx->ctx = mcp_ctx_new(fx->base, fx->conf);
	ck_assert_ptr_nonnull(fx->ctx);
}

static void
fx_free(struct fixture *fx)
{
	mcp_ctx_free(fx->ctx);
	/* evhttp_free calls it, then frees the request itself. */
	if (fx->fake.ask_req != NULL)
		evhttp_connection_set_closecb(evhttp_request_get_connection(
		    fx->fake.ask_req), NULL, NULL);
	evhttp_free(fx->fake.http);
	event_free(fx->fake.open_ev);
	event_free(fx->tick);
	config_free(fx->conf);
	event_base_free(fx->base);
}

/* Runs the loop until *flag is non-zero or ms pass; returns *flag. */
static int
run_until(struct fixture *fx, const int *flag, uint64_t ms)
{
	uint64_t end = util_mono_ms() + ms;

	while (*flag == 0 && util_mono_ms() < end)
		event_base_loop(fx->base, EVLOOP_ONCE);
	return *flag;
}

static void
run_for(struct fixture *fx, uint64_t ms)
{
	int never = 0;

	run_until(fx, &never, ms);
}

static size_t
wait_tools(struct fixture *fx, const struct mcp_tool **t, uint64_t ms)
{
	uint64_t	end = util_mono_ms() + ms;
	size_t		n;

	while ((n = mcp_tools(fx->ctx, t)) == 0 && util_mono_ms() < end)
		event_base_loop(fx->base, EVLOOP_ONCE);
	return n;
}

static const struct mcp_tool *
find_tool(const struct mcp_tool *t, size_t n, const char *full)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(t[i].full_name, full) == 0)
			return &t[i];
	return NULL;
}

/* Calls full with args and waits for the result. */
static void
call_wait(struct fixture *fx, const char *full, const char *args,
    uint64_t timeout_ms, struct result *r)
{
	struct mcp_call *c;

	memset(r, 0, sizeof(*r));
	c = mcp_call(fx->ctx, full, args, timeout_ms, result_cb, r);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(r->done, 0);	/* never synchronous */
	ck_assert_msg(run_until(fx, &r->done, 5000), "no result for %s", full);
	run_for(fx, 20);
	ck_assert_int_eq(r->done, 1);	/* exactly once */
}

START_TEST(test_list)
{
	struct fixture		 fx;
	const struct mcp_tool	*t, *a;
	size_t			 n;
	int			 i;

	fx_init(&fx, NULL, 0, NULL);
	ck_assert_uint_eq(mcp_tools(fx.ctx, &t), 0);
	n = wait_tools(&fx, &t, 5000);
	/* Both pages; nameless, duplicate and too long tools skipped. */
	ck_assert_uint_eq(n, 13);
	a = find_tool(t, n, "fake__add");
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->server, "fake");
	ck_assert_str_eq(a->name, "add");
	ck_assert_str_eq(a->description, "Adds");
	ck_assert_str_eq(a->schema_json, "{\"type\":\"object\",\"properties\":"
	    "{\"a\":{\"type\":\"number\"}}}");
	ck_assert_int_eq(a->read_only, 1);
	ck_assert_int_eq(a->destructive, 0);
	a = find_tool(t, n, "fake__echo");
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->description, "");
	ck_assert_str_eq(a->schema_json, "{\"type\":\"object\"}");
	ck_assert_int_eq(a->read_only, 0);
	ck_assert_int_eq(a->destructive, 1);	/* the spec's default */
	ck_assert_int_eq(find_tool(t, n, "fake__boom")->destructive, 0);
	a = find_tool(t, n, "fake__weird_name_x");
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->name, "weird.name/x");
	ck_assert_ptr_nonnull(find_tool(t, n, "fake__slow"));
	ck_assert_str_eq(t[0].full_name, "fake__add");	/* server order */

	/* The sequence and its headers. */
	ck_assert_int_ge(fx.fake.nreq, 4);
	ck_assert_str_eq(fx.fake.method[0], "initialize");
	ck_assert_str_eq(fx.fake.sid[0], "");
	ck_assert_str_eq(fx.fake.ver[0], "");
	ck_assert_str_eq(fx.fake.method[1], "notifications/initialized");
	ck_assert_str_eq(fx.fake.method[2], "tools/list");
	ck_assert_str_eq(fx.fake.method[3], "tools/list");
	/* We answer elicitation/create, so we say so. */
	ck_assert_str_eq(fx.fake.caps, "{\"elicitation\":{}}");
	for (i = 0; i < 4; i++) {
		ck_assert_str_eq(fx.fake.auth[i], "Bearer t0k");
		ck_assert_str_eq(fx.fake.accept[i],
		    "application/json, text/event-stream");
	}
	for (i = 1; i < 4; i++) {
		ck_assert_str_eq(fx.fake.sid[i], "sess-1");
		ck_assert_str_eq(fx.fake.ver[i], "2025-06-18");
	}
	fx_free(&fx);
}
END_TEST

START_TEST(test_calls)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct result		 r;

	fx_init(&fx, NULL, 0, NULL);
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);

	/* application/json */
	call_wait(&fx, "fake__add", "{\"a\":1,\"b\":2}", 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.text, "sum=3");
	ck_assert_str_eq(r.code, "(null)");
	ck_assert_str_eq(fx.fake.last_args, "{\"a\":1,\"b\":2}");
	ck_assert_str_eq(fx.fake.ver[fx.fake.nreq - 1], "2025-06-18");
	ck_assert_str_eq(fx.fake.sid[fx.fake.nreq - 1], "sess-1");

	/* text/event-stream: notifications and server requests skipped,
	 * non-text items as JSON. */
	call_wait(&fx, "fake__echo", NULL, 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.text, "hi\n{\"type\":\"image\",\"data\":\"AA==\","
	    "\"mimeType\":\"image/png\"}");
	ck_assert_str_eq(fx.fake.last_args, "{}");
	/* A stream left open after the response. */
	call_wait(&fx, "fake__echo_open", "", 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.code, "(null)");
	ck_assert_ptr_nonnull(strstr(r.text, "hi\n"));
	/* It hung up once it had its response. */
	ck_assert_int_eq(run_until(&fx, &fx.fake.open_closed, 2000), 1);

	/* isError is the tool's failure, not ours. */
	call_wait(&fx, "fake__boom", "{}", 0, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.text, "it broke");
	ck_assert_str_eq(r.code, "(null)");

	call_wait(&fx, "fake__structured", "{}", 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.text, "{\"x\":1}");

	/* The original name goes to the server. */
	call_wait(&fx, "fake__weird_name_x", "{}", 0, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	ck_assert_str_eq(r.text, "Unknown tool: weird.name/x");

	/* JSON-RPC error. */
	call_wait(&fx, "fake__nope", "{}", 0, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	ck_assert_str_eq(r.text, "Unknown tool: nope");

	/* HTTP failure, and a response to another request. */
	call_wait(&fx, "fake__http500", "{}", 0, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	ck_assert_str_eq(r.text, "MCP server fake: HTTP status 500");
	call_wait(&fx, "fake__wrongid", "{}", 0, &r);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	ck_assert_ptr_nonnull(strstr(r.text, "no JSON-RPC response"));

	/* Refused before any request. */
	call_wait(&fx, "fake__missing", "{}", 0, &r);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	ck_assert_str_eq(r.text, "unknown tool fake__missing");
	call_wait(&fx, NULL, "{}", 0, &r);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	call_wait(&fx, "fake__add", "[1,2]", 0, &r);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	ck_assert_ptr_nonnull(strstr(r.text, "not a JSON object"));
	call_wait(&fx, "fake__add", "{\"a\":", 0, &r);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	fx_free(&fx);
}
END_TEST

/* max-result bounds a tool's answer, JSON or a stream. */
START_TEST(test_max_result)
{
	static const char *const over = "MCP server fake: the result is "
	    "larger than max-result 1k (raise it in mcp-server fake for "
	    "larger results)";
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct result		 r;

	fx_init(&fx, NULL, 0, " max-result 1k\n");
	ck_assert_uint_eq(fx.conf->mcp_servers.tqh_first->max_result, 1024);
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);
	call_wait(&fx, "fake__big", "{\"n\":900}", 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_uint_eq(strlen(r.text), 900);
	call_wait(&fx, "fake__big", "{\"n\":1000}", 0, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	ck_assert_str_eq(r.text, over);
	call_wait(&fx, "fake__big", "{\"n\":3000,\"sse\":true}", 0, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.text, over);
	/* Notifications count too: a stream without end is cut. */
	call_wait(&fx, "fake__notes", "{\"n\":5}", 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	call_wait(&fx, "fake__notes", "{\"n\":100}", 0, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.text, over);
	/* The server is still usable. */
	call_wait(&fx, "fake__add", "{\"a\":1,\"b\":2}", 0, &r);
	ck_assert_str_eq(r.text, "sum=3");
	fx_free(&fx);

	/* The default. */
	fx_init(&fx, NULL, 0, NULL);
	ck_assert_uint_eq(fx.conf->mcp_servers.tqh_first->max_result,
	    CFG_MAX_RESULT);
	fx_free(&fx);
}
END_TEST

START_TEST(test_timeout_cancel)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct result		 r, r2;
	struct mcp_call		*c;
	uint64_t		 t0;

	fx_init(&fx, NULL, 0, " timeout 300ms\n");
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);

	/* The caller's timeout... */
	t0 = util_mono_ms();
	call_wait(&fx, "fake__slow", "{}", 100, &r);
	ck_assert_int_eq(r.is_error, 1);
	ck_assert_str_eq(r.code, "TOOL_TIMEOUT");
	ck_assert_uint_ge(util_mono_ms() - t0, 80);
	run_for(&fx, 100);
	ck_assert_int_gt(fx.fake.cancelled_id, 0);
	/* ...or the server's. */
	fx.fake.cancelled_id = 0;
	t0 = util_mono_ms();
	call_wait(&fx, "fake__slow", "{}", 0, &r);
	ck_assert_str_eq(r.code, "TOOL_TIMEOUT");
	ck_assert_uint_ge(util_mono_ms() - t0, 250);
	run_for(&fx, 100);
	ck_assert_int_gt(fx.fake.cancelled_id, 0);

	/* Cancel: no callback, and the server is told. */
	fx.fake.cancelled_id = 0;
	memset(&r, 0, sizeof(r));
	c = mcp_call(fx.ctx, "fake__slow", "{}", 0, result_cb, &r);
	ck_assert_ptr_nonnull(c);
	run_for(&fx, 50);
	mcp_cancel(c);
	run_for(&fx, 500);
	ck_assert_int_eq(r.done, 0);
	ck_assert_int_gt(fx.fake.cancelled_id, 0);

	/* Cancel before anything ran, also of an early failure. */
	c = mcp_call(fx.ctx, "fake__add", "{\"a\":1,\"b\":1}", 0, result_cb,
	    &r);
	mcp_cancel(c);
	c = mcp_call(fx.ctx, "fake__nothere", "{}", 0, result_cb, &r);
	mcp_cancel(c);
	mcp_cancel(NULL);
	run_for(&fx, 200);
	ck_assert_int_eq(r.done, 0);

	/* Calls still running when the context goes: freed silently. */
	memset(&r2, 0, sizeof(r2));
	ck_assert_ptr_nonnull(mcp_call(fx.ctx, "fake__slow", "{}", 0,
	    result_cb, &r2));
	ck_assert_ptr_nonnull(mcp_call(fx.ctx, "fake__add", "{\"a\":1,\"b\":1}",
	    0, result_cb, &r2));
	fx_free(&fx);
	ck_assert_int_eq(r2.done, 0);
}
END_TEST

START_TEST(test_reinit_404)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct result		 r;

	fx_init(&fx, NULL, 0, NULL);
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);
	ck_assert_int_eq(fx.fake.ninit, 1);
	fx.fake.expire = 1;
	call_wait(&fx, "fake__add", "{\"a\":2,\"b\":2}", 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.text, "sum=4");
	ck_assert_int_eq(fx.fake.ninit, 2);
	ck_assert_str_eq(fx.fake.sid[fx.fake.nreq - 1], "sess-2");
	/* Tools stay known across the renewal. */
	ck_assert_uint_gt(mcp_tools(fx.ctx, &t), 0);
	fx_free(&fx);
}
END_TEST

START_TEST(test_versions)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;

	/* The older revision is accepted and then sent. */
	fx_init(&fx, "2025-03-26", 0, NULL);
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);
	ck_assert_str_eq(fx.fake.ver[1], "2025-03-26");
	ck_assert_str_eq(fx.fake.ver[2], "2025-03-26");
	fx_free(&fx);

	/* Another is refused, and retried after a second. */
	fx_init(&fx, "1999-01-01", 0, NULL);
	run_for(&fx, 300);
	ck_assert_uint_eq(mcp_tools(fx.ctx, &t), 0);
	ck_assert_int_eq(fx.fake.ninit, 1);
	ck_assert_int_eq(fx.fake.nreq, 1);
	fx.fake.version = "2025-06-18";
	ck_assert_uint_gt(wait_tools(&fx, &t, 3000), 0);
	ck_assert_int_eq(fx.fake.ninit, 2);
	fx_free(&fx);
}
END_TEST

START_TEST(test_backoff)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	uint64_t		 t0 = util_mono_ms();

	/* 500, retry after 1 s: 500, retry after 2 s: ready. */
	fx_init(&fx, NULL, 2, NULL);
	ck_assert_uint_gt(wait_tools(&fx, &t, 6000), 0);
	ck_assert_int_eq(fx.fake.ninit, 3);
	ck_assert_uint_ge(util_mono_ms() - t0, 2500);	/* timers may round */
	fx_free(&fx);
}
END_TEST

START_TEST(test_unreachable)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct result		 r;
	struct config		*c2;
	struct mcp_ctx		*ctx2;
	int			 port;

	/* A port nobody listens on: no tools, calls fail, no hang. */
	fx_init(&fx, NULL, 0, NULL);
	port = fx.fake.port;
	evhttp_free(fx.fake.http);
	fx.fake.http = evhttp_new(fx.base);
	mcp_ctx_free(fx.ctx);
	fx.ctx = mcp_ctx_new(fx.base, fx.conf);
	run_for(&fx, 300);
	ck_assert_uint_eq(mcp_tools(fx.ctx, &t), 0);
	call_wait(&fx, "fake__add", "{}", 0, &r);
	ck_assert_str_eq(r.code, "TOOL_ERROR");
	(void)port;

	/* No servers at all, and no config. */
	c2 = config_parse_string("e.conf", "", NULL, 0);
	ck_assert_ptr_nonnull(c2);
	ctx2 = mcp_ctx_new(fx.base, c2);
	ck_assert_ptr_nonnull(ctx2);
	ck_assert_uint_eq(mcp_tools(ctx2, &t), 0);
	ck_assert_ptr_null(t);
	mcp_ctx_free(ctx2);
	ctx2 = mcp_ctx_new(fx.base, NULL);
	ck_assert_ptr_nonnull(ctx2);
	mcp_ctx_free(ctx2);
	mcp_ctx_free(NULL);
	config_free(c2);
	fx_free(&fx);
}
END_TEST

/* --- the response decoders, fed in odd splits --- */

static struct xfer *
bare_xfer(long id, int sse)
{
	struct xfer *x = calloc(1, sizeof(*x));

	ck_assert_ptr_nonnull(x);
	x->id = id;
	x->is_sse = sse;
	x->max = MCP_MAX_BODY;
	return x;
}

static void
bare_free(struct xfer *x)
{
	sse_parser_free(x->sse);
	cJSON_Delete(x->msg);
	free(x->resp);
	free(x);
}

START_TEST(test_sse_splits)
{
	static const char stream[] =
	    "\xef\xbb\xbf: comment\r\n\r\n"
	    "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n"
	    "data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\n"
	    "event: other\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
	    "data: not json\n\n"
	    "data: {\"jsonrpc\":\"2.0\",\"id\":7,\n"
	    "data: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}"
	    "\r\rdata: trailing";
	size_t	split, len = sizeof(stream) - 1, off, n, rv;
	struct xfer *x;
	char	*text;

	for (split = 1; split <= len; split += (split < 8 ? 1 : 13)) {
		x = bare_xfer(7, 1);
		rv = 1;
		for (off = 0; off < len && rv != 0; off += n) {
			n = len - off < split ? len - off : split;
			rv = write_cb((char *)(uintptr_t)(stream + off), 1, n, x);
			ck_assert(rv == 0 || rv == n);
		}
		/* Stopped right at the response: the rest was not read. */
		ck_assert_uint_eq(rv, 0);
		ck_assert_ptr_nonnull(x->msg);
		text = result_text(cJSON_GetObjectItem(x->msg, "result"));
		ck_assert_str_eq(text, "ok");
		free(text);
		bare_free(x);
	}
}
END_TEST

/*
 * Found by fuzz/mcp.c: a JSON-RPC error whose message is empty, or cut
 * short by a NUL byte, came back as an empty reason (a tool result
 * saying nothing); it says "JSON-RPC error CODE" instead.
 */
START_TEST(test_rpc_error_text)
{
	static const char nul_msg[] = "{\"jsonrpc\":\"2.0\",\"id\":1,"
	    "\"error\":{\"message\":\"\0\0\0\0\0\0\0%4\"}}";
	static const struct {
		const char	*body;
		size_t		 len;
		long		 status;
		int		 rpcerr;
		const char	*why;
	} t[] = {
		{ nul_msg, sizeof(nul_msg) - 1, 200, 1, "JSON-RPC error 0" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,"
		  "\"message\":\"\"}}", 0, 200, 1, "JSON-RPC error -32000" },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,"
		  "\"message\":\"no such tool\"}}", 0, 200, 1, "no such tool" },
		{ "{\"error\":{\"message\":\"\"}}", 0, 400, 0,
		  "HTTP status 400" },
		{ "{\"error\":{\"message\":\"bad token\"}}", 0, 401, 0,
		  "HTTP 401: bad token" },
	};
	struct xfer	*x;
	char		 why[256];
	size_t		 i, len;
	int		 rpcerr;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		x = bare_xfer(1, 0);
		len = t[i].len ? t[i].len : strlen(t[i].body);
		ck_assert_uint_eq(write_cb((char *)(uintptr_t)t[i].body, 1, len,
		    x), len);
		ck_assert_int_eq(xfer_result(x, CURLE_OK, t[i].status, why,
		    sizeof(why), &rpcerr), -1);
		ck_assert_int_eq(rpcerr, t[i].rpcerr);
		ck_assert_str_eq(why, t[i].why);
		bare_free(x);
	}
}
END_TEST

START_TEST(test_json_body)
{
	static const char body[] = "[{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":"
	    "{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
	    "\"text\",\"text\":\"b\"},{\"type\":\"text\"}]}},"
	    "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}]";
	struct xfer	*x;
	char		 why[256], *text;
	size_t		 i;
	int		 rpcerr;

	/* Pieces of any size, a batch array. */
	for (i = 1; i < 10; i++) {
		size_t off;

		x = bare_xfer(3, 0);
		x->easy = curl_easy_init();
		for (off = 0; off < sizeof(body) - 1; off += i) {
			size_t n = sizeof(body) - 1 - off < i ?
			    sizeof(body) - 1 - off : i;
			ck_assert_uint_eq(write_cb((char *)(uintptr_t)(body +
			    off), 1, n, x), n);
		}
		/* No response code yet (0): only a 2xx body is decoded. */
		ck_assert_int_eq(xfer_outcome(x, CURLE_OK, why, sizeof(why),
		    &rpcerr), -1);
		ck_assert_ptr_null(x->msg);
		curl_easy_cleanup(x->easy);
		bare_free(x);
	}
	x = bare_xfer(3, 0);
	write_cb((char *)(uintptr_t)body, 1, sizeof(body) - 1, x);
	{
		cJSON *arr = cJSON_Parse(body);

		ck_assert_int_eq(take_response(x, arr), 0);	/* not an object */
		cJSON_Delete(arr);
	}
	{
		cJSON *doc = cJSON_Parse(body);
		cJSON *m = cJSON_Duplicate(cJSON_GetArrayItem(doc, 0), 1);

		ck_assert_int_eq(take_response(x, m), 1);
		cJSON_Delete(doc);
	}
	text = result_text(cJSON_GetObjectItem(x->msg, "result"));
	ck_assert_str_eq(text, "a\nb\n{\"type\":\"text\"}");
	free(text);
	bare_free(x);

	/* Bounded. */
	x = bare_xfer(1, 0);
	x->got = MCP_MAX_BODY - 2;
	ck_assert_uint_eq(write_cb((char *)(uintptr_t)"abc", 1, 3, x), 0);
	ck_assert_int_eq(x->too_big, 1);
	bare_free(x);
}
END_TEST

START_TEST(test_headers)
{
	struct xfer	*x = bare_xfer(1, 0);
	char		 h1[] = "HTTP/1.1 200 OK\r\n";
	char		 h2[] = "Content-Type: text/event-stream; charset=utf-8\r\n";
	char		 h3[] = "mcp-session-id:   abc-123 \r\n";
	char		 h4[] = "Mcp-Session-Id: bad id\r\n";
	char		 big[400];

	ck_assert_uint_eq(header_cb(h1, 1, strlen(h1), x), strlen(h1));
	header_cb(h2, 1, strlen(h2), x);
	ck_assert_int_eq(x->is_sse, 1);
	header_cb(h3, 1, strlen(h3), x);
	ck_assert_str_eq(x->sid, "abc-123");
	header_cb(h4, 1, strlen(h4), x);
	ck_assert_str_eq(x->sid, "abc-123");	/* blanks: refused */
	memset(big, 'a', sizeof(big));
	memcpy(big, "Mcp-Session-Id: ", 16);
	ck_assert_uint_eq(header_cb(big, 1, sizeof(big), x), sizeof(big));
	ck_assert_str_eq(x->sid, "abc-123");	/* too long: refused */
	header_cb(h1, 1, strlen(h1), x);	/* a new response */
	ck_assert_int_eq(x->is_sse, 0);
	ck_assert_str_eq(x->sid, "");
	bare_free(x);
}
END_TEST

/* --- the server's requests --- */

/* Index of the first answer containing s, or -1. */
static int
find_ans(struct fixture *fx, const char *s)
{
	int i;

	for (i = 0; i < fx->fake.nans; i++)
		if (strstr(fx->fake.ans[i], s) != NULL)
			return i;
	return -1;
}

/* Runs the loop until an answer contains s or ms pass; its index. */
static int
wait_ans(struct fixture *fx, const char *s, uint64_t ms)
{
	uint64_t	end = util_mono_ms() + ms;
	int		i;

	while ((i = find_ans(fx, s)) == -1 && util_mono_ms() < end)
		event_base_loop(fx->base, EVLOOP_ONCE);
	return i;
}

struct asked {
	int			 n;
	char			 message[128];
	char			 schema[256];
	struct mcp_elicit	*e[8];
	const char		*now;	/* answer inside the callback */
	int			 now_rv;
};

static void
elicit_cb(void *arg, const char *message, const char *schema_json,
    struct mcp_elicit *e)
{
	struct asked *q = arg;

	snprintf(q->message, sizeof(q->message), "%s", message);
	snprintf(q->schema, sizeof(q->schema), "%s", schema_json);
	if (q->n < 8)
		q->e[q->n] = e;
	q->n++;
	if (q->now != NULL)
		q->now_rv = mcp_elicit_answer(e, q->now, NULL);
}

#define ELICIT_ARGS(extra)						\
	"{\"method\":\"elicitation/create\",\"params\":{\"message\":"	\
	"\"Your name?\",\"requestedSchema\":{\"type\":\"object\","	\
	"\"properties\":{\"name\":{\"type\":\"string\"}}}}" extra "}"

/* Starts ask with args and the elicit callback on q (NULL: none). */
static struct mcp_call *
ask_call(struct fixture *fx, const char *args, uint64_t timeout_ms,
    struct result *r, struct asked *q)
{
	struct mcp_call *c;

	memset(r, 0, sizeof(*r));
	c = mcp_call(fx->ctx, "fake__ask", args, timeout_ms, result_cb, r);
	ck_assert_ptr_nonnull(c);
	if (q != NULL)
		mcp_call_on_elicit(c, elicit_cb, q);
	return c;
}

START_TEST(test_asks)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct result		 r;
	uint64_t		 t0;
	int			 i;

	fx_init(&fx, NULL, 0, NULL);
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);

	/* echo's ping, in the stream before the result, answered. */
	call_wait(&fx, "fake__echo", NULL, 0, &r);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert(run_until(&fx, &fx.fake.nans, 2000));
	ck_assert_ptr_nonnull(strstr(fx.fake.ans[0], "\"result\":{}"));
	ck_assert_str_eq(fx.fake.ans_sid[0], "sess-1");
	ck_assert_str_eq(fx.fake.ans_ver[0], "2025-06-18");

	/* Sampling: "method not found" at once, so the tool fails at once
	 * rather than at its timeout; its ping (a string id) answered. */
	fx.fake.nans = 0;
	t0 = util_mono_ms();
	call_wait(&fx, "fake__ask", "{\"method\":\"sampling/createMessage\","
	    "\"params\":{\"messages\":[],\"maxTokens\":5}}", 0, &r);
	ck_assert_uint_lt(util_mono_ms() - t0, 2000);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.text, "{\"jsonrpc\":\"2.0\",\"id\":500,\"error\":"
	    "{\"code\":-32601,\"message\":\"Method not found: "
	    "sampling/createMessage\"}}");
	i = wait_ans(&fx, "\"id\":\"p-", 2000);
	ck_assert_int_ge(i, 0);
	ck_assert_ptr_nonnull(strstr(fx.fake.ans[i], "\"result\":{}"));
	ck_assert_str_eq(fx.fake.ans_sid[i], "sess-1");

	/* Elicitation without a callback: declined at once. */
	call_wait(&fx, "fake__ask", ELICIT_ARGS(""), 0, &r);
	ck_assert_str_eq(r.text, "{\"jsonrpc\":\"2.0\",\"id\":500,\"result\":"
	    "{\"action\":\"decline\"}}");
	/* Without its schema: invalid params. */
	call_wait(&fx, "fake__ask", "{\"method\":\"elicitation/create\","
	    "\"params\":{\"message\":\"x\"}}", 0, &r);
	ck_assert_ptr_nonnull(strstr(r.text, "\"code\":-32602"));
	fx_free(&fx);
}
END_TEST

START_TEST(test_elicit)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct result		 r;
	struct asked		 q;
	struct mcp_call		*c;
	uint64_t		 t0;

	fx_init(&fx, NULL, 0, NULL);
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);

	/* To the caller, who answers later; bad answers change nothing. */
	memset(&q, 0, sizeof(q));
	ask_call(&fx, ELICIT_ARGS(""), 0, &r, &q);
	ck_assert(run_until(&fx, &q.n, 2000));
	ck_assert_str_eq(q.message, "Your name?");
	ck_assert_str_eq(q.schema, "{\"type\":\"object\",\"properties\":"
	    "{\"name\":{\"type\":\"string\"}}}");
	run_for(&fx, 50);
	ck_assert_int_eq(r.done, 0);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], "maybe", NULL), -1);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], NULL, NULL), -1);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], "accept", NULL), -1);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], "accept", "[1]"), -1);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], "accept", "{\"a\":"), -1);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], "decline", "{}"), -1);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], "accept",
	    "{\"name\":\"Ada\"}"), 0);
	ck_assert(run_until(&fx, &r.done, 2000));
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.text, "{\"jsonrpc\":\"2.0\",\"id\":500,\"result\":"
	    "{\"action\":\"accept\",\"content\":{\"name\":\"Ada\"}}}");
	ck_assert_int_eq(q.n, 1);

	/* Answered from inside the callback. */
	memset(&q, 0, sizeof(q));
	q.now = "cancel";
	ask_call(&fx, ELICIT_ARGS(""), 0, &r, &q);
	ck_assert(run_until(&fx, &r.done, 2000));
	ck_assert_int_eq(q.now_rv, 0);
	ck_assert_ptr_nonnull(strstr(r.text, "{\"action\":\"cancel\"}"));

	/* Nobody answers: declined at the bound (a quarter of 400 ms
	 * before the call's end), and the tool finishes in time. */
	memset(&q, 0, sizeof(q));
	t0 = util_mono_ms();
	ask_call(&fx, ELICIT_ARGS(""), 400, &r, &q);
	ck_assert(run_until(&fx, &r.done, 2000));
	ck_assert_uint_ge(util_mono_ms() - t0, 250);
	ck_assert_int_eq(r.is_error, 0);
	ck_assert_str_eq(r.code, "(null)");
	ck_assert_ptr_nonnull(strstr(r.text, "{\"action\":\"decline\"}"));

	/* Declined at the bound while the call goes on: the caller's late
	 * answer is refused, then the call times out. */
	memset(&q, 0, sizeof(q));
	fx.fake.nans = 0;
	ask_call(&fx, ELICIT_ARGS(",\"hold\":true"), 400, &r, &q);
	ck_assert(run_until(&fx, &q.n, 2000));
	ck_assert_int_ge(wait_ans(&fx, "{\"action\":\"decline\"}", 390), 0);
	ck_assert_int_eq(r.done, 0);
	ck_assert_int_eq(mcp_elicit_answer(q.e[0], "accept",
	    "{\"name\":\"late\"}"), 1);
	ck_assert(run_until(&fx, &r.done, 2000));
	ck_assert_str_eq(r.code, "TOOL_TIMEOUT");

	/* A few open at once; the rest declined at once.  The answer to
	 * the last ends the call, which frees the open ones. */
	memset(&q, 0, sizeof(q));
	fx.fake.nans = 0;
	ask_call(&fx, ELICIT_ARGS(",\"count\":6"), 0, &r, &q);
	ck_assert(run_until(&fx, &r.done, 2000));
	ck_assert_int_eq(q.n, MCP_MAX_ELICITS);
	ck_assert_ptr_nonnull(strstr(r.text, "\"id\":505,\"result\":"
	    "{\"action\":\"decline\"}"));
	ck_assert_int_ge(wait_ans(&fx, "\"id\":504,\"result\":"
	    "{\"action\":\"decline\"}", 2000), 0);

	/* Cancelled, or the context freed, with a question open. */
	memset(&q, 0, sizeof(q));
	c = ask_call(&fx, ELICIT_ARGS(",\"hold\":true"), 0, &r, &q);
	ck_assert(run_until(&fx, &q.n, 2000));
	mcp_cancel(c);
	run_for(&fx, 50);
	ck_assert_int_eq(r.done, 0);
	memset(&q, 0, sizeof(q));
	ask_call(&fx, ELICIT_ARGS(",\"hold\":true"), 0, &r, &q);
	ck_assert(run_until(&fx, &q.n, 2000));
	fx_free(&fx);
	ck_assert_int_eq(r.done, 0);
}
END_TEST

START_TEST(test_asks_bounded)
{
	struct fixture		 fx;
	const struct mcp_tool	*t;
	struct xfer		*x;
	char			 ev[256];
	uint64_t		 end;
	int			 i;

	fx_init(&fx, NULL, 0, NULL);
	ck_assert_uint_gt(wait_tools(&fx, &t, 5000), 0);
	/* A flood of pings in one stream: only so many are kept... */
	x = bare_xfer(1, 1);
	x->ctx = fx.ctx;
	x->srv = TAILQ_FIRST(&fx.ctx->srvs);
	x->kind = X_LIST;
	x->gen = x->srv->gen;
	for (i = 0; i < 3 * MCP_MAX_ASKS; i++) {
		snprintf(ev, sizeof(ev), "data: {\"jsonrpc\":\"2.0\",\"id\":%d,"
		    "\"method\":\"ping\"}\n\n", 1000 + i);
		ck_assert_uint_eq(write_cb(ev, 1, strlen(ev), x), strlen(ev));
	}
	ck_assert_uint_eq(fx.ctx->nasks, MCP_MAX_ASKS);
	/* ...and answered; while those are in flight, no more. */
	ask_run(fx.ctx);
	ck_assert_uint_eq(fx.ctx->nasks, 0);
	ck_assert_uint_eq(fx.ctx->nanswers, MCP_MAX_ASKS);
	ck_assert_uint_eq(write_cb(ev, 1, strlen(ev), x), strlen(ev));
	ck_assert_uint_eq(fx.ctx->nasks, 0);
	end = util_mono_ms() + 3000;
	while (fx.ctx->nanswers > 0 && util_mono_ms() < end)
		event_base_loop(fx.base, EVLOOP_ONCE);
	ck_assert_uint_eq(fx.ctx->nanswers, 0);
	ck_assert_int_eq(fx.fake.nans, MCP_MAX_ASKS);
	/* Notifications, responses and odd ids are no requests to answer. */
	snprintf(ev, sizeof(ev), "data: {\"jsonrpc\":\"2.0\",\"method\":"
	    "\"ping\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,"
	    "\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":[1],"
	    "\"method\":\"ping\"}\n\n");
	ck_assert_uint_eq(write_cb(ev, 1, strlen(ev), x), strlen(ev));
	ck_assert_uint_eq(fx.ctx->nasks, 0);
	bare_free(x);
	fx_free(&fx);
}
END_TEST

START_TEST(test_full_name)
{
	char *s;

	s = full_name("srv", "a.b/c d-e_f");
	ck_assert_str_eq(s, "srv__a_b_c_d-e_f");
	free(s);
	s = full_name("x", "\xc3\xa9");
	ck_assert_str_eq(s, "x____");
	free(s);
}
END_TEST

static Suite *
mcp_suite(void)
{
	Suite	*s = suite_create("mcp");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_calls);
	tcase_add_test(tc, test_max_result);
	tcase_add_test(tc, test_timeout_cancel);
	tcase_add_test(tc, test_reinit_404);
	tcase_add_test(tc, test_versions);
	tcase_add_test(tc, test_backoff);
	tcase_add_test(tc, test_unreachable);
	tcase_add_test(tc, test_sse_splits);
	tcase_add_test(tc, test_json_body);
	tcase_add_test(tc, test_rpc_error_text);
	tcase_add_test(tc, test_headers);
	tcase_add_test(tc, test_full_name);
	tcase_add_test(tc, test_asks);
	tcase_add_test(tc, test_elicit);
	tcase_add_test(tc, test_asks_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int	main(void);

int
main(void)
{
	log_init("test_mcp", 1, LOG_LEVEL_WARN);
	return check_run(mcp_suite());
}
