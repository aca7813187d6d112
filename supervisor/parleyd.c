/*
 * parleyd: the supervisor.  Parses the config once, binds the listeners,
 * forks the worker pool and then only accepts, routes and supervises: it
 * never runs agent code and never blocks.
 */
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/quota.h"
#include "parley/store.h"
#include "parley/util.h"
#include "supervisor.h"
#include "tls.h"

/* Shared counters: a client address or subject per slot, in a window. */
#define SUP_QUOTA_SLOTS	16384

static void
usage(void)
{
	fprintf(stderr, "usage: parleyd [-dtvV] [-f file]\n");
	exit(1);
}

/*
 * Without a config file a newcomer who is not root still gets a working
 * server: the state goes under their home instead of /var/lib.
 */
static void
default_state_dir(struct config *conf)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char path[4096];

	if (conf->path != NULL || geteuid() == 0)
		return;
	if (xdg != NULL && xdg[0] == '/')
		snprintf(path, sizeof(path), "%s/parleyd", xdg);
	else if (home != NULL && home[0] == '/')
		snprintf(path, sizeof(path), "%s/.local/state/parleyd", home);
	else
		return;
	free(conf->state_dir);
	if ((conf->state_dir = strdup(path)) == NULL)
		fatal("strdup");
}

/*
 * ping: also say whether a shared store answers (blocks up to 2 s).  Into
 * *ctx the TLS context of its tls lines (NULL: none), its certificate and
 * key read and checked.
 */
static struct config *
load(const char *path, int must_exist, int ping_store,
    struct ssl_ctx_st **ctx, char *err, size_t errlen)
{
	struct config *conf;
	struct store *st;
	char ping[256];

	if ((conf = config_load(path, must_exist, err, errlen)) == NULL)
		return NULL;
	if ((*ctx = tls_ctx_new(conf, err, errlen)) == NULL && err[0] != '\0') {
		config_free(conf);
		return NULL;
	}
	default_state_dir(conf);
	/* Fail now, with a clear message, rather than in every worker. */
	if ((st = store_open(conf->store, conf->state_dir,
	    (enum store_fsync)conf->fsync, err, errlen)) == NULL) {
		tls_ctx_free(*ctx);
		config_free(conf);
		return NULL;
	}
	/* A shared store that is down is not a config error: workers wait
	 * for it and /health/ready says so.  Say it now, though. */
	if (ping_store && store_ping(st, 2000, ping, sizeof(ping)) == -1)
		log_warnx("%s (parleyd starts anyway; /health/ready answers "
		    "503 until the store is reachable)", ping);
	store_close(st);
	return conf;
}

/*
 * The store's record of this run (store_run_begin/end): begin before the
 * workers start, end after the last is gone.  0, or -1 with err.
 */
static int
store_run(const struct config *conf, int begin, char *err, size_t errlen)
{
	struct store *st;
	int rc;

	if ((st = store_open(conf->store, conf->state_dir,
	    (enum store_fsync)conf->fsync, err, errlen)) == NULL)
		return -1;
	if (begin)
		rc = store_run_begin(st, err, errlen);
	else if ((rc = store_run_end(st)) == -1)
		snprintf(err, errlen, "store: recording a clean stop: %s",
		    strerror(errno));
	store_close(st);
	return rc;
}

static int
same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) ||
	    (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* user and group must exist: -t says so before a start would fail. */
static int
check_accounts(const struct config *conf, char *err, size_t errlen)
{
	const char *names[2] = { conf->user, conf->control_owner };
	const char *groups[2] = { conf->group, conf->control_group };
	int i;

	for (i = 0; i < 2; i++) {
		if (names[i] != NULL && getpwnam(names[i]) == NULL) {
			snprintf(err, errlen, "%s: %s %s: no such user",
			    conf->path ? conf->path : "(defaults)",
			    i == 0 ? "user" : "control-socket owner", names[i]);
			return -1;
		}
		if (groups[i] != NULL && getgrnam(groups[i]) == NULL) {
			snprintf(err, errlen, "%s: %s %s: no such group",
			    conf->path ? conf->path : "(defaults)",
			    i == 0 ? "group" : "control-socket group",
			    groups[i]);
			return -1;
		}
	}
	return 0;
}

/*
 * Every client is a descriptor in some worker, and a local session two
 * more: take all the hard limit allows (the soft one is often 1,024).
 */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		log_warn("setrlimit RLIMIT_NOFILE");
}

