/*
 * The embedder: request bodies (escaping, invalid UTF-8, the batching
 * bounds), reply parsing (good, out of order, without index, count, dim
 * and number errors, error bodies), then embed_sync and embed_async
 * against tests/fixtures/fakellm.py (started once for the suite): the
 * vectors, what was sent, batches, HTTP errors, timeouts, a missing key,
 * an unreachable server, cancel.
 */
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "../../workers/embed.c"
#include "check_main.h"

#define FAKELLM	SRCDIR "/tests/fixtures/fakellm.py"
#define KEYVAR	"PARLEY_TEST_EMBED_KEY"
#define KEY	"sk-embed-test-0123456789"

static pid_t	fake_pid = -1;
static int	fake_port;

static struct cfg_provider prov = {
	.name = "emb", .type = "openai", .model = "text-embedding-3-small",
	.timeout_ms = 5000,
};

/* --- helpers --- */

static const float *
vec(const float *v, unsigned dim, size_t i)
{
	return v + i * dim;
}

static int
same(const float *a, const float *b, unsigned dim)
{
	return memcmp(a, b, dim * sizeof(float)) == 0;
}

/* Parses json as the reply for n inputs; returns reply_parse's result. */
static int
parse(const char *json, size_t n, float **v, unsigned *dim, char *m,
    size_t msize)
{
	m[0] = '\0';
	return reply_parse(json, strlen(json), n, v, dim, m, msize);
}

static void
parse_fails(const char *json, size_t n, const char *want)
{
	float		*v;
	unsigned	 dim;
	char		 m[256];

	ck_assert_int_eq(parse(json, n, &v, &dim, m, sizeof(m)), -1);
	ck_assert_ptr_null(v);
	if (strstr(m, want) == NULL)
		ck_abort_msg("message '%s' lacks '%s'", m, want);
}

/* --- the request body --- */

static char *
str_of(const char *s, size_t len)
{
	size_t	 n = json_str(NULL, s, len);
	char	*out = malloc(n + 1);

	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(json_str(out, s, len), n);
	out[n] = '\0';
	return out;
}

START_TEST(test_json_str)
{
	static const struct {
		const char	*in;
		size_t		 len;
		const char	*out;
	} t[] = {
		{ "plain", 5, "\"plain\"" },
		{ "", 0, "\" \"" },
		{ "q\"b\\", 4, "\"q\\\"b\\\\\"" },
		{ "a\nb\tc\rd\be\ff", 11, "\"a\\nb\\tc\\rd\\be\\ff\"" },
		{ "\x01\x1f", 2, "\"\\u0001\\u001f\"" },
		{ "nul\0x", 5, "\"nul\\u0000x\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
		    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
		/* a lone continuation, an overlong, a surrogate, a cut one */
		{ "a\x80z", 3, "\"a\\ufffdz\"" },
		{ "\xc0\xaf", 2, "\"\\ufffd\\ufffd\"" },
		{ "\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "x\xe2\x82", 3, "\"x\\ufffd\\ufffd\"" },
		{ "\x7f/", 2, "\"\x7f/\"" },
	};
	size_t	 i;
	char	*s;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		s = str_of(t[i].in, t[i].len);
		ck_assert_msg(strcmp(s, t[i].out) == 0, "%zu: %s", i, s);
		free(s);
	}
}
END_TEST

START_TEST(test_body)
{
	const char	*texts[] = { "one", "", "th\"ree\n", "bad\xff" };
	size_t		 lens[] = { 3, 0, 7, 4 };
	size_t		 n;
	char		*b;
	cJSON		*o, *in;

	n = body_put(NULL, "m\"x", texts, lens, 0, 4);
	b = malloc(n + 1);
	ck_assert_uint_eq(body_put(b, "m\"x", texts, lens, 0, 4), n);
	b[n] = '\0';
	ck_assert_str_eq(b, "{\"model\":\"m\\\"x\",\"input\":[\"one\",\" \","
	    "\"th\\\"ree\\n\",\"bad\\ufffd\"],\"encoding_format\":\"float\"}");
	o = cJSON_Parse(b);
	ck_assert_ptr_nonnull(o);
	in = cJSON_GetObjectItem(o, "input");
	ck_assert_int_eq(cJSON_GetArraySize(in), 4);
	ck_assert_str_eq(cJSON_GetArrayItem(in, 2)->valuestring, "th\"ree\n");
	ck_assert_str_eq(cJSON_GetArrayItem(in, 3)->valuestring,
	    "bad\xef\xbf\xbd");
	cJSON_Delete(o);
	free(b);
	/* A part: texts[1..3). */
	n = body_put(NULL, "m", texts, lens, 1, 3);
	b = malloc(n + 1);
	body_put(b, "m", texts, lens, 1, 3);
	b[n] = '\0';
	ck_assert_str_eq(b, "{\"model\":\"m\",\"input\":[\" \",\"th\\\"ree\\n\"],"
	    "\"encoding_format\":\"float\"}");
	free(b);
}
END_TEST

/* The batches a call makes: their ends, in ends; returns their count. */
static size_t
batches(const char *const *texts, const size_t *lens, size_t n,
    size_t *ends, size_t max)
{
	size_t from, k = 0, to;

	for (from = 0; from < n; from = to) {
		to = batch_end("text-embedding-3-small", texts, lens, n, from);
		ck_assert_uint_gt(to, from);
		ck_assert_uint_le(to - from, EMBED_BATCH_MAX);
		ck_assert_uint_le(body_put(NULL, "text-embedding-3-small",
		    texts, lens, from, to), EMBED_BODY_MAX);
		ck_assert_uint_lt(k, max);
		ends[k++] = to;
	}
	return k;
}

