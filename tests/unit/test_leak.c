// SPDX-License-Identifier: Apache-2.0
/*
 * GPU memory leak detection on synthetic allocation histories: a steady
 * leak (found, with rate and age), noisy growth (found), a cache that fills
 * and plateaus, a sawtooth working set and a small slow drift (not leaks),
 * freed stacks, silent processes, a full table and bad options.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "diagnose/leak.h"

#define SEC 1000000000LL
#define MIB (1ULL << 20)
#define T0 (1700000000 * SEC)

enum { LEAKY = 1, NOISY, CACHE, SAW, DRIFT, NSTACKS };

/* Outstanding bytes of each stack at window w (30 s windows). */
static uint64_t bytes_at(int stack, int w)
{
	switch (stack) {
	case LEAKY:
		return 512 * MIB + (uint64_t)w * 40 * MIB;
	case NOISY: /* +32 MiB a window, +-24 MiB of noise */
		return 1024 * MIB + (uint64_t)w * 32 * MIB + (w % 3) * 24 * MIB;
	case CACHE: /* fills, then flat */
		return (w < 4 ? (uint64_t)w : 4) * 256 * MIB;
	case SAW: /* activations: up and down every window */
		return w % 2 ? 4096 * MIB : 1024 * MIB;
	case DRIFT: /* 1 MiB a window: too small to matter */
		return 2048 * MIB + (uint64_t)w * MIB;
	}
	return 0;
}

static void feed(struct leak_tracker *t, int windows, uint32_t pid)
{
	static const char *const names[] = { "",
					     "train;step;new_buffer;cudaMalloc",
					     "train;cache_grad;cudaMalloc",
					     "init;cache;cudaMalloc",
					     "forward;activations;cudaMalloc",
					     "train;stats;cudaMalloc" };

	for (int w = 0; w < windows; w++) {
		struct diag_alloc_site s[NSTACKS];
		size_t n = 0;

		for (int k = 1; k < NSTACKS; k++)
			s[n++] = (struct diag_alloc_site){ .pid = pid,
							   .stack_id = (uint64_t)k,
							   .stack = names[k],
							   .outstanding_bytes = bytes_at(k, w) };
		assert_int_equal(leak_tracker__window(t, s, n, T0 + w * 30 * SEC), 0);
	}
}

static void finds_leaks_not_caches(void **state)
{
	struct leak_tracker *t = leak_tracker__new(NULL);
	struct diag_leak out[8];

	feed(t, 5, 77); /* too few windows for a verdict */
	assert_int_equal(leak_tracker__list(t, out, 8), 0);
	leak_tracker__free(t);

	t = leak_tracker__new(NULL);
	feed(t, 12, 77);
	assert_int_equal(leak_tracker__list(t, out, 8), 2);
	assert_int_equal(out[0].stack_id, LEAKY); /* fastest first */
	assert_string_equal(out[0].stack, "train;step;new_buffer;cudaMalloc");
	assert_int_equal(out[0].pid, 77);
	assert_true(out[0].growth_bytes_per_s > 40.0 * MIB / 30 * 0.99 &&
		    out[0].growth_bytes_per_s < 40.0 * MIB / 30 * 1.01);
	assert_true(out[0].age_seconds > 329 && out[0].age_seconds < 331); /* 11 windows */
	assert_int_equal(out[0].outstanding_bytes, 512 * MIB + 11 * 40 * MIB);
	assert_true(out[0].tau == 1.0);
	assert_int_equal(out[1].stack_id, NOISY);
	assert_true(out[1].tau >= 0.8 && out[1].tau < 1.0);
	leak_tracker__free(t);
}

static void freed_stack_and_silent_process(void **state)
{
	struct leak_tracker *t = leak_tracker__new(NULL);
	struct diag_leak out[8];
	struct leak_stats st;
	struct diag_alloc_site other = { .pid = 88, .stack_id = 9, .outstanding_bytes = MIB };

	feed(t, 8, 77);
	assert_int_equal(leak_tracker__list(t, out, 8), 2);
	/* pid 77 reports nothing for a while (agent down): history holds. */
	for (int w = 8; w < 12; w++)
		leak_tracker__window(t, &other, 1, T0 + w * 30 * SEC);
	assert_int_equal(leak_tracker__list(t, out, 8), 2);
	/* pid 77 is back, everything freed but the cache: no leak. */
	struct diag_alloc_site cache = { .pid = 77, .stack_id = CACHE, .outstanding_bytes = MIB };
	for (int w = 12; w < 30; w++)
		leak_tracker__window(t, &cache, 1, T0 + w * 30 * SEC);
	assert_int_equal(leak_tracker__list(t, out, 8), 0);
	leak_tracker__stats(t, &st);
	assert_true(st.series_evicted >= 4); /* stacks at 0 for a whole history */
	assert_int_equal(st.windows, 30);
	leak_tracker__free(t);
}

static void full_table_and_bad_options(void **state)
{
	struct leak_opts o = { .sz = sizeof(o), .max_series = 2 };
	struct leak_tracker *t = leak_tracker__new(&o);
	struct leak_stats st;

	feed(t, 1, 77);
	leak_tracker__stats(t, &st);
	assert_int_equal(st.series, 2);
	assert_int_equal(st.series_dropped, NSTACKS - 1 - 2);
	leak_tracker__free(t);
	assert_null(leak_tracker__new(&(struct leak_opts){ .history = 65 }));
	assert_int_equal(errno, EINVAL);
	assert_null(leak_tracker__new(&(struct leak_opts){ .min_windows = 2 }));
	leak_tracker__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finds_leaks_not_caches),
		cmocka_unit_test(freed_stack_and_silent_process),
		cmocka_unit_test(full_table_and_bad_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
