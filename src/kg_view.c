/*
 * Views of a knowledge graph (see parley/kg.h): the snapshot that a load
 * restores before folding the log's tail, and the JSON and Markdown
 * exports.  A snapshot holds every slot (tombstones too) with every
 * stamp, in key order, so two graphs in the same state print the same
 * bytes and restore + fold == fold.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kg.h"
#include "parley/util.h"
#include "kg_int.h"

#define KG_SNAP_VERSION	1

static cJSON *
kg_stamp_json(const struct kg_stamp *st)
{
	cJSON	*a;

	if ((a = cJSON_CreateArray()) == NULL)
		return NULL;
	cJSON_AddItemToArray(a, cJSON_CreateNumber((double)st->hlc));
	cJSON_AddItemToArray(a, cJSON_CreateString(st->origin ? st->origin :
	    ""));
	cJSON_AddItemToArray(a, cJSON_CreateNumber((double)st->idx));
	if (cJSON_GetArraySize(a) != 3) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

static int
kg_add_stamp(cJSON *o, const char *name, const struct kg_stamp *st)
{
	cJSON	*a;

	if (st->hlc == 0)
		return 0;
	if ((a = kg_stamp_json(st)) == NULL)
		return -1;
	cJSON_AddItemToObject(o, name, a);
	return 0;
}

/* A register's value as JSON: null when unset. */
static cJSON *
kg_fv_value(const struct kg_fv *fv)
{
	cJSON	*a;
	size_t	 i;

	switch (fv->t) {
	case KG_V_STR:
		return cJSON_CreateString(fv->s);
	case KG_V_NUM:
	case KG_V_BOOL:
		return cJSON_CreateNumber(fv->num);
	case KG_V_LIST:
		if ((a = cJSON_CreateArray()) == NULL)
			return NULL;
		for (i = 0; i < fv->n; i++)
			cJSON_AddItemToArray(a, cJSON_CreateString(fv->list[i]));
		if ((size_t)cJSON_GetArraySize(a) != fv->n) {
			cJSON_Delete(a);
			return NULL;
		}
		return a;
	default:
		return cJSON_CreateNull();
	}
}

