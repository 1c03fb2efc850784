// SPDX-License-Identifier: Apache-2.0
/*
 * Server-side diagnosis windows (see diag_engine.h): per job and window,
 * per-thread breakdown counters -> cumulative per-rank breakdown, GPU
 * memory outstanding by stack -> leak tracker.  Stragglers are decided at
 * ingest (server/diag_live.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diagnose/breakdown.h"
#include "lib/clock.h"
#include "lib/enum_names.h"
#include "server/diag_engine.h"
#include "server/diag_inputs.h"

#define MAX_RANKS 1024 /* per job */
#define MAX_SITES 512  /* outstanding (pid, stack) sites kept per job for /metrics */
#define MAX_PIDS 1024  /* pid -> node/rank per job */

struct site {
	uint32_t pid;
	uint64_t stack_id, bytes;
};

struct pid_place {
	uint32_t pid;
	int32_t rank;
	char node[DIAG_NAME_LEN];
};

struct job_state {
	char job[DIAG_NAME_LEN];
	struct leak_tracker *lt;
	uint64_t next_ws; /* start of the next window to judge */
	struct diag_rank_time ranks[MAX_RANKS];
	uint32_t nranks;
	struct site sites[MAX_SITES];
	uint32_t nsites;
	struct pid_place pids[MAX_PIDS];
	uint32_t npids;
};

struct diag_engine {
	struct store *st;
	struct diag_engine_opts o;
	pthread_mutex_t lock; /* jobs and stats; one run at a time */
	struct job_state **jobs;
	uint32_t njobs;
	struct diag_engine_stats stats;
	pthread_t thread;
	int running;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	int stop;
};

struct diag_engine *diag_engine__new(struct store *st, const struct diag_engine_opts *o)
{
	struct diag_engine *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->st = st;
	e->o = (struct diag_engine_opts){ .window_ns = 10000000000ull,
					  .max_jobs = 64,
					  .max_catchup = 360 };
	if (o) {
		if (o->window_ns)
			e->o.window_ns = o->window_ns;
		e->o.delay_ns = o->delay_ns;
		if (o->max_jobs)
			e->o.max_jobs = o->max_jobs;
		if (o->max_catchup)
			e->o.max_catchup = o->max_catchup;
		e->o.interval_ns = o->interval_ns;
	}
	if (!e->o.delay_ns)
		e->o.delay_ns = e->o.window_ns;
	if (!e->o.interval_ns)
		e->o.interval_ns = e->o.window_ns / 4;
	e->jobs = calloc(e->o.max_jobs, sizeof(*e->jobs));
	if (!e->jobs) {
		free(e);
		return NULL;
	}
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->stop_lock, NULL);
	pthread_cond_init(&e->stop_cond, NULL);
	return e;
}

static void job_free(struct job_state *j)
{
	if (!j)
		return;
	leak_tracker__free(j->lt);
	free(j);
}

static void *engine_thread(void *arg)
{
	struct diag_engine *e = arg;
	uint64_t every = e->o.interval_ns;

	pthread_mutex_lock(&e->stop_lock);
	while (!e->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&e->stop_lock);
		diag_engine__run(e, realtime_ns());
		ts = realtime_deadline(every);
		pthread_mutex_lock(&e->stop_lock);
		if (!e->stop)
			pthread_cond_timedwait(&e->stop_cond, &e->stop_lock, &ts);
	}
	pthread_mutex_unlock(&e->stop_lock);
	return NULL;
}

int diag_engine__start(struct diag_engine *e)
{
	int err;

	if (e->o.interval_ns == UINT64_MAX)
		return 0; /* on query only */
	err = pthread_create(&e->thread, NULL, engine_thread, e);

	if (err)
		return -err;
	e->running = 1;
	return 0;
}

void diag_engine__free(struct diag_engine *e)
{
	if (!e)
		return;
	if (e->running) {
		pthread_mutex_lock(&e->stop_lock);
		e->stop = 1;
		pthread_cond_signal(&e->stop_cond);
		pthread_mutex_unlock(&e->stop_lock);
		pthread_join(e->thread, NULL);
	}
	for (uint32_t i = 0; i < e->njobs; i++)
		job_free(e->jobs[i]);
	free(e->jobs);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->stop_lock);
	pthread_cond_destroy(&e->stop_cond);
	free(e);
}

uint64_t diag_engine__window_ns(const struct diag_engine *e)
{
	return e->o.window_ns;
}

/* ---- one window ---------------------------------------------------------------- */

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

static int judge_window(struct diag_engine *e, struct job_state *j, uint64_t ws)
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
out:
	free(tc.t);
	free(lc.s);
	diag_strings__free(names);
	return err;
}

/* ---- jobs ---------------------------------------------------------------------- */

struct job_list {
	struct {
		char job[DIAG_NAME_LEN];
		uint64_t first_ns, last_ns;
	} * v;
	size_t n, cap;
};

