/* SPDX-License-Identifier: Apache-2.0 */
/* Names for the GPU layer's numbers: APIs, the symbols that implement
 * them, return codes, NCCL data types and operations. */
#ifndef STRATA_GPU_NAMES_H
#define STRATA_GPU_NAMES_H

#include <stdint.h>

#include <linux/types.h>

#include "bpf/strata.h"

/* "cudaLaunchKernel"...; "?" out of range. */
const char *gpu_api_name(uint32_t api);
/* The API a symbol implements ("cudaMalloc", "cuMemAlloc_v2",
 * "cudaLaunchKernel_ptsz", "pncclAllReduce"; a version suffix "@..." is
 * ignored), or -1. */
int gpu_api_of_symbol(const char *name);
/* Name of a return code of api ("cudaErrorMemoryAllocation",
 * "CUDA_ERROR_OUT_OF_MEMORY", "ncclInvalidArgument"), or NULL when not
 * known: callers print the number. */
const char *gpu_ret_name(uint32_t api, int64_t code);
const char *gpu_kind_name(uint32_t kind);
const char *gpu_nccl_op_name(uint32_t op);
const char *gpu_nccl_dtype_name(uint32_t dtype);
const char *gpu_memcpy_kind_name(uint64_t kind);

#endif /* STRATA_GPU_NAMES_H */
