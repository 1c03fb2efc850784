// SPDX-License-Identifier: Apache-2.0
#include "agent/core/row_alloc.h"

#include <string.h>

void row_alloc__init(struct row_alloc *a, uint32_t total)
{
	memset(a, 0, sizeof(*a));
	a->total = total;
	if (total) {
		a->free[0] = (struct row_range){ 0, total };
		a->nfree = 1;
	}
}

int64_t row_alloc__get(struct row_alloc *a, uint32_t n)
{
	for (uint32_t i = 0; i < a->nfree; i++) {
		struct row_range *r = &a->free[i];
		uint32_t first = r->first;

		if (r->count < n)
			continue;
		r->first += n;
		r->count -= n;
		if (!r->count) {
			memmove(r, r + 1, (a->nfree - i - 1) * sizeof(*r));
			a->nfree--;
		}
		a->used += n;
		return first;
	}
	return -1;
}

void row_alloc__put(struct row_alloc *a, uint32_t first, uint32_t n)
{
	uint32_t i = 0;

	if (!n)
		return;
	a->used -= n;
	while (i < a->nfree && a->free[i].first < first)
		i++;
	/* Merge with the range before and/or after. */
	if (i > 0 && a->free[i - 1].first + a->free[i - 1].count == first) {
		a->free[i - 1].count += n;
		if (i < a->nfree && first + n == a->free[i].first) {
			a->free[i - 1].count += a->free[i].count;
			memmove(&a->free[i], &a->free[i + 1],
				(a->nfree - i - 1) * sizeof(a->free[0]));
			a->nfree--;
		}
		return;
	}
	if (i < a->nfree && first + n == a->free[i].first) {
		a->free[i].first = first;
		a->free[i].count += n;
		return;
	}
	if (a->nfree == ROW_ALLOC_MAX_FREE) {
		a->leaked += n;
		return;
	}
	memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof(a->free[0]));
	a->free[i] = (struct row_range){ first, n };
	a->nfree++;
}
