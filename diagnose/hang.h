/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL hang detection for one job: some ranks of a communicator have
 * entered collective N and wait in it, others have not entered it, for
 * longer than a threshold (10x the communicator's median period, at least
 * 5 s).  The evidence is what the agents saw: each rank's completed calls
 * (with exit) and, at the end of each batch, the calls in flight (entered,
 * not returned) with when they were seen; a call in flight counts only
 * while its node's latest batch still lists it.  So the decision rests on
 * observations, never on the server's clock: ranks waiting since E and
 * still waiting at T, with T - E >= threshold.
 *
 * Also reported: ranks that called a different collective (op or bytes)
 * at the same sequence number as their peers (a desynchronised rank),
 * whether or not that hangs.  Every rank of a job that pauses at once (a
 * checkpoint) is in no collective: no hang.  Pure computation: no I/O,
 * no globals.
 */
#ifndef STRATA_DIAGNOSE_HANG_H
#define STRATA_DIAGNOSE_HANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diagnose/straggler.h" /* DIAG_NAME_LEN */

#define HANG_OP_LEN 24
#define HANG_MAX_LISTED 16 /* waiting / missing / mismatched ranks named per report */

struct hang_opts {
	size_t sz;
	double period_factor; /* threshold = factor x median period (10) */
	uint64_t min_ns;      /* ... at least this (5 s) */
	uint32_t max_comms;   /* communicators tracked per job (256) */
	uint32_t max_ranks;   /* ranks per communicator (8192) */
};

/* One call of one rank: completed (exit_ns > 0) or in flight when its
 * node's batch ending at as_of_ns was cut. */
struct hang_call {
	uint64_t comm_hash;
	int32_t rank, nranks;
	const char *node;
	uint32_t pid;
	uint64_t seq;
	const char *op;
	uint64_t bytes;
	int64_t entry_ns, exit_ns;
	int64_t as_of_ns; /* in flight: the batch's end */
};

/* A rank as a report names it. */
struct hang_rank {
	int32_t rank;
	char node[DIAG_NAME_LEN];
	uint32_t pid;
	bool known;	  /* a process was seen for the rank */
	int64_t since_ns; /* waiting: its entry */
	/* what it did last: its last completed collective */
	bool has_last;
	uint64_t last_seq;
	char last_op[HANG_OP_LEN];
	int64_t last_exit_ns;
	/* in flight now at another sequence number (desynchronised) */
	bool in_other;
	uint64_t other_seq;
	char other_op[HANG_OP_LEN];
	uint64_t other_bytes;
	/* a CUDA (or other GPU API) call in flight at its node's last batch */
	char gpu_call[40];
	int64_t gpu_call_since_ns;
	/* its NCCL/CUDA thread at its node's last batch (/proc: state,
	 * wait channel, kernel stack folded root first, system call) */
	char sched_state[4];
	char wchan[40];
	char kstack[256];
	int32_t syscall;      /* -1: not in one */
	int64_t exited_ns;    /* 0: alive when last heard */
	int64_t heard_ns;     /* its node's latest batch end */
	char op[HANG_OP_LEN]; /* mismatch: what it called at the sequence number */
	uint64_t bytes;
};

enum hang_kind {
	HANG_MISSING = 1,  /* some ranks wait, others never entered */
	HANG_STALLED = 2,  /* every rank waits in it */
	HANG_MISMATCH = 3, /* ranks called different collectives at one seq */
};

struct hang_report {
	char job[DIAG_NAME_LEN];
	uint32_t kind; /* enum hang_kind */
	uint64_t comm_hash;
	uint64_t seq;
	char op[HANG_OP_LEN]; /* the waiting ranks' (the majority's) call */
	uint64_t bytes;
	int32_t nranks;
	int64_t since_ns;   /* first waiting rank's entry (mismatch: its time) */
	int64_t as_of_ns;   /* latest observation of a rank still waiting */
	int64_t decided_ns; /* the observation that decided it */
	int64_t until_ns;   /* 0: ongoing */
	double threshold_s, period_s;
	uint32_t nwaiting, nmissing, nmismatched; /* all of them */
	struct hang_rank waiting[HANG_MAX_LISTED], missing[HANG_MAX_LISTED];
	struct hang_rank mismatched[HANG_MAX_LISTED];
};

enum hang_change {
	HANG_CONFIRM = 1,
	HANG_CLEAR = 2,
};

struct hang_transition {
	uint32_t change; /* enum hang_change */
	struct hang_report h;
};

struct hang_stats {
	uint64_t calls, inflight, exits;
	uint64_t comms_dropped, ranks_dropped, bad;
	uint64_t comms_evicted; /* idle ones replaced by new ones (a restarted job) */
	/* processes / nodes no rank is bound to, let go of when their table
	 * filled; and those refused anyway (the ranks alone fill it) */
	uint64_t procs_forgotten, nodes_forgotten, procs_dropped, nodes_dropped;
	uint64_t hangs, mismatches;
};

struct hang_detector;

struct hang_detector *hang_detector__new(const char *job, const struct hang_opts *o);
void hang_detector__free(struct hang_detector *d);

/* node's batch ending at as_of_ns arrived: what it listed in flight is
 * current, what it no longer lists is not.  Call before its calls. */
void hang_detector__batch(struct hang_detector *d, const char *node, int64_t as_of_ns);
void hang_detector__call(struct hang_detector *d, const struct hang_call *c);
/* A non-NCCL GPU call (a CUDA call) of (node, pid) in flight at as_of. */
void hang_detector__gpu_call(struct hang_detector *d, const char *node, uint32_t pid,
			     const char *api, int64_t entry_ns, int64_t as_of_ns);
void hang_detector__exit(struct hang_detector *d, const char *node, uint32_t pid, int64_t exit_ns);
/* What (node, pid)'s NCCL/CUDA thread was doing at as_of (see struct
 * hang_rank); syscall -1 when in none. */
void hang_detector__thread_state(struct hang_detector *d, const char *node, uint32_t pid,
				 const char *state, const char *wchan, const char *kstack,
				 int32_t syscall, int64_t as_of_ns);

/*
 * Decides: confirms new hangs and mismatches, clears hangs that are over
 * (the collective completed, or its waiting ranks are gone).  Writes at
 * most max transitions; returns how many there were (may exceed max).
 */
size_t hang_detector__evaluate(struct hang_detector *d, struct hang_transition *out, size_t max);

/* The job stopped reporting: clears every ongoing hang (until = the last
 * observation).  Like __evaluate. */
size_t hang_detector__expire(struct hang_detector *d, struct hang_transition *out, size_t max);

/* Ongoing hangs and the recent mismatches (the last 16), newest first. */
size_t hang_detector__list(const struct hang_detector *d, struct hang_report *out, size_t max);

void hang_detector__stats(const struct hang_detector *d, struct hang_stats *st);

#endif /* STRATA_DIAGNOSE_HANG_H */
