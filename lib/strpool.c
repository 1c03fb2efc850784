// SPDX-License-Identifier: Apache-2.0
/*
 * String interning: bump-allocated chunks hold the bytes, an open-address
 * hash table (linear probing, FNV-1a) finds existing copies.  Strings are
 * never freed one by one: their addresses are handed out as "valid until
 * symbolizer__free".
 */
#include "lib/strpool.h"

#include "lib/hash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (64u * 1024)

struct chunk {
	struct chunk *next;
	size_t used, cap;
	char data[];
};

struct slot {
	const char *s; /* NULL = empty */
	size_t len;
	uint64_t hash;
};

struct strpool {
	struct chunk *chunks;
	struct slot *slots;
	size_t cap, n; /* cap: power of two */
	size_t bytes;
};

struct strpool *strpool__new(void)
{
	struct strpool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->cap = 1024;
	p->slots = calloc(p->cap, sizeof(*p->slots));
	if (!p->slots) {
		free(p);
		return NULL;
	}
	p->bytes = p->cap * sizeof(*p->slots);
	return p;
}

void strpool__free(struct strpool *p)
{
	if (!p)
		return;
	while (p->chunks) {
		struct chunk *c = p->chunks;

		p->chunks = c->next;
		free(c);
	}
	free(p->slots);
	free(p);
}

static int grow(struct strpool *p)
{
	size_t ncap = p->cap * 2;
	struct slot *ns;

	if (ncap > SIZE_MAX / sizeof(*ns))
		return -1;
	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -1;
	for (size_t i = 0; i < p->cap; i++) {
		if (!p->slots[i].s)
			continue;
		size_t j = p->slots[i].hash & (ncap - 1);

		while (ns[j].s)
			j = (j + 1) & (ncap - 1);
		ns[j] = p->slots[i];
	}
	free(p->slots);
	p->bytes += (ncap - p->cap) * sizeof(*ns);
	p->slots = ns;
	p->cap = ncap;
	return 0;
}

static char *store(struct strpool *p, const char *s, size_t len)
{
	struct chunk *c = p->chunks;

	if (!c || c->cap - c->used < len + 1) {
		/* Oversized strings get a chunk of their own. */
		size_t cap = len + 1 > CHUNK_SIZE ? len + 1 : CHUNK_SIZE;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		/*
		 * An oversized chunk goes second so the current, partly
		 * filled chunk keeps taking small strings.
		 */
		if (p->chunks && cap > CHUNK_SIZE) {
			c->next = p->chunks->next;
			p->chunks->next = c;
		} else {
			c->next = p->chunks;
			p->chunks = c;
		}
		p->bytes += sizeof(*c) + cap;
	}
	char *d = c->data + c->used;

	memcpy(d, s, len);
	d[len] = '\0';
	c->used += len + 1;
	return d;
}

const char *strpool__intern_len(struct strpool *p, const char *s, size_t len)
{
	uint64_t h;
	size_t i;

	if (!p || !s)
		return NULL;
	h = hash_bytes(s, len, 0);
	for (i = h & (p->cap - 1); p->slots[i].s; i = (i + 1) & (p->cap - 1)) {
		const struct slot *sl = &p->slots[i];

		if (sl->hash == h && sl->len == len && !memcmp(sl->s, s, len))
			return sl->s;
	}
	/* Keep the load under 3/4 so probes stay short. */
	if ((p->n + 1) * 4 > p->cap * 3) {
		if (grow(p))
			return NULL;
		for (i = h & (p->cap - 1); p->slots[i].s; i = (i + 1) & (p->cap - 1))
			;
	}
	char *d = store(p, s, len);

	if (!d)
		return NULL;
	p->slots[i] = (struct slot){ .s = d, .len = len, .hash = h };
	p->n++;
	return d;
}

const char *strpool__intern(struct strpool *p, const char *s)
{
	return s ? strpool__intern_len(p, s, strlen(s)) : NULL;
}

size_t strpool__bytes(const struct strpool *p)
{
	return p ? p->bytes : 0;
}
