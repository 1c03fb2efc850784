/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The descendants a process has now, from the parent ids in /proc/PID/stat.
 * --pid follows a target's children from the moment the target is in the
 * BPF filter; children forked before that (the agent starts slowly on a
 * loaded node, the job does not wait for it) are found here instead.
 */
#ifndef STRATA_AGENT_PROC_PROC_TREE_H
#define STRATA_AGENT_PROC_PROC_TREE_H

#include <stddef.h>
#include <stdint.h>

/* The live descendants of root (not root itself) into out[0..max); their
 * number, or -errno.  More than max: the first max, -E2BIG not returned
 * (*more set). */
int proc_tree__descendants(uint32_t root, uint32_t *out, size_t max, int *more);

#endif /* STRATA_AGENT_PROC_PROC_TREE_H */
