/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finds the CUDA runtime, CUDA driver and NCCL entry points in an ELF file,
 * whether it is libcudart/libcuda/libnccl or a file that links them
 * statically (an executable, libtorch_cuda.so): by symbol, in .dynsym and
 * .symtab, versioned (cudaMalloc@@libcudart.so.13) and per-thread-stream
 * (_ptsz) variants included.  Aliases (ncclAllReduce / pncclAllReduce at
 * one address) give one probe.  Also the dynamic linker's debugger hook,
 * where the file is ld.so.
 */
#ifndef STRATA_GPU_ELF_H
#define STRATA_GPU_ELF_H

#include <stddef.h>
#include <stdint.h>

#define GPU_ELF_MAX_PROBES 128

struct gpu_elf_probe {
	uint32_t api;	 /* enum gpu_api */
	uint64_t offset; /* file offset of the function's first instruction */
};

struct gpu_elf_probes {
	struct gpu_elf_probe p[GPU_ELF_MAX_PROBES];
	size_t n;
	size_t dropped; /* beyond GPU_ELF_MAX_PROBES */
	/* NCCL_VERSION_CODE from ncclGetVersion's code (agent/gpu/nccl_comm.h);
	 * 0: no NCCL here, or not understood */
	uint32_t nccl_version;
	/* file offset of the dynamic linker's debugger hook (_dl_debug_state:
	 * ld.so calls it when the loaded objects change); 0: none here */
	uint64_t dl_notify;
};

/* Scans the ELF file open at fd.  Returns 0 (out->n may be 0: not a GPU
 * file), or -errno (-ENOEXEC: not ELF). */
int gpu_elf_scan(int fd, struct gpu_elf_probes *out);

#endif /* STRATA_GPU_ELF_H */
