/*
 * TLS listeners.  A connection accepted on one is handshaken here (OpenSSL
 * through libevent's bufferevent_openssl: non-blocking, bounded by
 * handshake-timeout); then a socketpair stands in for it: one end takes the
 * plain path (listener_take, with the client's real address), so reading
 * the request head, authentication, routing and the hand-off to the worker
 * that owns the session are unchanged; the supervisor relays between the
 * TLS connection and the other end until either side is done.  The relay
 * holds at most RELAY_MAX bytes each way and stops reading a side whose
 * peer is that far behind.  docs/design-notes.md, "TLS", says why the
 * supervisor and not the worker holds the TLS state.
 */
#include <sys/socket.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/util.h"
#include "supervisor.h"
#include "tls.h"

#define TLS_HANDSHAKES_MAX	4096	/* as many as plain pending heads */
#define RELAY_MAX		(64 * 1024)	/* per direction */
#define FLUSH_MS		10000	/* last bytes to a slow client */
#define LINGER_MS		2000	/* its close_notify after ours */

enum tls_state { TLS_HANDSHAKE, TLS_RELAY, TLS_CLOSING };

struct tls_conn {
	TAILQ_ENTRY(tls_conn)	 entry;
	struct tls		*t;
	struct bufferevent	*net;	/* the client, through TLS */
	struct bufferevent	*plain;	/* our end of the socketpair */
	struct event		*tmo;	/* handshake, flush or linger */
	enum tls_state		 state;
	int			 net_eof;	/* the client sent all */
	int			 plain_eof;	/* the worker sent all */
	int			 plain_shut;	/* SHUT_WR done on plain */
	char			 peer[64];
	struct guard_local	 local;		/* the address it reached */
};

struct tls {
	struct sup		*sup;
	SSL_CTX			*ctx;	/* for new connections */
	TAILQ_HEAD(, tls_conn)	 conns;
	unsigned		 nhandshake;
	unsigned		 nrelay;	/* relaying or closing */
	uint64_t		 done;		/* handshakes that succeeded */
	uint64_t		 failed;	/* or failed or timed out */
	uint64_t		 refused;	/* over a limit, not tried */
};

