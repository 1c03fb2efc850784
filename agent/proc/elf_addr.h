/* SPDX-License-Identifier: Apache-2.0 */
/* Virtual address -> file offset in an ELF file (probe attach points are
 * file offsets: the GPU entry points, USDT sites and their semaphores). */
#ifndef STRATA_PROC_ELF_ADDR_H
#define STRATA_PROC_ELF_ADDR_H

#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>

/* The file offset of vaddr inside a PT_LOAD's file bytes (exec_only: an
 * executable one).  0, -ENOENT (in none) or -ENOEXEC. */
int elf_vaddr_to_offset(Elf *e, uint64_t vaddr, bool exec_only, uint64_t *off);

#endif /* STRATA_PROC_ELF_ADDR_H */
