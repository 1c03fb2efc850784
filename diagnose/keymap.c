// SPDX-License-Identifier: Apache-2.0
#include "diagnose/keymap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int keymap__init(struct keymap *m, uint32_t max_entries)
{
	uint32_t cap = 2;

	while (cap < 2 * (uint64_t)max_entries && cap < (1u << 30))
		cap <<= 1;
	m->slots = calloc(cap, sizeof(*m->slots));
	m->mask = cap - 1;
	return m->slots ? 0 : -ENOMEM;
}

void keymap__fini(struct keymap *m)
{
	free(m->slots);
	m->slots = NULL;
}

void keymap__clear(struct keymap *m)
{
	memset(m->slots, 0, ((size_t)m->mask + 1) * sizeof(*m->slots));
}

static uint32_t hash2(uint64_t a, uint64_t b)
{
	uint64_t h = a ^ (b * 0x9e3779b97f4a7c15ULL);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (uint32_t)h;
}

int64_t keymap__get(const struct keymap *m, uint64_t k1, uint64_t k2)
{
	for (uint32_t i = hash2(k1, k2) & m->mask;; i = (i + 1) & m->mask) {
		const struct keymap_slot *s = &m->slots[i];

		if (!s->v)
			return -1;
		if (s->k1 == k1 && s->k2 == k2)
			return (int64_t)s->v - 1;
	}
}

void keymap__put(struct keymap *m, uint64_t k1, uint64_t k2, uint32_t v)
{
	uint32_t i = hash2(k1, k2) & m->mask;

	while (m->slots[i].v && (m->slots[i].k1 != k1 || m->slots[i].k2 != k2))
		i = (i + 1) & m->mask;
	m->slots[i] = (struct keymap_slot){ .k1 = k1, .k2 = k2, .v = v + 1 };
}