static int on_job(void *ctx, const struct store_job *sj)
{
	struct job_list *l = ctx;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		void *p = realloc(l->v, cap * sizeof(*l->v));

		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = cap;
	}
	snprintf(l->v[l->n].job, DIAG_NAME_LEN, "%s", sj->job);
	l->v[l->n].first_ns = sj->first_ns;
	l->v[l->n].last_ns = sj->last_ns;
	l->n++;
	return 0;
}

static struct job_state *job_get(struct diag_engine *e, const char *job)
{
	for (uint32_t i = 0; i < e->njobs; i++)
		if (!strcmp(e->jobs[i]->job, job))
			return e->jobs[i];
	return NULL;
}

static struct job_state *job_add(struct diag_engine *e, const char *job, uint64_t first_ns)
{
	struct job_state *j;

	if (e->njobs == e->o.max_jobs) {
		e->stats.jobs_dropped++;
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->job, sizeof(j->job), "%s", job);
	j->lt = leak_tracker__new(NULL);
	if (!j->lt) {
		job_free(j);
		return NULL;
	}
	j->next_ws = first_ns / e->o.window_ns * e->o.window_ns;
	e->jobs[e->njobs++] = j;
	e->stats.jobs = e->njobs;
	return j;
}

int diag_engine__run(struct diag_engine *e, uint64_t now_ns)
{
	struct job_list jl = { 0 };
	int err;

	/* Queries and the thread share one run at a time: a second caller
	 * waits, then finds the work done. */
	pthread_mutex_lock(&e->lock);
	e->stats.runs++;
	err = e->st->ops->jobs(e->st, &(struct store_filter){ 0 }, on_job, &jl);
	for (size_t i = 0; !err && i < jl.n; i++) {
		struct job_state *j = job_get(e, jl.v[i].job);
		uint64_t W = e->o.window_ns, done = 0;

		if (!j)
			j = job_add(e, jl.v[i].job, jl.v[i].first_ns);
		if (!j)
			continue;
		/* far behind (server down, old data): judge the recent past only */
		if (now_ns > e->o.delay_ns && now_ns - e->o.delay_ns > j->next_ws + W &&
		    (now_ns - e->o.delay_ns - j->next_ws) / W > e->o.max_catchup) {
			uint64_t to =
				(now_ns - e->o.delay_ns) / W * W - (uint64_t)e->o.max_catchup * W;

			if (to > j->next_ws) {
				e->stats.windows_skipped += (to - j->next_ws) / W;
				j->next_ws = to;
			}
		}
		/* complete windows that may hold data of this job */
		while (!err && j->next_ws + W + e->o.delay_ns <= now_ns &&
		       j->next_ws <= jl.v[i].last_ns + W && done < e->o.max_catchup) {
			err = judge_window(e, j, j->next_ws);
			if (err) {
				e->stats.store_errors++;
				break;
			}
			j->next_ws += W;
			e->stats.windows++;
			done++;
		}
	}
	pthread_mutex_unlock(&e->lock);
	free(jl.v);
	return err;
}

/* ---- reading ------------------------------------------------------------------- */

