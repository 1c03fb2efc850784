/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process instances and their executable mappings.  An instance is (tgid,
 * mm_id): exec and PID reuse give a new mm, so samples are never resolved
 * against another program's mappings.  Mappings come from /proc/PID/maps
 * (read on the first sample of an address space, and again when a sampled
 * address is not covered, e.g. after dlopen) and, for processes that exit
 * before that could happen, from the exit-time VMA records the BPF side
 * sends.  Every /proc read is checked against the process's start time, so
 * after PID reuse or exec another program's maps are never applied.
 * Bounded: at max instances new ones are refused and counted; exited ones
 * are freed after the drain that follows their exit.  The loaders
 * (unwinder, Python, GPU) plug into its registry (agent/proc/loaders.h):
 * each maps read attaches them (at once, or queued: see
 * proc_tracker__defer_attach), each free detaches them.
 */
#ifndef STRATA_PROC_TRACKER_H
#define STRATA_PROC_TRACKER_H

#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/proc/loaders.h"
#include "agent/proc/modules.h"
#include "bpf/strata.h"

struct proc_mapping {
	uint64_t start, end, pgoff;
	struct module *mod; /* NULL: no file (e.g. [vdso]) or not registered */
	const char *name;   /* display path; owned by the tracker */
};

struct proc_tracker_stats {
	uint64_t instances, refused, maps_read, maps_read_failed, refreshes, exit_vmas,
		exit_vmas_unlocated, found_dead;
	uint64_t maps_dropped;	    /* mappings past the bounds of a read (proc_maps.h) */
	uint64_t refreshes_limited; /* re-reads refused: one per drain at most */
	uint64_t attach_deferred;   /* loader attaches queued behind maps reads */
	uint64_t attach_queue_full; /* ... run at once instead: the queue was full */
};

struct proc_tracker;

struct proc_tracker *proc_tracker__new(struct module_registry *mods, size_t max);
void proc_tracker__free(struct proc_tracker *t);
/* The loader registry (agent/proc/loaders.h): a loader's id or -ENOSPC;
 * its answer for a file. */
int proc_tracker__add_loader(struct proc_tracker *t, const struct proc_loader *l);
void *proc_tracker__detect(struct proc_tracker *t, int loader, struct module *mod);

/* Applies one event from the BPF side.  0 or -errno. */
int proc_tracker__on_event(struct proc_tracker *t, const struct strata_proc_event *e);

/*
 * While on, a maps read records the mappings at once and queues the
 * loaders' attach (an unwind table of a large binary takes seconds to
 * build), for proc_tracker__attach_next: a batch of events reads the maps
 * of every process in it before any slow attach, so a short-lived process
 * is not gone by the time its turn comes.  Bounded: with the queue full an
 * attach runs at once (counted).  Turning it off runs what is queued.
 */
void proc_tracker__defer_attach(struct proc_tracker *t, int on);
/* Runs the oldest queued attach: 1 if there was one, else 0. */
int proc_tracker__attach_next(struct proc_tracker *t);

/*
 * The mapping holding ip in process (tgid, mm_id), reading or refreshing
 * /proc when needed.  Returns 0, -ENOENT (no mapping holds ip) or -ESRCH
 * (process unknown and gone).
 */
int proc_tracker__lookup(struct proc_tracker *t, uint32_t tgid, uint64_t mm_id, uint64_t ip,
			 const struct proc_mapping **out);

/* The module mapped under path by process tgid (its latest address space
 * first); NULL when it maps none (or is gone). */
struct module *proc_tracker__module_at(struct proc_tracker *t, uint32_t tgid, const char *path);

/* The /proc/PID/stat starttime of process (tgid, mm_id) as first seen (0:
 * not known): what a later read of /proc/PID must find for it to be the
 * same process. */
uint64_t proc_tracker__start_ticks(struct proc_tracker *t, uint32_t tgid, uint64_t mm_id);

/* Ends a drain: instances that exited before it are freed; every few drains
 * instances whose process is gone without an exit event are found. */
void proc_tracker__end_drain(struct proc_tracker *t);

void proc_tracker__stats(const struct proc_tracker *t, struct proc_tracker_stats *st);

#endif /* STRATA_PROC_TRACKER_H */
