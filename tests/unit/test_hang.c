// SPDX-License-Identifier: Apache-2.0
/*
 * NCCL hang detection (diagnose/hang.c) on synthetic jobs: 4 ranks, one
 * allreduce every 100 ms, batches every 10 s with the calls in flight at
 * their end.  A rank that never enters collective N (blocked, spinning,
 * in a CUDA call, exited): a hang after the threshold (5 s), naming the
 * waiting ranks since their entry and the missing one with its last
 * collective; cleared when N completes.  No hang for a healthy job, for
 * every rank pausing at once (a checkpoint), for a call its node's next
 * batch no longer lists, or before 10x a slow communicator's period.  A
 * desynchronised rank: op/bytes mismatch at one sequence number, whether
 * it completes or hangs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/hang.h"

#define MS 1000000LL
#define S (1000 * MS)
#define T0 (1700000000LL * S)
#define COMM 0xabcULL
#define MAXT 64

static const char *node_of(int r)
{
	return r < 2 ? "n0" : "n1";
}

static void done(struct hang_detector *d, int r, uint64_t seq, const char *op, uint64_t bytes,
		 int64_t entry, int64_t exit)
{
	struct hang_call c = { .comm_hash = COMM,
			       .rank = r,
			       .nranks = 4,
			       .node = node_of(r),
			       .pid = 100 + (uint32_t)r,
			       .seq = seq,
			       .op = op,
			       .bytes = bytes,
			       .entry_ns = entry,
			       .exit_ns = exit };

	hang_detector__call(d, &c);
}

static void inflight(struct hang_detector *d, int r, uint64_t seq, const char *op, uint64_t bytes,
		     int64_t entry, int64_t as_of)
{
	struct hang_call c = { .comm_hash = COMM,
			       .rank = r,
			       .nranks = 4,
			       .node = node_of(r),
			       .pid = 100 + (uint32_t)r,
			       .seq = seq,
			       .op = op,
			       .bytes = bytes,
			       .entry_ns = entry,
			       .as_of_ns = as_of };

	hang_detector__call(d, &c);
}

/* Collectives [from, to) on every rank but skip (-1: none), one per
 * 100 ms from t (seq k at t + k x 100 ms), 10 ms each. */
static void run(struct hang_detector *d, uint64_t from, uint64_t to, int skip)
{
	for (uint64_t k = from; k < to; k++)
		for (int r = 0; r < 4; r++)
			if (r != skip)
				done(d, r, k, "AllReduce", 4096, T0 + (int64_t)k * 100 * MS,
				     T0 + (int64_t)k * 100 * MS + 10 * MS);
}

static void batch(struct hang_detector *d, int64_t at)
{
	hang_detector__batch(d, "n0", at);
	hang_detector__batch(d, "n1", at);
}

static size_t eval(struct hang_detector *d, struct hang_transition *t)
{
	size_t n = hang_detector__evaluate(d, t, MAXT);

	assert_true(n <= MAXT);
	return n;
}

/* Ranks 0, 1, 3 enter collective 100 at T0 + 10 s; rank 2 does not. */
static struct hang_detector *stuck_at_100(struct hang_transition *t, size_t *n)
{
	struct hang_detector *d = hang_detector__new("j", NULL);
	int64_t e = T0 + 100 * 100 * MS;

	assert_non_null(d);
	run(d, 0, 100, -1);
	/* batch at T0 + 12 s: waiting 2 s, under the 5 s threshold */
	batch(d, T0 + 12 * S);
	for (int r = 0; r < 4; r++)
		if (r != 2)
			inflight(d, r, 100, "AllReduce", 4096, e + r * MS, T0 + 12 * S);
	assert_int_equal(eval(d, t), 0);
	/* batch at T0 + 22 s: still waiting, 12 s */
	batch(d, T0 + 22 * S);
	for (int r = 0; r < 4; r++)
		if (r != 2)
			inflight(d, r, 100, "AllReduce", 4096, e + r * MS, T0 + 22 * S);
	*n = eval(d, t);
	return d;
}

