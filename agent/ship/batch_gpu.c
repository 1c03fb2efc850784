// SPDX-License-Identifier: Apache-2.0
#include "agent/ship/batch_gpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpu/gpu_names.h"
#include "agent/proc/proc_thread.h"
#include "agent/gpu/gpu_tables.h"

#define STATE_MAX 65536	       /* last-shipped rows per table (the layer keeps 65536) */
#define OUTSTANDING_MAX 262144 /* allocations tracked between drains (the BPF map's size) */
#define ALLOC_DEFER_MAX 8      /* drains an allocation waits for its stack to resolve */
#define PATHS_MAX 4096	       /* (process, frame path) -> module */
#define WIRE_MAX_FRAMES 512    /* frames of one call-site stack sent */

struct path_row {
	/* key: the process and the interned path pointer of the layer's
	 * frames (two containers map different files at the same path) */
	uint64_t tgid;
	const char *path;
	const struct module *mod;
};

struct out_row {
	uint32_t tgid, level; /* level: a segment and its first block share a ptr */
	/* key: (tgid, level, ptr, BPF's monotonic stamp), stable across drains; the
	 * realtime alloc_ns is converted anew at each drain and may move by a
	 * few ns, which made a live allocation look freed and new again */
	uint64_t ptr, mono_ns;
	uint64_t alloc_ns; /* as first sent: the free must name the same one */
	uint64_t gen;	   /* the last drain that saw it outstanding */
	/* not sent yet: its call-site stack was not resolved (a library
	 * mapped after the tracker's last read of the process's maps: the
	 * next drains resolve it); what the row needs meanwhile */
	uint64_t size, stack_id;
	uint32_t api, defers;
	bool sent;
};

struct batch_gpu {
	struct module_registry *mods;
	struct proc_tracker *procs;
	struct gpu_table sites, tally, errs, colls; /* values last shipped */
	struct gpu_table outstanding, paths;
	uint64_t paths_evicted; /* the registry's evictions when paths was valid */
	uint64_t frames_gen;	/* the layer's frames when paths was valid */
	uint64_t gen;
	uint64_t seen_bpf[GPU_CNT_MAX];
	uint64_t seen_rows, seen_calls, seen_allocs, seen_alloc_calls;
	uint64_t *err_delta; /* per d->errs row, this batch */
	size_t err_cap;
	struct bb_frame fr[WIRE_MAX_FRAMES];
	struct batch_gpu_stats st;
};

/* The (process, path) -> module cache, empty. */
static void paths_reset(struct batch_gpu *g)
{
	gpu_table__fini(&g->paths);
	gpu_table__init(&g->paths, sizeof(struct path_row), 0, offsetof(struct path_row, mod),
			PATHS_MAX);
}

struct batch_gpu *batch_gpu__new(struct module_registry *mods, struct proc_tracker *procs)
{
	struct batch_gpu *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->mods = mods;
	g->procs = procs;
	gpu_table__init(&g->sites, sizeof(struct gpu_site), 0, sizeof(struct gpu_site_key),
			STATE_MAX);
	gpu_table__init(&g->tally, sizeof(struct gpu_tally_row), 0, sizeof(struct gpu_tally_key),
			STATE_MAX);
	gpu_table__init(&g->errs, sizeof(struct gpu_err_row), 0, sizeof(struct gpu_err_key),
			STATE_MAX);
	gpu_table__init(&g->colls, sizeof(struct gpu_coll_row), 0, sizeof(struct gpu_coll_key),
			STATE_MAX);
	gpu_table__init(&g->outstanding, sizeof(struct out_row), 0,
			offsetof(struct out_row, alloc_ns), OUTSTANDING_MAX);
	paths_reset(g);
	return g;
}

void batch_gpu__free(struct batch_gpu *g)
{
	if (!g)
		return;
	gpu_table__fini(&g->sites);
	gpu_table__fini(&g->tally);
	gpu_table__fini(&g->errs);
	gpu_table__fini(&g->colls);
	gpu_table__fini(&g->outstanding);
	gpu_table__fini(&g->paths);
	free(g->err_delta);
	free(g);
}

void batch_gpu__stats(const struct batch_gpu *g, struct batch_gpu_stats *st)
{
	*st = g->st;
}

