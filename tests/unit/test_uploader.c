// SPDX-License-Identifier: Apache-2.0
/*
 * The agent side of the wire: the batch builder (round trip through the
 * server's decoder, no names for native frames, merging, bounds), the
 * ingest answer's missing build-ids, and process labels (cgroup ids, the
 * RANK/job environment of a real child).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/batch_decode.h"
#include "uploader/batch_builder.h"
#include "agent/proc/proc_stat.h"
#include "agent/ship/proc_labels.h"
#include "uploader/uploader.h"

static const uint8_t ID[20] = { 0xde, 0xad, 0xbe, 0xef, 1,  2,	3,  4,	5,  6,
				7,    8,    9,	  10,	11, 12, 13, 14, 15, 16 };

static const struct bb_frame CHAIN[] = {
	{ .kind = STRATA__V1__FRAME__KIND__NATIVE,
	  .build_id = ID,
	  .build_id_len = 20,
	  .path = "/usr/bin/app",
	  .addr = 0x1100,
	  .is_return = 1 },
	{ .kind = STRATA__V1__FRAME__KIND__NATIVE,
	  .build_id = ID,
	  .build_id_len = 20,
	  .path = "/usr/bin/app",
	  .addr = 0x1200,
	  .is_return = 1 },
	{ .kind = STRATA__V1__FRAME__KIND__UNKNOWN, .addr = 0x7fff0000, .is_return = 1 },
	{ .kind = STRATA__V1__FRAME__KIND__KERNEL,
	  .addr = 0xffffffff81000000ull,
	  .name = "do_syscall_64" },
};

static struct bb_process proc(uint32_t pid, int rank)
{
	return (struct bb_process){ .pid = pid,
				    .start_time_ns = 1700000000000000000ull,
				    .comm = "python3",
				    .job = "job-1",
				    .has_rank = rank >= 0,
				    .rank = rank,
				    .local_rank = -1,
				    .world_size = 8 };
}

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

static void test_round_trip(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct bb_process p0 = proc(10, 0), p1 = proc(11, -1);
	Strata__V1__Batch *b;
	int64_t i0, i1;

	assert_non_null(bb);
	i0 = batch_builder__process(bb, &p0);
	i1 = batch_builder__process(bb, &p1);
	assert_true(i0 >= 0 && i1 >= 0 && i0 != i1);
	assert_int_equal(batch_builder__process(bb, &p0), i0); /* deduplicated */
	assert_int_equal(batch_builder__add(bb, (uint32_t)i0, 10, "main", CHAIN, 4, 5), 0);
	assert_int_equal(batch_builder__add(bb, (uint32_t)i0, 10, "main", CHAIN, 4, 2), 0);
	assert_int_equal(batch_builder__add(bb, (uint32_t)i1, 11, "w", CHAIN, 2, 1), 0);
	assert_int_equal(batch_builder__add(bb, (uint32_t)i1, 11, "w", CHAIN, 2, 0), 0);
	assert_int_equal(batch_builder__add(bb, 99, 11, "w", CHAIN, 2, 1), -EINVAL);
	assert_int_equal(batch_builder__pending(bb), 8);

	b = finish_and_decode(bb, 7);
	assert_int_equal(b->version, 1);
	assert_string_equal(b->node, "n1");
	assert_int_equal(b->seq, 7);
	assert_string_equal(b->strings[0], "");
	assert_int_equal(b->stacks[0]->n_frames, 0); /* "no stack" */
	assert_int_equal(b->n_stacks, 3);
	assert_int_equal(b->n_mappings, 1);
	assert_memory_equal(b->mappings[0]->build_id.data, ID, 20);
	assert_int_equal(b->n_cpu_samples, 2);
	assert_int_equal(b->cpu_samples[0]->count, 7); /* merged */
	assert_int_equal(b->processes[0]->rank->rank, 0);
	assert_null(b->processes[1]->rank); /* no RANK is not rank 0 */
	const Strata__V1__Stack *s = b->stacks[b->cpu_samples[0]->stack];
	assert_int_equal(s->n_frames, 4);
	for (size_t i = 0; i < 2; i++) {
		/* native frames: mapping + file offset, never a name */
		assert_int_equal(s->frames[i]->kind, STRATA__V1__FRAME__KIND__NATIVE);
		assert_int_equal(s->frames[i]->name_str, 0);
		assert_int_equal(s->frames[i]->file_str, 0);
	}
	assert_int_equal(s->frames[1]->address, 0x1200);
	assert_string_equal(b->strings[s->frames[3]->name_str], "do_syscall_64");
	batch_decode__free(b);

	/* the next batch starts empty, with a new id */
	assert_int_equal(batch_builder__pending(bb), 0);
	b = finish_and_decode(bb, 8);
	assert_int_equal(b->n_cpu_samples, 0);
	batch_decode__free(b);
	batch_builder__free(bb);
}

