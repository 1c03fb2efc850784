// SPDX-License-Identifier: Apache-2.0
#include "uploader/batch_builder.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zstd.h>

#include "agent/py_stitch.h"
#include "lib/hash.h"
#include "symbolize/buildid.h"
#include "uploader/proc_labels.h"

#include "strata.pb-c.h"

#define AGENT_VERSION "0.1.0"
#define DEFAULT_MAX_STACKS 65536
#define DEFAULT_MAX_SAMPLES 262144
#define PROC_CACHE_MAX 4096 /* (tgid, mm) label sets kept across batches */
#define KNOWN_FILES_MAX 8192
#define BB_MAX_FRAMES (2 * STRATA_MAX_STACK_DEPTH + STRATA_PY_MAX_DEPTH + 8)

/* A growable array of fixed-size elements. */
struct vec {
	void *v;
	uint32_t n, cap;
};

static void *vec_push(struct vec *a, size_t size)
{
	if (a->n == a->cap) {
		uint32_t ncap = a->cap ? a->cap * 2 : 64;
		void *nv = realloc(a->v, (size_t)ncap * size);

		if (!nv)
			return NULL;
		a->v = nv;
		a->cap = ncap;
	}
	return (char *)a->v + (size_t)a->n++ * size;
}

/* Compared and hashed as bytes: no implicit padding. */
/* Appends a copy of elem to a and indexes it under hash in h: the one way
 * every interned table of a batch grows.  Its index, or -ENOMEM. */
static int64_t vec_add_indexed(struct vec *a, struct profile_htab *h, uint64_t hash,
			       const void *elem, size_t size)
{
	void *slot = vec_push(a, size);

	if (!slot)
		return -ENOMEM;
	memcpy(slot, elem, size);
	if (profile_htab__insert(h, hash, a->n - 1)) {
		a->n--;
		return -ENOMEM;
	}
	return a->n - 1;
}

struct wframe {
	uint64_t addr;
	uint32_t kind, mapping, is_return, name, module, file, line, pad;
};

struct wstack {
	uint32_t first, n; /* into frames */
};

struct wmapping {
	uint8_t id[64];
	uint32_t idlen, path;
};

struct wsample {
	uint32_t stack, process, tid, comm;
	uint64_t count;
};

struct cached_proc {
	uint32_t tgid;
	uint64_t mm_id;
	int ok; /* labels read */
	struct proc_labels l;
};

struct batch_builder;

/* A sample's frames as they are built, root first (also the stitch walk's
 * context: agent/py_stitch.h). */
struct frame_out {
	struct batch_builder *bb;
	const struct strata_stack_key *k;
	struct bb_frame fr[BB_MAX_FRAMES];
	uint32_t n;
	char pyname[STRATA_PY_MAX_DEPTH][32]; /* names of unresolved Python frames */
	uint32_t npyname;
};

struct batch_builder {
	struct batch_builder_opts o;
	char node[256];
	uint8_t run_id[16];
	struct batch_sources src;

	/* per batch */
	struct vec strings; /* char * */
	struct profile_htab string_ids;
	struct vec mappings; /* struct wmapping */
	struct profile_htab mapping_ids;
	struct vec frames; /* struct wframe */
	struct vec stacks; /* struct wstack */
	struct profile_htab stack_ids;
	struct vec procs; /* struct bb_process copies: strings interned */
	struct profile_htab proc_ids;
	struct vec samples; /* struct wsample */
	struct profile_htab sample_ids;
	struct vec rows[BB_LIST_MAX]; /* the other record lists (enum bb_list) */
	uint64_t pending;
	uint64_t rows_dropped; /* this batch */

	/* across batches */
	struct vec cache; /* struct cached_proc */
	struct profile_htab cache_ids;
	struct profile_htab known_ids; /* build-ids already announced */
	struct vec known;	       /* their hashes (uint64_t) */

	struct batch_builder_stats st;
	struct frame_out out; /* the sample being converted (too big for the stack) */
};

struct wproc {
	uint32_t pid, ppid;
	uint64_t start_time_ns;
	uint32_t comm, cmdline, cgroup, container, pod, job, te, slurm;
	int has_rank;
	int32_t rank, local_rank, world_size;
};

