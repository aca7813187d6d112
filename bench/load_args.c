/*
 * parley-load's command line: the options into g.o (see usage), checked
 * against each other, then the parent runs.
 */
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parley-load.h"

/* --- command line --- */

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr,
	    "usage: parley-load --proto parley|ws|socketio [--transport ws|sse]\n"
	    "    --host H --port P [--sources A.B.C.D-A.B.C.E] [--procs K]\n"
	    "    --clients N [--sessions S] [--prefix STR]\n"
	    "    --mode idle|stream|fanout|replay|storm|thoughts [--chat TEXT]\n"
	    "    [--tokens K] [--interval MS] [--from SEQ] [--expect N]\n"
	    "    [--thoughts K] [--private] [--category C] [--observe]\n"
	    "    [--duration SEC] [--timeout SEC] [--token BEARER]\n"
	    "    [--inflight N] [--json]\n");
	exit(2);
}

static unsigned long long
arg_num(const char *s, const char *what, unsigned long long lo,
    unsigned long long hi)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v < lo || v > hi)
		die("%s: expected a number from %llu to %llu, got '%s'", what,
		    lo, hi, s);
	return v;
}

static double
arg_secs(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || !(v >= 0) || v > 86400)
		die("%s: expected seconds, got '%s'", what, s);
	return v;
}

static uint32_t
arg_addr(const char *s)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		die("--sources: bad address '%s'", s);
	return ntohl(a.s_addr);
}

