/* Unit tests for the parleyd.conf parser (src/config*.c). */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/config.c"
#include "../../src/config_access.c"
#include "../../src/config_block.c"
#include "check_main.h"

static const char example[] =
    "listen 127.0.0.1:7777\n"
    "workers 2\n"
    "state-dir /var/lib/parleyd\n"
    "store local\n"
    "retention 24h\n"
    "idle-timeout 10m\n"
    "flush-interval 20ms\n"
    "token s3cret role admin\n"
    "provider demo {\n"
    "    type script\n"
    "    reply \"Hello from Parley.\"\n"
    "    chunk 4\n"
    "    delay 20ms\n"
    "}\n"
    "default-provider demo\n";

#include "config_fixture.h"

/* Reads a file from the source tree, NULL if absent. */
static char *
slurp_src(const char *rel)
{
	char		 path[1024];
	const char	*prefixes[] = {
#ifdef SRCDIR
		SRCDIR "/",
#endif
		"", "../../", "../", NULL
	};
	FILE		*f;
	char		*buf;
	size_t		 n;
	int		 i;

	for (i = 0; prefixes[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s%s", prefixes[i], rel);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		buf = calloc(1, 1 << 20);
		ck_assert_ptr_nonnull(buf);
		n = fread(buf, 1, (1 << 20) - 1, f);
		buf[n] = '\0';
		fclose(f);
		return buf;
	}
	return NULL;
}

static void
check_defaults(const struct config *c)
{
	const struct cfg_listen		*l;
	const struct cfg_provider	*pr;

	l = TAILQ_FIRST(&c->listens);
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(l->host, "127.0.0.1");
	ck_assert_str_eq(l->port, "7777");
	ck_assert_int_eq(l->loopback, 1);
	ck_assert_int_eq(l->optional, 0);
	l = TAILQ_NEXT(l, entry);
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(l->host, "::1");
	ck_assert_str_eq(l->port, "7777");
	ck_assert_int_eq(l->loopback, 1);
	ck_assert_int_eq(l->optional, 1);
	ck_assert_ptr_null(TAILQ_NEXT(l, entry));
	ck_assert_uint_eq(c->workers, 0);
	ck_assert_str_eq(c->state_dir, "/var/lib/parleyd");
	ck_assert_str_eq(c->store, "local");
	ck_assert_int_eq(c->fsync, CFG_FSYNC_BATCH);
	ck_assert_uint_eq(c->retention_ms, 24ULL * 3600 * 1000);
	ck_assert_uint_eq(c->idle_timeout_ms, 600000);
	ck_assert_uint_eq(c->flush_interval_ms, 20);
	ck_assert_uint_eq(c->heartbeat_ms, 15000);
	ck_assert_uint_eq(c->handshake_timeout_ms, 10000);
	ck_assert_uint_eq(c->shutdown_timeout_ms, 10000);
	ck_assert_uint_eq(c->max_request_line, 8192);
	ck_assert_uint_eq(c->max_header_size, 16384);
	ck_assert_uint_eq(c->max_headers, 64);
	ck_assert_uint_eq(c->max_body, 1048576);
	ck_assert_uint_eq(c->max_frame, 1048576);
	ck_assert_uint_eq(c->max_message, 1048576);
	ck_assert_uint_eq(c->max_json_depth, 32);
	ck_assert_uint_eq(c->max_output_buffer, 262144);
	ck_assert_uint_eq(c->max_sessions, 10000);
	ck_assert_uint_eq(c->max_connections, 20000);
	ck_assert_uint_eq(c->max_conn_per_addr, 1000);
	ck_assert_uint_eq(c->conn_rate_per_addr, 0);
	ck_assert_uint_eq(c->ntrusted, 0);
	ck_assert_uint_eq(c->lingering_time_ms, 30000);
	ck_assert_uint_eq(c->lingering_timeout_ms, 5000);
	ck_assert_int_eq(TAILQ_FIRST(&c->listens)->proxy_protocol, 0);
	ck_assert(TAILQ_EMPTY(&c->tool_policies));
	ck_assert_int_eq(c->autonomy, POLICY_SUPERVISED);
	ck_assert_int_eq(c->max_autonomy, POLICY_FULL_AUTO);
	ck_assert_uint_eq(c->approval_timeout_ms, 24ULL * 3600 * 1000);
	ck_assert_uint_eq(c->client_tool_timeout_ms, 600000);
	ck_assert_ptr_null(c->audit_log);
	ck_assert_str_eq(c->log_level, "info");
	ck_assert_ptr_null(c->pid_file);
	ck_assert(TAILQ_EMPTY(&c->tokens));
	ck_assert_str_eq(c->default_provider, "demo");
	pr = config_provider(c, "demo");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->type, "script");
	ck_assert_uint_eq(pr->chunk, 4);
	ck_assert_uint_eq(pr->delay_ms, 20);
	ck_assert_int_eq(pr->stamp, 0);
	ck_assert_ptr_null(pr->url);
	ck_assert_ptr_null(pr->api_key_env);
	ck_assert_ptr_null(pr->model);
	ck_assert_uint_eq(pr->max_tokens, 0);
	ck_assert_int_eq(pr->has_temperature, 0);
	ck_assert_uint_eq(pr->timeout_ms, 60000);
	ck_assert_uint_eq(pr->idle_timeout_ms, 60000);
	ck_assert(pr->price_input == 0.0 && pr->price_output == 0.0);
	ck_assert_uint_eq(pr->max_retries, 2);
	ck_assert_uint_eq(pr->attempt_timeout_ms, 600000);
	ck_assert_uint_eq(pr->max_reply, 64 * 1024 * 1024);
	ck_assert_ptr_nonnull(strstr(pr->reply, "Hello from Parley. This is "
	    "the built-in demo provider"));
	ck_assert_ptr_nonnull(strstr(pr->reply, "and set default-provider."));
	ck_assert_ptr_null(TAILQ_NEXT(pr, entry));
}

START_TEST(test_example)
{
	struct config			*c = parse(example);
	const struct cfg_token		*t;
	const struct cfg_provider	*pr;

	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(c->path, "x.conf");
	ck_assert_uint_eq(c->workers, 2);
	ck_assert_str_eq(TAILQ_FIRST(&c->listens)->host, "127.0.0.1");
	ck_assert_str_eq(TAILQ_FIRST(&c->listens)->port, "7777");
	ck_assert_uint_eq(c->retention_ms, 86400000);
	ck_assert_uint_eq(c->idle_timeout_ms, 600000);
	ck_assert_uint_eq(c->flush_interval_ms, 20);
	t = TAILQ_FIRST(&c->tokens);
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t->secret, "s3cret");
	ck_assert_str_eq(t->role, "admin");
	ck_assert_ptr_null(t->session);
	ck_assert_uint_eq(t->line, 8);
	pr = config_provider(c, "demo");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->reply, "Hello from Parley.");
	ck_assert_uint_eq(pr->line, 9);
	ck_assert_ptr_null(TAILQ_NEXT(pr, entry));
	ck_assert_str_eq(c->default_provider, "demo");
	ck_assert_ptr_null(config_provider(c, "nope"));
	ck_assert_ptr_null(config_provider(c, NULL));
	config_free(c);
}
END_TEST

