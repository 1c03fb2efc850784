// SPDX-License-Identifier: Apache-2.0
/*
 * The drain: the BPF maps read into the tables, outstanding allocations
 * snapshotted, and exited processes swept out of BPF.
 */
#include "agent/gpu/gpu_comm_state.h"
#include "agent/gpu/gpu_impl.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/core/map_drain.h"
#include "agent/gpu/gpu_names.h"
#include "agent/proc/proc_thread.h"
#include "lib/clock.h"
#include "gpu.skel.h"
/* The address space BPF saw at a target's first call. */
static uint64_t proc_mm_id(struct gpu *g, uint32_t tgid)
{
	struct gpu_target t;

	if (bpf_map_lookup_elem(bpf_map__fd(g->skel->maps.gpu_targets), &tgid, &t))
		return 0;
	return t.mm_id;
}

/* Reads every entry of a BPF hash map into a user table (cumulative
 * values: BPF never deletes, so nothing is lost between read and clear). */
static void read_map(struct gpu *g, struct bpf_map *m, struct gpu_table *t, size_t val_off)
{
	int fd = bpf_map__fd(m), err = 0;
	size_t ks = bpf_map__key_size(m), vs = bpf_map__value_size(m);
	char key[64], next[64], val[128];
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		char *row;

		memcpy(key, next, ks);
		prev = key;
		if (bpf_map_lookup_elem(fd, key, val))
			continue;
		row = gpu_table__get(t, key, &err);
		if (!row) {
			g->data.dropped_rows++;
			continue;
		}
		memcpy(row + val_off, val, vs);
	}
}

/* The allocation map's entries into its mirror, unless BPF changed nothing
 * since the last read (its change count: bpf/gpu_maps.bpf.h).  The count
 * is read before the walk: a change during the walk moves it past what is
 * remembered, so the next drain reads again. */
static void mirror_read(struct gpu *g, struct bpf_map *map, struct gpu_alloc_mirror *m,
			const __u64 *changes)
{
	int fd = bpf_map__fd(map);
	uint64_t c = __atomic_load_n(changes, __ATOMIC_ACQUIRE);
	uint32_t max = bpf_map__max_entries(map);
	struct gpu_alloc_key key, next;
	void *prev = NULL;
	bool dropped = false;

	if (m->valid && c == m->seen) {
		g->alloc_walks_skipped++;
		return;
	}
	m->n = 0;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (m->n == m->cap) {
			size_t cap = m->cap ? 2 * m->cap : 1024;
			struct gpu_alloc_entry *v;

			if (cap > max)
				cap = max;
			v = cap > m->cap ? realloc(m->v, cap * sizeof(*v)) : NULL;
			if (!v) {
				g->data.dropped_rows++;
				dropped = true;
				continue;
			}
			m->v = v;
			m->cap = cap;
		}
		if (!bpf_map_lookup_elem(fd, &key, &m->v[m->n].val))
			m->v[m->n++].key = key;
	}
	m->seen = c;
	m->valid = !dropped; /* a mirror missing entries is read again */
}

/*
 * Outstanding allocations of one level, grouped by (process, stack) and
 * listed for the wire: the driver's (level 0, gpu_allocs: cudaMalloc & co)
 * or a framework's (level 1, gpu_fw_allocs: a caching allocator's blocks,
 * from USDT).  The driver's go first: they restart the list.
 */
