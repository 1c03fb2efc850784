// SPDX-License-Identifier: Apache-2.0
#include "agent/core/map_drain.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bpf/strata.h"
#include "lib/clock.h"

#define DRAIN_WAIT_STEP_NS 50000ULL    /* poll inflight every 50 us ... */
#define DRAIN_WAIT_MAX_NS 200000000ULL /* ... for at most 200 ms */

/* 1 when no CPU still runs a program against generation old, 0 if one
 * does, -errno if the counters cannot be read. */
static int generation_quiet(const struct map_generation *g, uint32_t old)
{
	struct strata_inflight vals[g->ncpus];
	uint32_t zero = 0;

	if (bpf_map_lookup_elem(g->inflight_fd, &zero, vals))
		return -errno;
	for (int i = 0; i < g->ncpus; i++)
		if (vals[i].n[old])
			return 0;
	return 1;
}

int map_generation__flip(const struct map_generation *g, uint64_t *wait_timeouts)
{
	uint32_t old = __atomic_load_n(g->gen, __ATOMIC_SEQ_CST) & 1;
	uint64_t deadline;
	int q;

	/* Sequentially consistent store: ordered before the inflight reads
	 * below (pairs with the fetch-add in generation_enter()). */
	__atomic_store_n(g->gen, old ^ 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* a full fence on arm64 too */
	deadline = mono_ns() + DRAIN_WAIT_MAX_NS;
	while ((q = generation_quiet(g, old)) == 0) {
		if (mono_ns() > deadline) {
			/* Cannot happen unless a program hangs; draining anyway
			 * risks at most that program's one update. */
			(*wait_timeouts)++;
			break;
		}
		nanosleep(&(struct timespec){ .tv_nsec = DRAIN_WAIT_STEP_NS }, NULL);
	}
	return q < 0 ? q : (int)old;
}

int64_t map_drain__keys(int fd, size_t key_sz, uint32_t max, void **keys)
{
	char *buf = malloc((size_t)max * key_sz);
	int64_t n = 0;

	*keys = buf;
	if (!buf)
		return -ENOMEM;
	if (!max || bpf_map_get_next_key(fd, NULL, buf))
		return !max || errno == ENOENT ? 0 : -errno;
	for (n = 1; n < max; n++)
		if (bpf_map_get_next_key(fd, buf + (n - 1) * key_sz, buf + n * key_sz))
			break;
	return n;
}

int map_drain__delete_keys(int fd, const void *keys, size_t key_sz, uint32_t n)
{
	uint32_t count = n;

	if (!n || !bpf_map_delete_batch(fd, keys, &count, NULL))
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (bpf_map_delete_elem(fd, (const char *)keys + i * key_sz) && errno != ENOENT)
			return -errno;
	return 0;
}

int map_drain__clear(int fd, size_t key_sz, uint32_t max)
{
	void *keys = NULL;
	int64_t n = map_drain__keys(fd, key_sz, max, &keys);
	int err = n < 0 ? (int)n : 0;

	if (n > 0)
		err = map_drain__delete_keys(fd, keys, key_sz, (uint32_t)n);
	free(keys);
	return err;
}

int64_t map_drain__delete_matching(int fd, size_t key_sz, uint64_t max_steps,
				   bool (*match)(int fd, const void *key, void *ctx), void *ctx)
{
	char cur[MAP_DRAIN_KEY_MAX], next[MAP_DRAIN_KEY_MAX];
	int64_t deleted = 0;
	bool more;

	if (key_sz > sizeof(cur))
		return -EINVAL;
	more = !bpf_map_get_next_key(fd, NULL, cur);
	for (uint64_t step = 0; more && step < max_steps; step++) {
		more = !bpf_map_get_next_key(fd, cur, next);
		if (match(fd, cur, ctx) && !bpf_map_delete_elem(fd, cur))
			deleted++;
		memcpy(cur, next, key_sz);
	}
	return deleted;
}
