/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Perfetto / Chrome trace-event JSON from stored events (struct
 * store_event): one trace "process" per rank (per node:pid when the rank
 * is unknown), GPU calls, copies, syncs and collectives as complete ("X")
 * slices on their thread, and timed CPU samples as a flame chart on a
 * track of their own per thread (nested "B"/"E" slices, one frame each,
 * that last until the next sample of the thread).  Times are the agents'
 * CLOCK_REALTIME in microseconds, written exactly (integer arithmetic).
 * Served by GET /api/v1/trace and GET /api/v1/captures/ID/trace.
 */
#ifndef STRATA_SERVER_TRACE_JSON_H
#define STRATA_SERVER_TRACE_JSON_H

#include <stdint.h>
#include <stdio.h>

#include "lib/profile.h"
#include "lib/vec.h"
#include "server/store.h"

#define TRACE_MAX_THREADS 4096 /* threads with a CPU-sample track */
#define TRACE_MAX_DEPTH 128    /* frames of a sample shown */

struct trace_thread;

struct trace_json {
	FILE *out;
	uint64_t n;		  /* events written */
	struct profile_htab seen; /* trace pids with a name record */
	struct vec pids;	  /* uint32_t */
	uint64_t sample_ns;	  /* one CPU sample's length: 1 s / its frequency */
	struct trace_thread *threads;
	uint32_t nthreads;
	struct profile_htab thread_ids;
	uint64_t samples, samples_dropped; /* dropped: no track left for the thread */
	uint64_t calls, collectives;
	uint64_t events; /* handed in (trace_json__event) */
};

/* Writes the head; sample_ns 0: CPU samples are 10 ms long. */
void trace_json__begin(struct trace_json *t, FILE *out, uint64_t sample_ns);
/* A store_event_fn: one event (the store hands them oldest first). */
int trace_json__event(void *ctx, const struct store_event *e);
/* Closes the open slices and writes the tail: otherData gets the counts,
 * truncated and other (more members, "" for none: `"k":v,...`).  Frees
 * what t holds.  0 or -ENOMEM/-EIO. */
int trace_json__end(struct trace_json *t, int truncated, const char *other);
/* Frees what t holds without writing (an error answer instead). */
void trace_json__fini(struct trace_json *t);

#endif /* STRATA_SERVER_TRACE_JSON_H */
