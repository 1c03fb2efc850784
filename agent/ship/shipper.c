// SPDX-License-Identifier: Apache-2.0
#include "agent/ship/shipper.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ship/agent_batch.h"
#include "agent/ship/batch_gpu.h"
#include "agent/ship/batch_sched.h"
#include "lib/log.h"
#include "uploader/batch_builder.h"

struct shipper {
	struct batch_builder *bb;
	struct agent_batch *ab; /* the agent's samples and processes into bb */
	struct uploader *up;
	struct batch_gpu *gpu;	   /* NULL: the session has no GPU layer */
	struct batch_sched *sched; /* NULL: the session has no scheduler layer */
	uint32_t freq_hz;
	uint64_t seq;
	uint64_t unknown_seen; /* ab's frames_unknown at the last period */
};

static void gpu_drained(void *ctx, const struct gpu_data *d)
{
	struct shipper *sh = ctx;

	batch_gpu__drained(sh->gpu, sh->ab, d);
}

struct shipper *shipper__new(const struct shipper_opts *o, struct session *s)
{
	struct shipper *sh = calloc(1, sizeof(*sh));
	struct batch_builder_opts bo = { .sz = sizeof(bo), .node = o->node };

	if (!sh)
		return NULL;
	sh->freq_hz = o->freq_hz;
	sh->up = uploader__new(&o->upload);
	if (!sh->up)
		goto err_out;
	bo.on_file = uploader__note_file;
	bo.on_file_ctx = sh->up;
	sh->bb = batch_builder__new(&bo);
	if (!sh->bb)
		goto err_out;
	struct batch_sources src = {
		.procs = s->procs,
		.ksyms = s->ksyms,
		.unwind = s->unwind,
		.python = s->python,
	};
	sh->ab = agent_batch__new(sh->bb, &src);
	if (!sh->ab)
		goto err_out;
	session__set_consumer(s, agent_batch__add_sampled, sh->ab);
	if (s->gpu) {
		sh->gpu = batch_gpu__new(s->mods);
		if (!sh->gpu)
			goto err_out;
		s->gpu_drained = gpu_drained;
		s->gpu_drained_ctx = sh;
	}
	if (s->sched) {
		sh->sched = batch_sched__new();
		if (!sh->sched)
			goto err_out;
	}
	return sh;
err_out:
	shipper__free(sh, 0);
	return NULL;
}

int shipper__period(struct shipper *sh, struct session *s)
{
	/* The session's own profile stays empty; it still carries the window
	 * and the sampler's drop counters for this period. */
	struct profile *p = session__take_profile(s);
	struct agent_batch_stats as;
	struct batch_meta m;
	uint8_t *data = NULL;
	size_t len = 0;
	int err;

	if (!p)
		return -ENOMEM;
	agent_batch__stats(sh->ab, &as);
	m = (struct batch_meta){
		.start_ns = p->start_ns,
		.end_ns = p->end_ns,
		.freq_hz = sh->freq_hz,
		.drops = p->drops,
		.spool_dropped = uploader__take_spool_dropped(sh->up),
		.seq = ++sh->seq,
	};
	/* Unknown frames are counted by the conversion, not the resolver. */
	m.drops.proc_unknown = as.frames_unknown - sh->unknown_seen;
	sh->unknown_seen = as.frames_unknown;
	profile__free(p);
	if (sh->gpu) { /* drained by session__take_profile */
		err = batch_gpu__add(sh->gpu, sh->ab, gpu__data(s->gpu), &m);
		gpu__calls_taken(s->gpu);
		if (err)
			return err;
	}
	if (sh->sched) { /* scheduler layer: this window's deltas and off-CPU drain */
		err = batch_sched__add(sh->sched, sh->ab, s->sched);
		if (err == -ENOMEM)
			return err;
		if (err)
			pr_warn("agent: scheduler records left out: %s", strerror(-err));
	}
	err = batch_builder__finish(sh->bb, &m, &data, &len);
	if (err)
		return err;
	err = uploader__submit(sh->up, data, len);
	free(data);
	if (err)
		pr_warn("agent: cannot spool batch %llu: %s", (unsigned long long)m.seq,
			strerror(-err));
	return err;
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
		"proc_read_failed=%llu\n"
		"  upload: sent=%llu duplicates=%llu attempts=%llu failures=%llu rejected=%llu "
		"backoff_ms=%u last_status=%d symbols sent=%llu failed=%llu skipped=%llu\n"
		"  spool: files=%llu bytes=%llu dropped_full=%llu write_failed=%llu "
		"recovered=%llu\n",
		(unsigned long long)bs.batches, (unsigned long long)bs.samples,
		(unsigned long long)bs.rows_dropped, (unsigned long long)bs.raw_bytes,
		(unsigned long long)bs.wire_bytes, (unsigned long long)as.proc_read_failed,
		(unsigned long long)us.sent, (unsigned long long)us.duplicates,
		(unsigned long long)us.attempts, (unsigned long long)us.failures,
		(unsigned long long)us.rejected, us.backoff_ms, us.last_status,
		(unsigned long long)us.symbols_sent, (unsigned long long)us.symbols_failed,
		(unsigned long long)us.symbols_skipped, (unsigned long long)us.spool.files,
		(unsigned long long)us.spool.bytes, (unsigned long long)us.spool.dropped_full,
		(unsigned long long)us.spool.write_failed, (unsigned long long)us.spool.recovered);
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
	uploader__free(sh->up);
	batch_gpu__free(sh->gpu);
	batch_sched__free(sh->sched);
	agent_batch__free(sh->ab);
	batch_builder__free(sh->bb);
	free(sh);
}
