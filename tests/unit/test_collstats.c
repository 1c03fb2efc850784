// SPDX-License-Identifier: Apache-2.0
/*
 * Collective health per communicator (diagnose/collstats.c) on synthetic
 * calls with known sizes and injected delays: a 4-rank allreduce of 16 MiB
 * whose rank 2 enters 30 ms late, a broadcast of 4 KiB on time, an
 * allgather on a second communicator of 8 ranks with ragged entries;
 * every number (occurrences, observed, stall, aggregated stall, slack,
 * bytes, required / algorithm / bus bandwidth) against what the test
 * computes from the same times; partial, duplicate, out-of-window and
 * unfinished calls; size classes, bus factors, merging and a full table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/collstats.h"

#define MS 1000000LL
#define US 1000LL
#define T0 (1700000000LL * 1000 * MS)
#define MAXC 4096

struct gen {
	struct collstat_call c[MAXC];
	size_t n;
	/* what the test expects, per row key, computed from the same times */
	struct collstat_row want[8];
	size_t nwant;
};

/* One collective: rank r enters at t + entry[r], leaves at t + exit[r]. */
static void add_coll(struct gen *g, uint64_t comm, uint64_t seq, const char *op, uint64_t bytes,
		     int32_t nranks, int64_t t, const int64_t *entry, const int64_t *exit,
		     int want_it)
{
	int64_t first = INT64_MAX, last_entry = INT64_MIN, last_exit = INT64_MIN;
	uint64_t in_call = 0, slack = 0;
	struct collstat_row *w = NULL;

	for (int32_t r = 0; r < nranks; r++) {
		assert_true(g->n < MAXC);
		g->c[g->n++] = (struct collstat_call){ .comm_hash = comm,
						       .seq = seq,
						       .op = op,
						       .bytes = bytes,
						       .nranks = nranks,
						       .rank_id = 100 + (uint64_t)r,
						       .entry_ns = t + entry[r],
						       .exit_ns = t + exit[r] };
		first = entry[r] < first ? entry[r] : first;
		last_entry = entry[r] > last_entry ? entry[r] : last_entry;
		last_exit = exit[r] > last_exit ? exit[r] : last_exit;
	}
	if (!want_it)
		return;
	for (int32_t r = 0; r < nranks; r++) {
		in_call += (uint64_t)(exit[r] - entry[r]);
		slack += (uint64_t)(last_entry - entry[r]);
	}
	for (size_t i = 0; i < g->nwant && !w; i++)
		if (g->want[i].comm_hash == comm && !strcmp(g->want[i].op, op))
			w = &g->want[i];
	if (!w) {
		w = &g->want[g->nwant++];
		memset(w, 0, sizeof(*w));
		w->comm_hash = comm;
		strcpy(w->op, op);
		w->nranks = nranks;
		w->size_class = bytes; /* the test uses powers of two */
	}
	w->occurrences++;
	w->observed_ns += (uint64_t)(last_exit - first);
	/* exact here: the sums divide evenly by the rank count */
	w->stall_ns += in_call / (uint64_t)nranks;
	w->slack_ns += slack / (uint64_t)nranks;
	w->bytes += bytes;
}

static struct gen *make_job(void)
{
	struct gen *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	for (int k = 0; k < 10; k++) { /* rank 2 30 ms late, 4 ms transfer */
		int64_t entry[4] = { 0, 1 * MS, 30 * MS, 2 * MS };
		int64_t exit[4] = { 34 * MS, 34 * MS, 34 * MS, 34 * MS };

		add_coll(g, 0xaa, (uint64_t)k, "AllReduce", 16 << 20, 4, T0 + k * 100 * MS, entry,
			 exit, 1);
	}
	for (int k = 0; k < 20; k++) { /* on time, 200 us */
		int64_t entry[4] = { 0, 100 * US, 200 * US, 300 * US };
		int64_t exit[4] = { 500 * US, 500 * US, 500 * US, 500 * US };

		add_coll(g, 0xaa, 10 + (uint64_t)k, "Broadcast", 4096, 4,
			 T0 + 50 * MS + k * 40 * MS, entry, exit, 1);
	}
	for (int k = 0; k < 5; k++) { /* 8 ranks, ragged entries and exits */
		int64_t entry[8], exit[8];

		for (int r = 0; r < 8; r++) {
			entry[r] = (r * 3 % 8) * MS;
			exit[r] = 20 * MS + r * MS;
		}
		add_coll(g, 0xbb, (uint64_t)k, "AllGather", 1 << 20, 8, T0 + k * 200 * MS, entry,
			 exit, 1);
	}
	return g;
}

