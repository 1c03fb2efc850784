/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What one thread is doing now, from /proc/PID/task/TID: its scheduler
 * state (stat field 3: R running, S sleeping, D uninterruptible, ...), the
 * kernel function it waits in (wchan), the system call it is in (syscall)
 * and its kernel stack (stack: root only; empty otherwise).  For the
 * hang diagnosis: a rank that does not come to a collective, in which
 * state, waiting where.
 */
#ifndef STRATA_AGENT_PROC_THREAD_H
#define STRATA_AGENT_PROC_THREAD_H

#include <stddef.h>
#include <stdint.h>

#define PROC_THREAD_FRAMES 32
#define PROC_THREAD_NAME 64

struct proc_thread_state {
	char state;		      /* 'R', 'S', 'D', ... ; 0: unreadable */
	char wchan[PROC_THREAD_NAME]; /* "" when running or unknown */
	int32_t syscall;	      /* -1: not in one (or unknown) */
	uint64_t user_sp;	      /* its user stack pointer while blocked; 0: running */
	uint32_t nframes;	      /* kernel stack, innermost first as /proc lists it */
	char frames[PROC_THREAD_FRAMES][PROC_THREAD_NAME];
};

/* Reads root/PID/task/TID (root: "/proc"; tests use a fake tree).  0, or
 * -ENOENT when the thread is gone. */
int proc_thread__read(const char *root, uint32_t pid, uint32_t tid, struct proc_thread_state *out);

/* The user stack pointer of a thread that is blocked (in a system call or
 * otherwise off the CPU in the kernel) from root/PID/task/TID/syscall: 0
 * and *sp set, or -EAGAIN while it runs (the kernel does not say then),
 * -ENOENT when it is gone. */
int proc_thread__user_sp(const char *root, uint32_t pid, uint32_t tid, uint64_t *sp);

#endif /* STRATA_AGENT_PROC_THREAD_H */
