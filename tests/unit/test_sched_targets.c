// SPDX-License-Identifier: Apache-2.0
/*
 * Automatic targets of the host-wide scheduler layer: which environments
 * carry training labels, and the /proc scan over a fake tree (a labelled
 * process, an unlabelled one, one examined before its exec and again
 * after, a pid beyond the bitmap).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/sched/sched_targets.h"

static void labels(void **state)
{
	static const char a[] = "PATH=/bin\0RANK=3\0HOME=/root";
	static const char b[] = "PATH=/bin\0MY_RANK=3\0RANKS=1\0RANK=";
	static const char c[] = "SLURM_JOB_ID=77";
	static const char d[] = "STRATA_JOB=llama\0";

	assert_true(sched_targets__env_has_label(a, sizeof(a)));
	assert_false(sched_targets__env_has_label(b, sizeof(b)));    /* empty RANK= too */
	assert_true(sched_targets__env_has_label(c, sizeof(c) - 1)); /* no final NUL */
	assert_true(sched_targets__env_has_label(d, sizeof(d)));
	assert_false(sched_targets__env_has_label("", 0));
}

static void write_proc(const char *root, unsigned pid, const char *comm, const char *env,
		       size_t envlen)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/stat", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%u (%s) S 1 %u %u 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n", pid, comm,
		pid, pid);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%u/environ", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(env, 1, envlen, f);
	fclose(f);
}

static void scan_fake_proc(void **state)
{
	char root[] = "/tmp/strata-proc.XXXXXX";
	uint64_t words[4] = { 0 }; /* pids 0..255 */
	struct sched_targets *t;
	struct sched_targets_stats st;
	static const char ranked[] = "RANK=1\0WORLD_SIZE=4";
	static const char plain[] = "PATH=/bin";

	assert_non_null(mkdtemp(root));
	write_proc(root, 100, "python", ranked, sizeof(ranked));
	write_proc(root, 101, "bash", plain, sizeof(plain));
	write_proc(root, 102, "torchrun", plain, sizeof(plain)); /* before its exec */
	write_proc(root, 300, "python", ranked, sizeof(ranked)); /* beyond the bitmap */
	t = sched_targets__new(words, 4, root);
	assert_non_null(t);
	assert_int_equal(sched_targets__scan(t, NULL, NULL), 1);
	assert_true(sched_targets__is(t, 100));
	assert_false(sched_targets__is(t, 101));
	assert_false(sched_targets__is(t, 102));
	assert_int_equal(words[1], 1ULL << (100 - 64));
	/* 102 execs the rank's program with RANK set: examined again */
	write_proc(root, 102, "python3", ranked, sizeof(ranked));
	assert_int_equal(sched_targets__scan(t, NULL, NULL), 1);
	assert_true(sched_targets__is(t, 102));
	assert_int_equal(sched_targets__scan(t, NULL, NULL), 0); /* nothing new */
	sched_targets__mark(t, 7, true);			 /* the GPU layer's process */
	assert_true(sched_targets__is(t, 7));
	sched_targets__stats(t, &st);
	assert_int_equal(st.by_labels, 2);
	assert_int_equal(st.by_gpu, 1);
	assert_int_equal(st.out_of_range, 1); /* pid 300 */
	assert_int_equal(st.examined, 5);
	sched_targets__free(t);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(labels),
		cmocka_unit_test(scan_fake_proc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
