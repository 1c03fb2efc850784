// SPDX-License-Identifier: Apache-2.0
#include "server/pb_budget.h"

#include <stdint.h>
#include <stdlib.h>

/* 16 bytes: what follows keeps malloc's alignment. */
struct pb_hdr {
	size_t size; /* with the header */
	struct mem_budget *shared;
};
_Static_assert(sizeof(struct pb_hdr) == 16, "pb_hdr keeps 16-byte alignment");

static void *pb_alloc(void *data, size_t size)
{
	struct pb_budget *pb = data;
	size_t total = size + sizeof(struct pb_hdr);
	struct pb_hdr *h;

	if (size > SIZE_MAX - sizeof(*h) || total > pb->max - pb->used) {
		pb->max_refused = 1;
		return NULL;
	}
	if (mem_budget__take(pb->shared, total)) {
		pb->shared_refused = 1;
		return NULL;
	}
	h = malloc(total);
	if (!h) {
		mem_budget__give(pb->shared, total);
		return NULL;
	}
	h->size = total;
	h->shared = pb->shared;
	pb->used += total;
	return h + 1;
}

static void pb_free(void *data, void *p)
{
	struct pb_budget *pb = data; /* NULL after the unpack */
	struct pb_hdr *h;

	if (!p)
		return;
	h = (struct pb_hdr *)p - 1;
	if (pb)
		pb->used -= h->size;
	mem_budget__give(h->shared, h->size);
	free(h);
}

void pb_budget__init(struct pb_budget *pb, size_t max, struct mem_budget *shared)
{
	*pb = (struct pb_budget){ .a = { pb_alloc, pb_free, pb }, .shared = shared, .max = max };
}

static void *no_alloc(void *data, size_t size)
{
	return NULL;
}

ProtobufCAllocator pb_budget__freer(void)
{
	return (ProtobufCAllocator){ no_alloc, pb_free, NULL };
}