static void reset_batch(struct batch_builder *bb)
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
	reset_batch(bb);
	free(bb->strings.v);
	free(bb->mappings.v);
	free(bb->frames.v);
	free(bb->stacks.v);
	free(bb->procs.v);
	free(bb->samples.v);
	for (int l = 0; l < BB_LIST_MAX; l++)
		free(bb->rows[l].v);
	free(bb->cache.v);
	profile_htab__fini(&bb->cache_ids);
	profile_htab__fini(&bb->known_ids);
	free(bb->known.v);
	free(bb);
}

void batch_builder__set_sources(struct batch_builder *bb, const struct batch_sources *src)
{
	bb->src = *src;
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

static int known_eq(uint32_t id, const void *key, const void *ctx)
{
	return ((const uint64_t *)((const struct batch_builder *)ctx)->known.v)[id] ==
	       *(const uint64_t *)key;
}

static void announce_file(struct batch_builder *bb, const uint8_t *id, size_t len,
			  const char *open_path)
{
	uint64_t h = hash_bytes(id, len, 7);
	char hex[2 * 64 + 1];

	if (!bb->o.on_file || !open_path || !len || bb->known.n >= KNOWN_FILES_MAX)
		return;
	/* By hash only: a collision (2^-64) costs one missed announcement. */
	if (profile_htab__find(&bb->known_ids, h, known_eq, &h, bb) >= 0)
		return;
	if (vec_add_indexed(&bb->known, &bb->known_ids, h, &h, sizeof(h)) < 0)
		return;
	build_id_hex(id, len, hex, sizeof(hex));
	bb->o.on_file(bb->o.on_file_ctx, hex, open_path);
}

static uint32_t intern_mapping(struct batch_builder *bb, const uint8_t *id, size_t idlen,
			       const char *path)
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

	return s->n == k->n && !memcmp(&f[s->first], &f[k->first], s->n * sizeof(*f));
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

		if (f->kind == STRATA__V1__FRAME__KIND__NATIVE) {
			w.mapping = intern_mapping(bb, f->build_id, f->build_id_len, f->path);
			if (w.mapping == UINT32_MAX)
				goto nomem;
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

/* ---- the sampler adapter ------------------------------------------------------- */

static int cache_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct cached_proc *c =
		&((const struct cached_proc *)((const struct batch_builder *)ctx)->cache.v)[id];
	const uint64_t *k = key;

	return c->tgid == (uint32_t)k[0] && c->mm_id == k[1];
}

/* Labels of (tgid, mm_id), read from /proc once per address space. */
static const struct cached_proc *labels_of(struct batch_builder *bb, uint32_t tgid, uint64_t mm_id)
{
	uint64_t key[2] = { tgid, mm_id };
	uint64_t h = hash_bytes(key, sizeof(key), 0);
	int64_t id = profile_htab__find(&bb->cache_ids, h, cache_eq, key, bb);
	struct cached_proc *c;

	if (id >= 0)
		return &((struct cached_proc *)bb->cache.v)[id];
	if (bb->cache.n >= PROC_CACHE_MAX) {
		/* Whole-cache reset: simple, and re-reading costs little. */
		bb->cache.n = 0;
		profile_htab__fini(&bb->cache_ids);
		memset(&bb->cache_ids, 0, sizeof(bb->cache_ids));
	}
	c = vec_push(&bb->cache, sizeof(*c));
	if (!c)
		return NULL;
	c->tgid = tgid;
	c->mm_id = mm_id;
	c->ok = !proc_labels__read(tgid, &c->l);
	if (!c->ok) {
		/* Gone before we looked: only the pid is known. */
		bb->st.proc_read_failed++;
		memset(&c->l, 0, sizeof(c->l));
		c->l.pid = tgid;
		c->l.rank = c->l.local_rank = c->l.world_size = -1;
	}
	if (profile_htab__insert(&bb->cache_ids, h, bb->cache.n - 1)) {
		bb->cache.n--;
		return NULL;
	}
	return c;
}

/* A native user frame: (build-id mapping, file offset), no name. */
static int out_native(void *ctx, uint64_t ip, int is_ret)
{
	struct frame_out *o = ctx;
	struct batch_builder *bb = o->bb;
	const struct proc_mapping *m;
	struct bb_frame *f;

	if (o->n >= BB_MAX_FRAMES)
		return 0;
	f = &o->fr[o->n++];
	memset(f, 0, sizeof(*f));
	f->is_return = is_ret;
	if (!bb->src.procs ||
	    proc_tracker__lookup(bb->src.procs, o->k->tgid, o->k->mm_id, ip, &m)) {
		bb->st.frames_unknown++;
		f->kind = STRATA__V1__FRAME__KIND__UNKNOWN;
		f->addr = ip;
		return 0;
	}
	f->kind = STRATA__V1__FRAME__KIND__NATIVE;
	f->path = m->name;
	f->addr = ip - m->start + m->pgoff;
	if (m->mod) {
		f->build_id = m->mod->build_id;
		f->build_id_len = (size_t)m->mod->build_id_len;
		f->open_path = m->mod->open_path;
		if (bb->src.unwind)
			unwind_loader__touch(bb->src.unwind, m->mod);
	}
	return 0;
}

/* A Python frame: qualname/file/line as the interpreter had them; one
 * whose code object was gone is "[python]+0xCODE", as in local output. */
static int out_python(void *ctx, const struct strata_py_frame *pf, const struct py_frame_sym *sym)
{
	struct frame_out *o = ctx;
	struct bb_frame *f;

	if (o->n >= BB_MAX_FRAMES)
		return 0;
	f = &o->fr[o->n++];
	*f = (struct bb_frame){ .kind = STRATA__V1__FRAME__KIND__PYTHON };
	if (sym) {
		f->name = sym->qualname;
		f->file = sym->filename;
		f->line = sym->line > 0 ? (uint32_t)sym->line : 0;
	} else if (o->npyname < STRATA_PY_MAX_DEPTH) {
		char *buf = o->pyname[o->npyname++];

		snprintf(buf, sizeof(o->pyname[0]), "[python]+0x%llx",
			 (unsigned long long)pf->code);
		f->name = buf;
	}
	return 0;
}

static int out_lost(void *ctx)
{
	struct frame_out *o = ctx;

	if (o->n < BB_MAX_FRAMES)
		o->fr[o->n++] = (struct bb_frame){ .kind = STRATA__V1__FRAME__KIND__LOST };
	return 0;
}

static const struct py_stitch_ops out_ops = {
	.native = out_native,
	.python = out_python,
	.lost = out_lost,
};

/* The batch's process for a cached label set (comm: when /proc was gone). */
static int64_t process_of_cached(struct batch_builder *bb, const struct cached_proc *cp,
				 const char *comm)
{
	struct bb_process p = {
		.pid = cp->tgid,
		.ppid = cp->l.ppid,
		.start_time_ns = cp->l.start_time_ns,
		.comm = cp->ok ? cp->l.comm : comm,
		.cmdline = cp->l.cmdline,
		.cgroup = cp->l.cgroup,
		.container = cp->l.container,
		.pod = cp->l.pod,
		.job = cp->l.job,
		.torchelastic_run_id = cp->l.torchelastic_run_id,
		.slurm_job_id = cp->l.slurm_job_id,
		.has_rank = cp->l.has_rank,
		.rank = cp->l.rank,
		.local_rank = cp->l.local_rank,
		.world_size = cp->l.world_size,
	};

	return batch_builder__process(bb, &p);
}

int64_t batch_builder__process_tgid(struct batch_builder *bb, uint32_t tgid,
				    const struct bb_process *fallback)
{
	const struct wproc *wp = bb->procs.v;
	const struct cached_proc *c = bb->cache.v;

	for (uint32_t i = 0; i < bb->procs.n; i++) /* its samples' instance */
		if (wp[i].pid == tgid)
			return i;
	for (uint32_t i = bb->cache.n; i-- > 0;) /* the latest label set read */
		if (c[i].tgid == tgid && c[i].ok)
			return process_of_cached(bb, &c[i], NULL);
	c = labels_of(bb, tgid, 0);
	if (!c)
		return -ENOMEM;
	if (c->ok || !fallback)
		return process_of_cached(bb, c, fallback ? fallback->comm : NULL);
	return batch_builder__process(bb, fallback);
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
	}
	if (!p->job && job && job[0]) {
		uint32_t j = intern(bb, job);

		if (j != UINT32_MAX)
			p->job = j;
	}
}

