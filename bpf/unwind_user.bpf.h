/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The hybrid user-stack walker, shared by every program that records a user
 * stack: the CPU sampler (bpf/profile.bpf.c, registers from the task's
 * pt_regs) and the GPU uprobes (bpf/gpu_stack.bpf.h, registers of the probe,
 * at a function's first instruction).  One code path: compiled CFI rows
 * where a file has them, frame-pointer steps elsewhere (bpf/unwind_core.h),
 * and the entry rule when the walk starts at a function's entry.
 *
 * The includer provides
 *   unwind_hook_trace()  -> struct strata_stack *   where the frames go
 *   unwind_hook_log()    -> struct unwind_log * or NULL (no reuse wanted)
 *
 * The maps are the sampler's: another object shares unwind_rows and
 * unwind_procs with bpf_map__reuse_fd (agent/gpu.c), or shrinks them to
 * one entry when there are no tables (--unwind fp: every step is then a
 * frame-pointer step, counted no_proc).  Needs vmlinux.h, bpf_core_read.h
 * and strata.h.
 */
#ifndef STRATA_BPF_UNWIND_USER_BPF_H
#define STRATA_BPF_UNWIND_USER_BPF_H

/* Compiled CFI rows of every loaded table, back to back; user space
 * allocates ranges (struct unwind_map.row_first/row_count). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 21); /* 32 MiB: libtorch_cpu alone is 1.4M rows */
	__type(key, __u32);
	__type(value, struct unwind_row);
} unwind_rows SEC(".maps");

/* Per address space (mm_id): its executable mappings and their tables. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2048);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* 16 KiB values: only live ones */
	__type(key, __u64);
	__type(value, struct unwind_proc);
} unwind_procs SEC(".maps");

/* Per object: why its walks stopped or fell back (enum unwind_err). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UNWIND_ERR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} unwind_errors SEC(".maps");

/* Per CPU: the first missing pc of the unwind in progress. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} unwind_miss_pc SEC(".maps");

/* Last miss report per address space (rate limit). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} unwind_miss_last SEC(".maps");

/*
 * What a walk read, for a caller that wants to reuse it (the GPU call-site
 * cache): every stack slot a frame came from, as an offset from the
 * starting rsp with the value read there.  A walk from the same registers
 * over the same values in those slots gives the same frames (the rows are
 * chosen by the return addresses, which are among the values).
 */
#define UNWIND_LOG_MAX 256 /* two slots per frame: return address, saved rbp */

#define UNWIND_LOG_RBP0 1      /* computed from the initial rbp */
#define UNWIND_LOG_PARTIAL 2   /* fell back for want of tables (may load later) */
#define UNWIND_LOG_UNTRACKED 4 /* a read that is not logged, or a log overflow */

struct unwind_log {
	__u32 n;
	__u32 flags;   /* UNWIND_LOG_* */
	__u32 max_off; /* the highest offset: the slots lie in [sp, sp + max_off + 8) */
	__u32 pad;
	__u32 off[UNWIND_LOG_MAX];
	__u64 val[UNWIND_LOG_MAX];
};
_Static_assert(sizeof(struct unwind_log) == 16 + 12 * UNWIND_LOG_MAX, "unwind_log layout");

static __always_inline int unwind_hook_read(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

static __always_inline const struct unwind_row *unwind_hook_row(__u32 index)
{
	return bpf_map_lookup_elem(&unwind_rows, &index);
}

static __always_inline void unwind_hook_count(enum unwind_err e)
{
	__u32 key = e;
	__u64 *v = bpf_map_lookup_elem(&unwind_errors, &key);

	if (v)
		*v += 1; /* per-CPU; these programs do not nest on a CPU */
}

static __always_inline __u64 *unwind_miss_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&unwind_miss_pc, &zero);
}

/* First pc per walk without a mapping or table; reported after the walk
 * (unwind_report_miss). */
static __always_inline void unwind_hook_miss(__u64 pc)
{
	__u64 *slot = unwind_miss_slot();

	if (slot && !*slot)
		*slot = pc;
}

#include "bpf/unwind_core.h"

/*
 * The walk in progress, per CPU.  In a map value rather than on the BPF
 * stack: the verifier tracks constants spilled to the stack (the entry
 * flag, the slots' "not read yet" zeros), and every combination became a
 * state of the loop's callback to explore; map memory is just unknown
 * values to it (400k -> a few k instructions processed).
 */
