/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The launch-/allocation-site stack of a GPU call: the hybrid walker the
 * CPU sampler uses (bpf/unwind_user.bpf.h: CFI rows, frame-pointer steps
 * where there are none), started with the entry rule - the probe sits on
 * the API's first instruction, so the return address is at rsp whatever
 * the callee's tables or rbp say.  NVIDIA's libraries and the code calling
 * them keep no frame pointers: a frame-pointer walk from there skipped the
 * immediate caller and then followed whatever rbp held.
 *
 * A walk costs ~100 ns a frame; GPU APIs are called in tight loops from a
 * set of sites, so each thread keeps its last walk from each call site
 * (the return address at the entry's rsp) with the stack slots its frames
 * came from (struct unwind_log), and the next call from the same registers
 * reuses the stack only if every one of those slots still holds the same
 * value: a different caller, at any depth, misses.  Keyed by thread alone,
 * a loop launching from two sites in turn walked every call (2.3x the
 * empty-probe floor); a training step launches from hundreds.
 */
#ifndef STRATA_BPF_GPU_STACK_BPF_H
#define STRATA_BPF_GPU_STACK_BPF_H

/* The walker's output and its log (defined below, with their maps). */
struct unwind_log;
static __always_inline struct strata_stack *unwind_hook_trace(void);
static __always_inline struct unwind_log *unwind_hook_log(void);

#include "bpf/unwind_user.bpf.h"

/* A walk that read something it cannot log (a failed read, a signal
 * frame) is reused this long at most. */
#define GPU_SITE_UNTRACKED_TTL_NS 100000000ULL

/* A thread's last call-site walk (map gpu_site_cache, BPF only). */
struct gpu_site_cache {
	__u64 ip, sp, rbp; /* the registers it started from */
	__u64 stack_id;
	__u64 expires_ns; /* 0: as long as the slots match */
	struct unwind_log log;
};
_Static_assert(sizeof(struct gpu_site_cache) == 40 + sizeof(struct unwind_log),
	       "gpu_site_cache layout");

/* Per CPU: the stack bytes the slots of a cached walk lie in, read at once
 * (one read instead of one per slot: ~0.1 us a frame in a VM). */
#define GPU_SITE_WINDOW 4096

struct gpu_site_window {
	__u64 w[GPU_SITE_WINDOW / 8];
};
_Static_assert(sizeof(struct gpu_site_window) == GPU_SITE_WINDOW, "gpu_site_window layout");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gpu_site_window);
} gpu_site_windows SEC(".maps");

/* A thread's call site: the return address at the API's entry (a probe
 * inside a function, a USDT site: its own ip). */
struct gpu_site_cache_key {
	__u64 site;
	__u32 tid;
	__u32 pad;
};
_Static_assert(sizeof(struct gpu_site_cache_key) == 16, "gpu_site_cache_key layout");

/* LRU: a site a thread stops calling from ages out; an evicted entry costs
 * one walk.  ~3 KiB each: 8192 hold e.g. 16 threads x 512 sites (24 MiB). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct gpu_site_cache_key);
	__type(value, struct gpu_site_cache);
} gpu_site_cache SEC(".maps");

/* Per CPU: the walk in progress (its log becomes the thread's entry). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gpu_site_cache);
} gpu_site_scratch SEC(".maps");

static __always_inline struct strata_stack *unwind_hook_trace(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&gpu_scratch, &zero);
}

static __always_inline struct unwind_log *unwind_hook_log(void)
{
	__u32 zero = 0;
	struct gpu_site_cache *e = bpf_map_lookup_elem(&gpu_site_scratch, &zero);

	return e ? &e->log : NULL;
}

/* Stores the stack just walked; returns its id, STACK_NONE or STACK_LOST (counted). */
static __always_inline __u64 gpu_stack_store(struct strata_stack *t)
{
	__u64 id;

	t->flags = 0;
	if (!t->len)
		return STRATA_STACK_NONE;
	id = unwind_walk_hash(t->len);
	if (bpf_map_lookup_elem(&gpu_stacks, &id))
		return id;
	if (bpf_map_update_elem(&gpu_stacks, &id, t, BPF_ANY)) {
		gpu_count(GPU_CNT_STACKS_FULL);
		return STRATA_STACK_LOST;
	}
	return id;
}

