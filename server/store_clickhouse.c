// SPDX-License-Identifier: Apache-2.0
/*
 * The ClickHouse store (clusters): the same concepts as the SQLite store,
 * laid out for a column store.  Schema and its reasons: docs/clickhouse.md.
 *
 * - Rows are denormalized: every per-process row carries its node, pid,
 *   process start time, job, container and rank, so every filter is a
 *   WHERE on the row itself (ClickHouse joins are costly).
 * - All-or-nothing ingest without transactions: each ingest attempt gets a
 *   random 64-bit id stamped on every row it writes, and writes the
 *   batches row (the commit record) last.  Queries read only rows whose
 *   attempt committed, and of two committed attempts of one batch_id (a
 *   retry racing a slow first attempt, possibly on another replica) only
 *   the smaller id.  A failed attempt's rows stay invisible until
 *   retention drops their partition.
 * - Stacks are content-addressed (store_stack.id) in stack_frames, written
 *   once per day partition in which they are used (a bounded in-memory set
 *   remembers which), so retention can drop old stacks with the data.
 * - Retention: ClickHouse 18.16 has no TTL; every table is partitioned by
 *   day (of the batch's end), whole days are dropped, and within the
 *   boundary day the commit records are deleted (the rows turn invisible).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lib/hash.h"
#include "lib/wire_enums.h"
#include "server/clickhouse_http.h"
#include "server/store.h"

#define POOL_MAX 8		    /* connections (one query each at a time) */
#define INFLIGHT_MAX 64		    /* concurrent ingests */
#define KNOWN_STACKS_CAP (1u << 20) /* (stack, day) pairs remembered */
#define STACK_IDS_PER_QUERY 2000
#define MAX_CODES 64
#define MUTATION_WAIT_MS 30000

struct known_stacks {
	uint64_t *keys; /* 0 = empty; open addressing */
	uint32_t n;
};

struct ch_store {
	struct store base;
	char optbuf[512];
	struct ch_opts opts;
	char db[64];

	pthread_mutex_t lock; /* everything below */
	pthread_cond_t pool_cond;
	struct ch_client *idle[POOL_MAX];
	unsigned nidle, nclients;
	uint8_t inflight[INFLIGHT_MAX][16];
	unsigned ninflight;
	struct known_stacks known;
	uint64_t batches, duplicates, retention_deleted, busy, stack_cache_resets;
};

/* ---- schema ---------------------------------------------------------------- */

/* Every per-process table starts with these (see row_head). */
#define PROC_COLS_DDL                                                                     \
	"day Date, ingest UInt64, b_start UInt64, b_end UInt64, node String, pid UInt32," \
	" pstart UInt64, job String, container String, has_rank UInt8, rank Int32"
#define PROC_COLS "day, ingest, b_start, b_end, node, pid, pstart, job, container, has_rank, rank"
/* Per-batch (node-level) tables. */
#define NODE_COLS_DDL "day Date, ingest UInt64, b_start UInt64, b_end UInt64, node String"
#define NODE_COLS "day, ingest, b_start, b_end, node"

static const struct table {
	const char *name;
	const char *cols;     /* after the common head */
	const char *order_by; /* the primary key: what queries filter on first */
	int per_process;
} TABLES[] = {
	{ "processes",
	  "ppid UInt32, comm String, cmdline String, cgroup String, pod String,"
	  " local_rank Int32, world_size Int32, cpu_samples UInt64",
	  "job, node, pid, pstart", 1 },
	{ "cpu_samples", "tid UInt32, comm String, stack_id UInt64, count UInt64",
	  "node, pid, stack_id", 1 },
	{ "offcpu_samples",
	  "tid UInt32, comm String, stack_id UInt64, reason UInt8, ns UInt64, count UInt64",
	  "node, pid, stack_id", 1 },
	{ "sched_stats",
	  "tid UInt32, on_cpu_ns UInt64, runqueue_latency_ns UInt64, runnable_wait_ns UInt64,"
	  " switches UInt64",
	  "node, pid, tid", 1 },
	{ "irq_stats", "cpu UInt32, irq_ns UInt64, softirq_ns UInt64", "node, b_end", 0 },
	{ "time_breakdown", "tid UInt32, category UInt8, ns UInt64", "node, pid, tid", 1 },
	{ "cuda_launches",
	  "stack_id UInt64, kernel String, count UInt64, ns_in_call UInt64, grid_x UInt32,"
	  " grid_y UInt32, grid_z UInt32, block_x UInt32, block_y UInt32, block_z UInt32,"
	  " device UInt32, stream UInt64",
	  "node, pid, b_start", 1 },
	{ "cuda_allocs",
	  "ptr UInt64, size UInt64, stack_id UInt64, alloc_ns UInt64, freed UInt8,"
	  " free_ns UInt64, device UInt32, api String, free_only UInt8",
	  "node, pid, pstart, ptr, alloc_ns", 1 },
	{ "cuda_alloc_failures",
	  "stack_id UInt64, code Int32, code_name String, count UInt64, bytes UInt64", "node, pid",
	  1 },
	{ "cuda_transfers",
	  "tid UInt32, stack_id UInt64, kind UInt8, direction UInt8, bytes UInt64, ns UInt64,"
	  " start_ns UInt64, count UInt64, api String",
	  "node, pid, start_ns", 1 },
	{ "cuda_api_tally",
	  "fn String, calls UInt64, total_ns UInt64, min_ns UInt64, max_ns UInt64", "node, pid, fn",
	  1 },
	{ "cuda_api_errors", "fn String, code Int32, name String, count UInt64", "node, pid, fn",
	  1 },
	{ "probe_duty", "probe String, ratio Float64, on_ns UInt64", "node, b_end", 0 },
	{ "nccl_comms",
	  "comm_hash UInt64, comm_rank Int32, nranks Int32, device UInt32, init_ns UInt64",
	  "node, pid, comm_hash", 1 },
	{ "nccl_collectives",
	  "tid UInt32, comm_hash UInt64, seq UInt64, op String, dtype String, bytes UInt64,"
	  " entry_ns UInt64, exit_ns UInt64, peer Int32, stack_id UInt64",
	  "comm_hash, seq, node, pid", 1 },
	{ "nccl_stats",
	  "comm_hash UInt64, op String, count UInt64, bytes UInt64, total_ns UInt64,"
	  " min_ns UInt64, max_ns UInt64",
	  "node, pid, comm_hash", 1 },
	/* CPU layer (issue 7) */
	{ "softirq_vectors", "cpu UInt32, vector UInt32, ns UInt64", "node, b_end", 0 },
	{ "foreign_runs", "cpu UInt32, fpid UInt32, comm String, ns UInt64", "node, b_end", 0 },
	{ "target_cpus", "cpu UInt32, comm String, ns UInt64", "node, pid, cpu", 1 },
};
#define NTABLES (sizeof(TABLES) / sizeof(TABLES[0]))
enum table_id {
	T_PROCESSES,
	T_CPU,
	T_OFFCPU,
	T_SCHED,
	T_IRQ,
	T_BREAKDOWN,
	T_LAUNCHES,
	T_ALLOCS,
	T_ALLOC_FAILURES,
	T_TRANSFERS,
	T_TALLY,
	T_API_ERRORS,
	T_PROBE_DUTY,
	T_NCCL_COMMS,
	T_NCCL_COLL,
	T_NCCL_STATS,
	T_SOFTIRQ,
	T_FOREIGN,
	T_TARGET_CPU,
};
_Static_assert(NTABLES == T_TARGET_CPU + 1, "enum table_id follows TABLES");

/* The commit records and the stacks, which are not per batch/process. */
static const char BATCHES_DDL[] =
	"(day Date, ingest UInt64, batch_id String, node String, agent_version String,"
	" agent_run_id String, seq UInt64, start_ns UInt64, end_ns UInt64, received_ns UInt64,"
	" clock_source UInt8, clock_error_ns UInt64, freq_hz UInt32, wire_bytes UInt64,"
	" cpu_samples UInt64, drops UInt64)"
	" ENGINE = MergeTree PARTITION BY day ORDER BY (batch_id)";
static const char STACKS_DDL[] =
	"(day Date, stack_id UInt64, depth UInt16, kind UInt8, flags UInt32, func String,"
	" file String, line UInt32, module String, build_id String, addr UInt64)"
	" ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (stack_id, depth)";

/* ---- connections --------------------------------------------------------------- */

static struct ch_client *client_get(struct ch_store *s)
{
	struct ch_client *c = NULL;

	pthread_mutex_lock(&s->lock);
	while (!s->nidle && s->nclients >= POOL_MAX)
		pthread_cond_wait(&s->pool_cond, &s->lock);
	if (s->nidle) {
		c = s->idle[--s->nidle];
	} else {
		c = ch_client__new(&s->opts);
		if (c)
			s->nclients++;
	}
	pthread_mutex_unlock(&s->lock);
	return c;
}

static void client_put(struct ch_store *s, struct ch_client *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&s->lock);
	s->idle[s->nidle++] = c;
	pthread_cond_signal(&s->pool_cond);
	pthread_mutex_unlock(&s->lock);
}

