/*
 * The HTTP endpoints of a project's knowledge (kgs.h), in the worker that
 * owns or follows the session kg:P, where the supervisor routed them:
 *   POST /knowledge/P/actions {"actions":[...],"batchId"?} (or the header
 *     Idempotency-Key): 202 {"seq","batchId","actions"}, 200 with
 *     "duplicate" for a repeat, 400 INVALID_ACTION naming the action, its
 *     op and field; the first one creates the project.
 *   POST /knowledge/P/query {"query","format"?}: 200 {"format","result"}
 *     or {"format","error"}; a project with no log is an empty graph.
 *   GET /knowledge/P[?format=md|json][&at=SEQ]: the export, as it is or
 *     as it was after seq SEQ.
 *   GET /knowledge/P/stream: route.c's session stream of kg:P (WebSocket
 *     with an Upgrade, else SSE).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/config.h"
#include "parley/http.h"
#include "parley/kg.h"
#include "parley/log.h"
#include "parley/proto.h"
#include "parley/store.h"
#include "parley/util.h"
#include "conn.h"
#include "kgs.h"
#include "route.h"
#include "sess.h"
#include "wk.h"

#define PREFIX		"/knowledge/"
#define PROJECT_HELP	"a projectId is 1 to 100 characters of A-Z a-z 0-9 " \
			"'.' '_' '-', not starting with '.'"

/*
 * Splits a /knowledge/ path: the project into out (NUL-terminated, maybe
 * not a valid one), *sub what follows it ("" for none).  0, or -1 when
 * the path is not a knowledge one.
 */
static int
split(const char *path, char *out, size_t outlen, const char **sub)
{
	size_t n;

	if (strncmp(path, PREFIX, strlen(PREFIX)) != 0)
		return -1;
	path += strlen(PREFIX);
	n = strcspn(path, "/");
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, path, n);
	out[n] = '\0';
	*sub = path[n] == '/' ? path + n + 1 : "";
	return 0;
}

static void	from_of(struct conn *, struct sess_from *);

/* 1 when the body is a batch an empty graph takes: it may create sid. */
static int
creates(struct conn *c, const char *sid)
{
	const struct http_request *r = &c->hp.req;
	struct sess_result res;
	struct sess_from from;
	char msg[256];
	cJSON *o;
	int ok;

	if ((o = proto_json(r->body != NULL ? r->body : "", r->body_len,
	    c->wk->conf->max_json_depth, msg, sizeof(msg))) == NULL)
		return 0;
	from_of(c, &from);
	memset(&res, 0, sizeof(res));
	ok = cJSON_IsObject(o) && kgs_check_new(c->wk, sid, &from, o,
	    &res) == 0;
	free((char *)res.reply);
	cJSON_Delete(o);
	return ok;
}

int
kgs_http_session(struct conn *c, char *sid, size_t sidlen, int *create)
{
	const struct http_request *r = &c->hp.req;
	char p[KG_PROJECT_MAX + 2];
	const char *sub;

	*create = 0;
	if (split(r->path, p, sizeof(p), &sub) == -1 || !kg_valid_project(p))
		return 0;
	snprintf(sid, sidlen, "%s%s", KG_SID_PREFIX, p);
	/* Only an accepted batch creates a project: reading (the stream
	 * too) creates nothing, nor does a batch an empty graph refuses. */
	*create = route_creator(c, r) != NULL && strcmp(sub, "actions") ==
	    0 && strcmp(r->method, "POST") == 0 && (sess_find(c->wk, sid) !=
	    NULL || creates(c, sid));
	return 1;
}

/* The body, a JSON object (the caller's), or NULL answered with 400. */
static cJSON *
body_object(struct conn *c, const char *example)
{
	const struct http_request *r = &c->hp.req;
	char msg[256];
	cJSON *o;

	if ((o = proto_json(r->body != NULL ? r->body : "", r->body_len,
	    c->wk->conf->max_json_depth, msg, sizeof(msg))) == NULL) {
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return NULL;
	}
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		snprintf(msg, sizeof(msg), "the body must be a JSON object, "
		    "e.g. %s", example);
		conn_http_error(c, 400, "BAD_REQUEST", msg);
		return NULL;
	}
	return o;
}

