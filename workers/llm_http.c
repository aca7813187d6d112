/*
 * The HTTP providers' transport: one libcurl multi handle per worker,
 * driven by the worker's libevent loop (curlev.c), so no call here ever
 * blocks.
 *
 * A call runs attempts until one completes or fails for good.  It retries
 * with exponential backoff what the provider says is passing (408, 409,
 * 429, 5xx, overloaded/api/rate-limit error events, broken connections,
 * timeouts); once tokens reached the session it only starts over when the
 * session takes a retrying callback, which voids the reply so far.
 *
 * Every attempt has two bounds whatever the server sends: an overall
 * deadline (attempt-timeout: keep-alive pings and comments reset the idle
 * timeout, never this) and a size (max-reply: the response body's bytes).
 * A deadline is retried like the other timeouts; a reply past the size is
 * not, since the same request would likely grow as large again.
 *
 * Callbacks into the session may cancel calls, but libcurl forbids
 * removing handles from inside its callbacks: a cancel made there only
 * marks the call, and the call is freed once libcurl has returned.
 */
#include <sys/queue.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/log.h"
#include "parley/util.h"
#include "curlev.h"
#include "llm.h"

#define HTTP_DEFAULT_TIMEOUT	60000	/* ms */
#define HTTP_ERRBODY_MAX	8192
#define HTTP_BACKOFF_FIRST	500	/* ms */
#define HTTP_BACKOFF_CAP	8000	/* ms */
#define HTTP_RETRY_AFTER_MAX	60000	/* a longer wish gets our backoff */

/* Which bound of the attempt ended it. */
enum call_over {
	OVER_NONE,
	OVER_DEADLINE,		/* attempt-timeout */
	OVER_SIZE		/* max-reply */
};

enum call_state {
	CALL_WAIT,		/* before an attempt (c->ev is the delay) */
	CALL_RUN,		/* the easy handle is in the multi */
	CALL_ENDING		/* the reply is decoded; end at the next turn */
};

struct llm_http {
	struct event_base	*base;
	struct curlev		*cv;
	TAILQ_HEAD(, llm_call)	 calls;
};

struct llm_call {
	const struct llm_ops	*ops;		/* first, see llm_cancel */
	struct llm_http		*h;
	const struct llm_proto	*proto;
	TAILQ_ENTRY(llm_call)	 entry;
	struct llm_cbs		 cbs;
	void			*arg;

	char			*url;
	char			*body;
	char			*key_env;	/* NULL: no key */
	double			 price_input;
	double			 price_output;
	uint64_t		 timeout_ms;
	uint64_t		 idle_ms;
	unsigned		 max_retries;
	unsigned		 retries;	/* used so far */
	char			 name[64];	/* the provider block's */
	uint64_t		 attempt_ms;
	size_t			 max_reply;
	uint64_t		 deadline;	/* util_mono_ms of this attempt's */
	size_t			 rxlen;		/* body bytes of this attempt */
	int			 at_deadline;	/* the timer is the deadline's */
	enum call_over		 over;

	enum call_state		 state;
	struct event		*ev;		/* timeouts, backoff, ending */
	CURL			*easy;
	struct curl_slist	*hdrs;
	struct llm_stream	*st;
	int			 got_byte;
	int			 timedout;
	int			 delivered;	/* a token reached the session */
	int			 cancelled;
	int			 in_cb;		/* inside a session callback */
	long			 status;	/* HTTP status of this attempt */
	int			 should_retry;	/* x-should-retry: -1 unsaid */
	int64_t			 retry_after_ms;	/* -1 unsaid */
	char			 errbody[HTTP_ERRBODY_MAX];
	size_t			 errlen;
	char			 errbuf[CURL_ERROR_SIZE];
};

static void	call_ev(evutil_socket_t, short, void *);

/* --- the multi handle --- */

static void
call_free(struct llm_call *c)
{
	if (c->easy != NULL) {
		curlev_remove(c->h->cv, c->easy);
		curl_easy_cleanup(c->easy);
	}
	curl_slist_free_all(c->hdrs);
	llm_stream_free(c->st);
	if (c->ev != NULL)
		event_free(c->ev);
	TAILQ_REMOVE(&c->h->calls, c, entry);
	free(c->url);
	free(c->body);
	free(c->key_env);
	free(c);
}