static void log_err(const struct ch_client *c, const char *what, int err)
{
	fprintf(stderr, "store_clickhouse: %s: %s (%s)\n", what, ch_client__error(c),
		strerror(-err));
}

/* Runs a query built in q; a builder that ran out of memory is refused. */
static int run_query(struct ch_client *c, struct ch_sql *q, struct ch_result *r, const char *what)
{
	int err;

	memset(r, 0, sizeof(*r));
	if (q->oom)
		return -ENOMEM;
	err = ch_client__query(c, q->p, r);
	if (err)
		log_err(c, what, err);
	return err;
}

static int run_exec(struct ch_client *c, struct ch_sql *q, const char *what)
{
	int err;

	if (q->oom)
		return -ENOMEM;
	err = ch_client__exec(c, q->p);
	if (err)
		log_err(c, what, err);
	return err;
}

/* ---- ingest ------------------------------------------------------------------- */

static uint64_t day_of(uint64_t ns)
{
	return ns / (86400ULL * 1000000000ULL);
}

/* Key of a (stack, day) pair in the known set; never 0. */
static uint64_t known_key(uint64_t stack_id, uint64_t day)
{
	uint64_t pair[2] = { stack_id, day };
	uint64_t k = hash_bytes(pair, sizeof(pair), 0);

	return k ? k : 1;
}

/* Under s->lock.  Returns 1 if present, else 0 (and inserts when insert). */
static int known_lookup(struct ch_store *s, uint64_t key, int insert)
{
	struct known_stacks *ks = &s->known;
	uint32_t mask = KNOWN_STACKS_CAP - 1, i;

	if (!ks->keys) {
		if (!insert)
			return 0;
		ks->keys = calloc(KNOWN_STACKS_CAP, sizeof(*ks->keys));
		if (!ks->keys)
			return 0; /* no memory: stacks are simply written again */
	}
	for (i = (uint32_t)key & mask; ks->keys[i]; i = (i + 1) & mask)
		if (ks->keys[i] == key)
			return 1;
	if (!insert)
		return 0;
	/* Bounded: at 3/4 full forget everything (counted); the cost is
	 * writing stacks again, never a missing one. */
	if (ks->n >= KNOWN_STACKS_CAP / 4 * 3) {
		memset(ks->keys, 0, KNOWN_STACKS_CAP * sizeof(*ks->keys));
		ks->n = 0;
		s->stack_cache_resets++;
		for (i = (uint32_t)key & mask; ks->keys[i]; i = (i + 1) & mask)
			;
	}
	ks->keys[i] = key;
	ks->n++;
	return 0;
}

struct ingest {
	struct ch_store *s;
	const struct store_batch *sb;
	const Strata__V1__Batch *b;
	uint64_t id; /* this attempt */
	struct ch_rows rows[NTABLES];
	struct ch_rows batch_row, stack_rows;
	uint64_t *proc_samples; /* cpu samples per process index */
};

static const char *S(const struct ingest *in, uint32_t i)
{
	return in->b->strings[i];
}

static const char *job_of(const struct ingest *in, const Strata__V1__Process *p)
{
	/* As the SQLite store: the launcher's ids when the agent named no job. */
	if (S(in, p->job_str)[0])
		return S(in, p->job_str);
	return S(in, p->torchelastic_run_id_str)[0] ? S(in, p->torchelastic_run_id_str)
						    : S(in, p->slurm_job_id_str);
}

static void node_head(struct ingest *in, struct ch_rows *w)
{
	ch_rows__date(w, in->b->end_ns);
	ch_rows__u64(w, in->id);
	ch_rows__u64(w, in->b->start_ns);
	ch_rows__u64(w, in->b->end_ns);
	ch_rows__str(w, in->b->node);
}

/* The common head of a per-process row; returns the table's rows. */
static struct ch_rows *row_head(struct ingest *in, enum table_id t, uint32_t process)
{
	const Strata__V1__Process *p = in->b->processes[process];
	struct ch_rows *w = &in->rows[t];

	node_head(in, w);
	ch_rows__u64(w, p->pid);
	ch_rows__u64(w, p->start_time_ns);
	ch_rows__str(w, job_of(in, p));
	ch_rows__str(w, S(in, p->container_str));
	ch_rows__u64(w, p->rank != NULL);
	ch_rows__i64(w, p->rank ? p->rank->rank : -1);
	return w;
}

static uint64_t stack_id(const struct ingest *in, uint32_t idx)
{
	return in->sb->stacks[idx].id;
}

static void rows_cpu(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;

	for (size_t i = 0; i < b->n_cpu_samples; i++) {
		const Strata__V1__CpuSample *c = b->cpu_samples[i];
		struct ch_rows *w = row_head(in, T_CPU, c->process);

		ch_rows__u64(w, c->tid);
		ch_rows__str(w, S(in, c->thread_comm_str));
		ch_rows__u64(w, stack_id(in, c->stack));
		ch_rows__u64(w, c->count);
		ch_rows__end(w);
		in->proc_samples[c->process] += c->count;
	}
	for (size_t i = 0; i < b->n_offcpu_samples; i++) {
		const Strata__V1__OffCpuSample *c = b->offcpu_samples[i];
		struct ch_rows *w = row_head(in, T_OFFCPU, c->process);

		ch_rows__u64(w, c->tid);
		ch_rows__str(w, S(in, b->processes[c->process]->comm_str));
		ch_rows__u64(w, stack_id(in, c->stack));
		ch_rows__u64(w, (uint64_t)c->reason);
		ch_rows__u64(w, c->ns);
		ch_rows__u64(w, c->count);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_sched_stats; i++) {
		const Strata__V1__SchedStat *c = b->sched_stats[i];
		struct ch_rows *w = row_head(in, T_SCHED, c->process);

		ch_rows__u64(w, c->tid);
		ch_rows__u64(w, c->on_cpu_ns);
		ch_rows__u64(w, c->runqueue_latency_ns);
		ch_rows__u64(w, c->runnable_wait_ns);
		ch_rows__u64(w, c->switches);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_irq_stats; i++) {
		struct ch_rows *w = &in->rows[T_IRQ];

		node_head(in, w);
		ch_rows__u64(w, b->irq_stats[i]->cpu);
		ch_rows__u64(w, b->irq_stats[i]->irq_ns);
		ch_rows__u64(w, b->irq_stats[i]->softirq_ns);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_time_breakdown; i++) {
		const Strata__V1__TimeBreakdown *c = b->time_breakdown[i];
		struct ch_rows *w = row_head(in, T_BREAKDOWN, c->process);

		ch_rows__u64(w, c->tid);
		ch_rows__u64(w, (uint64_t)c->category);
		ch_rows__u64(w, c->ns);
		ch_rows__end(w);
	}
}

/* CPU layer rows (issue 7): softirq vectors, foreign runs, target CPUs. */
static void rows_cpu_layer(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;

	for (size_t i = 0; i < b->n_softirq_vectors; i++) {
		struct ch_rows *w = &in->rows[T_SOFTIRQ];

		node_head(in, w);
		ch_rows__u64(w, b->softirq_vectors[i]->cpu);
		ch_rows__u64(w, b->softirq_vectors[i]->vector);
		ch_rows__u64(w, b->softirq_vectors[i]->ns);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_foreign_runs; i++) {
		struct ch_rows *w = &in->rows[T_FOREIGN];

		node_head(in, w);
		ch_rows__u64(w, b->foreign_runs[i]->cpu);
		ch_rows__u64(w, b->foreign_runs[i]->pid);
		ch_rows__str(w, S(in, b->foreign_runs[i]->comm_str));
		ch_rows__u64(w, b->foreign_runs[i]->ns);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_target_cpus; i++) {
		const Strata__V1__TargetCpu *c = b->target_cpus[i];
		struct ch_rows *w = row_head(in, T_TARGET_CPU, c->process);

		ch_rows__u64(w, c->cpu);
		ch_rows__str(w, S(in, b->processes[c->process]->comm_str));
		ch_rows__u64(w, c->ns);
		ch_rows__end(w);
	}
}

