// SPDX-License-Identifier: Apache-2.0
#include "agent/ship/batch_sched.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "lib/hash.h"
#include "lib/wire_enums.h"

/* A stack key's "present" value: any id that is not a reserved one (the
 * frames are handed over in the sampler_sample itself). */
#define STACK_PRESENT (STRATA_STACK_RESERVED + 1)

/* One thread's cumulative counters, keyed by (tgid, tid, first_ns). */
struct thread_row {
	uint32_t tgid, tid;
	uint64_t first_ns;
	uint64_t oncpu_ns, runnable_ns, switches;
	uint64_t time_ns[STRATA_TIME_MAX];
	char comm[STRATA_COMM_LEN];
};

struct thread_set {
	struct thread_row *v;
	size_t n, cap;
};

/* A cumulative per-CPU counter (softirq vector, foreign or target
 * process), keyed by (kind, cpu, id), for shipping window deltas. */
enum cum_kind { CUM_SOFTIRQ, CUM_FOREIGN, CUM_TARGET };

struct cum_row {
	uint32_t kind, cpu, id;
	uint64_t ns;
	char comm[STRATA_COMM_LEN];
};

struct cum_set {
	struct cum_row *v;
	size_t n, cap;
};

/* What an off-CPU row of the batch adds up: the window's drains each add
 * to the one row. */
struct offcpu_row_key {
	uint32_t process, tid, stack, reason;
};

struct batch_sched {
	struct thread_set last, cur;	  /* last shipped (sorted); this window's */
	struct cum_set cum_last, cum_cur; /* the same for per-CPU counters */
	uint64_t *irq_last;		  /* per CPU: [2 * cpu] hard, [2 * cpu + 1] soft */
	uint64_t *irq_cur;
	size_t ncpus;
	struct strata_stack user, kern;	 /* an off-CPU row's stacks, for the builder */
	struct profile_htab offcpu_rows; /* this batch's BB_OFFCPU rows by their key */
	struct batch_sched_stats st;
};

struct batch_sched *batch_sched__new(void)
{
	return calloc(1, sizeof(struct batch_sched));
}

void batch_sched__free(struct batch_sched *s)
{
	if (!s)
		return;
	free(s->last.v);
	free(s->cur.v);
	free(s->irq_last);
	free(s->irq_cur);
	free(s->cum_last.v);
	free(s->cum_cur.v);
	profile_htab__fini(&s->offcpu_rows);
	free(s);
}

static int row_cmp(const void *a, const void *b)
{
	const struct thread_row *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->first_ns != y->first_ns)
		return x->first_ns < y->first_ns ? -1 : 1;
	return 0;
}

struct collect_ctx {
	struct batch_sched *s;
	int err;
};

static int collect_thread(void *ctx, const struct strata_sched_key *k,
			  const struct strata_sched_thread *t)
{
	struct collect_ctx *c = ctx;
	struct thread_set *set = &c->s->cur;
	struct thread_row *r;

	if (set->n == BATCH_SCHED_MAX_THREADS) {
		c->s->st.threads_over++;
		return 0;
	}
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 256;
		void *v = realloc(set->v, cap * sizeof(*set->v));

		if (!v) {
			c->err = -ENOMEM;
			return -ENOMEM;
		}
		set->v = v;
		set->cap = cap;
	}
	r = &set->v[set->n++];
	*r = (struct thread_row){ .tgid = k->tgid,
				  .tid = k->tid,
				  .first_ns = t->first_ns,
				  .oncpu_ns = t->oncpu_ns,
				  .runnable_ns = t->runnable_ns,
				  .switches = t->switches };
	memcpy(r->time_ns, t->time_ns, sizeof(r->time_ns));
	memcpy(r->comm, t->comm, sizeof(r->comm));
	r->comm[sizeof(r->comm) - 1] = 0;
	return 0;
}

/* cur - last, or cur whole when the counter went back (a new thread). */
static uint64_t delta(uint64_t cur, uint64_t last)
{
	return cur >= last ? cur - last : cur;
}