/* Frees what was cancelled while libcurl was running. */
static void
reap(void *arg)
{
	struct llm_http *h = arg;
	struct llm_call *c, *next;

	for (c = TAILQ_FIRST(&h->calls); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->cancelled && !c->in_cb)
			call_free(c);
	}
}

static void	call_end(struct llm_call *, CURLcode);

static void
http_done(void *owner, CURLcode rc)
{
	call_end(owner, rc);
}

static struct llm_http *
http_get(struct llm_ctx *ctx)
{
	struct llm_http *h;

	if (ctx->http != NULL)
		return ctx->http;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	h->base = ctx->base;
	TAILQ_INIT(&h->calls);
	if ((h->cv = curlev_new(ctx->base, http_done, reap, h)) == NULL) {
		free(h);
		return NULL;
	}
	ctx->http = h;
	return h;
}

void
llm_http_free(struct llm_ctx *ctx)
{
	struct llm_http	*h = ctx->http;
	struct llm_call	*c;

	if (h == NULL)
		return;
	while ((c = TAILQ_FIRST(&h->calls)) != NULL)
		call_free(c);
	curlev_free(h->cv);
	free(h);
	ctx->http = NULL;
}

/* --- one attempt --- */

static void
arm(struct llm_call *c, uint64_t ms)
{
	struct timeval tv;

	util_tv(&tv, ms);
	evtimer_add(c->ev, &tv);
}

/*
 * How long a running attempt waits for its next byte: want (the first-byte
 * or idle timeout), cut to what is left before deadline; 0 once past it.
 */
static uint64_t
run_wait_ms(uint64_t want, uint64_t now, uint64_t deadline)
{
	if (now >= deadline)
		return 0;
	return want < deadline - now ? want : deadline - now;
}

/* Waits up to want ms for a byte, or until the attempt's deadline. */
static void
arm_run(struct llm_call *c, uint64_t want)
{
	uint64_t ms = run_wait_ms(want, util_mono_ms(), c->deadline);

	c->at_deadline = ms < want;
	arm(c, ms);
}

/* The first or the next byte came: the idle timeout starts again. */
static void
got_byte(struct llm_call *c)
{
	c->got_byte = 1;
	if (c->state == CALL_RUN)
		arm_run(c, c->idle_ms);
}

/* Header names compare without case; values lose surrounding blanks. */
static int
header_is(const char *line, size_t n, const char *name, char *val,
    size_t vsize)
{
	size_t nl = strlen(name), i, j;

	if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return 0;
	for (i = nl + 1; i < n && (line[i] == ' ' || line[i] == '\t'); i++)
		;
	for (j = n; j > i && isspace((unsigned char)line[j - 1]); j--)
		;
	if (j - i >= vsize)
		j = i + vsize - 1;
	memcpy(val, line + i, j - i);
	val[j - i] = '\0';
	return 1;
}

/* "seconds" or an HTTP date, as ms from now; -1 if neither. */
static int64_t
retry_after(const char *v)
{
	char	*end;
	double	 d;
	time_t	 t;

	d = strtod(v, &end);
	if (end != v && *end == '\0')
		return d >= 0 && d < 1e9 ? (int64_t)(d * 1000) : -1;
	if ((t = curl_getdate(v, NULL)) == -1)
		return -1;
	return t > time(NULL) ? (int64_t)(t - time(NULL)) * 1000 : 0;
}

