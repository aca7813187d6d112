#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "parley/log.h"
#include "parley/utf8.h"

/*
 * Process-wide by nature: every module logs, and threading a handle through
 * each call would buy nothing.  Set once at start-up and after fork.
 */
static struct {
	char		 procname[32];
	int		 to_stderr;	/* else syslog, unless fd is a file */
	int		 fd;		/* -1: stderr or syslog */
	char		 path[4096];	/* of fd, for log_reopen */
	enum log_level	 level;
	enum log_format	 format;
} lg = { "parley", 1, -1, "", LOG_LEVEL_INFO, LOG_FORMAT_TEXT };

void
log_init(const char *procname, int to_stderr, enum log_level level)
{
	log_procname(procname);
	lg.to_stderr = to_stderr;
	lg.level = level;
	if (!to_stderr)
		openlog("parleyd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void
log_procname(const char *procname)
{
	snprintf(lg.procname, sizeof(lg.procname), "%s", procname);
}

void
log_setlevel(enum log_level level)
{
	lg.level = level;
}

enum log_level
log_getlevel(void)
{
	return lg.level;
}

void
log_setformat(enum log_format f)
{
	lg.format = f;
}

static const char *level_names[] = { "error", "warn", "info", "debug" };

int
log_level_parse(const char *s, enum log_level *out)
{
	size_t i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	return -1;
}

int
log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0)
		*out = LOG_FORMAT_TEXT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_FORMAT_JSON;
	else
		return -1;
	return 0;
}

