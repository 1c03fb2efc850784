// SPDX-License-Identifier: Apache-2.0
/*
 * The tables as struct gpu_data (what the local writers and the batch
 * builder read), the layer's state and its -v report.
 */
#include "agent/gpu/gpu_comm_state.h"
#include "agent/gpu/gpu_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lib/clock.h"
#include "lib/enum_names.h"
#include "lib/log.h"
#include "gpu.skel.h"

void gpu_remember_procs(struct gpu *g)
{
	/* the data's process table: every process ever traced */
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		const struct gpu_proc *p = &g->procs[i];
		struct gpu_proc_info *in = NULL;

		if (p->state != PROC_TARGET && p->state != PROC_EXITED)
			continue;
		/* A pid with an exited slot and a live one (it exec'd, or was
		 * reused) is the live image's: in slot order, the exited one
		 * could describe it (exited, without its rank or job) to every
		 * batch until it is finished. */
		if (p->state == PROC_EXITED && gpu_proc_find(g, p->tgid))
			continue;
		for (size_t j = 0; j < g->data.nprocs; j++)
			if (g->data.procs[j].tgid == p->tgid)
				in = &g->data.procs[j];
		if (!in) {
			void *np = realloc(g->data.procs, (g->data.nprocs + 1) * sizeof(*in));

			if (!np)
				return;
			g->data.procs = np;
			in = &g->data.procs[g->data.nprocs++];
		}
		*in = p->info;
	}
}

/* One slot of a per-CPU array map, summed over CPUs (0 when unreadable). */
static uint64_t percpu_sum(const struct bpf_map *map, uint32_t key)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v = calloc(ncpu > 0 ? ncpu : 1, sizeof(*v)), sum = 0;

	if (v && !bpf_map_lookup_elem(bpf_map__fd(map), &key, v))
		for (int i = 0; i < ncpu; i++)
			sum += v[i];
	free(v);
	return sum;
}

uint64_t gpu_counter(const struct gpu *g, uint32_t c)
{
	return percpu_sum(g->skel->maps.gpu_counters, c);
}

const struct gpu_data *gpu__data(struct gpu *g)
{
	struct gpu_data *d = &g->data;

	for (uint32_t c = 0; c < GPU_CNT_MAX; c++)
		d->bpf[c] = percpu_sum(g->skel->maps.gpu_counters, c);
	d->stacks = NULL;
	d->nstacks = g->stacks.n;
	d->sites = g->sites.rows;
	d->nsites = g->sites.n;
	d->tally = g->tally.rows;
	d->ntally = g->tally.n;
	d->errs = g->errs.rows;
	d->nerrs = g->errs.n;
	d->colls = g->colls.rows;
	d->ncolls = g->colls.n;
	d->calls = g->calls;
	d->ncalls = g->ncalls;
	d->alloc_calls = g->alloc_calls;
	d->nalloc_calls = g->nalloc_calls;
	d->end_ns = realtime_ns();
	d->sampling_ratio = gpu_budget__achieved(&g->budget);
	/* leaks: a compact copy of the groups with something outstanding */
	free(d->leaks);
	d->leaks = gpu_leaks__outstanding(&g->leaks, &d->nleaks);
	free(d->fw_leaks);
	d->fw_leaks = gpu_leaks__outstanding(&g->fw_leaks, &d->nfw_leaks);
	/* stacks: pointers into the stack table's rows */
	free(d->stacks_view);
	d->stacks_view = calloc(g->stacks.n + 1, sizeof(*d->stacks_view));
	for (size_t i = 0; d->stacks_view && i < g->stacks.n; i++)
		d->stacks_view[i] = ((const struct stack_row *)g->stacks.rows + i)->s;
	d->stacks = d->stacks_view;
	d->stack_index = &g->stacks;
	return d;
}

const struct gpu_stack *gpu_data__stack(const struct gpu_data *d, uint32_t tgid, uint64_t stack_id)
{
	struct stack_key k = { .tgid = tgid, .stack_id = stack_id };
	const struct stack_row *r = d->stack_index ? gpu_table__find(d->stack_index, &k) : NULL;

	return r ? &r->s : NULL;
}

