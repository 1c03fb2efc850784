// SPDX-License-Identifier: Apache-2.0
/* Process tracker: /proc reads, exit-time VMA records, PID reuse, bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/proc/proc_tracker.h"

__attribute__((noinline)) int tracked_function(int x)
{
	return x * 3 + 1;
}

static struct strata_proc_event ev(uint32_t type, uint32_t tgid, uint64_t mm)
{
	struct strata_proc_event e = { .type = type, .tgid = tgid, .mm_id = mm };
	return e;
}

static void self_lookup_reads_proc(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	struct strata_proc_event e = ev(PROC_EV_NEW, getpid(), 0x1000);
	const struct proc_mapping *m;
	uint64_t ip = (uint64_t)(uintptr_t)&tracked_function;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = '\0';
	assert_int_equal(proc_tracker__on_event(t, &e), 0);
	assert_int_equal(proc_tracker__lookup(t, getpid(), 0x1000, ip, &m), 0);
	assert_string_equal(m->name, exe);
	assert_non_null(m->mod);
	assert_true(m->mod->fd >= 0);
	assert_true(m->mod->build_id_len > 0);
	assert_true(ip >= m->start && ip < m->end);
	/* An address in no mapping: -ENOENT, not a wrong mapping. */
	assert_int_equal(proc_tracker__lookup(t, getpid(), 0x1000, 16, &m), -ENOENT);
	/* the file the process maps at a path (a GPU frame's), by process:
	 * another process's file at the same path would be another module */
	assert_ptr_equal(proc_tracker__module_at(t, getpid(), exe), m->mod);
	assert_null(proc_tracker__module_at(t, getpid(), "/no/such/lib.so"));
	assert_null(proc_tracker__module_at(t, getpid() + 1, exe));
	proc_tracker__free(t);
	modules__free(mods);
}

/* Samples of a process that exited before /proc could be read are resolved
 * from the BPF exit records: (dev, ino, basename) is located on disk. */
static void exit_vmas_locate_files(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	const struct proc_mapping *m;
	struct proc_tracker_stats st;
	struct stat sb;
	uint32_t dead = 0x3ffffff0; /* no such pid */

	if (stat(libc, &sb))
		skip();
	struct strata_proc_event v = ev(PROC_EV_VMA, dead, 0x2000);
	v.start = 0x7f0000000000;
	v.end = 0x7f0000100000;
	v.pgoff = 0x28000;
	v.ino = sb.st_ino;
	v.dev = (major(sb.st_dev) << 20) | minor(sb.st_dev);
	snprintf(v.name, sizeof(v.name), "libc.so.6");
	assert_int_equal(proc_tracker__on_event(t, &v), 0);

	struct strata_proc_event bogus = v;
	bogus.start = 0x7f1000000000;
	bogus.end = 0x7f1000001000;
	bogus.ino = sb.st_ino + 12345; /* same name, other inode: must not match */
	assert_int_equal(proc_tracker__on_event(t, &bogus), 0);

	struct strata_proc_event x = ev(PROC_EV_EXIT, dead, 0x2000);
	assert_int_equal(proc_tracker__on_event(t, &x), 0);

	assert_int_equal(proc_tracker__lookup(t, dead, 0x2000, 0x7f0000000123, &m), 0);
	assert_non_null(m->mod);
	assert_int_equal(m->pgoff, 0x28000);
	assert_true(m->mod->ino == sb.st_ino);
	assert_int_equal(proc_tracker__lookup(t, dead, 0x2000, 0x7f1000000010, &m), 0);
	assert_null(m->mod); /* kept as a named mapping, never a wrong file */
	proc_tracker__stats(t, &st);
	assert_int_equal(st.exit_vmas, 2);
	assert_int_equal(st.exit_vmas_unlocated, 1);

	/* After the drain that follows its exit, the instance is gone. */
	proc_tracker__end_drain(t);
	assert_int_equal(proc_tracker__lookup(t, dead, 0x2000, 0x7f0000000123, &m), -ESRCH);
	proc_tracker__free(t);
	modules__free(mods);
}

