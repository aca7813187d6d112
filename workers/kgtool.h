/*
 * The knowledge tools (parley-knowledge(7)): knowledge_query {projectId,
 * query, format?} and knowledge_act {projectId, actions}, built into
 * every session's agents (unless knowledge-tools is off, or an MCP server
 * or a client's tool has the name) and served to MCP clients (kgmcp.c).
 * A call reaches the project's worker through kgcall.c: POST
 * /knowledge/P/query or /knowledge/P/actions.
 */
#ifndef PARLEY_WORKERS_KGTOOL_H
#define PARLEY_WORKERS_KGTOOL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define KGTOOL_QUERY	"knowledge_query"
#define KGTOOL_ACT	"knowledge_act"
#define KGTOOL_N	2

struct kgtool_spec {
	const char	*name;
	const char	*title;
	const char	*description;
	const char	*schema;	/* JSON Schema of its arguments */
	int		 read_only;	/* knowledge_query */
};
/* The two tools, query first. */
extern const struct kgtool_spec kgtool_specs[KGTOOL_N];
/* The spec of tool name, or NULL when it is not one of them. */
const struct kgtool_spec *kgtool_spec(const char *name);

struct sess;
struct wk;
struct llm_tool_def;
struct kgcall_who;

/* 1 when id is a valid projectId (kg_valid_project). */
int		 kgtool_project_ok(const char *id);
/* 1 when the session's agents are offered the knowledge tools. */
int		 kgtool_offered(struct sess *);
/* 1 when name is a knowledge tool and it is offered. */
int		 kgtool_is(struct sess *, const char *name);
/*
 * Fills defs (room for KGTOOL_N) with the offered tools whose name
 * taken(arg, name) does not claim; the count.
 */
size_t		 kgtool_defs(struct sess *, struct llm_tool_def *defs,
		    int (*taken)(void *, const char *), void *arg);
/*
 * Checks a call's arguments (a JSON object) without running it: 0, or
 * -1 with what is wrong (and how to put it right) in msg.
 */
int		 kgtool_check(const char *name, const cJSON *args, char *msg,
		    size_t len);

/*
 * Runs tool name with args: done(arg, is_error, text, code) once, never
 * before returning; text is the result the model or the MCP client reads
 * (the query's answer; the batch's {seq, batchId, actions}; or what went
 * wrong).  batch_id (knowledge_act; may be NULL) makes a repeat of the
 * same call record nothing twice.  NULL when out of memory.
 */
typedef void	(*kgtool_fn)(void *arg, int is_error, const char *text,
		    const char *code);
struct kgtool_call;
struct kgtool_call *kgtool_start(struct wk *, const char *name,
		    const cJSON *args, const char *batch_id,
		    const struct kgcall_who *, kgtool_fn, void *arg);
/*
 * An agent's call id of the session's running turn, with the model's
 * args (JSON text): as the agent (role agent, the session's owner as
 * subject), the batch id derived from the session, the turn and the call
 * id, so a re-run turn records nothing twice.
 */
struct kgtool_call *kgtool_run(struct sess *, const char *name,
		    const char *call_id, const char *args, kgtool_fn,
		    void *arg);
/* Ends a call whose done was not called: it never will be. */
void		 kgtool_cancel(struct kgtool_call *);

#endif
