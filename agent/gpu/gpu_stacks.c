// SPDX-License-Identifier: Apache-2.0
/*
 * Call-site stacks: copied out of BPF (native, Python, the pairs of both),
 * resolved into frames of gpu_data.frames, and the names of launched kernels.
 */
#include "agent/gpu/gpu_impl.h"

#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "gpu.skel.h"

/* Moves every entry of a BPF map keyed by a u64 id into user space:
 * keep() stores it (by id: a later copy of the same content is ignored),
 * and the BPF entry is deleted so the map stays small. */
static void drain_ids(struct gpu *g, struct bpf_map *m,
		      void (*keep)(struct gpu *g, uint64_t id, const void *val))
{
	int fd = bpf_map__fd(m);
	uint64_t key, next, *batch = NULL;
	size_t nb = 0, cap = 0;
	void *val = malloc(bpf_map__value_size(m)), *prev = NULL;

	while (val && bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (nb == cap) {
			uint64_t *b = realloc(batch, (cap ? 2 * cap : 256) * sizeof(*b));

			if (!b)
				break;
			batch = b;
			cap = cap ? 2 * cap : 256;
		}
		batch[nb++] = key;
	}
	for (size_t i = 0; i < nb; i++) {
		if (bpf_map_lookup_elem(fd, &batch[i], val))
			continue;
		bpf_map_delete_elem(fd, &batch[i]);
		keep(g, batch[i], val);
	}
	free(batch);
	free(val);
}

/* The row of id in t, added when new; NULL (counted) when t is full. */
static void *id_row(struct gpu *g, struct gpu_table *t, uint64_t id)
{
	int err = 0;
	void *r = gpu_table__get(t, &id, &err);

	if (!r)
		g->data.dropped_rows++;
	return r;
}

static void keep_native(struct gpu *g, uint64_t id, const void *val)
{
	const struct strata_stack *st = val;
	uint32_t len = st->len > STRATA_MAX_STACK_DEPTH ? STRATA_MAX_STACK_DEPTH : st->len;
	struct raw_stack *r = id_row(g, &g->raw_stacks, id);

	if (r)
		r->used = g->drains;
	if (!r || r->ips)
		return;
	r->ips = malloc((len ? len : 1) * sizeof(uint64_t));
	if (!r->ips)
		return;
	memcpy(r->ips, st->ips, len * sizeof(uint64_t));
	r->len = len;
}

static void keep_python(struct gpu *g, uint64_t id, const void *val)
{
	struct py_stack_row *r = id_row(g, &g->py_stacks, id);

	if (r)
		r->used = g->drains;
	if (r && !r->py)
		r->py = malloc(sizeof(*r->py));
	if (r && r->py)
		memcpy(r->py, val, sizeof(*r->py));
}

static void keep_pair(struct gpu *g, uint64_t id, const void *val)
{
	struct pair_row *r = id_row(g, &g->pairs, id);

	if (r) {
		r->pair = *(const struct gpu_stack_pair *)val;
		r->used = g->drains;
	}
}

/* Copies new stacks out of BPF: native frames, Python frames, and the
 * pairs naming sites that have both. */
void gpu_drain_stacks(struct gpu *g)
{
	drain_ids(g, g->skel->maps.gpu_stacks, keep_native);
	drain_ids(g, g->skel->maps.gpu_py_stacks, keep_python);
	drain_ids(g, g->skel->maps.gpu_stack_pairs, keep_pair);
}

/*
 * Resolves (tgid, stack_id) of process p (NULL: gone).  Kept once resolved;
 * a resolution with frames in no known mapping is retried at the next
 * drains while the process lives (a library mapped after the tracker's last
 * /proc read: the exit-time mapping records, or a later read, fill it in).
 */
