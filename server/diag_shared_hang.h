/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL hang detection of replicated servers (server/diag_shared.h): the
 * replica owning a job rebuilds, every poll, what the single server's hang
 * detector gets from each batch at ingest (server/diag_hang.c): the
 * latest batch end of each of the job's nodes, the calls in flight and
 * the NCCL/CUDA threads' states those batches listed, the processes'
 * exits, and the collectives that completed since the last poll.  Read
 * from the store over the poll's lookback.
 *
 * Re-reading is harmless: a call in flight or a thread state counts as of
 * its batch's end (an older one never replaces a newer one), an exit is
 * an exit; only completed collectives must be fed once, and the caller
 * hands over only those it did not feed before (the straggler read's).
 * The nodes are read first: a batch stored between the two reads makes a
 * rank's call look newer than its node's end, never older, so a waiting
 * rank is never taken for a missing one.
 */
#ifndef STRATA_SERVER_DIAG_SHARED_HANG_H
#define STRATA_SERVER_DIAG_SHARED_HANG_H

#include <stddef.h>
#include <stdint.h>

#include "diagnose/hang.h"
#include "server/diag_live.h"
#include "server/store.h"

struct shared_hang_read;

/* Reads job's hang inputs of the batches that ended at or after from_ns
 * (at most limit rows; *truncated set when more matched).  0 or -errno;
 * *out is freed with shared_hang__free in every case. */
int shared_hang__load(struct shared_hang_read **out, struct store *st, const char *job,
		      uint64_t from_ns, uint32_t limit, int *truncated);
void shared_hang__free(struct shared_hang_read *r);

/* Whether the read holds an NCCL call in flight (the job is in a collective). */
int shared_hang__has_nccl(const struct shared_hang_read *r);

/* What a poll feeds the job's detector: the read, and the completed
 * collectives not fed before (ev[i], call[i] for i < n). */
struct shared_hang_feed {
	const struct shared_hang_read *read;
	const struct diag_coll_event *ev;
	const struct diag_coll_call *call;
	size_t n;
};

/* diag_hang_feed_fn (server/diag_live.h): ctx is a struct shared_hang_feed. */
size_t shared_hang__feed(void *ctx, struct hang_detector *hd);

#endif /* STRATA_SERVER_DIAG_SHARED_HANG_H */
