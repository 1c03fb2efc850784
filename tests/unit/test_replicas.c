// SPDX-License-Identifier: Apache-2.0
/*
 * Server replicas on one store (server/replicas.h, server/diag_shared.h),
 * with a fake shared store and a fake clock: rendezvous hashing spreads
 * jobs evenly and moves only a leaving replica's jobs; a replica whose view
 * is stale owns nothing; two replicas whose job's collectives sit in the
 * store (as if its ranks had sent their batches to either) find the
 * straggler exactly once, at the owner, and after the owner stops beating
 * the other takes over within ttl + one beat and finds it from the
 * store's recent past; a replica that joins takes its jobs over without
 * a step at which both hold one.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/diag_live.h"
#include "server/diag_shared.h"
#include "server/replicas.h"

#define S 1000000000ull
#define MS 1000000ull
#define T0 (1700000000ull * S)
#define NRANKS 4
#define BAD 2
#define PERIOD (50 * MS)

struct fake {
	struct store base; /* first */
	char ids[4][REPLICA_ID_LEN];
	uint64_t beats[4];
	size_t n;
	int fail;	      /* the store is unreachable */
	uint64_t visible;     /* collectives entered before this are stored */
	uint64_t data_end;    /* the job's last collective */
	uint64_t lag[NRANKS]; /* a rank's batches are stored this much later */
};

static int f_replicas(struct store *base, const char *id, uint64_t now, uint64_t since,
		      store_replica_fn fn, void *ctx)
{
	struct fake *f = (struct fake *)base;
	size_t i = 0;

	if (f->fail)
		return -EIO;
	while (i < f->n && strcmp(f->ids[i], id))
		i++;
	if (i == f->n)
		snprintf(f->ids[f->n++], REPLICA_ID_LEN, "%s", id);
	f->beats[i] = now;
	for (i = 0; i < f->n; i++)
		if (f->beats[i] >= since)
			fn(ctx, f->ids[i], f->beats[i]);
	return 0;
}

static int f_jobs(struct store *base, const struct store_filter *flt, store_job_fn fn, void *ctx)
{
	struct fake *f = (struct fake *)base;
	struct store_job j = { .job = "train", .first_ns = T0, .last_ns = f->visible };

	(void)flt;
	return f->fail ? -EIO : fn(ctx, &j);
}

static int f_clocks(struct store *base, const struct store_filter *flt, store_node_clock_fn fn,
		    void *ctx)
{
	(void)base, (void)flt, (void)fn, (void)ctx;
	return 0;
}

/* Collective k on every rank, 50 ms apart; rank BAD 12 ms late; jitter
 * up to 0.3 ms. */
static int f_events(struct store *base, const struct store_filter *flt, uint32_t kinds,
		    uint32_t limit, int *truncated, store_event_fn fn, void *ctx)
{
	struct fake *f = (struct fake *)base;
	uint64_t end = f->visible < f->data_end ? f->visible : f->data_end;
	uint64_t k0 = flt->from_ns > T0 ? (flt->from_ns - T0 + PERIOD - 1) / PERIOD : 0;
	char node[16];

	(void)limit;
	if (truncated)
		*truncated = 0;
	if (f->fail)
		return -EIO;
	if (!(kinds & STORE_EVENT_COLLECTIVE))
		return 0; /* the hang inputs: none (no rank hangs here) */
	for (uint64_t k = k0; T0 + k * PERIOD < end; k++)
		for (int r = 0; r < NRANKS; r++) {
			struct store_event e = {
				.kind = STORE_EVENT_COLLECTIVE,
				.node = node,
				.pid = 1000 + (uint32_t)r,
				.job = "train",
				.name = "AllReduce",
				.start_ns = T0 + k * PERIOD +
					    (k * 7 + (uint64_t)r * 13) % 300 * 1000 +
					    (r == BAD ? 12 * MS : 0),
				.comm_hash = 0xc0ffee,
				.seq = k,
				.comm_rank = r,
				.comm_nranks = NRANKS,
			};
			int err;

			if (e.start_ns + f->lag[r] >= f->visible || e.start_ns < flt->from_ns)
				continue;
			snprintf(node, sizeof(node), "node-%d", r);
			err = fn(ctx, &e);
			if (err)
				return err;
		}
	return 0;
}

static int f_nodes(struct store *base, const struct store_filter *flt, store_node_fn fn, void *ctx)
{
	(void)base, (void)flt, (void)fn, (void)ctx;
	return 0;
}

static const struct store_ops fake_ops = {
	.name = "fake",
	.jobs = f_jobs,
	.nodes = f_nodes,
	.events = f_events,
	.node_clocks = f_clocks,
	.replicas = f_replicas,
};

