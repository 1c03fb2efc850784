/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Draining BPF maps from user space: the generation flip of the
 * double-buffered maps (bpf/generation.bpf.h) and the key-set helpers the
 * drains use.  Shared by the sampler (CPU samples) and the scheduler
 * collector (off-CPU time), so both drain the same, exact way.
 */
#ifndef STRATA_MAP_DRAIN_H
#define STRATA_MAP_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One BPF object's generation state: its mmap'd gen and inflight map. */
struct map_generation {
	uint32_t *gen;	 /* the object's .bss gen (skel->bss->gen) */
	int inflight_fd; /* its per-CPU inflight map */
	int ncpus;	 /* possible CPUs: the per-CPU value count */
};

/*
 * Flips the generation BPF writes to and waits until no program still runs
 * against the old one, which it returns (0 or 1): the caller then reads and
 * clears the old generation's maps, which nothing writes any more.  A wait
 * past 200 ms (a hung program: cannot happen) gives up waiting, counts in
 * *wait_timeouts and returns the old generation anyway.  -errno if the
 * inflight map cannot be read.
 */
int map_generation__flip(const struct map_generation *g, uint64_t *wait_timeouts);

/* Collects up to max keys of a hash map into *keys (malloc'd, freed by the
 * caller even on error); returns the count or -errno. */
int64_t map_drain__keys(int fd, size_t key_sz, uint32_t max, void **keys);

/* Deletes keys[0..n) of a hash map: one batch call, or one call per key
 * where batch deletion is not supported.  0 or -errno. */
int map_drain__delete_keys(int fd, const void *keys, size_t key_sz, uint32_t n);

/* Deletes every entry of a hash map of at most max entries; 0 or -errno. */
int map_drain__clear(int fd, size_t key_sz, uint32_t max);

/* The longest key map_drain__delete_matching walks. */
#define MAP_DRAIN_KEY_MAX 64

/*
 * Deletes the entries of a hash map that match(fd, key, ctx) says to, in
 * one walk while BPF keeps writing: each key is deleted after the next one
 * was fetched.  (Restarting the walk at every delete, as deleting the
 * current key forces, costs a scan of the buckets per entry: 1.1 s for a
 * process's 10,000 allocations in a 262,144-entry map, bench/map_purge.sh.)
 * A key BPF deletes meanwhile makes the kernel start over from the first
 * key; max_steps bounds the walk.  Returns the count deleted, or -errno
 * (-EINVAL: key_sz over MAP_DRAIN_KEY_MAX).
 */
int64_t map_drain__delete_matching(int fd, size_t key_sz, uint64_t max_steps,
				   bool (*match)(int fd, const void *key, void *ctx), void *ctx);

#endif /* STRATA_MAP_DRAIN_H */
