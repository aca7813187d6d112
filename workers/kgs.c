/*
 * A project's knowledge session kg:P (kgs.h).  Wherever the session is
 * loaded, owner or follower, its graph is the fold of its log: read
 * from the "snapshot" document (kg_restore) and then the log after the
 * snapshot's seq; afterwards the owner folds what it appends and a
 * follower what it sees the log grow by (the part's scan hook).
 *
 * knowledge_act is checked against this process's fold (kg_check),
 * stamped with the worker's hybrid logical clock (wk->kg_clock) and its
 * node name, and appended by the owner as knowledge_batch; a follower
 * posts the stamped batch to the owner's inbox, which appends it as it
 * is, and answers its client once it sees the batch come back in the
 * log.  Repeats are dropped by the message id, which is the batchId.
 * knowledge_query is answered from the local fold to the requester only.
 * The owner writes a snapshot every KGS_SNAP_EVERY batches and runs the
 * staleness checks (kgstale.h) on a timer and after each batch.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "parley/config.h"
#include "parley/kg.h"
#include "parley/kgq.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "kgs.h"
#include "kgstale.h"
#include "sess.h"
#include "wk.h"

enum kgs_load { L_UNLOADED, L_LOADING, L_READY, L_FAILED };

/* A request on the graph, from its check to its answer. */
struct kgs_op {
	TAILQ_ENTRY(kgs_op)	 entry;
	struct sess		*s;
	struct sess_client	*c;	/* NULL: nobody waits (inbox, gone) */
	enum kgs_kind		 kind;
	int			 md;	/* export: Markdown */
	int			 role;
	char			 agent[SESS_AGENT_MAX + 1];
	char			 subject[IPC_SUB_MAX + 1];
	char			*id;	/* the message id: an act's batchId */
	cJSON			*msg;
	int			 inbox;	/* from the owner's inbox: may carry
					   a follower's stamped batch */
	int			 queued;	/* waits for the load */
	int			 waiting;	/* follower: posted, waits to
						   see its batch logged */
	uint64_t		 deadline;	/* of that wait (mono ms) */
	struct store_req	*sr;	/* the post, or the ?at= read */
	struct kg		*at;	/* ?at=: the graph being folded */
	uint64_t		 at_seq;
};
TAILQ_HEAD(kgs_ops, kgs_op);

struct kgs_state {
	struct kg		*g;
	struct kg		*building;	/* while loading */
	enum kgs_load		 load;
	int			 as_follower;	/* loaded while following */
	struct store_req	*lr;	/* the load's read, or a catch-up */
	int			 more;	/* the log grew during that read */
	uint64_t		 snap_seq;	/* the snapshot's (read/written) */
	uint64_t		 snap_batches;
	uint64_t		 snap_want;	/* batches of the one being written */
	uint64_t		 snap_want_seq;
	struct store_req	*sw;	/* the snapshot's write */
	uint64_t		 folded;	/* events the load folded */
	struct event		*tick;
	uint64_t		 stale_gen;
	struct kgs_ops		 ops;
	size_t			 nops;
};

#define STATE(s)	((struct kgs_state *)(s)->kgs)

static void	op_run(struct kgs_op *);
static void	catch_up(struct sess *);
static void	after_fold(struct sess *);

int
kgs_session(const char *sid)
{
	return strncmp(sid, KG_SID_PREFIX, strlen(KG_SID_PREFIX)) == 0;
}

int
kgs_type(const char *type)
{
	return strcmp(type, "knowledge_act") == 0 ||
	    strcmp(type, "knowledge_query") == 0;
}

static const char *
project_of(const struct sess *s)
{
	return s->id + strlen(KG_SID_PREFIX);
}

/* The clock never runs behind a stamp this process folded. */
static void
clock_raise(struct wk *wk, const struct kg *g)
{
	if (g != NULL && kg_hlc(g) > wk->kg_clock)
		wk->kg_clock = kg_hlc(g);
}

/* --- answers --- */

static void
op_answer(struct kgs_op *op, struct sess_result *r)
{
	struct sess_client *c = op->c;

	op->c = NULL;
	if (c == NULL) {
		if (r->code != NULL)
			log_info("session %s: forwarded %s refused: %s",
			    op->s->id, op->kind == KGS_ACT ? "knowledge_act" :
			    "knowledge_query", r->msg);
		return;
	}
	c->waits--;
	c->done(c, op->s, op->id, r);
}

static void
op_err(struct kgs_op *op, const char *code, int http, const char *fmt, ...)
    __attribute__((__format__(__printf__, 4, 5)));
static void
op_err(struct kgs_op *op, const char *code, int http, const char *fmt, ...)
{
	struct sess_result r;
	va_list ap;

	memset(&r, 0, sizeof(r));
	r.code = code;
	r.http = http;
	va_start(ap, fmt);
	vsnprintf(r.msg, sizeof(r.msg), fmt, ap);
	va_end(ap);
	op_answer(op, &r);
}

/* A requester-only answer: the message type with body (consumed). */
static void
op_reply(struct kgs_op *op, const char *type, cJSON *body, int http)
{
	struct sess_result r;

	if (sess_reply(op->s, type, op->id, body, http, &r) == -1) {
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		return;
	}
	op_answer(op, &r);
	free((char *)r.reply);
}

