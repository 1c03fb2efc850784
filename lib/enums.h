/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every enum that more than one side speaks (BPF programs, the agent, the
 * wire, the stores, diagnosis and the name tables), each written once as an
 * X-macro list.  The enums, their name tables (lib/enum_names.h), their
 * wire mapping (lib/wire_enums.h, checked against the protobuf-c
 * descriptors) and the stores' mapping are generated from these lists, so
 * adding an entry here is the whole change.
 *
 * No includes, only plain C: BPF programs include this file too (after
 * vmlinux.h), through the bpf/ ABI headers.
 */
#ifndef STRATA_LIB_ENUMS_H
#define STRATA_LIB_ENUMS_H

/*
 * The wire's enums (proto/strata.proto) keep 0 for "unspecified": entry i
 * of a list below is wire value i + 1.  This is the one conversion; every
 * side that crosses between the two uses it.
 */
#define STRATA_WIRE_ENUM_BASE 1u
#define strata_enum_to_wire(i) ((unsigned int)(i) + STRATA_WIRE_ENUM_BASE)
/* Only for w in [STRATA_WIRE_ENUM_BASE, STRATA_WIRE_ENUM_BASE + max). */
#define strata_enum_from_wire(w) ((unsigned int)(w)-STRATA_WIRE_ENUM_BASE)

/* ---- lists shared with the wire: X(enumerator, wire suffix, name, ...) -- */

/*
 * Where a thread's wall time went (TimeBreakdown.Category on the wire).
 * Every nanosecond of a targeted thread lands in exactly one category.  The
 * last column is the precedence for overlapping intervals (higher wins):
 * runnable (the scheduler decided) > the API layers > the block reasons >
 * plain CPU > other (bpf/sched_account.h applies it in BPF).
 */
#define STRATA_TIME_CATS(X)                                                                        \
	X(STRATA_TIME_CPU, CPU, "cpu", 1)		       /* on CPU, outside any API layer */ \
	X(STRATA_TIME_CUDA_API, CUDA_API, "cuda_api", 4)       /* inside a CUDA API call */        \
	X(STRATA_TIME_GPU_WAIT, GPU_WAIT, "gpu_wait", 5)       /* blocked on the GPU (syncs) */    \
	X(STRATA_TIME_COLLECTIVE, COLLECTIVE, "collective", 6) /* inside an NCCL call */           \
	X(STRATA_TIME_IO_WAIT, IO_WAIT, "io_wait", 3)	       /* blocked on I/O or a fault */     \
	X(STRATA_TIME_LOCK_WAIT, LOCK_WAIT, "lock_wait", 2)    /* blocked on a futex */            \
	X(STRATA_TIME_RUNNABLE, RUNNABLE, "runnable", 7)       /* ready, waiting for a CPU */      \
	X(STRATA_TIME_OTHER, OTHER, "other", 0)		       /* sleeping, stopped, ... */

/* Why a thread left the CPU without being preempted (OffCpuSample.Reason). */
#define STRATA_OFFCPU_REASONS(X)                                                                   \
	X(STRATA_OFF_IO, IO, "io")		      /* uninterruptible (D) sleep, io_schedule */ \
	X(STRATA_OFF_LOCK, LOCK, "lock")	      /* in futex(2) / futex_waitv(2) */           \
	X(STRATA_OFF_SLEEP, SLEEP, "sleep")	      /* interruptible: pipes, sockets, sleeps */  \
	X(STRATA_OFF_FAULT, PAGE_FAULT, "page_fault") /* blocked inside a page fault */            \
	X(STRATA_OFF_OTHER, OTHER, "other")	      /* stopped, traced, dead, ... */

/* ---- per-CPU counters kept by BPF: X(enumerator, name) ------------------ */

