/*
 * Redis store backend: how a process learns what changed without asking
 * once a second per session (see store_redis.c for the model and
 * docs/design-notes.md for the figures).
 *
 * Pub/sub loses nothing while the subscriber's connection stays up: what
 * it loses goes with a disconnect, and the link then comes up again.  So
 * every open session is read again in full (rs_resync: a follower's PEEK,
 * an owner's inbox) when the link comes up, which it does only once every
 * session's channel is subscribed, and a session whose channel is
 * subscribed later is read again when Redis confirms that subscription.
 * Beyond that, only a slow safety net: each session once every poll_ms,
 * spread evenly over it (the ring), so an idle session costs 1/poll_ms
 * commands per second, not one.
 *
 * A clean release publishes "vacant" on the session's channel; a crashed
 * owner's lease lapses without a word.  So followers watch owner
 * processes, not sessions: every process publishes its node name on
 * parley:nodes every lease/3 (one command per process), every process
 * notes when it last heard each node (a hash table, RS_NODES_MAX), a
 * follower files each followed session under its owner's node (the PEEK
 * answers the owner's token), and the sessions of a node not heard for a
 * lease are read every lease/3 until it is heard again or they have
 * moved.  The sessions with no owner are read every lease/3 too, until
 * one has one.
 */
#include <sys/types.h>
#include <sys/queue.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "parley/log.h"
#include "parley/store.h"
#include "parley/util.h"

#include "store_redis.h"

void
rs_feed_init(struct rstore *st)
{
	size_t	 i;

	TAILQ_INIT(&st->ring);
	for (i = 0; i < RS_NODE_BUCKETS; i++)
		LIST_INIT(&st->nodes[i]);
	memset(&st->nobody, 0, sizeof(st->nobody));
	TAILQ_INIT(&st->nobody.sess);
	st->nobody.nobody = 1;
	snprintf(st->ch_nodes, sizeof(st->ch_nodes), "%s%s", RS_NODES_CHAN,
	    st->chsuffix);
}

/* A follower: reads the log's state; an owner: reads its inbox. */
void
rs_resync(struct rsess *s)
{
	if (s->base.role == STORE_FOLLOWER)
		rs_poll_send(s);
	else
		rs_inbox_read(s);
}

void
rs_feed_join(struct rsess *s)
{
	struct rstore	*st = s->st;

	if (s->inring)
		return;
	TAILQ_INSERT_TAIL(&st->ring, s, rentry);
	st->nring++;
	s->inring = 1;
}

/* Files s under node n (NULL: under none). */
static void
rs_node_set(struct rsess *s, struct rnode *n)
{
	struct rnode	*o = s->node;

	if (o == n)
		return;
	if (o != NULL) {
		TAILQ_REMOVE(&o->sess, s, nentry);
		o->nsess--;
	}
	s->node = n;
	if (n != NULL) {
		TAILQ_INSERT_TAIL(&n->sess, s, nentry);
		n->nsess++;
	}
}

void
rs_feed_leave(struct rsess *s)
{
	struct rstore	*st = s->st;

	if (s->inring) {
		TAILQ_REMOVE(&st->ring, s, rentry);
		st->nring--;
		s->inring = 0;
	}
	rs_node_set(s, NULL);
}

void
rs_feed_unwatch(struct rsess *s)
{
	rs_node_set(s, NULL);
}

/* FNV-1a: spreads "<host-id>/<pid>" names over the buckets. */
static size_t
rs_node_hash(const char *name, size_t len)
{
	uint32_t	 h = 2166136261u;
	size_t		 i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 16777619u;
	}
	return h % RS_NODE_BUCKETS;
}

static struct rnode *
rs_node_find(struct rstore *st, const char *name, size_t len)
{
	struct rnode	*n;

	LIST_FOREACH(n, &st->nodes[rs_node_hash(name, len)], entry)
		if (strlen(n->name) == len && memcmp(n->name, name, len) == 0)
			return n;
	return NULL;
}

