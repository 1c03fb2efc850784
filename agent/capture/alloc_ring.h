/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The recent GPU allocation calls of each process (docs/diagnosis.md
 * "Deep capture"): when a process's allocation fails for lack of device
 * memory, its last seconds of allocations and frees (with their call-site
 * stacks) are what explains it, and by then they are gone from the BPF
 * maps.  The agent keeps them here, bounded: RING_PROCS processes (the
 * least recently active one makes room) of RING_EVENTS calls each (the
 * oldest goes).
 */
#ifndef STRATA_AGENT_CAPTURE_ALLOC_RING_H
#define STRATA_AGENT_CAPTURE_ALLOC_RING_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpf/strata.h"

#define RING_PROCS 64
#define RING_EVENTS 512

struct alloc_ring;

struct alloc_ring_stats {
	uint64_t events, overwritten, procs_evicted;
};

struct alloc_ring *alloc_ring__new(void);
void alloc_ring__free(struct alloc_ring *r);

/* Keeps one allocation or free call (times in CLOCK_REALTIME). */
void alloc_ring__push(struct alloc_ring *r, const struct gpu_event *e);

/* Hands out tgid's calls that started at or after since_ns, oldest first,
 * and forgets them.  Returns how many. */
typedef void (*alloc_ring_fn)(void *ctx, const struct gpu_event *e);
size_t alloc_ring__take(struct alloc_ring *r, uint32_t tgid, uint64_t since_ns, alloc_ring_fn fn,
			void *ctx);

void alloc_ring__stats(const struct alloc_ring *r, struct alloc_ring_stats *st);

#endif /* STRATA_AGENT_CAPTURE_ALLOC_RING_H */
