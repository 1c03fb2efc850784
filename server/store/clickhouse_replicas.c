// SPDX-License-Identifier: Apache-2.0
/*
 * Server replicas sharing one ClickHouse store (server/replicas.h): each
 * writes a heartbeat row (replica id, its wall clock) every beat, and the
 * live replicas are those whose latest beat is recent.  Append-only
 * inserts, because ClickHouse 18.16 has no conditional update (no
 * compare-and-swap a lease row would need); ReplacingMergeTree keeps one
 * row per replica once parts merge, so the table stays as small as the
 * set of replicas.  The table is made at the first beat (CREATE ... IF NOT
 * EXISTS, cheap), so a store no replica uses has none.
 *
 * Every replica must read the same table: on a ClickHouse of several
 * shards (servers talking to different shards) it has to be a Distributed
 * table over a local one per shard, like the record tables; a local table
 * per shard would give each replica a view of only those on its shard,
 * and two owners per job.
 */
#include <errno.h>
#include <inttypes.h>

#include "server/store/clickhouse.h"

static int create_table(struct ch_store *s, struct ch_client *c)
{
	struct ch_sql q = { 0 };
	int err;

	/* On a cluster the store made it at open (clickhouse.c): this finds it. */
	ch_sql__add(&q, "CREATE TABLE IF NOT EXISTS %s.replicas " CH_REPLICAS_BODY, s->db);
	err = ch_store__exec(c, &q, "replicas table");
	ch_sql__free(&q);
	return err;
}

static int beat(struct ch_store *s, struct ch_client *c, const char *id, uint64_t now_ns)
{
	struct ch_sql q = { 0 };
	int err;

	ch_sql__add(&q, "INSERT INTO %s.replicas (replica_id, beat_ns) VALUES (", s->db);
	ch_sql__quote(&q, id);
	ch_sql__add(&q, ", %" PRIu64 ")", now_ns);
	err = ch_store__exec(c, &q, "replica beat");
	ch_sql__free(&q);
	return err;
}

int ch_replicas(struct store *base, const char *id, uint64_t now_ns, uint64_t since_ns,
		store_replica_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_client *c = ch_store__client(s);
	struct ch_sql q = { 0 };
	struct ch_result r = { 0 };
	int err;

	if (!c)
		return -ENOMEM;
	err = create_table(s, c);
	if (!err)
		err = beat(s, c, id, now_ns);
	if (!err) {
		ch_sql__add(&q,
			    "SELECT replica_id, max(beat_ns) AS b FROM %s.replicas GROUP BY"
			    " replica_id HAVING b >= %" PRIu64 " ORDER BY replica_id",
			    s->db, since_ns);
		err = ch_store__query(c, &q, &r, "replicas");
		ch_sql__free(&q);
	}
	ch_store__put(s, c);
	for (size_t i = 0; !err && i < r.rows; i++)
		err = fn(ctx, ch_result__str(&r, i, 0), ch_result__u64(&r, i, 1, NULL));
	ch_result__free(&r);
	return err;
}