static void rank_never_enters(void **state)
{
	struct hang_transition t[MAXT];
	struct hang_report l[4];
	size_t n;
	struct hang_detector *d = stuck_at_100(t, &n);
	const struct hang_report *h = &t[0].h;

	(void)state;
	assert_int_equal(n, 1);
	assert_int_equal(t[0].change, HANG_CONFIRM);
	assert_int_equal(h->kind, HANG_MISSING);
	assert_string_equal(h->job, "j");
	assert_int_equal(h->comm_hash, COMM);
	assert_int_equal(h->seq, 100);
	assert_string_equal(h->op, "AllReduce");
	assert_int_equal(h->bytes, 4096);
	assert_int_equal(h->nranks, 4);
	assert_int_equal(h->since_ns, T0 + 10 * S);
	assert_int_equal(h->decided_ns, T0 + 22 * S);
	assert_true(h->threshold_s == 5.0); /* 10 x 100 ms < 5 s */
	assert_true(h->period_s > 0.0999 && h->period_s < 0.1001);
	assert_int_equal(h->nwaiting, 3);
	assert_int_equal(h->waiting[0].rank, 0);
	assert_int_equal(h->waiting[1].since_ns, T0 + 10 * S + MS);
	assert_int_equal(h->waiting[2].rank, 3);
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->nmismatched, 0);
	assert_int_equal(h->missing[0].rank, 2);
	assert_true(h->missing[0].known);
	assert_string_equal(h->missing[0].node, "n1");
	assert_int_equal(h->missing[0].pid, 102);
	assert_true(h->missing[0].has_last);
	assert_int_equal(h->missing[0].last_seq, 99);
	assert_string_equal(h->missing[0].last_op, "AllReduce");
	assert_int_equal(h->missing[0].last_exit_ns, T0 + 99 * 100 * MS + 10 * MS);
	assert_int_equal(h->missing[0].heard_ns, T0 + 22 * S);
	assert_int_equal(h->missing[0].exited_ns, 0);
	assert_int_equal(h->missing[0].gpu_call[0], 0);
	/* listed while it lasts; no second confirmation */
	assert_int_equal(hang_detector__list(d, l, 4), 1);
	batch(d, T0 + 32 * S);
	for (int r = 0; r < 4; r++)
		if (r != 2)
			inflight(d, r, 100, "AllReduce", 4096, T0 + 10 * S + r * MS, T0 + 32 * S);
	assert_int_equal(eval(d, t), 0);
	assert_int_equal(hang_detector__list(d, l, 4), 1);
	assert_int_equal(l[0].as_of_ns, T0 + 32 * S);
	/* rank 2 comes: 100 completes on every rank -> cleared */
	batch(d, T0 + 42 * S);
	for (int r = 0; r < 4; r++)
		done(d, r, 100, "AllReduce", 4096, T0 + 10 * S + (r == 2 ? 25 * S : r * MS),
		     T0 + 35 * S + 10 * MS);
	n = eval(d, t);
	assert_int_equal(n, 1);
	assert_int_equal(t[0].change, HANG_CLEAR);
	assert_int_equal(t[0].h.seq, 100);
	assert_int_equal(t[0].h.until_ns, T0 + 42 * S);
	assert_int_equal(hang_detector__list(d, l, 4), 0);
	hang_detector__free(d);
}

