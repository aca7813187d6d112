/*
 * parleyctl(8): administers a running parleyd over its control socket (the
 * protocol is in include/parley/ctl.h) and checks configuration files.
 *
 * A command-line tool, so plain blocking code: one HTTP/1.1 request per
 * connection, every wait bounded by poll(2), every answer by MAX_ANSWER.
 * Only the streaming commands (session log --follow, chat) and drain wait
 * without an overall bound, and they give up when the daemon stays out of
 * reach for DOWN_MS.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <ctype.h>
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/ctl.h"
#include "parley/sse.h"
#include "parley/util.h"
#include "ctl_audit.h"
#include "ctl_knowledge.h"
#include "parleyctl.h"

#define CONNECT_MS	5000	/* connect(2) retries while the backlog is full */
#define ANSWER_MS	30000	/* a whole answer, head and body */
#define DOWN_MS		30000	/* follow and chat: out of reach this long */
#define EOF_WAIT_MS	120000	/* chat: the last turn after stdin's EOF */
#define DRAIN_GRACE_MS	15000	/* drain: past the daemon's own timeout */
#define MAX_HEAD	65536
#define MAX_ANSWER	(64u << 20)
#define MAX_EVENT	(16u << 20)	/* one SSE event */
#define LOG_PAGE	500

enum { HC_OK, HC_CONNECT, HC_IO };

/* An event stream that survives restarts of the daemon. */
struct follow {
	const char	*sid;
	uint64_t	 last;		/* highest seq handed on */
	struct hc	 h;		/* h.fd is -1 while there is no stream */
	struct sse_parser *parser;
	uint64_t	 down_since;	/* 0 while the daemon answers */
	uint64_t	 retry_at;
	unsigned	 backoff;
	/* seq is 0 for events that are not logged. */
	void		(*on_event)(void *, cJSON *, const char *data,
			    size_t len, uint64_t seq);
	void		*arg;
};

struct line {
	char		*text;
	TAILQ_ENTRY(line) entry;
};
TAILQ_HEAD(lineq, line);

struct approval {
	char		*call;		/* toolCallId */
	char		*tool;
	TAILQ_ENTRY(approval) entry;
};

struct chat {
	const char	*sid;
	struct follow	 f;
	int		 tty;
	int		 want_stream;	/* the session exists */
	int		 col;		/* output is mid-line */
	struct turn {
		uint64_t seq;		/* of the message (user_message); 0
					   until seen, when a follower host
					   forwarded it (202, no seq) */
		unsigned n;		/* its id is ctl-IDBASE-n */
		int	 started;	/* an event of its turn was seen */
	}		*turns;		/* messages sent whose turn runs */
	size_t		 nturns;
	size_t		 capturns;
	unsigned	 nsent;
	unsigned	 refused;	/* messages the daemon refused */
	char		 idbase[17];
	TAILQ_HEAD(, approval) approvals;
};

struct cmd {
	const char	*name;
	const char	*args;
	int		(*fn)(int, char **);
};

static const char	*sockpath;
int			 jflag;
static char		 hc_err[512];
static volatile sig_atomic_t interrupted;

static int	usage(void);

/* --- small helpers --- */

static void
buf_add(struct buf *b, const void *data, size_t n)
{
	if (util_append(&b->p, &b->len, &b->cap, data, n) == -1)
		errx(EXIT_ERR, "out of memory");
}

static void
buf_drop(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
	} else {
		memmove(b->p, b->p + n, b->len - n);
		b->len -= n;
	}
	if (b->p != NULL)
		b->p[b->len] = '\0';
}

static void
buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static char *
xstrdup(const char *s)
{
	char *p;

	if ((p = strdup(s)) == NULL)
		errx(EXIT_ERR, "out of memory");
	return p;
}

static void
on_sigint(int sig)
{
	interrupted = 1;
}

