/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A profiling session: the sampler, process tracking and the GPU and
 * scheduler layers, drained into one sink (agent/core/sink.h) in windows.
 * `strata record` runs one for a command or a set of targets (one window);
 * strata-agent runs one and ends a window every period.  Signals (INT,
 * TERM, CHLD) arrive through a signalfd, so there is no global state.
 */
#ifndef STRATA_SESSION_H
#define STRATA_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "agent/core/sampler.h"
#include "agent/core/sink.h"
#include "agent/gpu/gpu.h"
#include "lib/profile.h"

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

/* The parts a sink reads through (the session owns them). */
struct session_sources {
	struct proc_tracker *procs;
	struct module_registry *mods;
	struct symbolizer *sym;
	struct ksyms *ksyms;	      /* NULL: kernel frames stay addresses */
	struct unwind_loader *unwind; /* NULL: frame pointers only */
	struct python *python;	      /* NULL: no Python frames (--no-python) */
	uint32_t freq_hz;
	bool gpu, sched;		  /* the layers are on (their sink members are called) */
	const struct rlimit *nofile_orig; /* for children: they run as without us */
	/* the running kernel's, and the path each feature takes */
	const struct kernel_features *features;
};

struct session;
struct kernel_features;

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

void session__sources(const struct session *s, struct session_sources *out);

/* Where drained data goes (agent/core/sink.h); set before session__start.
 * Without one, samples are dropped. */
void session__set_sink(struct session *s, const struct session_sink *sink);

/* Ends the window: the last drain of it, with the sink's window members,
 * and *w filled in; the next window starts.  0 or the first error of a
 * window member. */
int session__end_window(struct session *s, struct session_window *w);

/*
 * Deep capture (agent/capture/): what the captures running now raise, for
 * these processes (at most SESSION_RAISE_MAX): timed CPU samples at
 * freq_hz, every GPU call (the duty cycle held attached), off-CPU stacks
 * (the scheduler layer follows them).  An empty set ends every raise.
 * Replaces the previous raise.  0 or the first -errno (the rest applied).
 */
#define SESSION_RAISE_MAX 4096
struct session_raise {
	uint32_t freq_hz;
	bool gpu_calls, offcpu;
	const uint32_t *tgids;
	size_t ntgids;
};
int session__raise(struct session *s, const struct session_raise *r);

/* The processes a capture may name: the GPU layer's and, host-wide, the
 * scheduler layer's automatic targets (training processes and their
 * forks).  A process may be named twice. */
typedef void (*session_proc_fn)(void *ctx, uint32_t tgid);
void session__candidates(struct session *s, session_proc_fn fn, void *ctx);

/* Prints counters (drops, process tracking, symbolization) to stderr. */
void session__report(struct session *s, const struct profile *p);
/* The counters of every part (the report without a profile: --server). */
void session__report_counters(struct session *s);
/* The scheduler layer's counters and automatic targets (part of the above). */
void session__report_sched(struct session *s);
/* The GPU layer's counters and tables' sizes, when it runs (--server: at
 * the stop; the local writers print them with each window's GPU files). */
void session__report_gpu(struct session *s);

#endif /* STRATA_SESSION_H */