START_TEST(test_defaults)
{
	struct config	*c;

	c = config_default();
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_null(c->path);
	check_defaults(c);
	config_free(c);

	c = parse("");
	ck_assert_msg(c != NULL, "%s", errbuf);
	check_defaults(c);
	config_free(c);

	c = parse("# nothing\n\n   \t\n  # indented comment\r\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	check_defaults(c);
	config_free(c);

	config_free(NULL);
}
END_TEST

START_TEST(test_load)
{
	char		 path[] = "/tmp/test_config.XXXXXX";
	char		 e[256];
	struct config	*c;
	FILE		*f;
	int		 fd;

	c = config_load("/nonexistent/parleyd.conf", 0, e, sizeof(e));
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_null(c->path);
	check_defaults(c);
	config_free(c);

	c = config_load("/nonexistent/parleyd.conf", 1, e, sizeof(e));
	ck_assert_ptr_null(c);
	ck_assert_str_eq(e, "/nonexistent/parleyd.conf: No such file or "
	    "directory");

	c = config_load("/tmp", 0, e, sizeof(e));
	ck_assert_ptr_null(c);
	ck_assert_str_eq(e, "/tmp: not a regular file");

	/* CRLF line ends, a BOM, no final newline. */
	fd = mkstemp(path);
	ck_assert_int_ne(fd, -1);
	f = fdopen(fd, "w");
	fputs("\xef\xbb\xbfworkers 3\r\nlisten 8080\r\nlog-level debug", f);
	fclose(f);
	c = config_load(path, 1, e, sizeof(e));
	ck_assert_msg(c != NULL, "%s", e);
	ck_assert_str_eq(c->path, path);
	ck_assert_uint_eq(c->workers, 3);
	ck_assert_str_eq(TAILQ_FIRST(&c->listens)->port, "8080");
	ck_assert_str_eq(c->log_level, "debug");
	config_free(c);

	/* Errors carry the path. */
	f = fopen(path, "w");
	fputs("workers 3\n\nlistn 1\n", f);
	fclose(f);
	c = config_load(path, 1, e, sizeof(e));
	ck_assert_ptr_null(c);
	{
		char want[256];

		snprintf(want, sizeof(want), "%s:3: unknown directive 'listn'",
		    path);
		ck_assert_str_eq(e, want);
	}

	/* A NUL byte in the file. */
	f = fopen(path, "w");
	fwrite("workers 3\n\0\n", 1, 12, f);
	fclose(f);
	c = config_load(path, 1, e, sizeof(e));
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(e, "NUL"));

	/* Too large. */
	f = fopen(path, "w");
	for (fd = 0; fd < (1 << 20) / 8 + 1; fd++)
		fputs("# pad  \n", f);
	fclose(f);
	c = config_load(path, 1, e, sizeof(e));
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(e, "too large"));
	unlink(path);
}
END_TEST

