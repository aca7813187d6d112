/*
 * parleyctl: following a session's events over SSE, across restarts of
 * the daemon (session log -f, chat).
 */
#include <sys/queue.h>
#include <err.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/sse.h"
#include "parley/util.h"
#include "ctl_follow.h"
#include "parleyctl.h"

/*
 * Keeps the epoch session_state or RESUME_GAP names; a RESUME_GAP whose
 * history was rewritten from `from` replays from there, so the events
 * from `from` on are handed on again (they replace those shown).
 */
static void
follow_epoch(struct follow *f, cJSON *ev)
{
	cJSON *t = cJSON_GetObjectItem(ev, "type"), *e, *from;

	if (!cJSON_IsString(t))
		return;
	e = cJSON_GetObjectItem(ev, "epoch");
	if (strcmp(t->valuestring, "session_state") == 0) {
		snprintf(f->next_epoch, sizeof(f->next_epoch), "%s",
		    cJSON_IsString(e) ? e->valuestring : "");
		f->has_next = 1;
		return;
	}
	if (f->has_next && jseq(ev) != 0) {
		memcpy(f->epoch, f->next_epoch, sizeof(f->epoch));
		f->has_next = 0;
	}
	if (strcmp(t->valuestring, "error") != 0 || !cJSON_IsString(e))
		return;
	snprintf(f->epoch, sizeof(f->epoch), "%s", e->valuestring);
	f->has_next = 0;
	from = cJSON_GetObjectItem(ev, "from");
	if (cJSON_IsNumber(from) && from->valuedouble >= 1 &&
	    (uint64_t)from->valuedouble <= f->last)
		f->last = (uint64_t)from->valuedouble - 1;
}

static int
follow_cb(void *arg, const char *type, const char *data, size_t len)
{
	struct follow *f = arg;
	cJSON *ev;
	uint64_t seq;

	if ((ev = cJSON_ParseWithLength(data, len)) == NULL)
		return 0;	/* not an event of ours: skip it */
	follow_epoch(f, ev);
	seq = jseq(ev);
	if (seq != 0) {
		/* A replay after a reconnect starts after f->last; never
		 * hand on an event twice. */
		if (seq <= f->last) {
			cJSON_Delete(ev);
			return 0;
		}
		f->last = seq;
	}
	f->on_event(f->arg, ev, data, len, seq);
	cJSON_Delete(ev);
	return 0;
}

static void
follow_lost(struct follow *f)
{
	uint64_t now = util_mono_ms();

	hc_close(&f->h);
	sse_parser_free(f->parser);
	f->parser = NULL;
	f->has_next = 0;
	if (f->down_since == 0) {
		f->down_since = now;
		f->backoff = 0;
	}
	f->backoff = f->backoff == 0 ? 100 : f->backoff * 2;
	if (f->backoff > 2000)
		f->backoff = 2000;
	f->retry_at = now + f->backoff;
}

/* Gives up, exit 69, once the daemon has been out of reach for DOWN_MS. */
static void
follow_check_down(struct follow *f)
{
	if (f->down_since != 0 && util_mono_ms() - f->down_since > DOWN_MS)
		errx(EXIT_UNAVAIL, "%s; gave up after %d s; check that "
		    "parleyd runs", hc_err[0] ? hc_err : "parleyd is out of "
		    "reach", DOWN_MS / 1000);
}

/* Opens the stream after f->last.  Exits on an answer that is final. */
void
follow_open(struct follow *f)
{
	char *path, *sub;
	int r, rc;

	sub = xprintf("/events?lastSeq=%" PRIu64 "%s%s", f->last,
	    f->epoch[0] ? "&epoch=" : "", f->epoch);
	path = session_path(f->sid, sub);
	free(sub);
	hc_err[0] = '\0';
	r = hc_open(&f->h, "GET", path, NULL, "text/event-stream");
	free(path);
	if (r == HC_OK && f->h.status == 200) {
		if ((f->parser = sse_parser_new(MAX_EVENT, follow_cb, f)) ==
		    NULL)
			errx(EXIT_ERR, "out of memory");
		f->down_since = 0;
		f->backoff = 0;
		return;
	}
	if (r == HC_OK && f->h.status / 100 == 4) {
		if (hc_body(&f->h) == -1)
			errx(EXIT_UNAVAIL, "session %s: %s", f->sid, hc_err);
		rc = session_missing(&f->h, f->sid);
		hc_close(&f->h);
		exit(rc);
	}
	/* Not reachable, or busy (5xx) while it starts or restarts. */
	if (r == HC_OK)
		snprintf(hc_err, sizeof(hc_err), "session %s: parleyd "
		    "answered %d", f->sid, f->h.status);
	follow_lost(f);
	follow_check_down(f);
}

/* Reads what the stream has; called when its socket is readable. */
void
follow_read(struct follow *f)
{
	int r;

	r = hc_read(&f->h, util_mono_ms() + 1);
	if (f->h.body.len > 0) {
		if (sse_parser_feed(f->parser, f->h.body.p, f->h.body.len) ==
		    -1) {
			errx(EXIT_ERR, "session %s: an event larger than %u "
			    "MiB; read it with GET /sessions/%s/log", f->sid,
			    MAX_EVENT >> 20, f->sid);
		}
		buf_drop(&f->h.body, f->h.body.len);
	}
	if (r <= 0 && !interrupted) {
		if (hc_err[0] == '\0')
			snprintf(hc_err, sizeof(hc_err), "the event stream "
			    "ended");
		follow_lost(f);
	}
}

/* The poll(2) timeout until the next reconnect, given a bound in ms. */
int
follow_timeout(struct follow *f, int bound)
{
	uint64_t now = util_mono_ms();

	if (f->h.fd != -1 || f->retry_at <= now)
		return f->h.fd != -1 ? bound : 0;
	if (f->retry_at - now < (uint64_t)bound)
		return (int)(f->retry_at - now);
	return bound;
}

void
follow_init(struct follow *f, const char *sid, uint64_t last)
{
	memset(f, 0, sizeof(*f));
	f->sid = sid;
	f->last = last;
	f->h.fd = -1;
}

void
follow_free(struct follow *f)
{
	hc_close(&f->h);
	sse_parser_free(f->parser);
	f->parser = NULL;
}
