// SPDX-License-Identifier: Apache-2.0
/* Unit tests: /proc/PID/maps parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/proc/proc_maps.h"

static void test_file_mapping(void **state)
{
	struct proc_map m;

	assert_int_equal(proc_maps__parse_line("55a121d12000-55a121d18000 r-xp 00002000 fe:00 "
					       "247498                     /usr/bin/head\n",
					       &m),
			 0);
	assert_true(m.start == 0x55a121d12000ull);
	assert_true(m.end == 0x55a121d18000ull);
	assert_true(m.pgoff == 0x2000);
	assert_int_equal(m.dev_major, 0xfe);
	assert_int_equal(m.dev_minor, 0);
	assert_true(m.inode == 247498);
	assert_int_equal(m.prot, PROC_MAP_R | PROC_MAP_X);
	assert_string_equal(m.path, "/usr/bin/head");
	assert_int_equal(m.deleted, 0);
}

static void test_spaces_in_path(void **state)
{
	struct proc_map m;

	assert_int_equal(proc_maps__parse_line("7f0000000000-7f0000001000 r--s 00000000 08:01 42   "
					       "/tmp/my dir/lib  two.so\n",
					       &m),
			 0);
	assert_string_equal(m.path, "/tmp/my dir/lib  two.so");
	assert_int_equal(m.prot, PROC_MAP_R | PROC_MAP_SHARED);
	/* Without trailing newline, trailing blanks belong to the name. */
	assert_int_equal(proc_maps__parse_line("1000-2000 rw-p 00000000 00:00 7 /x/trailing ", &m),
			 0);
	assert_string_equal(m.path, "/x/trailing ");
}

static void test_deleted(void **state)
{
	struct proc_map m;

	assert_int_equal(proc_maps__parse_line("7f1234560000-7f1234570000 r-xp 00010000 fd:01 1234 "
					       "/opt/app/libx.so (deleted)\n",
					       &m),
			 0);
	assert_string_equal(m.path, "/opt/app/libx.so");
	assert_int_equal(m.deleted, 1);
	assert_true(m.pgoff == 0x10000);
	/* memfd mappings always read as deleted. */
	assert_int_equal(
		proc_maps__parse_line(
			"7f0000000000-7f0000001000 r-xp 00000000 00:01 99 /memfd:jit (deleted)",
			&m),
		0);
	assert_string_equal(m.path, "/memfd:jit");
	assert_int_equal(m.deleted, 1);
}

static void test_special_and_anon(void **state)
{
	struct proc_map m;

	assert_int_equal(proc_maps__parse_line("7ffd4a5f3000-7ffd4a5f5000 r-xp 00000000 00:00 0    "
					       "                      [vdso]\n",
					       &m),
			 0);
	assert_string_equal(m.path, "[vdso]");
	assert_true(m.inode == 0);

	assert_int_equal(
		proc_maps__parse_line("7f8e4c000000-7f8e4c021000 rw-p 00000000 00:00 0 \n", &m), 0);
	assert_string_equal(m.path, "");
	assert_int_equal(m.prot, PROC_MAP_R | PROC_MAP_W);
	assert_int_equal(
		proc_maps__parse_line("7f8e4c000000-7f8e4c021000 ---p 00000000 00:00 0", &m), 0);
	assert_string_equal(m.path, "");
	assert_int_equal(m.prot, 0);

	/* 64-bit addresses, large minor numbers. */
	assert_int_equal(
		proc_maps__parse_line(
			"ffffffffff600000-ffffffffff601000 --xp 00000000 103:1ff 0 [vsyscall]", &m),
		0);
	assert_true(m.end == 0xffffffffff601000ull);
	assert_int_equal(m.dev_major, 0x103);
	assert_int_equal(m.dev_minor, 0x1ff);
	assert_string_equal(m.path, "[vsyscall]");
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"\n",
		"garbage",
		"1000-2000",
		"1000-2000 r-xp",
		"1000-2000 r-xp 0 08:01",
		"1000 2000 r-xp 00000000 08:01 1 /a",
		"1000-2000 rwxq 00000000 08:01 1 /a",
		"1000-2000 r?xp 00000000 08:01 1 /a",
		"2000-1000 r-xp 00000000 08:01 1 /a", /* start > end */
		"1000-1000 r-xp 00000000 08:01 1 /a", /* empty */
		"-1000-2000 r-xp 00000000 08:01 1 /a",
		" 1000-2000 r-xp 00000000 08:01 1 /a",
		"1000-2000 r-xp 00000000 08-01 1 /a",
		"1000-2000 r-xp 00000000 08:01 x /a",
		"1000-2000 r-xp 00000000 08:01 1x /a",
		"11112222333344445-2000 r-xp 0 08:01 1 /a",	  /* 17 digits */
		"1000-2000 r-xp 0 08:01 99999999999999999999 /a", /* > u64 */
		"1000-2000 r-xp 0 108:01ffffffff 1 /a",		  /* minor > u32 */
		"1000-2000 r-xp 0 08:01 1 /a\nsecond line",
	};
	struct proc_map m;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (proc_maps__parse_line(bad[i], &m) != -EINVAL)
			fail_msg("accepted: \"%s\"", bad[i]);
	}
	assert_int_equal(proc_maps__parse_line(NULL, &m), -EINVAL);
	assert_int_equal(proc_maps__parse_line("1000-2000 r-xp 0 0:0 0", NULL), -EINVAL);
}

