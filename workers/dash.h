/*
 * GET /sessions/{id}/dashboard: a read-only stream of the session (an
 * observer's) that also gets a metrics event (not logged, no seq) at
 * connect and every dashboard-interval.
 */
#ifndef PARLEY_WORKERS_DASH_H
#define PARLEY_WORKERS_DASH_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct conn;
struct sess;

#define DASH_SLOWEST	8	/* subscribers listed by how far behind */

/* What a metrics body says besides meta, gathered from the worker. */
struct dash_stats {
	unsigned	 conns[5];	/* subscribers by IPC_ROLE_* (0 unused),
					   dashboards not included */
	unsigned	 dashboards;
	size_t		 bytes_total;	/* queued for subscribers */
	size_t		 bytes_max;
	uint64_t	 behind_total;	/* events not yet written to them */
	uint64_t	 behind_max;
	struct dash_slow {
		int		 role;		/* IPC_ROLE_* */
		int		 dash;
		size_t		 bytes;
		uint64_t	 behind;
	}		 slowest[DASH_SLOWEST];	/* most behind first */
	int		 nslowest;
	unsigned	 thoughts;	/* logged in the window */
	unsigned	 events;
	uint64_t	 window_ms;	/* counted over: up to a minute */
	const char	*status;	/* sess_status */
	int		 turn_running;
	uint64_t	 last_seq;
	uint64_t	 interval_ms;
};

/* The session's subscribers changed: its timer starts or stops. */
void	dash_changed(struct sess *);
/* The session leaves memory. */
void	dash_free(struct sess *);
/* The session's part (sess.h): metrics while it has dashboards. */
extern const struct sess_part dash_part;
/* A dashboard just opened: its first metrics event. */
void	dash_hello(struct conn *);
/*
 * The metrics event's fields besides the envelope, from meta (borrowed)
 * and st: a new object.
 */
cJSON	*dash_body(const cJSON *meta, const struct dash_stats *st);

#endif