int
log_target(const char *target)
{
	int fd;

	if (strcmp(target, "stderr") == 0 || strcmp(target, "syslog") == 0) {
		if (lg.fd != -1)
			close(lg.fd);
		lg.fd = -1;
		lg.path[0] = '\0';
		if ((lg.to_stderr = target[1] == 't') == 0)
			openlog("parleyd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
		return 0;
	}
	if ((fd = open(target, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0640)) == -1)
		return -1;
	if (lg.fd != -1)
		close(lg.fd);
	lg.fd = fd;
	snprintf(lg.path, sizeof(lg.path), "%s", target);
	return 0;
}

int
log_chown(uid_t uid, gid_t gid)
{
	return lg.fd == -1 ? 0 : fchown(lg.fd, uid, gid);
}

void
log_forget_fd(void)
{
	lg.fd = -1;
	/* syslog(3) keeps its socket's number too: a child that reuses the
	 * number (the worker's IPC socket is dup2'd to 3, often the syslog
	 * socket's) would have log lines written into it.  Closed here, it
	 * is reconnected on the next line. */
	closelog();
}

int
log_reopen(void)
{
	char path[sizeof(lg.path)];

	if (lg.path[0] == '\0')
		return 0;
	memcpy(path, lg.path, sizeof(path));
	return log_target(path);
}

void
log_reqid(char out[17], uint64_t id)
{
	snprintf(out, 17, "%016llx", (unsigned long long)id);
}

/* Bytes in a UTF-8 sequence that starts with c; 0 if c cannot start one. */
static size_t
utf8_seqlen(unsigned char c)
{
	return c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 :
	    c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

/*
 * Appends s to b as the inside of a JSON string.  Invalid UTF-8 (a client
 * can put any byte in a path) becomes U+FFFD: a log line must parse.
 */
static size_t
json_escape(char *b, size_t cap, size_t n, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c;
	size_t k, i;

	while (*s != '\0' && n + 7 < cap) {
		c = (unsigned char)*s;
		if (c >= 0x80) {
			k = utf8_seqlen(c);
			for (i = 1; i < k && s[i] != '\0'; i++)
				;
			if (k == 0 || i < k ||
			    !utf8_valid((const unsigned char *)s, k)) {
				memcpy(b + n, "\\ufffd", 6);
				n += 6;
				s++;
			} else {
				memcpy(b + n, s, k);
				n += k;
				s += k;
			}
			continue;
		}
		if (c == '"' || c == '\\') {
			b[n++] = '\\';
			b[n++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			memcpy(b + n, "\\u00", 4);
			b[n + 4] = hex[c >> 4];
			b[n + 5] = hex[c & 15];
			n += 6;
		} else
			b[n++] = (char)c;
		s++;
	}
	return n;
}

static void
vlog(enum log_level level, int with_errno, const char *req, const char *sid,
    const char *fmt, va_list ap)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[2048], line[4096 + 512], when[40];
	int saved = errno, n;
	size_t len = 0;
	struct timespec ts;
	struct tm tm;

	if (level > lg.level)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if (with_errno && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s",
		    strerror(saved));
	/* One event, one line: a newline inside a message would split it. */
	for (n = 0; msg[n] != '\0'; n++)
		if (msg[n] == '\n' || msg[n] == '\r')
			msg[n] = ' ';
	if (req != NULL && req[0] == '\0')
		req = NULL;
	if (sid != NULL && sid[0] == '\0')
		sid = NULL;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (lg.format == LOG_FORMAT_JSON) {
		len = (size_t)snprintf(line, sizeof(line), "{\"ts\":\"%s.%03ldZ\","
		    "\"level\":\"%s\",\"proc\":\"", when, ts.tv_nsec / 1000000,
		    level_names[level]);
		len = json_escape(line, sizeof(line), len, lg.procname);
		len += (size_t)snprintf(line + len, sizeof(line) - len,
		    "\",\"pid\":%d", (int)getpid());
		if (req != NULL) {
			len += (size_t)snprintf(line + len, sizeof(line) - len,
			    ",\"req\":\"");
			len = json_escape(line, sizeof(line), len, req);
			line[len++] = '"';
		}
		if (sid != NULL) {
			len += (size_t)snprintf(line + len, sizeof(line) - len,
			    ",\"session\":\"");
			len = json_escape(line, sizeof(line), len, sid);
			line[len++] = '"';
		}
		len += (size_t)snprintf(line + len, sizeof(line) - len,
		    ",\"msg\":\"");
		len = json_escape(line, sizeof(line), len, msg);
		len += (size_t)snprintf(line + len, sizeof(line) - len, "\"}");
	} else {
		if (lg.fd != -1 || lg.to_stderr)
			len = (size_t)snprintf(line, sizeof(line),
			    "%s.%03ldZ %s[%d] %s: ", when, ts.tv_nsec / 1000000,
			    lg.procname, (int)getpid(), level_names[level]);
		else
			len = (size_t)snprintf(line, sizeof(line), "%s: ",
			    lg.procname);
		if (req != NULL)
			len += (size_t)snprintf(line + len, sizeof(line) - len,
			    "req=%s ", req);
		if (sid != NULL)
			len += (size_t)snprintf(line + len, sizeof(line) - len,
			    "session=%s ", sid);
		len += (size_t)snprintf(line + len, sizeof(line) - len, "%s",
		    msg);
	}
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	if (lg.fd != -1 || lg.to_stderr) {
		line[len++] = '\n';
		/* One write per line: processes share the file (O_APPEND). */
		if (write(lg.fd != -1 ? lg.fd : STDERR_FILENO, line, len) < 0)
			(void)0;
	} else {
		line[len] = '\0';
		syslog(prio[level], "%s", line);
	}
	errno = saved;
}

#define LOGFN(name, level, with_errno)				\
void								\
name(const char *fmt, ...)					\
{								\
	va_list ap;						\
	va_start(ap, fmt);					\
	vlog(level, with_errno, NULL, NULL, fmt, ap);		\
	va_end(ap);						\
}
#define LOGRFN(name, level)					\
void								\
name(const char *req, const char *sid, const char *fmt, ...)	\
{								\
	va_list ap;						\
	va_start(ap, fmt);					\
	vlog(level, 0, req, sid, fmt, ap);			\
	va_end(ap);						\
}
LOGFN(log_warn, LOG_LEVEL_WARN, 1)
LOGFN(log_warnx, LOG_LEVEL_WARN, 0)
LOGFN(log_info, LOG_LEVEL_INFO, 0)
LOGFN(log_debug, LOG_LEVEL_DEBUG, 0)
LOGRFN(log_rinfo, LOG_LEVEL_INFO)
LOGRFN(log_rwarnx, LOG_LEVEL_WARN)
LOGRFN(log_rdebug, LOG_LEVEL_DEBUG)

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, 1, NULL, NULL, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, 0, NULL, NULL, fmt, ap);
	va_end(ap);
	exit(1);
}