static size_t
header_cb(char *buf, size_t size, size_t n, void *arg)
{
	struct llm_call	*c = arg;
	char		 v[128], *end;
	double		 d;

	n *= size;
	if (c->cancelled)
		return 0;
	got_byte(c);
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		/* A new response (after a 100, or a redirect we ignore). */
		const char *sp = memchr(buf, ' ', n);

		c->status = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
		c->should_retry = -1;
		c->retry_after_ms = -1;
		c->errlen = 0;
		return n;
	}
	if (header_is(buf, n, "retry-after-ms", v, sizeof(v))) {
		d = strtod(v, &end);
		if (end != v && d >= 0 && d < 1e12)
			c->retry_after_ms = (int64_t)d;
	} else if (header_is(buf, n, "retry-after", v, sizeof(v))) {
		/* retry-after-ms is the finer of the two when both came. */
		if (c->retry_after_ms < 0)
			c->retry_after_ms = retry_after(v);
	} else if (header_is(buf, n, "x-should-retry", v, sizeof(v))) {
		if (strcasecmp(v, "true") == 0)
			c->should_retry = 1;
		else if (strcasecmp(v, "false") == 0)
			c->should_retry = 0;
	}
	return n;
}

static size_t
write_cb(char *buf, size_t size, size_t n, void *arg)
{
	struct llm_call	*c = arg;
	size_t		 room;
	int		 r;

	n *= size;
	if (c->cancelled)
		return 0;	/* stops the transfer at once */
	got_byte(c);
	if (c->state != CALL_RUN)
		return n;
	if (n > c->max_reply - c->rxlen) {
		c->over = OVER_SIZE;
		return 0;	/* stops the transfer: call_end reports it */
	}
	c->rxlen += n;
	/* The start of the body, for an error not sent as a stream (a 2xx
	 * from a proxy can be a plain JSON error too). */
	room = sizeof(c->errbody) - 1 - c->errlen;
	if (room > n)
		room = n;
	memcpy(c->errbody + c->errlen, buf, room);
	c->errlen += room;
	c->errbody[c->errlen] = '\0';
	if (c->status < 200 || c->status > 299)
		return n;
	r = llm_stream_feed(c->st, buf, n);
	if (c->cancelled)
		return 0;
	if (r != LLM_MORE) {
		/* The reply is known; do not wait for the server to close. */
		c->state = CALL_ENDING;
		arm(c, 0);
	}
	return n;
}

static void
w_token(void *arg, const char *text, size_t len)
{
	struct llm_call *c = arg;

	if (c->cancelled)
		return;
	c->delivered = 1;
	c->in_cb++;
	c->cbs.token(c->arg, text, len);
	c->in_cb--;
}

static void
w_thought(void *arg, const char *text, size_t len)
{
	struct llm_call *c = arg;

	if (c->cancelled || c->cbs.thought == NULL)
		return;
	c->in_cb++;
	c->cbs.thought(c->arg, text, len);
	c->in_cb--;
}

static void
w_tool(void *arg, const char *id, const char *name, const char *args)
{
	struct llm_call *c = arg;

	if (c->cancelled || c->cbs.tool_call == NULL)
		return;
	c->in_cb++;
	c->cbs.tool_call(c->arg, id, name, args);
	c->in_cb--;
}

