// SPDX-License-Identifier: Apache-2.0
#include "agent/ship/agent_batch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/python/py_stitch.h"
#include "agent/ship/proc_labels.h"
#include "lib/hash.h"
#include "lib/vec.h"

#include "strata.pb-c.h"

#define PROC_CACHE_MAX 4096 /* (tgid, mm) label sets kept across batches */
#define BB_MAX_FRAMES (2 * STRATA_MAX_STACK_DEPTH + STRATA_PY_MAX_DEPTH + 8)

/* A label set kept across batches, packed (proc_labels__pack: 6.5 MB for
 * a full cache as struct proc_labels, which filled for the first ten
 * minutes of the agent soak). */
struct cached_proc {
	uint32_t tgid;
	uint64_t mm_id;
	int ok;	      /* labels read */
	void *packed; /* its struct proc_labels */
};

/* A cached label set as its users read it (agent_batch.view: valid until
 * the next lookup). */
struct cached_view {
	uint32_t tgid;
	int ok;
	struct proc_labels l;
};

struct agent_batch;

/* A sample's frames as they are built, root first (also the stitch walk's
 * context: agent/python/py_stitch.h). */
struct frame_out {
	struct agent_batch *ab;
	const struct strata_stack_key *k;
	struct bb_frame fr[BB_MAX_FRAMES];
	uint32_t n;
	char pyname[STRATA_PY_MAX_DEPTH][32]; /* names of unresolved Python frames */
	uint32_t npyname;
};

struct agent_batch {
	struct batch_builder *bb;
	struct batch_sources src;
	struct vec cache; /* struct cached_proc, across batches */
	struct profile_htab cache_ids;
	struct cached_view view; /* the last one looked up, unpacked */
	uint64_t boot_epoch_ns;	 /* fixed: a process's start time reads the same every time */
	struct agent_batch_stats st;
	struct frame_out out; /* the sample being converted (too big for the stack) */
};

struct agent_batch *agent_batch__new(struct batch_builder *bb, const struct batch_sources *src)
{
	struct agent_batch *ab = calloc(1, sizeof(*ab));

	if (!ab)
		return NULL;
	ab->bb = bb;
	ab->src = *src;
	ab->boot_epoch_ns = proc_labels__boot_epoch_ns();
	return ab;
}

void agent_batch__free(struct agent_batch *ab)
{
	if (!ab)
		return;
	for (size_t i = 0; i < ab->cache.n; i++)
		free(((struct cached_proc *)ab->cache.v)[i].packed);
	free(ab->cache.v);
	profile_htab__fini(&ab->cache_ids);
	free(ab);
}

struct batch_builder *agent_batch__builder(struct agent_batch *ab)
{
	return ab->bb;
}

void agent_batch__stats(const struct agent_batch *ab, struct agent_batch_stats *st)
{
	*st = ab->st;
}

static int cache_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct cached_proc *c =
		&((const struct cached_proc *)((const struct agent_batch *)ctx)->cache.v)[id];
	const uint64_t *k = key;

	return c->tgid == (uint32_t)k[0] && c->mm_id == k[1];
}

/* c unpacked into ab->view. */
static const struct cached_view *view_of(struct agent_batch *ab, const struct cached_proc *c)
{
	ab->view.tgid = c->tgid;
	ab->view.ok = c->ok;
	proc_labels__unpack(c->packed, &ab->view.l);
	return &ab->view;
}

/* The latest label set read from /proc for tgid, or NULL. */
static const struct cached_proc *latest_read(const struct agent_batch *ab, uint32_t tgid)
{
	const struct cached_proc *c = ab->cache.v;

	for (size_t i = ab->cache.n; i-- > 0;)
		if (c[i].tgid == tgid && c[i].ok)
			return &c[i];
	return NULL;
}

static uint64_t cache_hash(const struct cached_proc *c)
{
	uint64_t key[2] = { c->tgid, c->mm_id };

	return hash_bytes(key, sizeof(key), 0);
}

