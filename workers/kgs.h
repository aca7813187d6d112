/*
 * A project's knowledge session, kg:P (parley-knowledge(7)): its log of
 * knowledge_batch and knowledge_stale events folded into a struct kg
 * (kg.h) wherever the session is loaded, owner and followers alike; the
 * messages knowledge_act and knowledge_query; the HTTP endpoints
 * /knowledge/P[/actions|/query|/stream] (kgs_http.c); a snapshot of the
 * fold kept as the store document "snapshot"; the staleness checks of
 * the owner (kgstale.h).
 */
#ifndef PARLEY_WORKERS_KGS_H
#define PARLEY_WORKERS_KGS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct sess_client;
struct sess_from;
struct sess_result;
struct proto_in;
struct conn;
struct kg;
struct wk;

#define KGS_SNAP_EVERY	64	/* batches between two snapshots */
#define KGS_SNAP_DOC	"snapshot"	/* the store document's name */
#define KGS_OPS_MAX	256	/* requests waiting in one session */
#define KGS_WAIT_MS	10000	/* a follower waits this long to see the
				   batch it posted come back in the log */
#define KGS_SEQ_MAX	((UINT64_C(1) << 53) - 1)	/* the highest ?at= */
#define KGS_STALE_MS	1000	/* the owner's staleness timer */

/* 1 when sid is a project's knowledge session ("kg:" and a projectId). */
int		 kgs_session(const char *sid);
/* 1 when type is knowledge_act or knowledge_query. */
int		 kgs_type(const char *type);

/*
 * input.c: a client message to a kg: session, or a knowledge_* message to
 * any session.  Returns 1 when it took the message (r filled, or
 * r->pending and answered later through c->done), 0 when it is neither.
 */
int		 kgs_input(struct sess *, struct sess_client *,
		    const struct sess_from *, struct proto_in *,
		    struct sess_result *);

/*
 * kgs_http.c, route.c's hooks.  kgs_http_session: for a /knowledge/P
 * path with a valid P, the session id "kg:P" into sid and whether the
 * request may create it; 1, else 0.  kgs_http: for a /knowledge/ path,
 * 1 when answered (or answering), 2 (WebSocket) or 3 (SSE) when it is
 * /knowledge/P/stream, with "kg:P" in sid, for route.c's session stream;
 * 0 when the path is not a knowledge one.  kgs_http_reply: the answer of
 * a request kgs_http started (conn's kg_kind set).
 */
int		 kgs_http_session(struct conn *, char *sid, size_t sidlen,
		    int *create);
int		 kgs_http(struct conn *, char *sid, size_t sidlen);
void		 kgs_http_reply(struct conn *, struct sess *,
		    const struct sess_result *);

/* --- for kgs_http.c --- */

enum kgs_kind { KGS_ACT, KGS_QUERY, KGS_EXPORT };
/*
 * Runs a request on s's graph once it is loaded: an act (msg a
 * knowledge_act), a query (msg a knowledge_query), or an export (msg
 * {"at"?:"SEQ"}, digits: the answer's reply is kg_export_json of the graph, with
 * "batches" and "hlc", as JSON text; md 1: kg_export_md's text).  The
 * answer goes to c->done (r->pending set) or into r.
 */
void		 kgs_run(struct sess *, struct sess_client *,
		    const struct sess_from *, enum kgs_kind, int md,
		    const char *id, const cJSON *msg, struct sess_result *);
/*
 * Checks an act for project sid that has no log yet, against an empty
 * graph: 0, or -1 with r filled as kgs_run would answer it (r->reply, when
 * set, is malloc'd: the caller frees it).  A refused batch creates nothing.
 */
int		 kgs_check_new(struct wk *, const char *sid,
		    const struct sess_from *, const cJSON *msg,
		    struct sess_result *);
/* The answer of an export of g (md 0: JSON text; 1: Markdown); malloc'd. */
char		*kgs_export(const struct kg *g, int md);
/* A query's answer body for g: {"format","result"} or {"format","error"}. */
cJSON		*kgs_query(const struct kg *g, const char *query,
		    const char *format);

/* The session's part (sess.h). */
extern const struct sess_part kgs_part;

#endif
