/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL hangs in strata-server (diagnose/hang.h decides): what a batch
 * tells a job's hang detector (completed collectives, calls in flight,
 * the state of each GPU process's NCCL/CUDA thread, exits), a report as
 * JSON with each missing rank's state now and its current CPU stack from
 * the store, and the reports kept in the store as the server's own
 * records (the hangs schema table) for past ranges.
 */
#ifndef STRATA_SERVER_DIAG_HANG_H
#define STRATA_SERVER_DIAG_HANG_H

#include <stdint.h>
#include <stdio.h>

#include "diagnose/hang.h"
#include "server/store.h"

#include "strata.pb-c.h"

/* A rank's identity in a communicator, by (node, pid, communicator): 0
 * and *rank, *nranks, with *comm and *seq translated to the cross-rank
 * communicator when the process's own is a recovered one
 * (diagnose/comm_align.h); -ENOENT unknown; -EAGAIN a recovered
 * communicator not matched across ranks yet (its calls cannot be placed,
 * whatever rank they carry). */
typedef int (*diag_rank_fn)(void *ctx, const char *node, uint32_t pid, uint64_t *comm,
			    uint64_t *seq, int32_t *rank, int32_t *nranks);

/* Feeds what b says about job's processes into hd; returns how many NCCL
 * calls (completed or in flight) it held. */
size_t diag_hang__feed(struct hang_detector *hd, const Strata__V1__Batch *b, const char *job,
		       diag_rank_fn rank_of, void *ctx);

/* Send and Recv: point-to-point calls count their own sequence and
 * involve two ranks, not a collective every rank enters (no hang, no
 * straggler, no collective statistics). */
int diag_hang__is_p2p(const char *op);

/* One call in flight as of k->as_of_ns: an NCCL collective with its rank
 * to the detector (returns 1), a CUDA call or NCCL without a communicator
 * as the process's GPU call, a point-to-point call or one without a rank
 * nowhere (0).  diag_hang__feed's rule, for inputs read from the store. */
size_t diag_hang__inflight(struct hang_detector *hd, const struct hang_call *k);

/* The report as one JSON object; st (may be NULL) adds each missing
 * rank's current CPU stack. */
void diag_hang__json(FILE *o, struct store *st, const struct hang_report *h);

/* Stores h as one Hang record of the server's own (its id from the
 * episode and whether it ended: written once at the decision, once at the
 * end).  0 or -errno. */
int diag_hang__store(struct store *st, const struct hang_report *h, uint64_t now_ns);

/* "missing", "stalled", "mismatch" */
const char *diag_hang__kind(uint32_t kind);

#endif /* STRATA_SERVER_DIAG_HANG_H */
