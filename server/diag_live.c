// SPDX-License-Identifier: Apache-2.0
/*
 * Straggler decisions at ingest (see diag_live.h): batch -> per-job
 * collective events -> detector -> transitions -> queue -> webhook thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/alert_webhook.h"
#include "diagnose/comm_align.h"
#include "lib/clock.h"
#include "lib/hash.h"
#include "server/capture_trigger.h"
#include "server/diag_hang.h"
#include "server/diag_inputs.h"
#include "server/diag_live.h"

#define RANK_CACHE 16384   /* (node, pid, communicator) -> rank; power of two */
#define MAX_QUEUE 1024	   /* transitions waiting for the webhook */
#define MAX_OUT 256	   /* transitions of one batch */
#define MAX_HANG_QUEUE 256 /* hang transitions waiting for the store and webhook */
#define METRIC_RANKS 256   /* tracked ranks per job on /metrics */
#define TICK_NS 1000000000ULL

struct rank_slot {
	uint64_t key; /* 0: empty */
	int32_t rank, nranks;
	int recovered; /* NcclComm.recovered: no cross-rank identity yet */
};

struct live_job {
	char job[DIAG_NAME_LEN];
	struct straggler_detector *sd;
	struct hang_detector *hd;
	struct comm_align *align; /* recovered communicators (NULL: none seen) */
	uint64_t last_ns;	  /* server wall clock of its last collective */
};

struct diag_live {
	struct diag_live_opts o;
	struct straggler_opts sopts;
	int has_sopts;
	struct hang_opts hopts;
	int has_hopts;
	pthread_mutex_t lock; /* everything below */
	struct live_job **jobs;
	uint32_t njobs;
	struct rank_slot *ranks; /* RANK_CACHE slots */
	uint32_t nranks_cached;
	struct straggler_transition *queue;
	size_t nqueue;
	struct hang_transition *hqueue; /* MAX_HANG_QUEUE */
	size_t nhqueue;
	struct diag_live_stats st;
	struct straggler_stats gone; /* detectors freed: their counters */
	struct comm_align_stats align_gone;
	struct hang_stats hang_gone;
	pthread_t thread;
	int running, stop;
	pthread_cond_t wake;
};

struct diag_live *diag_live__new(const struct diag_live_opts *o)
{
	struct diag_live *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->o = (struct diag_live_opts){ .max_jobs = 64, .idle_ns = 60000000000ULL };
	if (o) {
		if (o->max_jobs)
			l->o.max_jobs = o->max_jobs;
		if (o->idle_ns)
			l->o.idle_ns = o->idle_ns;
		l->o.alert_webhook = o->alert_webhook;
		l->o.external_url = o->external_url;
		if (o->straggler) {
			l->sopts = *o->straggler;
			l->has_sopts = 1;
		}
		if (o->hang) {
			l->hopts = *o->hang;
			l->has_hopts = 1;
		}
		l->o.store = o->store;
		l->o.triggers = o->triggers;
	}
	l->jobs = calloc(l->o.max_jobs, sizeof(*l->jobs));
	l->ranks = calloc(RANK_CACHE, sizeof(*l->ranks));
	l->queue = calloc(MAX_QUEUE, sizeof(*l->queue));
	l->hqueue = calloc(MAX_HANG_QUEUE, sizeof(*l->hqueue));
	if (!l->jobs || !l->ranks || !l->queue || !l->hqueue) {
		free(l->jobs);
		free(l->ranks);
		free(l->queue);
		free(l->hqueue);
		free(l);
		return NULL;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->wake, NULL);
	return l;
}

static void add_stats(struct straggler_stats *a, const struct straggler_stats *b)
{
	a->collectives += b->collectives;
	a->collectives_partial += b->collectives_partial;
	a->collectives_timeout += b->collectives_timeout;
	a->collectives_warmup += b->collectives_warmup;
	a->tracked_dropped += b->tracked_dropped;
	a->comms_dropped += b->comms_dropped;
	a->pending_dropped += b->pending_dropped;
	a->transitions_dropped += b->transitions_dropped;
	a->collectives_nomem += b->collectives_nomem;
}

static void add_align_stats(struct comm_align_stats *a, const struct comm_align_stats *b)
{
	a->streams += b->streams;
	a->streams_aligned += b->streams_aligned;
	a->streams_dropped += b->streams_dropped;
	a->streams_expired += b->streams_expired;
	a->groups_aligned += b->groups_aligned;
	for (int i = 0; i < COMM_ALIGN_NOUTCOMES; i++)
		a->attempts[i] += b->attempts[i];
	a->calls_held += b->calls_held;
	a->calls_released += b->calls_released;
	a->calls_lost += b->calls_lost;
}

/* The hang detectors' table counters, summed (the rest is in l->st). */
static void add_hang_stats(struct hang_stats *a, const struct hang_detector *d)
{
	struct hang_stats b;

	hang_detector__stats(d, &b);
	a->comms_dropped += b.comms_dropped;
	a->ranks_dropped += b.ranks_dropped;
	a->comms_evicted += b.comms_evicted;
	a->procs_forgotten += b.procs_forgotten;
	a->nodes_forgotten += b.nodes_forgotten;
	a->procs_dropped += b.procs_dropped;
	a->nodes_dropped += b.nodes_dropped;
}

