/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Python frames stitched into a native user stack: the one walk both the
 * local resolver (agent/core/resolve.c, symbolized profile) and the wire batch
 * builder (uploader/batch_builder.c, (build-id, offset) frames) use, so
 * the two put the same frames in the same order.  The walk only decides
 * the order; the caller's callbacks turn each frame into its own form.
 */
#ifndef STRATA_PY_STITCH_H
#define STRATA_PY_STITCH_H

#include <stdint.h>

#include "agent/proc/proc_tracker.h"
#include "agent/python/python.h"
#include "agent/core/sampler.h"

struct py_stitch_ops {
	/* A native user frame (ip as sampled; is_ret: a return address). */
	int (*native)(void *ctx, uint64_t ip, int is_ret);
	/* A Python frame: sym is its qualname/file/line, NULL when its code
	 * object could not be read (then f->code identifies it). */
	int (*python)(void *ctx, const struct strata_py_frame *f, const struct py_frame_sym *sym);
	/* "[stack lost]": the native user stack could not be read. */
	int (*lost)(void *ctx);
};

/*
 * Walks the user part of sample s of a CPython process (pp: its
 * interpreter), ROOT FIRST, calling ops for each frame.  The walker marked
 * the last (outermost) Python frame of each native eval call, so the
 * frames fall into groups, leaf first; the k-th _PyEval_EvalFrameDefault
 * frame counted from the leaf ran the k-th group.  Counting from the leaf
 * keeps the pairing right when either walk was cut short at the root.
 * Groups without an eval frame go above the native root, in order: the
 * native walk ended early (no unwind info yet for a library being loaded,
 * the depth limit in deep import chains), so those Python frames are the
 * callers of everything it saw.  Eval frames without a group stay native
 * (the Python walk stopped early).  Each case has its own counter in
 * python__stats().  Returns 0 or the first callback error.
 */
int py_stitch__walk(struct python *py, struct proc_tracker *procs, const struct sampler_sample *s,
		    const struct python_proc *pp, const struct py_stitch_ops *ops, void *ctx);

#endif /* STRATA_PY_STITCH_H */