static void rows_cuda(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	const Strata__V1__Dim3 zero = STRATA__V1__DIM3__INIT;

	for (size_t i = 0; i < b->n_cuda_launches; i++) {
		const Strata__V1__CudaLaunch *c = b->cuda_launches[i];
		const Strata__V1__Dim3 *g = c->grid ? c->grid : &zero;
		const Strata__V1__Dim3 *k = c->block ? c->block : &zero;
		struct ch_rows *w = row_head(in, T_LAUNCHES, c->process);

		ch_rows__u64(w, stack_id(in, c->stack));
		ch_rows__str(w, S(in, c->kernel_name_str));
		ch_rows__u64(w, c->count);
		ch_rows__u64(w, c->ns_in_call);
		ch_rows__u64(w, g->x), ch_rows__u64(w, g->y), ch_rows__u64(w, g->z);
		ch_rows__u64(w, k->x), ch_rows__u64(w, k->y), ch_rows__u64(w, k->z);
		ch_rows__u64(w, c->device);
		ch_rows__u64(w, c->stream);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_cuda_allocs; i++) {
		const Strata__V1__CudaAlloc *c = b->cuda_allocs[i];
		struct ch_rows *w = row_head(in, T_ALLOCS, c->process);

		ch_rows__u64(w, c->ptr);
		ch_rows__u64(w, c->size);
		ch_rows__u64(w, stack_id(in, c->stack));
		ch_rows__u64(w, c->alloc_ns);
		ch_rows__u64(w, c->freed);
		ch_rows__u64(w, c->free_ns);
		ch_rows__u64(w, c->device);
		ch_rows__str(w, S(in, c->api_str));
		ch_rows__u64(w, c->free_only);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_cuda_alloc_failures; i++) {
		const Strata__V1__CudaAllocFailure *c = b->cuda_alloc_failures[i];
		struct ch_rows *w = row_head(in, T_ALLOC_FAILURES, c->process);

		ch_rows__u64(w, stack_id(in, c->stack));
		ch_rows__i64(w, c->code);
		ch_rows__str(w, S(in, c->code_name_str));
		ch_rows__u64(w, c->count);
		ch_rows__u64(w, c->bytes);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_cuda_transfers; i++) {
		const Strata__V1__CudaTransfer *c = b->cuda_transfers[i];
		struct ch_rows *w = row_head(in, T_TRANSFERS, c->process);

		ch_rows__u64(w, c->tid);
		ch_rows__u64(w, stack_id(in, c->stack));
		ch_rows__u64(w, (uint64_t)c->kind);
		ch_rows__u64(w, (uint64_t)c->direction);
		ch_rows__u64(w, c->bytes);
		ch_rows__u64(w, c->ns);
		ch_rows__u64(w, c->start_ns);
		ch_rows__u64(w, c->count ? c->count : 1);
		ch_rows__str(w, S(in, c->api_str));
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_cuda_api_tally; i++) {
		const Strata__V1__CudaApiTally *c = b->cuda_api_tally[i];
		struct ch_rows *w = row_head(in, T_TALLY, c->process);

		ch_rows__str(w, S(in, c->fn_str));
		ch_rows__u64(w, c->calls);
		ch_rows__u64(w, c->total_ns);
		ch_rows__u64(w, c->min_ns);
		ch_rows__u64(w, c->max_ns);
		ch_rows__end(w);
		for (size_t j = 0; j < c->n_errors; j++) {
			w = row_head(in, T_API_ERRORS, c->process);
			ch_rows__str(w, S(in, c->fn_str));
			ch_rows__i64(w, c->errors[j]->code);
			ch_rows__str(w, S(in, c->errors[j]->name_str));
			ch_rows__u64(w, c->errors[j]->count);
			ch_rows__end(w);
		}
	}
	for (size_t i = 0; i < b->n_probe_duty; i++) {
		struct ch_rows *w = &in->rows[T_PROBE_DUTY];

		node_head(in, w);
		ch_rows__str(w, S(in, b->probe_duty[i]->probe_str));
		ch_rows__f64(w, b->probe_duty[i]->ratio);
		ch_rows__u64(w, b->probe_duty[i]->on_ns);
		ch_rows__end(w);
	}
}

static void rows_nccl(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;

	for (size_t i = 0; i < b->n_nccl_comms; i++) {
		const Strata__V1__NcclComm *c = b->nccl_comms[i];
		struct ch_rows *w = row_head(in, T_NCCL_COMMS, c->process);

		ch_rows__u64(w, c->comm_hash);
		ch_rows__i64(w, c->rank);
		ch_rows__i64(w, c->nranks);
		ch_rows__u64(w, c->device);
		ch_rows__u64(w, c->init_ns);
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_nccl_collectives; i++) {
		const Strata__V1__NcclCollective *c = b->nccl_collectives[i];
		struct ch_rows *w = row_head(in, T_NCCL_COLL, c->process);

		ch_rows__u64(w, c->tid);
		ch_rows__u64(w, c->comm_hash);
		ch_rows__u64(w, c->seq);
		ch_rows__str(w, S(in, c->op_str));
		ch_rows__str(w, S(in, c->dtype_str));
		ch_rows__u64(w, c->bytes);
		ch_rows__u64(w, c->entry_ns);
		ch_rows__u64(w, c->exit_ns);
		ch_rows__i64(w, c->peer);
		ch_rows__u64(w, stack_id(in, c->stack));
		ch_rows__end(w);
	}
	for (size_t i = 0; i < b->n_nccl_stats; i++) {
		const Strata__V1__NcclCollectiveStat *c = b->nccl_stats[i];
		struct ch_rows *w = row_head(in, T_NCCL_STATS, c->process);

		ch_rows__u64(w, c->comm_hash);
		ch_rows__str(w, S(in, c->op_str));
		ch_rows__u64(w, c->count);
		ch_rows__u64(w, c->bytes);
		ch_rows__u64(w, c->total_ns);
		ch_rows__u64(w, c->min_ns);
		ch_rows__u64(w, c->max_ns);
		ch_rows__end(w);
	}
}

/* After rows_cpu: the per-process samples are known. */
static void rows_processes(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;

	for (size_t i = 0; i < b->n_processes; i++) {
		const Strata__V1__Process *p = b->processes[i];
		struct ch_rows *w = row_head(in, T_PROCESSES, (uint32_t)i);

		ch_rows__u64(w, p->ppid);
		ch_rows__str(w, S(in, p->comm_str));
		ch_rows__str(w, S(in, p->cmdline_str));
		ch_rows__str(w, S(in, p->cgroup_str));
		ch_rows__str(w, S(in, p->pod_str));
		ch_rows__i64(w, p->rank ? p->rank->local_rank : -1);
		ch_rows__i64(w, p->rank ? p->rank->world_size : -1);
		ch_rows__u64(w, in->proc_samples[i]);
		ch_rows__end(w);
	}
}

static void hex(char *out, const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static void rows_batch(struct ingest *in, const char *batch_hex)
{
	const Strata__V1__Batch *b = in->b;
	const Strata__V1__Drops *d = b->drops;
	struct ch_rows *w = &in->batch_row;
	char run[2 * 16 + 1];
	uint64_t samples = 0, drops = 0;

	for (size_t i = 0; i < b->n_cpu_samples; i++)
		samples += b->cpu_samples[i]->count;
	if (d)
		drops = d->map_full + d->stack_lost + d->proc_unknown + d->other +
			d->spool_dropped + d->cuda_events_lost + d->nccl_events_lost +
			d->batch_rows_dropped;
	hex(run, b->agent_run_id.data, b->agent_run_id.len > 16 ? 16 : b->agent_run_id.len);
	ch_rows__date(w, b->end_ns);
	ch_rows__u64(w, in->id);
	ch_rows__str(w, batch_hex);
	ch_rows__str(w, b->node);
	ch_rows__str(w, b->agent_version);
	ch_rows__str(w, run);
	ch_rows__u64(w, b->seq);
	ch_rows__u64(w, b->start_ns);
	ch_rows__u64(w, b->end_ns);
	ch_rows__u64(w, in->sb->received_ns);
	ch_rows__u64(w, b->clock ? (uint64_t)b->clock->source : 0);
	ch_rows__u64(w, b->clock ? b->clock->error_bound_ns : 0);
	ch_rows__u64(w, b->freq_hz);
	ch_rows__u64(w, in->sb->wire_bytes);
	ch_rows__u64(w, samples);
	ch_rows__u64(w, drops);
	ch_rows__end(w);
}

/* The stacks this batch uses that are not known to be stored for its day. */
static void rows_stacks(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	uint64_t day = day_of(b->end_ns);

	for (size_t i = 0; i < b->n_stacks; i++) {
		const struct store_stack *st = &in->sb->stacks[i];
		int known;

		pthread_mutex_lock(&in->s->lock);
		known = known_lookup(in->s, known_key(st->id, day), 0);
		pthread_mutex_unlock(&in->s->lock);
		if (known)
			continue;
		for (uint32_t j = 0; j < st->nframes; j++) {
			const struct store_frame *f = &st->frames[j];
			struct ch_rows *w = &in->stack_rows;

			ch_rows__date(w, b->end_ns);
			ch_rows__u64(w, st->id);
			ch_rows__u64(w, j);
			ch_rows__u64(w, f->kind);
			ch_rows__u64(w, f->flags);
			ch_rows__str(w, f->func); /* NULL (unresolved) is stored as "" */
			ch_rows__str(w, f->file);
			ch_rows__u64(w, f->line);
			ch_rows__str(w, f->module);
			ch_rows__str(w, f->build_id);
			ch_rows__u64(w, f->addr);
			ch_rows__end(w);
		}
	}
}

static void stacks_mark_known(struct ingest *in)
{
	uint64_t day = day_of(in->b->end_ns);

	pthread_mutex_lock(&in->s->lock);
	for (size_t i = 0; i < in->b->n_stacks; i++)
		known_lookup(in->s, known_key(in->sb->stacks[i].id, day), 1);
	pthread_mutex_unlock(&in->s->lock);
}

/* Claims batch_id for this ingest: 0, or -EAGAIN while another ingest of
 * the same batch runs here (or too many run). */
static int inflight_claim(struct ch_store *s, const uint8_t id[16])
{
	int err = 0;

	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->ninflight && !err; i++)
		if (!memcmp(s->inflight[i], id, 16))
			err = -EAGAIN;
	if (!err && s->ninflight == INFLIGHT_MAX)
		err = -EAGAIN;
	if (!err)
		memcpy(s->inflight[s->ninflight++], id, 16);
	else
		s->busy++;
	pthread_mutex_unlock(&s->lock);
	return err;
}