/* An answer that waits for seq to be durable (sess.c holds c then). */
static void
op_answer_durable(struct kgs_op *op, struct sess_result *r,
    enum sess_answer how)
{
	if (op->c == NULL)
		return;
	sess_answer_durable(op->s, op->c, op->id, r->seq, how, r);
	if (r->pending) {
		op->c->waits--;
		op->c = NULL;
	} else
		op_answer(op, r);
}

static void
op_free(struct kgs_op *op)
{
	store_req_cancel(op->sr);
	if (op->c != NULL)
		op->c->waits--;
	kg_free(op->at);
	cJSON_Delete(op->msg);
	free(op->id);
	free(op);
}

static void
op_end(struct kgs_op *op)
{
	struct sess *s = op->s;
	struct kgs_state *kg = STATE(s);

	TAILQ_REMOVE(&kg->ops, op, entry);
	kg->nops--;
	op_free(op);
	sess_idle_again(s);
}

/* --- folding --- */

/* Folds one logged event (its JSON text) into g: 0, or -1 (not JSON). */
static int
fold_text(struct kg *g, uint64_t seq, const char *json, size_t len)
{
	cJSON *o = cJSON_ParseWithLength(json, len);
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(o,
	    "type"));

	if (type == NULL) {
		cJSON_Delete(o);
		return -1;
	}
	(void)kg_fold(g, seq, type, o);
	cJSON_Delete(o);
	return 0;
}

/* --- loading: the snapshot, then the log after it --- */

static void
load_fail(struct sess *s, const char *why)
{
	struct kgs_state *kg = STATE(s);
	struct kgs_op *op, *next;

	s->wk->metrics.store_errors++;
	log_warnx("session %s: the knowledge graph could not be read (%s); "
	    "it is read again on the next request", s->id, why);
	kg_free(kg->building);
	kg->building = NULL;
	kg->load = L_FAILED;
	for (op = TAILQ_FIRST(&kg->ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, entry);
		if (!op->queued)
			continue;
		op->queued = 0;
		op_err(op, "OVERLOADED", 503, "the knowledge graph could not "
		    "be read from the store; retry");
		op_end(op);
	}
}

/* The load's last read is done: the graph is the session's now. */
static void
load_done(struct sess *s)
{
	struct kgs_state *kg = STATE(s);
	struct kgs_op *op, *next;

	kg_free(kg->g);
	kg->g = kg->building;
	kg->building = NULL;
	kg->load = L_READY;
	clock_raise(s->wk, kg->g);
	if (kg->snap_seq > 0)
		log_info("session %s: knowledge read from its snapshot at seq "
		    "%llu (%llu batches), then %llu events of the log after "
		    "it", s->id, (unsigned long long)kg->snap_seq,
		    (unsigned long long)kg->snap_batches,
		    (unsigned long long)kg->folded);
	else
		log_info("session %s: knowledge read from its log, %llu "
		    "events (no snapshot)", s->id,
		    (unsigned long long)kg->folded);
	for (op = TAILQ_FIRST(&kg->ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, entry);
		if (op->queued)
			op_run(op);
	}
	if (!s->follower)
		after_fold(s);
}

static int
catch_rec(void *arg, uint64_t seq, uint64_t ts, const char *json,
    size_t len)
{
	struct sess *s = arg;
	struct kgs_state *kg = STATE(s);
	struct kg *g = kg->load == L_LOADING ? kg->building : kg->g;

	(void)ts;
	if (seq <= kg_seq(g))
		return 0;
	if (fold_text(g, seq, json, len) == -1)
		log_warnx("session %s: seq %llu is not a JSON event; skipped",
		    s->id, (unsigned long long)seq);
	kg->folded++;
	return 0;
}

static void
catch_done(void *arg, ssize_t n)
{
	struct sess *s = arg;
	struct kgs_state *kg = STATE(s);

	kg->lr = NULL;
	if (n < 0) {
		if (kg->load == L_LOADING)
			load_fail(s, "the log could not be read");
		else
			log_warnx("session %s: could not read the log to "
			    "catch up; again on the next event", s->id);
		return;
	}
	if (n > 0 || kg->more) {
		kg->more = 0;
		catch_up(s);
		return;
	}
	if (kg->load == L_LOADING)
		load_done(s);
	else {
		clock_raise(s->wk, kg->g);
		if (!s->follower)
			after_fold(s);
	}
}

/* Reads the log after the graph's seq (one read at a time). */
static void
catch_up(struct sess *s)
{
	struct kgs_state *kg = STATE(s);
	struct kg *g = kg->load == L_LOADING ? kg->building : kg->g;
	struct store_req *r;

	if (kg->lr != NULL) {
		kg->more = 1;
		return;
	}
	if (g == NULL || s->st == NULL)
		return;
	kg->lr = (struct store_req *)&kg->lr;
	r = store_range_async(s->st, kg_seq(g), 1000, catch_rec, catch_done,
	    s);
	if (kg->lr == (struct store_req *)&kg->lr)
		kg->lr = r;
}

static int
snap_doc(void *arg, const char *name, const char *json, size_t len)
{
	struct sess *s = arg;
	struct kgs_state *kg = STATE(s);
	char err[256];

	if (strcmp(name, KGS_SNAP_DOC) != 0)
		return 0;
	kg_free(kg->building);
	if ((kg->building = kg_restore(json, len, err, sizeof(err))) ==
	    NULL) {
		log_warnx("session %s: its knowledge snapshot is unreadable "
		    "(%s): the whole log is folded instead", s->id, err);
		return 0;
	}
	kg->snap_seq = kg_seq(kg->building);
	kg->snap_batches = kg_batches(kg->building);
	return 0;
}

