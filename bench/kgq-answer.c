/*
 * kgq-answer: a query's answer over a graph given as a file, for
 * measuring the compact (sexp) and JSON forms side by side (the token
 * counting is bench/knowledge's, not this program's).
 *
 *   kgq-answer [-f sexp|json] [-b] ACTIONS.json QUERY
 *
 * ACTIONS.json is either one batch's actions ([["record-principle",
 * {...}], ...]) or an array of such batches; each is folded as a
 * knowledge_batch, as the daemon would after kg_check.  The answer goes
 * to stdout (no newline added); -b prints its byte count to stderr; an
 * evaluation error is printed as data and exits 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/kg.h"
#include "parley/kgq.h"

static void
usage(void)
{
	fprintf(stderr, "usage: kgq-answer [-f sexp|json] [-b] ACTIONS.json "
	    "QUERY\n");
	exit(1);
}

static char *
slurp(const char *path, size_t *len)
{
	FILE	*f = fopen(path, "rb");
	char	*buf = NULL;
	size_t	 cap = 0, n = 0, r;

	if (f == NULL)
		return NULL;
	for (;;) {
		if (cap - n < 65536) {
			char	*nb;

			cap = cap ? cap * 2 : 65536;
			if (cap > 256u * 1024 * 1024 ||
			    (nb = realloc(buf, cap + 1)) == NULL) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* 1 when a is a batch (its first item an action: an array, a string). */
static int
is_batch(const cJSON *a)
{
	const cJSON	*first = cJSON_GetArrayItem(a, 0);

	return first == NULL || (cJSON_IsArray(first) &&
	    cJSON_IsString(cJSON_GetArrayItem(first, 0)));
}

static int
fold(struct kg *g, const cJSON *acts, uint64_t seq)
{
	cJSON	*body;
	char	 id[32];
	int	 rc;

	snprintf(id, sizeof(id), "b%llu", (unsigned long long)seq);
	body = kg_batch_body(acts, id, seq * 1000, "bench/1", seq, NULL);
	if (body == NULL)
		return -1;
	rc = kg_fold(g, seq, "knowledge_batch", body);
	cJSON_Delete(body);
	return rc;
}

int
main(int argc, char *argv[])
{
	enum kgq_format	 fmt = KGQ_SEXP;
	struct kg	*g;
	cJSON		*j, *b;
	char		*text, *ans;
	size_t		 len, alen;
	uint64_t	 seq = 0;
	int		 c, bytes = 0, err;

	while ((c = getopt(argc, argv, "bf:")) != -1) {
		switch (c) {
		case 'b':
			bytes = 1;
			break;
		case 'f':
			if (strcmp(optarg, "json") == 0)
				fmt = KGQ_JSON;
			else if (strcmp(optarg, "sexp") != 0)
				usage();
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2)
		usage();
	if ((text = slurp(argv[optind], &len)) == NULL) {
		perror(argv[optind]);
		return 1;
	}
	j = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsArray(j)) {
		fprintf(stderr, "%s: not a JSON array of actions or of "
		    "batches\n", argv[optind]);
		return 1;
	}
	if ((g = kg_new("bench")) == NULL)
		return 1;
	if (is_batch(j))
		fold(g, j, ++seq);
	else
		cJSON_ArrayForEach(b, j)
			if (fold(g, b, ++seq) != 0)
				fprintf(stderr, "batch %llu not folded\n",
				    (unsigned long long)seq);
	cJSON_Delete(j);
	ans = kgq_eval(g, argv[optind + 1], strlen(argv[optind + 1]), fmt,
	    NULL, &err, &alen);
	kg_free(g);
	if (ans == NULL) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	fwrite(ans, 1, alen, stdout);
	if (bytes)
		fprintf(stderr, "%zu\n", alen);
	free(ans);
	return err ? 2 : 0;
}