/* SIGINT ends a stream cleanly: poll(2) returns EINTR and the loop exits 0. */
static void
catch_sigint(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

void
flush_stdout(void)
{
	if (fflush(stdout) == EOF || ferror(stdout))
		err(EXIT_ERR, "stdout");
}

/* Percent-encodes a session id for a path: it may hold any byte. */
char *
path_enc(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out, *o;

	if ((out = malloc(strlen(s) * 3 + 1)) == NULL)
		errx(EXIT_ERR, "out of memory");
	for (o = out; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (isalnum(c) || strchr("-._~", c) != NULL)
			*o++ = (char)c;
		else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

char *
xprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		errx(EXIT_ERR, "out of memory");
	va_end(ap);
	return s;
}

/* "2d3h", "3h12m", "4m5s", "42s". */
static const char *
fmt_dur(double secs)
{
	static char out[32];
	unsigned long long s;

	if (!isfinite(secs) || secs < 0)
		return "-";
	s = (unsigned long long)secs;
	if (s >= 86400)
		snprintf(out, sizeof(out), "%llud%lluh", s / 86400,
		    s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(out, sizeof(out), "%lluh%llum", s / 3600,
		    s % 3600 / 60);
	else if (s >= 60)
		snprintf(out, sizeof(out), "%llum%llus", s / 60, s % 60);
	else
		snprintf(out, sizeof(out), "%llus", s);
	return out;
}

/*
 * DURATION as parleyd.conf(5) writes it: a whole number with ms, s, m or
 * h, seconds when bare.  -1 when malformed.
 */
static long long
parse_dur(const char *s)
{
	unsigned long long n, mul;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	if (*end == '\0' || strcmp(end, "s") == 0)
		mul = 1000;
	else if (strcmp(end, "ms") == 0)
		mul = 1;
	else if (strcmp(end, "m") == 0)
		mul = 60000;
	else if (strcmp(end, "h") == 0)
		mul = 3600000;
	else
		return -1;
	if (n > (unsigned long long)INT32_MAX * 1000 / mul)
		return -1;
	return (long long)(n * mul);
}

int
parse_seq(const char *s, uint64_t *out)
{
	char *end;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno != 0 || *end != '\0' ? -1 : 0;
}

int
opt_seq(const char *name, const char *arg, uint64_t *out)
{
	if (parse_seq(arg, out) == 0)
		return 0;
	warnx("bad --%s %s: a seq is a whole number", name, arg);
	return -1;
}

/* Numbers as the daemon sent them: whole ones without a fraction. */
static const char *
fmt_num(const cJSON *v)
{
	static char out[8][64];	/* a ring: several per printf(3) */
	static int i;
	double d;

	i = (i + 1) % 8;
	if (!cJSON_IsNumber(v))
		return "-";
	d = v->valuedouble;
	if (d == floor(d) && fabs(d) < 1e15)
		snprintf(out[i], sizeof(out[i]), "%.0f", d);
	else
		snprintf(out[i], sizeof(out[i]), "%g", d);
	return out[i];
}

const cJSON *
jget(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

const char *
jstr(const cJSON *o, const char *k)
{
	const char *s = cJSON_GetStringValue(jget(o, k));

	return s != NULL ? s : "-";
}

const char *
jnum(const cJSON *o, const char *k)
{
	return fmt_num(jget(o, k));
}

static double
jdbl(const cJSON *o, const char *k)
{
	const cJSON *v = jget(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static uint64_t
jseq(const cJSON *o)
{
	const cJSON *v = jget(o, "seq");

	if (!cJSON_IsNumber(v) || v->valuedouble < 1 ||
	    v->valuedouble > 9007199254740992.0)
		return 0;
	return (uint64_t)v->valuedouble;
}

/* --- tables --- */

void
tbl_init(struct table *t, size_t ncol)
{
	memset(t, 0, sizeof(*t));
	t->ncol = ncol;
}

void
tbl_add(struct table *t, const char *s)
{
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		char **p;

		if ((p = reallocarray(t->cell, ncap, sizeof(*p))) == NULL)
			errx(EXIT_ERR, "out of memory");
		t->cell = p;
		t->cap = ncap;
	}
	t->cell[t->n++] = xstrdup(s);
}

/* Columns padded to their widest cell, two spaces apart. */
void
tbl_print(struct table *t)
{
	size_t *w, i, c;

	if ((w = calloc(t->ncol, sizeof(*w))) == NULL)
		errx(EXIT_ERR, "out of memory");
	for (i = 0; i < t->n; i++)
		if (strlen(t->cell[i]) > w[i % t->ncol])
			w[i % t->ncol] = strlen(t->cell[i]);
	for (i = 0; i < t->n; i++) {
		c = i % t->ncol;
		if (c == t->ncol - 1)
			printf("%s\n", t->cell[i]);
		else
			printf("%-*s  ", (int)w[c], t->cell[i]);
	}
	for (i = 0; i < t->n; i++)
		free(t->cell[i]);
	free(t->cell);
	free(w);
}

/* --- HTTP/1.1 over the control socket --- */

/* 1 ready, 0 past deadline (0 = none), -1 error or interrupted. */
static int
wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd pfd;
	uint64_t now;
	int n, tmo;

	for (;;) {
		if (interrupted) {
			errno = EINTR;
			return -1;
		}
		tmo = -1;
		if (deadline != 0) {
			now = util_mono_ms();
			if (now >= deadline)
				return 0;
			tmo = (int)(deadline - now);
		}
		pfd.fd = fd;
		pfd.events = events;
		pfd.revents = 0;
		if ((n = poll(&pfd, 1, tmo)) > 0)
			return 1;
		if (n == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

static int
ctl_connect(void)
{
	struct sockaddr_un sun;
	uint64_t deadline = util_mono_ms() + CONNECT_MS;
	int fd, save;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s",
	    sockpath) >= sizeof(sun.sun_path)) {
		snprintf(hc_err, sizeof(hc_err), "cannot connect to %s: "
		    "path too long", sockpath);
		return -1;
	}
	for (;;) {
		/* Non-blocking: a full backlog answers EAGAIN instead of
		 * blocking connect(2) for as long as the daemon hangs. */
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0)) == -1) {
			snprintf(hc_err, sizeof(hc_err), "socket: %s",
			    strerror(errno));
			return -1;
		}
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			break;
		save = errno;
		close(fd);
		/* A full backlog is a busy daemon, not a missing one. */
		if ((save == EAGAIN || save == EINTR) && !interrupted &&
		    util_mono_ms() < deadline) {
			usleep(20000);
			continue;
		}
		snprintf(hc_err, sizeof(hc_err), "cannot connect to %s: %s",
		    sockpath, strerror(save));
		return -1;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == -1) {
		snprintf(hc_err, sizeof(hc_err), "fcntl: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

void
hc_close(struct hc *h)
{
	if (h->fd != -1)
		close(h->fd);
	h->fd = -1;
	buf_free(&h->raw);
	buf_free(&h->body);
}

/* Moves what raw holds of the body into body, undoing chunked coding. */
static int
hc_decode(struct hc *h)
{
	char *nl, *end;
	size_t n, off = 0;

	if (!h->chunked) {
		n = h->raw.len;
		if (h->clen >= 0 && n > (uint64_t)h->clen - h->got)
			n = (uint64_t)h->clen - h->got;
		buf_add(&h->body, h->raw.p, n);
		h->got += n;
		buf_drop(&h->raw, h->raw.len);
		if (h->clen >= 0 && h->got == (uint64_t)h->clen)
			h->done = 1;
		return 0;
	}
	while (!h->done && off < h->raw.len) {
		switch (h->cstate) {
		case CH_SIZE:
		case CH_TRAILER:
			nl = memchr(h->raw.p + off, '\n', h->raw.len - off);
			if (nl == NULL) {
				if (h->raw.len - off > 4096)
					goto bad;
				goto out;
			}
			*nl = '\0';
			if (h->cstate == CH_TRAILER) {
				if (nl == h->raw.p + off ||
				    (nl == h->raw.p + off + 1 && nl[-1] == '\r'))
					h->done = 1;
			} else {
				errno = 0;
				h->cleft = strtoull(h->raw.p + off, &end, 16);
				if (end == h->raw.p + off || errno != 0 ||
				    h->cleft > MAX_ANSWER)
					goto bad;
				h->cstate = h->cleft == 0 ? CH_TRAILER :
				    CH_DATA;
			}
			off = nl - h->raw.p + 1;
			break;
		case CH_DATA:
			n = h->raw.len - off;
			if (n > h->cleft)
				n = h->cleft;
			buf_add(&h->body, h->raw.p + off, n);
			h->got += n;
			h->cleft -= n;
			off += n;
			if (h->cleft == 0)
				h->cstate = CH_DATA_END;
			break;
		case CH_DATA_END:
			if (h->raw.p[off] == '\r')
				off++;
			else if (h->raw.p[off] == '\n') {
				off++;
				h->cstate = CH_SIZE;
			} else
				goto bad;
			break;
		}
	}
out:
	buf_drop(&h->raw, off);
	return 0;
bad:
	snprintf(hc_err, sizeof(hc_err), "bad chunked coding in the answer");
	return -1;
}

/* One read: 1 progress, 0 the body is complete, -1 error or timeout. */
static int
hc_read(struct hc *h, uint64_t deadline)
{
	char tmp[65536];
	ssize_t n;
	int r;

	if (h->done)
		return 0;
	if ((r = wait_fd(h->fd, POLLIN, deadline)) <= 0) {
		if (r == 0)
			snprintf(hc_err, sizeof(hc_err), "no answer from "
			    "parleyd within %d s", ANSWER_MS / 1000);
		else
			snprintf(hc_err, sizeof(hc_err), "%s",
			    strerror(errno));
		return -1;
	}
	if ((n = read(h->fd, tmp, sizeof(tmp))) == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return 1;
		snprintf(hc_err, sizeof(hc_err), "read: %s", strerror(errno));
		return -1;
	}
	if (n == 0) {
		if (!h->chunked && h->clen < 0) {
			h->done = 1;
			return 0;
		}
		snprintf(hc_err, sizeof(hc_err), "parleyd closed the "
		    "connection in the middle of its answer");
		return -1;
	}
	buf_add(&h->raw, tmp, (size_t)n);
	if (hc_decode(h) == -1)
		return -1;
	return h->done ? 0 : 1;
}

static int
hc_parse_head(struct hc *h, size_t headlen)
{
	char *line, *next, *v;
	int first = 1;

	h->clen = -1;
	for (line = h->raw.p; line < h->raw.p + headlen; line = next) {
		if ((next = strchr(line, '\n')) == NULL)
			break;
		*next++ = '\0';
		line[strcspn(line, "\r")] = '\0';
		if (first) {
			first = 0;
			if (strncmp(line, "HTTP/1.", 7) != 0 ||
			    sscanf(line + 8, " %3d", &h->status) != 1 ||
			    h->status < 100 || h->status > 999)
				return -1;
			continue;
		}
		if ((v = strchr(line, ':')) == NULL)
			continue;
		*v++ = '\0';
		v += strspn(v, " \t");
		if (strcasecmp(line, "Content-Length") == 0) {
			char *end;

			errno = 0;
			h->clen = strtoll(v, &end, 10);
			if (errno != 0 || end == v || h->clen < 0)
				return -1;
		} else if (strcasecmp(line, "Transfer-Encoding") == 0 &&
		    strcasestr(v, "chunked") != NULL)
			h->chunked = 1;
	}
	if (first)
		return -1;
	if (h->chunked)
		h->clen = -1;
	if (h->status < 200 || h->status == 204 || h->status == 304)
		h->clen = 0;
	if (h->clen > (long long)MAX_ANSWER) {
		snprintf(hc_err, sizeof(hc_err), "answer too large (%lld "
		    "bytes)", h->clen);
		return -1;
	}
	return 0;
}

/*
 * Connects, sends the request, reads the answer's head.  HC_CONNECT when
 * the daemon cannot be reached, HC_IO when it did not answer properly;
 * hc_err says why.  The body is left for hc_body() or hc_read().
 */
static int
hc_open(struct hc *h, const char *method, const char *path,
    const char *body, const char *accept)
{
	struct buf req = { NULL, 0, 0 };
	uint64_t deadline;
	char *hdr, *end;
	size_t off;
	ssize_t n;
	int r = 1;

	memset(h, 0, sizeof(*h));
	if ((h->fd = ctl_connect()) == -1)
		return HC_CONNECT;
	deadline = util_mono_ms() + ANSWER_MS;
	hdr = xprintf("%s %s HTTP/1.1\r\nHost: parleyd\r\n"
	    "User-Agent: parleyctl/%s\r\nAccept: %s\r\nConnection: close\r\n",
	    method, path, PACKAGE_VERSION, accept ? accept :
	    "application/json");
	buf_add(&req, hdr, strlen(hdr));
	free(hdr);
	if (body != NULL || strcmp(method, "POST") == 0) {
		hdr = xprintf("Content-Type: application/json\r\n"
		    "Content-Length: %zu\r\n", body ? strlen(body) : 0);
		buf_add(&req, hdr, strlen(hdr));
		free(hdr);
	}
	buf_add(&req, "\r\n", 2);
	if (body != NULL)
		buf_add(&req, body, strlen(body));
	for (off = 0; off < req.len; ) {
		if ((r = wait_fd(h->fd, POLLOUT, deadline)) <= 0)
			goto io;
		if ((n = write(h->fd, req.p + off, req.len - off)) == -1) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			goto io;
		}
		off += (size_t)n;
	}
	buf_free(&req);
	for (;;) {
		char tmp[4096];

		if ((end = h->raw.p ? strstr(h->raw.p, "\r\n\r\n") : NULL) !=
		    NULL)
			break;
		if (h->raw.len > MAX_HEAD) {
			snprintf(hc_err, sizeof(hc_err), "answer head too large");
			return HC_IO;
		}
		if ((r = wait_fd(h->fd, POLLIN, deadline)) <= 0)
			goto io;
		if ((n = read(h->fd, tmp, sizeof(tmp))) == -1) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			goto io;
		}
		if (n == 0) {
			snprintf(hc_err, sizeof(hc_err), "parleyd closed the "
			    "connection without answering");
			return HC_IO;
		}
		buf_add(&h->raw, tmp, (size_t)n);
	}
	if (hc_parse_head(h, (size_t)(end - h->raw.p) + 2) == -1) {
		if (hc_err[0] == '\0')
			snprintf(hc_err, sizeof(hc_err), "malformed answer");
		return HC_IO;
	}
	buf_drop(&h->raw, (size_t)(end - h->raw.p) + 4);
	if (h->clen == 0)
		h->done = 1;
	if (hc_decode(h) == -1)
		return HC_IO;
	return HC_OK;
io:
	buf_free(&req);
	if (r == 0)
		snprintf(hc_err, sizeof(hc_err), "no answer from parleyd "
		    "within %d s", ANSWER_MS / 1000);
	else
		snprintf(hc_err, sizeof(hc_err), "%s: %s", sockpath,
		    strerror(errno));
	return HC_IO;
}

/* Reads the rest of the body; NUL-terminated in h->body. */
static int
hc_body(struct hc *h)
{
	uint64_t deadline = util_mono_ms() + ANSWER_MS;
	int r;

	while ((r = hc_read(h, deadline)) == 1)
		if (h->body.len > MAX_ANSWER) {
			snprintf(hc_err, sizeof(hc_err), "answer larger than "
			    "%u MiB", MAX_ANSWER >> 20);
			return -1;
		}
	if (r == -1)
		return -1;
	buf_add(&h->body, "", 0);
	return 0;
}

static void __attribute__((noreturn))
unavailable(void)
{
	errx(EXIT_UNAVAIL, "%s; check that parleyd runs, or name its socket "
	    "with -s or PARLEYCTL_SOCKET", hc_err);
}

/*
 * One request and its whole answer: the status, the body in h->body.
 * Exits when the daemon cannot be reached or does not answer.
 */
int
request(struct hc *h, const char *method, const char *path,
    const char *body)
{
	int r;

	hc_err[0] = '\0';
	if ((r = hc_open(h, method, path, body, NULL)) == HC_CONNECT)
		unavailable();
	if (r != HC_OK || hc_body(h) == -1)
		errx(EXIT_UNAVAIL, "%s %s: %s", method, path, hc_err);
	return h->status;
}

cJSON *
answer_json(struct hc *h)
{
	return cJSON_ParseWithLength(h->body.p ? h->body.p : "", h->body.len);
}

/*
 * Says what went wrong from an error answer ({"error":{"code","message"}})
 * and returns the exit status for it.
 */
static int
answer_error(struct hc *h, const char *what, const char *hint)
{
	cJSON *o = answer_json(h), *e;
	const char *code = NULL, *msg = NULL;

	e = cJSON_GetObjectItemCaseSensitive(o, "error");
	code = cJSON_GetStringValue(jget(e, "code"));
	msg = cJSON_GetStringValue(jget(e, "message"));
	if (msg != NULL)
		warnx("%s: %s%s%s%s", what, msg, code ? " (" : "",
		    code ? code : "", code ? ")" : "");
	else
		warnx("%s: parleyd answered %d%s%.*s", what, h->status,
		    h->body.len ? ": " : "", (int)(h->body.len > 200 ? 200 :
		    h->body.len), h->body.p ? h->body.p : "");
	if (hint != NULL)
		fprintf(stderr, "parleyctl: %s\n", hint);
	cJSON_Delete(o);
	return h->status == 404 ? EXIT_NOTFOUND : EXIT_ERR;
}

/* Prints the answer as the daemon sent it (--json). */
static void
print_raw(struct hc *h)
{
	fwrite(h->body.p, 1, h->body.len, stdout);
	if (h->body.len == 0 || h->body.p[h->body.len - 1] != '\n')
		putchar('\n');
}

/* GET a control endpoint's JSON; exits on any failure. */
static cJSON *
get_json(struct hc *h, const char *path, const char *what)
{
	cJSON *o;

	if (request(h, "GET", path, NULL) / 100 != 2)
		exit(answer_error(h, what, NULL));
	if ((o = answer_json(h)) == NULL)
		errx(EXIT_ERR, "%s: the answer is not JSON", what);
	return o;
}

/* --- command-line options --- */

static const struct option json_opts[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* Parses only --json; returns optind, or -1 after a usage message. */
static int
opts_json(int argc, char **argv, const char *cmd)
{
	int ch;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "jh", json_opts, NULL)) != -1)
		switch (ch) {
		case 'j':
			jflag = 1;
			break;
		default:
			usage_of(cmd);
			return -1;
		}
	return optind;
}

/* --json and exactly nargs arguments; returns optind, or -1 after usage. */
static int
cmd_args(int argc, char **argv, const char *cmd, int nargs)
{
	int i;

	if ((i = opts_json(argc, argv, cmd)) < 0)
		return -1;
	if (argc - i != nargs) {
		usage_of(cmd);
		return -1;
	}
	return i;
}

/* --- status, workers, sessions --- */

static int
cmd_status(int argc, char **argv)
{
	struct hc h;
	cJSON *o;
	const cJSON *w, *st;
	int i;

	if ((i = cmd_args(argc, argv, "status", 0)) < 0)
		return EXIT_USAGE;
	o = get_json(&h, CTL_PREFIX "status", "status");
	if (jflag)
		print_raw(&h);
	else {
		w = jget(o, "workers");
		st = jget(o, "store");
		printf("%s %s (protocol %s, control %s), pid %s, host %s\n",
		    jstr(o, "name"), jstr(o, "version"), jnum(o, "protocol"),
		    jnum(o, "control"), jnum(o, "pid"), jstr(o, "hostId"));
		printf("%-12s %s\n", "state", jstr(o, "state"));
		printf("%-12s %s\n", "uptime",
		    fmt_dur(jdbl(o, "uptimeSeconds")));
		printf("%-12s %s\n", "config", cJSON_IsString(jget(o,
		    "config")) ? jstr(o, "config") : "(built-in defaults)");
		printf("%-12s %s\n", "log level", jstr(o, "logLevel"));
		printf("%-12s %s ready of %s", "workers", jnum(w, "ready"),
		    jnum(w, "total"));
		printf(", %s draining, %s restarts\n", jnum(w, "draining"),
		    jnum(o, "workerRestarts"));
		printf("%-12s %s\n", "connections", jnum(o, "connections"));
		printf("%-12s %s", "sessions", jnum(o, "sessions"));
		printf(", %s running\n", jnum(o, "running"));
		printf("%-12s %s, %s\n", "store", jstr(st, "type"),
		    jstr(st, "status"));
		printf("%-12s %s appended\n", "events",
		    jnum(o, "eventsAppended"));
	}
	cJSON_Delete(o);
	hc_close(&h);
	return 0;
}

static int
cmd_workers(int argc, char **argv)
{
	struct table t;
	struct hc h;
	const cJSON *w;
	cJSON *o;
	int i;

	if ((i = cmd_args(argc, argv, "workers", 0)) < 0)
		return EXIT_USAGE;
	o = get_json(&h, CTL_PREFIX "workers", "workers");
	if (jflag)
		print_raw(&h);
	else {
		static const char *head[] = { "SLOT", "PID", "STATE",
		    "UPTIME", "SESSIONS", "CONNS", "RUNNING", "RESTARTS",
		    "EVENTS", "STORE" };

		tbl_init(&t, 10);
		for (i = 0; i < 10; i++)
			tbl_add(&t, head[i]);
		cJSON_ArrayForEach(w, jget(o, "workers")) {
			tbl_add(&t, jnum(w, "slot"));
			tbl_add(&t, jnum(w, "pid"));
			tbl_add(&t, jstr(w, "state"));
			tbl_add(&t, fmt_dur(jdbl(w, "uptimeSeconds")));
			tbl_add(&t, jnum(w, "sessions"));
			tbl_add(&t, jnum(w, "connections"));
			tbl_add(&t, jnum(w, "running"));
			tbl_add(&t, jnum(w, "restarts"));
			tbl_add(&t, jnum(w, "eventsAppended"));
			tbl_add(&t, cJSON_IsTrue(jget(w, "storeDown")) ?
			    "down" : "ok");
		}
		tbl_print(&t);
	}
	cJSON_Delete(o);
	hc_close(&h);
	return 0;
}

static int
cmd_sessions(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "state", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 }
	};
	const char *state = NULL, *p;
	struct table t;
	struct hc h;
	const cJSON *s;
	cJSON *o;
	char *path;
	int ch, i;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "j", lo, NULL)) != -1)
		switch (ch) {
		case 'j':
			jflag = 1;
			break;
		case 'S':
			state = optarg;
			break;
		default:
			return usage_of("sessions");
		}
	if (optind != argc)
		return usage_of("sessions");
	if (state != NULL) {
		for (p = state; *p != '\0'; p++)
			if (!islower((unsigned char)*p))
				break;
		if (*p != '\0' || *state == '\0') {
			warnx("bad --state %s; use a session status such as "
			    "running, idle or following", state);
			return EXIT_USAGE;
		}
	}
	path = xprintf("%ssessions%s%s", CTL_PREFIX, state ? "?state=" : "",
	    state ? state : "");
	o = get_json(&h, path, "sessions");
	free(path);
	if (jflag)
		print_raw(&h);
	else {
		static const char *head[] = { "SESSION", "STATUS", "WORKER",
		    "PID", "CONNS", "LASTSEQ", "PAUSED" };

		tbl_init(&t, 7);
		for (i = 0; i < 7; i++)
			tbl_add(&t, head[i]);
		cJSON_ArrayForEach(s, jget(o, "sessions")) {
			tbl_add(&t, jstr(s, "sessionId"));
			tbl_add(&t, cJSON_IsTrue(jget(s, "follower")) ?
			    "following" : jstr(s, "status"));
			tbl_add(&t, jnum(s, "worker"));
			tbl_add(&t, jnum(s, "pid"));
			tbl_add(&t, jnum(s, "connections"));
			tbl_add(&t, jnum(s, "lastSeq"));
			tbl_add(&t, cJSON_IsTrue(jget(s, "paused")) ? "yes" :
			    "no");
		}
		tbl_print(&t);
		if (cJSON_IsTrue(jget(o, "truncated")))
			warnx("the list is truncated; narrow it with --state");
	}
	cJSON_Delete(o);
	hc_close(&h);
	return 0;
}

