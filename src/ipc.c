#include <sys/socket.h>
#include <sys/uio.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "parley/ipc.h"
#include "parley/log.h"
#include "parley/metrics.h"
#include "parley/store.h"

#define IPC_MAX_FDS	16	/* fds in flight before the header that owns them */

struct ipc_out {
	TAILQ_ENTRY(ipc_out)	 entry;
	unsigned char		*data;
	size_t			 len;
	size_t			 off;
	int			 fd;
};

struct ipc_chan {
	int			 fd;
	struct event		*rev;
	struct event		*wev;
	struct evbuffer		*in;
	TAILQ_HEAD(, ipc_out)	 out;
	size_t			 out_bytes;
	int			 fds[IPC_MAX_FDS];
	uint64_t		 fd_from[IPC_MAX_FDS];	/* stream offsets of the */
	uint64_t		 fd_to[IPC_MAX_FDS];	/* read that brought it */
	int			 nfds;
	uint64_t		 rx;		/* bytes received so far */
	uint64_t		 msg_at;	/* stream offset of the next message */
	unsigned char		*scratch;	/* aligned copy of a payload */
	size_t			 scratch_len;
	int			 dead;
	ipc_cb			 cb;
	void			*arg;
};

int
ipc_check(const struct ipc_hdr *h, int have_fd, const char **why)
{
	static const struct {
		size_t	min, max;
		int	fd;
	} rule[IPC_TYPE_MAX] = {
		[IPC_HELLO] = { sizeof(struct ipc_hello), sizeof(struct ipc_hello), 0 },
		[IPC_CONN] = { sizeof(struct ipc_conn), IPC_MAX_PAYLOAD, 1 },
		[IPC_REROUTE] = { sizeof(struct ipc_conn), IPC_MAX_PAYLOAD, 1 },
		[IPC_RELEASED] = { sizeof(struct ipc_sess), sizeof(struct ipc_sess), 0 },
		[IPC_ADOPT] = { sizeof(struct ipc_sess), sizeof(struct ipc_sess), 0 },
		[IPC_STATS] = { sizeof(struct ipc_stats), sizeof(struct ipc_stats), 0 },
		[IPC_SHUTDOWN] = { sizeof(struct ipc_shutdown), sizeof(struct ipc_shutdown), 0 },
		[IPC_METRICS] = { sizeof(struct metrics), sizeof(struct metrics), 0 },
		[IPC_QUERY] = { sizeof(struct ipc_query), sizeof(struct ipc_query), 0 },
		[IPC_ANSWER] = { sizeof(struct ipc_answer), sizeof(struct ipc_answer) + IPC_ANSWER_MAX, 0 },
		[IPC_LOG] = { sizeof(struct ipc_log), sizeof(struct ipc_log), 0 },
	};

	if (h->version != IPC_VERSION) {
		*why = "wrong ipc version";
		return -1;
	}
	if (h->type == 0 || h->type >= IPC_TYPE_MAX) {
		*why = "unknown message type";
		return -1;
	}
	if (h->len < rule[h->type].min || h->len > rule[h->type].max) {
		*why = "payload size wrong for its type";
		return -1;
	}
	if ((h->flags & ~IPC_F_FD) != 0) {
		*why = "unknown flags";
		return -1;
	}
	if (rule[h->type].fd != ((h->flags & IPC_F_FD) != 0) ||
	    rule[h->type].fd != have_fd) {
		*why = "descriptor missing or unexpected";
		return -1;
	}
	return 0;
}

int
ipc_conn_check(const struct ipc_conn *ic, size_t len, const char **why)
{
	*why = "malformed connection hand-off";
	if (len < sizeof(*ic) || ic->bytes_len != len - sizeof(*ic) ||
	    memchr(ic->session, '\0', sizeof(ic->session)) == NULL ||
	    memchr(ic->scope, '\0', sizeof(ic->scope)) == NULL ||
	    memchr(ic->subject, '\0', sizeof(ic->subject)) == NULL ||
	    memchr(ic->peer, '\0', sizeof(ic->peer)) == NULL ||
	    ic->role < IPC_ROLE_OBSERVER || ic->role > IPC_ROLE_ADMIN ||
	    (ic->kind != IPC_CONN_HTTP && ic->kind != IPC_CONN_WS_CHAT) ||
	    ic->first_len > ic->bytes_len ||
	    (ic->flags & ~(uint32_t)IPC_CONN_F_NOT_HELD) != 0 ||
	    (ic->session[0] != '\0' && !store_valid_id(ic->session)) ||
	    (ic->kind == IPC_CONN_WS_CHAT &&
	    (ic->session[0] == '\0' || ic->first_len == 0)))
		return -1;
	return 0;
}

