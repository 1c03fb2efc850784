// SPDX-License-Identifier: Apache-2.0
/*
 * Retirement: what an always-on agent lets go once a batch has carried it
 * (gpu__calls_taken, strata-agent --server; strata record keeps the whole
 * session and never calls it).
 *
 *  - An exited process whose exit a batch told one batch earlier, and whose
 *    slot was freed (its BPF entries gone) at a drain before this one (the
 *    batch builder has seen its allocations leave: leaked at exit, not
 *    freed), leaves the data's process table and every table keyed by
 *    process: call sites, tally, errors, collectives, resolved stacks,
 *    kernel names, leak groups.  Its final values were in that batch;
 *    nothing looks them up again.
 *  - A raw stack (native, Python, their pair: keyed by BPF's content hash,
 *    shared by processes) leaves after GPU_STACK_IDLE_DRAINS drains in
 *    which no resolved stack of a process still kept used it.  BPF does not
 *    copy out a stack again while a thread's call-site cache hands out its
 *    id (a new Python stack over a cached native one makes a new pair
 *    naming it), so a live process's stacks are kept whole.
 *  - The frames profile (interned frames of every resolved stack, and the
 *    kernel names) is rebuilt from what is left once most of it is unused.
 *
 * Without this, an agent on a node that runs short CUDA processes for
 * weeks filled each table (GPU_MAX_ROWS) with the rows of the dead, and
 * then dropped (counted) the call sites, stacks and allocations of every
 * new process.
 */
#include "agent/gpu/gpu_impl.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

/*
 * Moves the processes that exited before the previous batch was built
 * (that batch told their exit) and whose slot is free out of the data's
 * process table, into g->retired (sorted).  A tgid reused meanwhile has
 * its own, live row and is kept.
 */
static void retire_told_procs(struct gpu *g, uint64_t told_before_ns)
{
	struct gpu_data *d = &g->data;
	size_t kept = 0;

	g->nretired = 0;
	if (g->retired_cap < d->nprocs) {
		uint32_t *r = realloc(g->retired, d->nprocs * sizeof(*r));

		if (!r)
			return; /* kept until a later batch */
		g->retired = r;
		g->retired_cap = d->nprocs;
	}
	for (size_t i = 0; i < d->nprocs; i++) {
		const struct gpu_proc_info *pi = &d->procs[i];

		if (pi->exited && pi->exit_ns < told_before_ns && pi->finished_drain &&
		    pi->finished_drain < g->drains && !gpu_proc_find(g, pi->tgid) &&
		    !gpu_proc_find_exited(g, pi->tgid)) {
			g->procs_pruned++;
			g->retired[g->nretired++] = pi->tgid;
			continue;
		}
		d->procs[kept++] = *pi;
	}
	d->nprocs = kept;
	gpu_tgids_sort(g->retired, g->nretired);
}

static void free_stack_row(void *row)
{
	free(((struct stack_row *)row)->s.frames);
}

/* The tally's rows and the duty cycle's per-row counts (gpu_duty.c),
 * index by index. */
static void drop_tally(struct gpu *g)
{
	const struct gpu_tally_row *rows = g->tally.rows;
	size_t w = 0;

	long n;

	/* prev_calls covers the first nprev rows (the rows since have none) */
	for (size_t i = 0; i < g->tally.n && i < g->nprev; i++)
		if (!gpu_tgid_in(g->retired, g->nretired, rows[i].key.tgid))
			g->prev_calls[w++] = g->prev_calls[i];
	g->nprev = w;
	n = gpu_table__drop_tgids(&g->tally, g->retired, g->nretired, NULL);
	g->rows_retired += n > 0 ? (uint64_t)n : 0;
	if (n < 0)
		g->nprev = 0;
}

/* Every table keyed by process, of the retired processes. */
static void drop_proc_rows(struct gpu *g)
{
	struct gpu_table *plain[] = { &g->sites, &g->errs,	   &g->colls,
				      &g->funcs, &g->leaks.groups, &g->fw_leaks.groups };
	long n;

	if (!g->nretired)
		return;
	drop_tally(g);
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		n = gpu_table__drop_tgids(plain[i], g->retired, g->nretired, NULL);
		g->rows_retired += n > 0 ? (uint64_t)n : 0;
	}
	n = gpu_table__drop_tgids(&g->stacks, g->retired, g->nretired, free_stack_row);
	g->rows_retired += n > 0 ? (uint64_t)n : 0;
}

/* Rows of a raw-stack table (raw_stacks, py_stacks, pairs): each has the
 * drain it was last used at, and maybe a pointer it owns. */
struct idle_ctx {
	uint64_t before;	  /* last used before this drain: idle */
	size_t used_off, own_off; /* own_off SIZE_MAX: owns nothing */
	uint64_t dropped;
};

static int keep_used(const void *row, void *arg)
{
	struct idle_ctx *c = arg;
	uint64_t used;
	void *own;

	memcpy(&used, (const char *)row + c->used_off, sizeof(used));
	if (used >= c->before)
		return 1;
	if (c->own_off != SIZE_MAX) {
		memcpy(&own, (const char *)row + c->own_off, sizeof(own));
		free(own);
	}
	c->dropped++;
	return 0;
}

static void drop_idle(struct gpu_table *t, struct idle_ctx *c, size_t used_off, size_t own_off)
{
	c->used_off = used_off;
	c->own_off = own_off;
	/* an index that could not be rebuilt (ENOMEM) is rebuilt by the next
	 * retirement; meanwhile a stack may be copied again beside itself */
	gpu_table__filter(t, keep_used, c);
}