static void check_row(const struct collstat_row *got, const struct collstat_row *w)
{
	assert_int_equal(got->nranks, w->nranks);
	assert_int_equal(got->size_class, w->size_class);
	assert_int_equal(got->occurrences, w->occurrences);
	assert_int_equal(got->observed_ns, w->observed_ns);
	assert_int_equal(got->stall_ns, w->stall_ns);
	assert_int_equal(got->slack_ns, w->slack_ns);
	assert_int_equal(got->bytes, w->bytes);
}

static const struct collstat_row *find(const struct collstat_row *rows, size_t n, uint64_t comm,
				       const char *op)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].comm_hash == comm && !strcmp(rows[i].op, op))
			return &rows[i];
	fail_msg("no row %llx %s", (unsigned long long)comm, op);
	return NULL;
}

static void numbers_of_each_row(void **state)
{
	struct gen *g = make_job();
	struct collstat_row rows[8];
	struct collstat_counts k;
	struct collstat_rates rt;
	size_t n;

	(void)state;
	n = collstat_window(g->c, g->n, T0, T0 + 10000 * MS, rows, 8, &k);
	assert_int_equal(n, 3);
	assert_int_equal(k.collectives, 35);
	assert_int_equal(k.partial + k.outside + k.duplicates + k.no_exit + k.rows_dropped, 0);
	for (size_t i = 0; i < g->nwant; i++)
		check_row(find(rows, n, g->want[i].comm_hash, g->want[i].op), &g->want[i]);
	/* sorted by aggregated stall */
	for (size_t i = 1; i < n; i++)
		assert_true(rows[i - 1].stall_ns >= rows[i].stall_ns);
	assert_string_equal(rows[0].op, "AllReduce");

	/* the allreduce by hand: observed 34 ms; in call 34+33+4+32 = 103 ms
	 * over 4 ranks; slack 30+29+0+28 = 87 ms over 4 */
	const struct collstat_row *ar = find(rows, n, 0xaa, "AllReduce");
	assert_int_equal(ar->observed_ns, 10 * 34 * MS);
	assert_int_equal(ar->stall_ns, 10 * 25750 * US);
	assert_int_equal(ar->slack_ns, 10 * 21750 * US);
	assert_int_equal(ar->observed_max_ns, 34 * MS);
	collstat_rates(ar, &rt);
	assert_true(fabs(rt.observed_s - 0.034) < 1e-12);
	assert_true(fabs(rt.stall_s - 0.02575) < 1e-12);
	assert_true(fabs(rt.total_stall_s - 0.2575) < 1e-12);
	assert_true(fabs(rt.slack_s - 0.02175) < 1e-12);
	assert_true(fabs(rt.bytes - 16777216.0) < 1e-6);
	assert_true(fabs(rt.required_bps - 16777216.0 / 0.02175) < 1e-3);
	assert_true(fabs(rt.algo_bps - 16777216.0 / 0.034) < 1e-3);
	assert_true(fabs(rt.bus_factor - 1.5) < 1e-12);
	assert_true(fabs(rt.bus_bps - 1.5 * 16777216.0 / 0.034) < 1e-3);

	/* the allgather: 8 ranks, factor 7/8 */
	collstat_rates(find(rows, n, 0xbb, "AllGather"), &rt);
	assert_true(fabs(rt.bus_factor - 7.0 / 8.0) < 1e-12);
	/* entries (r*3 % 8) ms: 0,3,6,1,4,7,2,5 -> last 7 ms; exits 20..27 ms */
	assert_true(fabs(rt.observed_s - 0.027) < 1e-12);
	assert_true(fabs(rt.slack_s - 0.0035) < 1e-12);
	assert_true(fabs(rt.stall_s - (23.5 - 3.5) / 1e3) < 1e-12);
	free(g);
}

