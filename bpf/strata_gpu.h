/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The GPU layer: CUDA runtime/driver and NCCL uprobes.
 * Part of the BPF ABI (bpf/strata.h): plain __u32/__u64 types and no libc
 * includes, so it compiles after either vmlinux.h or <linux/types.h>.
 * Every struct that crosses the boundary has its size asserted.
 */
#ifndef STRATA_BPF_STRATA_GPU_H
#define STRATA_BPF_STRATA_GPU_H

#include "lib/enums.h"

/*
 * One id per probed API; the _ptsz and versioned variants of a function
 * share its id (agent/gpu/gpu_names.c spells them).  The order is the tally's
 * order and gpu_api_kind() below depends on it.
 */
#define STRATA_GPU_APIS(X)          \
	X(cudaLaunchKernel)         \
	X(cudaLaunchKernelExC)      \
	X(cuLaunchKernel)           \
	X(cuLaunchKernelEx)         \
	X(cudaGraphLaunch)          \
	X(cudaMalloc)               \
	X(cudaMallocAsync)          \
	X(cudaMallocManaged)        \
	X(cudaMallocHost)           \
	X(cuMemAlloc)               \
	X(cuMemAllocAsync)          \
	X(cuMemAllocManaged)        \
	X(cuMemAllocHost)           \
	X(cudaFree)                 \
	X(cudaFreeAsync)            \
	X(cudaFreeHost)             \
	X(cuMemFree)                \
	X(cuMemFreeAsync)           \
	X(cuMemFreeHost)            \
	X(cudaMemcpy)               \
	X(cudaMemcpyAsync)          \
	X(cudaStreamSynchronize)    \
	X(cudaDeviceSynchronize)    \
	X(cudaEventSynchronize)     \
	X(cuModuleGetFunction)      \
	X(cuLibraryGetKernel)       \
	X(ncclCommInitRank)         \
	X(ncclCommInitRankConfig)   \
	X(ncclCommInitRankScalable) \
	X(ncclAllReduce)            \
	X(ncclBroadcast)            \
	X(ncclReduce)               \
	X(ncclAllGather)            \
	X(ncclReduceScatter)        \
	X(ncclSend)                 \
	X(ncclRecv)                 \
	X(ncclGroupStart)           \
	X(ncclGroupEnd)

#define STRATA_GPU_API_ENTRY(name) GPU_API_##name,
enum gpu_api { STRATA_GPU_APIS(STRATA_GPU_API_ENTRY) GPU_API_MAX };
#undef STRATA_GPU_API_ENTRY

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
	if (api <= GPU_API_ncclCommInitRankScalable)
		return GPU_KIND_NCCL_INIT;
	if (api <= GPU_API_ncclReduceScatter)
		return GPU_KIND_COLL;
	if (api <= GPU_API_ncclRecv)
		return GPU_KIND_P2P;
	return GPU_KIND_GROUP;
}

/*
 * The library an API belongs to, lowest first: the driver (cu*), the
 * runtime (cuda*), NCCL.  A library calls only into lower ones (NCCL into
 * the runtime and driver, the runtime into the driver; never upwards), so a
 * call can run inside a call of a higher layer only: an in-flight call of the
 * same or a lower layer is one whose return was never seen.
 */
enum gpu_layer { GPU_LAYER_DRIVER, GPU_LAYER_RUNTIME, GPU_LAYER_NCCL };

static inline __u32 gpu_api_layer(__u32 api)
{
	switch (api) {
	case GPU_API_cuLaunchKernel:
	case GPU_API_cuLaunchKernelEx:
	case GPU_API_cuMemAlloc:
	case GPU_API_cuMemAllocAsync:
	case GPU_API_cuMemAllocManaged:
	case GPU_API_cuMemAllocHost:
	case GPU_API_cuMemFree:
	case GPU_API_cuMemFreeAsync:
	case GPU_API_cuMemFreeHost:
	case GPU_API_cuModuleGetFunction:
	case GPU_API_cuLibraryGetKernel:
		return GPU_LAYER_DRIVER;
	default:
		return gpu_api_kind(api) >= GPU_KIND_NCCL_INIT ? GPU_LAYER_NCCL : GPU_LAYER_RUNTIME;
	}
}

/*
 * The probes the duty cycle may detach (agent/gpu/gpu_budget.h).  Frees are
 * never shed (a missed free must not become a leak), nor NCCL calls
 * (sequence numbers must stay exact; they are low-rate).
 */
