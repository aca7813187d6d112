/*
 * Local store, durability in BATCH mode: the sync thread (one syncfs() of
 * the sessions directory's file system per request, off the event loop)
 * and store_sync().  Why a thread: see store_local.c's header comment.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "parley/log.h"
#include "parley/store.h"
#include "store_local.h"

static void
sync_failed(int err)
{
	errno = err;
	log_warn("store: syncfs of the sessions directory");
}

/* One syncfs() of the sessions' file system, and the segments' when
 * that is another; 0 or -1 with errno. */
static int
local_syncfs_once(struct local_store *ls)
{
	if (syncfs(ls->sessfd) == -1)
		return -1;
	if (ls->segfd != -1 && ls->seg_otherfs && syncfs(ls->segfd) == -1)
		return -1;
	return 0;
}

/* Syncs in the calling thread: at close, or when no thread could start. */
void
local_syncfs(struct local_store *ls)
{
	if (local_syncfs_once(ls) == -1)
		sync_failed(errno);
	else
		ls->covered_inline = ls->kicks;
}

/*
 * 1 when a sync that started after ticket (local_ticket() at the time of
 * a write) has completed: what was written then is on disk.
 */
int
local_synced(struct local_store *ls, uint64_t ticket)
{
	uint64_t	 c;

	if (ls->covered_inline > ticket)
		return 1;
	if (!ls->syncer_on)
		return 0;
	pthread_mutex_lock(&ls->syncer.mu);
	c = ls->syncer.covered;
	pthread_mutex_unlock(&ls->syncer.mu);
	return c > ticket;
}

/* The ticket of a write made now, for local_synced(). */
uint64_t
local_ticket(const struct local_store *ls)
{
	return ls->kicks;
}

/* The sync thread: one syncfs() per request, requests made meanwhile
 * served by one more. */
static void *
local_syncer_main(void *arg)
{
	struct local_store	*ls = arg;
	struct local_syncer	*sy = &ls->syncer;
	uint64_t		 asked;
	int			 r, save;

	pthread_mutex_lock(&sy->mu);
	for (;;) {
		while (!sy->want && !sy->stop)
			pthread_cond_wait(&sy->cv, &sy->mu);
		if (!sy->want)
			break;
		sy->want = 0;
		asked = sy->asked;
		pthread_mutex_unlock(&sy->mu);
		r = local_syncfs_once(ls);
		save = errno;
		pthread_mutex_lock(&sy->mu);
		if (r == -1)
			sy->err = save;
		else
			sy->covered = asked;
		sy->done++;
	}
	pthread_mutex_unlock(&sy->mu);
	return NULL;
}

/* Starts the sync thread, signals blocked in it; 0, or -1 (sync inline). */
static int
local_syncer_start(struct local_store *ls)
{
	struct local_syncer	*sy = &ls->syncer;
	sigset_t		 all, old;
	int			 r;

	if (ls->syncer_on)
		return 0;
	if (pthread_mutex_init(&sy->mu, NULL) != 0)
		return -1;
	if (pthread_cond_init(&sy->cv, NULL) != 0) {
		pthread_mutex_destroy(&sy->mu);
		return -1;
	}
	/* Signals stay with the event loop's thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&sy->thr, NULL, local_syncer_main, ls);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		pthread_cond_destroy(&sy->cv);
		pthread_mutex_destroy(&sy->mu);
		errno = r;
		return -1;
	}
	ls->syncer_on = 1;
	return 0;
}

/* Serves what is still asked for, then joins the thread. */
void
local_syncer_stop(struct local_store *ls)
{
	struct local_syncer	*sy = &ls->syncer;

	if (!ls->syncer_on)
		return;
	pthread_mutex_lock(&sy->mu);
	sy->stop = 1;
	pthread_cond_broadcast(&sy->cv);
	pthread_mutex_unlock(&sy->mu);
	pthread_join(sy->thr, NULL);
	if (sy->err != 0)
		sync_failed(sy->err);
	pthread_cond_destroy(&sy->cv);
	pthread_mutex_destroy(&sy->mu);
	ls->syncer_on = 0;
}

/*
 * Asks the sync thread for a sync of everything written so far and
 * returns; reports a sync that failed since the last call.  Without a
 * thread it syncs here.
 */
static void
local_kick(struct local_store *lst)
{
	struct local_syncer	*sy = &lst->syncer;
	int			 err;

	lst->kicks++;
	if (local_syncer_start(lst) == -1) {
		if (!lst->nothread_said)
			log_warn("store: no sync thread; syncing in the "
			    "event loop");
		lst->nothread_said = 1;
		local_syncfs(lst);
		return;
	}
	pthread_mutex_lock(&sy->mu);
	sy->want = 1;
	sy->asked = lst->kicks;
	err = sy->err;
	sy->err = 0;
	pthread_cond_broadcast(&sy->cv);
	pthread_mutex_unlock(&sy->mu);
	if (err != 0)
		sync_failed(err);
}

static void
local_soon_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	local_sync(arg);
}

/*
 * A meta write or a new directory, in a worker: synced with the appends
 * within 200 ms (one syncfs for all of them), not each at once, which
 * kept the thread syncing and the loop's own file calls waiting on it.
 */
void
local_sync_soon(struct local_store *lst)
{
	struct timeval	 tv = { 0, 200 * 1000 };

	lst->unsynced = 1;
	if (lst->soon_ev == NULL && (lst->soon_ev = evtimer_new(
	    lst->base.params.base, local_soon_cb, lst)) == NULL) {
		local_sync(&lst->base);
		return;
	}
	if (!evtimer_pending(lst->soon_ev, NULL))
		evtimer_add(lst->soon_ev, &tv);
}

/* BATCH: every append so far, through the sync thread (local_kick). */
void
local_sync(struct store *st)
{
	struct local_store	*lst = (struct local_store *)st;
	struct store_sess	*s;
	struct local_sess	*ls;
	int			 any = lst->unsynced | lst->seg_dirty;

	if (local_nosync(st))
		return;
	lst->seg_dirty = 0;
	LIST_FOREACH(s, &st->sessions, entry) {
		ls = (struct local_sess *)s;
		any |= ls->dirty;
		ls->dirty = 0;
	}
	lst->unsynced = 0;
	if (any)
		local_kick(lst);
}