START_TEST(test_batching)
{
	static char	 big[100 * 1024], ctl[100 * 1024];
	const char	*texts[300];
	size_t		 lens[300], ends[64], i, k;
	char		 err[256];

	/* Small texts: 64 at a time. */
	for (i = 0; i < 200; i++) {
		texts[i] = "hello";
		lens[i] = 5;
	}
	k = batches(texts, lens, 200, ends, 64);
	ck_assert_uint_eq(k, 4);
	ck_assert_uint_eq(ends[0], 64);
	ck_assert_uint_eq(ends[1], 128);
	ck_assert_uint_eq(ends[2], 192);
	ck_assert_uint_eq(ends[3], 200);

	/* 100 KiB texts: five fit 512 KiB, six do not. */
	memset(big, 'a', sizeof(big));
	for (i = 0; i < 12; i++) {
		texts[i] = big;
		lens[i] = sizeof(big);
	}
	k = batches(texts, lens, 12, ends, 64);
	ck_assert_uint_eq(k, 3);
	ck_assert_uint_eq(ends[0], 5);
	ck_assert_uint_eq(ends[1], 10);
	ck_assert_uint_eq(ends[2], 12);

	/* The escaped size counts: 100 KiB of control bytes is 600 KiB of
	 * JSON, too much for any request, and said before anything is
	 * sent. */
	memset(ctl, 1, sizeof(ctl));
	texts[1] = ctl;
	lens[1] = sizeof(ctl);
	ck_assert_int_eq(args_check(&prov, texts, lens, 3, err, sizeof(err)),
	    -1);
	ck_assert_msg(strstr(err, "embedder emb: text 1 (102400 bytes) is "
	    "too large for one request") != NULL && strstr(err, "split") !=
	    NULL, "%s", err);
	/* So is a text of more than 512 KiB, without measuring it. */
	lens[1] = EMBED_BODY_MAX + 1;
	texts[1] = big;
	ck_assert_int_eq(fits_alone("m", texts, lens, 1), 0);
	lens[1] = 10;
	ck_assert_int_eq(args_check(&prov, texts, lens, 3, err, sizeof(err)),
	    0);
	/* Texts and lens missing with n > 0; NULL text with a length. */
	ck_assert_int_eq(args_check(&prov, NULL, lens, 1, err, sizeof(err)),
	    -1);
	texts[0] = NULL;
	ck_assert_int_eq(args_check(&prov, texts, lens, 1, err, sizeof(err)),
	    -1);
	lens[0] = 0;
	ck_assert_int_eq(args_check(&prov, texts, lens, 1, err, sizeof(err)),
	    0);
	ck_assert_int_eq(args_check(&prov, texts, lens, EMBED_TEXTS_MAX + 1,
	    err, sizeof(err)), -1);
}
END_TEST

/* --- the reply --- */

#define R1	"{\"object\":\"embedding\",\"index\":"
START_TEST(test_parse_good)
{
	float		*v;
	unsigned	 dim;
	char		 m[256];

	/* OpenAI's shape, pretty-printed as it sends it. */
	ck_assert_int_eq(parse("{\n  \"object\": \"list\",\n  \"data\": [\n"
	    "    {\n      \"object\": \"embedding\",\n      \"index\": 0,\n"
	    "      \"embedding\": [\n        0.5,\n        -0.25\n      ]\n"
	    "    },\n    {\"object\":\"embedding\",\"index\":1,\"embedding\":"
	    "[1e-3,-2]}\n  ],\n  \"model\": \"text-embedding-3-small\",\n"
	    "  \"usage\": {\"prompt_tokens\": 2, \"total_tokens\": 2}\n}\n", 2,
	    &v, &dim, m, sizeof(m)), 0);
	ck_assert_uint_eq(dim, 2);
	ck_assert_float_eq(v[0], 0.5f);
	ck_assert_float_eq(v[1], -0.25f);
	ck_assert_float_eq(v[2], 0.001f);
	ck_assert_float_eq(v[3], -2.0f);
	free(v);

	/* Out of order: placed by index. */
	ck_assert_int_eq(parse("{\"data\":[" R1 "2,\"embedding\":[3,3]},"
	    R1 "0,\"embedding\":[1,1]}," R1 "1,\"embedding\":[2,2]}]}", 3, &v,
	    &dim, m, sizeof(m)), 0);
	ck_assert_float_eq(v[0], 1);
	ck_assert_float_eq(v[2], 2);
	ck_assert_float_eq(v[4], 3);
	free(v);

	/* Without index (some servers): by position. */
	ck_assert_int_eq(parse("{\"data\":[{\"embedding\":[1]},"
	    "{\"embedding\":[2]}]}", 2, &v, &dim, m, sizeof(m)), 0);
	ck_assert_uint_eq(dim, 1);
	ck_assert_float_eq(v[0], 1);
	ck_assert_float_eq(v[1], 2);
	free(v);

	/* The most dimensions. */
	{
		char	*j = malloc(8192 * 2 + 64), *p = j;
		int	 i;

		p += sprintf(p, "{\"data\":[{\"embedding\":[");
		for (i = 0; i < KBI_DIM_MAX; i++)
			p += sprintf(p, "%s1", i ? "," : "");
		sprintf(p, "]}]}");
		ck_assert_int_eq(parse(j, 1, &v, &dim, m, sizeof(m)), 0);
		ck_assert_uint_eq(dim, KBI_DIM_MAX);
		free(v);
		/* One more is refused. */
		sprintf(p, ",1]}]}");
		parse_fails(j, 1, "data[0]: the embedding has 8193 numbers "
		    "(1 to 8192 expected)");
		free(j);
	}
	/* No inputs, no data: nothing. */
	ck_assert_int_eq(parse("{\"data\":[]}", 0, &v, &dim, m, sizeof(m)),
	    0);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(dim, 0);
}
END_TEST

