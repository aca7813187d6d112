/*
 * The embedder (embed.h): POST {url}/embeddings with
 * {"model":M,"input":[...],"encoding_format":"float"}, the answer's
 * data[].embedding put back in input order by data[].index.
 *
 * One exchange (struct xfer) is the same code for both callers: the body
 * built here, one curl easy handle kept from request to request (so the
 * connection is reused), the reply gathered up to max-reply and parsed.
 * embed_sync runs it with curl_easy_perform.  embed_async adds the easy
 * to a multi of its own driven by the worker's loop (curlev.c) and does
 * all its work, reporting included, from a timer event of its own, never
 * from inside libcurl: so its done callback may cancel or start
 * anything.  A multi per call rather than per worker: struct wk has no
 * place for one, and a call's requests still share one connection.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <cjson/cJSON.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/kbindex.h"
#include "parley/log.h"
#include "parley/utf8.h"
#include "parley/util.h"
#include "curlev.h"
#include "embed.h"
#include "wk.h"

#define EMBED_QUOTE_MAX		200	/* bytes of a server's message kept */
#define EMBED_DEFAULT_TIMEOUT	60000	/* ms, when the block has none */
#define EMBED_SYNC_TRIES	4	/* embed_sync: a request and retries */
#define EMBED_BACKOFF_FIRST	1000	/* ms, doubled at each retry */
#define EMBED_RETRY_AFTER_MAX	30000	/* ms of Retry-After honoured */

/* One HTTP exchange at a time, with what it needs between them. */
struct xfer {
	const struct cfg_provider *p;
	CURL			*easy;
	struct curl_slist	*hdrs;
	char			*url;
	char			*body;
	char			*rx;		/* the reply body so far */
	size_t			 rxlen;
	size_t			 rxcap;
	size_t			 max_reply;
	int			 too_big;	/* past max_reply */
	int			 nomem;
	int			 retry;		/* the failure may pass */
	int64_t			 retry_after_ms;	/* -1: none said */
	char			 errbuf[CURL_ERROR_SIZE];
};

enum req_state {
	REQ_START,		/* the next request is to be sent */
	REQ_RUN,		/* the easy handle is in the multi */
	REQ_FINISH,		/* the request is over (rc), to be read */
	REQ_REPORT		/* done is to be called */
};

struct embed_req {
	struct curlev		*cv;
	struct event		*ev;		/* each step runs from here */
	struct xfer		 x;
	enum req_state		 state;
	int			 added;		/* x.easy is in the multi */
	int			 in_done;
	CURLcode		 rc;
	const char		**texts;	/* copies, in one block */
	size_t			*lens;
	size_t			 n;
	size_t			 from;		/* this request's texts */
	size_t			 to;
	float			*vecs;		/* n * dim, once dim is known */
	unsigned		 dim;
	int			 failed;
	char			 err[512];
	embed_done_fn		 done;
	void			*arg;
};

int
embed_enabled(const struct config *conf)
{
	return conf != NULL && conf->embedder != NULL;
}

/* --- messages --- */

/* "embedder NAME: " and the rest, into err. */
static void
say(const struct cfg_provider *p, char *err, size_t errlen,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
say(const struct cfg_provider *p, char *err, size_t errlen,
    const char *fmt, ...)
{
	va_list	ap;
	char	m[512];

	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "embedder %s: %s", p->name, m);
}

/* s on one line, at most EMBED_QUOTE_MAX bytes of it, into out. */
static void
quote(char *out, size_t size, const char *s, size_t len)
{
	size_t i;

	if (len > EMBED_QUOTE_MAX)
		len = utf8_whole(s, EMBED_QUOTE_MAX);
	snprintf(out, size, "%.*s", (int)len, s);
	for (i = 0; out[i] != '\0'; i++)
		if ((unsigned char)out[i] < 0x20)
			out[i] = ' ';
}

/*
 * The server's message in an error reply: {"error":{"message":..}}
 * (OpenAI, llama.cpp, Ollama), {"error":".."}, {"message":..} (vLLM) or
 * {"detail":".."}; 1 when one was found.
 */
