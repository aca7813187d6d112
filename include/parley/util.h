#ifndef PARLEY_UTIL_H
#define PARLEY_UTIL_H

#include <stddef.h>
#include <stdint.h>

uint64_t	util_now_ms(void);		/* wall clock, Unix ms */
uint64_t	util_mono_ms(void);		/* monotonic ms */
uint64_t	util_mono_us(void);		/* monotonic microseconds */
/* Seconds from us (util_mono_us) until now; 0 if none. */
double		util_secs_since(uint64_t us);
/* "2026-02-16T10:05:33.218Z" into out (at least 25 bytes). */
void		util_iso8601(char out[32], uint64_t ms);
/* The value of hex digit c (either case), or -1. */
int		util_hexval(int c);
/* n random bytes as 2n lowercase hex chars + NUL into out. */
void		util_randhex(char *out, size_t nbytes);
/*
 * Appends n bytes to a growable, NUL-terminated buffer (*buf may be NULL),
 * doubling its capacity as needed.  0, or -1 (unchanged) out of memory.
 */
int		util_append(char **buf, size_t *len, size_t *cap,
		    const void *data, size_t n);
/* b as parleyd.conf writes a size ("64m", "16k", "1000"); returns buf. */
const char	*util_fmt_size(uint64_t b, char *buf, size_t len);
/* A duration as parleyd.conf(5) writes it: "30s" when whole seconds,
 * else "1500ms"; returns buf. */
const char	*util_fmt_ms(uint64_t ms, char *buf, size_t len);
struct timeval;
/*
 * The 6-bit value of base64 letter c (RFC 4648): with url, the base64url
 * alphabet ('-', '_'), else the standard one ('+', '/'); -1 for none.
 */
int		util_b64_value(unsigned char c, int url);
void		util_tv(struct timeval *, uint64_t ms);
void		util_tv_us(struct timeval *, uint64_t us);
/*
 * Gives free heap pages back to the kernel (malloc_trim), at most once per
 * every_ms: after a burst of short-lived buffers (a connect storm) the
 * long-lived allocations between them keep glibc from shrinking the heap,
 * and idle memory per connection would count the burst for good.
 */
void		util_trim(uint64_t *last_ms, uint64_t every_ms);

#endif
