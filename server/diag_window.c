// SPDX-License-Identifier: Apache-2.0
/*
 * One window of one job for the windowed diagnosis engine: the per-thread
 * time counters -> the cumulative breakdown of each rank's main thread,
 * GPU memory outstanding by stack -> the job's leak tracker and the sites
 * /metrics shows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/breakdown.h"
#include "lib/clock.h"
#include "server/diag_engine_int.h"
#include "server/diag_inputs.h"

static void place_pid(struct job_state *j, struct diag_engine *e, uint32_t pid, const char *node,
		      int has_rank, int32_t rank)
{
	for (uint32_t i = 0; i < j->npids; i++)
		if (j->pids[i].pid == pid && !strcmp(j->pids[i].node, node))
			return;
	if (j->npids == MAX_PIDS) {
		e->stats.ranks_dropped++;
		return;
	}
	j->pids[j->npids].pid = pid;
	j->pids[j->npids].rank = has_rank ? rank : -1;
	snprintf(j->pids[j->npids].node, DIAG_NAME_LEN, "%s", node);
	j->npids++;
}

/* The per-thread counters of one window, grouped by thread. */
struct thread_sum {
	char node[DIAG_NAME_LEN];
	uint32_t pid, tid;
	int has_rank;
	int32_t rank;
	uint64_t ns[STRATA_TIME_MAX];
};

struct tt_ctx {
	struct thread_sum *t;
	size_t n, cap;
};

static int on_thread_time(void *ctx, const struct store_thread_time *t)
{
	struct tt_ctx *c = ctx;
	struct thread_sum *s = NULL;

	if (t->kind != STORE_THREAD_TIME || t->index >= STRATA_TIME_MAX || !t->has_rank)
		return 0;
	for (size_t i = 0; i < c->n && !s; i++)
		if (c->t[i].pid == t->pid && c->t[i].tid == t->tid &&
		    !strcmp(c->t[i].node, t->node))
			s = &c->t[i];
	if (!s) {
		if (c->n == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 64;
			void *p = realloc(c->t, cap * sizeof(*c->t));

			if (!p)
				return -ENOMEM;
			c->t = p;
			c->cap = cap;
		}
		s = &c->t[c->n++];
		memset(s, 0, sizeof(*s));
		snprintf(s->node, sizeof(s->node), "%s", t->node);
		s->pid = t->pid;
		s->tid = t->tid;
		s->has_rank = t->has_rank;
		s->rank = t->rank;
	}
	s->ns[t->index] += t->ns;
	return 0;
}

/* The main training thread of a process: the one that spends the most time
 * in the GPU/NCCL layers (it drives the step), then the busiest. */
static uint64_t main_key(const struct thread_sum *s, int layer)
{
	if (layer)
		return s->ns[STRATA_TIME_CUDA_API] + s->ns[STRATA_TIME_GPU_WAIT] +
		       s->ns[STRATA_TIME_COLLECTIVE];
	return s->ns[STRATA_TIME_CPU] + s->ns[STRATA_TIME_RUNNABLE] + s->ns[STRATA_TIME_IO_WAIT] +
	       s->ns[STRATA_TIME_LOCK_WAIT];
}

static int better_main(const struct thread_sum *a, const struct thread_sum *b)
{
	if (main_key(a, 1) != main_key(b, 1))
		return main_key(a, 1) > main_key(b, 1);
	return main_key(a, 0) > main_key(b, 0);
}

static void add_breakdown(struct diag_engine *e, struct job_state *j, struct tt_ctx *c)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct thread_sum *s = &c->t[i];
		struct diag_rank_time *r = NULL;
		int best = 1;

		/* skip threads a sibling of the same rank beats */
		for (size_t k = 0; k < c->n && best; k++)
			if (k != i && c->t[k].rank == s->rank && better_main(&c->t[k], s))
				best = 0;
		if (!best)
			continue;
		for (uint32_t k = 0; k < j->nranks && !r; k++)
			if (j->ranks[k].rank == s->rank)
				r = &j->ranks[k];
		if (!r) {
			if (j->nranks == MAX_RANKS) {
				e->stats.ranks_dropped++;
				continue;
			}
			r = &j->ranks[j->nranks++];
			memset(r, 0, sizeof(*r));
			r->rank = s->rank;
		}
		r->pid = s->pid;
		r->tid = s->tid;
		snprintf(r->node, sizeof(r->node), "%s", s->node);
		for (int k = 0; k < STRATA_TIME_MAX; k++)
			r->ns[k] += s->ns[k];
	}
}