static int
error_text(const cJSON *o, char *out, size_t size)
{
	const cJSON	*e, *m;
	const char	*s = NULL;

	e = cJSON_GetObjectItemCaseSensitive(o, "error");
	if (cJSON_IsString(e))
		s = e->valuestring;
	else if (cJSON_IsObject(e) && cJSON_IsString(m =
	    cJSON_GetObjectItemCaseSensitive(e, "message")))
		s = m->valuestring;
	else if (cJSON_IsString(m = cJSON_GetObjectItemCaseSensitive(o,
	    "message")))
		s = m->valuestring;
	else if (cJSON_IsString(m = cJSON_GetObjectItemCaseSensitive(o,
	    "detail")))
		s = m->valuestring;
	if (s == NULL || *s == '\0')
		return 0;
	quote(out, size, s, strlen(s));
	return 1;
}

/* What a non-2xx reply says: the server's message, or its body's start. */
static void
status_msg(const struct cfg_provider *p, long status, const char *body,
    size_t len, char *err, size_t errlen)
{
	cJSON	*o;
	char	 m[EMBED_QUOTE_MAX + 1];
	int	 found = 0;

	if (len > 0 && (o = cJSON_ParseWithLength(body, len)) != NULL) {
		found = error_text(o, m, sizeof(m));
		cJSON_Delete(o);
	}
	if (!found)
		quote(m, sizeof(m), body != NULL ? body : "", len);
	say(p, err, errlen, "HTTP %ld%s%s", status, m[0] ? ": " : "", m);
}

/* --- the request body --- */

/* Bytes of the UTF-8 sequence that starts s[0..len) when valid, else 0. */
static size_t
utf8_seq(const unsigned char *s, size_t len)
{
	size_t k;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		k = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		k = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		k = 4;
	else
		return 0;
	return k <= len && utf8_valid(s, k) ? k : 0;
}

/*
 * s[0..len) as a JSON string, quotes included, written to out unless it
 * is NULL; returns its length either way.  Invalid UTF-8 becomes U+FFFD
 * and an empty text one space (the API refuses "").
 */
static size_t
json_str(char *out, const char *s, size_t len)
{
	static const char	 hex[] = "0123456789abcdef";
	const unsigned char	*u = (const unsigned char *)s;
	const char		*e;
	size_t			 i = 0, o = 0, k;
	unsigned char		 c;

#define PUT(ch)	do { if (out != NULL) out[o] = (ch); o++; } while (0)
	PUT('"');
	if (len == 0)
		PUT(' ');
	while (i < len) {
		if ((k = utf8_seq(u + i, len - i)) == 0) {
			for (e = "\\ufffd"; *e != '\0'; e++)
				PUT(*e);
			i++;
			continue;
		}
		if (k > 1) {
			if (out != NULL)
				memcpy(out + o, u + i, k);
			o += k;
			i += k;
			continue;
		}
		switch ((c = u[i++])) {
		case '"':	PUT('\\'); PUT('"'); break;
		case '\\':	PUT('\\'); PUT('\\'); break;
		case '\n':	PUT('\\'); PUT('n'); break;
		case '\r':	PUT('\\'); PUT('r'); break;
		case '\t':	PUT('\\'); PUT('t'); break;
		case '\b':	PUT('\\'); PUT('b'); break;
		case '\f':	PUT('\\'); PUT('f'); break;
		default:
			if (c < 0x20) {
				PUT('\\'); PUT('u'); PUT('0'); PUT('0');
				PUT(hex[c >> 4]); PUT(hex[c & 15]);
			} else
				PUT(c);
		}
	}
	PUT('"');
#undef PUT
	return o;
}

static size_t
put_lit(char *out, size_t at, const char *lit)
{
	size_t n = strlen(lit);

	if (out != NULL)
		memcpy(out + at, lit, n);
	return n;
}