static void test_bounds(void **state)
{
	struct batch_builder_opts o = { .sz = sizeof(o), .max_stacks = 2, .max_samples = 8 };
	struct batch_builder *bb = batch_builder__new(&o);
	struct bb_process p = proc(10, 1);
	struct batch_builder_stats st;
	Strata__V1__Batch *b;
	int64_t i = batch_builder__process(bb, &p);

	/* stacks[0] (empty) + one more fit; a third distinct stack does not */
	assert_int_equal(batch_builder__add(bb, (uint32_t)i, 1, "t", CHAIN, 1, 3), 0);
	assert_int_equal(batch_builder__add(bb, (uint32_t)i, 1, "t", CHAIN, 2, 4), 0);
	batch_builder__stats(bb, &st);
	assert_int_equal(st.rows_dropped, 4);
	b = finish_and_decode(bb, 1);
	assert_int_equal(b->drops->batch_rows_dropped, 4);
	assert_int_equal(b->n_cpu_samples, 1);
	batch_decode__free(b);
	batch_builder__free(bb);
}

static void test_parse_missing(void **state)
{
	char ids[4][129];

	assert_int_equal(
		uploader__parse_missing("{\"status\":\"stored\",\"missing_build_ids\":[]}", ids, 4),
		0);
	assert_int_equal(uploader__parse_missing("{\"missing_build_ids\":[\"abcd\",\"XYZ!\","
						 "\"0123456789\",\"abc\"]}",
						 ids, 4),
			 2); /* not hex, odd length: ignored */
	assert_string_equal(ids[0], "abcd");
	assert_string_equal(ids[1], "0123456789");
	assert_int_equal(
		uploader__parse_missing("{\"missing_build_ids\":[\"aa\",\"bb\",\"cc\"]}", ids, 2),
		2); /* bounded */
	assert_int_equal(uploader__parse_missing("garbage", ids, 4), 0);
}

/* The protobuf answer (Accept: application/x-strata-reply): missing ids as
 * in JSON, and the deep captures the server orders; garbage decodes to none. */
static void test_parse_reply(void **state)
{
	Strata__V1__IngestReply a = STRATA__V1__INGEST_REPLY__INIT, *got = NULL;
	Strata__V1__CaptureOrder o = STRATA__V1__CAPTURE_ORDER__INIT, *op = &o;
	Strata__V1__CaptureTarget t = STRATA__V1__CAPTURE_TARGET__INIT, *tp = &t;
	char *missing[] = { "abcd", "NOPE", "0123" }, ids[4][129];
	uint8_t buf[512];
	size_t len;

	(void)state;
	a.status = "stored";
	a.missing_build_ids = missing;
	a.n_missing_build_ids = 3;
	o.id = "0123456789abcdef0123456789abcdef";
	o.job = "j1";
	o.start_ns = 5;
	o.end_ns = 6;
	o.freq_hz = 99;
	t.node = "n1";
	t.pid = 42;
	o.targets = &tp;
	o.n_targets = 1;
	a.captures = &op;
	a.n_captures = 1;
	len = strata__v1__ingest_reply__pack(&a, buf);
	assert_int_equal(uploader__parse_reply(buf, len, ids, 4, &got), 2);
	assert_string_equal(ids[1], "0123");
	assert_non_null(got);
	assert_int_equal(got->n_captures, 1);
	assert_string_equal(got->captures[0]->id, o.id);
	assert_int_equal(got->captures[0]->targets[0]->pid, 42);
	strata__v1__ingest_reply__free_unpacked(got, NULL);
	assert_int_equal(uploader__parse_reply((const uint8_t *)"\xff\xff\xff", 3, ids, 4, &got),
			 0);
	assert_null(got);
}

