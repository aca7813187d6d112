/*
 * A session's meta document in memory (sess_meta.h): its keys shared
 * among sessions, its form (a tree while in use, its printed text while
 * the session is left alone) and its saving to the store.  Split from
 * sess.c, which holds the session's life.
 */
#include <sys/time.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "sess.h"
#include "wk.h"

/*
 * The keys every session's meta has.  A session held idle keeps its meta
 * tree for its whole life, and cJSON copies each key onto the heap: one
 * allocation of its own per member.  sess_meta_share_keys points the members
 * named here at these (cJSON_StringIsConst: never freed, copied as
 * pointers by cJSON_Duplicate) instead.  Sorted, for bsearch.
 */
static const char *const meta_keys[] = {
	"active", "agentId", "agents", "at", "autonomy", "config",
	"connected", "content", "cost", "createdAt", "deadline",
	"ending", "external", "from", "history", "id", "inputTokens",
	"kind", "maxTeamTurns", "metadata", "model", "name",
	"objective", "outputTokens", "owner", "projectId", "provider",
	"providerType", "queue", "required", "result", "role", "scope",
	"seq", "sessionId", "status", "strategy", "systemPrompt",
	"team", "tokens", "turn", "turns", "usage", "version"
};

static int
meta_key_cmp(const void *k, const void *e)
{
	return strcmp(k, *(const char *const *)e);
}

/* Shares the known keys of m's members, at every depth (bounded by the
 * parser's nesting limit); returns m. */
cJSON *
sess_meta_share_keys(cJSON *m)
{
	const char *const *k;
	cJSON *e;

	cJSON_ArrayForEach(e, m) {
		if (e->string != NULL && !(e->type & cJSON_StringIsConst) &&
		    (k = bsearch(e->string, meta_keys, sizeof(meta_keys) /
		    sizeof(meta_keys[0]), sizeof(meta_keys[0]),
		    meta_key_cmp)) != NULL) {
			cJSON_free(e->string);
			e->string = (char *)(uintptr_t)*k;
			e->type |= cJSON_StringIsConst;
		}
		if (e->child != NULL)
			sess_meta_share_keys(e);
	}
	return m;
}

/* --- meta, frozen while the session is left alone --- */

#define META_FREEZE_MS	250	/* thawed this long, then frozen */
#define META_SWEEP_MAX	4000	/* sweeps of only unfreezable ones back off */

static void
meta_sweep_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	sess_meta_sweep(arg);
}

/* Puts s on the worker's thawed list (its tree is new) and arms the
 * sweep; s is not const here: see sess_meta_thaw. */
static void
meta_thawed(struct sess *s)
{
	struct wk *wk = s->wk;
	struct timeval tv;

	s->mthawed_ms = util_now_ms();
	if (!s->mlisted) {
		TAILQ_INSERT_TAIL(&wk->thawed, s, mentry);
		s->mlisted = 1;
	}
	if (wk->meta_ev == NULL && (wk->meta_ev = evtimer_new(wk->base,
	    meta_sweep_cb, wk)) == NULL)
		return;		/* stays a tree: memory, not state */
	if (!evtimer_pending(wk->meta_ev, NULL)) {
		wk->meta_wait_ms = META_FREEZE_MS;
		util_tv(&tv, META_FREEZE_MS);
		evtimer_add(wk->meta_ev, &tv);
	}
}

/*
 * Whether cJSON can read the tree back once printed: it refuses more than
 * CJSON_NESTING_LIMIT levels, which max-json-depth may allow.
 */
static int
meta_readable(const cJSON *n, int depth)
{
	if (depth >= CJSON_NESTING_LIMIT)
		return 0;
	for (n = n->child; n != NULL; n = n->next)
		if (!meta_readable(n, depth + 1))
			return 0;
	return 1;
}

/* Replaces s's meta (tree or text) by m (owned; NULL: none). */
void
sess_meta_set(struct sess *s, cJSON *m)
{
	cJSON_Delete(s->mtree);
	free(s->mtxt);
	s->mtree = m;
	s->mtxt = NULL;
	if (m != NULL)
		meta_thawed(s);
	else if (s->mlisted) {
		TAILQ_REMOVE(&s->wk->thawed, s, mentry);
		s->mlisted = 0;
	}
}