static inline __u32 gpu_api_sheddable(__u32 api)
{
	__u32 k = gpu_api_kind(api);

	return api < GPU_API_MAX &&
	       (k == GPU_KIND_LAUNCH || k == GPU_KIND_ALLOC || k == GPU_KIND_COPY ||
		k == GPU_KIND_SYNC || k == GPU_KIND_LOOKUP);
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

/*
 * The id_hash of a communicator whose rank and size the agent read from the
 * process (agent/gpu/gpu_nccl_recover.c): the tag in the top 16 bits, the
 * rest a hash of (agent run, tgid, ncclComm_t), so it names one process's
 * communicator only; the server finds the cross-rank identity
 * (docs/diagnosis.md).  An FNV hash of a unique id carries the tag once in
 * 65536: that communicator is then treated as recovered (aligned by the
 * server, not saved for a restart), which is slower, never wrong.
 */
#define GPU_COMM_RECOVERED_TAG 0x5ec0ULL
#define GPU_COMM_IS_RECOVERED(h) (((h) >> 48) == GPU_COMM_RECOVERED_TAG)

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
	 * NCCL: a0 comm id hash, a1 sequence number, a2 communicator
	 *       (ncclComm_t: with the tgid, the gpu_comms key), a3 bytes,
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

/* Where an NCCL call keeps its arguments: the x86-64 argument slots a[]
 * of struct gpu_call (BPF reads them at exit; the agent reads a call in
 * flight from gpu_inflight).  op 0xffff and peer 0xffffffff where the call
 * has none.  Returns 0 for a call that is not a collective or send/recv. */
struct gpu_nccl_args {
	__u64 comm, count, dtype, op, peer;
};

static inline int gpu_nccl_args_of(__u32 api, const __u64 *a, struct gpu_nccl_args *o)
{
	o->op = 0xffff;
	o->peer = 0xffffffff;
	o->count = a[2];
	o->dtype = a[3];
	switch (api) {
	case GPU_API_ncclAllReduce: /* send, recv, count, dtype, op, comm, stream */
	case GPU_API_ncclReduceScatter:
		o->op = a[4];
		o->comm = a[5];
		return 1;
	case GPU_API_ncclBroadcast: /* send, recv, count, dtype, root, comm, stream */
		o->peer = a[4];
		o->comm = a[5];
		return 1;
	case GPU_API_ncclReduce: /* send, recv, count, dtype, op, root, comm, stream */
		o->op = a[4];
		o->peer = a[5];
		o->comm = a[6];
		return 1;
	case GPU_API_ncclAllGather: /* send, recv, sendcount, dtype, comm, stream */
		o->comm = a[4];
		return 1;
	case GPU_API_ncclSend: /* buff, count, dtype, peer, comm, stream */
	case GPU_API_ncclRecv:
		o->count = a[1];
		o->dtype = a[2];
		o->peer = a[3];
		o->comm = a[4];
		return 1;
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

/*
 * USDT probes (SystemTap SDT notes; agent/proc/usdt.c reads them): where
 * one argument is at the probe, as the note's "SIZE@OPERAND" spec says.
 */
#define USDT_MAX_ARGS 12 /* <sys/sdt.h>'s limit */

enum usdt_arg_kind {
	USDT_ARG_CONST = 1, /* $imm: val */
	USDT_ARG_REG = 2,   /* %reg: the register */
	USDT_ARG_DEREF = 3, /* val(%reg): user memory at the register + val */
};

struct usdt_arg_spec {
	__s64 val;	/* CONST: the value; DEREF: the displacement */
	__u16 reg_off;	/* REG, DEREF: the register's offset in struct pt_regs */
	__u8 kind;	/* enum usdt_arg_kind */
	__u8 size;	/* 1, 2, 4 or 8 bytes */
	__u8 is_signed; /* sign-extended from size */
	__u8 pad[3];
};

/* A USDT probe site the GPU layer attached (gpu_usdt_specs[attach
 * cookie]): what it means and where its arguments are. */
enum gpu_usdt_event {
	/* PyTorch's CUDA caching allocator (provider "pytorch"): a tensor's
	 * block handed out, malloc(ptr, device, size, stream), and given back,
	 * free(ptr); most never reach cudaMalloc/cudaFree. */
	GPU_USDT_FW_MALLOC = 1,
	GPU_USDT_FW_FREE = 2,
};

#define GPU_USDT_ARGS 4 /* the most any GPU_USDT_* event reads */

struct gpu_usdt_spec {
	__u32 event; /* enum gpu_usdt_event */
	__u32 nargs;
	struct usdt_arg_spec args[GPU_USDT_ARGS];
};

/* The GPU uprobes' per-CPU counters (map "gpu_counters"): enum
 * gpu_counter, listed in lib/enums.h (STRATA_GPU_COUNTERS). */

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
_Static_assert(sizeof(struct usdt_arg_spec) == 16, "usdt_arg_spec layout");
_Static_assert(sizeof(struct gpu_usdt_spec) == 8 + 16 * GPU_USDT_ARGS, "gpu_usdt_spec layout");
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
	__u64 id_hash;	  /* ncclCommInitRank*: hash of the unique id */
	__u32 active;	  /* a call is in flight (the entry outlives calls) */
	__u32 shed_epoch; /* gpu_shed_epoch at entry (sheddable APIs) */
};
_Static_assert(sizeof(struct gpu_call) == 32 + 72 + 8 + 8, "gpu_call layout");
/* A GPU call site with Python frames: its id (gpu_stack_pairs' key, used
 * wherever a stack id goes) names the native stack and the Python one. */
struct gpu_stack_pair {
	__u64 native; /* gpu_stacks id */
	__u64 py;     /* gpu_py_stacks id */
};
_Static_assert(sizeof(struct gpu_stack_pair) == 16, "gpu_stack_pair layout");

#endif /* STRATA_BPF_STRATA_GPU_H */
