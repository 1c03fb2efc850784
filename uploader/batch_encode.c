// SPDX-License-Identifier: Apache-2.0
/*
 * Encoding a finished batch: the interned tables (uploader/batch_tables.h)
 * as protobuf-c messages over them, packed and zstd-compressed.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <zstd.h>

#include "uploader/batch_builder.h"
#include "uploader/batch_tables.h"

#include "strata.pb-c.h"

struct pb_arena {
	Strata__V1__Process *procs;
	Strata__V1__Process **proc_ptrs;
	Strata__V1__RankLabels *ranks;
	Strata__V1__Label *labels;
	Strata__V1__Label **label_ptrs;
	Strata__V1__Mapping *maps;
	Strata__V1__Mapping **map_ptrs;
	Strata__V1__Frame *frames;
	Strata__V1__Frame **frame_ptrs;
	Strata__V1__Stack *stacks;
	Strata__V1__Stack **stack_ptrs;
	Strata__V1__CpuSample *samples;
	Strata__V1__CpuSample **sample_ptrs;
	void **row_ptrs[BB_LIST_MAX];
};

static void arena_free(struct pb_arena *a)
{
	free(a->procs);
	free(a->proc_ptrs);
	free(a->ranks);
	free(a->labels);
	free(a->label_ptrs);
	free(a->maps);
	free(a->map_ptrs);
	free(a->frames);
	free(a->frame_ptrs);
	free(a->stacks);
	free(a->stack_ptrs);
	free(a->samples);
	free(a->sample_ptrs);
	for (int l = 0; l < BB_LIST_MAX; l++)
		free(a->row_ptrs[l]);
}

#define ALLOC(p, n) ((p) = calloc((n) != 0 ? (n) : 1, sizeof(*(p))))

/* The other record lists: pointer arrays over the rows (fixed up here:
 * rows move while their vector grows). */
static int fill_rows(struct batch_builder *bb, Strata__V1__Batch *b, struct pb_arena *a)
{
	for (int l = 0; l < BB_LIST_MAX; l++) {
		size_t size = batch_row_size((enum bb_list)l);

		if (!ALLOC(a->row_ptrs[l], bb->rows[l].n))
			return -ENOMEM;
		for (uint32_t i = 0; i < bb->rows[l].n; i++)
			a->row_ptrs[l][i] = (char *)bb->rows[l].v + (size_t)i * size;
	}
	for (uint32_t i = 0; i < bb->rows[BB_TALLY].n; i++) {
		struct bb_tally_row *t = a->row_ptrs[BB_TALLY][i];

		for (size_t c = 0; c < t->m.n_errors && c < BB_TALLY_CODES; c++)
			t->ptrs[c] = &t->codes[c];
		t->m.errors = t->m.n_errors ? t->ptrs : NULL;
	}
#define SET_LIST(field, l)                         \
	do {                                       \
		b->n_##field = bb->rows[l].n;      \
		b->field = (void *)a->row_ptrs[l]; \
	} while (0)
	SET_LIST(offcpu_samples, BB_OFFCPU);
	SET_LIST(sched_stats, BB_SCHED);
	SET_LIST(irq_stats, BB_IRQ);
	SET_LIST(time_breakdown, BB_BREAKDOWN);
	SET_LIST(cuda_launches, BB_LAUNCH);
	SET_LIST(cuda_allocs, BB_ALLOC);
	SET_LIST(cuda_alloc_failures, BB_ALLOC_FAIL);
	SET_LIST(cuda_transfers, BB_TRANSFER);
	SET_LIST(cuda_api_tally, BB_TALLY);
	SET_LIST(probe_duty, BB_DUTY);
	SET_LIST(nccl_comms, BB_COMM);
	SET_LIST(nccl_collectives, BB_COLL);
	SET_LIST(nccl_stats, BB_COLL_STAT);
	SET_LIST(softirq_vectors, BB_SOFTIRQ);
	SET_LIST(foreign_runs, BB_FOREIGN);
	SET_LIST(target_cpus, BB_TARGET_CPU);
	SET_LIST(inflight_calls, BB_INFLIGHT);
	SET_LIST(thread_states, BB_THREAD);
	SET_LIST(capture_runs, BB_CAPTURE_RUN);
	SET_LIST(capture_samples, BB_CAPTURE_SAMPLE);
	SET_LIST(gpu_calls, BB_GPU_CALL);
#undef SET_LIST
	return 0;
}