/* The sampler (bpf/profile.bpf.c, map "counters"). */
#define STRATA_SAMPLER_COUNTERS(X)                                                            \
	X(STRATA_CNT_SAMPLES, "samples")		    /* perf_event invocations */      \
	X(STRATA_CNT_FILTERED, "filtered")		    /* not a target: ignored */       \
	X(STRATA_CNT_IDLE, "idle")			    /* the idle task: ignored */      \
	X(STRATA_CNT_RECORDED, "recorded")		    /* samples added to a count */    \
	X(STRATA_CNT_COUNTS_FULL, "counts_map_full")	    /* count map full: dropped */     \
	X(STRATA_CNT_STACKS_FULL, "stacks_map_full")	    /* stack map full: STACK_LOST */  \
	X(STRATA_CNT_USER_STACK_ERR, "user_stack_error")    /* bpf_get_stack, user */         \
	X(STRATA_CNT_KERN_STACK_ERR, "kernel_stack_error")  /* bpf_get_stack, kernel */       \
	X(STRATA_CNT_EVENTS_LOST, "events_lost")	    /* process-event ring full */     \
	X(STRATA_CNT_VMAS_TRUNCATED, "exit_vmas_truncated") /* exit VMA walk: ring full */    \
	X(STRATA_CNT_TARGETS_FULL, "targets_full")	    /* a target's fork not added */   \
	X(STRATA_CNT_TIMED, "timed_samples")		    /* deep capture: timed samples */ \
	X(STRATA_CNT_TIMED_FULL, "timed_map_full")	    /* deep capture: map full */

/* Why an unwind stopped or fell back (map "unwind_errors"). */
#define STRATA_UNWIND_COUNTERS(X)                                                            \
	X(UNWIND_OK_END, "end_reached")		 /* reached the outermost frame */           \
	X(UNWIND_ERR_NO_PROC, "no_proc")	 /* process has no unwind info: FP only */   \
	X(UNWIND_ERR_NO_MAPPING, "no_mapping")	 /* pc in no known mapping (JIT): FP step */ \
	X(UNWIND_ERR_NO_TABLE, "no_table")	 /* mapping without table: FP step */        \
	X(UNWIND_ERR_NO_ROW, "no_row")		 /* pc outside its table: FP step */         \
	X(UNWIND_ERR_UNSUPPORTED, "unsupported") /* CFI expression not evaluated: stop */    \
	X(UNWIND_ERR_READ, "read_failed")	 /* user memory unreadable: stop */          \
	X(UNWIND_ERR_BAD_FRAME, "bad_frame")	 /* RSP went down or RA zero: stop */        \
	X(UNWIND_ERR_DEPTH, "depth_limit")	 /* STRATA_MAX_STACK_DEPTH reached */        \
	X(UNWIND_FP_STEPS, "fp_steps")		 /* frames taken by a frame-pointer step */  \
	X(UNWIND_CFI_STEPS, "cfi_steps")	 /* frames taken by a CFI row */             \
	X(UNWIND_ENTRY_STEPS, "entry_steps")	 /* at a function's entry: RA at rsp */

/* Why a Python walk failed or stopped (map "py_errors"). */
#define STRATA_PY_COUNTERS(X)                                                                   \
	X(STRATA_PY_WALKED, "walked")			 /* samples with a Python stack */      \
	X(STRATA_PY_NO_THREAD, "thread_state_not_found") /* not a Python thread */              \
	X(STRATA_PY_ERR_READ, "frame_read_failed") /* interpreter state or frame unreadable */  \
	X(STRATA_PY_ERR_DEPTH, "depth_exceeded")   /* STRATA_PY_MAX_DEPTH reached */            \
	X(STRATA_PY_ERR_STORE, "stack_map_full")   /* py stack map full */                      \
	X(STRATA_PY_TSTATE_CACHED, "thread_state_cached") /* thread state found in the cache */ \
	X(STRATA_PY_NO_FRAMES, "no_frames")		  /* Python thread with no frame */     \
	X(STRATA_PY_NEW_CODE, "new_code_sent") /* stacks sent for early symbolization */        \
	X(STRATA_PY_NEW_CODE_SKIPPED, "new_code_skipped") /* ... not sent: event ring busy */

