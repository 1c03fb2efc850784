// SPDX-License-Identifier: Apache-2.0
/* Local encodings of struct gpu_data: the API tally, the leak report (text
 * table and pprof heap profile) and the Perfetto/Chrome trace. */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/gpu/gpu_data.h"
#include "agent/gpu/gpu_names.h"

/* ---- tally ---------------------------------------------------------- */

int gpu_data__write_tally(const struct gpu_data *d, FILE *out)
{
	struct gpu_tally_val sum[GPU_API_MAX];

	memset(sum, 0, sizeof(sum));
	for (size_t a = 0; a < GPU_API_MAX; a++)
		sum[a].min_ns = UINT64_MAX;
	for (size_t i = 0; i < d->ntally; i++) {
		const struct gpu_tally_row *r = &d->tally[i];
		struct gpu_tally_val *s;

		if (r->key.api >= GPU_API_MAX)
			continue;
		s = &sum[r->key.api];
		s->calls += r->val.calls;
		s->total_ns += r->val.total_ns;
		if (r->val.min_ns < s->min_ns)
			s->min_ns = r->val.min_ns;
		if (r->val.max_ns > s->max_ns)
			s->max_ns = r->val.max_ns;
	}
	fprintf(out,
		"# strata GPU API tally: %zu processes; launch/alloc/copy/sync probes attached "
		"%.1f%% of the time (divide their calls by %.4f to estimate the total)\n",
		d->nprocs, 100 * d->sampling_ratio, d->sampling_ratio);
	fprintf(out, "%-26s %10s %12s %10s %10s %10s %8s\n", "api", "calls", "total_ms", "min_us",
		"avg_us", "max_us", "errors");
	for (uint32_t a = 0; a < GPU_API_MAX; a++) {
		const struct gpu_tally_val *s = &sum[a];
		uint64_t errors = 0;

		if (!s->calls)
			continue;
		for (size_t i = 0; i < d->nerrs; i++)
			if (d->errs[i].key.api == a)
				errors += d->errs[i].count;
		fprintf(out, "%-26s %10" PRIu64 " %12.3f %10.2f %10.2f %10.2f %8" PRIu64 "\n",
			gpu_api_name(a), (uint64_t)s->calls, s->total_ns / 1e6, s->min_ns / 1e3,
			(double)s->total_ns / (double)s->calls / 1e3, s->max_ns / 1e3, errors);
	}
	fprintf(out, "\n# non-success return codes\n%-26s %-36s %10s\n", "api", "code", "count");
	for (size_t i = 0; i < d->nerrs; i++) {
		const struct gpu_err_row *e = &d->errs[i];
		const char *name = gpu_ret_name(e->key.api, e->key.code);
		char num[32];

		snprintf(num, sizeof(num), "%" PRId64, (int64_t)e->key.code);
		fprintf(out, "%-26s %-36s %10" PRIu64 "\n", gpu_api_name(e->key.api),
			name ? name : num, (uint64_t)e->count);
	}
	return ferror(out) ? -EIO : 0;
}

/* ---- leaks ----------------------------------------------------------- */

/* Allocations made at a stack: the alloc sites of (tgid, stack). */
static void alloc_totals(const struct gpu_data *d, uint32_t tgid, uint64_t stack_id,
			 uint64_t *bytes, uint64_t *count)
{
	*bytes = *count = 0;
	for (size_t i = 0; i < d->nsites; i++) {
		const struct gpu_site *s = &d->sites[i];

		if (s->key.tgid == tgid && s->key.stack_id == stack_id &&
		    gpu_api_kind(s->key.api) == GPU_KIND_ALLOC) {
			*bytes += s->val.bytes;
			*count += s->val.count - s->val.errors;
		}
	}
}

static void write_rank(const struct gpu_data *d, uint32_t tgid, char *buf, size_t sz)
{
	const struct gpu_proc_info *p = gpu_data__proc(d, tgid);
	int rank = p ? (p->nccl_rank >= 0 ? p->nccl_rank : p->rank) : -1;

	if (rank >= 0)
		snprintf(buf, sz, "rank %d", rank);
	else
		snprintf(buf, sz, "-");
}

/* A leak group with its resolved stack, for merging groups that resolve
 * to the same frames (ids differ where the raw stacks did: the native
 * frames a Python frame replaced, or a walk made before the tables). */