static int fill(struct batch_builder *bb, Strata__V1__Batch *b, struct pb_arena *a)
{
	const struct wproc *wp = bb->procs.v;
	const struct wmapping *wm = bb->mappings.v;
	const struct wframe *wf = bb->frames.v;
	const struct wstack *ws = bb->stacks.v;
	const struct wsample *wsm = bb->samples.v;

	if (!ALLOC(a->labels, (size_t)bb->procs.n * BB_MAX_LABELS) ||
	    !ALLOC(a->label_ptrs, (size_t)bb->procs.n * BB_MAX_LABELS) ||
	    !ALLOC(a->procs, bb->procs.n) || !ALLOC(a->proc_ptrs, bb->procs.n) ||
	    !ALLOC(a->ranks, bb->procs.n) || !ALLOC(a->maps, bb->mappings.n) ||
	    !ALLOC(a->map_ptrs, bb->mappings.n) || !ALLOC(a->frames, bb->frames.n) ||
	    !ALLOC(a->frame_ptrs, bb->frames.n) || !ALLOC(a->stacks, bb->stacks.n) ||
	    !ALLOC(a->stack_ptrs, bb->stacks.n) || !ALLOC(a->samples, bb->samples.n) ||
	    !ALLOC(a->sample_ptrs, bb->samples.n))
		return -ENOMEM;
	for (uint32_t i = 0; i < bb->procs.n; i++) {
		Strata__V1__Process *p = &a->procs[i];

		strata__v1__process__init(p);
		p->pid = wp[i].pid;
		p->ppid = wp[i].ppid;
		p->start_time_ns = wp[i].start_time_ns;
		p->comm_str = wp[i].comm;
		p->cmdline_str = wp[i].cmdline;
		p->cgroup_str = wp[i].cgroup;
		p->container_str = wp[i].container;
		p->pod_str = wp[i].pod;
		p->job_str = wp[i].job;
		p->torchelastic_run_id_str = wp[i].te;
		p->slurm_job_id_str = wp[i].slurm;
		p->exit_ns = wp[i].exit_ns;
		for (int l = 0; l < wp[i].nlabels; l++) {
			size_t at = (size_t)i * BB_MAX_LABELS + (size_t)l;

			strata__v1__label__init(&a->labels[at]);
			a->labels[at].key_str = wp[i].labels[l][0];
			a->labels[at].value_str = wp[i].labels[l][1];
			a->label_ptrs[at] = &a->labels[at];
		}
		p->n_labels = (size_t)wp[i].nlabels;
		p->labels = wp[i].nlabels ? &a->label_ptrs[(size_t)i * BB_MAX_LABELS] : NULL;
		if (wp[i].has_rank) {
			strata__v1__rank_labels__init(&a->ranks[i]);
			a->ranks[i].rank = wp[i].rank;
			a->ranks[i].local_rank = wp[i].local_rank;
			a->ranks[i].world_size = wp[i].world_size;
			p->rank = &a->ranks[i];
		}
		a->proc_ptrs[i] = p;
	}
	for (uint32_t i = 0; i < bb->mappings.n; i++) {
		strata__v1__mapping__init(&a->maps[i]);
		a->maps[i].build_id.data = (uint8_t *)wm[i].id;
		a->maps[i].build_id.len = wm[i].idlen;
		a->maps[i].path_str = wm[i].path;
		a->map_ptrs[i] = &a->maps[i];
	}
	for (uint32_t i = 0; i < bb->frames.n; i++) {
		Strata__V1__Frame *f = &a->frames[i];

		strata__v1__frame__init(f);
		f->kind = (Strata__V1__Frame__Kind)wf[i].kind;
		f->mapping = wf[i].mapping;
		f->address = wf[i].addr;
		f->is_return = wf[i].is_return;
		f->name_str = wf[i].name;
		f->module_str = wf[i].module;
		f->file_str = wf[i].file;
		f->line = wf[i].line;
		a->frame_ptrs[i] = f;
	}
	for (uint32_t i = 0; i < bb->stacks.n; i++) {
		strata__v1__stack__init(&a->stacks[i]);
		a->stacks[i].n_frames = ws[i].n;
		a->stacks[i].frames = ws[i].n ? &a->frame_ptrs[ws[i].first] : NULL;
		a->stack_ptrs[i] = &a->stacks[i];
	}
	for (uint32_t i = 0; i < bb->samples.n; i++) {
		Strata__V1__CpuSample *s = &a->samples[i];

		strata__v1__cpu_sample__init(s);
		s->stack = wsm[i].stack;
		s->process = wsm[i].process;
		s->tid = wsm[i].tid;
		s->thread_comm_str = wsm[i].comm;
		s->count = wsm[i].count;
		a->sample_ptrs[i] = s;
	}
	b->n_strings = bb->strings.n;
	b->strings = bb->strings.v;
	b->n_processes = bb->procs.n;
	b->processes = a->proc_ptrs;
	b->n_mappings = bb->mappings.n;
	b->mappings = a->map_ptrs;
	b->n_stacks = bb->stacks.n;
	b->stacks = a->stack_ptrs;
	b->n_cpu_samples = bb->samples.n;
	b->cpu_samples = a->sample_ptrs;
	return fill_rows(bb, b, a);
}

