/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finds CPython in a process from its executable mappings: the file that
 * defines _PyRuntime (the python3.X executable, or libpython3.X.so), its
 * version (Py_Version, else the file name), where _PyRuntime is in the
 * process, and where _PyEval_EvalFrameDefault is in the file (the native
 * frames Python frames are stitched into).  Reads ELF symbols only; 3.13's
 * _Py_DebugOffsets are read from the process by the caller.
 */
#ifndef STRATA_PYTHON_DETECT_H
#define STRATA_PYTHON_DETECT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/proc/proc_tracker.h"

#define PY_EVAL_RANGES 2 /* the function and its .cold part */

struct py_found {
	unsigned major, minor;
	uint64_t runtime;	  /* address of _PyRuntime in the process */
	const struct module *mod; /* the file holding the interpreter */
	uint64_t eval_lo[PY_EVAL_RANGES], eval_hi[PY_EVAL_RANGES]; /* file offsets */
	int neval;
};

#define PY_FILE_SEGS 16

/* What one file holds for Python: detected once per file (the loader
 * registry, agent/proc/loaders.h, keeps it with the module). */
struct py_file {
	const struct module *mod;
	unsigned major, minor;
	bool refused;	  /* a debug or free-threaded build (by its name) */
	uint64_t runtime; /* ELF vaddr of _PyRuntime */
	uint64_t eval_lo[PY_EVAL_RANGES], eval_hi[PY_EVAL_RANGES]; /* file offsets */
	int neval;
	struct {
		uint64_t offset, vaddr, filesz;
	} seg[PY_FILE_SEGS]; /* PT_LOAD segments: the load bias of a mapping */
	int nseg;
};

/*
 * Whether mod holds the interpreter: 0 (*out filled), -ENOTSUP (a debug or
 * free-threaded build, whose layout the offsets table does not describe:
 * out->refused, major, minor, mod set), -ENOENT (not named like an
 * interpreter, or no _PyRuntime: e.g. the pyenv python3.X that links
 * libpython).  Only files named like an interpreter are opened: the check
 * costs one ELF symbol scan.
 */
int python_detect_file(const struct module *mod, struct py_file *out);

/*
 * Looks for CPython among an address space's mappings maps[0..n), files[i]
 * being python_detect_file's answer for maps[i].mod (NULL: none).  Returns
 * 0 (*out filled), -ENOENT (no CPython), or -ENOTSUP (only a debug or
 * free-threaded build; out->major/minor/mod name it).
 */
int python_detect(const struct proc_mapping *maps, const struct py_file *const *files, size_t n,
		  struct py_found *out);

/* The version named by a file's base name: "python3.11", "libpython3.12.so.1.0"
 * -> 3, 12.  0, -ENOENT (not an interpreter's name), or -ENOTSUP (version
 * set, but a debug "python3.12d" or free-threaded "python3.13t" build). */
int python_detect__version_from_name(const char *path, unsigned *major, unsigned *minor);

#endif /* STRATA_PYTHON_DETECT_H */
