/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The scheduler layer and the time breakdown (bpf/sched.bpf.c).
 * Part of the BPF ABI (bpf/strata.h): plain __u32/__u64 types and no libc
 * includes, so it compiles after either vmlinux.h or <linux/types.h>.
 * Every struct that crosses the boundary has its size asserted.
 */
#ifndef STRATA_BPF_STRATA_SCHED_H
#define STRATA_BPF_STRATA_SCHED_H

#include "bpf/strata_cpu.h"
#include "lib/enums.h"

/* Where a thread's wall time went (enum strata_time_cat) and why it
 * blocked (enum strata_offcpu_reason): listed in lib/enums.h, shared with
 * the wire, the stores and diagnosis. */

/*
 * The API layer a thread is in, kept per thread (task storage map
 * "api_layers", defined in bpf/api_layer.bpf.h).  GPU-layer uprobes push on
 * entry and pop on exit; the scheduler program splits on-CPU time by the
 * layer and charges off-CPU time to the layer the thread blocked in.  The
 * values are ordered by precedence: inside a collective, a nested CUDA call
 * still counts as collective.
 */
enum strata_api_layer {
	STRATA_LAYER_NONE = 0,
	STRATA_LAYER_CUDA_API = 1,
	STRATA_LAYER_GPU_WAIT = 2,
	STRATA_LAYER_COLLECTIVE = 3,
	STRATA_LAYER_MAX = 4,
};

#define STRATA_LAYER_DEPTH 8 /* nested API calls tracked; deeper ones counted */

struct strata_api_layer_state {
	__u8 stack[STRATA_LAYER_DEPTH]; /* effective layer at each depth */
	__u32 depth;
	__u32 overflow;			  /* pushes beyond STRATA_LAYER_DEPTH */
	__u64 since_ns;			  /* on-CPU time before this is accounted */
	__u64 oncpu_ns[STRATA_LAYER_MAX]; /* since the last switch-in, per layer */
};

/* Per targeted thread, cumulative since the thread was first seen. */
struct strata_sched_key {
	__u32 tgid;
	__u32 tid;
};

struct strata_sched_thread {
	__u64 oncpu_ns;
	__u64 runnable_ns;
	__u64 offcpu_ns[STRATA_OFF_MAX];
	__u64 time_ns[STRATA_TIME_MAX]; /* the breakdown: sums to the time
					 * accounted (oncpu+runnable+offcpu) */
	__u64 switches;
	__u64 first_ns; /* bpf_ktime_get_ns of the first transition seen */
	__u64 exit_ns;	/* when the thread exited (0: alive); user space
			 * retires the entry a grace period later */
	char comm[STRATA_COMM_LEN];
};

/* Blocked time by (thread, reason, stacks).  Stack ids (hash_stack) key
 * the same generation's sched_stacks map, or are STRATA_STACK_NONE, _LOST
 * (counted) or _SKIPPED (the rate limit: not walked). */
struct strata_offcpu_key {
	__u32 tgid;
	__u32 tid;
	__u32 reason; /* enum strata_offcpu_reason */
	__u32 layer;  /* enum strata_api_layer at block time */
	__u64 mm_id;  /* the address space the user stack is of (mm_id_of):
		       * the process may be gone by the drain */
	__u64 user_stack;
	__u64 kern_stack;
};

struct strata_offcpu_val {
	__u64 ns;
	__u64 count;
};

/* A non-target process that ran on a CPU where a target ran. */
struct strata_foreign_key {
	__u32 cpu;
	__u32 tgid;
};

struct strata_foreign_val {
	__u64 ns;
	char comm[STRATA_COMM_LEN];
};

#define STRATA_SOFTIRQS 10  /* NR_SOFTIRQS */
#define STRATA_HARDIRQS 256 /* irq numbers >= this share the last slot */

/* Per CPU: interrupt time (index: softirq vector, or irq number). */
struct strata_irq_time {
	__u64 softirq_ns[STRATA_SOFTIRQS];
	__u64 hardirq_ns[STRATA_HARDIRQS];
	__u64 softirq_start[STRATA_SOFTIRQS]; /* in progress */
	__u64 hardirq_start;
	__u32 hardirq_cur;
	__u32 pad;
};

/* Per-CPU counters (map "sched_counters"): enum strata_sched_counter,
 * listed in lib/enums.h (STRATA_SCHED_COUNTERS). */

_Static_assert(sizeof(struct strata_api_layer_state) == 24 + 8 * STRATA_LAYER_MAX,
	       "api_layer_state layout");
_Static_assert(sizeof(struct strata_sched_key) == 8, "sched_key layout");
_Static_assert(sizeof(struct strata_sched_thread) ==
		       8 * (2 + STRATA_OFF_MAX + STRATA_TIME_MAX + 3) + STRATA_COMM_LEN,
	       "sched_thread layout");
_Static_assert(sizeof(struct strata_offcpu_key) == 40, "offcpu_key layout");
_Static_assert(sizeof(struct strata_offcpu_val) == 16, "offcpu_val layout");
_Static_assert(sizeof(struct strata_foreign_key) == 8, "foreign_key layout");
_Static_assert(sizeof(struct strata_foreign_val) == 24, "foreign_val layout");
_Static_assert(sizeof(struct strata_irq_time) ==
		       8 * (2 * STRATA_SOFTIRQS + STRATA_HARDIRQS + 1) + 8,
	       "irq_time layout");

#endif /* STRATA_BPF_STRATA_SCHED_H */
