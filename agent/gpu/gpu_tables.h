/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Growable, bounded arrays with a hash index, the storage behind every
 * struct gpu_data table: rows are found by a key the caller hashes and
 * compares.  Past max rows, adds fail with -ENOSPC (the caller counts).
 */
#ifndef STRATA_GPU_TABLES_H
#define STRATA_GPU_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "lib/profile.h"

struct gpu_table {
	void *rows; /* elem-sized rows */
	size_t n, cap, max, elem;
	size_t key_off, key_len; /* the key: bytes [key_off, key_off + key_len) of a row */
	struct profile_htab idx;
};

void gpu_table__init(struct gpu_table *t, size_t elem, size_t key_off, size_t key_len, size_t max);
void gpu_table__fini(struct gpu_table *t);
/* The row with this key, or NULL. */
void *gpu_table__find(const struct gpu_table *t, const void *key);
/* The row with this key, added zeroed (key copied) when absent; NULL with
 * *err = -ENOSPC (table full) or -ENOMEM. */
void *gpu_table__get(struct gpu_table *t, const void *key, int *err);
/* Removes the rows for which keep() returns 0 (rebuilding the index). */
int gpu_table__filter(struct gpu_table *t, int (*keep)(const void *row, void *ctx), void *ctx);
/* Tables keyed by process (the key starts with a u32 tgid): removes the
 * rows of the processes in tgids[0..n) (sorted), release() (NULL: none)
 * called on each first.  Returns the rows removed, or -ENOMEM (the index
 * could not be rebuilt: the table is then empty). */
long gpu_table__drop_tgids(struct gpu_table *t, const uint32_t *tgids, size_t n,
			   void (*release)(void *row));
/* Sorted sets of processes (retired, traced): sorts tgids[0..n); the
 * entry of tgid in them, or NULL; whether it is there. */
void gpu_tgids_sort(uint32_t *tgids, size_t n);
uint32_t *gpu_tgid_find(const uint32_t *tgids, size_t n, uint32_t tgid);
int gpu_tgid_in(const uint32_t *tgids, size_t n, uint32_t tgid);

#endif /* STRATA_GPU_TABLES_H */
