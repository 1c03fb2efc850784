// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CPU sampling: a perf_event (cpu-clock) program on every CPU records the
 * running thread's user and kernel stacks and aggregates counts in kernel
 * maps, double buffered so user space can drain one generation while this
 * program writes the other.  Process tracepoints tell user space when to read
 * a process's mappings and, at exit, hand it the final executable mappings so
 * a short-lived process can still be symbolized.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/strata.h"

#define EEXIST 17 /* errno.h is not available to BPF programs */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Settings written by user space between open and load. */
const volatile __u32 filter_mode = STRATA_FILTER_NONE;
const volatile bool want_user = true;
const volatile bool want_kernel = true;
const volatile bool debug = false;
const volatile __u32 page_shift = 12;	 /* set from getpagesize() */
const volatile bool want_hybrid = false; /* CFI tables + FP, else FP only */
const volatile bool want_python = false; /* walk CPython frames */

#include "bpf/generation.bpf.h" /* gen, inflight: shared with bpf/sched.bpf.c */

#define dbg(fmt, ...)                                   \
	do {                                            \
		if (debug)                              \
			bpf_printk(fmt, ##__VA_ARGS__); \
	} while (0)

STRATA_GENERATION_MAPS(counts, struct strata_stack_key, struct strata_stack_count, 16384);

/* Stacks are per generation too: a drained generation's stacks can be freed
 * without invalidating ids the other generation still refers to. */
STRATA_GENERATION_MAPS(stacks, __u64, struct strata_stack, 8192);

/* Triggered deep capture (agent/capture/): the processes a capture raises,
 * and their timed samples, taken by a second perf event at the capture's
 * rate (capture_sample) and drained with the same generations: their
 * stacks live in the same stack maps.  Nothing writes them outside a
 * capture (the second perf event exists only during one). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} capture_tgids SEC(".maps");

STRATA_GENERATION_MAPS(timed, struct strata_timed_key, struct strata_stack_count, 65536);

/* Per-CPU scratch: a stack_trace is too big for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* 0: user, 1: kernel */
	__type(key, __u32);
	__type(value, struct strata_stack);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STRATA_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Target processes (STRATA_FILTER_TGIDS); forks of a target are added.
 * The value is a __u32: with a 1-byte value, BPF-side lookups of keys that
 * user space had inserted failed on 6.18 (seen, not yet root-caused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_map SEC(".maps");

/* Address spaces user space has been told about (bounded: an evicted entry
 * only causes one more PROC_EV_NEW). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u32);
} seen SEC(".maps");

/* --- Python frames (the walker is bpf/python_walk.h) --- */

STRATA_GENERATION_MAPS(py_stacks, __u64, struct strata_py_stack, 8192);

/* Per CPU: tags of code objects seen lately (a direct-mapped cache): a
 * stack with a code object missing here is sent to user space at once,
 * which reads its names before the object can be freed. */
#define PY_RECENT_SLOTS 512
struct py_recent {
	__u64 tag[PY_RECENT_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_recent);
} py_recent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024);
} events SEC(".maps");

static __always_inline void count(enum strata_counter c)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	if (v)
		*v += 1; /* per-CPU, and perf_event programs do not nest */
}

static __always_inline bool is_target(__u32 tgid)
{
	if (filter_mode == STRATA_FILTER_TGIDS)
		return bpf_map_lookup_elem(&targets, &tgid) != NULL;
	if (filter_mode == STRATA_FILTER_CGROUP)
		return bpf_current_task_under_cgroup(&cgroup_map, 0) == 1;
	return true;
}

#include "bpf/task_id.bpf.h"	/* mm_id_of(): shared with bpf/gpu.bpf.c */
#include "bpf/exit_vmas.bpf.h"	/* exit-time mapping records: shared too */
#include "bpf/stack_hash.bpf.h" /* stack ids: shared with bpf/sched.bpf.c */

/* The walker's output: the user slot of the scratch; no reuse log. */
struct unwind_log;

static __always_inline struct strata_stack *unwind_hook_trace(void)
{
	__u32 user = 0;

	return bpf_map_lookup_elem(&scratch, &user);
}

static __always_inline struct unwind_log *unwind_hook_log(void)
{
	return NULL;
}

