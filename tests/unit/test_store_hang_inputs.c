// SPDX-License-Identifier: Apache-2.0
/*
 * What a replica's hang detection reads back from the store
 * (server/diag_shared_hang.h): calls in flight (their batch's end as the
 * end of their duration, the call's own rank), thread states (state, wait
 * channel, system call, kernel stack, at their batch's end), exits, and
 * each process's latest collective per communicator; filtered by job and
 * by their batch's end.  SQLite always; ClickHouse with
 * STRATA_TEST_CLICKHOUSE (test_store_clickhouse.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/store.h"
#include "tests/unit/store_test_batch.h"
#include "tests/unit/store_test_util.h"

#define T0 (1709294400ULL * NS) /* 2024-03-01 12:00:00 UTC */
#define COMM 0xc0ffee0012345678ULL
#define MAXR 32

struct row {
	uint32_t kind, pid;
	char node[32], name[32], detail[32];
	uint64_t start, dur, comm, seq, bytes;
	int32_t rank, nranks, ret;
	uint32_t nframes;
	char frame0[32];
};

struct rows {
	struct row v[MAXR];
	size_t n;
};

static int on_row(void *ctx, const struct store_event *e)
{
	struct rows *r = ctx;
	struct row *w;

	assert_true(r->n < MAXR);
	w = &r->v[r->n++];
	*w = (struct row){ .kind = e->kind,
			   .pid = e->pid,
			   .start = e->start_ns,
			   .dur = e->dur_ns,
			   .comm = e->comm_hash,
			   .seq = e->seq,
			   .bytes = e->bytes,
			   .rank = e->comm_rank,
			   .nranks = e->comm_nranks,
			   .ret = e->ret };
	snprintf(w->node, sizeof(w->node), "%s", e->node);
	snprintf(w->name, sizeof(w->name), "%s", e->name ? e->name : "");
	snprintf(w->detail, sizeof(w->detail), "%s", e->detail ? e->detail : "");
	if (e->stack) {
		w->nframes = e->stack->nframes;
		if (e->stack->nframes && e->stack->frames[0].func)
			snprintf(w->frame0, sizeof(w->frame0), "%s", e->stack->frames[0].func);
	}
	return 0;
}

static struct rows *query(struct store *st, const char *job, uint64_t from, uint32_t kinds)
{
	static struct rows r;
	struct store_filter f = { .job = job, .from_ns = from };
	int truncated = 0;

	memset(&r, 0, sizeof(r));
	assert_int_equal(st->ops->events(st, &f, kinds, 0, &truncated, on_row, &r), 0);
	assert_false(truncated);
	return &r;
}

static const struct row *find(const struct rows *r, uint32_t kind, const char *name)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].kind == kind && !strcmp(r->v[i].name, name))
			return &r->v[i];
	return NULL;
}

/* Batch 1 (node-h, [T0, T0+10 s)): rank 0 of job jh completes
 * all-reduces 1-3, is in all-reduce 4 since T0+5 s and its thread sleeps
 * in a pipe read (stack B); a process of job other is in all-reduce 9.
 * Batch 2 ([T0+10 s, T0+20 s)): the rank is in cudaStreamSynchronize and
 * exits at T0+15 s. */
static void ingest(struct store *st)
{
	static Strata__V1__InflightCall in[3], *inp[3];
	static Strata__V1__ThreadState ts, *tsp;
	struct tb t;
	uint32_t p, q;

	tb_init(&t, 1, "node-h", T0);
	p = tb_proc(&t, 100, "jh", 0);
	q = tb_proc(&t, 300, "other", 0);
	for (uint32_t i = 0; i < 2; i++) {
		strata__v1__nccl_comm__init(&t.comm[i]);
		t.comm[i].process = i ? q : p;
		t.comm[i].comm_hash = COMM;
		t.comm[i].rank = 0;
		t.comm[i].nranks = 2;
		t.comm[i].init_ns = T0 - NS;
		t.commp[i] = &t.comm[i];
	}
	t.b.n_nccl_comms = 2;
	for (uint32_t k = 0; k < 3; k++) {
		Strata__V1__NcclCollective *c = &t.coll[k];

		strata__v1__nccl_collective__init(c);
		c->process = p;
		c->tid = 100;
		c->comm_hash = COMM;
		c->seq = k + 1;
		c->op_str = tb_str(&t, k == 2 ? "Broadcast" : "AllReduce");
		c->dtype_str = tb_str(&t, "float32");
		c->bytes = 1024 * (k + 1);
		c->entry_ns = T0 + k * NS;
		c->exit_ns = T0 + k * NS + 1000;
		c->peer = -1;
		t.collp[k] = c;
	}
	t.b.n_nccl_collectives = 3;
	for (uint32_t i = 0; i < 2; i++) {
		strata__v1__inflight_call__init(&in[i]);
		in[i].process = i ? q : p;
		in[i].tid = i ? 300 : 100;
		in[i].api_str = tb_str(&t, "AllReduce");
		in[i].entry_ns = T0 + 5 * NS;
		in[i].comm_hash = COMM;
		in[i].seq = i ? 9 : 4;
		in[i].bytes = 4096;
		in[i].rank = 0;
		in[i].nranks = 2;
		inp[i] = &in[i];
	}
	t.b.inflight_calls = inp;
	t.b.n_inflight_calls = 2;
	strata__v1__thread_state__init(&ts);
	ts.process = p;
	ts.tid = 100;
	ts.state_str = tb_str(&t, "S");
	ts.wchan_str = tb_str(&t, "pipe_read");
	ts.stack = 2;
	ts.syscall = 0;
	ts.in_syscall = 1;
	tsp = &ts;
	t.b.thread_states = &tsp;
	t.b.n_thread_states = 1;
	assert_int_equal(st->ops->ingest(st, &t.sb), 0);

	tb_init(&t, 2, "node-h", T0 + 10 * NS);
	p = tb_proc(&t, 100, "jh", 0);
	t.proc[p].exit_ns = T0 + 15 * NS;
	strata__v1__inflight_call__init(&in[2]);
	in[2].process = p;
	in[2].tid = 100;
	in[2].api_str = tb_str(&t, "cudaStreamSynchronize");
	in[2].entry_ns = T0 + 12 * NS;
	in[2].rank = -1;
	in[2].nranks = 0;
	inp[2] = &in[2];
	t.b.inflight_calls = &inp[2];
	t.b.n_inflight_calls = 1;
	assert_int_equal(st->ops->ingest(st, &t.sb), 0);
}

