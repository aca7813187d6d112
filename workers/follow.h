/* Following a session another process owns; taking it over. */
#ifndef PARLEY_WORKERS_FOLLOW_H
#define PARLEY_WORKERS_FOLLOW_H

#include <stdint.h>

struct sess;
struct sess_client;
struct sess_result;
struct proto_in;
struct store_sess;

/* Store events (struct store_events): the owner appended; its lease lapsed. */
void	follow_grown(void *wk, struct store_sess *, uint64_t last);
void	follow_vacant(void *wk, struct store_sess *);
/* A follower's client message goes to the owner's inbox; answered once
 * the inbox has it (r->pending). */
struct sess_from;
void	follow_input(struct sess *, struct sess_client *c,
	    const struct sess_from *,
	    struct proto_in *, struct sess_result *);

#endif
