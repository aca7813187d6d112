/*
 * A client's stream's position in its session's log (position.c).
 */
#ifndef POSITION_H
#define POSITION_H

#include <stdint.h>

struct conn;
struct sess;

/*
 * Positions a stream (session_state, gaps, replay, live).  have_last:
 * a resume after seq last of the client's epoch ("" none).  0, or -1:
 * c was cut instead (a follower catching up) and may be gone.
 */
int	position_open(struct conn *, struct sess *, int have_last,
	    uint64_t last, const char *epoch);
/* Where a resume after last of epoch starts, on a stream already open
 * (sets c->sub.next_seq); 0, or -1 as above. */
int	position_set(struct conn *, struct sess *, uint64_t last,
	    const char *epoch);

#endif
