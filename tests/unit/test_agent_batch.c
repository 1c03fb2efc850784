// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's batch conversion keeps one identity per process: labels read
 * for one address space (the GPU layer's mm-less read) still name the
 * process when a later record of another address space (a CPU sample)
 * comes after it exited, and the label cache evicts its oldest half when
 * full, not everything; a batch of rows without stacks is valid.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/ship/agent_batch.h"
#include "agent/ship/batch_gpu.h"
#include "agent/ship/proc_labels.h"
#include "server/batch_decode.h"
#include "uploader/batch_builder.h"

static Strata__V1__Batch *finish_and_decode(struct batch_builder *bb, uint64_t seq)
{
	struct batch_meta m = { .start_ns = 1700000000000000000ull,
				.end_ns = 1700000010000000000ull,
				.freq_hz = 49,
				.seq = seq };
	Strata__V1__Batch *b;
	uint8_t *z;
	size_t len;
	char err[256] = "";

	assert_int_equal(batch_builder__finish(bb, &m, &z, &len), 0);
	assert_int_equal(batch_decode(z, len, NULL, &b, NULL, err, sizeof(err)), BATCH_OK);
	free(z);
	return b;
}

static pid_t child(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A CPU sample of (tgid, mm_id): no frames. */
static void sample(struct agent_batch *ab, uint32_t tgid, uint64_t mm_id)
{
	struct strata_stack_key k = { .tgid = tgid, .tid = tgid, .mm_id = mm_id };
	struct sampler_sample s = { .key = &k, .count = 1, .comm = "gone" };

	assert_int_equal(agent_batch__add_sampled(ab, &s), 0);
}

static void test_identity_survives_exit(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct batch_sources src = { 0 };
	struct agent_batch *ab = agent_batch__new(bb, &src);
	struct agent_batch_stats st;
	pid_t pid = child();
	Strata__V1__Batch *b;
	uint64_t start;

	(void)state;
	assert_non_null(ab);
	/* the GPU layer's read (no address space) while it lives */
	assert_true(agent_batch__process_tgid(ab, (uint32_t)pid, NULL) >= 0);
	b = finish_and_decode(bb, 1);
	assert_int_equal(b->n_processes, 1);
	start = b->processes[0]->start_time_ns;
	assert_true(start > 0);
	batch_decode__free(b);

	reap(pid);
	/* a CPU sample of another address space, read after the exit */
	sample(ab, (uint32_t)pid, 0x1234);
	b = finish_and_decode(bb, 2);
	assert_int_equal(b->n_processes, 1);
	assert_int_equal(b->processes[0]->pid, (uint32_t)pid);
	assert_true(b->processes[0]->start_time_ns == start); /* one process, not two */
	batch_decode__free(b);
	agent_batch__stats(ab, &st);
	assert_int_equal(st.proc_read_failed, 1);

	agent_batch__free(ab);
	batch_builder__free(bb);
}

/* A label set packed for the cache comes back the same: every string at
 * its longest and empty, the numbers and the sources. */
static void test_labels_pack(void **state)
{
	struct proc_labels l, back;
	char *strs[] = { l.comm,
			 l.cmdline,
			 l.cgroup,
			 l.container,
			 l.pod,
			 l.job,
			 l.torchelastic_run_id,
			 l.slurm_job_id,
			 l.identity };
	size_t sizes[] = { sizeof(l.comm),
			   sizeof(l.cmdline),
			   sizeof(l.cgroup),
			   sizeof(l.container),
			   sizeof(l.pod),
			   sizeof(l.job),
			   sizeof(l.torchelastic_run_id),
			   sizeof(l.slurm_job_id),
			   sizeof(l.identity) };
	void *p;

	(void)state;
	for (int full = 0; full <= 1; full++) {
		memset(&l, 0, sizeof(l));
		l.pid = 4242;
		l.ppid = 1;
		l.start_time_ns = 1700000000123456789ull;
		l.has_rank = 1;
		l.rank = 3;
		l.local_rank = -1;
		l.world_size = 8;
		l.job_source = "env:STRATA_JOB";
		l.rank_source = "env:RANK";
		for (size_t i = 0; full && i < sizeof(strs) / sizeof(strs[0]); i++)
			memset(strs[i], 'a' + (int)i, sizes[i] - 1);
		p = proc_labels__pack(&l);
		assert_non_null(p);
		memset(&back, 0x5a, sizeof(back));
		proc_labels__unpack(p, &back);
		free(p);
		assert_int_equal(back.pid, 4242);
		assert_true(back.start_time_ns == l.start_time_ns);
		assert_int_equal(back.rank, 3);
		assert_int_equal(back.local_rank, -1);
		assert_int_equal(back.world_size, 8);
		assert_ptr_equal(back.job_source, l.job_source);
		assert_ptr_equal(back.rank_source, l.rank_source);
		assert_memory_equal(&back, &l, sizeof(l));
	}
}

/* 4096 other address spaces read after it: it stays known (the full cache
 * drops its older half, then its newest entries are the live ones). */
static void test_cache_keeps_newest(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct batch_sources src = { 0 };
	struct agent_batch *ab = agent_batch__new(bb, &src);
	struct agent_batch_stats st;
	pid_t pid = child();
	Strata__V1__Batch *b;
	uint64_t start = 0;

	(void)state;
	for (uint64_t mm = 1; mm <= 5000; mm++) {
		/* pid 1 stands for the many others; the child is read among
		 * the last */
		sample(ab, mm == 4990 ? (uint32_t)pid : 1, mm);
	}
	b = finish_and_decode(bb, 1);
	for (size_t i = 0; i < b->n_processes; i++)
		if (b->processes[i]->pid == (uint32_t)pid)
			start = b->processes[i]->start_time_ns;
	assert_true(start > 0);
	batch_decode__free(b);
	agent_batch__stats(ab, &st);
	assert_true(st.proc_cache_evicted >= 2048);

	reap(pid);
	sample(ab, (uint32_t)pid, 99999);
	b = finish_and_decode(bb, 2);
	assert_int_equal(b->n_processes, 1);
	assert_true(b->processes[0]->start_time_ns == start);
	batch_decode__free(b);
	agent_batch__free(ab);
	batch_builder__free(bb);
}

/* A batch whose only rows say "no stack" (index 0): a job's last
 * collectives, their stacks not resolved yet.  It was refused by the
 * server for good (stack 0 out of range): one rank lost a collective. */
static void test_no_stack_rows_only(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct bb_process p = { .pid = 42, .rank = -1, .local_rank = -1, .world_size = -1 };
	Strata__V1__NcclCollective *r;
	Strata__V1__Batch *b;
	int64_t proc;

	(void)state;
	proc = batch_builder__process(bb, &p);
	assert_true(proc >= 0);
	r = batch_builder__row(bb, BB_COLL);
	assert_non_null(r);
	r->process = (uint32_t)proc;
	r->seq = 14;
	r->stack = 0;
	b = finish_and_decode(bb, 1); /* BATCH_OK asserted inside */
	assert_int_equal(b->n_nccl_collectives, 1);
	assert_true(b->n_stacks >= 1);
	assert_int_equal(b->stacks[0]->n_frames, 0);
	batch_decode__free(b);
	batch_builder__free(bb);
}

static const char *label(const Strata__V1__Batch *b, const Strata__V1__Process *p, const char *key)
{
	for (size_t i = 0; i < p->n_labels; i++)
		if (!strcmp(b->strings[p->labels[i]->key_str], key))
			return b->strings[p->labels[i]->value_str];
	return NULL;
}

/* Where the labels came from travels with them: a process's identity
 * (its cgroup), and a rank and job the NCCL layer gave. */
static void test_label_provenance(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct batch_sources src = { 0 };
	struct agent_batch *ab = agent_batch__new(bb, &src);
	pid_t pid = child();
	Strata__V1__Batch *b;
	const char *id;
	int64_t proc;

	(void)state;
	proc = agent_batch__process_tgid(ab, (uint32_t)pid, NULL);
	assert_true(proc >= 0);
	batch_builder__label_rank(bb, (uint32_t)proc, 2, 8, "nccl-00000000000000aa");
	b = finish_and_decode(bb, 1);
	id = label(b, b->processes[0], BB_LABEL_IDENTITY);
	assert_non_null(id);
	assert_true(!strncmp(id, "pod:", 4) || !strncmp(id, "container:", 10) ||
		    !strncmp(id, "cgroup:", 7));
	assert_string_equal(label(b, b->processes[0], BB_LABEL_RANK_SOURCE), "nccl");
	assert_string_equal(label(b, b->processes[0], BB_LABEL_JOB_SOURCE), "nccl");
	assert_string_equal(b->strings[b->processes[0]->job_str], "nccl-00000000000000aa");
	batch_decode__free(b);
	reap(pid);
	agent_batch__free(ab);
	batch_builder__free(bb);
}

/*
 * A process gone before its /proc was read, first added to the batch by a
 * record that carries no name (an off-CPU block, drained at every drain),
 * is named by a later layer that kept its name (the GPU layer's comm).
 * Before, the first record's empty name stuck: test_server_gpu's ranks
 * came out of 3 runs in 8 without a comm.
 */
static void test_later_layer_names_process(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct batch_sources src = { 0 };
	struct agent_batch *ab = agent_batch__new(bb, &src);
	pid_t pid = child();
	struct strata_stack_key k = { .tgid = (uint32_t)pid, .tid = (uint32_t)pid, .mm_id = 0x99 };
	struct sampler_sample smp = { .key = &k, .count = 1 }; /* no comm */
	struct bb_process fb = { .pid = (uint32_t)pid, .comm = "train_sim", .rank = -1 };
	Strata__V1__Batch *b;
	uint32_t proc;
	int64_t stack;

	(void)state;
	reap(pid);
	assert_int_equal(agent_batch__sampled_stack(ab, &smp, &proc, &stack), 0);
	assert_int_equal(agent_batch__process_tgid(ab, (uint32_t)pid, &fb), (int64_t)proc);
	fb.comm = "other"; /* a name given stays */
	assert_int_equal(agent_batch__process_tgid(ab, (uint32_t)pid, &fb), (int64_t)proc);
	b = finish_and_decode(bb, 1);
	assert_int_equal(b->n_processes, 1);
	assert_string_equal(b->strings[b->processes[0]->comm_str], "train_sim");
	batch_decode__free(b);
	agent_batch__free(ab);
	batch_builder__free(bb);
}

/* The API calls of tgid the batch carries (0: no row). */
static uint64_t tally_calls(const Strata__V1__Batch *b, uint32_t tgid)
{
	for (size_t i = 0; i < b->n_cuda_api_tally; i++)
		if (b->processes[b->cuda_api_tally[i]->process]->pid == tgid)
			return b->cuda_api_tally[i]->calls;
	return 0;
}

/*
 * The GPU layer let a process go (its exit told, gpu_data.retired) and a
 * new process got its pid: the new one's calls are counted from zero.
 * Before, the builder kept the dead one's last-shipped tally and sent 30 -
 * 100 as 2^64 - 70 calls.
 */
static void test_retired_pid_starts_from_zero(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct batch_sources src = { 0 };
	struct agent_batch *ab = agent_batch__new(bb, &src);
	struct batch_gpu *g = batch_gpu__new(NULL, NULL);
	struct gpu_proc_info pi = { .tgid = 4242, .rank = -1, .nccl_rank = -1, .nccl_nranks = -1 };
	struct gpu_tally_row t = { .key = { .tgid = 4242, .api = GPU_API_cudaLaunchKernel },
				   .val = { .calls = 100, .total_ns = 1000 } };
	struct gpu_data d = { .procs = &pi, .nprocs = 1, .tally = &t, .ntally = 1 };
	struct batch_meta m = { .start_ns = 1700000000000000000ull,
				.end_ns = 1700000010000000000ull };
	uint32_t retired = 4242;
	Strata__V1__Batch *b;

	(void)state;
	assert_non_null(g);
	assert_int_equal(batch_gpu__add(g, ab, &d, &m), 0);
	b = finish_and_decode(bb, 1);
	assert_int_equal(tally_calls(b, 4242), 100);
	batch_decode__free(b);
	/* the pid's next process, after the layer retired the first */
	t.val.calls = 30;
	t.val.total_ns = 300;
	d.retired = &retired;
	d.nretired = 1;
	assert_int_equal(batch_gpu__add(g, ab, &d, &m), 0);
	b = finish_and_decode(bb, 2);
	assert_int_equal(tally_calls(b, 4242), 30);
	batch_decode__free(b);
	batch_gpu__free(g);
	agent_batch__free(ab);
	batch_builder__free(bb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_labels_pack),
		cmocka_unit_test(test_label_provenance),
		cmocka_unit_test(test_later_layer_names_process),
		cmocka_unit_test(test_no_stack_rows_only),
		cmocka_unit_test(test_identity_survives_exit),
		cmocka_unit_test(test_cache_keeps_newest),
		cmocka_unit_test(test_retired_pid_starts_from_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
