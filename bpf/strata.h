/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by the BPF programs and user space, one header per layer.
 * Plain __u32/__u64 and no libc includes, so this compiles after either
 * vmlinux.h or <linux/types.h>.  Every struct that crosses the boundary has
 * its size asserted in its layer's header.  The enums also spoken by the
 * wire and the server (time categories, off-CPU reasons, counter names)
 * are listed once in lib/enums.h, which these headers include.
 */
#ifndef STRATA_BPF_STRATA_H
#define STRATA_BPF_STRATA_H

#include "bpf/strata_cpu.h"    /* sampled stacks, aggregation, process events */
#include "bpf/strata_unwind.h" /* hybrid unwinding: CFI rows, per-process maps */
#include "bpf/strata_python.h" /* CPython frames */
#include "bpf/strata_gpu.h"    /* CUDA / NCCL uprobes */
#include "bpf/strata_sched.h"  /* scheduler layer, time breakdown */

#endif /* STRATA_BPF_STRATA_H */