START_TEST(test_parse_bad)
{
	parse_fails("", 1, "the reply is not JSON");
	parse_fails("{\"data\":[", 1, "the reply is not JSON");
	parse_fails("[]", 1, "no \"data\" list");
	parse_fails("{\"data\":{}}", 1, "no \"data\" list");
	parse_fails("{\"error\":{\"message\":\"quota\\nexceeded\"}}", 1,
	    "the reply is an error: quota exceeded");
	/* Count. */
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[1]}]}", 2,
	    "the reply has 1 embeddings for 2 inputs");
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[1]}," R1
	    "1,\"embedding\":[1]}]}", 1, "the reply has 2 embeddings for 1 "
	    "inputs");
	/* Index. */
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[1]}," R1
	    "0,\"embedding\":[2]}]}", 2, "data[1]: index 0 comes twice");
	parse_fails("{\"data\":[{\"embedding\":[1]}," R1
	    "0,\"embedding\":[2]}]}", 2, "data[1]: index 0 comes twice");
	parse_fails("{\"data\":[" R1 "2,\"embedding\":[1]}," R1
	    "0,\"embedding\":[2]}]}", 2, "data[0]: \"index\" is not one of 0 "
	    "to 1");
	parse_fails("{\"data\":[" R1 "-1,\"embedding\":[1]}]}", 1,
	    "\"index\" is not one");
	parse_fails("{\"data\":[" R1 "0.5,\"embedding\":[1]}]}", 1,
	    "\"index\" is not one");
	parse_fails("{\"data\":[" R1 "\"0\",\"embedding\":[1]}]}", 1,
	    "\"index\" is not one");
	/* Dimensions. */
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[1,2]}," R1
	    "1,\"embedding\":[1,2,3]}]}", 2, "data[1]: the embedding has 3 "
	    "numbers, data[0]'s 2");
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[]}]}", 1,
	    "data[0]: the embedding has 0 numbers (1 to 8192 expected)");
	/* Not numbers. */
	parse_fails("{\"data\":[" R1 "0,\"embedding\":\"AACAPw==\"}]}", 1,
	    "data[0]: \"embedding\" is not a list of numbers");
	parse_fails("{\"data\":[" R1 "0}]}", 1,
	    "data[0]: \"embedding\" is not a list of numbers");
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[1,\"2\"]}]}", 1,
	    "data[0]: embedding[1] is not a number");
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[null]}]}", 1,
	    "embedding[0] is not a number");
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[1e999]}]}", 1,
	    "embedding[0] is not a number");
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[1e39]}]}", 1,
	    "embedding[0] is not a number");
	parse_fails("{\"data\":[" R1 "0,\"embedding\":[[1]]}]}", 1,
	    "embedding[0] is not a number");
}
END_TEST

START_TEST(test_error_bodies)
{
	static const struct {
		long		 status;
		const char	*body;
		const char	*want;
	} t[] = {
		{ 401, "{\"error\":{\"message\":\"Incorrect API key provided\","
		    "\"type\":\"invalid_request_error\"}}",
		    "embedder emb: HTTP 401: Incorrect API key provided" },
		{ 500, "{\"error\":\"model not loaded\"}",
		    "embedder emb: HTTP 500: model not loaded" },
		{ 400, "{\"object\":\"error\",\"message\":\"too long\","
		    "\"type\":\"BadRequestError\",\"code\":400}",
		    "embedder emb: HTTP 400: too long" },
		{ 422, "{\"detail\":\"input: field required\"}",
		    "embedder emb: HTTP 422: input: field required" },
		{ 502, "<html>\r\n<h1>Bad gateway</h1></html>",
		    "embedder emb: HTTP 502: <html>  <h1>Bad gateway</h1></html>" },
		{ 503, "", "embedder emb: HTTP 503" },
		{ 404, "{\"error\":{\"code\":404}}",
		    "embedder emb: HTTP 404: {\"error\":{\"code\":404}}" },
	};
	char	m[512], *longb;
	size_t	i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		status_msg(&prov, t[i].status, t[i].body, strlen(t[i].body), m,
		    sizeof(m));
		ck_assert_str_eq(m, t[i].want);
	}
	/* A long body is cut, on a character boundary. */
	longb = malloc(5000);
	memset(longb, 'x', 5000);
	memcpy(longb + 198, "\xc3\xa9", 2);
	status_msg(&prov, 500, longb, 5000, m, sizeof(m));
	ck_assert_uint_eq(strlen(m), strlen("embedder emb: HTTP 500: ") + 200);
	memcpy(longb + 199, "\xc3\xa9", 2);
	status_msg(&prov, 500, longb, 5000, m, sizeof(m));
	ck_assert_uint_eq(strlen(m), strlen("embedder emb: HTTP 500: ") + 199);
	free(longb);
}
END_TEST

