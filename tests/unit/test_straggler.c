// SPDX-License-Identifier: Apache-2.0
/*
 * Straggler detection on synthetic jobs fed as the server gets them: one
 * batch per agent period (10 s, the DaemonSet's --period).  A clear
 * straggler is confirmed within 15 s of its onset wherever the onset falls
 * in the period, a marginal one within 60 s; a healthy job never, also
 * with one rank occasionally late and with a 2-s pause on every rank; a
 * straggler clears after it recovers (not before hold_ns); ranks whose
 * agent is down, clock skew inside the bound, batches of different nodes
 * arriving apart, process restarts, several communicators, full tables,
 * bad events.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/straggler.h"

#define MS 1000000LL
#define SEC 1000000000LL
#define T0 (1700000000 * SEC)
#define SHIP (10 * SEC) /* agent period: one batch per node every 10 s */
#define MAXR 16

/* A job: one communicator, its ranks, and the faults injected. */
struct sim {
	uint64_t comm;
	uint32_t nranks, first_proc, stride; /* rank r is process first_proc + r * stride */
	int64_t period, jitter;		     /* per collective; uniform 0..jitter per rank */
	int64_t t;			     /* base time of the next collective */
	uint64_t seq;
	uint32_t seed;
	int64_t lag[MAXR], skew[MAXR]; /* per process */
	uint64_t err[MAXR];
	bool down[MAXR];
	uint32_t pid[MAXR];
	/* noise: one process occasionally late; every rank pausing */
	uint32_t noisy, noisy_one_in;
	int64_t noisy_lag;
	uint32_t pause_every;
	int64_t pause;
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

static struct sim job(uint32_t nranks)
{
	return (struct sim){ .comm = 0xabcdef,
			     .nranks = nranks,
			     .stride = 1,
			     .period = 60 * MS,
			     .jitter = 1 * MS,
			     .t = T0,
			     .seed = 7,
			     .noisy = UINT32_MAX };
}

/* Appends one collective of s at ev[at..]; returns the new count. */
static size_t step(struct sim *s, struct diag_coll_event *ev, size_t at)
{
	for (uint32_t r = 0; r < s->nranks; r++) {
		uint32_t p = s->first_proc + r * s->stride;
		int64_t extra = s->lag[p];

		if (s->down[p])
			continue;
		if (p == s->noisy && rnd(&s->seed) % s->noisy_one_in == 0)
			extra += s->noisy_lag;
		ev[at++] = (struct diag_coll_event){
			.comm_hash = s->comm,
			.seq = s->seq,
			.rank = r,
			.nranks = s->nranks,
			.entry_ns = s->t + (int64_t)(rnd(&s->seed) % (uint64_t)(s->jitter + 1)) +
				    extra + s->skew[p],
			.clock_err_ns = s->err[p] ? s->err[p] : 100000,
			.pid = s->pid[p] ? s->pid[p] : 1000 + p,
			.node = node_of(p),
		};
	}
	s->seq++;
	s->t += s->period;
	if (s->pause_every && s->seq % s->pause_every == 0)
		s->t += s->pause; /* everyone checkpoints: no one is late */
	return at;
}

/* What a run saw: transitions and when the server had the batch that
 * decided them (the end of its agent period). */
struct seen {
	int confirms, clears, missing;
	int64_t first_confirm_ship, first_confirm_at, since, clear_ship;
	uint32_t rank, comm_rank_of_clear;
	struct straggler_transition last;
};

static void record(struct seen *w, const struct straggler_transition *tr, int n, int64_t ship)
{
	for (int i = 0; i < n; i++) {
		w->last = tr[i];
		if (tr[i].change == STRAGGLER_CONFIRM) {
			if (!w->confirms++) {
				w->first_confirm_ship = ship;
				w->first_confirm_at = tr[i].at_ns;
				w->since = tr[i].r.since_ns;
				w->rank = tr[i].r.rank;
			}
		} else {
			w->clears++;
			w->missing += tr[i].missing;
			w->clear_ship = ship;
		}
	}
}

/* Runs s until `until` (event time), one batch per SHIP boundary; fault(s,
 * t) may change s before each collective. */
static void run(struct straggler_detector *d, struct sim *s, int64_t until,
		void (*fault)(struct sim *, int64_t), struct seen *w)
{
	static struct diag_coll_event ev[MAXR * 4096];
	struct straggler_transition tr[16];
	size_t n = 0;
	int64_t ship = (s->t - T0) / SHIP * SHIP + T0 + SHIP;

	while (s->t < until) {
		if (fault)
			fault(s, s->t);
		n = step(s, ev, n);
		if (s->t >= ship || s->t >= until) {
			int k = straggler_detector__add(d, ev, n, tr, 16);

			assert_true(k >= 0);
			record(w, tr, k, ship);
			n = 0;
			ship += SHIP;
		}
	}
}

static int64_t onset_g;
static int64_t lag_g;
static uint32_t slow_g;

static void lag_from_onset(struct sim *s, int64_t t)
{
	s->lag[slow_g] = t >= onset_g ? lag_g : 0;
}

static void healthy_job_never_alerts(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_rank list[8];
	struct straggler_stats st;
	struct seen w = { 0 };
	struct sim s = job(8);

	run(d, &s, T0 + 3600 * SEC, NULL, &w); /* an hour: 60000 collectives */
	assert_int_equal(w.confirms, 0);
	assert_int_equal(straggler_detector__list(d, false, list, 8), 8);
	for (int i = 0; i < 8; i++) {
		assert_int_not_equal(list[i].state, STRAGGLER_CONFIRMED);
		assert_true(list[i].lag_seconds < 0.001);
		assert_true(list[i].period_seconds > 0.059 && list[i].period_seconds < 0.061);
		assert_true(list[i].evidence < 0.2);
	}
	straggler_detector__stats(d, &st);
	assert_int_equal(st.collectives, 60000);
	assert_int_equal(st.collectives_timeout, 0);
	assert_true(st.pending <= 8);
	straggler_detector__free(d);
}

static void noisy_healthy_job_never_alerts(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct seen w = { 0 };
	struct sim s = job(4);

	/* Rank 1 is 30 ms late (half a period) at one collective in 20; and
	 * every 500 collectives every rank stops 2 s for a checkpoint. */
	s.noisy = 1;
	s.noisy_one_in = 20;
	s.noisy_lag = 30 * MS;
	s.pause_every = 500;
	s.pause = 2 * SEC;
	run(d, &s, T0 + 3600 * SEC, NULL, &w);
	assert_int_equal(w.confirms, 0);
	straggler_detector__free(d);
}

/* Onset anywhere in the agent's period: the server decides on the first
 * batch that holds enough late collectives. */
static void clear_straggler_within_15s(void **state)
{
	static const int64_t offsets[] = { 100 * MS, 2 * SEC, 5 * SEC, 8 * SEC, 9900 * MS };

	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		struct straggler_detector *d = straggler_detector__new("job-a", NULL);
		struct seen w = { 0 };
		struct sim s = job(4);

		onset_g = T0 + 30 * SEC + offsets[i];
		lag_g = 40 * MS; /* 67% of the 60 ms period, last every time */
		slow_g = 2;
		run(d, &s, T0 + 90 * SEC, lag_from_onset, &w);
		assert_int_equal(w.confirms, 1);
		assert_int_equal(w.rank, 2);
		print_message("onset +%.1fs in the period: alert %.1f s after onset (decided "
			      "%.2f s after), since %+.2f s\n",
			      offsets[i] / 1e9, (w.first_confirm_ship - onset_g) / 1e9,
			      (w.first_confirm_at - onset_g) / 1e9, (w.since - onset_g) / 1e9);
		assert_true(w.first_confirm_ship - onset_g <= 15 * SEC);
		assert_true(w.first_confirm_at - onset_g <= 3 * SEC);
		assert_true(w.since >= onset_g - 200 * MS && w.since <= onset_g + 500 * MS);
		assert_string_equal(w.last.r.job, "job-a");
		assert_int_equal(w.last.r.pid, 1002);
		assert_string_equal(w.last.r.node, "node-0");
		assert_int_equal(w.last.r.nranks, 4);
		straggler_detector__free(d);
	}
}

