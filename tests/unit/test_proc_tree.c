// SPDX-License-Identifier: Apache-2.0
/*
 * The descendants of a process found in /proc (agent/proc/proc_tree.h): a
 * child and a grandchild forked before anyone asked are both found, the
 * bound is kept and reported.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/proc/proc_tree.h"

static int has(const uint32_t *v, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (v[i] == (uint32_t)pid)
			return 1;
	return 0;
}

static void test_child_and_grandchild(void **state)
{
	int fds[2];
	pid_t child, grandchild;
	uint32_t out[64];
	int more, n;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pid_t g = fork();

		if (g == 0) {
			pause();
			_exit(0);
		}
		if (write(fds[1], &g, sizeof(g)) != sizeof(g))
			_exit(1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(fds[0], &grandchild, sizeof(grandchild)), sizeof(grandchild));
	n = proc_tree__descendants((uint32_t)getpid(), out, 64, &more);
	assert_true(n >= 2);
	assert_false(more);
	assert_true(has(out, n, child));
	assert_true(has(out, n, grandchild));
	assert_false(has(out, n, getpid()));
	/* a bound of one: the child (found first), and the rest reported */
	n = proc_tree__descendants((uint32_t)getpid(), out, 1, &more);
	assert_int_equal(n, 1);
	assert_true(more);
	/* the child's own: only the grandchild */
	n = proc_tree__descendants((uint32_t)child, out, 64, &more);
	assert_int_equal(n, 1);
	assert_int_equal(out[0], (uint32_t)grandchild);
	kill(grandchild, SIGKILL);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_child_and_grandchild),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