const struct gpu_proc_info *gpu_data__proc(const struct gpu_data *d, uint32_t tgid)
{
	for (size_t i = 0; i < d->nprocs; i++)
		if (d->procs[i].tgid == tgid)
			return &d->procs[i];
	return NULL;
}

const char *gpu_proc_info__job(const struct gpu_proc_info *pi)
{
	return pi->strata_job[0] ? pi->strata_job : pi->run_id[0] ? pi->run_id : pi->slurm_job;
}

static uint64_t map_entries(struct bpf_map *m)
{
	int fd = bpf_map__fd(m);
	char key[64], next[64];
	void *prev = NULL;
	uint64_t n = 0;

	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(key, next, sizeof(key));
		prev = key;
		n++;
	}
	return n;
}

void gpu__state(struct gpu *g, struct gpu_state *st)
{
	memset(st, 0, sizeof(*st));
	for (int i = 0; i < g->nfiles; i++)
		st->files_attached += g->files[i].refs > 0;
	st->links = g->links;
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		st->targets += g->procs[i].state == PROC_TARGET;
		st->watched += g->procs[i].state == PROC_WATCH;
	}
	st->bpf_targets = map_entries(g->skel->maps.gpu_targets);
	st->bpf_allocs = map_entries(g->skel->maps.gpu_allocs);
	st->bpf_inflight = map_entries(g->skel->maps.gpu_inflight);
	{
		struct bpf_map *maps[GPU_PROC_MAPS];

		gpu_proc_maps_of(g, maps);
		for (size_t m = 0; m < GPU_PROC_MAPS; m++)
			st->bpf_proc_rows += map_entries(maps[m]);
	}
}

