/*
 * Logging in the style of OpenBSD daemons: log_warn appends strerror(errno),
 * log_warnx does not; fatal/fatalx log and exit(1).
 */
#ifndef PARLEY_LOG_H
#define PARLEY_LOG_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

/* procname prefixes every line ("parleyd", "worker 1"); to_stderr 0 = syslog. */
void	log_init(const char *procname, int to_stderr, enum log_level level);
void	log_procname(const char *procname);
void	log_setlevel(enum log_level level);
enum log_level log_getlevel(void);
int	log_level_parse(const char *s, enum log_level *out);
void	log_setformat(enum log_format);
int	log_format_parse(const char *s, enum log_format *out);
/*
 * Where lines go: "stderr", "syslog" or an absolute file path (opened
 * O_APPEND, so rotation is rename + log_reopen).  -1 with errno if the file
 * cannot be opened; the previous target stays.
 */
int	log_target(const char *target);
/* Gives the open log file to uid:gid (before dropping root); 0 if none. */
int	log_chown(uid_t, gid_t);
/* Reopens the log file (SIGUSR1 after logrotate); 0 when there is none. */
int	log_reopen(void);
/*
 * After fork, before the child rearranges its descriptors: forget the log
 * file's descriptor without closing it (its number may be reused) and
 * close syslog's; the child calls log_reopen once its descriptors are
 * settled.
 */
void	log_forget_fd(void);

/*
 * A line about one request: req is its request id (16 hex digits, see
 * log_reqid), sid its session; either may be NULL or "".  Text lines get
 * "req=... session=... " in front of the message, JSON lines the fields
 * "req" and "session".
 */
void	log_reqid(char out[17], uint64_t id);
void	log_rinfo(const char *req, const char *sid, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
void	log_rwarnx(const char *req, const char *sid, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
void	log_rdebug(const char *req, const char *sid, const char *, ...)
	    __attribute__((format(printf, 3, 4)));

void	log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
