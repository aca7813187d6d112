/* Unit tests for the tool-call approval policy (src/policy.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/policy.c"
#include "check_main.h"

#define H_UNSET	POLICY_HINT_UNSET
#define H_NO	POLICY_HINT_FALSE
#define H_YES	POLICY_HINT_TRUE

/* Rules from "GLOB WORD" pairs, in order; words as tool-policy takes them. */
static struct policy_rule	 rulebuf[16];
static struct policy_rules	 rules;

static struct policy_rules *
mkrules(const char *const *pairs)
{
	size_t	i;

	TAILQ_INIT(&rules);
	for (i = 0; pairs[2 * i] != NULL; i++) {
		ck_assert_uint_lt(i, sizeof(rulebuf) / sizeof(rulebuf[0]));
		memset(&rulebuf[i], 0, sizeof(rulebuf[i]));
		rulebuf[i].glob = (char *)pairs[2 * i];
		rulebuf[i].line = (unsigned)i + 1;
		ck_assert_int_eq(policy_verdict_parse(pairs[2 * i + 1],
		    &rulebuf[i].verdict, &rulebuf[i].risk), 0);
		TAILQ_INSERT_TAIL(&rules, &rulebuf[i], entry);
	}
	return &rules;
}

START_TEST(test_names)
{
	static const char *const bad[] = { "", "LOW", "Low", "low ", " low",
	    "lo", "lowest", "severe", "unknown", "allow", "deny" };
	static const char *const badlvl[] = { "", "full_auto", "Supervised",
	    "FULL-AUTO", "FULLAUTO", "MANUAL ", "AUTO", "low" };
	enum policy_risk	 r, want;
	enum policy_autonomy	 a;
	size_t			 i;

	for (want = POLICY_LOW; want <= POLICY_CRITICAL; want++) {
		ck_assert_ptr_nonnull(policy_risk_name(want));
		ck_assert_int_eq(policy_risk_parse(policy_risk_name(want), &r),
		    0);
		ck_assert_int_eq(r, want);
	}
	ck_assert_str_eq(policy_risk_name(POLICY_LOW), "low");
	ck_assert_str_eq(policy_risk_name(POLICY_MEDIUM), "medium");
	ck_assert_str_eq(policy_risk_name(POLICY_HIGH), "high");
	ck_assert_str_eq(policy_risk_name(POLICY_CRITICAL), "critical");
	ck_assert_ptr_null(policy_risk_name((enum policy_risk)4));
	ck_assert_ptr_null(policy_risk_name((enum policy_risk)-1));
	r = POLICY_HIGH;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(policy_risk_parse(bad[i], &r) == -1,
		    "risk '%s' parsed", bad[i]);
		ck_assert_int_eq(r, POLICY_HIGH);	/* untouched */
	}
	ck_assert_int_eq(policy_risk_parse(NULL, &r), -1);

	ck_assert_str_eq(policy_autonomy_name(POLICY_FULL_AUTO), "FULL_AUTO");
	ck_assert_str_eq(policy_autonomy_name(POLICY_SUPERVISED),
	    "SUPERVISED");
	ck_assert_str_eq(policy_autonomy_name(POLICY_CAUTIOUS), "CAUTIOUS");
	ck_assert_str_eq(policy_autonomy_name(POLICY_MANUAL), "MANUAL");
	ck_assert_ptr_null(policy_autonomy_name((enum policy_autonomy)4));
	for (a = POLICY_FULL_AUTO; a <= POLICY_MANUAL; a++) {
		enum policy_autonomy	got;

		ck_assert_int_eq(policy_autonomy_parse(policy_autonomy_name(a),
		    &got), 0);
		ck_assert_int_eq(got, a);
	}
	a = POLICY_CAUTIOUS;
	for (i = 0; i < sizeof(badlvl) / sizeof(badlvl[0]); i++) {
		ck_assert_msg(policy_autonomy_parse(badlvl[i], &a) == -1,
		    "level '%s' parsed", badlvl[i]);
		ck_assert_int_eq(a, POLICY_CAUTIOUS);
	}
	ck_assert_int_eq(policy_autonomy_parse(NULL, &a), -1);
}
END_TEST

