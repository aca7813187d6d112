/*
 * parleyctl chat: a line-mode chat with a session, its approvals asked
 * at the prompt.
 */
#include <sys/queue.h>
#include <ctype.h>
#include <err.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "parley/sse.h"
#include "parley/util.h"
#include "ctl_chat.h"
#include "ctl_follow.h"
#include "parleyctl.h"

struct line {
	char		*text;
	TAILQ_ENTRY(line) entry;
};
TAILQ_HEAD(lineq, line);

struct approval {
	char		*call;		/* toolCallId */
	char		*tool;
	TAILQ_ENTRY(approval) entry;
};

struct chat {
	const char	*sid;
	struct follow	 f;
	int		 tty;
	int		 want_stream;	/* the session exists */
	int		 col;		/* output is mid-line */
	struct turn {
		uint64_t seq;		/* of the message (user_message); 0
					   until seen, when a follower host
					   forwarded it (202, no seq) */
		unsigned n;		/* its id is ctl-IDBASE-n */
		int	 started;	/* an event of its turn was seen */
	}		*turns;		/* messages sent whose turn runs */
	size_t		 nturns;
	size_t		 capturns;
	unsigned	 nsent;
	unsigned	 refused;	/* messages the daemon refused */
	char		 idbase[17];
	TAILQ_HEAD(, approval) approvals;
};

static void
chat_nl(struct chat *c)
{
	if (c->col) {
		putchar('\n');
		c->col = 0;
	}
	flush_stdout();
}

static void
chat_prompt(struct chat *c)
{
	if (c->tty && c->nturns == 0 && TAILQ_EMPTY(&c->approvals)) {
		fputs("> ", stderr);
		fflush(stderr);
	}
}

static void
approval_free(struct chat *c, struct approval *a)
{
	TAILQ_REMOVE(&c->approvals, a, entry);
	free(a->call);
	free(a->tool);
	free(a);
}

/* Whether messageId belongs to the turn of the message logged at seq. */
static int
turn_of(const char *mid, uint64_t seq)
{
	char want[32];
	size_t n;

	if (mid == NULL || seq == 0)
		return 0;
	n = (size_t)snprintf(want, sizeof(want), "m-%" PRIu64, seq);
	/* A turn re-run after a crash is "m-SEQ.ATTEMPT". */
	return strncmp(mid, want, n) == 0 && (mid[n] == '\0' || mid[n] == '.');
}

/* A turn ended: forget the messages whose turn started (all: every one). */
static void
turns_end(struct chat *c, int all)
{
	size_t i, j;

	for (i = j = 0; i < c->nturns; i++)
		if (!all && !c->turns[i].started)
			c->turns[j++] = c->turns[i];
	c->nturns = j;
}

static void
chat_event(void *arg, cJSON *ev, const char *data, size_t len, uint64_t seq)
{
	struct chat *c = arg;
	struct approval *a;
	const char *type = jstr(ev, "type"), *s, *mid;
	size_t i;

	/*
	 * Queued messages run one turn after another, and each turn ends
	 * with agent_state idle after an event naming its messageId (done,
	 * or the error that failed it).
	 */
	/* Forwarded by a follower host, a message's seq is learnt here. */
	if (strcmp(type, "user_message") == 0 && seq != 0 &&
	    (s = cJSON_GetStringValue(jget(ev, "id"))) != NULL &&
	    strncmp(s, "ctl-", 4) == 0 && strncmp(s + 4, c->idbase,
	    strlen(c->idbase)) == 0 && s[4 + strlen(c->idbase)] == '-')
		for (i = 0; i < c->nturns; i++)
			if (c->turns[i].seq == 0 && c->turns[i].n ==
			    strtoul(s + 5 + strlen(c->idbase), NULL, 10))
				c->turns[i].seq = seq;
	mid = cJSON_GetStringValue(jget(ev, "messageId"));
	for (i = 0; mid != NULL && i < c->nturns; i++)
		if (turn_of(mid, c->turns[i].seq))
			c->turns[i].started = 1;
	if (strcmp(type, "token") == 0) {
		if ((s = cJSON_GetStringValue(jget(ev, "content"))) != NULL &&
		    *s != '\0') {
			fputs(s, stdout);
			c->col = s[strlen(s) - 1] != '\n';
			flush_stdout();
		}
	} else if (strcmp(type, "done") == 0) {
		chat_nl(c);
		/* Approvals die with their turn. */
		while ((a = TAILQ_FIRST(&c->approvals)) != NULL)
			approval_free(c, a);
	} else if (strcmp(type, "agent_state") == 0) {
		if (strcmp(jstr(ev, "status"), "idle") == 0) {
			chat_nl(c);
			turns_end(c, 0);
			chat_prompt(c);
		}
	} else if (strcmp(type, "error") == 0) {
		chat_nl(c);
		warnx("%s: %s", jstr(ev, "code"), jstr(ev, "message"));
	} else if (strcmp(type, "session_complete") == 0) {
		chat_nl(c);
		warnx("session %s ended (%s)", c->sid, jstr(ev, "reason"));
		turns_end(c, 1);
	} else if (strcmp(type, "tool_approve_request") == 0 && seq != 0) {
		if ((a = calloc(1, sizeof(*a))) == NULL)
			errx(EXIT_ERR, "out of memory");
		a->call = xstrdup(jstr(ev, "toolCallId"));
		a->tool = xstrdup(jstr(ev, "tool"));
		TAILQ_INSERT_TAIL(&c->approvals, a, entry);
		chat_nl(c);
		if (c->tty) {
			s = cJSON_GetStringValue(jget(ev, "summary"));
			fprintf(stderr, "%s%s%sapprove %s? [y/N/always] ",
			    s ? "(" : "", s ? s : "", s ? ") " : "", a->tool);
			fflush(stderr);
		} else
			warnx("%s asks for approval; the next line of input "
			    "answers: y, always or anything else to reject",
			    a->tool);
	} else if (strcmp(type, "audit_entry") == 0 ||
	    strcmp(type, "tool_start") == 0) {
		/* Answered here or elsewhere: no longer ours to answer. */
		s = cJSON_GetStringValue(jget(ev, "toolCallId"));
		TAILQ_FOREACH(a, &c->approvals, entry)
			if (s != NULL && strcmp(a->call, s) == 0) {
				approval_free(c, a);
				break;
			}
	}
}

