/*
 * The Redis store on a Redis Cluster (scheme "cluster"): one command
 * connection per master, each command sent to the master of its session's
 * slot (every key of a session carries the hash tag {ID}).
 *
 * The cluster is one link, as a single server is: it is up once a seed
 * gave a slot map covering all 16384 slots and every master's connection
 * finished its handshake (AUTH, SCRIPT LOAD), and any master's loss takes
 * it down, which fails what was in flight (EIO) as the loss of a single
 * server does; it then asks the seeds for the map again.  With Redis'
 * default cluster-require-full-coverage, a cluster missing a master
 * refuses every slot anyway, so nothing is lost by not going on with the
 * other masters.
 *
 * Slots moving between the masters connected (resharding) cost nothing:
 * MOVED to one of them updates that slot and sends the command again;
 * ASK (the slot is moving) sends it again, once, after ASKING, to the
 * node named; TRYAGAIN (a script's keys split between the two nodes
 * while the slot moves) sends it again from the start a tick later, for
 * at most RS_CL_TRIES ticks.  A command that was refused is sent again
 * unchanged: it did not run.  MOVED to a node not connected (a replica
 * promoted) takes the link down.  The map is also asked for once a poll
 * period: one naming only connected masters replaces the map in use,
 * one naming another node takes the link down.
 *
 * Pub/sub stays PUBLISH/SUBSCRIBE, on one subscriber connection to the
 * first master: a cluster forwards every PUBLISH to every node.  Shard
 * channels (SPUBLISH/SSUBSCRIBE) would keep them within a shard, but
 * hiredis 0.14's async reader knows nothing of them: it drops "smessage"
 * replies, or aborts on one when the context has no SUBSCRIBE.
 */
#include <sys/types.h>
#include <sys/queue.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/log.h"
#include "parley/util.h"

#include "rcluster.h"
#include "store_redis.h"

struct rcnode {
	struct rcl_addr		 addr;
	struct rconn		 cmd;
};

/* TRYAGAIN: sent again once a tick (RS_TICK_MS), this many times. */
#define RS_CL_TRIES	50

struct rclu {
	struct rcl_map		*map;	/* in use, or being connected */
	struct rcnode		*nodes;		/* map->nodes' connections */
	size_t			 nnodes;
	size_t			 nup;		/* connected this attempt */
	int			 watching;	/* CLUSTER SLOTS once up */
	TAILQ_HEAD(, rcmd)	 retry;		/* to send again next tick */
};

int
rs_cl_parse(struct rstore *st, const char *url, char *err, size_t errlen)
{
	struct rcl_url	 u;
	size_t		 i;

	if (rcl_parse_url(url, &u, err, errlen) == -1)
		return -1;
	if ((st->clu = calloc(1, sizeof(*st->clu))) == NULL) {
		snprintf(err, errlen, "store: %s", strerror(errno));
		rcl_url_free(&u);
		return -1;
	}
	TAILQ_INIT(&st->clu->retry);
	st->cluster = 1;
	/* The seeds are what the url named; the password moves to st. */
	for (i = 0; i < u.nseeds; i++) {
		memcpy(st->hosts[i].host, u.seeds[i].host,
		    sizeof(st->hosts[i].host));
		st->hosts[i].port = u.seeds[i].port;
	}
	st->nhosts = u.nseeds;
	st->pass = u.pass;
	u.pass = NULL;
	rcl_url_free(&u);
	return 0;
}

/* Commands waiting to be sent again get NULL, as on a lost connection. */
static void
rs_cl_fail_retries(struct rstore *st)
{
	struct rclu	*c = st->clu;
	struct rcmd	*rc;

	rs_store_ref(st);
	while ((rc = TAILQ_FIRST(&c->retry)) != NULL) {
		TAILQ_REMOVE(&c->retry, rc, entry);
		rs_reply(NULL, NULL, rc);
	}
	rs_store_unref(st);
}

