// SPDX-License-Identifier: Apache-2.0
#include "agent/ship/batch_capture.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/capture/alloc_ring.h"
#include "agent/gpu/gpu_names.h"
#include "agent/ship/proc_labels.h"
#include "lib/clock.h"
#include "lib/log.h"

#define S_NS 1000000000ULL
#define OOM_PENDING 8 /* out-of-memory rings waiting for the window's end */

struct oom {
	uint32_t tgid;
	bool killed;		  /* by the OOM killer (oom_kill), else a CUDA return (oom) */
	uint64_t since_ns, at_ns; /* the ring from since_ns; the failure at at_ns */
};

struct batch_capture {
	struct capture_ctl *ctl;
	struct alloc_ring *ring;
	size_t calls_seen; /* the layer's calls already looked at this window */
	struct oom pending[OOM_PENDING];
	uint32_t npending;
	struct oom last[RING_PROCS]; /* each process's latest out-of-memory capture */
	struct batch_capture_stats st;
};

struct batch_capture *batch_capture__new(struct capture_ctl *ctl)
{
	struct batch_capture *bc = calloc(1, sizeof(*bc));

	if (!bc)
		return NULL;
	bc->ctl = ctl;
	bc->ring = alloc_ring__new();
	if (!bc->ring) {
		free(bc);
		return NULL;
	}
	return bc;
}

void batch_capture__free(struct batch_capture *bc)
{
	if (!bc)
		return;
	alloc_ring__free(bc->ring);
	free(bc);
}

int batch_capture__sample(struct batch_capture *bc, struct agent_batch *ab,
			  const struct sampler_sample *s)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	Strata__V1__CaptureSample *r;
	uint32_t process;
	int64_t stack;
	/* the BPF stamp is CLOCK_MONOTONIC: the wire's times are realtime */
	int64_t offset = (int64_t)realtime_ns() - (int64_t)mono_ns();
	int err = agent_batch__sampled_stack(ab, s, &process, &stack);

	if (!err && stack < 0)
		err = (int)stack;
	if (err || !(r = batch_builder__row(bb, BB_CAPTURE_SAMPLE))) {
		if (err == -E2BIG)
			batch_builder__dropped(bb, 1);
		bc->st.samples_dropped += s->count;
		capture_ctl__count(bc->ctl, s->key->tgid, 0, 0, s->count);
		return err == -ENOMEM ? err : 0;
	}
	r->process = process;
	r->tid = s->key->tid;
	r->stack = (uint32_t)stack;
	r->time_ns = (uint64_t)((int64_t)s->time_ns + offset);
	bc->st.samples++;
	capture_ctl__count(bc->ctl, s->key->tgid, s->count, 0, 0);
	return 0;
}

/* An allocation that failed for lack of device memory (the runtime's
 * cudaErrorMemoryAllocation and the driver's CUDA_ERROR_OUT_OF_MEMORY are
 * both 2). */
static int out_of_memory(const struct gpu_event *e)
{
	return gpu_api_kind(e->api) == GPU_KIND_ALLOC && e->ret == 2;
}

/*
 * Starts the agent's own capture of tgid, which ran out of memory at at_ns
 * (CLOCK_REALTIME): killed, the kernel's OOM killer chose it (trigger
 * oom_kill), else a CUDA allocation failed (oom).  Its ring's last
 * OOM_BEFORE_S seconds go with the window (batch_capture__gpu_window).
 * One per process and kind per OOM_REPEAT_S, OOM_PENDING per window.
 */
static void oom_capture(struct batch_capture *bc, const struct gpu_data *d, uint32_t tgid,
			bool killed, uint64_t at_ns)
{
	const struct gpu_proc_info *pi = d ? gpu_data__proc(d, tgid) : NULL;
	uint64_t since = at_ns > OOM_BEFORE_S * S_NS ? at_ns - OOM_BEFORE_S * S_NS : 0;
	const char *job = pi ? gpu_proc_info__job(pi) : "";
	struct proc_labels *l = NULL;
	struct oom *last = NULL;
	char id[33];
	int err;

	for (int i = 0; i < RING_PROCS && !last; i++)
		if (bc->last[i].tgid == tgid && bc->last[i].killed == killed)
			last = &bc->last[i];
	if ((last && at_ns < last->at_ns + OOM_REPEAT_S * S_NS) || bc->npending == OOM_PENDING) {
		bc->st.oom_skipped++;
		return;
	}
	if (!last) { /* the oldest entry makes room */
		last = &bc->last[0];
		for (int i = 1; i < RING_PROCS; i++)
			if (bc->last[i].at_ns < last->at_ns)
				last = &bc->last[i];
	}
	/* its environment was not read yet: now, while the process lives (a
	 * killed one may be gone already: the server then takes the job its
	 * batch's process row names) */
	if (!job[0] && (l = malloc(sizeof(*l))) &&
	    !proc_labels__read(tgid, proc_labels__boot_epoch_ns(), 0, l))
		job = l->job;
	err = capture_ctl__start_own(bc->ctl, killed ? "oom_kill" : "oom", tgid, job,
				     killed ? OOM_KILL_AFTER_S : OOM_AFTER_S, OOM_FREQ_HZ, since,
				     mono_ns(), realtime_ns(), id);
	free(l);
	if (err) {
		bc->st.oom_skipped++;
		return;
	}
	*last = (struct oom){ .tgid = tgid, .killed = killed, .at_ns = at_ns };
	bc->pending[bc->npending++] = (struct oom){
		.tgid = tgid,
		.killed = killed,
		.since_ns = since,
		.at_ns = at_ns,
	};
	if (killed)
		bc->st.oom_kills++;
	else
		bc->st.ooms++;
	pr_info("capture %s: process %u %s: its last %d s of allocations and a %d s capture", id,
		tgid, killed ? "chosen by the OOM killer" : "ran out of device memory",
		OOM_BEFORE_S, killed ? OOM_KILL_AFTER_S : OOM_AFTER_S);
}

