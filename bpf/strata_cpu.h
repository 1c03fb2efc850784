/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CPU layer: sampled stacks, their aggregation, process events.
 * Part of the BPF ABI (bpf/strata.h): plain __u32/__u64 types and no libc
 * includes, so it compiles after either vmlinux.h or <linux/types.h>.
 * Every struct that crosses the boundary has its size asserted.
 */
#ifndef STRATA_BPF_STRATA_CPU_H
#define STRATA_BPF_STRATA_CPU_H

#include "lib/enums.h"

#define STRATA_MAX_STACK_DEPTH 127 /* frames per user / kernel stack */
#define STRATA_COMM_LEN 16
#define STRATA_NAME_LEN 64 /* dentry name in exit-time VMA records */

/* Stack ids are 64-bit hashes of the frames; these values are reserved. */
#define STRATA_STACK_NONE 0ULL	  /* no stack of this kind (kernel thread, ...) */
#define STRATA_STACK_LOST 1ULL	  /* stack could not be read or stored: counted */
#define STRATA_STACK_SKIPPED 2ULL /* not walked: the scheduler layer's rate limit */
#define STRATA_STACK_RESERVED STRATA_STACK_SKIPPED /* ids up to this are no hash */

/* Aggregation key: one count per distinct (process instance, thread, stacks). */
struct strata_stack_key {
	__u32 tgid;
	__u32 tid;
	__u64 mm_id;	  /* identifies the address space: changes on exec and
			   * on PID reuse, so mappings are never misapplied */
	__u64 user_stack; /* hash of the user frames, or STRATA_STACK_* */
	__u64 kern_stack; /* hash of the kernel frames, or STRATA_STACK_* */
	__u64 py_stack;	  /* hash of the Python frames (py_stacks), or
			   * STRATA_STACK_NONE */
};

struct strata_stack_count {
	__u64 count;
	char comm[STRATA_COMM_LEN];
};

/* A timed sample of a deep capture (agent/capture/): the sample's key and
 * when it was taken (bpf_ktime_get_ns, CLOCK_MONOTONIC). */
struct strata_timed_key {
	struct strata_stack_key k;
	__u64 time_ns;
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

/* The sampler's per-CPU counters (map "counters"): enum strata_counter,
 * listed in lib/enums.h (STRATA_SAMPLER_COUNTERS). */

enum proc_event_type {
	PROC_EV_NEW = 1,	 /* first sample of an address space: read its maps */
	PROC_EV_EXEC = 2,	 /* exec: new address space (targeted modes only) */
	PROC_EV_EXIT = 3,	 /* last thread exited; if sampled, VMA records follow */
	PROC_EV_VMA = 4,	 /* one executable file mapping at exit */
	PROC_EV_UNWIND_MISS = 5, /* unwinder met a pc with no mapping or no
				  * table (start = that pc): load it now */
	PROC_EV_PY_STACK = 6,	 /* a Python stack with code objects not seen
				  * lately (start = its id in py_stacks of
				  * generation flags): symbolize them now,
				  * before they are freed (module bodies) */
	PROC_EV_OOM_KILL = 7,	 /* the kernel's OOM killer chose tgid (the
				  * victim; oom:mark_victim).  start: the
				  * memory cgroup (kernfs id = the directory's
				  * inode) of the task whose allocation invoked
				  * the killer (for a memcg OOM, the cgroup at
				  * its limit or below); pgoff: that task's
				  * tgid; end: the victim's resident set in
				  * KiB, ino: its total VM in KiB (0: the
				  * kernel's tracepoint has no such field,
				  * before a 2024 change); comm: the
				  * victim's ("" then) */
	PROC_EV_MAPPED_EXEC = 8, /* the process's dynamic linker changed its
				  * loaded objects (start-up, dlopen,
				  * dlclose: _dl_debug_state); at most one
				  * per process per 200 ms (GPU object,
				  * bpf/gpu.bpf.c) */
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
	/* PROC_EV_VMA (and PROC_EV_OOM_KILL, see there) */
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
	STRATA_FILTER_AUTO = 3,	  /* sched only: tgids marked in auto_targets
				   * (CUDA/NCCL users, training labels, and
				   * their forks) */
};

/* Automatic targets: one bit per tgid in u64 words (word tgid / 64). */
#define STRATA_AUTO_TARGET_BITS 64

_Static_assert(sizeof(struct strata_stack_key) == 40, "stack_key layout");
_Static_assert(sizeof(struct strata_stack_count) == 24, "stack_count layout");
_Static_assert(sizeof(struct strata_timed_key) == 48, "timed_key layout");
_Static_assert(sizeof(struct strata_stack) == 8 + 8 * STRATA_MAX_STACK_DEPTH, "stack_trace layout");
_Static_assert(sizeof(struct strata_inflight) == 16, "inflight layout");
_Static_assert(sizeof(struct strata_proc_event) == 56 + 40 + STRATA_NAME_LEN, "proc_event layout");

#endif /* STRATA_BPF_STRATA_CPU_H */
