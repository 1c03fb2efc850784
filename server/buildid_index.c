// SPDX-License-Identifier: Apache-2.0
#include "server/buildid_index.h"

#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"

struct buildid_index {
	struct bid_entry **buckets;
	size_t nbuckets, n; /* nbuckets: a power of two, >= n */
};

struct buildid_index *buildid_index__new(void)
{
	struct buildid_index *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->nbuckets = 1024;
	x->buckets = calloc(x->nbuckets, sizeof(*x->buckets));
	if (!x->buckets) {
		free(x);
		return NULL;
	}
	return x;
}

void buildid_index__free(struct buildid_index *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->nbuckets; i++)
		for (struct bid_entry *e = x->buckets[i], *nx; e; e = nx) {
			nx = e->next;
			free(e);
		}
	free(x->buckets);
	free(x);
}

static size_t slot(const struct buildid_index *x, const char *hex)
{
	return hash_bytes(hex, strlen(hex), 0) & (x->nbuckets - 1);
}

struct bid_entry *buildid_index__get(struct buildid_index *x, const char *hex)
{
	for (struct bid_entry *e = x->buckets[slot(x, hex)]; e; e = e->next)
		if (!strcmp(e->hex, hex))
			return e;
	return NULL;
}

/* Doubles the table; a failure only makes chains longer. */
static void grow(struct buildid_index *x)
{
	size_t nb = x->nbuckets * 2;
	struct bid_entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < x->nbuckets; i++)
		for (struct bid_entry *e = x->buckets[i], *nx; e; e = nx) {
			size_t s = hash_bytes(e->hex, strlen(e->hex), 0) & (nb - 1);

			nx = e->next;
			e->next = b[s];
			b[s] = e;
		}
	free(x->buckets);
	x->buckets = b;
	x->nbuckets = nb;
}

struct bid_entry *buildid_index__add(struct buildid_index *x, const char *hex, uint64_t size,
				     uint64_t used_ns)
{
	size_t len = strlen(hex) + 1, s;
	struct bid_entry *e = malloc(sizeof(*e) + len);

	if (!e)
		return NULL;
	memcpy(e->hex, hex, len);
	e->size = size;
	e->used_ns = e->synced_ns = used_ns;
	e->verified = 0;
	if (x->n >= x->nbuckets)
		grow(x);
	s = slot(x, hex);
	e->next = x->buckets[s];
	x->buckets[s] = e;
	x->n++;
	return e;
}

void buildid_index__del(struct buildid_index *x, struct bid_entry *e)
{
	for (struct bid_entry **p = &x->buckets[slot(x, e->hex)]; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			x->n--;
			free(e);
			return;
		}
}

size_t buildid_index__count(const struct buildid_index *x)
{
	return x->n;
}

static int by_used(const void *a, const void *b)
{
	const struct bid_entry *x = *(struct bid_entry *const *)a,
			       *y = *(struct bid_entry *const *)b;

	return x->used_ns < y->used_ns ? -1 : x->used_ns > y->used_ns;
}

struct bid_entry **buildid_index__by_age(struct buildid_index *x, size_t *n)
{
	struct bid_entry **v = x->n ? malloc(x->n * sizeof(*v)) : NULL;
	size_t k = 0;

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < x->nbuckets; i++)
		for (struct bid_entry *e = x->buckets[i]; e; e = e->next)
			v[k++] = e;
	qsort(v, k, sizeof(*v), by_used);
	*n = k;
	return v;
}