struct gpu_site_check {
	const struct gpu_site_cache *e;
	__u64 sp;
	__u32 n;
	__u32 same;
};

/* One logged slot: still the value the walk read there? */
static long gpu_site_slot(__u32 i, void *data)
{
	struct gpu_site_check *c = data;
	__u64 v;

	if (i >= c->n || i >= UNWIND_LOG_MAX) {
		c->same = 1;
		return 1;
	}
	if (bpf_probe_read_user(&v, sizeof(v), (void *)(c->sp + c->e->log.off[i])) ||
	    v != c->e->log.val[i])
		return 1;
	return 0;
}

/*
 * The logged slots compared in one read of the stack above sp: 1 all the
 * same, 0 one differs, -1 not possible here (the slots span more than the
 * window, an odd offset): compare one by one.  A global function: checked
 * once by the verifier, on its own.
 */
__noinline int gpu_site_window_same(const struct gpu_site_cache *e, __u64 sp)
{
	__u32 zero = 0, n, span;
	struct gpu_site_window *w;

	if (!e)
		return -1;
	n = e->log.n;
	span = e->log.max_off + 8;
	if (n > UNWIND_LOG_MAX || span > GPU_SITE_WINDOW)
		return -1;
	w = bpf_map_lookup_elem(&gpu_site_windows, &zero);
	if (!w || bpf_probe_read_user(w->w, span, (void *)sp))
		return -1;
	for (__u32 i = 0; i < UNWIND_LOG_MAX; i++) {
		__u32 off;

		if (i >= n)
			break;
		off = e->log.off[i];
		if (off & 7)
			return -1;
		if (w->w[(off >> 3) & (GPU_SITE_WINDOW / 8 - 1)] != e->log.val[i])
			return 0;
	}
	return 1;
}

/*
 * True when a walk from (ip, sp, rbp) now would give e's stack: same
 * registers (rbp only if the walk used it) and every logged slot unchanged.
 */
static __always_inline bool gpu_site_same(const struct gpu_site_cache *e, __u64 ip, __u64 sp,
					  __u64 rbp)
{
	struct gpu_site_check c = { .e = e, .sp = sp, .n = e->log.n };

	if (e->ip != ip || e->sp != sp || e->stack_id <= STRATA_STACK_LOST)
		return false;
	if ((e->log.flags & UNWIND_LOG_RBP0) && e->rbp != rbp)
		return false;
	if (e->expires_ns && bpf_ktime_get_ns() > e->expires_ns)
		return false;
	switch (gpu_site_window_same(e, sp)) {
	case 1:
		return true;
	case 0:
		return false;
	}
	bpf_loop(UNWIND_LOG_MAX + 1, gpu_site_slot, &c, 0);
	return c.same;
}

/*
 * The walk, as a global function: the verifier checks it once, on its own,
 * instead of once for every path of the probe that reaches it (the probe
 * program's verification was 6x larger inline).  Returns the stack's size
 * in bytes or a negative error.
 */
__noinline int gpu_walk(__u64 ip, __u64 sp, __u64 rbp, __u64 mm_id, int entry)
{
	return unwind_user_walk(mm_id, ip, sp, rbp, entry != 0);
}

/*
 * The calling thread's native stack at a probe: its id, STACK_NONE or
 * STACK_LOST (counted).  entry: the probe is on a function's first
 * instruction (every GPU API probe); else a probe inside a function (USDT).
 */