/* The raw stacks (native, pair, Python) behind the resolved stacks still
 * kept are in use now. */
static void stamp_kept_stacks(struct gpu *g)
{
	for (size_t i = 0; i < g->stacks.n; i++) {
		uint64_t id = ((const struct stack_row *)g->stacks.rows)[i].s.stack_id;
		struct pair_row *pair = gpu_table__find(&g->pairs, &id);
		struct raw_stack *raw;
		struct py_stack_row *py;

		if (pair) {
			pair->used = g->drains;
			py = gpu_table__find(&g->py_stacks, &pair->pair.py);
			if (py)
				py->used = g->drains;
			id = pair->pair.native;
		}
		raw = gpu_table__find(&g->raw_stacks, &id);
		if (raw)
			raw->used = g->drains;
	}
}

static void drop_idle_stacks(struct gpu *g)
{
	struct idle_ctx c = { 0 };

	stamp_kept_stacks(g);
	if (g->drains <= GPU_STACK_IDLE_DRAINS)
		return;
	c.before = g->drains - GPU_STACK_IDLE_DRAINS;
	drop_idle(&g->raw_stacks, &c, offsetof(struct raw_stack, used),
		  offsetof(struct raw_stack, ips));
	drop_idle(&g->py_stacks, &c, offsetof(struct py_stack_row, used),
		  offsetof(struct py_stack_row, py));
	drop_idle(&g->pairs, &c, offsetof(struct pair_row, used), SIZE_MAX);
	g->stacks_retired += c.dropped;
}

/* A frame of old in new: its index there, interned at first use. */
static int64_t move_frame(struct profile *new, const struct profile *old, uint32_t *map, uint32_t i)
{
	int64_t n;

	if (map[i] != UINT32_MAX)
		return map[i];
	n = profile__intern_frame(new, &old->frames[i]);
	if (n >= 0)
		map[i] = (uint32_t)n;
	return n;
}

/*
 * The frames profile, rebuilt from the frames the resolved stacks and the
 * kernel names still use, once most of it is unused.  Everything that
 * points into it moves: stack frame indexes, the kernel names of funcs and
 * sites; the resolver interns into the new one, and frames_gen tells the
 * batch builder that its cached path pointers are stale.
 */
static void compact_frames(struct gpu *g)
{
	struct profile *old = g->data.frames, *new;
	uint32_t *map;
	size_t used = 0;
	int64_t n = 0;

	if (old->nframes < GPU_FRAMES_COMPACT_MIN)
		return;
	for (size_t i = 0; i < g->stacks.n; i++)
		used += ((const struct stack_row *)g->stacks.rows)[i].s.nframes;
	used += g->funcs.n;
	if (used * 2 > old->nframes) /* an upper bound: frames are shared */
		return;
	map = malloc(old->nframes * sizeof(*map));
	new = profile__new(old->freq_hz);
	if (!map || !new)
		goto fail;
	memset(map, 0xff, old->nframes * sizeof(*map));
	for (size_t i = 0; i < g->stacks.n && n >= 0; i++) {
		struct gpu_stack *s = &((struct stack_row *)g->stacks.rows)[i].s;

		for (uint32_t k = 0; k < s->nframes && n >= 0; k++) {
			n = move_frame(new, old, map, s->frames[k]);
			if (n >= 0)
				s->frames[k] = (uint32_t)n;
		}
	}
	for (size_t i = 0; i < g->funcs.n && n >= 0; i++) {
		struct func_row *fr = &((struct func_row *)g->funcs.rows)[i];
		struct profile_frame f = { .func = fr->name, .module = "[kernel-name]" };

		if (!fr->name)
			continue;
		n = profile__intern_frame(new, &f);
		fr->name = n >= 0 ? new->frames[n].func : NULL;
	}
	if (n < 0) { /* ENOMEM half-way: indexes already moved; start again */
		pr_warn("gpu: frames could not be rebuilt (%s): resolved stacks dropped",
			strerror((int)-n));
		for (size_t i = 0; i < g->stacks.n; i++)
			free_stack_row((struct stack_row *)g->stacks.rows + i);
		g->stacks.n = 0;
		profile_htab__fini(&g->stacks.idx);
		g->funcs.n = 0;
		profile_htab__fini(&g->funcs.idx);
	}
	for (size_t i = 0; i < g->sites.n; i++) { /* kernel names: the funcs' */
		struct gpu_site *s = (struct gpu_site *)g->sites.rows + i;
		struct func_key fk = { .tgid = s->key.tgid, .object = s->key.object };
		const struct func_row *fr = s->kernel ? gpu_table__find(&g->funcs, &fk) : NULL;

		s->kernel = fr ? fr->name : NULL; /* NULL: named again at the next drain */
	}
	profile__free(old);
	g->data.frames = g->res.out = new;
	g->data.frames_gen++;
	g->frames_compacted++;
	free(map);
	return;
fail:
	profile__free(new);
	free(map);
}

void gpu_retire(struct gpu *g, uint64_t told_before_ns)
{
	retire_told_procs(g, told_before_ns);
	drop_proc_rows(g);
	drop_idle_stacks(g);
	compact_frames(g);
	g->data.retired = g->retired;
	g->data.nretired = g->nretired;
}