static void snapshot_allocs(struct gpu *g, struct bpf_map *map, struct gpu_leaks *lk,
			    uint32_t level)
{
	struct gpu_alloc_mirror *m = &g->alloc_mirror[level];

	mirror_read(g, map, m,
		    level ? &g->skel->bss->gpu_fw_allocs_changes
			  : &g->skel->bss->gpu_allocs_changes);
	gpu_leaks__begin(lk, realtime_ns());
	if (!level)
		g->data.nallocs = 0; /* this drain's outstanding set */
	for (size_t i = 0; i < m->n; i++) {
		const struct gpu_alloc_key *k = &m->v[i].key;
		const struct gpu_alloc_val *v = &m->v[i].val;
		struct gpu_proc *p;

		p = gpu_proc_find(g, k->tgid);
		if (!p) /* exited: rows already final */
			p = gpu_proc_find_exited(g, k->tgid);
		if (gpu_leaks__add(lk, k->tgid, v->stack_id, v->size, gpu_to_realtime(g, v->ts_ns),
				   p && p->state == PROC_EXITED)) {
			g->data.dropped_rows++;
			continue;
		}
		gpu_resolve_stack(g, k->tgid, v->stack_id, p);
		if (g->data.allocs && g->data.nallocs < GPU_MAX_ALLOC_RECS)
			g->data.allocs[g->data.nallocs++] = (struct gpu_alloc_rec){
				.tgid = k->tgid,
				.api = v->api,
				.ptr = k->ptr,
				.size = v->size,
				.alloc_ns = gpu_to_realtime(g, v->ts_ns),
				.stack_id = v->stack_id,
				.mono_ns = v->ts_ns,
				.level = level,
			};
		else
			g->data.allocs_dropped++;
	}
	gpu_leaks__end(lk);
}

/*
 * An in-flight entry whose call is over though its return was never seen
 * (a stale entry: the hang report must not say a rank is stuck there).
 * BPF replaces such an entry at the thread's next probed call of the same
 * or a higher layer (call_stale()); until then user space tells it:
 *  - a sheddable call entered before the last detach of the sheddable
 *    probes (its shed_epoch is not the current gpu_shed_epoch) may never
 *    see its return: not trusted (a call really in flight then -- a stream
 *    sync that hangs -- is lost too; the rank's thread state and CPU stack
 *    still show where it is);
 *  - a thread blocked now (in a system call, or otherwise off the CPU)
 *    whose user stack pointer is above the entry's (the return address
 *    slot at entry) has left the call: it runs in a caller's frame.  A
 *    thread that runs, or that is deeper than the entry, cannot be judged
 *    from outside (it may be inside the call or in a later call of its
 *    caller): the entry is kept.  This is what tells an exception or
 *    longjmp through the call, once the thread blocks elsewhere.
 * Driver calls made under a stale runtime entry look nested to BPF and are
 * not seen; the stack-pointer test is what catches that case.
 */
static bool inflight_stale(struct gpu *g, const struct gpu_call *c, uint32_t tid)
{
	uint64_t sp;

	if (gpu_api_sheddable(c->api) && c->shed_epoch != g->skel->bss->gpu_shed_epoch)
		return true;
	return !proc_thread__user_sp("/proc", c->tgid, tid, &sp) && sp > c->sp;
}

/*
 * The calls in flight now (gpu_inflight: one outer call per thread) of the
 * traced processes, for the wire: who waits in which collective (with the
 * communicator's identity and the sequence number the call has: the
 * communicator's count of collectives so far, raised at the call's exit),
 * who is inside which CUDA call.  Stale entries are left out
 * (inflight_stale()); the server needs a call listed in consecutive
 * batches before it counts.
 */
static void snapshot_inflight(struct gpu *g)
{
	int fd = bpf_map__fd(g->skel->maps.gpu_inflight),
	    cfd = bpf_map__fd(g->skel->maps.gpu_comms);
	uint32_t key, next;
	struct gpu_call c;
	void *prev = NULL;

	g->data.ninflight = 0;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct gpu_inflight_rec *r;
		struct gpu_nccl_args a;
		uint32_t kind;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &c) || !c.active || c.api >= GPU_API_MAX ||
		    !gpu_proc_find(g, c.tgid))
			continue;
		kind = gpu_api_kind(c.api);
		if (kind == GPU_KIND_P2P || kind == GPU_KIND_NCCL_INIT)
			continue; /* pairwise / set-up: not a collective every rank enters */
		if (inflight_stale(g, &c, key)) {
			g->data.inflight_stale++;
			continue;
		}
		if (!g->data.inflight || g->data.ninflight == GPU_MAX_INFLIGHT) {
			g->data.inflight_dropped++;
			continue;
		}
		r = &g->data.inflight[g->data.ninflight++];
		*r = (struct gpu_inflight_rec){ .tgid = c.tgid,
						.tid = key,
						.api = c.api,
						.entry_ns = gpu_to_realtime(g, c.start_ns),
						.rank = -1,
						.nranks = -1,
						.stack_id = c.stack_id };
		if (kind == GPU_KIND_COLL && gpu_nccl_args_of(c.api, c.a, &a)) {
			struct gpu_comm_key ck = { .tgid = c.tgid, .comm = a.comm };
			struct gpu_comm_val cv;

			r->bytes = a.count * gpu_nccl_dtype_size(a.dtype);
			if (!bpf_map_lookup_elem(cfd, &ck, &cv)) {
				r->comm_hash = cv.id_hash;
				r->seq = cv.seq; /* raised at this call's exit */
				r->rank = (int32_t)cv.rank;
				r->nranks = (int32_t)cv.nranks;
			}
		}
	}
}

