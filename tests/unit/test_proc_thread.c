// SPDX-License-Identifier: Apache-2.0
/*
 * A thread's state from /proc (agent/proc/proc_thread.h) on a fake tree:
 * state after a comm holding ") ", wchan, the system call and the user
 * stack pointer of a blocked thread (none while it runs), the kernel stack
 * reversed to names; a thread that is gone.  And the process of a thread
 * id (agent/proc/proc_stat.h, status).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/proc/proc_stat.h"
#include "agent/proc/proc_thread.h"
#include "tests/unit/test_util.h"

static char root[64];

static void put(uint32_t tid, const char *name, const char *text)
{
	fake_task_file(root, 7, tid, name, text);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/test_proc_thread.XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) ? -1 : 0;
}

static void test_blocked_in_read(void **state)
{
	struct proc_thread_state ts;
	uint64_t sp;

	(void)state;
	/* the thread named itself "a) D\n": its state is what follows */
	put(8, "stat", "8 (a) D\n) S 1 8 8 0 -1 4194560 0 0 0 0\n");
	put(8, "wchan", "pipe_read");
	put(8, "syscall", "0 0x3 0x7ffd0000 0x1000 0x0 0x0 0x0 0x7ffc12345678 0x7f0011223344\n");
	put(8, "stack", "[<0>] pipe_read+0x1/0x2\n[<0>] vfs_read+0x3/0x4\n");
	assert_int_equal(proc_thread__read(root, 7, 8, &ts), 0);
	assert_int_equal(ts.state, 'S');
	assert_string_equal(ts.wchan, "pipe_read");
	assert_int_equal(ts.syscall, 0);
	assert_int_equal(ts.user_sp, 0x7ffc12345678ull);
	assert_int_equal(ts.nframes, 2);
	assert_string_equal(ts.frames[0], "pipe_read");
	assert_string_equal(ts.frames[1], "vfs_read");
	assert_int_equal(proc_thread__user_sp(root, 7, 8, &sp), 0);
	assert_int_equal(sp, 0x7ffc12345678ull);
}

static void test_blocked_outside_syscall(void **state)
{
	struct proc_thread_state ts;
	uint64_t sp;

	(void)state;
	put(9, "stat", "9 (x) D 1\n");
	put(9, "wchan", "0");
	put(9, "syscall", "-1 0x7ffc00001000 0x401000\n");
	assert_int_equal(proc_thread__read(root, 7, 9, &ts), 0);
	assert_int_equal(ts.state, 'D');
	assert_string_equal(ts.wchan, "");
	assert_int_equal(ts.syscall, -1);
	assert_int_equal(ts.user_sp, 0x7ffc00001000ull);
	assert_int_equal(proc_thread__user_sp(root, 7, 9, &sp), 0);
	assert_int_equal(sp, 0x7ffc00001000ull);
}

static void test_running_and_gone(void **state)
{
	struct proc_thread_state ts;
	uint64_t sp = 1;

	(void)state;
	put(10, "stat", "10 (r) R 1\n");
	put(10, "syscall", "running\n");
	assert_int_equal(proc_thread__read(root, 7, 10, &ts), 0);
	assert_int_equal(ts.state, 'R');
	assert_int_equal(ts.syscall, -1);
	assert_int_equal(ts.user_sp, 0);
	assert_int_equal(proc_thread__user_sp(root, 7, 10, &sp), -EAGAIN);
	assert_int_equal(sp, 0);
	assert_int_equal(proc_thread__read(root, 7, 11, &ts), -ENOENT);
	assert_int_equal(proc_thread__user_sp(root, 7, 11, &sp), -ENOENT);
}

/* Files a thread's exit (or a hostile root) leaves empty: an error, and
 * nothing parsed from a buffer fgets never wrote (it was used
 * uninitialised before). */
static void test_empty_files(void **state)
{
	struct proc_thread_state ts;
	uint64_t sp = 1;

	(void)state;
	put(12, "stat", "");
	put(12, "wchan", "");
	put(12, "syscall", "");
	put(12, "stack", "");
	assert_true(proc_thread__read(root, 7, 12, &ts) < 0);
	assert_true(proc_thread__user_sp(root, 7, 12, &sp) < 0);
	assert_int_equal(sp, 0);
}

/* An OOM kill names a thread: its process from root/TID/status. */
static void test_tgid_of_thread(void **state)
{
	char path[256];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/9", root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/9/status", root);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("Name:\tpt_main_thread\nUmask:\t0022\nState:\tR (running)\nTgid:\t7\n"
	      "Ngid:\t0\nPid:\t9\n",
	      f);
	fclose(f);
	assert_int_equal(proc_stat__tgid(root, 9), 7);
	assert_int_equal(proc_stat__tgid(root, 10), 0); /* gone */
	assert_int_equal(proc_stat__tgid(NULL, (uint32_t)getpid()), (uint32_t)getpid());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocked_in_read),
		cmocka_unit_test(test_blocked_outside_syscall),
		cmocka_unit_test(test_running_and_gone),
		cmocka_unit_test(test_empty_files),
		cmocka_unit_test(test_tgid_of_thread),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
