// SPDX-License-Identifier: Apache-2.0
/*
 * The windowed diagnosis engine over weeks: it keeps at most
 * max_jobs jobs, so it must free the ones that ended, or after 64 distinct
 * jobs since start new ones would never be diagnosed.  A fake store (jobs
 * that start, send data for a while and stop) and a fake clock drive it:
 * every window of every job is judged once, in order, over three weeks of
 * a new job every 30 minutes and over 100 short jobs in a row inside an
 * hour (the table fills, quiet jobs make room, and come back only with
 * newer data, from where they stopped); a table full
 * of active jobs drops the newcomer (counted) until one goes quiet.  A run
 * started by a query whose client has gone (or is past its deadline) is
 * not cut short: the run is everyone's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/diag_engine.h"

#define S 1000000000ull /* ns */
#define W (10 * S)	/* window */
#define MAXJ 1200

struct fake_job {
	char name[32];
	uint64_t start_ns, end_ns; /* data in [start, end) */
	uint32_t judged;	   /* windows the engine asked the store about */
	uint64_t next_ws;	   /* the window it should ask for next */
	int out_of_order;
};

struct fake_store {
	struct store base; /* first: the engine gets &base */
	struct fake_job jobs[MAXJ];
	size_t n;
	uint64_t now_ns;
	struct diag_engine *e; /* over this store, run on query only */
};

static int fake_jobs(struct store *s, const struct store_filter *f, store_job_fn fn, void *ctx)
{
	struct fake_store *fs = (struct fake_store *)s;

	for (size_t i = 0; i < fs->n; i++) {
		struct fake_job *j = &fs->jobs[i];
		uint64_t last = j->end_ns < fs->now_ns ? j->end_ns : fs->now_ns;
		struct store_job sj = { .job = j->name, .first_ns = j->start_ns, .last_ns = last };

		/* not started yet, or deleted by retention (72 h) */
		if (j->start_ns > fs->now_ns || last + 72 * 3600 * S < fs->now_ns ||
		    (f->job && strcmp(f->job, j->name)))
			continue;
		int err = fn(ctx, &sj);

		if (err)
			return err;
	}
	return 0;
}

static int fake_thread_times(struct store *s, const struct store_filter *f, store_thread_time_fn fn,
			     void *ctx)
{
	struct fake_store *fs = (struct fake_store *)s;
	uint64_t next_check = 0;

	if (store__read_over(&next_check)) /* as the backends' reads do */
		return -ETIMEDOUT;
	for (size_t i = 0; i < fs->n; i++) {
		struct fake_job *j = &fs->jobs[i];

		if (strcmp(f->job, j->name))
			continue;
		if (f->from_ns != j->next_ws)
			j->out_of_order = 1;
		j->next_ws = f->from_ns + W;
		j->judged++;
	}
	return 0;
}

static int fake_leaks(struct store *s, const struct store_filter *f, store_leak_fn fn, void *ctx)
{
	return 0;
}

/* no collectives: the windows have no collective health to store */
static int fake_events(struct store *s, const struct store_filter *f, uint32_t kinds,
		       uint32_t limit, int *truncated, store_event_fn fn, void *ctx)
{
	return 0;
}

static const struct store_ops fake_ops = {
	.name = "fake",
	.jobs = fake_jobs,
	.thread_times = fake_thread_times,
	.leaks = fake_leaks,
	.events = fake_events,
};

static struct fake_store *fake_new(void)
{
	struct fake_store *fs = calloc(1, sizeof(*fs));
	struct diag_engine_opts o = { .sz = sizeof(o), .window_ns = W, .interval_ns = UINT64_MAX };

	assert_non_null(fs);
	fs->base.ops = &fake_ops;
	fs->e = diag_engine__new(&fs->base, &o);
	assert_non_null(fs->e);
	return fs;
}

static void fake_free(struct fake_store *fs)
{
	diag_engine__free(fs->e);
	free(fs);
}

static void add_job(struct fake_store *fs, uint64_t start_ns, uint64_t dur_ns)
{
	struct fake_job *j = &fs->jobs[fs->n];

	assert_true(fs->n < MAXJ);
	snprintf(j->name, sizeof(j->name), "job-%zu", fs->n);
	j->start_ns = start_ns;
	j->end_ns = start_ns + dur_ns;
	j->next_ws = start_ns / W * W;
	fs->n++;
}

/* Windows a job's data touches: [start / W, end / W] (the engine judges up
 * to the window after its last data). */
static uint32_t windows_of(const struct fake_job *j)
{
	return (uint32_t)(j->end_ns / W - j->start_ns / W + 2);
}

/* Runs the engine every step_ns from t0 to t1. */
static void drive(struct diag_engine *e, struct fake_store *fs, uint64_t t0, uint64_t t1,
		  uint64_t step_ns, uint32_t *max_tracked)
{
	struct diag_engine_stats st;

	for (fs->now_ns = t0; fs->now_ns <= t1; fs->now_ns += step_ns) {
		assert_int_equal(diag_engine__run(e, fs->now_ns), 0);
		diag_engine__stats(e, &st);
		if (st.jobs > *max_tracked)
			*max_tracked = (uint32_t)st.jobs;
	}
}

