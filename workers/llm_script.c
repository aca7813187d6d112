/*
 * type script: streams a fixed reply in chunks of `chunk` characters, one
 * every `delay`; chunks already due when it is late (delay 0: all) go
 * together, up to SCRIPT_BURST a tick, as a real provider's stream read
 * after a busy loop pass holds every chunk sent meanwhile.  It is the
 * built-in demo provider and the fixture the tests drive, so it behaves
 * like a real one: asynchronous, cancellable, with usage figures.  It
 * ignores the tools it is offered.
 *
 * Test fixture: a `reply` of the form
 *	@tool {"calls":[{"name":"srv__tool","arguments":{...}}],"then":"text"}
 * makes it play one tool round.  A request with no "tool" message after
 * the last "user" message (the first of a turn) gets the calls (ids
 * "call_1", "call_2"...; arguments as compact JSON) and done with stop
 * reason "tool_calls", no tokens.  A request with tool messages after the
 * last "user" message gets "then" streamed as usual, followed by those
 * tool results' content joined with " | " (separated from "then" by
 * " | " too, when "then" is not empty), so tests can see that results
 * reached the model.  A reply that starts with "@tool " but does not hold
 * such an object is streamed as it is.
 *
 * A `reply` of the form
 *	@think {"thinking":"...","then":"text"}
 * plays a reasoning model: the thinking arrives as one reasoning block
 * (the thought callback) before "then" streams as usual.
 *
 * With `stamp yes` each chunk's text is replaced by the wall-clock time
 * in microseconds and a space: bench/parley-load subtracts it from its
 * own receive time.  The reply still decides how many chunks there are.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <event2/event.h>

#include "parley/config.h"
#include "parley/util.h"
#include "llm.h"

#define SCRIPT_TOOL_PREFIX	"@tool "
#define SCRIPT_THINK_PREFIX	"@think "
#define SCRIPT_MAX_CALLS	LLM_MAX_TOOLS
#define SCRIPT_MAX_REPLY	(4 * 1024 * 1024)	/* then + results */
#define SCRIPT_BURST		64	/* chunks due at once, per tick */

struct script_tool {
	char	id[32];
	char	*name;
	char	*args;
};

/*
 * llm.h's struct llm_call is opaque and llm_http.c defines it; the script
 * call is its own struct that starts, like every call, with its ops.
 */
struct script_call {
	const struct llm_ops	*ops;
	struct event		*tick;
	const char		*reply;		/* the config's, or owned */
	char			*owned;		/* reply when composed here */
	char			*thinking;	/* a reasoning block, said first */
	size_t			 len;
	size_t			 off;
	unsigned		 chunk;
	unsigned		 delay_ms;
	uint64_t		 due_us;	/* next chunk, monotonic */
	int			 stamp;
	uint64_t		 input_tokens;
	struct script_tool	 calls[SCRIPT_MAX_CALLS];
	size_t			 ncalls;	/* > 0: report calls, no text */
	int			 in_cb;		/* inside a callback */
	int			 cancelled;	/* llm_cancel ran during it */
	struct llm_cbs		 cbs;
	void			*arg;
};

/* A rough token count, as a provider would report: one per 4 bytes. */
static uint64_t
approx_tokens(size_t bytes)
{
	return (bytes + 3) / 4;
}

static void
script_free(struct script_call *c)
{
	size_t i;

	for (i = 0; i < c->ncalls; i++) {
		free(c->calls[i].name);
		free(c->calls[i].args);
	}
	if (c->tick != NULL)
		event_free(c->tick);
	free(c->owned);
	free(c->thinking);
	free(c);
}

/* Frees c, then runs done: the call is gone when done runs. */
static void
script_finish(struct script_call *c, const struct llm_usage *u,
    const char *stop)
{
	struct llm_cbs cbs = c->cbs;
	void *a = c->arg;

	script_free(c);
	cbs.done(a, u, stop);
}

/*
 * Sends the current time as the chunk.  Taken here, as late as possible,
 * so the measured latency is the daemon's alone.
 */
