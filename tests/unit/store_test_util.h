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

/* db_prefix names the database, suffixed with the pid: runs never meet. */
static inline void check_on_clickhouse(void (*check)(struct store *), const char *db_prefix)
{
	const char *url = getenv("STRATA_TEST_CLICKHOUSE");
	char spec[256], err[512] = "";
	struct store *st;

	if (!url || strncmp(url, "http://", 7))
		skip();
	snprintf(spec, sizeof(spec), "clickhouse://%s/%s_%d", url + 7, db_prefix, (int)getpid());
	st = store_clickhouse__open(spec, err, sizeof(err));
	if (!st)
		fail_msg("%s: %s", spec, err);
	check(st);
	store__close(st);
}

#endif /* STRATA_STORE_TEST_UTIL_H */