/* A new node, last heard at seen; NULL past RS_NODES_MAX or no memory. */
static struct rnode *
rs_node_new(struct rstore *st, const char *name, size_t len, uint64_t seen)
{
	struct rnode	*n;

	if (len == 0 || len > RS_NODE_MAX || st->nnodes >= RS_NODES_MAX ||
	    (n = calloc(1, sizeof(*n))) == NULL)
		return NULL;
	memcpy(n->name, name, len);
	n->name[len] = '\0';
	TAILQ_INIT(&n->sess);
	n->seen = seen;
	n->next_check = seen;
	LIST_INSERT_HEAD(&st->nodes[rs_node_hash(name, len)], n, entry);
	st->nnodes++;
	return n;
}

/*
 * A follower's PEEK named its owner's token ("<node>#<fence>"), or none
 * (tok NULL): files the session under that node, the ones with no owner,
 * or (past RS_NODES_MAX nodes, out of memory) those too, which costs a
 * read every lease/3 instead of a wrong answer.
 */
void
rs_feed_owner(struct rsess *s, const char *tok, size_t len)
{
	struct rstore	*st = s->st;
	struct rnode	*n;
	const char	*hash;
	uint64_t	 now = util_mono_ms(), seen;

	if (tok == NULL || (hash = memrchr(tok, '#', len)) == NULL) {
		rs_node_set(s, &st->nobody);
		return;
	}
	len = (size_t)(hash - tok);
	if ((n = rs_node_find(st, tok, len)) == NULL) {
		/* Never heard while the link was up for a lease: dead (or
		 * too old to send heartbeats), so quiet already; read again
		 * in lease/3, this read being just done.  Else a lease to be
		 * heard. */
		seen = now;
		if (now - st->up_at >= st->lease_ms + RS_HB_GRACE_MS)
			seen = now - st->lease_ms - RS_HB_GRACE_MS;
		if ((n = rs_node_new(st, tok, len, seen)) == NULL) {
			rs_node_set(s, &st->nobody);
			return;
		}
		n->next_check = now + st->lease_ms / 3;
	}
	rs_node_set(s, n);
}

/* A heartbeat on parley:nodes: the payload is the node's name. */
void
rs_feed_heard(struct rstore *st, const char *name, size_t len)
{
	struct rnode	*n;
	uint64_t	 now = util_mono_ms();

	if ((n = rs_node_find(st, name, len)) != NULL)
		n->seen = now;
	else
		rs_node_new(st, name, len, now);
}

/* This process's heartbeat (nobody waits for its reply). */
void
rs_feed_beat(struct rstore *st)
{
	struct rargs	 a;
	struct rcmd	*rc;

	if (st->link != LINK_UP ||
	    (rc = rs_cmd_new(st, RC_FIRE, NULL, NULL)) == NULL)
		return;
	rs_args_init(&a, 3, 0);
	rs_args_str(&a, "PUBLISH");
	rs_args_str(&a, st->ch_nodes);
	rs_args_str(&a, st->node);
	if (rs_send(st, rc, &a) == -1)
		log_warnx("store: redis: could not send this process's "
		    "heartbeat (no connected master?): followers may take "
		    "its sessions for abandoned and poll them");
	rs_args_free(&a);
}

/*
 * Tells s's followers to read its state now with a notice that is no seq
 * (what says why): an owner that finds its lease gone while its process
 * lives on, or that trimmed the log.
 */
void
rs_publish_look(struct rsess *s, const char *what)
{
	struct rstore	*st = s->st;
	struct rargs	 a;
	struct rcmd	*rc;

	if (st->link != LINK_UP ||
	    (rc = rs_cmd_new(st, RC_FIRE, NULL, NULL)) == NULL)
		return;
	rc->slot = (int)s->slot;	/* where the session's keys are */
	rs_args_init(&a, 3, 0);
	rs_args_str(&a, "PUBLISH");
	rs_args_str(&a, s->ch_ev);
	rs_args_str(&a, what);
	if (rs_send(st, rc, &a) == -1)
		log_warnx("store: session %s: could not publish \"%s\" "
		    "to its followers; they learn it at their next poll",
		    s->base.id, what);
	rs_args_free(&a);
}