static void
snap_read(void *arg, ssize_t n)
{
	struct sess *s = arg;
	struct kgs_state *kg = STATE(s);

	kg->lr = NULL;
	if (n < 0) {
		load_fail(s, "its snapshot could not be read");
		return;
	}
	if (kg->building == NULL &&
	    (kg->building = kg_new(project_of(s))) == NULL) {
		load_fail(s, "out of memory");
		return;
	}
	catch_up(s);
}

static void
load_start(struct sess *s)
{
	struct kgs_state *kg = STATE(s);
	struct store_req *r;

	if (kg == NULL || kg->load == L_LOADING || s->st == NULL)
		return;
	store_req_cancel(kg->lr);
	kg->lr = NULL;
	kg->more = 0;
	kg_free(kg->building);
	kg->building = NULL;
	kg->as_follower = s->follower;
	kg->snap_seq = kg->snap_batches = kg->folded = 0;
	kg->load = L_LOADING;
	kg->lr = (struct store_req *)&kg->lr;
	r = store_doc_all(s->st, snap_doc, snap_read, s);
	if (kg->lr == (struct store_req *)&kg->lr)
		kg->lr = r;
}

/* --- the owner's upkeep: snapshots and staleness --- */

static void
snap_written(void *arg, ssize_t n)
{
	struct sess *s = arg;
	struct kgs_state *kg = STATE(s);

	kg->sw = NULL;
	if (n < 0) {
		s->wk->metrics.store_errors++;
		log_warnx("session %s: the knowledge snapshot could not be "
		    "written; tried again after the next batch", s->id);
		return;
	}
	kg->snap_batches = kg->snap_want;
	kg->snap_seq = kg->snap_want_seq;
	log_info("session %s: knowledge snapshot at seq %llu (%llu batches)",
	    s->id, (unsigned long long)kg->snap_seq,
	    (unsigned long long)kg->snap_batches);
	sess_idle_again(s);
}

/*
 * Every KGS_SNAP_EVERY batches, once what it folded is durable (a
 * snapshot never holds an event the log could still lose).
 */
static void
snap_check(struct sess *s)
{
	struct kgs_state *kg = STATE(s);
	struct store_req *r;
	char *txt;
	size_t len;

	if (s->follower || s->broken || kg->load != L_READY ||
	    kg->sw != NULL || kg_batches(kg->g) < kg->snap_batches +
	    KGS_SNAP_EVERY || kg_seq(kg->g) > store_durable_seq(s->st))
		return;
	if ((txt = kg_snapshot(kg->g, &len)) == NULL)
		return;
	if (len > STORE_DOC_MAX) {
		log_warnx("session %s: the knowledge snapshot (%zu bytes) is "
		    "larger than the store takes; loads fold the log", s->id,
		    len);
		kg->snap_batches = kg_batches(kg->g);
		free(txt);
		return;
	}
	kg->snap_want = kg_batches(kg->g);
	kg->snap_want_seq = kg_seq(kg->g);
	kg->sw = (struct store_req *)&kg->sw;
	r = store_doc_put(s->st, KGS_SNAP_DOC, txt, len, snap_written, s);
	free(txt);
	if (kg->sw == (struct store_req *)&kg->sw)
		kg->sw = r;
}

/* Logs what kgstale_check finds changed, each stamped, and folds it. */
static void
stale_run(struct sess *s)
{
	struct kgs_state *kg = STATE(s);
	struct wk *wk = s->wk;
	cJSON *arr, *b, *copy;
	uint64_t seq;
	char digits[24];

	if (s->follower || s->broken || kg->load != L_READY)
		return;
	if ((arr = kgstale_check(wk, kg->g)) == NULL)
		return;
	while ((b = cJSON_DetachItemFromArray(arr, 0)) != NULL) {
		cJSON_DeleteItemFromObject(b, "hlc");
		cJSON_DeleteItemFromObject(b, "origin");
		snprintf(digits, sizeof(digits), "%" PRIu64, kg_clock_next(
		    &wk->kg_clock, util_now_ms()));
		cJSON_AddRawToObject(b, "hlc", digits);
		cJSON_AddStringToObject(b, "origin", wk->node);
		if ((copy = cJSON_Duplicate(b, 1)) == NULL) {
			cJSON_Delete(b);
			break;
		}
		if ((seq = sess_emit(s, "knowledge_stale", b)) == 0) {
			log_warnx("session %s: a knowledge_stale could not be "
			    "logged; checked again in a second", s->id);
			kg->stale_gen = 0;
			cJSON_Delete(copy);
			break;
		}
		(void)kg_fold(kg->g, seq, "knowledge_stale", copy);
		log_info("session %s: %.256s changed: its knowledge is marked "
		    "stale at seq %llu", s->id, cJSON_GetStringValue(
		    cJSON_GetObjectItem(copy, "path")) != NULL ?
		    cJSON_GetStringValue(cJSON_GetObjectItem(copy, "path")) :
		    "a file", (unsigned long long)seq);
		cJSON_Delete(copy);
	}
	cJSON_Delete(arr);
}

/* The owner folded a batch (or loaded): staleness, then a snapshot. */
static void
after_fold(struct sess *s)
{
	stale_run(s);
	snap_check(s);
}