/* 20% of the period, last 80% of the time: the other 20% rank 0 is later. */
static void lag_20pct_last_80pct(struct sim *s, int64_t t)
{
	s->lag[2] = t >= onset_g ? 12 * MS : 0;
	s->lag[0] = t >= onset_g && rnd(&s->seed) % 5 == 0 ? 20 * MS : 0;
}

static void straggler_last_80pct_within_15s(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct seen w = { 0 };
	struct sim s = job(4);

	onset_g = T0 + 25 * SEC + 7 * SEC; /* 3 s before the next batch */
	run(d, &s, T0 + 90 * SEC, lag_20pct_last_80pct, &w);
	assert_int_equal(w.confirms, 1);
	assert_int_equal(w.rank, 2);
	print_message("20%%/80%%: alert %.1f s after onset\n",
		      (w.first_confirm_ship - onset_g) / 1e9);
	assert_true(w.first_confirm_ship - onset_g <= 15 * SEC);
	straggler_detector__free(d);
}

/* 5% of the period, under per-rank jitter of 1.7% to 5% of the period. */
static void marginal_straggler_within_60s(void **state)
{
	for (int64_t jitter = 1 * MS; jitter <= 3 * MS; jitter += MS) {
		struct straggler_detector *d = straggler_detector__new("job", NULL);
		struct seen w = { 0 };
		struct sim s = job(4);

		s.jitter = jitter;
		onset_g = T0 + 20 * SEC + 5 * SEC;
		lag_g = 3 * MS;
		slow_g = 1;
		run(d, &s, T0 + 120 * SEC, lag_from_onset, &w);
		assert_int_equal(w.confirms, 1);
		assert_int_equal(w.rank, 1);
		print_message("marginal (5%%, jitter %.0f ms): alert %.1f s after onset, decided "
			      "%.1f s after\n",
			      jitter / 1e6, (w.first_confirm_ship - onset_g) / 1e9,
			      (w.first_confirm_at - onset_g) / 1e9);
		assert_true(w.first_confirm_ship - onset_g <= 60 * SEC);
		straggler_detector__free(d);
	}
}