/* The session could not be opened (err from sess_get). */
static void
open_error(struct conn *c, const char *err, const char *sid)
{
	if (sess_find(c->wk, sid) == NULL)
		wk_released(c->wk, sid);
	if (strcmp(err, "OVERLOADED") == 0)
		conn_http_error(c, 503, "OVERLOADED",
		    sess_overloaded_why(c->wk));
	else if (strcmp(err, "RATE_LIMITED") == 0)
		conn_http_error(c, 429, "RATE_LIMITED", "too many sessions "
		    "were created from this address or by this subject "
		    "(max-sessions-per-address, max-sessions-per-subject); "
		    "retry later");
	else if (strcmp(err, "FORBIDDEN") == 0)
		conn_http_error(c, 403, "FORBIDDEN", "this token may not use "
		    "this project");
	else
		conn_http_error(c, 500, "INTERNAL", "the project's knowledge "
		    "could not be opened; see the server log");
}

/* The project's session when it exists (NULL, *absent 1: it does not). */
static struct sess *
session(struct conn *c, const char *sid, int create, int *absent)
{
	const char *err = NULL;
	struct sess *s;

	*absent = 0;
	if ((s = sess_get(c->wk, sid, create ? route_creator(c, NULL) : NULL,
	    NULL, NULL, &err)) != NULL) {
		if (!route_may_access(s, &c->ic)) {
			conn_http_error(c, 403, "FORBIDDEN", "this token may "
			    "not use this project");
			return NULL;
		}
		return s;
	}
	if (err != NULL && strcmp(err, "NOT_FOUND") == 0) {
		if (sess_find(c->wk, sid) == NULL)
			wk_released(c->wk, sid);
		*absent = 1;
		return NULL;
	}
	open_error(c, err != NULL ? err : "INTERNAL", sid);
	return NULL;
}

static void
from_of(struct conn *c, struct sess_from *f)
{
	f->role = (int)c->ic.role;
	f->agent = c->agent;
	f->subject = c->ic.subject;
	f->inbox = 0;
}

/* POST /knowledge/P/actions */
static void
http_actions(struct conn *c, const char *sid)
{
	const struct http_request *r = &c->hp.req;
	struct sess_result res;
	struct sess_from from;
	const char *key = http_header(r, "Idempotency-Key");
	const cJSON *bid;
	cJSON *b, *m;
	struct sess *s;
	char gen[24];
	int absent;

	if ((b = body_object(c, "{\"actions\":[[\"record-principle\","
	    "{\"name\":\"...\",\"description\":\"...\"}]]}")) == NULL)
		return;
	bid = cJSON_GetObjectItemCaseSensitive(b, "batchId");
	if (bid != NULL && (!cJSON_IsString(bid) || bid->valuestring[0] ==
	    '\0' || strlen(bid->valuestring) > PROTO_ID_MAX)) {
		cJSON_Delete(b);
		conn_http_error(c, 400, "BAD_REQUEST", "field 'batchId' must be "
		    "a string of 1 to 128 characters (or leave it out and send "
		    "an Idempotency-Key header)");
		return;
	}
	if (bid == NULL && key != NULL && (key[0] == '\0' ||
	    strlen(key) > PROTO_ID_MAX)) {
		cJSON_Delete(b);
		conn_http_error(c, 400, "BAD_REQUEST", "Idempotency-Key must "
		    "hold 1 to 128 characters");
		return;
	}
	if (bid != NULL)
		key = bid->valuestring;
	else if (key == NULL) {
		memcpy(gen, "b-", 2);
		util_randhex(gen + 2, 8);
		key = gen;
	}
	free(c->kg_batch);
	if ((c->kg_batch = strdup(key)) == NULL) {
		cJSON_Delete(b);
		conn_http_error(c, 500, "INTERNAL", "out of memory");
		return;
	}
	c->kg_nact = cJSON_GetArraySize(cJSON_GetObjectItem(b, "actions"));
	m = cJSON_CreateObject();
	cJSON_AddItemToObject(m, "actions", cJSON_DetachItemFromObject(b,
	    "actions"));
	cJSON_Delete(b);
	c->kg_kind = 1 + KGS_ACT;
	from_of(c, &from);
	memset(&res, 0, sizeof(res));
	if ((s = session(c, sid, 1, &absent)) == NULL) {
		/* Routing created nothing: the batch would be refused on
		 * an empty graph (kgs_http_session), or the role may not. */
		if (absent && route_creator(c, NULL) != NULL &&
		    kgs_check_new(c->wk, sid, &from, m, &res) == -1) {
			kgs_http_reply(c, NULL, &res);
			free((char *)res.reply);
		} else if (absent)
			conn_http_error(c, 404, "NOT_FOUND", "the project does "
			    "not exist and this token's role may not create it "
			    "(user, agent or admin)");
		cJSON_Delete(m);
		return;
	}
	kgs_run(s, &c->cl, &from, KGS_ACT, 0, c->kg_batch, m, &res);
	cJSON_Delete(m);
	if (!res.pending)
		kgs_http_reply(c, s, &res);
}

