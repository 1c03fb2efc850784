// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the detectors on hostile event streams (they come from
 * agents' batches).  Bytes become collective events (small value ranges, so
 * collectives, ranks and restarts collide), allocation sites and breakdown
 * intervals; checks what the APIs promise: bounded outputs, states within
 * the table, breakdowns that add up to the window.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/breakdown.h"
#include "diagnose/comm_align.h"
#include "diagnose/leak.h"
#include "diagnose/straggler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REC 8 /* bytes per record */

static void straggler(const uint8_t *d, size_t n)
{
	/* Small tables and no warm-up, so that every path is reached and the
	 * bounds are hit. */
	struct straggler_opts o = { .sz = sizeof(o),
				    .max_tracked = 16,
				    .max_comms = 4,
				    .max_pending = 8,
				    .min_intervals = 1 };
	struct straggler_detector *det = straggler_detector__new("fuzz", &o);
	struct diag_coll_event *ev = calloc(n / REC + 1, sizeof(*ev));
	struct straggler_transition out[4];
	struct straggler_rank list[32];
	struct straggler_stats st;
	size_t k = 0;

	if (!det || !ev)
		goto out;
	for (size_t i = 0; i + REC <= n; i += REC, k++)
		ev[k] = (struct diag_coll_event){
			.comm_hash = d[i] & 3,
			.comm_instance = d[i + 1] & 1,
			.seq = d[i + 2] & 15,
			.rank = d[i + 3] & 7,
			.nranks = d[i + 4] & 7,
			/* Any int64, extremes included. */
			.entry_ns = (int64_t)(((uint64_t)d[i + 5] << ((d[i + 7] & 7) * 8)) ^
					      (d[i + 7] & 8 ? ~0ULL : 0)),
			.clock_err_ns = (uint64_t)d[i + 6] << 16,
			.pid = d[i + 7] & 3,
			.node = (d[i] & 4) ? "n" : NULL,
		};
	/* In three parts, then what is pending, then the job gone: each call
	 * writes at most what it was given room for. */
	for (int w = 0; w < 3; w++) {
		size_t part = k / 3, first = (size_t)w * part;
		int r = straggler_detector__add(det, ev + first, w == 2 ? k - first : part, out, 4);

		if (r > 4)
			__builtin_trap();
	}
	if (straggler_detector__flush(det, out, 4) > 4 ||
	    straggler_detector__expire(det, out, 4) > 4)
		__builtin_trap();
	if (straggler_detector__list(det, false, list, 32) > 16)
		__builtin_trap();
	straggler_detector__stats(det, &st);
	if (st.tracked > 16 || st.events_used > st.events)
		__builtin_trap();
out:
	straggler_detector__free(det);
	free(ev);
}

/* Recovered communicators' streams: few keys, ranks and sizes (groups form,
 * collide and go stale), any times and sequence numbers. */
static void align(const uint8_t *d, size_t n)
{
	struct comm_align_opts o = {
		.sz = sizeof(o), .window = 8, .min_pairs = 2, .max_streams = 4, .stale_ns = 1000
	};
	struct comm_align *a = comm_align__new(&o);
	const struct diag_coll_event *out;
	struct comm_align_stats st;
	struct diag_coll_event ev;
	uint64_t held = 0;

	if (!a)
		return;
	for (size_t i = 0; i + REC <= n; i += REC) {
		int64_t t = (int64_t)(((uint64_t)d[i + 5] << ((d[i + 7] & 7) * 8)) ^
				      (d[i + 7] & 8 ? ~0ULL : 0));
		struct comm_align_call c = { .seq = (uint64_t)d[i + 3] << ((d[i + 6] & 3) * 20),
					     .entry_ns = t,
					     .exit_ns = t,
					     .bytes = d[i + 4] & 1,
					     .op = d[i + 6] >> 7 };
		uint32_t nranks = d[i + 2] & 3, rank = d[i + 1] & 3;
		uint64_t hash = 0, seq = c.seq;
		int r = comm_align__add(a, d[i] & 7, rank, nranks, "n", 1, &c, &ev);

		if (r == 1 && (ev.rank != rank || ev.nranks != nranks))
			__builtin_trap();
		held += r == 0;
		if ((i / REC) % 4 == 3 && comm_align__try(a, 0, &out) > held)
			__builtin_trap();
		if (!comm_align__map(a, d[i] & 7, &hash, &seq) && !hash)
			__builtin_trap();
	}
	comm_align__try(a, 0, &out);
	comm_align__stats(a, &st);
	if (st.streams_aligned > st.streams || st.calls_released > st.calls_held)
		__builtin_trap();
	comm_align__free(a);
}

static void leak(const uint8_t *d, size_t n)
{
	struct leak_opts o = { .sz = sizeof(o), .max_series = 8, .min_windows = 3, .history = 4 };
	struct leak_tracker *t = leak_tracker__new(&o);
	struct diag_leak out[16];

	if (!t)
		return;
	for (size_t i = 0; i + REC <= n; i += REC) {
		struct diag_alloc_site s = {
			.pid = d[i] & 3,
			.stack_id = d[i + 1] & 7,
			.stack = "s",
			.outstanding_bytes = (uint64_t)d[i + 2] << (d[i + 3] & 63),
		};
		leak_tracker__window(t, &s, 1, (int64_t)i * 1000000000);
		if (leak_tracker__list(t, out, 16) > 8)
			__builtin_trap();
	}
	leak_tracker__free(t);
}

static void breakdown(const uint8_t *d, size_t n)
{
	struct diag_interval *iv = calloc(n / REC + 1, sizeof(*iv));
	struct diag_breakdown b;
	uint64_t sum = 0;
	size_t k = 0;

	if (!iv)
		return;
	for (size_t i = 0; i + REC <= n; i += REC, k++)
		iv[k] = (struct diag_interval){ (int8_t)d[i] * 1000, (int8_t)d[i + 1] * 1000,
						d[i + 2] % STRATA_TIME_MAX };
	if (!diag_breakdown_intervals(iv, k, -50000, 50000, &b)) {
		for (int c = 0; c < STRATA_TIME_MAX; c++)
			sum += b.ns[c];
		if (sum != b.wall_ns || b.wall_ns != 100000)
			__builtin_trap();
	}
	free(iv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	straggler(data, size);
	align(data, size);
	leak(data, size);
	breakdown(data, size);
	return 0;
}