static void job_free(struct diag_live *l, struct live_job *j)
{
	struct straggler_stats ss;

	straggler_detector__stats(j->sd, &ss);
	add_stats(&l->gone, &ss);
	if (j->align) {
		struct comm_align_stats as;

		comm_align__stats(j->align, &as);
		add_align_stats(&l->align_gone, &as);
	}
	if (j->hd)
		add_hang_stats(&l->hang_gone, j->hd);
	comm_align__free(j->align);
	straggler_detector__free(j->sd);
	hang_detector__free(j->hd);
	free(j);
}

void diag_live__free(struct diag_live *l)
{
	if (!l)
		return;
	if (l->running) {
		pthread_mutex_lock(&l->lock);
		l->stop = 1;
		pthread_cond_signal(&l->wake);
		pthread_mutex_unlock(&l->lock);
		pthread_join(l->thread, NULL);
	}
	for (uint32_t i = 0; i < l->njobs; i++)
		job_free(l, l->jobs[i]);
	free(l->jobs);
	free(l->ranks);
	free(l->queue);
	free(l->hqueue);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->wake);
	free(l);
}

/* ---- rank identity per (node, pid, communicator) ---------------------------- */

static uint64_t rank_key(const char *node, uint32_t pid, uint64_t comm)
{
	uint64_t k = hash_bytes(node, strlen(node), comm ^ ((uint64_t)pid << 32));

	return k ? k : 1;
}

static struct rank_slot *rank_find(struct diag_live *l, uint64_t key, int insert)
{
	uint32_t mask = RANK_CACHE - 1;

	if (insert && l->nranks_cached >= RANK_CACHE * 3 / 4) {
		/* Full: start over; every batch names its processes' main
		 * communicator again, so the cache refills within a period. */
		memset(l->ranks, 0, RANK_CACHE * sizeof(*l->ranks));
		l->nranks_cached = 0;
		l->st.rank_cache_resets++;
	}
	for (uint32_t i = (uint32_t)key & mask;; i = (i + 1) & mask) {
		if (l->ranks[i].key == key)
			return &l->ranks[i];
		if (!l->ranks[i].key) {
			if (!insert)
				return NULL;
			l->ranks[i].key = key;
			l->nranks_cached++;
			return &l->ranks[i];
		}
	}
}

/* ---- jobs ---------------------------------------------------------------------- */

static struct live_job *job_find(struct diag_live *l, const char *job)
{
	for (uint32_t i = 0; i < l->njobs; i++)
		if (!strcmp(l->jobs[i]->job, job))
			return l->jobs[i];
	return NULL;
}

static struct live_job *job_of(struct diag_live *l, const char *job)
{
	struct live_job *j = job_find(l, job);

	if (j)
		return j;
	if (l->njobs == l->o.max_jobs) {
		l->st.jobs_dropped++;
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->job, sizeof(j->job), "%s", job);
	j->sd = straggler_detector__new(job, l->has_sopts ? &l->sopts : NULL);
	j->hd = hang_detector__new(job, l->has_hopts ? &l->hopts : NULL);
	if (!j->sd || !j->hd) {
		straggler_detector__free(j->sd);
		hang_detector__free(j->hd);
		free(j);
		return NULL;
	}
	l->jobs[l->njobs++] = j;
	l->st.jobs++;
	return j;
}

static void enqueue(struct diag_live *l, const struct straggler_transition *tr, int n)
{
	for (int i = 0; i < n; i++) {
		if (!l->o.alert_webhook && !l->o.triggers)
			break;
		if (l->nqueue == MAX_QUEUE) {
			l->st.alerts_dropped += (uint64_t)(n - i);
			break;
		}
		l->queue[l->nqueue++] = tr[i];
	}
	if (n > 0)
		pthread_cond_signal(&l->wake);
}

static void enqueue_hangs(struct diag_live *l, const struct hang_transition *tr, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (tr[i].change == HANG_CONFIRM)
			tr[i].h.kind == HANG_MISMATCH ? l->st.mismatches++ : l->st.hangs++;
		else
			l->st.hang_clears++;
		if (!l->o.alert_webhook && !l->o.store && !l->o.triggers)
			continue;
		if (l->nhqueue == MAX_HANG_QUEUE) {
			l->st.hangs_dropped++;
			continue;
		}
		l->hqueue[l->nhqueue++] = tr[i];
	}
	if (n > 0)
		pthread_cond_signal(&l->wake);
}

/* ---- ingest ---------------------------------------------------------------------- */

static const char *str_of(const Strata__V1__Batch *b, uint32_t i)
{
	return i < b->n_strings ? b->strings[i] : "";
}

/* The job a process belongs to, as the store names it. */
static const char *proc_job(const Strata__V1__Batch *b, const Strata__V1__Process *p)
{
	const char *job = str_of(b, p->job_str);

	if (!job[0])
		job = str_of(b, p->torchelastic_run_id_str);
	if (!job[0])
		job = str_of(b, p->slurm_job_id_str);
	return job;
}