/* Copies the values last shipped for cur's key (its first bytes) into
 * prev, zeros the first time, and remembers cur's.  A full table sends
 * the whole count again (counted). */
static void swap_prev(struct batch_gpu *g, struct gpu_table *t, const void *cur, void *prev)
{
	int err = 0;
	void *row = gpu_table__get(t, cur, &err);

	if (!row) {
		g->st.state_full++;
		memset(prev, 0, t->elem);
		return;
	}
	memcpy(prev, row, t->elem);
	memcpy(row, cur, t->elem);
}

/* The file process tgid maps at path: its own mapping's module, else the
 * only file known by that path (none when two share it). */
static const struct module *lookup(struct batch_gpu *g, uint32_t tgid, const char *path)
{
	const struct module *m = g->procs ? proc_tracker__module_at(g->procs, tgid, path) : NULL;

	return m ? m : modules__find_path(g->mods, path);
}

static const struct module *module_of(struct batch_gpu *g, const struct gpu_data *d, uint32_t tgid,
				      const char *path)
{
	struct path_row key = { .tgid = tgid, .path = path }, *r;
	struct module_stats ms;
	int err = 0;

	/* the registry evicted modules since (cached pointers may dangle), or
	 * the cache is full: it starts again */
	modules__stats(g->mods, &ms);
	if (ms.evicted != g->paths_evicted || g->frames_gen != d->frames_gen ||
	    g->paths.n == PATHS_MAX) {
		paths_reset(g);
		g->paths_evicted = ms.evicted;
		g->frames_gen = d->frames_gen;
	}
	r = gpu_table__find(&g->paths, &key);
	if (r)
		return r->mod;
	r = gpu_table__get(&g->paths, &key, &err);
	if (!r) /* full: look it up every time */
		return lookup(g, tgid, path);
	r->mod = lookup(g, tgid, path);
	return r->mod;
}

/* The layer's resolved call-site frames as wire frames: native ones as
 * (build-id mapping, file offset) with no name (the inline frames the
 * local resolver expanded collapse back into their outer frame). */
static int64_t stack_of(struct batch_gpu *g, struct batch_builder *bb, const struct gpu_data *d,
			uint32_t tgid, uint64_t stack_id)
{
	const struct gpu_stack *gs = gpu_data__stack(d, tgid, stack_id);
	uint32_t n = 0, last_native = UINT32_MAX;
	int64_t id;

	if (!gs)
		return 0;
	for (uint32_t i = 0; i < gs->nframes && n < WIRE_MAX_FRAMES; i++) {
		const struct profile_frame *pf = &d->frames->frames[gs->frames[i]];
		struct bb_frame *f = &g->fr[n];
		const struct module *mod;

		if (pf->flags & PROFILE_FRAME_INLINED)
			continue;
		memset(f, 0, sizeof(*f));
		if (pf->flags & PROFILE_FRAME_KERNEL) {
			f->kind = STRATA__V1__FRAME__KIND__KERNEL;
			f->name = pf->func;
			f->addr = pf->addr;
		} else if (pf->flags & PROFILE_FRAME_PYTHON) {
			f->kind = STRATA__V1__FRAME__KIND__PYTHON;
			f->name = pf->func;
			f->file = pf->file;
			f->line = pf->line;
		} else if (!pf->module || !strcmp(pf->module, "[unknown]")) {
			f->kind = STRATA__V1__FRAME__KIND__UNKNOWN;
			f->addr = pf->addr;
		} else {
			f->kind = STRATA__V1__FRAME__KIND__NATIVE;
			f->path = pf->module;
			f->addr = pf->addr;
			f->is_return = 1;
			mod = module_of(g, d, tgid, pf->module);
			if (mod) {
				f->build_id = mod->build_id;
				f->build_id_len = (size_t)mod->build_id_len;
				f->open_path = mod->open_path;
			}
			last_native = n;
		}
		n++;
	}
	/* The leaf is the probed function's first instruction, not a return. */
	if (last_native == n - 1)
		g->fr[last_native].is_return = 0;
	id = batch_builder__stack(bb, g->fr, n);
	if (id == -E2BIG) {
		g->st.stacks_dropped++;
		return 0;
	}
	return id;
}

/* The batch's process for tgid, labelled with the layer's rank identity
 * where its environment had none. */