static void
pidfile_write(const char *path)
{
	char buf[32];
	int fd, n;

	if (path == NULL)
		return;
	/* Written as root: never through a link someone put there. */
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0644)) == -1) {
		log_warn("pid-file %s", path);
		return;
	}
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (write(fd, buf, (size_t)n) != n)
		log_warn("pid-file %s", path);
	close(fd);
}

static void
stop_check(evutil_socket_t fd, short ev, void *arg)
{
	struct sup *sup = arg;

	pool_kill_all(sup);
}

/* "STATUS=serving 3 sessions, ..." for systemctl status. */
static void
notify_status(struct sup *sup, const char *prefix)
{
	struct pool_totals t;
	char msg[256];

	pool_totals(sup, &t);
	snprintf(msg, sizeof(msg), "%sSTATUS=%s %.0f sessions, %.0f "
	    "connections, %u workers", prefix, sup->stopping ? "stopping:" :
	    sup->draining ? "draining:" : "serving", t.sessions, t.connections,
	    t.workers);
	sup_notify(msg);
}

static void
status_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sup *sup = arg;

	if (sup->notified_ready)
		notify_status(sup, "");
}

/*
 * Re-reads the config and starts a new generation of workers; the old one
 * drains.  On error the running config stays and err says why.
 */
int
sup_reload(struct sup *sup, char *err, size_t errlen)
{
	struct config *conf;
	struct ssl_ctx_st *ctx;
	struct timespec ts;
	enum log_level lv = LOG_LEVEL_INFO;
	char msg[128];

	log_info("reloading %s", sup->conf_path);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL +
	    (unsigned long long)ts.tv_nsec / 1000);
	sup_notify(msg);
	/* No store ping here: the supervisor never blocks once it serves;
	 * workers report the store's health. */
	if ((conf = load(sup->conf_path, sup->conf_must_exist, 0, &ctx, err,
	    errlen)) == NULL)
		goto fail;
	/*
	 * Another store or state directory: this run begins there too, or
	 * a crash of the machine would go unseen in it.  The old one stays
	 * "running", which costs its sessions at most an epoch after a
	 * reboot.
	 */
	if ((!same_str(conf->store, sup->conf->store) ||
	    !same_str(conf->state_dir, sup->conf->state_dir)) &&
	    store_run(conf, 1, err, errlen) == -1) {
		tls_ctx_free(ctx);
		config_free(conf);
		goto fail;
	}
	/* Listeners change only where the listen lines did. */
	if (listener_update(sup, conf, err, errlen) == -1) {
		tls_ctx_free(ctx);
		config_free(conf);
		goto fail;
	}
	/* New TLS connections get the certificate just read. */
	tls_use(sup, ctx);
	if (conf->log_level != NULL)
		log_level_parse(conf->log_level, &lv);
	log_setlevel(lv);
	log_setformat(conf->log_json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
	/* Where logs go, who may use the control socket and which user
	 * runs parleyd are fixed at start: say so rather than pretend. */
	if (!same_str(conf->log_file, sup->conf->log_file) ||
	    !same_str(conf->control_socket, sup->conf->control_socket) ||
	    !same_str(conf->user, sup->conf->user) ||
	    !same_str(conf->group, sup->conf->group))
		log_warnx("log-file, control-socket, user and group changes "
		    "take effect at the next restart");
	pool_reload(sup, conf);
	log_info("configuration reloaded");
	/* READY=1 once the new generation serves (pool.c, IPC_HELLO): said
	 * before, a client or health check in between found none ready. */
	sup->notified_ready = 0;
	return 0;
fail:
	log_warnx("reload failed, keeping the running configuration: %s", err);
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=reload failed: %.90s",
	    err);
	sup_notify(msg);
	return -1;
}

