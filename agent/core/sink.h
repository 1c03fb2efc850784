/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a session's drained data goes: one interface, implemented by the
 * local writers (agent/core/profile_sink.c with the command's GPU and
 * scheduler files: `strata record`, strata-agent --output) and by the wire
 * batch (agent/ship/shipper.c).
 *
 * The session calls it from one place (session.c: drain) in one order, all
 * inside the process tracker's drain bracket: proc_tracker__end_drain runs
 * after the last call, so processes that exited since the previous drain
 * still resolve, and are freed right after.
 *   every drain:       sample() for each CPU sample, timed_sample() for each
 *                      timed one (deep capture), then gpu_drained(),
 *                      sched_drained()
 *   a window's end:    then gpu_window(), sched_window()
 *                      (session__end_window: the period's last drain)
 *   at once:           oom_kill(), outside any drain, when the event comes
 * A NULL member is not called, nor a layer's members when it is off; the
 * first error of a window callback skips the rest and is returned by
 * session__end_window.
 */
#ifndef STRATA_AGENT_SINK_H
#define STRATA_AGENT_SINK_H

#include <stdint.h>

#include "agent/core/sampler.h"
#include "lib/profile.h"

struct gpu;
struct gpu_data;
struct sched_collector;

/* A window (strata-agent: a period; strata record: the whole run). */
struct session_window {
	uint64_t start_ns, end_ns;  /* CLOCK_REALTIME */
	struct profile_drops drops; /* the sampler's losses in the window;
				     * proc_unknown is the sink's own count */
};

struct session_sink {
	void *ctx;
	/* Every drain: each drained CPU sample. */
	sampler_sample_fn sample;
	/* Every drain: each timed sample of a deep capture (time_ns set). */
	sampler_sample_fn timed_sample;
	/* Every drain, after the GPU layer's: its tables (valid until the
	 * next drain; allocation sets are compared drain by drain). */
	void (*gpu_drained)(void *ctx, struct gpu *g, const struct gpu_data *d);
	/* Every drain: the scheduler layer's off-CPU aggregate may be drained
	 * (sched_collector__drain_offcpu) while the processes that exited
	 * since the last drain still resolve; NULL: sched_window drains it.
	 * A negative return is logged. */
	int (*sched_drained)(void *ctx, struct sched_collector *c);
	/* A window's end: the GPU layer's window (its tables, gpu__data). */
	int (*gpu_window)(void *ctx, struct gpu *g, const struct session_window *w);
	/* A window's end: the scheduler layer's window (thread counters,
	 * the off-CPU aggregate drained, irq and CPU counters). */
	int (*sched_window)(void *ctx, struct sched_collector *c, const struct session_window *w);
	/* At once: the kernel's OOM killer chose e->tgid, a process the
	 * session follows (the GPU layer's, or a training target); e is a
	 * PROC_EV_OOM_KILL (bpf/strata_cpu.h).  d: the GPU layer's tables
	 * (NULL: the layer is off). */
	void (*oom_kill)(void *ctx, const struct gpu_data *d, const struct strata_proc_event *e);
};

#endif /* STRATA_AGENT_SINK_H */