START_TEST(test_merge)
{
	float		*all = NULL, a[4] = { 1, 2, 3, 4 }, b[3] = { 5, 6, 7 };
	unsigned	 dim = 0;
	char		 err[256];

	ck_assert_int_eq(merge(&prov, &all, &dim, a, 2, 0, 2, 3, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(dim, 2);
	ck_assert_float_eq(all[3], 4);
	/* A later request answered with another dimension. */
	ck_assert_int_eq(merge(&prov, &all, &dim, b, 3, 2, 1, 3, err,
	    sizeof(err)), -1);
	ck_assert_str_eq(err, "embedder emb: the reply for texts 2 to 2 has "
	    "vectors of 3 numbers, the first reply's had 2");
	ck_assert_int_eq(merge(&prov, &all, &dim, b, 2, 2, 1, 3, err,
	    sizeof(err)), 0);
	ck_assert_float_eq(all[4], 5);
	ck_assert_float_eq(all[5], 6);
	free(all);
}
END_TEST

/* --- against fakellm.py --- */

struct buf {
	char	*p;
	size_t	 len, cap;
};

static size_t
buf_write(char *d, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;

	ck_assert_int_eq(util_append(&b->p, &b->len, &b->cap, d, size * n), 0);
	return size * n;
}

/* A control request to fakellm; the reply parsed (the caller frees it). */
static cJSON *
fake(const char *method, const char *path, const char *body)
{
	struct buf	 b = { NULL, 0, 0 };
	char		 url[256];
	CURL		*e;
	cJSON		*o;
	long		 st = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", fake_port, path);
	ck_assert_ptr_nonnull(e = curl_easy_init());
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, buf_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
	ck_assert_int_eq(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
	ck_assert_int_eq(st, 200);
	curl_easy_cleanup(e);
	o = cJSON_ParseWithLength(b.p, b.len);
	ck_assert_ptr_nonnull(o);
	free(b.p);
	return o;
}

static void
fake_script(const char *steps)
{
	char	body[4096];

	cJSON_Delete(fake("POST", "/_reset", "{}"));
	snprintf(body, sizeof(body), "{\"queue\":%s}", steps);
	cJSON_Delete(fake("POST", "/_embeddings_script", body));
}

/* The embeddings requests fakellm got. */
static cJSON *
fake_reqs(void)
{
	return fake("GET", "/_requests?api=embeddings", NULL);
}

static void
fake_start(void)
{
	struct pollfd	 pfd;
	char		 line[128];
	size_t		 len = 0;
	ssize_t		 r;
	int		 p[2];

	if (pipe(p) == -1)
		abort();
	if ((fake_pid = fork()) == -1)
		abort();
	if (fake_pid == 0) {
		/* The fixture goes when the suite does, however it ends. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl("/usr/bin/python3", "python3", "-u", FAKELLM, "0",
		    (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (len < sizeof(line) - 1 && memchr(line, '\n', len) == NULL) {
		if (poll(&pfd, 1, 10000) != 1 ||
		    (r = read(p[0], line + len, sizeof(line) - 1 - len)) <= 0) {
			fprintf(stderr, "fakellm did not start\n");
			abort();
		}
		len += (size_t)r;
		line[len] = '\0';
	}
	close(p[0]);
	if (sscanf(line, "fakellm listening 127.0.0.1 %d", &fake_port) != 1)
		abort();
}

static void
fake_stop(void)
{
	if (fake_pid > 0) {
		kill(fake_pid, SIGTERM);
		waitpid(fake_pid, NULL, 0);
	}
}

static char url_buf[128];

/* The provider for fakellm, with the key set. */
static void
live(void)
{
	snprintf(url_buf, sizeof(url_buf), "http://127.0.0.1:%d/v1",
	    fake_port);
	prov.url = url_buf;
	prov.api_key_env = KEYVAR;
	prov.timeout_ms = 5000;
	setenv(KEYVAR, KEY, 1);
}

static double
dot(const float *a, const float *b, unsigned dim)
{
	double	s = 0;
	unsigned i;

	for (i = 0; i < dim; i++)
		s += (double)a[i] * b[i];
	return s;
}

START_TEST(test_sync)
{
	const char	*texts[] = { "The automobile", "a car!", "The dogs",
			    "canine" };
	size_t		 lens[4], i;
	float		*v;
	unsigned	 dim;
	char		 err[256], want[64];
	cJSON		*reqs, *r, *b, *in;

	live();
	fake_script("[]");
	for (i = 0; i < 4; i++)
		lens[i] = strlen(texts[i]);
	ck_assert_msg(embed_sync(&prov, texts, lens, 4, &v, &dim, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(dim, 64);
	/* The fixture's synonyms: automobile is car, canine is dog. */
	ck_assert(same(vec(v, dim, 0), vec(v, dim, 1), dim));
	ck_assert(same(vec(v, dim, 2), vec(v, dim, 3), dim));
	ck_assert(!same(vec(v, dim, 0), vec(v, dim, 2), dim));
	ck_assert(dot(vec(v, dim, 0), vec(v, dim, 0), dim) > 0.999);
	ck_assert(dot(vec(v, dim, 0), vec(v, dim, 2), dim) < 0.5);
	free(v);

	/* What was sent. */
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 1);
	r = cJSON_GetArrayItem(reqs, 0);
	ck_assert_str_eq(cJSON_GetObjectItem(r, "path")->valuestring,
	    "/v1/embeddings");
	ck_assert_str_eq(cJSON_GetObjectItem(r, "method")->valuestring,
	    "POST");
	snprintf(want, sizeof(want), "Bearer <redacted len=%zu>", strlen(KEY));
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(r,
	    "headers"), "authorization")->valuestring, want);
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(r,
	    "headers"), "content-type")->valuestring, "application/json");
	b = cJSON_GetObjectItem(r, "body");
	ck_assert_str_eq(cJSON_GetObjectItem(b, "model")->valuestring,
	    "text-embedding-3-small");
	ck_assert_str_eq(cJSON_GetObjectItem(b, "encoding_format")->valuestring,
	    "float");
	in = cJSON_GetObjectItem(b, "input");
	ck_assert_int_eq(cJSON_GetArraySize(in), 4);
	ck_assert_str_eq(cJSON_GetArrayItem(in, 2)->valuestring, "The dogs");
	cJSON_Delete(reqs);

	/* No key configured: no Authorization. */
	prov.api_key_env = NULL;
	fake_script("[]");
	ck_assert_int_eq(embed_sync(&prov, texts, lens, 1, &v, &dim, err,
	    sizeof(err)), 0);
	free(v);
	reqs = fake_reqs();
	ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(
	    cJSON_GetArrayItem(reqs, 0), "headers"), "authorization"));
	cJSON_Delete(reqs);

	/* No texts: no request. */
	ck_assert_int_eq(embed_sync(&prov, NULL, NULL, 0, &v, &dim, err,
	    sizeof(err)), 0);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(dim, 0);
}
END_TEST

