/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * USDT probes of the frameworks above the CUDA runtime: one program for
 * every probe site, whose attach cookie indexes gpu_usdt_specs (what the
 * site means and where its arguments are, from its .note.stapsdt note:
 * agent/proc/usdt.c).  Attached with the uprobe reference counter on the
 * site's semaphore, so the framework evaluates the probe's arguments only
 * while we listen.
 *
 * PyTorch's caching allocator (provider "pytorch"): malloc(ptr, device,
 * size, stream) and free(ptr) of tensor blocks, tracked in
 * gpu_fw_allocs by (process, ptr) with the allocation-site stack (native +
 * Python), apart from the driver-level segments in gpu_allocs: a block
 * lies inside a segment, often at its start (the same pointer).
 */
#ifndef STRATA_BPF_GPU_USDT_BPF_H
#define STRATA_BPF_GPU_USDT_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct gpu_usdt_spec);
} gpu_usdt_specs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct gpu_alloc_key);
	__type(value, struct gpu_alloc_val);
} gpu_fw_allocs SEC(".maps");

/* One argument's value per its spec; false: unreadable (counted). */
static __always_inline bool usdt_arg(struct pt_regs *ctx, const struct usdt_arg_spec *a, __u64 *out)
{
	__u64 v = 0, base = 0;

	switch (a->kind) {
	case USDT_ARG_CONST:
		v = a->val;
		break;
	case USDT_ARG_REG:
	case USDT_ARG_DEREF:
		if (a->reg_off > sizeof(struct pt_regs) - sizeof(__u64) ||
		    bpf_probe_read_kernel(&base, sizeof(base), (void *)ctx + a->reg_off))
			goto bad;
		if (a->kind == USDT_ARG_REG) {
			v = base;
			break;
		}
		/* exactly the argument's bytes: more could cross into an
		 * unmapped page */
		switch (a->size) {
		case 1:
			if (bpf_probe_read_user(&v, 1, (void *)(base + a->val)))
				goto bad;
			break;
		case 2:
			if (bpf_probe_read_user(&v, 2, (void *)(base + a->val)))
				goto bad;
			break;
		case 4:
			if (bpf_probe_read_user(&v, 4, (void *)(base + a->val)))
				goto bad;
			break;
		default:
			if (bpf_probe_read_user(&v, 8, (void *)(base + a->val)))
				goto bad;
			break;
		}
		break;
	default:
		goto bad;
	}
	switch (a->size) { /* the register's low bytes, extended */
	case 1:
		v = a->is_signed ? (__u64)(__s64)(__s8)v : (__u8)v;
		break;
	case 2:
		v = a->is_signed ? (__u64)(__s64)(__s16)v : (__u16)v;
		break;
	case 4:
		v = a->is_signed ? (__u64)(__s64)(__s32)v : (__u32)v;
		break;
	}
	*out = v;
	return true;
bad:
	gpu_count(GPU_CNT_USDT_ARG_ERR);
	return false;
}

static __always_inline int on_usdt(struct pt_regs *ctx)
{
	__u32 id = (__u32)bpf_get_attach_cookie(ctx);
	const struct gpu_usdt_spec *spec = bpf_map_lookup_elem(&gpu_usdt_specs, &id);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gpu_alloc_key k = { .tgid = pid_tgid >> 32 };
	struct gpu_alloc_val v = {};
	struct gpu_target *t;
	__u64 size = 0;

	if (!spec)
		return 0;
	t = bpf_map_lookup_elem(&gpu_targets, &k.tgid);
	if (!t)
		t = admit(k.tgid);
	if (!t) {
		gpu_count(GPU_CNT_FILTERED);
		return 0;
	}
	if (!t->mm_id)
		target_first_call(t, k.tgid);
	gpu_count(GPU_CNT_FW_EVENTS);
	if (!usdt_arg(ctx, &spec->args[0], &k.ptr) || !k.ptr)
		return 0;
	if (spec->event == GPU_USDT_FW_FREE) {
		if (bpf_map_delete_elem(&gpu_fw_allocs, &k))
			gpu_count(GPU_CNT_FW_FREE_UNKNOWN);
		else
			allocs_changed(&gpu_fw_allocs_changes);
		return 0;
	}
	if (spec->event != GPU_USDT_FW_MALLOC || !usdt_arg(ctx, &spec->args[2], &size) || !size)
		return 0;
	v.size = size;
	v.api = GPU_API_MAX; /* not an API call: the framework's own event */
	v.tid = (__u32)pid_tgid;
	/* inside the allocator, not at a function's entry: walked like a CPU
	 * sample, with the thread's Python frames */
	v.stack_id = gpu_site_stack(ctx, t->mm_id, false);
	v.ts_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&gpu_fw_allocs, &k, &v, BPF_ANY))
		gpu_count(GPU_CNT_FW_ALLOCS_FULL);
	else
		allocs_changed(&gpu_fw_allocs_changes);
	return 0;
}

#endif /* STRATA_BPF_GPU_USDT_BPF_H */
