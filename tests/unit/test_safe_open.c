// SPDX-License-Identifier: Apache-2.0
/*
 * Opening paths a profiled process controls (lib/safe_open.h, and the
 * module registry's use of it): a FIFO in a library's place neither blocks
 * nor opens, a device or directory is refused, a symlink is refused where
 * the name must be the file's own, a symlink inside a chroot cannot lead
 * out of it, and the registry counts what it refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/proc/modules.h"
#include "lib/safe_open.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/strata-safe-open.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	alarm(20); /* a blocking open fails the test instead of hanging it */
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void path_in(char *out, size_t sz, const char *name)
{
	snprintf(out, sz, "%s/%s", dir, name);
}

static void test_kinds(void **state)
{
	char reg[128], fifo[128], link[128];
	struct stat st;
	int fd;

	(void)state;
	path_in(reg, sizeof(reg), "lib.so");
	path_in(fifo, sizeof(fifo), "fifo.so");
	path_in(link, sizeof(link), "link.so");
	fd = open(reg, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "ELF", 3), 3);
	close(fd);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	assert_int_equal(symlink(reg, link), 0);

	fd = safe_open(AT_FDCWD, reg, 0, &st);
	assert_true(fd >= 0);
	assert_int_equal(st.st_size, 3);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);
	/* a FIFO: no writer would ever come; refused at once */
	assert_int_equal(safe_open(AT_FDCWD, fifo, 0, &st), -EINVAL);
	assert_int_equal(safe_open(AT_FDCWD, "/dev/null", 0, &st), -EINVAL);
	assert_int_equal(safe_open(AT_FDCWD, dir, 0, &st), -EINVAL);
	/* a symlink: followed unless the name must be the file's own */
	fd = safe_open(AT_FDCWD, link, 0, &st);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(safe_open(AT_FDCWD, link, SAFE_OPEN_NOFOLLOW, &st), -ELOOP);
	assert_int_equal(safe_open(AT_FDCWD, "/nonexistent/x.so", 0, &st), -ENOENT);
}

/* A process chrooted into dir: its paths resolve inside dir, whatever
 * symlinks it plants. */
static void test_in_root(void **state)
{
	char p[128], outside[128], rel[128];
	struct stat st;
	int fds[2], fd;
	pid_t pid;
	char c;

	(void)state;
	if (geteuid() != 0)
		skip();
	path_in(p, sizeof(p), "inside.so");
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "inside", 6), 6);
	close(fd);
	snprintf(outside, sizeof(outside), "%s.outside", dir);
	fd = open(outside, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	close(fd);
	/* absolute and relative escapes */
	path_in(p, sizeof(p), "abs.so");
	assert_int_equal(symlink(outside, p), 0);
	path_in(p, sizeof(p), "rel.so");
	snprintf(rel, sizeof(rel), "..%s", strrchr(outside, '/')); /* beside dir */
	assert_int_equal(symlink(rel, p), 0);
	path_in(p, sizeof(p), "fifo.so");
	assert_int_equal(mkfifo(p, 0644), 0);

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (chroot(dir) || chdir("/"))
			_exit(1);
		close(fds[1]); /* EOF: in its root */
		pause();
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 0);
	close(fds[0]);

	fd = safe_open_in_root(pid, "/inside.so", 0, &st);
	assert_true(fd >= 0);
	assert_int_equal(st.st_size, 6);
	close(fd);
	/* the host file the links name is not reached */
	assert_int_equal(safe_open_in_root(pid, "/abs.so", 0, &st), -ENOENT);
	fd = safe_open_in_root(pid, "/../../../../inside.so", 0, &st); /* ".." stops at its root */
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(safe_open_in_root(pid, "/rel.so", 0, &st), -ENOENT);
	assert_int_equal(safe_open_in_root(pid, "/fifo.so", 0, &st), -EINVAL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(outside);
}

/*
 * The registry's fallback (/proc/PID/root + the mapped path, when
 * map_files does not have the mapping): a FIFO put where the library was
 * neither blocks nor registers, and is counted.
 */
static void test_registry_fifo(void **state)
{
	struct module_registry *r = modules__new(0);
	struct module_stats ms;
	struct proc_map pm = { .start = 0x1000, .end = 0x2000, .prot = PROC_MAP_X };
	struct stat st;

	(void)state;
	assert_non_null(r);
	path_in(pm.path, sizeof(pm.path), "mapped.so");
	assert_int_equal(mkfifo(pm.path, 0644), 0);
	assert_int_equal(stat(pm.path, &st), 0);
	pm.dev_major = major(st.st_dev);
	pm.dev_minor = minor(st.st_dev);
	pm.inode = st.st_ino;
	/* no mapping at 0x1000 in this process: map_files fails, the root
	 * path is tried and holds a FIFO */
	assert_null(modules__from_map(r, getpid(), &pm));
	modules__stats(r, &ms);
	assert_int_equal(ms.modules, 0);
	assert_int_equal(ms.not_regular, 1);
	assert_int_equal(ms.open_failed, 1);
	modules__free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_in_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_fifo, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
