#include <sys/types.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parley/util.h"

#include "rcluster.h"

/* While building a map: a slot whose master has no usable address. */
#define RCL_UNUSABLE	0xfffeu

#define RCL_URL_FORM	"cluster://[:password@]HOST:PORT[,HOST:PORT...]"

uint16_t
rcl_crc16(const void *buf, size_t len)
{
	const unsigned char	*p = buf;
	uint16_t		 crc = 0;
	size_t			 i;
	int			 b;

	/* Bitwise, no table: keys are short and hashed once per session. */
	for (i = 0; i < len; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) :
			    (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned
rcl_keyslot(const void *key, size_t len)
{
	const char	*k = key, *open, *close;

	if ((open = memchr(k, '{', len)) != NULL) {
		close = memchr(open + 1, '}', len - (size_t)(open + 1 - k));
		if (close != NULL && close > open + 1)
			return rcl_crc16(open + 1, (size_t)(close - open - 1)) &
			    (RCL_SLOTS - 1);
	}
	return rcl_crc16(k, len) & (RCL_SLOTS - 1);
}

/* A decimal number up to max: 1 to 10 digits, no sign, no spaces. */
static int
rcl_num(const char *s, size_t len, unsigned long max, unsigned long *out)
{
	unsigned long	 v = 0;
	size_t		 i;

	if (len == 0 || len > 10)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

/* A host name or an IPv4 address ("." "-" "_" and alphanumerics). */
static int
rcl_hostchars(const char *h, size_t len)
{
	size_t	 i;

	for (i = 0; i < len; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') ||
		    (h[i] >= 'A' && h[i] <= 'Z') ||
		    (h[i] >= '0' && h[i] <= '9') ||
		    h[i] == '.' || h[i] == '-' || h[i] == '_'))
			return -1;
	return 0;
}

/* An IPv6 address, without brackets. */
static int
rcl_v6chars(const char *h, size_t len)
{
	char		 buf[INET6_ADDRSTRLEN];
	struct in6_addr	 in6;

	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, h, len);
	buf[len] = '\0';
	return inet_pton(AF_INET6, buf, &in6) == 1 ? 0 : -1;
}

static int	rcl_urlerr(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

static int
rcl_urlerr(char *err, size_t errlen, const char *fmt, ...)
{
	char	 msg[200];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Never echo the url: it may hold the password. */
	snprintf(err, errlen, "store: cluster url: %s (expected %s)", msg,
	    RCL_URL_FORM);
	errno = EINVAL;
	return -1;
}

/* HOST:PORT or [V6]:PORT, len bytes at p, into a. */
static int
rcl_hostport(const char *p, size_t len, struct rcl_addr *a, char *err,
    size_t errlen)
{
	const char	*host, *colon, *rb;
	size_t		 hl;
	unsigned long	 port;

	if (len == 0)
		return rcl_urlerr(err, errlen, "empty HOST:PORT");
	if (p[0] == '[') {
		if ((rb = memchr(p, ']', len)) == NULL)
			return rcl_urlerr(err, errlen,
			    "unterminated [IPv6 address]");
		host = p + 1;
		hl = (size_t)(rb - host);
		colon = rb + 1;
		if (colon == p + len || *colon != ':')
			return rcl_urlerr(err, errlen,
			    "missing :PORT after the host");
		if (hl > 0 && rcl_v6chars(host, hl) == -1)
			return rcl_urlerr(err, errlen, "bad IPv6 address");
	} else {
		if ((colon = memchr(p, ':', len)) == NULL)
			return rcl_urlerr(err, errlen,
			    "missing :PORT after host \"%.*s\"",
			    (int)(len > 64 ? 64 : len), p);
		if (memchr(colon + 1, ':', len - (size_t)(colon + 1 - p)))
			return rcl_urlerr(err, errlen,
			    "IPv6 addresses go in brackets");
		host = p;
		hl = (size_t)(colon - p);
		if (rcl_hostchars(host, hl) == -1)
			return rcl_urlerr(err, errlen,
			    "bad character in host \"%.*s\"",
			    (int)(hl > 64 ? 64 : hl), host);
	}
	if (hl == 0)
		return rcl_urlerr(err, errlen, "empty host");
	if (hl > RCL_HOST_MAX)
		return rcl_urlerr(err, errlen, "host name longer than %d bytes",
		    RCL_HOST_MAX);
	len -= (size_t)(colon + 1 - p);
	if (rcl_num(colon + 1, len, 65535, &port) == -1 || port == 0)
		return rcl_urlerr(err, errlen,
		    "port \"%.*s\" is not a number from 1 to 65535",
		    (int)(len > 16 ? 16 : len), colon + 1);
	memcpy(a->host, host, hl);
	a->host[hl] = '\0';
	a->port = (int)port;
	return 0;
}

/* The %-decoded password between p and at, into u->pass. */
static int
rcl_password(const char *p, const char *at, struct rcl_url *u, char *err,
    size_t errlen)
{
	const char	*q;
	char		*pw;
	size_t		 i, plen;
	int		 hi, lo;

	if (p[0] != ':')
		return rcl_urlerr(err, errlen,
		    "user names are not supported, write :password@");
	plen = (size_t)(at - p - 1);
	if (plen == 0)
		return rcl_urlerr(err, errlen, "empty password");
	if (plen > RCL_PASS_MAX)
		return rcl_urlerr(err, errlen, "password longer than %d bytes",
		    RCL_PASS_MAX);
	if ((pw = malloc(plen + 1)) == NULL) {
		snprintf(err, errlen, "store: %s", strerror(errno));
		return -1;
	}
	for (i = 0, q = p + 1; q < at; q++) {
		if (*q != '%') {
			pw[i++] = *q;
			continue;
		}
		/* No %00: the password goes to AUTH as a C string. */
		if (at - q < 3 || (hi = util_hexval(q[1])) == -1 ||
		    (lo = util_hexval(q[2])) == -1 || hi * 16 + lo == 0) {
			explicit_bzero(pw, plen + 1);
			free(pw);
			return rcl_urlerr(err, errlen,
			    "bad %%-escape in the password");
		}
		pw[i++] = (char)(hi * 16 + lo);
		q += 2;
	}
	pw[i] = '\0';
	u->pass = pw;
	return 0;
}

int
rcl_parse_url(const char *url, struct rcl_url *u, char *err, size_t errlen)
{
	static const char	 scheme[] = "cluster://";
	const char		*p, *at, *end, *q, *comma;

	memset(u, 0, sizeof(*u));
	if (strncmp(url, scheme, sizeof(scheme) - 1) != 0)
		return rcl_urlerr(err, errlen, "it must start with %s",
		    scheme);
	p = url + sizeof(scheme) - 1;
	if (strpbrk(p, "?#") != NULL)
		return rcl_urlerr(err, errlen, "no query or fragment allowed");
	/* The last '@': a password may hold '@' only %-encoded, but a
	 * plain one must not be cut short. */
	if ((at = strrchr(p, '@')) != NULL) {
		if (rcl_password(p, at, u, err, errlen) == -1)
			return -1;
		p = at + 1;
	}
	if (strchr(p, '/') != NULL) {
		rcl_url_free(u);
		return rcl_urlerr(err, errlen, "a cluster has database 0 only: "
		    "remove the /DB");
	}
	end = p + strlen(p);
	if (end == p) {
		rcl_url_free(u);
		return rcl_urlerr(err, errlen, "missing HOST:PORT");
	}
	for (q = p; ; q = comma + 1) {
		if ((comma = memchr(q, ',', (size_t)(end - q))) == NULL)
			comma = end;
		if (u->nseeds == RCL_SEEDS_MAX) {
			rcl_url_free(u);
			return rcl_urlerr(err, errlen, "more than %d HOST:PORT",
			    RCL_SEEDS_MAX);
		}
		if (rcl_hostport(q, (size_t)(comma - q),
		    &u->seeds[u->nseeds], err, errlen) == -1) {
			rcl_url_free(u);
			return -1;
		}
		u->nseeds++;
		if (comma == end)
			break;
	}
	return 0;
}

void
rcl_url_free(struct rcl_url *u)
{
	if (u->pass != NULL) {
		explicit_bzero(u->pass, strlen(u->pass));
		free(u->pass);
	}
	memset(u, 0, sizeof(*u));
}

static struct rcl_map *
rcl_maperr(struct rcl_map *m, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static struct rcl_map *
rcl_maperr(struct rcl_map *m, char *err, size_t errlen, const char *fmt, ...)
{
	char	 msg[200];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "store: bad CLUSTER SLOTS reply: %s", msg);
	rcl_map_free(m);
	errno = EINVAL;
	return NULL;
}

/* A reply element that is an integer from 0 to max. */
static int
rcl_int(const redisReply *r, long long max, long long *out)
{
	if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < 0 ||
	    r->integer > max)
		return -1;
	*out = r->integer;
	return 0;
}

/*
 * The address a node element ([endpoint, port, id, ...]) names, into a.
 * 1 when it names none that can be used ("?": a hostname endpoint the
 * node does not know), 0 when it does, -1 when it is malformed.
 */
static int
rcl_node_addr(const redisReply *n, const char *asked, struct rcl_addr *a)
{
	const redisReply	*ep;
	long long		 port;
	const char		*h;
	size_t			 hl;

	if (n == NULL || n->type != REDIS_REPLY_ARRAY || n->elements < 2)
		return -1;
	ep = n->element[0];
	if (rcl_int(n->element[1], 65535, &port) == -1 || port == 0)
		return -1;
	if (ep == NULL)
		return -1;
	/* NULL: an unknown endpoint, "": a node not knowing its own
	 * address yet; both are where the reply came from. */
	if (ep->type == REDIS_REPLY_NIL || (ep->type == REDIS_REPLY_STRING &&
	    ep->len == 0)) {
		h = asked;
		hl = strlen(asked);
	} else if (ep->type == REDIS_REPLY_STRING) {
		h = ep->str;
		hl = ep->len;
		if (hl == 1 && h[0] == '?')
			return 1;
	} else
		return -1;
	if (hl == 0 || hl > RCL_HOST_MAX ||
	    (rcl_hostchars(h, hl) == -1 && rcl_v6chars(h, hl) == -1))
		return -1;
	memcpy(a->host, h, hl);
	a->host[hl] = '\0';
	a->port = (int)port;
	return 0;
}

/* The index of a in m->nodes, added when new; -1 when m is full. */
static int
rcl_map_add(struct rcl_map *m, const struct rcl_addr *a)
{
	int	 i;

	if ((i = rcl_map_find(m, a)) != -1)
		return i;
	if (m->nnodes == RCL_NODES_MAX)
		return -1;
	m->nodes[m->nnodes] = *a;
	return (int)m->nnodes++;
}

struct rcl_map *
rcl_map_build(const redisReply *r, const char *asked, char *err,
    size_t errlen)
{
	struct rcl_map		*m;
	const redisReply	*e;
	struct rcl_addr		 a;
	long long		 lo, hi, s;
	size_t			 i;
	int			 idx, rv;

	if ((m = calloc(1, sizeof(*m))) == NULL ||
	    (m->nodes = calloc(RCL_NODES_MAX, sizeof(*m->nodes))) == NULL) {
		snprintf(err, errlen, "store: %s", strerror(ENOMEM));
		rcl_map_free(m);
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0; i < RCL_SLOTS; i++)
		m->slot[i] = RCL_NOSLOT;
	if (r == NULL)
		return rcl_maperr(m, err, errlen, "no reply");
	if (r->type == REDIS_REPLY_ERROR)
		return rcl_maperr(m, err, errlen, "error \"%.*s\" (is "
		    "cluster-enabled set on that node?)",
		    (int)(r->len > 100 ? 100 : r->len), r->str);
	if (r->type != REDIS_REPLY_ARRAY)
		return rcl_maperr(m, err, errlen, "not an array (type %d)",
		    r->type);
	if (r->elements > RCL_RANGES_MAX)
		return rcl_maperr(m, err, errlen, "%zu ranges, more than %d",
		    r->elements, RCL_RANGES_MAX);
	for (i = 0; i < r->elements; i++) {
		e = r->element[i];
		if (e == NULL || e->type != REDIS_REPLY_ARRAY ||
		    e->elements < 3)
			return rcl_maperr(m, err, errlen, "range %zu is not "
			    "[start, end, master, ...]", i);
		if (rcl_int(e->element[0], RCL_SLOTS - 1, &lo) == -1 ||
		    rcl_int(e->element[1], RCL_SLOTS - 1, &hi) == -1 ||
		    lo > hi)
			return rcl_maperr(m, err, errlen, "range %zu: slots "
			    "are not 0 <= start <= end <= %d", i,
			    RCL_SLOTS - 1);
		if ((rv = rcl_node_addr(e->element[2], asked, &a)) == -1)
			return rcl_maperr(m, err, errlen, "range %zu: the "
			    "master is not [host, port 1-65535, ...]", i);
		idx = -1;
		if (rv == 0 && (idx = rcl_map_add(m, &a)) == -1)
			return rcl_maperr(m, err, errlen, "more than %d "
			    "masters", RCL_NODES_MAX);
		for (s = lo; s <= hi; s++) {
			/* Two ranges naming one slot: no consistent map. */
			if (m->slot[s] != RCL_NOSLOT)
				return rcl_maperr(m, err, errlen, "slot %lld "
				    "is in two ranges", s);
			m->slot[s] = idx == -1 ? RCL_UNUSABLE : (uint16_t)idx;
			if (idx != -1)
				m->covered++;
		}
	}
	for (i = 0; i < RCL_SLOTS; i++)
		if (m->slot[i] == RCL_UNUSABLE)
			m->slot[i] = RCL_NOSLOT;
	return m;
}

void
rcl_map_free(struct rcl_map *m)
{
	if (m == NULL)
		return;
	free(m->nodes);
	free(m);
}

const struct rcl_addr *
rcl_map_node(const struct rcl_map *m, unsigned slot)
{
	if (slot >= RCL_SLOTS || m->slot[slot] == RCL_NOSLOT)
		return NULL;
	return &m->nodes[m->slot[slot]];
}

int
rcl_map_same(const struct rcl_map *a, const struct rcl_map *b)
{
	const struct rcl_addr	*x, *y;
	unsigned		 i;

	for (i = 0; i < RCL_SLOTS; i++) {
		x = rcl_map_node(a, i);
		y = rcl_map_node(b, i);
		if (x == NULL || y == NULL) {
			if (x != y)
				return 0;
		} else if (x->port != y->port ||
		    strcasecmp(x->host, y->host) != 0)
			return 0;
	}
	return 1;
}

int
rcl_map_find(const struct rcl_map *m, const struct rcl_addr *a)
{
	size_t	 i;

	for (i = 0; i < m->nnodes; i++)
		if (m->nodes[i].port == a->port &&
		    strcasecmp(m->nodes[i].host, a->host) == 0)
			return (int)i;
	return -1;
}

enum rcl_redirect
rcl_parse_redirect(const char *s, size_t len, const char *asked,
    unsigned *slot, struct rcl_addr *to)
{
	enum rcl_redirect	 kind;
	const char		*p, *end = s + len, *sp, *colon, *h;
	unsigned long		 v, port;
	size_t			 hl;

	if (len >= 6 && memcmp(s, "MOVED ", 6) == 0) {
		kind = RCL_REDIR_MOVED;
		p = s + 6;
	} else if (len >= 4 && memcmp(s, "ASK ", 4) == 0) {
		kind = RCL_REDIR_ASK;
		p = s + 4;
	} else
		return RCL_REDIR_NONE;
	if ((sp = memchr(p, ' ', (size_t)(end - p))) == NULL ||
	    rcl_num(p, (size_t)(sp - p), RCL_SLOTS - 1, &v) == -1)
		return RCL_REDIR_BAD;
	p = sp + 1;
	/* The port follows the last ':': an IPv6 host is not bracketed. */
	for (colon = end; colon > p && colon[-1] != ':'; colon--)
		;
	if (colon == p)
		return RCL_REDIR_BAD;
	colon--;
	if (rcl_num(colon + 1, (size_t)(end - colon - 1), 65535, &port) ==
	    -1 || port == 0)
		return RCL_REDIR_BAD;
	h = p;
	hl = (size_t)(colon - p);
	if (hl == 0) {		/* an unknown endpoint: the node asked */
		h = asked;
		hl = strlen(asked);
	}
	if (hl == 0 || hl > RCL_HOST_MAX ||
	    (rcl_hostchars(h, hl) == -1 && rcl_v6chars(h, hl) == -1))
		return RCL_REDIR_BAD;
	memcpy(to->host, h, hl);
	to->host[hl] = '\0';
	to->port = (int)port;
	*slot = (unsigned)v;
	return kind;
}
