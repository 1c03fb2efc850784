// SPDX-License-Identifier: Apache-2.0
/*
 * Recovered communicators through strata-server's live path
 * (server/diag_live.c + diagnose/comm_align.c): a 4-rank job on two nodes
 * whose agents read each rank's communicator from memory (NcclComm
 * .recovered: one hash per process, each rank counting from its own first
 * collective).  The server matches the ranks by their streams and the
 * straggler detector confirms rank 2 (late at every collective); the
 * metrics say 4 streams aligned.  The same job with node 1's clock half a
 * period off cannot be aligned: nothing is judged, its calls count as
 * unaligned and the attempts as ambiguous.  In-flight calls (the hang
 * detector's input) are placed on the aligned group, and never on an
 * unaligned one whatever rank they carry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/diag_live.h"

#define MS 1000000LL
#define S (1000 * MS)
#define T0 (1709294400LL * S)
#define PERIOD (60 * MS)
#define PER_BATCH 160 /* collectives per node batch (~10 s) */

struct nb {
	Strata__V1__Batch b;
	char *strings[3];
	Strata__V1__Process proc[2], *procp[2];
	Strata__V1__NcclComm comm[2], *commp[2];
	Strata__V1__NcclCollective c[2 * PER_BATCH], *cp[2 * PER_BATCH];
	Strata__V1__InflightCall in[2], *inp[2];
};

/* Ranks 2n and 2n + 1 on node n; rank r counts from collective first[r]. */
static const int64_t first[4] = { 7, 0, 31, 12 };

static void nb_make(struct nb *t, int n, int64_t from, int64_t skew)
{
	static char *const strs[] = { "", "rj", "AllReduce" };

	memset(t, 0, sizeof(*t));
	strata__v1__batch__init(&t->b);
	t->b.node = n ? "rn1" : "rn0";
	memcpy(t->strings, strs, sizeof(strs));
	t->b.strings = t->strings;
	t->b.n_strings = 3;
	t->b.processes = t->procp;
	t->b.nccl_comms = t->commp;
	t->b.nccl_collectives = t->cp;
	t->b.inflight_calls = t->inp;
	t->b.end_ns = (uint64_t)(T0 + (from + PER_BATCH) * PERIOD + S);
	for (uint32_t p = 0; p < 2; p++) {
		int r = 2 * n + (int)p;

		strata__v1__process__init(&t->proc[p]);
		t->proc[p].pid = 700 + (uint32_t)r;
		t->proc[p].job_str = 1;
		t->procp[t->b.n_processes++] = &t->proc[p];
		strata__v1__nccl_comm__init(&t->comm[p]);
		t->comm[p].comm_hash = 0x5ec0000000000000ULL | (uint64_t)(r + 1) * 0x10001;
		t->comm[p].process = p;
		t->comm[p].rank = r;
		t->comm[p].nranks = 4;
		t->comm[p].recovered = 1;
		t->commp[t->b.n_nccl_comms++] = &t->comm[p];
		for (int64_t k = from; k < from + PER_BATCH; k++) {
			size_t i = t->b.n_nccl_collectives++;
			int64_t exit = T0 + k * PERIOD + (k * 7919 + r * 104729) % (MS / 2) + skew;

			strata__v1__nccl_collective__init(&t->c[i]);
			t->c[i].process = p;
			t->c[i].tid = t->proc[p].pid;
			t->c[i].comm_hash = t->comm[p].comm_hash;
			t->c[i].seq = (uint64_t)(k - first[r]);
			t->c[i].op_str = 2;
			t->c[i].bytes = 4096;
			/* rank 2 enters 40 ms late, the others wait; all leave together */
			t->c[i].entry_ns = (uint64_t)(exit - (r == 2 ? 5 : 45) * MS);
			t->c[i].exit_ns = (uint64_t)exit;
			t->c[i].peer = -1;
			t->cp[i] = &t->c[i];
		}
	}
}

/* Then every rank but 2 enters collective `at` and waits 10 s: in flight,
 * with the rank the agent read (as the agents' in-flight rows carry it). */
