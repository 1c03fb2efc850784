/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collective health of one window of one job (diagnose/collstats.h): the
 * job's NCCL calls from the store, assembled across ranks, and the rows
 * written back as strata-server's own batch (node STORE_SERVER_NODE,
 * window = batch window; the collective_stats schema table), so both
 * stores keep them and retention ages them with the data they came from.
 * The windowed engine (server/diag_window.c) calls it once per window.
 */
#ifndef STRATA_SERVER_DIAG_COLLSTATS_H
#define STRATA_SERVER_DIAG_COLLSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "diagnose/collstats.h"
#include "server/store.h"

#define DIAG_COLLSTAT_EVENTS 262144 /* calls read per window (with margins) */

struct diag_collstats_counts {
	struct collstat_counts c;
	uint64_t events_truncated; /* windows whose calls exceeded the bound */
	uint64_t no_communicator;  /* calls without a communicator identity */
};

/*
 * Reads job's calls entering in [ws - margin, we + margin) and sums the
 * collectives whose first entry lies in [ws, we) into rows (<= max).
 * Returns the number of rows or -errno; counts are added to *k.
 */
int diag_collstats__window(struct store *st, const char *job, uint64_t ws, uint64_t we,
			   uint64_t margin_ns, struct collstat_row *rows, size_t max,
			   struct diag_collstats_counts *k);

/*
 * Stores rows[0..n) of job's window [ws, we) as one server batch (its id
 * from job and ws: judging a window again stores nothing twice).  0, or
 * -errno.  Nothing is written for n == 0.
 */
int diag_collstats__store(struct store *st, const char *job, uint64_t ws, uint64_t we,
			  const struct collstat_row *rows, size_t n, uint64_t now_ns);

#endif /* STRATA_SERVER_DIAG_COLLSTATS_H */
