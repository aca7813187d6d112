/*
 * parleyctl knowledge: a project's knowledge graph (parley-knowledge(7))
 * through the daemon's /knowledge endpoints.  export writes the graph as
 * Markdown or JSON, now or as it was after a seq; import records a batch
 * file as one batch whose id is derived from the file's bytes, so that
 * importing the same file again records nothing new.
 */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/kbtext.h"
#include "parley/kg.h"
#include "ctl_knowledge.h"
#include "parleyctl.h"

/* A batch file: the actions' bytes and room for the object around them. */
#define KNOW_FILE_MAX	(KG_BATCH_MAX + 64 * 1024)

/* 1 when id is a projectId parleyd takes; else says why. */
static int
project_ok(const char *id)
{
	if (kg_valid_project(id))
		return 1;
	warnx("bad project '%s': a projectId is 1-%d characters of "
	    "A-Z a-z 0-9 . _ - not starting with '.'", id, KG_PROJECT_MAX);
	return 0;
}

/* The error answer of a knowledge endpoint, told; the exit status. */
static int
know_error(struct hc *h, const char *what)
{
	cJSON *o = answer_json(h);
	const cJSON *e = jget(o, "error");
	const char *msg = cJSON_GetStringValue(jget(e, "message"));
	const char *code = cJSON_GetStringValue(jget(e, "code"));

	if (msg == NULL)
		warnx("%s: parleyd answered %d%s%.*s", what, h->status,
		    h->body.len ? ": " : "", (int)(h->body.len > 200 ? 200 :
		    h->body.len), h->body.p ? h->body.p : "");
	else if (code != NULL && strcmp(code, "INVALID_ACTION") == 0)
		/* Which action and field, even when the message does not
		 * say it: what to fix in the file. */
		warnx("%s: %s (INVALID_ACTION: action %s, %s, field %s)",
		    what, msg, jnum(e, "action"), jstr(e, "op"),
		    cJSON_IsString(jget(e, "field")) &&
		    jget(e, "field")->valuestring[0] != '\0' ?
		    jstr(e, "field") : "none");
	else
		warnx("%s: %s%s%s%s", what, msg, code ? " (" : "",
		    code ? code : "", code ? ")" : "");
	cJSON_Delete(o);
	return EXIT_ERR;
}

