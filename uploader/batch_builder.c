// SPDX-License-Identifier: Apache-2.0
#include "uploader/batch_builder.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lib/hash.h"
#include "lib/hex.h"
#include "lib/vec.h"
#include "uploader/batch_tables.h"

#define AGENT_VERSION "0.1.0"
#define DEFAULT_MAX_STACKS 65536
#define DEFAULT_MAX_SAMPLES 262144

void batch_reset(struct batch_builder *bb)
{
	char **s = bb->strings.v;

	for (uint32_t i = 0; i < bb->strings.n; i++)
		free(s[i]);
	bb->strings.n = bb->mappings.n = bb->frames.n = bb->stacks.n = 0;
	bb->procs.n = bb->samples.n = 0;
	for (int l = 0; l < BB_LIST_MAX; l++)
		bb->rows[l].n = 0;
	profile_htab__fini(&bb->string_ids);
	profile_htab__fini(&bb->mapping_ids);
	profile_htab__fini(&bb->stack_ids);
	profile_htab__fini(&bb->proc_ids);
	profile_htab__fini(&bb->sample_ids);
	memset(&bb->string_ids, 0, sizeof(bb->string_ids));
	memset(&bb->mapping_ids, 0, sizeof(bb->mapping_ids));
	memset(&bb->stack_ids, 0, sizeof(bb->stack_ids));
	memset(&bb->proc_ids, 0, sizeof(bb->proc_ids));
	memset(&bb->sample_ids, 0, sizeof(bb->sample_ids));
	bb->pending = 0;
	bb->rows_dropped = 0;
}

struct batch_builder *batch_builder__new(const struct batch_builder_opts *opts)
{
	struct batch_builder *bb = calloc(1, sizeof(*bb));

	if (!bb)
		return NULL;
	if (opts)
		bb->o = *opts;
	if (!bb->o.max_stacks)
		bb->o.max_stacks = DEFAULT_MAX_STACKS;
	if (!bb->o.max_samples)
		bb->o.max_samples = DEFAULT_MAX_SAMPLES;
	if (!bb->o.zstd_level)
		bb->o.zstd_level = 3;
	if (!bb->o.agent_version)
		bb->o.agent_version = AGENT_VERSION;
	if (bb->o.node)
		snprintf(bb->node, sizeof(bb->node), "%s", bb->o.node);
	else if (gethostname(bb->node, sizeof(bb->node) - 1) || !bb->node[0])
		snprintf(bb->node, sizeof(bb->node), "unknown");
	if (getrandom(bb->run_id, sizeof(bb->run_id), 0) != sizeof(bb->run_id)) {
		free(bb);
		return NULL;
	}
	return bb;
}

void batch_builder__free(struct batch_builder *bb)
{
	if (!bb)
		return;
	batch_reset(bb);
	free(bb->strings.v);
	free(bb->mappings.v);
	free(bb->frames.v);
	free(bb->stacks.v);
	free(bb->procs.v);
	free(bb->samples.v);
	for (int l = 0; l < BB_LIST_MAX; l++)
		free(bb->rows[l].v);
	free(bb);
}

/* ---- interning ------------------------------------------------------------ */

static int str_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct batch_builder *bb = ctx;

	return !strcmp(((char **)bb->strings.v)[id], key);
}

/* Index of s in the string table (strings[0] is ""); UINT32_MAX on ENOMEM. */
static uint32_t intern(struct batch_builder *bb, const char *s)
{
	uint64_t h;
	int64_t id;
	char **slot, *copy;

	if (!bb->strings.n) { /* the table starts with "" */
		slot = vec_push(&bb->strings, sizeof(char *));
		if (!slot || !(*slot = strdup("")) ||
		    profile_htab__insert(&bb->string_ids, hash_bytes("", 0, 0), 0))
			return UINT32_MAX;
	}
	if (!s)
		s = "";
	h = hash_bytes(s, strlen(s), 0);
	id = profile_htab__find(&bb->string_ids, h, str_eq, s, bb);
	if (id >= 0)
		return (uint32_t)id;
	copy = strdup(s);
	slot = copy ? vec_push(&bb->strings, sizeof(char *)) : NULL;
	if (!slot) {
		free(copy);
		return UINT32_MAX;
	}
	*slot = copy;
	if (profile_htab__insert(&bb->string_ids, h, bb->strings.n - 1))
		return UINT32_MAX;
	return bb->strings.n - 1;
}

