/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Entry/return bookkeeping shared by every probed API. */
#ifndef STRATA_BPF_GPU_CALL_BPF_H
#define STRATA_BPF_GPU_CALL_BPF_H

static __always_inline bool gpu_wants_stack(__u32 kind)
{
	return kind == GPU_KIND_LAUNCH || kind == GPU_KIND_ALLOC || kind == GPU_KIND_COPY ||
	       kind == GPU_KIND_SYNC || kind == GPU_KIND_COLL || kind == GPU_KIND_P2P;
}

/*
 * A process of the session that calls into an attached file before user
 * space found the file in its mappings (a short-lived process, or calls
 * right after exec: the file is already attached for another process, kept
 * attached for a grace period, or pre-attached at start) becomes a target
 * now; user space hears of it at its first call (target_first_call).
 * NULL: not a process of the session.
 */
static __always_inline struct gpu_target *admit(__u32 tgid)
{
	struct gpu_target z = {};
	long err;

	if (!admit_in_bpf)
		return NULL;
	if (filter_mode == STRATA_FILTER_TGIDS && !bpf_map_lookup_elem(&session_targets, &tgid))
		return NULL;
	if (filter_mode == STRATA_FILTER_CGROUP &&
	    bpf_current_task_under_cgroup(&session_cgroup, 0) != 1)
		return NULL;
	err = bpf_map_update_elem(&gpu_targets, &tgid, &z, BPF_NOEXIST);
	if (err && err != -EEXIST)
		gpu_count(GPU_CNT_TARGETS_FULL);
	if (!err)
		gpu_count(GPU_CNT_ADMITTED);
	return bpf_map_lookup_elem(&gpu_targets, &tgid); /* NULL: map full */
}

/*
 * A target's first call or framework event (its entry has no address space
 * yet), whoever made it a target: BPF (admit) or user space from
 * /proc/PID/maps, whose read may have caught ld.so halfway through mapping
 * the libraries (the CUDA ones in, libc not yet).  By now they are all
 * mapped: user space is told (PROC_EV_NEW) and reads the maps again, so the
 * call-site walks have every table from the next calls on (the first call
 * is usually the context creation, 100+ ms).  Also does the bookkeeping of
 * a process BPF admitted (file references, environment, the exit sweep);
 * a lost event is made up by the next /proc scan.
 */
static __always_inline void target_first_call(struct gpu_target *t, __u32 tgid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct strata_proc_event *e;

	t->mm_id = mm_id_of(task);
	e = bpf_ringbuf_reserve(&gpu_proc_events, sizeof(*e), 0);
	if (!e) {
		gpu_count(GPU_CNT_EVENTS_LOST);
		return;
	}
	proc_event_fill(e, PROC_EV_NEW, task, tgid, t->mm_id);
	bpf_ringbuf_submit(e, 0);
}

/*
 * The thread's in-flight call c, deeper in the stack than a new call of api,
 * cannot contain it: c's return was never seen.  The stack pointer alone
 * cannot tell: a call whose return was missed (an exception or longjmp
 * through it, its return probe detached by the duty cycle mid-call) leaves
 * an entry above the next calls of the same frame whenever they pass stack
 * arguments -- ncclAllReduce's seventh argument puts it 16 bytes below the
 * cudaStreamSynchronize before it -- and every one of them would look
 * nested and be lost.  A call runs only inside a call of a higher layer
 * (gpu_api_layer), and a sheddable call entered before the last detach of
 * its return probe may never return.
 */
static __always_inline bool call_stale(const struct gpu_call *c, __u32 api)
{
	if (gpu_api_layer(c->api) <= gpu_api_layer(api))
		return true;
	return gpu_api_sheddable(c->api) && c->shed_epoch != gpu_shed_epoch;
}

/*
 * Starts a call of a target process.  Returns its state, or NULL when the
 * process is not traced or the call runs inside another probed call on this
 * thread (cudaMalloc -> cuMemAlloc, ncclAllReduce -> cudaLaunchKernel...):
 * the outer call accounts for it.  An entry whose stack pointer is not
 * above ours, or that call_stale() shows cannot contain this call, belongs
 * to a call whose return we never saw: it is replaced.
 */