#include "bpf/unwind_user.bpf.h" /* the walker and its maps: shared with gpu.bpf.c */

/* Hybrid user stack of the sampled thread (into scratch slot 0):
 * task_pt_regs holds its user registers whether the sample hit user mode
 * or a syscall / interrupt. */
static __always_inline long unwind_user(__u64 mm_id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

	return unwind_user_walk(mm_id, BPF_CORE_READ(regs, ip), BPF_CORE_READ(regs, sp),
				BPF_CORE_READ(regs, bp), false);
}

/*
 * Reads one stack into per-CPU scratch and stores it in this generation's
 * stack map.  Returns its id, STRATA_STACK_NONE when there are no frames, or
 * STRATA_STACK_LOST (counted) when it could not be read or stored.
 */
static __always_inline __u64 store_stack(void *ctx, void *stack_map, __u32 slot, __u64 flags,
					 __u64 mm_id, enum strata_counter err_counter)
{
	struct strata_stack *t = bpf_map_lookup_elem(&scratch, &slot);
	long n;

	if (!t)
		return STRATA_STACK_LOST;
	if (want_hybrid && (flags & BPF_F_USER_STACK))
		n = unwind_user(mm_id); /* into scratch slot 0: t */
	else
		n = bpf_get_stack(ctx, t->ips, sizeof(t->ips), flags);
	if (n < 0) {
		count(err_counter);
		return STRATA_STACK_LOST;
	}
	t->len = n / sizeof(__u64);
	t->flags = 0;
	if (t->len == 0)
		return STRATA_STACK_NONE;

	__u64 id = hash_stack(t);
	if (bpf_map_lookup_elem(stack_map, &id))
		return id;
	long err = bpf_map_update_elem(stack_map, &id, t, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		count(STRATA_CNT_STACKS_FULL);
		return STRATA_STACK_LOST;
	}
	return id;
}

#include "bpf/python_capture.bpf.h" /* the walker, its maps and glue: shared with gpu.bpf.c */

/*
 * True when stack s holds a code object this CPU has not seen lately (and
 * remembers them all now).  Module bodies run once and are freed when they
 * finish, often before the next drain: such stacks are symbolized early.
 */
static __always_inline bool py_stack_novel(const struct strata_py_stack *s, __u64 mm_id)
{
	__u32 zero = 0;
	struct py_recent *r = bpf_map_lookup_elem(&py_recent, &zero);
	bool novel = false;

	if (!r)
		return false;
	for (int i = 0; i < STRATA_PY_MAX_DEPTH; i++) {
		if (i >= s->len)
			break;
		const struct strata_py_frame *f = &s->frames[i];
		__u64 tag = (f->code ^ ((__u64)f->ident << 32) ^ mm_id) | 1;
		__u32 slot = (__u32)((tag * 0x9e3779b97f4a7c15ULL) >> 55) & (PY_RECENT_SLOTS - 1);

		if (r->tag[slot] != tag) {
			r->tag[slot] = tag;
			novel = true;
		}
	}
	return novel;
}

/*
 * The Python frames of the current thread, when its address space runs
 * CPython: stored in this generation's py_stacks.  Returns the id,
 * STRATA_STACK_NONE (not Python, or no frames) or STRATA_STACK_LOST;
 * *novel: the stack has code objects not seen lately (py_stack_novel).
 */
static __always_inline __u64 store_py_stack(struct task_struct *task, void *py_map, __u64 mm_id,
					    bool *novel)
{
	struct strata_py_stack *s = py_capture(task, mm_id);
	__u64 id;

	if (!s)
		return STRATA_STACK_NONE;
	id = hash_py_stack(s);
	*novel = py_stack_novel(s, mm_id);
	if (bpf_map_lookup_elem(py_map, &id))
		return id;
	long err = bpf_map_update_elem(py_map, &id, s, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		py_hook_count(STRATA_PY_ERR_STORE);
		return STRATA_STACK_LOST;
	}
	return id;
}

static __always_inline struct strata_proc_event *event_reserve(__u32 type, struct task_struct *task,
							       __u32 tgid, __u64 mm_id)
{
	struct strata_proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(STRATA_CNT_EVENTS_LOST);
		return NULL;
	}
	proc_event_fill(e, type, task, tgid, mm_id);
	return e;
}

