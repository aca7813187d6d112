/*
 * The knowledge graph's validator (see parley/kg.h): parses one action and
 * checks its fields' types and bounds (kg_act_parse, which the fold uses
 * too), and checks a whole batch against a graph plus what the batch's
 * earlier actions record or delete (kg_check), never changing the graph.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/kg.h"
#include "parley/utf8.h"
#include "kg_int.h"

const char *const kg_ops[KG_NOPS] = {
	"record-principle", "record-pattern", "record-decision",
	"record-file-understanding", "link-entities", "delete-principle",
	"delete-pattern", "delete-decision", "update-confidence",
	"add-evidence"
};

static const char *const kg_statuses[] = { "active", "proposed",
    "deprecated", "superseded", NULL };

void
kg_err_set(struct kg_err *err, int action, const char *op, const char *field,
    const char *fmt, ...)
{
	va_list	ap;
	char	why[320];
	int	n;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	err->action = action;
	snprintf(err->op, sizeof(err->op), "%s", op ? op : "");
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	if (action < 0)
		n = snprintf(err->msg, sizeof(err->msg), "%s", why);
	else if (field != NULL && field[0] != '\0')
		n = snprintf(err->msg, sizeof(err->msg),
		    "action %d (%s): field \"%s\": %s", action,
		    op && op[0] ? op : "?", field, why);
	else
		n = snprintf(err->msg, sizeof(err->msg), "action %d (%s): %s",
		    action, op && op[0] ? op : "?", why);
	(void)n;
}

/* A short rendering of a JSON value for "got ..." (at most ~48 bytes). */
static const char *
kg_got(const cJSON *v, char *buf, size_t len)
{
	char	*s;

	if (v == NULL)
		return "nothing";
	if (cJSON_IsString(v) && strlen(v->valuestring) > 40) {
		snprintf(buf, len, "a string of %zu bytes",
		    strlen(v->valuestring));
		return buf;
	}
	if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
		snprintf(buf, len, "%s of %d", cJSON_IsArray(v) ? "an array" :
		    "an object", cJSON_GetArraySize(v));
		return buf;
	}
	if ((s = cJSON_PrintUnformatted(v)) == NULL)
		return "a value";
	snprintf(buf, len, "%s", s);
	cJSON_free(s);
	return buf;
}

static int
kg_utf8(const char *s)
{
	return utf8_valid((const unsigned char *)s, strlen(s));
}

static int
kg_has_ctl(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			return 1;
	return 0;
}

/* A checked string: 0, or -1 with why filled in. */
static int
kg_str_ok(const cJSON *v, size_t min, size_t max, int noctl, char *why,
    size_t wlen)
{
	char	got[64];
	size_t	n;

	if (!cJSON_IsString(v)) {
		snprintf(why, wlen, "must be a string, got %s",
		    kg_got(v, got, sizeof(got)));
		return -1;
	}
	n = strlen(v->valuestring);
	if (n < min) {
		snprintf(why, wlen, "must not be empty");
		return -1;
	}
	if (n > max) {
		snprintf(why, wlen, "must be at most %zu bytes, got %zu: "
		    "shorten it", max, n);
		return -1;
	}
	if (!kg_utf8(v->valuestring)) {
		snprintf(why, wlen, "must be valid UTF-8");
		return -1;
	}
	if (noctl && kg_has_ctl(v->valuestring)) {
		snprintf(why, wlen, "must not contain control characters "
		    "(newline, tab, ...)");
		return -1;
	}
	return 0;
}

