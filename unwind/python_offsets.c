// SPDX-License-Identifier: Apache-2.0
/*
 * The offsets below are byte offsets on x86-64 (LP64) of the default build
 * (no Py_DEBUG, no Py_GIL_DISABLED).  Each comment names the CPython
 * struct, in the file of that version's source tree.  Verified with
 * offsetof() against the installed headers of every version this host
 * has (tests/integration/test_python_offsets.sh) and, for 3.13, against
 * the interpreter's own _Py_DebugOffsets.
 */
#include "unwind/python_offsets.h"

#include <errno.h>
#include <string.h>

static const struct py_offsets table[] = {
	{
		/* 3.10: PyFrameObject chain, one _PyEval_EvalFrameDefault per
		 * frame; no native_thread_id yet (added in 3.11), so threads
		 * are matched by thread_id == pthread_self(). */
		.version = 0x030a,
		.frames = STRATA_PY_FRAMES_310,
		.match = STRATA_PY_MATCH_PTHREAD,
		.rt_interp_head = 32, /* Include/internal/pycore_runtime.h:
					 pyruntimestate.interpreters.head */
		.is_threads_head = 8, /* Include/internal/pycore_interp.h: _is.tstate_head */
		.ts_next = 8,	      /* Include/cpython/pystate.h: _ts.next */
		.ts_thread = 176,     /* _ts.thread_id (unsigned long) */
		.ts_frame = 24,	      /* _ts.frame (PyFrameObject *) */
		.cframe_current = STRATA_PY_NO_FIELD,
		.fr_previous = 24, /* Include/cpython/frameobject.h: _frame.f_back */
		.fr_code = 32,	   /* _frame.f_code */
		.fr_instr = 96,	   /* _frame.f_lasti (int, code units) */
		.fr_entry = STRATA_PY_NO_FIELD,
		.fr_window = 104,	/* sizeof(PyFrameObject) >= 120 */
		.co_firstlineno = 40,	/* Include/cpython/code.h: PyCodeObject.co_firstlineno */
		.co_qualname = 112,	/* co_name: 3.10 code objects have no qualname */
		.co_code_adaptive = 0,	/* f_lasti is already an index */
		.co_filename = 104,	/* PyCodeObject.co_filename */
		.co_linetable = 120,	/* PyCodeObject.co_linetable (PEP 626 format) */
		.bytes_size = 16,	/* Include/cpython/bytesobject.h: ob_base.ob_size */
		.bytes_sval = 32,	/* PyBytesObject.ob_sval */
		.uni_length = 16,	/* Include/cpython/unicodeobject.h: PyASCIIObject.length */
		.uni_state = 32,	/* PyASCIIObject.state */
		.uni_ascii_size = 48,	/* sizeof(PyASCIIObject) (with wstr) */
		.uni_compact_size = 72, /* sizeof(PyCompactUnicodeObject) */
	},
	{
		/* 3.11: _PyInterpreterFrame; several frames per eval call, the
		 * call's first marked is_entry. */
		.version = 0x030b,
		.frames = STRATA_PY_FRAMES_311,
		.match = STRATA_PY_MATCH_TID,
		.rt_interp_head = 40,  /* Include/internal/pycore_runtime.h:
					  pyruntimestate.interpreters.head */
		.is_threads_head = 16, /* Include/internal/pycore_interp.h: _is.threads.head */
		.ts_next = 8,	       /* Include/cpython/pystate.h: _ts.next */
		.ts_thread = 160,      /* _ts.native_thread_id */
		.ts_frame = 56,	       /* _ts.cframe (_PyCFrame *) */
		.cframe_current = 8,   /* _PyCFrame.current_frame */
		.fr_previous =
			48,	 /* Include/internal/pycore_frame.h: _PyInterpreterFrame.previous */
		.fr_code = 32,	 /* _PyInterpreterFrame.f_code */
		.fr_instr = 56,	 /* _PyInterpreterFrame.prev_instr */
		.fr_entry = 68,	 /* _PyInterpreterFrame.is_entry (bool) */
		.fr_window = 72, /* sizeof(_PyInterpreterFrame) before localsplus */
		.co_firstlineno = 72,	 /* Include/cpython/code.h: PyCodeObject.co_firstlineno */
		.co_qualname = 128,	 /* PyCodeObject.co_qualname */
		.co_code_adaptive = 184, /* PyCodeObject.co_code_adaptive */
		.co_filename = 112,	 /* PyCodeObject.co_filename */
		.co_linetable = 136,	 /* PyCodeObject.co_linetable (Objects/locations.md) */
		.bytes_size = 16,
		.bytes_sval = 32,
		.uni_length = 16,
		.uni_state = 32,
		.uni_ascii_size = 48,
		.uni_compact_size = 72,
	},
	{
		/* 3.12: each eval call pushes a shim frame owned by the C stack
		 * (FRAME_OWNED_BY_CSTACK); is_entry is gone. */
		.version = 0x030c,
		.frames = STRATA_PY_FRAMES_312,
		.match = STRATA_PY_MATCH_TID,
		.rt_interp_head = 40,  /* Include/internal/pycore_runtime.h:
					  pyruntimestate.interpreters.head */
		.is_threads_head = 72, /* Include/internal/pycore_interp.h: _is.threads.head */
		.ts_next = 8,	       /* Include/cpython/pystate.h: _ts.next */
		.ts_thread = 144,      /* _ts.native_thread_id */
		.ts_frame = 56,	       /* _ts.cframe (_PyCFrame *) */
		.cframe_current = 0,   /* _PyCFrame.current_frame */
		.fr_previous =
			8,	/* Include/internal/pycore_frame.h: _PyInterpreterFrame.previous */
		.fr_code = 0,	/* _PyInterpreterFrame.f_code */
		.fr_instr = 56, /* _PyInterpreterFrame.prev_instr */
		.fr_entry = 70, /* _PyInterpreterFrame.owner (char) */
		.fr_window = 72,
		.co_firstlineno = 68,	 /* Include/cpython/code.h: PyCodeObject.co_firstlineno */
		.co_qualname = 128,	 /* PyCodeObject.co_qualname */
		.co_code_adaptive = 192, /* PyCodeObject.co_code_adaptive */
		.co_filename = 112,	 /* PyCodeObject.co_filename */
		.co_linetable = 136,	 /* PyCodeObject.co_linetable */
		.bytes_size = 16,
		.bytes_sval = 32,
		.uni_length = 16,
		.uni_state = 32,
		.uni_ascii_size = 40, /* PyASCIIObject lost wstr in 3.12 */
		.uni_compact_size = 56,
	},
	{
		/* 3.13: _PyCFrame is gone (tstate->current_frame); instr_ptr is
		 * the instruction executing now.  _Py_DebugOffsets overrides. */
		.version = 0x030d,
		.frames = STRATA_PY_FRAMES_312,
		.match = STRATA_PY_MATCH_TID,
		.rt_interp_head = 632,	 /* Include/internal/pycore_runtime.h:
					    pyruntimestate.interpreters.head */
		.is_threads_head = 7344, /* Include/internal/pycore_interp.h: _is.threads.head */
		.ts_next = 8,		 /* Include/cpython/pystate.h: _ts.next */
		.ts_thread = 160,	 /* _ts.native_thread_id */
		.ts_frame = 72,		 /* _ts.current_frame */
		.cframe_current = STRATA_PY_NO_FIELD,
		.fr_previous =
			8,	/* Include/internal/pycore_frame.h: _PyInterpreterFrame.previous */
		.fr_code = 0,	/* _PyInterpreterFrame.f_executable */
		.fr_instr = 56, /* _PyInterpreterFrame.instr_ptr */
		.fr_entry = 70, /* _PyInterpreterFrame.owner (char) */
		.fr_window = 72,
		.co_firstlineno = 68,	 /* Include/cpython/code.h: PyCodeObject.co_firstlineno */
		.co_qualname = 128,	 /* PyCodeObject.co_qualname */
		.co_code_adaptive = 200, /* PyCodeObject.co_code_adaptive */
		.co_filename = 112,	 /* PyCodeObject.co_filename */
		.co_linetable = 136,	 /* PyCodeObject.co_linetable */
		.bytes_size = 16,
		.bytes_sval = 32,
		.uni_length = 16,
		.uni_state = 32,
		.uni_ascii_size = 40,
		.uni_compact_size = 56,
	},
};

