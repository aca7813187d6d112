/*
 * parley-load's parent: forks --procs client processes, agrees phases
 * with them over pipes (READY, then GO), merges their JSON reports into
 * one (histograms, rates, errors) and prints it.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley-load.h"

/* --- the parent --- */

struct kid {
	pid_t	 pid;
	int	 ctl, res;
	char	*buf;
	size_t	 len;
	int	 ready;
	cJSON	*rep;
	int	 eof;
};

/* Reads what a child wrote; returns its complete lines one by one. */
static char *
kid_line(struct kid *k)
{
	char *nl, *line;
	size_t n;

	if (k->buf == NULL || (nl = memchr(k->buf, '\n', k->len)) == NULL)
		return NULL;
	n = (size_t)(nl - k->buf);
	if ((line = strndup(k->buf, n)) == NULL)
		die("out of memory");
	memmove(k->buf, nl + 1, k->len - n - 1);
	k->len -= n + 1;
	return line;
}

static void
kid_fill(struct kid *k)
{
	char tmp[65536], *p;
	ssize_t n;

	n = read(k->res, tmp, sizeof(tmp));
	if (n <= 0) {
		k->eof = 1;
		return;
	}
	if ((p = realloc(k->buf, k->len + (size_t)n + 1)) == NULL)
		die("out of memory");
	k->buf = p;
	memcpy(k->buf + k->len, tmp, (size_t)n);
	k->len += (size_t)n;
}

