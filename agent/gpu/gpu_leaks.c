// SPDX-License-Identifier: Apache-2.0
#include "agent/gpu/gpu_leaks.h"

#include <errno.h>
#include <stdlib.h>

struct group_key {
	uint32_t tgid, pad;
	uint64_t stack_id;
};

struct group {
	struct group_key key;
	struct gpu_leak l;
	uint64_t snap; /* snapshot that last refreshed bytes/count */
};

void gpu_leaks__init(struct gpu_leaks *lk, size_t max_groups)
{
	*lk = (struct gpu_leaks){ 0 };
	gpu_table__init(&lk->groups, sizeof(struct group), 0, sizeof(struct group_key), max_groups);
}

void gpu_leaks__fini(struct gpu_leaks *lk)
{
	gpu_table__fini(&lk->groups);
}

void gpu_leaks__begin(struct gpu_leaks *lk, uint64_t now_ns)
{
	lk->snap++;
	lk->now_ns = now_ns;
}

int gpu_leaks__add(struct gpu_leaks *lk, uint32_t tgid, uint64_t stack_id, uint64_t size,
		   uint64_t alloc_ns, bool at_exit)
{
	struct group_key k = { .tgid = tgid, .stack_id = stack_id };
	struct group *g;
	int err = 0;

	g = gpu_table__get(&lk->groups, &k, &err);
	if (!g)
		return err ? err : -ENOSPC;
	if (g->snap != lk->snap) { /* first allocation of this group in the snapshot */
		if (!g->l.first_ns)
			g->l.first_ns = lk->now_ns; /* first_bytes set at the end */
		g->l.bytes = g->l.count = 0;
		g->l.oldest_ns = UINT64_MAX;
		g->snap = lk->snap;
	}
	g->l.tgid = tgid;
	g->l.stack_id = stack_id;
	g->l.bytes += size;
	g->l.count++;
	g->l.last_ns = lk->now_ns;
	if (alloc_ns < g->l.oldest_ns)
		g->l.oldest_ns = alloc_ns;
	g->l.at_exit = at_exit;
	return 0;
}

void gpu_leaks__end(struct gpu_leaks *lk)
{
	for (size_t i = 0; i < lk->groups.n; i++) {
		struct group *g = (struct group *)lk->groups.rows + i;

		if (g->snap == lk->snap && g->l.first_ns == lk->now_ns)
			g->l.first_bytes = g->l.bytes; /* growth is measured from here */
		if (g->snap != lk->snap && !g->l.at_exit) {
			g->l.bytes = g->l.count = 0; /* all freed */
			g->l.last_ns = lk->now_ns;
		}
	}
}

struct gpu_leak *gpu_leaks__outstanding(const struct gpu_leaks *lk, size_t *n)
{
	struct gpu_leak *v = calloc(lk->groups.n + 1, sizeof(*v));

	*n = 0;
	for (size_t i = 0; v && i < lk->groups.n; i++) {
		const struct group *g = (const struct group *)lk->groups.rows + i;

		if (g->l.count)
			v[(*n)++] = g->l;
	}
	return v;
}
