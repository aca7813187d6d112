/*
 * The MCP server's requests to us.  mcp_xfer.c queues those it reads in
 * any event stream; once libcurl has returned they are answered here the
 * way ours are sent, each response its own POST (the server says 202)
 * that nobody waits for: ping with an empty result, elicitation/create by
 * the call's caller (mcp_call_on_elicit, mcp_elicit_answer) or with
 * "decline", anything else with "method not found", so that a tool never
 * waits out its timeout for an answer that cannot come.  Notifications
 * are ignored.
 *
 * Apart from mcp.c because it is the one part of the client that serves
 * rather than asks; it calls only the transfers below it (mcp_xfer.c),
 * never the servers or calls: mcp.c runs the queue (ask_run) and drops a
 * call's questions when the call ends (ask_elicit_free).
 */
#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/util.h"
#include "mcp_int.h"

#define MCP_MAX_ELICITS		4		/* questions open per call */
#define MCP_ELICIT_MARGIN	5000		/* ms: an open question is
						   declined this long (or a
						   quarter of the time left,
						   if less) before its call
						   times out, so the tool
						   can finish */

/* --- the server's requests --- */

/*
 * POSTs our response to the server's request id in session sid ("" none):
 * result, or when it is NULL the error code and message.  Nobody waits
 * for it.  0, or -1 when the session is gone or out of memory.  Takes
 * result.
 */
static int
answer_send(struct mcp_srv *srv, unsigned gen, const char *sid,
    const cJSON *id, cJSON *result, int code, const char *message)
{
	cJSON	*o, *e, *idc = NULL;
	char	*body = NULL;

	/* A new session does not know the old one's requests. */
	if (srv->gen != gen || (o = cJSON_CreateObject()) == NULL) {
		cJSON_Delete(result);
		return -1;
	}
	if (cJSON_AddStringToObject(o, "jsonrpc", "2.0") != NULL &&
	    (idc = cJSON_Duplicate(id, 0)) != NULL &&
	    cJSON_AddItemToObject(o, "id", idc)) {
		idc = NULL;
		if (result != NULL) {
			if (cJSON_AddItemToObject(o, "result", result))
				body = cJSON_PrintUnformatted(o);
			else
				cJSON_Delete(result);
		} else if ((e = cJSON_AddObjectToObject(o, "error")) != NULL &&
		    cJSON_AddNumberToObject(e, "code", code) != NULL &&
		    cJSON_AddStringToObject(e, "message", message) != NULL)
			body = cJSON_PrintUnformatted(o);
	} else
		cJSON_Delete(result);
	cJSON_Delete(idc);
	cJSON_Delete(o);
	if (xfer_start(srv->ctx, srv, X_ANSWER, 0, body, MCP_NOTIFY_TIMEOUT,
	    sid[0] != '\0' ? sid : NULL) == NULL)
		return -1;
	return 0;
}

/* {"action":action[,"content":content]}; takes content. */
static int
elicit_send(struct mcp_elicit *e, const char *action, cJSON *content)
{
	cJSON	*r;

	if ((r = cJSON_CreateObject()) == NULL ||
	    cJSON_AddStringToObject(r, "action", action) == NULL) {
		cJSON_Delete(r);
		cJSON_Delete(content);
		return -1;
	}
	if (content != NULL && !cJSON_AddItemToObject(r, "content", content)) {
		cJSON_Delete(r);
		cJSON_Delete(content);
		return -1;
	}
	return answer_send(e->call->srv, e->gen, e->sid, e->id, r, 0, NULL);
}

void
ask_elicit_free(struct mcp_elicit *e)
{
	TAILQ_REMOVE(&e->call->elicits, e, entry);
	e->call->nelicits--;
	if (e->ev != NULL)
		event_free(e->ev);
	cJSON_Delete(e->id);
	free(e);
}

/* Nobody answered in time: decline, so the tool can still finish. */
static void
elicit_ev(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_elicit	*e = arg;

	(void)fd;
	(void)what;
	e->expired = 1;
	log_info("mcp server %s: tool %.64s: its question was not answered "
	    "in %llu ms, declined", e->call->srv->cfg->name, e->call->tool,
	    (unsigned long long)e->wait_ms);
	elicit_send(e, "decline", NULL);
}

/* Answers the ask with {"action":"decline"} and says why. */
static void
ask_decline(struct ask *a, const char *why)
{
	cJSON	*r;

	log_info("mcp server %s: a question of %s%.64s declined: %s",
	    a->srv->cfg->name, a->call != NULL ? "tool " : "the server",
	    a->call != NULL ? a->call->tool : "", why);
	if ((r = cJSON_CreateObject()) == NULL ||
	    cJSON_AddStringToObject(r, "action", "decline") == NULL) {
		cJSON_Delete(r);
		return;
	}
	answer_send(a->srv, a->gen, a->sid,
	    cJSON_GetObjectItemCaseSensitive(a->msg, "id"), r, 0, NULL);
}

