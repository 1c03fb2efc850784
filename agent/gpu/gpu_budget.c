// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/gpu_budget.h"

#include <linux/types.h>

#include "bpf/strata.h"

bool gpu_budget__sheddable(uint32_t api)
{
	return gpu_api_sheddable(api); /* one list, shared with BPF */
}

void gpu_budget__init(struct gpu_budget *b, double budget, double cost_ns, uint64_t period_ns,
		      uint64_t now_ns)
{
	*b = (struct gpu_budget){
		.budget = budget,
		.cost_ns = cost_ns,
		.min_ratio = 0.01,
		.period_ns = period_ns ? period_ns : 1000000000ULL,
		.ratio = 1.0,
		.attached = true,
		.phase_ns = now_ns,
		.last_ns = now_ns,
	};
}

double gpu_budget__plan(struct gpu_budget *b, const uint64_t *shed_hits, const uint64_t *fixed_hits,
			size_t n, uint64_t attached_ns, uint64_t window_ns)
{
	double want = 1.0;

	if (b->budget <= 0 || !window_ns)
		return b->ratio = 1.0;
	for (size_t i = 0; i < n; i++) {
		/* full-rate estimates: hits per ns of attached / total time */
		double shed = attached_ns ? (double)shed_hits[i] / (double)attached_ns : 0;
		double fixed = (double)fixed_hits[i] / (double)window_ns;
		double room = b->budget - fixed * b->cost_ns;
		double r;

		if (shed <= 0)
			continue;
		r = room > 0 ? room / (shed * b->cost_ns) : 0;
		if (r < want)
			want = r;
	}
	if (want < b->min_ratio)
		want = b->min_ratio;
	/* Fall fast (protect the job), recover by at most doubling per
	 * window (a burst right after a quiet window is not a surprise). */
	if (want > b->ratio * 2)
		want = b->ratio * 2;
	if (want > 1.0)
		want = 1.0;
	return b->ratio = want;
}

bool gpu_budget__tick(struct gpu_budget *b, uint64_t now_ns, uint64_t *next_ns)
{
	uint64_t on_len = (uint64_t)(b->ratio * (double)b->period_ns);
	uint64_t len, dt = now_ns > b->last_ns ? now_ns - b->last_ns : 0;
	bool flip = false;

	b->total_ns += dt;
	if (b->attached)
		b->on_ns += dt;
	b->last_ns = now_ns;
	if (b->ratio >= 1.0) {
		flip = !b->attached;
		if (flip) {
			b->attached = true;
			b->phase_ns = now_ns;
			b->toggles++;
		}
		*next_ns = now_ns + b->period_ns;
		return flip;
	}
	len = b->attached ? on_len : b->period_ns - on_len;
	if (now_ns - b->phase_ns >= len) {
		b->attached = !b->attached;
		b->phase_ns = now_ns;
		b->toggles++;
		flip = true;
		len = b->attached ? on_len : b->period_ns - on_len;
	}
	*next_ns = b->phase_ns + len;
	return flip;
}

double gpu_budget__achieved(const struct gpu_budget *b)
{
	return b->total_ns ? (double)b->on_ns / (double)b->total_ns : 1.0;
}