static void missing_rank_states(void **state)
{
	struct hang_transition t[MAXT];
	struct hang_detector *d = hang_detector__new("j", NULL);
	int64_t e = T0 + 100 * 100 * MS;

	(void)state;
	run(d, 0, 100, -1);
	batch(d, T0 + 22 * S);
	for (int r = 0; r < 3; r++)
		inflight(d, r, 100, "AllReduce", 4096, e, T0 + 22 * S);
	/* rank 2 inside a CUDA call since 11 s; rank 3 exited at 10.5 s */
	hang_detector__gpu_call(d, "n1", 102, "cudaStreamSynchronize", T0 + 11 * S, T0 + 22 * S);
	hang_detector__exit(d, "n1", 103, T0 + 10500 * MS);
	/* rank 2 was "waiting" above: drop it again, it is in the CUDA call */
	batch(d, T0 + 23 * S);
	for (int r = 0; r < 2; r++)
		inflight(d, r, 100, "AllReduce", 4096, e, T0 + 23 * S);
	hang_detector__gpu_call(d, "n1", 102, "cudaStreamSynchronize", T0 + 11 * S, T0 + 23 * S);
	hang_detector__thread_state(d, "n1", 102, "S", "futex_wait_queue", "entry;futex_wait", 202,
				    T0 + 23 * S);
	assert_int_equal(eval(d, t), 1);
	assert_string_equal(t[0].h.missing[0].sched_state, "S");
	assert_string_equal(t[0].h.missing[0].wchan, "futex_wait_queue");
	assert_string_equal(t[0].h.missing[0].kstack, "entry;futex_wait");
	assert_int_equal(t[0].h.missing[0].syscall, 202);
	assert_int_equal(t[0].h.missing[1].syscall, -1);
	assert_int_equal(t[0].h.nwaiting, 2);
	assert_int_equal(t[0].h.nmissing, 2);
	assert_int_equal(t[0].h.missing[0].rank, 2);
	assert_string_equal(t[0].h.missing[0].gpu_call, "cudaStreamSynchronize");
	assert_int_equal(t[0].h.missing[0].gpu_call_since_ns, T0 + 11 * S);
	assert_int_equal(t[0].h.missing[1].rank, 3);
	assert_int_equal(t[0].h.missing[1].exited_ns, T0 + 10500 * MS);
	/* a GPU call the node's next batch no longer lists is over */
	batch(d, T0 + 24 * S);
	for (int r = 0; r < 2; r++)
		inflight(d, r, 100, "AllReduce", 4096, e, T0 + 24 * S);
	assert_int_equal(eval(d, t), 0);
	struct hang_report l[2];
	assert_int_equal(hang_detector__list(d, l, 2), 1);
	assert_int_equal(l[0].missing[0].gpu_call[0], 0);
	/* the job stops reporting: cleared */
	assert_int_equal(hang_detector__expire(d, t, MAXT), 1);
	assert_int_equal(t[0].change, HANG_CLEAR);
	hang_detector__free(d);
}

static void no_false_hangs(void **state)
{
	struct hang_transition t[MAXT];
	struct hang_detector *d = hang_detector__new("j", NULL);

	(void)state;
	/* healthy: every batch catches a collective in flight on some ranks */
	for (int b = 1; b <= 10; b++) {
		int64_t at = T0 + b * 10 * S;
		uint64_t k = (uint64_t)b * 100;

		run(d, k - 100, k, -1);
		batch(d, at);
		for (int r = 0; r < 4; r += 2)
			inflight(d, r, k, "AllReduce", 4096, at - 3 * MS, at);
		assert_int_equal(eval(d, t), 0);
	}
	/* a checkpoint: every rank stops for 60 s, none in a collective */
	for (int b = 11; b <= 17; b++) {
		batch(d, T0 + b * 10 * S);
		assert_int_equal(eval(d, t), 0);
	}
	/* a rank seen in flight whose node's next batch does not list it
	 * (its completion lost): not waiting any more */
	batch(d, T0 + 180 * S);
	for (int r = 0; r < 3; r++)
		inflight(d, r, 1000, "AllReduce", 4096, T0 + 170 * S, T0 + 180 * S);
	assert_int_equal(eval(d, t), 1); /* waiting 10 s, rank 3 missing */
	assert_int_equal(t[0].change, HANG_CONFIRM);
	batch(d, T0 + 190 * S); /* nothing listed: over */
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].change, HANG_CLEAR);
	assert_int_equal(t[0].h.until_ns, T0 + 190 * S);
	hang_detector__free(d);

	/* a slow communicator (a collective every 2 s): the threshold is 20 s */
	d = hang_detector__new("j", NULL);
	for (uint64_t k = 0; k < 20; k++)
		for (int r = 0; r < 4; r++)
			done(d, r, k, "AllReduce", 4096, T0 + (int64_t)k * 2 * S,
			     T0 + (int64_t)k * 2 * S + MS);
	batch(d, T0 + 50 * S);
	for (int r = 0; r < 3; r++)
		inflight(d, r, 20, "AllReduce", 4096, T0 + 40 * S, T0 + 50 * S);
	assert_int_equal(eval(d, t), 0); /* 10 s < 20 s */
	batch(d, T0 + 61 * S);
	for (int r = 0; r < 3; r++)
		inflight(d, r, 20, "AllReduce", 4096, T0 + 40 * S, T0 + 61 * S);
	assert_int_equal(eval(d, t), 1);
	assert_true(t[0].h.threshold_s == 20.0);
	hang_detector__free(d);
}

