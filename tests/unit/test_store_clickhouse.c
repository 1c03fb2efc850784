// SPDX-License-Identifier: Apache-2.0
/*
 * The ClickHouse store against a real server with synthetic batches:
 * frames round-trip exactly, every filter, exactly-once ingest (retries,
 * failed and racing attempts), leaks, tally, events, retention,
 * concurrent ingest and group commit.  Needs STRATA_TEST_CLICKHOUSE=http://HOST:PORT
 * (tests/integration/test_store_clickhouse.sh); skipped without it.  On
 * a cluster (test_store_clickhouse_cluster.sh) the same, and exactly-once
 * ingest through either server, rows on every shard.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/clickhouse_http.h"
#include "server/store.h"
#include "tests/unit/store_test_batch.h"
#include "tests/unit/store_test_util.h"

/* 2024-03-01 12:00:00 UTC and 2020-01-01 12:00:00 UTC */
#define T_NOW (1709294400ULL * NS)
#define T_OLD (1577880000ULL * NS)

#define CLUSTER_SETTINGS "insert_distributed_sync=1&distributed_product_mode=local"

struct fixture {
	struct store *st;
	struct ch_client *c; /* direct access to the same database */
	char db[64];
};

static struct fixture *F(void **state)
{
	if (!*state)
		skip();
	return *state;
}

static int setup(void **state)
{
	const char *url = getenv("STRATA_TEST_CLICKHOUSE");
	char spec[512], err[512] = "";
	struct fixture *f;
	char db[64];

	*state = NULL;
	snprintf(db, sizeof(db), "strata_test_%d", (int)getpid());
	if (!ch_test_spec(spec, sizeof(spec), db))
		return 0;
	f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->db, sizeof(f->db), "%s", db);
	f->st = store_clickhouse__open(spec, err, sizeof(err));
	if (!f->st)
		fail_msg("store__open(%s): %s", spec, err);
	/* On a cluster the direct inserts below go through the Distributed
	 * tables as the store's do: synchronously. */
	struct ch_opts o = { .sz = sizeof(o),
			     .url = url,
			     .database = f->db,
			     .settings = ch_test_cluster() ? CLUSTER_SETTINGS : NULL };
	f->c = ch_client__new(&o);
	assert_non_null(f->c);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (!f)
		return 0;
	struct ch_sql q = { 0 };
	ch_sql__add(&q, "DROP DATABASE IF EXISTS %s", f->db);
	ch_client__exec(f->c, q.p);
	ch_sql__free(&q);
	store__close(f->st);
	ch_client__free(f->c);
	free(f);
	return 0;
}

/* ---- query collectors ----------------------------------------------------------- */

struct prof {
	uint64_t total, a, b;
	int frames_ok;
};

static int on_sample(void *ctx, const struct store_sample *s)
{
	struct prof *p = ctx;

	p->total += s->value;
	assert_non_null(s->stack);
	if (s->stack->id == STACK_A) {
		p->a += s->value;
		assert_int_equal(s->stack->nframes, 3);
		for (int i = 0; i < 3; i++) {
			const struct store_frame *g = &s->stack->frames[i], *w = &FR_A[i];

			assert_int_equal(g->kind, w->kind);
			assert_int_equal(g->flags, w->flags);
			if (w->func)
				assert_string_equal(g->func, w->func);
			else
				assert_null(g->func); /* unresolved stays unresolved */
			if (w->file)
				assert_string_equal(g->file, w->file);
			else
				assert_null(g->file);
			assert_int_equal(g->line, w->line);
			assert_string_equal(g->module, w->module);
			if (w->build_id)
				assert_string_equal(g->build_id, w->build_id);
			else
				assert_null(g->build_id);
			assert_int_equal(g->addr, w->addr);
		}
		p->frames_ok = 1;
	} else if (s->stack->id == STACK_B) {
		p->b += s->value;
		assert_int_equal(s->stack->nframes, 2);
		assert_string_equal(s->stack->frames[1].func, "do_syscall_64");
		assert_int_equal(s->stack->frames[1].addr, 0xffffffff81000000ULL);
	}
	return 0;
}

static uint64_t profile_total(struct fixture *f, const struct store_filter *flt)
{
	struct prof p = { 0 };

	assert_int_equal(f->st->ops->profile(f->st, flt, STORE_PROFILE_CPU, on_sample, &p), 0);
	return p.total;
}

/* ---- tests -------------------------------------------------------------------------- */