/* A recovered communicator's call: to the job's aligner, which places it
 * (returns 1, *out filled) once its ranks are matched, or holds it. */
static int align_call(struct live_job *j, const Strata__V1__Batch *b,
		      const Strata__V1__NcclCollective *c, const struct rank_slot *rs, uint64_t err,
		      struct diag_coll_event *out)
{
	const char *op = str_of(b, c->op_str);
	struct comm_align_call call = { .seq = c->seq,
					.entry_ns = (int64_t)c->entry_ns,
					.exit_ns = (int64_t)c->exit_ns,
					.bytes = c->bytes,
					.op = hash_bytes(op, strlen(op), 0),
					.clock_err_ns = err };
	uint32_t pid = b->processes[c->process]->pid;

	if (!j->align)
		j->align = comm_align__new(NULL);
	if (!j->align)
		return -ENOMEM;
	return comm_align__add(j->align, rs->key, (uint32_t)rs->rank, (uint32_t)rs->nranks, b->node,
			       pid, &call, out);
}

/* Feeds the events of one job (those of b whose process is in it). */
static void feed_job(struct diag_live *l, const Strata__V1__Batch *b, const char *job,
		     struct diag_coll_event *ev, uint64_t now_ns)
{
	struct straggler_transition tr[MAX_OUT];
	uint64_t err = b->clock ? b->clock->error_bound_ns : 0;
	const struct diag_coll_event *released = NULL;
	struct live_job *j = NULL;
	size_t n = 0, nreleased = 0;
	int k;

	for (size_t i = 0; i < b->n_nccl_collectives; i++) {
		const Strata__V1__NcclCollective *c = b->nccl_collectives[i];
		const Strata__V1__Process *p = b->processes[c->process];
		struct rank_slot *rs;

		if (strcmp(proc_job(b, p), job) || diag_hang__is_p2p(str_of(b, c->op_str)))
			continue;
		rs = rank_find(l, rank_key(b->node, p->pid, c->comm_hash), 0);
		if (!rs || rs->rank < 0 || rs->nranks <= 0) {
			l->st.events_no_rank++; /* no communicator identity: cannot place it */
			continue;
		}
		if (rs->recovered) {
			if (!j && !(j = job_of(l, job)))
				return;
			if (align_call(j, b, c, rs, err, &ev[n]) == 1)
				n++;
			else
				l->st.events_unaligned++; /* held (placed later) or refused */
			continue;
		}
		ev[n++] = (struct diag_coll_event){
			.comm_hash = c->comm_hash,
			.seq = c->seq,
			.rank = (uint32_t)rs->rank,
			.nranks = (uint32_t)rs->nranks,
			.entry_ns = (int64_t)c->entry_ns,
			.clock_err_ns = err,
			.pid = p->pid,
			.node = b->node,
		};
	}
	if (j && j->align)
		nreleased = comm_align__try(j->align, 0, &released);
	if ((!n && !nreleased) || (!j && !(j = job_of(l, job))))
		return;
	j->last_ns = now_ns;
	l->st.events += n + nreleased;
	if (nreleased) { /* held before this batch's: older */
		k = straggler_detector__add(j->sd, released, nreleased, tr, MAX_OUT);
		if (k > 0)
			enqueue(l, tr, k);
	}
	k = straggler_detector__add(j->sd, ev, n, tr, MAX_OUT);
	if (k > 0)
		enqueue(l, tr, k);
}

struct lookup_ctx {
	struct diag_live *l;
	struct live_job *j;
};

static int rank_lookup(void *ctx, const char *node, uint32_t pid, uint64_t *comm, uint64_t *seq,
		       int32_t *rank, int32_t *nranks)
{
	struct lookup_ctx *c = ctx;
	struct rank_slot *rs = rank_find(c->l, rank_key(node, pid, *comm), 0);

	if (!rs || rs->rank < 0 || rs->nranks <= 0)
		return -ENOENT;
	/* a recovered communicator: its group's hash and numbering, once matched */
	if (rs->recovered && (!c->j->align || comm_align__map(c->j->align, rs->key, comm, seq)))
		return -EAGAIN;
	*rank = rs->rank;
	*nranks = rs->nranks;
	return 0;
}

/* What b says about job's calls in flight, threads and exits, then the
 * hang decisions. */
static void feed_hangs(struct diag_live *l, const Strata__V1__Batch *b, const char *job, int create,
		       uint64_t now_ns)
{
	struct hang_transition tr[64];
	struct live_job *j = create ? job_of(l, job) : job_find(l, job);
	size_t n;

	if (!j)
		return;
	if (diag_hang__feed(j->hd, b, job, rank_lookup, &(struct lookup_ctx){ l, j }))
		j->last_ns = now_ns; /* ranks waiting in a collective: not idle */
	n = hang_detector__evaluate(j->hd, tr, 64);
	if (n > 64) {
		l->st.hangs_dropped += n - 64;
		n = 64;
	}
	enqueue_hangs(l, tr, n);
}

