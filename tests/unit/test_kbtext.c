/* Unit tests for kbtext: tokens, chunks, the text sniff, SHA-256. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kbtext.c"
#include "check_main.h"

struct toks {
	char	buf[4096];
	size_t	n;
};

/* Joins the tokens with single spaces. */
static void
tok_cb(void *arg, const char *t, size_t len)
{
	struct toks	*k = arg;
	size_t		 at = strlen(k->buf);

	ck_assert_uint_ge(len, 1);
	ck_assert_uint_le(len, KBT_TOKEN_MAX);
	ck_assert_uint_lt(at + len + 2, sizeof(k->buf));
	if (at > 0)
		k->buf[at++] = ' ';
	memcpy(k->buf + at, t, len);
	k->buf[at + len] = '\0';
	k->n++;
}

static const char *
toks(const char *s, size_t len, struct toks *k)
{
	size_t	n;

	memset(k, 0, sizeof(*k));
	n = kbt_tokens(s, len, tok_cb, k);
	ck_assert_uint_eq(n, k->n);
	return k->buf;
}

struct tokcase {
	const char	*in;
	const char	*want;
};

static const struct tokcase tokcases[] = {
	{ "hello world", "hello world" },
	{ "Hello WORLD", "hello world" },
	{ "snake_case_name", "snake_case_name snake case name" },
	{ "camelCase", "camelcase camel case" },
	{ "HTTPServer", "httpserver http server" },
	{ "getHTTPResponseCode", "gethttpresponsecode get http response code" },
	{ "utf8Valid", "utf8valid utf8 valid" },
	{ "__init__", "init" },
	{ "_private", "private" },
	{ "kb_", "kb" },
	{ "a_b", "a_b" },			/* its parts are one letter */
	{ "x_y_zz", "x_y_zz zz" },
	{ "foo__bar", "foo__bar foo bar" },
	{ "src/kb_text.c", "src kb_text kb text" },	/* "c" dropped */
	{ "/usr/local/bin", "usr local bin" },
	{ "a b c 1 2 x9", "1 2 x9" },		/* one-letter words dropped */
	{ "v1.2.3 2024-01-05", "v1 2 3 2024 01 05" },
	{ "sha256", "sha256" },
	{ "ALLCAPS", "allcaps" },
	{ "IOError", "ioerror io error" },
	{ "caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9 na\xc3\xafve" },
	{ "\xc3\x89t\xc3\xa9", "\xc3\x89t\xc3\xa9" },	/* no case fold */
	{ "\xe4\xb8\xad\xe6\x96\x87", "\xe4\xb8\xad\xe6\x96\x87" },
	{ "x-y.z", "" },
	{ "", "" },
	{ "  ... ---  ", "" },
	{ "___", "" },
	{ "if (a == b) { return foo_bar(x); }",
	    "if return foo_bar foo bar" },
};

START_TEST(test_tokens_table)
{
	const struct tokcase	*c = &tokcases[_i];
	struct toks		 k;

	ck_assert_str_eq(toks(c->in, strlen(c->in), &k), c->want);
}
END_TEST

/* A word longer than KBT_TOKEN_MAX is cut to it; a compound's parts are
 * cut separately. */
START_TEST(test_tokens_long)
{
	char		w[200], want[400];
	struct toks	k;

	memset(w, 'A', 100);
	w[100] = '\0';
	memset(want, 'a', 64);
	want[64] = '\0';
	ck_assert_str_eq(toks(w, 100, &k), want);

	/* 70 x 'a', '_', 3 x 'b' */
	memset(w, 'a', 70);
	memcpy(w + 70, "_bbb", 5);
	memset(want, 'a', 64);
	want[64] = ' ';
	memset(want + 65, 'a', 64);
	strcpy(want + 129, " bbb");
	ck_assert_str_eq(toks(w, strlen(w), &k), want);

	/* exactly 64 stays whole */
	memset(w, 'q', 64);
	w[64] = '\0';
	ck_assert_str_eq(toks(w, 64, &k), w);
}
END_TEST

/* The length given is respected (no NUL needed, bytes after ignored). */
START_TEST(test_tokens_len)
{
	struct toks	k;

	ck_assert_str_eq(toks("foo barbaz", 6, &k), "foo ba");
	ck_assert_uint_eq(kbt_tokens("one two three", 13, NULL, NULL), 3);
	ck_assert_str_eq(toks("ab\0cd", 5, &k), "ab cd");
}
END_TEST

