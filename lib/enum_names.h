/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The names of the shared enums (lib/enums.h), generated from their lists:
 * what reports, metrics labels, JSON keys and `-v` counters print.  Each
 * returns "unknown" for a value past its list.
 */
#ifndef STRATA_LIB_ENUM_NAMES_H
#define STRATA_LIB_ENUM_NAMES_H

#include "lib/enums.h"

const char *strata_time_cat_name(unsigned int cat);	 /* enum strata_time_cat */
const char *strata_offcpu_reason_name(unsigned int r);	 /* enum strata_offcpu_reason */
const char *strata_sampler_counter_name(unsigned int c); /* enum strata_counter */
const char *strata_unwind_counter_name(unsigned int c);	 /* enum unwind_err */
const char *strata_py_counter_name(unsigned int c);	 /* enum strata_py_err */
const char *strata_gpu_counter_name(unsigned int c);	 /* enum gpu_counter */
const char *strata_sched_counter_name(unsigned int c);	 /* enum strata_sched_counter */

#endif /* STRATA_LIB_ENUM_NAMES_H */