/* Lets go of every master's connection (in-flight replies: NULL). */
void
rs_cl_drop(struct rstore *st)
{
	struct rclu	*c = st->clu;
	size_t		 i;

	if (c == NULL)
		return;
	rs_cl_fail_retries(st);
	for (i = 0; i < c->nnodes; i++)
		rs_drop_conn(st, &c->nodes[i].cmd);
	c->nup = 0;
	c->watching = 0;
}

void
rs_cl_free(struct rstore *st)
{
	struct rclu	*c = st->clu;
	struct rcmd	*rc;

	if (c == NULL)
		return;
	/* rs_close emptied it; nothing can be waiting here. */
	while ((rc = TAILQ_FIRST(&c->retry)) != NULL) {
		TAILQ_REMOVE(&c->retry, rc, entry);
		rs_cmd_free(rc);
	}
	free(c->nodes);
	rcl_map_free(c->map);
	free(c);
	st->clu = NULL;
}

struct rconn *
rs_cl_which(struct rstore *st, const redisAsyncContext *ac)
{
	struct rclu	*c = st->clu;
	size_t		 i;

	if (c == NULL || ac == NULL)
		return NULL;
	for (i = 0; i < c->nnodes; i++)
		if (c->nodes[i].cmd.ac == ac)
			return &c->nodes[i].cmd;
	return NULL;
}

/* The master whose connection conn is, or NULL. */
static struct rcnode *
rs_cl_node(struct rstore *st, const struct rconn *conn)
{
	struct rclu	*c = st->clu;
	size_t		 i;

	if (c == NULL)
		return NULL;
	for (i = 0; i < c->nnodes; i++)
		if (&c->nodes[i].cmd == conn)
			return &c->nodes[i];
	return NULL;
}

int
rs_cl_is_cmd(struct rstore *st, const struct rconn *conn)
{
	return rs_cl_node(st, conn) != NULL;
}

void
rs_cl_name(struct rstore *st, const struct rconn *conn, char *out,
    size_t outlen)
{
	struct rcnode	*n = rs_cl_node(st, conn);

	if (n != NULL)
		snprintf(out, outlen, "%s:%d", n->addr.host, n->addr.port);
	else
		snprintf(out, outlen, "%s:%d", st->master.host,
		    st->master.port);
}

/* Starts a link: asks the seed at st->sen_idx for the slot map. */
void
rs_cl_start(struct rstore *st)
{
	char	 why[512];

	rs_cl_drop(st);
	while (st->sen_tried < st->nhosts) {
		st->sen_tried++;
		if (rs_connect(st, &st->sen, &st->hosts[st->sen_idx], why,
		    sizeof(why)) == 0)
			return;		/* rs_cl_on_seed asks */
		log_debug("store: cluster seed %s", why);
		st->sen_idx = (st->sen_idx + 1) % st->nhosts;
	}
	rs_link_down(st, "no cluster node of the url answered with a slot "
	    "map");
}

/* Sends CLUSTER SLOTS on conn (AUTH first on a seed). */
static int
rs_cl_ask(struct rstore *st, struct rconn *conn, int auth)
{
	struct rargs	 a;
	struct rcmd	*rc;
	int		 rv;

	if (auth && st->pass != NULL) {
		if ((rc = rs_cmd_new(st, RC_FIRE, NULL, NULL)) == NULL)
			return -1;
		rc->conn = conn;
		rs_args_init(&a, 2, 0);
		rs_args_str(&a, "AUTH");
		rs_args_str(&a, st->pass);
		rv = rs_send(st, rc, &a);
		rs_args_free(&a);
		if (rv == -1)
			return -1;
	}
	if ((rc = rs_cmd_new(st, RC_SLOTS, NULL, NULL)) == NULL)
		return -1;
	rc->conn = conn;
	rs_args_init(&a, 2, 0);
	rs_args_str(&a, "CLUSTER");
	rs_args_str(&a, "SLOTS");
	rv = rs_send(st, rc, &a);
	rs_args_free(&a);
	return rv;
}

