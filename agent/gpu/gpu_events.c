// SPDX-License-Identifier: Apache-2.0
/*
 * The call events of the GPU object's ring buffer: NCCL ranks and the call
 * records of the trace.
 */
#include "agent/gpu/gpu_impl.h"

#include <bpf/libbpf.h>

#include "agent/gpu/gpu_names.h"

/*
 * The process a call event belongs to.  Events are read at the next poll
 * or drain, often after the process has exited (a short job ends within
 * one drain interval; its exit may be read first, from the other ring):
 * the exited entry still counts, it is remembered at this drain.  A process
 * not known at all (its admission event not read yet) is admitted now.
 */
static struct gpu_proc *proc_of_event(struct gpu *g, uint32_t tgid)
{
	struct gpu_proc *p = gpu_proc_find(g, tgid);

	if (!p)
		p = gpu_proc_find_exited(g, tgid);
	if (!p) {
		gpu_proc_admitted(g, tgid, 0, NULL);
		p = gpu_proc_find(g, tgid);
		if (!p)
			p = gpu_proc_find_exited(g, tgid);
	}
	return p;
}

int gpu_on_event(void *ctx, void *data, size_t size)
{
	struct gpu *g = ctx;
	const struct gpu_event *e = data;
	struct gpu_call_rec *r;

	if (size < sizeof(*e))
		return 0;
	if (e->api < GPU_API_MAX && gpu_api_kind(e->api) == GPU_KIND_NCCL_INIT && !e->ret) {
		struct gpu_proc *p = proc_of_event(g, e->tgid);

		if (p && p->info.nccl_rank < 0) {
			p->info.nccl_rank = (int32_t)(e->a[5] & 0xffffffff);
			p->info.nccl_nranks = (int32_t)(e->a[5] >> 32);
			p->info.comm_hash = p->info.job_hash = e->a[0];
		}
	}
	if (e->api < GPU_API_MAX && gpu_api_kind(e->api) == GPU_KIND_COLL) {
		struct gpu_proc *p = gpu_proc_find(g, e->tgid);

		if (p)
			p->info.nccl_tid = e->tid; /* its thread state: hang diagnosis */
	}
	if (e->api < GPU_API_MAX)
		gpu_nccl_recover(g, e);
	/* an allocation call sent for the agent's ring alone (alloc_events) */
	if (g->alloc_calls && !g->opts.trace && e->api < GPU_API_MAX &&
	    (gpu_api_kind(e->api) == GPU_KIND_ALLOC || gpu_api_kind(e->api) == GPU_KIND_FREE) &&
	    !gpu_traced(g, e->tgid)) {
		if (g->nalloc_calls >= GPU_MAX_ALLOC_EVENTS) {
			g->data.alloc_calls_dropped++;
			return 0;
		}
		r = &g->alloc_calls[g->nalloc_calls++];
	} else if (g->ncalls >= GPU_MAX_CALLS) {
		g->data.dropped_calls++;
		return 0;
	} else {
		r = &g->calls[g->ncalls++];
	}
	r->ev = *e;
	r->ev.start_ns = gpu_to_realtime(g, e->start_ns);
	r->ev.end_ns = gpu_to_realtime(g, e->end_ns);
	return 0;
}

int gpu__event_fd(const struct gpu *g)
{
	return ring_buffer__epoll_fd(g->rb);
}
