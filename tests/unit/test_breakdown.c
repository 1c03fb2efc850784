// SPDX-License-Identifier: Apache-2.0
/*
 * Time breakdown: overlapping intervals resolved by precedence, exact sums,
 * clipping, counters scaled to the wall time; and the scheduler accounting
 * rules shared with bpf/sched.bpf.c (block reasons, categories, the API
 * layer stack the GPU uprobes drive).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "diagnose/breakdown.h"
#include "lib/enum_names.h"

/* the BPF side's rules: its types first (plain __u32, bpf/strata.h) */
#include <linux/types.h>

#include "bpf/strata.h"

#include "bpf/sched_account.h"

static uint64_t sum(const struct diag_breakdown *b)
{
	uint64_t s = 0;

	for (int c = 0; c < STRATA_TIME_MAX; c++)
		s += b->ns[c];
	return s;
}

static void overlapping_intervals_by_precedence(void **state)
{
	/* A training step from 0 to 1000: on CPU 0-300, a collective
	 * 300-800 during which the thread is blocked on a futex 350-700 and
	 * runnable 700-750, a CUDA call 850-900 inside a CPU slice 800-950,
	 * nothing known 950-1000. */
	const struct diag_interval iv[] = {
		{ 0, 300, STRATA_TIME_CPU },	     { 300, 800, STRATA_TIME_COLLECTIVE },
		{ 350, 700, STRATA_TIME_LOCK_WAIT }, { 700, 750, STRATA_TIME_RUNNABLE },
		{ 800, 950, STRATA_TIME_CPU },	     { 850, 900, STRATA_TIME_CUDA_API },
		{ -100, 20, STRATA_TIME_IO_WAIT },   /* clipped to 0-20, beats cpu */
		{ 990, 5000, STRATA_TIME_GPU_WAIT }, /* clipped to 990-1000 */
	};
	struct diag_breakdown b;

	assert_int_equal(diag_breakdown_intervals(iv, 8, 0, 1000, &b), 0);
	assert_int_equal(b.wall_ns, 1000);
	assert_int_equal(sum(&b), 1000);
	assert_int_equal(b.ns[STRATA_TIME_IO_WAIT], 20);
	assert_int_equal(b.ns[STRATA_TIME_CPU], 280 + 100);
	assert_int_equal(b.ns[STRATA_TIME_COLLECTIVE], 450); /* lock wait inside it */
	assert_int_equal(b.ns[STRATA_TIME_LOCK_WAIT], 0);
	assert_int_equal(b.ns[STRATA_TIME_RUNNABLE], 50);
	assert_int_equal(b.ns[STRATA_TIME_CUDA_API], 50);
	assert_int_equal(b.ns[STRATA_TIME_GPU_WAIT], 10);
	assert_int_equal(b.ns[STRATA_TIME_OTHER], 40);
}

static void empty_and_bad(void **state)
{
	struct diag_breakdown b;
	const struct diag_interval bad = { 0, 10, STRATA_TIME_MAX };

	assert_int_equal(diag_breakdown_intervals(NULL, 0, 5, 105, &b), 0);
	assert_int_equal(b.ns[STRATA_TIME_OTHER], 100);
	assert_int_equal(diag_breakdown_intervals(&bad, 1, 0, 100, &b), -EINVAL);
	assert_int_equal(diag_breakdown_intervals(NULL, 0, 100, 0, &b), -EINVAL);
	assert_string_equal(strata_time_cat_name(STRATA_TIME_GPU_WAIT), "gpu_wait");
}

static void counters_exact(void **state)
{
	uint64_t under[STRATA_TIME_MAX] = { [STRATA_TIME_CPU] = 600, [STRATA_TIME_RUNNABLE] = 100 };
	uint64_t over[STRATA_TIME_MAX] = {
		[STRATA_TIME_CPU] = 700, [STRATA_TIME_IO_WAIT] = 401, [STRATA_TIME_COLLECTIVE] = 2
	};
	struct diag_breakdown b;

	diag_breakdown_counters(under, 1000, &b);
	assert_int_equal(b.ns[STRATA_TIME_OTHER], 300);
	assert_int_equal(sum(&b), 1000);
	diag_breakdown_counters(over, 1000, &b);
	assert_int_equal(sum(&b), 1000);
	assert_true(b.ns[STRATA_TIME_CPU] >= 635 && b.ns[STRATA_TIME_CPU] <= 636);
	assert_int_equal(b.ns[STRATA_TIME_OTHER], 0);
}

