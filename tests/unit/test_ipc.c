/*
 * ipc: both ends of a socketpair on one event base, or one channel fed by
 * raw writes so the receiver sees exactly the bytes a broken peer sends.
 */
#include <sys/socket.h>
#include <sys/uio.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "parley/ipc.h"
#include "check_main.h"
#include "parley/metrics.h"

struct msg {
	uint16_t	 type;
	uint32_t	 flags;
	uint32_t	 len;
	unsigned char	*p;
	int		 fd;
};

struct rec {
	struct msg	*m;
	size_t		 n, cap;
	long		 fail_on;	/* index whose callback returns -1 */
	int		 zero;		/* type-0 calls */
	int		 after_zero;	/* calls after the first type-0 */
};

struct fx {
	struct event_base	*base;
	int			 sv[2];
	struct ipc_chan		*a, *b;		/* a is NULL for raw tests */
	struct rec		 ra, rb;
};

static int
rec_cb(struct ipc_chan *c, const struct ipc_hdr *h, const void *p, int fd,
    void *arg)
{
	struct rec *r = arg;
	struct msg *m;

	if (r->zero)
		r->after_zero++;
	if (h->type == 0) {
		ck_assert_int_eq(fd, -1);
		ck_assert_ptr_null(p);
		r->zero++;
		return 0;
	}
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 16;
		r->m = realloc(r->m, r->cap * sizeof(*r->m));
		ck_assert_ptr_nonnull(r->m);
	}
	m = &r->m[r->n++];
	m->type = h->type;
	m->flags = h->flags;
	m->len = h->len;
	m->fd = fd;
	m->p = malloc(h->len ? h->len : 1);
	ck_assert_ptr_nonnull(m->p);
	memcpy(m->p, p, h->len);
	if (r->fail_on == (long)r->n - 1)
		return -1;
	return 0;
}

static void
rec_free(struct rec *r)
{
	size_t i;

	for (i = 0; i < r->n; i++) {
		free(r->m[i].p);
		if (r->m[i].fd != -1)
			close(r->m[i].fd);
	}
	free(r->m);
	memset(r, 0, sizeof(*r));
}

/* Sets up a socketpair; both ends become channels unless raw. */
static void
fx_init(struct fx *f, int raw)
{
	memset(f, 0, sizeof(*f));
	f->ra.fail_on = f->rb.fail_on = -1;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, f->sv), 0);
	f->base = event_base_new();
	ck_assert_ptr_nonnull(f->base);
	if (!raw) {
		f->a = ipc_chan_new(f->base, f->sv[0], rec_cb, &f->ra);
		ck_assert_ptr_nonnull(f->a);
	}
	f->b = ipc_chan_new(f->base, f->sv[1], rec_cb, &f->rb);
	ck_assert_ptr_nonnull(f->b);
}

