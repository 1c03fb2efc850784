/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scheduler collector: loads bpf/sched.bpf.c and reads what it counts
 * for the targeted threads (on-CPU, runnable, off-CPU by reason, the time
 * breakdown), the blocking stacks, per-CPU irq/softirq time and the other
 * processes that ran on the targets' CPUs.  It shares the profile object's
 * target maps, so both follow the same processes and their forks.
 */
#ifndef STRATA_SCHED_COLLECTOR_H
#define STRATA_SCHED_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpf/strata.h"

struct sched_collector_opts {
	size_t sz;
	uint32_t filter;	       /* enum strata_filter; AUTO: host-wide, the
					* automatic targets */
	int targets_fd;		       /* the profile object's targets map (TGIDS), or -1 */
	int cgroup_map_fd;	       /* its cgroup_map (CGROUP), or -1 */
	uint32_t max_threads;	       /* per-thread accumulators; 0 = 16384 */
	uint32_t max_offcpu;	       /* (thread, reason, stacks) entries; 0 = 16384 */
	uint32_t max_retired;	       /* exited threads kept for the report; 0 = 65536 */
	uint64_t stack_interval_ns;    /* blocking stacks walked per thread at most this
					* often; 0 = 1 ms, UINT64_MAX = every block */
	const char *test_layer_binary; /* attach the API-layer test uprobes to
					* this file's strata_test_layer_enter/
					* _exit (tests only) */
};

struct sched_collector;
struct sched_bitmaps;

/* NULL with errno set (message logged) on failure. */
struct sched_collector *sched_collector__new(const struct sched_collector_opts *opts);
void sched_collector__free(struct sched_collector *c);
int sched_collector__start(struct sched_collector *c);

/* STRATA_FILTER_AUTO: the automatic-target and exec bitmaps
 * (agent/sched/sched_targets.h); NULL in the other modes. */
const struct sched_bitmaps *sched_collector__bitmaps(const struct sched_collector *c);

/* The API-layer map, for the GPU layer's object (bpf_map__reuse_fd). */
int sched_collector__api_layers_fd(const struct sched_collector *c);

typedef int (*sched_thread_fn)(void *ctx, const struct strata_sched_key *k,
			       const struct strata_sched_thread *t);
/* Every thread's cumulative counters: the retired ones' final values, then
 * the live (and not yet retired) ones.  Returns the count or -errno. */
int sched_collector__threads(struct sched_collector *c, sched_thread_fn fn, void *ctx);

/*
 * Moves threads that exited at least grace_ns before now_ns (CLOCK_MONOTONIC)
 * out of the BPF map, keeping their final counters (up to max_retired;
 * beyond, dropped and counted), so a host with many short-lived threads
 * never fills it.  Call it periodically.  Returns the number retired or
 * -errno.
 */
#define SCHED_RETIRE_GRACE_NS 1000000000ULL
int sched_collector__retire(struct sched_collector *c, uint64_t now_ns, uint64_t grace_ns);

struct sched_retire_stats {
	uint64_t retired; /* exited threads taken out of the BPF map */
	uint64_t dropped; /* ... whose counters did not fit max_retired */
};
void sched_collector__retire_stats(const struct sched_collector *c, struct sched_retire_stats *st);

/* One blocking site; stacks are innermost first, n = 0 when lost. */
struct sched_offcpu {
	const struct strata_offcpu_key *key;
	uint64_t ns, count;
	const uint64_t *user, *kern;
	size_t n_user, n_kern;
};
typedef int (*sched_offcpu_fn)(void *ctx, const struct sched_offcpu *o);
/* Hands out and removes the off-CPU aggregate, exactly: no increment is
 * lost or handed out twice (double buffered).  Returns the count or -errno. */
int sched_collector__drain_offcpu(struct sched_collector *c, sched_offcpu_fn fn, void *ctx);
/* Drains whose wait for in-flight BPF programs timed out (never, unless a
 * program hangs). */
uint64_t sched_collector__drain_wait_timeouts(const struct sched_collector *c);
/* Off-CPU keys whose stack was not in their generation's stack map (a bug
 * if ever non-zero: BPF stores a key's stacks before the key). */
uint64_t sched_collector__stacks_missing(const struct sched_collector *c);

typedef int (*sched_foreign_fn)(void *ctx, const struct strata_foreign_key *k,
				const struct strata_foreign_val *v);
/* Cumulative ns per (CPU, tgid): with targets false, the non-target
 * processes that ran on a CPU within a second of a target running there;
 * with targets true, the targets' own on-CPU time per CPU. */
int sched_collector__foreign(struct sched_collector *c, bool targets, sched_foreign_fn fn,
			     void *ctx);
/* Deletes one (CPU, tgid) entry of those maps: the caller saw it unchanged
 * for a whole window (a foreign process gone or moved away, a rank
 * exited), so the maps (4096 entries) hold the recent ones only.  An add
 * racing the delete is lost (a foreign slice: at most about a second).
 * 0 or -errno. */
int sched_collector__foreign_forget(struct sched_collector *c, bool targets,
				    const struct strata_foreign_key *k);

/* Interrupt time per CPU (cumulative); only non-zero entries. */
typedef int (*sched_irq_fn)(void *ctx, uint32_t cpu, bool softirq, uint32_t vector, uint64_t ns);
int sched_collector__irq(struct sched_collector *c, sched_irq_fn fn, void *ctx);

/* STRATA_SCHED_CNT_MAX counters summed over CPUs. */
void sched_collector__counters(const struct sched_collector *c, uint64_t *out);

#endif /* STRATA_SCHED_COLLECTOR_H */
