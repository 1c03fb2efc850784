// SPDX-License-Identifier: Apache-2.0
/*
 * The sequential test behind straggler confirmation: the designed numbers
 * for the default parameters (docs/diagnosis.md quotes them), and the
 * false-alarm bound checked by simulation at thresholds small enough to
 * measure: the mean run length to a false decision at p = p0 must be at
 * least arl0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>

#include "diagnose/seqtest.h"

static const struct seqtest_params defaults = { .margin = 0.05,
						.p1_min = 0.5,
						.p1_gap = 0.2,
						.p1_strong = 0.9,
						.arl0 = 1e12,
						.arl_clear = 1e6 };

static void design_numbers(void **state)
{
	struct seqtest_design d;

	assert_int_equal(seqtest_design(&d, 4, &defaults), 0);
	assert_true(fabs(d.p0 - 0.30) < 1e-12);
	assert_true(fabs(d.p1[0] - 0.50) < 1e-12);
	assert_true(fabs(d.p1[1] - 0.90) < 1e-12);
	assert_true(fabs(d.h - log(2e12)) < 1e-12);
	for (uint32_t n = 2; n <= 1024; n *= 2) {
		assert_int_equal(seqtest_design(&d, n, &defaults), 0);
		print_message("nranks %4u: p0 %.3f p1 %.3f/%.3f up %.3f/%.3f down %.3f/%.3f h %.2f "
			      "min_late %u\n",
			      n, d.p0, d.p1[0], d.p1[1], d.up[0], d.up[1], d.down[0], d.down[1],
			      d.h, seqtest_design__min_late(&d));
		assert_true(d.p1[0] > d.p0 && d.up[0] > 0 && d.down[0] < 0);
		assert_true(seqtest_design__min_late(&d) <= 60);
	}
	assert_int_equal(seqtest_design(&d, 1, &defaults), -EINVAL);
	struct seqtest_params bad = defaults;
	bad.arl0 = 1;
	assert_int_equal(seqtest_design(&d, 4, &bad), -EINVAL);
}

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* Mean collectives to a false decision at p = p0, for arl0 = 1000. */
static void false_alarm_bound_holds(void **state)
{
	struct seqtest_params p = defaults;
	struct seqtest_design d;
	const uint32_t sizes[] = { 2, 4, 8 };

	p.arl0 = 1000;
	for (size_t i = 0; i < 3; i++) {
		double total = 0;
		const int runs = 400;

		assert_int_equal(seqtest_design(&d, sizes[i], &p), 0);
		for (int r = 0; r < runs; r++) {
			struct seqtest t = { 0 };
			uint64_t k = 0;

			while (!seqtest__observe(&t, &d, uniform() < d.p0, (int64_t)k))
				k++;
			total += (double)k + 1;
		}
		print_message("nranks %u: mean run length at p0 %.0f (bound %.0f)\n", sizes[i],
			      total / runs, p.arl0);
		assert_true(total / runs >= p.arl0);
	}
}

/* A rank late at every collective decides in min_late; change point and
 * recovery evidence. */
static void decides_and_recovers(void **state)
{
	struct seqtest_design d;
	struct seqtest t = { 0 };
	int64_t since;
	uint32_t k;

	assert_int_equal(seqtest_design(&d, 4, &defaults), 0);
	for (k = 0; k < 100; k++)
		assert_false(seqtest__observe(&t, &d, false, k));
	for (k = 100; !seqtest__observe(&t, &d, true, k); k++)
		;
	assert_int_equal(k - 100 + 1, seqtest_design__min_late(&d));
	assert_true(seqtest__evidence(&t, &d, &since) >= 1);
	assert_int_equal(since, 99);
	assert_false(seqtest__healthy(&t, &d));
	for (k = 0; !seqtest__healthy(&t, &d); k++)
		seqtest__observe(&t, &d, false, 1000 + k);
	print_message("on time %u collectives to clear\n", k);
	assert_true(k >= 20 && k <= 60);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(design_numbers),
		cmocka_unit_test(false_alarm_bound_holds),
		cmocka_unit_test(decides_and_recovers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