/* POST /knowledge/P/query */
static void
http_query(struct conn *c, const char *sid, const char *project)
{
	struct sess_result res;
	struct sess_from from;
	struct kg *g;
	cJSON *b, *m;
	struct sess *s;
	int absent;

	if ((b = body_object(c, "{\"query\":\"(get-principles)\"}")) == NULL)
		return;
	m = cJSON_CreateObject();
	if (cJSON_GetObjectItem(b, "query") != NULL)
		cJSON_AddItemToObject(m, "query", cJSON_DetachItemFromObject(b,
		    "query"));
	if (cJSON_GetObjectItem(b, "format") != NULL)
		cJSON_AddItemToObject(m, "format", cJSON_DetachItemFromObject(
		    b, "format"));
	cJSON_Delete(b);
	c->kg_kind = 1 + KGS_QUERY;
	from_of(c, &from);
	memset(&res, 0, sizeof(res));
	if ((s = session(c, sid, 0, &absent)) == NULL) {
		if (!absent) {
			cJSON_Delete(m);
			return;
		}
		/* No log: an empty graph, and nothing is made. */
		if ((g = kg_new(project)) == NULL) {
			cJSON_Delete(m);
			conn_http_error(c, 503, "OVERLOADED", "out of memory");
			return;
		}
		if (!cJSON_IsString(cJSON_GetObjectItem(m, "query")) ||
		    cJSON_GetStringValue(cJSON_GetObjectItem(m,
		    "query"))[0] == '\0')
			conn_http_error(c, 400, "BAD_REQUEST", "field 'query' "
			    "must be a non-empty string, e.g. "
			    "\"(get-principles)\"");
		else if (cJSON_GetObjectItem(m, "format") != NULL &&
		    (!cJSON_IsString(cJSON_GetObjectItem(m, "format")) ||
		    (strcmp(cJSON_GetObjectItem(m, "format")->valuestring,
		    "json") != 0 && strcmp(cJSON_GetObjectItem(m,
		    "format")->valuestring, "sexp") != 0)))
			conn_http_error(c, 400, "BAD_REQUEST", "field 'format' "
			    "must be \"sexp\" (the default) or \"json\"");
		else
			conn_http_reply(c, 200, kgs_query(g,
			    cJSON_GetStringValue(cJSON_GetObjectItem(m,
			    "query")), cJSON_GetStringValue(
			    cJSON_GetObjectItem(m, "format"))));
		kg_free(g);
		cJSON_Delete(m);
		return;
	}
	kgs_run(s, &c->cl, &from, KGS_QUERY, 0, NULL, m, &res);
	cJSON_Delete(m);
	if (!res.pending)
		kgs_http_reply(c, s, &res);
}

/* GET /knowledge/P[?format=md|json][&at=SEQ] */
static void
http_export(struct conn *c, const char *sid, const char *project)
{
	const struct http_request *r = &c->hp.req;
	struct sess_result res;
	struct sess_from from;
	char v[32], *end, *txt;
	struct kg *g;
	cJSON *m;
	struct sess *s;
	uint64_t at = 0;
	int absent, have_at = 0;

	if (strcmp(r->method, "GET") != 0) {
		conn_http_error(c, 405, "BAD_REQUEST", "use GET /knowledge/P, "
		    "POST /knowledge/P/actions or POST /knowledge/P/query");
		return;
	}
	c->kg_md = 0;
	if (r->query != NULL && http_query_param(r->query, "format", v,
	    sizeof(v)) >= 0) {
		if (strcmp(v, "md") == 0 || strcmp(v, "markdown") == 0)
			c->kg_md = 1;
		else if (strcmp(v, "json") != 0) {
			conn_http_error(c, 400, "BAD_REQUEST", "format must be "
			    "json (the default) or md");
			return;
		}
	}
	if (r->query != NULL && http_query_param(r->query, "at", v,
	    sizeof(v)) >= 0) {
		errno = 0;
		at = strtoull(v, &end, 10);
		/* A seq is below 2^53 (what a JSON number holds exactly). */
		if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 ||
		    at > KGS_SEQ_MAX) {
			conn_http_error(c, 400, "BAD_REQUEST", "at must be a "
			    "seq of the project's log (a whole number from 0 "
			    "to 9007199254740991): the graph as it was after "
			    "that event");
			return;
		}
		have_at = 1;
	}
	c->kg_kind = 1 + KGS_EXPORT;
	if ((s = session(c, sid, 0, &absent)) == NULL) {
		if (!absent)
			return;
		if ((g = kg_new(project)) == NULL ||
		    (txt = kgs_export(g, c->kg_md)) == NULL) {
			kg_free(g);
			conn_http_error(c, 503, "OVERLOADED", "out of memory");
			return;
		}
		memset(&res, 0, sizeof(res));
		res.http = 200;
		res.reply = txt;
		kgs_http_reply(c, NULL, &res);
		free(txt);
		kg_free(g);
		return;
	}
	m = cJSON_CreateObject();
	if (have_at)
		cJSON_AddStringToObject(m, "at", v);	/* exact */
	from_of(c, &from);
	memset(&res, 0, sizeof(res));
	kgs_run(s, &c->cl, &from, KGS_EXPORT, c->kg_md, NULL, m, &res);
	cJSON_Delete(m);
	if (!res.pending)
		kgs_http_reply(c, s, &res);
}

