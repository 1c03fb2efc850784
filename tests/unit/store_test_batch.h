/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A synthetic batch for the store tests (include after cmocka.h and
 * server/store.h): string, process, stack and CPU-sample tables filled by
 * hand, with two known stacks, so a test can say exactly what it stored.
 */
#ifndef STRATA_STORE_TEST_BATCH_H
#define STRATA_STORE_TEST_BATCH_H

#include <stdint.h>
#include <string.h>

#define NS 1000000000ULL

enum { MAXN = 16 };

struct tb {
	Strata__V1__Batch b;
	char *strings[64];
	Strata__V1__Process proc[MAXN], *procp[MAXN];
	Strata__V1__RankLabels rank[MAXN];
	Strata__V1__Stack stk[MAXN], *stkp[MAXN];
	Strata__V1__CpuSample cpu[MAXN], *cpup[MAXN];
	Strata__V1__CudaAlloc al[MAXN], *alp[MAXN];
	Strata__V1__CudaApiTally ta[MAXN], *tap[MAXN];
	Strata__V1__CudaApiTally__Code code[MAXN], *codep[MAXN];
	Strata__V1__NcclComm comm[MAXN], *commp[MAXN];
	Strata__V1__NcclCollective coll[MAXN], *collp[MAXN];
	Strata__V1__CudaTransfer tr[MAXN], *trp[MAXN];
	Strata__V1__CudaLaunch la[MAXN], *lap[MAXN];
	uint8_t id[16];
	struct store_stack stacks[MAXN];
	struct store_batch sb;
};

/* Three stacks (index 0 is the empty one). */
static const struct store_frame FR_A[] = {
	{ .kind = STORE_FRAME_NATIVE,
	  .func = "main",
	  .file = "/src/m.c",
	  .line = 10,
	  .module = "/bin/train",
	  .build_id = "abcdef01",
	  .addr = 0x1000 },
	{ .kind = STORE_FRAME_NATIVE,
	  .flags = 2,
	  .func = "step\twith tab",
	  .file = "/src/s.c",
	  .line = 20,
	  .module = "/bin/train",
	  .build_id = "abcdef01",
	  .addr = 0x1100 },
	{ .kind = STORE_FRAME_NATIVE,
	  .flags = 4,
	  .func = NULL,
	  .file = NULL,
	  .line = 0,
	  .module = "/lib/libx.so",
	  .build_id = NULL,
	  .addr = 0xdead },
};
static const struct store_frame FR_B[] = {
	{ .kind = STORE_FRAME_PYTHON,
	  .func = "train_loop",
	  .file = "t.py",
	  .line = 3,
	  .module = "[python]" },
	{ .kind = STORE_FRAME_KERNEL,
	  .func = "do_syscall_64",
	  .module = "[kernel]",
	  .addr = 0xffffffff81000000ULL },
};
#define STACK_A 0x1111222233334444ULL
#define STACK_B 0x9999888877776666ULL

static uint32_t tb_str(struct tb *t, const char *s)
{
	for (uint32_t i = 0; i < t->b.n_strings; i++)
		if (!strcmp(t->strings[i], s))
			return i;
	t->strings[t->b.n_strings] = (char *)s;
	return (uint32_t)t->b.n_strings++;
}

