// SPDX-License-Identifier: Apache-2.0
/*
 * A database made by an older server opens and takes batches: a record
 * table that lacks the column of a field added since (cuda_allocs.level,
 * and cuda_allocs.size: a column in the middle of the table) gains it at
 * open (counted: store_stats.columns_added), the new rows land in the right
 * columns and the rows already there read the default.  SQLite always, also
 * with every record table lacking a column; ClickHouse with
 * STRATA_TEST_CLICKHOUSE=http://HOST:PORT (test_store_clickhouse.sh).
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
#include <sqlite3.h>

#include "server/clickhouse_http.h"
#include "server/store.h"
#include "server/store/schema.h"
#include "tests/unit/store_test_batch.h"
#include "tests/unit/store_test_util.h"

#define T_BASE (1709294400ULL * NS) /* 2024-03-01 12:00:00 UTC */

/* One backend: its store spec, and how the test makes its database older. */
struct backend {
	char spec[512];
	/* drops column col of table (as if the field did not exist yet) */
	void (*drop)(const struct backend *be, const char *table, const char *col);
	char path[128];	     /* SQLite */
	struct ch_client *c; /* ClickHouse */
	char db[64];	     /* ClickHouse */
};

static struct store *open_store(const struct backend *be)
{
	char err[512] = "";
	struct store *st = store__open(be->spec, err, sizeof(err));

	if (!st)
		fail_msg("store__open(%s): %s", be->spec, err);
	return st;
}

static uint64_t columns_added(struct store *st)
{
	struct store_stats ss;

	assert_int_equal(st->ops->stats(st, &ss), 0);
	return ss.columns_added;
}

/* Leaks by level: [level] = { bytes, allocations }. */
static int on_leak(void *ctx, const struct store_leak *l)
{
	uint64_t(*v)[2] = ctx;

	assert_true(l->level < 2);
	v[l->level][0] += l->bytes;
	v[l->level][1] += l->allocations;
	return 0;
}

/* One never-freed allocation of level level in a batch of its own. */
static void ingest_alloc(struct store *st, uint8_t id, uint64_t ptr, uint64_t size, uint32_t level)
{
	uint64_t start = T_BASE + id * 10 * NS;
	struct tb t;

	tb_init(&t, id, "node-m", start);
	tb_cpu(&t, tb_proc(&t, 300, "jm", 0), 1, 5);
	tb_alloc(&t, 0, ptr, size, start + 1, 0, 0);
	t.al[0].level = level;
	assert_int_equal(st->ops->ingest(st, &t.sb), 0);
}

/* cuda_allocs made before level existed (and without size, a column in
 * the middle): reopened, both come back; the old row reads level 0 and
 * size 0, the new one lands in its columns. */
static void check_cuda_allocs(struct backend *be)
{
	struct store_filter flt = { .node = "node-m", .to_ns = T_BASE + 100 * NS };
	uint64_t v[2][2] = { { 0 } };
	struct store *st = open_store(be);

	assert_int_equal(columns_added(st), 0);
	ingest_alloc(st, 1, 0xa000, 100, 0);
	store__close(st);
	be->drop(be, "cuda_allocs", "level");
	be->drop(be, "cuda_allocs", "size");

	st = open_store(be);
	assert_int_equal(columns_added(st), 2);
	ingest_alloc(st, 2, 0xb000, 300, 1);
	assert_int_equal(st->ops->leaks(st, &flt, on_leak, v), 0);
	assert_int_equal(v[1][0], 300); /* the new row: its size, its level */
	assert_int_equal(v[1][1], 1);
	assert_int_equal(v[0][0], 0); /* the old row: the defaults */
	assert_int_equal(v[0][1], 1);
	store__close(st);

	st = open_store(be); /* nothing left to add */
	assert_int_equal(columns_added(st), 0);
	store__close(st);
}

/* ---- SQLite ---------------------------------------------------------------------- */

static void sqlite_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	char *msg = NULL;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

static void sqlite_drop(const struct backend *be, const char *table, const char *col)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "ALTER TABLE %s DROP COLUMN %s", table, col);
	sqlite_exec(be->path, sql);
}

