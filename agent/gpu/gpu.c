// SPDX-License-Identifier: Apache-2.0
/*
 * The GPU layer's life cycle (see agent/gpu/gpu.h; gpu_impl.h lists the
 * files that do the rest): the BPF object with the session's filter maps,
 * the tables, and the files attached for the whole session.
 */
#include "agent/gpu/gpu_comm_state.h"
#include "agent/gpu/gpu_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/gpu/gpu_libs.h"
#include "agent/proc/uprobe_multi.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "gpu.skel.h"

/* Before load: the session's filter maps, for admission in BPF, and the
 * scheduler layer's API-layer map. */
static int session_maps(struct gpu *g)
{
	uint32_t f = g->opts.filter;
	bool admit = f == STRATA_FILTER_NONE;
	int err = 0;

	g->skel->rodata->filter_mode = f;
	if (f == STRATA_FILTER_TGIDS && g->opts.targets_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.session_targets, g->opts.targets_fd);
		admit = !err;
	} else if (f == STRATA_FILTER_CGROUP && g->opts.cgroup_map_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.session_cgroup, g->opts.cgroup_map_fd);
		admit = !err;
	} /* else no filter to admit by: /proc discovery only */
	g->skel->rodata->admit_in_bpf = admit;
	if (!err && g->opts.python && g->opts.py_procs_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.py_procs, g->opts.py_procs_fd);
		g->skel->rodata->want_python = !err && !g->opts.no_stacks;
	}
	if (!err && g->opts.api_layers_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.api_layers, g->opts.api_layers_fd);
		g->skel->rodata->mark_layers = !err;
	}
	if (!err && g->opts.unwind_rows_fd > 0 && g->opts.unwind_procs_fd > 0) {
		err = bpf_map__reuse_fd(g->skel->maps.unwind_rows, g->opts.unwind_rows_fd)
			      ?: bpf_map__reuse_fd(g->skel->maps.unwind_procs,
						   g->opts.unwind_procs_fd);
	} else if (!err) { /* no tables: the walker's frame-pointer steps only */
		bpf_map__set_max_entries(g->skel->maps.unwind_rows, 1);
		bpf_map__set_max_entries(g->skel->maps.unwind_procs, 1);
	}
	return err;
}

