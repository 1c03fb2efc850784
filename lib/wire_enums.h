/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared enums (lib/enums.h, lib/profile.h) as the wire numbers them
 * (proto/strata.proto).  The compiler checks every list entry against the
 * generated protobuf-c constant of the same name; tests/unit/test_enums.c
 * checks the other direction (no wire value the lists lack) against the
 * descriptors.
 */
#ifndef STRATA_LIB_WIRE_ENUMS_H
#define STRATA_LIB_WIRE_ENUMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/enums.h"
#include "lib/profile.h"

#include "strata.pb-c.h"

#define WIRE_CHECK_TIME(id, wire, ...)                                                          \
	_Static_assert(STRATA__V1__TIME_BREAKDOWN__CATEGORY__##wire == strata_enum_to_wire(id), \
		       #id " is TimeBreakdown.Category " #wire);
#define WIRE_CHECK_OFFCPU(id, wire, ...)                                                      \
	_Static_assert(STRATA__V1__OFF_CPU_SAMPLE__REASON__##wire == strata_enum_to_wire(id), \
		       #id " is OffCpuSample.Reason " #wire);
STRATA_TIME_CATS(WIRE_CHECK_TIME)
STRATA_OFFCPU_REASONS(WIRE_CHECK_OFFCPU)
#undef WIRE_CHECK_TIME
#undef WIRE_CHECK_OFFCPU

_Static_assert((int)STRATA__V1__FRAME__KIND__NATIVE == (int)PROFILE_KIND_NATIVE,
	       "Frame.Kind NATIVE");
_Static_assert((int)STRATA__V1__FRAME__KIND__KERNEL == (int)PROFILE_KIND_KERNEL,
	       "Frame.Kind KERNEL");
_Static_assert((int)STRATA__V1__FRAME__KIND__PYTHON == (int)PROFILE_KIND_PYTHON,
	       "Frame.Kind PYTHON");
_Static_assert((int)STRATA__V1__FRAME__KIND__LOST == (int)PROFILE_KIND_LOST, "Frame.Kind LOST");
_Static_assert((int)STRATA__V1__FRAME__KIND__UNKNOWN == (int)PROFILE_KIND_UNKNOWN,
	       "Frame.Kind UNKNOWN");

static inline Strata__V1__TimeBreakdown__Category strata_time_cat_to_wire(enum strata_time_cat c)
{
	return (Strata__V1__TimeBreakdown__Category)strata_enum_to_wire(c);
}

static inline Strata__V1__OffCpuSample__Reason
strata_offcpu_reason_to_wire(enum strata_offcpu_reason r)
{
	return (Strata__V1__OffCpuSample__Reason)strata_enum_to_wire(r);
}

/*
 * The same conversion in SQL, for the stores (which keep wire values): for
 * a column col holding values of an n-entry list, ix gets the list entry
 * "(col - 1)" and cond the filter " AND col BETWEEN 1 AND n" that leaves
 * out the unspecified value and values the list lacks.
 */
static inline void strata_wire_enum_sql(const char *col, uint32_t n, char *ix, size_t ixsz,
					char *cond, size_t condsz)
{
	snprintf(ix, ixsz, "(%s - %u)", col, STRATA_WIRE_ENUM_BASE);
	snprintf(cond, condsz, " AND %s BETWEEN %u AND %u", col, strata_enum_to_wire(0),
		 strata_enum_to_wire(n - 1));
}

#endif /* STRATA_LIB_WIRE_ENUMS_H */
