/*
 * Who the client is behind a trusted proxy: the PROXY protocol header
 * (HAProxy's proxy-protocol.txt, v1 text and v2 binary), X-Forwarded-For,
 * and the address prefixes `trusted-proxy` names.  Pure functions on
 * bytes and strings: no sockets, no state, so they can be fuzzed.
 */
#ifndef PARLEY_PROXYPROTO_H
#define PARLEY_PROXYPROTO_H

#include <stddef.h>

#define PP_ADDR_MAX	46	/* INET6_ADDRSTRLEN */
#define PP_V1_MAX	107	/* the longest v1 line, CRLF included */
#define PP_V2_MAX	(16 + 1024)	/* a v2 header we accept, TLVs included */

/* An IPv4 (4 bytes of a) or IPv6 address; v4-mapped IPv6 counts as IPv4. */
struct pp_addr {
	int		 v6;
	unsigned char	 a[16];
};

/* ADDR/PREFIX: bits of prefix of addr. */
struct pp_cidr {
	struct pp_addr	 addr;
	unsigned	 prefix;
};

/* A numeric address; -1 when s is not one (no port, no brackets, no zone). */
int	pp_addr_parse(const char *s, struct pp_addr *);
/* "ADDR" or "ADDR/PREFIX"; -1 when malformed or the prefix is too long. */
int	pp_cidr_parse(const char *s, struct pp_cidr *);
int	pp_cidr_match(const struct pp_cidr *, const struct pp_addr *);
/* 1 if the numeric address s is in one of the n prefixes. */
int	pp_trusted(const struct pp_cidr *, unsigned n, const char *s);

enum pp_result {
	PP_NEED_MORE,	/* a prefix of a header: read more */
	PP_DONE,	/* a whole header: see struct pp_header */
	PP_NONE,	/* the bytes do not start a PROXY header */
	PP_ERROR	/* a malformed header: error says what */
};

struct pp_header {
	size_t		 len;		/* bytes of the header */
	int		 local;		/* LOCAL, UNKNOWN or a non-TCP family:
					   the proxy speaks for itself, use
					   the socket's peer */
	char		 src[PP_ADDR_MAX];	/* the client, numeric */
	unsigned	 src_port;
	const char	*error;		/* static, on PP_ERROR */
};

/*
 * Reads a PROXY header at the start of buf[0..len), v1 or v2.  Fills h
 * (zeroed first).  Never reads past len; PP_NEED_MORE only while len is
 * below PP_V2_MAX.
 */
enum pp_result pp_parse(const unsigned char *buf, size_t len,
	    struct pp_header *h);

/* 1 when buf[0..len) starts like a PROXY header (v1 or v2), or may. */
int	pp_looks_like(const unsigned char *buf, size_t len);

/*
 * The client address behind X-Forwarded-For values (the header's lines in
 * order, n of them) sent by peer, which is trusted: the rightmost address
 * that is not itself in trusted[0..ntrusted); the leftmost when all are;
 * stops at a malformed element (the hop right of it is the client).
 * Writes it to out (PP_ADDR_MAX bytes), normalized; peer when none.
 */
void	pp_forwarded_for(const char *const *values, unsigned n,
	    const struct pp_cidr *trusted, unsigned ntrusted, const char *peer,
	    char *out);

#endif
