/*
 * Logging in the style of OpenBSD daemons: log_warn appends strerror(errno),
 * log_warnx does not; fatal/fatalx log and exit(1).
 */
#ifndef PARLEY_LOG_H
#define PARLEY_LOG_H

#include <stdarg.h>

enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

/* procname prefixes every line ("parleyd", "worker 1"); to_stderr 0 = syslog. */
void	log_init(const char *procname, int to_stderr, enum log_level level);
void	log_procname(const char *procname);
void	log_setlevel(enum log_level level);
int	log_level_parse(const char *s, enum log_level *out);

void	log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
