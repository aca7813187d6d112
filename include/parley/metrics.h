/*
 * Counters a worker keeps and sends its supervisor (IPC_METRICS, whole
 * struct, about once a second), and the Prometheus text the supervisor
 * renders from their sum for GET /metrics.  Plain old data, no pointers:
 * it crosses the IPC channel as bytes, so both ends must be this build.
 */
#ifndef PARLEY_METRICS_H
#define PARLEY_METRICS_H

#include <stdint.h>

#define METRICS_VERSION		1
#define METRICS_BUCKETS		14	/* histogram upper bounds + +Inf */

/* Connection transports, a label on the connection metrics. */
enum metrics_transport {
	MT_WEBSOCKET, MT_SSE, MT_HTTP, MT_NTRANSPORTS
};

/* Session states (the session_state statuses, and following). */
enum metrics_state {
	MS_CREATED, MS_RUNNING, MS_IDLE, MS_SUSPENDED, MS_PAUSED,
	MS_COMPLETED, MS_FAILED, MS_FOLLOWING, MS_NSTATES
};

/* Provider types, a label on the provider metrics. */
enum metrics_provider {
	MP_OPENAI, MP_ANTHROPIC, MP_SCRIPT, MP_NPROVIDERS
};

/* Which bucket bounds a histogram uses (see metrics.c). */
enum metrics_scale {
	MSC_SECONDS,	/* 1 ms .. 60 s */
	MSC_COUNT	/* 1 .. 1,000,000 (events in a replay) */
};

/* Counts per bucket, not cumulative; rendered cumulative. */
struct metrics_hist {
	uint64_t	bucket[METRICS_BUCKETS];
	uint64_t	count;
	double		sum;
};

struct metrics {
	uint32_t	version;		/* METRICS_VERSION */
	uint32_t	pad;
	/* gauges: the worker's state when it sent this */
	uint64_t	connections[MT_NTRANSPORTS];
	uint64_t	sessions[MS_NSTATES];
	/* counters, since the worker started */
	uint64_t	connections_total[MT_NTRANSPORTS];
	uint64_t	events_appended;
	uint64_t	events_delivered;	/* logged events written to clients */
	uint64_t	replays;		/* resumes that read the log */
	struct metrics_hist replay_events;	/* MSC_COUNT */
	uint64_t	resume_gaps;		/* RESUME_GAP answered */
	uint64_t	slow_catchups;		/* fed from the log instead of memory */
	uint64_t	slow_closes;		/* closed 1008: could not keep up */
	uint64_t	provider_requests[MP_NPROVIDERS];
	uint64_t	provider_errors[MP_NPROVIDERS];
	struct metrics_hist provider_latency[MP_NPROVIDERS];	/* seconds to
								   first byte */
	uint64_t	tokens_input;
	uint64_t	tokens_output;
	double		cost_usd;
	uint64_t	tool_calls;
	uint64_t	tool_errors;
	uint64_t	store_errors;
	struct metrics_hist store_latency;	/* append to durable, seconds */
};

/* What only the supervisor knows. */
struct metrics_sup {
	uint64_t	worker_restarts;
	uint64_t	workers;		/* current generation */
	uint64_t	workers_ready;
	uint64_t	workers_draining;	/* old generations */
	uint64_t	store_down;		/* workers that cannot reach it */
	double		uptime_seconds;
};

void	metrics_init(struct metrics *);
/* Records one observation v in h, bucketed by scale. */
void	metrics_observe(struct metrics_hist *, enum metrics_scale, double v);
/* Adds src's counters and histograms to dst; gauges too when gauges is 1. */
void	metrics_add(struct metrics *dst, const struct metrics *src, int gauges);
/* Provider type name ("openai", ...) to its label; MP_SCRIPT if unknown. */
enum metrics_provider metrics_provider(const char *type);

struct evbuffer;
/* Appends the Prometheus text exposition (format 0.0.4) of m and sup. */
void	metrics_render(struct evbuffer *, const struct metrics *m,
	    const struct metrics_sup *sup);

#endif