/* Checks a chunking's invariants: in order, every byte once, bounded,
 * cut only after '\n' unless the line is longer than max, lines right. */
static void
check_cover(const char *t, size_t len, size_t max, const struct kbt_chunk *c,
    size_t n)
{
	size_t		i, j, at = 0;
	unsigned	line = 1;

	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(c[i].off, at);
		ck_assert_uint_ge(c[i].len, 1);
		ck_assert_uint_le(c[i].len, max);
		ck_assert_uint_eq(c[i].line_first, line);
		for (j = c[i].off; j + 1 < c[i].off + c[i].len; j++)
			if (t[j] == '\n')
				line++;
		ck_assert_uint_eq(c[i].line_last, line);
		if (t[c[i].off + c[i].len - 1] == '\n')
			line++;
		at += c[i].len;
		if (at < len && t[at - 1] != '\n') {
			/* a cut inside a line: only when the line would not
			 * fit, and never inside a UTF-8 character */
			const char *ls = t + c[i].off, *nl;

			nl = memchr(ls, '\n', len - c[i].off);
			ck_assert(nl == NULL || (size_t)(nl - ls) >= max);
			if (max >= 4)
				ck_assert_int_ne((unsigned char)t[at] & 0xc0,
				    0x80);
		}
	}
	ck_assert_uint_eq(at, len);
}

static size_t
chunk(const char *t, size_t max, struct kbt_chunk **c)
{
	size_t	n = kbt_chunks(t, strlen(t), max, c);

	ck_assert_uint_ne(n, (size_t)-1);
	check_cover(t, strlen(t), max ? max : KBT_CHUNK_BYTES, *c, n);
	return n;
}

START_TEST(test_chunks_empty_and_small)
{
	struct kbt_chunk	*c;

	ck_assert_uint_eq(kbt_chunks("", 0, 100, &c), 0);
	free(c);
	ck_assert_uint_eq(chunk("one line, no newline", 100, &c), 1);
	ck_assert_uint_eq(c[0].line_first, 1);
	ck_assert_uint_eq(c[0].line_last, 1);
	free(c);
	ck_assert_uint_eq(chunk("a\nb\nc\n", 100, &c), 1);
	ck_assert_uint_eq(c[0].line_last, 3);
	free(c);
	/* max 0: the default bound */
	ck_assert_uint_eq(chunk("x\n", 0, &c), 1);
	free(c);
}
END_TEST

/* Lines of 10 bytes, bound 35: three lines a chunk, at line ends. */
START_TEST(test_chunks_last_line)
{
	const char		*t = "line 0001\nline 0002\nline 0003\n"
	    "line 0004\nline 0005\nline 0006\nline 0007";
	struct kbt_chunk	*c;

	ck_assert_uint_eq(chunk(t, 35, &c), 3);
	ck_assert_uint_eq(c[0].len, 30);
	ck_assert_uint_eq(c[0].line_first, 1);
	ck_assert_uint_eq(c[0].line_last, 3);
	ck_assert_uint_eq(c[1].line_first, 4);
	ck_assert_uint_eq(c[1].line_last, 6);
	ck_assert_uint_eq(c[2].line_first, 7);
	ck_assert_uint_eq(c[2].line_last, 7);
	ck_assert_uint_eq(c[2].len, 9);		/* no trailing newline */
	free(c);
}
END_TEST

/* A blank line is preferred to the last line that fits; a definition to
 * a blank line. */
START_TEST(test_chunks_prefer)
{
	const char		*t1 = "aaaa\nbbbb\n\ncccc\ndddd\neeee\nffff\n";
	const char		*t2 = "aaaa\n\nbbbb\ndef f():\ncccc\n\ndddd\n"
	    "eeee\nffff\n";
	const char		*t3 = "int\nmain(void)\n{\n}\n\nint\n"
	    "other(int x)\n{\n\treturn x;\n}\n";
	struct kbt_chunk	*c;
	size_t			 n;

	/* bound 25: "aaaa..eeee\n" would fit, the blank line wins */
	n = chunk(t1, 25, &c);
	ck_assert_uint_ge(n, 2);
	ck_assert_uint_eq(c[0].len, 11);	/* "aaaa\nbbbb\n\n" */
	ck_assert_uint_eq(c[0].line_last, 3);
	ck_assert_uint_eq(c[1].line_first, 4);
	free(c);

	/* bound 30: the definition line starts the second chunk, though a
	 * blank line comes later in the window */
	n = chunk(t2, 30, &c);
	ck_assert_uint_ge(n, 2);
	ck_assert_uint_eq(c[0].len, 11);	/* "aaaa\n\nbbbb\n" */
	ck_assert_int_eq(memcmp(t2 + c[1].off, "def f", 5), 0);
	free(c);

	/* C: a name at column 0 then "(" */
	n = chunk(t3, 40, &c);
	ck_assert_uint_ge(n, 2);
	ck_assert_int_eq(memcmp(t3 + c[1].off, "other(", 6), 0);
	ck_assert_uint_eq(c[1].line_first, 7);
	free(c);
}
END_TEST

