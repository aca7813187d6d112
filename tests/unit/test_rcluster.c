#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/rcluster.c"
#include "check_main.h"

/* --- hand-built replies --- */

static redisReply *
r_new(int type)
{
	redisReply	*r = calloc(1, sizeof(*r));

	ck_assert_ptr_nonnull(r);
	r->type = type;
	return r;
}

static redisReply *
r_int(long long v)
{
	redisReply	*r = r_new(REDIS_REPLY_INTEGER);

	r->integer = v;
	return r;
}

static redisReply *
r_strn(int type, const char *s, size_t len)
{
	redisReply	*r = r_new(type);

	r->str = malloc(len + 1);
	ck_assert_ptr_nonnull(r->str);
	memcpy(r->str, s, len);
	r->str[len] = '\0';
	r->len = len;
	return r;
}

static redisReply *
r_str(const char *s)
{
	return r_strn(REDIS_REPLY_STRING, s, strlen(s));
}

static redisReply *
r_nil(void)
{
	return r_new(REDIS_REPLY_NIL);
}

/* An array of n elements (NULL-terminated argument list, n counted). */
static redisReply *
r_arr(redisReply *first, ...)
{
	redisReply	*r = r_new(REDIS_REPLY_ARRAY), *e;
	va_list		 ap;
	size_t		 n = 0;

	r->element = calloc(64, sizeof(*r->element));
	ck_assert_ptr_nonnull(r->element);
	va_start(ap, first);
	for (e = first; e != NULL; e = va_arg(ap, redisReply *)) {
		ck_assert_uint_lt(n, 64);
		r->element[n++] = e;
	}
	va_end(ap);
	r->elements = n;
	return r;
}

static void
r_free(redisReply *r)
{
	size_t	 i;

	if (r == NULL)
		return;
	for (i = 0; i < r->elements; i++)
		r_free(r->element[i]);
	free(r->element);
	free(r->str);
	free(r);
}

/* [ip, port, id, []], as Redis 7.0 sends a node. */
static redisReply *
r_node(const char *ip, long long port, const char *id)
{
	return r_arr(ip ? r_str(ip) : r_nil(), r_int(port), r_str(id),
	    r_arr(NULL), NULL);
}

static redisReply *
r_range(long long lo, long long hi, redisReply *master, redisReply *replica)
{
	return r_arr(r_int(lo), r_int(hi), master, replica, NULL);
}

/* --- CRC16 and slots --- */

START_TEST(test_crc16_vector)
{
	/* The cluster specification's test vector. */
	ck_assert_uint_eq(rcl_crc16("123456789", 9), 0x31C3);
	ck_assert_uint_eq(rcl_crc16("", 0), 0);
	ck_assert_uint_eq(rcl_keyslot("123456789", 9), 0x31C3 & 16383);
}
END_TEST

/*
 * Recorded from `redis-cli CLUSTER KEYSLOT KEY` on redis-server 7.0.15
 * (Debian 12) started with --cluster-enabled yes (a single node: the
 * command needs no slots assigned).
 */
static const struct {
	const char	*key;
	unsigned	 slot;
} keyslots[] = {
	{ "123456789", 12739 },
	{ "foo", 12182 },
	{ "bar", 5061 },
	{ "hello", 866 },
	{ "", 0 },
	{ "a", 15495 },
	{ "{}", 15257 },		/* empty tag: the whole key */
	{ "{a", 10276 },		/* no '}': the whole key */
	{ "a{}{b}", 15033 },		/* first tag empty: the whole key */
	{ "{a}{b}", 15495 },		/* "a" */
	{ "a{b}}", 3300 },		/* "b" */
	{ "{{a}}", 10276 },		/* "{a" */
	{ "{user1000}.following", 3443 },
	{ "{user1000}.followers", 3443 },
	{ "foo{}{bar}", 8363 },
	{ "foo{{bar}}zap", 4015 },	/* "{bar" */
	{ "foo{bar}{zap}", 5061 },	/* "bar" */
	{ "parley:{s-0123456789abcdef}:log", 15376 },
	{ "parley:{s-0123456789abcdef}:meta", 15376 },
	{ "s-0123456789abcdef", 15376 },
	{ "}{x}", 16287 },		/* "x" */
	{ "x{", 3596 },
	{ "{", 4092 },
};

