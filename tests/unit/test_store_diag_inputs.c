// SPDX-License-Identifier: Apache-2.0
/*
 * The store queries the server's diagnosis reads (thread_times,
 * node_clocks), on both backends: SQLite always, ClickHouse when
 * STRATA_TEST_CLICKHOUSE=http://HOST:PORT is set (run by
 * tests/integration/test_store_clickhouse.sh).  Batches are built by hand:
 * per-thread time breakdown, off-CPU time by reason, scheduler counters,
 * clock error bounds, CUDA API tallies; windows that end exactly on a range
 * edge are counted in one range only (thread_times always; profile and
 * tally with the filter's batch_by_end, which the findings use).
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

#include "server/store.h"
#include "tests/unit/store_test_util.h"

#define NS 1000000000ULL
#define T0 (1709294400ULL * NS)
#define MAXR 32

struct tb {
	Strata__V1__Batch b;
	Strata__V1__Clock clock;
	char *strings[8];
	Strata__V1__Process proc[2], *procp[2];
	Strata__V1__RankLabels rank[2];
	Strata__V1__Stack stk, *stkp;
	Strata__V1__TimeBreakdown tb[MAXR], *tbp[MAXR];
	Strata__V1__OffCpuSample off[MAXR], *offp[MAXR];
	Strata__V1__SchedStat ss[MAXR], *ssp[MAXR];
	Strata__V1__CudaApiTally ta[MAXR], *tap[MAXR];
	uint8_t id[16];
	struct store_stack stacks[1];
	struct store_batch sb;
};

/* A 10 s batch [start, start + 10 s) of node n with ranks 0 and 1 of job
 * "dj"; rank r's main thread (tid = pid) spends (1 + r) s in collectives
 * and 2 s off-CPU on I/O; on-CPU 3 s, runnable 0.5 + 0.25 s; 4 s in 5
 * cudaStreamSynchronize calls. */
static void tb_make(struct tb *t, uint8_t id, const char *node, uint64_t start, uint64_t err_ns)
{
	memset(t, 0, sizeof(*t));
	strata__v1__batch__init(&t->b);
	strata__v1__clock__init(&t->clock);
	t->clock.error_bound_ns = err_ns;
	t->b.clock = &t->clock;
	t->b.version = 1;
	memset(t->id, id, sizeof(t->id));
	t->b.batch_id = (ProtobufCBinaryData){ .len = 16, .data = t->id };
	t->b.node = (char *)node;
	t->b.agent_version = "test";
	t->b.start_ns = start;
	t->b.end_ns = start + 10 * NS;
	t->b.freq_hz = 99;
	t->strings[0] = "";
	t->strings[1] = "trainer";
	t->strings[2] = "dj";
	t->strings[3] = "cudaStreamSynchronize";
	t->b.strings = t->strings;
	t->b.n_strings = 4;
	strata__v1__stack__init(&t->stk);
	t->stkp = &t->stk;
	t->b.stacks = &t->stkp;
	t->b.n_stacks = 1;
	t->stacks[0] = (struct store_stack){ .id = 7 };
	t->b.processes = t->procp;
	t->b.time_breakdown = t->tbp;
	t->b.offcpu_samples = t->offp;
	t->b.sched_stats = t->ssp;
	t->b.cuda_api_tally = t->tap;
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

		size_t i = t->b.n_time_breakdown++;
		strata__v1__time_breakdown__init(&t->tb[i]);
		t->tb[i].process = r;
		t->tb[i].tid = 500 + r;
		t->tb[i].category = STRATA__V1__TIME_BREAKDOWN__CATEGORY__COLLECTIVE;
		t->tb[i].ns = (1 + r) * NS;
		t->tbp[i] = &t->tb[i];
		i = t->b.n_time_breakdown++;
		strata__v1__time_breakdown__init(&t->tb[i]);
		t->tb[i].process = r;
		t->tb[i].tid = 500 + r;
		t->tb[i].category = STRATA__V1__TIME_BREAKDOWN__CATEGORY__CPU;
		t->tb[i].ns = 3 * NS;
		t->tbp[i] = &t->tb[i];

		i = t->b.n_offcpu_samples++;
		strata__v1__off_cpu_sample__init(&t->off[i]);
		t->off[i].process = r;
		t->off[i].tid = 500 + r;
		t->off[i].reason = STRATA__V1__OFF_CPU_SAMPLE__REASON__IO;
		t->off[i].ns = 2 * NS;
		t->off[i].count = 4;
		t->offp[i] = &t->off[i];

		i = t->b.n_sched_stats++;
		strata__v1__sched_stat__init(&t->ss[i]);
		t->ss[i].process = r;
		t->ss[i].tid = 500 + r;
		t->ss[i].on_cpu_ns = 3 * NS;
		t->ss[i].runqueue_latency_ns = NS / 2;
		t->ss[i].runnable_wait_ns = NS / 4;
		t->ssp[i] = &t->ss[i];

		i = t->b.n_cuda_api_tally++;
		strata__v1__cuda_api_tally__init(&t->ta[i]);
		t->ta[i].process = r;
		t->ta[i].fn_str = 3;
		t->ta[i].calls = 5;
		t->ta[i].total_ns = 4 * NS;
		t->ta[i].min_ns = NS / 2;
		t->ta[i].max_ns = NS;
		t->tap[i] = &t->ta[i];
	}
	t->sb = (struct store_batch){ .pb = &t->b, .stacks = t->stacks, .received_ns = start };
}

