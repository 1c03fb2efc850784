// SPDX-License-Identifier: Apache-2.0
/*
 * Server-side diagnosis windows (see diag_engine.h): the jobs (added from
 * the store, freed when idle or quiet), the runs that judge their windows
 * in order (one window: server/diag_window.c), what queries and /metrics
 * read.  Stragglers are decided at ingest (server/diag_live.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/enum_names.h"
#include "lib/hash.h"
#include "server/diag_engine_int.h"
#include "server/diag_inputs.h"

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
		e->o.idle_ns = o->idle_ns;
		e->o.owns = o->owns;
		e->o.owns_ctx = o->owns_ctx;
	}
	if (!e->o.delay_ns)
		e->o.delay_ns = e->o.window_ns;
	if (!e->o.idle_ns) {
		e->o.idle_ns = (uint64_t)e->o.max_catchup * e->o.window_ns;
		if (e->o.idle_ns < 3600000000000ull)
			e->o.idle_ns = 3600000000000ull;
	}
	if (!e->o.interval_ns)
		e->o.interval_ns = e->o.window_ns / 4;
	e->jobs = calloc(e->o.max_jobs, sizeof(*e->jobs));
	e->done = calloc(MAX_DONE, sizeof(*e->done));
	if (!e->jobs || !e->done) {
		free(e->jobs);
		free(e->done);
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
	free(e->done);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->stop_lock);
	pthread_cond_destroy(&e->stop_cond);
	free(e);
}

uint64_t diag_engine__window_ns(const struct diag_engine *e)
{
	return e->o.window_ns;
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

/* Nothing left to judge: every window up to its data's is judged. */
static int judged_all(const struct diag_engine *e, const struct job_state *j)
{
	return j->next_ws > j->last_ns + e->o.window_ns;
}

/* No data for idle_ns past the delay: the job ended (or lost its agents). */
static int idle_at(const struct diag_engine *e, uint64_t last_ns, uint64_t now_ns)
{
	return now_ns > e->o.delay_ns + e->o.idle_ns &&
	       last_ns < now_ns - e->o.delay_ns - e->o.idle_ns;
}

static uint64_t job_key(const char *job)
{
	uint64_t h = hash_bytes(job, strlen(job), 0x646f6e65);

	return h ? h : 1;
}

/* Where a freed job stopped (0: not remembered). */
static uint64_t done_get(const struct diag_engine *e, const char *job)
{
	uint64_t key = job_key(job);

	for (uint32_t i = 0; i < DONE_PROBES; i++) {
		const struct done_job *d = &e->done[(key + i) & (MAX_DONE - 1)];

		if (d->key == key)
			return d->next_ws;
	}
	return 0;
}

/* Remembers a freed job; a full probe run forgets its oldest (counted). */
static void done_note(struct diag_engine *e, const char *job, uint64_t next_ws)
{
	uint64_t key = job_key(job);
	struct done_job *slot = NULL;

	for (uint32_t i = 0; i < DONE_PROBES; i++) {
		struct done_job *d = &e->done[(key + i) & (MAX_DONE - 1)];

		if (d->key == key || !d->key) {
			slot = d;
			break;
		}
		if (!slot || d->next_ws < slot->next_ws)
			slot = d;
	}
	if (slot->key && slot->key != key)
		e->stats.done_forgotten++;
	slot->key = key;
	slot->next_ws = next_ws;
}

static void job_evict(struct diag_engine *e, uint32_t i)
{
	done_note(e, e->jobs[i]->job, e->jobs[i]->next_ws);
	job_free(e->jobs[i]);
	e->jobs[i] = e->jobs[--e->njobs];
	e->stats.jobs = e->njobs;
	e->stats.jobs_evicted++;
}

/*
 * Room for a new job in a full table: the quietest tracked job (all its
 * windows judged, no data for a window past the delay, the oldest data)
 * goes.  A table full of active jobs drops the newcomer (counted).
 */
