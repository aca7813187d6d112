/*
 * Unit tests for the local store's run file and the epochs a machine
 * crash starts (store_local_run.c): which starts count a crash, which
 * sessions start an epoch and where, that one is started once, that a
 * session made after the crash (segments or v1) starts none, that the
 * index header keeps what it has seen through a trim, and that files
 * that are not what they should be are refused or counted as a crash.
 */
#include "store_local_fixture.h"

static void
this_boot(char out[64])
{
	FILE	*f = fopen("/proc/sys/kernel/random/boot_id", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(out, 64, f));
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

static void
set_run(const char *text)
{
	char	 p[256];
	FILE	*f;

	snprintf(p, sizeof(p), "%s/store-run", tdir);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
}

static void
get_run(char *buf, size_t len)
{
	char	 p[256];
	FILE	*f;

	snprintf(p, sizeof(p), "%s/store-run", tdir);
	ck_assert_ptr_nonnull(f = fopen(p, "r"));
	ck_assert_ptr_nonnull(fgets(buf, (int)len, f));
	fclose(f);
}

/* A store as parleyd's workers see it after the supervisor's begin. */
static struct store *
start(void)
{
	struct store	*st;
	char		 err[256];

	st = open_store(STORE_FSYNC_BATCH);
	ck_assert_msg(store_run_begin(st, err, sizeof(err)) == 0, "%s", err);
	store_close(st);
	return open_store(STORE_FSYNC_BATCH);
}

/* Makes (or opens) id and appends first..last. */
static void
write_sess(struct store *st, const char *id, uint64_t first, uint64_t last)
{
	struct store_sess	*s;

	ck_assert_int_eq(store_sess_open(st, id, 1, &s), 0);
	fill(s, first, last);
	store_sess_close(s);
}

/* id's epochs after an open (and a close). */
static void
epochs_of(struct store *st, const char *id, struct epochs *e)
{
	struct store_sess	*s;
	const char		*t;

	ck_assert_int_eq(store_sess_open(st, id, 0, &s), 0);
	t = store_epochs(s);
	ck_assert_int_eq(epoch_parse(e, t, strlen(t)), 0);
	store_sess_close(s);
}

/* The machine crashed while the last run ran: another boot, running. */
static void
crash(void)
{
	char	 buf[256], boot[64], state[16];
	unsigned long c;

	get_run(buf, sizeof(buf));
	ck_assert_int_eq(sscanf(buf, "parley-run 1 %63s %15s %lu", boot,
	    state, &c), 3);
	snprintf(buf, sizeof(buf), "parley-run 1 %s running %lu\n",
	    "00000000-0000-4000-8000-000000000000", c);
	set_run(buf);
}

START_TEST(test_run_cycle)
{
	struct store	*st;
	char		 buf[256], boot[64], want[256];

	this_boot(boot);
	st = open_store(STORE_FSYNC_BATCH);
	ck_assert_int_eq(store_run_begin(st, buf, sizeof(buf)), 0);
	get_run(buf, sizeof(buf));
	snprintf(want, sizeof(want), "parley-run 1 %s running 0\n", boot);
	ck_assert_str_eq(buf, want);
	ck_assert_int_eq(store_run_end(st), 0);
	get_run(buf, sizeof(buf));
	snprintf(want, sizeof(want), "parley-run 1 %s clean 0\n", boot);
	ck_assert_str_eq(buf, want);
	store_close(st);
}
END_TEST

START_TEST(test_crash_starts_epochs)
{
	struct store	*st;
	struct epochs	 e, e2;

	st = start();
	write_sess(st, "a", 1, 5);
	write_sess(st, "kg:k", 1, 3);
	store_close(st);
	crash();
	st = start();
	/* Written before the crash: an epoch past the end. */
	epochs_of(st, "a", &e2);
	ck_assert_uint_eq(e2.n, 1);
	ck_assert_uint_eq(e2.v[0].from, 6);
	epochs_of(st, "kg:k", &e);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_uint_eq(e.v[0].from, 4);
	/* Once: a second open keeps it. */
	epochs_of(st, "a", &e);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_str_eq(e.v[0].token, e2.v[0].token);
	/* Made after the crash, segments or v1: none, now or reopened. */
	write_sess(st, "b", 1, 4);
	write_sess(st, "kg:n", 1, 2);
	epochs_of(st, "b", &e);
	ck_assert_uint_eq(e.n, 0);
	epochs_of(st, "kg:n", &e);
	ck_assert_uint_eq(e.n, 0);
	write_sess(st, "a", 6, 8);
	store_close(st);
	st = start();
	epochs_of(st, "b", &e);
	ck_assert_uint_eq(e.n, 0);
	epochs_of(st, "kg:n", &e);
	ck_assert_uint_eq(e.n, 0);
	store_close(st);

	/* A second crash: every session written before it, once more. */
	crash();
	st = start();
	epochs_of(st, "a", &e);
	ck_assert_uint_eq(e.n, 2);
	ck_assert_uint_eq(e.v[0].from, 6);
	ck_assert_uint_eq(e.v[1].from, 9);
	ck_assert_str_ne(e.v[0].token, e.v[1].token);
	epochs_of(st, "b", &e);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_uint_eq(e.v[0].from, 5);
	epochs_of(st, "kg:n", &e);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_uint_eq(e.v[0].from, 3);
	store_close(st);
}
END_TEST

START_TEST(test_no_crash)
{
	struct store	*st;
	struct epochs	 e;
	char		 buf[256], boot[64];

	this_boot(boot);
	st = start();
	write_sess(st, "a", 1, 3);
	store_close(st);
	/* parleyd killed, the machine up all along: nothing lost. */
	st = start();
	epochs_of(st, "a", &e);
	ck_assert_uint_eq(e.n, 0);
	store_close(st);
	/* A clean stop, then a reboot: everything was synced. */
	snprintf(buf, sizeof(buf), "parley-run 1 %s clean 0\n",
	    "00000000-0000-4000-8000-000000000000");
	set_run(buf);
	st = start();
	epochs_of(st, "a", &e);
	ck_assert_uint_eq(e.n, 0);
	store_close(st);
	/* No run file: an older parleyd's state; nothing to tell by. */
	snprintf(buf, sizeof(buf), "%s/store-run", tdir);
	ck_assert_int_eq(unlink(buf), 0);
	st = start();
	epochs_of(st, "a", &e);
	ck_assert_uint_eq(e.n, 0);
	store_close(st);
}
END_TEST

START_TEST(test_run_file_garbage)
{
	struct store	*st;
	struct epochs	 e;

	st = start();
	write_sess(st, "a", 1, 3);
	store_close(st);
	set_run("parley-run 2 x running 0\n");
	st = start();
	epochs_of(st, "a", &e);
	ck_assert_uint_eq(e.n, 1);
	ck_assert_uint_eq(e.v[0].from, 4);
	store_close(st);
}
END_TEST

START_TEST(test_epochs_file_garbage)
{
	struct store		*st;
	struct store_sess	*s;
	struct epochs		 e;
	static const char	 junk[] = "parley-epochs 1 x\n";

	st = start();
	write_sess(st, "a", 1, 3);
	store_close(st);
	crash();
	st = start();
	epochs_of(st, "a", &e);
	ck_assert_uint_eq(e.n, 1);
	write_file("a", "epochs", junk, sizeof(junk) - 1);
	errno = 0;
	ck_assert_int_eq(store_sess_open(st, "a", 0, &s), -1);
	ck_assert_int_eq(errno, EIO);
	store_close(st);
}
END_TEST

/* A trim rewrites the index: its header still says the crash was seen. */
START_TEST(test_trim_keeps_seen)
{
	struct store		*st;
	struct store_sess	*s;
	struct epochs		 e;

	st = start();
	write_sess(st, "a", 1, 2);
	store_close(st);
	crash();
	st = start();
	write_sess(st, "c", 1, 10);
	ck_assert_int_eq(store_sess_open(st, "c", 0, &s), 0);
	ck_assert_int_ge(store_trim(s, 5000), 0);
	ck_assert_uint_eq(s->first_seq, 5);
	store_sess_close(s);
	store_close(st);
	st = start();
	epochs_of(st, "c", &e);
	ck_assert_uint_eq(e.n, 0);
	store_close(st);
}
END_TEST

static Suite *
run_suite(void)
{
	Suite	*su = suite_create("store_run");
	TCase	*tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_run_cycle);
	tcase_add_test(tc, test_crash_starts_epochs);
	tcase_add_test(tc, test_no_crash);
	tcase_add_test(tc, test_run_file_garbage);
	tcase_add_test(tc, test_epochs_file_garbage);
	tcase_add_test(tc, test_trim_keeps_seen);
	suite_add_tcase(su, tc);
	return su;
}

int
main(void)
{
	return check_run(run_suite());
}
