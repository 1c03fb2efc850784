/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Central symbolization: turns a batch's wire stacks into store stacks.
 * Native frames are resolved by build-id against the build-id store (then
 * debuginfod, when DEBUGINFOD_URLS is set) with symbolize/ (libdw:
 * functions, inlines, file:line, demangling; results cached).  A frame
 * that cannot be resolved stays unresolved (module + offset), and its
 * build-id is reported missing so the agent can upload the file.
 * debuginfod is asked in the background (server/dbgd_fetch.h), at most
 * CENTRAL_SYM_DBGD_PER_BATCH new build-ids per batch: a frame whose file
 * is still being fetched is stored unresolved (not reported missing) and
 * resolved at query time.  Thread-safe (one lock around the symbolizer,
 * which is not; no network under it).
 */
#ifndef STRATA_SERVER_CENTRAL_SYM_H
#define STRATA_SERVER_CENTRAL_SYM_H

#include <stddef.h>
#include <stdint.h>

#include "server/buildid_store.h"
#include "server/store.h"
#include "server/sym_cache.h"
#include "symbolize/symbolize.h"
#include "strata.pb-c.h"

#define CENTRAL_SYM_MAX_MISSING 32    /* build-ids asked for per batch */
#define CENTRAL_SYM_DBGD_PER_BATCH 32 /* new debuginfod queries per batch */

struct central_sym_stats {
	uint64_t frames_native, frames_resolved; /* hit rate = resolved / native */
	uint64_t lookups, cache_hits;		 /* symbolizer */
	uint64_t modules_degraded;		 /* symbol table or DWARF refused (symbolize.h) */
	uint64_t missing_build_ids;		 /* frames whose file the server lacks */
	uint64_t debuginfod_found, debuginfod_failed; /* answers */
	uint64_t debuginfod_negative_hits;	      /* "not found", remembered */
	uint64_t debuginfod_not_asked;		      /* queue full */
	uint64_t debuginfod_capped;		      /* over a batch's cap: later */
	uint64_t debuginfod_pending;		      /* now */
	uint64_t frames_pending;		      /* stored unresolved: fetching */
	uint64_t late_resolved;	       /* stored unresolved, resolved at query time */
	struct sym_cache_stats stacks; /* whole symbolized stacks reused */
	/* the strings' generations (central_sym.c): started past a budget,
	 * and old ones freed once no batch or query held them */
	uint64_t generations, generations_freed;
	uint64_t symbolizer_string_bytes; /* the current generation's */
};

struct sym_gen;

/* One batch's symbolized stacks; owns its memory. */
struct sym_batch {
	struct store_stack *stacks; /* one per pb->stacks entry */
	size_t nstacks;
	struct store_frame *frames;
	size_t nframes, cap;
	char (*hex)[BUILDID_HEX_MAX]; /* per mapping */
	char missing[CENTRAL_SYM_MAX_MISSING][BUILDID_HEX_MAX];
	size_t nmissing;
	int uncacheable;	   /* the stack being symbolized lacked a file */
	uint32_t dbgd_queued;	   /* new debuginfod queries of this batch */
	struct central_sym *owner; /* the symbolized strings' holder: */
	struct sym_gen *gen;	   /* ... let go of by sym_batch__fini */
};

struct central_sym;

struct central_sym *central_sym__new(struct buildid_store *bids, int use_debuginfod);
void central_sym__free(struct central_sym *c);

/* Fills out (zeroed by the caller) for the validated batch b; 0 or -errno.
 * out's strings point into b, the symbolizer's generation (held until
 * sym_batch__fini, also on error) and out itself. */
int central_sym__batch(struct central_sym *c, const Strata__V1__Batch *b, struct sym_batch *out);
void sym_batch__fini(struct sym_batch *sb);

/*
 * A native frame stored unresolved (its file came later, e.g. uploaded
 * after the server asked, or fetched from debuginfod since): resolves it
 * now into out[0..n) (innermost first, as symbolizer__resolve).  Returns
 * n, 0 when still unresolved.  *queued counts the debuginfod queries the
 * caller's query made (at most CENTRAL_SYM_DBGD_PER_BATCH; start at 0).
 * out's strings live until central_sym__release(c, *gen) (*gen NULL when
 * n is 0).
 */
int central_sym__resolve_late(struct central_sym *c, const struct store_frame *f,
			      struct sym_frame *out, int max, uint32_t *queued,
			      struct sym_gen **gen);
/* Lets go of strings central_sym__resolve_late handed out (gen may be NULL). */
void central_sym__release(struct central_sym *c, struct sym_gen *gen);
/* The string budgets of a generation (defaults: the symbolizer's 128 MiB,
 * the stack cache's 256 MiB); past either, a fresh one starts. */
void central_sym__set_budgets(struct central_sym *c, size_t symbolizer_bytes,
			      size_t stack_cache_bytes);

void central_sym__stats(struct central_sym *c, struct central_sym_stats *st);

/* The stack id of frames[0..n): a hash of every field, never 0. */
uint64_t store_stack__id(const struct store_frame *frames, uint32_t n);

#endif /* STRATA_SERVER_CENTRAL_SYM_H */
