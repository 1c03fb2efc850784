/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Turns drained raw samples (ips) into symbolized profile samples: user ips
 * through the process tracker and the symbolizer, kernel ips through
 * kallsyms.  Frames that cannot be resolved keep module+offset.
 */
#ifndef STRATA_RESOLVE_H
#define STRATA_RESOLVE_H

#include "agent/proc/proc_tracker.h"
#include "agent/python/python.h"
#include "agent/core/sampler.h"
#include "agent/proc/unwind_loader.h"
#include "lib/profile.h"
#include "symbolize/symbolize.h"

struct resolver {
	struct proc_tracker *procs;
	struct symbolizer *sym;
	struct ksyms *ksyms;	      /* NULL: kernel frames stay addresses */
	struct unwind_loader *unwind; /* NULL: FP only; else tables to keep warm */
	struct python *python;	      /* NULL: Python frames are not stitched */
	struct profile *out;
	uint64_t frames_unknown;   /* user ip in no known mapping */
	uint64_t frames_truncated; /* beyond the frame buffer (leafmost) */
};

/* sampler_sample_fn: adds one drained sample to r->out. */
int resolver__add(void *r, const struct sampler_sample *s);

/* GPU layer: resolves one user stack (leaf first, as captured) into frame
 * indexes of r->out, root first, with the thread's Python frames py (NULL:
 * none) stitched in at the interpreter's frames.  Returns the frame count
 * (at most max) or -errno. */
int resolver__user_stack(struct resolver *r, uint32_t tgid, uint64_t mm_id,
			 const struct strata_stack *st, const struct strata_py_stack *py,
			 uint32_t *idx, uint32_t max);

#endif /* STRATA_RESOLVE_H */
