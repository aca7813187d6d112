/*
 * The configuration parser (src/config*.c) over a file's bytes, as
 * config_load hands them to it: any bytes, NUL included, no terminator.
 * A refusal must say "name:line: what"; a configuration that parses is
 * freed whole (LeakSanitizer checks).  config_parse is static, hence the
 * include.
 */
#include "../src/config.c"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config	*c;
	char		 err[512], *text;

	fuzz_quiet();
	if ((text = malloc(size ? size : 1)) == NULL)
		abort();
	memcpy(text, data, size);
	err[0] = '\0';
	if ((c = config_parse("fuzz.conf", text, size, err,
	    sizeof(err))) != NULL) {
		/* What the worker looks up first must be there. */
		FUZZ_CHECK(c->default_provider == NULL ||
		    config_provider(c, c->default_provider) != NULL);
		config_free(c);
	} else
		FUZZ_CHECK(strncmp(err, "fuzz.conf", 9) == 0);
	free(text);
	return 0;
}
