/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython line tables: instruction offset -> source line, decoded from a
 * copy of a code object's co_linetable read out of the process.  Two
 * formats: 3.10's (PEP 626, Objects/lnotab_notes.txt: (byte delta, line
 * delta) pairs) and 3.11+'s location table (Objects/locations.md).  The
 * input is untrusted process memory: every read is bounds-checked and a
 * table that does not cover the offset gives -1.
 */
#ifndef STRATA_PYTHON_LINES_H
#define STRATA_PYTHON_LINES_H

#include <stddef.h>
#include <stdint.h>

/*
 * The line of the instruction at byte offset addr (lasti * 2) of a code
 * object of version 3.minor whose first line is firstlineno.  addr < 0
 * (frame not started) gives firstlineno.  Returns the line, or -1 (no
 * line: an artificial instruction, or a table that does not cover addr).
 */
int py_line_for(unsigned minor, const uint8_t *table, size_t n, int firstlineno, int addr);

#endif /* STRATA_PYTHON_LINES_H */
