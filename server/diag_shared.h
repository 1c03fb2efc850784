/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Straggler and hang diagnosis of replicated servers (server/replicas.h):
 * a job's ranks may send their batches to different replicas, so no
 * replica sees all of a job at ingest.  Instead the job's owner reads the job's
 * collectives from the shared store every poll: those entered in the last
 * lookback (30 s: an agent period, the upload and a store write, twice
 * over), each fed to its straggler detector (server/diag_live.h) once
 * (the events of the previous read are remembered, so a late batch's
 * events are fed when they show up, in any order).  A replica that stops
 * owning a job drops its state silently: the new owner's first read goes
 * back one lookback and carries on.  Non-owners only ingest.
 *
 * NCCL hangs likewise: the owner reads the job's calls in flight, thread
 * states, exits and its nodes' latest batch ends of the lookback
 * (server/diag_shared_hang.h) for the job's hang detector.  A hang is
 * judged on the agents' observations (diagnose/hang.h), so a new owner
 * decides a hang that began before it took over as soon as its first read
 * shows the ranks still waiting; its record in the store has the
 * episode's id, so the store keeps one.  A rank missing from a hang that
 * began before the lookback completed nothing since: a job new to the
 * replica first gets each rank's last collective of the hour before.
 */
#ifndef STRATA_SERVER_DIAG_SHARED_H
#define STRATA_SERVER_DIAG_SHARED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "server/capture.h"
#include "server/diag_live.h"
#include "server/replicas.h"
#include "server/store.h"

struct diag_shared_opts {
	size_t sz;
	struct store *store;
	struct diag_live *live;	   /* the detectors and their alerts */
	struct replicas *replicas; /* who owns which job */
	uint64_t poll_ns;	   /* 2 s */
	uint64_t lookback_ns;	   /* 30 s */
	uint32_t max_jobs;	   /* 64 */
	uint32_t max_events;	   /* per job and read (500000) */
	/* a job new to this replica: how far before the lookback its
	 * ranks' last collectives are looked for (1 h), so that a rank
	 * missing from a hang older than the lookback is named with its
	 * last collective */
	uint64_t seed_ns;
	/* deep captures: reloaded from the store every poll, so a capture
	 * made at one replica (API, or a trigger at a job's owner) is
	 * ordered by all, whichever an agent sends to (NULL: none) */
	struct capture_registry *captures;
};

struct diag_shared;

struct diag_shared *diag_shared__new(const struct diag_shared_opts *o);
/* Starts the polling thread (0 or -errno). */
int diag_shared__start(struct diag_shared *d);
void diag_shared__free(struct diag_shared *d);

/* One poll: the owned jobs' new collectives to their detectors.  0 or
 * -errno (the store failed). */
int diag_shared__poll(struct diag_shared *d, uint64_t now_ns);

/* strata_replica_jobs_owned, strata_replica_polls_total, ... */
void diag_shared__metrics(struct diag_shared *d, FILE *out);

#endif /* STRATA_SERVER_DIAG_SHARED_H */
