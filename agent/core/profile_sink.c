// SPDX-License-Identifier: Apache-2.0
#include "agent/core/profile_sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/core/resolve.h"
#include "lib/log.h"

struct profile_sink {
	struct resolver res; /* res.out: the window's profile */
	struct profile_sink_opts o;
	uint32_t freq_hz;
};

static int sample(void *ctx, const struct sampler_sample *smp)
{
	struct profile_sink *ps = ctx;

	return resolver__add(&ps->res, smp);
}

static int gpu_window(void *ctx, struct gpu *g, const struct session_window *w)
{
	struct profile_sink *ps = ctx;

	return ps->o.gpu_window ? ps->o.gpu_window(ps->o.ctx, g, w) : 0;
}

static int sched_window(void *ctx, struct sched_collector *c, const struct session_window *w)
{
	struct profile_sink *ps = ctx;

	return ps->o.sched_window ? ps->o.sched_window(ps->o.ctx, c, w) : 0;
}

struct profile_sink *profile_sink__new(struct session *s, const struct profile_sink_opts *o)
{
	struct profile_sink *ps = calloc(1, sizeof(*ps));
	struct session_sources src;

	if (!ps)
		return NULL;
	session__sources(s, &src);
	ps->o = *o;
	ps->freq_hz = src.freq_hz;
	ps->res = (struct resolver){
		.procs = src.procs,
		.sym = src.sym,
		.ksyms = src.ksyms,
		.unwind = src.unwind,
		.python = src.python,
		.out = profile__new(src.freq_hz),
	};
	if (!ps->res.out) {
		free(ps);
		errno = ENOMEM;
		return NULL;
	}
	session__set_sink(s, &(struct session_sink){
				     .ctx = ps,
				     .sample = sample,
				     .gpu_window = gpu_window,
				     .sched_window = sched_window,
			     });
	return ps;
}

void profile_sink__free(struct profile_sink *ps)
{
	if (!ps)
		return;
	profile__free(ps->res.out);
	free(ps);
}

struct profile *profile_sink__take(struct profile_sink *ps, const struct session_window *w)
{
	struct profile *p = ps->res.out, *next = profile__new(ps->freq_hz);

	if (!next)
		return NULL;
	p->start_ns = w->start_ns;
	p->end_ns = w->end_ns;
	p->drops = w->drops;
	p->drops.proc_unknown = ps->res.frames_unknown;
	ps->res.frames_unknown = 0;
	next->start_ns = w->end_ns;
	ps->res.out = next;
	return p;
}

void profile_sink__report(const struct profile_sink *ps)
{
	if (log_enabled(LOG_INFO))
		fprintf(stderr, "  frames_truncated=%llu\n",
			(unsigned long long)ps->res.frames_truncated);
}