static void nb_hang(struct nb *t, int n, int64_t at, int64_t skew)
{
	nb_make(t, n, at, skew);
	t->b.n_nccl_collectives = 0;
	t->b.end_ns = (uint64_t)(T0 + at * PERIOD + 10 * S + skew);
	for (uint32_t p = 0; p < 2; p++) {
		int r = 2 * n + (int)p;
		Strata__V1__InflightCall *c = &t->in[t->b.n_inflight_calls];

		if (r == 2)
			continue;
		strata__v1__inflight_call__init(c);
		c->process = p;
		c->tid = t->proc[p].pid;
		c->api_str = 2;
		c->entry_ns = (uint64_t)(T0 + at * PERIOD + skew);
		c->comm_hash = t->comm[p].comm_hash;
		c->seq = (uint64_t)(at - first[r]);
		c->bytes = 4096;
		c->rank = r;
		c->nranks = 4;
		t->inp[t->b.n_inflight_calls++] = c;
	}
}

static size_t run(int64_t skew, struct diag_live_stats *st, struct straggler_rank *out,
		  size_t *hangs, struct hang_report *h)
{
	struct diag_live *l = diag_live__new(NULL);
	struct nb *t = calloc(1, sizeof(*t));
	size_t n;

	assert_non_null(l);
	assert_non_null(t);
	for (int64_t from = 40; from < 40 + 4 * PER_BATCH; from += PER_BATCH)
		for (int node = 0; node < 2; node++) {
			nb_make(t, node, from, node ? skew : 0);
			assert_int_equal(diag_live__batch(l, &t->b, (uint64_t)(T0 + from * PERIOD)),
					 0);
		}
	n = diag_live__stragglers(l, "rj", 1, out, 4);
	for (int node = 0; node < 2; node++) {
		nb_hang(t, node, 40 + 4 * PER_BATCH, node ? skew : 0);
		assert_int_equal(diag_live__batch(l, &t->b, t->b.end_ns), 0);
	}
	*hangs = diag_live__hangs(l, "rj", h, 1);
	diag_live__stats(l, st);
	free(t);
	diag_live__free(l);
	return n;
}

static void recovered_ranks_are_aligned_and_judged(void **state)
{
	struct hang_report *h = calloc(1, sizeof(*h));
	struct straggler_rank out[4];
	struct diag_live_stats st;
	size_t hangs;

	assert_non_null(h);
	assert_int_equal(run(0, &st, out, &hangs, h), 1);
	assert_int_equal(out[0].rank, 2);
	assert_int_equal(out[0].pid, 702);
	assert_string_equal(out[0].node, "rn1");
	assert_int_equal(st.align.streams_aligned, 4);
	assert_int_equal(st.align.groups_aligned, 1);
	assert_int_equal(st.align.calls_lost, 0);
	assert_int_equal(st.events_no_rank, 0);
	/* the first batches are held until both nodes have sent theirs */
	assert_int_equal(st.events_unaligned, 4 * PER_BATCH);
	assert_int_equal(st.align.calls_released, 4 * PER_BATCH);
	/* the hang detector places the in-flight calls on the group too */
	assert_int_equal(hangs, 1);
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 2);
	assert_int_equal(h->nwaiting, 3);
	free(h);
}

static void half_a_period_of_skew_is_not_guessed(void **state)
{
	struct hang_report *h = calloc(1, sizeof(*h));
	struct straggler_rank out[4];
	struct diag_live_stats st;
	size_t hangs;

	assert_non_null(h);
	assert_int_equal(run(PERIOD / 2, &st, out, &hangs, h), 0);
	assert_int_equal(hangs, 0); /* per-process communicators: not one of 4 ranks each */
	assert_int_equal(st.align.groups_aligned, 0);
	assert_true(st.align.attempts[COMM_ALIGN_AMBIGUOUS] > 0);
	assert_int_equal(st.events, 0);
	assert_int_equal(st.events_unaligned, 4 * 4 * PER_BATCH);
	assert_true(st.align.calls_lost > 0); /* beyond 512 held per stream */
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(recovered_ranks_are_aligned_and_judged),
		cmocka_unit_test(half_a_period_of_skew_is_not_guessed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
