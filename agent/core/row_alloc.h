/* SPDX-License-Identifier: Apache-2.0 */
/*
 * First-fit allocator of row ranges in the unwind_rows array map: tables
 * come and go (eviction), so freed ranges are reused, adjacent ones merged.
 * Bounded: at most ROW_ALLOC_MAX_FREE free ranges are tracked; a range that
 * cannot be tracked is leaked and counted.
 */
#ifndef STRATA_ROW_ALLOC_H
#define STRATA_ROW_ALLOC_H

#include <stdint.h>

#define ROW_ALLOC_MAX_FREE 4096

struct row_range {
	uint32_t first, count;
};

struct row_alloc {
	struct row_range free[ROW_ALLOC_MAX_FREE]; /* sorted by first, disjoint */
	uint32_t nfree;
	uint32_t total, used;
	uint64_t leaked; /* rows lost when the free list was full */
};

void row_alloc__init(struct row_alloc *a, uint32_t total);
/* First row of a free range of n rows, or -1 (no range large enough). */
int64_t row_alloc__get(struct row_alloc *a, uint32_t n);
void row_alloc__put(struct row_alloc *a, uint32_t first, uint32_t n);

#endif /* STRATA_ROW_ALLOC_H */
