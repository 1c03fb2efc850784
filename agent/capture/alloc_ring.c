// SPDX-License-Identifier: Apache-2.0
#include "agent/capture/alloc_ring.h"

#include <stdlib.h>
#include <string.h>

struct proc_ring {
	uint32_t tgid; /* 0: free */
	uint32_t head, n;
	uint64_t last_ns; /* its latest call: the least recent one makes room */
	struct gpu_event ev[RING_EVENTS];
};

struct alloc_ring {
	struct proc_ring *p; /* RING_PROCS */
	struct alloc_ring_stats st;
};

struct alloc_ring *alloc_ring__new(void)
{
	struct alloc_ring *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->p = calloc(RING_PROCS, sizeof(*r->p));
	if (!r->p) {
		free(r);
		return NULL;
	}
	return r;
}

void alloc_ring__free(struct alloc_ring *r)
{
	if (!r)
		return;
	free(r->p);
	free(r);
}

static struct proc_ring *ring_of(struct alloc_ring *r, uint32_t tgid, int make)
{
	struct proc_ring *lru = &r->p[0];

	for (int i = 0; i < RING_PROCS; i++) {
		if (r->p[i].tgid == tgid)
			return &r->p[i];
		if (r->p[i].last_ns < lru->last_ns)
			lru = &r->p[i];
	}
	if (!make)
		return NULL;
	if (lru->tgid)
		r->st.procs_evicted++;
	lru->tgid = tgid;
	lru->head = lru->n = 0;
	lru->last_ns = 0;
	return lru;
}

void alloc_ring__push(struct alloc_ring *r, const struct gpu_event *e)
{
	struct proc_ring *p = ring_of(r, e->tgid, 1);

	if (p->n == RING_EVENTS) {
		p->head = (p->head + 1) % RING_EVENTS;
		p->n--;
		r->st.overwritten++;
	}
	p->ev[(p->head + p->n++) % RING_EVENTS] = *e;
	if (e->start_ns > p->last_ns)
		p->last_ns = e->start_ns;
	r->st.events++;
}

size_t alloc_ring__take(struct alloc_ring *r, uint32_t tgid, uint64_t since_ns, alloc_ring_fn fn,
			void *ctx)
{
	struct proc_ring *p = ring_of(r, tgid, 0);
	size_t n = 0;

	if (!p)
		return 0;
	for (uint32_t i = 0; i < p->n; i++) {
		const struct gpu_event *e = &p->ev[(p->head + i) % RING_EVENTS];

		if (e->start_ns >= since_ns) {
			fn(ctx, e);
			n++;
		}
	}
	memset(p, 0, sizeof(*p)); /* taken: the slot is free again */
	return n;
}

void alloc_ring__stats(const struct alloc_ring *r, struct alloc_ring_stats *st)
{
	*st = r->st;
}
