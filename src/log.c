#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "parley/log.h"

/*
 * Process-wide by nature: every module logs, and threading a handle through
 * each call would buy nothing.  Set once at start-up and after fork.
 */
static struct {
	char		 procname[32];
	int		 to_stderr;
	enum log_level	 level;
} lg = { "parley", 1, LOG_LEVEL_INFO };

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

int
log_level_parse(const char *s, enum log_level *out)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	return -1;
}

static void
vlog(enum log_level level, int with_errno, const char *fmt, va_list ap)
{
	static const char *tag[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[2048];
	int saved = errno, n;

	if (level > lg.level)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if (with_errno && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s",
		    strerror(saved));
	if (lg.to_stderr) {
		struct timespec ts;
		struct tm tm;
		char when[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ldZ %s[%d] %s: %s\n", when,
		    ts.tv_nsec / 1000000, lg.procname, (int)getpid(),
		    tag[level], msg);
	} else
		syslog(prio[level], "%s: %s", lg.procname, msg);
	errno = saved;
}

#define LOGFN(name, level, with_errno)				\
void								\
name(const char *fmt, ...)					\
{								\
	va_list ap;						\
	va_start(ap, fmt);					\
	vlog(level, with_errno, fmt, ap);			\
	va_end(ap);						\
}
LOGFN(log_warn, LOG_LEVEL_WARN, 1)
LOGFN(log_warnx, LOG_LEVEL_WARN, 0)
LOGFN(log_info, LOG_LEVEL_INFO, 0)
LOGFN(log_debug, LOG_LEVEL_DEBUG, 0)

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
