/*
 * GET /sessions/ID/log and GET /api/audit: pages of a session's log read
 * from the store (route.c's REST endpoints answer with them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include <event2/buffer.h>

#include "parley/http.h"
#include "auditlog.h"
#include "conn.h"
#include "deliver.h"
#include "logpage.h"
#include "sess.h"
#include "wk.h"

#define PAGE_BYTES	(4u * 1024 * 1024)	/* a page stops past this */
#define AUDIT_SCAN	10000		/* events one audit page reads */
#define AUDIT_SCAN_BYTES (16u * 1024 * 1024)	/* and their bytes */

static int
page_cb(void *arg, uint64_t seq, uint64_t ts, const char *json, size_t len)
{
	struct conn *c = arg;
	struct conn_page *p = c->page;

	if (p->audit) {
		/* The trail is a few events among many: the read is bounded
		 * by what it reads, the page by what it keeps. */
		if (!auditlog_type(json, len)) {
			p->next = seq;
			p->scanned += len;
			return p->scanned >= AUDIT_SCAN_BYTES;
		}
		if (p->n == p->want) {
			p->more = 1;
			return 1;
		}
		p->next = seq;
		p->scanned += len;
	}
	if (p->n++ > 0)
		evbuffer_add(p->out, ",", 1);
	evbuffer_add(p->out, json, len);
	/* Large events make a short page; the client pages on with after. */
	return evbuffer_get_length(p->out) >= PAGE_BYTES ||
	    (p->audit && p->scanned >= AUDIT_SCAN_BYTES);
}

static void
page_done(void *arg, ssize_t n)
{
	struct conn *c = arg;
	struct conn_page *p = c->page;
	size_t len;
	char *body;

	deliver_read_end(&c->sub);
	c->page = NULL;
	if (n < 0) {
		c->wk->metrics.store_errors++;
		conn_http_error(c, 500, "INTERNAL",
		    "the log could not be read");
	} else {
		/* More only past what this read got to: a read that got
		 * nothing would be asked again forever. */
		if (p->audit)
			evbuffer_add_printf(p->out, "],\"next\":%llu,"
			    "\"more\":%s}", (unsigned long long)p->next,
			    p->more || (n > 0 && p->next < p->end) ? "true" :
			    "false");
		else
			evbuffer_add(p->out, "]", 1);
		len = evbuffer_get_length(p->out);
		body = (char *)evbuffer_pullup(p->out, -1);
		conn_respond(c, 200, body, len, NULL);
		c->closing = c->close_sent = 1;
	}
	evbuffer_free(p->out);
	free(p);
	if (c->sub.ranging)
		c->sub.ranging = 2;	/* answered inside the call */
	else
		conn_settle(c);
}

/*
 * A page of the log for c, from its ?after=N (default 0) and ?limit=L
 * (1 to 1000, default 100); NULL once answered with an error.
 */
static struct conn_page *
page_new(struct conn *c, uint64_t *after, uint64_t *limit)
{
	const struct http_request *r = &c->hp.req;
	struct conn_page *p;

	*after = 0;
	*limit = 100;
	if (http_query_u64(r, "after", after) == -1 ||
	    http_query_u64(r, "limit", limit) == -1 || *limit == 0 ||
	    *limit > 1000) {
		conn_http_error(c, 400, "BAD_REQUEST",
		    "after must be a seq (a whole "
		    "number) and limit a whole number from 1 to 1000");
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->out = evbuffer_new()) == NULL) {
		free(p);
		conn_http_error(c, 503, "OVERLOADED", "out of memory; retry");
		return NULL;
	}
	return p;
}

/*
 * GET /sessions/ID/log: a JSON array of the events after seq N, at most L.
 * audit, GET /api/audit?sessionId=ID: of those, only the audit_entry and
 * autonomy_changed events, with where to go on (the supervisor checked
 * the role and the scope).
 */
void
logpage_get(struct conn *c, struct sess *s, int audit)
{
	struct conn_page *p;
	uint64_t after, limit;

	if ((p = page_new(c, &after, &limit)) == NULL)
		return;
	if (audit) {
		p->audit = 1;
		p->want = (int)limit;
		p->next = after;
		p->end = deliver_last(&s->feed);
		limit = AUDIT_SCAN;
		/* A session id needs no escaping (store_valid_id). */
		evbuffer_add_printf(p->out, "{\"sessionId\":\"%s\","
		    "\"entries\":[", s->id);
	} else
		evbuffer_add(p->out, "[", 1);
	c->page = p;
	/* page_done may answer inside the call: the caller settles. */
	deliver_read(&c->sub, &s->feed, after, (size_t)limit, page_cb,
	    page_done, c);
}
