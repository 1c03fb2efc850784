/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Process events (struct strata_proc_event) and the exit-time mapping
 * records, shared by bpf/profile.bpf.c (sampled processes) and
 * bpf/gpu.bpf.c (GPU targets, which may never be sampled): a process that
 * exits before user space could read /proc/PID/maps is still symbolized
 * from these records.  Needs vmlinux.h, bpf_core_read.h and strata.h.
 */
#ifndef STRATA_BPF_EXIT_VMAS_BPF_H
#define STRATA_BPF_EXIT_VMAS_BPF_H

/*
 * The task VMA iterator kfuncs (Linux 6.7).  Weak: on an older kernel they
 * stay unresolved and the programs calling them are not loaded; their
 * *_kept twins send the exit record alone, and user space keeps the
 * mappings it last read from /proc (agent/core/features.h).
 */
extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

#define VM_EXEC_FLAG 0x4 /* VM_EXEC, include/linux/mm.h */

/* Start time of the process (its group leader), in ns since boot. */
static __always_inline __u64 start_of(struct task_struct *task)
{
	return BPF_CORE_READ(task, group_leader, start_boottime);
}

/* Fills the header of a reserved event (the rest zeroed). */
static __always_inline void proc_event_fill(struct strata_proc_event *e, __u32 type,
					    struct task_struct *task, __u32 tgid, __u64 mm_id)
{
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->tgid = tgid;
	e->mm_id = mm_id;
	e->ts_ns = bpf_ktime_get_ns();
	e->start_ns = start_of(task);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/*
 * Sends one PROC_EV_VMA record per executable file mapping of the exiting
 * task (its mm is still attached: sched_process_exit fires before
 * exit_mm()).  Returns false when the ring buffer filled up (truncated).
 * The walk is bounded by the process's VMA count (vm.max_map_count).  No
 * loop counter: a precise counter keeps the verifier from seeing the loop
 * converge, and it then explores every iteration (seconds of load time at
 * 1024).
 */
static __always_inline bool exit_vmas_send(void *ring, struct task_struct *task, __u32 tgid,
					   __u64 mm_id, __u32 page_shift)
{
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;
	bool complete = true;

	bpf_iter_task_vma_new(&it, task, 0);
	while ((vma = bpf_iter_task_vma_next(&it))) {
		struct file *file = vma->vm_file;
		struct strata_proc_event *e;

		if (!file || !(vma->vm_flags & VM_EXEC_FLAG))
			continue;
		e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
		if (!e) {
			complete = false;
			break;
		}
		proc_event_fill(e, PROC_EV_VMA, task, tgid, mm_id);
		e->start = vma->vm_start;
		e->end = vma->vm_end;
		e->pgoff = vma->vm_pgoff << page_shift;
		e->ino = BPF_CORE_READ(file, f_inode, i_ino);
		e->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
		bpf_probe_read_kernel_str(e->name, sizeof(e->name),
					  BPF_CORE_READ(file, f_path.dentry, d_name.name));
		bpf_ringbuf_submit(e, 0);
	}
	bpf_iter_task_vma_destroy(&it);
	return complete;
}

#endif /* STRATA_BPF_EXIT_VMAS_BPF_H */
