/*
 * Client-side MCP tools: registration and lookup.  Running one is
 * tools.c's (an mcp_call logged and waited for like an approval); this
 * module only says which tools a session's clients offer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/config.h"
#include "parley/proto.h"
#include "parley/util.h"
#include "ctool.h"
#include "llm.h"
#include "sess.h"
#include "wk.h"

#define CTOOL_MAX_NAME		64		/* SERVER__TOOL, as the models allow */
#define CTOOL_MAX_SERVER	32		/* as an mcp-server NAME */
#define CTOOL_MAX_DESC		4096
#define CTOOL_MAX_SCHEMA	(16 * 1024)	/* inputSchema, as JSON text */

/* [A-Za-z0-9_-]{1,max}: a name every model API takes as it is. */
static int
name_ok(const char *s, size_t max)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static int
is_config_server(struct sess *s, const char *name)
{
	const struct cfg_mcp_server *m;

	TAILQ_FOREACH(m, &s->wk->conf->mcp_servers, entry)
		if (strcmp(m->name, name) == 0)
			return 1;
	return 0;
}

/* The entry of list named full_name, or NULL. */
static const cJSON *
ctool_find_in(const cJSON *list, const char *full_name)
{
	const cJSON *e;
	const char *n;

	if (full_name == NULL)
		return NULL;
	cJSON_ArrayForEach(e, list)
		if ((n = cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "fullName"))) != NULL && strcmp(n, full_name) == 0)
			return e;
	return NULL;
}

/*
 * One mcp_tools entry, checked, as meta keeps it (NULL with r's error
 * set).  servers collects the server names the message replaces.
 */
static cJSON *
entry_make(struct sess *s, const cJSON *t, int i, cJSON *servers,
    struct sess_result *r)
{
	const char *server = NULL, *name = NULL, *desc = NULL;
	const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t,
	    "inputSchema"), *ann = cJSON_GetObjectItemCaseSensitive(t,
	    "annotations"), *h;
	char full[CTOOL_MAX_NAME * 2 + 3], msg[200], *txt;
	cJSON *e;

	if (!cJSON_IsObject(t)) {
		sess_result_err(r, "BAD_REQUEST", 400, "tools[%d] must be an "
		    "object {server, name, description, inputSchema}", i);
		return NULL;
	}
	if (proto_str(t, "server", 1, CTOOL_MAX_SERVER, &server, msg,
	    sizeof(msg)) == -1 || proto_str(t, "name", 1, CTOOL_MAX_NAME,
	    &name, msg, sizeof(msg)) == -1 || proto_str(t, "description", 0,
	    CTOOL_MAX_DESC, &desc, msg, sizeof(msg)) == -1) {
		sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: %s", i, msg);
		return NULL;
	}
	snprintf(full, sizeof(full), "%s__%s", server, name);
	if (!name_ok(server, CTOOL_MAX_SERVER) || !name_ok(name,
	    CTOOL_MAX_NAME) || !name_ok(full, CTOOL_MAX_NAME)) {
		sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: server and "
		    "name must be letters, digits, '_' and '-', and "
		    "SERVER__NAME at most %d characters", i, CTOOL_MAX_NAME);
		return NULL;
	}
	if (is_config_server(s, server)) {
		sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: server "
		    "'%s' is an mcp-server of this host's configuration; name "
		    "the client's tools under another server", i, server);
		return NULL;
	}
	if (schema != NULL && !cJSON_IsObject(schema)) {
		sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: inputSchema "
		    "must be a JSON Schema object", i);
		return NULL;
	}
	if (ann != NULL && !cJSON_IsObject(ann)) {
		sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: annotations "
		    "must be an object of MCP hints (readOnlyHint, ...)", i);
		return NULL;
	}
	cJSON_ArrayForEach(h, ann)
		if (!cJSON_IsBool(h) && !cJSON_IsString(h)) {
			sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: "
			    "annotations.%.40s must be a boolean (a title a "
			    "string)", i,
			    h->string ? h->string : "?");
			return NULL;
		}
	txt = schema ? cJSON_PrintUnformatted(schema) : strdup(
	    "{\"type\":\"object\"}");
	if (txt == NULL || strlen(txt) > CTOOL_MAX_SCHEMA) {
		free(txt);
		sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: inputSchema "
		    "is longer than %d bytes", i, CTOOL_MAX_SCHEMA);
		return NULL;
	}
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "server", server);
	cJSON_AddStringToObject(e, "name", name);
	cJSON_AddStringToObject(e, "fullName", full);
	cJSON_AddStringToObject(e, "description", desc ? desc : "");
	cJSON_AddItemToObject(e, "inputSchema", schema ?
	    cJSON_Duplicate(schema, 1) : cJSON_Parse(txt));
	if (ann != NULL)
		cJSON_AddItemToObject(e, "annotations", cJSON_Duplicate(ann, 1));
	cJSON_AddStringToObject(e, "schemaJson", txt);
	free(txt);
	if (!proto_holds(servers, server))
		cJSON_AddItemToArray(servers, cJSON_CreateString(server));
	return e;
}