static int
kg_items_ok(const cJSON *v, int one_ok, char *why, size_t wlen)
{
	const cJSON	*it;
	char		 got[64], sub[256];
	int		 i = 0;

	if (one_ok && cJSON_IsString(v))
		return kg_str_ok(v, 1, KG_ITEM_MAX, 0, why, wlen);
	if (!cJSON_IsArray(v)) {
		snprintf(why, wlen, "must be an array of strings%s, got %s",
		    one_ok ? " (or one string)" : "",
		    kg_got(v, got, sizeof(got)));
		return -1;
	}
	if (cJSON_GetArraySize(v) > KG_LIST_MAX) {
		snprintf(why, wlen, "must hold at most %d items, got %d: "
		    "split it over several actions", KG_LIST_MAX,
		    cJSON_GetArraySize(v));
		return -1;
	}
	cJSON_ArrayForEach(it, v) {
		if (kg_str_ok(it, 1, KG_ITEM_MAX, 0, sub, sizeof(sub)) == -1) {
			snprintf(why, wlen, "item %d %s", i, sub);
			return -1;
		}
		i++;
	}
	return 0;
}

/* A project-relative path: no leading '/', no empty, "." or ".." part. */
static int
kg_path_ok(const cJSON *v, char *why, size_t wlen)
{
	const char	*p, *s;
	size_t		 n;

	if (kg_str_ok(v, 1, KG_NAME_MAX, 1, why, wlen) == -1)
		return -1;
	s = v->valuestring;
	if (s[0] == '/') {
		snprintf(why, wlen, "must be relative to the project root "
		    "(no leading '/'), got \"%.64s\"", s);
		return -1;
	}
	for (p = s;; p += n + 1) {
		n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.')) {
			snprintf(why, wlen, "must be a path without empty, "
			    "\".\" or \"..\" parts (like src/main.c), got "
			    "\"%.64s\"", s);
			return -1;
		}
		if (p[n] == '\0')
			break;
	}
	return 0;
}

static int
kg_reltype_ok(const cJSON *v, char *why, size_t wlen)
{
	const char	*s;
	char		 got[64];

	if (cJSON_IsString(v)) {
		for (s = v->valuestring; *s != '\0'; s++)
			if (!((*s >= 'a' && *s <= 'z') ||
			    (*s >= '0' && *s <= '9') || *s == '_' ||
			    *s == '-'))
				break;
		if (*s == '\0' && s > v->valuestring &&
		    s - v->valuestring <= KG_RELTYPE_MAX)
			return 0;
	}
	snprintf(why, wlen, "must be 1 to %d of a-z, 0-9, '_' and '-' (like "
	    "\"implements\", \"uses\", \"supports\"), got %s", KG_RELTYPE_MAX,
	    kg_got(v, got, sizeof(got)));
	return -1;
}

static int
kg_value_ok(enum kg_ftype t, const cJSON *v, int one_ok, char *why,
    size_t wlen)
{
	char	got[64];
	double	d;
	size_t	i;

	switch (t) {
	case KG_F_NAME:
		return kg_str_ok(v, 1, KG_NAME_MAX, 1, why, wlen);
	case KG_F_TEXT:
		return kg_str_ok(v, 0, KG_TEXT_MAX, 0, why, wlen);
	case KG_F_ITEM:
		return kg_str_ok(v, 1, KG_ITEM_MAX, 0, why, wlen);
	case KG_F_LIST:
	case KG_F_SET:
		return kg_items_ok(v, one_ok, why, wlen);
	case KG_F_STATUS:
		if (cJSON_IsString(v))
			for (i = 0; kg_statuses[i] != NULL; i++)
				if (strcmp(v->valuestring, kg_statuses[i]) == 0)
					return 0;
		snprintf(why, wlen, "must be one of active, proposed, "
		    "deprecated, superseded, got %s",
		    kg_got(v, got, sizeof(got)));
		return -1;
	case KG_F_HASH:
		if (cJSON_IsString(v) && strlen(v->valuestring) == 64) {
			for (i = 0; i < 64; i++) {
				char c = v->valuestring[i];

				if (!((c >= '0' && c <= '9') ||
				    (c >= 'a' && c <= 'f')))
					break;
			}
			if (i == 64)
				return 0;
		}
		snprintf(why, wlen, "must be the file's SHA-256 as 64 "
		    "lowercase hex digits (as sha256sum prints it), got %s",
		    kg_got(v, got, sizeof(got)));
		return -1;
	case KG_F_CONF:
		if (cJSON_IsNumber(v) && (d = v->valuedouble) >= 0 && d <= 1)
			return 0;
		snprintf(why, wlen, "must be a number from 0 to 1, got %s",
		    kg_got(v, got, sizeof(got)));
		return -1;
	case KG_F_IMPACT:
		if (cJSON_IsNumber(v) && (d = v->valuedouble) >= 0 &&
		    d <= 10 && d == floor(d))
			return 0;
		snprintf(why, wlen, "must be an integer from 0 to 10, got %s",
		    kg_got(v, got, sizeof(got)));
		return -1;
	case KG_F_TIME:
		if (cJSON_IsNumber(v) && (d = v->valuedouble) >= 0 &&
		    d < (double)KG_HLC_LIMIT && d == floor(d))
			return 0;
		snprintf(why, wlen, "must be a time in milliseconds since "
		    "1970 (an integer), got %s", kg_got(v, got, sizeof(got)));
		return -1;
	}
	return -1;
}