static void
fx_done(struct fx *f)
{
	if (f->a != NULL)
		ipc_chan_free(f->a);
	else if (f->sv[0] != -1)
		close(f->sv[0]);
	ipc_chan_free(f->b);
	event_base_free(f->base);
	rec_free(&f->ra);
	rec_free(&f->rb);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs the loop until cond holds; fails the test after 3 s. */
#define PUMP_UNTIL(f, cond) do {					\
	double t0_ = now();						\
	while (!(cond)) {						\
		event_base_loop((f)->base, EVLOOP_NONBLOCK);		\
		ck_assert_msg(now() - t0_ < 3.0, "timeout: %s", #cond);\
	}								\
} while (0)

/* Runs the loop for a while so anything that would arrive does. */
static void
pump_idle(struct fx *f)
{
	int i;

	for (i = 0; i < 30; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

static size_t
enc(unsigned char *buf, uint16_t ver, uint16_t type, uint32_t flags,
    const void *p, uint32_t len)
{
	struct ipc_hdr h;

	memset(&h, 0, sizeof(h));
	h.version = ver;
	h.type = type;
	h.flags = flags;
	h.len = len;
	memcpy(buf, &h, sizeof(h));
	if (p != NULL && len)
		memcpy(buf + sizeof(h), p, len);
	return sizeof(h) + (p != NULL ? len : 0);
}

static void
write_all(int s, const void *buf, size_t len)
{
	ck_assert_int_eq(write(s, buf, len), (ssize_t)len);
}

/* Sends len bytes with fd attached to the first byte. */
static void
send_fd(int s, const void *buf, size_t len, int fd)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct cmsghdr *cmsg;
	struct msghdr msg;
	struct iovec iov;

	memset(&msg, 0, sizeof(msg));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = (void *)buf;
	iov.iov_len = len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	ck_assert_int_eq(sendmsg(s, &msg, 0), (ssize_t)len);
}

static int
fd_closed(int fd)
{
	return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

static struct ipc_conn
mkconn(uint32_t kind, uint32_t bytes_len, uint64_t id)
{
	struct ipc_conn c;

	memset(&c, 0, sizeof(c));
	c.kind = kind;
	c.role = IPC_ROLE_USER;
	c.bytes_len = bytes_len;
	c.conn_id = id;
	strcpy(c.session, "s-1");
	strcpy(c.scope, "*");
	strcpy(c.peer, "127.0.0.1:5555");
	return c;
}

/* Writes through fd and reads the bytes back from rd. */
static void
check_pipe(int fd, int rd, const char *word)
{
	char buf[64];
	size_t n = strlen(word);

	write_all(fd, word, n);
	ck_assert_int_eq(read(rd, buf, sizeof(buf)), (ssize_t)n);
	ck_assert_int_eq(memcmp(buf, word, n), 0);
}

/* ---- ipc_check ---- */

static int
chk(uint16_t ver, uint16_t type, uint32_t flags, uint32_t len, int have_fd)
{
	struct ipc_hdr h;
	const char *why = NULL;
	int r;

	memset(&h, 0, sizeof(h));
	h.version = ver;
	h.type = type;
	h.flags = flags;
	h.len = len;
	r = ipc_check(&h, have_fd, &why);
	if (r == -1)
		ck_assert_msg(why != NULL && *why != '\0', "no reason given");
	return r;
}

START_TEST(check_valid)
{
	ck_assert_int_eq(chk(IPC_VERSION, IPC_HELLO, 0, sizeof(struct ipc_hello), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, IPC_F_FD, sizeof(struct ipc_conn), 1), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, IPC_F_FD, IPC_MAX_PAYLOAD, 1), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_REROUTE, IPC_F_FD, sizeof(struct ipc_conn) + 7, 1), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_RELEASED, 0, sizeof(struct ipc_sess), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_ADOPT, 0, sizeof(struct ipc_sess), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_STATS, 0, sizeof(struct ipc_stats), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_SHUTDOWN, 0, sizeof(struct ipc_shutdown), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_METRICS, 0, sizeof(struct metrics), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_QUERY, 0, sizeof(struct ipc_query), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_ANSWER, 0, sizeof(struct ipc_answer), 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_ANSWER, 0, sizeof(struct ipc_answer) +
	    IPC_ANSWER_MAX, 0), 0);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_LOG, 0, sizeof(struct ipc_log), 0), 0);
}
END_TEST

START_TEST(check_version)
{
	ck_assert_int_eq(chk(0, IPC_HELLO, 0, sizeof(struct ipc_hello), 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION + 1, IPC_HELLO, 0, sizeof(struct ipc_hello), 0), -1);
	ck_assert_int_eq(chk(0xffff, IPC_STATS, 0, sizeof(struct ipc_stats), 0), -1);
}
END_TEST

START_TEST(check_type)
{
	ck_assert_int_eq(chk(IPC_VERSION, 0, 0, 0, 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, 0, 0, sizeof(struct ipc_hello), 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_TYPE_MAX, 0, 0, 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_TYPE_MAX, 0, sizeof(struct ipc_shutdown), 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_TYPE_MAX + 1, 0, 8, 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, 0xffff, 0, 8, 0), -1);
}
END_TEST

START_TEST(check_sizes)
{
	static const struct { uint16_t t; size_t s; } fixed[] = {
		{ IPC_HELLO, sizeof(struct ipc_hello) },
		{ IPC_RELEASED, sizeof(struct ipc_sess) },
		{ IPC_ADOPT, sizeof(struct ipc_sess) },
		{ IPC_STATS, sizeof(struct ipc_stats) },
		{ IPC_SHUTDOWN, sizeof(struct ipc_shutdown) },
		{ IPC_METRICS, sizeof(struct metrics) },
		{ IPC_QUERY, sizeof(struct ipc_query) },
		{ IPC_LOG, sizeof(struct ipc_log) },
	};
	size_t i;

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		ck_assert_int_eq(chk(IPC_VERSION, fixed[i].t, 0, 0, 0), -1);
		ck_assert_int_eq(chk(IPC_VERSION, fixed[i].t, 0, (uint32_t)fixed[i].s - 1, 0), -1);
		ck_assert_int_eq(chk(IPC_VERSION, fixed[i].t, 0, (uint32_t)fixed[i].s + 1, 0), -1);
		ck_assert_int_eq(chk(IPC_VERSION, fixed[i].t, 0, 0xffffffffu, 0), -1);
	}
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, IPC_F_FD, 0, 1), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, IPC_F_FD, sizeof(struct ipc_conn) - 1, 1), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, IPC_F_FD, IPC_MAX_PAYLOAD + 1, 1), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_REROUTE, IPC_F_FD, 0xffffffffu, 1), -1);
	/* an answer carries at most IPC_ANSWER_MAX bytes of JSON */
	ck_assert_int_eq(chk(IPC_VERSION, IPC_ANSWER, 0, sizeof(struct ipc_answer) - 1, 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_ANSWER, 0, sizeof(struct ipc_answer) +
	    IPC_ANSWER_MAX + 1, 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_ANSWER, IPC_F_FD, sizeof(struct ipc_answer), 1), -1);
}
END_TEST

