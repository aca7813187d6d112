/*
 * UTF-8 validation as a small state machine.  The state packs how many
 * continuation bytes are still expected (bits 0-1) and which range the
 * next continuation byte must fall in (bits 2-4): the lead bytes E0, ED,
 * F0 and F4 narrow the first continuation byte to exclude overlongs,
 * surrogates and values above U+10FFFF.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "parley/utf8.h"

#define UTF8_FAILED	0xffffffffU

enum {
	RANGE_80_BF,	/* any continuation byte */
	RANGE_A0_BF,	/* after E0: no overlong 3-byte forms */
	RANGE_80_9F,	/* after ED: no surrogates */
	RANGE_90_BF,	/* after F0: no overlong 4-byte forms */
	RANGE_80_8F	/* after F4: nothing above U+10FFFF */
};

static const unsigned char range_lo[] = { 0x80, 0xa0, 0x80, 0x90, 0x80 };
static const unsigned char range_hi[] = { 0xbf, 0xbf, 0x9f, 0xbf, 0x8f };

#define MKSTATE(need, range)	((uint32_t)(need) | ((uint32_t)(range) << 2))
#define NEED(s)			((s) & 3U)
#define RANGE(s)		(((s) >> 2) & 7U)

void
utf8_init(struct utf8_state *st)
{
	st->state = 0;
}

/* Returns the state after lead byte c, or UTF8_FAILED. */
static uint32_t
utf8_lead(unsigned char c)
{
	if (c < 0x80)
		return 0;
	if (c < 0xc2)		/* stray continuation or overlong C0/C1 */
		return UTF8_FAILED;
	if (c < 0xe0)
		return MKSTATE(1, RANGE_80_BF);
	if (c == 0xe0)
		return MKSTATE(2, RANGE_A0_BF);
	if (c == 0xed)
		return MKSTATE(2, RANGE_80_9F);
	if (c < 0xf0)
		return MKSTATE(2, RANGE_80_BF);
	if (c == 0xf0)
		return MKSTATE(3, RANGE_90_BF);
	if (c < 0xf4)
		return MKSTATE(3, RANGE_80_BF);
	if (c == 0xf4)
		return MKSTATE(3, RANGE_80_8F);
	return UTF8_FAILED;
}

int
utf8_feed(struct utf8_state *st, const unsigned char *buf, size_t len)
{
	uint32_t	s = st->state;
	size_t		i;

	if (s == UTF8_FAILED)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char	c;
		uint64_t	w;

		if (s == 0) {
			/* Runs of ASCII, the bulk of JSON, a word at a time. */
			while (len - i >= 8) {
				memcpy(&w, buf + i, 8);
				if (w & 0x8080808080808080ULL)
					break;
				i += 8;
			}
			if (i == len)
				break;
			c = buf[i];
			if (c < 0x80)
				continue;
			s = utf8_lead(c);
			if (s == UTF8_FAILED)
				break;
			continue;
		}
		c = buf[i];
		if (c < range_lo[RANGE(s)] || c > range_hi[RANGE(s)]) {
			s = UTF8_FAILED;
			break;
		}
		/* only the first continuation byte is narrowed */
		s = MKSTATE(NEED(s) - 1, RANGE_80_BF);
	}
	st->state = s;
	return s == UTF8_FAILED ? -1 : 0;
}

int
utf8_complete(const struct utf8_state *st)
{
	return st->state == 0;
}

int
utf8_valid(const unsigned char *buf, size_t len)
{
	struct utf8_state	st;

	utf8_init(&st);
	if (utf8_feed(&st, buf, len) == -1)
		return 0;
	return utf8_complete(&st);
}

/* Bytes of buf that end on a whole UTF-8 sequence. */
size_t
utf8_whole(const char *buf, size_t len)
{
	size_t i = len, need;
	unsigned char b;

	while (i > 0 && len - i < 4) {
		b = (unsigned char)buf[i - 1];
		if ((b & 0xc0) != 0x80) {
			need = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
			return (len - (i - 1) >= need) ? len : i - 1;
		}
		i--;
	}
	return len;
}