/*
 * The body for texts[from..to), written to out (room for the length,
 * not NUL-terminated) unless it is NULL; returns its length.
 */
static size_t
body_put(char *out, const char *model, const char *const *texts,
    const size_t *lens, size_t from, size_t to)
{
	size_t o = 0, i;

	o += put_lit(out, o, "{\"model\":");
	o += json_str(out != NULL ? out + o : NULL, model, strlen(model));
	o += put_lit(out, o, ",\"input\":[");
	for (i = from; i < to; i++) {
		if (i > from)
			o += put_lit(out, o, ",");
		o += json_str(out != NULL ? out + o : NULL, texts[i], lens[i]);
	}
	o += put_lit(out, o, "],\"encoding_format\":\"float\"}");
	return o;
}

static const char *
model_of(const struct cfg_provider *p)
{
	return p->model != NULL ? p->model : "";
}

/* 1 when text i alone makes a body of at most EMBED_BODY_MAX bytes. */
static int
fits_alone(const char *model, const char *const *texts, const size_t *lens,
    size_t i)
{
	/* Measuring a huge text would only say no more slowly. */
	if (lens[i] > EMBED_BODY_MAX)
		return 0;
	return body_put(NULL, model, texts, lens, i, i + 1) <= EMBED_BODY_MAX;
}

/*
 * The end of the request that starts at texts[from]: as many texts as
 * fit EMBED_BATCH_MAX inputs and EMBED_BODY_MAX bytes of body, at least
 * one (each text was checked to fit alone).
 */
static size_t
batch_end(const char *model, const char *const *texts, const size_t *lens,
    size_t n, size_t from)
{
	size_t size, add, to;

	size = body_put(NULL, model, texts, lens, 0, 0);
	for (to = from; to < n && to - from < EMBED_BATCH_MAX; to++) {
		if (lens[to] > EMBED_BODY_MAX)
			break;
		add = json_str(NULL, texts[to], lens[to]) + (to > from);
		if (size + add > EMBED_BODY_MAX)
			break;
		size += add;
	}
	return to > from ? to : from + 1;
}