static void block_reasons_and_categories(void **state)
{
	assert_int_equal(sched_block_reason(0x1, 0, 202), STRATA_OFF_LOCK); /* futex */
	assert_int_equal(sched_block_reason(0x1, 0, 449), STRATA_OFF_LOCK); /* futex_waitv */
	assert_int_equal(sched_block_reason(0x2, 0, 75), STRATA_OFF_IO);    /* fdatasync, D */
	assert_int_equal(sched_block_reason(0x102, 0, 0), STRATA_OFF_IO);   /* TASK_KILLABLE */
	assert_int_equal(sched_block_reason(0x1, 0, 0), STRATA_OFF_SLEEP);  /* read(pipe) */
	assert_int_equal(sched_block_reason(0x2, 1, 0), STRATA_OFF_FAULT);  /* in a fault */
	assert_int_equal(sched_block_reason(0x4, 0, -1), STRATA_OFF_OTHER); /* stopped */
	assert_int_equal(sched_offcpu_cat(1, STRATA_OFF_IO, STRATA_LAYER_COLLECTIVE),
			 STRATA_TIME_RUNNABLE);
	assert_int_equal(sched_offcpu_cat(0, STRATA_OFF_LOCK, STRATA_LAYER_GPU_WAIT),
			 STRATA_TIME_GPU_WAIT);
	assert_int_equal(sched_offcpu_cat(0, STRATA_OFF_LOCK, 0), STRATA_TIME_LOCK_WAIT);
	assert_int_equal(sched_offcpu_cat(0, STRATA_OFF_FAULT, 0), STRATA_TIME_IO_WAIT);
	assert_int_equal(sched_offcpu_cat(0, STRATA_OFF_SLEEP, 0), STRATA_TIME_OTHER);
}

static void api_layer_stack(void **state)
{
	struct strata_api_layer_state st;

	memset(&st, 0, sizeof(st));
	st.since_ns = 1000;				    /* switched in at 1000 */
	api_layer_push(&st, STRATA_LAYER_COLLECTIVE, 1100); /* 100 plain */
	api_layer_push(&st, STRATA_LAYER_CUDA_API, 1300);   /* nested: stays collective */
	assert_int_equal(api_layer_cur(&st), STRATA_LAYER_COLLECTIVE);
	api_layer_pop(&st, 1350);
	api_layer_pop(&st, 1400);
	assert_int_equal(api_layer_cur(&st), STRATA_LAYER_NONE);
	api_layer_push(&st, STRATA_LAYER_GPU_WAIT, 1450);
	api_layer_charge(&st, 1500);
	assert_int_equal(st.oncpu_ns[STRATA_LAYER_NONE], 150);
	assert_int_equal(st.oncpu_ns[STRATA_LAYER_COLLECTIVE], 300);
	assert_int_equal(st.oncpu_ns[STRATA_LAYER_GPU_WAIT], 50);
	/* Deeper than STRATA_LAYER_DEPTH: counted, and pops stay balanced. */
	for (int i = 0; i < STRATA_LAYER_DEPTH + 2; i++)
		api_layer_push(&st, STRATA_LAYER_CUDA_API, 1600);
	assert_int_equal(st.overflow, 3);
	for (int i = 0; i < STRATA_LAYER_DEPTH + 2; i++)
		api_layer_pop(&st, 1700);
	assert_int_equal(api_layer_cur(&st), STRATA_LAYER_GPU_WAIT);
	api_layer_pop(&st, 1800);
	api_layer_pop(&st, 1900); /* unbalanced exit: harmless */
	assert_int_equal(st.depth, 0);
	/* State created mid-slice (since 0): nothing charged from time 0. */
	memset(&st, 0, sizeof(st));
	api_layer_push(&st, STRATA_LAYER_CUDA_API, 5000);
	assert_int_equal(st.oncpu_ns[STRATA_LAYER_NONE], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(overlapping_intervals_by_precedence),
		cmocka_unit_test(empty_and_bad),
		cmocka_unit_test(counters_exact),
		cmocka_unit_test(block_reasons_and_categories),
		cmocka_unit_test(api_layer_stack),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