uint32_t batch_builder__string(struct batch_builder *bb, const char *s)
{
	return intern(bb, s);
}

static size_t row_size(enum bb_list l)
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
	default:
		break;
	}
}

void *batch_builder__row(struct batch_builder *bb, enum bb_list l)
{
	size_t size = row_size(l);
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

void batch_builder__dropped(struct batch_builder *bb, uint64_t n)
{
	bb->rows_dropped += n;
	bb->st.rows_dropped += n;
}

/* A drained stack's frames (root first) into bb->out; its process's index
 * or -errno. */
static int64_t sampled_frames(struct batch_builder *bb, const struct sampler_sample *s)
{
	const struct strata_stack_key *k = s->key;
	const struct cached_proc *cp = labels_of(bb, k->tgid, k->mm_id);
	const struct python_proc *pp = NULL;
	struct frame_out *o = &bb->out;
	int64_t proc;
	int err;

	if (!cp)
		return -ENOMEM;
	proc = process_of_cached(bb, cp, s->comm);
	if (proc < 0)
		return (int)proc;

	o->bb = bb;
	o->k = k;
	o->n = o->npyname = 0;
	if (s->py && bb->src.python && bb->src.procs)
		pp = python__find(bb->src.python, k->mm_id);
	/* Root first: the outermost user frame is the last ip. */
	if (pp) {
		err = py_stitch__walk(bb->src.python, bb->src.procs, s, pp, &out_ops, o);
		if (err)
			return err;
	} else if (s->user) {
		for (int i = (int)s->user->len - 1; i >= 0; i--)
			out_native(o, s->user->ips[i], i > 0 || s->kern != NULL);
	} else if (k->user_stack == STRATA_STACK_LOST) {
		out_lost(o);
	}
	if (s->kern) {
		for (int i = (int)s->kern->len - 1; i >= 0 && o->n < BB_MAX_FRAMES; i--) {
			uint64_t ip = s->kern->ips[i];
			const char *mod = NULL, *name = NULL;

			if (bb->src.ksyms)
				/* Name return addresses by their call instruction. */
				name = ksyms__resolve(bb->src.ksyms, i > 0 ? ip - 1 : ip, &mod,
						      NULL);
			o->fr[o->n++] = (struct bb_frame){ .kind = STRATA__V1__FRAME__KIND__KERNEL,
							   .addr = ip,
							   .is_return = i > 0,
							   .name = name,
							   .module = mod };
		}
	} else if (k->kern_stack == STRATA_STACK_LOST && o->n < BB_MAX_FRAMES) {
		o->fr[o->n++] = (struct bb_frame){ .kind = STRATA__V1__FRAME__KIND__LOST,
						   .module = "[kernel]" };
	}
	return proc;
}

int batch_builder__add_sampled(void *ctx, const struct sampler_sample *s)
{
	struct batch_builder *bb = ctx;
	int64_t proc = sampled_frames(bb, s);

	if (proc < 0)
		return (int)proc;
	return batch_builder__add(bb, (uint32_t)proc, s->key->tid, s->comm, bb->out.fr, bb->out.n,
				  s->count);
}

int batch_builder__sampled_stack(struct batch_builder *bb, const struct sampler_sample *s,
				 uint32_t *process, int64_t *stack)
{
	int64_t proc = sampled_frames(bb, s);

	if (proc < 0)
		return (int)proc;
	*process = (uint32_t)proc;
	*stack = batch_builder__stack(bb, bb->out.fr, bb->out.n);
	return 0;
}

/* ---- encoding ---------------------------------------------------------------- */

struct pb_arena {
	Strata__V1__Process *procs;
	Strata__V1__Process **proc_ptrs;
	Strata__V1__RankLabels *ranks;
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

#define ALLOC(p, n) ((p) = calloc((n) ? (n) : 1, sizeof(*(p))))

/* The other record lists: pointer arrays over the rows (fixed up here:
 * rows move while their vector grows). */
static int fill_rows(struct batch_builder *bb, Strata__V1__Batch *b, struct pb_arena *a)
{
	for (int l = 0; l < BB_LIST_MAX; l++) {
		size_t size = row_size((enum bb_list)l);

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

	if (!ALLOC(a->procs, bb->procs.n) || !ALLOC(a->proc_ptrs, bb->procs.n) ||
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

	if (intern(bb, "") == UINT32_MAX) /* a batch always has strings[0] */
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
	reset_batch(bb);
out:
	arena_free(&a);
	free(raw);
	free(z);
	return err;
}

void batch_builder__stats(const struct batch_builder *bb, struct batch_builder_stats *st)
{
	*st = bb->st;
}