static void sqlite_remove(const struct backend *be)
{
	char p[160];

	unlink(be->path);
	snprintf(p, sizeof(p), "%s-wal", be->path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", be->path);
	unlink(p);
}

static void sqlite_backend(struct backend *be)
{
	memset(be, 0, sizeof(*be));
	snprintf(be->path, sizeof(be->path), "/tmp/strata-migrate-%d.db", (int)getpid());
	snprintf(be->spec, sizeof(be->spec), "sqlite:%s", be->path);
	be->drop = sqlite_drop;
	sqlite_remove(be); /* a database left by a failed run */
}

static void test_sqlite_cuda_allocs(void **state)
{
	struct backend be;

	(void)state;
	sqlite_backend(&be);
	check_cuda_allocs(&be);
	sqlite_remove(&be);
}

/* Every record table lacking its last column (one no index names), and
 * processes its exit_ns: every one comes back, and a batch with rows in
 * several tables is stored. */
static void test_sqlite_every_table(void **state)
{
	struct backend be;
	struct store *st;
	uint64_t dropped = 0;
	struct tb t;

	(void)state;
	sqlite_backend(&be);
	store__close(open_store(&be));
	for (int i = 0; i < STORE_NTABLES; i++) {
		const struct store_table *tb = &STORE_TABLES[i];
		const char *last = NULL;

		if (tb->sqlite_apart)
			continue;
		for (size_t c = 0; c < tb->ncols; c++) {
			const char *name = store_column__name(&tb->cols[c], STORE_SQLITE);

			if (name && !(tb->index && strstr(tb->index, name)))
				last = name;
		}
		assert_non_null(last);
		be.drop(&be, tb->name, last);
		dropped++;
	}
	assert_true(dropped > 10);
	be.drop(&be, "processes", "exit_ns"); /* the store's own table, added to since */
	dropped++;
	st = open_store(&be);
	assert_int_equal(columns_added(st), dropped);
	tb_standard(&t, 3, "node-e", T_BASE);
	tb_alloc(&t, 0, 0xc000, 64, T_BASE + 1, 0, 0);
	assert_int_equal(st->ops->ingest(st, &t.sb), 0);
	store__close(st);
	sqlite_remove(&be);
}

/* ---- ClickHouse ------------------------------------------------------------------ */

static void ch_drop_on(struct ch_client *c, const char *db, const char *table, const char *col)
{
	struct ch_sql q = { 0 };

	ch_sql__add(&q, "ALTER TABLE %s.%s DROP COLUMN %s", db, table, col);
	if (ch_client__exec(c, q.p))
		fail_msg("%s: %s", q.p, ch_client__error(c));
	ch_sql__free(&q);
}

/* On a cluster: from every server's local and Distributed table. */
static void ch_drop(const struct backend *be, const char *table, const char *col)
{
	const char *hosts = getenv("STRATA_TEST_CLICKHOUSE_HOSTS");

	if (!ch_test_cluster()) {
		ch_drop_on(be->c, be->db, table, col);
		return;
	}
	for (const char *h = hosts; h; h = strchr(h, ',') ? strchr(h, ',') + 1 : NULL) {
		char url[160], local[128];
		struct ch_opts o = { .sz = sizeof(o), .url = url };
		struct ch_client *c;

		snprintf(url, sizeof(url), "http://%.*s", (int)strcspn(h, ","), h);
		snprintf(local, sizeof(local), "%s_local", table);
		c = ch_client__new(&o);
		assert_non_null(c);
		ch_drop_on(c, be->db, local, col);
		ch_drop_on(c, be->db, table, col);
		ch_client__free(c);
	}
}

static void test_clickhouse_cuda_allocs(void **state)
{
	const char *url = getenv("STRATA_TEST_CLICKHOUSE");
	struct backend be = { .drop = ch_drop };
	struct ch_sql q = { 0 };

	(void)state;
	if (!url || strncmp(url, "http://", 7))
		skip();
	snprintf(be.db, sizeof(be.db), "strata_migrate_%d", (int)getpid());
	assert_true(ch_test_spec(be.spec, sizeof(be.spec), be.db));
	struct ch_opts o = { .sz = sizeof(o), .url = url };
	be.c = ch_client__new(&o);
	assert_non_null(be.c);
	check_cuda_allocs(&be);
	ch_sql__add(&q, "DROP DATABASE IF EXISTS %s", be.db);
	ch_client__exec(be.c, q.p);
	ch_sql__free(&q);
	ch_client__free(be.c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sqlite_cuda_allocs),
		cmocka_unit_test(test_sqlite_every_table),
		cmocka_unit_test(test_clickhouse_cuda_allocs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
