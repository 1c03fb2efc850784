/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the windowed diagnosis engine (server/diag_engine.c: jobs, runs,
 * reading; server/diag_window.c: judging one window of one job).  Not for
 * other users: the engine's API is server/diag_engine.h.
 */
#ifndef STRATA_SERVER_DIAG_ENGINE_INT_H
#define STRATA_SERVER_DIAG_ENGINE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "server/diag_collstats.h"
#include "server/diag_engine.h"

#define MAX_RANKS 1024 /* per job */
#define MAX_SITES 512  /* outstanding (pid, stack) sites kept per job for /metrics */
#define MAX_PIDS 1024  /* pid -> node/rank per job */
#define MAX_DONE 8192  /* freed jobs remembered (how far they were judged) */
#define DONE_PROBES 8
#define MAX_COLLSTATS 64 /* (communicator, op, size class) rows per job per window */

struct site {
	uint32_t pid;
	uint64_t stack_id, bytes;
};

struct pid_place {
	uint32_t pid;
	int32_t rank;
	char node[DIAG_NAME_LEN];
};

struct job_state {
	char job[DIAG_NAME_LEN];
	struct leak_tracker *lt;
	uint64_t next_ws; /* start of the next window to judge */
	uint64_t last_ns; /* its latest data, as the store last said */
	struct diag_rank_time ranks[MAX_RANKS];
	uint32_t nranks;
	struct site sites[MAX_SITES];
	uint32_t nsites;
	struct pid_place pids[MAX_PIDS];
	uint32_t npids;
	/* collective health summed over the judged windows (/metrics counters),
	 * and each row's bandwidths in the last window it occurred in */
	struct collstat_row colls[MAX_COLLSTATS];
	struct collstat_rates colls_last[MAX_COLLSTATS];
	uint32_t ncolls;
};

/* A freed job: a hash of its name and the next window it would judge.  It
 * comes back (from there) only with newer data.  A collision could only
 * skip the windows before next_ws of another job. */
struct done_job {
	uint64_t key, next_ws; /* key 0: free */
};

struct diag_engine {
	struct store *st;
	struct done_job *done; /* MAX_DONE */
	struct diag_engine_opts o;
	pthread_mutex_t lock; /* jobs and stats; one run at a time */
	struct job_state **jobs;
	uint32_t njobs;
	struct diag_engine_stats stats;
	struct diag_collstats_counts colls; /* over every window */
	pthread_t thread;
	int running;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	int stop;
};

/* Judges window [ws, ws + window) of job j: breakdown and leak inputs
 * from the store into its state.  0 or -errno.  Under e->lock. */
int diag_window__judge(struct diag_engine *e, struct job_state *j, uint64_t ws);

#endif /* STRATA_SERVER_DIAG_ENGINE_INT_H */
