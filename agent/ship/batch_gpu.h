/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU layer's tables (agent/gpu/gpu_data.h) into a wire batch: launches,
 * allocation events, allocation failures, copies and syncs, the API tally,
 * the probe duty cycle, NCCL communicators, collectives and their stats,
 * and rank labels from ncclCommInitRank.
 *
 * The layer's counts are cumulative since it started; a batch carries what
 * changed in its window, so this keeps the values last shipped per row
 * (bounded like the layer's own tables; rows beyond are counted).
 * Allocations are sent as the wire's events by comparing the outstanding
 * set of each drain with the previous one: new ones are allocations, gone
 * ones frees (free_ns = the drain that saw them gone, within one drain
 * interval of the real free).  An allocation made and freed between two
 * drains is never outstanding and is not sent.  A process that exited with
 * allocations keeps them outstanding (leaks at exit, as in the local report).
 */
#ifndef STRATA_AGENT_SHIP_BATCH_GPU_H
#define STRATA_AGENT_SHIP_BATCH_GPU_H

#include "agent/gpu/gpu_data.h"
#include "agent/proc/modules.h"
#include "agent/ship/agent_batch.h"

struct batch_gpu;

struct batch_gpu_stats {
	uint64_t records;	   /* rows added over all batches */
	uint64_t stacks_dropped;   /* call-site stacks over the batch bound (row kept, no stack) */
	uint64_t state_full;	   /* rows whose last-shipped value did not fit (sent whole) */
	uint64_t allocs_untracked; /* outstanding allocations beyond the set's bound */
	uint64_t allocs_deferred;  /* drains an allocation waited for its stack */
};

/* mods: where the call-site frames' files are found by path (build-ids). */
struct batch_gpu *batch_gpu__new(struct module_registry *mods, struct proc_tracker *procs);
void batch_gpu__free(struct batch_gpu *g);

/* After every drain of the layer: allocation events from this drain's
 * outstanding set (a short-lived process's allocations are in exactly one
 * drain's set, at its exit). */
void batch_gpu__drained(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d);

/* Adds the window's other GPU records of d to the batch; fills the GPU fields of
 * m->drops (cuda/nccl events lost this window).  0 or -ENOMEM. */
int batch_gpu__add(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d,
		   struct batch_meta *m);

/* One traced GPU call (a deep capture's, or the out-of-memory ring's) as a
 * GpuCall row with its process and stack.  0 or -errno (-ENOSPC: over the
 * batch's bounds, counted). */
int batch_gpu__call_row(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d,
			const struct gpu_event *e);

void batch_gpu__stats(const struct batch_gpu *g, struct batch_gpu_stats *st);

#endif /* STRATA_AGENT_SHIP_BATCH_GPU_H */
