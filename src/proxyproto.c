#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/proxyproto.h"

static const unsigned char v2sig[12] = {
	0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a
};

static const unsigned char v4mapped[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

int
pp_addr_parse(const char *s, struct pp_addr *a)
{
	struct in6_addr	 in6;

	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, a->a) == 1)
		return 0;
	if (inet_pton(AF_INET6, s, &in6) != 1)
		return -1;
	if (memcmp(in6.s6_addr, v4mapped, sizeof(v4mapped)) == 0) {
		memcpy(a->a, in6.s6_addr + 12, 4);
		return 0;
	}
	a->v6 = 1;
	memcpy(a->a, in6.s6_addr, 16);
	return 0;
}

/* The normalized text of a into out (PP_ADDR_MAX bytes). */
static void
addr_text(const struct pp_addr *a, char *out)
{
	if (inet_ntop(a->v6 ? AF_INET6 : AF_INET, a->a, out, PP_ADDR_MAX) ==
	    NULL)
		snprintf(out, PP_ADDR_MAX, "?");
}

int
pp_cidr_parse(const char *s, struct pp_cidr *c)
{
	char		 buf[PP_ADDR_MAX];
	const char	*slash = strchr(s, '/');
	size_t		 alen = slash ? (size_t)(slash - s) : strlen(s);
	unsigned	 max, v = 0;
	const char	*d;

	if (alen == 0 || alen >= sizeof(buf))
		return -1;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (pp_addr_parse(buf, &c->addr) == -1)
		return -1;
	/* A v4-mapped prefix counts its bits in IPv4. */
	max = c->addr.v6 ? 128 : 32;
	if (slash == NULL) {
		c->prefix = max;
		return 0;
	}
	if (slash[1] == '\0' || strlen(slash + 1) > 3)
		return -1;
	for (d = slash + 1; *d != '\0'; d++) {
		if (*d < '0' || *d > '9')
			return -1;
		v = v * 10 + (unsigned)(*d - '0');
	}
	if (strchr(buf, ':') != NULL && !c->addr.v6) {
		if (v < 96)
			return -1;
		v -= 96;
	}
	if (v > max)
		return -1;
	c->prefix = v;
	return 0;
}