static const char *const role_names[] = {
	[IPC_ROLE_OBSERVER] = "observer", [IPC_ROLE_USER] = "user",
	[IPC_ROLE_AGENT] = "agent", [IPC_ROLE_ADMIN] = "admin",
	[IPC_ROLE_METRICS] = "metrics",
};

const char *
ipc_role_name(int role)
{
	return role > 0 && (size_t)role < sizeof(role_names) /
	    sizeof(*role_names) ? role_names[role] : NULL;
}

int
ipc_role_parse(const char *name)
{
	int r;

	for (r = 1; ipc_role_name(r) != NULL; r++)
		if (strcmp(name, role_names[r]) == 0)
			return r;
	return 0;
}

/*
 * Walks scope's lines; exact: only whole ids count, not "prefix*".
 * An empty scope allows every session.
 */
static int
scope_match(const char *scope, const char *sid, int exact)
{
	const char *l, *e;
	size_t n, idlen = strlen(sid);

	if (scope[0] == '\0')
		return !exact;
	for (l = scope; *l != '\0'; l = *e ? e + 1 : e) {
		if ((e = strchr(l, '\n')) == NULL)
			e = l + strlen(l);
		n = (size_t)(e - l);
		if (n > 0 && l[n - 1] == '*') {
			if (!exact && idlen >= n - 1 && memcmp(l, sid, n - 1) == 0)
				return 1;
		} else if (n == idlen && memcmp(l, sid, n) == 0)
			return 1;
	}
	return 0;
}

int
ipc_scope_allows(const char *scope, const char *sid)
{
	return scope_match(scope, sid, 0);
}

int
ipc_scope_names(const char *scope, const char *sid)
{
	return scope_match(scope, sid, 1);
}

int
ipc_owner_allows(const char *owner, const struct ipc_conn *ic,
    const char *sid)
{
	return ipc_who_allows(owner, ic->role, ic->subject, ic->scope, sid);
}

int
ipc_who_allows(const char *owner, uint32_t role, const char *subject,
    const char *scope, const char *sid)
{
	if (owner == NULL || owner[0] == '\0' || role == IPC_ROLE_ADMIN)
		return 1;
	if (subject[0] != '\0' && strcmp(subject, owner) == 0)
		return 1;
	/* Another subject, or a static token (no subject): a share. */
	return ipc_scope_names(scope, sid);
}

static void
chan_fail(struct ipc_chan *c)
{
	struct ipc_hdr h;

	if (c->dead)
		return;
	c->dead = 1;
	event_del(c->rev);
	event_del(c->wev);
	memset(&h, 0, sizeof(h));
	c->cb(c, &h, NULL, -1, c->arg);
}

/*
 * Hands every complete message in c->in to the callback.  A descriptor
 * arrives with the first byte of its message, so it must have come in the
 * read that held that byte; one that no message claims is a lie.
 */
