/*
 * An internal HTTP call to a knowledge project's worker (kgcall.h).  The
 * request travels as the bytes of an IPC_REROUTE, like a connection a
 * worker hands to the session's owner: the supervisor routes it by
 * "kg:P" and hands it on as IPC_CONN (a new hseq, flags cleared), and the
 * owner's conn.c reads the bytes as a complete request (they are: head,
 * Content-Length and body) and answers on the socket.  The supervisor
 * takes such a hand-off only from its workers, over their IPC channel:
 * nothing outside can claim a role this way.  The answer is read from our
 * end of the socketpair until its Content-Length is in or the peer
 * closes.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "parley/ipc.h"
#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"
#include "kgcall.h"
#include "wk.h"

struct kgcall {
	struct wk		*wk;
	struct bufferevent	*bev;	/* our end of the socketpair */
	struct event		*tmo;	/* the timeout; at 0, a failure to
					   answer once the loop comes round */
	kgcall_fn		 done;
	void			*arg;
	int			 failed;
	size_t			 need;	/* bytes to wait for before parsing
					   again (kgcall_resp.need) */
	char			 err[256];
};

static void
call_free(struct kgcall *c)
{
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	if (c->tmo != NULL)
		event_free(c->tmo);
	free(c);
}

void
kgcall_cancel(struct kgcall *c)
{
	if (c != NULL)
		call_free(c);
}

/* Answers an error and ends the call. */
static void
call_fail(struct kgcall *c, const char *fmt, const char *what)
{
	snprintf(c->err, sizeof(c->err), fmt, what);
	c->done(c->arg, 0, "", NULL, 0, c->err);
	call_free(c);
}

/* Reports a failure found before kgcall_start returned, from the loop. */
static void
call_defer_fail(struct kgcall *c, const char *msg)
{
	struct timeval tv = { 0, 0 };

	c->failed = 1;
	snprintf(c->err, sizeof(c->err), "%s", msg);
	evtimer_add(c->tmo, &tv);
}

/* Tries the answer read so far; eof: nothing more comes. */
static void
call_try(struct kgcall *c, int eof)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct kgcall_resp r;
	size_t len = evbuffer_get_length(in);
	char why[160], *buf;
	int rc;

	if (len > KGCALL_ANSWER_MAX + KGCALL_HEAD_MAX) {
		call_fail(c, "%s", "the knowledge worker's answer is over "
		    "4 MiB: ask for less");
		return;
	}
	/* Parsed again only once what it waits for is there: a large
	 * answer is copied once, not once per read. */
	if (!eof && (len == 0 || len < c->need))
		return;
	/* A copy with room for the NUL after the body. */
	if ((buf = malloc(len + 1)) == NULL) {
		call_fail(c, "%s", "out of memory");
		return;
	}
	evbuffer_copyout(in, buf, len);
	buf[len] = '\0';
	rc = kgcall_parse(buf, len, eof, &r, why, sizeof(why));
	if (rc == 0) {
		c->need = r.need;
		free(buf);
		return;
	}
	if (rc == -1) {
		free(buf);
		call_fail(c, "the knowledge worker's answer could not be read: "
		    "%s", why);
		return;
	}
	((char *)r.body)[r.body_len] = '\0';
	c->done(c->arg, r.status, r.ctype, r.body, r.body_len, NULL);
	free(buf);
	call_free(c);
}

static void
read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	call_try(arg, 0);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct kgcall *c = arg;

	(void)bev;
	if (what & BEV_EVENT_EOF) {
		if (evbuffer_get_length(bufferevent_get_input(c->bev)) == 0)
			call_fail(c, "%s", "the knowledge worker closed without "
			    "an answer (the server may be stopping, or no worker "
			    "is available): retry");
		else
			call_try(c, 1);
		return;
	}
	call_fail(c, "the connection to the knowledge worker failed: %s",
	    strerror(errno));
}

static void
tmo_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct kgcall *c = arg;

	(void)fd;
	(void)ev;
	if (c->failed) {
		c->done(c->arg, 0, "", NULL, 0, c->err);
		call_free(c);
		return;
	}
	call_fail(c, "%s", "the knowledge worker did not answer in time "
	    "(30 s): retry");
}

