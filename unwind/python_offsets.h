/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython struct offsets, one table for every supported version (3.10 to
 * 3.13, x86-64, default non-debug non-free-threaded builds), each field
 * citing the CPython struct it comes from.  The BPF walker gets a subset
 * (struct strata_py_proc); user space uses the rest to read code objects.
 * 3.13 carries its own offsets (_Py_DebugOffsets at the start of
 * _PyRuntime): py_offsets__from_debug() reads them and they win.
 */
#ifndef STRATA_PYTHON_OFFSETS_H
#define STRATA_PYTHON_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpf/strata.h"

struct py_offsets {
	uint16_t version; /* 0x030b: 3.11 */
	uint8_t frames;	  /* enum strata_py_frames */
	uint8_t match;	  /* enum strata_py_thread_match */
	/* the walker's fields: see struct strata_py_proc */
	uint16_t rt_interp_head, is_threads_head, ts_next, ts_thread, ts_frame, cframe_current,
		fr_previous, fr_code, fr_instr, fr_entry, fr_window, co_firstlineno, co_qualname,
		co_code_adaptive;
	/* user space: reading a code object's strings and line table */
	uint16_t co_filename, co_linetable;
	uint16_t bytes_size, bytes_sval; /* PyBytesObject: ob_size, ob_sval */
	uint16_t uni_length, uni_state;	 /* PyASCIIObject */
	uint16_t uni_ascii_size;	 /* sizeof(PyASCIIObject): ASCII data */
	uint16_t uni_compact_size;	 /* sizeof(PyCompactUnicodeObject) */
};

/* The table entry for 3.minor, or NULL (unknown version). */
const struct py_offsets *py_offsets__for(unsigned major, unsigned minor);

/* Versions in the table, for tests: fills out[] and returns the count. */
size_t py_offsets__all(const struct py_offsets **out, size_t max);

/*
 * 3.13+: parses the _Py_DebugOffsets that start _PyRuntime (n bytes of it
 * in buf) over *base (the table's entry for that version).  Returns 0,
 * -EINVAL (no "xdebugpy" cookie, short buffer, or an offset outside what
 * the walker can read) or -ENOTSUP (another version's layout, or a
 * free-threaded build).
 */
#define PY_DEBUG_OFFSETS_SIZE 584 /* bytes read from _PyRuntime: sizeof 3.13's struct */
int py_offsets__from_debug(const void *buf, size_t n, const struct py_offsets *base,
			   struct py_offsets *out);

/* The BPF walker's descriptor for an interpreter whose _PyRuntime is at
 * runtime. */
void py_offsets__to_bpf(const struct py_offsets *o, uint64_t runtime, struct strata_py_proc *d);

#endif /* STRATA_PYTHON_OFFSETS_H */