/* A rank is missing on its own node's word: not while its node's latest
 * batch predates the wait by less than the threshold. */
static void missing_on_its_nodes_word(void **state)
{
	struct hang_transition t[MAXT];
	struct hang_detector *d = hang_detector__new("j", NULL);
	int64_t e = T0 + 100 * 100 * MS;

	(void)state;
	run(d, 0, 100, -1);
	batch(d, T0 + 10 * S);
	hang_detector__batch(d, "n0", T0 + 17 * S); /* n1 not heard since 10 s */
	for (int r = 0; r < 2; r++)
		inflight(d, r, 100, "AllReduce", 4096, e, T0 + 17 * S);
	assert_int_equal(eval(d, t), 0);
	hang_detector__batch(d, "n1", T0 + 17 * S); /* rank 3 waits too, 2 not */
	inflight(d, 3, 100, "AllReduce", 4096, e, T0 + 17 * S);
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].h.nmissing, 1);
	assert_int_equal(t[0].h.missing[0].rank, 2);
	hang_detector__free(d);

	/* n1 silent (its agent gone) for twice the threshold: missing anyway */
	d = hang_detector__new("j", NULL);
	run(d, 0, 100, -1);
	batch(d, T0 + 10 * S);
	hang_detector__batch(d, "n0", T0 + 19 * S);
	for (int r = 0; r < 2; r++)
		inflight(d, r, 100, "AllReduce", 4096, e, T0 + 19 * S);
	assert_int_equal(eval(d, t), 0); /* 9 s of silence < 10 s */
	hang_detector__batch(d, "n0", T0 + 21 * S);
	for (int r = 0; r < 2; r++)
		inflight(d, r, 100, "AllReduce", 4096, e, T0 + 21 * S);
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].h.nmissing, 2);
	assert_int_equal(t[0].h.missing[0].heard_ns, T0 + 10 * S);
	hang_detector__free(d);
}

static void every_rank_waits(void **state)
{
	struct hang_transition t[MAXT];
	struct hang_detector *d = hang_detector__new("j", NULL);

	(void)state;
	run(d, 0, 50, -1);
	batch(d, T0 + 20 * S);
	for (int r = 0; r < 4; r++)
		inflight(d, r, 50, "AllReduce", 4096, T0 + 5 * S, T0 + 20 * S);
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].h.kind, HANG_STALLED);
	assert_int_equal(t[0].h.nwaiting, 4);
	assert_int_equal(t[0].h.nmissing, 0);
	hang_detector__free(d);
}