START_TEST(test_chunks_defline)
{
	ck_assert(kbt_defline("def x", 5));
	ck_assert(kbt_defline("class X:", 8));
	ck_assert(kbt_defline("func main() {", 13));
	ck_assert(kbt_defline("fn x()", 6));
	ck_assert(kbt_defline("pub fn x()", 10));
	ck_assert(kbt_defline("function f() {", 14));
	ck_assert(kbt_defline("static int", 10));
	ck_assert(kbt_defline("struct kbi {", 12));
	ck_assert(kbt_defline("impl Foo {", 10));
	ck_assert(kbt_defline("export const", 12));
	ck_assert(kbt_defline("# Title", 7));
	ck_assert(kbt_defline("#include <x.h>", 14));
	ck_assert(kbt_defline("kbt_tokens(const char *text,", 28));
	ck_assert(kbt_defline("_start(", 7));
	ck_assert(!kbt_defline(" def x", 6));
	ck_assert(!kbt_defline("\tfoo(x);", 8));
	ck_assert(!kbt_defline("if (x)", 6));
	ck_assert(!kbt_defline("define", 6));
	ck_assert(!kbt_defline("9abc(", 5));
	ck_assert(!kbt_defline("", 0));
	ck_assert(!kbt_defline("foo", 3));
}
END_TEST

/* A line longer than the bound is cut inside, never inside a UTF-8
 * character; the rest of the text goes on on the next line. */
START_TEST(test_chunks_long_line)
{
	char			 t[400];
	struct kbt_chunk	*c;
	size_t			 n, i, at = 0;

	/* "x" then 100 x "é" (2 bytes) then "\nshort\n" */
	t[at++] = 'x';
	for (i = 0; i < 100; i++) {
		t[at++] = (char)0xc3;
		t[at++] = (char)0xa9;
	}
	strcpy(t + at, "\nshort\n");
	n = chunk(t, 32, &c);
	ck_assert_uint_ge(n, 7);
	/* 32 would cut "é" after its first byte: 31 */
	ck_assert_uint_eq(c[0].len, 31);
	ck_assert_uint_eq(c[0].line_first, 1);
	ck_assert_uint_eq(c[0].line_last, 1);
	ck_assert_uint_eq(c[1].line_first, 1);
	ck_assert_uint_eq(c[n - 1].line_last, 2);
	free(c);

	/* 4-byte characters and a bound of 6 */
	at = 0;
	for (i = 0; i < 10; i++) {
		memcpy(t + at, "\xf0\x9f\x98\x80", 4);
		at += 4;
	}
	t[at] = '\0';
	n = chunk(t, 6, &c);
	ck_assert_uint_eq(n, 10);
	for (i = 0; i < n; i++)
		ck_assert_uint_eq(c[i].len, 4);
	free(c);

	/* a bound smaller than a character still makes progress */
	n = chunk(t, 2, &c);
	ck_assert_uint_eq(n, 20);
	free(c);
}
END_TEST

START_TEST(test_chunks_crlf)
{
	const char		*t = "aaaa\r\nbbbb\r\n\r\ncccc\r\ndddd\r\n";
	struct kbt_chunk	*c;
	size_t			 n;

	n = chunk(t, 20, &c);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(c[0].len, 14);	/* through the blank "\r\n" */
	ck_assert_uint_eq(c[0].line_last, 3);
	ck_assert_uint_eq(c[1].line_first, 4);
	ck_assert_uint_eq(c[1].line_last, 5);
	free(c);
}
END_TEST

