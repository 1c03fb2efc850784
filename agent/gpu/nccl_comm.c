// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/nccl_comm.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

/*
 * One row per NCCL release whose struct ncclComm strata reads.  How a row
 * is made (no debug info ships with libnccl): in the release's
 * libnccl.so.2, CommCheck compares (%rdi) and END(%rdi) with NCCL_MAGIC
 * (movabs $0x280028002800280; cmp %rdx,(%rdi); cmp %rdx,0x108650(%rdi)),
 * ncclCommUserRank stores 0xRANK(%r13) to *rank, ncclCommCount stores
 * 0xNRANKS(%r13) to *count.  tests/unit/test_nccl_comm.c checks the
 * release's library when /usr/local/cuda has one.
 */
static const struct nccl_layout LAYOUTS[] = {
	/* 2.28.9+cuda13.0: objdump -d libnccl.so.2, CommCheck at 0xe2bd0,
	 * pncclCommUserRank 0x8f38e, pncclCommCount 0x8ed64 */
	{ .version = 22809,
	  .start_magic = 0,
	  .end_magic = 0x108650,
	  .rank = 0x1044d0,
	  .nranks = 0x1044d4 },
};

const struct nccl_layout *nccl_layout__find(uint32_t version)
{
	for (size_t i = 0; i < sizeof(LAYOUTS) / sizeof(LAYOUTS[0]); i++)
		if (LAYOUTS[i].version == version)
			return &LAYOUTS[i];
	return NULL;
}

uint32_t nccl_version_decode(const uint8_t *code, size_t n)
{
	if (n > 32)
		n = 32;
	for (size_t i = 0; i + 6 <= n; i++)
		if (code[i] == 0xc7 && code[i + 1] == 0x07) {
			uint32_t v;

			memcpy(&v, code + i + 2, sizeof(v));
			return v;
		}
	return 0;
}

int nccl_comm_read(pid_t pid, uint64_t comm, const struct nccl_layout *l, int32_t *rank,
		   int32_t *nranks)
{
	uint64_t start, end;
	int32_t rn[2];
	struct iovec local[3] = { { &start, sizeof(start) },
				  { &end, sizeof(end) },
				  { rn, sizeof(rn) } };
	struct iovec remote[3];

	if (!l)
		return NCCL_READ_NO_LAYOUT;
	/* rank and nranks are adjacent in every layout in the table */
	if (l->nranks != l->rank + sizeof(int32_t) || comm < 4096 ||
	    comm > UINT64_MAX - l->end_magic - 8)
		return NCCL_READ_FAULT;
	remote[0] = (struct iovec){ (void *)(uintptr_t)(comm + l->start_magic), 8 };
	remote[1] = (struct iovec){ (void *)(uintptr_t)(comm + l->end_magic), 8 };
	remote[2] = (struct iovec){ (void *)(uintptr_t)(comm + l->rank), 8 };
	if (process_vm_readv(pid, local, 3, remote, 3, 0) != 24)
		return NCCL_READ_FAULT;
	if (start != NCCL_MAGIC || end != NCCL_MAGIC)
		return NCCL_READ_BAD_MAGIC;
	if (rn[1] < 1 || rn[1] > NCCL_MAX_RANKS || rn[0] < 0 || rn[0] >= rn[1])
		return NCCL_READ_BAD_RANK;
	*rank = rn[0];
	*nranks = rn[1];
	return NCCL_READ_OK;
}
