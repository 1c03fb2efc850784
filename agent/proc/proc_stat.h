/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two fields of /proc/PID/stat the agent keys processes by: the start
 * time (field 22, clock ticks since boot: with the pid, the identity of a
 * process instance, PID reuse included) and the command name (field 2,
 * which changes at exec).  The comm may hold spaces and ')': the fields
 * after it are found from the last ')'.  And the process of a thread id
 * (status), for the kernel's events that name a thread.
 */
#ifndef STRATA_AGENT_PROC_STAT_H
#define STRATA_AGENT_PROC_STAT_H

#include <stddef.h>
#include <stdint.h>

/* Reads root/PID/stat (root: "/proc"; tests use a fake tree).  Returns the
 * start time (never 0 for a live process), or 0 when the process is gone
 * or the file is malformed.  comm (commsz bytes, may be NULL) gets the
 * command name. */
uint64_t proc_stat__start_ticks(const char *root, uint32_t pid, char *comm, size_t commsz);

/* Its state (field 3: 'R', 'S', 'D', 'Z' a zombie, ...), or 0 when it is
 * gone or the file is malformed. */
char proc_stat__state(const char *root, uint32_t pid);

/* The process a thread id belongs to (root/TID/status "Tgid:"; a thread's
 * directory is there though readdir does not list it).  0 when it is gone
 * or the file is malformed. */
uint32_t proc_stat__tgid(const char *root, uint32_t tid);

#endif /* STRATA_AGENT_PROC_STAT_H */