START_TEST(check_flags)
{
	ck_assert_int_eq(chk(IPC_VERSION, IPC_HELLO, 0x2, sizeof(struct ipc_hello), 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_STATS, 0x80000000u, sizeof(struct ipc_stats), 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, IPC_F_FD | 0x4, sizeof(struct ipc_conn), 1), -1);
}
END_TEST

START_TEST(check_fd)
{
	/* fd where none belongs */
	ck_assert_int_eq(chk(IPC_VERSION, IPC_HELLO, IPC_F_FD, sizeof(struct ipc_hello), 1), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_HELLO, 0, sizeof(struct ipc_hello), 1), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_SHUTDOWN, IPC_F_FD, sizeof(struct ipc_shutdown), 0), -1);
	/* fd missing */
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, 0, sizeof(struct ipc_conn), 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_CONN, IPC_F_FD, sizeof(struct ipc_conn), 0), -1);
	ck_assert_int_eq(chk(IPC_VERSION, IPC_REROUTE, 0, sizeof(struct ipc_conn), 1), -1);
}
END_TEST

/* ---- channel ---- */

START_TEST(send_every_type)
{
	struct fx f;
	struct ipc_hello hello = { 3, 4242 };
	struct ipc_sess sess;
	struct ipc_stats st = { 5, 6, 7, 0, 123456789012ull };
	struct ipc_shutdown sh = { IPC_SHUT_DRAIN, 2500 };
	struct ipc_conn cn = mkconn(IPC_CONN_HTTP, 5, 77);
	struct ipc_conn rr = mkconn(IPC_CONN_WS_CHAT, 3, 78);
	int p1[2], p2[2];

	memset(&sess, 0, sizeof(sess));
	strcpy(sess.session, "room:42");
	ck_assert_int_eq(pipe(p1), 0);
	ck_assert_int_eq(pipe(p2), 0);
	fx_init(&f, 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_CONN, p1[1], &cn, sizeof(cn), "GET /", 5), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_REROUTE, p2[1], &rr, sizeof(rr), "abc", 3), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_RELEASED, -1, &sess, sizeof(sess), NULL, 0), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_ADOPT, -1, NULL, 0, &sess, sizeof(sess)), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_STATS, -1, &st, 8, (char *)&st + 8, sizeof(st) - 8), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_SHUTDOWN, -1, &sh, sizeof(sh), NULL, 0), 0);
	ck_assert_uint_gt(ipc_pending(f.a), 0);
	PUMP_UNTIL(&f, f.rb.n == 7);
	ck_assert_uint_eq(ipc_pending(f.a), 0);

	ck_assert_int_eq(f.rb.m[0].type, IPC_HELLO);
	ck_assert_int_eq(f.rb.m[0].fd, -1);
	ck_assert_int_eq(f.rb.m[0].flags, 0);
	ck_assert_int_eq(memcmp(f.rb.m[0].p, &hello, sizeof(hello)), 0);

	ck_assert_int_eq(f.rb.m[1].type, IPC_CONN);
	ck_assert_int_eq(f.rb.m[1].flags, IPC_F_FD);
	ck_assert_uint_eq(f.rb.m[1].len, sizeof(cn) + 5);
	ck_assert_int_eq(memcmp(f.rb.m[1].p, &cn, sizeof(cn)), 0);
	ck_assert_int_eq(memcmp(f.rb.m[1].p + sizeof(cn), "GET /", 5), 0);
	ck_assert_int_ge(f.rb.m[1].fd, 0);

	ck_assert_int_eq(f.rb.m[2].type, IPC_REROUTE);
	ck_assert_uint_eq(f.rb.m[2].len, sizeof(rr) + 3);
	ck_assert_int_eq(memcmp(f.rb.m[2].p, &rr, sizeof(rr)), 0);
	ck_assert_int_eq(memcmp(f.rb.m[2].p + sizeof(rr), "abc", 3), 0);
	ck_assert_int_ge(f.rb.m[2].fd, 0);

	ck_assert_int_eq(f.rb.m[3].type, IPC_RELEASED);
	ck_assert_str_eq(((const struct ipc_sess *)f.rb.m[3].p)->session, "room:42");
	ck_assert_int_eq(f.rb.m[4].type, IPC_ADOPT);
	ck_assert_int_eq(memcmp(f.rb.m[4].p, &sess, sizeof(sess)), 0);
	ck_assert_int_eq(f.rb.m[5].type, IPC_STATS);
	ck_assert_int_eq(memcmp(f.rb.m[5].p, &st, sizeof(st)), 0);
	ck_assert_int_eq(f.rb.m[6].type, IPC_SHUTDOWN);
	ck_assert_int_eq(memcmp(f.rb.m[6].p, &sh, sizeof(sh)), 0);

	/* each descriptor arrived with its own message */
	check_pipe(f.rb.m[1].fd, p1[0], "one");
	check_pipe(f.rb.m[2].fd, p2[0], "two");
	ck_assert_int_eq(f.rb.zero, 0);
	ck_assert_uint_eq(f.ra.n, 0);

	/* and the other direction works too */
	ck_assert_int_eq(ipc_send(f.b, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0), 0);
	PUMP_UNTIL(&f, f.ra.n == 1);
	ck_assert_int_eq(f.ra.m[0].type, IPC_HELLO);
	fx_done(&f);
	close(p1[0]);
	close(p2[0]);
}
END_TEST

