/*
 * Where a client's stream starts in its session's log: session_state,
 * then RESUME_GAP (a rewrite, parley/epoch.h) or a retention gap when
 * the log no longer holds what the client asks for, then replay and
 * live.  Split out of route.c, which routes requests to it.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/epoch.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "conn.h"
#include "deliver.h"
#include "position.h"
#include "sess.h"
#include "wk.h"

/*
 * Tells a client that the log's history was rewritten from seq `from`
 * after what it saw (a store failover lost events, parley/epoch.h): it
 * drops what it has from `from` on and gets the log's from there.
 */
static void
rewrite_gap(struct conn *c, struct sess *s, uint64_t from,
    uint64_t first, uint64_t last)
{
	cJSON *x;
	char *j;

	/* Another protocol's translation cannot say it: conn_send_gap cuts
	 * its stream. */
	if (c->adapt != NULL) {
		conn_send_gap(c, first, last);
		return;
	}
	c->wk->metrics.resume_gaps++;
	log_rinfo(c->reqid, s->id, "RESUME_GAP: the client saw seq %llu of "
	    "an older epoch; the history was rewritten from %llu (epoch %s)",
	    (unsigned long long)last, (unsigned long long)from,
	    sess_epoch(s));
	x = cJSON_CreateObject();
	cJSON_AddStringToObject(x, "epoch", sess_epoch(s));
	cJSON_AddNumberToObject(x, "from", (double)from);
	cJSON_AddNumberToObject(x, "oldestSeq", (double)first);
	cJSON_AddNumberToObject(x, "lastSeq", (double)last);
	j = proto_error(s->id, "RESUME_GAP", "the session's history was "
	    "rewritten after events you have (a store failover lost them): "
	    "drop your events from seq `from` on; replaying from there",
	    "warning", x);
	conn_send_json(c, j);
	free(j);
}

/*
 * Where a resume after seq last of epoch cep ("" none) starts: RESUME_GAP
 * first when the log rewrote what the client saw (an epoch since cep
 * starts at or below last) or retention removed what follows it.  Sets
 * c->sub.next_seq.
 */
int
position_set(struct conn *c, struct sess *s, uint64_t last,
    const char *cep)
{
	uint64_t first = deliver_first(&s->feed), top = sess_last_seq(s);
	uint64_t from;
	const char *t = sess_epochs(s);
	struct epochs ep;

	if (t[0] == '\0' || epoch_parse(&ep, t, strlen(t)) == -1)
		ep.n = 0;
	/* A follower that does not know the client's epoch may not have
	 * read the latest yet (the client came from the owner): deciding
	 * now would call it older than all, a needless RESUME_GAP, and the
	 * client would take this stale list.  It reads the epochs again
	 * and cuts the client, which comes back in a moment.  Once per
	 * epoch and second, so that an epoch no list will hold (forgotten
	 * past EPOCH_KEEP, or foreign) is answered as before; a full list
	 * may have forgotten it, so that is answered at once. */
	if (s->follower && cep[0] != '\0' && ep.n < EPOCH_KEEP &&
	    !epoch_known(&ep, cep) && s->st != NULL &&
	    (strcmp(s->cut_epoch, cep) != 0 ||
	    util_mono_ms() - s->cut_ms > 1000)) {
		snprintf(s->cut_epoch, sizeof(s->cut_epoch), "%s", cep);
		s->cut_ms = util_mono_ms();
		log_rinfo(c->reqid, s->id, "the client's epoch %s is not "
		    "known here yet: reading the epochs again; the client "
		    "reconnects", cep);
		store_resync(s->st);
		conn_close(c, WS_CLOSE_SERVICE_RESTART, "this host has not "
		    "caught up with the session yet; reconnect with your "
		    "lastSeq and epoch");
		return -1;	/* c may be gone */
	}
	if (ep.n > 0 && epoch_resume(&ep, cep, last, &from) == 1) {
		if (from < first)
			from = first;
		rewrite_gap(c, s, from, first, last);
		c->sub.next_seq = from;
		return 0;
	}
	/* Past the end: the owner knows the log ends at top, so the client
	 * saw events the log no longer has (a store failover lost them, or
	 * the whole session, with no epoch to say so): what comes next
	 * takes their seqs, and a client told nothing would drop them as
	 * duplicates.  A follower may not have heard of what it saw yet. */
	if (last > top && !s->follower) {
		from = top + 1 < first ? first : top + 1;
		rewrite_gap(c, s, from, first, last);
		c->sub.next_seq = from;
		return 0;
	}
	c->sub.next_seq = last + 1;
	if (c->sub.next_seq < first) {
		conn_send_gap(c, first, last);
		c->sub.next_seq = first;
	}
	return 0;
}

/*
 * Positions a stream: session_state first, then RESUME_GAP if the log no
 * longer holds what the client asks for, then replay and live.  epoch:
 * the client's (resume only; "" when it named none).  -1: c was cut (a
 * follower catching up) and may be gone.
 */
int
position_open(struct conn *c, struct sess *s, int have_last, uint64_t last,
    const char *epoch)
{
	char *j;

	conn_attach(c, s);
	j = proto_reply("session_state", s->id, sess_state(s));
	conn_send_json(c, j);
	free(j);
	c->sub.live = 0;
	if (!have_last) {
		c->sub.next_seq = sess_last_seq(s) + 1;
	} else {
		deliver_replay_begin(&c->sub);
		if (position_set(c, s, last, epoch) == -1)
			return -1;
	}
	c->sub.live_from = c->sub.next_seq;
	deliver_pump(&c->sub);
	return 0;
}
