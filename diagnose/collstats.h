/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collective health per communicator: every rank's calls of one window,
 * assembled into collectives (the same (communicator, sequence number) on
 * every rank), summed per (communicator, op, message size class).  The
 * numbers, per collective:
 *
 *   observed = last exit - first entry, over the ranks
 *   stall    = mean over the ranks of (exit - entry): the time each rank's
 *              thread is held in the call (waiting for the others, then
 *              moving data)
 *   slack    = mean over the ranks of (last entry - entry): the time a rank
 *              could have overlapped the collective with work
 *   bytes    = the message: count x the datatype's size (NCCL's "size")
 *
 * and per row over its occurrences: the sums of those (aggregated stall =
 * the stall summed over the occurrences), from which come
 *
 *   required bandwidth = bytes / slack
 *   algorithm bandwidth = bytes / observed
 *   bus bandwidth = algorithm bandwidth x NCCL's factor for the op and the
 *                   number of ranks n (allreduce 2(n-1)/n; reducescatter,
 *                   allgather, alltoall (n-1)/n; broadcast, reduce,
 *                   send/recv 1: nccl-tests' doc/PERFORMANCE.md)
 *
 * Rows add up across windows (every number is a sum), so a longer range is
 * the sum of its windows.  Pure computation: no I/O, no globals.
 */
#ifndef STRATA_DIAGNOSE_COLLSTATS_H
#define STRATA_DIAGNOSE_COLLSTATS_H

#include <stddef.h>
#include <stdint.h>

#define COLLSTAT_OP_LEN 24

/* One rank's call of one collective (its exit seen). */
struct collstat_call {
	uint64_t comm_hash, seq;
	const char *op;	  /* "AllReduce", ... (borrowed) */
	uint64_t bytes;	  /* count x dtype size */
	int32_t nranks;	  /* the communicator's size, -1 unknown */
	uint64_t rank_id; /* identifies the rank (its node and pid, or its rank) */
	int64_t entry_ns, exit_ns;
};

/* Sums over the occurrences of one (communicator, op, size class). */
struct collstat_row {
	uint64_t comm_hash;
	char op[COLLSTAT_OP_LEN];
	uint64_t size_class; /* bytes in [size_class, 2 x size_class); 0: empty */
	int32_t nranks;	     /* ranks per occurrence (the communicator's size) */
	uint64_t occurrences;
	uint64_t observed_ns, stall_ns, slack_ns, bytes;
	uint64_t observed_max_ns;
};

/* What the assembly left out. */
struct collstat_counts {
	uint64_t collectives; /* summed into rows */
	uint64_t partial;     /* fewer ranks than the communicator has (or < 2) */
	uint64_t outside;     /* first entry outside the window: another window's */
	uint64_t duplicates;  /* a second call of one rank at one sequence number */
	uint64_t no_exit;     /* exit before entry (or none) */
	uint64_t rows_dropped;
};

/* Derived numbers of a row (0 where a divisor is 0). */
struct collstat_rates {
	double observed_s, stall_s, total_stall_s, slack_s; /* per occurrence; total */
	double bytes;					    /* per occurrence */
	double required_bps, algo_bps, bus_bps;		    /* bytes per second */
	double bus_factor;
};

/* The size class of a message: the largest power of two <= bytes (0: 0). */
uint64_t collstat_size_class(uint64_t bytes);

/* NCCL's bus-bandwidth factor for op on n ranks (1 for an unknown op). */
double collstat_bus_factor(const char *op, int32_t n);

/*
 * Assembles calls[0..n) (any order; the array is sorted in place) into
 * collectives and sums those whose first entry lies in [from_ns, to_ns)
 * into rows (at most max; rows beyond are counted in rows_dropped).
 * Point-to-point calls ("Send", "Recv") are not collectives and are left
 * out by the caller.  Returns the number of rows, sorted by aggregated
 * stall (largest first).  counts may be NULL.
 */
size_t collstat_window(struct collstat_call *calls, size_t n, int64_t from_ns, int64_t to_ns,
		       struct collstat_row *rows, size_t max, struct collstat_counts *counts);

/* Adds src into the row of dst[0..*n) with its key (comm, op, size class,
 * nranks), or a new row when there is room (max); 0 or -ENOSPC. */
int collstat_merge(struct collstat_row *dst, size_t *n, size_t max, const struct collstat_row *src);

/* Sorts rows by aggregated stall, largest first (ties: by key). */
void collstat_sort(struct collstat_row *rows, size_t n);

void collstat_rates(const struct collstat_row *r, struct collstat_rates *out);

#endif /* STRATA_DIAGNOSE_COLLSTATS_H */
