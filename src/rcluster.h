/*
 * Redis Cluster routing for the Redis store, without any I/O: CRC16 and
 * a key's hash slot, the cluster:// url, a slot map built from a
 * CLUSTER SLOTS reply, and MOVED/ASK redirections.  The Redis store is
 * its only user.
 */
#ifndef PARLEY_RCLUSTER_H
#define PARLEY_RCLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#define RCL_SLOTS	16384	/* fixed by the cluster specification */
#define RCL_SEEDS_MAX	16	/* HOST:PORT in one url */
#define RCL_HOST_MAX	255
#define RCL_PASS_MAX	512
/* Masters in one slot map: the specification suggests ~1000 nodes. */
#define RCL_NODES_MAX	1024
/* Ranges in one CLUSTER SLOTS reply: one per slot at the very most. */
#define RCL_RANGES_MAX	RCL_SLOTS
#define RCL_NOSLOT	0xffffu	/* rcl_map.slot[]: no known master */

struct rcl_addr {
	char			 host[RCL_HOST_MAX + 1]; /* no [] */
	int			 port;
};

struct rcl_url {
	char			*pass;	/* NULL: no AUTH; owned */
	struct rcl_addr		 seeds[RCL_SEEDS_MAX];
	size_t			 nseeds;	/* 1 .. SEEDS_MAX */
};

/* The masters serving slots, as one CLUSTER SLOTS reply described them. */
struct rcl_map {
	uint16_t		 slot[RCL_SLOTS]; /* node index, NOSLOT */
	struct rcl_addr		*nodes;		/* owned */
	size_t			 nnodes;
	size_t			 covered;	/* slots with a master */
};

enum rcl_redirect {
	RCL_REDIR_BAD = -1,	/* MOVED or ASK, but malformed */
	RCL_REDIR_NONE = 0,	/* some other error */
	RCL_REDIR_MOVED,
	RCL_REDIR_ASK
};

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no
 * reflection), the cluster specification's key hash. */
uint16_t	 rcl_crc16(const void *, size_t);
/* The hash slot of a key: the CRC16 of its hash tag (what lies between
 * the first '{' and the first '}' after it, when that is not empty) or
 * of the whole key, modulo 16384. */
unsigned	 rcl_keyslot(const void *key, size_t len);

/*
 * Parses cluster://[:password@]HOST:PORT[,HOST:PORT...] into u (seeds:
 * nodes asked for the slot map; the others are learnt from it).  The
 * password may be %-encoded.  0, or -1 with errno EINVAL (ENOMEM) and a
 * message in err that never repeats the url; u is then left empty.
 * rcl_url_free() frees what u holds.
 */
int		 rcl_parse_url(const char *url, struct rcl_url *u, char *err,
		    size_t errlen);
void		 rcl_url_free(struct rcl_url *);

/*
 * A slot map from a CLUSTER SLOTS reply r, asked of the node at host
 * asked (which a master with an unknown endpoint shares, as the
 * specification says).  Slots no range names stay RCL_NOSLOT.  NULL,
 * with errno EINVAL (ENOMEM) and what was wrong in err, on a reply
 * that is not a well-formed slot table (nothing is kept of it).  The
 * caller frees the map with rcl_map_free().
 */
struct rcl_map	*rcl_map_build(const redisReply *r, const char *asked,
		    char *err, size_t errlen);
void		 rcl_map_free(struct rcl_map *);
/* The master serving slot, or NULL when none is known. */
const struct rcl_addr *rcl_map_node(const struct rcl_map *, unsigned slot);
/* Whether a and b send each slot to the same address (or to none). */
int		 rcl_map_same(const struct rcl_map *a, const struct rcl_map *b);
/* The index of the master at a in m->nodes, or -1. */
int		 rcl_map_find(const struct rcl_map *, const struct rcl_addr *a);

/*
 * Reads an error reply's text ("MOVED 3999 127.0.0.1:6381" or "ASK ...",
 * without the leading '-').  On MOVED or ASK, the slot and the address to
 * go to; an empty host there (an unknown endpoint) becomes asked, the host
 * the command was sent to.  RCL_REDIR_BAD: the text starts with MOVED or
 * ASK but the rest is not a slot and HOST:PORT.
 */
enum rcl_redirect rcl_parse_redirect(const char *s, size_t len,
		    const char *asked, unsigned *slot, struct rcl_addr *to);

#endif
