/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CPU sampler: loads bpf/profile.bpf.c, opens a cpu-clock perf event on
 * every online CPU, and drains the double-buffered aggregation maps.
 */
#ifndef STRATA_SAMPLER_H
#define STRATA_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "agent/core/features.h"
#include "bpf/strata.h"

struct sampler_opts {
	size_t sz;	    /* sizeof(struct sampler_opts) */
	uint32_t freq_hz;   /* samples per second per CPU */
	uint32_t filter;    /* enum strata_filter */
	const char *cgroup; /* STRATA_FILTER_CGROUP: cgroup v2 directory */
	bool no_user, no_kernel;
	uint32_t max_counts;	  /* distinct stack keys per generation; 0 = 16384 */
	uint32_t max_stacks;	  /* distinct stacks per generation; 0 = 8192 */
	bool debug_bpf;		  /* bpf_printk tracing */
	bool hybrid;		  /* CFI-table + FP unwinding of user stacks */
	uint32_t max_unwind_rows; /* rows of all loaded unwind tables; 0 = 2097152 */
	bool no_python;		  /* do not walk CPython frames */
	/* The running kernel's (agent/core/features.h); NULL: probed here. */
	const struct kernel_features *features;
};

/* One aggregated sample handed out by sampler__drain(). */
struct sampler_sample {
	const struct strata_stack_key *key;
	uint64_t count;
	const char *comm;
	const struct strata_stack *user; /* NULL: none or lost (see key) */
	const struct strata_stack *kern;
	const struct strata_py_stack *py; /* NULL: not Python, or lost (see key) */
	uint64_t time_ns; /* a deep capture's timed sample: when (CLOCK_MONOTONIC); else 0 */
};

typedef int (*sampler_sample_fn)(void *ctx, const struct sampler_sample *s);
typedef int (*sampler_event_fn)(void *ctx, const struct strata_proc_event *e);

struct sampler_stats {
	uint64_t counters[STRATA_CNT_MAX]; /* summed over CPUs, since start */
	uint64_t drains;
	uint64_t drain_wait_timeouts; /* inflight never reached zero */
	uint64_t stacks_missing;      /* key named a stack not in the map */
	uint64_t samples_dropped;     /* consumer failed (no memory) */
	uint64_t events_malformed;    /* short ring-buffer records */
	uint64_t timed_dropped;	      /* deep capture: timed samples the consumer refused */
	uint32_t capture_hz;	      /* deep capture: the timed sampler's rate now (0: off) */
};

struct sampler;

/* Returns NULL with errno set on failure (message logged). */
struct sampler *sampler__new(const struct sampler_opts *opts, sampler_event_fn on_event,
			     void *event_ctx);
void sampler__free(struct sampler *s);

/* Adds a process to the targets (STRATA_FILTER_TGIDS). 0 or -errno. */
int sampler__add_target(struct sampler *s, uint32_t tgid);

/* Starts sampling (attaches perf events + tracepoints).  0 or -errno. */
int sampler__start(struct sampler *s);

/* fd that becomes readable when process events are pending. */
int sampler__event_fd(const struct sampler *s);
/* Consumes pending process events (non-blocking).  Returns count or -errno. */
int sampler__consume_events(struct sampler *s);

/*
 * Flips the generation, waits until no program still writes the old one,
 * then hands out and clears every aggregated sample of the old generation
 * (fn), and every timed sample of a deep capture (timed_fn; NULL: dropped).
 * Samples taken meanwhile go to the new generation: none lost, none counted
 * twice.  Returns the number of aggregated samples handed out or -errno.
 */
int sampler__drain(struct sampler *s, sampler_sample_fn fn, sampler_sample_fn timed_fn, void *ctx);

/*
 * Deep capture (agent/capture/): a second cpu-clock perf event per CPU at
 * freq_hz (0: none) samples the capture's processes into timed samples;
 * the always-on sampling is left as it is.  0 or -errno (then off).
 */
int sampler__capture_freq(struct sampler *s, uint32_t freq_hz);
/* Adds (on) or removes a process of the capture set.  0 or -errno. */
int sampler__capture_target(struct sampler *s, uint32_t tgid, bool on);

void sampler__stats(const struct sampler *s, struct sampler_stats *st);

/* The target maps (targets, cgroup_map), shared with the scheduler layer. */
void sampler__filter_maps(const struct sampler *s, int *targets_fd, int *cgroup_map_fd);

/* The hybrid unwinder's maps, for the loader that fills them. */
void sampler__unwind_maps(const struct sampler *s, int *rows_fd, uint32_t *max_rows, int *procs_fd);
/* Per-reason unwinder counters summed over CPUs (UNWIND_ERR_MAX entries). */
void sampler__unwind_counters(const struct sampler *s, uint64_t *out);

/* Python: the descriptor map the agent fills (keyed by mm_id),
 * and the walker's per-reason counters summed over CPUs (STRATA_PY_ERR_MAX). */
int sampler__py_procs_fd(const struct sampler *s);
void sampler__py_counters(const struct sampler *s, uint64_t *out);
/* The Python stack id of generation gen (a PROC_EV_PY_STACK event's), read
 * before that generation is drained: 0, or -errno (drained meanwhile). */
int sampler__py_stack(struct sampler *s, uint32_t gen, uint64_t id, struct strata_py_stack *buf);

#endif /* STRATA_SAMPLER_H */