/* The cache is full: the older half goes (not all of it: a process read
 * before and gone after keeps its identity, see labels_of). */
static int keep_newest_half(struct agent_batch *ab)
{
	struct cached_proc *c = ab->cache.v;
	size_t keep = ab->cache.n / 2;

	for (size_t i = 0; i < ab->cache.n - keep; i++)
		free(c[i].packed);
	memmove(c, c + (ab->cache.n - keep), keep * sizeof(*c));
	ab->cache.n = keep;
	ab->st.proc_cache_evicted += PROC_CACHE_MAX - keep;
	profile_htab__fini(&ab->cache_ids);
	memset(&ab->cache_ids, 0, sizeof(ab->cache_ids));
	for (size_t i = 0; i < keep; i++)
		if (profile_htab__insert(&ab->cache_ids, cache_hash(&c[i]), (uint32_t)i)) {
			for (size_t j = 0; j < keep; j++)
				free(c[j].packed);
			ab->cache.n = 0; /* an empty cache is still a consistent one */
			profile_htab__fini(&ab->cache_ids);
			memset(&ab->cache_ids, 0, sizeof(ab->cache_ids));
			return -ENOMEM;
		}
	return 0;
}

/* Labels of (tgid, mm_id), read from /proc once per address space. */
static const struct cached_view *labels_of(struct agent_batch *ab, uint32_t tgid, uint64_t mm_id)
{
	uint64_t key[2] = { tgid, mm_id };
	uint64_t h = hash_bytes(key, sizeof(key), 0);
	int64_t id = profile_htab__find(&ab->cache_ids, h, cache_eq, key, ab);
	struct proc_labels *l = &ab->view.l; /* the read's scratch */
	struct cached_proc *c;
	int err;

	if (id >= 0)
		return view_of(ab, &((struct cached_proc *)ab->cache.v)[id]);
	if (ab->cache.n >= PROC_CACHE_MAX) {
		err = keep_newest_half(ab);
		if (err)
			return NULL;
	}
	c = vec_push(&ab->cache, sizeof(*c));
	if (!c)
		return NULL;
	c->tgid = tgid;
	c->mm_id = mm_id;
	/* the process the samples are of: its pid may name another by now
	 * (-ESTALE), whose labels, read now or before, are not its own */
	err = proc_labels__read(tgid, ab->boot_epoch_ns,
				mm_id ? proc_tracker__start_ticks(ab->src.procs, tgid, mm_id) : 0,
				l);
	c->ok = !err;
	if (!c->ok) {
		const struct cached_proc *prev = err == -ESTALE ? NULL : latest_read(ab, tgid);

		ab->st.proc_read_failed++;
		if (prev) {
			/* Gone since an earlier read of another of its address
			 * spaces (a CPU sample's mm after the GPU layer's
			 * mm-less read): the same process, so the same
			 * identity (pid, start time) and labels.  Without this
			 * the server saw two processes, the one read with no
			 * start time holding part of its collectives. */
			proc_labels__unpack(prev->packed, l);
			c->ok = 1;
		} else {
			/* Gone before we looked: only the pid is known. */
			memset(l, 0, sizeof(*l));
			l->pid = tgid;
			l->rank = l->local_rank = l->world_size = -1;
		}
	}
	c->packed = proc_labels__pack(l);
	if (!c->packed || profile_htab__insert(&ab->cache_ids, h, ab->cache.n - 1)) {
		free(c->packed);
		ab->cache.n--;
		return NULL;
	}
	ab->view.tgid = tgid;
	ab->view.ok = c->ok;
	return &ab->view; /* l: what was packed */
}