static void
tick_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sess *s = arg;
	struct kgs_state *kg = STATE(s);
	struct kgs_op *op, *next;
	uint64_t gen, now = util_mono_ms();

	(void)fd;
	(void)ev;
	for (op = TAILQ_FIRST(&kg->ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, entry);
		if (!op->waiting || now < op->deadline)
			continue;
		/* Not seen in the log: the owner may yet log it, or may
		 * have refused or lost it.  Never claim success; a repeat
		 * of the same batchId is recorded once. */
		op_err(op, "OVERLOADED", 503, "batch %.80s was handed to the "
		    "project's owner but not confirmed in the log within "
		    "%d s; send the same batchId again: a repeat is recorded "
		    "once", op->id != NULL ? op->id : "", KGS_WAIT_MS / 1000);
		op_end(op);
	}
	if (s->follower || kg->load != L_READY)
		return;
	gen = kgstale_generation(s->wk);
	if (gen != kg->stale_gen) {
		kg->stale_gen = gen;
		stale_run(s);
	}
	snap_check(s);
}

/* --- requests --- */

/* An act kg_check refused: INVALID_ACTION naming action, op, field. */
static void
act_invalid(struct kgs_op *op, const struct kg_err *err)
{
	cJSON *x = cJSON_CreateObject();
	struct sess_result r;
	char *txt;

	if (op->id != NULL)
		cJSON_AddStringToObject(x, "id", op->id);
	cJSON_AddNumberToObject(x, "action", err->action);
	cJSON_AddStringToObject(x, "op", err->op);
	cJSON_AddStringToObject(x, "field", err->field);
	if ((txt = proto_error(op->s->id, "INVALID_ACTION", err->msg,
	    "warning", x)) == NULL) {
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		return;
	}
	memset(&r, 0, sizeof(r));
	r.http = 400;
	r.reply = txt;
	op_answer(op, &r);
	free(txt);
}

static void
posted(void *arg, ssize_t n)
{
	struct kgs_op *op = arg;
	struct sess_result r;
	uint64_t seq;

	op->sr = NULL;
	if (n < 0) {
		op->s->wk->metrics.store_errors++;
		op_err(op, "OVERLOADED", 503, "the batch could not be handed "
		    "to the project's owner; nothing was recorded, retry");
		op_end(op);
		return;
	}
	/* Answered with its seq once the log shows it (part_scan), which
	 * it may have done already. */
	if (sess_id_find(op->s, op->id, &seq)) {
		memset(&r, 0, sizeof(r));
		r.http = 202;
		r.seq = seq;
		op_answer(op, &r);
		op_end(op);
		return;
	}
	op->waiting = 1;
	op->deadline = util_mono_ms() + KGS_WAIT_MS;
}

/* A follower's stamped batch goes to the owner's inbox. */
static void
act_post(struct kgs_op *op, cJSON *batch)
{
	struct sess *s = op->s;
	struct store_req *req;
	cJSON *o, *m;
	char *txt;

	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "role", op->role);
	if (op->agent[0] != '\0')
		cJSON_AddStringToObject(o, "agent", op->agent);
	if (op->subject[0] != '\0')
		cJSON_AddStringToObject(o, "subject", op->subject);
	m = proto_head("knowledge_act", s->id);
	cJSON_AddStringToObject(m, "id", op->id);
	cJSON_AddItemToObject(m, "actions", cJSON_Duplicate(
	    cJSON_GetObjectItem(op->msg, "actions"), 1));
	cJSON_AddItemToObject(m, "batch", batch);
	cJSON_AddItemToObject(o, "m", m);
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (txt == NULL) {
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		op_end(op);
		return;
	}
	op->sr = (struct store_req *)&op->sr;
	req = store_post(s->st, txt, strlen(txt), posted, op);
	free(txt);
	/* posted may have run, and ended op, inside. */
	if (req != NULL)
		op->sr = req;
}

/*
 * A batch the owner received from a follower's inbox: its stamp is the
 * follower's, kept as it is.  NULL when it is not one.
 */
static cJSON *
act_forwarded(struct kgs_op *op)
{
	const cJSON *b = cJSON_GetObjectItem(op->msg, "batch");
	const char *bid = cJSON_GetStringValue(cJSON_GetObjectItem(b,
	    "batchId"));

	if (!cJSON_IsObject(b) || bid == NULL || op->id == NULL ||
	    strcmp(bid, op->id) != 0 || !cJSON_IsNumber(cJSON_GetObjectItem(b,
	    "hlc")) || cJSON_GetObjectItem(b, "hlc")->valuedouble < 1 ||
	    cJSON_GetObjectItem(b, "hlc")->valuedouble >= (double)KG_HLC_LIMIT ||
	    !cJSON_IsString(cJSON_GetObjectItem(b, "origin")) ||
	    !cJSON_IsArray(cJSON_GetObjectItem(b, "actions")))
		return NULL;
	return cJSON_Duplicate(b, 1);
}

/* 1 when a batch body records a file understanding. */
static int
records_files(const cJSON *body)
{
	const cJSON *a;

	cJSON_ArrayForEach(a, cJSON_GetObjectItem(body, "actions"))
		if (cJSON_IsString(cJSON_GetArrayItem(a, 0)) && strcmp(
		    cJSON_GetArrayItem(a, 0)->valuestring,
		    "record-file-understanding") == 0)
			return 1;
	return 0;
}

static void	waits_settle(struct sess *, const char *, uint64_t, int);