START_TEST(test_keyslot_recorded)
{
	size_t	 i;

	for (i = 0; i < sizeof(keyslots) / sizeof(keyslots[0]); i++)
		ck_assert_msg(rcl_keyslot(keyslots[i].key,
		    strlen(keyslots[i].key)) == keyslots[i].slot,
		    "slot of \"%s\": %u, Redis says %u", keyslots[i].key,
		    rcl_keyslot(keyslots[i].key, strlen(keyslots[i].key)),
		    keyslots[i].slot);
}
END_TEST

START_TEST(test_keyslot_tags)
{
	/* Same tag, same slot; the tag alone hashes like the key. */
	ck_assert_uint_eq(rcl_keyslot("{a}", 3), rcl_keyslot("a", 1));
	ck_assert_uint_eq(rcl_keyslot("x{abc}y", 7), rcl_keyslot("abc", 3));
	ck_assert_uint_eq(rcl_keyslot("{}", 2), rcl_crc16("{}", 2) & 16383);
	ck_assert_uint_eq(rcl_keyslot("{a", 2), rcl_crc16("{a", 2) & 16383);
	ck_assert_uint_eq(rcl_keyslot("a{}{b}", 6),
	    rcl_crc16("a{}{b}", 6) & 16383);
	/* The length bounds the search: a tag past it does not count. */
	ck_assert_uint_eq(rcl_keyslot("ab{c}", 2), rcl_keyslot("ab", 2));
	ck_assert_uint_eq(rcl_keyslot("a{b}", 3), rcl_keyslot("a{b", 3));
	/* Binary keys. */
	ck_assert_uint_eq(rcl_keyslot("\0{\0}", 4), rcl_keyslot("\0", 1));
}
END_TEST

/* --- cluster:// --- */

