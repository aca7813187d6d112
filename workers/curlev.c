/*
 * libcurl's multi interface on libevent: libcurl says through its socket
 * callback which sockets to watch for what, and through its timer
 * callback when to call it back; both become events on the loop, and
 * each event hands control back through curl_multi_socket_action.
 */
#include <sys/queue.h>

#include <stdlib.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "parley/util.h"
#include "curlev.h"

struct sockev {
	struct curlev		*cv;
	struct event		*ev;
	LIST_ENTRY(sockev)	 entry;
};

struct curlev {
	struct event_base	*base;
	CURLM			*multi;
	struct event		*timer;
	int			 in_curl;	/* inside socket_action */
	curlev_done_cb		 done;
	curlev_after_cb		 after;
	void			*arg;
	LIST_HEAD(, sockev)	 socks;
};

int
curlev_global_init(void)
{
	static int ready;

	/* Once per process, before any thread exists in it. */
	if (!ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return -1;
		ready = 1;
	}
	return 0;
}

static void
drive(struct curlev *cv, curl_socket_t fd, int flags)
{
	CURLMsg		*m;
	CURLcode	 rc;
	char		*priv;
	int		 running, left;

	cv->in_curl++;
	curl_multi_socket_action(cv->multi, fd, flags, &running);
	cv->in_curl--;
	if (cv->after != NULL)
		cv->after(cv->arg);
	while ((m = curl_multi_info_read(cv->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		/* m dies with the handle's removal: copy first. */
		rc = m->data.result;
		priv = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
		if (priv != NULL)
			cv->done(priv, rc);
	}
}

static void
sock_ev(evutil_socket_t fd, short what, void *arg)
{
	struct sockev	*se = arg;
	int		 flags = 0;

	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	drive(se->cv, fd, flags);
}

/* libcurl's CURLMOPT_SOCKETFUNCTION: socketp is our sockev, or NULL. */
static int
sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct curlev	*cv = userp;
	struct sockev	*se = socketp;
	short		 kind = EV_PERSIST;

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (se != NULL) {
			if (se->ev != NULL)
				event_free(se->ev);
			LIST_REMOVE(se, entry);
			free(se);
			curl_multi_assign(cv->multi, s, NULL);
		}
		return 0;
	}
	if (se == NULL) {
		if ((se = calloc(1, sizeof(*se))) == NULL)
			return -1;
		se->cv = cv;
		LIST_INSERT_HEAD(&cv->socks, se, entry);
		curl_multi_assign(cv->multi, s, se);
	} else if (se->ev != NULL) {
		event_free(se->ev);
		se->ev = NULL;
	}
	if (what & CURL_POLL_IN)
		kind |= EV_READ;
	if (what & CURL_POLL_OUT)
		kind |= EV_WRITE;
	if ((se->ev = event_new(cv->base, s, kind, sock_ev, se)) == NULL ||
	    event_add(se->ev, NULL) == -1)
		return -1;
	return 0;
}

static void
timer_ev(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	drive(arg, CURL_SOCKET_TIMEOUT, 0);
}

static int
timer_cb(CURLM *m, long ms, void *userp)
{
	struct curlev	*cv = userp;
	struct timeval	 tv;

	(void)m;
	if (ms < 0)
		evtimer_del(cv->timer);
	else {
		util_tv(&tv, (uint64_t)ms);
		evtimer_add(cv->timer, &tv);
	}
	return 0;
}

struct curlev *
curlev_new(struct event_base *base, curlev_done_cb done,
    curlev_after_cb after, void *arg)
{
	struct curlev *cv;

	if (curlev_global_init() == -1)
		return NULL;
	if ((cv = calloc(1, sizeof(*cv))) == NULL)
		return NULL;
	cv->base = base;
	cv->done = done;
	cv->after = after;
	cv->arg = arg;
	LIST_INIT(&cv->socks);
	if ((cv->multi = curl_multi_init()) == NULL ||
	    (cv->timer = evtimer_new(base, timer_ev, cv)) == NULL) {
		curlev_free(cv);
		return NULL;
	}
	curl_multi_setopt(cv->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(cv->multi, CURLMOPT_SOCKETDATA, cv);
	curl_multi_setopt(cv->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(cv->multi, CURLMOPT_TIMERDATA, cv);
	return cv;
}

void
curlev_free(struct curlev *cv)
{
	struct sockev *se;

	if (cv == NULL)
		return;
	if (cv->multi != NULL)
		curl_multi_cleanup(cv->multi);
	/* What libcurl did not say to forget by now. */
	while ((se = LIST_FIRST(&cv->socks)) != NULL) {
		LIST_REMOVE(se, entry);
		if (se->ev != NULL)
			event_free(se->ev);
		free(se);
	}
	if (cv->timer != NULL)
		event_free(cv->timer);
	free(cv);
}

int
curlev_add(struct curlev *cv, CURL *easy)
{
	return curl_multi_add_handle(cv->multi, easy) == CURLM_OK ? 0 : -1;
}

void
curlev_remove(struct curlev *cv, CURL *easy)
{
	curl_multi_remove_handle(cv->multi, easy);
}

int
curlev_busy(const struct curlev *cv)
{
	return cv->in_curl > 0;
}
