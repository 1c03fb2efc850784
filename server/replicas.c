// SPDX-License-Identifier: Apache-2.0
/*
 * Replica membership by heartbeats in the shared store, job ownership by
 * rendezvous hashing (see replicas.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "server/diag_inputs.h"
#include "server/replicas.h"

struct replicas {
	struct replicas_opts o;
	char id[REPLICA_ID_LEN];
	pthread_mutex_t lock; /* everything below */
	char (*live)[REPLICA_ID_LEN];
	size_t nlive;
	uint64_t view_ns;  /* when the view was last read (0: never) */
	uint64_t first_ns; /* the first view: owning starts two beats later */
	uint64_t refreshes, refresh_errors, members_dropped, changes;
	pthread_t thread;
	int running, stop;
	pthread_cond_t wake;
};

struct replicas *replicas__new(const struct replicas_opts *o)
{
	struct replicas *r;

	if (!o || !o->id || !o->id[0] || strlen(o->id) >= REPLICA_ID_LEN || !o->store ||
	    !o->store->ops->replicas) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->live = calloc(REPLICAS_MAX, sizeof(*r->live)))) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->o = *o;
	snprintf(r->id, sizeof(r->id), "%s", o->id);
	r->o.id = r->id;
	if (!r->o.ttl_ns)
		r->o.ttl_ns = 10000000000ULL;
	if (!r->o.beat_ns)
		r->o.beat_ns = r->o.ttl_ns / 5;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	return r;
}

void replicas__free(struct replicas *r)
{
	if (!r)
		return;
	if (r->running) {
		pthread_mutex_lock(&r->lock);
		r->stop = 1;
		pthread_cond_signal(&r->wake);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->thread, NULL);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->wake);
	free(r->live);
	free(r);
}

struct view {
	char (*ids)[REPLICA_ID_LEN];
	size_t n, dropped;
};

static int on_replica(void *ctx, const char *id, uint64_t beat_ns)
{
	struct view *v = ctx;

	(void)beat_ns;
	if (!id[0] || strlen(id) >= REPLICA_ID_LEN)
		return 0;
	if (v->n == REPLICAS_MAX) {
		v->dropped++;
		return 0;
	}
	snprintf(v->ids[v->n++], REPLICA_ID_LEN, "%s", id);
	return 0;
}

int replicas__refresh(struct replicas *r, uint64_t now_ns)
{
	struct view v = { .ids = calloc(REPLICAS_MAX, REPLICA_ID_LEN) };
	uint64_t since = now_ns > r->o.ttl_ns ? now_ns - r->o.ttl_ns : 0;
	int err = v.ids ? 0 : -ENOMEM;

	/* the store round trip outside the lock: owns() never waits on it */
	if (!err)
		err = r->o.store->ops->replicas(r->o.store, r->id, now_ns, since, on_replica, &v);
	pthread_mutex_lock(&r->lock);
	r->refreshes++;
	if (err) {
		r->refresh_errors++;
	} else {
		if (v.n != r->nlive || memcmp(v.ids, r->live, v.n * REPLICA_ID_LEN))
			r->changes++;
		memcpy(r->live, v.ids, v.n * REPLICA_ID_LEN);
		r->nlive = v.n;
		r->view_ns = now_ns;
		if (!r->first_ns)
			r->first_ns = now_ns;
		r->members_dropped += v.dropped;
	}
	pthread_mutex_unlock(&r->lock);
	free(v.ids);
	return err;
}

size_t replicas__owner_of(const char (*ids)[REPLICA_ID_LEN], size_t n, const char *job)
{
	uint64_t best = 0;
	size_t owner = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t w = hash_bytes(job, strlen(job), hash_bytes(ids[i], strlen(ids[i]), 0));

		/* ties (never in practice) go to the smaller id: the same everywhere */
		if (i == 0 || w > best || (w == best && strcmp(ids[i], ids[owner]) < 0)) {
			best = w;
			owner = i;
		}
	}
	return owner;
}

int replicas__owns(struct replicas *r, const char *job, uint64_t now_ns)
{
	int owns = 0;

	if (!r)
		return 1;
	pthread_mutex_lock(&r->lock);
	/* A stale view (store unreachable): the others have taken over.  A
	 * newcomer waits two beats: by then every replica has seen its beat
	 * and let go of the jobs it takes, so a job has no owner for a
	 * moment rather than two. */
	if (r->nlive && r->view_ns && now_ns < r->view_ns + r->o.ttl_ns &&
	    now_ns >= r->first_ns + 2 * r->o.beat_ns)
		owns = !strcmp(r->live[replicas__owner_of((const char(*)[REPLICA_ID_LEN])r->live,
							  r->nlive, job)],
			       r->id);
	pthread_mutex_unlock(&r->lock);
	return owns;
}

static void *beat_thread(void *arg)
{
	struct replicas *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct timespec ts = realtime_deadline(r->o.beat_ns);

		pthread_mutex_unlock(&r->lock);
		replicas__refresh(r, realtime_ns());
		pthread_mutex_lock(&r->lock);
		if (!r->stop)
			pthread_cond_timedwait(&r->wake, &r->lock, &ts);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int replicas__start(struct replicas *r)
{
	int err;

	replicas__refresh(r, realtime_ns()); /* a view before the first request */
	err = pthread_create(&r->thread, NULL, beat_thread, r);
	if (err)
		return -err;
	r->running = 1;
	return 0;
}

void replicas__metrics(struct replicas *r, FILE *o)
{
	uint64_t now = realtime_ns();

	pthread_mutex_lock(&r->lock);
	fputs("# HELP strata_replica_info this server's replica id\n"
	      "# TYPE strata_replica_info gauge\n"
	      "strata_replica_info{replica=",
	      o);
	diag_prom_label(o, r->id);
	fprintf(o,
		"} 1\n"
		"# HELP strata_replica_members live replicas in this replica's view\n"
		"# TYPE strata_replica_members gauge\n"
		"strata_replica_members %zu\n"
		"# HELP strata_replica_view_age_seconds since the view was last read from the "
		"store\n"
		"# TYPE strata_replica_view_age_seconds gauge\n"
		"strata_replica_view_age_seconds %g\n"
		"# HELP strata_replica_refreshes_total heartbeats and view reads, by outcome\n"
		"# TYPE strata_replica_refreshes_total counter\n"
		"strata_replica_refreshes_total{outcome=\"ok\"} %" PRIu64 "\n"
		"strata_replica_refreshes_total{outcome=\"failed\"} %" PRIu64 "\n"
		"# HELP strata_replica_view_changes_total times the set of live replicas changed\n"
		"# TYPE strata_replica_view_changes_total counter\n"
		"strata_replica_view_changes_total %" PRIu64 "\n"
		"# HELP strata_replica_members_dropped_total replicas left out of a full view\n"
		"# TYPE strata_replica_members_dropped_total counter\n"
		"strata_replica_members_dropped_total %" PRIu64 "\n",
		r->nlive, r->view_ns && now > r->view_ns ? (double)(now - r->view_ns) / 1e9 : 0.0,
		r->refreshes - r->refresh_errors, r->refresh_errors, r->changes,
		r->members_dropped);
	pthread_mutex_unlock(&r->lock);
}