/* The GPU uprobes (bpf/gpu.bpf.c, map "gpu_counters"). */
#define STRATA_GPU_COUNTERS(X)                                                                     \
	X(GPU_CNT_HITS, "hits")			      /* probe entries of targets */               \
	X(GPU_CNT_FILTERED, "filtered")		      /* probe entries of other processes */       \
	X(GPU_CNT_NESTED, "nested")		      /* calls made inside another probed call */  \
	X(GPU_CNT_STATE_FULL, "inflight_full")	      /* in-flight call map full: call lost */     \
	X(GPU_CNT_ORPHAN_RET, "orphan_returns")	      /* return without a matching entry */        \
	X(GPU_CNT_SITES_FULL, "sites_full")	      /* site map full: call not aggregated */     \
	X(GPU_CNT_STACKS_FULL, "stacks_full")	      /* stack map full: stack recorded lost */    \
	X(GPU_CNT_STACK_ERR, "stack_errors")	      /* stack walk failed */                      \
	X(GPU_CNT_ALLOCS_FULL, "allocs_full")	      /* allocation map full: not tracked */       \
	X(GPU_CNT_FREE_UNKNOWN, "free_unknown")	      /* free of a pointer not tracked */          \
	X(GPU_CNT_EVENTS_LOST, "events_lost")	      /* ring buffer full: event dropped */        \
	X(GPU_CNT_COMMS_FULL, "comms_full")	      /* communicator map full */                  \
	X(GPU_CNT_COMM_UNKNOWN, "comm_unknown")	      /* collective on an unknown communicator */  \
	X(GPU_CNT_TALLY_FULL, "tally_full")	      /* tally / error / stats map full */         \
	X(GPU_CNT_FUNCS_FULL, "funcs_full")	      /* kernel-name map full */                   \
	X(GPU_CNT_ADMITTED, "admitted")		      /* processes made targets by a first call */ \
	X(GPU_CNT_TARGETS_FULL, "targets_full")	      /* target map full: process not admitted */  \
	X(GPU_CNT_STACK_REUSED, "stacks_reused")      /* same stack slots as last call: no walk */ \
	X(GPU_CNT_FW_EVENTS, "fw_events")	      /* framework (USDT) malloc/free events */    \
	X(GPU_CNT_FW_ALLOCS_FULL, "fw_allocs_full")   /* framework allocation map full */          \
	X(GPU_CNT_FW_FREE_UNKNOWN, "fw_free_unknown") /* framework free of an untracked ptr */     \
	X(GPU_CNT_USDT_ARG_ERR, "usdt_arg_errors")    /* a USDT argument could not be read */      \
	X(GPU_CNT_STALE, "stale_calls") /* in-flight call whose return was missed: replaced */

/* The scheduler layer (bpf/sched.bpf.c, map "sched_counters"). */
#define STRATA_SCHED_COUNTERS(X)                                                                   \
	X(STRATA_SCHED_SWITCHES, "switches")	     /* switches of targets / on their CPUs */     \
	X(STRATA_SCHED_THREADS_FULL, "threads_full") /* per-thread map full: time lost */          \
	X(STRATA_SCHED_OFFCPU_FULL, "offcpu_full")   /* off-CPU map full: stack lost, time kept */ \
	X(STRATA_SCHED_FOREIGN_FULL, "foreign_full") /* foreign-process map full */                \
	X(STRATA_SCHED_STACK_LOST, "stack_lost")     /* bpf_get_stack failed, or no storage */     \
	X(STRATA_SCHED_STORAGE_FAILED, "storage_failed") /* task storage not created */            \
	X(STRATA_SCHED_MISSED_WAKEUP, "missed_wakeup")	 /* switched in while marked blocked */    \
	X(STRATA_SCHED_EXIT_UNSEEN, "exit_unseen") /* exiting thread had no entry: its end lost */ \
	X(STRATA_SCHED_STACKS_FULL, "stacks_full") /* a generation's stack map full: stack lost */

/* ---- the enums ---------------------------------------------------------- */

#define STRATA_ENUM_ENTRY(id, ...) id,

enum strata_time_cat { STRATA_TIME_CATS(STRATA_ENUM_ENTRY) STRATA_TIME_MAX };
enum strata_offcpu_reason { STRATA_OFFCPU_REASONS(STRATA_ENUM_ENTRY) STRATA_OFF_MAX };
enum strata_counter { STRATA_SAMPLER_COUNTERS(STRATA_ENUM_ENTRY) STRATA_CNT_MAX };
enum unwind_err { STRATA_UNWIND_COUNTERS(STRATA_ENUM_ENTRY) UNWIND_ERR_MAX };
enum strata_py_err { STRATA_PY_COUNTERS(STRATA_ENUM_ENTRY) STRATA_PY_ERR_MAX };
enum gpu_counter { STRATA_GPU_COUNTERS(STRATA_ENUM_ENTRY) GPU_CNT_MAX };
enum strata_sched_counter { STRATA_SCHED_COUNTERS(STRATA_ENUM_ENTRY) STRATA_SCHED_CNT_MAX };

/* The precedence rank of a time category (higher wins; other is 0). */
static inline int strata_time_rank(unsigned int cat)
{
#define STRATA_TIME_RANK_CASE(id, wire, name, rank) \
	case id:                                    \
		return rank;
	switch (cat) {
		STRATA_TIME_CATS(STRATA_TIME_RANK_CASE)
	default:
		return 0;
	}
#undef STRATA_TIME_RANK_CASE
}

#endif /* STRATA_LIB_ENUMS_H */
