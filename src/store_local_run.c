/*
 * Local store: the run file, and a new log epoch for each session after
 * a crash of the machine.
 *
 * Under fsync batch or no, an append is reported durable, and sent, once
 * it is in the page cache.  A killed parleyd loses none of that (the
 * kernel keeps it), but a machine that crashes or loses power can lose
 * the last appends of every session written since the last sync: events
 * clients may have seen.  The next appends would then take their seqs,
 * and a client that saw a lost event would miss the one that replaced it
 * without knowing.  Torn frames say nothing here: a write lost whole
 * leaves none.
 *
 * So STATE_DIR/store-run records which boot of the machine ran parleyd
 * last and whether that run ended clean (everything synced after the
 * workers were gone):
 *
 *	parley-run 1 <boot id> running|clean <crash>
 *
 * A start that finds a run of another boot that did not end clean counts
 * a crash: <crash> becomes a number larger than any before it (the
 * wall-clock second, or the last one plus 1).  A session remembers the
 * newest crash it has seen: in its index header (store_seg.c), written
 * when the session is made, so a session made after the crash has seen
 * it, and in sessions/<id>/epochs:
 *
 *	parley-epochs 1 <crash>\n<epochs' text (parley/epoch.h)>\n
 *
 * A session opened that has not seen the newest crash was last written
 * before it: it starts a new epoch at the seq after the end its open
 * recovered, and its epochs file says it has seen the crash before any
 * new append can take those seqs.  A client that had seen no lost event
 * resumes as before; one that had gets RESUME_GAP with the new epoch.
 * Under fsync always nothing acknowledged can be lost, and the epoch
 * costs only a changed token.  The run file and the epochs files are
 * synced in every fsync mode (a few writes per start, stop and crash),
 * and a clean stop syncs everything first, under fsync no too.  A start without a run file (the first, or
 * after a parleyd without it) counts no crash: there is no telling; one
 * with a run file it cannot read counts one.
 */
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parley/epoch.h"
#include "parley/log.h"
#include "parley/store.h"
#include "store_local.h"

#define RUN_FILE	"store-run"
#define RUN_TMP		"store-run.tmp"
#define RUN_MAX		256
#define RUN_BOOT_MAX	64
#define EPOCHS_FILE	"epochs"
#define EPOCHS_TMP	"epochs.tmp"
#define EPOCHS_MAX	(64 + EPOCH_TEXT_MAX)

/* This boot of the machine: its id, or "" when the kernel gives none. */
static void
run_boot(char out[RUN_BOOT_MAX])
{
	ssize_t	 n;
	int	 fd;

	out[0] = '\0';
	if ((fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY |
	    O_CLOEXEC)) == -1)
		return;
	n = read(fd, out, RUN_BOOT_MAX - 1);
	close(fd);
	if (n <= 0) {
		out[0] = '\0';
		return;
	}
	out[n] = '\0';
	out[strcspn(out, "\n \t")] = '\0';
}

/*
 * Reads the run file: 1 and its fields, 0 when there is none, -1 when it
 * cannot be read or is not one (a message logged if say).
 */
static int
run_read(struct local_store *lst, char boot[RUN_BOOT_MAX], int *clean,
    uint32_t *crash, int say)
{
	char		*buf, state[16];
	unsigned long	 c;
	unsigned	 v;
	int		 n = 0;

	if ((buf = local_read_file(lst->rootfd, RUN_FILE, RUN_MAX,
	    NULL)) == NULL) {
		if (errno == ENOENT)
			return 0;
		if (say && (errno == EACCES || errno == EPERM))
			log_warn("store: %s (left by a run as another user? "
			    "chown it to parleyd's user)", RUN_FILE);
		else if (say)
			log_warn("store: %s", RUN_FILE);
		return -1;
	}
	if (sscanf(buf, "parley-run %u %63s %15s %lu%n", &v, boot, state, &c,
	    &n) != 4 || v != 1 || c > UINT32_MAX || (strcmp(state,
	    "running") != 0 && strcmp(state, "clean") != 0)) {
		if (say)
			log_warnx("store: %s is not a run file of this "
			    "parleyd (\"%.40s\"); it is written again now",
			    RUN_FILE, buf);
		free(buf);
		return -1;
	}
	free(buf);
	*clean = strcmp(state, "clean") == 0;
	*crash = (uint32_t)c;
	return 1;
}

