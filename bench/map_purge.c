// SPDX-License-Identifier: Apache-2.0
/*
 * The cost of letting an exited process's entries go from a BPF hash map
 * of the GPU layer's size (gpu_allocs: 262,144 entries) while another
 * process keeps its own: the walk that restarts at every delete (what
 * gpu_drain.c's purge did) against map_drain__delete_matching's one walk.
 * Prints a markdown table; checks both leave exactly the other process's
 * entries.
 *   map_purge [MAX_ENTRIES] [N...]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "agent/core/map_drain.h"

#define GONE 7	/* the exited process */
#define ALIVE 8 /* another that keeps its entries */
#define OTHERS 1000

struct key {
	uint32_t tgid, pad;
	uint64_t ptr;
};

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int fill(int fd, uint32_t n)
{
	char val[32] = { 0 };

	for (uint32_t i = 0; i < n + OTHERS; i++) {
		struct key k = { .tgid = i < n ? GONE : ALIVE,
				 .ptr = 0x7f0000000000ull + i * 4096ull };

		if (bpf_map_update_elem(fd, &k, val, BPF_ANY))
			return -errno;
	}
	return 0;
}

static uint32_t count(int fd)
{
	struct key k, next;
	uint32_t n = 0;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		n++;
	}
	return n;
}

/* The old purge: delete the current key, start over from the first. */
static void purge_restarting(int fd)
{
	struct key k, next;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		if (k.tgid == GONE) {
			bpf_map_delete_elem(fd, &k);
			prev = NULL;
			continue;
		}
		prev = &k;
	}
}

static bool of_gone(int fd, const void *key, void *ctx)
{
	(void)fd;
	(void)ctx;
	return ((const struct key *)key)->tgid == GONE;
}

int main(int argc, char **argv)
{
	uint32_t max = argc > 1 ? (uint32_t)atoi(argv[1]) : 262144;
	static const uint32_t def[] = { 0, 1000, 10000, 50000 };
	int nn = argc > 2 ? argc - 2 : (int)(sizeof(def) / sizeof(def[0]));

	printf("| entries of the exited process (map of %u, %u others) | restarting walk (ms) | "
	       "one walk (ms) |\n|---|---|---|\n",
	       max, OTHERS);
	for (int i = 0; i < nn; i++) {
		uint32_t n = argc > 2 ? (uint32_t)atoi(argv[i + 2]) : def[i];
		double ms[2];

		for (int how = 0; how < 2; how++) {
			int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "purge", sizeof(struct key), 32,
						max, NULL);
			double t;

			if (fd < 0 || fill(fd, n)) {
				fprintf(stderr, "map_purge: %s\n", strerror(errno));
				return 1;
			}
			t = now_ms();
			if (how == 0)
				purge_restarting(fd);
			else if (map_drain__delete_matching(fd, sizeof(struct key), 4ull * max + 64,
							    of_gone, NULL) != n) {
				fprintf(stderr, "map_purge: not every entry deleted\n");
				return 1;
			}
			ms[how] = now_ms() - t;
			if (count(fd) != OTHERS) {
				fprintf(stderr, "map_purge: %u entries left, not %u\n", count(fd),
					OTHERS);
				return 1;
			}
			close(fd);
		}
		printf("| %u | %.1f | %.1f |\n", n, ms[0], ms[1]);
	}
	return 0;
}
