/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kernel feature paths agents report with each batch (Batch.kernel_paths,
 * docs/kernels.md), counted per (path, taken, fallback) for /metrics: a
 * fleet's nodes that run on fallbacks show up as
 * strata_agent_kernel_path_batches_total{fallback="1"}.  Bounded: names are
 * short [a-z0-9_] words, and at most KERNEL_PATHS_MAX distinct triples are
 * kept (more are counted as dropped).
 */
#ifndef STRATA_SERVER_KERNEL_PATHS_H
#define STRATA_SERVER_KERNEL_PATHS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define KERNEL_PATHS_MAX 32
#define KERNEL_PATH_NAME 32

struct kernel_path_count {
	char name[KERNEL_PATH_NAME], taken[KERNEL_PATH_NAME];
	bool fallback;
	uint64_t batches;
};

struct kernel_paths {
	pthread_mutex_t lock;
	struct kernel_path_count rows[KERNEL_PATHS_MAX];
	int n;
	uint64_t dropped; /* malformed names, or the table full */
};

void kernel_paths__init(struct kernel_paths *k);
void kernel_paths__fini(struct kernel_paths *k);

/* One batch reported this path. */
void kernel_paths__note(struct kernel_paths *k, const char *name, const char *taken, bool fallback);

/* The Prometheus text of the counters. */
void kernel_paths__print(struct kernel_paths *k, FILE *o);

#endif /* STRATA_SERVER_KERNEL_PATHS_H */
