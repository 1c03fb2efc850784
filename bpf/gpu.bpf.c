// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * GPU layer: uprobes on the CUDA runtime, the CUDA driver and NCCL.
 *
 * Every probed function gets the same two programs: gpu_enter (uprobe)
 * saves the arguments of the call, and gpu_exit (uretprobe) finishes it by
 * kind (bpf/gpu_cuda.bpf.h, bpf/gpu_nccl.bpf.h).  Which API a hit belongs to
 * comes from the attach cookie (enum gpu_api), so one program pair serves
 * ~60 symbols and the attach code never needs one program per function.
 *
 * Uprobes are attached once per file, for every process mapping it; the
 * gpu_targets map says which processes are traced (everyone else returns
 * after one lookup).  One object holds CUDA and NCCL so both share the
 * target filter, the in-flight call map, the stacks and the ring buffer.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/strata.h"
#include "bpf/task_id.bpf.h"
#include "bpf/exit_vmas.bpf.h"
#include "bpf/api_layer.bpf.h"

#define EEXIST 17 /* errno.h is not available to BPF programs */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Settings written by user space between open and load. */
const volatile bool trace_cuda = false; /* per-call CUDA events (--trace) */
/* allocation and free calls as events (the agent's ring of recent ones,
 * sent when a process runs out of device memory: docs/diagnosis.md) */
const volatile bool alloc_events = false;
const volatile bool want_stacks = true;
const volatile bool want_python = false; /* Python frames in call-site stacks */
const volatile __u32 page_shift = 12;	 /* set from getpagesize() */
/* Mark the scheduler layer's per-thread API layer (api_layers is then
 * sched's map, shared by user space with bpf_map__reuse_fd). */
const volatile bool mark_layers = false;
/* Admission of the session's processes at their first call (admit()). */
const volatile bool admit_in_bpf = false;
const volatile __u32 filter_mode = STRATA_FILTER_TGIDS; /* enum strata_filter */
/* Written by user space after each detach of the sheddable probes (the duty
 * cycle): a sheddable call entered before it may never see its return. */
volatile __u32 gpu_shed_epoch = 0;
/* All zero and never written: a thread's first gpu_inflight value is
 * copied from here, not built on the stack (120 bytes that the combined
 * stack limit of kernels before 6.13 cannot spare: check_bpf_stack.py). */
static struct gpu_call gpu_call_zero;

#include "bpf/gpu_maps.bpf.h"
#include "bpf/python_capture.bpf.h" /* py_procs: the sampler's, shared by fd */
#include "bpf/gpu_stack.bpf.h"
#include "bpf/gpu_call.bpf.h"
#include "bpf/gpu_cuda.bpf.h"
#include "bpf/gpu_nccl.bpf.h"
#include "bpf/gpu_usdt.bpf.h"

/* The API layer a call's time belongs to (docs/diagnosis.md). */
static __always_inline __u32 layer_of(__u32 kind)
{
	switch (kind) {
	case GPU_KIND_SYNC:
		return STRATA_LAYER_GPU_WAIT;
	case GPU_KIND_NCCL_INIT:
	case GPU_KIND_COLL:
	case GPU_KIND_P2P:
	case GPU_KIND_GROUP: /* ncclGroupEnd runs the grouped collectives */
		return STRATA_LAYER_COLLECTIVE;
	default:
		return STRATA_LAYER_CUDA_API;
	}
}

static __always_inline int on_enter(struct pt_regs *ctx)
{
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	struct gpu_call *c;

	if (api >= GPU_API_MAX)
		return 0;
	c = call_enter(ctx, api);
	if (!c)
		return 0;
	if (mark_layers)
		api_layer_enter(layer_of(gpu_api_kind(api)));
	if (gpu_api_kind(api) == GPU_KIND_NCCL_INIT)
		nccl_init_enter(ctx, c);
	else if (api == GPU_API_cudaLaunchKernelExC || api == GPU_API_cuLaunchKernelEx)
		launch_ex_enter(c);
	return 0;
}

static __always_inline int on_exit(struct pt_regs *ctx)
{
	struct gpu_call c;
	__s64 ret;
	__u64 now;

	if (!call_exit(ctx, &c))
		return 0;
	if (mark_layers)
		api_layer_exit();
	now = bpf_ktime_get_ns();
	/* cudaError_t, CUresult and ncclResult_t are all C enums (int). */
	ret = (__s32)PT_REGS_RC(ctx);
	tally_add(c.tgid, c.api, now - c.start_ns, ret);
	switch (gpu_api_kind(c.api)) {
	case GPU_KIND_NCCL_INIT:
	case GPU_KIND_COLL:
	case GPU_KIND_P2P:
	case GPU_KIND_GROUP:
		nccl_exit(&c, ret, now);
		break;
	default:
		cuda_exit(&c, ret, now);
		break;
	}
	return 0;
}

/*
 * Each program twice: attached through uprobe_multi links (one per file and
 * probe group; user space loads the *_multi copies with that attach type:
 * agent/proc/uprobe_multi.h says why), or as single uprobes on kernels before
 * 6.6 (chosen at the first attach).
 */
SEC("uprobe")
int gpu_enter(struct pt_regs *ctx)
{
	return on_enter(ctx);
}

SEC("uretprobe")
int gpu_exit(struct pt_regs *ctx)
{
	return on_exit(ctx);
}

