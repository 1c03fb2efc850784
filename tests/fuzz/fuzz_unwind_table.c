// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: unwind_table__build() on arbitrary bytes, passed as an
 * fd (a memfd), the way the agent compiles tables for files traced
 * processes map.  A table that comes back must keep its invariants.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unwind/unwind_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* One memfd for the whole run: harness state, not library state. */
	static int fd = -1;
	struct unwind_table *t = NULL;
	int err;

	if (fd < 0) {
		fd = memfd_create("fuzz_unwind_table", MFD_CLOEXEC);
		if (fd < 0)
			__builtin_trap();
	}
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		__builtin_trap();

	err = unwind_table__build(fd, &t);
	if (err) {
		if (t || (err != -ENOEXEC && err != -ENODATA && err != -E2BIG && err != -ENOMEM))
			__builtin_trap();
		return 0;
	}
	if (!t || !t->nrows || t->rows[0].pc != t->vaddr_lo || t->vaddr_lo >= t->vaddr_hi ||
	    t->vaddr_hi > UNWIND_TABLE_MAX_VADDR || t->st.rows != t->nrows)
		__builtin_trap();
	for (uint32_t i = 1; i < t->nrows; i++)
		if (t->rows[i - 1].pc >= t->rows[i].pc || t->rows[i].pc >= t->vaddr_hi)
			__builtin_trap();
	if (unwind_table__find(t, t->vaddr_lo) != &t->rows[0] ||
	    unwind_table__find(t, t->vaddr_hi) ||
	    unwind_table__find(t, t->vaddr_hi - 1) != &t->rows[t->nrows - 1])
		__builtin_trap();
	unwind_table__free(t);
	return 0;
}