START_TEST(send_rejects)
{
	struct fx f;
	struct ipc_hello hello = { 1, 2 };
	struct ipc_conn cn = mkconn(IPC_CONN_HTTP, 0, 1);
	int p[2];

	fx_init(&f, 0);
	errno = 0;
	ck_assert_int_eq(ipc_send(f.a, 0, -1, &hello, sizeof(hello), NULL, 0), -1);
	ck_assert_int_eq(ipc_send(f.a, IPC_TYPE_MAX, -1, &hello, sizeof(hello), NULL, 0), -1);
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, -1, &hello, sizeof(hello) - 1, NULL, 0), -1);
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, -1, &hello, sizeof(hello), "x", 1), -1);
	ck_assert_int_eq(ipc_send(f.a, IPC_CONN, -1, &cn, sizeof(cn), NULL, 0), -1);

	/* a rejected message still closes the descriptor it was given */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, p[1], &hello, sizeof(hello), NULL, 0), -1);
	ck_assert(fd_closed(p[1]));
	close(p[0]);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_CONN, p[1], &cn, sizeof(cn) - 1, NULL, 0), -1);
	ck_assert(fd_closed(p[1]));
	close(p[0]);
	{
		size_t big = IPC_MAX_PAYLOAD - sizeof(cn) + 1;
		char *b = calloc(1, big);

		ck_assert_ptr_nonnull(b);
		ck_assert_int_eq(pipe(p), 0);
		ck_assert_int_eq(ipc_send(f.a, IPC_CONN, p[1], &cn, sizeof(cn), b, big), -1);
		ck_assert(fd_closed(p[1]));
		close(p[0]);
		/* exactly the limit is fine */
		ck_assert_int_eq(pipe(p), 0);
		ck_assert_int_eq(ipc_send(f.a, IPC_CONN, p[1], &cn, sizeof(cn), b, big - 1), 0);
		close(p[0]);
		free(b);
		PUMP_UNTIL(&f, f.rb.n == 1);
		ck_assert_uint_eq(f.rb.m[0].len, IPC_MAX_PAYLOAD);
	}
	ck_assert_uint_eq(ipc_pending(f.a), 0);
	ck_assert_int_eq(f.rb.zero, 0);
	fx_done(&f);
}
END_TEST

START_TEST(fd_pass)
{
	struct fx f;
	struct ipc_conn cn = mkconn(IPC_CONN_WS_CHAT, 4, 9);
	int p[2], fd, fl;
	char c;

	ck_assert_int_eq(pipe(p), 0);
	fx_init(&f, 0);
	cn.first_len = 4;
	ck_assert_int_eq(ipc_send(f.a, IPC_CONN, p[1], &cn, sizeof(cn), "ping", 4), 0);
	PUMP_UNTIL(&f, f.rb.n == 1);
	fd = f.rb.m[0].fd;
	ck_assert_int_ge(fd, 0);
	fl = fcntl(fd, F_GETFD);
	ck_assert_int_ne(fl, -1);
	ck_assert(fl & FD_CLOEXEC);
	check_pipe(fd, p[0], "hello through the pipe");
	/* once the receiver closes, nobody holds the write end */
	close(fd);
	f.rb.m[0].fd = -1;
	ck_assert_int_eq(read(p[0], &c, 1), 0);
	close(p[0]);
	fx_done(&f);
}
END_TEST

