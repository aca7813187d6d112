/*
 * kg-bench: the knowledge graph's core without a daemon, for
 * bench/knowledge/run.  Folds batch files (parley-knowledge(7): an object
 * with "actions", or the array alone) into one graph the way a project's
 * owner does (kg_check, then a knowledge_batch body stamped by the clock,
 * then kg_fold), then answers each query of a file in both formats.
 *
 *	kg-bench QUERIES BATCH...
 *
 * QUERIES holds one query a line (blank lines and lines starting with #
 * skipped).  Prints one JSON object a line: {"query","sexp","json",
 * "sexpError","jsonError","usSexp","usJson"} (the answers as text, eval
 * times in microseconds), then {"export":"json"|"md","text"} for the
 * whole graph as GET /knowledge/P gives it.  Never installed.
 */
#include <err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "parley/kg.h"
#include "parley/kgq.h"

#define FILE_MAX	(4u << 20)

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* The whole file, NUL-terminated (malloc'd); exits on failure. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *fp;
	char *p;
	size_t n;

	if ((fp = fopen(path, "r")) == NULL)
		err(1, "%s", path);
	if ((p = malloc(FILE_MAX + 1)) == NULL)
		err(1, NULL);
	n = fread(p, 1, FILE_MAX, fp);
	if (ferror(fp) || !feof(fp))
		errx(1, "%s: unreadable or larger than %u bytes", path,
		    FILE_MAX);
	fclose(fp);
	p[n] = '\0';
	*len = n;
	return p;
}

static void
emit(cJSON *o)
{
	char *s;

	if ((s = cJSON_PrintUnformatted(o)) == NULL)
		errx(1, "out of memory");
	printf("%s\n", s);
	cJSON_free(s);
	cJSON_Delete(o);
}

int
main(int argc, char *argv[])
{
	struct kgq_limits lim;
	struct kg_err e;
	struct kg *g;
	uint64_t clock = 0, t0, t1;
	cJSON *doc, *actions, *body, *o;
	char *text, *q, *nl, *a, *b, id[32];
	size_t len;
	int i, ea, eb;

	if (argc < 3) {
		fprintf(stderr, "usage: kg-bench queries batch ...\n");
		return 2;
	}
	if ((g = kg_new("parley")) == NULL)
		err(1, "kg_new");
	for (i = 2; i < argc; i++) {
		text = slurp(argv[i], &len);
		if ((doc = cJSON_ParseWithLength(text, len)) == NULL)
			errx(1, "%s: not JSON", argv[i]);
		actions = cJSON_IsArray(doc) ? doc :
		    cJSON_GetObjectItemCaseSensitive(doc, "actions");
		if (kg_check(g, actions, 100000, &e) == -1)
			errx(1, "%s: action %d (%s): field \"%s\": %s", argv[i],
			    e.action, e.op, e.field, e.msg);
		snprintf(id, sizeof(id), "bench-%d", i - 1);
		body = kg_batch_body(actions, id, kg_clock_next(&clock,
		    (uint64_t)time(NULL) * 1000), "bench/1",
		    (uint64_t)time(NULL) * 1000, NULL);
		if (body == NULL || kg_fold(g, (uint64_t)(i - 1),
		    "knowledge_batch", body) == -1)
			errx(1, "%s: could not be folded", argv[i]);
		cJSON_Delete(body);
		cJSON_Delete(doc);
		free(text);
	}
	kgq_defaults(&lim);
	text = slurp(argv[1], &len);
	for (q = text; q != NULL && *q != '\0'; q = nl) {
		if ((nl = strchr(q, '\n')) != NULL)
			*nl++ = '\0';
		if (*q == '\0' || *q == '#')
			continue;
		t0 = now_us();
		a = kgq_eval(g, q, strlen(q), KGQ_SEXP, &lim, &ea, NULL);
		t1 = now_us();
		b = kgq_eval(g, q, strlen(q), KGQ_JSON, &lim, &eb, NULL);
		if (a == NULL || b == NULL)
			errx(1, "kgq_eval: out of memory");
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "query", q);
		cJSON_AddStringToObject(o, "sexp", a);
		cJSON_AddStringToObject(o, "json", b);
		cJSON_AddBoolToObject(o, "sexpError", ea);
		cJSON_AddBoolToObject(o, "jsonError", eb);
		cJSON_AddNumberToObject(o, "usSexp", (double)(t1 - t0));
		cJSON_AddNumberToObject(o, "usJson", (double)(now_us() - t1));
		emit(o);
		free(a);
		free(b);
	}
	free(text);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "export", "json");
	body = kg_export_json(g);
	a = cJSON_PrintUnformatted(body);
	cJSON_AddStringToObject(o, "text", a);
	cJSON_free(a);
	cJSON_Delete(body);
	emit(o);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "export", "md");
	a = kg_export_md(g);
	cJSON_AddStringToObject(o, "text", a);
	free(a);
	emit(o);
	kg_free(g);
	return 0;
}