struct leak_row {
	struct gpu_leak l;
	const struct gpu_stack *st;
	uint64_t hash;
};

static uint64_t frames_hash(const struct gpu_stack *st)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (uint32_t k = 0; st && k < st->nframes; k++)
		h = (h ^ st->frames[k]) * 0x100000001b3ULL;
	return h;
}

static bool same_frames(const struct gpu_stack *a, const struct gpu_stack *b)
{
	if (!a || !b)
		return a == b;
	return a->nframes == b->nframes &&
	       !memcmp(a->frames, b->frames, a->nframes * sizeof(*a->frames));
}

static int by_group(const void *a, const void *b)
{
	const struct leak_row *x = a, *y = b;

	if (x->l.tgid != y->l.tgid)
		return x->l.tgid < y->l.tgid ? -1 : 1;
	return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static int by_row_bytes(const void *a, const void *b)
{
	const struct leak_row *x = a, *y = b;

	return x->l.bytes < y->l.bytes ? 1 : x->l.bytes > y->l.bytes ? -1 : 0;
}

/* The leak groups, one per (process, resolved stack), largest first. */
static struct leak_row *merged_leaks(const struct gpu_data *d, const struct gpu_leak *leaks,
				     size_t nleaks, size_t *n)
{
	struct leak_row *v = calloc(nleaks + 1, sizeof(*v));
	size_t m = 0;

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < nleaks; i++) {
		v[i].l = leaks[i];
		v[i].st = gpu_data__stack(d, v[i].l.tgid, v[i].l.stack_id);
		v[i].hash = v[i].st ? frames_hash(v[i].st) : v[i].l.stack_id;
	}
	qsort(v, nleaks, sizeof(*v), by_group);
	for (size_t i = 0; i < nleaks; i++) {
		struct leak_row *r = m ? &v[m - 1] : NULL;

		if (r && r->l.tgid == v[i].l.tgid && r->hash == v[i].hash && r->st && v[i].st &&
		    same_frames(r->st, v[i].st)) {
			const struct gpu_leak *x = &v[i].l;

			r->l.bytes += x->bytes;
			r->l.count += x->count;
			r->l.first_bytes += x->first_bytes;
			if (x->oldest_ns < r->l.oldest_ns)
				r->l.oldest_ns = x->oldest_ns;
			if (x->first_ns < r->l.first_ns)
				r->l.first_ns = x->first_ns;
			if (x->last_ns > r->l.last_ns)
				r->l.last_ns = x->last_ns;
			continue;
		}
		v[m++] = v[i];
	}
	qsort(v, m, sizeof(*v), by_row_bytes);
	*n = m;
	return v;
}

/* One section: a header line, the column names, a row per stack. */
static int write_leak_rows(const struct gpu_data *d, const struct gpu_leak *leaks, size_t nleaks,
			   const char *what, FILE *out)
{
	size_t n;
	struct leak_row *v = merged_leaks(d, leaks, nleaks, &n);
	uint64_t total = 0, objs = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		total += v[i].l.bytes;
		objs += v[i].l.count;
	}
	fprintf(out,
		"# strata %s outstanding (at process exit, or at the end of the "
		"recording): %" PRIu64 " bytes in %" PRIu64 " allocations, %zu stacks\n",
		what, total, objs, n);
	fprintf(out, "%14s %8s %10s %14s %6s %-8s %s\n", "bytes", "count", "oldest_s", "growth_B/s",
		"pid", "rank", "stack (allocation site first)");
	for (size_t i = 0; i < n; i++) {
		const struct gpu_leak *l = &v[i].l;
		const struct gpu_stack *st = v[i].st;
		double span = l->last_ns > l->first_ns ? (l->last_ns - l->first_ns) / 1e9 : 0;
		double growth = span > 0 ? ((double)l->bytes - (double)l->first_bytes) / span : 0;
		double age = l->last_ns > l->oldest_ns ? (l->last_ns - l->oldest_ns) / 1e9 : 0;
		char rank[32], name[256];

		write_rank(d, l->tgid, rank, sizeof(rank));
		fprintf(out, "%14" PRIu64 " %8" PRIu64 " %10.3f %14.0f %6u %-8s", l->bytes,
			l->count, age, growth, l->tgid, rank);
		if (!st || !st->nframes)
			fprintf(out, " [stack unavailable]");
		for (uint32_t k = 0; st && k < st->nframes; k++) {
			const struct profile_frame *f =
				&d->frames->frames[st->frames[st->nframes - 1 - k]];

			fprintf(out, "%s%s", k ? " <- " : " ",
				profile__frame_name(f, name, sizeof(name)));
		}
		fputc('\n', out);
	}
	free(v);
	return 0;
}