int batch_builder__finish(struct batch_builder *bb, const struct batch_meta *m, uint8_t **out,
			  size_t *len)
{
	Strata__V1__Batch b = STRATA__V1__BATCH__INIT;
	Strata__V1__Clock clock = STRATA__V1__CLOCK__INIT;
	Strata__V1__Drops drops = STRATA__V1__DROPS__INIT;
	struct pb_arena a = { 0 };
	uint8_t id[16], *raw = NULL, *z = NULL;
	size_t rlen, zcap, zlen;
	int err;

	if (batch_builder__string(bb, "") == UINT32_MAX) /* a batch always has strings[0] */
		return -ENOMEM;
	/* and stacks[0], the empty stack: rows say "no stack" with index 0,
	 * and a batch of such rows only (a job's last collectives, their
	 * stacks not resolved yet) was refused by the server for good */
	if (batch_builder__stack(bb, NULL, 0) < 0)
		return -ENOMEM;
	if (getrandom(id, sizeof(id), 0) != sizeof(id))
		return -EIO;
	b.version = STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT;
	b.batch_id.data = id;
	b.batch_id.len = sizeof(id);
	b.node = bb->node;
	b.agent_version = (char *)bb->o.agent_version;
	b.seq = m->seq;
	b.agent_run_id.data = bb->run_id;
	b.agent_run_id.len = sizeof(bb->run_id);
	b.start_ns = m->start_ns;
	b.end_ns = m->end_ns > m->start_ns ? m->end_ns : m->start_ns;
	clock.source = STRATA__V1__CLOCK__SOURCE__REALTIME;
	b.clock = &clock;
	b.freq_hz = m->freq_hz;
	drops.map_full = m->drops.map_full;
	drops.stack_lost = m->drops.stack_lost;
	drops.proc_unknown = m->drops.proc_unknown;
	drops.other = m->drops.other + m->other_lost;
	drops.cuda_events_lost = m->cuda_events_lost;
	drops.nccl_events_lost = m->nccl_events_lost;
	drops.spool_dropped = m->spool_dropped;
	drops.batch_rows_dropped = bb->rows_dropped;
	b.drops = &drops;
	Strata__V1__KernelPath kp[BB_MAX_KERNEL_PATHS], *kpp[BB_MAX_KERNEL_PATHS];
	b.kernel_release = (char *)(bb->o.kernel_release ? bb->o.kernel_release : "");
	for (size_t i = 0; i < bb->o.nkernel_paths && i < BB_MAX_KERNEL_PATHS; i++) {
		strata__v1__kernel_path__init(&kp[i]);
		kp[i].name = (char *)bb->o.kernel_paths[i].name;
		kp[i].taken = (char *)bb->o.kernel_paths[i].taken;
		kp[i].fallback = bb->o.kernel_paths[i].fallback;
		kpp[i] = &kp[i];
		b.n_kernel_paths = i + 1;
	}
	b.kernel_paths = kpp;

	err = fill(bb, &b, &a);
	if (err)
		goto out;
	rlen = strata__v1__batch__get_packed_size(&b);
	raw = malloc(rlen ? rlen : 1);
	zcap = ZSTD_compressBound(rlen);
	z = malloc(zcap);
	if (!raw || !z) {
		err = -ENOMEM;
		goto out;
	}
	strata__v1__batch__pack(&b, raw);
	zlen = ZSTD_compress(z, zcap, raw, rlen, bb->o.zstd_level);
	if (ZSTD_isError(zlen)) {
		err = -EIO;
		goto out;
	}
	bb->st.batches++;
	bb->st.raw_bytes += rlen;
	bb->st.wire_bytes += zlen;
	*out = z;
	*len = zlen;
	z = NULL;
	batch_reset(bb);
out:
	arena_free(&a);
	free(raw);
	free(z);
	return err;
}
