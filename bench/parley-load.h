/*
 * parley-load's shared state: the options, the process's clients and
 * results (g), and what its parts call of each other.  parley-load.c
 * drives the clients and the parent; load_args.c reads the command line.
 */
#ifndef PARLEY_BENCH_LOAD_H
#define PARLEY_BENCH_LOAD_H

#include <sys/resource.h>

#include <netinet/in.h>
#include <stdint.h>

struct event_base;
struct event;
struct client;

#define MAX_ERRORS	8		/* error strings kept per process */

enum proto { P_PARLEY, P_WS, P_SIO };
enum transport { T_WS, T_SSE };
enum mode { M_IDLE, M_STREAM, M_FANOUT, M_REPLAY, M_STORM, M_THOUGHTS };

extern const char *const proto_names[];
extern const char *const mode_names[];

struct opts {
	enum proto	 proto;
	enum transport	 transport;
	const char	*host;
	int		 port;
	struct in_addr	 dst;
	uint32_t	 src_lo, src_hi;	/* host order */
	unsigned	 procs;
	unsigned	 clients;
	unsigned	 sessions;
	char		 prefix[64];
	enum mode	 mode;
	const char	*chat;
	unsigned	 tokens;
	unsigned	 thoughts;	/* thoughts mode: per session */
	int		 private;	/* thoughts mode: "shared":false */
	int		 observe;	/* no senders: observers only */
	const char	*category;	/* thoughts mode */
	unsigned	 interval;
	uint64_t	 from;
	int		 have_from;
	uint64_t	 expect;
	double		 duration;
	double		 timeout;
	const char	*token;
	unsigned	 inflight;	/* handshakes in progress per process */
	int		 json;
};

/* A log-linear histogram of microseconds: 32 sub-buckets per power of 2. */
#define H_SUB		32
#define H_BUCKETS	(2 * H_SUB + 58 * H_SUB)

struct load {
	struct opts		 o;
	struct event_base	*base;
	struct client		*cl;
	unsigned		 n;
	unsigned		 procno;
	int			 ctl_in, res_out;
	struct event		*ctl_ev, *tick_ev;
	struct sockaddr_in	 sa;
	char			*chat_frame;	/* the chat message, encoded */
	size_t			 chat_len;
	uint32_t		 qhead, qtail;
	unsigned		 inflight;
	uint64_t		 t_start;
	uint64_t		 deadline;
	int			 phase;		/* 0 connect, 1 after GO, 2 over */
	int			 ready_sent;
	uint64_t		 t_go, t_drop, t_chat;
	uint64_t		 ttl;
	int			 dropped, chats_sent;
	int			 trace;		/* PARLEY_LOAD_TRACE: show messages */
	unsigned		 nonce;
	/* results */
	unsigned		 nup, nlive, ndone, nreached;
	uint64_t		 events, resumes, lost, dup, reorder;
	uint64_t		 t_first, t_last;
	uint64_t		 hist[H_BUCKETS];
	uint64_t		 lat_n, lat_max;
	double			*rates;
	char			*errors[MAX_ERRORS];
	unsigned		 nerrors;
	uint64_t		 nerrors_total;
};

extern struct load g;

void	die(const char *fmt, ...)
	    __attribute__((noreturn, format(printf, 1, 2)));
/* Forks the clients' processes, merges their reports; prints them. */
void	parent_main(void);
/* A client process: connects its share, runs the phases, reports. */
void	child_main(unsigned procno, int ctl_in, int res_out);
uint64_t now_us(void);		/* CLOCK_REALTIME, microseconds */
uint64_t h_value(unsigned i);	/* a histogram bucket's microseconds */
rlim_t	raise_nofile(void);	/* RLIMIT_NOFILE as high as allowed */

#endif