static __always_inline __u64 gpu_native_stack(struct pt_regs *ctx, __u64 mm_id, bool entry)
{
	__u64 ip = PT_REGS_IP(ctx), sp = PT_REGS_SP(ctx), rbp = PT_REGS_FP(ctx);
	struct gpu_site_cache_key key = { .site = ip, .tid = (__u32)bpf_get_current_pid_tgid() };
	struct gpu_site_cache *e;
	struct strata_stack *t;
	__u32 zero = 0;

	/* An unreadable return address keys as 0: the slot check still
	 * decides whether the entry is this call's stack. */
	if (entry && bpf_probe_read_user(&key.site, sizeof(key.site), (const void *)sp))
		key.site = 0;
	e = bpf_map_lookup_elem(&gpu_site_cache, &key);

	if (e && gpu_site_same(e, ip, sp, rbp)) {
		gpu_count(GPU_CNT_STACK_REUSED);
		return e->stack_id;
	}
	if (gpu_walk(ip, sp, rbp, mm_id, entry) < 0) {
		gpu_count(GPU_CNT_STACK_ERR);
		return STRATA_STACK_LOST;
	}
	t = bpf_map_lookup_elem(&gpu_scratch, &zero);
	e = bpf_map_lookup_elem(&gpu_site_scratch, &zero);
	if (!t || !e)
		return STRATA_STACK_LOST;
	if (!unwind_report_miss(&gpu_proc_events, bpf_get_current_task_btf(),
				bpf_get_current_pid_tgid() >> 32, mm_id))
		gpu_count(GPU_CNT_EVENTS_LOST);
	e->stack_id = gpu_stack_store(t);
	if (e->stack_id <= STRATA_STACK_LOST)
		return e->stack_id;
	/* Tables missing (a process's first calls, a library just loaded):
	 * walked again next time, when they are likely in. */
	if (e->log.flags & UNWIND_LOG_PARTIAL)
		return e->stack_id;
	e->ip = ip;
	e->sp = sp;
	e->rbp = rbp;
	e->expires_ns = e->log.flags & UNWIND_LOG_UNTRACKED
				? bpf_ktime_get_ns() + GPU_SITE_UNTRACKED_TTL_NS
				: 0;
	bpf_map_update_elem(&gpu_site_cache, &key, e, BPF_ANY); /* LRU: never full */
	return e->stack_id;
}

/*
 * The call site's stack with the thread's Python frames, when its process
 * runs CPython (want_python): native id mixed with the Python stack's id,
 * the pair recorded for user space to stitch (agent/core/resolve.c).  Returns
 * native unchanged when there are no Python frames.
 */
static __noinline __u64 gpu_stack_with_python(__u64 native, __u64 mm_id)
{
	struct strata_py_stack *py;
	struct gpu_stack_pair pair;
	__u64 pid, id;

	if (native <= STRATA_STACK_LOST)
		return native;
	py = py_capture(bpf_get_current_task_btf(), mm_id);
	if (!py)
		return native;
	pid = hash_py_stack(py);
	if (!bpf_map_lookup_elem(&gpu_py_stacks, &pid) &&
	    bpf_map_update_elem(&gpu_py_stacks, &pid, py, BPF_ANY)) {
		gpu_count(GPU_CNT_STACKS_FULL);
		return native;
	}
	id = (native ^ (pid * 0x9e3779b97f4a7c15ULL)) | 2; /* never NONE/LOST */
	pair.native = native;
	pair.py = pid;
	if (!bpf_map_lookup_elem(&gpu_stack_pairs, &id) &&
	    bpf_map_update_elem(&gpu_stack_pairs, &id, &pair, BPF_ANY)) {
		gpu_count(GPU_CNT_STACKS_FULL);
		return native;
	}
	return id;
}

/*
 * The stack of a call site, with Python frames when the process runs
 * CPython: those change under one native site (the interpreter's loop), so
 * they are walked every call; the native part comes from the cache when
 * its slots match.
 */
static __always_inline __u64 gpu_site_stack(struct pt_regs *ctx, __u64 mm_id, bool entry)
{
	__u64 native;

	if (!want_stacks)
		return STRATA_STACK_NONE;
	native = gpu_native_stack(ctx, mm_id, entry);
	if (want_python && mm_id && bpf_map_lookup_elem(&py_procs, &mm_id))
		return gpu_stack_with_python(native, mm_id);
	return native;
}

#endif /* STRATA_BPF_GPU_STACK_BPF_H */
