// SPDX-License-Identifier: Apache-2.0
/*
 * Replay harness for the BPF unwinder: bpf/unwind_core.h compiled in user
 * space, fed a snapshot of this process's own registers and stack taken at
 * known points, with tables compiled and loaded by the real loader into
 * real BPF maps.  The reference is libunwind's backtrace at the same point.
 * Needs root (BPF maps); skipped otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <bpf/bpf.h>
#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <linux/types.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/proc/modules.h"
#include "agent/proc/proc_tracker.h"
#include "agent/proc/unwind_loader.h"
#include "bpf/strata.h"

#define SNAP_MAX (256 * 1024)
#define MAX_FRAMES 64

/* Test-only state: the stubs below have no context argument. */
static struct {
	_Alignas(8) uint8_t mem[SNAP_MAX];
	uint64_t base, size;
	int rows_fd;
	uint64_t counts[UNWIND_ERR_MAX];
	uint64_t misses;
} replay;

static int unwind_hook_read(void *dst, __u32 size, __u64 addr)
{
	if (addr < replay.base || addr + size > replay.base + replay.size)
		return -1;
	memcpy(dst, replay.mem + (addr - replay.base), size);
	return 0;
}

static const struct unwind_row *unwind_hook_row(__u32 index)
{
	static struct unwind_row r;

	return bpf_map_lookup_elem(replay.rows_fd, &index, &r) ? NULL : &r;
}

static void unwind_hook_count(enum unwind_err e)
{
	replay.counts[e]++;
}

static void unwind_hook_miss(__u64 pc)
{
	replay.misses++;
}

#define UNWIND_INLINE static inline
#include "bpf/unwind_core.h"

/* What capture() saw: the caller's registers, a copy of the stack above
 * them, and libunwind's backtrace from the same point. */
struct capture {
	struct unwind_regs regs;
	uint64_t ref[MAX_FRAMES];
	int nref;
	int done;
};

static struct capture cap;

static uint64_t stack_end(void)
{
	char line[512];
	uint64_t lo, hi, end = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			end = hi;
	if (f)
		fclose(f);
	return end;
}

/* Copies raw stack memory: ASan's redzones in it are not errors here. */
__attribute__((no_sanitize("address"), noinline)) static void
copy_stack(uint64_t *dst, const uint64_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = ((volatile const uint64_t *)src)[i];
}

/* Built with frame pointers (like the whole test): the caller's state is
 * read off our own frame. */
__attribute__((noinline)) void capture_here(void)
{
	uint64_t *fp = __builtin_frame_address(0), end = stack_end();
	void *bt[MAX_FRAMES];

	if (cap.done)
		return;
	cap.regs.rip = fp[1];		   /* return address into the caller */
	cap.regs.rbp = fp[0];		   /* the caller's rbp, whatever it is */
	cap.regs.rsp = (uint64_t)(fp + 2); /* the caller's rsp after return */
	cap.regs.first = 0;
	replay.base = cap.regs.rsp - 8; /* with the return address's slot */
	replay.size =
		end > replay.base && end - replay.base < SNAP_MAX ? end - replay.base : SNAP_MAX;
	replay.size &= ~7ULL;
	copy_stack((uint64_t *)replay.mem, (const uint64_t *)replay.base, replay.size / 8);
	cap.nref = unw_backtrace(bt, MAX_FRAMES);
	for (int i = 0; i < cap.nref; i++)
		cap.ref[i] = (uint64_t)bt[i];
	cap.done = 1;
}

static int by_value_capture(const void *a, const void *b)
{
	capture_here();
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

struct env {
	struct module_registry *mods;
	struct proc_tracker *procs;
	struct unwind_loader *loader;
	int procs_fd;
};

static void loaded(void *ctx, uint32_t tgid, uint64_t mm_id, const struct proc_mapping *maps,
		   void *const *files, size_t n)
{
	struct env *e = ctx;

	assert_int_equal(unwind_loader__load(e->loader, mm_id, maps, n), 0);
}

static int setup(void **state)
{
	static struct env e;
	struct proc_loader l = { .name = "test", .ctx = &e, .attach = loaded };

	if (geteuid() != 0)
		return 0; /* tests skip */
	replay.rows_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "rows", 4, sizeof(struct unwind_row),
					1 << 20, NULL);
	e.procs_fd =
		bpf_map_create(BPF_MAP_TYPE_HASH, "procs", 8, sizeof(struct unwind_proc), 16, NULL);
	if (replay.rows_fd < 0 || e.procs_fd < 0)
		return -1;
	e.mods = modules__new(0);
	e.procs = proc_tracker__new(e.mods, 0);
	e.loader = unwind_loader__new(replay.rows_fd, 1 << 20, e.procs_fd);
	proc_tracker__add_loader(e.procs, &l);
	*state = &e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	if (!e)
		return 0;
	proc_tracker__free(e->procs);
	unwind_loader__free(e->loader);
	modules__free(e->mods);
	close(e->procs_fd);
	close(replay.rows_fd);
	return 0;
}

