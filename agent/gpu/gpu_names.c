// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/gpu_names.h"

#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

#define API_NAME(name) [GPU_API_##name] = #name,
static const char *const api_names[GPU_API_MAX] = { STRATA_GPU_APIS(API_NAME) };
#undef API_NAME

const char *gpu_api_name(uint32_t api)
{
	return api < GPU_API_MAX && api_names[api] ? api_names[api] : "?";
}

/* Symbol spellings beyond the API's own name: per-thread default stream
 * (_ptsz/_ptds), driver ABI versions (_v2), NCCL's profiling aliases. */
static const char *const suffixes[] = { "", "_ptsz", "_ptds", "_v2", "_v2_ptds", "_v2_ptsz" };

int gpu_api_of_symbol(const char *name)
{
	size_t len = strcspn(name, "@");

	if (len > 5 && !strncmp(name, "pnccl", 5)) {
		name++;
		len--;
	}
	for (uint32_t api = 0; api < GPU_API_MAX; api++) {
		size_t al = strlen(api_names[api]);

		if (len < al || strncmp(name, api_names[api], al))
			continue;
		for (size_t i = 0; i < N(suffixes); i++)
			if (len - al == strlen(suffixes[i]) &&
			    !strncmp(name + al, suffixes[i], len - al))
				return (int)api;
	}
	return -1;
}

struct code_name {
	int64_t code;
	const char *name;
};

static const struct code_name cuda_rt[] = {
	{ 1, "cudaErrorInvalidValue" },
	{ 2, "cudaErrorMemoryAllocation" },
	{ 3, "cudaErrorInitializationError" },
	{ 4, "cudaErrorCudartUnloading" },
	{ 35, "cudaErrorInsufficientDriver" },
	{ 98, "cudaErrorInvalidDeviceFunction" },
	{ 100, "cudaErrorNoDevice" },
	{ 101, "cudaErrorInvalidDevice" },
	{ 209, "cudaErrorNoKernelImageForDevice" },
	{ 222, "cudaErrorUnsupportedPtxVersion" },
	{ 400, "cudaErrorInvalidResourceHandle" },
	{ 500, "cudaErrorSymbolNotFound" },
	{ 700, "cudaErrorIllegalAddress" },
	{ 701, "cudaErrorLaunchOutOfResources" },
	{ 702, "cudaErrorLaunchTimeout" },
	{ 719, "cudaErrorLaunchFailure" },
	{ 999, "cudaErrorUnknown" },
};

static const struct code_name cuda_drv[] = {
	{ 1, "CUDA_ERROR_INVALID_VALUE" },
	{ 2, "CUDA_ERROR_OUT_OF_MEMORY" },
	{ 3, "CUDA_ERROR_NOT_INITIALIZED" },
	{ 4, "CUDA_ERROR_DEINITIALIZED" },
	{ 100, "CUDA_ERROR_NO_DEVICE" },
	{ 101, "CUDA_ERROR_INVALID_DEVICE" },
	{ 201, "CUDA_ERROR_INVALID_CONTEXT" },
	{ 400, "CUDA_ERROR_INVALID_HANDLE" },
	{ 500, "CUDA_ERROR_NOT_FOUND" },
	{ 700, "CUDA_ERROR_ILLEGAL_ADDRESS" },
	{ 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" },
	{ 719, "CUDA_ERROR_LAUNCH_FAILED" },
	{ 999, "CUDA_ERROR_UNKNOWN" },
};

static const struct code_name nccl[] = {
	{ 1, "ncclUnhandledCudaError" }, { 2, "ncclSystemError" },  { 3, "ncclInternalError" },
	{ 4, "ncclInvalidArgument" },	 { 5, "ncclInvalidUsage" }, { 6, "ncclRemoteError" },
	{ 7, "ncclInProgress" },
};

static const char *find_code(const struct code_name *t, size_t n, int64_t code)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].code == code)
			return t[i].name;
	return NULL;
}

const char *gpu_ret_name(uint32_t api, int64_t code)
{
	const char *name = gpu_api_name(api);

	if (code == 0)
		return "success";
	if (!strncmp(name, "nccl", 4))
		return find_code(nccl, N(nccl), code);
	if (!strncmp(name, "cuda", 4))
		return find_code(cuda_rt, N(cuda_rt), code);
	return find_code(cuda_drv, N(cuda_drv), code);
}

const char *gpu_kind_name(uint32_t kind)
{
	static const char *const k[] = { "?",	       "launch", "alloc",  "free",
					 "copy",       "sync",	 "lookup", "nccl_init",
					 "collective", "p2p",	 "group" };

	return kind < N(k) ? k[kind] : "?";
}

const char *gpu_nccl_op_name(uint32_t op)
{
	static const char *const o[] = { "sum", "prod", "max", "min", "avg" };

	return op < N(o) ? o[op] : op == 0xffff ? "" : "custom";
}

const char *gpu_nccl_dtype_name(uint32_t dtype)
{
	static const char *const d[] = { "int8",    "uint8",	"int32",   "uint32",
					 "int64",   "uint64",	"float16", "float32",
					 "float64", "bfloat16", "fp8e4m3", "fp8e5m2" };

	return dtype < N(d) ? d[dtype] : "?";
}

const char *gpu_memcpy_kind_name(uint64_t kind)
{
	static const char *const k[] = { "HtoH", "HtoD", "DtoH", "DtoD", "default" };

	return kind < N(k) ? k[kind] : "?";
}