START_TEST(large_payload)
{
	struct fx f;
	size_t big = 1024 * 1024, i;
	struct ipc_conn cn = mkconn(IPC_CONN_HTTP, (uint32_t)big, 5);
	unsigned char *b = malloc(big);
	int p[2];

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < big; i++)
		b[i] = (unsigned char)(i * 7 + (i >> 11));
	ck_assert_int_eq(pipe(p), 0);
	fx_init(&f, 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_CONN, p[1], &cn, sizeof(cn), b, big), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, -1, &cn, sizeof(struct ipc_hello), NULL, 0), 0);
	ck_assert_uint_eq(ipc_pending(f.a), 2 * sizeof(struct ipc_hdr) + sizeof(cn) + big +
	    sizeof(struct ipc_hello));
	PUMP_UNTIL(&f, f.rb.n == 2);
	ck_assert_uint_eq(ipc_pending(f.a), 0);
	ck_assert_uint_eq(f.rb.m[0].len, sizeof(cn) + big);
	ck_assert_int_eq(memcmp(f.rb.m[0].p, &cn, sizeof(cn)), 0);
	ck_assert_int_eq(memcmp(f.rb.m[0].p + sizeof(cn), b, big), 0);
	ck_assert_int_eq(f.rb.m[1].type, IPC_HELLO);
	check_pipe(f.rb.m[0].fd, p[0], "big");
	close(p[0]);
	free(b);
	fx_done(&f);
}
END_TEST

START_TEST(large_fds_in_flight)
{
	struct fx f;
	size_t big = 300 * 1024;
	struct ipc_conn cn = mkconn(IPC_CONN_HTTP, (uint32_t)big, 0);
	unsigned char *b = calloc(1, big);
	int p[3][2], i;

	/* one read may hold the tail of a message and the next one's fd */
	ck_assert_ptr_nonnull(b);
	fx_init(&f, 0);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(pipe(p[i]), 0);
		cn.conn_id = (uint64_t)i;
		b[big - 1] = (unsigned char)i;
		ck_assert_int_eq(ipc_send(f.a, IPC_CONN, p[i][1], &cn,
		    sizeof(cn), b, big), 0);
	}
	PUMP_UNTIL(&f, f.rb.n == 3);
	for (i = 0; i < 3; i++) {
		memcpy(&cn, f.rb.m[i].p, sizeof(cn));
		ck_assert_uint_eq(cn.conn_id, (uint64_t)i);
		ck_assert_int_eq(f.rb.m[i].p[sizeof(cn) + big - 1], i);
		check_pipe(f.rb.m[i].fd, p[i][0], "mine");
		close(p[i][0]);
	}
	free(b);
	fx_done(&f);
}
END_TEST

START_TEST(many_back_to_back)
{
	struct fx f;
	struct ipc_stats st;
	struct ipc_conn cn;
	enum { N = 3000, EVERY = 100 };
	int pipes[N / EVERY][2];
	int i, np = 0, k;
	char word[16];

	fx_init(&f, 0);
	for (i = 0; i < N; i++) {
		if (i % EVERY == 0) {
			ck_assert_int_eq(pipe(pipes[np]), 0);
			cn = mkconn(IPC_CONN_HTTP, 4, (uint64_t)i);
			ck_assert_int_eq(ipc_send(f.a, IPC_CONN, pipes[np][1],
			    &cn, sizeof(cn), &i, sizeof(i)), 0);
			np++;
			continue;
		}
		memset(&st, 0, sizeof(st));
		st.events = (uint64_t)i;
		ck_assert_int_eq(ipc_send(f.a, IPC_STATS, -1, &st, sizeof(st), NULL, 0), 0);
	}
	PUMP_UNTIL(&f, f.rb.n == N);
	for (i = 0, k = 0; i < N; i++) {
		if (i % EVERY == 0) {
			ck_assert_int_eq(f.rb.m[i].type, IPC_CONN);
			memcpy(&cn, f.rb.m[i].p, sizeof(cn));
			ck_assert_uint_eq(cn.conn_id, (uint64_t)i);
			/* the fd belongs to this message, not a neighbour */
			snprintf(word, sizeof(word), "w%d", i);
			check_pipe(f.rb.m[i].fd, pipes[k][0], word);
			close(pipes[k][0]);
			k++;
			continue;
		}
		ck_assert_int_eq(f.rb.m[i].type, IPC_STATS);
		ck_assert_int_eq(f.rb.m[i].fd, -1);
		memcpy(&st, f.rb.m[i].p, sizeof(st));
		ck_assert_uint_eq(st.events, (uint64_t)i);
	}
	ck_assert_int_eq(f.rb.zero, 0);
	fx_done(&f);
}
END_TEST

START_TEST(flush_blocks_until_written)
{
	struct fx f;
	struct ipc_hello hello = { 8, 9 };

	fx_init(&f, 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0), 0);
	ipc_flush(f.a, 1000);
	ck_assert_uint_eq(ipc_pending(f.a), 0);
	PUMP_UNTIL(&f, f.rb.n == 1);
	ck_assert_int_eq(memcmp(f.rb.m[0].p, &hello, sizeof(hello)), 0);
	fx_done(&f);
}
END_TEST

