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
	__u64 py_stack;	  /* hash of the Python frames (py_stacks), or
			   * STRATA_STACK_NONE (issue 4) */
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
	PROC_EV_PY_STACK = 6,	 /* a Python stack with code objects not seen
				  * lately (start = its id in py_stacks of
				  * generation flags): symbolize them now,
				  * before they are freed (module bodies) */
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
_Static_assert(sizeof(struct strata_stack_key) == 40, "stack_key layout");
_Static_assert(sizeof(struct strata_stack_count) == 24, "stack_count layout");
_Static_assert(sizeof(struct strata_stack) == 8 + 8 * STRATA_MAX_STACK_DEPTH, "stack_trace layout");
_Static_assert(sizeof(struct strata_inflight) == 16, "inflight layout");
_Static_assert(sizeof(struct strata_proc_event) == 56 + 40 + STRATA_NAME_LEN, "proc_event layout");

/* --- Python (issue 4): CPython 3.10-3.13 frames ------------------------- */

/*
 * Per address space (py_procs map, keyed by mm_id): where the interpreter's
 * state is and the struct offsets of its version (unwind/python_offsets.c,
 * each from the CPython source it cites; 3.13 from _Py_DebugOffsets).
 */
#define STRATA_PY_MAX_DEPTH 96	 /* Python frames per sample */
#define STRATA_PY_MAX_THREADS 64 /* thread states searched per lookup */
#define STRATA_PY_NO_FIELD 0xffff
/* The walker reads a code object's first STRATA_PY_CODE_WINDOW bytes and
 * a frame's first fr_window bytes (at most STRATA_PY_FRAME_WINDOW_MAX):
 * every offset it uses must lie inside. */
#define STRATA_PY_CODE_WINDOW 136
#define STRATA_PY_FRAME_WINDOW_MAX 128

enum strata_py_frames {
	STRATA_PY_FRAMES_310 = 1, /* PyFrameObject chain: one eval call per frame */
	STRATA_PY_FRAMES_311 = 2, /* _PyInterpreterFrame; is_entry ends an eval call */
	STRATA_PY_FRAMES_312 = 3, /* _PyInterpreterFrame; FRAME_OWNED_BY_CSTACK shims */
};

enum strata_py_thread_match {
	STRATA_PY_MATCH_TID = 1,     /* tstate->native_thread_id == kernel tid (3.11+) */
	STRATA_PY_MATCH_PTHREAD = 2, /* tstate->thread_id == pthread_self() == fsbase */
};

struct strata_py_proc {
	__u64 runtime;	       /* address of _PyRuntime */
	__u16 version;	       /* 0x030b for 3.11 */
	__u8 frames;	       /* enum strata_py_frames */
	__u8 match;	       /* enum strata_py_thread_match */
	__u16 rt_interp_head;  /* _PyRuntimeState.interpreters.head */
	__u16 is_threads_head; /* PyInterpreterState.threads.head (3.10: tstate_head) */
	__u16 ts_next;	       /* PyThreadState.next */
	__u16 ts_thread;       /* native_thread_id or thread_id (per match) */
	__u16 ts_frame;	       /* 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame */
	__u16 cframe_current;  /* _PyCFrame.current_frame, or STRATA_PY_NO_FIELD */
	__u16 fr_previous;     /* f_back / previous */
	__u16 fr_code;	       /* f_code / f_executable */
	__u16 fr_instr;	       /* 3.10 f_lasti (int), else prev_instr / instr_ptr */
	__u16 fr_entry;	       /* 3.11 is_entry, 3.12+ owner; STRATA_PY_NO_FIELD */
	__u16 co_firstlineno;
	__u16 co_name;		/* co_qualname (3.11+) or co_name */
	__u16 co_code_adaptive; /* first instruction (3.11+) */
	__u16 fr_window;	/* bytes read per frame: covers the fields above,
				 * stays inside the smallest frame */
	__u16 co_filename;	/* part of the identity (strata_py_ident) */
	__u16 pad;
};

#define STRATA_PY_FRAME_ENTRY 1	    /* last frame of one native eval call */
#define STRATA_PY_FRAME_TRUNCATED 2 /* stack: depth limit reached */

/* One Python frame: code object, its identity check, instruction index. */
struct strata_py_frame {
	__u64 code;  /* PyCodeObject address */
	__u32 ident; /* strata_py_ident(co_firstlineno, name, filename pointers) */
	__s32 lasti; /* instruction index in code units (-1: not started) */
	__u32 flags; /* STRATA_PY_FRAME_* */
	__u32 pad;
};

