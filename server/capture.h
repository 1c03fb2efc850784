/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Triggered deep capture at strata-server (docs/diagnosis.md "Deep
 * capture"): the captures that exist, the orders each node is given in
 * the answer to its batch, and the capture records kept in the store (the
 * captures schema table, the server's own; the latest record of an id
 * wins).  A capture raises what agents record for a job or a set of
 * processes for a bounded time; the agents end it on their own clock.
 *
 * Bounded: at most CAPTURE_KEEP captures are kept (the oldest ended one
 * makes room; a new capture is refused while CAPTURE_KEEP are active),
 * at most CAPTURE_ACTIVE_MAX run at once, each at most max_s long.
 * Thread-safe: every function may be called from any request thread.
 */
#ifndef STRATA_SERVER_CAPTURE_H
#define STRATA_SERVER_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "server/store.h"

#include "strata.pb-c.h"

#define CAPTURE_KEEP 256	 /* captures remembered (active and recent) */
#define CAPTURE_ACTIVE_MAX 8	 /* running or scheduled at once */
#define CAPTURE_MAX_TARGETS 64	 /* processes (node, pid) named by one capture */
#define CAPTURE_ORDERS_MAX 8	 /* orders in one answer */
#define CAPTURE_ID_LEN 33	 /* 32 hex digits */
#define CAPTURE_NAME_LEN 128	 /* job, node */
#define CAPTURE_FREQ_MAX 999	 /* Hz: the timed sampler's ceiling */
#define CAPTURE_MAX_S_DEFAULT 60 /* longest capture unless --capture-max-s */

struct capture_target {
	char node[CAPTURE_NAME_LEN]; /* "": every node */
	uint32_t pid;		     /* 0: every process of the job there */
};

/* What a capture asks for. */
struct capture_spec {
	char job[CAPTURE_NAME_LEN]; /* "": the targets alone */
	struct capture_target targets[CAPTURE_MAX_TARGETS];
	uint32_t ntargets; /* 0: every process of the job, every node */
	uint64_t start_ns; /* realtime */
	uint64_t end_ns;   /* realtime */
	uint32_t freq_hz;  /* timed CPU samples (0: none) */
	bool offcpu;	   /* off-CPU stacks */
	bool gpu_calls;	   /* every GPU call, duty cycle off */
	char trigger[16];  /* api, straggler, hang, oom, schedule, oom_kill */
	char reason[256];  /* in words */
};

struct capture {
	char id[CAPTURE_ID_LEN];
	struct capture_spec s;
	uint64_t created_ns;
	bool cancelled;
};

struct capture_opts {
	uint32_t max_s;	     /* longest capture; 0: CAPTURE_MAX_S_DEFAULT */
	uint32_t max_active; /* 0: CAPTURE_ACTIVE_MAX */
};

struct capture_stats {
	uint64_t created[6]; /* by trigger: api, straggler, hang, oom, schedule, oom_kill */
	uint64_t refused;    /* over the bounds */
	uint64_t orders;     /* orders handed to agents */
	uint64_t store_errors;
	uint64_t active; /* running or scheduled now (capture_registry__stats' now) */
};

struct capture_registry;

/* st may be NULL (nothing kept across restarts).  NULL without memory. */
struct capture_registry *capture_registry__new(struct store *st, const struct capture_opts *o);
void capture_registry__free(struct capture_registry *r);

/* The captures of the store's last records (latest per id): at start, so
 * a restarted server still hands out the captures that run.  0 or -errno. */
int capture_registry__load(struct capture_registry *r, uint64_t now_ns);

/*
 * Adds a capture (its spec checked and bounded: duration, frequency,
 * targets; start in the past becomes now) and stores its record.  *out
 * gets the capture as kept.  0, -EINVAL (err says why), -EBUSY (too many
 * active), or the store's -errno (the capture is kept all the same:
 * agents need it now).
 */
int capture_registry__add(struct capture_registry *r, const struct capture_spec *s, uint64_t now_ns,
			  struct capture *out, char *err, size_t errsz);

/* Cancels a capture (it ends now: agents stop at their next answer, or at
 * the original end on their own clock).  0 or -ENOENT. */
int capture_registry__cancel(struct capture_registry *r, const char *id, uint64_t now_ns);

/* The capture with this id: 0 or -ENOENT. */
int capture_registry__get(struct capture_registry *r, const char *id, struct capture *out);

/* The captures (of job, when not NULL/""), newest first: up to max into
 * out; returns how many there are. */
size_t capture_registry__list(struct capture_registry *r, const char *job, struct capture *out,
			      size_t max);

/*
 * The orders for node now: every capture not ended whose targets name
 * node (or every node), with only node's targets.  Fills orders[0..n)
 * (CAPTURE_ORDERS_MAX), their targets from tbuf (CAPTURE_ORDERS_MAX *
 * CAPTURE_MAX_TARGETS entries, pointers into the registry's copies of the
 * strings in keep); returns n.
 */
struct capture_orders {
	Strata__V1__CaptureOrder o[CAPTURE_ORDERS_MAX], *op[CAPTURE_ORDERS_MAX];
	Strata__V1__CaptureTarget t[CAPTURE_ORDERS_MAX][CAPTURE_MAX_TARGETS];
	Strata__V1__CaptureTarget *tp[CAPTURE_ORDERS_MAX][CAPTURE_MAX_TARGETS];
	struct capture keep[CAPTURE_ORDERS_MAX];
	size_t n;
};
size_t capture_registry__orders(struct capture_registry *r, const char *node, uint64_t now_ns,
				struct capture_orders *out);

/* The captures an agent started itself that b reports (an out-of-memory
 * return: CaptureRun.trigger_str), recorded when first heard of. */
void capture_registry__note_batch(struct capture_registry *r, const Strata__V1__Batch *b,
				  uint64_t now_ns);

/* 1 while the capture runs or waits for its start at now. */
int capture__active(const struct capture *c, uint64_t now_ns);
/* "scheduled", "running", "ended", "cancelled" at now. */
const char *capture__state(const struct capture *c, uint64_t now_ns);

/* The capture as one JSON object (without its runs), or its members alone. */
void capture__json(FILE *out, const struct capture *c, uint64_t now_ns);
void capture__json_members(FILE *out, const struct capture *c, uint64_t now_ns);

void capture_registry__stats(struct capture_registry *r, uint64_t now_ns, struct capture_stats *st);
/* The stats on /metrics (docs/metrics.md). */
void capture_registry__metrics(struct capture_registry *r, FILE *out);

/* The trigger's index in capture_stats.created (-1: unknown). */
int capture__trigger_index(const char *trigger);

#endif /* STRATA_SERVER_CAPTURE_H */