/* A broken peer: exactly one type-0 call and nothing after it. */
static void
expect_broken(struct fx *f)
{
	unsigned char buf[64];
	struct ipc_hello hello = { 1, 1 };
	size_t n;

	PUMP_UNTIL(f, f->rb.zero == 1);
	/* a valid message afterwards is not read */
	n = enc(buf, IPC_VERSION, IPC_HELLO, 0, &hello, sizeof(hello));
	(void)write(f->sv[0], buf, n);
	pump_idle(f);
	ck_assert_int_eq(f->rb.zero, 1);
	ck_assert_int_eq(f->rb.after_zero, 0);
	ck_assert_uint_eq(f->rb.n, 0);
	/* nor can one be sent on a dead channel */
	ck_assert_int_eq(ipc_send(f->b, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0), -1);
}

START_TEST(bad_garbage)
{
	struct fx f;
	unsigned char g[sizeof(struct ipc_hdr) + 8];

	memset(g, 0xa5, sizeof(g));
	fx_init(&f, 1);
	write_all(f.sv[0], g, sizeof(g));
	expect_broken(&f);
	fx_done(&f);
}
END_TEST

START_TEST(bad_version)
{
	struct fx f;
	unsigned char buf[64];
	struct ipc_hello hello = { 1, 1 };
	size_t n;

	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION + 1, IPC_HELLO, 0, &hello, sizeof(hello));
	write_all(f.sv[0], buf, n);
	expect_broken(&f);
	fx_done(&f);
}
END_TEST

START_TEST(bad_header_only)
{
	struct fx f;
	unsigned char buf[64];
	size_t n;

	/* rejected from the header alone, before any payload arrives */
	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_CONN, IPC_F_FD, NULL, 0xffffffffu);
	write_all(f.sv[0], buf, n);
	expect_broken(&f);
	fx_done(&f);

	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_HELLO, 0, NULL, sizeof(struct ipc_hello) + 1);
	write_all(f.sv[0], buf, n);
	expect_broken(&f);
	fx_done(&f);

	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_TYPE_MAX, 0, NULL, 8);
	write_all(f.sv[0], buf, n);
	expect_broken(&f);
	fx_done(&f);

	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_STATS, 0x10, NULL, sizeof(struct ipc_stats));
	write_all(f.sv[0], buf, n);
	expect_broken(&f);
	fx_done(&f);
}
END_TEST

START_TEST(bad_fd_missing)
{
	struct fx f;
	unsigned char buf[sizeof(struct ipc_hdr) + sizeof(struct ipc_conn)];
	struct ipc_conn cn = mkconn(IPC_CONN_HTTP, 0, 1);
	size_t n;

	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_CONN, IPC_F_FD, &cn, sizeof(cn));
	write_all(f.sv[0], buf, n);
	expect_broken(&f);
	fx_done(&f);
}
END_TEST

START_TEST(bad_fd_unexpected)
{
	struct fx f;
	unsigned char buf[64];
	struct ipc_hello hello = { 1, 2 };
	size_t n;
	int p[2];

	/* a descriptor riding on a message that has no IPC_F_FD */
	ck_assert_int_eq(pipe(p), 0);
	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_HELLO, 0, &hello, sizeof(hello));
	send_fd(f.sv[0], buf, n, p[1]);
	close(p[1]);
	pump_idle(&f);
	ck_assert_msg(f.rb.zero == 1 && f.rb.n == 0,
	    "stray fd accepted: %zu message(s), %d type-0 call(s)",
	    f.rb.n, f.rb.zero);
	close(p[0]);
	fx_done(&f);
}
END_TEST

START_TEST(peer_close)
{
	struct fx f;
	unsigned char buf[64];
	struct ipc_hello hello = { 1, 2 };
	size_t n;

	fx_init(&f, 1);
	close(f.sv[0]);
	f.sv[0] = -1;
	PUMP_UNTIL(&f, f.rb.zero == 1);
	pump_idle(&f);
	ck_assert_int_eq(f.rb.zero, 1);
	ck_assert_uint_eq(f.rb.n, 0);
	fx_done(&f);

	/* closing mid-message: the partial message is never delivered */
	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_HELLO, 0, &hello, sizeof(hello));
	write_all(f.sv[0], buf, n - 1);
	pump_idle(&f);
	ck_assert_uint_eq(f.rb.n, 0);
	close(f.sv[0]);
	f.sv[0] = -1;
	PUMP_UNTIL(&f, f.rb.zero == 1);
	ck_assert_uint_eq(f.rb.n, 0);
	fx_done(&f);

	/* channel to channel: freeing one end tells the other */
	fx_init(&f, 0);
	ipc_chan_free(f.a);
	f.a = NULL;
	f.sv[0] = -1;
	PUMP_UNTIL(&f, f.rb.zero == 1);
	fx_done(&f);
}
END_TEST

