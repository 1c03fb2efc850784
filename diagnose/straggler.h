/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Straggler detection over NCCL collective events, collective by
 * collective, as the events arrive.
 *
 * The same collective on every rank is (communicator hash, instance,
 * sequence number).  Events are held until every rank of their collective
 * has arrived (or pending_ns of event time has passed: an agent is down,
 * judged with the ranks present); then the collective is judged once
 * (diagnose/collective.h): each rank's lag behind the median arrival, less
 * the clock error bounds, and which rank was clearly last.  A rank was
 * "late" at a collective when it was clearly last by at least
 * max(min_lag_ns, min_lag_ratio * period), the period being the
 * communicator's median time per sequence step.  Those late/on-time
 * observations drive a sequential test per (communicator, rank)
 * (diagnose/seqtest.h): a rank late at every collective is confirmed after
 * a few dozen collectives, a marginal one later, a healthy one with a
 * designed false-alarm rate (arl0 collectives).  A confirmed rank clears
 * when the reversed test finds it healthy and at least hold_ns passed, or
 * as missing when its communicator goes on without it for missing_ns.
 * docs/diagnosis.md gives the numbers.
 *
 * Pure computation: no I/O, no clocks, no globals; time is the events'
 * own.  One detector per job; the caller (the server) feeds it the
 * collectives of every batch as they come, in any order across batches.
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
				 * rank; 0: unknown */
	uint64_t seq;		/* per-communicator sequence number */
	uint32_t rank;		/* rank within the communicator */
	uint32_t nranks;	/* communicator size */
	int64_t entry_ns;	/* host entry time, wall clock (CLOCK_REALTIME) */
	uint64_t clock_err_ns;	/* error bound of that node's wall clock */
	uint32_t pid;		/* process of the rank */
	const char *node;	/* its node name (copied) */
};

struct straggler_opts {
	size_t sz;		  /* sizeof(struct straggler_opts) */
	double min_lag_ratio;	  /* late: lag >= this * period (0.025) */
	uint64_t min_lag_ns;	  /* late: lag >= this (2 ms) */
	double margin;		  /* H0: p0 = 1/nranks + margin (0.05) */
	double p1_min;		  /* H1: p1 = max(p1_min, p0 + p1_gap) (0.5) */
	double p1_gap;		  /* (0.2) */
	double p1_strong;	  /* a second H1 for clear stragglers (0.9) */
	double arl0;		  /* collectives between false confirmations,
				   * at least (1e12) */
	double arl_clear;	  /* collectives between false clearings of a
				   * persisting straggler, at least (1e6) */
	uint64_t hold_ns;	  /* confirmed at least this long (60 s) */
	uint64_t pending_ns;	  /* wait for missing ranks this long (30 s) */
	uint64_t missing_ns;	  /* communicator goes on without a confirmed
				   * rank this long: cleared as missing (60 s) */
	uint32_t min_intervals;	  /* period samples before judging (8) */
	double min_participation; /* ranks present / nranks for a collective
				   * to count (0.5) */
	uint64_t max_skew_ns;	  /* arrivals further than this from the median
				   * are misaligned, not late (30 s) */
	double ewma_alpha;	  /* weight of the newest collective in the
				   * reported lag, score, last fraction (0.05) */
	uint32_t max_tracked;	  /* (communicator, rank) states kept (4096) */
	uint32_t max_comms;	  /* communicators with a period (1024) */
	uint32_t max_pending;	  /* arrivals waiting for their collective
				   * (262144) */
};

enum straggler_state {
	STRAGGLER_OK = 0,
	STRAGGLER_SUSPECT = 1, /* evidence past half the threshold */
	STRAGGLER_CONFIRMED = 2,
};