START_TEST(test_url_good)
{
	struct rcl_url	 u;
	char		 err[256];

	ck_assert_int_eq(rcl_parse_url("cluster://127.0.0.1:7000", &u, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(u.nseeds, 1);
	ck_assert_str_eq(u.seeds[0].host, "127.0.0.1");
	ck_assert_int_eq(u.seeds[0].port, 7000);
	ck_assert_ptr_null(u.pass);
	rcl_url_free(&u);

	ck_assert_int_eq(rcl_parse_url("cluster://:s%40cr%2Ft@10.0.0.1:1,"
	    "redis-a.example:65535,[::1]:7002", &u, err, sizeof(err)), 0);
	ck_assert_uint_eq(u.nseeds, 3);
	ck_assert_str_eq(u.pass, "s@cr/t");
	ck_assert_str_eq(u.seeds[1].host, "redis-a.example");
	ck_assert_int_eq(u.seeds[1].port, 65535);
	ck_assert_str_eq(u.seeds[2].host, "::1");
	ck_assert_int_eq(u.seeds[2].port, 7002);
	rcl_url_free(&u);
	ck_assert_ptr_null(u.pass);

	/* A raw '@' in the password: the last one ends it. */
	ck_assert_int_eq(rcl_parse_url("cluster://:a@b@h:1", &u, err,
	    sizeof(err)), 0);
	ck_assert_str_eq(u.pass, "a@b");
	ck_assert_str_eq(u.seeds[0].host, "h");
	rcl_url_free(&u);
}
END_TEST

START_TEST(test_url_sixteen)
{
	struct rcl_url	 u;
	char		 url[512], err[256];
	size_t		 n, i;

	n = (size_t)snprintf(url, sizeof(url), "cluster://");
	for (i = 0; i < RCL_SEEDS_MAX; i++)
		n += (size_t)snprintf(url + n, sizeof(url) - n, "%sh%zu:%zu",
		    i ? "," : "", i, 7000 + i);
	ck_assert_int_eq(rcl_parse_url(url, &u, err, sizeof(err)), 0);
	ck_assert_uint_eq(u.nseeds, RCL_SEEDS_MAX);
	ck_assert_str_eq(u.seeds[15].host, "h15");
	ck_assert_int_eq(u.seeds[15].port, 7015);
	rcl_url_free(&u);
	snprintf(url + n, sizeof(url) - n, ",h16:7016");
	errno = 0;
	ck_assert_int_eq(rcl_parse_url(url, &u, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "more than 16 HOST:PORT"));
}
END_TEST

static const struct {
	const char	*url;
	const char	*why;
} badurls[] = {
	{ "redis://127.0.0.1:6379", "it must start with cluster://" },
	{ "cluster:/127.0.0.1:6379", "it must start with cluster://" },
	{ "cluster://", "missing HOST:PORT" },
	{ "cluster://:pw@", "missing HOST:PORT" },
	{ "cluster://h:1/0", "database 0 only" },
	{ "cluster://h:1/", "database 0 only" },
	{ "cluster://h:1?x=1", "no query or fragment" },
	{ "cluster://h:1#f", "no query or fragment" },
	{ "cluster://user:pw@h:1", "user names are not supported" },
	{ "cluster://:@h:1", "empty password" },
	{ "cluster://:a%2@h:1", "bad %-escape" },
	{ "cluster://:a%zz@h:1", "bad %-escape" },
	{ "cluster://:a%00b@h:1", "bad %-escape" },
	{ "cluster://h", "missing :PORT after host \"h\"" },
	{ "cluster://h:", "is not a number from 1 to 65535" },
	{ "cluster://h:0", "is not a number from 1 to 65535" },
	{ "cluster://h:65536", "is not a number from 1 to 65535" },
	{ "cluster://h:+1", "is not a number from 1 to 65535" },
	{ "cluster://h: 1", "is not a number from 1 to 65535" },
	{ "cluster://h:99999999999", "is not a number from 1 to 65535" },
	{ "cluster://:1", "empty host" },
	{ "cluster://h:1,", "empty HOST:PORT" },
	{ "cluster://,h:1", "empty HOST:PORT" },
	{ "cluster://h:1,,h:2", "empty HOST:PORT" },
	{ "cluster://::1:7000", "IPv6 addresses go in brackets" },
	{ "cluster://[::1:7000", "unterminated [IPv6 address]" },
	{ "cluster://[::1]7000", "missing :PORT after the host" },
	{ "cluster://[::g]:7000", "bad IPv6 address" },
	{ "cluster://[]:7000", "empty host" },
	{ "cluster://h st:1", "bad character in host" },
	{ "cluster://h/x:1", "database 0 only" },
};

START_TEST(test_url_bad)
{
	struct rcl_url	 u;
	char		 err[256];
	size_t		 i;

	for (i = 0; i < sizeof(badurls) / sizeof(badurls[0]); i++) {
		errno = 0;
		err[0] = '\0';
		ck_assert_msg(rcl_parse_url(badurls[i].url, &u, err,
		    sizeof(err)) == -1, "accepted %s", badurls[i].url);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_msg(strstr(err, badurls[i].why) != NULL,
		    "%s: \"%s\" does not say \"%s\"", badurls[i].url, err,
		    badurls[i].why);
		ck_assert_ptr_nonnull(strstr(err, "(expected cluster://"));
		/* Nothing kept, nothing to free. */
		ck_assert_ptr_null(u.pass);
		ck_assert_uint_eq(u.nseeds, 0);
	}
}
END_TEST

START_TEST(test_url_bounds)
{
	struct rcl_url	 u;
	char		 url[1400], err[256];
	size_t		 n;

	/* A 255-byte host is the longest. */
	n = (size_t)snprintf(url, sizeof(url), "cluster://");
	memset(url + n, 'h', RCL_HOST_MAX);
	snprintf(url + n + RCL_HOST_MAX, sizeof(url) - n - RCL_HOST_MAX, ":1");
	ck_assert_int_eq(rcl_parse_url(url, &u, err, sizeof(err)), 0);
	ck_assert_uint_eq(strlen(u.seeds[0].host), RCL_HOST_MAX);
	rcl_url_free(&u);
	memset(url + n, 'h', RCL_HOST_MAX + 1);
	snprintf(url + n + RCL_HOST_MAX + 1, sizeof(url) - n - RCL_HOST_MAX - 1,
	    ":1");
	ck_assert_int_eq(rcl_parse_url(url, &u, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "host name longer than 255"));

	/* A 512-byte password is the longest; the error never shows it. */
	n = (size_t)snprintf(url, sizeof(url), "cluster://:");
	memset(url + n, 'p', RCL_PASS_MAX);
	snprintf(url + n + RCL_PASS_MAX, sizeof(url) - n - RCL_PASS_MAX,
	    "@h:1");
	ck_assert_int_eq(rcl_parse_url(url, &u, err, sizeof(err)), 0);
	ck_assert_uint_eq(strlen(u.pass), RCL_PASS_MAX);
	rcl_url_free(&u);
	memset(url + n, 'p', RCL_PASS_MAX + 1);
	snprintf(url + n + RCL_PASS_MAX + 1, sizeof(url) - n - RCL_PASS_MAX - 1,
	    "@h:1");
	ck_assert_int_eq(rcl_parse_url(url, &u, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "password longer than 512"));
	ck_assert_ptr_null(strstr(err, "ppp"));

	/* A bad seed after a password: the password is freed (ASan). */
	ck_assert_int_eq(rcl_parse_url("cluster://:secret@h:1,h:x", &u, err,
	    sizeof(err)), -1);
	ck_assert_ptr_null(strstr(err, "secret"));
	ck_assert_ptr_null(u.pass);
}
END_TEST

/* --- slot maps --- */

START_TEST(test_map_three_masters)
{
	struct rcl_map		*m;
	const struct rcl_addr	*a;
	redisReply		*r;
	struct rcl_addr		 b;
	char			 err[256];

	/* As redis-cli --cluster create splits 16384 slots over three. */
	r = r_arr(
	    r_range(0, 5460, r_node("127.0.0.1", 7000, "a0"),
		r_node("127.0.0.1", 7004, "r4")),
	    r_range(5461, 10922, r_node("127.0.0.1", 7001, "a1"),
		r_node("127.0.0.1", 7005, "r5")),
	    r_range(10923, 16383, r_node("127.0.0.1", 7002, "a2"),
		r_node("127.0.0.1", 7003, "r3")), NULL);
	m = rcl_map_build(r, "127.0.0.1", err, sizeof(err));
	ck_assert_msg(m != NULL, "%s", err);
	ck_assert_uint_eq(m->nnodes, 3);
	ck_assert_uint_eq(m->covered, RCL_SLOTS);
	ck_assert_int_eq(rcl_map_node(m, 0)->port, 7000);
	ck_assert_int_eq(rcl_map_node(m, 5460)->port, 7000);
	ck_assert_int_eq(rcl_map_node(m, 5461)->port, 7001);
	ck_assert_int_eq(rcl_map_node(m, 10922)->port, 7001);
	ck_assert_int_eq(rcl_map_node(m, 10923)->port, 7002);
	a = rcl_map_node(m, 16383);
	ck_assert_str_eq(a->host, "127.0.0.1");
	ck_assert_int_eq(a->port, 7002);
	ck_assert_ptr_null(rcl_map_node(m, 16384));
	/* A session's keys: slot 15376 (recorded above), the third. */
	ck_assert_int_eq(rcl_map_node(m, rcl_keyslot(
	    "parley:{s-0123456789abcdef}:log", 31))->port, 7002);
	/* Replicas are not masters. */
	snprintf(b.host, sizeof(b.host), "127.0.0.1");
	b.port = 7004;
	ck_assert_int_eq(rcl_map_find(m, &b), -1);
	b.port = 7001;
	ck_assert_int_eq(rcl_map_find(m, &b), 1);
	rcl_map_free(m);
	r_free(r);
}
END_TEST

START_TEST(test_map_partial)
{
	struct rcl_map	*m;
	redisReply	*r;
	char		 err[256];

	/*
	 * Slots no range names have no master (a cluster being set up, or
	 * slots lost with a master); one master in several ranges is one
	 * node; a NULL endpoint is the node asked; "?" (a hostname the node
	 * does not know) leaves its slots unknown.
	 */
	r = r_arr(
	    r_range(0, 99, r_node("10.0.0.1", 7000, "a"), NULL),
	    r_range(200, 299, r_node("10.0.0.1", 7000, "a"), NULL),
	    r_range(300, 300, r_node(NULL, 7001, "b"), NULL),
	    r_range(301, 400, r_node("", 7003, "d"), NULL),
	    r_range(16000, 16383, r_node("?", 7002, "c"), NULL), NULL);
	m = rcl_map_build(r, "10.9.9.9", err, sizeof(err));
	ck_assert_msg(m != NULL, "%s", err);
	ck_assert_uint_eq(m->nnodes, 3);
	ck_assert_uint_eq(m->covered, 100 + 100 + 1 + 100);
	ck_assert_ptr_eq(rcl_map_node(m, 0), rcl_map_node(m, 250));
	ck_assert_ptr_null(rcl_map_node(m, 100));
	ck_assert_ptr_null(rcl_map_node(m, 199));
	ck_assert_str_eq(rcl_map_node(m, 300)->host, "10.9.9.9");
	ck_assert_int_eq(rcl_map_node(m, 300)->port, 7001);
	ck_assert_str_eq(rcl_map_node(m, 301)->host, "10.9.9.9");
	ck_assert_ptr_null(rcl_map_node(m, 16000));
	ck_assert_ptr_null(rcl_map_node(m, 16383));
	rcl_map_free(m);
	r_free(r);

	/* An empty reply: a cluster with no slots assigned yet. */
	r = r_arr(NULL);
	m = rcl_map_build(r, "h", err, sizeof(err));
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->covered, 0);
	ck_assert_uint_eq(m->nnodes, 0);
	ck_assert_ptr_null(rcl_map_node(m, 0));
	rcl_map_free(m);
	r_free(r);
}
END_TEST

START_TEST(test_map_same)
{
	struct rcl_map	*a, *b, *c, *d;
	redisReply	*r;
	char		 err[256];

	r = r_arr(r_range(0, 8191, r_node("h", 1, "a"), NULL),
	    r_range(8192, 16383, r_node("h", 2, "b"), NULL), NULL);
	a = rcl_map_build(r, "h", err, sizeof(err));
	r_free(r);
	/* The same table in another order, another node table order. */
	r = r_arr(r_range(8192, 16383, r_node("H", 2, "b"), NULL),
	    r_range(0, 100, r_node("h", 1, "a"), NULL),
	    r_range(101, 8191, r_node("h", 1, "a"), NULL), NULL);
	b = rcl_map_build(r, "h", err, sizeof(err));
	r_free(r);
	/* A failover: slots 0-8191 on another port. */
	r = r_arr(r_range(0, 8191, r_node("h", 3, "c"), NULL),
	    r_range(8192, 16383, r_node("h", 2, "b"), NULL), NULL);
	c = rcl_map_build(r, "h", err, sizeof(err));
	r_free(r);
	/* One slot unknown. */
	r = r_arr(r_range(0, 8190, r_node("h", 1, "a"), NULL),
	    r_range(8192, 16383, r_node("h", 2, "b"), NULL), NULL);
	d = rcl_map_build(r, "h", err, sizeof(err));
	r_free(r);
	ck_assert(a != NULL && b != NULL && c != NULL && d != NULL);
	ck_assert_int_eq(rcl_map_same(a, a), 1);
	ck_assert_int_eq(rcl_map_same(a, b), 1);
	ck_assert_int_eq(rcl_map_same(b, a), 1);
	ck_assert_int_eq(rcl_map_same(a, c), 0);
	ck_assert_int_eq(rcl_map_same(a, d), 0);
	ck_assert_int_eq(rcl_map_same(d, a), 0);
	rcl_map_free(a);
	rcl_map_free(b);
	rcl_map_free(c);
	rcl_map_free(d);
}
END_TEST

/* Builds a map from r (freed), which must be refused with why. */
static void
map_refused(redisReply *r, const char *why)
{
	struct rcl_map	*m;
	char		 err[256];

	errno = 0;
	err[0] = '\0';
	m = rcl_map_build(r, "127.0.0.1", err, sizeof(err));
	ck_assert_msg(m == NULL, "accepted a reply that should say %s", why);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(strstr(err, why) != NULL, "\"%s\" does not say \"%s\"",
	    err, why);
	ck_assert_ptr_nonnull(strstr(err, "bad CLUSTER SLOTS reply"));
	r_free(r);
}

START_TEST(test_map_bad)
{
	redisReply	*r;
	size_t		 i;

	map_refused(NULL, "no reply");
	map_refused(r_strn(REDIS_REPLY_ERROR, "ERR This instance has "
	    "cluster support disabled", strlen("ERR This instance has "
	    "cluster support disabled")), "cluster-enabled");
	map_refused(r_str("OK"), "not an array");
	map_refused(r_arr(r_int(1), NULL), "range 0 is not");
	map_refused(r_arr(r_arr(r_int(0), r_int(1), NULL), NULL),
	    "range 0 is not");
	map_refused(r_arr(r_range(5, 4, r_node("h", 1, "x"), NULL), NULL),
	    "start <= end");
	map_refused(r_arr(r_range(-1, 4, r_node("h", 1, "x"), NULL), NULL),
	    "start <= end");
	map_refused(r_arr(r_range(0, 16384, r_node("h", 1, "x"), NULL),
	    NULL), "start <= end");
	map_refused(r_arr(r_arr(r_str("0"), r_int(1), r_node("h", 1, "x"),
	    NULL), NULL), "start <= end");
	map_refused(r_arr(r_range(0, 1, r_node("h", 0, "x"), NULL), NULL),
	    "master is not");
	map_refused(r_arr(r_range(0, 1, r_node("h", 65536, "x"), NULL),
	    NULL), "master is not");
	map_refused(r_arr(r_range(0, 1, r_node("h st", 1, "x"), NULL),
	    NULL), "master is not");
	map_refused(r_arr(r_range(0, 1, r_arr(r_str("h"), NULL), NULL),
	    NULL), "master is not");
	map_refused(r_arr(r_range(0, 1, r_int(7), NULL), NULL),
	    "master is not");
	map_refused(r_arr(r_range(0, 1, r_arr(r_int(1), r_int(1), NULL),
	    NULL), NULL), "master is not");
	map_refused(r_arr(r_range(0, 1, r_arr(r_strn(REDIS_REPLY_STRING,
	    "a\0b", 3), r_int(1), NULL), NULL), NULL), "master is not");
	map_refused(r_arr(r_range(0, 10, r_node("h", 1, "x"), NULL),
	    r_range(10, 20, r_node("h", 2, "y"), NULL), NULL),
	    "slot 10 is in two ranges");
	/* Also when the first range's master has no usable address. */
	map_refused(r_arr(r_range(0, 10, r_node("?", 1, "x"), NULL),
	    r_range(5, 20, r_node("h", 2, "y"), NULL), NULL),
	    "slot 5 is in two ranges");

	/* A host longer than 255 bytes. */
	{
		char	 h[300];

		memset(h, 'a', sizeof(h) - 1);
		h[sizeof(h) - 1] = '\0';
		map_refused(r_arr(r_range(0, 1, r_node(h, 1, "x"), NULL),
		    NULL), "master is not");
	}

	/* More masters than RCL_NODES_MAX: one slot each. */
	r = r_new(REDIS_REPLY_ARRAY);
	r->elements = RCL_NODES_MAX + 1;
	r->element = calloc(r->elements, sizeof(*r->element));
	ck_assert_ptr_nonnull(r->element);
	for (i = 0; i < r->elements; i++)
		r->element[i] = r_range((long long)i, (long long)i,
		    r_node("127.0.0.1", 1 + (long long)i, "x"), NULL);
	map_refused(r, "more than 1024 masters");
}
END_TEST

/* --- MOVED and ASK --- */

/* Parses s as sent to 10.1.1.1, into the caller's slot and to. */
#define RD(s) rcl_parse_redirect((s), strlen(s), "10.1.1.1", &slot, &to)

START_TEST(test_redirect_good)
{
	struct rcl_addr	 to;
	unsigned	 slot;

	ck_assert_int_eq(RD("MOVED 3999 127.0.0.1:6381"), RCL_REDIR_MOVED);
	ck_assert_uint_eq(slot, 3999);
	ck_assert_str_eq(to.host, "127.0.0.1");
	ck_assert_int_eq(to.port, 6381);
	ck_assert_int_eq(RD("ASK 3999 127.0.0.1:6381"), RCL_REDIR_ASK);
	ck_assert_uint_eq(slot, 3999);
	ck_assert_int_eq(to.port, 6381);
	ck_assert_int_eq(RD("MOVED 0 h-1.example:1"), RCL_REDIR_MOVED);
	ck_assert_uint_eq(slot, 0);
	ck_assert_str_eq(to.host, "h-1.example");
	ck_assert_int_eq(RD("MOVED 16383 ::1:65535"), RCL_REDIR_MOVED);
	ck_assert_uint_eq(slot, 16383);
	ck_assert_str_eq(to.host, "::1");
	ck_assert_int_eq(to.port, 65535);
	ck_assert_int_eq(RD("ASK 7 2001:db8::2:7000"), RCL_REDIR_ASK);
	ck_assert_str_eq(to.host, "2001:db8::2");
	ck_assert_int_eq(to.port, 7000);
	/* An unknown endpoint: the node the command went to. */
	ck_assert_int_eq(RD("MOVED 12 :7005"), RCL_REDIR_MOVED);
	ck_assert_str_eq(to.host, "10.1.1.1");
	ck_assert_int_eq(to.port, 7005);
}
END_TEST

START_TEST(test_redirect_other)
{
	struct rcl_addr	 to;
	unsigned	 slot;

	ck_assert_int_eq(RD("ERR unknown command"), RCL_REDIR_NONE);
	ck_assert_int_eq(RD("NOSCRIPT No matching script"), RCL_REDIR_NONE);
	ck_assert_int_eq(RD("CLUSTERDOWN The cluster is down"),
	    RCL_REDIR_NONE);
	ck_assert_int_eq(RD("TRYAGAIN Multiple keys"), RCL_REDIR_NONE);
	ck_assert_int_eq(RD("MOVEDX 1 h:1"), RCL_REDIR_NONE);
	ck_assert_int_eq(RD("moved 1 h:1"), RCL_REDIR_NONE);
	ck_assert_int_eq(RD("ASKING"), RCL_REDIR_NONE);
	ck_assert_int_eq(RD(""), RCL_REDIR_NONE);
}
END_TEST

START_TEST(test_redirect_bad)
{
	static const char *bad[] = {
		"MOVED ",
		"MOVED 3999",
		"MOVED 3999 ",
		"MOVED 3999 127.0.0.1",
		"MOVED 3999 127.0.0.1:",
		"MOVED 3999 127.0.0.1:0",
		"MOVED 3999 127.0.0.1:65536",
		"MOVED 3999 127.0.0.1:6381 ",
		"MOVED 3999 127.0.0.1:6381 x",
		"MOVED 3999 127.0.0.1:+6381",
		"MOVED 16384 127.0.0.1:6381",
		"MOVED -1 127.0.0.1:6381",
		"MOVED +1 127.0.0.1:6381",
		"MOVED 99999999999 127.0.0.1:6381",
		"MOVED  3999 127.0.0.1:6381",
		"MOVED 3999  127.0.0.1:6381",
		"MOVED x 127.0.0.1:6381",
		"MOVED 3999 ?:6381",		/* hostname not known */
		"MOVED 3999 h st:6381",
		"MOVED 3999 1::g:6381",
		"ASK 3999",
		"ASK 1 h:p",
	};
	struct rcl_addr	 to;
	unsigned	 slot = 77;
	size_t		 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(RD(bad[i]) == RCL_REDIR_BAD, "accepted \"%s\"",
		    bad[i]);
	ck_assert_uint_eq(slot, 77);		/* left alone */

	/* A host of 256 bytes; the length is what counts, not a NUL. */
	{
		char	 s[300];
		size_t	 n;

		n = (size_t)snprintf(s, sizeof(s), "MOVED 1 ");
		memset(s + n, 'a', 256);
		snprintf(s + n + 256, sizeof(s) - n - 256, ":1");
		ck_assert_int_eq(RD(s), RCL_REDIR_BAD);
		memcpy(s + n + 1, ":1", 3);		/* "a:1" */
		ck_assert_int_eq(rcl_parse_redirect(s, n + 3, "h", &slot,
		    &to), RCL_REDIR_MOVED);
		ck_assert_str_eq(to.host, "a");
		ck_assert_int_eq(rcl_parse_redirect(s, n + 2, "h", &slot,
		    &to), RCL_REDIR_BAD);		/* "a:" */
	}
}
END_TEST

static Suite *
rcluster_suite(void)
{
	Suite		*s = suite_create("rcluster");
	TCase		*tc = tcase_create("core");

	tcase_add_test(tc, test_crc16_vector);
	tcase_add_test(tc, test_keyslot_recorded);
	tcase_add_test(tc, test_keyslot_tags);
	tcase_add_test(tc, test_url_good);
	tcase_add_test(tc, test_url_sixteen);
	tcase_add_test(tc, test_url_bad);
	tcase_add_test(tc, test_url_bounds);
	tcase_add_test(tc, test_map_three_masters);
	tcase_add_test(tc, test_map_partial);
	tcase_add_test(tc, test_map_bad);
	tcase_add_test(tc, test_map_same);
	tcase_add_test(tc, test_redirect_good);
	tcase_add_test(tc, test_redirect_other);
	tcase_add_test(tc, test_redirect_bad);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_run(rcluster_suite());
}
