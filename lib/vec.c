// SPDX-License-Identifier: Apache-2.0
#include "lib/vec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void *vec_push(struct vec *a, size_t size)
{
	if (a->n == a->cap) {
		uint32_t ncap = a->cap ? a->cap * 2 : 64;
		void *nv = realloc(a->v, (size_t)ncap * size);

		if (!nv)
			return NULL;
		a->v = nv;
		a->cap = ncap;
	}
	return (char *)a->v + (size_t)a->n++ * size;
}

int64_t vec_add_indexed(struct vec *a, struct profile_htab *h, uint64_t hash, const void *elem,
			size_t size)
{
	void *slot = vec_push(a, size);

	if (!slot)
		return -ENOMEM;
	memcpy(slot, elem, size);
	if (profile_htab__insert(h, hash, a->n - 1)) {
		a->n--;
		return -ENOMEM;
	}
	return a->n - 1;
}
