/* parleyctl: a session's event stream that survives daemon restarts. */
#ifndef PARLEY_TOOLS_CTL_FOLLOW_H
#define PARLEY_TOOLS_CTL_FOLLOW_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "parleyctl.h"

struct sse_parser;

/* An event stream that survives restarts of the daemon. */
struct follow {
	const char	*sid;
	uint64_t	 last;		/* highest seq handed on */
	/* The log's epoch it was in ("" none): a resume names it, so that
	 * a history a failover rewrote is replayed (RESUME_GAP). */
	char		 epoch[16];
	/* session_state's, taken once an event follows it: a RESUME_GAP
	 * would have come first, and a stream lost before it must resume
	 * with the epoch the events shown were in. */
	char		 next_epoch[16];
	int		 has_next;
	struct hc	 h;		/* h.fd is -1 while there is no stream */
	struct sse_parser *parser;
	uint64_t	 down_since;	/* 0 while the daemon answers */
	uint64_t	 retry_at;
	unsigned	 backoff;
	/* seq is 0 for events that are not logged. */
	void		(*on_event)(void *, cJSON *, const char *data,
			    size_t len, uint64_t seq);
	void		*arg;
};

void	follow_init(struct follow *, const char *sid, uint64_t last);
/* Opens the stream (after f->last); on failure, the next try's time. */
void	follow_open(struct follow *);
/* Reads what the stream has, handing events to f->on_event. */
void	follow_read(struct follow *);
/* poll(2)'s timeout: bound ms, or less when a retry is due sooner. */
int	follow_timeout(struct follow *, int bound);
void	follow_free(struct follow *);

#endif
