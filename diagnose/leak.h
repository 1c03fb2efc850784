/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU memory leak detection.  Each window the caller hands in, per process,
 * the outstanding (allocated, not yet freed) GPU bytes by allocation stack.
 * A stack leaks when, over its last >= min_windows windows, its outstanding
 * bytes trend up (Mann-Kendall tau >= min_tau: nearly every later window is
 * above every earlier one) and the robust growth (Theil-Sen slope over the
 * span) is at least min_growth_bytes.  A cache that fills and plateaus, or
 * a working set that rises and falls every step, does not qualify.
 * Pure computation: no I/O, no globals.
 */
#ifndef STRATA_DIAGNOSE_LEAK_H
#define STRATA_DIAGNOSE_LEAK_H

#include <stddef.h>
#include <stdint.h>

#define LEAK_HISTORY_MAX 64
#define LEAK_STACK_LEN 1024 /* a Python call site and the native frames under it */

struct diag_alloc_site {
	uint32_t pid;
	uint32_t level;		    /* 0: the driver's allocations, 1: a framework's */
	uint64_t stack_id;	    /* identifies the allocation stack */
	const char *stack;	    /* folded frames, for the report (borrowed) */
	uint64_t outstanding_bytes; /* at the end of the window */
};

struct leak_opts {
	size_t sz;
	uint32_t min_windows;	   /* points needed (6) */
	uint32_t history;	   /* points kept per stack (16, <= 64) */
	double min_tau;		   /* trend strength (0.8) */
	uint64_t min_growth_bytes; /* growth over the kept history (64 MiB) */
	uint32_t max_series;	   /* (pid, stack) series tracked (4096) */
};

struct diag_leak {
	uint32_t pid;
	uint32_t level; /* as the site's: one series per (pid, level, stack) */
	uint64_t stack_id;
	char stack[LEAK_STACK_LEN];
	uint64_t outstanding_bytes;
	double growth_bytes_per_s; /* Theil-Sen slope */
	double age_seconds;	   /* since the stack first held memory */
	int64_t first_seen_ns;
	double tau;
	uint32_t windows; /* points the verdict rests on */
};

struct leak_stats {
	uint64_t windows;
	uint64_t sites;		 /* handed in */
	uint64_t series;	 /* tracked now */
	uint64_t series_dropped; /* refused: table full */
	uint64_t series_evicted; /* process or stack gone for a whole history */
};

struct leak_tracker;

struct leak_tracker *leak_tracker__new(const struct leak_opts *opts);
void leak_tracker__free(struct leak_tracker *t);

/*
 * One window ending at end_ns.  A process present in sites but without a
 * stack it had before has freed that stack's memory (0 bytes); a process
 * absent altogether (agent down, exited) adds no points.  0 or -ENOMEM.
 */
int leak_tracker__window(struct leak_tracker *t, const struct diag_alloc_site *sites, size_t n,
			 int64_t end_ns);

/* Current leaks, fastest growing first; returns how many there are. */
size_t leak_tracker__list(const struct leak_tracker *t, struct diag_leak *out, size_t max);

void leak_tracker__stats(const struct leak_tracker *t, struct leak_stats *st);

#endif /* STRATA_DIAGNOSE_LEAK_H */
