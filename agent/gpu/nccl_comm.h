/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A communicator's rank and size read from the process that owns it, for a
 * communicator whose ncclCommInitRank no agent saw (the job started first):
 * at offsets taken from the disassembly of one NCCL release, used only for
 * a library whose ncclGetVersion says that release, and only when both of
 * the struct's magic words and 0 <= rank < nranks hold.  The communicator
 * pointer comes from a traced call's arguments: never trusted, read with
 * process_vm_readv (a bad pointer is an error, never a fault).  Anything
 * else is unknown, counted (docs/diagnosis.md "Communicator identity").
 */
#ifndef STRATA_AGENT_GPU_NCCL_COMM_H
#define STRATA_AGENT_GPU_NCCL_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NCCL_MAX_RANKS 65536

/* Where one NCCL release keeps the fields of struct ncclComm. */
struct nccl_layout {
	uint32_t version;     /* NCCL_VERSION_CODE, as ncclGetVersion stores it */
	uint64_t start_magic; /* offsets in struct ncclComm */
	uint64_t end_magic;
	uint64_t rank, nranks; /* int each */
};

#define NCCL_MAGIC 0x0280028002800280ULL /* NCCL's src/include/comm.h */

enum nccl_read {
	NCCL_READ_OK = 0,
	NCCL_READ_NO_LAYOUT, /* version not detected, or not in the table */
	NCCL_READ_FAULT,     /* pointer not readable in that process */
	NCCL_READ_BAD_MAGIC, /* not a live ncclComm of that release */
	NCCL_READ_BAD_RANK,  /* rank or size out of range */
	NCCL_READ_MAX
};

/* The layout for a version code, NULL when none is known. */
const struct nccl_layout *nccl_layout__find(uint32_t version);

/*
 * The version code that ncclGetVersion's machine code stores: its first
 * bytes (code, n), looking for the store of an immediate through the
 * pointer argument (x86-64 `movl $imm32,(%rdi)`, c7 07 imm32) within the
 * first 32 bytes.  0 when not found.
 */
uint32_t nccl_version_decode(const uint8_t *code, size_t n);

/* Reads and checks the communicator at comm in process pid (enum nccl_read). */
int nccl_comm_read(pid_t pid, uint64_t comm, const struct nccl_layout *l, int32_t *rank,
		   int32_t *nranks);

#endif /* STRATA_AGENT_GPU_NCCL_COMM_H */
