/*
 * Unit tests for the audit file (workers/auditlog.c): which events are the
 * audit trail, the line each becomes, appending, reopening after a
 * rename, and a file that cannot be written (one warning per streak, the
 * half line a short write leaves).  The session's log is a stub that
 * hands back one event.
 */
#include <sys/resource.h>
#include <sys/stat.h>

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../workers/auditlog.c"
#include "check_main.h"

#define ENTRY	"{\"v\":1,\"type\":\"audit_entry\",\"sessionId\":\"s1\"," \
		"\"seq\":7,\"ts\":\"2026-01-02T03:04:05.006Z\"," \
		"\"toolCallId\":\"c1\",\"tool\":\"fs__rm\",\"risk\":\"high\"," \
		"\"decision\":\"approved\",\"by\":\"user\"}"
#define LINE	"{\"sessionId\":\"s1\",\"seq\":7,\"type\":\"audit_entry\"," \
		"\"ts\":\"2026-01-02T03:04:05.006Z\",\"toolCallId\":\"c1\"," \
		"\"tool\":\"fs__rm\",\"risk\":\"high\",\"decision\":\"approved\"," \
		"\"by\":\"user\"}\n"

static char		 dir[] = "/tmp/parley-test-auditlog.XXXXXX";
static char		 path[128];	/* the audit file */
static char		 logpath[128];	/* where log lines go */
static struct sess	 sess;
static const char	*stub_event;	/* what the log holds at seq */
static uint64_t		 stub_seq;

/* The session's log, as auditlog_event reads it back. */
int
sess_log_read(struct sess *s, uint64_t after, size_t limit,
    int (*cb)(void *, uint64_t, uint64_t, const char *, size_t), void *arg)
{
	ck_assert_ptr_eq(s, &sess);
	ck_assert_uint_eq(limit, 1);
	if (stub_event == NULL || after + 1 != stub_seq)
		return 0;
	cb(arg, stub_seq, 0, stub_event, strlen(stub_event));
	return 1;
}

static void
setup(void)
{
	umask(022);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	snprintf(logpath, sizeof(logpath), "%s/parleyd.log", dir);
	log_init("test", 1, LOG_LEVEL_DEBUG);
	ck_assert_int_eq(log_target(logpath), 0);
	stub_event = ENTRY;
	stub_seq = 7;
}

static void
teardown(void)
{
	auditlog_close();
	log_target("stderr");
	check_rmtree(dir);
	strcpy(dir, "/tmp/parley-test-auditlog.XXXXXX");
}

/* The file's content, NUL-terminated, in a static buffer. */
static const char *
slurp(const char *p)
{
	static char buf[4 * AUDITLOG_LINE_MAX];
	ssize_t n;
	int fd;

	if ((fd = open(p, O_RDONLY)) == -1)
		return "";
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static int
count(const char *hay, const char *needle)
{
	int n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay++;
	}
	return n;
}

START_TEST(test_type)
{
	static const char *yes[] = { ENTRY,
	    "{\"v\":1,\"type\":\"autonomy_changed\",\"level\":\"MANUAL\"}" };
	static const char *no[] = {
	    "{\"type\" : \"x\", \"type\":\"audit_entry\"}",
	    "{\"v\":1,\"type\":\"token\",\"content\":\"\\\"type\\\":"
	    "\\\"audit_entry\\\"\"}",
	    "{\"v\":1,\"type\":\"tool_start\",\"args\":{\"type\":"
	    "\"audit_entry\"}}",
	    "{\"v\":1,\"type\":\"audit_entry_x\"}",
	    "{\"type\":\"audit_entry\"", "" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		ck_assert_msg(auditlog_type(yes[i], strlen(yes[i])), "%s",
		    yes[i]);
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		ck_assert_msg(!auditlog_type(no[i], strlen(no[i])), "%s",
		    no[i]);
}
END_TEST

START_TEST(test_line)
{
	static struct line l;
	static char big[AUDITLOG_LINE_MAX + 100];
	char *ev;

	ck_assert_int_eq(line_make(&l, ENTRY, strlen(ENTRY)), 1);
	ck_assert_uint_eq(l.len, strlen(LINE));
	ck_assert_int_eq(memcmp(l.buf + 1, LINE, l.len), 0);
	ck_assert_int_eq(line_make(&l, "[1]", 3), 0);
	ck_assert_int_eq(line_make(&l, "{", 1), 0);

	/* Longer than the bound: the head and a mark, nothing else. */
	memset(big, 'x', sizeof(big) - 1);
	ck_assert_int_ne(asprintf(&ev, "{\"v\":1,\"type\":\"audit_entry\","
	    "\"sessionId\":\"s1\",\"seq\":9,\"summary\":\"%s\"}", big), -1);
	ck_assert_int_eq(line_make(&l, ev, strlen(ev)), 1);
	free(ev);
	l.buf[1 + l.len] = '\0';
	ck_assert_str_eq(l.buf + 1, "{\"sessionId\":\"s1\",\"seq\":9,"
	    "\"type\":\"audit_entry\",\"truncated\":true}\n");
}
END_TEST

START_TEST(test_append)
{
	/* None configured: nothing happens, seq comes back. */
	ck_assert_int_eq(auditlog_open(NULL), 0);
	ck_assert_uint_eq(auditlog_event(&sess, 7), 7);
	ck_assert_int_eq(access(path, F_OK), -1);

	ck_assert_int_eq(auditlog_open(path), 0);
	ck_assert_uint_eq(auditlog_event(&sess, 0), 0);
	ck_assert_str_eq(slurp(path), "");
	ck_assert_uint_eq(auditlog_event(&sess, 7), 7);
	stub_event = "{\"v\":1,\"type\":\"autonomy_changed\",\"sessionId\":"
	    "\"s1\",\"seq\":8,\"ts\":\"t\",\"level\":\"MANUAL\",\"by\":\"admin\"}";
	stub_seq = 8;
	ck_assert_uint_eq(auditlog_event(&sess, 8), 8);
	ck_assert_str_eq(slurp(path), LINE "{\"sessionId\":\"s1\",\"seq\":8,"
	    "\"type\":\"autonomy_changed\",\"ts\":\"t\",\"level\":\"MANUAL\","
	    "\"by\":\"admin\"}\n");
	{
		struct stat sb;

		ck_assert_int_eq(stat(path, &sb), 0);
		ck_assert_int_eq(sb.st_mode & 0777, 0640);
	}
	/* Appended to, never truncated: a worker starting again. */
	ck_assert_int_eq(auditlog_open(path), 0);
	stub_event = ENTRY;
	stub_seq = 7;
	auditlog_event(&sess, 7);
	ck_assert_int_eq(count(slurp(path), "\n"), 3);
	ck_assert_int_eq(count(slurp(logpath), "audit-log"), 0);
}
END_TEST

START_TEST(test_reopen)
{
	char old[160];

	/* Nothing to reopen. */
	ck_assert_int_eq(auditlog_reopen(), 0);
	ck_assert_int_eq(auditlog_open(path), 0);
	auditlog_event(&sess, 7);
	snprintf(old, sizeof(old), "%s.1", path);
	ck_assert_int_eq(rename(path, old), 0);
	auditlog_event(&sess, 7);	/* still the renamed file */
	ck_assert_int_eq(auditlog_reopen(), 0);
	auditlog_event(&sess, 7);
	ck_assert_str_eq(slurp(path), LINE);
	ck_assert_str_eq(slurp(old), LINE LINE);

	/* The directory is gone: the open file stays in use. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(unlink(old), 0);
	ck_assert_int_eq(chmod(dir, 0500), 0);
	if (access(dir, W_OK) == -1) {	/* root writes anyway */
		ck_assert_int_eq(auditlog_reopen(), -1);
		ck_assert_int_eq(count(slurp(logpath), "cannot open it again"),
		    1);
	}
	ck_assert_int_eq(chmod(dir, 0700), 0);
}
END_TEST

