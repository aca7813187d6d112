/*
 * What the config suites share (tests/unit/test_config*.c): parse a text
 * as "x.conf", and expect it to fail with exactly a message.  Include
 * after src/config*.c.
 */
#ifndef PARLEY_CONFIG_FIXTURE_H
#define PARLEY_CONFIG_FIXTURE_H

static char errbuf[512];

static struct config *
parse(const char *text)
{
	errbuf[0] = '\0';
	return config_parse_string("x.conf", text, errbuf, sizeof(errbuf));
}

/* Parses text, expecting failure with exactly msg. */
static void
expect_err(const char *text, const char *msg)
{
	struct config	*c = parse(text);

	if (c != NULL) {
		config_free(c);
		ck_abort_msg("parsed but expected '%s' from:\n%s", msg, text);
	}
	ck_assert_str_eq(errbuf, msg);
}

#endif
