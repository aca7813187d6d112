/*
 * Redis commands per second that idle sessions cost, by role: the figure
 * behind "followers that scale" (docs/design-notes.md).
 *
 *   store-idle -p PORT [-n SESSIONS] [-s SECONDS] [-f | -g] [-l LEASE_MS]
 *
 * Against a private redis-server on 127.0.0.1:PORT (nothing else may use
 * it): one store ("benchA/1") opens SESSIONS sessions as their owner; with
 * -f a second store on the same event base ("benchB/2") follows each of
 * them.  With -g there is no owner store: each session's owner key names
 * a process "ghost/1" whose heartbeat this program publishes (once a
 * second, as the feed's heartbeat would), and the one store follows them,
 * so Redis' calls are the followers' alone.  Once every open is done and a
 * lease has passed, it reads INFO commandstats, waits SECONDS, reads it
 * again and prints one line of JSON: Redis' calls per second over the span
 * (the commands inside scripts count too).  An owner renews its leases in
 * bursts every lease/3, so an owner's figure wants SECONDS a multiple of
 * that or long.
 */
#include <sys/types.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "parley/store.h"
#include "parley/util.h"

struct bench {
	struct event_base	*base;
	int			 opened;
	int			 failed;
	int			 role;		/* what the opens must get */
};

static void
opened(void *arg, int err, struct store_sess *s, enum store_role role)
{
	struct bench	*b = arg;

	if (err != 0 || s == NULL || (int)role != b->role) {
		b->failed++;
		fprintf(stderr, "store-idle: open: %s, role %d\n",
		    strerror(err), (int)role);
		return;
	}
	b->opened++;
}

static const struct store_events no_events = { NULL, NULL, NULL, NULL, NULL,
    NULL };

static struct store *
bstore(struct event_base *base, int port, const char *node,
    unsigned lease_ms)
{
	struct store_params	 p;
	struct store		*st;
	char			 url[64], err[512];

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	if ((st = store_open(url, "/nonexistent", STORE_FSYNC_NO, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "store-idle: %s\n", err);
		exit(1);
	}
	memset(&p, 0, sizeof(p));
	p.base = base;
	p.node = node;
	p.lease_ms = lease_ms;
	p.retention_ms = 3600 * 1000;
	p.ev = &no_events;
	if (store_attach(st, &p, err, sizeof(err)) == -1) {
		fprintf(stderr, "store-idle: %s\n", err);
		exit(1);
	}
	return st;
}

/* Runs the loop for ms milliseconds. */
static void
spin(struct event_base *base, unsigned ms)
{
	struct timeval	 tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Total calls in INFO commandstats (cmdstat_*:calls=N,...). */
static uint64_t
calls(redisContext *c)
{
	redisReply	*r;
	const char	*p;
	uint64_t	 n = 0;

	if ((r = redisCommand(c, "INFO commandstats")) == NULL ||
	    r->type != REDIS_REPLY_STRING) {
		fprintf(stderr, "store-idle: INFO failed\n");
		exit(1);
	}
	for (p = r->str; (p = strstr(p, ":calls=")) != NULL; p++)
		n += strtoull(p + 7, NULL, 10);
	freeReplyObject(r);
	return n;
}

/* Runs the loop for ms, publishing ghost/1's heartbeat once a second. */
static void
spin_ghost(struct event_base *base, redisContext *c, unsigned ms)
{
	redisReply	*r;

	for (;;) {
		if ((r = redisCommand(c, "PUBLISH parley:nodes ghost/1")) !=
		    NULL)
			freeReplyObject(r);
		if (ms <= 1000)
			break;
		spin(base, 1000);
		ms -= 1000;
	}
	spin(base, ms);
}

static void
open_all(struct bench *b, struct store *st, int n, int role, int create)
{
	char	 id[32];
	int	 i;

	b->opened = b->failed = 0;
	b->role = role;
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "idle-%d", i);
		store_open_async(st, id, create, 0, opened, b);
		if (i % 256 == 255)
			spin(b->base, 5);
	}
	while (b->opened + b->failed < n)
		spin(b->base, 50);
	if (b->failed > 0) {
		fprintf(stderr, "store-idle: %d opens failed\n", b->failed);
		exit(1);
	}
}

int
main(int argc, char **argv)
{
	struct bench	 b;
	struct store	*a, *f = NULL;
	redisContext	*c;
	uint64_t	 c0, c1, t0, t1;
	redisReply	*r;
	unsigned	 lease = 10000;
	int		 ch, i, port = 0, n = 100, secs = 15, follow = 0;
	int		 ghost = 0;

	while ((ch = getopt(argc, argv, "fgl:n:p:s:")) != -1) {
		switch (ch) {
		case 'f':
			follow = 1;
			break;
		case 'g':
			ghost = 1;
			break;
		case 'l':
			lease = (unsigned)atoi(optarg);
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 's':
			secs = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (port <= 0 || n <= 0 || secs <= 0 || lease < 1000 ||
	    (follow && ghost))
		goto usage;
	if ((c = redisConnect("127.0.0.1", port)) == NULL || c->err) {
		fprintf(stderr, "store-idle: cannot connect to port %d\n",
		    port);
		return 1;
	}
	memset(&b, 0, sizeof(b));
	b.base = event_base_new();
	if (ghost) {
		for (i = 0; i < n; i++) {
			if ((r = redisCommand(c, "SET parley:{idle-%d}:owner "
			    "ghost/1#1 PX 3600000", i)) == NULL) {
				fprintf(stderr, "store-idle: SET failed\n");
				return 1;
			}
			freeReplyObject(r);
		}
		a = bstore(b.base, port, "benchB/2", lease);
	} else
		a = bstore(b.base, port, "benchA/1", lease);
	if (follow)
		f = bstore(b.base, port, "benchB/2", lease);
	while (!store_healthy(a) || (f != NULL && !store_healthy(f)))
		spin(b.base, 50);
	if (ghost)
		open_all(&b, a, n, STORE_FOLLOWER, 0);
	else
		open_all(&b, a, n, STORE_OWNER, 1);
	if (f != NULL)
		open_all(&b, f, n, STORE_FOLLOWER, 0);
	/* Past the opens' own reads and a first renewal of every lease. */
	spin_ghost(b.base, c, lease / 2 + 1000);
	c0 = calls(c);
	t0 = util_mono_ms();
	if (ghost)
		spin_ghost(b.base, c, (unsigned)secs * 1000);
	else
		spin(b.base, (unsigned)secs * 1000);
	c1 = calls(c);
	t1 = util_mono_ms();
	printf("{\"sessions\": %d, \"mode\": \"%s\", \"lease_ms\": %u, "
	    "\"seconds\": %.2f, \"calls_per_s\": %.1f, "
	    "\"calls_per_session_s\": %.4f}\n", n, ghost ? "followers" :
	    follow ? "owners+followers" : "owners", lease, (t1 - t0) / 1000.0,
	    (c1 - c0) * 1000.0 / (t1 - t0), (c1 - c0) * 1000.0 / (t1 - t0) / n);
	store_close(a);
	if (f != NULL)
		store_close(f);
	redisFree(c);
	event_base_free(b.base);
	return 0;
usage:
	fprintf(stderr, "usage: store-idle -p PORT [-n SESSIONS] [-s SECONDS] "
	    "[-f | -g] [-l LEASE_MS]\n");
	return 2;
}
