// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The scheduler layer: for every targeted thread, on-CPU time, run-queue
 * wait (runnable, not running), and off-CPU time by reason with the
 * blocking stacks; the time breakdown per thread, split by the API layer
 * the GPU uprobes mark (bpf/api_layer.bpf.h); per-CPU irq and softirq time;
 * and which other processes ran on the CPUs targets ran on.
 *
 * Blocking stacks are frame-pointer stacks from bpf_get_stack (kernel and
 * user) taken at sched_switch, where the blocking thread is current: the
 * kernel stack (futex_wait, io_schedule, ...) carries the reason, and the
 * hybrid DWARF unwinder's tables live in the profile object, whose maps
 * this object does not share (see docs/diagnosis.md).  They wait with the
 * blocked thread (task storage) and go into the off-CPU generation's stack
 * map when the block ends, so a block may span any number of drains and
 * the stack maps are cleared with each drain: nothing fills over uptime.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/strata.h"
#include "bpf/api_layer.bpf.h"
#include "bpf/generation.bpf.h" /* gen, inflight: the off-CPU map is drained */
#include "bpf/stack_hash.bpf.h"
#include "bpf/task_id.bpf.h" /* mm_id_of(): the blocking stack's address space */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 filter_mode = STRATA_FILTER_NONE;
/* A CPU hosts targets if one ran there within this window. */
const volatile __u64 foreign_window_ns = 1000000000ULL;
/* Blocking stacks are walked at most this often per thread (0: always);
 * blocks in between are keyed with STRATA_STACK_SKIPPED. */
const volatile __u64 stack_interval_ns = 0;

enum run_state { ST_UNKNOWN = 0, ST_RUNNING, ST_RUNNABLE, ST_BLOCKED };

/* Per thread: the open interval. */
struct task_sched {
	__u64 ts; /* start of the current state */
	__u32 state;
	__u32 reason;
	__u32 layer; /* API layer when it blocked */
	__u32 in_fault;
	__u64 user_stack, kern_stack; /* ids (hashes) of the blocked_stacks, or
				       * STRATA_STACK_NONE / _LOST / _SKIPPED */
	__u64 stack_ts;		      /* last time its stacks were walked */
	__u64 mm_id;		      /* its address space then (mm_id_of): at the
				       * walk, not at every wakeup (~45 ns) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_sched);
} task_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct strata_sched_key);
	__type(value, struct strata_sched_thread);
} threads SEC(".maps");

/* Off-CPU time by (thread, reason, stacks): drained every window, so
 * double buffered (bpf/generation.bpf.h). */
STRATA_GENERATION_MAPS(offcpu, struct strata_offcpu_key, struct strata_offcpu_val, 16384);

/* The stacks the generation's off-CPU keys name, by id (hash_stack):
 * drained and cleared with them.  Full: the key says STRATA_STACK_LOST
 * (counted as STACKS_FULL). */
STRATA_GENERATION_MAPS(sched_stacks, __u64, struct strata_stack, 8192);

/*
 * A blocked thread's stacks, walked when it switched out, until its block
 * ends.  A block can last longer than any number of drains (a rank
 * waiting for a hung peer), so its stacks cannot wait in a drained map;
 * and a map that is never cleared fills over the uptime and from then on
 * loses every stack.  Per targeted thread, freed with it.
 */
struct blocked_stacks {
	struct strata_stack user, kern;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct blocked_stacks);
} blocked_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct strata_foreign_key);
	__type(value, struct strata_foreign_val);
} foreign SEC(".maps");

/* Targets' on-CPU time per (CPU, tgid): which CPUs a rank runs on, so the
 * server weighs the foreign and interrupt time of exactly those CPUs.
 * Same key/value types as foreign; full: counted as FOREIGN_FULL. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct strata_foreign_key);
	__type(value, struct strata_foreign_val);
} target_cpu SEC(".maps");

/* Per CPU: when the running task started, and when a target last ran. */
struct cpu_run {
	__u64 start;
	__u64 target_seen;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_run);
} cpu_run SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct strata_irq_time);
} irq_time SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STRATA_SCHED_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sched_counters SEC(".maps");