/* A native user frame: (build-id mapping, file offset), no name. */
static int out_native(void *ctx, uint64_t ip, int is_ret)
{
	struct frame_out *o = ctx;
	struct agent_batch *ab = o->ab;
	const struct proc_mapping *m;
	struct bb_frame *f;

	if (o->n >= BB_MAX_FRAMES)
		return 0;
	f = &o->fr[o->n++];
	memset(f, 0, sizeof(*f));
	f->is_return = is_ret;
	if (!ab->src.procs ||
	    proc_tracker__lookup(ab->src.procs, o->k->tgid, o->k->mm_id, ip, &m)) {
		ab->st.frames_unknown++;
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
		if (ab->src.unwind)
			unwind_loader__touch(ab->src.unwind, m->mod);
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
static int64_t process_of_cached(struct batch_builder *bb, const struct cached_view *cp,
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
		.labels = { { BB_LABEL_JOB_SOURCE, cp->l.job_source },
			    { BB_LABEL_RANK_SOURCE, cp->l.rank_source },
			    { BB_LABEL_IDENTITY, cp->l.identity } },
		.nlabels = 3,
	};

	return batch_builder__process(bb, &p);
}

int64_t agent_batch__process_tgid(struct agent_batch *ab, uint32_t tgid,
				  const struct bb_process *fallback)
{
	const struct cached_proc *read;
	const struct cached_view *c;
	int64_t id = batch_builder__find_pid(ab->bb, tgid); /* its samples' instance */

	if (id >= 0) {
		/* added first by a record without its name (an off-CPU block
		 * of a process gone before /proc was read) */
		if (fallback)
			batch_builder__label_comm(ab->bb, (uint32_t)id, fallback->comm);
		return id;
	}
	read = latest_read(ab, tgid);
	if (read)
		return process_of_cached(ab->bb, view_of(ab, read), NULL);
	c = labels_of(ab, tgid, 0);
	if (!c)
		return -ENOMEM;
	if (c->ok || !fallback)
		return process_of_cached(ab->bb, c, fallback ? fallback->comm : NULL);
	return batch_builder__process(ab->bb, fallback);
}

/* A drained stack's frames (root first) into ab->out; its process's index
 * or -errno. */
static int64_t sampled_frames(struct agent_batch *ab, const struct sampler_sample *s)
{
	const struct strata_stack_key *k = s->key;
	const struct cached_view *cp = labels_of(ab, k->tgid, k->mm_id);
	const struct python_proc *pp = NULL;
	struct frame_out *o = &ab->out;
	int64_t proc;
	int err;

	if (!cp)
		return -ENOMEM;
	proc = process_of_cached(ab->bb, cp, s->comm);
	if (proc < 0)
		return (int)proc;

	o->ab = ab;
	o->k = k;
	o->n = o->npyname = 0;
	if (s->py && ab->src.python && ab->src.procs)
		pp = python__find(ab->src.python, k->mm_id);
	/* Root first: the outermost user frame is the last ip. */
	if (pp) {
		err = py_stitch__walk(ab->src.python, ab->src.procs, s, pp, &out_ops, o);
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

			if (ab->src.ksyms)
				/* Name return addresses by their call instruction. */
				name = ksyms__resolve(ab->src.ksyms, i > 0 ? ip - 1 : ip, &mod,
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

int agent_batch__add_sampled(void *ctx, const struct sampler_sample *s)
{
	struct agent_batch *ab = ctx;
	int64_t proc = sampled_frames(ab, s);

	if (proc < 0)
		return (int)proc;
	return batch_builder__add(ab->bb, (uint32_t)proc, s->key->tid, s->comm, ab->out.fr,
				  ab->out.n, s->count);
}

int agent_batch__sampled_stack(struct agent_batch *ab, const struct sampler_sample *s,
			       uint32_t *process, int64_t *stack)
{
	int64_t proc = sampled_frames(ab, s);

	if (proc < 0)
		return (int)proc;
	*process = (uint32_t)proc;
	*stack = batch_builder__stack(ab->bb, ab->out.fr, ab->out.n);
	return 0;
}
