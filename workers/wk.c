/*
 * The worker's services to its modules: what they tell the supervisor
 * (a session left, a connection for another worker), the descriptor
 * budget, and the exit once nothing is held.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/log.h"
#include "parley/util.h"
#include "wk.h"

void
wk_released(struct wk *wk, const char *sid)
{
	struct ipc_sess is;

	memset(&is, 0, sizeof(is));
	is.hseq = wk->hseq;
	snprintf(is.session, sizeof(is.session), "%s", sid);
	if (wk->chan != NULL)
		ipc_send(wk->chan, IPC_RELEASED, -1, &is, sizeof(is), NULL, 0);
}

int
wk_reroute(struct wk *wk, int fd, const struct ipc_conn *ic,
    const void *bytes, size_t len)
{
	struct ipc_conn c = *ic;

	if (wk->chan == NULL) {
		close(fd);
		return -1;
	}
	c.bytes_len = (uint32_t)len;
	c.hseq = wk->hseq;
	return ipc_send(wk->chan, IPC_REROUTE, fd, &c, sizeof(c), bytes, len);
}

#define FD_RESERVE	128	/* IPC in flight, store, logs, MCP, providers */

int
wk_fd_room(struct wk *wk, unsigned extra)
{
	uint64_t used = (uint64_t)wk->nconns + (uint64_t)wk->nsessions *
	    wk->sess_fds + extra + FD_RESERVE, now;

	if (used < wk->fd_limit)
		return 1;
	now = util_mono_ms();
	if (now - wk->fd_warned_ms > 10000) {
		wk->fd_warned_ms = now;
		log_warnx("near the open files limit (%u: %u connections, %u "
		    "sessions): refusing new ones; raise LimitNOFILE / ulimit "
		    "-n", wk->fd_limit, wk->nconns, wk->nsessions);
	}
	return 0;
}

void
wk_maybe_exit(struct wk *wk)
{
	struct timeval tv = { 0, 0 };

	/* Deferred: this runs deep inside connection and session code. */
	if ((wk->terminating || wk->draining) && wk->nconns == 0 &&
	    wk->nsessions == 0 && wk->exit_ev != NULL)
		evtimer_add(wk->exit_ev, &tv);
}

