// SPDX-License-Identifier: Apache-2.0
/*
 * The ClickHouse store (clusters): the same concepts as the SQLite store,
 * laid out for a column store.  Schema and its reasons: docs/clickhouse.md;
 * the record tables come from server/store/schema.h.
 *
 * - Rows are denormalized: every per-process row carries its node, pid,
 *   process start time, job, container and rank, so every filter is a
 *   WHERE on the row itself (ClickHouse joins are costly).
 * - All-or-nothing ingest without transactions: each ingest attempt gets a
 *   random 64-bit id stamped on every row it writes, and writes the
 *   batches row (the commit record) last.  Queries read only rows whose
 *   attempt committed, and of two committed attempts of one batch_id (a
 *   retry racing a slow first attempt, possibly on another replica) only
 *   the smaller id.  A failed attempt's rows stay invisible until
 *   retention drops their partition.
 * - Stacks are content-addressed (store_stack.id) in stack_frames, written
 *   once per day partition in which they are used (a bounded in-memory set
 *   remembers which), so retention can drop old stacks with the data.
 * - Retention: ClickHouse 18.16 has no TTL; every table is partitioned by
 *   day (of the batch's end), whole days are dropped, and within the
 *   boundary day the commit records are deleted (the rows turn invisible).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/store/clickhouse.h"

#define MUTATION_WAIT_MS 30000

/* ---- schema ---------------------------------------------------------------- */