struct unwind_walk {
	struct unwind_regs regs;
	__u64 mm_id;
	__u64 sp0;  /* the starting rsp: log offsets are from here */
	__u64 hash; /* of the frames so far (unwind_walk_hash()) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_walk);
} unwind_walks SEC(".maps");

static __always_inline void unwind_log_slot(struct unwind_log *log, __u64 sp0, __u64 addr,
					    __u64 val)
{
	__u32 n = log->n;

	if (addr < sp0 || addr - sp0 > 0xffffffffULL || n >= UNWIND_LOG_MAX) {
		log->flags |= UNWIND_LOG_UNTRACKED;
		return;
	}
	log->off[n & (UNWIND_LOG_MAX - 1)] = (__u32)(addr - sp0);
	log->val[n & (UNWIND_LOG_MAX - 1)] = val;
	log->n = n + 1;
	if ((__u32)(addr - sp0) > log->max_off)
		log->max_off = (__u32)(addr - sp0);
}

/* After a step: the slots its caller frame came from. */
static __always_inline void unwind_log_step(struct unwind_log *log, const struct unwind_walk *w,
					    __u64 rbp_from, __u64 rbp, int ret)
{
	const struct unwind_regs *r = &w->regs;

	if (r->fallback)
		log->flags |= UNWIND_LOG_PARTIAL;
	if (r->volatile_step || ret < 0)
		log->flags |= UNWIND_LOG_UNTRACKED; /* stopped on a failed read */
	if (r->used) {
		if (!rbp_from)
			log->flags |= UNWIND_LOG_RBP0;
		else
			unwind_log_slot(log, w->sp0, rbp_from, rbp);
	}
	/* ret 1: the walk ended on a zero return address read there; ret
	 * -1: nothing was read (flagged above) */
	if (r->ra_addr && ret >= 0)
		unwind_log_slot(log, w->sp0, r->ra_addr, ret == 0 ? r->rip : 0);
}

static long unwind_walk_frame(__u32 i, void *data)
{
	__u32 zero = 0;
	struct unwind_walk *w = bpf_map_lookup_elem(&unwind_walks, &zero);
	struct strata_stack *t = unwind_hook_trace();
	struct unwind_log *log = unwind_hook_log();
	const struct unwind_proc *proc;
	__u64 rbp_from, rbp;
	int ret;

	if (!w || !t || i >= STRATA_MAX_STACK_DEPTH)
		return 1;
	t->ips[i] = w->regs.rip;
	t->len = i + 1;
	w->hash = (w->hash ^ w->regs.rip) * 0x100000001b3ULL;
	w->hash ^= w->hash >> 29;
	if (i == STRATA_MAX_STACK_DEPTH - 1) {
		unwind_hook_count(UNWIND_ERR_DEPTH);
		return 1;
	}
	proc = bpf_map_lookup_elem(&unwind_procs, &w->mm_id);
	rbp_from = w->regs.rbp_from;
	rbp = w->regs.rbp;
	ret = unwind_step(&w->regs, proc);
	if (log)
		unwind_log_step(log, w, rbp_from, rbp, ret);
	return ret != 0;
}

/*
 * Walks the user stack from (rip, rsp, rbp) into unwind_hook_trace();
 * entry: rip is the first instruction of a function (a uprobe on its
 * symbol).  unwind_hook_log(), when not NULL, is reset and receives the
 * slots the frames came from.  Returns the stack's size in bytes
 * (bpf_get_stack's convention), or -1.
 */
static __always_inline long unwind_user_walk(__u64 mm_id, __u64 rip, __u64 rsp, __u64 rbp,
					     bool entry)
{
	__u32 zero = 0;
	struct unwind_walk *w = bpf_map_lookup_elem(&unwind_walks, &zero);
	struct strata_stack *t = unwind_hook_trace();
	struct unwind_log *log = unwind_hook_log();
	__u64 *miss;

	if (!w || !t)
		return -1;
	__builtin_memset(&w->regs, 0, sizeof(w->regs));
	w->regs.rip = rip;
	w->regs.rsp = rsp;
	w->regs.rbp = rbp;
	w->regs.first = 1;
	w->regs.entry = entry;
	w->mm_id = mm_id;
	w->sp0 = rsp;
	w->hash = 0xcbf29ce484222325ULL;
	t->len = 0;
	if (log) {
		log->n = 0;
		log->flags = 0;
		log->max_off = 0;
	}
	if (!rip)
		return 0;
	miss = unwind_miss_slot();
	if (miss)
		*miss = 0;
	bpf_loop(STRATA_MAX_STACK_DEPTH, unwind_walk_frame, NULL, 0);
	return (long)t->len * sizeof(__u64);
}

/* Content hash of the frames the last walk on this CPU recorded (ids 0
 * and 1 are reserved: STRATA_STACK_NONE / _LOST).  Computed frame by frame
 * in the walk: a separate loop over the frames was one more bounded loop
 * for the verifier to unroll on every path. */
static __always_inline __u64 unwind_walk_hash(__u32 len)
{
	__u32 zero = 0;
	struct unwind_walk *w = bpf_map_lookup_elem(&unwind_walks, &zero);
	__u64 h;

	if (!w)
		return STRATA_STACK_LOST;
	h = (w->hash ^ len) * 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h <= STRATA_STACK_RESERVED ? h + STRATA_STACK_RESERVED + 1 : h;
}

/*
 * The walk met a pc in no known mapping (a library dlopen'd since maps
 * were read) or in a file without a loaded table: tell user space now
 * (PROC_EV_UNWIND_MISS on the object's event ring), so it re-reads maps /
 * loads the table within milliseconds instead of at the next drain.  At
 * most one report per address space per 10 ms.  False: the ring was full.
 */
static __always_inline bool unwind_report_miss(void *ring, struct task_struct *task, __u32 tgid,
					       __u64 mm_id)
{
	struct strata_proc_event *e;
	__u64 *pc = unwind_miss_slot(), now, *last;

	if (!pc || !*pc)
		return true;
	now = bpf_ktime_get_ns();
	last = bpf_map_lookup_elem(&unwind_miss_last, &mm_id);
	if (last && now - *last < 10000000ULL)
		return true;
	bpf_map_update_elem(&unwind_miss_last, &mm_id, &now, BPF_ANY);
	e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
	if (!e)
		return false;
	proc_event_fill(e, PROC_EV_UNWIND_MISS, task, tgid, mm_id);
	e->start = *pc;
	bpf_ringbuf_submit(e, 0);
	return true;
}

#endif /* STRATA_BPF_UNWIND_USER_BPF_H */