static void lag_for_a_while(struct sim *s, int64_t t)
{
	s->lag[3] = t >= T0 + 20 * SEC && t < T0 + 40 * SEC ? 30 * MS : 0;
}

static void recovered_straggler_clears_after_hold(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_rank list[4];
	struct seen w = { 0 };
	struct sim s = job(4);

	run(d, &s, T0 + 200 * SEC, lag_for_a_while, &w);
	assert_int_equal(w.confirms, 1);
	assert_int_equal(w.clears, 1);
	assert_int_equal(w.missing, 0);
	assert_int_equal(w.last.change, STRAGGLER_CLEAR);
	assert_int_equal(w.last.r.rank, 3);
	/* confirmed ~20 s, held for 60 s after the decision, cleared then */
	assert_true(w.last.at_ns - w.first_confirm_at >= 60 * SEC);
	assert_true(w.last.at_ns - w.first_confirm_at <= 62 * SEC);
	assert_int_equal(straggler_detector__list(d, true, list, 4), 0);
	straggler_detector__free(d);
}

static void agent_down_then_straggler_missing(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_rank list[8];
	struct straggler_stats st;
	struct seen w = { 0 };
	struct sim s = job(8);

	s.down[2] = true; /* never reports: collectives wait pending_ns, then count */
	s.lag[6] = 30 * MS;
	run(d, &s, T0 + 60 * SEC, NULL, &w);
	assert_int_equal(w.confirms, 1);
	assert_int_equal(w.rank, 6);
	/* decided by partial collectives, 30 s of waiting later */
	assert_true(w.first_confirm_ship - T0 <= 50 * SEC);
	assert_int_equal(straggler_detector__list(d, false, list, 8), 7);
	straggler_detector__stats(d, &st);
	assert_true(st.collectives_timeout > 0);

	/* The straggler's own agent goes down: cleared as missing once its
	 * communicator went on for missing_ns without it; no one else blamed. */
	s.down[6] = true;
	run(d, &s, T0 + 200 * SEC, NULL, &w);
	assert_int_equal(w.confirms, 1);
	assert_int_equal(w.clears, 1);
	assert_int_equal(w.missing, 1);
	assert_int_equal(w.last.r.rank, 6);
	straggler_detector__free(d);
}

/* Two nodes' agents ship at different moments: node-1's batch for a period
 * arrives 4 s after node-0's.  Same verdicts. */
static void batches_of_two_nodes_arrive_apart(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	static struct diag_coll_event ev[8 * 4096], a[8 * 4096], b[8 * 4096];
	struct straggler_transition tr[16];
	struct seen w = { 0 };
	struct sim s = job(8);
	size_t held = 0;

	s.lag[5] = 20 * MS;
	for (int p = 0; p < 6; p++) {
		size_t n = 0, na = 0, nb;

		while (s.t < T0 + (p + 1) * SHIP)
			n = step(&s, ev, n);
		for (size_t i = 0; i < n; i++)
			if (!strcmp(ev[i].node, "node-0"))
				a[na++] = ev[i];
		/* node-1's previous period, then node-0's current one */
		int k = straggler_detector__add(d, b, held, tr, 16);
		record(&w, tr, k, T0 + p * SHIP + 4 * SEC);
		k = straggler_detector__add(d, a, na, tr, 16);
		record(&w, tr, k, T0 + (p + 1) * SHIP);
		nb = 0;
		for (size_t i = 0; i < n; i++)
			if (strcmp(ev[i].node, "node-0"))
				b[nb++] = ev[i];
		held = nb;
	}
	assert_int_equal(w.confirms, 1);
	assert_int_equal(w.rank, 5);
	assert_true(w.first_confirm_ship <= T0 + 15 * SEC);
	straggler_detector__free(d);
}