static void window_and_bad_calls(void **state)
{
	struct gen *g = make_job();
	struct collstat_row rows[8];
	struct collstat_counts k;
	size_t n, base;

	(void)state;
	base = g->n;
	/* a collective missing rank 3 (its agent down) */
	int64_t e[4] = { 0, 0, 0, 0 }, x[4] = { MS, MS, MS, MS };
	add_coll(g, 0xaa, 1000, "AllReduce", 16 << 20, 3, T0 + 5000 * MS, e, x, 0);
	for (size_t i = base; i < g->n; i++)
		g->c[i].nranks = 4;
	/* a duplicate of rank 0 at seq 0 (two processes claiming one rank) */
	g->c[g->n] = g->c[0];
	g->c[g->n].entry_ns += 1;
	g->n++;
	/* an unfinished call */
	add_coll(g, 0xcc, 0, "Reduce", 64, 2, T0 + 6000 * MS, e, x, 0);
	g->c[g->n - 1].exit_ns = g->c[g->n - 1].entry_ns - 1;
	/* nranks unknown: the ranks present count */
	add_coll(g, 0xdd, 0, "ReduceScatter", 3000, 2, T0 + 7000 * MS, e, x, 0);
	g->c[g->n - 1].nranks = g->c[g->n - 2].nranks = -1;

	/* the window [T0 + 50 ms, T0 + 10 s): allreduces 1..9, every
	 * broadcast, allgathers 1..4 */
	n = collstat_window(g->c, g->n, T0 + 50 * MS, T0 + 10000 * MS, rows, 8, &k);
	assert_int_equal(k.outside, 2); /* allreduce 0, allgather 0 */
	assert_int_equal(k.partial, 1);
	assert_int_equal(k.duplicates, 1);
	assert_int_equal(k.no_exit, 1);
	assert_int_equal(k.collectives, 9 + 20 + 4 + 1);
	assert_int_equal(n, 4);
	const struct collstat_row *rs = find(rows, n, 0xdd, "ReduceScatter");
	assert_int_equal(rs->nranks, 2);
	assert_int_equal(rs->size_class, 2048);
	assert_int_equal(find(rows, n, 0xaa, "AllReduce")->occurrences, 9);

	/* a full table: rows beyond are counted */
	n = collstat_window(g->c, g->n, T0, T0 + 10000 * MS, rows, 1, &k);
	assert_int_equal(n, 1);
	assert_true(k.rows_dropped > 0);
	free(g);
}

static void classes_factors_merge(void **state)
{
	struct collstat_row rows[2] = { 0 }, a = { .comm_hash = 1, .op = "AllReduce" }, b;
	size_t n = 0;

	(void)state;
	assert_int_equal(collstat_size_class(0), 0);
	assert_int_equal(collstat_size_class(1), 1);
	assert_int_equal(collstat_size_class(4095), 2048);
	assert_int_equal(collstat_size_class(4096), 4096);
	assert_int_equal(collstat_size_class(UINT64_MAX), 1ull << 63);
	assert_true(fabs(collstat_bus_factor("AllReduce", 4) - 1.5) < 1e-12);
	assert_true(fabs(collstat_bus_factor("AllReduce", 1) - 0.0) < 1e-12);
	assert_true(fabs(collstat_bus_factor("ReduceScatter", 4) - 0.75) < 1e-12);
	assert_true(fabs(collstat_bus_factor("AllGather", 2) - 0.5) < 1e-12);
	assert_true(fabs(collstat_bus_factor("AllToAll", 8) - 0.875) < 1e-12);
	assert_true(fabs(collstat_bus_factor("Broadcast", 8) - 1.0) < 1e-12);
	assert_true(fabs(collstat_bus_factor("Reduce", 8) - 1.0) < 1e-12);
	assert_true(fabs(collstat_bus_factor("Send", 2) - 1.0) < 1e-12);

	a.size_class = 1024;
	a.nranks = 4;
	a.occurrences = 2;
	a.observed_ns = 10;
	a.stall_ns = 6;
	a.slack_ns = 4;
	a.bytes = 2048;
	a.observed_max_ns = 6;
	b = a;
	b.observed_max_ns = 9;
	assert_int_equal(collstat_merge(rows, &n, 2, &a), 0);
	assert_int_equal(collstat_merge(rows, &n, 2, &b), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].occurrences, 4);
	assert_int_equal(rows[0].stall_ns, 12);
	assert_int_equal(rows[0].observed_max_ns, 9);
	b.size_class = 2048;
	assert_int_equal(collstat_merge(rows, &n, 2, &b), 0);
	b.nranks = 8;
	assert_int_equal(collstat_merge(rows, &n, 2, &b), -ENOSPC);
	collstat_sort(rows, n);
	assert_int_equal(rows[0].stall_ns, 12);

	/* no occurrences, no slack: rates stay 0, never inf */
	struct collstat_rates rt;
	memset(&a, 0, sizeof(a));
	collstat_rates(&a, &rt);
	assert_true(rt.required_bps == 0 && rt.algo_bps == 0 && rt.observed_s == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(numbers_of_each_row),
		cmocka_unit_test(window_and_bad_calls),
		cmocka_unit_test(classes_factors_merge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
