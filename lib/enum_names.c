// SPDX-License-Identifier: Apache-2.0
#include "lib/enum_names.h"

/* [enumerator] = name, for the wire lists (X(id, wire, name, ...)) and the
 * counter lists (X(id, name)). */
#define WIRE_LIST_NAME(id, wire, name, ...) [id] = name,
#define COUNTER_NAME(id, name) [id] = name,

#define NAME_FN(fn, list, entry, max)                                  \
	const char *fn(unsigned int i)                                 \
	{                                                              \
		static const char *const names[max] = { list(entry) }; \
                                                                       \
		return i < (unsigned int)(max) ? names[i] : "unknown"; \
	}

NAME_FN(strata_time_cat_name, STRATA_TIME_CATS, WIRE_LIST_NAME, STRATA_TIME_MAX)
NAME_FN(strata_offcpu_reason_name, STRATA_OFFCPU_REASONS, WIRE_LIST_NAME, STRATA_OFF_MAX)
NAME_FN(strata_sampler_counter_name, STRATA_SAMPLER_COUNTERS, COUNTER_NAME, STRATA_CNT_MAX)
NAME_FN(strata_unwind_counter_name, STRATA_UNWIND_COUNTERS, COUNTER_NAME, UNWIND_ERR_MAX)
NAME_FN(strata_py_counter_name, STRATA_PY_COUNTERS, COUNTER_NAME, STRATA_PY_ERR_MAX)
NAME_FN(strata_gpu_counter_name, STRATA_GPU_COUNTERS, COUNTER_NAME, GPU_CNT_MAX)
NAME_FN(strata_sched_counter_name, STRATA_SCHED_COUNTERS, COUNTER_NAME, STRATA_SCHED_CNT_MAX)