cJSON *
sess_meta_thaw(const struct sess *cs)
{
	/* Parsing the text back changes how s holds its meta, not what it
	 * says: every reader, const ones too, may thaw it. */
	struct sess *s = (struct sess *)(uintptr_t)cs;
	cJSON *m;

	if (s->mtxt == NULL)
		return s->mtree;
	if ((m = cJSON_Parse(s->mtxt)) == NULL) {
		/* Our own print of a tree cJSON reads back (meta_readable):
		 * only memory fails it.  The text stays. */
		log_warnx("session %s: no memory to read its meta", s->id);
		return NULL;
	}
	free(s->mtxt);
	s->mtxt = NULL;
	s->mtree = sess_meta_share_keys(m);
	meta_thawed(s);
	return s->mtree;
}

/*
 * Prints s's meta tree and frees it; 0, or -1 (it stays a tree) when s
 * may not be frozen: a turn, anything sess_busy counts, or a loading or
 * released session may hold pointers into the tree past this loop pass.
 */
static int
meta_freeze(struct sess *s)
{
	char *txt;

	if (s->mtree == NULL || s->loading || s->released ||
	    s->turn != NULL || sess_busy(s) || !meta_readable(s->mtree, 0))
		return -1;
	if ((txt = cJSON_PrintUnformatted(s->mtree)) == NULL)
		return -1;
	s->mstatus[0] = sess_status_as(s, 0);
	s->mstatus[1] = sess_status_as(s, 1);
	s->mended = s->ended;
	cJSON_Delete(s->mtree);
	s->mtree = NULL;
	s->mtxt = txt;
	return 0;
}

void
sess_meta_sweep(struct wk *wk)
{
	struct sess *s, *next;
	struct timeval tv;
	uint64_t now = util_now_ms();

	int waiting = 0;

	for (s = TAILQ_FIRST(&wk->thawed); s != NULL; s = next) {
		next = TAILQ_NEXT(s, mentry);
		if (s->mthawed_ms + META_FREEZE_MS > now) {
			waiting = 1;
			continue;
		}
		if (meta_freeze(s) == -1)
			continue;
		waiting = 1;
		TAILQ_REMOVE(&wk->thawed, s, mentry);
		s->mlisted = 0;
	}
	/* Only sessions that cannot be frozen (a turn waiting for an
	 * approval may wait for hours): fewer wake-ups, up to 4 s. */
	if (waiting || wk->meta_wait_ms < META_FREEZE_MS)
		wk->meta_wait_ms = META_FREEZE_MS;
	else if (wk->meta_wait_ms < META_SWEEP_MAX)
		wk->meta_wait_ms *= 2;
	if (!TAILQ_EMPTY(&wk->thawed) && wk->meta_ev != NULL) {
		util_tv(&tv, wk->meta_wait_ms);
		evtimer_add(wk->meta_ev, &tv);
	}
}

/* --- persistence --- */

int
sess_meta_room(struct sess *s, const cJSON *item, unsigned copies,
    struct sess_result *r)
{
	char *txt, *add;
	size_t have, need;

	txt = cJSON_PrintUnformatted(sess_meta(s));
	add = cJSON_PrintUnformatted(item);
	if (txt == NULL || add == NULL) {
		free(txt);
		free(add);
		sess_result_err(r, "INTERNAL", 500, "%s", "out of memory");
		return 0;
	}
	have = strlen(txt);
	need = (strlen(add) + 64) * copies;
	free(txt);
	free(add);
	if (have + need <= STORE_META_MAX / 4 * 3)
		return 1;
	sess_result_err(r, "RATE_LIMITED", 429, "the session's saved state "
	    "holds %zu KiB, near its bound of %u KiB: it takes no more "
	    "thoughts or actions; let pending actions finish, or go on in a "
	    "new session", have >> 10, STORE_META_MAX >> 10);
	return 0;
}

void
sess_meta_save(struct sess *s)
{
	char *txt;

	/* A follower's meta is the owner's, read-only; a broken session
	 * is being let go. */
	if (s->follower || s->broken || s->st == NULL)
		return;
	proto_set(sess_meta(s), "status",
	    cJSON_CreateString(sess_status(s)));
	proto_set(sess_meta(s), "updatedAt",
	    cJSON_CreateNumber((double)util_now_ms()));
	/* What the log took in, for session-log-quota: it may lag the
	 * appends since the last save (a crash forgets those). */
	proto_set(sess_meta(s), "logBytes",
	    cJSON_CreateNumber((double)s->log_bytes));
	if ((txt = cJSON_PrintUnformatted(sess_meta(s))) == NULL)
		return;
	if (store_meta_write_async(s->st, txt, strlen(txt)) == -1) {
		s->wk->metrics.store_errors++;
		log_warn("session %s: meta write", s->id);
		if (errno == EPIPE || errno == EIO)
			sess_break(s, EIO);
	}
	free(txt);
}