/* The arguments make sense and every text fits a request: 0, or -1. */
static int
args_check(const struct cfg_provider *p, const char *const *texts,
    const size_t *lens, size_t n, char *err, size_t errlen)
{
	char	sz[32];
	size_t	i;

	if (n > 0 && (texts == NULL || lens == NULL)) {
		say(p, err, errlen, "no texts given");
		return -1;
	}
	if (n > EMBED_TEXTS_MAX) {
		say(p, err, errlen, "%zu texts in one call, more than %d",
		    n, EMBED_TEXTS_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (texts[i] == NULL && lens[i] > 0) {
			say(p, err, errlen, "text %zu is missing", i);
			return -1;
		}
		if (!fits_alone(model_of(p), texts, lens, i)) {
			util_fmt_size(EMBED_BODY_MAX, sz, sizeof(sz));
			say(p, err, errlen, "text %zu (%zu bytes) is too "
			    "large for one request (%s of JSON at most): "
			    "split it into smaller chunks", i, lens[i], sz);
			return -1;
		}
	}
	return 0;
}

/* --- the reply --- */

/*
 * Reads an embeddings reply for n inputs into *vecs (malloc'd n * *dim
 * floats in input order: data[k] goes where its "index" says, or to k
 * when it has none).  0, or -1 with the reason in m.
 */
static int
reply_parse(const char *json, size_t len, size_t n, float **vecs,
    unsigned *dim, char *m, size_t msize)
{
	cJSON		*o;
	const cJSON	*data, *it, *ix, *emb, *x;
	float		*v = NULL;
	unsigned char	*seen = NULL;
	char		 t[EMBED_QUOTE_MAX + 1];
	size_t		 k = 0, at, j, d = 0, cnt;
	int		 rc = -1;

	*vecs = NULL;
	*dim = 0;
	if ((o = cJSON_ParseWithLength(json, len)) == NULL) {
		snprintf(m, msize, "the reply is not JSON");
		return -1;
	}
	data = cJSON_GetObjectItemCaseSensitive(o, "data");
	if (!cJSON_IsArray(data)) {
		if (error_text(o, t, sizeof(t)))
			snprintf(m, msize, "the reply is an error: %s", t);
		else
			snprintf(m, msize, "the reply has no \"data\" list");
		goto out;
	}
	if ((cnt = (size_t)cJSON_GetArraySize(data)) != n) {
		snprintf(m, msize, "the reply has %zu embeddings for %zu "
		    "inputs", cnt, n);
		goto out;
	}
	if ((seen = calloc(n > 0 ? n : 1, 1)) == NULL) {
		snprintf(m, msize, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(it, data) {
		ix = cJSON_GetObjectItemCaseSensitive(it, "index");
		if (ix == NULL)
			at = k;
		else if (!cJSON_IsNumber(ix) || !(ix->valuedouble >= 0) ||
		    ix->valuedouble >= (double)n ||
		    ix->valuedouble != floor(ix->valuedouble)) {
			snprintf(m, msize, "data[%zu]: \"index\" is not one "
			    "of 0 to %zu", k, n - 1);
			goto out;
		} else
			at = (size_t)ix->valuedouble;
		if (seen[at]) {
			snprintf(m, msize, "data[%zu]: index %zu comes twice",
			    k, at);
			goto out;
		}
		seen[at] = 1;
		emb = cJSON_GetObjectItemCaseSensitive(it, "embedding");
		if (!cJSON_IsArray(emb)) {
			snprintf(m, msize, "data[%zu]: \"embedding\" is not a "
			    "list of numbers", k);
			goto out;
		}
		cnt = (size_t)cJSON_GetArraySize(emb);
		if (k == 0) {
			if (cnt < 1 || cnt > KBI_DIM_MAX) {
				snprintf(m, msize, "data[0]: the embedding has "
				    "%zu numbers (1 to %d expected)", cnt,
				    KBI_DIM_MAX);
				goto out;
			}
			d = cnt;
			if (n > EMBED_VECS_MAX / sizeof(float) / d) {
				snprintf(m, msize, "%zu vectors of %zu numbers "
				    "are too many for one call", n, d);
				goto out;
			}
			if ((v = malloc(n * d * sizeof(float))) == NULL) {
				snprintf(m, msize, "out of memory");
				goto out;
			}
		} else if (cnt != d) {
			snprintf(m, msize, "data[%zu]: the embedding has %zu "
			    "numbers, data[0]'s %zu", k, cnt, d);
			goto out;
		}
		j = 0;
		cJSON_ArrayForEach(x, emb) {
			if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) ||
			    fabs(x->valuedouble) > FLT_MAX) {
				snprintf(m, msize, "data[%zu]: embedding[%zu] "
				    "is not a number", k, j);
				goto out;
			}
			v[at * d + j++] = (float)x->valuedouble;
		}
		k++;
	}
	*vecs = v;
	v = NULL;
	*dim = (unsigned)d;
	rc = 0;
 out:
	free(v);
	free(seen);
	cJSON_Delete(o);
	return rc;
}

/* --- one exchange --- */

static void
xfer_init(struct xfer *x, const struct cfg_provider *p)
{
	memset(x, 0, sizeof(*x));
	x->p = p;
	x->max_reply = p->max_reply ? p->max_reply : CFG_MAX_REPLY_BODY;
}

static void
xfer_clear(struct xfer *x)
{
	if (x->easy != NULL)
		curl_easy_cleanup(x->easy);
	curl_slist_free_all(x->hdrs);
	free(x->url);
	free(x->body);
	free(x->rx);
	memset(x, 0, sizeof(*x));
}

static size_t
xfer_write(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;

	n *= size;
	if (n > x->max_reply - x->rxlen) {
		x->too_big = 1;
		return 0;	/* stops the transfer */
	}
	if (util_append(&x->rx, &x->rxlen, &x->rxcap, buf, n) == -1) {
		x->nomem = 1;
		return 0;
	}
	return n;
}

/* Keeps the Retry-After of the last response (seconds; a date is rare
 * enough for an embedder to get the plain backoff). */
static size_t
xfer_header(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer	*x = arg;
	char		 v[32], *end;
	size_t		 i;
	double		 d;

	n *= size;
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0)
		x->retry_after_ms = -1;
	else if (n > 12 && strncasecmp(buf, "retry-after:", 12) == 0) {
		for (i = 12; i < n && (buf[i] == ' ' || buf[i] == '\t'); i++)
			;
		snprintf(v, sizeof(v), "%.*s", (int)(n - i < sizeof(v) - 1 ?
		    n - i : sizeof(v) - 1), buf + i);
		d = strtod(v, &end);
		while (*end == '\r' || *end == '\n' || *end == ' ')
			end++;
		if (end != v && *end == '\0' && d >= 0 && d <= 1e6)
			x->retry_after_ms = (int64_t)(d * 1000);
	}
	return n;
}

