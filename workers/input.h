/* A session's client messages, from its clients or its inbox. */
#ifndef PARLEY_WORKERS_INPUT_H
#define PARLEY_WORKERS_INPUT_H

#include <stddef.h>

struct sess;
struct sess_client;
struct sess_result;
struct proto_in;
struct store_sess;
struct sess_from;

/* Applies a client message from c (NULL: the owner's inbox). */
void	input_apply(struct sess *, struct sess_client *c,
	    const struct sess_from *,
	    struct proto_in *, struct sess_result *);
/* The store's input event: a message a follower forwarded (applied once). */
void	input_inbox(void *wk, struct store_sess *, const char *json,
	    size_t len);

#endif