/* parleyctl drain: no new sessions; exit once the workers are gone. */
void
sup_drain(struct sup *sup, uint64_t ms)
{
	struct timeval tv;

	if (sup->draining || sup->stopping)
		return;
	log_info("draining: no new sessions; exiting when the sessions here "
	    "are let go (at most %llu ms)", (unsigned long long)ms);
	sup->draining = 1;
	notify_status(sup, "STOPPING=1\n");
	pool_drain(sup, ms);
	/* Workers bound themselves; this bounds a worker that hangs. */
	util_tv(&tv, ms + sup->conf->shutdown_timeout_ms + 3000);
	evtimer_add(sup->stop_ev, &tv);
	/* Nothing to wait for: exit once the answer to parleyctl is out. */
	if (pool_alive(sup) == 0) {
		util_tv(&tv, 200);
		event_base_loopexit(sup->base, &tv);
	}
}

static void
on_signal(evutil_socket_t sig, short ev, void *arg)
{
	struct sup *sup = arg;
	struct timeval tv;
	char err[1024];

	switch (sig) {
	case SIGTERM:
	case SIGINT:
		if (sup->stopping)
			return;
		log_info("received %s, shutting down",
		    sig == SIGTERM ? "SIGTERM" : "SIGINT");
		sup->stopping = 1;
		notify_status(sup, "STOPPING=1\n");
		listener_close_all(sup);
		tls_stop(sup);
		pool_stop(sup);
		util_tv(&tv, sup->conf->shutdown_timeout_ms + 1000);
		evtimer_add(sup->stop_ev, &tv);
		if (pool_alive(sup) == 0)
			event_base_loopbreak(sup->base);
		break;
	case SIGHUP:
		if (sup->stopping || sup->draining)
			return;
		log_info("received SIGHUP");
		sup_reload(sup, err, sizeof(err));
		break;
	case SIGUSR1:
		if (log_reopen() == -1)
			log_warn("SIGUSR1: cannot reopen the log file (is its "
			    "directory writable by parleyd's user, or does "
			    "logrotate create the new file?)");
		else
			log_info("received SIGUSR1: log file reopened");
		pool_log(sup, IPC_LOG_KEEP, 1);
		break;
	case SIGCHLD:
		pool_reap(sup);
		if ((sup->stopping || sup->draining) && pool_alive(sup) == 0)
			event_base_loopbreak(sup->base);
		break;
	}
}

/*
 * The workers append to audit-log as `user`: the file is made here, while
 * root may still create it, and (own) given to that user as the log file
 * is.  -1 with errno when it cannot be opened.
 */
static int
audit_log_make(const char *path, int own, uid_t uid, gid_t gid)
{
	int fd;

	if (path == NULL)
		return 0;
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0640)) == -1)
		return -1;
	if (own && fchown(fd, uid, gid) == -1)
		log_warn("audit-log %s: chown", path);
	close(fd);
	return 0;
}

/*
 * Started as root with `user`: hand state-dir (and what is under it), the
 * log file and the control socket to that user, then become it for good.
 * Returns -1 with err set.
 */