/* Sets up and adds this attempt's easy handle; 0, or -1 with msg set. */
static int
attempt_start(struct llm_call *c, char *msg, size_t msize)
{
	static const struct llm_cbs wcbs = {
		w_token, NULL, NULL, w_tool, NULL, w_thought
	};
	const char *const *hp;
	const char *key = NULL;
	char line[512];
	char *kh;
	size_t klen;

	if (c->key_env != NULL &&
	    ((key = getenv(c->key_env)) == NULL || *key == '\0')) {
		snprintf(msg, msize, "%s: the API key variable %s is not set",
		    c->proto->type, c->key_env);
		return -1;
	}
	c->status = 0;
	c->should_retry = -1;
	c->retry_after_ms = -1;
	c->errlen = 0;
	c->errbuf[0] = '\0';
	c->got_byte = 0;
	c->timedout = 0;
	c->rxlen = 0;
	c->over = OVER_NONE;
	llm_stream_free(c->st);
	c->st = llm_stream_new(c->proto->type, &wcbs, c);
	curl_slist_free_all(c->hdrs);
	c->hdrs = NULL;
	c->hdrs = curl_slist_append(c->hdrs, "Content-Type: application/json");
	c->hdrs = curl_slist_append(c->hdrs, "Accept: text/event-stream");
	/* No 100-continue round trip for big bodies. */
	c->hdrs = curl_slist_append(c->hdrs, "Expect:");
	for (hp = c->proto->headers; *hp != NULL && c->hdrs != NULL; hp++)
		c->hdrs = curl_slist_append(c->hdrs, *hp);
	if (key != NULL && c->hdrs != NULL) {
		klen = strlen(c->proto->key_header) + strlen(key) + 1;
		if ((kh = malloc(klen)) != NULL) {
			snprintf(kh, klen, "%s%s", c->proto->key_header, key);
			c->hdrs = curl_slist_append(c->hdrs, kh);
			explicit_bzero(kh, klen);
			free(kh);
		} else {
			curl_slist_free_all(c->hdrs);
			c->hdrs = NULL;
		}
	}
	if (c->st == NULL || c->hdrs == NULL ||
	    (c->easy = curl_easy_init()) == NULL) {
		snprintf(msg, msize, "%s: out of memory", c->proto->type);
		return -1;
	}
	curl_easy_setopt(c->easy, CURLOPT_URL, c->url);
	curl_easy_setopt(c->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE,
	    (curl_off_t)strlen(c->body));
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->hdrs);
	snprintf(line, sizeof(line), "parleyd (%s)", c->proto->type);
	curl_easy_setopt(c->easy, CURLOPT_USERAGENT, line);
	curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
	curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->easy, CURLOPT_TCP_KEEPALIVE, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS,
	    (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	/* Certificate checks stay at libcurl's defaults: on. */
	if (curlev_add(c->h->cv, c->easy) == -1) {
		curl_easy_cleanup(c->easy);
		c->easy = NULL;
		snprintf(msg, msize, "%s: could not start the request",
		    c->proto->type);
		return -1;
	}
	c->state = CALL_RUN;
	c->deadline = util_mono_ms() + c->attempt_ms;
	arm_run(c, c->timeout_ms);
	return 0;
}

/* --- the end of an attempt --- */

/* What bound ended the attempt, and the directive that raises it. */
static void
over_msg(const struct llm_call *c, char *msg, size_t size)
{
	char v[32];

	if (c->over == OVER_DEADLINE) {
		util_fmt_ms(c->attempt_ms, v, sizeof(v));
		snprintf(msg, size, "%s: the reply did not end within "
		    "attempt-timeout %s (raise it in provider %s for longer "
		    "replies)", c->proto->type, v, c->name);
	} else {
		util_fmt_size(c->max_reply, v, sizeof(v));
		snprintf(msg, size, "%s: the reply is larger than max-reply "
		    "%s (raise it in provider %s for longer replies)",
		    c->proto->type, v, c->name);
	}
}

static int
retryable_type(const char *t)
{
	static const char *const types[] = {
		"overloaded_error", "api_error", "rate_limit_error",
		"server_error", NULL
	};
	size_t i;

	for (i = 0; types[i] != NULL; i++)
		if (strcmp(t, types[i]) == 0)
			return 1;
	return 0;
}

static int
retryable_curl(CURLcode rc)
{
	switch (rc) {
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_OUT_OF_MEMORY:
		return 0;
	default:
		return 1;
	}
}

/* Exponential from 0.5s, capped at 8s, less up to a quarter at random. */
static uint64_t
backoff_ms(const struct llm_call *c)
{
	uint64_t ms = HTTP_BACKOFF_FIRST;
	unsigned i;

	if (c->retry_after_ms >= 0 && c->retry_after_ms <= HTTP_RETRY_AFTER_MAX)
		return (uint64_t)c->retry_after_ms;
	for (i = 1; i < c->retries && ms < HTTP_BACKOFF_CAP; i++)
		ms *= 2;
	if (ms > HTTP_BACKOFF_CAP)
		ms = HTTP_BACKOFF_CAP;
	return ms - ms * arc4random_uniform(250) / 1000;
}

