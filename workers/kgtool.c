/*
 * The knowledge tools (kgtool.h): their definitions, their arguments
 * checked, the request to the project's worker (kgcall.c) and its answer
 * turned into the text a model or an MCP client reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/ipc.h"
#include "parley/kbtext.h"
#include "parley/kg.h"
#include "parley/kgq.h"
#include "parley/log.h"
#include "kgcall.h"
#include "kgtool.h"
#include "llm.h"
#include "sess.h"
#include "turn.h"
#include "wk.h"


#define PROJECT_SCHEMA \
	"\"projectId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100," \
	"\"pattern\":\"^[A-Za-z0-9_-][A-Za-z0-9._-]*$\",\"description\":" \
	"\"the project whose knowledge this is: 1 to 100 of A-Z a-z 0-9 . _ " \
	"- (not starting with '.'), e.g. the repository's name\"}"

const struct kgtool_spec kgtool_specs[KGTOOL_N] = {
	{ KGTOOL_QUERY, "Query project knowledge",
	  "Reads what earlier sessions recorded about a project (principles, "
	  "patterns, decisions, file understandings, relationships) with a "
	  "read-only S-expression query, e.g. (get-principles), "
	  "(search-knowledge \"auth\"), (get-file-understanding \"src/a.c\"), "
	  "(get-relationships-from \"name\"), (filter (lambda (p) (> (@ p "
	  ":confidence) 0.8)) (get-principles)).  Answers in compact "
	  "S-expressions, or JSON with format \"json\"; a bad query's error "
	  "says what was wrong.  Query before exploring a project, to start "
	  "from what is known.",
	  "{\"type\":\"object\",\"properties\":{" PROJECT_SCHEMA ","
	  "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":65536,"
	  "\"description\":\"one or more S-expressions; the answer is the "
	  "last one's value\"},\"format\":{\"type\":\"string\",\"enum\":"
	  "[\"sexp\",\"json\"],\"description\":\"the answer's form, sexp by "
	  "default\"}},\"required\":[\"projectId\",\"query\"],"
	  "\"additionalProperties\":false}", 1 },
	{ KGTOOL_ACT, "Record project knowledge",
	  "Records what you learned about a project in its shared knowledge "
	  "graph, for later sessions, as one atomic batch: every action is "
	  "checked first and nothing is applied if one is wrong (the error "
	  "names the action and field).  Each action is [op, {fields}]: "
	  "record-principle {name, description, confidence 0-1, locations, "
	  "evidence, relatedPrinciples, tags}; record-pattern {name, type, "
	  "description, confidence, location, relatedPatterns, tags}; "
	  "record-decision {name, description, rationale, status "
	  "active|proposed|deprecated|superseded, impact 0-10, locations, "
	  "relatedDecisions}; record-file-understanding {path, hash (the "
	  "file's SHA-256 in hex), summary, concepts, importantSymbols, "
	  "relatedFiles, lastAnalyzed}; link-entities {from, to, type, "
	  "description, confidence}; delete-principle, delete-pattern, "
	  "delete-decision {name}; update-confidence {name, confidence, kind "
	  "principle|pattern} (a relationship: {kind \"relationship\", "
	  "from, to, type, confidence}); add-evidence {name, evidence}.",
	  "{\"type\":\"object\",\"properties\":{" PROJECT_SCHEMA ","
	  "\"actions\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":256,"
	  "\"description\":\"the batch, e.g. [[\\\"record-principle\\\","
	  "{\\\"name\\\":\\\"n\\\",\\\"description\\\":\\\"d\\\","
	  "\\\"confidence\\\":0.9}],[\\\"link-entities\\\",{\\\"from\\\":"
	  "\\\"n\\\",\\\"to\\\":\\\"m\\\",\\\"type\\\":\\\"supports\\\"}]]\","
	  "\"items\":{\"type\":\"array\",\"minItems\":2,\"maxItems\":2,"
	  "\"description\":\"[op, {fields}]; op one of record-principle, "
	  "record-pattern, record-decision, record-file-understanding, "
	  "link-entities, delete-principle, delete-pattern, delete-decision, "
	  "update-confidence, add-evidence\"}}},\"required\":[\"projectId\","
	  "\"actions\"],\"additionalProperties\":false}", 0 },
};

const struct kgtool_spec *
kgtool_spec(const char *name)
{
	size_t i;

	for (i = 0; i < KGTOOL_N; i++)
		if (strcmp(name, kgtool_specs[i].name) == 0)
			return &kgtool_specs[i];
	return NULL;
}

int
kgtool_offered(struct sess *s)
{
	return s->wk->conf->knowledge_tools;
}

int
kgtool_is(struct sess *s, const char *name)
{
	return kgtool_spec(name) != NULL && kgtool_offered(s);
}

size_t
kgtool_defs(struct sess *s, struct llm_tool_def *defs,
    int (*taken)(void *, const char *), void *arg)
{
	size_t i, n = 0;

	if (!kgtool_offered(s))
		return 0;
	for (i = 0; i < KGTOOL_N; i++) {
		if (taken != NULL && taken(arg, kgtool_specs[i].name))
			continue;
		defs[n].name = kgtool_specs[i].name;
		defs[n].description = kgtool_specs[i].description;
		defs[n].schema_json = kgtool_specs[i].schema;
		n++;
	}
	return n;
}

int
kgtool_project_ok(const char *id)
{
	return kg_valid_project(id);
}

int
kgtool_check(const char *name, const cJSON *args, char *msg, size_t len)
{
	const struct kgtool_spec *sp = kgtool_spec(name);
	const cJSON *p, *q, *f, *a, *e;

	if (sp == NULL) {
		snprintf(msg, len, "no such tool: %s (the tools are %s and %s)",
		    name, KGTOOL_QUERY, KGTOOL_ACT);
		return -1;
	}
	if (!cJSON_IsObject(args)) {
		snprintf(msg, len, "the arguments must be an object: {\"projectId"
		    "\": \"...\", %s}", sp->read_only ? "\"query\": \"...\"" :
		    "\"actions\": [...]");
		return -1;
	}
	cJSON_ArrayForEach(e, args) {
		if (e->string != NULL && (strcmp(e->string, "projectId") == 0 ||
		    (sp->read_only ? strcmp(e->string, "query") == 0 ||
		    strcmp(e->string, "format") == 0 :
		    strcmp(e->string, "actions") == 0)))
			continue;
		snprintf(msg, len, "unknown argument '%.64s': %s takes %s",
		    e->string ? e->string : "", name, sp->read_only ?
		    "projectId, query and format" : "projectId and actions");
		return -1;
	}
	p = cJSON_GetObjectItemCaseSensitive(args, "projectId");
	if (!cJSON_IsString(p) || !kgtool_project_ok(p->valuestring)) {
		snprintf(msg, len, "argument 'projectId' must be a string of 1 "
		    "to %d characters of A-Z a-z 0-9 . _ - not starting with "
		    "'.'", KG_PROJECT_MAX);
		return -1;
	}
	if (sp->read_only) {
		q = cJSON_GetObjectItemCaseSensitive(args, "query");
		if (!cJSON_IsString(q) || q->valuestring[0] == '\0' ||
		    strlen(q->valuestring) > KGQ_QUERY_MAX) {
			snprintf(msg, len, "argument 'query' must be a string "
			    "of 1 to %d bytes, e.g. \"(get-principles)\"",
			    KGQ_QUERY_MAX);
			return -1;
		}
		f = cJSON_GetObjectItemCaseSensitive(args, "format");
		if (f != NULL && (!cJSON_IsString(f) ||
		    (strcmp(f->valuestring, "sexp") != 0 &&
		    strcmp(f->valuestring, "json") != 0))) {
			snprintf(msg, len, "argument 'format' must be \"sexp\" "
			    "or \"json\"");
			return -1;
		}
		return 0;
	}
	a = cJSON_GetObjectItemCaseSensitive(args, "actions");
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 ||
	    cJSON_GetArraySize(a) > KG_BATCH_ACTIONS) {
		snprintf(msg, len, "argument 'actions' must be an array of 1 to "
		    "%d actions, each [op, {fields}], e.g. [[\"record-principle"
		    "\", {\"name\": \"n\", \"description\": \"d\"}]]",
		    KG_BATCH_ACTIONS);
		return -1;
	}
	return 0;
}

/* --- a call --- */