static void
script_stamp(struct script_call *c)
{
	struct timespec	ts;
	char		buf[32];
	int		n;

	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(buf, sizeof(buf), "%" PRIu64 " ",
	    (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
	c->cbs.token(c->arg, buf, (size_t)n);
}

/*
 * When the next chunk is due: one every delay from the first, like a
 * provider streaming at its own pace.  Timed from each tick instead, a
 * loaded worker's late ticks slowed the reply down and with it the load
 * it was measured under; a late reply now catches up.
 */
static void
script_next(struct script_call *c, struct timeval *tv)
{
	uint64_t	now = util_mono_us(), wait;

	c->due_us += (uint64_t)c->delay_ms * 1000;
	wait = c->due_us > now ? c->due_us - now : 0;
	util_tv_us(tv, wait);
}

static void
script_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct script_call *c = arg;
	struct llm_usage u;
	struct timeval tv;
	size_t end = c->off, i, out = 0;
	unsigned n, burst;

	(void)fd;
	(void)ev;
	memset(&u, 0, sizeof(u));
	u.input_tokens = c->input_tokens;
	if (c->ncalls > 0) {
		for (i = 0; i < c->ncalls; i++) {
			out += strlen(c->calls[i].name) +
			    strlen(c->calls[i].args);
			if (c->cbs.tool_call == NULL)
				continue;
			c->in_cb = 1;
			c->cbs.tool_call(c->arg, c->calls[i].id,
			    c->calls[i].name, c->calls[i].args);
			c->in_cb = 0;
			if (c->cancelled) {
				script_free(c);
				return;
			}
		}
		u.output_tokens = approx_tokens(out);
		script_finish(c, &u, "tool_calls");
		return;
	}
	if (c->thinking != NULL) {
		char *th = c->thinking;

		c->thinking = NULL;
		c->in_cb = 1;
		if (c->cbs.thought != NULL && *th != '\0')
			c->cbs.thought(c->arg, th, strlen(th));
		c->in_cb = 0;
		free(th);
		if (c->cancelled) {
			script_free(c);
			return;
		}
	}
	/* Every chunk already due goes now, up to SCRIPT_BURST: a provider
	 * read after a long pass finds all it streamed meanwhile. */
	for (burst = 0; burst < SCRIPT_BURST; burst++) {
		/* chunk counts characters: never split a UTF-8 sequence. */
		for (n = 0; n < c->chunk && end < c->len; n++) {
			end++;
			while (end < c->len &&
			    ((unsigned char)c->reply[end] & 0xc0) == 0x80)
				end++;
		}
		if (end > c->off) {
			size_t from = c->off;

			c->off = end;
			c->in_cb = 1;
			if (c->stamp)
				script_stamp(c);
			else
				c->cbs.token(c->arg, c->reply + from,
				    end - from);
			c->in_cb = 0;
			if (c->cancelled) {
				script_free(c);
				return;
			}
		}
		if (c->off >= c->len)
			break;
		script_next(c, &tv);
		if (tv.tv_sec != 0 || tv.tv_usec != 0) {
			evtimer_add(c->tick, &tv);
			return;
		}
	}
	if (c->off < c->len) {
		evtimer_add(c->tick, &tv);	/* due: the next pass */
		return;
	}
	u.output_tokens = approx_tokens(c->len);
	script_finish(c, &u, "stop");
}

/* Where the current round starts: just past the last "user" message. */
static size_t
round_start(const struct llm_msg *msgs, size_t n)
{
	size_t i;

	for (i = n; i > 0; i--)
		if (strcmp(msgs[i - 1].role, "user") == 0)
			return i;
	return 0;
}

/* Appends s to the reply being composed, bounded; 0 when it is full. */
static int
compose(char **buf, size_t *len, const char *s)
{
	size_t	 n = strlen(s);
	char	*p;

	if (n > SCRIPT_MAX_REPLY - *len)
		return 0;
	if ((p = realloc(*buf, *len + n + 1)) == NULL)
		return 0;
	memcpy(p + *len, s, n + 1);
	*buf = p;
	*len += n;
	return 1;
}

/*
 * Sets c up for an "@tool" reply (see the top of the file) in spec;
 * returns 0 when spec is not such an object (the reply then streams as
 * it is), -1 when out of memory.
 */
static int
script_tool_setup(struct script_call *c, const char *spec,
    const struct llm_msg *msgs, size_t n)
{
	cJSON		*o, *calls, *x;
	const char	*then, *name;
	size_t		 i, from, len = 0, nres = 0;
	int		 r = 1;

	if ((o = cJSON_Parse(spec)) == NULL)
		return 0;
	calls = cJSON_GetObjectItemCaseSensitive(o, "calls");
	then = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o,
	    "then"));
	if (!cJSON_IsObject(o) || !cJSON_IsArray(calls)) {
		cJSON_Delete(o);
		return 0;
	}
	from = round_start(msgs, n);
	for (i = from; i < n; i++)
		if (strcmp(msgs[i].role, "tool") == 0)
			nres++;
	if (nres == 0) {
		cJSON_ArrayForEach(x, calls) {
			struct script_tool *t;

			if (c->ncalls == SCRIPT_MAX_CALLS)
				break;
			name = cJSON_GetStringValue(
			    cJSON_GetObjectItemCaseSensitive(x, "name"));
			t = &c->calls[c->ncalls];
			snprintf(t->id, sizeof(t->id), "call_%zu",
			    c->ncalls + 1);
			t->name = strdup(name ? name : "");
			t->args = cJSON_PrintUnformatted(
			    cJSON_GetObjectItemCaseSensitive(x, "arguments"));
			if (t->args == NULL)
				t->args = strdup("{}");
			c->ncalls++;
			if (t->name == NULL || t->args == NULL) {
				r = -1;
				break;
			}
		}
		/* A script with no calls in it just says "then". */
		if (r == 1 && c->ncalls > 0) {
			cJSON_Delete(o);
			return 1;
		}
		nres = 0;
	}
	if (r == 1 && !compose(&c->owned, &len, then ? then : ""))
		r = -1;
	for (i = from; r == 1 && i < n; i++) {
		if (strcmp(msgs[i].role, "tool") != 0)
			continue;
		if ((len > 0 && !compose(&c->owned, &len, " | ")) ||
		    !compose(&c->owned, &len, msgs[i].content ?
		    msgs[i].content : ""))
			r = -1;
	}
	cJSON_Delete(o);
	if (r == 1) {
		c->reply = c->owned;
		c->len = len;
	}
	return r;
}