static int64_t process_of(struct agent_batch *ab, const struct thread_row *r)
{
	struct bb_process fb = {
		.pid = r->tgid, .comm = r->comm, .rank = -1, .local_rank = -1, .world_size = -1
	};

	return agent_batch__process_tgid(ab, r->tgid, &fb);
}

/* SchedStat and TimeBreakdown rows of one thread's window. */
static int add_thread(struct batch_sched *s, struct agent_batch *ab, const struct thread_row *r,
		      const struct thread_row *last)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	static const struct thread_row zero;
	Strata__V1__SchedStat *ss;
	uint64_t d[STRATA_TIME_MAX], any = 0;
	int64_t proc;

	if (!last)
		last = &zero;
	for (int i = 0; i < STRATA_TIME_MAX; i++)
		any |= d[i] = delta(r->time_ns[i], last->time_ns[i]);
	any |= delta(r->oncpu_ns, last->oncpu_ns) | delta(r->runnable_ns, last->runnable_ns);
	if (!any)
		return 0; /* nothing new: retired threads stay silent */
	proc = process_of(ab, r);
	if (proc < 0)
		return (int)proc;
	ss = batch_builder__row(bb, BB_SCHED);
	if (ss) {
		ss->process = (uint32_t)proc;
		ss->tid = r->tid;
		ss->on_cpu_ns = delta(r->oncpu_ns, last->oncpu_ns);
		/* BPF counts wakeup-to-run and preempted-while-runnable as one
		 * runnable time (docs/wire-format.md) */
		ss->runnable_wait_ns = delta(r->runnable_ns, last->runnable_ns);
		ss->switches = delta(r->switches, last->switches);
		s->st.records++;
	}
	for (int i = 0; i < STRATA_TIME_MAX; i++) {
		Strata__V1__TimeBreakdown *tb;

		if (!d[i])
			continue;
		tb = batch_builder__row(bb, BB_BREAKDOWN);
		if (!tb)
			continue; /* counted by the builder */
		tb->process = (uint32_t)proc;
		tb->tid = r->tid;
		tb->category = strata_time_cat_to_wire((enum strata_time_cat)i);
		tb->ns = d[i];
		s->st.records++;
	}
	return 0;
}

static int add_threads(struct batch_sched *s, struct agent_batch *ab, struct sched_collector *c)
{
	struct collect_ctx cc = { .s = s };
	struct thread_set tmp;
	int n;

	s->cur.n = 0;
	n = sched_collector__threads(c, collect_thread, &cc);
	if (cc.err)
		return cc.err;
	if (n < 0)
		return n;
	qsort(s->cur.v, s->cur.n, sizeof(*s->cur.v), row_cmp);
	for (size_t i = 0; i < s->cur.n; i++) {
		const struct thread_row *last =
			s->last.n ? bsearch(&s->cur.v[i], s->last.v, s->last.n, sizeof(*s->last.v),
					    row_cmp)
				  : NULL;
		int err = add_thread(s, ab, &s->cur.v[i], last);

		if (err)
			return err;
	}
	/* what was shipped becomes the base; threads gone from the collector
	 * (retired ones it could not keep) leave the state with it */
	tmp = s->last;
	s->last = s->cur;
	s->cur = tmp;
	return 0;
}

/* ---- off-CPU ----------------------------------------------------------- */

struct offcpu_ctx {
	struct batch_sched *s;
	struct agent_batch *ab;
	struct batch_builder *bb;
};

static const struct strata_stack *copy_stack(struct strata_stack *dst, const uint64_t *ips,
					     size_t n)
{
	if (!n)
		return NULL;
	if (n > STRATA_MAX_STACK_DEPTH)
		n = STRATA_MAX_STACK_DEPTH;
	memcpy(dst->ips, ips, n * sizeof(*ips));
	dst->len = (uint32_t)n;
	return dst;
}

/* Whether BB_OFFCPU row id of the batch has this key.  An entry left from
 * a batch finished without batch_sched__add (a window callback before it
 * failed) names a row that is gone or another: no match. */