int
kgs_http(struct conn *c, char *sid, size_t sidlen)
{
	const struct http_request *r = &c->hp.req;
	char p[KG_PROJECT_MAX + 2];
	const char *sub;

	if (split(r->path, p, sizeof(p), &sub) == -1)
		return 0;
	if (!kg_valid_project(p)) {
		conn_http_error(c, 400, "BAD_REQUEST", "bad projectId in the "
		    "path: " PROJECT_HELP);
		return 1;
	}
	snprintf(sid, sidlen, "%s%s", KG_SID_PREFIX, p);
	if (strcmp(sub, "stream") == 0) {
		if (strcmp(r->method, "GET") != 0) {
			conn_http_error(c, 405, "BAD_REQUEST", "use GET (a "
			    "WebSocket upgrade, or an event stream)");
			return 1;
		}
		return http_header(r, "Upgrade") != NULL ? 2 : 3;
	}
	if (*sub == '\0')
		http_export(c, sid, p);
	else if (strcmp(sub, "actions") == 0 || strcmp(sub, "query") == 0) {
		if (strcmp(r->method, "POST") != 0)
			conn_http_error(c, 405, "BAD_REQUEST", "use POST");
		else if (sub[0] == 'a')
			http_actions(c, sid);
		else
			http_query(c, sid, p);
	} else
		conn_http_error(c, 404, "NOT_FOUND", "no such endpoint: "
		    "/knowledge/P takes GET, /actions and /query POST, "
		    "/stream a WebSocket or an event stream");
	return 1;
}

void
kgs_http_reply(struct conn *c, struct sess *s, const struct sess_result *res)
{
	cJSON *o, *x, *e;
	int kind = c->kg_kind - 1;

	(void)s;
	if (res->code != NULL) {
		conn_http_error(c, res->http ? res->http : 500, res->code,
		    res->msg);
		return;
	}
	if (kind == KGS_EXPORT) {
		if (res->reply == NULL)
			conn_http_error(c, 500, "INTERNAL", "no answer");
		else
			conn_respond_as(c, 200, c->kg_md ?
			    "text/markdown; charset=utf-8" : "application/json",
			    res->reply, strlen(res->reply));
		return;
	}
	if (res->reply != NULL) {
		/* A requester-only message: its fields are the body. */
		if ((x = cJSON_Parse(res->reply)) == NULL) {
			conn_http_error(c, 500, "INTERNAL", "out of memory");
			return;
		}
		o = cJSON_CreateObject();
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x,
		    "type")) ? cJSON_GetStringValue(cJSON_GetObjectItem(x,
		    "type")) : "", "error") == 0) {
			static const char *const keep[] = { "code", "message",
			    "action", "op", "field" };
			size_t i;

			e = cJSON_AddObjectToObject(o, "error");
			for (i = 0; i < sizeof(keep) / sizeof(*keep); i++)
				if (cJSON_GetObjectItem(x, keep[i]) != NULL)
					cJSON_AddItemToObject(e, keep[i],
					    cJSON_DetachItemFromObject(x,
					    keep[i]));
		} else {
			static const char *const keep[] = { "format",
			    "result", "error" };
			size_t i;

			for (i = 0; i < sizeof(keep) / sizeof(*keep); i++)
				if (cJSON_GetObjectItem(x, keep[i]) != NULL)
					cJSON_AddItemToObject(o, keep[i],
					    cJSON_DetachItemFromObject(x,
					    keep[i]));
		}
		cJSON_Delete(x);
		conn_http_reply(c, res->http ? res->http : 200, o);
		return;
	}
	o = cJSON_CreateObject();
	if (res->seq)
		cJSON_AddNumberToObject(o, "seq", (double)res->seq);
	cJSON_AddStringToObject(o, "batchId", c->kg_batch ? c->kg_batch :
	    "");
	cJSON_AddNumberToObject(o, "actions", c->kg_nact);
	if (res->duplicate)
		cJSON_AddBoolToObject(o, "duplicate", 1);
	conn_http_reply(c, res->duplicate ? 200 : 202, o);
}