/*
 * Sets c up for an "@think" reply in spec; 0 when spec is not such an
 * object (the reply streams as it is), -1 when out of memory.
 */
static int
script_think_setup(struct script_call *c, const char *spec)
{
	cJSON		*o;
	const char	*th, *then;

	if ((o = cJSON_Parse(spec)) == NULL)
		return 0;
	th = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o,
	    "thinking"));
	then = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o,
	    "then"));
	if (th == NULL) {
		cJSON_Delete(o);
		return 0;
	}
	if ((c->thinking = strdup(th)) == NULL || (c->owned =
	    strdup(then ? then : "")) == NULL) {
		cJSON_Delete(o);
		return -1;
	}
	c->reply = c->owned;
	c->len = strlen(c->owned);
	cJSON_Delete(o);
	return 1;
}

static struct llm_call *
script_start(struct llm_ctx *ctx, const struct cfg_provider *p,
    const struct llm_msg *msgs, size_t n, const struct llm_tool_def *tools,
    size_t ntools, const struct llm_cbs *cbs, void *arg)
{
	struct script_call *c;
	struct timeval tv;
	size_t i, j, in = 0;

	(void)tools;
	(void)ntools;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->ops = &llm_script_ops;
	c->reply = p->reply ? p->reply : "";
	c->len = strlen(c->reply);
	c->chunk = p->chunk ? p->chunk : 1;
	c->delay_ms = p->delay_ms;
	c->stamp = p->stamp;
	c->cbs = *cbs;
	c->arg = arg;
	for (i = 0; i < n; i++) {
		in += msgs[i].content ? strlen(msgs[i].content) : 0;
		for (j = 0; j < msgs[i].ncalls && msgs[i].calls != NULL; j++)
			in += msgs[i].calls[j].args_json ?
			    strlen(msgs[i].calls[j].args_json) : 0;
	}
	c->input_tokens = approx_tokens(in);
	if (strncmp(c->reply, SCRIPT_TOOL_PREFIX,
	    strlen(SCRIPT_TOOL_PREFIX)) == 0 &&
	    script_tool_setup(c, c->reply + strlen(SCRIPT_TOOL_PREFIX), msgs,
	    n) == -1) {
		script_free(c);
		return NULL;
	}
	if (strncmp(c->reply, SCRIPT_THINK_PREFIX,
	    strlen(SCRIPT_THINK_PREFIX)) == 0 && script_think_setup(c,
	    c->reply + strlen(SCRIPT_THINK_PREFIX)) == -1) {
		script_free(c);
		return NULL;
	}
	if ((c->tick = evtimer_new(ctx->base, script_tick, c)) == NULL) {
		script_free(c);
		return NULL;
	}
	/* The first chunk, like a provider's first byte, comes after a delay. */
	c->due_us = util_mono_us();
	script_next(c, &tv);
	evtimer_add(c->tick, &tv);
	return (struct llm_call *)(void *)c;
}

static void
script_cancel(struct llm_call *lc)
{
	struct script_call *c = (struct script_call *)(void *)lc;

	/* From inside a callback, the tick frees it once the callback is
	 * back; the event is stopped already. */
	if (c->in_cb)
		c->cancelled = 1;
	else
		script_free(c);
}

const struct llm_ops llm_script_ops = {
	"script", script_start, script_cancel
};
