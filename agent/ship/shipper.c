// SPDX-License-Identifier: Apache-2.0
#include "agent/ship/shipper.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/features.h"
#include "agent/capture/capture_ctl.h"
#include "agent/ship/agent_batch.h"
#include "agent/ship/batch_capture.h"
#include "agent/ship/batch_gpu.h"
#include "agent/ship/batch_sched.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "uploader/batch_builder.h"

struct shipper {
	struct batch_builder *bb;
	struct agent_batch *ab; /* the agent's samples and processes into bb */
	struct uploader *up;
	struct batch_gpu *gpu;	   /* NULL: the session has no GPU layer */
	struct batch_sched *sched; /* NULL: the session has no scheduler layer */
	struct capture_ctl *cap;   /* deep captures (agent/capture/) */
	struct batch_capture *bcap;
	uint32_t freq_hz;
	uint64_t seq;
	struct batch_meta m;			 /* the window's, filled in by the GPU window */
	uint64_t unknown_seen;			 /* ab's frames_unknown at the last period */
	struct bb_kernel_path kpaths[KPATH_MAX]; /* sent in every batch */
};

/* ---- the sink (agent/core/sink.h) ---- */

static int sample(void *ctx, const struct sampler_sample *smp)
{
	struct shipper *sh = ctx;

	return agent_batch__add_sampled(sh->ab, smp);
}

static int timed_sample(void *ctx, const struct sampler_sample *smp)
{
	struct shipper *sh = ctx;

	return batch_capture__sample(sh->bcap, sh->ab, smp);
}

static void gpu_drained(void *ctx, struct gpu *g, const struct gpu_data *d)
{
	struct shipper *sh = ctx;

	batch_gpu__drained(sh->gpu, sh->ab, d);
	batch_capture__drained(sh->bcap, d);
	gpu__alloc_calls_taken(g);
}

/* The OOM killer chose a followed process: its capture, at once. */
static void oom_kill(void *ctx, const struct gpu_data *d, const struct strata_proc_event *e)
{
	struct shipper *sh = ctx;

	batch_capture__oom_kill(sh->bcap, d, e);
}

/* The uploader's thread: the captures the server orders now. */
static void on_reply(void *ctx, const Strata__V1__IngestReply *r)
{
	struct shipper *sh = ctx;

	capture_ctl__post(sh->cap, r->captures, r->n_captures, mono_ns(), realtime_ns());
}

static int gpu_window(void *ctx, struct gpu *g, const struct session_window *w)
{
	struct shipper *sh = ctx;
	int err;

	sh->m.start_ns = w->start_ns;
	sh->m.end_ns = w->end_ns;
	err = batch_gpu__add(sh->gpu, sh->ab, gpu__data(g), &sh->m);
	batch_capture__gpu_window(sh->bcap, sh->gpu, sh->ab, gpu__data(g));
	gpu__calls_taken(g);
	return err;
}

/* The scheduler layer, every drain: the off-CPU time, resolved now. */
static int sched_drained(void *ctx, struct sched_collector *c)
{
	struct shipper *sh = ctx;

	return batch_sched__offcpu(sh->sched, sh->ab, c);
}

/* The scheduler layer: this window's deltas. */
static int sched_window(void *ctx, struct sched_collector *c, const struct session_window *w)
{
	struct shipper *sh = ctx;
	int err = batch_sched__add(sh->sched, sh->ab, c);

	if (err == -ENOMEM)
		return err;
	if (err)
		pr_warn("agent: scheduler records left out: %s", strerror(-err));
	return 0;
}

struct shipper *shipper__new(const struct shipper_opts *o, struct session *s)
{
	struct shipper *sh = calloc(1, sizeof(*sh));
	struct batch_builder_opts bo = { .sz = sizeof(bo), .node = o->node };
	struct session_sources src;

	if (!sh)
		return NULL;
	session__sources(s, &src);
	sh->freq_hz = o->freq_hz;
	struct uploader_opts uo = o->upload;

