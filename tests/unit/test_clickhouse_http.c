// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests: the ClickHouse HTTP client.  URL parsing and row escaping run
 * anywhere; the rest needs a real server, whose URL comes in
 * STRATA_TEST_CLICKHOUSE (tests/integration/test_clickhouse_http.sh starts
 * one); without it those tests are skipped.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "server/clickhouse_http.h"

static void test_parse_url(void **state)
{
	struct ch_opts o = { .sz = sizeof(o) };
	char buf[256];

	assert_int_equal(ch_parse_url("clickhouse://ch.example:8123/strata", &o, buf, sizeof(buf)),
			 0);
	assert_string_equal(o.url, "http://ch.example:8123");
	assert_string_equal(o.database, "strata");
	assert_null(o.user);
	assert_null(o.password);

	assert_int_equal(
		ch_parse_url("clickhouse://bob:s3:cr@t@10.0.0.1:9/db_1", &o, buf, sizeof(buf)), 0);
	assert_string_equal(o.url, "http://10.0.0.1:9");
	assert_string_equal(o.user, "bob");
	assert_string_equal(o.password, "s3:cr@t");
	/* a password with '/' (from --store-password-file) */
	assert_int_equal(
		ch_parse_url("clickhouse://bob:a/b@c@10.0.0.1:9/db_1", &o, buf, sizeof(buf)), 0);
	assert_string_equal(o.url, "http://10.0.0.1:9");
	assert_string_equal(o.password, "a/b@c");

	assert_int_equal(ch_parse_url("clickhouse://alice@[::1]:8123/x", &o, buf, sizeof(buf)), 0);
	assert_string_equal(o.url, "http://[::1]:8123");
	assert_string_equal(o.user, "alice");
	assert_null(o.password);

	static const char *const bad[] = {
		"sqlite:/x",
		"clickhouse://host/db",	      /* no port */
		"clickhouse://host:/db",      /* empty port */
		"clickhouse://host:12ab/db",  /* bad port */
		"clickhouse://host:8123",     /* no database */
		"clickhouse://host:8123/",    /* empty database */
		"clickhouse://host:8123/a;b", /* not an identifier */
		"clickhouse://host:8123/a b", /* not an identifier */
		"clickhouse://:8123/db",      /* no host */
		"clickhouse://:pw@host:1/db", /* empty user */
		"clickhouse://host:8123/d/e", /* path */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (ch_parse_url(bad[i], &o, buf, sizeof(buf)) != -EINVAL)
			fail_msg("accepted %s", bad[i]);
	}
	assert_int_equal(ch_parse_url("clickhouse://h:1/db", &o, buf, 8), -ENAMETOOLONG);
}

static void test_rows_escaping(void **state)
{
	struct ch_rows w;
	static const char nasty[] = "a\tb\nc\\d\re\bf\fg'h\"";

	ch_rows__init(&w);
	ch_rows__str(&w, nasty);
	ch_rows__u64(&w, UINT64_MAX);
	ch_rows__i64(&w, INT64_MIN);
	ch_rows__str(&w, NULL);
	ch_rows__bytes(&w, "x\0y", 3);
	ch_rows__date(&w, 1700000000ULL * 1000000000ULL);
	ch_rows__end(&w);
	ch_rows__f64(&w, 0.5);
	ch_rows__end(&w);
	assert_int_equal(w.rows, 2);
	assert_false(w.oom);
	w.buf[w.len] = '\0';
	assert_string_equal(w.buf, "a\\tb\\nc\\\\d\\re\\bf\\fg'h\"\t18446744073709551615\t"
				   "-9223372036854775808\t\tx\\0y\t2023-11-14\n0.5\n");
	ch_rows__reset(&w);
	assert_int_equal(w.len, 0);
	assert_int_equal(w.rows, 0);
	ch_rows__free(&w);
}

/* ---- against a real server ------------------------------------------------- */

struct fixture {
	struct ch_client *c;
	char url[256];
};

static int setup(void **state)
{
	const char *url = getenv("STRATA_TEST_CLICKHOUSE");
	struct fixture *f;

	if (!url || !*url) {
		*state = NULL;
		return 0;
	}
	f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->url, sizeof(f->url), "%s", url);
	struct ch_opts o = { .sz = sizeof(o), .url = f->url, .timeout_ms = 10000 };
	f->c = ch_client__new(&o);
	assert_non_null(f->c);
	assert_int_equal(ch_client__exec(f->c, "CREATE DATABASE IF NOT EXISTS chtest"), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f) {
		ch_client__exec(f->c, "DROP DATABASE IF EXISTS chtest");
		ch_client__free(f->c);
		free(f);
	}
	return 0;
}

