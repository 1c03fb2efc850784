// SPDX-License-Identifier: Apache-2.0
/*
 * The GPU layer's retirement (agent/gpu/gpu_retire.c) on a layer built by
 * hand, without BPF: a node that runs short CUDA processes for a month
 * keeps only the rows of the living, and what it keeps is still right.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gpu/gpu_impl.h"

#define SEC 1000000000ULL
#define FRAMES_PER_PROC 40 /* distinct frames each process's stack has */

static struct gpu *layer_new(void)
{
	struct gpu *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	g->procs = calloc(GPU_MAX_PROCS, sizeof(*g->procs));
	assert_non_null(g->procs);
	g->data.frames = profile__new(1);
	g->res.out = g->data.frames;
	g->drains = 1; /* gpu__drain counts from its first drain */
	gpu_tables_init(g);
	return g;
}

static void layer_free(struct gpu *g)
{
	gpu_tables_fini(g);
	profile__free(g->data.frames);
	free(g->data.procs);
	free(g->prev_calls);
	free(g->retired);
	free(g->procs);
	free(g);
}

/* The name the layer's frames give frame k of process tgid's stack. */
static void frame_name(uint32_t tgid, uint32_t k, char *buf, size_t len)
{
	snprintf(buf, len, "fn_%u_%u", tgid, k);
}

/*
 * What a drain leaves for a process that made one launch from one stack:
 * its info, a call site with a kernel name, a tally and an error row, a
 * collective, a resolved stack of FRAMES_PER_PROC frames of its own, the
 * raw stack, and an outstanding allocation.
 */
static void add_process(struct gpu *g, uint32_t tgid, bool live)
{
	struct gpu_proc_info *pi;
	struct gpu_site_key sk = { .tgid = tgid, .api = 1, .stack_id = 1000 + tgid, .object = 7 };
	struct gpu_tally_key tk = { .tgid = tgid, .api = 1 };
	struct gpu_err_key ek = { .tgid = tgid, .api = 1 };
	struct gpu_coll_key ck = { .tgid = tgid };
	struct stack_key stk = { .tgid = tgid, .stack_id = sk.stack_id };
	struct func_key fk = { .tgid = tgid, .object = 7 };
	uint64_t raw_id = sk.stack_id;
	struct gpu_site *s;
	struct gpu_tally_row *t;
	struct stack_row *st;
	struct func_row *fr;
	struct raw_stack *raw;
	char name[64];
	int err = 0;

	g->data.procs = realloc(g->data.procs, (g->data.nprocs + 1) * sizeof(*pi));
	pi = &g->data.procs[g->data.nprocs++];
	*pi = (struct gpu_proc_info){ .tgid = tgid, .rank = -1 };
	if (live) {
		for (size_t i = 0; i < GPU_MAX_PROCS; i++)
			if (g->procs[i].state == PROC_FREE) {
				g->procs[i] =
					(struct gpu_proc){ .tgid = tgid, .state = PROC_TARGET };
				break;
			}
	}
	st = gpu_table__get(&g->stacks, &stk, &err);
	assert_non_null(st);
	st->s = (struct gpu_stack){ .tgid = tgid, .stack_id = stk.stack_id };
	st->s.frames = malloc(FRAMES_PER_PROC * sizeof(uint32_t));
	for (uint32_t k = 0; k < FRAMES_PER_PROC; k++) {
		struct profile_frame f = { .func = name, .module = "/lib/libtrain.so", .addr = k };

		frame_name(tgid, k, name, sizeof(name));
		st->s.frames[k] = (uint32_t)profile__intern_frame(g->data.frames, &f);
	}
	st->s.nframes = FRAMES_PER_PROC;
	fr = gpu_table__get(&g->funcs, &fk, &err);
	assert_non_null(fr);
	snprintf(name, sizeof(name), "kernel_of_%u", tgid);
	{
		struct profile_frame f = { .func = name, .module = "[kernel-name]" };
		int64_t fi = profile__intern_frame(g->data.frames, &f);

		fr->name = g->data.frames->frames[fi].func;
	}
	s = gpu_table__get(&g->sites, &sk, &err);
	assert_non_null(s);
	s->val.count = 5;
	s->kernel = fr->name;
	t = gpu_table__get(&g->tally, &tk, &err);
	assert_non_null(t);
	t->val.calls = tgid; /* told apart in prev_calls */
	assert_non_null(gpu_table__get(&g->errs, &ek, &err));
	assert_non_null(gpu_table__get(&g->colls, &ck, &err));
	raw = gpu_table__get(&g->raw_stacks, &raw_id, &err);
	assert_non_null(raw);
	raw->ips = calloc(1, sizeof(uint64_t));
	raw->len = 1;
	raw->used = g->drains;
	gpu_leaks__begin(&g->leaks, g->drains * SEC);
	assert_int_equal(gpu_leaks__add(&g->leaks, tgid, sk.stack_id, 4096, 1, false), 0);
	gpu_leaks__end(&g->leaks);
	/* the duty cycle's per-row counts follow the tally */
	g->prev_calls = realloc(g->prev_calls, g->tally.n * sizeof(*g->prev_calls));
	g->prev_calls[g->tally.n - 1] = tgid;
	g->nprev = g->tally.n;
}

