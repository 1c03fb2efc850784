/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Straggler detection over NCCL collective events.
 *
 * The same collective on every rank is (communicator hash, instance, sequence
 * number).  Each window, every collective's host entry times are compared:
 * a rank's lag is its entry time minus the median entry time of the ranks
 * that took part, less the clock error bound of both clocks (a lag inside
 * the bound never counts).  Per (communicator, rank) and window: the median
 * lag, the fraction of collectives it arrived clearly last, and the lag as a
 * fraction of the communicator's period (median time between consecutive
 * collectives).  A window is "hot" when all three are large; a rank is
 * confirmed after confirm_windows hot windows in a row and cleared after
 * clear_windows cool ones (hysteresis).  Defaults are justified in
 * docs/diagnosis.md.
 *
 * Pure computation: no I/O, no globals.  One detector per job; the caller
 * (the server) feeds it the events of consecutive windows.
 */
#ifndef STRATA_DIAGNOSE_STRAGGLER_H
#define STRATA_DIAGNOSE_STRAGGLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DIAG_NAME_LEN 64

/* One collective call on one rank, as the GPU layer records it. */
struct diag_coll_event {
	uint64_t comm_hash;	/* communicator id hash (ncclCommInitRank) */
	uint64_t comm_instance; /* init generation of the communicator on this
				 * rank (bumped by every re-init); 0: unknown,
				 * then sequence resets are detected instead */
	uint64_t seq;		/* per-communicator sequence number */
	uint32_t rank;		/* rank within the communicator */
	uint32_t nranks;	/* communicator size */
	int64_t entry_ns;	/* host entry time, wall clock (CLOCK_REALTIME) */
	uint64_t clock_err_ns;	/* error bound of that node's wall clock */
	uint32_t pid;		/* process of the rank */
	const char *node;	/* its node name (borrowed for the call) */
};

struct straggler_opts {
	size_t sz;		  /* sizeof(struct straggler_opts) */
	double min_lag_ratio;	  /* hot: median lag / period >= this (0.05) */
	uint64_t min_lag_ns;	  /* hot: median lag >= this (2 ms) */
	double min_last_fraction; /* hot: arrives clearly last this often (0.5) */
	double clear_ratio;	  /* cool: lag ratio < min_lag_ratio * this (0.5) */
	uint32_t confirm_windows; /* hot windows in a row to confirm (3) */
	uint32_t clear_windows;	  /* cool windows in a row to clear (3) */
	uint32_t missing_clear;	  /* windows without events that clear (10) */
	uint32_t min_collectives; /* collectives per window to judge a rank (5) */
	double min_participation; /* ranks present / nranks for a collective
				   * to count (0.5) */
	uint64_t max_skew_ns;	  /* arrivals further than this from the median
				   * are misaligned, not late (30 s) */
	double ewma_alpha;	  /* weight of the newest window in score (0.3) */
	uint32_t max_tracked;	  /* (communicator, rank) states kept (4096) */
};

enum straggler_state {
	STRAGGLER_OK = 0,
	STRAGGLER_SUSPECT = 1, /* hot, not yet for confirm_windows */
	STRAGGLER_CONFIRMED = 2,
};

/* One (communicator, rank) as of the last window. */
struct straggler_rank {
	char job[DIAG_NAME_LEN];
	uint64_t communicator; /* comm_hash */
	uint32_t rank;
	uint32_t pid;
	char node[DIAG_NAME_LEN];
	double lag_seconds;    /* median lag (beyond the clock bound) last window */
	double score;	       /* EWMA of lag / period: the share of the
				* collective period everyone waits for it */
	double window_score;   /* lag / period of the last window alone */
	double last_fraction;  /* of its collectives last window */
	double period_seconds; /* the communicator's collective period */
	uint32_t collectives;  /* judged last window */
	uint32_t state;	       /* enum straggler_state */
	int64_t since_ns;      /* start of the hot streak that confirmed it */
	uint32_t missing_windows;
};

enum straggler_change { STRAGGLER_CONFIRM = 1, STRAGGLER_CLEAR = 2 };

struct straggler_transition {
	uint32_t change; /* enum straggler_change */
	bool missing;	 /* CLEAR because the rank stopped reporting */
	int64_t at_ns;	 /* end of the window that decided it */
	struct straggler_rank r;
};

struct straggler_stats {
	uint64_t windows;
	uint64_t events;	      /* handed in */
	uint64_t events_used;	      /* contributed a lag */
	uint64_t events_misaligned;   /* further than max_skew from the median */
	uint64_t events_duplicate;    /* same rank twice in one collective */
	uint64_t events_bad;	      /* rank >= nranks, nranks 0 */
	uint64_t collectives;	      /* judged */
	uint64_t collectives_partial; /* too few ranks present: skipped */
	uint64_t seq_resets;	      /* sequence went backwards on a rank */
	uint64_t tracked_dropped;     /* (comm, rank) states refused: table full */
	uint64_t transitions_dropped; /* out[] too small */
	uint64_t tracked;	      /* states held now */
};

struct straggler_detector;

/* NULL opts: defaults.  Returns NULL (errno set) on bad options / memory. */
struct straggler_detector *straggler_detector__new(const char *job,
						   const struct straggler_opts *opts);
void straggler_detector__free(struct straggler_detector *d);

/*
 * Judges one window [start_ns, end_ns) from its collective events (any
 * order).  Confirmations and clearings are written to out (up to max_out;
 * more are counted as dropped).  Returns the number written or -errno.
 */
int straggler_detector__window(struct straggler_detector *d, const struct diag_coll_event *ev,
			       size_t n, int64_t start_ns, int64_t end_ns,
			       struct straggler_transition *out, size_t max_out);

/*
 * Copies up to max tracked ranks (confirmed only, or all) into out, the
 * most suspicious first (state, then score).  Returns how many there are.
 */
size_t straggler_detector__list(const struct straggler_detector *d, bool confirmed_only,
				struct straggler_rank *out, size_t max);

void straggler_detector__stats(const struct straggler_detector *d, struct straggler_stats *st);

#endif /* STRATA_DIAGNOSE_STRAGGLER_H */
