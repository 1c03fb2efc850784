/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loader registry: the parts that act on the files processes map plug
 * in here, once, instead of each keeping its own file and process tables:
 * the hybrid unwinder (CFI tables, agent/proc/unwind_loader.c), Python (the
 * interpreter, agent/python/python.c) and the GPU layer (CUDA/NCCL probes,
 * agent/gpu/gpu_files.c).
 *
 *   detect once per file:  detect() runs at most once per loader and file
 *                          (a module: one (device, inode), with its
 *                          build-id); its answer is kept with the module
 *   attach per process:    attach() gets an address space's mappings each
 *                          time the process tracker (re)reads them, with
 *                          the loader's answer for each mapping's file
 *   detach per process:    detach() when the tracker frees the address
 *                          space (after the drain that follows its exit)
 *   forget per file:       forget() when the registry evicts a file no
 *                          address space maps (agent/proc/modules.h)
 *
 * The process tracker (agent/proc/proc_tracker.h) owns the registry and
 * calls it; loaders run in the order they were added.
 */
#ifndef STRATA_LOADERS_H
#define STRATA_LOADERS_H

#include <stddef.h>
#include <stdint.h>

#include "agent/proc/modules.h"

struct proc_mapping;

struct proc_loader {
	const char *name;
	void *ctx;
	/* A file's answer for this loader (NULL: nothing here for it; not
	 * asked again).  NULL member: the loader has no per-file answer. */
	void *(*detect)(void *ctx, struct module *mod);
	/* An address space's mappings were (re)read; files[i] is detect()'s
	 * answer for maps[i].mod (NULL: none).  NULL member: per-file only
	 * (the loader asks proc_loaders__detect itself, see the GPU layer). */
	void (*attach)(void *ctx, uint32_t tgid, uint64_t mm_id, const struct proc_mapping *maps,
		       void *const *files, size_t n);
	/* The address space is gone. */
	void (*detach)(void *ctx, uint64_t mm_id);
	/* A sample needed the loader's data for mod, which it lacks (the
	 * unwinder: a pc in a file without its table). */
	void (*wanted)(void *ctx, const struct module *mod);
	/* The registry evicts mod (no address space maps it any more): drop
	 * what is kept for it, answer included (detect()'s, NULL if none).
	 * A loader that must keep a file pins it instead (mod->pins). */
	void (*forget)(void *ctx, struct module *mod, void *answer);
};

struct proc_loaders {
	struct proc_loader l[MODULE_LOADERS];
	int n;
};

/* Adds a loader; its id (for proc_loaders__detect) or -ENOSPC. */
int proc_loaders__add(struct proc_loaders *r, const struct proc_loader *l);
/* The loader's answer for mod, detected now on first use. */
void *proc_loaders__detect(struct proc_loaders *r, int id, struct module *mod);
/* The tracker's calls: an address space read, freed, a table wanted. */
void proc_loaders__attach(struct proc_loaders *r, uint32_t tgid, uint64_t mm_id,
			  const struct proc_mapping *maps, size_t n);
void proc_loaders__detach(struct proc_loaders *r, uint64_t mm_id);
void proc_loaders__wanted(struct proc_loaders *r, const struct module *mod);
void proc_loaders__forget(struct proc_loaders *r, struct module *mod);

#endif /* STRATA_LOADERS_H */