/* Leaf first, like the native stacks. */
struct strata_py_stack {
	__u32 len;
	__u32 flags; /* STRATA_PY_FRAME_TRUNCATED */
	struct strata_py_frame frames[STRATA_PY_MAX_DEPTH];
};

/* Why a Python walk failed or stopped; counted per CPU (py_errors). */
enum strata_py_err {
	STRATA_PY_WALKED = 0,	    /* samples with a Python stack */
	STRATA_PY_NO_THREAD,	    /* thread state not found (not a Python thread) */
	STRATA_PY_ERR_READ,	    /* interpreter state or frame unreadable */
	STRATA_PY_ERR_DEPTH,	    /* STRATA_PY_MAX_DEPTH reached */
	STRATA_PY_ERR_STORE,	    /* py stack map full */
	STRATA_PY_TSTATE_CACHED,    /* thread state found in the cache */
	STRATA_PY_NO_FRAMES,	    /* Python thread with no frame (idle / C only) */
	STRATA_PY_NEW_CODE,	    /* stacks sent for early symbolization */
	STRATA_PY_NEW_CODE_SKIPPED, /* ... not sent: event ring buffer busy */
	STRATA_PY_ERR_MAX,
};

/* The identity recorded with a code object address: a freed and reused
 * address gives another (first line, name, file) with high probability.
 * The file matters: every module body is (1, "<module>"), the name
 * interned, so a module's code freed after import and its address reused
 * by another module's would pass on name and line alone. */
static inline __u32 strata_py_ident(__u32 firstlineno, __u64 name_ptr, __u64 file_ptr)
{
	__u64 h = (name_ptr ^ ((__u64)firstlineno << 40)) * 0x9e3779b97f4a7c15ULL;

	h = (h ^ (h >> 29) ^ file_ptr) * 0xff51afd7ed558ccdULL;
	return (__u32)(h >> 32);
}

_Static_assert(sizeof(struct strata_py_proc) == 48, "py_proc layout");
_Static_assert(sizeof(struct strata_py_frame) == 24, "py_frame layout");
_Static_assert(sizeof(struct strata_py_stack) == 8 + 24 * STRATA_PY_MAX_DEPTH, "py_stack layout");

/* ==== GPU layer (CUDA runtime/driver and NCCL uprobes) =========== * Owned by the GPU layer
 * (bpf/cuda.bpf.c, bpf/nccl.bpf.c, agent/gpu_*). One id per probed API; the _ptsz and versioned
 * variants of a function share its id.  The order is the tally's order.
 */
enum gpu_api {
	GPU_API_cudaLaunchKernel,
	GPU_API_cudaLaunchKernelExC,
	GPU_API_cuLaunchKernel,
	GPU_API_cuLaunchKernelEx,
	GPU_API_cudaGraphLaunch,
	GPU_API_cudaMalloc,
	GPU_API_cudaMallocAsync,
	GPU_API_cudaMallocManaged,
	GPU_API_cudaMallocHost,
	GPU_API_cuMemAlloc,
	GPU_API_cuMemAllocAsync,
	GPU_API_cuMemAllocManaged,
	GPU_API_cuMemAllocHost,
	GPU_API_cudaFree,
	GPU_API_cudaFreeAsync,
	GPU_API_cudaFreeHost,
	GPU_API_cuMemFree,
	GPU_API_cuMemFreeAsync,
	GPU_API_cuMemFreeHost,
	GPU_API_cudaMemcpy,
	GPU_API_cudaMemcpyAsync,
	GPU_API_cudaStreamSynchronize,
	GPU_API_cudaDeviceSynchronize,
	GPU_API_cudaEventSynchronize,
	GPU_API_cuModuleGetFunction,
	GPU_API_cuLibraryGetKernel,
	GPU_API_ncclCommInitRank,
	GPU_API_ncclCommInitRankConfig,
	GPU_API_ncclAllReduce,
	GPU_API_ncclBroadcast,
	GPU_API_ncclReduce,
	GPU_API_ncclAllGather,
	GPU_API_ncclReduceScatter,
	GPU_API_ncclSend,
	GPU_API_ncclRecv,
	GPU_API_ncclGroupStart,
	GPU_API_ncclGroupEnd,
	GPU_API_MAX,
};