static int mapping_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct wmapping *a = &((const struct wmapping *)((const struct batch_builder *)ctx)
					     ->mappings.v)[id],
			      *b = key;

	return a->idlen == b->idlen && a->path == b->path && !memcmp(a->id, b->id, a->idlen);
}

/* A file a batch names for the first time in that batch: the uploader
 * notes it (the server may ask for it).  Once a batch, not once an agent
 * life: the uploader's table of noted files starts again when full, and
 * the files still in use are then noted again by the next batch. */
static void announce_file(struct batch_builder *bb, const uint8_t *id, size_t len,
			  const char *open_path)
{
	char hex[2 * 64 + 1];

	if (!bb->o.on_file || !open_path || !len)
		return;
	build_id_hex(id, len, hex, sizeof(hex));
	bb->o.on_file(bb->o.on_file_ctx, hex, open_path);
}

/* The batch's mapping of (build-id, path); *added: new in this batch. */
static uint32_t intern_mapping(struct batch_builder *bb, const uint8_t *id, size_t idlen,
			       const char *path, int *added)
{
	struct wmapping m = { .idlen = (uint32_t)(idlen < 64 ? idlen : 64) };
	uint64_t h;
	int64_t found;

	m.path = intern(bb, path ? path : "[unknown]");
	if (m.path == UINT32_MAX)
		return UINT32_MAX;
	if (m.idlen)
		memcpy(m.id, id, m.idlen);
	h = hash_bytes(m.id, m.idlen, m.path);
	found = profile_htab__find(&bb->mapping_ids, h, mapping_eq, &m, bb);
	*added = found < 0;
	if (found < 0)
		found = vec_add_indexed(&bb->mappings, &bb->mapping_ids, h, &m, sizeof(m));
	return found < 0 ? UINT32_MAX : (uint32_t)found;
}

static int stack_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct batch_builder *bb = ctx;
	const struct wstack *s = &((const struct wstack *)bb->stacks.v)[id];
	const struct wstack *k = key;
	const struct wframe *f = bb->frames.v;

	/* n == 0: the frames vector may be empty (NULL), memcmp must not see it */
	return s->n == k->n && (!s->n || !memcmp(&f[s->first], &f[k->first], s->n * sizeof(*f)));
}

/* The stack whose frames were just appended at frames[first..): an existing
 * one (the frames are taken back) or a new one. */
static int64_t intern_stack(struct batch_builder *bb, uint32_t first)
{
	struct wstack k = { first, bb->frames.n - first };
	uint64_t h = hash_bytes((const char *)bb->frames.v + (size_t)first * sizeof(struct wframe),
				(size_t)k.n * sizeof(struct wframe), 0);
	int64_t id = profile_htab__find(&bb->stack_ids, h, stack_eq, &k, bb);

	if (id >= 0) {
		bb->frames.n = first;
		return id;
	}
	if (bb->stacks.n >= bb->o.max_stacks) {
		bb->frames.n = first;
		return -E2BIG;
	}
	return vec_add_indexed(&bb->stacks, &bb->stack_ids, h, &k, sizeof(k));
}

static int proc_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct wproc *p =
		&((const struct wproc *)((const struct batch_builder *)ctx)->procs.v)[id];
	const struct bb_process *k = key;

	return p->pid == k->pid && p->start_time_ns == k->start_time_ns;
}

