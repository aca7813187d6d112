/*
 * POST /api/chat and GET /api/chat/{id}/stream: the Vercel AI SDK's UI message stream, v1, an adapter over the session log (adapt.h).
 */
#ifndef PARLEY_WORKERS_AISDK_H
#define PARLEY_WORKERS_AISDK_H

#include <stddef.h>

struct adapt_ops;
struct conn;

/* Its chunks, by c->adapt (adapt.h). */
extern const struct adapt_ops aisdk_adapt;

/*
 * Whether c's path is one of this module's; then into sid the session to
 * load first (0 when the request names none usable: aisdk_http answers),
 * *create when a turn will run in it.
 */
int	aisdk_path(const struct conn *);
int	aisdk_session(struct conn *, char *sid, size_t sidlen, int *create);
/* Handles the request (its session loaded): the stream, or an error. */
void	aisdk_http(struct conn *);

#endif
