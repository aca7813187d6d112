/*
 * UTF-8 validation (RFC 3629): rejects overlong forms, surrogates
 * (U+D800..U+DFFF) and code points above U+10FFFF.
 */
#ifndef PARLEY_UTF8_H
#define PARLEY_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Incremental validator for text that arrives in pieces (WebSocket
 * fragments), so an invalid sequence is reported on the piece that
 * carries it rather than at the end of the message.
 */
struct utf8_state {
	uint32_t	state;	/* opaque: pending bytes and allowed range */
};

/* 1 if buf[0..len) is valid UTF-8, else 0. */
int	utf8_valid(const unsigned char *buf, size_t len);

void	utf8_init(struct utf8_state *);
/* 0 if everything fed so far can start valid UTF-8, -1 if invalid (sticky). */
int	utf8_feed(struct utf8_state *, const unsigned char *buf, size_t len);
/* 1 if not in the middle of a sequence (and not failed), else 0. */
int	utf8_complete(const struct utf8_state *);
/* Bytes of buf[0..len) that end on a whole UTF-8 sequence (for a cut). */
size_t	utf8_whole(const char *buf, size_t len);

#endif
