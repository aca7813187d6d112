/*
 * Thoughts: agents' reasoning steps, shared as logged "thought" events
 * that form a DAG (inResponseTo and references to earlier thoughts),
 * rate limited per agent and shown to each recipient as the session's
 * visibility mode (config.thoughtVisibility) allows.  The set of known
 * thoughts lives in meta ("thoughts"), checkpointed after each one and
 * completed from the log's tail by a new owner (thought_adopt).
 */
#ifndef PARLEY_WORKERS_THOUGHT_H
#define PARLEY_WORKERS_THOUGHT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct sess_client;
struct sess_from;
struct sess_result;
struct proto_in;
struct deliver_sub;
struct evt;

#define THOUGHT_MAX		256	/* thoughts one session keeps */
#define THOUGHT_CONTENT_MAX	4096	/* bytes of content */
#define THOUGHT_REFS_MAX	16	/* references of one thought */
#define THOUGHT_REF_MAX		512	/* bytes of one reference */
#define THOUGHT_ID_MAX		64	/* bytes of a thoughtId */
#define THOUGHT_WINDOW_MS	60000	/* thought-rate counts per minute */

enum thought_vis {
	THOUGHT_VIS_ALL,	/* everyone sees every thought */
	THOUGHT_VIS_SELECTIVE,	/* "shared": false ones stay private */
	THOUGHT_VIS_SUMMARY	/* only synthesis is shown in full */
};

/* What a recipient gets of one thought (thought_sees). */
#define THOUGHT_FULL	0
#define THOUGHT_REDUCED	1	/* content, confidence, references left out */
#define THOUGHT_HIDDEN	2	/* a "filtered" event of the same seq */

/* A mode's name as config.thoughtVisibility spells it: 0, or -1. */
int		 thought_vis_parse(const char *, enum thought_vis *);
/* The session's mode (meta's config.thoughtVisibility, default all). */
enum thought_vis thought_mode(struct sess *);
/*
 * What a recipient acting in role (IPC_ROLE_*), as external agent agent
 * ("" for none), may see of a thought by author of category (shared: its
 * "shared" field, default 1) under mode: THOUGHT_FULL, _REDUCED, _HIDDEN.
 */
int		 thought_sees(enum thought_vis, int role, const char *agent,
		    const char *author, const char *category, int shared);
/*
 * Checks a thought object's fields and bounds: 0, or -1 with msg naming
 * the field and what to do.
 */
int		 thought_check(const cJSON *thought, char *msg, size_t len);
/*
 * Checks thought's links against nodes (meta's "thoughts" array): its
 * thoughtId is new, inResponseTo and every reference that names a
 * thought ("th_...") name a known one, none names itself.  0, or -1 with
 * msg.
 */
int		 thought_dag_check(const cJSON *nodes, const cJSON *thought,
		    char *msg, size_t len);
/* 0 when nodes' links form no cycle, -1 with msg naming one on it. */
int		 thought_acyclic(const cJSON *nodes, char *msg, size_t len);
/*
 * Shares a thought of agent agent_id (an internal agent's reasoning, or
 * an external agent's thought_share): validates it (thought is borrowed),
 * applies thought-rate (a throttle_warning to the agent's connections
 * near it), assigns a thoughtId when it has none, logs the "thought"
 * event and checkpoints meta.  Returns its seq, or 0 with r's error set
 * (BAD_REQUEST, RATE_LIMITED, SESSION_ENDED, OVERLOADED).  Needs no
 * connection.
 */
uint64_t	 thought_log(struct sess *, const char *agent_id,
		    const cJSON *thought, struct sess_result *r);
/*
 * Who may send thought_share and whether its thought is well formed,
 * without the session's state (a follower checks before forwarding): 0,
 * or -1 with r's error set.
 */
int		 thought_share_check(const struct sess_from *,
		    const cJSON *msg, struct sess_result *);
/*
 * On a follower, before a thought_share goes to the owner's inbox:
 * thought_share_check, and its links against the thoughts this follower
 * has seen (those its client can have seen through it), so the common
 * mistakes are answered here; the owner checks again.  0, or -1 with r.
 */
int		 thought_forward_check(struct sess *, const struct sess_from *,
		    const cJSON *msg, struct sess_result *);
/* thought_share from a client (input.c): logged, or r's error. */
void		 thought_share(struct sess *, struct sess_client *,
		    const struct sess_from *, struct proto_in *,
		    struct sess_result *);
/* A logged thought event (seq, JSON) meta may not hold yet: kept. */
void		 thought_adopt(struct sess *, uint64_t seq, const char *json,
		    size_t len);
/* struct deliver's view: what sub may see of the thought event e. */
struct evt	*thought_view(void *sess, const struct deliver_sub *,
		    struct evt *e);
/*
 * GET /sessions/{id}/thoughts: {"nodes":[...],"edges":[...]} as a
 * requester in role, as agent ("" none), may see them; fagent and fcat
 * (NULL: any) keep the nodes of one agent, one category.  A new object.
 */
cJSON		*thought_graph(struct sess *, int role, const char *agent,
		    const char *fagent, const char *fcat);
/* The session leaves memory: its rate windows go. */
void		 thought_free(struct sess *);
/* The session's part (sess.h): its delivery view, the log's tail. */
extern const struct sess_part thought_part;

#endif
