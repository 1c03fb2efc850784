/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Straggler and hang diagnosis at ingest: every stored batch's NCCL
 * collectives go to their job's straggler detector (diagnose/straggler.h)
 * at once, so a decision waits for the evidence, not for a window to
 * close; the same batch's calls in flight, thread states and exits go with
 * them to the job's hang detector (diagnose/hang.h, server/diag_hang.h).  The
 * detector's confirmations and clearings are the one decision behind
 * /api/v1/stragglers, the strata_straggler_* metrics and the Alertmanager
 * webhook (POSTed by this module's thread, never from an agent's upload).
 * A job that sends no collective for idle_ns (wall clock) has ended or
 * lost its agents: its confirmed ranks clear as missing and its state is
 * freed.  Jobs are a bounded table (max_jobs, refusals counted); rank
 * identity per (node, pid, communicator) is a bounded cache.
 *
 * Past ranges (diag_live__replay): a fresh detector over the stored
 * collectives, so a post-mortem finds the straggler of a job that ended.
 */
#ifndef STRATA_SERVER_DIAG_LIVE_H
#define STRATA_SERVER_DIAG_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diagnose/comm_align.h"
#include "diagnose/hang.h"
#include "diagnose/straggler.h"
#include "server/store.h"

#include "strata.pb-c.h"

struct capture_triggers;
struct diag_clocks;
struct diag_strings;

struct diag_live_opts {
	size_t sz;
	uint32_t max_jobs;			/* 64 */
	uint64_t idle_ns;			/* 60 s */
	const char *alert_webhook;		/* NULL: no webhook */
	const char *external_url;		/* links in the webhook payload */
	const struct straggler_opts *straggler; /* NULL: defaults */
	const struct hang_opts *hang;		/* NULL: defaults */
	struct store *store;			/* hang reports are kept there (NULL: not kept) */
	/* deep captures on confirmations and on schedule (NULL: none) */
	struct capture_triggers *triggers;
};

struct diag_live_stats {
	uint64_t batches, events, events_no_job, events_no_rank, events_unaligned;
	uint64_t jobs, jobs_dropped, jobs_expired, rank_cache_resets;
	uint64_t collectives, collectives_partial, collectives_timeout, collectives_warmup;
	uint64_t states_dropped, comms_dropped, pending_dropped, transitions_dropped;
	uint64_t collectives_nomem; /* not judged: no memory for their arrivals */
	uint64_t alerts_sent, alerts_failed, alerts_dropped;
	uint64_t hangs, hang_clears, mismatches, hangs_dropped, hang_store_errors;
	struct comm_align_stats align; /* recovered communicators (comm_align.h) */
};

struct diag_live;

struct diag_live *diag_live__new(const struct diag_live_opts *o);
/* Starts the thread that expires idle jobs and sends webhooks (0 or -errno). */
int diag_live__start(struct diag_live *l);
void diag_live__free(struct diag_live *l);

/* Feeds the collectives of one stored (not duplicate) batch.  now_ns: the
 * server's wall clock.  0 or -errno. */
int diag_live__batch(struct diag_live *l, const Strata__V1__Batch *b, uint64_t now_ns);

/*
 * Feeds collective events of one job that were read from the store rather
 * than from a batch at ingest (server/diag_shared.h: the replica owning
 * the job reads every replica's batches there).  0 or -errno.
 */
int diag_live__feed(struct diag_live *l, const char *job, const struct diag_coll_event *ev,
		    size_t n, uint64_t now_ns);

/*
 * The hang detection of a job whose inputs were read from the store
 * (server/diag_shared.c): fn feeds job's hang detector under the lock and
 * returns how many NCCL calls it fed (non-zero: the job is not idle);
 * then the detector decides, and its confirmations and clearings go out
 * as those of diag_live__batch (store, webhook, captures).  create: make
 * the job's state when it has none (else only an existing job is fed).
 * 0, or -ENOSPC when the job table is full (counted).
 */
typedef size_t (*diag_hang_feed_fn)(void *ctx, struct hang_detector *hd);
int diag_live__feed_hangs(struct diag_live *l, const char *job, int create, diag_hang_feed_fn fn,
			  void *ctx, uint64_t now_ns);

/* Frees job's state without a transition (another replica owns it now and
 * carries its decisions on). */
void diag_live__forget(struct diag_live *l, const char *job);

/* Expires jobs idle since now_ns - idle_ns (the thread calls it). */
void diag_live__tick(struct diag_live *l, uint64_t now_ns);

/* Tracked ranks of one job (NULL: every job), confirmed only or all; the
 * most suspicious first per job.  Returns how many there are (may exceed
 * max). */
size_t diag_live__stragglers(struct diag_live *l, const char *job, int confirmed_only,
			     struct straggler_rank *out, size_t max);

/* Ongoing hangs and recent mismatches of one job (NULL: every job); returns
 * how many there are (may exceed max). */
size_t diag_live__hangs(struct diag_live *l, const char *job, struct hang_report *out, size_t max);

/* One straggler episode of a past range. */
struct diag_episode {
	struct straggler_rank r; /* as confirmed (since, decided_ns) */
	int64_t until_ns;	 /* cleared at (0: still confirmed at `to`) */
	int missing;		 /* cleared because it stopped reporting */
};

/*
 * Judges the stored collectives of job (NULL: every job) in [from_ns,
 * to_ns) with a fresh detector per job, in 10-s slices; writes up to max
 * episodes (confirmed at some point in the range) to out and returns how
 * many there are, or -errno.  *truncated is set when a slice held more
 * events than the bound.
 */
int diag_live__replay(struct store *st, const char *job, uint64_t from_ns, uint64_t to_ns,
		      const struct straggler_opts *o, struct diag_episode *out, size_t max,
		      int *truncated);

/* What the hang detection needs of a collective besides its event. */
struct diag_coll_call {
	const char *op; /* lives as long as the reader */
	uint64_t bytes;
	int64_t exit_ns; /* its return (stored collectives returned) */
};

/* A job's stored collectives as detector events (point-to-point calls and
 * calls without a rank left out), oldest first, and call[i] of each ev[i];
 * the events' node names live as long as the reader. */
struct diag_coll_read {
	struct diag_coll_event *ev;
	struct diag_coll_call *call;
	size_t n, cap;
	struct diag_clocks *clocks;
	struct diag_strings *names;
};

/* Reads job's collectives entered in [from_ns, to_ns), at most limit
 * (*truncated set when more matched), with each node's clock error bound.
 * 0 or -errno; diag_coll_read__fini in every case. */
int diag_coll_read__load(struct diag_coll_read *c, struct store *st, const char *job,
			 uint64_t from_ns, uint64_t to_ns, uint32_t limit, int *truncated);
/* The same, of each process's latest collective per communicator entered
 * in [from_ns, to_ns) (STORE_EVENT_LAST_COLLECTIVE). */
int diag_coll_read__load_last(struct diag_coll_read *c, struct store *st, const char *job,
			      uint64_t from_ns, uint64_t to_ns, uint32_t limit, int *truncated);
void diag_coll_read__fini(struct diag_coll_read *c);

void diag_live__stats(struct diag_live *l, struct diag_live_stats *st);
/* strata_straggler_* and strata_alert_webhooks_total (docs/metrics.md). */
void diag_live__metrics(struct diag_live *l, FILE *out);

#endif /* STRATA_SERVER_DIAG_LIVE_H */
