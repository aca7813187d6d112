/*
 * The SSE reader (src/sse.c: provider streams, MCP event streams) fed as
 * the network delivers it.  Checks that an event's type is a string, its
 * data fits the bound and is NUL-terminated, the last id is a bounded
 * string, and a stop (the callback's or the bound's) sticks.
 */
#include <stdio.h>

#include "parley/sse.h"
#include "fuzz.h"

#define MAX	2048

static int
on_event(void *arg, const char *type, const char *data, size_t len)
{
	int *events = arg;

	FUZZ_CHECK(type != NULL && data != NULL);
	FUZZ_CHECK(len <= MAX);
	FUZZ_CHECK(strlen(type) <= MAX);
	FUZZ_CHECK(data[len] == '\0');
	(*events)++;
	/* What the MCP client does when its response is in. */
	return strcmp(type, "stop") == 0 ? 7 : 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sse_parser	*p;
	struct fuzz_cut		 cut;
	const uint8_t		*frag;
	size_t			 n;
	int			 r = 0, events = 0, before;

	fuzz_quiet();
	if ((p = sse_parser_new(MAX, on_event, &events)) == NULL)
		return 0;
	fuzz_cut_init(&cut, data, size);
	while ((n = fuzz_cut_next(&cut, &frag)) > 0) {
		r = sse_parser_feed(p, frag, n);
		FUZZ_CHECK(r == 0 || r == 7 || r == -1);
		if (r != 0) {
			before = events;
			FUZZ_CHECK(sse_parser_feed(p, "data: x\n\n", 9) == r);
			FUZZ_CHECK(events == before);
			break;
		}
	}
	FUZZ_CHECK(strlen(sse_parser_last_id(p)) <= MAX);
	fuzz_cut_done(&cut);
	sse_parser_free(p);
	return 0;
}
