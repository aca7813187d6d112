/* Unit tests for logging (src/log.c): formats, files, reopen. */

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../../src/log.c"
#include "check_main.h"

static char dir[] = "/tmp/parley-test-log.XXXXXX";

static void
setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[128];

	log_target("stderr");
	log_setformat(LOG_FORMAT_TEXT);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	strcpy(dir, "/tmp/parley-test-log.XXXXXX");
}

/* The file's content, NUL-terminated (caller frees). */
static char *
slurp(const char *path)
{
	static char buf[65536];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY)) == -1)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return strdup(buf);
}

static int
count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(test_text_file)
{
	char path[256], *s;

	snprintf(path, sizeof(path), "%s/p.log", dir);
	log_init("parleyd", 1, LOG_LEVEL_INFO);
	ck_assert_int_eq(log_target(path), 0);
	log_info("hello %d", 42);
	log_debug("not at info");
	log_rinfo("00000000000000ab", "s-1", "turn started");
	log_rwarnx(NULL, "s-2", "only a session");
	log_info("two\nlines");
	s = slurp(path);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(count_lines(s), 4);
	ck_assert_ptr_nonnull(strstr(s, "parleyd["));
	ck_assert_ptr_nonnull(strstr(s, "info: hello 42\n"));
	ck_assert_ptr_null(strstr(s, "not at info"));
	ck_assert_ptr_nonnull(strstr(s,
	    "info: req=00000000000000ab session=s-1 turn started\n"));
	ck_assert_ptr_nonnull(strstr(s, "warn: session=s-2 only a session\n"));
	ck_assert_ptr_nonnull(strstr(s, "two lines\n"));
	free(s);
}
END_TEST

START_TEST(test_json)
{
	char path[256], *s, *line, *save;
	cJSON *o;
	int n = 0;

	snprintf(path, sizeof(path), "%s/j.log", dir);
	log_init("worker 1", 1, LOG_LEVEL_DEBUG);
	log_setformat(LOG_FORMAT_JSON);
	ck_assert_int_eq(log_target(path), 0);
	log_info("quote \" backslash \\ tab \t bell \a");
	log_info("bad utf-8 \xff\xc3 then \xc3\xa9 \xe2\x82 \xf0\x9f\x98\x80 end");
	log_rdebug("00000000000000ff", "s:1", "provider call done");
	log_warnx("plain");
	s = slurp(path);
	for (line = strtok_r(s, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save), n++) {
		o = cJSON_Parse(line);
		ck_assert_msg(o != NULL, "not JSON: %s", line);
		ck_assert(cJSON_IsString(cJSON_GetObjectItem(o, "ts")));
		ck_assert(cJSON_IsString(cJSON_GetObjectItem(o, "level")));
		ck_assert_str_eq(cJSON_GetObjectItem(o, "proc")->valuestring,
		    "worker 1");
		ck_assert_int_eq(cJSON_GetObjectItem(o, "pid")->valueint,
		    (int)getpid());
		if (n == 0)
			ck_assert_str_eq(cJSON_GetObjectItem(o,
			    "msg")->valuestring,
			    "quote \" backslash \\ tab \t bell \a");
		if (n == 1)
			ck_assert_str_eq(cJSON_GetObjectItem(o,
			    "msg")->valuestring, "bad utf-8 \xef\xbf\xbd"
			    "\xef\xbf\xbd then \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd "
			    "\xf0\x9f\x98\x80 end");
		if (n == 2) {
			ck_assert_str_eq(cJSON_GetObjectItem(o,
			    "level")->valuestring, "debug");
			ck_assert_str_eq(cJSON_GetObjectItem(o,
			    "req")->valuestring, "00000000000000ff");
			ck_assert_str_eq(cJSON_GetObjectItem(o,
			    "session")->valuestring, "s:1");
		}
		if (n == 3)
			ck_assert_ptr_null(cJSON_GetObjectItem(o, "req"));
		cJSON_Delete(o);
	}
	ck_assert_int_eq(n, 4);
	free(s);
}
END_TEST

/* logrotate renames the file; SIGUSR1 makes parleyd reopen the name. */
START_TEST(test_reopen)
{
	char path[256], old[256], *s;

	snprintf(path, sizeof(path), "%s/r.log", dir);
	snprintf(old, sizeof(old), "%s/r.log.1", dir);
	log_init("parleyd", 1, LOG_LEVEL_INFO);
	ck_assert_int_eq(log_reopen(), 0);	/* no file: nothing to do */
	ck_assert_int_eq(log_target(path), 0);
	log_info("before");
	ck_assert_int_eq(rename(path, old), 0);
	log_info("still the old file");
	ck_assert_int_eq(log_reopen(), 0);
	log_info("after");
	s = slurp(old);
	ck_assert_ptr_nonnull(strstr(s, "before"));
	ck_assert_ptr_nonnull(strstr(s, "still the old file"));
	ck_assert_ptr_null(strstr(s, "after"));
	free(s);
	s = slurp(path);
	ck_assert_ptr_nonnull(strstr(s, "after"));
	free(s);
	/* Never through a link (files are opened as root). */
	{
		char link[256];

		snprintf(link, sizeof(link), "%s/link.log", dir);
		ck_assert_int_eq(symlink(old, link), 0);
		ck_assert_int_eq(log_target(link), -1);
	}
	/* A file that cannot be opened leaves the current one in place. */
	ck_assert_int_eq(log_target("/nonexistent-dir/x.log"), -1);
	log_info("kept");
	s = slurp(path);
	ck_assert_ptr_nonnull(strstr(s, "kept"));
	free(s);
}
END_TEST

/* After fork the child forgets the descriptor, whose number it reuses. */
START_TEST(test_forget_fd)
{
	char path[256], *s;
	int fd;

	snprintf(path, sizeof(path), "%s/f.log", dir);
	log_init("parleyd", 1, LOG_LEVEL_INFO);
	ck_assert_int_eq(log_target(path), 0);
	fd = lg.fd;
	log_forget_fd();
	close(fd);
	ck_assert_int_eq(pipe((int[2]){ 0, 0 }), 0);	/* reuses fd */
	ck_assert_int_eq(log_reopen(), 0);
	log_info("reopened by name");
	s = slurp(path);
	ck_assert_ptr_nonnull(strstr(s, "reopened by name"));
	free(s);
}
END_TEST

START_TEST(test_parse)
{
	enum log_level l;
	enum log_format f;
	char id[17];

	ck_assert_int_eq(log_level_parse("warn", &l), 0);
	ck_assert_int_eq(l, LOG_LEVEL_WARN);
	ck_assert_int_eq(log_level_parse("verbose", &l), -1);
	ck_assert_int_eq(log_format_parse("json", &f), 0);
	ck_assert_int_eq(f, LOG_FORMAT_JSON);
	ck_assert_int_eq(log_format_parse("xml", &f), -1);
	log_reqid(id, 0x1234abcdULL);
	ck_assert_str_eq(id, "000000001234abcd");
	log_setlevel(LOG_LEVEL_ERROR);
	ck_assert_int_eq(log_getlevel(), LOG_LEVEL_ERROR);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_text_file);
	tcase_add_test(tc, test_json);
	tcase_add_test(tc, test_reopen);
	tcase_add_test(tc, test_forget_fd);
	tcase_add_test(tc, test_parse);
	suite_add_tcase(s, tc);
	return check_run(s);
}
