/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What of an ELF file the server needs to symbolize it: everything but the
 * contents of its loaded code and data (SHF_ALLOC SHT_PROGBITS: .text,
 * .rodata, .data, and CUDA's .nv_fatbin, the GPU code that makes
 * libtorch_cuda.so, libcublasLt.so or libcudnn*.so hundreds of MB to GBs).
 * Kept: the ELF, program and section headers, symbol and string tables,
 * notes (the build-id), relocations, .eh_frame, .debug_*, .gnu_debugdata,
 * .gnu_debuglink.  The kept byte ranges go to the server as a sparse file
 * (wire-format.md "Sparse ELF upload"), which it stores at the same
 * offsets with holes: frames' file offsets still name the same places.
 *
 * Read with pread into bounded buffers, never mapped (a target may
 * truncate its own file meanwhile).  Not an ELF64 little-endian file with
 * section headers: one range, the whole file.
 */
#ifndef STRATA_UPLOADER_ELF_SLIM_H
#define STRATA_UPLOADER_ELF_SLIM_H

#include <stddef.h>
#include <stdint.h>

#include "lib/sparse_elf.h"

#define ELF_SLIM_MAX_RANGES 1024 /* within SPARSE_ELF_MAX_RANGES */
#define ELF_SLIM_GAP 4096	 /* ranges closer than this are sent as one */

struct elf_slim {
	uint64_t size; /* the file's */
	uint64_t kept; /* sum of the ranges' lengths */
	uint32_t n;
	struct sparse_range r[ELF_SLIM_MAX_RANGES];
};

/* The ranges of fd (size bytes) to send, sorted, disjoint, non-empty.
 * 0, or -errno when the file cannot be read. */
int elf_slim__ranges(int fd, uint64_t size, struct elf_slim *out);

#endif /* STRATA_UPLOADER_ELF_SLIM_H */