static void inflight_release(struct ch_store *s, const uint8_t id[16])
{
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->ninflight; i++) {
		if (!memcmp(s->inflight[i], id, 16)) {
			memmove(s->inflight[i], s->inflight[--s->ninflight], 16);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

static uint64_t new_ingest_id(void)
{
	uint64_t id = 0;

	while (!id) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t seed[3] = { (uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec,
					     (uint64_t)getpid() };

			id = hash_bytes(seed, sizeof(seed), 0);
		}
	}
	return id;
}

/* 1 when a committed attempt of this batch exists, 0 when none, -errno. */
static int committed(struct ch_store *s, struct ch_client *c, const char *batch_hex)
{
	struct ch_sql q = { 0 };
	struct ch_result r;
	int err;

	ch_sql__add(&q, "SELECT count() FROM %s.batches WHERE batch_id = ", s->db);
	ch_sql__quote(&q, batch_hex);
	err = run_query(c, &q, &r, "duplicate check");
	ch_sql__free(&q);
	if (!err)
		err = ch_result__u64(&r, 0, 0, NULL) > 0;
	ch_result__free(&r);
	return err;
}

static int insert_rows(struct ch_store *s, struct ch_client *c, const char *table, const char *cols,
		       const struct ch_rows *w)
{
	char tc[1024];
	int err;

	snprintf(tc, sizeof(tc), "%s.%s (%s)", s->db, table, cols);
	err = ch_client__insert(c, tc, w);
	if (err)
		log_err(c, table, err);
	return err;
}

static const char *const TABLE_INSERT_COLS[NTABLES] = {
	[T_PROCESSES] = PROC_COLS ", ppid, comm, cmdline, cgroup, pod, local_rank, world_size,"
				  " cpu_samples",
	[T_CPU] = PROC_COLS ", tid, comm, stack_id, count",
	[T_OFFCPU] = PROC_COLS ", tid, comm, stack_id, reason, ns, count",
	[T_SCHED] = PROC_COLS ", tid, on_cpu_ns, runqueue_latency_ns, runnable_wait_ns, switches",
	[T_IRQ] = NODE_COLS ", cpu, irq_ns, softirq_ns",
	[T_BREAKDOWN] = PROC_COLS ", tid, category, ns",
	[T_LAUNCHES] = PROC_COLS ", stack_id, kernel, count, ns_in_call, grid_x, grid_y, grid_z,"
				 " block_x, block_y, block_z, device, stream",
	[T_ALLOCS] = PROC_COLS ", ptr, size, stack_id, alloc_ns, freed, free_ns, device, api,"
			       " free_only",
	[T_ALLOC_FAILURES] = PROC_COLS ", stack_id, code, code_name, count, bytes",
	[T_TRANSFERS] = PROC_COLS ", tid, stack_id, kind, direction, bytes, ns, start_ns, count,"
				  " api",
	[T_TALLY] = PROC_COLS ", fn, calls, total_ns, min_ns, max_ns",
	[T_API_ERRORS] = PROC_COLS ", fn, code, name, count",
	[T_PROBE_DUTY] = NODE_COLS ", probe, ratio, on_ns",
	[T_NCCL_COMMS] = PROC_COLS ", comm_hash, comm_rank, nranks, device, init_ns",
	[T_NCCL_COLL] = PROC_COLS ", tid, comm_hash, seq, op, dtype, bytes, entry_ns, exit_ns,"
				  " peer, stack_id",
	[T_NCCL_STATS] = PROC_COLS ", comm_hash, op, count, bytes, total_ns, min_ns, max_ns",
	[T_SOFTIRQ] = NODE_COLS ", cpu, vector, ns",
	[T_FOREIGN] = NODE_COLS ", cpu, fpid, comm, ns",
	[T_TARGET_CPU] = PROC_COLS ", cpu, comm, ns",
};

static int ch_ingest(struct store *base, const struct store_batch *sb)
{
	struct ch_store *s = (struct ch_store *)base;
	const Strata__V1__Batch *b = sb->pb;
	struct ingest in = { .s = s, .sb = sb, .b = b, .id = new_ingest_id() };
	uint8_t key[16] = { 0 };
	char batch_hex[2 * 16 + 1];
	struct ch_client *c = NULL;
	int err;

	/* batch_id is 16 random bytes; anything else is keyed by what it has. */
	memcpy(key, b->batch_id.data, b->batch_id.len < 16 ? b->batch_id.len : 16);
	hex(batch_hex, key, 16);
	err = inflight_claim(s, key);
	if (err)
		return err;
	in.proc_samples = calloc(b->n_processes ? b->n_processes : 1, sizeof(uint64_t));
	for (size_t t = 0; t < NTABLES; t++)
		ch_rows__init(&in.rows[t]);
	ch_rows__init(&in.batch_row);
	ch_rows__init(&in.stack_rows);
	c = client_get(s);
	if (!in.proc_samples || !c) {
		err = -ENOMEM;
		goto out;
	}
	err = committed(s, c, batch_hex);
	if (err) /* 1: the agent retried a stored batch; nothing is written */
		goto out;
	rows_cpu(&in);
	rows_cpu_layer(&in);
	rows_cuda(&in);
	rows_nccl(&in);
	rows_processes(&in);
	rows_stacks(&in);
	rows_batch(&in, batch_hex);
	/* Stacks first, the commit record last: once a batch is visible,
	 * everything it refers to is stored. */
	err = insert_rows(
		s, c, "stack_frames",
		"day, stack_id, depth, kind, flags, func, file, line, module, build_id, addr",
		&in.stack_rows);
	for (size_t t = 0; t < NTABLES && !err; t++)
		err = insert_rows(s, c, TABLES[t].name, TABLE_INSERT_COLS[t], &in.rows[t]);
	if (!err)
		err = insert_rows(s, c, "batches",
				  "day, ingest, batch_id, node, agent_version, agent_run_id,"
				  " seq, start_ns, end_ns, received_ns, clock_source,"
				  " clock_error_ns, freq_hz, wire_bytes, cpu_samples, drops",
				  &in.batch_row);
	if (!err)
		stacks_mark_known(&in);
out:
	client_put(s, c);
	for (size_t t = 0; t < NTABLES; t++)
		ch_rows__free(&in.rows[t]);
	ch_rows__free(&in.batch_row);
	ch_rows__free(&in.stack_rows);
	free(in.proc_samples);
	inflight_release(s, key);
	pthread_mutex_lock(&s->lock);
	if (err == 0)
		s->batches++;
	else if (err == 1)
		s->duplicates++;
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* ---- filters ------------------------------------------------------------------ */

/*
 * " AND ..." over a table's own columns.  time_col: the event time column,
 * or NULL for the batch window (b_start, b_end).  Then only rows of
 * committed attempts (the smaller id when a batch was committed twice).
 */
static void sql_filter(struct ch_store *s, struct ch_sql *q, const struct store_filter *f,
		       const char *time_col, int per_process)
{
	if (!time_col && f->batch_by_end)
		time_col = "b_end";
	if (f->from_ns)
		ch_sql__add(q, " AND %s %s %" PRIu64, time_col ? time_col : "b_end",
			    time_col ? ">=" : ">", f->from_ns);
	if (f->to_ns)
		ch_sql__add(q, " AND %s < %" PRIu64, time_col ? time_col : "b_start", f->to_ns);
	if (f->node && f->node[0]) {
		ch_sql__add(q, " AND node = ");
		ch_sql__quote(q, f->node);
	}
	if (per_process) {
		if (f->pid)
			ch_sql__add(q, " AND pid = %" PRIu32, f->pid);
		if (f->job && f->job[0]) {
			ch_sql__add(q, " AND job = ");
			ch_sql__quote(q, f->job);
		}
		if (f->container && f->container[0]) {
			ch_sql__add(q, " AND container = ");
			ch_sql__quote(q, f->container);
		}
		if (f->has_rank)
			ch_sql__add(q, " AND has_rank = 1 AND rank %s %" PRId32,
				    f->rank_negate ? "!=" : "=", f->rank);
	}
	/* An event at t lies in its batch's window, so the window bounds the
	 * commit records to read either way. */
	ch_sql__add(q, " AND ingest IN (SELECT min(ingest) FROM %s.batches WHERE 1", s->db);
	if (f->from_ns)
		ch_sql__add(q, " AND end_ns %s %" PRIu64, f->batch_by_end ? ">=" : ">", f->from_ns);
	if (f->to_ns)
		ch_sql__add(q, " AND start_ns < %" PRIu64, f->to_ns);
	ch_sql__add(q, " GROUP BY batch_id)");
}

static int has_process_filter(const struct store_filter *f)
{
	return f->pid || (f->job && f->job[0]) || f->has_rank || (f->container && f->container[0]);
}

/* ---- stacks for one query ------------------------------------------------------ */

struct stack_set {
	struct store_stack *v; /* sorted by id after load */
	struct store_frame *frames;
	size_t n, nframes;
	struct ch_result *results; /* own the frames' strings */
	size_t nresults;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static const char *or_null(const char *s)
{
	return s[0] ? s : NULL;
}

/* Loads the frames of ids[0..n) (sorted, unique) into set. */
static int stack_set__load(struct ch_store *s, struct ch_client *c, struct stack_set *set,
			   const uint64_t *ids, size_t n)
{
	size_t total = 0;
	int err = 0;

	memset(set, 0, sizeof(*set));
	set->v = calloc(n ? n : 1, sizeof(*set->v));
	set->results = calloc(n / STACK_IDS_PER_QUERY + 1, sizeof(*set->results));
	if (!set->v || !set->results)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		set->v[i].id = ids[i];
	set->n = n;
	for (size_t at = 0; at < n && !err; at += STACK_IDS_PER_QUERY) {
		struct ch_sql q = { 0 };
		size_t end = at + STACK_IDS_PER_QUERY < n ? at + STACK_IDS_PER_QUERY : n;

		ch_sql__add(
			&q,
			"SELECT stack_id, depth, kind, flags, func, file, line, module, build_id,"
			" addr FROM %s.stack_frames WHERE stack_id IN (",
			s->db);
		for (size_t i = at; i < end; i++)
			ch_sql__add(&q, "%s%" PRIu64, i > at ? "," : "", ids[i]);
		/* A stack is stored once per day it was used in: one copy each. */
		ch_sql__add(&q, ") ORDER BY stack_id, depth LIMIT 1 BY stack_id, depth");
		err = run_query(c, &q, &set->results[set->nresults++], "stack frames");
		ch_sql__free(&q);
		if (!err)
			total += set->results[set->nresults - 1].rows;
	}
	if (err)
		return err;
	set->frames = calloc(total ? total : 1, sizeof(*set->frames));
	if (!set->frames)
		return -ENOMEM;
	/* Rows come sorted by (stack_id, depth), as are the ids. */
	size_t k = 0;
	for (size_t ri = 0; ri < set->nresults; ri++) {
		const struct ch_result *r = &set->results[ri];

		for (size_t row = 0; row < r->rows; row++) {
			uint64_t id = ch_result__u64(r, row, 0, NULL);
			struct store_frame *f = &set->frames[set->nframes];

			while (k < n && set->v[k].id < id)
				k++;
			if (k == n || set->v[k].id != id)
				return -EPROTO;
			if (!set->v[k].nframes)
				set->v[k].frames = f;
			set->v[k].nframes++;
			f->kind = (uint32_t)ch_result__u64(r, row, 2, NULL);
			f->flags = (uint32_t)ch_result__u64(r, row, 3, NULL);
			f->func = or_null(ch_result__str(r, row, 4));
			f->file = or_null(ch_result__str(r, row, 5));
			f->line = (uint32_t)ch_result__u64(r, row, 6, NULL);
			f->module = ch_result__str(r, row, 7);
			f->build_id = or_null(ch_result__str(r, row, 8));
			f->addr = ch_result__u64(r, row, 9, NULL);
			set->nframes++;
		}
	}
	return 0;
}

static const struct store_stack *stack_set__get(const struct stack_set *set, uint64_t id)
{
	size_t lo = 0, hi = set->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set->v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < set->n && set->v[lo].id == id ? &set->v[lo] : NULL;
}

static void stack_set__free(struct stack_set *set)
{
	for (size_t i = 0; i < set->nresults; i++)
		ch_result__free(&set->results[i]);
	free(set->results);
	free(set->frames);
	free(set->v);
	memset(set, 0, sizeof(*set));
}

/* The stacks that column col of r names. */
static int stacks_of(struct ch_store *s, struct ch_client *c, const struct ch_result *r, size_t col,
		     struct stack_set *set)
{
	uint64_t *ids = malloc((r->rows ? r->rows : 1) * sizeof(*ids));
	size_t n = 0;
	int err;

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < r->rows; i++)
		ids[i] = ch_result__u64(r, i, col, NULL);
	qsort(ids, r->rows, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < r->rows; i++)
		if (!n || ids[n - 1] != ids[i])
			ids[n++] = ids[i];
	err = stack_set__load(s, c, set, ids, n);
	free(ids);
	return err;
}

/* ---- queries ------------------------------------------------------------------ */

/* Turns row i of a result into the callback's struct and calls fn. */
typedef int (*row_conv)(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
			void *ctx);

/*
 * Runs q (freed here), loads the stacks that column stack_col names (-1:
 * none), then hands every row to conv until one returns non-zero.
 */
static int query_rows(struct ch_store *s, struct ch_sql *q, const char *what, int stack_col,
		      row_conv conv, void *fn, void *ctx)
{
	struct ch_client *c = client_get(s);
	struct stack_set set = { 0 };
	struct ch_result r = { 0 };
	int err = -ENOMEM;

	if (c)
		err = run_query(c, q, &r, what);
	if (!err && stack_col >= 0)
		err = stacks_of(s, c, &r, (size_t)stack_col, &set);
	for (size_t i = 0; !err && i < r.rows; i++)
		err = conv(&r, i, &set, fn, ctx);
	stack_set__free(&set);
	ch_result__free(&r);
	ch_sql__free(q);
	client_put(s, c);
	return err;
}

#define U64(col) ch_result__u64(r, i, (col), NULL)
#define I64(col) ch_result__i64(r, i, (col), NULL)
#define STR(col) ch_result__str(r, i, (col))

static int job_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
		   void *ctx)
{
	struct store_job j = {
		.job = STR(0),
		.nodes = (uint32_t)U64(1),
		.processes = (uint32_t)U64(2),
		.ranks = (uint32_t)U64(3),
		.world_size = (int32_t)I64(4),
		.first_ns = U64(5),
		.last_ns = U64(6),
		.cpu_samples = U64(7),
	};

	return ((store_job_fn)fn)(ctx, &j);
}

static int ch_jobs(struct store *base, const struct store_filter *f, store_job_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT job, uniqExact(node), uniqExact(node, pid, pstart),"
		    " uniqExactIf(rank, has_rank = 1), max(world_size), min(b_start), max(b_end),"
		    " sum(cpu_samples) FROM %s.processes WHERE job != ''",
		    s->db);
	sql_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY job ORDER BY max(b_end) DESC");
	return query_rows(s, &q, "jobs", -1, job_row, (void *)fn, ctx);
}