/* The first reason OpenSSL queued, for a message; clears the queue. */
static const char *
ssl_reason(void)
{
	unsigned long e = ERR_peek_error();
	const char *r;

	ERR_clear_error();
	/* A file that cannot be opened: its errno, not "system lib". */
	if (ERR_SYSTEM_ERROR(e))
		return strerror((int)ERR_GET_REASON(e));
	if (ERR_GET_LIB(e) == ERR_LIB_X509 &&
	    ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
		return "does not match the certificate in tls-certificate";
	r = ERR_reason_error_string(e);
	return r != NULL ? r : "unknown error";
}

/* An encrypted key would make OpenSSL prompt on a terminal: refuse it. */
static int
no_passphrase(char *buf, int size, int rw, void *arg)
{
	return 0;
}

/* HTTP/1.1 is all parleyd speaks: say so to a client that offers ALPN. */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *sel;

	if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in,
	    inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *
ctx_fail(SSL_CTX *ctx, char *err, size_t errlen, const struct config *conf,
    unsigned line, const char *what, const char *path, const char *reason)
{
	snprintf(err, errlen, "%s:%u: %s %s: %s", conf->path ? conf->path :
	    "(defaults)", line, what, path, reason);
	SSL_CTX_free(ctx);
	return NULL;
}

struct ssl_ctx_st *
tls_ctx_new(const struct config *conf, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	X509 *cert;

	err[0] = '\0';
	if (conf->ntls == 0)
		return NULL;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		snprintf(err, errlen, "TLS: %s", ssl_reason());
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, conf->tls_protocols & CFG_TLS_1_2 ?
	    TLS1_2_VERSION : TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, conf->tls_protocols & CFG_TLS_1_3 ?
	    TLS1_3_VERSION : TLS1_2_VERSION);
	/* Renegotiation is a client-driven CPU cost with no use here. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
	/* An idle WebSocket then holds no 34 KB of record buffers. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (conf->tls_ciphers != NULL &&
	    SSL_CTX_set_cipher_list(ctx, conf->tls_ciphers) != 1)
		return ctx_fail(ctx, err, errlen, conf, conf->tls_ciphers_line,
		    "tls-ciphers", conf->tls_ciphers, "OpenSSL knows no "
		    "TLS 1.2 cipher in this list (see openssl-ciphers(1))");
	if (SSL_CTX_use_certificate_chain_file(ctx, conf->tls_cert) != 1)
		return ctx_fail(ctx, err, errlen, conf, conf->tls_cert_line,
		    "tls-certificate", conf->tls_cert, ssl_reason());
	if (SSL_CTX_use_PrivateKey_file(ctx, conf->tls_key,
	    SSL_FILETYPE_PEM) != 1)
		return ctx_fail(ctx, err, errlen, conf, conf->tls_key_line,
		    "tls-key", conf->tls_key, ssl_reason());
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		return ctx_fail(ctx, err, errlen, conf, conf->tls_key_line,
		    "tls-key", conf->tls_key, "does not match the "
		    "certificate in tls-certificate");
	}
	/* Not an error: the operator may be about to replace it. */
	if ((cert = SSL_CTX_get0_certificate(ctx)) != NULL &&
	    X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
		log_warnx("tls-certificate %s has expired: clients will "
		    "refuse it", conf->tls_cert);
	return ctx;
}

void
tls_ctx_free(struct ssl_ctx_st *ctx)
{
	SSL_CTX_free(ctx);
}

static struct tls *
tls_get(struct sup *sup)
{
	struct tls *t;

	if (sup->tls != NULL)
		return sup->tls;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		fatal("calloc");
	t->sup = sup;
	TAILQ_INIT(&t->conns);
	sup->tls = t;
	return t;
}

void
tls_use(struct sup *sup, struct ssl_ctx_st *ctx)
{
	struct tls *t = tls_get(sup);

	/* Each connection's SSL holds a reference to the context it
	 * was made from: those keep the old certificate until they end. */
	SSL_CTX_free(t->ctx);
	t->ctx = ctx;
}

static void
conn_free(struct tls_conn *c)
{
	struct tls *t = c->t;

	TAILQ_REMOVE(&t->conns, c, entry);
	if (c->state == TLS_HANDSHAKE)
		t->nhandshake--;
	else
		t->nrelay--;
	/* net closes the client's socket and frees its SSL. */
	bufferevent_free(c->net);
	if (c->plain != NULL)
		bufferevent_free(c->plain);
	event_free(c->tmo);
	free(c);
}

static void
conn_timer(struct tls_conn *c, uint64_t ms)
{
	struct timeval tv;

	util_tv(&tv, ms);
	evtimer_add(c->tmo, &tv);
}

static void
conn_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct tls_conn *c = arg;

	if (c->state == TLS_HANDSHAKE) {
		log_debug("%s: TLS handshake not done in time", c->peer);
		c->t->failed++;
	}
	conn_free(c);
}

static void
linger_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);

	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
linger_event(struct bufferevent *bev, short what, void *arg)
{
	conn_free(arg);
}

/*
 * The worker is done and the client has every byte: send close_notify,
 * then read what the client still sends until it closes or LINGER_MS, as
 * listener.c does for a plain answer: closing with unread bytes would
 * reset the connection and could lose the answer.
 */
static void
conn_finish(struct tls_conn *c)
{
	if (c->plain != NULL) {
		bufferevent_free(c->plain);
		c->plain = NULL;
	}
	if (c->net_eof) {
		conn_free(c);
		return;
	}
	c->state = TLS_CLOSING;
	SSL_shutdown(bufferevent_openssl_get_ssl(c->net));
	ERR_clear_error();
	shutdown(bufferevent_getfd(c->net), SHUT_WR);
	bufferevent_setcb(c->net, linger_read, NULL, linger_event, c);
	bufferevent_setwatermark(c->net, EV_READ, 0, 0);
	bufferevent_enable(c->net, EV_READ);
	conn_timer(c, LINGER_MS);
}

/* The client sent all it will: tell the worker once it has every byte. */
static void
plain_shut(struct tls_conn *c)
{
	if (c->plain_shut || c->plain == NULL ||
	    evbuffer_get_length(bufferevent_get_output(c->plain)) != 0)
		return;
	c->plain_shut = 1;
	shutdown(bufferevent_getfd(c->plain), SHUT_WR);
}

/* Client to worker. */
static void
net_read(struct bufferevent *bev, void *arg)
{
	struct tls_conn *c = arg;
	struct evbuffer *out;

	if (c->plain == NULL)
		return;
	out = bufferevent_get_output(c->plain);
	evbuffer_add_buffer(out, bufferevent_get_input(bev));
	if (evbuffer_get_length(out) >= RELAY_MAX)
		bufferevent_disable(bev, EV_READ);
}

