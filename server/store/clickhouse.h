/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the ClickHouse store (not for other callers): the store object,
 * its connection pool, and what clickhouse.c (schema, open, retention,
 * stats), clickhouse_ingest.c, clickhouse_query.c (filters, stacks, row
 * reading) and clickhouse_read.c (the queries) share.
 */
#ifndef STRATA_SERVER_STORE_CLICKHOUSE_H
#define STRATA_SERVER_STORE_CLICKHOUSE_H

#include <pthread.h>
#include <stdint.h>

#include "server/clickhouse_http.h"
#include "server/store.h"
#include "server/store/backend.h"
#include "server/store/schema.h"

#define CH_POOL_MAX 8		       /* connections (one query each at a time) */
#define CH_INFLIGHT_MAX 64	       /* concurrent ingests */
#define CH_GROUP_BYTES (32u << 20)     /* rows one group commit sends at most */
#define CH_KNOWN_STACKS_CAP (1u << 20) /* (stack, day) pairs remembered */
#define CH_NODES_MAX 16		       /* servers of a cluster the spec names */

/*
 * A cluster (spec "clickhouse://H:P,H:P/DB?cluster=NAME", docs/server.md):
 * every shard holds local MergeTree tables NAME_local, and every server a
 * Distributed table NAME over them, so queries and inserts name the same
 * tables as on a single server.  Rows go to the shard of their node (all
 * of a batch on one shard: its rows, its commit record, the retries' and
 * racing attempts' commit records), stacks to the shard of their id.
 * Inserts are synchronous (the commit record is written after the rows
 * are on their shard) and IN/JOIN subqueries read each shard's local
 * tables (their rows' commit records are on the same shard).
 */
#define CH_LOCAL_SUFFIX "_local"
#define CH_CLUSTER_SETTINGS "insert_distributed_sync=1&distributed_product_mode=local"

/* One server of the store: DDL and retention run on each. */
struct ch_node {
	char buf[512];
	struct ch_opts opts;
};

struct ch_known_stacks {
	uint64_t *keys; /* 0 = empty; open addressing */
	uint32_t n;
};

struct ch_ingest; /* clickhouse_ingest.c */

struct ch_store {
	struct store base;
	struct ch_opts opts; /* the pool's: the first server's */
	char db[64];
	char cluster[64]; /* "": one server */
	struct ch_node nodes[CH_NODES_MAX];
	unsigned nnodes;

	pthread_mutex_t lock; /* everything below */
	pthread_cond_t pool_cond;
	struct ch_client *idle[CH_POOL_MAX];
	unsigned nidle, nclients;
	uint8_t inflight[CH_INFLIGHT_MAX][16];
	unsigned ninflight;
	struct ch_known_stacks known;
	uint64_t busy, stack_cache_resets;
	struct store_counts counts;
	/* Group commit (clickhouse_ingest.c): ingests whose rows wait for the
	 * one writer, which sends all that wait as one insert a table. */
	pthread_cond_t commit_cond;
	struct ch_ingest *commit_q[CH_INFLIGHT_MAX];
	unsigned ncommit;
	int committing;
	uint64_t commit_groups, commit_grouped, commit_splits;
};

/* Every per-process table starts with these (the process head), every
 * per-batch (node-level) table with the batch head. */
#define CH_PROC_COLS_DDL                                                                  \
	"day Date, ingest UInt64, b_start UInt64, b_end UInt64, node String, pid UInt32," \
	" pstart UInt64, job String, container String, has_rank UInt8, rank Int32"
#define CH_PROC_COLS \
	"day, ingest, b_start, b_end, node, pid, pstart, job, container, has_rank, rank"
#define CH_NODE_COLS_DDL "day Date, ingest UInt64, b_start UInt64, b_end UInt64, node String"
#define CH_NODE_COLS "day, ingest, b_start, b_end, node"

/* A record table's CREATE TABLE in database db, for create_schema and
 * tests; 0 or -E2BIG. */
int ch_store__table_ddl(const struct store_table *t, const char *db, char *buf, size_t size);
/* Its columns and engine, "(...) ENGINE = ..."; 0 or -E2BIG. */
int ch_store__table_body(const struct store_table *t, char *buf, size_t size);

/* The store's spec parsed into s (db, cluster, nodes, the pool's opts);
 * 0 or -EINVAL (a message in err). */
int ch_store__parse_spec(struct ch_store *s, const char *spec, char *err, size_t errsz);
/* On a cluster: 0 when the servers named are the cluster's (as many as
 * its remote_servers lists), else -EINVAL or -errno (a message in err). */
int ch_store__check_cluster(struct ch_store *s, struct ch_client *c, char *err, size_t errsz);

/* A pooled connection (NULL: out of memory), and giving it back. */
struct ch_client *ch_store__client(struct ch_store *s);
void ch_store__put(struct ch_store *s, struct ch_client *c);

/* Runs a query or statement built in q (a builder out of memory is
 * refused); errors are logged with what. */
int ch_store__query(struct ch_client *c, struct ch_sql *q, struct ch_result *r, const char *what);
int ch_store__exec(struct ch_client *c, struct ch_sql *q, const char *what);
void ch_store__log(const struct ch_client *c, const char *what, int err);

int ch_store__ingest(struct store *base, const struct store_batch *sb);

/* ---- queries (clickhouse_query.c) ------------------------------------------------ */

/* cond and t quoted, when t is set (not NULL or ""). */
void ch_and_quoted(struct ch_sql *q, const char *cond, const char *t);

/*
 * " AND ..." over a table's own columns.  time_col: the event time column,
 * or NULL for the batch window (b_start, b_end).  Then only rows of
 * committed attempts (the smaller id when a batch was committed twice).
 */
void ch_filter(struct ch_store *s, struct ch_sql *q, const struct store_filter *f,
	       const char *time_col, int per_process);
int ch_has_process_filter(const struct store_filter *f);

/*
 * Runs q (freed here), loads the stacks that column stack_col names (-1:
 * none), then hands every row to emit(row, fn, ctx) until one returns
 * non-zero.
 */
int ch_query_rows(struct ch_store *s, struct ch_sql *q, const char *what, int stack_col,
		  store_emit_fn emit, void *fn, void *ctx);

/* The store's vtable (clickhouse_read.c), and what it takes from clickhouse.c. */
extern const struct store_ops clickhouse_store_ops;
int ch_retain(struct store *base, uint64_t before_ns, uint64_t *deleted);
int ch_stats(struct store *base, struct store_stats *st);
int ch_sizes(struct store *base, struct store_sizes *out);
void ch_close(struct store *base);
/* Heartbeats of server replicas (clickhouse_replicas.c), in table
 * replicas; on a cluster made at open with the other tables, sharded by
 * replica id (a table made at the first beat would be on one shard). */
#define CH_REPLICAS_BODY                                                                     \
	"(replica_id String, beat_ns UInt64) ENGINE = ReplacingMergeTree(beat_ns) ORDER BY " \
	"replica_id"
int ch_replicas(struct store *base, const char *id, uint64_t now_ns, uint64_t since_ns,
		store_replica_fn fn, void *ctx);

#endif /* STRATA_SERVER_STORE_CLICKHOUSE_H */