static void
act_run(struct kgs_op *op)
{
	struct sess *s = op->s;
	struct kgs_state *kg = STATE(s);
	struct wk *wk = s->wk;
	cJSON *actions = cJSON_GetObjectItem(op->msg, "actions");
	struct sess_result r;
	struct kg_err err;
	cJSON *body = NULL, *copy;
	const char *by;
	uint64_t now, seq;
	char *txt;
	int files;

	memset(&r, 0, sizeof(r));
	if (sess_id_repeat(s, op->c, op->id, &r)) {
		if (r.pending && op->c != NULL) {
			op->c->waits--;
			op->c = NULL;
		}
		op_answer(op, &r);
		op_end(op);
		return;
	}
	/* Only the owner's inbox brings a stamped batch: a client's
	 * "batch" member was stripped by kgs_input. */
	if (op->inbox && !s->follower &&
	    cJSON_GetObjectItem(op->msg, "batch") != NULL) {
		if ((body = act_forwarded(op)) == NULL) {
			log_warnx("session %s: a forwarded knowledge_act %s "
			    "holds no stamped batch; dropped", s->id, op->id);
			op_end(op);
			return;
		}
	} else {
		if (kg_check_fill(kg->g, actions, wk->conf->knowledge_max_entities,
		    &err) == -1) {
			act_invalid(op, &err);
			op_end(op);
			return;
		}
		now = util_now_ms();
		by = op->subject[0] != '\0' ? op->subject : op->agent[0] !=
		    '\0' ? op->agent : NULL;
		body = kg_batch_body(actions, op->id, kg_clock_next(
		    &wk->kg_clock, now), wk->node, now, by);
		if (body == NULL) {
			op_err(op, "OVERLOADED", 503, "out of memory; retry");
			op_end(op);
			return;
		}
	}
	if (s->follower) {
		act_post(op, body);
		return;
	}
	if ((txt = cJSON_PrintUnformatted(body)) == NULL ||
	    !sess_log_room(s, strlen(txt) + 128, &r) ||
	    (copy = cJSON_Duplicate(body, 1)) == NULL) {
		if (txt == NULL || r.code == NULL)
			sess_result_err(&r, "OVERLOADED", 503, "%s", "out of "
			    "memory; retry");
		free(txt);
		cJSON_Delete(body);
		op_answer(op, &r);
		op_end(op);
		return;
	}
	free(txt);
	if ((seq = sess_emit(s, "knowledge_batch", body)) == 0) {
		cJSON_Delete(copy);
		op_err(op, "OVERLOADED", 503, "the batch could not be logged; "
		    "nothing was recorded, retry");
		op_end(op);
		return;
	}
	files = records_files(copy);
	(void)kg_fold(kg->g, seq, "knowledge_batch", copy);
	cJSON_Delete(copy);
	clock_raise(wk, kg->g);
	sess_id_add(s, op->id, seq);
	/* A follower promoted before it saw its own posted batch come
	 * back logs it from its inbox: its waiting op is answered here. */
	waits_settle(s, op->id, seq, 1);
	r.seq = seq;
	r.http = 202;
	op_answer_durable(op, &r, ANSWER_NEW);
	op_end(op);
	/* Only a recorded understanding can be stale already; the timer
	 * judges the rest when the index moves. */
	if (files)
		after_fold(s);
	else
		snap_check(s);
}

cJSON *
kgs_query(const struct kg *g, const char *query, const char *format)
{
	struct kgq_limits lim;
	enum kgq_format fmt = format != NULL && strcmp(format, "json") == 0 ?
	    KGQ_JSON : KGQ_SEXP;
	cJSON *b = cJSON_CreateObject(), *v, *e;
	char *out, *jout;
	int is_error = 0, je;
	size_t len;

	kgq_defaults(&lim);
	cJSON_AddStringToObject(b, "format", fmt == KGQ_JSON ? "json" :
	    "sexp");
	if ((out = kgq_eval(g, query, strlen(query), fmt, &lim, &is_error,
	    &len)) == NULL) {
		e = cJSON_AddObjectToObject(b, "error");
		cJSON_AddStringToObject(e, "code", "QUERY_LIMIT");
		cJSON_AddStringToObject(e, "message", "out of memory while "
		    "evaluating the query");
		return b;
	}
	if (is_error) {
		/* The error's code and message, as data, in both formats. */
		jout = fmt == KGQ_JSON ? out : kgq_eval(g, query,
		    strlen(query), KGQ_JSON, &lim, &je, NULL);
		v = jout != NULL ? cJSON_Parse(jout) : NULL;
		e = cJSON_DetachItemFromObject(v, "error");
		if (!cJSON_IsObject(e)) {
			cJSON_Delete(e);
			e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "code", "QUERY_ERROR");
			cJSON_AddStringToObject(e, "message", out);
		}
		cJSON_AddItemToObject(b, "error", e);
		if (fmt == KGQ_SEXP)
			cJSON_AddStringToObject(b, "result", out);
		cJSON_Delete(v);
		if (jout != out)
			free(jout);
		free(out);
		return b;
	}
	if (fmt == KGQ_SEXP)
		cJSON_AddStringToObject(b, "result", out);
	else if ((v = cJSON_ParseWithLength(out, len)) != NULL)
		cJSON_AddItemToObject(b, "result", v);
	else {
		e = cJSON_AddObjectToObject(b, "error");
		cJSON_AddStringToObject(e, "code", "QUERY_ERROR");
		cJSON_AddStringToObject(e, "message", "the answer is not JSON");
	}
	free(out);
	return b;
}