static int
drop_privileges(struct sup *sup, char *err, size_t errlen)
{
	struct config *conf = sup->conf;
	struct passwd *pw;
	struct group *gr;
	char path[4096], segs[4096];
	gid_t gid;

	if (geteuid() != 0) {
		if (conf->user != NULL || conf->group != NULL)
			log_info("not started as root: user and group are "
			    "ignored");
		return 0;
	}
	if (conf->user == NULL) {
		log_warnx("running as root: set 'user' (and 'group') in "
		    "parleyd.conf so workers do not");
		return 0;
	}
	if ((pw = getpwnam(conf->user)) == NULL) {
		snprintf(err, errlen, "user %s: no such user", conf->user);
		return -1;
	}
	gid = pw->pw_gid;
	if (conf->group != NULL) {
		if ((gr = getgrnam(conf->group)) == NULL) {
			snprintf(err, errlen, "group %s: no such group",
			    conf->group);
			return -1;
		}
		gid = gr->gr_gid;
	}
	if (mkdir(conf->state_dir, 0750) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "state-dir %s: %s", conf->state_dir,
		    strerror(errno));
		return -1;
	}
	/*
	 * What root made here, nothing deeper: a walk of a tree the user
	 * owns could be led elsewhere by a link.  Files an earlier run as
	 * root left inside are the operator's to chown (parleyd.conf(5)).
	 */
	snprintf(path, sizeof(path), "%s/sessions", conf->state_dir);
	snprintf(segs, sizeof(segs), "%s/segments", conf->state_dir);
	if (lchown(conf->state_dir, pw->pw_uid, gid) == -1 ||
	    (lchown(path, pw->pw_uid, gid) == -1 && errno != ENOENT) ||
	    (lchown(segs, pw->pw_uid, gid) == -1 && errno != ENOENT)) {
		snprintf(err, errlen, "state-dir %s: chown: %s",
		    conf->state_dir, strerror(errno));
		return -1;
	}
	if (log_chown(pw->pw_uid, gid) == -1)
		log_warn("log-file %s: chown", conf->log_file);
	if (audit_log_make(conf->audit_log, 1, pw->pw_uid, gid) == -1)
		log_warn("audit-log %s", conf->audit_log);
	if (setgroups(1, &gid) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) == -1) {
		snprintf(err, errlen, "cannot switch to user %s: %s",
		    conf->user, strerror(errno));
		return -1;
	}
	if (setuid(0) != -1) {
		snprintf(err, errlen, "still able to become root after "
		    "switching to %s", conf->user);
		return -1;
	}
	log_info("running as user %s (uid %u, gid %u)", conf->user,
	    (unsigned)pw->pw_uid, (unsigned)gid);
	return 0;
}