/* The seed's connection is up: ask it for the map. */
void
rs_cl_on_seed(struct rstore *st)
{
	if (rs_cl_ask(st, &st->sen, 1) == -1)
		rs_link_later(st);
	else {
		st->sen_busy = 1;
		st->sen_sent = util_mono_ms();
	}
}

/* The seed failed (connect, disconnect, a reply that is no map). */
void
rs_cl_seed_failed(struct rstore *st, const char *why)
{
	log_debug("store: cluster seed %s:%d: %s",
	    st->hosts[st->sen_idx].host, st->hosts[st->sen_idx].port, why);
	st->sen_busy = 0;
	st->sen_idx = (st->sen_idx + 1) % st->nhosts;
	if (st->link == LINK_CONNECTING && !st->sen_answered)
		rs_cl_start(st);
}

/* Connects to every master of c->map; the subscriber to the first. */
static void
rs_cl_connect_all(struct rstore *st)
{
	struct rclu	*c = st->clu;
	char		 why[512];
	size_t		 i;

	free(c->nodes);
	c->nnodes = 0;
	c->nup = 0;
	if ((c->nodes = calloc(c->map->nnodes, sizeof(*c->nodes))) ==
	    NULL) {
		rs_link_down(st, "cluster: out of memory");
		return;
	}
	c->nnodes = c->map->nnodes;
	for (i = 0; i < c->nnodes; i++)
		c->nodes[i].addr = c->map->nodes[i];
	memcpy(st->master.host, c->nodes[0].addr.host,
	    sizeof(st->master.host));
	st->master.port = c->nodes[0].addr.port;
	for (i = 0; i < c->nnodes; i++) {
		struct rhost	 h;

		memcpy(h.host, c->nodes[i].addr.host, sizeof(h.host));
		h.port = c->nodes[i].addr.port;
		if (rs_connect(st, &c->nodes[i].cmd, &h, why, sizeof(why)) ==
		    -1) {
			rs_link_down(st, "cluster master %s", why);
			return;
		}
	}
	if (rs_connect(st, &st->sub, &st->master, why, sizeof(why)) == -1)
		rs_link_down(st, "cluster master %s", why);
}

/*
 * Takes the routing of m when every slot of it is on a master connected:
 * the node table in use stays, its slots now say what m says.  -1: m
 * names another node (or leaves a slot without one).
 */
static int
rs_cl_adopt(struct rstore *st, const struct rcl_map *m)
{
	struct rclu		*c = st->clu;
	const struct rcl_addr	*a;
	uint16_t		*tmp;
	unsigned		 i;
	int			 idx;

	if (m->covered != RCL_SLOTS ||
	    (tmp = calloc(RCL_SLOTS, sizeof(*tmp))) == NULL)
		return -1;
	for (i = 0; i < RCL_SLOTS; i++) {
		if ((a = rcl_map_node(m, i)) == NULL ||
		    (idx = rcl_map_find(c->map, a)) == -1 ||
		    (size_t)idx >= c->nnodes) {
			free(tmp);
			return -1;
		}
		tmp[i] = (uint16_t)idx;
	}
	memcpy(c->map->slot, tmp, sizeof(c->map->slot));
	c->map->covered = RCL_SLOTS;
	free(tmp);
	log_info("store: cluster: slots moved between the masters: routing "
	    "updated");
	return 0;
}

/*
 * A CLUSTER SLOTS reply: while connecting, the map to connect to; once up,
 * whether the map in use is still the cluster's.
 */