static void test_ingest_profile_filters(void **state)
{
	struct fixture *f = F(state);
	struct tb t;
	struct prof p = { 0 };

	tb_standard(&t, 1, "node-a", T_NOW);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	tb_standard(&t, 2, "node-b", T_NOW + 10 * NS);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);

	struct store_filter all = { .from_ns = T_NOW, .to_ns = T_NOW + 3600 * NS };
	assert_int_equal(f->st->ops->profile(f->st, &all, STORE_PROFILE_CPU, on_sample, &p), 0);
	assert_int_equal(p.total, 2 * 52);
	assert_int_equal(p.a, 2 * 40);
	assert_int_equal(p.b, 2 * 12);
	assert_true(p.frames_ok);

	struct store_filter flt = all;
	flt.node = "node-a";
	assert_int_equal(profile_total(f, &flt), 52);
	flt = all, flt.pid = 100;
	assert_int_equal(profile_total(f, &flt), 2 * 35);
	flt = all, flt.job = "j1";
	assert_int_equal(profile_total(f, &flt), 2 * 45);
	flt = all, flt.container = "ctr-a";
	assert_int_equal(profile_total(f, &flt), 2 * 45);
	flt = all, flt.has_rank = 1, flt.rank = 1;
	assert_int_equal(profile_total(f, &flt), 2 * 10);
	flt.rank_negate = 1; /* every rank but 1: rank 0 only (unranked excluded) */
	assert_int_equal(profile_total(f, &flt), 2 * 35);
	flt = all, flt.node = "it's \\ 'quoted'"; /* hostile text is a value */
	assert_int_equal(profile_total(f, &flt), 0);
	/* Batch windows overlapping the range: only the first. */
	flt = (struct store_filter){ .from_ns = T_NOW, .to_ns = T_NOW + 10 * NS };
	assert_int_equal(profile_total(f, &flt), 52);
	flt = (struct store_filter){ .from_ns = T_NOW + 3600 * NS };
	assert_int_equal(profile_total(f, &flt), 0);
}

static int on_job(void *ctx, const struct store_job *j)
{
	struct store_job *out = ctx;

	assert_string_equal(j->job, "j1");
	*out = *j;
	out->job = NULL;
	return 0;
}

static int on_node(void *ctx, const struct store_node *n)
{
	int *count = ctx;

	assert_string_equal(n->agent_version, "test-1");
	assert_int_equal(n->batches, 1);
	assert_int_equal(n->cpu_samples, 52);
	(*count)++;
	return 0;
}

static int on_process(void *ctx, const struct store_process *p)
{
	int *seen = ctx;

	if (p->pid == 101) {
		assert_true(p->has_rank);
		assert_int_equal(p->rank, 1);
		assert_int_equal(p->world_size, 2);
		assert_string_equal(p->job, "j1");
		assert_string_equal(p->container, "ctr-a");
		assert_string_equal(p->cmdline, "python3 train.py");
		assert_int_equal(p->cpu_samples, 10);
		assert_int_equal(p->start_time_ns, 1101);
	} else if (p->pid == 200) {
		assert_false(p->has_rank);
		assert_int_equal(p->rank, -1);
	}
	(*seen)++;
	return 0;
}

static void test_jobs_nodes_processes(void **state)
{
	struct fixture *f = F(state);
	struct store_filter all = { .from_ns = T_NOW, .to_ns = T_NOW + 3600 * NS };
	struct store_job j = { 0 };
	int n = 0;

	assert_int_equal(f->st->ops->jobs(f->st, &all, on_job, &j), 0);
	assert_int_equal(j.nodes, 2);
	assert_int_equal(j.processes, 4);
	assert_int_equal(j.ranks, 2);
	assert_int_equal(j.world_size, 2);
	assert_int_equal(j.cpu_samples, 2 * 45);
	assert_int_equal(f->st->ops->nodes(f->st, &all, on_node, &n), 0);
	assert_int_equal(n, 2);
	n = 0;
	struct store_filter one = all;
	one.node = "node-b";
	assert_int_equal(f->st->ops->processes(f->st, &one, on_process, &n), 0);
	assert_int_equal(n, 3);
}

/* A retry is refused whole; a failed attempt and a racing second commit
 * stay invisible. */
