/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * NCCL: communicator creation (identity = hash of the unique id, rank,
 * nranks), collectives and point-to-point calls (per-communicator sequence
 * numbers, bytes, gaps), group calls.  Every call streams one event:
 * collectives are low-rate, and the per-communicator statistics in
 * gpu_colls survive a full ring buffer.
 */
#ifndef STRATA_BPF_GPU_NCCL_BPF_H
#define STRATA_BPF_GPU_NCCL_BPF_H

/* ncclCommInitRank(comm*, nranks, ncclUniqueId id (128 bytes, passed in
 * memory: on the stack above the return address), rank[, config]);
 * ncclCommInitRankScalable(comm*, nranks, rank, nId, ncclUniqueId *ids,
 * config): the same registers for comm, nranks and rank, and ids[0] as the
 * identity (every rank passes the same nId ids, large jobs more than one
 * to spread the bootstrap).  Not inlined: its 128-byte id buffer stays off
 * gpu_enter's frame, which the stack walk's frames sit on (the walk's
 * comment in gpu_stack.bpf.h). */
static __noinline void nccl_init_enter(struct pt_regs *ctx, struct gpu_call *c)
{
	const void *id = (void *)(PT_REGS_SP(ctx) + 8);
	__u64 w[16];

	if (c->api == GPU_API_ncclCommInitRankScalable) {
		if ((__s32)c->a[3] < 1)
			return;
		id = (const void *)c->a[4];
	}
	if (bpf_probe_read_user(w, sizeof(w), id))
		return;
	c->id_hash = gpu_unique_id_hash(w);
}

/* The call's arguments (bpf/strata_gpu.h: shared with the agent, which
 * reads calls in flight). */
static __always_inline bool coll_args(const struct gpu_call *c, struct gpu_nccl_args *o)
{
	return gpu_nccl_args_of(c->api, c->a, o);
}

static __always_inline void coll_stats(const struct gpu_call *c, __u64 id_hash, __u64 ns,
				       __u64 bytes, __u64 gap, bool has_gap)
{
	struct gpu_coll_key k = { .tgid = c->tgid, .api = c->api, .id_hash = id_hash };
	struct gpu_coll_val *v = bpf_map_lookup_elem(&gpu_colls, &k);

	if (!v) {
		struct gpu_coll_val z = {};

		bpf_map_update_elem(&gpu_colls, &k, &z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&gpu_colls, &k);
		if (!v) {
			gpu_count(GPU_CNT_TALLY_FULL);
			return;
		}
	}
	gpu_add(&v->count, 1);
	gpu_add(&v->time_ns, ns);
	gpu_add(&v->bytes, bytes);
	if (has_gap) {
		gpu_add(&v->gap_ns, gap);
		gpu_add(&v->gaps, 1);
		if (gap > v->gap_max_ns)
			v->gap_max_ns = gap; /* racy max, as in tally_add */
	}
}

static __always_inline void nccl_exit(const struct gpu_call *c, __s64 ret, __u64 now)
{
	__u32 kind = gpu_api_kind(c->api);
	struct gpu_comm_key ck = { .tgid = c->tgid };
	struct gpu_comm_val *cv = NULL;
	struct gpu_nccl_args a = {};
	struct gpu_event *e;
	__u64 bytes = 0, seq = 0;

	if (kind == GPU_KIND_NCCL_INIT) {
		struct gpu_comm_val v = { .id_hash = c->id_hash,
					  .rank = c->a[2],
					  .nranks = c->a[1] };

		if (!ret && !bpf_probe_read_user(&ck.comm, sizeof(ck.comm), (void *)c->a[0]) &&
		    bpf_map_update_elem(&gpu_comms, &ck, &v, BPF_ANY))
			gpu_count(GPU_CNT_COMMS_FULL);
		e = event_new(c, ret, now);
		if (!e)
			return;
		e->a[0] = c->id_hash;
		e->a[2] = ck.comm;
		e->a[5] = (c->a[2] & 0xffffffffULL) | c->a[1] << 32;
		bpf_ringbuf_submit(e, 0);
		return;
	}
	if (coll_args(c, &a)) {
		ck.comm = a.comm;
		cv = bpf_map_lookup_elem(&gpu_comms, &ck);
		if (!cv)
			gpu_count(GPU_CNT_COMM_UNKNOWN);
		bytes = a.count * gpu_nccl_dtype_size(a.dtype);
	}
	if (cv && kind == GPU_KIND_COLL) {
		bool has_gap = cv->seq > 0 && c->start_ns > cv->last_exit_ns;

		seq = cv->seq++;
		coll_stats(c, cv->id_hash, now - c->start_ns, bytes,
			   has_gap ? c->start_ns - cv->last_exit_ns : 0, has_gap);
		cv->last_exit_ns = now;
	} else if (cv) {
		seq = cv->p2p_seq++;
		coll_stats(c, cv->id_hash, now - c->start_ns, bytes, 0, false);
	}
	e = event_new(c, ret, now);
	if (!e)
		return;
	if (cv) {
		e->a[0] = cv->id_hash;
		e->a[5] = cv->rank | (__u64)cv->nranks << 32;
	}
	e->a[1] = seq;
	e->a[2] = a.comm; /* the process's ncclComm_t: with the tgid, the key */
	e->a[3] = bytes;
	e->a[4] = (a.dtype & 0xffff) | (a.op & 0xffff) << 16 | (a.peer & 0xffffffffULL) << 32;
	bpf_ringbuf_submit(e, 0);
}

#endif /* STRATA_BPF_GPU_NCCL_BPF_H */