/* "a, b, c" of the names into buf. */
static const char *
kg_join(const char *const *names, size_t n, char *buf, size_t len)
{
	size_t	i, at = 0;

	buf[0] = '\0';
	for (i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
		    i ? ", " : "", names[i]);
	return buf;
}

int
kg_act_parse(const cJSON *action, int idx, struct kg_act *a,
    struct kg_err *err)
{
	const cJSON		*opj, *fields, *m, *m2;
	const struct kg_kdesc	*kd;
	const char		*acc[12], *op, *kname;
	char			 why[320], got[64], list[200];
	size_t			 nacc = 0, i, k;
	int			 required_conf = 0, fi;

	memset(a, 0, sizeof(*a));
	if (!cJSON_IsArray(action) || cJSON_GetArraySize(action) != 2 ||
	    !cJSON_IsString(opj = cJSON_GetArrayItem(action, 0)) ||
	    !cJSON_IsObject(fields = cJSON_GetArrayItem(action, 1))) {
		kg_err_set(err, idx, "", "", "must be a pair [\"op\", "
		    "{fields}], like [\"record-principle\", {\"name\": "
		    "\"...\"}], got %s", kg_got(action, got, sizeof(got)));
		return -1;
	}
	op = opj->valuestring;
	for (i = 0; i < KG_NOPS; i++)
		if (strcmp(op, kg_ops[i]) == 0)
			break;
	if (i == KG_NOPS) {
		kg_err_set(err, idx, "", "", "unknown op \"%.40s\": use one "
		    "of %s", op, kg_join(kg_ops, KG_NOPS, list, sizeof(list)));
		if (err != NULL)
			snprintf(err->op, sizeof(err->op), "%.31s", op);
		return -1;
	}
	a->op = (enum kg_op)i;
	switch (a->op) {
	case KG_OP_REC_PRINCIPLE:
	case KG_OP_DEL_PRINCIPLE:
	case KG_OP_ADD_EVIDENCE:
		a->kind = KG_PRINCIPLE;
		break;
	case KG_OP_REC_PATTERN:
	case KG_OP_DEL_PATTERN:
		a->kind = KG_PATTERN;
		break;
	case KG_OP_REC_DECISION:
	case KG_OP_DEL_DECISION:
		a->kind = KG_DECISION;
		break;
	case KG_OP_REC_FILE:
		a->kind = KG_FILE;
		break;
	case KG_OP_LINK:
		a->kind = KG_RELATIONSHIP;
		break;
	default:
		a->kind = KG_PRINCIPLE;
		break;
	}
	kd = &kg_kinds[a->kind];

