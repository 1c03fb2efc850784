// SPDX-License-Identifier: Apache-2.0
/*
 * Collective health through the store, on both backends (SQLite always,
 * ClickHouse with STRATA_TEST_CLICKHOUSE): two nodes' batches of NCCL
 * calls (4 ranks of one communicator, 2 per node; an 8 MiB allreduce whose
 * rank 3 enters 25 ms late, an on-time 1 KiB broadcast, one allreduce
 * that straddles the window's end) -> server/diag_collstats.c -> the
 * server's own batch -> GET-side query.  Every sum equals what the test
 * computes from the same times; storing a window twice counts it once;
 * the range and job filters hold; the server's batch is no node.  A hang
 * record (server/diag_hang.c) decided then ended reads back by range.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/diag_collstats.h"
#include "server/diag_hang.h"
#include "server/store.h"
#include "tests/unit/store_test_util.h"

#define NS 1000000000ULL
#define MS 1000000ULL
#define US 1000ULL
#define T0 (1709294400ULL * NS)
#define NAR 20 /* allreduces in window 0 (besides the straddling one) */
#define NBC 10
#define MAXE 256
#define COMM 0xc0ffee00c0ffeeULL

/* Rank r's entry and exit of allreduce k and broadcast k (ns). */
static uint64_t ar_t(int k)
{
	return T0 + 100 * MS + (uint64_t)k * 400 * MS;
}
static const uint64_t AR_ENTRY[4] = { 0, 2 * MS, 1 * MS, 25 * MS };
static uint64_t ar_exit(int r)
{
	return 31 * MS + (uint64_t)r * 100 * US;
}
static uint64_t bc_t(int k)
{
	return T0 + 300 * MS + (uint64_t)k * 400 * MS;
}

struct nb { /* one node's batch: ranks 2n and 2n + 1 */
	Strata__V1__Batch b;
	char *strings[8];
	Strata__V1__Process proc[2], *procp[2];
	Strata__V1__RankLabels rank[2];
	Strata__V1__NcclComm comm[2], *commp[2];
	Strata__V1__NcclCollective c[MAXE], *cp[MAXE];
	Strata__V1__Stack stk, *stkp;
	struct store_stack stacks[1];
	uint8_t id[16];
	struct store_batch sb;
};

static void add_call(struct nb *t, uint32_t p, uint64_t seq, uint32_t op, uint64_t bytes,
		     uint64_t entry, uint64_t exit)
{
	size_t i = t->b.n_nccl_collectives++;

	assert_true(i < MAXE);
	strata__v1__nccl_collective__init(&t->c[i]);
	t->c[i].process = p;
	t->c[i].tid = t->proc[p].pid;
	t->c[i].comm_hash = COMM;
	t->c[i].seq = seq;
	t->c[i].op_str = op;
	t->c[i].dtype_str = 5;
	t->c[i].bytes = bytes;
	t->c[i].entry_ns = entry;
	t->c[i].exit_ns = exit;
	t->c[i].peer = -1;
	t->cp[i] = &t->c[i];
}

static void nb_make(struct nb *t, int n)
{
	memset(t, 0, sizeof(*t));
	strata__v1__batch__init(&t->b);
	t->b.version = 1;
	memset(t->id, 0x40 + n, sizeof(t->id));
	t->b.batch_id = (ProtobufCBinaryData){ .len = 16, .data = t->id };
	t->b.node = n ? "node-b" : "node-a";
	t->b.agent_version = "test";
	t->b.start_ns = T0;
	t->b.end_ns = T0 + 11 * NS;
	t->strings[0] = "";
	t->strings[1] = "trainer";
	t->strings[2] = "cj";
	t->strings[3] = "AllReduce";
	t->strings[4] = "Broadcast";
	t->strings[5] = "float32";
	t->strings[6] = "Send";
	t->b.strings = t->strings;
	t->b.n_strings = 7;
	strata__v1__stack__init(&t->stk);
	t->stkp = &t->stk;
	t->b.stacks = &t->stkp;
	t->b.n_stacks = 1;
	t->stacks[0] = (struct store_stack){ .id = 9 };
	t->b.processes = t->procp;
	t->b.nccl_comms = t->commp;
	t->b.nccl_collectives = t->cp;
	for (uint32_t p = 0; p < 2; p++) {
		int r = 2 * n + (int)p;

		strata__v1__process__init(&t->proc[p]);
		strata__v1__rank_labels__init(&t->rank[p]);
		t->proc[p].pid = 700 + (uint32_t)r;
		t->proc[p].start_time_ns = 1;
		t->proc[p].comm_str = 1;
		t->proc[p].job_str = 2;
		t->rank[p].rank = r;
		t->rank[p].world_size = 4;
		t->proc[p].rank = &t->rank[p];
		t->procp[t->b.n_processes++] = &t->proc[p];
		strata__v1__nccl_comm__init(&t->comm[p]);
		t->comm[p].comm_hash = COMM;
		t->comm[p].process = p;
		t->comm[p].rank = r;
		t->comm[p].nranks = 4;
		t->commp[t->b.n_nccl_comms++] = &t->comm[p];
		for (int k = 0; k < NAR; k++)
			add_call(t, p, (uint64_t)(2 * k), 3, 8 << 20, ar_t(k) + AR_ENTRY[r],
				 ar_t(k) + ar_exit(r));
		for (int k = 0; k < NBC; k++)
			add_call(t, p, (uint64_t)(2 * k + 1), 4, 1024,
				 bc_t(k) + (uint64_t)r * 50 * US, bc_t(k) + 400 * US);
		/* straddles the window's end: rank 3 enters after it */
		add_call(t, p, 2 * NAR, 3, 8 << 20, T0 + 9990 * MS + AR_ENTRY[r],
			 T0 + 9990 * MS + ar_exit(r));
		/* point-to-point calls are not collectives */
		add_call(t, p, 0, 6, 4096, T0 + 5 * NS, T0 + 5 * NS + MS);
	}
	t->sb = (struct store_batch){ .pb = &t->b,
				      .stacks = t->stacks,
				      .received_ns = T0 + 11 * NS };
}

