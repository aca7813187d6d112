/*
 * What the libFuzzer harnesses share: cutting an input into the fragments
 * a socket would deliver, so every parser is also fed its bytes split at
 * every place a read may end.
 *
 * The input's first byte, mod 16, is how many bytes after it describe the
 * cut; the rest is the payload.  Each describing byte, used in turn, gives
 * one fragment of (b & 0x7f) + 1 bytes and, in its high bit, a flag a
 * harness may use (the IPC harness: a descriptor came with this read).
 * A first byte of 0 sends the payload whole, so seeds are "\0" + the bytes.
 * A parser must read the payload the same way whole and cut: the stream
 * harnesses digest what it produced both ways and compare.
 * Every fragment is copied into a heap block of its exact size, so a
 * parser that reads past what it was given is caught by ASan.
 */
#ifndef PARLEY_FUZZ_H
#define PARLEY_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/log.h"

struct fuzz_cut {
	const uint8_t	*desc;		/* the describing bytes */
	size_t		 ndesc;
	size_t		 next;		/* index into desc */
	const uint8_t	*p;		/* payload not yet handed out */
	size_t		 left;
	uint8_t		*frag;		/* the fragment handed out last */
	int		 flag;		/* its describing byte's high bit */
};

static inline void
fuzz_cut_init(struct fuzz_cut *c, const uint8_t *data, size_t size)
{
	size_t n = size > 0 ? data[0] % 16 : 0;

	memset(c, 0, sizeof(*c));
	if (size == 0)
		return;
	if (n > size - 1)
		n = size - 1;
	c->desc = data + 1;
	c->ndesc = n;
	c->p = data + 1 + n;
	c->left = size - 1 - n;
}

/* Hands out the next fragment (heap copy, valid until the next call);
 * returns its length, 0 once the payload is used up. */
static inline size_t
fuzz_cut_next(struct fuzz_cut *c, const uint8_t **frag)
{
	size_t n = c->left;

	free(c->frag);
	c->frag = NULL;
	c->flag = 0;
	if (c->left == 0)
		return 0;
	if (c->ndesc > 0) {
		uint8_t b = c->desc[c->next++ % c->ndesc];

		n = (size_t)(b & 0x7f) + 1;
		if (n > c->left)
			n = c->left;
		c->flag = (b & 0x80) != 0;
	}
	if ((c->frag = malloc(n)) == NULL)
		abort();
	memcpy(c->frag, c->p, n);
	c->p += n;
	c->left -= n;
	*frag = c->frag;
	return n;
}

/* The same payload as one fragment, to compare with the cut. */
static inline void
fuzz_cut_whole(struct fuzz_cut *c, const struct fuzz_cut *from)
{
	memset(c, 0, sizeof(*c));
	c->p = from->p;
	c->left = from->left;
}

/* Adds bytes to a running FNV-1a digest of what a parser produced. */
static inline void
fuzz_sum(uint64_t *h, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n-- > 0)
		*h = (*h ^ *b++) * 1099511628211ULL;
}

static inline void
fuzz_cut_done(struct fuzz_cut *c)
{
	free(c->frag);
	c->frag = NULL;
}

/* The parsers log what they refuse; at full speed that is only noise. */
static inline void
fuzz_quiet(void)
{
	static int done;

	if (!done) {
		log_init("fuzz", 1, LOG_LEVEL_ERROR);
		done = 1;
	}
}

/* A property the parser promises; abort() makes libFuzzer keep the input. */
#define FUZZ_CHECK(e)	do { if (!(e)) { \
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #e); \
	abort(); } } while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/*
 * The stream harnesses' entry: run reads the input cut as a socket would
 * deliver it, then whole; where the reads end must not change the digest
 * of what it read.
 */
#define FUZZ_CUT_TWICE(data, size, run) do {				\
	struct fuzz_cut	 cut_, whole_;					\
	uint64_t	 a_, b_;					\
									\
	fuzz_quiet();							\
	fuzz_cut_init(&cut_, (data), (size));				\
	fuzz_cut_whole(&whole_, &cut_);					\
	a_ = run(&cut_);						\
	b_ = run(&whole_);						\
	FUZZ_CHECK(a_ == b_);						\
} while (0)

#endif