static void
chan_dispatch(struct ipc_chan *c)
{
	struct ipc_hdr h;
	const char *why;
	size_t need;
	void *payload;
	int fd, have_fd;

	while (!c->dead && evbuffer_get_length(c->in) >= sizeof(h)) {
		evbuffer_copyout(c->in, &h, sizeof(h));
		if (h.flags & IPC_F_FD)
			have_fd = c->nfds > 0 && c->fd_from[0] <= c->msg_at &&
			    c->msg_at < c->fd_to[0];
		else	/* a read ending inside this message brought it */
			have_fd = c->nfds > 0 && (c->fd_to[0] <= c->msg_at ||
			    (c->fd_from[0] <= c->msg_at && c->msg_at +
			    sizeof(h) + h.len >= c->fd_to[0]));
		if (ipc_check(&h, have_fd, &why) == -1) {
			log_warnx("ipc: %s (type %u, %u bytes)", why,
			    h.type, h.len);
			chan_fail(c);
			return;
		}
		if (evbuffer_get_length(c->in) < sizeof(h) + h.len)
			return;
		fd = -1;
		if (h.flags & IPC_F_FD) {
			fd = c->fds[0];
			c->nfds--;
			memmove(c->fds, c->fds + 1, sizeof(int) * (size_t)c->nfds);
			memmove(c->fd_from, c->fd_from + 1,
			    sizeof(uint64_t) * (size_t)c->nfds);
			memmove(c->fd_to, c->fd_to + 1,
			    sizeof(uint64_t) * (size_t)c->nfds);
		}
		/* Receivers cast the payload to structs: give it alignment. */
		need = h.len ? h.len : 1;
		if (need > c->scratch_len) {
			free(c->scratch);
			if ((c->scratch = malloc(need)) == NULL) {
				c->scratch_len = 0;
				if (fd != -1)
					close(fd);
				chan_fail(c);
				return;
			}
			c->scratch_len = need;
		}
		evbuffer_drain(c->in, sizeof(h));
		evbuffer_remove(c->in, c->scratch, h.len);
		c->msg_at += sizeof(h) + h.len;
		payload = c->scratch;
		if (c->cb(c, &h, payload, fd, c->arg) == -1) {
			log_warnx("ipc: unexpected message type %u", h.type);
			chan_fail(c);
			return;
		}
		if (c->scratch_len > 65536) {
			free(c->scratch);
			c->scratch = NULL;
			c->scratch_len = 0;
		}
	}
	/* Every message that began in that read is done and none took it. */
	if (!c->dead && c->nfds > 0 && c->fd_to[0] <= c->msg_at) {
		log_warnx("ipc: descriptor sent with no message to carry it");
		chan_fail(c);
	}
}

static void
chan_read(evutil_socket_t fd, short ev, void *arg)
{
	struct ipc_chan *c = arg;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
	} cm;
	struct cmsghdr *cmsg;
	struct msghdr msg;
	struct iovec iov;
	char buf[65536];
	ssize_t n;
	int i, nf, *fds;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	if (n == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		log_warn("ipc: recvmsg");
		chan_fail(c);
		return;
	}
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
	    cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		if (cmsg->cmsg_level != SOL_SOCKET ||
		    cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		nf = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		fds = (int *)CMSG_DATA(cmsg);
		for (i = 0; i < nf; i++) {
			if (c->nfds == IPC_MAX_FDS) {
				close(fds[i]);
				msg.msg_flags |= MSG_CTRUNC;
				continue;
			}
			c->fd_from[c->nfds] = c->rx;
			c->fd_to[c->nfds] = c->rx + (uint64_t)n;
			c->fds[c->nfds++] = fds[i];
		}
	}
	if (msg.msg_flags & MSG_CTRUNC) {
		log_warnx("ipc: descriptors lost or too many in flight");
		chan_fail(c);
		return;
	}
	if (n == 0) {
		chan_fail(c);
		return;
	}
	evbuffer_add(c->in, buf, (size_t)n);
	c->rx += (uint64_t)n;
	chan_dispatch(c);
}

/* Writes as much queued output as the socket takes; 0, or -1 on error. */
static int
chan_flush_some(struct ipc_chan *c)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct ipc_out *o;
	struct msghdr msg;
	struct iovec iov;
	ssize_t n;

	while ((o = TAILQ_FIRST(&c->out)) != NULL) {
		memset(&msg, 0, sizeof(msg));
		iov.iov_base = o->data + o->off;
		iov.iov_len = o->len - o->off;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		if (o->fd != -1 && o->off == 0) {
			struct cmsghdr *cmsg;

			memset(&cm, 0, sizeof(cm));
			msg.msg_control = cm.buf;
			msg.msg_controllen = sizeof(cm.buf);
			cmsg = CMSG_FIRSTHDR(&msg);
			cmsg->cmsg_level = SOL_SOCKET;
			cmsg->cmsg_type = SCM_RIGHTS;
			cmsg->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cmsg), &o->fd, sizeof(int));
		}
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -1;
		}
		if (o->fd != -1) {
			close(o->fd);
			o->fd = -1;
		}
		o->off += (size_t)n;
		c->out_bytes -= (size_t)n;
		if (o->off == o->len) {
			TAILQ_REMOVE(&c->out, o, entry);
			free(o->data);
			free(o);
		}
	}
	return 0;
}

