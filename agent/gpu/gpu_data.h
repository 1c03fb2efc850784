/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the GPU layer has collected, as plain C tables: what the local
 * writers (--leaks, --tally, --trace) encode and what the agent puts in
 * its batches.  Counts are cumulative since the layer started; a process's
 * rows stay after it exits (leaks at exit are the point).  Every table is
 * bounded; rows that did not fit are counted in dropped.
 */
#ifndef STRATA_GPU_DATA_H
#define STRATA_GPU_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpf/strata.h"
#include "lib/profile.h"

struct gpu_table;

/* A process the layer traced, with its rank identity when known. */
struct gpu_proc_info {
	uint32_t tgid;
	char comm[16];
	int32_t rank, local_rank, world_size; /* -1 when unknown */
	int32_t nccl_rank, nccl_nranks;	      /* from ncclCommInitRank; -1 unknown */
	uint64_t comm_hash;		      /* first communicator's identity as
					       * reported (restored: mixed) */
	uint64_t job_hash;		      /* its own hash (job labels) */
	char run_id[64];		      /* TORCHELASTIC_RUN_ID */
	char slurm_job[32];		      /* SLURM_JOB_ID */
	char strata_job[64];		      /* STRATA_JOB */
	uint32_t nccl_tid; /* the thread that issues its collectives (0: none yet) */
	uint64_t exit_ns;  /* CLOCK_REALTIME when its exit was seen */
	/* the layer's drain (struct gpu drains) that let its BPF entries go;
	 * 0: not yet (agent/gpu/gpu_retire.c waits for a drain after it) */
	uint64_t finished_drain;
	bool exited;
};

/* A resolved call-site stack: frames of gpu_data.frames, root first. */
struct gpu_stack {
	uint32_t tgid;
	uint64_t stack_id;
	uint32_t nframes;
	uint32_t *frames;
};

struct gpu_site {
	struct gpu_site_key key;
	struct gpu_site_val val;
	const char *kernel; /* launches: kernel name (interned in frames), or NULL */
};

struct gpu_tally_row {
	struct gpu_tally_key key;
	struct gpu_tally_val val;
};

struct gpu_err_row {
	struct gpu_err_key key;
	uint64_t count;
};

/* Outstanding allocations grouped by (process, stack). */
struct gpu_leak {
	uint32_t tgid;
	uint64_t stack_id;
	uint64_t bytes, count; /* outstanding now (or at the process's exit) */
	uint64_t oldest_ns;    /* CLOCK_REALTIME of the oldest one */
	uint64_t first_ns;     /* CLOCK_REALTIME when this group was first seen */
	uint64_t first_bytes;  /* outstanding then: growth = (bytes - first) / time */
	uint64_t last_ns;      /* CLOCK_REALTIME of the latest snapshot */
	bool at_exit;	       /* the process exited with these outstanding */
};

/* One NCCL (or, with tracing, CUDA) call with realtime timestamps. */
struct gpu_call_rec {
	struct gpu_event ev; /* start_ns / end_ns converted to CLOCK_REALTIME */
};

/* --- wire (strata-agent --server): one outstanding allocation --- */
struct gpu_alloc_rec {
	uint32_t tgid, api; /* api: GPU_API_MAX for a framework allocation */
	uint64_t ptr, size;
	uint64_t alloc_ns; /* CLOCK_REALTIME, converted at this drain */
	uint64_t stack_id;
	/* CLOCK_MONOTONIC as BPF stamped it: the allocation's identity across
	 * drains (alloc_ns moves by the calibration's jitter at each one) */
	uint64_t mono_ns;
	uint32_t level; /* 0: the driver's (a segment), 1: the framework's (a block) */
	uint32_t pad;
};

/* --- wire: a GPU call in flight at the last drain (hang diagnosis) --- */
struct gpu_inflight_rec {
	uint32_t tgid, tid, api;
	uint64_t entry_ns;		/* CLOCK_REALTIME */
	uint64_t comm_hash, seq, bytes; /* NCCL collectives (comm_hash 0: not one) */
	int32_t rank, nranks;
	uint64_t stack_id;
};

struct gpu_coll_row {
	struct gpu_coll_key key;
	struct gpu_coll_val val;
};

