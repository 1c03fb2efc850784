/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Time breakdown of one thread (a rank's main training thread): wall time
 * split into the categories of enum strata_time_cat so that they add up to
 * the wall time exactly (integer nanoseconds).  Two sources:
 *   - intervals from any layer (on-CPU slices, off-CPU waits, CUDA / NCCL
 *     calls), possibly overlapping: each instant goes to the covering
 *     interval of highest precedence (strata_time_rank, lib/enums.h: runnable >
 *     collective > gpu_wait > cuda_api > io_wait > lock_wait > cpu > other),
 *     and uncovered time is "other";
 *   - the scheduler layer's per-thread counters, already exclusive.
 * Pure computation: no I/O, no globals.
 */
#ifndef STRATA_DIAGNOSE_BREAKDOWN_H
#define STRATA_DIAGNOSE_BREAKDOWN_H

#include <stddef.h>
#include <stdint.h>

#include "lib/enums.h"

struct diag_interval {
	int64_t start_ns, end_ns; /* [start, end) */
	uint32_t cat;		  /* enum strata_time_cat */
};

struct diag_breakdown {
	uint64_t wall_ns;
	uint64_t ns[STRATA_TIME_MAX]; /* sums to wall_ns */
};

/* Intervals clipped to [start, end).  0, -EINVAL (end < start, bad
 * category) or -ENOMEM. */
int diag_breakdown_intervals(const struct diag_interval *iv, size_t n, int64_t start_ns,
			     int64_t end_ns, struct diag_breakdown *out);

/*
 * From exclusive per-category counters measured over wall_ns: time not
 * covered is "other"; when the counters exceed the wall time (an interval
 * straddling the window edge), they are scaled down so the total is exact.
 */
void diag_breakdown_counters(const uint64_t ns[STRATA_TIME_MAX], uint64_t wall_ns,
			     struct diag_breakdown *out);

#endif /* STRATA_DIAGNOSE_BREAKDOWN_H */