static void tb_init(struct tb *t, uint8_t id, const char *node, uint64_t start_ns)
{
	memset(t, 0, sizeof(*t));
	strata__v1__batch__init(&t->b);
	t->b.version = 1;
	memset(t->id, id, sizeof(t->id));
	t->b.batch_id.data = t->id;
	t->b.batch_id.len = 16;
	t->b.node = (char *)node;
	t->b.agent_version = "test-1";
	t->b.start_ns = start_ns;
	t->b.end_ns = start_ns + 10 * NS;
	t->b.freq_hz = 49;
	t->b.strings = t->strings;
	tb_str(t, "");
	t->b.processes = t->procp;
	t->b.stacks = t->stkp;
	t->b.cpu_samples = t->cpup;
	t->b.cuda_allocs = t->alp;
	t->b.cuda_api_tally = t->tap;
	t->b.nccl_comms = t->commp;
	t->b.nccl_collectives = t->collp;
	t->b.cuda_transfers = t->trp;
	t->b.cuda_launches = t->lap;
	/* stacks: [0] empty, [1] A, [2] B */
	for (int i = 0; i < 3; i++) {
		strata__v1__stack__init(&t->stk[i]);
		t->stkp[i] = &t->stk[i];
	}
	t->b.n_stacks = 3;
	t->stacks[0] = (struct store_stack){ .id = 7, .nframes = 0 };
	t->stacks[1] = (struct store_stack){ .id = STACK_A, .nframes = 3, .frames = FR_A };
	t->stacks[2] = (struct store_stack){ .id = STACK_B, .nframes = 2, .frames = FR_B };
	t->sb = (struct store_batch){ .pb = &t->b,
				      .stacks = t->stacks,
				      .received_ns = start_ns + 11 * NS,
				      .wire_bytes = 1234 };
}

static uint32_t tb_proc(struct tb *t, uint32_t pid, const char *job, int rank)
{
	size_t i = t->b.n_processes++;
	Strata__V1__Process *p = &t->proc[i];

	strata__v1__process__init(p);
	p->pid = pid;
	p->start_time_ns = 1000 + pid;
	p->comm_str = tb_str(t, "python3");
	p->cmdline_str = tb_str(t, "python3 train.py");
	p->container_str = tb_str(t, rank >= 0 ? "ctr-a" : "");
	p->job_str = tb_str(t, job);
	if (rank >= 0) {
		strata__v1__rank_labels__init(&t->rank[i]);
		t->rank[i].rank = rank;
		t->rank[i].local_rank = rank % 8;
		t->rank[i].world_size = 2;
		p->rank = &t->rank[i];
	}
	t->procp[i] = p;
	return (uint32_t)i;
}

static void tb_cpu(struct tb *t, uint32_t proc, uint32_t stack, uint64_t count)
{
	size_t i = t->b.n_cpu_samples++;

	strata__v1__cpu_sample__init(&t->cpu[i]);
	t->cpu[i].process = proc;
	t->cpu[i].tid = t->proc[proc].pid;
	t->cpu[i].thread_comm_str = tb_str(t, "worker");
	t->cpu[i].stack = stack;
	t->cpu[i].count = count;
	t->cpup[i] = &t->cpu[i];
}

/* An allocation of ptr (size bytes at at, freed at freed_at, 0: not
 * freed) by process proc at stack 1; free_only: the free of an earlier one. */
static inline void tb_alloc(struct tb *t, uint32_t proc, uint64_t ptr, uint64_t size, uint64_t at,
			    uint64_t freed_at, int free_only)
{
	size_t i = t->b.n_cuda_allocs++;

	strata__v1__cuda_alloc__init(&t->al[i]);
	t->al[i].process = proc;
	t->al[i].ptr = ptr;
	t->al[i].size = free_only ? 0 : size;
	t->al[i].stack = free_only ? 0 : 1;
	t->al[i].alloc_ns = at;
	t->al[i].freed = freed_at != 0;
	t->al[i].free_ns = freed_at;
	t->al[i].free_only = free_only;
	t->al[i].api_str = tb_str(t, "cudaMalloc");
	t->alp[i] = &t->al[i];
}

/* A batch of node n: two ranks of job "j1" and an unranked process. */
static inline void tb_standard(struct tb *t, uint8_t id, const char *node, uint64_t start)
{
	tb_init(t, id, node, start);
	uint32_t r0 = tb_proc(t, 100, "j1", 0), r1 = tb_proc(t, 101, "j1", 1);
	uint32_t other = tb_proc(t, 200, "", -1);

	tb_cpu(t, r0, 1, 30);
	tb_cpu(t, r0, 2, 5);
	tb_cpu(t, r1, 1, 10);
	tb_cpu(t, other, 2, 7);
}

#endif /* STRATA_STORE_TEST_BATCH_H */