/* --- session show, kill, pause, resume --- */

/* One value on one line: objects as k=v, arrays comma-separated. */
static void
print_value(const cJSON *v, int depth)
{
	const cJSON *e;
	const char *id;
	char *s;
	int first = 1;

	if (cJSON_IsString(v))
		fputs(v->valuestring, stdout);
	else if (cJSON_IsNumber(v))
		fputs(fmt_num(v), stdout);
	else if (cJSON_IsBool(v))
		fputs(cJSON_IsTrue(v) ? "yes" : "no", stdout);
	else if (cJSON_IsNull(v))
		fputs("-", stdout);
	else if (depth == 0 && cJSON_IsObject(v)) {
		cJSON_ArrayForEach(e, v) {
			printf("%s%s=", first ? "" : " ", e->string);
			print_value(e, 1);
			first = 0;
		}
		if (first)
			fputs("-", stdout);
	} else if (depth == 0 && cJSON_IsArray(v)) {
		cJSON_ArrayForEach(e, v) {
			fputs(first ? "" : ", ", stdout);
			/* Agents by their id and role, the rest as JSON. */
			if ((id = cJSON_GetStringValue(jget(e, "agentId"))) !=
			    NULL)
				printf("%s (%s)", id, jstr(e, "role"));
			else
				print_value(e, 1);
			first = 0;
		}
		if (first)
			fputs("-", stdout);
	} else if ((s = cJSON_PrintUnformatted(v)) != NULL) {
		fputs(s, stdout);
		cJSON_free(s);
	}
}

