/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fixed-size open-addressing index from a two-word key to a slot number,
 * for the detectors' bounded state tables.  No deletion: a table that
 * forgets entries compacts its states and rebuilds the index.
 */
#ifndef STRATA_DIAGNOSE_KEYMAP_H
#define STRATA_DIAGNOSE_KEYMAP_H

#include <stdint.h>

struct keymap_slot {
	uint64_t k1, k2;
	uint32_t v; /* value + 1; 0: empty */
	uint32_t pad;
};

struct keymap {
	struct keymap_slot *slots;
	uint32_t mask;
};

/* Room for at least 2 * max_entries slots.  0 or -ENOMEM. */
int keymap__init(struct keymap *m, uint32_t max_entries);
void keymap__fini(struct keymap *m);
void keymap__clear(struct keymap *m);

/* The value of (k1, k2), or -1 when absent. */
int64_t keymap__get(const struct keymap *m, uint64_t k1, uint64_t k2);
/* Inserts (the caller keeps entries <= max_entries, so a slot is free). */
void keymap__put(struct keymap *m, uint64_t k1, uint64_t k2, uint32_t v);

#endif /* STRATA_DIAGNOSE_KEYMAP_H */