	sh->cap = capture_ctl__new();
	sh->bcap = sh->cap ? batch_capture__new(sh->cap) : NULL;
	if (!sh->bcap)
		goto err_out;
	uo.node = o->node; /* the batches' node: symbol uploads name it */
	uo.on_reply = on_reply;
	uo.on_reply_ctx = sh;
	sh->up = uploader__new(&uo);
	if (!sh->up)
		goto err_out;
	bo.on_file = uploader__note_file;
	bo.on_file_ctx = sh->up;
	/* the kernel's feature paths, in every batch (docs/kernels.md) */
	for (int i = 0; src.features && i < KPATH_MAX && i < BB_MAX_KERNEL_PATHS; i++) {
		sh->kpaths[i].name = kernel_path__name(i);
		sh->kpaths[i].taken =
			kernel_features__path(src.features, i, &sh->kpaths[i].fallback);
		bo.nkernel_paths = (size_t)i + 1;
	}
	bo.kernel_paths = sh->kpaths;
	bo.kernel_release = src.features ? src.features->release : NULL;
	sh->bb = batch_builder__new(&bo);
	if (!sh->bb)
		goto err_out;
	struct batch_sources bsrc = {
		.procs = src.procs,
		.ksyms = src.ksyms,
		.unwind = src.unwind,
		.python = src.python,
	};
	sh->ab = agent_batch__new(sh->bb, &bsrc);
	if (!sh->ab)
		goto err_out;
	if (src.gpu) {
		sh->gpu = batch_gpu__new(src.mods, src.procs);
		if (!sh->gpu)
			goto err_out;
	}
	if (src.sched) {
		sh->sched = batch_sched__new();
		if (!sh->sched)
			goto err_out;
	}
	session__set_sink(s, &(struct session_sink){
				     .ctx = sh,
				     .sample = sample,
				     .timed_sample = timed_sample,
				     .gpu_drained = gpu_drained,
				     .sched_drained = sched_drained,
				     .gpu_window = gpu_window,
				     .sched_window = sched_window,
				     .oom_kill = oom_kill,
			     });
	return sh;
err_out:
	shipper__free(sh, 0);
	return NULL;
}

int shipper__period(struct shipper *sh, struct session *s)
{
	struct agent_batch_stats as;
	struct session_window w;
	struct batch_meta m;
	uint8_t *data = NULL;
	size_t len = 0;
	int err;

	/* The window's GPU and scheduler records are added inside its last
	 * drain (gpu_window, sched_window). */
	sh->m = (struct batch_meta){ 0 };
	err = session__end_window(s, &w);
	if (err)
		return err;
	batch_capture__runs(sh->bcap, sh->ab); /* each capture's progress here */
	agent_batch__stats(sh->ab, &as);
	m = sh->m;
	m.start_ns = w.start_ns;
	m.end_ns = w.end_ns;
	m.freq_hz = sh->freq_hz;
	m.drops = w.drops;
	m.spool_dropped = uploader__take_spool_dropped(sh->up);
	m.seq = ++sh->seq;
	/* Unknown frames are counted by the conversion, not the resolver. */
	m.drops.proc_unknown = as.frames_unknown - sh->unknown_seen;
	sh->unknown_seen = as.frames_unknown;
	err = batch_builder__finish(sh->bb, &m, &data, &len);
	if (err)
		return err;
	err = uploader__submit(sh->up, data, len, m.spool_dropped);
	free(data);
	if (err)
		pr_warn("agent: cannot spool batch %llu: %s", (unsigned long long)m.seq,
			strerror(-err));
	return err;
}

int shipper__tick(struct shipper *sh, struct session *s)
{
	return capture_ctl__tick(sh->cap, s, mono_ns(), realtime_ns());
}

void shipper__stop(struct shipper *sh, struct session *s)
{
	capture_ctl__stop(sh->cap, s, mono_ns(), realtime_ns());
}