static void rendezvous(void **state)
{
	char ids[3][REPLICA_ID_LEN] = { "server-a", "server-b", "server-c" };
	char two[2][REPLICA_ID_LEN] = { "server-a", "server-c" };
	size_t count[3] = { 0 };

	(void)state;
	for (int i = 0; i < 3000; i++) {
		char job[32];
		size_t o;

		snprintf(job, sizeof(job), "job-%d", i);
		o = replicas__owner_of((const char(*)[REPLICA_ID_LEN])ids, 3, job);
		count[o]++;
		/* b leaves: only b's jobs move */
		if (o != 1)
			assert_string_equal(
				two[replicas__owner_of((const char(*)[REPLICA_ID_LEN])two, 2, job)],
				ids[o]);
	}
	for (int i = 0; i < 3; i++)
		assert_true(count[i] > 850 && count[i] < 1150);
}

static void stale_view(void **state)
{
	struct fake f = { .base.ops = &fake_ops };
	struct replicas *r = replicas__new(
		&(struct replicas_opts){ .id = "a", .ttl_ns = 10 * S, .store = &f.base });
	int owned = 0;

	(void)state;
	assert_non_null(r);
	assert_false(replicas__owns(r, "train", T0)); /* no view yet */
	assert_int_equal(replicas__refresh(r, T0), 0);
	assert_false(replicas__owns(r, "train", T0 + S));    /* joining: two beats */
	assert_true(replicas__owns(r, "train", T0 + 4 * S)); /* alone */
	f.fail = 1;
	assert_int_equal(replicas__refresh(r, T0 + 2 * S), -EIO);
	assert_true(replicas__owns(r, "train", T0 + 9 * S));
	assert_false(replicas__owns(r, "train", T0 + 10 * S)); /* cut off: owns nothing */
	f.fail = 0;
	/* a second replica: the jobs split */
	f.n = 1;
	snprintf(f.ids[1], REPLICA_ID_LEN, "b");
	f.beats[1] = T0 + 11 * S;
	f.n = 2;
	assert_int_equal(replicas__refresh(r, T0 + 11 * S), 0);
	for (int i = 0; i < 100; i++) {
		char job[16];

		snprintf(job, sizeof(job), "j%d", i);
		owned += replicas__owns(r, job, T0 + 11 * S);
	}
	assert_true(owned > 25 && owned < 75);
	replicas__free(r);
	assert_null(replicas__new(&(struct replicas_opts){ .id = "", .store = &f.base }));
}

struct node {
	struct replicas *r;
	struct diag_live *l;
	struct diag_shared *d;
};

static void node_new(struct node *n, const char *id, struct fake *f)
{
	n->r = replicas__new(&(struct replicas_opts){
		.id = id, .ttl_ns = 10 * S, .beat_ns = 2 * S, .store = &f->base });
	n->l = diag_live__new(&(struct diag_live_opts){ .sz = sizeof(struct diag_live_opts) });
	assert_non_null(n->r);
	assert_non_null(n->l);
	n->d = diag_shared__new(&(struct diag_shared_opts){
		.store = &f->base, .live = n->l, .replicas = n->r, .lookback_ns = 30 * S });
	assert_non_null(n->d);
}

static void node_free(struct node *n)
{
	diag_shared__free(n->d);
	diag_live__free(n->l);
	replicas__free(n->r);
}

static size_t confirmed(struct node *n, struct straggler_rank *out)
{
	return diag_live__stragglers(n->l, "train", 1, out, 4);
}

static void straggler_once_then_takeover(void **state)
{
	struct fake f = { .base.ops = &fake_ops, .data_end = T0 + 3600 * S };
	struct straggler_rank sr[4];
	struct node n[2];
	uint64_t t = T0, killed = 0, taken = 0;
	int owner = -1;

	(void)state;
	node_new(&n[0], "server-a", &f);
	node_new(&n[1], "server-b", &f);
	/* 40 s of the job, both replicas beating and polling every 2 s */
	for (; t < T0 + 40 * S; t += 2 * S) {
		f.visible = t - S; /* stored a second after */
		for (int i = 0; i < 2; i++) {
			replicas__refresh(n[i].r, t);
			assert_int_equal(diag_shared__poll(n[i].d, t), 0);
		}
	}
	for (int i = 0; i < 2; i++) {
		size_t k = confirmed(&n[i], sr);

		if (k) {
			assert_int_equal(owner, -1); /* found once */
			assert_int_equal(k, 1);
			assert_int_equal(sr[0].rank, BAD);
			owner = i;
		}
	}
	assert_int_not_equal(owner, -1);
	assert_true(replicas__owns(n[owner].r, "train", t));
	assert_false(replicas__owns(n[!owner].r, "train", t));
	/* the owner dies: the other goes on alone */
	killed = t;
	for (; t < killed + 60 * S && !taken; t += 2 * S) {
		f.visible = t - S;
		replicas__refresh(n[!owner].r, t);
		assert_int_equal(diag_shared__poll(n[!owner].d, t), 0);
		if (confirmed(&n[!owner], sr) == 1 && sr[0].rank == BAD)
			taken = t;
	}
	assert_true(taken);
	print_message("takeover: straggler confirmed by the survivor %.0f s after the owner's "
		      "last beat (ttl 10 s, beat 2 s)\n",
		      (double)(taken - killed) / 1e9);
	assert_true(taken - killed <= 12 * S);
	node_free(&n[0]);
	node_free(&n[1]);
}