struct leak_ctx {
	struct diag_alloc_site *s;
	size_t n, cap;
	struct diag_strings *names;
	struct job_state *j;
	struct diag_engine *e;
};

static int on_leak_row(void *ctx, const struct store_leak *l)
{
	struct leak_ctx *c = ctx;
	char folded[LEAK_STACK_LEN];

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		void *p = realloc(c->s, cap * sizeof(*c->s));

		if (!p)
			return -ENOMEM;
		c->s = p;
		c->cap = cap;
	}
	diag_fold_stack(l->stack, folded, sizeof(folded));
	c->s[c->n] = (struct diag_alloc_site){ .pid = l->pid,
					       .level = l->level,
					       .stack_id = l->stack->id,
					       .stack = diag_strings__add(c->names, folded),
					       .outstanding_bytes = l->bytes };
	if (!c->s[c->n].stack)
		return -ENOMEM;
	c->n++;
	place_pid(c->j, c->e, l->pid, l->node, l->has_rank, l->rank);
	return 0;
}

static void keep_sites(struct diag_engine *e, struct job_state *j, const struct leak_ctx *c)
{
	j->nsites = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (j->nsites == MAX_SITES) { /* rows come largest first */
			e->stats.sites_dropped += c->n - i;
			break;
		}
		j->sites[j->nsites++] = (struct site){ .pid = c->s[i].pid,
						       .stack_id = c->s[i].stack_id,
						       .bytes = c->s[i].outstanding_bytes };
	}
}

/* Collective health of the window: stored (both stores) and summed into
 * the job's counters for /metrics.  Collectives reach a little past the
 * window's edges, so the calls are read with a margin the delay has
 * already waited for. */
static int judge_collectives(struct diag_engine *e, struct job_state *j, uint64_t ws, uint64_t we)
{
	uint64_t margin = e->o.delay_ns < 30000000000ull ? e->o.delay_ns : 30000000000ull;
	struct collstat_row rows[MAX_COLLSTATS];
	int n = diag_collstats__window(e->st, j->job, ws, we, margin, rows, MAX_COLLSTATS,
				       &e->colls);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		size_t k = j->ncolls;

		if (collstat_merge(j->colls, &k, MAX_COLLSTATS, &rows[i])) {
			e->colls.c.rows_dropped++;
			continue;
		}
		j->ncolls = (uint32_t)k;
		for (k = 0; k < j->ncolls; k++)
			if (j->colls[k].comm_hash == rows[i].comm_hash &&
			    j->colls[k].size_class == rows[i].size_class &&
			    j->colls[k].nranks == rows[i].nranks &&
			    !strcmp(j->colls[k].op, rows[i].op))
				collstat_rates(&rows[i], &j->colls_last[k]);
	}
	return diag_collstats__store(e->st, j->job, ws, we, rows, (size_t)n, realtime_ns());
}

int diag_window__judge(struct diag_engine *e, struct job_state *j, uint64_t ws)
{
	uint64_t we = ws + e->o.window_ns;
	struct store_filter f = { .job = j->job, .from_ns = ws, .to_ns = we };
	struct diag_strings *names = diag_strings__new();
	struct tt_ctx tc = { 0 };
	struct leak_ctx lc = { .names = names, .j = j, .e = e };
	int err = -ENOMEM;

	if (!names)
		goto out;
	err = e->st->ops->thread_times(e->st, &f, on_thread_time, &tc);
	if (err)
		goto out;
	add_breakdown(e, j, &tc);
	f.from_ns = 0; /* outstanding at the window's end */
	err = e->st->ops->leaks(e->st, &f, on_leak_row, &lc);
	if (err)
		goto out;
	err = leak_tracker__window(j->lt, lc.s, lc.n, (int64_t)we);
	if (!err)
		keep_sites(e, j, &lc);
	/* the window's other results are in: a failure here is counted, and
	 * the window not judged twice for it */
	if (!err && judge_collectives(e, j, ws, we))
		e->stats.store_errors++;
out:
	free(tc.t);
	free(lc.s);
	diag_strings__free(names);
	return err;
}