/* elicitation/create: to the call's caller, or declined. */
static void
elicit_start(struct ask *a)
{
	struct mcp_call		*c = a->call;
	struct mcp_elicit	*e;
	const cJSON		*p, *msg, *schema;
	struct timeval		 tv;
	uint64_t		 now, left;
	char			*sj;

	p = cJSON_GetObjectItemCaseSensitive(a->msg, "params");
	msg = cJSON_GetObjectItemCaseSensitive(p, "message");
	schema = cJSON_GetObjectItemCaseSensitive(p, "requestedSchema");
	if (!cJSON_IsString(msg) || !cJSON_IsObject(schema)) {
		answer_send(a->srv, a->gen, a->sid,
		    cJSON_GetObjectItemCaseSensitive(a->msg, "id"), NULL,
		    -32602, "Invalid params: elicitation/create needs a "
		    "message and a requestedSchema object");
		return;
	}
	if (c == NULL || c->ecb == NULL) {
		ask_decline(a, "nobody to ask");
		return;
	}
	now = util_mono_ms();
	if (c->nelicits >= MCP_MAX_ELICITS || now >= c->deadline_ms) {
		ask_decline(a, c->nelicits >= MCP_MAX_ELICITS ?
		    "too many open at once" : "no time left");
		return;
	}
	if (strlen(msg->valuestring) > MCP_MAX_ELICIT_TEXT) {
		ask_decline(a, "its message is too long");
		return;
	}
	if ((sj = cJSON_PrintUnformatted(schema)) == NULL ||
	    strlen(sj) > MCP_MAX_ELICIT_TEXT) {
		free(sj);
		ask_decline(a, "its schema is too long");
		return;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL ||
	    (e->id = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(a->msg,
	    "id"), 0)) == NULL ||
	    (e->ev = evtimer_new(c->ctx->base, elicit_ev, e)) == NULL) {
		if (e != NULL) {
			cJSON_Delete(e->id);
			free(e);
		}
		free(sj);
		ask_decline(a, "out of memory");
		return;
	}
	e->call = c;
	e->gen = a->gen;
	memcpy(e->sid, a->sid, sizeof(e->sid));
	TAILQ_INSERT_TAIL(&c->elicits, e, entry);
	c->nelicits++;
	/* Leave the tool a little of the call's time to use the answer. */
	left = c->deadline_ms - now;
	e->wait_ms = left - (left / 4 < MCP_ELICIT_MARGIN ? left / 4 :
	    MCP_ELICIT_MARGIN);
	util_tv(&tv, e->wait_ms);
	evtimer_add(e->ev, &tv);
	/* e may be answered or freed by the time this returns. */
	c->ecb(c->earg, msg->valuestring, sj, e);
	free(sj);
}

static void
ask_handle(struct ask *a)
{
	const char	*m;
	const cJSON	*id;
	cJSON		*r;
	char		 why[128];

	m = cJSON_GetObjectItemCaseSensitive(a->msg, "method")->valuestring;
	id = cJSON_GetObjectItemCaseSensitive(a->msg, "id");
	if (strcmp(m, "ping") == 0) {
		if ((r = cJSON_CreateObject()) != NULL)
			answer_send(a->srv, a->gen, a->sid, id, r, 0, NULL);
	} else if (strcmp(m, "elicitation/create") == 0)
		elicit_start(a);
	else {
		log_info("mcp server %s: it asked for %.64s, which parleyd "
		    "does not offer", a->srv->cfg->name, m);
		snprintf(why, sizeof(why), "Method not found: %.64s", m);
		answer_send(a->srv, a->gen, a->sid, id, NULL, -32601, why);
	}
}

void
ask_run(struct mcp_ctx *ctx)
{
	struct ask	*a;

	while ((a = TAILQ_FIRST(&ctx->asks)) != NULL) {
		TAILQ_REMOVE(&ctx->asks, a, entry);
		ctx->nasks--;
		ask_handle(a);
		cJSON_Delete(a->msg);
		free(a);
	}
}

/* --- API --- */

void
mcp_call_on_elicit(struct mcp_call *c, mcp_elicit_cb cb, void *arg)
{
	c->ecb = cb;
	c->earg = arg;
}

int
mcp_elicit_answer(struct mcp_elicit *e, const char *action,
    const char *content_json)
{
	cJSON	*content = NULL;
	int	 rv;

	if (e == NULL || action == NULL)
		return -1;
	if (strcmp(action, "accept") == 0) {
		if (content_json == NULL ||
		    strlen(content_json) > MCP_MAX_ELICIT_TEXT ||
		    (content = cJSON_Parse(content_json)) == NULL ||
		    !cJSON_IsObject(content)) {
			cJSON_Delete(content);
			return -1;
		}
	} else if ((strcmp(action, "decline") != 0 &&
	    strcmp(action, "cancel") != 0) || content_json != NULL)
		return -1;
	if (e->expired) {
		cJSON_Delete(content);
		ask_elicit_free(e);
		return 1;
	}
	rv = elicit_send(e, action, content);
	ask_elicit_free(e);
	return rv == 0 ? 0 : 1;
}
