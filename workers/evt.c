/*
 * Logged events as connections are given them: the JSON encoded once,
 * its WebSocket and SSE framings made on first use and shared by
 * reference across every connection that writes them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/sse.h"
#include "parley/ws.h"
#include "evt.h"

#define EVT_WS_ROOM	10	/* the longest server frame header */

static const char pfx[] = "{\"v\":1,\"type\":\"";
/* The scoped type, quoted as it follows pfx. */
static const char scoped[] = "thought\"";

int
evt_json_scoped(const char *json, size_t len)
{
	return len > sizeof(pfx) - 1 + sizeof(scoped) - 1 &&
	    memcmp(json, pfx, sizeof(pfx) - 1) == 0 &&
	    memcmp(json + sizeof(pfx) - 1, scoped, sizeof(scoped) - 1) == 0;
}

struct evt *
evt_new(uint64_t seq, const char *json, size_t len)
{
	struct evt *e;
	const char *t, *q;

	if (len > SIZE_MAX - sizeof(*e) - EVT_WS_ROOM - 1 ||
	    (e = malloc(sizeof(*e) + EVT_WS_ROOM + len + 1)) == NULL)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->json = (char *)(e + 1) + EVT_WS_ROOM;
	memcpy(e->json, json, len);
	e->json[len] = '\0';
	e->len = len;
	e->seq = seq;
	e->refs = 1;
	/* Every event this server writes starts with v then type. */
	if (strncmp(json, pfx, sizeof(pfx) - 1) == 0) {
		t = json + sizeof(pfx) - 1;
		if ((q = memchr(t, '"', len - (size_t)(t - json))) != NULL &&
		    (size_t)(q - t) < sizeof(e->type))
			memcpy(e->type, t, (size_t)(q - t));
	}
	e->scoped = evt_json_scoped(json, len);
	return e;
}

void
evt_unref(struct evt *e)
{
	if (e == NULL || --e->refs > 0)
		return;
	if (e->view != NULL)
		e->view_free(e->view);
	free(e->sse);
	free(e);
}

void
evt_unref_cb(const void *data, size_t len, void *arg)
{
	evt_unref(arg);
}

const unsigned char *
evt_ws(struct evt *e, size_t *len)
{
	unsigned char hdr[10];
	size_t h;

	if (e->ws == NULL) {
		h = ws_frame_header(hdr, WS_OP_TEXT, e->len);
		e->ws = (unsigned char *)e->json - h;
		memcpy(e->ws, hdr, h);
		e->wslen = h + e->len;
	}
	*len = e->wslen;
	return e->ws;
}

const char *
evt_sse(struct evt *e, const char *epoch, size_t *len)
{
	char	*body, id[64];
	size_t	 blen, ilen;

	if (e->sse == NULL && epoch[0] == '\0' &&
	    (e->sse = sse_event_string(e->seq, e->type[0] ? e->type : NULL,
	    e->json, e->len, &e->sselen)) == NULL)
		return NULL;
	if (e->sse == NULL) {
		/* EventSource hands the id back as Last-Event-ID: the epoch
		 * comes back with the seq. */
		ilen = (size_t)snprintf(id, sizeof(id), "id: %llu.%.16s\n",
		    (unsigned long long)e->seq, epoch);
		if ((body = sse_event_string(0, e->type[0] ? e->type : NULL,
		    e->json, e->len, &blen)) == NULL)
			return NULL;
		if ((e->sse = malloc(ilen + blen + 1)) == NULL) {
			free(body);
			return NULL;
		}
		memcpy(e->sse, id, ilen);
		memcpy(e->sse + ilen, body, blen + 1);
		e->sselen = ilen + blen;
		free(body);
	}
	*len = e->sselen;
	return e->sse;
}