/* Unwinds the capture with this process's tables; compares with libunwind
 * frame by frame (libunwind's frame 0 is capture_here itself). */
static void replay_and_compare(struct env *e, const char *what, bool at_entry)
{
	const struct proc_mapping *m;
	struct strata_proc_event ev = { .type = PROC_EV_NEW, .tgid = getpid(), .mm_id = 42 };
	struct unwind_proc proc;
	uint64_t got[MAX_FRAMES];
	int n = 0;

	/* (Re)read our maps: the loader publishes tables for them. */
	proc_tracker__end_drain(e->procs);
	ev.mm_id = 42 + replay.base; /* a fresh instance per capture */
	assert_int_equal(proc_tracker__on_event(e->procs, &ev), 0);
	assert_int_equal(proc_tracker__lookup(e->procs, getpid(), ev.mm_id, cap.regs.rip, &m), 0);
	assert_int_equal(bpf_map_lookup_elem(e->procs_fd, &ev.mm_id, &proc), 0);

	struct unwind_regs r = cap.regs;
	memset(replay.counts, 0, sizeof(replay.counts));
	if (at_entry) {
		/* As a uprobe on capture_here's first instruction sees it: the
		 * return address at rsp, rbp still the caller's (here: not a
		 * frame pointer, the library keeps none).  The entry step
		 * alone must find the caller, and the walk goes on from there
		 * as from a return address. */
		struct unwind_regs entry = {
			.rip = (uint64_t)capture_here,
			.rsp = cap.regs.rsp - 8,
			.rbp = cap.regs.rbp,
			.first = 1,
			.entry = 1,
		};

		assert_int_equal(unwind_step(&entry, NULL), 0); /* no tables needed */
		assert_int_equal(entry.rip, cap.regs.rip);
		assert_int_equal(entry.rsp, cap.regs.rsp);
		assert_int_equal(entry.rbp, cap.regs.rbp);
		assert_int_equal(entry.ra_addr, cap.regs.rsp - 8);
		assert_int_equal(replay.counts[UNWIND_ENTRY_STEPS], 1);
		r = entry;
	}
	while (n < MAX_FRAMES) {
		got[n++] = r.rip;
		if (getenv("REPLAY_DEBUG")) {
			uint64_t pc = r.first ? r.rip : r.rip - 1;
			const struct unwind_map *um = unwind_find_map(&proc, pc);
			struct unwind_row rb;
			const struct unwind_row *row =
				um && um->row_first != UNWIND_NO_TABLE &&
						!unwind_find_row(um->row_first, um->row_count,
								 pc - um->bias, &rb)
					? &rb
					: NULL;
			fprintf(stderr,
				"  rip %#lx rsp %#lx rbp %#lx map %#lx bias %#lx vaddr %#lx row pc "
				"%#x cfa %u%+d ra %u%+d rbp %u%+d\n",
				(unsigned long)r.rip, (unsigned long)r.rsp, (unsigned long)r.rbp,
				um ? (unsigned long)um->start : 0UL,
				um ? (unsigned long)um->bias : 0UL,
				um ? (unsigned long)(pc - um->bias) : 0UL, row ? row->pc : 0,
				row ? row->cfa_type : 99, row ? row->cfa_off : 0,
				row ? row->ra_rule : 99, row ? row->ra_off : 0,
				row ? row->rbp_rule : 99, row ? row->rbp_off : 0);
		}
		if (unwind_step(&r, &proc) != 0)
			break;
	}
	int same = 0;
	while (same < n && same + 1 < cap.nref && got[same] == cap.ref[same + 1])
		same++;
	if (same < cap.nref - 1) {
		for (int i = 0; i < n || i + 1 < cap.nref; i++)
			fprintf(stderr, "%s frame %d: strata %#lx libunwind %#lx\n", what, i,
				i < n ? (unsigned long)got[i] : 0UL,
				i + 1 < cap.nref ? (unsigned long)cap.ref[i + 1] : 0UL);
	}
	fprintf(stderr, "%s: %d frames agree with libunwind (%d there); counters:", what, same,
		cap.nref - 1);
	for (int i = 0; i < UNWIND_ERR_MAX; i++)
		fprintf(stderr, " %d=%lu", i, (unsigned long)replay.counts[i]);
	fputc('\n', stderr);
	assert_true(same >= 4);
	assert_true(same >= cap.nref - 1); /* every frame libunwind found */
	assert_true(replay.counts[UNWIND_CFI_STEPS] > 0);
}