uint64_t
ctool_register(struct sess *s, const cJSON *msg, const char *by,
    struct sess_result *r)
{
	const cJSON *tools = cJSON_GetObjectItemCaseSensitive(msg, "tools");
	const cJSON *sv = cJSON_GetObjectItemCaseSensitive(msg, "servers");
	const cJSON *t, *old = cJSON_GetObjectItem(sess_meta(s), "clientTools");
	cJSON *list, *servers, *e, *shown, *b;
	uint64_t seq;
	int i = 0;

	if (!cJSON_IsArray(tools)) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "field 'tools' "
		    "must be an array of {server, name, description, "
		    "inputSchema, annotations}; an empty one withdraws");
		return 0;
	}
	if (sv != NULL && !cJSON_IsArray(sv)) {
		sess_result_err(r, "BAD_REQUEST", 400, "%s", "field 'servers' "
		    "must be an array of the server names to replace");
		return 0;
	}
	servers = cJSON_CreateArray();
	cJSON_ArrayForEach(t, sv) {
		if (!cJSON_IsString(t) || !name_ok(t->valuestring,
		    CTOOL_MAX_SERVER)) {
			cJSON_Delete(servers);
			sess_result_err(r, "BAD_REQUEST", 400, "%s", "field "
			    "'servers' must hold server names (letters, "
			    "digits, '_' and '-')");
			return 0;
		}
		if (!proto_holds(servers, t->valuestring))
			cJSON_AddItemToArray(servers, cJSON_CreateString(
			    t->valuestring));
	}
	list = cJSON_CreateArray();
	cJSON_ArrayForEach(t, tools) {
		if ((e = entry_make(s, t, i++, servers, r)) == NULL)
			goto bad;
		if (ctool_find_in(list, cJSON_GetStringValue(
		    cJSON_GetObjectItem(e, "fullName"))) != NULL) {
			cJSON_Delete(e);
			sess_result_err(r, "BAD_REQUEST", 400, "tools[%d]: "
			    "server and name repeat an earlier entry", i - 1);
			goto bad;
		}
		cJSON_AddItemToArray(list, e);
	}
	/* What the message does not replace stays registered. */
	cJSON_ArrayForEach(t, old) {
		const char *srv = cJSON_GetStringValue(cJSON_GetObjectItem(t,
		    "server"));

		if (srv != NULL && cJSON_GetArraySize(tools) + (sv ? 1 : 0) >
		    0 && !proto_holds(servers, srv))
			cJSON_AddItemToArray(list, cJSON_Duplicate(t, 1));
	}
	cJSON_Delete(servers);
	servers = NULL;
	if (cJSON_GetArraySize(list) > CTOOL_MAX) {
		sess_result_err(r, "BAD_REQUEST", 400, "a session may register "
		    "at most %d client tools; withdraw some first", CTOOL_MAX);
		goto bad;
	}
	/* The log shows what the model sees; schemaJson is meta's. */
	shown = cJSON_Duplicate(list, 1);
	cJSON_ArrayForEach(e, shown) {
		cJSON_DeleteItemFromObject(e, "schemaJson");
		cJSON_DeleteItemFromObject(e, "fullName");
	}
	b = cJSON_CreateObject();
	cJSON_AddItemToObject(b, "tools", shown);
	cJSON_AddStringToObject(b, "by", by);
	if ((seq = sess_emit(s, "client_tools", b)) == 0) {
		sess_result_err(r, "OVERLOADED", 503, "%s", "the registration "
		    "could not be logged; nothing changed, retry");
		goto bad;
	}
	proto_set(sess_meta(s), "clientTools", list);
	sess_meta_save(s);
	return seq;
