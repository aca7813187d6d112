/*
 * The JSON envelope every client message comes in (src/proto.c), as the
 * WebSocket and HTTP paths hand it over: a length-delimited text, not
 * NUL-terminated.  A parsed envelope is read the way the worker reads
 * one.  UTF-8 validation (src/utf8.c), which guards the same bytes, is
 * checked against itself: whole, and fed in the fragments of the cut.
 */
#include <stdio.h>

#include "parley/proto.h"
#include "parley/utf8.h"
#include "fuzz.h"

#define MAX_DEPTH	16

static void
look(const struct proto_in *in)
{
	const char	*s;
	uint64_t	 u;
	char		 msg[256];

	FUZZ_CHECK(in->root != NULL && in->type != NULL &&
	    in->session != NULL);
	FUZZ_CHECK(strlen(in->type) <= 64 && strlen(in->session) <= 128);
	FUZZ_CHECK(in->id == NULL || strlen(in->id) <= PROTO_ID_MAX);
	/* An absent optional field leaves s alone, as proto.h says. */
	s = NULL;
	if (proto_str(in->root, "text", 0, 65536, &s, msg, sizeof(msg)) == 0 &&
	    s != NULL)
		FUZZ_CHECK(strlen(s) <= 65536);
	s = NULL;
	(void)proto_str(in->root, "clientId", 0, 128, &s, msg, sizeof(msg));
	(void)proto_u64(in->root, "since", 0, &u, msg, sizeof(msg));
	(void)proto_u64(in->root, "seq", 0, &u, msg, sizeof(msg));
	FUZZ_CHECK(proto_count(in->root, "tokens") >= 0);
	(void)proto_holds(cJSON_GetObjectItem(in->root, "tools"), "x");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_in		 in;
	struct utf8_state	 u;
	struct fuzz_cut		 cut;
	const uint8_t		*frag;
	const char		*code;
	char			 msg[256], *text;
	size_t			 n, whole;
	int			 ok = 0;

	fuzz_quiet();
	/* The envelope sees the bytes exactly as they came, no cut byte. */
	if ((text = malloc(size ? size : 1)) == NULL)
		abort();
	memcpy(text, data, size);
	if (proto_parse(text, size, MAX_DEPTH, &in, &code, msg,
	    sizeof(msg)) == 0) {
		look(&in);
		proto_in_free(&in);
	} else {
		FUZZ_CHECK(in.root == NULL);
		FUZZ_CHECK(code != NULL && msg[0] != '\0');
	}

	/* Whole or in fragments, UTF-8 validation gives one answer. */
	fuzz_cut_init(&cut, data, size);
	utf8_init(&u);
	while ((n = fuzz_cut_next(&cut, &frag)) > 0)
		ok = utf8_feed(&u, frag, n);
	fuzz_cut_done(&cut);
	if (size > 0) {
		n = size - 1 - (data[0] % 16 < size - 1 ? data[0] % 16 :
		    size - 1);
		frag = data + size - n;
		FUZZ_CHECK((ok == 0 && utf8_complete(&u)) ==
		    utf8_valid(frag, n));
		whole = utf8_whole((const char *)frag, n);
		FUZZ_CHECK(whole <= n);
		FUZZ_CHECK(n - whole < 4);
		if (utf8_valid(frag, n))
			FUZZ_CHECK(whole == n);
	}
	free(text);
	return 0;
}