char *
kgs_export(const struct kg *g, int md)
{
	cJSON *o;
	char *txt, hlc[24];

	if (md)
		return kg_export_md(g);
	if ((o = kg_export_json(g)) == NULL)
		return NULL;
	cJSON_AddNumberToObject(o, "batches", (double)kg_batches(g));
	/* Digits, not cJSON's %g (1.795686524633e+15): exact either way. */
	snprintf(hlc, sizeof(hlc), "%llu", (unsigned long long)kg_hlc(g));
	cJSON_AddRawToObject(o, "hlc", hlc);
	txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return txt;
}

static void
query_run(struct kgs_op *op)
{
	cJSON *b = kgs_query(STATE(op->s)->g, cJSON_GetStringValue(
	    cJSON_GetObjectItem(op->msg, "query")), cJSON_GetStringValue(
	    cJSON_GetObjectItem(op->msg, "format")));

	op_reply(op, "knowledge_result", b, 200);
	op_end(op);
}

static void
export_answer(struct kgs_op *op, const struct kg *g)
{
	struct sess_result r;
	char *txt;

	if ((txt = kgs_export(g, op->md)) == NULL) {
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		op_end(op);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.http = 200;
	r.reply = txt;
	op_answer(op, &r);
	free(txt);
	op_end(op);
}

static int
at_rec(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct kgs_op *op = arg;

	(void)ts;
	if (seq > op->at_seq)
		return 1;
	(void)fold_text(op->at, seq, json, len);
	return seq >= op->at_seq;
}

static void
at_done(void *arg, ssize_t n)
{
	struct kgs_op *op = arg;

	op->sr = NULL;
	if (n < 0) {
		op->s->wk->metrics.store_errors++;
		op_err(op, "OVERLOADED", 503, "the log could not be read; "
		    "retry");
		op_end(op);
		return;
	}
	export_answer(op, op->at);
}

/* GET /knowledge/P?at=SEQ: the log from its start folded up to SEQ. */
static void
export_run(struct kgs_op *op)
{
	const cJSON *at = cJSON_GetObjectItem(op->msg, "at");
	struct store_req *req;

	if (!cJSON_IsString(at)) {
		export_answer(op, STATE(op->s)->g);
		return;
	}
	/* Digits only, at most KGS_SEQ_MAX: kgs_http.c checked them. */
	op->at_seq = strtoull(at->valuestring, NULL, 10);
	if ((op->at = kg_new(project_of(op->s))) == NULL) {
		op_err(op, "OVERLOADED", 503, "out of memory; retry");
		op_end(op);
		return;
	}
	if (op->at_seq == 0) {
		export_answer(op, op->at);
		return;
	}
	op->sr = (struct store_req *)&op->sr;
	req = store_range_async(op->s->st, 0, 0, at_rec, at_done, op);
	if (req != NULL)
		op->sr = req;
}

static void
op_run(struct kgs_op *op)
{
	op->queued = 0;
	switch (op->kind) {
	case KGS_ACT:
		act_run(op);
		break;
	case KGS_QUERY:
		query_run(op);
		break;
	case KGS_EXPORT:
		export_run(op);
		break;
	}
}

static struct kgs_state *
state_of(struct sess *s)
{
	struct kgs_state *kg;
	struct timeval tv;

	if (s->kgs != NULL || !kgs_session(s->id))
		return s->kgs;
	if ((kg = calloc(1, sizeof(*kg))) == NULL)
		return NULL;
	TAILQ_INIT(&kg->ops);
	if ((kg->tick = event_new(s->wk->base, -1, EV_PERSIST, tick_cb,
	    s)) == NULL) {
		free(kg);
		return NULL;
	}
	util_tv(&tv, KGS_STALE_MS);
	event_add(kg->tick, &tv);
	s->kgs = kg;
	return kg;
}

/* Checks a request's fields: 0, or -1 with r filled (400). */
static int
run_check(enum kgs_kind kind, const struct sess_from *from,
    const cJSON *msg, struct sess_result *r)
{
	const char *q = NULL, *f = NULL;
	const cJSON *a;

	if (kind == KGS_ACT) {
		if (from->role == IPC_ROLE_OBSERVER) {
			sess_result_err(r, "FORBIDDEN", 403, "%s",
			    "knowledge_act changes the project's knowledge: "
			    "an observer only reads (knowledge_query); use the "
			    "user, agent or admin role");
			return -1;
		}
		a = cJSON_GetObjectItem(msg, "actions");
		if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0) {
			sess_result_err(r, "BAD_REQUEST", 400, "%s", "field "
			    "'actions' must be a non-empty array of actions, "
			    "each [\"record-principle\", {fields}] and the "
			    "like (parley-knowledge(7))");
			return -1;
		}
		return 0;
	}
	if (kind == KGS_QUERY) {
		if (proto_str(msg, "query", 1, KGQ_QUERY_MAX, &q, r->msg,
		    sizeof(r->msg)) == -1 || proto_str(msg, "format", 0, 8,
		    &f, r->msg, sizeof(r->msg)) == -1) {
			r->code = "BAD_REQUEST";
			r->http = 400;
			return -1;
		}
		if (f != NULL && strcmp(f, "sexp") != 0 &&
		    strcmp(f, "json") != 0) {
			sess_result_err(r, "BAD_REQUEST", 400, "field 'format' "
			    "must be \"sexp\" (the default) or \"json\", got "
			    "\"%.16s\"", f);
			return -1;
		}
	}
	return 0;
}