int64_t batch_builder__process(struct batch_builder *bb, const struct bb_process *p)
{
	uint64_t key[2] = { p->pid, p->start_time_ns };
	uint64_t h = hash_bytes(key, sizeof(key), 0);
	int64_t id = profile_htab__find(&bb->proc_ids, h, proc_eq, p, bb);
	struct wproc w = {
		.pid = p->pid,
		.ppid = p->ppid,
		.start_time_ns = p->start_time_ns,
		.has_rank = p->has_rank,
		.rank = p->rank,
		.local_rank = p->local_rank,
		.world_size = p->world_size,
	};

	if (id >= 0)
		return id;
	w.comm = intern(bb, p->comm);
	w.cmdline = intern(bb, p->cmdline);
	w.cgroup = intern(bb, p->cgroup);
	w.container = intern(bb, p->container);
	w.pod = intern(bb, p->pod);
	w.job = intern(bb, p->job);
	w.te = intern(bb, p->torchelastic_run_id);
	w.slurm = intern(bb, p->slurm_job_id);
	if (w.comm == UINT32_MAX || w.cmdline == UINT32_MAX || w.cgroup == UINT32_MAX ||
	    w.container == UINT32_MAX || w.pod == UINT32_MAX || w.job == UINT32_MAX ||
	    w.te == UINT32_MAX || w.slurm == UINT32_MAX)
		return -ENOMEM;
	for (int i = 0; i < p->nlabels && i < BB_MAX_LABELS; i++) {
		if (!p->labels[i][0] || !p->labels[i][1] || !p->labels[i][1][0])
			continue;
		w.labels[w.nlabels][0] = intern(bb, p->labels[i][0]);
		w.labels[w.nlabels][1] = intern(bb, p->labels[i][1]);
		if (w.labels[w.nlabels][0] == UINT32_MAX || w.labels[w.nlabels][1] == UINT32_MAX)
			return -ENOMEM;
		w.nlabels++;
	}
	return vec_add_indexed(&bb->procs, &bb->proc_ids, h, &w, sizeof(w));
}

static int sample_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct wsample *s = &((const struct wsample *)((const struct batch_builder *)ctx)
					    ->samples.v)[id],
			     *k = key;

	return s->stack == k->stack && s->process == k->process && s->tid == k->tid &&
	       s->comm == k->comm;
}

int64_t batch_builder__stack(struct batch_builder *bb, const struct bb_frame *frames, uint32_t n)
{
	uint32_t first = bb->frames.n;

	if (n > PROFILE_MAX_FRAMES)
		return -EINVAL;
	if (!bb->stacks.n) { /* stacks[0] is the empty stack ("no stack") */
		if (intern_stack(bb, 0) < 0)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct bb_frame *f = &frames[i];
		struct wframe w = { .kind = f->kind, .addr = f->addr, .is_return = !!f->is_return };
		struct wframe *slot;
		int added;

		if (f->kind == STRATA__V1__FRAME__KIND__NATIVE) {
			w.mapping =
				intern_mapping(bb, f->build_id, f->build_id_len, f->path, &added);
			if (w.mapping == UINT32_MAX)
				goto nomem;
			if (added)
				announce_file(bb, f->build_id, f->build_id_len, f->open_path);
		}
		w.name = intern(bb, f->name);
		w.module = intern(bb, f->module);
		w.file = intern(bb, f->file);
		w.line = f->line;
		if (w.name == UINT32_MAX || w.module == UINT32_MAX || w.file == UINT32_MAX)
			goto nomem;
		slot = vec_push(&bb->frames, sizeof(w));
		if (!slot)
			goto nomem;
		*slot = w;
	}
	return intern_stack(bb, first);
nomem:
	bb->frames.n = first;
	return -ENOMEM;
}

int batch_builder__add(struct batch_builder *bb, uint32_t process, uint32_t tid, const char *comm,
		       const struct bb_frame *frames, uint32_t n, uint64_t count)
{
	struct wsample k = { .process = process, .tid = tid };
	int64_t stack, id;
	uint64_t h;

	if (!count)
		return 0;
	if (process >= bb->procs.n)
		return -EINVAL;
	stack = batch_builder__stack(bb, frames, n);
	if (stack == -E2BIG)
		goto dropped;
	if (stack < 0)
		return (int)stack;
	k.stack = (uint32_t)stack;
	k.comm = intern(bb, comm ? comm : "");
	if (k.comm == UINT32_MAX)
		return -ENOMEM;
	h = hash_bytes(&k, offsetof(struct wsample, count), 0);
	id = profile_htab__find(&bb->sample_ids, h, sample_eq, &k, bb);
	if (id < 0) {
		if (bb->samples.n >= bb->o.max_samples)
			goto dropped;
		k.count = 0;
		id = vec_add_indexed(&bb->samples, &bb->sample_ids, h, &k, sizeof(k));
		if (id < 0)
			return (int)id;
	}
	((struct wsample *)bb->samples.v)[id].count += count;
	bb->pending += count;
	bb->st.samples += count;
	return 0;
dropped:
	bb->rows_dropped += count;
	bb->st.rows_dropped += count;
	return 0;
}

