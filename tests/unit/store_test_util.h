/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Runs one store check on both backends (include after cmocka.h and
 * server/store.h): a fresh SQLite file in a temporary directory, and a
 * fresh ClickHouse database when STRATA_TEST_CLICKHOUSE=http://HOST:PORT
 * names a server (tests/integration/clickhouse.sh sets it; else skipped).
 */
#ifndef STRATA_STORE_TEST_UTIL_H
#define STRATA_STORE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void check_on_sqlite(void (*check)(struct store *))
{
	char dir[] = "/tmp/strata-store-XXXXXX", spec[600], cmd[700], err[256];
	struct store *st;

	assert_non_null(mkdtemp(dir));
	snprintf(spec, sizeof(spec), "sqlite:%s/db", dir);
	st = store__open(spec, err, sizeof(err));
	assert_non_null(st);
	check(st);
	store__close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/*
 * The store spec of database db on the ClickHouse the test runs against:
 * STRATA_TEST_CLICKHOUSE_HOSTS (HOST:PORT, or a cluster's HOST:PORT,...)
 * and STRATA_TEST_CLICKHOUSE_QUERY ("?cluster=NAME" for a cluster), as
 * tests/integration/clickhouse.sh sets them; without them the server of
 * STRATA_TEST_CLICKHOUSE.  0 when no ClickHouse was named.
 */
static inline int ch_test_spec(char *spec, size_t size, const char *db)
{
	const char *url = getenv("STRATA_TEST_CLICKHOUSE");
	const char *hosts = getenv("STRATA_TEST_CLICKHOUSE_HOSTS");
	const char *query = getenv("STRATA_TEST_CLICKHOUSE_QUERY");

	if (!url || strncmp(url, "http://", 7))
		return 0;
	snprintf(spec, size, "clickhouse://%s/%s%s", hosts && hosts[0] ? hosts : url + 7, db,
		 query ? query : "");
	return 1;
}

/* 1 when the tests run against a cluster (clickhouse.sh, CH_SHARDS). */
static inline int ch_test_cluster(void)
{
	const char *query = getenv("STRATA_TEST_CLICKHOUSE_QUERY");

	return query && query[0];
}

/* db_prefix names the database, suffixed with the pid: runs never meet. */
static inline void check_on_clickhouse(void (*check)(struct store *), const char *db_prefix)
{
	char db[128], spec[512], err[512] = "";
	struct store *st;

	snprintf(db, sizeof(db), "%s_%d", db_prefix, (int)getpid());
	if (!ch_test_spec(spec, sizeof(spec), db))
		skip();
	st = store_clickhouse__open(spec, err, sizeof(err));
	if (!st)
		fail_msg("%s: %s", spec, err);
	check(st);
	store__close(st);
}

#endif /* STRATA_STORE_TEST_UTIL_H */
