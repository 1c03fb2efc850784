// SPDX-License-Identifier: Apache-2.0
/*
 * Matching the ranks of recovered communicators by their collective streams
 * (diagnose/comm_align.c): the offset between two ranks' counts is found
 * from exit times, whatever the offset; streams whose exits do not single
 * out one offset by the margin (jitter of a period, clocks half a period
 * apart), pairs of different operations or sizes, too few collectives, a
 * rank missing or claimed twice: unknown, counted.  An aligned group's
 * calls get one hash and sequence numbers that agree across ranks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/comm_align.h"

#define MS 1000000LL
#define PERIOD (60 * MS)
#define T0 (1700000000LL * 1000 * MS)

static uint64_t rng = 88172645463325252ULL;

static int64_t noise(int64_t amp) /* uniform in [-amp, amp] */
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return amp ? (int64_t)(rng % (uint64_t)(2 * amp + 1)) - amp : 0;
}

/* Collective c (of the job) on a rank whose agent numbered collective
 * first as 0: seq c - first; exits at T0 + c * PERIOD + jitter + skew. */
static struct comm_align_call call(int64_t c, int64_t first, int64_t jitter, int64_t skew)
{
	int64_t exit = T0 + c * PERIOD + noise(jitter) + skew;

	return (struct comm_align_call){ .seq = (uint64_t)(c - first),
					 .entry_ns = exit - 5 * MS,
					 .exit_ns = exit,
					 .bytes = 4096,
					 .op = 1 };
}

static size_t stream(struct comm_align_call *out, int64_t from, int64_t n, int64_t first,
		     int64_t jitter, int64_t skew)
{
	for (int64_t i = 0; i < n; i++)
		out[i] = call(from + i, first, jitter, skew);
	return (size_t)n;
}

static const struct comm_align_opts OPTS = {
	.sz = sizeof(OPTS), .window = 512, .min_pairs = 32, .margin = 8
};

static void finds_the_offset_whatever_it_is(void **state)
{
	static const int64_t firsts[] = { 0, 1, 7, 250, 100000 };
	struct comm_align_call a[200], b[200];

	for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		int64_t k = -1;
		/* a numbered from collective 1000, b from 1000 - firsts[i] + 3 */
		size_t na = stream(a, 1000, 200, 1000, 1 * MS, 0);
		size_t nb = stream(b, 1050, 200, 1003 - firsts[i], 1 * MS, 0);

		assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_OK);
		/* b's seq of collective c is c - (1003 - f); a's is c - 1000 */
		assert_int_equal(k, firsts[i] - 3);
		assert_int_equal(comm_align__match(b, nb, a, na, &OPTS, &k), COMM_ALIGN_OK);
		assert_int_equal(k, 3 - firsts[i]);
	}
}

static void a_straggler_does_not_move_the_exits(void **state)
{
	struct comm_align_call a[300], b[300];
	size_t na = stream(a, 0, 300, 0, MS / 2, 0), nb = stream(b, 0, 300, -40, MS / 2, 0);
	int64_t k = 0;

	for (size_t i = 0; i < nb; i++)
		b[i].entry_ns -= 40 * MS; /* enters late everywhere: exits with the rest */
	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_OK);
	assert_int_equal(k, 40);
}

static void jitter_of_a_period_is_ambiguous(void **state)
{
	struct comm_align_call a[300], b[300];
	size_t na = stream(a, 0, 300, 0, PERIOD, 0), nb = stream(b, 0, 300, -10, PERIOD, 0);
	int64_t k = 0;

	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_AMBIGUOUS);
}

static void clocks_half_a_period_apart_are_ambiguous(void **state)
{
	struct comm_align_call a[300], b[300];
	size_t na = stream(a, 0, 300, 0, MS / 10, 0);
	size_t nb = stream(b, 0, 300, -10, MS / 10, PERIOD / 2);
	int64_t k = 0;

	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_AMBIGUOUS);
	/* a tenth of a period of skew: still one clear offset */
	nb = stream(b, 0, 300, -10, MS / 10, PERIOD / 10);
	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_OK);
	assert_int_equal(k, 10);
}