static int64_t proc_of(struct agent_batch *ab, const struct gpu_data *d, uint32_t tgid)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	const struct gpu_proc_info *pi = gpu_data__proc(d, tgid);
	struct bb_process fb = { .pid = tgid, .rank = -1, .local_rank = -1, .world_size = -1 };
	char job[32];
	int64_t p;

	if (pi) {
		fb.comm = pi->comm;
		fb.has_rank = pi->rank >= 0;
		fb.rank = pi->rank;
		fb.local_rank = pi->local_rank;
		fb.world_size = pi->world_size;
		fb.torchelastic_run_id = pi->run_id;
		fb.slurm_job_id = pi->slurm_job;
		/* for a process gone before its labels were read (a rank
		 * that exits within its first period) */
		fb.job = gpu_proc_info__job(pi);
	}
	p = agent_batch__process_tgid(ab, tgid, &fb);
	/* the process may be in the batch already without a job (its CPU
	 * samples came first, /proc unreadable by then): the job the GPU
	 * layer read from its environment while it lived */
	if (p >= 0 && pi)
		batch_builder__label_job(bb, (uint32_t)p, fb.job,
					 pi->strata_job[0] ? "env:STRATA_JOB"
					 : pi->run_id[0]   ? "env:TORCHELASTIC_RUN_ID"
							   : "env:SLURM_JOB_ID");
	if (p >= 0 && pi && pi->nccl_rank >= 0) {
		/* a recovered hash is one process's: it names no job */
		snprintf(job, sizeof(job), "nccl-%016llx", (unsigned long long)pi->job_hash);
		batch_builder__label_rank(bb, (uint32_t)p, pi->nccl_rank, pi->nccl_nranks,
					  GPU_COMM_IS_RECOVERED(pi->job_hash) ? NULL : job);
	}
	return p;
}

#define ROW_OR_DROP(var, l)                                    \
	do {                                                   \
		var = batch_builder__row(bb, l);               \
		if (!var)                                      \
			continue; /* counted by the builder */ \
		g->st.records++;                               \
	} while (0)

/* Per d->errs row: the count since the last batch. */
static int err_deltas(struct batch_gpu *g, const struct gpu_data *d)
{
	if (d->nerrs > g->err_cap) {
		uint64_t *n = realloc(g->err_delta, d->nerrs * sizeof(*n));

		if (!n)
			return -ENOMEM;
		g->err_delta = n;
		g->err_cap = d->nerrs;
	}
	for (size_t i = 0; i < d->nerrs; i++) {
		struct gpu_err_row prev;

		swap_prev(g, &g->errs, &d->errs[i], &prev);
		g->err_delta[i] = d->errs[i].count - prev.count;
	}
	return 0;
}

/* The most frequent failure code of (tgid, api) in this window. */
static const struct gpu_err_row *top_err(const struct batch_gpu *g, const struct gpu_data *d,
					 uint32_t tgid, uint32_t api)
{
	const struct gpu_err_row *best = NULL;
	uint64_t most = 0;

	for (size_t i = 0; i < d->nerrs; i++)
		if (d->errs[i].key.tgid == tgid && d->errs[i].key.api == api &&
		    g->err_delta[i] > most) {
			most = g->err_delta[i];
			best = &d->errs[i];
		}
	return best;
}

static const char *code_name(uint32_t api, int64_t code, char *buf, size_t sz)
{
	const char *n = gpu_ret_name(api, code);

	if (n)
		return n;
	snprintf(buf, sz, "%lld", (long long)code);
	return buf;
}

static Strata__V1__CudaTransfer__Direction direction(uint64_t memcpy_kind)
{
	switch (memcpy_kind) { /* cudaMemcpyKind */
	case 0:
		return STRATA__V1__CUDA_TRANSFER__DIRECTION__H2H;
	case 1:
		return STRATA__V1__CUDA_TRANSFER__DIRECTION__H2D;
	case 2:
		return STRATA__V1__CUDA_TRANSFER__DIRECTION__D2H;
	case 3:
		return STRATA__V1__CUDA_TRANSFER__DIRECTION__D2D;
	default:
		return STRATA__V1__CUDA_TRANSFER__DIRECTION__DEFAULT;
	}
}

