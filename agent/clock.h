/* SPDX-License-Identifier: Apache-2.0 */
/* The clocks the agent reads: monotonic for intervals, realtime for
 * timestamps that leave the node. */
#ifndef STRATA_CLOCK_H
#define STRATA_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static inline uint64_t mono_ms(void)
{
	return mono_ns() / 1000000;
}

static inline uint64_t realtime_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

#endif /* STRATA_CLOCK_H */