static void different_operations_or_sizes_mismatch(void **state)
{
	struct comm_align_call a[300], b[300];
	size_t na = stream(a, 0, 300, 0, MS, 0), nb = stream(b, 0, 300, -5, MS, 0);
	int64_t k = 0;

	b[100].bytes = 8192;
	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_MISMATCH);
	b[100].bytes = 4096;
	b[200].op = 2;
	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_MISMATCH);
}

static void too_few_collectives_or_no_overlap_is_short(void **state)
{
	struct comm_align_call a[300], b[300];
	int64_t k = 0;
	size_t na = stream(a, 0, 20, 0, MS, 0), nb = stream(b, 0, 20, -5, MS, 0);

	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_SHORT);
	na = stream(a, 0, 100, 0, MS, 0);
	nb = stream(b, 1000, 100, 5, MS, 0); /* other times: no pairs */
	assert_int_equal(comm_align__match(a, na, b, nb, &OPTS, &k), COMM_ALIGN_SHORT);
}

/* Four ranks, each numbered from its own first collective; rank 2 late. */
static void aligns_a_group_and_places_its_calls(void **state)
{
	static const int64_t first[4] = { 3, 0, 11, 5 };
	struct comm_align *a = comm_align__new(NULL);
	const struct diag_coll_event *out;
	struct comm_align_stats st;
	struct diag_coll_event ev;
	uint64_t seq_of_c100 = 0, hash = 0;
	size_t n;

	assert_non_null(a);
	for (int64_t c = 20; c < 120; c++)
		for (uint32_t r = 0; r < 4; r++) {
			struct comm_align_call x = call(c, first[r], MS / 2, 0);

			if (r == 2)
				x.entry_ns -= 40 * MS;
			assert_int_equal(
				comm_align__add(a, 1000 + r, r, 4, "node", 10 + r, &x, &ev), 0);
		}
	n = comm_align__try(a, 0, &out);
	assert_int_equal(n, 400);
	for (size_t i = 0; i < n; i++) {
		if (!hash)
			hash = out[i].comm_hash;
		assert_int_equal(out[i].comm_hash, hash);
		assert_int_equal(out[i].nranks, 4);
		assert_int_equal(out[i].pid, 10 + out[i].rank);
		assert_string_equal(out[i].node, "node");
	}
	for (size_t i = 0; i < n; i++) { /* collective 100: one seq on every rank */
		int64_t exit = out[i].entry_ns + (out[i].rank == 2 ? 45 : 5) * MS;
		int64_t c = (exit - T0 + PERIOD / 2) / PERIOD;

		if (c != 100)
			continue;
		if (!seq_of_c100)
			seq_of_c100 = out[i].seq;
		assert_int_equal(out[i].seq, seq_of_c100);
	}
	assert_true(seq_of_c100 > 0);
	/* from now on each call is placed at once, on the same numbering */
	for (uint32_t r = 0; r < 4; r++) {
		struct comm_align_call x = call(120, first[r], 0, 0);

		assert_int_equal(comm_align__add(a, 1000 + r, r, 4, "node", 10 + r, &x, &ev), 1);
		assert_int_equal(ev.seq, seq_of_c100 + 20);
		assert_int_equal(ev.comm_hash, hash);
	}
	comm_align__stats(a, &st);
	assert_int_equal(st.streams_aligned, 4);
	assert_int_equal(st.groups_aligned, 1);
	assert_int_equal(st.calls_released, 400);
	assert_int_equal(st.attempts[COMM_ALIGN_OK], 1);
	comm_align__free(a);
}

