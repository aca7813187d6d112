/*
 * The knowledge graph's insides, shared by src/kg.c (model, fold, reading),
 * src/kg_check.c (the validator) and src/kg_view.c (snapshot, restore,
 * exports).  Nothing outside those files includes it.
 */
#ifndef PARLEY_KG_INT_H
#define PARLEY_KG_INT_H

#include <stddef.h>
#include <stdint.h>

#include "parley/kg.h"

#define KG_FMAX		6	/* non-key fields of the widest kind */
#define KG_RELTYPE_MAX	64	/* bytes of a relationship type */

/* How a field's value is checked and merged. */
enum kg_ftype {
	KG_F_NAME,	/* 1..KG_NAME_MAX, no control characters */
	KG_F_TEXT,	/* up to KG_TEXT_MAX */
	KG_F_ITEM,	/* one string up to KG_ITEM_MAX */
	KG_F_CONF,	/* number 0..1 */
	KG_F_IMPACT,	/* integer 0..10 */
	KG_F_STATUS,	/* active|proposed|deprecated|superseded */
	KG_F_HASH,	/* 64 lowercase hex digits */
	KG_F_TIME,	/* integer ms >= 0 */
	KG_F_LIST,	/* last-writer-wins list of items */
	KG_F_SET	/* add-wins set of items */
};

struct kg_fdesc {
	const char	*name;
	enum kg_ftype	 type;
};

struct kg_kdesc {
	const char		*name;		/* "principle" */
	const char		*plural;	/* "principles" */
	const char *const	*fields;	/* kg_fields() */
	size_t			 nkey;		/* key fields first: 1 or 3 */
	size_t			 nf;		/* non-key fields */
	struct kg_fdesc		 f[KG_FMAX];
};
extern const struct kg_kdesc kg_kinds[KG_NKINDS];

/* A write's stamp; origin is interned in its graph, "" for none. */
struct kg_stamp {
	uint64_t	 hlc;
	const char	*origin;
	uint32_t	 idx;
};

/* One member of an add-wins set: its add stamps after the last delete. */
struct kg_sitem {
	char		*val;
	struct kg_stamp	*st;		/* ascending, distinct */
	size_t		 nst;
};

/* One non-key field: a register (t, s, num, list) or a set (items). */
struct kg_fv {
	struct kg_stamp	 st;		/* register: the winning write */
	enum kg_vtype	 t;
	char		*s;
	double		 num;
	char		**list;		/* LIST; a set's ordered view */
	size_t		 n;
	struct kg_sitem	*items;		/* set: ordered by value */
	size_t		 ni;
	size_t		 icap;
};

struct kg_entity {
	enum kg_kind		 kind;
	char			*key;	/* name, path, a relationship's from */
	char			*to;	/* relationship */
	char			*type;	/* relationship */
	struct kg_stamp		 rec;	/* the latest record */
	struct kg_stamp		 del;	/* the latest delete */
	struct kg_stamp		 stale;	/* the latest stale mark */
	char			*stale_hash;
	uint64_t		 seq;	/* log seq of its last change */
	int			 live;
	struct kg_entity	*hnext;
	struct kg_fv		 fv[];	/* kg_kinds[kind].nf of them */
};

struct kg_kindset {
	struct kg_entity	**all;	/* every slot, live or not */
	size_t			 n;
	size_t			 cap;
	size_t			 nsorted;	/* all[0..nsorted) in key order */
	size_t			 live;
};

struct kg {
	char			*project;
	uint64_t		 seq;
	uint64_t		 hlc;
	uint64_t		 batches;
	struct kg_entity	**ht;	/* (kind, key) -> slot, chained */
	size_t			 htcap;
	size_t			 nslots;
	struct kg_kindset	 k[KG_NKINDS];
	char			**origins;	/* interned */
	size_t			 norigins;
	size_t			 ocap;
};

/* Action names, in enum order. */
enum kg_op {
	KG_OP_REC_PRINCIPLE, KG_OP_REC_PATTERN, KG_OP_REC_DECISION,
	KG_OP_REC_FILE, KG_OP_LINK, KG_OP_DEL_PRINCIPLE, KG_OP_DEL_PATTERN,
	KG_OP_DEL_DECISION, KG_OP_UPDATE_CONF, KG_OP_ADD_EVIDENCE, KG_NOPS
};
extern const char *const kg_ops[KG_NOPS];

/*
 * One action, parsed and checked for syntax (not for what must exist).
 * Pointers point into the action's JSON.
 */
struct kg_act {
	enum kg_op	 op;
	enum kg_kind	 kind;		/* what it writes */
	int		 anykind;	/* update-confidence without kind */
	const char	*key;
	const char	*to;
	const char	*type;
	const cJSON	*f[KG_FMAX];	/* by kg_kinds[kind].f; JSON null clears */
};

int	 kg_act_parse(const cJSON *action, int idx, struct kg_act *,
	    struct kg_err *);
void	 kg_err_set(struct kg_err *, int action, const char *op,
	    const char *field, const char *fmt, ...)
	    __attribute__((format(printf, 5, 6)));

int	 kg_stamp_cmp(const struct kg_stamp *, const struct kg_stamp *);
const char *kg_intern(struct kg *, const char *origin);
struct kg_entity *kg_slot(const struct kg *, enum kg_kind, const char *key,
	    const char *to, const char *type);
struct kg_entity *kg_slot_make(struct kg *, enum kg_kind, const char *key,
	    const char *to, const char *type);
/* Every slot of a kind in key order (sorts the tail on demand). */
struct kg_entity **kg_sorted(const struct kg *, enum kg_kind, size_t *n);
/* Recomputes e->live and the kind's live count. */
void	 kg_relive(struct kg *, struct kg_entity *);
/* Rebuilds a set field's ordered view; 0 or -1 ENOMEM. */
int	 kg_set_view(struct kg_entity *, size_t fi);
/* Adds one stamp of val to set field fv: 1 new, 0 had it, -1 ENOMEM. */
int	 kg_set_add(struct kg_fv *, const char *val, const struct kg_stamp *);
/* Writes field fi at st by the merge rules: 1 changed, 0 not, -1 ENOMEM. */
int	 kg_write(struct kg_entity *, size_t fi, const cJSON *v,
	    const struct kg_stamp *);
/* 1 when a stale mark is newer than the last record. */
int	 kg_is_stale(const struct kg_entity *);
/* Index of field name in kind's non-key fields, or -1. */
int	 kg_fidx(enum kg_kind, const char *name);

#endif