/* Headers: JSON both ways, no 100-continue, the key when there is one. */
static struct curl_slist *
xfer_headers(const char *key)
{
	struct curl_slist	*h = NULL, *t;
	char			*kh;
	size_t			 klen;

	if ((t = curl_slist_append(h, "Content-Type: application/json")) ==
	    NULL)
		return NULL;
	h = t;
	if ((t = curl_slist_append(h, "Accept: application/json")) == NULL ||
	    (t = curl_slist_append(h, "Expect:")) == NULL)
		goto fail;
	if (key != NULL) {
		klen = strlen("Authorization: Bearer ") + strlen(key) + 1;
		if ((kh = malloc(klen)) == NULL)
			goto fail;
		snprintf(kh, klen, "Authorization: Bearer %s", key);
		t = curl_slist_append(h, kh);
		explicit_bzero(kh, klen);
		free(kh);
		if (t == NULL)
			goto fail;
	}
	return h;
 fail:
	curl_slist_free_all(h);
	return NULL;
}

/*
 * Readies x to send texts[from..to) (the easy handle made on first use);
 * owner, when not NULL, becomes its CURLOPT_PRIVATE for curlev.  0, or
 * -1 with err.
 */
static int
xfer_prep(struct xfer *x, void *owner, const char *const *texts,
    const size_t *lens, size_t from, size_t to, char *err, size_t errlen)
{
	const struct cfg_provider	*p = x->p;
	const char			*key = NULL, *base;
	size_t				 blen, ulen;

	if (p->api_key_env != NULL && *p->api_key_env != '\0' &&
	    ((key = getenv(p->api_key_env)) == NULL || *key == '\0')) {
		say(p, err, errlen, "the API key variable %s is not set",
		    p->api_key_env);
		return -1;
	}
	free(x->body);
	blen = body_put(NULL, model_of(p), texts, lens, from, to);
	if ((x->body = malloc(blen + 1)) == NULL)
		goto nomem;
	body_put(x->body, model_of(p), texts, lens, from, to);
	x->body[blen] = '\0';
	curl_slist_free_all(x->hdrs);
	if ((x->hdrs = xfer_headers(key)) == NULL)
		goto nomem;
	x->rxlen = 0;
	x->too_big = 0;
	x->nomem = 0;
	x->retry = 0;
	x->retry_after_ms = -1;
	x->errbuf[0] = '\0';
	if (x->easy == NULL) {
		base = p->url != NULL ? p->url : "https://api.openai.com/v1";
		ulen = strlen(base);
		while (ulen > 0 && base[ulen - 1] == '/')
			ulen--;
		free(x->url);
		if ((x->url = malloc(ulen + sizeof("/embeddings"))) == NULL)
			goto nomem;
		snprintf(x->url, ulen + sizeof("/embeddings"), "%.*s/embeddings",
		    (int)ulen, base);
		if ((x->easy = curl_easy_init()) == NULL)
			goto nomem;
		curl_easy_setopt(x->easy, CURLOPT_URL, x->url);
		curl_easy_setopt(x->easy, CURLOPT_POST, 1L);
		curl_easy_setopt(x->easy, CURLOPT_USERAGENT,
		    "parleyd (embedder)");
		curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, xfer_write);
		curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
		curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, xfer_header);
		curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
		curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
		/* Threads: no signals for DNS timeouts. */
		curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(x->easy, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)(
		    p->timeout_ms ? p->timeout_ms : EMBED_DEFAULT_TIMEOUT));
