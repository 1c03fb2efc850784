// SPDX-License-Identifier: Apache-2.0
/*
 * The module registry's bounds over a long run (agent/proc/modules.h) and
 * the process tracker's under JIT churn (agent/proc/proc_tracker.h):
 * unused files are evicted after their grace period (sooner when deleted),
 * pinned and mapped ones stay, a full registry makes room instead of
 * refusing, loaders forget their answers; a process with tens of thousands
 * of executable mappings is read within bounds, in linear time, and its
 * unwind misses re-read its maps once per drain at most.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/proc/proc_tracker.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/strata-evict.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* A fresh file (its own inode) named name in dir. */
static struct module *new_file(struct module_registry *r, const char *name)
{
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, name, strlen(name)), (ssize_t)strlen(name));
	close(fd);
	return modules__from_path(r, p);
}

struct forgot {
	int n;
	struct module *last;
};

static void count_forget(void *ctx, struct module *m)
{
	struct forgot *f = ctx;

	f->n++;
	f->last = m;
}

static void test_idle_eviction(void **state)
{
	struct module_registry *r = modules__new(0);
	struct forgot f = { 0 };
	struct module *used, *idle, *pinned;
	struct module_stats st;

	(void)state;
	modules__on_evict(r, count_forget, &f);
	used = new_file(r, "used.so");
	idle = new_file(r, "idle.so");
	pinned = new_file(r, "pinned.so");
	assert_non_null(used);
	assert_non_null(idle);
	assert_non_null(pinned);
	modules__ref(r, used);
	pinned->pins++;
	for (int i = 0; i < 59; i++)
		modules__end_drain(r);
	modules__stats(r, &st);
	assert_int_equal(st.evicted, 0); /* within the grace period */
	modules__end_drain(r);
	modules__stats(r, &st);
	assert_int_equal(st.evicted, 1);
	assert_int_equal(st.modules, 2);
	assert_int_equal(f.n, 1);
	assert_ptr_equal(f.last, idle);
	/* used: let go now, gone a grace period later */
	modules__unref(r, used);
	for (int i = 0; i < 60; i++)
		modules__end_drain(r);
	modules__stats(r, &st);
	assert_int_equal(st.evicted, 2);
	assert_int_equal(st.modules, 1); /* the pinned one */
	modules__free(r);
}

/* A full registry evicts its longest-unused module for a new one. */
static void test_full_makes_room(void **state)
{
	struct module_registry *r = modules__new(2);
	struct module *a, *b, *c;
	struct module_stats st;

	(void)state;
	a = new_file(r, "a.so");
	modules__end_drain(r);
	b = new_file(r, "b.so");
	assert_non_null(a);
	assert_non_null(b);
	modules__ref(r, b);
	modules__end_drain(r);
	c = new_file(r, "c.so"); /* a goes: unused since before */
	assert_non_null(c);
	modules__stats(r, &st);
	assert_int_equal(st.evicted, 1);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.modules, 2);
	/* nothing evictable (b used, c new this drain): refused, counted */
	assert_null(new_file(r, "d.so"));
	modules__stats(r, &st);
	assert_int_equal(st.dropped, 1);
	modules__free(r);
}

/* A child with n anonymous executable mappings (JIT code), kept apart by
 * holes so the kernel cannot merge them. */
