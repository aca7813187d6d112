/*
 * What the protocol adapters share on the connection side (adapt.h): the
 * stream set-up, the resume id, the body, the session's errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/http.h"
#include "parley/proto.h"
#include "adapt.h"
#include "conn.h"
#include "deliver.h"
#include "sess.h"
#include "wk.h"

void
adapt_stream(struct conn *c, struct sess *s, const struct adapt_ops *ops,
    void *state, const char *extra, uint64_t from)
{
	struct adapt_cursor *cur = state;

	/* Ids name the epoch, so that a resume can be told a rewrite. */
	snprintf(cur->epoch, sizeof(cur->epoch), "%s", sess_epoch(s));
	c->adapt = ops;
	c->adapt_st = state;
	conn_sse_start_ext(c, extra);
	conn_attach(c, s);
	c->sub.next_seq = from > 0 ? from : 1;
	c->sub.live = 0;
	deliver_pump(&c->sub);
}

int
adapt_resume_check(struct conn *c, struct sess *s,
    const struct adapt_cursor *cur)
{
	struct epochs e;
	const char *t = sess_epochs(s);
	uint64_t from;
	char msg[300];

	if (!cur->resumed || epoch_parse(&e, t, strlen(t)) == -1 ||
	    !epoch_resume(&e, cur->client, cur->skip_seq, &from))
		return 0;
	snprintf(msg, sizeof(msg), "the chat's history was rewritten from "
	    "seq %llu on (epoch %s; a crash or failover lost events this "
	    "stream had sent): load the chat again instead of resuming",
	    (unsigned long long)from, epoch_current(&e));
	conn_http_error(c, 409, "RESUME_GAP", msg);
	return -1;
}

int
adapt_last_id(const struct conn *c, char *buf, size_t len)
{
	const struct http_request *r = &c->hp.req;
	const char *h = http_header(r, "Last-Event-ID");

	if (h != NULL) {
		if (strlen(h) >= len)
			return -2;
		snprintf(buf, len, "%s", h);
		return 0;
	}
	if (r->query != NULL) {
		switch (http_query_param(r->query, "lastEventId", buf, len)) {
		case 0:
			return 0;
		case -1:
			break;
		default:
			return -2;
		}
	}
	return -1;
}

void
adapt_open_error(struct conn *c, const char *err)
{
	const char *sid = c->ic.session;
	char msg[200];

	if (sess_find(c->wk, sid) == NULL)
		wk_released(c->wk, sid);
	if (strcmp(err, "NOT_FOUND") == 0) {
		snprintf(msg, sizeof(msg), "no session '%s': its first "
		    "message creates it", sid);
		conn_http_error(c, 404, "NOT_FOUND", msg);
	} else if (strcmp(err, "OVERLOADED") == 0)
		conn_http_error(c, 503, "OVERLOADED",
		    sess_overloaded_why(c->wk));
	else if (strcmp(err, "RATE_LIMITED") == 0)
		conn_http_error(c, 429, err, "too many sessions for this "
		    "client; retry later");
	else if (strcmp(err, "FORBIDDEN") == 0)
		conn_http_error(c, 403, err, "this session is not yours");
	else
		conn_http_error(c, 500, "INTERNAL", "the session could not be "
		    "opened; see the server log");
}

cJSON *
adapt_body(struct conn *c, char *msg, size_t msglen)
{
	const struct http_request *r = &c->hp.req;
	cJSON *o;

	if ((o = proto_json(r->body ? r->body : "", r->body_len,
	    c->wk->conf->max_json_depth, msg, msglen)) == NULL)
		return NULL;
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		snprintf(msg, msglen, "the body must be a JSON object");
		return NULL;
	}
	return o;
}