/* Adds job to jobs[0..*n) once. */
static void add_job(const char **jobs, size_t *n, const char *job)
{
	size_t k = 0;

	while (k < *n && strcmp(jobs[k], job))
		k++;
	if (k == *n)
		jobs[(*n)++] = job;
}

int diag_live__batch(struct diag_live *l, const Strata__V1__Batch *b, uint64_t now_ns)
{
	struct diag_coll_event *ev;
	const char **jobs;
	size_t njobs = 0, nnccl;

	if (!b->n_nccl_collectives && !b->n_nccl_comms && !b->n_inflight_calls &&
	    !b->n_thread_states)
		return 0;
	ev = malloc((b->n_nccl_collectives + 1) * sizeof(*ev));
	jobs = malloc((b->n_nccl_collectives + b->n_inflight_calls + b->n_processes + 1) *
		      sizeof(*jobs));
	if (!ev || !jobs) {
		free(ev);
		free(jobs);
		return -ENOMEM;
	}
	pthread_mutex_lock(&l->lock);
	l->st.batches++;
	for (size_t i = 0; i < b->n_nccl_comms; i++) {
		const Strata__V1__NcclComm *c = b->nccl_comms[i];
		struct rank_slot *rs = rank_find(
			l, rank_key(b->node, b->processes[c->process]->pid, c->comm_hash), 1);

		rs->rank = c->rank;
		rs->nranks = c->nranks;
		rs->recovered = c->recovered;
	}
	/* The distinct jobs of the batch's collectives (usually one). */
	for (size_t i = 0; i < b->n_nccl_collectives; i++) {
		const char *job = proc_job(b, b->processes[b->nccl_collectives[i]->process]);

		if (!job[0]) {
			l->st.events_no_job++;
			continue;
		}
		add_job(jobs, &njobs, job);
	}
	for (size_t k = 0; k < njobs; k++)
		feed_job(l, b, jobs[k], ev, now_ns);
	/* Hangs: the jobs of the collectives and of NCCL calls in flight
	 * (tracked from there on), and those already tracked with a process
	 * here (its thread's state, its exit). */
	for (size_t i = 0; i < b->n_inflight_calls; i++) {
		const char *job = proc_job(b, b->processes[b->inflight_calls[i]->process]);

		if (job[0] && b->inflight_calls[i]->comm_hash)
			add_job(jobs, &njobs, job);
	}
	nnccl = njobs;
	for (size_t i = 0; i < b->n_processes; i++) {
		const char *job = proc_job(b, b->processes[i]);

		if (job[0])
			add_job(jobs, &njobs, job);
	}
	for (size_t k = 0; k < njobs; k++)
		feed_hangs(l, b, jobs[k], k < nnccl, now_ns);
	pthread_mutex_unlock(&l->lock);
	free(ev);
	free(jobs);
	return 0;
}

int diag_live__feed(struct diag_live *l, const char *job, const struct diag_coll_event *ev,
		    size_t n, uint64_t now_ns)
{
	struct straggler_transition tr[MAX_OUT];
	struct live_job *j;
	int k = 0;

	pthread_mutex_lock(&l->lock);
	j = n ? job_of(l, job) : NULL;
	if (j) {
		j->last_ns = now_ns;
		l->st.events += n;
		k = straggler_detector__add(j->sd, ev, n, tr, MAX_OUT);
		if (k > 0)
			enqueue(l, tr, k);
	}
	pthread_mutex_unlock(&l->lock);
	return k < 0 ? k : 0;
}

int diag_live__feed_hangs(struct diag_live *l, const char *job, int create, diag_hang_feed_fn fn,
			  void *ctx, uint64_t now_ns)
{
	struct hang_transition tr[64];
	struct live_job *j;
	size_t n;

	pthread_mutex_lock(&l->lock);
	j = create ? job_of(l, job) : job_find(l, job);
	if (j) {
		if (fn(ctx, j->hd))
			j->last_ns = now_ns; /* ranks in (or done with) collectives: not idle */
		n = hang_detector__evaluate(j->hd, tr, 64);
		if (n > 64) {
			l->st.hangs_dropped += n - 64;
			n = 64;
		}
		enqueue_hangs(l, tr, n);
	}
	pthread_mutex_unlock(&l->lock);
	return j || !create ? 0 : -ENOSPC;
}

void diag_live__forget(struct diag_live *l, const char *job)
{
	pthread_mutex_lock(&l->lock);
	for (uint32_t i = 0; i < l->njobs; i++)
		if (!strcmp(l->jobs[i]->job, job)) {
			job_free(l, l->jobs[i]);
			l->jobs[i] = l->jobs[--l->njobs];
			break;
		}
	pthread_mutex_unlock(&l->lock);
}

/* ---- expiry and the webhook thread --------------------------------------------- */

