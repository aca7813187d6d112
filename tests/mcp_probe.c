/*
 * mcp_probe: drives Parley's MCP client (workers/mcp*.c on a libevent loop,
 * exactly as a worker does) against one server, for conformance tests:
 *
 *	mcp_probe [-t SECONDS] [-c TOOL [-a ARGS_JSON] [-e SUBSTRING]] URL
 *
 * Configures one `mcp-server probe { url URL }`, waits until the server's
 * initialize + tools/list have succeeded, prints the tools, then (with -c)
 * calls TOOL with ARGS_JSON and requires a non-error result containing
 * SUBSTRING.  Exits 0 on success, 1 with a "mcp_probe: FAIL ..." line
 * otherwise.  URL comes last because the conformance runner appends it.
 *
 * It includes mcp*.c rather than linking them, like the unit tests do, to see
 * whether the server reached the ready state: the public API only says
 * "settled", which a failed initialize also is.
 */
#include "../workers/mcp.c"
#include "../workers/mcp_xfer.c"
#include "../workers/mcp_ask.c"

#include <unistd.h>

struct probe {
	struct event_base	*base;
	struct mcp_ctx		*mcp;
	struct event		*tick;
	struct mcp_call		*call;
	const char		*tool;
	const char		*args;
	const char		*expect;
	char			 full[MCP_MAX_NAME + 1];
	int			 rc;	/* -1 while running */
};

static void
probe_done(struct probe *p, int rc)
{
	p->rc = rc;
	event_base_loopbreak(p->base);
}

static void
probe_result(void *arg, int is_error, const char *text, const char *code)
{
	struct probe *p = arg;

	p->call = NULL;
	printf("result: is_error=%d code=%s text=%s\n", is_error,
	    code != NULL ? code : "(none)", text != NULL ? text : "(null)");
	if (is_error) {
		printf("mcp_probe: FAIL tool %s returned an error\n", p->tool);
		probe_done(p, 1);
	} else if (p->expect != NULL &&
	    (text == NULL || strstr(text, p->expect) == NULL)) {
		printf("mcp_probe: FAIL result lacks \"%s\"\n", p->expect);
		probe_done(p, 1);
	} else {
		printf("mcp_probe: OK\n");
		probe_done(p, 0);
	}
}

/* Polls until the one server is ready, then lists and calls. */
static void
probe_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct probe		*p = arg;
	struct mcp_srv		*srv = TAILQ_FIRST(&p->mcp->srvs);
	const struct mcp_tool	*tools;
	size_t			 i, n;
	struct timeval		 tv = { 0, 20 * 1000 };

	(void)fd;
	(void)ev;
	if (srv == NULL || srv->state != S_READY) {
		evtimer_add(p->tick, &tv);
		return;
	}
	n = mcp_tools(p->mcp, &tools);
	printf("ready: protocol %s, %zu tools\n", srv->version, n);
	for (i = 0; i < n; i++)
		printf("tool: %s\n", tools[i].full_name);
	if (p->tool == NULL) {
		printf("mcp_probe: OK\n");
		probe_done(p, 0);
		return;
	}
	snprintf(p->full, sizeof(p->full), "probe__%s", p->tool);
	printf("calling %s %s\n", p->full, p->args);
	p->call = mcp_call(p->mcp, p->full, p->args, 0, probe_result, p);
	if (p->call == NULL) {
		printf("mcp_probe: FAIL out of memory\n");
		probe_done(p, 1);
	}
}

static void
probe_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct probe *p = arg;

	(void)fd;
	(void)ev;
	printf("mcp_probe: FAIL timed out (%s)\n", p->call != NULL ?
	    "tool call unanswered" : "server never ready");
	probe_done(p, 1);
}

static void
usage(void)
{
	fprintf(stderr, "usage: mcp_probe [-t seconds] [-c tool [-a json] "
	    "[-e substring]] url\n");
	exit(1);
}

int
main(int argc, char *argv[])
{
	struct probe	 p;
	struct config	*conf;
	struct event	*deadline;
	struct timeval	 tv = { 0, 0 }, dl = { 20, 0 };
	char		 err[256], *text;
	const char	*url;
	long		 secs;
	int		 ch;

	memset(&p, 0, sizeof(p));
	p.args = "{}";
	p.rc = -1;
	while ((ch = getopt(argc, argv, "a:c:e:t:")) != -1) {
		switch (ch) {
		case 'a':
			p.args = optarg;
			break;
		case 'c':
			p.tool = optarg;
			break;
		case 'e':
			p.expect = optarg;
			break;
		case 't':
			secs = strtol(optarg, NULL, 10);
			if (secs < 1 || secs > 3600)
				usage();
			dl.tv_sec = secs;
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 1)
		usage();
	url = argv[optind];
	/* The config parser quotes; refuse what would need escaping. */
	if (strpbrk(url, "\"\\\n") != NULL || strlen(url) > 2048)
		usage();
	log_init("mcp_probe", 1, LOG_LEVEL_DEBUG);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (asprintf(&text, "mcp-server probe {\n url \"%s\"\n timeout 10s\n}\n",
	    url) == -1)
		return 1;
	if ((conf = config_parse_string("mcp_probe", text, err,
	    sizeof(err))) == NULL) {
		printf("mcp_probe: FAIL config: %s\n", err);
		return 1;
	}
	free(text);
	if ((p.base = event_base_new()) == NULL ||
	    (p.mcp = mcp_ctx_new(p.base, conf)) == NULL ||
	    (p.tick = evtimer_new(p.base, probe_tick, &p)) == NULL ||
	    (deadline = evtimer_new(p.base, probe_timeout, &p)) == NULL) {
		printf("mcp_probe: FAIL setup\n");
		return 1;
	}
	evtimer_add(p.tick, &tv);
	evtimer_add(deadline, &dl);
	event_base_dispatch(p.base);
	if (p.call != NULL)
		mcp_cancel(p.call);
	event_free(deadline);
	event_free(p.tick);
	mcp_ctx_free(p.mcp);
	event_base_free(p.base);
	config_free(conf);
	return p.rc == 0 ? 0 : 1;
}
