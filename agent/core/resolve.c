// SPDX-License-Identifier: Apache-2.0
#include "agent/core/resolve.h"

#include <errno.h>
#include <string.h>

#include "agent/python/py_stitch.h"

#define MAX_FRAMES (2 * STRATA_MAX_STACK_DEPTH * 4) /* with inline expansion */

struct frame_buf {
	uint32_t idx[MAX_FRAMES];
	uint32_t n;
};

static int push(struct resolver *r, struct frame_buf *b, const struct profile_frame *f)
{
	int64_t idx;

	if (b->n >= MAX_FRAMES) {
		r->frames_truncated++; /* leafmost frames of a pathological stack */
		return 0;
	}
	struct profile *p = r->out;
	idx = profile__intern_frame(p, f);
	if (idx < 0)
		return (int)idx;
	b->idx[b->n++] = (uint32_t)idx;
	return 0;
}

/*
 * A user frame and its inline chain, outermost function first.  is_ret: ip
 * is a return address (every frame but a leaf sampled in user mode; a leaf
 * sampled in the kernel is the address after the syscall instruction).
 */
static int push_user(struct resolver *r, struct frame_buf *b, uint32_t tgid, uint64_t mm_id,
		     uint64_t ip, int is_ret)
{
	const struct proc_mapping *m;
	struct sym_frame sf[SYM_MAX_INLINE];
	struct profile_frame f = { .flags = PROFILE_FRAME_UNRESOLVED };
	int n = 0;

	if (proc_tracker__lookup(r->procs, tgid, mm_id, ip, &m)) {
		r->frames_unknown++;
		f.module = "[unknown]";
		f.addr = ip;
		return push(r, b, &f);
	}
	f.module = m->name;
	f.addr = ip - m->start + m->pgoff;
	if (r->unwind && m->mod)
		unwind_loader__touch(r->unwind, m->mod); /* sampled: keep its table */
	if (m->mod) {
		/* A return address points after the call: symbolize the call
		 * itself so inlining and line numbers are the caller's. */
		uint64_t q = is_ret && f.addr > 0 ? f.addr - 1 : f.addr;

		n = symbolizer__resolve(r->sym, m->mod->open_path, m->mod->build_id,
					m->mod->build_id_len, q, sf, SYM_MAX_INLINE);
	}
	if (n <= 0)
		return push(r, b, &f);
	for (int i = n - 1; i >= 0; i--) {
		struct profile_frame g = {
			.func = sf[i].func,
			.file = sf[i].file,
			.line = sf[i].line,
			.module = m->name,
			.addr = f.addr,
			.flags = sf[i].inlined ? PROFILE_FRAME_INLINED : 0,
		};
		int err = push(r, b, &g);
		if (err)
			return err;
	}
	return 0;
}

static int push_kernel(struct resolver *r, struct frame_buf *b, uint64_t ip, int is_ret)
{
	const char *mod = NULL, *name = NULL;
	struct profile_frame f = {
		.module = "[kernel]",
		.addr = ip,
		.flags = PROFILE_FRAME_KERNEL,
	};

	if (r->ksyms)
		/* A call that ends its function returns into the next one:
		 * name return addresses by the call instruction. */
		name = ksyms__resolve(r->ksyms, is_ret ? ip - 1 : ip, &mod, NULL);
	if (name) {
		f.func = name;
		if (mod)
			f.module = mod;
	} else {
		f.flags |= PROFILE_FRAME_UNRESOLVED;
	}
	return push(r, b, &f);
}

static int push_lost(struct resolver *r, struct frame_buf *b, uint32_t flags)
{
	struct profile_frame f = {
		.func = "[stack lost]",
		.module = "[lost]",
		.flags = flags,
	};

	return push(r, b, &f);
}

/* The stitch walk's callbacks (agent/python/py_stitch.h) for the local profile. */
struct stitch_ctx {
	struct resolver *r;
	struct frame_buf *b;
	const struct strata_stack_key *k;
};