void diag_live__tick(struct diag_live *l, uint64_t now_ns)
{
	struct straggler_transition tr[MAX_OUT];

	pthread_mutex_lock(&l->lock);
	for (uint32_t i = 0; i < l->njobs;) {
		struct live_job *j = l->jobs[i];
		int k;

		if (j->last_ns + l->o.idle_ns > now_ns) {
			i++;
			continue;
		}
		k = straggler_detector__expire(j->sd, tr, MAX_OUT);
		if (k > 0)
			enqueue(l, tr, k);
		{
			struct hang_transition ht[64];
			size_t nh = hang_detector__expire(j->hd, ht, 64);

			enqueue_hangs(l, ht, nh < 64 ? nh : 64);
		}
		job_free(l, j);
		l->jobs[i] = l->jobs[--l->njobs];
		l->st.jobs_expired++;
	}
	pthread_mutex_unlock(&l->lock);
}

/* POSTs a built webhook body (err: the build failed) and frees it. */
static void post_body(struct diag_live *l, int err, char *body, size_t len)
{
	long status = 0;

	if (!err)
		err = alert_webhook__post(l->o.alert_webhook, body, len, 5000, &status);
	free(body);
	pthread_mutex_lock(&l->lock);
	if (err)
		l->st.alerts_failed++;
	else
		l->st.alerts_sent++;
	pthread_mutex_unlock(&l->lock);
}

static void post(struct diag_live *l, const struct straggler_transition *tr, size_t n)
{
	struct alert_webhook_opts ao = { .sz = sizeof(ao), .external_url = l->o.external_url };
	char *body = NULL;
	size_t len = 0;
	int err = alert_webhook__build(tr, n, &ao, &body, &len);

	post_body(l, err, body, len); /* after the build: it sets body, len */
}

/* A hang decision: kept in the store (with the store's view of each
 * missing rank) and POSTed. */
static void post_hangs(struct diag_live *l, const struct hang_transition *tr, size_t n)
{
	struct alert_webhook_opts ao = { .sz = sizeof(ao), .external_url = l->o.external_url };
	uint64_t store_errors = 0;

	for (size_t i = 0; l->o.store && i < n; i++)
		if (diag_hang__store(l->o.store, &tr[i].h, realtime_ns()))
			store_errors++;
	for (size_t i = 0; l->o.alert_webhook && i < n;) {
		size_t k = i + 1;
		char *body = NULL;
		size_t len = 0;
		int err;

		while (k < n && !strcmp(tr[k].h.job, tr[i].h.job))
			k++;
		err = alert_webhook__build_hangs(&tr[i], k - i, &ao, &body, &len);
		post_body(l, err, body, len);
		i = k;
	}
	pthread_mutex_lock(&l->lock);
	l->st.hang_store_errors += store_errors;
	pthread_mutex_unlock(&l->lock);
}

/* Deep captures (server/capture_trigger.h): a confirmed straggler's rank
 * and two healthy peers, a confirmed hang's ranks, and each live job on
 * schedule.  On the live thread, without the lock. */
static void trigger_captures(struct diag_live *l, const struct straggler_transition *tr, size_t n,
			     const struct hang_transition *ht, size_t nh)
{
	struct straggler_rank *ranks = NULL;
	char(*jobs)[DIAG_NAME_LEN] = NULL;
	uint64_t now = realtime_ns();
	size_t njobs = 0;

	for (size_t i = 0; i < n; i++) {
		size_t k;

		if (tr[i].change != STRAGGLER_CONFIRM)
			continue;
		if (!ranks && !(ranks = calloc(METRIC_RANKS, sizeof(*ranks))))
			break;
		k = diag_live__stragglers(l, tr[i].r.job, 0, ranks, METRIC_RANKS);
		capture_triggers__straggler(l->o.triggers, &tr[i], ranks,
					    k < METRIC_RANKS ? k : METRIC_RANKS, now);
	}
	for (size_t i = 0; i < nh; i++)
		if (ht[i].change == HANG_CONFIRM)
			capture_triggers__hang(l->o.triggers, &ht[i].h, now);
	/* the schedule: every live job */
	jobs = malloc(l->o.max_jobs * sizeof(*jobs));
	if (jobs) {
		pthread_mutex_lock(&l->lock);
		for (uint32_t i = 0; i < l->njobs && njobs < l->o.max_jobs; i++)
			memcpy(jobs[njobs++], l->jobs[i]->job, DIAG_NAME_LEN);
		pthread_mutex_unlock(&l->lock);
		for (size_t i = 0; i < njobs; i++)
			capture_triggers__schedule(l->o.triggers, jobs[i], now);
	}
	free(jobs);
	free(ranks);
}