#if LIBCURL_VERSION_NUM >= 0x075500
		curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
#else
		curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS,
		    (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
		/* Certificate checks stay at libcurl's defaults: on. */
		if (owner != NULL)
			curl_easy_setopt(x->easy, CURLOPT_PRIVATE, owner);
	}
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE,
	    (curl_off_t)blen);
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->hdrs);
	return 0;
 nomem:
	say(p, err, errlen, "out of memory");
	return -1;
}

/*
 * A connection that broke on the way may work again; one refused, a name
 * unknown, a bad certificate or a timeout would most likely fail the
 * same way (and a build thread must not wait on a server that is down).
 */
static int
retryable_curl(CURLcode rc)
{
	switch (rc) {
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

/*
 * The exchange for n texts ended with rc: 0 and their vectors (malloc'd
 * n * *dim floats), or -1 with err and x->retry set when trying again
 * may do (a broken connection, 408, 409, 429, 5xx).
 */
static int
xfer_end(struct xfer *x, CURLcode rc, size_t n, float **vecs,
    unsigned *dim, char *err, size_t errlen)
{
	const struct cfg_provider	*p = x->p;
	long				 status = 0;
	char				 v[32], m[256];

	*vecs = NULL;
	*dim = 0;
	if (x->too_big) {
		util_fmt_size(x->max_reply, v, sizeof(v));
		say(p, err, errlen, "the reply is larger than %s", v);
		return -1;
	}
	if (x->nomem) {
		say(p, err, errlen, "out of memory");
		return -1;
	}
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		util_fmt_ms(p->timeout_ms ? p->timeout_ms :
		    EMBED_DEFAULT_TIMEOUT, v, sizeof(v));
		say(p, err, errlen, "no reply within timeout %s (raise "
		    "timeout in embedder %s for a slow server)", v, p->name);
		return -1;
	}
	if (rc != CURLE_OK) {
		say(p, err, errlen, "connection error: %s", x->errbuf[0] ?
		    x->errbuf : curl_easy_strerror(rc));
		x->retry = retryable_curl(rc);
		return -1;
	}
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		status_msg(p, status, x->rx, x->rxlen, err, errlen);
		x->retry = status == 408 || status == 409 || status == 429 ||
		    status >= 500;
		return -1;
	}
	if (reply_parse(x->rx != NULL ? x->rx : "", x->rxlen, n, vecs, dim,
	    m, sizeof(m)) == -1) {
		say(p, err, errlen, "%s", m);
		return -1;
	}
	return 0;
}

/*
 * Puts a request's cnt vectors of bd numbers (texts from..) into *all
 * (n * *dim floats, made at the first request): 0, or -1 with err.
 */
static int
merge(const struct cfg_provider *p, float **all, unsigned *dim,
    const float *v, unsigned bd, size_t from, size_t cnt, size_t n,
    char *err, size_t errlen)
{
	if (*all == NULL) {
		if (n > EMBED_VECS_MAX / sizeof(float) / bd) {
			say(p, err, errlen, "%zu vectors of %u numbers are "
			    "too many for one call", n, bd);
			return -1;
		}
		if ((*all = malloc(n * bd * sizeof(float))) == NULL) {
			say(p, err, errlen, "out of memory");
			return -1;
		}
		*dim = bd;
	} else if (bd != *dim) {
		say(p, err, errlen, "the reply for texts %zu to %zu has "
		    "vectors of %u numbers, the first reply's had %u", from,
		    from + cnt - 1, bd, *dim);
		return -1;
	}
	memcpy(*all + from * bd, v, cnt * bd * sizeof(float));
	return 0;
}