int
kgs_check_new(struct wk *wk, const char *sid, const struct sess_from *from,
    const cJSON *msg, struct sess_result *r)
{
	struct kg *g;
	struct kg_err err;
	cJSON *a, *x;
	int rc;

	if (run_check(KGS_ACT, from, msg, r) == -1)
		return -1;
	g = kg_new(sid + strlen(KG_SID_PREFIX));
	a = cJSON_Duplicate(cJSON_GetObjectItem(msg, "actions"), 1);
	if (g == NULL || a == NULL) {
		kg_free(g);
		cJSON_Delete(a);
		sess_result_err(r, "OVERLOADED", 503, "%s", "out of memory; "
		    "retry");
		return -1;
	}
	rc = kg_check_fill(g, a, wk->conf->knowledge_max_entities, &err);
	kg_free(g);
	cJSON_Delete(a);
	if (rc == 0)
		return 0;
	x = cJSON_CreateObject();
	cJSON_AddNumberToObject(x, "action", err.action);
	cJSON_AddStringToObject(x, "op", err.op);
	cJSON_AddStringToObject(x, "field", err.field);
	memset(r, 0, sizeof(*r));
	r->http = 400;
	if ((r->reply = proto_error(sid, "INVALID_ACTION", err.msg, "warning",
	    x)) == NULL)
		sess_result_err(r, "OVERLOADED", 503, "%s", "out of memory; "
		    "retry");
	return -1;
}

void
kgs_run(struct sess *s, struct sess_client *c, const struct sess_from *from,
    enum kgs_kind kind, int md, const char *id, const cJSON *msg,
    struct sess_result *r)
{
	struct kgs_state *kg;
	struct kgs_op *op;

	if (run_check(kind, from, msg, r) == -1)
		return;
	if ((kg = state_of(s)) == NULL || (op = calloc(1, sizeof(*op))) ==
	    NULL) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "out of memory; "
		    "retry");
		return;
	}
	if (kg->nops >= KGS_OPS_MAX) {
		free(op);
		sess_result_err(r, "RATE_LIMITED", 429, "%zu knowledge requests "
		    "are under way in this project; retry once they are "
		    "answered", kg->nops);
		return;
	}
	if ((op->msg = cJSON_Duplicate(msg, 1)) == NULL || (id != NULL &&
	    (op->id = strdup(id)) == NULL)) {
		cJSON_Delete(op->msg);
		free(op);
		sess_result_err(r, "OVERLOADED", 503, "%s", "out of memory; "
		    "retry");
		return;
	}
	op->s = s;
	op->kind = kind;
	op->md = md;
	op->role = from->role;
	snprintf(op->agent, sizeof(op->agent), "%s", from->agent != NULL ?
	    from->agent : "");
	snprintf(op->subject, sizeof(op->subject), "%s", from->subject !=
	    NULL ? from->subject : "");
	op->inbox = from->inbox;
	op->c = c;
	if (c != NULL)
		c->waits++;
	TAILQ_INSERT_TAIL(&kg->ops, op, entry);
	kg->nops++;
	r->pending = 1;
	/* What a follower read may be behind the owner's: read as it is
	 * now, once, when it was never read or the read failed. */
	if (kg->load == L_READY) {
		op_run(op);
		return;
	}
	op->queued = 1;
	if (kg->load != L_LOADING)
		load_start(s);
}

int
kgs_input(struct sess *s, struct sess_client *c, const struct sess_from *from,
    struct proto_in *in, struct sess_result *r)
{
	int kgsess = kgs_session(s->id), kt = kgs_type(in->type);
	char gen[24];
	const char *id = in->id;

	if (!kgsess && !kt)
		return 0;
	if (!kgsess) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s goes to a project's "
		    "knowledge session kg:PROJECT (its stream "
		    "/knowledge/PROJECT/stream, or POST "
		    "/knowledge/PROJECT/actions and /query), not to session "
		    "'%.64s'", in->type, s->id);
		return 1;
	}
	if (!kt) {
		sess_result_err(r, "BAD_REQUEST", 400, "session %.110s is "
		    "project %.100s's knowledge graph: it takes only "
		    "knowledge_act and knowledge_query, not '%.32s'; chat and "
		    "the rest belong in an ordinary session", s->id,
		    project_of(s), in->type);
		return 1;
	}
	/* A stamped "batch" comes only from a follower through the
	 * owner's inbox: a client's would bypass kg_check and its stamp. */
	if (!from->inbox && cJSON_GetObjectItem(in->root, "batch") != NULL) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "field 'batch' is "
		    "not for clients: send {\"type\":\"knowledge_act\","
		    "\"id\":...,\"actions\":[...]} and the server stamps "
		    "the batch");
		return 1;
	}
	if (strcmp(in->type, "knowledge_act") == 0) {
		if (id == NULL) {
			/* Its batchId: a repeat needs the client's own id. */
			memcpy(gen, "b-", 2);
			util_randhex(gen + 2, 8);
			id = gen;
		}
		kgs_run(s, c, from, KGS_ACT, 0, id, in->root, r);
	} else
		kgs_run(s, c, from, KGS_QUERY, 0, id, in->root, r);
	return 1;
}

/* --- the session's part --- */

static void
part_init(struct sess *s)
{
	(void)state_of(s);
}

static void
part_meta_new(struct sess *s, cJSON *meta, const cJSON *body)
{
	(void)body;
	if (!kgs_session(s->id))
		return;
	proto_set(meta, "kind", cJSON_CreateString("knowledge"));
	proto_set(meta, "projectId", cJSON_CreateString(project_of(s)));
	/* No agents, no turns: it takes only knowledge messages. */
	proto_set(meta, "agents", cJSON_CreateArray());
}