/* Launches, allocation failures, copies and syncs: per call site. */
static void add_sites(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	char buf[32];

	for (size_t i = 0; i < d->nsites; i++) {
		const struct gpu_site *s = &d->sites[i];
		uint32_t kind = gpu_api_kind(s->key.api);
		uint64_t count, ns, bytes, errors;
		struct gpu_site prev;
		int64_t proc, stack;

		if (kind != GPU_KIND_LAUNCH && kind != GPU_KIND_ALLOC && kind != GPU_KIND_COPY &&
		    kind != GPU_KIND_SYNC)
			continue;
		swap_prev(g, &g->sites, s, &prev);
		count = s->val.count - prev.val.count;
		ns = s->val.time_ns - prev.val.time_ns;
		bytes = s->val.bytes - prev.val.bytes;
		errors = s->val.errors - prev.val.errors;
		if (!count || (kind == GPU_KIND_ALLOC && !errors))
			continue;
		proc = proc_of(ab, d, s->key.tgid);
		stack = proc < 0 ? -1 : stack_of(g, bb, d, s->key.tgid, s->key.stack_id);
		if (proc < 0 || stack < 0)
			continue;
		if (kind == GPU_KIND_LAUNCH) {
			Strata__V1__CudaLaunch *r;

			ROW_OR_DROP(r, BB_LAUNCH);
			r->process = (uint32_t)proc;
			r->stack = (uint32_t)stack;
			r->kernel_name_str = batch_builder__string(
				bb, s->kernel ? s->kernel : gpu_api_name(s->key.api));
			r->count = count;
			r->ns_in_call = ns;
		} else if (kind == GPU_KIND_ALLOC) {
			const struct gpu_err_row *e = top_err(g, d, s->key.tgid, s->key.api);
			Strata__V1__CudaAllocFailure *r;

			ROW_OR_DROP(r, BB_ALLOC_FAIL);
			r->process = (uint32_t)proc;
			r->stack = (uint32_t)stack;
			r->code = e ? (int32_t)e->key.code : 0;
			r->code_name_str = batch_builder__string(
				bb, e ? code_name(s->key.api, e->key.code, buf, sizeof(buf)) : "");
			r->count = errors;
		} else {
			Strata__V1__CudaTransfer *r;

			ROW_OR_DROP(r, BB_TRANSFER);
			r->process = (uint32_t)proc;
			r->stack = (uint32_t)stack;
			r->kind = kind == GPU_KIND_SYNC ? STRATA__V1__CUDA_TRANSFER__KIND__SYNC
							: STRATA__V1__CUDA_TRANSFER__KIND__MEMCPY;
			if (kind == GPU_KIND_COPY)
				r->direction = direction(s->key.object);
			r->bytes = bytes;
			r->ns = ns;
			r->count = count;
			r->api_str = batch_builder__string(bb, gpu_api_name(s->key.api));
		}
	}
}

static void add_tally(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	char buf[32];

	for (size_t i = 0; i < d->ntally; i++) {
		const struct gpu_tally_row *t = &d->tally[i];
		struct gpu_tally_row prev;
		struct bb_tally_row *r;
		int64_t proc;

		swap_prev(g, &g->tally, t, &prev);
		if (t->val.calls == prev.val.calls)
			continue;
		proc = proc_of(ab, d, t->key.tgid);
		if (proc < 0)
			continue;
		ROW_OR_DROP(r, BB_TALLY);
		r->m.process = (uint32_t)proc;
		r->m.fn_str = batch_builder__string(bb, gpu_api_name(t->key.api));
		r->m.calls = t->val.calls - prev.val.calls;
		r->m.total_ns = t->val.total_ns - prev.val.total_ns;
		r->m.min_ns = t->val.min_ns; /* since the layer started */
		r->m.max_ns = t->val.max_ns;
		for (size_t e = 0; e < d->nerrs && r->m.n_errors < BB_TALLY_CODES; e++) {
			const struct gpu_err_row *er = &d->errs[e];
			Strata__V1__CudaApiTally__Code *c;

			if (er->key.tgid != t->key.tgid || er->key.api != t->key.api ||
			    !g->err_delta[e])
				continue;
			c = &r->codes[r->m.n_errors++];
			c->code = (int32_t)er->key.code;
			c->name_str = batch_builder__string(
				bb, code_name(er->key.api, er->key.code, buf, sizeof(buf)));
			c->count = g->err_delta[e];
		}
	}
}