static void *live_thread(void *arg)
{
	struct diag_live *l = arg;
	struct straggler_transition *batch = calloc(MAX_QUEUE, sizeof(*batch));
	struct hang_transition *hbatch = calloc(MAX_HANG_QUEUE, sizeof(*hbatch));

	pthread_mutex_lock(&l->lock);
	while (!l->stop) {
		struct timespec ts = realtime_deadline(TICK_NS);
		size_t n = 0, nh = 0;

		if (!l->nqueue && !l->nhqueue)
			pthread_cond_timedwait(&l->wake, &l->lock, &ts);
		pthread_mutex_unlock(&l->lock);
		diag_live__tick(l, realtime_ns());
		pthread_mutex_lock(&l->lock);
		if (batch && l->nqueue) {
			n = l->nqueue;
			memcpy(batch, l->queue, n * sizeof(*batch));
			l->nqueue = 0;
		}
		if (hbatch && l->nhqueue) {
			nh = l->nhqueue;
			memcpy(hbatch, l->hqueue, nh * sizeof(*hbatch));
			l->nhqueue = 0;
		}
		pthread_mutex_unlock(&l->lock);
		if (l->o.triggers)
			trigger_captures(l, batch, n, hbatch, nh);
		if (nh)
			post_hangs(l, hbatch, nh);
		/* One payload per group of changes; a slow receiver delays
		 * only this thread. */
		for (size_t i = 0; l->o.alert_webhook && i < n;) {
			size_t k = i + 1;

			while (k < n && !strcmp(batch[k].r.job, batch[i].r.job))
				k++;
			post(l, &batch[i], k - i);
			i = k;
		}
		pthread_mutex_lock(&l->lock);
	}
	pthread_mutex_unlock(&l->lock);
	free(batch);
	free(hbatch);
	return NULL;
}

int diag_live__start(struct diag_live *l)
{
	int err = pthread_create(&l->thread, NULL, live_thread, l);

	if (err)
		return -err;
	l->running = 1;
	return 0;
}

/* ---- reading ------------------------------------------------------------------- */

size_t diag_live__stragglers(struct diag_live *l, const char *job, int confirmed_only,
			     struct straggler_rank *out, size_t max)
{
	size_t total = 0;

	pthread_mutex_lock(&l->lock);
	for (uint32_t i = 0; i < l->njobs; i++) {
		struct straggler_rank none[1]; /* count only: never NULL to memcpy */

		if (job && strcmp(l->jobs[i]->job, job))
			continue;
		total += straggler_detector__list(l->jobs[i]->sd, confirmed_only,
						  total < max ? out + total : none,
						  total < max ? max - total : 0);
	}
	pthread_mutex_unlock(&l->lock);
	return total;
}

size_t diag_live__hangs(struct diag_live *l, const char *job, struct hang_report *out, size_t max)
{
	size_t total = 0;

	pthread_mutex_lock(&l->lock);
	for (uint32_t i = 0; i < l->njobs; i++) {
		struct hang_report none[1]; /* count only: never NULL */

		if (job && strcmp(l->jobs[i]->job, job))
			continue;
		total += hang_detector__list(l->jobs[i]->hd, total < max ? out + total : none,
					     total < max ? max - total : 0);
	}
	pthread_mutex_unlock(&l->lock);
	return total;
}

/* Communicators recovered by the agents from process memory: how many the
 * server matched across ranks, and what stays unknown (docs/metrics.md). */
static void align_metrics(const struct comm_align_stats *a, FILE *o)
{
	static const char *const why[COMM_ALIGN_NOUTCOMES] = {
		"aligned", "incomplete", "duplicate", "short", "ambiguous", "mismatch",
	};

	fprintf(o,
		"# HELP strata_comm_align_streams_total recovered communicators (one per "
		"process) by fate\n"
		"# TYPE strata_comm_align_streams_total counter\n"
		"strata_comm_align_streams_total{state=\"seen\"} %" PRIu64 "\n"
		"strata_comm_align_streams_total{state=\"aligned\"} %" PRIu64 "\n"
		"strata_comm_align_streams_total{state=\"dropped\"} %" PRIu64 "\n"
		"strata_comm_align_streams_total{state=\"expired\"} %" PRIu64 "\n"
		"# HELP strata_comm_align_attempts_total attempts to match the ranks of a "
		"recovered communicator, by outcome\n"
		"# TYPE strata_comm_align_attempts_total counter\n",
		a->streams, a->streams_aligned, a->streams_dropped, a->streams_expired);
	for (int i = 0; i < COMM_ALIGN_NOUTCOMES; i++)
		fprintf(o, "strata_comm_align_attempts_total{outcome=\"%s\"} %" PRIu64 "\n", why[i],
			a->attempts[i]);
	fprintf(o,
		"# HELP strata_comm_align_calls_total calls of recovered communicators held "
		"until their ranks were matched, placed then, or never placed\n"
		"# TYPE strata_comm_align_calls_total counter\n"
		"strata_comm_align_calls_total{fate=\"held\"} %" PRIu64 "\n"
		"strata_comm_align_calls_total{fate=\"released\"} %" PRIu64 "\n"
		"strata_comm_align_calls_total{fate=\"lost\"} %" PRIu64 "\n",
		a->calls_held, a->calls_released, a->calls_lost);
}