static int offcpu_row_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct offcpu_ctx *c = ctx;
	const Strata__V1__OffCpuSample *r = batch_builder__row_at(c->bb, BB_OFFCPU, id);
	const struct offcpu_row_key *k = key;

	return r && r->process == k->process && r->tid == k->tid && r->stack == k->stack &&
	       (uint32_t)r->reason == k->reason;
}

static int add_offcpu(void *ctx, const struct sched_offcpu *o)
{
	struct offcpu_ctx *c = ctx;
	struct batch_sched *s = c->s;
	/* by address space, as CPU samples are: drained at every drain, the
	 * blocks of a process that exited since the last one resolve through
	 * the mappings the tracker still keeps for it (read while it lived, or
	 * its exit-time records), and a pid reused meanwhile is not taken
	 * for it */
	struct strata_stack_key k = {
		.tgid = o->key->tgid,
		.tid = o->key->tid,
		.mm_id = o->key->mm_id,
		.user_stack = o->n_user ? STACK_PRESENT : STRATA_STACK_NONE,
		.kern_stack = o->n_kern ? STACK_PRESENT : STRATA_STACK_NONE,
		.py_stack = STRATA_STACK_NONE,
	};
	struct sampler_sample smp = {
		.key = &k,
		.count = o->count,
		.user = copy_stack(&s->user, o->user, o->n_user),
		.kern = copy_stack(&s->kern, o->kern, o->n_kern),
	};
	Strata__V1__OffCpuSample *row;
	uint32_t proc;
	int64_t stack;
	int err;

	if (o->key->reason >= STRATA_OFF_MAX || !o->ns)
		return 0;
	err = agent_batch__sampled_stack(c->ab, &smp, &proc, &stack);
	if (err)
		return err;
	if (stack == -E2BIG) {
		s->st.stacks_dropped++;
		stack = 0;
	} else if (stack < 0) {
		return (int)stack;
	}
	struct offcpu_row_key k2 = {
		.process = proc,
		.tid = o->key->tid,
		.stack = (uint32_t)stack,
		.reason = (uint32_t)strata_offcpu_reason_to_wire(o->key->reason),
	};
	uint64_t h = hash_bytes(&k2, sizeof(k2), 0);
	int64_t id = profile_htab__find(&s->offcpu_rows, h, offcpu_row_eq, &k2, c);

	if (id >= 0) {
		row = batch_builder__row_at(c->bb, BB_OFFCPU, (uint32_t)id);
		row->ns += o->ns;
		row->count += o->count;
		return 0;
	}
	row = batch_builder__row(c->bb, BB_OFFCPU);
	if (!row)
		return 0; /* counted by the builder */
	row->stack = k2.stack;
	row->process = proc;
	row->tid = k2.tid;
	row->reason = k2.reason;
	row->ns = o->ns;
	row->count = o->count;
	s->st.records++;
	if (profile_htab__insert(&s->offcpu_rows, h, batch_builder__rows(c->bb, BB_OFFCPU) - 1))
		s->st.offcpu_unmerged++; /* the row stands alone: still right */
	return 0;
}

int batch_sched__offcpu(struct batch_sched *s, struct agent_batch *ab, struct sched_collector *c)
{
	struct offcpu_ctx oc = { .s = s, .ab = ab, .bb = agent_batch__builder(ab) };
	int n = sched_collector__drain_offcpu(c, add_offcpu, &oc);

	return n < 0 ? n : 0;
}

/* ---- per-CPU counters (softirq vectors, foreign and target processes) --- */

static int cum_cmp(const void *a, const void *b)
{
	const struct cum_row *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return 0;
}