struct kgtool_call {
	struct kgcall	*kc;
	struct event	*ev;	/* an answer found before kgtool_start
				   returned, given from the loop */
	kgtool_fn	 done;
	void		*arg;
	int		 act;
	int		 is_error;
	char		*text;
};

void
kgtool_cancel(struct kgtool_call *kt)
{
	if (kt == NULL)
		return;
	kgcall_cancel(kt->kc);
	if (kt->ev != NULL)
		event_free(kt->ev);
	free(kt->text);
	free(kt);
}

static void
answer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct kgtool_call *kt = arg;

	(void)fd;
	(void)ev;
	kt->done(kt->arg, kt->is_error || kt->text == NULL, kt->text != NULL ?
	    kt->text : "out of memory", kt->is_error || kt->text == NULL ?
	    "TOOL_ERROR" : NULL);
	kgtool_cancel(kt);
}

/* Answers (text malloc'd, taken) once the loop comes round. */
static void
answer_later(struct wk *wk, struct kgtool_call *kt, int is_error, char *text)
{
	struct timeval tv = { 0, 0 };

	kt->is_error = is_error;
	kt->text = text;
	if (kt->ev == NULL && (kt->ev = evtimer_new(wk->base, answer_cb,
	    kt)) == NULL) {
		answer_cb(-1, 0, kt);	/* taken by callers as it is */
		return;
	}
	evtimer_add(kt->ev, &tv);
}