static void collect(struct diag_live *l, struct diag_live_stats *st)
{
	struct straggler_stats sum = l->gone;

	for (uint32_t i = 0; i < l->njobs; i++) {
		struct straggler_stats ss;

		straggler_detector__stats(l->jobs[i]->sd, &ss);
		add_stats(&sum, &ss);
	}
	*st = l->st;
	st->align = l->align_gone;
	for (uint32_t i = 0; i < l->njobs; i++)
		if (l->jobs[i]->align) {
			struct comm_align_stats as;

			comm_align__stats(l->jobs[i]->align, &as);
			add_align_stats(&st->align, &as);
		}
	st->collectives = sum.collectives;
	st->collectives_partial = sum.collectives_partial;
	st->collectives_timeout = sum.collectives_timeout;
	st->collectives_warmup = sum.collectives_warmup;
	st->states_dropped = sum.tracked_dropped;
	st->comms_dropped = sum.comms_dropped;
	st->pending_dropped = sum.pending_dropped;
	st->transitions_dropped = sum.transitions_dropped;
	st->collectives_nomem = sum.collectives_nomem;
}

void diag_live__stats(struct diag_live *l, struct diag_live_stats *st)
{
	pthread_mutex_lock(&l->lock);
	collect(l, st);
	pthread_mutex_unlock(&l->lock);
}

static void labels(FILE *o, const struct straggler_rank *r)
{
	fputs("{job=", o);
	diag_prom_label(o, r->job);
	fprintf(o, ",communicator=\"%016" PRIx64 "\",rank=\"%u\",node=", r->communicator, r->rank);
	diag_prom_label(o, r->node);
	fprintf(o, ",pid=\"%u\"}", r->pid);
}

/* One series per ongoing hang (and recent mismatch): under l->lock. */
static void hang_metrics(struct diag_live *l, FILE *o)
{
	static const char *const m[][2] = {
		{ "strata_nccl_hang", "1 while ranks of the communicator wait in collective seq"
				      " that others have not entered (kind missing/stalled);"
				      " a recent mismatch of op/bytes at seq (kind mismatch)" },
		{ "strata_nccl_hang_waiting_seconds",
		  "how long the first waiting rank had waited at the latest observation" },
		{ "strata_nccl_hang_missing_ranks", "ranks that had not entered the collective" },
	};
	struct hang_report *h = malloc(64 * sizeof(*h));
	struct hang_stats t = l->hang_gone;

	for (size_t k = 0; k < 3; k++) {
		fprintf(o, "# HELP %s %s\n# TYPE %s gauge\n", m[k][0], m[k][1], m[k][0]);
		for (uint32_t i = 0; h && i < l->njobs; i++) {
			size_t n = hang_detector__list(l->jobs[i]->hd, h, 64);

			for (size_t x = 0; x < n && x < 64; x++) {
				double v = k == 0   ? 1.0
					   : k == 1 ? (double)(h[x].as_of_ns - h[x].since_ns) / 1e9
						    : (double)h[x].nmissing;

				fprintf(o, "%s{job=", m[k][0]);
				diag_prom_label(o, h[x].job);
				fprintf(o,
					",communicator=\"%016" PRIx64 "\",seq=\"%" PRIu64
					"\",kind=\"%s\",op=",
					h[x].comm_hash, h[x].seq, diag_hang__kind(h[x].kind));
				diag_prom_label(o, h[x].op);
				fprintf(o, "} %g\n", v);
			}
		}
	}
	free(h);
	for (uint32_t i = 0; i < l->njobs; i++)
		add_hang_stats(&t, l->jobs[i]->hd);
	fprintf(o,
		"# HELP strata_nccl_hang_tables_total entries the hang detectors let go of "
		"to make room\n"
		"# TYPE strata_nccl_hang_tables_total counter\n"
		"strata_nccl_hang_tables_total{what=\"communicators_evicted\"} %" PRIu64 "\n"
		"strata_nccl_hang_tables_total{what=\"processes_forgotten\"} %" PRIu64 "\n"
		"strata_nccl_hang_tables_total{what=\"nodes_forgotten\"} %" PRIu64 "\n"
		"# HELP strata_nccl_hang_table_drops_total what the hang detectors' full tables "
		"refused\n"
		"# TYPE strata_nccl_hang_table_drops_total counter\n"
		"strata_nccl_hang_table_drops_total{what=\"communicators\"} %" PRIu64 "\n"
		"strata_nccl_hang_table_drops_total{what=\"ranks\"} %" PRIu64 "\n"
		"strata_nccl_hang_table_drops_total{what=\"processes\"} %" PRIu64 "\n"
		"strata_nccl_hang_table_drops_total{what=\"nodes\"} %" PRIu64 "\n",
		t.comms_evicted, t.procs_forgotten, t.nodes_forgotten, t.comms_dropped,
		t.ranks_dropped, t.procs_dropped, t.nodes_dropped);
	fprintf(o,
		"# HELP strata_nccl_hangs_total NCCL hang decisions\n"
		"# TYPE strata_nccl_hangs_total counter\n"
		"strata_nccl_hangs_total{change=\"confirmed\"} %" PRIu64 "\n"
		"strata_nccl_hangs_total{change=\"cleared\"} %" PRIu64 "\n"
		"strata_nccl_hangs_total{change=\"mismatch\"} %" PRIu64 "\n"
		"# HELP strata_nccl_hang_drops_total hang decisions not stored or sent\n"
		"# TYPE strata_nccl_hang_drops_total counter\n"
		"strata_nccl_hang_drops_total{what=\"queue\"} %" PRIu64 "\n"
		"strata_nccl_hang_drops_total{what=\"store\"} %" PRIu64 "\n",
		l->st.hangs, l->st.hang_clears, l->st.mismatches, l->st.hangs_dropped,
		l->st.hang_store_errors);
}