static void desynchronised_rank(void **state)
{
	struct hang_transition t[MAXT];
	struct hang_report l[4];
	struct hang_detector *d = hang_detector__new("j", NULL);

	(void)state;
	run(d, 0, 10, -1);
	/* seq 10: rank 1 calls a broadcast where the others allreduce; it
	 * completes (the collective's sizes happen to let it) */
	for (int r = 0; r < 4; r++)
		done(d, r, 10, r == 1 ? "Broadcast" : "AllReduce", r == 1 ? 1024 : 4096, T0 + S,
		     T0 + S + MS);
	batch(d, T0 + 2 * S);
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].change, HANG_CONFIRM);
	assert_int_equal(t[0].h.kind, HANG_MISMATCH);
	assert_int_equal(t[0].h.seq, 10);
	assert_string_equal(t[0].h.op, "AllReduce");
	assert_int_equal(t[0].h.bytes, 4096);
	assert_int_equal(t[0].h.nmismatched, 1);
	assert_int_equal(t[0].h.mismatched[0].rank, 1);
	assert_string_equal(t[0].h.mismatched[0].op, "Broadcast");
	assert_int_equal(t[0].h.mismatched[0].bytes, 1024);
	assert_int_equal(hang_detector__list(d, l, 4), 1); /* kept among the recent */
	/* the first arrival is the odd one: still the minority is named */
	for (int r = 3; r >= 0; r--)
		done(d, r, 11, "AllReduce", r == 3 ? 8192 : 4096, T0 + 2 * S, T0 + 2 * S + MS);
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].h.mismatched[0].rank, 3);
	assert_int_equal(t[0].h.mismatched[0].bytes, 8192);

	/* in flight: rank 3 waits in a different collective at seq 20 */
	run(d, 12, 20, -1);
	batch(d, T0 + 30 * S);
	for (int r = 0; r < 4; r++)
		inflight(d, r, 20, r == 3 ? "AllGather" : "AllReduce", 4096, T0 + 10 * S,
			 T0 + 30 * S);
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].h.kind, HANG_STALLED);
	assert_string_equal(t[0].h.op, "AllReduce");
	assert_int_equal(t[0].h.nmismatched, 1);
	assert_int_equal(t[0].h.mismatched[0].rank, 3);
	assert_string_equal(t[0].h.mismatched[0].op, "AllGather");
	/* rank 3 listed in flight at 19, which it completed before: old
	 * news, so it is the one missing from 20 */
	batch(d, T0 + 40 * S);
	for (int r = 0; r < 3; r++)
		inflight(d, r, 20, "AllReduce", 4096, T0 + 10 * S, T0 + 40 * S);
	inflight(d, 3, 19, "AllReduce", 4096, T0 + 10 * S, T0 + 40 * S);
	eval(d, t);
	assert_int_equal(hang_detector__list(d, l, 4), 3);
	assert_int_equal(l[0].kind, HANG_MISSING);
	assert_int_equal(l[0].nmissing, 1);
	assert_int_equal(l[0].missing[0].rank, 3);
	assert_int_equal(l[0].missing[0].last_seq, 19);
	hang_detector__free(d);
}

static void bad_input_and_bounds(void **state)
{
	struct hang_opts o = { .sz = sizeof(o), .max_comms = 1, .max_ranks = 8 };
	struct hang_detector *d = hang_detector__new("j", &o);
	struct hang_call c = { .comm_hash = 1, .rank = 5, .nranks = 4, .node = "n", .op = "x" };
	struct hang_stats st;

	(void)state;
	hang_detector__call(d, &c); /* rank >= nranks */
	c.rank = 0;
	c.node = NULL;
	hang_detector__call(d, &c); /* no node */
	c.node = "n";
	c.nranks = 16; /* too many ranks */
	hang_detector__call(d, &c);
	c.nranks = 4;
	hang_detector__call(d, &c);
	c.comm_hash = 2; /* a second communicator: full */
	hang_detector__call(d, &c);
	hang_detector__stats(d, &st);
	assert_int_equal(st.bad, 2);
	assert_int_equal(st.ranks_dropped, 1);
	assert_int_equal(st.comms_dropped, 1);
	hang_detector__free(d);
	hang_detector__free(NULL);
}

/* One completed call of communicator hash, after `batches` more batches
 * of node n. */
static void call_after(struct hang_detector *d, struct hang_call *c, uint64_t hash, int batches)
{
	for (int i = 0; i < batches; i++)
		hang_detector__batch(d, "n", T0);
	c->comm_hash = hash;
	c->entry_ns = T0;
	c->exit_ns = T0 + MS;
	hang_detector__call(d, c);
}

