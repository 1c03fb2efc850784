// SPDX-License-Identifier: Apache-2.0
/*
 * The owner's straggler and hang diagnosis from the shared store
 * (diag_shared.h): poll -> owned active jobs -> their collectives and hang
 * inputs of the last lookback -> the collectives not fed before ->
 * diag_live__feed, and with the hang inputs -> diag_live__feed_hangs.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "server/diag_inputs.h"
#include "server/diag_shared.h"
#include "server/diag_shared_hang.h"

struct shared_job {
	char job[DIAG_NAME_LEN];
	uint64_t *seen; /* keys of the previous read's events, sorted */
	size_t nseen;
	int mark;
	int seeded; /* the hang detector has each rank's last collective */
};

struct diag_shared {
	struct diag_shared_opts o;
	pthread_mutex_t lock; /* one poll at a time; the jobs, the thread */
	struct shared_job *jobs;
	uint32_t njobs;
	/* counters: written by the poll, read by /metrics without waiting
	 * for a poll (atomics) */
	uint64_t owned, polls, poll_errors, events_read, events_fed, reads_truncated, jobs_dropped;
	uint64_t seeds, events_seeded; /* jobs new to this replica: last collectives read */
	uint64_t poll_ns;	       /* time spent in polls */
	uint64_t handed_over;	       /* jobs dropped because another replica owns them now */
	uint64_t capture_errors;       /* capture records not read back */
	pthread_t thread;
	int running, stop;
	pthread_cond_t wake;
};

struct diag_shared *diag_shared__new(const struct diag_shared_opts *o)
{
	struct diag_shared *d;