uint64_t batch_builder__pending(const struct batch_builder *bb)
{
	return bb->pending;
}

int64_t batch_builder__find_pid(const struct batch_builder *bb, uint32_t pid)
{
	const struct wproc *wp = bb->procs.v;

	for (uint32_t i = 0; i < bb->procs.n; i++)
		if (wp[i].pid == pid)
			return i;
	return -ENOENT;
}

/* Sets (or adds) the label key of p; dropped when p has BB_MAX_LABELS. */
static void set_label(struct batch_builder *bb, struct wproc *p, const char *key, const char *value)
{
	uint32_t k = intern(bb, key), v = intern(bb, value);

	if (k == UINT32_MAX || v == UINT32_MAX)
		return;
	for (int i = 0; i < p->nlabels; i++)
		if (p->labels[i][0] == k) {
			p->labels[i][1] = v;
			return;
		}
	if (p->nlabels < BB_MAX_LABELS) {
		p->labels[p->nlabels][0] = k;
		p->labels[p->nlabels++][1] = v;
	}
}

void batch_builder__label_rank(struct batch_builder *bb, uint32_t process, int32_t rank,
			       int32_t nranks, const char *job)
{
	struct wproc *p;

	if (process >= bb->procs.n)
		return;
	p = &((struct wproc *)bb->procs.v)[process];
	if (!p->has_rank && rank >= 0) {
		p->has_rank = 1;
		p->rank = rank;
		p->local_rank = -1;
		p->world_size = nranks;
		set_label(bb, p, BB_LABEL_RANK_SOURCE, "nccl");
	}
	batch_builder__label_job(bb, process, job, "nccl");
}

void batch_builder__label_job(struct batch_builder *bb, uint32_t process, const char *job,
			      const char *source)
{
	struct wproc *p;
	uint32_t j;

	if (process >= bb->procs.n || !job || !job[0])
		return;
	p = &((struct wproc *)bb->procs.v)[process];
	if (p->job)
		return;
	j = intern(bb, job);
	if (j != UINT32_MAX) {
		p->job = j;
		set_label(bb, p, BB_LABEL_JOB_SOURCE, source);
	}
}

void batch_builder__label_comm(struct batch_builder *bb, uint32_t process, const char *comm)
{
	struct wproc *p;
	uint32_t c;

	if (process >= bb->procs.n || !comm || !comm[0])
		return;
	p = &((struct wproc *)bb->procs.v)[process];
	if (p->comm) /* string 0 is "" */
		return;
	c = intern(bb, comm);
	if (c != UINT32_MAX)
		p->comm = c;
}

void batch_builder__process_exit(struct batch_builder *bb, uint32_t process, uint64_t exit_ns)
{
	if (process < bb->procs.n)
		((struct wproc *)bb->procs.v)[process].exit_ns = exit_ns;
}

uint32_t batch_builder__string(struct batch_builder *bb, const char *s)
{
	return intern(bb, s);
}

size_t batch_row_size(enum bb_list l)
{
	switch (l) {
	case BB_OFFCPU:
		return sizeof(Strata__V1__OffCpuSample);
	case BB_SCHED:
		return sizeof(Strata__V1__SchedStat);
	case BB_IRQ:
		return sizeof(Strata__V1__IrqStat);
	case BB_BREAKDOWN:
		return sizeof(Strata__V1__TimeBreakdown);
	case BB_LAUNCH:
		return sizeof(Strata__V1__CudaLaunch);
	case BB_ALLOC:
		return sizeof(Strata__V1__CudaAlloc);
	case BB_ALLOC_FAIL:
		return sizeof(Strata__V1__CudaAllocFailure);
	case BB_TRANSFER:
		return sizeof(Strata__V1__CudaTransfer);
	case BB_TALLY:
		return sizeof(struct bb_tally_row);
	case BB_DUTY:
		return sizeof(Strata__V1__ProbeDutyCycle);
	case BB_COMM:
		return sizeof(Strata__V1__NcclComm);
	case BB_COLL:
		return sizeof(Strata__V1__NcclCollective);
	case BB_COLL_STAT:
		return sizeof(Strata__V1__NcclCollectiveStat);
	case BB_SOFTIRQ:
		return sizeof(Strata__V1__SoftirqVectorStat);
	case BB_FOREIGN:
		return sizeof(Strata__V1__ForeignRun);
	case BB_TARGET_CPU:
		return sizeof(Strata__V1__TargetCpu);
	case BB_INFLIGHT:
		return sizeof(Strata__V1__InflightCall);
	case BB_THREAD:
		return sizeof(Strata__V1__ThreadState);
	case BB_CAPTURE_RUN:
		return sizeof(Strata__V1__CaptureRun);
	case BB_CAPTURE_SAMPLE:
		return sizeof(Strata__V1__CaptureSample);
	case BB_GPU_CALL:
		return sizeof(Strata__V1__GpuCall);
	default:
		return 0;
	}
}