void
rs_cl_on_slots(struct rcmd *rc, redisReply *r)
{
	struct rstore	*st = rc->st;
	struct rclu	*c = st->clu;
	struct rcl_map	*m;
	char		 err[256], asked[RCL_HOST_MAX + 1];

	if (rc->conn == &st->sen)
		st->sen_busy = 0;
	else
		c->watching = 0;
	/* NULL: the connection failed and its own callback says so. */
	if (r == NULL || rc->epoch != st->epoch)
		return;
	if (rc->conn == &st->sen)
		memcpy(asked, st->hosts[st->sen_idx].host, sizeof(asked));
	else
		memcpy(asked, st->master.host, sizeof(asked));
	m = rcl_map_build(r, asked, err, sizeof(err));
	if (st->link == LINK_CONNECTING && rc->conn == &st->sen &&
	    !st->sen_answered) {
		if (m == NULL) {
			rs_drop_conn(st, &st->sen);
			rs_cl_seed_failed(st, err);
			return;
		}
		if (m->covered != RCL_SLOTS) {
			rs_link_down(st, "cluster: %zu of 16384 slots have a "
			    "master (is cluster_state ok?)", m->covered);
			rcl_map_free(m);
			return;
		}
		st->sen_answered = 1;
		rcl_map_free(c->map);
		c->map = m;
		/* The masters are known: the seed is not needed any more. */
		rs_drop_conn(st, &st->sen);
		rs_cl_connect_all(st);
		return;
	}
	if (st->link != LINK_UP || c->map == NULL) {
		rcl_map_free(m);
		return;
	}
	if (m == NULL)
		log_warnx("%s", err);
	else if (!rcl_map_same(m, c->map) && rs_cl_adopt(st, m) == -1)
		rs_link_down(st, "cluster: the slot map changed (a failover?): "
		    "connecting again");
	rcl_map_free(m);
}

/* Once a poll period while up: is the map in use still the cluster's? */
void
rs_cl_watch(struct rstore *st, uint64_t now)
{
	struct rclu	*c = st->clu;

	if (c == NULL || c->nnodes == 0 || st->link != LINK_UP)
		return;
	(void)now;
	/* One at a time; rs_tick's deadline on the oldest command covers
	 * one that does not come back. */
	if (!c->watching && rs_cl_ask(st, &c->nodes[0].cmd, 0) == 0)
		c->watching = 1;
}

/* A master's command connection is up: its handshake. */
void
rs_cl_on_connect(struct rstore *st, struct rconn *conn)
{
	struct rclu	*c = st->clu;
	int		 i;

	if (st->pass != NULL)
		rs_hs_send(st, conn, HS_AUTH, 0);
	/* Every master runs the scripts: each loads them. */
	for (i = 0; i < SC_COUNT; i++)
		rs_hs_send(st, conn, HS_SCRIPT, i);
	if (++c->nup == c->nnodes) {
		st->hs_cmd_sent = 1;
		rs_hs_check(st);
	}
}

/*
 * The connection a command for rc's slot goes on, or NULL.  A keyless
 * PUBLISH (RC_FIRE without a session: the heartbeat) goes to any
 * connected master: the cluster bus carries it to every node.
 */
struct rconn *
rs_cl_route(struct rstore *st, const struct rcmd *rc)
{
	struct rclu	*c = st->clu;
	size_t		 i;
	int		 slot;

	slot = rc->slot >= 0 ? rc->slot : rc->s != NULL ? (int)rc->s->slot :
	    -1;
	if (c != NULL && slot < 0 && rc->kind == RC_FIRE) {
		for (i = 0; i < c->nnodes; i++)
			if (c->nodes[i].cmd.connected)
				return &c->nodes[i].cmd;
		return NULL;
	}
	if (c == NULL || c->map == NULL || slot < 0 || slot >= RCL_SLOTS ||
	    c->map->slot[slot] == RCL_NOSLOT ||
	    c->map->slot[slot] >= c->nnodes)
		return NULL;
	return &c->nodes[c->map->slot[slot]].cmd;
}

/*
 * rc goes again: a session's later writes wait until it is back (as after
 * NOSCRIPT), so that its batches reach the new node in their order.
 */
static void
rs_cl_hold(struct rcmd *rc)
{
	if (!rc->retried) {
		rc->retried = 1;
		if (rc->kind == RC_BATCH)
			rc->s->noscript++;
	}
}

/* Queues rc to be sent again from the start on the next tick. */
static int
rs_cl_later(struct rstore *st, struct rcmd *rc)
{
	if (rc->tries++ >= RS_CL_TRIES)
		return 2;
	rs_cl_hold(rc);
	TAILQ_INSERT_TAIL(&st->clu->retry, rc, entry);
	return 1;
}