static int
run_write(struct local_store *lst, const char *boot, int clean,
    uint32_t crash)
{
	char	 buf[RUN_MAX];
	int	 n;

	n = snprintf(buf, sizeof(buf), "parley-run 1 %s %s %" PRIu32 "\n",
	    boot[0] != '\0' ? boot : "-", clean ? "clean" : "running", crash);
	/* Synced whatever fsync says: "clean" must not outlive what it
	 * vouches for, nor "running" be lost with the crash it announces. */
	return local_replace(lst->rootfd, RUN_TMP, RUN_FILE, buf, (size_t)n,
	    0);
}

/* At open, in every process: the newest crash the run file names. */
int
local_run_load(struct local_store *lst)
{
	char		 boot[RUN_BOOT_MAX];
	int		 clean;
	uint32_t	 crash;

	lst->crashes = run_read(lst, boot, &clean, &crash, 0) == 1 ? crash :
	    0;
	return 0;
}

/*
 * Once per parleyd start, before the workers: counts a crash when the last
 * run was of another boot and did not end clean, and records this run.
 * 0, or -1 with a message in err.
 */
int
local_run_begin(struct store *st, char *err, size_t errlen)
{
	struct local_store	*lst = (struct local_store *)st;
	char			 boot[RUN_BOOT_MAX], last[RUN_BOOT_MAX];
	uint32_t		 crash = 0, now;
	int			 clean = 1, r;

	run_boot(boot);
	if (boot[0] == '\0')
		log_warnx("store: the kernel gives no boot id "
		    "(/proc/sys/kernel/random/boot_id): a crash of the machine "
		    "while parleyd runs will not start new log epochs");
	/* A run file that is there but unreadable may hide a crash. */
	if ((r = run_read(lst, last, &clean, &crash, 1)) == -1 ||
	    (r == 1 && !clean && boot[0] != '\0' && strcmp(last, boot) != 0)) {
		now = (uint32_t)time(NULL);
		crash = now > crash ? now : crash < UINT32_MAX ? crash + 1 :
		    crash;
		log_warnx("store: the machine restarted while parleyd ran (%s%s"
		    "): the last events of sessions written then may be lost; "
		    "each such session starts a new log epoch when it is next "
		    "opened, so that clients that saw lost events are told "
		    "(RESUME_GAP)", r == -1 ? "or so an unreadable " RUN_FILE
		    " says" : "boot ", r == -1 ? "" : last);
	}
	if (run_write(lst, boot, 0, crash) == -1) {
		snprintf(err, errlen, "store: writing %s: %s (state-dir must "
		    "be writable by parleyd's user)", RUN_FILE,
		    strerror(errno));
		return -1;
	}
	lst->crashes = crash;
	return 0;
}

/*
 * After the workers are gone: everything they wrote synced, then the run
 * file says clean.  0 or -1/errno (the run then counts as not clean).
 */
int
local_run_end(struct store *st)
{
	struct local_store	*lst = (struct local_store *)st;
	char			 boot[RUN_BOOT_MAX];

	/* Under fsync no too: the one sync a run makes is what "clean"
	 * stands for. */
	if (syncfs(lst->sessfd) == -1 ||
	    (lst->seg_otherfs && syncfs(lst->segfd) == -1))
		return -1;
	run_boot(boot);
	return run_write(lst, boot, 1, lst->crashes);
}

/* ---- a session's epochs ---- */

