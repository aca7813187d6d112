/*
 * Text for the knowledge base and the directory index: the tokens BM25
 * counts, chunks cut on line boundaries, and the checks an indexer makes
 * on a file's bytes.  Pure functions; no allocation except kbt_chunks().
 */
#ifndef PARLEY_KBTEXT_H
#define PARLEY_KBTEXT_H

#include <stddef.h>

#define KBT_TOKEN_MAX	64	/* bytes; a longer token is cut to this */
#define KBT_CHUNK_BYTES	1536	/* a chunk's default bound */
#define KBT_SNIFF	8192	/* bytes kbt_is_text() looks at */

/*
 * Calls fn for each token of text, in order, lower-cased (ASCII only;
 * bytes >= 0x80 are word bytes, kept as they are).  A word is a run of
 * [A-Za-z0-9_] and bytes >= 0x80; its leading/trailing '_' are dropped.
 * A compound word (one of several parts: split at '_', after a lower-case
 * letter or a digit followed by a capital, and before the capital that
 * starts a word after an acronym; e.g. snake_case, camelCase, utf8Valid,
 * HTTPServer) is given whole and then as its parts ("HTTPServer":
 * "httpserver", "http", "server").  Other characters ('/', '.', '-',
 * blanks) separate words, so a path gives its parts.  Tokens of one byte
 * are dropped unless a digit; a token longer than KBT_TOKEN_MAX bytes is
 * cut to its first KBT_TOKEN_MAX bytes.  fn may be NULL (count only).
 * Returns the tokens given.
 */
typedef void	(*kbt_token_fn)(void *arg, const char *tok, size_t len);
size_t		 kbt_tokens(const char *text, size_t len, kbt_token_fn fn,
		    void *arg);

/*
 * A chunk: bytes [off, off+len) of the text, lines line_first..line_last
 * (1-based).  Chunks cover the text in order, every byte once, and are cut
 * only after a '\n' (or inside a line longer than max_bytes, at a UTF-8
 * character boundary).  A chunk is at most max_bytes long; within that it
 * ends, by preference, before a line that starts a definition (a line at
 * column 0 beginning "def ", "class ", "func ", "fn ", "pub ", "function ",
 * "static ", "struct ", "impl ", "export ", "#" or a C function's name
 * followed by "("), else after a blank line, else at the last line that
 * fits; text that fits max_bytes is one chunk.  max_bytes 0 means
 * KBT_CHUNK_BYTES.  *out is a malloc'd array the caller frees (NULL for
 * an empty text).  Returns the number
 * of chunks (0 for an empty text), or (size_t)-1 with errno ENOMEM.
 */
struct kbt_chunk {
	size_t		 off, len;
	unsigned	 line_first, line_last;
};
size_t		 kbt_chunks(const char *text, size_t len, size_t max_bytes,
		    struct kbt_chunk **out);

/* 1 when the first KBT_SNIFF bytes hold no NUL and are valid UTF-8 (a
 * character cut by the end of the sniffed bytes is allowed when len >=
 * KBT_SNIFF, so a caller may pass just its first read; a shorter buf is
 * the whole text and must end on a whole character). */
int		 kbt_is_text(const char *buf, size_t len);

/* SHA-256 of buf as 64 lower-case hex digits and a NUL. */
void		 kbt_sha256(const void *buf, size_t len, char hex[65]);

#endif