START_TEST(test_verdict_parse)
{
	static const char *const bad[] = { "", "ALLOW", "Deny", "none",
	    "ask", "run", "HIGH", "allowed" };
	enum policy_verdict	v;
	enum policy_risk	r = POLICY_LOW;
	size_t			i;

	ck_assert_int_eq(policy_verdict_parse("allow", &v, &r), 0);
	ck_assert_int_eq(v, POLICY_RULE_ALLOW);
	ck_assert_int_eq(policy_verdict_parse("deny", &v, &r), 0);
	ck_assert_int_eq(v, POLICY_RULE_DENY);
	ck_assert_int_eq(policy_verdict_parse("critical", &v, &r), 0);
	ck_assert_int_eq(v, POLICY_RULE_RISK);
	ck_assert_int_eq(r, POLICY_CRITICAL);
	ck_assert_int_eq(policy_verdict_parse("medium", &v, &r), 0);
	ck_assert_int_eq(v, POLICY_RULE_RISK);
	ck_assert_int_eq(r, POLICY_MEDIUM);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(policy_verdict_parse(bad[i], &v, &r) == -1,
		    "verdict '%s' parsed", bad[i]);
	ck_assert_int_eq(policy_verdict_parse(NULL, &v, &r), -1);
}
END_TEST

START_TEST(test_autonomy_cmp)
{
	enum policy_autonomy	a, b;

	ck_assert_int_gt(policy_autonomy_cmp(POLICY_FULL_AUTO,
	    POLICY_SUPERVISED), 0);
	ck_assert_int_gt(policy_autonomy_cmp(POLICY_SUPERVISED,
	    POLICY_CAUTIOUS), 0);
	ck_assert_int_gt(policy_autonomy_cmp(POLICY_CAUTIOUS, POLICY_MANUAL),
	    0);
	ck_assert_int_lt(policy_autonomy_cmp(POLICY_MANUAL, POLICY_FULL_AUTO),
	    0);
	for (a = POLICY_FULL_AUTO; a <= POLICY_MANUAL; a++)
		for (b = POLICY_FULL_AUTO; b <= POLICY_MANUAL; b++) {
			int	c = policy_autonomy_cmp(a, b);

			ck_assert_int_eq(c == 0, a == b);
			/* Antisymmetric. */
			ck_assert_int_eq(c > 0, policy_autonomy_cmp(b, a) < 0);
			/* No more is asked than at a less autonomous level. */
			if (c > 0) {
				enum policy_risk r;

				for (r = POLICY_LOW; r <= POLICY_CRITICAL; r++)
					ck_assert(!policy_asks(a, r) ||
					    policy_asks(b, r));
			}
		}
}
END_TEST

/* Every level against every risk, directly and through a rule's risk. */
START_TEST(test_matrix)
{
	static const int asks[4][4] = {
		/*			low medium high critical */
		[POLICY_FULL_AUTO] =	{ 0, 0, 0, 1 },
		[POLICY_SUPERVISED] =	{ 0, 0, 1, 1 },
		[POLICY_CAUTIOUS] =	{ 0, 1, 1, 1 },
		[POLICY_MANUAL] =	{ 1, 1, 1, 1 },
	};
	/* Annotations that say low, so only the rule can raise it. */
	struct policy_annotations an = { .read_only = H_YES,
	    .open_world = H_NO };
	enum policy_autonomy	a;
	enum policy_risk	r;
	struct policy_decision	d;
	const char		*pairs[3] = { "srv__tool", NULL, NULL };

	for (a = POLICY_FULL_AUTO; a <= POLICY_MANUAL; a++)
		for (r = POLICY_LOW; r <= POLICY_CRITICAL; r++) {
			ck_assert_msg(policy_asks(a, r) == asks[a][r],
			    "%s %s", policy_autonomy_name(a),
			    policy_risk_name(r));
			pairs[1] = policy_risk_name(r);
			d = policy_decide(mkrules(pairs), "srv__tool", &an, a);
			ck_assert_int_eq(d.action, asks[a][r] ? POLICY_ASK :
			    POLICY_RUN);
			ck_assert_int_eq(d.risk, r);
			ck_assert_ptr_eq(d.rule, &rulebuf[0]);
			/* allow runs and deny refuses at every level. */
			pairs[1] = "allow";
			d = policy_decide(mkrules(pairs), "srv__tool", &an, a);
			ck_assert_int_eq(d.action, POLICY_RUN);
			ck_assert_int_eq(d.risk, POLICY_LOW);
			pairs[1] = "deny";
			d = policy_decide(mkrules(pairs), "srv__tool", &an, a);
			ck_assert_int_eq(d.action, POLICY_DENY);
		}
	ck_assert_int_eq(policy_asks((enum policy_autonomy)9, POLICY_LOW), 1);
}
END_TEST

