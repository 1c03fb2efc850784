// SPDX-License-Identifier: Apache-2.0
/*
 * The duty cycle (gpu_budget.h) fed from the tally, and the poll loop:
 * events, process scans, the duty cycle's toggles, idle files.
 */
#include "agent/gpu/gpu_impl.h"

#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "lib/clock.h"

/* Plans the next window's ratio from the tally's per-process deltas. */
void gpu_duty_plan(struct gpu *g, uint64_t now_ns)
{
	uint64_t shed[64] = { 0 }, fixed[64] = { 0 };
	uint32_t tgids[64];
	size_t np = 0;
	const struct gpu_tally_row *rows = g->tally.rows;
	uint64_t on = g->budget.on_ns - g->window_on_ns;

	if (g->nprev < g->tally.n) {
		uint64_t *p = realloc(g->prev_calls, g->tally.n * sizeof(*p));

		if (!p)
			return;
		memset(p + g->nprev, 0, (g->tally.n - g->nprev) * sizeof(*p));
		g->prev_calls = p;
		g->nprev = g->tally.n;
	}
	for (size_t i = 0; i < g->tally.n; i++) {
		uint64_t d = rows[i].val.calls - g->prev_calls[i];
		size_t j;

		g->prev_calls[i] = rows[i].val.calls;
		for (j = 0; j < np && tgids[j] != rows[i].key.tgid; j++)
			;
		if (j == np) {
			if (np == 64)
				continue; /* the busiest 64 are enough to plan */
			tgids[np++] = rows[i].key.tgid;
		}
		if (gpu_budget__sheddable(rows[i].key.api))
			shed[j] += d;
		else
			fixed[j] += d;
	}
	gpu_budget__plan(&g->budget, shed, fixed, np, on, now_ns - g->window_start_ns);
	g->window_start_ns = now_ns;
	g->window_on_ns = g->budget.on_ns;
}

int gpu__poll(struct gpu *g)
{
	uint64_t now = mono_ms(), next = now + 1000, now_ns = mono_ns(), bnext, fexp;

	ring_buffer__consume(g->rb);
	for (size_t i = 0; i < GPU_MAX_PROCS; i++) {
		struct gpu_proc *p = &g->procs[i];

		if (p->state != PROC_WATCH && p->state != PROC_TARGET)
			continue;
		if (p->next_scan_ms <= now)
			gpu_proc_scan(g, p, now);
		else if (gpu_proc_checks_alive(p) && p->next_alive_ms <= now)
			gpu_proc_alive(g, p, now);
		if (p->state != PROC_FREE && p->next_scan_ms < next)
			next = p->next_scan_ms;
		if (gpu_proc_checks_alive(p) && p->next_alive_ms < next)
			next = p->next_alive_ms;
	}
	if (g->opts.budget >= 0 && gpu_budget__tick(&g->budget, now_ns, &bnext))
		gpu_shed_set(g, g->budget.attached);
	else if (g->opts.budget < 0)
		bnext = now_ns + 1000000000ULL;
	if (bnext / 1000000 < next)
		next = bnext / 1000000;
	fexp = gpu_files_expire(g, now);
	if (fexp < next)
		next = fexp;
	return next > now ? (int)(next - now) : 0;
}
