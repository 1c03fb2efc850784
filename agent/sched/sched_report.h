/* SPDX-License-Identifier: Apache-2.0 */
/* `strata record --sched FILE`: the scheduler layer's counters as JSON
 * (schema in docs/diagnosis.md). */
#ifndef STRATA_SCHED_REPORT_H
#define STRATA_SCHED_REPORT_H

#include <stdio.h>

#include "agent/sched/sched_collector.h"
#include "symbolize/symbolize.h"

/* Writes threads, off-CPU stacks (kernel frames named with ks when given),
 * foreign processes, interrupt time and counters.  0 or -errno. */
int sched_report__write(struct sched_collector *c, const struct ksyms *ks, FILE *out);
int sched_report__write_file(struct sched_collector *c, const struct ksyms *ks, const char *path);

#endif /* STRATA_SCHED_REPORT_H */
