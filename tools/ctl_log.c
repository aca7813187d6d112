/* parleyctl session log [-f]: the log, then (with -f) what follows. */
#include <sys/queue.h>
#include <ctype.h>
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
#include "ctl_follow.h"
#include "ctl_log.h"
#include "parleyctl.h"

#define LOG_PAGE	500

static void
log_event(void *arg, cJSON *ev, const char *data, size_t len, uint64_t seq)
{
	const char *code;

	if (seq != 0) {
		fwrite(data, 1, len, stdout);
		putchar('\n');
		flush_stdout();
		return;
	}
	code = cJSON_GetStringValue(jget(ev, "code"));
	if (code != NULL && strcmp(jstr(ev, "type"), "error") == 0)
		warnx("%s: %s", code, jstr(ev, "message"));
}

/*
 * Prints each element of a JSON array on its own line as the daemon sent
 * it, byte for byte; returns how many, and the last seq in *last.
 */
static int
print_page(const char *s, size_t len, uint64_t *last, int *n)
{
	const char *p = s, *end = s + len, *start;
	int depth, instr, esc;
	cJSON *ev;
	uint64_t seq;

	*n = 0;
	while (p < end && isspace((unsigned char)*p))
		p++;
	if (p == end || *p++ != '[')
		return -1;
	for (;;) {
		while (p < end && (isspace((unsigned char)*p) || *p == ','))
			p++;
		if (p == end)
			return -1;
		if (*p == ']')
			return 0;
		start = p;
		depth = instr = esc = 0;
		for (; p < end; p++) {
			if (instr) {
				if (esc)
					esc = 0;
				else if (*p == '\\')
					esc = 1;
				else if (*p == '"')
					instr = 0;
			} else if (*p == '"')
				instr = 1;
			else if (*p == '{' || *p == '[')
				depth++;
			else if (*p == '}' || *p == ']') {
				if (depth == 0)
					break;
				if (--depth == 0) {
					p++;
					break;
				}
			} else if (*p == ',' && depth == 0)
				break;
		}
		if ((ev = cJSON_ParseWithLength(start, p - start)) == NULL)
			return -1;
		seq = jseq(ev);
		cJSON_Delete(ev);
		if (seq == 0 || seq <= *last)
			continue;
		*last = seq;
		fwrite(start, 1, p - start, stdout);
		putchar('\n');
		(*n)++;
	}
}

int
cmd_log(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "from", required_argument, NULL, 'F' },
		{ "follow", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 }
	};
	struct follow f;
	struct pollfd pfd;
	struct hc h;
	uint64_t last = 0;
	const char *sid;
	char *path, *sub;
	int ch, follow = 0, n, rc;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "f", lo, NULL)) != -1)
		switch (ch) {
		case 'F':
			if (opt_seq("from", optarg, &last) == -1)
				return EXIT_USAGE;
			break;
		case 'f':
			follow = 1;
			break;
		default:
			return usage_of("session log");
		}
	if (argc - optind != 1)
		return usage_of("session log");
	sid = argv[optind];
	for (;;) {
		sub = xprintf("/log?after=%" PRIu64 "&limit=%d", last,
		    LOG_PAGE);
		path = session_path(sid, sub);
		free(sub);
		if ((rc = session_get(&h, path, sid)) != 0)
			return rc;
		if (print_page(h.body.p, h.body.len, &last, &n) == -1)
			errx(EXIT_ERR, "session %s: the log page is not a "
			    "JSON array of events", sid);
		hc_close(&h);
		flush_stdout();
		if (n == 0)
			break;
	}
	if (!follow)
		return 0;
	catch_sigint();
	follow_init(&f, sid, last);
	f.on_event = log_event;
	while (!interrupted) {
		if (f.h.fd == -1) {
			if (util_mono_ms() >= f.retry_at)
				follow_open(&f);
			if (f.h.fd != -1)
				continue;
		}
		pfd.fd = f.h.fd;
		pfd.events = POLLIN;
		if (poll(&pfd, f.h.fd != -1 ? 1 : 0,
		    follow_timeout(&f, 1000)) > 0)
			follow_read(&f);
	}
	follow_free(&f);
	return 0;
}