static cJSON *
kg_slot_json(const struct kg_entity *e)
{
	const struct kg_kdesc	*kd = &kg_kinds[e->kind];
	cJSON			*o, *f, *x, *it, *sts;
	size_t			 i, j, s;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (cJSON_AddStringToObject(o, "k", kd->name) == NULL ||
	    cJSON_AddStringToObject(o, "key", e->key) == NULL ||
	    (e->kind == KG_RELATIONSHIP &&
	    (cJSON_AddStringToObject(o, "to", e->to) == NULL ||
	    cJSON_AddStringToObject(o, "type", e->type) == NULL)) ||
	    cJSON_AddNumberToObject(o, "seq", (double)e->seq) == NULL ||
	    kg_add_stamp(o, "rec", &e->rec) == -1 ||
	    kg_add_stamp(o, "del", &e->del) == -1 ||
	    kg_add_stamp(o, "stale", &e->stale) == -1 ||
	    (e->stale_hash != NULL &&
	    cJSON_AddStringToObject(o, "staleHash", e->stale_hash) == NULL) ||
	    (f = cJSON_AddObjectToObject(o, "f")) == NULL)
		goto fail;
	for (i = 0; i < kd->nf; i++) {
		const struct kg_fv *fv = &e->fv[i];

		if (kd->f[i].type == KG_F_SET) {
			if (fv->ni == 0)
				continue;
			if ((x = cJSON_AddArrayToObject(f, kd->f[i].name)) ==
			    NULL)
				goto fail;
			for (j = 0; j < fv->ni; j++) {
				if ((it = cJSON_CreateArray()) == NULL)
					goto fail;
				cJSON_AddItemToArray(x, it);
				if ((sts = cJSON_CreateArray()) == NULL)
					goto fail;
				cJSON_AddItemToArray(it, cJSON_CreateString(
				    fv->items[j].val));
				cJSON_AddItemToArray(it, sts);
				for (s = 0; s < fv->items[j].nst; s++)
					cJSON_AddItemToArray(sts, kg_stamp_json(
					    &fv->items[j].st[s]));
				if (cJSON_GetArraySize(it) != 2 ||
				    (size_t)cJSON_GetArraySize(sts) !=
				    fv->items[j].nst)
					goto fail;
			}
			continue;
		}
		if (fv->st.hlc == 0)
			continue;
		if ((x = cJSON_AddArrayToObject(f, kd->f[i].name)) == NULL)
			goto fail;
		cJSON_AddItemToArray(x, kg_stamp_json(&fv->st));
		cJSON_AddItemToArray(x, kg_fv_value(fv));
		if (cJSON_GetArraySize(x) != 2)
			goto fail;
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

char *
kg_snapshot(const struct kg *g, size_t *len)
{
	struct kg_entity	**all;
	cJSON			 *o, *ents, *e;
	char			 *s;
	size_t			  n, i, k;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (cJSON_AddNumberToObject(o, "v", KG_SNAP_VERSION) == NULL ||
	    cJSON_AddStringToObject(o, "project", g->project) == NULL ||
	    cJSON_AddNumberToObject(o, "seq", (double)g->seq) == NULL ||
	    cJSON_AddNumberToObject(o, "hlc", (double)g->hlc) == NULL ||
	    cJSON_AddNumberToObject(o, "batches", (double)g->batches) ==
	    NULL ||
	    (ents = cJSON_AddArrayToObject(o, "entities")) == NULL)
		goto fail;
	for (k = 0; k < KG_NKINDS; k++) {
		all = kg_sorted(g, (enum kg_kind)k, &n);
		for (i = 0; i < n; i++) {
			if ((e = kg_slot_json(all[i])) == NULL)
				goto fail;
			cJSON_AddItemToArray(ents, e);
		}
	}
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (s != NULL && len != NULL)
		*len = strlen(s);
	return s;
fail:
	cJSON_Delete(o);
	return NULL;
}

/* --- restore --- */

static int
kg_u64(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
	    v->valuedouble >= (double)KG_HLC_LIMIT ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return -1;
	*out = (uint64_t)v->valuedouble;
	return 0;
}

/* A stamp [hlc, origin, idx] (absent: zero when opt). */
static int
kg_stamp_read(struct kg *g, const cJSON *v, int opt, struct kg_stamp *st)
{
	uint64_t	hlc, idx;
	const cJSON	*o;

	st->hlc = 0;
	st->origin = "";
	st->idx = 0;
	if (v == NULL && opt)
		return 0;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3 ||
	    kg_u64(cJSON_GetArrayItem(v, 0), &hlc) == -1 || hlc == 0 ||
	    !cJSON_IsString(o = cJSON_GetArrayItem(v, 1)) ||
	    kg_u64(cJSON_GetArrayItem(v, 2), &idx) == -1 || idx > UINT32_MAX)
		return -1;
	if ((st->origin = kg_intern(g, o->valuestring)) == NULL)
		return -1;
	st->hlc = hlc;
	st->idx = (uint32_t)idx;
	return 0;
}

static int
kg_restore_slot(struct kg *g, const cJSON *o, char *err, size_t errlen)
{
	const cJSON		*k = cJSON_GetObjectItemCaseSensitive(o, "k");
	const cJSON		*key = cJSON_GetObjectItemCaseSensitive(o, "key");
	const cJSON		*to = cJSON_GetObjectItemCaseSensitive(o, "to");
	const cJSON		*ty = cJSON_GetObjectItemCaseSensitive(o, "type");
	const cJSON		*sh, *f, *x, *it, *s;
	const struct kg_kdesc	*kd;
	struct kg_entity	*e;
	struct kg_stamp		 st;
	uint64_t		 seq;
	size_t			 kind;
	int			 fi;

	for (kind = 0; kind < KG_NKINDS; kind++)
		if (cJSON_IsString(k) &&
		    strcmp(k->valuestring, kg_kinds[kind].name) == 0)
			break;
	if (kind == KG_NKINDS || !cJSON_IsString(key) ||
	    (kind == KG_RELATIONSHIP &&
	    (!cJSON_IsString(to) || !cJSON_IsString(ty)))) {
		snprintf(err, errlen, "an entity without a kind or key");
		return -1;
	}
	kd = &kg_kinds[kind];
	if (kg_slot(g, (enum kg_kind)kind, key->valuestring,
	    kind == KG_RELATIONSHIP ? to->valuestring : NULL,
	    kind == KG_RELATIONSHIP ? ty->valuestring : NULL) != NULL) {
		snprintf(err, errlen, "%s \"%.64s\" is there twice", kd->name,
		    key->valuestring);
		return -1;
	}
	if ((e = kg_slot_make(g, (enum kg_kind)kind, key->valuestring,
	    kind == KG_RELATIONSHIP ? to->valuestring : NULL,
	    kind == KG_RELATIONSHIP ? ty->valuestring : NULL)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (kg_u64(cJSON_GetObjectItemCaseSensitive(o, "seq"), &seq) == -1 ||
	    kg_stamp_read(g, cJSON_GetObjectItemCaseSensitive(o, "rec"), 1,
	    &e->rec) == -1 ||
	    kg_stamp_read(g, cJSON_GetObjectItemCaseSensitive(o, "del"), 1,
	    &e->del) == -1 ||
	    kg_stamp_read(g, cJSON_GetObjectItemCaseSensitive(o, "stale"), 1,
	    &e->stale) == -1) {
		snprintf(err, errlen, "%s \"%.64s\": a bad seq or stamp",
		    kd->name, key->valuestring);
		return -1;
	}
	e->seq = seq;
	sh = cJSON_GetObjectItemCaseSensitive(o, "staleHash");
	if (cJSON_IsString(sh) &&
	    (e->stale_hash = strdup(sh->valuestring)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	f = cJSON_GetObjectItemCaseSensitive(o, "f");
	cJSON_ArrayForEach(x, f) {
		if ((fi = kg_fidx((enum kg_kind)kind, x->string)) < 0 ||
		    !cJSON_IsArray(x))
			goto bad;
		if (kd->f[fi].type != KG_F_SET) {
			if (cJSON_GetArraySize(x) != 2 ||
			    kg_stamp_read(g, cJSON_GetArrayItem(x, 0), 0,
			    &st) == -1 ||
			    kg_write(e, (size_t)fi, cJSON_GetArrayItem(x, 1),
			    &st) == -1)
				goto bad;
			continue;
		}
		cJSON_ArrayForEach(it, x) {
			const cJSON *v = cJSON_GetArrayItem(it, 0);

			if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 ||
			    !cJSON_IsString(v))
				goto bad;
			cJSON_ArrayForEach(s, cJSON_GetArrayItem(it, 1)) {
				if (kg_stamp_read(g, s, 0, &st) == -1 ||
				    kg_set_add(&e->fv[fi], v->valuestring,
				    &st) == -1)
					goto bad;
			}
		}
		if (kg_set_view(e, (size_t)fi) == -1)
			goto bad;
	}
	kg_relive(g, e);
	return 0;
bad:
	snprintf(err, errlen, "%s \"%.64s\": a bad field", kd->name,
	    key->valuestring);
	return -1;
}

struct kg *
kg_restore(const char *json, size_t len, char *err, size_t errlen)
{
	cJSON		*o;
	const cJSON	*p, *ents, *it;
	struct kg	*g = NULL;
	uint64_t	 v;

	if (errlen > 0)
		err[0] = '\0';
	if ((o = cJSON_ParseWithLength(json, len)) == NULL) {
		snprintf(err, errlen, "a snapshot must be JSON");
		return NULL;
	}
	p = cJSON_GetObjectItemCaseSensitive(o, "project");
	ents = cJSON_GetObjectItemCaseSensitive(o, "entities");
	if (kg_u64(cJSON_GetObjectItemCaseSensitive(o, "v"), &v) == -1 ||
	    v != KG_SNAP_VERSION) {
		snprintf(err, errlen, "not a version %d snapshot",
		    KG_SNAP_VERSION);
		goto fail;
	}
	if (!cJSON_IsString(p) || !cJSON_IsArray(ents)) {
		snprintf(err, errlen, "a snapshot needs project and entities");
		goto fail;
	}
	if ((g = kg_new(p->valuestring)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (kg_u64(cJSON_GetObjectItemCaseSensitive(o, "seq"), &g->seq) ==
	    -1 ||
	    kg_u64(cJSON_GetObjectItemCaseSensitive(o, "hlc"), &g->hlc) ==
	    -1 ||
	    kg_u64(cJSON_GetObjectItemCaseSensitive(o, "batches"),
	    &g->batches) == -1) {
		snprintf(err, errlen, "a snapshot needs seq, hlc and batches "
		    "(integers)");
		goto fail;
	}
	cJSON_ArrayForEach(it, ents)
		if (kg_restore_slot(g, it, err, errlen) == -1)
			goto fail;
	cJSON_Delete(o);
	return g;
fail:
	kg_free(g);
	cJSON_Delete(o);
	return NULL;
}

/* --- exports --- */

static cJSON *
kg_val_json(const struct kg_val *v)
{
	cJSON	*a;
	size_t	 i;

	switch (v->type) {
	case KG_V_STR:
		return cJSON_CreateString(v->str);
	case KG_V_NUM:
		return cJSON_CreateNumber(v->num);
	case KG_V_BOOL:
		return cJSON_CreateBool(v->num != 0);
	case KG_V_LIST:
		if ((a = cJSON_CreateArray()) == NULL)
			return NULL;
		for (i = 0; i < v->n; i++)
			cJSON_AddItemToArray(a, cJSON_CreateString(v->list[i]));
		if ((size_t)cJSON_GetArraySize(a) != v->n) {
			cJSON_Delete(a);
			return NULL;
		}
		return a;
	default:
		return NULL;
	}
}

/* The public fields that are set; with_meta adds kind and seq. */
static cJSON *
kg_pub_json(const struct kg_entity *e, int with_meta)
{
	const char *const	*f = kg_fields(e->kind);
	struct kg_val		 v;
	cJSON			*o, *x;
	size_t			 i;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (with_meta && cJSON_AddStringToObject(o, "kind",
	    kg_kind_name(e->kind)) == NULL)
		goto fail;
	for (i = 0; f[i] != NULL; i++) {
		if (kg_field(e, f[i], &v) == -1)
			goto fail;
		/* stale only when it is; seq is where in the log, not
		 * knowledge: left out of exports so equal graphs export
		 * equal text whatever order their batches came in */
		if ((strcmp(f[i], "stale") == 0 && v.num == 0) ||
		    (strcmp(f[i], "seq") == 0 && !with_meta) ||
		    v.type == KG_V_NONE)
			continue;
		if ((x = kg_val_json(&v)) == NULL)
			goto fail;
		cJSON_AddItemToObject(o, f[i], x);
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

cJSON *
kg_entity_json(const struct kg_entity *e)
{
	return kg_pub_json(e, 1);
}

cJSON *
kg_export_json(const struct kg *g)
{
	struct kg_entity	**all;
	cJSON			 *o, *a, *x;
	size_t			  n, i, k;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (cJSON_AddStringToObject(o, "projectId", g->project) == NULL ||
	    cJSON_AddNumberToObject(o, "seq", (double)g->seq) == NULL)
		goto fail;
	for (k = 0; k < KG_NKINDS; k++) {
		if ((a = cJSON_AddArrayToObject(o, kg_kinds[k].plural)) == NULL)
			goto fail;
		all = kg_sorted(g, (enum kg_kind)k, &n);
		for (i = 0; i < n; i++) {
			if (!all[i]->live)
				continue;
			if ((x = kg_pub_json(all[i], 0)) == NULL)
				goto fail;
			cJSON_AddItemToArray(a, x);
		}
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

struct kg_md {
	char	*buf;
	size_t	 len, cap;
	int	 failed;
};

static void
kg_md(struct kg_md *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
kg_md(struct kg_md *m, const char *fmt, ...)
{
	va_list	 ap;
	char	 small[256], *s = small;
	int	 n;

	if (m->failed)
		return;
	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		m->failed = 1;
		return;
	}
	if ((size_t)n >= sizeof(small)) {
		if ((s = malloc((size_t)n + 1)) == NULL) {
			m->failed = 1;
			return;
		}
		va_start(ap, fmt);
		vsnprintf(s, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	if (util_append(&m->buf, &m->len, &m->cap, s, (size_t)n) == -1)
		m->failed = 1;
	if (s != small)
		free(s);
}

/* "Related principles" from "relatedPrinciples". */
static void
kg_md_label(const char *field, char *out, size_t len)
{
	size_t	o = 0;

	for (; *field != '\0' && o + 2 < len; field++) {
		if (*field >= 'A' && *field <= 'Z') {
			out[o++] = ' ';
			out[o++] = (char)(*field - 'A' + 'a');
		} else {
			out[o] = o == 0 && *field >= 'a' && *field <= 'z' ?
			    (char)(*field - 'a' + 'A') : *field;
			o++;
		}
	}
	out[o] = '\0';
}

static void
kg_md_entity(struct kg_md *m, const struct kg_entity *e)
{
	const char *const	*f = kg_fields(e->kind);
	struct kg_val		 v;
	char			 label[64];
	size_t			 i, j;

	if (e->kind == KG_RELATIONSHIP) {
		kg_md(m, "- `%s` **%s** `%s`", e->key, e->type, e->to);
		if (kg_field(e, "description", &v) == 0 && v.type == KG_V_STR)
			kg_md(m, ": %s", v.str);
		if (kg_field(e, "confidence", &v) == 0 && v.type == KG_V_NUM)
			kg_md(m, " (confidence %g)", v.num);
		if (kg_is_stale(e))
			kg_md(m, " *(stale)*");
		kg_md(m, "\n");
		return;
	}
	kg_md(m, "### %s\n\n", e->key);
	if (kg_field(e, "description", &v) == 0 && v.type == KG_V_STR &&
	    v.str[0] != '\0')
		kg_md(m, "%s\n\n", v.str);
	if (e->kind == KG_FILE && kg_field(e, "summary", &v) == 0 &&
	    v.type == KG_V_STR && v.str[0] != '\0')
		kg_md(m, "%s\n\n", v.str);
	for (i = 1; f[i] != NULL; i++) {
		if (strcmp(f[i], "description") == 0 ||
		    strcmp(f[i], "summary") == 0 || strcmp(f[i], "seq") == 0 ||
		    kg_field(e, f[i], &v) == -1 || v.type == KG_V_NONE)
			continue;
		if (strcmp(f[i], "stale") == 0) {
			if (v.num != 0)
				kg_md(m, "- **Stale**: its file changed since "
				    "this was recorded\n");
			continue;
		}
		kg_md_label(f[i], label, sizeof(label));
		kg_md(m, "- %s: ", label);
		if (v.type == KG_V_STR)
			kg_md(m, "%s", v.str);
		else if (v.type == KG_V_NUM)
			kg_md(m, "%.17g", v.num);
		else
			for (j = 0; j < v.n; j++)
				kg_md(m, "%s`%s`", j ? ", " : "", v.list[j]);
		kg_md(m, "\n");
	}
	kg_md(m, "\n");
}

char *
kg_export_md(const struct kg *g)
{
	static const char *const titles[KG_NKINDS] = { "Principles",
	    "Patterns", "Decisions", "Files", "Relationships" };
	struct kg_entity	**all;
	struct kg_md		  m;
	size_t			  n, i, k;

	memset(&m, 0, sizeof(m));
	kg_md(&m, "# Knowledge of %s\n\n", g->project);
	kg_md(&m, "As of log seq %llu: %zu principles, %zu patterns, %zu "
	    "decisions, %zu files, %zu relationships.\n\n",
	    (unsigned long long)g->seq, g->k[KG_PRINCIPLE].live,
	    g->k[KG_PATTERN].live, g->k[KG_DECISION].live, g->k[KG_FILE].live,
	    g->k[KG_RELATIONSHIP].live);
	for (k = 0; k < KG_NKINDS; k++) {
		kg_md(&m, "## %s\n\n", titles[k]);
		if (g->k[k].live == 0) {
			kg_md(&m, "None.\n\n");
			continue;
		}
		all = kg_sorted(g, (enum kg_kind)k, &n);
		for (i = 0; i < n; i++)
			if (all[i]->live)
				kg_md_entity(&m, all[i]);
		if (k == KG_RELATIONSHIP)
			kg_md(&m, "\n");
	}
	if (m.failed) {
		free(m.buf);
		return NULL;
	}
	return m.buf;
}