/*
 * POSTs one client event of the chat, retrying while the daemon is out of
 * reach (bounded by DOWN_MS); the seq it was logged at in *seq.  Returns 0,
 * or -1 when the daemon refused it (the reason is printed).
 */
static int
chat_post(struct chat *c, cJSON *ev, uint64_t *seq)
{
	struct hc h;
	uint64_t since = 0;
	unsigned backoff = 100;
	char *path, *body;
	cJSON *o;
	int r, rc = 0;

	path = session_path(c->sid, "/messages");
	if ((body = cJSON_PrintUnformatted(ev)) == NULL)
		errx(EXIT_ERR, "out of memory");
	for (;;) {
		hc_err[0] = '\0';
		r = hc_open(&h, "POST", path, body, NULL);
		if (r == HC_OK && hc_body(&h) == -1)
			r = HC_IO;
		/* 502-504: the daemon is starting, stopping or overloaded;
		 * any other answer is the daemon's word on the message. */
		if (r == HC_OK && (h.status < 502 || h.status > 504))
			break;
		if (r == HC_OK)
			snprintf(hc_err, sizeof(hc_err), "parleyd answered %d",
			    h.status);
		hc_close(&h);
		if (interrupted)
			exit(0);
		if (since == 0)
			since = util_mono_ms();
		else if (util_mono_ms() - since > DOWN_MS)
			errx(EXIT_UNAVAIL, "%s; gave up sending after %d s; "
			    "check that parleyd runs", hc_err, DOWN_MS / 1000);
		usleep(backoff * 1000);
		if ((backoff *= 2) > 2000)
			backoff = 2000;
	}
	if (h.status / 100 == 2) {
		o = answer_json(&h);
		*seq = jseq(o);
		cJSON_Delete(o);
	} else {
		chat_nl(c);
		session_missing(&h, c->sid);
		c->refused++;
		rc = -1;
	}
	hc_close(&h);
	free(body);
	free(path);
	return rc;
}

static void
chat_send(struct chat *c, const char *text)
{
	cJSON *ev;
	char id[64];
	uint64_t seq = 0;
	size_t i;

	ev = client_event("chat", c->sid);
	/* The same id on every retry: the session applies it once. */
	snprintf(id, sizeof(id), "ctl-%s-%u", c->idbase, ++c->nsent);
	if (cJSON_AddStringToObject(ev, "id", id) == NULL ||
	    cJSON_AddStringToObject(ev, "message", text) == NULL)
		errx(EXIT_ERR, "out of memory");
	if (chat_post(c, ev, &seq) == 0) {
		c->want_stream = 1;
		for (i = 0; i < c->nturns; i++)
			if (c->turns[i].n == c->nsent)
				break;
		if (i == c->nturns) {
			if (c->nturns == c->capturns) {
				c->capturns = c->capturns ? c->capturns * 2 : 8;
				if ((c->turns = reallocarray(c->turns,
				    c->capturns, sizeof(*c->turns))) == NULL)
					errx(EXIT_ERR, "out of memory");
			}
			c->turns[c->nturns].seq = seq;
			c->turns[c->nturns].n = c->nsent;
			c->turns[c->nturns++].started = 0;
		}
	}
	cJSON_Delete(ev);
}