/* What a call is, for aggregation and the trace (enum gpu_api -> kind). */
enum gpu_kind {
	GPU_KIND_LAUNCH = 1,
	GPU_KIND_ALLOC = 2,
	GPU_KIND_FREE = 3,
	GPU_KIND_COPY = 4,
	GPU_KIND_SYNC = 5,
	GPU_KIND_LOOKUP = 6, /* cuModuleGetFunction & co: names handles */
	GPU_KIND_NCCL_INIT = 7,
	GPU_KIND_COLL = 8, /* collective */
	GPU_KIND_P2P = 9,  /* ncclSend / ncclRecv */
	GPU_KIND_GROUP = 10,
};

/* The kind of each API: one switch used by BPF and user space alike. */
static inline __u32 gpu_api_kind(__u32 api)
{
	if (api <= GPU_API_cudaGraphLaunch)
		return GPU_KIND_LAUNCH;
	if (api <= GPU_API_cuMemAllocHost)
		return GPU_KIND_ALLOC;
	if (api <= GPU_API_cuMemFreeHost)
		return GPU_KIND_FREE;
	if (api <= GPU_API_cudaMemcpyAsync)
		return GPU_KIND_COPY;
	if (api <= GPU_API_cudaEventSynchronize)
		return GPU_KIND_SYNC;
	if (api <= GPU_API_cuLibraryGetKernel)
		return GPU_KIND_LOOKUP;
	if (api <= GPU_API_ncclCommInitRankConfig)
		return GPU_KIND_NCCL_INIT;
	if (api <= GPU_API_ncclReduceScatter)
		return GPU_KIND_COLL;
	if (api <= GPU_API_ncclRecv)
		return GPU_KIND_P2P;
	return GPU_KIND_GROUP;
}

/* Per call site: (process, launch/alloc/copy/sync stack, API, object) ->
 * count, time in call, bytes.  object: kernel (host stub address, CUfunction
 * or graph exec handle) for launches, direction for copies, 0 otherwise. */
struct gpu_site_key {
	__u32 tgid;
	__u32 api; /* enum gpu_api */
	__u64 stack_id;
	__u64 object;
};

struct gpu_site_val {
	__u64 count;
	__u64 time_ns; /* CPU time inside the call (entry to return) */
	__u64 bytes;   /* copies: bytes; allocations: bytes requested */
	__u64 errors;  /* non-success returns */
};

/* API tally (per process, per API). */
struct gpu_tally_key {
	__u32 tgid;
	__u32 api;
};

struct gpu_tally_val {
	__u64 calls;
	__u64 total_ns;
	__u64 min_ns;
	__u64 max_ns;
};

/* Non-success return codes (per process, API, code). */
struct gpu_err_key {
	__u32 tgid;
	__u32 api;
	__s64 code;
};

/* Outstanding allocations: added on a successful allocation, removed by a
 * successful free of the same pointer in the same process. */
struct gpu_alloc_key {
	__u32 tgid;
	__u32 pad;
	__u64 ptr;
};

struct gpu_alloc_val {
	__u64 size;
	__u64 ts_ns; /* bpf_ktime_get_ns at the allocation */
	__u64 stack_id;
	__u32 api;
	__u32 tid;
};

/* Driver-API kernel handles (CUfunction / CUkernel) -> kernel name. */
#define GPU_KERNEL_NAME_LEN 112
struct gpu_func_key {
	__u32 tgid;
	__u32 pad;
	__u64 handle;
};

struct gpu_func_name {
	char name[GPU_KERNEL_NAME_LEN];
};

/* An NCCL communicator as one process sees it (key: tgid, ncclComm_t). */
struct gpu_comm_key {
	__u32 tgid;
	__u32 pad;
	__u64 comm;
};

struct gpu_comm_val {
	__u64 id_hash; /* FNV-1a of the 128-byte ncclUniqueId: same on every rank */
	__u32 rank;
	__u32 nranks;
	__u64 seq;	    /* collectives issued so far on this communicator */
	__u64 p2p_seq;	    /* sends/receives issued so far */
	__u64 last_exit_ns; /* end of the previous collective (gaps) */
};

/* Per-collective statistics (per process, communicator, API). */
struct gpu_coll_key {
	__u32 tgid;
	__u32 api;
	__u64 id_hash;
};

struct gpu_coll_val {
	__u64 count;
	__u64 time_ns;
	__u64 bytes;
	__u64 gap_ns;	  /* sum of (entry - previous collective's exit) */
	__u64 gap_max_ns; /* longest such gap */
	__u64 gaps;	  /* number of gaps summed (count - 1 per comm) */
};