int ch_store__table_body(const struct store_table *t, char *buf, size_t size)
{
	char cols[1024];
	int n;

	if (store_table__columns(t, STORE_CLICKHOUSE, 1, cols, sizeof(cols)) >= sizeof(cols))
		return -E2BIG;
	n = snprintf(buf, size, "(%s, %s) ENGINE = MergeTree PARTITION BY day ORDER BY (%s)",
		     t->per_process ? CH_PROC_COLS_DDL : CH_NODE_COLS_DDL, cols, t->order_by);
	return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

int ch_store__table_ddl(const struct store_table *t, const char *db, char *buf, size_t size)
{
	char body[2048];
	int n, err = ch_store__table_body(t, body, sizeof(body));

	if (err)
		return err;
	n = snprintf(buf, size, "CREATE TABLE IF NOT EXISTS %s.%s %s", db, t->name, body);
	return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

/* The commit records and the stacks, which are not per batch/process. */
static const char BATCHES_DDL[] =
	"(day Date, ingest UInt64, batch_id String, node String, agent_version String,"
	" agent_run_id String, seq UInt64, start_ns UInt64, end_ns UInt64, received_ns UInt64,"
	" clock_source UInt8, clock_error_ns UInt64, freq_hz UInt32, wire_bytes UInt64,"
	" cpu_samples UInt64, drops UInt64)"
	" ENGINE = MergeTree PARTITION BY day ORDER BY (batch_id)";
static const char STACKS_DDL[] =
	"(day Date, stack_id UInt64, depth UInt16, kind UInt8, flags UInt32, func String,"
	" file String, line UInt32, module String, build_id String, addr UInt64)"
	" ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY (stack_id, depth)";

/* ---- connections --------------------------------------------------------------- */

struct ch_client *ch_store__client(struct ch_store *s)
{
	struct ch_client *c = NULL;

	pthread_mutex_lock(&s->lock);
	while (!s->nidle && s->nclients >= CH_POOL_MAX)
		pthread_cond_wait(&s->pool_cond, &s->lock);
	if (s->nidle) {
		c = s->idle[--s->nidle];
	} else {
		c = ch_client__new(&s->opts);
		if (c)
			s->nclients++;
	}
	pthread_mutex_unlock(&s->lock);
	return c;
}

void ch_store__put(struct ch_store *s, struct ch_client *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&s->lock);
	s->idle[s->nidle++] = c;
	pthread_cond_signal(&s->pool_cond);
	pthread_mutex_unlock(&s->lock);
}

void ch_store__log(const struct ch_client *c, const char *what, int err)
{
	fprintf(stderr, "store_clickhouse: %s: %s (%s)\n", what, ch_client__error(c),
		strerror(-err));
}

int ch_store__query(struct ch_client *c, struct ch_sql *q, struct ch_result *r, const char *what)
{
	int err;

	memset(r, 0, sizeof(*r));
	if (q->oom)
		return -ENOMEM;
	err = ch_client__query(c, q->p, r);
	if (err)
		ch_store__log(c, what, err);
	return err;
}

int ch_store__exec(struct ch_client *c, struct ch_sql *q, const char *what)
{
	int err;

	if (q->oom)
		return -ENOMEM;
	err = ch_client__exec(c, q->p);
	if (err)
		ch_store__log(c, what, err);
	return err;
}

/* ---- retention ------------------------------------------------------------------ */

/* Waits until the table's mutations are applied (18.16 runs them in the
 * background and has no mutations_sync). */
static int wait_mutations(struct ch_store *s, struct ch_client *c, const char *table)
{
	for (int waited = 0; waited < MUTATION_WAIT_MS; waited += 50) {
		struct ch_sql q = { 0 };
		struct ch_result r;
		int err;

		ch_sql__add(&q, "SELECT count() FROM system.mutations WHERE database = ");
		ch_sql__quote(&q, s->db);
		ch_sql__add(&q, " AND table = ");
		ch_sql__quote(&q, table);
		ch_sql__add(&q, " AND is_done = 0");
		err = ch_store__query(c, &q, &r, "mutations");
		ch_sql__free(&q);
		if (err)
			return err;
		uint64_t pending = ch_result__u64(&r, 0, 0, NULL);
		ch_result__free(&r);
		if (!pending)
			return 0;
		usleep(50 * 1000);
	}
	return -ETIMEDOUT;
}

/* Retention on one server: whole days before the cut-off dropped from
 * every local table, the commit records before the cut-off deleted. */
static int retain_on(struct ch_store *s, struct ch_client *c, const char *day, uint64_t before_ns)
{
	const char *sfx = s->cluster[0] ? CH_LOCAL_SUFFIX : "";
	struct ch_sql q = { 0 };
	struct ch_result r = { 0 };
	int err;

	/* Whole days before the cut-off, in every table (a Distributed
	 * table has no parts). */
	ch_sql__add(&q, "SELECT DISTINCT table, partition_id FROM system.parts"
			" WHERE active AND database = ");
	ch_sql__quote(&q, s->db);
	ch_sql__add(&q, " AND partition_id < ");
	ch_sql__quote(&q, day);
	err = ch_store__query(c, &q, &r, "retention partitions");
	ch_sql__free(&q);
	for (size_t i = 0; !err && i < r.rows; i++) {
		ch_sql__add(&q, "ALTER TABLE %s.", s->db);
		/* table names come from our schema: identifiers */
		ch_sql__add(&q, "%s DROP PARTITION ID ", ch_result__str(&r, i, 0));
		ch_sql__quote(&q, ch_result__str(&r, i, 1));
		err = ch_store__exec(c, &q, "drop partition");
		ch_sql__free(&q);
	}
	ch_result__free(&r);
	/* Within the boundary day: remove the commit records; their rows turn
	 * invisible and go when their day is dropped. */
	if (!err) {
		ch_sql__add(&q, "ALTER TABLE %s.batches%s DELETE WHERE end_ns < %" PRIu64, s->db,
			    sfx, before_ns);
		err = ch_store__exec(c, &q, "retention delete");
		ch_sql__free(&q);
	}
	if (!err) {
		char table[64];

		snprintf(table, sizeof(table), "batches%s", sfx);
		err = wait_mutations(s, c, table);
	}
	return err;
}

int ch_retain(struct store *base, uint64_t before_ns, uint64_t *deleted)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_client *c = ch_store__client(s);
	time_t secs = (time_t)(before_ns / 1000000000ULL);
	struct ch_sql q = { 0 };
	struct ch_result r = { 0 };
	char day[16];
	struct tm tm;
	uint64_t n = 0;
	int err;

	if (!c)
		return -ENOMEM;
	gmtime_r(&secs, &tm);
	strftime(day, sizeof(day), "%Y%m%d", &tm); /* partition ids of Date keys */
	ch_sql__add(&q,
		    "SELECT uniqExact(batch_id) FROM %s.batches WHERE end_ns < %" PRIu64
		    " AND ingest IN (SELECT min(ingest) FROM %s.batches GROUP BY batch_id)",
		    s->db, before_ns, s->db);
	err = ch_store__query(c, &q, &r, "retention count");
	n = err ? 0 : ch_result__u64(&r, 0, 0, NULL);
	ch_result__free(&r);
	ch_sql__free(&q);
	ch_store__put(s, c);
	for (unsigned i = 0; i < s->nnodes && !err; i++) {
		c = ch_client__new(&s->nodes[i].opts);
		err = c ? retain_on(s, c, day, before_ns) : -ENOMEM;
		ch_client__free(c);
	}
	if (!err) {
		store_counts__retained(&s->counts, n);
		if (deleted)
			*deleted = n;
	}
	return err;
}