bad:
	cJSON_Delete(servers);
	cJSON_Delete(list);
	return 0;
}

const cJSON *
ctool_find(struct sess *s, const char *full_name)
{
	return ctool_find_in(cJSON_GetObjectItem(sess_meta(s), "clientTools"),
	    full_name);
}

size_t
ctool_defs(struct sess *s, struct llm_tool_def *defs, size_t max,
    int (*taken)(void *, const char *), void *arg)
{
	const cJSON *e;
	size_t n = 0;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(sess_meta(s),
	    "clientTools")) {
		const char *full = cJSON_GetStringValue(cJSON_GetObjectItem(e,
		    "fullName"));

		if (n >= max || full == NULL || taken(arg, full))
			continue;
		defs[n].name = full;
		defs[n].description = cJSON_GetStringValue(
		    cJSON_GetObjectItem(e, "description"));
		defs[n].schema_json = cJSON_GetStringValue(
		    cJSON_GetObjectItem(e, "schemaJson"));
		n++;
	}
	return n;
}

/* The text of an MCP CallToolResult's content: text items joined by
 * newlines, any other item as its JSON. */
static char *
content_text(const cJSON *content)
{
	const cJSON *it, *tx;
	char *out = NULL, *j;
	size_t len = 0, cap = 0;

	cJSON_ArrayForEach(it, content) {
		tx = cJSON_GetObjectItemCaseSensitive(it, "text");
		j = cJSON_IsString(tx) ? NULL : cJSON_PrintUnformatted(it);
		if ((len > 0 && util_append(&out, &len, &cap, "\n", 1) == -1) ||
		    util_append(&out, &len, &cap, j ? j : tx->valuestring,
		    strlen(j ? j : tx->valuestring)) == -1) {
			free(j);
			free(out);
			return NULL;
		}
		free(j);
	}
	return out ? out : strdup("");
}

char *
ctool_result_text(const cJSON *msg, int *is_error, char *err, size_t len)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(msg, "result");
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "error"), *m;

	if ((res == NULL) == (e == NULL)) {
		snprintf(err, len, "an mcp_result carries exactly one of "
		    "'result' (what the tool returned) and 'error' (why it "
		    "failed)");
		return NULL;
	}
	*is_error = e != NULL;
	if (e != NULL) {
		m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e,
		    "message") : e;
		if (!cJSON_IsString(m)) {
			snprintf(err, len, "field 'error' must be a string or "
			    "an object with a string 'message'");
			return NULL;
		}
		return strdup(m->valuestring);
	}
	if (cJSON_IsString(res))
		return strdup(res->valuestring);
	/* An MCP CallToolResult, as the client's own MCP server gave it. */
	if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(res, "content"))) {
		*is_error = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res,
		    "isError"));
		return content_text(cJSON_GetObjectItemCaseSensitive(res,
		    "content"));
	}
	return cJSON_PrintUnformatted(res);
}