static void
parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "proto", required_argument, NULL, 'P' },
		{ "transport", required_argument, NULL, 'T' },
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "sources", required_argument, NULL, 'S' },
		{ "procs", required_argument, NULL, 'k' },
		{ "clients", required_argument, NULL, 'n' },
		{ "sessions", required_argument, NULL, 's' },
		{ "prefix", required_argument, NULL, 'x' },
		{ "mode", required_argument, NULL, 'm' },
		{ "chat", required_argument, NULL, 'c' },
		{ "tokens", required_argument, NULL, 't' },
		{ "thoughts", required_argument, NULL, 'K' },
		{ "private", no_argument, NULL, 'V' },
		{ "observe", no_argument, NULL, 'O' },
		{ "category", required_argument, NULL, 'C' },
		{ "interval", required_argument, NULL, 'i' },
		{ "from", required_argument, NULL, 'f' },
		{ "expect", required_argument, NULL, 'e' },
		{ "duration", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 'o' },
		{ "token", required_argument, NULL, 'a' },
		{ "inflight", required_argument, NULL, 'I' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 }
	};
	struct opts *o = &g.o;
	char *dash, buf[64];
	int ch, have_mode = 0, have_proto = 0;

	o->host = "127.0.0.1";
	o->port = 7777;
	o->src_lo = o->src_hi = 0x7f000001;
	o->procs = 1;
	o->chat = "hello";
	o->tokens = 50;
	o->thoughts = 100;
	o->category = "analysis";
	o->interval = 20;
	o->duration = 10;
	o->timeout = 60;
	o->inflight = 500;
	snprintf(o->prefix, sizeof(o->prefix), "load-%ld-%ld", (long)getpid(),
	    (long)time(NULL));
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'P':
			have_proto = 1;
			if (strcmp(optarg, "parley") == 0)
				o->proto = P_PARLEY;
			else if (strcmp(optarg, "ws") == 0)
				o->proto = P_WS;
			else if (strcmp(optarg, "socketio") == 0)
				o->proto = P_SIO;
			else
				die("--proto: parley, ws or socketio");
			break;
		case 'T':
			if (strcmp(optarg, "ws") == 0)
				o->transport = T_WS;
			else if (strcmp(optarg, "sse") == 0)
				o->transport = T_SSE;
			else
				die("--transport: ws or sse");
			break;
		case 'h':
			o->host = optarg;
			break;
		case 'p':
			o->port = (int)arg_num(optarg, "--port", 1, 65535);
			break;
		case 'S':
			snprintf(buf, sizeof(buf), "%s", optarg);
			if ((dash = strchr(buf, '-')) != NULL)
				*dash++ = '\0';
			o->src_lo = arg_addr(buf);
			o->src_hi = dash ? arg_addr(dash) : o->src_lo;
			if (o->src_hi < o->src_lo)
				die("--sources: empty range");
			break;
		case 'k':
			o->procs = (unsigned)arg_num(optarg, "--procs", 1, 256);
			break;
		case 'n':
			o->clients = (unsigned)arg_num(optarg, "--clients", 1,
			    10000000);
			break;
		case 's':
			o->sessions = (unsigned)arg_num(optarg, "--sessions",
			    1, 10000000);
			break;
		case 'x':
			if (strlen(optarg) == 0 || strlen(optarg) > 40)
				die("--prefix: 1 to 40 characters");
			snprintf(o->prefix, sizeof(o->prefix), "%s", optarg);
			break;
		case 'm':
			have_mode = 1;
			for (o->mode = 0; o->mode <= M_THOUGHTS; o->mode++)
				if (strcmp(optarg, mode_names[o->mode]) == 0)
					break;
			if (o->mode > M_THOUGHTS)
				die("--mode: idle, stream, fanout, replay, "
				    "storm or thoughts");
			break;
		case 'c':
			o->chat = optarg;
			break;
		case 't':
			o->tokens = (unsigned)arg_num(optarg, "--tokens", 1,
			    100000000);
			break;
		case 'K':
			/* A session keeps at most 256 (THOUGHT_MAX). */
			o->thoughts = (unsigned)arg_num(optarg, "--thoughts", 1,
			    256);
			break;
		case 'V':
			o->private = 1;
			break;
		case 'O':
			o->observe = 1;
			break;
		case 'C':
			o->category = optarg;
			break;
		case 'i':
			o->interval = (unsigned)arg_num(optarg, "--interval", 0,
			    60000);
			break;
		case 'f':
			o->from = arg_num(optarg, "--from", 0, UINT64_MAX / 2);
			o->have_from = 1;
			break;
		case 'e':
			o->expect = arg_num(optarg, "--expect", 1,
			    UINT32_MAX);
			break;
		case 'd':
			o->duration = arg_secs(optarg, "--duration");
			break;
		case 'o':
			o->timeout = arg_secs(optarg, "--timeout");
			break;
		case 'a':
			o->token = optarg;
			break;
		case 'I':
			o->inflight = (unsigned)arg_num(optarg, "--inflight", 1,
			    1000000);
			break;
		case 'j':
			o->json = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || !have_mode || !have_proto || o->clients == 0)
		usage();
	if (o->transport == T_SSE && o->proto != P_PARLEY)
		die("--transport sse is only for --proto parley");
	if (o->mode == M_FANOUT)
		o->sessions = 1;
	if (o->mode == M_THOUGHTS && (o->proto != P_PARLEY ||
	    o->transport != T_WS))
		die("--mode thoughts is for --proto parley over WebSocket");
	if (o->observe && o->mode != M_STREAM && o->mode != M_FANOUT)
		die("--observe is for --mode stream or fanout");
	if (o->sessions == 0 || o->sessions > o->clients)
		o->sessions = o->clients;
	if (o->mode == M_REPLAY && (o->expect == 0 || !o->have_from))
		die("--mode replay needs --from and --expect");
	if (o->procs > o->clients)
		o->procs = o->clients;
	if (inet_pton(AF_INET, o->host, &o->dst) != 1) {
		if (strcmp(o->host, "localhost") == 0)
			inet_pton(AF_INET, "127.0.0.1", &o->dst);
		else
			die("--host: an IPv4 address, got '%s'", o->host);
	}
	g.sa.sin_family = AF_INET;
	g.sa.sin_port = htons((uint16_t)o->port);
	g.sa.sin_addr = o->dst;
}

int
main(int argc, char *argv[])
{
	signal(SIGPIPE, SIG_IGN);
	g.trace = getenv("PARLEY_LOAD_TRACE") != NULL;
	parse_args(argc, argv);
	parent_main();
	return 0;
}
