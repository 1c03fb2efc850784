// SPDX-License-Identifier: Apache-2.0
/*
 * Compiled by test_python_offsets.sh against one CPython version's own
 * (internal) headers: every offset of unwind/python_offsets.c for that
 * version must equal offsetof() in the real structs.  Exit 1 on mismatch.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"

#include <stddef.h>
#include <stdio.h>

#include "unwind/python_offsets.h"

static int bad;

static void check(const char *what, unsigned got, size_t want)
{
	if (got != want) {
		printf("MISMATCH 3.%d %s: table %u, headers %zu\n", PY_MINOR_VERSION, what, got,
		       want);
		bad = 1;
	}
}

#define CHECK(field, expr) check(#field, o->field, (expr))

int main(void)
{
	const struct py_offsets *o = py_offsets__for(PY_MAJOR_VERSION, PY_MINOR_VERSION);

	if (!o) {
		printf("3.%d not in the table\n", PY_MINOR_VERSION);
		return 1;
	}
	CHECK(rt_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	CHECK(ts_next, offsetof(PyThreadState, next));
#if PY_MINOR_VERSION == 10
	CHECK(is_threads_head, offsetof(PyInterpreterState, tstate_head));
	CHECK(ts_thread, offsetof(PyThreadState, thread_id));
	CHECK(ts_frame, offsetof(PyThreadState, frame));
	CHECK(fr_previous, offsetof(PyFrameObject, f_back));
	CHECK(fr_code, offsetof(PyFrameObject, f_code));
	CHECK(fr_instr, offsetof(PyFrameObject, f_lasti));
	CHECK(co_qualname, offsetof(PyCodeObject, co_name));
#else
	CHECK(is_threads_head, offsetof(PyInterpreterState, threads.head));
	CHECK(ts_thread, offsetof(PyThreadState, native_thread_id));
	CHECK(fr_previous, offsetof(_PyInterpreterFrame, previous));
	CHECK(co_qualname, offsetof(PyCodeObject, co_qualname));
	CHECK(co_code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
#if PY_MINOR_VERSION <= 12
	CHECK(ts_frame, offsetof(PyThreadState, cframe));
	CHECK(cframe_current, offsetof(_PyCFrame, current_frame));
	CHECK(fr_code, offsetof(_PyInterpreterFrame, f_code));
	CHECK(fr_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
	CHECK(ts_frame, offsetof(PyThreadState, current_frame));
	CHECK(fr_code, offsetof(_PyInterpreterFrame, f_executable));
	CHECK(fr_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
#if PY_MINOR_VERSION == 11
	CHECK(fr_entry, offsetof(_PyInterpreterFrame, is_entry));
#else
	CHECK(fr_entry, offsetof(_PyInterpreterFrame, owner));
#endif
	if (o->fr_window > sizeof(_PyInterpreterFrame))
		check("fr_window (beyond the frame header)", o->fr_window,
		      sizeof(_PyInterpreterFrame));
#endif
	CHECK(co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	CHECK(co_filename, offsetof(PyCodeObject, co_filename));
	CHECK(co_linetable, offsetof(PyCodeObject, co_linetable));
	CHECK(bytes_size, offsetof(PyVarObject, ob_size));
	CHECK(bytes_sval, offsetof(PyBytesObject, ob_sval));
	CHECK(uni_length, offsetof(PyASCIIObject, length));
	CHECK(uni_state, offsetof(PyASCIIObject, state));
	CHECK(uni_ascii_size, sizeof(PyASCIIObject));
	CHECK(uni_compact_size, sizeof(PyCompactUnicodeObject));
	if (!bad)
		printf("ok: 3.%d offsets match the headers\n", PY_MINOR_VERSION);
	return bad;
}