static int node_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
		    void *ctx)
{
	struct store_node n = {
		.node = STR(0),
		.agent_version = STR(1),
		.first_ns = U64(2),
		.last_ns = U64(3),
		.batches = U64(4),
		.cpu_samples = U64(5),
		.drops = U64(6),
	};

	return ((store_node_fn)fn)(ctx, &n);
}

static int ch_nodes(struct store *base, const struct store_filter *f, store_node_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(
		&q,
		"SELECT node, argMax(agent_version, end_ns), min(start_ns), max(end_ns), count(),"
		" sum(cpu_samples), sum(drops) FROM %s.batches WHERE 1",
		s->db);
	if (f->from_ns)
		ch_sql__add(&q, " AND end_ns > %" PRIu64, f->from_ns);
	if (f->to_ns)
		ch_sql__add(&q, " AND start_ns < %" PRIu64, f->to_ns);
	if (f->node && f->node[0]) {
		ch_sql__add(&q, " AND node = ");
		ch_sql__quote(&q, f->node);
	}
	ch_sql__add(&q, " AND ingest IN (SELECT min(ingest) FROM %s.batches GROUP BY batch_id)",
		    s->db);
	if (has_process_filter(f)) {
		struct store_filter g = *f;

		g.from_ns = g.to_ns = 0;
		ch_sql__add(&q, " AND node IN (SELECT node FROM %s.processes WHERE 1", s->db);
		sql_filter(s, &q, &g, NULL, 1);
		ch_sql__add(&q, ")");
	}
	ch_sql__add(&q, " GROUP BY node ORDER BY node");
	return query_rows(s, &q, "nodes", -1, node_row, (void *)fn, ctx);
}

static int process_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
		       void *ctx)
{
	struct store_process p = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.start_time_ns = U64(2),
		.comm = STR(3),
		.cmdline = STR(4),
		.container = STR(5),
		.pod = STR(6),
		.job = STR(7),
		.has_rank = (int)U64(8),
		.rank = (int32_t)I64(9),
		.local_rank = (int32_t)I64(10),
		.world_size = (int32_t)I64(11),
		.first_ns = U64(12),
		.last_ns = U64(13),
		.cpu_samples = U64(14),
	};

	return ((store_process_fn)fn)(ctx, &p);
}

