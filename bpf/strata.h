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
	PROC_EV_NEW = 1,	 /* first sample of an address space: read its maps */
	PROC_EV_EXEC = 2,	 /* exec: new address space (targeted modes only) */
	PROC_EV_EXIT = 3,	 /* last thread exited; if sampled, VMA records follow */
	PROC_EV_VMA = 4,	 /* one executable file mapping at exit */
	PROC_EV_UNWIND_MISS = 5, /* unwinder met a pc with no mapping or no
				  * table (start = that pc): load it now */
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

/*
 * Hybrid unwinding (x86-64).  One compiled CFI row says, for ELF virtual
 * addresses [pc, next row's pc), how to find the caller's frame.  Rows of
 * one file are sorted by pc; a gap between functions is a row of type
 * UNWIND_CFA_NONE so a pc there never borrows a neighbour's rule.
 */
enum unwind_cfa {
	UNWIND_CFA_NONE = 0,	    /* no CFI here: fall back to a frame-pointer step */
	UNWIND_CFA_RSP = 1,	    /* CFA = RSP + cfa_off */
	UNWIND_CFA_RBP = 2,	    /* CFA = RBP + cfa_off */
	UNWIND_CFA_PLT = 3,	    /* PLT stub: CFA = RSP + 8, + 8 when (RIP & 15) >= 11 */
	UNWIND_CFA_DEREF_RSP = 4,   /* CFA = *(RSP + cfa_off) (signal trampoline) */
	UNWIND_CFA_END = 5,	    /* outermost frame (return address undefined) */
	UNWIND_CFA_UNSUPPORTED = 6, /* an expression we do not evaluate */
};

enum unwind_reg_rule {
	UNWIND_REG_SAME = 0,	  /* register unchanged in the caller */
	UNWIND_REG_CFA_OFF = 1,	  /* saved at *(CFA + off) */
	UNWIND_REG_SP_OFF = 2,	  /* saved at *(RSP + off) (signal frames) */
	UNWIND_REG_UNDEFINED = 3, /* not recoverable */
	UNWIND_REG_UNSUPPORTED = 4,
};

#define UNWIND_ROW_FP_EXACT 1 /* a frame-pointer step gives the same caller here */

struct unwind_row {
	__u32 pc;      /* ELF virtual address where the row starts */
	__u8 cfa_type; /* enum unwind_cfa */
	__u8 rbp_rule; /* enum unwind_reg_rule for RBP */
	__u8 ra_rule;  /* enum unwind_reg_rule for the return address */
	__u8 flags;    /* UNWIND_ROW_* */
	__s32 cfa_off;
	__s16 rbp_off;
	__s16 ra_off; /* -8 for every ordinary x86-64 frame */
};

/* A process's executable mappings as the unwinder sees them, sorted by
 * start; keyed by mm_id in the unwind_procs map. */
#define UNWIND_MAX_MAPS 512 /* power of two: indexes are masked for the verifier */
#define UNWIND_NO_TABLE 0xffffffffu

struct unwind_map {
	__u64 start, end; /* [start, end) of the mapping */
	__u64 bias;	  /* ELF vaddr = ip - bias */
	__u32 row_first;  /* first row in unwind_rows, or UNWIND_NO_TABLE */
	__u32 row_count;
};

struct unwind_proc {
	__u32 nmaps;
	__u32 pad;
	struct unwind_map maps[UNWIND_MAX_MAPS];
};

/* Why an unwind stopped or fell back; counted per CPU (unwind_errors). */
enum unwind_err {
	UNWIND_OK_END = 0,	/* reached the outermost frame */
	UNWIND_ERR_NO_PROC,	/* process has no unwind info: FP only */
	UNWIND_ERR_NO_MAPPING,	/* pc in no known mapping (JIT, vdso): FP step */
	UNWIND_ERR_NO_TABLE,	/* mapping without table (map full / no CFI): FP step */
	UNWIND_ERR_NO_ROW,	/* pc outside its table: FP step */
	UNWIND_ERR_UNSUPPORTED, /* CFI expression not evaluated: stop */
	UNWIND_ERR_READ,	/* user memory unreadable: stop */
	UNWIND_ERR_BAD_FRAME,	/* RSP went down or RA zero: stop */
	UNWIND_ERR_DEPTH,	/* STRATA_MAX_STACK_DEPTH reached */
	UNWIND_FP_STEPS,	/* frames taken by a frame-pointer step */
	UNWIND_CFI_STEPS,	/* frames taken by a CFI row */
	UNWIND_ERR_MAX,
};

