/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the build-id store holds, in memory: one entry per file (its size,
 * when it was last used, whether its build-id note was checked), found by
 * hex id, and listed oldest first when room must be made.  Not
 * thread-safe: server/buildid_store.c locks around it.
 */
#ifndef STRATA_SERVER_BUILDID_INDEX_H
#define STRATA_SERVER_BUILDID_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct bid_entry {
	struct bid_entry *next; /* hash chain */
	uint64_t size;		/* bytes on disk */
	uint64_t used_ns;	/* last use (realtime) */
	uint64_t synced_ns;	/* used_ns last written to the file's mtime */
	int verified;		/* its note was read and is its id */
	char hex[];
};

struct buildid_index;

struct buildid_index *buildid_index__new(void);
void buildid_index__free(struct buildid_index *x);

struct bid_entry *buildid_index__get(struct buildid_index *x, const char *hex);
/* Adds hex (not present yet); the entry, or NULL (out of memory). */
struct bid_entry *buildid_index__add(struct buildid_index *x, const char *hex, uint64_t size,
				     uint64_t used_ns);
/* Removes and frees e. */
void buildid_index__del(struct buildid_index *x, struct bid_entry *e);
size_t buildid_index__count(const struct buildid_index *x);

/* Every entry, least recently used first (malloc'd; entries stay valid
 * until deleted).  NULL when empty or out of memory. */
struct bid_entry **buildid_index__by_age(struct buildid_index *x, size_t *n);

#endif /* STRATA_SERVER_BUILDID_INDEX_H */
