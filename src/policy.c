/*
 * Tool-call risk and approval policy: see parley/policy.h and the
 * "TOOL APPROVALS" section of parleyd.conf(5).
 */

#include <fnmatch.h>
#include <stddef.h>
#include <string.h>

#include "parley/policy.h"

static const char *const risk_names[] = {
	"low", "medium", "high", "critical"
};

static const char *const autonomy_names[] = {
	"FULL_AUTO", "SUPERVISED", "CAUTIOUS", "MANUAL"
};

#define NRISKS		(sizeof(risk_names) / sizeof(risk_names[0]))
#define NAUTONOMY	(sizeof(autonomy_names) / sizeof(autonomy_names[0]))

/* The index of s in names[0..n), or -1. */
static int
name_index(const char *const *names, size_t n, const char *s)
{
	size_t	i;

	if (s == NULL)
		return -1;
	for (i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return (int)i;
	return -1;
}

const char *
policy_risk_name(enum policy_risk r)
{
	return (size_t)r < NRISKS ? risk_names[r] : NULL;
}

int
policy_risk_parse(const char *s, enum policy_risk *r)
{
	int	i;

	if ((i = name_index(risk_names, NRISKS, s)) == -1)
		return -1;
	*r = (enum policy_risk)i;
	return 0;
}

const char *
policy_autonomy_name(enum policy_autonomy a)
{
	return (size_t)a < NAUTONOMY ? autonomy_names[a] : NULL;
}

int
policy_autonomy_parse(const char *s, enum policy_autonomy *a)
{
	int	i;

	if ((i = name_index(autonomy_names, NAUTONOMY, s)) == -1)
		return -1;
	*a = (enum policy_autonomy)i;
	return 0;
}

int
policy_autonomy_cmp(enum policy_autonomy a, enum policy_autonomy b)
{
	/* The enum runs from the most autonomous level to the least. */
	return (int)b - (int)a;
}

int
policy_verdict_parse(const char *s, enum policy_verdict *v,
    enum policy_risk *r)
{
	if (s != NULL && strcmp(s, "allow") == 0)
		*v = POLICY_RULE_ALLOW;
	else if (s != NULL && strcmp(s, "deny") == 0)
		*v = POLICY_RULE_DENY;
	else if (policy_risk_parse(s, r) == 0)
		*v = POLICY_RULE_RISK;
	else
		return -1;
	return 0;
}

/*
 * The MCP specification (2025-06-18) gives readOnlyHint false,
 * destructiveHint true and openWorldHint true as defaults.  Only an
 * openWorldHint the server actually sent raises the risk: with the
 * default applied too, every tool without annotations would be critical
 * and asked about even at FULL_AUTO, making that level meaningless for
 * the many servers that send none.
 */
enum policy_risk
policy_risk_of(const struct policy_annotations *an)
{
	enum policy_risk	r;

	if (an == NULL)
		return POLICY_HIGH;
	if (an->read_only == POLICY_HINT_TRUE)
		r = POLICY_LOW;
	else if (an->destructive == POLICY_HINT_FALSE)
		r = POLICY_MEDIUM;
	else
		r = POLICY_HIGH;
	if (an->open_world == POLICY_HINT_TRUE && r < POLICY_CRITICAL)
		r++;
	return r;
}

int
policy_asks(enum policy_autonomy a, enum policy_risk r)
{
	switch (a) {
	case POLICY_FULL_AUTO:
		return r >= POLICY_CRITICAL;
	case POLICY_SUPERVISED:
		return r >= POLICY_HIGH;
	case POLICY_CAUTIOUS:
		return r >= POLICY_MEDIUM;
	case POLICY_MANUAL:
		return 1;
	}
	return 1;	/* not a level: the safe answer */
}

struct policy_decision
policy_decide(const struct policy_rules *rules, const char *full_name,
    const struct policy_annotations *an, enum policy_autonomy a)
{
	struct policy_decision	 d;
	const struct policy_rule *ru;

	d.rule = NULL;
	d.risk = policy_risk_of(an);
	if (rules != NULL && full_name != NULL)
		TAILQ_FOREACH(ru, rules, entry)
			if (fnmatch(ru->glob, full_name, 0) == 0) {
				d.rule = ru;
				break;
			}
	if (d.rule != NULL && d.rule->verdict == POLICY_RULE_DENY) {
		d.action = POLICY_DENY;
		return d;
	}
	if (d.rule != NULL && d.rule->verdict == POLICY_RULE_ALLOW) {
		d.action = POLICY_RUN;
		return d;
	}
	if (d.rule != NULL)
		d.risk = d.rule->risk;
	d.action = policy_asks(a, d.risk) ? POLICY_ASK : POLICY_RUN;
	return d;
}