enum gpu_event_type {
	GPU_EV_CALL = 1, /* one call (NCCL always; CUDA when tracing) */
};

/* One call, streamed through the gpu_events ring buffer.  Timestamps are
 * bpf_ktime_get_ns; user space converts them to CLOCK_REALTIME. */
struct gpu_event {
	__u32 type; /* enum gpu_event_type */
	__u32 api;  /* enum gpu_api */
	__u32 tgid;
	__u32 tid;
	__s64 ret; /* return code (cudaError_t, CUresult, ncclResult_t) */
	__u64 start_ns, end_ns;
	__u64 stack_id;
	/* launches: a0 kernel, a1 grid x|y<<32, a2 grid z|block x<<32,
	 *           a3 block y|z<<32, a4 shared mem, a5 stream
	 * allocs/frees: a0 ptr, a1 size; copies: a1 bytes, a2 kind, a5 stream
	 * syncs: a0 stream/event
	 * NCCL: a0 comm id hash, a1 sequence number, a2 count, a3 bytes,
	 *       a4 dtype | op << 16 | peer or root << 32 (op 0xffff and
	 *       peer/root 0xffffffff where the call has none),
	 *       a5 rank | nranks << 32 */
	__u64 a[6];
};

/* Communicator identity: FNV-1a over the 16 little-endian 64-bit words of
 * the 128-byte ncclUniqueId (the same on every rank of a communicator). */
static inline __u64 gpu_unique_id_hash(const __u64 *w)
{
	__u64 h = 0xcbf29ce484222325ULL;

	for (int i = 0; i < 16; i++)
		h = (h ^ w[i]) * 0x100000001b3ULL;
	return h;
}

/* Bytes per element of an ncclDataType_t (0: unknown type). */
static inline __u32 gpu_nccl_dtype_size(__u64 dtype)
{
	switch (dtype) {
	case 0:	 /* ncclInt8 */
	case 1:	 /* ncclUint8 */
	case 10: /* ncclFloat8e4m3 */
	case 11: /* ncclFloat8e5m2 */
		return 1;
	case 6: /* ncclFloat16 */
	case 9: /* ncclBfloat16 */
		return 2;
	case 2: /* ncclInt32 */
	case 3: /* ncclUint32 */
	case 7: /* ncclFloat32 */
		return 4;
	case 4: /* ncclInt64 */
	case 5: /* ncclUint64 */
	case 8: /* ncclFloat64 */
		return 8;
	default:
		return 0;
	}
}

/* Per-process GPU target state (gpu_targets map value). */
struct gpu_target {
	__u64 mm_id; /* address space (as the sampler's mm_id), set by BPF on
		      * the process's first call: user space resolves stacks
		      * through the process tracker with it */
};

enum gpu_counter {
	GPU_CNT_HITS,	      /* probe entries of targets */
	GPU_CNT_FILTERED,     /* probe entries of other processes */
	GPU_CNT_NESTED,	      /* calls made inside another probed call */
	GPU_CNT_STATE_FULL,   /* in-flight call map full: call lost */
	GPU_CNT_ORPHAN_RET,   /* return without a matching entry */
	GPU_CNT_SITES_FULL,   /* site map full: call not aggregated */
	GPU_CNT_STACKS_FULL,  /* stack map full: stack recorded as lost */
	GPU_CNT_STACK_ERR,    /* bpf_get_stack failed */
	GPU_CNT_ALLOCS_FULL,  /* allocation map full: allocation not tracked */
	GPU_CNT_FREE_UNKNOWN, /* free of a pointer not tracked */
	GPU_CNT_EVENTS_LOST,  /* ring buffer full: per-call event dropped */
	GPU_CNT_COMMS_FULL,   /* communicator map full */
	GPU_CNT_COMM_UNKNOWN, /* collective on a communicator never initialised */
	GPU_CNT_TALLY_FULL,   /* tally / error / stats map full */
	GPU_CNT_FUNCS_FULL,   /* kernel-name map full */
	GPU_CNT_ADMITTED,     /* processes made targets by their first call */
	GPU_CNT_TARGETS_FULL, /* target map full: process not admitted */
	GPU_CNT_STACK_REUSED, /* same call site as the thread's last call: no walk */
	GPU_CNT_MAX,
};