int
main(int argc, char *argv[])
{
	struct sup sup;
	struct ssl_ctx_st *ctx;
	int sig[SUP_NSIGS] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGCHLD };
	static const struct timeval status_tv = { 10, 0 };
	const char *path = SYSCONFDIR "/parleyd/parleyd.conf";
	int ch, debug = 0, test = 0, verbose = 0, must_exist = 0;
	enum log_level lv = LOG_LEVEL_INFO;
	char err[1024], *abspath = NULL;
	size_t i;

	while ((ch = getopt(argc, argv, "df:tvV")) != -1) {
		switch (ch) {
		case 'd':
			debug = 1;
			break;
		case 'f':
			path = optarg;
			must_exist = 1;
			break;
		case 't':
			test = 1;
			break;
		case 'v':
			verbose++;
			break;
		case 'V':
			printf("parleyd %s (protocol 1)\n", PACKAGE_VERSION);
			return 0;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	log_init("parleyd", 1, LOG_LEVEL_INFO);

	memset(&sup, 0, sizeof(sup));
	signal(SIGPIPE, SIG_IGN);	/* the store ping writes to a socket */
	if ((sup.conf = load(path, must_exist, 1, &ctx, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (check_accounts(sup.conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "%s\n", err);
		tls_ctx_free(ctx);
		config_free(sup.conf);
		return 1;
	}
	if (test) {
		fprintf(stderr, "configuration OK\n");
		tls_ctx_free(ctx);
		config_free(sup.conf);
		return 0;
	}
	if (sup.conf->log_level != NULL)
		log_level_parse(sup.conf->log_level, &lv);
	if (verbose)
		lv = LOG_LEVEL_DEBUG;
	/* A reload re-reads the file after daemon() moved to "/". */
	if (must_exist && path[0] != '/' && (abspath = realpath(path,
	    NULL)) != NULL)
		path = abspath;
	sup.conf_path = path;
	sup.conf_must_exist = must_exist;
	if (!debug) {
		if (daemon(0, 0) == -1)
			fatal("daemon");
		log_init("parleyd", 0, lv);
	} else
		log_init("parleyd", 1, lv);
	log_setformat(sup.conf->log_json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
	if (sup.conf->log_file != NULL && log_target(sup.conf->log_file) == -1)
		fatal("log-file %s", sup.conf->log_file);
	/* A worker that cannot open it would lose entries: say so now. */
	if (audit_log_make(sup.conf->audit_log, 0, 0, 0) == -1)
		fatal("audit-log %s", sup.conf->audit_log);
	if (sup.conf->path == NULL)
		log_info("no configuration file at %s: using built-in "
		    "defaults, state in %s", path, sup.conf->state_dir);
	/* The local store makes it; a shared store does not, but the
	 * workers' indexes live there too. */
	if (mkdir(sup.conf->state_dir, 0750) == -1 && errno != EEXIST)
		log_warn("state-dir %s: the workers' indexes cannot be "
		    "kept; create it", sup.conf->state_dir);

	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	sup.base = event_base_new();
	if (sup.base == NULL)
		fatalx("event_base_new failed");
	TAILQ_INIT(&sup.listeners);
	TAILQ_INIT(&sup.workers);
	TAILQ_INIT(&sup.old);
	TAILQ_INIT(&sup.pending);
	TAILQ_INIT(&sup.replies);
	sup.started_ms = util_mono_ms();
	/* Request ids must not repeat across restarts: logs outlive us. */
	if (getrandom(&sup.next_conn_id, sizeof(sup.next_conn_id), 0) !=
	    sizeof(sup.next_conn_id))
		sup.next_conn_id = util_now_ms() << 20;
	sup.next_conn_id &= ~(1ULL << 63);
	tls_use(&sup, ctx);
	if (listener_open(&sup, sup.conf, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if (control_open(&sup, sup.conf, err, sizeof(err)) == -1)
		fatalx("%s", err);
	pidfile_write(sup.conf->pid_file);
	/* Bound and opened what needs root; no worker exists yet. */
	if (drop_privileges(&sup, err, sizeof(err)) == -1)
		fatalx("%s", err);
	for (i = 0; i < sizeof(sig) / sizeof(sig[0]); i++) {
		sup.sigs[i] = evsignal_new(sup.base, sig[i], on_signal, &sup);
		evsignal_add(sup.sigs[i], NULL);
	}
	sup.stop_ev = evtimer_new(sup.base, stop_check, &sup);
	sup.status_ev = event_new(sup.base, -1, EV_PERSIST, status_cb, &sup);
	event_add(sup.status_ev, &status_tv);
	/* Before the first fork: every worker shares the one table. */
	if ((sup.quota = quota_new(SUP_QUOTA_SLOTS)) == NULL)
		fatal("quota table");
	if (store_run(sup.conf, 1, err, sizeof(err)) == -1)
		fatalx("%s", err);
	pool_start(&sup);

	event_base_dispatch(sup.base);

	/* Every worker gone: the run ended clean. */
	if (pool_alive(&sup) == 0 && store_run(sup.conf, 0, err,
	    sizeof(err)) == -1)
		log_warnx("%s (the next start counts this run as not ended "
		    "clean)", err);

	log_info("stopped");
	if (sup.conf->pid_file != NULL)
		unlink(sup.conf->pid_file);
	for (i = 0; i < sizeof(sig) / sizeof(sig[0]); i++)
		event_free(sup.sigs[i]);
	event_free(sup.stop_ev);
	event_free(sup.status_ev);
	control_close(&sup);
	listener_close_all(&sup);
	tls_free(&sup);
	listener_replies_free(&sup);
	pool_free_all(&sup);
	config_free(sup.conf);
	event_base_free(sup.base);
	free(abspath);
	return 0;
}