static void test_exactly_once(void **state)
{
	struct fixture *f = F(state);
	struct store_filter all = { .from_ns = T_NOW, .to_ns = T_NOW + 3600 * NS };
	struct store_stats st;
	struct tb t;
	uint64_t before = profile_total(f, &all);

	tb_standard(&t, 1, "node-a", T_NOW);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 1);
	assert_int_equal(profile_total(f, &all), before);
	assert_int_equal(f->st->ops->stats(f->st, &st), 0);
	assert_int_equal(st.duplicates, 1);
	struct store_sizes sz;
	assert_int_equal(f->st->ops->sizes(f->st, &sz), 0);
	assert_true(sz.cpu_rows >= 8);
	assert_true(sz.stacks >= 2);
	assert_true(sz.bytes_on_disk > 0);

	/* Rows of an attempt that never committed (ingest 42). */
	struct ch_rows w;
	ch_rows__init(&w);
	ch_rows__str(&w, "2024-03-01");
	ch_rows__u64(&w, 42);
	ch_rows__u64(&w, T_NOW);
	ch_rows__u64(&w, T_NOW + 10 * NS);
	ch_rows__str(&w, "node-a");
	ch_rows__u64(&w, 100);
	ch_rows__u64(&w, 1100);
	ch_rows__str(&w, "j1");
	ch_rows__str(&w, "ctr-a");
	ch_rows__u64(&w, 1);
	ch_rows__i64(&w, 0);
	ch_rows__u64(&w, 100);
	ch_rows__str(&w, "worker");
	ch_rows__u64(&w, STACK_A);
	ch_rows__u64(&w, 1000);
	ch_rows__end(&w);
	assert_int_equal(ch_client__insert(f->c,
					   "cpu_samples (day, ingest, b_start, b_end, node, pid,"
					   " pstart, job, container, has_rank, rank, tid, comm,"
					   " stack_id, count)",
					   &w),
			 0);
	assert_int_equal(profile_total(f, &all), before);

	/* The same batch_id committed again by a racing attempt with a larger
	 * id (another replica): its rows are ignored. */
	assert_int_equal(ch_client__exec(f->c,
					 "INSERT INTO batches (day, ingest, batch_id, node,"
					 " start_ns, end_ns) SELECT day, 18446744073709551615,"
					 " batch_id, node, start_ns, end_ns FROM batches"
					 " WHERE node = 'node-a' LIMIT 1"),
			 0);
	assert_int_equal(ch_client__exec(f->c,
					 "INSERT INTO cpu_samples SELECT day,"
					 " 18446744073709551615, b_start, b_end, node, pid,"
					 " pstart, job, container, has_rank, rank, tid, comm,"
					 " stack_id, count FROM cpu_samples WHERE node = 'node-a'"
					 " AND ingest != 42"),
			 0);
	assert_int_equal(profile_total(f, &all), before);
	ch_rows__free(&w);
}

static int on_leak(void *ctx, const struct store_leak *l)
{
	uint64_t *v = ctx;

	assert_int_equal(l->stack->id, STACK_A);
	assert_int_equal(l->stack->nframes, 3);
	v[0] += l->bytes;
	v[1] += l->allocations;
	return 0;
}

static void test_leaks(void **state)
{
	struct fixture *f = F(state);
	uint64_t base = T_NOW + 7200 * NS;
	struct tb t;
	uint64_t v[2];

	tb_init(&t, 10, "node-l", base);
	uint32_t p = tb_proc(&t, 300, "j2", 0);
	tb_alloc(&t, p, 0xa000, 100, base + 1, base + 2, 0); /* freed at once */
	tb_alloc(&t, p, 0xb000, 200, base + 3, 0, 0);	     /* never freed */
	tb_alloc(&t, p, 0xc000, 400, base + 4, 0, 0);	     /* freed next window */
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	tb_init(&t, 11, "node-l", base + 10 * NS);
	p = tb_proc(&t, 300, "j2", 0);
	tb_alloc(&t, p, 0xc000, 0, base + 4, base + 15 * NS, 1);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);

	struct store_filter flt = { .node = "node-l", .to_ns = base + 5 * NS };
	memset(v, 0, sizeof(v));
	assert_int_equal(f->st->ops->leaks(f->st, &flt, on_leak, v), 0);
	assert_int_equal(v[0], 600);
	assert_int_equal(v[1], 2);
	flt.to_ns = base + 20 * NS;
	memset(v, 0, sizeof(v));
	assert_int_equal(f->st->ops->leaks(f->st, &flt, on_leak, v), 0);
	assert_int_equal(v[0], 200);
	assert_int_equal(v[1], 1);
}