/* The process exits at now_ns and its slot is freed at this drain (its
 * BPF entries purged: finish_exited()). */
static void exit_process(struct gpu *g, uint32_t tgid, uint64_t now_ns)
{
	for (size_t i = 0; i < g->data.nprocs; i++)
		if (g->data.procs[i].tgid == tgid) {
			g->data.procs[i].exited = true;
			g->data.procs[i].exit_ns = now_ns;
			g->data.procs[i].finished_drain = g->drains;
		}
	for (size_t i = 0; i < GPU_MAX_PROCS; i++)
		if (g->procs[i].tgid == tgid)
			g->procs[i].state = PROC_FREE;
}

/* Every row of tgid is as add_process left it, reached through the
 * tables' indexes (rebuilt) and the frames profile (maybe rebuilt). */
static void assert_process_whole(struct gpu *g, uint32_t tgid)
{
	struct gpu_site_key sk = { .tgid = tgid, .api = 1, .stack_id = 1000 + tgid, .object = 7 };
	struct gpu_tally_key tk = { .tgid = tgid, .api = 1 };
	struct stack_key stk = { .tgid = tgid, .stack_id = sk.stack_id };
	struct func_key fk = { .tgid = tgid, .object = 7 };
	const struct gpu_site *s = gpu_table__find(&g->sites, &sk);
	const struct gpu_tally_row *t = gpu_table__find(&g->tally, &tk);
	const struct stack_row *st = gpu_table__find(&g->stacks, &stk);
	const struct func_row *fr = gpu_table__find(&g->funcs, &fk);
	char want[64];

	assert_non_null(s);
	assert_non_null(t);
	assert_non_null(st);
	assert_non_null(fr);
	assert_int_equal(s->val.count, 5);
	assert_int_equal(t->val.calls, tgid);
	assert_int_equal(g->prev_calls[t - (const struct gpu_tally_row *)g->tally.rows], tgid);
	assert_int_equal(st->s.nframes, FRAMES_PER_PROC);
	for (uint32_t k = 0; k < FRAMES_PER_PROC; k++) {
		assert_true(st->s.frames[k] < g->data.frames->nframes);
		frame_name(tgid, k, want, sizeof(want));
		assert_string_equal(g->data.frames->frames[st->s.frames[k]].func, want);
	}
	snprintf(want, sizeof(want), "kernel_of_%u", tgid);
	assert_string_equal(fr->name, want);
	assert_ptr_equal(s->kernel, fr->name); /* into the live frames profile */
}

/*
 * A month in small: 3,000 short processes, two at a time, one batch
 * each, beside two training ranks that live throughout.  The tables hold
 * the living and the two most recent exits only, the frames profile is
 * rebuilt as it fills with the dead's frames, and the ranks' rows are
 * whole after every rebuild.  Before retirement the tables held all 3,000
 * and the frames 120,000.
 */
static void short_processes_leave_no_rows(void **state)
{
	struct gpu *g = layer_new();
	uint64_t now = 1000 * SEC, told = 0;
	uint32_t tgid = 10000;

	(void)state;
	add_process(g, 1, true);
	add_process(g, 2, true);
	for (int batch = 0; batch < 1500; batch++) {
		uint32_t a = tgid++, b = tgid++;

		g->drains++;
		add_process(g, a, true);
		add_process(g, b, true);
		exit_process(g, a, now);
		exit_process(g, b, now);
		now += SEC;
		/* gpu__calls_taken: the processes whose exit the previous
		 * batch told (before its time) are let go */
		if (told)
			gpu_retire(g, told);
		told = now;
		now += SEC;
		assert_true(g->data.nprocs <= 6);
		assert_true(g->sites.n <= 6 && g->stacks.n <= 6 && g->tally.n <= 6);
		assert_true(g->funcs.n <= 6 && g->errs.n <= 6 && g->colls.n <= 6);
		assert_true(g->leaks.groups.n <= 6);
		assert_true(g->nprev == g->tally.n);
		assert_true(g->data.frames->nframes < 2 * GPU_FRAMES_COMPACT_MIN);
		if (batch % 100 == 0) {
			assert_process_whole(g, 1);
			assert_process_whole(g, 2);
		}
	}
	assert_process_whole(g, 1);
	assert_process_whole(g, 2);
	assert_int_equal(g->procs_pruned, 2998);
	assert_true(g->frames_compacted >= 5);
	/* the batch builder is told which processes went, sorted */
	assert_int_equal(g->data.nretired, 2);
	assert_true(g->data.retired[0] < g->data.retired[1]);
	/* raw stacks: only those used in the last GPU_STACK_IDLE_DRAINS drains */
	assert_true(g->raw_stacks.n <= 2 * GPU_STACK_IDLE_DRAINS + 4);
	assert_true(g->stacks_retired > 2500);
	layer_free(g);
}

/* A pid reused by a live process is not retired with the dead one, nor
 * is a process that exited after the batch that would tell it. */
