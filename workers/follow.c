/*
 * Following a session another process owns (a shared store): its events
 * are read as the owner appends them and fanned out here; client input
 * goes to the owner's inbox.  When the owner's lease lapses, this
 * process takes the session over and owns it from then on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "approve.h"
#include "follow.h"
#include "sess.h"
#include "thought.h"
#include "wk.h"

static void	follow_fetch(struct sess *);

static int
follow_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct sess *s = arg;
	struct evt *e;

	if (seq != deliver_last(&s->feed) + 1)
		return 1;
	if ((e = evt_new(seq, json, len)) == NULL)
		return 1;
	/* The owner's meta was read when following began: what it says of
	 * a pause and of pending requests follows the log from there. */
	if (strcmp(e->type, "session_state") == 0 ||
	    strstr(e->type, "request") != NULL || strstr(e->type,
	    "result") != NULL || strcmp(e->type, "mcp_call") == 0 ||
	    strcmp(e->type, "audit_entry") == 0 ||
	    strncmp(e->type, "action_", 7) == 0 ||
	    strcmp(e->type, "directive") == 0 ||
	    strcmp(e->type, "agent_joined") == 0 ||
	    strcmp(e->type, "agent_left") == 0 ||
	    strcmp(e->type, "session_complete") == 0 ||
	    strcmp(e->type, "team_update") == 0) {
		cJSON *o = cJSON_ParseWithLength(json, len), *p;

		if (cJSON_IsBool(p = cJSON_GetObjectItem(o, "paused")))
			proto_set(sess_meta(s), "paused",
			    cJSON_CreateBool(cJSON_IsTrue(p)));
		approve_follow(s, e->type, o, ts);
		PARTS(s, part)
			if (part->follow != NULL)
				part->follow(s, e->type, o, ts);
		cJSON_Delete(o);
	}
	PARTS(s, part)
		if (part->scan != NULL)
			part->scan(s, seq, json, len);
	deliver_fan_out(&s->feed, e, 1);
	evt_unref(e);
	return 0;
}

static void
follow_done(void *arg, ssize_t n)
{
	struct sess *s = arg;

	s->fetch = NULL;
	if (n < 0) {
		s->wk->metrics.store_errors++;
		log_warnx("session %s: could not read the owner's events; "
		    "retrying on the next notice", s->id);
		return;
	}
	if (s->follower && deliver_last(&s->feed) < store_last_seq(s->st) &&
	    n > 0)
		follow_fetch(s);
}

/* Reads what the owner appended and fans it out, one read at a time. */
static void
follow_fetch(struct sess *s)
{
	struct store_req *r;

	if (s->fetch != NULL || s->released || s->broken)
		return;
	if (deliver_last(&s->feed) >= store_last_seq(s->st))
		return;
	/* NULL when answered at once, and the answer may have started the
	 * next read: keep that one. */
	r = store_range_async(s->st, deliver_last(&s->feed), 1000, follow_rec,
	    follow_done, s);
	if (r != NULL)
		s->fetch = r;
}

void
follow_grown(void *arg, struct store_sess *st, uint64_t last)
{
	struct sess *s = st->udata;

	(void)arg;
	(void)last;
	if (s != NULL && s->follower)
		follow_fetch(s);
}

static void
promoted(void *arg, ssize_t n)
{
	struct sess *s = arg;

	s->promote = NULL;
	if (n < 0 || s->released || s->broken) {
		/* Still someone else's: the next vacancy says. */
		if (!s->released)
			sess_check_idle(s);
		return;
	}
	log_info("session %s: took over from its lapsed owner at seq %llu",
	    s->id, (unsigned long long)store_last_seq(s->st));
	store_req_cancel(s->fetch);
	s->fetch = NULL;
	sess_own(s);
	/* What the old owner logged and they have not been sent yet comes
	 * from the log; new events follow live. */
	deliver_pump_all(&s->feed);	/* may free connections */
	sess_check_idle(s);
}

void
follow_vacant(void *arg, struct store_sess *st)
{
	struct sess *s = st->udata;
	struct store_req *r;

	(void)arg;
	if (s == NULL || !s->follower || s->promote != NULL || s->released ||
	    s->broken || s->wk->draining || s->wk->terminating)
		return;
	/* promoted() may run inside and start the owner's preload. */
	s->promote = (struct store_req *)&s->promote;
	r = store_promote(s->st, promoted, s);
	if (s->promote == (struct store_req *)&s->promote)
		s->promote = r;
}

static void
posted(void *arg, ssize_t n)
{
	struct sess_wait *w = arg;
	struct sess *s = w->sess;
	struct sess_result r;

	w->req = NULL;
	if (w->posting) {
		/* Answered inside store_post: follow_input settles it. */
		w->posting = 2 + (n < 0);
		return;
	}
	TAILQ_REMOVE(&s->acks, w, entry);
	memset(&r, 0, sizeof(r));
	if (n < 0) {
		s->wk->metrics.store_errors++;
		r.code = "OVERLOADED";
		r.http = 503;
		snprintf(r.msg, sizeof(r.msg), "the message could not be "
		    "handed to the session's owner; it was not accepted, "
		    "retry");
	} else
		r.http = 202;
	if (w->conn != NULL) {
		w->conn->waits--;
		w->conn->done(w->conn, s, w->id, &r);
	}
	sess_wait_free(w);
	sess_idle_again(s);
}