	/* The accepted fields of this op. */
	switch (a->op) {
	case KG_OP_REC_PRINCIPLE:
	case KG_OP_REC_PATTERN:
	case KG_OP_REC_DECISION:
	case KG_OP_REC_FILE:
	case KG_OP_LINK:
		for (k = 0; k < kd->nkey; k++)
			acc[nacc++] = kd->fields[k];
		for (k = 0; k < kd->nf; k++)
			acc[nacc++] = kd->f[k].name;
		break;
	case KG_OP_UPDATE_CONF:
		acc[nacc++] = "name";
		acc[nacc++] = "confidence";
		acc[nacc++] = "kind";
		acc[nacc++] = "from";
		acc[nacc++] = "to";
		acc[nacc++] = "type";
		break;
	case KG_OP_ADD_EVIDENCE:
		acc[nacc++] = "name";
		acc[nacc++] = "evidence";
		break;
	default:
		acc[nacc++] = "name";
		break;
	}
	cJSON_ArrayForEach(m, fields) {
		for (k = 0; k < nacc; k++)
			if (strcmp(m->string, acc[k]) == 0)
				break;
		if (k == nacc) {
			kg_err_set(err, idx, op, "", "unknown field \"%.40s\": "
			    "%s takes %s", m->string, op,
			    kg_join(acc, nacc, list, sizeof(list)));
			if (err != NULL)
				snprintf(err->field, sizeof(err->field),
				    "%.31s", m->string);
			return -1;
		}
		for (m2 = fields->child; m2 != m; m2 = m2->next)
			if (strcmp(m2->string, m->string) == 0) {
				kg_err_set(err, idx, op, m->string, "is given "
				    "twice: give it once");
				return -1;
			}
	}

	if (a->op == KG_OP_UPDATE_CONF) {
		m = cJSON_GetObjectItemCaseSensitive(fields, "kind");
		a->anykind = m == NULL;
		if (m != NULL) {
			kname = cJSON_IsString(m) ? m->valuestring : "";
			if (strcmp(kname, "principle") == 0)
				a->kind = KG_PRINCIPLE;
			else if (strcmp(kname, "pattern") == 0)
				a->kind = KG_PATTERN;
			else if (strcmp(kname, "relationship") == 0)
				a->kind = KG_RELATIONSHIP;
			else {
				kg_err_set(err, idx, op, "kind", "must be one "
				    "of principle, pattern, relationship, got "
				    "%s", kg_got(m, got, sizeof(got)));
				return -1;
			}
		}
		kd = &kg_kinds[a->kind];
		required_conf = 1;
		/* relationships are named by from, to, type; others by name */
		for (k = 0; k < 4; k++) {
			static const char *const which[] = { "name", "from",
			    "to", "type" };
			int rel = a->kind == KG_RELATIONSHIP && !a->anykind;

			if (cJSON_GetObjectItemCaseSensitive(fields,
			    which[k]) == NULL || (k == 0) != rel)
				continue;
			kg_err_set(err, idx, op, which[k], "%s", rel ?
			    "a relationship is named by from, to and type, "
			    "not name" : "is only for kind \"relationship\" "
			    "(a principle or pattern is named by name)");
			return -1;
		}
	}

	/* The key. */
	if (a->kind == KG_RELATIONSHIP) {
		static const char *const keys[] = { "from", "to", "type" };
		const char **outs[] = { &a->key, &a->to, &a->type };

		for (k = 0; k < 3; k++) {
			m = cJSON_GetObjectItemCaseSensitive(fields, keys[k]);
			if (m == NULL) {
				kg_err_set(err, idx, op, keys[k], "is required: "
				    "a relationship needs from, to and type");
				return -1;
			}
			if ((k < 2 ? kg_str_ok(m, 1, KG_NAME_MAX, 1, why,
			    sizeof(why)) : kg_reltype_ok(m, why,
			    sizeof(why))) == -1) {
				kg_err_set(err, idx, op, keys[k], "%s", why);
				return -1;
			}
			*outs[k] = m->valuestring;
		}
	} else {
		const char *kf = kd->fields[0];

		m = cJSON_GetObjectItemCaseSensitive(fields, kf);
		if (m == NULL) {
			kg_err_set(err, idx, op, kf, "is required: it names "
			    "the %s", kd->name);
			return -1;
		}
		if ((a->kind == KG_FILE ? kg_path_ok(m, why, sizeof(why)) :
		    kg_str_ok(m, 1, KG_NAME_MAX, 1, why, sizeof(why))) == -1) {
			kg_err_set(err, idx, op, kf, "%s", why);
			return -1;
		}
		a->key = m->valuestring;
	}

