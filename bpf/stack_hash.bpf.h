/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A stack's id: a 64-bit hash of its frames, never one of the reserved
 * STRATA_STACK_* values.  Shared by the CPU sampler (bpf/profile.bpf.c) and
 * the scheduler layer's blocking stacks (bpf/sched.bpf.c), which both keep
 * stacks per generation keyed by this id.
 */
#ifndef STRATA_BPF_STACK_HASH_BPF_H
#define STRATA_BPF_STACK_HASH_BPF_H

static __always_inline __u64 hash_stack(const struct strata_stack *t)
{
	__u64 h = 0x9e3779b97f4a7c15ULL ^ t->len;

	for (int i = 0; i < STRATA_MAX_STACK_DEPTH; i++) {
		if (i >= t->len)
			break;
		h ^= t->ips[i];
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 33;
	}
	return h <= STRATA_STACK_RESERVED ? h + STRATA_STACK_RESERVED + 1 : h;
}

#endif /* STRATA_BPF_STACK_HASH_BPF_H */
