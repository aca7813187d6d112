/*
 * A project's knowledge graph (parley-knowledge(7)): principles, patterns,
 * decisions, file understandings and relationships, as the fold of the
 * project's log of accepted action batches.  Pure: no I/O, no clock (the
 * caller passes times), one graph per thread.
 *
 * The log holds two event types:
 *   knowledge_batch {"batchId","hlc","origin","time","by"?,"actions":[...]}
 *     actions: [["record-principle",{...}], ...] exactly as the client sent
 *     them, after kg_check accepted them against the writer's graph.
 *   knowledge_stale {"hlc","origin","path","hash","was","entities":
 *     [{"kind","name"}...]}: the file at path now has hash (was: the hash
 *     its understanding recorded); it and the entities marked stale.
 *
 * Merge rules (so any two processes folding the same batches, in any
 * order, reach the same graph):
 *   - A stamp is (hlc, origin, action index in the batch), compared in
 *     that order (origin by strcmp).  hlc is a hybrid logical clock:
 *     kg_clock_next() never goes below wall time * KG_HLC_PER_MS nor below
 *     one past any stamp this process has folded, so a writer whose clock
 *     is behind still writes after everything it has seen.
 *   - A scalar field (and a plain list field: locations, concepts,
 *     importantSymbols) is a last-writer-wins register: the write with the
 *     higher stamp holds, whatever order the batches arrive in.
 *   - A set field (tags, relatedPrinciples, relatedPatterns,
 *     relatedDecisions, relatedFiles, evidence) is add-wins: the union of
 *     every add since the entity's last deletion, ordered by value
 *     (evidence: by first add stamp, then value).
 *   - delete-* tombstones the entity at its stamp: writes stamped before
 *     it (concurrent or older) are gone and do not bring it back; a record
 *     stamped after it creates the entity anew with only its own fields.
 *   - A relationship is keyed by (from, to, type).
 *   - knowledge_stale marks an entity stale at its stamp; a record of that
 *     entity stamped later clears it.
 */
#ifndef PARLEY_KG_H
#define PARLEY_KG_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define KG_SID_PREFIX	"kg:"	/* a project's log is the session "kg:ID" */
#define KG_PROJECT_MAX	100	/* bytes of a projectId: [A-Za-z0-9._-],
				   not starting with '.' */
#define KG_NAME_MAX	256	/* bytes of a name, a path, a type */
#define KG_TEXT_MAX	8192	/* bytes of a description, rationale,
				   summary */
#define KG_ITEM_MAX	1024	/* bytes of one list or set item */
#define KG_LIST_MAX	64	/* items of one list field in one action */
#define KG_BATCH_ACTIONS 256	/* actions in one batch */
#define KG_BATCH_MAX	(1u << 20)	/* bytes of a batch's actions, as
					   JSON */
#define KG_HLC_PER_MS	1000	/* hlc = ms * 1000 + counter: exact in a
				   JSON number (< 2^53) */
#define KG_HLC_LIMIT	(UINT64_C(1) << 53)	/* every stamp is below it:
						   a fold ignores the rest */

enum kg_kind {
	KG_PRINCIPLE, KG_PATTERN, KG_DECISION, KG_FILE, KG_RELATIONSHIP,
	KG_NKINDS
};

struct kg;		/* one project's graph */
struct kg_entity;	/* owned by its graph */

/* 1 when id is a valid projectId. */
int		 kg_valid_project(const char *id);
/* "principle", "pattern", "decision", "file", "relationship". */
const char	*kg_kind_name(enum kg_kind);

struct kg	*kg_new(const char *project);	/* NULL: ENOMEM/EINVAL */
void		 kg_free(struct kg *);
const char	*kg_project(const struct kg *);
uint64_t	 kg_seq(const struct kg *);	/* last log seq folded */
uint64_t	 kg_hlc(const struct kg *);	/* highest stamp folded */
size_t		 kg_count(const struct kg *, enum kg_kind);	/* live */
uint64_t	 kg_batches(const struct kg *);	/* batches folded */

/* --- reading (the query interpreter, the views) ---
 * Pointers stay valid until the graph next changes.  Only live (not
 * deleted) entities are ever returned. */

enum kg_vtype { KG_V_NONE, KG_V_STR, KG_V_NUM, KG_V_BOOL, KG_V_LIST };
struct kg_val {
	enum kg_vtype		 type;	/* NONE: the field is not set */
	const char		*str;	/* STR */
	double			 num;	/* NUM; BOOL: 0 or 1 */
	const char *const	*list;	/* LIST: n strings */
	size_t			 n;
};

