/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU layer of a session: finds CUDA/NCCL in target processes, attaches
 * bpf/gpu.bpf.c's uprobes once per file, keeps the target filter in step
 * with process starts and exits, enforces the probe budget, and drains the
 * BPF maps into struct gpu_data.
 */
#ifndef STRATA_GPU_H
#define STRATA_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/gpu/gpu_data.h"
#include "agent/proc/modules.h"
#include "agent/proc/proc_tracker.h"
#include "agent/python/python.h"
#include "symbolize/symbolize.h"

struct gpu_opts {
	size_t sz;
	bool trace;	      /* per-call CUDA events (--trace) */
	bool alloc_events;    /* allocation/free calls as events (the agent's OOM ring) */
	double budget;	      /* CPU share per process for probes; 0: 0.01; < 0: no limit */
	double probe_cost_ns; /* cost of one probe hit; 0: 11000 */
	bool empty_probes;    /* benchmark: the empty program on entry and return */
	bool no_stacks;	      /* benchmark: no call-site stacks */
	/* Discovery (docs/gpu.md): files attached for the whole session, so a
	 * process's first call is seen (BPF admits the session's processes). */
	const char *const *libs; /* --gpu-lib paths */
	size_t nlibs;
	bool no_preattach; /* skip the ld.so cache / CUDA toolkit libraries */
	uint32_t grace_ms; /* unused file kept attached this long; 0: 5000 */
	uint32_t filter;   /* enum strata_filter of the session */
	int targets_fd;	   /* the sampler's filter maps (<= 0: none) */
	int cgroup_map_fd;
	int api_layers_fd; /* scheduler layer's per-thread API layer (<= 0: off) */
	/* The session's CPython support (NULL: none): call-site stacks get the
	 * thread's Python frames (py_procs: the sampler's map, shared). */
	struct python *python;
	int py_procs_fd;
	/* The sampler's unwind tables (--unwind hybrid), shared: call-site
	 * stacks are walked like CPU samples.  <= 0: frame-pointer steps. */
	int unwind_rows_fd, unwind_procs_fd;
	/* The running kernel's (agent/core/features.h); NULL: probed here. */
	const struct kernel_features *features;
	/* NCCL communicator identities kept across agent restarts
	 * (agent/gpu/gpu_comm_state.h); NULL: not kept. */
	const char *comm_state_path;
};

struct gpu;
struct kernel_features;

/* NULL with errno set (the BPF object could not be loaded). */
struct gpu *gpu__new(const struct gpu_opts *opts, struct module_registry *mods,
		     struct proc_tracker *procs, struct symbolizer *sym, struct ksyms *ksyms);
void gpu__free(struct gpu *g);

/* Starts looking at a process (a target of the session): its mappings are
 * scanned now and again with back-off until CUDA/NCCL show up or it exits. */
void gpu__watch(struct gpu *g, uint32_t tgid);
/* Process events of the sampler: NEW/EXEC watch, EXIT forgets. */
void gpu__on_proc_event(struct gpu *g, const struct strata_proc_event *e);

/* Ring-buffer fd for epoll. */
int gpu__event_fd(const struct gpu *g);
/* Consumes events, rescans processes and runs the duty cycle.  Returns the
 * milliseconds until it wants to run again. */
int gpu__poll(struct gpu *g);
/* Reads the BPF maps into the tables (and finishes exited processes). */
int gpu__drain(struct gpu *g);
/* The tables; valid until the next gpu__drain / gpu__free. */
const struct gpu_data *gpu__data(struct gpu *g);
/* strata-agent --server: the call records of gpu__data() were shipped;
 * the next ones start an empty table (strata record keeps them all).  The
 * processes whose exit the previous batch told leave every table
 * (gpu_data.retired names them), idle raw stacks and unused frames go. */
void gpu__calls_taken(struct gpu *g);
/* The allocation calls of gpu__data()'s alloc_calls were taken (the
 * agent's ring, every drain). */
void gpu__alloc_calls_taken(struct gpu *g);
/* Counters and table sizes to stderr (-v). */
void gpu__report(struct gpu *g);

/* Deep capture (agent/capture/): every CUDA call of tgid as an event (on),
 * or not any more.  0 or -errno. */
int gpu__trace_process(struct gpu *g, uint32_t tgid, bool on);
/* A capture wants every call: the sheddable probes are attached now and
 * stay so up to GPU_CAPTURE_BUDGET of a process's CPU (past it the duty
 * cycle comes back at that budget, and the sampling ratio says so); off:
 * the session's budget again. */
#define GPU_CAPTURE_BUDGET 0.05
void gpu__hold_probes(struct gpu *g, bool hold);

struct gpu_state {
	uint64_t files_attached, links, targets, watched;
	uint64_t bpf_targets, bpf_allocs, bpf_inflight; /* entries in BPF maps now */
	uint64_t bpf_proc_rows; /* per-process rows (sites, tally, ...), swept at exit */
};
void gpu__state(struct gpu *g, struct gpu_state *st);

#endif /* STRATA_GPU_H */
