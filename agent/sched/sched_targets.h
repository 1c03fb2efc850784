/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Automatic targets of the scheduler layer host-wide (STRATA_FILTER_AUTO):
 * a process is one when it uses CUDA/NCCL (the GPU layer's processes, told
 * at every drain) or carries training labels in its environment (RANK,
 * LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID, SLURM_JOB_ID, STRATA_JOB;
 * found by a /proc scan of processes not examined yet).  Marking sets the
 * tgid's bit in the sched object's auto_targets map (mmapped, atomic OR);
 * BPF marks forks of targets and clears a process's bit when it exits.
 * The examined set is bounded (65536 (pid, start time) pairs; full: it
 * starts over, so every process is examined again once).
 */
#ifndef STRATA_AGENT_SCHED_TARGETS_H
#define STRATA_AGENT_SCHED_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sched_targets_stats {
	uint64_t scans, examined, by_labels, by_gpu, unreadable, out_of_range, resets;
};

struct sched_targets;

/* words: the mmapped bitmap of nwords 64-bit words (tgid / 64).  proc_root:
 * "/proc" (tests point it at a fake tree).  NULL on no memory. */
struct sched_targets *sched_targets__new(uint64_t *words, uint32_t nwords, const char *proc_root);
void sched_targets__free(struct sched_targets *t);

/* Makes tgid a target (gpu: it uses CUDA/NCCL); true when it was not one. */
bool sched_targets__mark(struct sched_targets *t, uint32_t tgid, bool gpu);
bool sched_targets__is(const struct sched_targets *t, uint32_t tgid);

/* Examines the processes not seen yet; returns how many became targets,
 * each told to marked (may be NULL). */
typedef void (*sched_target_fn)(void *ctx, uint32_t tgid);
int sched_targets__scan(struct sched_targets *t, sched_target_fn marked, void *ctx);

/* Calls fn for every target now (marked here or by BPF: forks). */
void sched_targets__each(const struct sched_targets *t, sched_target_fn fn, void *ctx);

/* Does this environment block (NUL-separated KEY=VALUE) carry a training
 * label?  (Exposed for tests.) */
bool sched_targets__env_has_label(const char *env, size_t n);

void sched_targets__stats(const struct sched_targets *t, struct sched_targets_stats *st);

#endif /* STRATA_AGENT_SCHED_TARGETS_H */