static void test_cgroup_ids(void **state)
{
	char c[80], p[80];
	const char *id = "4f1c7e0d9a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5";

	char path[512];
	snprintf(path, sizeof(path),
		 "/kubepods.slice/kubepods-burstable.slice/"
		 "kubepods-burstable-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/"
		 "cri-containerd-%s.scope",
		 id);
	proc_labels__parse_cgroup(path, c, sizeof(c), p, sizeof(p));
	assert_string_equal(c, id);
	assert_string_equal(p, "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
	snprintf(path, sizeof(path), "/system.slice/docker-%s.scope", id);
	proc_labels__parse_cgroup(path, c, sizeof(c), p, sizeof(p));
	assert_string_equal(c, id);
	assert_string_equal(p, "");
	/* a process with a delegated subtree names a cgroup below its own
	 * after another pod and container: the outermost (the runtime's) win */
	snprintf(path, sizeof(path),
		 "/kubepods.slice/kubepods-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/"
		 "cri-containerd-%s.scope/pod99999999-9999-9999-9999-999999999999/"
		 "docker-%064d.scope",
		 id, 0);
	proc_labels__parse_cgroup(path, c, sizeof(c), p, sizeof(p));
	assert_string_equal(c, id);
	assert_string_equal(p, "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
	/* kind / Docker-in-Docker: the outer runtime's container above the
	 * pod is not the process's; without a pod, the innermost is */
	snprintf(path, sizeof(path),
		 "/docker/%064d/kubepods/burstable/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/%s", 7,
		 id);
	proc_labels__parse_cgroup(path, c, sizeof(c), p, sizeof(p));
	assert_string_equal(c, id);
	snprintf(path, sizeof(path), "/docker/%064d/docker/%s", 7, id);
	proc_labels__parse_cgroup(path, c, sizeof(c), p, sizeof(p));
	assert_string_equal(c, id);
	assert_string_equal(p, "");
	proc_labels__parse_cgroup("/user.slice/user-0.slice/session-1.scope", c, sizeof(c), p,
				  sizeof(p));
	assert_string_equal(c, "");
	assert_string_equal(p, "");
}

static void test_labels_from_environment(void **state)
{
	uint64_t epoch = proc_labels__boot_epoch_ns();
	struct proc_labels l, again;
	int fds[2];
	char go;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { "sleep", "30", NULL };
		char *envp[] = { "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=16",
				 "TORCHELASTIC_RUN_ID=run-42", NULL };

		close(fds[0]);
		close(fds[1]); /* EOF tells the parent exec is near */
		execve("/bin/sleep", argv, envp);
		_exit(127);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &go, 1), 0);
	close(fds[0]);
	/* exec may still be under way: wait for the new image's environment
	 * and name (the kernel switches the mm before it sets comm) */
	for (int i = 0; i < 200; i++) {
		assert_int_equal(proc_labels__read((uint32_t)pid, epoch, 0, &l), 0);
		if (l.has_rank && !strcmp(l.comm, "sleep"))
			break;
		usleep(5000);
	}
	/* the same start time at every read with one epoch (the server keys
	 * a process by it) */
	assert_int_equal(proc_labels__read((uint32_t)pid, epoch, 0, &again), 0);
	assert_true(again.start_time_ns == l.start_time_ns);
	/* the process sampled started at another time: this pid is another
	 * process's now, whose labels are not the sampled one's */
	uint64_t ticks = proc_stat__start_ticks("/proc", (uint32_t)pid, NULL, 0);

	assert_true(ticks > 0);
	assert_int_equal(proc_labels__read((uint32_t)pid, epoch, ticks, &again), 0);
	assert_int_equal(proc_labels__read((uint32_t)pid, epoch, ticks + 1, &again), -ESTALE);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_true(l.has_rank);
	assert_int_equal(l.rank, 3);
	assert_int_equal(l.local_rank, 1);
	assert_int_equal(l.world_size, 16);
	assert_string_equal(l.job, "run-42"); /* the launcher's id names the job */
	/* claims from the environment, said so; bound to the cgroup */
	assert_string_equal(l.job_source, "env:TORCHELASTIC_RUN_ID");
	assert_string_equal(l.rank_source, "env:RANK");
	assert_true(!strncmp(l.identity, "pod:", 4) || !strncmp(l.identity, "container:", 10) ||
		    !strncmp(l.identity, "cgroup:", 7));
	assert_string_equal(l.comm, "sleep");
	assert_true(l.start_time_ns > 1600000000000000000ull);
	assert_int_equal(proc_labels__read(0x3ffffff0, epoch, 0, &l), -ESRCH);
}

