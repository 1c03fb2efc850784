/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The local writers' sink (agent/core/sink.h): drained samples symbolized
 * into one profile per window, and the command's own GPU and scheduler
 * writers (`strata record`'s --leaks/--trace/--tally/--sched files,
 * strata-agent --output's per-period GPU files) called at the window's end.
 */
#ifndef STRATA_AGENT_PROFILE_SINK_H
#define STRATA_AGENT_PROFILE_SINK_H

#include "agent/core/session.h"
#include "lib/profile.h"

struct profile_sink_opts {
	size_t sz;
	/* The command's writers (NULL: none), with their ctx. */
	void *ctx;
	int (*gpu_window)(void *ctx, struct gpu *g, const struct session_window *w);
	int (*sched_window)(void *ctx, struct sched_collector *c, const struct session_window *w);
};

struct profile_sink;

/* Becomes s's sink.  NULL + errno. */
struct profile_sink *profile_sink__new(struct session *s, const struct profile_sink_opts *o);
void profile_sink__free(struct profile_sink *ps);

/* Hands over the profile of the window w (session__end_window) and starts
 * the next one.  NULL: no memory for the next one. */
struct profile *profile_sink__take(struct profile_sink *ps, const struct session_window *w);

/* Its counters to stderr (-v, after session__report). */
void profile_sink__report(const struct profile_sink *ps);

#endif /* STRATA_AGENT_PROFILE_SINK_H */