static void reused_and_recent_processes_stay(void **state)
{
	struct gpu *g = layer_new();

	(void)state;
	add_process(g, 43, true); /* first: 42's rows move down */
	add_process(g, 42, true);
	exit_process(g, 42, 5 * SEC);
	exit_process(g, 43, 5 * SEC);
	/* 42's pid is a new, live process's now */
	for (size_t i = 0; i < GPU_MAX_PROCS; i++)
		if (g->procs[i].state == PROC_FREE) {
			g->procs[i] = (struct gpu_proc){ .tgid = 42, .state = PROC_TARGET };
			break;
		}
	gpu_retire(g, 5 * SEC); /* exit not before the batch: not told yet */
	assert_int_equal(g->data.nretired, 0);
	assert_int_equal(g->sites.n, 2);
	g->drains++;
	gpu_retire(g, 6 * SEC);
	assert_int_equal(g->data.nretired, 1);
	assert_int_equal(g->data.retired[0], 43);
	assert_process_whole(g, 42);
	assert_int_equal(g->sites.n, 1);
	assert_int_equal(g->leaks.groups.n, 1);
	layer_free(g);
}

/*
 * A live process's raw stacks stay as long as it does, used or not: a
 * thread's call-site cache in BPF hands out a native stack's id without
 * copying the stack again, and a new Python stack over it makes a new pair
 * that needs it.  Once the process is let go they leave after
 * GPU_STACK_IDLE_DRAINS drains.
 */
static void raw_stacks_stay_with_their_process(void **state)
{
	struct gpu *g = layer_new();
	uint64_t id = 1042;

	(void)state;
	add_process(g, 42, true);
	for (int d = 0; d < 4 * GPU_STACK_IDLE_DRAINS; d++) {
		g->drains++;
		gpu_retire(g, SEC);
	}
	assert_non_null(gpu_table__find(&g->raw_stacks, &id));
	g->drains++;
	exit_process(g, 42, 2 * SEC);
	g->drains++;
	gpu_retire(g, 3 * SEC);
	assert_int_equal(g->data.nretired, 1);
	/* last used at the drain before: kept GPU_STACK_IDLE_DRAINS drains */
	for (int d = 0; d < GPU_STACK_IDLE_DRAINS - 4; d++) {
		g->drains++;
		gpu_retire(g, 3 * SEC);
	}
	assert_non_null(gpu_table__find(&g->raw_stacks, &id));
	for (int d = 0; d < 4; d++) {
		g->drains++;
		gpu_retire(g, 3 * SEC);
	}
	assert_null(gpu_table__find(&g->raw_stacks, &id));
	assert_int_equal(g->stacks_retired, 1);
	layer_free(g);
}

/* A process is let go only after a drain has passed since its slot was
 * freed: the batch builder must see its allocations leave the outstanding
 * set while it still knows the process exited (leaked at exit, not freed). */
static void let_go_a_drain_after_its_slot(void **state)
{
	struct gpu *g = layer_new();

	(void)state;
	add_process(g, 42, true);
	g->drains = 10;
	exit_process(g, 42, SEC);
	gpu_retire(g, 5 * SEC); /* told, but freed at this very drain */
	assert_int_equal(g->data.nretired, 0);
	assert_non_null(gpu_data__proc(&g->data, 42));
	g->drains++;
	gpu_retire(g, 5 * SEC);
	assert_int_equal(g->data.nretired, 1);
	assert_null(gpu_data__proc(&g->data, 42));
	layer_free(g);
}

void gpu_remember_procs(struct gpu *g); /* gpu_view.c, for gpu__drain */

/*
 * A pid with a slot for its exited image and one for the image it exec'd
 * (the new one first in slot order here): the process table describes the
 * live image, with its rank, whichever slot comes last.
 */
static void exec_successor_describes_the_pid(void **state)
{
	struct gpu *g = layer_new();
	const struct gpu_proc_info *pi;

	(void)state;
	g->procs[0] = (struct gpu_proc){ .tgid = 42, .state = PROC_TARGET };
	g->procs[0].info = (struct gpu_proc_info){ .tgid = 42, .rank = 2, .nccl_rank = 2 };
	g->procs[1] = (struct gpu_proc){ .tgid = 42, .state = PROC_EXITED };
	g->procs[1].info = (struct gpu_proc_info){ .tgid = 42, .rank = -1, .exited = true };
	gpu_remember_procs(g);
	assert_int_equal(g->data.nprocs, 1);
	pi = gpu_data__proc(&g->data, 42);
	assert_non_null(pi);
	assert_false(pi->exited);
	assert_int_equal(pi->rank, 2);
	/* the exited image finished: the live one stays as it is */
	g->procs[1].state = PROC_FREE;
	gpu_remember_procs(g);
	assert_int_equal(gpu_data__proc(&g->data, 42)->rank, 2);
	layer_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(short_processes_leave_no_rows),
		cmocka_unit_test(reused_and_recent_processes_stay),
		cmocka_unit_test(raw_stacks_stay_with_their_process),
		cmocka_unit_test(let_go_a_drain_after_its_slot),
		cmocka_unit_test(exec_successor_describes_the_pid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