START_TEST(test_sync_batches)
{
	static const char *words[] = { "car", "automobile", "dog", "kitten" };
	const char	*texts[150];
	size_t		 lens[150], i;
	float		*v;
	unsigned	 dim;
	char		 err[256];
	cJSON		*reqs;

	live();
	/* The second request is answered in reverse order (by index). */
	fake_script("[{\"kind\":\"vectors\"},{\"kind\":\"vectors\","
	    "\"order\":\"reverse\"}]");
	for (i = 0; i < 150; i++) {
		texts[i] = words[i % 4];
		lens[i] = strlen(texts[i]);
	}
	ck_assert_msg(embed_sync(&prov, texts, lens, 150, &v, &dim, err,
	    sizeof(err)) == 0, "%s", err);
	/* In the texts' order: car and automobile alike, dog, kitten. */
	for (i = 0; i < 150; i++)
		ck_assert_msg(same(vec(v, dim, i), vec(v, dim, i % 4 == 1 ? 0 :
		    i % 4), dim), "text %zu", i);
	ck_assert(!same(vec(v, dim, 0), vec(v, dim, 2), dim));
	ck_assert(!same(vec(v, dim, 2), vec(v, dim, 3), dim));
	free(v);
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 3);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(
		    cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, (int)i),
		    "body"), "input")), i < 2 ? 64 : 22);
	cJSON_Delete(reqs);
}
END_TEST

/* embed_sync of two texts against steps; -1 expected, with want in err. */
static void
sync_fails(const char *steps, const char *want)
{
	const char	*texts[] = { "one", "two" };
	size_t		 lens[] = { 3, 3 };
	float		*v;
	unsigned	 dim;
	char		 err[512];

	fake_script(steps);
	ck_assert_int_eq(embed_sync(&prov, texts, lens, 2, &v, &dim, err,
	    sizeof(err)), -1);
	ck_assert_ptr_null(v);
	if (strstr(err, want) == NULL)
		ck_abort_msg("'%s' lacks '%s'", err, want);
}

START_TEST(test_sync_errors)
{
	const char	*texts[] = { "one" };
	size_t		 lens[] = { 3 };
	float		*v;
	unsigned	 dim;
	char		 err[512];
	cJSON		*reqs;
	uint64_t	 t0;

	live();
	/* Tried four times (at once: the server says so), then said. */
	sync_fails("[{\"kind\":\"http_error\",\"status\":500,\"repeat\":4,"
	    "\"headers\":{\"retry-after\":\"0\"}}]",
	    "embedder emb: HTTP 500: The server had an error while "
	    "processing your request. Sorry about that! (4 tries)");
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 4);
	cJSON_Delete(reqs);
	sync_fails("[{\"kind\":\"http_error\",\"status\":429,\"repeat\":4,"
	    "\"headers\":{\"Retry-After\":\"0\"}}]",
	    "embedder emb: HTTP 429: Rate limit reached");
	/* A 400 is not tried again. */
	sync_fails("[{\"kind\":\"http_error\",\"status\":400,"
	    "\"headers\":{\"retry-after\":\"0\"}}]",
	    "embedder emb: HTTP 400: Invalid request.");
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 1);
	cJSON_Delete(reqs);
	/* A passing failure: the next try does it, after 1s, then 2s by
	 * default, after what Retry-After says when it does.  (The cut
	 * comes first, on a fresh connection, which libcurl itself does not
	 * try again.) */
	fake_script("[{\"kind\":\"cut\"},{\"kind\":\"http_error\","
	    "\"status\":503},{\"kind\":\"http_error\",\"status\":429,"
	    "\"headers\":{\"retry-after\":\"0.1\"}}]");
	t0 = util_mono_ms();
	ck_assert_msg(embed_sync(&prov, texts, lens, 1, &v, &dim, err,
	    sizeof(err)) == 0, "%s", err);
	free(v);
	/* 1s, 2s, then 0.1s */
	ck_assert_uint_ge(util_mono_ms() - t0, 3000);
	ck_assert_uint_lt(util_mono_ms() - t0, 5000);
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 4);
	cJSON_Delete(reqs);
	sync_fails("[{\"kind\":\"vectors\",\"count_delta\":-1}]",
	    "embedder emb: the reply has 1 embeddings for 2 inputs");
	sync_fails("[{\"kind\":\"vectors\",\"bad_dim_at\":1}]",
	    "embedder emb: data[1]: the embedding has 63 numbers, data[0]'s "
	    "64");
	sync_fails("[{\"kind\":\"vectors\",\"bad_value_at\":0}]",
	    "embedder emb: data[0]: embedding[0] is not a number");
	sync_fails("[{\"kind\":\"vectors\",\"dim\":9000}]",
	    "the embedding has 9000 numbers (1 to 8192 expected)");
	sync_fails("[{\"kind\":\"raw\",\"data\":\"{\\\"data\\\":\"}]",
	    "embedder emb: the reply is not JSON");
	/* Without index: by position, fine. */
	fake_script("[{\"kind\":\"vectors\",\"no_index\":true}]");
	ck_assert_int_eq(embed_sync(&prov, texts, lens, 1, &v, &dim, err,
	    sizeof(err)), 0);
	free(v);

	/* Slow: the block's timeout. */
	prov.timeout_ms = 400;
	t0 = util_mono_ms();
	sync_fails("[{\"kind\":\"vectors\",\"first_byte_ms\":3000}]",
	    "embedder emb: no reply within timeout 400ms (raise timeout in "
	    "embedder emb for a slow server)");
	ck_assert_uint_lt(util_mono_ms() - t0, 2000);
	prov.timeout_ms = 5000;

	/* The key's variable unset: nothing sent. */
	unsetenv(KEYVAR);
	sync_fails("[]", "embedder emb: the API key variable "
	    "PARLEY_TEST_EMBED_KEY is not set");
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 0);
	cJSON_Delete(reqs);
	setenv(KEYVAR, "", 1);
	sync_fails("[]", "is not set");
	setenv(KEYVAR, KEY, 1);

	/* Nobody listening. */
	prov.url = "http://127.0.0.1:1/v1";
	sync_fails("[]", "embedder emb: connection error: ");
	/* Not http(s). */
	prov.url = "file:///etc/passwd";
	sync_fails("[]", "embedder emb: connection error: ");
	live();
}
END_TEST