static __always_inline struct gpu_call *call_enter(struct pt_regs *ctx, __u32 api)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 sp = PT_REGS_SP(ctx);
	struct gpu_target *t = bpf_map_lookup_elem(&gpu_targets, &tgid);
	struct gpu_call *c;

	if (!t)
		t = admit(tgid);
	if (!t) {
		gpu_count(GPU_CNT_FILTERED);
		return NULL;
	}
	gpu_count(GPU_CNT_HITS);
	if (!t->mm_id)
		target_first_call(t, tgid);
	c = bpf_map_lookup_elem(&gpu_inflight, &tid);
	if (c && c->active && c->sp > sp && !call_stale(c, api)) {
		gpu_count(GPU_CNT_NESTED);
		return NULL;
	}
	if (c && c->active && c->sp > sp)
		gpu_count(GPU_CNT_STALE);
	if (c && c->active && mark_layers)
		api_layer_exit(); /* the stale call's layer, never popped */
	if (!c) {
		if (bpf_map_update_elem(&gpu_inflight, &tid, &gpu_call_zero, BPF_ANY)) {
			gpu_count(GPU_CNT_STATE_FULL);
			return NULL;
		}
		c = bpf_map_lookup_elem(&gpu_inflight, &tid);
		if (!c)
			return NULL;
	}
	c->sp = sp;
	c->api = api;
	c->shed_epoch = gpu_shed_epoch;
	c->tgid = tgid;
	c->id_hash = 0;
	c->a[0] = PT_REGS_PARM1(ctx);
	c->a[1] = PT_REGS_PARM2(ctx);
	c->a[2] = PT_REGS_PARM3(ctx);
	c->a[3] = PT_REGS_PARM4(ctx);
	c->a[4] = PT_REGS_PARM5(ctx);
	c->a[5] = ctx->r9; /* PT_REGS_PARM6 (x86-64; libbpf 1.1 lacks the macro) */
	/* Arguments 7-9 (x86-64 SysV: on the stack above the return address);
	 * zero when the function has fewer and the read fails. */
	if (bpf_probe_read_user(&c->a[6], 3 * sizeof(__u64), (void *)(sp + 8)))
		__builtin_memset(&c->a[6], 0, 3 * sizeof(__u64));
	/* every probe is on the API's first instruction: the entry rule */
	c->stack_id = gpu_wants_stack(gpu_api_kind(api)) ? gpu_site_stack(ctx, t->mm_id, true)
							 : STRATA_STACK_NONE;
	c->active = 1;
	/* Last, so the time in call excludes our own work above. */
	c->start_ns = bpf_ktime_get_ns();
	return c;
}

/*
 * Ends the call returning here: copies its state to *out and removes it.
 * False for the return of a nested call (its entry was skipped: the stack
 * pointer after return is not the outer entry's + 8) and for threads with
 * no call in flight (other processes, calls entered before we attached).
 */
static __always_inline bool call_exit(struct pt_regs *ctx, struct gpu_call *out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct gpu_call *c = bpf_map_lookup_elem(&gpu_inflight, &tid);

	if (!c || !c->active) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;

		if (bpf_map_lookup_elem(&gpu_targets, &tgid))
			gpu_count(GPU_CNT_ORPHAN_RET);
		return false;
	}
	if (c->sp + 8 != PT_REGS_SP(ctx))
		return false;
	__builtin_memcpy(out, c, sizeof(*out));
	c->active = 0;
	return true;
}

static __always_inline void tally_add(__u32 tgid, __u32 api, __u64 ns, __s64 ret)
{
	struct gpu_tally_key k = { .tgid = tgid, .api = api };
	struct gpu_tally_val *v = bpf_map_lookup_elem(&gpu_tally, &k);

	if (!v) {
		struct gpu_tally_val z = { .min_ns = ~0ULL };

		bpf_map_update_elem(&gpu_tally, &k, &z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&gpu_tally, &k);
		if (!v) {
			gpu_count(GPU_CNT_TALLY_FULL);
			return;
		}
	}
	gpu_add(&v->calls, 1);
	gpu_add(&v->total_ns, ns);
	/* min/max: racy between CPUs (a concurrent extreme can be lost);
	 * they are statistics, and atomics have no min/max. */
	if (ns < v->min_ns)
		v->min_ns = ns;
	if (ns > v->max_ns)
		v->max_ns = ns;
	if (ret) {
		struct gpu_err_key ek = { .tgid = tgid, .api = api, .code = ret };
		__u64 one = 1, *n = bpf_map_lookup_elem(&gpu_errs, &ek);

		if (n)
			gpu_add(n, 1);
		else if (bpf_map_update_elem(&gpu_errs, &ek, &one, BPF_NOEXIST))
			gpu_count(GPU_CNT_TALLY_FULL);
	}
}

/* Per (process, stack, API, object) aggregate. */
static __always_inline void site_add(const struct gpu_call *c, __u64 object, __u64 ns, __u64 bytes,
				     __s64 ret)
{
	struct gpu_site_key k = {
		.tgid = c->tgid,
		.api = c->api,
		.stack_id = c->stack_id,
		.object = object,
	};
	struct gpu_site_val *v = bpf_map_lookup_elem(&gpu_sites, &k);

	if (!v) {
		struct gpu_site_val z = {};

		bpf_map_update_elem(&gpu_sites, &k, &z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&gpu_sites, &k);
		if (!v) {
			gpu_count(GPU_CNT_SITES_FULL);
			return;
		}
	}
	gpu_add(&v->count, 1);
	gpu_add(&v->time_ns, ns);
	gpu_add(&v->bytes, bytes);
	if (ret)
		gpu_add(&v->errors, 1);
}

/* A per-call event for the ring buffer (caller fills a[] and submits). */
static __always_inline struct gpu_event *event_new(const struct gpu_call *c, __s64 ret, __u64 now)
{
	struct gpu_event *e = bpf_ringbuf_reserve(&gpu_events, sizeof(*e), 0);

	if (!e) {
		gpu_count(GPU_CNT_EVENTS_LOST);
		return NULL;
	}
	e->type = GPU_EV_CALL;
	e->api = c->api;
	e->tgid = c->tgid;
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->ret = ret;
	e->start_ns = c->start_ns;
	e->end_ns = now;
	e->stack_id = c->stack_id;
	for (int i = 0; i < 6; i++)
		e->a[i] = 0;
	return e;
}

#endif /* STRATA_BPF_GPU_CALL_BPF_H */
