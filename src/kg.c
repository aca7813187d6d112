/*
 * A project's knowledge graph (see parley/kg.h): the entity model, the
 * fold of the log by the merge rules, and the read API.  The validator is
 * in kg_check.c, snapshots and exports in kg_view.c.
 *
 * Every (kind, key) the log ever touched has a slot, live or not: a slot
 * keeps its tombstone and stamps so a write that arrives late is judged
 * by its stamp, never by when it arrived.  Each slot keeps, per field, the
 * invariant "its stamp is above the slot's delete stamp, or zero", which
 * makes the state (not only the visible values) the same in whatever
 * order the batches are folded.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kg.h"
#include "parley/log.h"
#include "kg_int.h"

static const char *const kg_f_principle[] = { "name", "description",
    "confidence", "locations", "evidence", "relatedPrinciples", "tags",
    "stale", "seq", NULL };
static const char *const kg_f_pattern[] = { "name", "type", "description",
    "confidence", "location", "relatedPatterns", "tags", "stale", "seq",
    NULL };
static const char *const kg_f_decision[] = { "name", "description",
    "rationale", "status", "impact", "locations", "relatedDecisions",
    "stale", "seq", NULL };
static const char *const kg_f_file[] = { "path", "hash", "summary",
    "concepts", "importantSymbols", "relatedFiles", "lastAnalyzed",
    "stale", "seq", NULL };
static const char *const kg_f_rel[] = { "from", "to", "type",
    "description", "confidence", "stale", "seq", NULL };

const struct kg_kdesc kg_kinds[KG_NKINDS] = {
	{ "principle", "principles", kg_f_principle, 1, 6, {
	    { "description", KG_F_TEXT }, { "confidence", KG_F_CONF },
	    { "locations", KG_F_LIST }, { "evidence", KG_F_SET },
	    { "relatedPrinciples", KG_F_SET }, { "tags", KG_F_SET } } },
	{ "pattern", "patterns", kg_f_pattern, 1, 6, {
	    { "type", KG_F_NAME }, { "description", KG_F_TEXT },
	    { "confidence", KG_F_CONF }, { "location", KG_F_ITEM },
	    { "relatedPatterns", KG_F_SET }, { "tags", KG_F_SET } } },
	{ "decision", "decisions", kg_f_decision, 1, 6, {
	    { "description", KG_F_TEXT }, { "rationale", KG_F_TEXT },
	    { "status", KG_F_STATUS }, { "impact", KG_F_IMPACT },
	    { "locations", KG_F_LIST }, { "relatedDecisions", KG_F_SET } } },
	{ "file", "files", kg_f_file, 1, 6, {
	    { "hash", KG_F_HASH }, { "summary", KG_F_TEXT },
	    { "concepts", KG_F_LIST }, { "importantSymbols", KG_F_LIST },
	    { "relatedFiles", KG_F_SET }, { "lastAnalyzed", KG_F_TIME } } },
	{ "relationship", "relationships", kg_f_rel, 3, 2, {
	    { "description", KG_F_TEXT }, { "confidence", KG_F_CONF } } },
};

int
kg_valid_project(const char *id)
{
	size_t	i;

	if (id == NULL || id[0] == '\0' || id[0] == '.')
		return 0;
	for (i = 0; id[i] != '\0'; i++) {
		unsigned char c = (unsigned char)id[i];

		if (i >= KG_PROJECT_MAX)
			return 0;
		if (c >= 0x80 || (!isalnum(c) && c != '.' && c != '_' &&
		    c != '-'))
			return 0;
	}
	return 1;
}

const char *
kg_kind_name(enum kg_kind k)
{
	return (unsigned)k < KG_NKINDS ? kg_kinds[k].name : "unknown";
}

int
kg_fidx(enum kg_kind k, const char *name)
{
	size_t	i;

	for (i = 0; i < kg_kinds[k].nf; i++)
		if (strcmp(kg_kinds[k].f[i].name, name) == 0)
			return (int)i;
	return -1;
}

int
kg_stamp_cmp(const struct kg_stamp *a, const struct kg_stamp *b)
{
	int	c;

	if (a->hlc != b->hlc)
		return a->hlc < b->hlc ? -1 : 1;
	c = strcmp(a->origin != NULL ? a->origin : "",
	    b->origin != NULL ? b->origin : "");
	if (c != 0)
		return c < 0 ? -1 : 1;
	if (a->idx != b->idx)
		return a->idx < b->idx ? -1 : 1;
	return 0;
}

static const struct kg_stamp kg_zero = { 0, "", 0 };

struct kg *
kg_new(const char *project)
{
	struct kg	*g;

	if (project == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	g->htcap = 64;
	if ((g->project = strdup(project)) == NULL ||
	    (g->ht = calloc(g->htcap, sizeof(*g->ht))) == NULL) {
		free(g->project);
		free(g);
		return NULL;
	}
	return g;
}

static void
kg_fv_clear(struct kg_fv *fv)
{
	size_t	i;

	free(fv->s);
	fv->s = NULL;
	for (i = 0; i < fv->n; i++)
		if (fv->items == NULL)
			free(fv->list[i]);
	free(fv->list);
	fv->list = NULL;
	fv->n = 0;
	fv->t = KG_V_NONE;
	fv->num = 0;
}

static void
kg_entity_free(struct kg_entity *e)
{
	size_t	i, j;

	for (i = 0; i < kg_kinds[e->kind].nf; i++) {
		struct kg_fv *fv = &e->fv[i];

		kg_fv_clear(fv);
		for (j = 0; j < fv->ni; j++) {
			free(fv->items[j].val);
			free(fv->items[j].st);
		}
		free(fv->items);
	}
	free(e->key);
	free(e->to);
	free(e->type);
	free(e->stale_hash);
	free(e);
}

void
kg_free(struct kg *g)
{
	size_t	i, k;

	if (g == NULL)
		return;
	for (k = 0; k < KG_NKINDS; k++) {
		for (i = 0; i < g->k[k].n; i++)
			kg_entity_free(g->k[k].all[i]);
		free(g->k[k].all);
	}
	for (i = 0; i < g->norigins; i++)
		free(g->origins[i]);
	free(g->origins);
	free(g->ht);
	free(g->project);
	free(g);
}

const char *
kg_project(const struct kg *g)
{
	return g->project;
}

uint64_t
kg_seq(const struct kg *g)
{
	return g->seq;
}

uint64_t
kg_hlc(const struct kg *g)
{
	return g->hlc;
}

uint64_t
kg_batches(const struct kg *g)
{
	return g->batches;
}

size_t
kg_count(const struct kg *g, enum kg_kind k)
{
	return (unsigned)k < KG_NKINDS ? g->k[k].live : 0;
}

/*
 * The graph's copy of an origin: stamps point at it, so comparing and
 * storing a stamp never allocates.  Few writers exist (one per worker
 * process that ever wrote), so a linear table is enough.
 */