static int on_tally(void *ctx, const struct store_tally *t)
{
	int *seen = ctx;

	assert_string_equal(t->fn, "cudaMalloc");
	assert_int_equal(t->calls, 30);
	assert_int_equal(t->total_ns, 3000);
	assert_int_equal(t->min_ns, 5);
	assert_int_equal(t->max_ns, 900);
	assert_int_equal(t->ncodes, 1);
	assert_int_equal(t->codes[0].code, 2);
	assert_string_equal(t->codes[0].name, "cudaErrorMemoryAllocation");
	assert_int_equal(t->codes[0].count, 4);
	(*seen)++;
	return 0;
}

static void tb_tally(struct tb *t, uint32_t proc, uint64_t calls, uint64_t mn, uint64_t mx)
{
	size_t i = t->b.n_cuda_api_tally++;

	strata__v1__cuda_api_tally__init(&t->ta[i]);
	strata__v1__cuda_api_tally__code__init(&t->code[i]);
	t->code[i].code = 2;
	t->code[i].name_str = tb_str(t, "cudaErrorMemoryAllocation");
	t->code[i].count = 2;
	t->codep[i] = &t->code[i];
	t->ta[i].process = proc;
	t->ta[i].fn_str = tb_str(t, "cudaMalloc");
	t->ta[i].calls = calls;
	t->ta[i].total_ns = 1500;
	t->ta[i].min_ns = mn;
	t->ta[i].max_ns = mx;
	t->ta[i].n_errors = 1;
	t->ta[i].errors = &t->codep[i];
	t->tap[i] = &t->ta[i];
}

static void test_tally(void **state)
{
	struct fixture *f = F(state);
	uint64_t base = T_NOW + 9000 * NS;
	struct tb t;
	int seen = 0;

	tb_init(&t, 20, "node-t", base);
	tb_tally(&t, tb_proc(&t, 400, "j3", 0), 10, 5, 100);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	tb_init(&t, 21, "node-t", base + 10 * NS);
	tb_tally(&t, tb_proc(&t, 400, "j3", 0), 20, 7, 900);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	struct store_filter flt = { .node = "node-t" };
	assert_int_equal(f->st->ops->tally(f->st, &flt, on_tally, &seen), 0);
	assert_int_equal(seen, 1);
}

struct evs {
	int n;
	uint64_t last_start;
	int coll, xfer, launch;
};

static int on_event(void *ctx, const struct store_event *e)
{
	struct evs *v = ctx;

	assert_true(e->start_ns >= v->last_start); /* oldest first */
	v->last_start = e->start_ns;
	v->n++;
	if (e->kind == STORE_EVENT_COLLECTIVE) {
		v->coll++;
		assert_string_equal(e->name, "AllReduce");
		assert_string_equal(e->dtype, "float32");
		assert_int_equal(e->comm_hash, 0xc0ffee);
		assert_int_equal(e->comm_rank, e->pid == 500 ? 0 : -1);
		assert_int_equal(e->comm_nranks, e->pid == 500 ? 8 : -1);
		assert_int_equal(e->dur_ns, 50);
		assert_int_equal(e->bytes, 1 << 20);
	} else if (e->kind == STORE_EVENT_TRANSFER) {
		v->xfer++;
		assert_string_equal(e->name, "cudaMemcpy");
		assert_int_equal(e->transfer_kind, 1);
		assert_int_equal(e->direction, 2);
	} else {
		assert_int_equal(e->kind, STORE_EVENT_LAUNCH);
		v->launch++;
		assert_string_equal(e->name, "gemm_kernel");
		assert_int_equal(e->count, 77);
	}
	return 0;
}

