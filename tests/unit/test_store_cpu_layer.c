// SPDX-License-Identifier: Apache-2.0
/*
 * The CPU layer's store round trip: SoftirqVectorStat, ForeignRun
 * and TargetCpu rows in, cpu_times out, on SQLite always and ClickHouse when
 * STRATA_TEST_CLICKHOUSE=http://HOST:PORT is set.  TARGET rows follow the
 * whole filter (job, rank); FOREIGN and SOFTIRQ rows only the time range:
 * a batch whose window ends outside the range is not counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/store.h"
#include "tests/unit/store_test_util.h"

#define NS 1000000000ULL
#define T0 (1709294400ULL * NS)

struct tb {
	Strata__V1__Batch b;
	Strata__V1__Clock clock;
	char *strings[4];
	Strata__V1__Process proc[2], *procp[2];
	Strata__V1__RankLabels rank[2];
	Strata__V1__SoftirqVectorStat sv, *svp;
	Strata__V1__ForeignRun fr[2], *frp[2];
	Strata__V1__TargetCpu tc[3], *tcp[3];
	uint8_t id[16];
	struct store_batch sb;
};

/* A 10 s batch of node "n1": ranks 0 (pid 500, CPU 0 3 s) and 1 (pid 501,
 * CPUs 1 and 2, 2 s each) of job "cj"; "hog" (pid 900) 1 s on CPU 1,
 * "other" (901) 4 s on CPU 5; NET_RX 0.5 s on CPU 1. */
static void tb_make(struct tb *t, uint8_t id, uint64_t start)
{
	memset(t, 0, sizeof(*t));
	strata__v1__batch__init(&t->b);
	strata__v1__clock__init(&t->clock);
	t->b.clock = &t->clock;
	t->b.version = 1;
	memset(t->id, id, sizeof(t->id));
	t->b.batch_id = (ProtobufCBinaryData){ .len = 16, .data = t->id };
	t->b.node = "n1";
	t->b.agent_version = "test";
	t->b.start_ns = start;
	t->b.end_ns = start + 10 * NS;
	t->b.freq_hz = 99;
	t->strings[0] = "";
	t->strings[1] = "trainer";
	t->strings[2] = "cj";
	t->strings[3] = "hog";
	t->b.strings = t->strings;
	t->b.n_strings = 4;
	t->b.processes = t->procp;
	for (uint32_t r = 0; r < 2; r++) {
		Strata__V1__Process *p = &t->proc[r];

		strata__v1__process__init(p);
		strata__v1__rank_labels__init(&t->rank[r]);
		p->pid = 500 + r;
		p->start_time_ns = 1;
		p->comm_str = 1;
		p->job_str = 2;
		t->rank[r].rank = (int32_t)r;
		t->rank[r].world_size = 2;
		p->rank = &t->rank[r];
		t->procp[t->b.n_processes++] = p;
	}
	strata__v1__softirq_vector_stat__init(&t->sv);
	t->sv = (Strata__V1__SoftirqVectorStat){
		.base = t->sv.base, .cpu = 1, .vector = 3, .ns = NS / 2
	};
	t->svp = &t->sv;
	t->b.softirq_vectors = &t->svp;
	t->b.n_softirq_vectors = 1;
	for (int i = 0; i < 2; i++) {
		strata__v1__foreign_run__init(&t->fr[i]);
		t->fr[i].cpu = i ? 5 : 1;
		t->fr[i].pid = 900 + (uint32_t)i;
		t->fr[i].comm_str = i ? 1 : 3;
		t->fr[i].ns = i ? 4 * NS : NS;
		t->frp[i] = &t->fr[i];
	}
	t->b.foreign_runs = t->frp;
	t->b.n_foreign_runs = 2;
	for (int i = 0; i < 3; i++) {
		strata__v1__target_cpu__init(&t->tc[i]);
		t->tc[i].process = i ? 1 : 0;
		t->tc[i].cpu = (uint32_t)i;
		t->tc[i].ns = i ? 2 * NS : 3 * NS;
		t->tcp[i] = &t->tc[i];
	}
	t->b.target_cpus = t->tcp;
	t->b.n_target_cpus = 3;
	t->sb = (struct store_batch){ .pb = &t->b, .received_ns = start };
}

struct seen {
	uint64_t target[2][3]; /* [rank][cpu] */
	uint64_t hog_cpu1, other_cpu5, netrx_cpu1;
	int bad, n;
};

static int on_cpu(void *ctx, const struct store_cpu_time *c)
{
	struct seen *s = ctx;

	s->n++;
	if (strcmp(c->node, "n1"))
		s->bad++;
	else if (c->kind == STORE_CPU_TARGET && c->has_rank && c->rank >= 0 && c->rank < 2 &&
		 c->cpu < 3 && c->pid == 500 + (uint32_t)c->rank && !strcmp(c->job, "cj"))
		s->target[c->rank][c->cpu] += c->ns;
	else if (c->kind == STORE_CPU_FOREIGN && c->cpu == 1 && c->pid == 900 &&
		 !strcmp(c->comm, "hog"))
		s->hog_cpu1 += c->ns;
	else if (c->kind == STORE_CPU_FOREIGN && c->cpu == 5 && c->pid == 901)
		s->other_cpu5 += c->ns;
	else if (c->kind == STORE_CPU_SOFTIRQ && c->cpu == 1 && c->vector == 3)
		s->netrx_cpu1 += c->ns;
	else
		s->bad++;
	return 0;
}

static void check_store(struct store *st)
{
	struct tb *t = calloc(3, sizeof(*t));
	struct store_filter f = { .job = "cj", .from_ns = T0 + 11 * NS, .to_ns = T0 + 20 * NS + 1 };
	struct seen s = { 0 };

	assert_non_null(t);
	/* windows ending at T0+10 (before the range), T0+20 and T0+15 */
	tb_make(&t[0], 1, T0);
	tb_make(&t[1], 2, T0 + 10 * NS);
	tb_make(&t[2], 3, T0 + 5 * NS);
	for (int i = 0; i < 3; i++)
		assert_int_equal(st->ops->ingest(st, &t[i].sb), 0);
	assert_int_equal(st->ops->cpu_times(st, &f, on_cpu, &s), 0);
	assert_int_equal(s.bad, 0);
	/* batches 2 (end T0+20) and 3 (end T0+15) */
	assert_int_equal(s.target[0][0], 6 * NS);
	assert_int_equal(s.target[1][1], 4 * NS);
	assert_int_equal(s.target[1][2], 4 * NS);
	assert_int_equal(s.target[0][1], 0);
	assert_int_equal(s.hog_cpu1, 2 * NS);
	assert_int_equal(s.other_cpu5, 8 * NS);
	assert_int_equal(s.netrx_cpu1, NS);

	/* a rank filter keeps that rank's TARGET rows and every node row */
	memset(&s, 0, sizeof(s));
	f.has_rank = 1;
	f.rank = 1;
	assert_int_equal(st->ops->cpu_times(st, &f, on_cpu, &s), 0);
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.target[0][0], 0);
	assert_int_equal(s.target[1][1], 4 * NS);
	assert_int_equal(s.hog_cpu1, 2 * NS);
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
	check_on_clickhouse(check_store, "strata_cpulayer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sqlite),
		cmocka_unit_test(test_clickhouse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