/*
 * A follower's client message goes to the owner's inbox; its answer
 * waits until the inbox has it.  The owner drops repeats by id.
 */
void
follow_input(struct sess *s, struct sess_client *c,
    const struct sess_from *from, struct proto_in *in, struct sess_result *r)
{
	int role = from->role;
	struct sess_wait *w;
	struct store_req *req;
	cJSON *o;
	char *txt, gen[40];
	int failed;

	if (strcmp(in->type, "chat") != 0 && strcmp(in->type, "cancel") != 0 &&
	    strcmp(in->type, "terminate") != 0 &&
	    strcmp(in->type, "pause") != 0 &&
	    strcmp(in->type, "resume_session") != 0 &&
	    strcmp(in->type, "tool_approve") != 0 &&
	    strcmp(in->type, "set_autonomy") != 0 &&
	    strcmp(in->type, "mcp_tools") != 0 &&
	    strcmp(in->type, "mcp_result") != 0 &&
	    strcmp(in->type, "elicitation_answer") != 0 &&
	    strcmp(in->type, "action_propose") != 0 &&
	    strcmp(in->type, "action_approve") != 0 &&
	    strcmp(in->type, "action_result") != 0 &&
	    strcmp(in->type, "directive") != 0 &&
	    strcmp(in->type, "thought_share") != 0 &&
	    strcmp(in->type, "agent_add") != 0 &&
	    strcmp(in->type, "agent_remove") != 0 &&
	    strcmp(in->type, "set_strategy") != 0 &&
	    strcmp(in->type, "kb_add") != 0 &&
	    strcmp(in->type, "kb_remove") != 0) {
		sess_result_err(r, "BAD_REQUEST", 400,
		    "message type '%s' cannot "
		    "be forwarded to the session's owner", in->type);
		return;
	}
	if (role == IPC_ROLE_OBSERVER) {
		sess_result_err(r, "FORBIDDEN", 403, "%s",
		    "observers cannot send "
		    "input");
		return;
	}
	if ((strcmp(in->type, "terminate") == 0 ||
	    strcmp(in->type, "pause") == 0 ||
	    strcmp(in->type, "resume_session") == 0) &&
	    role != IPC_ROLE_ADMIN) {
		sess_result_err(r, "FORBIDDEN", 403, "%s needs the admin role",
		    in->type);
		return;
	}
	if ((strcmp(in->type, "tool_approve") == 0 ||
	    strcmp(in->type, "set_autonomy") == 0 ||
	    strcmp(in->type, "elicitation_answer") == 0) &&
	    role != IPC_ROLE_USER && role != IPC_ROLE_ADMIN) {
		sess_result_err(r, "FORBIDDEN", 403, "%s needs the user or "
		    "admin role", in->type);
		return;
	}
	/* Refused here, with its reason, as far as this host can tell:
	 * the owner's refusal would not come back to the client. */
	if (strcmp(in->type, "thought_share") == 0 &&
	    thought_forward_check(s, from, in->root, r) == -1)
		return;
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "role", role);
	if (from->agent[0] != '\0')
		cJSON_AddStringToObject(o, "agent", from->agent);
	/* The owner's audit trail names the subject, as for its own. */
	if (from->subject != NULL && from->subject[0] != '\0')
		cJSON_AddStringToObject(o, "subject", from->subject);
	cJSON_AddItemToObject(o, "m", cJSON_Duplicate(in->root, 1));
	if (in->id == NULL) {
		/* So a redelivery to a new owner is still one message. */
		util_randhex(gen, 12);
		cJSON_AddStringToObject(cJSON_GetObjectItem(o, "m"), "id",
		    gen);
	}
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL || c == NULL ||
	    sess_ack_wait(s, c, in->id, 0, ANSWER_NEW) == -1) {
		free(txt);
		sess_result_err(r, "INTERNAL", 500, "%s", "out of memory");
		return;
	}
	w = TAILQ_LAST(&s->acks, sess_waits);
	r->pending = 1;
	w->posting = 1;
	req = store_post(s->st, txt, strlen(txt), posted, w);
	free(txt);
	if (w->posting == 1) {
		w->posting = 0;
		w->req = req;
		return;
	}
	/* Answered at once: the caller answers the client. */
	failed = w->posting == 3;
	TAILQ_REMOVE(&s->acks, w, entry);
	c->waits--;
	sess_wait_free(w);
	r->pending = 0;
	if (failed)
		sess_result_err(r, "OVERLOADED", 503, "%s",
		    "the message could not "
		    "be handed to the session's owner; it was not accepted, "
		    "retry");
}
