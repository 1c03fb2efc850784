/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA runtime, CUDA driver and NCCL libraries installed on the host,
 * attached at start so that a process's very first call is seen (a process
 * is admitted as a target in BPF at its first call into an attached file):
 * those the dynamic linker's cache knows (`ldconfig -p`) and those in the
 * CUDA toolkit's directories.
 */
#ifndef STRATA_GPU_LIBS_H
#define STRATA_GPU_LIBS_H

#include <stdbool.h>
#include <stddef.h>

/* libcudart.so*, libcuda.so*, libnccl.so* (a base name). */
bool gpu_libs_name_match(const char *base);

/* The library path of one `ldconfig -p` line ("\tlibcuda.so.1 (libc6,x86-64)
 * => /usr/lib/x86_64-linux-gnu/libcuda.so.1") when it is one of ours, else
 * NULL.  The path is copied into buf (n bytes). */
const char *gpu_libs_ldconfig_line(const char *line, char *buf, size_t n);

/* Calls fn for each library found (the same file may come under several
 * names: callers dedupe by inode).  Returns how many were found. */
int gpu_libs_find(void (*fn)(void *ctx, const char *path), void *ctx);

#endif /* STRATA_GPU_LIBS_H */