START_TEST(callback_rejects)
{
	struct fx f;
	struct ipc_hello hello = { 1, 2 };

	fx_init(&f, 0);
	f.rb.fail_on = 0;
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0), 0);
	ck_assert_int_eq(ipc_send(f.a, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0), 0);
	PUMP_UNTIL(&f, f.rb.zero == 1);
	pump_idle(&f);
	ck_assert_uint_eq(f.rb.n, 1);
	ck_assert_int_eq(f.rb.zero, 1);
	ck_assert_int_eq(f.rb.after_zero, 0);
	ck_assert_int_eq(ipc_send(f.b, IPC_HELLO, -1, &hello, sizeof(hello), NULL, 0), -1);
	fx_done(&f);
}
END_TEST

START_TEST(byte_by_byte)
{
	struct fx f;
	unsigned char buf[256];
	struct ipc_stats st = { 1, 2, 3, 0, 44 };
	struct ipc_sess sess;
	size_t n, i;

	memset(&sess, 0, sizeof(sess));
	strcpy(sess.session, "abc");
	fx_init(&f, 1);
	n = enc(buf, IPC_VERSION, IPC_STATS, 0, &st, sizeof(st));
	n += enc(buf + n, IPC_VERSION, IPC_ADOPT, 0, &sess, sizeof(sess));
	for (i = 0; i < n; i++) {
		write_all(f.sv[0], buf + i, 1);
		/* let the channel read each byte on its own */
		event_base_loop(f.base, EVLOOP_NONBLOCK);
		event_base_loop(f.base, EVLOOP_NONBLOCK);
		if (i + 1 < sizeof(struct ipc_hdr) + sizeof(st))
			ck_assert_uint_eq(f.rb.n, 0);
	}
	PUMP_UNTIL(&f, f.rb.n == 2);
	ck_assert_int_eq(f.rb.m[0].type, IPC_STATS);
	ck_assert_int_eq(memcmp(f.rb.m[0].p, &st, sizeof(st)), 0);
	ck_assert_int_eq(f.rb.m[1].type, IPC_ADOPT);
	ck_assert_str_eq(((const struct ipc_sess *)f.rb.m[1].p)->session, "abc");
	ck_assert_int_eq(f.rb.zero, 0);
	fx_done(&f);
}
END_TEST

START_TEST(scope_patterns)
{
	ck_assert(ipc_scope_allows("", "any"));
	ck_assert(!ipc_scope_names("", "any"));
	ck_assert(ipc_scope_allows("s1", "s1"));
	ck_assert(!ipc_scope_allows("s1", "s10"));
	ck_assert(!ipc_scope_allows("s10", "s1"));
	ck_assert(ipc_scope_allows("a\nteam-*", "team-7"));
	ck_assert(ipc_scope_allows("a\nteam-*", "a"));
	ck_assert(!ipc_scope_allows("a\nteam-*", "tea"));
	ck_assert(ipc_scope_allows("*", "x"));
	ck_assert(!ipc_scope_names("a\nteam-*", "team-7"));
	ck_assert(ipc_scope_names("a\nteam-*", "a"));
	ck_assert(!ipc_scope_allows("a\n\nb", "c"));
	ck_assert(!ipc_scope_allows("a\n", ""));
}
END_TEST

/* Who may use an owned session: its subject, an admin, or a share. */
START_TEST(owner_checks)
{
	struct ipc_conn ic;

	memset(&ic, 0, sizeof(ic));
	ic.role = IPC_ROLE_USER;
	/* unowned: anyone the scope lets in */
	ck_assert(ipc_owner_allows(NULL, &ic, "s1"));
	ck_assert(ipc_owner_allows("", &ic, "s1"));
	/* a static token (no subject) on an owned session: no */
	ck_assert(!ipc_owner_allows("alice", &ic, "s1"));
	/* the owner */
	strcpy(ic.subject, "alice");
	ck_assert(ipc_owner_allows("alice", &ic, "s1"));
	/* another subject, unscoped or through a pattern: no */
	strcpy(ic.subject, "bob");
	ck_assert(!ipc_owner_allows("alice", &ic, "s1"));
	strcpy(ic.scope, "s*");
	ck_assert(!ipc_owner_allows("alice", &ic, "s1"));
	/* a share names the id itself */
	strcpy(ic.scope, "x\ns1");
	ck_assert(ipc_owner_allows("alice", &ic, "s1"));
	ck_assert(!ipc_owner_allows("alice", &ic, "s2"));
	/* admin, with or without a subject */
	ic.scope[0] = '\0';
	ic.role = IPC_ROLE_ADMIN;
	ck_assert(ipc_owner_allows("alice", &ic, "s1"));
	ic.subject[0] = '\0';
	ck_assert(ipc_owner_allows("alice", &ic, "s1"));
	/* a subject is compared whole */
	ic.role = IPC_ROLE_USER;
	strcpy(ic.subject, "alic");
	ck_assert(!ipc_owner_allows("alice", &ic, "s1"));
}
END_TEST

