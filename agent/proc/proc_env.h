/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How much of a process's environment (/proc/PID/environ) the agent reads
 * for its labels (RANK, STRATA_JOB, ...), one bound for every reader: the
 * scheduler's target discovery, the batches' process labels and the GPU
 * layer's ranks must agree on whether a process is labelled.  A pod's
 * environment carries 7 variables for each Kubernetes service of its
 * namespace (tens of KiB in a large one), and torchrun appends RANK & co.
 * after what it inherited: the labels are at the end.
 */
#ifndef STRATA_AGENT_PROC_ENV_H
#define STRATA_AGENT_PROC_ENV_H

#include <stddef.h>
#include <string.h>

#define PROC_ENV_MAX (256 * 1024) /* bytes */

/* The n bytes read of an environment into a buffer of cap: when they
 * filled it (more may follow), the last variable may be cut ("RANK=12"
 * read as "RANK=1"): only the whole ones before it are kept. */
static inline size_t proc_env_whole(const char *env, size_t n, size_t cap)
{
	if (n < cap)
		return n;
	while (n && env[n - 1])
		n--;
	return n;
}

#endif /* STRATA_AGENT_PROC_ENV_H */