/* The layer's user-side tables, empty (and their rows' storage freed). */
void gpu_tables_init(struct gpu *g)
{
	gpu_table__init(&g->raw_stacks, sizeof(struct raw_stack), 0, 8, GPU_MAX_ROWS);
	gpu_table__init(&g->py_stacks, sizeof(struct py_stack_row), 0, 8, GPU_MAX_ROWS);
	gpu_table__init(&g->pairs, sizeof(struct pair_row), 0, 8, GPU_MAX_ROWS);
	gpu_table__init(&g->stacks, sizeof(struct stack_row), 0, sizeof(struct stack_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->sites, sizeof(struct gpu_site), 0, sizeof(struct gpu_site_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->tally, sizeof(struct gpu_tally_row), 0, sizeof(struct gpu_tally_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->errs, sizeof(struct gpu_err_row), 0, sizeof(struct gpu_err_key),
			GPU_MAX_ROWS);
	gpu_leaks__init(&g->leaks, GPU_MAX_ROWS);
	gpu_leaks__init(&g->fw_leaks, GPU_MAX_ROWS);
	gpu_table__init(&g->colls, sizeof(struct gpu_coll_row), 0, sizeof(struct gpu_coll_key),
			GPU_MAX_ROWS);
	gpu_table__init(&g->funcs, sizeof(struct func_row), 0, sizeof(struct func_key),
			GPU_MAX_ROWS);
}

void gpu_tables_fini(struct gpu *g)
{
	for (size_t i = 0; i < g->raw_stacks.n; i++)
		free(((struct raw_stack *)g->raw_stacks.rows)[i].ips);
	for (size_t i = 0; i < g->py_stacks.n; i++)
		free(((struct py_stack_row *)g->py_stacks.rows)[i].py);
	gpu_table__fini(&g->py_stacks);
	gpu_table__fini(&g->pairs);
	for (size_t i = 0; i < g->stacks.n; i++)
		free(((struct stack_row *)g->stacks.rows)[i].s.frames);
	gpu_table__fini(&g->raw_stacks);
	gpu_table__fini(&g->stacks);
	gpu_table__fini(&g->sites);
	gpu_table__fini(&g->tally);
	gpu_table__fini(&g->errs);
	gpu_leaks__fini(&g->leaks);
	gpu_leaks__fini(&g->fw_leaks);
	gpu_table__fini(&g->colls);
	gpu_table__fini(&g->funcs);
}

struct gpu *gpu__new(const struct gpu_opts *opts, struct module_registry *mods,
		     struct proc_tracker *procs, struct symbolizer *sym, struct ksyms *ksyms)
{
	struct gpu *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return NULL;
	g->opts = *opts;
	/* bench/gpu.sh: the kernel's per-program run time, while we hold the
	 * fd (-v prints it); off otherwise (it costs two clock reads a run) */
	g->stats_fd = getenv("STRATA_BPF_STATS") ? bpf_enable_stats(BPF_STATS_RUN_TIME) : -1;
	if (g->opts.budget == 0)
		g->opts.budget = 0.01;
	if (g->opts.probe_cost_ns <= 0)
		g->opts.probe_cost_ns = 11000;
	if (!g->opts.grace_ms)
		g->opts.grace_ms = GPU_GRACE_MS;
	g->mods = mods;
	g->procs_tracker = procs;
	g->procs = calloc(GPU_MAX_PROCS, sizeof(*g->procs));
	g->calls = calloc(GPU_MAX_CALLS, sizeof(*g->calls));
	g->alloc_calls =
		opts->alloc_events ? calloc(GPU_MAX_ALLOC_EVENTS, sizeof(*g->alloc_calls)) : NULL;
	g->traced = calloc(GPU_MAX_TRACED, sizeof(*g->traced));
	g->data.allocs = calloc(GPU_MAX_ALLOC_RECS, sizeof(*g->data.allocs));
	g->data.inflight = calloc(GPU_MAX_INFLIGHT, sizeof(*g->data.inflight));
	g->data.frames = profile__new(1);
	if (!g->procs || !g->calls || !g->data.frames || !g->traced ||
	    (opts->alloc_events && !g->alloc_calls)) {
		err = -ENOMEM;
		goto err_out;
	}
	g->res = (struct resolver){
		.procs = procs,
		.sym = sym,
		.ksyms = ksyms,
		.out = g->data.frames,
		.python = opts->python,
	};
	gpu_tables_init(g);

	g->skel = gpu_bpf__open();
	if (!g->skel) {
		err = -errno;
		goto err_out;
	}
	g->skel->rodata->trace_cuda = opts->trace;
	g->skel->rodata->alloc_events = opts->alloc_events;
	g->skel->rodata->want_stacks = !opts->no_stacks;
	g->skel->rodata->page_shift = (uint32_t)__builtin_ctzl((unsigned long)getpagesize());
	bpf_map__set_max_entries(g->skel->maps.gpu_mapped_last, GPU_MAX_PROCS);
	err = session_maps(g);
	if (err)
		goto err_out;
	if (opts->features)
		g->features = *opts->features;
	else
		kernel_features__probe(&g->features);
	/* Probes through uprobe_multi links where the kernel has them, else
	 * one uprobe per function (the *_multi copies not loaded). */
	g->no_multi = !g->features.have[KFEAT_UPROBE_MULTI];
	if (g->no_multi) {
		bpf_program__set_autoload(g->skel->progs.gpu_enter_multi, false);
		bpf_program__set_autoload(g->skel->progs.gpu_exit_multi, false);
		bpf_program__set_autoload(g->skel->progs.gpu_empty_multi, false);
	} else {
		err = uprobe_multi__prepare(g->skel->progs.gpu_enter_multi) ?:
		      uprobe_multi__prepare(g->skel->progs.gpu_exit_multi) ?:
		      uprobe_multi__prepare(g->skel->progs.gpu_empty_multi);
		if (err)
			goto err_out;
	}
	/* the exit program: as the sampler's (features.h) */
	{
		struct bpf_program *exits[2][2] = {
			{ g->skel->progs.gpu_proc_exit, g->skel->progs.gpu_proc_exit_kept },
			{ g->skel->progs.gpu_proc_exit_early,
			  g->skel->progs.gpu_proc_exit_early_kept },
		};
		bool early, vmas;

		kernel_features__exit_prog(&g->features, &early, &vmas);
		for (int e = 0; e < 2; e++)
			for (int k = 0; k < 2; k++)
				bpf_program__set_autoload(exits[e][k], e == early && k == !vmas);
		g->exit_prog = exits[early][!vmas];
	}
	err = gpu_bpf__load(g->skel);
	if (err) {
		pr_warn("gpu: cannot load the BPF object: %s", strerror(-err));
		goto err_out;
	}
	/* Communicators a previous run saw initialise: back into the map
	 * before any probe is attached. */
	if (opts->comm_state_path) {
		g->comm_state = gpu_comm_state__new(opts->comm_state_path, realtime_ns());
		if (!g->comm_state) {
			err = -ENOMEM;
			goto err_out;
		}
		err = gpu_comm_state__restore(g->comm_state, bpf_map__fd(g->skel->maps.gpu_comms),
					      "/proc");
		if (err < 0)
			pr_warn("gpu: %s: %s (communicators start unknown)", opts->comm_state_path,
				strerror(-err));
		else if (err)
			pr_info("gpu: %d NCCL communicators restored from %s", err,
				opts->comm_state_path);
		err = 0;
	}
	if (!bpf_program__attach(g->exit_prog) ||
	    !bpf_program__attach(g->skel->progs.gpu_proc_exec)) {
		err = -errno;
		goto err_out;
	}
	g->rb = ring_buffer__new(bpf_map__fd(g->skel->maps.gpu_events), gpu_on_event, g, NULL);
	if (!g->rb) {
		err = -errno;
		goto err_out;
	}
	err = ring_buffer__add(g->rb, bpf_map__fd(g->skel->maps.gpu_proc_events), gpu_on_proc_event,
			       g);
	if (err)
		goto err_out;
	gpu_clock_calibrate(g);
	g->data.start_ns = realtime_ns();
	gpu_budget__init(&g->budget, g->opts.budget, g->opts.probe_cost_ns, 1000000000ULL,
			 mono_ns());
	g->window_start_ns = mono_ns();
	/* last: nothing fails after it, the registry keeps no freed layer */
	err = gpu_files_register(g);
	if (err)
		goto err_out;
	for (size_t i = 0; i < g->opts.nlibs; i++)
		gpu_pin_file(g, g->opts.libs[i]);
	if (!g->opts.no_preattach)
		gpu_libs_find(gpu_pin_file, g);
	return g;
err_out:
	gpu__free(g);
	errno = -err;
	return NULL;
}

void gpu__free(struct gpu *g)
{
	if (!g)
		return;
	if (g->comm_state && g->skel) /* the latest counts for the next run */
		gpu_comm_state__save(g->comm_state, bpf_map__fd(g->skel->maps.gpu_comms), "/proc");
	gpu_comm_state__free(g->comm_state);
	for (int i = 0; i < g->nfiles; i++)
		if (g->files[i].used)
			gpu_file_detach(g, &g->files[i]);
	for (size_t i = 0; i < g->ndls; i++)
		bpf_link__destroy(g->dls[i].link);
	free(g->alloc_mirror[0].v);
	free(g->alloc_mirror[1].v);
	ring_buffer__free(g->rb);
	gpu_bpf__destroy(g->skel);
	if (g->stats_fd >= 0)
		close(g->stats_fd);
	gpu_tables_fini(g);
	profile__free(g->data.frames);
	free(g->data.procs);
	free(g->data.leaks);
	free(g->data.fw_leaks);
	free(g->data.stacks_view);
	free(g->data.allocs);
	free(g->data.inflight);
	free(g->prev_calls);
	free(g->retired);
	free(g->procs);
	free(g->calls);
	free(g->alloc_calls);
	free(g->traced);
	free(g);
}

/* ---- deep capture (agent/capture/) -------------------------------------------------- */

bool gpu_traced(const struct gpu *g, uint32_t tgid)
{
	return gpu_tgid_in(g->traced, g->ntraced, tgid);
}

int gpu__trace_process(struct gpu *g, uint32_t tgid, bool on)
{
	int fd = bpf_map__fd(g->skel->maps.gpu_trace_tgids);
	uint32_t one = 1, *at = gpu_tgid_find(g->traced, g->ntraced, tgid);

	if (on && !at) {
		if (g->ntraced == GPU_MAX_TRACED)
			return -ENOSPC;
		g->traced[g->ntraced++] = tgid;
		gpu_tgids_sort(g->traced, g->ntraced);
	} else if (!on && at) {
		memmove(at, at + 1, (size_t)(g->traced + g->ntraced - at - 1) * sizeof(tgid));
		g->ntraced--;
	}
	if (on)
		return bpf_map_update_elem(fd, &tgid, &one, BPF_ANY) ? -errno : 0;
	return bpf_map_delete_elem(fd, &tgid) && errno != ENOENT ? -errno : 0;
}

void gpu__hold_probes(struct gpu *g, bool hold)
{
	if (hold == g->hold_probes)
		return;
	g->hold_probes = hold;
	if (g->opts.budget < 0) /* no limit: attached anyway */
		return;
	if (hold) {
		/* every call, within the capture's budget: attached at the
		 * next poll, and the plan (every drain) duty-cycles them
		 * again only past GPU_CAPTURE_BUDGET */
		g->saved_budget = g->budget.budget;
		if (g->budget.budget < GPU_CAPTURE_BUDGET)
			g->budget.budget = GPU_CAPTURE_BUDGET;
		g->budget.ratio = 1.0;
	} else {
		g->budget.budget = g->saved_budget;
	}
}