static void missing_or_doubled_ranks_stay_unknown(void **state)
{
	struct comm_align *a = comm_align__new(NULL);
	const struct diag_coll_event *out;
	struct comm_align_stats st;
	struct diag_coll_event ev;

	assert_non_null(a);
	for (int64_t c = 0; c < 100; c++)
		for (uint32_t r = 0; r < 3; r++) { /* rank 3's node has no agent */
			struct comm_align_call x = call(c, 0, MS / 2, 0);

			comm_align__add(a, 1000 + r, r, 4, "n", r, &x, &ev);
		}
	assert_int_equal(comm_align__try(a, 0, &out), 0);
	for (int64_t c = 0; c < 100; c++) /* two processes say rank 1 */
		for (uint32_t r = 3; r < 5; r++) {
			struct comm_align_call x = call(c, 0, MS / 2, 0);

			comm_align__add(a, 1000 + r, r == 4 ? 1 : r, 4, "n", r, &x, &ev);
		}
	assert_int_equal(comm_align__try(a, 0, &out), 0);
	comm_align__stats(a, &st);
	assert_int_equal(st.attempts[COMM_ALIGN_INCOMPLETE], 1);
	assert_int_equal(st.attempts[COMM_ALIGN_DUPLICATE], 1);
	assert_int_equal(st.groups_aligned, 0);
	assert_int_equal(st.calls_held, 500);
	comm_align__free(a);
}

static void bounded_tables(void **state)
{
	struct comm_align_opts o = { .sz = sizeof(o), .window = 64, .max_streams = 2 };
	struct comm_align *a = comm_align__new(&o);
	struct comm_align_call x = call(0, 0, 0, 0);
	const struct diag_coll_event *out;
	struct comm_align_stats st;
	struct diag_coll_event ev;

	assert_non_null(a);
	assert_int_equal(comm_align__add(a, 1, 0, 2, "n", 1, &x, &ev), 0);
	assert_int_equal(comm_align__add(a, 2, 1, 2, "n", 2, &x, &ev), 0);
	assert_int_equal(comm_align__add(a, 3, 1, 2, "n", 3, &x, &ev), -ENOSPC);
	assert_int_equal(comm_align__add(a, 1, 2, 2, "n", 1, &x, &ev), -EINVAL);
	for (int i = 1; i < 100; i++) {
		x = call(i, 0, 0, 0);
		comm_align__add(a, 1, 0, 2, "n", 1, &x, &ev);
	}
	/* stream 2 silent for more than 60 s of event time: forgotten */
	x = call(2000, 0, 0, 0);
	comm_align__add(a, 1, 0, 2, "n", 1, &x, &ev);
	comm_align__try(a, 0, &out);
	comm_align__stats(a, &st);
	assert_int_equal(st.streams_dropped, 1);
	assert_int_equal(st.streams_expired, 1);
	assert_int_equal(st.calls_lost, 100 - 64 + 1 + 1); /* window overflow + the expired one */
	comm_align__free(a);
}

/* A process that says another rank starts a new stream, without the old
 * one's calls (they were another rank's). */
static void a_rank_change_is_a_new_stream(void **state)
{
	struct comm_align *a = comm_align__new(NULL);
	struct comm_align_call x = call(0, 0, 0, 0);
	struct comm_align_stats st;
	struct diag_coll_event ev;

	assert_non_null(a);
	assert_int_equal(comm_align__add(a, 9, 0, 2, "n", 1, &x, &ev), 0);
	assert_int_equal(comm_align__add(a, 9, 1, 2, "n", 1, &x, &ev), 0);
	x.seq = 1ULL << 40; /* no agent counts that far: refused */
	assert_int_equal(comm_align__add(a, 9, 1, 2, "n", 1, &x, &ev), -EINVAL);
	comm_align__stats(a, &st);
	assert_int_equal(st.streams, 2);
	assert_int_equal(st.calls_lost, 1);
	assert_int_equal(st.calls_held, 2);
	comm_align__free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finds_the_offset_whatever_it_is),
		cmocka_unit_test(a_straggler_does_not_move_the_exits),
		cmocka_unit_test(jitter_of_a_period_is_ambiguous),
		cmocka_unit_test(clocks_half_a_period_apart_are_ambiguous),
		cmocka_unit_test(different_operations_or_sizes_mismatch),
		cmocka_unit_test(too_few_collectives_or_no_overlap_is_short),
		cmocka_unit_test(aligns_a_group_and_places_its_calls),
		cmocka_unit_test(missing_or_doubled_ranks_stay_unknown),
		cmocka_unit_test(bounded_tables),
		cmocka_unit_test(a_rank_change_is_a_new_stream),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