/* One rank's batches reach the store 8 s after the others' (its node
 * uploads late): each event is fed once, whenever it shows up, and the
 * late rank is not taken for a straggler. */
static void late_batches_fed_once(void **state)
{
	struct fake f = { .base.ops = &fake_ops, .data_end = T0 + 3600 * S };
	struct straggler_rank sr[4];
	struct diag_live_stats st;
	struct node n;
	uint64_t t = T0, stored = 0;

	(void)state;
	f.lag[3] = 8 * S;
	node_new(&n, "server-a", &f);
	for (; t < T0 + 40 * S; t += 2 * S) {
		f.visible = t - S;
		replicas__refresh(n.r, t);
		assert_int_equal(diag_shared__poll(n.d, t), 0);
	}
	/* every event stored by the last poll, counted once */
	for (uint64_t k = 0; T0 + k * PERIOD < f.visible; k++)
		for (int r = 0; r < NRANKS; r++)
			stored += T0 + k * PERIOD + (r == BAD ? 12 * MS : 0) + f.lag[r] +
					  (k * 7 + (uint64_t)r * 13) % 300 * 1000 <
				  f.visible;
	diag_live__stats(n.l, &st);
	assert_int_equal(st.events, stored);
	assert_int_equal(confirmed(&n, sr), 1);
	assert_int_equal(sr[0].rank, BAD);
	node_free(&n);
}

/* The owner loses the store: once its view is older than the ttl (when
 * the others take over) it holds the job no more, so it stops exporting
 * and alerting about it. */
static void cut_off_owner_lets_go(void **state)
{
	struct fake f = { .base.ops = &fake_ops, .data_end = T0 + 3600 * S };
	struct straggler_rank sr[4];
	struct node n;
	uint64_t t = T0, cut;

	(void)state;
	node_new(&n, "server-a", &f);
	for (; t < T0 + 30 * S; t += 2 * S) {
		f.visible = t - S;
		replicas__refresh(n.r, t);
		assert_int_equal(diag_shared__poll(n.d, t), 0);
	}
	assert_int_equal(confirmed(&n, sr), 1);
	f.fail = 1;
	cut = t - 2 * S; /* its last view */
	for (; t < cut + 20 * S; t += 2 * S) {
		assert_int_equal(replicas__refresh(n.r, t), -EIO);
		assert_int_equal(diag_shared__poll(n.d, t), -EIO);
		assert_int_equal(confirmed(&n, sr), t < cut + 10 * S);
	}
	node_free(&n);
}

/* A replica joins and takes the job over: at no step do both hold it. */
static void join_without_two_owners(void **state)
{
	struct fake f = { .base.ops = &fake_ops, .data_end = T0 + 3600 * S };
	char ids[2][REPLICA_ID_LEN] = { "server-a", "" };
	struct straggler_rank sr[4];
	struct node n[2];
	uint64_t t = T0, joined, taken = 0;

	(void)state;
	/* a newcomer id that owns the job once it is in */
	for (int i = 0;
	     !ids[1][0] || replicas__owner_of((const char(*)[REPLICA_ID_LEN])ids, 2, "train") != 1;
	     i++)
		snprintf(ids[1], REPLICA_ID_LEN, "server-%d", i);
	node_new(&n[0], ids[0], &f);
	for (; t < T0 + 30 * S; t += 2 * S) {
		f.visible = t - S;
		replicas__refresh(n[0].r, t);
		assert_int_equal(diag_shared__poll(n[0].d, t), 0);
	}
	assert_int_equal(confirmed(&n[0], sr), 1); /* alone: a owns it */
	node_new(&n[1], ids[1], &f);
	joined = t;
	for (; t < joined + 30 * S; t += 2 * S) {
		size_t ka, kb;

		f.visible = t - S;
		for (int i = 0; i < 2; i++) {
			replicas__refresh(n[i].r, t);
			assert_int_equal(diag_shared__poll(n[i].d, t), 0);
		}
		ka = confirmed(&n[0], sr);
		kb = confirmed(&n[1], sr);
		assert_false(ka && kb);
		if (kb && !taken)
			taken = t;
	}
	assert_true(taken);
	assert_int_equal(confirmed(&n[0], sr), 0);
	print_message("join: %s took the job over %.0f s after its first beat, never two owners\n",
		      ids[1], (double)(taken - joined) / 1e9);
	node_free(&n[0]);
	node_free(&n[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rendezvous),
		cmocka_unit_test(stale_view),
		cmocka_unit_test(straggler_once_then_takeover),
		cmocka_unit_test(join_without_two_owners),
		cmocka_unit_test(late_batches_fed_once),
		cmocka_unit_test(cut_off_owner_lets_go),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