/* "CODE: message" of an {"error":{"code","message"}} answer, or NULL. */
static char *
error_text(const cJSON *root)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
	const char *code = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(e, "code"));
	const char *msg = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(e, "message"));
	const char *field = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(e, "field"));
	char *t = NULL;

	if (code == NULL && msg == NULL)
		return NULL;
	/* The field named, should the message not say it. */
	if (field != NULL && *field != '\0' && msg != NULL &&
	    strstr(msg, field) == NULL) {
		if (asprintf(&t, "%s: %s (field \"%s\")", code ? code : "ERROR",
		    msg, field) == -1)
			t = NULL;
	} else if (asprintf(&t, "%s: %s", code ? code : "ERROR",
	    msg ? msg : "") == -1)
		t = NULL;
	return t;
}

/* The text the caller reads of the project worker's answer; *is_error. */
static char *
result_text(int act, int status, const char *body, size_t len,
    int *is_error)
{
	cJSON *root = cJSON_ParseWithLength(body, len), *o;
	const cJSON *r;
	char *t = NULL;

	*is_error = 1;
	if (root == NULL) {
		if (asprintf(&t, "the knowledge service answered %d with a body "
		    "that is not JSON", status) == -1)
			t = NULL;
		return t;
	}
	if (status >= 300 || (t = error_text(root)) != NULL) {
		if (t == NULL && (t = error_text(root)) == NULL &&
		    asprintf(&t, "the knowledge service answered %d", status) ==
		    -1)
			t = NULL;
		cJSON_Delete(root);
		return t;
	}
	*is_error = 0;
	if (!act) {
		r = cJSON_GetObjectItemCaseSensitive(root, "result");
		t = cJSON_IsString(r) ? strdup(r->valuestring) :
		    r != NULL ? cJSON_PrintUnformatted(r) : strdup("nil");
	} else {
		/* The batch's summary, in the order the docs give it. */
		o = cJSON_CreateObject();
		if ((r = cJSON_GetObjectItemCaseSensitive(root, "seq")))
			cJSON_AddItemToObject(o, "seq", cJSON_Duplicate(r, 1));
		if ((r = cJSON_GetObjectItemCaseSensitive(root, "batchId")))
			cJSON_AddItemToObject(o, "batchId",
			    cJSON_Duplicate(r, 1));
		if ((r = cJSON_GetObjectItemCaseSensitive(root, "actions")))
			cJSON_AddItemToObject(o, "actions",
			    cJSON_Duplicate(r, 1));
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root,
		    "duplicate")))
			cJSON_AddTrueToObject(o, "duplicate");
		t = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
	}
	cJSON_Delete(root);
	return t;
}

static void
call_cb(void *arg, int status, const char *ctype, const char *body,
    size_t len, const char *err)
{
	struct kgtool_call *kt = arg;
	char *t = NULL;
	int is_error = 1;

	(void)ctype;
	kt->kc = NULL;	/* kgcall.c frees it */
	if (status == 0) {
		if (asprintf(&t, "the knowledge service could not be reached: "
		    "%s", err) == -1)
			t = NULL;
	} else
		t = result_text(kt->act, status, body, len, &is_error);
	kt->done(kt->arg, is_error || t == NULL, t != NULL ? t :
	    "out of memory", is_error || t == NULL ? "TOOL_ERROR" : NULL);
	free(t);
	kgtool_cancel(kt);
}