static char *
session_path(const char *sid, const char *sub)
{
	char *enc = path_enc(sid), *p;

	p = xprintf("/sessions/%s%s", enc, sub);
	free(enc);
	return p;
}

int
session_missing(struct hc *h, const char *sid)
{
	char *what = xprintf("session %s", sid);
	int rc;

	rc = answer_error(h, what, h->status == 404 ?
	    "list the sessions with: parleyctl sessions" : NULL);
	free(what);
	return rc;
}

int
session_get(struct hc *h, char *path, const char *sid)
{
	int rc;

	request(h, "GET", path, NULL);
	free(path);
	if (h->status == 200)
		return 0;
	rc = session_missing(h, sid);
	hc_close(h);
	return rc;
}

static int
cmd_show(int argc, char **argv)
{
	struct hc h;
	const cJSON *e;
	cJSON *o;
	int i, rc, w = 0;

	if ((i = cmd_args(argc, argv, "session show", 1)) < 0)
		return EXIT_USAGE;
	if ((rc = session_get(&h, session_path(argv[i], ""), argv[i])) != 0)
		return rc;
	if (jflag)
		print_raw(&h);
	else if ((o = answer_json(&h)) == NULL)
		errx(EXIT_ERR, "session %s: the answer is not JSON", argv[i]);
	else {
		cJSON_ArrayForEach(e, o)
			if ((int)strlen(e->string) > w)
				w = (int)strlen(e->string);
		cJSON_ArrayForEach(e, o) {
			printf("%-*s  ", w, e->string);
			print_value(e, 0);
			putchar('\n');
		}
		cJSON_Delete(o);
	}
	hc_close(&h);
	return 0;
}

static int
cmd_kill(int argc, char **argv)
{
	struct hc h;
	cJSON *o;
	char *path;
	int i;

	if ((i = cmd_args(argc, argv, "session kill", 1)) < 0)
		return EXIT_USAGE;
	path = session_path(argv[i], "");
	request(&h, "DELETE", path, NULL);
	free(path);
	if (h.status / 100 != 2) {
		i = session_missing(&h, argv[i]);
		hc_close(&h);
		return i;
	}
	if (jflag && h.body.len > 0)
		print_raw(&h);
	else if (!jflag) {
		o = answer_json(&h);
		printf("session %s: %s\n", argv[i], cJSON_IsString(jget(o,
		    "status")) ? jstr(o, "status") : "terminated");
		cJSON_Delete(o);
	}
	hc_close(&h);
	return 0;
}

/*
 * POSTs one client event; 0 or the exit status of the error.  *handed is
 * set when the host only handed it to the session's owner (202, no seq).
 */
static int
post_event(const char *sid, cJSON *ev, int *handed)
{
	struct hc h;
	cJSON *o;
	char *path, *body;
	int rc = 0;

	path = session_path(sid, "/messages");
	if ((body = cJSON_PrintUnformatted(ev)) == NULL)
		errx(EXIT_ERR, "out of memory");
	request(&h, "POST", path, body);
	free(body);
	free(path);
	*handed = 0;
	if (h.status / 100 != 2)
		rc = session_missing(&h, sid);
	else {
		if (h.status == 202) {
			o = answer_json(&h);
			*handed = jget(o, "seq") == NULL;
			cJSON_Delete(o);
		}
		if (jflag)
			print_raw(&h);
	}
	hc_close(&h);
	return rc;
}

static cJSON *
client_event(const char *type, const char *sid)
{
	cJSON *o;

	if ((o = cJSON_CreateObject()) == NULL ||
	    cJSON_AddNumberToObject(o, "v", 1) == NULL ||
	    cJSON_AddStringToObject(o, "type", type) == NULL ||
	    cJSON_AddStringToObject(o, "sessionId", sid) == NULL)
		errx(EXIT_ERR, "out of memory");
	return o;
}