START_TEST(test_sync_max_reply)
{
	const char	*texts[] = { "one", "two" };
	size_t		 lens[] = { 3, 3 };
	float		*v;
	unsigned	 dim;
	char		 err[512];

	live();
	prov.max_reply = 1000;
	fake_script("[]");
	ck_assert_int_eq(embed_sync(&prov, texts, lens, 2, &v, &dim, err,
	    sizeof(err)), -1);
	ck_assert_str_eq(err, "embedder emb: the reply is larger than 1000");
	prov.max_reply = 0;
}
END_TEST

struct job {
	const char	*word;
	int		 rc;
	unsigned	 dim;
	float		*v;
	char		 err[256];
};

static void *
job_run(void *arg)
{
	struct job	*j = arg;
	const char	*texts[100];
	size_t		 lens[100], i;

	for (i = 0; i < 100; i++) {
		texts[i] = j->word;
		lens[i] = strlen(j->word);
	}
	j->rc = embed_sync(&prov, texts, lens, 100, &j->v, &j->dim, j->err,
	    sizeof(j->err));
	return NULL;
}

/* Threads at once: each call its own, no shared state. */
START_TEST(test_sync_threads)
{
	struct job	 jobs[4] = { { "car", 0, 0, NULL, "" },
			    { "dog", 0, 0, NULL, "" }, { "cat", 0, 0, NULL, "" },
			    { "automobile", 0, 0, NULL, "" } };
	pthread_t	 t[4];
	cJSON		*reqs;
	int		 i, k;

	live();
	fake_script("[]");
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, job_run,
		    &jobs[i]), 0);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 4; i++) {
		ck_assert_msg(jobs[i].rc == 0, "%s", jobs[i].err);
		ck_assert_uint_eq(jobs[i].dim, 64);
		for (k = 1; k < 100; k++)
			ck_assert(same(vec(jobs[i].v, 64, 0), vec(jobs[i].v,
			    64, (size_t)k), 64));
	}
	ck_assert(same(jobs[0].v, jobs[3].v, 64));
	ck_assert(!same(jobs[0].v, jobs[1].v, 64));
	ck_assert(!same(jobs[1].v, jobs[2].v, 64));
	for (i = 0; i < 4; i++)
		free(jobs[i].v);
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 8);
	cJSON_Delete(reqs);
}
END_TEST

/* The embedder block as parleyd.conf gives it: url, key, model, timeout. */
START_TEST(test_sync_config)
{
	const char	*texts[] = { "vehicle" };
	size_t		 lens[] = { 7 };
	struct config	*c;
	float		*v;
	unsigned	 dim;
	char		 text[512], err[512];
	cJSON		*reqs, *r;

	setenv(KEYVAR, KEY, 1);
	snprintf(text, sizeof(text), "embedder local {\n"
	    "    type openai\n"
	    "    url \"http://127.0.0.1:%d/prefix/v1/\"\n"
	    "    model \"nomic-embed-text\"\n"
	    "    api-key-env " KEYVAR "\n"
	    "    timeout 2s\n"
	    "}\n", fake_port);
	c = config_parse_string("x.conf", text, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(embed_enabled(c), 1);
	ck_assert_uint_eq(c->embedder->timeout_ms, 2000);
	fake_script("[{\"kind\":\"vectors\",\"dim\":768}]");
	ck_assert_msg(embed_sync(c->embedder, texts, lens, 1, &v, &dim, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(dim, 768);
	free(v);
	reqs = fake_reqs();
	r = cJSON_GetArrayItem(reqs, 0);
	ck_assert_str_eq(cJSON_GetObjectItem(r, "path")->valuestring,
	    "/prefix/v1/embeddings");
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "body"),
	    "model")->valuestring, "nomic-embed-text");
	cJSON_Delete(reqs);
	/* The timeout is the block's. */
	fake_script("[{\"kind\":\"vectors\",\"first_byte_ms\":4000}]");
	ck_assert_int_eq(embed_sync(c->embedder, texts, lens, 1, &v, &dim,
	    err, sizeof(err)), -1);
	ck_assert_str_eq(err, "embedder local: no reply within timeout 2s "
	    "(raise timeout in embedder local for a slow server)");
	config_free(c);
}
END_TEST

/* --- embed_async --- */

