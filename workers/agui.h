/*
 * POST /api/agui and GET /api/agui/{threadId}/stream: AG-UI, an adapter over the session log (adapt.h).
 */
#ifndef PARLEY_WORKERS_AGUI_H
#define PARLEY_WORKERS_AGUI_H

#include <stddef.h>

struct adapt_ops;
struct conn;

/* Its chunks, by c->adapt (adapt.h). */
extern const struct adapt_ops agui_adapt;

/*
 * Whether c's path is one of this module's; then into sid the session to
 * load first (0 when the request names none usable: agui_http answers),
 * *create when a turn will run in it.
 */
int	agui_path(const struct conn *);
int	agui_session(struct conn *, char *sid, size_t sidlen, int *create);
/* Handles the request (its session loaded): the stream, or an error. */
void	agui_http(struct conn *);

#endif
