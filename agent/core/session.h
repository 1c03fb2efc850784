/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A profiling session: sampler + process tracking + symbolization feeding a
 * profile.  `strata record` runs one for a command or a set of targets;
 * strata-agent runs one and takes a profile every period.  Signals (INT,
 * TERM, CHLD) arrive through a signalfd, so there is no global state.
 */
#ifndef STRATA_SESSION_H
#define STRATA_SESSION_H

#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "agent/core/features.h"
#include "agent/gpu/gpu.h"
#include "agent/proc/modules.h"
#include "agent/proc/proc_tracker.h"
#include "agent/python/python.h"
#include "agent/core/resolve.h"
#include "agent/core/sampler.h"
#include "agent/sched/sched_collector.h"
#include "agent/proc/unwind_loader.h"
#include "lib/profile.h"
#include "symbolize/symbolize.h"

struct session_opts {
	size_t sz;
	struct sampler_opts sampler;
	const uint32_t *pids; /* initial targets (STRATA_FILTER_TGIDS) */
	size_t npids;
	uint32_t drain_ms; /* kernel maps drained this often; 0 = 1000 */
	/* GPU layer (CUDA/NCCL uprobes) */
	bool no_gpu;
	struct gpu_opts gpu;
	/* Scheduler layer: on when sched is set. */
	bool sched;
	const char *sched_test_layer_binary; /* tests: API-layer uprobes */
};

/* A signal that ended a wait: who sent it matters (0: the kernel, e.g. the
 * terminal's Ctrl-C, which the whole foreground group already got). */
struct session_signal {
	int signo;
	pid_t from;
};

struct session {
	struct kernel_features features; /* probed at start: the path of each */
	struct sampler *sampler;
	struct module_registry *mods;
	struct proc_tracker *procs;
	struct symbolizer *sym;
	struct ksyms *ksyms;
	struct unwind_loader *unwind;  /* NULL: frame pointers only */
	struct python *python;	       /* NULL: no Python frames (--no-python) */
	struct sched_collector *sched; /* NULL: scheduler layer off */
	struct resolver res;
	int epfd, sigfd;
	uint32_t freq_hz;
	uint32_t drain_ms;
	uint64_t next_drain_ms;	   /* CLOCK_MONOTONIC */
	struct rlimit nofile_orig; /* for children: they run as without us */
	uint64_t events_failed;
	struct sampler_stats base; /* counters at the last profile take */
	struct gpu *gpu;	   /* NULL: --no-gpu, or the layer could not load */
	/* Who takes drained samples: the resolver (symbolized profile) unless
	 * set (strata-agent --server: the wire batch builder). */
	sampler_sample_fn consume;
	void *consume_ctx;
	/* strata-agent --server: called after every GPU drain (allocation
	 * sets are compared drain by drain, agent/ship/batch_gpu.c). */
	void (*gpu_drained)(void *ctx, const struct gpu_data *d);
	void *gpu_drained_ctx;
};

enum session_wake { SESSION_TIMEOUT = 0, SESSION_SIGNAL = 1 };

/* Blocks INT/TERM/CHLD for the calling thread (children restore the mask). */
struct session *session__new(const struct session_opts *opts);
void session__free(struct session *s);

int session__add_target(struct session *s, uint32_t tgid);
int session__start(struct session *s);

/*
 * Waits up to timeout_ms for process events or a signal, handling events
 * and draining the kernel maps whenever a drain interval has passed.
 * Returns SESSION_SIGNAL with *sig set, SESSION_TIMEOUT, or -errno.
 */
int session__wait(struct session *s, int timeout_ms, struct session_signal *sig);

/* Hands drained samples to fn(ctx) instead of the resolver. */
void session__set_consumer(struct session *s, sampler_sample_fn fn, void *ctx);

/* Moves everything sampled so far into the current profile. */
int session__drain(struct session *s);

/* Hands over the current profile (drained first) and starts a new one. */
struct profile *session__take_profile(struct session *s);

/* Prints counters (drops, process tracking, symbolization) to stderr. */
void session__report(struct session *s, const struct profile *p);

#endif /* STRATA_SESSION_H */