SEC("uprobe")
int gpu_enter_multi(struct pt_regs *ctx)
{
	return on_enter(ctx);
}

SEC("uretprobe")
int gpu_exit_multi(struct pt_regs *ctx)
{
	return on_exit(ctx);
}

/* A framework's USDT probe site (bpf/gpu_usdt.bpf.h). */
SEC("uprobe")
int gpu_usdt(struct pt_regs *ctx)
{
	return on_usdt(ctx);
}

/* Benchmark floor: the cheapest possible probe on the same functions. */
SEC("uprobe")
int gpu_empty(struct pt_regs *ctx)
{
	return 0;
}

SEC("uprobe")
int gpu_empty_multi(struct pt_regs *ctx)
{
	return 0;
}

/*
 * A process that exec()s or exits stops being a target: its new image is
 * discovered again, and user space sweeps its entries (allocations: the
 * leak report at exit).  At exit, the executable mappings precede the EXIT
 * record (flagged SAMPLED, so the process tracker keeps the instance they
 * made): a GPU target that was never CPU-sampled and died before user space
 * read /proc/PID/maps still gets its allocation and launch stacks
 * symbolized.
 */
static __always_inline void target_gone(struct task_struct *task, bool exiting, bool with_vmas)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	__u64 mm_id = exiting ? mm_id_of(task) : 0; /* at exec the old mm is gone */
	struct strata_proc_event *e;

	if (bpf_map_delete_elem(&gpu_targets, &tgid))
		return;
	/* The mappings first: user space may read the ring while this runs,
	 * and must not see the exit (and resolve the stacks for good) before
	 * the mappings it needs. */
	if (with_vmas && exiting && mm_id &&
	    !exit_vmas_send(&gpu_proc_events, task, tgid, mm_id, page_shift))
		gpu_count(GPU_CNT_EVENTS_LOST);
	e = bpf_ringbuf_reserve(&gpu_proc_events, sizeof(*e), 0);
	if (!e) {
		gpu_count(GPU_CNT_EVENTS_LOST);
		return;
	}
	proc_event_fill(e, exiting ? PROC_EV_EXIT : PROC_EV_EXEC, task, tgid, mm_id);
	e->flags = exiting ? PROC_EV_F_SAMPLED : 0;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int proc_exit(bool with_vmas)
{
	struct task_struct *task = bpf_get_current_task_btf();

	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0; /* other threads remain */
	target_gone(task, true, with_vmas);
	return 0;
}

/*
 * The dynamic linker tells debuggers of every change to a process's list of
 * loaded objects by calling _dl_debug_state() (r_debug.r_brk): at start-up
 * once its libraries are mapped, and before and after each dlopen and
 * dlclose (PyTorch loads CUDA when it is imported).  A uprobe there, on
 * each ld.so file the watched processes run (agent/gpu/gpu_files.c), has
 * user space read that process's maps for GPU libraries then, instead of
 * reading the maps of every process it watches twice a second (a cost that
 * grows with the node's processes and their mappings: ~0.5 ms a read for a
 * PyTorch process).  At most one event per process per
 * GPU_MAPPED_EVENT_NS: after an event user space reads the maps in a series
 * that lasts longer (agent/gpu/gpu_procs.c), so the objects one burst of
 * dlopens maps after the first event are seen too.
 *
 * Only for the processes user space watches: every dynamically linked
 * program on the node runs a hooked ld.so, and each of its starts would
 * otherwise wake the agent for an event it throws away.
 */
#define GPU_MAPPED_EVENT_NS 200000000ULL

/* The watched processes (added and removed by user space, value 0) and
 * each one's last event (bpf_ktime_get_ns).  max_entries: user space's
 * process slots, set at load. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} gpu_mapped_last SEC(".maps");

SEC("uprobe")
int gpu_dl_notify(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 now = bpf_ktime_get_ns(), *last;
	struct strata_proc_event *e;
	struct task_struct *task;

	last = bpf_map_lookup_elem(&gpu_mapped_last, &tgid);
	if (!last || now - *last < GPU_MAPPED_EVENT_NS)
		return 0;
	e = bpf_ringbuf_reserve(&gpu_proc_events, sizeof(*e), 0);
	if (!e) { /* not remembered: the next call tries again */
		gpu_count(GPU_CNT_EVENTS_LOST);
		return 0;
	}
	/* by key again: user space may have deleted the entry meanwhile,
	 * and another process's taken its element */
	bpf_map_update_elem(&gpu_mapped_last, &tgid, &now, BPF_EXIST);
	task = bpf_get_current_task_btf();
	proc_event_fill(e, PROC_EV_MAPPED_EXEC, task, tgid, mm_id_of(task));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Exactly one of these four is loaded: as the sampler's exit programs
 * (bpf/profile.bpf.c says which, and why). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(gpu_proc_exit, struct task_struct *p)
{
	return proc_exit(true);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(gpu_proc_exit_kept, struct task_struct *p)
{
	return proc_exit(false);
}

SEC("fentry/exit_mm_release")
int BPF_PROG(gpu_proc_exit_early, struct task_struct *tsk, struct mm_struct *mm)
{
	return proc_exit(true);
}

SEC("fentry/exit_mm_release")
int BPF_PROG(gpu_proc_exit_early_kept, struct task_struct *tsk, struct mm_struct *mm)
{
	return proc_exit(false);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(gpu_proc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	target_gone(p, false, false);
	return 0;
}
