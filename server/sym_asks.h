/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The build-ids the server asked each node for (listed missing in the
 * answer to that node's batch).  A symbol upload is accepted only for an
 * id asked of the node that sends it (X-Strata-Node), within ttl: nobody
 * can pre-plant files for ids no node reported, nor answer another node's
 * asks.  Bounded: a fixed table of (node, id) hashes; when a probe run is
 * full the oldest ask in it is dropped (counted).  Thread-safe.
 */
#ifndef STRATA_SERVER_SYM_ASKS_H
#define STRATA_SERVER_SYM_ASKS_H

#include <stdint.h>

struct sym_asks_stats {
	uint64_t asked, dropped;   /* noted; pushed out while still live */
	uint64_t allowed, refused; /* uploads checked */
};

struct sym_asks;

/* max asks kept (0: 65536), ttl_ns (0: 1 hour).  NULL when out of memory. */
struct sym_asks *sym_asks__new(uint32_t max, uint64_t ttl_ns);
void sym_asks__free(struct sym_asks *a);

void sym_asks__note(struct sym_asks *a, const char *node, const char *hex, uint64_t now_ns);
/* 1 when hex was asked of node within ttl (counted either way). */
int sym_asks__asked(struct sym_asks *a, const char *node, const char *hex, uint64_t now_ns);
void sym_asks__stats(struct sym_asks *a, struct sym_asks_stats *st);

#endif /* STRATA_SERVER_SYM_ASKS_H */
