/*
 * A session's knowledge base: documents its clients add (kb_add, the
 * REST /sessions/{id}/kb), kept in the store beside its log and, while it
 * is owned here, in an in-memory index (kbindex.h) searched by kb_search,
 * by the agents' built-in tool kb_search, and before each model call of a
 * turn (retrieval: the best chunks of the knowledge base and of the
 * host's directory index, index.h, given to the model with their source).
 */
#ifndef PARLEY_WORKERS_KB_H
#define PARLEY_WORKERS_KB_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct sess;
struct sess_client;
struct sess_from;
struct sess_result;
struct proto_in;
struct config;
struct llm_tool_def;

#define KB_TOOL		"kb_search"	/* the agents' built-in tool */
#define KB_META_MAX	(64 * 1024)	/* bytes of a document's metadata */
#define KB_LIMIT_MAX	50		/* hits one search returns */
#define KB_LIMIT	5		/* by default */
#define KB_QUERY_MAX	4096		/* bytes of a query */
#define KB_PREVIEW	100		/* characters of kb_list's preview */
#define KB_QUEUE_MAX	64		/* requests under way (or waiting
					   for the documents to be read) */
#define KB_RAG_WAIT_MS	5000		/* the most a turn waits for its
					   query's vector */
#define KB_DOCID_LEN	20		/* "doc-" and 16 hex digits */

/* 1 when type is one of the kb_* client messages. */
int		 kb_type(const char *type);
/*
 * A kb_* client message (input.c): answered to c through its done
 * callback (r->pending set), or r's error.  kb_add and kb_remove are
 * logged (kb_added, kb_removed); kb_search and kb_list answer the
 * requester only (kb_search_result, kb_list_result in r->reply).
 */
void		 kb_input(struct sess *, struct sess_client *,
		    const struct sess_from *, struct proto_in *,
		    struct sess_result *);

/* --- pure helpers (kb_text.c), for the tests too --- */

/* "doc-" and the first 16 hex digits of SHA-256(sid "\n" msgid). */
void		 kb_doc_id(const char *sid, const char *msgid,
		    char out[KB_DOCID_LEN + 1]);
/* Characters (UTF-8: bytes that do not continue one) of text. */
size_t		 kb_chars(const char *text, size_t len);
/* The bytes of text's first n characters (never a cut character). */
size_t		 kb_prefix(const char *text, size_t len, size_t n);
/*
 * Checks a kb_add's fields: content (1..max_bytes, valid UTF-8) and the
 * optional metadata (an object, at most KB_META_MAX serialised).  0, or
 * -1 with msg saying what was wrong.
 */
int		 kb_check_add(const cJSON *msg, size_t max_bytes,
		    char *msg_out, size_t len);
/* Checks a kb_search's query, limit (1..50) and threshold (0..1). */
int		 kb_check_search(const cJSON *msg, const char **query,
		    size_t *limit, double *threshold, char *msg_out,
		    size_t len);

/* A chunk retrieved for the model, from either source. */
struct kb_hit {
	int		 index;		/* 0: the session's kb, 1: the index */
	const char	*name;		/* documentId or path */
	const char	*meta;		/* kb: the document's meta (JSON) */
	const char	*text;		/* not NUL-terminated */
	size_t		 len;
	unsigned	 line_first, line_last;
	double		 score;
};
/*
 * Chooses what the model is given: the best hits by score (ties: kb
 * first, then by name, then by line), at most top_k, whose bytes / 4 fit
 * in budget tokens (a hit that does not fit is skipped, except the best
 * one, which is cut to fit).  hits is reordered: the chosen come first,
 * best first, keep[i] the bytes of hits[i] kept.  Returns how many.
 */
size_t		 kb_rag_select(struct kb_hit *hits, size_t n, size_t top_k,
		    size_t budget, size_t *keep);
/* The system message giving the n chosen hits (keep[i] bytes each). */
char		*kb_rag_text(const struct kb_hit *hits, const size_t *keep,
		    size_t n);

/* --- retrieval in the turn and the tool --- */

/*
 * Before a turn's first model call: looks up the query (the user's
 * message) in the session's knowledge base and the host's index, logs a
 * rag_context event, and calls done(s, text) with the system message to
 * give the model (malloc'd, the callee's; NULL: nothing).  Returns 0
 * when done was called before returning, 1 when it will be (at most
 * KB_RAG_WAIT_MS later, unless the session leaves memory first).
 */
typedef void	(*kb_rag_fn)(struct sess *, char *text, const char *msgid);
int		 kb_rag(struct sess *, const char *agent, const char *msgid,
		    const char *query, kb_rag_fn done);
/* 1 when the session's agents are offered kb_search. */
int		 kb_tool_offered(struct sess *);
/* 1 when name is the built-in kb_search and it is offered. */
int		 kb_tool(struct sess *, const char *name);
/* Fills def with the tool's definition; 1 when offered, else 0. */
int		 kb_tool_def(struct sess *, struct llm_tool_def *def);
/*
 * Runs the tool with the model's args (JSON): done(arg, is_error, text,
 * code) once, never before returning.  NULL when it could not start.
 */
struct kb_call;
typedef void	(*kb_call_fn)(void *arg, int is_error, const char *text,
		    const char *code);
struct kb_call	*kb_tool_run(struct sess *, const char *args, kb_call_fn,
		    void *arg);
void		 kb_tool_cancel(struct kb_call *);

/* The session's part (sess.h): loading, its state, freeing. */
extern const struct sess_part kb_part;

#endif