/*
 * The link came up and every session was just read again: heartbeats
 * missed while it was down say nothing of their nodes, so each gets a
 * lease from now.
 */
void
rs_feed_up(struct rstore *st, uint64_t now)
{
	struct rnode	*n;
	size_t		 i;

	for (i = 0; i < RS_NODE_BUCKETS; i++)
		LIST_FOREACH(n, &st->nodes[i], entry)
			n->seen = n->next_check = now;
	st->nobody.next_check = now + st->lease_ms / 3;
	st->up_at = now;
	st->ring_at = now;
	st->credit = 0;
}

static void
rs_node_free(struct rstore *st, struct rnode *n)
{
	struct rsess	*s;

	/* Sessions filed under it (none but at close) go under none. */
	while ((s = TAILQ_FIRST(&n->sess)) != NULL)
		rs_node_set(s, NULL);
	LIST_REMOVE(n, entry);
	st->nnodes--;
	free(n);
}

/* Reads the sessions of n again if its owner has gone quiet. */
static void
rs_node_check(struct rstore *st, struct rnode *n, uint64_t now)
{
	struct rsess	*s;

	if (now < n->next_check || (!n->nobody &&
	    now - n->seen < st->lease_ms + RS_HB_GRACE_MS))
		return;
	if (!n->nobody)
		log_debug("store: redis: no heartbeat from %s for %llu ms: "
		    "reading its %zu sessions", n->name,
		    (unsigned long long)(now - n->seen), n->nsess);
	n->next_check = now + st->lease_ms / 3;
	/* Sends only: nothing here changes the list. */
	TAILQ_FOREACH(s, &n->sess, nentry)
		rs_poll_send(s);
}

/*
 * On every tick with the link up: the safety net's share of the ring
 * (nring sessions per poll_ms, each moved to the back), then the nodes
 * that went quiet; a node quiet for two leases that owns nothing this
 * follows is forgotten.
 */
void
rs_feed_tick(struct rstore *st, uint64_t now)
{
	struct rnode	*n, *nn;
	struct rsess	*s;
	uint64_t	 dt;
	size_t		 i;

	dt = now - st->ring_at;
	if (dt > st->poll_ms)
		dt = st->poll_ms;
	st->ring_at = now;
	st->credit += (uint64_t)st->nring * dt;
	while (st->credit >= st->poll_ms && st->link == LINK_UP &&
	    !st->closing && (s = TAILQ_FIRST(&st->ring)) != NULL) {
		st->credit -= st->poll_ms;
		TAILQ_REMOVE(&st->ring, s, rentry);
		TAILQ_INSERT_TAIL(&st->ring, s, rentry);
		rs_resync(s);
	}
	if (st->nring == 0)
		st->credit = 0;
	for (i = 0; i < RS_NODE_BUCKETS; i++)
		for (n = LIST_FIRST(&st->nodes[i]); n != NULL; n = nn) {
			nn = LIST_NEXT(n, entry);
			if (n->nsess == 0) {
				if (now - n->seen >= 2 * (uint64_t)st->lease_ms)
					rs_node_free(st, n);
				continue;
			}
			rs_node_check(st, n, now);
		}
	rs_node_check(st, &st->nobody, now);
}

/* At store_close, with every session closed. */
void
rs_feed_free(struct rstore *st)
{
	struct rnode	*n;
	size_t		 i;

	for (i = 0; i < RS_NODE_BUCKETS; i++)
		while ((n = LIST_FIRST(&st->nodes[i])) != NULL)
			rs_node_free(st, n);
}