static void
chan_write(evutil_socket_t fd, short ev, void *arg)
{
	struct ipc_chan *c = arg;

	if (chan_flush_some(c) == -1) {
		log_warn("ipc: sendmsg");
		chan_fail(c);
		return;
	}
	if (TAILQ_EMPTY(&c->out))
		event_del(c->wev);
}

struct ipc_chan *
ipc_chan_new(struct event_base *base, int fd, ipc_cb cb, void *arg)
{
	struct ipc_chan *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->fd = fd;
	c->cb = cb;
	c->arg = arg;
	TAILQ_INIT(&c->out);
	evutil_make_socket_nonblocking(fd);
	c->in = evbuffer_new();
	c->rev = event_new(base, fd, EV_READ | EV_PERSIST, chan_read, c);
	c->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, chan_write, c);
	if (c->in == NULL || c->rev == NULL || c->wev == NULL) {
		ipc_chan_free(c);
		return NULL;
	}
	event_add(c->rev, NULL);
	return c;
}

void
ipc_drain(struct ipc_chan *c)
{
	struct pollfd pfd;
	int n;

	/* Bounded: a peer that is gone sends nothing more. */
	for (n = 0; n < 256 && !c->dead; n++) {
		pfd.fd = c->fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) != 1)
			break;
		chan_read(c->fd, EV_READ, c);
	}
}

void
ipc_chan_free(struct ipc_chan *c)
{
	struct ipc_out *o;
	int i;

	if (c == NULL)
		return;
	while ((o = TAILQ_FIRST(&c->out)) != NULL) {
		TAILQ_REMOVE(&c->out, o, entry);
		if (o->fd != -1)
			close(o->fd);
		free(o->data);
		free(o);
	}
	for (i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	if (c->rev)
		event_free(c->rev);
	if (c->wev)
		event_free(c->wev);
	if (c->in)
		evbuffer_free(c->in);
	free(c->scratch);
	close(c->fd);
	free(c);
}

int
ipc_send(struct ipc_chan *c, enum ipc_type type, int fd, const void *p1,
    size_t l1, const void *p2, size_t l2)
{
	struct ipc_hdr h;
	struct ipc_out *o;
	const char *why;

	memset(&h, 0, sizeof(h));
	h.version = IPC_VERSION;
	h.type = (uint16_t)type;
	h.flags = fd != -1 ? IPC_F_FD : 0;
	h.len = (uint32_t)(l1 + l2);
	if (l1 + l2 > IPC_MAX_PAYLOAD || ipc_check(&h, fd != -1, &why) == -1 ||
	    c->dead) {
		if (fd != -1)
			close(fd);
		errno = EINVAL;
		return -1;
	}
	if ((o = malloc(sizeof(*o))) == NULL ||
	    (o->data = malloc(sizeof(h) + l1 + l2)) == NULL) {
		free(o);
		if (fd != -1)
			close(fd);
		return -1;
	}
	memcpy(o->data, &h, sizeof(h));
	if (l1)
		memcpy(o->data + sizeof(h), p1, l1);
	if (l2)
		memcpy(o->data + sizeof(h) + l1, p2, l2);
	o->len = sizeof(h) + l1 + l2;
	o->off = 0;
	o->fd = fd;
	TAILQ_INSERT_TAIL(&c->out, o, entry);
	c->out_bytes += o->len;
	event_add(c->wev, NULL);
	return 0;
}

size_t
ipc_pending(const struct ipc_chan *c)
{
	return c->out_bytes;
}

void
ipc_flush(struct ipc_chan *c, int timeout_ms)
{
	struct pollfd pfd;

	pfd.fd = c->fd;
	pfd.events = POLLOUT;
	while (!TAILQ_EMPTY(&c->out) && !c->dead) {
		if (poll(&pfd, 1, timeout_ms) <= 0)
			return;
		if (chan_flush_some(c) == -1)
			return;
	}
}
