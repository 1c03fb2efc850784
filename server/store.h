/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The storage interface of strata-server: one vtable, two backends
 * (server/store/sqlite.c: embedded default; server/store/clickhouse.c:
 * scale-out over ClickHouse's HTTP interface).  Schema concepts and their
 * tables are documented in docs/server.md.
 *
 * Ingest gets a batch that is already decoded, validated (every index in
 * range, see server/batch_decode.h) and symbolized: each wire stack comes
 * with its resolved frames (inline expansion included) and a 64-bit id
 * derived from those frames, so backends deduplicate stacks by id across
 * batches.  Queries hand rows to a callback; every string and frame array
 * a callback sees is valid only during that call.
 *
 * Thread safety: libmicrohttpd serves requests on several threads; every
 * function here may be called concurrently on one store.
 *
 * Errors: 0 or -errno; a callback's non-zero return stops the query and is
 * returned as is.
 */
#ifndef STRATA_SERVER_STORE_H
#define STRATA_SERVER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/profile.h"

#include "strata.pb-c.h"

/* ---- symbolized frames and stacks ---------------------------------------- */

/* The profile model's frame kinds and flags (lib/profile.h), under the
 * names the store code uses. */
#define STORE_FRAME_NATIVE PROFILE_KIND_NATIVE
#define STORE_FRAME_KERNEL PROFILE_KIND_KERNEL
#define STORE_FRAME_PYTHON PROFILE_KIND_PYTHON
#define STORE_FRAME_LOST PROFILE_KIND_LOST
#define STORE_FRAME_UNKNOWN PROFILE_KIND_UNKNOWN
#define STORE_FRAME_RETURN PROFILE_FRAME_RETURN

struct store_frame {
	uint32_t kind;	      /* enum profile_frame_kind */
	uint32_t flags;	      /* enum profile_frame_flags (lib/profile.h) */
	const char *func;     /* NULL when unresolved (never a nearby wrong name) */
	const char *file;     /* NULL when unknown */
	uint32_t line;	      /* 0 when unknown */
	const char *module;   /* path of the ELF, "[kernel]"/module, "[python]"... */
	const char *build_id; /* lowercase hex, NULL/"" when none */
	uint64_t addr;	      /* NATIVE: file offset; KERNEL/UNKNOWN: ip */
};

struct store_stack {
	uint64_t id; /* hash of the frames below (server/stack_id.c); never 0 */
	uint32_t nframes;
	const struct store_frame *frames; /* root first */
};

/* ---- ingest ---------------------------------------------------------------- */

struct store_batch {
	const Strata__V1__Batch *pb;	  /* decoded and validated */
	const struct store_stack *stacks; /* stacks[i] is pb->stacks[i], symbolized */
	uint64_t received_ns;		  /* CLOCK_REALTIME at the server */
	uint64_t wire_bytes;		  /* compressed size as received */
};

/* ---- query filters ----------------------------------------------------------- */

/*
 * Every query takes one filter.  A zero field does not filter; strings are
 * exact matches.  A time range selects records whose batch window overlaps
 * [from_ns, to_ns) (events: whose own time lies in it).  Negated matches
 * ("rank=!3": every rank but 3) serve differential views (one rank against
 * the others).
 */
struct store_filter {
	uint64_t from_ns, to_ns; /* 0: open */
	const char *node;
	uint32_t pid; /* 0: any */
	const char *job;
	const char *container;
	int has_rank;
	int32_t rank;
	int rank_negate; /* with has_rank: every rank but this one */
	/* Batch-window queries (profile, tally, ...): take the batches whose
	 * end lies in [from_ns, to_ns) instead of every batch overlapping it,
	 * so consecutive ranges split the batches between them and shares of
	 * the range length stay exact (<= 1); the diagnosis sets it. */
	int batch_by_end;
	/* Profile queries: rows of every process and thread with the same
	 * comm and stack summed in the store (pid, tid, rank 0; node empty),
	 * for outputs that cannot show them (folded, SVG): a 1-hour profile
	 * of a 100-node job was 347 MB of per-thread rows, over the
	 * ClickHouse client's result limit. */
	int merge_threads;
};

/* ---- query rows ---------------------------------------------------------------- */

struct store_job {
	const char *job;
	uint32_t nodes, processes, ranks; /* distinct */
	int32_t world_size;		  /* -1 unknown */
	uint64_t first_ns, last_ns;
	uint64_t cpu_samples;
};

struct store_node {
	const char *node;
	const char *agent_version;
	uint64_t first_ns, last_ns;
	uint64_t batches, cpu_samples;
	uint64_t drops; /* sum of every Drops field the node reported */
};

struct store_process {
	const char *node;
	uint32_t pid;
	uint64_t start_time_ns;
	const char *comm, *cmdline, *container, *pod, *job;
	int has_rank;
	int32_t rank, local_rank, world_size;
	uint64_t first_ns, last_ns;
	uint64_t cpu_samples;
};

enum store_profile_kind {
	STORE_PROFILE_CPU = 0,	  /* CpuSample counts */
	STORE_PROFILE_OFFCPU = 1, /* OffCpuSample ns */
};

/* One aggregated profile row: summed over the filter's time range. */
struct store_sample {
	const char *node;
	uint32_t pid, tid;
	const char *comm; /* thread name */
	int has_rank;
	int32_t rank;
	const struct store_stack *stack;
	uint64_t value; /* CPU: samples; off-CPU: ns */
};

/* Device memory outstanding at the filter's to_ns (or now), by stack. */
struct store_leak {
	const char *node;
	uint32_t pid;
	int has_rank;
	int32_t rank;
	const struct store_stack *stack;
	uint64_t bytes, allocations;
	uint64_t oldest_ns; /* earliest alloc_ns among them */
	uint32_t level;	    /* CudaAlloc.Level: 0 the driver's, 1 a framework's */
};

struct store_api_code {
	int32_t code;
	const char *name;
	uint64_t count;
};

/* CUDA API tally, summed per (node, pid, fn) over the time range. */
struct store_tally {
	const char *node;
	uint32_t pid;
	int has_rank;
	int32_t rank;
	const char *fn;
	uint64_t calls, total_ns, min_ns, max_ns;
	uint32_t ncodes;
	const struct store_api_code *codes; /* non-success codes */
};

enum store_event_kind {
	STORE_EVENT_COLLECTIVE = 1u << 0, /* NcclCollective */
	STORE_EVENT_TRANSFER = 1u << 1,	  /* CudaTransfer with start_ns (memcpy/sync) */
	STORE_EVENT_LAUNCH = 1u << 2,	  /* CudaLaunch aggregates (at batch start) */
	STORE_EVENT_CPU_SAMPLE = 1u << 3, /* CaptureSample: a timed CPU sample */
	STORE_EVENT_GPU_CALL = 1u << 4,	  /* GpuCall: one traced GPU call */
	/* What a hang detector needs besides the collectives (the replica
	 * owning a job rebuilds it from the store: server/diag_shared.c);
	 * these filter by their batch's end (EXIT: by the exit), not by
	 * start_ns: */
	STORE_EVENT_INFLIGHT = 1u << 5, /* InflightCall: start_ns its entry, dur_ns until the
					 * end of the batch that listed it, comm_rank and
					 * comm_nranks the call's own */
	STORE_EVENT_THREAD = 1u << 6,	/* ThreadState: name the state ("S"), start_ns its
					 * batch's end, detail the wait channel, ret the
					 * system call (-1: none), stack the kernel stack */
	STORE_EVENT_EXIT = 1u << 7,	/* a process's exit: start_ns when */
	/* per process and communicator, its latest collective entered in
	 * the range (columns as COLLECTIVE): what a new owner's hang
	 * detector starts from */
	STORE_EVENT_LAST_COLLECTIVE = 1u << 8,
	STORE_EVENT_STACKS = 1u << 31, /* not a kind: hand out each event's stack */
};

/* A timed event for collectives and the Perfetto trace. */
struct store_event {
	uint32_t kind; /* one enum store_event_kind bit */
	const char *node;
	uint32_t pid, tid;
	const char *job;
	int has_rank;
	int32_t rank;
	const char *name; /* collective op, CUDA API, kernel name */
	uint64_t start_ns, dur_ns;
	uint64_t bytes, count;
	/* collectives */
	uint64_t comm_hash, seq;
	int32_t comm_rank, comm_nranks; /* -1 unknown */
	const char *dtype;
	/* transfers */
	uint32_t transfer_kind, direction; /* Strata__V1__CudaTransfer__Kind/Direction */
	/* GPU calls: the call's kind (launch, alloc, ...), the kernel's name */
	const char *call_kind, *detail;
	int32_t ret; /* GPU calls: the API's return code */
	/* with STORE_EVENT_STACKS: the event's stack (an empty one when none);
	 * CPU samples: the sampled stack; else the call site */
	const struct store_stack *stack;
};

/* What the store counted since it opened: no query (ops->stats). */
struct store_stats {
	uint64_t batches, duplicates; /* stored, refused as already stored */
	uint64_t retention_deleted;
	uint64_t columns_added; /* at open: columns an older database lacked */
	/* ClickHouse group commit: groups of several batches written with one
	 * insert a table, the batches in them, and groups an insert refused
	 * (their batches then written one by one) */
	uint64_t commit_groups, commit_grouped, commit_splits;
};

/* How much the store holds (ops->sizes): a count over its largest tables,
 * a scan on most stores; /metrics reads it at most once a minute
 * (server/store_sizes.h). */
struct store_sizes {
	uint64_t stacks, cpu_rows, event_rows;
	uint64_t bytes_on_disk; /* 0 unknown */
};

typedef int (*store_job_fn)(void *ctx, const struct store_job *j);
typedef int (*store_node_fn)(void *ctx, const struct store_node *n);
typedef int (*store_process_fn)(void *ctx, const struct store_process *p);
typedef int (*store_sample_fn)(void *ctx, const struct store_sample *s);
typedef int (*store_leak_fn)(void *ctx, const struct store_leak *l);
typedef int (*store_tally_fn)(void *ctx, const struct store_tally *t);
typedef int (*store_event_fn)(void *ctx, const struct store_event *e);

/* ---- diagnosis inputs (server/diag_*.c) ------------------------------------------ */

enum store_thread_kind {
	STORE_THREAD_TIME = 1,	   /* index: enum strata_time_cat (breakdown counters) */
	STORE_THREAD_OFFCPU = 2,   /* index: enum strata_offcpu_reason (io, lock, sleep,
				    * page_fault, other) */
	STORE_THREAD_ONCPU = 3,	   /* index 0: on-CPU ns (scheduler layer) */
	STORE_THREAD_RUNNABLE = 4, /* index 0: runqueue latency + preempted-runnable ns */
};

/*
 * One per-thread counter summed over the batches whose window ENDS in
 * [from_ns, to_ns) (not "overlaps": consecutive ranges count each batch
 * exactly once, which cumulative counters need).
 */
struct store_thread_time {
	const char *node;
	uint32_t pid, tid;
	const char *job;
	int has_rank;
	int32_t rank;
	uint32_t kind, index; /* enum store_thread_kind, its index */
	uint64_t ns;
};

/* Per node over the batches whose window overlaps the range: the largest
 * clock error bound its agent stated, and its sampling frequency. */
struct store_node_clock {
	const char *node;
	uint64_t clock_error_ns; /* 0: unknown */
	uint32_t freq_hz;	 /* 0: unknown */
	uint64_t batches;
};

/* CPU layer: per-CPU time summed over the batches whose window
 * ENDS in [from_ns, to_ns).  TARGET rows are a targeted process's on-CPU
 * time on one CPU and obey the whole filter; FOREIGN (another process on a
 * CPU where targets ran) and SOFTIRQ (one vector) rows belong to a node,
 * not a process: only the time range and node filter them. */
enum store_cpu_kind {
	STORE_CPU_TARGET = 1,
	STORE_CPU_FOREIGN = 2,
	STORE_CPU_SOFTIRQ = 3,
};

struct store_cpu_time {
	const char *node;
	uint32_t kind; /* enum store_cpu_kind */
	uint32_t cpu;
	uint32_t pid;	  /* TARGET, FOREIGN */
	uint32_t vector;  /* SOFTIRQ: NET_RX = 3 ... */
	const char *comm; /* TARGET, FOREIGN ("" unknown) */
	const char *job;  /* TARGET */
	int has_rank;	  /* TARGET */
	int32_t rank;
	uint64_t ns;
};

/* Collective health (the server-derived collective_stats table, see
 * diagnose/collstats.h): one (job, communicator, op, size class, nranks)
 * summed over the stored windows that overlap the filter's range (job and
 * time only filter). */
struct store_collstat {
	const char *job;
	uint64_t comm_hash;
	const char *op;
	uint64_t size_class;
	int32_t nranks;
	uint64_t windows;					      /* windows with occurrences */
	uint64_t occurrences, observed_ns, stall_ns, slack_ns, bytes; /* sums */
	uint64_t observed_max_ns;
	uint64_t first_ns, last_ns; /* the windows' span */
};

/* An NCCL hang record (the server-derived hangs table, server/diag_hang.h):
 * every record whose episode overlaps the filter's range (job and time
 * only filter), oldest decision first; an episode has a record when
 * decided and one when it ended (until_ns set). */
struct store_hang {
	const char *job, *kind;
	uint64_t comm_hash, seq;
	const char *op;
	uint64_t bytes;
	int32_t nranks;
	uint64_t since_ns, decided_ns, until_ns;
	uint32_t waiting, missing, mismatched;
	const char *report; /* JSON */
};

/* The node name of the batches strata-server writes itself (derived
 * records); agents may not use it, node listings leave it out. */
#define STORE_SERVER_NODE "(strata-server)"

/* A capture record (the server-derived captures table, server/capture.h):
 * every record, oldest first (a cancel follows its capture's creation). */
struct store_capture {
	const char *id, *job, *trigger, *reason;
	uint64_t created_ns, start_ns, end_ns;
	uint32_t freq_hz, offcpu, gpu_calls;
	const char *targets; /* "PID NODE" a line */
	const char *state;   /* scheduled, cancelled */
};

/* An agent's part in a capture (CaptureRun rows): the latest row of each
 * node (and agent run), for one capture. */
struct store_capture_run {
	const char *node;
	uint64_t start_ns, end_ns; /* end 0: running when last heard of */
	const char *end_reason;
	uint32_t freq_hz, processes;
	uint64_t samples, gpu_calls, dropped;
	uint64_t reported_ns; /* the batch window's end of that row */
};

typedef int (*store_thread_time_fn)(void *ctx, const struct store_thread_time *t);
typedef int (*store_cpu_time_fn)(void *ctx, const struct store_cpu_time *c);
typedef int (*store_node_clock_fn)(void *ctx, const struct store_node_clock *c);
typedef int (*store_collstat_fn)(void *ctx, const struct store_collstat *c);
typedef int (*store_hang_fn)(void *ctx, const struct store_hang *h);
typedef int (*store_capture_fn)(void *ctx, const struct store_capture *c);
typedef int (*store_capture_run_fn)(void *ctx, const struct store_capture_run *r);
/* A server replica that wrote a heartbeat to the shared store
 * (server/replicas.h): its id and its latest beat (its own wall clock). */
typedef int (*store_replica_fn)(void *ctx, const char *id, uint64_t beat_ns);

/* ---- the vtable ------------------------------------------------------------- */

struct store;

struct store_ops {
	const char *name; /* "sqlite", "clickhouse" */
	/*
	 * Stores the whole batch atomically (all rows or none).  Returns 0,
	 * 1 when a batch with this batch_id is already stored (nothing
	 * written: the agent retried), or -errno.
	 */
	int (*ingest)(struct store *s, const struct store_batch *b);
	int (*jobs)(struct store *s, const struct store_filter *f, store_job_fn fn, void *ctx);
	int (*nodes)(struct store *s, const struct store_filter *f, store_node_fn fn, void *ctx);
	/* Processes (ranks are processes with has_rank). */
	int (*processes)(struct store *s, const struct store_filter *f, store_process_fn fn,
			 void *ctx);
	int (*profile)(struct store *s, const struct store_filter *f, enum store_profile_kind kind,
		       store_sample_fn fn, void *ctx);
	int (*leaks)(struct store *s, const struct store_filter *f, store_leak_fn fn, void *ctx);
	int (*tally)(struct store *s, const struct store_filter *f, store_tally_fn fn, void *ctx);
	/*
	 * Timed events of the kinds in the kinds mask, oldest first; at most
	 * limit (0 = 100000) are handed out, *truncated set when more matched.
	 */
	int (*events)(struct store *s, const struct store_filter *f, uint32_t kinds, uint32_t limit,
		      int *truncated, store_event_fn fn, void *ctx);
	/* Deletes everything whose batch window ended before before_ns. */
	int (*retain)(struct store *s, uint64_t before_ns, uint64_t *deleted_batches);
	int (*stats)(struct store *s, struct store_stats *st);
	int (*sizes)(struct store *s, struct store_sizes *out); /* a scan: see there */
	void (*close)(struct store *s);
	/* Diagnosis inputs (see struct store_thread_time, store_node_clock). */
	int (*thread_times)(struct store *s, const struct store_filter *f, store_thread_time_fn fn,
			    void *ctx);
	int (*node_clocks)(struct store *s, const struct store_filter *f, store_node_clock_fn fn,
			   void *ctx);
	/* CPU layer inputs (see struct store_cpu_time). */
	int (*cpu_times)(struct store *s, const struct store_filter *f, store_cpu_time_fn fn,
			 void *ctx);
	/* Collective health, largest aggregated stall first (see struct
	 * store_collstat). */
	int (*collective_stats)(struct store *s, const struct store_filter *f, store_collstat_fn fn,
				void *ctx);
	/* NCCL hang records (see struct store_hang). */
	int (*hangs)(struct store *s, const struct store_filter *f, store_hang_fn fn, void *ctx);
	/* Capture records (see struct store_capture; job filters), and the
	 * agents' runs of one capture (struct store_capture_run). */
	int (*captures)(struct store *s, const struct store_filter *f, store_capture_fn fn,
			void *ctx);
	int (*capture_runs)(struct store *s, const char *capture, store_capture_run_fn fn,
			    void *ctx);
	/* Server replicas sharing this store (NULL: a store only one server
	 * uses): writes replica id's heartbeat at now_ns, then hands every
	 * replica whose latest beat is at since_ns or later to fn. */
	int (*replicas)(struct store *s, const char *id, uint64_t now_ns, uint64_t since_ns,
			store_replica_fn fn, void *ctx);
};

/* Backends embed this first. */
struct store {
	const struct store_ops *ops;
};

/*
 * Opens "sqlite:PATH" or "clickhouse://HOST:PORT/DB".  On failure returns
 * NULL with errno set and a message in err (errsz bytes).
 */
struct store *store__open(const char *spec, char *err, size_t errsz);

/*
 * The calling thread's reads fail with -ETIMEDOUT once CLOCK_MONOTONIC
 * passes mono_ns (0: no bound).  The query threads (server/http.c) set
 * STORE_QUERY_MAX_NS around each query, so no query holds its thread
 * longer; the diagnosis engine, retention and /metrics read without one.
 * SQLite interrupts the statement (progress handler); ClickHouse has its
 * own max_execution_time (30 s) on every query, and the client abandons
 * the request (libcurl's progress callback, at least once a second).
 */
#define STORE_QUERY_MAX_NS (30ull * 1000000000ull)
void store__set_read_deadline(uint64_t mono_ns);
uint64_t store__read_deadline(void);

/*
 * The calling thread's reads also stop (failing as at the deadline) once
 * gone(ctx) says the client they are for has left: a query a client gave
 * up on frees its thread at once rather than at the deadline.  Asked at
 * most every STORE_GONE_CHECK_NS of a read (SQLite), about once a second
 * (ClickHouse).  NULL: never.
 */
#define STORE_GONE_CHECK_NS (20ull * 1000000ull)
typedef bool (*store_client_gone_fn)(void *ctx);
void store__set_read_client(store_client_gone_fn gone, void *ctx);
/* Should the calling thread's read stop now: past its deadline, or its
 * client gone (asked when *next_check_ns has passed, which it moves)?
 * For a backend's long reads (SQLite's progress handler). */
bool store__read_over(uint64_t *next_check_ns);

/* The calling thread's bounds (deadline, client), taken off it and put
 * back: work a query thread does for everyone (the diagnosis engine's run,
 * which a query may start) must not stop because one client left. */
struct store_read_bounds {
	uint64_t deadline_ns;
	store_client_gone_fn gone;
	void *ctx;
};
void store__read_bounds_take(struct store_read_bounds *saved);
void store__read_bounds_put(const struct store_read_bounds *saved);
static inline void store__close(struct store *s)
{
	if (s)
		s->ops->close(s);
}

/* Backend constructors (same contract as store__open). */
/* spec: PATH or PATH?sync=full|normal (the writer's synchronous level:
 * FULL by default, docs/server.md). */
struct store *store_sqlite__open(const char *spec, char *err, size_t errsz);
/* The length of spec's PATH (without ?sync=...). */
size_t store_sqlite__path_len(const char *spec);
struct store *store_clickhouse__open(const char *url, char *err, size_t errsz);

/* True when the filter's process-level fields (pid, job, rank, container,
 * node) accept this process; shared by the backends' row filtering. */
int store_filter__match_process(const struct store_filter *f, const char *node, uint32_t pid,
				const char *job, const char *container, int has_rank, int32_t rank);

#endif /* STRATA_SERVER_STORE_H */
