/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The launch-/allocation-site stack of a GPU call.  One function, so that
 * a richer walker (the hybrid CFI unwinder, Python frames) can replace the
 * frame-pointer walk here without touching the probes.  The walk is
 * bpf_get_stack's (frame pointers): the CPU cost of a probe is the budget,
 * and the FP walk of a typical 10-30 frame stack costs well under a
 * microsecond (bench/gpu.sh measures the whole probe).
 */
#ifndef STRATA_BPF_GPU_STACK_BPF_H
#define STRATA_BPF_GPU_STACK_BPF_H

/* Content hash of the frames (ids 0 and 1 are reserved). */
static __always_inline __u64 gpu_stack_hash(const struct strata_stack *t)
{
	__u64 h = 0xcbf29ce484222325ULL ^ t->len;

	for (__u32 i = 0; i < STRATA_MAX_STACK_DEPTH; i++) {
		if (i >= t->len)
			break;
		h = (h ^ t->ips[i]) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h <= STRATA_STACK_LOST ? h + 2 : h;
}

/* Stores the calling thread's user stack; returns its id, STACK_NONE or
 * STACK_LOST (counted). */
static __always_inline __u64 gpu_stack(struct pt_regs *ctx)
{
	__u32 zero = 0;
	struct strata_stack *t = bpf_map_lookup_elem(&gpu_scratch, &zero);
	long n;
	__u64 id;

	if (!want_stacks)
		return STRATA_STACK_NONE;
	if (!t)
		return STRATA_STACK_LOST;
	n = bpf_get_stack(ctx, t->ips, sizeof(t->ips), BPF_F_USER_STACK);
	if (n < 0) {
		gpu_count(GPU_CNT_STACK_ERR);
		return STRATA_STACK_LOST;
	}
	t->len = n / sizeof(__u64);
	t->flags = 0;
	if (!t->len)
		return STRATA_STACK_NONE;
	id = gpu_stack_hash(t);
	if (bpf_map_lookup_elem(&gpu_stacks, &id))
		return id;
	if (bpf_map_update_elem(&gpu_stacks, &id, t, BPF_ANY)) {
		gpu_count(GPU_CNT_STACKS_FULL);
		return STRATA_STACK_LOST;
	}
	return id;
}

/*
 * The call site's stack with the thread's Python frames, when its process
 * runs CPython (want_python): native id mixed with the Python stack's id,
 * the pair recorded for user space to stitch (agent/core/resolve.c).  Returns
 * native unchanged when there are no Python frames.
 */
static __always_inline __u64 gpu_stack_with_python(__u64 native, __u64 mm_id)
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

#endif /* STRATA_BPF_GPU_STACK_BPF_H */