/* --- blocking --- */

/* How long embed_sync waits before try number tries + 1. */
static uint64_t
backoff_ms(const struct xfer *x, unsigned tries)
{
	if (x->retry_after_ms >= 0 && x->retry_after_ms <=
	    EMBED_RETRY_AFTER_MAX)
		return (uint64_t)x->retry_after_ms;
	return (uint64_t)EMBED_BACKOFF_FIRST << (tries - 1);
}

static void
sleep_ms(uint64_t ms)
{
	struct timespec ts, rem;

	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &rem) == -1 && errno == EINTR)
		ts = rem;
}

/*
 * One request of embed_sync, tried again after a failure that may pass
 * (up to EMBED_SYNC_TRIES in all): a build thread has time to wait out
 * a rate limit, where a search would rather go on without vectors.
 */
static int
sync_request(struct xfer *x, const char *const *texts, const size_t *lens,
    size_t from, size_t to, float **v, unsigned *bd, char *err,
    size_t errlen)
{
	CURLcode	rc;
	unsigned	tries;
	size_t		len;

	for (tries = 1;; tries++) {
		if (xfer_prep(x, NULL, texts, lens, from, to, err, errlen) ==
		    -1)
			return -1;
		rc = curl_easy_perform(x->easy);
		if (xfer_end(x, rc, to - from, v, bd, err, errlen) == 0)
			return 0;
		if (!x->retry || tries >= EMBED_SYNC_TRIES)
			break;
		sleep_ms(backoff_ms(x, tries));
	}
	if (tries > 1 && (len = strlen(err)) + 1 < errlen)
		snprintf(err + len, errlen - len, " (%u tries)", tries);
	return -1;
}

int
embed_sync(const struct cfg_provider *p, const char *const *texts,
    const size_t *lens, size_t n, float **vecs, unsigned *dim, char *err,
    size_t errlen)
{
	struct xfer	 x;
	float		*all = NULL, *v;
	unsigned	 d = 0, bd;
	size_t		 from, to;
	int		 r = -1;

	*vecs = NULL;
	*dim = 0;
	if (args_check(p, texts, lens, n, err, errlen) == -1)
		return -1;
	xfer_init(&x, p);
	for (from = 0; from < n; from = to) {
		to = batch_end(model_of(p), texts, lens, n, from);
		if (sync_request(&x, texts, lens, from, to, &v, &bd, err,
		    errlen) == -1)
			goto out;
		if (merge(p, &all, &d, v, bd, from, to - from, n, err,
		    errlen) == -1) {
			free(v);
			goto out;
		}
		free(v);
	}
	*vecs = all;
	all = NULL;
	*dim = d;
	r = 0;
 out:
	free(all);
	xfer_clear(&x);
	return r;
}

/* --- on the loop --- */

static void
req_free(struct embed_req *r)
{
	if (r->added)
		curlev_remove(r->cv, r->x.easy);
	xfer_clear(&r->x);
	curlev_free(r->cv);
	if (r->ev != NULL)
		event_free(r->ev);
	free(r->texts);
	free(r->lens);
	free(r->vecs);
	free(r);
}

static void
req_arm(struct embed_req *r, enum req_state st)
{
	struct timeval tv = { 0, 0 };

	r->state = st;
	evtimer_add(r->ev, &tv);
}

/* curlev: the request is over; read it from the loop, not from here. */
static void
req_xfer_done(void *owner, CURLcode rc)
{
	struct embed_req *r = owner;

	r->rc = rc;
	req_arm(r, REQ_FINISH);
}

static void
req_report(struct embed_req *r)
{
	r->in_done = 1;
	if (r->failed) {
		log_warnx("%s", r->err);
		r->done(r->arg, -1, r->err, NULL, 0);
	} else
		r->done(r->arg, 0, NULL, r->vecs, r->dim);
	req_free(r);
}