/* The worker's form (strings held apart) answers as the wire's. */
START_TEST(who_checks)
{
	ck_assert(ipc_who_allows(NULL, IPC_ROLE_USER, "", "", "s1"));
	ck_assert(!ipc_who_allows("alice", IPC_ROLE_USER, "", "", "s1"));
	ck_assert(ipc_who_allows("alice", IPC_ROLE_USER, "alice", "", "s1"));
	ck_assert(!ipc_who_allows("alice", IPC_ROLE_USER, "bob", "s*", "s1"));
	ck_assert(ipc_who_allows("alice", IPC_ROLE_USER, "bob", "x\ns1",
	    "s1"));
	ck_assert(!ipc_who_allows("alice", IPC_ROLE_USER, "bob", "x\ns1",
	    "s2"));
	ck_assert(ipc_who_allows("alice", IPC_ROLE_ADMIN, "", "", "s1"));
}
END_TEST

START_TEST(byte_by_byte_fd)
{
	struct fx f;
	unsigned char buf[sizeof(struct ipc_hdr) + sizeof(struct ipc_conn) + 8];
	struct ipc_conn cn = mkconn(IPC_CONN_HTTP, 8, 3);
	unsigned char pl[sizeof(struct ipc_conn) + 8];
	size_t n, i;
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	fx_init(&f, 1);
	memcpy(pl, &cn, sizeof(cn));
	memcpy(pl + sizeof(cn), "GET / HT", 8);
	n = enc(buf, IPC_VERSION, IPC_CONN, IPC_F_FD, pl, sizeof(pl));
	/* header split 5 + 1 + 1 ...: the fd rides on the first byte */
	send_fd(f.sv[0], buf, 5, p[1]);
	close(p[1]);
	event_base_loop(f.base, EVLOOP_NONBLOCK);
	for (i = 5; i < n; i++) {
		write_all(f.sv[0], buf + i, 1);
		event_base_loop(f.base, EVLOOP_NONBLOCK);
		event_base_loop(f.base, EVLOOP_NONBLOCK);
		if (i + 1 < n)
			ck_assert_uint_eq(f.rb.n, 0);
	}
	PUMP_UNTIL(&f, f.rb.n == 1);
	ck_assert_int_eq(f.rb.zero, 0);
	ck_assert_uint_eq(f.rb.m[0].len, sizeof(cn) + 8);
	ck_assert_int_eq(memcmp(f.rb.m[0].p + sizeof(cn), "GET / HT", 8), 0);
	check_pipe(f.rb.m[0].fd, p[0], "x");
	close(p[0]);
	fx_done(&f);
}
END_TEST

static Suite *
ipc_suite(void)
{
	Suite *s = suite_create("ipc");
	TCase *tc;

	tc = tcase_create("check");
	tcase_add_test(tc, check_valid);
	tcase_add_test(tc, check_version);
	tcase_add_test(tc, check_type);
	tcase_add_test(tc, check_sizes);
	tcase_add_test(tc, check_flags);
	tcase_add_test(tc, check_fd);
	suite_add_tcase(s, tc);

	tc = tcase_create("channel");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, send_every_type);
	tcase_add_test(tc, send_rejects);
	tcase_add_test(tc, fd_pass);
	tcase_add_test(tc, large_payload);
	tcase_add_test(tc, large_fds_in_flight);
	tcase_add_test(tc, many_back_to_back);
	tcase_add_test(tc, flush_blocks_until_written);
	tcase_add_test(tc, bad_garbage);
	tcase_add_test(tc, bad_version);
	tcase_add_test(tc, bad_header_only);
	tcase_add_test(tc, bad_fd_missing);
	tcase_add_test(tc, bad_fd_unexpected);
	tcase_add_test(tc, peer_close);
	tcase_add_test(tc, callback_rejects);
	tcase_add_test(tc, byte_by_byte);
	tcase_add_test(tc, byte_by_byte_fd);
	tcase_add_test(tc, scope_patterns);
	tcase_add_test(tc, owner_checks);
	tcase_add_test(tc, who_checks);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	/* a write into a pipe nobody reads must fail a check, not kill us */
	signal(SIGPIPE, SIG_IGN);
	return check_run(ipc_suite());
}
