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
#include "tests/unit/test_util.h"

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

/* A process in the fake tree: its stat (state S, or Z with zombie) and
 * environ. */
static void write_proc_state(const char *root, unsigned pid, const char *comm, const char *env,
			     size_t envlen, bool zombie)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/stat", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%u (%s) %c 1 %u %u 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n", pid,
		comm, zombie ? 'Z' : 'S', pid, pid);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%u/environ", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(env, 1, envlen, f);
	fclose(f);
}

static void write_proc(const char *root, unsigned pid, const char *comm, const char *env,
		       size_t envlen)
{
	write_proc_state(root, pid, comm, env, envlen, false);
}

static void rm_tree(const char *root)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

static void scan_fake_proc(void **state)
{
	char root[] = "/tmp/strata-proc.XXXXXX";
	uint64_t words[4] = { 0 }; /* pids 0..255 */
	struct sched_bitmaps bits = { .auto_words = words, .nwords = 4 };
	struct sched_targets *t;
	struct sched_targets_stats st;
	static const char ranked[] = "RANK=1\0WORLD_SIZE=4";
	static const char plain[] = "PATH=/bin";

	assert_non_null(mkdtemp(root));
	write_proc(root, 100, "python", ranked, sizeof(ranked));
	write_proc(root, 101, "bash", plain, sizeof(plain));
	write_proc(root, 102, "torchrun", plain, sizeof(plain)); /* before its exec */
	write_proc(root, 300, "python", ranked, sizeof(ranked)); /* beyond the bitmap */
	t = sched_targets__new(&bits, root);
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
	assert_int_equal(sched_targets__tick(t, NULL, NULL), 0); /* no exec bitmap: a scan */
	write_proc(root, 7, "python", plain, sizeof(plain));
	sched_targets__mark(t, 7, true); /* the GPU layer's process */
	assert_true(sched_targets__is(t, 7));
	/* one that exited meanwhile, or is a zombie: its bit is not left set
	 * (BPF cleared it at the exit; the pid's next process is another) */
	write_proc_state(root, 8, "python", plain, sizeof(plain), true);
	assert_false(sched_targets__mark(t, 8, true));
	assert_false(sched_targets__mark(t, 9, true));
	assert_false(sched_targets__is(t, 8) || sched_targets__is(t, 9));
	assert_int_equal(words[0], 1ULL << 7);
	sched_targets__stats(t, &st);
	assert_int_equal(st.gone, 2);
	assert_int_equal(st.by_labels, 2);
	assert_int_equal(st.by_gpu, 1);
	assert_int_equal(st.out_of_range, 1); /* pid 300 */
	assert_int_equal(st.examined, 5);
	sched_targets__free(t);
	rm_tree(root);
}

static void told_to(void *ctx, uint32_t tgid)
{
	*(uint32_t *)ctx = tgid;
}

/* With the exec bitmap, a tick examines the processes BPF says exec'd (and
 * only those), takes their bits, and leaves the summary clear. */
static void tick_examines_execs(void **state)
{
	char root[] = "/tmp/strata-proc.XXXXXX";
	/* pids 0 .. 8319: three summary words, the last one partly used */
	static uint64_t words[130], exec_words[130], summary[3];
	struct sched_bitmaps bits = {
		.auto_words = words,
		.exec_words = exec_words,
		.exec_summary = summary,
		.nwords = 130,
	};
	struct sched_targets *t;
	struct sched_targets_stats st;
	static const char ranked[] = "RANK=1\0WORLD_SIZE=4";
	static const char plain[] = "PATH=/bin";
	uint32_t told = 0;

	assert_non_null(mkdtemp(root));
	write_proc(root, 101, "bash", plain, sizeof(plain));
	write_proc(root, 130, "python", plain, sizeof(plain)); /* a launcher */
	write_proc(root, 131, "python", ranked, sizeof(ranked));
	write_proc(root, 8300, "python", plain, sizeof(plain)); /* in word 129 */
	t = sched_targets__new(&bits, root);
	assert_non_null(t);
	assert_int_equal(sched_targets__scan(t, NULL, NULL), 1); /* at start: 131 */
	/* nothing exec'd: nothing read (131's labels are not looked at again
	 * through a tick, nor 101's) */
	assert_int_equal(sched_targets__tick(t, told_to, &told), 0);
	sched_targets__stats(t, &st);
	assert_int_equal(st.examined, 4);
	/* the launcher execs python again, now with RANK set: same start time
	 * and name, so only the event says it is new */
	write_proc(root, 130, "python", ranked, sizeof(ranked));
	exec_words[130 / 64] |= 1ULL << (130 % 64);
	exec_words[101 / 64] |= 1ULL << (101 % 64); /* bash ran another shell */
	exec_words[150 / 64] |= 1ULL << (150 % 64); /* exited since */
	summary[0] |= 1ULL << (130 / 64) | 1ULL << (101 / 64) | 1ULL << (150 / 64);
	summary[0] |= 1ULL << 3; /* raised for a word whose bit was taken: harmless */
	assert_int_equal(sched_targets__tick(t, told_to, &told), 1);
	assert_int_equal(told, 130);
	assert_true(sched_targets__is(t, 130));
	assert_false(sched_targets__is(t, 101));
	assert_int_equal(exec_words[1] | exec_words[2] | summary[0], 0);
	sched_targets__stats(t, &st);
	assert_int_equal(st.execs, 3);
	assert_int_equal(st.examined, 7);
	assert_int_equal(st.gone, 1);
	assert_int_equal(st.unreadable, 0);
	assert_int_equal(st.scans, 1);
	/* a bit without its summary bit is not looked at yet (BPF raises the
	 * summary after the word) */
	exec_words[0] = 1ULL << 7;
	assert_int_equal(sched_targets__tick(t, NULL, NULL), 0);
	assert_int_equal(exec_words[0], 1ULL << 7);
	exec_words[0] = 0;
	/* the last word, through the third summary word; a summary bit past
	 * the bitmap's words is taken and ignored.  8300 execs a rank that
	 * forked two workers (one of them a launcher of a third) before the
	 * mark: they are marked with it. */
	write_proc(root, 8300, "python", ranked, sizeof(ranked));
	for (unsigned kid = 8301; kid <= 8303; kid++)
		write_proc(root, kid, "python", ranked, sizeof(ranked));
	char kids[64];

	/* and the agent itself, started from that shell: never a target */
	snprintf(kids, sizeof(kids), "8301 %u 8302 ", (unsigned)getpid());
	fake_task_file(root, 8300, 8300, "children", kids);
	fake_task_file(root, 8302, 8302, "children", "8303");
	exec_words[129] = 1ULL << (8300 % 64);
	summary[2] = 1ULL << (129 % 64) | 1ULL << (130 % 64);
	assert_int_equal(sched_targets__tick(t, told_to, &told), 1);
	assert_true(sched_targets__is(t, 8300));
	assert_true(sched_targets__is(t, 8301) && sched_targets__is(t, 8302) &&
		    sched_targets__is(t, 8303));
	assert_int_equal(told, 8303); /* told of each, the last one last */
	assert_int_equal(exec_words[129] | summary[2], 0);
	sched_targets__stats(t, &st);
	assert_int_equal(st.children, 3);
	assert_int_equal(st.by_labels, 3);
	assert_int_equal(st.out_of_range, 0);
	sched_targets__free(t);
	rm_tree(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(labels),
		cmocka_unit_test(scan_fake_proc),
		cmocka_unit_test(tick_examines_execs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