static int ch_processes(struct store *base, const struct store_filter *f, store_process_fn fn,
			void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	/* A process instance's latest non-empty labels (as SQLite's upsert). */
	ch_sql__add(&q,
		    "SELECT node, pid, pstart, argMax(comm, b_end), argMax(cmdline, b_end),"
		    " argMaxIf(container, b_end, container != ''), argMaxIf(pod, b_end, pod != ''),"
		    " argMaxIf(job, b_end, job != '') AS j, max(has_rank),"
		    " if(max(has_rank) = 1, argMaxIf(rank, b_end, has_rank = 1), -1) AS rk,"
		    " if(max(has_rank) = 1, argMaxIf(local_rank, b_end, has_rank = 1), -1),"
		    " if(max(has_rank) = 1, argMaxIf(world_size, b_end, has_rank = 1), -1),"
		    " min(b_start), max(b_end), sum(cpu_samples) FROM %s.processes WHERE 1",
		    s->db);
	sql_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY node, pid, pstart ORDER BY j, rk, node, pid");
	return query_rows(s, &q, "processes", -1, process_row, (void *)fn, ctx);
}

static int sample_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
		      void *ctx)
{
	struct store_sample smp = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.tid = (uint32_t)U64(2),
		.comm = STR(3),
		.has_rank = (int)U64(4),
		.rank = (int32_t)I64(5),
		.stack = stack_set__get(set, U64(6)),
		.value = U64(7),
	};

	return ((store_sample_fn)fn)(ctx, &smp);
}

static int ch_profile(struct store *base, const struct store_filter *f,
		      enum store_profile_kind kind, store_sample_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT node, pid, tid, comm, has_rank, rank, stack_id, sum(%s) FROM %s.%s"
		    " WHERE 1",
		    kind == STORE_PROFILE_OFFCPU ? "ns" : "count", s->db,
		    kind == STORE_PROFILE_OFFCPU ? "offcpu_samples" : "cpu_samples");
	sql_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY node, pid, tid, comm, has_rank, rank, stack_id");
	return query_rows(s, &q, "profile", 6, sample_row, (void *)fn, ctx);
}

static int leak_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
		    void *ctx)
{
	struct store_leak l = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.has_rank = (int)U64(2),
		.rank = (int32_t)I64(3),
		.stack = stack_set__get(set, U64(4)),
		.bytes = U64(5),
		.allocations = U64(6),
		.oldest_ns = U64(7),
	};

	return ((store_leak_fn)fn)(ctx, &l);
}

static int ch_leaks(struct store *base, const struct store_filter *f, store_leak_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct store_filter g = *f;
	uint64_t at = f->to_ns ? f->to_ns : INT64_MAX;
	struct ch_sql q = { 0 };

	/*
	 * One allocation is (process instance, ptr, alloc_ns): its own record
	 * plus, when freed in a later window, a free_only record.  Outstanding
	 * at `at`: made before it and no record frees it before it.
	 */
	g.to_ns = 0;
	ch_sql__add(&q,
		    "SELECT node, pid, any(hr), any(rk), sid, sum(sz), count(), min(alloc_ns) FROM"
		    " (SELECT node, pid, pstart, ptr, alloc_ns,"
		    " anyIf(has_rank, free_only = 0) AS hr, anyIf(rank, free_only = 0) AS rk,"
		    " anyIf(stack_id, free_only = 0) AS sid, anyIf(size, free_only = 0) AS sz,"
		    " countIf(free_only = 0) AS allocs,"
		    " countIf(freed = 1 AND free_ns < %" PRIu64 ") AS frees"
		    " FROM %s.cuda_allocs WHERE alloc_ns < %" PRIu64,
		    at, s->db, at);
	sql_filter(s, &q, &g, "alloc_ns", 1);
	ch_sql__add(&q,
		    " GROUP BY node, pid, pstart, ptr, alloc_ns HAVING allocs > 0 AND frees = 0)"
		    " GROUP BY node, pid, sid ORDER BY sum(sz) DESC");
	return query_rows(s, &q, "leaks", 4, leak_row, (void *)fn, ctx);
}

/* Error codes by (node, pid, pstart, fn), for the tally rows. */
struct tally_ctx {
	store_tally_fn fn;
	void *ctx;
	struct ch_result errors;
};

static int tally_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
		     void *ctx)
{
	const struct tally_ctx *tc = ctx;
	const struct ch_result *e = &tc->errors;
	struct store_api_code codes[MAX_CODES];
	struct store_tally t = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.has_rank = (int)U64(3),
		.rank = (int32_t)I64(4),
		.fn = STR(5),
		.calls = U64(6),
		.total_ns = U64(7),
		.min_ns = U64(8),
		.max_ns = U64(9),
		.codes = codes,
	};

	/* At most MAX_CODES, the most frequent first (the errors' order). */
	for (size_t k = 0; k < e->rows && t.ncodes < MAX_CODES; k++) {
		int same = 1;

		for (size_t col = 0; col < 3 && same; col++)
			same = !strcmp(ch_result__str(e, k, col), STR(col));
		if (!same || strcmp(ch_result__str(e, k, 3), t.fn))
			continue;
		codes[t.ncodes++] = (struct store_api_code){
			.code = (int32_t)ch_result__i64(e, k, 4, NULL),
			.name = ch_result__str(e, k, 5),
			.count = ch_result__u64(e, k, 6, NULL),
		};
	}
	return tc->fn(tc->ctx, &t);
}

static int ch_tally(struct store *base, const struct store_filter *f, store_tally_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct tally_ctx tc = { .fn = fn, .ctx = ctx };
	struct ch_sql q = { 0 };
	struct ch_client *c;
	int err;

	ch_sql__add(&q,
		    "SELECT node, pid, pstart, fn, code, name, sum(count) FROM %s.cuda_api_errors"
		    " WHERE 1",
		    s->db);
	sql_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY node, pid, pstart, fn, code, name"
			" ORDER BY node, pid, pstart, fn, sum(count) DESC");
	c = client_get(s);
	err = c ? run_query(c, &q, &tc.errors, "tally errors") : -ENOMEM;
	client_put(s, c);
	ch_sql__free(&q);
	if (err)
		return err;
	ch_sql__add(&q,
		    "SELECT node, pid, pstart, any(has_rank), any(rank), fn, sum(calls),"
		    " sum(total_ns), min(min_ns), max(max_ns) FROM %s.cuda_api_tally WHERE 1",
		    s->db);
	sql_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY node, pid, pstart, fn ORDER BY sum(total_ns) DESC");
	err = query_rows(s, &q, "tally", -1, tally_row, NULL, &tc);
	ch_result__free(&tc.errors);
	return err;
}

struct event_ctx {
	store_event_fn fn;
	void *ctx;
	uint32_t limit;
	int *truncated;
};

static int event_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
		     void *ctx)
{
	const struct event_ctx *ec = ctx;
	struct store_event e = {
		.kind = (uint32_t)U64(0),
		.node = STR(1),
		.pid = (uint32_t)U64(2),
		.tid = (uint32_t)U64(3),
		.job = STR(4),
		.has_rank = (int)U64(5),
		.rank = (int32_t)I64(6),
		.name = STR(7),
		.start_ns = U64(8),
		.dur_ns = U64(9),
		.bytes = U64(10),
		.count = U64(11),
		.comm_hash = U64(12),
		.seq = U64(13),
		.comm_rank = (int32_t)I64(14),
		.comm_nranks = (int32_t)I64(15),
		.dtype = STR(16),
		.transfer_kind = (uint32_t)U64(17),
		.direction = (uint32_t)U64(18),
	};

	if (i == ec->limit) { /* the query asked for one more than the limit */
		*ec->truncated = 1;
		return 1;
	}
	return ec->fn(ec->ctx, &e);
}

#undef U64
#undef I64
#undef STR

#define EV_COLS(tid) "node, pid, " tid " AS t_id, job, has_rank, rank, "