struct got {
	int		 calls;
	int		 err;
	char		 msg[512];
	float		*vecs;
	unsigned	 dim;
	struct event_base *base;
	struct embed_req *self;		/* cancelled from done: no effect */
};

static void
got_done(void *arg, int err, const char *msg, const float *vecs,
    unsigned dim)
{
	struct got *g = arg;

	g->calls++;
	g->err = err;
	snprintf(g->msg, sizeof(g->msg), "%s", msg != NULL ? msg : "");
	g->dim = dim;
	if (vecs != NULL) {
		g->vecs = malloc(dim * sizeof(float) * 4);
		memcpy(g->vecs, vecs, dim * sizeof(float) * 4);
	}
	if (g->self != NULL)
		embed_cancel(g->self);
	event_base_loopexit(g->base, NULL);
}

static void
run_loop(struct event_base *base, int secs)
{
	struct timeval tv = { secs, 0 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

static struct config conf;

static void
wk_make(struct wk *wk, struct event_base *base)
{
	memset(wk, 0, sizeof(*wk));
	memset(&conf, 0, sizeof(conf));
	conf.embedder = &prov;
	wk->base = base;
	wk->conf = &conf;
}

START_TEST(test_async)
{
	const char	*texts[] = { "automobile", "car", "dog", "" };
	size_t		 lens[] = { 10, 3, 3, 0 };
	struct event_base *base = event_base_new();
	struct wk	 wk;
	struct got	 g;
	struct embed_req *r;
	cJSON		*reqs, *in;
	char		 *copy = strdup("automobile");

	live();
	wk_make(&wk, base);
	ck_assert_int_eq(embed_enabled(&conf), 1);
	fake_script("[{\"kind\":\"vectors\",\"order\":\"reverse\"}]");
	memset(&g, 0, sizeof(g));
	g.base = base;
	texts[0] = copy;
	r = embed_async(&wk, texts, lens, 4, got_done, &g);
	ck_assert_ptr_nonnull(r);
	/* Copied: the caller's text may change at once. */
	memset(copy, 'z', 10);
	ck_assert_int_eq(g.calls, 0);	/* never before returning */
	g.self = r;			/* done may cancel: no effect */
	run_loop(base, 10);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_msg(g.err == 0, "%s", g.msg);
	ck_assert_uint_eq(g.dim, 64);
	ck_assert(same(vec(g.vecs, 64, 0), vec(g.vecs, 64, 1), 64));
	ck_assert(!same(vec(g.vecs, 64, 0), vec(g.vecs, 64, 2), 64));
	free(g.vecs);
	reqs = fake_reqs();
	in = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(reqs,
	    0), "body"), "input");
	ck_assert_str_eq(cJSON_GetArrayItem(in, 0)->valuestring, "automobile");
	ck_assert_str_eq(cJSON_GetArrayItem(in, 3)->valuestring, " ");
	cJSON_Delete(reqs);
	free(copy);

	/* No texts: done, with nothing, from the loop. */
	memset(&g, 0, sizeof(g));
	g.base = base;
	ck_assert_ptr_nonnull(embed_async(&wk, NULL, NULL, 0, got_done, &g));
	ck_assert_int_eq(g.calls, 0);
	run_loop(base, 5);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_int_eq(g.err, 0);
	ck_assert_ptr_null(g.vecs);
	ck_assert_uint_eq(g.dim, 0);

	/* No embedder: NULL. */
	conf.embedder = NULL;
	ck_assert_int_eq(embed_enabled(&conf), 0);
	ck_assert_int_eq(embed_enabled(NULL), 0);
	ck_assert_ptr_null(embed_async(&wk, texts, lens, 1, got_done, &g));
	event_base_free(base);
}
END_TEST

START_TEST(test_async_batches)
{
	const char	*texts[130];
	size_t		 lens[130], i;
	struct event_base *base = event_base_new();
	struct wk	 wk;
	struct got	 g;
	cJSON		*reqs;

	live();
	wk_make(&wk, base);
	fake_script("[]");
	for (i = 0; i < 130; i++) {
		texts[i] = i % 2 ? "kitten" : "feline";
		lens[i] = strlen(texts[i]);
	}
	memset(&g, 0, sizeof(g));
	g.base = base;
	ck_assert_ptr_nonnull(embed_async(&wk, texts, lens, 130, got_done,
	    &g));
	run_loop(base, 10);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_msg(g.err == 0, "%s", g.msg);
	free(g.vecs);
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 3);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 2), "body"),
	    "input")), 2);
	cJSON_Delete(reqs);

	/* The second request fails: done once, with its error. */
	fake_script("[{\"kind\":\"vectors\"},{\"kind\":\"http_error\","
	    "\"status\":503}]");
	memset(&g, 0, sizeof(g));
	g.base = base;
	ck_assert_ptr_nonnull(embed_async(&wk, texts, lens, 130, got_done,
	    &g));
	run_loop(base, 10);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_int_eq(g.err, -1);
	ck_assert_str_eq(g.msg, "embedder emb: HTTP 503: The engine is "
	    "currently overloaded, please try again later.");
	ck_assert_ptr_null(g.vecs);
	event_base_free(base);
}
END_TEST