#define NEED_SERVER(f)          \
	do {                    \
		if (!(f))       \
			skip(); \
	} while (0)

static uint64_t stop_from_ns; /* CLOCK_MONOTONIC; 0: never */

/* ch_opts.stop: true from stop_from_ns on (the query then runs on the
 * server: not while connecting or sending it). */
static bool stop_from(uint64_t *next_check_ns)
{
	(void)next_check_ns;
	return stop_from_ns && mono_ns() >= stop_from_ns;
}

static struct ch_client *client_for(const struct fixture *f, uint32_t timeout_ms, size_t max)
{
	struct ch_opts o = { .sz = sizeof(o),
			     .url = f->url,
			     .database = "chtest",
			     .timeout_ms = timeout_ms,
			     .max_result_bytes = max };
	struct ch_client *c = ch_client__new(&o);

	assert_non_null(c);
	return c;
}

/* Every byte value and every escape survives a round trip, in 5000 rows. */
static void test_round_trip(void **state)
{
	struct fixture *f = *state;
	struct ch_result r;
	struct ch_rows w;
	char s[300];
	enum { N = 5000 };

	NEED_SERVER(f);
	struct ch_client *c = client_for(f, 10000, 0);
	assert_int_equal(ch_client__exec(c, "DROP TABLE IF EXISTS rt"), 0);
	assert_int_equal(ch_client__exec(c,
					 "CREATE TABLE rt (d Date, i UInt64, n Int64, x Float64, "
					 "s String) ENGINE = MergeTree PARTITION BY d ORDER BY i"),
			 0);
	ch_rows__init(&w);
	for (uint64_t i = 0; i < N; i++) {
		size_t len = i % 300;

		for (size_t k = 0; k < len; k++)
			s[k] = (char)((i * 7 + k * 13) & 0xff);
		ch_rows__date(&w, (1700000000ULL + i * 3600) * 1000000000ULL);
		ch_rows__u64(&w, i == 0 ? UINT64_MAX : i);
		ch_rows__i64(&w, -(int64_t)i);
		ch_rows__f64(&w, (double)i / 3.0);
		ch_rows__bytes(&w, s, len);
		ch_rows__end(&w);
	}
	assert_int_equal(ch_client__insert(c, "rt (d, i, n, x, s)", &w), 0);
	ch_rows__free(&w);

	assert_int_equal(
		ch_client__query(c, "SELECT i, n, x, s, toString(d) FROM rt ORDER BY n DESC", &r),
		0);
	assert_int_equal(r.rows, N);
	assert_int_equal(r.cols, 5);
	for (uint64_t i = 0; i < N; i++) {
		size_t len = i % 300;
		int bad = 0;

		for (size_t k = 0; k < len; k++)
			s[k] = (char)((i * 7 + k * 13) & 0xff);
		assert_int_equal(ch_result__u64(&r, i, 0, &bad), i == 0 ? UINT64_MAX : i);
		assert_int_equal(ch_result__i64(&r, i, 1, &bad), -(int64_t)i);
		assert_true(strtod(ch_result__str(&r, i, 2), NULL) == (double)i / 3.0);
		assert_int_equal(bad, 0);
		assert_int_equal(r.lens[i * r.cols + 3], len);
		assert_memory_equal(ch_result__str(&r, i, 3), s, len);
	}
	assert_string_equal(ch_result__str(&r, 0, 4), "2023-11-14");
	ch_result__free(&r);
	ch_client__free(c);
}

/* Values are data, never SQL: a would-be injection is stored verbatim. */
static void test_injection_is_data(void **state)
{
	struct fixture *f = *state;
	static const char evil[] = "x'); DROP TABLE inj; --\tFORMAT\n1\t2";
	struct ch_result r;
	struct ch_rows w;

	NEED_SERVER(f);
	struct ch_client *c = client_for(f, 10000, 0);
	assert_int_equal(ch_client__exec(c, "CREATE TABLE IF NOT EXISTS inj (s String) "
					    "ENGINE = MergeTree ORDER BY s"),
			 0);
	ch_rows__init(&w);
	ch_rows__str(&w, evil);
	ch_rows__end(&w);
	assert_int_equal(ch_client__insert(c, "inj (s)", &w), 0);
	ch_rows__free(&w);
	assert_int_equal(ch_client__query(c, "SELECT s FROM inj", &r), 0);
	assert_int_equal(r.rows, 1);
	assert_string_equal(ch_result__str(&r, 0, 0), evil);
	ch_result__free(&r);
	ch_client__free(c);
}

