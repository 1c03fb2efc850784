/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store's sizes for /metrics, read at most once a minute.  Counting what
 * a store holds scans its largest tables (ClickHouse: uniqExact over every
 * stack's frames and count() of the sample tables; SQLite: COUNT(*) of
 * them): a Prometheus scraping every 15 s, or several of them, must not run
 * one each time against billions of rows.  The scrape that finds the sizes
 * older than STORE_SIZES_EVERY_NS claims the next read; the others answer
 * with what is kept.  Lock-free, so a zeroed struct is a valid, empty cache
 * (struct server is zero-initialised).
 */
#ifndef STRATA_SERVER_STORE_SIZES_H
#define STRATA_SERVER_STORE_SIZES_H

#include <stdint.h>

#include "server/store.h"

#define STORE_SIZES_EVERY_NS (60ULL * 1000000000ULL)

struct store_sizes_cache {
	uint64_t claimed_ns; /* mono_ns of the last read claimed; 0 never (atomic) */
	uint64_t read_ns;    /* of the last read that succeeded; 0 none (atomic) */
	uint64_t v[4];	     /* stacks, cpu_rows, event_rows, bytes_on_disk (atomic) */
	uint64_t reads;	     /* reads run, failed ones included (atomic) */
};

/*
 * The sizes to show at now_ns (monotonic): read from s when the kept ones
 * are STORE_SIZES_EVERY_NS old and no other caller is reading them; a
 * failed read is tried again a period later.  *age_ns: how old they are.
 * -EAGAIN when none was ever read, -EOPNOTSUPP when the store has no
 * sizes op.
 */
int store_sizes__get(struct store_sizes_cache *c, struct store *s, uint64_t now_ns,
		     struct store_sizes *out, uint64_t *age_ns);

#endif /* STRATA_SERVER_STORE_SIZES_H */