	/* The other fields. */
	switch (a->op) {
	case KG_OP_UPDATE_CONF:
	case KG_OP_ADD_EVIDENCE:
		kname = a->op == KG_OP_UPDATE_CONF ? "confidence" : "evidence";
		m = cJSON_GetObjectItemCaseSensitive(fields, kname);
		if (m == NULL || cJSON_IsNull(m)) {
			kg_err_set(err, idx, op, kname, "is required");
			return -1;
		}
		if (kg_value_ok(required_conf ? KG_F_CONF : KG_F_SET, m, 1,
		    why, sizeof(why)) == -1) {
			kg_err_set(err, idx, op, kname, "%s", why);
			return -1;
		}
		a->f[0] = m;
		return 0;
	case KG_OP_DEL_PRINCIPLE:
	case KG_OP_DEL_PATTERN:
	case KG_OP_DEL_DECISION:
		return 0;
	default:
		break;
	}
	for (k = 0; k < kd->nf; k++) {
		m = cJSON_GetObjectItemCaseSensitive(fields, kd->f[k].name);
		if (m == NULL)
			continue;
		fi = (int)k;
		/* null clears a field (a set: adds nothing) */
		if (!cJSON_IsNull(m) && kg_value_ok(kd->f[k].type, m, 0, why,
		    sizeof(why)) == -1) {
			kg_err_set(err, idx, op, kd->f[k].name, "%s", why);
			return -1;
		}
		a->f[fi] = m;
	}
	return 0;
}

/* --- the batch: a view of g plus what the batch did so far --- */

struct kg_ov {
	enum kg_kind	 kind;
	const char	*key, *to, *type;
	int		 live;		/* after the batch so far */
	int		 was;		/* in g */
};

struct kg_view {
	const struct kg	*g;
	struct kg_ov	*ov;
	size_t		 n, cap;
	cJSON		*fill;	/* kg_check_fill: the current action's
				   fields, to name the kind it resolved */
};

static struct kg_ov *
kg_view_find(struct kg_view *v, enum kg_kind k, const char *key,
    const char *to, const char *type)
{
	size_t	i;

	for (i = 0; i < v->n; i++)
		if (v->ov[i].kind == k && strcmp(v->ov[i].key, key) == 0 &&
		    (k != KG_RELATIONSHIP || (strcmp(v->ov[i].to, to) == 0 &&
		    strcmp(v->ov[i].type, type) == 0)))
			return &v->ov[i];
	return NULL;
}

static int
kg_view_live(struct kg_view *v, enum kg_kind k, const char *key,
    const char *to, const char *type)
{
	const struct kg_ov	*o = kg_view_find(v, k, key, to, type);
	const struct kg_entity	*e;

	if (o != NULL)
		return o->live;
	e = kg_slot(v->g, k, key, to, type);
	return e != NULL && e->live;
}

/* Notes that the batch leaves (k, key) live or not: 0, -1 ENOMEM. */
static int
kg_view_set(struct kg_view *v, enum kg_kind k, const char *key,
    const char *to, const char *type, int live)
{
	struct kg_ov	*o = kg_view_find(v, k, key, to, type);

	if (o == NULL) {
		if (v->n == v->cap) {
			size_t ncap = v->cap ? v->cap * 2 : 16;

			if ((o = reallocarray(v->ov, ncap, sizeof(*o))) == NULL)
				return -1;
			v->ov = o;
			v->cap = ncap;
		}
		o = &v->ov[v->n++];
		o->kind = k;
		o->key = key;
		o->to = to;
		o->type = type;
		o->was = kg_slot(v->g, k, key, to, type) != NULL &&
		    kg_slot(v->g, k, key, to, type)->live;
	}
	o->live = live;
	return 0;
}