static void
chat_answer(struct chat *c, const char *text)
{
	struct approval *a = TAILQ_FIRST(&c->approvals);
	const char *decision = "reject";
	cJSON *ev;
	uint64_t seq;

	while (isspace((unsigned char)*text))
		text++;
	if (strcasecmp(text, "y") == 0 || strcasecmp(text, "yes") == 0)
		decision = "approve";
	else if (strcasecmp(text, "always") == 0 || strcasecmp(text, "a") == 0)
		decision = "always";
	ev = client_event("tool_approve", c->sid);
	if (cJSON_AddStringToObject(ev, "toolCallId", a->call) == NULL ||
	    cJSON_AddStringToObject(ev, "decision", decision) == NULL)
		errx(EXIT_ERR, "out of memory");
	chat_post(c, ev, &seq);
	cJSON_Delete(ev);
	approval_free(c, a);
}

/* Handles the complete lines in in; returns 1 when stdin ended. */
static int
chat_input(struct chat *c, struct buf *in)
{
	char tmp[4096], *nl;
	ssize_t n;
	int eof = 0;

	if ((n = read(STDIN_FILENO, tmp, sizeof(tmp))) == -1) {
		if (errno == EINTR || errno == EAGAIN)
			return 0;
		err(EXIT_ERR, "stdin");
	}
	if (n == 0)
		eof = 1;
	else
		buf_add(in, tmp, (size_t)n);
	if (eof && in->len > 0 && in->p[in->len - 1] != '\n')
		buf_add(in, "\n", 1);
	while (in->len > 0 && (nl = memchr(in->p, '\n', in->len)) != NULL) {
		*nl = '\0';
		if (nl > in->p && nl[-1] == '\r')
			nl[-1] = '\0';
		if (!TAILQ_EMPTY(&c->approvals))
			chat_answer(c, in->p);
		else if (in->p[0] != '\0')
			chat_send(c, in->p);
		buf_drop(in, (size_t)(nl - in->p) + 1);
	}
	if (in->len > MAX_EVENT)
		errx(EXIT_ERR, "stdin: a line longer than %u MiB",
		    MAX_EVENT >> 20);
	return eof;
}

int
cmd_chat(int argc, char **argv)
{
	struct pollfd pfd[2];
	struct buf in = { NULL, 0, 0 };
	struct chat c;
	struct hc h;
	uint64_t eof_at = 0, now;
	cJSON *o;
	char *path;
	int i, nfd, eof = 0;

	if ((i = cmd_args(argc, argv, "chat", 1)) < 0)
		return EXIT_USAGE;
	memset(&c, 0, sizeof(c));
	c.sid = argv[i];
	c.tty = isatty(STDIN_FILENO);
	TAILQ_INIT(&c.approvals);
	util_randhex(c.idbase, 8);
	/*
	 * Start live after what the session already logged; a session that
	 * does not exist yet is made by the first message, and its stream
	 * is followed from seq 1 then.
	 */
	path = session_path(c.sid, "");
	request(&h, "GET", path, NULL);
	free(path);
	follow_init(&c.f, c.sid, 0);
	c.f.on_event = chat_event;
	c.f.arg = &c;
	if (h.status == 200) {
		o = answer_json(&h);
		c.f.last = (uint64_t)fmax(0, jdbl(o, "lastSeq"));
		cJSON_Delete(o);
		c.want_stream = 1;
	} else if (h.status != 404) {
		i = session_missing(&h, c.sid);
		hc_close(&h);
		return i;
	}
	hc_close(&h);
	catch_sigint();
	chat_prompt(&c);
	while (!interrupted) {
		now = util_mono_ms();
		if (eof && (c.nturns == 0 || now >= eof_at))
			break;
		if (c.want_stream && c.f.h.fd == -1) {
			if (now >= c.f.retry_at)
				follow_open(&c.f);
			if (c.f.h.fd != -1)
				continue;
		}
		nfd = 0;
		if (c.f.h.fd != -1) {
			pfd[nfd].fd = c.f.h.fd;
			pfd[nfd++].events = POLLIN;
		}
		if (!eof) {
			pfd[nfd].fd = STDIN_FILENO;
			pfd[nfd++].events = POLLIN;
		}
		if (poll(pfd, nfd, c.want_stream ? follow_timeout(&c.f, 1000) :
		    1000) <= 0)
			continue;
		for (i = 0; i < nfd; i++) {
			if (pfd[i].revents == 0)
				continue;
			if (pfd[i].fd == STDIN_FILENO) {
				if (chat_input(&c, &in)) {
					eof = 1;
					eof_at = util_mono_ms() + EOF_WAIT_MS;
				}
			} else if (c.f.h.fd != -1)
				follow_read(&c.f);
		}
	}
	if (eof && c.nturns > 0 && !interrupted)
		warnx("session %s: no end of the turn within %d s; leaving it "
		    "running", c.sid, EOF_WAIT_MS / 1000);
	chat_nl(&c);
	while (!TAILQ_EMPTY(&c.approvals))
		approval_free(&c, TAILQ_FIRST(&c.approvals));
	follow_free(&c.f);
	buf_free(&in);
	free(c.turns);
	return c.refused > 0 ? EXIT_ERR : 0;
}