struct want {
	uint64_t occ, observed, stall, slack, bytes, observed_max;
};

/* What the rows must hold, from the same times: per collective the means
 * over the 4 ranks (exact in ns here). */
static void expected(struct want *ar, struct want *bc)
{
	memset(ar, 0, sizeof(*ar));
	memset(bc, 0, sizeof(*bc));
	for (int k = 0; k <= NAR; k++) { /* k == NAR: the straddling one */
		uint64_t last_entry = 0, last_exit = 0, in_call = 0, slack = 0;

		for (int r = 0; r < 4; r++) {
			last_entry = AR_ENTRY[r] > last_entry ? AR_ENTRY[r] : last_entry;
			last_exit = ar_exit(r) > last_exit ? ar_exit(r) : last_exit;
			in_call += ar_exit(r) - AR_ENTRY[r];
		}
		for (int r = 0; r < 4; r++)
			slack += last_entry - AR_ENTRY[r];
		ar->occ++;
		ar->observed += last_exit; /* the first entry is at 0 */
		ar->stall += in_call / 4;
		ar->slack += slack / 4;
		ar->bytes += 8 << 20;
		ar->observed_max = last_exit;
	}
	for (int k = 0; k < NBC; k++) {
		bc->occ++;
		bc->observed += 400 * US;
		bc->stall += (400 + 350 + 300 + 250) * US / 4;
		bc->slack += (150 + 100 + 50 + 0) * US / 4;
		bc->bytes += 1024;
		bc->observed_max = 400 * US;
	}
}

struct got {
	struct store_collstat r[8];
	char op[8][24], job[8][16];
	size_t n;
};

static int on_row(void *ctx, const struct store_collstat *c)
{
	struct got *g = ctx;

	if (g->n < 8) {
		g->r[g->n] = *c;
		snprintf(g->op[g->n], sizeof(g->op[0]), "%s", c->op);
		snprintf(g->job[g->n], sizeof(g->job[0]), "%s", c->job);
	}
	g->n++;
	return 0;
}

static int on_node(void *ctx, const struct store_node *n)
{
	if (!strcmp(n->node, STORE_SERVER_NODE))
		++*(int *)ctx;
	return 0;
}

static void check_row(const struct got *g, size_t i, const char *op, uint64_t cls,
		      const struct want *w)
{
	assert_string_equal(g->op[i], op);
	assert_string_equal(g->job[i], "cj");
	assert_int_equal(g->r[i].comm_hash, COMM);
	assert_int_equal(g->r[i].size_class, cls);
	assert_int_equal(g->r[i].nranks, 4);
	assert_int_equal(g->r[i].windows, 1);
	assert_int_equal(g->r[i].occurrences, w->occ);
	assert_int_equal(g->r[i].observed_ns, w->observed);
	assert_int_equal(g->r[i].stall_ns, w->stall);
	assert_int_equal(g->r[i].slack_ns, w->slack);
	assert_int_equal(g->r[i].bytes, w->bytes);
	assert_int_equal(g->r[i].observed_max_ns, w->observed_max);
	assert_int_equal(g->r[i].first_ns, T0);
	assert_int_equal(g->r[i].last_ns, T0 + 10 * NS);
}

struct hangs_seen {
	size_t n, ended;
	int bad;
};

static int on_hang(void *ctx, const struct store_hang *h)
{
	struct hangs_seen *s = ctx;

	s->n++;
	s->ended += h->until_ns != 0;
	if (strcmp(h->job, "cj") || strcmp(h->kind, "missing") || h->seq != 77 ||
	    strcmp(h->op, "AllReduce") || h->missing != 1 || h->waiting != 3 ||
	    !strstr(h->report, "\"seq\":77"))
		s->bad = 1;
	return 0;
}