static int stitch_native(void *ctx, uint64_t ip, int is_ret)
{
	struct stitch_ctx *c = ctx;

	return push_user(c->r, c->b, c->k->tgid, c->k->mm_id, ip, is_ret);
}

/* "qualname (file:line)" when its code object can still be read,
 * "[python]+0xCODE" (unresolved) when not. */
static int stitch_python(void *ctx, const struct strata_py_frame *f, const struct py_frame_sym *sym)
{
	struct stitch_ctx *c = ctx;
	struct profile_frame pf = { .module = "[python]", .flags = PROFILE_FRAME_PYTHON };

	if (!sym) {
		pf.addr = f->code;
		pf.flags |= PROFILE_FRAME_UNRESOLVED;
	} else {
		pf.func = sym->qualname;
		pf.file = sym->filename;
		pf.line = sym->line > 0 ? (uint32_t)sym->line : 0;
	}
	return push(c->r, c->b, &pf);
}

static int stitch_lost(void *ctx)
{
	struct stitch_ctx *c = ctx;

	return push_lost(c->r, c->b, 0);
}

static const struct py_stitch_ops stitch_ops = {
	.native = stitch_native,
	.python = stitch_python,
	.lost = stitch_lost,
};

int resolver__add(void *ctx, const struct sampler_sample *s)
{
	struct resolver *r = ctx;
	const struct strata_stack_key *k = s->key;
	const struct python_proc *pp = NULL;
	struct frame_buf b;
	int err = 0;

	b.n = 0;
	if (s->py && r->python)
		pp = python__find(r->python, k->mm_id);
	/* Root first: the outermost user frame is the last ip. */
	if (pp) {
		struct stitch_ctx c = { r, &b, k };

		err = py_stitch__walk(r->python, r->procs, s, pp, &stitch_ops, &c);
	} else if (s->user) {
		for (int i = (int)s->user->len - 1; i >= 0 && !err; i--)
			err = push_user(r, &b, k->tgid, k->mm_id, s->user->ips[i],
					i > 0 || s->kern != NULL);
	} else if (k->user_stack == STRATA_STACK_LOST) {
		err = push_lost(r, &b, 0);
	}
	if (s->kern) {
		for (int i = (int)s->kern->len - 1; i >= 0 && !err; i--)
			err = push_kernel(r, &b, s->kern->ips[i], i > 0);
	} else if (k->kern_stack == STRATA_STACK_LOST) {
		err = push_lost(r, &b, PROFILE_FRAME_KERNEL);
	}
	if (err)
		return err;
	return profile__add_sample(r->out, k->tgid, k->tid, s->comm, b.idx, b.n, s->count);
}

/* --- GPU layer: call-site stacks (additive; see agent/gpu/gpu.c) --- */
int resolver__user_stack(struct resolver *r, uint32_t tgid, uint64_t mm_id,
			 const struct strata_stack *st, const struct strata_py_stack *py,
			 uint32_t *idx, uint32_t max)
{
	const struct python_proc *pp = py && r->python ? python__find(r->python, mm_id) : NULL;
	struct frame_buf b;
	int err = 0;

	b.n = 0;
	/* Root first; every frame but the leaf (the probed function's first
	 * instruction) is a return address (is_ret: i > 0, as no kernel
	 * frames follow). */
	if (pp) {
		struct strata_stack_key k = { .tgid = tgid, .mm_id = mm_id };
		struct sampler_sample s = { .key = &k, .user = st, .py = py };
		struct stitch_ctx c = { r, &b, &k };

		err = py_stitch__walk(r->python, r->procs, &s, pp, &stitch_ops, &c);
	} else {
		for (int i = (int)st->len - 1; i >= 0 && !err; i--)
			err = push_user(r, &b, tgid, mm_id, st->ips[i], i > 0);
	}
	if (err)
		return err;
	if (b.n > max)
		b.n = max;
	for (uint32_t i = 0; i < b.n; i++)
		idx[i] = b.idx[i];
	return (int)b.n;
}
