/*
 * A session log's epochs: when a log's history may have been rewritten
 * (a store failover lost events another process had acknowledged, so
 * that the next events took their seqs), a new epoch starts, naming the
 * seq the rewrite starts at.  A client resumes with the epoch and seq it
 * saw; one whose epoch is stale and whose seq reaches into a rewrite is
 * told (RESUME_GAP with the current epoch) and replayed from the rewrite
 * instead of silently missing the events that replaced what it saw.
 *
 * Text form, as the store keeps it: "TOKEN:FROM,TOKEN:FROM,...", oldest
 * first, at most EPOCH_KEEP; "" for a log never rewritten (epoch "").
 */
#ifndef PARLEY_EPOCH_H
#define PARLEY_EPOCH_H

#include <stddef.h>
#include <stdint.h>

#define EPOCH_TOKEN_LEN	8		/* lowercase hex */
#define EPOCH_KEEP	8
#define EPOCH_TEXT_MAX	(EPOCH_KEEP * (EPOCH_TOKEN_LEN + 22))

struct epoch {
	char		 token[EPOCH_TOKEN_LEN + 1];
	uint64_t	 from;		/* the first seq of the new history */
};

struct epochs {
	struct epoch	 v[EPOCH_KEEP];	/* oldest first */
	size_t		 n;
};

/* Parses the text form (len bytes).  0, or -1 if malformed (e->n 0). */
int		 epoch_parse(struct epochs *, const char *, size_t);
/* The text form into buf (NUL-terminated); "" when none. */
void		 epoch_format(const struct epochs *, char *, size_t);
/* The current epoch's token, "" for a log never rewritten. */
const char	*epoch_current(const struct epochs *);
/* 1 if s is an epoch a client may name: "" or EPOCH_TOKEN_LEN hex. */
int		 epoch_valid(const char *);
/* A new random token into out (EPOCH_TOKEN_LEN + 1 bytes). */
void		 epoch_token(char *);
/*
 * Starts an epoch at from.  Past EPOCH_KEEP the oldest goes, and its
 * from is folded into the next one's (min): a client of a forgotten
 * epoch is then replayed from no later than any rewrite it may predate.
 */
void		 epoch_push(struct epochs *, const char *token, uint64_t from);
/*
 * A client resumes after seq last in epoch client ("" for none).  Returns
 * 0: its events are the log's, resume normally; 1: events it has from
 * *from on may have been rewritten, replay from there.  An epoch the
 * list does not hold (forgotten, or not this log's) counts as older than
 * every one it holds.
 */
int		 epoch_resume(const struct epochs *, const char *client,
		    uint64_t last, uint64_t *from);
/* Whether the list holds token (case aside). */
int		 epoch_known(const struct epochs *, const char *token);

#endif
