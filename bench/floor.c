/*
 * bench/floor: what the stream scenario cannot go below on this machine,
 * measured alone.  A server that streams an event to a client makes at
 * least one loopback send of the frame, and a server that logs it at least
 * its share of one write per batch; this measures those two costs in CPU
 * time of the calling thread (what a server's CPU figure counts), with
 * nothing else around them.
 *
 *	bench/floor [-c CONNS] [-n ROUNDS] [-s BYTES] [-b EVENTS-PER-WRITE]
 *	    [-p PAUSE-US] [-d DIR]
 *
 * CONNS loopback TCP connections (default 1000, as the stream scenario's
 * clients); each round sends one BYTES-byte frame (default 160, a token
 * event) on each.  The clients are another process asleep in epoll_wait,
 * as parley-load is, so that a send pays for waking its reader as it does
 * in the scenario; that process reads everything and says so before the
 * next round (-p: microseconds to pause between rounds, default 1000,
 * so that it is asleep again).  Then ROUNDS x CONNS records of BYTES
 * are written to a file in DIR (default /tmp), EVENTS-PER-WRITE to a
 * write(2) (default 1: one write per event; a group commit writes a loop
 * pass's events at once).  Prints one JSON line: microseconds of CPU per
 * send, per write and per event written, and what 50,000 events/s (1,000
 * sessions at 50 tokens/s) cost at that rate as % of a core.  Plain C and
 * POSIX.
 */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double
cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

/*
 * The clients: reads every frame of a round (conns x size bytes) as they
 * come, sleeping in epoll_wait between them, then writes a byte to ack.
 */
static void
reader(int *cfd, int conns, int rounds, int size, int ack)
{
	struct epoll_event ev, evs[256];
	char buf[65536];
	long want = (long)conns * size, got;
	int ep, i, k, r;
	ssize_t n;

	if ((ep = epoll_create1(0)) == -1)
		die("epoll_create1");
	for (i = 0; i < conns; i++) {
		ev.events = EPOLLIN;
		ev.data.fd = cfd[i];
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cfd[i], &ev) == -1)
			die("epoll_ctl");
	}
	for (r = 0; r < rounds; r++) {
		for (got = 0; got < want; ) {
			if ((k = epoll_wait(ep, evs, 256, 10000)) <= 0)
				die("epoll_wait (the sender stopped?)");
			for (i = 0; i < k; i++)
				while ((n = recv(evs[i].data.fd, buf,
				    sizeof(buf), MSG_DONTWAIT)) > 0)
					got += n;
		}
		if (write(ack, "", 1) != 1)
			die("ack");
	}
	_exit(0);
}

int
main(int argc, char **argv)
{
	int conns = 1000, rounds = 200, size = 160, batch = 1, pause = 1000;
	int ch, i, r, one = 1, ackp[2];
	pid_t pid;
	char c;
	const char *dir = "/tmp";
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int lfd, *cfd, *sfd, wfd;
	char *frame, *wbuf, path[4096];
	double t, send_us = 0, write_us;
	long events, writes, left;

	while ((ch = getopt(argc, argv, "c:n:s:b:p:d:")) != -1) {
		switch (ch) {
		case 'p': pause = atoi(optarg); break;
		case 'c': conns = atoi(optarg); break;
		case 'n': rounds = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 'd': dir = optarg; break;
		default:
			fprintf(stderr, "usage: floor [-c conns] [-n rounds] "
			    "[-s bytes] [-b events-per-write] [-p pause-us] "
			    "[-d dir]\n");
			return 2;
		}
	}
	if (conns < 1 || conns > 100000 || rounds < 1 || size < 1 ||
	    size > 65536 || batch < 1 || batch > 100000 || pause < 0 ||
	    pause > 1000000) {
		fprintf(stderr, "floor: conns 1..100000, rounds >= 1, bytes "
		    "1..65536, events-per-write 1..100000, pause 0..1000000 "
		    "us\n");
		return 2;
	}
	if ((cfd = calloc((size_t)conns, sizeof(int))) == NULL ||
	    (sfd = calloc((size_t)conns, sizeof(int))) == NULL ||
	    (frame = malloc((size_t)size)) == NULL ||
	    (wbuf = malloc((size_t)size * (size_t)batch)) == NULL)
		die("malloc");
	memset(frame, 't', (size_t)size);
	memset(wbuf, 't', (size_t)size * (size_t)batch);

	/* The pairs: a server end (sends) and a client end (reads). */
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((lfd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(lfd, 4096) == -1 ||
	    getsockname(lfd, (struct sockaddr *)&sin, &sl) == -1)
		die("listen");
	for (i = 0; i < conns; i++) {
		if ((cfd[i] = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
		    connect(cfd[i], (struct sockaddr *)&sin, sizeof(sin)) ==
		    -1 || (sfd[i] = accept(lfd, NULL, NULL)) == -1)
			die("connect (raise ulimit -n?)");
		/* As parleyd's accepted sockets, and non-blocking reads. */
		setsockopt(sfd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	if (pipe(ackp) == -1 || (pid = fork()) == -1)
		die("fork");
	if (pid == 0) {
		close(ackp[0]);
		reader(cfd, conns, rounds, size, ackp[1]);
	}
	close(ackp[1]);

	for (r = 0; r < rounds; r++) {
		t = cpu_us();
		for (i = 0; i < conns; i++)
			if (send(sfd[i], frame, (size_t)size, MSG_DONTWAIT |
			    MSG_NOSIGNAL) != size)
				die("send");
		send_us += cpu_us() - t;
		if (read(ackp[0], &c, 1) != 1)
			die("the reader died");
		if (pause > 0)
			usleep((useconds_t)pause);
	}
	waitpid(pid, NULL, 0);

	/* One write per batch of records to a log file. */
	snprintf(path, sizeof(path), "%s/parley-floor.%ld", dir,
	    (long)getpid());
	if ((wfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600)) ==
	    -1)
		die(path);
	unlink(path);
	events = (long)rounds * conns;
	writes = (events + batch - 1) / batch;
	t = cpu_us();
	for (left = events; left > 0; left -= batch) {
		size_t k = (size_t)(left < batch ? left : batch);

		if (write(wfd, wbuf, k * (size_t)size) != (ssize_t)(k * size))
			die("write");
	}
	write_us = cpu_us() - t;
	close(wfd);

	events = (long)rounds * conns;
	printf("{\"conns\":%d,\"rounds\":%d,\"bytes\":%d,"
	    "\"events_per_write\":%d,\"send_us\":%.3f,"
	    "\"write_us\":%.3f,\"write_us_per_event\":%.3f,"
	    "\"send_pct_at_50k_per_s\":%.1f,\"write_pct_at_50k_per_s\":%.1f}\n",
	    conns, rounds, size, batch, send_us / (double)events,
	    write_us / (double)writes,
	    write_us / (double)events,
	    send_us / (double)events * 50000 / 1e6 * 100,
	    write_us / (double)events * 50000 / 1e6 * 100);
	return 0;
}
