/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by the BPF programs and user space.  Plain __u32/__u64 and no
 * includes, so this compiles after either vmlinux.h or <linux/types.h>.
 * Every struct that crosses the boundary has its size asserted below.
 */
#ifndef STRATA_BPF_STRATA_H
#define STRATA_BPF_STRATA_H

#define STRATA_MAX_STACK_DEPTH 127 /* frames per user / kernel stack */
#define STRATA_COMM_LEN 16
#define STRATA_NAME_LEN 64 /* dentry name in exit-time VMA records */

/* Stack ids are 64-bit hashes of the frames; these values are reserved. */
#define STRATA_STACK_NONE 0ULL /* no stack of this kind (kernel thread, ...) */
#define STRATA_STACK_LOST 1ULL /* stack could not be read or stored: counted */

/* Aggregation key: one count per distinct (process instance, thread, stacks). */
struct strata_stack_key {
	__u32 tgid;
	__u32 tid;
	__u64 mm_id;	  /* identifies the address space: changes on exec and
			   * on PID reuse, so mappings are never misapplied */
	__u64 user_stack; /* hash of the user frames, or STRATA_STACK_* */
	__u64 kern_stack; /* hash of the kernel frames, or STRATA_STACK_* */
};

struct strata_stack_count {
	__u64 count;
	char comm[STRATA_COMM_LEN];
};

struct strata_stack {
	__u32 len;   /* frames used in ips[] */
	__u32 flags; /* reserved for the hybrid unwinder */
	__u64 ips[STRATA_MAX_STACK_DEPTH];
};

/* Two generations of aggregation maps: BPF writes one, user space drains the
 * other.  inflight[g] counts programs running against generation g. */
#define STRATA_GENERATIONS 2
struct strata_inflight {
	__u64 n[STRATA_GENERATIONS];
};

enum strata_counter {
	STRATA_CNT_SAMPLES,	   /* perf_event invocations */
	STRATA_CNT_FILTERED,	   /* not a target: ignored */
	STRATA_CNT_IDLE,	   /* the idle task: ignored */
	STRATA_CNT_RECORDED,	   /* samples added to a count */
	STRATA_CNT_COUNTS_FULL,	   /* count map full: sample dropped */
	STRATA_CNT_STACKS_FULL,	   /* stack map full: counted as STACK_LOST */
	STRATA_CNT_USER_STACK_ERR, /* bpf_get_stack failed for user frames */
	STRATA_CNT_KERN_STACK_ERR, /* bpf_get_stack failed for kernel frames */
	STRATA_CNT_EVENTS_LOST,	   /* process-event ring buffer full */
	STRATA_CNT_VMAS_TRUNCATED, /* exit-time VMA walk stopped: ring full */
	STRATA_CNT_TARGETS_FULL,   /* a target's fork could not be added */
	STRATA_CNT_MAX,
};

enum proc_event_type {
	PROC_EV_NEW = 1,  /* first sample of an address space: read its maps */
	PROC_EV_EXEC = 2, /* exec: new address space (targeted modes only) */
	PROC_EV_EXIT = 3, /* last thread exited; if sampled, VMA records follow */
	PROC_EV_VMA = 4,  /* one executable file mapping at exit */
};

#define PROC_EV_F_SAMPLED 1 /* EXIT: the address space had samples */

struct strata_proc_event {
	__u32 type; /* enum proc_event_type */
	__u32 tgid;
	__u32 flags; /* PROC_EV_F_* */
	__u32 pad;
	__u64 mm_id;
	__u64 ts_ns;	/* bpf_ktime_get_ns */
	__u64 start_ns; /* group leader's start_boottime: with tgid, identifies
			 * the process across PID reuse (/proc/PID/stat field
			 * 22 is the same instant in clock ticks) */
	char comm[STRATA_COMM_LEN];
	/* PROC_EV_VMA only */
	__u64 start, end, pgoff, ino;
	__u32 dev; /* kernel dev_t (major << 20 | minor) */
	__u32 pad2;
	char name[STRATA_NAME_LEN];
};

/* Target selection, set in rodata before load. */
enum strata_filter {
	STRATA_FILTER_NONE = 0,	  /* whole host */
	STRATA_FILTER_TGIDS = 1,  /* tgids in the targets map (+ their forks) */
	STRATA_FILTER_CGROUP = 2, /* tasks under the cgroup in cgroup_map */
};

_Static_assert(sizeof(struct strata_stack_key) == 32, "stack_key layout");
_Static_assert(sizeof(struct strata_stack_count) == 24, "stack_count layout");
_Static_assert(sizeof(struct strata_stack) == 8 + 8 * STRATA_MAX_STACK_DEPTH, "stack_trace layout");
_Static_assert(sizeof(struct strata_inflight) == 16, "inflight layout");
_Static_assert(sizeof(struct strata_proc_event) == 56 + 40 + STRATA_NAME_LEN, "proc_event layout");

#endif /* STRATA_BPF_STRATA_H */
