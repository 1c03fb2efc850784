// SPDX-License-Identifier: Apache-2.0
#include "diagnose/breakdown.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An interval edge: +1 opens a category, -1 closes it. */
struct edge {
	int64_t t;
	int32_t delta;
	uint32_t cat;
};

static int cmp_edge(const void *pa, const void *pb)
{
	const struct edge *a = pa, *b = pb;

	return (a->t > b->t) - (a->t < b->t);
}

/* The highest-precedence category open now, or other. */
static uint32_t top_cat(const int64_t *open)
{
	uint32_t best = STRATA_TIME_OTHER;

	for (uint32_t c = 0; c < STRATA_TIME_MAX; c++)
		if (open[c] > 0 && strata_time_rank(c) > strata_time_rank(best))
			best = c;
	return best;
}

int diag_breakdown_intervals(const struct diag_interval *iv, size_t n, int64_t start_ns,
			     int64_t end_ns, struct diag_breakdown *out)
{
	struct edge *e;
	int64_t open[STRATA_TIME_MAX] = { 0 }, t;
	size_t ne = 0;

	if (end_ns < start_ns)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->wall_ns = (uint64_t)end_ns - (uint64_t)start_ns; /* no signed overflow */
	e = malloc((2 * n + 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int64_t s = iv[i].start_ns > start_ns ? iv[i].start_ns : start_ns;
		int64_t f = iv[i].end_ns < end_ns ? iv[i].end_ns : end_ns;

		if (iv[i].cat >= STRATA_TIME_MAX) {
			free(e);
			return -EINVAL;
		}
		if (f <= s)
			continue;
		e[ne++] = (struct edge){ s, 1, iv[i].cat };
		e[ne++] = (struct edge){ f, -1, iv[i].cat };
	}
	qsort(e, ne, sizeof(*e), cmp_edge);
	/* Sweep: between consecutive edges the open set is constant.  The
	 * pieces partition [start, end), so the sum is the wall time. */
	t = start_ns;
	for (size_t i = 0; i < ne; i++) {
		if (e[i].t > t) {
			out->ns[top_cat(open)] += (uint64_t)e[i].t - (uint64_t)t;
			t = e[i].t;
		}
		open[e[i].cat] += e[i].delta;
	}
	out->ns[STRATA_TIME_OTHER] += (uint64_t)end_ns - (uint64_t)t;
	free(e);
	return 0;
}

void diag_breakdown_counters(const uint64_t ns[STRATA_TIME_MAX], uint64_t wall_ns,
			     struct diag_breakdown *out)
{
	unsigned __int128 sum = 0;
	uint64_t given = 0;
	uint32_t largest = 0;

	memset(out, 0, sizeof(*out));
	out->wall_ns = wall_ns;
	for (uint32_t c = 0; c < STRATA_TIME_MAX; c++)
		sum += ns[c];
	if (sum <= wall_ns) {
		memcpy(out->ns, ns, sizeof(out->ns));
		out->ns[STRATA_TIME_OTHER] += wall_ns - (uint64_t)sum;
		return;
	}
	/* Proportional, rounding down; the remainder goes to the largest
	 * category so the total is exact. */
	for (uint32_t c = 0; c < STRATA_TIME_MAX; c++) {
		out->ns[c] = (uint64_t)((unsigned __int128)ns[c] * wall_ns / sum);
		given += out->ns[c];
		if (ns[c] > ns[largest])
			largest = c;
	}
	out->ns[largest] += wall_ns - given;
}