static double
num(const cJSON *o, const char *k)
{
	return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint64_t
h_percentile(const uint64_t *hist, uint64_t n, uint64_t max, double p)
{
	uint64_t want = (uint64_t)((double)n * p), acc = 0;
	unsigned i;

	if (want >= n)
		want = n - 1;
	for (i = 0; i < H_BUCKETS; i++) {
		acc += hist[i];
		if (acc > want)
			break;
	}
	/* A bucket's middle may lie past the largest sample. */
	return i < H_BUCKETS && h_value(i) < max ? h_value(i) : max;
}

static int
aggregate(struct kid *kids, unsigned nk, uint64_t t0, uint64_t t_end)
{
	static uint64_t hist[H_BUCKETS];
	cJSON *o = cJSON_CreateObject(), *lat, *errs, *x, *e;
	uint64_t connected = 0, events = 0, resumes = 0, lost = 0, dup = 0;
	uint64_t reorder = 0, latn = 0, latmax = 0, done = 0, reached = 0;
	uint64_t tf = 0, tl = 0, ts = UINT64_MAX, ttl = 0, etotal = 0;
	double *rates = NULL, el, win;
	size_t nrates = 0, cap = 0;
	unsigned i, nerr = 0;
	int ok;
	char *j;

	errs = cJSON_CreateArray();
	for (i = 0; i < nk; i++) {
		cJSON *r = kids[i].rep;

		if (r == NULL) {
			cJSON_AddItemToArray(errs, cJSON_CreateString(
			    "a load process gave no report"));
			nerr++;
			continue;
		}
		connected += (uint64_t)num(r, "connected");
		events += (uint64_t)num(r, "events");
		resumes += (uint64_t)num(r, "resumes");
		lost += (uint64_t)num(r, "lost");
		dup += (uint64_t)num(r, "duplicated");
		reorder += (uint64_t)num(r, "reordered");
		done += (uint64_t)num(r, "done");
		reached += (uint64_t)num(r, "reached");
		etotal += (uint64_t)num(r, "errors_total");
		if (num(r, "t_first") > 0 && (tf == 0 ||
		    (uint64_t)num(r, "t_first") < tf))
			tf = (uint64_t)num(r, "t_first");
		if ((uint64_t)num(r, "t_last") > tl)
			tl = (uint64_t)num(r, "t_last");
		if ((uint64_t)num(r, "t_start") < ts)
			ts = (uint64_t)num(r, "t_start");
		if ((uint64_t)num(r, "ttl") > ttl)
			ttl = (uint64_t)num(r, "ttl");
		if ((uint64_t)num(r, "lat_max") > latmax)
			latmax = (uint64_t)num(r, "lat_max");
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "hist")) {
			unsigned b = (unsigned)cJSON_GetNumberValue(
			    cJSON_GetArrayItem(x, 0));
			uint64_t cnt = (uint64_t)cJSON_GetNumberValue(
			    cJSON_GetArrayItem(x, 1));

			if (b < H_BUCKETS) {
				hist[b] += cnt;
				latn += cnt;
			}
		}
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "errors")) {
			if (nerr++ < MAX_ERRORS)
				cJSON_AddItemToArray(errs, cJSON_CreateString(
				    cJSON_GetStringValue(x)));
		}
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(r, "rates")) {
			if (nrates == cap) {
				cap = cap ? cap * 2 : 1024;
				if ((rates = realloc(rates, cap *
				    sizeof(*rates))) == NULL)
					die("out of memory");
			}
			rates[nrates++] = cJSON_GetNumberValue(x);
		}
	}
	if (ts == UINT64_MAX)
		ts = t0;
	/*
	 * The measured window: first to last event (stream, fanout, storm);
	 * from the first connect to the last event (replay); the whole run
	 * (idle).
	 */
	if (g.o.mode == M_REPLAY)
		win = tl > ts ? (double)(tl - ts) / 1e6 : 0;
	else if (g.o.mode == M_IDLE)
		win = (double)(t_end - t0) / 1e6;
	else
		win = tl > tf ? (double)(tl - tf) / 1e6 : 0;
	el = win;

	cJSON_AddStringToObject(o, "mode", mode_names[g.o.mode]);
	cJSON_AddStringToObject(o, "proto", proto_names[g.o.proto]);
	cJSON_AddStringToObject(o, "transport", g.o.transport == T_SSE ?
	    "sse" : "ws");
	cJSON_AddNumberToObject(o, "clients", g.o.clients);
	cJSON_AddNumberToObject(o, "sessions", g.o.sessions);
	cJSON_AddNumberToObject(o, "procs", g.o.procs);
	cJSON_AddNumberToObject(o, "connected", (double)connected);
	cJSON_AddNumberToObject(o, "failed", (double)(g.o.clients -
	    (connected > g.o.clients ? g.o.clients : connected)));
	cJSON_AddNumberToObject(o, "events", (double)events);
	cJSON_AddNumberToObject(o, "elapsed_s", el);
	cJSON_AddNumberToObject(o, "wall_s", (double)(t_end - t0) / 1e6);
	cJSON_AddNumberToObject(o, "events_per_s", el > 0 ?
	    (double)events / el : 0);
	lat = cJSON_AddObjectToObject(o, "lat_us");
	cJSON_AddNumberToObject(lat, "n", (double)latn);
	cJSON_AddNumberToObject(lat, "p50", latn ? (double)h_percentile(hist,
	    latn, latmax, 0.50) : 0);
	cJSON_AddNumberToObject(lat, "p90", latn ? (double)h_percentile(hist,
	    latn, latmax, 0.90) : 0);
	cJSON_AddNumberToObject(lat, "p99", latn ? (double)h_percentile(hist,
	    latn, latmax, 0.99) : 0);
	cJSON_AddNumberToObject(lat, "max", (double)latmax);
	cJSON_AddNumberToObject(o, "resumes", (double)resumes);
	cJSON_AddNumberToObject(o, "lost", (double)lost);
	cJSON_AddNumberToObject(o, "duplicated", (double)dup);
	cJSON_AddNumberToObject(o, "reordered", (double)reorder);
	if (g.o.mode == M_STORM)
		cJSON_AddNumberToObject(o, "time_to_live_s", (double)ttl / 1e6);
	if (g.o.mode == M_STREAM || g.o.mode == M_FANOUT ||
	    g.o.mode == M_STORM || g.o.mode == M_THOUGHTS)
		cJSON_AddNumberToObject(o, "clients_done", (double)done);
	/* CLOCK_REALTIME us, to match the server's CPU to the window. */
	cJSON_AddNumberToObject(o, "t_first_us", (double)tf);
	cJSON_AddNumberToObject(o, "t_last_us", (double)tl);
	if (g.o.mode == M_REPLAY) {
		cJSON_AddNumberToObject(o, "clients_done", (double)reached);
		e = cJSON_AddObjectToObject(o, "per_client_events_per_s");
		if (nrates > 0) {
			qsort(rates, nrates, sizeof(*rates), cmp_double);
			cJSON_AddNumberToObject(e, "min", rates[0]);
			cJSON_AddNumberToObject(e, "p50", rates[nrates / 2]);
			cJSON_AddNumberToObject(e, "max", rates[nrates - 1]);
		}
	}
	cJSON_AddNumberToObject(o, "errors_total", (double)etotal);
	cJSON_AddItemToObject(o, "errors", errs);

	/* Errors are reported; the verdict is about what was measured. */
	ok = nerr == 0 && connected >= g.o.clients &&
	    lost == 0 && dup == 0 && reorder == 0;
	if (g.o.mode == M_REPLAY && reached < g.o.clients)
		ok = 0;
	if ((g.o.mode == M_STREAM || g.o.mode == M_FANOUT ||
	    g.o.mode == M_STORM || g.o.mode == M_THOUGHTS) &&
	    done < g.o.clients)
		ok = 0;
	if (g.o.mode == M_STORM && ttl == 0)
		ok = 0;
	if (g.o.json)
		j = cJSON_PrintUnformatted(o);
	else
		j = cJSON_Print(o);
	if (j == NULL)
		die("out of memory");
	printf("%s\n", j);
	fflush(stdout);
	free(j);
	free(rates);
	cJSON_Delete(o);
	return ok ? 0 : 1;
}