static void clock_skew_within_bound_never_counts(void **state)
{
	struct straggler_opts o = { .sz = sizeof(o), .min_lag_ratio = 0.001 };
	struct straggler_detector *d = straggler_detector__new("job", &o);
	struct straggler_rank list[4];
	struct seen w = { 0 };
	struct sim s = job(4);

	/* Rank 1's clock is 4 ms ahead, within its stated 5 ms bound. */
	s.skew[1] = 4 * MS;
	s.err[1] = 5 * MS;
	run(d, &s, T0 + 120 * SEC, NULL, &w);
	assert_int_equal(w.confirms, 0);
	straggler_detector__list(d, false, list, 4);
	for (int i = 0; i < 4; i++)
		assert_true(list[i].rank == 1 ? list[i].lag_seconds == 0
					      : list[i].lag_seconds < 0.001);
	straggler_detector__free(d);

	/* The same skew with a 1 ms bound is a real (measured) lag. */
	d = straggler_detector__new("job", &o);
	s = job(4);
	s.skew[1] = 4 * MS;
	s.err[1] = 1 * MS;
	run(d, &s, T0 + 30 * SEC, NULL, &w);
	assert_int_equal(w.confirms, 1);
	assert_int_equal(w.rank, 1);
	straggler_detector__free(d);
}

static void restart_of_the_straggler_process(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct seen w = { 0 };
	struct sim s = job(4);

	s.lag[3] = 20 * MS;
	run(d, &s, T0 + 30 * SEC, NULL, &w);
	assert_int_equal(w.confirms, 1);
	/* rank 3 restarts as a new, healthy process: the old one is cleared
	 * (gone), the new one starts with no evidence */
	s.pid[3] = 4242;
	s.lag[3] = 0;
	run(d, &s, T0 + 60 * SEC, NULL, &w);
	assert_int_equal(w.clears, 1);
	assert_int_equal(w.missing, 1);
	assert_int_equal(w.last.r.pid, 1003);
	assert_int_equal(w.confirms, 1);
	straggler_detector__free(d);
}

static void three_communicators(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	static struct diag_coll_event ev[16 * 2048];
	struct straggler_transition tr[16];
	struct straggler_rank list[16];
	/* 8 processes: world (all), even half (0,2,4,6), odd half (1,3,5,7). */
	struct sim wld = job(8), even = job(4), odd = job(4);
	struct seen w = { 0 };

	even.comm = 0x1111, even.stride = 2, even.first_proc = 0, even.seed = 3;
	odd.comm = 0x2222, odd.stride = 2, odd.first_proc = 1, odd.seed = 5;
	even.t += 20 * MS, odd.t += 40 * MS;
	wld.lag[5] = even.lag[5] = odd.lag[5] = 20 * MS; /* process 5 is slow */
	for (int p = 0; p < 3; p++) {
		size_t n = 0;

		while (wld.t < T0 + (p + 1) * SHIP) {
			n = step(&wld, ev, n);
			n = step(&even, ev, n);
			n = step(&odd, ev, n);
		}
		int k = straggler_detector__add(d, ev, n, tr, 16);
		assert_true(k >= 0);
		record(&w, tr, k, T0 + (p + 1) * SHIP);
	}
	assert_int_equal(w.confirms, 2);
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

/* Two processes claiming one rank of one collective are never merged. */
static void duplicate_rank_counted(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition tr[4];
	struct straggler_stats st;
	struct diag_coll_event ev[5];
	struct sim s = job(4);

	size_t n = step(&s, ev, 0);
	ev[n] = ev[0];
	ev[n].pid = 9999;
	ev[n].entry_ns += 10 * MS;
	assert_int_equal(straggler_detector__add(d, ev, n + 1, tr, 4), 0);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.events_duplicate, 1);
	assert_int_equal(st.collectives, 1);
	straggler_detector__free(d);
}

/*
 * One collective with as many ranks as a batch can carry, judged on a
 * thread with a small stack (the server judges on its HTTP workers): the
 * detector's working arrays were stack arrays of that size (14 MB for
 * 262144 arrivals) and such a batch crashed the server.
 */
