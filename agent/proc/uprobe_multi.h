/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uprobe_multi links (Linux 6.6+): many offsets of one file behind one
 * BPF link, each with its own attach cookie.  The point is detaching: a
 * single uprobe's unregistration waits for a grace period (measured here:
 * ~110 ms per probe, so dropping the 29 probes of libcudart + libcuda one
 * by one blocked for 3 s), while a multi link unregisters every offset and
 * then waits once.  libbpf 1.1 has no API for it, so the link is made with
 * the bpf() syscall; the program must be loaded with expected attach type
 * BPF_TRACE_UPROBE_MULTI (uprobe_multi__prepare).
 */
#ifndef STRATA_UPROBE_MULTI_H
#define STRATA_UPROBE_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bpf_program;

/* Before load: makes prog attachable through uprobe_multi__attach only. */
int uprobe_multi__prepare(struct bpf_program *prog);

/* Attaches prog at n offsets of path (cookies[i] for offsets[i]), as
 * return probes when ret; pid -1: every process.  Returns the link fd
 * (close() detaches) or -errno (-EINVAL / -EOPNOTSUPP: kernel without
 * uprobe_multi). */
int uprobe_multi__attach(const struct bpf_program *prog, const char *path, const uint64_t *offsets,
			 const uint64_t *cookies, size_t n, bool ret, int pid);

/* A trial link on this process's own executable (one probe, this process
 * only, on a function never called): 0 when the kernel has uprobe_multi,
 * else -errno. */
int uprobe_multi__probe(void);

#endif /* STRATA_UPROBE_MULTI_H */
