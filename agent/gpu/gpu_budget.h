/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The probe budget: each probe hit costs about one uprobe round trip
 * (cost_ns, measured by bench/gpu.sh: ~11 us here).  From the hit rates of
 * each process the planner estimates the CPU share the probes take; when a
 * process would exceed the budget (default 1% of one CPU), the sheddable
 * probes (launches, copies, syncs, allocations, lookups) are duty-cycled:
 * attached for ratio * period, detached for the rest.  Frees and NCCL
 * probes are never shed (see docs/gpu.md: a missed free must not become a
 * leak; sequence numbers must stay exact).  Pure logic, unit-tested.
 */
#ifndef STRATA_GPU_BUDGET_H
#define STRATA_GPU_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gpu_budget {
	double budget;	    /* CPU fraction allowed per process; <= 0: no limit */
	double cost_ns;	    /* estimated cost of one probe hit */
	double min_ratio;   /* never attach less than this share of the time */
	uint64_t period_ns; /* one attach + detach cycle */
	double ratio;	    /* planned share of time attached (1: always) */
	bool attached;	    /* current state of the sheddable probes */
	uint64_t phase_ns;  /* when the current state began */
	uint64_t on_ns;	    /* time attached so far (achieved ratio) */
	uint64_t total_ns;  /* time accounted so far */
	uint64_t last_ns;   /* last tick */
	uint64_t toggles;
};

/* Whether the duty cycle may detach api's probes (enum gpu_api). */
bool gpu_budget__sheddable(uint32_t api);

void gpu_budget__init(struct gpu_budget *b, double budget, double cost_ns, uint64_t period_ns,
		      uint64_t now_ns);

/*
 * Plans the ratio from one window: for process i, shed_hits[i] hits of
 * sheddable probes observed while they were attached for attached_ns, and
 * fixed_hits[i] hits of the others over window_ns.  Returns the new ratio.
 */
double gpu_budget__plan(struct gpu_budget *b, const uint64_t *shed_hits, const uint64_t *fixed_hits,
			size_t n, uint64_t attached_ns, uint64_t window_ns);

/* Advances the clock; returns true when the sheddable probes must change
 * state (b->attached then says the new one).  *next_ns: next deadline. */
bool gpu_budget__tick(struct gpu_budget *b, uint64_t now_ns, uint64_t *next_ns);

/* Share of time the sheddable probes were attached (1.0 before any time
 * passed): counts of those probes are scaled by 1 / this. */
double gpu_budget__achieved(const struct gpu_budget *b);

#endif /* STRATA_GPU_BUDGET_H */