static int make_room(struct diag_engine *e, uint64_t now_ns)
{
	uint64_t quiet = e->o.delay_ns + e->o.window_ns;
	int64_t best = -1;

	for (uint32_t i = 0; i < e->njobs; i++) {
		const struct job_state *j = e->jobs[i];

		if (judged_all(e, j) && now_ns > quiet && j->last_ns < now_ns - quiet &&
		    (best < 0 || j->last_ns < e->jobs[best]->last_ns))
			best = i;
	}
	if (best < 0)
		return -ENOSPC;
	job_evict(e, (uint32_t)best);
	return 0;
}

static struct job_state *job_add(struct diag_engine *e, const char *job, uint64_t first_ns,
				 uint64_t now_ns)
{
	struct job_state *j;

	if (e->njobs == e->o.max_jobs && make_room(e, now_ns)) {
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

/* Whether this replica judges job (server/replicas.h; always without). */
static int owned(const struct diag_engine *e, const char *job)
{
	return !e->o.owns || e->o.owns(e->o.owns_ctx, job);
}

/* Frees jobs that are gone from the store (retention), idle with nothing
 * left to judge, or owned by another replica now; refreshes the others'
 * latest data. */
static void evict_idle(struct diag_engine *e, const struct job_list *jl, uint64_t now_ns)
{
	for (uint32_t i = 0; i < e->njobs;) {
		struct job_state *j = e->jobs[i];
		size_t k = 0;

		while (k < jl->n && strcmp(jl->v[k].job, j->job))
			k++;
		if (k < jl->n)
			j->last_ns = jl->v[k].last_ns;
		if (k == jl->n || (judged_all(e, j) && idle_at(e, j->last_ns, now_ns)) ||
		    !owned(e, j->job))
			job_evict(e, i); /* the last job moved to i */
		else
			i++;
	}
}

int diag_engine__run(struct diag_engine *e, uint64_t now_ns)
{
	struct job_list jl = { 0 };
	struct store_read_bounds bounds;
	int err;

	/* Queries and the thread share one run at a time: a second caller
	 * waits, then finds the work done.  The run is everyone's: a query
	 * thread's deadline and client do not bound it (an interrupted window
	 * is judged again, and part of it was added already). */
	store__read_bounds_take(&bounds);
	pthread_mutex_lock(&e->lock);
	e->stats.runs++;
	err = e->st->ops->jobs(e->st, &(struct store_filter){ 0 }, on_job, &jl);
	if (!err)
		evict_idle(e, &jl, now_ns);
	for (size_t i = 0; !err && i < jl.n; i++) {
		struct job_state *j = job_get(e, jl.v[i].job);
		uint64_t W = e->o.window_ns, done = 0;

		if (!j && !owned(e, jl.v[i].job))
			continue;
		if (!j) {
			uint64_t resume = done_get(e, jl.v[i].job);

			/* freed before: back only with newer data, from where it
			 * stopped; never seen: not when idle (nothing to judge) */
			if (resume ? jl.v[i].last_ns + W < resume
				   : idle_at(e, jl.v[i].last_ns, now_ns))
				continue;
			j = job_add(e, jl.v[i].job, jl.v[i].first_ns, now_ns);
			if (j && resume)
				j->next_ws = resume;
		}
		if (!j)
			continue;
		j->last_ns = jl.v[i].last_ns;
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
			err = diag_window__judge(e, j, j->next_ws);
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
	store__read_bounds_put(&bounds);
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
	struct job_list jl = { 0 };
	struct job_state *j;
	uint64_t t = 0, W = e->o.window_ns;

	pthread_mutex_lock(&e->lock);
	j = job_get(e, job);
	if (j)
		t = j->next_ws;
	pthread_mutex_unlock(&e->lock);
	if (j)
		return t;
	pthread_mutex_lock(&e->lock);
	t = done_get(e, job);
	pthread_mutex_unlock(&e->lock);
	if (t)
		return t;
	/* Never tracked (the server started after it ended): an idle job is
	 * complete up to the window after its last data. */
	if (!e->st->ops->jobs(e->st, &(struct store_filter){ .job = job }, on_job, &jl) &&
	    jl.n == 1 && idle_at(e, jl.v[0].last_ns, realtime_ns()))
		t = (jl.v[0].last_ns / W + 1) * W;
	free(jl.v);
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

/* Collective health of each job (diagnose/collstats.h): counters summed
 * over the judged windows (rates of them give the means: stall / occurrences,
 * bytes / observed...), and the bandwidths of the last window a row
 * occurred in. */
static void collstat_metrics(struct diag_engine *e, FILE *o)
{
	static const char *const m[][3] = {
		{ "occurrences_total", "counter", "collectives of the row in the judged windows" },
		{ "stall_seconds_total", "counter",
		  "aggregated stall: per collective the mean time its ranks spent in the call" },
		{ "observed_seconds_total", "counter",
		  "per collective first entry to last exit across the ranks" },
		{ "slack_seconds_total", "counter",
		  "per collective the mean time from a rank's entry to the last rank's entry" },
		{ "bytes_total", "counter", "message bytes (count x dtype size)" },
		{ "required_bandwidth_bytes_per_second", "gauge",
		  "bytes / slack in the last window the row occurred in" },
		{ "bus_bandwidth_bytes_per_second", "gauge",
		  "bytes / observed x NCCL's bus factor in the last window the row occurred in" },
	};

	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		fprintf(o, "# HELP strata_collective_%s %s\n# TYPE strata_collective_%s %s\n",
			m[k][0], m[k][2], m[k][0], m[k][1]);
		for (uint32_t i = 0; i < e->njobs; i++)
			for (uint32_t r = 0; r < e->jobs[i]->ncolls; r++) {
				const struct collstat_row *c = &e->jobs[i]->colls[r];
				const struct collstat_rates *last = &e->jobs[i]->colls_last[r];
				double v[] = { (double)c->occurrences, c->stall_ns / 1e9,
					       c->observed_ns / 1e9,   c->slack_ns / 1e9,
					       (double)c->bytes,       last->required_bps,
					       last->bus_bps };

				fprintf(o, "strata_collective_%s{job=", m[k][0]);
				diag_prom_label(o, e->jobs[i]->job);
				fprintf(o, ",communicator=\"%016" PRIx64 "\",op=", c->comm_hash);
				diag_prom_label(o, c->op);
				fprintf(o, ",size_class=\"%" PRIu64 "\",nranks=\"%d\"} %.17g\n",
					c->size_class, c->nranks, v[k]);
			}
	}
	fprintf(o,
		"# HELP strata_collective_stats_collectives_total collectives the collective "
		"health assembled, by outcome\n"
		"# TYPE strata_collective_stats_collectives_total counter\n"
		"strata_collective_stats_collectives_total{outcome=\"summed\"} %" PRIu64 "\n"
		"strata_collective_stats_collectives_total{outcome=\"without_every_rank\"} %" PRIu64
		"\n"
		"strata_collective_stats_collectives_total{outcome=\"unfinished\"} %" PRIu64 "\n"
		"# HELP strata_collective_stats_drops_total what the collective health left out\n"
		"# TYPE strata_collective_stats_drops_total counter\n"
		"strata_collective_stats_drops_total{what=\"duplicate_rank\"} %" PRIu64 "\n"
		"strata_collective_stats_drops_total{what=\"no_communicator\"} %" PRIu64 "\n"
		"strata_collective_stats_drops_total{what=\"rows\"} %" PRIu64 "\n"
		"strata_collective_stats_drops_total{what=\"events_truncated\"} %" PRIu64 "\n",
		e->colls.c.collectives, e->colls.c.partial, e->colls.c.no_exit,
		e->colls.c.duplicates, e->colls.no_communicator, e->colls.c.rows_dropped,
		e->colls.events_truncated);
}

void diag_engine__metrics(struct diag_engine *e, FILE *o)
{
	struct diag_leak l[64];

	pthread_mutex_lock(&e->lock);
	collect_detector_stats(e);
	collstat_metrics(e, o);
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
		"strata_diagnosis_windows_total %" PRIu64 "\n"
		"# HELP strata_diagnosis_jobs_evicted_total jobs freed: idle, or quiet for room\n"
		"# TYPE strata_diagnosis_jobs_evicted_total counter\n"
		"strata_diagnosis_jobs_evicted_total %" PRIu64 "\n",
		e->stats.leak_series_dropped, e->stats.jobs_dropped, e->stats.ranks_dropped,
		e->stats.sites_dropped, e->stats.windows, e->stats.jobs_evicted);
	pthread_mutex_unlock(&e->lock);
}