const char *
kg_intern(struct kg *g, const char *origin)
{
	size_t	 i;
	char	**no, *s;

	if (origin == NULL || origin[0] == '\0')
		return "";
	for (i = 0; i < g->norigins; i++)
		if (strcmp(g->origins[i], origin) == 0)
			return g->origins[i];
	if (g->norigins == g->ocap) {
		size_t ncap = g->ocap ? g->ocap * 2 : 8;

		if ((no = reallocarray(g->origins, ncap, sizeof(*no))) == NULL)
			return NULL;
		g->origins = no;
		g->ocap = ncap;
	}
	if ((s = strdup(origin)) == NULL)
		return NULL;
	g->origins[g->norigins++] = s;
	return s;
}

/* --- slots: the hash table and the per-kind key order --- */

static uint64_t
kg_hash(enum kg_kind k, const char *key, const char *to, const char *type)
{
	uint64_t	 h = 1469598103934665603ULL;
	const char	*parts[3] = { key, to, type };
	size_t		 i;

	h = (h ^ (unsigned)k) * 1099511628211ULL;
	for (i = 0; i < 3; i++) {
		const unsigned char *p = (const unsigned char *)
		    (parts[i] != NULL ? parts[i] : "");

		for (; *p != '\0'; p++)
			h = (h ^ *p) * 1099511628211ULL;
		h = (h ^ 0xff) * 1099511628211ULL;
	}
	return h;
}