static int cum_add(struct batch_sched *s, uint32_t kind, uint32_t cpu, uint32_t id, uint64_t ns,
		   const char *comm)
{
	struct cum_set *set = &s->cum_cur;
	struct cum_row *r;

	if (set->n == BATCH_SCHED_MAX_CPU_ROWS) {
		s->st.cpu_rows_over++;
		return 0;
	}
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 256;
		void *v = realloc(set->v, cap * sizeof(*set->v));

		if (!v)
			return -ENOMEM;
		set->v = v;
		set->cap = cap;
	}
	r = &set->v[set->n++];
	*r = (struct cum_row){ .kind = kind, .cpu = cpu, .id = id, .ns = ns };
	if (comm) {
		memcpy(r->comm, comm, sizeof(r->comm));
		r->comm[sizeof(r->comm) - 1] = 0;
	}
	return 0;
}

static int collect_foreign(void *ctx, const struct strata_foreign_key *k,
			   const struct strata_foreign_val *v)
{
	return cum_add(ctx, CUM_FOREIGN, k->cpu, k->tgid, v->ns, v->comm);
}

static int collect_target(void *ctx, const struct strata_foreign_key *k,
			  const struct strata_foreign_val *v)
{
	return cum_add(ctx, CUM_TARGET, k->cpu, k->tgid, v->ns, v->comm);
}

/* One window delta as its wire row. */
static int add_cum_row(struct batch_sched *s, struct agent_batch *ab, const struct cum_row *r,
		       uint64_t d)
{
	struct batch_builder *bb = agent_batch__builder(ab);

	if (r->kind == CUM_SOFTIRQ) {
		Strata__V1__SoftirqVectorStat *row = batch_builder__row(bb, BB_SOFTIRQ);

		if (!row)
			return 0; /* counted by the builder */
		row->cpu = r->cpu;
		row->vector = r->id;
		row->ns = d;
	} else if (r->kind == CUM_FOREIGN) {
		Strata__V1__ForeignRun *row = batch_builder__row(bb, BB_FOREIGN);
		uint32_t comm = batch_builder__string(bb, r->comm);

		if (comm == UINT32_MAX)
			return -ENOMEM;
		if (!row)
			return 0;
		row->cpu = r->cpu;
		row->pid = r->id;
		row->comm_str = comm;
		row->ns = d;
	} else {
		struct bb_process fb = { .pid = r->id,
					 .comm = r->comm,
					 .rank = -1,
					 .local_rank = -1,
					 .world_size = -1 };
		int64_t proc = agent_batch__process_tgid(ab, r->id, &fb);
		Strata__V1__TargetCpu *row;

		if (proc < 0)
			return (int)proc;
		row = batch_builder__row(bb, BB_TARGET_CPU);
		if (!row)
			return 0;
		row->process = (uint32_t)proc;
		row->cpu = r->cpu;
		row->ns = d;
	}
	s->st.records++;
	return 0;
}

/* The process has exited.  A rank's CPU entry is deleted only then: a
 * rank that ran a whole window on its CPU without a switch has an
 * unchanged entry too, and its slice, added at its next switch, would be
 * lost if that fell between the read and the delete.  (A foreign
 * process's slices are charged within a second of a rank's: a delete
 * races with at most that.) */
static bool gone(uint32_t tgid)
{
	return kill((pid_t)tgid, 0) && errno == ESRCH;
}

/* Ships every per-CPU counter's delta since the last window.  Call after
 * add_irq (which collects the softirq vectors into cum_cur). */
