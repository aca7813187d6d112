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

/*
 * A snapshot is written directly, not through a cJSON tree: a 100,000
 * entity graph is tens of MB of JSON and a tree of it costs seconds in
 * malloc alone.  Origins are listed once, sorted (so the text does not
 * depend on the order they were first seen), and stamps name them by
 * index: [hlc, origin, idx].
 */
struct kg_w {
	char		*buf;
	size_t		 len, cap;
	int		 failed;
	const char	**origins;	/* sorted */
	size_t		 norigins;
};

static void
kg_w_raw(struct kg_w *w, const char *s, size_t n)
{
	if (!w->failed && util_append(&w->buf, &w->len, &w->cap, s, n) == -1)
		w->failed = 1;
}

static void
kg_w_str(struct kg_w *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const char	*run = s;
	char		 esc[8];

	kg_w_raw(w, "\"", 1);
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		kg_w_raw(w, run, (size_t)(s - run));
		esc[0] = '\\';
		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			kg_w_raw(w, esc, 2);
		} else {
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			kg_w_raw(w, esc, 6);
		}
		run = s + 1;
	}
	kg_w_raw(w, run, (size_t)(s - run));
	kg_w_raw(w, "\"", 1);
}

static void
kg_w_fmt(struct kg_w *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
kg_w_fmt(struct kg_w *w, const char *fmt, ...)
{
	va_list	ap;
	char	buf[64];
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		w->failed = 1;
	else
		kg_w_raw(w, buf, (size_t)n);
}

static int
kg_strp_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t
kg_w_origin(const struct kg_w *w, const char *o)
{
	size_t	lo = 0, hi = w->norigins, mid;
	int	c;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if ((c = strcmp(w->origins[mid], o)) == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;	/* "" is origins[0] */
}

static void
kg_w_stamp(struct kg_w *w, const struct kg_stamp *st)
{
	kg_w_fmt(w, "[%llu,%zu,%u]", (unsigned long long)st->hlc,
	    kg_w_origin(w, st->origin ? st->origin : ""), st->idx);
}

static void
kg_w_slot(struct kg_w *w, const struct kg_entity *e)
{
	const struct kg_kdesc	*kd = &kg_kinds[e->kind];
	const struct kg_stamp	*sts[3] = { &e->rec, &e->del, &e->stale };
	static const char *const stn[3] = { "rec", "del", "stale" };
	size_t			 i, j, s;
	int			 first = 1;

	kg_w_fmt(w, "{\"k\":\"%s\",\"key\":", kd->name);
	kg_w_str(w, e->key);
	if (e->kind == KG_RELATIONSHIP) {
		kg_w_raw(w, ",\"to\":", 6);
		kg_w_str(w, e->to);
		kg_w_raw(w, ",\"type\":", 8);
		kg_w_str(w, e->type);
	}
	kg_w_fmt(w, ",\"seq\":%llu", (unsigned long long)e->seq);
	for (i = 0; i < 3; i++)
		if (sts[i]->hlc != 0) {
			kg_w_fmt(w, ",\"%s\":", stn[i]);
			kg_w_stamp(w, sts[i]);
		}
	if (e->stale_hash != NULL) {
		kg_w_raw(w, ",\"staleHash\":", 13);
		kg_w_str(w, e->stale_hash);
	}
	kg_w_raw(w, ",\"f\":{", 6);
	for (i = 0; i < kd->nf; i++) {
		const struct kg_fv *fv = &e->fv[i];

		if (kd->f[i].type == KG_F_SET ? fv->ni == 0 : fv->st.hlc == 0)
			continue;
		kg_w_fmt(w, "%s\"%s\":[", first ? "" : ",", kd->f[i].name);
		first = 0;
		if (kd->f[i].type == KG_F_SET) {
			for (j = 0; j < fv->ni; j++) {
				kg_w_raw(w, j ? ",[" : "[", j ? 2 : 1);
				kg_w_str(w, fv->items[j].val);
				kg_w_raw(w, ",[", 2);
				for (s = 0; s < fv->items[j].nst; s++) {
					if (s)
						kg_w_raw(w, ",", 1);
					kg_w_stamp(w, &fv->items[j].st[s]);
				}
				kg_w_raw(w, "]]", 2);
			}
			kg_w_raw(w, "]", 1);
			continue;
		}
		kg_w_stamp(w, &fv->st);
		kg_w_raw(w, ",", 1);
		switch (fv->t) {
		case KG_V_STR:
			kg_w_str(w, fv->s);
			break;
		case KG_V_NUM:
		case KG_V_BOOL:
			kg_w_fmt(w, "%.17g", fv->num);
			break;
		case KG_V_LIST:
			kg_w_raw(w, "[", 1);
			for (j = 0; j < fv->n; j++) {
				if (j)
					kg_w_raw(w, ",", 1);
				kg_w_str(w, fv->list[j]);
			}
			kg_w_raw(w, "]", 1);
			break;
		default:
			kg_w_raw(w, "null", 4);
			break;
		}
		kg_w_raw(w, "]", 1);
	}
	kg_w_raw(w, "}}", 2);
}

char *
kg_snapshot(const struct kg *g, size_t *len)
{
	struct kg_entity	**all;
	struct kg_w		  w;
	size_t			  n, i, k;
	int			  first = 1;

	memset(&w, 0, sizeof(w));
	if ((w.origins = calloc(g->norigins + 1, sizeof(*w.origins))) == NULL)
		return NULL;
	w.origins[0] = "";
	for (i = 0; i < g->norigins; i++)
		w.origins[i + 1] = g->origins[i];
	w.norigins = g->norigins + 1;
	qsort(w.origins, w.norigins, sizeof(*w.origins), kg_strp_cmp);
	kg_w_fmt(&w, "{\"v\":%d,\"project\":", KG_SNAP_VERSION);
	kg_w_str(&w, g->project);
	kg_w_fmt(&w, ",\"seq\":%llu", (unsigned long long)g->seq);
	kg_w_fmt(&w, ",\"hlc\":%llu", (unsigned long long)g->hlc);
	kg_w_fmt(&w, ",\"batches\":%llu", (unsigned long long)g->batches);
	kg_w_raw(&w, ",\"origins\":[", 12);
	for (i = 0; i < w.norigins; i++) {
		if (i)
			kg_w_raw(&w, ",", 1);
		kg_w_str(&w, w.origins[i]);
	}
	kg_w_raw(&w, "],\"entities\":[", 14);
	for (k = 0; k < KG_NKINDS; k++) {
		all = kg_sorted(g, (enum kg_kind)k, &n);
		for (i = 0; i < n; i++) {
			if (!first)
				kg_w_raw(&w, ",", 1);
			first = 0;
			kg_w_slot(&w, all[i]);
		}
	}
	kg_w_raw(&w, "]}", 2);
	free(w.origins);
	if (w.failed) {
		free(w.buf);
		return NULL;
	}
	if (len != NULL)
		*len = w.len;
	return w.buf;
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

/* The snapshot's origins, interned in the graph being restored. */
struct kg_rs {
	const char	**o;
	size_t		  n;
};

/* A stamp [hlc, origin index, idx] (absent: zero when opt). */
static int
kg_stamp_read(const struct kg_rs *rs, const cJSON *v, int opt,
    struct kg_stamp *st)
{
	uint64_t	hlc, idx, oi;

	st->hlc = 0;
	st->origin = "";
	st->idx = 0;
	if (v == NULL && opt)
		return 0;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3 ||
	    kg_u64(cJSON_GetArrayItem(v, 0), &hlc) == -1 || hlc == 0 ||
	    kg_u64(cJSON_GetArrayItem(v, 1), &oi) == -1 || oi >= rs->n ||
	    kg_u64(cJSON_GetArrayItem(v, 2), &idx) == -1 || idx > UINT32_MAX)
		return -1;
	st->origin = rs->o[oi];
	st->hlc = hlc;
	st->idx = (uint32_t)idx;
	return 0;
}

static int
kg_restore_slot(struct kg *g, const struct kg_rs *rs, const cJSON *o,
    char *err, size_t errlen)
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
	    kg_stamp_read(rs, cJSON_GetObjectItemCaseSensitive(o, "rec"), 1,
	    &e->rec) == -1 ||
	    kg_stamp_read(rs, cJSON_GetObjectItemCaseSensitive(o, "del"), 1,
	    &e->del) == -1 ||
	    kg_stamp_read(rs, cJSON_GetObjectItemCaseSensitive(o, "stale"), 1,
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
			    kg_stamp_read(rs, cJSON_GetArrayItem(x, 0), 0,
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
				if (kg_stamp_read(rs, s, 0, &st) == -1 ||
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

static const char *
kg_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/*
 * The end of the JSON value at p, by its structure only (strings,
 * nesting); cJSON checks each piece.  NULL when it does not end.
 */
static const char *
kg_skip(const char *p, const char *end)
{
	int	depth = 0, instr = 0;

	p = kg_ws(p, end);
	if (p == end)
		return NULL;
	if (*p != '{' && *p != '[' && *p != '"') {
		while (p < end && *p != ',' && *p != ']' && *p != '}' &&
		    *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			p++;
		return p;
	}
	for (; p < end; p++) {
		if (instr) {
			if (*p == '\\')
				p++;
			else if (*p == '"' && (instr = 0, depth == 0))
				return p + 1;
			continue;
		}
		if (*p == '"')
			instr = 1;
		else if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
	}
	return NULL;
}

/*
 * A snapshot is read an entity at a time: the members other than
 * "entities" are parsed as one small object, then each entity on its own,
 * so restoring a large graph never holds a cJSON tree of all of it (a
 * tree is ~20 times the text).
 */
struct kg *
kg_restore(const char *json, size_t len, char *err, size_t errlen)
{
	const char	*end = json + len, *p, *k, *kend, *vs, *ve;
	const char	*es = NULL, *ee = NULL;
	char		*hdr = NULL;
	size_t		 hlen = 0, hcap = 0;
	cJSON		*o = NULL, *e;
	const cJSON	*pj, *it, *ors;
	struct kg	*g = NULL;
	struct kg_rs	 rs;
	uint64_t	 v;
	int		 n = 0, r;

	memset(&rs, 0, sizeof(rs));
	if (errlen > 0)
		err[0] = '\0';
	p = kg_ws(json, end);
	if (p == end || *p != '{' ||
	    util_append(&hdr, &hlen, &hcap, "{", 1) == -1)
		goto notjson;
	for (p++;;) {
		p = kg_ws(p, end);
		if (p < end && *p == '}' && n == 0)
			break;
		k = p;
		if (p == end || *p != '"' || (kend = kg_skip(k, end)) == NULL)
			goto notjson;
		p = kg_ws(kend, end);
		if (p == end || *p != ':')
			goto notjson;
		vs = kg_ws(p + 1, end);
		if ((ve = kg_skip(vs, end)) == NULL)
			goto notjson;
		if (kend - k == 10 && memcmp(k, "\"entities\"", 10) == 0) {
			es = vs;
			ee = ve;
		} else if ((hlen > 1 && util_append(&hdr, &hlen, &hcap, ",",
		    1) == -1) ||
		    util_append(&hdr, &hlen, &hcap, k, (size_t)(kend - k)) ==
		    -1 || util_append(&hdr, &hlen, &hcap, ":", 1) == -1 ||
		    util_append(&hdr, &hlen, &hcap, vs, (size_t)(ve - vs)) == -1)
			goto nomem;
		n++;
		p = kg_ws(ve, end);
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		if (p < end && *p == '}')
			break;
		goto notjson;
	}
	if (kg_ws(p + 1, end) != end)
		goto notjson;
	if (util_append(&hdr, &hlen, &hcap, "}", 1) == -1)
		goto nomem;
	if ((o = cJSON_ParseWithLength(hdr, hlen)) == NULL)
		goto notjson;
	pj = cJSON_GetObjectItemCaseSensitive(o, "project");
	if (kg_u64(cJSON_GetObjectItemCaseSensitive(o, "v"), &v) == -1 ||
	    v != KG_SNAP_VERSION) {
		snprintf(err, errlen, "not a version %d snapshot",
		    KG_SNAP_VERSION);
		goto fail;
	}
	if (!cJSON_IsString(pj) || es == NULL || *es != '[') {
		snprintf(err, errlen, "a snapshot needs project and entities");
		goto fail;
	}
	if ((g = kg_new(pj->valuestring)) == NULL)
		goto nomem;
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
	ors = cJSON_GetObjectItemCaseSensitive(o, "origins");
	if (!cJSON_IsArray(ors)) {
		snprintf(err, errlen, "a snapshot needs origins");
		goto fail;
	}
	if ((rs.o = calloc((size_t)cJSON_GetArraySize(ors) + 1,
	    sizeof(*rs.o))) == NULL)
		goto nomem;
	cJSON_ArrayForEach(it, ors) {
		if (!cJSON_IsString(it) ||
		    (rs.o[rs.n++] = kg_intern(g, it->valuestring)) == NULL) {
			snprintf(err, errlen, "bad origins");
			goto fail;
		}
	}
	for (p = es + 1, n = 0;;) {
		p = kg_ws(p, ee);
		if (p < ee && *p == ']' && n == 0)
			break;
		if ((ve = kg_skip(p, ee)) == NULL ||
		    (e = cJSON_ParseWithLength(p, (size_t)(ve - p))) == NULL)
			goto notjson;
		r = kg_restore_slot(g, &rs, e, err, errlen);
		cJSON_Delete(e);
		if (r == -1)
			goto fail;
		n++;
		p = kg_ws(ve, ee);
		if (p < ee && *p == ',') {
			p++;
			continue;
		}
		if (p < ee && *p == ']')
			break;
		goto notjson;
	}
	free(rs.o);
	free(hdr);
	cJSON_Delete(o);
	return g;
nomem:
	snprintf(err, errlen, "out of memory");
	goto fail;
notjson:
	snprintf(err, errlen, "a snapshot must be JSON");
fail:
	free(rs.o);
	free(hdr);
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
	char			 label[64], iso[32];
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
		else if (v.type == KG_V_NUM && v.num >= 0 &&
		    v.num < (double)KG_HLC_LIMIT &&
		    strcmp(f[i], "lastAnalyzed") == 0) {
			util_iso8601(iso, (uint64_t)v.num);
			kg_md(m, "%s", iso);
		} else if (v.type == KG_V_NUM)
			kg_md(m, "%.15g", v.num);
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
