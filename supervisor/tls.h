/*
 * TLS listeners: the supervisor does the handshake, then relays the
 * decrypted bytes over a socketpair whose other end takes the plain path
 * (listener_take), so routing and the hand-off to the worker that owns
 * the session are the same as for a plain connection.  Why, and what it
 * costs: docs/design-notes.md, "TLS".
 */
#ifndef PARLEY_SUP_TLS_H
#define PARLEY_SUP_TLS_H

#include <stddef.h>

struct config;
struct evbuffer;
struct sup;
struct ssl_ctx_st;

/*
 * A server context from conf's tls-* lines: certificate chain and key
 * loaded and checked to match, protocols and ciphers set.  NULL with err
 * "FILE:LINE: what" on an error; NULL with err empty when conf has no tls
 * listener.
 */
struct ssl_ctx_st *tls_ctx_new(const struct config *, char *err,
		    size_t errlen);
void		 tls_ctx_free(struct ssl_ctx_st *);
/*
 * Makes ctx (taken; may be NULL) the one new connections get; those
 * already open keep the one they started with.
 */
void		 tls_use(struct sup *, struct ssl_ctx_st *ctx);
/* A connection accepted on a tls listener (takes fd). */
void		 tls_accept(struct sup *, int fd, const char *peer);
/* Appends the parley_tls_* families to /metrics (none without a tls
 * listener). */
void		 tls_metrics(struct sup *, struct evbuffer *);
/* Shutting down: drops the handshakes in progress; relays end with
 * their worker's side. */
void		 tls_stop(struct sup *);
/* In a worker after fork: scrubs the key and session keys it inherited. */
void		 tls_forget(struct sup *);
/* The loop is over: frees every connection and the context. */
void		 tls_free(struct sup *);

#endif