START_TEST(test_failing)
{
	const char *log;

	/* Cannot be opened: one warning, the entries counted lost. */
	snprintf(path, sizeof(path), "%s/no/such/dir/audit.jsonl", dir);
	ck_assert_int_eq(auditlog_open(path), -1);
	auditlog_event(&sess, 7);
	auditlog_event(&sess, 7);
	ck_assert_int_eq(auditlog_reopen(), -1);
	log = slurp(logpath);
	ck_assert_int_eq(count(log, "audit-log"), 1);
	ck_assert_ptr_nonnull(strstr(log, "cannot open"));

	/* A full disk: still the same streak, one warning. */
	ck_assert_int_eq(auditlog_open("/dev/full"), 0);
	auditlog_event(&sess, 7);
	ck_assert_int_eq(count(slurp(logpath), "audit-log"), 1);

	/* Written again: said once, with what was lost. */
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	ck_assert_int_eq(auditlog_open(path), 0);
	auditlog_event(&sess, 7);
	auditlog_event(&sess, 7);
	log = slurp(logpath);
	ck_assert_int_eq(count(log, "written again; 3 entries were lost"), 1);
	ck_assert_str_eq(slurp(path), LINE LINE);

	/* A new streak, a new warning. */
	ck_assert_int_eq(auditlog_open("/dev/full"), 0);
	auditlog_event(&sess, 7);
	auditlog_event(&sess, 7);
	log = slurp(logpath);
	ck_assert_int_eq(count(log, "cannot write"), 1);
	ck_assert_int_eq(count(log, "audit-log"), 3);

	/* An entry the log does not have at hand is lost, not guessed. */
	ck_assert_int_eq(auditlog_open(path), 0);
	auditlog_event(&sess, 7);
	stub_event = NULL;
	auditlog_event(&sess, 7);
	ck_assert_ptr_nonnull(strstr(slurp(logpath), "cannot read the entry"));
}
END_TEST

START_TEST(test_torn)
{
	struct rlimit rl;

	/* A file size limit cuts the second line short, then refuses. */
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(auditlog_open(path), 0);
	auditlog_event(&sess, 7);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = strlen(LINE) + 10;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	auditlog_event(&sess, 7);
	auditlog_event(&sess, 7);
	ck_assert_uint_eq(strlen(slurp(path)), strlen(LINE) + 10);
	ck_assert_int_eq(count(slurp(logpath), "cannot write"), 1);
	rl.rlim_cur = rl.rlim_max;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);

	/* The half line ends where it stopped; the next line is whole. */
	auditlog_event(&sess, 7);
	ck_assert_str_eq(slurp(path) + strlen(LINE) + 10, "\n" LINE);
	ck_assert_int_eq(strncmp(slurp(path) + strlen(LINE), LINE, 10), 0);
	auditlog_event(&sess, 7);
	ck_assert_int_eq(count(slurp(path), "\n"), 4);

	/* Reopened on a new, empty file: no newline first. */
	auditlog_close();
	ck_assert_int_eq(auditlog_open(path), 0);
	al.torn = 1;
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(auditlog_reopen(), 0);
	auditlog_event(&sess, 7);
	ck_assert_str_eq(slurp(path), LINE);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("auditlog");
	TCase *tc = tcase_create("auditlog");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_type);
	tcase_add_test(tc, test_line);
	tcase_add_test(tc, test_append);
	tcase_add_test(tc, test_reopen);
	tcase_add_test(tc, test_failing);
	tcase_add_test(tc, test_torn);
	suite_add_tcase(s, tc);
	return check_run(s);
}