/* The BPF maps whose keys start with a tgid. */
void gpu_proc_maps_of(struct gpu *g, struct bpf_map **maps)
{
	struct bpf_map *m[GPU_PROC_MAPS] = { g->skel->maps.gpu_sites, g->skel->maps.gpu_tally,
					     g->skel->maps.gpu_errs,  g->skel->maps.gpu_allocs,
					     g->skel->maps.gpu_funcs, g->skel->maps.gpu_comms,
					     g->skel->maps.gpu_colls, g->skel->maps.gpu_fw_allocs };

	memcpy(maps, m, sizeof(m));
}

/* Every key of the per-process maps starts with the tgid. */
static bool key_of_tgid(int fd, const void *key, void *tgid)
{
	(void)fd;
	return *(const uint32_t *)key == *(const uint32_t *)tgid;
}

/* gpu_inflight is keyed by thread id: its call names the process. */
static bool call_of_tgid(int fd, const void *key, void *tgid)
{
	struct gpu_call c;

	return !bpf_map_lookup_elem(fd, key, &c) && c.tgid == *(const uint32_t *)tgid;
}

/* Deletes the entries of m that match says to, in one walk. */
static void purge_matching(struct bpf_map *m, bool (*match)(int fd, const void *key, void *ctx),
			   void *ctx)
{
	/* a walk that BPF's deletes restart at most a few times */
	uint64_t steps = 4 * (uint64_t)bpf_map__max_entries(m) + 64;

	map_drain__delete_matching(bpf_map__fd(m), bpf_map__key_size(m), steps, match, ctx);
}

/* Deletes every BPF entry of an exited process (its rows were read). */
static void purge_bpf(struct gpu *g, uint32_t tgid)
{
	struct bpf_map *maps[GPU_PROC_MAPS + 1];

	gpu_proc_maps_of(g, maps);
	maps[GPU_PROC_MAPS] = g->skel->maps.gpu_inflight;
	for (size_t m = 0; m <= GPU_PROC_MAPS; m++)
		purge_matching(maps[m], m < GPU_PROC_MAPS ? key_of_tgid : call_of_tgid, &tgid);
	bpf_map_delete_elem(bpf_map__fd(g->skel->maps.gpu_targets), &tgid);
	/* deleted here, not by BPF: the change counts did not move */
	g->alloc_mirror[0].valid = g->alloc_mirror[1].valid = false;
}

/* An allocation or in-flight call of the process before it exec'd (or
 * exited, its pid reused since): ctx is the exited slot. */
static bool alloc_before(int fd, const void *key, void *ctx)
{
	const struct gpu_proc *p = ctx;
	struct gpu_alloc_val v;

	return *(const uint32_t *)key == p->tgid && !bpf_map_lookup_elem(fd, key, &v) &&
	       v.ts_ns < p->gone_ktime_ns;
}

static bool call_before(int fd, const void *key, void *ctx)
{
	const struct gpu_proc *p = ctx;
	struct gpu_call c;

	return !bpf_map_lookup_elem(fd, key, &c) && c.tgid == p->tgid &&
	       c.start_ns < p->gone_ktime_ns;
}

/*
 * The pid of exited slot p runs another image now, traced in a live slot:
 * p exec'd (a launcher that made CUDA calls, then exec'd the training
 * program) or its pid was reused.  Every BPF entry is keyed by pid, and
 * the successor's (its target entry, communicators, call sites,
 * allocations) must stay: purging by pid three drains after the exec
 * deleted the new image's state (test_gpu_exec: its 25 leaked allocations
 * gone).  What is surely p's goes: the allocations it made and the calls
 * it was in before its exit or exec (the memory went with its address
 * space).  The rest, keyed like the successor's, is the successor's to
 * purge when it ends, target or not (after an exec: the same pid and start
 * time, the same process on the wire; a pid reused within the drains an
 * exit waits is rare).
 */