_Static_assert(sizeof(struct unwind_row) == 16, "unwind_row layout");
_Static_assert(sizeof(struct unwind_map) == 32, "unwind_map layout");
_Static_assert(sizeof(struct unwind_proc) == 8 + 32 * UNWIND_MAX_MAPS, "unwind_proc layout");
_Static_assert(sizeof(struct strata_stack_key) == 32, "stack_key layout");
_Static_assert(sizeof(struct strata_stack_count) == 24, "stack_count layout");
_Static_assert(sizeof(struct strata_stack) == 8 + 8 * STRATA_MAX_STACK_DEPTH, "stack_trace layout");
_Static_assert(sizeof(struct strata_inflight) == 16, "inflight layout");
_Static_assert(sizeof(struct strata_proc_event) == 56 + 40 + STRATA_NAME_LEN, "proc_event layout");

/* ---- Scheduler layer and time breakdown (issue 7; bpf/sched.bpf.c) ------ */

/* Where a thread's wall time went.  Every nanosecond of a targeted thread
 * lands in exactly one category (precedence: bpf/sched_account.h). */
enum strata_time_cat {
	STRATA_TIME_CPU = 0,	    /* on CPU, outside any API layer below */
	STRATA_TIME_CUDA_API = 1,   /* inside a CUDA API call */
	STRATA_TIME_GPU_WAIT = 2,   /* blocked waiting for the GPU (syncs) */
	STRATA_TIME_COLLECTIVE = 3, /* inside an NCCL collective */
	STRATA_TIME_IO_WAIT = 4,    /* blocked on I/O or a page fault */
	STRATA_TIME_LOCK_WAIT = 5,  /* blocked on a futex */
	STRATA_TIME_RUNNABLE = 6,   /* ready, waiting for a CPU */
	STRATA_TIME_OTHER = 7,	    /* sleeping, stopped, ... */
	STRATA_TIME_MAX = 8,
};

/* Why a thread left the CPU without being preempted. */
enum strata_offcpu_reason {
	STRATA_OFF_IO = 0,    /* uninterruptible (D) sleep: storage, io_schedule */
	STRATA_OFF_LOCK = 1,  /* in futex(2) / futex_waitv(2) */
	STRATA_OFF_SLEEP = 2, /* interruptible sleep: pipes, sockets, nanosleep */
	STRATA_OFF_FAULT = 3, /* blocked inside a page fault */
	STRATA_OFF_OTHER = 4, /* stopped, traced, dead, ... */
	STRATA_OFF_MAX = 5,
};

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
	char comm[STRATA_COMM_LEN];
};

/* Blocked time by (thread, reason, stacks).  Stack ids index the
 * sched_stacks STACK_TRACE map; negative: not captured (counted). */
struct strata_offcpu_key {
	__u32 tgid;
	__u32 tid;
	__u32 reason; /* enum strata_offcpu_reason */
	__u32 layer;  /* enum strata_api_layer at block time */
	__s32 user_stack;
	__s32 kern_stack;
};

#define STRATA_SCHED_STACK_SKIPPED (-2) /* rate limit: stack not walked */

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

enum strata_sched_counter {
	STRATA_SCHED_SWITCHES = 0,   /* sched_switch events seen */
	STRATA_SCHED_THREADS_FULL,   /* per-thread map full: time lost */
	STRATA_SCHED_OFFCPU_FULL,    /* off-CPU stack map full: time kept
				      * per thread, stack lost */
	STRATA_SCHED_FOREIGN_FULL,   /* foreign-process map full */
	STRATA_SCHED_STACK_LOST,     /* bpf_get_stackid failed */
	STRATA_SCHED_STORAGE_FAILED, /* task storage could not be created */
	STRATA_SCHED_MISSED_WAKEUP,  /* switched in while marked blocked */
	STRATA_SCHED_CNT_MAX,
};

_Static_assert(sizeof(struct strata_api_layer_state) == 24 + 8 * STRATA_LAYER_MAX,
	       "api_layer_state layout");
_Static_assert(sizeof(struct strata_sched_key) == 8, "sched_key layout");
_Static_assert(sizeof(struct strata_sched_thread) ==
		       8 * (2 + STRATA_OFF_MAX + STRATA_TIME_MAX + 2) + STRATA_COMM_LEN,
	       "sched_thread layout");
_Static_assert(sizeof(struct strata_offcpu_key) == 24, "offcpu_key layout");
_Static_assert(sizeof(struct strata_offcpu_val) == 16, "offcpu_val layout");
_Static_assert(sizeof(struct strata_foreign_key) == 8, "foreign_key layout");
_Static_assert(sizeof(struct strata_foreign_val) == 24, "foreign_val layout");
_Static_assert(sizeof(struct strata_irq_time) ==
		       8 * (2 * STRATA_SOFTIRQS + STRATA_HARDIRQS + 1) + 8,
	       "irq_time layout");

#endif /* STRATA_BPF_STRATA_H */
