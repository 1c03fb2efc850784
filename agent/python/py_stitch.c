// SPDX-License-Identifier: Apache-2.0
#include "agent/python/py_stitch.h"

/* One Python frame, resolved (counted: frames, frames_unknown). */
static int emit_python(struct python *py, const struct python_proc *pp,
		       const struct strata_py_frame *f, const struct py_stitch_ops *ops, void *ctx)
{
	struct python_stats *st = python__stats(py);
	struct py_frame_sym sym;

	st->frames++;
	if (python__resolve_frame(py, pp, f, &sym)) {
		st->frames_unknown++;
		return ops->python(ctx, f, NULL);
	}
	return ops->python(ctx, f, &sym);
}

/* Python frames [start, end) of the stack (leaf first), root first. */
static int emit_group(struct python *py, const struct python_proc *pp,
		      const struct strata_py_stack *stack, uint32_t start, uint32_t end,
		      const struct py_stitch_ops *ops, void *ctx)
{
	int err = 0;

	for (uint32_t i = end; i-- > start && !err;)
		err = emit_python(py, pp, &stack->frames[i], ops, ctx);
	return err;
}

int py_stitch__walk(struct python *py, struct proc_tracker *procs, const struct sampler_sample *s,
		    const struct python_proc *pp, const struct py_stitch_ops *ops, void *ctx)
{
	const struct strata_stack_key *k = s->key;
	const struct strata_py_stack *stack = s->py;
	struct python_stats *st = python__stats(py);
	uint32_t gstart[STRATA_PY_MAX_DEPTH], gend[STRATA_PY_MAX_DEPTH], ngroups = 0, begin = 0;
	int32_t group_of[STRATA_MAX_STACK_DEPTH];
	uint32_t len = s->user ? s->user->len : 0, neval = 0;
	int err = 0;

	for (uint32_t i = 0; i < stack->len; i++) {
		if (!(stack->frames[i].flags & STRATA_PY_FRAME_ENTRY) && i + 1 < stack->len)
			continue;
		gstart[ngroups] = begin;
		gend[ngroups++] = i + 1;
		begin = i + 1;
	}
	for (uint32_t i = 0; i < len; i++) {
		const struct proc_mapping *m;
		uint64_t ip = s->user->ips[i], off;
		int is_ret = i > 0 || s->kern != NULL;

		group_of[i] = -1;
		if (proc_tracker__lookup(procs, k->tgid, k->mm_id, ip, &m))
			continue;
		off = ip - m->start + m->pgoff;
		if (python_proc__is_eval(pp, m->mod, is_ret && off ? off - 1 : off))
			group_of[i] = (int32_t)neval++;
	}
	st->stitched++;
	if (neval < ngroups)
		st->stitch_native_short++;
	else if (neval > ngroups)
		st->stitch_python_short++;
	for (uint32_t g = ngroups; g-- > neval && !err;)
		err = emit_group(py, pp, stack, gstart[g], gend[g], ops, ctx);
	if (!s->user && k->user_stack == STRATA_STACK_LOST && !err)
		err = ops->lost(ctx);
	for (int i = (int)len - 1; i >= 0 && !err; i--) {
		int32_t g = group_of[i];

		if (g >= 0 && (uint32_t)g < ngroups)
			err = emit_group(py, pp, stack, gstart[g], gend[g], ops, ctx);
		else
			err = ops->native(ctx, s->user->ips[i], i > 0 || s->kern != NULL);
	}
	return err;
}
