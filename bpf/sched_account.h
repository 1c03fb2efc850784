/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Scheduler accounting rules, shared by bpf/sched.bpf.c and the unit tests:
 * why a thread blocked, which breakdown category an interval belongs to
 * (the same precedence as strata_time_rank() in lib/enums.h, which
 * diagnose/breakdown.c applies to overlapping intervals), and the
 * per-thread API-layer stack the GPU uprobes push and pop.  Plain C on
 * __u32/__u64 and the enums of bpf/strata.h (include that first); no
 * helpers, no maps.
 */
#ifndef STRATA_BPF_SCHED_ACCOUNT_H
#define STRATA_BPF_SCHED_ACCOUNT_H

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* include/linux/sched.h task states (stable ABI of the tracepoint) */
#define SCHED_TASK_INTERRUPTIBLE 0x1
#define SCHED_TASK_UNINTERRUPTIBLE 0x2
/* x86-64 syscall numbers that wait on a futex */
#define SCHED_NR_FUTEX 202
#define SCHED_NR_FUTEX_WAITV 449

/*
 * Why a thread that was not preempted left the CPU.  A page fault wins
 * (the fault's I/O is why it sleeps, whatever the state), then futex(2)
 * (user-space locks, including Python's GIL: interruptible sleeps that are
 * really lock waits), then the state itself.
 */
static __always_inline __u32 sched_block_reason(__u32 prev_state, __u32 in_fault, long syscall_nr)
{
	if (in_fault)
		return STRATA_OFF_FAULT;
	if (syscall_nr == SCHED_NR_FUTEX || syscall_nr == SCHED_NR_FUTEX_WAITV)
		return STRATA_OFF_LOCK;
	if (prev_state & SCHED_TASK_UNINTERRUPTIBLE)
		return STRATA_OFF_IO;
	if (prev_state & SCHED_TASK_INTERRUPTIBLE)
		return STRATA_OFF_SLEEP;
	return STRATA_OFF_OTHER;
}

static __always_inline __u32 sched_layer_cat(__u32 layer)
{
	switch (layer) {
	case STRATA_LAYER_CUDA_API:
		return STRATA_TIME_CUDA_API;
	case STRATA_LAYER_GPU_WAIT:
		return STRATA_TIME_GPU_WAIT;
	case STRATA_LAYER_COLLECTIVE:
		return STRATA_TIME_COLLECTIVE;
	default:
		return STRATA_TIME_CPU;
	}
}

/*
 * Category of off-CPU time.  Precedence: runnable (the scheduler, not the
 * program, decided it: CPU contention) > the API layer blocked in (a sync
 * blocked on a futex is GPU wait, not lock wait) > the block reason.
 */
static __always_inline __u32 sched_offcpu_cat(int runnable, __u32 reason, __u32 layer)
{
	if (runnable)
		return STRATA_TIME_RUNNABLE;
	if (layer != STRATA_LAYER_NONE && layer < STRATA_LAYER_MAX)
		return sched_layer_cat(layer);
	switch (reason) {
	case STRATA_OFF_IO:
	case STRATA_OFF_FAULT:
		return STRATA_TIME_IO_WAIT;
	case STRATA_OFF_LOCK:
		return STRATA_TIME_LOCK_WAIT;
	default:
		return STRATA_TIME_OTHER;
	}
}

static __always_inline __u32 api_layer_cur(const struct strata_api_layer_state *st)
{
	__u32 d = st->depth;

	if (!d || d > STRATA_LAYER_DEPTH)
		return STRATA_LAYER_NONE;
	return st->stack[(d - 1) & (STRATA_LAYER_DEPTH - 1)];
}

/* Charges on-CPU time since since_ns to the current layer.  since_ns 0: the
 * state was just created mid-slice; the scheduler charges that part as CPU. */
static __always_inline void api_layer_charge(struct strata_api_layer_state *st, __u64 now)
{
	__u32 cur = api_layer_cur(st);

	if (st->since_ns && now > st->since_ns && cur < STRATA_LAYER_MAX)
		st->oncpu_ns[cur] += now - st->since_ns;
	st->since_ns = now;
}

/* Entry of an API call (the thread is on CPU).  Nested calls keep the
 * higher-precedence layer. */
static __always_inline void api_layer_push(struct strata_api_layer_state *st, __u32 layer,
					   __u64 now)
{
	__u32 cur = api_layer_cur(st), d = st->depth;

	api_layer_charge(st, now);
	if (d >= STRATA_LAYER_DEPTH) {
		st->overflow++;
		return;
	}
	st->stack[d & (STRATA_LAYER_DEPTH - 1)] = layer > cur ? layer : cur;
	st->depth = d + 1;
}

static __always_inline void api_layer_pop(struct strata_api_layer_state *st, __u64 now)
{
	api_layer_charge(st, now);
	if (st->overflow)
		st->overflow--;
	else if (st->depth)
		st->depth--;
}

#endif /* STRATA_BPF_SCHED_ACCOUNT_H */
