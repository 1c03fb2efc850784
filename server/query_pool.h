/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Threads that run queries away from the connection threads.
 * libmicrohttpd's pool threads each poll a share of the connections: a
 * query answered there (a flamegraph of 100 nodes' hour from ClickHouse
 * takes a minute, docs/benchmarks.md) stalled every agent whose
 * connection that thread polled, and four such queries stalled them all.
 * server/http.c suspends a query's connection and hands the query here;
 * the job's run() answers it and resumes the connection.  The queue is
 * bounded: past it a query is refused at once (the caller answers 503).
 */
#ifndef STRATA_SERVER_QUERY_POOL_H
#define STRATA_SERVER_QUERY_POOL_H

#include <stddef.h>
#include <stdint.h>

struct query_job {
	struct query_job *next; /* the pool's */
	/* Runs the job (cancelled: the pool is stopping, answer without
	 * running it); afterwards the job belongs to its owner again. */
	void (*run)(struct query_job *j, int cancelled);
};

struct query_pool_stats {
	uint64_t waiting, running; /* now */
	uint64_t run, refused;	   /* since start */
};

/* threads workers, at most queue jobs waiting; NULL with errno set. */
struct query_pool *query_pool__new(unsigned threads, unsigned queue);
/* Queues j: 0, -EBUSY when the queue is full (counted in refused) or
 * -ESHUTDOWN when the pool is stopping; j is then untouched. */
int query_pool__submit(struct query_pool *p, struct query_job *j);
/* Finishes the jobs running, cancels the ones waiting (run with
 * cancelled = 1) and joins the threads; later submits are refused. */
void query_pool__stop(struct query_pool *p);
/* Stops it (if not yet) and frees it. */
void query_pool__free(struct query_pool *p);
void query_pool__stats(struct query_pool *p, struct query_pool_stats *st);

#endif /* STRATA_SERVER_QUERY_POOL_H */