static int
kg_streq(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

struct kg_entity *
kg_slot(const struct kg *g, enum kg_kind k, const char *key, const char *to,
    const char *type)
{
	struct kg_entity	*e;

	if ((unsigned)k >= KG_NKINDS || key == NULL)
		return NULL;
	e = g->ht[kg_hash(k, key, to, type) & (g->htcap - 1)];
	for (; e != NULL; e = e->hnext)
		if (e->kind == k && strcmp(e->key, key) == 0 &&
		    (k != KG_RELATIONSHIP ||
		    (kg_streq(e->to, to) && kg_streq(e->type, type))))
			return e;
	return NULL;
}

static int
kg_grow(struct kg *g)
{
	struct kg_entity	**nt, *e, *next;
	size_t			 ncap = g->htcap * 2, i;

	if ((nt = calloc(ncap, sizeof(*nt))) == NULL)
		return -1;
	for (i = 0; i < g->htcap; i++)
		for (e = g->ht[i]; e != NULL; e = next) {
			uint64_t h = kg_hash(e->kind, e->key, e->to, e->type);

			next = e->hnext;
			e->hnext = nt[h & (ncap - 1)];
			nt[h & (ncap - 1)] = e;
		}
	free(g->ht);
	g->ht = nt;
	g->htcap = ncap;
	return 0;
}

struct kg_entity *
kg_slot_make(struct kg *g, enum kg_kind k, const char *key, const char *to,
    const char *type)
{
	struct kg_entity	*e;
	struct kg_kindset	*ks = &g->k[k];
	size_t			 i;
	uint64_t		 h;

	if ((e = kg_slot(g, k, key, to, type)) != NULL)
		return e;
	if ((g->nslots + 1) * 4 > g->htcap * 3 && kg_grow(g) == -1)
		return NULL;
	if (ks->n == ks->cap) {
		size_t			 ncap = ks->cap ? ks->cap * 2 : 16;
		struct kg_entity	**na;

		if ((na = reallocarray(ks->all, ncap, sizeof(*na))) == NULL)
			return NULL;
		ks->all = na;
		ks->cap = ncap;
	}
	/* only the fields of its kind: a relationship has 2, not 6 */
	if ((e = calloc(1, sizeof(*e) + kg_kinds[k].nf * sizeof(e->fv[0]))) ==
	    NULL)
		return NULL;
	e->kind = k;
	e->rec = e->del = e->stale = kg_zero;
	for (i = 0; i < kg_kinds[k].nf; i++)
		e->fv[i].st = kg_zero;
	if ((e->key = strdup(key)) == NULL ||
	    (k == KG_RELATIONSHIP && ((e->to = strdup(to ? to : "")) == NULL ||
	    (e->type = strdup(type ? type : "")) == NULL))) {
		kg_entity_free(e);
		return NULL;
	}
	h = kg_hash(k, key, to, type);
	e->hnext = g->ht[h & (g->htcap - 1)];
	g->ht[h & (g->htcap - 1)] = e;
	g->nslots++;
	ks->all[ks->n++] = e;
	return e;
}

static int
kg_keycmp(const struct kg_entity *a, const struct kg_entity *b)
{
	int	c;

	if ((c = strcmp(a->key, b->key)) != 0)
		return c;
	if (a->kind != KG_RELATIONSHIP)
		return 0;
	if ((c = strcmp(a->to, b->to)) != 0)
		return c;
	return strcmp(a->type, b->type);
}

static int
kg_keycmp_q(const void *a, const void *b)
{
	return kg_keycmp(*(struct kg_entity *const *)a,
	    *(struct kg_entity *const *)b);
}

/*
 * Slots are appended as they appear; reading sorts the new tail and
 * merges it in, so a fold is O(1) per new entity and the first read after
 * k new ones costs O(n + k log k).  The cache is the graph's own, which is
 * why a const graph is written here (one graph per thread, kg.h).
 */
struct kg_entity **
kg_sorted(const struct kg *cg, enum kg_kind k, size_t *n)
{
	struct kg		*g = (struct kg *)cg;
	struct kg_kindset	*ks = &g->k[k];
	struct kg_entity	**tmp;
	size_t			 a, b, o, na;

	*n = ks->n;
	if (ks->nsorted == ks->n)
		return ks->all;
	na = ks->nsorted;
	qsort(ks->all + na, ks->n - na, sizeof(*ks->all), kg_keycmp_q);
	if (na == 0 || kg_keycmp(ks->all[na - 1], ks->all[na]) < 0) {
		ks->nsorted = ks->n;
		return ks->all;
	}
	if ((tmp = malloc(ks->n * sizeof(*tmp))) == NULL) {
		/* Out of memory: sort the whole array in place instead. */
		qsort(ks->all, ks->n, sizeof(*ks->all), kg_keycmp_q);
		ks->nsorted = ks->n;
		return ks->all;
	}
	for (a = 0, b = na, o = 0; a < na || b < ks->n;)
		if (b == ks->n || (a < na &&
		    kg_keycmp(ks->all[a], ks->all[b]) <= 0))
			tmp[o++] = ks->all[a++];
		else
			tmp[o++] = ks->all[b++];
	memcpy(ks->all, tmp, ks->n * sizeof(*tmp));
	free(tmp);
	ks->nsorted = ks->n;
	return ks->all;
}

void
kg_relive(struct kg *g, struct kg_entity *e)
{
	int	live = e->rec.hlc != 0 && kg_stamp_cmp(&e->rec, &e->del) > 0;

	if (live && !e->live)
		g->k[e->kind].live++;
	else if (!live && e->live)
		g->k[e->kind].live--;
	e->live = live;
}

int
kg_is_stale(const struct kg_entity *e)
{
	return e->stale.hlc != 0 && kg_stamp_cmp(&e->stale, &e->rec) > 0;
}

/* --- the fold --- */

static int
kg_sitem_cmp_first(const void *a, const void *b)
{
	const struct kg_sitem	*x = *(const struct kg_sitem *const *)a;
	const struct kg_sitem	*y = *(const struct kg_sitem *const *)b;
	int			 c = kg_stamp_cmp(&x->st[0], &y->st[0]);

	return c != 0 ? c : strcmp(x->val, y->val);
}

int
kg_set_view(struct kg_entity *e, size_t fi)
{
	struct kg_fv		 *fv = &e->fv[fi];
	struct kg_sitem		**by;
	size_t			  i;

	free(fv->list);
	fv->list = NULL;
	fv->n = 0;
	if (fv->ni == 0)
		return 0;
	if ((fv->list = calloc(fv->ni, sizeof(*fv->list))) == NULL)
		return -1;
	fv->n = fv->ni;
	if (strcmp(kg_kinds[e->kind].f[fi].name, "evidence") == 0) {
		/* evidence: in the order it was first added */
		if ((by = calloc(fv->ni, sizeof(*by))) == NULL) {
			free(fv->list);
			fv->list = NULL;
			fv->n = 0;
			return -1;
		}
		for (i = 0; i < fv->ni; i++)
			by[i] = &fv->items[i];
		qsort(by, fv->ni, sizeof(*by), kg_sitem_cmp_first);
		for (i = 0; i < fv->ni; i++)
			fv->list[i] = by[i]->val;
		free(by);
	} else
		for (i = 0; i < fv->ni; i++)
			fv->list[i] = fv->items[i].val;
	return 0;
}

/* Adds one stamp of val to a set: 1 changed, 0 already there, -1 ENOMEM. */
int
kg_set_add(struct kg_fv *fv, const char *val, const struct kg_stamp *st)
{
	size_t		 lo = 0, hi = fv->ni, mid, j;
	struct kg_sitem	*it;
	struct kg_stamp	*ns;
	int		 c;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if ((c = strcmp(fv->items[mid].val, val)) == 0)
			break;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < hi) {
		it = &fv->items[(lo + hi) / 2];
		for (j = 0; j < it->nst; j++) {
			c = kg_stamp_cmp(&it->st[j], st);
			if (c == 0)
				return 0;
			if (c > 0)
				break;
		}
		if ((ns = reallocarray(it->st, it->nst + 1, sizeof(*ns))) ==
		    NULL)
			return -1;
		it->st = ns;
		memmove(&ns[j + 1], &ns[j], (it->nst - j) * sizeof(*ns));
		ns[j] = *st;
		it->nst++;
		return 1;
	}
	if (fv->ni == fv->icap) {
		size_t		 ncap = fv->icap ? fv->icap * 2 : 4;
		struct kg_sitem	*ni;

		if ((ni = reallocarray(fv->items, ncap, sizeof(*ni))) == NULL)
			return -1;
		fv->items = ni;
		fv->icap = ncap;
	}
	it = &fv->items[lo];
	memmove(it + 1, it, (fv->ni - lo) * sizeof(*it));
	memset(it, 0, sizeof(*it));
	fv->ni++;
	if ((it->val = strdup(val)) == NULL ||
	    (it->st = malloc(sizeof(*it->st))) == NULL) {
		free(it->val);
		memmove(it, it + 1, (fv->ni - lo - 1) * sizeof(*it));
		fv->ni--;
		return -1;
	}
	it->st[0] = *st;
	it->nst = 1;
	return 1;
}