static void count_file(void *ctx, const char *hex, const char *path)
{
	(void)hex;
	(void)path;
	++*(unsigned *)ctx;
}

/*
 * A month of new binaries: every build-id a batch names is announced to
 * the uploader (which the server may then ask for), once in each batch
 * that names it, however many came before: the uploader's table of noted
 * files starts again when full, and the next batch notes the files still
 * in use.  Before, the builder announced each file once in its life and
 * stopped at 8192: no later binary was ever symbolized.
 */
static void test_announce_past_the_bound(void **state)
{
	unsigned announced = 0;
	struct batch_builder_opts o = {
		.sz = sizeof(o), .node = "n1", .on_file = count_file, .on_file_ctx = &announced
	};
	struct batch_builder *bb = batch_builder__new(&o);
	struct bb_process p0 = proc(10, 0);
	uint8_t id[20] = { 0 };
	struct bb_frame f = { .kind = STRATA__V1__FRAME__KIND__NATIVE,
			      .build_id = id,
			      .build_id_len = 20,
			      .path = "/usr/lib/libnew.so",
			      .open_path = "/proc/self/fd/7",
			      .addr = 0x1000 };
	int64_t i0;

	(void)state;
	assert_non_null(bb);
	for (uint32_t i = 0; i < 9000; i++) {
		memcpy(id, &i, sizeof(i));
		if (i % 1000 == 0) { /* batches end meanwhile */
			batch_decode__free(finish_and_decode(bb, i));
		}
		i0 = batch_builder__process(bb, &p0);
		assert_true(i0 >= 0);
		assert_int_equal(batch_builder__add(bb, (uint32_t)i0, 10, "main", &f, 1, 1), 0);
		assert_int_equal(batch_builder__add(bb, (uint32_t)i0, 10, "main", &f, 1, 1), 0);
	}
	assert_int_equal(announced, 9000); /* each once */
	memset(id, 0, sizeof(id));	   /* the first, forgotten at the restart */
	assert_int_equal(batch_builder__add(bb, (uint32_t)i0, 10, "main", &f, 1, 1), 0);
	assert_int_equal(announced, 9001);
	batch_decode__free(finish_and_decode(bb, 9001));
	batch_builder__free(bb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_parse_missing),
		cmocka_unit_test(test_parse_reply),
		cmocka_unit_test(test_cgroup_ids),
		cmocka_unit_test(test_labels_from_environment),
		cmocka_unit_test(test_announce_past_the_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
