// SPDX-License-Identifier: Apache-2.0
/*
 * Calls the real CUDA runtime and NCCL (built and run by
 * test_gpu_real_libs.sh against /usr/local/cuda): with no GPU or driver
 * every call fails fast.  Prints "api code name" per call, as the libraries
 * name their return codes, for the test to compare with strata's tally.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

__attribute__((noinline)) static void kernel_stub(void)
{
	__asm__ volatile("" ::: "memory");
}

static void cuda_said(const char *api, cudaError_t e)
{
	printf("%s %d %s\n", api, (int)e, cudaGetErrorName(e));
}

static void nccl_said(const char *api, ncclResult_t r)
{
	/* NCCL has no "name of the enum" call: the test maps the codes */
	printf("%s %d %s\n", api, (int)r, ncclGetErrorString(r));
}

int main(void)
{
	dim3 grid = { 1, 1, 1 }, block = { 32, 1, 1 };
	ncclUniqueId id = { 0 };
	ncclComm_t comm = NULL;
	void *p = NULL;
	float buf[4] = { 0 };

	cuda_said("cudaMalloc", cudaMalloc(&p, 1 << 20));
	cuda_said("cudaLaunchKernel",
		  cudaLaunchKernel((const void *)kernel_stub, grid, block, NULL, 0, NULL));
	nccl_said("ncclGetUniqueId", ncclGetUniqueId(&id));
	nccl_said("ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0));
	nccl_said("ncclAllReduce", ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, NULL));
	return 0;
}
