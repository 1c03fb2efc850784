/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What both stores share above their SQL (not for other callers): what a
 * batch says beyond its rows (a process's job, the batch's drop and
 * sample totals), and one reader from result rows to the query structs of
 * server/store.h; written once here so the backends cannot disagree.
 * Queries stay per dialect, with the same columns in the same order.
 */
#ifndef STRATA_SERVER_STORE_BACKEND_H
#define STRATA_SERVER_STORE_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "server/store.h"

/* The job a process belongs to: the one the agent named, else the
 * launcher's ids (TORCHELASTIC_RUN_ID, then SLURM_JOB_ID); "" when none. */
const char *store_process__job(const Strata__V1__Batch *b, const Strata__V1__Process *p);

/* The sum of every Drops field of the batch (0 without a Drops). */
uint64_t store_batch__drops(const Strata__V1__Batch *b);

/* The batch's CPU samples; per_process (n_processes entries, or NULL)
 * gets them by process index. */
uint64_t store_batch__cpu_samples(const Strata__V1__Batch *b, uint64_t *per_process);

/* ---- counters ------------------------------------------------------------------- */

/* What a store counts for its stats, under its own lock. */
struct store_counts {
	pthread_mutex_t lock;
	uint64_t batches, duplicates, retention_deleted, columns_added;
};

void store_counts__init(struct store_counts *c);
void store_counts__fini(struct store_counts *c);
/* An ingest's result: 0 stored, 1 a duplicate, else failed (not counted). */
void store_counts__ingest(struct store_counts *c, int err);
void store_counts__retained(struct store_counts *c, uint64_t batches);
/* A column the database lacked (made by an older server, before the field
 * existed) and the store added at open; store: "sqlite" or "clickhouse",
 * ddl: the column's "name TYPE DEFAULT v".  Logged and counted. */
void store_counts__column_added(struct store_counts *c, const char *store, const char *table,
				const char *ddl);
/* Copies the counts into st. */
void store_counts__read(struct store_counts *c, struct store_stats *st);

/* ---- reading result rows ------------------------------------------------------ */

struct store_row;

/* A backend's accessors for one row of its result. */
struct store_row_ops {
	uint64_t (*u64)(const struct store_row *r, int col);
	int64_t (*i64)(const struct store_row *r, int col);
	const char *(*str)(const struct store_row *r, int col); /* "" for NULL */
	int (*null)(const struct store_row *r, int col);
	/* The stack with this id: 0 and *out (the backend says whether an
	 * unknown id is NULL or empty), or -errno. */
	int (*stack)(const struct store_row *r, uint64_t id, const struct store_stack **out);
};

struct store_row {
	const struct store_row_ops *ops;
	const void *res; /* the backend's result (statement, parsed result) */
	size_t i;	 /* its row */
	void *stacks;	 /* the backend's stacks for this query */
};

/*
 * Hands row r to a query's callback fn (with its ctx) as the struct the
 * query returns; the callback's return is returned.  One per query kind,
 * the columns in the order the comment says (backend.c reads them by one
 * map per struct, each field's kind from its type).
 */
typedef int (*store_emit_fn)(const struct store_row *r, void *fn, void *ctx);

/* job, nodes, processes, ranks, world_size, first_ns, last_ns, cpu_samples */
int store_emit__job(const struct store_row *r, void *fn, void *ctx);
/* node, agent_version, first_ns, last_ns, batches, cpu_samples, drops */
int store_emit__node(const struct store_row *r, void *fn, void *ctx);
/* node, pid, start_time_ns, comm, cmdline, container, pod, job, has_rank,
 * rank, local_rank, world_size, first_ns, last_ns, cpu_samples */
int store_emit__process(const struct store_row *r, void *fn, void *ctx);
/* node, pid, tid, comm, has_rank, rank, stack id, value */
int store_emit__sample(const struct store_row *r, void *fn, void *ctx);
/* node, pid, has_rank, rank, stack id, bytes, allocations, oldest_ns */
int store_emit__leak(const struct store_row *r, void *fn, void *ctx);
/* node, pid, tid, job, has_rank, rank, kind, index, ns */
int store_emit__thread_time(const struct store_row *r, void *fn, void *ctx);
/* node, kind, cpu, pid, vector, comm, job, has_rank, rank, ns */
int store_emit__cpu_time(const struct store_row *r, void *fn, void *ctx);
/* node, clock_error_ns, freq_hz, batches */
int store_emit__node_clock(const struct store_row *r, void *fn, void *ctx);
/* job, comm_hash, op, size_class, nranks, windows, occurrences, observed_ns,
 * stall_ns, slack_ns, bytes, observed_max_ns, first_ns, last_ns */
int store_emit__collstat(const struct store_row *r, void *fn, void *ctx);
/* job, kind, comm_hash, seq, op, bytes, nranks, since_ns, decided_ns,
 * until_ns, waiting, missing, mismatched, report */
int store_emit__hang(const struct store_row *r, void *fn, void *ctx);

/* id, job, trigger, reason, created_ns, start_ns, end_ns, freq_hz, offcpu,
 * gpu_calls, targets, state */
int store_emit__capture(const struct store_row *r, void *fn, void *ctx);
/* node, start_ns, end_ns, end_reason, freq_hz, processes, samples,
 * gpu_calls, dropped, reported_ns */
int store_emit__capture_run(const struct store_row *r, void *fn, void *ctx);

/* node, pid, (process key), has_rank, rank, fn, calls, total_ns, min_ns,
 * max_ns: the tally without its codes (each backend finds those). */
void store_row__tally(const struct store_row *r, struct store_tally *t);

/* Events: the callback's ctx is a struct store_events (fn is unused). */
struct store_events {
	store_event_fn fn;
	void *ctx;
	uint32_t limit, n; /* hands out at most limit */
	int *truncated;	   /* set when a row beyond the limit came */
	int own_truncated; /* where truncated points when the caller gave none */
	int stacks;	   /* STORE_EVENT_STACKS: the stack column is read */
};

/* The events query's arguments (limit 0: 100000; kinds: whether stacks
 * are wanted); clears *truncated. */
void store_events__init(struct store_events *ev, uint32_t kinds, uint32_t limit, int *truncated,
			store_event_fn fn, void *ctx);
/* kind, node, pid, tid, job, has_rank, rank, name, start_ns, dur_ns, bytes,
 * count, comm_hash, seq, comm_rank (NULL: -1), comm_nranks (NULL: -1),
 * dtype, transfer_kind, direction, call_kind, detail, ret, stack id (read
 * with ev->stacks).  Returns 1 at the limit. */
int store_emit__event(const struct store_row *r, void *fn, void *ctx);

/* ---- diagnosis inputs both dialects query alike --------------------------------- */

/* Per-thread counters: kind, the wire-enum column the index comes from
 * (NULL: index 0) and its list's length, the value, the table.  Stored
 * categories and reasons are wire values (lib/wire_enums.h). */
struct store_thread_part {
	uint32_t kind; /* enum store_thread_kind */
	const char *col;
	uint32_t n;
	const char *value, *table;
};
extern const struct store_thread_part STORE_THREAD_PARTS[];
extern const size_t STORE_NTHREAD_PARTS;

/* The part's index expression ("0" without a column) and its " AND ..."
 * condition ("" without), as lib/wire_enums.h writes them. */
struct store_part_sql {
	char ix[64], cond[96];
};
void store_thread_part__sql(const struct store_thread_part *p, struct store_part_sql *out);

#endif /* STRATA_SERVER_STORE_BACKEND_H */