/* Shared with the profile object (bpf_map__reuse_fd): the same targets. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

/* A bitmap user space mmaps: an array of 64-bit words; max_entries set at
 * load. */
#define BITMAP_WORDS(name, nwords)                 \
	struct {                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY);  \
		__uint(map_flags, BPF_F_MMAPABLE); \
		__uint(max_entries, nwords);       \
		__type(key, __u32);                \
		__type(value, __u64);              \
	} name SEC(".maps")

/*
 * Automatic targets (STRATA_FILTER_AUTO, host-wide): one bit per tgid, set
 * by user space (processes using CUDA/NCCL, processes with training labels)
 * and here for forks of targets, cleared when the process exits.  An
 * array, so a lookup is inlined: a switch between two non-targets costs
 * two loads and tests.  Mmapable: user space sets bits with atomic ORs on
 * the same words BPF changes atomically.  max_entries: pid_max / 64, set
 * at load.
 */
BITMAP_WORDS(auto_targets, 65536);

/*
 * Processes that exec'd since user space last looked (STRATA_FILTER_AUTO):
 * a new program brings a new environment, whose training labels user space
 * reads at its next drain (agent/sched/sched_targets.h) instead of reading
 * every process's stat file each second.  Bit tgid in exec_words, and bit
 * tgid / 64 in exec_summary so the harvest reads only words with bits.
 * Mmapable; user space takes words with atomic exchanges.  max_entries set
 * at load: auto_targets' and its / 64.
 */
BITMAP_WORDS(exec_words, 65536);
BITMAP_WORDS(exec_summary, 1024);

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cgroup_map SEC(".maps");

static __always_inline void count(enum strata_sched_counter c)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&sched_counters, &key);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline __u64 *auto_word(__u32 tgid)
{
	__u32 k = tgid / STRATA_AUTO_TARGET_BITS;

	return bpf_map_lookup_elem(&auto_targets, &k);
}

/* Cgroup filtering tests the current task, so it is only exact for prev at
 * sched_switch; for next / wakeups a task with storage is a target. */
static __always_inline bool is_target_tgid(__u32 tgid)
{
	if (filter_mode == STRATA_FILTER_AUTO) {
		__u64 *w = auto_word(tgid);

		return w && (*w >> (tgid % STRATA_AUTO_TARGET_BITS)) & 1;
	}
	if (filter_mode == STRATA_FILTER_TGIDS)
		return bpf_map_lookup_elem(&targets, &tgid) != NULL;
	return filter_mode == STRATA_FILTER_NONE;
}

static __always_inline bool is_target_current(__u32 tgid)
{
	if (filter_mode == STRATA_FILTER_CGROUP)
		return bpf_current_task_under_cgroup(&cgroup_map, 0) == 1;
	return is_target_tgid(tgid);
}

#define PF_EXITING_FLAG 0x4 /* PF_EXITING, include/linux/sched.h */