/* File scope so the children, which inherit them, still reach them. */
static struct kid	*kids;
static struct pollfd	*pfd;

void
parent_main(void)
{
	unsigned i, nready = 0, nrep = 0, connected = 0;
	uint64_t t0 = now_us(), t_end;
	int fdc[2], fdr[2], go_sent = 0, st;
	char *line;

	(void)raise_nofile();
	if ((kids = calloc(g.o.procs, sizeof(*kids))) == NULL ||
	    (pfd = calloc(g.o.procs, sizeof(*pfd))) == NULL)
		die("out of memory");
	for (i = 0; i < g.o.procs; i++) {
		if (pipe(fdc) == -1 || pipe(fdr) == -1)
			die("pipe: %s", strerror(errno));
		fflush(NULL);
		switch (kids[i].pid = fork()) {
		case -1:
			die("fork: %s", strerror(errno));
		case 0:
			close(fdc[1]);
			close(fdr[0]);
			/* Earlier siblings' pipe ends are not ours. */
			for (unsigned k = 0; k < i; k++) {
				close(kids[k].ctl);
				close(kids[k].res);
			}
			child_main(i, fdc[0], fdr[1]);
			/* NOTREACHED */
		}
		close(fdc[0]);
		close(fdr[1]);
		kids[i].ctl = fdc[1];
		kids[i].res = fdr[0];
	}
	while (nrep < g.o.procs) {
		unsigned np = 0;

		for (i = 0; i < g.o.procs; i++) {
			if (kids[i].eof)
				continue;
			pfd[np].fd = kids[i].res;
			pfd[np].events = POLLIN;
			np++;
		}
		if (np == 0)
			break;
		if (poll(pfd, np, -1) == -1) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		for (i = 0; i < g.o.procs; i++) {
			unsigned k;

			if (kids[i].eof)
				continue;
			for (k = 0; k < np; k++)
				if (pfd[k].fd == kids[i].res &&
				    (pfd[k].revents & (POLLIN | POLLHUP)))
					kid_fill(&kids[i]);
			while ((line = kid_line(&kids[i])) != NULL) {
				unsigned a, b;

				if (sscanf(line, "READY %u %u", &a, &b) == 2) {
					kids[i].ready = 1;
					nready++;
					connected += a;
				} else if (kids[i].rep == NULL &&
				    (kids[i].rep = cJSON_Parse(line)) != NULL)
					nrep++;
				free(line);
			}
			if (kids[i].eof && kids[i].rep == NULL && !kids[i].ready) {
				/* Died before it was ready: do not wait for it. */
				kids[i].ready = 1;
				nready++;
			}
			if (kids[i].eof && kids[i].rep == NULL)
				nrep++;
		}
		if (!go_sent && nready == g.o.procs) {
			go_sent = 1;
			/*
			 * Every mode: a caller starting another process
			 * only once these clients are up (bench/run's
			 * multihost observers) waits for it.
			 */
			fprintf(stderr, "HOLDING %u\n", connected);
			fflush(stderr);
			for (i = 0; i < g.o.procs; i++)
				(void)write(kids[i].ctl, "G", 1);
		}
	}
	t_end = now_us();
	for (i = 0; i < g.o.procs; i++) {
		close(kids[i].ctl);
		waitpid(kids[i].pid, &st, 0);
	}
	st = aggregate(kids, g.o.procs, t0, t_end);
	for (i = 0; i < g.o.procs; i++) {
		cJSON_Delete(kids[i].rep);
		free(kids[i].buf);
		close(kids[i].res);
	}
	free(kids);
	free(pfd);
	exit(st);
}