int ch_sizes(struct store *base, struct store_sizes *out)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_client *c = ch_store__client(s);
	struct ch_sql q = { 0 };
	struct ch_result r;
	int err;

	memset(out, 0, sizeof(*out));
	if (!c)
		return -ENOMEM;
	ch_sql__add(&q,
		    "SELECT (SELECT uniqExact(stack_id) FROM %s.stack_frames),"
		    " (SELECT count() FROM %s.cpu_samples),"
		    " (SELECT count() FROM %s.nccl_collectives) + (SELECT count() FROM "
		    "%s.cuda_transfers),"
		    " (SELECT sum(bytes_on_disk) FROM ",
		    s->db, s->db, s->db, s->db);
	/* every shard's parts on a cluster */
	if (s->cluster[0])
		ch_sql__add(&q, "cluster('%s', system.parts)", s->cluster);
	else
		ch_sql__add(&q, "system.parts");
	ch_sql__add(&q, " WHERE active AND database = ");
	ch_sql__quote(&q, s->db);
	ch_sql__add(&q, ")");
	err = ch_store__query(c, &q, &r, "sizes");
	if (!err) {
		out->stacks = ch_result__u64(&r, 0, 0, NULL);
		out->cpu_rows = ch_result__u64(&r, 0, 1, NULL);
		out->event_rows = ch_result__u64(&r, 0, 2, NULL);
		out->bytes_on_disk = ch_result__u64(&r, 0, 3, NULL);
	}
	ch_result__free(&r);
	ch_sql__free(&q);
	ch_store__put(s, c);
	return err;
}