static void test_path_too_long(void **state)
{
	size_t n = PROC_MAP_PATH_MAX + 64;
	char *line = malloc(n + 64);
	struct proc_map m;
	int off;

	assert_non_null(line);
	off = snprintf(line, 64, "1000-2000 r-xp 00000000 08:01 1 /");
	memset(line + off, 'a', n);
	line[off + n] = '\0';
	assert_int_equal(proc_maps__parse_line(line, &m), -EINVAL);
	/* Exactly the longest path that fits is accepted. */
	line[off + PROC_MAP_PATH_MAX - 2] = '\0';
	assert_int_equal(proc_maps__parse_line(line, &m), 0);
	assert_int_equal(strlen(m.path), PROC_MAP_PATH_MAX - 1);
	free(line);
}

static void test_read_self(void **state)
{
	struct proc_map *maps = NULL;
	uintptr_t fn = (uintptr_t)&test_read_self;
	char exe[PROC_MAP_PATH_MAX];
	ssize_t len;
	size_t n = 0, i;
	int found = 0;

	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(len > 0);
	exe[len] = '\0';

	assert_int_equal(proc_maps__read(getpid(), 0, &maps, &n), 0);
	assert_true(n > 3);
	for (i = 0; i < n; i++) {
		if (fn >= maps[i].start && fn < maps[i].end) {
			assert_true(maps[i].prot & PROC_MAP_X);
			assert_string_equal(maps[i].path, exe);
			found = 1;
		}
	}
	assert_true(found);
	free(maps);

	/* only_exec keeps only executable mappings, ours among them. */
	assert_int_equal(proc_maps__read(getpid(), 1, &maps, &n), 0);
	found = 0;
	for (i = 0; i < n; i++) {
		assert_true(maps[i].prot & PROC_MAP_X);
		found |= fn >= maps[i].start && fn < maps[i].end;
	}
	assert_true(found);
	free(maps);
}

static void test_read_errors(void **state)
{
	struct proc_map *maps = (struct proc_map *)1;
	size_t n = 1;

	/* pid_max is at most 4M: this pid cannot exist. */
	assert_int_equal(proc_maps__read(0x7ffffff0, 0, &maps, &n), -ESRCH);
	assert_null(maps);
	assert_int_equal(n, 0);
	assert_int_equal(proc_maps__read(0, 0, &maps, &n), -EINVAL);
	assert_int_equal(proc_maps__read(-5, 0, &maps, &n), -EINVAL);
	assert_int_equal(proc_maps__read(getpid(), 0, NULL, &n), -EINVAL);
}

static void test_read_kernel_thread(void **state)
{
	struct proc_map *maps = NULL;
	size_t n = 99;

	char comm[32] = "";
	FILE *f = fopen("/proc/2/comm", "r");

	/* kthreadd has no mappings but is alive: 0, not -ESRCH. */
	if (f) {
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
	}
	if (strcmp(comm, "kthreadd\n"))
		skip(); /* another pid namespace */
	assert_int_equal(proc_maps__read(2, 0, &maps, &n), 0);
	assert_int_equal(n, 0);
	free(maps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_mapping),
		cmocka_unit_test(test_spaces_in_path),
		cmocka_unit_test(test_deleted),
		cmocka_unit_test(test_special_and_anon),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_path_too_long),
		cmocka_unit_test(test_read_self),
		cmocka_unit_test(test_read_errors),
		cmocka_unit_test(test_read_kernel_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
