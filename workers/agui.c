/*
 * PROVISIONAL: the routing is in place; the translation is written next
 * (issue 20).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/store.h"
#include "adapt.h"
#include "conn.h"
#include "route.h"
#include "agui.h"

static char *
agui_chunks(struct conn *c, const struct evt *e, size_t *len, int *end)
{
	(void)c;
	(void)e;
	*len = 0;
	*end = 1;
	return NULL;
}

static void
agui_reply(struct conn *c, struct sess *s, const struct sess_result *r)
{
	(void)s;
	(void)r;
	conn_http_error(c, 501, "INTERNAL", "not yet");
}

static void
agui_free(void *st)
{
	free(st);
}

const struct adapt_ops agui_adapt = {
	.name = "agui",
	.chunks = agui_chunks,
	.reply = agui_reply,
	.free = agui_free,
};

int
agui_path(const struct conn *c)
{
	const char *p = c->hp.req.path;

	return strcmp(p, "/api/agui") == 0 || strncmp(p, "/api/agui/", 9 + 1) == 0;
}

int
agui_session(struct conn *c, char *sid, size_t sidlen, int *create)
{
	*create = 0;
	snprintf(sid, sidlen, "%s", c->ic.session);
	return store_valid_id(sid);
}

void
agui_http(struct conn *c)
{
	conn_http_error(c, 501, "INTERNAL", "not yet");
}
