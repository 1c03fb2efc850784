/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Python: CPython 3.10-3.13 frames read in BPF.
 * Part of the BPF ABI (bpf/strata.h): plain __u32/__u64 types and no libc
 * includes, so it compiles after either vmlinux.h or <linux/types.h>.
 * Every struct that crosses the boundary has its size asserted.
 */
#ifndef STRATA_BPF_STRATA_PYTHON_H
#define STRATA_BPF_STRATA_PYTHON_H

#include "lib/enums.h"

/*
 * Per address space (py_procs map, keyed by mm_id): where the interpreter's
 * state is and the struct offsets of its version (unwind/python_offsets.c,
 * each from the CPython source it cites; 3.13 from _Py_DebugOffsets).
 */
#define STRATA_PY_MAX_DEPTH 96	 /* Python frames per sample */
#define STRATA_PY_MAX_THREADS 64 /* thread states searched per lookup */
#define STRATA_PY_NO_FIELD 0xffff
/* The walker reads a code object's first STRATA_PY_CODE_WINDOW bytes and
 * a frame's first fr_window bytes (at most STRATA_PY_FRAME_WINDOW_MAX):
 * every offset it uses must lie inside. */
#define STRATA_PY_CODE_WINDOW 136
#define STRATA_PY_FRAME_WINDOW_MAX 128

enum strata_py_frames {
	STRATA_PY_FRAMES_310 = 1, /* PyFrameObject chain: one eval call per frame */
	STRATA_PY_FRAMES_311 = 2, /* _PyInterpreterFrame; is_entry ends an eval call */
	STRATA_PY_FRAMES_312 = 3, /* _PyInterpreterFrame; FRAME_OWNED_BY_CSTACK shims */
};

enum strata_py_thread_match {
	STRATA_PY_MATCH_TID = 1,     /* tstate->native_thread_id == kernel tid (3.11+) */
	STRATA_PY_MATCH_PTHREAD = 2, /* tstate->thread_id == pthread_self() == fsbase */
};

struct strata_py_proc {
	__u64 runtime;	       /* address of _PyRuntime */
	__u16 version;	       /* 0x030b for 3.11 */
	__u8 frames;	       /* enum strata_py_frames */
	__u8 match;	       /* enum strata_py_thread_match */
	__u16 rt_interp_head;  /* _PyRuntimeState.interpreters.head */
	__u16 is_threads_head; /* PyInterpreterState.threads.head (3.10: tstate_head) */
	__u16 ts_next;	       /* PyThreadState.next */
	__u16 ts_thread;       /* native_thread_id or thread_id (per match) */
	__u16 ts_frame;	       /* 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame */
	__u16 cframe_current;  /* _PyCFrame.current_frame, or STRATA_PY_NO_FIELD */
	__u16 fr_previous;     /* f_back / previous */
	__u16 fr_code;	       /* f_code / f_executable */
	__u16 fr_instr;	       /* 3.10 f_lasti (int), else prev_instr / instr_ptr */
	__u16 fr_entry;	       /* 3.11 is_entry, 3.12+ owner; STRATA_PY_NO_FIELD */
	__u16 co_firstlineno;
	__u16 co_name;		/* co_qualname (3.11+) or co_name */
	__u16 co_code_adaptive; /* first instruction (3.11+) */
	__u16 fr_window;	/* bytes read per frame: covers the fields above,
				 * stays inside the smallest frame */
	__u16 co_filename;	/* part of the identity (strata_py_ident) */
	__u16 pad;
};

#define STRATA_PY_FRAME_ENTRY 1	    /* last frame of one native eval call */
#define STRATA_PY_FRAME_TRUNCATED 2 /* stack: depth limit reached */

/* One Python frame: code object, its identity check, instruction index. */
struct strata_py_frame {
	__u64 code;  /* PyCodeObject address */
	__u32 ident; /* strata_py_ident(co_firstlineno, name, filename pointers) */
	__s32 lasti; /* instruction index in code units (-1: not started) */
	__u32 flags; /* STRATA_PY_FRAME_* */
	__u32 pad;
};

/* Leaf first, like the native stacks. */
struct strata_py_stack {
	__u32 len;
	__u32 flags; /* STRATA_PY_FRAME_TRUNCATED */
	struct strata_py_frame frames[STRATA_PY_MAX_DEPTH];
};

/* Why a Python walk failed or stopped, counted per CPU (map "py_errors"):
 * enum strata_py_err, listed in lib/enums.h (STRATA_PY_COUNTERS). */

/* The identity recorded with a code object address: a freed and reused
 * address gives another (first line, name, file) with high probability.
 * The file matters: every module body is (1, "<module>"), the name
 * interned, so a module's code freed after import and its address reused
 * by another module's would pass on name and line alone. */
static inline __u32 strata_py_ident(__u32 firstlineno, __u64 name_ptr, __u64 file_ptr)
{
	__u64 h = (name_ptr ^ ((__u64)firstlineno << 40)) * 0x9e3779b97f4a7c15ULL;

	h = (h ^ (h >> 29) ^ file_ptr) * 0xff51afd7ed558ccdULL;
	return (__u32)(h >> 32);
}

_Static_assert(sizeof(struct strata_py_proc) == 48, "py_proc layout");
_Static_assert(sizeof(struct strata_py_frame) == 24, "py_frame layout");
_Static_assert(sizeof(struct strata_py_stack) == 8 + 24 * STRATA_PY_MAX_DEPTH, "py_stack layout");

#endif /* STRATA_BPF_STRATA_PYTHON_H */