static int
epochs_write(struct local_sess *ls, uint32_t crash, const char *text)
{
	char	 buf[EPOCHS_MAX];
	int	 n;

	n = snprintf(buf, sizeof(buf), "parley-epochs 1 %" PRIu32 "\n%s\n",
	    crash, text);
	/* Synced in every fsync mode: no append may take a lost seq before
	 * the epoch that tells it is on disk. */
	return local_replace(ls->dirfd, EPOCHS_TMP, EPOCHS_FILE, buf,
	    (size_t)n, 0);
}

/*
 * At a session's open, once its index or log is locked (ls->dirfd open;
 * read before, the list could be one another process's open was about
 * to change): its epochs, and the newest crash it has seen raised to
 * the file's.  0, or -1 with errno (EIO: the file is not one; a message
 * logged).
 */
int
local_epochs_load(struct local_sess *ls)
{
	struct epochs		 e;
	unsigned long		 c;
	unsigned		 v;
	size_t			 len;
	char			*buf, *nl;
	int			 n = 0;

	if (unlinkat(ls->dirfd, EPOCHS_TMP, 0) == -1 && errno != ENOENT)
		return -1;
	if ((buf = local_read_file(ls->dirfd, EPOCHS_FILE, EPOCHS_MAX,
	    &len)) == NULL)
		return errno == ENOENT ? 0 : -1;
	if (sscanf(buf, "parley-epochs %u %lu%n", &v, &c, &n) != 2 ||
	    v != 1 || c > UINT32_MAX || buf[n] != '\n' ||
	    (nl = strchr(buf + n + 1, '\n')) == NULL ||
	    epoch_parse(&e, buf + n + 1, (size_t)(nl - (buf + n + 1))) == -1) {
		log_warnx("store: session %s: sessions/%s/epochs is not an "
		    "epochs file; move it away to open the session (its "
		    "clients' resumes are then not checked against older "
		    "epochs)", ls->base.id, ls->base.id);
		free(buf);
		errno = EIO;
		return -1;
	}
	*nl = '\0';
	if (c > ls->crash_seen)
		ls->crash_seen = (uint32_t)c;
	if (e.n > 0 && (ls->epochs = strdup(buf + n + 1)) == NULL) {
		free(buf);
		return -1;
	}
	free(buf);
	return 0;
}

/*
 * After the open recovered the session's end (last_seq): a session last
 * written before the newest crash starts an epoch past that end.  A v1
 * log made now has no index header to say it has seen the crash: its
 * epochs file says so.  0 or -1/errno.
 */
int
local_epochs_check(struct local_sess *ls, int made)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;
	struct epochs		 e;
	char			 token[EPOCH_TOKEN_LEN + 1];
	char			 text[EPOCH_TEXT_MAX], *dup;
	uint64_t		 from = ls->base.last_seq + 1;

	if (lst->crashes <= ls->crash_seen) {
		if (made && !ls->seg && lst->crashes > 0 &&
		    epochs_write(ls, lst->crashes, "") == -1)
			return -1;
		return 0;
	}
	if (ls->epochs == NULL || epoch_parse(&e, ls->epochs,
	    strlen(ls->epochs)) == -1)
		memset(&e, 0, sizeof(e));
	epoch_token(token);
	epoch_push(&e, token, from);
	epoch_format(&e, text, sizeof(text));
	if ((dup = strdup(text)) == NULL)
		return -1;
	if (epochs_write(ls, lst->crashes, text) == -1) {
		free(dup);
		return -1;
	}
	free(ls->epochs);
	ls->epochs = dup;
	ls->crash_seen = lst->crashes;
	log_info("store: session %s: new log epoch %s from seq %" PRIu64
	    " (written before the machine's crash: events after %" PRIu64
	    " may have been lost)", ls->base.id, token, from, from - 1);
	return 0;
}

const char *
local_epochs(const struct store_sess *s)
{
	const struct local_sess *ls = (const struct local_sess *)s;

	return ls->epochs != NULL ? ls->epochs : "";
}