/*
 * An error reply rc got: a redirection (MOVED, ASK) or TRYAGAIN, handled
 * as the first comment says.  1: rc is to be sent again and lives on; 2:
 * rc failed as on a lost connection (its handler gets NULL); 0: the
 * reply goes to rc's handler.
 */
int
rs_cl_redirect(struct rcmd *rc, const redisReply *r)
{
	struct rstore		*st = rc->st;
	struct rclu		*c = st->clu;
	struct rcl_addr		 to;
	struct rcnode		*n;
	struct rcmd		*ask;
	struct rargs		 a;
	char			 from[RCL_HOST_MAX + 8];
	enum rcl_redirect	 kind;
	unsigned		 slot;
	int			 i;

	/* A WAIT counts its own connection's writes (and its riders'):
	 * it never moves, whatever the reply (Redis redirects no keyless
	 * command). */
	if (c == NULL || c->map == NULL || r->type != REDIS_REPLY_ERROR ||
	    rc->fmt == NULL || rc->kind == RC_WAIT)
		return 0;
	if (r->len >= 8 && memcmp(r->str, "TRYAGAIN", 8) == 0)
		return rs_cl_later(st, rc);
	n = rs_cl_node(st, rc->conn);
	kind = rcl_parse_redirect(r->str, r->len, n != NULL ? n->addr.host :
	    st->master.host, &slot, &to);
	if (kind == RCL_REDIR_NONE)
		return 0;
	rs_cl_name(st, rc->conn, from, sizeof(from));
	if (kind == RCL_REDIR_BAD) {
		log_warnx("store: cluster: %s answered \"%.80s\": not a "
		    "redirection this store can follow", from, r->str);
		return 0;
	}
	if ((i = rcl_map_find(c->map, &to)) == -1 ||
	    (size_t)i >= c->nnodes || c->nodes[i].cmd.ac == NULL ||
	    !c->nodes[i].cmd.connected || (kind == RCL_REDIR_ASK &&
	    rc->asked)) {
		if (st->link == LINK_UP)
			rs_link_down(st, "cluster: %s answered %s for slot %u "
			    "(to %s:%d): connecting again with a new slot map",
			    from, kind == RCL_REDIR_MOVED ? "MOVED" : "ASK",
			    slot, to.host, to.port);
		return 2;
	}
	if (kind == RCL_REDIR_MOVED) {
		/* The slot is on another master connected: route it there. */
		if (slot < RCL_SLOTS && c->map->slot[slot] != RCL_NOSLOT) {
			c->map->slot[slot] = (uint16_t)i;
			log_debug("store: cluster: slot %u moved to %s:%d",
			    slot, to.host, to.port);
		}
		return rs_cl_later(st, rc);
	}
	/* ASKING holds for the next command on that connection only. */
	if ((ask = rs_cmd_new(st, RC_FIRE, NULL, NULL)) == NULL)
		return 2;
	ask->conn = &c->nodes[i].cmd;
	rs_args_init(&a, 1, 0);
	rs_args_str(&a, "ASKING");
	if (rs_send(st, ask, &a) == -1) {
		rs_args_free(&a);
		return 2;
	}
	rs_args_free(&a);
	if (redisAsyncFormattedCommand(c->nodes[i].cmd.ac, rs_reply, rc,
	    rc->fmt, rc->fmtlen) != REDIS_OK)
		return 2;
	rs_cl_hold(rc);
	rc->asked = 1;
	rc->conn = &c->nodes[i].cmd;
	rc->sent = util_mono_ms();
	rc->no = ++rc->conn->nsent;
	TAILQ_INSERT_TAIL(&st->inflight, rc, entry);
	rc->tracked = 1;
	log_debug("store: cluster: slot %u is moving: asked %s:%d", slot,
	    to.host, to.port);
	return 1;
}