/* One (communicator, rank) as of its last judged collective. */
struct straggler_rank {
	char job[DIAG_NAME_LEN];
	uint64_t communicator; /* comm_hash */
	uint32_t rank;
	uint32_t nranks;
	uint32_t pid;
	char node[DIAG_NAME_LEN];
	double lag_seconds;    /* EWMA of its lag (beyond the clock bound) */
	double score;	       /* EWMA of lag / period: the share of the
				* collective period everyone waits for it */
	double window_score;   /* lag_seconds / period_seconds now */
	double last_fraction;  /* EWMA: how often it arrived clearly last */
	double period_seconds; /* the communicator's collective period */
	double evidence;       /* CUSUM / threshold: >= 1 confirms */
	uint64_t collectives;  /* observations of the test so far */
	uint32_t state;	       /* enum straggler_state */
	int64_t since_ns;      /* onset: where the evidence started to grow */
	int64_t decided_ns;    /* event time of the confirmation (0: none) */
	int64_t last_seen_ns;  /* its last judged arrival */
};

enum straggler_change { STRAGGLER_CONFIRM = 1, STRAGGLER_CLEAR = 2 };

struct straggler_transition {
	uint32_t change; /* enum straggler_change */
	bool missing;	 /* CLEAR because the rank stopped reporting */
	int64_t at_ns;	 /* event time of the collective that decided it */
	struct straggler_rank r;
};

struct straggler_stats {
	uint64_t events;	      /* handed in */
	uint64_t events_used;	      /* contributed a lag */
	uint64_t events_misaligned;   /* further than max_skew from the median */
	uint64_t events_duplicate;    /* same rank twice in one collective */
	uint64_t events_bad;	      /* rank >= nranks, nranks < 2 */
	uint64_t events_late;	      /* for a collective judged already */
	uint64_t collectives;	      /* judged */
	uint64_t collectives_partial; /* too few ranks present: skipped */
	uint64_t collectives_timeout; /* judged without every rank */
	uint64_t collectives_warmup;  /* before the period was known */
	uint64_t pending_dropped;     /* arrivals judged early (table full) */
	uint64_t tracked_dropped;     /* (comm, rank) states refused: full */
	uint64_t comms_dropped;	      /* communicators refused: table full */
	uint64_t transitions_dropped; /* out[] too small */
	uint64_t collectives_nomem;   /* not judged: no memory for its arrivals */
	uint64_t pending;	      /* arrivals held now */
	uint64_t tracked;	      /* states held now */
};

struct straggler_detector;

/* NULL opts: defaults.  Returns NULL (errno set) on bad options / memory. */
struct straggler_detector *straggler_detector__new(const char *job,
						   const struct straggler_opts *opts);
void straggler_detector__free(struct straggler_detector *d);

/*
 * Adds collective events (any order) and judges every collective that is
 * complete, or waited pending_ns of event time for missing ranks.
 * Confirmations and clearings are written to out (up to max_out; more are
 * counted as dropped).  Returns the number written or -errno.
 */
int straggler_detector__add(struct straggler_detector *d, const struct diag_coll_event *ev,
			    size_t n, struct straggler_transition *out, size_t max_out);

/* Judges every pending collective now, with the ranks present (the end of
 * a replayed range).  Returns transitions or -errno, like __add. */
int straggler_detector__flush(struct straggler_detector *d, struct straggler_transition *out,
			      size_t max_out);

/*
 * The job stopped reporting: judges what is pending with the ranks present
 * and clears every confirmed rank as missing.  Returns transitions or
 * -errno, like __add.
 */
int straggler_detector__expire(struct straggler_detector *d, struct straggler_transition *out,
			       size_t max_out);

/*
 * Copies up to max tracked ranks (confirmed only, or all) into out, the
 * most suspicious first (state, then evidence).  Returns how many there
 * are.
 */
size_t straggler_detector__list(const struct straggler_detector *d, bool confirmed_only,
				struct straggler_rank *out, size_t max);

void straggler_detector__stats(const struct straggler_detector *d, struct straggler_stats *st);

#endif /* STRATA_DIAGNOSE_STRAGGLER_H */
