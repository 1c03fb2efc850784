/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Python support for a session: finds CPython in each sampled address
 * space (a loader of the process tracker's registry: when it reads the
 * maps), publishes the walker's
 * descriptor into the BPF py_procs map, and turns recorded Python frames
 * into profile frames, stitched into the native stack in place of the
 * _PyEval_EvalFrameDefault frames that ran them.  Bounded: at most max
 * interpreters (more are counted and not walked); symbol cache bounded.
 */
#ifndef STRATA_PYTHON_H
#define STRATA_PYTHON_H

#include <stdint.h>

#include "agent/proc/proc_tracker.h"
#include "agent/python/python_detect.h"
#include "agent/python/python_symbols.h"
#include "unwind/python_offsets.h"

struct python_proc {
	uint64_t mm_id;
	uint32_t tgid;
	struct py_offsets offs; /* the table's, or 3.13's own debug offsets */
	struct py_found found;
	struct python_proc *next;
};

struct python_stats {
	uint64_t interpreters;	      /* address spaces running CPython */
	uint64_t unknown_version;     /* CPython of a version not in the table */
	uint64_t debug_offsets;	      /* 3.13+: offsets taken from _Py_DebugOffsets */
	uint64_t debug_offsets_bad;   /* unreadable or inconsistent: refused */
	uint64_t refused;	      /* debug / free-threaded builds, bad debug offsets */
	uint64_t dropped;	      /* past max, or the BPF map refused */
	uint64_t stitched;	      /* samples whose Python frames were placed */
	uint64_t stitch_native_short; /* fewer eval frames than Python groups: the
				       * native walk ended early, the outer groups
				       * were placed above its root */
	uint64_t stitch_python_short; /* more eval frames than groups: the Python
				       * walk ended early, outer evals stay native */
	uint64_t prefetched;	      /* stacks symbolized at first sight (new code) */
	uint64_t frames;	      /* Python frames emitted */
	uint64_t frames_unknown;      /* ... of which unresolved (freed, unreadable) */
};

struct python;

/* py_procs_fd: the BPF map of descriptors (keyed by mm_id). */
struct python *python__new(int py_procs_fd, size_t max);
void python__free(struct python *py);

/* Its loader (agent/proc/loaders.h): the interpreter file detected once
 * per file; each address space's mappings looked at when (re)read (the
 * descriptor published), forgotten when it is gone. */
void python__loader(struct python *py, struct proc_loader *out);

const struct python_proc *python__find(const struct python *py, uint64_t mm_id);

/* True when file offset off of mod is inside _PyEval_EvalFrameDefault. */
int python_proc__is_eval(const struct python_proc *pp, const struct module *mod, uint64_t off);

/* Symbolizes one recorded frame (see py_symbols__resolve). */
int python__resolve_frame(struct python *py, const struct python_proc *pp,
			  const struct strata_py_frame *f, struct py_frame_sym *out);

/* A stack with code objects BPF had not seen lately (PROC_EV_PY_STACK):
 * symbolizes its frames now, while they are alive (module bodies are freed
 * when they finish), so the drain finds them in the symbol cache. */
void python__prefetch(struct python *py, uint64_t mm_id, const struct strata_py_stack *st);

struct python_stats *python__stats(struct python *py);
void python__symbol_stats(const struct python *py, struct py_symbols_stats *st);

#endif /* STRATA_PYTHON_H */