START_TEST(test_annotations)
{
	static const struct {
		struct policy_annotations	an;
		enum policy_risk		risk;
	} t[] = {
		/* read_only, destructive, idempotent, open_world */
		{ { H_UNSET, H_UNSET, H_UNSET, H_UNSET }, POLICY_HIGH },
		{ { H_YES, H_UNSET, H_UNSET, H_UNSET }, POLICY_LOW },
		/* destructiveHint means nothing for a read-only tool. */
		{ { H_YES, H_YES, H_UNSET, H_UNSET }, POLICY_LOW },
		{ { H_NO, H_UNSET, H_UNSET, H_UNSET }, POLICY_HIGH },
		{ { H_NO, H_NO, H_UNSET, H_UNSET }, POLICY_MEDIUM },
		{ { H_UNSET, H_NO, H_UNSET, H_UNSET }, POLICY_MEDIUM },
		{ { H_NO, H_YES, H_UNSET, H_UNSET }, POLICY_HIGH },
		{ { H_NO, H_YES, H_YES, H_UNSET }, POLICY_HIGH },
		{ { H_NO, H_NO, H_YES, H_NO }, POLICY_MEDIUM },
		/* Only an openWorldHint that was sent raises, by one. */
		{ { H_YES, H_UNSET, H_UNSET, H_YES }, POLICY_MEDIUM },
		{ { H_YES, H_NO, H_YES, H_NO }, POLICY_LOW },
		{ { H_UNSET, H_NO, H_UNSET, H_YES }, POLICY_HIGH },
		{ { H_UNSET, H_UNSET, H_UNSET, H_YES }, POLICY_CRITICAL },
		{ { H_NO, H_YES, H_NO, H_YES }, POLICY_CRITICAL },
		{ { H_NO, H_YES, H_NO, H_NO }, POLICY_HIGH },
	};
	struct policy_decision	d;
	size_t			i;

	ck_assert_int_eq(policy_risk_of(NULL), POLICY_HIGH);
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ck_assert_msg(policy_risk_of(&t[i].an) == t[i].risk,
		    "case %zu: got %s, want %s", i,
		    policy_risk_name(policy_risk_of(&t[i].an)),
		    policy_risk_name(t[i].risk));
		/* With no rule, the annotations decide. */
		d = policy_decide(NULL, "srv__tool", &t[i].an,
		    POLICY_SUPERVISED);
		ck_assert_int_eq(d.risk, t[i].risk);
		ck_assert_ptr_null(d.rule);
		ck_assert_int_eq(d.action, t[i].risk >= POLICY_HIGH ?
		    POLICY_ASK : POLICY_RUN);
	}
	/* No annotations: high, asked when SUPERVISED, run at FULL_AUTO. */
	d = policy_decide(NULL, "srv__tool", NULL, POLICY_SUPERVISED);
	ck_assert_int_eq(d.risk, POLICY_HIGH);
	ck_assert_int_eq(d.action, POLICY_ASK);
	d = policy_decide(NULL, "srv__tool", NULL, POLICY_FULL_AUTO);
	ck_assert_int_eq(d.action, POLICY_RUN);
}
END_TEST