const struct py_offsets *py_offsets__for(unsigned major, unsigned minor)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (major == 3 && table[i].version == (0x0300 | minor))
			return &table[i];
	return NULL;
}

size_t py_offsets__all(const struct py_offsets **out, size_t max)
{
	size_t n = sizeof(table) / sizeof(table[0]);

	for (size_t i = 0; i < n && i < max; i++)
		out[i] = &table[i];
	return n;
}

/* _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h): every
 * field a uint64_t, at these byte positions. */
enum {
	DBG_VERSION = 8,
	DBG_FREE_THREADED = 16,
	DBG_RT_INTERP_HEAD = 40,
	DBG_IS_THREADS_HEAD = 72,
	DBG_TS_NEXT = 168,
	DBG_TS_CURRENT_FRAME = 184,
	DBG_TS_NATIVE_TID = 200,
	DBG_FR_PREVIOUS = 232,
	DBG_FR_EXECUTABLE = 240,
	DBG_FR_INSTR_PTR = 248,
	DBG_FR_OWNER = 264,
	DBG_CO_FILENAME = 280,
	DBG_CO_QUALNAME = 296,
	DBG_CO_LINETABLE = 304,
	DBG_CO_FIRSTLINENO = 312,
	DBG_CO_CODE_ADAPTIVE = 344,
	DBG_BYTES_OB_SIZE = 520,
	DBG_BYTES_OB_SVAL = 528,
	DBG_UNI_STATE = 544,
	DBG_UNI_LENGTH = 552,
	DBG_UNI_ASCII_SIZE = 560,
	DBG_SIZE = 584,
};