START_TEST(test_errors)
{
	static const struct {
		const char	*text;
		const char	*msg;
	} t[] = {
	{ "listn 1\n", "x.conf:1: unknown directive 'listn'" },
	{ "\n\n# c\nworkers lots\n",
	  "x.conf:4: workers: expected 'auto' or a number from 1 to 256, "
	  "got 'lots'" },
	{ "workers 0\n", "x.conf:1: workers: expected 'auto' or a number "
	  "from 1 to 256, got '0'" },
	{ "workers 257\n", "x.conf:1: workers: expected 'auto' or a number "
	  "from 1 to 256, got '257'" },
	{ "workers -1\n", "x.conf:1: workers: expected 'auto' or a number "
	  "from 1 to 256, got '-1'" },
	{ "workers 99999999999999999999999\n", "x.conf:1: workers: expected "
	  "'auto' or a number from 1 to 256, got '99999999999999999999999'" },
	{ "workers\n", "x.conf:1: workers: wrong number of arguments; "
	  "usage: workers auto|N" },
	{ "workers 1 2\n", "x.conf:1: workers: wrong number of arguments; "
	  "usage: workers auto|N" },
	{ "workers 1\nworkers 2\n", "x.conf:2: workers: duplicate directive "
	  "(first on line 1)" },
	{ "token a role admin session\n", "x.conf:1: token: wrong number of "
	  "arguments; usage: token SECRET role ROLE [session ID]" },
	{ "token a role king\n", "x.conf:1: token: role must be user, agent, "
	  "observer, admin or metrics, got 'king'" },
	{ "token a rol admin\n", "x.conf:1: token: expected 'role', "
	  "got 'rol'" },
	{ "token a role user sess s1\n", "x.conf:1: token: expected "
	  "'session', got 'sess'" },
	{ "token \"a b\" role user\n", "x.conf:1: token: the secret must be "
	  "1 to 1024 printable characters without blanks" },
	{ "token a role user\ntoken a role admin\n", "x.conf:2: token: "
	  "duplicate secret (first on line 1)" },
	{ "reply \"hi\"\n", "x.conf:1: reply: only allowed inside a provider "
	  "block" },
	{ "provider p {\n  listen 1\n}\n", "x.conf:2: listen: not allowed "
	  "inside a provider block" },
	{ "provider p {\n  provider q {\n", "x.conf:2: provider: not allowed "
	  "inside a provider block" },
	{ "provider p {\n  type script\n  reply x\n",
	  "x.conf:1: provider 'p': unterminated block (missing '}')" },
	{ "provider p\n", "x.conf:1: provider: expected 'provider NAME {' "
	  "with the '{' on the same line" },
	{ "provider p \"{\"\n", "x.conf:1: provider: expected 'provider NAME "
	  "{' with the '{' on the same line" },
	{ "provider {\n}\n", "x.conf:1: provider: wrong number of arguments; "
	  "usage: provider NAME {" },
	{ "provider p q {\n}\n", "x.conf:1: provider: wrong number of "
	  "arguments; usage: provider NAME {" },
	{ "provider p/q {\n}\n", "x.conf:1: provider: name must be 1 to 63 "
	  "letters, digits, '.', '_' or '-', got 'p/q'" },
	{ "provider p {\n  reply x\n}\n", "x.conf:1: provider 'p': missing "
	  "'type'" },
	{ "provider p {\n  type script\n}\n", "x.conf:1: provider 'p': a "
	  "script provider needs a 'reply'" },
	{ "provider p {\n  type gemini\n}\n", "x.conf:2: type: expected "
	  "openai, anthropic or script, got 'gemini'" },
	{ "provider p {\n  type openai\n}\n", "x.conf:1: provider 'p': model "
	  "is required for type openai" },
	{ "provider p {\n  type anthropic }\n", "x.conf:1: provider 'p': "
	  "model is required for type anthropic" },
	{ "provider p {\n type openai\n model m\n reply hi\n}\n",
	  "x.conf:4: reply: not used by type openai (only by script)" },
	{ "provider p {\n chunk 2\n delay 1s\n type anthropic\n model m\n}\n",
	  "x.conf:2: chunk: not used by type anthropic (only by script)" },
	{ "provider p {\n model m\n delay 1s\n type openai\n}\n",
	  "x.conf:3: delay: not used by type openai (only by script)" },
	{ "provider p {\n type script\n reply a\n url http://h\n}\n",
	  "x.conf:4: url: not used by type script (only by openai and "
	  "anthropic)" },
	{ "provider p {\n type script\n reply a\n max-retries 1\n"
	  " idle-timeout 5s\n}\n", "x.conf:4: max-retries: not used by type "
	  "script (only by openai and anthropic)" },
	{ "provider p {\n type openai\n model m\n type openai\n}\n",
	  "x.conf:4: type: duplicate directive (first on line 2)" },
	{ "provider p {\n type openai\n model m\n model n\n}\n",
	  "x.conf:4: model: duplicate directive (first on line 3)" },
	{ "provider p {\n type openai\n model \"a b\"\n}\n",
	  "x.conf:3: model: must be 1 to 256 printable characters without "
	  "blanks" },
	{ "provider p {\n type openai\n model \"\"\n}\n",
	  "x.conf:3: model: must be 1 to 256 printable characters without "
	  "blanks" },
	{ "provider p {\n type openai\n model m\n url ftp://h/v1\n}\n",
	  "x.conf:4: url: must start with http:// or https://" },
	{ "provider p {\n type openai\n model m\n url api.openai.com\n}\n",
	  "x.conf:4: url: must start with http:// or https://" },
	{ "provider p {\n type openai\n model m\n url https://\n}\n",
	  "x.conf:4: url: missing host name" },
	{ "provider p {\n type openai\n model m\n url http:///v1\n}\n",
	  "x.conf:4: url: missing host name" },
	{ "provider p {\n type openai\n model m\n url https:////\n}\n",
	  "x.conf:4: url: missing host name" },
	{ "provider p {\n type openai\n model m\n url \"http://h /v1\"\n}\n",
	  "x.conf:4: url: must be printable ASCII without blanks, quotes, "
	  "backslashes, '?' or '#'" },
	{ "provider p {\n type openai\n model m\n url http://h/v1?x=1\n}\n",
	  "x.conf:4: url: must be printable ASCII without blanks, quotes, "
	  "backslashes, '?' or '#'" },
	{ "provider p {\n type openai\n model m\n api-key-env 9KEY\n}\n",
	  "x.conf:4: api-key-env: '9KEY' is not a valid environment variable "
	  "name" },
	{ "provider p {\n type openai\n model m\n api-key-env A-B\n}\n",
	  "x.conf:4: api-key-env: 'A-B' is not a valid environment variable "
	  "name" },
	{ "provider p {\n type openai\n model m\n max-tokens 0\n}\n",
	  "x.conf:4: max-tokens: expected a number from 1 to 1000000, got "
	  "'0'" },
	{ "provider p {\n type openai\n model m\n max-tokens 1000001\n}\n",
	  "x.conf:4: max-tokens: expected a number from 1 to 1000000, got "
	  "'1000001'" },
	{ "provider p {\n type openai\n model m\n temperature 2.01\n}\n",
	  "x.conf:4: temperature: expected a decimal number from 0 to 2, got "
	  "'2.01'" },
	{ "provider p {\n type openai\n model m\n temperature -0.5\n}\n",
	  "x.conf:4: temperature: expected a decimal number from 0 to 2, got "
	  "'-0.5'" },
	{ "provider p {\n type openai\n model m\n temperature 1e0\n}\n",
	  "x.conf:4: temperature: expected a decimal number from 0 to 2, got "
	  "'1e0'" },
	{ "provider p {\n type openai\n model m\n temperature .5\n}\n",
	  "x.conf:4: temperature: expected a decimal number from 0 to 2, got "
	  "'.5'" },
	{ "provider p {\n type openai\n model m\n timeout 0\n}\n",
	  "x.conf:4: timeout: expected a duration from 100ms to 1h (a number "
	  "with ms, s, m, h or d), got '0'" },
	{ "provider p {\n type openai\n model m\n idle-timeout 2h\n}\n",
	  "x.conf:4: idle-timeout: expected a duration from 100ms to 1h (a "
	  "number with ms, s, m, h or d), got '2h'" },
	{ "provider p {\n type openai\n model m\n idle-timeout 1s\n"
	  " idle-timeout 2s\n}\n", "x.conf:5: idle-timeout: duplicate "
	  "directive (first on line 4)" },
	{ "provider p {\n type openai\n model m\n price-input 1.\n}\n",
	  "x.conf:4: price-input: expected a decimal number from 0 to 1000000, "
	  "got '1.'" },
	{ "provider p {\n type openai\n model m\n price-output 1000000.5\n"
	  "}\n", "x.conf:4: price-output: expected a decimal number from 0 to "
	  "1000000, got '1000000.5'" },
	{ "provider p {\n type openai\n model m\n max-retries 11\n}\n",
	  "x.conf:4: max-retries: expected a number from 0 to 10, got '11'" },
	{ "provider p {\n type openai\n model m\n attempt-timeout 500ms\n}\n",
	  "x.conf:4: attempt-timeout: expected a duration from 1s to 1d (a "
	  "number with ms, s, m, h or d), got '500ms'" },
	{ "provider p {\n type openai\n model m\n max-reply 1k\n}\n",
	  "x.conf:4: max-reply: expected a size from 64k to 1g (a number with "
	  "optional k, m or g), got '1k'" },
	{ "provider p {\n type script\n reply a\n max-reply 1m\n}\n",
	  "x.conf:4: max-reply: not used by type script (only by openai and "
	  "anthropic)" },
	{ "max-result 1m\n", "x.conf:1: max-result: only allowed inside an "
	  "mcp-server block" },
	{ "provider p {\n type openai\n model m\n max-result 1m\n}\n",
	  "x.conf:4: max-result: not allowed inside a provider block" },
	{ "mcp-server m {\n url http://h/mcp\n max-result 512\n}\n",
	  "x.conf:3: max-result: expected a size from 1k to 256m (a number "
	  "with optional k, m or g), got '512'" },
	{ "mcp-server m {\n url http://h/mcp\n max-reply 1m\n}\n",
	  "x.conf:3: max-reply: not allowed inside an mcp-server block" },
	{ "model m\n", "x.conf:1: model: only allowed inside a provider "
	  "block" },
	{ "timeout 5s\n", "x.conf:1: timeout: only allowed inside a provider "
	  "block" },
	{ "provider p {\n type script\n reply a\n chunk 2\n chunk 3\n}\n",
	  "x.conf:5: chunk: duplicate directive (first on line 4)" },
	{ "provider p {\n type script\n reply a\n stamp on\n}\n",
	  "x.conf:4: stamp: expected yes or no, got 'on'" },
	{ "provider p {\n stamp yes\n type openai\n model m\n}\n",
	  "x.conf:2: stamp: not used by type openai (only by script)" },
	{ "provider p {\n type script\n reply a\n chunk 0\n}\n",
	  "x.conf:4: chunk: expected a number from 1 to 65536, got '0'" },
	{ "provider p {\n type script\n reply a\n delay 61s\n}\n",
	  "x.conf:4: delay: expected a duration from 0ms to 1m (a number with "
	  "ms, s, m, h or d), got '61s'" },
	{ "provider p {\n type script\n reply a\n}\n"
	  "provider p {\n type script\n reply b\n}\n",
	  "x.conf:5: provider: duplicate provider 'p' (first on line 1)" },
	{ "}\n", "x.conf:1: unexpected '}' outside a block" },
	{ "provider p {\n type script\n reply a\n} x\n",
	  "x.conf:4: unexpected words after '}'" },
	{ "workers {\n", "x.conf:1: workers: unexpected '{'" },
	{ "provider p {\n type script } x\n", "x.conf:2: type: unexpected "
	  "'}'" },
	{ "provider p {\n type script\n reply \"unterminated\n}\n",
	  "x.conf:3: unterminated quoted string" },
	{ "reply \"a\\", "x.conf:1: unterminated quoted string" },
	{ "log-level \"a\\tb\"\n", "x.conf:1: unknown escape '\\t' in quoted "
	  "string" },
	{ "log-level \"info\"x\n", "x.conf:1: expected a blank after the "
	  "closing quote" },
	{ "log-level in\"fo\"\n", "x.conf:1: unexpected '\"' inside a word "
	  "(quote the whole word)" },
	{ "\"workers\" 2\n", "x.conf:1: expected a directive name, got a "
	  "quoted string" },
	{ "workers 2\x01\n", "x.conf:1: unexpected control character 0x01" },
	{ "a b c d e f g h i j k l m n o p q\n", "x.conf:1: too many words "
	  "on one line (at most 16)" },
	{ "default-provider nope\n", "x.conf:1: default-provider: no provider "
	  "named 'nope'" },
	{ "provider p {\n type script\n reply a\n}\ndefault-provider demo\n",
	  "x.conf:5: default-provider: no provider named 'demo'" },
	{ "listen 0.0.0.0:7777\n", "x.conf:1: listen 0.0.0.0:7777: a "
	  "non-loopback listener needs at least one token; add `token SECRET "
	  "role admin`" },
	{ "listen 7777\nlisten [::]:80\n", "x.conf:2: listen [::]:80: a "
	  "non-loopback listener needs at least one token; add `token SECRET "
	  "role admin`" },
	{ "listen 7777\nlisten 127.0.0.1:7777\n", "x.conf:2: listen "
	  "127.0.0.1:7777: duplicate listener (first on line 1)" },
	{ "listen 7777\nlisten [::1]:7777\n", "x.conf:2: listen "
	  "[::1]:7777: duplicate listener (first on line 1)" },
	{ "listen [::1]:80\nlisten localhost:80\n", "x.conf:2: listen "
	  "localhost:80: duplicate listener (first on line 1)" },
	{ "listen [::1]:1\nlisten [0:0::1]:01\n", "x.conf:2: listen "
	  "[0:0::1]:01: duplicate listener (first on line 1)" },
	{ "listen 0\n", "x.conf:1: listen: port must be a number from 1 to "
	  "65535, got '0'" },
	{ "listen 65536\n", "x.conf:1: listen: port must be a number from 1 "
	  "to 65535, got '65536'" },
	{ "listen 1.2.3.4:\n", "x.conf:1: listen: port must be a number from "
	  "1 to 65535, got ''" },
	{ "listen localhost\n", "x.conf:1: listen: port must be a number "
	  "from 1 to 65535, got 'localhost'" },
	{ "listen ::1:80\n", "x.conf:1: listen: IPv6 addresses must be in "
	  "brackets, as in [::1]:7777, got '::1:80'" },
	{ "listen [::1:80\n", "x.conf:1: listen: missing ']' in '[::1:80'" },
	{ "listen [::1]80\n", "x.conf:1: listen: expected [ADDRESS]:PORT, "
	  "got '[::1]80'" },
	{ "listen [1.2.3.4]:80\n", "x.conf:1: listen: '1.2.3.4' is not an "
	  "IPv6 address" },
	{ "listen 1.2.3.400:80\n", "x.conf:1: listen: '1.2.3.400' is not a "
	  "valid IPv4 address" },
	{ "listen a_b:80\n", "x.conf:1: listen: 'a_b' is not a valid address "
	  "or host name" },
	{ "listen :80\n", "x.conf:1: listen: missing address before ':' in "
	  "':80'" },
	{ "store rediss://u:pw@h:6379\n", "x.conf:1: store: TLS to Redis "
	  "(rediss://) is not supported; use redis:// over a private network "
	  "or a TLS tunnel" },
	{ "store sql\n", "x.conf:1: store: expected local, redis://HOST:PORT, "
	  "sentinel://HOST:PORT/NAME or cluster://HOST:PORT[,HOST:PORT...]" },
	{ "host-id a/b\n", "x.conf:1: host-id: 'a/b' may only hold letters, "
	  "digits, '.', '-' and '_'" },
	{ "lease-time 100ms\n", "x.conf:1: lease-time: expected a duration "
	  "from 500ms to 10m (a number with ms, s, m, h or d), got '100ms'" },
	{ "fsync sometimes\n", "x.conf:1: fsync: expected always, batch or "
	  "no, got 'sometimes'" },
	{ "log-level loud\n", "x.conf:1: log-level: expected error, warn, "
	  "info or debug, got 'loud'" },
	{ "state-dir var/lib\n", "x.conf:1: state-dir: must be an absolute "
	  "path, got 'var/lib'" },
	{ "pid-file run.pid\n", "x.conf:1: pid-file: must be an absolute "
	  "path, got 'run.pid'" },
	{ "flush-interval 2s\n", "x.conf:1: flush-interval: expected a "
	  "duration from 0ms to 1s (a number with ms, s, m, h or d), got "
	  "'2s'" },
	{ "retention 0\n", "x.conf:1: retention: expected a duration from 1s "
	  "to 3650d (a number with ms, s, m, h or d), got '0'" },
	{ "idle-timeout 10x\n", "x.conf:1: idle-timeout: expected a duration "
	  "from 1s to 30d (a number with ms, s, m, h or d), got '10x'" },
	{ "idle-timeout 1.5m\n", "x.conf:1: idle-timeout: expected a duration "
	  "from 1s to 30d (a number with ms, s, m, h or d), got '1.5m'" },
	{ "heartbeat-interval 999999999999999999d\n", "x.conf:1: "
	  "heartbeat-interval: expected a duration from 1s to 1h (a number "
	  "with ms, s, m, h or d), got '999999999999999999d'" },
	{ "max-body 2g\n", "x.conf:1: max-body: expected a size from 1k to 1g "
	  "(a number with optional k, m or g), got '2g'" },
	{ "max-frame 1kb\n", "x.conf:1: max-frame: expected a size from 1k to "
	  "1g (a number with optional k, m or g), got '1kb'" },
	{ "max-request-line 100\n", "x.conf:1: max-request-line: expected a "
	  "size from 256 to 1m (a number with optional k, m or g), got "
	  "'100'" },
	{ "max-headers 0\n", "x.conf:1: max-headers: expected a number from 1 "
	  "to 1024, got '0'" },
	{ "max-json-depth 1k\n", "x.conf:1: max-json-depth: expected a number "
	  "from 1 to 1024, got '1k'" },
	{ "token-env 1X role admin\n", "x.conf:1: token-env: '1X' is not a "
	  "valid environment variable name" },
	{ "token-env PARLEY_TEST_UNSET_VAR role admin\n", "x.conf:1: "
	  "token-env: environment variable 'PARLEY_TEST_UNSET_VAR' is not "
	  "set" },
	};
	size_t	i;

	unsetenv("PARLEY_TEST_UNSET_VAR");
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		expect_err(t[i].text, t[i].msg);
}
END_TEST

