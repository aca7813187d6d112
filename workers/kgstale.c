/*
 * Staleness of a project's knowledge (kgstale.h): each live file
 * understanding's recorded hash against the one the host's directory
 * index holds for its path (index_file_hash: relative to an index root,
 * the first root in parleyd.conf's order that holds it, or absolute).
 *
 * Judged: an understanding with a hash whose path the index holds as a
 * text file (a change: the index's hash), or whose path lay in an indexed
 * directory and is gone from disk (a removal: hash "").  Never judged: an
 * understanding recorded without a hash, or one whose path the index does
 * not hold (not indexed, excluded, binary, outside every indexed
 * directory, no index at all).
 *
 * An understanding already stale is reported again only when the hash it
 * went stale at is known (kg_field "staleHash") and differs from the
 * index's: a second change while the first is not yet reviewed.  The
 * entities of a body are kg_refs of the path, in its order (kind, then
 * key): the understanding itself (kind "file"), every entity whose
 * location or locations names the path, and every relationship from or
 * to it (named by from, with "to" and "type": a relationship's key).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "parley/kg.h"
#include "parley/log.h"
#include "index.h"
#include "kgstale.h"

/*
 * Entities named in one body, so the log's events stay bounded: past it
 * the body says "truncated" and the rest are not marked (the
 * understanding always is: the fold marks the file at path itself).
 */
#define KGSTALE_ENTITIES_MAX	1024

uint64_t
kgstale_generation(struct wk *wk)
{
	return index_generation(wk);
}

/* One entity as a body names it; a relationship also by to and type. */
static cJSON *
entity_ref(const struct kg_entity *e)
{
	cJSON *o = cJSON_CreateObject();
	struct kg_val v;
	enum kg_kind k = kg_entity_kind(e);

	if (o == NULL)
		return NULL;
	cJSON_AddStringToObject(o, "kind", kg_kind_name(k));
	cJSON_AddStringToObject(o, "name", kg_entity_name(e));
	if (k == KG_RELATIONSHIP) {
		if (kg_field(e, "to", &v) == 0 && v.type == KG_V_STR)
			cJSON_AddStringToObject(o, "to", v.str);
		if (kg_field(e, "type", &v) == 0 && v.type == KG_V_STR)
			cJSON_AddStringToObject(o, "type", v.str);
	}
	return o;
}

/* The body for path, now at hash (was: recorded); NULL out of memory. */
static cJSON *
body_new(const struct kg *g, const char *path, const char *hash,
    const char *was)
{
	const struct kg_entity **refs;
	cJSON *b, *a, *e;
	size_t n, i;

	if ((refs = calloc(KGSTALE_ENTITIES_MAX, sizeof(*refs))) == NULL)
		return NULL;
	n = kg_refs(g, path, refs, KGSTALE_ENTITIES_MAX);
	if ((b = cJSON_CreateObject()) == NULL) {
		free(refs);
		return NULL;
	}
	cJSON_AddStringToObject(b, "path", path);
	cJSON_AddStringToObject(b, "hash", hash);
	cJSON_AddStringToObject(b, "was", was);
	a = cJSON_AddArrayToObject(b, "entities");
	for (i = 0; a != NULL && i < n && i < KGSTALE_ENTITIES_MAX; i++) {
		if ((e = entity_ref(refs[i])) == NULL)
			break;
		cJSON_AddItemToArray(a, e);
	}
	free(refs);
	if (a == NULL || i < (n < KGSTALE_ENTITIES_MAX ? n :
	    KGSTALE_ENTITIES_MAX)) {
		cJSON_Delete(b);
		return NULL;
	}
	if (n > KGSTALE_ENTITIES_MAX) {
		cJSON_AddBoolToObject(b, "truncated", 1);
		log_warnx("kgstale: %s: %zu entities refer to %s; the first %d "
		    "are marked stale", kg_project(g), n, path,
		    KGSTALE_ENTITIES_MAX);
	}
	return b;
}

/*
 * Whether file understanding e is to be reported now: its recorded hash
 * in *was, the index's in cur ("" for a removed file).
 */
static int
judge(struct wk *wk, const struct kg_entity *e, const char **was,
    char cur[65])
{
	struct kg_val h, st, sh;
	int rc;

	if (kg_field(e, "hash", &h) != 0 || h.type != KG_V_STR ||
	    h.str[0] == '\0')
		return 0;
	*was = h.str;
	if ((rc = index_file_hash(wk, kg_entity_name(e), cur)) == 0)
		return 0;
	if (rc == 1 && strcasecmp(cur, h.str) == 0)
		return 0;
	if (kg_field(e, "stale", &st) == 0 && st.type == KG_V_BOOL &&
	    st.num != 0) {
		/* Stale already: again only at another hash, when known. */
		if (kg_field(e, "staleHash", &sh) != 0 ||
		    sh.type != KG_V_STR || strcasecmp(sh.str, cur) == 0)
			return 0;
	}
	return 1;
}

cJSON *
kgstale_check(struct wk *wk, const struct kg *g)
{
	const struct kg_entity **files;
	const char *was;
	char cur[65];
	cJSON *out = NULL, *b;
	size_t n, i;

	if (g == NULL || (n = kg_all(g, KG_FILE, NULL, 0)) == 0 ||
	    index_generation(wk) == 0)
		return NULL;
	if ((files = calloc(n, sizeof(*files))) == NULL) {
		log_warnx("kgstale: %s: out of memory checking %zu files",
		    kg_project(g), n);
		return NULL;
	}
	n = kg_all(g, KG_FILE, files, n);
	for (i = 0; i < n; i++) {
		if (!judge(wk, files[i], &was, cur))
			continue;
		if ((out == NULL && (out = cJSON_CreateArray()) == NULL) ||
		    (b = body_new(g, kg_entity_name(files[i]), cur,
		    was)) == NULL) {
			/* The next check (a second on) finds it again. */
			log_warnx("kgstale: %s: out of memory", kg_project(g));
			break;
		}
		cJSON_AddItemToArray(out, b);
	}
	free(files);
	if (out != NULL && cJSON_GetArraySize(out) == 0) {
		cJSON_Delete(out);
		out = NULL;
	}
	return out;
}