void shipper__report(struct shipper *sh)
{
	struct batch_builder_stats bs;
	struct agent_batch_stats as;
	struct uploader_stats us;

	batch_builder__stats(sh->bb, &bs);
	agent_batch__stats(sh->ab, &as);
	uploader__stats(sh->up, &us);
	fprintf(stderr,
		"  batches: built=%llu samples=%llu rows_dropped=%llu raw=%llu B wire=%llu B "
		"proc_read_failed=%llu proc_cache_evicted=%llu\n"
		"  upload: sent=%llu duplicates=%llu attempts=%llu failures=%llu rejected=%llu "
		"backoff_ms=%u last_status=%d symbols sent=%llu failed=%llu skipped=%llu "
		"noted_resets=%llu\n"
		"  spool: files=%llu bytes=%llu in_memory=%llu dropped_full=%llu "
		"write_failed=%llu disk_failed=%llu dir_made=%llu lost=%llu recovered=%llu\n",
		(unsigned long long)bs.batches, (unsigned long long)bs.samples,
		(unsigned long long)bs.rows_dropped, (unsigned long long)bs.raw_bytes,
		(unsigned long long)bs.wire_bytes, (unsigned long long)as.proc_read_failed,
		(unsigned long long)as.proc_cache_evicted, (unsigned long long)us.sent,
		(unsigned long long)us.duplicates, (unsigned long long)us.attempts,
		(unsigned long long)us.failures, (unsigned long long)us.rejected, us.backoff_ms,
		us.last_status, (unsigned long long)us.symbols_sent,
		(unsigned long long)us.symbols_failed, (unsigned long long)us.symbols_skipped,
		(unsigned long long)us.symbols_noted_resets, (unsigned long long)us.spool.files,
		(unsigned long long)us.spool.bytes, (unsigned long long)us.spool.mem_files,
		(unsigned long long)us.spool.dropped_full,
		(unsigned long long)us.spool.write_failed, (unsigned long long)us.spool.disk_failed,
		(unsigned long long)us.spool.dir_made, (unsigned long long)us.spool.lost,
		(unsigned long long)us.spool.recovered);
	if (sh->sched) {
		struct batch_sched_stats ss;

		batch_sched__stats(sh->sched, &ss);
		fprintf(stderr,
			"  sched rows: records=%llu stacks_dropped=%llu threads_over=%llu "
			"cpu_rows_over=%llu cpu_rows_forgotten=%llu offcpu_unmerged=%llu\n",
			(unsigned long long)ss.records, (unsigned long long)ss.stacks_dropped,
			(unsigned long long)ss.threads_over, (unsigned long long)ss.cpu_rows_over,
			(unsigned long long)ss.cpu_rows_forgotten,
			(unsigned long long)ss.offcpu_unmerged);
	}
}

void shipper__free(struct shipper *sh, uint32_t drain_ms)
{
	if (!sh)
		return;
	if (sh->up && drain_ms && uploader__drain(sh->up, drain_ms))
		pr_warn("agent: server not reached before exit: batches stay in the spool");
	if (sh->up && sh->bb && log_enabled(LOG_INFO)) {
		struct batch_builder_stats bs;
		struct uploader_stats us;

		batch_builder__stats(sh->bb, &bs);
		uploader__stats(sh->up, &us);
		fprintf(stderr,
			"agent: final batches: built=%llu samples=%llu rows_dropped=%llu sent=%llu "
			"duplicates=%llu rejected=%llu spooled=%llu\n",
			(unsigned long long)bs.batches, (unsigned long long)bs.samples,
			(unsigned long long)bs.rows_dropped, (unsigned long long)us.sent,
			(unsigned long long)us.duplicates, (unsigned long long)us.rejected,
			(unsigned long long)us.spool.files);
	}
	uploader__free(sh->up); /* its thread posts to cap: stopped first */
	batch_capture__free(sh->bcap);
	capture_ctl__free(sh->cap);
	batch_gpu__free(sh->gpu);
	batch_sched__free(sh->sched);
	agent_batch__free(sh->ab);
	batch_builder__free(sh->bb);
	free(sh);
}