/* Ends the call with done or error; c is freed before they run. */
static void
call_report(struct llm_call *c, const char *msg)
{
	struct llm_cbs	 cbs = c->cbs;
	void		*arg = c->arg;
	struct llm_usage u;
	char		 stop[sizeof(c->st->res.stop_reason)];

	if (msg == NULL) {
		u = c->st->res.usage;
		u.cost = (double)u.input_tokens * c->price_input / 1e6 +
		    (double)u.output_tokens * c->price_output / 1e6;
		snprintf(stop, sizeof(stop), "%s", c->st->res.stop_reason);
		call_free(c);
		cbs.done(arg, &u, stop);
	} else {
		char m[512];

		snprintf(m, sizeof(m), "%s", msg);
		call_free(c);
		cbs.error(arg, "LLM_ERROR", m);
	}
}

/* Tries again after a delay, or reports msg for good. */
static void
call_fail(struct llm_call *c, int retry, const char *msg)
{
	if (!retry || c->retries >= c->max_retries ||
	    (c->delivered && c->cbs.retrying == NULL)) {
		call_report(c, msg);
		return;
	}
	c->retries++;
	if (c->delivered) {
		c->in_cb++;
		c->cbs.retrying(c->arg, msg);
		c->in_cb--;
		if (c->cancelled) {
			call_free(c);
			return;
		}
		c->delivered = 0;
	}
	c->state = CALL_WAIT;
	arm(c, backoff_ms(c));
}

static void
call_end(struct llm_call *c, CURLcode rc)
{
	const struct llm_result *res;
	char	 msg[512], t[32];
	int	 r, retry;

	if (c->easy != NULL) {
		curlev_remove(c->h->cv, c->easy);
		curl_easy_cleanup(c->easy);
		c->easy = NULL;
	}
	evtimer_del(c->ev);
	if (c->cancelled) {
		call_free(c);
		return;
	}
	r = c->st->status;
	res = &c->st->res;
	if (r == LLM_DONE) {
		call_report(c, NULL);
		return;
	}
	if (c->over != OVER_NONE) {
		over_msg(c, msg, sizeof(msg));
		log_warnx("%s", msg);
		call_fail(c, c->over == OVER_DEADLINE, msg);
		return;
	}
	if (c->timedout) {
		util_fmt_ms(c->got_byte ? c->idle_ms : c->timeout_ms, t,
		    sizeof(t));
		snprintf(msg, sizeof(msg), c->got_byte ?
		    "timeout: no data for %s" : "timeout: no first byte "
		    "within %s", t);
		call_fail(c, 1, msg);
		return;
	}
	if (c->status != 0 && (c->status < 200 || c->status > 299)) {
		struct llm_result er;

		memset(&er, 0, sizeof(er));
		if (!llm_error_json(c->errbody, c->errlen, &er)) {
			/* Not JSON (a proxy's page): its start, on one line. */
			size_t i;

			snprintf(er.err_msg, sizeof(er.err_msg), "%.200s",
			    c->errbody);
			for (i = 0; er.err_msg[i] != '\0'; i++)
				if ((unsigned char)er.err_msg[i] < 0x20)
					er.err_msg[i] = ' ';
		}
		snprintf(msg, sizeof(msg), "%s: %ld%s%s%s%s", c->proto->type,
		    c->status, er.err_type[0] ? " " : "", er.err_type,
		    er.err_msg[0] ? ": " : "", er.err_msg);
		retry = c->status == 408 || c->status == 409 ||
		    c->status == 429 || c->status >= 500;
		if (c->should_retry >= 0)
			retry = c->should_retry;
		call_fail(c, retry, msg);
		return;
	}
	if (r == LLM_MORE && rc != CURLE_OK) {
		snprintf(msg, sizeof(msg), "%s: connection error: %s",
		    c->proto->type, c->errbuf[0] ? c->errbuf :
		    curl_easy_strerror(rc));
		call_fail(c, retryable_curl(rc), msg);
		return;
	}
	if (r == LLM_MORE && llm_stream_end(c->st) == LLM_DONE) {
		/* Ending the stream reports its tool calls; one of those
		 * callbacks may have cancelled the call. */
		if (c->cancelled) {
			call_free(c);
			return;
		}
		call_report(c, NULL);
		return;
	}
	/* An error event, a bad stream, or one cut short. */
	if (res->err_type[0] == '\0' &&
	    llm_error_json(c->errbody, c->errlen, &c->st->res))
		r = LLM_FAIL;
	snprintf(msg, sizeof(msg), "%s: %s%s%s", c->proto->type, res->err_type,
	    res->err_type[0] ? ": " : "", res->err_msg);
	call_fail(c, res->err_type[0] ? retryable_type(res->err_type) :
	    r == LLM_MORE, msg);
}

