/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registry of executable files seen in any process, keyed by (device,
 * inode).  Each file is opened once through the process that maps it
 * (/proc/PID/map_files/..., which also works for deleted files and for
 * files inside containers) and kept open, so it can be symbolized after
 * that process is gone.  Bounded: past max, files are not registered and
 * the drop is counted.
 */
#ifndef STRATA_MODULES_H
#define STRATA_MODULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/proc/proc_maps.h"
#include "symbolize/buildid.h"

/* Loaders that keep a per-file answer with the module (agent/proc/loaders.h). */
#define MODULE_LOADERS 4

struct module {
	dev_t dev;
	uint64_t ino;
	char *path;	    /* as the process saw it (display, pprof) */
	char open_path[32]; /* "/proc/self/fd/N": what the symbolizer opens */
	int fd;		    /* open file (a module exists only once opened) */
	uint8_t build_id[BUILD_ID_MAX];
	int build_id_len;    /* 0: none */
	struct module *next; /* hash chain */
	/* agent/proc/loaders.h: each loader's answer, detected once */
	void *loaded[MODULE_LOADERS];
	uint8_t detected; /* bit per loader id: asked already */
	/* Eviction (modules__end_drain): a module no mapping uses (refs) and
	 * nothing pins (the GPU layer's probe files, the vDSO) goes after a
	 * grace period, its fd closed (a deleted binary's disk space freed). */
	uint32_t refs, pins;
	uint64_t idle_since; /* the registry's drain count when refs fell to 0 */
	bool deleted;	     /* the file was deleted when first opened */
};

struct module_stats {
	uint64_t modules, dropped, open_failed, located, not_located;
	uint64_t not_regular; /* a path held a FIFO, device, directory or symlink */
	uint64_t evicted;     /* unused modules closed (idle, or to make room) */
};

/* Called before a module is freed (the process tracker's loaders forget
 * their answers for it). */
typedef void (*module_evict_fn)(void *ctx, struct module *m);

struct module_registry;

struct module_registry *modules__new(size_t max);
void modules__free(struct module_registry *r);
void modules__on_evict(struct module_registry *r, module_evict_fn fn, void *ctx);

/* A mapping (or another user) holds m / lets it go. */
void modules__ref(struct module_registry *r, struct module *m);
void modules__unref(struct module_registry *r, struct module *m);
/* Ends a drain: the modules unused for their grace period are evicted. */
void modules__end_drain(struct module_registry *r);

/* The module behind a file mapping of pid; NULL when the registry is full
 * or the file cannot be opened now (counted; a later call retries). */
struct module *modules__from_map(struct module_registry *r, int pid, const struct proc_map *m);
struct module *modules__find(struct module_registry *r, dev_t dev, uint64_t ino);
/* The module of a file named by path (symlinks followed), opened now;
 * NULL when it cannot be opened or the registry is full. */
struct module *modules__from_path(struct module_registry *r, const char *path);
/* The one module opened under this path; NULL when none, or when files of
 * two mount namespaces share it (two containers' libcudart.so.12): the
 * path alone cannot say which.  A linear scan: callers cache. */
struct module *modules__find_path(struct module_registry *r, const char *path);
/*
 * Finds a file known only by (dev, ino, basename) — from an exit-time VMA
 * record — by looking for name in the directories of known modules and the
 * standard library directories, accepting only a file with that dev/ino.
 */
struct module *modules__locate(struct module_registry *r, dev_t dev, uint64_t ino,
			       const char *name);
/* The vDSO as a module (a memfd copy of this process's, which every process
 * on the host shares); NULL if it cannot be read. */
struct module *modules__vdso(struct module_registry *r);
void modules__stats(const struct module_registry *r, struct module_stats *st);

#endif /* STRATA_MODULES_H */
