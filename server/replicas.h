/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Several strata-server replicas on one shared store (ClickHouse): any
 * replica ingests any batch; each job is diagnosed by exactly one replica,
 * its owner.  Membership: every replica writes a heartbeat to the store
 * every beat; a replica whose latest beat is older than ttl is gone.
 * Ownership: rendezvous (highest random weight) hashing of the job over
 * the live replicas, so every replica with the same view names the same
 * owner without talking to the others, and a replica that leaves or joins
 * moves only the jobs it owned or now owns.  A replica whose own view is
 * older than ttl (the store unreachable) owns nothing: it could not read
 * the job's data anyway, and the others have taken over by then.  A
 * replica that just started owns nothing for two beats, until every other
 * replica has seen it (no job with two owners as it joins).  Why a
 * heartbeat and not a lease row, failures, split brain and takeover time:
 * docs/server.md "Replicas".
 */
#ifndef STRATA_SERVER_REPLICAS_H
#define STRATA_SERVER_REPLICAS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "server/store.h"

#define REPLICA_ID_LEN 64 /* ids are shorter */
#define REPLICAS_MAX 64	  /* live replicas tracked (more: counted, left out) */

struct replicas_opts {
	size_t sz;
	const char *id;	     /* this replica (unique among them) */
	uint64_t beat_ns;    /* heartbeat and view refresh period (ttl / 5) */
	uint64_t ttl_ns;     /* a replica silent this long is gone (10 s) */
	struct store *store; /* with ops->replicas */
};

struct replicas;

/* NULL with errno set (EINVAL: no id, an id too long, a store without
 * replicas). */
struct replicas *replicas__new(const struct replicas_opts *o);
/* Starts the heartbeat thread (0 or -errno). */
int replicas__start(struct replicas *r);
void replicas__free(struct replicas *r);

/* One heartbeat and view refresh (the thread calls it every beat). */
int replicas__refresh(struct replicas *r, uint64_t now_ns);

/* Whether this replica owns job now (r NULL: a single server owns all). */
int replicas__owns(struct replicas *r, const char *job, uint64_t now_ns);

/* Rendezvous hashing: the index among ids[0..n) of job's owner (n > 0). */
size_t replicas__owner_of(const char (*ids)[REPLICA_ID_LEN], size_t n, const char *job);

/* strata_replica_* (docs/metrics.md). */
void replicas__metrics(struct replicas *r, FILE *out);

#endif /* STRATA_SERVER_REPLICAS_H */
