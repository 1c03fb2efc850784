// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/gpu_tables.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gpu_table__init(struct gpu_table *t, size_t elem, size_t key_off, size_t key_len, size_t max)
{
	memset(t, 0, sizeof(*t));
	t->elem = elem;
	t->key_off = key_off;
	t->key_len = key_len;
	t->max = max;
}

void gpu_table__fini(struct gpu_table *t)
{
	free(t->rows);
	profile_htab__fini(&t->idx);
	memset(t, 0, sizeof(*t));
}

static char *row(const struct gpu_table *t, size_t i)
{
	return (char *)t->rows + i * t->elem;
}

static int key_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct gpu_table *t = ctx;

	return !memcmp(row(t, id) + t->key_off, key, t->key_len);
}

void *gpu_table__find(const struct gpu_table *t, const void *key)
{
	int64_t id = profile_htab__find(&t->idx, profile__hash(key, t->key_len, 0), key_eq, key, t);

	return id < 0 ? NULL : row(t, (size_t)id);
}

void *gpu_table__get(struct gpu_table *t, const void *key, int *err)
{
	uint64_t h = profile__hash(key, t->key_len, 0);
	int64_t id = profile_htab__find(&t->idx, h, key_eq, key, t);
	char *r;

	if (id >= 0)
		return row(t, (size_t)id);
	if (t->n >= t->max) {
		*err = -ENOSPC;
		return NULL;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		void *rows = realloc(t->rows, cap * t->elem);

		if (!rows) {
			*err = -ENOMEM;
			return NULL;
		}
		t->rows = rows;
		t->cap = cap;
	}
	if (profile_htab__insert(&t->idx, h, (uint32_t)t->n)) {
		*err = -ENOMEM;
		return NULL;
	}
	r = row(t, t->n++);
	memset(r, 0, t->elem);
	memcpy(r + t->key_off, key, t->key_len);
	return r;
}

int gpu_table__filter(struct gpu_table *t, int (*keep)(const void *row, void *ctx), void *ctx)
{
	size_t w = 0;

	for (size_t i = 0; i < t->n; i++) {
		if (!keep(row(t, i), ctx))
			continue;
		if (w != i)
			memcpy(row(t, w), row(t, i), t->elem);
		w++;
	}
	t->n = w;
	profile_htab__fini(&t->idx);
	for (size_t i = 0; i < t->n; i++)
		if (profile_htab__insert(&t->idx,
					 profile__hash(row(t, i) + t->key_off, t->key_len, 0),
					 (uint32_t)i))
			return -ENOMEM;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void gpu_tgids_sort(uint32_t *tgids, size_t n)
{
	if (n)
		qsort(tgids, n, sizeof(*tgids), cmp_u32);
}

uint32_t *gpu_tgid_find(const uint32_t *tgids, size_t n, uint32_t tgid)
{
	return n ? bsearch(&tgid, tgids, n, sizeof(*tgids), cmp_u32) : NULL;
}

int gpu_tgid_in(const uint32_t *tgids, size_t n, uint32_t tgid)
{
	return gpu_tgid_find(tgids, n, tgid) != NULL;
}

struct drop_ctx {
	const struct gpu_table *t;
	const uint32_t *tgids;
	size_t n, dropped;
	void (*release)(void *row);
};

static int keep_tgid(const void *r, void *arg)
{
	struct drop_ctx *c = arg;
	uint32_t tgid;

	memcpy(&tgid, (const char *)r + c->t->key_off, sizeof(tgid));
	if (!gpu_tgid_in(c->tgids, c->n, tgid))
		return 1;
	if (c->release)
		c->release((void *)r);
	c->dropped++;
	return 0;
}

long gpu_table__drop_tgids(struct gpu_table *t, const uint32_t *tgids, size_t n,
			   void (*release)(void *row))
{
	struct drop_ctx c = { .t = t, .tgids = tgids, .n = n, .release = release };

	if (!n || !t->n)
		return 0;
	if (gpu_table__filter(t, keep_tgid, &c)) {
		/* rows without an index would be found by nobody, and added
		 * again beside themselves: the table starts again */
		for (size_t i = 0; release && i < t->n; i++)
			release(row(t, i));
		t->n = 0;
		profile_htab__fini(&t->idx);
		return -ENOMEM;
	}
	return (long)c.dropped;
}
