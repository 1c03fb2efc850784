/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CPython frames of the current thread, for any program that wants them
 * (bpf/profile.bpf.c's samples, bpf/gpu.bpf.c's call sites): the walker
 * (bpf/python_walk.h), the maps it works with and its glue.  py_procs is
 * written by the agent (agent/python/python.c); an object other than the sampler
 * shares the sampler's copy with bpf_map__reuse_fd.  Needs vmlinux.h,
 * bpf_core_read.h and strata.h.
 */
#ifndef STRATA_BPF_PYTHON_CAPTURE_BPF_H
#define STRATA_BPF_PYTHON_CAPTURE_BPF_H

/* Per address space (mm_id): the interpreter's descriptor, written by the
 * agent when it finds CPython in the process's mappings. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct strata_py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct strata_py_stack);
} py_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_read_buf);
} py_bufs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STRATA_PY_ERR_MAX);
	__type(key, __u32);
	__type(value, __u64);
} py_errors SEC(".maps");

static __always_inline int py_hook_read(void *dst, __u32 size, __u64 addr)
{
	return bpf_probe_read_user(dst, size, (const void *)addr);
}

static __always_inline void py_hook_count(enum strata_py_err e)
{
	__u32 key = e;
	__u64 *v = bpf_map_lookup_elem(&py_errors, &key);

	if (v)
		*v += 1;
}

static __always_inline struct strata_py_stack *py_hook_stack(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&py_scratch, &zero);
}

struct py_read_buf;
static __always_inline struct py_read_buf *py_hook_buf(void);

#include "bpf/python_walk.h"

/* Thread (pid_tgid) -> its PyThreadState: re-validated by id on every
 * use, searched for again after STRATA_PY_TSTATE_TTL_NS (python_walk.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct py_tstate_cache);
} py_tstates SEC(".maps");

static __always_inline struct py_read_buf *py_hook_buf(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&py_bufs, &zero);
}

static __always_inline __u64 hash_py_stack(const struct strata_py_stack *s)
{
	__u64 h = 0x9e3779b97f4a7c15ULL ^ s->len ^ ((__u64)s->flags << 32);

	for (int i = 0; i < STRATA_PY_MAX_DEPTH; i++) {
		if (i >= s->len)
			break;
		const struct strata_py_frame *f = &s->frames[i];

		h ^= f->code;
		h *= 0xff51afd7ed558ccdULL;
		h ^= ((__u64)f->ident << 32 | (__u32)f->lasti) ^ ((__u64)f->flags << 61);
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 33;
	}
	return h <= STRATA_STACK_RESERVED ? h + STRATA_STACK_RESERVED + 1 : h;
}

/*
 * Walks the current thread's Python frames when its address space runs
 * CPython: the stack (per-CPU scratch, valid until the next walk on this
 * CPU), or NULL (not Python, no thread state, or no frames).
 */
static __always_inline struct strata_py_stack *py_capture(struct task_struct *task, __u64 mm_id)
{
	const struct strata_py_proc *pd = bpf_map_lookup_elem(&py_procs, &mm_id);
	struct strata_py_proc d;
	__u64 pid_tgid = bpf_get_current_pid_tgid(), want, ts, fresh, now;
	struct py_tstate_cache *cached, found;

	if (!pd)
		return NULL;
	d = *pd;
	want = d.match == STRATA_PY_MATCH_TID ? (__u32)pid_tgid
					      : BPF_CORE_READ(task, thread.fsbase);
	cached = bpf_map_lookup_elem(&py_tstates, &pid_tgid);
	now = bpf_ktime_get_ns();
	fresh = py_tstate_fresh(cached, now);
	ts = py_find_tstate(&d, want, fresh);
	if (!ts)
		return NULL;
	if (ts != fresh) { /* found by a search */
		found.ts = ts;
		found.found_ns = now;
		bpf_map_update_elem(&py_tstates, &pid_tgid, &found, BPF_ANY);
	}
	if (!py_walk(&d, ts))
		return NULL;
	return py_hook_stack();
}

#endif /* STRATA_BPF_PYTHON_CAPTURE_BPF_H */
