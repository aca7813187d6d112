/*
 * parleyd: the supervisor.  Parses the config once, binds the listeners,
 * forks the worker pool and then only accepts, routes and supervises: it
 * never runs agent code and never blocks.
 */
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"
#include "supervisor.h"

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

/* ping: also say whether a shared store answers (blocks up to 2 s). */
static struct config *
load(const char *path, int must_exist, int ping_store, char *err,
    size_t errlen)
{
	struct config *conf;
	struct store *st;
	char ping[256];

	if ((conf = config_load(path, must_exist, err, errlen)) == NULL)
		return NULL;
	default_state_dir(conf);
	/* Fail now, with a clear message, rather than in every worker. */
	if ((st = store_open(conf->store, conf->state_dir,
	    (enum store_fsync)conf->fsync, err, errlen)) == NULL) {
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

static void
pidfile_write(const char *path)
{
	FILE *f;

	if (path == NULL)
		return;
	if ((f = fopen(path, "w")) == NULL) {
		log_warn("pid-file %s", path);
		return;
	}
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
}

static void
stop_check(evutil_socket_t fd, short ev, void *arg)
{
	struct sup *sup = arg;

	pool_kill_all(sup);
}

static void
on_signal(evutil_socket_t sig, short ev, void *arg)
{
	struct sup *sup = arg;
	struct config *conf;
	struct timeval tv;
	char err[1024];

	switch (sig) {
	case SIGTERM:
	case SIGINT:
		if (sup->stopping)
			return;
		log_info("received %s, shutting down",
		    sig == SIGTERM ? "SIGTERM" : "SIGINT");
		sup_notify("STOPPING=1");
		sup->stopping = 1;
		listener_close_all(sup);
		pool_stop(sup);
		util_tv(&tv, sup->conf->shutdown_timeout_ms + 1000);
		evtimer_add(sup->stop_ev, &tv);
		if (pool_alive(sup) == 0)
			event_base_loopbreak(sup->base);
		break;
	case SIGHUP:
		if (sup->stopping)
			return;
		log_info("received SIGHUP, reloading %s", sup->conf_path);
		sup_notify("RELOADING=1");
		/* No store ping here: the supervisor never blocks once it
		 * serves; workers report the store's health. */
		if ((conf = load(sup->conf_path, sup->conf_must_exist, 0, err,
		    sizeof(err))) == NULL) {
			log_warnx("reload failed, keeping the running "
			    "configuration: %s", err);
			sup_notify("READY=1\nSTATUS=reload failed");
			return;
		}
		/* Listeners change only when the listen lines did. */
		{
			struct cfg_listen *a, *b;
			int same = 1;

			a = TAILQ_FIRST(&sup->conf->listens);
			b = TAILQ_FIRST(&conf->listens);
			for (; a && b; a = TAILQ_NEXT(a, entry),
			    b = TAILQ_NEXT(b, entry))
				if (strcmp(a->host, b->host) ||
				    strcmp(a->port, b->port))
					same = 0;
			if (a || b)
				same = 0;
			if (!same) {
				listener_close_all(sup);
				if (listener_open(sup, conf, err,
				    sizeof(err)) == -1) {
					log_warnx("reload failed, keeping the "
					    "running configuration: %s", err);
					listener_close_all(sup);
					if (listener_open(sup, sup->conf, err,
					    sizeof(err)) == -1)
						fatalx("%s", err);
					config_free(conf);
					return;
				}
			}
		}
		log_setlevel(LOG_LEVEL_INFO);
		{
			enum log_level lv;

			if (conf->log_level != NULL &&
			    log_level_parse(conf->log_level, &lv) == 0)
				log_setlevel(lv);
		}
		pool_reload(sup, conf);
		sup_notify("READY=1\nSTATUS=serving");
		log_info("configuration reloaded");
		break;
	case SIGCHLD:
		pool_reap(sup);
		if (sup->stopping && pool_alive(sup) == 0)
			event_base_loopbreak(sup->base);
		break;
	}
}

int
main(int argc, char *argv[])
{
	struct sup sup;
	int sig[SUP_NSIGS] = { SIGTERM, SIGINT, SIGHUP, SIGCHLD };
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
	if ((sup.conf = load(path, must_exist, 1, err, sizeof(err))) == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (test) {
		fprintf(stderr, "configuration OK\n");
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
	if (sup.conf->path == NULL)
		log_info("no configuration file at %s: using built-in "
		    "defaults, state in %s", path, sup.conf->state_dir);

	signal(SIGPIPE, SIG_IGN);
	sup.base = event_base_new();
	if (sup.base == NULL)
		fatalx("event_base_new failed");
	TAILQ_INIT(&sup.listeners);
	TAILQ_INIT(&sup.workers);
	TAILQ_INIT(&sup.old);
	TAILQ_INIT(&sup.pending);
	sup.started_ms = util_mono_ms();
	if (listener_open(&sup, sup.conf, err, sizeof(err)) == -1)
		fatalx("%s", err);
	for (i = 0; i < sizeof(sig) / sizeof(sig[0]); i++) {
		sup.sigs[i] = evsignal_new(sup.base, sig[i], on_signal, &sup);
		evsignal_add(sup.sigs[i], NULL);
	}
	sup.stop_ev = evtimer_new(sup.base, stop_check, &sup);
	pidfile_write(sup.conf->pid_file);
	pool_start(&sup);

	event_base_dispatch(sup.base);

	log_info("stopped");
	if (sup.conf->pid_file != NULL)
		unlink(sup.conf->pid_file);
	for (i = 0; i < sizeof(sig) / sizeof(sig[0]); i++)
		event_free(sup.sigs[i]);
	event_free(sup.stop_ev);
	listener_close_all(&sup);
	pool_free_all(&sup);
	config_free(sup.conf);
	event_base_free(sup.base);
	free(abspath);
	return 0;
}
