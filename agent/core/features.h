/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the running kernel can do, probed once at start, and which path
 * each kernel-dependent feature takes.  The agent is written for the
 * newest kernels and runs on 6.1 by falling back per feature:
 *   - exit hook: the exit program must see the process's mm.  The
 *     sched_process_exit tracepoint fires before exit_mm() only since it
 *     gained its group_dead argument (2025, after 6.12); before that the
 *     program hooks exit_mm_release() (fentry, called by exit_mm() while
 *     current->mm is still set).  Without either, exit records lack the
 *     address space (late_tracepoint).
 *   - exit-time mappings: the task VMA iterator kfuncs (6.7) walk an
 *     exiting process's executable mappings; without them the exit record
 *     goes alone and its samples resolve against the mappings user space
 *     read last from /proc (kept_maps: a process that dies before its first
 *     read, or dlopen()s after its last, keeps those frames unresolved).
 *   - GPU probes: uprobe_multi links (6.6), one per library and probe
 *     group; without them one classic uprobe per function (more links,
 *     and a grace period per probe when detaching).
 *   - user stacks: bpf_loop (5.17) runs the CFI (hybrid) unwinder and the
 *     Python walker; without it frame-pointer stacks only (no port yet:
 *     docs/kernels.md says what a 5.15 port needs).
 * Required outright (the agent refuses to start without them): BTF for the
 * running kernel, the BPF ring buffer (5.8), task local storage (5.11) and
 * bpf_task_pt_regs (5.15).  Nothing is dropped silently: `-v` logs the
 * path of each feature, and strata-agent ships them with every batch.
 */
#ifndef STRATA_AGENT_FEATURES_H
#define STRATA_AGENT_FEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(id, name, since): the probed kernel features, in report order. */
#define STRATA_KERNEL_FEATURES(X)                             \
	X(KFEAT_BTF, "btf", "5.4")                            \
	X(KFEAT_RINGBUF, "ringbuf", "5.8")                    \
	X(KFEAT_TASK_STORAGE, "task_storage", "5.11")         \
	X(KFEAT_TASK_PT_REGS, "task_pt_regs", "5.15")         \
	X(KFEAT_BPF_LOOP, "bpf_loop", "5.17")                 \
	X(KFEAT_UPROBE_MULTI, "uprobe_multi", "6.6")          \
	X(KFEAT_VMA_ITER, "vma_iter", "6.7")                  \
	X(KFEAT_EXIT_TP_MM, "exit_tracepoint_has_mm", "6.16") \
	X(KFEAT_EXIT_MM_RELEASE, "fentry_exit_mm_release", "5.5")

enum kernel_feature {
#define X(id, name, since) id,
	STRATA_KERNEL_FEATURES(X)
#undef X
		KFEAT_MAX
};

/* X(id, name): what the agent does with them, one path each. */
#define STRATA_KERNEL_PATHS(X)              \
	X(KPATH_EXIT_HOOK, "exit_hook")     \
	X(KPATH_EXIT_MAPS, "exit_mappings") \
	X(KPATH_GPU_PROBES, "gpu_probes")   \
	X(KPATH_USER_STACKS, "user_stacks")

enum kernel_path {
#define X(id, name) id,
	STRATA_KERNEL_PATHS(X)
#undef X
		KPATH_MAX
};

struct kernel_features {
	char release[65]; /* uname -r */
	bool have[KFEAT_MAX];
	uint64_t probe_ns; /* what probing took */
};

/* Probes the running kernel (tens of ms: the vmlinux BTF is parsed once,
 * and a few programs are loaded).  Never fails: what could not be probed
 * counts as absent. */
void kernel_features__probe(struct kernel_features *f);

const char *kernel_feature__name(enum kernel_feature id);
const char *kernel_feature__since(enum kernel_feature id);
const char *kernel_path__name(enum kernel_path id);

/* The path taken on this kernel ("tracepoint", "fentry", "vma_iter",
 * "kept_maps", "uprobe_multi", "single_uprobes", "cfi_and_fp", "fp_only",
 * ...): the metric label and the wire value.  *fallback (may be NULL) is
 * set when it is not the one the agent is built around. */
const char *kernel_features__path(const struct kernel_features *f, enum kernel_path id,
				  bool *fallback);

/* The exit program to load: early (fentry/exit_mm_release, not the
 * tracepoint) and with the VMA walk. */
void kernel_features__exit_prog(const struct kernel_features *f, bool *early, bool *with_vmas);

/* The required features this kernel lacks, as "name (Linux since), ..."
 * into buf; false when none is missing. */
bool kernel_features__missing_required(const struct kernel_features *f, char *buf, size_t n);

/* At info level (`-v`): each feature, then each path with what a fallback
 * loses. */
void kernel_features__log(const struct kernel_features *f);

#endif /* STRATA_AGENT_FEATURES_H */