void diag_live__metrics(struct diag_live *l, FILE *o)
{
	static const char *const help[][3] = {
		{ "strata_straggler_confirmed", "gauge",
		  "1 while the sequential test holds the rank confirmed as a straggler" },
		{ "strata_straggler_lag_seconds", "gauge",
		  "EWMA of the lag behind the median arrival beyond the clock error bound" },
		{ "strata_straggler_score", "gauge", "EWMA of lag / collective period" },
		{ "strata_straggler_last_fraction", "gauge",
		  "EWMA of how often the rank arrived clearly last" },
		{ "strata_straggler_evidence", "gauge",
		  "sequential-test statistic / confirmation threshold (>= 1 confirms)" },
	};
	struct straggler_rank *r = malloc(METRIC_RANKS * sizeof(*r));
	struct diag_live_stats st;

	pthread_mutex_lock(&l->lock);
	for (size_t m = 0; m < 5; m++) {
		fprintf(o, "# HELP %s %s\n# TYPE %s %s\n", help[m][0], help[m][2], help[m][0],
			help[m][1]);
		for (uint32_t i = 0; r && i < l->njobs; i++) {
			size_t n = straggler_detector__list(l->jobs[i]->sd, 0, r, METRIC_RANKS);

			for (size_t k = 0; k < n && k < METRIC_RANKS; k++) {
				double v = m == 0   ? (r[k].state == STRAGGLER_CONFIRMED)
					   : m == 1 ? r[k].lag_seconds
					   : m == 2 ? r[k].score
					   : m == 3 ? r[k].last_fraction
						    : r[k].evidence;

				fputs(help[m][0], o);
				labels(o, &r[k]);
				fprintf(o, " %g\n", v);
			}
		}
	}
	hang_metrics(l, o);
	collect(l, &st);
	pthread_mutex_unlock(&l->lock);
	free(r);
	fprintf(o,
		"# HELP strata_straggler_collectives_total collectives the straggler detector "
		"judged, by outcome\n"
		"# TYPE strata_straggler_collectives_total counter\n"
		"strata_straggler_collectives_total{outcome=\"judged\"} %" PRIu64 "\n"
		"strata_straggler_collectives_total{outcome=\"without_every_rank\"} %" PRIu64 "\n"
		"strata_straggler_collectives_total{outcome=\"too_few_ranks\"} %" PRIu64 "\n"
		"strata_straggler_collectives_total{outcome=\"before_period_known\"} %" PRIu64 "\n"
		"strata_straggler_collectives_total{outcome=\"no_memory\"} %" PRIu64 "\n"
		"# HELP strata_straggler_events_unplaced_total collective events not judged\n"
		"# TYPE strata_straggler_events_unplaced_total counter\n"
		"strata_straggler_events_unplaced_total{why=\"no_job\"} %" PRIu64 "\n"
		"strata_straggler_events_unplaced_total{why=\"no_rank\"} %" PRIu64 "\n"
		"strata_straggler_events_unplaced_total{why=\"unaligned\"} %" PRIu64 "\n"
		"# HELP strata_straggler_drops_total bounded-table refusals of the straggler "
		"detection\n"
		"# TYPE strata_straggler_drops_total counter\n"
		"strata_straggler_drops_total{what=\"states\"} %" PRIu64 "\n"
		"strata_straggler_drops_total{what=\"communicators\"} %" PRIu64 "\n"
		"strata_straggler_drops_total{what=\"pending\"} %" PRIu64 "\n"
		"strata_straggler_drops_total{what=\"transitions\"} %" PRIu64 "\n"
		"strata_straggler_drops_total{what=\"jobs\"} %" PRIu64 "\n"
		"strata_straggler_drops_total{what=\"alerts\"} %" PRIu64 "\n"
		"strata_straggler_drops_total{what=\"rank_cache_resets\"} %" PRIu64 "\n"
		"# HELP strata_alert_webhooks_total straggler webhooks by outcome\n"
		"# TYPE strata_alert_webhooks_total counter\n"
		"strata_alert_webhooks_total{outcome=\"sent\"} %" PRIu64 "\n"
		"strata_alert_webhooks_total{outcome=\"failed\"} %" PRIu64 "\n",
		st.collectives, st.collectives_timeout, st.collectives_partial,
		st.collectives_warmup, st.collectives_nomem, st.events_no_job, st.events_no_rank,
		st.events_unaligned, st.states_dropped, st.comms_dropped, st.pending_dropped,
		st.transitions_dropped, st.jobs_dropped, st.alerts_dropped, st.rank_cache_resets,
		st.alerts_sent, st.alerts_failed);
	align_metrics(&st.align, o);
}
