/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the server needs to know about a process beyond its stacks, read
 * from /proc: start time, comm, cmdline, cgroup, container and pod ids (from
 * the cgroup path), and job/rank labels from the environment (RANK,
 * LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID, SLURM_JOB_ID, and
 * STRATA_JOB when set).  Every read is bounded.
 */
#ifndef STRATA_AGENT_SHIP_PROC_LABELS_H
#define STRATA_AGENT_SHIP_PROC_LABELS_H

#include <stddef.h>
#include <stdint.h>

#define PROC_LABEL_LEN 256

struct proc_labels {
	uint32_t pid, ppid;
	uint64_t start_time_ns; /* CLOCK_REALTIME; 0 unknown */
	char comm[32];
	char cmdline[PROC_LABEL_LEN];
	char cgroup[PROC_LABEL_LEN];
	char container[80]; /* 64-hex container id, "" unknown */
	char pod[80];	    /* pod uid from a kubepods cgroup, "" unknown */
	char job[PROC_LABEL_LEN], torchelastic_run_id[PROC_LABEL_LEN], slurm_job_id[64];
	int has_rank;
	int32_t rank, local_rank, world_size;
	/* Provenance (docs/wire-format.md, "Labels and trust"): the job and
	 * rank are claims the process makes in its environment ("env:VAR",
	 * "" none); identity is what the kernel vouches for, its cgroup:
	 * "pod:UID", else "container:ID", else "cgroup:PATH". */
	const char *job_source, *rank_source;
	char identity[PROC_LABEL_LEN + 16];
};

/*
 * CLOCK_REALTIME minus CLOCK_BOOTTIME now (start times in /proc are
 * boot-relative).  Read it once and pass the same value to every read: the
 * difference moves as NTP slews the realtime clock, and a process whose
 * start time read differently at two reads would be two processes on the
 * server.
 */
uint64_t proc_labels__boot_epoch_ns(void);

/*
 * Reads pid's labels, start time = boot_epoch_ns + its boot-relative
 * start; 0, or -errno when the process is gone (comm and start time
 * missing), or -ESTALE when start_ticks (its /proc/PID/stat starttime; 0:
 * any) says the pid names another process now.  Unreadable parts (environ
 * of another user) stay empty.
 */
int proc_labels__read(uint32_t pid, uint64_t boot_epoch_ns, uint64_t start_ticks,
		      struct proc_labels *out);

/*
 * A label set packed for keeping: its numbers and its strings back to back,
 * malloc'd (a few hundred bytes, where struct proc_labels takes 1.6 KB of
 * mostly empty arrays); NULL when out of memory.  unpack gives the same
 * set back.
 */
void *proc_labels__pack(const struct proc_labels *l);
void proc_labels__unpack(const void *packed, struct proc_labels *out);

/* Parses the container and pod ids out of one cgroup path (exposed for
 * tests). */
void proc_labels__parse_cgroup(const char *path, char *container, size_t csz, char *pod,
			       size_t psz);

#endif /* STRATA_AGENT_SHIP_PROC_LABELS_H */
