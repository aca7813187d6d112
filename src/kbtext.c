/*
 * Text for the knowledge base (see parley/kbtext.h): the tokeniser BM25
 * counts with, the line-based chunker, the text sniff and SHA-256.
 * Everything here works on bytes: ASCII is classified, bytes >= 0x80
 * are word bytes whatever character they belong to, so no locale and no
 * Unicode table is involved and every process tokenises alike.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "parley/kbtext.h"
#include "parley/utf8.h"

static int
kbt_word(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

static int
kbt_upper(unsigned char c)
{
	return c >= 'A' && c <= 'Z';
}

static int
kbt_lower(unsigned char c)
{
	return c >= 'a' && c <= 'z';
}

static int
kbt_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/*
 * 1 when a part ends before w[i] (0 < i < n; w[i] is not '_'): a lower
 * case letter or a digit followed by an upper case letter ("camelCase",
 * "utf8Valid"), or the last capital of an acronym followed by a
 * capitalised word ("HTTPServer": before the 'S').
 */
static int
kbt_split(const unsigned char *w, size_t i, size_t n)
{
	if (!kbt_upper(w[i]) || w[i - 1] == '_')
		return 0;
	if (kbt_lower(w[i - 1]) || kbt_digit(w[i - 1]))
		return 1;
	return kbt_upper(w[i - 1]) && i + 1 < n && kbt_lower(w[i + 1]);
}

/* Gives one token (lower-cased, cut to KBT_TOKEN_MAX): 1, or 0 when
 * dropped (one byte, not a digit). */
static size_t
kbt_emit(const unsigned char *w, size_t n, kbt_token_fn fn, void *arg)
{
	char	buf[KBT_TOKEN_MAX];
	size_t	i;

	if (n == 0 || (n == 1 && !kbt_digit(w[0])))
		return 0;
	if (n > KBT_TOKEN_MAX)
		n = KBT_TOKEN_MAX;
	for (i = 0; i < n; i++)
		buf[i] = kbt_upper(w[i]) ? (char)(w[i] - 'A' + 'a') :
		    (char)w[i];
	if (fn != NULL)
		fn(arg, buf, n);
	return 1;
}

/*
 * Gives one word's parts (split at '_' and case changes), or counts them
 * without giving them when fn is NULL and give is 0.  Returns the parts
 * found (give 0) or the tokens given.
 */
static size_t
kbt_parts(const unsigned char *w, size_t n, int give, kbt_token_fn fn,
    void *arg)
{
	size_t	i, start, count = 0;

	start = 0;
	for (i = 0; i <= n; i++) {
		if (i < n && w[i] != '_' && (i == start ||
		    !kbt_split(w, i, n)))
			continue;
		if (i > start) {
			if (give)
				count += kbt_emit(w + start, i - start, fn,
				    arg);
			else if (++count > 1)
				return count;
		}
		start = (i < n && w[i] == '_') ? i + 1 : i;
	}
	return count;
}

size_t
kbt_tokens(const char *text, size_t len, kbt_token_fn fn, void *arg)
{
	const unsigned char	*t = (const unsigned char *)text;
	size_t			 i, s, e, count = 0;

	i = 0;
	while (i < len) {
		if (!kbt_word(t[i])) {
			i++;
			continue;
		}
		s = i;
		while (i < len && kbt_word(t[i]))
			i++;
		e = i;
		while (s < e && t[s] == '_')
			s++;
		while (e > s && t[e - 1] == '_')
			e--;
		if (s == e)
			continue;
		if (kbt_parts(t + s, e - s, 0, NULL, NULL) > 1) {
			count += kbt_emit(t + s, e - s, fn, arg);
			count += kbt_parts(t + s, e - s, 1, fn, arg);
		} else
			count += kbt_emit(t + s, e - s, fn, arg);
	}
	return count;
}

