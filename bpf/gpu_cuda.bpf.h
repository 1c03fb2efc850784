/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CUDA runtime and driver calls: launches, allocations, frees, copies,
 * synchronizations and kernel-handle lookups.  Argument registers follow
 * the x86-64 SysV ABI: a dim3 (12 bytes) travels in two registers, (x|y)
 * then z.
 */
#ifndef STRATA_BPF_GPU_CUDA_BPF_H
#define STRATA_BPF_GPU_CUDA_BPF_H

/* cudaLaunchConfig_t and CUlaunchConfig start alike: grid and block dims
 * as six 32-bit values, shared memory at 24 (size_t / unsigned: the low 32
 * bits are the same), stream at 32. */
struct launch_config_head {
	__u32 grid[3], block[3];
	__u32 shmem, pad;
	__u64 stream;
};

/* Launch-ex entry: the config may not outlive the call, so its fields are
 * read now, into the event layout (a[0] kernel ... a[5] stream). */
/* Not inlined: the config copy stays off gpu_enter's frame (as
 * nccl_init_enter). */
static __noinline void launch_ex_enter(struct gpu_call *c)
{
	struct launch_config_head h;
	__u64 kernel = c->a[1];

	if (bpf_probe_read_user(&h, sizeof(h), (void *)c->a[0]))
		__builtin_memset(&h, 0, sizeof(h));
	c->a[0] = kernel;
	c->a[1] = h.grid[0] | (__u64)h.grid[1] << 32;
	c->a[2] = h.grid[2] | (__u64)h.block[0] << 32;
	c->a[3] = h.block[1] | (__u64)h.block[2] << 32;
	c->a[4] = h.shmem;
	c->a[5] = h.stream;
}

/* The launch in the event layout (see struct gpu_event). */
static __always_inline void launch_fields(const struct gpu_call *c, __u64 *o)
{
	const __u64 lo = 0xffffffffULL;

	switch (c->api) {
	case GPU_API_cudaLaunchKernel: /* func, grid xy, grid z, block xy, block z, args, shmem,
					  stream */
		o[0] = c->a[0];
		o[1] = c->a[1];
		o[2] = (c->a[2] & lo) | (c->a[3] & lo) << 32;
		o[3] = c->a[3] >> 32 | (c->a[4] & lo) << 32;
		o[4] = c->a[6];
		o[5] = c->a[7];
		break;
	case GPU_API_cuLaunchKernel: /* f, gx, gy, gz, bx, by, bz, shmem, stream */
		o[0] = c->a[0];
		o[1] = (c->a[1] & lo) | (c->a[2] & lo) << 32;
		o[2] = (c->a[3] & lo) | (c->a[4] & lo) << 32;
		o[3] = (c->a[5] & lo) | (c->a[6] & lo) << 32;
		o[4] = c->a[7] & lo;
		o[5] = c->a[8];
		break;
	case GPU_API_cudaGraphLaunch: /* graph exec, stream */
		o[0] = c->a[0];
		o[5] = c->a[1];
		break;
	default: /* launch-ex: normalized at entry */
		for (int i = 0; i < 6; i++)
			o[i] = c->a[i];
		break;
	}
}

static __always_inline void alloc_exit(const struct gpu_call *c, __s64 ret, __u64 now, __u64 *ev)
{
	struct gpu_alloc_key k = { .tgid = c->tgid };
	struct gpu_alloc_val v = {
		.size = c->a[1],
		.ts_ns = now,
		.stack_id = c->stack_id,
		.api = c->api,
		.tid = (__u32)bpf_get_current_pid_tgid(),
	};

	ev[1] = c->a[1];
	if (ret || bpf_probe_read_user(&k.ptr, sizeof(k.ptr), (void *)c->a[0]) || !k.ptr)
		return;
	ev[0] = k.ptr;
	if (bpf_map_update_elem(&gpu_allocs, &k, &v, BPF_ANY))
		gpu_count(GPU_CNT_ALLOCS_FULL);
	else
		allocs_changed(&gpu_allocs_changes);
}

static __always_inline void free_exit(const struct gpu_call *c, __s64 ret, __u64 *ev)
{
	struct gpu_alloc_key k = { .tgid = c->tgid, .ptr = c->a[0] };
	struct gpu_alloc_val *v;

	ev[0] = k.ptr;
	if (ret || !k.ptr) /* cudaFree(0) only initializes the context */
		return;
	v = bpf_map_lookup_elem(&gpu_allocs, &k);
	if (!v) {
		gpu_count(GPU_CNT_FREE_UNKNOWN); /* made before we attached */
		return;
	}
	ev[1] = v->size;
	if (!bpf_map_delete_elem(&gpu_allocs, &k))
		allocs_changed(&gpu_allocs_changes);
}

static __always_inline void lookup_exit(const struct gpu_call *c, __s64 ret)
{
	struct gpu_func_key k = { .tgid = c->tgid };
	struct gpu_func_name n;

	if (ret || bpf_probe_read_user(&k.handle, sizeof(k.handle), (void *)c->a[0]))
		return;
	if (bpf_probe_read_user_str(n.name, sizeof(n.name), (void *)c->a[2]) < 0)
		return;
	if (bpf_map_update_elem(&gpu_funcs, &k, &n, BPF_ANY))
		gpu_count(GPU_CNT_FUNCS_FULL);
}

static __always_inline void cuda_exit(const struct gpu_call *c, __s64 ret, __u64 now)
{
	__u64 ev[6] = {}, ns = now - c->start_ns;
	__u32 kind = gpu_api_kind(c->api);
	struct gpu_event *e;

	switch (kind) {
	case GPU_KIND_LAUNCH:
		launch_fields(c, ev);
		site_add(c, ev[0], ns, 0, ret);
		break;
	case GPU_KIND_ALLOC:
		alloc_exit(c, ret, now, ev);
		site_add(c, 0, ns, ret ? 0 : c->a[1], ret);
		break;
	case GPU_KIND_FREE:
		free_exit(c, ret, ev);
		break;
	case GPU_KIND_COPY: /* dst, src, count, kind[, stream] */
		ev[1] = c->a[2];
		ev[2] = c->a[3];
		ev[5] = c->api == GPU_API_cudaMemcpyAsync ? c->a[4] : 0;
		site_add(c, c->a[3], ns, c->a[2], ret);
		break;
	case GPU_KIND_SYNC:
		ev[0] = c->a[0];
		site_add(c, 0, ns, 0, ret);
		break;
	case GPU_KIND_LOOKUP:
		lookup_exit(c, ret);
		return;
	default:
		return;
	}
	/* every call traced (--trace, or a deep capture of the process), or
	 * the allocations alone (the agent's ring for CUDA out-of-memory) */
	if (!trace_cuda && !(alloc_events && (kind == GPU_KIND_ALLOC || kind == GPU_KIND_FREE)) &&
	    !bpf_map_lookup_elem(&gpu_trace_tgids, &c->tgid))
		return;
	e = event_new(c, ret, now);
	if (!e)
		return;
	for (int i = 0; i < 6; i++)
		e->a[i] = ev[i];
	/* Every call of a traced process is an event: user space is woken
	 * only when the ring fills up (it reads the ring at every poll and
	 * drain anyway), not thousands of times a second. */
	bpf_ringbuf_submit(e, bpf_ringbuf_query(&gpu_events, BPF_RB_AVAIL_DATA) > 256 * 1024
				      ? BPF_RB_FORCE_WAKEUP
				      : BPF_RB_NO_WAKEUP);
}

#endif /* STRATA_BPF_GPU_CUDA_BPF_H */
