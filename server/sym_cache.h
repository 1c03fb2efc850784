/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbolized stacks by wire stack: most stacks of a batch were seen in an
 * earlier window (the training loop repeats), so central symbolization
 * resolves a stack's frames once and copies them afterwards.
 *
 * Keyed by a 128-bit hash of the wire frames (build-id, offset, return
 * flag, names): two independent 64-bit hashes, so a collision (which would
 * give a stack another stack's names) is out of reach (2^-128 per pair).
 * Only stacks whose files were all at hand are put here, so a stack
 * resolved before its binary was uploaded is resolved again later.
 *
 * Bounded: at max_entries the table is emptied and starts over (counted);
 * strings live in a pool that is never freed, and past max_string_bytes
 * no new entries are taken (counted).  Not thread-safe: the caller locks.
 */
#ifndef STRATA_SERVER_SYM_CACHE_H
#define STRATA_SERVER_SYM_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "server/store.h"

struct sym_cache_stats {
	uint64_t entries, hits, misses, resets, refused_full;
	uint64_t string_bytes;
};

struct sym_cache;

struct sym_cache *sym_cache__new(uint32_t max_entries, size_t max_string_bytes);
void sym_cache__free(struct sym_cache *c);

/* The cached stack of key (its frames root first, and its id), or NULL (a
 * miss, counted). */
const struct store_stack *sym_cache__get(struct sym_cache *c, const uint64_t key[2]);
/* Copies st's frames (and their strings) under key.  0 or -errno. */
int sym_cache__put(struct sym_cache *c, const uint64_t key[2], const struct store_stack *st);

void sym_cache__stats(const struct sym_cache *c, struct sym_cache_stats *st);

#endif /* STRATA_SERVER_SYM_CACHE_H */