/* Writes one field at st: 1 changed, 0 not (an older stamp), -1 ENOMEM. */
int
kg_write(struct kg_entity *e, size_t fi, const cJSON *v,
    const struct kg_stamp *st)
{
	struct kg_fv	*fv = &e->fv[fi];
	enum kg_ftype	 t = kg_kinds[e->kind].f[fi].type;
	const cJSON	*it;
	size_t		 n, i;
	int		 r, changed = 0;

	if (t == KG_F_SET) {
		if (cJSON_IsString(v)) {
			if ((r = kg_set_add(fv, v->valuestring, st)) == -1)
				return -1;
			changed = r;
		} else if (cJSON_IsArray(v))
			cJSON_ArrayForEach(it, v) {
				if (!cJSON_IsString(it))
					continue;
				if ((r = kg_set_add(fv, it->valuestring, st)) ==
				    -1)
					return -1;
				changed |= r;
			}
		if (changed && kg_set_view(e, fi) == -1)
			return -1;
		return changed;
	}
	if (kg_stamp_cmp(st, &fv->st) <= 0)
		return 0;
	kg_fv_clear(fv);
	fv->st = *st;
	if (cJSON_IsNull(v))
		return 1;
	if (t == KG_F_LIST) {
		n = (size_t)cJSON_GetArraySize(v);
		fv->t = KG_V_LIST;
		if (n == 0)
			return 1;
		if ((fv->list = calloc(n, sizeof(*fv->list))) == NULL)
			return -1;
		i = 0;
		cJSON_ArrayForEach(it, v) {
			if (!cJSON_IsString(it))
				continue;
			if ((fv->list[i] = strdup(it->valuestring)) == NULL) {
				fv->n = i;
				return -1;
			}
			i++;
		}
		fv->n = i;
	} else if (cJSON_IsNumber(v)) {
		fv->t = KG_V_NUM;
		fv->num = v->valuedouble;
	} else if (cJSON_IsString(v)) {
		if ((fv->s = strdup(v->valuestring)) == NULL)
			return -1;
		fv->t = KG_V_STR;
	}
	return 1;
}