struct gpu_data {
	struct profile *frames; /* interned frames of every resolved stack */
	/* raised when frames is rebuilt (strata-agent --server, after a
	 * batch): pointers into the old one are stale */
	uint64_t frames_gen;
	/* strata-agent --server: the exited processes whose rows left every
	 * table after the last batch (sorted; a batch told their last values
	 * and their exit): the batch builder forgets them too */
	const uint32_t *retired;
	size_t nretired;
	struct gpu_proc_info *procs;
	size_t nprocs;
	struct gpu_stack *stacks;
	size_t nstacks;
	struct gpu_site *sites;
	size_t nsites;
	struct gpu_tally_row *tally;
	size_t ntally;
	struct gpu_err_row *errs;
	size_t nerrs;
	struct gpu_leak *leaks; /* driver allocations (cudaMalloc...: segments) */
	size_t nleaks;
	/* framework allocations (a caching allocator's blocks, from its USDT
	 * probes: PyTorch's tensors), apart from the segments holding them */
	struct gpu_leak *fw_leaks;
	size_t nfw_leaks;
	struct gpu_call_rec *calls;
	size_t ncalls;
	/* allocation and free calls of processes not traced (gpu_opts
	 * alloc_events: the agent's out-of-memory ring), since the last
	 * gpu__alloc_calls_taken */
	struct gpu_call_rec *alloc_calls;
	size_t nalloc_calls;
	uint64_t alloc_calls_dropped; /* beyond GPU_MAX_ALLOC_EVENTS between takes */
	struct gpu_coll_row *colls;
	size_t ncolls;

	uint64_t start_ns, end_ns;  /* CLOCK_REALTIME window */
	double sampling_ratio;	    /* share of time sheddable probes were attached */
	int64_t clock_offset_ns;    /* realtime - monotonic (bpf_ktime) */
	uint64_t clock_err_ns;	    /* bound on the conversion error */
	uint64_t bpf[GPU_CNT_MAX];  /* BPF-side counters */
	uint64_t dropped_rows;	    /* user-side tables full */
	uint64_t dropped_calls;	    /* call records beyond the bound */
	uint64_t stacks_unresolved; /* stack ids whose frames were never copied */

	/* wire: every allocation outstanding at the last drain, both levels
	 * (bounded; the ones that did not fit are counted in allocs_dropped) */
	struct gpu_alloc_rec *allocs;
	size_t nallocs;
	uint64_t allocs_dropped;
	/* wire: the calls in flight at the last drain (bounded) */
	struct gpu_inflight_rec *inflight;
	size_t ninflight;
	uint64_t inflight_dropped; /* over GPU_MAX_INFLIGHT */
	uint64_t inflight_stale;   /* left out: the call is over (gpu_drain.c) */

	/* private to agent/gpu/gpu.c: storage behind stacks and its index */
	struct gpu_stack *stacks_view;
	const struct gpu_table *stack_index;
};

const struct gpu_stack *gpu_data__stack(const struct gpu_data *d, uint32_t tgid, uint64_t stack_id);
const struct gpu_proc_info *gpu_data__proc(const struct gpu_data *d, uint32_t tgid);
/* The process's job as agent/ship/proc_labels.c names it (STRATA_JOB,
 * TORCHELASTIC_RUN_ID, SLURM_JOB_ID; "" none). */
const char *gpu_proc_info__job(const struct gpu_proc_info *pi);
/* The name of the kernel a launch of tgid named by object (the launch's
 * first argument), from its launch sites; NULL unknown. */
const char *gpu_data__kernel(const struct gpu_data *d, uint32_t tgid, uint64_t object);

/* Writers (agent/gpu/gpu_report.c): 0 or -errno. */
int gpu_data__write_tally(const struct gpu_data *d, FILE *out);
int gpu_data__write_leaks_text(const struct gpu_data *d, FILE *out);
int gpu_data__write_leaks_pprof(const struct gpu_data *d, FILE *out);
int gpu_data__write_trace(const struct gpu_data *d, FILE *out);
/* Picks the writer from the extension (.txt / .pb.gz for leaks). */
int gpu_data__write_leaks_file(const struct gpu_data *d, const char *path);
int gpu_data__write_file(const struct gpu_data *d, const char *path,
			 int (*fn)(const struct gpu_data *, FILE *));

#endif /* STRATA_GPU_DATA_H */