static void assert_all_judged(struct fake_store *fs)
{
	for (size_t i = 0; i < fs->n; i++) {
		if (fs->jobs[i].judged < windows_of(&fs->jobs[i]) || fs->jobs[i].out_of_order)
			fail_msg("%s: %u of %u windows judged%s", fs->jobs[i].name,
				 fs->jobs[i].judged, windows_of(&fs->jobs[i]),
				 fs->jobs[i].out_of_order ? ", out of order" : "");
	}
}

/* Three weeks, a new 40-minute job every 30 minutes: 1008 jobs. */
static void test_weeks_of_jobs(void **state)
{
	struct fake_store *fs = fake_new();
	struct diag_engine *e = fs->e;
	uint64_t t0 = 1700000000ull * S, weeks = 21 * 24 * 3600 * S;
	struct diag_engine_stats st;
	uint32_t max_tracked = 0;

	for (uint64_t t = t0; t < t0 + weeks; t += 1800 * S)
		add_job(fs, t + 3 * S, 2400 * S);
	drive(e, fs, t0, t0 + weeks + 3 * 3600 * S, 120 * S, &max_tracked);
	assert_all_judged(fs);
	diag_engine__stats(e, &st);
	print_message(
		"%zu jobs over 3 weeks: %llu windows judged, %llu evicted, at most %u tracked\n",
		fs->n, (unsigned long long)st.windows, (unsigned long long)st.jobs_evicted,
		max_tracked);
	assert_int_equal(st.jobs_dropped, 0);
	assert_true(st.jobs_evicted >= fs->n - 1);
	assert_true(max_tracked <= 6); /* 2 running + those idle < 1 h */
	/* an evicted job still in the store: findings range to its data's end */
	assert_true(diag_engine__judged_until(e, fs->jobs[fs->n - 10].name) >=
		    fs->jobs[fs->n - 10].end_ns);
	fake_free(fs);
}

/* 100 30-second jobs, one every 30 s: more than 64 inside the idle hour,
 * so the table fills and quiet jobs make room; every one is judged. */
static void test_many_short_jobs(void **state)
{
	struct fake_store *fs = fake_new();
	struct diag_engine *e = fs->e;
	uint64_t t0 = 1700000000ull * S;
	struct diag_engine_stats st;
	uint32_t max_tracked = 0;

	for (int i = 0; i < 100; i++)
		add_job(fs, t0 + (uint64_t)i * 30 * S, 30 * S);
	drive(e, fs, t0, t0 + 52 * 60 * S, 5 * S, &max_tracked);
	assert_all_judged(fs);
	diag_engine__stats(e, &st);
	assert_int_equal(st.jobs_dropped, 0);
	assert_int_equal(max_tracked, 64);
	assert_true(st.jobs_evicted >= 36);
	fake_free(fs);
}

/* 70 jobs at once in a 64-job table: 6 are dropped (counted) while all
 * are active; when the first ones end and go quiet, the rest get in. */
static void test_full_of_active_jobs(void **state)
{
	struct fake_store *fs = fake_new();
	struct diag_engine *e = fs->e;
	uint64_t t0 = 1700000000ull * S;
	struct diag_engine_stats st;
	uint32_t max_tracked = 0;

	for (int i = 0; i < 64; i++)
		add_job(fs, t0, 120 * S);
	for (int i = 0; i < 6; i++)
		add_job(fs, t0 + 60 * S, 600 * S);
	drive(e, fs, t0, t0 + 100 * S, 5 * S, &max_tracked);
	diag_engine__stats(e, &st);
	assert_true(st.jobs_dropped > 0);
	assert_int_equal(st.jobs_evicted, 0);
	drive(e, fs, t0 + 105 * S, t0 + 900 * S, 5 * S, &max_tracked);
	diag_engine__stats(e, &st);
	assert_true(st.jobs_evicted >= 6);
	/* the late six: every window since they got in, in order */
	for (size_t i = 64; i < 70; i++)
		assert_true(fs->jobs[i].judged >= 60 && !fs->jobs[i].out_of_order);
	fake_free(fs);
}

static bool client_gone(void *ctx)
{
	(void)ctx;
	return true;
}

/* From a query thread whose client has left: the run judges every window
 * (its reads are not stopped), and the thread's bounds are back after. */
static void test_run_from_an_abandoned_query(void **state)
{
	struct fake_store *fs = fake_new();
	uint64_t t0 = 1700000000ull * S, next_check = 0;
	uint32_t max_tracked = 0;

	add_job(fs, t0, 300 * S);
	store__set_read_deadline(1); /* long past */
	store__set_read_client(client_gone, NULL);
	drive(fs->e, fs, t0, t0 + 400 * S, 5 * S, &max_tracked);
	assert_all_judged(fs);
	assert_true(store__read_over(&next_check));
	store__set_read_client(NULL, NULL);
	store__set_read_deadline(0);
	assert_false(store__read_over(&next_check));
	fake_free(fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_weeks_of_jobs),
		cmocka_unit_test(test_many_short_jobs),
		cmocka_unit_test(test_full_of_active_jobs),
		cmocka_unit_test(test_run_from_an_abandoned_query),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
