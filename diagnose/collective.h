/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One collective, judged: the ranks that took part, their lag behind the
 * median arrival beyond what the clocks could explain, and which rank (if
 * any) was clearly the last.  The reference is the median entry time of
 * the ranks present, so neither the straggler nor missing ranks move it.
 * A lag counts only beyond the clock error bound of the rank's own clock
 * plus the median bound of the others; "clearly last" means later than
 * the runner-up by more than those bounds.  Arrivals further than
 * max_skew from the median are misaligned (a clock step, a mismatched
 * sequence), not late.
 */
#ifndef STRATA_DIAGNOSE_COLLECTIVE_H
#define STRATA_DIAGNOSE_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct coll_arrival {
	uint32_t rank;
	int64_t entry_ns;
	uint64_t clock_err_ns;
};

struct coll_lag {
	double lag_ns;	 /* beyond the clock bound, >= 0 */
	bool misaligned; /* further than max_skew from the median: no lag */
	bool last;	 /* clearly the last to arrive */
};

/*
 * Judges a[0..n) (distinct ranks, n >= 2): writes lag[i] for each arrival
 * and returns the median entry time.  scratch: n values of working space
 * (n is as large as an agent's batch makes it, never a stack array).
 */
int64_t collective_judge(const struct coll_arrival *a, size_t n, uint64_t max_skew_ns,
			 struct coll_lag *lag, int64_t *scratch);

#endif /* STRATA_DIAGNOSE_COLLECTIVE_H */