static int out_stale(const void *row, void *ctx)
{
	return ((const struct out_row *)row)->gen == *(const uint64_t *)ctx;
}

/* An allocation's row (freed: it is no longer outstanding either). */
static void send_alloc(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d,
		       struct out_row *o, bool freed)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	int64_t proc = proc_of(ab, d, o->tgid), stack;
	Strata__V1__CudaAlloc *r;

	o->sent = true;
	stack = proc < 0 ? -1 : stack_of(g, bb, d, o->tgid, o->stack_id);
	if (proc < 0 || stack < 0)
		return;
	r = batch_builder__row(bb, BB_ALLOC);
	if (!r)
		return; /* counted by the builder */
	g->st.records++;
	r->process = (uint32_t)proc;
	r->ptr = o->ptr;
	r->size = o->size;
	r->stack = (uint32_t)stack;
	r->alloc_ns = o->alloc_ns;
	r->level = o->level ? STRATA__V1__CUDA_ALLOC__LEVEL__FRAMEWORK
			    : STRATA__V1__CUDA_ALLOC__LEVEL__DRIVER;
	r->api_str = batch_builder__string(bb, o->level ? "pytorch:malloc" : gpu_api_name(o->api));
	if (freed) {
		r->freed = 1;
		r->free_ns = d->end_ns;
	}
}

/* Allocation events from two successive outstanding sets. */
void batch_gpu__drained(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d)
{
	struct batch_builder *bb = agent_batch__builder(ab);

	g->gen++;
	for (size_t i = 0; i < d->nallocs; i++) {
		const struct gpu_alloc_rec *a = &d->allocs[i];
		struct out_row key = {
			.tgid = a->tgid, .level = a->level, .ptr = a->ptr, .mono_ns = a->mono_ns
		};
		struct out_row *o;
		int err = 0;

		o = gpu_table__get(&g->outstanding, &key, &err);
		if (!o) {
			g->st.allocs_untracked++;
			continue;
		}
		if (o->gen && o->sent) { /* sent when it was new */
			o->gen = g->gen;
			continue;
		}
		o->gen = g->gen;
		o->alloc_ns = a->alloc_ns;
		o->size = a->size;
		o->stack_id = a->stack_id;
		o->api = a->api;
		/* Sent once, so not before its stack is resolved: deferred a
		 * few drains while the layer retries (bounded; a row that stops
		 * being outstanding meanwhile is sent by the loop below). */
		if (a->stack_id > STRATA_STACK_LOST && !gpu_data__stack(d, a->tgid, a->stack_id) &&
		    o->defers < ALLOC_DEFER_MAX) {
			o->defers++;
			g->st.allocs_deferred++;
			continue;
		}
		send_alloc(g, ab, d, o, false);
	}
	for (size_t i = 0; i < g->outstanding.n; i++) {
		struct out_row *o = (struct out_row *)g->outstanding.rows + i;
		const struct gpu_proc_info *pi;
		Strata__V1__CudaAlloc *r;
		int64_t proc;

		if (o->gen == g->gen)
			continue;
		pi = gpu_data__proc(d, o->tgid);
		if (!o->sent) { /* deferred, and now freed or its process gone */
			send_alloc(g, ab, d, o, !pi || !pi->exited);
			continue;
		}
		if (pi && pi->exited) /* leaked at exit: stays outstanding */
			continue;
		proc = proc_of(ab, d, o->tgid);
		if (proc < 0)
			continue;
		ROW_OR_DROP(r, BB_ALLOC);
		r->process = (uint32_t)proc;
		r->ptr = o->ptr;
		r->alloc_ns = o->alloc_ns;
		r->freed = 1;
		r->free_ns = d->end_ns;
		r->free_only = 1;
		r->level = o->level ? STRATA__V1__CUDA_ALLOC__LEVEL__FRAMEWORK
				    : STRATA__V1__CUDA_ALLOC__LEVEL__DRIVER;
	}
	gpu_table__filter(&g->outstanding, out_stale, &g->gen);
}

#define BATCH_RECOVERED_COMMS 64 /* recovered communicators named once per batch */