static void
req_ev(evutil_socket_t fd, short what, void *arg)
{
	struct embed_req	*r = arg;
	const struct cfg_provider *p = r->x.p;
	float			*v;
	unsigned		 bd;

	(void)fd;
	(void)what;
	switch (r->state) {
	case REQ_RUN:
		return;
	case REQ_REPORT:
		req_report(r);
		return;
	case REQ_FINISH:
		curlev_remove(r->cv, r->x.easy);
		r->added = 0;
		if (xfer_end(&r->x, r->rc, r->to - r->from, &v, &bd, r->err,
		    sizeof(r->err)) == -1) {
			r->failed = 1;
			req_report(r);
			return;
		}
		if (merge(p, &r->vecs, &r->dim, v, bd, r->from,
		    r->to - r->from, r->n, r->err, sizeof(r->err)) == -1) {
			free(v);
			r->failed = 1;
			req_report(r);
			return;
		}
		free(v);
		r->from = r->to;
		if (r->from >= r->n) {
			req_report(r);
			return;
		}
		/* FALLTHROUGH */
	case REQ_START:
		r->to = batch_end(model_of(p), r->texts, r->lens, r->n,
		    r->from);
		if (xfer_prep(&r->x, r, r->texts, r->lens, r->from, r->to,
		    r->err, sizeof(r->err)) == -1) {
			r->failed = 1;
			req_report(r);
			return;
		}
		if (curlev_add(r->cv, r->x.easy) == -1) {
			say(p, r->err, sizeof(r->err), "could not start the "
			    "request");
			r->failed = 1;
			req_report(r);
			return;
		}
		r->added = 1;
		r->state = REQ_RUN;
		return;
	}
}

/* The texts copied into one block: the pointers, then the bytes. */
static int
req_copy(struct embed_req *r, const char *const *texts, const size_t *lens,
    size_t n)
{
	size_t	 total = 0, i;
	char	*at;

	for (i = 0; i < n; i++) {
		if (lens[i] > SIZE_MAX / 2 - total)
			return -1;
		total += lens[i];
	}
	if (n > (SIZE_MAX / 2 - total) / sizeof(char *))
		return -1;
	if ((r->texts = malloc(n * sizeof(char *) + total + 1)) == NULL ||
	    (r->lens = malloc((n > 0 ? n : 1) * sizeof(size_t))) == NULL)
		return -1;
	at = (char *)(r->texts + n);
	for (i = 0; i < n; i++) {
		if (lens[i] > 0)
			memcpy(at, texts[i], lens[i]);
		r->texts[i] = at;
		r->lens[i] = lens[i];
		at += lens[i];
	}
	r->n = n;
	return 0;
}

struct embed_req *
embed_async(struct wk *wk, const char *const *texts, const size_t *lens,
    size_t n, embed_done_fn done, void *arg)
{
	const struct cfg_provider	*p;
	struct embed_req		*r;

	if (wk == NULL || !embed_enabled(wk->conf) || done == NULL)
		return NULL;
	p = wk->conf->embedder;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	xfer_init(&r->x, p);
	r->done = done;
	r->arg = arg;
	if ((r->ev = evtimer_new(wk->base, req_ev, r)) == NULL ||
	    (r->cv = curlev_new(wk->base, req_xfer_done, NULL, r)) == NULL) {
		req_free(r);
		return NULL;
	}
	if (args_check(p, texts, lens, n, r->err, sizeof(r->err)) == -1) {
		/* Reported from the loop, as every outcome is. */
		r->failed = 1;
		req_arm(r, REQ_REPORT);
		return r;
	}
	if (req_copy(r, texts, lens, n) == -1) {
		req_free(r);
		return NULL;
	}
	req_arm(r, n == 0 ? REQ_REPORT : REQ_START);
	return r;
}

void
embed_cancel(struct embed_req *r)
{
	/* From done itself: it is freed once done returns. */
	if (r == NULL || r->in_done)
		return;
	req_free(r);
}
