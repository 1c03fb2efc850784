/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scheduler layer (agent/sched/sched_collector.h) into a wire batch:
 * OffCpuSample (blocked time by thread, reason and blocking stack),
 * SchedStat (per thread: on-CPU, runnable, switches), TimeBreakdown (per
 * thread and category) and IrqStat (per CPU: hard and soft irq time).
 *
 * The collector's thread and irq counters are cumulative; a batch carries
 * what changed in its window (the server sums rows over batches), so this
 * keeps the values last shipped per thread (tgid, tid, first-seen time: a
 * reused tid starts afresh) and per CPU.  The off-CPU aggregate is drained
 * (removed) by the collector at every drain, while the processes that
 * exited since the last one still resolve, and the window's drains add up
 * in one row per (process, thread, stack, reason).  Bounded: threads
 * beyond BATCH_SCHED_MAX_THREADS are not shipped and counted.
 *
 * CPU layer: SoftirqVectorStat (per CPU and vector), ForeignRun
 * (non-target processes on the targets' CPUs) and TargetCpu (each target
 * process's on-CPU time per CPU), deltas of cumulative per-CPU counters
 * bounded by BATCH_SCHED_MAX_CPU_ROWS.
 */
#ifndef STRATA_AGENT_SHIP_BATCH_SCHED_H
#define STRATA_AGENT_SHIP_BATCH_SCHED_H

#include "agent/sched/sched_collector.h"
#include "agent/ship/agent_batch.h"

#define BATCH_SCHED_MAX_THREADS 131072 /* > the collector's live + retired bounds */
/* > softirq vectors x CPUs + the foreign and target_cpu maps (4096 each) */
#define BATCH_SCHED_MAX_CPU_ROWS 65536

struct batch_sched;

struct batch_sched_stats {
	uint64_t records; /* rows added over all batches */
	uint64_t
		stacks_dropped; /* off-CPU rows over the batch's stack bound (row kept, no stack) */
	uint64_t threads_over;	/* thread rows not shipped: state table full */
	uint64_t cpu_rows_over; /* per-CPU counter rows not shipped: table full */
	/* (CPU, process) counters idle for a window, deleted from BPF */
	uint64_t cpu_rows_forgotten;
	uint64_t offcpu_unmerged; /* off-CPU rows not indexed (ENOMEM): later
				   * drains add rows of their own */
};

struct batch_sched *batch_sched__new(void);
void batch_sched__free(struct batch_sched *s);

/* Every drain: the off-CPU time blocks ended since the last drain, into the
 * batch.  0 or -errno. */
int batch_sched__offcpu(struct batch_sched *s, struct agent_batch *ab, struct sched_collector *c);
/* A window's end, after its last drain: the window's thread, irq and
 * per-CPU records of c into the batch, which is finished next.  0 or
 * -errno. */
int batch_sched__add(struct batch_sched *s, struct agent_batch *ab, struct sched_collector *c);

void batch_sched__stats(const struct batch_sched *s, struct batch_sched_stats *st);

#endif /* STRATA_AGENT_SHIP_BATCH_SCHED_H */
