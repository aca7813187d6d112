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
#include "ctl_chat.h"
#include "ctl_log.h"
#include "ctl_ops.h"
#include "ctl_follow.h"
#include "ctl_knowledge.h"
#include "parleyctl.h"

#define CONNECT_MS	5000	/* connect(2) retries while the backlog is full */
#define ANSWER_MS	30000	/* a whole answer, head and body */
#define MAX_HEAD	65536
#define MAX_ANSWER	(64u << 20)


struct cmd {
	const char	*name;
	const char	*args;
	int		(*fn)(int, char **);
};

static const char	*sockpath;
int			 jflag;
char			 hc_err[512];
volatile sig_atomic_t	 interrupted;

static int	usage(void);

/* --- small helpers --- */

void
buf_add(struct buf *b, const void *data, size_t n)
{
	if (util_append(&b->p, &b->len, &b->cap, data, n) == -1)
		errx(EXIT_ERR, "out of memory");
}

void
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

void
buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

char *
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
void
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
const char *
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
long long
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

double
jdbl(const cJSON *o, const char *k)
{
	const cJSON *v = jget(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

uint64_t
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
int
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
int
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
int
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
int
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
void
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
int
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

char *
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
int
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

cJSON *
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
