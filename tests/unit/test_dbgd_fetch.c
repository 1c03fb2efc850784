// SPDX-License-Identifier: Apache-2.0
/*
 * The server's background debuginfod fetcher, under ASan/UBSan,
 * against a debuginfod that refuses connections: a lookup never waits (it
 * queues and answers "pending"), answers are remembered ("not found" for
 * the TTL, then asked again), and the pending queries and remembered
 * answers are bounded.
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

#include "lib/clock.h"
#include "server/dbgd_fetch.h"

static void id_of(uint32_t n, uint8_t id[20])
{
	memset(id, 0x5a, 20);
	memcpy(id, &n, sizeof(n));
}

/* Waits (up to 10 s) until nothing is pending. */
static void settle(struct dbgd_fetch *f)
{
	struct dbgd_fetch_stats st;

	for (int i = 0; i < 1000; i++) {
		dbgd_fetch__stats(f, &st);
		if (!st.pending)
			return;
		usleep(10000);
	}
	fail_msg("%llu queries still pending", (unsigned long long)st.pending);
}

static void test_lookup_never_waits(void **state)
{
	struct dbgd_fetch_opts o = { .sz = sizeof(o), .negative_ttl_ns = 300000000ull };
	struct dbgd_fetch *f = dbgd_fetch__new(&o);
	struct dbgd_fetch_stats st;
	char path[256];
	uint8_t id[20];
	uint64_t t0;

	assert_non_null(f);
	assert_int_equal(dbgd_fetch__start(f), 0);
	id_of(1, id);
	t0 = mono_ns();
	assert_int_equal(dbgd_fetch__lookup(f, id, 20, 0, path, sizeof(path)), DBGD_NOT_ASKED);
	assert_int_equal(dbgd_fetch__lookup(f, id, 20, 1, path, sizeof(path)), DBGD_QUEUED);
	assert_true(mono_ns() - t0 < 100000000ull); /* no network on the caller's thread */
	settle(f);
	assert_int_equal(dbgd_fetch__lookup(f, id, 20, 1, path, sizeof(path)), DBGD_NONE);
	dbgd_fetch__stats(f, &st);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.not_found, 1);
	assert_int_equal(st.negative_hits, 1);
	/* the miss expires: asked again */
	usleep(350000);
	assert_int_equal(dbgd_fetch__lookup(f, id, 20, 1, path, sizeof(path)), DBGD_QUEUED);
	settle(f);
	dbgd_fetch__stats(f, &st);
	assert_int_equal(st.queued, 2);
	/* ids past 64 bytes are nobody's */
	assert_int_equal(dbgd_fetch__lookup(f, id, 0, 1, path, sizeof(path)), DBGD_NONE);
	dbgd_fetch__free(f);
}

/* Not started: nothing is answered, so the bounds show. */
static void test_bounds(void **state)
{
	struct dbgd_fetch_opts o = { .sz = sizeof(o), .max_pending = 8, .max_entries = 16 };
	struct dbgd_fetch *f = dbgd_fetch__new(&o);
	struct dbgd_fetch_stats st;
	char path[256];
	uint8_t id[20];
	int queued = 0, not_asked = 0;

	assert_non_null(f);
	for (uint32_t n = 0; n < 100; n++) {
		enum dbgd_state s;

		id_of(n, id);
		s = dbgd_fetch__lookup(f, id, 20, 1, path, sizeof(path));
		queued += s == DBGD_QUEUED;
		not_asked += s == DBGD_NOT_ASKED;
	}
	assert_int_equal(queued, 8);
	assert_int_equal(not_asked, 92);
	id_of(3, id);
	assert_int_equal(dbgd_fetch__lookup(f, id, 20, 1, path, sizeof(path)), DBGD_PENDING);
	dbgd_fetch__stats(f, &st);
	assert_int_equal(st.pending, 8);
	assert_int_equal(st.not_asked, 92);
	/* started now: the eight are answered, then the rest can be asked */
	assert_int_equal(dbgd_fetch__start(f), 0);
	settle(f);
	for (uint32_t n = 0; n < 100; n++) {
		id_of(n, id);
		dbgd_fetch__lookup(f, id, 20, 1, path, sizeof(path));
		settle(f);
	}
	dbgd_fetch__stats(f, &st);
	assert_int_equal(st.queued, 100);
	assert_true(st.forgotten > 0); /* 100 answers in a table of 16 */
	dbgd_fetch__free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup_never_waits),
		cmocka_unit_test(test_bounds),
	};

	/* a debuginfod that refuses connections: every answer is "none" */
	setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1", 1);
	setenv("DEBUGINFOD_CACHE_PATH", "/tmp/strata-test-dbgd-cache", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