START_TEST(test_long_line)
{
	size_t	 n = CFG_MAX_LINE + 100;
	char	*s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, ' ', n);
	memcpy(s, "#", 1);
	s[n] = '\0';
	expect_err(s, "x.conf:1: line too long (more than 65536 bytes)");
	free(s);
}
END_TEST

START_TEST(test_durations_sizes)
{
	static const struct {
		const char	*s;
		int		 ok;
		uint64_t	 v;
	} d[] = {
		{ "20ms", 1, 20 }, { "30s", 1, 30000 }, { "10m", 1, 600000 },
		{ "24h", 1, 86400000 }, { "2d", 1, 172800000 },
		{ "5", 1, 5000 }, { "0", 1, 0 }, { "0ms", 1, 0 },
		{ "", 0, 0 }, { "ms", 0, 0 }, { "1 s", 0, 0 }, { "1S", 0, 0 },
		{ "-1s", 0, 0 }, { "1.5s", 0, 0 }, { "1sm", 0, 0 },
		{ "18446744073709551615ms", 1, UINT64_MAX },
		{ "18446744073709551616ms", 0, 0 },
		{ "18446744073709552s", 0, 0 },
	}, z[] = {
		{ "0", 1, 0 }, { "512", 1, 512 }, { "16k", 1, 16384 },
		{ "16K", 1, 16384 }, { "1m", 1, 1048576 },
		{ "2g", 1, 2147483648ULL }, { "k", 0, 0 }, { "1kb", 0, 0 },
		{ "1t", 0, 0 }, { "", 0, 0 }, { "17179869184g", 0, 0 },
	};
	struct config	*c;
	uint64_t	 v;
	size_t		 i;

	for (i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		v = 12345;
		ck_assert_msg((parse_duration(d[i].s, &v) == 0) == d[i].ok,
		    "duration '%s'", d[i].s);
		if (d[i].ok)
			ck_assert_uint_eq(v, d[i].v);
	}
	for (i = 0; i < sizeof(z) / sizeof(z[0]); i++) {
		v = 12345;
		ck_assert_msg((parse_size(z[i].s, &v) == 0) == z[i].ok,
		    "size '%s'", z[i].s);
		if (z[i].ok)
			ck_assert_uint_eq(v, z[i].v);
	}

	c = parse("retention 7d\nidle-timeout 90\nflush-interval 0\n"
	    "heartbeat-interval 1h\nhandshake-timeout 100ms\n"
	    "shutdown-timeout 0s\nmax-request-line 256\nmax-header-size 1m\n"
	    "max-headers 1024\nmax-body 1g\nmax-frame 64K\nmax-message 2m\n"
	    "max-json-depth 1\nmax-output-buffer 4k\nmax-sessions 1\n"
	    "max-connections 1000000\nmax-connections-per-address 0\n"
	    "fsync always\nworkers auto\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_uint_eq(c->retention_ms, 7ULL * 86400000);
	ck_assert_uint_eq(c->idle_timeout_ms, 90000);
	ck_assert_uint_eq(c->flush_interval_ms, 0);
	ck_assert_uint_eq(c->heartbeat_ms, 3600000);
	ck_assert_uint_eq(c->handshake_timeout_ms, 100);
	ck_assert_uint_eq(c->shutdown_timeout_ms, 0);
	ck_assert_uint_eq(c->max_request_line, 256);
	ck_assert_uint_eq(c->max_header_size, 1048576);
	ck_assert_uint_eq(c->max_headers, 1024);
	ck_assert_uint_eq(c->max_body, 1073741824);
	ck_assert_uint_eq(c->max_frame, 65536);
	ck_assert_uint_eq(c->max_message, 2097152);
	ck_assert_uint_eq(c->max_json_depth, 1);
	ck_assert_uint_eq(c->max_output_buffer, 4096);
	ck_assert_uint_eq(c->max_sessions, 1);
	ck_assert_uint_eq(c->max_connections, 1000000);
	ck_assert_uint_eq(c->max_conn_per_addr, 0);
	ck_assert_int_eq(c->fsync, CFG_FSYNC_ALWAYS);
	ck_assert_uint_eq(c->workers, 0);
	config_free(c);

	c = parse("fsync no\nflush-interval 1000ms\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_int_eq(c->fsync, CFG_FSYNC_NO);
	ck_assert_uint_eq(c->flush_interval_ms, 1000);
	config_free(c);
}
END_TEST

START_TEST(test_quoting)
{
	struct config			*c;
	const struct cfg_provider	*pr;

	c = parse("provider p {\n"
	    "  type script # a comment\n"
	    "  reply \"say \\\"hi\\\" # not a comment\\\\ \\n done\" # one\n"
	    "}\n"
	    "pid-file \"/run/with space.pid\"#comment right after\n"
	    "state-dir /var/lib/a#b\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	pr = config_provider(c, "p");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->reply, "say \"hi\" # not a comment\\ \n done");
	ck_assert_str_eq(c->pid_file, "/run/with space.pid");
	ck_assert_str_eq(c->state_dir, "/var/lib/a");
	config_free(c);

	/* A quoted brace is a word, not a block. */
	c = parse("provider p {\n type script\n reply \"}\"\n}\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(config_provider(c, "p")->reply, "}");
	config_free(c);

	/* Tabs separate words; UTF-8 passes through. */
	c = parse("provider\tp\t{\n\ttype\tscript\n\treply\t\"h\xc3\xa9\"\n}");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(config_provider(c, "p")->reply, "h\xc3\xa9");
	config_free(c);

	/* Words are split by the tokenizer as expected. */
	{
		struct parser	*p = calloc(1, sizeof(*p));
		const char	*s = "  a \"b c\"\t\"\" d#e f";

		ck_assert_ptr_nonnull(p);
		p->name = "t";
		ck_assert_int_eq(tokenize(p, s, strlen(s)), 0);
		ck_assert_int_eq(p->nwords, 4);
		ck_assert_str_eq(p->words[0], "a");
		ck_assert_str_eq(p->words[1], "b c");
		ck_assert_int_eq(p->quoted[1], 1);
		ck_assert_str_eq(p->words[2], "");
		ck_assert_str_eq(p->words[3], "d");
		ck_assert_int_eq(p->quoted[3], 0);
		free(p);
	}
}
END_TEST

START_TEST(test_blocks)
{
	struct config			*c;
	const struct cfg_provider	*pr;

	/* '}' after the last directive; first provider is the default. */
	c = parse("provider fast {\n type script\n reply a\n chunk 65536\n"
	    " stamp yes\n delay 0 }\n"
	    "provider slow.v2 {\n type script\n reply b\n delay 1s\n"
	    " stamp no\n}\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(c->default_provider, "fast");
	pr = config_provider(c, "fast");
	ck_assert_ptr_nonnull(pr);
	ck_assert_uint_eq(pr->chunk, 65536);
	ck_assert_uint_eq(pr->delay_ms, 0);
	ck_assert_int_eq(pr->stamp, 1);
	pr = config_provider(c, "slow.v2");
	ck_assert_ptr_nonnull(pr);
	ck_assert_uint_eq(pr->chunk, 4);
	ck_assert_uint_eq(pr->delay_ms, 1000);
	ck_assert_int_eq(pr->stamp, 0);
	ck_assert_ptr_null(config_provider(c, "demo"));
	config_free(c);

	/* Directive names may repeat in separate blocks. */
	c = parse("default-provider b\n"
	    "provider a {\n type script\n reply a\n}\n"
	    "provider b {\n type script\n reply b }\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(c->default_provider, "b");
	config_free(c);

	/* No providers: the demo is added and may be named. */
	c = parse("default-provider demo\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_ptr_nonnull(config_provider(c, "demo"));
	config_free(c);
}
END_TEST

START_TEST(test_decimal)
{
	static const struct {
		const char	*s;
		int		 ok;
		double		 v;
	} d[] = {
		{ "0", 1, 0 }, { "2", 1, 2 }, { "0.7", 1, 0.7 },
		{ "15.25", 1, 15.25 }, { "0.075", 1, 0.075 },
		{ "1.000000000000000000000000001", 1, 1 },
		{ "1000000000000", 1, 1e12 }, { "1000000000001", 0, 0 },
		{ "", 0, 0 }, { ".", 0, 0 }, { ".5", 0, 0 }, { "1.", 0, 0 },
		{ "-1", 0, 0 }, { "+1", 0, 0 }, { "1e3", 0, 0 }, { "1,5", 0, 0 },
		{ "1.5.", 0, 0 }, { "1..5", 0, 0 }, { "0x10", 0, 0 },
		{ "nan", 0, 0 }, { "inf", 0, 0 }, { "1 ", 0, 0 },
		{ "99999999999999999999999", 0, 0 },
	};
	double	v, diff;
	size_t	i;

	for (i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		v = -1;
		ck_assert_msg((cfg_parse_decimal(d[i].s, &v) == 0) == d[i].ok,
		    "decimal '%s'", d[i].s);
		if (!d[i].ok)
			continue;
		diff = v - d[i].v;
		ck_assert_msg(diff < 1e-12 && diff > -1e-12, "decimal '%s' = %g",
		    d[i].s, v);
	}
}
END_TEST

START_TEST(test_llm_providers)
{
	struct config			*c;
	const struct cfg_provider	*pr;

	c = parse("provider gpt {\n"
	    "    type openai\n"
	    "    url https://api.example.com/v1/\n"
	    "    api-key-env OPENAI_API_KEY\n"
	    "    model gpt-4o-mini\n"
	    "    max-tokens 2048\n"
	    "    temperature 0.7\n"
	    "    timeout 30s\n"
	    "    idle-timeout 45s\n"
	    "    price-input 0.15\n"
	    "    price-output 0.6\n"
	    "    max-retries 5\n"
	    "    attempt-timeout 30m\n"
	    "    max-reply 2m\n"
	    "}\n"
	    "provider claude {\n"
	    "    model claude-sonnet-4-5\n"
	    "    api-key-env ANTHROPIC_API_KEY\n"
	    "    type anthropic\n"
	    "    price-input 3\n"
	    "    price-output 15\n"
	    "}\n"
	    "idle-timeout 5m\n"
	    "provider local {\n"
	    "    type openai\n"
	    "    url http://127.0.0.1:8080/v1\n"
	    "    model \"meta-llama/Llama-3.1-8B-Instruct:q4\"\n"
	    "    temperature 0\n"
	    "    max-retries 0 }\n"
	    "provider big {\n type anthropic\n model m\n url HTTP://h:1//\n"
	    " max-tokens 1000000\n timeout 100ms\n idle-timeout 1h\n"
	    " temperature 2\n}\n"
	    "provider oai {\n type openai\n model m\n}\n"
	    "default-provider claude\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(c->default_provider, "claude");
	/* Top-level idle-timeout keeps its own meaning. */
	ck_assert_uint_eq(c->idle_timeout_ms, 300000);

	pr = config_provider(c, "gpt");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->type, "openai");
	ck_assert_str_eq(pr->url, "https://api.example.com/v1");
	ck_assert_str_eq(pr->api_key_env, "OPENAI_API_KEY");
	ck_assert_str_eq(pr->model, "gpt-4o-mini");
	ck_assert_uint_eq(pr->max_tokens, 2048);
	ck_assert_int_eq(pr->has_temperature, 1);
	ck_assert(pr->temperature > 0.6999999 && pr->temperature < 0.7000001);
	ck_assert_uint_eq(pr->timeout_ms, 30000);
	ck_assert_uint_eq(pr->idle_timeout_ms, 45000);
	ck_assert(pr->price_input > 0.1499999 && pr->price_input < 0.1500001);
	ck_assert(pr->price_output > 0.5999999 && pr->price_output < 0.6000001);
	ck_assert_uint_eq(pr->max_retries, 5);
	ck_assert_uint_eq(pr->attempt_timeout_ms, 30 * 60000);
	ck_assert_uint_eq(pr->max_reply, 2 * 1024 * 1024);
	ck_assert_ptr_null(pr->reply);

	pr = config_provider(c, "claude");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->type, "anthropic");
	ck_assert_str_eq(pr->url, "https://api.anthropic.com");
	ck_assert_str_eq(pr->api_key_env, "ANTHROPIC_API_KEY");
	ck_assert_str_eq(pr->model, "claude-sonnet-4-5");
	ck_assert_uint_eq(pr->max_tokens, 1024);
	ck_assert_int_eq(pr->has_temperature, 0);
	ck_assert_uint_eq(pr->timeout_ms, 60000);
	ck_assert_uint_eq(pr->idle_timeout_ms, 60000);
	ck_assert(pr->price_input == 3.0 && pr->price_output == 15.0);
	ck_assert_uint_eq(pr->max_retries, 2);

	pr = config_provider(c, "local");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->url, "http://127.0.0.1:8080/v1");
	ck_assert_ptr_null(pr->api_key_env);
	ck_assert_str_eq(pr->model, "meta-llama/Llama-3.1-8B-Instruct:q4");
	ck_assert_uint_eq(pr->max_tokens, 0);
	ck_assert_int_eq(pr->has_temperature, 1);
	ck_assert(pr->temperature == 0.0);
	ck_assert_uint_eq(pr->max_retries, 0);

	pr = config_provider(c, "big");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->url, "HTTP://h:1");
	ck_assert_uint_eq(pr->max_tokens, 1000000);
	ck_assert_uint_eq(pr->timeout_ms, 100);
	ck_assert_uint_eq(pr->idle_timeout_ms, 3600000);
	ck_assert(pr->temperature == 2.0);

	pr = config_provider(c, "oai");
	ck_assert_ptr_nonnull(pr);
	ck_assert_str_eq(pr->url, "https://api.openai.com/v1");
	ck_assert_uint_eq(pr->max_tokens, 0);
	ck_assert_ptr_null(pr->api_key_env);
	config_free(c);

	/* The key variable is only named here, never read: unset is fine. */
	unsetenv("PARLEY_TEST_UNSET_KEY");
	c = parse("provider a {\n type anthropic\n model m\n"
	    " api-key-env PARLEY_TEST_UNSET_KEY\n}\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(config_provider(c, "a")->api_key_env,
	    "PARLEY_TEST_UNSET_KEY");
	config_free(c);

	/* Errors after strings were stored must not leak them (LSan). */
	c = parse("provider a {\n type openai\n model m\n url http://h\n"
	    " api-key-env K\n max-retries 99\n}\n");
	ck_assert_ptr_null(c);
	c = parse("provider a {\n url http://h\n model m\n type openai\n"
	    " api-key-env K\n}\nprovider a {\n");
	ck_assert_ptr_null(c);
}
END_TEST

/* Every prefix and many mutations of a valid file: parse or fail cleanly. */
START_TEST(test_robust)
{
	static const char	 alphabet[] = " \t\n\"\\#{}:[]ax01";
	char			 buf[sizeof(example)];
	struct config		*c;
	size_t			 n, i;
	unsigned		 seed = 12345;

	for (n = 0; n <= strlen(example); n++) {
		memcpy(buf, example, n);
		buf[n] = '\0';
		c = parse(buf);
		if (c == NULL)
			ck_assert_msg(strncmp(errbuf, "x.conf:", 7) == 0, "%s",
			    errbuf);
		config_free(c);
	}
	for (n = 0; n < 20000; n++) {
		memcpy(buf, example, sizeof(example));
		for (i = 0; i < 3; i++) {
			seed = seed * 1103515245 + 12345;
			buf[(seed >> 8) % (sizeof(example) - 1)] =
			    alphabet[(seed >> 20) % (sizeof(alphabet) - 1)];
		}
		c = parse(buf);
		if (c == NULL)
			ck_assert_msg(strncmp(errbuf, "x.conf:", 7) == 0, "%s",
			    errbuf);
		config_free(c);
	}
	/* A tiny error buffer truncates but does not overflow. */
	{
		char small[8];

		memset(small, 'Z', sizeof(small));
		ck_assert_ptr_null(config_parse_string("x.conf", "bogus\n",
		    small, 5));
		ck_assert_str_eq(small, "x.co");
		ck_assert_int_eq(small[5], 'Z');
		ck_assert_ptr_null(config_parse_string("x.conf", "bogus\n",
		    NULL, 0));
		ck_assert_ptr_null(config_parse_string("x.conf", NULL,
		    small, sizeof(small)));
	}
}
END_TEST

/* The operations directives: control socket, accounts, drain, logs. */
/* store-wait: replicas, an optional timeout, a shared store only. */
START_TEST(test_operations)
{
	struct config	*c;

	c = parse("listen 7777\n");
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_null(c->control_socket);
	ck_assert_uint_eq(c->control_mode, 0660);
	ck_assert_uint_eq(c->drain_timeout_ms, 30000);
	ck_assert_int_eq(c->log_json, 0);
	ck_assert_ptr_null(c->log_file);
	ck_assert_ptr_null(c->user);
	config_free(c);

	c = parse("control-socket /run/p/c.sock owner parley group adm "
	    "mode 0600\nuser parley\ngroup parley\ndrain-timeout 2m\n"
	    "log-format json\nlog-file /var/log/parleyd/parleyd.log\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(c->control_socket, "/run/p/c.sock");
	ck_assert_str_eq(c->control_owner, "parley");
	ck_assert_str_eq(c->control_group, "adm");
	ck_assert_uint_eq(c->control_mode, 0600);
	ck_assert_str_eq(c->user, "parley");
	ck_assert_str_eq(c->group, "parley");
	ck_assert_uint_eq(c->drain_timeout_ms, 120000);
	ck_assert_int_eq(c->log_json, 1);
	ck_assert_str_eq(c->log_file, "/var/log/parleyd/parleyd.log");
	/* log-file once overwrote the config's own path */
	ck_assert(c->path == NULL || strcmp(c->path,
	    "/var/log/parleyd/parleyd.log") != 0);
	config_free(c);

	c = parse("control-socket none\nlog-file syslog\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(c->control_socket, "none");
	ck_assert_str_eq(c->log_file, "syslog");
	config_free(c);

	expect_err("control-socket run/c.sock\n", "x.conf:1: control-socket: "
	    "expected an absolute path or none, got 'run/c.sock'");
	expect_err("control-socket /c.sock mode 0400\n", "x.conf:1: "
	    "control-socket: mode '0400' must be octal, at most 0777, with "
	    "owner read and write (0600)");
	expect_err("control-socket /c.sock mode 0689\n", "x.conf:1: "
	    "control-socket: mode '0689' must be octal, at most 0777, with "
	    "owner read and write (0600)");
	expect_err("control-socket /c.sock owner\n", "x.conf:1: usage: "
	    "control-socket PATH|none [owner USER] [group GROUP] [mode MODE]");
	expect_err("control-socket /c.sock colour red\n", "x.conf:1: "
	    "control-socket: unknown option 'colour' (expected owner, group "
	    "or mode)");
	expect_err("user -root\n", "x.conf:1: user: '-root' is not a user or "
	    "group name (1-32 of A-Z a-z 0-9 _ - .)");
	expect_err("group a/b\n", "x.conf:1: group: 'a/b' is not a user or "
	    "group name (1-32 of A-Z a-z 0-9 _ - .)");
	expect_err("drain-timeout 2h\n", "x.conf:1: drain-timeout: expected a "
	    "duration from 0ms to 1h (a number with ms, s, m, h or d), got "
	    "'2h'");
	expect_err("log-format yaml\n", "x.conf:1: log-format: expected text "
	    "or json, got 'yaml'");
	expect_err("log-file parleyd.log\n", "x.conf:1: log-file: expected "
	    "stderr, syslog or an absolute path, got 'parleyd.log'");
}
END_TEST

/* Tool approvals: tool-policy, autonomy levels, their timeouts, audit-log. */
START_TEST(test_man_page)
{
	const char *const	*d = config_directives();
	char			*man, want[128];
	int			 n = 0;

	man = slurp_src("man/parleyd.conf.5");
	ck_assert_msg(man != NULL, "man/parleyd.conf.5 not found");
	for (; *d != NULL; d++, n++) {
		snprintf(want, sizeof(want), "\n.It Ic %s ", *d);
		ck_assert_msg(strstr(man, want) != NULL,
		    "directive '%s' is not documented in parleyd.conf.5", *d);
	}
	ck_assert_int_eq(n, (int)NKEYWORDS);
	ck_assert_int_ge(n, 30);
	free(man);
}
END_TEST

/* index-root, the knowledge bounds, rag and the embedder block. */
/* The example file shows every directive and, uncommented, still parses. */
START_TEST(test_example_file)
{
	const char *const	*d;
	char			*ex, *out, *line, *save, want[128];
	struct config		*c;
	size_t			 i;

	ex = slurp_src("etc/parleyd.conf");
	ck_assert_msg(ex != NULL, "etc/parleyd.conf not found");
	c = parse(ex);
	ck_assert_msg(c != NULL, "%s", errbuf);
	check_defaults(c);
	config_free(c);

	for (d = config_directives(); *d != NULL; d++) {
		snprintf(want, sizeof(want), "#%s ", *d);
		if (strstr(ex, want) == NULL) {
			snprintf(want, sizeof(want), "#    %s ", *d);
			ck_assert_msg(strstr(ex, want) != NULL,
			    "directive '%s' missing from etc/parleyd.conf", *d);
		}
	}

	/* Uncomment "#directive ..." and "#    directive" / "#}" lines. */
	out = calloc(1, strlen(ex) + 1);
	ck_assert_ptr_nonnull(out);
	for (line = strtok_r(ex, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		const char *rest = line;

		if (line[0] == '#') {
			size_t	idx;
			char	w[64] = "";

			i = strspn(line + 1, " ");
			sscanf(line + 1 + i, "%63s", w);
			/* jwt-*: the example's key files are not here, and
			 * jwt-issuer needs a key (test_jwt_keys covers them);
			 * nor is index-root's directory (test_knowledge). */
			if ((i == 0 || i == 4) && (keyword_find(w, &idx) ||
			    strcmp(w, "}") == 0) && strncmp(w, "jwt-", 4) != 0 &&
			    strcmp(w, "index-root") != 0)
				rest = line + 1;
		}
		strcat(out, rest);
		strcat(out, "\n");
	}
	setenv("PARLEY_ADMIN_TOKEN", "env-secret", 1);
	c = parse(out);
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(c->pid_file, "/run/parleyd.pid");
	ck_assert_ptr_nonnull(config_provider(c, "demo"));
	ck_assert_str_eq(config_provider(c, "demo")->reply,
	    "Hello from Parley.");
	config_free(c);
	unsetenv("PARLEY_ADMIN_TOKEN");
	free(out);
	free(ex);
}
END_TEST

START_TEST(test_mcp_servers)
{
	struct config			*c;
	const struct cfg_mcp_server	*m;
	char				 text[600];
	int				 i;

	c = parse("mcp-server everything {\n"
	    "    url http://127.0.0.1:3001/mcp/\n"
	    "    header \"Authorization: Bearer abc\"\n"
	    "    header \"X-Trace:  1\"\n"
	    "    timeout 5s\n"
	    "    max-result 64k\n"
	    "}\n"
	    "mcp-server b-2 {\n url https://example.com/mcp }\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	m = TAILQ_FIRST(&c->mcp_servers);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->name, "everything");
	/* The endpoint is kept as written, trailing '/' included. */
	ck_assert_str_eq(m->url, "http://127.0.0.1:3001/mcp/");
	ck_assert_uint_eq(m->nheaders, 2);
	ck_assert_str_eq(m->headers[0], "Authorization: Bearer abc");
	ck_assert_str_eq(m->headers[1], "X-Trace:  1");
	ck_assert_uint_eq(m->timeout_ms, 5000);
	ck_assert_uint_eq(m->max_result, 64 * 1024);
	ck_assert_uint_eq(m->line, 1);
	m = TAILQ_NEXT(m, entry);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->name, "b-2");
	ck_assert_str_eq(m->url, "https://example.com/mcp");
	ck_assert_uint_eq(m->nheaders, 0);
	ck_assert_uint_eq(m->timeout_ms, 30000);
	ck_assert_uint_eq(m->max_result, 1024 * 1024);
	ck_assert_ptr_null(TAILQ_NEXT(m, entry));
	/* A provider's url still loses its trailing '/'. */
	config_free(c);
	c = parse("provider p {\n type openai\n model m\n"
	    " url http://h/v1/\n timeout 2s\n}\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_str_eq(config_provider(c, "p")->url, "http://h/v1");
	ck_assert_uint_eq(config_provider(c, "p")->timeout_ms, 2000);
	ck_assert(TAILQ_EMPTY(&c->mcp_servers));
	config_free(c);

	expect_err("mcp-server a {\n}\n",
	    "x.conf:1: mcp-server 'a': missing 'url'");
	expect_err("mcp-server a {\n url http://h/mcp\n",
	    "x.conf:1: mcp-server 'a': unterminated block (missing '}')");
	expect_err("mcp-server a__b {\n",
	    "x.conf:1: mcp-server: name must be 1 to 32 letters, digits, '_' "
	    "or '-' without \"__\", got 'a__b'");
	expect_err("mcp-server a.b {\n",
	    "x.conf:1: mcp-server: name must be 1 to 32 letters, digits, '_' "
	    "or '-' without \"__\", got 'a.b'");
	expect_err("mcp-server 012345678901234567890123456789012 {\n"
	    " url http://h }\n",
	    "x.conf:1: mcp-server: name must be 1 to 32 letters, digits, '_' "
	    "or '-' without \"__\", got '012345678901234567890123456789012'");
	expect_err("mcp-server a {\n url http://h }\nmcp-server a {\n"
	    " url http://h }\n",
	    "x.conf:3: mcp-server: duplicate server 'a' (first on line 1)");
	expect_err("mcp-server a {\n url http://h\n url http://i\n}\n",
	    "x.conf:3: url: duplicate directive (first on line 2)");
	expect_err("mcp-server a {\n url ftp://h\n}\n",
	    "x.conf:2: url: must start with http:// or https://");
	expect_err("mcp-server a {\n url http://h\n timeout 50ms\n}\n",
	    "x.conf:3: timeout: expected a duration from 100ms to 1h (a number "
	    "with ms, s, m, h or d), got '50ms'");
	expect_err("mcp-server a {\n url http://h\n header nocolon\n}\n",
	    "x.conf:3: header: expected \"NAME: VALUE\"");
	expect_err("mcp-server a {\n url http://h\n header \": v\"\n}\n",
	    "x.conf:3: header: expected \"NAME: VALUE\"");
	expect_err("mcp-server a {\n url http://h\n header \"A B: v\"\n}\n",
	    "x.conf:3: header: the name must be an HTTP token (letters, "
	    "digits, '-', ...)");
	expect_err("mcp-server a {\n url http://h\n header \"x: a\\nb\"\n}\n",
	    "x.conf:3: header: control character in the value");
	expect_err("mcp-server a {\n url http://h\n"
	    " header \"mcp-session-id: 1\"\n}\n",
	    "x.conf:3: header: mcp-session-id is set by parleyd itself");
	expect_err("mcp-server a {\n url http://h\n header \"Accept: */*\"\n}\n",
	    "x.conf:3: header: Accept is set by parleyd itself");
	expect_err("mcp-server a {\n url http://h\n type script\n}\n",
	    "x.conf:3: type: not allowed inside an mcp-server block");
	expect_err("mcp-server a {\n listen 1\n}\n",
	    "x.conf:2: listen: not allowed inside an mcp-server block");
	expect_err("provider p {\n type script\n reply r\n"
	    " header \"a: b\"\n}\n",
	    "x.conf:4: header: not allowed inside a provider block");
	expect_err("provider p {\n mcp-server a {\n",
	    "x.conf:2: mcp-server: not allowed inside a provider block");
	expect_err("mcp-server a {\n mcp-server b {\n",
	    "x.conf:2: mcp-server: not allowed inside an mcp-server block");
	expect_err("header \"a: b\"\n",
	    "x.conf:1: header: only allowed inside an mcp-server block");
	expect_err("url http://h\n",
	    "x.conf:1: url: only allowed inside a provider block");
	expect_err("mcp-server a\n",
	    "x.conf:1: mcp-server: expected 'mcp-server NAME {' with the '{' "
	    "on the same line");

	/* At most 32 headers. */
	{
		char	*big = calloc(1, 4096);
		size_t	 off;

		ck_assert_ptr_nonnull(big);
		off = (size_t)snprintf(big, 4096, "mcp-server a {\n url http://h\n");
		for (i = 0; i < 33; i++)
			off += (size_t)snprintf(big + off, 4096 - off,
			    " header \"x-%d: v\"\n", i);
		snprintf(big + off, 4096 - off, "}\n");
		expect_err(big, "x.conf:35: header: more than 32 headers");
		free(big);
	}
	/* A secret in a bad header line is not echoed. */
	snprintf(text, sizeof(text), "mcp-server a {\n url http://h\n"
	    " header \"Authorization Bearer s3cr3t\"\n}\n");
	ck_assert_ptr_null(parse(text));
	ck_assert_ptr_null(strstr(errbuf, "s3cr3t"));
}
END_TEST

static Suite *
config_suite(void)
{
	Suite	*s = suite_create("config");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_example);
	tcase_add_test(tc, test_mcp_servers);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_load);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_long_line);
	tcase_add_test(tc, test_durations_sizes);
	tcase_add_test(tc, test_quoting);
	tcase_add_test(tc, test_blocks);
	tcase_add_test(tc, test_decimal);
	tcase_add_test(tc, test_llm_providers);
	tcase_add_test(tc, test_robust);
	tcase_add_test(tc, test_operations);
	tcase_add_test(tc, test_man_page);
	tcase_add_test(tc, test_example_file);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(config_suite());
}