/* A delete at st: drops every write stamped before it. */
static void
kg_tombstone(struct kg *g, struct kg_entity *e, const struct kg_stamp *st)
{
	size_t	i, j, k, keep;

	e->del = *st;
	for (i = 0; i < kg_kinds[e->kind].nf; i++) {
		struct kg_fv *fv = &e->fv[i];

		if (kg_kinds[e->kind].f[i].type != KG_F_SET) {
			if (kg_stamp_cmp(&fv->st, st) < 0) {
				kg_fv_clear(fv);
				fv->st = kg_zero;
			}
			continue;
		}
		for (j = 0, k = 0; j < fv->ni; j++) {
			struct kg_sitem *it = &fv->items[j];

			for (keep = 0; keep < it->nst &&
			    kg_stamp_cmp(&it->st[keep], st) < 0; keep++)
				;
			if (keep == it->nst) {
				free(it->val);
				free(it->st);
				continue;
			}
			memmove(it->st, it->st + keep,
			    (it->nst - keep) * sizeof(*it->st));
			it->nst -= keep;
			fv->items[k++] = *it;
		}
		fv->ni = k;
		/* On ENOMEM the view is left empty, never dangling. */
		(void)kg_set_view(e, i);
	}
	kg_relive(g, e);
}

static int
kg_apply_record(struct kg *g, const struct kg_act *a,
    const struct kg_stamp *st, uint64_t seq, uint64_t time_ms)
{
	struct kg_entity	*e;
	const struct kg_kdesc	*kd = &kg_kinds[a->kind];
	size_t			 i;
	int			 r, changed = 0;

	if ((e = kg_slot_make(g, a->kind, a->key, a->to, a->type)) == NULL)
		return -1;
	if (kg_stamp_cmp(st, &e->rec) > 0) {
		e->rec = *st;
		changed = 1;
	}
	if (kg_stamp_cmp(st, &e->del) > 0) {
		for (i = 0; i < kd->nf; i++) {
			const cJSON	*v = a->f[i];
			cJSON		*tv = NULL;

			if (kd->f[i].type == KG_F_TIME &&
			    (v == NULL || cJSON_IsNull(v))) {
				/* lastAnalyzed: the batch's time unless given */
				if ((tv = cJSON_CreateNumber((double)time_ms)) ==
				    NULL)
					return -1;
				v = tv;
			}
			if (v == NULL)
				continue;
			r = kg_write(e, i, v, st);
			cJSON_Delete(tv);
			if (r == -1)
				return -1;
			changed |= r;
		}
	}
	kg_relive(g, e);
	if (changed)
		e->seq = seq;
	return 0;
}

static int
kg_apply_field(struct kg *g, enum kg_kind k, const struct kg_act *a,
    const char *field, const cJSON *v, const struct kg_stamp *st,
    uint64_t seq)
{
	struct kg_entity	*e;
	int			 fi = kg_fidx(k, field), r;

	if (fi < 0 || v == NULL)
		return 0;
	if ((e = kg_slot_make(g, k, a->key, a->to, a->type)) == NULL)
		return -1;
	kg_relive(g, e);
	if (kg_stamp_cmp(st, &e->del) <= 0)
		return 0;
	if ((r = kg_write(e, (size_t)fi, v, st)) == -1)
		return -1;
	if (r)
		e->seq = seq;
	return 0;
}

static int
kg_apply(struct kg *g, const struct kg_act *a, const struct kg_stamp *st,
    uint64_t seq, uint64_t time_ms)
{
	struct kg_entity	*e;

	switch (a->op) {
	case KG_OP_REC_PRINCIPLE:
	case KG_OP_REC_PATTERN:
	case KG_OP_REC_DECISION:
	case KG_OP_REC_FILE:
	case KG_OP_LINK:
		return kg_apply_record(g, a, st, seq, time_ms);
	case KG_OP_DEL_PRINCIPLE:
	case KG_OP_DEL_PATTERN:
	case KG_OP_DEL_DECISION:
		if ((e = kg_slot_make(g, a->kind, a->key, NULL, NULL)) ==
		    NULL)
			return -1;
		if (kg_stamp_cmp(st, &e->del) > 0) {
			kg_tombstone(g, e, st);
			e->seq = seq;
		}
		return 0;
	case KG_OP_UPDATE_CONF:
		/*
		 * Without a kind the writer found one principle or pattern
		 * of that name; which one cannot depend on what this graph
		 * holds now (that depends on arrival order), so it writes
		 * both: the other is a slot that is not live.
		 */
		if (a->anykind) {
			if (kg_apply_field(g, KG_PRINCIPLE, a, "confidence",
			    a->f[0], st, seq) == -1)
				return -1;
			return kg_apply_field(g, KG_PATTERN, a, "confidence",
			    a->f[0], st, seq);
		}
		return kg_apply_field(g, a->kind, a, "confidence", a->f[0],
		    st, seq);
	case KG_OP_ADD_EVIDENCE:
		return kg_apply_field(g, KG_PRINCIPLE, a, "evidence", a->f[0],
		    st, seq);
	default:
		return 0;
	}
}

