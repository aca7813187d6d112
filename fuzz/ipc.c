/*
 * The IPC channel's reader (src/ipc.c), supervisor and worker alike:
 * bytes as recvmsg delivers them, a descriptor now and then (a fragment
 * whose cut byte has its high bit set brought one), through the same
 * dispatch code chan_read runs, into a receiver that checks each message
 * the way the worker does (ipc_conn_check, the scope matcher).  The fake
 * descriptors are /dev/null: whatever the channel does not hand over it
 * must close, which the harness counts.  chan_dispatch is static, hence
 * the include.
 */
#include <fcntl.h>

#include "../src/ipc.c"

#include "fuzz.h"

struct rx {
	int	messages;
	int	failed;
};

static int	nullfd = -1;
static int	open_fds;	/* descriptors given to the channel, not closed */

static int
on_msg(struct ipc_chan *c, const struct ipc_hdr *h, const void *payload,
    int fd, void *arg)
{
	struct rx		*rx = arg;
	const struct ipc_conn	*ic;
	const char		*why;

	if (h->type == 0) {
		rx->failed++;
		return 0;
	}
	rx->messages++;
	FUZZ_CHECK(ipc_check(h, fd != -1, &why) == 0);
	if (fd != -1) {
		close(fd);
		open_fds--;
	}
	if (h->type == IPC_CONN || h->type == IPC_REROUTE) {
		ic = payload;
		if (ipc_conn_check(ic, h->len, &why) == 0) {
			FUZZ_CHECK(ic->first_len <= ic->bytes_len);
			(void)ipc_scope_allows(ic->scope, ic->session);
			(void)ipc_scope_names(ic->scope, ic->session);
			(void)ipc_scope_allows(ic->scope, "s1");
		}
	}
	/* A receiver refuses what is not its to get (the worker: HELLO). */
	return h->type == IPC_HELLO ? -1 : 0;
}

static void
noop(evutil_socket_t fd, short ev, void *arg)
{
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct event_base *base;
	struct ipc_chan		*c;
	struct rx		 rx;
	struct fuzz_cut		 cut;
	const uint8_t		*frag;
	size_t			 n;

	fuzz_quiet();
	if (base == NULL) {
		base = event_base_new();
		nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (base == NULL || nullfd == -1)
			abort();
	}
	memset(&rx, 0, sizeof(rx));
	/* ipc_chan_new without the socket. */
	if ((c = calloc(1, sizeof(*c))) == NULL)
		abort();
	c->fd = -1;
	c->in = evbuffer_new();
	c->rev = event_new(base, -1, 0, noop, NULL);
	c->wev = event_new(base, -1, 0, noop, NULL);
	TAILQ_INIT(&c->out);
	c->cb = on_msg;
	c->arg = &rx;
	if (c->in == NULL || c->rev == NULL || c->wev == NULL)
		abort();
	fuzz_cut_init(&cut, data, size);
	/* chan_read, with the bytes and descriptors from the input. */
	while (!c->dead && (n = fuzz_cut_next(&cut, &frag)) > 0) {
		if (cut.flag) {
			if (c->nfds == IPC_MAX_FDS) {
				chan_fail(c);
				break;
			}
			c->fd_from[c->nfds] = c->rx;
			c->fd_to[c->nfds] = c->rx + n;
			if ((c->fds[c->nfds++] = dup(nullfd)) == -1)
				abort();
			open_fds++;
		}
		evbuffer_add(c->in, frag, n);
		c->rx += n;
		chan_dispatch(c);
	}
	fuzz_cut_done(&cut);
	FUZZ_CHECK(rx.failed <= 1);
	FUZZ_CHECK(c->dead == (rx.failed == 1));
	/* What was never handed over, ipc_chan_free closes. */
	open_fds -= c->nfds;
	FUZZ_CHECK(open_fds == 0);
	ipc_chan_free(c);
	return 0;
}
