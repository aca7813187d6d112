/*
 * Session log epochs (parley/epoch.h): the list's text form, the new
 * epoch's token, and the decision a resume takes.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "parley/epoch.h"
#include "parley/util.h"

int
epoch_parse(struct epochs *e, const char *s, size_t len)
{
	const char	*p = s, *end = s + len, *colon, *comma;
	struct epoch	*v;
	uint64_t	 from;
	size_t		 i;

	e->n = 0;
	while (p < end) {
		if (e->n == EPOCH_KEEP)
			goto bad;
		comma = memchr(p, ',', (size_t)(end - p));
		if (comma == NULL)
			comma = end;
		colon = memchr(p, ':', (size_t)(comma - p));
		if (colon == NULL || colon - p != EPOCH_TOKEN_LEN ||
		    comma - colon < 2 || comma - colon > 21)
			goto bad;
		v = &e->v[e->n];
		for (i = 0; i < EPOCH_TOKEN_LEN; i++) {
			if (!isxdigit((unsigned char)p[i]))
				goto bad;
			v->token[i] = (char)tolower((unsigned char)p[i]);
		}
		v->token[EPOCH_TOKEN_LEN] = '\0';
		from = 0;
		for (p = colon + 1; p < comma; p++) {
			if (*p < '0' || *p > '9' ||
			    from > (UINT64_MAX - 9) / 10)
				goto bad;
			from = from * 10 + (uint64_t)(*p - '0');
		}
		if (from == 0)
			goto bad;
		v->from = from;
		e->n++;
		p = comma < end ? comma + 1 : end;
		if (comma + 1 == end)
			goto bad;		/* a trailing ',' */
	}
	return 0;
bad:
	e->n = 0;
	return -1;
}

void
epoch_format(const struct epochs *e, char *buf, size_t len)
{
	size_t	 i, off = 0;
	int	 n;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (i = 0; i < e->n; i++) {
		n = snprintf(buf + off, len - off, "%s%s:%llu", i ? "," : "",
		    e->v[i].token, (unsigned long long)e->v[i].from);
		if (n < 0 || (size_t)n >= len - off) {
			buf[off] = '\0';
			return;
		}
		off += (size_t)n;
	}
}

const char *
epoch_current(const struct epochs *e)
{
	return e->n > 0 ? e->v[e->n - 1].token : "";
}

int
epoch_valid(const char *s)
{
	size_t	 i;

	if (s[0] == '\0')
		return 1;
	for (i = 0; i < EPOCH_TOKEN_LEN; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return s[EPOCH_TOKEN_LEN] == '\0';
}

void
epoch_token(char *out)
{
	util_randhex(out, EPOCH_TOKEN_LEN / 2);
}

void
epoch_push(struct epochs *e, const char *token, uint64_t from)
{
	if (e->n == EPOCH_KEEP) {
		if (e->v[0].from < e->v[1].from)
			e->v[1].from = e->v[0].from;
		memmove(&e->v[0], &e->v[1], (EPOCH_KEEP - 1) * sizeof(e->v[0]));
		e->n--;
	}
	snprintf(e->v[e->n].token, sizeof(e->v[0].token), "%s", token);
	e->v[e->n].from = from;
	e->n++;
}

int
epoch_known(const struct epochs *e, const char *token)
{
	size_t	 i;

	for (i = 0; i < e->n; i++)
		if (strcasecmp(e->v[i].token, token) == 0)
			return 1;
	return 0;
}

int
epoch_resume(const struct epochs *e, const char *client, uint64_t last,
    uint64_t *from)
{
	size_t		 i, k = 0;
	uint64_t	 min = UINT64_MAX;

	/* Epochs after the client's: k is the first of them. */
	if (client[0] != '\0')
		for (i = e->n; i-- > 0;)
			if (strcasecmp(e->v[i].token, client) == 0) {
				k = i + 1;
				break;
			}
	/* A rewrite may start below a later one's: the earliest counts. */
	for (i = k; i < e->n; i++)
		if (e->v[i].from < min)
			min = e->v[i].from;
	if (min == UINT64_MAX || last < min)
		return 0;
	*from = min;
	return 1;
}