static int
pause_resume(int argc, char **argv, const char *cmd, const char *type,
    const char *done)
{
	struct hc h;
	cJSON *ev;
	int i, rc, handed;

	if ((i = cmd_args(argc, argv, cmd, 1)) < 0)
		return EXIT_USAGE;
	/* POST .../messages would create a session that does not exist. */
	if ((rc = session_get(&h, session_path(argv[i], ""), argv[i])) != 0)
		return rc;
	hc_close(&h);
	ev = client_event(type, argv[i]);
	rc = post_event(argv[i], ev, &handed);
	cJSON_Delete(ev);
	if (rc == 0 && !jflag)
		printf("session %s: %s%s\n", argv[i], handed ? cmd +
		    strlen("session ") : done, handed ? " handed to the host "
		    "that owns it" : "");
	return rc;
}

static int
cmd_pause(int argc, char **argv)
{
	return pause_resume(argc, argv, "session pause", "pause", "paused");
}

static int
cmd_resume(int argc, char **argv)
{
	return pause_resume(argc, argv, "session resume", "resume_session",
	    "resumed");
}

/* --- following a session's events --- */

static int
follow_cb(void *arg, const char *type, const char *data, size_t len)
{
	struct follow *f = arg;
	cJSON *ev;
	uint64_t seq;

	if ((ev = cJSON_ParseWithLength(data, len)) == NULL)
		return 0;	/* not an event of ours: skip it */
	seq = jseq(ev);
	if (seq != 0) {
		/* A replay after a reconnect starts after f->last; never
		 * hand on an event twice. */
		if (seq <= f->last) {
			cJSON_Delete(ev);
			return 0;
		}
		f->last = seq;
	}
	f->on_event(f->arg, ev, data, len, seq);
	cJSON_Delete(ev);
	return 0;
}

static void
follow_lost(struct follow *f)
{
	uint64_t now = util_mono_ms();

	hc_close(&f->h);
	sse_parser_free(f->parser);
	f->parser = NULL;
	if (f->down_since == 0) {
		f->down_since = now;
		f->backoff = 0;
	}
	f->backoff = f->backoff == 0 ? 100 : f->backoff * 2;
	if (f->backoff > 2000)
		f->backoff = 2000;
	f->retry_at = now + f->backoff;
}

/* Gives up, exit 69, once the daemon has been out of reach for DOWN_MS. */
static void
follow_check_down(struct follow *f)
{
	if (f->down_since != 0 && util_mono_ms() - f->down_since > DOWN_MS)
		errx(EXIT_UNAVAIL, "%s; gave up after %d s; check that "
		    "parleyd runs", hc_err[0] ? hc_err : "parleyd is out of "
		    "reach", DOWN_MS / 1000);
}

/* Opens the stream after f->last.  Exits on an answer that is final. */
static void
follow_open(struct follow *f)
{
	char *path, *sub;
	int r, rc;

	sub = xprintf("/events?lastSeq=%" PRIu64, f->last);
	path = session_path(f->sid, sub);
	free(sub);
	hc_err[0] = '\0';
	r = hc_open(&f->h, "GET", path, NULL, "text/event-stream");
	free(path);
	if (r == HC_OK && f->h.status == 200) {
		if ((f->parser = sse_parser_new(MAX_EVENT, follow_cb, f)) ==
		    NULL)
			errx(EXIT_ERR, "out of memory");
		f->down_since = 0;
		f->backoff = 0;
		return;
	}
	if (r == HC_OK && f->h.status / 100 == 4) {
		if (hc_body(&f->h) == -1)
			errx(EXIT_UNAVAIL, "session %s: %s", f->sid, hc_err);
		rc = session_missing(&f->h, f->sid);
		hc_close(&f->h);
		exit(rc);
	}
	/* Not reachable, or busy (5xx) while it starts or restarts. */
	if (r == HC_OK)
		snprintf(hc_err, sizeof(hc_err), "session %s: parleyd "
		    "answered %d", f->sid, f->h.status);
	follow_lost(f);
	follow_check_down(f);
}

/* Reads what the stream has; called when its socket is readable. */
static void
follow_read(struct follow *f)
{
	int r;

	r = hc_read(&f->h, util_mono_ms() + 1);
	if (f->h.body.len > 0) {
		if (sse_parser_feed(f->parser, f->h.body.p, f->h.body.len) ==
		    -1) {
			errx(EXIT_ERR, "session %s: an event larger than %u "
			    "MiB; read it with GET /sessions/%s/log", f->sid,
			    MAX_EVENT >> 20, f->sid);
		}
		buf_drop(&f->h.body, f->h.body.len);
	}
	if (r <= 0 && !interrupted) {
		if (hc_err[0] == '\0')
			snprintf(hc_err, sizeof(hc_err), "the event stream "
			    "ended");
		follow_lost(f);
	}
}

/* The poll(2) timeout until the next reconnect, given a bound in ms. */
static int
follow_timeout(struct follow *f, int bound)
{
	uint64_t now = util_mono_ms();

	if (f->h.fd != -1 || f->retry_at <= now)
		return f->h.fd != -1 ? bound : 0;
	if (f->retry_at - now < (uint64_t)bound)
		return (int)(f->retry_at - now);
	return bound;
}

static void
follow_init(struct follow *f, const char *sid, uint64_t last)
{
	memset(f, 0, sizeof(*f));
	f->sid = sid;
	f->last = last;
	f->h.fd = -1;
}

static void
follow_free(struct follow *f)
{
	hc_close(&f->h);
	sse_parser_free(f->parser);
	f->parser = NULL;
}

/* --- session log --- */

static void
log_event(void *arg, cJSON *ev, const char *data, size_t len, uint64_t seq)
{
	const char *code;

	if (seq != 0) {
		fwrite(data, 1, len, stdout);
		putchar('\n');
		flush_stdout();
		return;
	}
	code = cJSON_GetStringValue(jget(ev, "code"));
	if (code != NULL && strcmp(jstr(ev, "type"), "error") == 0)
		warnx("%s: %s", code, jstr(ev, "message"));
}

/*
 * Prints each element of a JSON array on its own line as the daemon sent
 * it, byte for byte; returns how many, and the last seq in *last.
 */
static int
print_page(const char *s, size_t len, uint64_t *last, int *n)
{
	const char *p = s, *end = s + len, *start;
	int depth, instr, esc;
	cJSON *ev;
	uint64_t seq;

	*n = 0;
	while (p < end && isspace((unsigned char)*p))
		p++;
	if (p == end || *p++ != '[')
		return -1;
	for (;;) {
		while (p < end && (isspace((unsigned char)*p) || *p == ','))
			p++;
		if (p == end)
			return -1;
		if (*p == ']')
			return 0;
		start = p;
		depth = instr = esc = 0;
		for (; p < end; p++) {
			if (instr) {
				if (esc)
					esc = 0;
				else if (*p == '\\')
					esc = 1;
				else if (*p == '"')
					instr = 0;
			} else if (*p == '"')
				instr = 1;
			else if (*p == '{' || *p == '[')
				depth++;
			else if (*p == '}' || *p == ']') {
				if (depth == 0)
					break;
				if (--depth == 0) {
					p++;
					break;
				}
			} else if (*p == ',' && depth == 0)
				break;
		}
		if ((ev = cJSON_ParseWithLength(start, p - start)) == NULL)
			return -1;
		seq = jseq(ev);
		cJSON_Delete(ev);
		if (seq == 0 || seq <= *last)
			continue;
		*last = seq;
		fwrite(start, 1, p - start, stdout);
		putchar('\n');
		(*n)++;
	}
}

