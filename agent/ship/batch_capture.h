/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Deep capture records into the wire batch (docs/diagnosis.md "Deep
 * capture"): the timed CPU samples of captured processes (CaptureSample),
 * their every GPU call (GpuCall), each capture's progress on this node
 * (CaptureRun), and the CUDA out-of-memory capture: every drain the new
 * allocation calls go to a bounded ring per process
 * (agent/capture/alloc_ring.h); an allocation that fails for lack of
 * device memory starts a capture of the process (agent/capture/
 * capture_ctl.h, trigger "oom") and its last OOM_BEFORE_S seconds of
 * allocations and frees are sent with the window.  The same when the
 * kernel's OOM killer chooses a followed process (trigger "oom_kill",
 * PROC_EV_OOM_KILL): what the ring kept of its last seconds goes with the
 * window, the process itself is gone (its last window's CPU samples are
 * in the batch as always).
 */
#ifndef STRATA_AGENT_SHIP_BATCH_CAPTURE_H
#define STRATA_AGENT_SHIP_BATCH_CAPTURE_H

#include <stdint.h>

#include "agent/capture/capture_ctl.h"
#include "agent/core/sampler.h"
#include "agent/gpu/gpu_data.h"
#include "agent/ship/agent_batch.h"
#include "agent/ship/batch_gpu.h"

#define OOM_BEFORE_S 10	   /* the ring's seconds sent before an out-of-memory return */
#define OOM_AFTER_S 5	   /* the capture it starts */
#define OOM_KILL_AFTER_S 1 /* the capture a kill starts: the process is dying */
#define OOM_FREQ_HZ 99	   /* that capture's timed sampling rate */
#define OOM_REPEAT_S 60	   /* a process's next out-of-memory capture, at the earliest */

struct batch_capture_stats {
	uint64_t samples, samples_dropped, calls, calls_dropped, ooms, oom_kills, oom_rows,
		oom_skipped;
};

struct batch_capture;

/* ctl: the agent's captures (the caller keeps it).  NULL without memory. */
struct batch_capture *batch_capture__new(struct capture_ctl *ctl);
void batch_capture__free(struct batch_capture *bc);

/* A timed sample (the sink's timed_sample).  0 or -errno. */
int batch_capture__sample(struct batch_capture *bc, struct agent_batch *ab,
			  const struct sampler_sample *s);
/* Every drain: the GPU layer's new calls (the ring, out-of-memory returns). */
void batch_capture__drained(struct batch_capture *bc, const struct gpu_data *d);
/* At once: the OOM killer chose e->tgid (PROC_EV_OOM_KILL; d: NULL without
 * the GPU layer): a capture of it, with its ring sent at the window's end. */
void batch_capture__oom_kill(struct batch_capture *bc, const struct gpu_data *d,
			     const struct strata_proc_event *e);
/* The window's end, before the layer forgets its calls: the captured
 * processes' calls and the rings of out-of-memory returns as GpuCall rows. */
void batch_capture__gpu_window(struct batch_capture *bc, struct batch_gpu *g,
			       struct agent_batch *ab, const struct gpu_data *d);
/* The period's end: one CaptureRun per capture running or just ended. */
void batch_capture__runs(struct batch_capture *bc, struct agent_batch *ab);

void batch_capture__stats(const struct batch_capture *bc, struct batch_capture_stats *st);

#endif /* STRATA_AGENT_SHIP_BATCH_CAPTURE_H */
