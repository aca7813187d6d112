/*
 * What the protocol adapters' translations share (adapt.h): the SSE
 * framing with resumable chunk ids, the turn and thought filters, ids.
 * The connection side is adapt_http.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/kg.h"
#include "parley/store.h"
#include "adapt.h"
#include "sess.h"
#include "turn.h"

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
		idn = (size_t)snprintf(id, sizeof(id), "id: %llu:%u%s%s\n",
		    (unsigned long long)seq, cur->k, cur->epoch[0] ? "." : "",
		    cur->epoch);
	n = strlen(text);
	if ((grown = realloc(*out, *len + idn + n + 9)) == NULL) {
		/* Counted, not sent: the connection goes (conn.c) and the
		 * client resumes before it. */
		cur->failed = 1;
		return;
	}
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
	else
		cur->failed = 1;
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
	if (*end == '.') {
		if (!epoch_valid(end + 1) || end[1] == '\0')
			return -1;
		snprintf(cur->client, sizeof(cur->client), "%s", end + 1);
	} else if (*end != '\0')
		return -1;
	cur->resumed = 1;
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

uint64_t
adapt_msgid_seq(const char *msgid)
{
	uint64_t v = 0;
	const char *p;

	if (msgid == NULL || strncmp(msgid, "m-", 2) != 0 || msgid[2] == '\0')
		return 0;
	for (p = msgid + 2; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_C(1) << 53) / 10)
			return 0;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	return v <= (UINT64_C(1) << 53) ? v : 0;
}

int
adapt_current_turn(const struct sess *s, char *msgid, size_t len,
    uint64_t *input_seq)
{
	const cJSON *t, *n;
	const char *m;
	uint64_t seq;

	/* Its seq from the turn, not its id: a re-run's is m-SEQ.N and a
	 * team's next speaker's m-SEQ-HOP. */
	if (s->turn != NULL) {
		m = s->turn->msgid;
		seq = s->turn->input_seq;
	} else {
		t = cJSON_GetObjectItem(sess_meta(s), "turn");
		m = cJSON_GetStringValue(cJSON_GetObjectItem(t, "messageId"));
		n = cJSON_GetObjectItem(t, "inputSeq");
		seq = cJSON_IsNumber(n) && n->valuedouble >= 1 &&
		    n->valuedouble <= (double)(UINT64_C(1) << 53) ?
		    (uint64_t)n->valuedouble : 0;
	}
	if (m == NULL || seq == 0 || seq > (UINT64_C(1) << 53) ||
	    strlen(m) >= len)
		return 0;
	snprintf(msgid, len, "%s", m);
	*input_seq = seq;
	return 1;
}

int
adapt_thought_of(const char *msgid, const cJSON *th)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(th,
	    "thoughtId"));
	size_t n = strlen(msgid);

	return n > 0 && id != NULL && strncmp(id, "th_", 3) == 0 &&
	    strncmp(id + 3, msgid, n) == 0 && (id[3 + n] == '-' ||
	    id[3 + n] == '.');
}

int
adapt_session_id(const char *sid, char *msg, size_t msglen)
{
	if (!store_valid_id(sid)) {
		snprintf(msg, msglen, "the chat or thread id must be 1-128 "
		    "characters of A-Z a-z 0-9 . _ : -");
		return -1;
	}
	if (strncmp(sid, KG_SID_PREFIX, strlen(KG_SID_PREFIX)) == 0) {
		snprintf(msg, msglen, "'%.64s' names a project's knowledge "
		    "(kg:), not a chat; choose another id", sid);
		return -1;
	}
	return 0;
}