static void assert_comms(struct hang_detector *d, uint64_t evicted, uint64_t dropped)
{
	struct hang_stats st;

	hang_detector__stats(d, &st);
	assert_int_equal(st.comms_evicted, evicted);
	assert_int_equal(st.comms_dropped, dropped);
}

/*
 * A job that restarts makes new communicators each time: once the table is
 * full, the one idle longest (no call in 60 of the job's batches per node:
 * 10 minutes; not hung) makes room, so the restarted job's hangs are
 * still watched.  One still in use is never replaced: the newcomer is
 * dropped (counted).  Idleness is counted in batches, not by the calls'
 * times (all T0 here), which a node's clock can put anywhere.  Before,
 * the table filled and every later communicator was dropped.
 */
static void restarted_job_replaces_idle_communicators(void **state)
{
	struct hang_opts o = { .sz = sizeof(o), .max_comms = 2, .max_ranks = 8 };
	struct hang_detector *d = hang_detector__new("j", &o);
	struct hang_call c = { .rank = 0, .nranks = 2, .node = "n", .pid = 7, .op = "AllReduce" };

	(void)state;
	call_after(d, &c, 1, 1); /* the first start's two communicators */
	call_after(d, &c, 2, 0);
	call_after(d, &c, 3, 6); /* a restart a minute later: both still recent */
	assert_comms(d, 0, 1);
	call_after(d, &c, 2, 40); /* comm 2 still in use; comm 1 goes idle */
	call_after(d, &c, 3, 20); /* 66 batches after comm 1's last call */
	assert_comms(d, 1, 1);
	call_after(d, &c, 4, 1); /* comm 2 (21 batches ago) and 3 stay */
	assert_comms(d, 1, 2);
	hang_detector__free(d);
}

/*
 * A job's processes come and go (DataLoader workers each epoch, the ranks
 * of earlier runs): 20,000 exit on a node over 20 batches.  The process
 * table (8192) lets go of the ones no rank is bound to, so a rank that
 * exits afterwards is still named as exited in the hang it causes.
 * Before, the table filled after 8192 and the rank's exit was refused.
 */
static void forgets_processes_no_rank_is(void **state)
{
	struct hang_transition t[MAXT];
	struct hang_detector *d = hang_detector__new("j", NULL);
	int64_t e = T0 + 100 * 100 * MS;
	struct hang_stats st;

	(void)state;
	run(d, 0, 100, -1);
	for (uint32_t i = 0; i < 20000; i++) {
		if (i % 1000 == 0)
			batch(d, T0 + 11 * S + i * MS / 10);
		hang_detector__exit(d, "n0", 1000 + i, T0 + 11 * S + i * MS / 10);
	}
	hang_detector__exit(d, "n1", 103, T0 + 13 * S); /* rank 3 */
	batch(d, T0 + 22 * S);
	for (int r = 0; r < 3; r++)
		inflight(d, r, 100, "AllReduce", 4096, e, T0 + 22 * S);
	assert_int_equal(eval(d, t), 1);
	assert_int_equal(t[0].h.nmissing, 1);
	assert_int_equal(t[0].h.missing[0].rank, 3);
	assert_int_equal(t[0].h.missing[0].exited_ns, T0 + 13 * S);
	hang_detector__stats(d, &st);
	assert_int_equal(st.procs_dropped, 0);
	assert_true(st.procs_forgotten >= 20000 - 8192);
	assert_int_equal(st.nodes_forgotten, 0); /* both nodes host ranks */
	hang_detector__free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rank_never_enters),
		cmocka_unit_test(missing_rank_states),
		cmocka_unit_test(no_false_hangs),
		cmocka_unit_test(every_rank_waits),
		cmocka_unit_test(missing_on_its_nodes_word),
		cmocka_unit_test(desynchronised_rank),
		cmocka_unit_test(bad_input_and_bounds),
		cmocka_unit_test(restarted_job_replaces_idle_communicators),
		cmocka_unit_test(forgets_processes_no_rank_is),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