/* Worker to client. */
static void
plain_read(struct bufferevent *bev, void *arg)
{
	struct tls_conn *c = arg;
	struct evbuffer *out = bufferevent_get_output(c->net);

	evbuffer_add_buffer(out, bufferevent_get_input(bev));
	if (evbuffer_get_length(out) >= RELAY_MAX)
		bufferevent_disable(bev, EV_READ);
}

/* The worker took bytes: read the client again, or pass its EOF on. */
static void
plain_write(struct bufferevent *bev, void *arg)
{
	struct tls_conn *c = arg;

	if (c->net_eof)
		plain_shut(c);
	else
		bufferevent_enable(c->net, EV_READ);
}

/* The client took bytes: read the worker again, or end once all are out. */
static void
net_write(struct bufferevent *bev, void *arg)
{
	struct tls_conn *c = arg;

	if (c->state != TLS_RELAY)
		return;
	if (!c->plain_eof)
		bufferevent_enable(c->plain, EV_READ);
	else if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_finish(c);
}

static void
plain_event(struct bufferevent *bev, short what, void *arg)
{
	struct tls_conn *c = arg;

	/* Either way the worker is done with this connection. */
	c->plain_eof = 1;
	bufferevent_disable(bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->net)) == 0) {
		conn_finish(c);
		return;
	}
	/* A client that stopped reading gets FLUSH_MS for the rest. */
	conn_timer(c, FLUSH_MS);
}

/*
 * The handshake is done: a socketpair stands in for the connection, one
 * end read as a plain one would be, the other relayed here.
 */