/* A hang record, decided then ended, through the store's hangs query. */
static void check_hangs(struct store *st)
{
	struct hang_report h = { .kind = HANG_MISSING,
				 .comm_hash = COMM,
				 .seq = 77,
				 .bytes = 4096,
				 .nranks = 4,
				 .since_ns = (int64_t)(T0 + 3 * NS),
				 .decided_ns = (int64_t)(T0 + 9 * NS),
				 .as_of_ns = (int64_t)(T0 + 9 * NS),
				 .nwaiting = 3,
				 .nmissing = 1 };
	struct hangs_seen s = { 0 };

	snprintf(h.job, sizeof(h.job), "cj");
	snprintf(h.op, sizeof(h.op), "AllReduce");
	assert_int_equal(diag_hang__store(st, &h, T0), 0);
	assert_int_equal(diag_hang__store(st, &h, T0), 0); /* once */
	h.until_ns = (int64_t)(T0 + 30 * NS);
	assert_int_equal(diag_hang__store(st, &h, T0), 0);
	assert_int_equal(st->ops->hangs(st,
					&(struct store_filter){ .job = "cj",
								.from_ns = T0 + 20 * NS,
								.to_ns = T0 + 40 * NS },
					on_hang, &s),
			 0);
	assert_int_equal(s.bad, 0);
	/* both records of the episode: the first, written while it went on,
	 * may reach any later range; its end is the other */
	assert_int_equal(s.n, 2);
	assert_int_equal(s.ended, 1);
	memset(&s, 0, sizeof(s));
	assert_int_equal(st->ops->hangs(st, &(struct store_filter){ .job = "cj" }, on_hang, &s), 0);
	assert_int_equal(s.n, 2);
	memset(&s, 0, sizeof(s));
	assert_int_equal(
		st->ops->hangs(st, &(struct store_filter){ .to_ns = T0 + 5 * NS }, on_hang, &s), 0);
	assert_int_equal(s.n, 0);
}

static void check_store(struct store *st)
{
	struct nb *t = calloc(2, sizeof(*t));
	struct collstat_row rows[8];
	struct diag_collstats_counts k = { 0 };
	struct want ar, bc;
	struct got g = { 0 };
	int n, server_nodes = 0;

	assert_non_null(t);
	for (int i = 0; i < 2; i++) {
		nb_make(&t[i], i);
		assert_int_equal(st->ops->ingest(st, &t[i].sb), 0);
	}
	/* window 0 [T0, T0 + 10 s): read with a 10 s margin */
	n = diag_collstats__window(st, "cj", T0, T0 + 10 * NS, 10 * NS, rows, 8, &k);
	assert_int_equal(n, 2);
	assert_int_equal(k.c.collectives, NAR + 1 + NBC);
	assert_int_equal(k.c.partial + k.c.duplicates + k.c.no_exit + k.no_communicator, 0);
	assert_int_equal(diag_collstats__store(st, "cj", T0, T0 + 10 * NS, rows, (size_t)n, T0), 0);
	/* judged again (a restart): the same batch, stored once */
	assert_int_equal(diag_collstats__store(st, "cj", T0, T0 + 10 * NS, rows, (size_t)n, T0), 0);
	/* window 1: the straddling allreduce is window 0's */
	memset(&k, 0, sizeof(k));
	n = diag_collstats__window(st, "cj", T0 + 10 * NS, T0 + 20 * NS, 10 * NS, rows, 8, &k);
	assert_int_equal(n, 0);
	assert_int_equal(k.c.collectives, 0);

	expected(&ar, &bc);
	assert_int_equal(
		st->ops->collective_stats(st, &(struct store_filter){ .job = "cj" }, on_row, &g),
		0);
	assert_int_equal(g.n, 2);
	check_row(&g, 0, "AllReduce", 8 << 20, &ar); /* the larger aggregated stall first */
	check_row(&g, 1, "Broadcast", 1024, &bc);
	/* by hand: the allreduce's mean stall is (31 + 29.1 + 30.2 + 6.3) / 4
	 * = 24.15 ms, its slack (25 + 23 + 24 + 0) / 4 = 18 ms */
	assert_int_equal(ar.stall, 21 * 24150 * US);
	assert_int_equal(ar.slack, 21 * 18 * MS);
	assert_int_equal(ar.observed, 21 * 31300 * US);

	/* filters: another job, a range before the window */
	g.n = 0;
	assert_int_equal(
		st->ops->collective_stats(st, &(struct store_filter){ .job = "other" }, on_row, &g),
		0);
	assert_int_equal(g.n, 0);
	assert_int_equal(st->ops->collective_stats(
				 st, &(struct store_filter){ .from_ns = T0 - 20 * NS, .to_ns = T0 },
				 on_row, &g),
			 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(st->ops->collective_stats(st,
						   &(struct store_filter){ .from_ns = T0 + 5 * NS,
									   .to_ns = T0 + 6 * NS },
						   on_row, &g),
			 0);
	assert_int_equal(g.n, 2);
	/* the server's own batches are not a node */
	assert_int_equal(st->ops->nodes(st, &(struct store_filter){ 0 }, on_node, &server_nodes),
			 0);
	assert_int_equal(server_nodes, 0);
	check_hangs(st);
	free(t);
}

static void test_sqlite(void **state)
{
	(void)state;
	check_on_sqlite(check_store);
}

static void test_clickhouse(void **state)
{
	(void)state;
	check_on_clickhouse(check_store, "strata_collstats");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sqlite),
		cmocka_unit_test(test_clickhouse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
