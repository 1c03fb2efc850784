// SPDX-License-Identifier: Apache-2.0
/*
 * Timestamps of the GPU object: bpf_ktime_get_ns is CLOCK_MONOTONIC; call
 * records and allocations are shipped in wall-clock time.
 */
#include "agent/gpu/gpu_impl.h"

#include "lib/clock.h"

/* realtime - monotonic, from the tightest of a few bracketed reads; the
 * error of a converted timestamp is at most half the bracket (plus any
 * step of the realtime clock between here and the event). */
void gpu_clock_calibrate(struct gpu *g)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = mono_ns(), r = realtime_ns(), b = mono_ns();

		if (b - a < best) {
			best = b - a;
			g->data.clock_offset_ns = (int64_t)(r - (a + (b - a) / 2));
		}
	}
	g->data.clock_err_ns = best / 2 + 1;
}
