/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the agent adds to a wire batch (uploader/batch_builder.h): its
 * drained samples' stacks as wire frames (native user frames as build-id
 * mapping + file offset, no names: the server symbolizes them; kernel
 * frames named here, kallsyms being per node; Python frames stitched in)
 * and its processes with their /proc labels (agent/ship/proc_labels.h),
 * read once per address space.
 */
#ifndef STRATA_AGENT_SHIP_AGENT_BATCH_H
#define STRATA_AGENT_SHIP_AGENT_BATCH_H

#include <stdint.h>

#include "agent/proc/proc_tracker.h"
#include "agent/python/python.h"
#include "agent/core/sampler.h"
#include "agent/proc/unwind_loader.h"
#include "symbolize/symbolize.h"
#include "uploader/batch_builder.h"

/* Where the conversion looks things up. */
struct batch_sources {
	struct proc_tracker *procs;
	struct ksyms *ksyms;	      /* NULL: kernel frames go unnamed */
	struct unwind_loader *unwind; /* NULL: FP only; else sampled tables kept warm */
	struct python *python;	      /* NULL: Python frames are not stitched */
};

struct agent_batch_stats {
	uint64_t frames_unknown;     /* user frames in no known mapping */
	uint64_t proc_read_failed;   /* processes gone before /proc was read */
	uint64_t proc_cache_evicted; /* label sets dropped from the full cache */
};

struct agent_batch;

/* Converts into bb (which the caller keeps and frees after this). */
struct agent_batch *agent_batch__new(struct batch_builder *bb, const struct batch_sources *src);
void agent_batch__free(struct agent_batch *ab);
struct batch_builder *agent_batch__builder(struct agent_batch *ab);

/* sampler_sample_fn: converts one drained sample through the sources. */
int agent_batch__add_sampled(void *ab, const struct sampler_sample *s);

/* A drained stack (user/kernel/Python as the sampler hands them; count
 * unused) without a sample row: its process and stack indexes in this
 * batch, for records that carry a stack (off-CPU).  0 or -errno; *stack is
 * -E2BIG past max_stacks (drop the row and count it). */
int agent_batch__sampled_stack(struct agent_batch *ab, const struct sampler_sample *s,
			       uint32_t *process, int64_t *stack);

/* Index of process tgid in this batch: the instance its samples used, else
 * the one /proc shows, else (gone) one made from fallback (may be NULL). */
int64_t agent_batch__process_tgid(struct agent_batch *ab, uint32_t tgid,
				  const struct bb_process *fallback);

void agent_batch__stats(const struct agent_batch *ab, struct agent_batch_stats *st);

#endif /* STRATA_AGENT_SHIP_AGENT_BATCH_H */