void batch_capture__oom_kill(struct batch_capture *bc, const struct gpu_data *d,
			     const struct strata_proc_event *e)
{
	/* the event's stamp is CLOCK_MONOTONIC; the ring's, realtime */
	uint64_t mono = mono_ns(), ago = mono > e->ts_ns ? mono - e->ts_ns : 0;

	oom_capture(bc, d, e->tgid, true, realtime_ns() - ago);
}

static void ring_push(struct batch_capture *bc, const struct gpu_data *d, const struct gpu_event *e)
{
	uint32_t kind = gpu_api_kind(e->api);

	if (kind != GPU_KIND_ALLOC && kind != GPU_KIND_FREE)
		return;
	alloc_ring__push(bc->ring, e);
	if (out_of_memory(e))
		oom_capture(bc, d, e->tgid, false, e->start_ns);
}

void batch_capture__drained(struct batch_capture *bc, const struct gpu_data *d)
{
	/* a traced process's allocations are among its calls; the others'
	 * apart (the caller takes them after this) */
	if (bc->calls_seen > d->ncalls) /* the layer forgot its calls */
		bc->calls_seen = 0;
	for (; bc->calls_seen < d->ncalls; bc->calls_seen++)
		ring_push(bc, d, &d->calls[bc->calls_seen].ev);
	for (size_t i = 0; i < d->nalloc_calls; i++)
		ring_push(bc, d, &d->alloc_calls[i].ev);
}

struct ring_ship {
	struct batch_capture *bc;
	struct batch_gpu *g;
	struct agent_batch *ab;
	const struct gpu_data *d;
	uint64_t before_ns; /* what the capture itself sends from here on */
};

static void ship_ring_call(void *ctx, const struct gpu_event *e)
{
	struct ring_ship *rs = ctx;

	if (e->start_ns > rs->before_ns && capture_ctl__captured(rs->bc->ctl, e->tgid, e->start_ns))
		return; /* the capture's own calls carry it */
	if (!batch_gpu__call_row(rs->g, rs->ab, rs->d, e))
		rs->bc->st.oom_rows++;
}

void batch_capture__gpu_window(struct batch_capture *bc, struct batch_gpu *g,
			       struct agent_batch *ab, const struct gpu_data *d)
{
	for (size_t i = 0; i < d->ncalls; i++) {
		const struct gpu_event *e = &d->calls[i].ev;
		uint32_t kind = gpu_api_kind(e->api);

		if (kind != GPU_KIND_LAUNCH && kind != GPU_KIND_ALLOC && kind != GPU_KIND_FREE &&
		    kind != GPU_KIND_COPY && kind != GPU_KIND_SYNC)
			continue; /* NCCL calls go as collectives */
		if (!capture_ctl__captured(bc->ctl, e->tgid, e->start_ns))
			continue;
		if (batch_gpu__call_row(g, ab, d, e)) {
			bc->st.calls_dropped++;
			capture_ctl__count(bc->ctl, e->tgid, 0, 0, 1);
		} else {
			bc->st.calls++;
			capture_ctl__count(bc->ctl, e->tgid, 0, 1, 0);
		}
	}
	for (uint32_t i = 0; i < bc->npending; i++) {
		struct ring_ship rs = { bc, g, ab, d, bc->pending[i].at_ns };

		alloc_ring__take(bc->ring, bc->pending[i].tgid, bc->pending[i].since_ns,
				 ship_ring_call, &rs);
	}
	bc->npending = 0;
	bc->calls_seen = 0; /* the layer forgets its calls after the window */
}

static void run_row(void *ctx, const struct capture_run *run)
{
	struct batch_builder *bb = agent_batch__builder(ctx);
	Strata__V1__CaptureRun *r = batch_builder__row(bb, BB_CAPTURE_RUN);

	if (!r)
		return;
	r->capture_str = batch_builder__string(bb, run->id);
	r->start_ns = run->start_real;
	r->end_ns = run->state == CAP_ENDED ? run->end_real : 0;
	r->end_reason_str =
		batch_builder__string(bb, run->state == CAP_ENDED ? run->end_reason : "");
	r->trigger_str = batch_builder__string(bb, run->trigger);
	r->pid = run->trigger[0] && run->npids ? run->pids[0] : 0;
	if (run->trigger[0]) {
		r->job_str = batch_builder__string(bb, run->job);
		r->from_ns = run->from_real;
		r->until_ns = (run->start_real ? run->start_real : realtime_ns()) +
			      (run->end_mono - run->start_mono);
	}
	r->freq_hz = run->freq_hz;
	r->processes = run->processes;
	r->samples = run->samples;
	r->gpu_calls = run->gpu_calls_seen;
	r->dropped = run->dropped;
}

void batch_capture__runs(struct batch_capture *bc, struct agent_batch *ab)
{
	capture_ctl__report(bc->ctl, run_row, ab);
}

void batch_capture__stats(const struct batch_capture *bc, struct batch_capture_stats *st)
{
	*st = bc->st;
}
