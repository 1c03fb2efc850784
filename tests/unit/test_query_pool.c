// SPDX-License-Identifier: Apache-2.0
/*
 * The query threads (server/query_pool.h): jobs run in order on the
 * threads, the queue is bounded (refused past it, counted), and stopping
 * lets the running jobs finish and cancels the waiting ones: every job
 * submitted is run exactly once, so no connection stays suspended.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "server/query_pool.h"

/* A job that blocks until the gate opens. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open, entered;
};

struct job {
	struct query_job j; /* first */
	struct gate *gate;
	int runs, cancelled;
};

static void run(struct query_job *qj, int cancelled)
{
	struct job *j = (struct job *)qj;

	pthread_mutex_lock(&j->gate->lock);
	j->gate->entered++;
	pthread_cond_broadcast(&j->gate->cond);
	while (!cancelled && !j->gate->open)
		pthread_cond_wait(&j->gate->cond, &j->gate->lock);
	j->runs++;
	j->cancelled = cancelled;
	pthread_mutex_unlock(&j->gate->lock);
}

static void wait_entered(struct gate *g, int n)
{
	pthread_mutex_lock(&g->lock);
	while (g->entered < n)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void open_gate(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* 2 threads, 3 waiting: 2 run, 3 wait, the 6th is refused; all 5 run
 * once the first two finish. */
static void bounded_queue(void **state)
{
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct query_pool *p = query_pool__new(2, 3);
	struct job jobs[6];
	struct query_pool_stats st;

	(void)state;
	assert_non_null(p);
	for (int i = 0; i < 6; i++)
		jobs[i] = (struct job){ .j.run = run, .gate = &g };
	for (int i = 0; i < 2; i++)
		assert_int_equal(query_pool__submit(p, &jobs[i].j), 0);
	wait_entered(&g, 2);
	for (int i = 2; i < 5; i++)
		assert_int_equal(query_pool__submit(p, &jobs[i].j), 0);
	assert_int_equal(query_pool__submit(p, &jobs[5].j), -EBUSY);
	query_pool__stats(p, &st);
	assert_int_equal(st.running, 2);
	assert_int_equal(st.waiting, 3);
	assert_int_equal(st.refused, 1);
	open_gate(&g);
	wait_entered(&g, 5);
	query_pool__free(p); /* joins: every job has returned */
	for (int i = 0; i < 5; i++) {
		assert_int_equal(jobs[i].runs, 1);
		assert_int_equal(jobs[i].cancelled, 0);
	}
	assert_int_equal(jobs[5].runs, 0);
}

static void *stop_thread(void *p)
{
	query_pool__stop(p);
	return NULL;
}

/* Stopping: the running job finishes, the waiting ones are run cancelled
 * (answered 503 by the server), later submits are refused. */
static void stop_cancels_waiting(void **state)
{
	struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct query_pool *p = query_pool__new(1, 1000);
	struct job jobs[1000];
	pthread_t stopper;
	int n = 4;

	(void)state;
	assert_non_null(p);
	for (int i = 0; i < 1000; i++)
		jobs[i] = (struct job){ .j.run = run, .gate = &g };
	for (int i = 0; i < n; i++)
		assert_int_equal(query_pool__submit(p, &jobs[i].j), 0);
	wait_entered(&g, 1);
	/* stop while job 0 runs; submits are refused once it has begun */
	assert_int_equal(pthread_create(&stopper, NULL, stop_thread, p), 0);
	while (n < 1000 && !query_pool__submit(p, &jobs[n].j)) {
		n++;
		usleep(1000);
	}
	assert_true(n < 1000);
	open_gate(&g);
	pthread_join(stopper, NULL);
	assert_int_equal(jobs[0].runs, 1);
	assert_int_equal(jobs[0].cancelled, 0);
	for (int i = 1; i < n; i++) {
		assert_int_equal(jobs[i].runs, 1);
		assert_int_equal(jobs[i].cancelled, 1);
	}
	assert_int_equal(query_pool__submit(p, &jobs[n].j), -ESHUTDOWN);
	query_pool__free(p);
	assert_int_equal(jobs[n].runs, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bounded_queue),
		cmocka_unit_test(stop_cancels_waiting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