static void row_init(enum bb_list l, void *r)
{
	switch (l) {
	case BB_OFFCPU:
		strata__v1__off_cpu_sample__init(r);
		break;
	case BB_SCHED:
		strata__v1__sched_stat__init(r);
		break;
	case BB_IRQ:
		strata__v1__irq_stat__init(r);
		break;
	case BB_BREAKDOWN:
		strata__v1__time_breakdown__init(r);
		break;
	case BB_LAUNCH:
		strata__v1__cuda_launch__init(r);
		break;
	case BB_ALLOC:
		strata__v1__cuda_alloc__init(r);
		break;
	case BB_ALLOC_FAIL:
		strata__v1__cuda_alloc_failure__init(r);
		break;
	case BB_TRANSFER:
		strata__v1__cuda_transfer__init(r);
		break;
	case BB_TALLY: {
		struct bb_tally_row *t = r;

		strata__v1__cuda_api_tally__init(&t->m);
		for (int i = 0; i < BB_TALLY_CODES; i++)
			strata__v1__cuda_api_tally__code__init(&t->codes[i]);
		break;
	}
	case BB_DUTY:
		strata__v1__probe_duty_cycle__init(r);
		break;
	case BB_COMM:
		strata__v1__nccl_comm__init(r);
		break;
	case BB_COLL:
		strata__v1__nccl_collective__init(r);
		break;
	case BB_COLL_STAT:
		strata__v1__nccl_collective_stat__init(r);
		break;
	case BB_SOFTIRQ:
		strata__v1__softirq_vector_stat__init(r);
		break;
	case BB_FOREIGN:
		strata__v1__foreign_run__init(r);
		break;
	case BB_TARGET_CPU:
		strata__v1__target_cpu__init(r);
		break;
	case BB_INFLIGHT:
		strata__v1__inflight_call__init(r);
		break;
	case BB_THREAD:
		strata__v1__thread_state__init(r);
		break;
	case BB_CAPTURE_RUN:
		strata__v1__capture_run__init(r);
		break;
	case BB_CAPTURE_SAMPLE:
		strata__v1__capture_sample__init(r);
		break;
	case BB_GPU_CALL:
		strata__v1__gpu_call__init(r);
		break;
	default:
		break;
	}
}

void *batch_builder__row(struct batch_builder *bb, enum bb_list l)
{
	size_t size = batch_row_size(l);
	void *r;

	if (!size)
		return NULL;
	if (bb->rows[l].n >= bb->o.max_samples) {
		batch_builder__dropped(bb, 1);
		return NULL;
	}
	r = vec_push(&bb->rows[l], size);
	if (!r)
		return NULL;
	memset(r, 0, size);
	row_init(l, r);
	return r;
}

uint32_t batch_builder__rows(const struct batch_builder *bb, enum bb_list l)
{
	return bb->rows[l].n;
}

void *batch_builder__row_at(struct batch_builder *bb, enum bb_list l, uint32_t i)
{
	if (i >= bb->rows[l].n)
		return NULL;
	return (char *)bb->rows[l].v + (size_t)i * batch_row_size(l);
}

void batch_builder__dropped(struct batch_builder *bb, uint64_t n)
{
	bb->rows_dropped += n;
	bb->st.rows_dropped += n;
}

void batch_builder__stats(const struct batch_builder *bb, struct batch_builder_stats *st)
{
	*st = bb->st;
}