static int
cmd_log(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "from", required_argument, NULL, 'F' },
		{ "follow", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 }
	};
	struct follow f;
	struct pollfd pfd;
	struct hc h;
	uint64_t last = 0;
	const char *sid;
	char *path, *sub;
	int ch, follow = 0, n, rc;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "f", lo, NULL)) != -1)
		switch (ch) {
		case 'F':
			if (opt_seq("from", optarg, &last) == -1)
				return EXIT_USAGE;
			break;
		case 'f':
			follow = 1;
			break;
		default:
			return usage_of("session log");
		}
	if (argc - optind != 1)
		return usage_of("session log");
	sid = argv[optind];
	for (;;) {
		sub = xprintf("/log?after=%" PRIu64 "&limit=%d", last,
		    LOG_PAGE);
		path = session_path(sid, sub);
		free(sub);
		if ((rc = session_get(&h, path, sid)) != 0)
			return rc;
		if (print_page(h.body.p, h.body.len, &last, &n) == -1)
			errx(EXIT_ERR, "session %s: the log page is not a "
			    "JSON array of events", sid);
		hc_close(&h);
		flush_stdout();
		if (n == 0)
			break;
	}
	if (!follow)
		return 0;
	catch_sigint();
	follow_init(&f, sid, last);
	f.on_event = log_event;
	while (!interrupted) {
		if (f.h.fd == -1) {
			if (util_mono_ms() >= f.retry_at)
				follow_open(&f);
			if (f.h.fd != -1)
				continue;
		}
		pfd.fd = f.h.fd;
		pfd.events = POLLIN;
		if (poll(&pfd, f.h.fd != -1 ? 1 : 0,
		    follow_timeout(&f, 1000)) > 0)
			follow_read(&f);
	}
	follow_free(&f);
	return 0;
}

/* --- chat --- */

static void
chat_nl(struct chat *c)
{
	if (c->col) {
		putchar('\n');
		c->col = 0;
	}
	flush_stdout();
}

static void
chat_prompt(struct chat *c)
{
	if (c->tty && c->nturns == 0 && TAILQ_EMPTY(&c->approvals)) {
		fputs("> ", stderr);
		fflush(stderr);
	}
}

static void
approval_free(struct chat *c, struct approval *a)
{
	TAILQ_REMOVE(&c->approvals, a, entry);
	free(a->call);
	free(a->tool);
	free(a);
}

/* Whether messageId belongs to the turn of the message logged at seq. */
static int
turn_of(const char *mid, uint64_t seq)
{
	char want[32];
	size_t n;

	if (mid == NULL || seq == 0)
		return 0;
	n = (size_t)snprintf(want, sizeof(want), "m-%" PRIu64, seq);
	/* A turn re-run after a crash is "m-SEQ.ATTEMPT". */
	return strncmp(mid, want, n) == 0 && (mid[n] == '\0' || mid[n] == '.');
}

/* A turn ended: forget the messages whose turn started (all: every one). */
static void
turns_end(struct chat *c, int all)
{
	size_t i, j;

	for (i = j = 0; i < c->nturns; i++)
		if (!all && !c->turns[i].started)
			c->turns[j++] = c->turns[i];
	c->nturns = j;
}

static void
chat_event(void *arg, cJSON *ev, const char *data, size_t len, uint64_t seq)
{
	struct chat *c = arg;
	struct approval *a;
	const char *type = jstr(ev, "type"), *s, *mid;
	size_t i;

	/*
	 * Queued messages run one turn after another, and each turn ends
	 * with agent_state idle after an event naming its messageId (done,
	 * or the error that failed it).
	 */
	/* Forwarded by a follower host, a message's seq is learnt here. */
	if (strcmp(type, "user_message") == 0 && seq != 0 &&
	    (s = cJSON_GetStringValue(jget(ev, "id"))) != NULL &&
	    strncmp(s, "ctl-", 4) == 0 && strncmp(s + 4, c->idbase,
	    strlen(c->idbase)) == 0 && s[4 + strlen(c->idbase)] == '-')
		for (i = 0; i < c->nturns; i++)
			if (c->turns[i].seq == 0 && c->turns[i].n ==
			    strtoul(s + 5 + strlen(c->idbase), NULL, 10))
				c->turns[i].seq = seq;
	mid = cJSON_GetStringValue(jget(ev, "messageId"));
	for (i = 0; mid != NULL && i < c->nturns; i++)
		if (turn_of(mid, c->turns[i].seq))
			c->turns[i].started = 1;
	if (strcmp(type, "token") == 0) {
		if ((s = cJSON_GetStringValue(jget(ev, "content"))) != NULL &&
		    *s != '\0') {
			fputs(s, stdout);
			c->col = s[strlen(s) - 1] != '\n';
			flush_stdout();
		}
	} else if (strcmp(type, "done") == 0) {
		chat_nl(c);
		/* Approvals die with their turn. */
		while ((a = TAILQ_FIRST(&c->approvals)) != NULL)
			approval_free(c, a);
	} else if (strcmp(type, "agent_state") == 0) {
		if (strcmp(jstr(ev, "status"), "idle") == 0) {
			chat_nl(c);
			turns_end(c, 0);
			chat_prompt(c);
		}
	} else if (strcmp(type, "error") == 0) {
		chat_nl(c);
		warnx("%s: %s", jstr(ev, "code"), jstr(ev, "message"));
	} else if (strcmp(type, "session_complete") == 0) {
		chat_nl(c);
		warnx("session %s ended (%s)", c->sid, jstr(ev, "reason"));
		turns_end(c, 1);
	} else if (strcmp(type, "tool_approve_request") == 0 && seq != 0) {
		if ((a = calloc(1, sizeof(*a))) == NULL)
			errx(EXIT_ERR, "out of memory");
		a->call = xstrdup(jstr(ev, "toolCallId"));
		a->tool = xstrdup(jstr(ev, "tool"));
		TAILQ_INSERT_TAIL(&c->approvals, a, entry);
		chat_nl(c);
		if (c->tty) {
			s = cJSON_GetStringValue(jget(ev, "summary"));
			fprintf(stderr, "%s%s%sapprove %s? [y/N/always] ",
			    s ? "(" : "", s ? s : "", s ? ") " : "", a->tool);
			fflush(stderr);
		} else
			warnx("%s asks for approval; the next line of input "
			    "answers: y, always or anything else to reject",
			    a->tool);
	} else if (strcmp(type, "audit_entry") == 0 ||
	    strcmp(type, "tool_start") == 0) {
		/* Answered here or elsewhere: no longer ours to answer. */
		s = cJSON_GetStringValue(jget(ev, "toolCallId"));
		TAILQ_FOREACH(a, &c->approvals, entry)
			if (s != NULL && strcmp(a->call, s) == 0) {
				approval_free(c, a);
				break;
			}
	}
}

/*
 * POSTs one client event of the chat, retrying while the daemon is out of
 * reach (bounded by DOWN_MS); the seq it was logged at in *seq.  Returns 0,
 * or -1 when the daemon refused it (the reason is printed).
 */
static int
chat_post(struct chat *c, cJSON *ev, uint64_t *seq)
{
	struct hc h;
	uint64_t since = 0;
	unsigned backoff = 100;
	char *path, *body;
	cJSON *o;
	int r, rc = 0;

	path = session_path(c->sid, "/messages");
	if ((body = cJSON_PrintUnformatted(ev)) == NULL)
		errx(EXIT_ERR, "out of memory");
	for (;;) {
		hc_err[0] = '\0';
		r = hc_open(&h, "POST", path, body, NULL);
		if (r == HC_OK && hc_body(&h) == -1)
			r = HC_IO;
		/* 502-504: the daemon is starting, stopping or overloaded;
		 * any other answer is the daemon's word on the message. */
		if (r == HC_OK && (h.status < 502 || h.status > 504))
			break;
		if (r == HC_OK)
			snprintf(hc_err, sizeof(hc_err), "parleyd answered %d",
			    h.status);
		hc_close(&h);
		if (interrupted)
			exit(0);
		if (since == 0)
			since = util_mono_ms();
		else if (util_mono_ms() - since > DOWN_MS)
			errx(EXIT_UNAVAIL, "%s; gave up sending after %d s; "
			    "check that parleyd runs", hc_err, DOWN_MS / 1000);
		usleep(backoff * 1000);
		if ((backoff *= 2) > 2000)
			backoff = 2000;
	}
	if (h.status / 100 == 2) {
		o = answer_json(&h);
		*seq = jseq(o);
		cJSON_Delete(o);
	} else {
		chat_nl(c);
		session_missing(&h, c->sid);
		c->refused++;
		rc = -1;
	}
	hc_close(&h);
	free(body);
	free(path);
	return rc;
}

