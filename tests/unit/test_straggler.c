// SPDX-License-Identifier: Apache-2.0
/*
 * Straggler detection on synthetic jobs: no fault, one slow rank (confirm,
 * then clear), a rank whose agent is down, clock skew inside the error
 * bound, sequence resets, three communicators, partial participation, a
 * process restart, a full state table and bad events.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "diagnose/straggler.h"

#define MS 1000000LL
#define SEC 1000000000LL
#define PERIOD (500 * MS) /* one collective every 500 ms */
#define PER_WINDOW 20	  /* collectives per 10 s window */

/* A job: which process is which rank of which communicator, and faults. */
struct sim {
	uint64_t comm;
	uint32_t nranks;
	uint32_t first_proc; /* rank r is process first_proc + r*stride */
	uint32_t stride;
	int64_t lag[16];  /* per process: extra entry delay */
	int64_t skew[16]; /* per process: clock offset */
	uint64_t err[16]; /* per process: clock error bound */
	bool down[16];	  /* per process: agent down (no events) */
	uint32_t pid[16];
	uint64_t seq0; /* first sequence number */
	uint32_t seed;
};

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static const char *node_of(uint32_t proc)
{
	static const char *const nodes[] = { "node-0", "node-1", "node-2", "node-3" };

	return nodes[proc / 4 % 4];
}

/* Appends one window's events of communicator sim (collectives k0..k0+n). */
static size_t gen(struct sim *s, struct diag_coll_event *ev, size_t at, int64_t t0, uint64_t k0,
		  uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		for (uint32_t r = 0; r < s->nranks; r++) {
			uint32_t p = s->first_proc + r * s->stride;

			if (s->down[p])
				continue;
			int64_t jitter = (int64_t)(rnd(&s->seed) % 400000); /* 0-0.4 ms */
			ev[at++] = (struct diag_coll_event){
				.comm_hash = s->comm,
				.seq = s->seq0 + k0 + k,
				.rank = r,
				.nranks = s->nranks,
				.entry_ns =
					t0 + (int64_t)k * PERIOD + jitter + s->lag[p] + s->skew[p],
				.clock_err_ns = s->err[p] ? s->err[p] : 100000,
				.pid = s->pid[p] ? s->pid[p] : 1000 + p,
				.node = node_of(p),
			};
		}
	}
	return at;
}

static struct sim world(uint32_t nranks)
{
	struct sim s = { .comm = 0xabcdef, .nranks = nranks, .stride = 1, .seed = 7 };

	return s;
}

/* Runs one window of sim; returns transitions (out has room for 8). */
static int run_window(struct straggler_detector *d, struct sim *s, int w,
		      struct straggler_transition *out)
{
	struct diag_coll_event ev[16 * PER_WINDOW];
	int64_t t0 = 1700000000 * SEC + (int64_t)w * 10 * SEC;
	size_t n = gen(s, ev, 0, t0, (uint64_t)w * PER_WINDOW, PER_WINDOW);

	return straggler_detector__window(d, ev, n, t0, t0 + 10 * SEC, out, 8);
}

static void no_fault_no_straggler(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[8];
	struct sim s = world(8);

	for (int w = 0; w < 10; w++)
		assert_int_equal(run_window(d, &s, w, out), 0);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 0);
	assert_int_equal(straggler_detector__list(d, false, list, 8), 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(list[i].state, STRAGGLER_OK);
		assert_true(list[i].lag_seconds < 0.001);
		assert_true(list[i].period_seconds > 0.49 && list[i].period_seconds < 0.51);
	}
	straggler_detector__free(d);
}