void gpu_resolve_stack(struct gpu *g, uint32_t tgid, uint64_t stack_id, const struct gpu_proc *p)
{
	struct stack_key k = { .tgid = tgid, .stack_id = stack_id };
	uint64_t mm_id = p ? p->mm_id : 0, unknown = g->res.frames_unknown;
	bool final = !p || gpu_proc_settled(p);
	const struct strata_py_stack *py = NULL;
	struct pair_row *pair;
	struct raw_stack *raw;
	struct strata_stack st;
	uint32_t idx[PROFILE_MAX_FRAMES];
	struct stack_row *row;
	int n, err = 0;

	if (stack_id <= STRATA_STACK_LOST || gpu_table__find(&g->stacks, &k))
		return;
	pair = gpu_table__find(&g->pairs, &stack_id);
	if (pair) { /* native + Python */
		struct py_stack_row *pr = gpu_table__find(&g->py_stacks, &pair->pair.py);

		pair->used = g->drains;
		if (pr)
			pr->used = g->drains;
		if (!pr || !pr->py)
			return; /* not copied yet */
		py = pr->py;
		raw = gpu_table__find(&g->raw_stacks, &pair->pair.native);
	} else {
		raw = gpu_table__find(&g->raw_stacks, &stack_id);
	}
	if (raw) /* still needed (gpu_retire.c) */
		raw->used = g->drains;
	if (!raw || !raw->ips || !mm_id)
		return; /* not copied yet (next drain), or process never called */
	st.len = raw->len;
	memcpy(st.ips, raw->ips, raw->len * sizeof(uint64_t));
	n = resolver__user_stack(&g->res, tgid, mm_id, &st, py, idx, PROFILE_MAX_FRAMES);
	if (n < 0)
		return;
	if (g->res.frames_unknown != unknown && !final && ++raw->tries < GPU_RESOLVE_TRIES)
		return;
	row = gpu_table__get(&g->stacks, &k, &err);
	if (!row) {
		g->data.dropped_rows++;
		return;
	}
	row->s.tgid = tgid;
	row->s.stack_id = stack_id;
	row->s.frames = malloc(((size_t)n + 1) * sizeof(uint32_t));
	if (row->s.frames)
		memcpy(row->s.frames, idx, (size_t)n * sizeof(uint32_t));
	row->s.nframes = row->s.frames ? (uint32_t)n : 0;
}

/* Name of a launched kernel: the driver handle's name from the lookup
 * probes, else the host stub's symbol. */
const char *gpu_kernel_name(struct gpu *g, uint32_t tgid, uint64_t mm_id, uint32_t api,
			    uint64_t object)
{
	struct func_key fk = { .tgid = tgid, .object = object };
	struct func_row *fr = gpu_table__find(&g->funcs, &fk);
	char buf[GPU_KERNEL_NAME_LEN + 32];
	int err = 0;

	if (fr)
		return fr->name;
	if (api == GPU_API_cuLaunchKernel || api == GPU_API_cuLaunchKernelEx) {
		struct gpu_func_key bk = { .tgid = tgid, .handle = object };
		struct gpu_func_name n;

		if (bpf_map_lookup_elem(bpf_map__fd(g->skel->maps.gpu_funcs), &bk, &n))
			return NULL;
		n.name[sizeof(n.name) - 1] = 0;
		snprintf(buf, sizeof(buf), "%s", n.name);
	} else if (api == GPU_API_cudaGraphLaunch) {
		snprintf(buf, sizeof(buf), "graph@%#llx", (unsigned long long)object);
	} else {
		struct strata_stack st = { .len = 1, .ips = { object } };
		uint32_t idx[SYM_MAX_INLINE * 2];
		int n = mm_id ? resolver__user_stack(&g->res, tgid, mm_id, &st, NULL, idx, 32) : -1;

		if (n <= 0)
			return NULL;
		profile__frame_name(&g->data.frames->frames[idx[n - 1]], buf, sizeof(buf));
	}
	fr = gpu_table__get(&g->funcs, &fk, &err);
	if (!fr)
		return NULL;
	/* interned in the frames profile, which owns its strings */
	struct profile_frame f = { .func = buf, .module = "[kernel-name]" };
	int64_t fi = profile__intern_frame(g->data.frames, &f);

	fr->name = fi >= 0 ? g->data.frames->frames[fi].func : NULL;
	return fr->name;
}
