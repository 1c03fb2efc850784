// SPDX-License-Identifier: Apache-2.0
#include "server/sym_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/profile.h"
#include "lib/strpool.h"

struct entry {
	uint64_t key[2];
	struct store_stack st; /* frames owned, strings pooled */
};

struct sym_cache {
	uint32_t max_entries;
	size_t max_string_bytes;
	struct entry *v;
	uint32_t n;
	struct profile_htab ids;
	struct strpool *pool;
	struct sym_cache_stats st;
};

struct sym_cache *sym_cache__new(uint32_t max_entries, size_t max_string_bytes)
{
	struct sym_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->max_entries = max_entries ? max_entries : 1;
	c->max_string_bytes = max_string_bytes;
	c->v = calloc(c->max_entries, sizeof(*c->v));
	c->pool = strpool__new();
	if (!c->v || !c->pool) {
		sym_cache__free(c);
		return NULL;
	}
	return c;
}

static void clear(struct sym_cache *c)
{
	for (uint32_t i = 0; i < c->n; i++)
		free((void *)c->v[i].st.frames);
	c->n = 0;
	profile_htab__fini(&c->ids);
	memset(&c->ids, 0, sizeof(c->ids));
}

void sym_cache__free(struct sym_cache *c)
{
	if (!c)
		return;
	clear(c);
	free(c->v);
	strpool__free(c->pool);
	free(c);
}

static int key_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct sym_cache *c = ctx;
	const uint64_t *k = key;

	return c->v[id].key[0] == k[0] && c->v[id].key[1] == k[1];
}

const struct store_stack *sym_cache__get(struct sym_cache *c, const uint64_t key[2])
{
	int64_t id = profile_htab__find(&c->ids, key[0], key_eq, key, c);

	if (id < 0) {
		c->st.misses++;
		return NULL;
	}
	c->st.hits++;
	return &c->v[id].st;
}

/* The pooled copy of s (NULL stays NULL); *ok cleared on ENOMEM. */
static const char *pooled(struct sym_cache *c, const char *s, int *ok)
{
	const char *p;

	if (!s)
		return NULL;
	p = strpool__intern(c->pool, s);
	if (!p)
		*ok = 0;
	return p;
}

int sym_cache__put(struct sym_cache *c, const uint64_t key[2], const struct store_stack *st)
{
	const struct store_frame *frames = st->frames;
	struct entry e = { .key = { key[0], key[1] } };
	struct store_frame *copy;
	uint32_t n = st->nframes;
	int ok = 1;

	if (strpool__bytes(c->pool) > c->max_string_bytes) {
		c->st.refused_full++;
		return -ENOSPC;
	}
	if (c->n == c->max_entries) {
		/* Start over: the stacks that matter come back within a window. */
		clear(c);
		c->st.resets++;
	}
	copy = malloc((n ? n : 1) * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		copy[i] = frames[i];
		copy[i].func = pooled(c, frames[i].func, &ok);
		copy[i].file = pooled(c, frames[i].file, &ok);
		copy[i].module = pooled(c, frames[i].module, &ok);
		copy[i].build_id = pooled(c, frames[i].build_id, &ok);
	}
	if (!ok || profile_htab__insert(&c->ids, key[0], c->n)) {
		free(copy);
		return -ENOMEM;
	}
	e.st = (struct store_stack){ .id = st->id, .nframes = n, .frames = copy };
	c->v[c->n++] = e;
	return 0;
}

void sym_cache__stats(const struct sym_cache *c, struct sym_cache_stats *st)
{
	*st = c->st;
	st->entries = c->n;
	st->string_bytes = strpool__bytes(c->pool);
}