static void slow_rank_confirmed_then_cleared(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job-a", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[8];
	struct sim s = world(8);
	int w;

	s.lag[5] = 80 * MS;
	assert_int_equal(run_window(d, &s, 0, out), 0);
	assert_int_equal(straggler_detector__list(d, false, list, 8), 8);
	assert_int_equal(list[0].rank, 5);
	assert_int_equal(list[0].state, STRAGGLER_SUSPECT);
	assert_int_equal(run_window(d, &s, 1, out), 0);
	assert_int_equal(run_window(d, &s, 2, out), 1); /* third hot window */
	assert_int_equal(out[0].change, STRAGGLER_CONFIRM);
	assert_string_equal(out[0].r.job, "job-a");
	assert_int_equal(out[0].r.communicator, 0xabcdef);
	assert_int_equal(out[0].r.rank, 5);
	assert_int_equal(out[0].r.pid, 1005);
	assert_string_equal(out[0].r.node, "node-1");
	assert_true(out[0].r.lag_seconds > 0.078 && out[0].r.lag_seconds < 0.081);
	assert_true(out[0].r.last_fraction == 1.0);
	assert_int_equal(out[0].r.since_ns, 1700000000 * SEC); /* first hot window */
	assert_true(out[0].r.window_score > 0.15);
	for (w = 3; w < 6; w++)
		assert_int_equal(run_window(d, &s, w, out), 0); /* stays, no repeats */
	assert_int_equal(straggler_detector__list(d, true, list, 8), 1);

	s.lag[5] = 0; /* fault gone: clears after three cool windows */
	assert_int_equal(run_window(d, &s, w++, out), 0);
	assert_int_equal(run_window(d, &s, w++, out), 0);
	assert_int_equal(run_window(d, &s, w++, out), 1);
	assert_int_equal(out[0].change, STRAGGLER_CLEAR);
	assert_false(out[0].missing);
	assert_int_equal(out[0].r.rank, 5);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 0);
	straggler_detector__free(d);
}

/* Two slow ranks of similar lag: the longer-lagging one is last every time. */
static void small_lag_below_period_ratio_is_not_a_straggler(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct sim s = world(8);

	s.lag[3] = 10 * MS; /* 2% of the period: below the 5% default */
	for (int w = 0; w < 6; w++)
		assert_int_equal(run_window(d, &s, w, out), 0);
	straggler_detector__free(d);
}

static void missing_rank_agent_down(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[8];
	struct sim s = world(8);
	struct straggler_stats st;

	s.down[2] = true; /* never reports */
	s.lag[6] = 60 * MS;
	for (int w = 0; w < 3; w++)
		run_window(d, &s, w, out);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 1);
	assert_int_equal(list[0].rank, 6);
	assert_int_equal(straggler_detector__list(d, false, list, 8), 7); /* 2 never seen */

	/* Now the straggler's own agent goes down: it holds, then clears as
	 * missing after 10 silent windows, and no one else is blamed. */
	s.down[6] = true;
	for (int w = 3; w < 12; w++)
		assert_int_equal(run_window(d, &s, w, out), 0);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 1);
	assert_int_equal(run_window(d, &s, 12, out), 1);
	assert_int_equal(out[0].change, STRAGGLER_CLEAR);
	assert_true(out[0].missing);
	assert_int_equal(out[0].r.rank, 6);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.collectives_partial, 0); /* 6 of 8 still judged */
	straggler_detector__free(d);
}

static void clock_skew_within_bound_never_counts(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[8];
	struct sim s = world(4);

	/* Rank 1's clock is 4 ms ahead, within its stated 5 ms bound: it
	 * looks 4 ms late (above the 2 ms floor, 0.8% of the period with a
	 * tighter ratio) but must not count. */
	s.skew[1] = 4 * MS;
	s.err[1] = 5 * MS;
	struct straggler_opts o = { .sz = sizeof(o), .min_lag_ratio = 0.001 };
	straggler_detector__free(d);
	d = straggler_detector__new("job", &o);
	for (int w = 0; w < 6; w++)
		assert_int_equal(run_window(d, &s, w, out), 0);
	straggler_detector__list(d, false, list, 8);
	for (int i = 0; i < 4; i++)
		assert_true(list[i].lag_seconds == 0);

	/* The same skew with a 1 ms bound is a real (measured) lag. */
	straggler_detector__free(d);
	d = straggler_detector__new("job", &o);
	s.err[1] = 1 * MS;
	for (int w = 0; w < 3; w++)
		run_window(d, &s, w, out);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 1);
	assert_int_equal(list[0].rank, 1);
	straggler_detector__free(d);
}

