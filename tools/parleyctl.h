/*
 * What parleyctl.c shares with the files of its other commands (ctl_*.c):
 * the exit statuses, one request over the control socket and its answer,
 * tables for people, and the command line's helpers.
 */
#ifndef PARLEY_TOOLS_PARLEYCTL_H
#define PARLEY_TOOLS_PARLEYCTL_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Exit statuses, documented in parleyctl(8). */
#define EXIT_ERR	1	/* the daemon answered an error */
#define EXIT_USAGE	2
#define EXIT_NOTFOUND	3	/* no such session */
#define EXIT_UNAVAIL	69	/* EX_UNAVAILABLE: the daemon is out of reach */
#define EXIT_TEMPFAIL	75	/* EX_TEMPFAIL: drain did not end in time */

#define DOWN_MS		30000	/* follow and chat: out of reach this long */
#define EOF_WAIT_MS	120000	/* chat: the last turn after stdin's EOF */
#define MAX_EVENT	(16u << 20)	/* one SSE event */

enum { HC_OK, HC_CONNECT, HC_IO };

struct buf {
	char		*p;
	size_t		 len;
	size_t		 cap;
};

/* One request and the answer being read. */
struct hc {
	int		 fd;
	int		 status;
	int		 chunked;
	long long	 clen;		/* -1: the body ends at EOF */
	uint64_t	 got;		/* body bytes decoded so far */
	enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER } cstate;
	uint64_t	 cleft;		/* bytes left in the current chunk */
	int		 done;		/* the body is complete */
	struct buf	 raw;		/* read, not yet decoded */
	struct buf	 body;		/* decoded, not yet consumed */
};

struct table {
	size_t		 ncol;
	size_t		 n;		/* cells */
	size_t		 cap;
	char		**cell;
};

/* --json: print answers as the daemon sent them. */
extern int	 jflag;
/* Why the last request to the daemon failed, for the error message. */
extern char	 hc_err[512];
/* Set by SIGINT while catch_sigint's handler is in place. */
extern volatile sig_atomic_t interrupted;

/*
 * One request and its whole answer: the status, the body in h->body.
 * Exits when the daemon cannot be reached or does not answer.
 */
int		 request(struct hc *, const char *method, const char *path,
		    const char *body);
void		 hc_close(struct hc *);
cJSON		*answer_json(struct hc *);
/* Prints the daemon's error answer about what (hint: what to do); the exit code. */
int		 answer_error(struct hc *, const char *what, const char *hint);
/* Prints the answer as the daemon sent it (--json). */
void		 print_raw(struct hc *);
/* Says what an error answer about session sid says; the exit status. */
int		 session_missing(struct hc *, const char *sid);
/*
 * GET path (freed) about session sid: 0 with the answer in h when it is
 * 200, else the exit status once the error is told (h closed).
 */
int		 session_get(struct hc *, char *path, const char *sid);
char		*session_path(const char *sid, const char *sub);
int		 hc_open(struct hc *, const char *method, const char *path,
		    const char *body, const char *accept);
int		 hc_body(struct hc *);
/* One read: 1 progress, 0 the body is complete, -1 error or timeout. */
int		 hc_read(struct hc *, uint64_t deadline);
int		 post_event(const char *sid, cJSON *ev, int *handed);
cJSON		*client_event(const char *type, const char *sid);
int		 cmd_args(int argc, char **argv, const char *cmd, int nargs);
void		 catch_sigint(void);

void		 buf_add(struct buf *, const void *, size_t);
void		 buf_drop(struct buf *, size_t);
void		 buf_free(struct buf *);
char		*xstrdup(const char *);
/* "2d3h", "3h12m", "4m5s", "42s" (a static buffer). */
const char	*fmt_dur(double secs);
/* DURATION as parleyd.conf(5) writes it, in ms; -1 when malformed. */
long long	 parse_dur(const char *);

void		 tbl_init(struct table *, size_t ncol);
void		 tbl_add(struct table *, const char *);
/* Columns padded to their widest cell; frees the cells. */
void		 tbl_print(struct table *);

const cJSON	*jget(const cJSON *, const char *);
/* A member as text: "-" when it is not a string (jstr) or number (jnum). */
const char	*jstr(const cJSON *, const char *);
const char	*jnum(const cJSON *, const char *);
double		 jdbl(const cJSON *, const char *);
uint64_t	 jseq(const cJSON *);

char		*xprintf(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
/* Percent-encodes s for a path or a query: it may hold any byte. */
char		*path_enc(const char *);
/* A seq (a whole number); -1 if s is none. */
int		 parse_seq(const char *, uint64_t *);
/* The seq given to option --name; -1 once told it is none. */
int		 opt_seq(const char *name, const char *arg, uint64_t *);
/* Prints the usage of command name; returns EXIT_USAGE. */
int		 usage_of(const char *);
/* Exits when what was printed could not be written. */
void		 flush_stdout(void);

#endif