int ch_stats(struct store *base, struct store_stats *out)
{
	struct ch_store *s = (struct ch_store *)base;

	memset(out, 0, sizeof(*out));
	store_counts__read(&s->counts, out);
	pthread_mutex_lock(&s->lock);
	out->commit_groups = s->commit_groups;
	out->commit_grouped = s->commit_grouped;
	out->commit_splits = s->commit_splits;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void ch_close(struct store *base)
{
	struct ch_store *s = (struct ch_store *)base;

	if (!s)
		return;
	/* Every query has returned its client by now (the server stops
	 * serving before it closes the store). */
	for (unsigned i = 0; i < s->nidle; i++)
		ch_client__free(s->idle[i]);
	free(s->known.keys);
	pthread_cond_destroy(&s->pool_cond);
	pthread_cond_destroy(&s->commit_cond);
	pthread_mutex_destroy(&s->lock);
	store_counts__fini(&s->counts);
	free(s);
}

/* The columns (table, name) of the database's tables (table: of that one
 * only) into r. */
static int load_columns(struct ch_store *s, struct ch_client *c, const char *table,
			struct ch_result *r)
{
	struct ch_sql q = { 0 };
	int err;

	ch_sql__add(&q, "SELECT table, name FROM system.columns WHERE database = ");
	ch_sql__quote(&q, s->db);
	if (table) {
		ch_sql__add(&q, " AND table = ");
		ch_sql__quote(&q, table);
	}
	err = ch_store__query(c, &q, r, "system.columns");
	ch_sql__free(&q);
	return err;
}

static int has_column(const struct ch_result *r, const char *table, const char *name)
{
	for (size_t i = 0; i < r->rows; i++)
		if (!strcmp(ch_result__str(r, i, 0), table) &&
		    !strcmp(ch_result__str(r, i, 1), name))
			return 1;
	return 0;
}

/* Adds column col (its "name TYPE DEFAULT v") to table; 0 also when
 * another server added it first.  Counted when count (the logical table's
 * column, once on a cluster). */
static int add_column(struct ch_store *s, struct ch_client *c, const char *table, const char *name,
		      const char *col, int count)
{
	struct ch_sql q = { 0 };
	struct ch_result r;
	int err;

	ch_sql__add(&q, "ALTER TABLE %s.%s ADD COLUMN %s", s->db, table, col);
	err = ch_store__exec(c, &q, table);
	ch_sql__free(&q);
	if (!err) {
		if (count)
			store_counts__column_added(&s->counts, "clickhouse", table, col);
		return 0;
	}
	if (!load_columns(s, c, table, &r) && has_column(&r, table, name))
		err = 0;
	ch_result__free(&r);
	return err;
}

/*
 * As in SQLite (sqlite.c, add_missing_columns): a database made by an
 * older server lacks the columns of the fields added since, and CREATE
 * TABLE IF NOT EXISTS leaves its tables as they are; every schema column a
 * table lacks is added (the parts already written read the column's
 * default), logged and counted.  ClickHouse 18.16 has no ADD COLUMN IF NOT
 * EXISTS: what is there comes from system.columns.  On a cluster both the
 * shard's local table and the Distributed table gain it (counted once, on
 * the first server's local table: first).
 */
static int add_missing_columns(struct ch_store *s, struct ch_client *c, int first)
{
	struct ch_result r;
	int err = load_columns(s, c, NULL, &r);

	for (size_t t = 0; !err && t < STORE_NTABLES; t++) {
		const struct store_table *tb = &STORE_TABLES[t];
		char local[128];

		snprintf(local, sizeof(local), "%s%s", tb->name,
			 s->cluster[0] ? CH_LOCAL_SUFFIX : "");
		for (size_t i = 0; !err && i < tb->ncols; i++) {
			const char *name = store_column__name(&tb->cols[i], STORE_CLICKHOUSE);
			char col[256];

			if (!name || (has_column(&r, local, name) &&
				      (!s->cluster[0] || has_column(&r, tb->name, name))))
				continue;
			err = store_column__add_ddl(tb, &tb->cols[i], STORE_CLICKHOUSE, col,
						    sizeof(col));
			if (!err && !has_column(&r, local, name))
				err = add_column(s, c, local, name, col, first);
			if (!err && s->cluster[0] && !has_column(&r, tb->name, name))
				err = add_column(s, c, tb->name, name, col, 0);
		}
	}
	ch_result__free(&r);
	return err;
}

/*
 * Table name (body: its columns and engine) on one server; on a cluster,
 * the server's shard of it (name_local) and the Distributed table name
 * over every shard's, which sends a row to the shard that key picks.
 */
static int create_table(struct ch_store *s, struct ch_client *c, const char *name, const char *body,
			const char *key)
{
	struct ch_sql q = { 0 };
	int err;

	ch_sql__add(&q, "CREATE TABLE IF NOT EXISTS %s.%s%s %s", s->db, name,
		    s->cluster[0] ? CH_LOCAL_SUFFIX : "", body);
	err = ch_store__exec(c, &q, name);
	ch_sql__free(&q);
	if (err || !s->cluster[0])
		return err;
	ch_sql__add(&q,
		    "CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s" CH_LOCAL_SUFFIX
		    " ENGINE = Distributed(%s, %s, %s" CH_LOCAL_SUFFIX ", %s)",
		    s->db, name, s->db, name, s->cluster, s->db, name, key);
	err = ch_store__exec(c, &q, name);
	ch_sql__free(&q);
	return err;
}

/*
 * CREATE DATABASE and every table on one server, idempotent; then the
 * columns an older database lacks.  The shard key: a batch's node, for
 * every table of a batch (docs/server.md says why), the stacks' id.
 */
static int create_schema_on(struct ch_store *s, struct ch_client *c, int first)
{
	struct ch_sql q = { 0 };
	int err;

	ch_sql__add(&q, "CREATE DATABASE IF NOT EXISTS %s", s->db);
	err = ch_store__exec(c, &q, "create database");
	ch_sql__free(&q);
	for (size_t t = 0; !err && t < STORE_NTABLES; t++) {
		char body[2048];

		err = ch_store__table_body(&STORE_TABLES[t], body, sizeof(body));
		if (!err)
			err = create_table(s, c, STORE_TABLES[t].name, body, "cityHash64(node)");
	}
	if (!err)
		err = create_table(s, c, "batches", BATCHES_DDL, "cityHash64(node)");
	if (!err)
		err = create_table(s, c, "stack_frames", STACKS_DDL, "stack_id");
	if (!err && s->cluster[0])
		err = create_table(s, c, "replicas", CH_REPLICAS_BODY, "cityHash64(replica_id)");
	return err ? err : add_missing_columns(s, c, first);
}

/* The schema on every server of the store. */
static int create_schema(struct ch_store *s, char *errbuf, size_t errsz)
{
	int err = 0;

	for (unsigned i = 0; i < s->nnodes && !err; i++) {
		struct ch_client *c = ch_client__new(&s->nodes[i].opts);

		if (!c) {
			snprintf(errbuf, errsz, "clickhouse: out of memory");
			return -ENOMEM;
		}
		err = create_schema_on(s, c, i == 0);
		if (err)
			snprintf(errbuf, errsz, "%s: %s", s->nodes[i].opts.url,
				 ch_client__error(c));
		ch_client__free(c);
	}
	return err;
}

struct store *store_clickhouse__open(const char *url, char *err, size_t errsz)
{
	struct ch_store *s = calloc(1, sizeof(*s));
	struct ch_client *c = NULL;
	int rc;

	if (!s) {
		snprintf(err, errsz, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &clickhouse_store_ops;
	pthread_mutex_init(&s->lock, NULL);
	store_counts__init(&s->counts);
	pthread_cond_init(&s->pool_cond, NULL);
	pthread_cond_init(&s->commit_cond, NULL);
	rc = ch_store__parse_spec(s, url, err, errsz);
	if (rc)
		goto fail;
	c = ch_store__client(s);
	if (!c) {
		snprintf(err, errsz, "clickhouse: out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	rc = ch_store__check_cluster(s, c, err, errsz);
	if (!rc)
		rc = create_schema(s, err, errsz);
	if (rc)
		goto fail;
	ch_store__put(s, c);
	return &s->base;
fail:
	ch_store__put(s, c);
	ch_close(&s->base);
	errno = -rc;
	return NULL;
}
