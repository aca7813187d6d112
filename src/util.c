#include <sys/random.h>
#include <sys/time.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parley/util.h"

uint64_t
util_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
util_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
util_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

double
util_secs_since(uint64_t us)
{
	uint64_t now = util_mono_us();

	return now > us ? (double)(now - us) / 1e6 : 0;
}

/*
 * Every logged event carries one: gmtime_r, strftime and snprintf cost as
 * much as encoding the rest of a token event, so the seconds' part is
 * kept per thread and only the milliseconds are written each time.
 */
void
util_iso8601(char out[32], uint64_t ms)
{
	static _Thread_local uint64_t sec = UINT64_MAX;
	static _Thread_local char pfx[24];
	static _Thread_local size_t n;
	uint64_t s = ms / 1000;
	unsigned m = (unsigned)(ms % 1000);
	time_t t;
	struct tm tm;

	if (s != sec) {
		t = (time_t)s;
		if (gmtime_r(&t, &tm) == NULL ||
		    (n = strftime(pfx, sizeof(pfx), "%Y-%m-%dT%H:%M:%S",
		    &tm)) == 0) {
			snprintf(out, 32, "1970-01-01T00:00:00.000Z");
			sec = UINT64_MAX;
			return;
		}
		sec = s;
	}
	/* n is at most 23 (pfx's size): 5 more bytes fit in 32. */
	memcpy(out, pfx, n);
	out[n] = '.';
	out[n + 1] = (char)('0' + m / 100);
	out[n + 2] = (char)('0' + m / 10 % 10);
	out[n + 3] = (char)('0' + m % 10);
	out[n + 4] = 'Z';
	out[n + 5] = '\0';
}

void
util_randhex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[64];
	size_t i, got = 0;
	ssize_t n;

	if (nbytes > sizeof(b))
		nbytes = sizeof(b);
	while (got < nbytes) {
		n = getrandom(b + got, nbytes - got, 0);
		if (n > 0)
			got += (size_t)n;
	}
	for (i = 0; i < nbytes; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * nbytes] = '\0';
}

int
util_b64_value(unsigned char c, int url)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == (url ? '-' : '+'))
		return 62;
	if (c == (url ? '_' : '/'))
		return 63;
	return -1;
}

void
util_tv(struct timeval *tv, uint64_t ms)
{
	tv->tv_sec = (time_t)(ms / 1000);
	tv->tv_usec = (suseconds_t)(ms % 1000) * 1000;
}

void
util_tv_us(struct timeval *tv, uint64_t us)
{
	tv->tv_sec = (time_t)(us / 1000000);
	tv->tv_usec = (suseconds_t)(us % 1000000);
}

int
util_append(char **buf, size_t *len, size_t *cap, const void *data, size_t n)
{
	size_t ncap;
	char *p;

	if (*len + n + 1 > *cap) {
		ncap = *cap ? *cap : 256;
		while (ncap < *len + n + 1)
			ncap *= 2;
		if ((p = realloc(*buf, ncap)) == NULL)
			return -1;
		*buf = p;
		*cap = ncap;
	}
	if (n > 0)
		memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

void
util_trim(uint64_t *last_ms, uint64_t every_ms)
{
	uint64_t now = util_mono_ms();

	if (now - *last_ms < every_ms)
		return;
	*last_ms = now;
	malloc_trim(0);
}

const char *
util_fmt_ms(uint64_t ms, char *buf, size_t len)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	return buf;
}

const char *
util_fmt_size(uint64_t b, char *buf, size_t len)
{
	static const char units[] = "gmk";
	unsigned	 i;
	uint64_t	 u;

	for (i = 0; i < 3; i++) {
		u = 1ULL << (10 * (3 - i));
		if (b != 0 && b % u == 0) {
			snprintf(buf, len, "%llu%c", (unsigned long long)(b / u),
			    units[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)b);
	return buf;
}

int
util_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
