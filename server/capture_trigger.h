/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What starts a deep capture besides the API (docs/diagnosis.md "Deep
 * capture"): a confirmed straggler or NCCL hang (a short capture of the
 * flagged ranks and two healthy peers, starting one agent period later so
 * that every agent has heard of it and all start together), and a schedule
 * (--capture-every: the job's ranks every N minutes).  A job gets at most
 * one triggered capture per cooldown (per trigger), so a flapping rank
 * cannot keep its job under capture.
 */
#ifndef STRATA_SERVER_CAPTURE_TRIGGER_H
#define STRATA_SERVER_CAPTURE_TRIGGER_H

#include <stdint.h>

#include "diagnose/hang.h"
#include "diagnose/straggler.h"
#include "server/capture.h"

#define TRIGGER_COOLDOWN_S 300 /* per (job, trigger) */
#define TRIGGER_DURATION_S 10
#define TRIGGER_FREQ_HZ 199
#define TRIGGER_JOBS 64 /* (job, trigger) pairs remembered for the cooldown */

struct capture_triggers_opts {
	uint32_t lead_ms;    /* start this long after the decision (one agent period) */
	uint32_t duration_s; /* 0: TRIGGER_DURATION_S */
	uint32_t every_s;    /* schedule: each job this often (0: none) */
	uint32_t cooldown_s; /* 0: TRIGGER_COOLDOWN_S */
};

struct capture_triggers;

struct capture_triggers *capture_triggers__new(struct capture_registry *reg,
					       const struct capture_triggers_opts *o);
void capture_triggers__free(struct capture_triggers *t);

/* A straggler confirmation: the rank and two healthy peers of its
 * communicator among ranks[0..n) (the job's tracked ranks).  0 when a
 * capture was made, else why not (-EALREADY: cooling down). */
int capture_triggers__straggler(struct capture_triggers *t, const struct straggler_transition *tr,
				const struct straggler_rank *ranks, size_t n, uint64_t now_ns);
/* A hang confirmation: its missing (or mismatched) ranks and two waiting. */
int capture_triggers__hang(struct capture_triggers *t, const struct hang_report *h,
			   uint64_t now_ns);
/* The schedule: job is due every every_s seconds (the first time it is
 * seen active counts as due). */
int capture_triggers__schedule(struct capture_triggers *t, const char *job, uint64_t now_ns);

#endif /* STRATA_SERVER_CAPTURE_TRIGGER_H */