/* The request's bytes (malloc'd) into *out, or -1. */
static int
request_bytes(const char *project, const char *method, const char *target,
    const char *body, size_t len, char **out, size_t *outlen)
{
	char head[512];
	int n;

	if (body != NULL || strcmp(method, "POST") == 0)
		n = snprintf(head, sizeof(head), "%s /knowledge/%s%s HTTP/1.1\r\n"
		    "Host: parley.internal\r\nContent-Type: application/json\r\n"
		    "Content-Length: %zu\r\nConnection: close\r\n\r\n", method,
		    project, target, body != NULL ? len : 0);
	else
		n = snprintf(head, sizeof(head), "%s /knowledge/%s%s HTTP/1.1\r\n"
		    "Host: parley.internal\r\nConnection: close\r\n\r\n", method,
		    project, target);
	if (n < 0 || (size_t)n >= sizeof(head))
		return -1;
	if ((*out = malloc((size_t)n + (body != NULL ? len : 0))) == NULL)
		return -1;
	memcpy(*out, head, (size_t)n);
	if (body != NULL)
		memcpy(*out + n, body, len);
	*outlen = (size_t)n + (body != NULL ? len : 0);
	return 0;
}

struct kgcall *
kgcall_start(struct wk *wk, const char *project, const char *method,
    const char *target, const char *body, size_t len,
    const struct kgcall_who *who, kgcall_fn done, void *arg)
{
	struct kgcall *c;
	struct ipc_conn ic;
	struct timeval tv;
	char *req = NULL;
	size_t reqlen = 0;
	int sv[2];

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->wk = wk;
	c->done = done;
	c->arg = arg;
	if ((c->tmo = evtimer_new(wk->base, tmo_cb, c)) == NULL) {
		free(c);
		return NULL;
	}
	memset(&ic, 0, sizeof(ic));
	ic.kind = IPC_CONN_HTTP;
	ic.role = (uint32_t)who->role;
	ic.conn_id = who->conn_id;
	snprintf(ic.session, sizeof(ic.session), "kg:%s", project);
	/* The call is about this project only, whatever the caller's
	 * token allowed (the caller checked that it allows this one). */
	snprintf(ic.scope, sizeof(ic.scope), "%s", ic.session);
	snprintf(ic.subject, sizeof(ic.subject), "%s", who->subject != NULL ?
	    who->subject : "");
	snprintf(ic.peer, sizeof(ic.peer), "internal");
	if (strlen(project) + 3 > IPC_SID_MAX || !store_valid_id(ic.session) ||
	    who->role < IPC_ROLE_OBSERVER || who->role > IPC_ROLE_ADMIN ||
	    strcspn(target, " \r\n") != strlen(target)) {
		call_defer_fail(c, "invalid internal request (project, role "
		    "or path)");
		return c;
	}
	if (request_bytes(project, method, target, body, len, &req,
	    &reqlen) == -1) {
		call_defer_fail(c, "out of memory, or a path too long");
		return c;
	}
	if (reqlen > IPC_MAX_PAYLOAD - sizeof(ic)) {
		free(req);
		call_defer_fail(c, "the request is too large to hand on (over "
		    "4 MiB)");
		return c;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) == -1) {
		free(req);
		log_warn("knowledge call: socketpair");
		call_defer_fail(c, "no socket for the internal call (the open "
		    "files limit?): retry");
		return c;
	}
	if ((c->bev = bufferevent_socket_new(wk->base, sv[0],
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(sv[0]);
		close(sv[1]);
		free(req);
		call_defer_fail(c, "out of memory");
		return c;
	}
	/* wk_reroute takes sv[1], sent or not. */
	if (wk_reroute(wk, sv[1], &ic, req, reqlen) == -1) {
		free(req);
		call_defer_fail(c, "the request could not be handed to the "
		    "supervisor: retry");
		return c;
	}
	free(req);
	bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
	bufferevent_enable(c->bev, EV_READ);
	util_tv(&tv, KGCALL_TIMEOUT_MS);
	evtimer_add(c->tmo, &tv);
	return c;
}

/* --- the answer --- */

/* Whether s (n bytes) is all digits, at least one. */
static int
all_digits(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return n > 0;
}

static int
parse_fail(char *err, size_t errlen, const char *msg)
{
	snprintf(err, errlen, "%s", msg);
	return -1;
}

int
kgcall_parse(const char *buf, size_t len, int eof, struct kgcall_resp *r,
    char *err, size_t errlen)
{
	const char *p = buf, *end = buf + len, *he, *l, *le, *colon, *v, *ve;
	size_t have, cl = 0;
	int has_cl;

	memset(r, 0, sizeof(*r));
	for (;;) {
		he = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		if (he == NULL || (size_t)(he - p) > KGCALL_HEAD_MAX) {
			if ((size_t)(end - p) > KGCALL_HEAD_MAX)
				return parse_fail(err, errlen, "the head of the "
				    "answer is over 16 KiB");
			if (eof)
				return parse_fail(err, errlen, "the answer "
				    "ended before its head did");
			return 0;
		}
		/* "HTTP/1.x SP 3DIGIT [SP reason] CRLF" */
		if (he - p < 12 || memcmp(p, "HTTP/1.", 7) != 0 ||
		    (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
		    !all_digits(p + 9, 3) || (p[12] != ' ' && p[12] != '\r'))
			return parse_fail(err, errlen, "not an HTTP/1.x status "
			    "line");
		r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 +
		    (p[11] - '0');
		if (r->status < 100 || r->status > 599)
			return parse_fail(err, errlen, "status out of range");
		has_cl = 0;
		r->ctype[0] = '\0';
		l = (const char *)memmem(p, (size_t)(he - p) + 2, "\r\n", 2) + 2;
		for (; l < he + 2; l = le + 2) {
			le = memmem(l, (size_t)(he + 2 - l), "\r\n", 2);
			if ((colon = memchr(l, ':', (size_t)(le - l))) == NULL ||
			    colon == l)
				return parse_fail(err, errlen, "a header line "
				    "without a name and a colon");
			for (v = colon + 1; v < le && (*v == ' ' || *v == '\t');
			    v++)
				;
			for (ve = le; ve > v && (ve[-1] == ' ' ||
			    ve[-1] == '\t'); ve--)
				;
			if ((size_t)(colon - l) == 14 &&
			    strncasecmp(l, "Content-Length", 14) == 0) {
				if (!all_digits(v, (size_t)(ve - v)) ||
				    ve - v > 10)
					return parse_fail(err, errlen, "a "
					    "Content-Length that is not a "
					    "number");
				if (has_cl && cl != strtoull(v, NULL, 10))
					return parse_fail(err, errlen, "two "
					    "different Content-Lengths");
				cl = strtoull(v, NULL, 10);
				has_cl = 1;
				if (cl > KGCALL_ANSWER_MAX)
					return parse_fail(err, errlen, "the "
					    "answer's body is over 4 MiB");
			} else if ((size_t)(colon - l) == 17 &&
			    strncasecmp(l, "Transfer-Encoding", 17) == 0)
				return parse_fail(err, errlen, "a chunked "
				    "answer (only Content-Length is read)");
			else if ((size_t)(colon - l) == 12 &&
			    strncasecmp(l, "Content-Type", 12) == 0)
				snprintf(r->ctype, sizeof(r->ctype), "%.*s",
				    (int)(ve - v), v);
		}
		p = he + 4;
		if (r->status == 101)
			return parse_fail(err, errlen, "the worker switched "
			    "protocols");
		if (r->status >= 200)
			break;
		/* 1xx: interim, the answer follows. */
	}
	have = (size_t)(end - p);
	r->body = p;
	if (r->status == 204 || r->status == 304) {
		r->body_len = 0;
		return 1;
	}
	if (has_cl) {
		if (have >= cl) {
			r->body_len = cl;
			return 1;
		}
		if (eof)
			return parse_fail(err, errlen, "the answer ended before "
			    "its Content-Length");
		r->need = (size_t)(p - buf) + cl;
		return 0;
	}
	if (!eof) {
		r->need = SIZE_MAX;
		return 0;
	}
	if (have > KGCALL_ANSWER_MAX)
		return parse_fail(err, errlen, "the answer's body is over 4 MiB");
	r->body_len = have;
	return 1;
}
