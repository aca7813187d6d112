/*
 * Unit tests for the parleyd.conf parser (src/config*.c): the keywords of
 * whole features (store-wait, approvals, knowledge).  Split from
 * test_config.c.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/config.c"
#include "../../src/config_access.c"
#include "../../src/config_block.c"
#include "check_main.h"
#include "config_fixture.h"

START_TEST(test_store_wait)
{
	struct config	*c;

	c = parse("listen 7777\n");
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(c->store_wait, 0);
	ck_assert_uint_eq(c->store_wait_ms, 1000);
	config_free(c);
	c = parse("store redis://127.0.0.1:6379\nstore-wait 1\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_uint_eq(c->store_wait, 1);
	ck_assert_uint_eq(c->store_wait_ms, 1000);
	config_free(c);
	/* The store may come after it. */
	c = parse("store-wait 2 250ms\nstore sentinel://h:26379/m\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_uint_eq(c->store_wait, 2);
	ck_assert_uint_eq(c->store_wait_ms, 250);
	config_free(c);
	c = parse("store-wait 0\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_uint_eq(c->store_wait, 0);
	config_free(c);
	expect_err("store redis://h:1\nstore-wait 17\n", "x.conf:2: "
	    "store-wait: expected a number of replicas from 0 (off) to 16, "
	    "got '17'");
	expect_err("store redis://h:1\nstore-wait one\n", "x.conf:2: "
	    "store-wait: expected a number of replicas from 0 (off) to 16, "
	    "got 'one'");
	expect_err("store redis://h:1\nstore-wait 1 5s\n", "x.conf:2: "
	    "store-wait: expected a timeout from 10ms to 4000ms, got '5s'");
	expect_err("store redis://h:1\nstore-wait 1 5ms\n", "x.conf:2: "
	    "store-wait: expected a timeout from 10ms to 4000ms, got '5ms'");
	expect_err("store redis://h:1\nstore-wait 1 1s 2\n", "x.conf:2: "
	    "store-wait: wrong number of arguments; usage: store-wait "
	    "REPLICAS [TIMEOUT]");
	expect_err("listen 7777\nstore-wait 1\n", "x.conf:2: store-wait: "
	    "only a shared store (redis:// or sentinel://) has replicas to "
	    "wait for; remove the line or set store-wait 0");
}
END_TEST

START_TEST(test_approvals)
{
	static const struct {
		const char		*glob;
		enum policy_verdict	 verdict;
		enum policy_risk	 risk;
		unsigned		 line;
	} want[] = {
		{ "fs__*", POLICY_RULE_DENY, 0, 1 },
		{ "*__delete_*", POLICY_RULE_RISK, POLICY_CRITICAL, 2 },
		{ "web__search", POLICY_RULE_ALLOW, 0, 4 },
		{ "*", POLICY_RULE_RISK, POLICY_LOW, 6 },
	};
	struct config			*c;
	const struct policy_rule	*r;
	struct policy_decision		 d;
	size_t				 i;

	c = parse("tool-policy fs__* deny\n"
	    "tool-policy \"*__delete_*\" critical\n"
	    "autonomy CAUTIOUS\n"
	    "tool-policy web__search allow\n"
	    "max-autonomy SUPERVISED\n"
	    "tool-policy * low\n"
	    "approval-timeout 2h\n"
	    "client-tool-timeout 90s\n"
	    "audit-log /var/log/parleyd/audit.jsonl\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_int_eq(c->autonomy, POLICY_CAUTIOUS);
	ck_assert_int_eq(c->max_autonomy, POLICY_SUPERVISED);
	ck_assert_uint_eq(c->approval_timeout_ms, 7200000);
	ck_assert_uint_eq(c->client_tool_timeout_ms, 90000);
	ck_assert_str_eq(c->audit_log, "/var/log/parleyd/audit.jsonl");
	/* In file order, with their lines. */
	i = 0;
	TAILQ_FOREACH(r, &c->tool_policies, entry) {
		ck_assert_uint_lt(i, sizeof(want) / sizeof(want[0]));
		ck_assert_str_eq(r->glob, want[i].glob);
		ck_assert_int_eq(r->verdict, want[i].verdict);
		if (r->verdict == POLICY_RULE_RISK)
			ck_assert_int_eq(r->risk, want[i].risk);
		ck_assert_uint_eq(r->line, want[i].line);
		i++;
	}
	ck_assert_uint_eq(i, sizeof(want) / sizeof(want[0]));
	/* The list is what policy_decide takes. */
	d = policy_decide(&c->tool_policies, "fs__delete_file", NULL,
	    c->autonomy);
	ck_assert_int_eq(d.action, POLICY_DENY);
	ck_assert_uint_eq(d.rule->line, 1);
	d = policy_decide(&c->tool_policies, "db__delete_row", NULL,
	    POLICY_FULL_AUTO);
	ck_assert_int_eq(d.action, POLICY_ASK);
	config_free(c);

	c = parse("audit-log none\nautonomy MANUAL\nmax-autonomy MANUAL\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_ptr_null(c->audit_log);
	ck_assert_int_eq(c->autonomy, POLICY_MANUAL);
	config_free(c);
	/* A cap at the default level, or above it, is fine. */
	c = parse("max-autonomy SUPERVISED\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	config_free(c);

	expect_err("tool-policy fs__* severe\n", "x.conf:1: tool-policy: "
	    "'severe' must be one of low, medium, high, critical, allow or "
	    "deny");
	expect_err("tool-policy fs__* HIGH\n", "x.conf:1: tool-policy: "
	    "'HIGH' must be one of low, medium, high, critical, allow or "
	    "deny");
	expect_err("tool-policy fs__*\n", "x.conf:1: tool-policy: wrong "
	    "number of arguments; usage: tool-policy GLOB "
	    "low|medium|high|critical|allow|deny");
	expect_err("tool-policy a b c\n", "x.conf:1: tool-policy: wrong "
	    "number of arguments; usage: tool-policy GLOB "
	    "low|medium|high|critical|allow|deny");
	expect_err("tool-policy \"fs *\" deny\n", "x.conf:1: tool-policy: "
	    "the pattern must be 1 to 256 printable characters without "
	    "blanks");
	expect_err("tool-policy \"\" deny\n", "x.conf:1: tool-policy: "
	    "the pattern must be 1 to 256 printable characters without "
	    "blanks");
	expect_err("tool-policy fs__* deny\n\ntool-policy fs__* allow\n",
	    "x.conf:3: tool-policy fs__*: duplicate pattern (first on line 1, "
	    "which decides)");
	expect_err("autonomy full_auto\n", "x.conf:1: autonomy: expected "
	    "FULL_AUTO, SUPERVISED, CAUTIOUS or MANUAL, got 'full_auto'");
	expect_err("max-autonomy NONE\n", "x.conf:1: max-autonomy: expected "
	    "FULL_AUTO, SUPERVISED, CAUTIOUS or MANUAL, got 'NONE'");
	expect_err("autonomy MANUAL\nautonomy MANUAL\n", "x.conf:2: "
	    "autonomy: duplicate directive (first on line 1)");
	/* More autonomous than the cap: both lines named, either order. */
	expect_err("max-autonomy CAUTIOUS\nautonomy SUPERVISED\n",
	    "x.conf:2: autonomy: SUPERVISED is more autonomous than "
	    "max-autonomy CAUTIOUS (line 1); lower autonomy or raise "
	    "max-autonomy");
	expect_err("autonomy FULL_AUTO\n# c\nmax-autonomy MANUAL\n",
	    "x.conf:1: autonomy: FULL_AUTO is more autonomous than "
	    "max-autonomy MANUAL (line 3); lower autonomy or raise "
	    "max-autonomy");
	/* A cap below the default level names what to add. */
	expect_err("\nmax-autonomy CAUTIOUS\n", "x.conf:2: max-autonomy: "
	    "CAUTIOUS is less autonomous than the default autonomy "
	    "SUPERVISED; add an autonomy line no more autonomous than "
	    "CAUTIOUS");
	expect_err("approval-timeout 500ms\n", "x.conf:1: approval-timeout: "
	    "expected a duration from 1s to 30d (a number with ms, s, m, h "
	    "or d), got '500ms'");
	expect_err("client-tool-timeout 31d\n", "x.conf:1: "
	    "client-tool-timeout: expected a duration from 100ms to 30d (a "
	    "number with ms, s, m, h or d), got '31d'");
	expect_err("audit-log audit.jsonl\n", "x.conf:1: audit-log: expected "
	    "none or an absolute path, got 'audit.jsonl'");
	expect_err("audit-log /a\naudit-log none\n", "x.conf:2: audit-log: "
	    "duplicate directive (first on line 1)");
	expect_err("provider p {\n tool-policy * low\n", "x.conf:2: "
	    "tool-policy: not allowed inside a provider block");
}
END_TEST

START_TEST(test_knowledge)
{
	struct config		*c;
	char			 text[1024], dir[] = "/tmp/pk-XXXXXX", *rp;
	char			 want[2048];
	const struct cfg_name	*n;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	rp = realpath(dir, NULL);
	ck_assert_ptr_nonnull(rp);
	c = parse("");
	ck_assert_ptr_nonnull(c);
	ck_assert(TAILQ_EMPTY(&c->index_roots));
	ck_assert_int_eq(c->rag, 1);
	ck_assert_uint_eq(c->rag_top_k, 5);
	ck_assert_uint_eq(c->rag_budget, 2000);
	ck_assert_uint_eq(c->kb_max_documents, 1000);
	ck_assert_uint_eq(c->kb_max_bytes, 16u << 20);
	ck_assert_uint_eq(c->index_max_file, 1u << 20);
	ck_assert_ptr_null(c->embedder);
	ck_assert_int_eq(c->knowledge_tools, 1);
	ck_assert_uint_eq(c->knowledge_max_entities, 100000);
	config_free(c);

	c = parse("knowledge-tools off\nknowledge-max-entities 10000000\n");
	ck_assert_msg(c != NULL, "%s", errbuf);
	ck_assert_int_eq(c->knowledge_tools, 0);
	ck_assert_uint_eq(c->knowledge_max_entities, 10000000);
	config_free(c);
	expect_err("knowledge-max-entities 0\n", "x.conf:1: "
	    "knowledge-max-entities: expected a number from 1 to 10000000, "
	    "got '0'");
	expect_err("knowledge-max-entities 10000001\n", "x.conf:1: "
	    "knowledge-max-entities: expected a number from 1 to 10000000, "
	    "got '10000001'");
	expect_err("knowledge-tools yes\n", "x.conf:1: knowledge-tools: "
	    "expected on or off, got 'yes'");

	snprintf(text, sizeof(text), "index-root %s/.\nindex-watch yes\n"
	    "rag off\nrag-top-k 3\nrag-budget 500\nkb-max-bytes 1m\n"
	    "embedder e {\n    type openai\n    url http://127.0.0.1:9/v1/\n"
	    "    model m\n    api-key-env K\n    timeout 5s\n}\n", dir);
	c = parse(text);
	ck_assert_msg(c != NULL, "%s", errbuf);
	n = TAILQ_FIRST(&c->index_roots);
	ck_assert_ptr_nonnull(n);
	ck_assert_str_eq(n->name, rp);
	ck_assert_int_eq(c->index_watch, 1);
	ck_assert_int_eq(c->rag, 0);
	ck_assert_uint_eq(c->rag_top_k, 3);
	ck_assert_uint_eq(c->rag_budget, 500);
	ck_assert_uint_eq(c->kb_max_bytes, 1u << 20);
	ck_assert_ptr_nonnull(c->embedder);
	ck_assert_str_eq(c->embedder->url, "http://127.0.0.1:9/v1");
	ck_assert_str_eq(c->embedder->model, "m");
	ck_assert_uint_eq(c->embedder->timeout_ms, 5000);
	/* not a provider a session could name */
	ck_assert_ptr_null(config_provider(c, "e"));
	config_free(c);

	expect_err("index-root rel/dir\n", "x.conf:1: index-root: must be "
	    "an absolute path, got 'rel/dir'");
	expect_err("index-root /nonexistent-pk\n", "x.conf:1: index-root: "
	    "/nonexistent-pk: No such file or directory");
	expect_err("index-root /etc/passwd\n", "x.conf:1: index-root: "
	    "/etc/passwd: not a directory");
	snprintf(text, sizeof(text), "index-root %s\nindex-root %s/\n", dir,
	    dir);
	c = parse(text);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(errbuf, "is already a root (line 1)") != NULL,
	    "%s", errbuf);
	/* an index-root holding the state-dir, named later in the file */
	snprintf(text, sizeof(text), "index-root %s\nstate-dir %s/st\n", dir,
	    dir);
	c = parse(text);
	ck_assert_ptr_null(c);
	snprintf(want, sizeof(want), "x.conf:1: index-root %s contains "
	    "state-dir %s/st: sessions' documents would be indexed; name a "
	    "directory beside it", rp, rp);
	ck_assert_msg(strstr(errbuf, want) != NULL, "%s", errbuf);
	snprintf(text, sizeof(text), "state-dir %s\nindex-root %s\n", dir,
	    dir);
	c = parse(text);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(errbuf, "contains state-dir") != NULL, "%s",
	    errbuf);
	/* beside it is fine */
	snprintf(text, sizeof(text), "index-root %s\nstate-dir %s-st\n", dir,
	    dir);
	c = parse(text);
	ck_assert_msg(c != NULL, "%s", errbuf);
	config_free(c);
	expect_err("rag yes\n", "x.conf:1: rag: expected on or off, got "
	    "'yes'");
	expect_err("rag-top-k 0\n", "x.conf:1: rag-top-k: expected a number "
	    "from 1 to 100, got '0'");
	expect_err("embedder e {\n    type anthropic\n    model m\n}\n",
	    "x.conf:1: embedder 'e': type must be openai (the "
	    "OpenAI-compatible /v1/embeddings that OpenAI, llama.cpp, Ollama "
	    "and vLLM serve)");
	expect_err("embedder e {\n    type openai\n}\n",
	    "x.conf:1: embedder 'e': model is required for type openai");
	expect_err("embedder e {\n    type openai\n    max-tokens 5\n}\n",
	    "x.conf:3: max-tokens: not used by an embedder (it takes type, "
	    "url, api-key-env, model and timeout)");
	expect_err("embedder e {\n    type openai\n    model m\n}\n"
	    "embedder f {\n    type openai\n    model m\n}\n",
	    "x.conf:5: embedder: duplicate directive (first on line 1)");
	expect_err("embedder e {\n    type openai\n",
	    "x.conf:1: embedder 'e': unterminated block (missing '}')");
	rmdir(dir);
	free(rp);
}
END_TEST

static Suite *
config_features_suite(void)
{
	Suite	*s = suite_create("config_features");
	TCase	*tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_wait);
	tcase_add_test(tc, test_approvals);
	tcase_add_test(tc, test_knowledge);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(config_features_suite());
}