static void
part_own(struct sess *s)
{
	struct kgs_state *kg = state_of(s);

	if (kg == NULL)
		return;
	kg->as_follower = 0;
	if (kg->load == L_READY)
		catch_up(s);	/* what the follower had not seen yet */
	else if (kg->load != L_LOADING)
		load_start(s);
}

/*
 * Answers the follower's act waiting for batch bid, logged at seq: once
 * durable when this process just appended it (appended), at once when it
 * was read from the log.
 */
static void
waits_settle(struct sess *s, const char *bid, uint64_t seq, int appended)
{
	struct kgs_state *kg = STATE(s);
	struct kgs_op *op, *next;
	struct sess_result r;

	for (op = TAILQ_FIRST(&kg->ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, entry);
		if (!op->waiting || op->id == NULL || strcmp(op->id, bid) != 0)
			continue;
		memset(&r, 0, sizeof(r));
		r.http = 202;
		r.seq = seq;
		if (appended)
			op_answer_durable(op, &r, ANSWER_NEW);
		else
			op_answer(op, &r);
		op_end(op);
	}
}

#define BATCH	"\"type\":\"knowledge_batch\""
#define KNOW	"\"type\":\"knowledge_"
/*
 * An event of the log: while owned, those of its tail when it became
 * owned (the batch ids are the message ids repeats are dropped by); a
 * follower's every event, folded as it comes.
 */
static void
part_scan(struct sess *s, uint64_t seq, const char *json, size_t len)
{
	struct kgs_state *kg = STATE(s);
	cJSON *o;
	const char *bid;

	if (kg == NULL || memmem(json, len, KNOW, sizeof(KNOW) - 1) == NULL)
		return;
	o = cJSON_ParseWithLength(json, len);
	bid = memmem(json, len, BATCH, sizeof(BATCH) - 1) != NULL ?
	    cJSON_GetStringValue(cJSON_GetObjectItem(o, "batchId")) : NULL;
	if (bid != NULL)
		sess_id_add(s, bid, seq);
	if (s->follower && kg->load == L_READY) {
		if (kg->lr != NULL)
			kg->more = 1;
		else if (seq == kg_seq(kg->g) + 1) {
			(void)kg_fold(kg->g, seq, cJSON_GetStringValue(
			    cJSON_GetObjectItem(o, "type")), o);
			clock_raise(s->wk, kg->g);
		} else if (seq > kg_seq(kg->g))
			catch_up(s);
	} else if (s->follower && kg->load == L_LOADING)
		kg->more = 1;
	if (bid != NULL)
		waits_settle(s, bid, seq, 0);
	cJSON_Delete(o);
}

static void
part_state(struct sess *s, cJSON *o, int info)
{
	struct kgs_state *kg = STATE(s);
	char hlc[24];
	cJSON *k;

	if (!kgs_session(s->id))
		return;
	/* No agents and no turns (the base state lists the session's
	 * default agent, and "created" until a first turn). */
	cJSON_ReplaceItemInObject(o, "agents", cJSON_CreateArray());
	if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "status")) !=
	    NULL ? cJSON_GetStringValue(cJSON_GetObjectItem(o, "status")) : "",
	    "created") == 0)
		cJSON_ReplaceItemInObject(o, "status",
		    cJSON_CreateString("idle"));
	if (!info || kg == NULL || kg->load != L_READY)
		return;
	k = cJSON_AddObjectToObject(o, "graph");
	cJSON_AddStringToObject(k, "projectId", project_of(s));
	cJSON_AddNumberToObject(k, "seq", (double)kg_seq(kg->g));
	cJSON_AddNumberToObject(k, "batches", (double)kg_batches(kg->g));
	snprintf(hlc, sizeof(hlc), "%llu", (unsigned long long)kg_hlc(kg->g));
	cJSON_AddRawToObject(k, "hlc", hlc);
	cJSON_AddNumberToObject(k, "snapshotSeq", (double)kg->snap_seq);
}

static int
part_busy(const struct sess *s)
{
	const struct kgs_state *kg = s->kgs;

	return kg != NULL && (kg->load == L_LOADING || kg->nops > 0 ||
	    kg->sw != NULL);
}

static void
part_gone(struct sess *s, struct sess_client *c)
{
	struct kgs_state *kg = STATE(s);
	struct kgs_op *op;

	if (kg == NULL)
		return;
	TAILQ_FOREACH(op, &kg->ops, entry)
		if (op->c == c) {
			c->waits--;
			op->c = NULL;
		}
}

static void
part_free(struct sess *s)
{
	struct kgs_state *kg = STATE(s);
	struct kgs_op *op;

	if (kg == NULL)
		return;
	while ((op = TAILQ_FIRST(&kg->ops)) != NULL) {
		TAILQ_REMOVE(&kg->ops, op, entry);
		op_err(op, "OVERLOADED", 503, "the project's session left "
		    "this worker before the request was done; retry");
		op_free(op);
	}
	store_req_cancel(kg->lr);
	store_req_cancel(kg->sw);
	event_free(kg->tick);
	kg_free(kg->building);
	kg_free(kg->g);
	free(kg);
	s->kgs = NULL;
}

const struct sess_part kgs_part = {
	.init = part_init,
	.meta_new = part_meta_new,
	.own = part_own,
	.scan = part_scan,
	.state = part_state,
	.busy = part_busy,
	.gone = part_gone,
	.free = part_free,
};