_Static_assert(sizeof(struct gpu_site_key) == 24, "gpu_site_key layout");
_Static_assert(sizeof(struct gpu_site_val) == 32, "gpu_site_val layout");
_Static_assert(sizeof(struct gpu_tally_key) == 8, "gpu_tally_key layout");
_Static_assert(sizeof(struct gpu_tally_val) == 32, "gpu_tally_val layout");
_Static_assert(sizeof(struct gpu_err_key) == 16, "gpu_err_key layout");
_Static_assert(sizeof(struct gpu_alloc_key) == 16, "gpu_alloc_key layout");
_Static_assert(sizeof(struct gpu_alloc_val) == 32, "gpu_alloc_val layout");
_Static_assert(sizeof(struct gpu_func_key) == 16, "gpu_func_key layout");
_Static_assert(sizeof(struct gpu_func_name) == GPU_KERNEL_NAME_LEN, "gpu_func_name layout");
_Static_assert(sizeof(struct gpu_comm_key) == 16, "gpu_comm_key layout");
_Static_assert(sizeof(struct gpu_comm_val) == 40, "gpu_comm_val layout");
_Static_assert(sizeof(struct gpu_coll_key) == 16, "gpu_coll_key layout");
_Static_assert(sizeof(struct gpu_coll_val) == 48, "gpu_coll_val layout");
_Static_assert(sizeof(struct gpu_event) == 40 + 8 + 48, "gpu_event layout");
_Static_assert(sizeof(struct gpu_target) == 8, "gpu_target layout");
/* A thread's API call between its entry and its return (gpu_inflight;
 * user space reads tgid to sweep a dead process's threads). */
struct gpu_call {
	__u64 start_ns;
	__u64 sp; /* user stack pointer at entry: tells a nested call (deeper)
		   * and a stale entry (a detached uretprobe never fired) apart */
	__u64 stack_id;
	__u32 api;
	__u32 tgid;
	/* rdi, rsi, rdx, rcx, r8, r9, then the first three stack arguments;
	 * launch-ex entries replace them with the config's fields */
	__u64 a[9];
	__u64 id_hash; /* ncclCommInitRank*: hash of the unique id */
	/* The thread's last call site (see gpu_site_stack()): its stack
	 * pointer, return address and caller's return address, and the stack
	 * walked there. */
	__u64 site_sp, site_ret, site_ret2, site_stack;
	__u32 active; /* a call is in flight (the entry outlives calls) */
	__u32 pad;
};
_Static_assert(sizeof(struct gpu_call) == 32 + 72 + 8 + 32 + 8, "gpu_call layout");
/* A GPU call site with Python frames: its id (gpu_stack_pairs' key, used
 * wherever a stack id goes) names the native stack and the Python one. */
struct gpu_stack_pair {
	__u64 native; /* gpu_stacks id */
	__u64 py;     /* gpu_py_stacks id */
};
_Static_assert(sizeof(struct gpu_stack_pair) == 16, "gpu_stack_pair layout");
/* ==== end GPU layer ===================================================== */

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
	__u64 exit_ns;	/* when the thread exited (0: alive); user space
			 * retires the entry a grace period later */
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
	STRATA_SCHED_EXIT_UNSEEN,    /* an exiting thread had no entry: its
				      * last moments are not counted */
	STRATA_SCHED_CNT_MAX,
};

_Static_assert(sizeof(struct strata_api_layer_state) == 24 + 8 * STRATA_LAYER_MAX,
	       "api_layer_state layout");
_Static_assert(sizeof(struct strata_sched_key) == 8, "sched_key layout");
_Static_assert(sizeof(struct strata_sched_thread) ==
		       8 * (2 + STRATA_OFF_MAX + STRATA_TIME_MAX + 3) + STRATA_COMM_LEN,
	       "sched_thread layout");
_Static_assert(sizeof(struct strata_offcpu_key) == 24, "offcpu_key layout");
_Static_assert(sizeof(struct strata_offcpu_val) == 16, "offcpu_val layout");
_Static_assert(sizeof(struct strata_foreign_key) == 8, "foreign_key layout");
_Static_assert(sizeof(struct strata_foreign_val) == 24, "foreign_val layout");
_Static_assert(sizeof(struct strata_irq_time) ==
		       8 * (2 * STRATA_SOFTIRQS + STRATA_HARDIRQS + 1) + 8,
	       "irq_time layout");

#endif /* STRATA_BPF_STRATA_H */
