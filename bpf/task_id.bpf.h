/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Process identities shared by every BPF program (needs vmlinux.h and
 * bpf_core_read.h first). */
#ifndef STRATA_BPF_TASK_ID_BPF_H
#define STRATA_BPF_TASK_ID_BPF_H

/*
 * The identity of a task's address space, or 0 for kernel threads.  The mm
 * pointer alone is not unique: a freed mm_struct's address is reused by the
 * next process (seen with pyenv's shims, dozens of short-lived shells), and
 * an exec'd-away mm keeps its "seen" entry.  Mixed with the tgid, the
 * process's start time and self_exec_id (bumped by every exec, inherited by
 * threads), the id is unique for the life of the agent.
 */
static __always_inline __u64 mm_id_of(struct task_struct *task)
{
	__u64 mm = (__u64)BPF_CORE_READ(task, mm), h;

	if (!mm)
		return 0;
	h = mm ^ ((__u64)BPF_CORE_READ(task, tgid) << 32) ^
	    BPF_CORE_READ(task, group_leader, start_boottime) * 0x9e3779b97f4a7c15ULL ^
	    (__u64)BPF_CORE_READ(task, self_exec_id) * 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h ? h : 1;
}

#endif /* STRATA_BPF_TASK_ID_BPF_H */