/* Same tgid, new address space (exec or PID reuse): separate instances. */
static void pid_reuse_keeps_instances_apart(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	uint32_t dead = 0x3ffffff1;
	const struct proc_mapping *m;

	struct strata_proc_event a = ev(PROC_EV_VMA, dead, 0xa000);
	a.start = 0x400000;
	a.end = 0x401000;
	snprintf(a.name, sizeof(a.name), "old-program");
	struct strata_proc_event b = a;
	b.mm_id = 0xb000;
	snprintf(b.name, sizeof(b.name), "new-program");
	assert_int_equal(proc_tracker__on_event(t, &a), 0);
	assert_int_equal(proc_tracker__on_event(t, &b), 0);
	assert_int_equal(proc_tracker__lookup(t, dead, 0xa000, 0x400010, &m), 0);
	assert_string_equal(m->name, "old-program");
	assert_int_equal(proc_tracker__lookup(t, dead, 0xb000, 0x400010, &m), 0);
	assert_string_equal(m->name, "new-program");
	proc_tracker__free(t);
	modules__free(mods);
}

/* Full table: new instances are refused (counted); exited ones are freed
 * only after the drain that follows their exit, then room is back. */
static void bounded(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 2);
	struct proc_tracker_stats st;
	struct strata_proc_event v = ev(PROC_EV_VMA, 0, 1);

	v.start = 0x1000;
	v.end = 0x2000;
	for (uint32_t i = 0; i < 2; i++) {
		v.tgid = 0x3fff0000 + i;
		assert_int_equal(proc_tracker__on_event(t, &v), 0);
	}
	struct strata_proc_event x = ev(PROC_EV_EXIT, 0x3fff0000, 1);
	assert_int_equal(proc_tracker__on_event(t, &x), 0);
	v.tgid = 0x3fff0005;
	assert_int_equal(proc_tracker__on_event(t, &v), -ENOSPC); /* not evicted early */
	proc_tracker__end_drain(t);
	assert_int_equal(proc_tracker__on_event(t, &v), 0);
	proc_tracker__stats(t, &st);
	assert_int_equal(st.refused, 1);
	proc_tracker__free(t);
	modules__free(mods);
}

/* After exec, /proc shows the new image: the old address space keeps the
 * maps it had and is never refreshed from /proc again. */
static void exec_supersedes(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	struct strata_proc_event a = ev(PROC_EV_NEW, getpid(), 0xa000);
	struct strata_proc_event b = ev(PROC_EV_EXEC, getpid(), 0xb000);
	uint64_t ip = (uint64_t)(uintptr_t)&tracked_function;
	const struct proc_mapping *m;
	struct proc_tracker_stats st0, st1;

	assert_int_equal(proc_tracker__on_event(t, &a), 0);
	assert_int_equal(proc_tracker__on_event(t, &b), 0);
	assert_int_equal(proc_tracker__lookup(t, getpid(), 0xa000, ip, &m), 0);
	proc_tracker__stats(t, &st0);
	/* A miss in the old image must not re-read /proc (the new image). */
	assert_int_equal(proc_tracker__lookup(t, getpid(), 0xa000, 16, &m), -ENOENT);
	proc_tracker__stats(t, &st1);
	assert_int_equal(st1.maps_read, st0.maps_read);
	assert_int_equal(proc_tracker__lookup(t, getpid(), 0xb000, ip, &m), 0);
	proc_tracker__free(t);
	modules__free(mods);
}

/* PID reuse: an instance whose start time is not /proc's never gets /proc's
 * mappings. */
static void start_time_mismatch_rejects_proc(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	struct strata_proc_event a = ev(PROC_EV_NEW, getpid(), 0xc000);
	uint64_t ip = (uint64_t)(uintptr_t)&tracked_function;
	const struct proc_mapping *m;
	struct proc_tracker_stats st;

	a.start_ns = 1000000000ULL; /* started 1 s after boot: not us */
	assert_int_equal(proc_tracker__on_event(t, &a), 0);
	assert_int_not_equal(proc_tracker__lookup(t, getpid(), 0xc000, ip, &m), 0);
	proc_tracker__stats(t, &st);
	assert_int_equal(st.maps_read, 0);
	assert_true(st.maps_read_failed >= 1);
	proc_tracker__free(t);
	modules__free(mods);
}