static void test_events(void **state)
{
	struct fixture *f = F(state);
	uint64_t base = T_NOW + 12000 * NS;
	struct tb t;
	struct evs v = { 0 };
	int truncated = -1;

	tb_init(&t, 30, "node-e", base);
	uint32_t p = tb_proc(&t, 500, "j4", 0), q = tb_proc(&t, 501, "j4", 1);
	strata__v1__nccl_comm__init(&t.comm[0]);
	t.comm[0] = (Strata__V1__NcclComm){ .base = t.comm[0].base,
					    .comm_hash = 0xc0ffee,
					    .process = p,
					    .rank = 0,
					    .nranks = 8,
					    .init_ns = base };
	t.commp[0] = &t.comm[0];
	t.b.n_nccl_comms = 1;
	for (int i = 0; i < 6; i++) {
		strata__v1__nccl_collective__init(&t.coll[i]);
		t.coll[i].process = i % 2 ? q : p;
		t.coll[i].comm_hash = 0xc0ffee;
		t.coll[i].seq = (uint64_t)i / 2;
		t.coll[i].op_str = tb_str(&t, "AllReduce");
		t.coll[i].dtype_str = tb_str(&t, "float32");
		t.coll[i].bytes = 1 << 20;
		t.coll[i].entry_ns = base + 100 + (uint64_t)(5 - i) * 1000;
		t.coll[i].exit_ns = t.coll[i].entry_ns + 50;
		t.coll[i].peer = -1;
		t.collp[i] = &t.coll[i];
	}
	t.b.n_nccl_collectives = 6;
	strata__v1__cuda_transfer__init(&t.tr[0]);
	t.tr[0].process = p;
	t.tr[0].kind = 1;
	t.tr[0].direction = 2;
	t.tr[0].start_ns = base + 2500;
	t.tr[0].ns = 10;
	t.tr[0].api_str = tb_str(&t, "cudaMemcpy");
	t.trp[0] = &t.tr[0];
	strata__v1__cuda_transfer__init(&t.tr[1]); /* an aggregate: no start, not an event */
	t.tr[1].process = p;
	t.tr[1].count = 9;
	t.trp[1] = &t.tr[1];
	t.b.n_cuda_transfers = 2;
	strata__v1__cuda_launch__init(&t.la[0]);
	t.la[0].process = q;
	t.la[0].stack = 1;
	t.la[0].kernel_name_str = tb_str(&t, "gemm_kernel");
	t.la[0].count = 77;
	t.lap[0] = &t.la[0];
	t.b.n_cuda_launches = 1;
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);

	struct store_filter flt = { .node = "node-e" };
	uint32_t all = STORE_EVENT_COLLECTIVE | STORE_EVENT_TRANSFER | STORE_EVENT_LAUNCH;
	assert_int_equal(f->st->ops->events(f->st, &flt, all, 0, &truncated, on_event, &v), 0);
	assert_int_equal(v.coll, 6);
	assert_int_equal(v.xfer, 1);
	assert_int_equal(v.launch, 1);
	assert_int_equal(truncated, 0);

	memset(&v, 0, sizeof(v));
	assert_int_equal(f->st->ops->events(f->st, &flt, all, 3, &truncated, on_event, &v), 0);
	assert_int_equal(v.n, 3);
	assert_int_equal(truncated, 1);

	memset(&v, 0, sizeof(v));
	flt.has_rank = 1, flt.rank = 1;
	assert_int_equal(f->st->ops->events(f->st, &flt, STORE_EVENT_COLLECTIVE, 0, &truncated,
					    on_event, &v),
			 0);
	assert_int_equal(v.coll, 3);
	/* Event time, not batch window: only the collectives' own times. */
	memset(&v, 0, sizeof(v));
	flt = (struct store_filter){ .node = "node-e",
				     .from_ns = base + 3000,
				     .to_ns = base + 10 * NS };
	assert_int_equal(f->st->ops->events(f->st, &flt, STORE_EVENT_COLLECTIVE, 0, &truncated,
					    on_event, &v),
			 0);
	assert_int_equal(v.coll, 3);
}

static uint64_t count_rows(struct fixture *f, const char *sql)
{
	struct ch_result r;

	assert_int_equal(ch_client__query(f->c, sql, &r), 0);
	uint64_t n = ch_result__u64(&r, 0, 0, NULL);
	ch_result__free(&r);
	return n;
}

/* Parts of 2019-12-31 in the test's database, of every shard on a cluster. */
static uint64_t old_parts(struct fixture *f)
{
	const char *query = getenv("STRATA_TEST_CLICKHOUSE_QUERY");
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "SELECT count() FROM %s%s%s WHERE active AND database = '%s'"
		 " AND partition_id = '20191231'",
		 ch_test_cluster() ? "cluster('" : "system.parts",
		 ch_test_cluster() ? query + strlen("?cluster=") : "",
		 ch_test_cluster() ? "', system.parts)" : "", f->db);
	return count_rows(f, sql);
}

