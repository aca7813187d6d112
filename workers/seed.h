/*
 * POST /api/agents/stream: the seed-compatible turn stream.  A chat turn
 * run like POST /sessions/{id}/messages with Accept: text/event-stream,
 * its logged events translated into the chunks clients of that system
 * read: data: {"type":"content"|"tool_call"|"metadata"|"error",...}.
 */
#ifndef PARLEY_WORKERS_SEED_H
#define PARLEY_WORKERS_SEED_H

#include <stddef.h>

struct conn;
struct evt;
struct sess;
struct sess_result;
struct adapt_ops;

/* The session the request's body names, to load first (create: a turn
 * will run); 0 when it names none usable (seed_post answers then). */
int	seed_session(struct conn *, char *sid, size_t sidlen, int *create);
/* Handles the request: the turn's stream, or an error chunk. */
void	seed_post(struct conn *);
/* The session's answer to the turn's chat (route.c's post_reply). */
void	seed_reply(struct conn *, struct sess *, const struct sess_result *);
/* Its chunks, by c->adapt (adapt.h). */
extern const struct adapt_ops seed_adapt;

#endif
