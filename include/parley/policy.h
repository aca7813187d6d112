/*
 * Tool-call risk and approval policy, for human-in-the-loop approvals.
 *
 * A call's risk comes from the operator's tool-policy rules (first match
 * wins) or else from the tool's MCP annotations; the session's autonomy
 * level then says whether the call runs, is asked about, or is denied.
 * Pure: no I/O, no globals, no allocation.
 */
#ifndef PARLEY_POLICY_H
#define PARLEY_POLICY_H

#include <sys/queue.h>

enum policy_risk {
	POLICY_LOW,
	POLICY_MEDIUM,
	POLICY_HIGH,
	POLICY_CRITICAL
};

/* Most autonomous first; critical is asked at every level. */
enum policy_autonomy {
	POLICY_FULL_AUTO,	/* asks for critical only */
	POLICY_SUPERVISED,	/* high and critical (the default) */
	POLICY_CAUTIOUS,	/* medium and above */
	POLICY_MANUAL		/* every call */
};

enum policy_action {
	POLICY_RUN,		/* run without asking */
	POLICY_ASK,		/* run once a human approves */
	POLICY_DENY		/* never run: the model gets a tool error */
};

/* One MCP annotation as the server sent it.  Zero is "not sent". */
enum policy_hint {
	POLICY_HINT_UNSET,
	POLICY_HINT_FALSE,
	POLICY_HINT_TRUE
};

/*
 * A tool's MCP annotations; all unset (a zeroed struct) = none sent.
 * idempotentHint is kept for callers (audit) but does not change a risk.
 */
struct policy_annotations {
	enum policy_hint	 read_only;	/* readOnlyHint */
	enum policy_hint	 destructive;	/* destructiveHint */
	enum policy_hint	 idempotent;	/* idempotentHint */
	enum policy_hint	 open_world;	/* openWorldHint */
};

/* What a tool-policy rule says of the tools it matches. */
enum policy_verdict {
	POLICY_RULE_RISK,	/* this risk, instead of the annotations' */
	POLICY_RULE_ALLOW,	/* never ask, at any level */
	POLICY_RULE_DENY	/* never run */
};

/* tool-policy GLOB low|medium|high|critical|allow|deny */
struct policy_rule {
	char			*glob;		/* for fnmatch(3) */
	enum policy_verdict	 verdict;
	enum policy_risk	 risk;		/* for POLICY_RULE_RISK */
	unsigned		 line;		/* in parleyd.conf */
	TAILQ_ENTRY(policy_rule) entry;
};
TAILQ_HEAD(policy_rules, policy_rule);

struct policy_decision {
	enum policy_action	 action;
	/* The rule's risk, or else the annotations' (also for allow/deny). */
	enum policy_risk	 risk;
	/* The rule that matched, NULL if none did. */
	const struct policy_rule *rule;
};

/* "low", "medium", "high", "critical"; NULL for a value out of range. */
const char	*policy_risk_name(enum policy_risk);
/* Exact, lower-case names; 0, or -1 for an unknown name. */
int		 policy_risk_parse(const char *, enum policy_risk *);
/* "FULL_AUTO", "SUPERVISED", "CAUTIOUS", "MANUAL"; NULL out of range. */
const char	*policy_autonomy_name(enum policy_autonomy);
/* Exact, upper-case names as in the protocol; 0, or -1. */
int		 policy_autonomy_parse(const char *, enum policy_autonomy *);
/* > 0 if a is more autonomous than b, 0 if the same, < 0 if less. */
int		 policy_autonomy_cmp(enum policy_autonomy a,
		    enum policy_autonomy b);
/* A rule's word: a risk name, "allow" or "deny"; 0, or -1. */
int		 policy_verdict_parse(const char *, enum policy_verdict *,
		    enum policy_risk *);
/* The risk the annotations (NULL = none) give a tool. */
enum policy_risk policy_risk_of(const struct policy_annotations *);
/* Whether a call of this risk is asked about at this level. */
int		 policy_asks(enum policy_autonomy, enum policy_risk);
/*
 * The decision for one call of the tool full_name: the first of rules
 * (NULL = none) whose glob matches it, else the annotations (NULL =
 * none), weighed against the autonomy level.
 */
struct policy_decision policy_decide(const struct policy_rules *,
		    const char *full_name, const struct policy_annotations *,
		    enum policy_autonomy);

#endif
