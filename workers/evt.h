/* Logged events, encoded once and framed on first use. */
#ifndef PARLEY_WORKERS_EVT_H
#define PARLEY_WORKERS_EVT_H

#include <stddef.h>
#include <stdint.h>

/*
 * One logged event, encoded once and shared by every connection it is
 * written to (by reference when large, else copied from it); the
 * framings are built on first use.  The struct, room for a WebSocket
 * frame header and the JSON are one allocation: a server's frame is the
 * header then the payload as it is (unmasked), so the frame is the JSON
 * with its header written in front, made without a copy or a malloc.
 */
struct evt {
	struct evt	*next;		/* sess pending list, not yet durable */
	unsigned	 refs;
	uint64_t	 seq;
	char		*json;		/* inside this allocation */
	size_t		 len;
	unsigned char	*ws;		/* frame header + json, or NULL */
	size_t		 wslen;
	char		*sse;
	size_t		 sselen;
	char		 type[32];
	uint64_t	 appended_us;	/* handed to the store (monotonic) */
	/* A type whose recipients may see it differently (a thought):
	 * delivery asks its feed's view for each; other events cost one
	 * test.  view holds what the viewer made of it, freed with it. */
	int		 scoped;
	void		*view;
	void		(*view_free)(void *);
};

struct evt	*evt_new(uint64_t seq, const char *json, size_t len);
void		 evt_unref(struct evt *);
/* Whether a logged record's JSON is of a scoped type (see struct evt). */
int		 evt_json_scoped(const char *json, size_t len);
void		 evt_unref_cb(const void *data, size_t len, void *arg);
const unsigned char *evt_ws(struct evt *, size_t *len);
/* SSE framing; its id is "SEQ.EPOCH" once the log has an epoch. */
const char	*evt_sse(struct evt *, const char *epoch, size_t *len);

#endif