struct kgtool_call *
kgtool_start(struct wk *wk, const char *name, const cJSON *args,
    const char *batch_id, const struct kgcall_who *who, kgtool_fn done,
    void *arg)
{
	struct kgtool_call *kt;
	const struct kgtool_spec *sp = kgtool_spec(name);
	const cJSON *f;
	cJSON *b;
	char msg[300], *body, sid[sizeof(KG_SID_PREFIX) + KG_PROJECT_MAX];

	if ((kt = calloc(1, sizeof(*kt))) == NULL)
		return NULL;
	kt->done = done;
	kt->arg = arg;
	if (kgtool_check(name, args, msg, sizeof(msg)) == -1) {
		answer_later(wk, kt, 1, strdup(msg));
		return kt;
	}
	kt->act = !sp->read_only;
	if (kt->act && who->role == IPC_ROLE_OBSERVER) {
		answer_later(wk, kt, 1, strdup("FORBIDDEN: knowledge_act needs "
		    "the user, agent or admin role; an observer may only "
		    "query"));
		return kt;
	}
	snprintf(sid, sizeof(sid), "%s%.*s", KG_SID_PREFIX, KG_PROJECT_MAX,
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args,
	    "projectId")));
	if (who->scope != NULL && who->scope[0] != '\0' &&
	    !ipc_scope_allows(who->scope, sid)) {
		answer_later(wk, kt, 1, strdup("FORBIDDEN: the token that "
		    "created this session is scoped to other sessions than "
		    "this project's knowledge (kg:PROJECT); use a project it "
		    "allows, or a token whose scope names it"));
		return kt;
	}
	b = cJSON_CreateObject();
	if (kt->act) {
		cJSON_AddItemToObject(b, "actions", cJSON_Duplicate(
		    cJSON_GetObjectItemCaseSensitive(args, "actions"), 1));
		if (batch_id != NULL)
			cJSON_AddStringToObject(b, "batchId", batch_id);
	} else {
		cJSON_AddStringToObject(b, "query", cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(args, "query")));
		f = cJSON_GetObjectItemCaseSensitive(args, "format");
		cJSON_AddStringToObject(b, "format", f != NULL ?
		    f->valuestring : "sexp");
	}
	body = cJSON_PrintUnformatted(b);
	cJSON_Delete(b);
	if (body == NULL) {
		answer_later(wk, kt, 1, NULL);
		return kt;
	}
	kt->kc = kgcall_start(wk, cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(args, "projectId")), "POST",
	    kt->act ? "/actions" : "/query", body, strlen(body), who, call_cb,
	    kt);
	free(body);
	if (kt->kc == NULL)
		answer_later(wk, kt, 1, NULL);
	return kt;
}

struct kgtool_call *
kgtool_run(struct sess *s, const char *name, const char *call_id,
    const char *args, kgtool_fn done, void *arg)
{
	struct kgtool_call *kt;
	struct kgcall_who who;
	char base[48], *key = NULL, hex[65], bid[40];
	int have_bid = 0;
	cJSON *a = cJSON_Parse(args != NULL && *args ? args : "{}");

	/* The same call of the same step of the same turn, whatever its
	 * attempt: one batch id (tools.c finds its results the same way). */
	snprintf(base, sizeof(base), "%s", s->turn != NULL ? s->turn->msgid :
	    "");
	base[strcspn(base, ".")] = '\0';
	if (asprintf(&key, "%s\n%s\n%u\n%s", s->id, base, s->turn != NULL ?
	    s->turn->model_calls : 0, call_id) == -1)
		key = NULL;
	if (key != NULL) {
		kbt_sha256(key, strlen(key), hex);
		snprintf(bid, sizeof(bid), "tc-%.32s", hex);
		have_bid = 1;
	}
	free(key);
	memset(&who, 0, sizeof(who));
	who.role = IPC_ROLE_AGENT;
	who.subject = cJSON_GetStringValue(cJSON_GetObjectItem(sess_meta(s),
	    "owner"));
	who.scope = cJSON_GetStringValue(cJSON_GetObjectItem(sess_meta(s),
	    "scope"));
	who.conn_id = s->turn != NULL ? strtoull(s->turn->req, NULL, 16) : 0;
	kt = kgtool_start(s->wk, name, a, have_bid ? bid : NULL, &who,
	    done, arg);
	cJSON_Delete(a);
	return kt;
}
