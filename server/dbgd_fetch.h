/* SPDX-License-Identifier: Apache-2.0 */
/*
 * debuginfod for strata-server, off the request path: build-ids the server
 * has no file for are queued to fetcher threads (each with its own
 * client), which ask debuginfod for the executable and warm the client's
 * cache with the debug file, outside every lock of the server.  Ingest
 * never waits: a frame whose build-id is still being fetched is stored
 * unresolved and resolved at query time once the file is here.  Answers
 * are cached: found (the file's path), and not found for negative_ttl,
 * so a batch of thousands of unknown build-ids costs each one query per
 * TTL.  Bounded: pending queries (max_pending; more are not asked, and
 * counted) and remembered answers (max_entries; the oldest goes).
 * Thread-safe.
 */
#ifndef STRATA_SERVER_DBGD_FETCH_H
#define STRATA_SERVER_DBGD_FETCH_H

#include <stddef.h>
#include <stdint.h>

struct dbgd_fetch_opts {
	size_t sz;
	uint32_t threads;	  /* fetchers (2) */
	uint32_t max_pending;	  /* queued or in flight (1024) */
	uint32_t max_entries;	  /* remembered answers (16384) */
	uint64_t negative_ttl_ns; /* "not found" remembered this long (10 min) */
};

struct dbgd_fetch_stats {
	uint64_t queued, found, not_found; /* queries asked and answered */
	uint64_t negative_hits;		   /* lookups answered by a cached "not found" */
	uint64_t not_asked;		   /* queue or table full */
	uint64_t forgotten;		   /* answers pushed out of the table */
	uint64_t pending;		   /* now */
};

enum dbgd_state {
	DBGD_FOUND,	/* debuginfod has the executable: path */
	DBGD_NONE,	/* it has none (answered, cached for the TTL) */
	DBGD_PENDING,	/* asked, no answer yet */
	DBGD_QUEUED,	/* asked just now (counts against a batch's cap) */
	DBGD_NOT_ASKED, /* unknown, not asked (may_queue 0, or full) */
};

struct dbgd_fetch;

/* NULL + errno. */
struct dbgd_fetch *dbgd_fetch__new(const struct dbgd_fetch_opts *o);
/* Starts the fetchers (0 or -errno). */
int dbgd_fetch__start(struct dbgd_fetch *f);
/* Stops them after the queries in flight. */
void dbgd_fetch__free(struct dbgd_fetch *f);

/* What is known of id[0..len); queues it when unknown and may_queue.
 * Never waits on the network. */
enum dbgd_state dbgd_fetch__lookup(struct dbgd_fetch *f, const uint8_t *id, size_t len,
				   int may_queue, char *path, size_t sz);

void dbgd_fetch__stats(struct dbgd_fetch *f, struct dbgd_fetch_stats *st);

#endif /* STRATA_SERVER_DBGD_FETCH_H */