static void
conn_relay(struct tls_conn *c)
{
	struct tls *t = c->t;
	int sv[2];

	evtimer_del(c->tmo);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    sv) == -1) {
		log_warn("%s: TLS relay socketpair", c->peer);
		conn_free(c);
		return;
	}
	if ((c->plain = bufferevent_socket_new(t->sup->base, sv[0],
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(sv[0]);
		close(sv[1]);
		conn_free(c);
		return;
	}
	c->state = TLS_RELAY;
	t->nhandshake--;
	t->nrelay++;
	t->done++;
	/* A side is read only while the other is under RELAY_MAX behind;
	 * its write callback (at half) reads again. */
	bufferevent_setwatermark(c->plain, EV_READ, 0, RELAY_MAX);
	bufferevent_setwatermark(c->plain, EV_WRITE, RELAY_MAX / 2, 0);
	bufferevent_setwatermark(c->net, EV_WRITE, RELAY_MAX / 2, 0);
	bufferevent_setcb(c->plain, plain_read, plain_write, plain_event, c);
	bufferevent_enable(c->plain, EV_READ | EV_WRITE);
	bufferevent_enable(c->net, EV_READ | EV_WRITE);
	/* Bytes that came with the handshake's last flight. */
	if (evbuffer_get_length(bufferevent_get_input(c->net)) != 0)
		net_read(c->net, c);
	log_debug("%s: TLS %s %s", c->peer,
	    SSL_get_version(bufferevent_openssl_get_ssl(c->net)),
	    SSL_get_cipher_name(bufferevent_openssl_get_ssl(c->net)));
	listener_take(t->sup, sv[1], 0, c->peer, &c->local);
}

static void
net_event(struct bufferevent *bev, short what, void *arg)
{
	struct tls_conn *c = arg;
	unsigned long e;
	char buf[256];

	if (what & BEV_EVENT_CONNECTED) {
		conn_relay(c);
		return;
	}
	if (c->state == TLS_HANDSHAKE) {
		if ((e = bufferevent_get_openssl_error(bev)) != 0) {
			ERR_error_string_n(e, buf, sizeof(buf));
			log_debug("%s: TLS handshake failed: %s", c->peer,
			    buf);
		}
		ERR_clear_error();
		c->t->failed++;
		conn_free(c);
		return;
	}
	/* A reset or a broken record: nothing more can be sent either. */
	if ((what & BEV_EVENT_ERROR) || c->plain_eof) {
		while (bufferevent_get_openssl_error(bev) != 0)
			;
		ERR_clear_error();
		conn_free(c);
		return;
	}
	/* close_notify (or a plain FIN): the worker may still answer. */
	c->net_eof = 1;
	bufferevent_disable(bev, EV_READ);
	plain_shut(c);
}

/* Connections from peer still in their handshake. */
static unsigned
handshakes_from(struct tls *t, const char *peer)
{
	struct tls_conn *c;
	unsigned n = 0;

	TAILQ_FOREACH(c, &t->conns, entry)
		if (c->state == TLS_HANDSHAKE && strcmp(c->peer, peer) == 0)
			n++;
	return n;
}

void
tls_accept(struct sup *sup, int fd, const char *peer)
{
	struct config *conf = sup->conf;
	struct tls *t = sup->tls;
	struct tls_conn *c;
	struct worker *w;
	unsigned nworkers = 0;
	SSL *ssl;

	TAILQ_FOREACH(w, &sup->workers, entry)
		nworkers++;
	/* The workers could take no more of them anyway. */
	if (t == NULL || t->ctx == NULL ||
	    t->nhandshake >= TLS_HANDSHAKES_MAX ||
	    t->nhandshake + t->nrelay >= (uint64_t)conf->max_connections *
	    (nworkers ? nworkers : 1) ||
	    (conf->max_conn_per_addr > 0 &&
	    handshakes_from(t, peer) >= conf->max_conn_per_addr)) {
		log_debug("%s: TLS connection refused: too many", peer);
		if (t != NULL)
			t->refused++;
		close(fd);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (ssl = SSL_new(t->ctx)) == NULL) {
		free(c);
		close(fd);
		return;
	}
	if ((c->net = bufferevent_openssl_socket_new(sup->base, fd, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		SSL_free(ssl);
		free(c);
		close(fd);
		return;
	}
	c->t = t;
	c->state = TLS_HANDSHAKE;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	guard_local(fd, &c->local);
	TAILQ_INSERT_TAIL(&t->conns, c, entry);
	t->nhandshake++;
	if ((c->tmo = evtimer_new(sup->base, conn_timeout, c)) == NULL) {
		conn_free(c);
		return;
	}
	/* A client that closes without close_notify ends its request as a
	 * plain one would; HTTP and WebSocket framing tell a cut message. */
	bufferevent_openssl_set_allow_dirty_shutdown(c->net, 1);
	bufferevent_setwatermark(c->net, EV_READ, 0, RELAY_MAX);
	bufferevent_setcb(c->net, net_read, net_write, net_event, c);
	bufferevent_enable(c->net, EV_READ);
	/* The whole handshake, not each read: one byte a second must not
	 * keep it open. */
	conn_timer(c, conf->handshake_timeout_ms);
}

void
tls_metrics(struct sup *sup, struct evbuffer *out)
{
	struct tls *t = sup->tls;

	if (t == NULL || sup->conf->ntls == 0)
		return;
	evbuffer_add_printf(out, "# HELP parley_tls_connections TLS "
	    "connections in their handshake or relayed to a worker.\n"
	    "# TYPE parley_tls_connections gauge\n"
	    "parley_tls_connections{state=\"handshake\"} %u\n"
	    "parley_tls_connections{state=\"relay\"} %u\n"
	    "# HELP parley_tls_handshakes_total TLS handshakes by outcome "
	    "(refused: over a connection limit, not tried).\n"
	    "# TYPE parley_tls_handshakes_total counter\n"
	    "parley_tls_handshakes_total{result=\"ok\"} %llu\n"
	    "parley_tls_handshakes_total{result=\"failed\"} %llu\n"
	    "parley_tls_handshakes_total{result=\"refused\"} %llu\n",
	    t->nhandshake, t->nrelay, (unsigned long long)t->done,
	    (unsigned long long)t->failed, (unsigned long long)t->refused);
}

void
tls_stop(struct sup *sup)
{
	struct tls *t = sup->tls;
	struct tls_conn *c, *next;

	if (t == NULL)
		return;
	for (c = TAILQ_FIRST(&t->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->state == TLS_HANDSHAKE)
			conn_free(c);
	}
}

void
tls_free(struct sup *sup)
{
	struct tls *t = sup->tls;
	struct tls_conn *c;

	if (t == NULL)
		return;
	while ((c = TAILQ_FIRST(&t->conns)) != NULL)
		conn_free(c);
	SSL_CTX_free(t->ctx);
	free(t);
	sup->tls = NULL;
}

/*
 * In a worker just forked: drop the copy of every SSL and context, so the
 * private key and session keys are scrubbed from the worker's memory
 * (OpenSSL clears key material when it frees it).  The bufferevents are
 * left alone: their events are in the supervisor's epoll set, which the
 * child shares, and removing them here would remove them there.
 */
void
tls_forget(struct sup *sup)
{
	struct tls *t = sup->tls;
	struct tls_conn *c;

	if (t == NULL)
		return;
	/* The structs stay, unused, reachable from sup like the rest of
	 * the supervisor's state the worker inherited. */
	TAILQ_FOREACH(c, &t->conns, entry)
		SSL_free(bufferevent_openssl_get_ssl(c->net));
	SSL_CTX_free(t->ctx);
	t->ctx = NULL;
}
