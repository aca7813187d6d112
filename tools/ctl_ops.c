/* parleyctl reload, drain, log-level, config check: the daemon's operations. */
#include <sys/queue.h>
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/ctl.h"
#include "parley/sse.h"
#include "parley/util.h"
#include "ctl_ops.h"
#include "parleyctl.h"

#define DRAIN_GRACE_MS	15000	/* drain: past the daemon's own timeout */

int
cmd_reload(int argc, char **argv)
{
	struct hc h;
	cJSON *o;
	int i;

	if ((i = cmd_args(argc, argv, "reload", 0)) < 0)
		return EXIT_USAGE;
	request(&h, "POST", CTL_PREFIX "reload", NULL);
	if (h.status / 100 != 2) {
		i = answer_error(&h, "reload", h.status == 422 ?
		    "the running configuration stays; fix the file and "
		    "reload again" : NULL);
		hc_close(&h);
		return i;
	}
	if (jflag)
		print_raw(&h);
	else {
		o = answer_json(&h);
		printf("reloaded: %s workers\n", jnum(o, "workers"));
		cJSON_Delete(o);
	}
	hc_close(&h);
	return 0;
}

/*
 * Whether parleyd is still there: 1 with its status in *o, 0 when it is
 * gone (the socket refuses or disappeared), -1 when it did not answer.
 */
static int
drain_poll(cJSON **o)
{
	struct hc h;
	int r;

	*o = NULL;
	if ((r = hc_open(&h, "GET", CTL_PREFIX "status", NULL, NULL)) ==
	    HC_CONNECT) {
		hc_close(&h);
		return 0;
	}
	if (r == HC_OK && hc_body(&h) == 0 && h.status == 200)
		*o = answer_json(&h);
	hc_close(&h);
	return 1;
}

int
cmd_drain(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	struct hc h;
	long long tmo = -1;
	uint64_t deadline;
	cJSON *o;
	char *path;
	int ch, quiet = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "jqt:", lo, NULL)) != -1)
		switch (ch) {
		case 'j':
			jflag = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 't':
			if ((tmo = parse_dur(optarg)) < 0) {
				warnx("bad --timeout %s; use e.g. 30s, 500ms "
				    "or 2m", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			return usage_of("drain");
		}
	if (optind != argc)
		return usage_of("drain");
	if (tmo >= 0)
		path = xprintf("%sdrain?timeout=%lld", CTL_PREFIX, tmo);
	else
		path = xprintf("%sdrain", CTL_PREFIX);
	request(&h, "POST", path, NULL);
	free(path);
	if (h.status / 100 != 2) {
		ch = answer_error(&h, "drain", NULL);
		hc_close(&h);
		return ch;
	}
	if (jflag)
		print_raw(&h);
	o = answer_json(&h);
	if (cJSON_IsNumber(jget(o, "timeoutMs")))
		tmo = (long long)jdbl(o, "timeoutMs");
	cJSON_Delete(o);
	hc_close(&h);
	if (tmo < 0)
		tmo = 0;
	if (!quiet)
		fprintf(stderr, "parleyctl: parleyd is draining (timeout %s)\n",
		    fmt_dur((double)tmo / 1000));
	deadline = util_mono_ms() + (uint64_t)tmo + DRAIN_GRACE_MS;
	for (;;) {
		sleep(1);
		switch (drain_poll(&o)) {
		case 0:
			if (!quiet)
				fprintf(stderr, "parleyctl: parleyd has "
				    "exited\n");
			return 0;
		case 1:
			if (o != NULL && !quiet)
				fprintf(stderr, "parleyctl: %s: %s sessions, "
				    "%s connections left\n", jstr(o, "state"),
				    jnum(o, "sessions"),
				    jnum(o, "connections"));
			cJSON_Delete(o);
			break;
		}
		if (util_mono_ms() >= deadline) {
			warnx("parleyd still runs %s after the drain "
			    "timeout; see its log, or stop it with "
			    "SIGTERM", fmt_dur(DRAIN_GRACE_MS / 1000));
			return EXIT_TEMPFAIL;
		}
	}
}

int
cmd_log_level(int argc, char **argv)
{
	static const char *levels[] = { "error", "warn", "info", "debug" };
	struct hc h;
	cJSON *o;
	char *body;
	int i, l;

	if ((i = cmd_args(argc, argv, "log level", 1)) < 0)
		return EXIT_USAGE;
	for (l = 0; l < 4; l++)
		if (strcmp(argv[i], levels[l]) == 0)
			break;
	if (l == 4) {
		warnx("bad log level %s; use error, warn, info or debug",
		    argv[i]);
		return EXIT_USAGE;
	}
	body = xprintf("{\"level\":\"%s\"}", levels[l]);
	request(&h, "POST", CTL_PREFIX "log-level", body);
	free(body);
	if (h.status / 100 != 2) {
		i = answer_error(&h, "log level", NULL);
		hc_close(&h);
		return i;
	}
	if (jflag)
		print_raw(&h);
	else {
		o = answer_json(&h);
		printf("log level: %s\n", cJSON_IsString(jget(o, "logLevel")) ?
		    jstr(o, "logLevel") : levels[l]);
		cJSON_Delete(o);
	}
	hc_close(&h);
	return 0;
}

int
cmd_config_check(int argc, char **argv)
{
	struct config *conf;
	char errbuf[1024];
	int i;

	if ((i = cmd_args(argc, argv, "config check", 1)) < 0)
		return EXIT_USAGE;
	if ((conf = config_load(argv[i], 1, errbuf, sizeof(errbuf))) ==
	    NULL) {
		fprintf(stderr, "%s\n", errbuf);
		return EXIT_ERR;
	}
	config_free(conf);
	printf("%s: configuration OK\n", argv[i]);
	return 0;
}
