/*
 * The operator's audit file (audit-log): every audit_entry,
 * autonomy_changed and step of a proposed action (action_*) a worker
 * logs, copied from the session's log as one
 * JSON line.  All workers append to the same file: each line goes out in
 * one write(2) on a descriptor opened O_APPEND, so lines never interleave.
 * The file is a copy kept for the operator; the session's log stays the
 * record, so a file that cannot be written costs its entries and a
 * warning, never a session's progress.
 */
#include <sys/types.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/log.h"
#include "auditlog.h"
#include "sess.h"

/*
 * One file per worker process, opened at start and again on SIGUSR1,
 * written from every session: process-wide, like the log file.
 */
static struct {
	int		 fd;		/* -1: none, or it could not be opened */
	char		 path[PATH_MAX];	/* "": no audit-log */
	int		 failing;	/* a failure was reported, none since */
	unsigned long long lost;	/* entries not written meanwhile */
	int		 torn;		/* a short write left half a line */
} al = { -1, "", 0, 0, 0 };

/* One line, with room for the newline a torn line needs in front. */
struct line {
	char		 buf[1 + AUDITLOG_LINE_MAX + 1];
	size_t		 len;		/* of the line at buf + 1, newline in */
};

int
auditlog_type(const char *json, size_t len)
{
	static const char *types[] = { "audit_entry", "autonomy_changed",
	    "action_proposed", "action_approved", "action_rejected",
	    "action_execute", "action_result", "action_expired" };
	const char *t;
	char pat[48];
	cJSON *ev;
	size_t i, n = sizeof(types) / sizeof(types[0]);
	int yes = 0;

	/* Most events are neither, and a look for the member (logged
	 * events are compact JSON) spares their parse; it may be inside
	 * another object (a tool's arguments), so the parse decides. */
	for (i = 0; i < n; i++) {
		snprintf(pat, sizeof(pat), "\"type\":\"%s\"", types[i]);
		if (memmem(json, len, pat, strlen(pat)) != NULL)
			break;
	}
	if (i == n || (ev = cJSON_ParseWithLength(json, len)) == NULL)
		return 0;
	t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "type"));
	for (i = 0; t != NULL && i < n; i++)
		if (strcmp(t, types[i]) == 0)
			yes = 1;
	cJSON_Delete(ev);
	return yes;
}

/*
 * Makes l the line of event json: sessionId, seq and type first, for
 * people who read the file, then the event's other members but its
 * protocol version.  An entry longer than the bound keeps only those
 * three and "truncated":true; the session's log has it whole.  0 if json
 * is no event.
 */
static int
line_make(struct line *l, const char *json, size_t len)
{
	static const char *head[] = { "sessionId", "seq", "type" };
	char *out = l->buf + 1;
	cJSON *ev, *o, *f;
	size_t i;

	l->len = 0;
	if ((ev = cJSON_ParseWithLength(json, len)) == NULL)
		return 0;
	if (!cJSON_IsObject(ev) || (o = cJSON_CreateObject()) == NULL) {
		cJSON_Delete(ev);
		return 0;
	}
	for (i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		if ((f = cJSON_DetachItemFromObjectCaseSensitive(ev,
		    head[i])) != NULL)
			cJSON_AddItemToObject(o, head[i], f);
	cJSON_DeleteItemFromObjectCaseSensitive(ev, "v");
	while ((f = ev->child) != NULL) {
		cJSON_DetachItemViaPointer(ev, f);
		cJSON_AddItemToObject(o, f->string, f);
	}
	cJSON_Delete(ev);
	/* cJSON wants 5 bytes to spare; the newline takes one more. */
	if (!cJSON_PrintPreallocated(o, out, AUDITLOG_LINE_MAX - 6, 0)) {
		while ((f = cJSON_GetArrayItem(o, 3)) != NULL)
			cJSON_Delete(cJSON_DetachItemViaPointer(o, f));
		cJSON_AddTrueToObject(o, "truncated");
		if (!cJSON_PrintPreallocated(o, out, AUDITLOG_LINE_MAX - 6,
		    0)) {
			cJSON_Delete(o);
			return 0;
		}
	}
	cJSON_Delete(o);
	l->len = strlen(out);
	out[l->len++] = '\n';
	return 1;
}

/* Something went wrong (errno says what): said once per streak. */
static void
trouble(const char *what, int entry)
{
	if (entry)
		al.lost++;
	if (al.failing)
		return;
	al.failing = 1;
	log_warnx("audit-log %s: %s: %s; entries are lost until it can be "
	    "written again (the sessions' logs keep them)", al.path, what,
	    strerror(errno));
}

static void
line_write(struct line *l)
{
	const char *p = l->buf + 1;
	size_t len = l->len, pre = 0;
	ssize_t n;

	if (al.fd == -1) {
		errno = EBADF;
		trouble("not open", 1);
		return;
	}
	/* What a short write left must not run into this line. */
	if (al.torn) {
		l->buf[0] = '\n';
		p--;
		len++;
		pre = 1;
	}
	while ((n = write(al.fd, p, len)) == -1 && errno == EINTR)
		;
	if (n == (ssize_t)len) {
		al.torn = 0;
		if (al.failing)
			log_info("audit-log %s: written again; %llu entries "
			    "were lost", al.path, al.lost);
		al.failing = 0;
		al.lost = 0;
		return;
	}
	if (n >= 0) {
		/* A full disk, or a file size limit: what went out of the
		 * line is half a line (the newline alone ends the old one). */
		if ((size_t)n > pre)
			al.torn = 1;
		else if (n == 1)
			al.torn = 0;
		errno = ENOSPC;
	}
	trouble("cannot write", 1);
}

static int
file_open(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0640);
}

int
auditlog_open(const char *path)
{
	auditlog_close();
	if (path == NULL)
		return 0;
	if ((size_t)snprintf(al.path, sizeof(al.path), "%s", path) >=
	    sizeof(al.path)) {
		errno = ENAMETOOLONG;
		trouble("cannot open", 0);
		return -1;
	}
	if ((al.fd = file_open(al.path)) == -1) {
		trouble("cannot open", 0);
		return -1;
	}
	al.torn = 0;
	return 0;
}

int
auditlog_reopen(void)
{
	int fd;

	if (al.path[0] == '\0')
		return 0;
	if ((fd = file_open(al.path)) == -1) {
		if (al.fd == -1)
			trouble("cannot open", 0);
		else
			log_warnx("audit-log %s: cannot open it again: %s; "
			    "entries go on to the file open before", al.path,
			    strerror(errno));
		return -1;
	}
	if (al.fd != -1)
		close(al.fd);
	al.fd = fd;
	/* A rotated file starts empty and needs no newline first. */
	if (al.torn && lseek(fd, 0, SEEK_END) == 0)
		al.torn = 0;
	return 0;
}

void
auditlog_close(void)
{
	if (al.fd != -1)
		close(al.fd);
	al.fd = -1;
	al.path[0] = '\0';
}

static int
event_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	(void)seq;
	(void)ts;
	line_make(arg, json, len);
	return 1;
}

uint64_t
auditlog_event(struct sess *s, uint64_t seq)
{
	static struct line l;	/* 64 KiB: not on the stack */

	if (seq == 0 || al.path[0] == '\0')
		return seq;
	/* Just appended, so at hand: in flight, or in a local file. */
	l.len = 0;
	if (sess_log_read(s, seq - 1, 1, event_cb, &l) != 1 || l.len == 0) {
		errno = EIO;
		trouble("cannot read the entry back from the session's log",
		    1);
		return seq;
	}
	line_write(&l);
	return seq;
}