/* An hlc field: an integer 1..2^53-1. */
static int
kg_json_hlc(const cJSON *v, uint64_t *out)
{
	char		*end;
	unsigned long long n;

	/* kg_batch_body's own (not yet printed) body holds it raw. */
	if (cJSON_IsRaw(v) && v->valuestring != NULL) {
		errno = 0;
		n = strtoull(v->valuestring, &end, 10);
		if (errno != 0 || *end != '\0' || end == v->valuestring ||
		    n < 1 || n >= KG_HLC_LIMIT)
			return -1;
		*out = n;
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble < 1 ||
	    v->valuedouble >= (double)KG_HLC_LIMIT ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return -1;
	*out = (uint64_t)v->valuedouble;
	return 0;
}

static int
kg_fold_batch(struct kg *g, uint64_t seq, const cJSON *body)
{
	const cJSON	*o = cJSON_GetObjectItemCaseSensitive(body, "origin");
	const cJSON	*t = cJSON_GetObjectItemCaseSensitive(body, "time");
	const cJSON	*acts = cJSON_GetObjectItemCaseSensitive(body,
			    "actions");
	const cJSON	*it;
	struct kg_stamp	 st;
	struct kg_act	 a;
	struct kg_err	 err;
	uint64_t	 hlc, time_ms = 0;
	int		 i = 0;

	if (kg_json_hlc(cJSON_GetObjectItemCaseSensitive(body, "hlc"),
	    &hlc) == -1 || !cJSON_IsString(o) || !cJSON_IsArray(acts)) {
		log_warnx("kg %s: seq %llu: a knowledge_batch without hlc, "
		    "origin or actions: ignored", g->project,
		    (unsigned long long)seq);
		return -1;
	}
	if (cJSON_IsNumber(t) && t->valuedouble > 0 &&
	    t->valuedouble < (double)KG_HLC_LIMIT)
		time_ms = (uint64_t)t->valuedouble;
	if ((st.origin = kg_intern(g, o->valuestring)) == NULL)
		return -1;
	st.hlc = hlc;
	if (hlc > g->hlc)
		g->hlc = hlc;
	g->batches++;
	cJSON_ArrayForEach(it, acts) {
		st.idx = (uint32_t)i;
		if (kg_act_parse(it, i, &a, &err) == -1)
			log_warnx("kg %s: seq %llu: skipped: %s", g->project,
			    (unsigned long long)seq, err.msg);
		else if (kg_apply(g, &a, &st, seq, time_ms) == -1)
			return -1;
		i++;
	}
	return 0;
}

static int
kg_mark_stale(struct kg *g, struct kg_entity *e, const struct kg_stamp *st,
    const char *hash, uint64_t seq)
{
	char	*h;

	if (e == NULL)
		return -1;
	if (kg_stamp_cmp(st, &e->stale) <= 0)
		return 0;
	if ((h = strdup(hash)) == NULL)
		return -1;
	free(e->stale_hash);
	e->stale_hash = h;
	e->stale = *st;
	e->seq = seq;
	return 0;
}

static int
kg_fold_stale(struct kg *g, uint64_t seq, const cJSON *body)
{
	const cJSON	*o = cJSON_GetObjectItemCaseSensitive(body, "origin");
	const cJSON	*p = cJSON_GetObjectItemCaseSensitive(body, "path");
	const cJSON	*h = cJSON_GetObjectItemCaseSensitive(body, "hash");
	const cJSON	*ents = cJSON_GetObjectItemCaseSensitive(body,
			    "entities");
	const cJSON	*it;
	struct kg_stamp	 st;
	uint64_t	 hlc;
	size_t		 k;

	if (kg_json_hlc(cJSON_GetObjectItemCaseSensitive(body, "hlc"),
	    &hlc) == -1 || !cJSON_IsString(o) || !cJSON_IsString(p) ||
	    p->valuestring[0] == '\0' || !cJSON_IsString(h)) {
		log_warnx("kg %s: seq %llu: a knowledge_stale without hlc, "
		    "origin, path or hash: ignored", g->project,
		    (unsigned long long)seq);
		return -1;
	}
	if ((st.origin = kg_intern(g, o->valuestring)) == NULL)
		return -1;
	st.hlc = hlc;
	st.idx = 0;
	if (hlc > g->hlc)
		g->hlc = hlc;
	if (kg_mark_stale(g, kg_slot_make(g, KG_FILE, p->valuestring, NULL,
	    NULL), &st, h->valuestring, seq) == -1)
		return -1;
	cJSON_ArrayForEach(it, ents) {
		const cJSON *kn = cJSON_GetObjectItemCaseSensitive(it, "kind");
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
		const cJSON *to = cJSON_GetObjectItemCaseSensitive(it, "to");
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(it, "type");

		if (!cJSON_IsString(kn) || !cJSON_IsString(nm) ||
		    nm->valuestring[0] == '\0')
			continue;
		for (k = 0; k < KG_NKINDS; k++)
			if (strcmp(kg_kinds[k].name, kn->valuestring) == 0)
				break;
		if (k == KG_NKINDS)
			continue;
		/* A relationship is named by from, to and type together. */
		if (k == KG_RELATIONSHIP &&
		    (!cJSON_IsString(to) || !cJSON_IsString(ty)))
			continue;
		if (kg_mark_stale(g, kg_slot_make(g, (enum kg_kind)k,
		    nm->valuestring, k == KG_RELATIONSHIP ? to->valuestring :
		    NULL, k == KG_RELATIONSHIP ? ty->valuestring : NULL), &st,
		    h->valuestring, seq) == -1)
			return -1;
	}
	return 0;
}

int
kg_fold(struct kg *g, uint64_t seq, const char *type, const cJSON *body)
{
	if (seq <= g->seq)
		return 0;
	g->seq = seq;
	if (type == NULL || body == NULL)
		return 0;
	if (strcmp(type, "knowledge_batch") == 0)
		return kg_fold_batch(g, seq, body);
	if (strcmp(type, "knowledge_stale") == 0)
		return kg_fold_stale(g, seq, body);
	return 0;
}

uint64_t
kg_clock_next(uint64_t *clock, uint64_t now_ms)
{
	uint64_t	wall;

	/* A clock raised to the limit (a bad stamp in a log) must still
	 * stamp batches every fold takes. */
	wall = now_ms < (KG_HLC_LIMIT - 1) / KG_HLC_PER_MS ?
	    now_ms * KG_HLC_PER_MS : KG_HLC_LIMIT - 1;
	if (*clock >= KG_HLC_LIMIT - 1)
		*clock = KG_HLC_LIMIT - 1;
	else
		*clock = wall > *clock ? wall : *clock + 1;
	return *clock;
}

cJSON *
kg_batch_body(const cJSON *actions, const char *batch_id, uint64_t hlc,
    const char *origin, uint64_t time_ms, const char *by)
{
	cJSON	*b, *a;
	char	 digits[24];

	/* In digits: a double would print 1.795686524633001e+15. */
	snprintf(digits, sizeof(digits), "%" PRIu64, hlc);
	if ((b = cJSON_CreateObject()) == NULL)
		return NULL;
	if (cJSON_AddStringToObject(b, "batchId", batch_id ? batch_id : "") ==
	    NULL ||
	    cJSON_AddRawToObject(b, "hlc", digits) == NULL ||
	    cJSON_AddStringToObject(b, "origin", origin ? origin : "") ==
	    NULL ||
	    cJSON_AddNumberToObject(b, "time", (double)time_ms) == NULL ||
	    (by != NULL && cJSON_AddStringToObject(b, "by", by) == NULL) ||
	    (a = cJSON_Duplicate(actions, 1)) == NULL) {
		cJSON_Delete(b);
		return NULL;
	}
	cJSON_AddItemToObject(b, "actions", a);
	return b;
}

/* --- reading --- */

enum kg_kind
kg_entity_kind(const struct kg_entity *e)
{
	return e->kind;
}

const char *
kg_entity_name(const struct kg_entity *e)
{
	return e->key;
}

const char *const *
kg_fields(enum kg_kind k)
{
	static const char *const none[] = { NULL };

	return (unsigned)k < KG_NKINDS ? kg_kinds[k].fields : none;
}

int
kg_field(const struct kg_entity *e, const char *field, struct kg_val *out)
{
	const struct kg_kdesc	*kd = &kg_kinds[e->kind];
	const struct kg_fv	*fv;
	int			 fi;

	memset(out, 0, sizeof(*out));
	if (field == NULL)
		return -1;
	if (strcmp(field, kd->fields[0]) == 0) {
		out->type = KG_V_STR;
		out->str = e->key;
		return 0;
	}
	if (e->kind == KG_RELATIONSHIP && (strcmp(field, "to") == 0 ||
	    strcmp(field, "type") == 0)) {
		out->type = KG_V_STR;
		out->str = field[0] == 't' && field[1] == 'o' ? e->to :
		    e->type;
		return 0;
	}
	if (strcmp(field, "stale") == 0) {
		out->type = KG_V_BOOL;
		out->num = kg_is_stale(e);
		return 0;
	}
	if (strcmp(field, "seq") == 0) {
		out->type = KG_V_NUM;
		out->num = (double)e->seq;
		return 0;
	}
	/* Not in kg_fields: the hash a stale mark said the file now has
	 * (kgstale compares it, so it marks a file once per change). */
	if (strcmp(field, "staleHash") == 0) {
		if (kg_is_stale(e) && e->stale_hash != NULL) {
			out->type = KG_V_STR;
			out->str = e->stale_hash;
		}
		return 0;
	}
	if ((fi = kg_fidx(e->kind, field)) < 0)
		return -1;
	fv = &e->fv[fi];
	if (kd->f[fi].type == KG_F_SET) {
		if (fv->n > 0) {
			out->type = KG_V_LIST;
			out->list = (const char *const *)fv->list;
			out->n = fv->n;
		}
		return 0;
	}
	out->type = fv->t;
	out->str = fv->s;
	out->num = fv->num;
	out->list = (const char *const *)fv->list;
	out->n = fv->n;
	return 0;
}

size_t
kg_all(const struct kg *g, enum kg_kind k, const struct kg_entity **out,
    size_t max)
{
	struct kg_entity	**all;
	size_t			  n, i, o = 0;

	if ((unsigned)k >= KG_NKINDS)
		return 0;
	all = kg_sorted(g, k, &n);
	for (i = 0; i < n && out != NULL && o < max; i++)
		if (all[i]->live)
			out[o++] = all[i];
	return g->k[k].live;
}

const struct kg_entity *
kg_get(const struct kg *g, enum kg_kind k, const char *key)
{
	const struct kg_entity	*e;

	if (k == KG_RELATIONSHIP || key == NULL)
		return NULL;
	e = kg_slot(g, k, key, NULL, NULL);
	return e != NULL && e->live ? e : NULL;
}

size_t
kg_links(const struct kg *g, const char *name, int dir,
    const struct kg_entity **out, size_t max)
{
	struct kg_entity	**all;
	size_t			  n, i, c = 0;

	if (name == NULL)
		return 0;
	all = kg_sorted(g, KG_RELATIONSHIP, &n);
	for (i = 0; i < n; i++) {
		if (!all[i]->live ||
		    strcmp(dir ? all[i]->to : all[i]->key, name) != 0)
			continue;
		if (out != NULL && c < max)
			out[c] = all[i];
		c++;
	}
	return c;
}

/* 1 when hay contains the ASCII-lowered needle (nlen bytes), folded. */
static int
kg_ci_contains(const char *hay, const char *needle, size_t nlen)
{
	size_t	i, j;

	if (hay == NULL)
		return 0;
	if (nlen == 0)
		return 1;
	for (i = 0; hay[i] != '\0'; i++) {
		for (j = 0; j < nlen && hay[i + j] != '\0'; j++)
			if (tolower((unsigned char)hay[i + j]) !=
			    (unsigned char)needle[j])
				break;
		if (j == nlen)
			return 1;
	}
	return 0;
}

static int
kg_matches(const struct kg_entity *e, const char *needle, size_t nlen)
{
	size_t	i, j;

	if (kg_ci_contains(e->key, needle, nlen) ||
	    kg_ci_contains(e->to, needle, nlen) ||
	    kg_ci_contains(e->type, needle, nlen))
		return 1;
	for (i = 0; i < kg_kinds[e->kind].nf; i++) {
		const struct kg_fv *fv = &e->fv[i];

		if (kg_ci_contains(fv->s, needle, nlen))
			return 1;
		for (j = 0; j < fv->n; j++)
			if (kg_ci_contains(fv->list[j], needle, nlen))
				return 1;
	}
	return 0;
}

size_t
kg_search(const struct kg *g, const char *text,
    const struct kg_entity **out, size_t max)
{
	struct kg_entity	**all;
	char			 *needle;
	size_t			  n, i, k, c = 0, nlen;

	if (text == NULL || (needle = strdup(text)) == NULL)
		return 0;
	nlen = strlen(needle);
	for (i = 0; i < nlen; i++)
		needle[i] = (char)tolower((unsigned char)needle[i]);
	for (k = 0; k < KG_NKINDS; k++) {
		all = kg_sorted(g, (enum kg_kind)k, &n);
		for (i = 0; i < n; i++) {
			if (!all[i]->live || !kg_matches(all[i], needle, nlen))
				continue;
			if (out != NULL && c < max)
				out[c] = all[i];
			c++;
		}
	}
	free(needle);
	return c;
}

/* 1 when a location item is path itself or "path:..." */
static int
kg_loc_is(const char *item, const char *path, size_t plen)
{
	return item != NULL && strncmp(item, path, plen) == 0 &&
	    (item[plen] == '\0' || item[plen] == ':');
}

static int
kg_refers(const struct kg_entity *e, const char *path, size_t plen)
{
	const struct kg_fv	*fv;
	size_t			 i;
	int			 fi;

	switch (e->kind) {
	case KG_FILE:
		return strcmp(e->key, path) == 0;
	case KG_RELATIONSHIP:
		return strcmp(e->key, path) == 0 || strcmp(e->to, path) == 0;
	case KG_PATTERN:
		fi = kg_fidx(e->kind, "location");
		return kg_loc_is(e->fv[fi].s, path, plen);
	default:
		fi = kg_fidx(e->kind, "locations");
		fv = &e->fv[fi];
		for (i = 0; i < fv->n; i++)
			if (kg_loc_is(fv->list[i], path, plen))
				return 1;
		return 0;
	}
}

size_t
kg_refs(const struct kg *g, const char *path, const struct kg_entity **out,
    size_t max)
{
	struct kg_entity	**all;
	size_t			  n, i, k, c = 0, plen;

	if (path == NULL || path[0] == '\0')
		return 0;
	plen = strlen(path);
	for (k = 0; k < KG_NKINDS; k++) {
		all = kg_sorted(g, (enum kg_kind)k, &n);
		for (i = 0; i < n; i++) {
			if (!all[i]->live || !kg_refers(all[i], path, plen))
				continue;
			if (out != NULL && c < max)
				out[c] = all[i];
			c++;
		}
	}
	return c;
}