static void
chat_send(struct chat *c, const char *text)
{
	cJSON *ev;
	char id[64];
	uint64_t seq = 0;
	size_t i;

	ev = client_event("chat", c->sid);
	/* The same id on every retry: the session applies it once. */
	snprintf(id, sizeof(id), "ctl-%s-%u", c->idbase, ++c->nsent);
	if (cJSON_AddStringToObject(ev, "id", id) == NULL ||
	    cJSON_AddStringToObject(ev, "message", text) == NULL)
		errx(EXIT_ERR, "out of memory");
	if (chat_post(c, ev, &seq) == 0) {
		c->want_stream = 1;
		for (i = 0; i < c->nturns; i++)
			if (c->turns[i].n == c->nsent)
				break;
		if (i == c->nturns) {
			if (c->nturns == c->capturns) {
				c->capturns = c->capturns ? c->capturns * 2 : 8;
				if ((c->turns = reallocarray(c->turns,
				    c->capturns, sizeof(*c->turns))) == NULL)
					errx(EXIT_ERR, "out of memory");
			}
			c->turns[c->nturns].seq = seq;
			c->turns[c->nturns].n = c->nsent;
			c->turns[c->nturns++].started = 0;
		}
	}
	cJSON_Delete(ev);
}

static void
chat_answer(struct chat *c, const char *text)
{
	struct approval *a = TAILQ_FIRST(&c->approvals);
	const char *decision = "reject";
	cJSON *ev;
	uint64_t seq;

	while (isspace((unsigned char)*text))
		text++;
	if (strcasecmp(text, "y") == 0 || strcasecmp(text, "yes") == 0)
		decision = "approve";
	else if (strcasecmp(text, "always") == 0 || strcasecmp(text, "a") == 0)
		decision = "always";
	ev = client_event("tool_approve", c->sid);
	if (cJSON_AddStringToObject(ev, "toolCallId", a->call) == NULL ||
	    cJSON_AddStringToObject(ev, "decision", decision) == NULL)
		errx(EXIT_ERR, "out of memory");
	chat_post(c, ev, &seq);
	cJSON_Delete(ev);
	approval_free(c, a);
}

/* Handles the complete lines in in; returns 1 when stdin ended. */
static int
chat_input(struct chat *c, struct buf *in)
{
	char tmp[4096], *nl;
	ssize_t n;
	int eof = 0;

	if ((n = read(STDIN_FILENO, tmp, sizeof(tmp))) == -1) {
		if (errno == EINTR || errno == EAGAIN)
			return 0;
		err(EXIT_ERR, "stdin");
	}
	if (n == 0)
		eof = 1;
	else
		buf_add(in, tmp, (size_t)n);
	if (eof && in->len > 0 && in->p[in->len - 1] != '\n')
		buf_add(in, "\n", 1);
	while (in->len > 0 && (nl = memchr(in->p, '\n', in->len)) != NULL) {
		*nl = '\0';
		if (nl > in->p && nl[-1] == '\r')
			nl[-1] = '\0';
		if (!TAILQ_EMPTY(&c->approvals))
			chat_answer(c, in->p);
		else if (in->p[0] != '\0')
			chat_send(c, in->p);
		buf_drop(in, (size_t)(nl - in->p) + 1);
	}
	if (in->len > MAX_EVENT)
		errx(EXIT_ERR, "stdin: a line longer than %u MiB",
		    MAX_EVENT >> 20);
	return eof;
}

static int
cmd_chat(int argc, char **argv)
{
	struct pollfd pfd[2];
	struct buf in = { NULL, 0, 0 };
	struct chat c;
	struct hc h;
	uint64_t eof_at = 0, now;
	cJSON *o;
	char *path;
	int i, nfd, eof = 0;

	if ((i = cmd_args(argc, argv, "chat", 1)) < 0)
		return EXIT_USAGE;
	memset(&c, 0, sizeof(c));
	c.sid = argv[i];
	c.tty = isatty(STDIN_FILENO);
	TAILQ_INIT(&c.approvals);
	util_randhex(c.idbase, 8);
	/*
	 * Start live after what the session already logged; a session that
	 * does not exist yet is made by the first message, and its stream
	 * is followed from seq 1 then.
	 */
	path = session_path(c.sid, "");
	request(&h, "GET", path, NULL);
	free(path);
	follow_init(&c.f, c.sid, 0);
	c.f.on_event = chat_event;
	c.f.arg = &c;
	if (h.status == 200) {
		o = answer_json(&h);
		c.f.last = (uint64_t)fmax(0, jdbl(o, "lastSeq"));
		cJSON_Delete(o);
		c.want_stream = 1;
	} else if (h.status != 404) {
		i = session_missing(&h, c.sid);
		hc_close(&h);
		return i;
	}
	hc_close(&h);
	catch_sigint();
	chat_prompt(&c);
	while (!interrupted) {
		now = util_mono_ms();
		if (eof && (c.nturns == 0 || now >= eof_at))
			break;
		if (c.want_stream && c.f.h.fd == -1) {
			if (now >= c.f.retry_at)
				follow_open(&c.f);
			if (c.f.h.fd != -1)
				continue;
		}
		nfd = 0;
		if (c.f.h.fd != -1) {
			pfd[nfd].fd = c.f.h.fd;
			pfd[nfd++].events = POLLIN;
		}
		if (!eof) {
			pfd[nfd].fd = STDIN_FILENO;
			pfd[nfd++].events = POLLIN;
		}
		if (poll(pfd, nfd, c.want_stream ? follow_timeout(&c.f, 1000) :
		    1000) <= 0)
			continue;
		for (i = 0; i < nfd; i++) {
			if (pfd[i].revents == 0)
				continue;
			if (pfd[i].fd == STDIN_FILENO) {
				if (chat_input(&c, &in)) {
					eof = 1;
					eof_at = util_mono_ms() + EOF_WAIT_MS;
				}
			} else if (c.f.h.fd != -1)
				follow_read(&c.f);
		}
	}
	if (eof && c.nturns > 0 && !interrupted)
		warnx("session %s: no end of the turn within %d s; leaving it "
		    "running", c.sid, EOF_WAIT_MS / 1000);
	chat_nl(&c);
	while (!TAILQ_EMPTY(&c.approvals))
		approval_free(&c, TAILQ_FIRST(&c.approvals));
	follow_free(&c.f);
	buf_free(&in);
	free(c.turns);
	return c.refused > 0 ? EXIT_ERR : 0;
}

/* --- reload, drain, log level, config check --- */

static int
cmd_reload(int argc, char **argv)
{
	struct hc h;
	cJSON *o;
	int i;

	if ((i = cmd_args(argc, argv, "reload", 0)) < 0)
		return EXIT_USAGE;
	request(&h, "POST", CTL_PREFIX "reload", NULL);
	if (h.status / 100 != 2) {
		i = answer_error(&h, "reload", h.status == 422 ?
		    "the running configuration stays; fix the file and "
		    "reload again" : NULL);
		hc_close(&h);
		return i;
	}
	if (jflag)
		print_raw(&h);
	else {
		o = answer_json(&h);
		printf("reloaded: %s workers\n", jnum(o, "workers"));
		cJSON_Delete(o);
	}
	hc_close(&h);
	return 0;
}

/*
 * Whether parleyd is still there: 1 with its status in *o, 0 when it is
 * gone (the socket refuses or disappeared), -1 when it did not answer.
 */
static int
drain_poll(cJSON **o)
{
	struct hc h;
	int r;

	*o = NULL;
	if ((r = hc_open(&h, "GET", CTL_PREFIX "status", NULL, NULL)) ==
	    HC_CONNECT) {
		hc_close(&h);
		return 0;
	}
	if (r == HC_OK && hc_body(&h) == 0 && h.status == 200)
		*o = answer_json(&h);
	hc_close(&h);
	return 1;
}