#define HUGE_RANKS 200000u
static void *judge_huge(void *arg)
{
	struct straggler_detector *d = arg;
	struct diag_coll_event *ev = calloc(HUGE_RANKS, sizeof(*ev));
	struct straggler_transition tr[4];
	int r;

	if (!ev)
		return (void *)(intptr_t)-1;
	for (uint32_t i = 0; i < HUGE_RANKS; i++)
		ev[i] = (struct diag_coll_event){ .comm_hash = 7,
						  .seq = 1,
						  .rank = i,
						  .nranks = HUGE_RANKS,
						  .entry_ns = T0 + i,
						  .clock_err_ns = MS,
						  .pid = i + 1,
						  .node = "n" };
	r = straggler_detector__add(d, ev, HUGE_RANKS, tr, 4);
	free(ev);
	return (void *)(intptr_t)r;
}

static void huge_collective_on_a_small_stack(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_stats st;
	pthread_attr_t attr;
	pthread_t th;
	void *ret;

	assert_non_null(d);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	assert_int_equal(pthread_create(&th, &attr, judge_huge, d), 0);
	assert_int_equal(pthread_join(th, &ret), 0);
	pthread_attr_destroy(&attr);
	assert_int_equal((intptr_t)ret, 0);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.events, HUGE_RANKS);
	assert_int_equal(st.collectives, 1); /* complete: every rank is there */
	assert_int_equal(st.collectives_nomem, 0);
	straggler_detector__free(d);
}

static void partial_participation_and_expire(void **state)
{
	struct straggler_detector *d = straggler_detector__new("job", NULL);
	struct straggler_transition tr[8];
	struct straggler_stats st;
	struct seen w = { 0 };
	struct sim s = job(8);

	for (int p = 0; p < 8; p++)
		s.down[p] = p >= 3; /* 3 of 8: nothing judged */
	run(d, &s, T0 + 50 * SEC, NULL, &w);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.collectives, 0);
	assert_true(st.collectives_partial > 0);
	assert_true(st.pending > 0); /* the last 30 s still wait */

	/* 5 of 8 with a straggler: judged after the wait; then the job ends */
	s.down[3] = s.down[4] = false;
	s.lag[4] = 20 * MS;
	run(d, &s, T0 + 120 * SEC, NULL, &w);
	assert_int_equal(w.confirms, 1);
	assert_int_equal(w.rank, 4);
	int k = straggler_detector__expire(d, tr, 8);
	assert_int_equal(k, 1);
	assert_int_equal(tr[0].change, STRAGGLER_CLEAR);
	assert_true(tr[0].missing);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.pending, 0);
	straggler_detector__free(d);
}

static void full_tables_and_bad_events(void **state)
{
	struct straggler_opts o = { .sz = sizeof(o), .max_tracked = 3, .max_pending = 8 };
	struct straggler_detector *d = straggler_detector__new("job", &o);
	struct straggler_transition tr[4];
	struct straggler_stats st;
	struct diag_coll_event ev[64];
	struct sim s = job(4);
	size_t n = 0;

	for (int i = 0; i < 12; i++)
		n = step(&s, ev, n);
	ev[0].rank = 7;	  /* >= nranks */
	ev[1].nranks = 1; /* no collective of one */
	assert_true(straggler_detector__add(d, ev, n, tr, 4) >= 0);
	straggler_detector__stats(d, &st);
	assert_int_equal(st.events_bad, 2);
	assert_true(st.tracked_dropped > 0);
	assert_int_equal(st.tracked, 3);
	assert_true(st.pending_dropped > 0);
	straggler_detector__free(d);

	struct straggler_opts bad = { .sz = sizeof(bad), .margin = 2 };
	assert_null(straggler_detector__new("job", &bad));
	bad = (struct straggler_opts){ .sz = sizeof(bad), .arl0 = 0.5 };
	assert_null(straggler_detector__new("job", &bad));
	straggler_detector__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(healthy_job_never_alerts),
		cmocka_unit_test(noisy_healthy_job_never_alerts),
		cmocka_unit_test(clear_straggler_within_15s),
		cmocka_unit_test(straggler_last_80pct_within_15s),
		cmocka_unit_test(marginal_straggler_within_60s),
		cmocka_unit_test(recovered_straggler_clears_after_hold),
		cmocka_unit_test(agent_down_then_straggler_missing),
		cmocka_unit_test(batches_of_two_nodes_arrive_apart),
		cmocka_unit_test(clock_skew_within_bound_never_counts),
		cmocka_unit_test(restart_of_the_straggler_process),
		cmocka_unit_test(three_communicators),
		cmocka_unit_test(duplicate_rank_counted),
		cmocka_unit_test(partial_participation_and_expire),
		cmocka_unit_test(huge_collective_on_a_small_stack),
		cmocka_unit_test(full_tables_and_bad_events),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
