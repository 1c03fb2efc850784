/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One opened ELF file (and its separate debug file): file offset ->
 * function, inline chain and source line.  Used by the symbolizer, which
 * keeps these in an LRU; not part of the public API.
 */
#ifndef STRATA_ELF_MODULE_H
#define STRATA_ELF_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "symbolize/symbolize.h"

struct elf_module;
struct debuginfod;
struct strpool;

/*
 * Opens the ELF at path.  When bid is given, the file's build-id must
 * match it (-ESTALE otherwise: the path now holds another binary).
 * dbgd (may be NULL) is asked for debug info that is not on disk.
 * hostile: the file is a profiled process's (symbolizer_opts.hostile_files:
 * pread, never mmap).  Returns 0 or -errno (-ENOEXEC: not ELF).
 */
int elf_module__open(const char *path, const uint8_t *bid, size_t bid_len, struct debuginfod *dbgd,
		     int hostile, struct elf_module **out);
void elf_module__free(struct elf_module *m);

/*
 * Frames for the code at file_offset, strings interned in pool:
 * out[0] innermost inline ... out[n-1] the real function; when the chain
 * is longer than max, the innermost max-1 and the real function are
 * kept.  Returns n (0: unresolved) or -ENOMEM.
 */
int elf_module__resolve(struct elf_module *m, uint64_t file_offset, struct strpool *pool,
			struct sym_frame *out, int max);

/*
 * 1 the first time it is asked after m refused its symbol table or its
 * DWARF (over lib/elf_bounds.h, or strings libdw_guard refused): its
 * frames then get what is left (DWARF only, symbols only, or module and
 * offset).  0 otherwise, and on every later call.
 */
int elf_module__newly_degraded(struct elf_module *m);

#endif /* STRATA_ELF_MODULE_H */