START_TEST(test_rules)
{
	static const char *const ordered[] = {
		"fs__*", "deny",
		"fs__read", "allow",	/* never reached for fs__read */
		"*__delete_*", "critical",
		"web__search", "allow",
		"*", "medium",
		NULL, NULL
	};
	static const char *const none[] = { NULL, NULL };
	struct policy_annotations crit = { .destructive = H_YES,
	    .open_world = H_YES };
	struct policy_annotations low = { .read_only = H_YES };
	struct policy_rules	*rs;
	struct policy_decision	 d;

	rs = mkrules(ordered);
	d = policy_decide(rs, "fs__read", &low, POLICY_FULL_AUTO);
	ck_assert_int_eq(d.action, POLICY_DENY);
	ck_assert_ptr_eq(d.rule, &rulebuf[0]);
	ck_assert_uint_eq(d.rule->line, 1);
	ck_assert_int_eq(d.risk, POLICY_LOW);	/* the annotations' */
	/* A glob on the full name: "*__delete_*" needs the "__". */
	d = policy_decide(rs, "db__delete_row", &low, POLICY_FULL_AUTO);
	ck_assert_int_eq(d.action, POLICY_ASK);
	ck_assert_int_eq(d.risk, POLICY_CRITICAL);
	ck_assert_ptr_eq(d.rule, &rulebuf[2]);
	d = policy_decide(rs, "db_delete_row", &low, POLICY_FULL_AUTO);
	ck_assert_ptr_eq(d.rule, &rulebuf[4]);
	ck_assert_int_eq(d.risk, POLICY_MEDIUM);
	ck_assert_int_eq(d.action, POLICY_RUN);
	d = policy_decide(rs, "db_delete_row", &low, POLICY_CAUTIOUS);
	ck_assert_int_eq(d.action, POLICY_ASK);
	/* allow beats critical annotations at every level. */
	d = policy_decide(rs, "web__search", &crit, POLICY_MANUAL);
	ck_assert_int_eq(d.action, POLICY_RUN);
	ck_assert_int_eq(d.risk, POLICY_CRITICAL);
	ck_assert_ptr_eq(d.rule, &rulebuf[3]);
	/* A rule's risk replaces the annotations', lower as well. */
	d = policy_decide(rs, "web__fetch", &crit, POLICY_FULL_AUTO);
	ck_assert_int_eq(d.risk, POLICY_MEDIUM);
	ck_assert_int_eq(d.action, POLICY_RUN);
	/* The whole name must match: no prefix or substring matches. */
	rs = mkrules((const char *const []){ "fs", "deny", "fs__re", "deny",
	    "s__read", "deny", NULL, NULL });
	d = policy_decide(rs, "fs__read", &low, POLICY_MANUAL);
	ck_assert_ptr_null(d.rule);
	ck_assert_int_eq(d.action, POLICY_ASK);
	/* Character classes and '?'. */
	rs = mkrules((const char *const []){ "fs__[rw]*", "allow",
	    "?s__*", "deny", NULL, NULL });
	ck_assert_int_eq(policy_decide(rs, "fs__write", &crit,
	    POLICY_SUPERVISED).action, POLICY_RUN);
	ck_assert_int_eq(policy_decide(rs, "fs__list", &low,
	    POLICY_FULL_AUTO).action, POLICY_DENY);
	ck_assert_int_eq(policy_decide(rs, "xfs__list", &low,
	    POLICY_FULL_AUTO).action, POLICY_RUN);
	/* Names are case-sensitive. */
	ck_assert_int_eq(policy_decide(rs, "FS__write", &crit,
	    POLICY_SUPERVISED).action, POLICY_ASK);
	/* No rules, an empty list, no name. */
	rs = mkrules(none);
	d = policy_decide(rs, "fs__read", &crit, POLICY_FULL_AUTO);
	ck_assert_ptr_null(d.rule);
	ck_assert_int_eq(d.action, POLICY_ASK);
	rs = mkrules((const char *const []){ "*", "deny", NULL, NULL });
	d = policy_decide(rs, NULL, &low, POLICY_FULL_AUTO);
	ck_assert_ptr_null(d.rule);
	ck_assert_int_eq(d.action, POLICY_RUN);
}
END_TEST

static Suite *
policy_suite(void)
{
	Suite	*s = suite_create("policy");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_verdict_parse);
	tcase_add_test(tc, test_autonomy_cmp);
	tcase_add_test(tc, test_matrix);
	tcase_add_test(tc, test_annotations);
	tcase_add_test(tc, test_rules);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(policy_suite());
}