/* An instance whose process is gone without an exit event is found by the
 * liveness check and freed after a later drain. */
static void dead_without_exit_event(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 1);
	struct strata_proc_event v = ev(PROC_EV_VMA, 0x3ffffff2, 7);
	struct proc_tracker_stats st;

	v.start = 0x1000;
	v.end = 0x2000;
	assert_int_equal(proc_tracker__on_event(t, &v), 0);
	for (int i = 0; i < 12; i++)
		proc_tracker__end_drain(t);
	proc_tracker__stats(t, &st);
	assert_int_equal(st.found_dead, 1);
	v.tgid = 0x3ffffff3; /* room again in a table of 1 */
	assert_int_equal(proc_tracker__on_event(t, &v), 0);
	proc_tracker__free(t);
	modules__free(mods);
}

/* Counts the loader attaches it gets, with the mappings of the last. */
struct attach_count {
	int n;
	size_t nmaps;
};

static void count_attach(void *ctx, uint32_t tgid, uint64_t mm_id, const struct proc_mapping *maps,
			 void *const *files, size_t n)
{
	struct attach_count *c = ctx;

	c->n++;
	c->nmaps = n;
}

/* Deferred attaches: a batch of events reads every process's maps first;
 * the loaders run after, once per address space however often its maps
 * were read meanwhile; a full queue attaches at once (counted); turning
 * deferral off runs what is queued. */
static void deferred_attach(void **state)
{
	struct module_registry *mods = modules__new(0);
	struct proc_tracker *t = proc_tracker__new(mods, 0);
	struct attach_count c = { 0 };
	struct proc_loader l = { .name = "count", .ctx = &c, .attach = count_attach };
	uint64_t ip = (uint64_t)(uintptr_t)&tracked_function;
	const struct proc_mapping *m;
	struct proc_tracker_stats st;
	struct strata_proc_event e;

	assert_true(proc_tracker__add_loader(t, &l) >= 0);
	proc_tracker__defer_attach(t, 1);
	e = ev(PROC_EV_NEW, getpid(), 0xd000);
	assert_int_equal(proc_tracker__on_event(t, &e), 0);
	assert_int_equal(proc_tracker__on_event(t, &e), 0); /* read again: queued once */
	e = ev(PROC_EV_NEW, getpid(), 0xe000);
	assert_int_equal(proc_tracker__on_event(t, &e), 0);
	assert_int_equal(c.n, 0);
	/* the maps are there before any attach */
	assert_int_equal(proc_tracker__lookup(t, getpid(), 0xe000, ip, &m), 0);
	assert_int_equal(proc_tracker__attach_next(t), 1);
	assert_int_equal(c.n, 1);
	assert_true(c.nmaps > 0);
	assert_int_equal(proc_tracker__attach_next(t), 1);
	assert_int_equal(proc_tracker__attach_next(t), 0);
	assert_int_equal(c.n, 2);
	proc_tracker__stats(t, &st);
	assert_int_equal(st.attach_deferred, 2);

	/* 1024 queued, the 1025th attached at once */
	for (uint64_t mm = 1; mm <= 1025; mm++) {
		e = ev(PROC_EV_NEW, getpid(), 0x100000 + mm);
		assert_int_equal(proc_tracker__on_event(t, &e), 0);
	}
	proc_tracker__stats(t, &st);
	assert_int_equal(st.attach_queue_full, 1);
	assert_int_equal(c.n, 3);
	proc_tracker__defer_attach(t, 0);
	assert_int_equal(c.n, 2 + 1025);
	/* not deferred: at once */
	e = ev(PROC_EV_NEW, getpid(), 0xf000);
	assert_int_equal(proc_tracker__on_event(t, &e), 0);
	assert_int_equal(c.n, 2 + 1026);
	proc_tracker__free(t);
	modules__free(mods);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(self_lookup_reads_proc),
		cmocka_unit_test(exit_vmas_locate_files),
		cmocka_unit_test(pid_reuse_keeps_instances_apart),
		cmocka_unit_test(bounded),
		cmocka_unit_test(exec_supersedes),
		cmocka_unit_test(start_time_mismatch_rejects_proc),
		cmocka_unit_test(dead_without_exit_event),
		cmocka_unit_test(deferred_attach),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