/* 1 when name is a live principle, pattern, decision or file path. */
static int
kg_view_named(struct kg_view *v, const char *name)
{
	return kg_view_live(v, KG_PRINCIPLE, name, NULL, NULL) ||
	    kg_view_live(v, KG_PATTERN, name, NULL, NULL) ||
	    kg_view_live(v, KG_DECISION, name, NULL, NULL) ||
	    kg_view_live(v, KG_FILE, name, NULL, NULL);
}

static int
kg_check_one(struct kg_view *v, const struct kg_act *a, int i,
    struct kg_err *err)
{
	const char	*op = kg_ops[a->op], *kn = kg_kinds[a->kind].name;
	int		 np, nt;

	switch (a->op) {
	case KG_OP_REC_PATTERN:
		if (!kg_view_live(v, KG_PATTERN, a->key, NULL, NULL) &&
		    (a->f[0] == NULL || cJSON_IsNull(a->f[0]))) {
			kg_err_set(err, i, op, "type", "is required for a new "
			    "pattern (\"%.64s\" is not recorded): give its "
			    "type, like \"plexus-model\"", a->key);
			return -1;
		}
		/* FALLTHROUGH */
	case KG_OP_REC_PRINCIPLE:
	case KG_OP_REC_DECISION:
	case KG_OP_REC_FILE:
		return kg_view_set(v, a->kind, a->key, NULL, NULL, 1);
	case KG_OP_LINK:
		if (!kg_view_named(v, a->key)) {
			kg_err_set(err, i, op, "from", "no principle, pattern, "
			    "decision or file understanding is named \"%.64s\": "
			    "record it first (earlier in this batch will do)",
			    a->key);
			return -1;
		}
		if (!kg_view_named(v, a->to)) {
			kg_err_set(err, i, op, "to", "no principle, pattern, "
			    "decision or file understanding is named \"%.64s\": "
			    "record it first (earlier in this batch will do)",
			    a->to);
			return -1;
		}
		return kg_view_set(v, KG_RELATIONSHIP, a->key, a->to, a->type,
		    1);
	case KG_OP_DEL_PRINCIPLE:
	case KG_OP_DEL_PATTERN:
	case KG_OP_DEL_DECISION:
	case KG_OP_ADD_EVIDENCE:
		if (!kg_view_live(v, a->kind, a->key, NULL, NULL)) {
			kg_err_set(err, i, op, "name", "no %s is named "
			    "\"%.64s\": check the name (get-%ss lists them)",
			    kn, a->key, kn);
			return -1;
		}
		if (a->op == KG_OP_ADD_EVIDENCE)
			return 0;
		return kg_view_set(v, a->kind, a->key, NULL, NULL, 0);
	case KG_OP_UPDATE_CONF:
		if (a->kind == KG_RELATIONSHIP && !a->anykind) {
			if (!kg_view_live(v, KG_RELATIONSHIP, a->key, a->to,
			    a->type)) {
				kg_err_set(err, i, op, "from", "no relationship "
				    "\"%.64s\" -%.64s-> \"%.64s\": link them "
				    "first", a->key, a->type, a->to);
				return -1;
			}
			return 0;
		}
		if (!a->anykind) {
			if (!kg_view_live(v, a->kind, a->key, NULL, NULL)) {
				kg_err_set(err, i, op, "name", "no %s is named "
				    "\"%.64s\"", kn, a->key);
				return -1;
			}
			return 0;
		}
		np = kg_view_live(v, KG_PRINCIPLE, a->key, NULL, NULL);
		nt = kg_view_live(v, KG_PATTERN, a->key, NULL, NULL);
		if (np && nt) {
			kg_err_set(err, i, op, "name", "both a principle and a "
			    "pattern are named \"%.64s\": say which with "
			    "\"kind\": \"principle\" or \"pattern\"", a->key);
			return -1;
		}
		if (!np && !nt) {
			kg_err_set(err, i, op, "name", "no principle or "
			    "pattern is named \"%.64s\" (for a relationship "
			    "give \"kind\": \"relationship\" with from, to "
			    "and type)", a->key);
			return -1;
		}
		if (v->fill != NULL && cJSON_AddStringToObject(v->fill, "kind",
		    np ? "principle" : "pattern") == NULL)
			return -1;
		return 0;
	default:
		return 0;
	}
}

