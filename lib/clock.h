/* SPDX-License-Identifier: Apache-2.0 */
/* The clocks strata reads: monotonic for intervals, realtime for timestamps
 * that leave the process, boottime for what the kernel stamps. */
#ifndef STRATA_CLOCK_H
#define STRATA_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NSEC_PER_SEC 1000000000ULL

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
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

static inline uint64_t boottime_ns(void)
{
	return clock_ns(CLOCK_BOOTTIME);
}

/* The CLOCK_REALTIME instant delay_ns from now, as pthread_cond_timedwait
 * takes its deadline. */
static inline struct timespec realtime_deadline(uint64_t delay_ns)
{
	uint64_t at = realtime_ns() + delay_ns;

	return (struct timespec){ .tv_sec = (time_t)(at / NSEC_PER_SEC),
				  .tv_nsec = (long)(at % NSEC_PER_SEC) };
}

#endif /* STRATA_CLOCK_H */