/* Writes len bytes to path (a new file put in place whole); -1 told. */
static int
write_file(const char *path, const char *p, size_t len)
{
	char *tmp = xprintf("%s.tmp.%ld", path, (long)getpid());
	FILE *fp;

	if ((fp = fopen(tmp, "w")) == NULL) {
		warn("%s", tmp);
		free(tmp);
		return -1;
	}
	if (fwrite(p, 1, len, fp) != len || (len > 0 && p[len - 1] != '\n' &&
	    putc('\n', fp) == EOF) || fflush(fp) == EOF ||
	    fsync(fileno(fp)) == -1) {
		warn("%s", tmp);
		fclose(fp);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	if (fclose(fp) == EOF || rename(tmp, path) == -1) {
		warn("%s", path);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

int
cmd_knowledge_export(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "at", required_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 }
	};
	const char *out = NULL, *project;
	uint64_t at = 0;
	int ch, md = 1, has_at = 0, rc = 0;
	struct hc h;
	char *enc, *path, *what, atq[40];

	optind = 0;
	while ((ch = getopt_long(argc, argv, "o:", lo, NULL)) != -1)
		switch (ch) {
		case 'f':
			if (strcmp(optarg, "md") == 0)
				md = 1;
			else if (strcmp(optarg, "json") == 0)
				md = 0;
			else {
				warnx("bad --format %s: md (Markdown, the "
				    "default) or json", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'a':
			if (opt_seq("at", optarg, &at) == -1)
				return EXIT_USAGE;
			has_at = 1;
			break;
		case 'o':
			out = optarg;
			break;
		default:
			return usage_of("knowledge export");
		}
	if (argc - optind != 1)
		return usage_of("knowledge export");
	project = argv[optind];
	if (!project_ok(project))
		return EXIT_USAGE;
	atq[0] = '\0';
	if (has_at)
		snprintf(atq, sizeof(atq), "%sat=%" PRIu64, md ? "&" : "?",
		    at);
	enc = path_enc(project);
	path = xprintf("/knowledge/%s%s%s", enc, md ? "?format=md" : "",
	    atq);
	free(enc);
	what = xprintf("knowledge of %s", project);
	if (request(&h, "GET", path, NULL) != 200)
		rc = know_error(&h, what);
	else if (out != NULL) {
		if (write_file(out, h.body.p ? h.body.p : "", h.body.len) == -1)
			rc = EXIT_ERR;
	} else {
		fwrite(h.body.p, 1, h.body.len, stdout);
		if (h.body.len == 0 || h.body.p[h.body.len - 1] != '\n')
			putchar('\n');
		flush_stdout();
	}
	hc_close(&h);
	free(path);
	free(what);
	return rc;
}

/*
 * The batch file at path, read whole (at most KNOW_FILE_MAX bytes): its
 * actions (the caller's) and the hex SHA-256 of its bytes; NULL once
 * told what is wrong with it.
 */
static cJSON *
read_batch(const char *path, char hex[65])
{
	cJSON *doc, *actions;
	char *p = NULL;
	size_t len = 0, n;
	FILE *fp;

	if (strcmp(path, "-") == 0)
		fp = stdin;
	else if ((fp = fopen(path, "r")) == NULL) {
		warn("%s", path);
		return NULL;
	}
	if ((p = malloc(KNOW_FILE_MAX + 1)) == NULL)
		err(EXIT_ERR, NULL);
	while ((n = fread(p + len, 1, KNOW_FILE_MAX + 1 - len, fp)) > 0)
		if ((len += n) > KNOW_FILE_MAX)
			break;
	if (ferror(fp)) {
		warn("%s", path);
		goto fail;
	}
	if (len > KNOW_FILE_MAX) {
		warnx("%s: larger than %u bytes; a batch's actions are at most "
		    "%u bytes of JSON: split it into several files",
		    path, (unsigned)KNOW_FILE_MAX, (unsigned)KG_BATCH_MAX);
		goto fail;
	}
	kbt_sha256(p, len, hex);
	if ((doc = cJSON_ParseWithLength(p, len)) == NULL) {
		warnx("%s: not JSON (near byte %td); a batch file is "
		    "{\"actions\":[[\"record-principle\",{...}],...]} or the "
		    "array of actions alone", path, cJSON_GetErrorPtr() ?
		    cJSON_GetErrorPtr() - p : (ptrdiff_t)0);
		goto fail;
	}
	if (cJSON_IsArray(doc))
		actions = doc;
	else if (cJSON_IsArray(jget(doc, "actions"))) {
		actions = cJSON_DetachItemFromObjectCaseSensitive(doc,
		    "actions");
		cJSON_Delete(doc);
	} else {
		warnx("%s: no \"actions\" array; a batch file is "
		    "{\"actions\":[[\"record-principle\",{...}],...]} or the "
		    "array of actions alone", path);
		cJSON_Delete(doc);
		goto fail;
	}
	if (fp != stdin)
		fclose(fp);
	free(p);
	return actions;
fail:
	if (fp != stdin)
		fclose(fp);
	free(p);
	return NULL;
}

int
cmd_knowledge_import(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	const char *project, *file;
	cJSON *actions, *body, *o;
	char hex[65], *enc, *path, *s, *what;
	int ch, rc = 0, n;
	struct hc h;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "j", lo, NULL)) != -1)
		switch (ch) {
		case 'j':
			jflag = 1;
			break;
		default:
			return usage_of("knowledge import");
		}
	if (argc - optind != 2)
		return usage_of("knowledge import");
	project = argv[optind];
	file = argv[optind + 1];
	if (!project_ok(project))
		return EXIT_USAGE;
	if ((actions = read_batch(file, hex)) == NULL)
		return EXIT_ERR;
	n = cJSON_GetArraySize(actions);
	/* The same bytes are the same batch: the daemon drops a repeat. */
	hex[40] = '\0';
	s = xprintf("import-%s", hex);
	if ((body = cJSON_CreateObject()) == NULL ||
	    cJSON_AddStringToObject(body, "batchId", s) == NULL)
		errx(EXIT_ERR, "out of memory");
	free(s);
	cJSON_AddItemToObject(body, "actions", actions);
	if ((s = cJSON_PrintUnformatted(body)) == NULL)
		errx(EXIT_ERR, "out of memory");
	cJSON_Delete(body);
	enc = path_enc(project);
	path = xprintf("/knowledge/%s/actions", enc);
	free(enc);
	what = xprintf("%s into %s", file, project);
	request(&h, "POST", path, s);
	free(s);
	free(path);
	if (h.status / 100 != 2)
		rc = know_error(&h, what);
	else if (jflag) {
		fwrite(h.body.p, 1, h.body.len, stdout);
		if (h.body.len == 0 || h.body.p[h.body.len - 1] != '\n')
			putchar('\n');
	} else {
		if ((o = answer_json(&h)) == NULL)
			errx(EXIT_ERR, "%s: the answer is not JSON", what);
		if (cJSON_IsTrue(jget(o, "duplicate")))
			printf("%s: already recorded at seq %s (batch %s); "
			    "nothing changed\n", what, jnum(o, "seq"),
			    jstr(o, "batchId"));
		else
			printf("%s: %d actions recorded at seq %s (batch "
			    "%s)\n", what, n, jnum(o, "seq"),
			    jstr(o, "batchId"));
		cJSON_Delete(o);
	}
	free(what);
	hc_close(&h);
	flush_stdout();
	return rc;
}