static void seq_reset_within_window(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[8];
	struct straggler_stats st;
	struct sim s = world(4);
	struct diag_coll_event ev[4 * PER_WINDOW * 2];

	s.lag[2] = 100 * MS;
	for (int w = 0; w < 3; w++) {
		int64_t t0 = 1700000000 * SEC + (int64_t)w * 10 * SEC;
		size_t n;

		/* Each window: seq 100..109, then the job restarts its
		 * communicator (same hash, no instance number) at seq 0. */
		s.seq0 = 100;
		n = gen(&s, ev, 0, t0, 0, PER_WINDOW / 2);
		s.seq0 = 0;
		n = gen(&s, ev, n, t0 + 5 * SEC, 0, PER_WINDOW / 2);
		straggler_detector__window(d, ev, n, t0, t0 + 10 * SEC, out, 8);
	}
	straggler_detector__stats(d, &st);
	assert_int_equal(st.seq_resets, 3 * 4);
	assert_int_equal(st.events_misaligned, 0);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 1);
	assert_int_equal(list[0].rank, 2);
	assert_true(list[0].lag_seconds > 0.09 && list[0].lag_seconds < 0.11);
	straggler_detector__free(d);
}

/* A rank that restarts alone (its seq goes back to 0 40 s later) starts a
 * new epoch: those calls are not matched with the others' first calls
 * (which would make it 40 s late), they wait for peers that never come. */
static void lone_restart_is_misaligned_not_late(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_stats st;
	struct sim s = world(4);
	struct diag_coll_event ev[4 * PER_WINDOW * 4];
	size_t n = 0;
	int64_t t0 = 1700000000 * SEC;

	n = gen(&s, ev, n, t0, 0, PER_WINDOW);
	/* Rank 3 alone reports seq 0..19 again 40 s later (a stale replay). */
	for (size_t i = 0, m = n; i < m; i++)
		if (ev[i].rank == 3) {
			ev[n] = ev[i];
			ev[n].entry_ns += 40 * SEC;
			n++;
		}
	assert_int_equal(straggler_detector__window(d, ev, n, t0, t0 + 60 * SEC, out, 8), 0);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.seq_resets, 1);
	assert_int_equal(st.collectives, PER_WINDOW);
	assert_int_equal(st.collectives_partial, PER_WINDOW);
	assert_int_equal(st.events_used, 4 * PER_WINDOW);
	straggler_detector__free(d);
}

static void three_communicators(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[16];
	/* 8 processes: world (all), even half (0,2,4,6), odd half (1,3,5,7). */
	struct sim wld = world(8), even = world(4), odd = world(4);
	struct diag_coll_event ev[16 * PER_WINDOW];
	int confirms = 0;

	even.comm = 0x1111, even.stride = 2, even.first_proc = 0, even.seed = 3;
	odd.comm = 0x2222, odd.stride = 2, odd.first_proc = 1, odd.seed = 5;
	wld.lag[5] = even.lag[5] = odd.lag[5] = 70 * MS; /* process 5 is slow */
	for (int w = 0; w < 3; w++) {
		int64_t t0 = 1700000000 * SEC + (int64_t)w * 10 * SEC;
		size_t n = gen(&wld, ev, 0, t0, (uint64_t)w * PER_WINDOW, PER_WINDOW);

		/* The halves run between world collectives, at their own seqs. */
		n = gen(&even, ev, n, t0 + 100 * MS, (uint64_t)w * 5, 5);
		n = gen(&odd, ev, n, t0 + 200 * MS, (uint64_t)w * 5, 5);
		int k = straggler_detector__window(d, ev, n, t0, t0 + 10 * SEC, out, 8);
		assert_true(k >= 0);
		confirms += k;
	}
	assert_int_equal(confirms, 2);
	assert_int_equal(straggler_detector__list(d, true, list, 16), 2);
	/* Process 5 is world rank 5 and odd-half rank 2; the even half has
	 * no straggler. */
	for (int i = 0; i < 2; i++) {
		if (list[i].communicator == 0xabcdef)
			assert_int_equal(list[i].rank, 5);
		else {
			assert_int_equal(list[i].communicator, 0x2222);
			assert_int_equal(list[i].rank, 2);
		}
		assert_int_equal(list[i].pid, 1005);
	}
	assert_int_equal(straggler_detector__list(d, false, list, 16), 16);
	straggler_detector__free(d);
}