static void check_store(struct store *st)
{
	const uint32_t hang =
		STORE_EVENT_INFLIGHT | STORE_EVENT_THREAD | STORE_EVENT_EXIT | STORE_EVENT_STACKS;
	const struct rows *r;
	const struct row *w;

	ingest(st);
	r = query(st, "jh", T0, hang);
	assert_int_equal(r->n, 4); /* two calls in flight, a thread, an exit */
	w = find(r, STORE_EVENT_INFLIGHT, "AllReduce");
	assert_non_null(w);
	assert_string_equal(w->node, "node-h");
	assert_int_equal(w->pid, 100);
	assert_int_equal(w->start, T0 + 5 * NS);
	assert_int_equal(w->dur, 5 * NS); /* listed by the batch ending at T0+10 s */
	assert_int_equal(w->comm, COMM);
	assert_int_equal(w->seq, 4);
	assert_int_equal(w->bytes, 4096);
	assert_int_equal(w->rank, 0);
	assert_int_equal(w->nranks, 2);
	w = find(r, STORE_EVENT_INFLIGHT, "cudaStreamSynchronize");
	assert_non_null(w);
	assert_int_equal(w->comm, 0);
	assert_int_equal(w->start + w->dur, T0 + 20 * NS);
	w = find(r, STORE_EVENT_THREAD, "S");
	assert_non_null(w);
	assert_int_equal(w->start, T0 + 10 * NS);
	assert_string_equal(w->detail, "pipe_read");
	assert_int_equal(w->ret, 0); /* in read(2) */
	assert_int_equal(w->nframes, 2);
	assert_string_equal(w->frame0, "train_loop");
	w = find(r, STORE_EVENT_EXIT, "exit");
	assert_non_null(w);
	assert_int_equal(w->pid, 100);
	assert_int_equal(w->start, T0 + 15 * NS);

	/* by their batch's end: from T0+10.5 s only the second batch's */
	r = query(st, "jh", T0 + 10 * NS + NS / 2, STORE_EVENT_INFLIGHT | STORE_EVENT_THREAD);
	assert_int_equal(r->n, 1);
	assert_string_equal(r->v[0].name, "cudaStreamSynchronize");

	/* the other job's call is its own */
	r = query(st, "other", T0, hang);
	assert_int_equal(r->n, 1);
	assert_int_equal(r->v[0].seq, 9);

	/* the last collective of each process and communicator */
	r = query(st, "jh", T0, STORE_EVENT_LAST_COLLECTIVE);
	assert_int_equal(r->n, 1);
	assert_string_equal(r->v[0].name, "Broadcast");
	assert_int_equal(r->v[0].seq, 3);
	assert_int_equal(r->v[0].start, T0 + 2 * NS);
	assert_int_equal(r->v[0].dur, 1000);
	assert_int_equal(r->v[0].bytes, 3072);
	assert_int_equal(r->v[0].rank, 0);
	assert_int_equal(r->v[0].nranks, 2);
	r = query(st, "jh", T0, STORE_EVENT_COLLECTIVE);
	assert_int_equal(r->n, 3);
}

static void test_sqlite(void **state)
{
	(void)state;
	check_on_sqlite(check_store);
}

static void test_clickhouse(void **state)
{
	(void)state;
	check_on_clickhouse(check_store, "strata_hang_inputs");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sqlite),
		cmocka_unit_test(test_clickhouse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
