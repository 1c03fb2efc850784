/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compiles unwind tables (unwind/unwind_table.h) on a thread of its own, so
 * that a large binary's table (cc1, 33 MB: 1.1-1.9 s on a loaded 2-core
 * node) does not hold the agent's event loop: while it is built, the maps
 * of the processes behind it are not read, and a short-lived one is gone
 * by then.  Jobs in, results out, TABLE_BUILDER_SLOTS of them at most
 * (a full builder refuses, the caller builds itself); the caller learns of
 * results from an eventfd and takes them on its own thread, so nothing but
 * the build itself runs on the builder's.
 */
#ifndef STRATA_TABLE_BUILDER_H
#define STRATA_TABLE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind_table.h"

#define TABLE_BUILDER_SLOTS 64

struct table_builder;

/* Starts the thread; NULL with errno set. */
struct table_builder *table_builder__new(void);
/* Stops the thread (after the build it is in) and drops what is left. */
void table_builder__free(struct table_builder *b);

/* Readable while results wait (for epoll). */
int table_builder__fd(const struct table_builder *b);

/* Queues a build of the ELF file fd (duplicated: the caller may close its
 * own); key comes back with the result.  0, -EBUSY (every slot taken) or
 * -errno. */
int table_builder__submit(struct table_builder *b, int fd, uint64_t key);

/* A finished build: err (0 or -errno, as unwind_table__build), the table
 * (the callee's to free; NULL on error) and the time the build took. */
typedef void (*table_builder_fn)(void *ctx, uint64_t key, int err, struct unwind_table *tab,
				 uint64_t build_ns);

/* Hands every finished build to fn, oldest submitted first, on the
 * caller's thread; returns how many. */
size_t table_builder__collect(struct table_builder *b, table_builder_fn fn, void *ctx);

#endif /* STRATA_TABLE_BUILDER_H */