static int
cmd_drain(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	struct hc h;
	long long tmo = -1;
	uint64_t deadline;
	cJSON *o;
	char *path;
	int ch, quiet = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "jqt:", lo, NULL)) != -1)
		switch (ch) {
		case 'j':
			jflag = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 't':
			if ((tmo = parse_dur(optarg)) < 0) {
				warnx("bad --timeout %s; use e.g. 30s, 500ms "
				    "or 2m", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			return usage_of("drain");
		}
	if (optind != argc)
		return usage_of("drain");
	if (tmo >= 0)
		path = xprintf("%sdrain?timeout=%lld", CTL_PREFIX, tmo);
	else
		path = xprintf("%sdrain", CTL_PREFIX);
	request(&h, "POST", path, NULL);
	free(path);
	if (h.status / 100 != 2) {
		ch = answer_error(&h, "drain", NULL);
		hc_close(&h);
		return ch;
	}
	if (jflag)
		print_raw(&h);
	o = answer_json(&h);
	if (cJSON_IsNumber(jget(o, "timeoutMs")))
		tmo = (long long)jdbl(o, "timeoutMs");
	cJSON_Delete(o);
	hc_close(&h);
	if (tmo < 0)
		tmo = 0;
	if (!quiet)
		fprintf(stderr, "parleyctl: parleyd is draining (timeout %s)\n",
		    fmt_dur((double)tmo / 1000));
	deadline = util_mono_ms() + (uint64_t)tmo + DRAIN_GRACE_MS;
	for (;;) {
		sleep(1);
		switch (drain_poll(&o)) {
		case 0:
			if (!quiet)
				fprintf(stderr, "parleyctl: parleyd has "
				    "exited\n");
			return 0;
		case 1:
			if (o != NULL && !quiet)
				fprintf(stderr, "parleyctl: %s: %s sessions, "
				    "%s connections left\n", jstr(o, "state"),
				    jnum(o, "sessions"),
				    jnum(o, "connections"));
			cJSON_Delete(o);
			break;
		}
		if (util_mono_ms() >= deadline) {
			warnx("parleyd still runs %s after the drain "
			    "timeout; see its log, or stop it with "
			    "SIGTERM", fmt_dur(DRAIN_GRACE_MS / 1000));
			return EXIT_TEMPFAIL;
		}
	}
}

static int
cmd_log_level(int argc, char **argv)
{
	static const char *levels[] = { "error", "warn", "info", "debug" };
	struct hc h;
	cJSON *o;
	char *body;
	int i, l;

	if ((i = cmd_args(argc, argv, "log level", 1)) < 0)
		return EXIT_USAGE;
	for (l = 0; l < 4; l++)
		if (strcmp(argv[i], levels[l]) == 0)
			break;
	if (l == 4) {
		warnx("bad log level %s; use error, warn, info or debug",
		    argv[i]);
		return EXIT_USAGE;
	}
	body = xprintf("{\"level\":\"%s\"}", levels[l]);
	request(&h, "POST", CTL_PREFIX "log-level", body);
	free(body);
	if (h.status / 100 != 2) {
		i = answer_error(&h, "log level", NULL);
		hc_close(&h);
		return i;
	}
	if (jflag)
		print_raw(&h);
	else {
		o = answer_json(&h);
		printf("log level: %s\n", cJSON_IsString(jget(o, "logLevel")) ?
		    jstr(o, "logLevel") : levels[l]);
		cJSON_Delete(o);
	}
	hc_close(&h);
	return 0;
}

static int
cmd_config_check(int argc, char **argv)
{
	struct config *conf;
	char errbuf[1024];
	int i;

	if ((i = cmd_args(argc, argv, "config check", 1)) < 0)
		return EXIT_USAGE;
	if ((conf = config_load(argv[i], 1, errbuf, sizeof(errbuf))) ==
	    NULL) {
		fprintf(stderr, "%s\n", errbuf);
		return EXIT_ERR;
	}
	config_free(conf);
	printf("%s: configuration OK\n", argv[i]);
	return 0;
}

/* --- the command table --- */

static int	cmd_commands(int, char **);
static int	cmd_help(int, char **);

static const struct cmd cmds[] = {
	{ "status", "[--json]", cmd_status },
	{ "workers", "[--json]", cmd_workers },
	{ "sessions", "[--json] [--state status]", cmd_sessions },
	{ "session show", "[--json] id", cmd_show },
	{ "session log", "[--from seq] [--follow] id", cmd_log },
	{ "session kill", "id", cmd_kill },
	{ "session pause", "id", cmd_pause },
	{ "session resume", "id", cmd_resume },
	{ "audit", "[--after seq] [--limit number] [--json] id", cmd_audit },
	{ "chat", "id", cmd_chat },
	{ "knowledge export", "[--format md | json] [--at seq] [-o file] "
	    "project", cmd_knowledge_export },
	{ "knowledge import", "[--json] project file", cmd_knowledge_import },
	{ "reload", "[--json]", cmd_reload },
	{ "drain", "[--quiet] [--timeout duration]", cmd_drain },
	{ "log level", "error | warn | info | debug", cmd_log_level },
	{ "config check", "file", cmd_config_check },
	{ "commands", "", cmd_commands },
	{ "help", "", cmd_help },
};
#define NCMDS	(sizeof(cmds) / sizeof(cmds[0]))

static void
print_usage(FILE *fp)
{
	size_t i;

	fprintf(fp, "usage: parleyctl [-s socket] [--json] command "
	    "[argument ...]\ncommands:\n");
	for (i = 0; i < NCMDS; i++)
		fprintf(fp, "    %s%s%s\n", cmds[i].name,
		    cmds[i].args[0] ? " " : "", cmds[i].args);
}

static int
usage(void)
{
	print_usage(stderr);
	return EXIT_USAGE;
}

int
usage_of(const char *name)
{
	size_t i;

	for (i = 0; i < NCMDS; i++)
		if (strcmp(cmds[i].name, name) == 0)
			fprintf(stderr, "usage: parleyctl %s%s%s\n", name,
			    cmds[i].args[0] ? " " : "", cmds[i].args);
	return EXIT_USAGE;
}

/* Every command, one a line: tests check each is in parleyctl(8). */
static int
cmd_commands(int argc, char **argv)
{
	size_t i;

	if (argc != 1)
		return usage_of("commands");
	for (i = 0; i < NCMDS; i++)
		printf("%s\n", cmds[i].name);
	return 0;
}

static int
cmd_help(int argc, char **argv)
{
	if (argc != 1)
		return usage_of("help");
	print_usage(stdout);
	return 0;
}

/*
 * The daemon's own default (see control-socket in parleyd.conf(5)): the
 * system socket for root; for others the one in their runtime directory
 * when a daemon of theirs made it, else the system one.
 */
static const char *
default_socket(void)
{
	static char path[PATH_MAX];
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat sb;

	if (geteuid() == 0 || xdg == NULL || xdg[0] != '/')
		return CTL_DEFAULT_SOCKET;
	if ((size_t)snprintf(path, sizeof(path), "%s/parleyd/control.sock",
	    xdg) >= sizeof(path) || stat(path, &sb) == -1)
		return CTL_DEFAULT_SOCKET;
	return path;
}

/* The command whose words start argv, and how many words it took. */
static const struct cmd *
find_cmd(int argc, char **argv, int *words)
{
	size_t i, n;
	const char *sp;

	for (i = 0; i < NCMDS; i++) {
		sp = strchr(cmds[i].name, ' ');
		n = sp ? (size_t)(sp - cmds[i].name) : strlen(cmds[i].name);
		if (strncmp(argv[0], cmds[i].name, n) != 0 ||
		    argv[0][n] != '\0')
			continue;
		if (sp == NULL) {
			*words = 1;
			return &cmds[i];
		}
		if (argc > 1 && strcmp(argv[1], sp + 1) == 0) {
			*words = 2;
			return &cmds[i];
		}
	}
	return NULL;
}

int
main(int argc, char *argv[])
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "socket", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 }
	};
	const struct cmd *c;
	int ch, words;

	signal(SIGPIPE, SIG_IGN);
	if ((sockpath = getenv("PARLEYCTL_SOCKET")) == NULL ||
	    *sockpath == '\0')
		sockpath = default_socket();
	while ((ch = getopt_long(argc, argv, "+hjs:", lo, NULL)) != -1)
		switch (ch) {
		case 'h':
			print_usage(stdout);
			return 0;
		case 'j':
			jflag = 1;
			break;
		case 's':
			sockpath = optarg;
			break;
		default:
			return usage();
		}
	argc -= optind;
	argv += optind;
	if (argc == 0)
		return usage();
	if ((c = find_cmd(argc, argv, &words)) == NULL) {
		size_t i, n = strlen(argv[0]);
		int group = 0;

		/* "session frob": name both words, the first is known. */
		for (i = 0; i < NCMDS; i++)
			if (strncmp(cmds[i].name, argv[0], n) == 0 &&
			    cmds[i].name[n] == ' ')
				group = 1;
		warnx("unknown command: %s%s%s; see parleyctl help", argv[0],
		    group && argc > 1 ? " " : "", group && argc > 1 ? argv[1] :
		    "");
		return EXIT_USAGE;
	}
	/* The command's own getopt sees its last word as argv[0]. */
	return c->fn(argc - words + 1, argv + words - 1);
}
