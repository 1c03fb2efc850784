/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Outstanding GPU allocations grouped by (process, allocation stack), from
 * snapshots of the BPF allocation map taken every drain: bytes and count
 * now, the oldest allocation's time, and growth since the group was first
 * seen.  A group of an exited process keeps what was outstanding at exit
 * (the leak report); a live group with nothing outstanding drops to zero.
 * Pure bookkeeping, unit-tested (tests/unit/test_gpu.c).
 */
#ifndef STRATA_GPU_LEAKS_H
#define STRATA_GPU_LEAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/gpu/gpu_data.h"
#include "agent/gpu/gpu_tables.h"

struct gpu_leaks {
	struct gpu_table groups;
	uint64_t snap; /* current snapshot number */
	uint64_t now_ns;
};

void gpu_leaks__init(struct gpu_leaks *lk, size_t max_groups);
void gpu_leaks__fini(struct gpu_leaks *lk);

/* Starts a snapshot taken at now_ns (CLOCK_REALTIME). */
void gpu_leaks__begin(struct gpu_leaks *lk, uint64_t now_ns);
/* One outstanding allocation (made at alloc_ns).  at_exit: its process has
 * exited.  -ENOSPC when the group table is full (the caller counts). */
int gpu_leaks__add(struct gpu_leaks *lk, uint32_t tgid, uint64_t stack_id, uint64_t size,
		   uint64_t alloc_ns, bool at_exit);
/* Ends the snapshot: groups not seen in it are all freed (unless their
 * process exited with them outstanding). */
void gpu_leaks__end(struct gpu_leaks *lk);

/* The groups with something outstanding, copied to a new array (free()
 * it); *n their count.  NULL with *n = 0 when there are none or on
 * ENOMEM. */
struct gpu_leak *gpu_leaks__outstanding(const struct gpu_leaks *lk, size_t *n);

#endif /* STRATA_GPU_LEAKS_H */
