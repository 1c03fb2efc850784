/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One byte budget shared by every request thread: request bodies held in
 * memory and the memory a batch decode allocates draw from it, so the
 * server's memory for untrusted input has one bound however many
 * connections are open.  A refusal is counted; the caller answers 503 (the
 * agent retries later) or 413.
 */
#ifndef STRATA_SERVER_MEM_BUDGET_H
#define STRATA_SERVER_MEM_BUDGET_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

struct mem_budget {
	size_t max;	  /* bytes; 0 = no bound */
	size_t used;	  /* now (atomic) */
	size_t peak;	  /* highest used seen (atomic) */
	uint64_t refused; /* takes that would have gone past max (atomic) */
};

/* Takes n bytes: 0, or -ENOBUFS (counted) when that would pass max.
 * b may be NULL (no bound). */
static inline int mem_budget__take(struct mem_budget *b, size_t n)
{
	size_t cur, peak;

	if (!b)
		return 0;
	cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
	do {
		if (b->max && (n > b->max || cur > b->max - n)) {
			__atomic_fetch_add(&b->refused, 1, __ATOMIC_RELAXED);
			return -ENOBUFS;
		}
	} while (!__atomic_compare_exchange_n(&b->used, &cur, cur + n, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	peak = __atomic_load_n(&b->peak, __ATOMIC_RELAXED);
	while (cur + n > peak && !__atomic_compare_exchange_n(&b->peak, &peak, cur + n, 1,
							      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return 0;
}

static inline void mem_budget__give(struct mem_budget *b, size_t n)
{
	if (b && n)
		__atomic_fetch_sub(&b->used, n, __ATOMIC_RELAXED);
}

#endif /* STRATA_SERVER_MEM_BUDGET_H */
