/* Logged events, encoded once and framed on first use. */
#ifndef PARLEY_WORKERS_EVT_H
#define PARLEY_WORKERS_EVT_H

#include <stddef.h>
#include <stdint.h>

/*
 * One logged event, encoded once and shared by every connection it is
 * written to (by reference when large, else copied from it); the
 * framings are built on first use.
 */
struct evt {
	struct evt	*next;		/* sess pending list, not yet durable */
	unsigned	 refs;
	uint64_t	 seq;
	char		*json;
	size_t		 len;
	unsigned char	*ws;		/* frame header + json */
	size_t		 wslen;
	char		*sse;
	size_t		 sselen;
	char		 type[32];
	uint64_t	 appended_us;	/* handed to the store (monotonic) */
};

struct evt	*evt_new(uint64_t seq, const char *json, size_t len);
void		 evt_unref(struct evt *);
void		 evt_unref_cb(const void *data, size_t len, void *arg);
const unsigned char *evt_ws(struct evt *, size_t *len);
const char	*evt_sse(struct evt *, size_t *len);

#endif