static void test_retention(void **state)
{
	struct fixture *f = F(state);
	struct tb t;
	uint64_t deleted = 0;
	struct store_filter old = { .to_ns = T_OLD + 86400 * NS };

	/* Two batches a day before the cut-off's day, one on its day before
	 * the cut-off, one after it. */
	tb_standard(&t, 40, "node-r", T_OLD - 86400 * NS);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	tb_standard(&t, 41, "node-r", T_OLD - 86000 * NS);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	tb_standard(&t, 42, "node-r", T_OLD - 3600 * NS);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	tb_standard(&t, 43, "node-r", T_OLD + 60 * NS);
	assert_int_equal(f->st->ops->ingest(f->st, &t.sb), 0);
	assert_int_equal(profile_total(f, &old), 4 * 52);
	assert_true(old_parts(f) > 0);

	assert_int_equal(f->st->ops->retain(f->st, T_OLD, &deleted), 0);
	assert_int_equal(deleted, 3);
	assert_int_equal(profile_total(f, &old), 52);
	/* The earlier day's partitions are gone from every table. */
	assert_int_equal(old_parts(f), 0);
	/* The stacks of the kept batch are still there. */
	struct prof p = { 0 };
	assert_int_equal(f->st->ops->profile(f->st, &old, STORE_PROFILE_CPU, on_sample, &p), 0);
	assert_true(p.frames_ok);
	/* Recent data untouched. */
	struct store_filter now = { .from_ns = T_NOW, .to_ns = T_NOW + 3600 * NS };
	assert_int_equal(profile_total(f, &now), 2 * 52);
}

struct racer {
	struct store *st;
	uint8_t id;
	int rc[4];
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct tb *t = malloc(sizeof(*t));

	assert_non_null(t);
	for (int i = 0; i < 4; i++) {
		/* every thread: one batch of its own, then the shared one */
		tb_standard(t, i < 3 ? (uint8_t)(r->id + i) : 0x77, "node-c", T_NOW + 20000 * NS);
		do
			r->rc[i] = r->st->ops->ingest(r->st, &t->sb);
		while (r->rc[i] == -EAGAIN); /* the same batch is being stored */
	}
	free(t);
	return NULL;
}

static void test_concurrent_ingest(void **state)
{
	struct fixture *f = F(state);
	struct racer r[4];
	pthread_t th[4];
	int stored = 0, dups = 0;

	for (int i = 0; i < 4; i++) {
		r[i] = (struct racer){ .st = f->st, .id = (uint8_t)(0x80 + 3 * i) };
		assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		for (int k = 0; k < 4; k++) {
			assert_true(r[i].rc[k] == 0 || r[i].rc[k] == 1);
			stored += r[i].rc[k] == 0;
			dups += r[i].rc[k] == 1;
		}
	}
	assert_int_equal(stored, 13);
	assert_int_equal(dups, 3);
	struct store_filter flt = { .node = "node-c" };
	assert_int_equal(profile_total(f, &flt), 13 * 52);
}

struct grouper {
	struct store *st;
	int thread, rc[8];
};

static void *group_ingest(void *arg)
{
	struct grouper *g = arg;
	struct tb *t = malloc(sizeof(*t));

	assert_non_null(t);
	for (int i = 0; i < 8; i++) {
		tb_standard(t, 0xe0, "node-g", T_NOW + (uint64_t)(30000 + 10 * i) * NS);
		t->id[1] = (uint8_t)g->thread; /* 64 ids no other test uses */
		t->id[2] = (uint8_t)i;
		g->rc[i] = g->st->ops->ingest(g->st, &t->sb);
	}
	free(t);
	return NULL;
}