static int ch_events(struct store *base, const struct store_filter *f, uint32_t kinds,
		     uint32_t limit, int *truncated, store_event_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	int trunc = 0;
	struct event_ctx ec = { .fn = fn,
				.ctx = ctx,
				.limit = limit ? limit : 100000,
				.truncated = truncated ? truncated : &trunc };
	struct ch_sql q = { 0 };
	const char *sep = "";
	int err;

	*ec.truncated = 0;
	if (!(kinds & (STORE_EVENT_COLLECTIVE | STORE_EVENT_TRANSFER | STORE_EVENT_LAUNCH)))
		return 0;
	ch_sql__add(&q, "SELECT * FROM (");
	if (kinds & STORE_EVENT_COLLECTIVE) {
		/* The communicator's rank/size from its latest init record. */
		ch_sql__add(&q,
			    "SELECT toUInt32(%u) AS k," EV_COLS(
				    "tid") " op AS name, entry_ns AS start,"
					   " toUInt64(if(exit_ns > entry_ns, exit_ns - entry_ns, "
					   "0)) AS dur,"
					   " bytes AS b, toUInt64(1) AS cnt, comm_hash AS ch, seq "
					   "AS sq,"
					   " if(known = 1, crank, -1) AS cr, if(known = 1, cn, -1) "
					   "AS cnr,"
					   " dtype AS dt, toUInt8(0) AS tk, toUInt8(0) AS dir"
					   " FROM %s.nccl_collectives ANY LEFT JOIN"
					   " (SELECT node, pid, pstart, comm_hash, "
					   "argMax(comm_rank, init_ns) AS crank,"
					   " argMax(nranks, init_ns) AS cn, toUInt8(1) AS known "
					   "FROM %s.nccl_comms"
					   " WHERE 1",
			    STORE_EVENT_COLLECTIVE, s->db, s->db);
		sql_filter(s, &q, &(struct store_filter){ .node = f->node }, NULL, 0);
		ch_sql__add(&q, " GROUP BY node, pid, pstart, comm_hash)"
				" USING (node, pid, pstart, comm_hash) WHERE 1");
		sql_filter(s, &q, f, "entry_ns", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_TRANSFER) {
		ch_sql__add(
			&q,
			"%sSELECT toUInt32(%u) AS k," EV_COLS(
				"tid") " api AS name, start_ns AS start, ns AS dur, bytes AS b, "
				       "count AS cnt,"
				       " toUInt64(0) AS ch, toUInt64(0) AS sq, toInt32(-1) AS cr,"
				       " toInt32(-1) AS cnr, '' AS dt, kind AS tk, direction AS dir"
				       " FROM %s.cuda_transfers WHERE start_ns > 0",
			sep, STORE_EVENT_TRANSFER, s->db);
		sql_filter(s, &q, f, "start_ns", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_LAUNCH) {
		ch_sql__add(&q,
			    "%sSELECT toUInt32(%u) AS k," EV_COLS(
				    "toUInt32(0)") " kernel AS name, b_start AS start, ns_in_call "
						   "AS dur, toUInt64(0) AS b,"
						   " count AS cnt, toUInt64(0) AS ch, toUInt64(0) "
						   "AS sq, toInt32(-1) AS cr,"
						   " toInt32(-1) AS cnr, '' AS dt, toUInt8(0) AS "
						   "tk, toUInt8(0) AS dir"
						   " FROM %s.cuda_launches WHERE 1",
			    sep, STORE_EVENT_LAUNCH, s->db);
		sql_filter(s, &q, f, "b_start", 1);
	}
	ch_sql__add(&q, ") ORDER BY start LIMIT %u", ec.limit + 1);
	err = query_rows(s, &q, "events", -1, event_row, NULL, &ec);
	return err == 1 ? 0 : err;
}

/* ---- retention ------------------------------------------------------------------ */

/* Waits until the table's mutations are applied (18.16 runs them in the
 * background and has no mutations_sync). */
static int wait_mutations(struct ch_store *s, struct ch_client *c, const char *table)
{
	for (int waited = 0; waited < MUTATION_WAIT_MS; waited += 50) {
		struct ch_sql q = { 0 };
		struct ch_result r;
		int err;

		ch_sql__add(&q, "SELECT count() FROM system.mutations WHERE database = ");
		ch_sql__quote(&q, s->db);
		ch_sql__add(&q, " AND table = ");
		ch_sql__quote(&q, table);
		ch_sql__add(&q, " AND is_done = 0");
		err = run_query(c, &q, &r, "mutations");
		ch_sql__free(&q);
		if (err)
			return err;
		uint64_t pending = ch_result__u64(&r, 0, 0, NULL);
		ch_result__free(&r);
		if (!pending)
			return 0;
		usleep(50 * 1000);
	}
	return -ETIMEDOUT;
}

static int ch_retain(struct store *base, uint64_t before_ns, uint64_t *deleted)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_client *c = client_get(s);
	time_t secs = (time_t)(before_ns / 1000000000ULL);
	struct ch_sql q = { 0 };
	struct ch_result r = { 0 };
	char day[16];
	struct tm tm;
	uint64_t n = 0;
	int err;

	if (!c)
		return -ENOMEM;
	gmtime_r(&secs, &tm);
	strftime(day, sizeof(day), "%Y%m%d", &tm); /* partition ids of Date keys */
	ch_sql__add(&q,
		    "SELECT uniqExact(batch_id) FROM %s.batches WHERE end_ns < %" PRIu64
		    " AND ingest IN (SELECT min(ingest) FROM %s.batches GROUP BY batch_id)",
		    s->db, before_ns, s->db);
	err = run_query(c, &q, &r, "retention count");
	n = err ? 0 : ch_result__u64(&r, 0, 0, NULL);
	ch_result__free(&r);
	ch_sql__free(&q);

	/* Whole days before the cut-off, in every table. */
	if (!err) {
		ch_sql__add(&q, "SELECT DISTINCT table, partition_id FROM system.parts"
				" WHERE active AND database = ");
		ch_sql__quote(&q, s->db);
		ch_sql__add(&q, " AND partition_id < ");
		ch_sql__quote(&q, day);
		err = run_query(c, &q, &r, "retention partitions");
		ch_sql__free(&q);
	}
	for (size_t i = 0; !err && i < r.rows; i++) {
		ch_sql__add(&q, "ALTER TABLE %s.", s->db);
		/* table names come from our schema: identifiers */
		ch_sql__add(&q, "%s DROP PARTITION ID ", ch_result__str(&r, i, 0));
		ch_sql__quote(&q, ch_result__str(&r, i, 1));
		err = run_exec(c, &q, "drop partition");
		ch_sql__free(&q);
	}
	ch_result__free(&r);
	/* Within the boundary day: remove the commit records; their rows turn
	 * invisible and go when their day is dropped. */
	if (!err) {
		ch_sql__add(&q, "ALTER TABLE %s.batches DELETE WHERE end_ns < %" PRIu64, s->db,
			    before_ns);
		err = run_exec(c, &q, "retention delete");
		ch_sql__free(&q);
	}
	if (!err)
		err = wait_mutations(s, c, "batches");
	client_put(s, c);
	if (!err) {
		pthread_mutex_lock(&s->lock);
		s->retention_deleted += n;
		pthread_mutex_unlock(&s->lock);
		if (deleted)
			*deleted = n;
	}
	return err;
}

static int ch_stats(struct store *base, struct store_stats *out)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_client *c = client_get(s);
	struct ch_sql q = { 0 };
	struct ch_result r;
	int err;

	memset(out, 0, sizeof(*out));
	if (!c)
		return -ENOMEM;
	ch_sql__add(&q,
		    "SELECT (SELECT uniqExact(stack_id) FROM %s.stack_frames),"
		    " (SELECT count() FROM %s.cpu_samples),"
		    " (SELECT count() FROM %s.nccl_collectives) + (SELECT count() FROM "
		    "%s.cuda_transfers),"
		    " (SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ",
		    s->db, s->db, s->db, s->db);
	ch_sql__quote(&q, s->db);
	ch_sql__add(&q, ")");
	err = run_query(c, &q, &r, "stats");
	if (!err) {
		out->stacks = ch_result__u64(&r, 0, 0, NULL);
		out->cpu_rows = ch_result__u64(&r, 0, 1, NULL);
		out->event_rows = ch_result__u64(&r, 0, 2, NULL);
		out->bytes_on_disk = ch_result__u64(&r, 0, 3, NULL);
	}
	ch_result__free(&r);
	ch_sql__free(&q);
	client_put(s, c);
	pthread_mutex_lock(&s->lock);
	out->batches = s->batches;
	out->duplicates = s->duplicates;
	out->retention_deleted = s->retention_deleted;
	pthread_mutex_unlock(&s->lock);
	return err;
}