/* On a tick while up: sends again what TRYAGAIN or MOVED held back. */
void
rs_cl_retry(struct rstore *st)
{
	struct rclu	*c = st->clu;
	struct rcmd	*rc;
	struct rconn	*conn;
	TAILQ_HEAD(, rcmd) q;

	if (c == NULL || TAILQ_EMPTY(&c->retry))
		return;
	TAILQ_INIT(&q);
	TAILQ_CONCAT(&q, &c->retry, entry);
	rs_store_ref(st);
	while ((rc = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, rc, entry);
		rc->asked = 0;
		rc->conn = NULL;
		if (st->closing || st->link != LINK_UP ||
		    (conn = rs_cl_route(st, rc)) == NULL ||
		    conn->ac == NULL || !conn->connected ||
		    redisAsyncFormattedCommand(conn->ac, rs_reply, rc,
		    rc->fmt, rc->fmtlen) != REDIS_OK) {
			rs_reply(NULL, NULL, rc);
			continue;
		}
		rc->conn = conn;
		rc->sent = util_mono_ms();
		rc->no = ++conn->nsent;
		TAILQ_INSERT_TAIL(&st->inflight, rc, entry);
		rc->tracked = 1;
	}
	rs_store_unref(st);
}

/* Writes what every master's connection has buffered, without waiting. */
void
rs_cl_flush_out(struct rstore *st)
{
	struct rclu	*c = st->clu;
	size_t		 i;

	if (c == NULL)
		return;
	for (i = 0; i < c->nnodes; i++)
		rs_flush_out(&c->nodes[i].cmd);
}

/*
 * parleyd's start-up check: a seed's map covers every slot and every
 * master answers PING (after AUTH).
 */
int
rs_cl_ping(struct rstore *st, uint64_t deadline, char *err, size_t errlen)
{
	const char	*auth[] = { "AUTH", st->pass };
	const char	*slots[] = { "CLUSTER", "SLOTS" };
	const char	*ping[] = { "PING" };
	struct rcl_map	*m = NULL;
	struct rhost	 h;
	redisContext	*c;
	redisReply	*r;
	size_t		 i;
	int		 ok = 0;

	for (i = 0; i < st->nhosts && m == NULL; i++) {
		if ((c = rs_ping_connect(&st->hosts[i], "cluster node",
		    deadline, err, errlen)) == NULL)
			continue;
		r = NULL;
		if (st->pass != NULL && (r = rs_ping_cmd(c, &st->hosts[i],
		    "cluster node", deadline, err, errlen, 2, auth)) == NULL) {
			redisFree(c);
			continue;
		}
		if (r != NULL)
			freeReplyObject(r);
		if ((r = rs_ping_cmd(c, &st->hosts[i], "cluster node",
		    deadline, err, errlen, 2, slots)) != NULL) {
			m = rcl_map_build(r, st->hosts[i].host, err, errlen);
			freeReplyObject(r);
		}
		redisFree(c);
	}
	if (m == NULL)
		return -1;
	if (m->covered != RCL_SLOTS) {
		snprintf(err, errlen, "store: cluster: %zu of 16384 slots "
		    "have a master (is cluster_state ok?)", m->covered);
		goto out;
	}
	for (i = 0; i < m->nnodes; i++) {
		memcpy(h.host, m->nodes[i].host, sizeof(h.host));
		h.port = m->nodes[i].port;
		if ((c = rs_ping_connect(&h, "cluster master", deadline, err,
		    errlen)) == NULL)
			goto out;
		r = NULL;
		if (st->pass != NULL && (r = rs_ping_cmd(c, &h,
		    "cluster master", deadline, err, errlen, 2, auth)) ==
		    NULL) {
			redisFree(c);
			goto out;
		}
		if (r != NULL)
			freeReplyObject(r);
		r = rs_ping_cmd(c, &h, "cluster master", deadline, err, errlen,
		    1, ping);
		redisFree(c);
		if (r == NULL)
			goto out;
		freeReplyObject(r);
	}
	ok = 1;
out:
	rcl_map_free(m);
	return ok ? 0 : -1;
}