/* Runs fn on 8 threads, g[i] for thread i, and waits for them. */
static void run_groupers(struct fixture *f, struct grouper g[8], void *(*fn)(void *))
{
	pthread_t th[8];

	for (int i = 0; i < 8; i++) {
		g[i] = (struct grouper){ .st = f->st, .thread = i };
		assert_int_equal(pthread_create(&th[i], NULL, fn, &g[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
}

/* Group commit: 8 threads storing 8 batches each are written in groups
 * (fewer inserts than batches), and every batch is stored exactly once
 * with all its rows and stacks. */
static void test_group_commit(void **state)
{
	struct fixture *f = F(state);
	struct grouper g[8];
	struct store_stats before, after;

	assert_int_equal(f->st->ops->stats(f->st, &before), 0);
	run_groupers(f, g, group_ingest);
	for (int i = 0; i < 8; i++) {
		for (int k = 0; k < 8; k++)
			assert_int_equal(g[i].rc[k], 0);
	}
	assert_int_equal(f->st->ops->stats(f->st, &after), 0);
	assert_int_equal(after.batches - before.batches, 64);
	uint64_t groups = after.commit_groups - before.commit_groups;
	uint64_t grouped = after.commit_grouped - before.commit_grouped;
	print_message("group commit: 64 batches, %" PRIu64 " of them in %" PRIu64 " groups\n",
		      grouped, groups);
	assert_true(groups > 0);
	assert_true(grouped >= 2 * groups);
	assert_int_equal(after.commit_splits, before.commit_splits);
	struct store_filter flt = { .node = "node-g" };
	assert_int_equal(profile_total(f, &flt), 64 * 52);
	struct prof p = { 0 };
	assert_int_equal(f->st->ops->profile(f->st, &flt, STORE_PROFILE_CPU, on_sample, &p), 0);
	assert_true(p.frames_ok); /* the stacks came with the groups */
}

/* Exec sql (a printf format taking the database name) on the fixture's database. */
static void exec_db(struct fixture *f, const char *fmt)
{
	struct ch_sql q = { 0 };

	ch_sql__add(&q, fmt, f->db);
	assert_int_equal(ch_client__exec(f->c, q.p), 0);
	ch_sql__free(&q);
}

static pthread_barrier_t split_round;

/* Batch i of thread t is refused (a process without a rank, which the
 * altered processes table cannot take: rank -1 in a UInt32): 2 of every
 * round's 8. */
static bool split_poison(int t, int i)
{
	return (t + i) % 4 == 0;
}

static void *split_ingest(void *arg)
{
	struct grouper *g = arg;
	struct tb *t = malloc(sizeof(*t));

	assert_non_null(t);
	for (int i = 0; i < 6; i++) {
		bool bad = split_poison(g->thread, i);

		tb_init(t, 0xe1, "node-s", T_NOW + (uint64_t)(50000 + 10 * i) * NS);
		t->id[1] = (uint8_t)g->thread;
		t->id[2] = (uint8_t)i;
		tb_cpu(t, tb_proc(t, bad ? 300 : 100, "j1", bad ? -1 : 0), 1, 30);
		/* the 8 at once: one writes alone, the others wait as a group
		 * that holds a refused batch */
		pthread_barrier_wait(&split_round);
		g->rc[i] = g->st->ops->ingest(g->st, &t->sb);
	}
	free(t);
	return NULL;
}

/* A group with a batch whose values ClickHouse refuses is written again
 * batch by batch: the others are stored, the refused one fails alone. */
static void test_group_split(void **state)
{
	struct fixture *f = F(state);
	struct grouper g[8];
	struct store_stats before, after;
	uint64_t good = 0;

	if (ch_test_cluster()) { /* the ALTER below would have to reach every shard */
		print_message("group split: not on a cluster\n");
		return;
	}
	exec_db(f, "ALTER TABLE %s.processes MODIFY COLUMN rank UInt32");
	assert_int_equal(f->st->ops->stats(f->st, &before), 0);
	assert_int_equal(pthread_barrier_init(&split_round, NULL, 8), 0);
	run_groupers(f, g, split_ingest);
	pthread_barrier_destroy(&split_round);
	exec_db(f, "ALTER TABLE %s.processes MODIFY COLUMN rank Int32");
	for (int i = 0; i < 8; i++) {
		for (int k = 0; k < 6; k++) {
			assert_int_equal(g[i].rc[k], split_poison(i, k) ? -EIO : 0);
			good += !split_poison(i, k);
		}
	}
	assert_int_equal(f->st->ops->stats(f->st, &after), 0);
	print_message("group split: %" PRIu64 " groups, %" PRIu64 " split\n",
		      after.commit_groups - before.commit_groups,
		      after.commit_splits - before.commit_splits);
	assert_true(after.commit_splits > before.commit_splits);
	assert_int_equal(after.batches - before.batches, good);
	struct store_filter flt = { .node = "node-s" };
	assert_int_equal(profile_total(f, &flt), good * 30);
}

/* Rows of db.table on the server at host (HOST:PORT). */
static uint64_t rows_on(struct fixture *f, const char *host, const char *table)
{
	char url[128], sql[256];
	struct ch_opts o = { .sz = sizeof(o), .url = url };
	struct ch_client *c;
	struct ch_result r;
	uint64_t n;

	snprintf(url, sizeof(url), "http://%s", host);
	snprintf(sql, sizeof(sql), "SELECT count() FROM %s.%s", f->db, table);
	c = ch_client__new(&o);
	assert_non_null(c);
	assert_int_equal(ch_client__query(c, sql, &r), 0);
	n = ch_result__u64(&r, 0, 0, NULL);
	ch_result__free(&r);
	ch_client__free(c);
	return n;
}

static int count_replica(void *ctx, const char *id, uint64_t beat_ns)
{
	(void)id, (void)beat_ns;
	++*(int *)ctx;
	return 0;
}

/*
 * Two stores on one database (two strata-server replicas): a batch stored
 * through one is a duplicate when retried through the other, whichever
 * went first; both read the same.  On a cluster the second store talks to
 * the other server first, and the batch's commit records and rows all go
 * to its node's shard whichever server takes it; every shard holds rows.
 */
static void test_either_server(void **state)
{
	struct fixture *f = F(state);
	const char *hosts = getenv("STRATA_TEST_CLICKHOUSE_HOSTS");
	const char *query = getenv("STRATA_TEST_CLICKHOUSE_QUERY");
	char spec[512], err[512] = "", first[128], node[32];
	struct store_filter win = { .from_ns = T_NOW + 39000 * NS, .to_ns = T_NOW + 41000 * NS };
	uint64_t batches = 0;
	struct store *other;
	const char *comma;
	struct tb t;

	if (ch_test_cluster()) {
		comma = strchr(hosts, ',');
		assert_non_null(comma);
		assert_null(strchr(comma + 1, ',')); /* two servers */
		snprintf(first, sizeof(first), "%.*s", (int)(comma - hosts), hosts);
		snprintf(spec, sizeof(spec), "clickhouse://%s,%s/%s%s", comma + 1, first, f->db,
			 query);
	} else {
		assert_true(ch_test_spec(spec, sizeof(spec), f->db));
	}
	other = store_clickhouse__open(spec, err, sizeof(err));
	if (!other)
		fail_msg("%s: %s", spec, err);
	for (int i = 0; i < 8; i++) {
		struct store *a = i % 2 ? other : f->st, *b = i % 2 ? f->st : other;

		snprintf(node, sizeof(node), "node-x%d", i);
		tb_standard(&t, (uint8_t)(0xc0 + i), node, T_NOW + 40000 * NS);
		assert_int_equal(a->ops->ingest(a, &t.sb), 0);
		assert_int_equal(b->ops->ingest(b, &t.sb), 1); /* the retry */
		assert_int_equal(a->ops->ingest(a, &t.sb), 1);
	}
	assert_int_equal(profile_total(f, &win), 8 * 52);
	struct prof p = { 0 };
	assert_int_equal(other->ops->profile(other, &win, STORE_PROFILE_CPU, on_sample, &p), 0);
	assert_int_equal(p.total, 8 * 52);
	/* Each sees the other's heartbeat (server/replicas.c). */
	int seen = 0;
	assert_int_equal(
		f->st->ops->replicas(f->st, "replica-a", T_NOW, T_NOW - NS, count_replica, &seen),
		0);
	seen = 0;
	assert_int_equal(
		other->ops->replicas(other, "replica-b", T_NOW, T_NOW - NS, count_replica, &seen),
		0);
	assert_int_equal(seen, 2);
	store__close(other);
	if (!ch_test_cluster())
		return;
	for (const char *h = hosts; h; h = strchr(h, ',') ? strchr(h, ',') + 1 : NULL) {
		char host[128];
		uint64_t n;

		snprintf(host, sizeof(host), "%.*s", (int)strcspn(h, ","), h);
		n = rows_on(f, host, "batches_local");
		print_message("shard %s: %" PRIu64 " commit records, %" PRIu64 " cpu rows\n", host,
			      n, rows_on(f, host, "cpu_samples_local"));
		assert_true(n > 0);
		assert_true(rows_on(f, host, "cpu_samples_local") > 0);
		batches += n;
	}
	/* the Distributed table reads every shard's */
	assert_int_equal(batches, rows_on(f, first, "batches"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ingest_profile_filters),
		cmocka_unit_test(test_jobs_nodes_processes),
		cmocka_unit_test(test_exactly_once),
		cmocka_unit_test(test_leaks),
		cmocka_unit_test(test_tally),
		cmocka_unit_test(test_events),
		cmocka_unit_test(test_retention),
		cmocka_unit_test(test_concurrent_ingest),
		cmocka_unit_test(test_group_commit),
		cmocka_unit_test(test_group_split),
		cmocka_unit_test(test_either_server),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
