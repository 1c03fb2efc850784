/* SPDX-License-Identifier: Apache-2.0 */
/* A growable array of fixed-size elements, optionally indexed by a hash
 * table (lib/profile.h: struct profile_htab) for interning. */
#ifndef STRATA_LIB_VEC_H
#define STRATA_LIB_VEC_H

#include <stddef.h>
#include <stdint.h>

#include "lib/profile.h"

struct vec {
	void *v;
	uint32_t n, cap;
};

/* A new (uninitialized) element at the end of a, or NULL on ENOMEM. */
void *vec_push(struct vec *a, size_t size);

/* Appends a copy of elem to a and indexes it under hash in h: the one way
 * an interned table grows.  Its index, or -ENOMEM (nothing added). */
int64_t vec_add_indexed(struct vec *a, struct profile_htab *h, uint64_t hash, const void *elem,
			size_t size);

#endif /* STRATA_LIB_VEC_H */