static void add_comm(struct batch_builder *bb, int64_t proc, uint64_t hash, int32_t rank,
		     int32_t nranks, uint64_t init_ns)
{
	Strata__V1__NcclComm *r = batch_builder__row(bb, BB_COMM);

	if (!r)
		return;
	r->process = (uint32_t)proc;
	r->comm_hash = hash;
	r->rank = rank;
	r->nranks = nranks;
	r->init_ns = init_ns;
	r->recovered = GPU_COMM_IS_RECOVERED(hash);
}

/* A communicator read from process memory that is not its process's first
 * (which the process rows name): one NcclComm row per batch, from its
 * calls' rank and size, so the server can place them too. */
static void add_recovered_comm(struct batch_builder *bb, const struct gpu_data *d, int64_t proc,
			       const struct gpu_event *e, uint64_t *seen, size_t *nseen)
{
	const struct gpu_proc_info *pi = gpu_data__proc(d, e->tgid);

	if (!GPU_COMM_IS_RECOVERED(e->a[0]) || (pi && pi->comm_hash == e->a[0] && !pi->exited))
		return;
	for (size_t i = 0; i < *nseen; i++)
		if (seen[i] == e->a[0])
			return;
	if (*nseen < BATCH_RECOVERED_COMMS)
		seen[(*nseen)++] = e->a[0]; /* beyond: a row per call, still bounded */
	add_comm(bb, proc, e->a[0], (int32_t)(e->a[5] & 0xffffffff), (int32_t)(e->a[5] >> 32), 0);
}

/* Communicators, collectives (one row per call on this rank) and stats. */
static void add_nccl(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	uint64_t seen[BATCH_RECOVERED_COMMS];
	size_t nseen = 0;

	for (size_t i = 0; i < d->nprocs; i++) {
		const struct gpu_proc_info *pi = &d->procs[i];
		int64_t proc;

		if (pi->nccl_rank < 0 || pi->exited)
			continue;
		proc = proc_of(ab, d, pi->tgid);
		if (proc >= 0)
			add_comm(bb, proc, pi->comm_hash, pi->nccl_rank, pi->nccl_nranks, 0);
	}
	for (size_t i = 0; i < d->ncalls; i++) {
		const struct gpu_event *e = &d->calls[i].ev;
		uint32_t kind = gpu_api_kind(e->api);
		const struct gpu_proc_info *pi;
		Strata__V1__NcclCollective *r;
		const char *op;
		int64_t proc, stack;

		if (kind != GPU_KIND_COLL && kind != GPU_KIND_P2P && kind != GPU_KIND_NCCL_INIT)
			continue;
		proc = proc_of(ab, d, e->tgid);
		if (proc < 0)
			continue;
		if (kind == GPU_KIND_NCCL_INIT) { /* the first one is sent above */
			pi = gpu_data__proc(d, e->tgid);
			if (!pi || pi->comm_hash != e->a[0] || pi->exited)
				add_comm(bb, proc, e->a[0], (int32_t)(e->a[5] & 0xffffffff),
					 (int32_t)(e->a[5] >> 32), e->start_ns);
			continue;
		}
		add_recovered_comm(bb, d, proc, e, seen, &nseen);
		ROW_OR_DROP(r, BB_COLL);
		op = gpu_api_name(e->api);
		if (!strncmp(op, "nccl", 4))
			op += 4;
		r->process = (uint32_t)proc;
		r->tid = e->tid;
		r->comm_hash = e->a[0];
		r->seq = e->a[1];
		r->op_str = batch_builder__string(bb, op);
		r->dtype_str = batch_builder__string(bb, gpu_nccl_dtype_name(e->a[4] & 0xffff));
		r->bytes = e->a[3];
		r->entry_ns = e->start_ns;
		r->exit_ns = e->end_ns;
		r->peer = kind == GPU_KIND_P2P ? (int32_t)(uint32_t)(e->a[4] >> 32) : -1;
		stack = stack_of(g, bb, d, e->tgid, e->stack_id);
		r->stack = stack > 0 ? (uint32_t)stack : 0;
	}
	for (size_t i = 0; i < d->ncolls; i++) {
		const struct gpu_coll_row *c = &d->colls[i];
		Strata__V1__NcclCollectiveStat *r;
		struct gpu_coll_row prev;
		const char *op;
		int64_t proc;

		swap_prev(g, &g->colls, c, &prev);
		if (c->val.count == prev.val.count)
			continue;
		proc = proc_of(ab, d, c->key.tgid);
		if (proc < 0)
			continue;
		ROW_OR_DROP(r, BB_COLL_STAT);
		op = gpu_api_name(c->key.api);
		if (!strncmp(op, "nccl", 4))
			op += 4;
		r->process = (uint32_t)proc;
		r->comm_hash = c->key.id_hash;
		r->op_str = batch_builder__string(bb, op);
		r->count = c->val.count - prev.val.count;
		r->bytes = c->val.bytes - prev.val.bytes;
		r->total_ns = c->val.time_ns - prev.val.time_ns;
	}
}