/*
 * A Python stack with new code objects: user space symbolizes it now.
 * Only while the ring buffer is mostly empty: process events, which
 * share it, must never be crowded out (the drain still resolves it).
 */
static __always_inline void emit_py_stack(struct task_struct *task, __u32 tgid, __u64 mm_id,
					  __u32 g, __u64 id)
{
	struct strata_proc_event *e;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > 64 * 1024) {
		py_hook_count(STRATA_PY_NEW_CODE_SKIPPED);
		return;
	}
	e = event_reserve(PROC_EV_PY_STACK, task, tgid, mm_id);
	if (!e)
		return;
	e->flags = g;
	e->start = id;
	bpf_ringbuf_submit(e, 0);
	py_hook_count(STRATA_PY_NEW_CODE);
}

/* First sample of an address space: user space reads its maps now. */
static __always_inline void emit_new(struct task_struct *task, __u32 tgid, __u64 mm_id)
{
	struct strata_proc_event *e;
	__u32 one = 1;

	if (!mm_id || bpf_map_lookup_elem(&seen, &mm_id))
		return;
	bpf_map_update_elem(&seen, &mm_id, &one, BPF_ANY);
	e = event_reserve(PROC_EV_NEW, task, tgid, mm_id);
	if (!e) {
		bpf_map_delete_elem(&seen, &mm_id); /* retry on a later sample */
		return;
	}
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void add_count(void *count_map, struct strata_stack_key *key)
{
	struct strata_stack_count *c = bpf_map_lookup_elem(count_map, key);

	if (!c) {
		struct strata_stack_count init = { .count = 1 };

		bpf_get_current_comm(init.comm, sizeof(init.comm));
		long err = bpf_map_update_elem(count_map, key, &init, BPF_NOEXIST);
		if (!err) {
			count(STRATA_CNT_RECORDED);
			return;
		}
		/* Another CPU inserted the same key first: add to it. */
		c = bpf_map_lookup_elem(count_map, key);
		if (!c) {
			count(STRATA_CNT_COUNTS_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&c->count, 1);
	count(STRATA_CNT_RECORDED);
}

/*
 * The sampled thread's stacks into generation g's maps (key's tgid, tid and
 * mm_id set); *py_novel: its Python stack has code objects not seen lately.
 */
static __always_inline void sample_stacks(void *ctx, struct task_struct *task, __u32 g,
					  struct strata_stack_key *key, bool *py_novel)
{
	void *stack_map = bpf_map_lookup_elem(&stacks, &g);
	void *py_map = bpf_map_lookup_elem(&py_stacks, &g);

	key->user_stack = key->kern_stack = key->py_stack = STRATA_STACK_NONE;
	if (!stack_map || !py_map)
		return;
	if (want_user && key->mm_id)
		key->user_stack = store_stack(ctx, stack_map, 0, BPF_F_USER_STACK, key->mm_id,
					      STRATA_CNT_USER_STACK_ERR);
	if (want_kernel)
		key->kern_stack = store_stack(ctx, stack_map, 1, 0, 0, STRATA_CNT_KERN_STACK_ERR);
	if (want_python && want_user && key->mm_id)
		key->py_stack = store_py_stack(task, py_map, key->mm_id, py_novel);
}

/* After a sample: what user space should learn of the process now. */
static __always_inline void sample_events(struct task_struct *task, struct strata_stack_key *key,
					  __u32 g, bool py_novel)
{
	if (py_novel && key->py_stack > STRATA_STACK_LOST)
		emit_py_stack(task, key->tgid, key->mm_id, g, key->py_stack);
	emit_new(task, key->tgid, key->mm_id);
	if (want_hybrid && key->mm_id && !unwind_report_miss(&events, task, key->tgid, key->mm_id))
		count(STRATA_CNT_EVENTS_LOST);
}

SEC("perf_event")
int profile_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0;
	struct task_struct *task;
	struct strata_inflight *inf;
	void *count_map;
	struct strata_stack_key key = {};
	bool py_novel = false;
	__u32 g;

	count(STRATA_CNT_SAMPLES);
	if (tid == 0) {
		count(STRATA_CNT_IDLE);
		return 0;
	}
	if (!is_target(tgid)) {
		count(STRATA_CNT_FILTERED);
		return 0;
	}
	inf = bpf_map_lookup_elem(&inflight, &zero);
	if (!inf)
		return 0;

	task = (struct task_struct *)bpf_get_current_task();
	key.tgid = tgid;
	key.tid = tid;
	key.mm_id = mm_id_of(task);

	g = generation_enter(inf);
	count_map = bpf_map_lookup_elem(&counts, &g);
	if (count_map) {
		sample_stacks(ctx, task, g, &key, &py_novel);
		add_count(count_map, &key);
	}
	generation_leave(inf, g);
	sample_events(task, &key, g, py_novel);
	return 0;
}

/*
 * Deep capture: a timed sample of a captured process (its own perf event
 * at the capture's rate; the always-on counts above are left alone, so
 * their frequency still converts them to CPU time).
 */
SEC("perf_event")
int capture_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0;
	struct strata_timed_key tk = {};
	struct strata_stack_count init = { .count = 1 }, *c;
	struct task_struct *task;
	struct strata_inflight *inf;
	void *timed_map;
	bool py_novel = false;
	__u32 g;

	if (tid == 0 || !bpf_map_lookup_elem(&capture_tgids, &tgid))
		return 0;
	inf = bpf_map_lookup_elem(&inflight, &zero);
	if (!inf)
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	tk.k.tgid = tgid;
	tk.k.tid = tid;
	tk.k.mm_id = mm_id_of(task);
	tk.time_ns = bpf_ktime_get_ns();

	g = generation_enter(inf);
	timed_map = bpf_map_lookup_elem(&timed, &g);
	if (timed_map) {
		sample_stacks(ctx, task, g, &tk.k, &py_novel);
		bpf_get_current_comm(init.comm, sizeof(init.comm));
		if (!bpf_map_update_elem(timed_map, &tk, &init, BPF_NOEXIST))
			count(STRATA_CNT_TIMED);
		else if ((c = bpf_map_lookup_elem(timed_map, &tk)))
			__sync_fetch_and_add(&c->count, 1); /* the same nanosecond */
		else
			count(STRATA_CNT_TIMED_FULL);
	}
	generation_leave(inf, g);
	sample_events(task, &tk.k, g, py_novel);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, one = 1;

	/* Threads share the tgid: only new processes matter. */
	if (filter_mode != STRATA_FILTER_TGIDS || ptgid == ctgid ||
	    !bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	if (bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY))
		count(STRATA_CNT_TARGETS_FULL);
	return 0;
}

/*
 * Exec in a targeted mode: user space reads the new image's maps early (the
 * process may be short-lived) and retires the old address space.  Not sent
 * host-wide, where every exec on the node would cost a /proc read; there
 * the first sample's PROC_EV_NEW is enough.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct strata_proc_event *e;

	if (filter_mode == STRATA_FILTER_NONE || !is_target(tgid))
		return 0;
	e = event_reserve(PROC_EV_EXEC, p, tgid, mm_id_of(p));
	if (e)
		bpf_ringbuf_submit(e, 0);
	return 0;
}

/*
 * The last thread of a process exits (signal->live is 0 at both hooks
 * below).  EXIT goes first, for every sampled
 * address space and every target, so user space can always retire the
 * instance (and the tgid leaves the targets: PID reuse).  For a sampled
 * one, with_vmas, the executable file mappings follow: its mm is still
 * attached here (both hooks run before exit_mm() drops it), so a process that
 * lived too briefly for user space to read /proc/PID/maps is still
 * symbolized.
 */
static __always_inline int process_exit(bool with_vmas)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct strata_proc_event *e;
	bool sampled, target;
	__u64 mm_id;
	__u32 tgid;

	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0; /* other threads remain */
	tgid = task->tgid;
	mm_id = mm_id_of(task);
	sampled = mm_id && bpf_map_lookup_elem(&seen, &mm_id);
	target = filter_mode == STRATA_FILTER_TGIDS && bpf_map_delete_elem(&targets, &tgid) == 0;
	if (!sampled && !target)
		return 0;
	e = event_reserve(PROC_EV_EXIT, task, tgid, mm_id);
	if (e) {
		e->flags = sampled ? PROC_EV_F_SAMPLED : 0;
		bpf_ringbuf_submit(e, 0);
	}
	if (!sampled)
		return 0;
	bpf_map_delete_elem(&seen, &mm_id);

	if (with_vmas && !exit_vmas_send(&events, task, tgid, mm_id, page_shift))
		count(STRATA_CNT_VMAS_TRUNCATED);
	dbg("exit tgid=%d", tgid);
	return 0;
}

