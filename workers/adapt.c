/*
 * What the protocol adapters share (adapt.h): the SSE framing with
 * resumable chunk ids, the turn filter, and the stream set-up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/http.h"
#include "adapt.h"
#include "conn.h"
#include "deliver.h"
#include "sess.h"

/* Appends "id: ...\ndata: text\n\n"; the chunk counted, maybe left out. */
static void
block_add(struct adapt_cursor *cur, char **out, size_t *len, uint64_t seq,
    const char *text)
{
	char id[48], *grown;
	size_t n, idn = 0;

	if (seq != cur->seq) {
		cur->seq = seq;
		cur->k = 0;
	}
	cur->k++;
	if (seq < cur->skip_seq || (seq == cur->skip_seq &&
	    cur->k <= cur->skip_k))
		return;
	if (cur->ids)
		idn = (size_t)snprintf(id, sizeof(id), "id: %llu:%u\n",
		    (unsigned long long)seq, cur->k);
	n = strlen(text);
	if ((grown = realloc(*out, *len + idn + n + 9)) == NULL)
		return;
	memcpy(grown + *len, id, idn);
	memcpy(grown + *len + idn, "data: ", 6);
	/* Printed unformatted, the JSON is one line. */
	memcpy(grown + *len + idn + 6, text, n);
	memcpy(grown + *len + idn + 6 + n, "\n\n", 3);
	*out = grown;
	*len += idn + n + 8;
}

void
adapt_sse(struct adapt_cursor *cur, char **out, size_t *len, uint64_t seq,
    cJSON *data)
{
	char *j = cJSON_PrintUnformatted(data);

	cJSON_Delete(data);
	if (j != NULL)
		block_add(cur, out, len, seq, j);
	free(j);
}

void
adapt_sse_text(struct adapt_cursor *cur, char **out, size_t *len,
    uint64_t seq, const char *text)
{
	block_add(cur, out, len, seq, text);
}

int
adapt_cursor_parse(struct adapt_cursor *cur, const char *s)
{
	unsigned long long seq;
	unsigned long k = (unsigned long)-1;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	seq = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	if (*end == ':') {
		if (end[1] < '0' || end[1] > '9')
			return -1;
		k = strtoul(end + 1, &end, 10);
		if (errno != 0 || k > 1000000)
			return -1;
	}
	if (*end != '\0')
		return -1;
	cur->skip_seq = seq;
	/* "SEQ": every chunk of SEQ. */
	cur->skip_k = k == (unsigned long)-1 ? (unsigned)-1 : (unsigned)k;
	return 0;
}

int
adapt_turn_of(const char *msgid, const cJSON *e)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(e,
	    "messageId"));
	size_t n = strlen(msgid);

	return msgid[0] != '\0' && id != NULL && strncmp(id, msgid, n) == 0 &&
	    (id[n] == '\0' || id[n] == '-' || id[n] == '.');
}

void
adapt_stream(struct conn *c, struct sess *s, const struct adapt_ops *ops,
    void *state, const char *extra, uint64_t from)
{
	c->adapt = ops;
	c->adapt_st = state;
	conn_sse_start_ext(c, extra);
	conn_attach(c, s);
	c->sub.next_seq = from > 0 ? from : 1;
	c->sub.live = 0;
	deliver_pump(&c->sub);
}

int
adapt_last_id(const struct conn *c, char *buf, size_t len)
{
	const struct http_request *r = &c->hp.req;
	const char *h = http_header(r, "Last-Event-ID");

	if (h != NULL) {
		if (strlen(h) >= len)
			return -1;
		snprintf(buf, len, "%s", h);
		return 0;
	}
	if (r->query != NULL && http_query_param(r->query, "lastEventId",
	    buf, len) == 0)
		return 0;
	return -1;
}
