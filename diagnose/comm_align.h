/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cross-rank identity of communicators the agents recovered from process
 * memory (rank and size known, no ncclUniqueId hash, and each rank's
 * sequence numbers counted from whenever its agent first looked): the
 * ranks of one job are matched by their collective streams.
 *
 * A stream is one process's recovered communicator (its key: node, pid,
 * per-process hash).  The streams of one job with the same size and one
 * stream per rank 0..N-1 form a candidate group; rank 0's stream is the
 * reference.  For each other stream B the offset k (B's seq s + k is A's
 * seq s) is the one for which the exit times agree: a blocking collective
 * returns on every rank at nearly the same moment (nobody leaves before the
 * last rank entered), so at the right k the median |exit_A - exit_B| is
 * the exit jitter, at k +- 1 about one period.  Accepted only when that
 * best k is unique by a clear margin (every other candidate's median at
 * least `margin` times the best), over at least `min_pairs` collectives,
 * with the operation and size equal in every pair; otherwise the group
 * stays unaligned (counted by reason) and is tried again with more
 * collectives.  An aligned group gets a derived communicator hash and
 * sequence numbers that agree across its ranks; the calls each stream
 * held while unaligned are released then.  docs/diagnosis.md states the
 * assumptions and failure modes.  Pure: no I/O, no globals.
 */
#ifndef STRATA_DIAGNOSE_COMM_ALIGN_H
#define STRATA_DIAGNOSE_COMM_ALIGN_H

#include <stddef.h>
#include <stdint.h>

#include "diagnose/straggler.h"

struct comm_align_opts {
	size_t sz;
	uint32_t window;      /* calls held per unaligned stream (512) */
	uint32_t min_pairs;   /* matched collectives needed (32) */
	double margin;	      /* other offsets' median gap / the best's (8) */
	uint32_t max_streams; /* streams per aligner (256) */
	uint64_t stale_ns;    /* a stream silent this long is forgotten (60 s) */
};

/* One collective call of a stream. */
struct comm_align_call {
	uint64_t seq; /* the agent's count for this process's communicator */
	int64_t entry_ns, exit_ns;
	uint64_t bytes;
	uint64_t op; /* any stable id of the operation (a hash of its name) */
	uint64_t clock_err_ns;
};

enum comm_align_outcome {
	COMM_ALIGN_OK,
	COMM_ALIGN_INCOMPLETE, /* not every rank has a stream (yet) */
	COMM_ALIGN_DUPLICATE,  /* two live streams claim one rank */
	COMM_ALIGN_SHORT,      /* fewer than min_pairs matched collectives */
	COMM_ALIGN_AMBIGUOUS,  /* no offset better than the others by the margin */
	COMM_ALIGN_MISMATCH,   /* the best offset pairs different operations/sizes */
	COMM_ALIGN_NOUTCOMES
};

struct comm_align_stats {
	uint64_t streams, streams_aligned, streams_dropped, streams_expired;
	uint64_t groups_aligned;
	uint64_t attempts[COMM_ALIGN_NOUTCOMES]; /* group attempts by outcome */
	uint64_t calls_held, calls_released;	 /* held while unaligned, placed later */
	uint64_t calls_lost;			 /* held, never placed (window, expiry) */
};

struct comm_align;

struct comm_align *comm_align__new(const struct comm_align_opts *o); /* o NULL: defaults */
void comm_align__free(struct comm_align *a);

/*
 * One call of stream key (rank of nranks, on node, process pid).  Returns
 * 1 with *out filled when the stream is aligned (the call placed), 0 when
 * it is held until its group aligns, -ENOSPC when the stream table is full
 * (counted), -EINVAL for a bad rank or a seq >= 2^40 (an agent counts from
 * 0: no such count is real, and offsets must fit in int64).
 */
int comm_align__add(struct comm_align *a, uint64_t key, uint32_t rank, uint32_t nranks,
		    const char *node, uint32_t pid, const struct comm_align_call *c,
		    struct diag_coll_event *out);

/* Stream key's communicator and sequence number as its group numbers them:
 * 0, or -EAGAIN while the stream is not aligned (or not known). */
int comm_align__map(const struct comm_align *a, uint64_t key, uint64_t *comm_hash, uint64_t *seq);

/*
 * Forgets streams silent since now_ns - stale_ns (times of the calls), then
 * tries to align the unaligned ones.  Returns how many held calls are now
 * placed, written to *out (valid until the next call on a).
 */
size_t comm_align__try(struct comm_align *a, int64_t now_ns, const struct diag_coll_event **out);

/* The outcome of aligning streams b to a (both sorted by seq, seqs < 2^40):
 * the offset k with b's seq = a's seq + k.  Exposed for tests. */
enum comm_align_outcome comm_align__match(const struct comm_align_call *a, size_t na,
					  const struct comm_align_call *b, size_t nb,
					  const struct comm_align_opts *o, int64_t *k);

void comm_align__stats(const struct comm_align *a, struct comm_align_stats *st);

#endif /* STRATA_DIAGNOSE_COMM_ALIGN_H */