/*
 * Exactly one of these four is loaded (agent/core/features.h): the
 * tracepoint where it fires before exit_mm() (2025 kernels), else fentry on
 * exit_mm_release() (exit_mm() calls it while current->mm is still set);
 * each with the VMA walk where the kernel has the iterator (6.7), or
 * without (*_kept).
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	return process_exit(true);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit_kept, struct task_struct *p)
{
	return process_exit(false);
}

SEC("fentry/exit_mm_release")
int BPF_PROG(on_exit_early, struct task_struct *tsk, struct mm_struct *mm)
{
	return process_exit(true);
}

SEC("fentry/exit_mm_release")
int BPF_PROG(on_exit_early_kept, struct task_struct *tsk, struct mm_struct *mm)
{
	return process_exit(false);
}

/* The memory cgroup of task (its kernfs id: the directory's inode number,
 * cgroup v1 or v2), 0 when the kernel has no memory controller. */
static __always_inline __u64 memcg_id(struct task_struct *task)
{
	struct cgroup_subsys_state *css = NULL;
	struct css_set *cgs;
	int id;

	if (!bpf_core_enum_value_exists(enum cgroup_subsys_id, memory_cgrp_id))
		return 0;
	id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	cgs = BPF_CORE_READ(task, cgroups);
	/* the index is the running kernel's: no CO-RE access string for it */
	if (bpf_probe_read_kernel(&css, sizeof(css), &cgs->subsys[0] + id) || !css)
		return 0;
	return BPF_CORE_READ(css, cgroup, kn, id);
}