int
pp_cidr_match(const struct pp_cidr *c, const struct pp_addr *a)
{
	unsigned	 full = c->prefix / 8, rest = c->prefix % 8;
	unsigned char	 mask;

	if (c->addr.v6 != a->v6)
		return 0;
	if (memcmp(c->addr.a, a->a, full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (unsigned char)(0xff << (8 - rest));
	return (c->addr.a[full] & mask) == (a->a[full] & mask);
}

int
pp_trusted(const struct pp_cidr *t, unsigned n, const char *s)
{
	struct pp_addr	 a;
	unsigned	 i;

	if (pp_addr_parse(s, &a) == -1)
		return 0;
	for (i = 0; i < n; i++)
		if (pp_cidr_match(&t[i], &a))
			return 1;
	return 0;
}

int
pp_looks_like(const unsigned char *buf, size_t len)
{
	size_t		 n;

	n = len < 6 ? len : 6;
	if (memcmp(buf, "PROXY ", n) == 0)
		return 1;
	n = len < sizeof(v2sig) ? len : sizeof(v2sig);
	return memcmp(buf, v2sig, n) == 0;
}

static enum pp_result
pp_fail(struct pp_header *h, const char *why)
{
	h->error = why;
	return PP_ERROR;
}

/* A v1 port: 1-5 digits, no leading zero, at most 65535; -1 if not. */
static long
v1_port(const char *s)
{
	long		 v = 0;
	size_t		 n = strlen(s), i;

	if (n == 0 || n > 5 || (s[0] == '0' && n > 1))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v > 65535 ? -1 : v;
}

/* "PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n" or "PROXY UNKNOWN ...\r\n". */
static enum pp_result
parse_v1(const unsigned char *buf, size_t len, struct pp_header *h)
{
	char		 line[PP_V1_MAX + 1], *f[7], *s;
	struct pp_addr	 a;
	const unsigned char *cr;
	size_t		 n;
	int		 nf = 0, v6;

	n = len < PP_V1_MAX ? len : PP_V1_MAX;
	cr = memchr(buf, '\r', n);
	/* A bare LF before any CR decides now, whatever comes after: the
	 * verdict must not depend on where a read ended (fuzz/proxyproto.c). */
	if (memchr(buf, '\n', cr != NULL ? (size_t)(cr - buf) : n) != NULL)
		return pp_fail(h, "PROXY v1 line must end in CRLF");
	if (cr == NULL) {
		if (len >= PP_V1_MAX)
			return pp_fail(h, "PROXY v1 line too long");
		return PP_NEED_MORE;
	}
	n = (size_t)(cr - buf);
	if (n + 1 >= len)
		return PP_NEED_MORE;
	if (cr[1] != '\n')
		return pp_fail(h, "PROXY v1 line must end in CRLF");
	memcpy(line, buf, n);
	line[n] = '\0';
	if (memchr(buf, '\0', n) != NULL || memchr(buf, '\n', n) != NULL)
		return pp_fail(h, "control character in PROXY v1 line");
	h->len = n + 2;
	if (h->len > PP_V1_MAX)
		return pp_fail(h, "PROXY v1 line too long");
	/* Fields are separated by exactly one space. */
	for (s = line; nf < 7;) {
		f[nf++] = s;
		if ((s = strchr(s, ' ')) == NULL)
			break;
		*s++ = '\0';
	}
	if (nf < 2)
		return pp_fail(h, "malformed PROXY v1 line");
	if (strcmp(f[1], "UNKNOWN") == 0) {
		h->local = 1;
		return PP_DONE;
	}
	if (strcmp(f[1], "TCP4") == 0)
		v6 = 0;
	else if (strcmp(f[1], "TCP6") == 0)
		v6 = 1;
	else
		return pp_fail(h, "PROXY v1 protocol must be TCP4, TCP6 or "
		    "UNKNOWN");
	if (nf != 6 || s != NULL)
		return pp_fail(h, "malformed PROXY v1 line");
	if (inet_pton(v6 ? AF_INET6 : AF_INET, f[2], a.a) != 1 ||
	    inet_pton(v6 ? AF_INET6 : AF_INET, f[3], a.a) != 1)
		return pp_fail(h, "bad address in PROXY v1 line");
	if (v1_port(f[4]) == -1 || v1_port(f[5]) == -1)
		return pp_fail(h, "bad port in PROXY v1 line");
	if (pp_addr_parse(f[2], &a) == -1)
		return pp_fail(h, "bad address in PROXY v1 line");
	addr_text(&a, h->src);
	h->src_port = (unsigned)v1_port(f[4]);
	return PP_DONE;
}

static enum pp_result
parse_v2(const unsigned char *buf, size_t len, struct pp_header *h)
{
	struct pp_addr	 a;
	size_t		 alen;
	unsigned	 cmd, fam;

	if (len < 16)
		return PP_NEED_MORE;
	if ((buf[12] >> 4) != 2)
		return pp_fail(h, "PROXY v2 header of another version");
	cmd = buf[12] & 0x0f;
	fam = buf[13];
	alen = (size_t)buf[14] << 8 | buf[15];
	if (16 + alen > PP_V2_MAX)
		return pp_fail(h, "PROXY v2 header too long");
	if (len < 16 + alen)
		return PP_NEED_MORE;
	h->len = 16 + alen;
	if (cmd > 1)
		return pp_fail(h, "PROXY v2 command must be LOCAL or PROXY");
	if (cmd == 0) {			/* LOCAL: the proxy's own check */
		h->local = 1;
		return PP_DONE;
	}
	memset(&a, 0, sizeof(a));
	switch (fam) {
	case 0x11:			/* TCP over IPv4 */
		if (alen < 12)
			return pp_fail(h, "PROXY v2 address block too short");
		memcpy(a.a, buf + 16, 4);
		h->src_port = (unsigned)buf[24] << 8 | buf[25];
		break;
	case 0x21:			/* TCP over IPv6 */
		if (alen < 36)
			return pp_fail(h, "PROXY v2 address block too short");
		a.v6 = 1;
		memcpy(a.a, buf + 16, 16);
		h->src_port = (unsigned)buf[48] << 8 | buf[49];
		if (memcmp(a.a, v4mapped, sizeof(v4mapped)) == 0) {
			memmove(a.a, a.a + 12, 4);
			memset(a.a + 4, 0, 12);
			a.v6 = 0;
		}
		break;
	default:
		/* UNSPEC, UDP, unix sockets: the spec says use the real
		 * connection's addresses. */
		h->local = 1;
		return PP_DONE;
	}
	addr_text(&a, h->src);
	return PP_DONE;
}

enum pp_result
pp_parse(const unsigned char *buf, size_t len, struct pp_header *h)
{
	memset(h, 0, sizeof(*h));
	if (len == 0)
		return PP_NEED_MORE;
	if (!pp_looks_like(buf, len))
		return PP_NONE;
	if (buf[0] == 'P') {
		if (len < 6)
			return PP_NEED_MORE;
		return parse_v1(buf, len, h);
	}
	if (len < sizeof(v2sig))
		return PP_NEED_MORE;
	return parse_v2(buf, len, h);
}

void
pp_forwarded_for(const char *const *values, unsigned n,
    const struct pp_cidr *trusted, unsigned ntrusted, const char *peer,
    char *out)
{
	char		 el[PP_ADDR_MAX];
	struct pp_addr	 a;
	const char	*v, *s, *e;
	unsigned	 i, k;

	snprintf(out, PP_ADDR_MAX, "%s", peer);
	/* Right to left over the lines, then over each line's elements. */
	for (i = n; i-- > 0;) {
		v = values[i];
		e = v + strlen(v);
		for (;;) {
			for (s = e; s > v && s[-1] != ','; s--)
				;
			k = 0;
			while (s + k < e && (s[k] == ' ' || s[k] == '\t'))
				k++;
			while (e > s + k && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if ((size_t)(e - (s + k)) >= sizeof(el))
				return;
			memcpy(el, s + k, (size_t)(e - (s + k)));
			el[e - (s + k)] = '\0';
			if (pp_addr_parse(el, &a) == -1)
				return;
			addr_text(&a, out);
			for (k = 0; k < ntrusted; k++)
				if (pp_cidr_match(&trusted[k], &a))
					break;
			if (k == ntrusted)
				return;
			if (s == v)
				break;
			e = s - 1;
		}
	}
}
