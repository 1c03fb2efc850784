// SPDX-License-Identifier: Apache-2.0
#include "diagnose/robust.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

double robust_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double robust_mad(double *v, size_t n, double med)
{
	for (size_t i = 0; i < n; i++)
		v[i] = fabs(v[i] - med);
	return robust_median(v, n);
}

int64_t robust_median_i64(int64_t *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_i64);
	return v[(n - 1) / 2];
}

double robust_z(double x, double med, double mad, double floor)
{
	double scale = 1.4826 * mad;

	if (scale < floor)
		scale = floor;
	if (scale <= 0)
		return x == med ? 0 : (x > med ? INFINITY : -INFINITY);
	return (x - med) / scale;
}

#define PAIRS_MAX (64 * 63 / 2)

double robust_theil_sen(const double *t, const double *y, size_t n)
{
	double slopes[PAIRS_MAX];
	size_t k = 0;

	if (n > 64)
		n = 64;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (t[j] != t[i])
				slopes[k++] = (y[j] - y[i]) / (t[j] - t[i]);
	return robust_median(slopes, k);
}

double robust_kendall_tau(const double *y, size_t n)
{
	long s = 0, pairs = 0;

	if (n > 64)
		n = 64;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++, pairs++)
			s += (y[j] > y[i]) - (y[j] < y[i]);
	return pairs ? (double)s / (double)pairs : 0;
}