size_t diag_engine__breakdown(struct diag_engine *e, const char *job, struct diag_rank_time *out,
			      size_t max)
{
	struct job_state *j;
	size_t n = 0;

	pthread_mutex_lock(&e->lock);
	j = job_get(e, job);
	if (j) {
		n = j->nranks;
		memcpy(out, j->ranks, (n < max ? n : max) * sizeof(*out));
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

static const struct pid_place *pid_of(const struct job_state *j, uint32_t pid)
{
	for (uint32_t i = 0; i < j->npids; i++)
		if (j->pids[i].pid == pid)
			return &j->pids[i];
	return NULL;
}

size_t diag_engine__leaks(struct diag_engine *e, const char *job, struct diag_leak_report *out,
			  size_t max)
{
	struct diag_leak l[64];
	size_t total = 0;

	pthread_mutex_lock(&e->lock);
	for (uint32_t i = 0; i < e->njobs; i++) {
		struct job_state *j = e->jobs[i];
		size_t n;

		if (job && strcmp(j->job, job))
			continue;
		n = leak_tracker__list(j->lt, l, 64);
		for (size_t k = 0; k < n && k < 64; k++, total++) {
			const struct pid_place *p = pid_of(j, l[k].pid);

			if (total >= max)
				continue;
			out[total].l = l[k];
			out[total].rank = p ? p->rank : -1;
			snprintf(out[total].node, DIAG_NAME_LEN, "%s", p ? p->node : "");
		}
	}
	pthread_mutex_unlock(&e->lock);
	return total;
}

uint64_t diag_engine__judged_until(struct diag_engine *e, const char *job)
{
	struct job_state *j;
	uint64_t t = 0;

	pthread_mutex_lock(&e->lock);
	j = job_get(e, job);
	if (j)
		t = j->next_ws;
	pthread_mutex_unlock(&e->lock);
	return t;
}

static void collect_detector_stats(struct diag_engine *e)
{
	e->stats.leak_series_dropped = 0;
	for (uint32_t i = 0; i < e->njobs; i++) {
		struct leak_stats ls;

		leak_tracker__stats(e->jobs[i]->lt, &ls);
		e->stats.leak_series_dropped += ls.series_dropped;
	}
}

void diag_engine__stats(struct diag_engine *e, struct diag_engine_stats *st)
{
	pthread_mutex_lock(&e->lock);
	collect_detector_stats(e);
	*st = e->stats;
	pthread_mutex_unlock(&e->lock);
}

/* ---- /metrics ------------------------------------------------------------------ */

void diag_engine__metrics(struct diag_engine *e, FILE *o)
{
	struct diag_leak l[64];

	pthread_mutex_lock(&e->lock);
	collect_detector_stats(e);
	fputs("# HELP strata_rank_time_seconds_total time breakdown of the rank's main thread\n"
	      "# TYPE strata_rank_time_seconds_total counter\n",
	      o);
	for (uint32_t i = 0; i < e->njobs; i++)
		for (uint32_t r = 0; r < e->jobs[i]->nranks; r++) {
			const struct diag_rank_time *t = &e->jobs[i]->ranks[r];

			for (uint32_t c = 0; c < STRATA_TIME_MAX; c++) {
				fputs("strata_rank_time_seconds_total{job=", o);
				diag_prom_label(o, e->jobs[i]->job);
				fprintf(o, ",rank=\"%d\",node=", t->rank);
				diag_prom_label(o, t->node);
				fprintf(o, ",category=\"%s\"} %.9f\n", strata_time_cat_name(c),
					t->ns[c] / 1e9);
			}
		}
	fputs("# HELP strata_gpu_outstanding_bytes GPU bytes allocated and not freed, by stack\n"
	      "# TYPE strata_gpu_outstanding_bytes gauge\n",
	      o);
	for (uint32_t i = 0; i < e->njobs; i++)
		for (uint32_t s = 0; s < e->jobs[i]->nsites; s++) {
			const struct site *st = &e->jobs[i]->sites[s];
			const struct pid_place *p = pid_of(e->jobs[i], st->pid);

			fputs("strata_gpu_outstanding_bytes{job=", o);
			diag_prom_label(o, e->jobs[i]->job);
			fputs(",node=", o);
			diag_prom_label(o, p ? p->node : "");
			fprintf(o, ",pid=\"%u\",stack_id=\"%016" PRIx64 "\"} %" PRIu64 "\n",
				st->pid, st->stack_id, st->bytes);
		}
	fputs("# HELP strata_gpu_leak_growth_bytes_per_second growth of a leaking stack\n"
	      "# TYPE strata_gpu_leak_growth_bytes_per_second gauge\n"
	      "# HELP strata_gpu_leak_age_seconds since the leaking stack first held memory\n"
	      "# TYPE strata_gpu_leak_age_seconds gauge\n",
	      o);
	for (uint32_t i = 0; i < e->njobs; i++) {
		size_t n = leak_tracker__list(e->jobs[i]->lt, l, 64);

		for (size_t k = 0; k < n && k < 64; k++)
			for (int m = 0; m < 2; m++) {
				const struct pid_place *p = pid_of(e->jobs[i], l[k].pid);

				fputs(m ? "strata_gpu_leak_age_seconds{job="
					: "strata_gpu_leak_growth_bytes_per_second{job=",
				      o);
				diag_prom_label(o, e->jobs[i]->job);
				fputs(",node=", o);
				diag_prom_label(o, p ? p->node : "");
				fprintf(o, ",pid=\"%u\",stack_id=\"%016" PRIx64 "\"} %g\n",
					l[k].pid, l[k].stack_id,
					m ? l[k].age_seconds : l[k].growth_bytes_per_s);
			}
	}
	fprintf(o,
		"# HELP strata_diagnosis_drops_total bounded-table refusals in the detectors\n"
		"# TYPE strata_diagnosis_drops_total counter\n"
		"strata_diagnosis_drops_total{what=\"leak_series\"} %" PRIu64 "\n"
		"strata_diagnosis_drops_total{what=\"jobs\"} %" PRIu64 "\n"
		"strata_diagnosis_drops_total{what=\"ranks\"} %" PRIu64 "\n"
		"strata_diagnosis_drops_total{what=\"leak_sites\"} %" PRIu64 "\n"
		"# HELP strata_diagnosis_windows_total windows judged per job\n"
		"# TYPE strata_diagnosis_windows_total counter\n"
		"strata_diagnosis_windows_total %" PRIu64 "\n",
		e->stats.leak_series_dropped, e->stats.jobs_dropped, e->stats.ranks_dropped,
		e->stats.sites_dropped, e->stats.windows);
	pthread_mutex_unlock(&e->lock);
}
