/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Robust statistics shared by the detectors: medians, MAD, Theil-Sen slope,
 * Mann-Kendall trend.  Outliers (the straggler itself, a leaking stack) must
 * not move the reference they are compared with, so no means anywhere.
 */
#ifndef STRATA_DIAGNOSE_ROBUST_H
#define STRATA_DIAGNOSE_ROBUST_H

#include <stddef.h>
#include <stdint.h>

/* Median of v[0..n) (reordered in place); 0 when n == 0.  For even n, the
 * mean of the two middle values. */
double robust_median(double *v, size_t n);

/* Median absolute deviation from med of v[0..n) (v is overwritten). */
double robust_mad(double *v, size_t n, double med);

/* Same for signed 64-bit integers (nanosecond timestamps): the lower
 * middle value for even n, so the result is one of the inputs. */
int64_t robust_median_i64(int64_t *v, size_t n);

/*
 * Robust z-score of x against a reference with median med and MAD mad:
 * (x - med) / max(1.4826 * mad, floor).  1.4826 makes the MAD a consistent
 * estimate of the standard deviation under normal noise; the floor keeps
 * identical peers (MAD 0) from turning a tiny difference into a huge score.
 */
double robust_z(double x, double med, double mad, double floor);

/* Theil-Sen slope of (t[i], y[i]): the median of pairwise slopes.  n <= 64.
 * Returns 0 for n < 2 or when all t are equal. */
double robust_theil_sen(const double *t, const double *y, size_t n);

/* Mann-Kendall tau of y[0..n) in order: (concordant - discordant) pairs over
 * all pairs, in [-1, 1]; 1 is a strictly increasing series.  n <= 64. */
double robust_kendall_tau(const double *y, size_t n);

#endif /* STRATA_DIAGNOSE_ROBUST_H */
