/*
 * parleyctl audit: a session's audit trail (GET /api/audit of
 * parley-protocol(7)), the decision on each tool call, each change of
 * autonomy and each step of an agent's proposed action, a page at a time until the end or --limit.
 */
#include <err.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ctl_audit.h"
#include "parleyctl.h"

#define AUDIT_PAGE	1000	/* entries per request: the daemon's bound */

/* One entry as a row: seq, time, tool, risk, decision, by. */
static void
audit_row(struct table *t, const cJSON *e)
{
	char *d;

	tbl_add(t, jnum(e, "seq"));
	/* A decision's own time; a change of autonomy has the log's. */
	tbl_add(t, cJSON_IsString(jget(e, "timestamp")) ?
	    jstr(e, "timestamp") : jstr(e, "ts"));
	if (strcmp(jstr(e, "type"), "autonomy_changed") == 0) {
		tbl_add(t, "(autonomy)");
		tbl_add(t, "-");
		d = cJSON_IsString(jget(e, "previous")) ? xprintf("%s -> %s",
		    jstr(e, "previous"), jstr(e, "level")) :
		    xprintf("-> %s", jstr(e, "level"));
		tbl_add(t, d);
		free(d);
	} else if (strncmp(jstr(e, "type"), "action_", 7) == 0) {
		/* A step of an agent's proposed action (parley-protocol(7)). */
		d = xprintf("action %s", jstr(e, "actionId"));
		tbl_add(t, d);
		free(d);
		tbl_add(t, jstr(jget(e, "action"), "risk"));
		tbl_add(t, jstr(e, "type") + 7);
		/* Who acted: the answerer, else the agent it is about. */
		tbl_add(t, jstr(e, cJSON_IsString(jget(e, "by")) ? "by" :
		    "agentId"));
		return;
	} else {
		tbl_add(t, jstr(e, "tool"));
		tbl_add(t, jstr(e, "risk"));
		tbl_add(t, jstr(e, "decision"));
	}
	tbl_add(t, jstr(e, "by"));
}

/*
 * Reads one page into *page; 0, or the exit status once the error is
 * told.  The page's next must move on while it says there is more, or
 * the paging would never end.
 */
static int
audit_page(const char *sid, const char *enc, uint64_t after, uint64_t n,
    cJSON **page)
{
	const cJSON *next;
	struct hc h;
	char *path;
	int rc;

	path = xprintf("/api/audit?sessionId=%s&after=%" PRIu64 "&limit=%"
	    PRIu64, enc, after, n);
	if ((rc = session_get(&h, path, sid)) != 0)
		return rc;
	*page = answer_json(&h);
	hc_close(&h);
	next = jget(*page, "next");
	if (!cJSON_IsArray(jget(*page, "entries")) || !cJSON_IsNumber(next) ||
	    (cJSON_IsTrue(jget(*page, "more")) && next->valuedouble <=
	    (double)after))
		errx(EXIT_ERR, "session %s: the answer is not an audit page "
		    "(GET /api/audit in parley-protocol(7))", sid);
	return 0;
}

int
cmd_audit(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "after", required_argument, NULL, 'a' },
		{ "limit", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	static const char *head[] = { "SEQ", "TIME", "TOOL", "RISK",
	    "DECISION", "BY" };
	uint64_t after = 0, from, limit = 0, got = 0, n;
	cJSON *all = NULL, *page = NULL, *entries, *e;
	const char *sid;
	struct table t;
	char *enc, *s;
	int ch, rc, more;
	size_t i;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "j", lo, NULL)) != -1)
		switch (ch) {
		case 'a':
			if (opt_seq("after", optarg, &after) == -1)
				return EXIT_USAGE;
			break;
		case 'l':
			if (parse_seq(optarg, &limit) == -1 || limit == 0) {
				warnx("bad --limit %s: the most entries to "
				    "print, a whole number from 1", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			jflag = 1;
			break;
		default:
			return usage_of("audit");
		}
	if (argc - optind != 1)
		return usage_of("audit");
	sid = argv[optind];
	from = after;
	enc = path_enc(sid);
	tbl_init(&t, sizeof(head) / sizeof(head[0]));
	do {
		n = limit == 0 || limit - got > AUDIT_PAGE ? AUDIT_PAGE :
		    limit - got;
		if ((rc = audit_page(sid, enc, after, n, &page)) != 0) {
			/* What was read before is printed all the same. */
			free(enc);
			cJSON_Delete(all);
			tbl_print(&t);
			return rc;
		}
		after = (uint64_t)jget(page, "next")->valuedouble;
		more = cJSON_IsTrue(jget(page, "more"));
		cJSON_ArrayForEach(e, jget(page, "entries")) {
			if (!jflag && t.n == 0)
				for (i = 0; i < t.ncol; i++)
					tbl_add(&t, head[i]);
			if (!jflag)
				audit_row(&t, e);
			got++;
		}
		/* --json: one answer of the same shape, every page's entries
		 * in it, next and more the last page's. */
		if (all == NULL)
			all = page;
		else {
			entries = cJSON_GetObjectItemCaseSensitive(page,
			    "entries");
			while ((e = cJSON_GetArrayItem(entries, 0)) != NULL)
				cJSON_AddItemToArray(cJSON_GetObjectItem(all,
				    "entries"), cJSON_DetachItemViaPointer(
				    entries, e));
			cJSON_ReplaceItemInObjectCaseSensitive(all, "next",
			    cJSON_DetachItemFromObjectCaseSensitive(page,
			    "next"));
			cJSON_ReplaceItemInObjectCaseSensitive(all, "more",
			    cJSON_CreateBool(more));
			cJSON_Delete(page);
		}
	} while (more && (limit == 0 || got < limit));
	free(enc);
	if (jflag) {
		if ((s = cJSON_PrintUnformatted(all)) == NULL)
			errx(EXIT_ERR, "out of memory");
		printf("%s\n", s);
		cJSON_free(s);
	} else if (t.n == 0 && from > 0)
		printf("no audit entries after seq %" PRIu64 "\n", from);
	else if (t.n == 0)
		printf("no audit entries\n");
	tbl_print(&t);
	cJSON_Delete(all);
	flush_stdout();
	return 0;
}
