/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Automatic targets of the scheduler layer host-wide (STRATA_FILTER_AUTO):
 * a process is one when it uses CUDA/NCCL (the GPU layer's processes, told
 * at every drain) or carries training labels in its environment (RANK,
 * LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID, SLURM_JOB_ID, STRATA_JOB).
 * Marking sets the tgid's bit in the sched object's auto_targets map
 * (mmapped, atomic OR); BPF marks forks of targets and clears a process's
 * bit when it exits.
 *
 * Where labels are looked for: at start, in every process of /proc; after
 * that, in the processes that exec'd since the last drain (BPF sets their
 * bits at sched_process_exec).  A process's environment is the one its
 * program was started with (/proc/PID/environ does not follow setenv), so
 * only an exec brings new labels; a fork without one carries its parent's.
 * Forks are followed: BPF marks the children of targets and sets the bit
 * of a child whose parent's bit is still set (read with it, even if the
 * parent is gone by then); the children forked between the harvest of the
 * parent's bit and its mark are marked with it (/proc/PID/task/TID/children).
 * Without the exec bitmap every drain scans /proc, skipping the (pid,
 * start time, command) instances examined before: a bounded set (65536;
 * full, it starts over).
 */
#ifndef STRATA_AGENT_SCHED_TARGETS_H
#define STRATA_AGENT_SCHED_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sched_targets_stats {
	uint64_t scans, examined, by_labels, by_gpu, unreadable, out_of_range, resets;
	uint64_t execs;	       /* processes examined because they exec'd */
	uint64_t gone;	       /* exited before their environment was read */
	uint64_t children;     /* forked by one marked by labels before it was marked */
	uint64_t kids_dropped; /* children past 1024 with one process marked */
};

/* The BPF side's bitmaps (mmapped), nwords 64-bit words each, bit tgid % 64
 * of word tgid / 64: auto_words, the targets; exec_words, the processes
 * that exec'd since the last harvest, and exec_summary (nwords / 64 words,
 * rounded up), bit w set when exec word w may have bits.  BPF sets a word's
 * bit before its summary bit. */
struct sched_bitmaps {
	uint64_t *auto_words, *exec_words, *exec_summary;
	uint32_t nwords;
};

struct sched_targets;

/* bits: exec_words and exec_summary may be NULL (every tick then scans
 * /proc).  proc_root: "/proc" (tests point it at a fake tree).  NULL on no
 * memory. */
struct sched_targets *sched_targets__new(const struct sched_bitmaps *bits, const char *proc_root);
void sched_targets__free(struct sched_targets *t);

/* Makes tgid a target (gpu: it uses CUDA/NCCL); true when it was not one. */
bool sched_targets__mark(struct sched_targets *t, uint32_t tgid, bool gpu);
bool sched_targets__is(const struct sched_targets *t, uint32_t tgid);

/* Examines the processes not seen yet; returns how many became targets,
 * each told to marked (may be NULL). */
typedef void (*sched_target_fn)(void *ctx, uint32_t tgid);
int sched_targets__scan(struct sched_targets *t, sched_target_fn marked, void *ctx);

/* Once per drain: the processes that exec'd since the last tick are
 * examined (without the exec bitmap: a scan).  Returns how many became
 * targets, each told to marked. */
int sched_targets__tick(struct sched_targets *t, sched_target_fn marked, void *ctx);

/* Calls fn for every target now (marked here or by BPF: forks). */
void sched_targets__each(const struct sched_targets *t, sched_target_fn fn, void *ctx);

/* Does this environment block (NUL-separated KEY=VALUE) carry a training
 * label?  (Exposed for tests.) */
bool sched_targets__env_has_label(const char *env, size_t n);

void sched_targets__stats(const struct sched_targets *t, struct sched_targets_stats *st);

#endif /* STRATA_AGENT_SCHED_TARGETS_H */