struct sums {
	uint64_t collective[2], cpu[2], io[2], oncpu[2], runnable[2], rows;
	int bad;
};

static int on_thread(void *ctx, const struct store_thread_time *t)
{
	struct sums *s = ctx;
	uint32_t r = (uint32_t)t->rank;

	s->rows++;
	if (!t->has_rank || r > 1 || strcmp(t->job, "dj") || t->tid != t->pid ||
	    t->pid != 500 + r) {
		s->bad = 1;
		return 0;
	}
	if (t->kind == STORE_THREAD_TIME && t->index == 3) /* STRATA_TIME_COLLECTIVE */
		s->collective[r] += t->ns;
	else if (t->kind == STORE_THREAD_TIME && t->index == 0) /* STRATA_TIME_CPU */
		s->cpu[r] += t->ns;
	else if (t->kind == STORE_THREAD_OFFCPU && t->index == 0) /* io */
		s->io[r] += t->ns;
	else if (t->kind == STORE_THREAD_ONCPU)
		s->oncpu[r] += t->ns;
	else if (t->kind == STORE_THREAD_RUNNABLE)
		s->runnable[r] += t->ns;
	else
		s->bad = 1;
	return 0;
}

/* Sums over rows of the batch-window queries the findings read. */
struct window_sums {
	uint64_t offcpu_ns, sync_ns, sync_calls;
};

static int on_offcpu(void *ctx, const struct store_sample *s)
{
	((struct window_sums *)ctx)->offcpu_ns += s->value;
	return 0;
}

static int on_tally(void *ctx, const struct store_tally *t)
{
	struct window_sums *w = ctx;

	if (!strcmp(t->fn, "cudaStreamSynchronize")) {
		w->sync_ns += t->total_ns;
		w->sync_calls += t->calls;
	}
	return 0;
}

/* The window sums over [from, to) with batches by end (or overlapping). */
static struct window_sums window_sums(struct store *st, uint64_t from, uint64_t to, int by_end)
{
	struct store_filter f = {
		.job = "dj", .from_ns = from, .to_ns = to, .batch_by_end = by_end
	};
	struct window_sums w = { 0 };

	assert_int_equal(st->ops->profile(st, &f, STORE_PROFILE_OFFCPU, on_offcpu, &w), 0);
	assert_int_equal(st->ops->tally(st, &f, on_tally, &w), 0);
	return w;
}

/* Ranges that tile time take each batch once with batch_by_end (shares of
 * the range length are exact); overlap takes the edge batches twice. */
static void check_by_end(struct store *st)
{
	struct window_sums a = window_sums(st, T0 + 5 * NS, T0 + 15 * NS, 1);
	struct window_sums b = window_sums(st, T0 + 15 * NS, T0 + 25 * NS, 1);
	struct window_sums o = window_sums(st, T0 + 5 * NS, T0 + 15 * NS, 0);

	/* [T0+5, T0+15): the batches ending at T0+10 (na's first, nb's), 2 ranks */
	assert_int_equal(a.offcpu_ns, 2 * 2 * 2 * NS);
	assert_int_equal(a.sync_ns, 2 * 2 * 4 * NS);
	assert_int_equal(a.sync_calls, 2 * 2 * 5);
	/* [T0+15, T0+25): na's second batch (ends T0+20) only */
	assert_int_equal(b.offcpu_ns, 2 * 2 * NS);
	assert_int_equal(b.sync_ns, 2 * 4 * NS);
	/* every batch exactly once */
	assert_int_equal(a.sync_calls + b.sync_calls, 3 * 2 * 5);
	/* overlap: all three batches touch [T0+5, T0+15) */
	assert_int_equal(o.sync_ns, 3 * 2 * 4 * NS);
}