/* Random texts: the invariants hold for every bound. */
START_TEST(test_chunks_random)
{
	static const char	*pieces[] = { "\n", "\n\n", "word ", "def f(",
	    "\nstatic int\n", "\r\n", "\xc3\xa9", "\xe2\x82\xac", "#x\n",
	    "longerwordhere ", "\t", "main(" };
	char			 t[3000];
	struct kbt_chunk	*c;
	size_t			 len, max, n;
	unsigned		 seed = 12345, r;
	int			 round;

	for (round = 0; round < 300; round++) {
		len = 0;
		while (len < sizeof(t) - 20) {
			seed = seed * 1103515245 + 12345;
			r = (seed >> 16) % (sizeof(pieces) / sizeof(pieces[0]));
			memcpy(t + len, pieces[r], strlen(pieces[r]));
			len += strlen(pieces[r]);
			if (((seed >> 8) & 63) == 0)
				break;
		}
		t[len] = '\0';
		seed = seed * 1103515245 + 12345;
		max = 1 + (seed >> 16) % 200;
		n = kbt_chunks(t, len, max, &c);
		ck_assert_uint_ne(n, (size_t)-1);
		check_cover(t, len, max, c, n);
		free(c);
	}
}
END_TEST

START_TEST(test_is_text)
{
	char	*b;
	size_t	 i;

	ck_assert(kbt_is_text("", 0));
	ck_assert(kbt_is_text("plain text\n", 11));
	ck_assert(kbt_is_text("caf\xc3\xa9", 5));
	ck_assert(!kbt_is_text("a\0b", 3));
	ck_assert(!kbt_is_text("\xff\xfe", 2));
	ck_assert(!kbt_is_text("\xc0\xaf", 2));		/* overlong */
	ck_assert(!kbt_is_text("caf\xc3", 4));		/* cut by the end */

	b = malloc(KBT_SNIFF + 100);
	ck_assert_ptr_nonnull(b);
	memset(b, 'a', KBT_SNIFF + 100);
	/* a 3-byte character across the sniff's end: allowed */
	memcpy(b + KBT_SNIFF - 2, "\xe2\x82\xac", 3);
	ck_assert(kbt_is_text(b, KBT_SNIFF + 100));
	ck_assert(kbt_is_text(b, KBT_SNIFF));		/* the first read */
	ck_assert(!kbt_is_text(b, KBT_SNIFF - 1));	/* the whole text */
	/* a NUL or bad byte after the sniff is not looked at */
	memset(b, 'a', KBT_SNIFF + 100);
	b[KBT_SNIFF + 10] = '\0';
	b[KBT_SNIFF + 11] = (char)0xff;
	ck_assert(kbt_is_text(b, KBT_SNIFF + 100));
	/* a NUL anywhere inside it is */
	for (i = 0; i < KBT_SNIFF; i += 1021) {
		b[i] = '\0';
		ck_assert(!kbt_is_text(b, KBT_SNIFF + 100));
		b[i] = 'a';
	}
	b[KBT_SNIFF - 1] = (char)0x80;			/* lone continuation */
	ck_assert(!kbt_is_text(b, KBT_SNIFF + 100));
	free(b);
}
END_TEST

START_TEST(test_sha256)
{
	char	hex[65];

	kbt_sha256("", 0, hex);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb924"
	    "27ae41e4649b934ca495991b7852b855");
	kbt_sha256("abc", 3, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223"
	    "b00361a396177a9cb410ff61f20015ad");
}
END_TEST

static Suite *
kbtext_suite(void)
{
	Suite	*s = suite_create("kbtext");
	TCase	*tc = tcase_create("core");

	tcase_add_loop_test(tc, test_tokens_table, 0,
	    sizeof(tokcases) / sizeof(tokcases[0]));
	tcase_add_test(tc, test_tokens_long);
	tcase_add_test(tc, test_tokens_len);
	tcase_add_test(tc, test_chunks_empty_and_small);
	tcase_add_test(tc, test_chunks_last_line);
	tcase_add_test(tc, test_chunks_prefer);
	tcase_add_test(tc, test_chunks_defline);
	tcase_add_test(tc, test_chunks_long_line);
	tcase_add_test(tc, test_chunks_crlf);
	tcase_add_test(tc, test_chunks_random);
	tcase_add_test(tc, test_is_text);
	tcase_add_test(tc, test_sha256);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(kbtext_suite());
}