/* A library built without frame pointers, calling back into us. */
static void through_omit_fp_library(void **state)
{
	struct env *e = *state;
	char dir[] = "/tmp/strata-replay.XXXXXX", cmd[1024], so[512];
	void *h;
	void (*outer)(void (*)(void));

	if (!e)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "printf '%s' > %s/omit.c && cc -O2 -fomit-frame-pointer -shared -fPIC -o "
		 "%s/libomit.so %s/omit.c",
		 "__attribute__((noinline)) int inner(void (*cb)(void)) { cb(); return 3; }\\n"
		 "__attribute__((noinline)) int outer(void (*cb)(void)) { return inner(cb) * 5 + "
		 "1; }\\n",
		 dir, dir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(so, sizeof(so), "%s/libomit.so", dir);
	h = dlopen(so, RTLD_NOW);
	assert_non_null(h);
	*(void **)&outer = dlsym(h, "outer");
	assert_non_null(outer);
	cap.done = 0;
	outer(capture_here);
	assert_true(cap.done);
	replay_and_compare(e, "omit-fp library", false);
	replay_and_compare(e, "omit-fp library, from a function's entry", true);
	dlclose(h);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Debian's libc (no frame pointers) calling our comparator. */
static void through_libc_qsort(void **state)
{
	struct env *e = *state;
	int v[64];

	if (!e)
		skip();
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	cap.done = 0;
	qsort(v, 64, sizeof(v[0]), by_value_capture);
	assert_true(cap.done);
	replay_and_compare(e, "libc qsort", false);
}

/* Tables built on the builder thread (unwind_loader__async, here for every
 * file): the address space's entry has no rows until they are back, then
 * its mappings of built files have them (unwind_loader__collect), and the
 * walk through libc agrees with libunwind as before. */
static void async_tables(void **state)
{
	struct env *shared = *state, e;
	struct proc_loader l = { .name = "test", .ctx = &e, .attach = loaded };
	struct strata_proc_event ev = { .type = PROC_EV_NEW, .tgid = getpid(), .mm_id = 7 };
	struct unwind_loader_stats st;
	struct unwind_proc proc;
	struct pollfd p = { .events = POLLIN };
	uint32_t with_rows = 0;
	int v[64];

	if (!shared)
		skip();
	/* the shared maps, a loader of its own (the rows are rewritten) */
	e = (struct env){ .procs_fd = shared->procs_fd, .mods = modules__new(0) };
	e.procs = proc_tracker__new(e.mods, 0);
	e.loader = unwind_loader__new(replay.rows_fd, 1 << 20, e.procs_fd);
	proc_tracker__add_loader(e.procs, &l);
	p.fd = unwind_loader__async(e.loader, 0);
	assert_true(p.fd >= 0);

	assert_int_equal(proc_tracker__on_event(e.procs, &ev), 0);
	unwind_loader__stats(e.loader, &st);
	assert_true(st.tables_async > 0);
	assert_int_equal(st.tables_built, 0);
	assert_int_equal(bpf_map_lookup_elem(e.procs_fd, &ev.mm_id, &proc), 0);
	for (uint32_t i = 0; i < proc.nmaps; i++)
		assert_int_equal(proc.maps[i].row_first, UNWIND_NO_TABLE);
	for (int i = 0; i < 3000 && st.tables_built + st.tables_failed < st.tables_async; i++) {
		poll(&p, 1, 10);
		unwind_loader__collect(e.loader);
		unwind_loader__stats(e.loader, &st);
	}
	assert_int_equal(st.tables_built + st.tables_failed, st.tables_async);
	assert_int_equal(bpf_map_lookup_elem(e.procs_fd, &ev.mm_id, &proc), 0);
	for (uint32_t i = 0; i < proc.nmaps; i++)
		with_rows += proc.maps[i].row_first != UNWIND_NO_TABLE;
	assert_true(with_rows >= 2); /* this program and libc at least */

	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	cap.done = 0;
	qsort(v, 64, sizeof(v[0]), by_value_capture);
	assert_true(cap.done);
	replay_and_compare(&e, "libc qsort, tables built on the builder thread", false);
	proc_tracker__free(e.procs);
	unwind_loader__free(e.loader);
	modules__free(e.mods);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(through_omit_fp_library),
		cmocka_unit_test(through_libc_qsort),
		cmocka_unit_test(async_tables),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