/*
 * Two levels: the driver's allocations (cudaMalloc & co: with a caching
 * allocator, its segments), then - when a framework's USDT probes were
 * seen - the framework's own (the tensors inside those segments).
 */
int gpu_data__write_leaks_text(const struct gpu_data *d, FILE *out)
{
	int err = write_leak_rows(d, d->leaks, d->nleaks, "GPU allocations", out);

	if (!err && d->bpf[GPU_CNT_FW_EVENTS]) {
		fputc('\n', out);
		err = write_leak_rows(d, d->fw_leaks, d->nfw_leaks,
				      "framework allocations (caching allocator blocks, USDT)",
				      out);
	}
	return err ? err : ferror(out) ? -EIO : 0;
}

int gpu_data__write_leaks_pprof(const struct gpu_data *d, FILE *out)
{
	static const char *const types[] = { "inuse_space", "inuse_objects", "alloc_space",
					     "alloc_objects" };
	static const char *const units[] = { "bytes", "count", "bytes", "count" };
	struct profile *p = profile__new(1);
	int64_t *vals = calloc(4 * d->nleaks + 4, sizeof(*vals));
	uint32_t *idx = calloc(PROFILE_MAX_FRAMES, sizeof(*idx));
	int err = 0;

	if (!p || !vals || !idx) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < d->nleaks && !err; i++) {
		const struct gpu_leak *l = &d->leaks[i];
		const struct gpu_stack *st = gpu_data__stack(d, l->tgid, l->stack_id);
		const struct gpu_proc_info *pi = gpu_data__proc(d, l->tgid);
		uint32_t n = 0;
		uint64_t ab, ac;

		for (uint32_t k = 0; st && k < st->nframes && n < PROFILE_MAX_FRAMES; k++) {
			int64_t fi = profile__intern_frame(p, &d->frames->frames[st->frames[k]]);

			if (fi < 0) {
				err = (int)fi;
				break;
			}
			idx[n++] = (uint32_t)fi;
		}
		if (!n) {
			struct profile_frame f = { .func = "[stack unavailable]",
						   .module = "[gpu]" };
			int64_t fi = profile__intern_frame(p, &f);

			if (fi < 0) {
				err = (int)fi;
				break;
			}
			idx[n++] = (uint32_t)fi;
		}
		/* one sample per group; tid 0 keeps groups of a process apart
		 * only by stack */
		size_t before = p->nsamples;

		err = profile__add_sample(p, l->tgid, 0, pi ? pi->comm : NULL, idx, n, 1);
		if (err || p->nsamples == before)
			continue; /* merged into an identical stack: values add below */
		alloc_totals(d, l->tgid, l->stack_id, &ab, &ac);
		vals[4 * before] = (int64_t)l->bytes;
		vals[4 * before + 1] = (int64_t)l->count;
		vals[4 * before + 2] = (int64_t)(ab > l->bytes ? ab : l->bytes);
		vals[4 * before + 3] = (int64_t)(ac > l->count ? ac : l->count);
	}
	if (!err)
		err = profile__write_pprof_values(p, out, 4, types, units, vals, "inuse_space");
out:
	free(idx);
	free(vals);
	profile__free(p);
	return err;
}

int gpu_data__write_file(const struct gpu_data *d, const char *path,
			 int (*fn)(const struct gpu_data *, FILE *))
{
	char tmp[4096];
	FILE *f;
	int err;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	err = fn(d, f);
	if (fclose(f) && !err)
		err = -EIO;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

int gpu_data__write_leaks_file(const struct gpu_data *d, const char *path)
{
	size_t n = strlen(path);

	if (n > 6 && !strcmp(path + n - 6, ".pb.gz"))
		return gpu_data__write_file(d, path, gpu_data__write_leaks_pprof);
	if (n > 4 && !strcmp(path + n - 4, ".txt"))
		return gpu_data__write_file(d, path, gpu_data__write_leaks_text);
	return -EINVAL;
}