	if (!o || !o->store || !o->live || !o->replicas)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->o = *o;
	if (!d->o.poll_ns)
		d->o.poll_ns = 2000000000ULL;
	if (!d->o.lookback_ns)
		d->o.lookback_ns = 30000000000ULL;
	if (!d->o.max_jobs)
		d->o.max_jobs = 64;
	if (!d->o.max_events)
		d->o.max_events = 500000;
	if (!d->o.seed_ns)
		d->o.seed_ns = 3600000000000ULL;
	d->jobs = calloc(d->o.max_jobs, sizeof(*d->jobs));
	if (!d->jobs) {
		free(d);
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	return d;
}

static void count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static uint64_t ld(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static void job_drop(struct diag_shared *d, uint32_t i)
{
	free(d->jobs[i].seen);
	d->jobs[i] = d->jobs[--d->njobs];
}

void diag_shared__free(struct diag_shared *d)
{
	if (!d)
		return;
	if (d->running) {
		pthread_mutex_lock(&d->lock);
		d->stop = 1;
		pthread_cond_signal(&d->wake);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	while (d->njobs)
		job_drop(d, 0);
	free(d->jobs);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	free(d);
}

/* ---- one poll -------------------------------------------------------------------- */

struct active {
	char (*v)[DIAG_NAME_LEN];
	size_t n, max;
	uint64_t from_ns;
};

static int on_job(void *ctx, const struct store_job *j)
{
	struct active *a = ctx;

	if (j->last_ns < a->from_ns || !j->job || !j->job[0] || a->n == a->max)
		return 0;
	snprintf(a->v[a->n++], DIAG_NAME_LEN, "%s", j->job);
	return 0;
}

/* One collective of one process: what makes an event the same event in
 * two reads. */
static uint64_t ev_key(const struct diag_coll_event *e)
{
	uint64_t k[4] = { e->comm_hash, e->seq, ((uint64_t)e->rank << 32) | e->pid, 0 };

	k[3] = hash_bytes(e->node, strlen(e->node), 0);
	return hash_bytes(k, sizeof(k), 0x73686172);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int was_seen(const struct shared_job *j, uint64_t key)
{
	return j->nseen && bsearch(&key, j->seen, j->nseen, sizeof(key), cmp_u64);
}

static struct shared_job *job_get(struct diag_shared *d, const char *job)
{
	for (uint32_t i = 0; i < d->njobs; i++)
		if (!strcmp(d->jobs[i].job, job))
			return &d->jobs[i];
	if (d->njobs == d->o.max_jobs) {
		count(&d->jobs_dropped, 1);
		return NULL;
	}
	d->jobs[d->njobs] = (struct shared_job){ 0 };
	snprintf(d->jobs[d->njobs].job, DIAG_NAME_LEN, "%s", job);
	/* a takeover or a new job (warn: the server logs no less; when a
	 * takeover happened is what an operator asks) */
	pr_warn("replicas: job %s is diagnosed here from now on", d->jobs[d->njobs].job);
	return &d->jobs[d->njobs++];
}

/* A job new to this replica: each rank's last collective entered before
 * the lookback (from_ns) to its hang detector, once. */
static int seed_job(struct diag_shared *d, struct shared_job *j, uint64_t from_ns, uint64_t now_ns)
{
	struct diag_coll_read c;
	int trunc = 0;
	int err = diag_coll_read__load_last(&c, d->o.store, j->job,
					    from_ns > d->o.seed_ns ? from_ns - d->o.seed_ns : 1,
					    from_ns, d->o.max_events, &trunc);

	if (!err && c.n) {
		struct shared_hang_feed hf = { .ev = c.ev, .call = c.call, .n = c.n };

		diag_live__feed_hangs(d->o.live, j->job, 1, shared_hang__feed, &hf, now_ns);
	}
	if (!err) {
		j->seeded = 1;
		count(&d->seeds, 1);
		count(&d->events_seeded, c.n);
	}
	count(&d->reads_truncated, trunc != 0);
	diag_coll_read__fini(&c);
	return err;
}

/* Reads job's recent collectives and hang inputs; feeds the new
 * collectives to the straggler detector, and them with the hang inputs to
 * the hang detector. */
static int poll_job(struct diag_shared *d, struct shared_job *j, uint64_t now_ns)
{
	uint64_t from = now_ns > d->o.lookback_ns ? now_ns - d->o.lookback_ns : 1;
	struct diag_coll_read c;
	struct shared_hang_read *h = NULL;
	uint64_t *keys = NULL;
	size_t nfeed = 0;
	int trunc = 0, htrunc = 0;
	/* the hang inputs first: their nodes' ends come before the collectives */
	int err = shared_hang__load(&h, d->o.store, j->job, from, d->o.max_events, &htrunc);
	int cerr = diag_coll_read__load(&c, d->o.store, j->job, from, 0, d->o.max_events, &trunc);

	err = err ? err : cerr;
	if (!err && !j->seeded)
		err = seed_job(d, j, from, now_ns);
	if (!err && c.n && !(keys = malloc(c.n * sizeof(*keys))))
		err = -ENOMEM;
	/* the new events, in the store's order (oldest first), moved to the front */
	for (size_t i = 0; !err && i < c.n; i++) {
		keys[i] = ev_key(&c.ev[i]);
		if (!was_seen(j, keys[i])) {
			c.call[nfeed] = c.call[i];
			c.ev[nfeed++] = c.ev[i];
		}
	}
	if (!err)
		err = diag_live__feed(d->o.live, j->job, c.ev, nfeed, now_ns);
	if (!err) {
		struct shared_hang_feed hf = { .read = h, .ev = c.ev, .call = c.call, .n = nfeed };

		/* a full job table is counted there; the events were fed all
		 * the same, so they are remembered below */
		diag_live__feed_hangs(d->o.live, j->job, nfeed || shared_hang__has_nccl(h),
				      shared_hang__feed, &hf, now_ns);
	}
	if (!err) {
		if (c.n)
			qsort(keys, c.n, sizeof(*keys), cmp_u64);
		free(j->seen);
		j->seen = keys;
		j->nseen = c.n;
		keys = NULL;
		count(&d->events_read, c.n);
		count(&d->events_fed, nfeed);
		count(&d->reads_truncated, (trunc != 0) + (htrunc != 0));
	}
	free(keys);
	shared_hang__free(h);
	diag_coll_read__fini(&c);
	return err;
}

int diag_shared__poll(struct diag_shared *d, uint64_t now_ns)
{
	struct active a = { .max = d->o.max_jobs * 4 };
	uint64_t t0 = mono_ns();
	int err;

	a.from_ns = now_ns > d->o.lookback_ns ? now_ns - d->o.lookback_ns : 1;
	a.v = calloc(a.max, sizeof(*a.v));
	if (!a.v)
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	count(&d->polls, 1);
	err = d->o.store->ops->jobs(d->o.store, &(struct store_filter){ .from_ns = a.from_ns },
				    on_job, &a);
	for (uint32_t i = 0; i < d->njobs; i++)
		d->jobs[i].mark = 0;
	for (size_t i = 0; !err && i < a.n; i++) {
		struct shared_job *j;

		if (!replicas__owns(d->o.replicas, a.v[i], now_ns) || !(j = job_get(d, a.v[i])))
			continue;
		j->mark = 1;
		err = poll_job(d, j, now_ns);
	}
	/* Jobs no longer owned (another replica, or this one cut off from the
	 * store) go, logged: the owner carries them on.  Jobs gone quiet
	 * keep their detector, which clears its stragglers as missing (and
	 * are logged again as diagnosed here when they come back). */
	for (uint32_t i = 0; i < d->njobs;) {
		struct shared_job *j = &d->jobs[i];

		if (!replicas__owns(d->o.replicas, j->job, now_ns)) {
			diag_live__forget(d->o.live, j->job);
			count(&d->handed_over, 1);
			pr_warn("replicas: job %s is no longer diagnosed here (another replica "
				"owns it, or this one lost the store)",
				j->job);
		} else if (j->mark || err) {
			i++;
			continue;
		}
		job_drop(d, i);
	}
	__atomic_store_n(&d->owned, d->njobs, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&d->lock);
	if (d->o.captures && capture_registry__load(d->o.captures, now_ns))
		count(&d->capture_errors, 1);
	if (err)
		count(&d->poll_errors, 1);
	count(&d->poll_ns, mono_ns() - t0);
	free(a.v);
	return err;
}

/* ---- the thread and metrics ----------------------------------------------------- */

static void *poll_thread(void *arg)
{
	struct diag_shared *d = arg;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		struct timespec ts = realtime_deadline(d->o.poll_ns);

		pthread_mutex_unlock(&d->lock);
		diag_shared__poll(d, realtime_ns());
		pthread_mutex_lock(&d->lock);
		if (!d->stop)
			pthread_cond_timedwait(&d->wake, &d->lock, &ts);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int diag_shared__start(struct diag_shared *d)
{
	int err = pthread_create(&d->thread, NULL, poll_thread, d);

	if (err)
		return -err;
	d->running = 1;
	return 0;
}

void diag_shared__metrics(struct diag_shared *d, FILE *o)
{
	uint64_t polls = ld(&d->polls), failed = ld(&d->poll_errors);

	fprintf(o,
		"# HELP strata_replica_jobs_owned active jobs this replica diagnoses\n"
		"# TYPE strata_replica_jobs_owned gauge\n"
		"strata_replica_jobs_owned %" PRIu64 "\n"
		"# HELP strata_replica_polls_total reads of the owned jobs' collectives from the "
		"store, by outcome\n"
		"# TYPE strata_replica_polls_total counter\n"
		"strata_replica_polls_total{outcome=\"ok\"} %" PRIu64 "\n"
		"strata_replica_polls_total{outcome=\"failed\"} %" PRIu64 "\n"
		"# HELP strata_replica_poll_seconds_total time spent reading the owned jobs "
		"from the store (/ polls: the mean poll)\n"
		"# TYPE strata_replica_poll_seconds_total counter\n"
		"strata_replica_poll_seconds_total %.3f\n"
		"# HELP strata_replica_events_total collective events read from the store, and "
		"fed (new) to the detectors\n"
		"# TYPE strata_replica_events_total counter\n"
		"strata_replica_events_total{what=\"read\"} %" PRIu64 "\n"
		"strata_replica_events_total{what=\"fed\"} %" PRIu64 "\n"
		"strata_replica_events_total{what=\"seeded\"} %" PRIu64 "\n"
		"# HELP strata_replica_seeds_total jobs new to this replica whose ranks' last "
		"collectives before the lookback were read (hang detection)\n"
		"# TYPE strata_replica_seeds_total counter\n"
		"strata_replica_seeds_total %" PRIu64 "\n"
		"# HELP strata_replica_jobs_handed_over_total jobs dropped because another replica "
		"owns them now\n"
		"# TYPE strata_replica_jobs_handed_over_total counter\n"
		"strata_replica_jobs_handed_over_total %" PRIu64 "\n"
		"# HELP strata_replica_drops_total bounded-table refusals of the replicated "
		"diagnosis\n"
		"# TYPE strata_replica_drops_total counter\n"
		"strata_replica_drops_total{what=\"jobs\"} %" PRIu64 "\n"
		"strata_replica_drops_total{what=\"truncated_reads\"} %" PRIu64 "\n"
		"strata_replica_drops_total{what=\"capture_reloads\"} %" PRIu64 "\n",
		ld(&d->owned), polls - failed, failed, (double)ld(&d->poll_ns) / 1e9,
		ld(&d->events_read), ld(&d->events_fed), ld(&d->events_seeded), ld(&d->seeds),
		ld(&d->handed_over), ld(&d->jobs_dropped), ld(&d->reads_truncated),
		ld(&d->capture_errors));
}