static int add_cum(struct batch_sched *s, struct agent_batch *ab, struct sched_collector *c)
{
	struct cum_set tmp;
	int n = sched_collector__foreign(c, false, collect_foreign, s);
	size_t w = 0;

	if (n >= 0)
		n = sched_collector__foreign(c, true, collect_target, s);
	if (n < 0)
		return n;
	qsort(s->cum_cur.v, s->cum_cur.n, sizeof(*s->cum_cur.v), cum_cmp);
	for (size_t i = 0; i < s->cum_cur.n; i++) {
		const struct cum_row *r = &s->cum_cur.v[i];
		const struct cum_row *last = s->cum_last.n
						     ? bsearch(r, s->cum_last.v, s->cum_last.n,
							       sizeof(*s->cum_last.v), cum_cmp)
						     : NULL;
		uint64_t d = delta(r->ns, last ? last->ns : 0);
		int err = d ? add_cum_row(s, ab, r, d) : 0;
		struct strata_foreign_key k = { .cpu = r->cpu, .tgid = r->id };

		if (err)
			return err;
		/* A process's CPU counter unchanged for a window leaves its
		 * BPF map (and, so, the last-shipped set: it counts from zero
		 * if it comes back).  Kept, the 4096 entries filled with the
		 * dead within minutes on a node starting processes, and new
		 * foreign processes and ranks' CPUs went unreported. */
		if (!d && last && r->kind != CUM_SOFTIRQ &&
		    (r->kind == CUM_FOREIGN || gone(r->id)) &&
		    !sched_collector__foreign_forget(c, r->kind == CUM_TARGET, &k)) {
			s->st.cpu_rows_forgotten++;
			continue;
		}
		s->cum_cur.v[w++] = *r;
	}
	s->cum_cur.n = w;
	tmp = s->cum_last;
	s->cum_last = s->cum_cur;
	s->cum_cur = tmp;
	s->cum_cur.n = 0;
	return 0;
}

/* ---- irq --------------------------------------------------------------- */

static int grow_irq(struct batch_sched *s, size_t ncpus)
{
	uint64_t *l, *c;

	if (ncpus <= s->ncpus)
		return 0;
	l = realloc(s->irq_last, 2 * ncpus * sizeof(*l));
	if (l)
		s->irq_last = l;
	c = realloc(s->irq_cur, 2 * ncpus * sizeof(*c));
	if (c)
		s->irq_cur = c;
	if (!l || !c)
		return -ENOMEM;
	memset(l + 2 * s->ncpus, 0, 2 * (ncpus - s->ncpus) * sizeof(*l));
	memset(c + 2 * s->ncpus, 0, 2 * (ncpus - s->ncpus) * sizeof(*c));
	s->ncpus = ncpus;
	return 0;
}

static int sum_irq(void *ctx, uint32_t cpu, bool softirq, uint32_t vector, uint64_t ns)
{
	struct batch_sched *s = ctx;
	int err = grow_irq(s, (size_t)cpu + 1);

	if (err)
		return err;
	s->irq_cur[2 * cpu + softirq] += ns;
	return softirq ? cum_add(s, CUM_SOFTIRQ, cpu, vector, ns, NULL) : 0;
}

static int add_irq(struct batch_sched *s, struct agent_batch *ab, struct sched_collector *c)
{
	struct batch_builder *bb = agent_batch__builder(ab);
	int err;

	s->cum_cur.n = 0; /* softirq vectors are its first rows */
	if (s->ncpus)
		memset(s->irq_cur, 0, 2 * s->ncpus * sizeof(*s->irq_cur));
	err = sched_collector__irq(c, sum_irq, s);
	if (err < 0)
		return err;
	for (size_t cpu = 0; cpu < s->ncpus; cpu++) {
		uint64_t hard = delta(s->irq_cur[2 * cpu], s->irq_last[2 * cpu]),
			 soft = delta(s->irq_cur[2 * cpu + 1], s->irq_last[2 * cpu + 1]);
		Strata__V1__IrqStat *row;

		s->irq_last[2 * cpu] = s->irq_cur[2 * cpu];
		s->irq_last[2 * cpu + 1] = s->irq_cur[2 * cpu + 1];
		if (!hard && !soft)
			continue;
		row = batch_builder__row(bb, BB_IRQ);
		if (!row)
			continue;
		row->cpu = (uint32_t)cpu;
		row->irq_ns = hard;
		row->softirq_ns = soft;
		s->st.records++;
	}
	return 0;
}

int batch_sched__add(struct batch_sched *s, struct agent_batch *ab, struct sched_collector *c)
{
	int err = add_threads(s, ab, c);

	if (!err)
		err = add_irq(s, ab, c);
	if (!err)
		err = add_cum(s, ab, c);
	profile_htab__fini(&s->offcpu_rows); /* the batch is finished next */
	return err;
}

void batch_sched__stats(const struct batch_sched *s, struct batch_sched_stats *st)
{
	*st = s->st;
}