static void partial_participation(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[8];
	struct straggler_stats st;
	struct sim s = world(8);

	/* Only 3 of 8 ranks report: below half, nothing is judged. */
	for (int p = 3; p < 8; p++)
		s.down[p] = true;
	s.lag[1] = 100 * MS;
	for (int w = 0; w < 4; w++)
		assert_int_equal(run_window(d, &s, w, out), 0);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.collectives, 0);
	assert_int_equal(st.collectives_partial, 4 * PER_WINDOW);
	/* 5 of 8: judged again, and the slow rank is found. */
	s.down[3] = s.down[4] = false;
	for (int w = 4; w < 7; w++)
		run_window(d, &s, w, out);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 1);
	assert_int_equal(list[0].rank, 1);
	straggler_detector__free(d);
}

static void restart_resets_history(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition out[8];
	struct straggler_rank list[8];
	struct sim s = world(4);

	s.lag[0] = 100 * MS;
	run_window(d, &s, 0, out);
	run_window(d, &s, 1, out);
	s.pid[0] = 4242; /* rank 0 restarted as a new process */
	run_window(d, &s, 2, out);
	assert_int_equal(straggler_detector__list(d, true, list, 8), 0); /* streak restarted */
	run_window(d, &s, 3, out);
	assert_int_equal(run_window(d, &s, 4, out), 1);
	assert_int_equal(out[0].r.pid, 4242);
	straggler_detector__free(d);
}

static void full_table_and_bad_events(void **state)
{
	struct straggler_opts o = { .sz = sizeof(o), .max_tracked = 3 };
	struct straggler_detector *d = straggler_detector__new("job", &o);
	struct straggler_transition out[8];
	struct straggler_stats st;
	struct sim s = world(4);
	struct diag_coll_event bad[2] = {
		{ .comm_hash = 1, .rank = 4, .nranks = 4 },
		{ .comm_hash = 1, .rank = 0, .nranks = 0 },
	};

	run_window(d, &s, 0, out);
	assert_int_equal(straggler_detector__window(d, bad, 2, 0, 1, out, 8), 0);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.tracked, 3);
	assert_int_equal(st.tracked_dropped, PER_WINDOW);
	assert_int_equal(st.events_bad, 2);
	assert_int_equal(st.windows, 2);
	assert_null(straggler_detector__new("job", &(struct straggler_opts){ .ewma_alpha = 2 }));
	straggler_detector__free(d);
	straggler_detector__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_fault_no_straggler),
		cmocka_unit_test(slow_rank_confirmed_then_cleared),
		cmocka_unit_test(small_lag_below_period_ratio_is_not_a_straggler),
		cmocka_unit_test(missing_rank_agent_down),
		cmocka_unit_test(clock_skew_within_bound_never_counts),
		cmocka_unit_test(seq_reset_within_window),
		cmocka_unit_test(lone_restart_is_misaligned_not_late),
		cmocka_unit_test(three_communicators),
		cmocka_unit_test(partial_participation),
		cmocka_unit_test(restart_resets_history),
		cmocka_unit_test(full_table_and_bad_events),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