/* What the hang diagnosis needs at the window's end (docs/diagnosis.md
 * "NCCL hangs"): the calls in flight, the state now of each live rank's
 * NCCL thread (/proc), and the ranks that exited in the window. */
static void add_hang_inputs(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d,
			    uint64_t window_start)
{
	struct batch_builder *bb = agent_batch__builder(ab);

	for (size_t i = 0; i < d->ninflight; i++) {
		const struct gpu_inflight_rec *c = &d->inflight[i];
		Strata__V1__InflightCall *r;
		const char *api = gpu_api_name(c->api);
		int64_t proc = proc_of(ab, d, c->tgid), stack;

		if (proc < 0)
			continue;
		if (gpu_api_kind(c->api) == GPU_KIND_COLL && !strncmp(api, "nccl", 4))
			api += 4; /* the op, as collectives name it */
		ROW_OR_DROP(r, BB_INFLIGHT);
		r->process = (uint32_t)proc;
		r->tid = c->tid;
		r->api_str = batch_builder__string(bb, api);
		r->entry_ns = c->entry_ns;
		r->comm_hash = c->comm_hash;
		r->seq = c->seq;
		r->bytes = c->bytes;
		r->rank = c->rank;
		r->nranks = c->nranks;
		stack = stack_of(g, bb, d, c->tgid, c->stack_id);
		r->stack = stack > 0 ? (uint32_t)stack : 0;
	}
	for (size_t i = 0; i < d->nprocs; i++) {
		const struct gpu_proc_info *pi = &d->procs[i];
		struct proc_thread_state ts;
		struct bb_frame kf[PROC_THREAD_FRAMES];
		Strata__V1__ThreadState *r;
		char state[2];
		int64_t proc, stack;

		if (pi->nccl_rank < 0 && !pi->nccl_tid)
			continue; /* not a rank */
		if (pi->exited) {
			if (pi->exit_ns < window_start)
				continue; /* told in an earlier batch */
			proc = proc_of(ab, d, pi->tgid);
			if (proc >= 0)
				batch_builder__process_exit(bb, (uint32_t)proc, pi->exit_ns);
			continue;
		}
		if (proc_thread__read("/proc", pi->tgid, pi->nccl_tid ? pi->nccl_tid : pi->tgid,
				      &ts))
			continue;
		proc = proc_of(ab, d, pi->tgid);
		if (proc < 0)
			continue;
		ROW_OR_DROP(r, BB_THREAD);
		state[0] = ts.state;
		state[1] = '\0';
		r->process = (uint32_t)proc;
		r->tid = pi->nccl_tid ? pi->nccl_tid : pi->tgid;
		r->state_str = batch_builder__string(bb, state);
		r->wchan_str = batch_builder__string(bb, ts.wchan);
		r->in_syscall = ts.syscall >= 0;
		r->syscall = ts.syscall >= 0 ? (uint32_t)ts.syscall : 0;
		/* /proc lists the innermost frame first; stacks are root first */
		for (uint32_t k = 0; k < ts.nframes; k++)
			kf[k] = (struct bb_frame){ .kind = STRATA__V1__FRAME__KIND__KERNEL,
						   .name = ts.frames[ts.nframes - 1 - k] };
		stack = ts.nframes ? batch_builder__stack(bb, kf, ts.nframes) : 0;
		r->stack = stack > 0 ? (uint32_t)stack : 0;
	}
}