/*
 * The OOM killer chose a process (docs/diagnosis.md "Deep capture",
 * trigger oom_kill): user space starts a capture of it with what it kept
 * of its last seconds.  A classic tracepoint, not tp_btf: the raw
 * arguments changed in 2024 (int pid, then the task and uid; stable
 * kernels took it: Debian's 6.1.0-56 has it, older 6.1 builds not), the
 * record's pid did not move.  The fields added then (rss, total VM, comm)
 * are read where the kernel has them.  Attached apart (agent/core/
 * sampler.c): a kernel without the tracepoint loses this trigger alone.
 * Host-wide every kill is sent (rare, one record): user space keeps those
 * of the processes it follows.
 */
SEC("tracepoint/oom/mark_victim")
int on_oom_victim(struct trace_event_raw_mark_victim *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct strata_proc_event *e;
	__u32 pid;

	if (!bpf_core_type_exists(struct trace_event_raw_mark_victim))
		return 0; /* never attached there; keeps the object loadable */
	pid = (__u32)ctx->pid;
	/* the record names a thread (the group leader unless that one had
	 * dropped its memory); the victim is often the allocating task */
	if (pid == (__u32)task->pid)
		pid = task->tgid;
	if (filter_mode == STRATA_FILTER_TGIDS && !is_target(pid))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(STRATA_CNT_EVENTS_LOST);
		return 0;
	}
	proc_event_fill(e, PROC_EV_OOM_KILL, task, pid, 0);
	e->start_ns = 0; /* the filler's is the invoking task's */
	__builtin_memset(e->comm, 0, sizeof(e->comm));
	e->start = memcg_id(task);
	e->pgoff = task->tgid;
	if (bpf_core_field_exists(ctx->anon_rss)) {
		unsigned int loc = ctx->__data_loc_comm;

		e->end = ctx->anon_rss + ctx->file_rss + ctx->shmem_rss;
		e->ino = ctx->total_vm;
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), (void *)ctx + (loc & 0xffff));
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}
