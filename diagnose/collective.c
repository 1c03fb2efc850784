// SPDX-License-Identifier: Apache-2.0
#include "diagnose/collective.h"

#include "diagnose/robust.h"

static double bound_of(uint64_t err_ns)
{
	return (double)(err_ns & INT64_MAX);
}

int64_t collective_judge(const struct coll_arrival *a, size_t n, uint64_t max_skew_ns,
			 struct coll_lag *lag, int64_t *tmp)
{
	int64_t median, err_med, t1 = INT64_MIN, t2 = INT64_MIN;
	size_t latest = 0;

	for (size_t i = 0; i < n; i++)
		tmp[i] = a[i].entry_ns;
	median = robust_median_i64(tmp, n);
	for (size_t i = 0; i < n; i++)
		tmp[i] = (int64_t)(a[i].clock_err_ns & INT64_MAX);
	err_med = robust_median_i64(tmp, n);

	for (size_t i = 0; i < n; i++) {
		double bound = bound_of(a[i].clock_err_ns) + (double)err_med;
		int64_t d;

		lag[i] = (struct coll_lag){ 0 };
		if (a[i].entry_ns > t1) {
			t2 = t1;
			t1 = a[i].entry_ns;
			latest = i;
		} else if (a[i].entry_ns > t2) {
			t2 = a[i].entry_ns;
		}
		/* Hostile timestamps: a difference that overflows is misaligned. */
		if (__builtin_sub_overflow(a[i].entry_ns, median, &d) || d == INT64_MIN ||
		    (uint64_t)(d < 0 ? -d : d) > max_skew_ns) {
			lag[i].misaligned = true;
			continue;
		}
		/* Only the part of the lag clocks cannot explain. */
		lag[i].lag_ns = (double)d > bound ? (double)d - bound : 0;
	}
	if (n >= 2 && t2 != INT64_MIN && !lag[latest].misaligned &&
	    (double)t1 - (double)t2 > bound_of(a[latest].clock_err_ns) + (double)err_med)
		lag[latest].last = true;
	return median;
}
