/* SPDX-License-Identifier: Apache-2.0 */
/* Reading another process's memory without stopping it (process_vm_readv:
 * needs the same rights as ptrace-read, which the agent has as root). */
#ifndef STRATA_PROC_MEM_H
#define STRATA_PROC_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Reads exactly n bytes at addr of pid.  0, or -errno (-EFAULT: partly
 * unmapped, -ESRCH: gone). */
int proc_mem__read(uint32_t pid, uint64_t addr, void *buf, size_t n);

#endif /* STRATA_PROC_MEM_H */
