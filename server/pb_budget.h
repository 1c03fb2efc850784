/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A protobuf-c allocator with a byte budget, so that unpacking a batch is
 * bounded in memory, not only in input bytes: an empty repeated message
 * is 2 bytes on the wire and a struct plus a pointer once unpacked, so a
 * small zstd body of 64 MiB of them would otherwise cost gigabytes before
 * any validation.  Every allocation carries a 16-byte header with its size
 * and the shared budget it was taken from, so freeing (with pb_budget_free,
 * at any later time) gives the bytes back exactly.
 */
#ifndef STRATA_SERVER_PB_BUDGET_H
#define STRATA_SERVER_PB_BUDGET_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "server/mem_budget.h"

struct pb_budget {
	ProtobufCAllocator a;	   /* pass &pb->a to protobuf-c's unpack */
	struct mem_budget *shared; /* may be NULL */
	size_t used, max;	   /* this unpack: bytes now, its bound */
	int shared_refused;	   /* an allocation the shared budget refused */
	int max_refused;	   /* one that would have passed max */
};

/* An allocator for one unpack: at most max bytes (headers included). */
void pb_budget__init(struct pb_budget *pb, size_t max, struct mem_budget *shared);

/* An allocator that frees (for free_unpacked, at any time) what one of
 * pb_budget__init allocated; it allocates nothing. */
ProtobufCAllocator pb_budget__freer(void);

#endif /* STRATA_SERVER_PB_BUDGET_H */
