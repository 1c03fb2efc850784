/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Page's CUSUM over Bernoulli observations: "was this rank late at this
 * collective?", one observation per collective.  Two simple hypotheses
 * about the probability p of a late observation:
 *
 *   H0 (healthy):   p <= p0 = 1/nranks + margin   (last no more often than
 *                   chance, plus a margin; and only when really late)
 *   H1 (straggler): p >= p1, for two alternatives at once:
 *                   p1[0] = max(p1_min, p0 + p1_gap)   (a marginal straggler:
 *                   late about half the time) and
 *                   p1[1] = max(p1_strong, p1[0])      (a clear one: late
 *                   nearly always; decides in half the collectives)
 *
 * Each statistic S_k = max(0, S_k + llr_k), llr_k = ln(p1[k]/p0) for a late
 * collective and ln((1-p1[k])/(1-p0)) otherwise, decides H1 when
 * S_k >= h.  exp(S_k) is a supermartingale under any p <= p0 while
 * S_k > 0, so an excursion of S_k above 0 reaches h with probability at
 * most exp(-h), and S_k's mean number of collectives between false
 * decisions is at least exp(h) (Lorden 1971) -- for independent
 * observations.  h = ln(2 * arl0): the two tests together raise at most
 * 1/arl0 false decisions per collective.  The test for p1[0] with the
 * roles swapped (evidence for H0 against H1, bound arl_clear) decides that
 * a confirmed rank is healthy again.
 *
 * Pure computation, no I/O; docs/diagnosis.md gives the numbers.
 */
#ifndef STRATA_DIAGNOSE_SEQTEST_H
#define STRATA_DIAGNOSE_SEQTEST_H

#include <stdbool.h>
#include <stdint.h>

#define SEQTEST_ALT 2

struct seqtest_params {
	double margin;	  /* p0 = 1/nranks + margin (0.05) */
	double p1_min;	  /* (0.5) */
	double p1_gap;	  /* (0.2) */
	double p1_strong; /* (0.9) */
	double arl0;	  /* (1e12) */
	double arl_clear; /* (1e6) */
};

/* The test for one communicator size. */
struct seqtest_design {
	double p0, p1[SEQTEST_ALT]; /* the hypotheses above */
	double up[SEQTEST_ALT];	    /* llr of a late observation (> 0) */
	double down[SEQTEST_ALT];   /* llr of an on-time one (< 0) */
	double h;		    /* decide H1 at S_k >= h = ln(2 arl0) */
	double h_clear;		    /* decide H0 (after H1) at T >= h_clear */
};

/* Fills d for nranks ranks.  0, or -EINVAL (nranks < 2, a probability
 * outside (0, 1), arl values <= 1, or p0 >= 1 / p1 >= 1). */
int seqtest_design(struct seqtest_design *d, uint32_t nranks, const struct seqtest_params *p);

/* Collectives a rank late at every one needs to reach h from 0. */
uint32_t seqtest_design__min_late(const struct seqtest_design *d);

/* One rank's running statistics. */
struct seqtest {
	double s[SEQTEST_ALT];	      /* evidence for H1 (CUSUM, >= 0) */
	double t;		      /* evidence for H0 (reversed CUSUM on
				       * alternative 0, >= 0) */
	int64_t zero_ns[SEQTEST_ALT]; /* last observation at which s[k] was
				       * 0: where the change began (the
				       * CUSUM change-point estimate) */
	uint64_t observed;	      /* observations so far */
};

/* The larger evidence as a fraction of h (>= 1: decided) and, in *since,
 * where that statistic began to grow. */
double seqtest__evidence(const struct seqtest *t, const struct seqtest_design *d, int64_t *since);

/* Adds one observation at time at_ns.  Returns true when a statistic
 * reached h with this observation (the caller confirms), false
 * otherwise. */
bool seqtest__observe(struct seqtest *t, const struct seqtest_design *d, bool late, int64_t at_ns);

/* true when the reversed statistic has reached h_clear. */
bool seqtest__healthy(const struct seqtest *t, const struct seqtest_design *d);

#endif /* STRATA_DIAGNOSE_SEQTEST_H */