void gpu__report(struct gpu *g)
{
	const struct gpu_data *d = gpu__data(g);
	struct gpu_state st;

	gpu__state(g, &st);
	fprintf(stderr,
		"strata: gpu: %zu processes traced, %d files with CUDA/NCCL, %zu call sites, "
		"%zu NCCL/trace calls; sampled %.1f%% of the time (ratio %.3f, %llu toggles)\n",
		d->nprocs + g->procs_pruned, g->nfiles, d->nsites, d->ncalls,
		100 * d->sampling_ratio, g->budget.ratio, (unsigned long long)g->budget.toggles);
	if (!log_enabled(LOG_INFO))
		return;
	fprintf(stderr, "  gpu.bpf:");
	for (int i = 0; i < GPU_CNT_MAX; i++)
		fprintf(stderr, " %s=%llu", strata_gpu_counter_name(i),
			(unsigned long long)d->bpf[i]);
	fprintf(stderr,
		"\n  gpu.inflight: dropped=%llu stale=%llu"
		"\n  gpu.usdt: notes=%llu skipped_bad_args=%llu skipped_malformed=%llu "
		"sites_dropped=%llu specs=%u",
		(unsigned long long)d->inflight_dropped, (unsigned long long)d->inflight_stale,
		(unsigned long long)g->usdt.notes, (unsigned long long)g->usdt.bad_args,
		(unsigned long long)g->usdt.malformed, (unsigned long long)g->usdt_dropped,
		g->usdt_specs);
	if (g->stats_fd >= 0) { /* STRATA_BPF_STATS: time per program run */
		struct bpf_program *progs[] = { g->skel->progs.gpu_enter,
						g->skel->progs.gpu_enter_multi,
						g->skel->progs.gpu_exit,
						g->skel->progs.gpu_exit_multi,
						g->skel->progs.gpu_usdt };

		fprintf(stderr, "\n  gpu.bpf_stats:");
		for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
			struct bpf_prog_info info = { 0 };
			__u32 len = sizeof(info);
			int fd = bpf_program__fd(progs[i]);

			if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) || !info.run_cnt)
				continue;
			fprintf(stderr, " %s=%llu runs,%.0fns", bpf_program__name(progs[i]),
				(unsigned long long)info.run_cnt,
				(double)info.run_time_ns / (double)info.run_cnt);
		}
	}
	fprintf(stderr, "\n  gpu.unwind:");
	for (uint32_t i = 0; i < UNWIND_ERR_MAX; i++)
		fprintf(stderr, " %s=%llu", strata_unwind_counter_name(i),
			(unsigned long long)percpu_sum(g->skel->maps.unwind_errors, i));
	fprintf(stderr, "\n  gpu: probes via %s: %llu kernel link objects, %.1f ms attaching",
		kernel_features__path(&g->features, KPATH_GPU_PROBES, NULL),
		(unsigned long long)g->link_objs, (double)g->attach_ns / 1e6);
	fprintf(stderr,
		"\n  gpu: links=%llu attach_failed=%llu files_attached=%llu files_freed=%llu "
		"files_dropped=%llu targets=%llu "
		"watched=%llu exits=%llu scans=%llu mapped=%llu mapped_ignored=%llu "
		"alive_checks=%llu "
		"slots_reused=%llu notify_full=%llu "
		"dls=%zu "
		"alloc_walks_skipped=%llu "
		"dls_dropped=%llu dls_failed=%llu "
		"bpf_targets=%llu bpf_allocs=%llu "
		"bpf_inflight=%llu bpf_proc_rows=%llu adopted=%llu dropped_rows=%llu "
		"dropped_calls=%llu procs_dropped=%llu procs_kept=%zu procs_pruned=%llu "
		"rows_retired=%llu stacks_retired=%llu frames_compacted=%llu stacks=%zu "
		"raw_stacks=%zu frames=%u clock_err_ns=%llu purges_deferred=%llu\n",
		(unsigned long long)st.links, (unsigned long long)g->attach_failed,
		(unsigned long long)st.files_attached, (unsigned long long)g->files_freed,
		(unsigned long long)g->files_dropped, (unsigned long long)st.targets,
		(unsigned long long)st.watched, (unsigned long long)g->exits,
		(unsigned long long)g->scans, (unsigned long long)g->mapped_seen,
		(unsigned long long)g->mapped_ignored, (unsigned long long)g->alive_checks,
		(unsigned long long)g->slots_reused, (unsigned long long)g->notify_full, g->ndls,
		(unsigned long long)g->alloc_walks_skipped, (unsigned long long)g->dls_dropped,
		(unsigned long long)g->dls_failed, (unsigned long long)st.bpf_targets,
		(unsigned long long)st.bpf_allocs, (unsigned long long)st.bpf_inflight,
		(unsigned long long)st.bpf_proc_rows, (unsigned long long)g->adopted,
		(unsigned long long)d->dropped_rows, (unsigned long long)d->dropped_calls,
		(unsigned long long)g->procs_dropped, d->nprocs,
		(unsigned long long)g->procs_pruned, (unsigned long long)g->rows_retired,
		(unsigned long long)g->stacks_retired, (unsigned long long)g->frames_compacted,
		g->stacks.n, g->raw_stacks.n, d->frames->nframes,
		(unsigned long long)d->clock_err_ns, (unsigned long long)g->purges_deferred);
	if (g->comm_state) {
		struct gpu_comm_state_stats cs;

		gpu_comm_state__stats(g->comm_state, &cs);
		fprintf(stderr,
			"  gpu nccl comms: restored=%llu stale=%llu bad_lines=%llu saves=%llu "
			"save_failed=%llu saved=%llu unchanged=%llu\n",
			(unsigned long long)cs.restored, (unsigned long long)cs.stale,
			(unsigned long long)cs.bad_lines, (unsigned long long)cs.saves,
			(unsigned long long)cs.save_failed, (unsigned long long)cs.saved_entries,
			(unsigned long long)cs.unchanged);
	}
	gpu_nccl_recover_report(g);
}

/* --- wire (strata-agent --server): call records handed over --- */
void gpu__alloc_calls_taken(struct gpu *g)
{
	g->nalloc_calls = 0;
	g->data.nalloc_calls = 0;
}

void gpu__calls_taken(struct gpu *g)
{
	/* The agent shipped d->calls: the table starts again, so an
	 * always-on agent never reaches GPU_MAX_CALLS. */
	g->ncalls = 0;
	g->data.ncalls = 0;
	if (g->calls_taken_ns) {
		gpu_retire(g, g->calls_taken_ns);
		gpu__data(g); /* the view of the tables as they are now */
	}
	g->calls_taken_ns = realtime_ns();
}