/* What the layer lost this window, by side. */
static void add_drops(struct batch_gpu *g, const struct gpu_data *d, struct batch_meta *m)
{
	static const enum gpu_counter cuda_lost[] = {
		GPU_CNT_STATE_FULL,  GPU_CNT_SITES_FULL, GPU_CNT_STACKS_FULL,
		GPU_CNT_ALLOCS_FULL, GPU_CNT_TALLY_FULL, GPU_CNT_FUNCS_FULL,
	};
	static const enum gpu_counter nccl_lost[] = { GPU_CNT_EVENTS_LOST, GPU_CNT_COMMS_FULL,
						      GPU_CNT_COMM_UNKNOWN };

	for (size_t i = 0; i < sizeof(cuda_lost) / sizeof(cuda_lost[0]); i++)
		m->cuda_events_lost += d->bpf[cuda_lost[i]] - g->seen_bpf[cuda_lost[i]];
	for (size_t i = 0; i < sizeof(nccl_lost) / sizeof(nccl_lost[0]); i++)
		m->nccl_events_lost += d->bpf[nccl_lost[i]] - g->seen_bpf[nccl_lost[i]];
	m->cuda_events_lost += d->dropped_rows - g->seen_rows + d->allocs_dropped - g->seen_allocs;
	m->nccl_events_lost += d->dropped_calls - g->seen_calls;
	m->cuda_events_lost += d->alloc_calls_dropped - g->seen_alloc_calls;
	g->seen_alloc_calls = d->alloc_calls_dropped;
	memcpy(g->seen_bpf, d->bpf, sizeof(g->seen_bpf));
	g->seen_rows = d->dropped_rows;
	g->seen_calls = d->dropped_calls;
	g->seen_allocs = d->allocs_dropped;
}

int batch_gpu__call_row(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d,
			const struct gpu_event *e)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	uint32_t kind = gpu_api_kind(e->api);
	Strata__V1__GpuCall *r;
	const char *kernel;
	int64_t proc = proc_of(ab, d, e->tgid), stack;

	if (proc < 0)
		return (int)proc;
	stack = stack_of(g, bb, d, e->tgid, e->stack_id);
	r = batch_builder__row(bb, BB_GPU_CALL);
	if (!r)
		return -ENOSPC; /* counted by the builder */
	g->st.records++;
	r->process = (uint32_t)proc;
	r->tid = e->tid;
	r->api_str = batch_builder__string(bb, gpu_api_name(e->api));
	r->kind_str = batch_builder__string(bb, gpu_kind_name(kind));
	kernel = kind == GPU_KIND_LAUNCH ? gpu_data__kernel(d, e->tgid, e->a[0]) : NULL;
	r->name_str = batch_builder__string(bb, kernel ? kernel : "");
	r->start_ns = e->start_ns;
	r->end_ns = e->end_ns;
	r->ret = e->ret;
	if (kind == GPU_KIND_ALLOC || kind == GPU_KIND_FREE) {
		r->ptr = e->a[0];
		r->bytes = e->a[1];
	} else if (kind == GPU_KIND_COPY) {
		r->bytes = e->a[1];
	}
	r->stack = stack > 0 ? (uint32_t)stack : 0;
	return 0;
}

int batch_gpu__add(struct batch_gpu *g, struct agent_batch *ab, const struct gpu_data *d,
		   struct batch_meta *m)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	Strata__V1__ProbeDutyCycle *duty;
	int err;

	/* the values last shipped of the processes the layer let go (first: a
	 * pid reused since starts from zero) */
	gpu_table__drop_tgids(&g->sites, d->retired, d->nretired, NULL);
	gpu_table__drop_tgids(&g->tally, d->retired, d->nretired, NULL);
	gpu_table__drop_tgids(&g->errs, d->retired, d->nretired, NULL);
	gpu_table__drop_tgids(&g->colls, d->retired, d->nretired, NULL);
	err = err_deltas(g, d);
	if (err)
		return err;
	/* (process, path) -> module holds for one batch: a pid reused since
	 * is another process, with other files */
	paths_reset(g);
	add_sites(g, ab, d);
	add_tally(g, ab, d);
	add_nccl(g, ab, d);
	add_hang_inputs(g, ab, d, m->start_ns);
	if (d->nprocs && (duty = batch_builder__row(bb, BB_DUTY))) {
		uint64_t window = m->end_ns > m->start_ns ? m->end_ns - m->start_ns : 0;

		duty->probe_str = batch_builder__string(bb, "cuda");
		duty->ratio = d->sampling_ratio;
		duty->on_ns = (uint64_t)(d->sampling_ratio * (double)window);
	}
	add_drops(g, d, m);
	return 0;
}
