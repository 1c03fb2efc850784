/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Feeds the BPF hybrid unwinder: compiles each executable file's CFI into
 * an unwind table once (shared by every process mapping the file), copies
 * its rows into the unwind_rows array map, and writes each address space's
 * executable mappings (with load bias and row range) into unwind_procs.
 * Bounded: when the rows map is full, the least recently sampled tables are
 * evicted (unused ones first; address spaces using an evicted one fall back
 * to frame-pointer steps there, counted as UNWIND_ERR_NO_TABLE, until they
 * are reloaded); a table that cannot fit at all is dropped and counted.
 */
#ifndef STRATA_UNWIND_LOADER_H
#define STRATA_UNWIND_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "agent/proc/proc_tracker.h"

struct unwind_loader_stats {
	uint64_t tables_built, tables_failed, tables_dropped_full, tables_evicted;
	uint64_t tables_forgotten; /* records of files the registry evicted */
	uint64_t tables_lazy;	   /* loaded after samples landed in their file */
	uint64_t rows_used, rows_max, rows_leaked;
	uint64_t procs_loaded, procs_failed, maps_truncated;
	uint64_t build_ns;	    /* time spent compiling tables */
	uint64_t tables_async;	    /* built on the builder thread */
	uint64_t tables_async_busy; /* ... built on the loop: the builder was full */
};

struct unwind_loader;

struct unwind_loader *unwind_loader__new(int rows_fd, uint32_t max_rows, int procs_fd);
void unwind_loader__free(struct unwind_loader *l);

/* Loads tables for a process's mappings and publishes them.  0 or -errno. */
int unwind_loader__load(struct unwind_loader *l, uint64_t mm_id, const struct proc_mapping *maps,
			size_t n);
/* The address space is gone: its entry is removed (its tables stay, shared). */
void unwind_loader__forget(struct unwind_loader *l, uint64_t mm_id);

/* A sample resolved into mod: its table is recently used.  The clock moves
 * once per drain (unwind_loader__tick). */
void unwind_loader__touch(struct unwind_loader *l, const struct module *mod);
void unwind_loader__tick(struct unwind_loader *l);
/* Loads the tables samples asked for since the last flush (after a drain). */
void unwind_loader__flush(struct unwind_loader *l);

/* The agent's min_bytes: cc1 (33 MB) took 1.1-1.9 s on a loaded node; libc
 * (2 MB) takes milliseconds, so a small short-lived program still has its
 * tables at once. */
#define UNWIND_ASYNC_MIN_BYTES (8u << 20)

/*
 * The tables of files of min_bytes or more built on a thread of their own
 * (agent/proc/table_builder.h) from now on: returns an fd that is readable
 * when some are back (unwind_loader__collect installs them and gives them
 * to the address spaces mapping their files), or -errno (then every table
 * is built on the caller's thread, as without this call).
 */
int unwind_loader__async(struct unwind_loader *l, uint64_t min_bytes);
void unwind_loader__collect(struct unwind_loader *l);

/* Its loader (agent/proc/loaders.h): each address space loaded when its
 * mappings are (re)read, forgotten when it is gone; a table a sample
 * wanted (PROC_EV_UNWIND_MISS) loaded at once. */
void unwind_loader__loader(struct unwind_loader *l, struct proc_loader *out);

void unwind_loader__stats(const struct unwind_loader *l, struct unwind_loader_stats *st);

#endif /* STRATA_UNWIND_LOADER_H */