static __always_inline struct strata_sched_thread *thread_acc(struct task_struct *t, __u64 now)
{
	struct strata_sched_key key = { .tgid = t->tgid, .tid = t->pid };
	struct strata_sched_thread *a = bpf_map_lookup_elem(&threads, &key);

	if (a)
		return a;
	/* An exiting thread is never (re)created: its entry may have been
	 * retired already, and a new one would never be marked exited. */
	if (t->flags & PF_EXITING_FLAG) {
		count(STRATA_SCHED_EXIT_UNSEEN);
		return NULL;
	}
	struct strata_sched_thread init = { .first_ns = now };
	bpf_probe_read_kernel_str(init.comm, sizeof(init.comm), t->comm);
	if (bpf_map_update_elem(&threads, &key, &init, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&threads, &key)) {
		count(STRATA_SCHED_THREADS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &key);
}

static __always_inline void add(__u64 *p, __u64 v)
{
	__sync_fetch_and_add(p, v);
}

/*
 * The stack with this id, from the blocked thread's storage into the
 * generation's stack map (once per generation and id).  Returns the id the
 * off-CPU key takes: the same, a reserved one unchanged, or
 * STRATA_STACK_LOST when the map is full (counted) or the storage is gone.
 */
static __always_inline __u64 keep_stack(void *stack_map, __u64 id, struct strata_stack *st)
{
	if (id <= STRATA_STACK_RESERVED)
		return id;
	if (!st) {
		count(STRATA_SCHED_STACK_LOST);
		return STRATA_STACK_LOST;
	}
	if (bpf_map_lookup_elem(stack_map, &id))
		return id;
	if (bpf_map_update_elem(stack_map, &id, st, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(stack_map, &id)) {
		count(STRATA_SCHED_STACKS_FULL);
		return STRATA_STACK_LOST;
	}
	return id;
}

/* Closes a blocked interval: reason, breakdown category and stacks. */
static __always_inline void close_blocked(struct task_struct *t, struct task_sched *ts, __u64 now)
{
	struct strata_sched_thread *a = thread_acc(t, now);
	__u64 d = now - ts->ts;
	__u32 r = ts->reason < STRATA_OFF_MAX ? ts->reason : STRATA_OFF_OTHER;

	if (a) {
		add(&a->offcpu_ns[r & 7], d);
		add(&a->time_ns[sched_offcpu_cat(0, r, ts->layer) & 7], d);
	}
	struct strata_offcpu_key k = {
		.tgid = t->tgid,
		.tid = t->pid,
		.reason = r,
		.layer = ts->layer,
		.mm_id = ts->mm_id,
		.user_stack = ts->user_stack,
		.kern_stack = ts->kern_stack,
	};
	struct strata_inflight *inf = generation_inflight();
	struct blocked_stacks *bs = NULL;
	struct strata_offcpu_val *v;
	void *m, *sm;
	__u32 g;

	if (!inf)
		return;
	if (k.user_stack > STRATA_STACK_RESERVED || k.kern_stack > STRATA_STACK_RESERVED)
		bs = bpf_task_storage_get(&blocked_stacks, t, NULL, 0);
	g = generation_enter(inf);
	m = bpf_map_lookup_elem(&offcpu, &g);
	sm = bpf_map_lookup_elem(&sched_stacks, &g);
	if (!m || !sm)
		goto out;
	k.user_stack = keep_stack(sm, k.user_stack, bs ? &bs->user : NULL);
	k.kern_stack = keep_stack(sm, k.kern_stack, bs ? &bs->kern : NULL);
	v = bpf_map_lookup_elem(m, &k);
	if (!v) {
		struct strata_offcpu_val init = {};

		if (bpf_map_update_elem(m, &k, &init, BPF_NOEXIST) && !bpf_map_lookup_elem(m, &k)) {
			count(STRATA_SCHED_OFFCPU_FULL);
			goto out;
		}
		v = bpf_map_lookup_elem(m, &k);
		if (!v)
			goto out;
	}
	add(&v->ns, d);
	add(&v->count, 1);
out:
	generation_leave(inf, g);
}

/* The current thread's stack (flags: bpf_get_stack's) into st; its id. */
static __always_inline __u64 walk_stack(void *ctx, struct strata_stack *st, __u64 flags)
{
	long n = bpf_get_stack(ctx, st->ips, sizeof(st->ips), flags);

	if (n < 0) {
		st->len = 0;
		count(STRATA_SCHED_STACK_LOST);
		return STRATA_STACK_LOST;
	}
	st->len = (__u32)((__u64)n / sizeof(st->ips[0]));
	st->flags = 0;
	return st->len ? hash_stack(st) : STRATA_STACK_NONE;
}

/* prev leaves the CPU: close its on-CPU interval, open the next one. */
static __always_inline void switch_out(void *ctx, bool preempt, struct task_struct *prev,
				       unsigned int prev_state, __u64 now)
{
	struct task_sched *ts =
		bpf_task_storage_get(&task_state, prev, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	struct strata_api_layer_state *ls = api_layer_of(prev, false);
	struct blocked_stacks *bs;
	struct strata_sched_thread *a;
	__u32 layer = STRATA_LAYER_NONE;

	if (!ts) {
		count(STRATA_SCHED_STORAGE_FAILED);
		return;
	}
	a = thread_acc(prev, now);
	if (a) /* threads rename themselves (prctl) after they start */
		bpf_probe_read_kernel_str(a->comm, sizeof(a->comm), prev->comm);
	if (ls) {
		/* On-CPU time before the switch-in belongs to an earlier slice. */
		if (ts->state == ST_RUNNING && ls->since_ns < ts->ts)
			ls->since_ns = ts->ts;
		api_layer_charge(ls, now);
		layer = api_layer_cur(ls);
	}
	if (a && ts->state == ST_RUNNING && ts->ts) {
		__u64 d = now - ts->ts, layered = 0;

		add(&a->oncpu_ns, d);
		add(&a->switches, 1);
		/* Layered time, capped by the slice; the rest is plain CPU,
		 * so the categories add up to the slice exactly. */
		for (int l = STRATA_LAYER_CUDA_API; ls && l < STRATA_LAYER_MAX; l++) {
			__u64 c = ls->oncpu_ns[l];

			if (c > d - layered)
				c = d - layered;
			add(&a->time_ns[sched_layer_cat(l) & 7], c);
			layered += c;
		}
		add(&a->time_ns[STRATA_TIME_CPU], d - layered);
	}
	if (ls)
		for (int l = 0; l < STRATA_LAYER_MAX; l++)
			ls->oncpu_ns[l] = 0;
	ts->ts = now;
	ts->layer = layer;
	if (preempt || prev_state == 0) {
		ts->state = ST_RUNNABLE; /* still TASK_RUNNING: back in the run queue */
		return;
	}
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	long nr = regs ? BPF_CORE_READ(regs, orig_ax) : -1;

	ts->state = ST_BLOCKED;
	ts->reason = sched_block_reason(prev_state, ts->in_fault, nr);
	if (stack_interval_ns && now - ts->stack_ts < stack_interval_ns) {
		ts->kern_stack = ts->user_stack = STRATA_STACK_SKIPPED;
		return;
	}
	ts->stack_ts = now;
	ts->mm_id = mm_id_of(prev);
	bs = bpf_task_storage_get(&blocked_stacks, prev, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!bs) {
		ts->kern_stack = ts->user_stack = STRATA_STACK_LOST;
		count(STRATA_SCHED_STACK_LOST);
		return;
	}
	ts->kern_stack = walk_stack(ctx, &bs->kern, 0);
	ts->user_stack = walk_stack(ctx, &bs->user, BPF_F_USER_STACK);
}

/* next gets the CPU: close its runnable (or missed-wakeup) interval. */
static __always_inline void switch_in(struct task_struct *next, __u64 now)
{
	struct task_sched *ts =
		bpf_task_storage_get(&task_state, next, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	struct strata_api_layer_state *ls = api_layer_of(next, false);

	if (!ts) {
		count(STRATA_SCHED_STORAGE_FAILED);
		return;
	}
	if (ts->ts && ts->state == ST_BLOCKED) {
		/* Woken before we attached, or the wakeup was not seen. */
		count(STRATA_SCHED_MISSED_WAKEUP);
		close_blocked(next, ts, now);
	} else if (ts->ts && ts->state == ST_RUNNABLE) {
		struct strata_sched_thread *a = thread_acc(next, now);

		if (a) {
			add(&a->runnable_ns, now - ts->ts);
			add(&a->time_ns[STRATA_TIME_RUNNABLE], now - ts->ts);
		}
	}
	ts->state = ST_RUNNING;
	ts->ts = now;
	if (ls)
		ls->since_ns = now;
}

/* A non-target ran on a CPU that hosts targets: who, for how long. */
/* Adds prev's slice on this CPU to map[(cpu, prev->tgid)]. */
static __always_inline void charge_cpu(void *map, struct task_struct *prev, __u64 now,
				       struct cpu_run *cr)
{
	struct strata_foreign_key k = { .cpu = bpf_get_smp_processor_id(), .tgid = prev->tgid };
	struct strata_foreign_val *v;

	if (!cr->start)
		return;
	v = bpf_map_lookup_elem(map, &k);
	if (!v) {
		struct strata_foreign_val init = {};

		bpf_probe_read_kernel_str(init.comm, sizeof(init.comm), prev->comm);
		if (bpf_map_update_elem(map, &k, &init, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(map, &k)) {
			count(STRATA_SCHED_FOREIGN_FULL);
			return;
		}
		v = bpf_map_lookup_elem(map, &k);
		if (!v)
			return;
	}
	add(&v->ns, now - cr->start);
}

/* A non-target ran on a CPU that hosts targets: who, for how long. */
static __always_inline void charge_foreign(struct task_struct *prev, __u64 now, struct cpu_run *cr)
{
	if (!cr->target_seen || now - cr->target_seen > foreign_window_ns || prev->pid == 0)
		return;
	charge_cpu(&foreign, prev, now, cr);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 zero = 0;
	struct cpu_run *cr = bpf_map_lookup_elem(&cpu_run, &zero);
	bool prev_target = prev->pid && is_target_current(prev->tgid);
	bool next_target =
		next->pid && (filter_mode == STRATA_FILTER_CGROUP
				      ? bpf_task_storage_get(&task_state, next, NULL, 0) != NULL
				      : is_target_tgid(next->tgid));
	__u64 now;

	if (!cr)
		return 0;
	/* Two non-targets on a CPU no target used lately: nothing to do (the
	 * common case on a busy host; cr->start is only read while
	 * target_seen is recent, and every switch that sets target_seen sets
	 * it too). */
	if (!prev_target && !next_target && !cr->target_seen)
		return 0;
	now = bpf_ktime_get_ns();
	if (!prev_target && !next_target && now - cr->target_seen > foreign_window_ns) {
		cr->target_seen = 0;
		return 0;
	}
	count(STRATA_SCHED_SWITCHES);
	if (prev_target) {
		switch_out(ctx, preempt, prev, prev_state, now);
		charge_cpu(&target_cpu, prev, now, cr);
	} else
		charge_foreign(prev, now, cr);
	if (next_target) {
		switch_in(next, now);
		cr->target_seen = now;
	} else if (prev_target) {
		cr->target_seen = now;
	}
	cr->start = now;
	return 0;
}

/*
 * A thread exits: mark its entry, which user space retires (reports one
 * last time, then deletes) once a grace period has passed, so hosts with
 * many short-lived threads do not fill the map.  The thread still switches
 * out once more (the final schedule() of do_exit); that slice lands in the
 * entry because retirement waits far longer than that.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_thread_exit, struct task_struct *p)
{
	struct strata_sched_key key = { .tgid = p->tgid, .tid = p->pid };
	struct strata_sched_thread *a = bpf_map_lookup_elem(&threads, &key);

	if (a)
		a->exit_ns = bpf_ktime_get_ns();
	/* The last thread of an automatic target: the tgid stops being one
	 * (a later process with the same pid is judged afresh). */
	if (filter_mode == STRATA_FILTER_AUTO && BPF_CORE_READ(p, signal, live.counter) == 0) {
		__u32 tgid = p->tgid;
		__u64 *w = auto_word(tgid);

		if (w)
			__sync_fetch_and_and(w, ~(1ULL << (tgid % STRATA_AUTO_TARGET_BITS)));
	}
	return 0;
}

/* Processes whose environment user space has not read since their last
 * exec.  The word's bit is set first (a fully ordered fetch-or), the
 * summary's after, so a harvest that clears the summary and then the word
 * misses nothing: a bit set meanwhile raises the summary again.  A tgid
 * past pid_max at load (raised since) has no bit: it could not be a target
 * either (auto_targets). */
static __always_inline void exec_note(__u32 tgid)
{
	__u32 k = tgid / STRATA_AUTO_TARGET_BITS, sk = k / STRATA_AUTO_TARGET_BITS;
	__u64 bit = 1ULL << (tgid % STRATA_AUTO_TARGET_BITS);
	__u64 *w = bpf_map_lookup_elem(&exec_words, &k);
	__u64 *s = bpf_map_lookup_elem(&exec_summary, &sk);

	if (!w || !s)
		return;
	/* already pending: whoever set it raises the summary */
	if (__sync_fetch_and_or(w, bit) & bit)
		return;
	__sync_fetch_and_or(s, 1ULL << (k % STRATA_AUTO_TARGET_BITS));
}

static __always_inline bool exec_pending(__u32 tgid)
{
	__u32 k = tgid / STRATA_AUTO_TARGET_BITS;
	__u64 *w = bpf_map_lookup_elem(&exec_words, &k);

	return w && (*w >> (tgid % STRATA_AUTO_TARGET_BITS)) & 1;
}

/* A new process forked by an automatic target is one too (DataLoader
 * workers, ranks a launcher forks after it was marked).  One forked by a
 * process whose environment user space has not read yet (it exec'd since
 * the last drain) is read with it: it carries the same labels, and its
 * parent may be gone by then. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u64 *w;

	if (filter_mode != STRATA_FILTER_AUTO || ptgid == ctgid)
		return 0;
	if (!is_target_tgid(ptgid)) {
		if (exec_pending(ptgid))
			exec_note(ctgid);
		return 0;
	}
	w = auto_word(ctgid);
	if (w)
		__sync_fetch_and_or(w, 1ULL << (ctgid % STRATA_AUTO_TARGET_BITS));
	return 0;
}

/* A process ran a new program: user space reads its environment (the one
 * the program was started with) at the next drain. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	exec_note(p->tgid);
	return 0;
}

static __always_inline void wakeup(struct task_struct *p)
{
	struct task_sched *ts;
	__u64 now;

	/* Host-wide, most wakeups are of non-targets: an array load decides
	 * before the task-storage lookup. */
	if (filter_mode == STRATA_FILTER_AUTO && !is_target_tgid(p->tgid))
		return;
	ts = bpf_task_storage_get(&task_state, p, NULL, 0);
	if (!ts || ts->state != ST_BLOCKED)
		return;
	now = bpf_ktime_get_ns();
	close_blocked(p, ts, now);
	ts->state = ST_RUNNABLE;
	ts->ts = now;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	wakeup(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	struct task_sched *ts;

	if (!is_target_tgid(p->tgid) && filter_mode != STRATA_FILTER_CGROUP)
		return 0;
	ts = bpf_task_storage_get(&task_state, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	ts->state = ST_RUNNABLE;
	ts->ts = bpf_ktime_get_ns();
	return 0;
}

/* Page faults: a thread that blocks inside one blocks on the fault.
 * kprobes, not fentry: some kernels refuse trampolines (seen: EPERM on a
 * 6.18 VM); user space turns these off when they cannot load. */
SEC("kprobe/handle_mm_fault")
int BPF_KPROBE(fault_enter)
{
	struct task_sched *ts =
		bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), NULL, 0);

	if (ts)
		ts->in_fault++;
	return 0;
}

SEC("kretprobe/handle_mm_fault")
int BPF_KRETPROBE(fault_exit)
{
	struct task_sched *ts =
		bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), NULL, 0);

	if (ts && ts->in_fault)
		ts->in_fault--;
	return 0;
}

static __always_inline struct strata_irq_time *irq_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&irq_time, &zero);
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	struct strata_irq_time *t = irq_slot();

	if (t && vec < STRATA_SOFTIRQS)
		t->softirq_start[vec] = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	struct strata_irq_time *t = irq_slot();

	if (!t || vec >= STRATA_SOFTIRQS || !t->softirq_start[vec])
		return 0;
	t->softirq_ns[vec] += bpf_ktime_get_ns() - t->softirq_start[vec];
	t->softirq_start[vec] = 0;
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq)
{
	struct strata_irq_time *t = irq_slot();

	if (!t)
		return 0;
	t->hardirq_start = bpf_ktime_get_ns();
	t->hardirq_cur = irq >= 0 && irq < STRATA_HARDIRQS ? irq : STRATA_HARDIRQS - 1;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq)
{
	struct strata_irq_time *t = irq_slot();

	if (!t || !t->hardirq_start)
		return 0;
	t->hardirq_ns[t->hardirq_cur & (STRATA_HARDIRQS - 1)] +=
		bpf_ktime_get_ns() - t->hardirq_start;
	t->hardirq_start = 0;
	return 0;
}

/*
 * Test hooks: uprobes on a fixture's strata_test_layer_enter(layer) /
 * strata_test_layer_exit() exercise the API-layer accounting exactly as the
 * GPU layer's uprobes will.  Not loaded unless asked for.
 */
SEC("uprobe")
int BPF_KPROBE(test_layer_enter, int layer)
{
	api_layer_enter((__u32)layer);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(test_layer_exit)
{
	api_layer_exit();
	return 0;
}