static pid_t jit_child(int n, int *ready)
{
	int fds[2];
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		size_t pg = (size_t)sysconf(_SC_PAGESIZE);
		char *base = mmap(NULL, 2 * pg * (size_t)n, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (base == MAP_FAILED)
			_exit(1);
		for (int i = 0; i < n; i++)
			if (mprotect(base + 2 * pg * (size_t)i, pg, PROT_READ | PROT_EXEC))
				_exit(1);
		close(fds[0]);
		close(fds[1]);
		pause();
		_exit(0);
	}
	close(fds[1]);
	*ready = fds[0];
	return pid;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void test_jit_churn(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	struct proc_tracker_stats st;
	const struct proc_mapping *m;
	int ready;
	char c;
	pid_t pid = jit_child(25000, &ready);
	struct strata_proc_event e = { .type = PROC_EV_NEW, .tgid = (uint32_t)pid, .mm_id = 7 };
	double t0;

	(void)state;
	assert_int_equal(read(ready, &c, 1), 0); /* mapped */
	close(ready);
	t0 = now_s();
	assert_int_equal(proc_tracker__on_event(t, &e), 0);
	proc_tracker__stats(t, &st);
	assert_int_equal(st.maps_read, 1);
	/* the anonymous mappings past the bound are left out, and counted */
	assert_true(st.maps_dropped >= 25000 - PROC_MAPS_ANON_MAX);
	/* misses (addresses in no mapping) re-read once per drain at most,
	 * besides the first miss after the process's start */
	for (int i = 0; i < 100; i++) {
		struct strata_proc_event miss = { .type = PROC_EV_UNWIND_MISS,
						  .tgid = (uint32_t)pid,
						  .mm_id = 7,
						  .start = 0x10 + (uint64_t)i };

		assert_int_equal(proc_tracker__on_event(t, &miss), 0);
	}
	proc_tracker__stats(t, &st);
	assert_int_equal(st.maps_read, 2);
	assert_int_equal(st.refreshes_limited, 99);
	proc_tracker__end_drain(t);
	assert_int_equal(proc_tracker__lookup(t, (uint32_t)pid, 7, 0x10, &m), -ENOENT);
	proc_tracker__stats(t, &st);
	assert_int_equal(st.maps_read, 3); /* a new drain: one more read */
	/* 25000 mappings cost three bounded reads, not minutes */
	assert_true(now_s() - t0 < 5.0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	proc_tracker__free(t);
	modules__free(mods);
}

/* Loaders forget a file when the registry evicts it; mapped files stay. */
static int forgets;

static void *detect_any(void *ctx, struct module *mod)
{
	(void)ctx;
	return mod;
}

static void attach_none(void *ctx, uint32_t tgid, uint64_t mm_id, const struct proc_mapping *maps,
			void *const *files, size_t n)
{
	(void)ctx, (void)tgid, (void)mm_id, (void)maps, (void)files, (void)n;
}

static void forget_one(void *ctx, struct module *mod, void *answer)
{
	(void)ctx;
	assert_ptr_equal(answer, mod);
	forgets++;
}

static void test_tracker_unrefs(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	struct proc_loader l = {
		.name = "t", .detect = detect_any, .attach = attach_none, .forget = forget_one
	};
	struct strata_proc_event e = { .type = PROC_EV_NEW,
				       .tgid = (uint32_t)getpid(),
				       .mm_id = 9 };
	struct module_stats ms;
	int id = proc_tracker__add_loader(t, &l);

	(void)state;
	assert_true(id >= 0);
	forgets = 0;
	assert_int_equal(proc_tracker__on_event(t, &e), 0);
	modules__stats(mods, &ms);
	assert_true(ms.modules > 0);
	for (int i = 0; i < 70; i++)
		proc_tracker__end_drain(t);
	modules__stats(mods, &ms);
	assert_int_equal(ms.evicted, 0); /* this process maps them all */
	e.type = PROC_EV_EXIT;
	assert_int_equal(proc_tracker__on_event(t, &e), 0);
	for (int i = 0; i < 70; i++)
		proc_tracker__end_drain(t);
	modules__stats(mods, &ms);
	assert_true(ms.evicted > 0);
	assert_int_equal(ms.modules, 1); /* the vDSO stays */
	assert_true(forgets > 0);
	proc_tracker__free(t);
	modules__free(mods);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_idle_eviction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_makes_room, setup, teardown),
		cmocka_unit_test(test_jit_churn),
		cmocka_unit_test(test_tracker_unrefs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
