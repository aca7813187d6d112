/*
 * The PROXY protocol header reader (src/proxyproto.c) as the supervisor
 * uses it: called again on the bytes read so far each time a read adds
 * some, so it sees every prefix the cut makes.  Checks what pp_parse
 * promises: it never reads past what it was given, PP_NEED_MORE only
 * below PP_V2_MAX, a header's length within the bytes, and once a
 * prefix decides (header, none, error) every longer one decides the
 * same.  The payload is also read as X-Forwarded-For values, as a
 * trusted proxy's header reaches pp_forwarded_for.
 */
#include <stdio.h>

#include "parley/proxyproto.h"
#include "fuzz.h"

static void
forwarded(const uint8_t *d, size_t n)
{
	static struct pp_cidr	 trusted[2];
	static int		 done;
	const char		*vals[4];
	char			*text, *p, out[PP_ADDR_MAX];
	unsigned		 nv = 0;

	if (!done) {
		FUZZ_CHECK(pp_cidr_parse("10.0.0.0/8", &trusted[0]) == 0);
		FUZZ_CHECK(pp_cidr_parse("2001:db8::/32", &trusted[1]) == 0);
		done = 1;
	}
	if ((text = malloc(n + 1)) == NULL)
		return;
	memcpy(text, d, n);
	text[n] = '\0';
	/* The header's lines, as the HTTP reader hands them over. */
	for (p = text; nv < 4 && p != NULL; nv++) {
		vals[nv] = p;
		if ((p = strchr(p, '\n')) != NULL)
			*p++ = '\0';
	}
	memset(out, 'x', sizeof(out));
	pp_forwarded_for(vals, nv, trusted, 2, "10.1.2.3", out);
	FUZZ_CHECK(memchr(out, '\0', sizeof(out)) != NULL);
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_cut		 cut;
	struct pp_header	 h, first;
	const uint8_t		*frag;
	unsigned char		*buf;
	enum pp_result		 r, decided = PP_NEED_MORE;
	size_t			 n, len = 0;

	fuzz_quiet();
	fuzz_cut_init(&cut, data, size);
	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memset(&first, 0, sizeof(first));
	while ((n = fuzz_cut_next(&cut, &frag)) > 0) {
		memcpy(buf + len, frag, n);
		len += n;
		r = pp_parse(buf, len, &h);
		if (r == PP_NEED_MORE) {
			FUZZ_CHECK(decided == PP_NEED_MORE);
			FUZZ_CHECK(len < PP_V2_MAX);
			FUZZ_CHECK(pp_looks_like(buf, len));
			continue;
		}
		if (decided == PP_NEED_MORE) {
			decided = r;
			first = h;
		}
		FUZZ_CHECK(r == decided);
		if (r == PP_DONE) {
			FUZZ_CHECK(h.len > 0 && h.len <= len);
			FUZZ_CHECK(h.len == first.len);
			FUZZ_CHECK(memchr(h.src, '\0', sizeof(h.src)) != NULL);
			FUZZ_CHECK(strcmp(h.src, first.src) == 0 &&
			    h.src_port == first.src_port &&
			    h.local == first.local);
		} else if (r == PP_ERROR)
			FUZZ_CHECK(h.error != NULL);
	}
	fuzz_cut_done(&cut);
	forwarded(buf, len);
	free(buf);
	return 0;
}
