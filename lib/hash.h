/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one byte-string hash of the user-space code (string pools, caches,
 * the profile's tables): FNV-1a finished with the murmur3 mix, so the low
 * bits, which index power-of-two tables, depend on every input byte.
 */
#ifndef STRATA_HASH_H
#define STRATA_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hash_bytes(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *b = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

#endif /* STRATA_HASH_H */