static void
call_ev(evutil_socket_t fd, short what, void *arg)
{
	struct llm_call	*c = arg;
	char		 msg[256];

	(void)fd;
	(void)what;
	if (c->cancelled) {
		call_free(c);
		return;
	}
	switch (c->state) {
	case CALL_WAIT:
		if (attempt_start(c, msg, sizeof(msg)) == -1)
			call_report(c, msg);
		break;
	case CALL_RUN:
		if (c->at_deadline)
			c->over = OVER_DEADLINE;
		else
			c->timedout = 1;
		call_end(c, CURLE_OPERATION_TIMEDOUT);
		break;
	case CALL_ENDING:
		call_end(c, CURLE_OK);
		break;
	}
}

/* --- the provider interface --- */

struct llm_call *
llm_http_start(struct llm_ctx *ctx, const struct cfg_provider *p,
    const struct llm_msg *msgs, size_t n, const struct llm_tool_def *tools,
    size_t ntools, const struct llm_cbs *cbs, void *arg)
{
	const struct llm_proto	*pr;
	struct llm_http		*h;
	struct llm_call		*c;
	const char		*base;
	size_t			 blen, len;

	if ((pr = llm_proto_find(p->type)) == NULL || (h = http_get(ctx)) ==
	    NULL)
		return NULL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->ops = strcmp(pr->type, "openai") == 0 ? &llm_openai_ops :
	    &llm_anthropic_ops;
	c->h = h;
	c->proto = pr;
	c->cbs = *cbs;
	c->arg = arg;
	TAILQ_INSERT_TAIL(&h->calls, c, entry);
	base = p->url != NULL && *p->url != '\0' ? p->url : pr->default_url;
	blen = strlen(base);
	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	len = blen + strlen(pr->path) + 1;
	if ((c->url = malloc(len)) != NULL)
		snprintf(c->url, len, "%.*s%s", (int)blen, base, pr->path);
	c->body = pr->body(p, msgs, n, tools, ntools);
	if (p->api_key_env != NULL && *p->api_key_env != '\0')
		c->key_env = strdup(p->api_key_env);
	c->price_input = p->price_input;
	c->price_output = p->price_output;
	c->timeout_ms = p->timeout_ms ? p->timeout_ms : HTTP_DEFAULT_TIMEOUT;
	c->idle_ms = p->idle_timeout_ms ? p->idle_timeout_ms :
	    HTTP_DEFAULT_TIMEOUT;
	c->max_retries = p->max_retries;
	snprintf(c->name, sizeof(c->name), "%s", p->name);
	c->attempt_ms = p->attempt_timeout_ms ? p->attempt_timeout_ms :
	    CFG_ATTEMPT_TIMEOUT;
	c->max_reply = p->max_reply ? p->max_reply : CFG_MAX_REPLY_BODY;
	c->state = CALL_WAIT;
	if (c->url == NULL || c->body == NULL ||
	    (p->api_key_env != NULL && *p->api_key_env != '\0' &&
	    c->key_env == NULL) ||
	    (c->ev = evtimer_new(h->base, call_ev, c)) == NULL) {
		call_free(c);
		return NULL;
	}
	/* Even the first attempt starts from the loop, never from inside
	 * a callback that libcurl may be running. */
	arm(c, 0);
	return c;
}

void
llm_http_cancel(struct llm_call *c)
{
	if (c->in_cb || curlev_busy(c->h->cv))
		c->cancelled = 1;
	else
		call_free(c);
}
