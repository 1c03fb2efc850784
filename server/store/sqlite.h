/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the SQLite store (not for other callers): the store object, its
 * connections, the query builder and the per-query stack cache shared by
 * sqlite.c (open, retention, stats), sqlite_ingest.c, sqlite_query.c (query
 * building and running) and sqlite_read.c (the queries).
 */
#ifndef STRATA_SERVER_STORE_SQLITE_H
#define STRATA_SERVER_STORE_SQLITE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

#include "server/store.h"
#include "server/store/backend.h"
#include "server/store/schema.h"

#define SQ_NREADERS 3
#define SQ_MAX_STMTS 32

struct sq_conn {
	sqlite3 *db;
	pthread_mutex_t lock;
	uint64_t next_check_ns; /* readers: store__read_over()'s, per read */
};

struct sqlite_store {
	struct store base;
	char *path;
	struct sq_conn writer;
	struct sq_conn readers[SQ_NREADERS];
	unsigned next_reader;
	struct store_counts counts;
	/* The writer's prepared ingest statements, keyed by their SQL text's
	 * address (string literals, insert_sql): prepared once, reused by
	 * every batch. */
	struct {
		const char *sql;
		sqlite3_stmt *st;
	} stmts[SQ_MAX_STMTS];
	/* "INSERT INTO table(COLS) VALUES(?,...)" per schema table, made at
	 * open. */
	char *insert_sql[STORE_NTABLES];
};

/* Stored as bit patterns; hashes use the full range. */
static inline int64_t sq_i64(uint64_t v)
{
	return (int64_t)v;
}

/* A reader connection, locked (unlock its lock when done), its reads
 * interrupted when store__read_over() says so (the calling thread's
 * deadline, or its client gone). */
struct sq_conn *sq_reader(struct sqlite_store *s);

/* A record table's DDL (CREATE TABLE and its index), for make_schema and
 * tests; 0 or -E2BIG. */
int sqlite_store__table_ddl(const struct store_table *t, char *buf, size_t size);

int sqlite_store__ingest(struct store *base, const struct store_batch *sb);

/* The store's vtable (sqlite_read.c), and what it takes from sqlite.c. */
extern const struct store_ops sqlite_store_ops;
int sq_retain(struct store *base, uint64_t before_ns, uint64_t *deleted);
int sq_stats(struct store *base, struct store_stats *st);
int sq_sizes(struct store *base, struct store_sizes *out);
void sq_close(struct store *base);

/* ---- query building (sqlite_query.c) ----------------------------------------- */

#define SQ_MAX_BINDS 48

struct sq_query {
	char sql[8192];
	size_t len;
	int overflow;
	int nbind;
	struct {
		int is_text;
		int64_t i;
		const char *t;
	} binds[SQ_MAX_BINDS];
};

void sq_add(struct sq_query *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sq_int(struct sq_query *q, int64_t v);
void sq_text(struct sq_query *q, const char *t);
/* " AND cond" with t bound, when t is set (not NULL or ""). */
void sq_and_text(struct sq_query *q, const char *cond, const char *t);
/* " AND end_col > from AND start_col < to": a window overlapping the
 * filter's range (each bound when set). */
void sq_window(struct sq_query *q, const struct store_filter *f, const char *end_col,
	       const char *start_col);
/* " AND ..." conditions for the filter over batches b and processes p;
 * time_col, when set, is the event time column, else the batch window. */
void sq_filter(struct sq_query *q, const struct store_filter *f, const char *time_col);
/* Process-level filters without a time column: the process lifetime. */
void sq_proc_filter(struct sq_query *q, const struct store_filter *f);
/* Runs a prepared statement, calling row(ctx, st) per row (finalizes it). */
int sq_run(sqlite3_stmt *st, int (*row)(void *ctx, sqlite3_stmt *st), void *ctx);
/* Reads column i as a u64 (stored as its bit pattern). */
uint64_t sq_col_u64(sqlite3_stmt *st, int i);

/*
 * Runs the built query q on a reader connection, handing every row to
 * emit(row, fn, ctx) (server/store/backend.h) until one returns non-zero;
 * with_stacks: the rows' stack ids are looked up (once each) on that
 * connection.
 */
int sq_query_rows(struct sqlite_store *s, struct sq_query *q, store_emit_fn emit, void *fn,
		  void *ctx, int with_stacks);

#define FROM_PROC_BATCH(table)                                                                    \
	" FROM " table " t JOIN batches b ON b.id = t.batch JOIN processes p ON p.id = t.process" \
	" WHERE 1"

#endif /* STRATA_SERVER_STORE_SQLITE_H */