struct clocks {
	uint64_t err_a, err_b, batches;
	uint32_t freq;
};

static int on_clock(void *ctx, const struct store_node_clock *c)
{
	struct clocks *k = ctx;

	if (!strcmp(c->node, "na"))
		k->err_a = c->clock_error_ns;
	else if (!strcmp(c->node, "nb"))
		k->err_b = c->clock_error_ns;
	k->batches += c->batches;
	k->freq = c->freq_hz;
	return 0;
}

static void check_store(struct store *st)
{
	static struct tb t; /* large: not on the stack */
	struct sums s = { 0 };
	struct clocks k = { 0 };
	struct store_filter f = { .job = "dj" };

	/* na: [T0, T0+10), [T0+10, T0+20) (error 2 ms then 5 ms); nb: one */
	tb_make(&t, 1, "na", T0, 2000000);
	assert_int_equal(st->ops->ingest(st, &t.sb), 0);
	tb_make(&t, 2, "na", T0 + 10 * NS, 5000000);
	assert_int_equal(st->ops->ingest(st, &t.sb), 0);
	tb_make(&t, 3, "nb", T0, 1000);
	assert_int_equal(st->ops->ingest(st, &t.sb), 0);

	/* everything: 3 batches x 2 ranks */
	assert_int_equal(st->ops->thread_times(st, &f, on_thread, &s), 0);
	assert_false(s.bad);
	assert_int_equal(s.collective[0], 3 * NS);
	assert_int_equal(s.collective[1], 6 * NS);
	assert_int_equal(s.cpu[1], 9 * NS);
	assert_int_equal(s.io[0], 6 * NS);
	assert_int_equal(s.oncpu[1], 9 * NS);
	assert_int_equal(s.runnable[0], 3 * (NS / 2 + NS / 4));

	/* by window end: [T0+10, T0+20) holds the two first batches (end T0+10)
	 * and not the one ending at T0+20 */
	memset(&s, 0, sizeof(s));
	f.from_ns = T0 + 10 * NS;
	f.to_ns = T0 + 20 * NS;
	assert_int_equal(st->ops->thread_times(st, &f, on_thread, &s), 0);
	assert_false(s.bad);
	assert_int_equal(s.collective[0], 2 * NS);
	memset(&s, 0, sizeof(s));
	f.from_ns = T0 + 20 * NS;
	f.to_ns = T0 + 30 * NS;
	assert_int_equal(st->ops->thread_times(st, &f, on_thread, &s), 0);
	assert_int_equal(s.collective[1], 2 * NS);
	assert_int_equal(s.io[1], 2 * NS);

	/* rank and node filters */
	memset(&s, 0, sizeof(s));
	f = (struct store_filter){ .node = "nb", .has_rank = 1, .rank = 1 };
	assert_int_equal(st->ops->thread_times(st, &f, on_thread, &s), 0);
	assert_int_equal(s.collective[0], 0);
	assert_int_equal(s.collective[1], 2 * NS);

	/* clocks: overlap semantics, largest bound per node */
	f = (struct store_filter){ 0 };
	assert_int_equal(st->ops->node_clocks(st, &f, on_clock, &k), 0);
	assert_int_equal(k.err_a, 5000000);
	assert_int_equal(k.err_b, 1000);
	assert_int_equal(k.batches, 3);
	assert_int_equal(k.freq, 99);
	memset(&k, 0, sizeof(k));
	f.to_ns = T0 + 10 * NS;
	assert_int_equal(st->ops->node_clocks(st, &f, on_clock, &k), 0);
	assert_int_equal(k.err_a, 2000000);
	assert_int_equal(k.batches, 2);

	check_by_end(st);
}

static void test_sqlite(void **state)
{
	(void)state;
	check_on_sqlite(check_store);
}

static void test_clickhouse(void **state)
{
	(void)state;
	check_on_clickhouse(check_store, "strata_diagin");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sqlite),
		cmocka_unit_test(test_clickhouse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
