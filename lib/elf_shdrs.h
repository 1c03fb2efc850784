/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The section headers of an ELF64 little-endian file, read with pread into
 * bounded buffers (never mapped: the agent reads targets' files, which may
 * be truncated meanwhile; the server reads what a client sent).  Shared by
 * the sparse ELF upload's two sides (lib/sparse_elf.h): the agent picks
 * the ranges to send from them, the server checks that what it was sent
 * covers what it will read.
 */
#ifndef STRATA_LIB_ELF_SHDRS_H
#define STRATA_LIB_ELF_SHDRS_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_SHDRS_MAX 65536	     /* section headers read at most (4 MiB) */
#define ELF_SHSTRTAB_MAX (16u << 20) /* section names read at most */

/* One section: its header, its name (NULL when the names cannot be read).
 * Non-zero stops the walk and is returned. */
typedef int (*elf_shdr_fn)(void *ctx, const Elf64_Shdr *sh, const char *name);

/*
 * Calls fn for each section header of fd (size bytes) and fills *eh.
 * 0; 1 when fd is not an ELF64 little-endian file with section headers
 * inside it (nothing called); -errno (-ENOMEM, -EIO); or fn's value.
 */
int elf_shdrs__walk(int fd, uint64_t size, Elf64_Ehdr *eh, uint64_t *shnum, elf_shdr_fn fn,
		    void *ctx);

int elf_pread_all(int fd, void *buf, size_t n, uint64_t off);

#endif /* STRATA_LIB_ELF_SHDRS_H */