/* 1 when the line at l (up to end) opens a definition (kbtext.h). */
static int
kbt_defline(const char *l, size_t n)
{
	static const char *const kw[] = { "def ", "class ", "func ", "fn ",
	    "pub ", "function ", "static ", "struct ", "impl ", "export " };
	size_t	i, k;

	if (n == 0)
		return 0;
	if (l[0] == '#')
		return 1;
	for (k = 0; k < sizeof(kw) / sizeof(kw[0]); k++) {
		size_t kl = strlen(kw[k]);

		if (n >= kl && memcmp(l, kw[k], kl) == 0)
			return 1;
	}
	/* a C function's name at column 0, then "(" */
	if (!((l[0] >= 'a' && l[0] <= 'z') || (l[0] >= 'A' && l[0] <= 'Z') ||
	    l[0] == '_'))
		return 0;
	for (i = 1; i < n && kbt_word((unsigned char)l[i]) &&
	    (unsigned char)l[i] < 0x80; i++)
		;
	return i < n && l[i] == '(';
}

/* 1 when bytes [s, e) hold only blanks (a line without its '\n'). */
static int
kbt_blank(const char *s, const char *e)
{
	for (; s < e; s++)
		if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\f' &&
		    *s != '\v')
			return 0;
	return 1;
}

/*
 * The length of the chunk starting at s (s < len): the rest when it
 * fits, else cut before the last definition line in the window, else
 * after its last blank line, else after its last line, else (one line
 * longer than max) at max, backed to a UTF-8 character boundary.
 */
static size_t
kbt_cut(const char *text, size_t len, size_t s, size_t max)
{
	const char	*nl, *ls;
	size_t		 win, p, def = 0, blank = 0, line = 0, c;

	if (len - s <= max)
		return len - s;
	win = s + max;
	ls = text + s;
	while ((nl = memchr(ls, '\n', (size_t)(text + win - ls))) != NULL) {
		p = (size_t)(nl - text) + 1;	/* a cut point, <= win */
		line = p;
		if (kbt_blank(ls, nl))
			blank = p;
		if (kbt_defline(text + p, len - p))
			def = p;
		ls = text + p;
		if (p == win)
			break;
	}
	if (def > s)
		return def - s;
	if (blank > s)
		return blank - s;
	if (line > s)
		return line - s;
	/* no whole line fits: do not cut a character (continuation bytes
	 * are 10xxxxxx), unless the bound is smaller than one */
	c = win;
	while (c > s && win - c < 3 &&
	    ((unsigned char)text[c] & 0xc0) == 0x80)
		c--;
	return c > s ? c - s : max;
}

size_t
kbt_chunks(const char *text, size_t len, size_t max_bytes,
    struct kbt_chunk **out)
{
	struct kbt_chunk	*v = NULL, *nv;
	size_t			 n = 0, cap = 0, s, cl, i;
	unsigned		 line = 1;

	*out = NULL;
	if (max_bytes == 0)
		max_bytes = KBT_CHUNK_BYTES;
	for (s = 0; s < len; s += cl) {
		cl = kbt_cut(text, len, s, max_bytes);
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			if ((nv = reallocarray(v, cap, sizeof(*v))) == NULL) {
				free(v);
				errno = ENOMEM;
				return (size_t)-1;
			}
			v = nv;
		}
		v[n].off = s;
		v[n].len = cl;
		v[n].line_first = line;
		/* the last byte's line; a closing '\n' belongs to it */
		for (i = s; i < s + cl - 1; i++)
			if (text[i] == '\n')
				line++;
		v[n].line_last = line;
		if (text[s + cl - 1] == '\n')
			line++;
		n++;
	}
	*out = v;
	return n;
}

int
kbt_is_text(const char *buf, size_t len)
{
	struct utf8_state	st;
	size_t			n = len < KBT_SNIFF ? len : KBT_SNIFF;

	if (memchr(buf, '\0', n) != NULL)
		return 0;
	utf8_init(&st);
	if (utf8_feed(&st, (const unsigned char *)buf, n) == -1)
		return 0;
	/* a character the sniff's end cuts is allowed; one the text's end
	 * cuts is not */
	return utf8_complete(&st) || len >= KBT_SNIFF;
}

void
kbt_sha256(const void *buf, size_t len, char hex[65])
{
	static const char	 digits[] = "0123456789abcdef";
	unsigned char		 md[32];
	unsigned int		 mdlen = 0;
	size_t			 i;

	if (EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != sizeof(md))
		/* only when OpenSSL is broken */
		memset(md, 0, sizeof(md));
	for (i = 0; i < sizeof(md); i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
}