static void test_errors(void **state)
{
	struct fixture *f = *state;
	struct ch_result r;

	NEED_SERVER(f);
	struct ch_client *c = client_for(f, 10000, 0);

	/* The server's own message comes back. */
	assert_int_equal(ch_client__query(c, "SELECT nosuchcolumn FROM system.one", &r), -EIO);
	assert_non_null(strstr(ch_client__error(c), "Code: 47"));
	assert_int_equal(ch_client__error_code(c), 47);
	assert_int_equal(r.rows, 0);
	assert_int_equal(ch_client__exec(c, "CREATE TABLE"), -EIO);
	assert_non_null(strstr(ch_client__error(c), "Syntax error"));

	/* An exception after the first million rows is still an error. */
	assert_int_equal(ch_client__query(c,
					  "SELECT throwIf(number = 1000000) FROM system.numbers "
					  "LIMIT 2000000",
					  &r),
			 -EIO);
	assert_non_null(strstr(ch_client__error(c), "throwIf"));

	/* Inserting malformed rows is refused whole. */
	struct ch_rows w;
	ch_rows__init(&w);
	ch_rows__str(&w, "not a number");
	ch_rows__end(&w);
	assert_int_equal(ch_client__exec(c, "CREATE TABLE IF NOT EXISTS num (i UInt64) "
					    "ENGINE = MergeTree ORDER BY i"),
			 0);
	assert_int_equal(ch_client__insert(c, "num (i)", &w), -EIO);
	/* a value it cannot parse (the store splits a group on these) */
	assert_true(ch_client__error_code(c) == 27 || ch_client__error_code(c) == 72);
	ch_rows__free(&w);

	/* A success clears the message. */
	assert_int_equal(ch_client__query(c, "SELECT 1", &r), 0);
	assert_string_equal(ch_client__error(c), "");
	assert_int_equal(ch_client__error_code(c), 0);
	assert_int_equal(r.rows, 1);
	assert_int_equal(ch_result__u64(&r, 0, 0, NULL), 1);
	ch_result__free(&r);
	ch_client__free(c);
}

static void test_limits(void **state)
{
	struct fixture *f = *state;
	struct ch_result r;

	NEED_SERVER(f);
	/* Larger than max_result_bytes: refused, not truncated. */
	struct ch_client *c = client_for(f, 10000, 4096);
	assert_int_equal(ch_client__query(c, "SELECT number FROM system.numbers LIMIT 100000", &r),
			 -EFBIG);
	assert_int_equal(r.rows, 0);
	ch_client__free(c);

	/* A query slower than the timeout. */
	c = client_for(f, 300, 0);
	assert_int_equal(ch_client__query(c, "SELECT sleep(2)", &r), -ETIMEDOUT);
	ch_client__free(c);

	/* A query whose caller stops it 1 s in (its client gone), while the
	 * server runs it: abandoned within its 10-s timeout, where it would
	 * have answered after 3 s.  Statements are not stopped, nor the next
	 * query once stop says no. */
	struct ch_opts so = { .sz = sizeof(so),
			      .url = f->url,
			      .database = "chtest",
			      .timeout_ms = 10000,
			      .stop = stop_from };
	uint64_t t0 = mono_ns();

	stop_from_ns = t0 + 1000000000ull;
	c = ch_client__new(&so);
	assert_non_null(c);
	assert_int_equal(ch_client__query(c, "SELECT sleep(3)", &r), -ETIMEDOUT);
	assert_true(mono_ns() - t0 < 2900000000ull);
	assert_int_equal(ch_client__exec(c, "SELECT 1"), 0);
	stop_from_ns = 0;
	assert_int_equal(ch_client__query(c, "SELECT 1", &r), 0);
	ch_result__free(&r);
	ch_client__free(c);

	/* Nobody listening: port 1 on loopback. */
	struct ch_opts o = { .sz = sizeof(o), .url = "http://127.0.0.1:1" };
	c = ch_client__new(&o);
	assert_non_null(c);
	assert_int_equal(ch_client__exec(c, "SELECT 1"), -ECONNREFUSED);
	assert_non_null(strstr(ch_client__error(c), "127.0.0.1:1"));
	assert_int_equal(ch_client__error_code(c), 0); /* not the server's */
	ch_client__free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_url),  cmocka_unit_test(test_rows_escaping),
		cmocka_unit_test(test_round_trip), cmocka_unit_test(test_injection_is_data),
		cmocka_unit_test(test_errors),	   cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