START_TEST(test_async_errors)
{
	static char	 ctl[100 * 1024];
	const char	*texts[] = { "one", ctl };
	size_t		 lens[] = { 3, sizeof(ctl) };
	struct event_base *base = event_base_new();
	struct wk	 wk;
	struct got	 g;
	uint64_t	 t0;
	cJSON		*reqs;

	live();
	wk_make(&wk, base);
	/* A text too large: said from the loop, nothing sent. */
	fake_script("[]");
	memset(ctl, 1, sizeof(ctl));
	memset(&g, 0, sizeof(g));
	g.base = base;
	ck_assert_ptr_nonnull(embed_async(&wk, texts, lens, 2, got_done, &g));
	ck_assert_int_eq(g.calls, 0);
	run_loop(base, 5);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_int_eq(g.err, -1);
	ck_assert(strstr(g.msg, "text 1 (102400 bytes) is too large") != NULL);
	reqs = fake_reqs();
	ck_assert_int_eq(cJSON_GetArraySize(reqs), 0);
	cJSON_Delete(reqs);

	/* Slow: the timeout. */
	prov.timeout_ms = 300;
	fake_script("[{\"kind\":\"vectors\",\"first_byte_ms\":3000}]");
	memset(&g, 0, sizeof(g));
	g.base = base;
	t0 = util_mono_ms();
	ck_assert_ptr_nonnull(embed_async(&wk, texts, lens, 1, got_done, &g));
	run_loop(base, 10);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_str_eq(g.msg, "embedder emb: no reply within timeout 300ms "
	    "(raise timeout in embedder emb for a slow server)");
	ck_assert_uint_lt(util_mono_ms() - t0, 2000);
	prov.timeout_ms = 5000;

	/* Key unset. */
	unsetenv(KEYVAR);
	memset(&g, 0, sizeof(g));
	g.base = base;
	ck_assert_ptr_nonnull(embed_async(&wk, texts, lens, 1, got_done, &g));
	run_loop(base, 5);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_str_eq(g.msg, "embedder emb: the API key variable "
	    "PARLEY_TEST_EMBED_KEY is not set");
	setenv(KEYVAR, KEY, 1);

	/* The connection cut: not tried again here. */
	fake_script("[{\"kind\":\"cut\"}]");
	memset(&g, 0, sizeof(g));
	g.base = base;
	ck_assert_ptr_nonnull(embed_async(&wk, texts, lens, 1, got_done, &g));
	run_loop(base, 5);
	ck_assert_int_eq(g.calls, 1);
	ck_assert_str_eq(g.msg, "embedder emb: connection error: Empty reply "
	    "from server");

	/* Nobody listening. */
	prov.url = "http://127.0.0.1:1/v1";
	memset(&g, 0, sizeof(g));
	g.base = base;
	ck_assert_ptr_nonnull(embed_async(&wk, texts, lens, 1, got_done, &g));
	run_loop(base, 5);
	ck_assert_int_eq(g.calls, 1);
	ck_assert(strncmp(g.msg, "embedder emb: connection error: ", 32) == 0);
	live();
	event_base_free(base);
}
END_TEST

static void
cancel_ev(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	embed_cancel(arg);
}

START_TEST(test_async_cancel)
{
	const char	*texts[] = { "one" };
	size_t		 lens[] = { 3 };
	struct event_base *base = event_base_new();
	struct wk	 wk;
	struct got	 g;
	struct embed_req *r;
	struct event	*ev;
	struct timeval	 tv = { 0, 200000 };
	cJSON		*reqs;
	const char	*state;
	int		 i;

	live();
	wk_make(&wk, base);
	/* Cancelled at once: nothing sent, done never called. */
	fake_script("[]");
	memset(&g, 0, sizeof(g));
	g.base = base;
	r = embed_async(&wk, texts, lens, 1, got_done, &g);
	ck_assert_ptr_nonnull(r);
	embed_cancel(r);
	run_loop(base, 1);
	ck_assert_int_eq(g.calls, 0);

	/* Cancelled while the server takes its time: the connection
	 * closes, done is never called. */
	fake_script("[{\"kind\":\"vectors\",\"first_byte_ms\":3000}]");
	r = embed_async(&wk, texts, lens, 1, got_done, &g);
	ck_assert_ptr_nonnull(r);
	ev = evtimer_new(base, cancel_ev, r);
	evtimer_add(ev, &tv);
	run_loop(base, 1);
	ck_assert_int_eq(g.calls, 0);
	event_free(ev);
	for (i = 0; i < 100; i++) {
		reqs = fake_reqs();
		ck_assert_int_eq(cJSON_GetArraySize(reqs), 1);
		state = cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 0),
		    "state")->valuestring;
		if (strcmp(state, "open") != 0)
			break;
		cJSON_Delete(reqs);
		reqs = NULL;
		usleep(50000);
	}
	ck_assert_ptr_nonnull(reqs);
	ck_assert_str_eq(state, "client_closed");
	cJSON_Delete(reqs);
	event_base_free(base);
}
END_TEST

static Suite *
embed_suite(void)
{
	Suite	*s = suite_create("embed");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_json_str);
	tcase_add_test(tc, test_body);
	tcase_add_test(tc, test_batching);
	tcase_add_test(tc, test_parse_good);
	tcase_add_test(tc, test_parse_bad);
	tcase_add_test(tc, test_error_bodies);
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_sync);
	tcase_add_test(tc, test_sync_batches);
	tcase_add_test(tc, test_sync_errors);
	tcase_add_test(tc, test_sync_max_reply);
	tcase_add_test(tc, test_sync_config);
	tcase_add_test(tc, test_sync_threads);
	tcase_add_test(tc, test_async);
	tcase_add_test(tc, test_async_batches);
	tcase_add_test(tc, test_async_errors);
	tcase_add_test(tc, test_async_cancel);
	suite_add_tcase(s, tc);
	return s;
}

int	main(void);

int
main(void)
{
	int rc;

	log_init("test_embed", 1, LOG_LEVEL_WARN);
	if (curlev_global_init() == -1)
		return EXIT_FAILURE;
	signal(SIGPIPE, SIG_IGN);
	fake_start();
	rc = check_run(embed_suite());
	fake_stop();
	return rc;
}
