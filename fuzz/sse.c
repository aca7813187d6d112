/*
 * The SSE reader (src/sse.c: provider streams, MCP event streams) fed as
 * the network delivers it.  Checks that an event's type is a string, its
 * data fits the bound and is NUL-terminated, the last id is a bounded
 * string, a stop (the callback's or the bound's) sticks, and the events
 * are the same whether the bytes come cut or whole.
 */
#include <stdio.h>

#include "parley/sse.h"
#include "fuzz.h"

#define MAX	2048

struct seen {
	int		 events;
	uint64_t	 sum;
};

static int
on_event(void *arg, const char *type, const char *data, size_t len)
{
	struct seen *s = arg;

	FUZZ_CHECK(type != NULL && data != NULL);
	FUZZ_CHECK(len <= MAX);
	FUZZ_CHECK(strlen(type) <= MAX);
	FUZZ_CHECK(data[len] == '\0');
	s->events++;
	fuzz_sum(&s->sum, type, strlen(type) + 1);
	fuzz_sum(&s->sum, &len, sizeof(len));
	fuzz_sum(&s->sum, data, len);
	/* What the MCP client does when its response is in. */
	return strcmp(type, "stop") == 0 ? 7 : 0;
}

/* Feeds what cut hands out; a digest of the events, last id and verdict. */
static uint64_t
run(struct fuzz_cut *cut)
{
	struct sse_parser	*p;
	struct seen		 seen;
	const uint8_t		*frag;
	const char		*id;
	size_t			 n;
	int			 r = 0, before;

	memset(&seen, 0, sizeof(seen));
	seen.sum = 14695981039346656037ULL;
	if ((p = sse_parser_new(MAX, on_event, &seen)) == NULL)
		abort();
	while ((n = fuzz_cut_next(cut, &frag)) > 0) {
		r = sse_parser_feed(p, frag, n);
		FUZZ_CHECK(r == 0 || r == 7 || r == -1);
		if (r != 0) {
			before = seen.events;
			FUZZ_CHECK(sse_parser_feed(p, "data: x\n\n", 9) == r);
			FUZZ_CHECK(seen.events == before);
			break;
		}
	}
	id = sse_parser_last_id(p);
	FUZZ_CHECK(strlen(id) <= MAX);
	fuzz_sum(&seen.sum, id, strlen(id) + 1);
	fuzz_sum(&seen.sum, &r, sizeof(r));
	fuzz_cut_done(cut);
	sse_parser_free(p);
	return seen.sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FUZZ_CUT_TWICE(data, size, run);
	return 0;
}