static void ch_close(struct store *base)
{
	struct ch_store *s = (struct ch_store *)base;

	if (!s)
		return;
	/* Every query has returned its client by now (the server stops
	 * serving before it closes the store). */
	for (unsigned i = 0; i < s->nidle; i++)
		ch_client__free(s->idle[i]);
	free(s->known.keys);
	pthread_cond_destroy(&s->pool_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- diagnosis inputs ------------------------------------------------------------ */

#define U64(col) ch_result__u64(r, i, (col), NULL)
#define STR(col) ch_result__str(r, i, (col))

static int thread_time_row(const struct ch_result *r, size_t i, const struct stack_set *set,
			   void *fn, void *ctx)
{
	struct store_thread_time t = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.tid = (uint32_t)U64(2),
		.job = STR(3),
		.has_rank = (int)U64(4),
		.rank = (int32_t)ch_result__i64(r, i, 5, NULL),
		.kind = (uint32_t)U64(6),
		.index = (uint32_t)U64(7),
		.ns = U64(8),
	};

	return ((store_thread_time_fn)fn)(ctx, &t);
}

static int ch_thread_times(struct store *base, const struct store_filter *f,
			   store_thread_time_fn fn, void *ctx)
{
	/* kind, the wire-enum column the index comes from (NULL: index 0) and
	 * its list's length, value expression, table (lib/wire_enums.h). */
	static const struct {
		uint32_t kind;
		const char *col;
		uint32_t n;
		const char *value, *table;
	} parts[] = {
		{ STORE_THREAD_TIME, "category", STRATA_TIME_MAX, "ns", "time_breakdown" },
		{ STORE_THREAD_OFFCPU, "reason", STRATA_OFF_MAX, "ns", "offcpu_samples" },
		{ STORE_THREAD_ONCPU, NULL, 0, "on_cpu_ns", "sched_stats" },
		{ STORE_THREAD_RUNNABLE, NULL, 0, "runqueue_latency_ns + runnable_wait_ns",
		  "sched_stats" },
	};
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };
	/* By window end: b_end in [from, to).  The widened copy only serves
	 * sql_filter's commit-record bound (end_ns > from - 1). */
	struct store_filter g = *f;

	if (g.from_ns)
		g.from_ns--;
	ch_sql__add(&q, "SELECT * FROM (");
	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
		char ix[64] = "0", cond[96] = "";

		if (parts[k].col)
			strata_wire_enum_sql(parts[k].col, parts[k].n, ix, sizeof(ix), cond,
					     sizeof(cond));
		ch_sql__add(&q,
			    "%sSELECT node, pid, tid, job, has_rank, rank, toUInt32(%u) AS kind,"
			    " toUInt32(%s) AS ix, sum(%s) AS v FROM %s.%s WHERE 1%s",
			    k ? " UNION ALL " : "", parts[k].kind, ix, parts[k].value, s->db,
			    parts[k].table, cond);
		if (f->from_ns)
			ch_sql__add(&q, " AND b_end >= %" PRIu64, f->from_ns);
		if (f->to_ns)
			ch_sql__add(&q, " AND b_end < %" PRIu64, f->to_ns);
		sql_filter(s, &q, &g, "b_end", 1);
		ch_sql__add(&q, " GROUP BY node, pid, pstart, tid, job, has_rank, rank, ix");
	}
	ch_sql__add(&q, ")");
	return query_rows(s, &q, "thread times", -1, thread_time_row, (void *)fn, ctx);
}

static int cpu_time_row(const struct ch_result *r, size_t i, const struct stack_set *set, void *fn,
			void *ctx)
{
	struct store_cpu_time t = {
		.node = STR(0),
		.kind = (uint32_t)U64(1),
		.cpu = (uint32_t)U64(2),
		.pid = (uint32_t)U64(3),
		.vector = (uint32_t)U64(4),
		.comm = STR(5),
		.job = STR(6),
		.has_rank = (int)U64(7),
		.rank = (int32_t)ch_result__i64(r, i, 8, NULL),
		.ns = U64(9),
	};

	(void)set;
	return ((store_cpu_time_fn)fn)(ctx, &t);
}

static int ch_cpu_times(struct store *base, const struct store_filter *f, store_cpu_time_fn fn,
			void *ctx)
{
	static const struct {
		uint32_t kind;
		const char *cols, *table, *group;
		int per_process;
	} parts[] = {
		{ STORE_CPU_TARGET, "cpu, pid, toUInt32(0), any(comm), job, has_rank, rank",
		  "target_cpus", "node, pid, pstart, job, has_rank, rank, cpu", 1 },
		{ STORE_CPU_FOREIGN, "cpu, fpid, toUInt32(0), comm, '', toUInt8(0), toInt32(-1)",
		  "foreign_runs", "node, cpu, fpid, comm", 0 },
		{ STORE_CPU_SOFTIRQ, "cpu, toUInt32(0), vector, '', '', toUInt8(0), toInt32(-1)",
		  "softirq_vectors", "node, cpu, vector", 0 },
	};
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };
	struct store_filter g = *f; /* widened: see ch_thread_times */

	if (g.from_ns)
		g.from_ns--;
	ch_sql__add(&q, "SELECT * FROM (");
	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
		ch_sql__add(&q, "%sSELECT node, toUInt32(%u), %s, sum(ns) FROM %s.%s WHERE 1",
			    k ? " UNION ALL " : "", parts[k].kind, parts[k].cols, s->db,
			    parts[k].table);
		if (f->from_ns)
			ch_sql__add(&q, " AND b_end >= %" PRIu64, f->from_ns);
		if (f->to_ns)
			ch_sql__add(&q, " AND b_end < %" PRIu64, f->to_ns);
		sql_filter(s, &q, &g, "b_end", parts[k].per_process);
		ch_sql__add(&q, " GROUP BY %s", parts[k].group);
	}
	ch_sql__add(&q, ")");
	return query_rows(s, &q, "cpu times", -1, cpu_time_row, (void *)fn, ctx);
}

static int node_clock_row(const struct ch_result *r, size_t i, const struct stack_set *set,
			  void *fn, void *ctx)
{
	struct store_node_clock c = {
		.node = STR(0),
		.clock_error_ns = U64(1),
		.freq_hz = (uint32_t)U64(2),
		.batches = U64(3),
	};

	return ((store_node_clock_fn)fn)(ctx, &c);
}

#undef U64
#undef STR

static int ch_node_clocks(struct store *base, const struct store_filter *f, store_node_clock_fn fn,
			  void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT node, max(clock_error_ns), max(freq_hz), uniqExact(batch_id)"
		    " FROM %s.batches WHERE 1",
		    s->db);
	if (f->from_ns)
		ch_sql__add(&q, " AND end_ns > %" PRIu64, f->from_ns);
	if (f->to_ns)
		ch_sql__add(&q, " AND start_ns < %" PRIu64, f->to_ns);
	if (f->node && f->node[0]) {
		ch_sql__add(&q, " AND node = ");
		ch_sql__quote(&q, f->node);
	}
	ch_sql__add(&q,
		    " AND ingest IN (SELECT min(ingest) FROM %s.batches GROUP BY batch_id)"
		    " GROUP BY node ORDER BY node",
		    s->db);
	return query_rows(s, &q, "node clocks", -1, node_clock_row, (void *)fn, ctx);
}

static const struct store_ops clickhouse_ops = {
	.name = "clickhouse",
	.ingest = ch_ingest,
	.jobs = ch_jobs,
	.nodes = ch_nodes,
	.processes = ch_processes,
	.profile = ch_profile,
	.leaks = ch_leaks,
	.tally = ch_tally,
	.events = ch_events,
	.retain = ch_retain,
	.stats = ch_stats,
	.close = ch_close,
	.thread_times = ch_thread_times,
	.cpu_times = ch_cpu_times,
	.node_clocks = ch_node_clocks,
};

/* CREATE DATABASE and every table, idempotent. */
static int create_schema(struct ch_store *s, struct ch_client *c)
{
	struct ch_sql q = { 0 };
	int err;

	ch_sql__add(&q, "CREATE DATABASE IF NOT EXISTS %s", s->db);
	err = run_exec(c, &q, "create database");
	ch_sql__free(&q);
	for (size_t t = 0; !err && t < NTABLES; t++) {
		ch_sql__add(&q,
			    "CREATE TABLE IF NOT EXISTS %s.%s (%s, %s) ENGINE = MergeTree"
			    " PARTITION BY day ORDER BY (%s)",
			    s->db, TABLES[t].name,
			    TABLES[t].per_process ? PROC_COLS_DDL : NODE_COLS_DDL, TABLES[t].cols,
			    TABLES[t].order_by);
		err = run_exec(c, &q, TABLES[t].name);
		ch_sql__free(&q);
	}
	if (!err) {
		ch_sql__add(&q, "CREATE TABLE IF NOT EXISTS %s.batches %s", s->db, BATCHES_DDL);
		err = run_exec(c, &q, "batches");
		ch_sql__free(&q);
	}
	if (!err) {
		ch_sql__add(&q, "CREATE TABLE IF NOT EXISTS %s.stack_frames %s", s->db, STACKS_DDL);
		err = run_exec(c, &q, "stack_frames");
		ch_sql__free(&q);
	}
	return err;
}

struct store *store_clickhouse__open(const char *url, char *err, size_t errsz)
{
	struct ch_store *s = calloc(1, sizeof(*s));
	struct ch_client *c = NULL;
	int rc;

	if (!s) {
		snprintf(err, errsz, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &clickhouse_ops;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->pool_cond, NULL);
	s->opts.sz = sizeof(s->opts);
	rc = ch_parse_url(url, &s->opts, s->optbuf, sizeof(s->optbuf));
	if (rc || strlen(s->opts.database) >= sizeof(s->db)) {
		snprintf(err, errsz,
			 "bad store \"%s\": want clickhouse://[USER[:PASSWORD]@]HOST:PORT/DB", url);
		rc = -EINVAL;
		goto fail;
	}
	snprintf(s->db, sizeof(s->db), "%s", s->opts.database);
	/* The database may not exist yet: the schema is made without it. */
	s->opts.database = NULL;
	c = client_get(s);
	if (!c) {
		snprintf(err, errsz, "clickhouse: out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	rc = create_schema(s, c);
	if (rc) {
		snprintf(err, errsz, "%s", ch_client__error(c));
		goto fail;
	}
	client_put(s, c);
	return &s->base;
fail:
	client_put(s, c);
	ch_close(&s->base);
	errno = -rc;
	return NULL;
}
