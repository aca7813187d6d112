/*
 * A session as approve.c and ctool.c see it, without a store: what they
 * log is kept in an array of events, meta saves are counted, and a test
 * can make the log refuse the next append.
 */
#ifndef PARLEY_FAKE_SESS_H
#define PARLEY_FAKE_SESS_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../../workers/sess.h"

struct fake_sess {
	struct sess	 s;
	cJSON		*log;		/* [{"seq":N,"type":T,...body}] */
	uint64_t	 seq;
	int		 saves;
	int		 meta_full;	/* sess_meta_room refuses */
	int		 refuse;	/* the next appends fail */
};

static struct fake_sess fs;

uint64_t
sess_emit(struct sess *s, const char *type, cJSON *body)
{
	(void)s;
	if (fs.refuse) {
		cJSON_Delete(body);
		return 0;
	}
	cJSON_AddNumberToObject(body, "seq", (double)++fs.seq);
	cJSON_AddStringToObject(body, "type", type);
	cJSON_AddItemToArray(fs.log, body);
	return fs.seq;
}

void
sess_meta_save(struct sess *s)
{
	(void)s;
	fs.saves++;
}

/* No client message ids are remembered (input.c's tests have their own). */
int
sess_id_find(struct sess *s, const char *id, uint64_t *seq)
{
	(void)s;
	(void)id;
	(void)seq;
	return 0;
}

void
sess_id_add(struct sess *s, const char *id, uint64_t seq)
{
	(void)s;
	(void)id;
	(void)seq;
}

int
sess_id_repeat(struct sess *s, struct sess_client *c, const char *id,
    struct sess_result *r)
{
	uint64_t seq;

	(void)c;
	if (id == NULL || !sess_id_find(s, id, &seq))
		return 0;
	r->seq = seq;
	r->duplicate = 1;
	return 1;
}

/* A fake session's meta is never frozen: its tree is the meta. */
cJSON *
sess_meta_thaw(const struct sess *s)
{
	return s->mtree;
}

/* Meta has room unless a test says it is full (fs.meta_full). */
int
sess_meta_room(struct sess *s, const cJSON *item, unsigned copies,
    struct sess_result *r)
{
	(void)s;
	(void)item;
	(void)copies;
	if (!fs.meta_full)
		return 1;
	sess_result_err(r, "RATE_LIMITED", 429, "%s", "meta is full");
	return 0;
}

void
sess_result_err(struct sess_result *r, const char *code, int http,
    const char *fmt, ...)
{
	va_list ap;

	r->code = code;
	r->http = http;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

static void
fake_sess_init(struct wk *wk)
{
	memset(&fs, 0, sizeof(fs));
	fs.s.wk = wk;
	fs.s.mtree = cJSON_CreateObject();
	fs.log = cJSON_CreateArray();
	snprintf(fs.s.agent_id, sizeof(fs.s.agent_id), "agent-1");
}

static void
fake_sess_free(void)
{
	cJSON_Delete(fs.s.mtree);
	cJSON_Delete(fs.log);
}

/* The n-th logged event of type (0 first), or NULL. */
static cJSON *
fake_logged(const char *type, int n)
{
	cJSON *e;

	cJSON_ArrayForEach(e, fs.log)
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "type")), type) == 0 && n-- == 0)
			return e;
	return NULL;
}

static int
fake_count(const char *type)
{
	int n = 0;

	while (fake_logged(type, n) != NULL)
		n++;
	return n;
}

#endif
