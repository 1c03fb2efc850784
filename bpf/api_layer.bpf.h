/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The per-thread API-layer map (BPF side).  bpf/sched.bpf.c owns it; a
 * program that marks API calls (the GPU layer's uprobes) includes this
 * header and, before its object is loaded, points its copy of the map at
 * sched's with bpf_map__reuse_fd(), then calls api_layer_enter() at a
 * call's entry and api_layer_exit() at its return.  Task storage: one entry
 * per live thread, freed with the thread, no capacity to run out of.
 */
#ifndef STRATA_BPF_API_LAYER_BPF_H
#define STRATA_BPF_API_LAYER_BPF_H

#include "bpf/sched_account.h"

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct strata_api_layer_state);
} api_layers SEC(".maps");

static __always_inline struct strata_api_layer_state *api_layer_of(struct task_struct *t,
								   bool create)
{
	return bpf_task_storage_get(&api_layers, t, NULL,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void api_layer_enter(__u32 layer)
{
	struct strata_api_layer_state *st = api_layer_of(bpf_get_current_task_btf(), true);

	if (st)
		api_layer_push(st, layer, bpf_ktime_get_ns());
}

static __always_inline void api_layer_exit(void)
{
	struct strata_api_layer_state *st = api_layer_of(bpf_get_current_task_btf(), false);

	if (st)
		api_layer_pop(st, bpf_ktime_get_ns());
}

#endif /* STRATA_BPF_API_LAYER_BPF_H */