enum kg_kind	 kg_entity_kind(const struct kg_entity *);
/* Its key: a name; a file's path; a relationship's from. */
const char	*kg_entity_name(const struct kg_entity *);
/*
 * The fields of a kind, NULL-terminated, in the order answers print
 * them: the seed's names in camelCase (name, description, confidence,
 * locations, evidence, relatedPrinciples, tags; name, type, description,
 * confidence, location, relatedPatterns, tags; name, description,
 * rationale, status, impact, locations, relatedDecisions; path, hash,
 * summary, concepts, importantSymbols, relatedFiles, lastAnalyzed; from,
 * to, type, description, confidence), then for every kind "stale" (BOOL)
 * and "seq" (NUM: the log seq of its last change).
 */
const char *const *kg_fields(enum kg_kind);
/* Reads one field: 0 (out set, NONE when unset), -1 no such field. */
int		 kg_field(const struct kg_entity *, const char *field,
		    struct kg_val *out);

/*
 * Live entities of a kind, ordered by key (strcmp; relationships by from,
 * to, type): the count; out (may be NULL) gets up to max of them.
 */
size_t		 kg_all(const struct kg *, enum kg_kind,
		    const struct kg_entity **out, size_t max);
/* The live entity of that kind and key, or NULL (relationships: NULL). */
const struct kg_entity *kg_get(const struct kg *, enum kg_kind,
		    const char *key);
/* Relationships whose from (dir 0) or to (dir 1) is name, ordered. */
size_t		 kg_links(const struct kg *, const char *name, int dir,
		    const struct kg_entity **out, size_t max);
/*
 * Entities any of whose string fields contain text (ASCII case-folded),
 * in kind order then key order.
 */
size_t		 kg_search(const struct kg *, const char *text,
		    const struct kg_entity **out, size_t max);
/*
 * Entities that refer to path: its file understanding, entities with a
 * location or locations item "path" or "path:..." , relationships from or
 * to it.  Ordered as kg_search.
 */
size_t		 kg_refs(const struct kg *, const char *path,
		    const struct kg_entity **out, size_t max);

/* --- writing ---
 *
 * What was wrong with a batch: the action (0-based; -1 the batch as a
 * whole), its name, the field ("" for none) and a message that says what
 * to do, e.g. action 2 (record-pattern): field "confidence": must be a
 * number from 0 to 1, got "high".
 */
struct kg_err {
	int	action;
	char	op[32];
	char	field[32];
	char	msg[384];
};
/*
 * Checks a batch of actions (the JSON array) against g without changing
 * it: every action's name, required fields, types and bounds, and what
 * must exist (a delete, update-confidence or add-evidence names a live
 * entity; link-entities' from and to name live entities or file paths,
 * those recorded earlier in the same batch included).  The whole batch
 * would leave at most max_entities live entities.  0, or -1 with err.
 */
int		 kg_check(const struct kg *g, const cJSON *actions,
		    size_t max_entities, struct kg_err *err);
/*
 * kg_check, and once the batch passes, each update-confidence without a
 * kind gets the "kind" it resolved to (the one principle or pattern of
 * that name), so that every process folds it onto the same entity
 * whatever it holds when the batch arrives.  The writer logs the filled
 * batch.  On -1 some actions may already be filled: drop the batch.
 */
int		 kg_check_fill(const struct kg *g, cJSON *actions,
		    size_t max_entities, struct kg_err *err);
/* The next stamp: max(now_ms * KG_HLC_PER_MS, *clock + 1), kept in
 * *clock.  A process keeps one clock and raises it with kg_hlc() of
 * every graph it folds.  Never KG_HLC_LIMIT or above (a stamp there would
 * be ignored by every fold): a clock raised that far stays at
 * KG_HLC_LIMIT - 1, whose batches then lose ties by origin. */
uint64_t	 kg_clock_next(uint64_t *clock, uint64_t now_ms);
/* The knowledge_batch body for actions (copied); by may be NULL. */
cJSON		*kg_batch_body(const cJSON *actions, const char *batch_id,
		    uint64_t hlc, const char *origin, uint64_t time_ms,
		    const char *by);
/*
 * Folds one event of the log (seq > kg_seq(g), else ignored): applies a
 * knowledge_batch or knowledge_stale by the merge rules above; other
 * types only advance the seq.  0, or -1 (ENOMEM, or a body that is not a
 * batch at all: g unchanged but for the seq).
 */
int		 kg_fold(struct kg *, uint64_t seq, const char *type,
		    const cJSON *body);

/* --- snapshot, views --- */

/* All state, stamps and tombstones included (JSON text, malloc'd). */
char		*kg_snapshot(const struct kg *, size_t *len);
/* The graph a snapshot describes, or NULL with a message in err. */
struct kg	*kg_restore(const char *json, size_t len, char *err,
		    size_t errlen);
/* One entity's public fields and "kind" (no stamps). */
cJSON		*kg_entity_json(const struct kg_entity *);
/* {"projectId","seq","principles":[],"patterns":[],"decisions":[],
 *  "files":[],"relationships":[]}: live entities, public fields. */
cJSON		*kg_export_json(const struct kg *);
/* The same as readable Markdown (malloc'd). */
char		*kg_export_md(const struct kg *);

#endif