static int	kg_check_run(const struct kg *, const cJSON *, size_t,
		    struct kg_err *, int);

int
kg_check(const struct kg *g, const cJSON *actions, size_t max_entities,
    struct kg_err *err)
{
	return kg_check_run(g, actions, max_entities, err, 0);
}

int
kg_check_fill(const struct kg *g, cJSON *actions, size_t max_entities,
    struct kg_err *err)
{
	return kg_check_run(g, actions, max_entities, err, 1);
}

/* kg_check; fill: also names the kind an update-confidence resolved. */
static int
kg_check_run(const struct kg *g, const cJSON *actions, size_t max_entities,
    struct kg_err *err, int fill)
{
	struct kg_view	 v;
	struct kg_act	 a;
	const cJSON	*it;
	char		*s;
	size_t		 total = 0, k, len;
	struct kg_err	 scratch;
	int		 n, i = 0, r = -1;

	if (err == NULL)
		err = &scratch;
	memset(&v, 0, sizeof(v));
	v.g = g;
	if (!cJSON_IsArray(actions)) {
		kg_err_set(err, -1, "", "", "actions must be an array of "
		    "[\"op\", {fields}] pairs");
		return -1;
	}
	n = cJSON_GetArraySize(actions);
	if (n < 1 || n > KG_BATCH_ACTIONS) {
		kg_err_set(err, -1, "", "", "actions must hold 1 to %d actions, "
		    "got %d%s", KG_BATCH_ACTIONS, n, n > 0 ? ": split the "
		    "batch" : "");
		return -1;
	}
	if ((s = cJSON_PrintUnformatted(actions)) == NULL) {
		kg_err_set(err, -1, "", "", "out of memory: try again");
		return -1;
	}
	len = strlen(s);
	cJSON_free(s);
	if (len > KG_BATCH_MAX) {
		kg_err_set(err, -1, "", "", "the actions are %zu bytes as JSON, "
		    "over the limit of %u: split the batch", len,
		    KG_BATCH_MAX);
		return -1;
	}
	cJSON_ArrayForEach(it, actions) {
		if (kg_act_parse(it, i, &a, err) == -1)
			goto out;
		err->msg[0] = '\0';
		/* Actions are [op, {fields}]: kg_act_parse checked it. */
		v.fill = fill ? cJSON_GetArrayItem(it, 1) : NULL;
		if (kg_check_one(&v, &a, i, err) == -1) {
			if (err->msg[0] == '\0')
				kg_err_set(err, i, kg_ops[a.op], "", "out of "
				    "memory: try again");
			goto out;
		}
		i++;
	}
	for (k = 0; k < KG_NKINDS; k++)
		total += g->k[k].live;
	for (k = 0; k < v.n; k++)
		total = total + (size_t)v.ov[k].live - (size_t)v.ov[k].was;
	if (max_entities > 0 && total > max_entities) {
		kg_err_set(err, -1, "", "", "the batch would leave %zu entities, "
		    "over the project's limit of %zu (knowledge-max-entities): "
		    "delete some first or raise the limit", total,
		    max_entities);
		goto out;
	}
	r = 0;
out:
	free(v.ov);
	return r;
}