static uint64_t dbg_field(const unsigned char *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* Stores v into *dst when it fits below limit; else -EINVAL. */
static int dbg_set(uint16_t *dst, uint64_t v, uint64_t limit)
{
	if (v >= limit)
		return -EINVAL;
	*dst = (uint16_t)v;
	return 0;
}

int py_offsets__from_debug(const void *buf, size_t n, const struct py_offsets *base,
			   struct py_offsets *out)
{
	const unsigned char *b = buf;
	uint64_t version;
	int err = 0;

	_Static_assert(PY_DEBUG_OFFSETS_SIZE == DBG_SIZE, "the whole 3.13 struct");
	if (n < PY_DEBUG_OFFSETS_SIZE || memcmp(b, "xdebugpy", 8))
		return -EINVAL;
	version = dbg_field(b, DBG_VERSION); /* PY_VERSION_HEX */
	if ((version >> 16) != 0x030d || !base || base->version != 0x030d)
		return -ENOTSUP;
	if (dbg_field(b, DBG_FREE_THREADED))
		return -ENOTSUP; /* a different object layout (ob_tid, ...) */
	*out = *base;
	/* The walker masks frame / code offsets to its read windows. */
	err |= dbg_set(&out->rt_interp_head, dbg_field(b, DBG_RT_INTERP_HEAD), 0xffff);
	err |= dbg_set(&out->is_threads_head, dbg_field(b, DBG_IS_THREADS_HEAD), 0xffff);
	err |= dbg_set(&out->ts_next, dbg_field(b, DBG_TS_NEXT), 0xffff);
	err |= dbg_set(&out->ts_frame, dbg_field(b, DBG_TS_CURRENT_FRAME), 0xffff);
	err |= dbg_set(&out->ts_thread, dbg_field(b, DBG_TS_NATIVE_TID), 0xffff);
	err |= dbg_set(&out->fr_previous, dbg_field(b, DBG_FR_PREVIOUS), out->fr_window - 7);
	err |= dbg_set(&out->fr_code, dbg_field(b, DBG_FR_EXECUTABLE), out->fr_window - 7);
	err |= dbg_set(&out->fr_instr, dbg_field(b, DBG_FR_INSTR_PTR), out->fr_window - 7);
	err |= dbg_set(&out->fr_entry, dbg_field(b, DBG_FR_OWNER), out->fr_window);
	err |= dbg_set(&out->co_filename, dbg_field(b, DBG_CO_FILENAME), STRATA_PY_CODE_WINDOW - 7);
	err |= dbg_set(&out->co_qualname, dbg_field(b, DBG_CO_QUALNAME), STRATA_PY_CODE_WINDOW - 7);
	err |= dbg_set(&out->co_linetable, dbg_field(b, DBG_CO_LINETABLE), 0xffff);
	err |= dbg_set(&out->co_firstlineno, dbg_field(b, DBG_CO_FIRSTLINENO),
		       STRATA_PY_CODE_WINDOW - 3);
	err |= dbg_set(&out->co_code_adaptive, dbg_field(b, DBG_CO_CODE_ADAPTIVE), 0xffff);
	err |= dbg_set(&out->bytes_size, dbg_field(b, DBG_BYTES_OB_SIZE), 0xffff);
	err |= dbg_set(&out->bytes_sval, dbg_field(b, DBG_BYTES_OB_SVAL), 0xffff);
	/* Fields of the str header the agent reads whole (uni_compact_size). */
	err |= dbg_set(&out->uni_state, dbg_field(b, DBG_UNI_STATE), out->uni_compact_size - 3);
	err |= dbg_set(&out->uni_length, dbg_field(b, DBG_UNI_LENGTH), out->uni_compact_size - 7);
	err |= dbg_set(&out->uni_ascii_size, dbg_field(b, DBG_UNI_ASCII_SIZE), 0xffff);
	return err ? -EINVAL : 0;
}

void py_offsets__to_bpf(const struct py_offsets *o, uint64_t runtime, struct strata_py_proc *d)
{
	memset(d, 0, sizeof(*d));
	d->runtime = runtime;
	d->version = o->version;
	d->frames = o->frames;
	d->match = o->match;
	d->rt_interp_head = o->rt_interp_head;
	d->is_threads_head = o->is_threads_head;
	d->ts_next = o->ts_next;
	d->ts_thread = o->ts_thread;
	d->ts_frame = o->ts_frame;
	d->cframe_current = o->cframe_current;
	d->fr_previous = o->fr_previous;
	d->fr_code = o->fr_code;
	d->fr_instr = o->fr_instr;
	d->fr_entry = o->fr_entry;
	d->fr_window = o->fr_window;
	d->co_firstlineno = o->co_firstlineno;
	d->co_name = o->co_qualname;
	d->co_code_adaptive = o->co_code_adaptive;
	d->co_filename = o->co_filename;
}