static void purge_predecessor(struct gpu *g, struct gpu_proc *p, struct gpu_proc *successor)
{
	struct bpf_map *allocs[] = { g->skel->maps.gpu_allocs, g->skel->maps.gpu_fw_allocs };

	g->purges_deferred++;
	successor->owes_purge = true;
	if (!p->gone_ktime_ns)
		return; /* found gone: when is not known */
	for (size_t m = 0; m < 2; m++)
		purge_matching(allocs[m], alloc_before, p);
	purge_matching(g->skel->maps.gpu_inflight, call_before, p);
	g->alloc_mirror[0].valid = g->alloc_mirror[1].valid = false;
}

static void finish_exited(struct gpu *g)
{
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i], *successor;
		struct gpu_proc_info *pi;

		if (p->state != PROC_EXITED)
			continue;
		if (!gpu_proc_settled(p)) {
			p->exit_drains++;
			continue;
		}
		successor = gpu_proc_find(g, p->tgid);
		if (successor)
			purge_predecessor(g, p, successor);
		else
			purge_bpf(g, p->tgid);
		for (uint32_t j = 0; j < p->nfiles; j++) {
			gpu_file_unref(g, &g->files[p->files[j]]);
		}
		p->nfiles = 0;
		p->state = PROC_FREE; /* its info stays in the data's process table */
		pi = (struct gpu_proc_info *)gpu_data__proc(&g->data, p->tgid);
		if (pi)
			pi->finished_drain = g->drains;
	}
}

void gpu_remember_procs(struct gpu *g);

int gpu__drain(struct gpu *g)
{
	const size_t site_val = offsetof(struct gpu_site, val);

	uint64_t lost;

	g->drains++;
	gpu_clock_calibrate(g);
	ring_buffer__consume(g->rb);
	lost = gpu_counter(g, GPU_CNT_EVENTS_LOST);
	if (lost != g->events_lost_seen) { /* a dlopen's event may be among them */
		g->events_lost_seen = lost;
		gpu_rescan_notified(g);
	}
	gpu_adopt_targets(g);
	gpu_drain_stacks(g);
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i];

		if ((p->state == PROC_TARGET || p->state == PROC_EXITED) && !p->mm_id)
			p->mm_id = proc_mm_id(g, p->tgid);
	}
	read_map(g, g->skel->maps.gpu_sites, &g->sites, site_val);
	read_map(g, g->skel->maps.gpu_tally, &g->tally, offsetof(struct gpu_tally_row, val));
	read_map(g, g->skel->maps.gpu_errs, &g->errs, offsetof(struct gpu_err_row, count));
	read_map(g, g->skel->maps.gpu_colls, &g->colls, offsetof(struct gpu_coll_row, val));
	for (size_t i = 0; i < g->sites.n; i++) {
		struct gpu_site *s = (struct gpu_site *)g->sites.rows + i;
		struct gpu_proc *p = gpu_proc_find(g, s->key.tgid);
		uint64_t mm;

		if (!p)
			p = gpu_proc_find_exited(g, s->key.tgid);
		mm = p ? p->mm_id : 0;
		gpu_resolve_stack(g, s->key.tgid, s->key.stack_id, p);
		if (gpu_api_kind(s->key.api) == GPU_KIND_LAUNCH && !s->kernel)
			s->kernel = gpu_kernel_name(g, s->key.tgid, mm, s->key.api, s->key.object);
	}
	snapshot_allocs(g, g->skel->maps.gpu_allocs, &g->leaks, 0);
	snapshot_allocs(g, g->skel->maps.gpu_fw_allocs, &g->fw_leaks, 1);
	snapshot_inflight(g);
	if (g->opts.budget >= 0)
		gpu_duty_plan(g, mono_ns());
	gpu_remember_procs(g);
	finish_exited(g);
	if (g->comm_state)
		gpu_comm_state__save(g->comm_state, bpf_map__fd(g->skel->maps.gpu_comms), "/proc");
	return 0;
}
