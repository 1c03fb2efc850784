/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Server-side diagnosis: runs the windowed diagnose/ detectors over the
 * store, one window at a time, per job (stragglers are decided at ingest:
 * server/diag_live.h).  Windows are aligned to the wall clock
 * ([k * window, (k + 1) * window)); a window is judged once it ended
 * `delay` ago (agents ship a period late), in order, never twice.  Per job
 * it keeps a GPU leak tracker and cumulative time breakdown counters per
 * rank; jobs, ranks and leak sites are bounded tables with drop counters.
 * A job that stopped sending is freed once idle (so weeks of jobs come and
 * go), and a quiet job makes room for a new one when the table is full.
 * A background thread runs it every window / 4; queries run it too
 * (diag_engine__run), so answers never lag the data by more than the
 * delay.
 */
#ifndef STRATA_SERVER_DIAG_ENGINE_H
#define STRATA_SERVER_DIAG_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diagnose/leak.h"
#include "diagnose/straggler.h"
#include "lib/enums.h"
#include "server/store.h"

struct diag_engine_opts {
	size_t sz;
	uint64_t window_ns;   /* 10 s */
	uint64_t delay_ns;    /* judge a window this long after it ends (= window) */
	uint32_t max_jobs;    /* 64 */
	uint32_t max_catchup; /* windows judged per job per run (360) */
	uint64_t interval_ns; /* background runs this often (window / 4);
			       * UINT64_MAX: only on query (replaying data) */
	uint64_t idle_ns;     /* a job with no data for this long and nothing left
			       * to judge is freed (its results with it): the
			       * catch-up span (max_catchup windows), at least 1 h */
	/* Server replicas (server/replicas.h): only the jobs this replica
	 * owns are judged; a job it stops owning is freed (NULL: every job). */
	int (*owns)(void *ctx, const char *job);
	void *owns_ctx;
};

/* A rank's cumulative time breakdown (its main training thread). */
struct diag_rank_time {
	int32_t rank;
	uint32_t pid, tid;
	char node[DIAG_NAME_LEN];
	uint64_t ns[STRATA_TIME_MAX];
};

/* A leak with the process's place in the job. */
struct diag_leak_report {
	struct diag_leak l;
	char node[DIAG_NAME_LEN];
	int32_t rank; /* -1 unknown */
};

struct diag_engine_stats {
	uint64_t runs, windows, windows_skipped; /* skipped: further behind than max_catchup */
	uint64_t jobs, jobs_dropped;		 /* dropped: the table full of active jobs */
	uint64_t jobs_evicted;			 /* idle, or quiet to make room */
	uint64_t done_forgotten;		 /* freed jobs pushed out of the memory of them */
	uint64_t ranks_dropped, sites_dropped;
	uint64_t leak_series_dropped, store_errors;
};

struct diag_engine;

struct diag_engine *diag_engine__new(struct store *st, const struct diag_engine_opts *o);
/* Starts the background thread (0 or -errno). */
int diag_engine__start(struct diag_engine *e);
void diag_engine__free(struct diag_engine *e);

/* Judges every complete window not judged yet.  0 or -errno. */
int diag_engine__run(struct diag_engine *e, uint64_t now_ns);

/* Copies for one job under the engine's lock; each returns how many
 * there are (may exceed max). */
size_t diag_engine__breakdown(struct diag_engine *e, const char *job, struct diag_rank_time *out,
			      size_t max);
size_t diag_engine__leaks(struct diag_engine *e, const char *job, struct diag_leak_report *out,
			  size_t max);
/* End of the last judged window of job (0: none): findings use the data
 * up to there, which is complete.  For a job no longer tracked (idle), the
 * end of the window after its last data. */
uint64_t diag_engine__judged_until(struct diag_engine *e, const char *job);
uint64_t diag_engine__window_ns(const struct diag_engine *e);

void diag_engine__stats(struct diag_engine *e, struct diag_engine_stats *st);
/* The diagnosis metrics of docs/metrics.md, Prometheus text. */
void diag_engine__metrics(struct diag_engine *e, FILE *out);

#endif /* STRATA_SERVER_DIAG_ENGINE_H */
